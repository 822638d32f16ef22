"""Axis transforms of a schedule's loop tree: `.split`, `.tile`, `.reorder`, `.fuse_axes` and
`.decompose` (docs/language.md section 8, docs/optimizer.md "Axis transforms").

Each function takes a lowered `Schedule` and returns it with its loop tree rewritten; lowering
applies them in the order the schedule writes them, at every -O level (they are the user's
request, not an optimisation). They change only the order in which tasks are enumerated: every
task keeps its kernel, coordinates and arguments, because the transformed variable is
substituted by its expression (`t` becomes `t_o*4 + t_i`) everywhere in the body and in the
schedule's keys, so `kernel[t]` still reports t and `affinity(t)` still places by t.

`split` and `fuse_axes` keep the enumeration order. `reorder`, `tile` and `decompose` change it;
since dependencies are inferred in enumeration order, swapping two tasks that touch an
overlapping part of a tensor one of them writes could change the result, so these prove first
that every pair of tasks whose order changes is independent (the argument of
`ir/independence.py`, extended to whole loop bodies) and raise `AxisError` otherwise. Bodies
that set slots or use CSP are refused for the same reason (slot values and channel items follow
enumeration order).

What this leaves alone: which loops a combinator may name and their nesting (the checker,
`frontend/workloads/schedule_axes.py`, guarantees it; a violation here is an `InternalError`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Optional

from .. import sym
from ..diagnostics import InternalError
from . import nodes as N
from .visit import children, map_lists, substitute, uses_csp, walk


class AxisError(Exception):
    """A transform that would change what the program computes: reported at the combinator."""

    def __init__(self, message: str, help: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.help = help


# ---------------------------------------------------------------------------------------------
# The transforms


def split(s: N.Schedule, axis: str, factor: int) -> N.Schedule:
    """`for axis in K(E)` becomes `for axis_o in K(ceildiv(E, f)) { for axis_i in
    K(min(f, E - axis_o*f)) { body[axis := axis_o*f + axis_i] } }` (K grid or seq): the same
    iterations in the same order."""
    o, i = f"{axis}_o", f"{axis}_i"

    def fn(lp: N.Loop) -> list:
        e = lp.extent
        c = sym.const_value(e)
        # decision: the inner loop runs min(f, E - o*f) times instead of testing a guard, so no
        # task is skipped by a `when` and a constant extent divisible by f needs neither
        inner_ext = (sym.const(factor) if c is not None and c % factor == 0
                     else sym.min_(factor, sym.sub(e, sym.mul(sym.var(o), factor))))
        body = substitute(lp.body, {axis: sym.add(sym.mul(sym.var(o), factor), sym.var(i))})
        inner = N.Loop(i, inner_ext, lp.kind, body)
        return [N.Loop(o, sym.ceildiv(e, factor), lp.kind, (inner,))]

    body = _map_named(s.body, axis, fn)
    return _rekey(s, body, {axis: sym.add(sym.mul(sym.var(o), factor), sym.var(i))})


def fuse_axes(s: N.Schedule, a: str, b: str) -> N.Schedule:
    """`for a in K(Ea) { for b in K(Eb) { body } }` becomes `for a_b in K(Ea*Eb) { body[a :=
    a_b / Eb, b := a_b % Eb] }`: the same iterations in the same order."""
    k = f"{a}_{b}"
    eb_seen: list[sym.Expr] = []

    def fn(lp: N.Loop) -> list:
        inner = _only_loop(lp, b, "fuse_axes")
        eb = inner.extent
        eb_seen.append(eb)
        if sym.const_value(eb) == 0:  # no iterations: keep the body's shape, never run
            env = {a: sym.const(0), b: sym.const(0)}
            return [N.Loop(k, sym.const(0), lp.kind, substitute(inner.body, env))]
        env = {a: sym.floordiv(sym.var(k), eb), b: sym.mod(sym.var(k), eb)}
        return [N.Loop(k, sym.mul(lp.extent, eb), lp.kind, substitute(inner.body, env))]

    body = _map_named(s.body, a, fn)
    eb = eb_seen[0]
    if sym.const_value(eb) == 0:
        return _rekey(s, body, {a: sym.const(0), b: sym.const(0)})
    return _rekey(s, body, {a: sym.floordiv(sym.var(k), eb), b: sym.mod(sym.var(k), eb)})


def reorder(s: N.Schedule, order: tuple[str, ...], what: str = "reorder") -> N.Schedule:
    """The perfect nest of the grid loops `order` (in any nesting order) rebuilt with `order[0]`
    outermost, after proving that no two tasks whose order changes conflict."""
    names = set(order)

    def fn(lp: N.Loop) -> list:
        chain = [lp]
        while len(chain) < len(order):
            cur = chain[-1]
            if not (len(cur.body) == 1 and isinstance(cur.body[0], N.Loop)
                    and cur.body[0].var in names):
                raise InternalError("axes", f"`.{what}`: `{cur.var}` does not perfectly nest "
                                            f"the other loops of {', '.join(order)}")
            chain.append(cur.body[0])
        by_name = {x.var: x for x in chain}
        if any(x.kind != "grid" for x in chain):
            raise InternalError("axes", f"`.{what}` of a `P.seq` loop")
        before = [x.var for x in chain]
        _prove_reorder(chain[-1].body, before, list(order), what)
        body = chain[-1].body
        for name in reversed(order):
            x = by_name[name]
            body = (N.Loop(x.var, x.extent, x.kind, body),)
        return list(body)

    body = _map_loops(s.body, lambda lp: lp.var in names, fn)
    return _rekey(s, body, {})


def tile(s: N.Schedule, a: str, b: str, fa: int, fb: int) -> N.Schedule:
    """Split `a` by fa and `b` by fb and order the four loops a_o, b_o, a_i, b_i."""
    s = split(split(s, a, fa), b, fb)
    return reorder(s, (f"{a}_o", f"{b}_o", f"{a}_i", f"{b}_i"), "tile")


def buckets(kind: str, width: Optional[int], n: int) -> list[tuple[Optional[int], Optional[int]]]:
    """The length ranges [lo, hi) of the buckets, in the order they are enumerated: longest
    first. None is unbounded (the shortest bucket also takes negative lengths, so the
    ragged axis's own check still reports them)."""
    if kind == "bucket":
        if width is None:
            raise InternalError("axes", "`.decompose` into buckets of no width")
        ranges = [(j * width, (j + 1) * width) for j in range(n)]
    else:  # pow2_bucket: [0, 2), [2, 4), [4, 8), ...
        ranges = [(0 if j == 0 else 1 << j, 1 << (j + 1)) for j in range(n)]
    ranges[0] = (None, ranges[0][1])
    ranges[-1] = (ranges[-1][0], None)
    # decision: buckets are enumerated longest first (the LPT rule: long rows start early, short
    # ones fill the tail); within a bucket the original order is kept
    return list(reversed(ranges))


def decompose(s: N.Schedule, axis: str, ranges) -> N.Schedule:
    """The loop over the outer index of the ragged loop `axis` is enumerated once per bucket of
    `ranges` (from `buckets`), each pass running the iterations whose length falls in that
    bucket: `combine { for b in P(B) { len' = ...; when lo <= len' < hi { body } } ... }`."""
    path = _path(s.body, axis)
    if path is None:
        raise InternalError("axes", f"`.decompose`: no loop `{axis}`")
    ragged = path[-1][0][path[-1][1]]
    # the Reads that define the length, from the lists along the path
    need = set(sym.free_vars(ragged.extent))
    reads: list[N.Read] = []
    for stmts, idx in reversed(path):
        for st in reversed(stmts[:idx]):
            if isinstance(st, N.Read) and st.var in need:
                reads.insert(0, st)
                need |= {v for e in st.index for v in sym.free_vars(e)}
    loops = [stmts[idx] for stmts, idx in path[:-1]]
    outer_i = max((k for k, lp in enumerate(loops) if isinstance(lp, N.Loop) and lp.var in need),
                  default=None)
    if outer_i is None:
        raise AxisError(f"the length of the ragged loop `{axis}` depends on no loop around it, "
                        "so there is nothing to decompose")
    outer = loops[outer_i]
    between = loops[outer_i + 1:]
    for st in between:
        if not isinstance(st, N.Loop):
            raise AxisError(f"`{axis}` lies inside a `when` or block of `{outer.var}`'s body: "
                            "`.decompose` needs only loops between the two")
    inner_vars = {lp.var for lp in between}
    if outer.kind != "grid":
        raise InternalError("axes", f"`.decompose` of the `P.seq` loop `{outer.var}`")
    for r in reads:
        deps = {v for e in r.index for v in sym.free_vars(e)} & inner_vars
        if deps:
            raise AxisError(f"the length of `{axis}` reads `{r.tensor}` at an index that depends "
                            f"on `{sorted(deps)[0]}`, a loop inside `{outer.var}`")
    # only reads made inside the outer loop are repeated (the others are still in scope)
    first = {id(st) for st in walk(outer.body)}
    reads = [r for r in reads if id(r) in first]
    _prove_each(outer.body, outer.var, "decompose")
    counter = [_max_read_number(s.body)]

    def fn(lp: N.Loop) -> list:
        passes = []
        for lo, hi in ranges:
            env: dict[str, sym.Expr] = {}
            copies = []
            for r in reads:
                counter[0] += 1
                name = re.sub(r"@\d+$", "", r.var) + f"@{counter[0]}"
                copies.append(replace(r, var=name, index=substitute(r.index, env)))
                env[r.var] = sym.var(name)
            length = substitute(ragged.extent, env)
            conds = []
            if lo is not None:
                conds.append(N.Cond(">=", (length, sym.const(lo))))
            if hi is not None:
                conds.append(N.Cond("<", (length, sym.const(hi))))
            cond = (conds[0] if len(conds) == 1 else N.Cond("and", tuple(conds)) if conds
                    else N.Cond("const", (True,)))
            body = tuple(copies) + (N.When(((cond, lp.body),)),)
            passes.append(N.Loop(lp.var, lp.extent, lp.kind, body))
        return [N.Block("combine", tuple(passes))]

    body = _map_loops(s.body, lambda lp: lp is outer, fn)
    return _rekey(s, body, {})


# ---------------------------------------------------------------------------------------------
# Finding loops


def _map_loops(stmts, match: Callable[[N.Loop], bool], fn) -> tuple:
    """`stmts` with every outermost Loop that `match`es replaced by the statements `fn` gives."""
    out = []
    for st in stmts:
        if isinstance(st, N.Loop) and match(st):
            out.extend(fn(st))
        else:
            out.append(map_lists(st, lambda body: _map_loops(body, match, fn)))
    same = len(out) == len(stmts) and all(a is b for a, b in zip(out, stmts))
    return stmts if same else tuple(out)


def _map_named(stmts, name: str, fn) -> tuple:
    count = [0]

    def counted(lp):
        count[0] += 1
        return fn(lp)

    out = _map_loops(stmts, lambda lp: lp.var == name, counted)
    if not count[0]:
        raise InternalError("axes", f"no loop `{name}` in the schedule's loop tree")
    return out


def _only_loop(lp: N.Loop, name: str, what: str) -> N.Loop:
    if len(lp.body) == 1 and isinstance(lp.body[0], N.Loop) and lp.body[0].var == name:
        inner = lp.body[0]
        if lp.var not in sym.free_vars(inner.extent):
            return inner
    raise InternalError("axes", f"`.{what}`: `{lp.var}` and `{name}` are not perfectly nested")


def _path(stmts, name: str, path=()):
    """[(statement list, index)] from the root down to the first Loop `name`."""
    for i, st in enumerate(stmts):
        here = path + ((stmts, i),)
        if isinstance(st, N.Loop) and st.var == name:
            return list(here)
        for body in children(st):
            got = _path(body, name, here)
            if got is not None:
                return got
    return None


def _rekey(s: N.Schedule, body, env: dict) -> N.Schedule:
    """The schedule with a new body, its keys over the new loop variables."""
    return replace(s, body=tuple(body), dispatch=substitute(s.dispatch, env),
                   stream_by=substitute(s.stream_by, env) if s.stream_by is not None else None,
                   trace_cost=(substitute(s.trace_cost, env) if s.trace_cost is not None
                               else None))


def _max_read_number(stmts) -> int:
    out = 0
    for st in walk(stmts):
        if isinstance(st, N.Read):
            m = re.search(r"@(\d+)$", st.var)
            if m:
                out = max(out, int(m.group(1)))
    return out


# ---------------------------------------------------------------------------------------------
# Order proofs


def _accesses(stmts, what: str):
    """Every tensor box the tasks and reads of `stmts` touch, as (tensor, mode, offsets,
    extents), and the variables bound inside."""
    boxes, bound = [], set()
    for st in walk(stmts):
        if isinstance(st, N.Task):
            for a in st.args:
                if isinstance(a, N.TileArg):
                    boxes.append((a.tensor, a.mode, a.offsets, a.box_extents))
            for a in st.extra:
                boxes.append((a.tensor, a.mode, a.offsets, a.extents))
        elif isinstance(st, N.Read):
            boxes.append((st.tensor, "r", st.index, (1,) * len(st.index)))
            bound.add(st.var)
        elif isinstance(st, N.Loop):
            bound.add(st.var)
        elif isinstance(st, N.SlotSet):
            raise AxisError(f"`.{what}` would change the order of the `slot_set`s in its loops, "
                            "and slot values follow enumeration order")
    if uses_csp(stmts):
        raise AxisError(f"`.{what}` would change the order of CSP statements (channel items and "
                        "events follow enumeration order)")
    return boxes, bound


def _separated(boxes, v: str, varying: set) -> bool:
    """Every two boxes of iterations with different `v` (and any values of `varying`) are
    disjoint: some dimension's offset is `c*v + base` in all of them, with one constant c, one
    base free of `varying`, and a constant extent no larger than |c|."""
    ndim = len(boxes[0][2])
    for d in range(ndim):
        step = base = None
        for _, _, offs, exts in boxes:
            off = sym.as_expr(offs[d])
            st = sym.const_value(sym.substitute(off, {v: sym.add(sym.var(v), 1)}) - off)
            if not st:
                break
            b = sym.simplify(off - sym.mul(sym.var(v), st))
            fv = sym.free_vars(b)
            if v in fv or fv & varying or any(N.slot_index(x) is not None for x in fv):
                break
            w = sym.const_value(sym.as_expr(exts[d]))
            if w is None or not 0 <= w <= abs(st):
                break
            if step is None:
                step, base = st, sym.to_str(b)
            elif st != step or sym.to_str(b) != base:
                break
        else:
            return True
    return False


def _written(boxes) -> dict:
    by_tensor: dict[str, list] = {}
    for box in boxes:
        by_tensor.setdefault(box[0], []).append(box)
    return {t: bs for t, bs in by_tensor.items() if any(b[1] != "r" for b in bs)}


def _conflict(what: str, tensor: str, names: list[str]) -> AxisError:
    ns = " and ".join(f"`{n}`" for n in names)
    return AxisError(
        f"`.{what}` could change the result: tasks of different iterations of {ns} may touch "
        f"overlapping parts of `{tensor}`, which one of them writes, and their order would change",
        "transforms that change the enumeration order need the tasks they reorder to touch "
        "disjoint parts of every tensor they write (e.g. `Y[b, t]` in loops over b and t)")


def _prove_reorder(body, before: list[str], after: list[str], what: str) -> None:
    """Two iterations swap order only if their first differing variable in `before` (u) differs
    from the first in `after` (v); (u, v) is then an inversion and both differ, so it is enough
    that every written tensor is separated by u or by v, with the variables ahead of u in
    `before` and of v in `after` equal."""
    boxes, bound = _accesses(body, what)
    written = _written(boxes)
    pos = {n: i for i, n in enumerate(after)}
    for i, u in enumerate(before):
        for v in before[i + 1:]:
            if pos[v] > pos[u]:
                continue
            fixed = set(before[:i]) | set(after[:pos[v]])
            varying = (set(before) - fixed) | bound
            for t, bs in written.items():
                if not (_separated(bs, u, varying) or _separated(bs, v, varying)):
                    raise _conflict(what, t, [u, v])


def _prove_each(body, var: str, what: str) -> None:
    """Any two iterations of the loop over `var` may swap: each written tensor is separated
    by `var`."""
    boxes, bound = _accesses(body, what)
    for t, bs in _written(boxes).items():
        if not _separated(bs, var, bound | {var}):
            raise _conflict(what, t, [var])
