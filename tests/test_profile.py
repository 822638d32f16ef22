"""Where the time goes: the per-kernel table (`--stats`, `--json` `kernels`, `Trace.summary()`),
the Chrome trace's dependency arrows, and the `--json` fields against their documentation.

The table's numbers are checked against what the test computes itself: task counts from the
loop bounds, bytes from the tile shapes, totals from the trace's own per-task times. No clock
is asserted: only sums, counts and orders.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.profile import ROW_FIELDS, kernel_rows, table_lines

ROOT = Path(__file__).resolve().parents[1]

# two kernels: scale[i] writes tile i of Y, shift[i] reads it (a RAW edge per i in the model),
# and shift also reads W: 16x64 f32 tiles are 4096 bytes
CHAIN = """
module chain
sym N = 12
input  X: f32[N, 16, 64]
input  W: f32[1, 64]
output Y: f32[N, 16, 64]
output Z: f32[N, 16, 64]

kernel scale(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) {
    store(y, x * 2.0)
}

kernel shift(y: In[Tile[16, 64, f32]], w: In[Tile[1, 64, f32]], z: Out[Tile[16, 64, f32]]) {
    store(z, exp(y) + w)
}

workload both() {
    for i in P(N) { scale[i](x = X[i], y = Y[i]) }
    for i in P(N) { shift[i](y = Y[i], w = W, z = Z[i]) }
}

schedule main = both()
"""
TILE = 16 * 64 * 4


# -- the table, from made-up columns ----------------------------------------------------------

def test_rows_sum_sort_and_rate():
    kernel = np.array([0, 1, 1, 0, 1])
    real = np.array([100, 2000, 3000, 300, 999_999])
    ran = np.array([True, True, True, True, False])  # the last never ran: its time is not real
    sim = np.array([10, 20, 20, 10, 20])
    rows = kernel_rows(["a", "b"], kernel, real, ran, sim, [(64, 0), (1000, 500)],
                       [{"V": 7, "MTE2": 3}, None])
    assert [r["kernel"] for r in rows] == ["b", "a"]  # the largest real time first
    b, a = rows
    assert set(b) == set(ROW_FIELDS)
    assert (b["tasks"], b["tasks_run"], b["sim_cycles"]) == (3, 2, 60)
    assert b["real_ms"] == pytest.approx(5000 / 1e6)
    assert b["real_mean_us"] == pytest.approx(2.5)
    assert (b["bytes"], b["flops"]) == (3000, 1500)
    assert b["gb_per_s"] == pytest.approx(3000 / 5000)  # bytes per ns
    assert b["gflop_per_s"] == pytest.approx(1500 / 5000)
    assert a["gflop_per_s"] is None and a["gb_per_s"] == pytest.approx(128 / 400)
    # a pipe's busy cycles per task, times the tasks; none for a kernel without a pipeline
    assert a["pipes"] == {"V": 14, "MTE2": 6} and b["pipes"] is None
    lines = table_lines(rows)
    assert len(lines) == 3 and lines[1].split()[0] == "b" and "-" in lines[2].split()


def test_a_kernel_that_never_ran_has_no_rate():
    rows = kernel_rows(["k"], np.array([0]), np.array([0]), np.array([False]), None, [(8, 8)])
    assert rows[0]["tasks_run"] == 0 and rows[0]["real_mean_us"] == 0.0
    assert rows[0]["gb_per_s"] is None and rows[0]["sim_cycles"] is None
    assert rows[0]["pipes"] is None  # the model did not replay


# -- a real run --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))
        prog = ptowsp.parse(CHAIN, "chain.wsp").compile(target="cpu_sim")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((12, 16, 64)).astype(np.float32)
        w = rng.standard_normal((1, 64)).astype(np.float32)
        out = prog.run(X=x, W=w, trace=True)
    return prog, out, x, w


@pytest.mark.cc
def test_the_run_is_right(chain_run):
    _, out, x, w = chain_run
    ref = ptowsp.parse(CHAIN, "chain.wsp").compile(target="ref").run(X=x, W=w)
    x64 = x.astype(np.float64)
    for got in (out, ref):  # cpu_sim and ref, each against the formula in float64
        np.testing.assert_allclose(got["Y"], x64 * 2, rtol=1e-6)
        np.testing.assert_allclose(got["Z"], np.exp(x64 * 2) + w, rtol=1e-5, atol=1e-6)


@pytest.mark.cc
def test_kernel_table_counts_bytes_and_totals(chain_run):
    prog, _, _, _ = chain_run
    rows = {r["kernel"]: r for r in prog.stats.extra["kernels"]}
    assert sorted(rows) == ["scale", "shift"]
    ev = prog.trace.events
    names = prog.trace.kernel_names
    # scale's `* 2.0` counts one per element; shift's exp and + one each, the broadcast of w
    # nothing (docs/running.md, "Per-kernel table")
    for name, nbytes, flops in (("scale", 2 * TILE, 16 * 64),
                                ("shift", 2 * TILE + 64 * 4, 2 * 16 * 64)):
        r = rows[name]
        mine = ev[ev["kernel"] == names.index(name)]
        assert r["tasks"] == r["tasks_run"] == 12  # N tasks each, all ran
        assert r["bytes"] == 12 * nbytes
        assert r["flops"] == 12 * flops
        total_ns = int((mine["end_ns"] - mine["start_ns"]).sum())
        assert r["real_ms"] == pytest.approx(total_ns / 1e6)
        assert r["real_mean_us"] == pytest.approx(total_ns / 12 / 1e3)
        sim = prog.trace.sim[ev["kernel"] == names.index(name)]
        assert r["sim_cycles"] == int((sim["finish"] - sim["start"]).sum())
    table = prog.stats.extra["kernels"]
    assert [r["real_ms"] for r in table] == sorted((r["real_ms"] for r in table), reverse=True)
    assert "per kernel, by real time:" in prog.trace.summary()


@pytest.mark.cc
def test_dependency_arrows_pair_up_and_follow_time(chain_run):
    prog, _, _, _ = chain_run
    trace = prog.trace.to_chrome_trace()
    events = trace["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    for ph in "sf":  # an id is used by exactly one start and one end
        assert max(Counter(e["id"] for e in events if e["ph"] == ph).values()) == 1
    assert set(starts) == set(ends) and starts
    slices: dict = {}
    for e in events:
        if e["ph"] == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e))
    for i, s in starts.items():
        f = ends[i]
        assert f["bp"] == "e" and (s["name"], s["cat"], s["pid"]) == (f["name"], f["cat"], f["pid"])
        assert s["ts"] <= f["ts"]
        # each end lies within a task's slice on its own track (the slice it binds to)
        src = [x for t0, t1, x in slices[(s["pid"], s["tid"])] if t0 <= s["ts"] <= t1]
        dst = [x for t0, t1, x in slices[(f["pid"], f["tid"])] if t0 <= f["ts"] <= t1]
        assert len(src) == 1 and len(dst) == 1
        assert src[0]["args"]["task"] < dst[0]["args"]["task"]  # enumerated before
    # the model's arrows: exactly one per shift task, from the scale task writing its tile
    model = [(s, ends[i]) for i, s in starts.items() if s["pid"] == 2]
    names = {e["args"]["task"]: e["name"] for e in events if e["ph"] == "X" and e["pid"] == 2}
    pairs = set()
    for s, f in model:
        a = [x for t0, t1, x in slices[(2, s["tid"])] if t0 <= s["ts"] <= t1][0]
        b = [x for t0, t1, x in slices[(2, f["tid"])] if t0 <= f["ts"] <= t1][0]
        pairs.add((a["name"], b["name"]))
    assert pairs == {(f"scale[{i}]", f"shift[{i}]") for i in range(12)}
    assert len(names) == 24
    # the real run's: the edges the runtime added (none to a task already finished), which are
    # exactly its `dependencies` here (no order scope, no await)
    real = [s for s in starts.values() if s["pid"] == 1]
    assert len(real) == len(prog.trace.edges) == prog.stats.extra["dependencies"]


# -- --json, --stats and the documentation -----------------------------------------------------

def documented_fields() -> set[str]:
    """The names in the first column of docs/running.md's `--json` table."""
    text = (ROOT / "docs" / "running.md").read_text()
    section = text[text.index("### `--json` fields"):]
    section = section[:section.index("\n#")]  # (the mesh's own table follows it: see
    # tests/test_interconnect.py)
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def emitted_fields(value, prefix: str = "") -> set[str]:
    """Field paths of a --json object: `a.b`, `a[].b` for a list of objects, `NAME` for the
    keys that are the program's own names (channels and events)."""
    out = set()
    for key, v in value.items():
        path = f"{prefix}{key}"
        out.add(path)
        if key in ("channels", "events") and not prefix:
            for sub in v.values():
                out |= emitted_fields(sub, path + ".NAME.")
        elif key == "pipes" and isinstance(v, dict):
            out.add(path + ".PIPE")  # keyed by the pipes the kernel uses
        elif isinstance(v, dict):
            out |= emitted_fields(v, path + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for sub in v:
                out |= emitted_fields(sub, path + "[].")
    return out


def wspc(*args, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env)


@pytest.mark.cc
def test_every_json_field_is_documented_and_every_documented_field_emitted(tmp_path):
    cache = tmp_path / "cache"
    runs = [("examples/rmsnorm.wsp", "--bind", "B=2", "--bind", "T=2"),
            ("examples/rmsnorm.wsp", "--bind", "B=2", "--bind", "T=2", "--target", "ref"),
            ("tests/programs/events_slots_inline.wsp", "--bind", "N=4"),  # events
            ("examples/megakernel.wsp",),  # channels
            ("tests/programs/rmsnorm_task_graph.wsp", "--bind", "B=2", "--bind", "T=2")]  # knobs
    seen: set[str] = set()
    for args in runs:
        r = wspc("run", *args, "--random-inputs", "0", "--json", cache=cache)
        assert r.returncode == 0, r.stderr
        seen |= emitted_fields(json.loads(r.stdout))
    documented = documented_fields()
    assert seen - documented == set(), "emitted but not documented in docs/running.md"
    assert documented - seen == set(), "documented but never emitted by these runs"


@pytest.mark.cc
def test_stats_prints_the_kernel_table(tmp_path):
    r = wspc("run", "examples/rmsnorm.wsp", "--bind", "B=2", "--bind", "T=3", "--random-inputs",
             "0", "--stats", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("per kernel, by real time:")
    assert lines[at + 1].split()[:3] == ["kernel", "tasks", "real"]
    assert lines[at + 2].split()[:2] == ["rmsnorm_tile", "6"]  # B * T tasks


def test_a_batch_is_waited_for_as_a_whole():
    """The runtime's edge between two batches (each standing for two tasks) becomes one arrow
    from the predecessor batch's task that finished last to the successor's that started first."""
    from ptowsp.backends.cpu.trace import EVENT_DTYPE, Trace

    ev = np.zeros(4, EVENT_DTYPE)
    ev["kernel"] = [0, 0, 1, 1]
    ev["worker"] = [0, 0, 1, 1]
    ev["start_ns"] = [0, 100, 400, 350]
    ev["end_ns"] = [100, 300, 500, 380]
    tr = Trace(ev, ["a", "b"], edges=np.array([[0, 2]]), batches=np.array([[0, 2], [2, 2]]))
    out = tr.to_chrome_trace()["traceEvents"]
    (s,) = [e for e in out if e["ph"] == "s"]
    (f,) = [e for e in out if e["ph"] == "f"]
    assert (s["tid"], s["ts"]) == (1, 0.2)  # task 1's middle, on worker 0
    assert (f["tid"], f["ts"]) == (2, 0.365)  # task 3's middle, on worker 1
    assert s["id"] == f["id"]
