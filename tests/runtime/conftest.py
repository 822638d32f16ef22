"""Builds the C runtime with the test harness (harness.c) and the test hook (hooks.c, with
-DWSP_TEST_HOOKS) into one shared object per session and loads it with cffi in ABI mode, using
the cdef text between the CDEF markers of wsp_runtime.h.

Timing is never what a runtime test checks: a task that must still be running when something
happens is a gated task (`Runtime.gated`, harness.c's K_GATE), which cannot finish before the
test opens its gate; a call that must not wait for it is made under a hang guard
(`call_with_timeout`), whose generous limit only turns a hang into a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..guard import GUARD, Pending, call_with_timeout  # noqa: F401 - the runtime tests' import

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_DIR = ROOT / "runtime_c"
HERE = Path(__file__).resolve().parent

# The flags every runtime file must compile cleanly with (the brief's contract).
STRICT_FLAGS = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Werror", "-pthread", "-fPIC", "-shared"]

# Error codes and modes, mirrored from wsp_runtime.h for readability.
OK, ERR_VIEW, ERR_WINDOW, ERR_KERNEL, ERR_INTERNAL, ERR_USAGE = 0, 1, 2, 3, 4, 5
READ, WRITE, READWRITE = 1, 2, 3
STALL, ABORT = 0, 1
K_RECORD, K_EMPTY, K_RENDEZVOUS, K_STORE, K_GATE, K_GATE_STORE = 0, 1, 2, 3, 4, 5


HARNESS_CDEF = """
wsp_kernel_fn harness_kernel(int which);
int harness_reset(long n);
long harness_start(long id);
long harness_finish(long id);
long harness_max_running(void);
long harness_thread(long id);
long harness_random_run(wsp_runtime *rt, long n, uint64_t seed, int ndim, int extent, int scopes,
                        int64_t window, int mode, long spin_ns, long *edges_out);
int harness_bulk(wsp_runtime *rt, long n, int chains, int64_t window, int mode, int kernel,
                 long spin_ns);
void harness_set_grain(long grain);
long harness_tick(void);
long harness_await_loop(wsp_runtime *rt, long n, int ncells, int64_t window, int mode, int flags,
                        int64_t *buf);
void harness_gate_open(int g);
long harness_wait_started(long id);
"""

# hooks.c: holding a worker at a decision point of dispatch.c, and gated kernels
HOOKS_CDEF = """
void hooks_hold(wsp_runtime *rt, int point, int worker);
int hooks_wait_held(void);
void hooks_release(void);
int hooks_settle(wsp_runtime *rt);
int hooks_max_spinners(wsp_runtime *rt);
void hooks_reset(void);
void hooks_open(int g);
wsp_kernel_fn hooks_gated_kernel(void);
long hooks_started(long id);
long hooks_wait_started(long id);
int hooks_wait_either(long a, long b);
"""


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def cdef_text() -> str:
    text = (RUNTIME_DIR / "wsp_runtime.h").read_text()
    start = text.index("/* CDEF-BEGIN */") + len("/* CDEF-BEGIN */")
    return text[start:text.index("/* CDEF-END */")]


def runtime_sources() -> list[str]:
    return [str(p) for p in sorted(RUNTIME_DIR.glob("*.c"))]


@dataclass
class Lib:
    ffi: object
    lib: object


@pytest.fixture(scope="session")
def rtlib(tmp_path_factory) -> Lib:
    """The runtime plus harness.c as a shared object, loaded with cffi (ABI mode)."""
    import cffi

    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("wsp_runtime") / "libwsp_test.so"
    cmd = [cc, *STRICT_FLAGS, "-DWSP_TEST_HOOKS", "-I", str(RUNTIME_DIR), *runtime_sources(),
           str(HERE / "harness.c"), str(HERE / "hooks.c"), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"building the runtime failed:\n{' '.join(cmd)}\n{proc.stderr}"
    ffi = cffi.FFI()
    ffi.cdef(cdef_text() + HARNESS_CDEF + HOOKS_CDEF)
    return Lib(ffi, ffi.dlopen(str(out)))


class Runtime:
    """One wsp_runtime and helpers that submit harness tasks from Python."""

    def __init__(self, L: Lib, workers: int = 2, ntensors: int = 2):
        self.ffi, self.lib = L.ffi, L.lib
        self.rt = self.lib.wsp_runtime_new(workers, ntensors)
        assert self.rt != self.ffi.NULL
        self.task = self.ffi.new("wsp_task *")

    def free(self) -> None:
        if self.rt is not None:
            self.lib.wsp_runtime_free(self.rt)
            self.rt = None

    # -- life cycle -----------------------------------------------------------------------------
    def begin(self, window: int = 0, mode: int = STALL) -> int:
        return self.lib.wsp_begin(self.rt, window, mode)

    def wait(self) -> int:
        return self.lib.wsp_wait(self.rt)

    def push(self) -> int:
        return self.lib.wsp_order_push(self.rt)

    def next(self) -> int:
        return self.lib.wsp_order_next(self.rt)

    def pop(self) -> int:
        return self.lib.wsp_order_pop(self.rt)

    def batch(self, ntasks: int, grain: int = 0, flags: int = 0) -> int:
        return self.lib.wsp_batch(self.rt, ntasks, grain, flags)

    def fail(self, code: int, message: bytes) -> int:
        return self.lib.wsp_fail(self.rt, code, message)

    def error(self) -> tuple[int, str]:
        return (self.lib.wsp_error_code(self.rt),
                self.ffi.string(self.lib.wsp_error_message(self.rt)).decode())

    def stats(self):
        st = self.ffi.new("wsp_stats *")
        self.lib.wsp_get_stats(self.rt, st)
        return st

    # -- tasks ----------------------------------------------------------------------------------
    def submit(self, tid: int, accesses=(), spin_ns: int = 0, fail: int = 0,
               kernel: int = K_RECORD, coords=(), kernel_index: int = 0, stmt: int = 0,
               scalars=None, tile_data=()) -> int:
        """accesses: (tensor, mode, [(lo, hi), ...]) per tile; tile_data: cffi pointers for the
        first tiles' `data` (K_STORE stores into tile 0)."""
        t = self.task
        for k, p in enumerate(tile_data):
            t.tiles[k].data = p
        t.fn = self.lib.harness_kernel(kernel)
        t.kernel = kernel_index
        t.stmt = stmt
        t.ntiles = len(accesses)
        vals = scalars if scalars is not None else (tid, spin_ns, fail)
        t.nscalars = len(vals)
        for k, v in enumerate(vals):
            t.scalars[k].i = v
        t.ncoords = len(coords)
        for k, c in enumerate(coords):
            t.coords[k] = c
        for k, (tensor, mode, box) in enumerate(accesses):
            a = t.access[k]
            a.tensor, a.mode, a.ndim = tensor, mode, len(box)
            for d, (lo, hi) in enumerate(box):
                a.lo[d], a.hi[d] = lo, hi
        return self.lib.wsp_submit(self.rt, t)

    def gated(self, tid: int, accesses, gate: int = 0, fail: int = 0, on_error: bool = False,
              store=None, cell=None, **submit) -> int:
        """A task that runs until the test opens `gate` (`open_gate`), or until the runtime has
        an error if `on_error`; with `store`, it then writes that value into `cell` (an
        int64_t *, tile 0) as K_STORE does. `submit`: more of `submit`'s arguments."""
        rt = int(self.ffi.cast("intptr_t", self.rt)) if on_error else 0
        scalars = (tid, gate, fail, rt, store if store is not None else 0)
        if store is None:
            return self.submit(tid, accesses, kernel=K_GATE, scalars=scalars, **submit)
        return self.submit(tid, accesses, kernel=K_GATE_STORE, scalars=scalars, tile_data=[cell],
                           **submit)

    def open_gate(self, gate: int = -1) -> None:
        """Opens `gate` (every gate by default)."""
        self.lib.harness_gate_open(gate)

    def flush(self, tensor: int, box) -> None:
        """Shows the workers every ready task still staged (they are published in batches): a
        probe finding an unfinished writer of `box` does that (wsp_probe's rule)."""
        a = self.ffi.new("wsp_access *")
        a.tensor, a.mode, a.ndim = tensor, READ, len(box)
        for d, (lo, hi) in enumerate(box):
            a.lo[d], a.hi[d] = lo, hi
        assert self.lib.wsp_probe(self.rt, a) == 1, "no unfinished writer of the box"

    def started(self, tid: int) -> int:
        """Waits until task `tid` has started (a hang guard, never a measure); its start tick.
        A task submitted last may still be staged: `flush` first."""
        tick = self.lib.harness_wait_started(tid)
        assert tick > 0, f"task {tid} never started"
        return tick

    def await_(self, tensor: int, box) -> int:
        """wsp_await on box [(lo, hi), ...] of `tensor`."""
        a = self.ffi.new("wsp_access *")
        a.tensor, a.mode, a.ndim = tensor, READ, len(box)
        for d, (lo, hi) in enumerate(box):
            a.lo[d], a.hi[d] = lo, hi
        return self.lib.wsp_await(self.rt, a)

    def times(self, n: int) -> list[tuple[int, int]]:
        return [(self.lib.harness_start(i), self.lib.harness_finish(i)) for i in range(n)]


@pytest.fixture
def runtime(rtlib):
    """runtime(workers=2, ntensors=2) -> Runtime, freed at the end of the test."""
    made: list[Runtime] = []

    def make(workers: int = 2, ntensors: int = 2) -> Runtime:
        r = Runtime(rtlib, workers, ntensors)
        made.append(r)
        return r

    yield make
    rtlib.lib.harness_gate_open(-1)  # a failed test may leave gated tasks waiting
    for r in made:
        r.free()
