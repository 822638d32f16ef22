"""`gather(x, idx, axis)`: rows or columns of a tile picked by data (language.md section 4,
"Gather"). One module holds what the table needs of it: its typing rule, the shape and dtype
rules and NumPy meanings of its two ops.

The ops (operands x, then idx in its own integer dtype; the value has x's dtype):
- `gather_rows` (axis 0): x `[M, N]`, idx `[R, 1]` -> `[R, N]`, row i is x's row idx[i, 0]
  (`np.take(x, idx[:, 0], axis=0)`).
- `gather_cols` (axis 1): x `[M, N]`, idx `[M, K]` -> `[M, K]`, element (i, j) is
  x[i, idx[i, j]] (`np.take_along_axis(x, idx, axis=1)`, torch.gather(dim=1)).

An index outside 0 .. extent - 1 of x's gathered axis, negative ones included (no wrap-around),
gives a 0 element of x's dtype (`false` for bool): kernels have no run-time errors, and 0 is
what a kernel already gives where a value has no answer (an integer `x / 0`).
"""

from __future__ import annotations

from typing import Any

from .. import sym
from ..dtypes import INT_DTYPES, kind_of
from .meanings import np
from .op_rules import _fail, _shape, _tile
from .types import ERROR, Type, tile
from .typing_rules import Typing, _need_tile

AXIS_OPS = ("gather_rows", "gather_cols")  # the op of axis 0, of axis 1

# ---------------------------------------------------------------------------------------------
# The typing rule (the checker's)


def type_gather(t: Typing) -> Type:
    """gather: x [M, N] any dtype; axis 0: idx [R, 1] -> [R, N]; axis 1: idx [M, K] -> [M, K]."""
    x, idx = t["x"], t["idx"]
    if x.type.is_error or idx.type.is_error or not _need_tile(t, "x") \
            or not _need_tile(t, "idx"):
        return ERROR
    ax = t.args.get("axis")
    axis = 0 if ax is None else sym.const_value(ax.dim) if ax.dim is not None else None
    if axis is None:
        return ERROR
    if kind_of(idx.type.dtype) != "int":
        # decision: the indices are an integer tile of any integer dtype, as a gather view's
        # index tensor; a float is not rounded or truncated for you
        return t.error(
            idx.span,
            "gather-index-dtype",
            f"the indices of `gather` must be an integer tile, found {idx.type}",
            "`cast(idx, i32)` converts them (a float truncates toward zero, a bool gives 0 or 1)",
        )
    xt, it = x.type, idx.type
    if axis == 0:
        one = sym.prove_eq(it.cols, 1, t.ranges)
        if one is not True:
            return t.error(
                idx.span,
                "shape",
                f"`gather` along axis 0 takes one row number per row of the result, an "
                f"[R, 1] tile, found {it.shape_str()}" + (" (may be wider)" if one is None else ""),
                "row i of `gather(x, idx)` is x's row idx[i]; `gather(x, idx, axis = 1)` picks "
                "elements within each row",
            )
        return tile(it.rows, xt.cols, xt.dtype)
    same = sym.prove_eq(it.rows, xt.rows, t.ranges)
    if same is not True:
        return t.error(
            idx.span,
            "shape",
            f"`gather` along axis 1 needs one row of indices per row of x, found "
            f"{xt.shape_str()} and {it.shape_str()}" + (" (may differ)" if same is None else ""),
            "element (i, j) of `gather(x, idx, axis = 1)` is x[i, idx[i, j]]; axis 0 picks "
            "whole rows with an [R, 1] tile of row numbers",
        )
    return tile(xt.rows, it.cols, xt.dtype)


# ---------------------------------------------------------------------------------------------
# Op rules (ir/verify.py's)


def gather_rule(op, args, params) -> None:
    x, idx = args
    (m, n), (r, k) = _tile(x), _tile(idx)
    if idx.dtype not in INT_DTYPES:
        _fail(f"indices of dtype {idx.dtype}, not an integer dtype")
    if op.dtype != x.dtype:
        _fail(f"dtype {op.dtype} should be x's {x.dtype}")
    if op.op == "gather_rows":
        if k != 1:
            _fail(f"indices {idx.shape} should be [R, 1]")
        _shape(op, (r, n))
    else:
        if r != m:
            _fail(f"indices {idx.shape} should have x's {m} rows")
        _shape(op, (m, k))


# ---------------------------------------------------------------------------------------------
# NumPy meanings (backends/ref's)


def gather(ev: Any, x, idx):
    """x's rows (gather_rows) or each row's elements (gather_cols) at idx; 0 out of range."""
    axis = AXIS_OPS.index(ev.op.op)
    n = x.shape[axis]
    # int64: a u64 index past 2^63 - 1 wraps negative, out of range as it was
    k = (idx[:, 0] if axis == 0 else idx).astype(np.int64)
    ok = (k >= 0) & (k < n)
    safe = np.where(ok, k, 0)
    if axis == 0:
        got, ok = np.take(x, safe, axis=0), ok[:, None]
    else:
        got = np.take_along_axis(x, safe, axis=1)
    return np.where(ok, got, np.zeros((), x.dtype))
