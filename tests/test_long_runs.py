"""A run that is too long ends cleanly (docs/running.md, "Interrupting a run" and "Memory"):
Ctrl-C stops a cpu_sim run promptly (the CLI exits 130, `Program.run` raises KeyboardInterrupt
and the program runs again), and the cycle model's per-task records are counted before the run
(tasks the syms decide) or stopped at the limit during it (tasks the data decides), instead of
growing until the OOM killer ends the process.

Nothing here asserts wall-clock time: a run that ignored the interrupt or the limit would last
for hours, so a generous subprocess timeout is what fails."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu import program as cpu_program
from tests.guard import wait_until

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.cc

# a chain of tiny tasks (every one writes Y[0]): the lead's report, 1e12 tasks
LONG = """\
sym N
output Y: f32[1, 16]
kernel k(y: Out[Tile[1, 16, f32]]) { store(y, full(1, 16, 1.0, f32)) }
axis a = DenseDyn(N)
workload w() { for i in P(a) { k(y = Y[0]) } }
"""

# tasks of about 0.1 ms: N = 2 * 10^7 runs for half an hour (its records: 1.3 GB)
SLOW = """\
sym N
input X: f32[256, 256]
output Y: f32[256, 256]
kernel k(x: In[Tile[256, 256, f32]], y: Out[Tile[256, 256, f32]]) { store(y, exp(exp(load(x)))) }
axis a = DenseDyn(N)
workload w() { for i in P(a) { k(x = X, y = Y) } }
"""

# how many tasks depends on the data (L): only the runtime can stop its records
RAGGED = """\
sym B = 1
input L: i32[B]
output Y: f32[1, 16]
kernel k(y: Out[Tile[1, 16, f32]]) { store(y, full(1, 16, 1.0, f32)) }
axis b = DenseDyn(B)
axis r = Ragged(b, L)
workload w() { for i in P(b) { for j in P(r[i]) { k(y = Y[0]) } } }
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("wspc-cache")


def _env(cache: Path) -> dict:
    # one BLAS thread: the test below counts the process's threads to see the run start
    return {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache),
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def wspc(*args, cache: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=_env(cache), timeout=timeout)


def _default_sigint() -> None:
    # a shell without job control starts background commands with SIGINT ignored; the user's
    # Ctrl-C reaches a foreground process with the default disposition
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cpu_seconds(pid: int) -> float:
    """The CPU time the process has used (user and system), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_ctrl_c_stops_a_cli_run_with_exit_130_and_no_output(tmp_path, cache, target):
    (tmp_path / "slow.wsp").write_text(SLOW)
    warm = wspc("run", "slow.wsp", "--target", target, "--bind", "N=1", "--random-inputs", "0",
                cache=cache, cwd=tmp_path)  # compiles: the long run below starts at once
    assert warm.returncode == 0, warm.stderr
    p = subprocess.Popen([sys.executable, "-m", "ptowsp", "run", "slow.wsp", "--target", target,
                          "--bind", "N=20000000", "--random-inputs", "0", "--workers", "2",
                          "--output", "Y=y.npy"], cwd=tmp_path, env=_env(cache),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_default_sigint)
    try:
        # well inside the run: past Python's start and the (warm) compile, by the child's own
        # CPU time; on cpu_sim the runtime's 2 workers are running besides the main thread
        wait_until(lambda: p.poll() is not None or (
            _cpu_seconds(p.pid) > 2.0 and (target == "ref" or _threads(p.pid) >= 3)),
            "the run under way")
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)  # without the fix: the whole run, half an hour
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "wspc: interrupted"
    assert "Traceback" not in err and "internal error" not in err
    assert not (tmp_path / "y.npy").exists()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


SCRIPT = """
import os, signal, sys, threading, time
import numpy as np
import ptowsp

signal.signal(signal.SIGINT, signal.default_int_handler)
prog = ptowsp.parse(open("slow.wsp").read(), "slow.wsp").compile(target="cpu_sim")
x = np.full((256, 256), 0.5, np.float32)
prog.run(bind={"N": 1}, X=x, workers=2)
before = threading.active_count()
threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    prog.run(bind={"N": 20000000}, X=x, workers=2)
    print("finished")
except KeyboardInterrupt:
    print("interrupted")
time.sleep(0.5)  # the timer's thread ends
print("threads", threading.active_count() - before)
y = prog.run(bind={"N": 3}, X=x, workers=2)["Y"]
print("again", prog.stats.task_count, bool(np.allclose(y, np.exp(np.exp(x)))))
"""


def test_ctrl_c_raises_keyboard_interrupt_from_program_run_and_it_runs_again(tmp_path, cache):
    (tmp_path / "slow.wsp").write_text(SLOW)
    (tmp_path / "script.py").write_text(SCRIPT)
    r = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=_env(cache),
                       capture_output=True, text=True, timeout=300, preexec_fn=_default_sigint)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["interrupted", "threads 0", "again 3 True"], r.stdout


def test_a_run_of_1e12_tasks_is_refused_before_it_starts(tmp_path, cache):
    (tmp_path / "long.wsp").write_text(LONG)
    r = wspc("run", "long.wsp", "--bind", "N=1000000000000", "--output", "Y=y.npy",
             cache=cache, cwd=tmp_path, timeout=120)  # without the check: days, or the OOM killer
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(
        "long.wsp:1:5: error: the run makes 1000000000000 tasks with N = 1000000000000, more "
        "than the cycle model replays in one run (2147483646)\n"), r.stderr
    assert "long.wsp:5:32: note: this call of `k` is enumerated 1000000000000 times" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "y.npy").exists()


def test_task_records_count_into_the_memory_limit(tmp_path, cache):
    (tmp_path / "long.wsp").write_text(LONG)
    r = wspc("run", "long.wsp", "--bind", "N=10000000", "--max-memory", "100M",
             "--output", "Y=y.npy", cache=cache, cwd=tmp_path, timeout=120)
    assert r.returncode == 1, r.stderr
    first = r.stderr.splitlines()[0]
    assert first == ("long.wsp:1:5: error: the run's 10000000 tasks with N = 10000000 need "
                     "610.4 MiB for the cycle model's records (64 bytes a task), with the "
                     "tensors' 64 bytes, more than --max-memory 100M"), r.stderr
    assert "help: bind smaller sizes, or set another limit" in r.stderr
    assert not (tmp_path / "y.npy").exists()
    # just inside the limit it runs
    ok = wspc("run", "long.wsp", "--bind", "N=100000", "--max-memory", "100M",
              "--output", "Y=y.npy", cache=cache, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (np.load(tmp_path / "y.npy") == 1.0).all()


def test_data_dependent_task_records_stop_at_the_limit_during_the_run(tmp_path, cache):
    (tmp_path / "ragged.wsp").write_text(RAGGED)
    np.save(tmp_path / "l.npy", np.array([10_000_000], np.int32))
    r = wspc("run", "ragged.wsp", "--input", "L=l.npy", "--max-memory", "64M",
             "--output", "Y=y.npy", cache=cache, cwd=tmp_path, timeout=120)
    assert r.returncode == 1, r.stderr
    m = re.match(r"ragged\.wsp:7:51: error: the run's tasks need more memory than the limit "
                 r"leaves them: after (\d+) tasks, at `k`, the cycle model's records \(64 bytes "
                 r"a task, 12 a dependency\) would pass 64\.0 MiB, what the memory limit leaves "
                 r"after the tensors\n", r.stderr)
    assert m and 0 < int(m.group(1)) < 10_000_000, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "y.npy").exists()


def test_program_refuses_too_many_tasks_in_run_and_simulate_and_stays_usable(wspc_cache):
    prog = ptowsp.parse(RAGGED, "ragged.wsp").compile(target="cpu_sim")
    with pytest.raises(ptowsp.WspError, match="would pass 32.0 MiB"):
        prog.run(L=np.array([5_000_000], np.int32), max_memory="32M")
    y = prog.run(L=np.array([3], np.int32), max_memory="32M")["Y"]
    assert prog.stats.task_count == 3 and (y == 1.0).all()
    with pytest.raises(ptowsp.WspError, match="would pass"):
        prog.simulate(L=np.array([5_000_000], np.int32), max_memory="32M")
    long = ptowsp.parse(LONG, "long.wsp").compile(target="cpu_sim")
    for call in (long.run, long.simulate):
        with pytest.raises(ptowsp.WspError, match="more than the cycle model replays"):
            call(bind={"N": 10**12})
    assert long.simulate(bind={"N": 1000}).task_count == 1000


def test_the_runtime_header_and_python_agree_on_the_records_and_codes():
    header = (ROOT / "runtime_c" / "wsp_runtime.h").read_text()

    def define(name: str) -> int:
        return int(re.search(rf"#define {name} (\d+)", header).group(1))

    assert define("WSP_SIM_TASK_BYTES") == cpu_program.SIM_TASK_BYTES
    assert define("WSP_SIM_EDGE_BYTES") == cpu_program.SIM_EDGE_BYTES
    assert define("WSP_ERR_RECORDS") == cpu_program.ERR_RECORDS
    assert define("WSP_ERR_CANCELLED") == cpu_program.ERR_CANCELLED
    assert define("WSP_ERR_WINDOW") == cpu_program.ERR_WINDOW
    assert define("WSP_ERR_KERNEL") == cpu_program.ERR_KERNEL
