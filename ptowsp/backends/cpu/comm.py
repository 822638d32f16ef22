"""The cycle model's interconnect: what one message of a collective costs (docs/performance.md,
"The interconnect").

The device lowering (ir/devices.py) makes each collective tile tasks, one per (device, tile of
the destination), whose kernels carry a `Comm` (ir/nodes.py). Such a task is one message of the
collective's algorithm: the C model (runtime_c/sim.c) runs it on its device's comm engine for
the cycles `comm_cost` gives it here. The engine moves one message at a time, but is free for
the next one during the message's latency (its steps' fixed costs), so the messages of a
collective pipeline like HCCL's chunks: a device's n messages take about one message's
latency plus n transfers. This module is the one
place the formula lives; `--stats` and the tests read the same numbers through
`message_cost`.

The algorithm is HCCL's for the group's place on the machine (its "Mesh" within a server, a
ring across servers):
- within a server (every device of each group along the axis in one server of
  `devices_per_server`), the full mesh: each device exchanges with every other directly, all
  links at once, at `link_gbps` per link and `link_latency_ns` per step; an allreduce is a
  reduce-scatter and an allgather (2 steps), every other kind one step;
- across servers, a ring at the slowest link's `network_gbps` and `network_latency_ns` per
  step: an allreduce 2(p - 1) steps, reduce_scatter, allgather and all_to_all (pairwise) p - 1.
One message moves the tile T of the destination (the kernel's Out tile). Per step a link carries
T / p (the tile's share of each peer), except in a reduce_scatter, whose tile is already a
device's shard: T. So a device's messages of one collective add up to the algorithm's time for
its whole data plus a latency per message (tiles pipeline like HCCL's chunks), and never take
less than the bytes one link must carry over the link's bandwidth.
A reducing kind (allreduce, reduce_scatter) adds the vector unit's time for the additions:
(p - 1) times the reduced bytes per step's chunk, at `vector_bytes_per_cycle`.
A group of one device moves nothing: its kernel is an ordinary copy (cost.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ... import sym
from ...dtypes import size_of
from ...ir import nodes as N

if TYPE_CHECKING:
    from ..machine import Machine

UNIT_COMM = 2  # WSP_UNIT_COMM in wsp_runtime.h: the device's comm engine
REDUCING = frozenset({"allreduce", "reduce_scatter"})


@dataclass(frozen=True)
class MessageCost:
    """One message (tile task) of a collective: its algorithm (`mesh` or `ring`), its steps,
    the bytes each step moves over one link, and its time: `cycles` in all, of which the last
    `latency_cycles` (the steps' fixed costs) leave the engine free for the next message."""

    algorithm: str
    steps: int
    step_bytes: float
    link_gbps: float
    latency_ns: float
    reduce_cycles: int
    cycles: int
    latency_cycles: int


def _axes(module: N.Module) -> Optional[list[tuple[str, int]]]:
    """The mesh's axes and sizes: the device lowering's (`Module.devices`), or a `mesh` whose
    sizes are constants (a module built by hand, as the tests and benchmarks/mesh.py do)."""
    if module.devices is not None:
        return [(a, int(n)) for a, n in module.devices.axes]
    if module.mesh is None:
        return None
    sizes = [sym.const_value(a.size) for a in module.mesh.axes]
    if any(s is None for s in sizes):
        return None
    return [(a.name, int(n)) for a, n in zip(module.mesh.axes, sizes)]


def devices(module: N.Module) -> int:
    """Devices the module runs on (1 without a mesh)."""
    axes = _axes(module)
    return max(1, math.prod(n for _, n in axes)) if axes else 1


def spans_servers(module: N.Module, over: str, group: int, per_server: int) -> bool:
    """Whether some group of devices along mesh axis `over` holds devices of two servers
    (device d is in server d // per_server; devices row-major, the last axis fastest)."""
    axes = _axes(module)
    if axes is None or not any(a == over for a, _ in axes):
        return group > per_server
    sizes = [n for _, n in axes]
    at = [a for a, _ in axes].index(over)
    stride = math.prod(sizes[at + 1:])
    total = math.prod(sizes)
    for d in range(total):
        if (d // stride) % sizes[at] != 0:
            continue  # d is the first device of its group
        members = {(d + k * stride) // per_server for k in range(sizes[at])}
        if len(members) > 1:
            return True
    return False


def tile_bytes(kernel: N.Kernel) -> int:
    """Bytes of the destination tile one message delivers: the kernel's written tiles."""
    out = sum(p.rows * p.cols * size_of(p.dtype) for p in kernel.params
              if p.kind == "tile" and p.mode in ("Out", "InOut"))
    if out:
        return out
    moved = sym.const_value(kernel.comm.bytes) if kernel.comm is not None else None
    return int(moved or 0)


def message_cost(kernel: N.Kernel, machine: "Machine", module: N.Module) -> Optional[MessageCost]:
    """The cost of one message of `kernel` (a collective's, `kernel.comm` set), or None when
    it moves nothing between devices (no comm, or a group of one)."""
    c = kernel.comm
    if c is None or c.group <= 1:
        return None
    p = c.group
    across = spans_servers(module, c.over, p, machine.devices_per_server)
    t = tile_bytes(kernel)
    if across:
        algorithm, gbps, lat = "ring", machine.network_gbps, machine.network_latency_ns
        steps = 2 * (p - 1) if c.kind == "allreduce" else p - 1
    else:
        algorithm, gbps, lat = "mesh", machine.link_gbps, machine.link_latency_ns
        steps = 2 if c.kind == "allreduce" else 1
    step_bytes = t if c.kind == "reduce_scatter" else t / p
    reduce = 0
    if c.kind in REDUCING:
        # the additions of the reduce-scatter phase: p - 1 addends of a step's chunk
        reduce = math.ceil((p - 1) * step_bytes / machine.vector_bytes_per_cycle)
    # decision: round before ceil, so float noise never adds a cycle (as cost.py)
    transfer = max(1, _cycles(steps * step_bytes / gbps, machine) + reduce)  # GB/s: bytes/ns
    latency = _cycles(steps * lat, machine)
    return MessageCost(algorithm, steps, step_bytes, gbps, lat, reduce, transfer + latency,
                       latency)


def _cycles(ns: float, machine: "Machine") -> int:
    return math.ceil(round(ns * machine.clock_ghz, 6))


def comm_cost(kernel: N.Kernel, machine: "Machine", module: N.Module) -> Optional[tuple[int, int]]:
    """`(UNIT_COMM, cycles)` of a collective's kernel, or None when it moves nothing."""
    m = message_cost(kernel, machine, module)
    return None if m is None else (UNIT_COMM, m.cycles)


def comm_latencies(module: N.Module, machine: "Machine") -> list[int]:
    """Per kernel of `module` (in order), the latency cycles of its messages (wsp_kcost's
    `latency`): 0 for every kernel that is not a collective's."""
    out = []
    for k in module.kernels:
        m = message_cost(k, machine, module) if k.comm is not None else None
        out.append(0 if m is None else m.latency_cycles)
    return out


def _moved(kernel: N.Kernel, messages: int) -> int:
    """Bytes `messages` messages of `kernel` move between devices: `Comm.bytes` each when it is
    a constant; a copy's (allgather, all_to_all) is its tile unless its source is local, which
    the lowering says per task: (p - 1) / p of the messages when the shards are even (they
    are: docs/distributed.md, "Layouts")."""
    c = kernel.comm
    each = sym.const_value(c.bytes)
    if each is not None:
        return messages * int(each)
    return messages * (c.group - 1) * tile_bytes(kernel) // c.group


def collective_table(module: N.Module, machine: "Machine", trace, texts: list[str]) -> list[dict]:
    """Per collective of the run (its statement, `texts[stmt]`), in order of first start on the
    model's timeline: its kind, axis, group, algorithm, messages (tile tasks), the bytes they
    move between devices (`Comm.bytes` each), the cycles of one message, and the modelled time
    from its first message's start to its last one's end (`--stats`, docs/running.md)."""
    import numpy as np

    sim = trace.sim
    if sim is None or not len(sim):
        return []
    kernels = module.kernels
    ev = trace.events
    rows: dict[int, dict] = {}
    for stmt in np.unique(ev["stmt"]).tolist():
        at = np.nonzero(ev["stmt"] == stmt)[0]
        ks = np.unique(ev["kernel"][at]).tolist()
        comm = [kernels[k] for k in ks if 0 <= k < len(kernels) and kernels[k].comm is not None]
        if not comm:
            continue
        c = comm[0].comm
        moved = 0
        for k in ks:  # (a group of one device moves nothing between devices)
            if 0 <= k < len(kernels) and kernels[k].comm is not None and c.group > 1:
                n = int(np.count_nonzero(ev["kernel"][at] == k))
                moved += _moved(kernels[k], n)
        cost = message_cost(comm[0], machine, module)
        start, finish = int(sim["start"][at].min()), int(sim["finish"][at].max())
        busy = int((sim["finish"][at] - sim["start"][at]).sum())
        per_us = machine.clock_ghz * 1000.0
        rows[start * (1 << 20) + stmt] = {
            "collective": texts[stmt] if 0 <= stmt < len(texts) else f"statement {stmt}",
            "kind": c.kind, "over": c.over, "group": c.group,
            "algorithm": cost.algorithm if cost else "local",
            "messages": len(at), "bytes": moved,
            "message_cycles": cost.cycles if cost else None,
            "modelled_us": (finish - start) / per_us, "busy_us": busy / per_us}
    return [rows[k] for k in sorted(rows)]
