"""Rotary embeddings in the rotate_half form (Llama) on cpu_sim against NumPy, in one run:
`x * cos + concat(-x[:, 64:], x[:, :64], axis = 1) * sin` over [R, 128] f32, written with
kernel slices and concat (docs/language.md section 4, "Slices and concat"), so the slices are
read in place and the whole expression is one pass over the rows.

    python benchmarks/rope.py [--rows 524288] [--runs 9] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels as kernel_bench  # noqa: E402  (benchmarks/kernels.py: the shared timing loop)

import ptowsp  # noqa: E402

PROGRAM = """
sym R
input  X: f32[R, 128]
input  C: f32[R, 128]
input  S: f32[R, 128]
output Y: f32[R, 128]
kernel rope(x: In[Tile[16, 128, f32]], c: In[Tile[16, 128, f32]], s: In[Tile[16, 128, f32]],
            y: Out[Tile[16, 128, f32]]) {
    store(y, x * c + concat(-x[:, 64:], x[:, :64], axis = 1) * s)
}
workload main_w() {
    for t in P(R / 16) {
        rope[t](x = X[t*16 : t*16 + 16, :], c = C[t*16 : t*16 + 16, :],
                s = S[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :])
    }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=524288)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x, c, s = (rng.standard_normal((args.rows, 128), dtype=np.float32) for _ in range(3))

    def numpy_rope():  # the idiomatic NumPy (Hugging Face's rotate_half)
        return x * c + np.concatenate((-x[:, 64:], x[:, :64]), axis=1) * s

    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        prog = ptowsp.parse(PROGRAM, "rope.wsp").compile(target="cpu_sim")
        got = prog.run(X=x, C=c, S=s, workers=args.workers)["Y"]
        np.testing.assert_allclose(got, numpy_rope(), rtol=1e-5, atol=1e-5)
        t_np, t_w = kernel_bench.medians_ms(
            [numpy_rope, lambda: prog.run(X=x, C=c, S=s, workers=args.workers)], args.runs)
    traffic = 4 * x.nbytes  # x, cos, sin in; y out
    print(f"rotate_half RoPE, [{args.rows}, 128] f32, {args.workers} workers, medians of "
          f"{args.runs} runs: numpy {traffic / t_np / 1e6:.1f} GB/s, cpu_sim "
          f"{traffic / t_w / 1e6:.1f} GB/s = {t_np / t_w:.2f}x numpy")


if __name__ == "__main__":
    sys.exit(main())
