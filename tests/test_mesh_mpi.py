"""`wspc run --launcher mpi` and the runtime's MPI transport (docs/running.md, "Running on MPI").

Every test that starts MPI processes needs the `mpi` extra (the mpi4py and mpich wheels, which
`make test` installs) and skips without it; each runs under a subprocess timeout, so a hang is a
failure, never a stuck suite.

- The transport on its own (tests/mpi/transport_case.py under `mpiexec -n P`): hand-built tasks
  of an allreduce over P devices, as the device lowering makes them (a leading device dimension,
  one tile task per device and tile reading the P addends in order), on 2 and 4 ranks: each
  rank's result is bit-identical to the fixed-order sum in NumPy; a kernel failing on one rank
  drains that rank (its receives are released) and ends every rank.
- The launcher: every collective of every op (tests/test_mesh_run.py's module) on meshes of 2
  and 4 devices (1x2, 1x4, 2x2), and again on f32, f16 and bf16 tensors of several tiles
  (sent from the tensor's memory, or packed), the tensor-parallel MLP of docs/distributed.md
  (tests/mesh_mpi/tp_mlp.wsp) on 2 and 4, and a CSP pipeline and events (tests/test_mesh_csp.py's
  programs) on 2 and 4, write on MPI what the in-process `--mesh` run writes,
  bit for bit, with one Chrome trace holding a process per device; a module without a mesh runs
  on one rank; a rank's error is reported once, `rank R: file:line:col: error: ...`, exit 1, no
  output written; a rank killed mid-run (SIGKILL) ends the run with exit 1 and a message naming
  it, no output written.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ptowsp.backends.cpu import mpi
from ptowsp.cli import main

from .guard import wait_until

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RMSNORM = ROOT / "examples" / "rmsnorm.wsp"
TIMEOUT = 300  # seconds: a hang guard for every MPI process tree

INSTALL = mpi.find()
needs_mpi = pytest.mark.skipif(INSTALL is None, reason="the `mpi` extra (mpi4py and the mpich "
                               "wheel) is not installed: pip install 'ptowsp[mpi]'")


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    env.setdefault("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    return env


def _wspc(args, tmp_path: Path, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptowsp", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=tmp_path, env=env or _env(tmp_path), **kw)


# ---- the transport on its own ------------------------------------------------------------------


@pytest.fixture(scope="module")
def case_libs(tmp_path_factory):
    """(the runtime with the case's kernels, the MPI transport), built once."""
    if INSTALL is None:
        pytest.skip("no MPI")
    out = tmp_path_factory.mktemp("mpi_case")
    so = out / "libcase.so"
    runtime = sorted(str(p) for p in (ROOT / "runtime_c").glob("*.c"))
    cmd = ["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-fPIC", "-shared",
           "-I", str(ROOT / "runtime_c"), *runtime, str(HERE / "mpi" / "kernels.c"), "-o", str(so)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    transport = mpi.transport_library(INSTALL, out / "cache")
    return so, transport


def _case(libs, tmp_path: Path, ranks: int, rows: int, cols: int, tile: int, workers: int,
          runs: int, fail_rank: int = -1) -> subprocess.CompletedProcess:
    so, transport = libs
    return subprocess.run([str(INSTALL.mpiexec), "-n", str(ranks), sys.executable,
                           str(HERE / "mpi" / "transport_case.py"), str(so), str(transport),
                           str(tmp_path), str(rows), str(cols), str(tile), str(workers), str(runs),
                           str(fail_rank)],
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env(tmp_path))


def _fixed_order_sum(ranks: int, rows: int, cols: int, run: int) -> np.ndarray:
    """What every device's tile tasks compute: the addends (2 * the run's inputs) summed in
    device order, in f32 (transport_case.py makes the same inputs)."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal((ranks, rows, cols)).astype(np.float32)
    a = base * np.float32(run + 1) * np.float32(2)
    acc = a[0].copy()
    for q in range(1, ranks):
        acc = acc + a[q]
    return acc


@needs_mpi
@pytest.mark.parametrize("ranks, workers", [(2, 2), (2, 1), (4, 1)])
def test_the_transport_allreduces_bit_identically_to_the_fixed_order(case_libs, tmp_path, ranks,
                                                                    workers):
    rows, cols, tile, runs = 100, 130, 32, 2  # partial tiles at both edges
    proc = _case(case_libs, tmp_path, ranks, rows, cols, tile, workers, runs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tiles = -(-rows // tile) * -(-cols // tile)
    for r in range(ranks):
        got = np.load(tmp_path / f"rank-{r}.npz")
        for run in range(runs):
            want = _fixed_order_sum(ranks, rows, cols, run)
            assert np.array_equal(got[f"y{run}"].view(np.uint32), want.view(np.uint32))
        # per device: its scale and sum tasks, and a send of each tile to every other device;
        # every process numbers the same remote reads
        assert got["tasks"].tolist() == [tiles * (2 + ranks - 1)] * runs
        assert got["reads"].tolist() == [tiles * ranks * (ranks - 1)] * runs
    # idle workers made MPI progress themselves (a tile's copy and its sum on one thread, no
    # hand-off: docs/running.md, "How data moves"); a worker spins only with a core to spare
    if (os.cpu_count() or 1) > 1:
        steps = [int(np.load(tmp_path / f"rank-{r}.npz")["worker_steps"]) for r in range(ranks)]
        assert sum(steps) > 0, steps


@needs_mpi
def test_a_kernel_failing_on_one_rank_drains_it_and_ends_every_rank(case_libs, tmp_path):
    proc = _case(case_libs, tmp_path, 2, 256, 256, 64, 1, 1, fail_rank=1)
    assert proc.returncode != 0
    # rank 1 reported its kernel's failure after its run drained (its held tasks released)
    assert "k_fail was asked to fail" in (tmp_path / "error-1.txt").read_text()
    assert not (tmp_path / "rank-0.npz").exists() and not (tmp_path / "rank-1.npz").exists()


# ---- the launcher ---------------------------------------------------------------------------------


RUN = ["run", str(RMSNORM), "--bind", "B=2", "--bind", "T=8", "--random-inputs", "3"]
MLP = HERE / "mesh_mpi" / "tp_mlp.wsp"


def _same_outputs(tmp_path: Path, args: list[str], ranks: int) -> dict:
    """Runs `args` in process and on MPI; asserts every output is the same bit for bit and the
    trace has a process per device; returns the MPI run's trace."""
    here = _wspc(args + ["--outputs", "here.npz"], tmp_path)
    assert here.returncode == 0, here.stderr
    there = _wspc(args + ["--outputs", "there.npz", "--trace", "t.json", "--launcher", "mpi"],
                  tmp_path)
    assert there.returncode == 0, there.stderr
    a, b = np.load(tmp_path / "here.npz"), np.load(tmp_path / "there.npz")
    assert sorted(a) == sorted(b) and len(a) > 0
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert np.array_equal(a[name].view(np.uint8), b[name].view(np.uint8)), name
    trace = json.loads((tmp_path / "t.json").read_text())
    tasks = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
    # the real run of device d is process d; the cycle model's replays follow
    assert {e["pid"] for e in tasks} == set(range(2 * ranks))
    assert [d["device"] for d in trace["otherData"]["devices"]] == list(range(ranks))
    return trace


@needs_mpi
@pytest.mark.parametrize("dp, tp", [(1, 2), (1, 4), (2, 2)])
def test_every_collective_on_mpi_is_the_in_process_run_bit_for_bit(tmp_path, dp, tp):
    from .test_mesh_run import _collectives

    (tmp_path / "coll.wsp").write_text(_collectives(("f32", "bf16", "i8"), dp, tp, 8, 70))
    _same_outputs(tmp_path, ["run", "coll.wsp", "--random-inputs", "5", "--check-replicas"],
                  dp * tp)


@needs_mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_tiles_of_whole_rows_on_mpi_are_the_in_process_run_bit_for_bit(tmp_path, tp):
    # several tiles per tensor, each one message, sent from the tensor's memory when the tile
    # is one block (the allreduces, reduce_scatter over rows) and packed when it is not (the
    # all_to_all's column slices); in process they are the NumPy formula
    # (test_mesh_run.py's test_tiles_of_whole_rows_are_the_fixed_order_reduction)
    from .test_mesh_run import BIG_TILES, _collectives

    (tmp_path / "coll.wsp").write_text(_collectives(*BIG_TILES[:1], 1, tp, *BIG_TILES[1:]))
    _same_outputs(tmp_path, ["run", "coll.wsp", "--random-inputs", "6"], tp)


@needs_mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_the_tensor_parallel_mlp_on_mpi_is_the_in_process_run_bit_for_bit(tmp_path, tp):
    trace = _same_outputs(tmp_path, ["run", str(MLP), "--mesh", f"tp={tp}", "--bind", "T=48",
                                     "--random-inputs", "1"], tp)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert names[0] == "device 0: real run" and names[tp] == "device 0: cycle model"


@needs_mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_a_csp_pipeline_and_events_on_mpi_are_the_in_process_run_bit_for_bit(tmp_path, tp):
    # each rank runs its device's instance of the pipe (tests/test_mesh_csp.py's programs);
    # the other devices' instances enumerate there too, their tasks dropped, so every rank
    # numbers the allreduce's remote reads alike
    from .test_mesh_csp import EVENTS, PIPELINE

    (tmp_path / "csp_mlp.wsp").write_text(PIPELINE)
    for schedule in ("main", "streamed"):
        _same_outputs(tmp_path, ["run", "csp_mlp.wsp", "--mesh", f"tp={tp}", "--schedule",
                                 schedule, "--random-inputs", "4", "--check-replicas"], tp)
    if tp == 2:
        (tmp_path / "ev_mesh.wsp").write_text(EVENTS)
        _same_outputs(tmp_path, ["run", "ev_mesh.wsp", "--random-inputs", "4"], 2)


@needs_mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_a_partial_inout_on_mpi_is_summed_as_in_process_bit_for_bit(tmp_path, tp):
    # the ranks' addends gathered to rank 0, which sums them in device order (the in-process
    # sum, itself checked against NumPy in test_mesh_run.py)
    from .test_mesh_run import PARTIAL_INOUT

    (tmp_path / "pinout.wsp").write_text(PARTIAL_INOUT.format(dt="bf16"))
    _same_outputs(tmp_path, ["run", "pinout.wsp", "--mesh", f"tp={tp}", "--random-inputs", "4"],
                  tp)


@needs_mpi
def test_a_gather_view_of_a_sharded_dimension_on_mpi_is_the_in_process_run(tmp_path):
    from .test_mesh_run import SHARD_GATHER

    (tmp_path / "g.wsp").write_text(SHARD_GATHER)
    w = np.random.default_rng(3).standard_normal((16, 8)).astype(np.float32)
    i = np.array([2, 0, 3, 1, 12, 15, 13, 13], np.int32)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "i.npy", i)
    _same_outputs(tmp_path, ["run", "g.wsp", "--input", "W=w.npy", "--input", "I=i.npy"], 2)
    assert np.array_equal(np.load(tmp_path / "there.npz")["Y"], w[i[:4]] + w[i[4:]])


@needs_mpi
def test_the_merged_trace_draws_a_tile_flow_from_the_producing_rank_to_the_reading_one(tmp_path):
    # the in-process trace's tile flows (test_mesh_run.py), each now between the processes of
    # two ranks: from the task of device a that wrote the tile to device b's tile task
    from .test_mesh_run import TILE_FLOWS, tile_flows

    (tmp_path / "flows.wsp").write_text(TILE_FLOWS)
    trace = _same_outputs(tmp_path, ["run", "flows.wsp", "--random-inputs", "6"], 2)
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    (ar,) = {n.split("[")[0] for n in names if n.startswith("mesh_allreduce")}
    assert tile_flows(trace) == {("tile from device 1", "cp[1]", 1, f"{ar}[0]", 0),
                                 ("tile from device 0", "cp[0]", 0, f"{ar}[1]", 1)}
    assert all("tile_ends" not in d for d in trace["otherData"]["devices"])


@needs_mpi
def test_a_routing_read_while_enumerating_is_each_ranks_own_copy(tmp_path):
    # examples/moe.wsp on tp = 2, everything replicated: each device routes and runs every
    # expert; the enumeration reads the router's output (`e = Experts[t, k]`) from its own
    # device's copy, the only one a rank computes (read from device 0's, rank 1's replicas
    # were wrong and --check-replicas said so)
    text = (ROOT / "examples" / "moe.wsp").read_text().replace("module moe\n",
                                                               "module moe\nmesh tp = 2\n")
    (tmp_path / "moe_mesh.wsp").write_text(text)
    _same_outputs(tmp_path, ["run", "moe_mesh.wsp", "--bind", "T=40", "--random-inputs", "2",
                             "--check-replicas"], 2)


@needs_mpi
def test_a_module_without_a_mesh_runs_on_one_rank(tmp_path):
    here = _wspc(RUN + ["--outputs", "here.npz"], tmp_path)
    assert here.returncode == 0, here.stderr
    there = _wspc(RUN + ["--outputs", "there.npz", "--trace", "t.json", "--launcher", "mpi",
                         "--stats"], tmp_path)
    assert there.returncode == 0, there.stderr
    assert "task_count" in there.stdout  # rank 0's statistics
    a, b = np.load(tmp_path / "here.npz"), np.load(tmp_path / "there.npz")
    assert sorted(a) == sorted(b) == ["Y"]
    assert np.array_equal(a["Y"].view(np.uint32), b["Y"].view(np.uint32))
    trace = json.loads((tmp_path / "t.json").read_text())
    tasks = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
    # one process per device (pid = device) for the real run; the cycle model's after them
    assert {e["pid"] for e in tasks} == {0, 1}
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert names == {0: "device 0: real run", 1: "device 0: cycle model"}
    assert trace["otherData"]["devices"][0]["device"] == 0
    assert trace["otherData"]["tasks"] == 2 * 8


@needs_mpi
def test_a_view_failing_on_a_mesh_is_reported_once_by_one_rank(tmp_path):
    # T = 40 is not a multiple of the row block: the view check fails in every rank
    proc = _wspc(["run", str(MLP), "--mesh", "tp=2", "--bind", "T=40", "--random-inputs", "1",
                  "--outputs", "o.npz", "--launcher", "mpi"], tmp_path)
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert re.fullmatch(rf"rank [01]: {re.escape(str(MLP))}:29:18: error: slice end `t \* TB \+ "
                        r"TB` in `x = X\[t \* TB : t \* TB \+ TB, :\]` must be at most T, found 48 "
                        r"and 40 \(task `up\[t, f\]` at t=2, f=0\); the task was not launched", first)
    assert proc.stderr.count("error:") == 1 and proc.stdout == ""
    assert not (tmp_path / "o.npz").exists()


@needs_mpi
def test_a_failing_rank_reports_once_with_its_rank_and_nothing_is_written(tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.float32))
    proc = _wspc(RUN + ["--input", "X=bad.npy", "--outputs", "o.npz", "--trace", "t.json",
                        "--launcher", "mpi"], tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"rank 0: {RMSNORM}:6:1: error: `X` is declared f32[B, T, 16, 128]")
    assert "but its array (bad.npy) has shape [3, 3]" in lines[0]
    assert lines[1].strip().startswith("6 | input X:")  # the source line and its caret
    assert proc.stderr.count("error:") == 1 and proc.stdout == ""
    assert "Traceback" not in proc.stderr and "BAD TERMINATION" not in proc.stderr
    assert not (tmp_path / "o.npz").exists() and not (tmp_path / "t.json").exists()


@needs_mpi
def test_a_rank_killed_mid_run_ends_the_run_with_exit_1_and_a_message(tmp_path):
    env = _env(tmp_path)
    env["WSPC_MPI_TEST_STOP"] = "1"  # rank 1 stops itself once MPI is up (launch.TEST_STOP)
    proc = subprocess.Popen([sys.executable, "-m", "ptowsp", "run", str(MLP), "--mesh", "tp=2",
                             "--bind", "T=48", "--random-inputs", "1", "--outputs", "o.npz",
                             "--launcher", "mpi"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stopped: list[int] = []

        def rank_stopped() -> bool:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                if b"--rank-dir" in cmd and cwd == str(tmp_path) and state == "T":
                    stopped.append(int(pid))
                    return True
            return False

        wait_until(rank_stopped, "rank 1 stopped itself")
        os.kill(stopped[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.startswith(f"--launcher mpi: error: rank 1 (pid {stopped[0]}) ended without "
                          "reporting an error (signal 9); every rank was stopped and no output "
                          "was written"), err
    assert out == "" and "BAD TERMINATION" not in err
    assert not (tmp_path / "o.npz").exists()


def test_the_launcher_without_mpi_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(mpi, "find", lambda: None)
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, RUN + ["--launcher", "mpi"])
    assert result.exit_code == 1
    assert ("--launcher mpi: error: --launcher mpi needs MPI, and the mpi4py and mpich wheels are "
            "not installed") in result.output
    assert "pip install 'ptowsp[mpi]'" in result.output


def test_a_target_without_a_transport_cannot_run_on_mpi(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, RUN + ["--target", "ref", "--launcher", "mpi"])
    assert result.exit_code == 1
    assert "--target ref cannot run on MPI (its runs have no transport between processes)" \
        in result.output


def test_an_mpiexec_that_cannot_start_is_named(tmp_path, monkeypatch):
    from ptowsp import launch

    gone = mpi.MpiInstall(tmp_path / "no-mpiexec", tmp_path, tmp_path, "0")
    monkeypatch.setattr(launch, "prepare", lambda program: gone)
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, RUN + ["--launcher", "mpi", "--outputs",
                                             str(tmp_path / "o.npz")])
    assert result.exit_code == 1
    assert f"--launcher mpi: error: cannot start {tmp_path / 'no-mpiexec'}: No such file" \
        in result.output
    assert not (tmp_path / "o.npz").exists()
