"""Check the invariants of an IR `Module`: `verify(m)` returns None or raises
`InternalError("verify", message)` naming the first broken invariant and where it is.

Checked: op arguments refer to earlier ops; their number, shapes and dtypes agree with each op
(its rule in the primitive table, `ptowsp/primitives/op_rules.py`: elementwise operands of the
op's dtype, broadcast-compatible shapes, reduction and matmul shapes, ...);
stores cover every `Out` exactly once and every `InOut` at most once, with values of the
parameter's dtype and a shape that broadcasts to its tile; tasks name existing kernels and
bind every parameter exactly once; tile boxes have one entry per tensor dimension with valid
row/col dimensions whose constant extents match the tile; every symbol used is a sym, a loop
variable or a Read variable bound around it (a Read binds its variable for the statements after
it in its block), or a slot variable `slot#k` with 0 <= k < 64; loop and Read variables are
unique along every path of the loop tree; Reads read one element of an integer (or bool)
tensor; `When` predicates are well-formed `Cond`s and their bodies verify as blocks; `SlotSet`
slots are in 0..63. A kernel's plan (`KernelPlan`, after `plan-kernels`) is checked as
`_plan` says.

CSP: channels are declared once, and each one with slots has a scratch slot tensor of
`max(depth, 1)` slots of its element type (`u8[S, 1, 1]` for token channels); pipes hold
processes with unique names and at least one replica, whose replica variable is bound in their
body; a process's `sends` are exactly the channels its body sends to, and a pipe's `channels`
exactly those its processes' own bodies consume; a `Send` binds a fresh item variable for its
task, which writes the slot box `[item % S, ...]` once (a tile of a data channel, an `Access`
of a token channel); a `Consume` binds its item variable in its body, and every task inside
reads the item's slot box (a tile or an `Access`); extra accesses are boxes of existing tensors;
`Mark`, `Sync` and `query` name events (`query`: or channels); `uses_csp` says whether the body
uses CSP; `Process` appears only in a `Pipe`, and sends and consumes only inside processes.

Meshes (docs/distributed.md): axes unique, sizes positive or syms; a layout only on a mesh, one
entry per dimension over its axes, no axis twice, none both sharded and partial, no partial
output; a `Collective` as `_collective` says.

Left alone: anything that needs run-time values (symbolic extents, view checks).
"""

from __future__ import annotations

from .. import sym
from ..diagnostics import InternalError
from ..dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES
from ..primitives import OPS, IllTyped, fits_shape
from . import nodes as N
from .kernel_plan import buffer_bytes, held
from .visit import Visitor, own_consumes, schedule_keys, uses_csp, walk

_DISPATCH = ("round_robin", "affinity", "hash", "dispatch_by", "work_steal")
_TIMING = ("immediate", "batched", "interleaved", "rate_limit")
_MODES = {"In": "r", "Out": "w", "InOut": "rw"}


class _Fail(Exception):
    pass


def _fail(message: str):
    raise _Fail(message)


def verify(m: N.Module) -> None:
    """Raise `InternalError("verify", ...)` if `m` breaks an IR invariant."""
    where = f"module `{m.name}`"
    try:
        _unique([s.name for s in m.syms], "sym")
        _unique([t.name for t in m.tensors], "tensor")
        _unique([k.name for k in m.kernels], "kernel")
        _unique([s.name for s in m.schedules], "schedule")
        syms = {s.name for s in m.syms}
        for t in m.tensors:
            where = f"tensor `{t.name}`"
            if t.kind not in ("input", "output", "inout", "scratch"):
                _fail(f"unknown tensor kind `{t.kind}`")
            _dtype(t.dtype)
            for d in t.dims:
                _bound(d, syms, "a dimension")
        if m.mesh is not None:
            where = "the mesh"
            _mesh(m.mesh, syms)
        for t in m.tensors:
            if t.layout is not None:
                where = f"tensor `{t.name}`"
                _layout(t, m.mesh)
        for c in m.checks:
            where = "module checks"
            _check(c, syms, "a check")
        for k in m.kernels:
            where = f"kernel `{k.name}`"
            _kernel(k)
        kernels = {k.name: k for k in m.kernels}
        tensors = {t.name: t for t in m.tensors}
        channels = {c.name: c for c in m.channels}
        _unique([c.name for c in m.channels], "channel")
        for c in m.channels:
            where = f"channel `{c.name}`"
            _channel(c, tensors, m.devices)
        for s in m.schedules:
            where = f"schedule `{s.name}`"
            _Schedule(s, kernels, tensors, syms, channels, m.mesh, m.devices).run()
        names = {s.name for s in m.schedules}
        if m.default_schedule is not None and m.default_schedule not in names:
            where = f"module `{m.name}`"
            _fail(f"the default schedule `{m.default_schedule}` does not exist")
    except _Fail as f:
        raise InternalError("verify", f"{where}: {f}") from None


def _mesh(mesh: N.Mesh, syms) -> None:
    _unique([a.name for a in mesh.axes], "mesh axis")
    if not mesh.axes:
        _fail("a mesh has at least one axis")
    for a in mesh.axes:
        v = sym.const_value(a.size)
        if v is not None and v < 1:
            _fail(f"mesh axis `{a.name}` has {v} devices")
        _bound(a.size, syms, "a mesh axis size")


def _layout(t: N.TensorDecl, mesh) -> None:
    """A layout: on a mesh, one entry per dimension, axes of the mesh, each axis sharding one
    dimension at most and not also partial; an output is not partial."""
    lay = t.layout
    if mesh is None:
        _fail("a layout without a mesh")
    if len(lay.dims) != len(t.dims):
        _fail(f"a layout of {len(lay.dims)} entries for {len(t.dims)} dimensions")
    names = {a.name for a in mesh.axes}
    sharded = [a for a in lay.dims if a is not None]
    for a in sharded + list(lay.partial):
        if a not in names:
            _fail(f"`{a}` is not a mesh axis")
    if len(set(sharded)) != len(sharded) or len(set(lay.partial)) != len(lay.partial):
        _fail("a mesh axis appears twice in a layout")
    if set(sharded) & set(lay.partial):
        _fail("a mesh axis both shards and is partial")
    if lay.partial and t.kind == "output":
        _fail("an output is partial")


def _collective(st: N.Collective, tensors, mesh) -> None:
    """A collective: a known kind on a mesh, two distinct tensors of one shape and dtype, the
    words its kind takes (`over` a mesh axis, `op` for reductions, `dim` for reduce_scatter)."""
    if mesh is None:
        _fail(f"`{st.kind}` in a module without a mesh")
    if st.kind not in N.COLLECTIVE_KINDS:
        _fail(f"unknown collective `{st.kind}`")
    for name in (st.source, st.into):
        if name not in tensors:
            _fail(f"`{st.kind}` names the unknown tensor `{name}`")
    a, b = tensors[st.source], tensors[st.into]
    if a.name == b.name or a.dtype != b.dtype or len(a.dims) != len(b.dims):
        _fail(f"`{st.kind}({a.name}, into = {b.name})`: two tensors of one type")
    if b.kind == "input":
        _fail(f"`{st.kind}` writes the input `{b.name}`")
    if (st.over is None) != (st.kind == "relayout"):
        _fail(f"`{st.kind}` with over = {st.over}")
    if st.over is not None and st.over not in {x.name for x in mesh.axes}:
        _fail(f"`{st.kind}` over `{st.over}`, not a mesh axis")
    reduces = st.kind in ("allreduce", "reduce_scatter")
    if (st.op is not None) != reduces or (reduces and st.op not in ("sum", "max", "min")):
        _fail(f"`{st.kind}` with op = {st.op}")
    if (st.dim is not None) != (st.kind == "reduce_scatter") or (
            st.dim is not None and not 0 <= st.dim < len(a.dims)):
        _fail(f"`{st.kind}` with dim = {st.dim}")


def _channel(c: N.Channel, tensors, devices=None) -> None:
    if c.depth < 0:
        _fail(f"depth {c.depth}")
    if c.is_event and (c.depth != 0 or c.elem is not None):
        _fail("an event is a token channel of depth 0")
    if c.slots is None:
        return
    if c.slots != N.slots_name(c.name):
        _fail(f"slot tensor `{c.slots}` should be `{N.slots_name(c.name)}`")
    t = tensors.get(c.slots)
    if t is None or t.kind != "scratch":
        _fail(f"slot tensor `{c.slots}` is not a scratch tensor of the module")
    rows, cols, dtype = c.elem if c.elem is not None else (1, 1, "u8")
    dims = tuple(sym.const_value(d) for d in t.dims)
    if devices is not None and devices.placed(c.slots) is not None:
        dims = dims[1:]  # the device dimension: each device's own slots (ir/devices.py)
    if t.dtype != dtype or dims != (c.nslots, rows, cols):
        _fail(f"slot tensor `{c.slots}` is {t.dtype}{list(dims)}, should be "
              f"{dtype}{[c.nslots, rows, cols]}")


def _unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            _fail(f"{what} `{n}` is declared twice")
        seen.add(n)


def _dtype(dt: str) -> None:
    if dt not in DTYPES:
        _fail(f"unknown dtype `{dt}`")


def _slot(name: str):
    """k when `name` is the variable of slot k (0 <= k < NSLOTS), else None."""
    try:
        k = N.slot_index(name)
    except ValueError:
        return None
    return k if k is not None and 0 <= k < N.NSLOTS and name == N.slot_var(k) else None


def _bound(e, names, what: str) -> None:
    """Every symbol of `e` is in `names` or is a slot variable."""
    free = sym.free_vars(e)
    missing = sorted(v for v in free - names if _slot(v) is None)
    if missing:
        _fail(f"{what} `{sym.to_str(e)}` uses unbound symbol `{missing[0]}`")


def _check(c: N.ViewCheck, names, what: str) -> None:
    _bound(c.check.lhs, names, what)
    _bound(c.check.rhs, names, what)
    for e in c.shown:
        _bound(e, names, what)


_COND_OPS = ("==", "!=", "<", "<=", ">", ">=")


def _cond(c, names, channels=None) -> None:
    if not isinstance(c, N.Cond):
        _fail(f"a `when` predicate is a {type(c).__name__}, not a Cond")
    if c.op in _COND_OPS:
        if len(c.args) != 2 or not all(isinstance(a, sym.Expr) for a in c.args):
            _fail(f"comparison `{c.op}` needs two integer expressions")
        for a in c.args:
            _bound(a, names, "a predicate")
    elif c.op in ("and", "or", "not"):
        if len(c.args) != (1 if c.op == "not" else 2):
            _fail(f"`{c.op}` has {len(c.args)} operands")
        for a in c.args:
            _cond(a, names, channels)
    elif c.op == "const":
        if len(c.args) != 1 or not isinstance(c.args[0], bool):
            _fail("a constant predicate needs one bool")
    elif c.op == "query":
        if len(c.args) != 1 or not isinstance(c.args[0], str):
            _fail("`query` needs one channel name")
        if channels is not None and c.args[0] not in channels:
            _fail(f"`query({c.args[0]})` of a channel that does not exist")
    else:
        _fail(f"unknown predicate `{c.op}`")


# ---------------------------------------------------------------------------------------------
# Kernels


def _kernel(k: N.Kernel) -> None:
    _unique([p.name for p in k.params], "parameter")
    params = {p.name: p for p in k.params}
    for p in k.params:
        _dtype(p.dtype)
        if p.kind == "tile":
            if p.mode not in _MODES:
                _fail(f"tile parameter `{p.name}` has mode `{p.mode}`")
            if p.rows <= 0 or p.cols <= 0:
                _fail(f"tile parameter `{p.name}` has shape [{p.rows}, {p.cols}]")
        elif p.kind == "scalar":
            if p.mode is not None:
                _fail(f"scalar parameter `{p.name}` has a mode")
        else:
            _fail(f"parameter `{p.name}` has kind `{p.kind}`")
    if k.cycles is not None:
        ints = {p.name for p in k.params if p.kind == "scalar" and p.dtype in INT_DTYPES}
        if not isinstance(k.cycles, sym.Expr) or not sym.free_vars(k.cycles) <= ints:
            _fail("`add_cycles` names other than the kernel's integer scalar parameters")
    if k.is_extern:
        if k.ops or k.stores:
            _fail("an extern kernel has ops or stores")
        return
    for i, op in enumerate(k.ops):
        try:
            _op(op, i, k.ops, params)
        except _Fail as f:
            raise _Fail(f"op %{i} ({op.op}): {f}") from None
    counts: dict[str, int] = {}
    for name, idx in k.stores:
        p = params.get(name)
        if p is None or p.kind != "tile" or p.mode == "In":
            _fail(f"store to `{name}`, which is not an Out or InOut parameter")
        if not 0 <= idx < len(k.ops):
            _fail(f"store to `{name}` of op %{idx}, which does not exist")
        v = k.ops[idx]
        if v.dtype != p.dtype:
            _fail(f"store to `{name}` ({p.dtype}) of an {v.dtype} value")
        if not fits_shape(v.shape, (p.rows, p.cols)):
            _fail(f"store to `{name}` [{p.rows}, {p.cols}] of a {list(v.shape)} value")
        counts[name] = counts.get(name, 0) + 1
    for p in k.params:
        n = counts.get(p.name, 0)
        if p.mode == "Out" and n != 1:
            _fail(f"Out parameter `{p.name}` is stored {n} times (exactly once needed)")
        if p.mode == "InOut" and n > 1:
            _fail(f"InOut parameter `{p.name}` is stored {n} times (at most once allowed)")
    if k.plan is not None:
        try:
            _plan(k)
        except _Fail as f:
            raise _Fail(f"plan: {f}") from None


def _op(op: N.Op, i: int, ops, params) -> None:
    spec = OPS.get(op.op)
    if spec is None:
        _fail("unknown operation")
    _dtype(op.dtype)
    for a in op.args:
        if not 0 <= a < i:
            _fail(f"argument %{a} is not an earlier op")
    args = [ops[a] for a in op.args]
    if op.shape is not None and (len(op.shape) != 2 or min(op.shape) <= 0):
        _fail(f"bad shape {op.shape}")
    if len(args) not in spec.arity:
        _fail(f"takes {' or '.join(map(str, spec.arity))} arguments, has {len(args)}")
    try:
        spec.rule(op, args, params)
    except IllTyped as e:
        raise _Fail(str(e)) from None


def _plan(k: N.Kernel) -> None:
    """A kernel plan's invariants: kinds fit the ops; every nest, reduction and matmul op is
    in exactly one step, at its nest's shape; a value read outside its nest has an array and
    is made in an earlier step (or an earlier nest of the same row-by-row step); the stores of
    nests, `stores` and `into` are the kernel's; values sharing a buffer are never live at once,
    fit it and share its held dtype; the byte counts add up."""
    plan, ops = k.plan, k.ops
    kinds = plan.kinds
    if len(kinds) != len(ops) or len(plan.levels) != len(ops):
        _fail(f"{len(kinds)} kinds and {len(plan.levels)} levels for {len(ops)} ops")
    for i, (op, kd) in enumerate(zip(ops, kinds)):
        if kd == "scalar":
            ok = op.shape is None
        else:  # an inline op is an elementwise one recomputed where it is read
            ok = op.shape is not None and OPS[op.op].plan == ("ew" if kd == "inline" else kd)
        if ok and kd == "inline":
            ok = all(kinds[a] in ("scalar", "leaf", "inline") for a in op.args)
        if not ok:
            _fail(f"op %{i} ({op.op}) cannot be `{kd}`")
    pos: dict[int, tuple[int, int]] = {}  # a value made in a step -> (step, nest)
    nest_stores: list[tuple[str, int]] = []
    for s, step in enumerate(plan.steps):
        if (step.matmul is not None) + (step.select is not None) + bool(step.nests) != 1:
            _fail(f"step {s} is not one of a matmul, a selection or nests")
        made: list[tuple[int, int]] = []
        if step.select is not None:
            if kinds[step.select] != "select":
                _fail(f"step {s}: %{step.select} is not a selection")
            made.append((step.select, 0))
        if step.matmul is not None:
            if kinds[step.matmul] != "matmul":
                _fail(f"step {s}: %{step.matmul} is not a matmul")
            made.append((step.matmul, 0))
        for t_i, t in enumerate(step.nests):
            if len(step.nests) > 1 and (t.colreds or t.shape[0] != step.nests[0].shape[0]):
                _fail(f"step {s}: nests run row by row need the same rows, no column reductions")
            for i in t.ops:
                if kinds[i] != "ew" or ops[i].shape != t.shape:
                    _fail(f"step {s}: %{i} is not elementwise at the nest's shape {t.shape}")
            for prefix, reds in (("row", t.rowreds), ("col", t.colreds)):
                for r in reds:
                    if kinds[r] != "red" or OPS[ops[r].op].axis != prefix \
                            or ops[ops[r].args[0]].shape != t.shape:
                        _fail(f"step {s}: %{r} is not a {prefix} reduction over {t.shape}")
            made.extend((i, t_i) for i in t.ops + t.rowreds + t.colreds)
            nest_stores.extend(t.stores)
            for _, v in t.stores:
                if v not in t.ops:
                    _fail(f"step {s}: a nest stores %{v}, which it does not compute")
        for i, t_i in made:
            if i in pos:
                _fail(f"%{i} is made twice")
            pos[i] = (s, t_i)
    for i, kd in enumerate(kinds):
        if kd in ("ew", "red", "matmul", "select") and i not in pos:
            _fail(f"%{i} ({ops[i].op}) is in no step")
    buf = dict(plan.assign)
    into = dict(plan.into)
    last: dict[int, int] = {}

    def reads(u: int, where: tuple[int, int]) -> None:
        if kinds[u] in ("view", "inline"):
            for a in ops[u].args:
                reads(a, where)
        elif kinds[u] in ("ew", "red", "matmul", "select"):
            if u not in buf:
                _fail(f"%{u} is read outside its nest but has no array")
            if pos[u] >= where:
                _fail(f"%{u} is read before it is made")
            last[u] = max(last.get(u, -1), where[0])

    for s, step in enumerate(plan.steps):
        for own in (step.matmul, step.select):
            for a in ops[own].args if own is not None else ():
                reads(a, (s, 0))
        for t_i, t in enumerate(step.nests):
            for i in t.ops + t.rowreds + t.colreds:
                for a in ops[i].args:
                    if not (kinds[a] == "ew" and pos[a] == (s, t_i)):
                        reads(a, (s, t_i))
    for _, v in plan.stores:
        reads(v, (len(plan.steps), 0))
    if sorted(nest_stores + list(plan.stores) + [(p, m) for m, p in into.items()]) \
            != sorted(k.stores):
        _fail("the stores of the nests, after the steps and of matmuls into tiles are not "
              "the kernel's")
    for m in into:
        if kinds[m] != "matmul" or m in buf:
            _fail(f"%{m} is computed into a tile but is not a matmul without an array")
    for u, b in buf.items():
        if kinds[u] not in ("ew", "red", "matmul", "select") or not 0 <= b < len(plan.buffers):
            _fail(f"%{u} has no array of its own kind, or buffer b{b} does not exist")
        dt, n = plan.buffers[b]
        if held(ops[u].dtype) != dt or ops[u].shape[0] * ops[u].shape[1] > n:
            _fail(f"%{u} ({ops[u].dtype}{list(ops[u].shape)}) does not fit buffer b{b} {dt}[{n}]")
    live = {u: (pos[u][0], last.get(u, pos[u][0])) for u in buf}
    for u in buf:
        for w in buf:
            if u < w and buf[u] == buf[w] and not (live[u][1] < live[w][0]
                                                   or live[w][1] < live[u][0]):
                _fail(f"%{u} and %{w} share buffer b{buf[u]} while both are live")
    before = sum(buffer_bytes(held(ops[u].dtype), ops[u].shape[0] * ops[u].shape[1]) for u in buf)
    after = sum(buffer_bytes(dt, n) for dt, n in plan.buffers)
    if (before, after) != (plan.temp_bytes_before, plan.temp_bytes_after):
        _fail(f"temporaries {plan.temp_bytes_before} -> {plan.temp_bytes_after} bytes, "
              f"but the buffers say {before} -> {after}")


# ---------------------------------------------------------------------------------------------
# Schedules


class _Schedule(Visitor):
    def __init__(self, s: N.Schedule, kernels, tensors, syms: set[str], channels=None,
                 mesh=None, devices=None):
        self.s, self.kernels, self.tensors, self.syms = s, kernels, tensors, syms
        self.mesh = mesh
        self.devices = devices
        self.channels: dict[str, N.Channel] = dict(channels or {})
        self.keys: list[sym.Expr] = []
        # CSP context while walking: inside a process; the items of the enclosing consumes
        self.in_process = 0
        self.items: list[tuple[N.Channel, str]] = []

    def run(self) -> None:
        s = self.s
        self.keys = schedule_keys(s)
        for p, allowed in ((s.dispatch, _DISPATCH), (s.timing, _TIMING)):
            if p.name not in allowed:
                _fail(f"unknown policy `{p.name}`")
        if s.dispatch.name in ("affinity", "hash", "dispatch_by"):
            if len(s.dispatch.args) != 1 or not isinstance(s.dispatch.args[0], sym.Expr):
                _fail(f"`{s.dispatch.name}` needs one key expression")
        for n in ((s.dispatch.n,) + tuple(a for a in s.dispatch.args if isinstance(a, int))):
            if n is not None and n < 1:
                _fail("a dispatcher count must be positive")
        if s.streams < 1:
            _fail("the stream count must be positive")
        if s.window is not None and s.window < 1:
            _fail("the task window must be positive")
        if s.window_mode not in ("stall", "abort"):
            _fail(f"unknown window mode `{s.window_mode}`")
        self.graph_knobs(s)
        if s.uses_csp != uses_csp(s.body):
            does = "does" if not s.uses_csp else "does not"
            _fail(f"`uses_csp` is {s.uses_csp}, but the body {does} use CSP")
        self.body(s.body, frozenset(self.syms))

    def graph_knobs(self, s: N.Schedule) -> None:
        """The task-graph knobs: known names, a key where one is taken, positive counts."""
        if s.deps not in ("infer_tensor_map_exact", "infer_bytes_overlap", "explicit", "hybrid"):
            _fail(f"unknown dependency mode `{s.deps}`")
        if s.trace not in ("none", "cycles"):
            _fail(f"unknown trace policy `{s.trace}`")
        if s.trace_cost is not None:
            if s.trace != "cycles" or not isinstance(s.trace_cost, sym.Expr):
                _fail("a task cost key needs `trace = cycles(key)`")
        keyed = {"priority": 1, "fifo": 0, "work_steal": 0}
        if keyed.get(s.ready.name) != len(s.ready.args):
            _fail(f"bad ready policy `{s.ready.name}` with {len(s.ready.args)} key(s)")
        keyed = {"custom": 1, "single": 0, "by_exec_unit": 0}
        if keyed.get(s.pools.name) != len(s.pools.args):
            _fail(f"bad pool policy `{s.pools.name}` with {len(s.pools.args)} key(s)")
        if s.pools.name == "custom" and (s.pools.n is None or s.pools.n < 1):
            _fail("a custom pool policy needs a positive pool count")
        if not ((s.start.name == "threshold" and len(s.start.args) == 1 and s.start.args[0] >= 1)
                or (s.start.name == "after_orchestration" and not s.start.args)):
            _fail(f"bad start policy `{s.start.name}`")

    def body(self, stmts, names: frozenset) -> None:
        """`names`: the syms, loop variables and Read variables bound around `stmts`; a Read
        binds its variable for the statements after it in its block (and inside them)."""
        for st in stmts:
            self.visit(st, names)
            if isinstance(st, N.Read):
                names = names | {st.var}

    def visit_other(self, st, names: frozenset) -> None:
        _fail(f"unexpected statement {type(st).__name__}")

    def visit_Loop(self, st: N.Loop, names: frozenset) -> None:
        if st.var in names:
            _fail(f"loop variable `{st.var}` rebinds a name bound around it")
        if st.kind not in ("grid", "seq"):
            _fail(f"loop kind `{st.kind}`")
        _bound(st.extent, names, f"the extent of `{st.var}`")
        self.body(st.body, names | {st.var})

    def visit_Block(self, st: N.Block, names: frozenset) -> None:
        if st.kind not in ("combine", "sequential"):
            _fail(f"block kind `{st.kind}`")
        self.body(st.body, names)

    def visit_Task(self, st: N.Task, names: frozenset) -> None:
        try:
            self.task(st, names)
        except _Fail as f:
            raise _Fail(f"task `{st.text}`: {f}") from None

    def visit_Read(self, st: N.Read, names: frozenset) -> None:
        self.read(st, names)

    def visit_Assert(self, st: N.Assert, names: frozenset) -> None:
        _check(st.check, names, "an assert")

    def visit_When(self, st: N.When, names: frozenset) -> None:
        if not st.branches:
            _fail("a `when` without branches")
        for c, body in st.branches:
            _cond(c, names, self.channels)
            self.body(body, names)
        self.body(st.otherwise, names)

    def visit_SlotSet(self, st: N.SlotSet, names: frozenset) -> None:
        if not (isinstance(st.slot, int) and 0 <= st.slot < N.NSLOTS):
            _fail(f"slot {st.slot} does not exist (slots are 0 to {N.NSLOTS - 1})")
        _bound(st.value, names, f"the value of slot {st.slot}")

    def visit_Mark(self, st: N.Mark, names: frozenset) -> None:
        for ev in st.events:
            self.event(ev, "a `Mark`")
        self.body(st.body, names)

    def visit_Collective(self, st: N.Collective, names: frozenset) -> None:
        _collective(st, self.tensors, self.mesh)

    def visit_Sync(self, st: N.Sync, names: frozenset) -> None:
        self.event(st.event, "a `Sync`")

    def visit_Process(self, st: N.Process, names: frozenset) -> None:
        _fail(f"process `{st.name}` outside a pipe")

    # ---- CSP
    def event(self, name: str, what: str) -> None:
        c = self.channels.get(name)
        if c is None or not c.is_event:
            _fail(f"{what} of `{name}`, which is not an event")

    def slotted(self, name: str, what: str) -> N.Channel:
        c = self.channels.get(name)
        if c is None:
            _fail(f"{what} channel `{name}`, which does not exist")
        if c.slots is None:
            _fail(f"{what} channel `{name}`, which has no slot tensor")
        return c

    def at_slot(self, a, c: N.Channel, item: str) -> bool:
        """Whether access or tile `a` is the slot box of item `item` of `c` (on one device of
        a mesh: the box with the device's index in front, ir/devices.py)."""
        offsets, extents = c.slot_box(item)
        if a.tensor != c.slots:
            return False
        if self.devices is not None and self.devices.placed(c.slots) is not None:
            return a.offsets[1:] == offsets and a.extents == (sym.const(1), *extents)
        return (a.offsets, a.extents) == (offsets, extents)

    def visit_Pipe(self, p: N.Pipe, names: frozenset) -> None:
        _unique([q.name for q in p.processes], "process")
        owned: list[str] = []
        for q in p.processes:
            try:
                if q.replicas < 1:
                    _fail(f"{q.replicas} replicas")
                if q.id_var is None and q.replicas != 1:
                    _fail(f"{q.replicas} replicas without a replica variable")
                inner = names
                if q.id_var is not None:
                    if q.id_var in names:
                        _fail(f"replica variable `{q.id_var}` rebinds a name bound around it")
                    inner = names | {q.id_var}
                sends = []
                for st in walk(q.body):
                    if isinstance(st, N.Send) and st.channel not in sends:
                        sends.append(st.channel)
                if sorted(sends) != sorted(q.sends):
                    _fail(f"`sends` is {list(q.sends)}, but the body sends to {sends}")
                for c in own_consumes(q.body):
                    if c not in owned:
                        owned.append(c)
                saved = self.in_process
                self.in_process += 1
                try:
                    self.body(q.body, inner)
                finally:
                    self.in_process = saved
            except _Fail as f:
                raise _Fail(f"process `{q.name}`: {f}") from None
        if sorted(owned) != sorted(p.channels):
            _fail(f"a pipe owns {list(p.channels)}, but its processes consume {owned}")

    def visit_Send(self, st: N.Send, names: frozenset) -> None:
        if not self.in_process:
            _fail(f"a send to `{st.channel}` outside a process")
        c = self.slotted(st.channel, "a send to")
        if st.item in names or _slot(st.item) is not None:
            _fail(f"send item variable `{st.item}` rebinds a name bound around it")
        inner = names | {st.item}
        self.body((st.task,), inner)
        writes = [a for a in st.task.args if isinstance(a, N.TileArg) and a.tensor == c.slots]
        writes += [x for x in st.task.extra if x.tensor == c.slots and x.mode != "r"]
        if len(writes) != 1 or not self.at_slot(writes[0], c, st.item):
            _fail(f"the task of a send to `{c.name}` must write the slot box of `{st.item}` "
                  "exactly once")
        if c.elem is not None and not isinstance(writes[0], N.TileArg):
            _fail(f"a send to data channel `{c.name}` writes its slot without a tile")

    def visit_Consume(self, st: N.Consume, names: frozenset) -> None:
        if not self.in_process:
            _fail(f"a consume of `{st.channel}` outside a process")
        c = self.slotted(st.channel, "a consume of")
        if st.item in names or _slot(st.item) is not None:
            _fail(f"item variable `{st.item}` rebinds a name bound around it")
        self.items.append((c, st.item))
        try:
            self.body(st.body, names | {st.item})
        finally:
            self.items.pop()

    def read(self, r: N.Read, names: frozenset) -> None:
        if r.var in names:
            _fail(f"read variable `{r.var}` rebinds a name bound around it")
        if _slot(r.var) is not None:
            _fail(f"read variable `{r.var}` is spelled like a slot")
        t = self.tensors.get(r.tensor)
        if t is None:
            _fail(f"read `{r.var}` of tensor `{r.tensor}`, which does not exist")
        if t.dtype not in INT_DTYPES and t.dtype != "bool":
            _fail(f"read `{r.var}` of {t.dtype} tensor `{t.name}` (only integer elements)")
        if len(r.index) != len(t.dims):
            _fail(f"read `{r.var}` has {len(r.index)} indices for a {len(t.dims)}-D tensor")
        for i in r.index:
            _bound(i, names, f"an index of read `{r.var}`")
        for c in r.checks:
            _check(c, names, f"a check of read `{r.var}`")

    def task(self, t: N.Task, names: set[str]) -> None:
        k = self.kernels.get(t.kernel)
        if k is None:
            _fail(f"kernel `{t.kernel}` does not exist")
        for c in t.coords:
            _bound(c, names, "a coordinate")
        for key in self.keys:
            _bound(key, names, "a schedule key")
        params = {p.name: p for p in k.params}
        seen: set[str] = set()
        for a in t.args:
            p = params.get(a.param)
            if p is None:
                _fail(f"binds `{a.param}`, which `{k.name}` does not have")
            if a.param in seen:
                _fail(f"binds `{a.param}` twice")
            seen.add(a.param)
            if isinstance(a, N.TileArg):
                self.tile_arg(a, p, names)
            elif isinstance(a, N.ScalarArg):
                if p.kind != "scalar":
                    _fail(f"a scalar value for tile parameter `{p.name}`")
                if a.dtype != p.dtype:
                    _fail(f"scalar `{p.name}` given as {a.dtype}, declared {p.dtype}")
                if isinstance(a.value, sym.Expr):
                    if p.dtype == "bool":
                        _fail(f"an integer expression for bool scalar `{p.name}`")
                    _bound(a.value, names, f"the value of `{p.name}`")
                elif isinstance(a.value, bool) != (p.dtype == "bool"):
                    _fail(f"a {type(a.value).__name__} value for {p.dtype} scalar `{p.name}`")
                elif isinstance(a.value, float) and p.dtype not in FLOAT_DTYPES:
                    _fail(f"a float value for {p.dtype} scalar `{p.name}`")
            else:
                _fail(f"unexpected argument {type(a).__name__}")
        missing = [p.name for p in k.params if p.name not in seen]
        if missing:
            _fail(f"does not bind `{missing[0]}`")
        for x in t.extra:
            if not isinstance(x, N.Access):
                _fail(f"an extra access is a {type(x).__name__}")
            tt = self.tensors.get(x.tensor)
            if tt is None:
                _fail(f"an extra access of tensor `{x.tensor}`, which does not exist")
            if x.mode not in ("r", "w", "rw"):
                _fail(f"an extra access has mode `{x.mode}`")
            if len(x.offsets) != len(tt.dims) or len(x.extents) != len(tt.dims):
                _fail(f"an extra access of `{x.tensor}` has {len(x.offsets)} offsets and "
                      f"{len(x.extents)} extents for a {len(tt.dims)}-D tensor")
            for e in x.offsets + x.extents:
                _bound(e, names, f"an extra access of `{x.tensor}`")
        for c, item in self.items:
            accesses = [a for a in list(t.args) + list(t.extra)
                        if isinstance(a, (N.TileArg, N.Access))]
            if not any(self.at_slot(a, c, item) and a.mode != "w" for a in accesses):
                _fail(f"does not read the slot of item `{item}` of `{c.name}`, whose consume "
                      "body it is in")

    def tile_arg(self, a: N.TileArg, p: N.KParam, names: set[str]) -> None:
        if p.kind != "tile":
            _fail(f"a tensor region for scalar parameter `{p.name}`")
        t = self.tensors.get(a.tensor)
        if t is None:
            _fail(f"tensor `{a.tensor}` does not exist")
        if a.mode != _MODES[p.mode]:
            _fail(f"`{p.name}` is {p.mode} but its region has mode `{a.mode}`")
        if a.mode != "r" and t.kind == "input":
            _fail(f"`{p.name}` writes input tensor `{t.name}`")
        if t.dtype != p.dtype:
            _fail(f"`{p.name}` ({p.dtype}) is bound to {t.dtype} tensor `{t.name}`")
        nd = len(t.dims)
        if len(a.offsets) != nd or len(a.extents) != nd:
            _fail(f"the box of `{p.name}` has {len(a.offsets)} offsets and {len(a.extents)} "
                  f"extents for a {nd}-D tensor")
        for d in (a.row_dim, a.col_dim):
            if d is not None and not 0 <= d < nd:
                _fail(f"dimension {d} of `{p.name}` is not a dimension of `{t.name}`")
        if a.steps and (len(a.steps) != nd or any(not isinstance(k, int) or k < 1
                                                  for k in a.steps)):
            _fail(f"the steps of `{p.name}` are {a.steps} for a {nd}-D tensor")
        if a.row_dim is not None and a.row_dim == a.col_dim:
            _fail(f"`{p.name}`'s rows and columns are both dimension {a.row_dim}")
        g = a.gather
        if g is not None:
            # a gather view: the box spans the whole row dimension; the rows are the Reads'
            it = self.tensors.get(g.index)
            if a.mode != "r" or a.row_dim is None or a.transposed:
                _fail(f"gather view `{p.name}` is not a read of rows")
            if len(g.rows) != p.rows:
                _fail(f"gather view `{p.name}` gathers {len(g.rows)} rows for {p.rows}")
            if it is None or len(g.offsets) != len(it.dims) or len(g.extents) != len(it.dims):
                _fail(f"gather view `{p.name}` has a bad index box of `{g.index}`")
            for e in g.rows + g.offsets + g.extents + ((g.base,) if g.base is not None else ()):
                _bound(e, names, f"the gather of `{p.name}`")
        for d, want, part in ((a.row_dim, p.rows, a.partial[0]), (a.col_dim, p.cols, a.partial[1])):
            if g is not None and d == a.row_dim:
                continue
            got = 1 if d is None else sym.const_value(a.extents[d])
            if got is not None and (got != want if not part else not 1 <= got <= want):
                _fail(f"`{p.name}` has extent {got} where the tile has {want}"
                      + (" (a partial view)" if part else ""))
        for d in range(nd):
            if d in (a.row_dim, a.col_dim):
                continue
            e = sym.const_value(a.extents[d])
            if e is not None and e != 1:
                _fail(f"dimension {d} of `{p.name}`'s box has extent {e} but is not a tile "
                      "dimension")
        for e in a.offsets + a.extents:
            _bound(e, names, f"the box of `{p.name}`")
        for c in a.checks:
            _check(c, names, "a view check")


__all__ = ["verify"]
