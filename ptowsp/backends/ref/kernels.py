"""Kernel evaluation in the ref interpreter: `eval_op` computes one op's value from its
arguments' values, `eval_kernel` runs a tile-bodied kernel's ops in order and returns the values
it stores. The op rules are those of `ir/nodes.py` and the semantics in `interp.py`."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ...diagnostics import InternalError
from ...dtypes import kind_of, numpy_compute_dtype
from ...ir import nodes as N
from .values import convert, scalar_value, value_dtype


def _idiv(a, b):
    zero = b == 0
    q = np.floor_divide(a, np.where(zero, b.dtype.type(1), b))
    return np.where(zero, a.dtype.type(0), q)


def _sigmoid(x):
    # e = exp(-|x|) never overflows, so sigmoid stays accurate far into the negatives
    # (1 / (1 + exp(-x)) underflows to 0 below about -88 in f32)
    one = x.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, one, e) / (one + e)


def _at_minus_inf_zero(x, y):
    """`y` with the limit -0 where x is -inf (x * sigmoid(x) and gelu tend to -0 there)."""
    return np.where(np.isneginf(x), x.dtype.type(-0.0), y)


def _silu(x):
    with np.errstate(invalid="ignore"):
        return _at_minus_inf_zero(x, x * _sigmoid(x))


def _gelu(x):
    t = x.dtype.type
    c = t(np.sqrt(2.0 / np.pi))
    with np.errstate(over="ignore", invalid="ignore"):
        return _at_minus_inf_zero(x, t(0.5) * x * (t(1) + np.tanh(c * (x + t(0.044715) * x * x * x))))


# decision: maximum/minimum (and rowmax/rowmin) propagate NaN, as NumPy's maximum does
_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "pow": np.power, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or,
}
_UNARY: dict[str, Callable] = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
    "sin": np.sin, "cos": np.cos, "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "gelu": _gelu, "silu": lambda x: _silu(x), "not": np.logical_not,
}


def _reduce(name: str, x: np.ndarray) -> np.ndarray:
    axis = 1 if name.startswith("row") else 0
    what = name[3:]
    if what == "sum":
        return np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
    if what == "mean":
        s = np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
        return s / x.dtype.type(x.shape[axis])
    if what == "max":
        return np.max(x, axis=axis, keepdims=True)
    return np.min(x, axis=axis, keepdims=True)


def eval_op(op: N.Op, args: list[np.ndarray], inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """One op's value from its arguments' values (`inputs`: parameter values by name)."""
    name = op.op
    if name in ("param", "scalar_param"):
        return inputs[op.attr]
    if name == "literal":
        # decision: a literal is its value converted to the op's dtype (an f16 literal is rounded to f16)
        return scalar_value(op.attr, op.dtype)
    if name in ("iota_row", "iota_col"):
        r, c = op.shape
        idx = np.arange(r if name == "iota_row" else c, dtype=numpy_compute_dtype(op.dtype))
        return np.broadcast_to(idx[:, None] if name == "iota_row" else idx[None, :], (r, c))
    if name in ("convert", "cast"):
        return convert(args[0], value_dtype(args[0]), op.dtype)
    if name == "div":
        if kind_of(op.dtype) == "int":
            return _idiv(args[0], args[1])
        return np.divide(args[0], args[1])
    if name in _BINARY:
        return _BINARY[name](args[0], args[1])
    if name in _UNARY:
        return _UNARY[name](args[0])
    if name == "where":
        return np.where(args[0], args[1], args[2])
    if name in N.REDUCTIONS:
        return _reduce(name, args[0])
    if name == "broadcast":
        return np.broadcast_to(args[0], op.shape)
    if name == "matmul":
        # decision: matmul converts both operands to f32 (f64 rounds, integers convert) and multiplies in f32; `acc` is added to the product
        out = np.matmul(args[0].astype(np.float32), args[1].astype(np.float32))
        if len(args) == 3:
            out = args[2] + out
        return out
    if name == "transpose":
        return args[0].T
    if name == "softmax":
        # decision: e * (1 / rowsum(e)), e = exp(x - rowmax(x)): one division per row, as the
        # C kernels compute it and as the plan-kernels pass spells it out in ops (so -O0 and
        # -O2 agree to the bit)
        x = args[0]
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        s = np.sum(e, axis=1, keepdims=True)
        return e * (np.ones_like(s) / s)
    if name == "slice_even":
        return args[0][:, 0::2]
    if name == "slice_odd":
        return args[0][:, 1::2]
    if name == "interleave":
        a, b = args
        out = np.empty((a.shape[0], a.shape[1] * 2), dtype=a.dtype)
        out[:, 0::2] = a
        out[:, 1::2] = b
        return out
    raise InternalError("ref", f"no rule for op `{name}`")


def eval_kernel(k: N.Kernel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate a tile-bodied kernel: `inputs` maps In/InOut tiles and scalars to compute
    values; returns each stored parameter's value (param dtype, tile shape)."""
    params = {p.name: p for p in k.params}
    vals: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op in k.ops:
            v = eval_op(op, [vals[a] for a in op.args], inputs)
            v = np.asarray(v, dtype=numpy_compute_dtype(op.dtype))
            if op.shape is not None and v.shape != op.shape:
                v = np.broadcast_to(v, op.shape)
            vals.append(v)
        out = {}
        for name, idx in k.stores:
            p = params[name]
            v = vals[idx]
            if k.ops[idx].dtype != p.dtype:
                v = convert(v, value_dtype(v), p.dtype)
            out[name] = np.array(np.broadcast_to(v, (p.rows, p.cols)),
                                 dtype=numpy_compute_dtype(p.dtype))
    return out


