"""`pto_wsp.primitives`: the prototype's declarative workload builders, with wspc's meaning
(docs/python.md): `parallel_for(ax, lambda i: ...)` is `for i in P(ax)`, `for_each` is
`P.seq`, `select(routing[b], lambda e: ...)` is `P.sel(routing[b])`, `cond`, `task`,
`combine`, `sequential`, and the slot writers `slot_set_u64` / `slot_load_u64`."""

from typing import TypeVar

from ptowsp.embed.csp import for_each, parallel_for, select, task
from ptowsp.embed.workload import (
    Workload,
    combine,
    cond,
    sequential,
    slot_load_u64,
    slot_set_u64,
)

T = TypeVar("T")

__all__ = ["parallel_for", "for_each", "select", "cond", "task", "combine", "sequential",
           "slot_set_u64", "slot_load_u64", "Workload", "T"]
