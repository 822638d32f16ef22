"""The cost of a collective on MPI: wspc's allreduce, as the device lowering makes it (one task
per device and tile, the tile's shape `ir/collective_tiles.tile_shape`'s, reading the P addends
of the tile in device order: a point-to-point message per remote tile through the runtime's
transport, and the fixed-order sum), against a bare mpi4py `Allreduce` of the same bytes, in the
same run, interleaved.

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

/* the lowering's allreduce of A[p, rows, cols] into Y[p, rows, cols]: a task per device and tile */
int bench_allreduce(wsp_runtime *rt, float *a, float *y, int p, int64_t rows, int64_t cols,
                    int64_t trows, int64_t tcols) {
    int rc = wsp_begin(rt, 0, 0);
    if (rc) return rc;
    wsp_task task;
    for (int d = 0; d < p && !rc; d++)
        for (int64_t r = 0; r < rows && !rc; r += trows)
            for (int64_t c = 0; c < cols && !rc; c += tcols) {
                memset(&task, 0, sizeof task);
                task.fn = k_sum;
                task.device = d;
                task.ntiles = p + 1;
                task.nscalars = 1;
                task.scalars[0].i = p;
                for (int q = 0; q <= p; q++) {
                    int dev = q < p ? q : d;
                    float *base = q < p ? a : y;
                    int64_t nr = rows - r < trows ? rows - r : trows;
                    int64_t nc = cols - c < tcols ? cols - c : tcols;
                    task.tiles[q].data = base + ((int64_t)dev * rows + r) * cols + c;
                    task.tiles[q].rows = nr;
                    task.tiles[q].cols = nc;
                    task.tiles[q].stride = cols;
                    task.tiles[q].col_stride = 1;
                    wsp_access *acc = &task.access[q];
                    acc->tensor = q < p ? 0 : 1;
                    acc->mode = q < p ? WSP_READ : WSP_WRITE;
                    acc->ndim = 3;
                    acc->lo[0] = dev; acc->hi[0] = dev + 1;
                    acc->lo[1] = r; acc->hi[1] = r + nr;
                    acc->lo[2] = c; acc->hi[2] = c + nc;
                }
                rc = wsp_submit(rt, &task);
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
               "int64_t cols, int64_t trows, int64_t tcols);")
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
        times = {"wspc": [], "mpi4py": []}
        for k in range(runs + 2):  # two warm-up rounds
            for what in ("wspc", "mpi4py") if k % 2 == 0 else ("mpi4py", "wspc"):
                comm.Barrier()
                t0 = time.perf_counter()
                if what == "wspc":
                    assert lib.bench_allreduce(rt, pa, py, p, rows, cols, *shape) == 0
                else:
                    comm.Allreduce(send, recv, op=MPI.SUM)
                dt = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
                if k >= 2:
                    times[what].append(dt * 1e3)
        if me == 0:
            w, m = statistics.median(times["wspc"]), statistics.median(times["mpi4py"])
            print(f"{mib:>3} MiB  {p} ranks  tiles {shape[0]}x{shape[1]}  wspc {w:8.3f} ms   mpi4py Allreduce {m:8.3f} ms   "
                  f"ratio {w / m:5.2f}", flush=True)
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
