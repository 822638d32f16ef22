"""The module environment: what the declarations of a module (and its imports) mean.

`checker.py` builds a `ModuleEnv` from the parsed files (declarations, consts folded, tensor
dims and axis extents made symbolic); `kernels/` and `workloads/` read it; the
result of a successful check is the `ModuleEnv` itself, which `lower/` consumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .. import sym
from ..records import record
from . import ast as A
from .signatures import KernelSig

Decl = Union[A.SymDecl, A.ConstDecl, A.MeshAxis, A.TensorDecl, A.AxisDecl, A.ChannelDecl, A.EventDecl,
             A.KernelDecl, A.WorkloadDecl, A.ScheduleDecl]

DEFAULT_CHANNEL_DEPTH = 1  # language.md is silent; see docs/language.md
NUM_SLOTS = 64


@record
class TensorInfo:
    """A declared tensor: `kind` is input/output/inout/scratch; dims are symbolic."""

    name: str
    kind: str
    dtype: str
    dims: tuple[sym.Expr, ...]
    decl: A.TensorDecl
    sound: bool = True  # False: a dimension was wrong (reported); a placeholder stands for it
    # where its elements live on the mesh (docs/distributed.md); None: replicated everywhere
    # (no `@` written, or a layout that was wrong and reported)
    layout: Optional[LayoutInfo] = None

    def layout_or_replicated(self) -> LayoutInfo:
        return self.layout or LayoutInfo((None,) * len(self.dims))


@record
class MeshAxisInfo:
    """One axis of the mesh: its size, a positive constant or a sym (`sym.var`)."""

    name: str
    size: sym.Expr
    decl: A.MeshAxis


@record
class MeshInfo:
    """The module's mesh (docs/distributed.md): its axes in order, the last varying fastest."""

    axes: tuple[MeshAxisInfo, ...]
    decl: A.MeshDecl

    def axis(self, name: str) -> Optional[MeshAxisInfo]:
        return next((a for a in self.axes if a.name == name), None)


@record
class LayoutInfo:
    """A tensor's layout: per dimension the mesh axis sharding it (None: replicated), and the
    axes over which it holds partial sums. No layout written is every entry None."""

    dims: tuple[Optional[str], ...]
    partial: tuple[str, ...] = ()

    def sharded_dim(self, axis: str) -> Optional[int]:
        """The dimension `axis` shards, or None."""
        return next((d for d, a in enumerate(self.dims) if a == axis), None)

    def text(self) -> str:
        """As written: `[R, S(tp)] partial(dp)`."""
        body = ", ".join("R" if a is None else f"S({a})" for a in self.dims)
        tail = f" partial({', '.join(self.partial)})" if self.partial else ""
        return f"[{body}]{tail}"


@record
class AxisInfo:
    """A module-level axis.

    kind: `dense` (static `extent`), `densedyn` (symbolic `extent`), `ragged` (`outer` axis name
    and `lengths`: a tensor name or an AST expression of `_`), `sparse` (`outer`, `indptr`,
    `indices` tensor names). `axis a = other_axis` copies the other axis's meaning.
    """

    name: str
    kind: str
    decl: A.AxisDecl
    extent: Optional[sym.Expr] = None
    outer: Optional[str] = None
    lengths_tensor: Optional[str] = None
    lengths_expr: Optional[A.Expr] = None
    indptr: Optional[str] = None
    indices: Optional[str] = None


@record
class ChannelInfo:
    """A channel (data: `elem` = (rows, cols, dtype); token: `elem` None) or an event (depth 0)."""

    name: str
    elem: Optional[tuple[int, int, str]]
    depth: int
    is_event: bool
    decl: Union[A.ChannelDecl, A.EventDecl]
    sound: bool = True  # False: the element type was wrong (reported)


@record
class RuntimeCheck:
    """A fact the checker could not prove; the back ends test it before launching (`span` names
    the statement or argument to blame)."""

    check: sym.Check
    span: A.Span


@dataclass
class ModuleEnv:
    """Everything the declarations say, keyed by name. Built once per check."""

    name: str
    sources: dict[str, str] = field(default_factory=dict)
    files: list[A.SourceFile] = field(default_factory=list)
    names: dict[str, Decl] = field(default_factory=dict)
    consts: dict[str, int] = field(default_factory=dict)
    syms: dict[str, A.SymDecl] = field(default_factory=dict)
    sym_defaults: dict[str, Optional[int]] = field(default_factory=dict)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    axes: dict[str, AxisInfo] = field(default_factory=dict)
    channels: dict[str, ChannelInfo] = field(default_factory=dict)
    kernels: dict[str, A.KernelDecl] = field(default_factory=dict)
    kernel_sigs: dict[str, KernelSig] = field(default_factory=dict)
    # the inferred types of each tile-bodied kernel (kernels.KernelTypes); extern: absent
    kernel_types: dict[str, Any] = field(default_factory=dict)
    workloads: dict[str, A.WorkloadDecl] = field(default_factory=dict)
    schedules: dict[str, A.ScheduleDecl] = field(default_factory=dict)
    checks: list[RuntimeCheck] = field(default_factory=list)
    mesh: Optional[MeshInfo] = None  # the `mesh` declaration, when there is one
    bad_layouts: set[str] = field(default_factory=set)  # tensors whose layout was reported

    def kind_of(self, name: str) -> Optional[str]:
        """`sym`, `const`, `mesh axis`, `tensor`, `axis`, `channel`, `event`, `kernel`, `workload`,
        `schedule`, or None for an unknown name."""
        d = self.names.get(name)
        return None if d is None else DECL_KINDS[type(d)]


DECL_KINDS = {
    A.SymDecl: "sym", A.ConstDecl: "const", A.MeshAxis: "mesh axis", A.TensorDecl: "tensor",
    A.AxisDecl: "axis",
    A.ChannelDecl: "channel", A.EventDecl: "event", A.KernelDecl: "kernel",
    A.WorkloadDecl: "workload", A.ScheduleDecl: "schedule",
}
