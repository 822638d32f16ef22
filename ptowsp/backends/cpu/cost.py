"""Kernel costs for the cycle model: each kernel's unit and duration on one core of a machine.

`kernel_costs(module, machine)` counts the work of every kernel's op DAG (shapes are static, so
this is exact arithmetic, not a measurement) and returns `(unit, cycles)` per kernel, in
`module.kernels` order: the runtime indexes costs by kernel index (wsp_kcost in
wsp_runtime.h). It models one core in isolation; dispatch, dependencies and contention are the
C replay's business.

The model, and what it assumes:
- A kernel runs where the Ascend emitter puts it: on a cube core (unit 1) when all its work is
  matmuls the cube runs (`backends/cube.runs_on_cube`, the rule `aicore.is_cube` asks too: the
  kernel's stores, dtypes and pads, and no task passing it a gather or column-strided view),
  every other kernel on a vector core (unit 0), a matmul among its ops included, except a
  kernel the emitter splits (`backends/mixed_split.py`: matmuls and vector work, in stages
  alternating between the cube and the vector cores), which runs on an AI Core group (unit
  1): its stages one after the other, each cube stage's pipeline and each vector stage's
  cost as a vector kernel's, below (in the emitter's chunks of that stage; shared by the two
  AIVs when row-local). An `extern c` kernel is opaque: vector unit,
  memory time only.
- A cube kernel is a pipeline of stages per pipe (`backends/pipes.py`, its module doc):
  each matmul runs the loops of `backends/cube.py`'s tiling (the loops the Ascend emitter
  writes): per C block and L1 stage an MTE2 of the operand panels (at the core's share of
  `l2_gbps`: a GEMM's panels are re-read by the other blocks' tasks), per L0 step an MTE1 and
  an Mmad of whole fractals (16 x 16 x 16 at `cube_macs_per_cycle` for f16 / bf16, 16 x 16 x 8
  at `cube_f32_macs_per_cycle` for f32), per block a FIX of the product (to GM at the core's
  HBM share), double-buffered as the tiling says. Its time is the list schedule's, so a
  GEMM block costs about its first load + its Mmads + its FIX. A `convert` of the product is
  the fixpipe's, and a convert or transpose between a parameter and the matmul is the cube's
  load (free). (`cube_pipeline` also places vector ops between matmuls in op order, for a
  kernel with both: no such kernel runs on the cube core, a mixed kernel being split into
  stages of one kind each.)
- A matmul in a vector kernel is the vector matmul `aicore/matmul.py` writes, counted call by
  call (`vector_matmul`): C[i, :] += a[i, k] * B[k, :] as, per (row, k), a scalar read of
  a[i, k], a `Muls` and an `Add` over a row of C (whole 256-byte repeats) and two
  `PipeBarrier<PIPE_V>`; a @ transpose(s) as a `Mul` and a `ReduceSum` of a row pair and two
  barriers per (row, column), the sums gathered by the scalar unit; transpose(s) @
  transpose(t) a column at a time. A right operand that is a parameter streams from GM in
  blocks of rows through a single-buffered queue, once per chunk of rows: its loads wait for
  the vector work on the previous block, so they add to the V pipe's time. A barrier is
  `pipes.VECTOR_BARRIER_CYCLES`, a scalar access of UB `pipes.SCALAR_ACCESS_CYCLES` (both
  assumed).
- A vector kernel is the chunk pipeline of pipes.py in the Ascend emitter's chunks
  (`vector_fit`: `backends/ub_plan.fit`, the plan below both back ends that the emitter's
  search measures the same footprints as, tests/ascend/test_ub_plan.py): per chunk of rows an
  MTE2, a V and an MTE3, double-buffered when there is more than one chunk; a row wider than
  the UB per block of columns too, and per pass (each pass loads its inputs again, the last
  one stores). `chunks=` overrides the rows' chunks (one pass, whole rows). A kernel the
  emitter refuses (nothing fits the UB) is the pipeline's steady state, max(compute, memory).
  Its parts:
  - Vector: an op costs ceil(elements * bytes / vector_bytes_per_cycle) cycles, one 256-byte
    repeat per cycle; transcendental ops (exp log sqrt rsqrt tanh sigmoid sin cos gelu silu pow
    softmax) cost four times that (assumed: no published per-op figure; they take several
    instructions each). Reductions count the elements they read; broadcast, transpose, slices,
    interleave, concat and gather move data and count once (one `Gather` / `Copy` pass), but
    in a kernel the emitter's search put on scalar moves (`Sorts.moves` False: its moves'
    offsets did not fit the UB) a move is element by element on the scalar unit
    (`_scalar_move_cycles`: two or three UB accesses an element). A sort (`sort`, `topk`) is what
    the emitter writes for it (`_sort_cycles`, counted by `sort_plan.sort_work`, below both
    back ends): the scalar unit's staging of the keys and read-back of the results, Sort32's
    runs and MrgSort's passes (8 bytes a pair at the vector rate, assumed), their barriers,
    whole rows or by blocks as the emitter's plan chose (`vector_fit`), or the scalar rank
    loop when their scratch did not fit; a topk's values and indices one sort.
  - Memory: every tile parameter crosses HBM once (In read, Out written, InOut both; an input
    once per pass that reads it), at the core's equal share of the HBM bandwidth. A parameter that every call of the kernel binds to
    a tensor placed on chip (`location = l2 | l1 | ub`, the same level for all) moves at that
    level's rate instead: the core's share of `l2_gbps`, or `l1_bytes_per_cycle` /
    `ub_bytes_per_cycle` of its own (calls that disagree keep HBM: one cost per kernel).
- A strided view (`X[r, 0:64:2]`, language.md section 6) moves the DMA blocks its elements
  touch, not its elements: a tile row whose elements lie `k` apart along the tensor's last
  dimension touches the `dma_block_bytes` blocks covering its span (one block per element
  once `k * element size` reaches a block). A kernel has one cost, so a parameter takes the
  largest over the kernel's calls (`touched_bytes`). A step on the rows moves whole rows, as
  an unstrided view does.
- A collective's kernel (`Kernel.comm`, made by the device lowering) is a message of its
  algorithm on the interconnect: comm.py costs it, on unit 2 (the device's comm engine).
- Per task, not here: a kernel's `add_cycles(n)` adds n (from the task's scalars) and a
  schedule's `trace = cycles(key)` replaces the cost (the enumerator fills `wsp_task.cycles`;
  simlog_cycles.c gives each distinct cost its own entry).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from ...dtypes import size_of
from ...ir import nodes as N
from ...ir.passes import plan_kernels as PK
from ...primitives import OPS
from .. import pipes as P
from ..cube import cube_tiling, runs_on_cube, vector_only_kernels
from ..mixed_split import CUBE, split_mixed
from ..move_plan import MOVE_OPS
from ..sort_plan import ON_SORT32, SORT_OPS, Sorts, SortWork, sort_pairs, sort_work
from ..ub_plan import Fit
from ..ub_plan import fit as ub_fit
from ..vector_plan import STREAM_BYTES, in_place_transposes, pc, streamed_operands, vcount

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
    vector_only = vector_only_kernels(module)
    return [(k.comm is not None and comm_cost(k, machine, module))
            or kernel_cost(k, machine, places.get(k.name), touched.get(k.name),
                           vector_only=vector_only)
            for k in module.kernels]


def kernel_unit(kernel: N.Kernel, vector_only: frozenset = frozenset()) -> int:
    """The unit a kernel runs on: the cube when the Ascend emitter puts it there
    (`backends/cube.runs_on_cube`; `vector_only`: `vector_only_kernels` of its module), else
    (extern kernels, and kernels mixing a matmul with vector work, too) vector."""
    if kernel.is_extern:
        return UNIT_VECTOR
    if runs_on_cube(kernel, vector_only) or _split(kernel, vector_only) is not None:
        return UNIT_CUBE
    return UNIT_VECTOR


def _split(kernel: N.Kernel, vector_only: frozenset):
    """The kernel's stages on the cube and the vector cores when the emitter runs it split
    (`backends/mixed_split.py`: a kernel mixing matmuls and vector work), else None."""
    if kernel.is_extern or kernel.name in vector_only or runs_on_cube(kernel, vector_only):
        return None
    return split_mixed(kernel)


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
                touched: "dict[str, int] | None" = None,
                chunks: "int | None" = None,
                vector_only: frozenset = frozenset()) -> tuple[int, int]:
    """`(unit, cycles)` of one kernel on one core of its unit (`places`: its parameters placed
    on chip, from `placements`; `touched`: the bytes a strided parameter moves, from
    `touched_bytes`; `chunks`: the Ascend emitter's row chunks of a vector kernel, when the
    caller can ask it; `vector_only`: the kernels of its module kept off the cube by their
    views, `vector_only_kernels`)."""
    if kernel.is_extern:
        return UNIT_VECTOR, max(1, memory_cycles(kernel, machine, UNIT_VECTOR, places, touched))
    sp = _split(kernel, vector_only)
    if sp is not None:
        # decision: a split kernel's task is its stages one after the other (each waits for
        # the previous one's cross-core flag, and a task's stages for the previous task's):
        # a cube stage its pipeline on the group's AIC, a vector stage its cost on the AIVs
        # (a vector kernel's: the chunk pipeline in the chunks the emitter writes for that
        # stage's kernel, `vector_fit`), its rows shared by the two when the split is
        # row-local (`rows_split`). `chunks` (a caller's, of a whole vector kernel) belong to
        # no stage and are not used.
        share = 2 if sp.rows_split else 1
        total = 0
        for s in sp.stages:
            if s.kind == CUBE:
                total += cube_pipeline(s.kernel, machine, places or {}, touched or {}).cycles
            else:
                total += -(-kernel_cost(s.kernel, machine, places, touched)[1] // share)
        return UNIT_CUBE, max(1, total)
    unit = kernel_unit(kernel, vector_only)
    pipe = kernel_pipeline(kernel, machine, places, touched, chunks, vector_only)
    if pipe is not None:
        return unit, pipe.cycles
    # decision: a vector kernel the Ascend emitter refuses (nothing fits its UB, not even a
    # row in blocks of columns: `ub_plan.fit` is None) still runs here: it costs its steady
    # state, the slower of compute and memory (the chunk pipeline's limit as chunks grow).
    # (a streamed matmul operand is part of the compute: its single-buffered loads wait for
    # the vector work, and the other parameters' bytes are the memory side)
    compute = vector_cycles(kernel, machine) + _stream_cycles(kernel, machine, 1, places)
    return unit, max(1, compute, memory_cycles(kernel, machine, unit, places, touched,
                                               skip=_streamed_params(kernel)))


def vector_fit(kernel: N.Kernel) -> "Fit | None":
    """The Ascend emitter's chunking of vector kernel `kernel` (`ub_plan.fit`, below both back
    ends, on the kernel planned as the emitter plans it): R, the chunks, the blocks of columns
    and the passes; None when nothing fits the UB."""
    if kernel.is_extern or kernel.comm is not None:
        return None
    return ub_fit(kernel if kernel.plan is not None else PK.plan_kernel(kernel, fuse=False))


def kernel_pipeline(kernel: N.Kernel, machine: "Machine",
                    places: "dict[str, str] | None" = None,
                    touched: "dict[str, int] | None" = None,
                    chunks: "int | None" = None,
                    vector_only: frozenset = frozenset()) -> "P.Pipeline | None":
    """The kernel's stages per pipe (backends/pipes.py): a cube kernel as the cube tiling's
    loops (backends/cube.py); a vector kernel as the Ascend emitter's loops (`vector_fit`: its
    chunks of rows, blocks of columns and passes; `chunks` given: that many chunks of rows in
    one pass), its matmuls' vector work and streamed operands in its V stages. None for a
    vector kernel that does not fit the UB, and for an extern kernel (opaque)."""
    if kernel.is_extern or _split(kernel, vector_only) is not None:
        return None  # a split kernel is its stages' pipelines, on two kinds of core (kernel_cost)
    if kernel_unit(kernel, vector_only) == UNIT_CUBE:
        return cube_pipeline(kernel, machine, places or {}, touched or {})
    fit = None
    if chunks is None:
        fit = vector_fit(kernel)
        if fit is None:
            return None
        chunks = fit.nchunks
    rates = P.Rates.of(machine, machine.cores(UNIT_VECTOR))
    places = places or {}

    def moved(p: N.KParam) -> float:
        # a parameter placed on chip moves at its level's rate: as HBM bytes, the HBM-share
        # equivalent (the chunk pipeline has one rate)
        rate = {"ub": machine.ub_bytes_per_cycle, "l1": machine.l1_bytes_per_cycle,
                "l2": rates.l2}.get(places.get(p.name, "global"), rates.hbm)
        return _dma(p, rates, touched or {}) * rates.hbm / rate

    streamed = _streamed_params(kernel)
    ins = {p.name: moved(p) for p in kernel.params if p.kind == "tile"
           and p.mode in ("In", "InOut") and p.name not in streamed}
    outs = [moved(p) for p in kernel.params if p.kind == "tile" and p.mode in ("Out", "InOut")]
    v = (vector_cycles(kernel, machine, chunks, fit.sorts if fit is not None else ON_SORT32)
         + _stream_cycles(kernel, machine, chunks, places))
    if fit is None or fit.passes == 1:
        if fit is None:
            return P.chain([P.vector_stages(list(ins.values()), outs, v, chunks, rates)])
        # a row in blocks of columns: each block's chunks, the queues' buffers the emitter's
        return P.chain([P.vector_stages(list(ins.values()), outs, v, chunks * fit.blocks, rates,
                                        buffers=fit.plan.bufnum)])
    return P.Pipeline(tuple(P.vector_units(_pass_units(fit, machine, ins, sum(outs)), rates,
                                           buffers=fit.plan.bufnum)))


def _pass_units(fit: "Fit", machine: "Machine", ins: dict, out_bytes: float) -> list:
    """The iterations of a vector kernel run in passes (over its blocks of columns, or over its
    chunks of rows when column reductions feed the rows): each pass loads the inputs its ops
    read again and computes its ops (a reduction of an earlier pass is read back, not
    recomputed), the last one stores; each split evenly over the blocks and chunks. The V of
    a pass is its ops' (`_vector_op_cycles`, a matmul's `vector_matmul`) on the planned kernel
    the emitter writes (`fit.plan.k`)."""
    k, plan = fit.plan.k, fit.plan
    steps = fit.blocks * fit.nchunks
    units = []
    for n, cp in enumerate(plan.passes):
        read = {str(k.ops[i].attr) for i in cp.ops if k.ops[i].op == "param"}
        v = 0
        for i in sorted(cp.ops - cp.reads):
            op = k.ops[i]
            if op.op == "matmul":
                v += vector_matmul(k, i, machine, fit.nchunks).cycles
            elif op.op in SORT_OPS:  # each pass sorts for each op (no shared indices)
                v += _sort_cycles(k, i, machine, fit.nchunks, plan.sorts, {})
            elif op.op not in _FREE and op.shape is not None and i not in plan.in_place:
                v += _op_cycles(k, op, machine, plan.sorts)
        unit = P.VectorUnit(sum(b for p, b in ins.items() if p in read) / steps,
                            -(-v // steps), out_bytes / steps if n == len(plan.passes) - 1 else 0)
        units.extend([unit] * steps)
    return units


def kernel_pipes(module: N.Module, machine: "Machine") -> list["dict[str, int] | None"]:
    """Per kernel of `module` (in order), the cycles one task keeps each pipe busy (`--json`'s
    `kernels[].pipes`): its pipeline's `busy()`, a vector kernel's as one chunk (a pipe's busy
    time does not depend on the chunks, only the overlap does). None for a collective and an
    extern kernel (no pipeline)."""
    places = placements(module)
    touched = touched_bytes(module, machine)
    vector_only = vector_only_kernels(module)
    out: list["dict[str, int] | None"] = []
    for k in module.kernels:
        if k.comm is not None or k.is_extern:
            out.append(None)
            continue
        pipe = kernel_pipeline(k, machine, places.get(k.name), touched.get(k.name),
                               vector_only=vector_only)
        if pipe is None:  # a vector kernel that does not fit the UB: as one chunk
            pipe = kernel_pipeline(k, machine, places.get(k.name), touched.get(k.name),
                                   chunks=1, vector_only=vector_only)
        out.append(pipe.busy() if pipe is not None else None)
    return out


def _dma(p: N.KParam, rates: "P.Rates", touched: dict) -> int:
    """Bytes a DMA of parameter `p` moves: whole blocks per row (a strided view: the blocks its
    elements touch)."""
    if p.name in touched:
        return touched[p.name]
    return P.dma_bytes(p.rows, p.cols * size_of(p.dtype), rates.block)


def _source(ops, i: int) -> int:
    """The op a matmul operand reads through converts, casts and transposes (a parameter when
    it comes from GM)."""
    while ops[i].op in ("convert", "cast", "transpose") and ops[i].args:
        i = ops[i].args[0]
    return i


def _operand_paths(ops) -> set[int]:
    """The converts, casts and transposes between a parameter and the matmuls that are their
    only readers: the cube reads the parameter as it is in GM (an f16 operand natively, a
    transposed one with the transposing load), so they are no vector work."""
    readers: dict[int, list[tuple[int, int]]] = {}
    for i, op in enumerate(ops):
        for pos, a in enumerate(op.args):
            readers.setdefault(a, []).append((i, pos))
    out: set[int] = set()
    for i in range(len(ops) - 1, -1, -1):
        if ops[i].op in ("convert", "cast", "transpose") and readers.get(i) and all(
                (ops[u].op == "matmul" and pos < 2) or u in out for u, pos in readers[i]):
            if ops[_source(ops, i)].op == "param":
                out.add(i)
    return out


def _cube_bytes(ops, op: N.Op) -> int:
    """The element size the cube reads a matmul's operands at: the larger of its two sources'
    (`_source`), 2 for f16 / bf16, 4 for f32 (and wider types, which the cube has not)."""
    size = max(size_of(ops[_source(ops, a)].dtype) for a in op.args[:2])
    return 1 if size == 1 else 2 if size == 2 else 4


def cube_pipeline(kernel: N.Kernel, machine: "Machine", places: dict,
                   touched: dict) -> "P.Pipeline":
    """A kernel with matmuls on a cube core: its other inputs' MTE2, then in op order the vector
    ops before each matmul and the matmul's tiling (after them: it may read them), then the
    vector ops after the last matmul and the MTE3 of the results that do not leave through the
    fixpipe. `kernel_pipeline` uses it for the kernels the emitter puts on the cube (matmuls
    only) and `kernel_cost` for the cube stages of a split mixed kernel (matmuls only too);
    a kernel mixing both on one core is not emitted."""
    ops = kernel.ops
    rates = P.Rates.of(machine, machine.cores(UNIT_CUBE))
    params = {p.name: p for p in kernel.params}
    fixpipe = _fixpipe_converts(kernel)
    mms = [i for i, op in enumerate(ops) if op.op == "matmul"]
    # what the cube reads from GM: its operands' and accumulators' parameters
    cube_read = {_source(ops, a) for i in mms for a in ops[i].args}
    vec = [i for i, op in enumerate(ops) if op.shape is not None and op.op not in _FREE
           and op.op != "matmul" and i not in fixpipe and i not in _operand_paths(ops)]
    stored = {v: p for p, v in kernel.stores}
    out_of_fix = {i for i in mms if i in stored} | {i for i in fixpipe if i in stored}
    stages: list[P.Stage] = []

    def rate_of(name: str, default: float) -> float:
        loc = places.get(name, "global")
        return {"ub": float(machine.ub_bytes_per_cycle), "l1": float(machine.l1_bytes_per_cycle),
                "l2": rates.l2}.get(loc, default)

    other_in = [p for p in kernel.params if p.kind == "tile" and p.mode in ("In", "InOut")
                and not any(ops[i].op == "param" and str(ops[i].attr) == p.name
                            for i in cube_read)]
    pro: list[int] = []
    if other_in:
        cyc = sum(P.transfer(_dma(p, rates, touched), rate_of(p.name, rates.hbm))
                  for p in other_in)
        stages.append(P.Stage("MTE2", cyc, (), "inputs -> UB", "GM"))
        pro.append(len(stages) - 1)
    # in op order: the vector ops before each matmul (it may read them) run after what came
    # before, the matmul after them, the vector ops after the last matmul at the end
    # (conservative: the model does not overlap a kernel's vector work with its cube work)
    after = pro
    placed = 0
    for i in mms:
        op = ops[i]
        between = sum(_vector_op_cycles(kernel, ops[j], machine) for j in vec if placed <= j < i)
        placed = i + 1
        if between:
            stages.append(P.Stage("V", between, tuple(after), "vector work before a matmul"))
            after = [len(stages) - 1]
        a, b = op.args[0], op.args[1]
        m, n = op.shape
        k = ops[a].shape[1]
        t = cube_tiling(m, n, k, _cube_bytes(ops, op))

        def scale(x: int) -> float:
            src = _source(ops, x)
            if ops[src].op != "param" or str(ops[src].attr) not in touched:
                return 1.0
            p = params[str(ops[src].attr)]
            return touched[p.name] / max(1, p.rows * p.cols * size_of(p.dtype))

        srcs = [_source(ops, a), _source(ops, b)]
        names = [str(ops[s].attr) for s in srcs if ops[s].op == "param"]
        panel = min([rate_of(nm, rates.l2) for nm in names] or [rates.l2])
        acc = len(op.args) > 2 and ops[_source(ops, op.args[2])].op == "param"
        conv = next((c for c in fixpipe if ops[c].args[0] == i and c in stored), None)
        out_dtype = ops[conv].dtype if conv is not None else op.dtype
        io = P.MatmulIO(panel_rate=panel, out_bytes=size_of(out_dtype), acc=acc,
                        to_gm=i in out_of_fix or conv is not None,
                        scale_a=scale(a), scale_b=scale(b))
        stages.extend(P.cube_stages(t, io, rates, tuple(after), first=len(stages)))
        after = [len(stages) - 1]  # its last FIX: the product is out
    post = sum(_vector_op_cycles(kernel, ops[j], machine) for j in vec if j >= placed)
    if post:
        stages.append(P.Stage("V", post, tuple(after), "vector epilogue"))
        after = [len(stages) - 1]
    ends = after
    rest = [params[p] for p, v in kernel.stores if v not in out_of_fix and p in params]
    if rest:
        cyc = sum(P.transfer(_dma(p, rates, touched), rate_of(p.name, rates.hbm)) for p in rest)
        stages.append(P.Stage("MTE3", cyc, tuple(ends), "results -> GM", "GM"))
    return P.Pipeline(tuple(stages))


def cube_cycles(kernel: N.Kernel, machine: "Machine") -> int:
    """Cycles of the kernel's Mmads on one cube core (the M pipe's busy time): whole fractals
    of each matmul's tiling, at the cube's rate for its input size."""
    rates = P.Rates.of(machine, machine.cores(UNIT_CUBE))
    total = 0
    for op in kernel.ops:
        if op.op == "matmul":
            m, n = op.shape
            k = kernel.ops[op.args[0]].shape[1]
            total += P.mmad_cycles(m, n, k, _cube_bytes(kernel.ops, op), rates)
    return total


def vector_cycles(kernel: N.Kernel, machine: "Machine", chunks: int = 1,
                  sorts: Sorts = ON_SORT32) -> int:
    """Cycles of the kernel's ops on one vector core, as the vector path emits them: its
    matmuls as `vector_matmul`'s calls, its sorts as `sort_plan.sort_work`'s (run as `sorts`
    says: the emitter's, `vector_fit`), its rows in `chunks` chunks (a transpose that only
    matmuls read is read in place, never computed)."""
    in_place = _in_place_transposes(kernel.ops, frozenset(v for _, v in kernel.stores))
    pairs = sort_pairs(kernel.ops)
    total = 0
    for i, op in enumerate(kernel.ops):
        if op.op == "matmul":
            total += vector_matmul(kernel, i, machine, chunks).cycles
            continue
        if op.op in SORT_OPS:
            total += _sort_cycles(kernel, i, machine, chunks, sorts, pairs)
            continue
        if op.op in _FREE or i in in_place:
            continue
        if op.shape is None:
            # decision: scalar arithmetic runs on the core's scalar unit, beside the vector
            # pipeline: free next to tile work
            continue
        total += _op_cycles(kernel, op, machine, sorts)
    return total


def _op_cycles(kernel: N.Kernel, op: N.Op, machine: "Machine", sorts: Sorts) -> int:
    """A tile op's cycles: a vector op's, or, for a data move of a kernel the emitter's search
    put on its scalar-moves fallback (`sorts.moves` False: its Gathers' staging and offsets did
    not fit the UB), the scalar unit's element by element moves (`_scalar_move_cycles`)."""
    if op.op in MOVE_OPS and not sorts.moves:
        return _scalar_move_cycles(op)
    return _vector_op_cycles(kernel, op, machine)


def _scalar_move_cycles(op: N.Op) -> int:
    """A data move on the scalar unit (`scalar_ops.py`): a GetValue and a SetValue of the UB an
    element of the result, and a `gather_cols` reads its index too, each
    `pipes.SCALAR_ACCESS_CYCLES`."""
    accesses = 3 if op.op == "gather_cols" else 2
    return _elements(op.shape) * accesses * P.SCALAR_ACCESS_CYCLES


def _sort_cycles(kernel: N.Kernel, i: int, machine: "Machine", chunks: int, sorts: Sorts,
                 pairs: dict) -> int:
    """Cycles of sort op i as the emitter writes it (`sort_plan.sort_work`: Sort32 runs, MrgSort
    passes, the scalar unit's staging and read-back, or the scalar rank loop): Sort32 and
    MrgSort stream 8 bytes a pair at the vector unit's bytes per cycle (assumed: no published
    figure), a barrier or hand-off `pipes.VECTOR_BARRIER_CYCLES`, a scalar access of the UB
    `pipes.SCALAR_ACCESS_CYCLES`. A topk's two ops share one sort (`pairs`; in a kernel run in
    passes the emitter sorts for each, which this leaves out)."""
    op = kernel.ops[i]
    src = kernel.ops[op.args[0]]
    pair = pairs.get(i)
    role = None if pair is None else "first" if pair[0] == i else "second"
    w: SortWork = sort_work(sorts, src.dtype, src.shape[0], src.shape[1], op.shape[1],
                            op.op == "sort_values", role, chunks if src.shape[0] > 1 else 1)
    vb = machine.vector_bytes_per_cycle
    return (_ceil_div(w.sort32 * 32 * 8, vb) + _ceil_div(w.merged * 8, vb)
            + w.barriers * P.VECTOR_BARRIER_CYCLES + w.scalar * P.SCALAR_ACCESS_CYCLES)


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
                  touched: "dict[str, int] | None" = None,
                  skip: frozenset = frozenset()) -> int:
    """Cycles to move the kernel's tile parameters through one core's share of HBM (those
    in `places`: through the on-chip level they are placed in; those in `touched`: the DMA
    blocks their strided views touch; none of those in `skip`)."""
    if skip:
        kernel = dataclasses.replace(kernel, params=tuple(p for p in kernel.params
                                                          if p.name not in skip))
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


# -- the vector matmul (backends/ascend/aicore/matmul.py), call by call. The layout facts are
# the vector emitter's, one definition below both back ends (`backends/vector_plan.py`): a UB
# row holds its columns rounded up to 32 elements, an instruction covers whole 64-element f32
# repeats, a streamed operand moves in blocks of about 16 KiB of f32 rows.
# tests/backends/test_pipes.py counts the calls in the emitted kernels and checks these
# against them.


@dataclasses.dataclass(frozen=True)
class VectorMatmul:
    """One matmul as the vector path emits it: `form` ("rows": C[i, :] += a[i, k] * B[k, :],
    B resident; "streamed": the same, B streamed from GM; "dot": a @ transpose(s) as row dot
    products; "tt": transpose(s) @ transpose(t) a column at a time), `calls` {(AscendC call,
    elements it covers, 0 for a barrier or a scalar access): how many over the whole tile},
    `copies` (streamed blocks copied in, all chunks) and `cycles` (the V pipe's time: repeats,
    barriers and the scalar unit's accesses)."""

    form: str
    calls: dict
    copies: int
    cycles: int


def _in_place_transposes(ops, stored: frozenset) -> set[int]:
    """The transposes only matmuls read as an operand (the vector path reads them in place)."""
    return set(in_place_transposes(ops, stored))


def _streams(kernel: N.Kernel) -> dict[int, int]:
    """matmul op -> the parameter op of a right operand streamed from GM in blocks of rows."""
    stored = frozenset(p for p, _ in kernel.stores)
    return {i: p for i, (p, _) in streamed_operands(kernel.ops, stored).items()}


def _streamed_params(kernel: N.Kernel) -> frozenset:
    if kernel.is_extern:
        return frozenset()
    return frozenset(str(kernel.ops[s].attr) for s in _streams(kernel).values())


def _stream_cycles(kernel: N.Kernel, machine: "Machine", chunks: int,
                   places: "dict[str, str] | None" = None) -> int:
    """Cycles of the streamed matmul operands' loads: every chunk of rows copies the whole
    operand in again, block by block, at the vector core's HBM share (or the rate of the
    on-chip level it is placed in, `places`)."""
    if kernel.is_extern:
        return 0
    rates = P.Rates.of(machine, machine.cores(UNIT_VECTOR))
    params = {p.name: p for p in kernel.params}
    total = 0
    for s in _streams(kernel).values():
        p = params[str(kernel.ops[s].attr)]
        rate = {"ub": float(machine.ub_bytes_per_cycle), "l1": float(machine.l1_bytes_per_cycle),
                "l2": rates.l2}.get((places or {}).get(p.name, "global"), rates.hbm)
        total += P.transfer(_dma(p, rates, {}), rate)
    return total * max(1, chunks)


def vector_matmul(kernel: N.Kernel, i: int, machine: "Machine",
                  chunks: int = 1) -> VectorMatmul:
    """Matmul op `i` of `kernel` as the vector path emits it (aicore/matmul.py), its rows in
    `chunks` chunks (see VectorMatmul). Calls that hand off between the scalar and the vector
    unit once per matmul (the `wsp_sync` before its loops, set by what came before) are left
    out: a few cycles per matmul."""
    ops = kernel.ops
    op = ops[i]
    a, b = op.args[0], op.args[1]
    in_place = _in_place_transposes(ops, frozenset(v for _, v in kernel.stores))
    streams = _streams(kernel)
    m, n = op.shape
    inner = ops[a].shape[1]
    calls: dict[tuple[str, int], int] = {}
    copies = 0

    def call(name: str, times: int, elems: int = 0, barrier: bool = False) -> None:
        calls[name, elems] = calls.get((name, elems), 0) + times
        if barrier:
            calls["PipeBarrier", 0] = calls.get(("PipeBarrier", 0), 0) + times

    if a in in_place and b in in_place:
        form = "tt"  # resident: one pass over all rows
        call("Duplicate", n, pc(m), True)
        call("GetValue", n * inner + n * m)
        call("Muls", n * inner, pc(m), True)
        call("Add", n * inner, pc(m), True)
        call("SetValue", n * m)
        call("wsp_sync", n)
        chunks = 1
    elif b in in_place:
        form = "dot"
        call("Mul", m * n, inner, True)
        call("ReduceSum", m * n, inner, True)
        call("wsp_sync", m)
        call("GetValue", m * n)
        call("SetValue", m * n)
    else:
        rows = max(1, m // max(1, chunks))
        call("Duplicate", chunks, vcount(rows, n), True)
        call("GetValue", m * inner)
        call("Muls", m * inner, pc(n), True)
        call("Add", m * inner, pc(n), True)
        form = "rows"
        if i in streams:
            form = "streamed"
            p = next(x for x in kernel.params if x.name == str(ops[streams[i]].attr))
            kb = max(1, min(p.rows, STREAM_BYTES // (pc(p.cols) * 4)))
            copies = chunks * _ceil_div(inner, kb)
            if p.dtype != "f32":  # the block widened to f32 before the Muls read it
                call("Cast", copies, vcount(kb, n), True)
    if len(op.args) > 2:  # acc + a @ b: the product first, as ref
        call("Add", chunks, vcount(max(1, m // chunks), n), True)
    width = machine.vector_bytes_per_cycle
    cycles = 0
    for (name, elems), times in calls.items():
        if elems:
            cycles += times * _ceil_div(elems * 4, width)
        elif name in ("GetValue", "SetValue"):
            cycles += times * P.SCALAR_ACCESS_CYCLES
        else:  # a barrier, or the scalar unit waiting for the vector pipe (V_S)
            cycles += times * P.VECTOR_BARRIER_CYCLES
    return VectorMatmul(form, calls, copies, cycles)
