"""Schedule policies of the Python embedding (the seeds' `DispatchPolicy`, `TimingPolicy`,
`TaskWindow`, `WindowMode`, and the task-graph knobs `Deps`, `DepsMode`, `ReadyPolicy`,
`StartPolicy`, `Pools`, `TracePolicy`, `TaskGraphConfig`) and the task proxy that schedule-key lambdas are traced with
(`lambda t: t.get("batch") % 2`). `Workload.dispatch(...)` and its siblings (`workload.py`) turn
them into the `Combinator` nodes of the schedule `main`.
"""

from __future__ import annotations

import enum
from typing import Any, Optional

from ..frontend import ast as A
from .errors import ScheduleError, user_error
from .source import here
from .values import ScalarExpr


class WindowMode(enum.Enum):
    STALL = "stall"
    ABORT = "abort"
    BENCHMARK = "benchmark"  # the prototype's; refused by TaskWindow (below)


class TaskWindow:
    """`TaskWindow(8192, "tasks", WindowMode.STALL)`: at most that many tasks enumerated and
    unfinished at once."""

    def __init__(self, size: int, unit: str = "tasks", mode: Any = WindowMode.STALL):
        self.size, self.unit = int(size), str(unit)
        self.mode = mode.value if isinstance(mode, WindowMode) else str(mode).lower()
        if self.unit in ("bytes", "entries"):
            # the prototype declares these units but gives them no meaning: its code
            # generator enforces only a window in tasks and reports the others unsupported
            raise user_error(here(), f"a task window in `{self.unit}` is not supported: the "
                             "prototype declares the unit but enforces only windows counted in "
                             "tasks, so it gives it no meaning to follow",
                             "count the window in tasks: `TaskWindow(n, \"tasks\", "
                             "WindowMode.STALL)`", cls=ScheduleError)
        if self.mode == WindowMode.BENCHMARK.value:
            # the prototype admits a task past a full window and counts it; neither the
            # runtime's window nor the cycle model's has such a count
            raise user_error(here(), "`WindowMode.BENCHMARK` is not supported: wspc's window "
                             "never admits a task past its size, and counts no overflows",
                             "use `WindowMode.STALL` (results are the same: a window bounds "
                             "the tasks in flight, never what they compute), or no window",
                             cls=ScheduleError)


class Policy:
    """A dispatch, timing or task-graph policy: a name, its arguments, (for key policies) the
    key, and for a task-graph knob its `kind` (`ready`, `start`, `pools`, `trace`, `deps`)."""

    def __init__(self, name: str, args: tuple = (), n: Any = None, key: Any = None,
                 span: A.Span = A.NO_SPAN, priority: Optional[int] = None, kind: str = ""):
        self.name, self.args, self.n, self.key, self.span = name, args, n, key, span
        self.priority = priority
        self.kind = kind

    def __call__(self, *args, **kwargs) -> "Policy":  # `TimingPolicy.immediate` and `...()`
        return self

    def __repr__(self) -> str:
        extra = [] if self.priority is None else [f"priority={self.priority}"]
        return f"{self.name}({', '.join([*map(repr, self.args), *extra])})"


class DispatchPolicy:
    """Which dispatcher ("AICPU") each task goes to."""

    @staticmethod
    def round_robin(num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        count = num_aicpus if num_aicpus is not None else n
        return Policy("round_robin", () if count is None else (int(count),), span=here())

    # `key_fn` is the prototype's keyword for the key (a lambda, a name, or a tuple of names)
    @staticmethod
    def affinity(key_fn: Any, num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        return Policy("affinity", (), num_aicpus if num_aicpus is not None else n, key_fn, here())

    @staticmethod
    def hash(key_fn: Any, num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        return Policy("hash", (), num_aicpus if num_aicpus is not None else n, key_fn, here())

    @staticmethod
    def dispatch_by(fn: Any, num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        return Policy("dispatch_by", (), num_aicpus if num_aicpus is not None else n, fn, here())

    @staticmethod
    def work_steal(num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        count = num_aicpus if num_aicpus is not None else n
        return Policy("work_steal", () if count is None else (int(count),), span=here())


class TimingPolicy:
    """When ready tasks are issued."""

    immediate = Policy("immediate")

    @staticmethod
    def batched(n: Optional[int] = None, batch_size: Optional[int] = None) -> Policy:
        return Policy("batched", (int(n if n is not None else batch_size),), span=here())

    @staticmethod
    def interleaved(n: Optional[int] = None, streams: Optional[int] = None,
                    priority: Optional[int] = None) -> Policy:
        """`interleaved(n)`: a dispatcher issues up to n ready tasks of one stream, then moves to
        the next stream that has one. `priority=s`: every dispatcher starts with stream s (the
        `.wsp` `interleaved(n, priority = s)`); n is then 1 unless given."""
        span = here()
        v = n if n is not None else streams
        if v is None and priority is not None:
            v = 1
        if v is None:
            raise user_error(span, "`interleaved` takes the number of tasks a stream issues in "
                             "a row", "write `TimingPolicy.interleaved(2)`", cls=ScheduleError)
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise user_error(span, f"`interleaved(priority=...)` takes the number of a stream, "
                             f"not {priority!r}", "write `priority=1`", cls=ScheduleError)
        return Policy("interleaved", (int(v),), span=span, priority=priority)

    @staticmethod
    def rate_limit(tasks_per_ms: float) -> Policy:
        return Policy("rate_limit", (tasks_per_ms,), span=here())


class DepsMode(enum.Enum):
    """How dependencies between tasks are found (`.task_graph(deps=...)`)."""

    INFER_TENSOR_MAP_EXACT = "infer_tensor_map_exact"
    INFER_BYTES_OVERLAP = "infer_bytes_overlap"
    EXPLICIT = "explicit"
    HYBRID = "hybrid"
    # the seeds' other spellings (aliases: the same members)
    tensor_map_exact = "infer_tensor_map_exact"
    bytes_overlap = "infer_bytes_overlap"


def _graph_error(span: A.Span, message: str, help: str) -> Exception:
    return user_error(span, message, help, cls=ScheduleError)


def _deps(mode: Any, span: A.Span) -> Policy:
    try:
        m = mode if isinstance(mode, DepsMode) else DepsMode(str(mode).lower())
    except ValueError:
        raise _graph_error(span, f"unknown dependency mode {mode!r}",
                           "use `DepsMode.INFER_TENSOR_MAP_EXACT` or "
                           "`DepsMode.INFER_BYTES_OVERLAP`") from None
    return Policy(m.value, span=span, kind="deps")


class Deps:
    """`Deps.infer_tensor_map_exact()` (the default), `Deps.infer_bytes_overlap()`,
    `Deps.explicit()`, `Deps.hybrid()`, or `Deps(mode=DepsMode....)`: how `.task_graph(deps=...)`
    finds dependencies."""

    def __new__(cls, mode: Any = DepsMode.INFER_TENSOR_MAP_EXACT, **kwargs: Any) -> Policy:
        return _deps(mode, here())

    @staticmethod
    def infer_tensor_map_exact() -> Policy:
        return _deps(DepsMode.INFER_TENSOR_MAP_EXACT, here())

    @staticmethod
    def infer_bytes_overlap() -> Policy:
        return _deps(DepsMode.INFER_BYTES_OVERLAP, here())

    @staticmethod
    def explicit() -> Policy:
        return _deps(DepsMode.EXPLICIT, here())

    @staticmethod
    def hybrid(infer: Any = DepsMode.INFER_TENSOR_MAP_EXACT, explicit: bool = True) -> Policy:
        """The prototype's hybrid: the edges `infer` finds, plus the declared order when
        `explicit`. Every wspc schedule keeps its declared order (steps, streams) anyway, so
        this is the `infer` mode itself: `hybrid()` is `hybrid` (exact inference, the default's
        behaviour), `hybrid(infer=DepsMode.INFER_BYTES_OVERLAP)` is `infer_bytes_overlap`, with
        `explicit` True or False alike."""
        span = here()
        if not isinstance(explicit, bool):
            raise _graph_error(span, f"`Deps.hybrid(explicit=...)` is True or False, not "
                               f"{explicit!r}", "write `Deps.hybrid(explicit=True)`")
        mode = _deps(infer, span)
        if mode.name in ("explicit", "hybrid"):
            raise _graph_error(span, f"`Deps.hybrid(infer=...)` takes an inference mode, not "
                               f"`{mode.name}`", "write `infer=DepsMode.INFER_TENSOR_MAP_EXACT` "
                               "or `infer=DepsMode.INFER_BYTES_OVERLAP`")
        if mode.name == "infer_tensor_map_exact":
            return Policy("hybrid", span=span, kind="deps")
        return mode


class ReadyPolicy:
    """Which ready task runs next: `fifo()`, `work_steal()` (the default), `priority(key)`
    (smaller keys first; the key a lambda of the task, as `DispatchPolicy.affinity`'s)."""

    @staticmethod
    def fifo() -> Policy:
        return Policy("fifo", span=here(), kind="ready")

    @staticmethod
    def work_steal() -> Policy:
        return Policy("work_steal", span=here(), kind="ready")

    @staticmethod
    def priority(priority_fn: Any) -> Policy:
        return Policy("priority", key=priority_fn, span=here(), kind="ready")


class StartPolicy:
    """When workers start: `threshold(n)` (once n tasks are submitted), `after_orchestration()`
    (once every task is)."""

    @staticmethod
    def threshold(n: int) -> Policy:
        return Policy("threshold", (int(n),), span=here(), kind="start")

    @staticmethod
    def after_orchestration() -> Policy:
        return Policy("after_orchestration", span=here(), kind="start")


class TracePolicy:
    """`none()` (a trace when a run asks for one) or `cycles()` (every run records one);
    `cycles(cost_fn)` also gives each task's cycles in the cycle model: `cost_fn` is a key of
    the task (a lambda `lambda t: 100 * t.get("b") + 50`, traced to an integer expression of the
    coordinates, or a function with an `if`, tabulated on the host as every key is), and the
    task then takes its value in cycles instead of its kernel's cost from the IR."""

    @staticmethod
    def none() -> Policy:
        return Policy("none", span=here(), kind="trace")

    @staticmethod
    def cycles(cost_fn: Any = None) -> Policy:
        return Policy("cycles", key=cost_fn, span=here(), kind="trace")


class Pools:
    """Ready queues: `single()` (the default), `by_exec_unit()` (cube kernels, those with a
    matmul, apart from vector ones), `custom(key, n)` (pool `key mod n`)."""

    @staticmethod
    def single() -> Policy:
        return Policy("single", span=here(), kind="pools")

    @staticmethod
    def by_exec_unit() -> Policy:
        return Policy("by_exec_unit", span=here(), kind="pools")

    @staticmethod
    def custom(pool_fn: Any, n: Optional[int] = None) -> Policy:
        """`custom(key, n=N)`: pool `key mod N`. Without `n`, the prototype's form: `pool_fn`
        gives each task a pool *name* (`PoolNames`)."""
        span = here()
        if n is None:
            return Policy("custom", key=PoolNames(pool_fn, span), span=span, kind="pools")
        return Policy("custom", n=int(n), key=pool_fn, span=span, kind="pools")


class PoolNames:
    """The prototype's pool function, which names a task's pool (`"cube"`, `"vec"`): the
    names are numbered in the order the tasks first give them (the order the key is traced,
    or tabulated on the host over the tasks' coordinates, host_keys.py), and there are as
    many pools as names. A function that gives integers needs `n=`."""

    def __init__(self, fn: Any, span: A.Span):
        self.fn, self.span, self.names = fn, span, {}

    def __call__(self, task: Any) -> int:
        v = self.fn(task)
        if isinstance(v, str):
            return self.names.setdefault(v, len(self.names))
        raise _graph_error(self.span, "`Pools.custom` needs the number of pools, `n=`, for a "
                           "key that is not a pool name",
                           "write `Pools.custom(lambda t: t.get(\"h\") % 2, n=2)`, or return "
                           "pool names (`\"cube\"`, `\"vec\"`)")


class TaskGraphConfig:
    """The task-graph settings as one value: `.task_graph(TaskGraphConfig(window=..., ...))`.
    Settings left out keep their defaults."""

    def __init__(self, deps: Any = None, window: Any = None, pools: Any = None,
                 ready: Any = None, start: Any = None, trace: Any = None):
        self.deps, self.window, self.pools = deps, window, pools
        self.ready, self.start, self.trace = ready, start, trace


class TaskProxy:
    """The `t` of a key lambda (`lambda t: t.get("batch") % 2`): its coordinates by name, and
    the prototype's `t.params[i]` (coordinate i of the task's call, `param(i, span)`) and
    `t.tags[name]` (refused: `TaskTags`)."""

    def __init__(self, resolve, span: A.Span, param=None):
        self._resolve, self._span, self._param = resolve, span, param

    @property
    def params(self) -> "TaskParams":
        return TaskParams(self._param, self._span)

    @property
    def tags(self) -> "TaskTags":
        return TaskTags(self._span)

    def get(self, name: str, default: Any = None) -> ScalarExpr:
        return self._resolve(str(name), self._span)

    def __getattr__(self, name: str) -> ScalarExpr:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._resolve(name, self._span)


class TaskParams:
    """The prototype's `t.params`: `t.params[i]` is the i-th bracket coordinate of the task's
    call (`k[b, t]`: `t.params[1]` is `t`), 0 past the end as in the prototype's runtime;
    `param(i, span)` (the workload's) gives it as an expression."""

    def __init__(self, param, span: A.Span):
        self._param, self._span = param, span

    def __getitem__(self, i: Any) -> ScalarExpr:
        import numpy as np

        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0:
            raise user_error(here(), f"`t.params[...]` takes a coordinate's position (0, 1, "
                             f"...), not {i!r}", cls=ScheduleError)
        return self._param(int(i), self._span)


class TaskTags:
    """The prototype's `t.tags[name]`: refused. Its tags are a placeholder there: no API sets
    one, and its runtime reads the run-time symbol of the same id instead."""

    def __init__(self, span: A.Span):
        self._span = span

    def __getitem__(self, name: Any):
        raise user_error(here(), f"`t.tags[{name!r}]` is not supported: the prototype's task "
                         "tags are a placeholder (nothing sets a tag; its runtime reads the "
                         "run-time symbol of that name instead)",
                         "key on the task's coordinates (`t.get(\"b\")`, `t.params[0]`)",
                         cls=ScheduleError)


__all__ = ["WindowMode", "TaskWindow", "Policy", "PoolNames", "DispatchPolicy", "TimingPolicy", "TaskProxy",
           "TaskParams", "TaskTags",
           "DepsMode", "Deps", "ReadyPolicy", "StartPolicy", "TracePolicy", "Pools",
           "TaskGraphConfig"]
