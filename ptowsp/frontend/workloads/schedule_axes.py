"""Check the axis-transform combinators of a schedule: `.split`, `.tile`, `.reorder`,
`.fuse_axes` and `.decompose` (docs/language.md section 8).

The scheduled workload's own loops are modelled as a tree (`ALoop`: name, kind, what its extent
depends on, whether it is a ragged axis at an enclosing loop variable), and each combinator is
applied to the model in the order written, exactly as `ir/axes.py` later applies it to the
loop tree, so a combinator may name the loops an earlier one made (`t_o`, `t_i`, `a_b`).
Errors are diagnostics of the calling checker (a `Body`, schedules.py); nothing here raises.

What this leaves alone: whether reordering tasks could reorder two conflicting tasks (that is a
proof over the lowered views, made by `ir/axes.py` and reported from lowering).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from ...diagnostics import Note, did_you_mean
from .. import ast as A
from .scope import Scope

AXIS_COMBINATORS = ("split", "tile", "reorder", "fuse_axes", "decompose")
# decision: `.split`, `.tile`, `.reorder` and `.fuse_axes` may be given several times (each names
# the loops it acts on); `.decompose` at most once (it rewrites the ragged loops' outer loop)
REPEATABLE = ("split", "tile", "reorder", "fuse_axes")
BUCKET_POLICIES = ("bucket", "pow2_bucket")
DEFAULT_BUCKETS = {"bucket": 8, "pow2_bucket": 16}


@dataclass(eq=False)
class ALoop:
    """One loop of the model: `kind` grid, seq or sel; `deps` the loop variables its extent
    names; `dynamic` when the extent reads run-time values; `ragged_at` the enclosing loop
    variable indexing a ragged axis (`for qi in P(qblocks[b])`: `b`), `ragged` for any ragged
    extent."""

    name: str
    kind: str
    span: A.Span
    deps: frozenset = frozenset()
    dynamic: bool = False
    ragged: bool = False
    ragged_at: Optional[str] = None
    body: list = field(default_factory=list)
    parent: Optional["ALoop"] = None
    made_by: Optional[A.Combinator] = None


@dataclass(eq=False)
class AOther:
    """Any other statement; the loops inside it are still loops of the workload."""

    kind: str
    children: list = field(default_factory=list)


Node = Union[ALoop, AOther]


def _loops(nodes) -> list[ALoop]:
    out: list[ALoop] = []
    for n in nodes:
        if isinstance(n, ALoop):
            out.append(n)
            out.extend(_loops(n.body))
        else:
            out.extend(_loops(n.children))
    return out


def build(env, decl: A.WorkloadDecl) -> list[Node]:
    """The model of a workload body."""

    def axis_info(e, enclosing: list[str]):
        names = {n.id for n in e.walk() if isinstance(n, A.Name)}
        dynamic = ragged = False
        ragged_at = None
        for n in e.walk():
            if isinstance(n, A.Index) and isinstance(n.value, A.Name):
                if n.value.id in env.tensors:
                    dynamic = True
                else:
                    ragged = True
            if isinstance(n, A.Call) and n.func.id == "slot":
                dynamic = True
        if (ragged and isinstance(e, A.Index) and len(e.items) == 1
                and isinstance(e.items[0], A.Name) and e.items[0].id in enclosing):
            ragged_at = e.items[0].id
        return frozenset(names & set(enclosing)), dynamic or ragged, ragged, ragged_at

    def stmts(body, enclosing: list[str], parent: Optional[ALoop]) -> list[Node]:
        out: list[Node] = []
        for s in body:
            if isinstance(s, A.ForLoop):
                top: Optional[ALoop] = None
                cur, inner = parent, list(enclosing)
                for v, ax in zip(s.vars, s.axes):
                    deps, dyn, ragged, at = axis_info(ax, inner)
                    loop = ALoop(v.id, s.kind, v.span, deps, dyn, ragged, at, parent=cur)
                    if top is None:
                        top = loop
                    else:
                        cur.body.append(loop)
                    cur = loop
                    inner.append(v.id)
                cur.body.extend(stmts(s.body, inner, cur))
                out.append(top)
            elif isinstance(s, A.When):
                kids = [k for b in s.branches for k in stmts(b.body, enclosing, parent)]
                out.append(AOther("when", kids + stmts(s.otherwise or (), enclosing, parent)))
            elif isinstance(s, (A.Combine, A.Sequential, A.Pipe, A.Process, A.Consume)):
                out.append(AOther(type(s).__name__.lower(), stmts(s.body, enclosing, parent)))
            else:
                out.append(AOther(type(s).__name__.lower()))
        return out

    return stmts(decl.body, [], None)


def outermost_ragged(roots: list[Node]) -> list[ALoop]:
    """The ragged loops of the model that no other ragged loop encloses."""
    out: list[ALoop] = []

    def walk(nodes):
        for n in nodes:
            if isinstance(n, ALoop):
                if n.ragged:
                    out.append(n)
                    continue
                walk(n.body)
            else:
                walk(n.children)

    walk(roots)
    return out


class AxisChecker:
    """Applies the axis combinators of one schedule to the model of its workload."""

    def __init__(self, chk, env, wname: str, decl: A.WorkloadDecl, inlined_loops: set[str]):
        self.chk, self.env, self.wname = chk, env, wname
        self.roots: list[Node] = build(env, decl)
        self.inlined_loops = inlined_loops  # loop names of the workloads it inlines
        self.gone: dict[str, A.Combinator] = {}  # loop name -> the combinator that replaced it
        count: dict[str, int] = {}
        for lp in _loops(self.roots):
            count[lp.name] = count.get(lp.name, 0) + 1
        self.ambiguous = {n for n, k in count.items() if k > 1}

    # ---- helpers
    def error(self, span, code, message, help=None, notes=()):
        self.chk.error(span, code, message, help, notes=list(notes))

    def loop(self, e: A.Expr, what: str) -> Optional[ALoop]:
        """The loop a combinator argument names, or None after an error."""
        if not isinstance(e, A.Name):
            self.error(e.span, "bad-axis", f"{what} must name a loop variable of `{self.wname}`",
                       "write the variable as in the workload, e.g. `t` for `for t in P(T)`")
            return None
        name = e.id
        if name in self.gone:
            c = self.gone[name]
            self.error(e.span, "axis-replaced",
                       f"`{name}` is no longer a loop: `.{c.name.id}` replaced it",
                       "name the loops it made instead (`.split(t, f)` makes `t_o` and `t_i`, "
                       "`.fuse_axes(a, b)` makes `a_b`)",
                       notes=[Note(own_span(c), "replaced here")])
            return None
        if name in self.ambiguous:
            self.error(e.span, "ambiguous-axis",
                       f"`{name}` names more than one loop of `{self.wname}`",
                       "rename the loops so each axis transform names one loop")
            return None
        found = [lp for lp in _loops(self.roots) if lp.name == name]
        if not found:
            if name in self.inlined_loops:
                self.error(e.span, "unknown-axis",
                           f"`{name}` is a loop of a workload that `{self.wname}` inlines; axis "
                           f"transforms act on the loops of `{self.wname}` itself")
            else:
                names = [lp.name for lp in _loops(self.roots)]
                self.error(e.span, "unknown-axis",
                           f"unknown axis `{name}`: `{self.wname}` has no loop variable `{name}`",
                           did_you_mean(name, names)
                           or ("its loop variables are " + ", ".join(f"`{n}`" for n in names)
                               if names else f"`{self.wname}` has no loops"))
            return None
        lp = found[0]
        if lp.kind == "sel":
            self.error(e.span, "sel-axis",
                       f"`{name}` is a `P.sel` loop; axis transforms act on `P` and `P.seq` loops")
            return None
        return lp

    def factor(self, e: A.Expr, what: str) -> Optional[int]:
        n = self.chk.compile_int(e, Scope(), what)
        if n is not None and n <= 0:
            self.error(e.span, "not-positive", f"{what} must be positive, found {n}")
            return None
        return n

    def new_name(self, name: str, c: A.Combinator) -> bool:
        """Whether a loop the combinator makes may be called `name`."""
        taken = (name in {lp.name for lp in _loops(self.roots)} or name in self.inlined_loops
                 or self.env.kind_of(name) is not None)
        if taken:
            self.error(c.name.span, "axis-name-taken",
                       f"`.{c.name.id}` would name a loop `{name}`, but `{name}` is already taken",
                       f"rename the existing `{name}`")
        return not taken

    def perfect(self, outer: ALoop, inner: ALoop, c: A.Combinator, span) -> bool:
        """`inner` is the only statement of `outer` and its extent does not depend on it."""
        if not (len(outer.body) == 1 and outer.body[0] is inner):
            self.error(span, "not-perfectly-nested",
                       f"`{outer.name}` and `{inner.name}` are not perfectly nested: "
                       f"`.{c.name.id}` needs `{inner.name}`'s loop to be the only statement "
                       f"of `{outer.name}`'s",
                       "write them as `for a, b in P(A, B) { ... }` or move the other "
                       "statements inside the inner loop")
            return False
        if outer.name in inner.deps or inner.dynamic:
            why = (f"depends on `{outer.name}`" if outer.name in inner.deps
                   else "is read at run time")
            self.error(span, "not-perfectly-nested",
                       f"`{outer.name}` and `{inner.name}` are not perfectly nested: the extent "
                       f"of `{inner.name}` {why}, so it may differ between iterations of "
                       f"`{outer.name}`")
            return False
        return True

    def replace(self, old: list[ALoop], new_top: ALoop, body: list, c: A.Combinator) -> None:
        """Put the chain starting at `new_top` where `old[0]` was, around `body`."""
        top = old[0]
        parent = top.parent
        holder = self._holder(top)
        i = next(k for k, n in enumerate(holder) if n is top)
        holder[i] = new_top
        new_top.parent = parent
        cur = new_top
        while cur.body:
            cur.body[0].parent = cur
            cur = cur.body[0]
        cur.body = body
        for n in body:
            if isinstance(n, ALoop):
                n.parent = cur
        for lp in old:
            if lp.name not in {x.name for x in _loops([new_top])}:
                self.gone[lp.name] = c

    def _holder(self, target: ALoop) -> list:
        def find(nodes):
            for n in nodes:
                if n is target:
                    return nodes
                kids = n.body if isinstance(n, ALoop) else n.children
                got = find(kids)
                if got is not None:
                    return got
            return None

        return find(self.roots)

    # ---- the combinators
    def check(self, c: A.Combinator) -> None:
        getattr(self, c.name.id)(c)

    def _args(self, c: A.Combinator, n: int, example: str) -> Optional[tuple]:
        if len(c.args) != n or c.kwargs:
            self.error(own_span(c), "arity", f"`.{c.name.id}` takes {n} arguments",
                       f"write `{example}`")
            return None
        return c.args

    def split(self, c: A.Combinator) -> None:
        args = self._args(c, 2, ".split(t, 4)")
        if args is None:
            return
        lp = self.loop(args[0], "the axis of `.split`")
        f = self.factor(args[1], "a split factor")
        if lp is None or f is None:
            return
        if not (self.new_name(f"{lp.name}_o", c) and self.new_name(f"{lp.name}_i", c)):
            return
        self._split(lp, c)

    def _split(self, lp: ALoop, c: A.Combinator) -> tuple[ALoop, ALoop]:
        outer = ALoop(f"{lp.name}_o", lp.kind, lp.span, lp.deps, lp.dynamic, lp.ragged,
                      lp.ragged_at, made_by=c)
        # decision: the inner loop of a split runs min(f, extent - outer*f) times, so its extent
        # depends on the outer loop (the pair cannot be reordered)
        inner = ALoop(f"{lp.name}_i", lp.kind, lp.span, lp.deps | {outer.name}, lp.dynamic,
                      made_by=c)
        outer.body = [inner]
        self.replace([lp], outer, lp.body, c)
        for x in _loops(lp.body):  # extents that named the split variable name both now
            if lp.name in x.deps:
                x.deps = x.deps - {lp.name} | {outer.name, inner.name}
            if x.ragged_at == lp.name:
                x.ragged_at = None
        return outer, inner

    def tile(self, c: A.Combinator) -> None:
        args = self._args(c, 4, ".tile(i, j, 4, 4)")
        if args is None:
            return
        a = self.loop(args[0], "the first axis of `.tile`")
        b = self.loop(args[1], "the second axis of `.tile`")
        fa = self.factor(args[2], "a tile factor")
        fb = self.factor(args[3], "a tile factor")
        if a is None or b is None or fa is None or fb is None:
            return
        if a is b:
            self.error(args[1].span, "axis-twice", f"`{a.name}` is named twice")
            return
        outer, inner = (a, b) if b.parent is a else (b, a)
        if not self.perfect(outer, inner, c, args[0].span.merge(args[1].span)):
            return
        if not self.grid([a, b], args[:2], c):
            return
        for n in (a.name, b.name):
            for suffix in ("_o", "_i"):
                if not self.new_name(n + suffix, c):
                    return
        body = inner.body
        ao = ALoop(f"{a.name}_o", "grid", a.span, a.deps, made_by=c)
        bo = ALoop(f"{b.name}_o", "grid", b.span, b.deps, made_by=c)
        ai = ALoop(f"{a.name}_i", "grid", a.span, a.deps | {ao.name}, made_by=c)
        bi = ALoop(f"{b.name}_i", "grid", b.span, b.deps | {bo.name}, made_by=c)
        ao.body, bo.body, ai.body = [bo], [ai], [bi]
        self.replace([outer, inner], ao, body, c)

    def grid(self, loops: list[ALoop], args, c: A.Combinator) -> bool:
        for lp, e in zip(loops, args):
            if lp.kind == "seq":
                self.error(e.span, "reorder-seq",
                           f"`.{c.name.id}` would change the order of the `P.seq` loop "
                           f"`{lp.name}`, which is part of the program's meaning",
                           "only `P` (grid) loops may be reordered or tiled")
                return False
        return True

    def reorder(self, c: A.Combinator) -> None:
        if len(c.args) < 2 or c.kwargs:
            self.error(own_span(c), "arity", "`.reorder` takes two or more axes",
                       "write `.reorder(h, b)`")
            return
        loops = [self.loop(e, "an axis of `.reorder`") for e in c.args]
        if any(lp is None for lp in loops):
            return
        for i, lp in enumerate(loops):
            if lp in loops[:i]:
                self.error(c.args[i].span, "axis-twice", f"`{lp.name}` is named twice")
                return
        if not self.grid(loops, c.args, c):
            return
        span = c.args[0].span.merge(c.args[-1].span)
        # the named loops must form one perfect chain, in some order
        members = set(map(id, loops))
        top = next(lp for lp in loops if lp.parent is None or id(lp.parent) not in members)
        chain = [top]
        while len(chain) < len(loops):
            cur = chain[-1]
            nxt = cur.body[0] if len(cur.body) == 1 and isinstance(cur.body[0], ALoop) else None
            if nxt is None or id(nxt) not in members:
                missing = [lp for lp in loops if lp not in chain]
                if nxt is None:
                    self.perfect(cur, missing[0], c, span)
                else:
                    self.error(span, "not-perfectly-nested",
                               f"`.reorder` names `{cur.name}` and `{missing[0].name}` but not "
                               f"`{nxt.name}`, which lies between them",
                               "name every loop of the nest being reordered")
                return
            chain.append(nxt)
        new = list(loops)
        for i, lp in enumerate(new):
            for dep in lp.deps:
                if dep in {x.name for x in new[i + 1:]}:
                    self.error(c.args[i].span, "not-perfectly-nested",
                               f"the extent of `{lp.name}` depends on `{dep}`, so `{lp.name}` "
                               f"cannot be placed outside `{dep}`")
                    return
            if lp.dynamic and lp is not chain[0]:  # its Read sits inside the loop around it
                self.error(c.args[i].span, "not-perfectly-nested",
                           f"the extent of `{lp.name}` is read at run time, so it may differ "
                           "between iterations of the loops around it")
                return
        body = chain[-1].body
        copies = [ALoop(lp.name, lp.kind, lp.span, lp.deps, lp.dynamic, lp.ragged, lp.ragged_at,
                        made_by=lp.made_by) for lp in new]
        for a, b in zip(copies, copies[1:]):
            a.body = [b]
        self.replace(chain, copies[0], body, c)

    def fuse_axes(self, c: A.Combinator) -> None:
        args = self._args(c, 2, ".fuse_axes(b, h)")
        if args is None:
            return
        a = self.loop(args[0], "the first axis of `.fuse_axes`")
        b = self.loop(args[1], "the second axis of `.fuse_axes`")
        if a is None or b is None:
            return
        if a is b:
            self.error(args[1].span, "axis-twice", f"`{a.name}` is named twice")
            return
        span = args[0].span.merge(args[1].span)
        if b.parent is not a:
            if a.parent is b:
                self.error(span, "not-perfectly-nested",
                           f"`.fuse_axes` takes the outer loop first: `{b.name}` encloses "
                           f"`{a.name}`", f"write `.fuse_axes({b.name}, {a.name})`")
                return
            self.error(span, "not-perfectly-nested",
                       f"`{a.name}` and `{b.name}` are not perfectly nested: `{b.name}` is not "
                       f"directly inside `{a.name}`")
            return
        if not self.perfect(a, b, c, span):
            return
        if a.kind != b.kind:
            self.error(span, "fuse-kinds",
                       f"`.fuse_axes` needs two loops of one kind, but `{a.name}` is "
                       f"{_kind(a)} and `{b.name}` {_kind(b)}")
            return
        name = f"{a.name}_{b.name}"
        if not self.new_name(name, c):
            return
        fused = ALoop(name, a.kind, a.span, a.deps | b.deps, a.dynamic, made_by=c)
        self.replace([a, b], fused, b.body, c)
        for x in _loops(fused.body):
            if x.deps & {a.name, b.name}:
                x.deps = x.deps - {a.name, b.name} | {name}
            if x.ragged_at in (a.name, b.name):
                x.ragged_at = None

    def decompose(self, c: A.Combinator) -> None:
        args = list(c.args)
        if c.kwargs or len(args) not in (1, 2):
            self.error(own_span(c), "arity", "`.decompose` takes an optional axis and a bucketing",
                       "write `.decompose(qi, bucket(4))` or `.decompose(bucket(4))`")
            return
        policy = args[-1]
        if isinstance(policy, A.Name) and policy.id in BUCKET_POLICIES:
            policy = A.Call(policy, (), (), span=policy.span)
        ok = True
        if not (isinstance(policy, A.Call) and not policy.prefix
                and policy.func.id in BUCKET_POLICIES):
            name = policy.func.id if isinstance(policy, A.Call) else self.chk.text(policy)
            self.error(policy.span, "unknown-policy", f"unknown bucketing `{name}`",
                       did_you_mean(name, BUCKET_POLICIES)
                       or "write `bucket(k)` (lengths k apart) or `pow2_bucket` (powers of two)")
            ok = False
        else:
            ok = self.buckets(policy)
        if len(args) == 2:
            lp = self.loop(args[0], "the axis of `.decompose`")
            if lp is None:
                return
            span = args[0].span
        else:
            found = outermost_ragged(self.roots)
            if len(found) != 1:
                self.error(own_span(c), "decompose-axis",
                           f"`{self.wname}` has no loop over a ragged axis to decompose"
                           if not found else f"`{self.wname}` has {len(found)} outermost ragged "
                           "loops: name the one to decompose",
                           "write `.decompose(qi, bucket(4))`" if found else None)
                return
            lp, span = found[0], own_span(c)
        if not lp.ragged:
            self.error(span, "decompose-not-ragged",
                       f"`{lp.name}` is not a loop over a ragged axis: `.decompose` groups the "
                       "iterations of a ragged axis's outer loop by length",
                       "name a loop like `qi` in `for qi in P(qblocks[b])`")
            return
        if lp.ragged_at is None:
            self.error(span, "decompose-not-ragged",
                       f"the ragged axis of `{lp.name}` is not indexed by a loop variable of "
                       f"`{self.wname}`, so there is no loop to decompose")
            return
        outer = lp.parent
        while outer is not None and outer.name != lp.ragged_at:
            outer = outer.parent
        if outer is None:
            return
        if outer.kind != "grid":
            self.error(span, "reorder-seq",
                       f"`.decompose` would change the order of the `P.seq` loop `{outer.name}`, "
                       "which is part of the program's meaning")
            return
        x = lp
        while x is not outer:  # only loops lie between the outer loop and the ragged one
            if not any(n is x for n in x.parent.body):
                self.error(span, "decompose-nested",
                           f"`{lp.name}` lies inside a `when` or block of `{outer.name}`'s body: "
                           "`.decompose` needs only loops between the two")
                return
            x = x.parent
        if not ok:
            return
        # the outer loop's body is now guarded by the bucket test
        outer.body = [AOther("when", outer.body)]

    def buckets(self, p: A.Call) -> bool:
        f = p.func.id
        kws = self.chk.kwargs(p, ("n",), f"{f}(...)")
        want = 1 if f == "bucket" else 0
        if len(p.args) != want:
            self.error(p.span, "arity",
                       "`bucket` takes the bucket width (and optionally `n = N` buckets)"
                       if f == "bucket" else "`pow2_bucket` takes only `n = N` buckets",
                       "write `bucket(4)` or `bucket(4, n = 8)`" if f == "bucket"
                       else "write `pow2_bucket(n = 16)`")
            return False
        ok = True
        if p.args and self.factor(p.args[0], "a bucket width") is None:
            ok = False
        if "n" in kws and self.factor(kws["n"].value, "a bucket count") is None:
            ok = False
        return ok


def own_span(c: A.Combinator) -> A.Span:
    """`.name(args)` without the chain before it (a combinator's span starts at the workload)."""
    n = c.name.span
    return A.Span(n.file, n.line, n.col, c.span.end_line, c.span.end_col)


def _kind(lp: ALoop) -> str:
    return "a `P.seq` loop" if lp.kind == "seq" else "a `P` loop"


def decompose_args(c: A.Combinator) -> tuple[Optional[str], str, Optional[A.Expr], Optional[A.Expr]]:
    """(axis name or None, bucketing name, width expression, count expression) of a checked
    `.decompose`."""
    axis = c.args[0].id if len(c.args) == 2 else None
    p = c.args[-1]
    if isinstance(p, A.Name):
        return axis, p.id, None, None
    kws = {k.name: k.value for k in p.kwargs}
    return axis, p.func.id, p.args[0] if p.args else None, kws.get("n")
