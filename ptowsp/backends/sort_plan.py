"""The layout rules of a sort on the vector unit's `Sort32` / `MrgSort`, as facts about a kernel
without its text: which keys they take, the merge passes over a row, which two ops of a `topk`
/ `sort` share one sort, and how a kernel's sorts run (`Sorts`: whole rows, by blocks, or on
the scalar unit). Below both back ends: the Ascend emitter writes them
(`backends/ascend/aicore/sorting.py`, which says why each rule is what it is), the UB plan
(`backends/ub_plan.py`) sizes their buffers with them, and the cycle model
(`backends/cpu/cost.py`) may cost them: one rule, one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from ..dtypes import TABLE, kind_of
from .vector_plan import pc

SORT32 = 32  # scores one Sort32 repeat orders
MAX_REPEAT = 255  # Sort32's repeatTime range is [0, 255]
MAX_LISTS = 4  # lists one MrgSort merges
MAX_LIST = 4095  # pairs in one MrgSort list (MrgSort4Info's elementLengths)
SORT_OPS = ("sort_values", "sort_indices")
BLOCK = 2048  # columns a block of a row longer than 8192 (`sorting.blocked_lines`)
SMALL_BLOCK = 512  # ... and of a kernel whose whole-row sort scratch overflows the UB


@dataclass(frozen=True)
class Sorts:
    """How the sorts of one emission of a kernel run: on Sort32 / MrgSort (`vector`), whole
    rows where a row fits the merges and `block` is None or at least the row, else by blocks
    of `block` (or BLOCK) columns; `vector` false: on the scalar unit, which needs no scratch.
    `ub_plan.search` tries a kernel's sorts as whole rows, then (nothing fits the UB, not even
    chunks of one row) by blocks of SMALL_BLOCK, then on the scalar unit (`fallback`).

    It also carries the emission's other UB fallback, its data moves (`moves`, move_plan.py):
    True, on the vector unit (`Gather` over offsets built in the UB); False, every move on the
    scalar unit, which needs no staging or offsets: `ub_plan.search` tries that when nothing
    fits with them (the same search again, its sorts tried whole rows first)."""

    vector: bool = True
    block: Optional[int] = None
    moves: bool = True

    def fallback(self) -> Optional["Sorts"]:
        """The sorts of the next try when this one's scratch does not fit the UB: by blocks of
        SMALL_BLOCK, after blocks the scalar unit, after that none (the moves as they were)."""
        if not self.vector:
            return None
        return Sorts(False, None, self.moves) if self.block else Sorts(True, SMALL_BLOCK,
                                                                       self.moves)


ON_SORT32 = Sorts()  # the search's first try: Sort32 / MrgSort, whole rows where they fit


def has_sorts(ops) -> bool:
    """Whether any op of a kernel is a sort (`sort` / `topk`'s results)."""
    return any(op.op in SORT_OPS for op in ops)


def _group_sizes(lists: int) -> list[int]:
    """Lists merged by each MrgSort of a pass: 4 each, the tail 2, 3 or 3 + 2 (never 1)."""
    q, r = divmod(lists, MAX_LISTS)
    if r == 0:
        return [MAX_LISTS] * q
    if r == 1:
        return [MAX_LISTS] * (q - 1) + [3, 2]
    return [MAX_LISTS] * q + [r]


@lru_cache(maxsize=None)
def merge_passes(n: int) -> tuple:
    """The MrgSort passes over a row of n pairs sorted in runs of 32: each pass a tuple of
    groups (offset of its first list in pairs, lengths of its 2..4 lists). A group's result
    lands at its first list's offset in the other buffer, so the lists stay back to back."""
    lens = [min(SORT32, n - o) for o in range(0, n, SORT32)]
    passes = []
    while len(lens) > 1:
        groups, new, at, off = [], [], 0, 0
        for size in _group_sizes(len(lens)):
            g = tuple(lens[at:at + size])
            groups.append((off, g))
            new.append(sum(g))
            off += sum(g)
            at += size
        passes.append(tuple(groups))
        lens = new
    return tuple(passes)


def sortable(adt: str) -> bool:
    """Whether keys of dtype adt go to Sort32 (as f32 scores): floats but f64 (not an AICore
    type) and integers (bool is not sorted)."""
    return kind_of(adt) in ("float", "int") and TABLE[adt].c_compute != "double"


def sort32_fits(adt: str, n: int) -> bool:
    """Whether a sort of rows of n values of dtype adt runs on Sort32 and MrgSort as whole
    rows: sortable keys, while no merge needs a list past 4095 pairs (n <= 8192; longer rows
    go by blocks, `sorting.blocked_lines`)."""
    return sortable(adt) and all(ln <= MAX_LIST for p in merge_passes(n) for _, g in p
                                 for ln in g)


def whole_rows(sorts: Sorts, adt: str, n: int) -> bool:
    """Whether a sort of rows of n keys of dtype adt runs as whole rows under `sorts` (else by
    blocks of `sorts.block or BLOCK` columns; `sorts.vector` and `sortable(adt)` assumed)."""
    return sort32_fits(adt, n) and n <= (sorts.block or n)


def sort_pairs(ops) -> dict:
    """op -> (the op that sorts, the op that reads its indices) for each `topk` / `sort` whose
    values and indices are both used: one sort_values and one sort_indices of the same
    operand, order and k (the two results of one call), sorted once."""
    groups: dict = {}
    for j, o in enumerate(ops):
        if o.op in SORT_OPS:
            groups.setdefault((o.args, o.attr, o.shape), []).append(j)
    pairs = {}
    for g in groups.values():
        if len(g) == 2 and ops[g[0]].op != ops[g[1]].op:
            pairs[g[0]] = pairs[g[1]] = (g[0], g[1])
    return pairs


@dataclass(frozen=True)
class SortWork:
    """What the emitter writes for one sort op (`sorting.py`, `scalar_ops._select_lines`), as
    counts the cycle model bills (`cost._sort_cycles`): Sort32 repeats (32 scores each), the
    pairs MrgSort writes over all its passes, the pipe barriers and S_V / V_S hand-offs, and
    the scalar unit's GetValue / SetValue of the UB (staging the keys, the pad, the tie pass,
    reading the results back; the scalar path's rank loop)."""

    sort32: int = 0
    merged: int = 0
    barriers: int = 0
    scalar: int = 0

    def __add__(self, o: "SortWork") -> "SortWork":
        return SortWork(self.sort32 + o.sort32, self.merged + o.merged,
                        self.barriers + o.barriers, self.scalar + o.scalar)

    def times(self, n: int) -> "SortWork":
        return SortWork(self.sort32 * n, self.merged * n, self.barriers * n, self.scalar * n)


def _block_work(rows: int, w: int, kk: int, tie: bool) -> SortWork:
    """`_Sort.block` over `rows` rows of w columns: staging (a read and two writes a column,
    two writes a pad column), Sort32 over the runs, the merge passes (each pair of each row
    once a pass, a barrier after each), the hand-offs, and the tie pass over the first kk
    positions when it runs (keys assumed distinct: two reads a position, one at the row's
    end; a NaN's fix-up of a single run is not counted)."""
    pw = pc(w)
    passes = len(merge_passes(w))
    ties = rows * (2 * kk - (kk == w)) if tie else 0
    return SortWork(rows * pw // SORT32, rows * w * passes, 3 + passes,
                    3 * rows * w + 2 * rows * (pw - w) + ties)


def sort_work(sorts: Sorts, adt: str, rows: int, n: int, k: int, values: bool,
              role: Optional[str] = None, chunks: int = 1) -> SortWork:
    """The work of one sort op of a [rows, n] operand of dtype adt into [rows, k], run in
    `chunks` chunks of rows, its kernel's sorts as `sorts` says: `values` sort_values (a
    result is a read and a write) or sort_indices (a write); `role` "first" for the op of a
    topk pair that sorts (it also writes each index to the shared buffer), "second" for the
    one that reads them (`sort_pairs`), None alone."""
    r = -(-rows // max(1, chunks))
    put = (2 if values else 1) + (role == "first")
    if not (sorts.vector and sortable(adt)):  # _select_lines: n^2 reads a row, k writes
        return SortWork(scalar=r * (n + n * n + k)).times(chunks)
    if role == "second":  # paired_lines: the indices read back, the results written
        return SortWork(scalar=r * k * (1 + put)).times(chunks)
    if whole_rows(sorts, adt, n):
        refine = kind_of(adt) == "int" and TABLE[adt].bits > 16
        work = _block_work(r, n, k, bool(merge_passes(n)) or refine)
        return (work + SortWork(scalar=r * k * (1 + put))).times(chunks)
    w = sorts.block or BLOCK
    nb, kk = -(-n // w), min(k, w)
    work = SortWork()
    for b in range(nb):
        wb = min(w, n - b * w)
        work = work + _block_work(r, wb, kk, True) + SortWork(scalar=4 * r * min(kk, wb))
    # the blocks' lists merged by the scalar unit: a score and an index read per block a result
    return (work + SortWork(scalar=r * k * (2 * nb + put))).times(chunks)
