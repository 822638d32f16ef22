"""What a transposed view (`K[h, a : a + 64, :].T`, docs/language.md section 6, "Transposed
views") costs on cpu_sim, in one run:

- attention scores `Q K^T` per head in [64, 64] tiles, written three ways: the transpose in
  the kernel (`matmul(q, transpose(k))`, read in place), the keys passed as a transposed view
  (`kt = K[h, a : a + 64, :].T`, `matmul(q, kt)`), and NumPy's `q @ k.T`;
- a transposing copy `Y = X.T` in [64, 64] tiles (the view's cost alone, memory-bound), against
  the same tasks copying `Y = X` through plain views, and NumPy's `np.ascontiguousarray(x.T)`.

A transposed view's columns are not contiguous, so the kernel's entry copies its tile into a
contiguous buffer first (and a transposed Out back after it): the second form pays one tile
copy per task that the first does not.

    python benchmarks/transposed_views.py [--heads 16] [--seq 512] [--runs 7] [--workers 2]
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

SCORES = """
sym H, S
input  Q: f32[H, S, 64]
input  K: f32[H, S, 64]
output A: f32[H, S, S]
kernel qk(q: In[Tile[64, 64, f32]], k: In[Tile[KR, KC, f32]], a: Out[Tile[64, 64, f32]]) {
    store(a, matmul(q, KEXPR))
}
workload main_w() {
    for h, i, j in P(H, S / 64, S / 64) {
        qk[h, i, j](q = Q[h, i*64 : i*64 + 64, :], k = KVIEW, a = A[h, i*64 : i*64 + 64, j*64 : j*64 + 64])
    }
}
"""

IN_KERNEL = (SCORES.replace("KR, KC", "64, 64").replace("KEXPR", "transpose(k)")
             .replace("KVIEW", "K[h, j*64 : j*64 + 64, :]"))
AS_VIEW = (SCORES.replace("KR, KC", "64, 64").replace("KEXPR", "k")
           .replace("KVIEW", "K[h, j*64 : j*64 + 64, :].T"))

COPY = """
sym R, C
input  X: f32[R, C]
output Y: f32[C, R]
kernel cp(x: In[Tile[64, 64, f32]], y: Out[Tile[64, 64, f32]]) { store(y, x) }
workload main_w() {
    for i, j in P(C / 64, R / 64) {
        cp[i, j](x = X[j*64 : j*64 + 64, i*64 : i*64 + 64].T, y = Y[i*64 : i*64 + 64, j*64 : j*64 + 64])
    }
}
"""
PLAIN = (COPY.replace("output Y: f32[C, R]", "output Y: f32[R, C]")
         .replace("X[j*64 : j*64 + 64, i*64 : i*64 + 64].T", "X[j*64 : j*64 + 64, i*64 : i*64 + 64]")
         .replace("y = Y[i*64 : i*64 + 64, j*64 : j*64 + 64]", "y = Y[j*64 : j*64 + 64, i*64 : i*64 + 64]"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    h, s, w = args.heads, args.seq, args.workers
    q, k = (rng.standard_normal((h, s, 64), dtype=np.float32) for _ in range(2))
    x = rng.standard_normal((4096, 4096), dtype=np.float32)

    def numpy_scores():
        return q @ k.transpose(0, 2, 1)

    def numpy_copy():
        return np.ascontiguousarray(x.T)

    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        inside = ptowsp.parse(IN_KERNEL, "in_kernel.wsp").compile(target="cpu_sim")
        view = ptowsp.parse(AS_VIEW, "as_view.wsp").compile(target="cpu_sim")
        copy = ptowsp.parse(COPY, "copy.wsp").compile(target="cpu_sim")
        plain = ptowsp.parse(PLAIN, "plain.wsp").compile(target="cpu_sim")
        want = numpy_scores()
        for prog in (inside, view):
            np.testing.assert_allclose(prog.run(Q=q, K=k, workers=w)["A"], want, rtol=1e-4,
                                       atol=1e-4)
        np.testing.assert_array_equal(copy.run(X=x, workers=w)["Y"], x.T)
        np.testing.assert_array_equal(plain.run(X=x, workers=w)["Y"], x)
        t_np, t_in, t_view = kernel_bench.medians_ms(
            [numpy_scores, lambda: inside.run(Q=q, K=k, workers=w),
             lambda: view.run(Q=q, K=k, workers=w)], args.runs, pause=0.05)
        c_np, c_view, c_plain = kernel_bench.medians_ms(
            [numpy_copy, lambda: copy.run(X=x, workers=w), lambda: plain.run(X=x, workers=w)],
            args.runs)
    flops = 2 * h * s * s * 64
    print(f"Q K^T, {h} heads x [{s}, 64] f32, {w} workers, medians of {args.runs} runs: "
          f"numpy {flops / t_np / 1e6:.1f} GFLOP/s; cpu_sim matmul(q, transpose(k)) "
          f"{flops / t_in / 1e6:.1f} GFLOP/s ({t_np / t_in:.2f}x numpy); k = K[...].T "
          f"{flops / t_view / 1e6:.1f} GFLOP/s ({t_np / t_view:.2f}x numpy, "
          f"{t_view / t_in:.2f}x the in-kernel transpose's time)")
    traffic = 2 * x.nbytes
    print(f"Y = X.T, [4096, 4096] f32 in [64, 64] tiles: numpy ascontiguousarray "
          f"{traffic / c_np / 1e6:.1f} GB/s, cpu_sim transposed view {traffic / c_view / 1e6:.1f} "
          f"GB/s = {c_np / c_view:.2f}x numpy; the same tasks through plain views "
          f"{traffic / c_plain / 1e6:.1f} GB/s")


if __name__ == "__main__":
    sys.exit(main())
