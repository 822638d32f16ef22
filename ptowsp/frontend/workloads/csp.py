"""CSP inside a workload body: pipes, processes, channels, events, send, consume, record and
synchronize (language.md section 7).

Each `process` collects its sends and consumes as `ProcOp`s in the order they are reached, for
the rendezvous deadlock check of its pipe (deadlock.py); the checks across workloads (pairing,
one consumer per channel, sends inside the consumer's pipe) are in csp_roots.py.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import Note, did_you_mean
from .. import ast as A
from ..env import ChannelInfo
from .deadlock import ProcOp, report_deadlocks
from .scope import Item, LetVal, ProcessName, Scope, describe
from .wording import article


class CspChecks:
    """Part of `Body`: the CSP statements."""

    def stmt_Pipe(self, s: A.Pipe, scope: Scope) -> None:
        names: dict[str, A.Process] = {}
        procs: list[tuple[A.Process, list[ProcOp]]] = []
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
        report_deadlocks(procs, self.error)

    def stmt_Process(self, s: A.Process, scope: Scope) -> None:
        # decision: `process` stands only directly inside `pipe { }` (a pipe may nest inside a process)
        self.error(
            s.span,
            "process-outside-pipe",
            "`process` is only allowed directly inside `pipe { }`",
            "write `pipe { process NAME { ... } }`",
        )
        self.process(s, scope)

    def process(self, s: A.Process, scope: Scope) -> list[ProcOp]:
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
            saved.extend(ProcOp(op.kind, op.channel, op.span, False) for op in ops)
        return ops

    def channel(self, n: A.Name, scope: Scope, what: str) -> Optional[ChannelInfo]:
        b = scope.lookup(n.id)
        if isinstance(b, LetVal) and b.poisoned:
            return None
        if b is not None:
            self.error(n.span, "not-channel", f"`{n.id}` is {describe(b)}, not a channel")
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
                f"`{n.id}` is {article(kind)}, not a channel",
                f"`{what}` takes a channel declared with `channel NAME: Tile[M, N, DT], depth = D`",
            )
        return None

    def event(self, n: A.Name, scope: Scope, what: str) -> Optional[ChannelInfo]:
        b = scope.lookup(n.id)
        if isinstance(b, LetVal) and b.poisoned:
            return None
        if b is not None:
            self.error(n.span, "not-event", f"`{n.id}` is {describe(b)}, not an event")
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
                f"`{what}` takes an event, but `{n.id}` is {article(kind)}",
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
                self.proc_ops.append(ProcOp("send", ch, s.channel.span, self.uncertain == 0))
        self.stmt_CallStmt(s.call, scope, send=ch, in_send=True)

    def stmt_Consume(self, s: A.Consume, scope: Scope) -> None:
        ch = self.channel(s.channel, scope, "consume")
        if ch is not None:
            self.summary.consumes.setdefault(ch.name, []).append(s.channel.span)
            if self.proc_ops is not None:
                self.proc_ops.append(ProcOp("consume", ch, s.channel.span, self.uncertain == 0))
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
