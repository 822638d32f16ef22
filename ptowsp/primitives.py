"""The kernel primitives of language.md section 4, as one table shared by the checker and lowering.

`PRIMITIVES` maps each name (`exp`, `matmul`, ...) to a `Primitive`: its parameters (what kind of
argument each takes: a value, a tile, a scalar, a compile-time dimension or a data-type name) and
its typing rule, a function from the bound arguments to the result `Type`. The rules report user
errors through the `Typing` object they receive and return `ERROR`; lowering can reuse them with a
`Typing` whose `report` raises, since a checked program never reaches it.

Also here: kernel value types (`Type`), dtype kinds and promotion, 2-D NumPy broadcasting over
symbolic dims, and the typing of the operators (`+ - * /`, comparisons, `and or not`, unary `-`).
Name resolution, statements and store rules live in `frontend/kernels/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from . import sym
from .dtypes import SIGNED_DTYPES, TABLE, kind_of
from .records import record
from .spans import NO_SPAN, Span

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


# ---------------------------------------------------------------------------------------------
# Parameters, bound arguments and the typing context


@record
class Param:
    """One parameter of a primitive.

    kind: `value` (a tile or a scalar expression; the rule checks which it needs), `dim` (a
    compile-time positive integer: literal, const or Constexpr parameter) or `dtype` (a data-type
    name such as `f32`, written as a bare name).
    """

    name: str
    kind: str
    optional: bool = False


@record
class Arg:
    """An argument bound to a parameter: its type (values), dim (`dim`) or dtype name (`dtype`)."""

    type: Type = ERROR
    span: Span = NO_SPAN
    dim: Optional[sym.Expr] = None
    dtype: Optional[str] = None


@dataclass
class Typing:
    """What a typing rule gets: the call's name and span, its bound arguments (a missing optional
    argument is absent), the ranges of the kernel's Constexpr parameters, and `report`."""

    name: str
    span: Span
    args: dict[str, Arg]
    ranges: Mapping[str, sym.Interval] = field(default_factory=dict)
    report: Callable[[Span, str, str, Optional[str]], None] = lambda span, code, msg, help: None

    def error(self, span: Span, code: str, message: str, help: Optional[str] = None) -> Type:
        self.report(span, code, message, help)
        return ERROR

    def __getitem__(self, name: str) -> Arg:
        return self.args[name]


@record
class Primitive:
    """A kernel primitive: name, group (language.md's table), parameters and typing rule."""

    name: str
    group: str
    params: tuple[Param, ...]
    rule: Callable[[Typing], Type]
    summary: str

    @property
    def signature(self) -> str:
        parts = [p.name + (" = ..." if p.optional else "") for p in self.params]
        return f"{self.name}({', '.join(parts)})"


# ---------------------------------------------------------------------------------------------
# Shared checks


def _cast_help(dtype: str = "f32") -> str:
    return f"convert it first: `cast(x, {dtype})`"


def _need_tile(t: Typing, pname: str) -> bool:
    a = t[pname]
    if a.type.is_tile:
        return True
    t.error(
        a.span,
        "needs-tile",
        f"`{t.name}` needs a tile, found {a.type}",
        "a scalar has nothing to reduce; `broadcast(s, M, N)` makes a tile of it"
        if t.name in REDUCTIONS
        else None,
    )
    return False


def _no_bool(t: Typing, pname: str, what: Optional[str] = None) -> bool:
    a = t[pname]
    if a.type.dtype != "bool":
        return True
    t.error(
        a.span,
        "bool-arith",
        f"{what or f'`{t.name}`'} cannot take a bool value",
        "use `where(cond, a, b)` to choose between values, or `cast(x, f32)` for 0/1",
    )
    return False


def _need_float(t: Typing, pname: str) -> Optional[Type]:
    """The float type the argument is computed in, or None after an error."""
    a = t[pname].type
    k = kind_of(a.dtype)
    if k == "float":
        return a
    if a.literal and k == "int":
        # decision: an integer literal given to a float function (`exp(2)`) is read as a float literal, as NumPy would
        return literal_type("float")
    t.error(
        t[pname].span, "needs-float", f"`{t.name}` needs a float value, found {a}", _cast_help()
    )
    return None


def elementwise_binary(
    t: Typing, label: str, a: Arg, b: Arg, span: Span, allow_bool: bool = False
) -> Type:
    """`a OP b` for an arithmetic operator or primitive: dtype combination and broadcasting.

    `label` names the operation in messages (`+`, `add`); broadcast errors go at `span`.
    """
    if a.type.is_error or b.type.is_error:
        return ERROR
    if not allow_bool:
        for x in (a, b):
            if x.type.dtype == "bool":
                return t.error(
                    x.span,
                    "bool-arith",
                    f"`{label}` cannot take a bool value",
                    "use `where(cond, a, b)` to choose between values, or `cast(x, f32)` for 0/1",
                )
    shape, why = broadcast([a.type, b.type], t.ranges)
    if shape is None:
        return t.error(
            span,
            "broadcast",
            f"operands of `{label}` {'do not' if why == 'differ' else 'may not'} "
            f"broadcast: {a.type.shape_str()} and {b.type.shape_str()}",
            "extents must be equal or 1 in each dimension"
            + ("; Constexpr-dependent extents must be provably equal" if why != "differ" else ""),
        )
    d = combine(a.type, b.type)
    return (
        with_dtype(shape, d.dtype, d.literal)
        if shape.is_scalar
        else tile(shape.rows, shape.cols, d.dtype)
    )


def compare(t: Typing, op: str, a: Arg, b: Arg, span: Span) -> Type:
    """`a < b` & co: bool values of the broadcast shape."""
    if a.type.is_error or b.type.is_error:
        return ERROR
    bools = [x for x in (a, b) if x.type.dtype == "bool"]
    if bools and not (len(bools) == 2 and op in ("==", "!=")):
        # decision: bools compare only with bools and only with `==` / `!=`
        return t.error(
            bools[0].span,
            "bool-compare",
            f"`{op}` cannot compare a bool value" + (" with a number" if len(bools) == 1 else ""),
            "`cast(x, i32)` turns a bool into 0/1",
        )
    return _bool_result(t, op, a, b, span)


def _bool_result(t: Typing, op: str, a: Arg, b: Arg, span: Span) -> Type:
    """The bool tile (or scalar) of a comparison or logical operator: its operands' broadcast."""
    shape, why = broadcast([a.type, b.type], t.ranges)
    if shape is None:
        return t.error(
            span,
            "broadcast",
            f"operands of `{op}` {'do not' if why == 'differ' else 'may not'} "
            f"broadcast: {a.type.shape_str()} and {b.type.shape_str()}",
            "extents must be equal or 1 in each dimension",
        )
    if shape.is_scalar:
        return scalar("bool", a.type.literal and b.type.literal)
    return tile(shape.rows, shape.cols, "bool")


def logic(t: Typing, op: str, a: Arg, b: Arg, span: Span) -> Type:
    """`a and b`, `a or b`: bool operands, elementwise on tiles."""
    if a.type.is_error or b.type.is_error:
        return ERROR
    for x in (a, b):
        if x.type.dtype != "bool":
            return t.error(
                x.span,
                "needs-bool",
                f"`{op}` needs bool operands, found {x.type}",
                "compare first, e.g. `x > 0`",
            )
    return _bool_result(t, op, a, b, span)


def unary(t: Typing, op: str, a: Arg) -> Type:
    """`-x` (numbers) and `not x` (bools)."""
    if a.type.is_error:
        return ERROR
    if op == "not":
        if a.type.dtype != "bool":
            return t.error(
                a.span,
                "needs-bool",
                f"`not` needs a bool operand, found {a.type}",
                "compare first, e.g. `not (x > 0)`",
            )
        return a.type
    if a.type.dtype == "bool":
        return t.error(
            a.span, "bool-arith", "`-` cannot take a bool value", "use `not` to negate a bool"
        )
    return a.type


# ---------------------------------------------------------------------------------------------
# Typing rules


def _load(t: Typing) -> Type:
    # decision: `load(x)` accepts any tile (not only a parameter name) and returns a copy of the same type
    if t["x"].type.is_error or not _need_tile(t, "x"):
        return ERROR
    return t["x"].type


def _full(t: Typing) -> Type:
    v, dt = t["value"], t["dtype"]
    if v.type.is_error or dt.dtype is None or t["rows"].dim is None or t["cols"].dim is None:
        return ERROR
    if not _value_for(t, "value", dt.dtype):
        return ERROR
    return tile(t["rows"].dim, t["cols"].dim, dt.dtype)


def _value_for(t: Typing, pname: str, dtype: str) -> bool:
    # decision: the value of `full`/`constant` is a scalar that converts to DT by the rules of `store` (`full(M, N, 1.5, i32)` needs a cast)
    a = t[pname]
    if a.type.is_tile:
        t.error(
            a.span,
            "needs-scalar",
            f"the value of `{t.name}` must be a scalar, found a {a.type.shape_str()} tile",
            "use `broadcast(x, M, N)` or `cast(x, DT)` for tiles",
        )
        return False
    if not convertible(a.type, dtype):
        t.error(
            a.span,
            "needs-cast",
            f"`{t.name}` of {dtype} cannot take {a.type} without a cast",
            f"write `cast(value, {dtype})`"
            if a.type.dtype != "bool" and dtype != "bool"
            else "bool values are `true` and `false`; `cast` converts between bool and numbers",
        )
        return False
    return True


def _constant(t: Typing) -> Type:
    v, dt = t["value"], t["dtype"]
    if v.type.is_error or dt.dtype is None or not _value_for(t, "value", dt.dtype):
        return ERROR
    return scalar(dt.dtype)


def _arith(t: Typing) -> Type:
    # decision: `/` (and `div`) on two integer values is floor division keeping the integer dtype, as `/` in workload scalar expressions; cast to a float type for a true quotient
    return elementwise_binary(t, t.name, t["a"], t["b"], t.span)


def _float_unary(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error:
        return ERROR
    f = _need_float(t, "x")
    if f is None:
        return ERROR
    return with_dtype(x, f.dtype, f.literal) if x.is_scalar else x


def _numeric_unary(t: Typing) -> Type:
    # decision: `abs`, `neg` and `relu` accept integer values too (they keep the dtype); the other math functions need floats
    x = t["x"].type
    if x.is_error or not _no_bool(t, "x"):
        return ERROR
    return x


def _pow(t: Typing) -> Type:
    x, s = t["x"].type, t["exponent"]
    if x.is_error or s.type.is_error:
        return ERROR
    f = _need_float(t, "x")
    if f is None:
        return ERROR
    if s.type.is_tile:
        return t.error(
            s.span,
            "needs-scalar",
            f"the exponent of `pow` must be a scalar, found a {s.type.shape_str()} tile",
            "for elementwise exponents write `exp(y * log(x))`",
        )
    if not _no_bool(t, "exponent", "the exponent of `pow`"):
        return ERROR
    # decision: `pow(x, s)` has x's type; s may be any numeric scalar (an f32 `x` with an f64 `s` stays f32)
    return with_dtype(x, f.dtype, f.literal and s.type.literal) if x.is_scalar else x


REDUCTIONS = ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean")


def _reduction(t: Typing) -> Type:
    x = t["x"].type
    # decision: reductions of bool tiles are errors (cast to a number first)
    if x.is_error or not _need_tile(t, "x") or not _no_bool(t, "x"):
        return ERROR
    if t.name.endswith("mean") and kind_of(x.dtype) != "float":
        # decision: rowmean/colmean of an integer tile is an error (cast first); sums, maxima and minima keep the tile's dtype, integers included
        return t.error(
            t["x"].span, "needs-float", f"`{t.name}` needs a float tile, found {x}", _cast_help()
        )
    if t.name.startswith("row"):
        return tile(x.rows, 1, x.dtype)
    return tile(1, x.cols, x.dtype)


def _row_col_op(t: Typing) -> Type:
    """rowmul & co: (tile [M, N], [M, 1]); colmul & co: (tile [M, N], [1, N])."""
    a, v = t["x"], t["vec"]
    if a.type.is_error or v.type.is_error or not _need_tile(t, "x"):
        return ERROR
    row = t.name.startswith("row")
    want = (a.type.rows, sym.const(1)) if row else (sym.const(1), a.type.cols)
    want_str = f"[{sym.to_str(want[0])}, {sym.to_str(want[1])}]"
    # decision: rowmul/rowadd/rowsub/rowdiv take exactly an [M, 1] tile and colmul/coladd/colsub/coldiv exactly a [1, N] tile (the operators broadcast more freely)
    ok = v.type.is_tile and all(
        sym.prove_eq(h, w, t.ranges) is True
        for h, w in ((v.type.rows, want[0]), (v.type.cols, want[1]))
    )
    if not ok:
        return t.error(
            v.span,
            "shape",
            f"`{t.name}` needs a {want_str} tile as its second argument, found {v.type}",
            f"`{t.name}(x, v)` combines each {'row' if row else 'column'} of x with one value of v; "
            "the operators `+ - * /` broadcast more freely",
        )
    return elementwise_binary(t, t.name, a, v, t.span)


def _broadcast(t: Typing) -> Type:
    x = t["x"]
    rows, cols = t["rows"].dim, t["cols"].dim
    if x.type.is_error or rows is None or cols is None:
        return ERROR
    ok = fits(x.type, rows, cols, t.ranges)
    if ok is not True:
        return t.error(
            t.span,
            "broadcast",
            f"`broadcast` cannot stretch {x.type.shape_str()} to "
            f"[{sym.to_str(rows)}, {sym.to_str(cols)}]",
            "each extent must equal the target's or be 1",
        )
    # decision: `broadcast` keeps x's dtype; a literal gives its default dtype (`broadcast(1.0, M, N)` is f32, `broadcast(1, M, N)` i32)
    d = x.type.dtype if not x.type.literal else _LITERAL_DTYPE[kind_of(x.type.dtype)]
    return tile(rows, cols, d)


def _matmul(t: Typing) -> Type:
    a, b = t["a"], t["b"]
    acc = t.args.get("acc")
    if a.type.is_error or b.type.is_error or (acc is not None and acc.type.is_error):
        return ERROR
    if not _need_tile(t, "a") or not _need_tile(t, "b"):
        return ERROR
    if not _no_bool(t, "a") or not _no_bool(t, "b"):
        return ERROR
    inner = sym.prove_eq(a.type.cols, b.type.rows, t.ranges)
    if inner is not True:
        return t.error(
            t.span,
            "matmul-shape",
            f"inner dimensions of `matmul` {'do not' if inner is False else 'may not'} match: "
            f"{a.type.shape_str()} x {b.type.shape_str()}",
            "`matmul(a, b)` multiplies [M, K] by [K, N]; `transpose(x)` swaps a tile's dimensions",
        )
    m, n = a.type.rows, b.type.cols
    if acc is not None:
        c = acc.type
        good = c.is_tile and c.dtype == "f32" and same_shape(c, tile(m, n, "f32"), t.ranges) is True
        if not good:
            return t.error(
                acc.span,
                "matmul-acc",
                f"the `acc` of `matmul` must be a "
                f"[{sym.to_str(m)}, {sym.to_str(n)}] f32 tile, found {c}",
                "`matmul(a, b, acc = c)` returns `c + a @ b` in f32",
            )
    # decision: matmul takes integer or float tiles of any dtypes and always yields f32 (language.md: accumulates in f32)
    return tile(m, n, "f32")


def _transpose(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error or not _need_tile(t, "x"):
        return ERROR
    return tile(x.cols, x.rows, x.dtype)


def _softmax(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error or not _need_tile(t, "x"):
        return ERROR
    return x if _need_float(t, "x") is not None else ERROR


def _cast(t: Typing) -> Type:
    x, dt = t["x"].type, t["dtype"].dtype
    if x.is_error or dt is None:
        return ERROR
    return with_dtype(x, dt)


def _where(t: Typing) -> Type:
    c, a, b = t["cond"], t["a"], t["b"]
    if c.type.is_error or a.type.is_error or b.type.is_error:
        return ERROR
    if c.type.dtype != "bool":
        return t.error(
            c.span,
            "needs-bool",
            f"the condition of `where` must be bool, found {c.type}",
            "compare to get a condition: `where(x > 0, x, 0)`",
        )
    shape, why = broadcast([c.type, a.type, b.type], t.ranges)
    if shape is None:
        return t.error(
            t.span,
            "broadcast",
            f"arguments of `where` {'do not' if why == 'differ' else 'may not'} "
            f"broadcast: {c.type.shape_str()}, {a.type.shape_str()} and {b.type.shape_str()}",
            "extents must be equal or 1 in each dimension",
        )
    # decision: `where`'s result dtype combines a and b as an arithmetic operator would (bool branches allowed); a literal branch takes the other's dtype
    d = combine(a.type, b.type)
    if shape.is_scalar:
        return scalar(d.dtype, d.literal and c.type.literal)
    return tile(shape.rows, shape.cols, d.dtype)


def _index(t: Typing) -> Type:
    rows, cols = t["rows"].dim, t["cols"].dim
    if rows is None or cols is None:
        return ERROR
    return tile(rows, cols, "i32")


def _slice(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error or not _need_tile(t, "x"):
        return ERROR
    rem = sym.mod(x.cols, 2)
    even = sym.prove_eq(rem, 0, t.ranges)
    if even is not True:
        return t.error(
            t["x"].span,
            "odd-width",
            f"`{t.name}` needs an even number of columns, found "
            f"{x.shape_str()}" + (" (may be odd)" if even is None else ""),
            "`slice_even`/`slice_odd` take columns 0, 2, 4, ... / 1, 3, 5, ... of an even-width tile",
        )
    return tile(x.rows, sym.floordiv(x.cols, 2), x.dtype)


def _interleave(t: Typing) -> Type:
    a, b = t["a"], t["b"]
    if a.type.is_error or b.type.is_error or not _need_tile(t, "a") or not _need_tile(t, "b"):
        return ERROR
    same = same_shape(a.type, b.type, t.ranges)
    if same is not True:
        return t.error(
            t.span,
            "shape",
            f"`interleave` needs two tiles of the same shape, found "
            f"{a.type.shape_str()} and {b.type.shape_str()}",
            "`interleave(a, b)` is the inverse of `slice_even` and `slice_odd`",
        )
    # decision: interleave of two dtypes gives their promoted dtype (like an elementwise operation)
    return tile(a.type.rows, sym.mul(a.type.cols, 2), promote(a.type.dtype, b.type.dtype))


# ---------------------------------------------------------------------------------------------
# The table

_X = (Param("x", "value"),)
_AB = (Param("a", "value"), Param("b", "value"))
_DIMS = (Param("rows", "dim"), Param("cols", "dim"))


def _table() -> dict[str, Primitive]:
    rows: list[Primitive] = [
        Primitive("load", "memory", (Param("x", "value"),), _load, "a copy of a tile"),
        Primitive(
            "full",
            "memory",
            _DIMS + (Param("value", "value"), Param("dtype", "dtype")),
            _full,
            "a [rows, cols] tile of dtype filled with value",
        ),
        Primitive(
            "constant",
            "memory",
            (Param("value", "value"), Param("dtype", "dtype")),
            _constant,
            "a scalar of dtype",
        ),
    ]
    for name in ("add", "sub", "mul", "div"):
        rows.append(
            Primitive(name, "arithmetic", _AB, _arith, f"elementwise {name} (broadcasting)")
        )
    for name in ("maximum", "minimum"):
        rows.append(
            Primitive(name, "arithmetic", _AB, _arith, f"elementwise {name} (broadcasting)")
        )
    for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos"):
        rows.append(
            Primitive(name, "math", _X, _float_unary, f"elementwise {name} of a float value")
        )
    for name in ("abs", "neg"):
        rows.append(Primitive(name, "math", _X, _numeric_unary, f"elementwise {name}"))
    rows.append(
        Primitive(
            "pow",
            "math",
            (Param("x", "value"), Param("exponent", "value")),
            _pow,
            "x raised to a scalar power",
        )
    )
    rows.append(Primitive("relu", "activations", _X, _numeric_unary, "max(x, 0)"))
    for name in ("gelu", "silu"):
        rows.append(
            Primitive(name, "activations", _X, _float_unary, f"{name} (gelu: tanh approximation)")
        )
    for name in REDUCTIONS:
        shape = "[M, 1]" if name.startswith("row") else "[1, N]"
        rows.append(
            Primitive(
                name,
                "reductions",
                (Param("x", "value"),),
                _reduction,
                f"{name[3:]} over each {'row' if name.startswith('row') else 'column'} -> {shape}",
            )
        )
    # decision: `colsub` and `coldiv` exist beside `colmul` and `coladd`, mirroring the row forms
    for name in ("rowmul", "rowadd", "rowsub", "rowdiv", "colmul", "coladd", "colsub", "coldiv"):
        rows.append(
            Primitive(
                name,
                "broadcast",
                (Param("x", "value"), Param("vec", "value")),
                _row_col_op,
                f"{name[3:]} a {'[M, 1]' if name.startswith('row') else '[1, N]'} vector into each "
                f"{'row' if name.startswith('row') else 'column'}",
            )
        )
    rows += [
        Primitive(
            "broadcast",
            "broadcast",
            (Param("x", "value"),) + _DIMS,
            _broadcast,
            "x stretched to [rows, cols]",
        ),
        # decision: `acc` may be given by keyword (`acc = c`) or as a third positional argument
        Primitive(
            "matmul",
            "matrix",
            _AB + (Param("acc", "value", optional=True),),
            _matmul,
            "[M, K] x [K, N] -> [M, N] f32; with acc: acc + a @ b",
        ),
        Primitive("transpose", "matrix", _X, _transpose, "[M, N] -> [N, M]"),
        Primitive("softmax", "special", _X, _softmax, "row-wise softmax"),
        Primitive(
            "cast",
            "special",
            (Param("x", "value"), Param("dtype", "dtype")),
            _cast,
            "x converted to dtype",
        ),
        Primitive(
            "where",
            "special",
            (Param("cond", "value"),) + _AB,
            _where,
            "a where cond holds, else b (broadcasting)",
        ),
        Primitive("row_index", "special", _DIMS, _index, "i32 tile of row numbers"),
        Primitive("col_index", "special", _DIMS, _index, "i32 tile of column numbers"),
        Primitive("slice_even", "special", _X, _slice, "columns 0, 2, 4, ..."),
        Primitive("slice_odd", "special", _X, _slice, "columns 1, 3, 5, ..."),
        Primitive("interleave", "special", _AB, _interleave, "inverse of slice_even/slice_odd"),
    ]
    return {p.name: p for p in rows}


PRIMITIVES: dict[str, Primitive] = _table()

# The operator forms and the primitive (or internal operation) each one means.
ARITH_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
COMPARE_OPERATORS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
LOGIC_OPERATORS = {"and": "and", "or": "or"}
