"""The IR every back end consumes: kernels as op DAGs over static tiles, workloads as a loop tree
of task generators, schedules as policy records, all in one `Module`.

Made by `ir/lower.py` from a checked `ModuleEnv`; nothing here knows about the surface syntax.
Kernels are specialised: each distinct set of `Constexpr` values gives its own `Kernel`, so every
tile shape here is a plain integer. Workload parameters are substituted: each `Schedule` holds
the whole loop tree it runs. Integer expressions (extents, coordinates, view offsets) are
`ir.sym` expressions over syms and loop variables, evaluated at run time.

Value semantics (shared by every back end; `backends/ref` is the executable definition):
- A kernel value has a dtype; `f16`/`bf16` values are *held in f32* and rounded to nearest even
  only by `convert`/`cast` to them and by stores, so chains of f16 arithmetic keep f32 precision.
- Integer arithmetic wraps (two's complement); integer `div` is floor division, and dividing by
  zero gives 0. Float division by zero follows IEEE.
- Operand dtypes are made explicit by lowering: every elementwise op's operands already have the
  op's dtype (a `convert` op is inserted where the checker promoted), except `matmul` (any
  numeric operands, f32 result), comparisons (operands share a dtype, result bool), `where`
  (condition bool) and `cast`/`convert` themselves.
- Shapes broadcast as NumPy in 2-D: an operand of shape [1, N], [M, 1], [1, 1] or a scalar
  (shape None) is repeated along its extent-1 dimensions.
"""

from __future__ import annotations

from typing import Optional, Union

from ..records import record
from ..spans import NO_SPAN, Span
from . import sym

# ---------------------------------------------------------------------------------------------
# Kernels

# Operation names of `Op.op`, by arity and kind (attrs in parentheses):
#   leaves:      param (name), scalar_param (name), literal (value), iota_row, iota_col
#   elementwise: add sub mul div maximum minimum pow | neg abs exp log sqrt rsqrt tanh sigmoid
#                sin cos relu gelu silu | lt le gt ge eq ne | and or not | where
#                convert (to dtype: lowering's implicit conversions) cast (explicit `cast`)
#   reductions:  rowsum rowmax rowmin rowmean colsum colmax colmin colmean
#   others:      broadcast (to [rows, cols]), matmul (a, b[, acc]), transpose, softmax,
#                slice_even, slice_odd, interleave
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow",
                      "lt", "le", "gt", "ge", "eq", "ne", "and", "or")
ELEMENTWISE_UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos",
                     "relu", "gelu", "silu", "not", "convert", "cast")
REDUCTIONS = ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean")
OTHERS = ("broadcast", "matmul", "transpose", "softmax", "slice_even", "slice_odd", "interleave",
          "where")
LEAVES = ("param", "scalar_param", "literal", "iota_row", "iota_col")
ALL_OPS = LEAVES + ELEMENTWISE_BINARY + ELEMENTWISE_UNARY + REDUCTIONS + OTHERS


@record
class Op:
    """One value of a kernel's DAG: `op` applied to the values `args` (indices of earlier ops).

    `shape` is `(rows, cols)` for a tile and None for a scalar; `attr` holds the op's constant
    data: the parameter name for `param`/`scalar_param`, the number for `literal`, nothing else.
    """

    op: str
    args: tuple[int, ...]
    shape: Optional[tuple[int, int]]
    dtype: str
    attr: Union[str, int, float, bool, None] = None


@record
class KParam:
    """A kernel parameter: a tile (`mode` In/Out/InOut, static shape) or a scalar."""

    name: str
    kind: str  # "tile" or "scalar"
    dtype: str
    mode: Optional[str] = None
    rows: int = 0
    cols: int = 0


@record
class Kernel:
    """A specialised kernel: parameters, the op DAG in dependency order, and the stores.

    `stores` pairs an Out/InOut parameter with the op whose value it receives (converted to the
    parameter's dtype, broadcast to its shape). An extern kernel has `extern_c` (the C body of
    language.md section 4) and no ops. `source` is the kernel's name in the program; `name` is
    unique per specialisation (`rows__R_4`) and safe as a C identifier suffix.
    """

    name: str
    source: str
    params: tuple[KParam, ...]
    ops: tuple[Op, ...]
    stores: tuple[tuple[str, int], ...]
    extern_c: Optional[str] = None
    constexprs: tuple[tuple[str, int], ...] = ()
    span: Span = NO_SPAN


# ---------------------------------------------------------------------------------------------
# Workloads: a loop tree of task generators


@record
class TileArg:
    """A tensor region bound to a tile parameter, and how the task accesses it.

    The region is the box `[offsets[d], offsets[d] + extents[d])` of every tensor dimension `d`
    (an indexed dimension has extent 1). The tile's rows run along tensor dimension `row_dim`
    and its columns along `col_dim` (None: a promoted leading 1). `mode` is "r", "w" or "rw".
    `checks` are the facts the checker could not prove (view bounds, extents); each must hold
    before the task may launch.
    """

    param: str
    tensor: str
    mode: str
    offsets: tuple[sym.Expr, ...]
    extents: tuple[sym.Expr, ...]
    row_dim: Optional[int]
    col_dim: Optional[int]
    checks: tuple["ViewCheck", ...] = ()


@record
class ViewCheck:
    """`check` must hold at run time; if not, `message` is reported at `span` (the argument or
    declaration to blame), with the task's coordinates and the values involved."""

    check: sym.Check
    message: str
    span: Span = NO_SPAN


@record
class ScalarArg:
    """A scalar parameter's value: an integer expression, or a float/bool constant."""

    param: str
    value: Union[sym.Expr, float, bool]
    dtype: str


@record
class Task:
    """One task per enumeration: a kernel, its coordinates, and its arguments."""

    kernel: str
    coords: tuple[sym.Expr, ...]
    args: tuple[Union[TileArg, ScalarArg], ...]
    text: str  # the call as written, for messages and traces (`rmsnorm_tile[b, t]`)
    span: Span = NO_SPAN


@record
class Loop:
    """`for var in P(extent)` (kind "grid": iterations independent) or `P.seq` (kind "seq":
    iteration i+1 starts after every task of iteration i has finished)."""

    var: str
    extent: sym.Expr
    kind: str
    body: tuple["Stmt", ...]


@record
class Block:
    """`combine` (kind "combine": no order added) or `sequential` (each statement's tasks finish
    before the next statement's tasks start)."""

    kind: str
    body: tuple["Stmt", ...]


@record
class Read:
    """`var = tensor[index]`: one element of an integer tensor, read at this point of enumeration
    (language.md section 6, data-dependent task generation). Later expressions use `var`, a name
    unique in the schedule. The element is read only after every earlier-enumerated task that
    writes it has finished; `checks` (index bounds the checker could not prove) must hold before
    the read, else the run fails at their spans with the coordinates and values."""

    var: str
    tensor: str
    index: tuple[sym.Expr, ...]
    checks: tuple[ViewCheck, ...] = ()
    span: Span = NO_SPAN


@record
class Assert:
    """A run-time fact about values read so far (a ragged length is not negative, an indptr is
    monotone and within `indices`): when it fails, nothing further is enumerated and the run
    fails at the check's span with the coordinates and values."""

    check: ViewCheck


@record
class Cond:
    """A run-time predicate. `op` is a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`; `args` two
    integer expressions), `and` / `or` (two Conds), `not` (one Cond) or `const` (one bool)."""

    op: str
    args: tuple


@record
class When:
    """`when P1 { .. } else when P2 { .. } otherwise { .. }`: the body of the first branch whose
    predicate holds, per enclosing iteration, else `otherwise` (possibly empty)."""

    branches: tuple[tuple[Cond, tuple["Stmt", ...]], ...]
    otherwise: tuple["Stmt", ...] = ()


@record
class SlotSet:
    """`slot_set(k, value)` (and the second half of `slot_load`): run-time slot `k` (0 <= k < 64)
    takes `value` from here on in enumeration order. `slot(k)` in an expression is the variable
    `slot_var(k)`."""

    slot: int
    value: sym.Expr
    span: Span = NO_SPAN


def slot_var(k: int) -> str:
    """The name expressions use for run-time slot `k` (never a valid source identifier)."""
    return f"slot#{k}"


def slot_index(name: str) -> Optional[int]:
    """k when `name` is slot_var(k), else None."""
    return int(name[5:]) if name.startswith("slot#") else None


NSLOTS = 64


def walk(stmts):
    """Every statement of a loop tree, depth first, in enumeration order."""
    for st in stmts:
        yield st
        if isinstance(st, (Loop, Block)):
            yield from walk(st.body)
        elif isinstance(st, When):
            for _, body in st.branches:
                yield from walk(body)
            yield from walk(st.otherwise)


def written_tensors(stmts) -> set[str]:
    """The tensors some task of the tree writes."""
    return {a.tensor for st in walk(stmts) if isinstance(st, Task) for a in st.args
            if isinstance(a, TileArg) and a.mode != "r"}


def read_tensors(stmts) -> set[str]:
    """The tensors whose elements enumeration reads (N.Read): the data the task space needs."""
    return {st.tensor for st in walk(stmts) if isinstance(st, Read)}

Stmt = Union[Loop, Block, Task, Read, Assert, When, SlotSet]


# ---------------------------------------------------------------------------------------------
# Schedules and the module


@record
class Policy:
    """A schedule combinator's value, e.g. `Policy("round_robin", (4,))`, `Policy("affinity",
    (key,), n)`: the name, its integer/float arguments or key expressions, and a count."""

    name: str
    args: tuple[Union[sym.Expr, int, float], ...] = ()
    n: Optional[int] = None


@record
class Schedule:
    """What runs: the loop tree of a workload with its parameters substituted, and how."""

    name: str
    workload: str
    body: tuple[Stmt, ...]
    dispatch: Policy = Policy("round_robin", (1,))
    streams: int = 1
    stream_by: Optional[sym.Expr] = None
    timing: Policy = Policy("immediate")
    window: Optional[int] = None
    window_mode: str = "stall"
    # the combinators the schedule wrote: without `dispatch` any host worker may run any task
    # (the model still deals round_robin(1)); without `streams` tasks are in no stream
    given: tuple[str, ...] = ()
    window_span: Span = NO_SPAN  # `.task_graph(...)` (or the schedule): a window abort is reported here


@record
class SymDecl:
    """A run-time integer symbol and its default (None: must be bound)."""

    name: str
    default: Optional[int]
    span: Span = NO_SPAN


@record
class TensorDecl:
    """A tensor: `kind` input/output/inout/scratch, dtype, symbolic dims, declaration position."""

    name: str
    kind: str
    dtype: str
    dims: tuple[sym.Expr, ...]
    span: Span = NO_SPAN  # the declaration: bad bindings and bad data are reported here


@record
class Module:
    """The whole program: symbols, tensors, specialised kernels and schedules.

    `default_schedule` is `main`, or the only schedule, or None when there is a choice to make.
    `checks` are module-level run-time facts (a dimension that must not be negative).
    """

    name: str
    syms: tuple[SymDecl, ...]
    tensors: tuple[TensorDecl, ...]
    kernels: tuple[Kernel, ...]
    schedules: tuple[Schedule, ...]
    default_schedule: Optional[str]
    checks: tuple[ViewCheck, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # (file, text) of every file, for run-time errors

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def schedule(self, name: str) -> Schedule:
        for s in self.schedules:
            if s.name == name:
                return s
        raise KeyError(name)
