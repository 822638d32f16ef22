"""One rank of the runtime's MPI transport test (tests/test_mesh_mpi.py runs it under the mpich
wheel's `mpiexec -n P`): the tasks a lowered allreduce over P devices makes, built by hand.

Tensors (each with the leading device dimension of the lowering): A f32[P, R, C], the addends,
and Y f32[P, R, C], the result. Every rank fills only ITS slice of A (the others hold NaN, so
a tile that was not received shows); then, enumerated identically on every rank:
  - per device d and tile: k_scale(A[d, tile]) *= 2 (device d's own work before the collective);
  - per device d and tile: k_sum(A[0, tile], ..., A[P-1, tile]) -> Y[d, tile] (device d): the
    collective's tile task, which reads P - 1 remote tiles in the fixed order 0 .. P-1.
The rank writes its Y slice, the runtime's counts, the task count and the transport's steps of
progress made by workers to OUT/rank-R.npz.
Usage: transport_case.py RUNTIME_SO TRANSPORT_SO OUT ROWS COLS TILE WORKERS RUNS [FAIL_RANK]
"""

import os
import sys
from pathlib import Path

import cffi
import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ptowsp.backends.cpu.mpi import Transport  # noqa: E402

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime_c"


def cdef() -> str:
    text = (RUNTIME_DIR / "wsp_runtime.h").read_text()
    start = text.index("/* CDEF-BEGIN */") + len("/* CDEF-BEGIN */")
    body = text[start:text.index("/* CDEF-END */")]
    return body + "wsp_kernel_fn case_kernel(int which);\n"


def view(task, ptr, shape, i, tensor, d, r, c, mode) -> None:
    """Tile i of `task`: the tile at (r, c) of device d's slice of `tensor`, and its box."""
    rows, cols, tile = shape
    n_r, n_c = min(tile, rows - r), min(tile, cols - c)
    off = ((d * rows + r) * cols + c) * 4
    task.tiles[i].data = ptr[tensor] + off
    task.tiles[i].rows, task.tiles[i].cols = n_r, n_c
    task.tiles[i].stride, task.tiles[i].col_stride = cols, 1
    acc = task.access[i]
    acc.tensor, acc.mode, acc.ndim = tensor, mode, 3
    acc.lo[0], acc.hi[0] = d, d + 1
    acc.lo[1], acc.hi[1] = r, r + n_r
    acc.lo[2], acc.hi[2] = c, c + n_c


def main() -> None:
    so, transport_so, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    rows, cols, tile, workers, runs = (int(a) for a in sys.argv[4:9])
    fail_rank = int(sys.argv[9]) if len(sys.argv) > 9 else -1
    comm = MPI.COMM_WORLD
    me, p = comm.rank, comm.size
    ffi = cffi.FFI()
    ffi.cdef(cdef())
    lib = ffi.dlopen(so)
    rt = lib.wsp_runtime_new(workers, 2)
    x = Transport(Path(transport_so))
    x.attach(ffi, lib, rt, [4, 4])
    assert x.device == me
    rng = np.random.default_rng(7)
    base = rng.standard_normal((p, rows, cols)).astype(np.float32)
    k_scale, k_sum, k_fail = (lib.case_kernel(i) for i in range(3))
    shape = (rows, cols, tile)
    results = []
    for run in range(runs):
        a = np.full((p, rows, cols), np.nan, dtype=np.float32)
        a[me] = base[me] * (run + 1)
        y = np.full((p, rows, cols), np.nan, dtype=np.float32)
        ptr = [ffi.cast("char *", ffi.from_buffer(a)), ffi.cast("char *", ffi.from_buffer(y))]
        assert lib.wsp_begin(rt, 0, 0) == 0
        task = ffi.new("wsp_task *")
        tiles = [(r, c) for r in range(0, rows, tile) for c in range(0, cols, tile)]

        for d in range(p):
            for k, (r, c) in enumerate(tiles):
                ffi.memmove(task, b"\0" * ffi.sizeof("wsp_task"), ffi.sizeof("wsp_task"))
                failing = d == fail_rank and k == len(tiles) // 2
                task.fn = k_fail if failing else k_scale
                task.kernel, task.stmt, task.device = 0, 0, d
                task.ntiles, task.nscalars = 1, 1
                task.scalars[0].f = 2.0
                view(task, ptr, shape, 0, 0, d, r, c, 3)
                rc = lib.wsp_submit(rt, task)
                assert rc in (0, 3), rc
        for d in range(p):
            for r, c in tiles:
                ffi.memmove(task, b"\0" * ffi.sizeof("wsp_task"), ffi.sizeof("wsp_task"))
                task.fn = k_sum
                task.kernel, task.stmt, task.device = 1, 1, d
                task.ntiles, task.nscalars = p + 1, 1
                task.scalars[0].i = p
                for q in range(p):
                    view(task, ptr, shape, q, 0, q, r, c, 1)
                view(task, ptr, shape, p, 1, d, r, c, 2)
                rc = lib.wsp_submit(rt, task)
                assert rc in (0, 3), rc
        code = lib.wsp_wait(rt)
        if code:
            message = ffi.string(lib.wsp_error_message(rt)).decode()
            (out / f"error-{me}.txt").write_text(message)
            comm.Abort(1)
            os._exit(1)  # MPI_Abort may return
        stats = ffi.new("wsp_stats *")
        lib.wsp_get_stats(rt, stats)
        results.append((y[me].copy(), int(stats.tasks), int(lib.wsp_transport_count(rt))))
    steps = x.worker_steps
    x.close()
    lib.wsp_runtime_free(rt)
    np.savez(out / f"rank-{me}.npz", **{f"y{i}": r[0] for i, r in enumerate(results)},
             tasks=np.array([r[1] for r in results]), reads=np.array([r[2] for r in results]),
             worker_steps=np.array(steps))


if __name__ == "__main__":
    main()
