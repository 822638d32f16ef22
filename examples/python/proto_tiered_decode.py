"""Decode attention with kernel tiers chosen from data, in the PTO-WSP prototype's style: each
sequence's KV length is read into a run-time slot (`slot_load_u64`) and decides, per
sequence, which kernel runs: a 16-row tile for short caches, a 64-row tile for long ones (the
bucketing a serving system does so that short sequences do not pay for the longest).

What it shows:
- `slot_load_u64(0, kv_lens[b])` and `slot_u64(0)` from `pto_wsp.scalar_expr`, in a `P.when`
  predicate and as a view bound;
- a fused KV cache whose rows interleave keys and values (row 2j is key j, row 2j + 1 its
  value), split by strided views: `KV[b][0:2*n:2]` are the sequence's n keys and
  `KV[b][1:2*n:2]` its n values (each a strided view of rows, a partial tile of either kernel:
  the rows past n are padding the kernel masks with `valid_rows`);
- views indexed again and `...`: `Q[b, ...]`, `KV[b][...]`;
- `pto.constant` for the softmax scale, `where` / `col_index` / `valid_rows` for the mask;
- a `work_steal` dispatch over the batch.

`reference()` is the NumPy formula; `python examples/python/proto_tiered_decode.py` runs it on
cpu_sim and checks itself.
"""

import math

import numpy as np

from pto_wsp import P, workload
from pto_wsp.kernel import In, Out, Tile, kernel, pto
from pto_wsp.primitives import slot_load_u64
from pto_wsp.scalar_expr import slot_u64
from pto_wsp.schedule import DispatchPolicy
from pto_wsp.types import Dense, DType, Tensor

F32, I32 = DType.F32, DType.I32
HEAD, MAXKV, SHORT = 32, 64, 16
kv_lens_np = np.array([5, 16, 40, 64, 12, 33, 17], np.int32)  # tiers: short if <= 16
BATCH = len(kv_lens_np)
SCALE = 1.0 / math.sqrt(HEAD)

rng = np.random.default_rng(1924)
q_np = rng.standard_normal((BATCH, 1, HEAD)).astype(np.float32)
k_np = rng.standard_normal((BATCH, MAXKV, HEAD)).astype(np.float32)
v_np = rng.standard_normal((BATCH, MAXKV, HEAD)).astype(np.float32)
kv_np = np.stack([k_np, v_np], axis=2).reshape(BATCH, 2 * MAXKV, HEAD)  # rows k0, v0, k1, v1, ...


def _decode(q, k, v, o, rows: int):
    """softmax(q k^T * scale over the view's rows) v: one query row against a cache tile."""
    s = pto.matmul(q, pto.transpose(k)) * pto.constant(SCALE, F32)
    live = pto.col_index(1, rows) < pto.valid_rows(k)
    pto.store(o, pto.matmul(pto.softmax(pto.where(live, s, -math.inf)), v))


@kernel
def decode_short(q: In[Tile[1, HEAD, F32]], k: In[Tile[SHORT, HEAD, F32]],
                 v: In[Tile[SHORT, HEAD, F32]], o: Out[Tile[1, HEAD, F32]]):
    _decode(q, k, v, o, SHORT)


@kernel
def decode_long(q: In[Tile[1, HEAD, F32]], k: In[Tile[MAXKV, HEAD, F32]],
                v: In[Tile[MAXKV, HEAD, F32]], o: Out[Tile[1, HEAD, F32]]):
    _decode(q, k, v, o, MAXKV)


def build(Q: Tensor, KV: Tensor, O: Tensor, L: Tensor):
    batch = Dense[BATCH]()

    @workload
    def tiered_decode():
        for b in P(batch):
            slot_load_u64(0, L[b])              # this sequence's KV length
            n = slot_u64(0)
            keys, values = KV[b][0:2 * n:2], KV[b][1:2 * n:2]
            with P.when(n <= SHORT):
                decode_short[b](q=Q[b, ...], k=keys, v=values, o=O[b, ...])
            with P.otherwise():
                decode_long[b](q=Q[b, ...], k=keys, v=values, o=O[b, ...])

    return tiered_decode().dispatch(DispatchPolicy.work_steal(num_aicpus=4))


def run(target: str = "cpu_sim") -> dict:
    o_np = np.zeros((BATCH, 1, HEAD), np.float32)
    Q, KV = Tensor(data=q_np, dtype=F32), Tensor(data=kv_np, dtype=F32)
    O, L = Tensor(data=o_np, dtype=F32), Tensor(data=kv_lens_np, dtype=I32)
    program = build(Q, KV, O, L).compile(target=target)
    program.execute()
    program.synchronize()
    return {"o": o_np, "tasks": program.stats.task_count, "program": program}


def reference() -> np.ndarray:
    """Each sequence's decode attention over its first kv_lens[b] keys, in float64."""
    out = np.zeros((BATCH, 1, HEAD))
    for b, n in enumerate(kv_lens_np):
        s = q_np[b].astype(np.float64) @ k_np[b, :n].astype(np.float64).T * SCALE
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        out[b] = (p / p.sum(axis=-1, keepdims=True)) @ v_np[b, :n].astype(np.float64)
    return out


if __name__ == "__main__":
    got = run()
    err = float(np.abs(got["o"] - reference()).max())
    short = int((kv_lens_np <= SHORT).sum())
    assert got["tasks"] == BATCH and err < 1e-5, err
    print(f"{BATCH} sequences: {short} on the {SHORT}-row tier, {BATCH - short} on the "
          f"{MAXKV}-row tier; max |error| = {err:.2e}")
