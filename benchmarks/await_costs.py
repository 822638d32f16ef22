"""Costs of the runtime's enumerator-side calls that tests do not time (they check behaviour on
events, never elapsed time): wsp_await with nothing to wait for (a probe of the dependency
table: a few tens of ns), with finished writers, and a round trip on a just-submitted empty
writer on 2 workers (a few us); and wsp_note without a trace (a branch: the cost is the call).

    python benchmarks/await_costs.py [--calls 200000]

Targets printed next to the figures (from the former loose bounds of the tests): no writers
< 2 us, finished writers < 5 us, round trip < 2 ms, a note without a trace < 50 us from
Python; they are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime_c"

DRIVER = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "wsp_runtime.h"

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int k_put(const wsp_tile *tiles, const wsp_scalar *s) {
    *(int64_t *)tiles[0].data = s[0].i;
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Costs of wsp_await in ns per call, over n calls on a fresh run. what 0: nothing was ever
 * written (no record of the tensor); 1: 64 tiles of the tensor are registered, their writers
 * finished, the box awaited is one of them; 2: a round trip, an empty writer of the box submitted
 * just before each await (the mean); 3: the same, the median. Returns -1 on an error. */
static double await_bench(wsp_runtime *rt, long n, int what) {
    static int64_t cells[64];
    wsp_task *t = calloc(1, sizeof *t);
    int64_t *each = what == 3 ? calloc((size_t)(n > 0 ? n : 1), sizeof *each) : NULL;
    if (!t || (what == 3 && !each) || wsp_begin(rt, 0, WSP_WINDOW_STALL) != 0) return -1;
    t->fn = k_put;
    t->nscalars = 1;
    t->ntiles = 1;
    t->access[0].tensor = 0;
    t->access[0].mode = WSP_WRITE;
    t->access[0].ndim = 2;
    t->access[0].lo[1] = 0;
    t->access[0].hi[1] = 16;
    int rc = 0;
    wsp_access a = t->access[0];
    a.mode = WSP_READ;
    if (what == 1) {
        for (int k = 0; k < 64 && rc == 0; k++) {
            t->tiles[0].data = &cells[k];
            t->access[0].lo[0] = k * 16;
            t->access[0].hi[0] = k * 16 + 16;
            rc = wsp_submit(rt, t);
        }
        for (int k = 0; k < 64 && rc == 0; k++) {  /* then every one of them has finished */
            a.lo[0] = k * 16;
            a.hi[0] = k * 16 + 16;
            rc = wsp_await(rt, &a);
        }
    }
    a.lo[0] = 0;
    a.hi[0] = 16;
    int64_t t0 = now_ns();
    for (long i = 0; i < n && rc == 0; i++) {
        int64_t t_i = each ? now_ns() : 0;
        if (what >= 2) {
            t->tiles[0].data = &cells[0];
            t->scalars[0].i = i;
            t->access[0].lo[0] = 0;
            t->access[0].hi[0] = 16;
            rc = wsp_submit(rt, t);
        }
        if (rc == 0) rc = wsp_await(rt, &a);
        if (each) each[i] = now_ns() - t_i;
    }
    int64_t t1 = now_ns();
    int wrc = wsp_wait(rt);
    free(t);
    double result = (double)(t1 - t0) / (double)(n > 0 ? n : 1);
    if (each && n > 0) {
        qsort(each, (size_t)n, sizeof *each, cmp_i64);
        result = (double)each[n / 2];
    }
    free(each);
    if (rc || wrc) return -1;
    return result;
}

/* driver CALLS: "none finished trip median note" in ns per call */
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    long n = atol(argv[1]);
    wsp_runtime *rt = wsp_runtime_new(2, 2);
    if (!rt) return 3;
    double none = await_bench(rt, n, 0), finished = await_bench(rt, n, 1);
    long trips = n / 40 > 0 ? n / 40 : 1;
    double trip = await_bench(rt, trips, 2), median = await_bench(rt, trips, 3);
    if (wsp_begin(rt, 0, WSP_WINDOW_STALL)) return 4;
    int64_t t0 = now_ns();
    for (long k = 0; k < n; k++) wsp_note(rt, 1, k);
    double note = (double)(now_ns() - t0) / (double)n;
    if (wsp_wait(rt) || wsp_note_count(rt) != 0) return 5;
    wsp_runtime_free(rt);
    printf("%.1f %.1f %.1f %.1f %.1f\n", none, finished, trip, median, note);
    return none < 0 || finished < 0 || trip < 0 || median < 0;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("no C compiler found")
    with tempfile.TemporaryDirectory(prefix="wsp-bench-") as tmp:
        src, exe = Path(tmp) / "driver.c", Path(tmp) / "driver"
        src.write_text(DRIVER)
        subprocess.run([cc, "-std=c11", "-O3", "-pthread", "-I", str(RUNTIME),
                        *map(str, sorted(RUNTIME.glob("*.c"))), str(src), "-o", str(exe)],
                       check=True)
        out = subprocess.run([str(exe), str(args.calls)], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"the driver failed (status {out.returncode})")
        none, finished, trip, median, note = map(float, out.stdout.split())
    print(f"wsp_await, {args.calls:,} calls; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  no writers              {none:>10.1f} ns   (target < 2,000 ns)")
    print(f"  finished writers        {finished:>10.1f} ns   (target < 5,000 ns)")
    print(f"  round trip, 2 workers   {trip / 1000:>10.2f} us   (median {median / 1000:.2f} us;"
          f" target < 2,000 us)")
    print(f"wsp_note without a trace  {note:>10.1f} ns   from C")
    try:  # the same from Python through cffi, as the enumerators' tests call it
        import cffi
    except ImportError:
        return
    text = (RUNTIME / "wsp_runtime.h").read_text()
    ffi = cffi.FFI()
    ffi.cdef(text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")])
    with tempfile.TemporaryDirectory(prefix="wsp-bench-") as tmp:
        lib_path = Path(tmp) / "libwsp.so"
        subprocess.run([cc, "-std=c11", "-O3", "-pthread", "-fPIC", "-shared", "-I", str(RUNTIME),
                        *map(str, sorted(RUNTIME.glob("*.c"))), "-o", str(lib_path)], check=True)
        lib = ffi.dlopen(str(lib_path))
        rt = lib.wsp_runtime_new(1, 1)
        lib.wsp_begin(rt, 0, 0)
        t0 = time.perf_counter()
        for k in range(20_000):
            lib.wsp_note(rt, 1, k)
        per_call = (time.perf_counter() - t0) / 20_000
        lib.wsp_wait(rt)
        lib.wsp_runtime_free(rt)
    print(f"wsp_note without a trace  {per_call * 1e9:>10.1f} ns   from Python (target < 50,000 ns)")


if __name__ == "__main__":
    main()
