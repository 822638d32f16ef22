"""MoE routing in the declarative style of the PTO-WSP prototype's `pto_wsp.primitives`:
`parallel_for`, `select` over a sparse routing axis, `task` and `sequential`, built outside any
`@workload`, with imports from the prototype's submodules.

Two phases, one after the other (`sequential`):
1. a router kernel per batch row: the top-2 experts of each token (`v, i = pto.topk(...)`,
   wspc's `let v, i = topk(...)`) and their gate weights, a softmax over the two scores;
2. the experts the routing (CSR arrays) selects for each batch row:
   `select(routing[b], lambda e: ...)`, which is `for e in P.sel(routing[b])`; each runs
   `relu(min(tokens @ weights, CLIP))` with the prototype's `pto.max` / `pto.min` spellings.

`reference()` computes all four outputs in NumPy.
"""

import numpy as np

from pto_wsp.kernel import In, Out, Tile, kernel, pto
from pto_wsp.primitives import parallel_for, select, sequential, task
from pto_wsp.schedule import DispatchPolicy
from pto_wsp.types import DenseDyn, DType, Sparse, Tensor

F32, I32 = DType.F32, DType.I32
B, TOK, DM, NE, CLIP = 3, 16, 32, 8, 0.75

indptr = [0, 2, 5, 6]
indices = [1, 6, 0, 2, 7, 3]
batch = DenseDyn(B)
routing = Sparse(batch, indptr, indices)

rng = np.random.default_rng(1919)
tokens_np = rng.standard_normal((B, TOK, DM)).astype(np.float32)
gate_w_np = (rng.standard_normal((DM, NE)) / np.sqrt(DM)).astype(np.float32)
weights_np = (rng.standard_normal((NE, DM, DM)) / np.sqrt(DM)).astype(np.float32)
top_ids_np = np.zeros((B, TOK, 2), np.int32)
gates_np = np.zeros((B, TOK, 2), np.float32)
out_np = np.zeros((B, NE, TOK, DM), np.float32)

tokens, gate_w = Tensor(data=tokens_np, dtype=F32), Tensor(data=gate_w_np, dtype=F32)
weights = Tensor(data=weights_np, dtype=F32)
top_ids, gates = Tensor(data=top_ids_np, dtype=I32), Tensor(data=gates_np, dtype=F32)
out = Tensor(data=out_np, dtype=F32)


@kernel
def router(x: In[Tile[TOK, DM, F32]], w: In[Tile[DM, NE, F32]],
           ids: Out[Tile[TOK, 2, I32]], g: Out[Tile[TOK, 2, F32]]):
    best, experts = pto.topk(pto.matmul(x, w), 2)
    pto.store(ids, experts)
    pto.store(g, pto.softmax(best))


@kernel
def expert(x: In[Tile[TOK, DM, F32]], w: In[Tile[DM, DM, F32]], y: Out[Tile[TOK, DM, F32]]):
    h = pto.matmul(x, w)
    pto.store(y, pto.max(pto.min(h, CLIP), 0.0))


moe = sequential(
    parallel_for(batch, lambda b:
                 task(router, [b], {"x": tokens[b], "w": gate_w, "ids": top_ids[b],
                                    "g": gates[b]})),
    parallel_for(batch, lambda b:
                 select(routing[b], lambda e:
                        task(expert, [b, e], {"x": tokens[b], "w": weights[e],
                                              "y": out[b, e]}))),
)

program = moe.dispatch(DispatchPolicy.work_steal()).compile(target="cpu_sim")
program.execute()
program.synchronize()


def reference() -> dict:
    """The four outputs in NumPy (float64 products)."""
    x = tokens_np.astype(np.float64)
    logits = x @ gate_w_np.astype(np.float64)
    ids = np.argsort(-logits, axis=-1, kind="stable")[..., :2]
    best = np.take_along_axis(logits, ids, axis=-1)
    e = np.exp(best - best.max(axis=-1, keepdims=True))
    y = np.zeros(out_np.shape)
    for b in range(B):
        for ex in indices[indptr[b]:indptr[b + 1]]:
            y[b, ex] = np.maximum(np.minimum(x[b] @ weights_np[ex].astype(np.float64), CLIP), 0)
    return {"top_ids": ids, "gates": e / e.sum(axis=-1, keepdims=True), "out": y}


if __name__ == "__main__":
    ref = reference()
    err = max(float(np.abs(gates_np - ref["gates"]).max()), float(np.abs(out_np - ref["out"]).max()))
    print(f"{program.stats.task_count} tasks, experts equal to numpy's: "
          f"{bool((top_ids_np == ref['top_ids']).all())}, max |error| = {err:.2e}")
