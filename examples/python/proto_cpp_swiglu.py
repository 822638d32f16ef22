"""A SwiGLU MLP block (Llama's feed-forward) whose fused SiLU-gate is a C++ kernel body, in the
PTO-WSP prototype's style: `@kernel(cpp_src=...)` inside an ordinary tiled workload.

    y = x + (silu(x @ Wg) * (x @ Wu)) @ Wd

What it shows:
- three kernels per token tile: the gate and up projections (tile `matmul`s), the SiLU-gate as
  C++17 over the tiles' `data` / `rows` / `cols` / `stride` (with `<cmath>`), the down
  projection with the residual;
- the intermediates as scratch tensors (`scratch(shape, dtype)`): the program's own, never
  the caller's;
- the ragged last tile (70 tokens in tiles of 16) as partial views, `P.min` in the bound;
- a schedule with streams keyed by the tile (`stream_by`) and a bounded task window.

`silu_gate_numpy` is the C++ body's meaning, for the ref back end
(`ptowsp.backends.ref.register_extern`); `reference()` is the NumPy formula.
`python examples/python/proto_cpp_swiglu.py` runs it on cpu_sim and checks itself.
"""

import numpy as np

from pto_wsp import P, TaskWindow, WindowMode, ceildiv, scratch, workload
from pto_wsp.kernel import In, Out, Tile, kernel, pto
from pto_wsp.schedule import DispatchPolicy
from pto_wsp.types import DenseDyn, DType, Tensor

F32 = DType.F32
TOKENS, TM, DIM, FFN = 70, 16, 32, 64
TILES = -(-TOKENS // TM)

rng = np.random.default_rng(1925)
x_np = rng.standard_normal((TOKENS, DIM)).astype(np.float32)
wg_np = (rng.standard_normal((DIM, FFN)) / np.sqrt(DIM)).astype(np.float32)
wu_np = (rng.standard_normal((DIM, FFN)) / np.sqrt(DIM)).astype(np.float32)
wd_np = (rng.standard_normal((FFN, DIM)) / np.sqrt(FFN)).astype(np.float32)


@kernel
def gate_up(x: In[Tile[TM, DIM, F32]], wg: In[Tile[DIM, FFN, F32]], wu: In[Tile[DIM, FFN, F32]],
            g: Out[Tile[TM, FFN, F32]], u: Out[Tile[TM, FFN, F32]]):
    pto.store(g, pto.matmul(x, wg))
    pto.store(u, pto.matmul(x, wu))


@kernel(cpp_src="""
    // h = silu(g) * u over the view's rows (a partial last tile has fewer)
    for (int64_t r = 0; r < h.rows; r++) {
        for (int64_t c = 0; c < h.cols; c++) {
            const float a = g.data[r * g.stride + c];
            const float silu = a / (1.0f + std::exp(-a));
            h.data[r * h.stride + c] = silu * u.data[r * u.stride + c];
        }
    }
""", cpp_includes=["<cmath>"])
def silu_gate(g: In[Tile[TM, FFN, F32]], u: In[Tile[TM, FFN, F32]], h: Out[Tile[TM, FFN, F32]]):
    pass


def silu_gate_numpy(g, u, h):
    """The C++ body's meaning (for ref): h = silu(g) * u, in float32 as the body computes."""
    h[...] = g / (np.float32(1) + np.exp(-g)) * u


@kernel
def down_residual(h: In[Tile[TM, FFN, F32]], wd: In[Tile[FFN, DIM, F32]],
                  x: In[Tile[TM, DIM, F32]], y: Out[Tile[TM, DIM, F32]]):
    pto.store(y, x + pto.matmul(h, wd))


def build(X: Tensor, Wg: Tensor, Wu: Tensor, Wd: Tensor, Y: Tensor):
    G, U, H = (scratch((TOKENS, FFN), F32) for _ in range(3))
    tiles = DenseDyn(ceildiv(TOKENS, TM))

    @workload
    def swiglu():
        for t in P(tiles):
            rows = slice(t * TM, P.min(t * TM + TM, TOKENS))
            gate_up[t](x=X[rows], wg=Wg, wu=Wu, g=G[rows], u=U[rows])
            silu_gate[t](g=G[rows], u=U[rows], h=H[rows])
            down_residual[t](h=H[rows], wd=Wd, x=X[rows], y=Y[rows])

    return (swiglu()
            .dispatch(DispatchPolicy.round_robin(num_aicpus=2))
            .streams(2).stream_by(lambda task: task.get("t") % 2)
            .task_graph(window=TaskWindow(8, "tasks", WindowMode.STALL)))


def run(target: str = "cpu_sim") -> dict:
    y_np = np.zeros_like(x_np)
    X, Wg, Wu, Wd = (Tensor(data=a, dtype=F32) for a in (x_np, wg_np, wu_np, wd_np))
    program = build(X, Wg, Wu, Wd, Tensor(data=y_np, dtype=F32)).compile(target=target)
    program.execute()
    program.synchronize()
    return {"y": y_np, "tasks": program.stats.task_count, "program": program}


def reference() -> np.ndarray:
    x = x_np.astype(np.float64)
    g, u = x @ wg_np.astype(np.float64), x @ wu_np.astype(np.float64)
    return x + (g / (1 + np.exp(-g)) * u) @ wd_np.astype(np.float64)


if __name__ == "__main__":
    got = run()
    err = float(np.abs(got["y"] - reference()).max())
    assert got["tasks"] == 3 * TILES and err < 1e-4, err
    print(f"{TOKENS} tokens in {TILES} tiles, {got['tasks']} tasks (C++ SiLU-gate), "
          f"max |error| = {err:.2e}")
