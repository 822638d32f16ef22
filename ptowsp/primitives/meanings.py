"""The NumPy meanings of the IR ops: what each computes, as `backends/ref` runs it (the oracle the
other back ends are tested against). `table.py` gives each op its meaning, a function of an
`Evaluation` (the op and what the interpreter's value model provides) and the operands' values.

Values are NumPy arrays in their dtype's compute representation (`ptowsp.dtypes`: f16 and bf16
computed in float32). NumPy is imported when a meaning first runs, never when the table is:
`import ptowsp` and `wspc check` stay cheap.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..dtypes import kind_of, numpy_compute_dtype


class _NumPy:
    """The `numpy` module, imported on first use; each name is looked up once."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        value = getattr(numpy, name)
        setattr(self, name, value)
        return value


np: Any = _NumPy()


class Evaluation(Protocol):
    """What a meaning may ask of the interpreter running it: the op, and the values of its value
    model that are not plain NumPy (parameters, numbers of a dtype, conversions)."""

    op: Any  # the `ir.nodes.Op` being evaluated

    def input(self, name: str) -> Any:
        """The value of the kernel parameter `name`."""

    def scalar(self, value: Any, dtype: str) -> Any:
        """A Python number as a 0-d value of `dtype`."""

    def convert(self, x: Any, dtype: str) -> Any:
        """A value converted to `dtype` (`convert` and `cast`)."""


def iota(ev: Evaluation, axis: int):
    """The row (axis 0) or column (axis 1) numbers of the op's shape."""
    r, c = ev.op.shape
    idx = np.arange(ev.op.shape[axis], dtype=numpy_compute_dtype(ev.op.dtype))
    return np.broadcast_to(idx[:, None] if axis == 0 else idx[None, :], (r, c))


def divide(ev: Evaluation, a, b):
    """Float division (IEEE), or integer floor division with x / 0 == 0."""
    if kind_of(ev.op.dtype) != "int":
        return np.divide(a, b)
    zero = b == 0
    q = np.floor_divide(a, np.where(zero, b.dtype.type(1), b))
    return np.where(zero, a.dtype.type(0), q)


def power(ev: Evaluation, a, b):
    """a ** b. A float power is computed in f64 and rounded once to the operands' dtype: the
    correctly rounded libm `pow` in f64, so the value does not depend on the NumPy release
    (NumPy 2.4's f32 `power` is a SIMD routine up to 1 ULP from the rounded result, where earlier
    releases called `powf`). Integer powers stay NumPy's."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f" or a.dtype.itemsize >= 8:
        return np.power(a, b)
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


def sigmoid(x):
    # e = exp(-|x|) never overflows, so sigmoid stays accurate far into the negatives
    # (1 / (1 + exp(-x)) underflows to 0 below about -88 in f32)
    one = x.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, one, e) / (one + e)


def _at_minus_inf_zero(x, y):
    """`y` with the limit -0 where x is -inf (x * sigmoid(x) and gelu tend to -0 there)."""
    return np.where(np.isneginf(x), x.dtype.type(-0.0), y)


def silu(x):
    with np.errstate(invalid="ignore"):
        return _at_minus_inf_zero(x, x * sigmoid(x))


def gelu(x):
    # decision: gelu is the tanh approximation 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715
    # x^3), computed as the equal x * sigmoid(2u): 1 + tanh(u) cancels for x < 0 (gelu(-5.4)
    # 10^8 ulp off in f32, gelu(-8.3) -0), the sigmoid form keeps its relative accuracy there
    t = x.dtype.type
    c = t(np.sqrt(2.0 / np.pi))
    with np.errstate(over="ignore", invalid="ignore"):
        u = c * (x + t(0.044715) * x * x * x)
        return _at_minus_inf_zero(x, x * sigmoid(u + u))


def reduce(what: str, x, axis: int):
    """`sum`, `mean`, `max` or `min` along `axis` (1: each row), keeping the dimension."""
    if what == "sum":
        return np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
    if what == "mean":
        s = np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
        return s / x.dtype.type(x.shape[axis])
    if what == "max":
        return np.max(x, axis=axis, keepdims=True)
    return np.min(x, axis=axis, keepdims=True)


def matmul(a, b, acc=None):
    # decision: matmul converts both operands to f32 (f64 rounds, integers convert) and multiplies in f32; `acc` is added to the product
    out = np.matmul(a.astype(np.float32), b.astype(np.float32))
    return out if acc is None else acc + out


def softmax(x):
    # decision: e * (1 / rowsum(e)), e = exp(x - rowmax(x)): one division per row, as the
    # table's expansion spells it out in ops (so -O0 and -O2 agree to the bit)
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    s = np.sum(e, axis=1, keepdims=True)
    return e * (np.ones_like(s) / s)


def interleave(a, b):
    out = np.empty((a.shape[0], a.shape[1] * 2), dtype=a.dtype)
    out[:, 0::2] = a
    out[:, 1::2] = b
    return out


def slice_along(ev, x, axis: int):
    """`slice_rows` / `slice_cols`: the op's extent along `axis` from its first index `attr`."""
    start = int(ev.op.attr)
    stop = start + ev.op.shape[axis]
    return x[start:stop] if axis == 0 else x[:, start:stop]
