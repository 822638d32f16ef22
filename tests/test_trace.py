"""Trace export (`ptowsp/trace.py`): Chrome trace JSON and the summary, from synthetic arrays.

No C compiler: the record layouts are checked against cffi's reading of wsp_runtime.h (cdef
only), and the runs are made up here so every number is known.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ptowsp.backends.cpu.trace import (
    EVENT_DTYPE,
    SIMRESULT_DTYPE,
    Trace,
    dispatcher_stats,
    from_cdata,
    summary_dict,
)
from tests.trace_data import KERNELS, MACHINE, synthetic

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ffi():
    cffi = pytest.importorskip("cffi")
    text = (ROOT / "runtime_c" / "wsp_runtime.h").read_text()
    ffi = cffi.FFI()
    ffi.cdef(text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")])
    return ffi


def events(rows) -> np.ndarray:
    """rows: (kernel, dispatcher, stream, worker, coords, start_ns, end_ns)."""
    ev = np.zeros(len(rows), EVENT_DTYPE)
    for i, (k, d, s, w, coords, t0, t1) in enumerate(rows):
        ev[i]["kernel"], ev[i]["stmt"], ev[i]["dispatcher"] = k, i, d
        ev[i]["stream"], ev[i]["worker"], ev[i]["ncoords"] = s, w, len(coords)
        ev[i]["coords"][:len(coords)] = coords
        ev[i]["start_ns"], ev[i]["end_ns"] = t0, t1
    return ev


def results(rows) -> np.ndarray:
    """rows: (issue, start, finish, core, unit, issuing dispatcher, group)."""
    sim = np.zeros(len(rows), SIMRESULT_DTYPE)
    for i, (issue, start, finish, core, unit, disp, group) in enumerate(rows):
        sim[i] = (0, issue, issue, start, finish, core, unit, disp, group)
    return sim


def sample() -> Trace:
    """Four tasks: mm[0, 1] and mm[1, 1] on cube cores, init (no coords), and a norm[3] that
    never ran on the host; task 1 was stolen by dispatcher 0 from dispatcher 1."""
    ev = events([(0, 0, -1, 0, (0, 1), 1500, 4500),
                 (0, 1, -1, 1, (1, 1), 2000, 2600),
                 (1, 0, 2, 0, (), 5000, 5100),
                 (2, 1, -1, -1, (3,), 0, 0)])
    sim = results([(0, 252, 3852, 0, 1, 0, -1),
                   (252, 504, 1404, 1, 1, 0, 7),
                   (504, 3852, 3900, 0, 0, 0, -1),
                   (756, 1008, 1800, 1, 0, 1, -1)])
    summary = {"tasks": 4, "total_cycles": 3900, "critical_path": 3900, "work": [840, 4500],
               "serial_cycles": 9000, "stolen": 1, "groups": 0}
    disp = [{"tasks": 3, "stolen": 1, "busy_cycles": 756}, {"tasks": 1, "stolen": 0,
                                                            "busy_cycles": 252}]
    return Trace(ev, KERNELS, MACHINE, sim=sim, schedule="main", summary=summary,
                 dispatchers=disp)


def tasks_of(trace: dict, pid: int) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == pid]


def meta(trace: dict, pid: int, kind: str) -> dict:
    """{tid or None: name} of the metadata events `kind` of process `pid`."""
    return {e.get("tid"): e["args"].get("name", e["args"].get("sort_index"))
            for e in trace["traceEvents"] if e["ph"] == "M" and e["pid"] == pid
            and e["name"] == kind}


# ---------------------------------------------------------------------------------------------
# Layouts


@pytest.mark.parametrize("ctype, dtype", [("wsp_trace_event", EVENT_DTYPE),
                                          ("wsp_simresult", SIMRESULT_DTYPE)])
def test_dtypes_match_the_c_structs(ffi, ctype, dtype):
    assert dtype.itemsize == ffi.sizeof(ctype)
    c_fields = dict(ffi.typeof(ctype).fields)
    assert list(dtype.names) == list(c_fields)
    for name in dtype.names:
        assert dtype.fields[name][1] == ffi.offsetof(ctype, name), name
        assert dtype.fields[name][0].itemsize == ffi.sizeof(c_fields[name].type), name


def test_from_cdata_and_summary_helpers(ffi):
    buf = ffi.new("wsp_trace_event[2]")
    buf[1].kernel, buf[1].ncoords, buf[1].coords[2], buf[1].end_ns = 2, 3, -7, 123456789012
    ev = from_cdata(ffi, buf, 2, EVENT_DTYPE)
    assert ev.dtype == EVENT_DTYPE and len(ev) == 2
    assert (ev[1]["kernel"], ev[1]["ncoords"], ev[1]["coords"][2], ev[1]["end_ns"]) == (
        2, 3, -7, 123456789012)
    assert len(from_cdata(ffi, buf, 0, EVENT_DTYPE)) == 0
    s = ffi.new("wsp_simsummary *")
    s.tasks, s.total_cycles, s.work[1], s.stolen = 5, 100, 40, 2
    d = summary_dict(s)
    assert d["tasks"] == 5 and d["total_cycles"] == 100 and d["work"] == [0, 40]
    assert d["stolen"] == 2
    disp = ffi.new("wsp_simdisp[2]")
    disp[1].tasks, disp[1].busy_cycles = 3, 9
    assert dispatcher_stats(disp, 2)[1] == {"tasks": 3, "stolen": 0, "busy_cycles": 9}


# ---------------------------------------------------------------------------------------------
# Chrome trace


def test_structure_is_a_chrome_trace():
    out = sample().to_chrome_trace()
    assert out["displayTimeUnit"] == "ns"
    assert isinstance(out["traceEvents"], list)
    for e in out["traceEvents"]:
        assert e["ph"] in ("X", "M")
        assert isinstance(e["pid"], int) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
            assert isinstance(e["tid"], int) and e["dur"] >= 0
    assert out["otherData"]["schedule"] == "main"
    assert out["otherData"]["machine"] == "ascend910b"


def test_process_and_thread_names():
    out = sample().to_chrome_trace()
    assert meta(out, 1, "process_name") == {None: "host (real run)"}
    assert meta(out, 2, "process_name") == {None: "ascend910b (cycle model)"}
    assert meta(out, 1, "thread_name") == {1: "worker 0", 2: "worker 1"}
    threads = meta(out, 2, "thread_name")
    assert threads[1] == "cube 0" and threads[24] == "cube 23"
    assert threads[25] == "vector 0" and threads[25 + 47] == "vector 47"
    assert len(threads) == 24 + 48


def test_real_track():
    real = tasks_of(sample().to_chrome_trace(), 1)
    assert [e["name"] for e in real] == ["mm[0, 1]", "mm[1, 1]", "init"]
    first = real[0]
    assert (first["tid"], first["ts"], first["dur"]) == (1, 1.5, 3.0)
    assert first["args"]["real_start_ns"] == 1500 and first["args"]["real_dur_ns"] == 3000
    assert (first["args"]["task"], first["args"]["worker"], first["args"]["dispatcher"]) == (
        0, 0, 0)
    assert real[2]["args"]["stream"] == 2


def test_never_ran_tasks_are_only_simulated():
    out = sample().to_chrome_trace()
    assert all(e["args"]["task"] != 3 for e in tasks_of(out, 1))
    (norm,) = [e for e in tasks_of(out, 2) if e["args"]["task"] == 3]
    assert norm["name"] == "norm[3]"
    assert norm["args"]["worker"] == -1 and "real_start_ns" not in norm["args"]


def test_sim_track_times_and_cores():
    sim = tasks_of(sample().to_chrome_trace(), 2)
    assert [e["name"] for e in sim] == ["mm[0, 1]", "mm[1, 1]", "init", "norm[3]"]
    # cycles / 1.8 GHz / 1000 = µs
    assert sim[0]["ts"] == pytest.approx(252 / 1800) and sim[0]["dur"] == pytest.approx(2.0)
    assert [e["tid"] for e in sim] == [1, 2, 25, 26]  # cube 0, cube 1, vector 0, vector 1
    a = sim[0]["args"]
    assert (a["sim_start_cycles"], a["sim_dur_cycles"], a["issued_by"]) == (252, 3600, 0)


def test_stolen_and_group_flags():
    by_task = {e["args"]["task"]: e["args"] for e in tasks_of(sample().to_chrome_trace(), 2)}
    assert by_task[1]["stolen"] is True and by_task[1]["issued_by"] == 0
    assert by_task[1]["dispatcher"] == 1 and by_task[1]["group"] == 7
    for i in (0, 2, 3):
        assert "stolen" not in by_task[i] and "group" not in by_task[i]


def test_no_dispatch_means_nothing_stolen():
    ev = events([(0, -1, -1, 0, (0,), 0, 10)])
    sim = results([(0, 10, 20, 0, 0, 3, -1)])
    (e,) = tasks_of(Trace(ev, KERNELS, MACHINE, sim=sim).to_chrome_trace(), 2)
    assert "stolen" not in e["args"] and e["args"]["dispatcher"] == -1


def test_real_only_trace():
    ev = events([(0, -1, -1, 3, (2, 5, 7), 100, 300), (7, -1, -1, 0, (), 0, 50)])
    out = Trace(ev, KERNELS).to_chrome_trace()
    assert {e["pid"] for e in out["traceEvents"]} == {1}
    assert [e["name"] for e in tasks_of(out, 1)] == ["mm[2, 5, 7]", "kernel7"]
    assert "sim_start_cycles" not in tasks_of(out, 1)[0]["args"]


def test_mixed_coordinate_counts_name_every_task():
    n = 20_000
    rng = np.random.default_rng(1)
    ev = np.zeros(n, EVENT_DTYPE)
    ev["kernel"] = rng.integers(0, 3, n)
    ev["ncoords"] = rng.integers(0, 9, n)
    ev["coords"] = rng.integers(-5, 1000, (n, 8))
    names = Trace(ev, KERNELS)._task_names()
    for i in rng.choice(n, 300).tolist():
        nc = int(ev["ncoords"][i])
        want = KERNELS[ev["kernel"][i]]
        if nc:
            want += "[" + ", ".join(str(int(c)) for c in ev["coords"][i][:nc]) + "]"
        assert names[i] == want


def test_bad_inputs():
    ev = events([(0, 0, -1, 0, (), 0, 1)])
    with pytest.raises(ValueError, match="EVENT_DTYPE"):
        Trace(np.zeros(1, np.int64), KERNELS)
    with pytest.raises(ValueError, match="one per enumerated task"):
        Trace(ev, KERNELS, MACHINE, sim=results([]))
    with pytest.raises(ValueError, match="machine"):
        Trace(ev, KERNELS, sim=results([(0, 0, 1, 0, 0, 0, -1)]))


def test_empty_trace():
    out = Trace(np.zeros(0, EVENT_DTYPE), KERNELS, MACHINE, sim=np.zeros(0, SIMRESULT_DTYPE))
    assert tasks_of(out.to_chrome_trace(), 1) == []
    assert "0 tasks" in out.summary()


# ---------------------------------------------------------------------------------------------
# Writing and the summary


def test_write_is_atomic_and_round_trips(tmp_path):
    tr = sample()
    path = tmp_path / "run.json"
    path.write_text("old")
    tr.write(str(path))
    assert os.listdir(tmp_path) == ["run.json"]  # replaced, no temp file left
    assert json.loads(path.read_text()) == json.loads(json.dumps(tr.to_chrome_trace()))


def test_write_failure_leaves_no_temp_file(tmp_path, monkeypatch):
    tr = sample()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        tr.write(str(tmp_path / "run.json"))
    assert os.listdir(tmp_path) == []


def test_summary_text():
    text = sample().summary()
    assert text.splitlines()[0] == "schedule `main` on ascend910b: 4 tasks"
    assert "3 tasks ran on 2 workers" in text and "(1 never ran)" in text
    assert "3,900 cycles = 2.2 us at 1.8 GHz" in text  # 3900 / 1.8 / 1000
    # cube: 4500 / (24 x 3900); vector: 840 / (48 x 3900)
    assert "cube busy       4.8% of 24 cores" in text
    assert "vector busy     0.4% of 48 cores" in text
    assert "stolen          1 task\n" in text
    rows = text.splitlines()[-3:]
    assert rows[0].split() == ["dispatcher", "tasks", "stolen", "busy"]
    assert rows[1].split() == ["0", "3", "1", "19.4%"]  # 756 / 3900
    assert rows[2].split() == ["1", "1", "0", "6.5%"]


def test_summary_derived_from_results_alone():
    ev = events([(0, 0, -1, 0, (), 0, 1), (0, 0, -1, 0, (), 1, 2)])
    sim = results([(0, 0, 1000, 0, 1, 0, -1), (0, 1000, 1800, 1, 1, 0, -1)])
    text = Trace(ev, KERNELS, MACHINE, sim=sim).summary()
    assert "1,800 cycles = 1.0 us" in text
    assert "cube busy       4.2% of 24 cores" in text  # 1800 / (24 x 1800)


@pytest.mark.slow
def test_a_million_tasks():
    """A million tasks convert (how fast: benchmarks/trace.py)."""
    n = 1_000_000
    tr = synthetic(n)
    out = tr.to_chrome_trace()
    assert len(tasks_of(out, 1)) == n
