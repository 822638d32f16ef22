"""cpu_sim kernels against NumPy and against a hand-written fused C loop, in one run.

Memory-bound kernels (RMSNorm, row softmax, SiLU gating) over [524288, 128] f32 (256 MiB in,
256 MiB out), and a 1024^3 GEMM against numpy.matmul. Prints medians and ratios; the targets
(issue 3) are at least 5x idiomatic NumPy and 70% of the fused C at 2 threads for the
memory-bound kernels, and at least 50% of numpy.matmul's GFLOP/s for GEMM.

`--matmul` measures one matmul kernel instead, called in a C loop (no runtime, no Python per
call, operands in L1/L2): GFLOP/s of `matmul(a, b)` for M = 1, 2, 4, 8, 16, 64 rows of `a` at
K = N = 256, and of `matmul(a, transpose(bt))` (bt a [N, K] tile: decode attention's q @ k^T),
both as -O2 compiles them. The target (issue 18) is at least half the large-M GFLOP/s for
M = 1..8.

    python benchmarks/kernels.py [--rows 524288] [--runs 9] [--workers 2]
    python benchmarks/kernels.py --matmul [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ptowsp

ROOT = Path(__file__).resolve().parents[1]

PROGRAMS = {
    "rmsnorm": """
sym R
input  X: f32[R, 128]
input  W: f32[1, 128]
output Y: f32[R, 128]
kernel k(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, x * rsqrt(rowmean(x * x) + 1e-6) * w)
}
workload main_w() { for t in P(R / 16) { k[t](x = X[t*16 : t*16 + 16, :], w = W, y = Y[t*16 : t*16 + 16, :]) } }
""",
    "softmax": """
sym R
input  X: f32[R, 128]
output Y: f32[R, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, softmax(x)) }
workload main_w() { for t in P(R / 16) { k[t](x = X[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :]) } }
""",
    "silu_gate": """
sym R
input  X: f32[R, 128]
input  G: f32[R, 128]
output Y: f32[R, 128]
kernel k(x: In[Tile[16, 128, f32]], g: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, silu(x) * g)
}
workload main_w() {
    for t in P(R / 16) {
        k[t](x = X[t*16 : t*16 + 16, :], g = G[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :])
    }
}
""",
}

FUSED_C = r"""
#include <math.h>
#include <pthread.h>
#include <stdint.h>
typedef struct { const float *x, *w, *g; float *y; int64_t r0, r1; int op; } job;
static void *work(void *p) {
    job *j = (job *)p;
    for (int64_t r = j->r0; r < j->r1; r++) {
        const float *x = j->x + r * 128; float *y = j->y + r * 128;
        if (j->op == 0) {
            float s = 0; for (int c = 0; c < 128; c++) s += x[c] * x[c];
            float inv = 1.0f / sqrtf(s / 128 + 1e-6f);
            for (int c = 0; c < 128; c++) y[c] = x[c] * inv * j->w[c];
        } else if (j->op == 1) {
            float m = x[0]; for (int c = 1; c < 128; c++) m = x[c] > m ? x[c] : m;
            float s = 0; for (int c = 0; c < 128; c++) { y[c] = expf(x[c] - m); s += y[c]; }
            float inv = 1.0f / s; for (int c = 0; c < 128; c++) y[c] *= inv;
        } else {
            const float *g = j->g + r * 128;
            for (int c = 0; c < 128; c++) y[c] = x[c] / (1.0f + expf(-x[c])) * g[c];
        }
    }
    return 0;
}
void fused(int op, const float *x, const float *w, const float *g, float *y, int64_t rows, int threads) {
    pthread_t t[16]; job j[16];
    for (int i = 0; i < threads; i++) {
        j[i] = (job){x, w, g, y, rows * i / threads, rows * (i + 1) / threads, op};
        pthread_create(&t[i], 0, work, &j[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
}
"""


def medians_ms(fns, runs: int, pause: float = 0.0) -> list[float]:
    """Median milliseconds of each function, the functions taking turns within every run (the
    machine's drift then hits all of them alike). `pause` seconds before each call let the
    threads of the previous one go to sleep: OpenBLAS's spin for a while after numpy.matmul
    returns (a pause slows idiomatic NumPy's page faults down, so only GEMM takes one)."""
    for fn in fns:
        fn()  # warm up (page faults, caches)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            time.sleep(pause)
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1000)
    return [statistics.median(ts) for ts in times]


def build_fused(workdir: Path):
    import cffi

    src = workdir / "fused.c"
    src.write_text(FUSED_C)
    lib = workdir / "fused.so"
    subprocess.run(["cc", "-O3", "-march=native", "-ffast-math", "-fPIC", "-shared", "-pthread",
                    str(src), "-o", str(lib), "-lm"], check=True)
    ffi = cffi.FFI()
    ffi.cdef("void fused(int op, const float *x, const float *w, const float *g, float *y, "
             "int64_t rows, int threads);")
    return ffi, ffi.dlopen(str(lib))


def numpy_versions(x, w, g):
    def rmsnorm():
        return x * (1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)) * w

    def softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def silu_gate():
        return x / (1 + np.exp(-x)) * g

    return {"rmsnorm": rmsnorm, "softmax": softmax, "silu_gate": silu_gate}


MATMUL_KERNEL = """
kernel mm(a: In[Tile[{m}, {k}, f32]], b: In[Tile[{br}, {bc}, f32]], c: Out[Tile[{m}, {n}, f32]]) {{
    store(c, matmul(a, {b}))
}}
"""

MATMUL_DRIVER = """
int bench_mm(float *a, float *b, float *c, int64_t m, int64_t k, int64_t n, int bt, int64_t calls)
{
    wsp_tile t[3] = {
        {.data = a, .rows = m, .cols = k, .stride = k, .col_stride = 1},
        {.data = b, .rows = bt ? n : k, .cols = bt ? k : n, .stride = bt ? k : n, .col_stride = 1},
        {.data = c, .rows = m, .cols = n, .stride = n, .col_stride = 1},
    };
    for (int64_t r = 0; r < calls; ++r) {
        int rc = KERNEL(t, 0);
        if (rc) return rc;
    }
    return 0;
}
"""


def build_matmul(workdir: Path, m: int, k: int, n: int, transposed: bool):
    """One -O2 matmul kernel and a C loop calling it, compiled with the build's flags."""
    import cffi

    from ptowsp import driver
    from ptowsp.backends.cpu import build
    from ptowsp.backends.cpu.kernels import emit_kernels, kernel_symbol

    text = MATMUL_KERNEL.format(m=m, k=k, n=n, br=n if transposed else k,
                                bc=k if transposed else n,
                                b="transpose(b)" if transposed else "b")
    from ptowsp.ir.passes.plan_kernels import plan_kernel

    (kern,) = driver.lower(driver.check_text(text, "mm.wsp")).kernels
    kern = plan_kernel(kern)  # as -O2 plans it
    name = f"mm_{m}_{k}_{n}_{int(transposed)}"
    src = emit_kernels([kern]) + f"\n#define KERNEL {kernel_symbol(kern)}\n" + MATMUL_DRIVER
    (workdir / f"{name}.c").write_text(src)
    so = workdir / f"{name}.so"
    subprocess.run(build.compiler() + build.cflags() + [
        "-shared", "-I", str(build.RUNTIME_DIR), str(workdir / f"{name}.c"), "-o", str(so), "-lm"],
        check=True)
    ffi = cffi.FFI()
    ffi.cdef("int bench_mm(float *a, float *b, float *c, int64_t m, int64_t k, int64_t n, "
             "int bt, int64_t calls);")
    return ffi, ffi.dlopen(str(so))


def matmul_main(runs: int) -> None:
    rng = np.random.default_rng(0)
    k = n = 256
    cases = [(m, False) for m in (1, 2, 4, 8, 16, 64)] + [(m, True) for m in (1, 4, 64)]
    print(f"one matmul kernel [M, {k}] @ [{k}, {n}] f32, 1 thread, median of {runs} runs "
          "(each ~0.1 s of calls)")
    print(f"{'M':>3} {'B':<12} {'us/call':>9} {'GFLOP/s':>8} {'numpy':>8}")
    with tempfile.TemporaryDirectory() as d:
        for m, tr in cases:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((n, k) if tr else (k, n), dtype=np.float32)
            c = np.empty((m, n), np.float32)
            ffi, lib = build_matmul(Path(d), m, k, n, tr)
            p = [ffi.cast("float *", ffi.from_buffer(x)) for x in (a, b, c)]
            calls = max(1, int(0.1e9 / (2 * m * k * n)))  # ~0.1 s at 1 GFLOP/s... fewer when fast
            if lib.bench_mm(*p, m, k, n, int(tr), 1) != 0:
                raise SystemExit("the kernel failed")
            want = a.astype(np.float64) @ (b.T if tr else b).astype(np.float64)
            np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)
            bt = b.T if tr else b
            t, t_np = medians_ms(
                [lambda lib=lib, p=p, m=m, tr=tr, calls=calls: lib.bench_mm(*p, m, k, n, int(tr), calls),
                 lambda a=a, bt=bt, c=c, calls=calls: [np.matmul(a, bt, out=c) for _ in range(calls)]],
                runs)
            flops = 2 * m * k * n * calls
            print(f"{m:>3} {'transpose(b)' if tr else 'b':<12} {t * 1e3 / calls:9.2f} "
                  f"{flops / t / 1e6:8.1f} {flops / t_np / 1e6:8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=524288)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--matmul", action="store_true", help="one matmul kernel's GFLOP/s by M")
    args = ap.parse_args()
    if args.matmul:
        return matmul_main(args.runs)
    rows = args.rows
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 128), dtype=np.float32)
    g = rng.standard_normal((rows, 128), dtype=np.float32)
    w = rng.standard_normal((1, 128), dtype=np.float32)
    y = np.empty_like(x)
    traffic = {"rmsnorm": 2 * x.nbytes, "softmax": 2 * x.nbytes, "silu_gate": 3 * x.nbytes}
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        ffi, fused = build_fused(Path(d))
        np_fns = numpy_versions(x, w, g)
        print(f"memory-bound kernels, [{rows}, 128] f32, {args.workers} workers, medians of {args.runs} "
              "runs (GB/s counts compulsory traffic)")
        print(f"{'kernel':<10} {'numpy':>9} {'fused C':>9} {'cpu_sim':>9}   {'vs numpy':>8} {'vs fused C':>10}")
        for name, text in PROGRAMS.items():
            prog = ptowsp.parse(text, f"{name}.wsp").compile(target="cpu_sim")
            arrays = {"X": x, "W": w, "G": g}
            inputs = {k: v for k, v in arrays.items() if f"input  {k}:" in text}
            op = {"rmsnorm": 0, "softmax": 1, "silu_gate": 2}[name]
            xp, wp, gp, yp = (ffi.cast("float *", ffi.from_buffer(a)) for a in (x, w, g, y))
            t_np, t_c, t_w = medians_ms(
                [np_fns[name],
                 lambda op=op, p=(xp, wp, gp, yp): fused.fused(op, *p, rows, args.workers),
                 lambda prog=prog, inputs=inputs: prog.run(workers=args.workers, **inputs)],
                args.runs)
            gbs = [traffic[name] / t / 1e6 for t in (t_np, t_c, t_w)]
            print(f"{name:<10} {gbs[0]:8.1f}  {gbs[1]:8.1f}  {gbs[2]:8.1f}    {t_np / t_w:7.2f}x {t_c / t_w * 100:9.0f}%")
        # GEMM
        n = 1024
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        gemm = ptowsp.load(str(ROOT / "examples" / "gemm.wsp")).compile(target="cpu_sim")
        t_np, t_w = medians_ms([lambda: a @ b, lambda: gemm.run(A=a, B=b, workers=args.workers)],
                               args.runs, pause=0.2)
        flops = 2 * n ** 3
        print(f"\nGEMM {n}^3 f32: numpy.matmul {flops / t_np / 1e6:7.1f} GFLOP/s, cpu_sim "
              f"{flops / t_w / 1e6:7.1f} GFLOP/s = {t_np / t_w * 100:.0f}% of numpy")


if __name__ == "__main__":
    sys.exit(main())
