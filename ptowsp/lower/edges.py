"""Edges named one by one (`let t = k[i](...)`, `k[i](...) after t`; docs/schedules.md,
"Named edges") as accesses of an order tensor.

Each task handle gets a scratch tensor `edge@SCHEDULE@NAME` that no kernel touches (ir/nodes.py,
`is_edge_tensor`): a task of the handle's call writes the one-element box at its coordinates
(the variables of the loops around the call, outermost first; a call in no loop writes [0]),
and a call's `after t` reads the box of the tasks it names (N.Access "w" and "r" in the tasks'
`extra`). Every back end infers dependencies from boxes, so the named edge is an ordinary RAW
dependency there: the runtime waits for it under any `deps`, the cycle model's log sees it,
passes keep it (a task with `extra` is never fused or removed, and axis transforms substitute
its boxes like any other), and `deps = explicit`'s check (runtime_c/explicit.c) takes a
dependency through such a tensor as declared.

A box's coordinates are integers, not memory: the tensor is declared with one element per
dimension and its boxes may lie beyond it (the host's inference, the log's hashed records and
the explicit check compare boxes only). A coordinate that may be negative (`t[i - 1]` at i = 0)
makes an empty box, which names no task; one past its loop's end names none either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from .. import sym
from ..frontend import ast as A
from ..frontend.workloads.edges import call_sites, loop_keys
from ..ir import nodes as N
from ..ir import visit as V
from .scope import Scope
from .tasks import _within_a_task

# the extent of a box over every iteration of a loop whose extent is not known where the edge
# is named (a ragged loop's length read inside the loops around the handle's call)
EVERY = 1 << 40


@dataclass
class _Handle:
    tensor: str
    keys: tuple  # the loops around the handle's call (frontend/workloads/edges.py, Loop.key)
    extents: Optional[tuple] = None  # their extents, once the call is lowered


class EdgeLowering:
    """Part of `WorkloadLowerer`: the handles of the workload bodies being lowered (one table
    per body: an inlined workload's handles are its own), and the loops around the statement
    being lowered (`edge_loops`: key, variable, extent)."""

    def edges_init(self, schedule: str) -> None:
        self.edge_schedule = schedule
        self.edge_tables: list[dict[str, _Handle]] = []
        self.edge_loops: list[tuple[tuple, str, sym.Expr]] = []
        self.edge_names: set[str] = set()

    def edges_enter(self, body) -> None:
        """A workload body starts being lowered: its handles, each with its tensor's name."""
        table: dict[str, _Handle] = {}
        outer = tuple(k for k, _, _ in self.edge_loops)
        sites = call_sites(tuple(body), self.env.kernel_sigs)
        named = {a.handle.id for s in sites for a in s.call.after}
        for site in sites:
            label = site.call.label
            # a handle no `after` names costs nothing: no tensor, no box, nothing kept unfused
            if label is None or label.id in table or label.id not in named:
                continue
            name = f"edge@{self.edge_schedule}@{label.id}"
            n = 1
            while name in self.edge_names:  # the same workload inlined twice
                n += 1
                name = f"edge@{self.edge_schedule}@{label.id}@{n}"
            self.edge_names.add(name)
            table[label.id] = _Handle(name, outer + tuple(x.key for x in site.loops))
        self.edge_tables.append(table)

    def edges_leave(self) -> None:
        self.edge_tables.pop()

    def edge_loop(self, s: A.ForLoop, k: int, var: str, extent: sym.Expr) -> None:
        self.edge_loops.append((loop_keys(s)[k], var, extent))

    def edge_loop_end(self, n: int) -> None:
        del self.edge_loops[len(self.edge_loops) - n:]

    def with_edges(self, task: N.Task, s: A.CallStmt, scope: Scope) -> N.Task:
        """`task` with the boxes of the handle it binds and of the handles its `after` names."""
        if s.label is None and not s.after:
            return task
        table = self.edge_tables[-1]
        extra = []
        if s.label is not None and s.label.id in table:
            h = table[s.label.id]
            h.extents = tuple(e for _, _, e in self.edge_loops)
            offs = tuple(sym.var(v) for _, v, _ in self.edge_loops) or (sym.const(0),)
            extra.append(N.Access(h.tensor, "w", offs, (sym.const(1),) * len(offs)))
        for a in s.after:
            extra.append(self.edge_read(table[a.handle.id], a, scope))
        task = replace(task, extra=task.extra + tuple(extra))
        _within_a_task(task, s)
        return task

    def edge_read(self, h: _Handle, a: A.After, scope: Scope) -> N.Access:
        loops = self.edge_loops
        shared = 0
        while shared < min(len(h.keys), len(loops)) and h.keys[shared] == loops[shared][0]:
            shared += 1
        known = {v for _, v, _ in loops[:shared]} | set(self.env.syms)
        index = a.index or ()
        offs: list[sym.Expr] = []
        exts: list[sym.Expr] = []
        for k in range(len(h.keys)):
            if k < len(index):
                e = self.int_expr(index[k], scope)
                lo = sym.bounds(e, self.ranges).lo
                if lo is not None and lo >= 0:
                    offs.append(e)
                    exts.append(sym.const(1))
                else:  # may be negative: an empty box there (no task has that coordinate)
                    offs.append(sym.max_(e, 0))
                    exts.append(sym.min_(sym.max_(sym.add(e, 1), 0), 1))
            elif k < shared:
                offs.append(sym.var(loops[k][1]))
                exts.append(sym.const(1))
            else:
                ext = h.extents[k] if h.extents is not None else None
                if ext is None or not sym.free_vars(ext) <= known:
                    ext = sym.const(EVERY)
                offs.append(sym.const(0))
                exts.append(ext)
        if not h.keys:
            offs, exts = [sym.const(0)], [sym.const(1)]
        return N.Access(h.tensor, "r", tuple(offs), tuple(exts))


def edge_tensors(schedules) -> tuple[N.TensorDecl, ...]:
    """The order tensors the schedules' tasks access (sorted by name)."""

    dims: dict[str, int] = {}
    for s in schedules:
        for t in V.tasks(s.body):
            for x in t.extra:
                if N.is_edge_tensor(x.tensor):
                    dims[x.tensor] = len(x.offsets)
    return tuple(N.TensorDecl(name, "scratch", "u8", (sym.const(1),) * n)
                 for name, n in sorted(dims.items()))
