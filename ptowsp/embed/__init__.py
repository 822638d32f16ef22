"""The PTO-WSP Python API of the seed documents (docs/python.md): `@kernel`, `@workload`, `P`,
`pto`, the CSP builders and the seeds' `Program`, traced into the same AST as `.wsp` text and
run through the same checker, driver and back ends. `pto_wsp` is its import alias.

Its modules import only downwards, in this order (`|`: side by side, not importing each other):

    source < errors < names < layouts < trace < values < axes | calls < signature < kernel
           | schedule | program | unsupported | collectives < assemble | ptoisa | host_keys
           | external
           < workload < csp | auto_schedule

`source` finds spans and names in the user's code; `errors` the seeds' error classes; `names`
turns Python names into `.wsp` ones; `trace` records statements; `values` are what workloads
handle (dtypes, annotations, scalar expressions, tensors, channels); `axes` the iteration
spaces; `calls` a kernel call's statement and the task handles its `after=` names; `signature` a kernel's parameters and compiled source; `kernel` traces
`@kernel` bodies; `schedule` the policies; `program` the compiled program; `unsupported` the
seed names wspc reports; `collectives` the collective statements (`allreduce`, ...); `ptoisa`
the prototype's PTO-ISA kernels (`@ptoisa_kernel`); `external` the seeds' `ExternalKernel`
(tile types from its first call); `assemble` makes a module of a workload; `host_keys` tabulates
schedule key functions that decide with an `if`; `workload` is `@workload`,
`P` and `Workload`; `csp` the CSP builders (`connect` outside a workload is a `Workload`);
`auto_schedule` explores a workload's schedules on the cycle model.

`EXPORTS` names the public API: each name and the module defining it. `ptowsp` (and through it
`pto_wsp`) exports these names and imports a module on the first use of one of its names, so
importing this package imports none of its modules (and neither NumPy nor Lark).
"""

from __future__ import annotations

import importlib

_MODULES = {
    "workload": ("P", "workload", "Workload", "combine", "sequential", "cond", "slot_set_u64",
                 "slot_load_u64", "to_wsp"),
    "schedule": ("DispatchPolicy", "TimingPolicy", "TaskWindow", "WindowMode", "Deps", "DepsMode",
                 "ReadyPolicy", "StartPolicy", "TracePolicy", "Pools"),
    "kernel": ("kernel", "jit_kernel", "pto", "tl", "KernelRef", "CompiledKernel",
               "KernelSignature"),
    "values": (
        "In", "Out", "InOut", "Pad", "Constexpr", "Tile", "Scalar", "Tensor", "DType",
        "Location", "slot_u64", "slot_i64", "slot_bool", "symbol_u64", "ceildiv", "axis",
        "Channel", "Event", "scratch", "AxisVar", "IntVar",
    ),
    "axes": ("Dense", "DenseDyn", "Ragged", "Sparse"),
    "csp": (
        "process", "send", "try_send", "consume", "connect", "replicate", "record", "synchronize",
        "query", "for_each", "parallel_for", "select", "task",
    ),
    "auto_schedule": ("AutoScheduler", "SearchSpace", "ScheduleConfig", "ExplorationResult",
                      "ExplorationSummary", "auto_schedule"),
    "program": ("Program", "TraceLevel", "Task", "TaskResource"),
    "errors": (
        "PtoError", "CompileError", "TypeCheckError", "IRConversionError", "ExecutionError",
        "KernelError", "ScheduleError", "ChannelError", "ChannelClosed", "ChannelFull",
    ),
    "layouts": ("TensorLayout", "TensorShard", "TensorReplicate", "MemLayout", "Shard",
                "Replicate", "DistElem", "tensor_layout_join", "LayoutIncompatibleError"),
    "collectives": ("relayout", "allreduce", "allgather", "reduce_scatter", "all_to_all"),
    "external": ("ExternalKernel",),
    "ptoisa": ("ptoisa", "ptoisa_kernel"),
}

EXPORTS: dict[str, str] = {name: mod for mod, names in _MODULES.items() for name in names}


def exported(name: str) -> object:
    """The object the public name `name` (a key of `EXPORTS`) stands for, its module imported
    if it was not yet."""
    return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)


__all__ = ["EXPORTS", "exported"]
