"""Check workload bodies and schedules (language.md sections 5 to 8).

`check_workloads(env, diags)` walks every workload body once, with lexical scopes for workload
parameters, loop variables, consumed items and process names, and checks: axes and loops, task
calls against kernel signatures (every parameter bound by name, tensor views against tile shapes
and dtypes, with `sym.py` proofs and `RuntimeCheck`s appended to `env.checks` for what cannot
be proved), scalar expressions, inlined workload calls (argument kinds, inline cycles), CSP
(pipes, processes, channel slots, consumed items, send/consume pairing per root workload, where
sends and consumes may stand (inside a process; one consuming process per channel; sends inside
its pipe), rendezvous deadlock cycles, record/synchronize), slots, and schedules (workload arguments,
combinators, policy values, keys against the coordinates of every reachable kernel call).

Every user error becomes a diagnostic; nothing here raises for one. What this leaves alone:
kernel bodies (`kernel_check.py`), declarations (`checker.py`), and anything about run-time
values beyond what symbolic bounds can decide.

Where language.md is silent the choice is written next to the code as `# decision: ...`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from ... import sym
from ...diagnostics import Diagnostics, Note, did_you_mean
from ...dtypes import FLOAT_DTYPES, UNSIGNED_DTYPES
from ...records import record
from .. import ast as A
from ..env import NUM_SLOTS, AxisInfo, ChannelInfo, ModuleEnv, RuntimeCheck
from ..printer import expr_str
from ..signatures import KernelSig, ParamSig
from .schedule_axes import AXIS_COMBINATORS, REPEATABLE, AxisChecker

UNKNOWN = sym.Interval(None, None)
SCALAR_FUNCS = ("slot", "query", "min", "max", "abs", "ceildiv")

COMBINATORS = ("dispatch", "streams", "stream_by", "timing", "task_graph") + AXIS_COMBINATORS
DISPATCH_POLICIES = ("round_robin", "affinity", "hash", "dispatch_by", "work_steal")
TIMING_POLICIES = ("immediate", "batched", "interleaved", "rate_limit")
TASK_GRAPH_MODES = ("stall", "abort")

# ("axis", canonical module axis) | ("param", workload parameter) | None (an inline axis)
Ref = Optional[tuple[str, str]]


# ---------------------------------------------------------------------------------------------
# What names mean inside a workload


@record
class SVal:
    """The type of a scalar expression (`int`, `float`, `bool` or `error`) and, for integers,
    its symbolic value; `value` holds a compile-time float."""

    type: str
    expr: Optional[sym.Expr] = None
    value: Optional[float] = None


ERR = SVal("error")


@record
class AxisVal:
    """An axis as the body sees it.

    kind: `dense`, `densedyn`, `ragged`, `sparse`, `inner` (`ragged[b]`) or `selinner`
    (`sparse[b]`). `ref` names a module axis or a workload parameter (None for inline axes);
    `outer` is the outer axis of a module ragged/sparse axis.
    """

    kind: str
    name: str
    extent: Optional[sym.Expr] = None
    ref: Ref = None
    outer: Ref = None
    info: Optional[AxisInfo] = None
    static: bool = False  # a `Dense` parameter or axis: the extent is a compile-time integer


@record
class LoopVar:
    """A loop variable (or the `_` of a ragged length): an integer with a known range."""

    name: str
    var: sym.Expr
    kind: str  # grid, seq, sel, key, outer_index
    axis_ref: Ref = None
    pos: Optional[sym.Expr] = None  # `e.pos` of a `P.sel` variable


@record
class Item:
    """The variable of `consume(ch) as t`: an item of `channel` (None if the channel is bad)."""

    name: str
    channel: Optional[ChannelInfo]
    var: sym.Expr  # t.index


@record
class ProcessName:
    """An enclosing `process NAME [* N]`: `NAME.id` is its replica number."""

    name: str
    replicas: Optional[int]
    var: Optional[sym.Expr]


@record
class Pending:
    """A variable of the loop whose axes are being read (not yet bound)."""

    name: str


Binding = Union[AxisVal, LoopVar, Item, ProcessName, Pending]


class Scope:
    """A lexical scope; lookups fall through to the parent, then (elsewhere) to the module."""

    __slots__ = ("names", "parent")

    def __init__(self, parent: Optional["Scope"] = None):
        self.names: dict[str, Binding] = {}
        self.parent = parent

    def lookup(self, name: str) -> Optional[Binding]:
        s: Optional[Scope] = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def visible(self) -> list[str]:
        out: list[str] = []
        s: Optional[Scope] = self
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out


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


@record
class _Op:
    """A send or consume inside a process, for the rendezvous deadlock check."""

    kind: str
    channel: ChannelInfo
    span: A.Span
    certain: bool  # reached on every run (not under `when`, a consume body or a maybe-empty loop)


# ---------------------------------------------------------------------------------------------
# The driver


def check_workloads(env: ModuleEnv, diags: Diagnostics) -> None:
    """Check every workload body and every schedule of the module."""
    _Module(env, diags).run()


class _Module:
    def __init__(self, env: ModuleEnv, diags: Diagnostics):
        self.env = env
        self.diags = diags
        self.summaries: dict[str, Summary] = {}
        self.in_progress: list[str] = []
        self.proofs: dict[tuple, Optional[bool]] = {}  # see `_Body.decide`

    def run(self) -> None:
        self._ragged_lengths()
        for name in self.env.workloads:
            self.summary(name)
        for sd in self.env.schedules.values():
            _Body(self, None).schedule(sd)
        self._pairing()
        self._csp_structure()

    def summary(self, name: str) -> Optional[Summary]:
        """Check a workload body once; None while it is being checked (an inline cycle)."""
        if name in self.summaries:
            return self.summaries[name]
        if name in self.in_progress:
            return None
        self.in_progress.append(name)
        try:
            s = _Body(self, self.env.workloads[name]).run()
        finally:
            self.in_progress.pop()
        self.summaries[name] = s
        return s

    def closure(self, name: str) -> list[Summary]:
        """The summaries of a workload and of everything it inlines, each once."""
        out: list[Summary] = []
        seen: set[str] = set()
        stack = [name]
        while stack:
            n = stack.pop()
            if n in seen or n not in self.summaries:
                continue
            seen.add(n)
            s = self.summaries[n]
            out.append(s)
            stack.extend(reversed(s.inlines))
        return out

    # -- `Ragged(outer, expr of _)`: the length expression is a scalar expression of `_`
    def _ragged_lengths(self) -> None:
        for name, info in self.env.axes.items():
            if info.kind != "ragged" or info.lengths_expr is None:
                continue
            if self.env.names.get(name) is not info.decl:
                continue
            if not isinstance(info.decl.axis, A.RaggedAxis):
                continue  # an alias: checked at the original
            body = _Body(self, None)
            scope = Scope()
            outer = self.env.axes.get(info.outer or "")
            var = sym.var("_")
            body.bind_range("_", outer.extent if outer is not None else None)
            scope.names["_"] = LoopVar(
                "_", var, "outer_index", ("axis", body.canon(info.outer or ""))
            )
            body.int_expr(info.lengths_expr, scope, "a ragged length")

    # -- a channel consumed but never sent to (or the reverse), per root workload
    def _pairing(self) -> None:
        inlined: set[str] = set()
        for s in self.summaries.values():
            inlined.update(s.inlines)
        scheduled = {sd.workload.id for sd in self.env.schedules.values()}
        # decision: pairing is checked per root workload (scheduled, or inlined by no other), counting
        # everything it inlines; a channel used in no root is not checked
        for name in self.env.workloads:
            if name not in self.summaries or (name in inlined and name not in scheduled):
                continue
            parts = self.closure(name)
            sent = {c for s in parts for c in s.sends}
            consumed = {c for s in parts for c in s.consumes}
            for s in parts:
                for c, spans in s.consumes.items():
                    if c not in sent:
                        for sp in spans:
                            self.diags.error(
                                sp,
                                "unpaired-channel",
                                f"channel `{c}` is consumed but never sent to",
                                f"send to it in another process: `send({c}, kernel[i](out = {c}, ...))`",
                            )
                for c, spans in s.sends.items():
                    if c not in consumed:
                        for sp in spans:
                            self.diags.error(
                                sp,
                                "unpaired-channel",
                                f"channel `{c}` is sent to but never consumed",
                                f"consume it in another process: `consume({c}) as t {{ ... }}`",
                            )


    # -- where sends and consumes may be, per root workload (inlined bodies expanded)
    def _roots(self) -> list[str]:
        inlined: set[str] = set()
        for s in self.summaries.values():
            inlined.update(s.inlines)
        scheduled = {sd.workload.id for sd in self.env.schedules.values()}
        return [n for n in self.env.workloads
                if n in self.summaries and (n not in inlined or n in scheduled)]

    def _csp_structure(self) -> None:
        """decision: `send` and `consume` stand inside a `process` (counting the processes that
        inline the workload holding them); all consumes of a channel are in one process (whose
        replicas share its items), and every send to it is inside the pipe of that process (a
        channel connects the processes of one pipe, which opens it each time it runs)."""
        if not self.env.channels:
            return
        reported: set[tuple] = set()

        def error(span, code, message, help=None, notes=()):
            key = (span, code, message)
            if key not in reported:
                reported.add(key)
                self.diags.error(span, code, message, help, notes)

        for root in self._roots():
            uses: list[_Use] = []
            self._collect_uses(self.env.workloads[root].body, (), (), (root,), uses)
            # a channel not both sent and consumed here is reported by the pairing check
            sent = {u.channel for u in uses if u.kind == "send"}
            consumed = {u.channel for u in uses if u.kind == "consume"}
            uses = [u for u in uses if u.channel in sent and u.channel in consumed]
            consumers: dict[str, _Use] = {}
            for u in uses:
                if not u.procs:
                    error(u.span, "csp-outside-process",
                          f"`{u.kind}` is only allowed inside a `process` of a `pipe`",
                          f"write `pipe {{ process NAME {{ ... {u.kind}({u.channel}, ...) ... }} }}`"
                          if u.kind == "send" else
                          f"write `pipe {{ process NAME {{ consume({u.channel}) as t {{ ... }} }} }}`")
                    continue
                if u.kind != "consume":
                    continue
                first = consumers.setdefault(u.channel, u)
                if first.procs[-1] is not u.procs[-1]:
                    a, b = first.procs[-1].name.id, u.procs[-1].name.id
                    error(u.span, "csp-two-consumers",
                          f"channel `{u.channel}` is consumed by process `{a}` and by process "
                          f"`{b}`; the items of a channel go to one process",
                          f"consume it in one process; replicas (`process {a} * N`) share its items",
                          [Note(first.span, f"process `{a}` consumes `{u.channel}` here")])
            for u in uses:
                c = consumers.get(u.channel)
                if u.kind != "send" or not u.procs or c is None or not c.pipes:
                    continue
                owner = c.pipes[-1]
                if not any(p is owner for p in u.pipes):
                    error(u.span, "csp-send-outside-pipe",
                          f"`send({u.channel}, ...)` is outside the pipe whose process "
                          f"`{c.procs[-1].name.id}` consumes `{u.channel}`",
                          "a channel connects the processes of one pipe: send from a process of "
                          "that pipe",
                          [Note(c.span, f"`{u.channel}` is consumed here")])

    def _collect_uses(self, stmts, procs: tuple, pipes: tuple, stack: tuple,
                      out: list["_Use"]) -> None:
        for s in stmts:
            if isinstance(s, A.Pipe):
                for st in s.body:
                    # a statement that is not a process is reported already (`pipe-body`)
                    if isinstance(st, A.Process):
                        self._collect_uses(st.body, procs + (st,), pipes + (s,), stack, out)
            elif isinstance(s, A.Process):
                self._collect_uses(s.body, procs + (s,), pipes, stack, out)
            elif isinstance(s, A.Send):
                if s.channel.id in self.env.channels:
                    out.append(_Use("send", s.channel.id, s.channel.span, procs, pipes))
            elif isinstance(s, A.Consume):
                if s.channel.id in self.env.channels:
                    out.append(_Use("consume", s.channel.id, s.channel.span, procs, pipes))
                self._collect_uses(s.body, procs, pipes, stack, out)
            elif isinstance(s, (A.ForLoop, A.Combine, A.Sequential)):
                self._collect_uses(s.body, procs, pipes, stack, out)
            elif isinstance(s, A.When):
                for br in s.branches:
                    self._collect_uses(br.body, procs, pipes, stack, out)
                self._collect_uses(s.otherwise or (), procs, pipes, stack, out)
            elif (isinstance(s, A.CallStmt) and s.callee.id in self.env.workloads
                  and s.callee.id not in stack):
                self._collect_uses(self.env.workloads[s.callee.id].body, procs, pipes,
                                   stack + (s.callee.id,), out)


@dataclass(frozen=True, eq=False)
class _Use:
    """A send or consume reached from a root workload: the processes and pipes around it
    (outermost first)."""

    kind: str
    channel: str
    span: A.Span
    procs: tuple
    pipes: tuple


# ---------------------------------------------------------------------------------------------
# One workload body (or one schedule)


class _Body:
    def __init__(self, mod: _Module, decl: Optional[A.WorkloadDecl]):
        self.mod = mod
        self.env = mod.env
        self.diags = mod.diags
        self.decl = decl
        self.summary = Summary(decl.name.id if decl is not None else "")
        self.ranges: dict[str, sym.Interval] = {}
        self.extents: dict[str, sym.Expr] = {}
        self.live: dict[str, int] = {}
        self.recorded: set[str] = set()
        self.proc_ops: Optional[list[_Op]] = None
        self.uncertain = 0
        self.key_of: Optional[str] = None  # the scheduled workload, while checking a schedule key

    # ---- small helpers
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

    # ---- a workload
    def run(self) -> Summary:
        d = self.decl
        assert d is not None
        scope = Scope()
        seen: dict[str, A.WorkloadParam] = {}
        for p in d.params:
            name = p.name.id
            if name in seen:
                self.error(
                    p.name.span,
                    "duplicate-param",
                    f"parameter `{name}` is declared twice",
                    notes=[Note(seen[name].name.span, "first declared here")],
                )
                continue
            seen[name] = p
            scope.names[name] = self.param_axis(p)
        self.block(d.body, scope)
        return self.summary

    def param_axis(self, p: A.WorkloadParam) -> AxisVal:
        name, ref = p.name.id, ("param", p.name.id)
        if p.kind == "Dense" and p.extent is not None:
            n = self.compile_int(p.extent, Scope(), "a `Dense` extent")
            if n is not None and n < 0:
                self.error(p.extent.span, "negative-extent", f"axis extent is negative ({n})")
                n = None
            ext = sym.const(n) if n is not None else self.opaque(f"len({name})", "u64")
            return AxisVal("dense", name, ext, ref, static=True)
        if p.kind == "Ragged":
            return AxisVal("ragged", name, None, ref)
        if p.kind == "Sparse":
            return AxisVal("sparse", name, None, ref)
        # decision: an untyped workload parameter is a dense axis (`Dense[N]` or `DenseDyn`), like `DenseDyn`
        # decision: a bare `Dense` parameter takes any axis whose extent is a compile-time integer
        return AxisVal(
            "dense" if p.kind == "Dense" else "densedyn",
            name,
            self.opaque(f"len({name})", "u64"),
            ref,
            static=p.kind == "Dense",
        )

    # ---- statements
    def block(self, stmts: Iterable[A.Stmt], scope: Scope) -> None:
        stmts = tuple(stmts)
        for i, s in enumerate(stmts):
            if isinstance(s, A.Record):
                j = i - 1
                while j >= 0 and isinstance(stmts[j], A.Record):
                    j -= 1  # decision: consecutive `record`s all mark the statement before the first one
                # decision: a `record` right after a `synchronize` (which has no tasks) is misplaced too
                if j < 0 or isinstance(stmts[j], A.Synchronize):
                    self.error(
                        s.span,
                        "record-position",
                        "`record` must directly follow the statement whose tasks it marks",
                        f"write `record({s.event.id})` on the line after that statement",
                    )
            self.stmt(s, scope)

    def stmt(self, s: A.Stmt, scope: Scope) -> None:
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        if method is None:  # pragma: no cover - every statement class has a method
            self.error(s.span, "bad-statement", "this statement is not allowed in a workload")
            return
        method(s, scope)

    def stmt_Let(self, s: A.Let, scope: Scope) -> None:
        # decision: `let` is a kernel-body statement; workloads name values with loops and axes only
        self.error(
            s.span,
            "bad-statement",
            "`let` is only allowed in kernel bodies",
            "compute values inside a kernel, or use the expression directly",
        )

    def stmt_Assign(self, s: A.Assign, scope: Scope) -> None:
        self.error(s.span, "bad-statement", "assignment is only allowed in kernel bodies")

    def stmt_Store(self, s: A.Store, scope: Scope) -> None:
        self.error(
            s.span,
            "bad-statement",
            "`store` is only allowed in kernel bodies",
            "a workload writes tensors by calling kernels: `k[i](y = Y[i], ...)`",
        )

    def stmt_ExprStmt(self, s: A.ExprStmt, scope: Scope) -> None:
        self.error(
            s.span,
            "bad-statement",
            "an expression on its own is not a workload statement",
            "workload statements are task calls, loops, `when`, `combine`, `sequential`, `pipe`, "
            "`send`, `consume`, `record`, `synchronize`, `slot_set` and `slot_load`",
        )

    def stmt_Combine(self, s: A.Combine, scope: Scope) -> None:
        self.block(s.body, Scope(scope))

    def stmt_Sequential(self, s: A.Sequential, scope: Scope) -> None:
        self.block(s.body, Scope(scope))

    def stmt_When(self, s: A.When, scope: Scope) -> None:
        self.uncertain += 1
        for br in s.branches:
            v = self.scalar(br.pred, scope)
            if v.type in ("int", "float"):
                what = "an integer" if v.type == "int" else "a float"
                text = self.text(br.pred)
                self.error(
                    br.pred.span,
                    "not-bool",
                    f"`when` needs a condition; `{text}` is {what}",
                    f"compare it: `{text} > 0`",
                )
            self.block(br.body, Scope(scope))
        if s.otherwise is not None:
            self.block(s.otherwise, Scope(scope))
        self.uncertain -= 1

    def stmt_ForLoop(self, s: A.ForLoop, scope: Scope) -> None:
        pending = Scope(scope)
        for v in s.vars:
            pending.names[v.id] = Pending(v.id)
        vals = [self.loop_axis(ax, pending, s.kind, s.spelling) for ax in s.axes]
        body = Scope(scope)
        fresh: list[str] = []
        seen: set[str] = set()
        maybe_empty = False
        for v, val in zip(s.vars, vals):
            if v.id in seen:
                self.error(
                    v.span,
                    "duplicate-var",
                    f"loop variable `{v.id}` appears twice",
                    "give each axis its own variable",
                )
                continue
            seen.add(v.id)
            name = self.fresh(v.id)
            fresh.append(name)
            var = sym.var(name)
            extent = val.extent if val is not None else None
            if s.kind == "sel":
                # decision: a `P.sel` variable is `indices[k]`, any value the index data holds, so views
                # it indexes get run-time checks on both sides; `e.pos` is non-negative
                self.ranges[name] = UNKNOWN
                self.extents.pop(name, None)
                pos = self.opaque(f"{name}.pos", "u64")
                body.names[v.id] = LoopVar(v.id, var, "sel", None, pos)
                maybe_empty = True
            else:
                self.bind_range(name, extent)
                ref = val.ref if val is not None and val.kind in ("dense", "densedyn") else None
                body.names[v.id] = LoopVar(v.id, var, s.kind, ref)
                if extent is None or self.decide(extent, ">=", sym.const(1)) is not True:
                    maybe_empty = True
            self.summary.loop_names.add(v.id)
        if maybe_empty:
            self.uncertain += 1
        self.block(s.body, body)
        if maybe_empty:
            self.uncertain -= 1
        for name in fresh:
            self.release(name)

    def stmt_CallStmt(
        self, s: A.CallStmt, scope: Scope, send: Optional[ChannelInfo] = None, in_send: bool = False
    ) -> None:
        name = s.callee.id
        b = scope.lookup(name)
        if b is not None:
            self.error(
                s.callee.span,
                "not-callable",
                f"`{name}` is {_describe(b)}, not a kernel or workload",
            )
            self.check_coords(s, scope)
            return
        if name in self.env.kernel_sigs:
            self.kernel_call(s, scope, self.env.kernel_sigs[name], send, in_send)
            return
        if name in self.env.workloads:
            if in_send:
                self.error(
                    s.callee.span,
                    "send-workload",
                    f"`send` takes a kernel call; `{name}` is a workload",
                    "send from inside the workload instead",
                )
                return
            self.inline_call(s, scope)
            return
        kind = self.env.kind_of(name)
        if kind is None:
            self.error(
                s.callee.span,
                "unknown-name",
                f"unknown kernel or workload `{name}`",
                did_you_mean(name, list(self.env.kernels) + list(self.env.workloads)),
            )
        else:
            self.error(
                s.callee.span, "not-callable", f"`{name}` is {_an(kind)}, not a kernel or workload"
            )
        self.check_coords(s, scope)

    def check_coords(self, s: A.CallStmt, scope: Scope) -> None:
        for c in s.coords or ():
            self.int_expr(c, scope, "a task coordinate")

    # ---- CSP
    def stmt_Pipe(self, s: A.Pipe, scope: Scope) -> None:
        names: dict[str, A.Process] = {}
        procs: list[tuple[A.Process, list[_Op]]] = []
        for st in s.body:
            if not isinstance(st, A.Process):
                self.error(
                    st.span,
                    "pipe-body",
                    "a `pipe` contains only `process` blocks",
                    "wrap the statement in `process NAME { ... }`",
                )
                self.stmt(st, scope)
                continue
            if st.name.id in names:
                self.error(
                    st.name.span,
                    "duplicate-process",
                    f"process `{st.name.id}` is declared twice in this pipe",
                    "give each process its own name",
                    notes=[Note(names[st.name.id].name.span, "first declared here")],
                )
            names.setdefault(st.name.id, st)
            procs.append((st, self.process(st, scope)))
        self.deadlocks(procs)

    def stmt_Process(self, s: A.Process, scope: Scope) -> None:
        # decision: `process` stands only directly inside `pipe { }` (a pipe may nest inside a process)
        self.error(
            s.span,
            "process-outside-pipe",
            "`process` is only allowed directly inside `pipe { }`",
            "write `pipe { process NAME { ... } }`",
        )
        self.process(s, scope)

    def process(self, s: A.Process, scope: Scope) -> list[_Op]:
        n: Optional[int] = None
        var: Optional[sym.Expr] = None
        if s.replicas is not None:
            n = self.compile_int(s.replicas, scope, "a replica count")
            if n is not None and n < 1:
                self.error(
                    s.replicas.span,
                    "bad-replicas",
                    f"a process needs at least one replica, found {n}",
                )
                n = None
            vname = self.fresh(f"{s.name.id}.id")
            self.release(vname)
            var = sym.var(vname)
            self.ranges[vname] = sym.Interval(0, n - 1) if n is not None else sym.NONNEG
        inner = Scope(scope)
        inner.names[s.name.id] = ProcessName(s.name.id, n if s.replicas is not None else None, var)
        saved, saved_unc = self.proc_ops, self.uncertain
        self.proc_ops, self.uncertain = [], 0
        self.block(s.body, inner)
        ops = self.proc_ops
        self.proc_ops, self.uncertain = saved, saved_unc
        if saved is not None:
            # decision: a nested pipe's processes run beside the enclosing process, so their sends
            # and consumes count for it (pairing) but never as ordered, certain steps of it
            saved.extend(_Op(op.kind, op.channel, op.span, False) for op in ops)
        return ops

    def deadlocks(self, procs: list[tuple[A.Process, list[_Op]]]) -> None:
        """Cycles of processes that each send on a rendezvous channel before consuming the one
        the previous process of the cycle sends on (a process alone: before consuming the
        channel it sends on).

        decision: these cycles are decided at compile time over sends and consumes reached on
        every run (not under `when`, inside a consume body, or in a loop that may be empty) in
        the processes' own bodies, for channels consumed by one process; anything else is left
        to the run-time deadlock report.
        """
        consumers: dict[str, set[int]] = {}
        for i, (_, ops) in enumerate(procs):
            for op in ops:
                if op.kind == "consume":
                    consumers.setdefault(op.channel.name, set()).add(i)

        def first(ops: list[_Op], kind: str, ch: str) -> Optional[tuple[int, _Op]]:
            for k, op in enumerate(ops):
                if op.kind == kind and op.channel.name == ch:
                    return (k, op) if op.certain else None
            return None

        rendezvous = sorted(
            {op.channel.name for _, ops in procs for op in ops if op.channel.depth == 0}
        )
        # a state (i, c): process i is stuck at its first send on rendezvous channel c, whose
        # only consumer is process j; j waits for c only after its own stuck send (j, c2)
        states: list[tuple[int, str]] = []
        sole: dict[str, int] = {}
        for c in rendezvous:
            if len(consumers.get(c, ())) == 1:
                sole[c] = next(iter(consumers[c]))
        for i, (_, ops) in enumerate(procs):
            for c in rendezvous:
                if c in sole and first(ops, "send", c):
                    states.append((i, c))
        index = {st: k for k, st in enumerate(states)}

        def successors(st: tuple[int, str]) -> list[tuple[int, str]]:
            _, c = st
            j = sole[c]
            ops_j = procs[j][1]
            consume = first(ops_j, "consume", c)
            if consume is None:
                return []
            out = []
            for c2 in rendezvous:
                nxt = (j, c2)
                if nxt in index:
                    send = first(ops_j, "send", c2)
                    if send and send[0] < consume[0]:
                        out.append(nxt)
            return out

        used: set[tuple[int, str]] = set()
        for start in states:
            if start in used:
                continue
            cycle = self._cycle(start, successors, index, used)
            if cycle is None:
                continue
            used.update(cycle)
            self._report_deadlock(cycle, procs, first)

    @staticmethod
    def _cycle(start, successors, index, used) -> Optional[list]:
        """A cycle from `start` back to it through states numbered after it, not yet reported."""
        path = [start]
        seen = {start}

        def dfs(st) -> bool:
            for nxt in successors(st):
                if nxt == start:
                    return True
                if nxt in seen or nxt in used or index[nxt] < index[start]:
                    continue
                seen.add(nxt)
                path.append(nxt)
                if dfs(nxt):
                    return True
                path.pop()
            return False

        return path if dfs(start) else None

    def _report_deadlock(self, cycle, procs, first) -> None:
        names = [procs[i][0].name.id for i, _ in cycle]
        sent = [c for _, c in cycle]
        consumed = [sent[k - 1] for k in range(len(cycle))]
        spans = [first(procs[i][1], "send", c)[1].span for i, c in cycle]
        if len(cycle) == 1:
            (a,), (c,) = names, sent
            self.error(
                spans[0],
                "deadlock",
                f"deadlock: process `{a}` sends on `{c}` before it consumes `{c}`, but `{c}` is a "
                "rendezvous (depth 0): the send waits for a consumer",
                f"give `{c}` a depth of 1 or more, or consume it in another process",
            )
            return
        if len(cycle) == 2:
            a, b = names
            c1, c2 = sent
            message = (
                f"deadlock: process `{a}` sends on `{c1}` before it consumes `{c2}`, and "
                f"process `{b}` sends on `{c2}` before it consumes `{c1}`; both channels are "
                "rendezvous (depth 0)"
            )
        else:
            clauses = [f"process `{n}` sends on `{c}` before it consumes `{d}`"
                       for n, c, d in zip(names, sent, consumed)]
            message = (
                "deadlock: " + ", ".join(clauses[:-1]) + ", and " + clauses[-1]
                + f"; all {len(cycle)} channels are rendezvous (depth 0)"
            )
        self.error(
            spans[0],
            "deadlock",
            message,
            "give one of the channels a depth of 1 or more, or consume before sending "
            "in one of the processes",
            notes=[Note(sp, f"process `{n}` sends on `{c}` here")
                   for sp, n, c in zip(spans[1:], names[1:], sent[1:])],
        )

    def channel(self, n: A.Name, scope: Scope, what: str) -> Optional[ChannelInfo]:
        b = scope.lookup(n.id)
        if b is not None:
            self.error(n.span, "not-channel", f"`{n.id}` is {_describe(b)}, not a channel")
            return None
        if n.id in self.env.channels:
            return self.env.channels[n.id]
        kind = self.env.kind_of(n.id)
        if kind is None:
            self.error(
                n.span,
                "unknown-name",
                f"unknown channel `{n.id}`",
                did_you_mean(n.id, self.env.channels),
            )
        elif kind not in ("channel", "event"):
            self.error(
                n.span,
                "not-channel",
                f"`{n.id}` is {_an(kind)}, not a channel",
                f"`{what}` takes a channel declared with `channel NAME: Tile[M, N, DT], depth = D`",
            )
        return None

    def event(self, n: A.Name, scope: Scope, what: str) -> Optional[ChannelInfo]:
        b = scope.lookup(n.id)
        if b is not None:
            self.error(n.span, "not-event", f"`{n.id}` is {_describe(b)}, not an event")
            return None
        info = self.env.channels.get(n.id)
        if info is not None and info.is_event:
            return info
        kind = self.env.kind_of(n.id)
        if kind is None:
            self.error(
                n.span,
                "unknown-name",
                f"unknown event `{n.id}`",
                did_you_mean(n.id, [c for c, i in self.env.channels.items() if i.is_event]),
            )
        elif info is None and kind in ("channel", "event"):
            pass  # declaration already reported
        else:
            self.error(
                n.span,
                "not-event",
                f"`{what}` takes an event, but `{n.id}` is {_an(kind)}",
                f"declare one with `event {n.id}_done`",
            )
        return None

    def stmt_Send(self, s: A.Send, scope: Scope) -> None:
        # decision: an `event` is a token channel of depth 0 (language.md 3 and 7), so `send` and
        # `consume` accept it; `record`/`synchronize` take only events
        ch = self.channel(s.channel, scope, "send")
        if ch is not None:
            self.summary.sends.setdefault(ch.name, []).append(s.channel.span)
            if self.proc_ops is not None:
                self.proc_ops.append(_Op("send", ch, s.channel.span, self.uncertain == 0))
        self.stmt_CallStmt(s.call, scope, send=ch, in_send=True)

    def stmt_Consume(self, s: A.Consume, scope: Scope) -> None:
        ch = self.channel(s.channel, scope, "consume")
        if ch is not None:
            self.summary.consumes.setdefault(ch.name, []).append(s.channel.span)
            if self.proc_ops is not None:
                self.proc_ops.append(_Op("consume", ch, s.channel.span, self.uncertain == 0))
        name = self.fresh(f"{s.var.id}.index")
        self.ranges[name] = sym.NONNEG
        body = Scope(scope)
        body.names[s.var.id] = Item(s.var.id, ch, sym.var(name))
        self.summary.loop_names.add(s.var.id)
        self.uncertain += 1
        self.block(s.body, body)
        self.uncertain -= 1
        self.release(name)

    def stmt_Record(self, s: A.Record, scope: Scope) -> None:
        if self.event(s.event, scope, "record") is not None:
            self.recorded.add(s.event.id)
            self.summary.records.add(s.event.id)

    def stmt_Synchronize(self, s: A.Synchronize, scope: Scope) -> None:
        ev = self.event(s.event, scope, "synchronize")
        if ev is not None and ev.name not in self.recorded:
            # decision: "earlier" is source order within the workload, counting the bodies of workloads inlined before
            self.error(
                s.event.span,
                "synchronize-without-record",
                f"`synchronize({ev.name})` has no earlier `record({ev.name})` in this workload",
                f"write `record({ev.name})` right after the statement whose tasks to wait for",
            )

    # ---- slots
    def slot_index(self, e: A.Expr, scope: Scope) -> Optional[int]:
        k = self.compile_int(e, scope, "a slot number")
        if k is not None and not 0 <= k < NUM_SLOTS:
            self.error(
                e.span,
                "bad-slot",
                f"slot {k} does not exist; slots are numbered 0 to {NUM_SLOTS - 1}",
            )
            return None
        return k

    def stmt_SlotSet(self, s: A.SlotSet, scope: Scope) -> None:
        self.slot_index(s.slot, scope)
        self.int_expr(s.value, scope, "a slot value")

    def stmt_SlotLoad(self, s: A.SlotLoad, scope: Scope) -> None:
        self.slot_index(s.slot, scope)
        src = s.source
        if not (isinstance(src, A.Index) and isinstance(src.value, A.Name)):
            self.error(
                src.span,
                "bad-slot-load",
                "`slot_load` reads one element of an integer tensor",
                "write `slot_load(k, T[i, j])`",
            )
            return
        v = self.element(src, scope)
        if v.type == "bool":
            self.error(
                src.span,
                "bad-slot-load",
                f"`slot_load` reads an integer tensor; `{src.value.id}` is bool",
            )

    # ---- axes and loops
    def axis(self, e: A.Expr, scope: Scope) -> Optional[AxisVal]:
        """What an axis expression denotes (no usage rules); None after an error."""
        if isinstance(e, A.DenseAxis):
            n = self.compile_int(e.extent, scope, "a `Dense` extent")
            if n is None:
                return None
            if n < 0:
                self.error(e.extent.span, "negative-extent", f"axis extent is negative ({n})")
                return None
            return AxisVal("dense", self.text(e), sym.const(n), static=True)
        if isinstance(e, A.DenseDynAxis):
            v = self.int_expr(e.extent, scope, "an axis extent")
            return None if v.type == "error" else AxisVal("densedyn", self.text(e), v.expr)
        if isinstance(e, (A.RaggedAxis, A.SparseAxis)):
            kind = "Ragged" if isinstance(e, A.RaggedAxis) else "Sparse"
            # decision: ragged and sparse axes are declared at module level (`axis tok = Ragged(...)`), never inline
            self.error(
                e.span,
                "inline-axis",
                f"a `{kind}` axis must be declared with `axis NAME = {kind}(...)`",
                "declare it at module level and use its name here",
            )
            return None
        if isinstance(e, A.Name):
            named = self.named_axis(e.id, scope)
            if named is not None:
                return named
            b = scope.lookup(e.id)
            if isinstance(b, Pending):
                self.same_loop(e)
                return None
            if b is None and self.env.kind_of(e.id) == "axis":
                return None  # a module axis whose declaration is wrong (reported there)
        if isinstance(e, A.Index) and isinstance(e.value, A.Name):
            base = self.named_axis(e.value.id, scope)
            if base is not None:
                return self.inner_axis(base, e, scope)
            if scope.lookup(e.value.id) is None and self.env.kind_of(e.value.id) == "axis":
                return None
        v = self.int_expr(
            e,
            scope,
            "an axis (a named axis, `Dense[N]`, `DenseDyn(expr)` or an integer expression)",
        )
        return None if v.type == "error" else AxisVal("densedyn", self.text(e), v.expr)

    def named_axis(self, name: str, scope: Scope) -> Optional[AxisVal]:
        b = scope.lookup(name)
        if isinstance(b, AxisVal):
            return b
        if b is not None or self.env.kind_of(name) != "axis":
            return None
        info = self.env.axes.get(name)
        if info is None:
            return None  # the declaration is wrong and was reported
        canon = self.canon(name)
        outer = ("axis", self.canon(info.outer)) if info.outer else None
        return AxisVal(
            info.kind, name, info.extent, ("axis", canon), outer, info, static=info.kind == "dense"
        )

    def same_loop(self, n: A.Name) -> None:
        self.error(
            n.span,
            "same-loop-var",
            f"`{n.id}` is a variable of this same loop",
            f"nest the loops: `for {n.id} in P(...) {{ for ... in P(...[{n.id}]) {{ ... }} }}`",
        )

    def inner_axis(self, base: AxisVal, e: A.Index, scope: Scope) -> Optional[AxisVal]:
        """`ragged[b]` / `sparse[b]`: the inner axis at outer index `b`."""
        if base.kind not in ("ragged", "sparse"):
            self.error(
                e.span,
                "bad-axis-index",
                f"`{base.name}` is a {base.kind} axis; only ragged and sparse axes are indexed",
                f"iterate it directly: `P({base.name})`",
            )
            return None
        if len(e.items) != 1 or isinstance(e.items[0], A.Slice):
            self.error(
                e.span,
                "bad-axis-index",
                f"`{base.name}[...]` takes one outer index",
                f"write `{base.name}[b]` where `b` iterates its outer axis",
            )
            return None
        idx = e.items[0]
        outer = f" `{base.outer[1]}`" if base.outer else ""
        b = scope.lookup(idx.id) if isinstance(idx, A.Name) else None
        if isinstance(b, Pending):
            # decision: the axes of one `P(...)` are read in the enclosing scope; `P(batch, tok[b])` must nest
            self.same_loop(idx)
            return None
        if not isinstance(b, LoopVar) or b.kind not in ("grid", "seq", "outer_index"):
            self.error(
                idx.span,
                "bad-outer-index",
                f"the index of `{base.name}` must be a loop variable over its outer axis{outer}",
                f"write `for b in P({base.outer[1] if base.outer else 'outer'}) {{ ... {base.name}[b] ... }}`",
            )
            return None
        if not self.check_need(Need(base.ref, b.axis_ref, e.span, self.text(e)), base, idx):
            return None
        if base.kind == "sparse":
            return AxisVal("selinner", self.text(e), None, None, info=base.info)
        return AxisVal("inner", self.text(e), self.ragged_extent(base, b), None, info=base.info)

    def check_need(self, need: Need, base: AxisVal, idx: A.Expr) -> bool:
        """Inside a body: decide `ragged[i]` now when both axes are module axes, else keep it."""
        kind = base.kind
        if need.index is None:
            outer = f"`{base.outer[1]}`" if base.outer else "its outer axis"
            self.error(
                idx.span,
                "bad-outer-index",
                f"{kind} axis `{base.name}` is only defined at an index of its outer axis"
                f"{' ' + outer if base.outer else ''}; `{self.text(idx)}` does not iterate {outer}",
            )
            return False
        if need.ragged and need.ragged[0] == "axis" and need.index[0] == "axis":
            o = base.outer[1] if base.outer else None
            if o is not None and need.index[1] != o:
                self.error(
                    idx.span,
                    "bad-outer-index",
                    f"{kind} axis `{base.name}` is only defined at an index of its outer axis `{o}`; "
                    f"`{self.text(idx)}` iterates `{need.index[1]}`",
                    f"index it with a variable of a loop over `{o}`",
                )
                return False
            return True
        # decision: when a workload parameter is involved, `ragged[i]` is checked at each call site
        # (inlined call or schedule) once both axes are module axes
        self.summary.needs.append(need)
        return True

    def ragged_extent(self, base: AxisVal, b: LoopVar) -> Optional[sym.Expr]:
        info = base.info
        at = sym.to_str(b.var)
        if info is not None and info.lengths_tensor is not None:
            t = self.env.tensors[info.lengths_tensor]
            return self.opaque(f"{t.name}[{at}]", t.dtype)
        if info is not None and info.lengths_expr is not None:
            scope = Scope()
            scope.names["_"] = LoopVar("_", b.var, "outer_index")
            saved, self.diags = self.diags, Diagnostics()  # reported once, at the declaration
            try:
                v = self.int_expr(info.lengths_expr, scope, "a ragged length")
            finally:
                self.diags = saved
            return v.expr if v.type == "int" else None
        return self.opaque(f"len({base.name}[{at}])", "i64")

    def loop_axis(self, e: A.Expr, scope: Scope, kind: str, spelling: str) -> Optional[AxisVal]:
        v = self.axis(e, scope)
        if v is None:
            return None
        if kind == "sel":
            if v.kind != "selinner":
                if v.kind == "sparse":
                    self.error(
                        e.span,
                        "bad-sel",
                        "`P.sel` needs the sparse axis at an outer index",
                        f"write `P.sel({v.name}[b])` inside a loop over its outer axis",
                    )
                else:
                    self.error(
                        e.span,
                        "bad-sel",
                        f"`P.sel` iterates the selected coordinates of a sparse axis; "
                        f"`{v.name}` is not sparse",
                        f"use `P({v.name})` or `P.seq({v.name})`",
                    )
                return None
            return v
        if v.kind == "ragged":
            outer = f" `{v.outer[1]}`" if v.outer else ""
            self.error(
                e.span,
                "unindexed-ragged",
                f"ragged axis `{v.name}` is only defined at an index of its outer axis{outer}",
                f"write `{spelling}({v.name}[b])` inside a loop `for b in P({v.outer[1] if v.outer else '...'})`",
            )
            return None
        if v.kind in ("sparse", "selinner"):
            self.error(
                e.span,
                "sparse-grid",
                f"sparse axis `{v.name}` is iterated with `P.sel`",
                f"write `for e in P.sel({v.name if v.kind == 'selinner' else v.name + '[b]'})`",
            )
            return None
        return v

    # ---- inlined workloads and their arguments
    def inline_call(self, s: A.CallStmt, scope: Scope) -> None:
        name = s.callee.id
        if s.coords is not None:
            self.error(
                s.callee.span,
                "workload-coords",
                f"`{name}` is a workload; workload calls have no coordinates",
                f"write `{name}(...)`",
            )
        decl = self.env.workloads[name]
        if name in self.mod.in_progress:
            i = self.mod.in_progress.index(name)
            chain = " -> ".join(f"`{n}`" for n in self.mod.in_progress[i:] + [name])
            self.error(
                s.span,
                "inline-cycle",
                f"workload `{name}` inlines itself ({chain})",
                "a workload cannot expand into itself; use a loop instead",
            )
            self.summary.inlines.append(name)
            return
        callee = self.mod.summary(name)
        mapping = self.bind_workload(decl, s.args, s.kwargs, s.span, scope)
        self.summary.inlines.append(name)
        if callee is None:
            return
        for part in self.mod.closure(name):
            self.recorded |= part.records
        if mapping is not None:
            self.apply_needs(name, callee.needs, mapping)

    def bind_workload(
        self,
        decl: A.WorkloadDecl,
        args: tuple[A.Expr, ...],
        kwargs: tuple[A.Keyword, ...],
        span: A.Span,
        scope: Scope,
    ) -> Optional[dict[str, tuple[Ref, A.Span]]]:
        """Bind a workload's axis parameters (positional or by name). Returns param -> (ref, span)."""
        params = decl.params
        wname = decl.name.id
        bound: dict[str, tuple[A.Expr, A.Span]] = {}
        ok = True
        for i, a in enumerate(args):
            if i >= len(params):
                self.error(
                    a.span,
                    "too-many-args",
                    f"`{wname}` takes {len(params)} "
                    f"ax{'is' if len(params) == 1 else 'es'}, but {len(args)} are given",
                )
                ok = False
                continue
            bound[params[i].name.id] = (a, a.span)
        names = [p.name.id for p in params]
        for kw in kwargs:
            if kw.name not in names:
                self.error(
                    kw.span,
                    "unknown-param",
                    f"`{wname}` has no parameter `{kw.name}`",
                    did_you_mean(kw.name, names),
                )
                ok = False
            elif kw.name in bound:
                self.error(kw.span, "duplicate-arg", f"parameter `{kw.name}` is bound twice")
                ok = False
            else:
                bound[kw.name] = (kw.value, kw.span)
        missing = [n for n in names if n not in bound]
        if missing and ok:  # after a misspelt keyword, the missing parameter is the same mistake
            listed = ", ".join(f"`{m}`" for m in missing)
            self.error(
                span,
                "missing-args",
                f"`{wname}` needs an axis for {listed}",
                f"pass one axis per parameter: `{wname}({', '.join(names)})`",
            )
            ok = False
        out: dict[str, tuple[Ref, A.Span]] = {}
        for p in params:
            if p.name.id not in bound:
                continue
            e, espan = bound[p.name.id]
            v = self.axis(e, scope)
            if v is None:
                ok = False
                continue
            if not self.axis_fits(v, p, espan, e):
                ok = False
                continue
            out[p.name.id] = (v.ref, espan)
        return out if ok else None

    def axis_fits(self, v: AxisVal, p: A.WorkloadParam, span: A.Span, e: A.Expr) -> bool:
        want = p.kind
        shown = {
            "Dense": "Dense" + (f"[{self.text(p.extent)}]" if p.extent is not None else ""),
            "any": "an axis",
        }.get(want, want)
        have = {
            "dense": "a Dense",
            "densedyn": "a DenseDyn",
            "ragged": "a Ragged",
            "sparse": "a Sparse",
            "inner": "a ragged inner",
            "selinner": "a sparse inner",
        }[v.kind]
        text = self.text(e)
        if v.kind == "selinner":
            self.error(
                span,
                "bad-axis-arg",
                f"`{text}` (the selection of a sparse axis) can only be iterated with `P.sel`",
                "pass the sparse axis itself to a `Sparse` parameter",
            )
            return False
        if want in ("Ragged", "Sparse"):
            if v.kind != want.lower():
                self.error(
                    span, "bad-axis-arg", f"`{text}` is {have} axis, but `{p.name.id}` is {shown}"
                )
                return False
            return True
        if v.kind in ("ragged", "sparse"):
            self.error(
                span,
                "bad-axis-arg",
                f"`{text}` is {have} axis, but `{p.name.id}` is {shown}",
                "declare the parameter as `Ragged`"
                if v.kind == "ragged"
                else "declare the parameter as `Sparse`",
            )
            return False
        if want == "Dense":
            if p.extent is None:
                if v.extent is None or sym.const_value(v.extent) is None:
                    self.error(
                        span,
                        "bad-axis-arg",
                        f"`{p.name.id}` is `Dense` and needs a compile-time extent, "
                        f"but `{text}` has extent {_show(v.extent)}",
                    )
                    return False
                return True
            n = self.compile_int(p.extent, Scope(), "a `Dense` extent", report=False)
            if n is None or v.extent is None:
                return True
            r = self.decide(v.extent, "==", sym.const(n))
            if r is not True:
                # decision: a `Dense[N]` parameter needs an argument whose extent is provably N
                self.error(
                    span,
                    "bad-axis-arg",
                    f"`{p.name.id}` is {shown}, but `{text}` has extent {_show(v.extent)}",
                )
                return False
        return True

    def apply_needs(
        self, wname: str, needs: list[Need], mapping: dict[str, tuple[Ref, A.Span]]
    ) -> None:
        """Check the callee's `ragged[i]` uses with the caller's axes."""
        for need in needs:

            def sub(ref: Ref) -> tuple[bool, Ref, Optional[A.Span]]:
                if ref is not None and ref[0] == "param":
                    if ref[1] not in mapping:
                        return False, None, None
                    r, sp = mapping[ref[1]]
                    return True, r, sp
                return True, ref, None

            ok1, ragged, rspan = sub(need.ragged)
            ok2, index, ispan = sub(need.index)
            if not (ok1 and ok2) or ragged is None:
                continue
            blame = ispan or rspan
            if blame is None:  # pragma: no cover - needs are only kept when a parameter is involved
                continue
            rname = ragged[1]
            if ragged[0] == "axis":
                info = self.env.axes.get(rname)
                outer = self.canon(info.outer) if info is not None and info.outer else None
                kind = info.kind if info is not None else "ragged"
                if index is None:
                    self.error(
                        blame,
                        "bad-outer-index",
                        f"`{wname}` indexes {kind} axis `{rname}` with a loop over this axis, but `{rname}` "
                        f"is only defined at an index of its outer axis `{outer}`",
                        notes=[Note(need.span, "indexed here")],
                    )
                    continue
                if index[0] == "axis":
                    if outer is not None and index[1] != outer:
                        self.error(
                            blame,
                            "bad-outer-index",
                            f"`{wname}` indexes {kind} axis `{rname}` with a loop over `{index[1]}`, but "
                            f"`{rname}` is only defined at an index of its outer axis `{outer}`",
                            notes=[Note(need.span, "indexed here")],
                        )
                    continue
            elif index is None:
                self.error(
                    blame,
                    "bad-outer-index",
                    f"`{wname}` indexes a ragged axis with a loop over this axis, which is not its outer axis",
                    notes=[Note(need.span, "indexed here")],
                )
                continue
            # a parameter of the caller is still involved: the caller's call sites decide
            self.summary.needs.append(Need(ragged, index, need.span, need.text))

    # ---- kernel calls
    def kernel_call(
        self,
        s: A.CallStmt,
        scope: Scope,
        sig: KernelSig,
        send: Optional[ChannelInfo],
        in_send: bool,
    ) -> None:
        self.summary.kernel_calls.append(s)
        self.check_coords(s, scope)
        kname = sig.name
        pnames = [p.name for p in sig.params]
        bound: dict[str, Optional[A.Keyword]] = {}
        for i, a in enumerate(s.args):
            pname = pnames[i] if i < len(pnames) else None
            self.error(
                a.span,
                "positional-arg",
                "kernel arguments are passed by name",
                f"write `{pname} = {self.text(a)}`" if pname else "write `name = value`",
            )
            if pname is not None:
                bound.setdefault(pname, None)
        for kw in s.kwargs:
            if kw.name not in pnames:
                guess = _closest(kw.name, [n for n in pnames if n not in bound])
                self.error(
                    kw.span,
                    "unknown-param",
                    f"kernel `{kname}` has no parameter `{kw.name}`",
                    did_you_mean(kw.name, [guess] if guess else pnames),
                )
                if guess is not None:  # a misspelling: do not also report that parameter as missing
                    bound.setdefault(guess, None)
            elif bound.get(kw.name) is not None or kw.name in bound:
                prev = bound.get(kw.name)
                self.error(
                    kw.span,
                    "duplicate-arg",
                    f"parameter `{kw.name}` is bound twice",
                    notes=[Note(prev.span, "first bound here")] if prev is not None else (),
                )
            else:
                bound[kw.name] = kw
        missing = [p.name for p in sig.params if p.name not in bound and p.default is None]
        if missing:
            listed = ", ".join(f"`{m}`" for m in missing)
            self.error(
                s.span,
                "missing-args",
                f"call to `{kname}` does not bind {'parameter' if len(missing) == 1 else 'parameters'} {listed}",
                "add " + ", ".join(f"`{m} = ...`" for m in missing),
            )
        # Constexpr values first: tile shapes depend on them
        cvals: dict[str, sym.Expr] = {}
        for p in sig.params:
            if p.kind != "constexpr":
                continue
            kw = bound.get(p.name)
            if kw is not None:
                n = self.compile_int(kw.value, scope, f"`{p.name}` (a Constexpr parameter)")
            elif p.default is not None and p.name not in bound:
                n = self.compile_int(p.default, Scope(), "a Constexpr default", report=False)
            else:
                n = None
            if n is not None:
                cvals[p.name] = sym.const(n)
        slots_written: list[A.Keyword] = []
        for p in sig.params:
            kw = bound.get(p.name)
            if kw is None:
                continue
            if p.kind == "tile":
                self.tile_arg(
                    kw,
                    p,
                    cvals,
                    scope,
                    send,
                    in_send,
                    slots_written,
                    self.sound_param(kname, p.name),
                )
            elif p.kind == "scalar":
                self.scalar_arg(kw, p, scope)
        # decision: a token channel (or event) may not appear in the call at all; a data channel's call must write it once
        if send is not None and send.elem is not None and not slots_written:
            outs = [
                p.name for p in sig.params if p.kind == "tile" and p.tile and p.tile.mode == "Out"
            ]
            self.error(
                s.span,
                "send-no-slot",
                f"the call in `send({send.name}, ...)` does not write `{send.name}`",
                f"pass the channel to an `Out` tile parameter: `{outs[0] if outs else 'out'} = {send.name}`",
            )

    def scalar_arg(self, kw: A.Keyword, p: ParamSig, scope: Scope) -> None:
        v = self.scalar(kw.value, scope)
        if v.type == "error":
            return
        text = self.text(kw.value)
        if p.dtype == "bool":
            if v.type != "bool":
                self.error(
                    kw.value.span,
                    "scalar-type",
                    f"`{p.name}` takes Scalar[bool], but `{text}` is {_a(v.type)}",
                    f"compare it: `{text} != 0`",
                )
        elif v.type == "bool":
            # decision: a condition is not a number; no implicit bool-to-number conversion in scalar arguments
            self.error(
                kw.value.span,
                "scalar-type",
                f"`{p.name}` takes Scalar[{p.dtype}], but `{text}` is a condition",
            )
        # decision: an integer expression may be passed to a float Scalar (converted exactly as NumPy would)
        elif v.type == "float" and p.dtype not in FLOAT_DTYPES:
            self.error(
                kw.value.span,
                "scalar-type",
                f"`{p.name}` takes Scalar[{p.dtype}], but `{text}` is a float",
                "integer scalars take integer expressions; no implicit float-to-integer conversion",
            )

    def tile_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        cvals: dict[str, sym.Expr],
        scope: Scope,
        send: Optional[ChannelInfo],
        in_send: bool,
        slots_written: list[A.Keyword],
        sound: bool = True,
    ) -> None:
        assert p.tile is not None
        rows = sym.substitute(p.tile.rows, cvals) if cvals else p.tile.rows
        cols = sym.substitute(p.tile.cols, cvals) if cvals else p.tile.cols
        want = f"{p.tile.mode}[Tile[{_show(rows)}, {_show(cols)}, {p.tile.dtype}]]"
        tile_text = f"Tile[{_show(rows)}, {_show(cols)}, {p.tile.dtype}]"
        v = kw.value
        kwtext = self.text(kw)
        base = v.value if isinstance(v, A.Index) else v
        if not isinstance(base, A.Name):
            self.error(
                kw.span,
                "not-a-tile",
                f"`{p.name}` takes a tile ({want}): pass a tensor or a view such as `X[i, j]`",
            )
            return
        b = scope.lookup(base.id)
        if b is not None:
            if isinstance(b, Item) and base is v:
                self.item_arg(kw, p, b, rows, cols, tile_text, sound)
                return
            if isinstance(b, Item):
                self.error(
                    kw.span,
                    "not-a-tile",
                    f"a consumed item is passed whole: write `{p.name} = {base.id}`",
                )
                return
            self.error(
                kw.span,
                "not-a-tile",
                f"`{base.id}` is {_describe(b)}, but `{p.name}` takes a tile ({want})",
                "pass a tensor or a view such as `X[i, j]`",
            )
            return
        name = base.id
        if name in self.env.channels and base is v:
            self.channel_arg(
                kw,
                p,
                self.env.channels[name],
                rows,
                cols,
                tile_text,
                send,
                in_send,
                slots_written,
                sound,
            )
            return
        if name not in self.env.tensors:
            kind = self.env.kind_of(name)
            if kind is None:
                self.error(
                    base.span,
                    "unknown-name",
                    f"unknown tensor `{name}`",
                    did_you_mean(
                        name, list(self.env.tensors) + list(self.env.channels) + scope.visible()
                    ),
                )
            elif kind == "tensor":
                pass  # the declaration is wrong and was reported
            else:
                self.error(
                    kw.span,
                    "not-a-tile",
                    f"`{name}` is {_an(kind)}, but `{p.name}` takes a tile ({want})",
                    "pass a tensor or a view such as `X[i, j]`",
                )
            return
        t = self.env.tensors[name]
        if t.kind == "input" and p.tile.mode != "In":
            self.error(
                kw.span,
                "read-only",
                f"`{name}` is an input and is read-only, but `{p.name}` is an "
                f"`{p.tile.mode}` parameter",
                f"declare `{name}` as `inout` to update it in place",
            )
        shape = self.view(v, t, scope, kw)
        if t.dtype != p.tile.dtype:
            # decision: no implicit casts between a tensor's dtype and a tile's dtype, in either direction
            self.error(
                kw.span,
                "dtype-mismatch",
                f"`{kwtext}` is a view of {t.dtype} tensor `{name}` but `{p.name}` takes "
                f"{tile_text}",
                f"declare `{name}` as {p.tile.dtype}, or convert with a kernel that uses `cast`",
            )
        if shape is None or not sound:
            return
        self.match_shape(shape, rows, cols, kw, kwtext, p, tile_text)

    def match_shape(
        self,
        shape: list[sym.Expr],
        rows: sym.Expr,
        cols: sym.Expr,
        kw: A.Keyword,
        kwtext: str,
        p: ParamSig,
        tile_text: str,
    ) -> None:
        dims = list(shape)
        while len(dims) < 2:
            dims.insert(0, sym.const(1))
        shown = f"[{', '.join(_show(d) for d in (shape if len(shape) >= 2 else dims))}]"
        # decision: extra leading view dimensions of provable extent 1 are squeezed (`X[b, t:t+1]` fits a 2-D tile)
        while len(dims) > 2 and self.decide(dims[0], "==", sym.const(1)) is True:
            dims.pop(0)
        message = f"`{kwtext}` is a {shown} view but `{p.name}` takes {tile_text}"
        if len(dims) > 2:
            # decision: a leading dimension not provably 1 (e.g. `T`) is a compile error, not a run-time check
            self.error(
                kw.span,
                "shape-mismatch",
                message,
                f"select {len(dims) - 2} more leading dimension{'s' if len(dims) > 3 else ''} with an index",
            )
            return
        pending: list[tuple[sym.Expr, sym.Expr, str]] = []
        for got, want, which in ((dims[0], rows, "rows"), (dims[1], cols, "columns")):
            if sym.free_vars(want):
                continue  # a Constexpr without a value: reported at the call
            r = self.decide(got, "==", want)
            if r is False:
                self.error(kw.span, "shape-mismatch", message)
                return
            if r is None:
                pending.append((got, want, which))
        for got, want, which in pending:
            self.env.checks.append(
                RuntimeCheck(
                    sym.Check(
                        got,
                        "==",
                        want,
                        f"`{kwtext}` must have {_show(want)} {which} to fit {tile_text}",
                    ),
                    kw.span,
                )
            )

    def view(self, v: A.Expr, t, scope: Scope, kw: A.Node) -> Optional[list[sym.Expr]]:
        """The extents of `T` or `T[items]` after selection; checks each index and slice."""
        if isinstance(v, A.Name):
            return list(t.dims)
        assert isinstance(v, A.Index)
        if len(v.items) > len(t.dims):
            self.error(
                v.span,
                "too-many-indices",
                f"`{t.name}` has {len(t.dims)} "
                f"dimension{'s' if len(t.dims) != 1 else ''}, but {len(v.items)} indices are given",
            )
            return None
        shape: list[sym.Expr] = []
        ok = True
        kwtext = self.text(kw)
        if not self.sound_tensor(t.name):
            for item in v.items:  # names in the indices are still checked
                for x in (item.start, item.stop) if isinstance(item, A.Slice) else (item,):
                    if x is not None:
                        self.int_expr(x, scope, "a tensor index")
            return None
        for axis, (item, dim) in enumerate(zip(v.items, t.dims)):
            if isinstance(item, A.Slice):
                start = (
                    self.int_expr(item.start, scope, "a slice bound")
                    if item.start is not None
                    else SVal("int", sym.const(0))
                )
                stop = (
                    self.int_expr(item.stop, scope, "a slice bound")
                    if item.stop is not None
                    else SVal("int", dim)
                )
                if start.type == "error" or stop.type == "error":
                    ok = False
                    continue
                if item.start is not None:
                    ok &= self.require(
                        start.expr,
                        ">=",
                        sym.const(0),
                        error_span=item.start.span,
                        error=f"slice start `{self.text(item.start)}` is negative; there is no "
                        "wrap-around",
                        check_span=kw.span,
                        reason=f"slice start `{self.text(item.start)}` in `{kwtext}` must not be negative",
                    )
                if item.stop is not None:
                    ok &= self.require(
                        stop.expr,
                        "<=",
                        dim,
                        error_span=item.stop.span,
                        error=f"slice end `{self.text(item.stop)}` is past the end of dimension {axis} "
                        f"of `{t.name}` (size {_show(dim)})",
                        check_span=kw.span,
                        reason=f"slice end `{self.text(item.stop)}` in `{kwtext}` must be at most "
                        f"{_show(dim)}",
                    )
                if item.start is not None or item.stop is not None:
                    ok &= self.require(
                        start.expr,
                        "<=",
                        stop.expr,
                        error_span=item.span,
                        error=f"slice `{self.text(item)}` has a negative length",
                        check_span=kw.span,
                        reason=f"slice `{self.text(item)}` in `{kwtext}` must not have a negative length",
                    )
                shape.append(sym.sub(stop.expr, start.expr))
            else:
                i = self.int_expr(item, scope, "a tensor index")
                if i.type == "error":
                    ok = False
                    continue
                ok &= self.index_in_range(i.expr, item, dim, axis, t.name, kw.span, kwtext)
        shape.extend(t.dims[len(v.items) :])
        return shape if ok else None

    def index_in_range(
        self,
        i: sym.Expr,
        item: A.Expr,
        dim: sym.Expr,
        axis: int,
        tname: str,
        check_span: A.Span,
        where: str,
    ) -> bool:
        text = self.text(item)
        ok = self.require(
            i,
            ">=",
            sym.const(0),
            error_span=item.span,
            error=f"index `{text}` is negative; there is no wrap-around",
            check_span=check_span,
            reason=f"index `{text}` in `{where}` must not be negative",
        )
        ok &= self.require(
            i,
            "<",
            dim,
            error_span=item.span,
            error=f"index `{text}` is out of range for dimension {axis} of `{tname}` "
            f"(size {_show(dim)})",
            check_span=check_span,
            reason=f"index `{text}` in `{where}` must be less than {_show(dim)}",
        )
        return ok

    def item_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        item: Item,
        rows: sym.Expr,
        cols: sym.Expr,
        tile_text: str,
        sound: bool,
    ) -> None:
        ch = item.channel
        if ch is None:
            return
        assert p.tile is not None
        if ch.elem is None:
            self.error(
                kw.span,
                "token-item",
                f"`{item.name}` is an item of token channel `{ch.name}`, which carries no data",
                f"use `{item.name}` as a coordinate or `{item.name}.index` instead",
            )
            return
        if p.tile.mode != "In":
            self.error(
                kw.span,
                "item-read-only",
                f"a consumed item is read-only, but `{p.name}` is an `{p.tile.mode}` parameter",
                "pass it to an `In` tile parameter",
            )
            return
        if not self.elem_fits(ch, rows, cols, p.tile.dtype, sound):
            self.error(
                kw.span,
                "item-mismatch",
                f"`{item.name}` is an item of `{ch.name}` "
                f"({_elem_text(ch)}) but `{p.name}` takes {tile_text}",
            )

    def elem_fits(
        self, ch: ChannelInfo, rows: sym.Expr, cols: sym.Expr, dtype: str, sound: bool
    ) -> bool:
        assert ch.elem is not None
        r, c, dt = ch.elem
        if dt != dtype:
            return False
        if not sound or not self.sound_channel(ch):
            return True  # a wrong dimension in a declaration, reported there
        for have, want in ((r, rows), (c, cols)):
            if not sym.free_vars(want) and self.decide(sym.const(have), "==", want) is False:
                return False
        return True

    def channel_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        ch: ChannelInfo,
        rows: sym.Expr,
        cols: sym.Expr,
        tile_text: str,
        send: Optional[ChannelInfo],
        in_send: bool,
        slots_written: list[A.Keyword],
        sound: bool,
    ) -> None:
        assert p.tile is not None
        if send is None or send.name != ch.name:
            if in_send and send is not None:
                msg = f"channel `{ch.name}` is passed inside `send({send.name}, ...)`"
            else:
                msg = f"channel `{ch.name}` can only be passed in a call inside `send({ch.name}, ...)`"
            self.error(
                kw.span,
                "channel-outside-send",
                msg,
                f"write `send({ch.name}, kernel[...](..., {p.name} = {ch.name}))`",
            )
            return
        if ch.elem is None:
            what = "event" if ch.is_event else "token channel"
            self.error(
                kw.span,
                "token-channel-arg",
                f"`{ch.name}` is a {what} and carries no data; do not pass it to the call",
                f"`send({ch.name}, ...)` only carries the completion of the call",
            )
            return
        slots_written.append(kw)
        # decision: only an `Out` parameter takes the slot (an `InOut` would read a slot nobody wrote)
        if p.tile.mode != "Out":
            self.error(
                kw.span,
                "channel-slot-mismatch",
                f"channel passed where no slot fits: `{ch.name}` is passed to "
                f"`{p.tile.mode}` parameter `{p.name}`",
                f"pass `{ch.name}` to an `Out` tile parameter; a `send` writes the next free slot",
            )
            return
        if len(slots_written) > 1:
            self.error(
                kw.span,
                "channel-twice",
                f"`{ch.name}` is passed to two `Out` parameters; a `send` writes one slot",
                notes=[Note(slots_written[0].span, "first passed here")],
            )
            return
        if not self.elem_fits(ch, rows, cols, p.tile.dtype, sound):
            self.error(
                kw.span,
                "channel-slot-mismatch",
                f"channel passed where no slot fits: `{ch.name}` carries "
                f"{_elem_text(ch)} but `{p.name}` takes {tile_text}",
            )

    # ---- scalar expressions
    def int_expr(self, e: A.Expr, scope: Scope, what: str) -> SVal:
        v = self.scalar(e, scope)
        if v.type in ("error", "int"):
            return v
        text = self.text(e)
        found = "a condition" if v.type == "bool" else "a float"
        self.error(e.span, "not-integer", f"{what} must be an integer, but `{text}` is {found}")
        return ERR

    def compile_int(self, e: A.Expr, scope: Scope, what: str, report: bool = True) -> Optional[int]:
        """A compile-time integer (literals and consts); None after an error."""
        saved = self.diags
        if not report:
            self.diags = Diagnostics()
        try:
            v = self.int_expr(e, scope, what)
            if v.type == "error":
                return None
            n = sym.const_value(v.expr)
            if n is None:
                self.error(
                    e.span,
                    "not-constant",
                    f"{what} must be a compile-time integer, but `{self.text(e)}` "
                    "is only known at run time",
                    "use literals and consts",
                )
            return n
        finally:
            self.diags = saved

    def scalar(self, e: A.Expr, scope: Scope) -> SVal:
        if isinstance(e, A.IntLit):
            return SVal("int", sym.const(e.value))
        if isinstance(e, A.FloatLit):
            return SVal("float", value=e.value)
        if isinstance(e, A.BoolLit):
            return SVal("bool")
        if isinstance(e, A.Name):
            return self.scalar_name(e, scope)
        if isinstance(e, A.Attr):
            return self.scalar_attr(e, scope)
        if isinstance(e, A.Index):
            return self.element(e, scope)
        if isinstance(e, A.Call):
            return self.scalar_call(e, scope)
        if isinstance(e, A.Unary):
            return self.scalar_unary(e, scope)
        if isinstance(e, A.Binary):
            return self.scalar_binary(e, scope)
        if isinstance(e, (A.DenseAxis, A.DenseDynAxis, A.RaggedAxis, A.SparseAxis)):
            self.error(e.span, "not-scalar", "an axis is not a scalar value")
            return ERR
        if isinstance(e, A.StrLit):
            self.error(e.span, "not-scalar", "a string is not a scalar value")
            return ERR
        self.error(e.span, "not-scalar", "expected a scalar expression")
        return ERR

    def scalar_name(self, n: A.Name, scope: Scope) -> SVal:
        b = scope.lookup(n.id)
        if isinstance(b, LoopVar):
            return SVal("int", b.var)
        if isinstance(b, Item):
            return SVal("int", b.var)  # `t` in a scalar expression means `t.index`
        if isinstance(b, Pending):
            self.same_loop(n)
            return ERR
        if isinstance(b, AxisVal):
            self.error(
                n.span,
                "not-scalar",
                f"`{n.id}` is an axis, not a scalar",
                f"iterate it: `for i in P({n.id}) {{ ... }}`",
            )
            return ERR
        if isinstance(b, ProcessName):
            self.error(
                n.span,
                "not-scalar",
                f"`{n.id}` is a process, not a scalar",
                f"`{n.id}.id` is its replica number" if b.replicas is not None else None,
            )
            return ERR
        env = self.env
        if n.id in env.consts:
            return SVal("int", sym.const(env.consts[n.id]))
        kind = env.kind_of(n.id)
        if kind == "sym":
            return SVal("int", sym.var(n.id))
        if kind == "const":
            return ERR  # its declaration is wrong and was reported
        if kind is None and self.key_of is not None:
            loops = sorted(v for v in scope.visible() if isinstance(scope.lookup(v), LoopVar))
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}` in a schedule key",
                did_you_mean(n.id, loops)
                or (
                    f"keys use the loop variables of `{self.key_of}`: "
                    + ", ".join(f"`{v}`" for v in loops)
                    if loops
                    else f"`{self.key_of}` has no loop variables"
                ),
            )
            return ERR
        if kind is None:
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}`",
                did_you_mean(n.id, list(env.names) + scope.visible()),
            )
            return ERR
        help = None
        if kind == "tensor" and n.id in env.tensors:
            dims = len(env.tensors[n.id].dims)
            help = (
                f"read one element with `{n.id}[{', '.join('ijkl'[k % 4] for k in range(dims))}]`"
            )
        self.error(n.span, "not-scalar", f"`{n.id}` is {_an(kind)}, not a scalar", help)
        return ERR

    def scalar_attr(self, e: A.Attr, scope: Scope) -> SVal:
        base = e.value
        b = scope.lookup(base.id) if isinstance(base, A.Name) else None
        text = self.text(e)
        if e.attr == "pos":
            if isinstance(b, LoopVar) and b.kind == "sel" and b.pos is not None:
                return SVal("int", b.pos)
            self.error(
                e.span, "bad-attr", f"`{text}`: `.pos` is only defined on a `P.sel` loop variable"
            )
            return ERR
        if e.attr == "index":
            if isinstance(b, Item):
                return SVal("int", b.var)
            self.error(
                e.span,
                "bad-attr",
                f"`{text}`: `.index` is only defined on the item of `consume(ch) as t`",
            )
            return ERR
        if e.attr == "id":
            if isinstance(b, ProcessName) and b.var is not None:
                return SVal("int", b.var)
            if isinstance(b, ProcessName):
                # decision: `NAME.id` needs `process NAME * N` (a process without replicas has no ids)
                self.error(
                    e.span,
                    "bad-attr",
                    f"`{text}`: process `{b.name}` has no replicas",
                    f"declare replicas with `process {b.name} * N`",
                )
                return ERR
            self.error(
                e.span,
                "bad-attr",
                f"`{text}`: `.id` is only defined inside `process NAME * N`, on NAME",
            )
            return ERR
        self.error(
            e.span,
            "bad-attr",
            f"unknown attribute `.{e.attr}`",
            "scalar attributes are `e.pos` (P.sel), `t.index` (consume) and `NAME.id` (process replicas)",
        )
        return ERR

    def element(self, e: A.Index, scope: Scope) -> SVal:
        """`T[i, j]`: one element of an integer (or bool) tensor.

        decision: element reads get the same range checks as views (compile error when provably out
        of range, else a run-time check blamed on the read)."""
        if not isinstance(e.value, A.Name):
            self.error(
                e.span, "not-scalar", "only tensor elements can be read in a scalar expression"
            )
            return ERR
        name = e.value.id
        b = scope.lookup(name)
        if b is not None or name not in self.env.tensors:
            if isinstance(b, AxisVal) or (b is None and self.env.kind_of(name) == "axis"):
                self.error(e.span, "not-scalar", f"`{self.text(e)}` is an axis, not a scalar")
                return ERR
            if b is not None:
                self.error(
                    e.value.span, "not-scalar", f"`{name}` is {_describe(b)}; it cannot be indexed"
                )
                return ERR
            kind = self.env.kind_of(name)
            if kind is None:
                self.error(
                    e.value.span,
                    "unknown-name",
                    f"unknown name `{name}`",
                    did_you_mean(name, list(self.env.names) + scope.visible()),
                )
            elif kind != "tensor":
                self.error(
                    e.value.span,
                    "not-scalar",
                    f"`{name}` is {_an(kind)}; only tensor elements can be read here",
                )
            return ERR
        t = self.env.tensors[name]
        if t.dtype in FLOAT_DTYPES:
            # decision: scalar expressions are integer index arithmetic; float data is read by kernels, never here
            self.error(
                e.span,
                "float-element",
                f"`{self.text(e)}` is an element of {t.dtype} tensor `{name}`; scalar "
                "expressions read only integer tensor elements",
                "read float data inside a kernel",
            )
            return ERR
        if len(e.items) != len(t.dims):
            self.error(
                e.span,
                "element-indices",
                f"`{name}` has {len(t.dims)} dimension"
                f"{'s' if len(t.dims) != 1 else ''}; reading an element needs exactly one index per dimension, "
                f"but {len(e.items)} {'is' if len(e.items) == 1 else 'are'} given",
            )
            return ERR
        idx: list[sym.Expr] = []
        ok = True
        for axis, (item, dim) in enumerate(zip(e.items, t.dims)):
            if isinstance(item, A.Slice):
                self.error(
                    item.span,
                    "element-slice",
                    "a slice selects many elements; a scalar expression reads one",
                    "index every dimension with an integer",
                )
                ok = False
                continue
            v = self.int_expr(item, scope, "a tensor index")
            if v.type == "error":
                ok = False
                continue
            if self.sound_tensor(name):
                ok &= self.index_in_range(v.expr, item, dim, axis, name, e.span, self.text(e))
            idx.append(v.expr)
        if not ok:
            return ERR
        if t.dtype == "bool":
            # decision: elements of bool tensors are conditions
            return SVal("bool")
        return SVal("int", self.opaque(f"{name}[{', '.join(sym.to_str(i) for i in idx)}]", t.dtype))

    def scalar_call(self, e: A.Call, scope: Scope) -> SVal:
        f = e.func.id
        if e.prefix:
            self.error(
                e.span,
                "not-scalar",
                f"`{e.prefix}.{f}` is a kernel primitive, not a scalar function",
            )
            return ERR
        if f in self.env.kernels or f in self.env.workloads:
            self.error(
                e.span,
                "not-scalar",
                "a task call is a statement, not a value",
                "call kernels on their own line",
            )
            return ERR
        if f not in SCALAR_FUNCS:
            self.error(
                e.func.span,
                "unknown-function",
                f"unknown scalar function `{f}`",
                did_you_mean(f, SCALAR_FUNCS)
                or "scalar functions are " + ", ".join(f"`{x}`" for x in SCALAR_FUNCS),
            )
            return ERR
        arity = {"slot": 1, "query": 1, "abs": 1}.get(f, 2)
        if e.kwargs or len(e.args) != arity:
            self.error(e.span, "arity", f"`{f}` takes {arity} argument{'s' if arity > 1 else ''}")
            return ERR
        if f == "slot":
            k = self.slot_index(e.args[0], scope)
            return ERR if k is None else SVal("int", self.opaque(f"slot({k})", "u64"))
        if f == "query":
            a = e.args[0]
            if not isinstance(a, A.Name):
                self.error(a.span, "bad-query", "`query` takes an event", "write `query(ev)`")
                return ERR
            # decision: `query` takes an event or a channel
            return SVal("bool") if self.channel(a, scope, "query") is not None else ERR
        args = [self.scalar(a, scope) for a in e.args]
        if any(a.type == "error" for a in args):
            return ERR
        for a, v in zip(e.args, args):
            if v.type == "bool":
                self.error(
                    a.span,
                    "not-number",
                    f"`{f}` needs numbers, but `{self.text(a)}` is a condition",
                )
                return ERR
        if any(v.type == "float" for v in args):
            if f == "ceildiv":
                bad = next(a for a, v in zip(e.args, args) if v.type == "float")
                self.error(
                    bad.span,
                    "not-integer",
                    f"`ceildiv` needs integers, but `{self.text(bad)}` is a float",
                )
                return ERR
            vals = [v.value if v.type == "float" else sym.const_value(v.expr) for v in args]
            value = None
            if all(x is not None for x in vals):
                value = {"min": min, "max": max, "abs": abs}[f](*vals)
            return SVal("float", value=value)
        xs = [v.expr for v in args]
        if f == "ceildiv" and sym.const_value(xs[1]) == 0:
            self.error(e.args[1].span, "division-by-zero", "`ceildiv` by zero")
            return ERR
        fn = {"min": sym.min_, "max": sym.max_, "abs": sym.abs_, "ceildiv": sym.ceildiv}[f]
        return SVal("int", fn(*xs))

    def scalar_unary(self, e: A.Unary, scope: Scope) -> SVal:
        v = self.scalar(e.operand, scope)
        if v.type == "error":
            return ERR
        if e.op == "not":
            if v.type != "bool":
                self.error(
                    e.operand.span,
                    "not-bool",
                    f"`not` needs a condition, but `{self.text(e.operand)}` is {_a(v.type)}",
                )
                return ERR
            return SVal("bool")
        if v.type == "bool":
            self.error(
                e.operand.span,
                "not-number",
                f"`{e.op}` needs a number, but `{self.text(e.operand)}` is a condition",
            )
            return ERR
        if v.type == "float":
            return SVal("float", value=-v.value if v.value is not None else None)
        return SVal("int", sym.neg(v.expr))

    def scalar_binary(self, e: A.Binary, scope: Scope) -> SVal:
        lhs, rhs = self.scalar(e.left, scope), self.scalar(e.right, scope)
        if lhs.type == "error" or rhs.type == "error":
            return ERR
        op = e.op
        if op in ("and", "or"):
            for side, v in ((e.left, lhs), (e.right, rhs)):
                if v.type != "bool":
                    self.error(
                        side.span,
                        "not-bool",
                        f"`{op}` needs conditions, but `{self.text(side)}` is {_a(v.type)}",
                        f"compare it: `{self.text(side)} > 0`",
                    )
                    return ERR
            return SVal("bool")
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if (lhs.type == "bool") != (rhs.type == "bool") or (
                lhs.type == "bool" and op not in ("==", "!=")
            ):
                self.error(
                    e.op_span,
                    "bad-compare",
                    f"`{op}` cannot compare {_a(lhs.type)} with {_a(rhs.type)}",
                )
                return ERR
            return SVal("bool")
        for side, v in ((e.left, lhs), (e.right, rhs)):
            if v.type == "bool":
                self.error(
                    side.span,
                    "not-number",
                    f"`{op}` needs numbers, but `{self.text(side)}` is a condition",
                )
                return ERR
        if lhs.type == "float" or rhs.type == "float":
            # decision: scalar arithmetic mixing floats gives a float (usable only as a float scalar argument)
            lv = lhs.value if lhs.type == "float" else sym.const_value(lhs.expr)
            rv = rhs.value if rhs.type == "float" else sym.const_value(rhs.expr)
            value = None
            if lv is not None and rv is not None:
                try:
                    value = {
                        "+": lambda a, b: a + b,
                        "-": lambda a, b: a - b,
                        "*": lambda a, b: a * b,
                        "/": lambda a, b: a / b,
                        "%": lambda a, b: a % b,
                    }[op](lv, rv)
                except ZeroDivisionError:
                    self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
                    return ERR
            return SVal("float", value=value)
        if op in ("/", "%") and sym.const_value(rhs.expr) == 0:
            self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
            return ERR
        fn = {"+": sym.add, "-": sym.sub, "*": sym.mul, "/": sym.floordiv, "%": sym.mod}[op]
        try:
            return SVal("int", fn(lhs.expr, rhs.expr))
        except sym.SymError:
            self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
            return ERR

    # ---- schedules
    def schedule(self, sd: A.ScheduleDecl) -> None:
        wname = sd.workload.id
        summary: Optional[Summary] = None
        keyscope = Scope()
        if wname not in self.env.workloads:
            kind = self.env.kind_of(wname)
            if kind is None:
                self.error(
                    sd.workload.span,
                    "unknown-name",
                    f"unknown workload `{wname}`",
                    did_you_mean(wname, self.env.workloads),
                )
            else:
                self.error(
                    sd.workload.span,
                    "not-workload",
                    f"`{wname}` is {_an(kind)}, not a workload",
                    "a schedule starts with a workload call: `schedule main = my_workload(axes...)`",
                )
            for a in sd.args + tuple(k.value for k in sd.kwargs):
                self.axis(a, Scope())
        else:
            decl = self.env.workloads[wname]
            summary = self.mod.summaries.get(wname)
            mapping = self.bind_workload(decl, sd.args, sd.kwargs, self._schedule_call_span(sd), Scope())
            if summary is not None and mapping is not None:
                self.apply_needs(wname, summary.needs, mapping)
            names: set[str] = set()
            for part in self.mod.closure(wname):
                names |= part.loop_names
            # decision: keys may name any loop variable of the workload or of workloads it inlines, and
            # consumed items (`t`, meaning `t.index`); a key is an integer expression
            for n in sorted(names):
                v = self.fresh(n)
                self.ranges[v] = UNKNOWN
                keyscope.names[n] = LoopVar(n, sym.var(v), "key")
        seen: dict[str, A.Combinator] = {}
        axes: Optional[AxisChecker] = None
        if wname in self.env.workloads:
            inlined = {n for part in self.mod.closure(wname) if part.name != wname
                       for n in part.loop_names}
            axes = AxisChecker(self, self.env, wname, self.env.workloads[wname], inlined)
        for c in sd.combinators:
            n = c.name.id
            if n not in COMBINATORS:
                self.error(
                    c.name.span,
                    "unknown-combinator",
                    f"unknown schedule combinator `.{n}`",
                    did_you_mean(n, COMBINATORS)
                    or "combinators are " + ", ".join(f"`.{x}`" for x in COMBINATORS),
                )
                continue
            if n in seen and n not in REPEATABLE:
                self.error(
                    c.name.span,
                    "duplicate-combinator",
                    f"`.{n}` is given twice",
                    "keep one of them",
                    notes=[Note(seen[n].name.span, "first given here")],
                )
                continue
            seen.setdefault(n, c)
            if n in AXIS_COMBINATORS:
                if axes is not None:
                    axes.check(c)
                continue
            getattr(self, f"comb_{n}")(c, keyscope, wname, summary)
        if "stream_by" in seen and "streams" not in seen:
            # decision: `.stream_by(key)` needs `.streams(n)`: the key is taken mod n, and n has no default
            self.error(
                seen["stream_by"].name.span,
                "stream-by-without-streams",
                "`.stream_by` needs `.streams(n)` to say how many streams there are",
                "add `.streams(4)` (the key is taken modulo the stream count)",
            )

    def _schedule_call_span(self, sd: A.ScheduleDecl) -> A.Span:
        span = sd.workload.span
        for a in sd.args:
            span = span.merge(a.span)
        return A.Span(
            span.file, span.line, span.col, span.end_line, span.end_col + (1 if sd.args else 2)
        )

    def kwargs(
        self, c: Union[A.Call, A.Combinator], allowed: tuple[str, ...], where: str
    ) -> dict[str, A.Keyword]:
        out: dict[str, A.Keyword] = {}
        for kw in c.kwargs:
            if kw.name not in allowed:
                self.error(
                    kw.span,
                    "unknown-option",
                    f"`{where}` has no option `{kw.name}`",
                    did_you_mean(kw.name, allowed)
                    or (
                        "its options are " + ", ".join(f"`{a}`" for a in allowed)
                        if allowed
                        else f"`{where}` takes no options"
                    ),
                )
            elif kw.name in out:
                self.error(
                    kw.span,
                    "duplicate-option",
                    f"`{kw.name}` is given twice",
                    notes=[Note(out[kw.name].span, "first given here")],
                )
            else:
                out[kw.name] = kw
        return out

    def positive_int(self, e: A.Expr, what: str) -> Optional[int]:
        n = self.compile_int(e, Scope(), what)
        if n is not None and n <= 0:
            self.error(e.span, "not-positive", f"{what} must be positive, found {n}")
            return None
        return n

    def policy(self, e: A.Expr, choices: tuple[str, ...], what: str) -> Optional[A.Call]:
        """A policy value `name(args)`; a bare `name` means `name()`."""
        # decision: a policy that takes no arguments may be written without parentheses (`immediate`, `work_steal`)
        if isinstance(e, A.Name):
            e = A.Call(e, (), (), span=e.span)
        if not isinstance(e, A.Call) or e.prefix:
            self.error(
                e.span, "bad-policy", f"expected {what}: " + ", ".join(f"`{c}`" for c in choices)
            )
            return None
        if e.func.id not in choices:
            self.error(
                e.func.span,
                "unknown-policy",
                f"unknown {what} `{e.func.id}`",
                did_you_mean(e.func.id, choices)
                or f"{what}s are " + ", ".join(f"`{c}`" for c in choices),
            )
            return None
        return e

    def one_arg(self, c: Union[A.Call, A.Combinator], where: str, example: str) -> Optional[A.Expr]:
        if len(c.args) != 1 or c.kwargs:
            self.error(c.span, "arity", f"`{where}` takes one argument", f"write `{example}`")
            return None
        return c.args[0]

    def key(self, e: A.Expr, scope: Scope, wname: str, summary: Optional[Summary]) -> None:
        """A schedule key: an integer expression over loop variables that every call binds."""
        self.key_of = wname if summary is not None else None
        try:
            v = self.int_expr(e, scope, "a schedule key")
        finally:
            self.key_of = None
        if v.type == "error" or summary is None:
            return
        used = []
        for node in e.walk():
            if (
                isinstance(node, A.Name)
                and isinstance(scope.lookup(node.id), LoopVar)
                and node.id not in used
            ):
                used.append(node.id)
        if not used:
            return
        calls = [c for part in self.mod.closure(wname) for c in part.kernel_calls]
        bad: list[tuple[A.CallStmt, str]] = []
        for call in calls:
            bound = {c.id for c in call.coords or () if isinstance(c, A.Name)}
            for name in used:
                if name not in bound:
                    bad.append((call, name))
                    break
        if not bad:
            return
        call, name = bad[0]
        ctext = self.call_text(call)
        coords = [self.text(c) for c in call.coords or ()] + [name]
        notes = [Note(c.span, f"`{self.call_text(c)}` does not bind `{n}`") for c, n in bad]
        self.error(
            e.span,
            "key-unbound",
            f"the key uses `{name}`, but the call `{ctext}` does not bind `{name}`",
            f"add `{name}` to the call's coordinates: `{call.callee.id}[{', '.join(coords)}]`",
            notes=notes,
        )

    def comb_dispatch(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".dispatch", ".dispatch(round_robin(4))")
        if arg is None:
            return
        p = self.policy(arg, DISPATCH_POLICIES, "dispatch policy")
        if p is None:
            return
        f = p.func.id
        where = f"{f}(...)"
        if f == "round_robin":
            # decision: `round_robin` and `work_steal` take n positionally or as `n = N`; round_robin also as `num_aicpus = N`
            kws = self.kwargs(p, ("n", "num_aicpus") if f == "round_robin" else ("n",), where)
            given = list(p.args) + [kw.value for kw in kws.values()]
            if len(given) > 1:
                self.error(p.span, "arity", f"`{f}` takes one dispatcher count", f"write `{f}(4)`")
            elif given:
                self.positive_int(given[0], "a dispatcher count")
            return
        if f == "work_steal":
            kws = self.kwargs(p, ("n",), where)
            given = list(p.args) + [kw.value for kw in kws.values()]
            if len(given) > 1:
                self.error(
                    p.span,
                    "arity",
                    f"`{f}` takes one dispatcher count",
                    "write `work_steal(n = 4)`",
                )
            elif given:
                self.positive_int(given[0], "a dispatcher count")
            return
        # decision: key policies take the key positionally and the optional count only as `n = N`
        kws = self.kwargs(p, ("n",), where)
        if len(p.args) != 1:
            self.error(
                p.span,
                "arity",
                f"`{f}` takes one key expression (and optionally `n = N`)",
                f"write `{f}(b, n = 4)`",
            )
        else:
            self.key(p.args[0], scope, wname, summary)
        if "n" in kws:
            self.positive_int(kws["n"].value, "a dispatcher count")

    def comb_streams(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".streams", ".streams(4)")
        if arg is not None:
            self.positive_int(arg, "a stream count")

    def comb_stream_by(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".stream_by", ".stream_by(h % 4)")
        if arg is not None:
            self.key(arg, scope, wname, summary)

    def comb_timing(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".timing", ".timing(batched(16))")
        if arg is None:
            return
        p = self.policy(arg, TIMING_POLICIES, "timing policy")
        if p is None:
            return
        f = p.func.id
        if f == "immediate":
            if p.args or p.kwargs:
                self.error(p.span, "arity", "`immediate` takes no arguments")
            return
        # decision: `batched`/`interleaved` also accept `n = N`, `rate_limit` `tasks_per_ms = x` (int or float)
        kwname = "tasks_per_ms" if f == "rate_limit" else "n"
        kws = self.kwargs(p, (kwname,), f"{f}(...)")
        given = list(p.args) + [kw.value for kw in kws.values()]
        if len(given) != 1:
            self.error(
                p.span,
                "arity",
                f"`{f}` takes one argument",
                f"write `{f}({'1.5' if f == 'rate_limit' else '16'})`",
            )
            return
        if f != "rate_limit":
            self.positive_int(
                given[0], "a group size" if f == "batched" else "an interleaving count"
            )
            return
        v = self.scalar(given[0], Scope())
        if v.type == "error":
            return
        value = (
            v.value if v.type == "float" else sym.const_value(v.expr) if v.type == "int" else None
        )
        if v.type == "bool" or value is None:
            self.error(
                given[0].span,
                "not-constant",
                "`rate_limit` takes a compile-time number of tasks per millisecond",
                "write `rate_limit(1.5)`",
            )
        elif not value > 0:
            self.error(
                given[0].span, "not-positive", f"`rate_limit` must be positive, found {value}"
            )

    def comb_task_graph(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        # decision: `.task_graph` arguments are keywords only
        for a in c.args:
            self.error(
                a.span,
                "positional-arg",
                "`.task_graph` takes keyword arguments",
                f"write `.task_graph(window = {self.text(a)})`",
            )
        kws = self.kwargs(c, ("window", "unit", "mode"), ".task_graph")
        if "window" in kws:
            self.positive_int(kws["window"].value, "a task window")
        elif not c.args:
            # decision: `window` has no default: a task graph without a window size says nothing
            self.error(
                c.name.span,
                "missing-option",
                "`.task_graph` needs `window = N`",
                "write `.task_graph(window = 8192)`",
            )
        if "unit" in kws:
            u = kws["unit"].value
            if not (isinstance(u, A.Name) and u.id == "tasks"):
                self.error(
                    u.span,
                    "bad-option",
                    f"unknown task window unit `{self.text(u)}`; the only unit is `tasks`",
                )
        if "mode" in kws:
            m = kws["mode"].value
            if not (isinstance(m, A.Name) and m.id in TASK_GRAPH_MODES):
                text = m.id if isinstance(m, A.Name) else self.text(m)
                self.error(
                    m.span,
                    "bad-option",
                    f"unknown task window mode `{text}`",
                    did_you_mean(text, TASK_GRAPH_MODES) or "modes are `stall` and `abort`",
                )


# ---------------------------------------------------------------------------------------------


def _describe(b: Binding) -> str:
    if isinstance(b, AxisVal):
        return "an axis"
    if isinstance(b, LoopVar):
        return "a loop variable"
    if isinstance(b, Item):
        return "a consumed item"
    if isinstance(b, ProcessName):
        return "a process"
    return "a variable of this same loop"


def _show(e: Optional[sym.Expr]) -> str:
    return "?" if e is None else sym.to_str(e)


def _closest(name: str, candidates: list[str]) -> Optional[str]:
    """The candidate `did_you_mean` would suggest, or None."""
    pool = sorted(set(candidates))
    for c in difflib.get_close_matches(name, pool, n=max(len(pool), 1), cutoff=0.0):
        if did_you_mean(name, [c]) is not None:  # whatever cutoff `did_you_mean` uses
            return c
    return None


def _an(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def _a(t: str) -> str:
    return {"int": "an integer", "float": "a float", "bool": "a condition"}.get(t, t)


def _elem_text(ch: ChannelInfo) -> str:
    assert ch.elem is not None
    r, c, dt = ch.elem
    return f"Tile[{r}, {c}, {dt}]"
