"""Sorting and selection along each row: `sort`, `topk`, `argmax`, `argmin` (language.md
section 4, "Sorting and selection"). One module holds what the table needs of them: their
typing rules, the shape and dtype rules and NumPy meanings of their ops, and the expansion of
`argmax` / `argmin` into other ops.

The ops:
- `sort_values` / `sort_indices` (attr `"asc"` or `"desc"`): the first k of each row of x in
  that order (k is the op's column count; `sort` keeps every column, `topk` the first k of the
  descending order), the values in x's dtype or their column numbers in i32. The order is
  stable: equal values keep their column order (the lower index first, in both directions).
  NaN is the greatest value: last in ascending order, first in descending order.
- `argmax` / `argmin`: the column of each row's first maximum / minimum, [M, 1] i32; a row
  holding NaN gives its first NaN (NumPy's argmax and argmin; rowmax and rowmin of that row
  are NaN too, so `x[argmax(x)]` is always `rowmax(x)`). They are expansions (rowmax, a
  comparison, `where` over column numbers, rowmin), so no back end has code of its own for
  them.
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..dtypes import kind_of
from .meanings import np
from .op_rules import _fail, _shape, _tile
from .types import ERROR, Type, tile
from .typing_rules import Typing, _need_tile, _no_bool

ORDERS = ("asc", "desc")

# ---------------------------------------------------------------------------------------------
# Typing rules (the checker's)


def _numeric_tile(t: Typing) -> bool:
    nothing = f"`{t.name}` orders the values of each row of a tile; a scalar has none"
    x = t["x"].type
    return not x.is_error and _need_tile(t, "x", nothing) and _no_bool(t, "x")


def type_arg(t: Typing) -> Type:
    """argmax / argmin: [M, N] -> [M, 1] i32."""
    if not _numeric_tile(t):
        return ERROR
    return tile(t["x"].type.rows, 1, "i32")


def type_sort(t: Typing) -> Type:
    """sort: [M, N] -> values [M, N] (the indices: the same shape, i32)."""
    if not _numeric_tile(t):
        return ERROR
    return t["x"].type


def type_topk(t: Typing) -> Type:
    """topk: [M, N], k -> values [M, k] (the indices: the same shape, i32); 1 <= k <= N."""
    k = t["k"].dim
    if not _numeric_tile(t) or k is None:
        return ERROR
    x = t["x"].type
    fits = sym.prove_le(k, x.cols, t.ranges)
    if fits is not True:
        return t.error(
            t["k"].span,
            "topk-k",
            f"`topk` needs k <= the row length: k is {sym.to_str(k)}, the rows of "
            f"{x.shape_str()} have {sym.to_str(x.cols)}"
            + (" (may be fewer)" if fits is None else ""),
            "`sort(x)` orders whole rows; `topk(x, k)` keeps the k largest of each",
        )
    return tile(x.rows, k, x.dtype)


# ---------------------------------------------------------------------------------------------
# Op rules (ir/verify.py's)


def sort_rule(op, args, params) -> None:
    r, c = _tile(args[0])
    if op.attr not in ORDERS:
        _fail(f"order {op.attr!r} is not `asc` or `desc`")
    if args[0].dtype == "bool":
        _fail("sorts bool values")
    if op.shape is None or op.shape[0] != r or not 1 <= op.shape[1] <= c:
        _fail(f"shape {op.shape} should be [{r}, 1..{c}]")
    want = args[0].dtype if op.op == "sort_values" else "i32"
    if op.dtype != want:
        _fail(f"dtype {op.dtype} should be {want}")


def arg_rule(op, args, params) -> None:
    r, _ = _tile(args[0])
    if args[0].dtype == "bool":
        _fail("argmax / argmin of bool values")
    _shape(op, (r, 1))
    if op.dtype != "i32":
        _fail("argmax / argmin yield i32")


# ---------------------------------------------------------------------------------------------
# NumPy meanings (backends/ref's)


def sort_order(x, order: str):
    """The column order of each row of x: stable, NaN the greatest value (module doc)."""
    if order == "asc":
        # NumPy's stable sort: equal values keep their order, NaN last
        return np.argsort(x, axis=1, kind="stable")
    # descending and stable: the ascending stable order of the reversed row, reversed (so equal
    # values keep their order and NaN comes first), mapped back to the columns; no negation,
    # which unsigned and the most negative integers do not survive
    n = x.shape[1]
    return (n - 1) - np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]


def sort_values(ev: Any, x):
    k = ev.op.shape[1]
    return np.take_along_axis(x, sort_order(x, ev.op.attr)[:, :k], axis=1)


def sort_indices(ev: Any, x):
    k = ev.op.shape[1]
    return sort_order(x, ev.op.attr)[:, :k].astype(np.int32)


def arg(what: str, x):
    """NumPy's argmax / argmin per row, keeping the dimension (a NaN: the first NaN)."""
    f = np.argmax if what == "max" else np.argmin
    return f(x, axis=1).astype(np.int32)[:, None]


# ---------------------------------------------------------------------------------------------
# The expansion of argmax / argmin (plan-kernels spells it out; no back end has code for it)


def expand_arg(op: Any, args: tuple[int, ...], emit, operands: tuple) -> int:
    # decision: argmax(x) = rowmin(where(x == rowmax(x) or x != x, col_index, N)): the first
    # column holding the maximum, or when the row holds NaN (its rowmax is NaN, which equals
    # nothing) its first NaN, as NumPy's argmax; argmin alike with rowmin
    (x,) = args
    shape, dt = operands[0].shape, operands[0].dtype
    rows = op.shape[0]
    m = emit("rowmax" if op.op == "argmax" else "rowmin", (x,), (rows, 1), dt)
    hit = emit("eq", (x, m), shape, "bool")
    if kind_of(dt) == "float":
        nan = emit("ne", (x, x), shape, "bool")
        hit = emit("or", (hit, nan), shape, "bool")
    col = emit("iota_col", (), shape, "i32")
    past = emit("literal", (), None, "i32", shape[1])
    key = emit("where", (hit, col, past), shape, "i32")
    return emit("rowmin", (key,), (rows, 1), "i32")
