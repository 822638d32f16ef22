"""The kernel primitives, as one table every stage reads.

- `table.py`: the table. `PRIMITIVES` maps each primitive of language.md section 4 to a
  `Primitive` (parameters, typing rule, the IR op it lowers to).
- `types.py`: kernel value types (`Type`), dtype promotion, broadcasting over symbolic dims.
- `typing_rules.py`: how the checker types a primitive call or an operator.

Part of the base layer: it imports nothing of wspc but the other base modules.
"""

from .table import (
    ARITH_OPERATORS,
    COMPARE_OPERATORS,
    LOGIC_OPERATORS,
    PRIMITIVES,
    UNARY_OPERATORS,
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
    "PRIMITIVES", "Primitive", "Param", "ARITH_OPERATORS", "COMPARE_OPERATORS", "LOGIC_OPERATORS", "UNARY_OPERATORS",
    "Type", "ERROR", "tile", "scalar", "literal_type", "with_dtype", "promote", "combine",
    "convertible", "literal_fits", "broadcast", "fits", "same_shape",
    "Arg", "Typing", "elementwise_binary", "compare", "logic", "unary",
]
