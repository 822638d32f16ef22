"""Edges named one by one under `Deps.explicit()`, in the PTO-WSP prototype's style: with
explicit dependencies nothing is inferred for the program (the prototype: "all dependencies
must be specified via structural workload primitives or explicit `after=[]`"), so each task
says what it waits for, and wspc checks that what it says implies every dependency the data
has (docs/schedules.md, "Named edges").

What it shows:
- a kernel call returns its task handle: `t = rmsnorm[i](...)`;
- `after=[t]` on a call (this iteration's task), `after=[g, g[i - 1]]` on the prototype's
  `task(kernel, coords, args, after=...)` (this iteration's and the previous one's), and
  `after=g` after the loop (every iteration's);
- `Deps.explicit()` with a scratch intermediate (`H`) whose only order is a named edge, and a
  `stamp` task that shares no data with the gate before it (the edge alone orders them: the
  chain of stamps follows the gates one by one);
- the `.wsp` text (`to_wsp`): `let t = rmsnorm[i](...)`, `gate[i](...) after t`.

`reference()` is the NumPy formula; `python examples/python/proto_named_edges.py` runs it on
cpu_sim and checks itself.
"""

import numpy as np

from pto_wsp import P, workload
from pto_wsp.kernel import In, Out, Tile, kernel, pto
from pto_wsp.primitives import task
from pto_wsp.schedule import Deps, DispatchPolicy, TracePolicy
from pto_wsp.types import Dense, DType, Tensor

F32 = DType.F32
TILES, ROWS, D = 4, 16, 64
EPS = 1e-6

rng = np.random.default_rng(1951)
x_np = rng.standard_normal((TILES, ROWS, D)).astype(np.float32)
w_np = rng.standard_normal((1, D)).astype(np.float32)


@kernel
def rmsnorm(x: In[Tile[ROWS, D, F32]], h: Out[Tile[ROWS, D, F32]]):
    pto.store(h, pto.rowmul(x, pto.rsqrt(pto.rowmean(pto.mul(x, x)) + EPS)))


@kernel
def gate(h: In[Tile[ROWS, D, F32]], w: In[Tile[1, D, F32]], y: Out[Tile[ROWS, D, F32]]):
    pto.store(y, pto.colmul(h, w) * pto.sigmoid(h))


@kernel
def stamp(x: In[Tile[ROWS, D, F32]], s: Out[Tile[1, D, F32]]):
    pto.store(s, pto.colmax(x))


@kernel
def colsum(y: In[Tile[ROWS, D, F32]], s: Out[Tile[1, D, F32]]):
    pto.store(s, pto.colsum(y))


def build(X, W, H, Y, M, S):
    tiles = Dense[TILES]()

    @workload
    def gated_norm():
        for i in P(tiles):
            t = rmsnorm[i](x=X[i], h=H[i])
            g = gate[i](h=H[i], w=W, y=Y[i], after=[t])       # reads H[i]: t wrote it
            task(stamp, [i], {"x": X[i], "s": M[i]}, after=[g, g[i - 1]])
        colsum[0](y=Y[TILES - 1], s=S, after=g)                # every gate, the last one's Y

    return (gated_norm()
            .dispatch(DispatchPolicy.round_robin(num_aicpus=4))
            .task_graph(deps=Deps.explicit(), trace=TracePolicy.cycles()))


def run(target: str = "cpu_sim") -> dict:
    y_np = np.zeros_like(x_np)
    m_np = np.zeros((TILES, 1, D), np.float32)
    s_np = np.zeros((1, D), np.float32)
    X, W = Tensor(data=x_np, dtype=F32), Tensor(data=w_np, dtype=F32)
    H = Tensor(shape=x_np.shape, dtype=F32, scratch=True)
    Y, M, S = Tensor(data=y_np, dtype=F32), Tensor(data=m_np, dtype=F32), Tensor(data=s_np, dtype=F32)
    program = build(X, W, H, Y, M, S).compile(target=target)
    program.execute()
    program.synchronize()
    return {"y": y_np, "m": m_np, "s": s_np, "tasks": program.stats.task_count,
            "program": program}


def reference() -> tuple:
    """(Y, M, S) in float64."""
    x = x_np.astype(np.float64)
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)
    y = h * w_np.astype(np.float64) * (1 / (1 + np.exp(-h)))
    return y, x.max(axis=1, keepdims=True), y[TILES - 1].sum(axis=0, keepdims=True)


if __name__ == "__main__":
    got = run()
    y, m, s = reference()
    err = max(float(np.abs(got["y"] - y).max()), float(np.abs(got["m"] - m).max()),
              float(np.abs(got["s"] - s).max()) / max(1.0, float(np.abs(s).max())))
    assert got["tasks"] == 3 * TILES + 1 and err < 1e-4, err
    print(f"{got['tasks']} tasks under deps = explicit, every dependency named; "
          f"max |error| = {err:.2e}")
