"""`pto_wsp.kernel`: the prototype's kernel language, which is wspc's (`ptowsp.embed.kernel`):
`@kernel` / `@jit_kernel` (a decorated kernel is a `JITKernel`), the parameter annotations,
`pto` / `tl`, `Value` (a traced tile), `KernelIR` (`k.trace()`) and `CompiledKernel`
(`k.compile(target, **constexprs)`: the generated source). The prototype's own kernel IR
classes (`TileType`, `ScalarType`, `ValueId`, `OpKind`, `Op`) import but are errors when used:
a kernel lowers to wspc's IR."""

from typing import TypeVar

from ptowsp.embed.kernel import KernelIR, KernelRef, Value, jit_kernel, kernel, pto, tl
from ptowsp.embed.signature import CompiledKernel
from ptowsp.embed.unsupported import Op, OpKind, ScalarType, TileType, ValueId
from ptowsp.embed.values import Constexpr, DType, In, InOut, Location, Out, Scalar, Tensor, Tile

T = TypeVar("T")
JITKernel = KernelRef

__all__ = ["TileType", "ScalarType", "Constexpr", "In", "Out", "InOut", "Tile", "Scalar",
           "ValueId", "Value", "OpKind", "Op", "KernelIR", "pto", "tl", "CompiledKernel",
           "JITKernel", "jit_kernel", "kernel", "DType", "Location", "Tensor", "T"]
