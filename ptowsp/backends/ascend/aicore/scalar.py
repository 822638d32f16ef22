"""C++ for the scalar unit of an AICore: literals, scalar parameters, conversions between
dtypes and the elementwise ops, each as an expression over held values (a value of dtype d is
held in `TABLE[d].c_compute`: f16 and bf16 in float, rounded to their dtype where ref rounds them).
The vector path uses these for the scalars it broadcasts; ops with no vector form run them per
element (`scalar_ops.py`)."""

from __future__ import annotations

import re

from ....dtypes import FLOAT_DTYPES, TABLE, kind_of, literal_value
from .errors import AicoreError


def float_lit(v: float, ctype: str) -> str:
    import math
    import struct

    if math.isnan(v) or math.isinf(v):
        if ctype == "float":
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            return f"wsp_f32_from_bits(0x{bits:08x}u)"
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        return f"wsp_f64_from_bits(0x{bits:016x}ull)"
    if ctype == "float":
        text = f"{v:.9g}"
        if not re.search(r"[.eE]", text):
            text += ".0"
        return f"({text}f)" if text.startswith("-") else text + "f"
    text = repr(float(v))
    if not re.search(r"[.eE]", text):
        text += ".0"
    return f"({text})" if text.startswith("-") else text


def int_lit(v: int, dtype: str) -> str:
    bits = TABLE[dtype].bits
    v %= 1 << bits
    if dtype.startswith("i") and v >= 1 << (bits - 1):
        v -= 1 << bits
    if dtype == "u64":
        return f"{v}ull"
    if dtype == "i64":
        if v == -(1 << 63):
            return "(-9223372036854775807ll - 1)"
        return f"({v}ll)" if v < 0 else f"{v}ll"
    if dtype in ("i32", "u32"):
        if dtype == "i32" and v == -(1 << 31):
            return "(-2147483647 - 1)"
        return f"({v})" if v < 0 else (f"{v}u" if dtype == "u32" else f"{v}")
    return f"(({TABLE[dtype].c_compute}){v})"


def literal(value, dtype: str) -> str:
    v = literal_value(value, dtype)
    if dtype == "bool":
        return "((uint8_t)1)" if v else "((uint8_t)0)"
    if dtype in FLOAT_DTYPES:
        return float_lit(v, TABLE[dtype].c_compute)
    return int_lit(v, dtype)


def scalar_param(dtype: str, s: int) -> str:
    """Scalar parameter `s` as a held value of `dtype` (floats rounded once, from the double)."""
    if dtype == "f32":
        return f"(float)scalars[{s}].f"
    if dtype == "f64":
        return f"scalars[{s}].f"
    if dtype == "f16":
        return f"wsp_round_f16_d(scalars[{s}].f)"
    if dtype == "bf16":
        return f"wsp_round_bf16_d(scalars[{s}].f)"
    if dtype == "bool":
        return f"(uint8_t)(scalars[{s}].i != 0)"
    return f"({TABLE[dtype].c_compute})scalars[{s}].i"


def _unsigned(dt: str) -> str:
    return "uint64_t" if TABLE[dt].bits == 64 else "uint32_t"


_F2I = {  # (lo, hi, max) of a float -> integer cast
    "i8": ("-128.0", "128.0", "127"), "i16": ("-32768.0", "32768.0", "32767"),
    "i32": ("-2147483648.0", "2147483648.0", "2147483647"),
    "i64": ("-9223372036854775808.0", "9223372036854775808.0", "9223372036854775807ll"),
    "u8": ("0.0", "256.0", "255"), "u16": ("0.0", "65536.0", "65535"),
    "u32": ("0.0", "4294967296.0", "4294967295u"),
    "u64": ("0.0", "18446744073709551616.0", "18446744073709551615ull"),
}


def sconvert(e: str, src: str, dst: str) -> str:
    """A held value of dtype `src` as a held value of dtype `dst` (convert and cast)."""
    if src == dst:
        return e
    ks, kd = kind_of(src), kind_of(dst)
    if kd == "bool":
        return f"(uint8_t)(({e}) != 0)"
    if kd == "float":
        if ks != "float":  # integers and bool: exact in double up to 2^53, then one rounding
            if dst == "f32":
                return f"(float)({e})"
            if dst == "f64":
                return f"(double)({e})"
            return f"wsp_round_{dst}_d((double)({e}))"
        if dst == "f64":
            return f"(double)({e})"
        if src == "f64":
            return f"(float)({e})" if dst == "f32" else f"wsp_round_{dst}_d({e})"
        if dst == "f32":
            return e
        return f"wsp_round_{dst}({e})"
    if ks == "float":
        lo, hi, mx = _F2I[dst]
        ft = TABLE[src].c_compute
        suffix = "f" if ft == "float" else ""
        return (f"wsp_f2i<{TABLE[dst].c_compute}, {ft}>({e}, ({ft}){lo}{suffix}, ({ft}){hi}{suffix}, "
                f"({TABLE[dst].c_compute}){mx})")
    return f"({TABLE[dst].c_compute})({e})"


CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def sexpr(name: str, dt: str, xs: list[str], xdts: list[str], exponent=None) -> str:
    """The held value of elementwise op `name` (dtype `dt`) from its operands, on the scalar
    unit. Raises AicoreError for float math the scalar unit has no instruction for."""
    ct = TABLE[dt].c_compute
    fl = kind_of(dt) == "float"
    if name in ("convert", "cast"):
        return sconvert(xs[0], xdts[0], dt)
    if name in CMP:
        a, b = xs[0], sconvert(xs[1], xdts[1], xdts[0])
        return f"(uint8_t)(({a}) {CMP[name]} ({b}))"
    if name == "where":
        c = sconvert(xs[0], xdts[0], "bool")
        a, b = (sconvert(x, d, dt) for x, d in zip(xs[1:], xdts[1:]))
        return f"(({c}) ? ({a}) : ({b}))"
    v = [sconvert(x, d, dt) for x, d in zip(xs, xdts)]
    if name in ("and", "or"):
        return f"(uint8_t)(({v[0]}) {'&' if name == 'and' else '|'} ({v[1]}))"
    if name == "not":
        return f"(uint8_t)(({v[0]}) ^ 1u)"
    if name in ("add", "sub", "mul"):
        op = {"add": "+", "sub": "-", "mul": "*"}[name]
        if fl:
            return f"(({v[0]}) {op} ({v[1]}))"
        u = _unsigned(dt)
        return f"({ct})(({u})({v[0]}) {op} ({u})({v[1]}))"
    if name == "div":
        if fl:
            return f"(({v[0]}) / ({v[1]}))"
        if dt.startswith("u"):
            return f"wsp_fdiv_u<{ct}>({v[0]}, {v[1]})"
        return f"wsp_fdiv_s<{ct}, {_unsigned(dt)}>({v[0]}, {v[1]})"
    if name in ("maximum", "minimum"):
        if fl:
            return f"wsp_f{'max' if name == 'maximum' else 'min'}<{ct}>({v[0]}, {v[1]})"
        cmp = ">" if name == "maximum" else "<"
        return f"((({v[0]}) {cmp} ({v[1]})) ? ({v[0]}) : ({v[1]}))"
    if name == "neg":
        if fl:
            return f"(-({v[0]}))"
        u = _unsigned(dt)
        return f"({ct})(({u})0 - ({u})({v[0]}))"
    if name == "abs":
        if fl:
            return f"wsp_fabs(({ct})({v[0]}))"
        if dt.startswith("u"):
            return v[0]
        u = _unsigned(dt)
        return f"({ct})((({v[0]}) < 0) ? (({u})0 - ({u})({v[0]})) : ({u})({v[0]}))"
    if name == "relu":
        if fl:
            return f"wsp_fmax<{ct}>({v[0]}, ({ct})0)"
        return f"((({v[0]}) > 0) ? ({v[0]}) : ({ct})0)"
    if name == "pow" and fl and exponent in (0.0, 1.0, 2.0, -1.0):
        if exponent == 2.0:
            return f"(({v[0]}) * ({v[0]}))"
        if exponent == 1.0:
            return v[0]
        if exponent == -1.0:
            return f"(({ct})1 / ({v[0]}))"
        return f"({ct})1"
    raise AicoreError(f"`{name}` on {dt} scalars or f64 tiles has no AICore implementation "
                      "(the scalar unit has no math library)",
                      help="compute it in f32 tiles, or pass the value in as a scalar parameter")
