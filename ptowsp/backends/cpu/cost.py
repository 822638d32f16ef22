"""Kernel costs for the cycle model: each kernel's unit and duration on one core of a machine.

`kernel_costs(module, machine)` counts the work of every kernel's op DAG (shapes are static, so
this is exact arithmetic, not a measurement) and returns `(unit, cycles)` per kernel, in
`module.kernels` order: the runtime indexes costs by kernel index (wsp_kcost in
wsp_runtime.h). It models one core in isolation; dispatch, dependencies and contention are the
C replay's business.

The model, and what it assumes:
- A kernel with a `matmul` runs on a cube core (unit 1), every other kernel on a vector core
  (unit 0). An `extern c` kernel is opaque: vector unit, memory time only.
- Cube: the cube computes 16x16x16 fractals, so an M x K @ K x N matmul costs
  ceil(M/16) * ceil(N/16) * ceil(K/16) * 4096 / cube_macs_per_cycle cycles, whatever the
  operand dtypes (assumed: every dtype at the fp16 rate).
- Vector: an op costs ceil(elements * bytes / vector_bytes_per_cycle) cycles, one 256-byte
  repeat per cycle; transcendental ops (exp log sqrt rsqrt tanh sigmoid sin cos gelu silu pow
  softmax) cost four times that (assumed: no published per-op figure; they take several
  instructions each). Reductions count the elements they read; broadcast, transpose, slices,
  interleave, concat and gather move data and count once.
- Memory: every tile parameter crosses HBM once (In read, Out written, InOut both), at the
  core's equal share of the HBM bandwidth. A parameter that every call of the kernel binds to a
  tensor placed on chip (`location = l2 | l1 | ub`, the same level for all) moves at that
  level's rate instead: the core's share of `l2_gbps`, or `l1_bytes_per_cycle` /
  `ub_bytes_per_cycle` of its own (calls that disagree keep HBM: one cost per kernel).
- A strided view (`X[r, 0:64:2]`, language.md section 6) moves the DMA blocks its elements
  touch, not its elements: a tile row whose elements lie `k` apart along the tensor's last
  dimension touches the `dma_block_bytes` blocks covering its span (one block per element
  once `k * element size` reaches a block). A kernel has one cost, so a parameter takes the
  largest over the kernel's calls (`touched_bytes`). A step on the rows moves whole rows, as
  an unstrided view does.
- A kernel's cycles are max(compute, memory), at least 1: cores double-buffer their DMA
  against compute, so the slower of the two sets the pace.
- A collective's kernel (`Kernel.comm`, made by the device lowering) is a message of its
  algorithm on the interconnect: comm.py costs it, on unit 2 (the device's comm engine).
- Per task, not here: a kernel's `add_cycles(n)` adds n (from the task's scalars) and a
  schedule's `trace = cycles(key)` replaces the cost (the enumerator fills `wsp_task.cycles`;
  simlog_cycles.c gives each distinct cost its own entry).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...dtypes import size_of
from ...ir import nodes as N
from ...primitives import OPS

if TYPE_CHECKING:
    from ..machine import Machine

UNIT_VECTOR = 0
UNIT_CUBE = 1
FRACTAL = 16  # the cube's M, N and K granularity
TRANSCENDENTAL = frozenset(n for n, s in OPS.items() if s.transcendental)
TRANSCENDENTAL_FACTOR = 4
_FREE = frozenset(n for n, s in OPS.items() if s.plan == "leaf")


def kernel_costs(module: N.Module, machine: "Machine") -> list[tuple[int, int]]:
    """`(unit, cycles)` of every kernel of `module`, in `module.kernels` order: a collective's
    message on its device's comm engine (unit 2, comm.py), every other kernel on a core."""
    from .comm import comm_cost

    places = placements(module)
    touched = touched_bytes(module, machine)
    return [(k.comm is not None and comm_cost(k, machine, module))
            or kernel_cost(k, machine, places.get(k.name), touched.get(k.name))
            for k in module.kernels]


def kernel_unit(kernel: N.Kernel) -> int:
    """The unit a kernel runs on: cube with a `matmul`, else (extern kernels too) vector."""
    if kernel.is_extern:
        return UNIT_VECTOR
    return UNIT_CUBE if any(op.op == "matmul" for op in kernel.ops) else UNIT_VECTOR


def placements(module: N.Module) -> dict[str, dict[str, str]]:
    """{kernel: {tile parameter: location}} for the parameters every call of the kernel (in
    every schedule) binds to tensors of one on-chip location; the rest are in global memory."""
    where = {t.name: t.location for t in module.tensors}
    if all(loc == "global" for loc in where.values()):
        return {}
    from ...ir.visit import tasks

    seen: dict[tuple[str, str], set] = {}
    for s in module.schedules:
        for task in tasks(s.body):
            for a in task.args:
                if isinstance(a, N.TileArg):
                    seen.setdefault((task.kernel, a.param), set()).add(where.get(a.tensor, "global"))
    out: dict[str, dict[str, str]] = {}
    for (k, p), locs in seen.items():
        if len(locs) == 1 and "global" not in locs:
            out.setdefault(k, {})[p] = next(iter(locs))
    return out


def touched_bytes(module: N.Module, machine: "Machine") -> dict[str, dict[str, int]]:
    """{kernel: {tile parameter: bytes one pass moves}} for the parameters some call binds to a
    view strided along the tensor's last dimension: the largest over the calls of the DMA
    blocks the view touches (`strided_row_bytes` per tile row)."""
    from ...ir.visit import tasks

    kernels = {k.name: k for k in module.kernels}
    out: dict[str, dict[str, int]] = {}
    for s in module.schedules:
        for task in tasks(s.body):
            for a in task.args:
                if not isinstance(a, N.TileArg) or not a.steps or a.col_dim is None:
                    continue
                k = a.step(a.col_dim)
                if k == 1 or a.col_dim != len(a.offsets) - 1:
                    continue
                p = next(x for x in kernels[task.kernel].params if x.name == a.param)
                moved = p.rows * strided_row_bytes(p.cols, k, size_of(p.dtype),
                                                   machine.dma_block_bytes)
                per = out.setdefault(task.kernel, {})
                per[a.param] = max(per.get(a.param, 0), moved)
    return out


def strided_row_bytes(n: int, step: int, esize: int, block: int) -> int:
    """Bytes a DMA moves for `n` elements of `esize` bytes `step` apart: the `block`-byte
    blocks covering their span (from a block boundary), or one block each once they are a
    block or more apart; never less than the elements themselves."""
    if step * esize >= block:
        return max(n * esize, n * block)
    span = ((n - 1) * step + 1) * esize
    return max(n * esize, _ceil_div(span, block) * block)


def kernel_cost(kernel: N.Kernel, machine: "Machine",
                places: "dict[str, str] | None" = None,
                touched: "dict[str, int] | None" = None) -> tuple[int, int]:
    """`(unit, cycles)` of one kernel on one core of its unit (`places`: its parameters placed
    on chip, from `placements`; `touched`: the bytes a strided parameter moves, from
    `touched_bytes`)."""
    if kernel.is_extern:
        return UNIT_VECTOR, max(1, memory_cycles(kernel, machine, UNIT_VECTOR, places, touched))
    unit = kernel_unit(kernel)
    compute = cube_cycles(kernel, machine) + vector_cycles(kernel, machine)
    # decision: on a cube kernel the vector epilogue is added, not overlapped: it needs the
    # product first (conservative; the 910B runs it on the AI core's paired vector cores)
    return unit, max(1, compute, memory_cycles(kernel, machine, unit, places, touched))


def cube_cycles(kernel: N.Kernel, machine: "Machine") -> int:
    """Cycles of the kernel's matmuls on one cube core."""
    total = 0
    for op in kernel.ops:
        if op.op == "matmul":
            m, n = op.shape
            k = kernel.ops[op.args[0]].shape[1]
            fractals = _ceil_div(m, FRACTAL) * _ceil_div(n, FRACTAL) * _ceil_div(k, FRACTAL)
            total += _ceil_div(fractals * FRACTAL ** 3, machine.cube_macs_per_cycle)
    return total


def vector_cycles(kernel: N.Kernel, machine: "Machine") -> int:
    """Cycles of the kernel's non-matmul ops on one vector core."""
    fixpipe = _fixpipe_converts(kernel)
    total = 0
    for i, op in enumerate(kernel.ops):
        if op.op in _FREE or op.op == "matmul" or i in fixpipe:
            continue
        if op.shape is None:
            # decision: scalar arithmetic runs on the core's scalar unit, beside the vector
            # pipeline: free next to tile work
            continue
        total += _vector_op_cycles(kernel, op, machine)
    return total


def _vector_op_cycles(kernel: N.Kernel, op: N.Op, machine: "Machine") -> int:
    if OPS[op.op].plan == "red":
        src = kernel.ops[op.args[0]]
        elements = _elements(src.shape)
    else:
        elements = _elements(op.shape)
    # decision: an op works at the widest dtype it touches (a comparison's bool result, a
    # convert's narrower side are not what the vector unit streams)
    width = max([size_of(op.dtype)] + [size_of(kernel.ops[a].dtype) for a in op.args])
    cycles = _ceil_div(elements * width, machine.vector_bytes_per_cycle)
    return cycles * TRANSCENDENTAL_FACTOR if op.op in TRANSCENDENTAL else cycles


def _fixpipe_converts(kernel: N.Kernel) -> set[int]:
    """Indices of `convert` ops applied directly to a matmul result.

    decision: free, because the cube's fixpipe converts the accumulator on its way out of L0C;
    counting it on the vector unit would bill a GEMM for work the hardware does not do."""
    return {i for i, op in enumerate(kernel.ops)
            if op.op == "convert" and kernel.ops[op.args[0]].op == "matmul"}


def moved_bytes(kernel: N.Kernel, touched: "dict[str, int] | None" = None) -> int:
    """Bytes one task of the kernel moves: every tile parameter once (In read, Out written),
    an InOut twice (read and written); a strided one its `touched` bytes per pass."""
    moved = 0
    for p in kernel.params:
        if p.kind != "tile":
            continue
        passes = 2 if p.mode == "InOut" else 1
        moved += passes * _pass_bytes(p, touched)
    return moved


def _pass_bytes(p: N.KParam, touched: "dict[str, int] | None") -> int:
    plain = p.rows * p.cols * size_of(p.dtype)
    return touched.get(p.name, plain) if touched else plain


def kernel_flops(kernel: N.Kernel) -> int:
    """Arithmetic operations of one task of the kernel (docs/running.md, "Per-kernel table").

    decision: a matmul M x K @ K x N counts 2*M*N*K (a multiply and an add per MAC); every other
    tile op that computes counts one per element it produces (an `exp` one, as an `add`), a
    reduction one per element it reads, an op with an expansion (softmax) as the ops it expands
    into (so -O0 and -O2 count alike); conversions, views, leaves and scalar arithmetic count
    nothing (they move or name data); an extern kernel is opaque: 0."""
    ops = list(kernel.ops)
    total = 0
    for op in kernel.ops:
        expand = OPS[op.op].expand
        if expand is None:
            total += _op_flops(ops, op)
            continue
        first = len(ops)
        expand(op, op.args, lambda name, args, shape, dtype, attr=None:
               ops.append(N.Op(name, args, shape, dtype, attr)) or len(ops) - 1)
        total += sum(_op_flops(ops, x) for x in ops[first:])
    return total


def _op_flops(ops: list, op: N.Op) -> int:
    plan = OPS[op.op].plan
    if op.op == "matmul":
        m, n = op.shape
        return 2 * m * n * ops[op.args[0]].shape[1]
    if op.shape is None or op.op in _NOT_ARITHMETIC or plan not in ("ew", "red"):
        return 0
    return _elements(ops[op.args[0]].shape if plan == "red" else op.shape)


_NOT_ARITHMETIC = frozenset({"convert", "cast"})


def memory_cycles(kernel: N.Kernel, machine: "Machine", unit: int,
                  places: "dict[str, str] | None" = None,
                  touched: "dict[str, int] | None" = None) -> int:
    """Cycles to move the kernel's tile parameters through one core's share of HBM (those
    in `places`: through the on-chip level they are placed in; those in `touched`: the DMA
    blocks their strided views touch)."""
    if not places:
        moved = moved_bytes(kernel, touched)
        bytes_per_ns = machine.hbm_gbps / machine.cores(unit)
        cycles = moved / bytes_per_ns * machine.clock_ghz
        # decision: round before ceil, so float noise (1.8 is not exact) never adds a cycle
        return math.ceil(round(cycles, 6))
    cycles = 0.0
    for p in kernel.params:
        if p.kind != "tile":
            continue
        moved = (2 if p.mode == "InOut" else 1) * _pass_bytes(p, touched)
        loc = places.get(p.name, "global")
        if loc == "ub":
            cycles += moved / machine.ub_bytes_per_cycle
        elif loc == "l1":
            cycles += moved / machine.l1_bytes_per_cycle
        else:
            gbps = machine.l2_gbps if loc == "l2" else machine.hbm_gbps
            cycles += moved / (gbps / machine.cores(unit)) * machine.clock_ghz
    # decision: round before ceil, so float noise (1.8 is not exact) never adds a cycle
    return math.ceil(round(cycles, 6))


def _elements(shape) -> int:
    return 1 if shape is None else shape[0] * shape[1]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
