"""A kernel's pipeline on one AI core: its stages per pipe, their dependencies, and the time a
list schedule of them takes. Shared by the cycle model (`backends/cpu/cost.py`, which costs a
kernel by it) and the Ascend back end (whose emitted loops it follows), so neither back end
imports the other (the import-linter contract) and neither models a kernel its own way.

The pipes of a 910B / A3 AI core (Ascend C's `pipe_t`): MTE2 (GM -> L1 / UB), MTE1 (L1 -> L0A /
L0B), M (the cube's `Mmad`), FIX (L0C -> GM or UB, the fixpipe), V (the vector unit), MTE3
(UB -> GM), S (the scalar unit). Each pipe runs its stages in program order, one at a time (an
instruction queue per pipe); a stage starts when its pipe is free and every stage it waits for
has ended. `schedule` places the stages so (a list schedule: integer cycles, deterministic), and
`Pipeline.cycles` is the last end. Double buffering is written as dependencies: a load into
buffer b of stage i waits for the consumer of stage i - buffers (the buffer's previous user), so
with two buffers stage i's MTE2 overlaps stage i-1's compute and the time is about prologue +
steps x the slowest pipe per step + epilogue. Relaxing a dependency never delays a stage (every
start is a max of ends), so double buffering never makes a kernel slower.

What the stages are, from the same decisions the emitters make:
- A matmul (`cube_stages`): the loops of `backends/cube.py`'s tiling. Per C block, per L1 stage
  (`step_k` deep) one MTE2 of the A and B panels (l1_buffers copies), per L0 step (`base_k` deep)
  one MTE1 of both operands (l0_buffers copies) and one Mmad, then one FIX of the block (one L0C
  buffer: the next block's first Mmad waits for it). An accumulator operand (`acc = c` from
  GM) is one MTE2 of the block before its first Mmad.
- A vector kernel (`vector_stages`, `vector_units`): per chunk of rows (the Ascend emitter's
  chunks, `ub_plan.fit`; per block of columns and per pass too when a row does not fit) one
  MTE2 of the chunk's inputs, one V of its ops and one MTE3 of its results, through two
  buffers when there is more than one chunk (the emitter's queues).

Transfer rates are per core (`Rates.of`): global memory at the core's equal share of HBM, a
matmul's operand panels at its share of L2 (they are re-read by the tasks of the other output
blocks: see ascend910b.toml, `l2_gbps`), L1 -> L0 at `l1_bytes_per_cycle`, L0C out at
`fix_bytes_per_cycle` (capped by the core's HBM share when it goes to GM). A DMA between GM and
a buffer moves whole `dma_block_bytes` blocks per row (a row is one burst, rounded up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from .cube import FRACTAL, CubeTiling, fractal_k

if TYPE_CHECKING:
    from .machine import Machine

PIPES = ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S")

# What the vector pipe waits for besides its repeats (the vector matmul of a vector kernel pays
# them per (row, k): `cpu/cost.vector_matmul`). Both assumed, no published figure at hand: a
# `PipeBarrier<PIPE_V>` (or the scalar unit's wait for the vector pipe, `V_S`) drains the vector
# pipeline, about its depth; a scalar `GetValue` / `SetValue` of the Unified Buffer a few cycles.
VECTOR_BARRIER_CYCLES = 16
SCALAR_ACCESS_CYCLES = 4


@dataclass(frozen=True)
class Stage:
    """One unit of work on one pipe: `cycles` long, after the stages `after` (indices of earlier
    stages of the same pipeline) have ended; `port`: the shared path it also occupies ("GM":
    the core's share of HBM, which MTE2 reads, MTE3 and FIX writes split), or none; `what`
    names it for traces and docs."""

    pipe: str
    cycles: int
    after: tuple[int, ...] = ()
    what: str = ""
    port: str = ""


@dataclass(frozen=True)
class Pipeline:
    """A kernel's stages in program order (see the module doc)."""

    stages: tuple[Stage, ...]

    def schedule(self) -> list[tuple[int, int]]:
        """(start, end) of every stage: each pipe in program order, each stage after its pipe's
        previous stage and after the stages it waits for, and in the first gap of its port
        long enough for it (two pipes' DMAs share the port's bandwidth by taking turns: a
        load may go before an earlier-issued store that is still waiting for its data)."""
        free: dict[str, int] = {}
        busy: dict[str, list[tuple[int, int]]] = {}
        out: list[tuple[int, int]] = []
        for i, s in enumerate(self.stages):
            if any(a >= i or a < 0 for a in s.after):
                raise ValueError(f"stage {i} waits for a later stage: {s.after}")
            start = max([free.get(s.pipe, 0)] + [out[a][1] for a in s.after])
            if s.port and s.cycles:
                spans = busy.setdefault(s.port, [])
                for b, e in spans:  # sorted, disjoint: the first gap that fits
                    if start + s.cycles <= b:
                        break
                    start = max(start, e)
                spans.append((start, start + s.cycles))
                spans.sort()
            end = start + s.cycles
            out.append((start, end))
            free[s.pipe] = end
        return out

    @property
    def cycles(self) -> int:
        """The kernel's time: the last stage's end (at least 1)."""
        return max([1] + [end for _, end in self.schedule()])

    def busy(self) -> dict[str, int]:
        """Cycles each pipe is busy (the pipes with work only)."""
        out: dict[str, int] = {}
        for s in self.stages:
            if s.cycles:
                out[s.pipe] = out.get(s.pipe, 0) + s.cycles
        return out


@dataclass(frozen=True)
class Rates:
    """Bytes per cycle of one core's transfers, and its cube's MACs per cycle per input size."""

    hbm: float          # GM <-> buffers: the core's share of HBM
    l2: float           # a matmul's operand panels: the core's share of L2
    l1_to_l0: float     # MTE1
    fix: float          # L0C -> UB (to GM: min(fix, hbm))
    vector: int         # V: bytes per cycle (one 256-byte repeat)
    block: int          # the DMA's block
    cube_macs: dict     # {input element bytes: MACs per cycle}

    @classmethod
    def of(cls, machine: "Machine", cores: int) -> "Rates":
        share = machine.clock_ghz * cores
        return cls(hbm=machine.hbm_gbps / share, l2=machine.l2_gbps / share,
                   l1_to_l0=machine.l1_bytes_per_cycle, fix=machine.fix_bytes_per_cycle,
                   vector=machine.vector_bytes_per_cycle, block=machine.dma_block_bytes,
                   cube_macs={1: 2 * machine.cube_macs_per_cycle,
                              2: machine.cube_macs_per_cycle,
                              4: machine.cube_f32_macs_per_cycle})


def transfer(nbytes: float, rate: float) -> int:
    """Cycles to move `nbytes` at `rate` bytes per cycle (0 for nothing)."""
    # decision: round before ceil, so float noise (1.6 is not exact) never adds a cycle
    return math.ceil(round(nbytes / rate, 6)) if nbytes > 0 else 0


def dma_bytes(rows: int, row_bytes: int, block: int) -> int:
    """Bytes a GM <-> buffer DMA moves for `rows` rows of `row_bytes`: each row one burst of
    whole blocks."""
    return rows * -(-row_bytes // block) * block


def mmad_cycles(m: int, n: int, k: int, in_bytes: int, rates: Rates) -> int:
    """Cycles of one Mmad of m x k by k x n: whole fractals (16 x 16 x fractal_k), at the cube's
    rate for the input size."""
    fk = fractal_k(in_bytes)
    fractals = -(-m // FRACTAL) * -(-n // FRACTAL) * -(-k // fk)
    return -(-fractals * FRACTAL * FRACTAL * fk // rates.cube_macs[in_bytes])


@dataclass(frozen=True)
class MatmulIO:
    """Where one matmul's data comes from and goes: operand panels from GM (`panel_rate`
    bytes per cycle; `scale_a`/`scale_b`: bytes a strided view touches per byte it holds), an
    accumulator block read from GM first (`acc`), the result written as `out_bytes` elements
    to GM (`to_gm`) or handed to the vector unit in UB."""

    panel_rate: Optional[float] = None
    out_bytes: int = 4
    acc: bool = False
    to_gm: bool = True
    scale_a: float = 1.0
    scale_b: float = 1.0


def cube_stages(t: CubeTiling, io: MatmulIO, rates: Rates, after: tuple[int, ...] = (),
                first: int = 0) -> list[Stage]:
    """The stages of one matmul with tiling `t` (module doc), numbered from `first`, the first
    of them after the stages `after`."""
    out: list[Stage] = []
    fix_rate = min(rates.fix, rates.hbm) if io.to_gm else rates.fix
    l1_users: list[int] = []   # per L1 stage (in order): its last MTE1
    l0_users: list[int] = []   # per L0 step (in order): its Mmad
    last_fix: Optional[int] = None

    def add(stage: Stage) -> int:
        out.append(stage)
        return first + len(out) - 1

    for bm in range(t.blocks_m):
        rm = min(t.base_m, t.m - bm * t.base_m)
        for bn in range(t.blocks_n):
            cn = min(t.base_n, t.n - bn * t.base_n)
            block_after = list(after) + ([last_fix] if last_fix is not None else [])
            acc = None
            if io.acc:
                acc = add(Stage("MTE2", transfer(dma_bytes(rm, cn * io.out_bytes, rates.block),
                                                 rates.hbm), tuple(after),
                                f"acc {rm}x{cn}", "GM"))
            mmad = None
            for s1 in range(t.l1_stages):
                kd = min(t.step_k, t.k - s1 * t.step_k)
                reuse = l1_users[-t.l1_buffers] if len(l1_users) >= t.l1_buffers else None
                panels = (io.scale_a * dma_bytes(rm, kd * t.in_bytes, rates.block)
                          + io.scale_b * dma_bytes(kd, cn * t.in_bytes, rates.block))
                load = add(Stage("MTE2", transfer(panels, rates.l2 if io.panel_rate is None
                                                  else io.panel_rate),
                                 tuple(after) + ((reuse,) if reuse is not None else ()),
                                 f"A {rm}x{kd}, B {kd}x{cn} -> L1"))
                for s0 in range(-(-kd // t.base_k)):
                    kk = min(t.base_k, kd - s0 * t.base_k)
                    reuse0 = l0_users[-t.l0_buffers] if len(l0_users) >= t.l0_buffers else None
                    mte1 = add(Stage("MTE1", transfer((rm + cn) * kk * t.in_bytes,
                                                      rates.l1_to_l0),
                                     (load,) + ((reuse0,) if reuse0 is not None else ()),
                                     f"L1 -> L0A {rm}x{kk}, L0B {kk}x{cn}"))
                    waits = [mte1] + ([mmad] if mmad is not None else block_after)
                    if acc is not None and mmad is None:
                        waits.append(acc)
                    mmad = add(Stage("M", mmad_cycles(rm, cn, kk, t.in_bytes, rates),
                                     tuple(waits), f"Mmad {rm}x{cn}x{kk}"))
                    l0_users.append(mmad)
                l1_users.append(mmad)
            last_fix = add(Stage("FIX", transfer(rm * cn * io.out_bytes, fix_rate), (mmad,),
                                 f"L0C {rm}x{cn} -> {'GM' if io.to_gm else 'UB'}",
                                 "GM" if io.to_gm else ""))
    return out


def vector_stages(in_bytes: Sequence[int], out_bytes: Sequence[int], v_cycles: int,
                  chunks: int, rates: Rates, rate: Optional[float] = None,
                  buffers: Optional[int] = None) -> list[Stage]:
    """The stages of a vector kernel in `chunks` chunks of rows: `in_bytes` / `out_bytes` the
    DMA bytes of each input / result over all rows, `v_cycles` its vector work over all rows,
    each split evenly over the chunks (the emitter's chunks are equal: R divides the rows).
    Two buffers per queue when there is more than one chunk, as the emitter's queues (`buffers`
    overrides it)."""
    chunks = max(1, chunks)
    unit = VectorUnit(sum(in_bytes) / chunks, -(-v_cycles // chunks), sum(out_bytes) / chunks)
    return vector_units([unit] * chunks, rates, rate, buffers or (2 if chunks > 1 else 1))


@dataclass(frozen=True)
class VectorUnit:
    """One iteration of a vector kernel's loops (a chunk of rows, of a block of columns, of a
    pass): the bytes it loads, its vector cycles, the bytes it stores."""

    in_bytes: float
    v_cycles: int
    out_bytes: float


def vector_units(units: Sequence[VectorUnit], rates: Rates, rate: Optional[float] = None,
                 buffers: int = 1) -> list[Stage]:
    """The stages of a vector kernel's iterations in order: per unit an MTE2, a V and an MTE3
    (none when it moves no bytes), through `buffers` buffers per queue (the emitter's queues
    are declared once, so the buffering runs on across blocks of columns and passes)."""
    port = "GM" if rate is None else ""
    rate = rates.hbm if rate is None else rate
    out: list[Stage] = []
    vs: list[int] = []
    stores: list[int] = []
    for c, u in enumerate(units):
        reuse = (vs[c - buffers],) if c >= buffers else ()
        load = len(out)
        out.append(Stage("MTE2", transfer(u.in_bytes, rate), reuse, f"chunk {c} in", port))
        out_reuse = (stores[c - buffers],) if c >= buffers else ()
        vs.append(len(out))
        out.append(Stage("V", u.v_cycles, (load,) + out_reuse, f"chunk {c} ops"))
        stores.append(len(out))
        out.append(Stage("MTE3", transfer(u.out_bytes, rate), (vs[-1],), f"chunk {c} out",
                         port))
    return out


def chain(parts: Iterable[list[Stage]]) -> Pipeline:
    """One pipeline of parts built with consecutive `first` numbers."""
    stages: list[Stage] = []
    for p in parts:
        stages.extend(p)
    return Pipeline(tuple(stages))
