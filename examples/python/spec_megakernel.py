"""The seed API specification's example 8.3, "Megakernel Pipeline", runnable.

What changed from the document, and why:
- the kernels have bodies (`pto.*`) and tile types: load copies a tile, compute applies
  RMSNorm and SiLU, store adds the residual;
- the data travels through the channels: the loader's task writes its output into `l2c`
  (`buf=l2c`), the computer reads the item (`buf=t`) and writes into `c2s`; the document's
  `tile_buf` / `result_buf` are not defined there, and a single buffer tensor would serialise
  the stages through their inferred dependencies;
- the two `consume` blocks are inside `with P.pipe():` (in the document they follow it, which
  leaves nothing to consume the channels inside the pipe); every statement of the pipe that is
  not a `process` becomes a process of its own;
- `input` / `output` (the tensors and the parameter names) are `.wsp` keywords; wspc names them
  `input_` / `output_` in the `.wsp` text, the Python code keeps them as written.
The channels, `P.seq`, `send`, `consume`, the schedule chain and execution are as written.
"""

import numpy as np

from pto_wsp import workload, P, kernel, In, Out, Tensor, DenseDyn
from pto_wsp import Channel, send, consume
from pto_wsp import DispatchPolicy
from pto_wsp import pto, Tile, Scalar, DType

num_tiles = 6
F32 = DType.F32

rng = np.random.default_rng(83)
input_np = rng.standard_normal((num_tiles, 16, 64)).astype(np.float32)
output_np = np.zeros((num_tiles, 16, 64), dtype=np.float32)
input = Tensor(data=input_np, shape=input_np.shape, dtype=F32)
output = Tensor(data=output_np, shape=output_np.shape, dtype=F32)


# Define kernels
@kernel
def load(input: In[Tile[16, 64, F32]], buf: Out[Tile[16, 64, F32]]):
    pto.store(buf, pto.load(input))


@kernel
def compute(buf: In[Tile[16, 64, F32]], result: Out[Tile[16, 64, F32]],
            eps: Scalar[F32] = 1e-6):
    ms = pto.rowmean(buf * buf)
    pto.store(result, pto.silu(buf * pto.rsqrt(ms + eps)))


@kernel
def store(result: In[Tile[16, 64, F32]], residual: In[Tile[16, 64, F32]],
          output: Out[Tile[16, 64, F32]]):
    pto.store(output, result + residual)


# Channels (depth=2 for double buffering)
l2c = Channel("load_to_compute", depth=2)
c2s = Channel("compute_to_store", depth=2)


# Define pipeline workload using P.pipe() and CSP
@workload
def pipeline(num_tiles):
    tiles = DenseDyn(num_tiles)

    with P.pipe():
        # Loader process (sequential tile loading)
        for i in P.seq(tiles):
            send(l2c, load[i](input=input[i], buf=l2c))

        # Computer process (consumes from load, produces to store)
        with consume(l2c) as t:
            send(c2s, compute[t](buf=t, result=c2s))

        # Storer process (consumes from compute)
        with consume(c2s) as r:
            store[r](result=r, residual=input[r.index], output=output[r.index])


# Schedule (combinator style)
program = (pipeline(num_tiles)
    .dispatch(DispatchPolicy.round_robin(1))    # Single AICPU
    .compile())

program.execute()
program.synchronize()


def reference() -> np.ndarray:
    x = input_np.astype(np.float64)
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)
    return x + h / (1 + np.exp(-h))


if __name__ == "__main__":
    err = float(np.abs(output_np - reference()).max())
    print(f"{program.stats.task_count} tasks, max |output - numpy| = {err:.2e}")
