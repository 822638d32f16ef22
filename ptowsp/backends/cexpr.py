"""C expressions for the CPU back end: a small tree, a precedence-aware printer, literals.

`kernels.py` builds every expression it emits from these nodes and prints them with `to_c`,
which adds the parentheses C needs and no others (plus the ones gcc's `-Wparentheses` asks for
around `&`, `|`, `^` and shift operands). Literals are exact: floats are printed so that the C
compiler reads back the very value held here (f32 literals are rounded to f32 in Python first).
Nothing here knows about kernels or the IR.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Union

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
    raise TypeError(f"not a C expression: {e!r}")


def _wrap(e: Expr, need: int, picky: bool = False) -> str:
    text = to_c(e)
    if e.prec < need or (picky and isinstance(e, Bin)):
        return f"({text})"
    return text


# ---------------------------------------------------------------------------------------------
# Literals

def int_lit(value: int, dtype: str = "i64") -> Expr:
    """An integer constant of the given dtype's C type (wrapped into its range)."""
    v = wrap_int(int(value), dtype)
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


def float_lit(value: float, ctype: str) -> Expr:
    """A `float` or `double` constant holding exactly `value` (already representable)."""
    suffix = "f" if ctype == "float" else ""
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


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def c_ident(prefix: str, name: str) -> str:
    """A C identifier for a user name: `prefix` + the name, any character outside
    [A-Za-z0-9_] spelled `_<hex>_` (the mangling `enumerate.py` uses for the same symbols)."""
    return prefix + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", name)


C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic "
    "_Imaginary _Noreturn _Static_assert _Thread_local".split()
)


def is_c_name(name: str) -> bool:
    """Whether `name` can be used as it is as a C identifier (not a keyword)."""
    return bool(_IDENT.match(name)) and name not in C_KEYWORDS
