"""The C of one kernel value, for `kernels.py`: how each dtype is held while a kernel computes
and stored in a tile (the C types of `ptowsp.dtypes`), conversions and casts, loads and stores,
literals and scalar parameters, every elementwise op, and the steps of the row and column
reductions. Each function returns a `cexpr.Expr` over the held values of its operands.

Value semantics are nodes.py's: f16/bf16 are held in f32 and rounded (to nearest even) only by
convert/cast, literals and scalar parameters of that type, and stores; integer arithmetic wraps;
integer division floors and x / 0 == 0; float -> integer casts truncate, saturate and send NaN
to 0; bool is a uint8_t 0/1; maximum/minimum and max/min reductions propagate NaN.
"""

from __future__ import annotations

from typing import Optional

from ...diagnostics import InternalError
from ...dtypes import (
    HALF_DTYPES,
    TABLE,
    UNSIGNED_DTYPES,
    element_bits,
    kind_of,
    round_float,
)
from ...ir import nodes as N
from .. import cexpr as C
from ..cexpr import Expr, Raw

CTYPE = {n: d.c_compute for n, d in TABLE.items()}  # a value of each dtype while a kernel computes
STORAGE = {n: d.c_storage for n, d in TABLE.items()}  # a tile element in memory


def scalar_param(dtype: str, index: int) -> Expr:
    """Scalar parameter `index` as a held value of `dtype`."""
    # decision: a float scalar (f16/bf16/f32/f64) arrives as a double in `.f` and is rounded to
    # its dtype here (f16/bf16 once, from the double); integers arrive in `.i` and wrap to their
    # width; a bool is `.i != 0`
    if dtype == "f32":
        return C.cast("float", f"scalars[{index}].f")
    if dtype == "f64":
        return Raw(f"scalars[{index}].f")
    if dtype == "f16":
        return C.call("wsp_round_f16_d", f"scalars[{index}].f")
    if dtype == "bf16":
        return C.call("wsp_round_bf16_d", f"scalars[{index}].f")
    if dtype == "bool":
        return C.cast("uint8_t", C.binop("!=", f"scalars[{index}].i", 0))
    return C.cast(CTYPE[dtype], f"scalars[{index}].i")


def _unsigned_for(dtype: str) -> str:
    return "uint64_t" if TABLE[dtype].bits == 64 else "uint32_t"


def select(c: Expr, a: Expr, b: Expr, dtype: str) -> Expr:
    """`c ? a : b` for held values; branch-free for floats (see wsp_kernels.h)."""
    ct = CTYPE[dtype]
    if ct == "float":
        return C.call("wsp_self", c, a, b)
    if ct == "double":
        return C.call("wsp_seld", c, a, b)
    return C.cond(c, a, b)


def convert(e: Expr, src: str, dst: str) -> Expr:
    """A held value of dtype `src` as a held value of dtype `dst` (convert and cast)."""
    # decision: every conversion to f16/bf16 rounds once, to nearest even, from the exact
    # value: f64 through round-to-odd f32 (wsp_f64_to_f32_odd), integers through double (exact
    # up to 2^53; an i64/u64 beyond that may round twice, both times to nearest)
    if src == dst:
        return e
    ks, kd = kind_of(src), kind_of(dst)
    if kd == "bool":
        return C.cast("uint8_t", C.binop("!=", e, 0))
    if kd == "float":
        if ks != "float":  # integers and bool: exact in double up to 2^53, then one rounding
            if dst == "f32":
                return C.cast("float", e)
            if dst == "f64":
                return C.cast("double", e)
            return C.call(f"wsp_round_{dst}_d", C.cast("double", e))
        if dst == "f64":
            return C.cast("double", e)
        if src == "f64":
            return C.cast("float", e) if dst == "f32" else C.call(f"wsp_round_{dst}_d", e)
        if dst == "f32":  # f16/bf16 held in f32 are f32 values already
            return e
        return C.call(f"wsp_round_{dst}", e)
    # integer destination
    if ks == "float":
        return C.call(f"wsp_{'d' if src == 'f64' else 'f'}2i_{dst}", e)
    return C.cast(CTYPE[dst], e)  # bool 0/1, or integer wrap-around (modulo 2^bits)


def load(e: Expr, dtype: str) -> Expr:
    """A tile element in memory (`e`) as a held value."""
    # decision: bool is one byte holding 0 or 1; a nonzero byte read from a tile counts as true
    if dtype == "f16":
        return C.call("wsp_f16_to_f32", e)
    if dtype == "bf16":
        return C.call("wsp_bf16_to_f32", e)
    if dtype == "bool":
        return C.cast("uint8_t", C.binop("!=", e, 0))
    return e


def store_value(e: Expr, src: str, dst: str) -> Expr:
    """A held value of dtype `src` as the memory representation of dtype `dst`."""
    if dst in HALF_DTYPES:
        if src == "f64":
            return C.call(f"wsp_f64_to_{dst}", e)
        if kind_of(src) != "float":
            return C.call(f"wsp_f64_to_{dst}", C.cast("double", e))
        return C.call(f"wsp_f32_to_{dst}", e)
    return convert(e, src, dst)


def literal(value, dtype: str) -> Expr:
    """A literal op's value as a held value of `dtype`."""
    if isinstance(value, bool):
        value = int(value)
    if dtype == "bool":
        return C.cast("uint8_t", 1 if value else 0)
    if kind_of(dtype) == "float":
        v = float(value)
        v = round_float(v, dtype)
        return C.float_lit(v, CTYPE[dtype])
    if isinstance(value, float):
        value = int(value) if value == value and abs(value) != float("inf") else 0
    e = C.int_lit(int(value), dtype)
    # an integer literal of 32 bits or more is one of that type; narrower ones are cast
    return e if TABLE[dtype].bits >= 32 else C.cast(CTYPE[dtype], e)


def _wrap_arith(cop: str, a: Expr, b: Expr, dtype: str) -> Expr:
    if dtype in ("u32", "u64"):
        return C.binop(cop, a, b)
    u = _unsigned_for(dtype)
    return C.cast(CTYPE[dtype], C.binop(cop, C.cast(u, a), C.cast(u, b)))


_FLOAT_FN = {  # op -> (f32 function, f64 function)
    "exp": ("wsp_expf", "exp"), "log": ("wsp_logf", "log"), "sqrt": ("sqrtf", "sqrt"),
    "tanh": ("wsp_tanhf", "tanh"), "sigmoid": ("wsp_sigmoidf", "wsp_sigmoid"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "gelu": ("wsp_geluf", "wsp_gelu"),
    "silu": ("wsp_siluf", "wsp_silu"), "abs": ("fabsf", "fabs"),
}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def elementwise(op: N.Op, args: list[Expr], arg_dtypes: list[str],
                exponent: Optional[float] = None) -> Expr:
    """The held value of elementwise `op` (tile or scalar) from its operands' held values."""
    name, dt = op.op, op.dtype
    ct = CTYPE[dt]
    fl = kind_of(dt) == "float"
    if name in ("convert", "cast"):
        return convert(args[0], arg_dtypes[0], dt)
    if name in _COMPARE:
        common = arg_dtypes[0]
        a, b = args[0], convert(args[1], arg_dtypes[1], common)
        return C.cast("uint8_t", C.binop(_COMPARE[name], a, b))
    if name == "where":
        c = convert(args[0], arg_dtypes[0], "bool")
        a, b = (convert(x, d, dt) for x, d in zip(args[1:], arg_dtypes[1:]))
        return select(c, a, b, dt)
    # every other operand has the op's dtype (lowering inserts converts; be lenient anyway)
    xs = [convert(x, d, dt) for x, d in zip(args, arg_dtypes)]
    if name in ("and", "or"):
        return C.cast("uint8_t", C.binop("&" if name == "and" else "|", xs[0], xs[1]))
    if name == "not":
        return C.cast("uint8_t", C.binop("^", xs[0], Raw("1u")))
    if name in ("add", "sub", "mul"):
        cop = {"add": "+", "sub": "-", "mul": "*"}[name]
        return C.binop(cop, xs[0], xs[1]) if fl else _wrap_arith(cop, xs[0], xs[1], dt)
    if name == "div":
        return C.binop("/", xs[0], xs[1]) if fl else C.call(f"wsp_fdiv_{dt}", xs[0], xs[1])
    if name in ("maximum", "minimum"):
        if fl:
            fn = ("wsp_max" if name == "maximum" else "wsp_min") + ("d" if ct == "double" else "f")
            return C.call(fn, xs[0], xs[1])
        return C.cond(C.binop(">" if name == "maximum" else "<", xs[0], xs[1]), xs[0], xs[1])
    if name == "pow":
        # decision: pow by the literal exponents 0, 1, 2 and -1 is exact arithmetic (the same
        # value as powf, but vectorisable); any other exponent calls libm's powf / pow
        if exponent == 2.0:
            return C.binop("*", xs[0], xs[0])
        if exponent == 1.0:
            return xs[0]
        if exponent == -1.0:
            return C.binop("/", C.float_lit(1.0, ct), xs[0])
        if exponent == 0.0:
            return C.float_lit(1.0, ct)
        return C.call("powf" if ct == "float" else "pow", xs[0], xs[1])
    if name == "neg":
        if fl:
            return C.neg(xs[0])
        u = _unsigned_for(dt)
        return C.cast(ct, C.binop("-", C.cast(u, 0), C.cast(u, xs[0])))
    if name == "abs" and not fl:
        if dt in UNSIGNED_DTYPES:
            return xs[0]
        u = _unsigned_for(dt)
        negated = C.binop("-", C.cast(u, 0), C.cast(u, xs[0]))
        return C.cast(ct, C.cond(C.binop("<", xs[0], 0), negated, C.cast(u, xs[0])))
    if name == "relu":
        if fl:
            fn = "wsp_maxd" if ct == "double" else "wsp_maxf"
            return C.call(fn, xs[0], C.float_lit(0.0, ct))
        if dt in UNSIGNED_DTYPES:
            return xs[0]
        return C.cond(C.binop(">", xs[0], 0), xs[0], C.cast(ct, 0))
    if name == "rsqrt":
        sq = "sqrtf" if ct == "float" else "sqrt"
        return C.binop("/", C.float_lit(1.0, ct), C.call(sq, xs[0]))
    if name in _FLOAT_FN:
        f32, f64 = _FLOAT_FN[name]
        return C.call(f64 if ct == "double" else f32, xs[0])
    raise InternalError("cpu emit", f"no C for elementwise op `{name}`")


def reduce_init(name: str, dt: str) -> Expr:
    ct = CTYPE[dt]
    kind = name[3:]
    if kind in ("sum", "mean"):
        return C.float_lit(0.0, ct) if kind_of(dt) == "float" else C.cast(ct, 0)
    if kind_of(dt) == "float":
        e = C.float_lit(float("inf"), ct)
        return C.neg(e) if kind == "max" else e
    lo, hi = TABLE[dt].limits
    return literal(lo if kind == "max" else hi, dt)


def reduce_step(name: str, acc: Expr, x: Expr, dt: str) -> Expr:
    kind = name[3:]
    fl = kind_of(dt) == "float"
    ct = CTYPE[dt]
    if kind in ("sum", "mean"):
        return C.binop("+", acc, x) if fl else _wrap_arith("+", acc, x, dt)
    if fl:
        fn = ("wsp_max" if kind == "max" else "wsp_min") + ("d" if ct == "double" else "f")
        return C.call(fn, acc, x)
    return C.cond(C.binop(">" if kind == "max" else "<", x, acc), x, acc)


def pad_bits(p: N.KParam) -> str:
    """A tile parameter's pad as the bits of one element in memory (a C uint64_t literal)."""
    return f"{element_bits(p.pad, p.dtype)}u"
