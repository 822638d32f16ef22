"""The shape and dtype rules of the IR ops (`ir/nodes.py`'s value semantics, on static shapes):
what `ir/verify.py` checks of each op once its argument count is right. A rule gets the op, its
argument ops and the kernel's parameters by name, and raises `IllTyped` with the message verify
reports (verify adds where: the kernel and the op). `table.py` names each op's rule.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from ..dtypes import FLOAT_DTYPES, INT_DTYPES

# (op, its argument ops, the kernel's parameters by name) -> None, or IllTyped
Rule = Callable[[Any, Sequence[Any], Mapping[str, Any]], None]


class IllTyped(Exception):
    """An op that breaks its rule; the message says how."""


def _fail(message: str):
    raise IllTyped(message)


# ---------------------------------------------------------------------------------------------
# Static shapes


def broadcast_shapes(*shapes: Optional[tuple[int, int]]) -> Optional[tuple[int, int]]:
    """The 2-D NumPy broadcast of tile shapes (None: a scalar), or IllTyped."""
    out = None
    for s in shapes:
        if s is None:
            continue
        if out is None:
            out = s
            continue
        dims = []
        for a, b in zip(out, s):
            if a == b or b == 1:
                dims.append(a)
            elif a == 1:
                dims.append(b)
            else:
                _fail(f"shapes {list(out)} and {list(s)} do not broadcast")
        out = (dims[0], dims[1])
    return out


def fits_shape(shape: Optional[tuple[int, int]], target: tuple[int, int]) -> bool:
    """Whether a value of `shape` broadcasts to exactly `target` (a store, a `broadcast`)."""
    return shape is None or all(a == b or a == 1 for a, b in zip(shape, target))


def _shape(op, want) -> None:
    if op.shape != want:
        _fail(f"shape {op.shape} should be {want}")


def _same_dtype(op, xs) -> None:
    for x in xs:
        if x.dtype != op.dtype:
            _fail(f"operand dtype {x.dtype} differs from the op's {op.dtype}")


def _tile(x) -> tuple[int, int]:
    if x.shape is None:
        _fail("needs a tile operand")
    return x.shape


# ---------------------------------------------------------------------------------------------
# Leaves


def param(op, args, params) -> None:
    p = params.get(op.attr)
    if p is None:
        _fail(f"parameter `{op.attr}` does not exist")
    if p.kind != "tile" or p.mode == "Out":
        _fail(f"`{p.name}` is not an In or InOut tile")
    _shape(op, (p.rows, p.cols))
    _param_dtype(op, p)


def scalar_param(op, args, params) -> None:
    p = params.get(op.attr)
    if p is None:
        _fail(f"parameter `{op.attr}` does not exist")
    if p.kind != "scalar":
        _fail(f"`{p.name}` is not a scalar parameter")
    _shape(op, None)
    _param_dtype(op, p)


def _param_dtype(op, p) -> None:
    if op.dtype != p.dtype:
        _fail(f"dtype {op.dtype} differs from parameter `{p.name}`'s {p.dtype}")


def valid_extent(op, args, params) -> None:
    """`valid_rows`/`valid_cols`: an i32 scalar naming a tile parameter (any mode)."""
    p = params.get(op.attr)
    if p is None or p.kind != "tile":
        _fail(f"`{op.attr}` is not a tile parameter")
    _shape(op, None)
    if op.dtype != "i32":
        _fail(f"dtype {op.dtype} should be i32")


def literal(op, args, params) -> None:
    _shape(op, None)
    if not isinstance(op.attr, (int, float, bool)):
        _fail(f"literal value {op.attr!r} is not a number")


def iota(op, args, params) -> None:
    _tile(op)
    if op.dtype not in INT_DTYPES:
        _fail("iota of a non-integer dtype")


# ---------------------------------------------------------------------------------------------
# Elementwise ops


def arith(op, args, params) -> None:
    """Binary arithmetic: operands of the op's dtype, not bool, broadcasting."""
    _same_dtype(op, args)
    if op.dtype == "bool":
        _fail("arithmetic on bool")
    _shape(op, broadcast_shapes(args[0].shape, args[1].shape))


def compare(op, args, params) -> None:
    if args[0].dtype != args[1].dtype:
        _fail(f"compares {args[0].dtype} with {args[1].dtype}")
    if op.dtype != "bool":
        _fail("a comparison yields bool")
    _shape(op, broadcast_shapes(args[0].shape, args[1].shape))


def logic(op, args, params) -> None:
    if op.dtype != "bool" or any(a.dtype != "bool" for a in args):
        _fail("logic on non-bool values")
    _shape(op, broadcast_shapes(*(a.shape for a in args)))


def conversion(op, args, params) -> None:
    """`convert` and `cast`: any dtype to any, the operand's shape."""
    _shape(op, args[0].shape)


def unary(op, args, params) -> None:
    """A unary op keeping its operand's dtype and shape."""
    _same_dtype(op, args)
    _shape(op, args[0].shape)


def float_unary(op, args, params) -> None:
    """A unary op of float values only (exp, log, ...)."""
    unary(op, args, params)
    if op.dtype not in FLOAT_DTYPES:
        _fail(f"`{op.op}` of a non-float dtype")


def where(op, args, params) -> None:
    if args[0].dtype != "bool":
        _fail("the condition is not bool")
    _same_dtype(op, args[1:])
    _shape(op, broadcast_shapes(*(a.shape for a in args)))


# ---------------------------------------------------------------------------------------------
# Reductions, views and the rest


def row_reduction(op, args, params) -> None:
    _same_dtype(op, args)
    r, _ = _tile(args[0])
    _shape(op, (r, 1))


def col_reduction(op, args, params) -> None:
    _same_dtype(op, args)
    _, c = _tile(args[0])
    _shape(op, (1, c))


def broadcast(op, args, params) -> None:
    _same_dtype(op, args)
    target = _tile(op)
    if not fits_shape(args[0].shape, target):
        _fail(f"cannot broadcast {args[0].shape} to {target}")


def matmul(op, args, params) -> None:
    (m, k1), (k2, n) = _tile(args[0]), _tile(args[1])
    if k1 != k2:
        _fail(f"inner dimensions differ: {args[0].shape} x {args[1].shape}")
    if op.dtype != "f32":
        _fail("matmul yields f32")
    if any(a.dtype == "bool" for a in args[:2]):
        _fail("matmul of bool")
    _shape(op, (m, n))
    if len(args) == 3 and (args[2].dtype != "f32" or args[2].shape != (m, n)):
        _fail("the accumulator must be an f32 tile of the result's shape")


def transpose(op, args, params) -> None:
    _same_dtype(op, args)
    r, c = _tile(args[0])
    _shape(op, (c, r))


def softmax(op, args, params) -> None:
    _same_dtype(op, args)
    _shape(op, _tile(args[0]))
    if op.dtype not in FLOAT_DTYPES:
        _fail("softmax of a non-float dtype")


def half_columns(op, args, params) -> None:
    """`slice_even` / `slice_odd`: every other column of an even-width tile."""
    _same_dtype(op, args)
    r, c = _tile(args[0])
    if c % 2:
        _fail("odd number of columns")
    _shape(op, (r, c // 2))


def interleave(op, args, params) -> None:
    _same_dtype(op, args)
    if args[0].shape != args[1].shape:
        _fail("operands of different shapes")
    r, c = _tile(args[0])
    _shape(op, (r, 2 * c))


def _slice(op, args, axis: int) -> None:
    _same_dtype(op, args)
    shape = _tile(args[0])
    out = _tile(op)
    start = op.attr
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        _fail(f"the first index {start!r} is not a non-negative integer")
    if out[1 - axis] != shape[1 - axis]:
        _fail(f"shape {out} should keep {shape}'s extent on axis {1 - axis}")
    if start + out[axis] > shape[axis]:
        _fail(f"slice {start}:{start + out[axis]} is out of {shape}'s range on axis {axis}")


def slice_rows(op, args, params) -> None:
    """`x[r0:r1, :]`: rows r0 .. r0 + rows - 1 (attr r0)."""
    _slice(op, args, 0)


def slice_cols(op, args, params) -> None:
    """`x[:, c0:c1]`: columns c0 .. c0 + cols - 1 (attr c0)."""
    _slice(op, args, 1)


def _concat(op, args, axis: int) -> None:
    _same_dtype(op, args)
    a, b = _tile(args[0]), _tile(args[1])
    if a[1 - axis] != b[1 - axis]:
        _fail(f"operands {a} and {b} differ on axis {1 - axis}")
    _shape(op, (a[0] + b[0], a[1]) if axis == 0 else (a[0], a[1] + b[1]))


def concat_rows(op, args, params) -> None:
    _concat(op, args, 0)


def concat_cols(op, args, params) -> None:
    _concat(op, args, 1)
