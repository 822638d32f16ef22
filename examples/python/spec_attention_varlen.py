"""The seed API specification's example 8.1, "Attention with Variable Lengths", runnable.

What changed from the document, and why:
- the kernel has a body (`pto.*`) and tile types (`In[Tile[S, D, F32]]`): wspc compiles it;
  `In[Tensor]` with a `...` body says neither what the kernel computes nor its tile shape;
- the sizes are small (sequences up to 64 tokens, head dimension 16) and `seq_lens` is a
  `Tensor`: a Python list cannot be indexed by the symbolic loop variable `b`;
- the lengths reach the kernel as the scalar argument `n=seq_lens[b]` (one task per (batch,
  head), padded keys masked, padded query rows zeroed).
Everything else (axes, `P(batch, heads)`, the keyword call, the schedule chain with
`affinity`, `streams`, `stream_by` and `TimingPolicy.immediate`) is as written there.
"""

import numpy as np

from pto_wsp import workload, P, kernel, In, Out, Tensor, DenseDyn, Dense
from pto_wsp import DispatchPolicy, TimingPolicy
from pto_wsp import pto, Tile, Scalar, DType

# Data
batch_size = 4
num_heads = 8
S, D = 64, 16                       # padded sequence length, head dimension
seq_lens_np = np.array([64, 40, 17, 1], dtype=np.int32)

rng = np.random.default_rng(81)
Q_np = rng.standard_normal((batch_size, num_heads, S, D)).astype(np.float32)
K_np = rng.standard_normal((batch_size, S, D)).astype(np.float32)      # shared by the heads
V_np = rng.standard_normal((batch_size, S, D)).astype(np.float32)
O_np = np.zeros((batch_size, num_heads, S, D), dtype=np.float32)

Q = Tensor(data=Q_np, shape=Q_np.shape, dtype=DType.F32)
K = Tensor(data=K_np, shape=K_np.shape, dtype=DType.F32)
V = Tensor(data=V_np, shape=V_np.shape, dtype=DType.F32)
O = Tensor(data=O_np, shape=O_np.shape, dtype=DType.F32)
seq_lens = Tensor(data=seq_lens_np, shape=seq_lens_np.shape, dtype=DType.I32)

# Axes
batch = DenseDyn(batch_size)
heads = Dense[8]


# Define kernel
@kernel
def attn_kernel(Q: In[Tile[S, D, DType.F32]], K: In[Tile[S, D, DType.F32]],
                V: In[Tile[S, D, DType.F32]], O: Out[Tile[S, D, DType.F32]],
                n: Scalar[DType.I32], scale: Scalar[DType.F32] = 0.25):
    scores = pto.matmul(Q, pto.transpose(K)) * scale
    masked = pto.where(pto.col_index(S, S) < n, scores, -1e30)
    p = pto.exp(masked - pto.rowmax(masked))
    out = pto.matmul(p, V) / pto.rowsum(p)
    pto.store(O, pto.where(pto.row_index(S, D) < n, out, 0.0))


# Define workload (@workload + P namespace)
@workload
def attention(batch, heads):
    for b, h in P(batch, heads):
        attn_kernel[b, h](Q=Q[b, h], K=K[b], V=V[b], O=O[b, h], n=seq_lens[b])


# Schedule (combinator style)
program = (attention(batch, heads)
    .dispatch(DispatchPolicy.affinity(lambda t: t.get("batch")))
    .streams(2)
    .stream_by(lambda t: t.get("head") % 2)
    .timing(TimingPolicy.immediate)
    .compile())

# Execute
program.execute()
program.synchronize()


def reference() -> np.ndarray:
    """O by NumPy (float64): softmax over the first n keys, zero rows past n."""
    out = np.zeros_like(O_np, dtype=np.float64)
    for b in range(batch_size):
        n = int(seq_lens_np[b])
        k, v = K_np[b, :n].astype(np.float64), V_np[b, :n].astype(np.float64)
        for h in range(num_heads):
            s = Q_np[b, h, :n].astype(np.float64) @ k.T * 0.25
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, h, :n] = (p / p.sum(axis=1, keepdims=True)) @ v
    return out


if __name__ == "__main__":
    err = float(np.abs(O_np - reference()).max())
    print(f"{program.stats.task_count} tasks, max |O - numpy| = {err:.2e}")
