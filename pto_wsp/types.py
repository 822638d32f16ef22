"""`pto_wsp.types`: the prototype's axis, dtype and tensor types, which are wspc's (`Dense`,
`DenseDyn`, `Ragged`, `Sparse`, `DType`, `Location`, `Tensor`). Layouts, distribution and
collectives import but are errors when used (tensors are plain row-major arrays, and there is
no device mesh); so is `Symbol`, a scalar read from a run-time table (docs/python.md)."""

from typing import TypeVar

from ptowsp.embed.axes import Dense, DenseDyn, Ragged, Sparse
from ptowsp.embed.unsupported import (
    DistElem,
    LayoutIncompatibleError,
    MemLayout,
    Symbol,
    TensorLayout,
    TensorReplicate,
    TensorShard,
    allgather,
    allreduce,
    reduce_scatter,
    relayout,
    tensor_layout_join,
)
from ptowsp.embed.values import DType, Location, Tensor

N = TypeVar("N", bound=int)

__all__ = ["N", "Dense", "DenseDyn", "Ragged", "Sparse", "Symbol", "DType", "Location",
           "MemLayout", "DistElem", "TensorReplicate", "TensorShard", "TensorLayout",
           "LayoutIncompatibleError", "tensor_layout_join", "Tensor", "relayout", "allreduce",
           "allgather", "reduce_scatter"]
