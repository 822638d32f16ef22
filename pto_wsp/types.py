"""`pto_wsp.types`: the prototype's axis, dtype, tensor and layout types, which are wspc's
(`Dense`, `DenseDyn`, `Ragged`, `Sparse`, `DType`, `Location`, `Tensor`, `TensorLayout`,
`TensorShard`, `TensorReplicate`, `MemLayout`, `tensor_layout_join`) and its collectives
(`relayout`, `allreduce`, `allgather`, `reduce_scatter`: docs/python.md, "Meshes, layouts and
collectives"). `Symbol`, a scalar read from a run-time table, imports but is an error when
used."""

from typing import TypeVar

from ptowsp.embed.axes import Dense, DenseDyn, Ragged, Sparse
from ptowsp.embed.collectives import allgather, allreduce, reduce_scatter, relayout
from ptowsp.embed.layouts import (
    DistElem,
    LayoutIncompatibleError,
    MemLayout,
    TensorLayout,
    TensorReplicate,
    TensorShard,
    tensor_layout_join,
)
from ptowsp.embed.unsupported import Symbol
from ptowsp.embed.values import DType, Location, Tensor

N = TypeVar("N", bound=int)

__all__ = ["N", "Dense", "DenseDyn", "Ragged", "Sparse", "Symbol", "DType", "Location",
           "MemLayout", "DistElem", "TensorReplicate", "TensorShard", "TensorLayout",
           "LayoutIncompatibleError", "tensor_layout_join", "Tensor", "relayout", "allreduce",
           "allgather", "reduce_scatter"]
