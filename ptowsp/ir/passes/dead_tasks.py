"""dead_tasks: tasks whose writes nobody reads, and what only they used.

A task is dead when every tensor it writes is a scratch tensor that no task of the schedule
reads (tile or extra access), no element read (`read T[...]`) looks at, and no output
receives. Removing one can make its producers dead, so this repeats until nothing changes.
Then kernels that no schedule calls any more and scratch tensors that no schedule touches are
dropped from the module (scratch is zero-filled per run: that work goes too); a module without
schedules keeps its kernels (it is a library of them, e.g. one kernel compiled alone).

Leaves alone: a task with a run-time view check (removing it would hide an error the program
reports at -O0), a task inside CSP statements (a send's task carries an item; consume bodies
hold items; both order the pipeline), and every non-scratch tensor (inputs and outputs are
the program's interface).
"""

from __future__ import annotations

from dataclasses import replace

from .. import nodes as N
from ..visit import map_schedules, rewrite, tasks, walk


def dead_tasks(m: N.Module) -> N.Module:
    """Dead tasks removed, then unused kernels and scratch tensors."""
    scratch = {t.name for t in m.tensors if t.kind == "scratch"}
    slots = {c.slots for c in m.channels if c.slots} | {c.marks for c in m.channels if c.marks}
    scratch -= slots
    while True:
        read = set()
        for s in m.schedules:
            read |= _read_tensors(s.body)
        keep = {id(t) for s in m.schedules for st in walk(s.body)
                if isinstance(st, (N.Pipe, N.Send, N.Consume)) for t in tasks((st,))}
        before = m
        m = _drop_dead(m, scratch, read, keep)
        if m is before:
            break
    return _drop_unused(m)


def _drop_dead(m: N.Module, scratch: set, read: set, keep: set) -> N.Module:
    """One round: the tasks dead by `read` dropped from every schedule, and what they emptied."""
    return map_schedules(m, lambda s: rewrite(s.body, lambda st: _drop(st, scratch, read, keep)))


def _read_tensors(stmts) -> set[str]:
    out = set()
    for st in walk(stmts):
        if isinstance(st, N.Task):
            out.update(a.tensor for a in st.args if isinstance(a, N.TileArg) and a.mode != "w")
            out.update(a.tensor for a in st.extra if a.mode != "w")
        elif isinstance(st, N.Read):
            out.add(st.tensor)
    return out


def _dead(t: N.Task, scratch: set, read: set, keep: set) -> bool:
    if id(t) in keep:
        return False
    writes = [a for a in t.args if isinstance(a, N.TileArg) and a.mode != "r"]
    if t.extra or not writes or any(a.checks for a in t.args if isinstance(a, N.TileArg)):
        return False
    return all(a.tensor in scratch and a.tensor not in read for a in writes)


def _drop(st, scratch: set, read: set, keep: set) -> list:
    if isinstance(st, N.Task):
        return [] if _dead(st, scratch, read, keep) else [st]
    if isinstance(st, (N.Loop, N.Block)) and not st.body:
        return []  # its tasks are gone: an empty loop or block does nothing
    if isinstance(st, N.When) and not st.otherwise and not any(b for _, b in st.branches):
        return []  # predicates are pure (element reads are statements of their own)
    return [st]


def _drop_unused(m: N.Module) -> N.Module:
    if not m.schedules:
        # decision: a module without schedules is a library of kernels (the embedding's
        # `kernel.compile()` compiles one alone): nothing of it runs, so none of it is dead
        return m
    used_kernels = set()
    used_tensors = set()
    for s in m.schedules:
        for st in walk(s.body):
            if isinstance(st, N.Task):
                used_kernels.add(st.kernel)
                used_tensors.update(a.tensor for a in st.args if isinstance(a, N.TileArg))
                used_tensors.update(a.tensor for a in st.extra)
            elif isinstance(st, N.Read):
                used_tensors.add(st.tensor)
    channel_tensors = {c.slots for c in m.channels if c.slots} | \
        {c.marks for c in m.channels if c.marks}
    kernels = tuple(k for k in m.kernels if k.name in used_kernels)
    tensors = tuple(t for t in m.tensors if t.kind != "scratch" or t.name in used_tensors
                    or t.name in channel_tensors)
    if len(kernels) == len(m.kernels) and len(tensors) == len(m.tensors):
        return m
    return replace(m, kernels=kernels, tensors=tensors)
