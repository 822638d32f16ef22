"""A builder-style CSP pipeline in the PTO-WSP prototype's style: admitted request tiles go
load -> RMSNorm -> store through two bounded channels.

What it shows:
- host-side admission with `try_send` on a bounded `Channel` (the prototype's queue): requests
  are offered until the queue is full, `try_send` returning False for the ones turned away;
- the admitted count bound at run time (`DenseDyn(symbol_u64(...))`, `set_symbol_u64`), so the
  same compiled program serves any number of tiles;
- three processes built with `process(...).produces(...).consumes(...).body(...)`, each body
  declarative (`for_each`, `consume`, `send`, `task`) and joined by `connect`; the channels
  carry the tiles themselves (depth 2: the loader runs at most two tiles ahead);
- an RMSNorm kernel (`rowmean`, `rsqrt`, a `[1, H]` weight broadcast over the rows).

`reference()` is the NumPy formula; `python examples/python/proto_csp_rmsnorm.py` runs it on
cpu_sim and checks itself.
"""

import numpy as np

from pto_wsp import DenseDyn, DispatchPolicy, TaskWindow, WindowMode
from pto_wsp.csp import Channel, connect, consume, process, send, try_send
from pto_wsp.kernel import In, Out, Scalar, Tile, kernel, pto
from pto_wsp.primitives import for_each, task
from pto_wsp.scalar_expr import symbol_u64
from pto_wsp.types import DType, Tensor

F32 = DType.F32
REQUESTS, ROWS, HIDDEN, QUEUE = 8, 16, 64, 6  # 8 request tiles offered, room for 6
EPS = 1e-6

rng = np.random.default_rng(1923)
x_np = rng.standard_normal((REQUESTS, ROWS, HIDDEN)).astype(np.float32)
gamma_np = (1.0 + 0.1 * rng.standard_normal((1, HIDDEN))).astype(np.float32)


@kernel
def load_tile(src: In[Tile[ROWS, HIDDEN, F32]], dst: Out[Tile[ROWS, HIDDEN, F32]]):
    pto.store(dst, pto.load(src))


@kernel
def rmsnorm_tile(x: In[Tile[ROWS, HIDDEN, F32]], g: In[Tile[1, HIDDEN, F32]],
                 y: Out[Tile[ROWS, HIDDEN, F32]], eps: Scalar[F32] = EPS):
    ms = pto.rowmean(pto.mul(x, x))
    pto.store(y, x * pto.rsqrt(ms + eps) * g)


@kernel
def store_tile(src: In[Tile[ROWS, HIDDEN, F32]], dst: Out[Tile[ROWS, HIDDEN, F32]]):
    pto.store(dst, src)


def admit(requests: int, capacity: int) -> int:
    """Offer each request to a bounded queue; the ones that do not fit are turned away."""
    queue = Channel("admit", depth=capacity)
    turned_away = [r for r in range(requests) if not try_send(queue, r)]
    print(f"admitted {queue.size()} of {requests} request tiles (full: {queue.full()}), "
          f"turned away {turned_away}")
    return queue.size()


def build(X: Tensor, G: Tensor, Y: Tensor, depth: int = 2):
    """The pipeline over the first `n_tiles` tiles (a run-time symbol)."""
    tiles = DenseDyn(symbol_u64("n_tiles", 0))
    l2c = Channel("l2c", depth=depth)
    c2s = Channel("c2s", depth=depth)
    loader = (process("loader").produces(l2c)
              .body(for_each(tiles, lambda t:
                             send(l2c, task(load_tile, [t], {"src": X[t], "dst": l2c})))))
    normer = (process("normer").consumes(l2c).produces(c2s)
              .body(consume(l2c, lambda x:
                            send(c2s, task(rmsnorm_tile, [x], {"x": x, "g": G, "y": c2s})))))
    storer = (process("storer").consumes(c2s)
              .body(consume(c2s, lambda y:
                            task(store_tile, [y], {"src": y, "dst": Y[y.index]}))))
    return connect([loader, normer, storer], [l2c, c2s])


def run(target: str = "cpu_sim") -> dict:
    """Admit, build, compile for `target` and run; the outputs and what the run did."""
    n = admit(REQUESTS, QUEUE)
    y_np = np.zeros_like(x_np)
    X, G, Y = Tensor(data=x_np, dtype=F32), Tensor(data=gamma_np, dtype=F32), Tensor(data=y_np)
    program = (build(X, G, Y)
               .dispatch(DispatchPolicy.round_robin(num_aicpus=3))
               .task_graph(window=TaskWindow(16, "tasks", WindowMode.STALL))
               .compile(target=target))
    program.set_symbol_u64("n_tiles", n)
    program.execute()
    program.synchronize()
    return {"y": y_np, "admitted": n, "tasks": program.stats.task_count, "program": program}


def reference(admitted: int) -> np.ndarray:
    """RMSNorm of the admitted tiles in float64; zeros where no tile was admitted."""
    x = x_np.astype(np.float64)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * gamma_np.astype(np.float64)
    y[admitted:] = 0
    return y


if __name__ == "__main__":
    got = run()
    err = float(np.abs(got["y"] - reference(got["admitted"])).max())
    assert got["admitted"] == QUEUE and got["tasks"] == 3 * QUEUE and err < 1e-5, err
    print(f"{got['tasks']} tasks through load -> rmsnorm -> store, max |error| = {err:.2e}")
