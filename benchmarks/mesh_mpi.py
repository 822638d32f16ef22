"""The cost of a collective on MPI: wspc's allreduce, as the device lowering makes it (one task
per device and tile, the tile's shape `ir/collective_tiles.tile_shape`'s, reading the P addends
of the tile in device order: a point-to-point message per remote tile through the runtime's
transport, and the fixed-order sum), against a bare mpi4py `Allreduce` of the same bytes, in the
same run, interleaved. A third column, `rs+ag`, submits the same allreduce as a reduce-scatter
and an allgather (tile k summed in the same fixed order on device k % P only, then copied from
there to the others): what docs/running.md ("Running on MPI", Speed) weighs against today's
lowering. Every run's result is checked against the fixed-order sum, bit for bit.

    python benchmarks/mesh_mpi.py [--ranks 2] [--runs 15] [--workers 1] [--tile ROWSxCOLS]

Needs the `mpi` extra (mpi4py and the mpich wheel). Each size's figure is the median over the
runs of the slowest rank's time for one collective (a barrier before each). The enumeration is
C (as generated code enumerates), so the figure is the runtime's and the transport's, not
Python's. Target: within 20% of the bare Allreduce for 1 MiB and more.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES_MIB = (1, 4, 16)

BENCH_C = r"""
#include <string.h>
#include "wsp_runtime.h"

static int k_sum(const wsp_tile *t, const wsp_scalar *s) {
    int p = (int)s[0].i;
    const wsp_tile *d = &t[p];
    float *y = d->data;
    for (int64_t i = 0; i < d->rows; i++) {
        float *yr = y + i * d->stride;
        const float *x0 = (const float *)t[0].data + i * t[0].stride;
        for (int64_t j = 0; j < d->cols; j++) yr[j] = x0[j];
        for (int q = 1; q < p; q++) {
            const float *xq = (const float *)t[q].data + i * t[q].stride;
            for (int64_t j = 0; j < d->cols; j++) yr[j] += xq[j];
        }
    }
    return 0;
}

/* A task of device d on tile (r, c): reading tile (r, c) of A on every device in order (the
 * fixed-order sum), or with `from` >= 0 that of Y on device `from` (a copy), into Y on d. */
static int submit(wsp_runtime *rt, float *a, float *y, int p, int d, int from, int64_t rows,
                  int64_t cols, int64_t r, int64_t c, int64_t trows, int64_t tcols) {
    wsp_task task;
    memset(&task, 0, sizeof task);
    int n = from >= 0 ? 1 : p;
    task.fn = k_sum;
    task.device = d;
    task.ntiles = n + 1;
    task.nscalars = 1;
    task.scalars[0].i = n;
    for (int q = 0; q <= n; q++) {
        int dev = q < n ? (from >= 0 ? from : q) : d;
        float *base = q < n && from < 0 ? a : y;
        int64_t nr = rows - r < trows ? rows - r : trows;
        int64_t nc = cols - c < tcols ? cols - c : tcols;
        task.tiles[q].data = base + ((int64_t)dev * rows + r) * cols + c;
        task.tiles[q].rows = nr;
        task.tiles[q].cols = nc;
        task.tiles[q].stride = cols;
        task.tiles[q].col_stride = 1;
        wsp_access *acc = &task.access[q];
        acc->tensor = base == a ? 0 : 1;
        acc->mode = q < n ? WSP_READ : WSP_WRITE;
        acc->ndim = 3;
        acc->lo[0] = dev; acc->hi[0] = dev + 1;
        acc->lo[1] = r; acc->hi[1] = r + nr;
        acc->lo[2] = c; acc->hi[2] = c + nc;
    }
    return wsp_submit(rt, &task);
}

/* Allreduce as reduce-scatter + allgather: tile k is summed (in the fixed order) only on device
 * k % p, then copied from there to the others. */
static int submit_rsag(wsp_runtime *rt, float *a, float *y, int p, int64_t rows, int64_t cols,
                       int64_t trows, int64_t tcols) {
    int rc = 0;
    for (int phase = 0; phase < 2; phase++)
        for (int d = 0; d < p && !rc; d++) {
            int64_t k = 0;
            for (int64_t r = 0; r < rows && !rc; r += trows)
                for (int64_t c = 0; c < cols && !rc; c += tcols, k++) {
                    int owner = (int)(k % p);
                    if (phase == 0 && owner == d)
                        rc = submit(rt, a, y, p, d, -1, rows, cols, r, c, trows, tcols);
                    else if (phase == 1 && owner != d)
                        rc = submit(rt, a, y, p, d, owner, rows, cols, r, c, trows, tcols);
                }
        }
    return rc;
}

/* the lowering's allreduce of A[p, rows, cols] into Y[p, rows, cols]: a task per device and tile
 * (rsag: as reduce-scatter + allgather instead) */
int bench_allreduce(wsp_runtime *rt, float *a, float *y, int p, int64_t rows, int64_t cols,
                    int64_t trows, int64_t tcols, int rsag) {
    int rc = wsp_begin(rt, 0, 0);
    if (rc) return rc;
    if (rsag) {
        rc = submit_rsag(rt, a, y, p, rows, cols, trows, tcols);
    } else {
        for (int d = 0; d < p && !rc; d++)
            for (int64_t r = 0; r < rows && !rc; r += trows)
                for (int64_t c = 0; c < cols && !rc; c += tcols)
                    rc = submit(rt, a, y, p, d, -1, rows, cols, r, c, trows, tcols);
    }
    int w = wsp_wait(rt);
    return rc ? rc : w;
}
"""


def rank(so: str, transport: str, runs: int, workers: int, tile: tuple[int, int] | None) -> None:
    import statistics
    import time

    import cffi
    import numpy as np
    from mpi4py import MPI

    from ptowsp.backends.cpu.mpi import Transport
    from ptowsp.ir.collective_tiles import tile_shape

    text = (ROOT / "runtime_c" / "wsp_runtime.h").read_text()
    ffi = cffi.FFI()
    ffi.cdef(text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")]
             + "int bench_allreduce(wsp_runtime *rt, float *a, float *y, int p, int64_t rows, "
               "int64_t cols, int64_t trows, int64_t tcols, int rsag);")
    lib = ffi.dlopen(so)
    comm = MPI.COMM_WORLD
    me, p = comm.rank, comm.size
    rt = lib.wsp_runtime_new(workers, 2)
    x = Transport(Path(transport))
    x.attach(ffi, lib, rt, [4, 4])
    for mib in SIZES_MIB:
        cols = 1024
        rows = mib * (1 << 20) // 4 // cols
        a = np.zeros((p, rows, cols), np.float32)
        a[me] = np.random.default_rng(me).standard_normal((rows, cols)).astype(np.float32)
        y = np.zeros_like(a)
        shape = tile or tile_shape(rows, cols, 4)  # the lowering's, for a [rows, cols] f32
        send, recv = np.ascontiguousarray(a[me]), np.empty((rows, cols), np.float32)
        pa = ffi.cast("float *", ffi.from_buffer(a))
        py = ffi.cast("float *", ffi.from_buffer(y))
        # the fixed-order sum of the addends, as every method's result must be (bit for bit: the
        # same float32 additions in the same order)
        want = np.zeros((rows, cols), np.float32)
        for q in range(p):
            want += np.random.default_rng(q).standard_normal((rows, cols)).astype(np.float32)
        methods = ["wspc", "rs+ag", "mpi4py"]
        times: dict[str, list[float]] = {w: [] for w in methods}
        for k in range(runs + 2):  # two warm-up rounds
            for what in methods[k % 3:] + methods[:k % 3]:  # each goes first in turn
                y[me] = 0
                comm.Barrier()
                t0 = time.perf_counter()
                if what == "mpi4py":
                    comm.Allreduce(send, recv, op=MPI.SUM)
                else:
                    assert lib.bench_allreduce(rt, pa, py, p, rows, cols, *shape,
                                               int(what == "rs+ag")) == 0
                dt = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
                if what != "mpi4py":
                    assert np.array_equal(y[me], want), what
                if k >= 2:
                    times[what].append(dt * 1e3)
        if me == 0:
            w, r, m = (statistics.median(times[k]) for k in methods)
            print(f"{mib:>3} MiB  {p} ranks  tiles {shape[0]}x{shape[1]}  wspc {w:7.3f} ms  "
                  f"rs+ag {r:7.3f} ms  mpi4py Allreduce {m:7.3f} ms  ratios {w / m:5.2f} "
                  f"{r / m:5.2f}", flush=True)
    x.close()
    lib.wsp_runtime_free(rt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tile", default="", help="the collective's tile, ROWSxCOLS of f32 (default: "
                    "the lowering's, ir/collective_tiles.tile_shape; each remote tile is one "
                    "message)")
    ap.add_argument("--rank", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank(args.rank[0], args.rank[1], args.runs, args.workers,
             tuple(int(v) for v in args.tile.split("x")) if args.tile else None)
        return
    from ptowsp.backends.cpu import build, mpi

    install = mpi.find()
    if install is None:
        sys.exit("benchmarks/mesh_mpi.py needs the `mpi` extra: pip install 'ptowsp[mpi]'")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "bench.c"
        src.write_text(BENCH_C)
        so = Path(tmp) / "libbench.so"
        runtime = sorted(str(p) for p in (ROOT / "runtime_c").glob("*.c"))
        subprocess.run(build.compiler() + build.cflags() + ["-shared", "-I", str(ROOT / "runtime_c"),
                                                            *runtime, str(src), "-o", str(so)],
                       check=True)
        transport = mpi.transport_library(install)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run([str(install.mpiexec), "-n", str(args.ranks), sys.executable, __file__,
                        "--runs", str(args.runs), "--workers", str(args.workers), "--tile", args.tile or "",
                        "--rank", str(so), str(transport)], check=True, env=env, timeout=1800)


if __name__ == "__main__":
    main()
