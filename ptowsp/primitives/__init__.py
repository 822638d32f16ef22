"""The kernel primitives and the IR ops they lower to, as one table every stage reads.

- `table.py`: the table. `OPS` maps each IR op (`ir.nodes.Op.op`) to an `OpSpec` (arity, shape
  and dtype rule, fusion category, plan kind, NumPy meaning); `PRIMITIVES` maps each primitive
  of language.md section 4 to a `Primitive` (parameters, typing rule, the op it lowers to).
- `types.py`: kernel value types (`Type`), dtype promotion, broadcasting over symbolic dims.
- `typing_rules.py`: how the checker types a primitive call or an operator.
- `op_rules.py`: the IR ops' shape and dtype rules (`ir/verify.py`).
- `meanings.py`: the IR ops' NumPy meanings (`backends/ref`); NumPy is imported on first use.
- `expansions.py`: ops `plan-kernels` spells out as other ops (softmax).
- `selection.py`, `gathers.py`: what the table needs of sorting and selection, and of `gather`.

Part of the base layer: it imports nothing of wspc but the other base modules.
"""

from .gathers import AXIS_OPS as GATHER_OPS
from .op_rules import IllTyped, broadcast_shapes, fits_shape
from .table import (
    ARITH_OPERATORS,
    BROADCAST,
    COMPARE_OPERATORS,
    COMPLEX,
    ELEMWISE,
    INJECTIVE,
    LOGIC_OPERATORS,
    OPAQUE,
    OPS,
    PRIMITIVES,
    REDUCTION,
    UNARY_OPERATORS,
    VALID_OPS,
    OpSpec,
    Param,
    Primitive,
)
from .types import (
    ERROR,
    Type,
    broadcast,
    combine,
    convertible,
    fits,
    literal_fits,
    literal_type,
    promote,
    same_shape,
    scalar,
    tile,
    with_dtype,
)
from .typing_rules import Arg, Typing, compare, elementwise_binary, logic, unary

__all__ = [
    "OPS", "OpSpec", "PRIMITIVES", "Primitive", "Param", "IllTyped", "broadcast_shapes",
    "fits_shape", "GATHER_OPS", "INJECTIVE", "ELEMWISE", "BROADCAST", "REDUCTION", "COMPLEX", "OPAQUE",
    "ARITH_OPERATORS", "COMPARE_OPERATORS", "LOGIC_OPERATORS", "UNARY_OPERATORS", "VALID_OPS",
    "Type", "ERROR", "tile", "scalar", "literal_type", "with_dtype", "promote", "combine",
    "convertible", "literal_fits", "broadcast", "fits", "same_shape",
    "Arg", "Typing", "elementwise_binary", "compare", "logic", "unary",
]
