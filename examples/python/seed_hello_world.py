"""The tutorial's hello world (PTO-RT v9 tutorial, "Getting Started"), verbatim below the
marked line. The tutorial uses tensors A, B and C without defining them; the lines before the
marker define them (4 batches of 32x32 f32 tiles), so the program runs as written."""

import numpy as np

from pto_wsp import Tensor as _Tensor, DType as _DType

_rng = np.random.default_rng(0)
A_np = _rng.standard_normal((4, 32, 32)).astype(np.float32)
B_np = _rng.standard_normal((4, 32, 32)).astype(np.float32)
C_np = np.zeros((4, 32, 32), dtype=np.float32)
A = _Tensor(data=A_np, shape=A_np.shape, dtype=_DType.F32)
B = _Tensor(data=B_np, shape=B_np.shape, dtype=_DType.F32)
C = _Tensor(data=C_np, shape=C_np.shape, dtype=_DType.F32)

# ---- the tutorial's hello world, verbatim ----
from pto_wsp import (
    kernel, workload, P,
    Dense, Tensor, DType,
    tl, In, Out, Tile,
)

# 1. Define a kernel with tile operations
F32 = DType.F32

@kernel
def add_kernel(a: In[Tile[32, 32, F32]], b: In[Tile[32, 32, F32]], c: Out[Tile[32, 32, F32]]):
    x = tl.load(a)
    y = tl.load(b)
    z = tl.add(x, y)
    tl.store(c, z)

# 2. Define axes (iteration dimensions)
batch = Dense[4]()

# 3. Define a workload using the kernel
@workload
def simple_add():
    for b in P(batch):
        add_kernel[b](a=A[b], b=B[b], c=C[b])

# 4. Compile and execute
program = simple_add().compile()
program.execute()
program.synchronize()

print(f"Executed {program.stats.task_count} tasks")
