"""The cycle model's interconnect through the normal cpu_sim path (docs/performance.md, "The
interconnect"): the machine file's `[interconnect]` table, the cost of one message of each
collective (backends/cpu/comm.py) checked against independent formulas, and whole programs
whose IR is given devices (`Task.device`) and collective kernels (`Kernel.comm`) by
`dataclasses.replace`, as the device lowering makes them: devices run side by side, a message
overlaps the kernels of its device, and `--stats` reports each collective."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver, sym
from ptowsp.api import Program
from ptowsp.backends.cpu import comm
from ptowsp.backends.machine import load_machine
from ptowsp.diagnostics import WspError
from ptowsp.ir import nodes as N
from ptowsp.ir.visit import rewrite

M = load_machine(None)

# ---------------------------------------------------------------------------------------------
# The machine file


def test_builtin_interconnect():
    assert (M.devices_per_server, M.link_gbps, M.network_gbps) == (8, 56, 25)
    assert M.link_latency_ns >= 0 and M.network_latency_ns >= 0


def test_user_file_sets_the_interconnect(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text("[interconnect]\nlink_gbps = 28\ndevices_per_server = 4\n")
    m = load_machine(str(p))
    assert (m.link_gbps, m.devices_per_server, m.network_gbps) == (28, 4, 25)


@pytest.mark.parametrize("text,message", [
    ("[interconnect]\nlink_gbps = -1\n", "`interconnect.link_gbps` must be positive, not -1"),
    ("[interconnect]\nnetwork_latency_ns = -5\n",
     "`interconnect.network_latency_ns` must not be negative, not -5"),
    ("[interconnect]\ndevices_per_server = 0\n",
     "`interconnect.devices_per_server` must be positive, not 0"),
    ("[interconnect]\nlink_gbs = 3\n", "unknown machine key `interconnect.link_gbs`"),
    ("interconnect = 3\n", "`interconnect` must be a table (`[interconnect]`), not the integer 3"),
])
def test_bad_interconnect_keys_are_errors_naming_the_key(tmp_path, text, message):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(WspError) as info:
        load_machine(str(p))
    assert message in info.value.render()


# ---------------------------------------------------------------------------------------------
# One message's cost, against the algorithms written out here


def _kernel(kind: str, group: int, rows: int = 16, cols: int = 64, dtype: str = "f32"):
    tile = rows * cols * 4
    moved = (group - 1) * tile if kind in comm.REDUCING else tile
    params = tuple(N.KParam(f"src_{i}", "tile", dtype, "In", rows, cols)
                   for i in range(group if kind in comm.REDUCING else 1))
    params += (N.KParam("dst", "tile", dtype, "Out", rows, cols),)
    return N.Kernel(f"{kind}_k", kind, params, (), (), comm=N.Comm(kind, "tp", group,
                                                                    sym.const(moved), None))


def _module(sizes: dict[str, int]) -> N.Module:
    mesh = N.Mesh(tuple(N.MeshAxis(a, sym.const(n)) for a, n in sizes.items()))
    return dataclasses.replace(N.Module("m", (), (), (), (), None), mesh=mesh)


def _expected_ns(kind: str, p: int, tile: int, across: bool, m=M) -> tuple[float, float]:
    """The algorithm's time for one destination tile, written out (docs/performance.md):
    (transfer ns, latency ns)."""
    if across:  # a ring at the network's rate
        lat, bw = m.network_latency_ns, m.network_gbps
        steps = {"allreduce": 2 * (p - 1)}.get(kind, p - 1)
    else:  # HCCL's Mesh: every peer at once over its own link
        lat, bw = m.link_latency_ns, m.link_gbps
        steps = 2 if kind == "allreduce" else 1
    per_step = tile if kind == "reduce_scatter" else tile / p
    return steps * per_step / bw, steps * lat


@pytest.mark.parametrize("kind", ["allreduce", "reduce_scatter", "allgather", "all_to_all"])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_message_within_a_server_is_the_mesh_algorithm(kind, p):
    k = _kernel(kind, p)
    got = comm.message_cost(k, M, _module({"tp": p}))
    tile = 16 * 64 * 4
    assert got.algorithm == "mesh"
    transfer, latency = _expected_ns(kind, p, tile, False)
    reduce = math.ceil((p - 1) * got.step_bytes / M.vector_bytes_per_cycle) \
        if kind in comm.REDUCING else 0
    assert got.latency_cycles == math.ceil(round(latency * M.clock_ghz, 6))
    assert got.cycles == max(1, math.ceil(round(transfer * M.clock_ghz, 6)) + reduce) \
        + got.latency_cycles


@pytest.mark.parametrize("kind", ["allreduce", "reduce_scatter", "allgather", "all_to_all"])
def test_a_group_across_servers_is_a_ring_on_the_network(kind):
    # dp = 2 servers of tp = 8: a dp group holds devices 8 apart, in two servers
    m = _module({"dp": 2, "tp": 8})
    k = dataclasses.replace(_kernel(kind, 2), comm=dataclasses.replace(_kernel(kind, 2).comm,
                                                                         over="dp"))
    got = comm.message_cost(k, M, m)
    assert got.algorithm == "ring"
    assert got.link_gbps == M.network_gbps
    # the tp groups of the same mesh stay in their servers
    assert not comm.spans_servers(m, "tp", 8, M.devices_per_server)
    assert comm.spans_servers(m, "dp", 2, M.devices_per_server)


def test_a_group_of_one_moves_nothing():
    assert comm.message_cost(_kernel("allgather", 1), M, _module({"tp": 1})) is None


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["allreduce", "reduce_scatter", "allgather", "all_to_all"]),
       p=st.integers(2, 16), rows=st.sampled_from([1, 8, 16, 64]),
       cols=st.sampled_from([16, 64, 256]), tiles=st.integers(1, 64))
def test_a_collective_never_beats_its_link(kind, p, rows, cols, tiles):
    # a device's messages of one collective (its `tiles` destination tiles, pipelined: one
    # after another on the engine, each message's latency overlapping the next one) take at
    # least the bytes the algorithm sends over one link divided by that link's bandwidth
    mesh = _module({"tp": p})
    k = _kernel(kind, p, rows, cols)
    got = comm.message_cost(k, M, mesh)
    tile = rows * cols * 4
    data = tiles * tile  # the device's destination data
    across = p > M.devices_per_server
    bw = M.network_gbps if across else M.link_gbps
    # bytes over the busiest link, from the textbook algorithms (not comm.py's steps)
    if across:
        link = {"allreduce": 2 * (p - 1) / p * data, "reduce_scatter": (p - 1) * data,
                "allgather": (p - 1) / p * data, "all_to_all": (p - 1) / p * data}[kind]
    else:
        link = {"allreduce": 2 * data / p, "reduce_scatter": data,
                "allgather": data / p, "all_to_all": data / p}[kind]
    total_ns = (tiles * (got.cycles - got.latency_cycles) + got.latency_cycles) / M.clock_ghz
    assert total_ns >= link / bw * (1 - 1e-9)


# ---------------------------------------------------------------------------------------------
# Whole programs on several modelled devices

SOURCE = """
module ic
input  X: f32[{n}, {r}, {c}]
output Y: f32[{n}, {r}, {c}]
output Z: f32[{n}, {r}, {c}]

kernel work(x: In[Tile[{r}, {c}, f32]], y: Out[Tile[{r}, {c}, f32]]) {{
    store(y, tanh(tanh(tanh(tanh(x)))))
}}
kernel msg(x: In[Tile[{r}, {c}, f32]], z: Out[Tile[{r}, {c}, f32]]) {{
    store(z, x)
}}

axis tiles = Dense[{n}]

workload w() {{
    for i in P(tiles) {{
        work[i](x = X[i], y = Y[i])
    }}
    for i in P(tiles) {{
        msg[i](x = X[i], z = Z[i])
    }}
}}

schedule main = w()
"""


def _program(n: int, devices: int, comm_kind=None, r: int = 16, c: int = 64) -> Program:
    """The module above (tiles of r x c) with task i on device i % devices, and (with
    `comm_kind`) `msg` a collective's kernel over an axis `tp` of `devices` devices."""
    ir, _ = driver.optimize(ptowsp.parse(SOURCE.format(n=n, r=r, c=c)).ir, 0)
    i = sym.var("i")

    def place(st):
        if isinstance(st, N.Task):
            return [dataclasses.replace(st, device=sym.mod(i, devices))]
        return [st]

    kernels = tuple(dataclasses.replace(k, comm=N.Comm(comm_kind, "tp", devices,
                                                       sym.const(r * c * 4), None))
                    if k.name == "msg" and comm_kind else k for k in ir.kernels)
    mesh = N.Mesh((N.MeshAxis("tp", sym.const(devices)),))
    ir = dataclasses.replace(ir, kernels=kernels, mesh=mesh, schedules=tuple(
        dataclasses.replace(s, body=rewrite(s.body, place)) for s in ir.schedules))
    t = driver.target("cpu_sim")
    runnable = driver.open_artifact(t, driver.build(t, driver.emit(t, ir, "main", {})))
    return Program(ir, "main", "cpu_sim", runnable, 0.0)


def test_devices_run_side_by_side_and_results_are_unchanged():
    x = np.random.default_rng(0).standard_normal((8, 16, 64)).astype(np.float32) * 0.1
    totals = {}
    for d in (1, 2, 4, 8):
        prog = _program(8, d)
        out = prog.run(X=x)
        # the device placement changes the model only, never the values
        np.testing.assert_allclose(out["Z"], x)
        np.testing.assert_allclose(out["Y"], np.tanh(np.tanh(np.tanh(np.tanh(x)))), rtol=1e-5)
        totals[d] = prog.stats.total_cycles
    assert totals[1] >= totals[2] >= totals[4] >= totals[8]


def test_a_message_overlaps_the_kernels_of_its_device():
    # a long kernel (128 x 256 tiles, four tanh) and a message of the same tile per device
    prog = _program(2, 2, "allgather", 128, 256)
    prog.run(X=np.zeros((2, 128, 256), np.float32), trace=True)
    sim, ev = prog.trace.sim, prog.trace.events
    names = [prog.module.kernels[k].name for k in ev["kernel"]]
    work = [j for j, n in enumerate(names) if n == "work"]
    msgs = [j for j, n in enumerate(names) if n == "msg"]
    assert all(sim["unit"][j] == comm.UNIT_COMM for j in msgs)
    # the messages do not wait for the kernels (nothing orders them) and end first: the
    # collective is independent of the long kernel and finishes before it ends
    assert max(sim["finish"][j] for j in msgs) < min(sim["finish"][j] for j in work)
    stats = prog.stats.extra
    assert stats["devices"] == 2
    msg = next(k for k in prog.module.kernels if k.name == "msg")
    cost = comm.message_cost(msg, M, prog.module)
    # the engines' busy time: each message's cycles but its latency
    assert stats["comm_cycles"] == sum(int(sim["finish"][j] - sim["start"][j])
                                       - cost.latency_cycles for j in msgs)
    (row,) = stats["collectives"]
    assert row["kind"] == "allgather" and row["messages"] == 2 and row["bytes"] == 2 * 128 * 256 * 4
    assert row["algorithm"] == "mesh"
    assert row["message_cycles"] == cost.cycles


def test_a_collectives_messages_pipeline_and_never_beat_the_link():
    # 8 tiles on 2 devices: each device's 4 messages go one after another on its engine, the
    # next starting when the previous one's transfer is done (its latency overlaps), so the
    # collective takes one latency plus 4 transfers, and never less than its bytes over the link
    prog = _program(8, 2, "all_to_all")
    prog.run(X=np.zeros((8, 16, 64), np.float32), trace=True)
    sim, ev = prog.trace.sim, prog.trace.events
    msg = next(k for k in prog.module.kernels if k.name == "msg")
    kid = prog.module.kernels.index(msg)
    cost = comm.message_cost(msg, M, prog.module)
    for dev in (0, 1):
        mine = sorted((int(sim["start"][j]), int(sim["finish"][j])) for j in range(len(ev))
                      if ev["kernel"][j] == kid and j % 2 == dev)
        starts = [a for a, _ in mine]
        assert starts == [starts[0] + i * (cost.cycles - cost.latency_cycles) for i in range(4)]
        span_ns = (mine[-1][1] - mine[0][0]) / M.clock_ghz
        # all_to_all on the mesh: a device receives its peer's share (1/2) of its 4 tiles over
        # one link
        assert span_ns >= 4 * 16 * 64 * 4 / 2 / M.link_gbps


def test_the_trace_has_a_track_per_device_core_and_comm_engine():
    import json

    prog = _program(4, 2, "allgather")
    prog.run(X=np.zeros((4, 16, 64), np.float32), trace=True)
    events = json.loads(prog.trace.to_json())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == 2}
    assert "device 0 comm engine" in names.values() and "device 1 comm engine" in names.values()
    assert "device 1 vector 0" in names.values()
    msgs = [e for e in events if e.get("ph") == "X" and e["pid"] == 2 and e["name"].startswith("msg")]
    assert len(msgs) == 4 and {names[e["tid"]] for e in msgs} == {"device 0 comm engine",
                                                                  "device 1 comm engine"}
    # tasks i on device i % 2: their model tracks say so
    work = [e for e in events if e.get("ph") == "X" and e["pid"] == 2 and e["name"].startswith("work")]
    assert {names[e["tid"]].split()[1] for e in work} == {"0", "1"}
    assert not any(e["args"].get("stolen") for e in work + msgs)
    assert "comm busy" in prog.trace.summary()


def test_every_interconnect_field_is_documented_and_emitted():
    # docs/running.md's table of a mesh run's fields, against what such a run reports (the
    # dict --json prints: Program.stats.as_dict())
    import re
    from pathlib import Path

    from tests.test_profile import emitted_fields

    text = (Path(__file__).resolve().parents[1] / "docs" / "running.md").read_text()
    section = text[text.index("#### Many devices: the interconnect's fields"):]
    section = section[:section.index("\n#", 10)] if "\n#" in section[10:] else section
    documented = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
    prog = _program(4, 2, "allreduce")
    prog.run(X=np.zeros((4, 16, 64), np.float32), trace=True)
    seen = emitted_fields(prog.stats.as_dict())
    single = _program(4, 1)
    single.run(X=np.zeros((4, 16, 64), np.float32), trace=True)
    assert documented <= seen
    assert seen - emitted_fields(single.stats.as_dict()) == documented


# ---------------------------------------------------------------------------------------------
# Mesh programs through the device lowering (ir/devices.py)

PARALLEL = """
module par
mesh tp = 1
input  X: f32[{n}, 64] @ [S(tp), R]
output Y: f32[{n}, 64] @ [S(tp), R]
kernel k(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) {{
    store(y, tanh(tanh(x)))
}}
axis rows = Dense[{n} / 16]
workload w() {{
    for i in P(rows) {{
        k[i](x = X[i*16 : i*16 + 16, :], y = Y[i*16 : i*16 + 16, :])
    }}
}}
schedule main = w()
"""


@pytest.mark.parametrize("n", [128, 512])
def test_more_devices_never_slower_on_independent_tasks(n):
    # the same independent tasks split over 1, 2, 4 and 8 devices by the lowering
    m = ptowsp.parse(PARALLEL.format(n=n))
    x = np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32)
    cycles = []
    for p in (1, 2, 4, 8):
        prog = m.compile(target="cpu_sim", mesh={"tp": p})
        out = prog.run(X=x)
        np.testing.assert_allclose(out["Y"], np.tanh(np.tanh(x)), rtol=1e-6)
        cycles.append(prog.stats.total_cycles)
    assert cycles == sorted(cycles, reverse=True), cycles


OVERLAP = """
module ov
mesh tp = 2
input   A: f32[256, 256]
output  B: f32[256, 256]
input   S: f32[64, 64] @ [S(tp), R]
output  G: f32[64, 64]
kernel long(a: In[Tile[256, 256, f32]], b: Out[Tile[256, 256, f32]]) {
    store(b, tanh(tanh(tanh(tanh(a)))))
}
workload w() {
    long(a = A, b = B)
    allgather(S, into = G, over = tp)
}
schedule main = w()
"""


def test_a_collective_overlaps_an_independent_kernel_and_never_beats_its_link():
    prog = ptowsp.parse(OVERLAP).compile(target="cpu_sim")
    s = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    out = prog.run(A=np.zeros((256, 256), np.float32), S=s, trace=True)
    np.testing.assert_array_equal(out["G"], s)
    sim, ev = prog.trace.sim, prog.trace.events
    kernels = prog.module.kernels
    longs = [j for j in range(len(ev)) if kernels[ev["kernel"][j]].name.startswith("long")]
    msgs = [j for j in range(len(ev)) if kernels[ev["kernel"][j]].comm is not None]
    assert msgs and all(sim["unit"][j] == comm.UNIT_COMM for j in msgs)
    # the allgather depends on nothing the long kernel writes: it is done before it ends
    assert max(sim["finish"][j] for j in msgs) < min(sim["finish"][j] for j in longs)
    (row,) = prog.stats.extra["collectives"]
    assert row["collective"].startswith("allgather(S, into = G")
    # each device receives its peer's shard (32 x 64 f32) over one HCCS link
    link_ns = 32 * 64 * 4 / M.link_gbps
    assert row["modelled_us"] * 1000 >= link_ns
    assert row["bytes"] == 32 * 64 * 4 * 2  # both devices' remote tiles, nothing local


def test_stats_prints_each_collective(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    src = tmp_path / "ov.wsp"
    src.write_text(OVERLAP)
    env = {**os.environ, "PYTHONPATH": str(root), "WSPC_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(src), "--random-inputs", "0",
                        "--stats"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "             devices: 2" in r.stdout
    assert "communication:" in r.stdout and "on the comm engines" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("collective:"))
    assert "allgather(S, into = G, over = tp)" in line and "bytes in" in line and "(mesh)" in line
