"""C++ for the scalar unit of an AICore: literals, scalar parameters, conversions between
dtypes and the elementwise ops, each a `cexpr` expression over held values (a value of dtype d
is held in d's C compute type: f16 and bf16 in float, rounded to their dtype where ref rounds
them). The vector path uses these for the scalars it broadcasts; ops with no vector form run
them per element (`scalar_ops.py`)."""

from __future__ import annotations

from ....diagnostics import InternalError
from ....dtypes import TABLE, kind_of, literal_value
from ... import cexpr as C
from ...cexpr import ASCEND_C, Expr, ExprLike
from .errors import AicoreError


def float_lit(v: float, ctype: str) -> Expr:
    """A float or double constant (non-finite values from their bits: Ascend C has no NAN)."""
    return C.float_lit(v, ctype, ASCEND_C)


def int_lit(v: int, dtype: str) -> Expr:
    """An integer constant of `dtype` (wrapped), cast to it when narrower than int."""
    e = C.int_lit(v, dtype, ASCEND_C)
    return e if TABLE[dtype].bits >= 32 else C.cast(TABLE[dtype].c_compute, e)


def literal(value, dtype: str) -> Expr:
    """A literal op's value as a held value of `dtype` (the value ref computes)."""
    v = literal_value(value, dtype)
    if dtype == "bool":
        return C.cast("uint8_t", 1 if v else 0)
    if kind_of(dtype) == "float":
        return float_lit(v, TABLE[dtype].c_compute)
    return int_lit(v, dtype)


def scalar_param(dtype: str, s: int) -> Expr:
    """Scalar parameter `s` as a held value of `dtype`. A float parameter arrives as the bits
    of an f32 in the low word of `.i`, already rounded to its dtype by the expander (there is
    no double on the AI Core); f64 never gets here (`f64_error`)."""
    i = f"scalars[{s}].i"
    if kind_of(dtype) == "float":
        return C.call("wsp_f32_from_bits", C.cast("uint32_t", i))
    if dtype == "bool":
        return C.cast("uint8_t", C.binop("!=", i, 0))
    return C.cast(TABLE[dtype].c_compute, i)


def _unsigned(dt: str) -> str:
    return "uint64_t" if TABLE[dt].bits == 64 else "uint32_t"


def _f2i(e: Expr, src: str, dst: str) -> Expr:
    """A float -> integer cast: truncate, saturate, NaN -> 0 (`wsp_f2i` in wsp_aicore.h, whose
    `hi` is the first value past the range and `lo` the least value, 0 when unsigned)."""
    ft, it = TABLE[src].c_compute, TABLE[dst].c_compute
    lo, hi = TABLE[dst].limits
    return C.call(f"wsp_f2i<{it}>", e, float_lit(float(lo), ft),
                  float_lit(float(hi + 1), ft), C.cast(it, C.int_lit(hi, dst, ASCEND_C)))


def _i2f(e: Expr, src: str, dst: str) -> Expr:
    """An integer or bool -> float cast, through int64_t (`wsp_i2f` in wsp_aicore.h): f32
    correctly rounded; f16 / bf16 rounded to odd in f32, then to their dtype, so rounded
    once."""
    v = C.cast("int64_t", e)
    unsigned = "true" if src.startswith("u") else "false"
    if dst == "f32":
        return C.call("wsp_i2f", v, unsigned, "false")
    return C.call(f"wsp_round_{dst}", C.call("wsp_i2f", v, unsigned, "true"))


def sconvert(e: ExprLike, src: str, dst: str) -> Expr:
    """A held value of dtype `src` as a held value of dtype `dst` (convert and cast)."""
    e = C.E(e)
    if src == dst:
        return e
    ks, kd = kind_of(src), kind_of(dst)
    if "f64" in (src, dst):  # f64_error refuses such kernels first
        raise InternalError("ascend", f"an f64 conversion ({src} -> {dst}) reached the AICore")
    if kd == "bool":
        return C.cast("uint8_t", C.binop("!=", e, 0))
    if kd == "float":
        if ks != "float":
            return _i2f(e, src, dst)
        if dst == "f32":
            return e
        return C.call(f"wsp_round_{dst}", e)
    if ks == "float":
        return _f2i(e, src, dst)
    return C.cast(TABLE[dst].c_compute, e)


CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def sexpr(name: str, dt: str, xs: list[ExprLike], xdts: list[str], exponent=None) -> Expr:
    """The held value of elementwise op `name` (dtype `dt`) from its operands, on the scalar
    unit. Raises AicoreError for float math the scalar unit has no instruction for."""
    ct = TABLE[dt].c_compute
    fl = kind_of(dt) == "float"
    if name in ("convert", "cast"):
        return sconvert(xs[0], xdts[0], dt)
    if name in CMP:
        a, b = C.E(xs[0]), sconvert(xs[1], xdts[1], xdts[0])
        return C.cast("uint8_t", C.binop(CMP[name], a, b))
    if name == "where":
        c = sconvert(xs[0], xdts[0], "bool")
        a, b = (sconvert(x, d, dt) for x, d in zip(xs[1:], xdts[1:]))
        return C.cond(c, a, b)
    v = [sconvert(x, d, dt) for x, d in zip(xs, xdts)]
    if name in ("and", "or"):
        return C.cast("uint8_t", C.binop("&" if name == "and" else "|", v[0], v[1]))
    if name == "not":
        return C.cast("uint8_t", C.binop("^", v[0], "1u"))
    if name in ("add", "sub", "mul"):
        op = {"add": "+", "sub": "-", "mul": "*"}[name]
        if fl:
            return C.binop(op, v[0], v[1])
        return C.cast(ct, C.binop(op, _as_unsigned(v[0], dt), _as_unsigned(v[1], dt)))
    if name == "div":
        if fl:
            return C.binop("/", v[0], v[1])
        if dt.startswith("u"):
            return C.call(f"wsp_fdiv_u<{ct}>", v[0], v[1])
        return C.call(f"wsp_fdiv_s<{ct}, {_unsigned(dt)}>", v[0], v[1])
    if name in ("maximum", "minimum"):
        if fl:
            return C.call(f"wsp_f{'max' if name == 'maximum' else 'min'}<{ct}>", v[0], v[1])
        return C.cond(C.binop(">" if name == "maximum" else "<", v[0], v[1]), v[0], v[1])
    if name == "neg":
        if fl:
            return C.neg(v[0])
        return C.cast(ct, _negate_unsigned(v[0], dt))
    if name == "abs":
        if fl:
            return C.call("wsp_fabs", C.cast(ct, v[0]))
        if dt.startswith("u"):
            return v[0]
        return C.cast(ct, C.cond(C.binop("<", v[0], 0), _negate_unsigned(v[0], dt),
                                 _as_unsigned(v[0], dt)))
    if name == "relu":
        if fl:
            return C.call(f"wsp_fmax<{ct}>", v[0], C.cast(ct, 0))
        return C.cond(C.binop(">", v[0], 0), v[0], C.cast(ct, 0))
    if name == "pow" and fl and exponent in (0.0, 1.0, 2.0, -1.0):
        if exponent == 2.0:
            return C.binop("*", v[0], v[0])
        if exponent == 1.0:
            return v[0]
        if exponent == -1.0:
            return C.binop("/", C.cast(ct, 1), v[0])
        return C.cast(ct, 1)
    raise AicoreError(f"`{name}` on {dt} scalars or f64 tiles has no AICore implementation "
                      "(the scalar unit has no math library)",
                      help="compute it in f32 tiles, or pass the value in as a scalar parameter")


def _as_unsigned(e: Expr, dt: str) -> Expr:
    """An integer held value in the unsigned type its arithmetic wraps in."""
    return C.cast(_unsigned(dt), e)


def _negate_unsigned(e: Expr, dt: str) -> Expr:
    """0 - e in the unsigned type (wraps; no signed overflow)."""
    return C.binop("-", C.cast(_unsigned(dt), 0), _as_unsigned(e, dt))
