"""Megatron's tensor-parallel MLP in the PTO-WSP prototype's style: layouts as tensor types,
a device mesh from the schedule, and one explicit collective.

    y = (x @ W1) @ W2      on a mesh of `tp` devices

What it shows:
- `schedule.spatial_map(grid={"tp": n})`: the module's mesh (docs/distributed.md);
- `Tensor(..., layout=TensorLayout.sharded(dim=1, mesh_axis="tp"))`: W1 split by columns (the
  column-parallel matmul), W2 by rows (the row-parallel one), the hidden activation sharded as
  W1's columns; the caller still passes and gets global arrays;
- a scratch tensor of partial sums (`TensorLayout.replicated(partial="tp")`): each device
  accumulates its own addend, with no communication;
- `allreduce(Zp, into=Y)`: the one collective, the sum of the addends in device order.

Each task runs on the device that holds its data (owner computes): nobody writes a device
index. `python examples/python/tp_mlp.py` runs it on cpu_sim on 1, 2 and 4 devices and checks
each against NumPy.
"""

import numpy as np

from pto_wsp import P, TensorLayout, allreduce, scratch, workload
from pto_wsp.kernel import In, InOut, Out, Tile, kernel, pto
from pto_wsp.types import Dense, DType, Tensor

F32 = DType.F32
T, D, F = 32, 64, 128  # tokens, model width, hidden width
TB, FB = 16, 32  # a task's tile: TB tokens, FB hidden columns

rng = np.random.default_rng(2020)
x_np = rng.standard_normal((T, D)).astype(np.float32)
w1_np = (rng.standard_normal((D, F)) / np.sqrt(D)).astype(np.float32)
w2_np = (rng.standard_normal((F, D)) / np.sqrt(F)).astype(np.float32)


@kernel
def up(x: In[Tile[TB, D, F32]], w: In[Tile[D, FB, F32]], h: Out[Tile[TB, FB, F32]]):
    pto.store(h, pto.matmul(x, w))


@kernel
def down(h: In[Tile[TB, FB, F32]], w: In[Tile[FB, D, F32]], acc: InOut[Tile[TB, D, F32]]):
    pto.store(acc, acc + pto.matmul(h, w))


def build(X: Tensor, W1: Tensor, W2: Tensor, Y: Tensor, tp: int):
    H = scratch((T, F), F32, layout=TensorLayout.sharded(dim=1, mesh_axis="tp"))
    Zp = scratch((T, D), F32, layout=TensorLayout.replicated(partial="tp"))
    rows, cols = Dense[T // TB](), Dense[F // FB]()

    @workload
    def mlp():
        for t, f in P(rows, cols):  # on the tp device holding columns f*FB .. f*FB + FB - 1
            up[t, f](x=X[t * TB:t * TB + TB, :], w=W1[:, f * FB:f * FB + FB],
                     h=H[t * TB:t * TB + TB, f * FB:f * FB + FB])
        for t in P(rows):
            for f in P.seq(cols):  # each device accumulates its own addend
                down[t, f](h=H[t * TB:t * TB + TB, f * FB:f * FB + FB],
                           w=W2[f * FB:f * FB + FB, :], acc=Zp[t * TB:t * TB + TB, :])
        allreduce(Zp, into=Y)  # every device gets the sum of the tp addends

    return mlp().spatial_map(grid={"tp": tp})


def run(target: str = "cpu_sim", tp: int = 2) -> dict:
    y_np = np.zeros((T, D), np.float32)
    X = Tensor(data=x_np, dtype=F32)
    W1 = Tensor(data=w1_np, dtype=F32, layout=TensorLayout.sharded(dim=1, mesh_axis="tp"))
    W2 = Tensor(data=w2_np, dtype=F32, layout=TensorLayout.sharded(dim=0, mesh_axis="tp"))
    program = build(X, W1, W2, Tensor(data=y_np, dtype=F32), tp).compile(target=target)
    program.execute()
    program.synchronize()
    return {"y": y_np, "tasks": program.stats.task_count, "program": program}


def reference() -> np.ndarray:
    return (x_np.astype(np.float64) @ w1_np.astype(np.float64)) @ w2_np.astype(np.float64)


if __name__ == "__main__":
    for n in (1, 2, 4):
        got = run(tp=n)
        err = float(np.abs(got["y"] - reference()).max())
        assert err < 1e-4, err
        print(f"tp = {n}: {got['tasks']} tasks, max |error| = {err:.2e}")
