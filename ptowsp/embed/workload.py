"""The Python decorator API of the PTO-WSP seed documents: `@workload`, the `P` namespace,
composition (`combine`, `sequential`, `cond`), slots, and the `Workload` with its combinator
chain ending in `.compile()`, all building the AST the parser builds for `.wsp` text.

A `@workload` function runs once when it is called, with a `Trace` active: `for b in P(batch):`
iterates exactly once, yielding a symbolic loop variable while the loop body is recorded, and
emits a `ForLoop` when the iterator is resumed at the end of the body; `with P.when(...)` and
`with consume(ch) as t` work the same way with context managers; a kernel call `k[b](...)`
emits a `CallStmt`. Python control flow on run-time values is an error at its line.

`assemble.assemble(w)` turns a `Workload` into one `SourceFile`, checked by the same checker
as a parsed file; `to_wsp(w)` prints that `SourceFile` as `.wsp` text. Schedule policies are
in `schedule.py`, kernels in `kernel.py`, CSP in `csp.py`.

Why one file: `P`'s loops and blocks, the composition builders and `Workload` are one trace's
three faces (a builder called outside a workload is a `Workload` of its own, and a `Workload`
called inside one inlines its statements), so splitting them would make the layers of
`__init__.py` import in a cycle.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
import types
from typing import Any, Optional

from ..api import Program as _RuntimeProgram
from ..diagnostics import InternalError, WspError
from ..frontend import ast as A
from .assemble import assemble, build_module
from .axes import Axis, AxisIndex, Sparse, axis_expr, flat_selection, wrap_row
from .errors import CompileError, ScheduleError, from_wsp, user_error
from .host_keys import host_key
from .names import wsp_ident
from .program import EmittedProgram, Program, enumerate_tasks
from .schedule import (
    Deps,
    DepsMode,
    Policy,
    PoolNames,
    TaskGraphConfig,
    TaskProxy,
    TaskWindow,
    WindowMode,
)
from .source import def_span, here, stored_names, user_frame
from .trace import Fragment, Trace, current, pop, push, tracing
from .values import (
    HostDecision,
    LoopVar,
    ScalarExpr,
    Symbol,
    Tensor,
    TensorView,
    as_scalar,
    ceildiv,
    smax,
    smin,
    value_node,
)

# ---------------------------------------------------------------------------------------------
# The P namespace


class _Loop:
    """`P(...)`, `P.grid(...)`, `P.seq(...)`, `P.sel(...)`: a loop that runs its body once."""

    def __init__(self, kind: str, spelling: str, axes: tuple, span: A.Span):
        self.kind, self.spelling, self.axes, self.span = kind, spelling, axes, span
        self.state = 0
        self.row: Optional[str] = None  # the row variable of a `Sparse(indices)` (axes.py)
        self.given: Optional[list] = None  # the prototype's `names=` / `name=`

    def __iter__(self) -> "_Loop":
        return self

    def __next__(self):
        if self.state == 0:
            t = current()
            if t is None:
                raise user_error(self.span, f"`{self.spelling}(...)` is iterated outside a workload",
                                 "loop inside a `@workload` function, or use "
                                 "`for_each(axis, lambda i: ...)`")
            self.trace = t
            names = self.given or stored_names(user_frame()) or []
            n = len(self.axes)
            if len(names) != n:
                base = names[0] if len(names) == 1 else "i"
                names = [f"{base}{k}" for k in range(n)]
            self.names = [wsp_ident(x) for x in names]
            if self.row is not None:
                t.open()  # the row loop's body (wrap_row)
            self.nodes = tuple(axis_expr(a, t, self.span) for a in self.axes)
            t.open()
            self.state = 1
            vars_ = [LoopVar(x, "loop", self.span) for x in self.names]
            return vars_[0] if n == 1 else tuple(vars_)
        if self.state == 1:
            self.state = 2
            t = self.trace
            body = t.close()
            t.emit(A.ForLoop(tuple(A.Name(x, span=self.span) for x in self.names), self.kind,
                             self.nodes, tuple(body), self.spelling, span=self.span))
            if self.row is not None:
                wrap_row(t, self.axes[0], self.row, t.close(), self.span)
        raise StopIteration


class _Block:
    """A context manager recording a block (`P.when`, `P.otherwise`, `P.pipe`)."""

    def __init__(self, what: str, span: A.Span):
        self.what, self.span = what, span

    def __enter__(self):
        t = current()
        if t is None:
            raise user_error(self.span, f"`{self.what}` only works inside a `@workload` function")
        self.trace = t
        self.before()
        t.open()
        return None

    def before(self) -> None:
        pass

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            return
        body = self.trace.close()
        self.after(body)

    def after(self, body: list) -> None:  # pragma: no cover - subclasses
        raise InternalError("embed", f"block {self.what} does not emit its statement")


class _When(_Block):
    def __init__(self, pred: Any, span: A.Span):
        super().__init__("P.when", span)
        self.pred = as_scalar(pred, span)

    def before(self) -> None:
        self.trace.adopt(self.pred.objs)

    def after(self, body: list) -> None:
        branch = A.WhenBranch(self.pred.node, tuple(body), span=self.span)
        self.trace.emit(A.When((branch,), None, span=self.span))


class _Otherwise(_Block):
    def before(self) -> None:
        block = self.trace.blocks[-1]
        last = block[-1] if block else None
        if not isinstance(last, A.When) or last.otherwise is not None:
            raise user_error(self.span, "`P.otherwise()` must follow a `P.when(...)` block",
                             "write `with P.when(PRED): ...` right before it")

    def after(self, body: list) -> None:
        block = self.trace.blocks[-1]
        last = block[-1]
        block[-1] = dataclasses.replace(last, otherwise=tuple(body), span=last.span.merge(self.span))


class _Pipe(_Block):
    def __init__(self, what: str, span: A.Span, depth: Optional[int] = None):
        super().__init__(what, span)
        self.depth = depth

    def after(self, body: list) -> None:
        node = pipe_node(body, self.span)
        pipe_depth(node, self.trace, self.depth, self.span)
        self.trace.emit(node)


def pipe_depth(node: A.Pipe, t: Trace, depth: Optional[int], span: A.Span) -> None:
    """`P.pipe(depth=N)`: every channel the pipe's stages send to or consume that has no depth
    of its own holds N items (the stages run at most N items apart on it)."""
    from .values import Channel

    if depth is None:
        return
    for n in node.walk():
        if not isinstance(n, (A.Send, A.Consume)):
            continue
        ch = t.refs.get(n.channel.id)
        if not isinstance(ch, Channel) or ch.depth is not None:
            continue
        before = getattr(ch, "_pipe_depth", None)
        if before is not None and before[0] != depth:
            raise user_error(span, f"channel `{ch.name}` has no depth of its own and is used "
                             f"in pipes of depth {before[0]} and {depth}",
                             f"give it one: `Channel(\"{ch.name}\", depth=...)`")
        ch._pipe_depth = (depth, span)


def pipe_node(stmts: list, span: A.Span) -> A.Pipe:
    """A `pipe` of `stmts`: processes stay; any other statement becomes a process of its own
    (`stage0`, `stage1`, ...), as the seeds' `with P.pipe():` blocks write them."""
    body = []
    n = 0
    taken = {s.name.id for s in stmts if isinstance(s, A.Process)}
    for s in stmts:
        if isinstance(s, A.Process):
            body.append(s)
            continue
        while f"stage{n}" in taken:
            n += 1
        name = f"stage{n}"
        taken.add(name)
        body.append(A.Process(A.Name(name, span=s.span), None, (s,), span=s.span))
    return A.Pipe(tuple(body), span=span)


def _named(loop: _Loop, names: Any, span: A.Span) -> _Loop:
    """`loop` with the prototype's `names=["b", "h"]` (or `name="i"`) as its variables."""
    if names is None:
        return loop
    given = [names] if isinstance(names, str) else \
        list(names) if isinstance(names, (list, tuple)) else None
    if given is None or len(given) != len(loop.axes) or not all(isinstance(n, str) for n in given):
        raise user_error(span, f"`{loop.spelling}` names its {len(loop.axes)} loop "
                         f"variable{'s' if len(loop.axes) > 1 else ''} with as many strings, "
                         f"not {names!r}")
    loop.given = given
    return loop


class _P:
    """Loop constructors with explicit parallelism (the seeds' `P`)."""

    def __call__(self, *axes: Any, names: Any = None) -> _Loop:
        """`for b, h in P(batch, heads):` a parallel grid (iterations independent);
        `for e in P(s):` of a `Sparse(indices)` is `P.sel(s)`. `names=` (the prototype's)
        names the loop variables instead of the `for` target, as `name=` of `P.seq` / `P.sel`
        does: the names schedule keys use (`t.get("b")`)."""
        if len(axes) == 1 and isinstance(axes[0], Sparse) and axes[0].flat:
            return _named(self.sel(axes[0], _span=here()), names, here())
        return _named(self._loop("grid", "P", axes), names, here())

    def grid(self, *axes: Any, names: Any = None) -> _Loop:
        return _named(self._loop("grid", "P.grid", axes), names, here())

    def seq(self, axis: Any, name: Any = None) -> _Loop:
        """`for i in P.seq(n):` every task of iteration i finishes before i + 1 starts."""
        return _named(self._loop("seq", "P.seq", (axis,)), name, here())

    def sel(self, sparse: Any, name: Any = None, _span: Optional[A.Span] = None) -> _Loop:
        """`for e in P.sel(routing[b]):` over the coordinates a sparse axis selects."""
        span = _span or here()
        sparse, row = flat_selection(sparse, span)
        if not (isinstance(sparse, AxisIndex) and isinstance(sparse.axis, Sparse)):
            raise user_error(span, "`P.sel` iterates a sparse axis at an outer index",
                             "write `for e in P.sel(routing[b]):` with `routing = Sparse(...)`")
        loop = _Loop("sel", "P.sel", (sparse,), span)
        loop.row = row
        return _named(loop, name, span)

    def _loop(self, kind: str, spelling: str, axes: tuple) -> _Loop:
        span = here(3)
        if not axes:
            raise user_error(span, f"`{spelling}` needs at least one axis")
        return _Loop(kind, spelling, axes, span)

    def when(self, pred: Any) -> _When:
        """`with P.when(PRED):` the block runs where PRED holds (evaluated at run time)."""
        return _When(pred, here())

    def otherwise(self) -> _Otherwise:
        """`with P.otherwise():` the alternative of the `P.when` block just before."""
        return _Otherwise("P.otherwise", here())

    def pipe(self, *stages: Any, depth: Any = None) -> Any:
        """`with P.pipe():` a CSP pipeline; each statement in it that is not a `process` is a
        process of its own. `depth=N`: the channels its stages use that have no depth of their
        own hold N items. `P.pipe([stage, ...], depth=N)`: the same pipe of statements already
        written (processes, loops), as `combine` takes them."""
        span = here()
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 0):
            raise user_error(span, f"`P.pipe(depth=...)` takes a number of items (0 or more), "
                             f"not {depth!r}", "write `depth=2`")
        if not stages:
            return _Pipe("P.pipe", span, depth)
        if current() is None:
            raise user_error(span, "`P.pipe(stages)` only works inside a `@workload` function")
        with tracing() as t:
            body = _fragments(stages, t, span, "P.pipe")
            node = pipe_node(body, span)
            pipe_depth(node, t, depth, span)
            return t.emit(node)

    # run-time integer helpers (Python's min/max would compare now)
    min = staticmethod(smin)
    max = staticmethod(smax)
    ceildiv = staticmethod(ceildiv)


P = _P()


# ---------------------------------------------------------------------------------------------
# Workload statements: composition, conditions, slots


def _fragments(parts: tuple, t: Trace, span: A.Span, what: str) -> list:
    stmts: list = []
    for p in parts:
        if isinstance(p, Fragment):
            stmts.extend(t.take(p))
        elif isinstance(p, (list, tuple)):
            stmts.extend(_fragments(tuple(p), t, span, what))
        else:
            raise user_error(span, f"`{what}` takes workloads, not {p!r}")
    return stmts


def _group(kind: str, parts: tuple, span: A.Span):
    active = current()
    with tracing() as t:
        stmts = _fragments(parts, t, span, kind)
        node = A.Combine(tuple(stmts), span=span) if kind == "combine" else A.Sequential(
            tuple(stmts), span=span)
        frag = t.emit(node)
    if active is not None:
        return frag
    names = [p.name for p in parts if isinstance(p, Workload)]
    if len(names) != len(parts):
        names = []
    w = Workload.from_fragment("_".join(names) or kind, frag, span)
    for p in parts:
        if isinstance(p, Workload):
            w._hints = {**p._hints, **w._hints}
    return w


def combine(*workloads: Any):
    """`combine(a, b, ...)`: one unordered group (no order added between them)."""
    return _group("combine", workloads, here())


def sequential(*workloads: Any):
    """`sequential(a, b, ...)`: each one's tasks finish before the next one's start."""
    return _group("sequential", workloads, here())


def cond(pred: Any, then: Any, otherwise: Any = None):
    """`cond(PRED, then_workload, else_workload)`: the `when` statement as a function."""
    span = here()
    active = current()
    p = as_scalar(pred, span)
    with tracing() as t:
        t.adopt(p.objs)
        body = _fragments((then,), t, span, "cond")
        other = None if otherwise is None else tuple(_fragments((otherwise,), t, span, "cond"))
        frag = t.emit(A.When((A.WhenBranch(p.node, tuple(body), span=span),), other, span=span))
    if active is not None:
        return frag
    return Workload.from_fragment("cond", frag, span)


def slot_set_u64(slot: int, value: Any) -> Fragment:
    """Write run-time slot `slot` (one of 64, all 0 when a run starts) from an expression."""
    span = here()
    with tracing() as t:
        v = as_scalar(value, span)
        t.adopt(v.objs)
        return t.emit(A.SlotSet(A.IntLit(int(slot), span=span), v.node, span=span))


def slot_load_u64(slot: int, view: Any, row: int = 0, col: int = 0) -> Fragment:
    """Load one element of an integer tensor into slot `slot`: element (`row`, `col`) of the
    2-D tile `view` selects (`flag[0][0]`), or `view` itself when it names one element. The
    load waits for the tasks that write the element."""
    span = here()
    with tracing() as t:
        if isinstance(view, Tensor):
            view = _whole(view, span)
        if not isinstance(view, TensorView):
            raise user_error(span, "`slot_load_u64` reads an element of a tensor",
                             "write `slot_load_u64(0, flags[b], row=0, col=0)`")
        left = len(view.shape)
        extra = []
        if left == 2:
            extra = [row, col]
        elif left == 1:
            if _nonzero(row):
                raise user_error(span, f"`row={row}`: the view has one dimension left")
            extra = [col]
        elif left == 0:
            if _nonzero(row) or _nonzero(col):
                raise user_error(span, "the view already names one element: `row` and `col` "
                                 "must be 0")
        else:
            raise user_error(span, f"the view has {left} dimensions left; index it down to a 2-D "
                             "tile or one element")
        if extra:
            view = view.__getitem__(tuple(extra), span)
        node = value_node(view, t, span)
        return t.emit(A.SlotLoad(A.IntLit(int(slot), span=span), node, span=span))


def _nonzero(v: Any) -> bool:
    """`v` is given and not the integer 0 (a run-time expression counts as given)."""
    return not (v is None or (isinstance(v, int) and not isinstance(v, bool) and v == 0))


def _whole(tensor: Tensor, span: A.Span):
    return TensorView(tensor, (), span)


# ---------------------------------------------------------------------------------------------
# @workload


# what the error for a wrong task-graph knob suggests, per keyword
_KNOB_EXAMPLE = {"deps": "infer_bytes_overlap()", "ready": "priority(lambda t: t.get(\"b\"))",
                 "start": "after_orchestration()", "pools": "by_exec_unit()",
                 "trace": "cycles()"}


class WorkloadFunction:
    """A `@workload` function: calling it traces its body into a `Workload` (or, inside another
    workload, into the statements being recorded there)."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.name = wsp_ident(fn.__name__)

    def __call__(self, *args: Any, **kwargs: Any):
        span = here()
        aliases = _axis_aliases(self.fn, args, kwargs)
        active = current()
        if active is not None:
            block = active.blocks[-1]
            start, depth = len(block), len(active.blocks)
            self.fn(*args, **kwargs)
            _check_closed(active, depth, span, self.fn)
            return Fragment(block[start:], block, active.refs, span)
        t = Trace()
        push(t)
        try:
            self.fn(*args, **kwargs)
        finally:
            pop(t)
        _check_closed(t, 1, span, self.fn)
        w = Workload(self.name, t.blocks[0], t.refs, span)
        w._decl_span = def_span(self.fn)
        w._aliases = aliases
        w._hints = {**_frame_hints(user_frame(), t.refs), **_name_hints(self.fn, aliases)}
        return w

    def __repr__(self) -> str:
        return f"<workload {self.name}>"


def _axis_aliases(fn, args: tuple, kwargs: dict) -> dict:
    """{parameter name: axis object} for the axes a workload was called with (schedule keys
    may name them: `t.get("batch")`)."""
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except TypeError:
        return {}
    return {n: v for n, v in bound.arguments.items() if isinstance(v, Axis)}


def _name_hints(fn, aliases: dict) -> dict:
    """{id(object): name} for the objects a workload function names: its closure variables,
    the globals its code uses, and its axis parameters. Objects not stored to a variable of
    their own when created (`A, B = Tensor(...), Tensor(...)`) are named after these."""
    out: dict = {}
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            out.setdefault(id(cell.cell_contents), name)
        except ValueError:  # an empty cell
            pass
    names: list = []
    stack = [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    g = fn.__globals__
    for n in names:
        if n in g:
            out.setdefault(id(g[n]), n)
    for n, v in aliases.items():
        out.setdefault(id(v), n)
    return out


def _frame_hints(frame, refs: dict) -> dict:
    """{id(object): variable} for the objects of `refs` bound to variables of `frame` (the
    code building a workload outside any `@workload`)."""
    out: dict = {}
    if frame is None:
        return out
    wanted = {id(v) for v in refs.values()}
    for scope in (frame.f_locals, frame.f_globals):
        for k, v in list(scope.items()):
            if id(v) in wanted and not k.startswith("_"):
                out.setdefault(id(v), k)
    return out


def _check_closed(t: Trace, depth: int, span: A.Span, fn) -> None:
    if len(t.blocks) != depth:
        del t.blocks[depth:]
        raise user_error(def_span(fn), "a `for` loop over `P(...)` (or a `with` block) was left "
                         "early: `break` and `return` inside traced loops are not supported",
                         "conditions are `with P.when(...)`; loops always run to the end")


def workload(fn=None, **options):
    """`@workload`: the function's body (with `P` loops and kernel calls) is a workload. The
    prototype's `type_check=` and `fail_on_type_error=` are accepted: wspc always checks, and
    a workload's errors are raised (`workload.type_errors` lists them without raising)."""
    unknown = sorted(set(options) - {"type_check", "fail_on_type_error"})
    if unknown:
        raise user_error(here(), f"`@workload` has no option `{unknown[0]}`",
                         "its options are the prototype's `type_check` and `fail_on_type_error`")
    if fn is None:
        return lambda f: WorkloadFunction(f)
    return WorkloadFunction(fn)


# ---------------------------------------------------------------------------------------------
# Workloads and their schedules


class Workload(Fragment):
    """A traced workload with its schedule combinators. `.dispatch(...)`, `.streams(...)`,
    `.stream_by(...)`, `.timing(...)`, `.task_graph(...)` return a new schedule; `.compile()`
    checks and builds it; `.enumerate()` lists its tasks."""

    __slots__ = ("name", "combinators", "module_name", "_decl_span", "_aliases", "_cache",
                 "_hints", "mesh")

    def __init__(self, name: str, stmts: list, refs: dict, span: A.Span,
                 combinators: tuple = ()):
        super().__init__(stmts, None, refs, span)
        self.name = name
        self.combinators = combinators
        self.module_name: Optional[str] = None
        self._decl_span = span
        self._aliases: dict = {}
        self._cache: dict = {}
        self._hints: dict = {}
        # the module's mesh (`spatial_map`): ((axis name, size), ...) and where it was given
        self.mesh: Optional[tuple] = None

    @classmethod
    def from_fragment(cls, name: str, frag: Fragment, span: A.Span) -> "Workload":
        stmts = list(frag.stmts)
        if frag.block is not None:
            for s in stmts:
                for i, x in enumerate(frag.block):
                    if x is s:
                        del frag.block[i]
                        break
        w = cls(wsp_ident(name), stmts, dict(frag.refs), span)
        w._hints = _frame_hints(user_frame(), w.refs)
        return w

    def _with(self, comb: A.Combinator) -> "Workload":
        w = Workload(self.name, self.stmts, self.refs, self.span, self.combinators + (comb,))
        w.module_name, w._decl_span, w._aliases = self.module_name, self._decl_span, self._aliases
        w._hints, w.mesh = self._hints, self.mesh
        return w

    def named(self, name: str) -> "Workload":
        w = self._with_none()
        w.module_name = wsp_ident(str(name))
        return w

    def with_params(self, *params: Any) -> "Workload":
        """The prototype's parameter names for its IR: refused (wspc names the axes after
        the Python variables holding them, and a workload here takes no parameters)."""
        raise user_error(here(), "`with_params` is not supported: the workload's axes are "
                         "named after the Python variables that hold them",
                         "drop the call; `.named(name)` names the module")

    @property
    def type_errors(self) -> list:
        """The prototype's builder-time type errors: the diagnostics wspc's checker finds in
        this workload now (empty when it checks); `has_type_errors()` says whether any."""
        try:
            self.module()
        except CompileError as err:
            return list(err.diagnostics)
        return []

    def has_type_errors(self) -> bool:
        return bool(self.type_errors)

    def _with_none(self) -> "Workload":
        w = Workload(self.name, self.stmts, self.refs, self.span, self.combinators)
        w.module_name, w._decl_span, w._aliases = self.module_name, self._decl_span, self._aliases
        w._hints, w.mesh = self._hints, self.mesh
        return w

    # -- key expressions
    def _resolver(self):
        loops: list[tuple[str, Any]] = []  # (variable, axis object or None)

        for top in self.stmts:
            for s in top.walk():
                if isinstance(s, A.ForLoop):
                    for v, ax in zip(s.vars, s.axes):
                        base = ax.value if isinstance(ax, A.Index) else ax
                        obj = self.refs.get(base.id) if isinstance(base, A.Name) else None
                        loops.append((v.id, obj))
                elif isinstance(s, A.Consume):
                    loops.append((s.var.id, None))
        by_axis: dict[str, str] = {}
        for var, obj in loops:
            if obj is None:
                continue
            names = {getattr(obj, "_wsp_name", None), self._hints.get(id(obj))}
            names |= {alias for alias, o in self._aliases.items() if o is obj}
            for n in names:
                if n:
                    by_axis.setdefault(n, var)
        variables = [v for v, _ in loops]

        def resolve(name: str, span: A.Span) -> ScalarExpr:
            var = name if name in variables else None
            for cand in (name, name + "s", name.rstrip("s"), name + "es"):
                if var is None and cand in by_axis:
                    var = by_axis[cand]
            if var is None:
                known = sorted(set(variables) | set(by_axis))
                raise user_error(span, f"the schedule key names `{name}`, which is neither a loop "
                                 "variable of the workload nor an axis it loops over",
                                 "use one of " + ", ".join(f"`{k}`" for k in known) if known
                                 else None, cls=ScheduleError)
            return ScalarExpr(A.Name(var, span=span))

        return resolve

    def _task_param(self, i: int, span: A.Span) -> ScalarExpr:
        """The prototype's `t.params[i]` in a key: the i-th bracket coordinate of the task's
        call, 0 past the end (its runtime's `task_param`). A key is one expression for every
        task, so the workload's calls must agree on that coordinate."""
        from ..frontend.printer import expr_str

        seen: dict[str, Any] = {}
        for top in self.stmts:
            for s in top.walk():
                if isinstance(s, A.CallStmt):
                    coords = s.coords or ()
                    c = coords[i] if i < len(coords) else None
                    seen.setdefault("none" if c is None else expr_str(c), c)
        if len(seen) > 1:
            raise user_error(span, f"`t.params[{i}]` is coordinate {i} of the task's call, and "
                             "the workload's calls differ there (" + ", ".join(
                                 f"`{t}`" for t in seen) + "): a key is one expression for "
                             "every task", "name the loop variable instead: `t.get(\"b\")`",
                             cls=ScheduleError)
        c = next(iter(seen.values()), None)
        if c is None:
            return ScalarExpr(A.IntLit(0, span=span))
        if any(isinstance(n, A.Name) and n.id.startswith("@") for n in c.walk()):
            raise user_error(span, f"`t.params[{i}]` is the coordinate `{expr_str(c)}`, which "
                             "reads a tensor or a symbol: a schedule key reads only loop "
                             "variables", "name the loop variable instead: `t.get(\"b\")`",
                             cls=ScheduleError)
        return ScalarExpr(c)

    def _key(self, key: Any, span: A.Span) -> A.Expr:
        if callable(key) and not isinstance(key, (ScalarExpr, Symbol)):
            try:
                out = key(TaskProxy(self._resolver(), span, self._task_param))
            except HostDecision:  # an `if` on the task: tabulated on the host (host_keys.py)
                out = host_key(self, key, span)
        elif isinstance(key, str):
            out = self._resolver()(key, span)
        else:
            out = key
        if isinstance(out, tuple):
            parts = [as_scalar(x, span) for x in out]
            acc = parts[0]
            for p in parts[1:]:  # a tuple key: one integer per distinct tuple
                acc = ScalarExpr(A.Binary("+", A.Binary("*", acc.node, A.IntLit(1000003, span=span),
                                                        span, span=span), p.node, span, span=span))
            out = acc
        e = as_scalar(out, span)
        if e.objs:
            raise user_error(span, "a schedule key is an expression of the task's coordinates",
                             "use `t.get(\"b\")` and integers", cls=ScheduleError)
        return e.node

    def _policy(self, p: Any, kind: str, span: A.Span) -> A.Expr:
        if not isinstance(p, Policy):
            raise user_error(span, f"`.{kind}` takes a `{'DispatchPolicy' if kind == 'dispatch' else 'TimingPolicy'}`"
                             f", not {p!r}", cls=ScheduleError)
        args: list = [A.IntLit(a, span=span) if isinstance(a, int) else A.FloatLit(float(a), repr(float(a)), span=span)
                      for a in p.args]
        kwargs: list = []
        if p.key is not None:
            args.append(self._key(p.key, p.span if p.span.line else span))
        n = len(p.key.names) if isinstance(p.key, PoolNames) else p.n  # after the key ran
        if n is not None:
            kwargs.append(A.Keyword("n", A.IntLit(int(n), span=span), span=span))
        if p.priority is not None:  # `interleaved(n, priority = s)`, at the policy's line
            ps = p.span if p.span.line else span
            kwargs.append(A.Keyword("priority", A.IntLit(int(p.priority), span=ps), span=ps))
        return A.Call(A.Name(p.name, span=span), tuple(args), tuple(kwargs), span=span)

    def dispatch(self, policy: Any) -> "Workload":
        span = here()
        return self._with(A.Combinator(A.Name("dispatch", span=span),
                                       (self._policy(policy, "dispatch", span),), (), span=span))

    def streams(self, n: int) -> "Workload":
        span = here()
        return self._with(A.Combinator(A.Name("streams", span=span), (A.IntLit(int(n), span=span),),
                                       (), span=span))

    def stream_by(self, key: Any) -> "Workload":
        span = here()
        return self._with(A.Combinator(A.Name("stream_by", span=span), (self._key(key, span),), (),
                                       span=span))

    def timing(self, policy: Any) -> "Workload":
        span = here()
        return self._with(A.Combinator(A.Name("timing", span=span),
                                       (self._policy(policy, "timing", span),), (), span=span))

    def task_graph(self, config: Any = None, window: Any = None, mode: Any = None,
                   unit: Any = None, deps: Any = None, ready: Any = None, start: Any = None,
                   pools: Any = None, trace: Any = None, **other: Any) -> "Workload":
        span = here()
        if other:
            name = sorted(other)[0]
            raise user_error(span, f"`.task_graph` has no option `{name}`",
                             "its options are `window`, `mode`, `unit`, `deps`, `ready`, "
                             "`start`, `pools` and `trace`", cls=ScheduleError)
        if isinstance(config, TaskGraphConfig):
            window = window if window is not None else config.window
            deps, ready, start = deps or config.deps, ready or config.ready, start or config.start
            pools, trace = pools or config.pools, trace or config.trace
        elif config is not None:  # the window, positionally
            window = config
        knobs = {"deps": deps, "ready": ready, "start": start, "pools": pools, "trace": trace}
        if window is None and all(v is None for v in knobs.values()):
            raise user_error(span, "`.task_graph` needs `window=`",
                             "write `.task_graph(window=TaskWindow(8192, \"tasks\", WindowMode.STALL))`",
                             cls=ScheduleError)
        kw = []
        if window is not None:
            if isinstance(window, TaskWindow):
                size, unit, mode = window.size, unit or window.unit, mode or window.mode
            else:
                size = int(window)
            kw.append(A.Keyword("window", A.IntLit(size, span=span), span=span))
        if isinstance(mode, WindowMode):
            mode = mode.value
        if unit is not None:
            kw.append(A.Keyword("unit", A.Name(str(unit), span=span), span=span))
        if mode is not None:
            kw.append(A.Keyword("mode", A.Name(str(mode).lower(), span=span), span=span))
        for name, value in knobs.items():
            if value is not None:
                kw.append(A.Keyword(name, self._knob(value, name, span), span=span))
        return self._with(A.Combinator(A.Name("task_graph", span=span), (), tuple(kw), span=span))

    def _knob(self, p: Any, kind: str, span: A.Span) -> A.Expr:
        """A task-graph knob (`ReadyPolicy.priority(key)`, `DepsMode.X`...) as a .wsp policy."""
        if kind == "deps" and isinstance(p, DepsMode):
            p = Deps(p)
        cls = {"deps": "Deps", "ready": "ReadyPolicy", "start": "StartPolicy", "pools": "Pools",
               "trace": "TracePolicy"}[kind]
        if not isinstance(p, Policy) or p.kind != kind:
            raise user_error(span, f"`.task_graph({kind}=...)` takes a `{cls}`, not {p!r}",
                             f"write e.g. `{kind}={cls}.{_KNOB_EXAMPLE[kind]}`",
                             cls=ScheduleError)
        return self._policy(p, kind, span)

    def spatial_map(self, grid: Any = None) -> "Workload":
        """The seeds' `schedule.spatial_map(grid=(2, 4))`: the module's mesh of devices
        (docs/distributed.md, "The mesh"), `mesh d0 = 2, d1 = 4`, its axes named `d0`, `d1`,
        ... after their positions (what `mesh_axis=0` means); `grid={"dp": 2, "tp": 4}` names
        them. Sizes are positive integers; `compile(mesh={"d1": 8})` overrides one."""
        span = here()
        if isinstance(grid, dict):
            axes = list(grid.items())
        elif isinstance(grid, (tuple, list)):
            axes = [(f"d{i}", n) for i, n in enumerate(grid)]
        else:
            raise user_error(span, f"`spatial_map(grid=...)` takes a tuple of axis sizes or a "
                             f"dict of named axes, not {grid!r}",
                             "write `.spatial_map(grid=(4,))` or `.spatial_map(grid={\"tp\": 4})`",
                             cls=ScheduleError)
        if not axes:
            raise user_error(span, "a mesh has at least one axis", "write e.g. "
                             "`.spatial_map(grid=(4,))`", cls=ScheduleError)
        for name, n in axes:
            if not isinstance(name, str) or not name.isidentifier() or wsp_ident(name) != name:
                raise user_error(span, f"mesh axis name {name!r} is not a `.wsp` name",
                                 "use a name such as \"tp\"", cls=ScheduleError)
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise user_error(span, f"mesh axis `{name}` has size {n!r}: a size is a "
                                 "positive integer", cls=ScheduleError)
        if self.mesh is not None:
            raise user_error(span, "the workload already has a mesh: a module declares at "
                             "most one", "call `.spatial_map(...)` once", cls=ScheduleError)
        w = self._with_none()
        w.combinators = self.combinators
        w.mesh = (tuple(axes), span)
        return w

    def layout(self, *args: Any, **kwargs: Any) -> "Workload":
        """The seeds' deprecated `workload.layout(tensor, ...)`: a `DeprecationWarning` at the
        caller's line and the workload itself, unchanged (as in the seeds, a layout belongs to
        the tensor's type, and tensors here are row-major)."""
        import warnings

        # stacklevel: the warning names the user's line that called `.layout`
        warnings.warn("`Workload.layout(...)` is deprecated and changes nothing: use "
                      "TensorLayout + relayout (tensors are row-major in wspc)",
                      DeprecationWarning, stacklevel=2)
        return self

    # -- results
    def module(self):
        """The checked `ptowsp.api.Module` (raises the seeds' `CompileError`s)."""
        return build_module(self)[0]

    @property
    def ir(self):
        """The lowered IR module (for `PassManager.run`)."""
        try:
            return self.module().ir
        except WspError as err:
            raise from_wsp(err) from None

    def __wsp_passes__(self, pm: Any, verbose: bool = False) -> Any:
        """`PassManager.run(workload)` (ptowsp/passes.py): its workload passes, then its IR
        passes on the result's IR. The Workload when there are no IR passes, else the IR."""
        w, ir_passes = run_workload_passes(self, pm.passes, here(), verbose)
        if not ir_passes:
            return w
        from ..passes import PassManager

        return PassManager(ir_passes, verify_each=pm.verify_each, print_after=pm.print_after,
                           time_passes=pm.time_passes, out=pm.out).run(w.ir, verbose)

    def compile(self, target: str = "cpu_sim", opt_level: Optional[int] = None,
                workers: Optional[int] = None, output_dir: Any = None,
                passes: Any = None, **options: Any):
        """A `Program` for `target` (`cpu_sim`, the default, or `ref`); for `ascend_npu` an
        `EmittedProgram`: the CANN tree, written to `output_dir` (default: a directory in the
        build cache), named by `codegen_artifact_dir`. `options` are the target's own
        (`workers` for cpu_sim; `soc_version`, `blocks`, ... for ascend_npu). `passes`: `Pass`
        objects run first, in order (docs/python.md, "Passes"): the leading ones written by the
        user take and return the Workload; from wspc's first own pass on, they run on its IR,
        before the optimiser."""
        span = here()
        t0 = time.perf_counter()
        if passes is not None:
            if not isinstance(passes, (list, tuple)):
                raise user_error(span, f"`passes=` takes a list of `Pass` objects, not "
                                 f"{type(passes).__name__}", "write `passes=[MyPass()]`")
            w, ir_passes = run_workload_passes(self, list(passes), span)
            if w is not self:
                return w.compile(target, opt_level, workers, output_dir, ir_passes, **options)
            passes = ir_passes
        module, asm = build_module(self)
        if passes:
            from ..passes import PassManager

            try:
                module._ir = PassManager(passes, verify_each=True).run(module.ir)
            except WspError as err:
                raise from_wsp(err) from None
        if workers is not None:
            options["workers"] = workers
        try:
            prog = module.compile(target=target, opt_level=opt_level, **options)
        except WspError as err:
            raise from_wsp(err) from None
        except ValueError as err:
            raise user_error(span, str(err), "targets are `cpu_sim`, `ref` and `ascend_npu`") \
                from None
        if not isinstance(prog, _RuntimeProgram):  # a target that does not run here
            return _emitted(self.name, prog, output_dir, span, t0)
        if output_dir is not None:
            raise user_error(span, f"`output_dir=` is where an ascend_npu tree is written; a "
                             f"{target} program is built in the cache",
                             "drop `output_dir=` (or compile with target=\"ascend_npu\")")
        p = Program.adopt(prog, asm)
        p.workload = self
        p.stats.compile_time_ms = (time.perf_counter() - t0) * 1000
        return p

    def enumerate(self) -> list:
        """The tasks of one run, in enumeration order (`task.kernel`, `task.get("b")`)."""
        return enumerate_tasks(self)

    def start(self):
        """The seeds' `pipeline.start()`: compile (cpu_sim) and run."""
        prog = self.compile()
        prog.execute()
        self._cache["started"] = prog
        return prog

    def join(self) -> None:
        prog = self._cache.pop("started", None)
        if prog is not None:
            prog.synchronize()

    def __repr__(self) -> str:
        return f"<workload {self.name}>"


def run_workload_passes(w: "Workload", passes: list, span: A.Span,
                        verbose: bool = False) -> tuple:
    """The leading passes of `passes` that are the user's own (a `Pass` subclass that is not
    one of wspc's IR passes) run on `w` in order, each giving the next Workload; returns the
    last Workload and the passes from wspc's first IR pass on (which run on the IR)."""
    from ..passes import FunctionPass, Pass, PrintPass

    for i, p in enumerate(passes):
        if not isinstance(p, Pass):
            raise user_error(span, f"a pass is an instance of a `Pass` subclass, not {p!r}",
                             "write `class MyPass(Pass): def run(self, workload): ...` and "
                             "pass `MyPass()`")
        if isinstance(p, (FunctionPass, PrintPass)):
            return w, list(passes[i:])
        name = p.name if getattr(p, "name", "pass") != "pass" else type(p).__name__
        t0 = time.perf_counter()
        out = p.run(w)
        if isinstance(out, WorkloadFunction):
            out = out()
        if not isinstance(out, Workload):
            raise user_error(span, f"pass `{name}` returned {type(out).__name__}, not a "
                             "`Workload`", "return the workload `run` was given, or a new one")
        if verbose:
            print(f"pass {name}: {(time.perf_counter() - t0) * 1000:.2f} ms"
                  f"{'' if out is not w else ' (no change)'}")
        w = out
    return w, []


def _emitted(name: str, project: Any, output_dir: Any, span, t0: float) -> EmittedProgram:
    """The project written where `codegen_artifact_dir` says (files.replace_dir: atomic, and
    never over a folder that is not a project tree)."""
    import hashlib

    from ..files import FileError, cache_dir

    try:
        if output_dir is None:
            digest = hashlib.sha256()
            for rel in sorted(project.files):
                digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
                digest.update(project.files[rel].encode("utf-8", "surrogateescape") + b"\0")
            output_dir = cache_dir() / "ascend" / f"{name}-{digest.hexdigest()[:16]}"
        directory = project.write(output_dir)
    except FileError as err:  # no cache directory
        raise user_error(span, str(err), "pass `output_dir=` a writable directory") from None
    except WspError as err:  # the tree could not be written there
        raise from_wsp(err) from None
    return EmittedProgram(project, str(directory), (time.perf_counter() - t0) * 1000)


def to_wsp(w: Any) -> str:
    """The `.wsp` text of a workload (a `Workload` or an uncalled `@workload` of no arguments);
    `ptowsp.parse(to_wsp(w))` checks and lowers to the same IR."""
    from ..frontend.source_printer import format_source

    if isinstance(w, WorkloadFunction):
        w = w()
    if not isinstance(w, Workload):
        raise user_error(here(), f"`to_wsp` takes a workload, not {w!r}")
    return format_source(assemble(w).source)


__all__ = ["P", "workload", "Workload", "WorkloadFunction", "combine", "sequential", "cond",
           "slot_set_u64", "slot_load_u64", "to_wsp"]
