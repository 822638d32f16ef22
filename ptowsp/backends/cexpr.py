"""C and C++ expressions for the C-like back ends: a small tree, a precedence-aware printer,
literals.

cpu_sim's kernels (`cpu/kernels.py`) and the AICore kernels (`ascend/aicore/`) build every
expression they emit from these nodes and print them with `to_c` (or `str()`), which adds the
parentheses C and C++ need and no others (plus the ones gcc's `-Wparentheses` asks for around
`&`, `|`, `^` and shift operands). A call's `fn` may be any callee text: `f`,
`wsp_fmax<float>`, `x.GetValue`. Literals are exact: floats are printed so that the compiler
reads back the very value held here (`dtypes.round_float` rounds to the dtype first). How a
literal is spelled depends on what the target's compiler offers (`Dialect`): cpu_sim's C11
has <stdint.h>'s and <math.h>'s macros, the AICore's Ascend C neither. Nothing here knows
about kernels or the IR.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from typing import Union

from ..cnames import C_KEYWORDS
from ..diagnostics import InternalError
from ..dtypes import wrap_int

# C operator precedence, higher binds tighter (C11 6.5)
PREC_PRIMARY = 16
PREC_UNARY = 15
_BINARY_PREC = {
    "*": 13, "/": 13, "%": 13,
    "+": 12, "-": 12,
    "<<": 11, ">>": 11,
    "<": 10, "<=": 10, ">": 10, ">=": 10,
    "==": 9, "!=": 9,
    "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4,
}
PREC_COND = 3
_PICKY = ("&", "^", "|", "<<", ">>", "&&", "||")  # gcc -Wparentheses wants operands grouped


class Expr:
    """A C expression; `prec` is the precedence of its outermost operator."""

    prec = PREC_PRIMARY

    def __str__(self) -> str:
        return to_c(self)


@dataclass(frozen=True)
class Raw(Expr):
    """Text that is already a primary expression (a name, a literal, `a[i]`, `f(x)`)."""

    text: str


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Index(Expr):
    base: Expr
    index: Expr


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "-", "!", "~"
    x: Expr
    prec = PREC_UNARY


@dataclass(frozen=True)
class Cast(Expr):
    ctype: str
    x: Expr
    prec = PREC_UNARY


@dataclass(frozen=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def prec(self) -> int:  # type: ignore[override]
        return _BINARY_PREC[self.op]


@dataclass(frozen=True)
class Cond(Expr):
    c: Expr
    a: Expr
    b: Expr
    prec = PREC_COND


ExprLike = Union[Expr, str, int]


def E(x: ExprLike) -> Expr:
    """An expression from a node, a name or an integer."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return Raw(str(int(x)))
    if isinstance(x, int):
        return int_lit(x)
    return Raw(x)


def call(fn: str, *args: ExprLike) -> Expr:
    return Call(fn, tuple(E(a) for a in args))


def cast(ctype: str, x: ExprLike) -> Expr:
    return Cast(ctype, E(x))


def cast_to(ctype: str, x: ExprLike) -> Expr:
    """`x` as `ctype`: a cast, unless `x` is already one to that type."""
    x = E(x)
    return x if isinstance(x, Cast) and x.ctype == ctype else Cast(ctype, x)


def cond(c: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    return Cond(E(c), E(a), E(b))


def binop(op: str, a: ExprLike, b: ExprLike) -> Expr:
    return Bin(op, E(a), E(b))


def neg(x: ExprLike) -> Expr:
    return Unary("-", E(x))


def index(base: ExprLike, i: ExprLike) -> Expr:
    return Index(E(base), E(i))


# Integer index arithmetic with the obvious simplifications (0 * x, x + 0, 1 * x), so that
# generated subscripts read `x[i * x_rs + j]`, `t[j]`, `t[i]`.
def iadd(a: ExprLike, b: ExprLike) -> Expr:
    a, b = E(a), E(b)
    if _is_zero(a):
        return b
    if _is_zero(b):
        return a
    return Bin("+", a, b)


def imul(a: ExprLike, b: ExprLike) -> Expr:
    a, b = E(a), E(b)
    if _is_zero(a) or _is_zero(b):
        return Raw("0")
    if _is_one(a):
        return b
    if _is_one(b):
        return a
    return Bin("*", a, b)


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Raw) and e.text == "0"


def _is_one(e: Expr) -> bool:
    return isinstance(e, Raw) and e.text == "1"


# ---------------------------------------------------------------------------------------------
# Printing


def to_c(e: Expr) -> str:
    """The C text of `e` with the parentheses its structure needs."""
    if isinstance(e, Raw):
        return e.text
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(to_c(a) for a in e.args)})"
    if isinstance(e, Index):
        return f"{_wrap(e.base, PREC_PRIMARY)}[{to_c(e.index)}]"
    if isinstance(e, Unary):
        inner = _wrap(e.x, PREC_UNARY)
        if inner.startswith(("-", "+")) and e.op in ("-", "+"):
            inner = f"({inner})"  # `- -x` must not print as the decrement `--x`
        return f"{e.op}{inner}"
    if isinstance(e, Cast):
        return f"({e.ctype}){_wrap(e.x, PREC_UNARY)}"
    if isinstance(e, Bin):
        p = e.prec
        left = _wrap(e.a, p, picky=e.op in _PICKY)
        # left-associative: an equal-precedence right operand needs parentheses
        right = _wrap(e.b, p + 1, picky=e.op in _PICKY)
        return f"{left} {e.op} {right}"
    if isinstance(e, Cond):
        c = _wrap(e.c, PREC_COND + 1)
        return f"{c} ? {_wrap(e.a, PREC_COND + 1)} : {_wrap(e.b, PREC_COND)}"
    raise InternalError("cexpr", f"not a C expression: {e!r}")


def _wrap(e: Expr, need: int, picky: bool = False) -> str:
    text = to_c(e)
    if e.prec < need or (picky and isinstance(e, Bin)):
        return f"({text})"
    return text


# ---------------------------------------------------------------------------------------------
# Literals


@dataclass(frozen=True)
class Dialect:
    """How a target's compiler lets literals be spelled."""

    name: str
    # <stdint.h>'s INT64_C / UINT64_C / INT64_MIN / INT32_MIN and <math.h>'s NAN / INFINITY;
    # without them: suffixes (`ll`, `ull`), `-MAX - 1`, and non-finite floats from their bits
    # (`wsp_f32_from_bits` / `wsp_f64_from_bits`, defined by the target's support header)
    std_macros: bool


C11 = Dialect("C11", std_macros=True)  # cpu_sim
ASCEND_C = Dialect("Ascend C", std_macros=False)  # the AICore: kernel_operator.h only


def int_lit(value: int, dtype: str = "i64", dialect: Dialect = C11) -> Expr:
    """An integer constant of the given dtype's C type (wrapped into its range); the types
    narrower than int are left to a cast by the caller."""
    v = wrap_int(int(value), dtype)
    if not dialect.std_macros:
        return _plain_int_lit(v, dtype)
    if dtype == "u64":
        return Raw(f"UINT64_C({v})")
    if dtype == "i64":
        if v == -(2**63):
            return Raw("INT64_MIN")
        return Raw(f"INT64_C({v})") if not -(2**31) <= v < 2**31 else Raw(str(v))
    if dtype == "u32":
        return Raw(f"{v}u")
    if dtype == "i32":
        return Raw("INT32_MIN") if v == -(2**31) else Raw(str(v))
    return Raw(str(v))


def _plain_int_lit(v: int, dtype: str) -> Expr:
    suffix = {"i64": "ll", "u64": "ull", "u32": "u"}.get(dtype, "")
    if v < 0:
        if v == -(2**63) or (dtype == "i32" and v == -(2**31)):
            # the magnitude of the minimum is no literal of the type
            return Bin("-", Unary("-", Raw(f"{-v - 1}{suffix}")), Raw("1"))
        return Unary("-", Raw(f"{-v}{suffix}"))
    return Raw(f"{v}{suffix}")


def float_lit(value: float, ctype: str, dialect: Dialect = C11) -> Expr:
    """A `float` or `double` constant holding exactly `value` (already representable)."""
    suffix = "f" if ctype == "float" else ""
    if (math.isnan(value) or math.isinf(value)) and not dialect.std_macros:
        if ctype == "float":
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
            return Call("wsp_f32_from_bits", (Raw(f"0x{bits:08x}u"),))
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
        return Call("wsp_f64_from_bits", (Raw(f"0x{bits:016x}ull"),))
    if math.isnan(value):
        return Raw("NAN") if ctype == "float" else Raw("(double)NAN")
    if math.isinf(value):
        text = "INFINITY" if ctype == "float" else "(double)INFINITY"
        return Raw(text) if value > 0 else Unary("-", Raw(text))
    text = f"{value:.9g}" if ctype == "float" else repr(value)
    if not re.search(r"[.eEn]", text):
        text += ".0"
    if text.startswith("-"):
        return Unary("-", Raw(text[1:] + suffix))
    return Raw(text + suffix)


def string_lit(text: str) -> str:
    """A C string literal of `text` that any compiler reads back exactly: quote, backslash and
    newline escaped, `?` too (no trigraphs), other control and non-ASCII bytes as hex escapes,
    each ending its literal (`"\\xe4""b"`: a hex escape would take in a following hex digit).
    The bytes are `text`'s UTF-8, except that the lone surrogates Python keeps for the bytes of
    a file name that was not UTF-8 become those bytes again."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "?":
            out.append("\\?")
        elif ord(ch) < 32 or ord(ch) > 126:
            out.append("".join(f"\\x{b:02x}\"\"" for b in _bytes(ch)))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def line_file_lit(text: str) -> str:
    """The file name of a `#line` directive: one string literal (no concatenation there), every
    byte outside printable ASCII (and `?`, for trigraphs) as a three-digit octal escape, which
    never takes in a following digit, and backslash and quote escaped. The compiler's file name
    is then exactly `text`'s bytes (a surrogate: the byte of a file name that was not UTF-8)."""
    out = []
    for b in _bytes(text):
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 32 <= b <= 126 and b != 0x3F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return text.encode("utf-8", "backslashreplace")


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def c_ident(prefix: str, name: str) -> str:
    """A C identifier for a user name: `prefix` + the name, any character outside
    [A-Za-z0-9_] spelled `_<hex>_` (the mangling `enumerate.py` uses for the same symbols)."""
    return prefix + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", name)


def is_c_name(name: str) -> bool:
    """Whether `name` can be used as it is as a C identifier (not a keyword)."""
    return bool(_IDENT.match(name)) and name not in C_KEYWORDS
