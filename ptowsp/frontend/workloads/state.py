"""The state one workload body's check shares, and what it reads from the module-wide check.

`BodyState` is the base of `Body` (body.py): the module's environment and diagnostics, the
ranges and extents of the symbolic variables in scope (what `sym` proves views against), the
source names taken by live bindings, and the reporting and proving helpers every check uses.
`Summary` is what a body check leaves behind for the checks across workloads (inlining,
channel pairing, schedule keys); `ModuleState` is the part of the module-wide check
(module.py) a body reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Protocol

from ... import sym
from ...diagnostics import Diagnostics, Note
from ...dtypes import UNSIGNED_DTYPES
from ...records import record
from .. import ast as A
from ..env import ChannelInfo, ModuleEnv, RuntimeCheck
from ..printer import expr_str
from .deadlock import ProcOp
from .scope import UNKNOWN, Ref


@record
class Need:
    """`ragged[i]` inside a workload: `i` must iterate the ragged axis's outer axis. Kept for
    the call sites when a workload parameter is involved."""

    ragged: Ref
    index: Ref
    span: A.Span
    text: str


@dataclass
class Summary:
    """What one workload body does, for the checks that look across workloads."""

    name: str
    sends: dict[str, list[A.Span]] = field(default_factory=dict)
    consumes: dict[str, list[A.Span]] = field(default_factory=dict)
    inlines: list[str] = field(default_factory=list)
    kernel_calls: list[A.CallStmt] = field(default_factory=list)
    loop_names: set[str] = field(default_factory=set)
    records: set[str] = field(default_factory=set)
    needs: list[Need] = field(default_factory=list)


class ModuleState(Protocol):
    """What a body check reads from the module-wide check."""

    env: ModuleEnv
    diags: Diagnostics
    summaries: dict[str, Summary]
    in_progress: list[str]  # the workloads being checked, outermost first
    proofs: dict[tuple, Optional[bool]]  # see `BodyState.decide`

    def summary(self, name: str) -> Optional[Summary]: ...

    def closure(self, name: str) -> list[Summary]: ...


class BodyState:
    """The state of checking one workload body (or one schedule: `decl` None)."""

    def __init__(self, mod: ModuleState, decl: Optional[A.WorkloadDecl]):
        self.mod = mod
        self.env = mod.env
        self.diags = mod.diags
        self.decl = decl
        self.summary = Summary(decl.name.id if decl is not None else "")
        self.ranges: dict[str, sym.Interval] = {}  # symbolic variable -> its range
        self.extents: dict[str, sym.Expr] = {}  # loop variable -> its symbolic extent
        self.live: dict[str, int] = {}  # symbolic names bound in enclosing scopes (`fresh`)
        self.recorded: set[str] = set()  # events recorded so far, for `synchronize`
        self.proc_ops: Optional[list[ProcOp]] = None  # the enclosing process's sends/consumes
        self.uncertain = 0  # > 0 where a statement may not run on every run
        self.key_of: Optional[str] = None  # the scheduled workload, while checking a schedule key
        self.early: list[A.Let] = []  # the `let`s whose names were used before them (reported)
        self.exact_ints = False  # folding a compile-time integer: no int64 check (compile_int)

    def error(
        self,
        span: A.Span,
        code: str,
        message: str,
        help: Optional[str] = None,
        notes: Iterable[Note] = (),
    ) -> None:
        self.diags.error(span, code, message, help, notes)

    def text(self, node: A.Node) -> str:
        """A node as source text (the one AST printer, so messages read the same everywhere)."""
        return expr_str(node)

    def call_text(self, call: A.CallStmt) -> str:
        if call.coords is None:
            return call.callee.id
        return f"{call.callee.id}[{', '.join(self.text(c) for c in call.coords)}]"

    def canon(self, name: str) -> str:
        """Follow `axis a = b` aliases to the axis that defines the space."""
        seen: set[str] = set()
        while name not in seen:
            seen.add(name)
            d = self.env.names.get(name)
            if (
                isinstance(d, A.AxisDecl)
                and isinstance(d.axis, A.Name)
                and self.env.kind_of(d.axis.id) == "axis"
            ):
                name = d.axis.id
            else:
                break
        return name

    def fresh(self, name: str) -> str:
        """A symbolic variable name for a new binding: the source name unless it would clash."""
        out, k = name, 1
        while out in self.env.syms or self.live.get(out, 0) > 0:
            k += 1
            out = f"{name}'{k}"
        self.live[out] = self.live.get(out, 0) + 1
        return out

    def release(self, var: str) -> None:
        self.live[var] = self.live.get(var, 1) - 1

    def bind_range(self, var: str, extent: Optional[sym.Expr]) -> None:
        """A loop variable over [0, extent)."""
        if extent is None:
            self.ranges[var] = sym.NONNEG
            self.extents.pop(var, None)
            return
        hi = sym.bounds(extent, self.ranges).hi
        self.ranges[var] = sym.Interval(0, hi - 1) if hi is not None and hi >= 1 else sym.NONNEG
        if sym.const_value(extent) is None:
            self.extents[var] = extent
        else:
            self.extents.pop(var, None)

    def decide(self, lhs: sym.Expr, op: str, rhs: sym.Expr) -> Optional[bool]:
        """Prove or disprove `lhs op rhs` over the ranges of the variables in scope (proofs are
        the checker's main cost, and programs repeat views: answers are cached per module)."""
        return sym.prove_in_loops(lhs, op, rhs, self.ranges, self.extents, self.mod.proofs)

    def require(
        self,
        lhs: sym.Expr,
        op: str,
        rhs: sym.Expr,
        *,
        error_span: A.Span,
        error: str,
        check_span: A.Span,
        reason: str,
        help: Optional[str] = None,
    ) -> bool:
        """A compile error if disproved, a run-time check if undecided; False on an error."""
        r = self.decide(lhs, op, rhs)
        if r is False:
            self.error(error_span, "out-of-range", error, help)
            return False
        if r is None:
            self.env.checks.append(RuntimeCheck(sym.Check(lhs, op, rhs, reason), check_span))
        return True

    def sound_tensor(self, name: str) -> bool:
        """False when a dimension of the tensor's declaration is wrong (already reported, with a
        placeholder in its place): its views are not checked further."""
        return self.env.tensors[name].sound

    def sound_param(self, kernel: str, param: str) -> bool:
        p = self.env.kernel_sigs[kernel].param(param)
        return p is None or p.tile is None or p.tile.sound

    def sound_channel(self, ch: ChannelInfo) -> bool:
        return ch.sound

    def opaque(self, name: str, dtype: str) -> sym.Expr:
        """A run-time value (a tensor element, a slot): a variable with its dtype's range."""
        self.ranges[name] = sym.NONNEG if dtype in UNSIGNED_DTYPES else UNKNOWN
        return sym.var(name)
