"""Names of the seeds' Python API that have no counterpart in the WSP language.

They import (so a seed program's `from pto_wsp import (...)` line works), and any use raises a
`CompileError` at the user's line saying why and what to write instead; nothing is silently
accepted and ignored.
"""

from __future__ import annotations

from .errors import user_error
from .source import here


class Unsupported:
    """A seed API name wspc does not implement: calling it or any attribute of it is an error."""

    def __init__(self, name: str, why: str, help: str):
        self._name, self._why, self._help = name, why, help

    def __call__(self, *args, **kwargs):
        raise user_error(here(), f"`{self._name}` is not supported by wspc: {self._why}", self._help)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unsupported(f"{self._name}.{attr}", self._why, self._help)

    def __getitem__(self, item):
        return self.__call__()

    def __repr__(self) -> str:
        return f"<unsupported {self._name}>"



# the prototype's submodules (`pto_wsp.types`, `.schedule`, `.program`, `.kernel`, `.builder`,
# `.scalar_expr`): names of its own machinery, which wspc's front end, IR and runtime replace
Symbol = Unsupported(
    "Symbol", "a kernel's scalar argument is given in the call or by its default, not read from "
    "a table of run-time symbols", "pass the value (`k[b](eps=1e-6, ...)`); a run-time integer "
    "is `symbol_u64(name)`, bound with `program.set_symbol_u64(name, v)`")
_INTERP = ("wspc runs a workload through its compiler and runtime, not the prototype's Python "
           "task interpreter", "enumerate tasks with `workload.enumerate()` (tasks have `.kernel`, "
           "`.get(name)`, `.params`)")
ExecutionContext = Unsupported("ExecutionContext", *_INTERP)
ExecutionPlan = Unsupported("ExecutionPlan", *_INTERP)
TraceEvent = Unsupported("TraceEvent", "trace events are made by a traced run, as dicts",
                         "read them with `program.trace.get_task_events()`")
_KERNEL_IR = ("the prototype's kernel IR is not wspc's: a kernel body lowers to wspc's IR",
              "read a kernel's IR with `k.trace()` (its `ops` have `op`, `args`, `shape`, "
              "`dtype`)")
TileType = Unsupported("TileType", *_KERNEL_IR)
ScalarType = Unsupported("ScalarType", *_KERNEL_IR)
ValueId = Unsupported("ValueId", *_KERNEL_IR)
OpKind = Unsupported("OpKind", *_KERNEL_IR)
Op = Unsupported("Op", *_KERNEL_IR)
_BUILDER = ("it is the prototype's workload builder, whose work wspc's own tracer does",
            "write workloads with `@workload` and `P(...)` loops, kernels with `@kernel`")
LoopFrame = Unsupported("LoopFrame", *_BUILDER)
ConditionalFrame = Unsupported("ConditionalFrame", *_BUILDER)
KernelParam = Unsupported("KernelParam", *_BUILDER)
extract_kernel_params = Unsupported("extract_kernel_params", *_BUILDER)
WorkloadBuilder = Unsupported("WorkloadBuilder", *_BUILDER)
get_current_builder = Unsupported("get_current_builder", *_BUILDER)
push_builder = Unsupported("push_builder", *_BUILDER)
pop_builder = Unsupported("pop_builder", *_BUILDER)
_SCALAR_IR = ("run-time expressions are wspc's AST, checked and lowered with the workload, not "
              "the prototype's C++ scalar IR", "write the expression itself: loop variables, "
              "`axis(name)`, `slot_u64(i)`, `symbol_u64(name)`, integers and operators")
TaskExpr = Unsupported("TaskExpr", *_SCALAR_IR)
task_param = Unsupported("task_param", *_SCALAR_IR)
trace_task_fn = Unsupported("trace_task_fn", *_SCALAR_IR)
to_cpp = Unsupported("to_cpp", *_SCALAR_IR)

# the prototype's builder-time type checker (`pto_wsp.type_checker`): wspc's checker does its
# work on every workload (its layout names are the layout types, `pto_wsp/type_checker.py`)
_TYPE_CHECKER = ("wspc checks every kernel call, argument, axis and view when the workload is "
                 "traced and compiled, and reports each error at the user's line",
                 "compile the workload (`w().compile()`) and catch `TypeCheckError` / "
                 "`KernelError`")
TypeChecker = Unsupported("TypeChecker", *_TYPE_CHECKER)
TypeCheckContext = Unsupported("TypeCheckContext", *_TYPE_CHECKER)
TypeErrorInfo = Unsupported("TypeErrorInfo", *_TYPE_CHECKER)
TypeErrorKind = Unsupported("TypeErrorKind", *_TYPE_CHECKER)
check_kernel_call = Unsupported("check_kernel_call", *_TYPE_CHECKER)
validate_axis_index = Unsupported("validate_axis_index", *_TYPE_CHECKER)

__all__ = ["Unsupported", "Symbol",
           "ExecutionContext", "ExecutionPlan", "TraceEvent", "TileType", "ScalarType", "ValueId",
           "OpKind", "Op", "LoopFrame", "ConditionalFrame", "KernelParam",
           "extract_kernel_params", "WorkloadBuilder", "get_current_builder", "push_builder",
           "pop_builder", "TaskExpr", "task_param", "trace_task_fn", "to_cpp",
           "TypeChecker", "TypeCheckContext", "TypeErrorInfo", "TypeErrorKind",
           "check_kernel_call", "validate_axis_index"]
