"""`pto_wsp`: the PTO-WSP seed documents' package name, an alias of `ptowsp`.

    from pto_wsp import kernel, workload, P, pto, In, Out, Tile, Tensor, DType
    from pto_wsp.csp import Channel, send, consume      # the prototype's submodules

Every name resolves to the same object as `ptowsp.NAME` (loaded on first use): the embedding's
names (`ptowsp.embed.EXPORTS`) and ptowsp's own, so seed programs run unchanged through wspc's
front end, checker, IR and back ends. The submodules (`csp`, `primitives`, `schedule`, `types`,
`program`, `kernel`, `builder`, `errors`, `scalar_expr`, `ptoisa_jit`, `type_checker`) give the
prototype's module layout, each name with wspc's meaning (docs/python.md).
"""

import sys
import types as _types

import ptowsp as _ptowsp

__version__ = _ptowsp.__version__

# names the prototype's package exports that only its submodules define here (wspc's objects
# under the prototype's names, or refusals): the submodule is imported on first use
_FROM_SUBMODULES = {
    "TaskGraphConfig": "schedule", "DistElem": "types", "LayoutIncompatibleError": "types",
    "tensor_layout_join": "types", "TraceEvent": "program", "ExecutionTrace": "program",
    "Value": "kernel", "TileType": "kernel", "ScalarType": "kernel", "KernelIR": "kernel",
    "CompiledKernel": "kernel", "OpKind": "kernel", "Kernel": "builder",
    "KernelParam": "builder", "extract_kernel_params": "builder",
    **{n: "type_checker" for n in (
        "TypeChecker", "TypeCheckContext", "TypeErrorInfo", "TypeErrorKind", "Layout",
        "LayoutShard", "LayoutReplicate", "layout_join", "LayoutCompatibilityError",
        "check_kernel_call", "check_layouts_compatible", "validate_axis_index")},
}
__all__ = list(_ptowsp.__all__) + list(_FROM_SUBMODULES)


def __getattr__(name: str):
    if name in _FROM_SUBMODULES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_FROM_SUBMODULES[name]}"), name)
    try:
        return getattr(_ptowsp, name)
    except AttributeError:
        raise AttributeError(f"module 'pto_wsp' has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(_types.ModuleType):
    """Why: `kernel` is both the decorator (`from pto_wsp import kernel`) and a submodule
    (`from pto_wsp.kernel import pto`), as in the prototype. Importing a submodule sets the
    package's attribute of that name to the module, which would turn `pto_wsp.kernel` into a
    module for every later `from pto_wsp import kernel`; the API name is kept instead (the
    submodule stays in `sys.modules`, where `from pto_wsp.kernel import ...` finds it)."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, _types.ModuleType) and name in __all__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
