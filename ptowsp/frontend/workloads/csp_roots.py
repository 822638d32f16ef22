"""CSP across workloads, per root workload (scheduled, or inlined by no other) with every body
it inlines: channels sent and consumed in pairs, sends and consumes inside processes, one
consuming process per channel, and every send to it inside that process's pipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...diagnostics import Note
from .. import ast as A
from ..env import ModuleEnv
from .state import ModuleState


def roots(mod: ModuleState) -> list[str]:
    """The root workloads: scheduled, or inlined by no other workload."""
    inlined: set[str] = set()
    for s in mod.summaries.values():
        inlined.update(s.inlines)
    scheduled = {sd.workload.id for sd in mod.env.schedules.values()}
    return [n for n in mod.env.workloads
            if n in mod.summaries and (n not in inlined or n in scheduled)]


def check_pairing(mod: ModuleState) -> None:
    """A channel consumed but never sent to (or the reverse), per root workload."""
    # decision: pairing is checked per root workload (scheduled, or inlined by no other), counting
    # everything it inlines; a channel used in no root is not checked
    for name in roots(mod):
        parts = mod.closure(name)
        sent = {c for s in parts for c in s.sends}
        consumed = {c for s in parts for c in s.consumes}
        for s in parts:
            for c, spans in s.consumes.items():
                if c not in sent:
                    for sp in spans:
                        mod.diags.error(
                            sp,
                            "unpaired-channel",
                            f"channel `{c}` is consumed but never sent to",
                            f"send to it in another process: `send({c}, kernel[i](out = {c}, ...))`",
                        )
            for c, spans in s.sends.items():
                if c not in consumed:
                    for sp in spans:
                        mod.diags.error(
                            sp,
                            "unpaired-channel",
                            f"channel `{c}` is sent to but never consumed",
                            f"consume it in another process: `consume({c}) as t {{ ... }}`",
                        )


def check_csp_structure(mod: ModuleState) -> None:
    """Where sends and consumes may stand, per root workload (inlined bodies expanded).

    decision: `send` and `consume` stand inside a `process` (counting the processes that
    inline the workload holding them); all consumes of a channel are in one process (whose
    replicas share its items), and every send to it is inside the pipe of that process (a
    channel connects the processes of one pipe, which opens it each time it runs)."""
    if not mod.env.channels:
        return
    reported: set[tuple] = set()

    def error(span, code, message, help=None, notes=()):
        key = (span, code, message)
        if key not in reported:
            reported.add(key)
            mod.diags.error(span, code, message, help, notes)

    for root in roots(mod):
        uses: list[_Use] = []
        _collect_uses(mod.env, mod.env.workloads[root].body, (), (), (root,), uses)
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


@dataclass(frozen=True, eq=False)
class _Use:
    """A send or consume reached from a root workload: the processes and pipes around it
    (outermost first)."""

    kind: str
    channel: str
    span: A.Span
    procs: tuple
    pipes: tuple


def _collect_uses(env: ModuleEnv, stmts, procs: tuple, pipes: tuple, stack: tuple,
                  out: list[_Use]) -> None:
    """The sends and consumes reached from `stmts`, through inlined workloads (`stack`: the
    workloads being expanded, so an inline cycle, reported already, ends the walk)."""
    for s in stmts:
        if isinstance(s, A.Pipe):
            for st in s.body:
                # a statement that is not a process is reported already (`pipe-body`)
                if isinstance(st, A.Process):
                    _collect_uses(env, st.body, procs + (st,), pipes + (s,), stack, out)
        elif isinstance(s, A.Process):
            _collect_uses(env, s.body, procs + (s,), pipes, stack, out)
        elif isinstance(s, A.Send):
            if s.channel.id in env.channels:
                out.append(_Use("send", s.channel.id, s.channel.span, procs, pipes))
        elif isinstance(s, A.Consume):
            if s.channel.id in env.channels:
                out.append(_Use("consume", s.channel.id, s.channel.span, procs, pipes))
            _collect_uses(env, s.body, procs, pipes, stack, out)
        elif isinstance(s, (A.ForLoop, A.Combine, A.Sequential)):
            _collect_uses(env, s.body, procs, pipes, stack, out)
        elif isinstance(s, A.When):
            for br in s.branches:
                _collect_uses(env, br.body, procs, pipes, stack, out)
            _collect_uses(env, s.otherwise or (), procs, pipes, stack, out)
        elif (isinstance(s, A.CallStmt) and s.callee.id in env.workloads
              and s.callee.id not in stack):
            _collect_uses(env, env.workloads[s.callee.id].body, procs, pipes,
                          stack + (s.callee.id,), out)
