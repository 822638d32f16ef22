"""Values of the ref interpreter and their dtype conversions, by the rules of the semantics in
`interp.py`: a value is a NumPy array in its dtype's compute representation, an element of a
tensor is in its storage representation (both from `ptowsp.dtypes`: f16 and bf16 compute in
float32, bf16 is stored as its raw uint16 bits). `convert` is `convert` and `cast`,
`scalar_value` a literal or scalar argument (`dtypes.to_compute` / `to_storage` cross between
the two representations), `value_dtype` names the dtype a value is held as."""

from __future__ import annotations

import numpy as np

from ...diagnostics import InternalError
from ...dtypes import INT_DTYPES, bf16_round, kind_of, numpy_compute_dtype, numpy_dtype

# the conversions between storage and compute are the dtype table's, named here too (ref's
# values are what they convert)
from ...dtypes import bf16_bits as bf16_bits
from ...dtypes import bf16_from_bits as bf16_from_bits
from ...dtypes import to_compute as to_compute
from ...dtypes import to_storage as to_storage


def _f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """f64 values as f32, truncated toward zero with the last bit set when inexact."""
    with np.errstate(over="ignore", invalid="ignore"):
        near = x.astype(np.float32)
        bits = near.view(np.uint32).copy()
        # where rounding to nearest went away from zero, step back one ulp toward zero
        away = np.isfinite(near) & (np.abs(near.astype(np.float64)) > np.abs(x))
        bits = np.where(away, bits - 1, bits).astype(np.uint32)
        trunc = bits.view(np.float32)
        inexact = np.isfinite(x) & (trunc.astype(np.float64) != x)
        bits = np.where(inexact, bits | 1, bits).astype(np.uint32)
        out = bits.view(np.float32)
        # values past f32's range: rounding to odd gives the largest finite f32 (bf16 then rounds)
        big = np.isfinite(x) & ~np.isfinite(near)
        out = np.where(big, np.copysign(np.float32(np.finfo(np.float32).max), x).astype(np.float32), out)
        return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32).reshape(x.shape)


def _float_to_int(x: np.ndarray, dtype: str) -> np.ndarray:
    nt = numpy_dtype(dtype).type
    info = np.iinfo(nt)
    t = np.trunc(np.asarray(x, dtype=np.float64))
    nan = np.isnan(t)
    hi = t >= float(info.max)
    lo = t <= float(info.min)
    safe = np.where(nan | hi | lo, 0.0, t).astype(nt)
    out = np.where(hi, nt(info.max), np.where(lo, nt(info.min), safe))
    return np.asarray(out, dtype=nt)


def convert(x, src: str, dst: str) -> np.ndarray:
    """A value of dtype `src` (compute representation) as dtype `dst` (`convert` and `cast`)."""
    x = np.asarray(x)
    ks, kd = kind_of(src), kind_of(dst)
    if kd == "bool":
        return np.asarray(x != 0, dtype=np.bool_)
    if ks == "bool":
        x = x.astype(np.int8)
    if kd == "float":
        if dst == "f16":
            return x.astype(np.float16).astype(np.float32)
        if dst == "bf16":
            if x.dtype == np.float32:
                return bf16_round(x)
            # one rounding from f64 (or an integer): round to odd into f32 first, which keeps
            # the bits a nearest-even rounding to bf16 needs (rounding through f32 would round twice)
            return bf16_round(_f32_round_to_odd(np.asarray(x, dtype=np.float64)))
        return x.astype(numpy_compute_dtype(dst))
    if ks == "float":
        return _float_to_int(x, dst)
    return x.astype(numpy_compute_dtype(dst))  # integer to integer wraps


def scalar_value(v, dtype: str) -> np.ndarray:
    """A Python number as a 0-d value of `dtype` (literals, scalar arguments)."""
    k = kind_of(dtype)
    if k == "bool":
        return np.asarray(bool(v), dtype=np.bool_)
    if k == "float":
        return convert(np.asarray(float(v), dtype=np.float64), "f64", dtype)
    bits = np.iinfo(numpy_dtype(dtype)).bits
    n = int(v) % (1 << bits)
    if dtype.startswith("i") and n >= 1 << (bits - 1):
        n -= 1 << bits
    return np.asarray(n, dtype=numpy_dtype(dtype))


def value_dtype(x: np.ndarray) -> str:
    """The IR dtype of a convert's operand, from its NumPy dtype (f32 also stands for f16/bf16:
    they are held in f32 and convert identically)."""
    dt = np.asarray(x).dtype
    if dt == np.bool_:
        return "bool"
    if dt == np.float64:
        return "f64"
    if dt == np.float32:
        return "f32"
    for k in INT_DTYPES:
        if dt == numpy_dtype(k):
            return k
    raise InternalError("ref", f"unexpected value dtype {dt}")


