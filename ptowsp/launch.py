"""`wspc run --launcher mpi`: one process per device under the mpich wheel's `mpiexec`
(docs/running.md, "Running on MPI").

The LAUNCHER (the `wspc run` the user typed) checks everything a run checks before anything
starts (the destinations, the module, the names, the input files), builds the module and the
runtime's MPI transport into the cache, and starts `mpiexec -n N python -m ptowsp run ...
--rank-dir DIR`: the same command in RANK MODE (`--rank-dir`, hidden), once per device. It
waits, then reports one of three outcomes:
  - every rank ended well: what rank 0 printed (statistics) is printed; rank 0 wrote the files;
  - a rank failed (a bad input, a view, a kernel): that rank wrote its report, `rank R: ...`,
    into DIR/error-R before calling MPI_Abort, which ends every other rank; the launcher prints
    the first report written (nothing else: not the other ranks' nor mpiexec's words) and exits
    with the rank's status (1, or 70 for a bug);
  - a rank ended without a report (killed): the launcher names it (each rank wrote its pid into
    DIR/pid-R when it started; mpiexec names the pid that died) and exits 1.
Nothing is written in the last two cases: only rank 0 writes, after its run succeeded, every
file at once (`files.Staged`).

Decision: every rank reads the input files itself (they are on this machine's file system, and
the launcher has already read and checked them once), rather than rank 0 reading and
scattering them: each rank then binds its inputs exactly as an in-process run does, with no
MPI code between the files and the run to get wrong; the cost is N reads of each file.
`--random-inputs SEED` makes the same arrays in every rank.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .diagnostics import Diagnostic, WspError
from .spans import Span

# a test's hook: the rank named here stops itself (SIGSTOP) once MPI is up, so that a test can
# kill it mid-run (SIGKILL) at a known point instead of racing it
TEST_STOP = "WSPC_MPI_TEST_STOP"
_WHERE = Span("--launcher mpi", 0, 0, 0, 0)


def _error(message: str, help_text: Optional[str] = None) -> WspError:
    return WspError([Diagnostic(_WHERE, "mpi", message, help_text)])


# ---- the launcher -----------------------------------------------------------------------------


def devices(program: Any) -> int:
    """The devices the program runs on: its mesh's as lowered (1 without a mesh)."""
    d = program.module.devices  # the global view keeps the lowering's record of the mesh
    return 1 if d is None else d.count


def prepare(program: Any) -> Any:
    """Checks that the program can run on MPI and builds the transport; the `MpiInstall`."""
    from .backends.cpu import mpi

    if not getattr(program._backend, "transports", False):
        raise _error(f"--target {program.target} cannot run on MPI (its runs have no transport "
                     "between processes)", "run it with --target cpu_sim")
    install = mpi.require()
    mpi.transport_library(install)
    return install


def rank_argv(argv: Sequence[str], run_dir: str) -> list[str]:
    """The rank's command line: the launcher's without `--launcher`, with `--rank-dir`."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--launcher":
            skip = True
            continue
        if word.startswith("--launcher="):
            continue
        out.append(word)
    return out + ["--rank-dir", run_dir]


@dataclass
class Outcome:
    """How an MPI run ended: `status` (0, 1, 70), what to print on stdout and stderr."""

    status: int
    stdout: str
    stderr: str


def launch(install: Any, n: int, argv: Sequence[str], timeout: Optional[float] = None) -> Outcome:
    """Runs `argv` (wspc's arguments, without the program name) in rank mode on `n` ranks."""
    with tempfile.TemporaryDirectory(prefix="wspc-mpi-") as run_dir:
        cmd = [str(install.mpiexec), "-n", str(n), sys.executable, "-m", "ptowsp",
               *rank_argv(argv, run_dir)]
        out_path, err_path = Path(run_dir) / "stdout", Path(run_dir) / "stderr"
        env = dict(os.environ)
        # the ranks import this wspc, whatever the working directory of mpiexec's processes
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(
            os.pathsep) if p])
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                        env=env, start_new_session=True)
            except OSError as e:
                raise _error(f"cannot start {install.mpiexec}: {e.strerror or e}") from None
            try:
                status = _wait(proc, timeout)
            except BaseException:  # Ctrl-C (or a timeout): the ranks go too
                _stop(proc)
                raise
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
        report = _first_report(Path(run_dir))
        if report is not None:
            code, text = report
            return Outcome(code, "", text)
        if status == 0:
            return Outcome(0, stdout, stderr)
        return Outcome(1, "", _killed(Path(run_dir), status, stdout + stderr) + "\n")


def _wait(proc: subprocess.Popen, timeout: Optional[float]) -> int:
    start = time.monotonic()
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if timeout is not None and time.monotonic() - start > timeout:
                raise


def _stop(proc: subprocess.Popen) -> None:
    """Ends mpiexec and its ranks (they are in its session: one signal to the group)."""
    for sig, grace in ((signal.SIGINT, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _first_report(run_dir: Path) -> Optional[tuple[int, str]]:
    """(status, text) of the first report a rank wrote (the earliest; then the lowest rank)."""
    found = []
    for p in run_dir.glob("error-*"):
        m = re.fullmatch(r"error-(\d+)", p.name)
        if m:
            found.append((p.stat().st_mtime_ns, int(m.group(1)), p))
    if not found:
        return None
    _, _, path = min(found)
    code, _, text = path.read_text(errors="replace").partition("\n")
    return int(code), text


def _killed(run_dir: Path, status: int, said: str) -> str:
    """The launcher's message for a run that ended with no rank's report."""
    pids = {}
    for p in run_dir.glob("pid-*"):
        try:
            pids[int(p.read_text())] = int(p.name.split("-", 1)[1])
        except ValueError:
            continue
    m = re.search(r"PID (\d+) RUNNING", said)
    sig = re.search(r"signal (\d+)", said) or re.search(r"EXIT CODE: (\d+)", said)
    how = f" (signal {sig.group(1)})" if sig else ""
    who = "a rank"
    if m and int(m.group(1)) in pids:
        who = f"rank {pids[int(m.group(1))]} (pid {m.group(1)})"
    return (f"--launcher mpi: error: {who} ended without reporting an error{how}; every rank "
            f"was stopped and no output was written (mpiexec exited with status {status})")


# ---- rank mode ---------------------------------------------------------------------------------


@dataclass
class Rank:
    """This process as one rank: its number, the ranks, the run directory, mpi4py's MPI."""

    rank: int
    size: int
    run_dir: Path
    MPI: Any
    transport: Any = None


RANK: Optional[Rank] = None


def rank_begin(run_dir: str) -> Rank:
    """Rank mode: initialise MPI (mpi4py: MPI_THREAD_MULTIPLE) and say who we are."""
    global RANK
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    RANK = Rank(comm.rank, comm.size, Path(run_dir), MPI)
    (RANK.run_dir / f"pid-{RANK.rank}").write_text(str(os.getpid()))
    if os.environ.get(TEST_STOP) == str(RANK.rank):  # tests/test_mesh_mpi.py kills it here
        os.kill(os.getpid(), signal.SIGSTOP)
    return RANK


def rank_fail(text: str, status: int) -> None:
    """Report this rank's failure (every line prefixed `rank R: `) and end every rank."""
    r = RANK
    assert r is not None
    body = "\n".join(line if line.startswith((" ", "|")) or not line else f"rank {r.rank}: {line}"
                     for line in text.rstrip("\n").split("\n"))
    path = r.run_dir / f"error-{r.rank}"
    tmp = r.run_dir / f".error-{r.rank}"
    tmp.write_text(f"{status}\n{body}\n")
    os.replace(tmp, path)  # the launcher reads it whole or not at all
    sys.stderr.flush()
    sys.stdout.flush()
    r.MPI.COMM_WORLD.Abort(status)
    os._exit(status)  # MPI_Abort may return (MPICH's is a best attempt): never go on after it


def attach(program: Any) -> None:
    """Gives the program's runs this rank's MPI transport (the device is the rank)."""
    from .backends.cpu import mpi

    r = RANK
    assert r is not None
    if r.transport is None:
        r.transport = mpi.Transport(mpi.transport_library(mpi.require()))
    program._backend.transport = r.transport


def rank_end() -> None:
    """Waits for this rank's last sends, then leaves the others (before MPI is finalised)."""
    r = RANK
    if r is not None and r.transport is not None:
        r.transport.close()
        r.transport = None
    if r is not None:
        r.MPI.COMM_WORLD.Barrier()


def gather_traces(text: Optional[str]) -> Optional[list[str]]:
    """Every rank's trace JSON at rank 0 (None elsewhere)."""
    r = RANK
    assert r is not None
    return r.MPI.COMM_WORLD.gather(text, root=0)
