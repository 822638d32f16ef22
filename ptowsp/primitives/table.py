"""The primitive table: every IR op (`OPS`) and every kernel primitive of language.md section 4
(`PRIMITIVES`), with what each stage needs to know of it.

An IR op (`OpSpec`, keyed by `ir.nodes.Op.op`) says how many arguments it takes, its shape and
dtype rule (`op_rules.py`: what `ir/verify.py` checks), its fusion category (`fuse_tasks`), how
`plan-kernels` plans it (and whether it is cheap to recompute), and its NumPy meaning
(`meanings.py`: what `backends/ref` computes). A primitive (`Primitive`) says its parameters,
its typing rule (`typing_rules.py`: what the checker reports), and the IR op a call lowers to.

Adding a primitive touches four places: its op and its primitive here (with a rule, meaning or
expansion in the modules above when none of theirs fits), the C of the op in the cpu back end,
its Ascend C in `backends/ascend/aicore/`, and its tests (`tests/test_primitives.py`'s calls).
An op the table expands needs no back-end code at all.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..records import record
from . import expansions
from . import gathers as G
from . import meanings as M
from . import op_rules as R
from . import selection as S
from . import typing_rules as T
from .meanings import np
from .types import Type

# ---------------------------------------------------------------------------------------------
# IR ops

# Fusion categories (TVM's `OpPatternKind`, most demanding last): what `fuse_tasks` lets fuse.
INJECTIVE = "injective"  # index maps: leaves, transpose, slices, interleave
ELEMWISE = "elemwise"  # an op's only: injective, or broadcast when an operand is repeated
BROADCAST = "broadcast"  # a value repeated along an extent-1 dimension
REDUCTION = "reduction"  # row / column reductions, softmax
COMPLEX = "complex-out-fusable"  # matmul
OPAQUE = "opaque"  # an extern kernel (no op has it)


@record
class OpSpec:
    """What the compiler knows of one IR op.

    `plan` is how `plan-kernels` treats a tile of it, as `KernelPlan.kinds` names it (`leaf`:
    read in place; `ew`: per element in a loop nest; `red`: a reduction accumulated in its
    input's nest; `view`: an index map over its operands; `matmul`, `select` (a sort of each
    row): a step of its own), or None
    for an op it first replaces by `expand`'s ops. `cheap`: an `ew` op worth recomputing
    wherever it is read (inline) when its operands are leaves. `row_local`: row i of the value
    reads only row i of each operand (the only row of a one-row operand). `axis` of a
    reduction: `row` (a value per row, [M, 1]) or `col` ([1, N]). `rounded`: the value is exact
    in its dtype (f16/bf16 held in f32 are rounded by it). `transcendental`: several vector
    instructions per element (the cycle model's factor).
    """

    name: str
    arity: tuple[int, ...]  # the argument counts it takes
    rule: R.Rule
    plan: Optional[str]
    fusion: str
    numpy: Callable[..., Any]  # (M.Evaluation, *operand values) -> its value
    cheap: bool = False
    row_local: bool = True
    axis: Optional[str] = None
    rounded: bool = False
    transcendental: bool = False
    expand: Optional[Callable[..., int]] = None


def _leaf(name: str, rule: R.Rule, numpy, rounded: bool = False) -> OpSpec:
    return OpSpec(name, (0,), rule, "leaf", INJECTIVE, numpy, rounded=rounded)


def _ew(name: str, arity: int, rule: R.Rule, numpy, **more) -> OpSpec:
    return OpSpec(name, (arity,), rule, "ew", ELEMWISE, numpy, **more)


def _math(name: str, numpy) -> OpSpec:
    return _ew(name, 1, R.float_unary, numpy, transcendental=True)


def _reduction(name: str) -> OpSpec:
    axis = name[:3]
    what, along = name[3:], 1 if axis == "row" else 0
    rule = R.row_reduction if axis == "row" else R.col_reduction
    return OpSpec(name, (1,), rule, "red", REDUCTION, lambda ev, x: M.reduce(what, x, along),
                  row_local=axis == "row", axis=axis)


def _view(name: str, arity: int, rule: R.Rule, numpy, fusion: str = INJECTIVE,
          row_local: bool = True) -> OpSpec:
    return OpSpec(name, (arity,), rule, "view", fusion, numpy, row_local=row_local)


# ops whose attr names a tile parameter whose view's extents they are (language.md section 4)
VALID_OPS = frozenset({"valid_rows", "valid_cols"})

_OPS = (
    # leaves: a parameter's value, a number, row / column numbers
    _leaf("param", R.param, lambda ev: ev.input(ev.op.attr), rounded=True),
    _leaf("scalar_param", R.scalar_param, lambda ev: ev.input(ev.op.attr), rounded=True),
    # decision: a literal is its value converted to the op's dtype (an f16 literal is rounded to f16)
    _leaf("literal", R.literal, lambda ev: ev.scalar(ev.op.attr, ev.op.dtype), rounded=True),
    # decision: the valid extents of a tile parameter's view are inputs of the kernel, named
    # `valid_rows:x` / `valid_cols:x` among its inputs (hidden scalars a back end supplies)
    _leaf("valid_rows", R.valid_extent, lambda ev: ev.input(f"valid_rows:{ev.op.attr}")),
    _leaf("valid_cols", R.valid_extent, lambda ev: ev.input(f"valid_cols:{ev.op.attr}")),
    _leaf("iota_row", R.iota, lambda ev: M.iota(ev, 0)),
    _leaf("iota_col", R.iota, lambda ev: M.iota(ev, 1)),
    # elementwise, binary
    _ew("add", 2, R.arith, lambda ev, a, b: np.add(a, b), cheap=True),
    _ew("sub", 2, R.arith, lambda ev, a, b: np.subtract(a, b), cheap=True),
    _ew("mul", 2, R.arith, lambda ev, a, b: np.multiply(a, b), cheap=True),
    _ew("div", 2, R.arith, M.divide),
    # decision: maximum/minimum (and rowmax/rowmin) propagate NaN, as NumPy's maximum does
    _ew("maximum", 2, R.arith, lambda ev, a, b: np.maximum(a, b), cheap=True),
    _ew("minimum", 2, R.arith, lambda ev, a, b: np.minimum(a, b), cheap=True),
    _ew("pow", 2, R.arith, M.power, transcendental=True),
    _ew("lt", 2, R.compare, lambda ev, a, b: np.less(a, b), cheap=True),
    _ew("le", 2, R.compare, lambda ev, a, b: np.less_equal(a, b), cheap=True),
    _ew("gt", 2, R.compare, lambda ev, a, b: np.greater(a, b), cheap=True),
    _ew("ge", 2, R.compare, lambda ev, a, b: np.greater_equal(a, b), cheap=True),
    _ew("eq", 2, R.compare, lambda ev, a, b: np.equal(a, b), cheap=True),
    _ew("ne", 2, R.compare, lambda ev, a, b: np.not_equal(a, b), cheap=True),
    _ew("and", 2, R.logic, lambda ev, a, b: np.logical_and(a, b), cheap=True),
    _ew("or", 2, R.logic, lambda ev, a, b: np.logical_or(a, b), cheap=True),
    # elementwise, unary
    _ew("neg", 1, R.unary, lambda ev, x: np.negative(x), cheap=True),
    _ew("abs", 1, R.unary, lambda ev, x: np.abs(x), cheap=True),
    _math("exp", lambda ev, x: np.exp(x)),
    _math("log", lambda ev, x: np.log(x)),
    _math("sqrt", lambda ev, x: np.sqrt(x)),
    _math("rsqrt", lambda ev, x: x.dtype.type(1) / np.sqrt(x)),
    _math("tanh", lambda ev, x: np.tanh(x)),
    _math("sigmoid", lambda ev, x: M.sigmoid(x)),
    _math("sin", lambda ev, x: np.sin(x)),
    _math("cos", lambda ev, x: np.cos(x)),
    _ew("relu", 1, R.unary, lambda ev, x: np.maximum(x, x.dtype.type(0)), cheap=True),
    _math("gelu", lambda ev, x: M.gelu(x)),
    _math("silu", lambda ev, x: M.silu(x)),
    _ew("not", 1, R.logic, lambda ev, x: np.logical_not(x), cheap=True),
    # `convert`: lowering's implicit conversions; `cast`: the primitive
    _ew("convert", 1, R.conversion, lambda ev, x: ev.convert(x, ev.op.dtype), cheap=True,
        rounded=True),
    _ew("cast", 1, R.conversion, lambda ev, x: ev.convert(x, ev.op.dtype), cheap=True,
        rounded=True),
    _ew("where", 3, R.where, lambda ev, c, a, b: np.where(c, a, b), cheap=True),
    # reductions
    *(_reduction(name) for name in ("rowsum", "rowmax", "rowmin", "rowmean",
                                    "colsum", "colmax", "colmin", "colmean")),
    # views: index maps over the operands
    _view("broadcast", 1, R.broadcast, lambda ev, x: np.broadcast_to(x, ev.op.shape),
          fusion=BROADCAST),
    _view("transpose", 1, R.transpose, lambda ev, x: x.T, row_local=False),
    _view("slice_even", 1, R.half_columns, lambda ev, x: x[:, 0::2]),
    _view("slice_odd", 1, R.half_columns, lambda ev, x: x[:, 1::2]),
    _view("interleave", 2, R.interleave, lambda ev, a, b: M.interleave(a, b)),
    # `x[r0:r1, c0:c1]` in a kernel: a row and/or a column slice (attr: the first row / column;
    # the op's shape the extent); `concat(a, b, axis)`: one op per axis. Moving rows, the row
    # forms are not row-local
    _view("slice_rows", 1, R.slice_rows, lambda ev, x: M.slice_along(ev, x, 0), row_local=False),
    _view("slice_cols", 1, R.slice_cols, lambda ev, x: M.slice_along(ev, x, 1)),
    _view("concat_rows", 2, R.concat_rows, lambda ev, a, b: np.concatenate((a, b), axis=0),
          row_local=False),
    _view("concat_cols", 2, R.concat_cols, lambda ev, a, b: np.concatenate((a, b), axis=1)),
    # `gather(x, idx, axis)`: one op per axis, as concat (gathers.py: 0 out of range). Rows
    # picked by data move rows: the row form is not row-local
    _view("gather_rows", 2, G.gather_rule, G.gather, row_local=False),
    _view("gather_cols", 2, G.gather_rule, G.gather),
    # the rest
    OpSpec("matmul", (2, 3), R.matmul, "matmul", COMPLEX, lambda ev, *xs: M.matmul(*xs),
           row_local=False),
    OpSpec("softmax", (1,), R.softmax, None, REDUCTION, lambda ev, x: M.softmax(x),
           transcendental=True, expand=expansions.softmax),
    # sorting and selection along each row (selection.py: orders, ties, NaN)
    OpSpec("sort_values", (1,), S.sort_rule, "select", REDUCTION, S.sort_values),
    OpSpec("sort_indices", (1,), S.sort_rule, "select", REDUCTION, S.sort_indices),
    OpSpec("argmax", (1,), S.arg_rule, None, REDUCTION, lambda ev, x: S.arg("max", x),
           expand=S.expand_arg),
    OpSpec("argmin", (1,), S.arg_rule, None, REDUCTION, lambda ev, x: S.arg("min", x),
           expand=S.expand_arg),
)

OPS: dict[str, OpSpec] = {s.name: s for s in _OPS}


# ---------------------------------------------------------------------------------------------
# Primitives


@record
class Param:
    """One parameter of a primitive.

    kind: `value` (a tile or a scalar expression; the rule checks which it needs), `dim` (a
    compile-time positive integer: literal, const or Constexpr parameter), `axis` (the literal
    0 or 1), `tile` (the name of a tile parameter of any mode, not its value: `valid_rows(y)` of
    an `Out` y), `dtype` (a data-type name such as `f32`, written as a bare name) or `flag`
    (`true` or `false`, written as such). A value becomes an operand of the primitive's
    op converted to `as_dtype`: `result` (the call's dtype: lowering's implicit conversions),
    `own` (its own dtype: no conversion) or a dtype name.
    """

    name: str
    kind: str
    optional: bool = False
    as_dtype: str = "result"


@record
class Primitive:
    """A kernel primitive: name, group (language.md's table), parameters, typing rule, summary,
    and `op`, the IR op a call lowers to (its value arguments, in order, the operands), or None
    when lowering writes it out itself (`load`; `full`, `constant` and `broadcast`, which
    convert and broadcast as a store does; `concat` and `gather`, one op per axis).

    A primitive with `pair` (the op of its second result) returns two tiles, its values and
    their i32 column numbers of the same shape (`topk`, `sort`), which only `let v, i = ...`
    binds. `attr(flags)` gives the ops' attr from the call's flag arguments by name (and a
    `tile` argument's parameter name)."""

    name: str
    group: str
    params: tuple[Param, ...]
    rule: Callable[[T.Typing], Type]
    summary: str
    op: Optional[str]
    pair: Optional[str] = None
    attr: Optional[Callable[[dict], Any]] = None

    @property
    def signature(self) -> str:
        parts = [p.name + (" = ..." if p.optional else "") for p in self.params]
        return f"{self.name}({', '.join(parts)})"


_X = (Param("x", "value"),)
_AB = (Param("a", "value"), Param("b", "value"))
_OWN = (Param("x", "value", as_dtype="own"),)
_DIMS = (Param("rows", "dim"), Param("cols", "dim"))


def _table() -> dict[str, Primitive]:
    rows: list[Primitive] = [
        Primitive("load", "memory", (Param("x", "value"),), T.type_load, "a copy of a tile", None),
        Primitive(
            "full",
            "memory",
            _DIMS + (Param("value", "value"), Param("dtype", "dtype")),
            T.type_full,
            "a [rows, cols] tile of dtype filled with value",
            None,
        ),
        Primitive(
            "constant",
            "memory",
            (Param("value", "value"), Param("dtype", "dtype")),
            T.type_constant,
            "a scalar of dtype",
            None,
        ),
    ]
    for name in ("add", "sub", "mul", "div"):
        rows.append(
            Primitive(name, "arithmetic", _AB, T.type_arith, f"elementwise {name} (broadcasting)",
                      name)
        )
    for name in ("maximum", "minimum"):
        rows.append(
            Primitive(name, "arithmetic", _AB, T.type_arith, f"elementwise {name} (broadcasting)",
                      name)
        )
    # decision: `max(a, b)` / `min(a, b)` are other spellings of `maximum` / `minimum` (NumPy's
    # and torch's names for the reductions are `rowmax`/`rowmin` here: a kernel's reductions
    # always say their axis)
    for name, op in (("max", "maximum"), ("min", "minimum")):
        rows.append(
            Primitive(name, "arithmetic", _AB, T.type_arith, f"`{op}` (elementwise)", op)
        )
    for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos"):
        rows.append(
            Primitive(name, "math", _X, T.type_float_unary, f"elementwise {name} of a float value",
                      name)
        )
    for name in ("abs", "neg"):
        rows.append(Primitive(name, "math", _X, T.type_numeric_unary, f"elementwise {name}", name))
    # decision: `pow(x, s)` converts the exponent to x's dtype, like any elementwise operand
    rows.append(
        Primitive(
            "pow",
            "math",
            (Param("x", "value"), Param("exponent", "value")),
            T.type_pow,
            "x raised to a scalar power",
            "pow",
        )
    )
    rows.append(Primitive("relu", "activations", _X, T.type_numeric_unary, "max(x, 0)", "relu"))
    for name in ("gelu", "silu"):
        rows.append(
            Primitive(name, "activations", _X, T.type_float_unary,
                      f"{name} (gelu: tanh approximation)", name)
        )
    for name in ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean"):
        shape = "[M, 1]" if name.startswith("row") else "[1, N]"
        rows.append(
            Primitive(
                name,
                "reductions",
                (Param("x", "value"),),
                T.type_reduction,
                f"{name[3:]} over each {'row' if name.startswith('row') else 'column'} -> {shape}",
                name,
            )
        )
    # decision: `colsub` and `coldiv` exist beside `colmul` and `coladd`, mirroring the row forms
    # decision: rowmul/rowadd/rowsub/rowdiv and colmul/coladd/colsub/coldiv lower to mul/add/sub/div with broadcasting (the checker already fixed the vector's shape)
    for name in ("rowmul", "rowadd", "rowsub", "rowdiv", "colmul", "coladd", "colsub", "coldiv"):
        rows.append(
            Primitive(
                name,
                "broadcast",
                (Param("x", "value"), Param("vec", "value")),
                T.type_row_col_op,
                f"{name[3:]} a {'[M, 1]' if name.startswith('row') else '[1, N]'} vector into each "
                f"{'row' if name.startswith('row') else 'column'}",
                name[3:],
            )
        )
    rows += [
        Primitive(
            "broadcast",
            "broadcast",
            (Param("x", "value"),) + _DIMS,
            T.type_broadcast,
            "x stretched to [rows, cols]",
            None,
        ),
        # decision: `acc` may be given by keyword (`acc = c`) or as a third positional argument
        # decision: matmul operands keep their dtypes (the op reads any numeric tiles); `acc` is f32
        Primitive(
            "matmul",
            "matrix",
            (Param("a", "value", as_dtype="own"), Param("b", "value", as_dtype="own"),
             Param("acc", "value", optional=True)),
            T.type_matmul,
            "[M, K] x [K, N] -> [M, N] f32; with acc: acc + a @ b",
            "matmul",
        ),
        Primitive("transpose", "matrix", _X, T.type_transpose, "[M, N] -> [N, M]", "transpose"),
        Primitive("softmax", "special", _X, T.type_softmax, "row-wise softmax", "softmax"),
        Primitive(
            "cast",
            "special",
            (Param("x", "value", as_dtype="own"), Param("dtype", "dtype")),
            T.type_cast,
            "x converted to dtype",
            "cast",
        ),
        Primitive(
            "where",
            "special",
            (Param("cond", "value", as_dtype="bool"),) + _AB,
            T.type_where,
            "a where cond holds, else b (broadcasting)",
            "where",
        ),
        Primitive("row_index", "special", _DIMS, T.type_index, "i32 tile of row numbers",
                  "iota_row"),
        Primitive("col_index", "special", _DIMS, T.type_index, "i32 tile of column numbers",
                  "iota_col"),
        Primitive("valid_rows", "special", (Param("x", "tile"),), T.type_valid,
                  "the rows of x's view (fewer than x's at a partial tile's edge) -> i32",
                  "valid_rows", attr=lambda a: a["x"]),
        Primitive("valid_cols", "special", (Param("x", "tile"),), T.type_valid,
                  "the columns of x's view -> i32", "valid_cols", attr=lambda a: a["x"]),
        Primitive("slice_even", "special", _X, T.type_slice, "columns 0, 2, 4, ...", "slice_even"),
        Primitive("slice_odd", "special", _X, T.type_slice, "columns 1, 3, 5, ...", "slice_odd"),
        Primitive("interleave", "special", _AB, T.type_interleave,
                  "inverse of slice_even/slice_odd", "interleave"),
        # decision: `concat`'s axis is optional, 0 by default as in NumPy; lowering writes the
        # call as `concat_rows` (axis 0) or `concat_cols` (axis 1)
        Primitive("concat", "special", _AB + (Param("axis", "axis", optional=True),),
                  T.type_concat, "a then b along axis 0 (rows) or 1 (columns)", None),
        # decision: `gather`'s axis is spelled and defaulted as `concat`'s (0 when omitted);
        # lowering writes the call as `gather_rows` (axis 0) or `gather_cols` (axis 1), x and
        # idx each in its own dtype
        Primitive("gather", "special",
                  (Param("x", "value", as_dtype="own"), Param("idx", "value", as_dtype="own"),
                   Param("axis", "axis", optional=True)),
                  G.type_gather, "rows (axis 0) or each row's elements (axis 1) of x at idx; "
                  "0 out of range", None),
        # sorting and selection (selection.py)
        Primitive("argmax", "selection", _OWN, S.type_arg,
                  "column of each row's first maximum (first NaN) -> [M, 1] i32", "argmax"),
        Primitive("argmin", "selection", _OWN, S.type_arg,
                  "column of each row's first minimum (first NaN) -> [M, 1] i32", "argmin"),
        Primitive("topk", "selection", (Param("x", "value", as_dtype="own"), Param("k", "dim")),
                  S.type_topk, "the k largest of each row, and their columns: "
                  "`let v, i = topk(x, k)` -> [M, k], [M, k] i32", "sort_values",
                  pair="sort_indices", attr=lambda flags: "desc"),
        Primitive("sort", "selection",
                  (Param("x", "value", as_dtype="own"),
                   Param("descending", "flag", optional=True)),
                  S.type_sort, "each row sorted (ascending), and the columns it came from: "
                  "`let v, i = sort(x)` -> [M, N], [M, N] i32", "sort_values",
                  pair="sort_indices",
                  attr=lambda flags: "desc" if flags.get("descending") else "asc"),
    ]
    return {p.name: p for p in rows}


PRIMITIVES: dict[str, Primitive] = _table()

# The operator forms and the op each one means.
ARITH_OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
COMPARE_OPERATORS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
LOGIC_OPERATORS = {"and": "and", "or": "or"}
UNARY_OPERATORS = {"-": "neg", "not": "not"}
