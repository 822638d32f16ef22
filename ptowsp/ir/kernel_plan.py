"""A kernel's plan: how its ops run (loop nests, registers, arrays, buffers, matmul steps).

The `plan-kernels` pass (`ir/passes/plan_kernels.py`) makes a `KernelPlan` and attaches it as
`Kernel.plan`; `ir/verify.py` checks it, `ir/printer.py` prints it, and the back ends
(`backends/cpu/kernels.py`, `backends/ascend/aicore.py`) follow it. This module is the data
they share and the facts they must agree on: what a blocked matmul step means (`MM_MR` x
`MM_NR` register blocks of C) and how many bytes a buffer takes (`held`, `buffer_bytes`).
Nothing here decides a plan.

Values are op indices of the planned kernel. Where a value lives is `KernelPlan.kinds[i]`:
  scalar  a scalar, computed once          leaf    a parameter, literal or iota, read in place
  inline  a cheap elementwise op of leaves, recomputed wherever it is read
  ew      an elementwise op computed per element in its nest: a register (a C local) there,
          and also a local array when read outside the nest (`KernelPlan.assign`)
  red     a reduction accumulated in its input's nest (row: in lane registers; column: in its
          row-vector array), its result a small array
  view    an index map over its operands (broadcast, transpose, slices, interleave, concat,
          gather)
  matmul  its own step, into an array or straight into the tile it is stored to (`into`)
  select  a sort or top-k of each row (`sort_values`, `sort_indices`): its own step, into an
          array
"""

from __future__ import annotations

from typing import Optional

from ..dtypes import HALF_DTYPES, size_of
from ..records import record

# A blocked matmul step (`PlanStep.blocked`) computes C in MM_MR x MM_NR register blocks, B's
# panels MM_NR columns wide: the cpu back end's code shape, which the planner's choices assume
MM_MR, MM_NR = 6, 16


@record
class LoopNest:
    """A loop nest of a kernel plan: `ops` per element over `shape`, reductions, stores."""

    shape: tuple[int, int]
    level: int
    ops: tuple[int, ...] = ()
    rowreds: tuple[int, ...] = ()
    colreds: tuple[int, ...] = ()
    stores: tuple[tuple[str, int], ...] = ()


@record
class PlanStep:
    """A kernel plan's step: a `matmul`, a `select` (a sort op) or `nests` (several: row i of
    each in turn)."""

    nests: tuple[LoopNest, ...] = ()
    matmul: Optional[int] = None
    select: Optional[int] = None
    blocked: bool = False  # register-blocked (else i-k-j)
    kc: int = 0  # a blocked matmul's K chunk
    pack_a: bool = False  # A converted into a packed panel (else read in place)
    pack_b: bool = True  # B's panels packed (else full panels read in place)
    small: bool = False  # the small-M form: every row at once over wide column panels
    dot: bool = False  # B is `transpose(s)` of an f32 value read in place: dot products of rows


@record
class KernelPlan:
    """How a kernel's ops run: kinds, steps, final stores, arrays in buffers reused by liveness."""

    kinds: tuple[str, ...]
    levels: tuple[int, ...]
    steps: tuple[PlanStep, ...]
    stores: tuple[tuple[str, int], ...]  # run after every step, in order
    into: tuple[tuple[int, str], ...] = ()  # matmuls computed in the tile they are stored to
    buffers: tuple[tuple[str, int], ...] = ()  # (held dtype, elements) of each local buffer
    assign: tuple[tuple[int, int], ...] = ()  # (value, buffer) of every materialised value
    temp_bytes_before: int = 0  # one buffer per materialised value
    temp_bytes_after: int = 0  # with buffers reused


def held(dtype: str) -> str:
    """The dtype a value of `dtype` is held in while a kernel computes (nodes.py: f16/bf16 in
    f32); buffers are shared only between values of one held dtype."""
    return "f32" if dtype in HALF_DTYPES else dtype


def buffer_bytes(dtype: str, n: int) -> int:
    """The bytes of a buffer of `n` values of held dtype `dtype`."""
    return n * size_of(dtype)


__all__ = ["LoopNest", "PlanStep", "KernelPlan", "held", "buffer_bytes", "MM_MR", "MM_NR"]
