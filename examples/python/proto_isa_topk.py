"""A top-k indexer written as the PTO-WSP prototype writes ISA-level kernels: `@ptoisa_kernel`
with `ptoisa.tload`, `ptoisa.iota_u32`, `ptoisa.TSORT32` and `ptoisa.store_topk_indices_i32`,
imported as the prototype imports them (`from pto_wsp import ..., ptoisa, ptoisa_kernel`), in a
workload over batch rows and score tiles. A second ISA kernel first scales each tile's scores
by a temperature (`TMULS` with a scalar parameter) and clips them from below (`TMAX` against a
floor tile): clipped scores tie, and rank by lower column.

For every batch row b and tile s, `out_idx[b, s]` holds the columns of the K best of the 32
candidates, best first, ties by lower column. `reference()` is the same in NumPy; run as a
script, it checks the two agree and exits non-zero if they do not.
"""

import sys

import numpy as np

from pto_wsp import (
    DType,
    Dense,
    DispatchPolicy,
    In,
    Out,
    P,
    Scalar,
    TaskWindow,
    Tensor,
    Tile,
    WindowMode,
    ptoisa,
    ptoisa_kernel,
    workload,
)

F32, I32 = DType.F32, DType.I32
BATCH, TILES, CAND, K = 2, 4, 32, 8

rng = np.random.default_rng(1919)
# few distinct values, so ties are common (they rank by lower column)
scores_np = rng.integers(-4, 5, size=(BATCH, TILES, 1, CAND)).astype(np.float32)
floor_np = np.full((1, CAND), -1.0, dtype=np.float32)
scaled_np = np.zeros_like(scores_np)
out_idx_np = np.full((BATCH, TILES, 1, K), -1, dtype=np.int32)
TEMPERATURE = 0.5

Scores = Tensor(data=scores_np, shape=scores_np.shape, dtype=F32)
Floor = Tensor(data=floor_np, shape=floor_np.shape, dtype=F32)
Scaled = Tensor(data=scaled_np, shape=scaled_np.shape, dtype=F32)
OutIdx = Tensor(data=out_idx_np, shape=out_idx_np.shape, dtype=I32)
batch, stiles = Dense[BATCH](), Dense[TILES]()


@ptoisa_kernel
def scale_scores(scores_tile: In[Tile[1, CAND, F32]], floor_tile: In[Tile[1, CAND, F32]],
                 out_tile: Out[Tile[1, CAND, F32]], temperature: Scalar[F32]):
    scores = ptoisa.tload(scores_tile)
    floor = ptoisa.tload(floor_tile)
    ptoisa.tstore(out_tile, ptoisa.TMAX(ptoisa.TMULS(scores, temperature), floor))


@ptoisa_kernel
def topk8_sort32(scores_tile: In[Tile[1, CAND, F32]], out_idx_tile: Out[Tile[1, K, I32]]):
    scores = ptoisa.tload(scores_tile)
    idx = ptoisa.iota_u32(CAND)
    pairs = ptoisa.TSORT32(scores, idx)
    ptoisa.store_topk_indices_i32(out_idx_tile, pairs, K)


@workload
def isa_topk():
    for b in P(batch):
        for s in P(stiles):
            scale_scores[b, s](scores_tile=Scores[b][s], floor_tile=Floor,
                               out_tile=Scaled[b][s], temperature=TEMPERATURE)
            topk8_sort32[b, s](scores_tile=Scaled[b][s], out_idx_tile=OutIdx[b][s])


program = (isa_topk()
           .dispatch(DispatchPolicy.affinity(lambda t: t.get("b"), num_aicpus=2))
           .task_graph(window=TaskWindow(1024, "tasks", WindowMode.STALL))
           .compile(target="cpu_sim"))
program.execute()
program.synchronize()


def reference() -> np.ndarray:
    """The columns of the K largest scaled scores of each tile, largest first, ties by lower
    column."""
    scaled = np.maximum(scores_np * np.float32(TEMPERATURE), floor_np)
    order = np.argsort(-scaled, axis=-1, kind="stable")[..., :K]
    return order.astype(np.int32)


if __name__ == "__main__":
    same = bool((out_idx_np == reference()).all())
    print(f"{program.stats.task_count} tasks, indices equal to numpy's: {same}")
    sys.exit(0 if same else 1)
