"""The task graph's knobs (`.task_graph(deps =, ready =, start =, pools =, trace =)`,
docs/schedules.md "The task graph"), asserted from traces of real runs on cpu_sim (the host's
worker threads) and from the cycle model's track, with results equal to ref and to NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptowsp
from tests.test_schedules import ROWS  # the one-row-per-task program both files schedule

pytestmark = pytest.mark.cc

ROOT = Path(__file__).resolve().parents[1]

# cube work (a matmul) and vector work, independent of each other
MIXED = """
sym N = 12
input  A: f32[N, 16, 16]
input  X: f32[N, 64]
output C: f32[N, 16, 16]
output Y: f32[N, 64]
kernel mm(a: In[Tile[16, 16, f32]], c: Out[Tile[16, 16, f32]]) { store(c, matmul(a, a)) }
kernel v(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x + 1) }
workload mixed() {
  for i in P(N) {
    mm[i](a = A[i], c = C[i])
    v[i](x = X[i], y = Y[i])
  }
}
"""

# writers of half rows, then one reader of a column block: the block's byte range covers
# every half row but the last row's second one, its box only the first halves
HALVES = """
input  X: f32[4, 64]
output Y: f32[4, 64]
output Z: f32[4, 32]
kernel half(x: In[Tile[1, 32, f32]], y: Out[Tile[1, 32, f32]]) { store(y, x * 2) }
kernel col(y: In[Tile[4, 32, f32]], z: Out[Tile[4, 32, f32]]) { store(z, y + 1) }
workload w() {
  for i, j in P(4, 2) { half[i, j](x = X[i, j * 32 : j * 32 + 32], y = Y[i, j * 32 : j * 32 + 32]) }
  col[0](y = Y[0:4, 0:32], z = Z[0:4, 0:32])
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


_MODULES: dict[str, ptowsp.Module] = {}


def run(text: str, schedule: str, workers: int, target: str = "cpu_sim", trace: bool = True,
        **arrays):
    """(program, outputs) of `schedule s = ...` appended to `text`, traced."""
    src = text + f"\nschedule s = {schedule}\n"
    if src not in _MODULES:
        _MODULES[src] = ptowsp.parse(src, "graph.wsp")
    prog = _MODULES[src].compile(target=target)
    out = prog.run(workers=workers, trace=trace, **arrays) if target == "cpu_sim" else \
        prog.run(**arrays)
    return prog, out


def rows_x():
    return np.random.default_rng(5).standard_normal((24, 64)).astype(np.float32)


def by_start(ev) -> np.ndarray:
    return np.argsort(ev["start_ns"], kind="stable")


@pytest.mark.parametrize("workers", [1, 2])
def test_after_orchestration_starts_no_task_before_the_last_submit(workers):
    prog, out = run(ROWS, "rows().task_graph(start = after_orchestration)", workers, X=rows_x())
    ev = prog.trace.events
    extra = prog.stats.extra
    assert extra["graph_start_ms"] >= extra["graph_enumerated_ms"]
    assert ev["start_ns"].min() / 1e6 >= extra["graph_start_ms"]
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)


def test_threshold_starts_no_task_before_n_submits_and_a_full_window_starts_them():
    prog, _ = run(ROWS, "rows().task_graph(start = threshold(24))", 2, X=rows_x())
    assert prog.trace.events["start_ns"].min() / 1e6 >= prog.stats.extra["graph_start_ms"]
    # a window of 2 stalls the enumeration: workers start then, or the run would never end
    prog, out = run(ROWS, "rows().task_graph(window = 2, start = after_orchestration)", 2,
                    X=rows_x())
    assert prog.stats.extra["graph_start_ms"] < prog.stats.extra["graph_enumerated_ms"]
    assert prog.stats.extra["max_in_flight"] <= 2
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)


def test_priority_runs_ready_tasks_in_key_order_on_the_host_and_in_the_model():
    key = [(7 * i) % 24 for i in range(24)]  # a permutation of 0..23
    prog, out = run(ROWS, "rows().task_graph(ready = priority((7 * i) % 24), "
                    "start = after_orchestration)", 1, X=rows_x())
    ev = prog.trace.events
    started = ev["coords"][by_start(ev), 0]
    assert [key[i] for i in started] == sorted(key)  # one worker: strictly in key order
    sim = prog.trace.sim
    issued = np.argsort(sim["issue"], kind="stable")
    assert [key[i] for i in issued] == sorted(key)  # one dispatcher: the same order
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)
    # fifo, for contrast: the order the tasks became ready (here, enumeration)
    prog, _ = run(ROWS, "rows().task_graph(ready = fifo, start = after_orchestration)", 1,
                  X=rows_x())
    assert prog.trace.events["coords"][by_start(prog.trace.events), 0].tolist() == list(range(24))


def test_by_exec_unit_takes_cube_and_vector_tasks_from_separate_queues():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((12, 16, 16)).astype(np.float32)
    x = rng.standard_normal((12, 64)).astype(np.float32)
    prog, out = run(MIXED, "mixed().task_graph(pools = by_exec_unit)", 2, A=a, X=x)
    ev = prog.trace.events
    names = [prog.trace.kernel_names[k] for k in ev["kernel"]]
    workers = {n: set(ev["worker"][[m == n for m in names]].tolist()) for n in ("mm", "v")}
    assert workers == {"mm": {1}, "v": {0}}  # the cube pool's worker, the vector pool's
    np.testing.assert_allclose(out["C"], a @ a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["Y"], x + 1, rtol=1e-6)


def test_custom_pools_put_each_key_on_its_pools_workers():
    prog, out = run(ROWS, "rows().task_graph(pools = custom(i, n = 2))", 2, X=rows_x())
    ev = prog.trace.events
    np.testing.assert_array_equal(ev["worker"], ev["coords"][:, 0] % 2)
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)


def test_bytes_overlap_gives_at_least_the_exact_edges_and_the_same_results():
    x = np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32)
    want = x[:, :32] * 2 + 1
    edges = {}
    for deps in ("infer_tensor_map_exact", "infer_bytes_overlap"):
        prog, out = run(HALVES, f"w().task_graph(deps = {deps})", 2, X=x)
        np.testing.assert_allclose(out["Z"], want, rtol=1e-6)
        edges[deps] = {tuple(e) for e in prog.trace.edges.tolist()}
        model = {tuple(e) for e in prog.trace.model_edges.tolist()}
        assert edges[deps] <= model  # the model's graph holds the host's edges
    exact, wide = edges["infer_tensor_map_exact"], edges["infer_bytes_overlap"]
    assert exact == {(0, 8), (2, 8), (4, 8), (6, 8)}  # the first halves only
    assert exact < wide and wide == {(k, 8) for k in range(7)}  # every overlapping range
    _, ref = run(HALVES, "w().task_graph(deps = infer_bytes_overlap)", 2, target="ref", X=x)
    np.testing.assert_allclose(ref["Z"], want, rtol=1e-6)


def test_trace_cycles_records_every_run_and_ref_accepts_every_knob():
    sched = ("rows().task_graph(window = 8, deps = infer_bytes_overlap, ready = priority(N - i), "
             "start = threshold(4), pools = custom(i % 3, n = 3), trace = cycles)")
    prog, out = run(ROWS, sched, 2, trace=False, X=rows_x())
    assert prog.trace is not None and len(prog.trace.events) == 24
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)
    _, ref = run(ROWS, sched, 2, target="ref", X=rows_x())
    np.testing.assert_allclose(ref["Y"], out["Y"], rtol=1e-6)


def test_knobs_leave_the_next_default_run_on_the_rings():
    # a runtime reused after a run with knobs: the default run still spreads over workers
    prog, _ = run(ROWS, "rows().task_graph(ready = fifo)", 2, X=rows_x())
    src = ROWS + "\nschedule s = rows().dispatch(round_robin(2))\n"
    p2 = ptowsp.parse(src, "graph.wsp").compile(target="cpu_sim")
    out = p2.run(workers=2, trace=True, X=rows_x())
    np.testing.assert_array_equal(p2.trace.events["worker"], np.arange(24) % 2)
    assert "graph_start_ms" not in p2.stats.extra
    np.testing.assert_allclose(out["Y"], np.exp(rows_x()) * 2, rtol=1e-6)


# a producer and a consumer per row, unordered (`par`), in two steps (`steps`), in sequence
PAIRS = """
sym N = 6
input  X: f32[N, 64]
output Y: f32[N, 64]
output Z: f32[N, 64]
kernel a(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 2) }
kernel b(y: In[Tile[1, 64, f32]], z: Out[Tile[1, 64, f32]]) { store(z, y + 1) }
workload par() {
  for i in P(N) {
    a[i](x = X[i], y = Y[i])
    b[i](y = Y[i], z = Z[i])
  }
}
workload steps() {
  for s in P.seq(2) {
    for i in P(N) {
      when s == 0 { a[i](x = X[i], y = Y[i]) }
      when s == 1 { b[i](y = Y[i], z = Z[i]) }
    }
  }
}
workload seqd() {
  sequential {
    for i in P(N) { a[i](x = X[i], y = Y[i]) }
    for i in P(N) { b[i](y = Y[i], z = Z[i]) }
  }
}
"""


@pytest.mark.parametrize("schedule", [
    "steps().task_graph(deps = explicit)", "seqd().task_graph(deps = explicit)",
    "par().streams(6).stream_by(i).task_graph(deps = explicit)",
    "par().task_graph(deps = hybrid)"])
def test_explicit_runs_when_the_declared_order_covers_every_dependency(schedule):
    x = np.random.default_rng(8).standard_normal((6, 64)).astype(np.float32)
    _, out = run(PAIRS, schedule, 2, X=x)
    np.testing.assert_allclose(out["Z"], x * 2 + 1, rtol=1e-6)
    _, ref = run(PAIRS, schedule, 2, target="ref", X=x)
    np.testing.assert_allclose(ref["Z"], x * 2 + 1, rtol=1e-6)


def test_explicit_reports_a_dependency_the_schedule_does_not_declare():
    x = np.random.default_rng(8).standard_normal((6, 64)).astype(np.float32)
    for workers in (1, 2):  # the same report whatever the timing
        with pytest.raises(ptowsp.WspError) as info:
            run(PAIRS, "par().task_graph(deps = explicit)", workers, X=x)
        (d,) = info.value.diagnostics
        assert d.message == ("`deps = explicit`: `b[i]` at [0] depends on `a[i]` at [0] through "
                             "`Y`, and the schedule does not declare that order")
        assert d.help == ("declare it (both in steps of a `P.seq` loop or `sequential`, or in "
                          "one stream), or let wspc infer it: `deps = hybrid`")
        assert (d.span.line, d.notes[0].span.line) == (11, 10)  # b's call; a's
    # streams dealt round robin put a[i] and b[i] on different streams: no declared order
    with pytest.raises(ptowsp.WspError, match="does not declare that order"):
        run(PAIRS, "par().streams(2).task_graph(deps = explicit)", 2, X=x)


def test_explicit_refuses_csp():
    src = (ROOT / "tests/programs/spec_megakernel.wsp").read_text()
    src = src.replace("schedule main = megakernel(tiles)",
                      "schedule main = megakernel(tiles).task_graph(deps = explicit)")
    with pytest.raises(ptowsp.WspError) as info:
        ptowsp.parse(src, "mk.wsp").compile(target="cpu_sim")
    assert info.value.diagnostics[0].message == (
        "`deps = explicit` cannot check a workload that uses CSP (processes order their tasks "
        "through channels, not declared steps)")


# a kernel that adds cycles per task: 30, plus its scalar argument (docs/schedules.md, "The
# task graph": add_cycles), beside the same kernel without them
CYCLES = """
sym N = 24
input  X: f32[N, 64]
output Y: f32[N, 64]
output Z: f32[N, 64]
kernel k(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, exp(x) * 2) }
kernel slow(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]], n: Scalar[i32]) {
  store(y, exp(x) * 2)
  add_cycles(30 + n)
}
workload both() {
  for i in P(N) {
    k[i](x = X[i], y = Y[i])
    slow[i](x = X[i], y = Z[i], n = 7 * i)
  }
}
"""


def _durations(prog) -> dict:
    """{kernel name: [modelled cycles of its tasks, in enumeration order]}"""
    ev, sim = prog.trace.events, prog.trace.sim
    names = prog.trace.kernel_names
    out: dict = {}
    for t in range(len(ev)):  # events and model results are in enumeration order
        out.setdefault(names[ev["kernel"][t]], []).append(int(sim["finish"][t] - sim["start"][t]))
    return out


@pytest.mark.parametrize("opt", [0, 2])
def test_add_cycles_adds_exactly_n_per_task_to_the_model_and_nothing_to_results(opt):
    src = CYCLES + "\nschedule s = both()\n"
    prog = ptowsp.parse(src, "cycles.wsp").compile(target="cpu_sim", opt_level=opt)
    out = prog.run(workers=2, trace=True, X=rows_x())
    d = _durations(prog)
    assert d["slow"] == [d["k"][i] + 30 + 7 * i for i in range(24)]
    np.testing.assert_allclose(out["Z"], np.exp(rows_x()) * 2, rtol=1e-6)
    np.testing.assert_array_equal(out["Z"], out["Y"])
    # the per-kernel table (`--stats`) sums them
    rows = {r["kernel"]: r for r in prog.stats.extra["kernels"]}
    assert rows["slow"]["sim_cycles"] == rows["k"]["sim_cycles"] + 24 * 30 + 7 * sum(range(24))
    ref = ptowsp.parse(src, "cycles.wsp").compile(target="ref").run(X=rows_x())
    np.testing.assert_allclose(ref["Z"], out["Z"], rtol=1e-6)


def test_trace_cycles_key_sets_each_task_s_cycles_and_add_cycles_adds_to_it():
    src = CYCLES + "\nschedule s = both().task_graph(trace = cycles(100 * i + 5))\n"
    prog = ptowsp.parse(src, "cycles.wsp").compile(target="cpu_sim")
    prog.run(workers=1, trace=False, X=rows_x())  # `trace = cycles`: traced anyway
    d = _durations(prog)
    assert d["k"] == [100 * i + 5 for i in range(24)]
    assert d["slow"] == [100 * i + 5 + 30 + 7 * i for i in range(24)]
    from ptowsp.ir.printer import schedule_lines

    (sched,) = ptowsp.parse(src, "cycles.wsp").ir.schedules
    assert "  graph trace cycles(i * 100 + 5)" in schedule_lines(sched)
