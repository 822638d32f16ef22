"""Micro-benchmark of generated kernels against NumPy: `python -m ptowsp.backends.cpu.kernel_bench`.

Fused RMSNorm, row softmax and SiLU(x)*y over an [R, 128] f32 array (default R = 524288: 256 MiB
per array, memory-bound), single-threaded: a C loop written here calls the generated kernel once
per [16, 128] tile (no runtime, no Python per tile). NumPy is measured in the same run, idiomatic
and with `out=` buffers, and so are plain hand-written fused C loops (RMSNorm; softmax and SiLU
with libm's expf, which -O3 leaves scalar). GB/s
counts compulsory traffic (every input byte read once, every output byte written once). Not a
test: the figures go into reports, never into assertions.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ...ir import nodes as N
from .kernels import emit_kernels, kernel_symbol

TILE = (16, 128)


def _kernels() -> list[N.Kernel]:
    r, c = TILE
    f32 = "f32"
    x = N.Op("param", (), TILE, f32, "x")
    rms = N.Kernel("bench_rmsnorm", "rmsnorm", (
        N.KParam("x", "tile", f32, "In", r, c), N.KParam("w", "tile", f32, "In", 1, c),
        N.KParam("y", "tile", f32, "Out", r, c), N.KParam("eps", "scalar", f32)), (
        x, N.Op("mul", (0, 0), TILE, f32), N.Op("rowmean", (1,), (r, 1), f32),
        N.Op("scalar_param", (), None, f32, "eps"), N.Op("add", (2, 3), (r, 1), f32),
        N.Op("rsqrt", (4,), (r, 1), f32), N.Op("mul", (0, 5), TILE, f32),
        N.Op("param", (), (1, c), f32, "w"), N.Op("mul", (6, 7), TILE, f32)), (("y", 8),))
    soft = N.Kernel("bench_softmax", "softmax", (
        N.KParam("x", "tile", f32, "In", r, c), N.KParam("y", "tile", f32, "Out", r, c)),
        (x, N.Op("softmax", (0,), TILE, f32)), (("y", 1),))
    silu = N.Kernel("bench_silu_mul", "silu_mul", (
        N.KParam("x", "tile", f32, "In", r, c), N.KParam("g", "tile", f32, "In", r, c),
        N.KParam("y", "tile", f32, "Out", r, c)),
        (x, N.Op("silu", (0,), TILE, f32), N.Op("param", (), TILE, f32, "g"),
         N.Op("mul", (1, 2), TILE, f32)), (("y", 3),))
    return [rms, soft, silu]


_DRIVER = """
/* one call per [16, 128] tile, tiles of an [rows, 128] row-major array */
static void fill(wsp_tile *t, float *base, int64_t row, int64_t rows)
{
    t->data = base + row * 128;
    t->rows = rows;
    t->cols = 128;
    t->stride = 128;
    t->col_stride = 1;
}

int bench_rmsnorm(float *x, float *w, float *y, int64_t rows)
{
    wsp_tile t[3];
    wsp_scalar s[1];
    s[0].f = 1e-6;
    fill(&t[1], w, 0, 1);
    for (int64_t r = 0; r < rows; r += 16) {
        fill(&t[0], x, r, 16);
        fill(&t[2], y, r, 16);
        int rc = RMS(t, s);
        if (rc) return rc;
    }
    return 0;
}

int bench_softmax(float *x, float *y, int64_t rows)
{
    wsp_tile t[2];
    for (int64_t r = 0; r < rows; r += 16) {
        fill(&t[0], x, r, 16);
        fill(&t[1], y, r, 16);
        int rc = SOFT(t, 0);
        if (rc) return rc;
    }
    return 0;
}

int bench_silu_mul(float *x, float *g, float *y, int64_t rows)
{
    wsp_tile t[3];
    for (int64_t r = 0; r < rows; r += 16) {
        fill(&t[0], x, r, 16);
        fill(&t[1], g, r, 16);
        fill(&t[2], y, r, 16);
        int rc = SILU(t, 0);
        if (rc) return rc;
    }
    return 0;
}

/* the same RMSNorm written by hand, one pass per row */
void hand_rmsnorm(const float *restrict x, const float *restrict w, float *restrict y, int64_t rows)
{
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * 128;
        float acc[16] = {0};
        for (int64_t j = 0; j < 128; j += 16)
            for (int l = 0; l < 16; ++l) acc[l] += xr[j + l] * xr[j + l];
        float s = 0;
        for (int l = 0; l < 16; ++l) s += acc[l];
        float inv = 1.0f / sqrtf(s / 128.0f + 1e-6f);
        for (int64_t j = 0; j < 128; ++j) y[r * 128 + j] = xr[j] * inv * w[j];
    }
}

/* softmax and silu(x)*y by hand with libm's expf (which -O3 does not vectorise) */
void hand_softmax(const float *restrict x, float *restrict y, int64_t rows)
{
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * 128;
        float *yr = y + r * 128;
        float m = xr[0];
        for (int64_t j = 1; j < 128; ++j) m = xr[j] > m ? xr[j] : m;
        float s = 0;
        for (int64_t j = 0; j < 128; ++j) { yr[j] = expf(xr[j] - m); s += yr[j]; }
        float inv = 1.0f / s;
        for (int64_t j = 0; j < 128; ++j) yr[j] *= inv;
    }
}

void hand_silu_mul(const float *restrict x, const float *restrict g, float *restrict y, int64_t n)
{
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}
"""

_CDEF = """
int bench_rmsnorm(float *x, float *w, float *y, int64_t rows);
int bench_softmax(float *x, float *y, int64_t rows);
int bench_silu_mul(float *x, float *g, float *y, int64_t rows);
void hand_rmsnorm(const float *x, const float *w, float *y, int64_t rows);
void hand_softmax(const float *x, float *y, int64_t rows);
void hand_silu_mul(const float *x, const float *g, float *y, int64_t n);
"""


def _build(workdir: Path):
    """Compile the kernels and the driver with the build's compiler and flags; load them."""
    import cffi

    from ...ir.passes.plan_kernels import plan_kernel
    from . import build

    ks = [plan_kernel(k) for k in _kernels()]  # as -O2 compiles them (ir/passes/plan_kernels.py)
    syms = {"RMS": kernel_symbol(ks[0]), "SOFT": kernel_symbol(ks[1]), "SILU": kernel_symbol(ks[2])}
    defines = "".join(f"#define {k} {v}\n" for k, v in syms.items())
    src = emit_kernels(ks) + "\n" + defines + _DRIVER
    (workdir / "bench.c").write_text(src)
    so = workdir / "bench.so"
    cmd = build.compiler() + build.cflags() + ["-shared", "-I", str(build.RUNTIME_DIR),
                                               str(workdir / "bench.c"), "-o", str(so), "-lm"]
    subprocess.run(cmd, check=True)
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    return ffi, ffi.dlopen(str(so))


def _median_s(fn, repeat: int) -> float:
    fn()  # warm up (page faults, caches)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(rows: int = 524288, repeat: int = 5) -> list[dict]:
    """Measure every kernel and its NumPy forms; returns rows of {kernel, impl, ms, GB/s}."""
    import numpy as np

    if rows % 16:
        raise ValueError(f"rows must be a multiple of 16 (the kernels' tile), not {rows}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 128), dtype=np.float32)
    g = rng.standard_normal((rows, 128), dtype=np.float32)
    w = rng.standard_normal((1, 128), dtype=np.float32)
    y = np.empty_like(x)
    t1, t2 = np.empty_like(x), np.empty((rows, 1), np.float32)
    nbytes = x.nbytes
    results = []

    with tempfile.TemporaryDirectory(prefix="wsp-bench-") as tmp:
        ffi, lib = _build(Path(tmp))

        def p(a):
            return ffi.cast("float *", a.ctypes.data)

        def rms_np():
            return x * (1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + np.float32(1e-6))) * w

        def rms_np_out():
            np.multiply(x, x, out=t1)
            np.mean(t1, axis=1, keepdims=True, out=t2)
            np.add(t2, np.float32(1e-6), out=t2)
            np.sqrt(t2, out=t2)
            np.reciprocal(t2, out=t2)
            np.multiply(x, t2, out=y)
            np.multiply(y, w, out=y)

        def soft_np():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        def soft_np_out():
            np.max(x, axis=1, keepdims=True, out=t2)
            np.subtract(x, t2, out=y)
            np.exp(y, out=y)
            np.sum(y, axis=1, keepdims=True, out=t2)
            np.divide(y, t2, out=y)

        def silu_np():
            return x / (1 + np.exp(-x)) * g

        def silu_np_out():
            np.negative(x, out=y)
            np.exp(y, out=y)
            np.add(y, np.float32(1), out=y)
            np.divide(x, y, out=y)
            np.multiply(y, g, out=y)

        cases = [
            ("rmsnorm", 2 * nbytes, [
                ("wspc kernel", lambda: lib.bench_rmsnorm(p(x), p(w), p(y), rows)),
                ("hand-written C", lambda: lib.hand_rmsnorm(p(x), p(w), p(y), rows)),
                ("numpy", rms_np), ("numpy out=", rms_np_out)]),
            ("softmax", 2 * nbytes, [
                ("wspc kernel", lambda: lib.bench_softmax(p(x), p(y), rows)),
                ("C with expf", lambda: lib.hand_softmax(p(x), p(y), rows)),
                ("numpy", soft_np), ("numpy out=", soft_np_out)]),
            ("silu(x)*y", 3 * nbytes, [
                ("wspc kernel", lambda: lib.bench_silu_mul(p(x), p(g), p(y), rows)),
                ("C with expf", lambda: lib.hand_silu_mul(p(x), p(g), p(y), rows * 128)),
                ("numpy", silu_np), ("numpy out=", silu_np_out)]),
        ]
        for name, traffic, impls in cases:
            for impl, fn in impls:
                s = _median_s(fn, repeat)
                results.append({"kernel": name, "impl": impl, "ms": s * 1e3,
                                "GB/s": traffic / s / 1e9})
        # the generated kernels compute what NumPy computes
        lib.bench_softmax(p(x), p(y), rows)
        np.testing.assert_allclose(y[:4096], soft_np()[:4096], rtol=1e-5, atol=1e-7)
        lib.bench_rmsnorm(p(x), p(w), p(y), rows)
        np.testing.assert_allclose(y[:4096], rms_np()[:4096], rtol=1e-5, atol=1e-6)
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=524288)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    res = run(args.rows, args.repeat)
    print(f"[{args.rows}, 128] f32, 1 thread, median of {args.repeat}")
    print(f"{'kernel':<12} {'implementation':<16} {'ms':>9} {'GB/s':>7} {'vs numpy':>9}")
    print("-" * 57)
    base = {r["kernel"]: r["ms"] for r in res if r["impl"] == "numpy"}
    for r in res:
        print(f"{r['kernel']:<12} {r['impl']:<16} {r['ms']:9.1f} {r['GB/s']:7.1f} "
              f"{base[r['kernel']] / r['ms']:8.1f}x")


if __name__ == "__main__":
    main()
