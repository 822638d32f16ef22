"""`pto_wsp.program`: the prototype's compiled program and its records, with wspc's meaning
(docs/python.md): `Program`, `ProgramStats`, `TraceLevel`; `ExecutionTrace` is the trace of a
traced run (`program.trace`) and `TaskInstance` a task of `workload.enumerate()`. The
prototype's Python interpreter's own records (`ExecutionContext`, `ExecutionPlan`,
`TraceEvent`) import but are errors when used."""

from ptowsp.embed.program import Program, ProgramStats, TraceLevel
from ptowsp.embed.program import ProgramTrace as ExecutionTrace
from ptowsp.embed.program import Task as TaskInstance
from ptowsp.embed.unsupported import ExecutionContext, ExecutionPlan, TraceEvent

__all__ = ["TraceLevel", "TraceEvent", "ExecutionTrace", "ProgramStats", "ExecutionContext",
           "Program", "TaskInstance", "ExecutionPlan"]
