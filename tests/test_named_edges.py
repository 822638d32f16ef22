"""Edges named one by one (`let t = k[i](...)`, `k[i](...) after t`; docs/schedules.md, "Named
edges"): the edge orders tasks that share no data, on the host and in the cycle model, under
every `deps`; `deps = explicit` takes a dependency a chain of named edges implies as declared
and still reports one it does not; results are ref's and NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.ir.printer import print_module

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


# a[i] and b[i] share no tensor: only the edge orders them
HEAD = """
sym N = 8
input  X: f32[N, 64]
output Y: f32[N, 64]
output Z: f32[N, 64]
output W: f32[1, 64]
kernel a(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 2) }
kernel b(x: In[Tile[1, 64, f32]], z: Out[Tile[1, 64, f32]]) { store(z, x + 1) }
"""

SAME = HEAD + """
workload w() {
  for i in P(N) {
    let t = a[i](x = X[i], y = Y[i])
    b[i](x = X[i], z = Z[i]) after t
  }
  b[0](x = X[0], z = W[0]) after t
}
"""

PREVIOUS = HEAD + """
workload w() {
  for i in P(N) {
    b[i](x = X[i], z = Z[i]) after t[i - 1]
    let t = a[i](x = X[i], y = Y[i])
  }
  b[0](x = X[0], z = W[0])
}
"""

NONE = SAME.replace(" after t\n", "\n")


def run(text: str, schedule: str, target: str = "cpu_sim", workers: int = 2):
    src = text + f"\nschedule s = {schedule}\n"
    prog = ptowsp.parse(src, "edges.wsp").compile(target=target)
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    out = prog.run(workers=workers, trace=True, X=x) if target == "cpu_sim" else prog.run(X=x)
    np.testing.assert_allclose(out["Y"], x * 2, rtol=1e-6)
    np.testing.assert_allclose(out["Z"], x + 1, rtol=1e-6)
    np.testing.assert_allclose(out["W"], x[:1] + 1, rtol=1e-6)
    return prog


def tasks(prog) -> dict:
    """{(kernel, first coordinate, statement): (real start, real end, model start, model end)}"""
    ev, sim = prog.trace.events, prog.trace.sim
    names = prog.trace.kernel_names
    return {(names[ev["kernel"][k]], int(ev["coords"][k][0]), int(ev["stmt"][k])):
            (int(ev["start_ns"][k]), int(ev["end_ns"][k]), int(sim["start"][k]),
             int(sim["finish"][k])) for k in range(len(ev))}


def after(got: dict, first, then) -> bool:
    """Task `then` starts after `first` ends, on the host and in the model."""
    return got[then][0] >= got[first][1] and got[then][2] >= got[first][3]


@pytest.mark.parametrize("deps", ["infer_tensor_map_exact", "infer_bytes_overlap", "explicit",
                                  "hybrid"])
def test_an_edge_orders_tasks_that_share_no_data(deps):
    prog = run(SAME, f"w().dispatch(round_robin(4)).task_graph(deps = {deps})")
    got = tasks(prog)
    (sb,) = {k[2] for k in got if k[0] == "b" and k[2] != max(x[2] for x in got)}
    last = max(k[2] for k in got)
    (sa,) = {k[2] for k in got if k[0] == "a"}
    for i in range(8):
        assert after(got, ("a", i, sa), ("b", i, sb))  # `after t` in the loop: the same i
        assert after(got, ("a", i, sa), ("b", 0, last))  # after the loop: every a
    run(SAME, f"w().task_graph(deps = {deps})", target="ref")


def test_without_the_edge_the_model_overlaps_them():
    got = tasks(run(NONE, "w().dispatch(round_robin(4))"))
    sa = next(k[2] for k in got if k[0] == "a")
    sb = next(k[2] for k in got if k[0] == "b" and k[2] != sa)
    assert any(got[("b", i, sb)][2] < got[("a", i, sa)][3] for i in range(8))


def test_an_edge_to_the_previous_iteration():
    got = tasks(run(PREVIOUS, "w().dispatch(round_robin(4))"))
    sb = min(k[2] for k in got if k[0] == "b")
    sa = next(k[2] for k in got if k[0] == "a")
    for i in range(1, 8):
        assert after(got, ("a", i - 1, sa), ("b", i, sb))
    text = print_module(ptowsp.parse(PREVIOUS + "\nschedule s = w()\n", "p.wsp").ir)
    assert "+w edge@s@t[i]" in text  # the handle's tasks write their coordinates
    assert "+r edge@s@t[max(0, i - 1):" in text  # at i = 0 an empty box: no task


# a[i] writes Y and V; b[i] only Y, after a; c[i] reads V, after b: c depends on a (through V),
# which the chain of named edges a -> b -> c declares
CHAIN = """
sym N = 6
input  X: f32[N, 64]
inout  Y: f32[N, 64]
output V: f32[N, 64]
output Z: f32[N, 64]
kernel two(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]], v: Out[Tile[1, 64, f32]]) {
  store(y, x * 2)
  store(v, x * 3)
}
kernel inc(y: InOut[Tile[1, 64, f32]]) { store(y, y + 1) }
kernel c(v: In[Tile[1, 64, f32]], z: Out[Tile[1, 64, f32]]) { store(z, v - 1) }
workload w() {
  for i in P(N) {
    let a = two[i](x = X[i], y = Y[i], v = V[i])
    let b = inc[i](y = Y[i]) after a
    c[i](v = V[i], z = Z[i]) after b
  }
}
"""


def test_explicit_follows_a_chain_of_named_edges():
    x = np.random.default_rng(4).standard_normal((6, 64)).astype(np.float32)
    y = np.zeros_like(x)
    for target in ("cpu_sim", "ref"):
        prog = ptowsp.parse(CHAIN + "\nschedule s = w().task_graph(deps = explicit)\n",
                            "chain.wsp").compile(target=target)
        out = prog.run(X=x, Y=y.copy())
        np.testing.assert_allclose(out["Y"], x * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(out["Z"], x * 3 - 1, rtol=1e-6)


def test_explicit_still_reports_a_dependency_no_edge_implies():
    x = np.random.default_rng(4).standard_normal((6, 64)).astype(np.float32)
    src = CHAIN.replace("z = Z[i]) after b", "z = Z[i])") + \
        "\nschedule s = w().task_graph(deps = explicit)\n"
    with pytest.raises(ptowsp.WspError) as info:
        ptowsp.parse(src, "chain.wsp").compile(target="cpu_sim").run(X=x, Y=np.zeros_like(x))
    (d,) = info.value.diagnostics
    assert d.message == ("`deps = explicit`: `c[i]` at [0] depends on `two[i]` at [0] through "
                         "`V`, and the schedule does not declare that order")
    assert (d.span.line, d.notes[0].span.line) == (17, 15)


def test_handles_survive_axis_transforms_and_the_optimiser():
    src = SAME + "\nschedule s = w().split(i, 4).task_graph(deps = explicit)\n"
    m = ptowsp.parse(src, "split.wsp")
    for level in (0, 2):
        prog = m.compile(target="cpu_sim", opt_level=level)
        x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
        out = prog.run(workers=2, trace=True, X=x)
        np.testing.assert_allclose(out["Z"], x + 1, rtol=1e-6)
        got = tasks(prog)
        sa = next(k[2] for k in got if k[0] == "a")
        sb = min(k[2] for k in got if k[0] == "b")
        for i in range(8):
            assert after(got, ("a", i, sa), ("b", i, sb))


def test_edges_on_a_mesh_are_each_devices_own():
    src = """
sym TP
mesh tp = TP
input  X: f32[8, 64] @ [S(tp), R]
output Y: f32[8, 64] @ [S(tp), R]
output Z: f32[8, 64] @ [S(tp), R]
output W: f32[8, 64] @ [S(tp), R]
kernel a(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 2) }
kernel b(x: In[Tile[1, 64, f32]], z: Out[Tile[1, 64, f32]]) { store(z, x + 1) }
workload w() {
  for i in P(8) {
    let t = a[i](x = X[i], y = Y[i])
    b[i](x = Y[i], z = Z[i]) after t
  }
  b[0](x = Y[0], z = W[0]) after t
}
schedule main = w().task_graph(deps = explicit)
"""
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    m = ptowsp.parse(src, "mesh.wsp")
    for target in ("ref", "cpu_sim"):
        out = m.compile(target=target, mesh={"tp": 2}).run(X=x)
        np.testing.assert_allclose(out["Z"], x * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(out["W"][0], x[0] * 2 + 1, rtol=1e-6)


def test_a_handle_no_edge_names_costs_nothing():
    text = print_module(ptowsp.parse(NONE + "\nschedule s = w()\n", "n.wsp").ir)
    assert "edge@" not in text  # `let t = ...` alone: no order tensor, no box
