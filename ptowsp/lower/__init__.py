"""Lower a checked `ModuleEnv` to the IR of `ir/nodes.py`: `lower(env) -> nodes.Module` (pure).

Kernels become op DAGs over static tiles, specialised once per distinct `Constexpr` assignment
used by a task (`rows__R_4`; kernels without `Constexpr` parameters keep their name). Schedules
become loop trees with workload parameters substituted and inlined workloads expanded; views
become `TileArg` boxes carrying the `ViewCheck`s that could not be proved here.

What lowering decides (each also written next to its code as `# decision:`):
- Implicit conversions are explicit `convert` ops; `rowmul/rowadd/...` become the plain
  elementwise op with broadcasting; a store's value is converted and broadcast to the
  parameter's tile by explicit ops, so every stored op has the parameter's shape and dtype.
- Literals take the dtype of what they meet (one `literal` op of that dtype); a compound
  literal expression (`1 / 2`) is computed in its default dtype (i32 / f32) and converted.
- A module without schedules whose only parameterless root workload (inlined by no other) is W
  gets the implicit schedule `W` with the defaults of language.md section 8: round_robin(1),
  one stream, immediate, no window.
- Dispatch policies: `round_robin(n)` is `Policy("round_robin", (n,))` (no count:
  `Policy("round_robin")`, the machine model's); `work_steal(n = N)` is `Policy("work_steal",
  (), N)`; the key policies are `Policy(name, (key,), N or None)`.
- Loop variables keep their source names unless that would rebind a name bound by an enclosing
  loop or a sym (then `b_2`, ...): names are unique along every path of the loop tree, so
  schedule keys stay expressions over the loop variables' source names.

Run-time values (language.md sections 5 and 6) become statements of the loop tree:
- An element read `T[i, j]` in a scalar expression is an `N.Read` into a fresh variable
  `T@n` (n counts the schedule's reads), placed right before the statement using it (a loop's
  extent: before the Loop; a task's arguments: before the Task), shared by repeated reads of
  one element in one statement, with `ViewCheck`s for the index bounds not proved here.
- `tok[b]` of `Ragged(outer, lengths)` has extent `lengths@n` (or the length expression with
  `_` = b), plus an `N.Assert` that it is not negative unless proved.
- `for e in P.sel(route[b])`: Reads of `indptr[b]`, `indptr[b + 1]`, Asserts 0 <= lo <= hi
  <= len(indices), a grid Loop over `e.pos` in [0, hi - lo) whose body starts with the Read
  `e = indices[lo + e.pos]`.
- `when` is an `N.When` of `N.Cond`s (decided predicates fold to the chosen body); `else when`
  predicates and the right side of `and` / `or` read elements only when reached.
- `slot_set` / `slot_load` are `N.SlotSet`s; `slot(k)` is the variable `N.slot_var(k)`.

CSP (language.md section 7; the contract is the "CSP" part of `ir/nodes.py`):
- Every channel and event is an `N.Channel` of the module; one used by `send`/`consume` gets
  a scratch tensor `NAME@slots` of `max(depth, 1)` slots (`N.slots_name`).
- `pipe` is an `N.Pipe` owning the channels its processes consume, `process` an `N.Process`
  (replica variable `NAME.id`), `send(ch, CALL)` an `N.Send` whose task writes the slot
  `ch@slots[k % S]` of its item variable `ch@n` (a token channel: an `N.Access` "w"),
  `consume(ch) as t` an `N.Consume` binding `t` (its item number); `t` passed to a tile is a
  read of its slot, and every task of the body that does not read it gets an `N.Access` "r".
- A statement followed by `record(ev)`s is wrapped in an `N.Mark`; `synchronize(ev)` is an
  `N.Sync`; `query(X)` the predicate `N.Cond("query", (X,))`. A schedule using any of these
  has `uses_csp`; `reject_csp` is how a back end without the CSP enumerator refuses it.

Constructs this build's back ends do not support yet (element reads in schedule keys) are
reported as `unsupported` diagnostics at the construct, all raised together as a `WspError`.
An extern kernel lowers with the bodies it has; the target that needs a missing one says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Union

from .. import sym
from ..diagnostics import Diagnostic, Diagnostics, InternalError, WspError
from ..frontend import ast as A
from ..frontend.env import AxisInfo, ChannelInfo, ModuleEnv
from ..frontend.printer import expr_str
from ..frontend.schedule_axes import (
    AXIS_COMBINATORS,
    DEFAULT_BUCKETS,
    decompose_args,
    outermost_ragged,
    own_span,
)
from ..frontend.schedule_axes import build as build_axes
from ..frontend.signatures import KernelSig, NotSymbolic, ParamSig, to_sym
from ..ir import axes
from ..ir import nodes as N
from ..primitives import (
    ARITH_OPERATORS,
    COMPARE_OPERATORS,
    LOGIC_OPERATORS,
    PRIMITIVES,
    Arg,
    Type,
    Typing,
    combine,
    compare,
    elementwise_binary,
    literal_type,
    logic,
    unary,
)
from ..spans import Span

UNSUPPORTED = "is not supported by this build's back ends yet"


class _Unsupported(Exception):
    """A construct this build cannot lower: reported as one diagnostic at `span`."""

    def __init__(self, span: Span, message: str):
        super().__init__(message)
        self.span = span
        self.message = message


def _event_uses(stmts) -> set[str]:
    """The names recorded (`Mark`), synchronized or queried in a loop tree."""
    out: set[str] = set()

    def cond(c) -> None:
        if isinstance(c, N.Cond):
            if c.op == "query":
                out.add(c.args[0])
            elif c.op in ("and", "or", "not"):
                for a in c.args:
                    cond(a)

    for st in N.walk(stmts):
        if isinstance(st, N.Mark):
            out.update(st.events)
        elif isinstance(st, N.Sync):
            out.add(st.event)
        elif isinstance(st, N.When):
            for c, _ in st.branches:
                cond(c)
    return out


def lower(env: ModuleEnv) -> N.Module:
    """The IR of a checked module. Raises `WspError` for constructs not supported yet."""
    return _ModuleLowerer(env).run()


def _csp_span(s: N.Schedule) -> Span:
    """Where a schedule first uses CSP (its first pipe, send or consume, else its first record
    or synchronize; a schedule using `query` alone: the schedule)."""
    for kinds in ((N.Pipe, N.Send, N.Consume), (N.Mark, N.Sync)):
        for st in N.walk(s.body):
            if isinstance(st, kinds) and st.span.line:
                return st.span
    return s.window_span


def reject_csp(m: N.Module, target: str, schedules=None) -> None:
    """Raise a `WspError` (one `unsupported` diagnostic per schedule, at its first CSP
    construct) when one of `schedules` (default: all of the module's) uses CSP: for a back end
    whose enumerator does not implement the coroutines of `ir/nodes.py` yet."""
    names = set(schedules) if schedules is not None else None
    diags = []
    for s in m.schedules:
        if s.uses_csp and (names is None or s.name in names):
            diags.append(Diagnostic(
                _csp_span(s), "unsupported",
                f"schedule `{s.name}` uses CSP (pipes, channels, events), which the {target} "
                "target does not support yet",
                "run it with the `ref` target"))
    if diags:
        raise WspError(diags, dict(m.sources))


# ---------------------------------------------------------------------------------------------
# The module


class _ModuleLowerer:
    def __init__(self, env: ModuleEnv):
        self.env = env
        self.diags = Diagnostics(dict(env.sources))
        # (kernel, constexpr assignment) -> specialised name, in order of first use
        self.specs: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}

    def run(self) -> N.Module:
        env = self.env
        syms = tuple(
            N.SymDecl(name, env.sym_defaults.get(name), d.span) for name, d in env.syms.items()
        )
        tensors = tuple(
            N.TensorDecl(t.name, t.kind, t.dtype, tuple(t.dims), t.decl.span)
            for t in env.tensors.values()
        )
        schedules = [self.schedule(sd) for sd in env.schedules.values()]
        if not env.schedules:
            implicit = self.implicit_schedule()
            if implicit is not None:
                schedules.append(implicit)
        schedules = [s for s in schedules if s is not None]
        kernels = self.kernels()
        self.diags.raise_if_any()
        names = [s.name for s in schedules]
        default = "main" if "main" in names else names[0] if len(names) == 1 else None
        channels, slot_tensors = self.channels(schedules)
        return N.Module(
            name=env.name,
            syms=syms,
            tensors=tensors + slot_tensors,
            kernels=tuple(kernels),
            schedules=tuple(schedules),
            default_schedule=default,
            checks=self.module_checks(),
            sources=tuple(env.sources.items()),
            channels=channels,
        )

    def channels(self, schedules) -> tuple[tuple[N.Channel, ...], tuple[N.TensorDecl, ...]]:
        """Every channel and event, and the slot tensors of those some schedule sends to or
        consumes (in declaration order)."""
        used = {st.channel for s in schedules for st in N.walk(s.body)
                if isinstance(st, (N.Send, N.Consume))}
        marked = {name for s in schedules for name in _event_uses(s.body)}
        channels, tensors = [], []
        for c in self.env.channels.values():
            slots = N.slots_name(c.name) if c.name in used else None
            marks = N.marks_name(c.name) if c.name in marked else None
            ch = N.Channel(c.name, c.depth, c.elem, slots, c.is_event, c.decl.span, marks)
            channels.append(ch)
            if marks is not None:
                # decision: a recorded, synchronized or queried name gets a scratch `NAME@marks: u8[64]`; no kernel touches it, and ref ignores it; cpu_sim tags marked tasks with a read of one element per `record` generation, so synchronize and query wait for or probe exactly those tasks
                tensors.append(N.TensorDecl(marks, "scratch", "u8", (sym.const(N.MARKS),),
                                            c.decl.span))
            if slots is None:
                continue
            # decision: a channel's items live in a scratch tensor `NAME@slots` of max(depth, 1) slots (depth 0 has one); a token channel's slots are u8[S, 1, 1], touched by no kernel, so its items order tasks like a data channel's
            rows, cols, dtype = c.elem if c.elem is not None else (1, 1, "u8")
            dims = (sym.const(ch.nslots), sym.const(rows), sym.const(cols))
            tensors.append(N.TensorDecl(slots, "scratch", dtype, dims, c.decl.span))
        return tuple(channels), tuple(tensors)

    def unsupported(self, u: _Unsupported) -> None:
        self.diags.error(u.span, "unsupported", u.message)

    def module_checks(self) -> tuple[N.ViewCheck, ...]:
        """Tensor dimensions that may be negative (the checker's rule, kept per dimension)."""
        out = []
        for t in self.env.tensors.values():
            for dim, node in zip(t.dims, t.decl.type.dims):
                if sym.const_value(dim) is None and sym.prove_ge(dim, 0) is not True:
                    reason = f"dimension of `{t.name}` must not be negative"
                    out.append(N.ViewCheck(sym.Check(dim, ">=", sym.const(0), reason), reason,
                                           node.span))
        return tuple(out)

    # -- schedules
    def schedule(self, sd: A.ScheduleDecl) -> Optional[N.Schedule]:
        wl = _WorkloadLowerer(self)
        try:
            body = wl.scheduled(sd.workload.id, sd.args, sd.kwargs)
        except _Unsupported as u:
            self.unsupported(u)
            return None
        fields: dict = {}
        for c in sd.combinators:
            if c.name.id in AXIS_COMBINATORS:
                continue  # applied to the loop tree below
            try:
                fields.update(wl.combinator(c))
            except _Unsupported as u:
                self.unsupported(u)
        given = tuple(sorted({c.name.id for c in sd.combinators}))
        span = next((c.span for c in sd.combinators if c.name.id == "task_graph"), sd.name.span)
        spans: dict = {}
        for c in sd.combinators:
            spans.setdefault(c.name.id, c.name.span)
        sched = N.Schedule(sd.name.id, sd.workload.id, tuple(body), given=given, window_span=span,
                           uses_csp=N.uses_csp(body), combinator_spans=tuple(spans.items()),
                           **fields)
        return self.axis_transforms(sched, sd, wl)

    def axis_transforms(self, s: N.Schedule, sd: A.ScheduleDecl, wl) -> Optional[N.Schedule]:
        """The schedule's axis combinators applied to its loop tree in the order written
        (ir/axes.py); a transform that could change the result is reported at its combinator."""
        # decision: axis transforms rewrite the lowered loop tree here, at every -O level: they
        # are the user's request, and passes then see the tree the program really enumerates
        done: list[str] = []
        # `.decompose(bucket(k))` without an axis takes the outermost ragged loop, and a split
        # of that loop before it leaves its outer half (`qi_o`) as the ragged loop
        default_ragged = (_outermost_ragged(self.env, sd.workload.id)
                          if any(c.name.id == "decompose" and len(c.args) == 1
                                 for c in sd.combinators) else None)
        for c in sd.combinators:
            n = c.name.id
            if n not in AXIS_COMBINATORS:
                continue
            names = [a.id for a in c.args if isinstance(a, A.Name)]
            try:
                if n == "split":
                    s = axes.split(s, names[0], wl.const_int(c.args[1]))
                elif n == "tile":
                    s = axes.tile(s, names[0], names[1], wl.const_int(c.args[2]),
                                  wl.const_int(c.args[3]))
                elif n == "reorder":
                    s = axes.reorder(s, tuple(names))
                elif n == "fuse_axes":
                    s = axes.fuse_axes(s, names[0], names[1])
                else:
                    axis, kind, width, count = decompose_args(c)
                    axis = axis or default_ragged
                    ranges = axes.buckets(
                        kind, wl.const_int(width) if width is not None else None,
                        wl.const_int(count) if count is not None else DEFAULT_BUCKETS[kind])
                    s = axes.decompose(s, axis, ranges)
            except axes.AxisError as e:
                self.diags.error(own_span(c), "axis-transform", e.message, e.help)
                return None
            if n == "split" and names[0] == default_ragged:
                default_ragged = f"{default_ragged}_o"
            parts = [expr_str(a) for a in c.args] + [f"{k.name} = {expr_str(k.value)}"
                                                      for k in c.kwargs]
            done.append(f"{n}({', '.join(parts)})")
        return replace(s, transforms=tuple(done)) if done else s

    def implicit_schedule(self) -> Optional[N.Schedule]:
        inlined: set[str] = set()
        for w in self.env.workloads.values():
            for node in _walk_stmts(w.body):
                if isinstance(node, A.CallStmt) and node.callee.id in self.env.workloads:
                    inlined.add(node.callee.id)
        roots = [n for n, w in self.env.workloads.items() if n not in inlined and not w.params]
        if len(roots) != 1:
            return None
        # decision: the implicit schedule of a lone parameterless root workload W is named W and has every default (round_robin(1), one stream, immediate, no window)
        name = roots[0]
        try:
            body = _WorkloadLowerer(self).scheduled(name, (), ())
        except _Unsupported as u:
            self.unsupported(u)
            return None
        return N.Schedule(name, name, tuple(body), uses_csp=N.uses_csp(body))

    # -- kernels
    def specialise(self, kernel: str, cvals: dict[str, int]) -> str:
        key = (kernel, tuple(sorted(cvals.items())))
        name = self.specs.get(key)
        if name is None:
            name = kernel
            if cvals:
                parts = [f"{k}_{v}" if v >= 0 else f"{k}_m{-v}" for k, v in sorted(cvals.items())]
                name = "__".join([kernel] + parts)
                while name in self.env.kernels:  # a user kernel spelled like a specialisation
                    name += "_"
            self.specs[key] = name
        return name

    def kernels(self) -> list[N.Kernel]:
        out = []
        for kname, decl in self.env.kernels.items():
            sig = self.env.kernel_sigs[kname]
            if not sig.constexprs:
                self.specialise(kname, {})
            # decision: a Constexpr kernel is lowered once per assignment used by a task, sorted by values; an unused one is not lowered
            for (k, assignment), name in sorted(self.specs.items(), key=lambda kv: kv[0]):
                if k != kname:
                    continue
                try:
                    out.append(_KernelLowerer(self.env, decl, sig, dict(assignment), name).run())
                except _Unsupported as u:
                    self.unsupported(u)
        return out


def _walk_stmts(stmts) -> list[A.Node]:
    out: list[A.Node] = []
    for s in stmts:
        out.extend(s.walk())
    return out


# ---------------------------------------------------------------------------------------------
# Kernels


@dataclass
class _V:
    """A kernel value while lowering: its checker type (concrete dims), the op holding it, or
    for a bare literal (`2`, `1e-6`, a const, a Constexpr) the number, emitted where it meets a
    dtype."""

    type: Type
    idx: Optional[int] = None
    lit: Union[int, float, bool, None] = None

    @property
    def shape(self) -> Optional[tuple[int, int]]:
        return _shape(self.type)


def _shape(t: Type) -> Optional[tuple[int, int]]:
    if not t.is_tile:
        return None
    r, c = sym.const_value(t.rows), sym.const_value(t.cols)
    if r is None or c is None:
        raise InternalError("lower", f"a tile shape is not static after specialisation: {t}")
    return (r, c)


def _internal_report(span, code, message, help=None):
    raise InternalError("lower", f"the checker let through a kernel error: {message}")


# Primitives that are a plain elementwise op with NumPy broadcasting.
_ELEMENTWISE = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum",
    "minimum": "minimum", "pow": "pow",
    # decision: rowmul/rowadd/rowsub/rowdiv and colmul/coladd/colsub/coldiv lower to mul/add/sub/div with broadcasting (the checker already fixed the vector's shape)
    "rowmul": "mul", "rowadd": "add", "rowsub": "sub", "rowdiv": "div",
    "colmul": "mul", "coladd": "add", "colsub": "sub", "coldiv": "div",
}
_UNARY = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "abs", "neg", "relu",
          "gelu", "silu")
_SHAPED = ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean",
           "transpose", "softmax", "slice_even", "slice_odd")


class _KernelLowerer:
    def __init__(self, env: ModuleEnv, decl: A.KernelDecl, sig: KernelSig,
                 cvals: dict[str, int], name: str):
        self.env, self.decl, self.sig, self.cvals, self.name = env, decl, sig, cvals, name
        self.ops: list[N.Op] = []
        self.memo: dict[tuple, int] = {}
        self.lets: dict[str, _V] = {}
        self.params: dict[str, ParamSig] = {p.name: p for p in sig.params}
        self.param_vals: dict[str, _V] = {}

    def run(self) -> N.Kernel:
        kparams = []
        for p in self.sig.params:
            if p.kind == "tile":
                r, c = self.tile_dims(p)
                kparams.append(N.KParam(p.name, "tile", p.dtype, p.tile.mode, r, c))
            elif p.kind == "scalar":
                kparams.append(N.KParam(p.name, "scalar", p.dtype))
        constexprs = tuple(sorted(self.cvals.items()))
        if self.decl.body is None:
            # decision: an extern kernel lowers with whichever bodies it has (one per language);
            # a target that needs another language reports it where the target is chosen
            bodies = {e.lang: e.code for e in self.decl.externs}
            return N.Kernel(self.name, self.sig.name, tuple(kparams), (), (), bodies.get("c"),
                            constexprs, self.decl.span, extern_ascend=bodies.get("ascend"),
                            name_span=self.decl.name.span)
        stores: list[tuple[str, int]] = []
        for s in self.decl.body:
            if isinstance(s, A.Let):
                self.lets[s.name.id] = self.expr(s.value)
            elif isinstance(s, A.Assign):
                self.lets[s.name.id] = self.rebind(self.lets[s.name.id], self.expr(s.value))
            elif isinstance(s, A.Store):
                p = self.params[s.target.id]
                shape = self.tile_dims(p)
                idx = self.fit(self.expr(s.value), p.dtype, shape)
                stores.append((p.name, idx))
            else:
                raise InternalError("lower", f"unexpected kernel statement {type(s).__name__}")
        return N.Kernel(self.name, self.sig.name, tuple(kparams), tuple(self.ops), tuple(stores),
                        None, constexprs, self.decl.span, name_span=self.decl.name.span)

    def tile_dims(self, p: ParamSig) -> tuple[int, int]:
        mapping = {k: sym.const(v) for k, v in self.cvals.items()}
        r = sym.const_value(sym.substitute(p.tile.rows, mapping))
        c = sym.const_value(sym.substitute(p.tile.cols, mapping))
        if r is None or c is None:
            raise InternalError("lower",
                                f"tile `{p.name}` of `{self.sig.name}` has no static shape")
        return (r, c)

    # -- the op list (a DAG in dependency order; identical ops are shared)
    def emit(self, op: str, args: tuple[int, ...], shape: Optional[tuple[int, int]], dtype: str,
             attr=None) -> int:
        key = (op, args, shape, dtype, type(attr).__name__, repr(attr))
        idx = self.memo.get(key)
        if idx is None:
            idx = len(self.ops)
            self.ops.append(N.Op(op, args, shape, dtype, attr))
            self.memo[key] = idx
        return idx

    def coerce(self, v: _V, dtype: str) -> int:
        """The op holding `v` as `dtype`: a literal of that dtype, `v` itself, or a convert."""
        if v.lit is not None:
            # decision: a bare literal takes the dtype of what it meets as one `literal` op of that dtype
            return self.emit("literal", (), None, dtype, v.lit)
        if v.idx is None:
            raise InternalError("lower", "a kernel value without an op")
        if v.type.dtype == dtype:
            return v.idx
        # decision: where the checker promoted an operand, an explicit `convert` op says so
        return self.emit("convert", (v.idx,), v.shape, dtype)

    def materialise(self, v: _V) -> int:
        # decision: a compound literal expression (`1 / 2`, `exp(2)`) is computed in its default dtype (i32, f32, bool) and converted where it meets a typed value: `1 / 2` is 0
        return self.coerce(v, v.type.dtype)

    def fit(self, v: _V, dtype: str, shape: Optional[tuple[int, int]]) -> int:
        """`v` converted to `dtype` and broadcast to `shape` (stores and rebinding)."""
        idx = self.coerce(v, dtype)
        if shape is not None and v.shape != shape:
            # decision: a store (or rebinding) of a smaller value broadcasts with an explicit `broadcast` op, so every stored op has the parameter's exact shape and dtype
            idx = self.emit("broadcast", (idx,), shape, dtype)
        return idx

    def rebind(self, target: _V, value: _V) -> _V:
        if target.type.literal and value.lit is not None:
            return _V(target.type, None, value.lit)
        return _V(target.type, self.fit(value, target.type.dtype, target.shape))

    # -- expressions
    def typing(self, name: str, span: Span, args: Optional[dict] = None) -> Typing:
        return Typing(name, span, args or {}, {}, _internal_report)

    def expr(self, e: A.Expr) -> _V:
        if isinstance(e, A.IntLit):
            return _V(literal_type("int"), lit=e.value)
        if isinstance(e, A.FloatLit):
            return _V(literal_type("float"), lit=e.value)
        if isinstance(e, A.BoolLit):
            return _V(literal_type("bool"), lit=e.value)
        if isinstance(e, A.Name):
            return self.name_value(e)
        if isinstance(e, A.Unary):
            x = self.expr(e.operand)
            t = unary(self.typing(e.op, e.span), e.op, Arg(x.type, e.operand.span))
            if x.lit is not None:
                return _V(t, lit=(not x.lit) if e.op == "not" else -x.lit)
            op = "not" if e.op == "not" else "neg"
            return _V(t, self.emit(op, (self.coerce(x, t.dtype),), _shape(t), t.dtype))
        if isinstance(e, A.Binary):
            return self.binary(e)
        if isinstance(e, A.Call):
            return self.call(e)
        raise InternalError("lower", f"unexpected kernel expression {type(e).__name__}")

    def name_value(self, n: A.Name) -> _V:
        if n.id in self.lets:
            return self.lets[n.id]
        p = self.params.get(n.id)
        if p is not None:
            if p.name not in self.param_vals:
                if p.kind == "tile":
                    r, c = self.tile_dims(p)
                    t = Type("tile", p.dtype, sym.const(r), sym.const(c))
                    v = _V(t, self.emit("param", (), (r, c), p.dtype, p.name))
                elif p.kind == "scalar":
                    v = _V(Type("scalar", p.dtype), self.emit("scalar_param", (), None, p.dtype,
                                                              p.name))
                else:
                    v = _V(literal_type("int"), lit=self.cvals[p.name])
                self.param_vals[p.name] = v
            return self.param_vals[p.name]
        if n.id in self.env.consts:
            return _V(literal_type("int"), lit=self.env.consts[n.id])
        raise InternalError("lower", f"unknown kernel name `{n.id}`")

    def binary(self, e: A.Binary) -> _V:
        a, b = self.expr(e.left), self.expr(e.right)
        aa, ba = Arg(a.type, e.left.span), Arg(b.type, e.right.span)
        t = self.typing(e.op, e.span)
        if e.op in ARITH_OPERATORS:
            rt = elementwise_binary(t, e.op, aa, ba, e.op_span)
            op, dt = ARITH_OPERATORS[e.op], rt.dtype
        elif e.op in COMPARE_OPERATORS:
            rt = compare(t, e.op, aa, ba, e.op_span)
            op, dt = COMPARE_OPERATORS[e.op], combine(a.type, b.type).dtype
        elif e.op in LOGIC_OPERATORS:
            rt = logic(t, e.op, aa, ba, e.op_span)
            op, dt = LOGIC_OPERATORS[e.op], "bool"
        else:
            raise InternalError("lower", f"unexpected kernel operator `{e.op}`")
        # decision: comparison operands are converted to their combined dtype (as for arithmetic), then compared
        args = (self.coerce(a, dt), self.coerce(b, dt))
        return _V(rt, self.emit(op, args, _shape(rt), rt.dtype))

    def dim(self, node: A.Expr) -> int:
        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.cvals:
                return sym.const(self.cvals[n.id])
            if n.id in self.env.consts:
                return sym.const(self.env.consts[n.id])
            raise NotSymbolic()

        try:
            v = sym.const_value(to_sym(node, resolve, Diagnostics()))
        except NotSymbolic:
            v = None
        if v is None:
            raise InternalError("lower", f"`{expr_str(node)}` is not a compile-time dimension")
        return v

    def call(self, e: A.Call) -> _V:
        # `tl.NAME` / `pto.NAME` are stored by the parser as NAME with a prefix: the same primitive
        prim = PRIMITIVES.get(e.func.id)
        if prim is None:
            raise InternalError("lower", f"unknown primitive `{e.func.id}`")
        nodes_: dict[str, A.Expr] = {p.name: a for p, a in zip(prim.params, e.args)}
        for kw in e.kwargs:
            nodes_[kw.name] = kw.value
        vals: dict[str, _V] = {}
        dims: dict[str, int] = {}
        args: dict[str, Arg] = {}
        for p in prim.params:
            node = nodes_.get(p.name)
            if node is None:
                continue
            if p.kind == "dim":
                dims[p.name] = self.dim(node)
                args[p.name] = Arg(literal_type("int"), node.span, dim=sym.const(dims[p.name]))
            elif p.kind == "dtype":
                args[p.name] = Arg(Type("error"), node.span, dtype=node.id)
            else:
                vals[p.name] = self.expr(node)
                args[p.name] = Arg(vals[p.name].type, node.span)
        rt = prim.rule(self.typing(prim.name, e.span, args))
        if rt.is_error:
            raise InternalError("lower", f"`{prim.name}` did not type")
        name, shape, dt = prim.name, _shape(rt), rt.dtype
        if name == "load":
            # decision: `load(x)` is the value of x itself (parameters are immutable values)
            return vals["x"]
        if name == "full":
            # decision: `full(M, N, v, DT)` is a broadcast of the scalar v (converted to DT)
            s = self.coerce(vals["value"], dt)
            return _V(rt, self.emit("broadcast", (s,), shape, dt))
        if name == "constant":
            return _V(rt, self.coerce(vals["value"], dt))
        if name in _ELEMENTWISE:
            a = vals["a"] if "a" in vals else vals["x"]
            b = vals["b"] if "b" in vals else vals.get("vec", vals.get("exponent"))
            # decision: `pow(x, s)` converts the exponent to x's dtype, like any elementwise operand
            return _V(rt, self.emit(_ELEMENTWISE[name], (self.coerce(a, dt), self.coerce(b, dt)),
                                    shape, dt))
        if name in _UNARY:
            return _V(rt, self.emit(name, (self.coerce(vals["x"], dt),), shape, dt))
        if name in _SHAPED:
            return _V(rt, self.emit(name, (self.coerce(vals["x"], vals["x"].type.dtype),), shape,
                                    dt))
        if name == "broadcast":
            x = self.coerce(vals["x"], dt)
            if vals["x"].shape == shape:
                return _V(rt, x)
            return _V(rt, self.emit("broadcast", (x,), shape, dt))
        if name == "matmul":
            # decision: matmul operands keep their dtypes (the op reads any numeric tiles); `acc` is f32
            ops = (self.materialise(vals["a"]), self.materialise(vals["b"]))
            if "acc" in vals:
                ops += (self.coerce(vals["acc"], "f32"),)
            return _V(rt, self.emit("matmul", ops, shape, "f32"))
        if name == "cast":
            return _V(rt, self.emit("cast", (self.materialise(vals["x"]),), shape, dt))
        if name == "where":
            args_ = (self.coerce(vals["cond"], "bool"), self.coerce(vals["a"], dt),
                     self.coerce(vals["b"], dt))
            return _V(rt, self.emit("where", args_, shape, dt))
        if name in ("row_index", "col_index"):
            op = "iota_row" if name == "row_index" else "iota_col"
            return _V(rt, self.emit(op, (), shape, "i32"))
        if name == "interleave":
            args_ = (self.coerce(vals["a"], dt), self.coerce(vals["b"], dt))
            return _V(rt, self.emit("interleave", args_, shape, dt))
        raise InternalError("lower", f"primitive `{name}` has no lowering")


# ---------------------------------------------------------------------------------------------
# Workloads and schedules


@dataclass(frozen=True)
class _Loop:
    """A loop variable in scope: its IR name."""

    name: str


@dataclass(frozen=True)
class _Sel:
    """A `P.sel` variable in scope: `name` is the Read variable holding the coordinate
    (`indices[k]`), `pos` the loop variable of its position (`e.pos`)."""

    name: str
    pos: str


@dataclass(frozen=True)
class _Value:
    """A name standing for an integer expression (the `_` of a ragged length)."""

    value: sym.Expr


@dataclass(frozen=True)
class _Item:
    """The variable of `consume(ch) as t` in scope: `name` is its IR variable (the item
    number; `t`, `t.index` and `t` as a coordinate all mean it)."""

    name: str
    channel: ChannelInfo


@dataclass(frozen=True)
class _Proc:
    """An enclosing `process NAME [* N]`: `var` is the IR variable of `NAME.id` (None without
    replicas)."""

    var: Optional[str]


@dataclass(frozen=True)
class _Axis:
    """An axis in scope (a workload parameter): a dense axis's extent in IR names, or the
    module-level ragged/sparse axis passed for it (`info`)."""

    extent: Optional[sym.Expr]
    info: Optional[AxisInfo] = None


class _Scope:
    def __init__(self, parent: Optional["_Scope"] = None):
        self.names: dict[str, Union[_Loop, _Sel, _Value, _Axis, _Item, _Proc]] = {}
        self.parent = parent

    def lookup(self, name: str):
        s: Optional[_Scope] = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


_Scalar = tuple  # (kind, value): ("int", sym.Expr) | ("float", float) | ("bool", bool | N.Cond)
_UNKNOWN = sym.Interval(None, None)
# decision: an element read gives the element's value as a signed 64-bit integer; the range the
# proofs assume follows the dtype (u8/u16/u32 and bool are non-negative, the rest unknown)
_READ_RANGES = {"u8": sym.Interval(0, 255), "u16": sym.Interval(0, 65535),
                "u32": sym.Interval(0, 2**32 - 1), "bool": sym.Interval(0, 1)}


def _not(c):
    if isinstance(c, bool):
        return not c
    if c.op == "not":
        return c.args[0]
    return N.Cond("not", (c,))


def _and(a, b):
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return N.Cond("and", (a, b))


def _or(a, b):
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return N.Cond("or", (a, b))


def _has_reads(e: A.Expr) -> bool:
    """Whether evaluating `e` reads tensor elements (then `and`/`or` must short-circuit)."""
    return any(isinstance(n, A.Index) for n in e.walk())


def _splits(e: A.Expr) -> bool:
    """Whether a predicate is lowered as nested `When`s: an `and` / `or` (under any `not`s)
    whose right side reads tensor elements."""
    while isinstance(e, A.Unary) and e.op == "not":
        e = e.operand
    return isinstance(e, A.Binary) and e.op in ("and", "or") and _has_reads(e.right)


class _WorkloadLowerer:
    """One schedule's loop tree (inlined workloads included)."""

    def __init__(self, mod: _ModuleLowerer):
        self.mod = mod
        self.env = mod.env
        self.bound: dict[str, int] = {}  # IR loop (and P.sel) names bound on the current path
        self.renamed: set[str] = set()  # source names that had to be renamed somewhere
        self.ranges: dict[str, sym.Interval] = {}
        self.extents: dict[str, sym.Expr] = {}
        self.proofs: dict[tuple, Optional[bool]] = {}
        # Reads and Asserts to place right before the statement being lowered (None: no
        # statement, e.g. a schedule key), and the reads it made so far (shared when repeated)
        self.pre: Optional[list[N.Stmt]] = None
        self.memo: dict[tuple, str] = {}
        self.nreads = 0
        self.dyn: set[str] = set()  # variables holding run-time values (Read variables, slots)
        # CSP: the items of the enclosing consume bodies (their tasks access the items' slots),
        # the send whose call is being lowered (channel, item variable), and the sends so far
        self.items: list[tuple[ChannelInfo, str]] = []
        self.sending: Optional[tuple[ChannelInfo, str]] = None
        self.nsends = 0

    # ---- entry points
    def scheduled(self, wname: str, args, kwargs) -> list[N.Stmt]:
        decl = self.env.workloads[wname]
        self.workload = wname
        self.pre, self.memo = [], {}
        try:
            scope = self.bind_params(decl, args, kwargs, _Scope())
            pre = self.pre
        finally:
            self.pre, self.memo = None, {}
        return pre + self.block(decl.body, scope)

    def bind_params(self, decl: A.WorkloadDecl, args, kwargs, caller: _Scope) -> _Scope:
        scope = _Scope()
        bound: dict[str, A.Expr] = {p.name.id: a for p, a in zip(decl.params, args)}
        for kw in kwargs:
            bound[kw.name] = kw.value
        for p in decl.params:
            arg = bound[p.name.id]
            info = self.axis_info(arg, caller)
            if info is not None:
                scope.names[p.name.id] = _Axis(None, info)
            else:
                scope.names[p.name.id] = _Axis(self.axis_extent(arg, caller))
        return scope

    # ---- statements
    def block(self, stmts, scope: _Scope) -> list[N.Stmt]:
        out: list[N.Stmt] = []
        for s, events, span in _with_records(stmts):
            try:
                part = self.lowered(s, scope)
            except _Unsupported as u:
                self.mod.unsupported(u)
                continue
            out.extend(_marked(part, events, span))
        return out

    def capture(self, fn, memo: Optional[dict] = None):
        """`fn()` with its own list of Reads and Asserts (and reads to share, starting from
        `memo`): returns (that list, fn's value)."""
        saved = (self.pre, self.memo)
        self.pre, self.memo = [], dict(memo or {})
        try:
            value = fn()
            return self.pre, value
        finally:
            self.pre, self.memo = saved

    def lowered(self, s: A.Stmt, scope: _Scope) -> list[N.Stmt]:
        """One statement, preceded by the Reads and Asserts its expressions need."""
        pre, out = self.capture(lambda: self.stmt(s, scope))
        return pre + out

    def stmt(self, s: A.Stmt, scope: _Scope) -> list[N.Stmt]:
        if isinstance(s, A.ForLoop):
            if s.kind == "sel":
                return [self.sel_loop(s, scope)]
            return [self.for_loop(s, scope)]
        if isinstance(s, A.CallStmt):
            if s.callee.id in self.env.workloads:
                decl = self.env.workloads[s.callee.id]
                inner = self.bind_params(decl, s.args, s.kwargs, scope)
                return self.block(decl.body, inner)
            return [self.task(s, scope)]
        if isinstance(s, A.Combine):
            return [N.Block("combine", tuple(self.block(s.body, _Scope(scope))))]
        if isinstance(s, A.Sequential):
            items: list[N.Stmt] = []
            for child, events, span in _with_records(s.body):
                try:
                    part = _marked(self.lowered(child, _Scope(scope)), events, span)
                except _Unsupported as u:
                    self.mod.unsupported(u)
                    continue
                # decision: an inlined workload inside `sequential` is one step; its own statements stay unordered (a combine block)
                if len(part) == 1:
                    items.append(part[0])
                elif part:
                    items.append(N.Block("combine", tuple(part)))
            return [N.Block("sequential", tuple(items))]
        if isinstance(s, A.When):
            return self.when(list(s.branches), s.otherwise, scope)
        if isinstance(s, A.SlotSet):
            k = self.slot_number(s.slot)
            return [N.SlotSet(k, self.int_expr(s.value, scope), s.span)]
        if isinstance(s, A.SlotLoad):
            k = self.slot_number(s.slot)
            kind, v = self.element(s.source, scope)
            if kind != "int":
                raise InternalError("lower", "`slot_load` of a bool tensor")
            return [N.SlotSet(k, v, s.span)]
        if isinstance(s, A.Pipe):
            return [self.pipe(s, scope)]
        if isinstance(s, A.Send):
            return [self.send(s, scope)]
        if isinstance(s, A.Consume):
            return [self.consume(s, scope)]
        if isinstance(s, A.Synchronize):
            return [N.Sync(s.event.id, s.event.span)]
        raise InternalError("lower", f"unexpected workload statement {type(s).__name__}")

    # ---- CSP
    def pipe(self, s: A.Pipe, scope: _Scope) -> N.Pipe:
        procs = []
        for st in s.body:
            if not isinstance(st, A.Process):
                raise InternalError("lower", "a `pipe` holds a statement that is not a process")
            procs.append(self.process(st, scope))
        owned: list[str] = []
        for p in procs:
            for c in N.own_consumes(p.body):
                if c not in owned:
                    owned.append(c)
        return N.Pipe(tuple(procs), tuple(owned), s.span)

    def process(self, s: A.Process, scope: _Scope) -> N.Process:
        n = self.const_int(s.replicas) if s.replicas is not None else 1
        inner = _Scope(scope)
        saved: dict[str, tuple] = {}
        id_var = None
        try:
            if s.replicas is not None:
                # decision: the replica number `NAME.id` is a variable named `NAME.id` (renamed as loop variables are), in [0, N)
                id_var = self.fresh(f"{s.name.id}.id")
                self.bind_var(id_var, sym.Interval(0, n - 1), None, saved)
                self.dyn.discard(id_var)
            inner.names[s.name.id] = _Proc(id_var)
            body = tuple(self.block(s.body, inner))
        finally:
            self.unbind(saved)
        sends: list[str] = []
        for st in N.walk(body):
            if isinstance(st, N.Send) and st.channel not in sends:
                sends.append(st.channel)
        return N.Process(s.name.id, n, id_var, body, tuple(sends), s.name.span)

    def send(self, s: A.Send, scope: _Scope) -> N.Send:
        ch = self.env.channels[s.channel.id]
        self.nsends += 1
        # decision: a send's item variable is `CHANNEL@n` (n counts the schedule's sends): never a source name
        var = f"{ch.name}@{self.nsends}"
        saved: dict[str, tuple] = {}
        self.bound[var] = self.bound.get(var, 0) + 1
        self.bind_var(var, sym.NONNEG, None, saved)
        self.dyn.discard(var)
        outer, self.sending = self.sending, (ch, var)
        try:
            task = self.task(s.call, scope)
        finally:
            self.sending = outer
            self.unbind(saved)
        return N.Send(ch.name, var, task, s.channel.span)

    def consume(self, s: A.Consume, scope: _Scope) -> N.Consume:
        ch = self.env.channels[s.channel.id]
        saved: dict[str, tuple] = {}
        try:
            # decision: the item variable keeps the source name `t` (renamed as loop variables are): `t`, `t.index` and schedule keys over `t` name it
            var = self.fresh(s.var.id)
            self.bind_var(var, sym.NONNEG, None, saved)
            self.dyn.discard(var)
            inner = _Scope(scope)
            inner.names[s.var.id] = _Item(var, ch)
            self.items.append((ch, var))
            try:
                body = tuple(self.block(s.body, inner))
            finally:
                self.items.pop()
        finally:
            self.unbind(saved)
        return N.Consume(ch.name, var, body, s.channel.span)

    def slot_box(self, ch: ChannelInfo, item: str) -> tuple[tuple, tuple]:
        """The box of item `item`'s slot in `ch`'s slot tensor: (offsets, extents)."""
        rows, cols = (ch.elem[0], ch.elem[1]) if ch.elem is not None else (1, 1)
        offsets = (sym.mod(sym.var(item), max(ch.depth, 1)), sym.const(0), sym.const(0))
        return offsets, (sym.const(1), sym.const(rows), sym.const(cols))

    def slot_arg(self, p: ParamSig, ch: ChannelInfo, item: str) -> N.TileArg:
        """A consumed item (`In`) or the slot a send writes (`Out`) bound to tile `p`."""
        offsets, extents = self.slot_box(ch, item)
        mode = {"In": "r", "Out": "w", "InOut": "rw"}[p.tile.mode]
        return N.TileArg(p.name, N.slots_name(ch.name), mode, offsets, extents, 1, 2)

    def csp_accesses(self, args) -> tuple[N.Access, ...]:
        """The slot accesses a task needs beyond its tile arguments: a read of the item of every
        enclosing consume body it does not read through a tile, and the token slot a send to a
        token channel writes."""
        out: list[N.Access] = []
        boxes = {(a.tensor, a.offsets, a.extents) for a in args
                 if isinstance(a, N.TileArg) and a.mode != "w"}
        for ch, item in self.items:
            offsets, extents = self.slot_box(ch, item)
            slots = N.slots_name(ch.name)
            # decision: every task of a consume body reads its item's slot box (an `Access` when no tile argument does), so the item is freed only when all of them have finished
            if (slots, offsets, extents) not in boxes and not any(
                    x.tensor == slots and x.offsets == offsets for x in out):
                out.append(N.Access(slots, "r", offsets, extents))
        if self.sending is not None and self.sending[0].elem is None:
            ch, item = self.sending
            offsets, extents = self.slot_box(ch, item)
            out.append(N.Access(N.slots_name(ch.name), "w", offsets, extents))
        return tuple(out)

    def slot_number(self, e: A.Expr) -> int:
        k = self.const_int(e)
        if not 0 <= k < N.NSLOTS:
            raise InternalError("lower", f"slot {k} does not exist")
        return k

    # ---- when / else when / otherwise
    def when(self, branches: list, otherwise, scope: _Scope, memo: Optional[dict] = None
             ) -> list[N.Stmt]:
        """`when` as `N.When`s. Predicates are evaluated lazily: the element reads of an
        `else when` predicate happen only when the branches before it failed (sharing the reads
        of those predicates: no task runs in between), and those of the right side of `and` /
        `or` only when the left side did not decide."""
        if not branches:
            return self.block(otherwise or (), _Scope(scope))
        br = branches[0]
        return self.test(br.pred, scope, lambda m: self.block(br.body, _Scope(scope)),
                         lambda m: self.when(branches[1:], otherwise, scope, m), memo or {})

    def test(self, pred: A.Expr, scope: _Scope, then, els, memo: dict) -> list[N.Stmt]:
        """Statements running `then(memo)` where `pred` holds and `els(memo)` elsewhere (`memo`:
        the element reads made so far that they may share). A thunk may be called twice,
        lowering its statements twice with fresh names."""
        if isinstance(pred, A.Unary) and pred.op == "not" and _splits(pred.operand):
            return self.test(pred.operand, scope, els, then, memo)
        if isinstance(pred, A.Binary) and _splits(pred):
            # decision: `and` / `or` short-circuit: the right side's element reads (and their range checks) happen only when the left side does not decide
            right = lambda m: self.test(pred.right, scope, then, els, m)
            if pred.op == "and":
                return self.test(pred.left, scope, right, els, memo)
            return self.test(pred.left, scope, then, right, memo)
        seen: dict = {}

        def evaluate():
            value = self.scalar(pred, scope)
            seen.update(self.memo)
            return value

        pre, (kind, c) = self.capture(evaluate, memo)
        if kind != "bool":
            raise InternalError("lower", f"`{expr_str(pred)}` is not a condition")
        # decision: a predicate decided at compile time (constants, syms and loop ranges) lowers to the chosen body alone
        if c is True:
            return pre + then(seen)
        if c is False:
            return pre + els(seen)
        body, rest = tuple(then(seen)), tuple(els(seen))
        if not body:
            return pre + ([N.When(((_not(c), rest),))] if rest else [])
        if len(rest) == 1 and isinstance(rest[0], N.When):
            # `else when` whose predicate needs no new reads: one When with several branches
            return pre + [N.When(((c, body),) + rest[0].branches, rest[0].otherwise)]
        return pre + [N.When(((c, body),), rest)]

    # ---- loops
    def fresh(self, name: str) -> str:
        # decision: a loop variable keeps its source name unless an enclosing loop binds it or a sym has it (then `b_2`, `b_3`, ...): unique along every path, so sibling loops may share a name and keys stay over source names
        out, k = name, 1
        while out in self.env.syms or self.bound.get(out, 0) > 0:
            k += 1
            out = f"{name}_{k}"
        if out != name:
            self.renamed.add(name)
        self.bound[out] = self.bound.get(out, 0) + 1
        return out

    def bind_var(self, name: str, rng: sym.Interval, extent: Optional[sym.Expr],
                 saved: dict) -> None:
        """Give variable `name` a range (and a symbolic extent for the loop proofs), keeping
        what it had for `unbind`."""
        if name not in saved:
            saved[name] = (self.ranges.get(name), self.extents.get(name), name in self.dyn)
        self.ranges[name] = rng
        # decision: an extent that reads a slot is not used in proofs (a later slot_set in the body changes the slot, not the extent)
        if extent is not None and sym.const_value(extent) is None and not any(
                N.slot_index(v) is not None for v in sym.free_vars(extent)):
            self.extents[name] = extent
        else:
            self.extents.pop(name, None)

    def unbind(self, saved: dict) -> None:
        for name, (r, e, dyn) in saved.items():
            self.bound[name] = self.bound.get(name, 1) - 1
            for table, old in ((self.ranges, r), (self.extents, e)):
                if old is None:
                    table.pop(name, None)
                else:
                    table[name] = old
            if dyn:
                self.dyn.add(name)
            else:
                self.dyn.discard(name)

    def for_loop(self, s: A.ForLoop, scope: _Scope) -> N.Loop:
        extents = [self.axis_extent(ax, scope) for ax in s.axes]
        inner = _Scope(scope)
        names = []
        saved: dict[str, tuple] = {}
        try:
            for v, ext in zip(s.vars, extents):
                name = self.fresh(v.id)
                names.append(name)
                inner.names[v.id] = _Loop(name)
                hi = sym.bounds(ext, self.ranges).hi
                known = hi is not None and hi >= 1
                self.bind_var(name, sym.Interval(0, hi - 1) if known else sym.NONNEG, ext, saved)
                self.dyn.discard(name)
            body: tuple[N.Stmt, ...] = tuple(self.block(s.body, inner))
        finally:
            self.unbind(saved)
        kind = "seq" if s.kind == "seq" else "grid"
        # decision: `for a, b in P(x, y)` is one Loop per axis, nested in the order written (P.seq: lexicographic order)
        for name, ext in reversed(list(zip(names, extents))):
            body = (N.Loop(name, ext, kind, body),)
        return body[0]

    def sel_loop(self, s: A.ForLoop, scope: _Scope) -> N.Loop:
        """`for e in P.sel(route[b])`: Reads lo = indptr[b] and hi = indptr[b + 1], Asserts that
        0 <= lo <= hi <= len(indices), then a grid loop over the position `e.pos` in
        [0, hi - lo) whose body starts by reading `e = indices[lo + e.pos]`."""
        if len(s.vars) != 1 or len(s.axes) != 1:
            raise InternalError("lower", "`P.sel` over several axes")
        (v,), (ax,) = s.vars, s.axes
        info = self.axis_info(ax.value, scope) if isinstance(ax, A.Index) else None
        if info is None or info.kind != "sparse" or len(ax.items) != 1:
            raise InternalError("lower",
                                f"`P.sel({expr_str(ax)})` is not a sparse axis at an index")
        item = ax.items[0]
        b = self.int_expr(item, scope)
        bt = expr_str(item)
        ip, ix = info.indptr, info.indices
        name = expr_str(ax.value)
        span = ax.span
        lo = self.read(ip, (b,), (bt,), f"{ip}[{bt}]", span)
        hi = self.read(ip, (sym.add(b, 1),), (f"{bt} + 1",), f"{ip}[{bt} + 1]", span)
        nnz = self.env.tensors[ix].dims[0]
        self.assert_(lo, ">=", sym.const(0),
                     f"`{ip}[{bt}]` of sparse axis `{name}` must not be negative", span)
        self.assert_(hi, ">=", lo,
                     f"`{ip}` of sparse axis `{name}` must not decrease: `{ip}[{bt} + 1]` must "
                     f"be at least `{ip}[{bt}]`", span)
        self.assert_(hi, "<=", nnz,
                     f"`{ip}[{bt} + 1]` of sparse axis `{name}` must be at most "
                     f"{sym.to_str(nnz)}, the length of `{ix}`", span)
        count = sym.sub(hi, lo)
        saved: dict[str, tuple] = {}
        try:
            # decision: the P.sel variable is a Read variable named like the source variable (renamed as loop variables are), so keys and coordinates name it; its position loop variable is `e.pos`
            elem = self.fresh(v.id)
            pos = f"{elem}.pos"
            self.bound[pos] = self.bound.get(pos, 0) + 1
            self.bind_var(pos, sym.NONNEG, count, saved)
            self.dyn.discard(pos)
            # decision: `e` holds `indices[k]`, any value the index data holds: views it indexes are checked at run time on both sides
            self.bind_var(elem, _UNKNOWN, None, saved)
            self.dyn.add(elem)
            inner = _Scope(scope)
            inner.names[v.id] = _Sel(elem, pos)
            # no checks: the Asserts above make lo + pos an index of `indices`
            first = N.Read(elem, ix, (sym.add(lo, sym.var(pos)),), (), v.span)
            body = (first,) + tuple(self.block(s.body, inner))
        finally:
            self.unbind(saved)
        return N.Loop(pos, count, "grid", body)

    # ---- axes
    def axis_info(self, e: A.Expr, scope: _Scope) -> Optional[AxisInfo]:
        """The ragged or sparse module axis a name denotes (directly or as a parameter)."""
        if not isinstance(e, A.Name):
            return None
        b = scope.lookup(e.id)
        if isinstance(b, _Axis):
            return b.info
        if b is None and e.id in self.env.axes:
            info = self.env.axes[e.id]
            return info if info.kind in ("ragged", "sparse") else None
        return None

    def axis_extent(self, e: A.Expr, scope: _Scope) -> sym.Expr:
        if isinstance(e, A.DenseAxis):
            return self.int_expr(e.extent, scope)
        if isinstance(e, A.DenseDynAxis):
            return self.dynamic_extent(self.int_expr(e.extent, scope), e)
        if isinstance(e, (A.RaggedAxis, A.SparseAxis)):
            raise _Unsupported(e.span, f"inline ragged and sparse axes {UNSUPPORTED}")
        if isinstance(e, A.Name):
            info = self.axis_info(e, scope)
            if info is not None:
                raise InternalError("lower", f"{info.kind} axis `{e.id}` used without an index")
            b = scope.lookup(e.id)
            if isinstance(b, _Axis):
                return b.extent
            if b is None and e.id in self.env.axes:
                return self.env.axes[e.id].extent
        if isinstance(e, A.Index):
            info = self.axis_info(e.value, scope)
            if info is not None:
                if info.kind != "ragged" or len(e.items) != 1:
                    raise InternalError("lower",
                                        f"`{expr_str(e)}` is not a ragged axis at an index")
                return self.ragged_extent(info, e, scope)
        return self.dynamic_extent(self.int_expr(e, scope), e)

    def ragged_extent(self, info: AxisInfo, e: A.Index, scope: _Scope) -> sym.Expr:
        """`tok[b]`: a Read of `lengths[b]` or the length expression at `_` = b, with an Assert
        that it is not negative."""
        item = e.items[0]
        b = self.int_expr(item, scope)
        bt = expr_str(item)
        if info.lengths_tensor is not None:
            t = info.lengths_tensor
            ext = self.read(t, (b,), (bt,), f"{t}[{bt}]", e.span)
        else:
            inner = _Scope()
            inner.names["_"] = _Value(b)
            ext = self.int_expr(info.lengths_expr, inner)
        # decision: a negative ragged length is reported at the axis use (`tok[b]` in the loop), with the outer coordinates and the length found
        self.assert_(ext, ">=", sym.const(0), f"length of ragged axis `{expr_str(e.value)}` at "
                     f"`{bt}` must not be negative", e.span)
        return ext

    def dynamic_extent(self, ext: sym.Expr, node: A.Expr) -> sym.Expr:
        # decision: a loop extent computed from run-time values (element reads, slots) that may be negative is a run-time error; one over syms only still means an empty loop
        if self.is_dynamic(ext):
            self.assert_(ext, ">=", sym.const(0),
                         f"loop extent `{expr_str(node)}` must not be negative", node.span)
        return ext

    def is_dynamic(self, e: sym.Expr) -> bool:
        return any(v in self.dyn or N.slot_index(v) is not None for v in sym.free_vars(e))

    # ---- run-time values: element reads and asserts
    def read(self, tensor: str, index: tuple, texts: tuple, what: str, span: Span) -> sym.Expr:
        """A Read of `tensor[index]` placed before the current statement (shared within it):
        its variable. `texts` spell the indices and `what` the read in messages."""
        key = (tensor, tuple(index))
        if key in self.memo:
            return sym.var(self.memo[key])
        if self.pre is None:
            # decision: schedule keys are over the task's coordinates only: reading tensor elements or slots in a key is unsupported
            raise _Unsupported(span, f"reading tensor elements in a schedule key (`{what}`) "
                               f"{UNSUPPORTED}")
        t = self.env.tensors[tensor]
        checks: list[N.ViewCheck] = []
        for text, i, dim in zip(texts, index, t.dims):
            self.require(checks, i, ">=", sym.const(0),
                         f"index `{text}` of `{what}` must not be negative", span)
            self.require(checks, i, "<", dim,
                         f"index `{text}` of `{what}` must be less than {sym.to_str(dim)}", span)
        self.nreads += 1
        # decision: a Read variable is `TENSOR@n` (n counts the reads of the schedule): never a source name
        var = f"{tensor}@{self.nreads}"
        self.pre.append(N.Read(var, tensor, tuple(index), tuple(checks), span))
        self.ranges[var] = _READ_RANGES.get(t.dtype, _UNKNOWN)
        self.dyn.add(var)
        self.memo[key] = var
        return sym.var(var)

    def assert_(self, lhs: sym.Expr, op: str, rhs: sym.Expr, message: str, span: Span) -> None:
        """An Assert before the current statement, unless the fact is proved."""
        if self.decide(lhs, op, rhs) is True:
            return
        if self.pre is None:
            raise InternalError("lower", "an Assert outside a statement")
        self.pre.append(N.Assert(N.ViewCheck(sym.Check(lhs, op, rhs, message), message, span)))

    def element(self, e: A.Expr, scope: _Scope) -> _Scalar:
        """`T[i, j]` in a scalar expression: a Read (a bool element is the condition `!= 0`)."""
        if not (isinstance(e, A.Index) and isinstance(e.value, A.Name)
                and e.value.id in self.env.tensors):
            raise InternalError("lower", f"`{expr_str(e)}` is not a tensor element")
        t = self.env.tensors[e.value.id]
        index = tuple(self.int_expr(i, scope) for i in e.items)
        v = self.read(t.name, index, tuple(expr_str(i) for i in e.items), expr_str(e), e.span)
        if t.dtype == "bool":
            return ("bool", N.Cond("!=", (v, sym.const(0))))
        return ("int", v)

    # ---- scalar expressions
    def int_expr(self, e: A.Expr, scope: _Scope) -> sym.Expr:
        kind, v = self.scalar(e, scope)
        if kind != "int":
            raise InternalError("lower", f"`{expr_str(e)}` is not an integer expression")
        return v

    def scalar(self, e: A.Expr, scope: _Scope) -> _Scalar:
        if isinstance(e, A.IntLit):
            return ("int", sym.const(e.value))
        if isinstance(e, A.FloatLit):
            return ("float", e.value)
        if isinstance(e, A.BoolLit):
            return ("bool", e.value)
        if isinstance(e, A.Name):
            b = scope.lookup(e.id)
            if isinstance(b, (_Loop, _Sel, _Item)):
                return ("int", sym.var(b.name))
            if isinstance(b, _Value):
                return ("int", b.value)
            if b is None and e.id in self.env.consts:
                return ("int", sym.const(self.env.consts[e.id]))
            if b is None and e.id in self.env.syms:
                return ("int", sym.var(e.id))
            raise InternalError("lower", f"`{e.id}` is not a scalar here")
        if isinstance(e, A.Index):
            return self.element(e, scope)
        if isinstance(e, A.Attr):
            b = scope.lookup(e.value.id) if isinstance(e.value, A.Name) else None
            if e.attr == "pos" and isinstance(b, _Sel):
                return ("int", sym.var(b.pos))
            if e.attr == "index" and isinstance(b, _Item):
                return ("int", sym.var(b.name))
            if e.attr == "id" and isinstance(b, _Proc) and b.var is not None:
                return ("int", sym.var(b.var))
            raise InternalError("lower", f"`{expr_str(e)}` is not a scalar here")
        if isinstance(e, A.Call):
            f = e.func.id
            if f == "query":
                if self.pre is None:
                    raise _Unsupported(e.span, f"`query` in a schedule key {UNSUPPORTED}")
                # decision: `query(X)` is the run-time predicate Cond("query", (X,)): every task marked by X's latest `record` and sent to X so far has finished
                return ("bool", N.Cond("query", (e.args[0].id,)))
            if f == "slot":
                k = self.slot_number(e.args[0])
                if self.pre is None:
                    raise _Unsupported(e.span, f"reading slots in a schedule key "
                                       f"(`{expr_str(e)}`) {UNSUPPORTED}")
                name = N.slot_var(k)
                self.ranges[name] = _UNKNOWN
                return ("int", sym.var(name))
            args = [self.scalar(a, scope) for a in e.args]
            if all(k == "int" for k, _ in args):
                fn = {"min": sym.min_, "max": sym.max_, "abs": sym.abs_, "ceildiv": sym.ceildiv}[f]
                return ("int", fn(*(v for _, v in args)))
            nums = [self.number(k, v, e) for k, v in args]
            return ("float", float({"min": min, "max": max, "abs": abs}[f](*nums)))
        if isinstance(e, A.Unary):
            k, v = self.scalar(e.operand, scope)
            if e.op == "not":
                return ("bool", _not(v))
            return (k, sym.neg(v) if k == "int" else -v)
        if isinstance(e, A.Binary):
            return self.scalar_binary(e, scope)
        raise InternalError("lower", f"unexpected scalar expression {type(e).__name__}")

    def number(self, kind: str, v, e: A.Expr) -> float:
        if kind == "float":
            return v
        c = sym.const_value(v)
        if c is None:
            raise _Unsupported(e.span, f"float arithmetic on run-time values (`{expr_str(e)}`) "
                               f"{UNSUPPORTED}")
        return c

    def scalar_binary(self, e: A.Binary, scope: _Scope) -> _Scalar:
        (lk, lv), (rk, rv) = self.scalar(e.left, scope), self.scalar(e.right, scope)
        op = e.op
        if op in ("and", "or"):
            return ("bool", _and(lv, rv) if op == "and" else _or(lv, rv))
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if lk == "int" and rk == "int":
                r = self.decide(lv, op, rv)
                return ("bool", r if r is not None else N.Cond(op, (lv, rv)))
            if lk == "bool" or rk == "bool":
                if isinstance(lv, bool) and isinstance(rv, bool):
                    return ("bool", (lv == rv) if op == "==" else (lv != rv))
                same = _or(_and(lv, rv), _and(_not(lv), _not(rv)))
                return ("bool", same if op == "==" else _not(same))
            a, b = self.number(lk, lv, e.left), self.number(rk, rv, e.right)
            return ("bool", {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                             "!=": a != b}[op])
        if lk == "int" and rk == "int":
            fn = {"+": sym.add, "-": sym.sub, "*": sym.mul, "/": sym.floordiv, "%": sym.mod}[op]
            return ("int", fn(lv, rv))
        a, b = self.number(lk, lv, e.left), self.number(rk, rv, e.right)
        return ("float", {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                          "/": lambda: a / b, "%": lambda: a % b}[op]())

    # ---- proofs (the checker's: intervals, then loop variables written as `E - 1 - u`)
    def decide(self, lhs: sym.Expr, op: str, rhs: sym.Expr) -> Optional[bool]:
        return sym.prove_in_loops(lhs, op, rhs, self.ranges, self.extents, self.proofs)

    def require(self, checks: list, lhs: sym.Expr, op: str, rhs: sym.Expr, reason: str,
                span: Span) -> None:
        # decision: a fact not proved here is a ViewCheck, even one that is always false: the task may never be enumerated, and the error belongs to the task that is
        if self.decide(lhs, op, rhs) is not True:
            checks.append(N.ViewCheck(sym.Check(lhs, op, rhs, reason), reason, span))

    # ---- tasks
    def task(self, s: A.CallStmt, scope: _Scope) -> N.Task:
        sig = self.env.kernel_sigs[s.callee.id]
        bound = {kw.name: kw for kw in s.kwargs}
        cvals: dict[str, int] = {}
        for p in sig.params:
            if p.kind != "constexpr":
                continue
            node = bound[p.name].value if p.name in bound else p.default
            v = sym.const_value(self.int_expr(node, _Scope() if p.name not in bound else scope))
            if v is None:
                raise InternalError("lower", f"Constexpr `{p.name}` is not a compile-time integer")
            cvals[p.name] = v
        kname = self.mod.specialise(sig.name, cvals)
        coords = tuple(self.int_expr(c, scope) for c in s.coords or ())
        args: list[Union[N.TileArg, N.ScalarArg]] = []
        for p in sig.params:
            if p.kind == "tile":
                args.append(self.tile_arg(bound[p.name], p, cvals, scope))
            elif p.kind == "scalar":
                args.append(self.scalar_arg(bound.get(p.name), p, scope))
        text = s.callee.id
        if s.coords is not None:
            text += f"[{', '.join(expr_str(c) for c in s.coords)}]"
        return N.Task(kname, coords, tuple(args), text, s.span, self.csp_accesses(args))

    def scalar_arg(self, kw: Optional[A.Keyword], p: ParamSig, scope: _Scope) -> N.ScalarArg:
        node = kw.value if kw is not None else p.default
        kind, v = self.scalar(node, scope if kw is not None else _Scope())
        if p.dtype == "bool":
            if not isinstance(v, bool):
                raise _Unsupported(node.span, f"passing a condition on run-time values "
                                   f"(`{expr_str(node)}`) to a bool scalar {UNSUPPORTED}")
            return N.ScalarArg(p.name, v, p.dtype)
        if p.dtype in ("f16", "bf16", "f32", "f64"):
            if kind == "int":
                c = sym.const_value(v)
                # decision: an integer expression passed to a float Scalar stays symbolic when it is not constant; the back end converts its value
                return N.ScalarArg(p.name, float(c) if c is not None else v, p.dtype)
            return N.ScalarArg(p.name, float(self.number(kind, v, node)), p.dtype)
        if kind != "int":
            raise InternalError("lower", f"`{expr_str(node)}` is not an integer")
        return N.ScalarArg(p.name, v, p.dtype)

    def tile_arg(self, kw: A.Keyword, p: ParamSig, cvals: dict[str, int],
                 scope: _Scope) -> N.TileArg:
        v = kw.value
        base = v.value if isinstance(v, A.Index) else v
        if isinstance(v, A.Name):
            b = scope.lookup(v.id)
            if isinstance(b, _Item):
                return self.slot_arg(p, b.channel, b.name)
            if (b is None and self.sending is not None and v.id == self.sending[0].name):
                return self.slot_arg(p, self.sending[0], self.sending[1])
        if not isinstance(base, A.Name) or base.id not in self.env.tensors:
            raise InternalError("lower", f"`{expr_str(kw)}` is not a view")
        t = self.env.tensors[base.id]
        mapping = {k: sym.const(c) for k, c in cvals.items()}
        rows = sym.substitute(p.tile.rows, mapping)
        cols = sym.substitute(p.tile.cols, mapping)
        tile_text = f"Tile[{sym.to_str(rows)}, {sym.to_str(cols)}, {p.tile.dtype}]"
        kwtext = expr_str(kw)
        items = v.items if isinstance(v, A.Index) else ()
        offsets: list[sym.Expr] = []
        extents: list[sym.Expr] = []
        vdims: list[int] = []
        checks: list[N.ViewCheck] = []
        span = kw.span
        # the checker's view rules and messages (workload_check._Body.view / index_in_range)
        for axis, (item, dim) in enumerate(zip(items, t.dims)):
            if isinstance(item, A.Slice):
                start = self.int_expr(item.start, scope) if item.start is not None else sym.const(0)
                stop = self.int_expr(item.stop, scope) if item.stop is not None else dim
                if item.start is not None:
                    self.require(checks, start, ">=", sym.const(0),
                                 f"slice start `{expr_str(item.start)}` in `{kwtext}` must not be "
                                 "negative", span)
                if item.stop is not None:
                    self.require(checks, stop, "<=", dim,
                                 f"slice end `{expr_str(item.stop)}` in `{kwtext}` must be at most "
                                 f"{sym.to_str(dim)}", span)
                if item.start is not None or item.stop is not None:
                    self.require(checks, start, "<=", stop,
                                 f"slice `{expr_str(item)}` in `{kwtext}` must not have a negative "
                                 "length", span)
                offsets.append(start)
                extents.append(sym.sub(stop, start))
                vdims.append(axis)
            else:
                i = self.int_expr(item, scope)
                text = expr_str(item)
                self.require(checks, i, ">=", sym.const(0),
                             f"index `{text}` in `{kwtext}` must not be negative", span)
                self.require(checks, i, "<", dim,
                             f"index `{text}` in `{kwtext}` must be less than {sym.to_str(dim)}",
                             span)
                offsets.append(i)
                extents.append(sym.const(1))
        for axis in range(len(items), len(t.dims)):
            offsets.append(sym.const(0))
            extents.append(t.dims[axis])
            vdims.append(axis)
        # decision: leading view dimensions beyond the tile's two are squeezed (the checker proved them 1); fewer than two are promoted with leading 1s (row_dim/col_dim None)
        for axis in vdims[:-2]:
            self.require(checks, extents[axis], "==", sym.const(1),
                         f"dimension {axis} of `{kwtext}` must have extent 1 to fit {tile_text}",
                         span)
        kept = vdims[-2:]
        row_dim = kept[0] if len(kept) == 2 else None
        col_dim = kept[-1] if kept else None
        for dim_, want, which in ((row_dim, rows, "rows"), (col_dim, cols, "columns")):
            got = extents[dim_] if dim_ is not None else sym.const(1)
            self.require(checks, got, "==", want,
                         f"`{kwtext}` must have {sym.to_str(want)} {which} to fit {tile_text}",
                         span)
        mode = {"In": "r", "Out": "w", "InOut": "rw"}[p.tile.mode]
        return N.TileArg(p.name, t.name, mode, tuple(offsets), tuple(extents), row_dim, col_dim,
                         tuple(checks))

    # ---- schedule combinators
    def combinator(self, c: A.Combinator) -> dict:
        n = c.name.id
        if n == "dispatch":
            return {"dispatch": self.dispatch(c.args[0])}
        if n == "streams":
            return {"streams": self.const_int(c.args[0])}
        if n == "stream_by":
            return {"stream_by": self.key(c.args[0])}
        if n == "timing":
            p = _policy_call(c.args[0])
            f = p.func.id
            if f == "immediate":
                return {"timing": N.Policy("immediate")}
            given = list(p.args) + [kw.value for kw in p.kwargs]
            if f == "rate_limit":
                kind, v = self.scalar(given[0], _Scope())
                rate = sym.const_value(v) if kind == "int" else v
                return {"timing": N.Policy("rate_limit", (rate,))}
            return {"timing": N.Policy(f, (self.const_int(given[0]),))}
        if n == "task_graph":
            out: dict = {}
            for kw in c.kwargs:
                if kw.name == "window":
                    out["window"] = self.const_int(kw.value)
                elif kw.name == "mode":
                    out["window_mode"] = kw.value.id
            return out
        raise InternalError("lower", f"unknown combinator `.{n}`")

    def dispatch(self, e: A.Expr) -> N.Policy:
        # decision: round_robin's count is its argument (`Policy("round_robin", (4,))`, none: the machine's); work_steal's and the key policies' count is `n`
        p = _policy_call(e)
        f = p.func.id
        kws = {kw.name: kw.value for kw in p.kwargs}
        if f == "round_robin":
            given = list(p.args) + list(kws.values())
            return N.Policy("round_robin", tuple(self.const_int(g) for g in given))
        if f == "work_steal":
            given = list(p.args) + list(kws.values())
            return N.Policy("work_steal", (), self.const_int(given[0]) if given else None)
        n = self.const_int(kws["n"]) if "n" in kws else None
        return N.Policy(f, (self.key(p.args[0]),), n)

    def const_int(self, e: A.Expr) -> int:
        v = sym.const_value(self.int_expr(e, _Scope()))
        if v is None:
            raise InternalError("lower", f"`{expr_str(e)}` is not a compile-time integer")
        return v

    def key(self, e: A.Expr) -> sym.Expr:
        """A schedule key over the loop variables' source names (they are the IR names)."""
        scope = _Scope()
        names = _loop_names(self.env, self.workload)
        for n in names:
            scope.names[n] = _Loop(n)
        for node in e.walk():
            if isinstance(node, A.Name) and node.id in names and node.id in self.renamed:
                # decision: a key naming a loop variable that had to be renamed (it shadows an enclosing loop variable or a sym) is not supported
                raise _Unsupported(e.span, f"a schedule key naming the rebound loop variable "
                                   f"`{node.id}` {UNSUPPORTED}")
        return self.int_expr(e, scope)


def _with_records(stmts) -> list[tuple[A.Stmt, tuple[str, ...], Span]]:
    """The statements of a block without its `record`s: (statement, the events recorded right
    after it, the first such `record`)."""
    out: list[list] = []
    for s in stmts:
        if isinstance(s, A.Record):
            if not out:
                raise InternalError("lower", "a `record` with no statement before it")
            # decision: consecutive `record`s mark the statement before the first; an event recorded twice there is marked once
            if s.event.id not in out[-1][1]:
                out[-1][1].append(s.event.id)
            if out[-1][2] is None:
                out[-1][2] = s.span
            continue
        out.append([s, [], None])
    return [(s, tuple(ev), span) for s, ev, span in out]


def _marked(part: list, events: tuple[str, ...], span) -> list:
    """A lowered statement, wrapped in a `Mark` of `events` when it is recorded."""
    if not events:
        return part
    return [N.Mark(events, tuple(part), span)]


def _policy_call(e: A.Expr) -> A.Call:
    return A.Call(e, (), (), span=e.span) if isinstance(e, A.Name) else e


def _outermost_ragged(env: ModuleEnv, wname: str) -> str:
    """The loop `.decompose` without an axis acts on (the checker made sure there is one)."""
    found = outermost_ragged(build_axes(env, env.workloads[wname]))
    if len(found) != 1:
        raise InternalError("lower", f"`{wname}` has no single outermost ragged loop")
    return found[0].name


def _loop_names(env: ModuleEnv, wname: str) -> set[str]:
    """Loop variable source names of a workload and of everything it inlines."""
    out: set[str] = set()
    seen: set[str] = set()
    stack = [wname]
    while stack:
        w = stack.pop()
        if w in seen or w not in env.workloads:
            continue
        seen.add(w)
        for node in _walk_stmts(env.workloads[w].body):
            if isinstance(node, A.ForLoop):
                out.update(v.id for v in node.vars)
            elif isinstance(node, A.Consume):
                out.add(node.var.id)
            elif isinstance(node, A.CallStmt) and node.callee.id in env.workloads:
                stack.append(node.callee.id)
    return out


__all__ = ["lower", "reject_csp"]
