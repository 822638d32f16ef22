"""The surface AST of a `.wsp` file: one frozen dataclass per construct of the language.

Node classes are declared with `@node` (`ptowsp/records.py`): frozen, slotted dataclasses whose
generated methods are compiled in one batch, because defining ~60 classes with
`@dataclass(frozen=True, slots=True)` cost more than parsing a small file.

The AST mirrors the grammar, not execution (that is the IR's job, built by `lower/`).
Every node carries a `Span`; spans are left out of equality, so two parses of the same
program at different positions compare equal. Nothing here knows about Lark.
"""

from __future__ import annotations

from dataclasses import field
from typing import Iterator, Optional, Union

from ..records import record as node  # a frozen, slotted dataclass, cheap to define
from ..spans import NO_SPAN, Span  # shared with the IR  # noqa: F401


@node
class Node:
    """Base of every AST node."""

    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)

    def children(self) -> Iterator["Node"]:
        """Direct child nodes, in source order."""
        for name in self._all_:
            if name == "span":
                continue
            value = getattr(self, name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Node):
                        yield item

    def walk(self) -> Iterator["Node"]:
        """This node and all its descendants, pre-order."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children())))


# ---------------------------------------------------------------------------------------------
# Expressions (shared by kernel bodies, scalar expressions, views, dims and schedule keys)


@node
class Name(Node):
    """An identifier use: a const, sym, tensor, axis, loop variable, parameter, ..."""

    id: str


@node
class IntLit(Node):
    """An integer literal (`42`, `0x2A`, `1_000`); `text` keeps the spelling (for `wspc fmt`)."""

    value: int
    text: str = field(compare=False, default="")


@node
class FloatLit(Node):
    """A float literal (`1.0`, `1e-6`, `.5`, `inf`); `text` keeps the spelling."""

    value: float
    text: str = field(compare=False, default="")


@node
class BoolLit(Node):
    """`true` or `false`."""

    value: bool


@node
class StrLit(Node):
    """A string literal with escapes resolved."""

    value: str


@node
class Unary(Node):
    """`-x` or `not x`."""

    op: str
    operand: Expr


@node
class Binary(Node):
    """`a OP b` for `+ - * / %`, comparisons, `and`, `or`; `op_span` locates the operator."""

    op: str
    left: Expr
    right: Expr
    op_span: Span = field(default=NO_SPAN, compare=False, repr=False)


@node
class Keyword(Node):
    """`name = value` inside a call's argument list."""

    name: str
    value: Expr


@node
class Call(Node):
    """`func(args, name = value, ...)`; `tl.f` and `pto.f` are stored as `f` with `prefix` set."""

    func: Name
    args: tuple[Expr, ...] = ()
    kwargs: tuple[Keyword, ...] = ()
    prefix: str = ""


@node
class Attr(Node):
    """`value.attr`: `e.pos`, `t.index`, `NAME.id`."""

    value: Expr
    attr: str


@node
class Slice(Node):
    """`start : stop` or `start : stop : step` inside an index list; either bound may be
    missing (`:`), and so may the step (None: 1). A step is allowed in a workload's tensor view
    (language.md section 6, "Strided views"), not in a kernel's tile slice."""

    start: Optional[Expr]
    stop: Optional[Expr]
    step: Optional[Expr] = None


@node
class Index(Node):
    """`value[i, j : k, :]`: a tensor view, a tensor element read, or `ragged[b]`."""

    value: Expr
    items: tuple[Union[Expr, Slice], ...]


# Axis constructors. They are expressions syntactically (`Dense[8]`, `DenseDyn(B)`), but the
# parser turns these spellings into dedicated nodes wherever they appear.


@node
class DenseAxis(Node):
    """`Dense[N]` (also `Dense[N]()`): a static extent."""

    extent: Expr


@node
class DenseDynAxis(Node):
    """`DenseDyn(expr)`: an extent known at run time."""

    extent: Expr


@node
class RaggedAxis(Node):
    """`Ragged(outer, lengths)`: `lengths` is an i32 tensor or an expression of `_`."""

    outer: Expr
    lengths: Expr


@node
class SparseAxis(Node):
    """`Sparse(outer, indptr, indices)`: CSR selection."""

    outer: Expr
    indptr: Expr
    indices: Expr


Expr = Union[
    Name, IntLit, FloatLit, BoolLit, StrLit, Unary, Binary, Call, Attr, Index,
    DenseAxis, DenseDynAxis, RaggedAxis, SparseAxis,
]
AxisExpr = Union[DenseAxis, DenseDynAxis, RaggedAxis, SparseAxis, Expr]

# ---------------------------------------------------------------------------------------------
# Types


@node
class TensorType(Node):
    """`DT[dims]` of a tensor declaration."""

    dtype: str
    dims: tuple[Expr, ...]


@node
class TileType(Node):
    """`Tile[M, N, DT]`."""

    rows: Expr
    cols: Expr
    dtype: str


@node
class TileParamType(Node):
    """`In[Tile[...]]`, `Out[Tile[...]]` or `InOut[Tile[...]]`; `pad`: the `pad = v` option
    (what a load puts where a partial view has no element, language.md section 4)."""

    mode: str
    tile: TileType
    pad: Optional["Expr"] = None


@node
class ScalarParamType(Node):
    """`Scalar[DT]`."""

    dtype: str


@node
class ConstexprParamType(Node):
    """`Constexpr[DT]`: a compile-time integer that specialises the kernel."""

    dtype: str


ParamType = Union[TileParamType, ScalarParamType, ConstexprParamType]

# ---------------------------------------------------------------------------------------------
# Statements: kernel bodies (Let, Assign, Store, ExprStmt) and workload bodies (the rest)


@node
class Let(Node):
    """`let name = value`."""

    name: Name
    value: Expr


@node
class LetMany(Node):
    """`let a, b = value`: the two results of `topk` or `sort` in a kernel (`_` binds none)."""

    names: tuple[Name, ...]
    value: Expr


@node
class Assign(Node):
    """`name = value`: rebinds a `let`."""

    name: Name
    value: Expr


@node
class Store(Node):
    """`store(target, value)`."""

    target: Expr
    value: Expr


@node
class ExprStmt(Node):
    """An expression used as a statement where no other reading applies (always an error)."""

    expr: Expr


@node
class After(Node):
    """One task handle a call's `after` names: `t` (its tasks at the iteration of the loops
    around both calls, every iteration of the others), or `t[i - 1]` (coordinates for the
    loops around `t`'s call, outermost first; docs/schedules.md, "Named edges")."""

    handle: Name
    index: Optional[tuple[Expr, ...]]


@node
class CallStmt(Node):
    """`callee[coords](args)`: a kernel task, or an inlined workload (resolved by the checker).

    `coords` is None when the call has no bracket list. `label` is the task handle a
    `let t = k[i](...)` binds; `after` the handles its `after t` / `after [t1, t2]` names.
    """

    callee: Name
    coords: Optional[tuple[Expr, ...]]
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    label: Optional[Name] = None
    after: tuple[After, ...] = ()


@node
class ForLoop(Node):
    """`for v1, v2 in P(...) / P.grid(...) / P.seq(...) / P.sel(...) { body }`.

    `kind` is `grid`, `seq` or `sel`; `spelling` is the source form (`P`, `P.grid`, ...).
    """

    vars: tuple[Name, ...]
    kind: str
    axes: tuple[AxisExpr, ...]
    body: tuple[Stmt, ...]
    spelling: str = field(default="P", compare=False)


@node
class WhenBranch(Node):
    """One `when PRED { body }` arm (also `else when`, `P.when(PRED)`)."""

    pred: Expr
    body: tuple[Stmt, ...]


@node
class When(Node):
    """`when ... else when ... otherwise ...`: the first branch whose predicate holds runs."""

    branches: tuple[WhenBranch, ...]
    otherwise: Optional[tuple[Stmt, ...]]


@node
class Combine(Node):
    """`combine { ... }`: an unordered group."""

    body: tuple[Stmt, ...]


@node
class Sequential(Node):
    """`sequential { ... }`: each statement's tasks finish before the next one's start."""

    body: tuple[Stmt, ...]


@node
class Process(Node):
    """`process NAME { ... }` or `process NAME * N { ... }` (N replicas)."""

    name: Name
    replicas: Optional[Expr]
    body: tuple[Stmt, ...]


@node
class Pipe(Node):
    """`pipe { process ... }` (also `P.pipe`)."""

    body: tuple[Stmt, ...]


@node
class Send(Node):
    """`send(channel, CALL)`."""

    channel: Name
    call: CallStmt


@node
class Consume(Node):
    """`consume(channel) as var { body }`."""

    channel: Name
    var: Name
    body: tuple[Stmt, ...]


@node
class Record(Node):
    """`record(event)`: marks the tasks of the preceding statement."""

    event: Name


@node
class Synchronize(Node):
    """`synchronize(event)`: later statements of the block wait for the marked tasks."""

    event: Name


@node
class Collective(Node):
    """`allreduce(A, into = B, over = tp, op = sum)` and the other collective statements of
    `COLLECTIVES` (docs/distributed.md, "Collectives"): `op` only for the reductions, `dim`
    only for `reduce_scatter`, `over` for all but `relayout`. Checked by the checker."""

    kind: str
    source: Name
    into: Name
    over: Optional[Name] = None
    op: Optional[Name] = None
    dim: Optional[Expr] = None


COLLECTIVES = ("allreduce", "reduce_scatter", "allgather", "all_to_all", "relayout")


@node
class SlotSet(Node):
    """`slot_set(k, expr)`."""

    slot: Expr
    value: Expr


@node
class SlotLoad(Node):
    """`slot_load(k, T[i, j])`."""

    slot: Expr
    source: Expr


Stmt = Union[
    Let, LetMany, Assign, Store, ExprStmt, CallStmt, ForLoop, When, Combine, Sequential, Pipe, Process,
    Send, Consume, Record, Synchronize, SlotSet, SlotLoad, Collective,
]

# ---------------------------------------------------------------------------------------------
# Declarations


@node
class ModuleDecl(Node):
    """`module NAME`."""

    name: Name


@node
class Import(Node):
    """`import "path.wsp"` (path relative to the importing file)."""

    path: str


@node
class SymDecl(Node):
    """One name of `sym A, B = 4`: a non-negative integer bound at run time."""

    name: Name
    default: Optional[Expr]


@node
class ConstDecl(Node):
    """`const N = 64`."""

    name: Name
    value: Expr


@node
class MeshAxis(Node):
    """One axis of a `mesh` declaration: `tp = 4` (a name in the module namespace)."""

    name: Name
    size: Expr


@node
class MeshDecl(Node):
    """`mesh dp = 2, tp = 4` (docs/distributed.md): the module's devices, last axis fastest."""

    axes: tuple[MeshAxis, ...]


@node
class LayoutDim(Node):
    """One entry of a layout: `R` (`axis` None: replicated) or `S(axis)` (sharded)."""

    axis: Optional[Name]


@node
class Layout(Node):
    """`@ [R, S(tp)] partial(dp, ...)` after a tensor's type: one entry per dimension, and the
    mesh axes over which the tensor holds partial sums (docs/distributed.md, "Layouts")."""

    dims: tuple[LayoutDim, ...]
    partial: tuple[Name, ...] = ()


@node
class TensorDecl(Node):
    """`input|output|inout|scratch NAME: DT[dims]`, with its layout when one is written, and
    `, location = ub` (a placement hint: global, l2, l1 or ub; docs/language.md section 3)."""

    kind: str
    name: Name
    type: TensorType
    location: str = "global"
    layout: Optional[Layout] = None


@node
class AxisDecl(Node):
    """`axis NAME = AXIS`."""

    name: Name
    axis: AxisExpr


@node
class ChannelDecl(Node):
    """`channel NAME: Tile[M, N, DT], depth = D`, or a token channel when `elem` is None.

    `depth` is None when not written (the default applies).
    """

    name: Name
    elem: Optional[TileType]
    depth: Optional[Expr]


@node
class EventDecl(Node):
    """`event NAME`: a rendezvous channel of depth 0."""

    name: Name


@node
class KernelParam(Node):
    """`name: TYPE [= default]`."""

    name: Name
    type: ParamType
    default: Optional[Expr]


@node
class ExternInclude(Node):
    """`include "header"` before an extern body; `word` is what was written for `include`."""

    word: str
    header: str


@node
class ExternBody(Node):
    """`extern LANG [include "h"]... <raw string>`: a foreign body for one target language
    (`c`, `cpp`, `ascend`). `includes` are the headers named before the body, each with the
    word written before it (the checker insists on `include`) and its span."""

    lang: str
    code: str
    includes: tuple[ExternInclude, ...] = ()


@node
class KernelDecl(Node):
    """`kernel NAME(params) { body }` or `kernel NAME(params) extern c \"\"\"...\"\"\"`."""

    name: Name
    params: tuple[KernelParam, ...]
    body: Optional[tuple[Stmt, ...]]
    externs: tuple[ExternBody, ...] = ()


@node
class WorkloadParam(Node):
    """`name: AxisType` of a workload (`DenseDyn`, `Dense[8]`, `Ragged`, `Sparse`)."""

    name: Name
    kind: str
    extent: Optional[Expr] = None


@node
class WorkloadDecl(Node):
    """`workload NAME(params) { body }`."""

    name: Name
    params: tuple[WorkloadParam, ...]
    body: tuple[Stmt, ...]


@node
class Combinator(Node):
    """`.name(args)` in a schedule chain."""

    name: Name
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]


@node
class ScheduleDecl(Node):
    """`schedule NAME = W(args) .comb(...) ...`."""

    name: Name
    workload: Name
    args: tuple[Expr, ...]
    combinators: tuple[Combinator, ...]
    kwargs: tuple[Keyword, ...] = ()


Decl = Union[
    ModuleDecl, Import, SymDecl, ConstDecl, MeshDecl, TensorDecl, AxisDecl, ChannelDecl, EventDecl,
    KernelDecl, WorkloadDecl, ScheduleDecl,
]


@node
class SourceFile(Node):
    """One parsed `.wsp` file: its path, its text and its declarations in source order."""

    path: str
    decls: tuple[Decl, ...]
    text: str = field(default="", compare=False, repr=False)

    @property
    def module_name(self) -> Optional[str]:
        for d in self.decls:
            if isinstance(d, ModuleDecl):
                return d.name.id
        return None


DECLARATION_NAMES = (SymDecl, ConstDecl, MeshAxis, TensorDecl, AxisDecl, ChannelDecl, EventDecl,
                     KernelDecl, WorkloadDecl, ScheduleDecl)
