"""`pto_wsp.schedule`: the prototype's schedule policies, all wspc's (`ptowsp.embed.schedule`):
dispatch and timing policies, the task window, and the task-graph knobs (`Deps`, `DepsMode`,
`ReadyPolicy`, `StartPolicy`, `TracePolicy`, `Pools`, `TaskGraphConfig`; docs/python.md)."""

from ptowsp.embed.schedule import (
    Deps,
    DepsMode,
    DispatchPolicy,
    Pools,
    ReadyPolicy,
    StartPolicy,
    TaskGraphConfig,
    TaskWindow,
    TimingPolicy,
    TracePolicy,
    WindowMode,
)

__all__ = ["WindowMode", "DispatchPolicy", "TimingPolicy", "TaskWindow", "DepsMode", "Deps",
           "ReadyPolicy", "StartPolicy", "TracePolicy", "Pools", "TaskGraphConfig"]
