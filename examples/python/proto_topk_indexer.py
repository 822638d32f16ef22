"""A tiered top-k indexer in the style of the PTO-WSP prototype's programs: imports from its
submodules (`pto_wsp.kernel`, `.types`, `.primitives`, `.scalar_expr`, `.schedule`), a top-k
kernel written with the prototype's PTO-ISA spellings (`pto.iota_u32`, `pto.tsort32`,
`pto.extract_topk_indices`), and a data-driven tier choice: each tile's effective length is
loaded into a run-time slot, and a tile whose length is at most HALF ranks only its first HALF
candidates.

For every batch row b and tile s, `out_idx[b, s]` holds the columns of the K best candidates,
best first (ties keep column order). `reference()` is the same in NumPy.
"""

import numpy as np

from pto_wsp import P
from pto_wsp.builder import workload_decorator as workload
from pto_wsp.kernel import In, Out, Tile, kernel, pto
from pto_wsp.primitives import slot_load_u64
from pto_wsp.scalar_expr import slot_u64
from pto_wsp.schedule import DispatchPolicy, TaskWindow, WindowMode
from pto_wsp.types import Dense, DType, Tensor

F32, I32, U64 = DType.F32, DType.I32, DType.U64
BATCH, TILES, CAND, K, HALF = 2, 3, 32, 8, 16

rng = np.random.default_rng(19)
scores_np = rng.standard_normal((BATCH, TILES, 1, CAND)).astype(np.float32)
scores_np[0, 1, 0, 5] = scores_np[0, 1, 0, 9]  # a tie: column 5 ranks before column 9
eff_np = np.array([[HALF, CAND, 3], [CAND, HALF - 1, CAND]], dtype=np.uint64).reshape(
    BATCH, TILES, 1, 1)
out_idx_np = np.full((BATCH, TILES, 1, K), -1, dtype=np.int32)

Scores = Tensor(data=scores_np, shape=scores_np.shape, dtype=F32)
EffLen = Tensor(data=eff_np, shape=eff_np.shape, dtype=U64)
OutIdx = Tensor(data=out_idx_np, shape=out_idx_np.shape, dtype=I32)
batch, stiles = Dense[BATCH](), Dense[TILES]()


@kernel
def topk_all(scores: In[Tile[1, CAND, F32]], out_idx: Out[Tile[1, K, I32]]):
    idx = pto.iota_u32(CAND)
    pairs = pto.tsort32(scores, idx)
    pto.store(out_idx, pto.extract_topk_indices(pairs, K))


@kernel
def topk_first_half(scores: In[Tile[1, CAND, F32]], out_idx: Out[Tile[1, K, I32]]):
    idx = pto.iota_u32(CAND)
    live = pto.where(idx < HALF, scores, -np.inf)  # candidates past HALF never win
    pairs = pto.tsort32(live, idx)
    pto.store(out_idx, pto.extract_topk_indices(pairs, K))


@workload
def indexer():
    for b in P(batch):
        for s in P(stiles):
            slot_load_u64(0, EffLen[b][s], row=0, col=0)
            with P.when(slot_u64(0) <= HALF):
                topk_first_half[b, s](scores=Scores[b][s], out_idx=OutIdx[b][s])
            with P.otherwise():
                topk_all[b, s](scores=Scores[b][s], out_idx=OutIdx[b][s])


program = (indexer()
           .dispatch(DispatchPolicy.affinity(lambda t: t.get("b"), num_aicpus=2))
           .task_graph(window=TaskWindow(1024, "tasks", WindowMode.STALL))
           .compile(target="cpu_sim"))
program.execute()
program.synchronize()


def reference() -> np.ndarray:
    """The columns of the K largest scores of each tile (only the first HALF where the tile's
    length is at most HALF), largest first, ties in column order."""
    live = scores_np[:, :, 0, :].copy()
    short = eff_np[:, :, 0, 0] <= HALF
    live[:, :, HALF:][short] = -np.inf
    order = np.argsort(-live, axis=-1, kind="stable")[..., :K]
    return order.reshape(BATCH, TILES, 1, K).astype(np.int32)


if __name__ == "__main__":
    same = bool((out_idx_np == reference()).all())
    print(f"{program.stats.task_count} tasks, indices equal to numpy's: {same}")
