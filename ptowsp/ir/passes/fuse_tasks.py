"""fuse_tasks: a producer task and its consumer over the same iteration space become one task
(the seeds' v7.1 `fuse_by_category`, with TVM's operator categories).

Two rewrites, both inside one statement list (a loop body, a `combine`, a branch, the schedule):

- Loop fusion. Two adjacent perfect nests of `grid` loops with the same extents at every level
  (after renaming the second nest's variables to the first's) become one nest running both
  bodies, when every dependency between them is iteration-local: each pair of accesses of one
  tensor, one of them a write, one from each body, names the same box, and that box moves by at
  least its extent along some dimension whenever any nest variable changes (so two different
  iterations never touch each other's boxes; `ir/independence.py`'s argument). A level may
  start with the same element reads and asserts in both nests (a ragged extent), when no task
  of either nest writes the tensor read: the fused level keeps the first's. It is kept only
  when it lets tasks fuse (a nest around one task is what the runtime batches as independent;
  two unfused tasks there would lose that).
- Task fusion. Task A writes box X[..] of a scratch tensor that a later task B of the same list
  reads with exactly the same box and tile shape, and nothing else in the schedule touches X
  (no other task, element read or slot access): one task runs a new kernel made of A's ops, then
  B's ops with B's `param` of X replaced by A's stored value, converted and broadcast as the
  store would (an f16/bf16 value is rounded by `convert` to f32 and back, exactly as the store
  and the load round it, so results stay bit-identical). X's traffic disappears, and X itself
  once no task uses it. Reads of the same box by A and B become one parameter.

Whether a pair may fuse is decided by the kernels' categories (`category`: the most demanding
of their ops' categories, which the primitive table gives) through `FusionConfig.rule`; the
fused kernel is named `A__B` (source `a+b`) and records why in `Kernel.fused`, which the
printer shows as `# fused: gate (complex-out-fusable) -> down (complex-out-fusable) via H
[whole tile]`.

Leaves alone:
- an intermediate that is read anywhere else, read twice, is not scratch (an output or inout) or
  is written through an InOut parameter: fusing would have to keep the store, so the traffic
  stays and only a task would be saved; not worth the longer dependency chains (a decision);
- schedules using CSP; `sequential` blocks (the program asked for that order);
- tasks with slot accesses (`extra`) or gather views (their rows are data, not a box); extern
  kernels (opaque: no ops to splice);
- tasks and loop bodies whose run-time view checks could report differently: a check on the
  intermediate, and every check of B (of the second loop body), must repeat a check that is
  always evaluated first (A's earlier arguments; a task directly in the first body), so the
  first error is the same one at the same span (the task's text in it is the fused task's).
  After an error, the partial outputs may hold more or less of the other work;
- loop bodies holding anything but loops, blocks and tasks (reads, asserts, `when`, slots),
  and moves of a task past such statements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ... import sym
from ...dtypes import HALF_DTYPES
from ...primitives import (
    BROADCAST,
    COMPLEX,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OPS,
    REDUCTION,
    VALID_OPS,
)
from .. import nodes as N
from ..independence import _separates  # the disjointness argument of batched nests
from ..visit import map_lists, map_schedules, substitute, tasks, walk

# ---------------------------------------------------------------------------------------------
# Categories and the policy

_RANK = {INJECTIVE: 0, BROADCAST: 1, REDUCTION: 2, COMPLEX: 3, OPAQUE: 4}


def category(k: N.Kernel) -> str:
    """The kernel's category: that of its most demanding op (TVM's `OpPatternKind` order)."""
    if k.is_extern or k.cycles is not None:  # a per-task cycle addend is the task's own
        return OPAQUE
    worst = INJECTIVE
    for op in k.ops:
        c = _op_category(op, k.ops)
        if _RANK[c] > _RANK[worst]:
            worst = c
    params = {p.name: p for p in k.params}
    for name, idx in k.stores:  # a store broadcasts its value to the tile
        p = params[name]
        if k.ops[idx].shape not in (None, (p.rows, p.cols)) and _RANK[worst] < _RANK[BROADCAST]:
            worst = BROADCAST
    return worst


def _op_category(op: N.Op, ops) -> str:
    """The op's category in the primitive table; an elementwise op is a broadcast when one of
    its operands is repeated to its shape."""
    spec = OPS.get(op.op)
    if spec is None:
        return OPAQUE
    if spec.fusion == ELEMWISE:
        if any(ops[a].shape is not None and ops[a].shape != op.shape for a in op.args):
            return BROADCAST
        return INJECTIVE
    return spec.fusion


@dataclass(frozen=True)
class FusionConfig:
    """Which producer -> consumer pairs fuse (the seeds' `FusionConfig`).

    | producer \\ consumer      | injective, broadcast | reduction, complex-out-fusable |
    |--------------------------|----------------------|--------------------------------|
    | injective, broadcast     | yes (`injective`)    | yes (`injective`)              |
    | reduction                | yes (`epilogue`)     | `whole_tiles` (`whole tile`)   |
    | complex-out-fusable      | yes (`epilogue`)     | `whole_tiles` (`whole tile`)   |
    | opaque, or into opaque   | never                | never                          |

    The first three columns are TVM's rules. `whole_tiles` goes further on purpose: TVM fuses
    operators into one loop nest, where a matmul or reduction consumer would have to recompute
    or re-tile its producer; here the intermediate is one whole tile the fused kernel computes
    once and keeps (the C back end materialises it in a local array), so the only cost is a
    larger kernel, and a matmul feeding a matmul saves the round trip through memory.
    `max_fused_ops` caps how many source kernels (the seeds' operators) one fused kernel holds.
    """

    fuse_injective_chains: bool = True
    fuse_broadcast: bool = True
    fuse_to_complex_out: bool = True
    fuse_reduction: bool = True
    whole_tiles: bool = True
    max_fused_ops: int = 8

    def rule(self, producer: str, consumer: str) -> Optional[str]:
        """The rule letting `producer` fuse into `consumer`, or None."""
        if OPAQUE in (producer, consumer):
            return None
        if producer == INJECTIVE:
            return "injective" if self.fuse_injective_chains else None
        if producer == BROADCAST:
            return "injective" if self.fuse_injective_chains and self.fuse_broadcast else None
        if consumer in (INJECTIVE, BROADCAST):
            ok = self.fuse_to_complex_out if producer == COMPLEX else self.fuse_reduction
            return "epilogue" if ok else None
        return "whole tile" if self.whole_tiles else None


DEFAULT_CONFIG = FusionConfig()


def fuse_tasks(m: N.Module, config: FusionConfig = DEFAULT_CONFIG) -> N.Module:
    """Producer / consumer tasks over one iteration space fused, by operator category."""
    f = _Fuser(m, config)
    out = map_schedules(m, f.schedule)
    if out is m:
        return m
    return _tidy(out, f)


# ---------------------------------------------------------------------------------------------
# Helpers


def _key(e) -> str:
    return sym.to_str(sym.as_expr(e))


def _box(a: N.TileArg) -> tuple:
    return (a.tensor, tuple(_key(e) for e in a.offsets), tuple(_key(e) for e in a.extents),
            a.row_dim, a.col_dim, a.steps)


def _check_key(vc: N.ViewCheck) -> tuple:
    return (_key(vc.check.lhs), vc.check.op, _key(vc.check.rhs))


def _tiles(t: N.Task) -> list[N.TileArg]:
    return [a for a in t.args if isinstance(a, N.TileArg)]


def _accesses(stmts) -> tuple[set, set]:
    """(tensors read, tensors written) by the tasks of `stmts`."""
    r, w = set(), set()
    for t in tasks(stmts):
        for a in _tiles(t):
            (r if a.mode == "r" else w).add(a.tensor)
            if a.mode == "rw":
                r.add(a.tensor)
        for x in t.extra:
            (r if x.mode == "r" else w).add(x.tensor)
    return r, w


def _conflict(s1, s2) -> bool:
    """Whether some task of `s1` and some task of `s2` touch a tensor one of them writes."""
    r1, w1 = _accesses(s1)
    r2, w2 = _accesses(s2)
    return bool(w1 & (r2 | w2) or w2 & r1)


def _plain(stmts) -> bool:
    """Only loops, blocks and tasks without slot accesses: nothing enumeration reads or checks."""
    for st in walk(stmts):
        if isinstance(st, N.Task):
            if st.extra or _gathers(st):
                return False
        elif not isinstance(st, (N.Loop, N.Block)):
            return False
    return True


def _gathers(t: N.Task) -> bool:
    return any(a.gather is not None for a in _tiles(t))


def _has_checks(stmts) -> bool:
    return any(a.checks for t in tasks(stmts) for a in _tiles(t))


def _counts(stmts) -> dict[str, int]:
    """How many places of the tree touch each tensor (tile arguments, slot accesses, reads)."""
    n: dict[str, int] = {}
    for st in walk(stmts):
        if isinstance(st, N.Task):
            for a in _tiles(st):
                n[a.tensor] = n.get(a.tensor, 0) + 1
            for x in st.extra:
                n[x.tensor] = n.get(x.tensor, 0) + 1
        elif isinstance(st, N.Read):
            n[st.tensor] = n.get(st.tensor, 0) + 1
    return n


def _bound(stmts) -> set[str]:
    return {st.var for st in walk(stmts) if isinstance(st, N.Loop)}


def _free(stmts) -> set[str]:
    out: set[str] = set()
    for st in walk(stmts):
        if isinstance(st, N.Loop):
            out |= sym.free_vars(st.extent)
        elif isinstance(st, N.Task):
            exprs = list(st.coords)
            for a in st.args:
                if isinstance(a, N.TileArg):
                    exprs += [*a.offsets, *a.extents]
                    exprs += [e for c in a.checks for e in (c.check.lhs, c.check.rhs)]
                elif isinstance(a.value, sym.Expr):
                    exprs.append(a.value)
            for e in exprs:
                out |= sym.free_vars(e)
    return out


def _same_prelude(body_a, body_b, mapping: dict, l1, l2) -> Optional[list]:
    """When both loop bodies are one loop after the same element reads and asserts (a ragged
    extent: `read n = lens[b]; assert n >= 0; for t in grid(n)`), the pairs of read variables
    (first nest's, second's); else None. "The same" is after renaming the second's loop and
    read variables to the first's, with every read's tensor written by no task of either nest:
    then the second read gives the first's value, and its asserts and checks fail exactly
    when the first's do, which run first (so the first error is the same one)."""
    if not (body_a and body_b and len(body_a) == len(body_b) and isinstance(body_a[-1], N.Loop)
            and isinstance(body_b[-1], N.Loop)):
        return None
    pairs: list = []
    local = dict(mapping)
    written = _accesses([l1])[1] | _accesses([l2])[1]
    for sa, sb in zip(body_a[:-1], body_b[:-1]):
        if isinstance(sa, N.Read) and isinstance(sb, N.Read):
            if sa.tensor != sb.tensor or sa.tensor in written or len(sa.index) != len(sb.index):
                return None
            if any(_key(x) != _key(sym.substitute(y, local)) for x, y in zip(sa.index, sb.index)):
                return None
            if [_check_key(c) for c in sa.checks] != [_subst_check_key(c, local) for c in sb.checks]:
                return None
            pairs.append((sa.var, sb.var))
            local[sb.var] = sym.var(sa.var)
        elif isinstance(sa, N.Assert) and isinstance(sb, N.Assert):
            if _check_key(sa.check) != _subst_check_key(sb.check, local):
                return None
        else:
            return None
    return pairs


def _subst_check_key(vc: N.ViewCheck, mapping: dict) -> tuple:
    return (_key(sym.substitute(sym.as_expr(vc.check.lhs), mapping)), vc.check.op,
            _key(sym.substitute(sym.as_expr(vc.check.rhs), mapping)))


# ---------------------------------------------------------------------------------------------
# The rewrite


class _Fuser:
    def __init__(self, m: N.Module, config: FusionConfig):
        self.config = config
        self.kernels: dict[str, N.Kernel] = {k.name: k for k in m.kernels}
        self.new: list[N.Kernel] = []  # fused kernels, in the order made
        self.made: dict[tuple, str] = {}  # one fused kernel per distinct fusion
        self.scratch = {t.name for t in m.tensors if t.kind == "scratch"}
        self.scratch -= {c.slots for c in m.channels if c.slots}
        self.scratch -= {c.marks for c in m.channels if c.marks}
        self.fused_away: set[str] = set()  # intermediates whose accesses are gone
        self.counts: dict[str, int] = {}
        self.key_vars: set[str] = set()

    def schedule(self, s: N.Schedule) -> tuple:
        if s.uses_csp:
            return s.body
        # variables the schedule's keys name: a loop binding one keeps its name
        self.key_vars = set()
        for e in (*s.dispatch.args, s.stream_by, s.trace_cost):
            if isinstance(e, sym.Expr):
                self.key_vars |= sym.free_vars(e)
        body = s.body
        while True:
            # counts only fall as fusion proceeds, so stale counts are merely conservative
            self.counts = _counts(body)
            new = self.stmts(body)
            if new is body:
                return body
            body = new

    # -- statement lists

    def stmts(self, stmts: tuple, ordered: bool = False) -> tuple:
        """`stmts` with its children rewritten, then fused within (unless `ordered`)."""
        out = []
        changed = False
        for st in stmts:
            new = self.stmt(st)
            changed |= new is not st
            out.append(new)
        if not ordered:
            fused = self.fuse_list(out)
            changed |= fused is not None
            out = fused if fused is not None else out
        return tuple(out) if changed else stmts

    def stmt(self, st):
        if isinstance(st, N.CSP_STMTS):
            return st  # never entered (a CSP schedule is left alone as a whole)
        ordered = isinstance(st, N.Block) and st.kind == "sequential"
        return map_lists(st, lambda body: self.stmts(body, ordered=ordered))

    def fuse_list(self, stmts: list) -> Optional[list]:
        """`stmts` after every loop and task fusion found, or None when there is none."""
        stmts = list(stmts)
        any_change = False
        progress = True
        while progress:
            progress = False
            for i in range(len(stmts) - 1):
                nest = self.fuse_loops(stmts[i], stmts[i + 1])
                if nest is not None:
                    stmts[i:i + 2] = [nest]
                    progress = True
                    break
            if progress:
                any_change = True
                continue
            for j in range(len(stmts)):
                for i in range(j - 1, -1, -1):
                    done = self.fuse_pair(stmts, i, j)
                    if done is not None:
                        stmts = done
                        progress = True
                        break
                if progress:
                    break
            any_change |= progress
        return stmts if any_change else None

    # -- loop fusion

    def fuse_loops(self, l1, l2) -> Optional[N.Loop]:
        levels: list[tuple[N.Loop, N.Loop]] = []
        preludes: list[tuple] = []  # per level but the last: the first nest's reads and asserts
        mapping: dict = {}
        read_vars: dict = {}  # the second nest's read variables -> the first's
        a, b = l1, l2
        while (isinstance(a, N.Loop) and isinstance(b, N.Loop) and a.kind == b.kind == "grid"
               and _key(a.extent) == _key(sym.substitute(b.extent, mapping))):
            levels.append((a, b))
            if a.var != b.var:
                mapping[b.var] = sym.var(a.var)
            pre = _same_prelude(a.body, b.body, mapping, l1, l2)
            if pre is None:
                break
            preludes.append(a.body[:-1])
            for ra, rb in pre:
                read_vars[rb] = sym.var(ra)
                mapping[rb] = sym.var(ra)
            a, b = a.body[-1], b.body[-1]
        if not levels:
            return None
        # a deeper pair that did not match ends the nest one level up
        last_a, last_b = levels[-1]
        # (the last level's own reads, if any, stay in its body, which then is not plain)
        del preludes[len(levels) - 1:]
        mapping = {lb.var: sym.var(la.var) for la, lb in levels if la.var != lb.var}
        mapping.update(read_vars)
        s1, s2 = last_a.body, last_b.body
        if not (_plain(s1) and _plain(s2)):
            return None
        nest_vars = [la.var for la, _ in levels]
        inner2 = _bound(s2)
        if any(v in inner2 for v in nest_vars):
            return None  # renaming would capture an inner variable
        free2 = _free(s2)
        if any(la.var != lb.var and (la.var in free2 or lb.var in self.key_vars)
               for la, lb in levels):
            return None
        s2 = substitute(s2, mapping)
        reads = [st.var for p in preludes for st in p if isinstance(st, N.Read)]
        if not self._loop_legal(s1, s2, nest_vars, reads):
            return None
        body = list(s1) + list(s2)
        fused = self.fuse_list(body)
        before = len(tasks(s1)) + len(tasks(s2))
        if fused is None or len(tasks(fused)) >= before:
            return None  # no task fused: keep the nests (each may be an independent batch)
        inner: N.Stmt = replace(last_a, body=tuple(fused))
        for (la, _), pre in reversed(list(zip(levels[:-1], preludes))):
            inner = replace(la, body=(*pre, inner))
        return inner

    def _loop_legal(self, s1, s2, nest_vars: list[str], reads: list[str] = ()) -> bool:
        # the checks of the second body repeat checks the first body's own tasks make first
        first = {_check_key(c) for st in s1 if isinstance(st, N.Task) for a in _tiles(st)
                 for c in a.checks}
        if any(_check_key(c) not in first for t in tasks(s2) for a in _tiles(t)
               for c in a.checks):
            return False
        # a read variable varies with the nest too: a box moving with it is not separated
        all_vars = set(nest_vars) | set(reads) | _bound(s1) | _bound(s2)
        t1s, t2s = tasks(s1), tasks(s2)
        for t1 in t1s:
            for a1 in _tiles(t1):
                for t2 in t2s:
                    for a2 in _tiles(t2):
                        if a1.tensor != a2.tensor or a1.mode == a2.mode == "r":
                            continue
                        if _box(a1) != _box(a2):
                            return False
                        if not all(_separates(a1, v, list(all_vars)) for v in nest_vars):
                            return False
        return True

    # -- task fusion

    def fuse_pair(self, stmts: list, i: int, j: int) -> Optional[list]:
        ta, tb = stmts[i], stmts[j]
        if (not (isinstance(ta, N.Task) and isinstance(tb, N.Task)) or ta.extra or tb.extra
                or _gathers(ta) or _gathers(tb) or ta.device != tb.device):
            return None  # (tasks of two devices never fuse: the fused task runs on one)
        ka, kb = self.kernels[ta.kernel], self.kernels[tb.kernel]
        ca, cb = category(ka), category(kb)
        rule = self.config.rule(ca, cb)
        if rule is None or _sources(ka) + _sources(kb) > self.config.max_fused_ops:
            return None
        link = self._link(ta, tb, ka, kb)
        if link is None:
            return None
        xa, xb = link
        between = stmts[i + 1:j]
        if between and not _plain(between):
            return None
        task = self._fused_task(ta, tb, ka, kb, xa, xb, ca, cb, rule)
        if task is None:
            return None
        if not between:
            return stmts[:i] + [task] + stmts[j + 1:]
        # the fused task takes B's place (A moves later) or A's place (B moves earlier)
        if not _conflict([ta], between) and not (_has_checks([ta]) and _has_checks(between)):
            return stmts[:i] + list(between) + [task] + stmts[j + 1:]
        if not _conflict([tb], between):
            return stmts[:i] + [task] + list(between) + stmts[j + 1:]
        return None

    def _link(self, ta: N.Task, tb: N.Task, ka: N.Kernel, kb: N.Kernel):
        """(A's argument, B's argument) of the intermediate, or None when there is none."""
        pa = {p.name: p for p in ka.params}
        pb = {p.name: p for p in kb.params}
        # decision: tasks with a partial view, or kernels reading valid_rows/valid_cols, are not
        # fused: the intermediate's padding and the extents belong to each task's own view
        if any(a.is_partial for a in _tiles(ta) + _tiles(tb)) or any(
                op.op in VALID_OPS for op in ka.ops + kb.ops):
            return None
        for xa in _tiles(ta):
            x = xa.tensor
            if xa.mode != "w" or x not in self.scratch or self.counts.get(x) != 2:
                continue
            reads = [a for a in _tiles(tb) if a.tensor == x]
            if len(reads) != 1 or reads[0].mode != "r" or _box(reads[0]) != _box(xa):
                continue
            xb = reads[0]
            p, q = pa[xa.param], pb[xb.param]
            if (p.dtype, p.rows, p.cols) != (q.dtype, q.rows, q.cols) or p.mode != "Out":
                continue
            # nothing else of A's writes reaches B, nor B's writes A
            wa = {a.tensor for a in _tiles(ta) if a.mode != "r"} - {x}
            ra = {a.tensor for a in _tiles(ta)}
            if wa & {a.tensor for a in _tiles(tb)}:
                continue
            if {a.tensor for a in _tiles(tb) if a.mode != "r"} & ra:
                continue
            if not self._checks_ok(ta, tb, xa):
                continue
            return xa, xb
        return None

    def _checks_ok(self, ta: N.Task, tb: N.Task, xa: N.TileArg) -> bool:
        """The checks dropped with the intermediate, and B's checks, never fire first."""
        earlier: set = set()
        for a in _tiles(ta):
            if a is xa:
                if any(_check_key(c) not in earlier for c in a.checks):
                    return False
                continue
            earlier.update(_check_key(c) for c in a.checks)
        return all(_check_key(c) in earlier for a in _tiles(tb) for c in a.checks)

    def _fused_task(self, ta, tb, ka, kb, xa, xb, ca, cb, rule) -> Optional[N.Task]:
        # B's arguments: the intermediate goes, a read A makes too is shared, others are renamed
        a_args = [a for a in ta.args if a is not xa]
        a_params = {p.name for p in ka.params if p.name != xa.param}  # the ones kept
        taken = a_params | {p.name for p in kb.params}
        pa = {p.name: p for p in ka.params}
        pb = {p.name: p for p in kb.params}
        rename: dict[str, str] = {}
        shared: dict[str, str] = {}
        b_args = []
        for a in tb.args:
            if a is xb:
                continue
            twin = None
            for o in a_args:
                if isinstance(a, N.TileArg) and isinstance(o, N.TileArg):
                    if a.mode == o.mode == "r" and _box(a) == _box(o) and \
                            _pshape(pa[o.param]) == _pshape(pb[a.param]):
                        twin = o
                elif isinstance(a, N.ScalarArg) and isinstance(o, N.ScalarArg):
                    if a.dtype == o.dtype and _value_key(a.value) == _value_key(o.value) and \
                            _pshape(pa[o.param]) == _pshape(pb[a.param]):
                        twin = o
                if twin is not None:
                    break
            if twin is not None:
                shared[a.param] = twin.param
                continue
            name = a.param
            if name in a_params:
                k = 2
                while f"{name}_{k}" in taken:
                    k += 1
                name = f"{name}_{k}"
                taken.add(name)
            rename[a.param] = name
            if isinstance(a, N.TileArg):
                b_args.append(replace(a, param=name, checks=()))  # B's checks repeat A's
            else:
                b_args.append(replace(a, param=name))
        key = (ka.name, kb.name, xa.param, xb.param, tuple(sorted(shared.items())),
               tuple(sorted(rename.items())))
        name = self.made.get(key)
        if name is None:
            k = _splice(ka, kb, xa.param, xb.param, rename, shared)
            name = f"{ka.name}__{kb.name}"
            while name in self.kernels:
                name += "_"
            note = f"{ka.source} ({ca}) -> {kb.source} ({cb}) via {xa.tensor} [{rule}]"
            k = replace(k, name=name, fused=ka.fused + kb.fused + (note,))
            self.kernels[name] = k
            self.new.append(k)
            self.made[key] = name
        self.fused_away.add(xa.tensor)
        # on a mesh both run on one device: the intermediate's box, which they share, starts
        # with the device index (ir/devices.py)
        return N.Task(name, ta.coords, tuple(a_args) + tuple(b_args), f"{ta.text} + {tb.text}",
                      ta.span, device=ta.device)


def _sources(k: N.Kernel) -> int:
    return len(k.fused) + 1


def _pshape(p: N.KParam) -> tuple:
    return (p.kind, p.dtype, p.mode, p.rows, p.cols)


def _value_key(v):
    return ("e", _key(v)) if isinstance(v, sym.Expr) else ("c", type(v).__name__, v)


def _splice(ka: N.Kernel, kb: N.Kernel, xa: str, xb: str, rename: dict, shared: dict) -> N.Kernel:
    """A's ops, then B's with B's parameter `xb` reading A's value stored to `xa`."""
    ops = list(ka.ops)
    stored = dict(ka.stores)[xa]
    pxa = next(p for p in ka.params if p.name == xa)

    def emit(op: N.Op) -> int:
        ops.append(op)
        return len(ops) - 1

    def as_stored() -> int:
        # what B would load: the value converted to the parameter's dtype, rounded as the
        # store rounds f16/bf16 (convert to f32 and back: both back ends round exactly there),
        # broadcast to the tile
        v = stored
        dt = pxa.dtype
        if ops[v].dtype != dt:
            v = emit(N.Op("convert", (v,), ops[v].shape, dt))
        elif dt in HALF_DTYPES and not _exact(ops[v], dt):
            v = emit(N.Op("convert", (v,), ops[v].shape, "f32"))
            v = emit(N.Op("convert", (v,), ops[v].shape, dt))
        if ops[v].shape != (pxa.rows, pxa.cols):
            v = emit(N.Op("broadcast", (v,), (pxa.rows, pxa.cols), dt))
        return v

    a_param_op = {op.attr: i for i, op in enumerate(ka.ops) if op.op in ("param", "scalar_param")}
    index: dict[int, int] = {}
    x_value: Optional[int] = None
    for i, op in enumerate(kb.ops):
        if op.op == "param" and op.attr == xb:
            if x_value is None:
                x_value = as_stored()
            index[i] = x_value
        elif op.op in ("param", "scalar_param") and op.attr in shared:
            a = shared[op.attr]
            index[i] = a_param_op[a] if a in a_param_op else emit(replace(op, attr=a))
        elif op.op in ("param", "scalar_param"):
            index[i] = emit(replace(op, attr=rename.get(op.attr, op.attr)))
        else:
            index[i] = emit(replace(op, args=tuple(index[a] for a in op.args)))
    params = tuple(p for p in ka.params if p.name != xa) + tuple(
        replace(p, name=rename[p.name]) for p in kb.params if p.name in rename)
    stores = tuple(s for s in ka.stores if s[0] != xa) + tuple(
        (rename[n], index[i]) for n, i in kb.stores)
    return N.Kernel(ka.name, f"{ka.source}+{kb.source}", params, tuple(ops), stores,
                    span=ka.span)


def _exact(op: N.Op, dtype: str) -> bool:
    """Whether the value is one of `dtype` already (rounded): a load, a literal, a conversion."""
    return op.dtype == dtype and OPS[op.op].rounded


def _tidy(m: N.Module, f: _Fuser) -> N.Module:
    """The fused kernels added; then the kernels fusion consumed that no task calls any more,
    and the intermediates no task touches any more, dropped (only those: what was unused
    before is dead-tasks' business)."""
    used_k: set[str] = set()
    used_t: set[str] = set()
    for s in m.schedules:
        for st in walk(s.body):
            if isinstance(st, N.Task):
                used_k.add(st.kernel)
                used_t.update(a.tensor for a in _tiles(st))
                used_t.update(x.tensor for x in st.extra)
            elif isinstance(st, N.Read):
                used_t.add(st.tensor)
    consumed = {name for key in f.made for name in key[:2]}
    kernels = tuple(k for k in m.kernels if k.name in used_k or k.name not in consumed)
    kernels += tuple(k for k in f.new if k.name in used_k)
    tensors = tuple(t for t in m.tensors if t.name in used_t or t.name not in f.fused_away)
    return replace(m, kernels=kernels, tensors=tensors)


__all__ = ["fuse_tasks", "FusionConfig", "DEFAULT_CONFIG", "category"]
