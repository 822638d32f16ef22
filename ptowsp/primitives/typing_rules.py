"""How a primitive call or an operator is typed: the arguments bound to a primitive's parameters
(`Arg`), what a typing rule gets (`Typing`), the checks rules share, the typing of the operators
(`+ - * /`, comparisons, `and or not`, unary `-`) and the typing rule of each primitive
(`type_*`), which `table.py` names in each primitive's entry.

A rule reports user errors through the `Typing` object it receives and returns `ERROR`;
lowering reuses the rules with a `Typing` whose `report` raises, since a checked program never
reaches it. Name resolution, statements and store rules live in `frontend/kernels/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from .. import sym
from ..dtypes import kind_of
from ..records import record
from ..spans import NO_SPAN, Span
from .types import (
    ERROR,
    Type,
    broadcast,
    combine,
    convertible,
    fits,
    literal_type,
    promote,
    same_shape,
    scalar,
    tile,
    with_dtype,
)

# ---------------------------------------------------------------------------------------------
# Bound arguments and the typing context


@record
class Arg:
    """An argument bound to a parameter: its type (values), dim (`dim`), dtype name (`dtype`) or
    `true`/`false` (`flag`)."""

    type: Type = ERROR
    span: Span = NO_SPAN
    dim: Optional[sym.Expr] = None
    dtype: Optional[str] = None
    flag: Optional[bool] = None


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


# ---------------------------------------------------------------------------------------------
# Shared checks


def _cast_help(dtype: str = "f32") -> str:
    return f"convert it first: `cast(x, {dtype})`"


def _need_tile(t: Typing, pname: str, help: Optional[str] = None) -> bool:
    a = t[pname]
    if a.type.is_tile:
        return True
    t.error(a.span, "needs-tile", f"`{t.name}` needs a tile, found {a.type}", help)
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


def type_load(t: Typing) -> Type:
    # decision: `load(x)` accepts any tile (not only a parameter name) and returns a copy of the same type
    if t["x"].type.is_error or not _need_tile(t, "x"):
        return ERROR
    return t["x"].type


def type_full(t: Typing) -> Type:
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


def type_constant(t: Typing) -> Type:
    v, dt = t["value"], t["dtype"]
    if v.type.is_error or dt.dtype is None or not _value_for(t, "value", dt.dtype):
        return ERROR
    return scalar(dt.dtype)


def type_arith(t: Typing) -> Type:
    # decision: `/` (and `div`) on two integer values is floor division keeping the integer dtype, as `/` in workload scalar expressions; cast to a float type for a true quotient
    return elementwise_binary(t, t.name, t["a"], t["b"], t.span)


def type_float_unary(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error:
        return ERROR
    f = _need_float(t, "x")
    if f is None:
        return ERROR
    return with_dtype(x, f.dtype, f.literal) if x.is_scalar else x


def type_numeric_unary(t: Typing) -> Type:
    # decision: `abs`, `neg` and `relu` accept integer values too (they keep the dtype); the other math functions need floats
    x = t["x"].type
    if x.is_error or not _no_bool(t, "x"):
        return ERROR
    return x


def type_pow(t: Typing) -> Type:
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


def type_reduction(t: Typing) -> Type:
    x = t["x"].type
    # decision: reductions of bool tiles are errors (cast to a number first)
    nothing = "a scalar has nothing to reduce; `broadcast(s, M, N)` makes a tile of it"
    if x.is_error or not _need_tile(t, "x", nothing) or not _no_bool(t, "x"):
        return ERROR
    if t.name.endswith("mean") and kind_of(x.dtype) != "float":
        # decision: rowmean/colmean of an integer tile is an error (cast first); sums, maxima and minima keep the tile's dtype, integers included
        return t.error(
            t["x"].span, "needs-float", f"`{t.name}` needs a float tile, found {x}", _cast_help()
        )
    if t.name.startswith("row"):
        return tile(x.rows, 1, x.dtype)
    return tile(1, x.cols, x.dtype)


def type_row_col_op(t: Typing) -> Type:
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


def type_broadcast(t: Typing) -> Type:
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
    d = x.type.dtype if not x.type.literal else literal_type(kind_of(x.type.dtype)).dtype
    return tile(rows, cols, d)


def type_matmul(t: Typing) -> Type:
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


def type_transpose(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error or not _need_tile(t, "x"):
        return ERROR
    return tile(x.cols, x.rows, x.dtype)


def type_softmax(t: Typing) -> Type:
    x = t["x"].type
    if x.is_error or not _need_tile(t, "x"):
        return ERROR
    return x if _need_float(t, "x") is not None else ERROR


def type_cast(t: Typing) -> Type:
    x, dt = t["x"].type, t["dtype"].dtype
    if x.is_error or dt is None:
        return ERROR
    return with_dtype(x, dt)


def type_where(t: Typing) -> Type:
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


def type_index(t: Typing) -> Type:
    rows, cols = t["rows"].dim, t["cols"].dim
    if rows is None or cols is None:
        return ERROR
    return tile(rows, cols, "i32")


def type_valid(t: Typing) -> Type:
    """`valid_rows(x)` / `valid_cols(x)`: the checker has made sure x names a tile parameter."""
    return scalar("i32")


def type_slice(t: Typing) -> Type:
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


def type_interleave(t: Typing) -> Type:
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




def type_concat(t: Typing) -> Type:
    a, b = t["a"], t["b"]
    if a.type.is_error or b.type.is_error or not _need_tile(t, "a") or not _need_tile(t, "b"):
        return ERROR
    ax = t.args.get("axis")
    axis = 0 if ax is None else sym.const_value(ax.dim) if ax.dim is not None else None
    if axis is None:
        return ERROR
    other = "cols" if axis == 0 else "rows"
    same = sym.prove_eq(getattr(a.type, other), getattr(b.type, other), t.ranges)
    if same is not True:
        what = "columns" if axis == 0 else "rows"
        maybe = " (may differ)" if same is None else ""
        return t.error(
            t.span,
            "shape",
            f"`concat` along axis {axis} needs the same number of {what}, found "
            f"{a.type.shape_str()} and {b.type.shape_str()}{maybe}",
            "axis 0 stacks rows (the columns must agree), axis 1 puts columns side by side "
            "(the rows must agree)",
        )
    # decision: concat of two dtypes gives their promoted dtype (like interleave and arithmetic)
    dt = promote(a.type.dtype, b.type.dtype)
    if axis == 0:
        return tile(sym.add(a.type.rows, b.type.rows), a.type.cols, dt)
    return tile(a.type.rows, sym.add(a.type.cols, b.type.cols), dt)
