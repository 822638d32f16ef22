"""`pto_wsp.schedule`: the prototype's schedule policies. Dispatch and timing policies and the
task window are wspc's (`ptowsp.embed.schedule`); the task-graph knobs besides the window
(`Deps`, `DepsMode`, `ReadyPolicy`, `StartPolicy`, `TracePolicy`, `Pools`, `TaskGraphConfig`)
import but are errors when used, because wspc always infers dependencies exactly."""

from ptowsp.embed.schedule import DispatchPolicy, TaskWindow, TimingPolicy, WindowMode
from ptowsp.embed.unsupported import (
    Deps,
    DepsMode,
    Pools,
    ReadyPolicy,
    StartPolicy,
    TaskGraphConfig,
    TracePolicy,
)

__all__ = ["WindowMode", "DispatchPolicy", "TimingPolicy", "TaskWindow", "DepsMode", "Deps",
           "ReadyPolicy", "StartPolicy", "TracePolicy", "Pools", "TaskGraphConfig"]
