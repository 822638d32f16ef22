"""`pto_wsp.builder`: the prototype's `@workload` builder module. `workload_decorator` is
`@workload`, `Kernel` / `KernelRef` a decorated kernel, `kernel` and the parameter annotations
are wspc's, and `get_direction` / `get_inner_type` read an annotation. The builder's own
machinery (`WorkloadBuilder`, its frames and stack, `KernelParam`, `extract_kernel_params`)
imports but is an error when used: wspc's tracer does that work (docs/python.md)."""

from typing import Any, TypeVar

from ptowsp.embed.kernel import KernelRef, kernel
from ptowsp.embed.unsupported import (
    ConditionalFrame,
    KernelParam,
    LoopFrame,
    WorkloadBuilder,
    extract_kernel_params,
    get_current_builder,
    pop_builder,
    push_builder,
)
from ptowsp.embed.values import Constexpr, ConstexprSpec, DType, In, InOut, Out, ParamSpec
from ptowsp.embed.workload import workload as workload_decorator

T = TypeVar("T")
Kernel = KernelRef


def get_direction(hint: Any) -> str:
    """The direction of a parameter annotation: "in", "out", "inout", "constexpr" (also for a
    bare `Constexpr`), or "unknown"; an annotation written as text counts by its first word."""
    if isinstance(hint, ParamSpec):
        return hint.mode.lower()
    if isinstance(hint, ConstexprSpec) or hint is Constexpr:
        return "constexpr"
    if isinstance(hint, str):
        for word in ("InOut", "In", "Out", "Constexpr"):
            if hint.startswith(word + "["):
                return word.lower()
    return "unknown"


def get_inner_type(hint: Any) -> Any:
    """What a direction annotation wraps (`In[Tile[...]]` gives the `Tile[...]`), else None."""
    if isinstance(hint, ParamSpec):
        return hint.inner
    if isinstance(hint, ConstexprSpec):
        return hint.dtype
    return None


__all__ = ["LoopFrame", "ConditionalFrame", "KernelParam", "extract_kernel_params",
           "WorkloadBuilder", "get_current_builder", "push_builder", "pop_builder",
           "workload_decorator", "Kernel", "kernel", "KernelRef", "In", "Out", "InOut",
           "Constexpr", "get_direction", "get_inner_type", "DType", "T"]
