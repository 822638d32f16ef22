"""The tensor-parallel MLP of docs/distributed.md as the page writes it, at the sizes a test
picks: one text for the tests of the checker, the in-process runs and the Ascend tree."""

from __future__ import annotations


def doc_tp_mlp(d: int, f: int, tb: int, fb: int) -> str:
    """The page's MLP on `mesh tp = 4` (compile with `mesh=` for other sizes): model dimension
    `d`, hidden `f`, token tile `tb`, hidden block `fb`."""
    return f"""\
module tp_mlp
mesh tp = 4
sym T
const D = {d}
const F = {f}
const TB = {tb}
const FB = {fb}
input   X:  f32[T, D]
input   W1: f32[D, F] @ [R, S(tp)]
input   W2: f32[F, D] @ [S(tp), R]
scratch H:  f32[T, F] @ [R, S(tp)]
scratch Zp: f32[T, D] @ [R, R] partial(tp)
output  Y:  f32[T, D]
axis rows = DenseDyn(ceildiv(T, TB))
axis cols = Dense[F / FB]

kernel up(x: In[Tile[TB, D, f32]], w: In[Tile[D, FB, f32]], h: Out[Tile[TB, FB, f32]]) {{
    store(h, matmul(x, w))
}}
kernel down(h: In[Tile[TB, FB, f32]], w: In[Tile[FB, D, f32]], acc: InOut[Tile[TB, D, f32]]) {{
    store(acc, acc + matmul(h, w))
}}

workload mlp() {{
    for t, f in P(rows, cols) {{
        up[t, f](x = X[t*TB : t*TB + TB, :],
                 w = W1[:, f*FB : f*FB + FB],
                 h = H[t*TB : t*TB + TB, f*FB : f*FB + FB])
    }}
    for t in P(rows) {{
        for f in P.seq(cols) {{
            down[t, f](h = H[t*TB : t*TB + TB, f*FB : f*FB + FB],
                       w = W2[f*FB : f*FB + FB, :], acc = Zp[t*TB : t*TB + TB, :])
        }}
    }}
    allreduce(Zp, into = Y, over = tp)
}}
schedule main = mlp()
"""
