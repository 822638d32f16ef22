"""The element types of WSP (language.md section 3, "Data types"): one table every stage reads.

Each `DType` says how many bits an element has, what kind of number it is, and how each
target holds it: the NumPy dtype of an exchanged array (bf16 travels as its raw uint16 bits)
and of a computed value (f16 and bf16 compute in float32), the C type of an element in memory
and of a value while a kernel computes, the Ascend C type of an element in global memory, and
the `.npy` descriptor. Nothing here imports NumPy at load: NumPy dtypes are given by name
(`numpy_dtype` turns one into the dtype object when something runs), and the array
conversions between storage and compute (`to_compute`, `to_storage`, bf16's bits) import it
when called.

`literal_value` (with `round_float` and `wrap_int`) gives a number as a value of a dtype, in
plain Python: what the C-like emitters print for a literal, the very value ref computes.

The order of `DTYPES` is an ABI: the plan words of an ascend_npu tree number dtypes by it.
"""

from __future__ import annotations

import math
import struct

from .records import record


@record
class DType:
    """One element type and how every target holds it."""

    name: str  # as written in WSP: f32, bf16, u8, bool ...
    bits: int  # of one element in memory (bool: 8)
    kind: str  # "float", "int" or "bool"
    signed: bool
    numpy: str  # NumPy dtype of an array of it (bf16: its uint16 bits)
    numpy_compute: str  # NumPy dtype values are computed in (f16, bf16: float32)
    c_storage: str  # C type of an element in memory (f16, bf16: uint16_t bits)
    c_compute: str  # C type of a value while a kernel computes
    ascend: str  # Ascend C type of an element in global memory
    npy_descr: str  # the descr of a .npy header

    @property
    def size(self) -> int:
        """Bytes of one element in memory."""
        return self.bits // 8

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def limits(self) -> tuple[int, int]:
        """The least and greatest value of an integer (or bool) dtype."""
        if self.kind == "bool":
            return (0, 1)
        if self.signed:
            return (-(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1)
        return (0, 2**self.bits - 1)


def _t(name, bits, kind, signed, numpy, compute, c_storage, c_compute, ascend, descr) -> DType:
    return DType(name, bits, kind, signed, numpy, compute, c_storage, c_compute, ascend, descr)


TABLE: dict[str, DType] = {d.name: d for d in (
    #  name    bits kind     signed numpy      compute    C storage   C compute   Ascend C     npy
    _t("f16",  16, "float", True,  "float16", "float32", "uint16_t", "float",    "half",       "<f2"),
    _t("bf16", 16, "float", True,  "uint16",  "float32", "uint16_t", "float",    "bfloat16_t", "<u2"),
    _t("f32",  32, "float", True,  "float32", "float32", "float",    "float",    "float",      "<f4"),
    _t("f64",  64, "float", True,  "float64", "float64", "double",   "double",   "double",     "<f8"),
    _t("i8",    8, "int",   True,  "int8",    "int8",    "int8_t",   "int8_t",   "int8_t",     "|i1"),
    _t("i16",  16, "int",   True,  "int16",   "int16",   "int16_t",  "int16_t",  "int16_t",    "<i2"),
    _t("i32",  32, "int",   True,  "int32",   "int32",   "int32_t",  "int32_t",  "int32_t",    "<i4"),
    _t("i64",  64, "int",   True,  "int64",   "int64",   "int64_t",  "int64_t",  "int64_t",    "<i8"),
    _t("u8",    8, "int",   False, "uint8",   "uint8",   "uint8_t",  "uint8_t",  "uint8_t",    "|u1"),
    _t("u16",  16, "int",   False, "uint16",  "uint16",  "uint16_t", "uint16_t", "uint16_t",   "<u2"),
    _t("u32",  32, "int",   False, "uint32",  "uint32",  "uint32_t", "uint32_t", "uint32_t",   "<u4"),
    _t("u64",  64, "int",   False, "uint64",  "uint64",  "uint64_t", "uint64_t", "uint64_t",   "<u8"),
    _t("bool",  8, "bool",  False, "bool",    "bool",    "uint8_t",  "uint8_t",  "uint8_t",    "|b1"),
)}

DTYPES: tuple[str, ...] = tuple(TABLE)
FLOAT_DTYPES: tuple[str, ...] = tuple(n for n, d in TABLE.items() if d.kind == "float")
INT_DTYPES: tuple[str, ...] = tuple(n for n, d in TABLE.items() if d.kind == "int")
SIGNED_DTYPES: tuple[str, ...] = tuple(n for n in INT_DTYPES if TABLE[n].signed)
UNSIGNED_DTYPES: tuple[str, ...] = tuple(n for n in INT_DTYPES if not TABLE[n].signed)
HALF_DTYPES: tuple[str, ...] = ("f16", "bf16")  # stored in 16 bits, computed in f32

# Spellings from NumPy, Triton and C that users reach for; used for `help:` texts only.
ALIASES = {
    "float": "f32", "float16": "f16", "half": "f16", "float32": "f32", "float64": "f64",
    "double": "f64", "bfloat16": "bf16", "bf": "bf16", "int": "i32", "int8": "i8",
    "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "bool_": "bool", "boolean": "bool", "fp16": "f16",
    "fp32": "f32", "fp64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "I32": "i32",
}


def kind_of(dtype: str) -> str:
    """`bool`, `int` or `float`."""
    return TABLE[dtype].kind


def size_of(dtype: str) -> int:
    """Bytes of one element of `dtype` in memory."""
    return TABLE[dtype].bits // 8


def numpy_dtype(dtype: str):
    """The NumPy dtype of an array of `dtype` (bf16 as its raw uint16 bits)."""
    import numpy as np

    return np.dtype(TABLE[dtype].numpy)


def numpy_compute_dtype(dtype: str):
    """The NumPy dtype values of `dtype` are computed in."""
    import numpy as np

    return np.dtype(TABLE[dtype].numpy_compute)

# ---------------------------------------------------------------------------------------------
# Arrays: NumPy arrays between their storage (bf16: uint16 bits) and compute representations
# (ref's values, and the sum of a partial tensor's addends for the caller: ir/device_arrays.py)


def bf16_round(x):
    """float32 values rounded to the nearest bf16 (ties to even), as float32."""
    import numpy as np

    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    r = np.where(np.isnan(x), (b | 0x00400000) & 0xFFFF0000, r)  # NaN stays a quiet NaN
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32).reshape(x.shape)


def bf16_bits(x):
    import numpy as np

    return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)


def bf16_from_bits(bits):
    import numpy as np

    b = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return b.view(np.float32)


def to_compute(stored, dtype: str):
    """An array of `dtype` as stored, in the representation its values are computed in."""
    import numpy as np

    if dtype == "bf16":
        return bf16_from_bits(stored)
    return np.array(stored, dtype=numpy_compute_dtype(dtype))


def to_storage(value, dtype: str):
    """Computed values as an array of `dtype` as stored (half types rounded once)."""
    import numpy as np

    if dtype == "bf16":
        return bf16_bits(value)
    with np.errstate(over="ignore"):  # values past f16's range were already rounded to inf
        if dtype == "f16":
            return np.asarray(value, dtype=np.float32).astype(np.float16)
        return np.asarray(value).astype(numpy_dtype(dtype))


# ---------------------------------------------------------------------------------------------
# Values: a Python number as a value of a dtype (literals, scalar arguments)


def wrap_int(value: int, dtype: str) -> int:
    """`value` reduced modulo 2^bits into the range of the integer dtype (two's complement)."""
    lo, hi = TABLE[dtype].limits
    return (value - lo) % (hi - lo + 1) + lo


def round_float(value: float, dtype: str) -> float:
    """`value` rounded once, to nearest even, to float `dtype` (f64: `value` itself); past the
    dtype's range it is an infinity, NaN stays NaN."""
    value = float(value)
    if dtype == "f64" or math.isnan(value) or math.isinf(value):
        return value
    if dtype == "bf16":
        return _bf16_value(value)
    try:
        return struct.unpack(_STRUCT[dtype], struct.pack(_STRUCT[dtype], value))[0]
    except OverflowError:  # beyond the greatest finite value plus half an ulp: rounds to inf
        return math.inf if value > 0 else -math.inf


_STRUCT = {"f16": "<e", "f32": "<f"}


def _bf16_value(value: float) -> float:
    """The bf16 nearest to a finite `value` (8 significant bits, ties to even)."""
    if value == 0.0:
        return value
    _, e = math.frexp(value)  # value = m * 2^e, 0.5 <= |m| < 1
    quantum = 2.0 ** max(e - 8, -133)  # bf16 subnormals share f32's exponent range
    q = round(value / quantum)  # exact division by a power of two; round() ties to even
    out = q * quantum
    if abs(out) >= 2.0**128:
        return math.inf if value > 0 else -math.inf
    return math.copysign(out, value) if out == 0.0 else out


def as_float(value) -> float:
    """A number as a Python float; an integer past every float is infinity (of its sign), as
    the literal `1e400` is, rather than Python's OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def literal_value(value, dtype: str):
    """A literal's number as a value of `dtype`, as the IR defines it (nodes.py): a bool for
    bool, a float rounded to the dtype (`round_float`), an integer wrapped (`wrap_int`)."""
    kind = TABLE[dtype].kind
    if kind == "bool":
        return bool(value)
    if kind == "float":
        return round_float(as_float(value), dtype)
    return wrap_int(int(value), dtype)


def element_bits(value, dtype: str) -> int:
    """The bits of one element of `dtype` in memory holding `value` (a literal's number,
    made a value of `dtype` by `literal_value`): what a tile's pad fills with."""
    v = literal_value(value, dtype)
    if dtype == "bf16":  # exact: v is a bf16 value, the top half of its f32 bits
        return struct.unpack("<I", struct.pack("<f", v))[0] >> 16
    if TABLE[dtype].kind == "float":
        fmt = {"f16": "<e", "f32": "<f", "f64": "<d"}[dtype]
        return int.from_bytes(struct.pack(fmt, v), "little")
    return int(v) & ((1 << TABLE[dtype].bits) - 1)
