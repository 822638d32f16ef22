"""Workload statements: parameters, blocks, loops, `when`, task calls and slots.

`StatementChecks.run` checks one workload: its parameters become axes in the outermost scope,
then each statement is dispatched to `stmt_<Class>` (CSP statements are in csp.py). Loops bind
fresh symbolic variables with the range of their axis; a statement that may not run on every
run (under `when`, in a loop that may be empty) is counted in `uncertain` for the deadlock check.
"""

from __future__ import annotations

from typing import Iterable, Optional

from ... import sym
from ...diagnostics import InternalError, Note, did_you_mean
from .. import ast as A
from ..env import NUM_SLOTS, ChannelInfo
from .scope import UNKNOWN, AxisVal, LetVal, LoopVar, Pending, Scope, describe
from .state import Summary
from .wording import article


class StatementChecks:
    """Part of `Body`: one workload and its statements."""

    def run(self) -> Summary:
        """Check the workload `decl`; its `Summary` for the checks across workloads."""
        d = self.decl
        if d is None:
            raise InternalError("check", "a schedule's body check was run as a workload")
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
        self.check_edges(d.body)
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

    def block(self, stmts: Iterable[A.Stmt], scope: Scope) -> None:
        stmts = tuple(stmts)
        for s in stmts:  # for "used before its `let`"
            if isinstance(s, A.Let):
                scope.later.setdefault(s.name.id, s)
        for i, s in enumerate(stmts):
            if isinstance(s, A.Record):
                j = i - 1
                while j >= 0 and isinstance(stmts[j], A.Record):
                    j -= 1  # decision: consecutive `record`s all mark the statement before the first one
                # decision: a `record` right after a `synchronize` or a `let` (which have no tasks) is misplaced too
                if j < 0 or isinstance(stmts[j], (A.Synchronize, A.Let)):
                    self.error(
                        s.span,
                        "record-position",
                        "`record` must directly follow the statement whose tasks it marks",
                        f"write `record({s.event.id})` on the line after that statement",
                    )
            self.stmt(s, scope)

    def stmt(self, s: A.Stmt, scope: Scope) -> None:
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        if method is None:  # every statement class has a method
            raise InternalError("check", f"no workload check for the statement {type(s).__name__}")
        method(s, scope)

    def stmt_LetMany(self, s: A.LetMany, scope: Scope) -> None:
        self.error(
            s.span,
            "bad-statement",
            "`let a, b = ...` is only allowed in kernel bodies",
            "it binds the two results of `topk` or `sort` inside a kernel",
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
        self.after_coords(s, scope)
        b = scope.lookup(name)
        if isinstance(b, LetVal) and b.poisoned:
            self.check_coords(s, scope)
            return
        if b is not None:
            self.error(
                s.callee.span,
                "not-callable",
                f"`{name}` is {describe(b)}, not a kernel or workload",
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
                s.callee.span, "not-callable", f"`{name}` is {article(kind)}, not a kernel or workload"
            )
        self.check_coords(s, scope)

    def check_coords(self, s: A.CallStmt, scope: Scope) -> None:
        for c in s.coords or ():
            self.int_expr(c, scope, "a task coordinate")

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
