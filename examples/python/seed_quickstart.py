"""The quick start of the PTO-WSP prototype README, verbatim (run with `python
examples/python/seed_quickstart.py`; tests/embed checks Y_np)."""

import numpy as np

from pto_wsp import (
    kernel, workload, P, pto,
    In, Out, Tile,
    Dense, DenseDyn, Tensor, DType,
    DispatchPolicy, TaskWindow, WindowMode,
)

# Example shapes for a minimal run
batch_size = 1
num_tiles = 2

# Define a kernel with pto.* primitives (codegen-first CPU-sim supported ops)
@kernel
def rmsnorm_tile(
    x: In[Tile[16, 128, DType.F32]],
    out: Out[Tile[16, 128, DType.F32]],
):
    sq = pto.mul(x, x)
    mean_sq = pto.rowmean(sq)
    inv = pto.rsqrt(mean_sq)
    pto.store(out, pto.mul(x, inv))

# Define tensors + axes
X_np = np.random.randn(batch_size, num_tiles, 16, 128).astype(np.float32)
Y_np = np.zeros((batch_size, num_tiles, 16, 128), dtype=np.float32)

X = Tensor(data=X_np, shape=X_np.shape, dtype=DType.F32)
Y = Tensor(data=Y_np, shape=Y_np.shape, dtype=DType.F32)

batch = Dense[batch_size]()
tiles = Dense[num_tiles]()

@workload
def attention():
    for b in P(batch):
        for t in P(tiles):
            rmsnorm_tile[b, t](x=X[b][t], out=Y[b][t])

# Schedule (v9 enforced subset in CPU-sim artifacts): dispatch + task_window(stall)
program = (attention()
    .dispatch(DispatchPolicy.round_robin(num_aicpus=4))
    .task_graph(window=TaskWindow(8192, "tasks", WindowMode.STALL))
    .compile(target="cpu_sim"))

# Execute
program.execute()
program.synchronize()
stats = program.stats() if callable(program.stats) else program.stats
print("total_cycles =", int(getattr(stats, "total_cycles", 0) or 0))
