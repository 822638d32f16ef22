"""Rendezvous deadlocks among the processes of one pipe, found at compile time.

The processes' sends and consumes (`ProcOp`, in the order their bodies reach them) are
searched for cycles of processes that each send on a rendezvous channel (depth 0) before
consuming the channel the previous process of the cycle sends on; each cycle is reported once,
at its first send.
"""

from __future__ import annotations

from typing import Callable, Optional

from ...diagnostics import Note
from ...records import record
from .. import ast as A
from ..env import ChannelInfo


@record
class ProcOp:
    """A send or consume inside a process, for the rendezvous deadlock check."""

    kind: str
    channel: ChannelInfo
    span: A.Span
    certain: bool  # reached on every run (not under `when`, a consume body or a maybe-empty loop)


Report = Callable[..., None]  # BodyState.error: (span, code, message, help=None, notes=())


def report_deadlocks(procs: list[tuple[A.Process, list[ProcOp]]], error: Report) -> None:
    """Report the cycles of processes that each send on a rendezvous channel before consuming
    the one the previous process of the cycle sends on (a process alone: before consuming the
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

    def first(ops: list[ProcOp], kind: str, ch: str) -> Optional[tuple[int, ProcOp]]:
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
        cycle = _cycle(start, successors, index, used)
        if cycle is None:
            continue
        used.update(cycle)
        _report(cycle, procs, first, error)


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


def _report(cycle, procs, first, error: Report) -> None:
    """One diagnostic for a cycle, at its first send, with a note at each other send."""
    names = [procs[i][0].name.id for i, _ in cycle]
    sent = [c for _, c in cycle]
    consumed = [sent[k - 1] for k in range(len(cycle))]
    spans = [first(procs[i][1], "send", c)[1].span for i, c in cycle]
    if len(cycle) == 1:
        (a,), (c,) = names, sent
        error(
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
    error(
        spans[0],
        "deadlock",
        message,
        "give one of the channels a depth of 1 or more, or consume before sending "
        "in one of the processes",
        notes=[Note(sp, f"process `{n}` sends on `{c}` here")
               for sp, n, c in zip(spans[1:], names[1:], sent[1:])],
    )
