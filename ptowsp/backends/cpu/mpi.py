"""cpu_sim on MPI: where the MPI of the `mpi` extra is, the runtime's MPI transport built against
it, and attaching that transport to a run (docs/running.md, "Running on MPI").

The `mpi` extra installs two wheels: `mpich` (libmpi, `mpiexec` (hydra) and the headers, into
the environment's `bin/`, `lib/` and `include/`) and `mpi4py` (which initialises MPI in each
rank, with MPI_THREAD_MULTIPLE). Their files are found through the installed `mpich`
distribution's own file list, never by searching PATH: the `mpiexec` that runs the ranks is the
one whose libmpi they load.

The transport (runtime_c/mpi/wsp_mpi.c) is compiled once per MPI and compiler into the build
cache (`runtime/<key>/libwsp_mpi.so`, like the runtime object) and loaded with cffi in each rank;
the modules themselves are the ordinary cpu_sim builds (the runtime takes the transport as a
table of calls, so it never links MPI).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...diagnostics import Diagnostic, WspError
from ...spans import Span
from . import build as B
from .program import TRANSPORT_CDEF

TRANSPORT_SOURCE = B.RUNTIME_DIR / "mpi" / "wsp_mpi.c"
TRANSPORT = "libwsp_mpi.so"
MISSING_HELP = "install the optional `mpi` extra: pip install 'ptowsp[mpi]' (the mpi4py and mpich wheels)"


@dataclass(frozen=True)
class MpiInstall:
    """The MPI of the `mpich` wheel: its `mpiexec`, the directory of `mpi.h`, that of libmpi."""

    mpiexec: Path
    include: Path
    lib: Path
    version: str


def find() -> Optional[MpiInstall]:
    """The installed `mpich` wheel's MPI, when it and `mpi4py` are both installed."""
    if importlib.util.find_spec("mpi4py") is None:
        return None
    try:
        dist = importlib.metadata.distribution("mpich")
    except importlib.metadata.PackageNotFoundError:
        return None
    found: dict[str, Path] = {}
    for f in dist.files or ():
        if f.name in ("mpiexec", "mpi.h", "libmpi.so") and f.name not in found:
            path = Path(dist.locate_file(f)).resolve()
            if path.exists():
                found[f.name] = path
    if len(found) < 3:
        return None
    return MpiInstall(found["mpiexec"], found["mpi.h"].parent, found["libmpi.so"].parent,
                      dist.version)


def require() -> MpiInstall:
    """`find()`, or the user's error saying how to install it."""
    mpi = find()
    if mpi is None:
        raise WspError([Diagnostic(Span("--launcher mpi", 0, 0, 0, 0), "mpi",
                                   "--launcher mpi needs MPI, and the mpi4py and mpich wheels are "
                                   "not installed", MISSING_HELP)])
    return mpi


def transport_library(mpi: MpiInstall, root: Optional[Path] = None) -> Path:
    """libwsp_mpi.so for `mpi`, built once into the cache (keyed on its source, the runtime's
    header, MPI's header and the compiler)."""
    root = root or B.cache_root()
    header = (mpi.include / "mpi.h").read_bytes()
    key = B.digest(B.FORMAT, "mpi-transport", TRANSPORT_SOURCE.read_text(),
                   (B.RUNTIME_DIR / "wsp_runtime.h").read_text(), str(mpi.include), str(mpi.lib),
                   hashlib.sha256(header).hexdigest(), " ".join(B.compiler()),
                   B._compiler_identity())
    entry = root / "runtime" / key

    def fill(tmp: Path) -> None:
        B._run(B.compiler() + ["-std=c11", "-O2", "-fPIC", "-pthread", "-shared", "-Wall",
                               "-I", str(B.RUNTIME_DIR), "-I", str(mpi.include),
                               str(TRANSPORT_SOURCE), "-L", str(mpi.lib), "-lmpi",
                               f"-Wl,-rpath,{mpi.lib}", "-o", str(tmp / TRANSPORT)],
               "the MPI transport (runtime_c/mpi/wsp_mpi.c)")

    with B._environment_errors(root):
        if not B._ready(entry, TRANSPORT):
            B._build_entry(entry, TRANSPORT, fill)
    return entry / TRANSPORT


_CDEF = """
typedef struct wsp_runtime wsp_runtime;
""" + TRANSPORT_CDEF + """typedef struct wsp_mpi wsp_mpi;
typedef void (*wsp_arrived_fn)(wsp_runtime *rt, void *token, void *buf, int ok);
wsp_mpi *wsp_mpi_new(wsp_runtime *rt, wsp_arrived_fn arrived, char *why, int whylen);
void wsp_mpi_transport(wsp_mpi *m, wsp_transport *out);
int64_t wsp_mpi_outstanding(wsp_mpi *m);
int64_t wsp_mpi_worker_steps(wsp_mpi *m);
void wsp_mpi_free(wsp_mpi *m);
"""

class Transport:
    """This process as one device of an MPI run: `attach(ffi, lib, rt, elem_bytes)` gives the
    runtime `rt` (of a module's library `lib`: program.py's cdef declares the transport's
    calls) the MPI transport; `close()`
    waits for the last sends and stops the progress thread (before MPI is finalised)."""

    def __init__(self, library: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF)
        self.lib = self.ffi.dlopen(str(library))
        self._m: Any = None
        self._rt: Any = None

    def attach(self, ffi, lib, rt, elem_bytes: list[int]) -> None:
        if self._m is None or self._rt != int(ffi.cast("uintptr_t", rt)):
            self.close()
            why = self.ffi.new("char[]", 256)
            arrived = self.ffi.cast("wsp_arrived_fn",
                                    int(ffi.cast("uintptr_t", ffi.addressof(lib, "wsp_arrived"))))
            m = self.lib.wsp_mpi_new(self.ffi.cast("wsp_runtime *", int(ffi.cast("uintptr_t", rt))),
                                     arrived, why, 256)
            if m == self.ffi.NULL:
                from ..target import RunFailure

                raise RunFailure("cannot start the MPI transport: "
                                 + self.ffi.string(why).decode("utf-8", "replace"))
            self._m, self._rt = m, int(ffi.cast("uintptr_t", rt))
        x = self.ffi.new("wsp_transport *")
        self.lib.wsp_mpi_transport(self._m, x)
        mine = ffi.cast("wsp_transport *", int(self.ffi.cast("uintptr_t", x)))
        elem = ffi.new("int32_t[]", list(elem_bytes) or [0])
        rc = lib.wsp_transport_set(rt, mine, len(elem_bytes), elem)
        if rc != 0:
            from .program import ExecutionError

            raise ExecutionError(rc, ffi.string(lib.wsp_error_message(rt)).decode())
        self._keep = x  # the table is copied by the runtime; the struct may go after the call

    def share(self, arrays) -> None:
        """Each per-device array (`dtype[devices, ...]`, this process's slice computed) with
        every device's slice, from the process of that device (MPI_Allgather in place)."""
        from mpi4py import MPI

        for a in arrays:
            MPI.COMM_WORLD.Allgather(MPI.IN_PLACE, a)

    @property
    def worker_steps(self) -> int:
        """Steps of MPI progress that idle workers made and that moved something (the rest
        were the progress thread's: runtime_c/mpi/wsp_mpi.c)."""
        return int(self.lib.wsp_mpi_worker_steps(self._m))

    @property
    def device(self) -> int:
        x = self.ffi.new("wsp_transport *")
        self.lib.wsp_mpi_transport(self._m, x)
        return int(x.device)

    def close(self) -> None:
        if self._m is not None:
            self.lib.wsp_mpi_free(self._m)
            self._m = None
            self._rt = None
