"""The seed API specification's example 8.2, "MoE with Sparse Routing", runnable.

What changed from the document, and why:
- the expert kernel has a body (a SiLU projection, `pto.*`) and tile types;
- `Sparse` takes the axis its rows follow (`batch`) rather than the integer 4: the loop
  `for b in P(batch)` must iterate the sparse axis's outer axis for `routing[b]` to mean row b;
- the stream key names the loop variable, `t.get("e")`: the document's `t.get("expert")`
  names neither a loop variable nor an axis of the workload (wspc reports that at the lambda);
- `batch_size` is defined (the document uses it before defining it) and the sizes are small.
The routing (the document's CSR arrays), `P.sel`, the call and the schedule chain are as written.
"""

import numpy as np

from pto_wsp import workload, P, kernel, In, Out, Tensor, DenseDyn, Sparse
from pto_wsp import DispatchPolicy
from pto_wsp import pto, Tile, DType

batch_size = 4
TOK, DM, NE = 16, 32, 8              # tokens per batch row, model dimension, experts

# Routing (CSR format)
indptr = [0, 2, 5, 7, 10]
indices = [1, 3, 0, 2, 4, 1, 5, 0, 3, 7]

# Axes
batch = DenseDyn(batch_size)
routing = Sparse(batch, indptr, indices)

rng = np.random.default_rng(82)
tokens_np = rng.standard_normal((batch_size, TOK, DM)).astype(np.float32)
weights_np = (rng.standard_normal((NE, DM, DM)) / np.sqrt(DM)).astype(np.float32)
out_np = np.zeros((batch_size, NE, TOK, DM), dtype=np.float32)
tokens = Tensor(data=tokens_np, shape=tokens_np.shape, dtype=DType.F32)
weights = Tensor(data=weights_np, shape=weights_np.shape, dtype=DType.F32)
out = Tensor(data=out_np, shape=out_np.shape, dtype=DType.F32)


# Define kernel
@kernel
def expert(tokens: In[Tile[TOK, DM, DType.F32]], weights: In[Tile[DM, DM, DType.F32]],
           out: Out[Tile[TOK, DM, DType.F32]]):
    pto.store(out, pto.silu(pto.matmul(tokens, weights)))


# Define workload (@workload + P.sel for sparse)
@workload
def moe(batch, routing):
    for b in P(batch):
        for e in P.sel(routing[b]):           # Only selected experts
            expert[b, e](tokens=tokens[b], weights=weights[e], out=out[b, e])


# Schedule with work stealing (combinator style)
program = (moe(batch, routing)
    .dispatch(DispatchPolicy.work_steal())
    .streams(8)
    .stream_by(lambda t: t.get("e"))     # expert -> stream
    .compile())

program.execute()
program.synchronize()


def reference() -> np.ndarray:
    """out[b, e] = silu(tokens[b] @ weights[e]) for the routed (b, e), 0 elsewhere."""
    ref = np.zeros(out_np.shape, dtype=np.float64)
    for b in range(batch_size):
        for e in indices[indptr[b]:indptr[b + 1]]:
            h = tokens_np[b].astype(np.float64) @ weights_np[e].astype(np.float64)
            ref[b, e] = h / (1 + np.exp(-h))
    return ref


if __name__ == "__main__":
    err = float(np.abs(out_np - reference()).max())
    print(f"{program.stats.task_count} tasks, max |out - numpy| = {err:.2e}")
