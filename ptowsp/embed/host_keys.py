"""Schedule keys written as Python functions that decide with an `if` (the seeds'
`DispatchPolicy.dispatch_by(lambda t: 0 if t.get("b") < 2 else 1)`, `def route(t): ...`).

A key function is first traced with symbolic coordinates (`schedule.TaskProxy`), which works
for arithmetic. Python control flow cannot be traced (`if` needs a Python bool now), so such a
function runs on the host instead, at compile time, once per point of the task space:

1. the workload's tasks are enumerated (`program.enumerate_tasks`: cpu_sim's enumerator on the
   tensors' current data and the symbols' defaults), and the function is called on each task
   with its coordinates, which gives the loop variables it reads;
2. it is called again on every point of the box those variables span (0 up to the largest
   coordinate seen, each), so the table it gives is complete over the box;
3. the table becomes an integer expression of those variables: a step function over their
   row-major index, `v0 + sum(d_j * min(1, max(0, idx - s_j + 1)))`, one step per change of
   value. That is the key the `.wsp` schedule carries, evaluated per task by the runtime and
   the cycle model like any other key.

Limits (each a clear error at the policy's line): the box holds at most `MAX_POINTS` points,
and the table changes value at most `MAX_STEPS` times along the index (an integer expression is
kept short: limits.MAX_INT_EXPR).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from ..frontend import ast as A
from ..frontend.printer import expr_str
from .errors import ScheduleError, user_error
from .program import enumerate_tasks
from .schedule import TaskParams, TaskTags
from .values import ScalarExpr, smax, smin

MAX_POINTS = 1 << 16
MAX_STEPS = 24


class _Coords:
    """The `t` a key function is called with on the host: concrete coordinates, by the names
    the traced proxy accepts (`t.get("b")`, `t.get("batch")`, `t.b`)."""

    def __init__(self, values: dict, alias: Callable[[str], str], reads: list, param=None):
        self._values, self._alias, self._reads, self._param = values, alias, reads, param

    @property
    def params(self) -> "_Params":
        """The prototype's `t.params[i]`: the loop variable the calls' coordinate i is."""
        return _Params(self)

    @property
    def tags(self) -> Any:
        return TaskTags(self._param[1])

    def get(self, name: str, default: Any = None) -> int:
        var = self._alias(str(name))
        if var not in self._reads:
            self._reads.append(var)
        return self._values.get(var, 0)

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.get(name)


class _Params:
    def __init__(self, coords: _Coords):
        self._coords = coords

    def __getitem__(self, i: Any) -> int:
        w, span = self._coords._param
        node = TaskParams(w._task_param, span)[i].node
        if isinstance(node, A.IntLit):  # past the end of every call: 0
            return node.value
        if not isinstance(node, A.Name):
            raise user_error(span, f"`t.params[{i}]` is the coordinate `{expr_str(node)}`; a key "
                             "function with an `if` reads coordinates that are loop variables",
                             "read the loop variables themselves: `t.get(\"b\")`",
                             cls=ScheduleError)
        return self._coords.get(node.id)


def _as_int(v: Any, span: A.Span) -> int:
    import numpy as np

    if isinstance(v, tuple):  # a tuple key: one integer per distinct tuple (as traced keys)
        acc = 0
        for i, p in enumerate(v):
            acc = _as_int(p, span) if i == 0 else acc * 1000003 + _as_int(p, span)
        return acc
    if isinstance(v, (bool, int, np.integer, np.bool_)):
        return int(v)
    raise user_error(span, f"a schedule key function returned {v!r}, not an integer",
                     "return an integer (or a tuple of integers) from the task's coordinates",
                     cls=ScheduleError)


def host_key(w: Any, fn: Callable, span: A.Span) -> ScalarExpr:
    """The key `fn` (a Python function of the task) as an expression of `w`'s loop variables,
    tabulated on the host (module docstring)."""
    resolve = w._resolver()

    def alias(name: str) -> str:
        node = resolve(name, span).node
        return node.id if isinstance(node, A.Name) else name

    tasks = enumerate_tasks(w)
    reads: list = []
    top: dict = {}
    for task in tasks:
        _as_int(fn(_Coords(task.coords, alias, reads, (w, span))), span)
        for var in reads:
            top[var] = max(top.get(var, 0), int(task.coords.get(var, 0)))
    names = list(reads)
    extents = [top.get(v, 0) + 1 for v in names]
    points = 1
    for e in extents:
        points *= e
    if points > MAX_POINTS:
        raise user_error(span, f"the schedule key function reads {', '.join(names)}, whose "
                         f"values span {points} points: more than the {MAX_POINTS} wspc "
                         "tabulates on the host", "write the key as an expression of the "
                         "coordinates (`t.get(\"b\") % 4`, `P.min`, `P.max`), which the "
                         "runtime evaluates per task", cls=ScheduleError)
    table = []
    for combo in itertools.product(*(range(e) for e in extents)):
        table.append(_as_int(fn(_Coords(dict(zip(names, combo)), alias, [], (w, span))), span))
    steps = [(i, table[i] - table[i - 1]) for i in range(1, len(table)) if table[i] != table[i - 1]]
    if len(steps) > MAX_STEPS:
        raise user_error(span, f"the schedule key function changes value {len(steps)} times "
                         f"over the task space; wspc writes a host-decided key as an expression "
                         f"of at most {MAX_STEPS} steps",
                         "write the key as an expression of the coordinates (`t.get(\"b\") % 4`, "
                         "`P.min`, `P.max`)", cls=ScheduleError)
    key = ScalarExpr(A.IntLit(table[0] if table else 0, span=span))
    if not steps:
        return key
    idx = None
    for name, ext in zip(names, extents):  # row-major: the last variable varies fastest
        var = resolve(name, span)
        idx = var if idx is None else idx * ext + var
    for at, delta in steps:
        key = key + smin(1, smax(0, idx - (at - 1))) * delta
    return key


__all__ = ["host_key", "MAX_POINTS", "MAX_STEPS"]
