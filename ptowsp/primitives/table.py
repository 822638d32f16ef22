"""The primitive table: every kernel primitive of language.md section 4 (`PRIMITIVES`): its
parameters, its typing rule (`typing_rules.py`: what the checker reports), and the IR op a call
lowers to.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..records import record
from . import typing_rules as T
from .types import Type

# ---------------------------------------------------------------------------------------------
# Primitives


@record
class Param:
    """One parameter of a primitive.

    kind: `value` (a tile or a scalar expression; the rule checks which it needs), `dim` (a
    compile-time positive integer: literal, const or Constexpr parameter) or `dtype` (a data-type
    name such as `f32`, written as a bare name). A value becomes an operand of the primitive's
    op converted to `as_dtype`: `result` (the call's dtype: lowering's implicit conversions),
    `own` (its own dtype: no conversion) or a dtype name.
    """

    name: str
    kind: str
    optional: bool = False
    as_dtype: str = "result"


@record
class Primitive:
    """A kernel primitive: name, group (language.md's table), parameters, typing rule, summary,
    and `op`, the IR op a call lowers to (its value arguments, in order, the operands), or None
    when lowering writes it out itself (`load`; `full`, `constant` and `broadcast`, which
    convert and broadcast as a store does)."""

    name: str
    group: str
    params: tuple[Param, ...]
    rule: Callable[[T.Typing], Type]
    summary: str
    op: Optional[str]

    @property
    def signature(self) -> str:
        parts = [p.name + (" = ..." if p.optional else "") for p in self.params]
        return f"{self.name}({', '.join(parts)})"


_X = (Param("x", "value"),)
_AB = (Param("a", "value"), Param("b", "value"))
_DIMS = (Param("rows", "dim"), Param("cols", "dim"))


def _table() -> dict[str, Primitive]:
    rows: list[Primitive] = [
        Primitive("load", "memory", (Param("x", "value"),), T.type_load, "a copy of a tile", None),
        Primitive(
            "full",
            "memory",
            _DIMS + (Param("value", "value"), Param("dtype", "dtype")),
            T.type_full,
            "a [rows, cols] tile of dtype filled with value",
            None,
        ),
        Primitive(
            "constant",
            "memory",
            (Param("value", "value"), Param("dtype", "dtype")),
            T.type_constant,
            "a scalar of dtype",
            None,
        ),
    ]
    for name in ("add", "sub", "mul", "div"):
        rows.append(
            Primitive(name, "arithmetic", _AB, T.type_arith, f"elementwise {name} (broadcasting)",
                      name)
        )
    for name in ("maximum", "minimum"):
        rows.append(
            Primitive(name, "arithmetic", _AB, T.type_arith, f"elementwise {name} (broadcasting)",
                      name)
        )
    for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos"):
        rows.append(
            Primitive(name, "math", _X, T.type_float_unary, f"elementwise {name} of a float value",
                      name)
        )
    for name in ("abs", "neg"):
        rows.append(Primitive(name, "math", _X, T.type_numeric_unary, f"elementwise {name}", name))
    # decision: `pow(x, s)` converts the exponent to x's dtype, like any elementwise operand
    rows.append(
        Primitive(
            "pow",
            "math",
            (Param("x", "value"), Param("exponent", "value")),
            T.type_pow,
            "x raised to a scalar power",
            "pow",
        )
    )
    rows.append(Primitive("relu", "activations", _X, T.type_numeric_unary, "max(x, 0)", "relu"))
    for name in ("gelu", "silu"):
        rows.append(
            Primitive(name, "activations", _X, T.type_float_unary,
                      f"{name} (gelu: tanh approximation)", name)
        )
    for name in ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean"):
        shape = "[M, 1]" if name.startswith("row") else "[1, N]"
        rows.append(
            Primitive(
                name,
                "reductions",
                (Param("x", "value"),),
                T.type_reduction,
                f"{name[3:]} over each {'row' if name.startswith('row') else 'column'} -> {shape}",
                name,
            )
        )
    # decision: `colsub` and `coldiv` exist beside `colmul` and `coladd`, mirroring the row forms
    # decision: rowmul/rowadd/rowsub/rowdiv and colmul/coladd/colsub/coldiv lower to mul/add/sub/div with broadcasting (the checker already fixed the vector's shape)
    for name in ("rowmul", "rowadd", "rowsub", "rowdiv", "colmul", "coladd", "colsub", "coldiv"):
        rows.append(
            Primitive(
                name,
                "broadcast",
                (Param("x", "value"), Param("vec", "value")),
                T.type_row_col_op,
                f"{name[3:]} a {'[M, 1]' if name.startswith('row') else '[1, N]'} vector into each "
                f"{'row' if name.startswith('row') else 'column'}",
                name[3:],
            )
        )
    rows += [
        Primitive(
            "broadcast",
            "broadcast",
            (Param("x", "value"),) + _DIMS,
            T.type_broadcast,
            "x stretched to [rows, cols]",
            None,
        ),
        # decision: `acc` may be given by keyword (`acc = c`) or as a third positional argument
        # decision: matmul operands keep their dtypes (the op reads any numeric tiles); `acc` is f32
        Primitive(
            "matmul",
            "matrix",
            (Param("a", "value", as_dtype="own"), Param("b", "value", as_dtype="own"),
             Param("acc", "value", optional=True)),
            T.type_matmul,
            "[M, K] x [K, N] -> [M, N] f32; with acc: acc + a @ b",
            "matmul",
        ),
        Primitive("transpose", "matrix", _X, T.type_transpose, "[M, N] -> [N, M]", "transpose"),
        Primitive("softmax", "special", _X, T.type_softmax, "row-wise softmax", "softmax"),
        Primitive(
            "cast",
            "special",
            (Param("x", "value", as_dtype="own"), Param("dtype", "dtype")),
            T.type_cast,
            "x converted to dtype",
            "cast",
        ),
        Primitive(
            "where",
            "special",
            (Param("cond", "value", as_dtype="bool"),) + _AB,
            T.type_where,
            "a where cond holds, else b (broadcasting)",
            "where",
        ),
        Primitive("row_index", "special", _DIMS, T.type_index, "i32 tile of row numbers",
                  "iota_row"),
        Primitive("col_index", "special", _DIMS, T.type_index, "i32 tile of column numbers",
                  "iota_col"),
        Primitive("slice_even", "special", _X, T.type_slice, "columns 0, 2, 4, ...", "slice_even"),
        Primitive("slice_odd", "special", _X, T.type_slice, "columns 1, 3, 5, ...", "slice_odd"),
        Primitive("interleave", "special", _AB, T.type_interleave,
                  "inverse of slice_even/slice_odd", "interleave"),
    ]
    return {p.name: p for p in rows}


PRIMITIVES: dict[str, Primitive] = _table()

# The operator forms and the op each one means.
ARITH_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
COMPARE_OPERATORS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
LOGIC_OPERATORS = {"and": "and", "or": "or"}
UNARY_OPERATORS = {"-": "neg", "not": "not"}
