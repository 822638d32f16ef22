"""`pto_wsp.type_checker`: the prototype's builder-time type checker. wspc's own checker does
its work on every workload (kernel calls, arguments, axes and views are checked when the
workload is traced and compiled, each error a `TypeCheckError` or `KernelError` at the user's
line), so its checker's classes and functions import but are errors when used. Its layout
names are the prototype's aliases of the layout types (`Layout` is `TensorLayout`, `LayoutShard`
`TensorShard`, `layout_join` `tensor_layout_join`, ...); `LayoutCompatibilityError` is
`LayoutIncompatibleError`, and `check_layouts_compatible` their join or None, as the
prototype's (docs/python.md)."""

from ptowsp.embed.layouts import LayoutIncompatibleError as LayoutCompatibilityError
from ptowsp.embed.layouts import TensorLayout as Layout
from ptowsp.embed.layouts import TensorReplicate as LayoutReplicate
from ptowsp.embed.layouts import TensorShard as LayoutShard
from ptowsp.embed.layouts import check_layouts_compatible
from ptowsp.embed.layouts import tensor_layout_join as layout_join
from ptowsp.embed.unsupported import (
    TypeCheckContext,
    TypeChecker,
    TypeErrorInfo,
    TypeErrorKind,
    check_kernel_call,
    validate_axis_index,
)

__all__ = ["TypeErrorKind", "TypeErrorInfo", "TypeCheckContext", "TypeChecker", "Layout",
           "LayoutShard", "LayoutReplicate", "layout_join", "LayoutCompatibilityError",
           "check_kernel_call", "check_layouts_compatible", "validate_axis_index"]
