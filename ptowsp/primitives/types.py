"""Kernel value types and their algebra: `Type` (a tile `[rows, cols] dtype`, a scalar, or the
error type), dtype kinds and promotion, implicit conversions, and 2-D NumPy broadcasting over
symbolic dims. The checker's typing rules (`typing_rules.py`) are written in these terms.
"""

from __future__ import annotations

from typing import Mapping, Optional

from .. import sym
from ..dtypes import SIGNED_DTYPES, TABLE, kind_of
from ..records import record

_KIND_RANK = {"bool": 0, "int": 1, "float": 2}
_LITERAL_DTYPE = {"bool": "bool", "int": "i32", "float": "f32"}


# ---------------------------------------------------------------------------------------------
# Types


@record
class Type:
    """A kernel value: a tile `[rows, cols] dtype`, a scalar of a dtype, or the error type.

    `literal` marks scalars made only of literals, consts and Constexpr parameters: they have no
    dtype of their own yet and take the dtype of what they meet (`x * 2` keeps `x`'s dtype).
    The error type is given to a wrong expression so that nothing built on it is reported again.
    """

    kind: str  # "tile" | "scalar" | "error"
    dtype: str = ""
    rows: Optional[sym.Expr] = None
    cols: Optional[sym.Expr] = None
    literal: bool = False

    @property
    def is_error(self) -> bool:
        return self.kind == "error"

    @property
    def is_tile(self) -> bool:
        return self.kind == "tile"

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    def shape_str(self) -> str:
        if self.is_tile:
            return f"[{sym.to_str(self.rows)}, {sym.to_str(self.cols)}]"
        return "a scalar"

    def __str__(self) -> str:
        """With an article, for messages: `a [16, 128] f32 tile`, `an i32 scalar`, `a float literal`."""
        if self.is_error:
            return "<error>"
        if self.is_tile:
            return f"a {self.shape_str()} {self.dtype} tile"
        if self.literal:
            return {"f32": "a float literal", "i32": "an integer literal"}.get(
                self.dtype, "a bool literal"
            )
        return f"{'an' if self.dtype[0] in 'fi' else 'a'} {self.dtype} scalar"


ERROR = Type("error")


def tile(rows: sym.IntLike, cols: sym.IntLike, dtype: str) -> Type:
    return Type("tile", dtype, sym.as_expr(rows), sym.as_expr(cols))


def scalar(dtype: str, literal: bool = False) -> Type:
    return Type("scalar", dtype, literal=literal)


def literal_type(kind: str) -> Type:
    """The type of a literal of a kind (`bool`, `int`, `float`)."""
    return scalar(_LITERAL_DTYPE[kind], literal=True)


def with_dtype(t: Type, dtype: str, literal: bool = False) -> Type:
    """`t`'s shape with another dtype (a scalar stays a scalar)."""
    if t.is_tile:
        return tile(t.rows, t.cols, dtype)
    return scalar(dtype, literal)


# ---------------------------------------------------------------------------------------------
# Dtype promotion


def promote(a: str, b: str) -> str:
    """The dtype two typed operands of different dtypes are computed in."""
    if a == b:
        return a
    ka, kb = kind_of(a), kind_of(b)
    if ka != kb:
        # decision: mixing kinds gives the higher kind's operand type: bool < integer < float (i32 + f16 -> f16, as in Triton)
        return a if _KIND_RANK[ka] > _KIND_RANK[kb] else b
    if ka == "float":
        # decision: f16 + bf16 -> f32 (neither holds the other); otherwise the wider float wins (f16 + f32 -> f32)
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        return a if TABLE[a].bits > TABLE[b].bits else b
    sa, sb = a in SIGNED_DTYPES, b in SIGNED_DTYPES
    if sa == sb:
        return a if TABLE[a].bits > TABLE[b].bits else b
    # decision: signed + unsigned integers -> the smallest signed type holding both (i8 + u8 -> i16), capped at i64 (i64 + u64 -> i64, not NumPy's f64)
    s, u = (a, b) if sa else (b, a)
    if TABLE[s].bits > TABLE[u].bits:
        return s
    return {8: "i16", 16: "i32", 32: "i64", 64: "i64"}[TABLE[u].bits]


def combine(a: Type, b: Type) -> Type:
    """The dtype (and literal-ness) of an elementwise result of `a` and `b`, shape left aside.

    Returns a scalar type carrying the dtype; callers attach the broadcast shape.
    """
    if a.literal and b.literal:
        k = max(kind_of(a.dtype), kind_of(b.dtype), key=_KIND_RANK.__getitem__)
        return literal_type(k)
    if a.literal:
        a, b = b, a
    if b.literal:
        # decision: a literal takes the dtype of the value it meets unless it is of a higher kind; then the result is f32 (int tile * 2.5 -> f32, as in Triton)
        if _KIND_RANK[kind_of(b.dtype)] <= _KIND_RANK[kind_of(a.dtype)]:
            return scalar(a.dtype)
        return scalar(_LITERAL_DTYPE[kind_of(b.dtype)])
    if a.is_tile != b.is_tile:
        t, s = (a, b) if a.is_tile else (b, a)
        # decision: a typed scalar (Scalar parameter, constant(v, DT)) does not change a tile's dtype unless it is of a higher kind (f16 tile * f32 scalar -> f16), as in Triton
        if _KIND_RANK[kind_of(s.dtype)] <= _KIND_RANK[kind_of(t.dtype)]:
            return scalar(t.dtype)
        return scalar(promote(t.dtype, s.dtype))
    return scalar(promote(a.dtype, b.dtype))


def convertible(src: Type, dst: str) -> bool:
    """Whether a value converts implicitly to `dst` (store, rebinding, `full`/`constant` values)."""
    ks, kd = kind_of(src.dtype), kind_of(dst)
    if ks == kd:
        # decision: implicit conversions stay within a kind: float<->float rounds, integer<->integer wraps (as C and NumPy's same_kind casting)
        return True
    # decision: an integer literal (or const) also converts to a float type (`store(y, 0)` fills an f32 tile); everything else across kinds needs `cast`
    return src.literal and ks == "int" and kd == "float"


def literal_fits(value: int, dtype: str) -> bool:
    """Whether an integer literal is representable in an integer dtype."""
    lo, hi = TABLE[dtype].limits
    return lo <= value <= hi


# ---------------------------------------------------------------------------------------------
# Broadcasting (2-D NumPy rules over symbolic dims)


def _dim(
    a: sym.Expr, b: sym.Expr, ranges: Mapping[str, sym.Interval]
) -> tuple[Optional[sym.Expr], str]:
    """Broadcast one dimension: (result, "") or (None, "differ" / "may differ")."""
    eq = sym.prove_eq(a, b, ranges)
    if eq is True:
        return a, ""
    if sym.prove_eq(a, 1, ranges) is True:
        return b, ""
    if sym.prove_eq(b, 1, ranges) is True:
        return a, ""
    # decision: dimensions that cannot be proved equal (or 1) do not broadcast, even if they might be equal for some Constexpr value
    return None, "differ" if eq is False else "may differ"


def broadcast(types: list[Type], ranges: Mapping[str, sym.Interval]) -> tuple[Optional[Type], str]:
    """The broadcast shape of several non-error values as a Type (scalar if none is a tile)
    with an empty dtype, or (None, why) when they do not broadcast."""
    shape: Optional[tuple[sym.Expr, sym.Expr]] = None
    why = ""
    for t in types:
        if not t.is_tile:
            continue
        if shape is None:
            shape = (t.rows, t.cols)
            continue
        r, w1 = _dim(shape[0], t.rows, ranges)
        c, w2 = _dim(shape[1], t.cols, ranges)
        if r is None or c is None:
            return None, "differ" if "differ" in (w1, w2) else "may differ"
        shape = (r, c)
    if shape is None:
        return scalar(""), why
    return tile(shape[0], shape[1], ""), why


def fits(
    value: Type, rows: sym.Expr, cols: sym.Expr, ranges: Mapping[str, sym.Interval]
) -> Optional[bool]:
    """Whether `value` broadcasts to exactly [rows, cols]: True, False, or None if unprovable."""
    if not value.is_tile:
        return True
    out: Optional[bool] = True
    for have, want in ((value.rows, rows), (value.cols, cols)):
        if sym.prove_eq(have, want, ranges) is True or sym.prove_eq(have, 1, ranges) is True:
            continue
        if sym.prove_eq(have, want, ranges) is False:
            return False
        out = None
    return out


def same_shape(a: Type, b: Type, ranges: Mapping[str, sym.Interval]) -> Optional[bool]:
    r = sym.prove_eq(a.rows, b.rows, ranges)
    c = sym.prove_eq(a.cols, b.cols, ranges)
    if r is False or c is False:
        return False
    return True if (r and c) else None

