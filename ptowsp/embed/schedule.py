"""Schedule policies of the Python embedding (the seeds' `DispatchPolicy`, `TimingPolicy`,
`TaskWindow`, `WindowMode`) and the task proxy that schedule-key lambdas are traced with
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


class TaskWindow:
    """`TaskWindow(8192, "tasks", WindowMode.STALL)`: at most that many tasks enumerated and
    unfinished at once."""

    def __init__(self, size: int, unit: str = "tasks", mode: Any = WindowMode.STALL):
        self.size, self.unit = int(size), str(unit)
        self.mode = mode.value if isinstance(mode, WindowMode) else str(mode).lower()


class Policy:
    """A dispatch or timing policy: a name, its arguments, and (for key policies) the key."""

    def __init__(self, name: str, args: tuple = (), n: Any = None, key: Any = None,
                 span: A.Span = A.NO_SPAN, priority: Optional[int] = None):
        self.name, self.args, self.n, self.key, self.span = name, args, n, key, span
        self.priority = priority

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

    @staticmethod
    def affinity(key: Any, num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        return Policy("affinity", (), num_aicpus if num_aicpus is not None else n, key, here())

    @staticmethod
    def hash(key: Any, num_aicpus: Optional[int] = None, n: Optional[int] = None) -> Policy:
        return Policy("hash", (), num_aicpus if num_aicpus is not None else n, key, here())

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


class TaskProxy:
    """The `t` of a key lambda (`lambda t: t.get("batch") % 2`): its coordinates by name."""

    def __init__(self, resolve, span: A.Span):
        self._resolve, self._span = resolve, span

    def get(self, name: str, default: Any = None) -> ScalarExpr:
        return self._resolve(str(name), self._span)

    def __getattr__(self, name: str) -> ScalarExpr:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._resolve(name, self._span)


__all__ = ["WindowMode", "TaskWindow", "Policy", "DispatchPolicy", "TimingPolicy", "TaskProxy"]
