"""The timeline report (`wspc report`, `wspc run --report`: ptowsp/report, docs/tools.md):
its data checked against independent computations over the trace, and the page loaded in a
real browser, headless Chromium, which must report no console message and no caught error
and draw what the trace holds.

The page writes its own check into `#wsp-selfcheck` (tasks and lanes drawn, any error);
`--dump-dom` shows it after the scripts ran. Hover and zoom are checked by calling the page's
functions (`window.wspReport`) from a script the test appends to a copy of the page. The load
time of 100,000 tasks is printed (docs/tools.md has the figure), never asserted. Screenshots
are kept under the pytest basetemp (paths printed).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp import report
from ptowsp.backends.cpu.trace import EVENT_DTYPE, SIMRESULT_DTYPE, Trace
from ptowsp.diagnostics import WspError
from ptowsp.report.timeline import timeline
from tests.trace_data import KERNELS, MACHINE

ROOT = Path(__file__).resolve().parents[1]
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


# -- helpers ----------------------------------------------------------------------------------

def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on PATH: the browser tests need Debian's `chromium` package "
                    "(`.ci/run` installs it when it runs as root with apt)")
    return path


def browse(page: Path, profile: Path, *, screenshot: Path | None = None,
           size: str = "1400,900", budget_ms: int = 5000) -> tuple[str, list[str]]:
    """(the DOM after the page's scripts ran, the console's lines) of `page` in headless
    Chromium; with `screenshot`, a PNG of the window is written there instead of the DOM."""
    args = [chromium(), *BROWSER_FLAGS, f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}", f"--window-size={size}"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    r = subprocess.run([*args, page.resolve().as_uri()], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return r.stdout, console


def element(dom: str, ident: str):
    m = re.search(rf'<pre id="{ident}"[^>]*>(.*?)</pre>', dom, re.S)
    assert m, f"no #{ident} in the page"
    return json.loads(html.unescape(m.group(1)))


def with_script(page: Path, script: str, out: Path) -> Path:
    """A copy of `page` that runs `script` after the report's own (its result: JSON in
    #wsp-test)."""
    text = page.read_text(encoding="utf-8")
    extra = ('<pre id="wsp-test"></pre><script>\n"use strict";\ntry {\n'
             f'  const result = (() => {{ {script} }})();\n'
             '  document.getElementById("wsp-test").textContent = JSON.stringify(result);\n'
             '} catch (e) {\n'
             '  document.getElementById("wsp-test").textContent = JSON.stringify('
             '{ error: String(e.stack || e) });\n}\n</script>\n')
    out.write_text(text.replace("</body>", extra + "</body>"), encoding="utf-8")
    return out


def wspc(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=900)


def lanes_of(chrome: dict) -> set:
    """Every lane the trace names or puts a task on: (pid, tid)."""
    ev = chrome["traceEvents"]
    return ({(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"} |
            {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"})


def longest_chain(n: int, edges, dur) -> tuple[float, list[int]]:
    """The longest chain of tasks along `edges` (pairs) by summed `dur`, by memoised recursion
    over predecessors (independent of the report's Kahn order): (length, one such chain)."""
    preds = defaultdict(list)
    for a, b in edges:
        preds[int(b)].append(int(a))
    best: dict[int, float] = {}
    sys.setrecursionlimit(max(10_000, 4 * n))

    def cp(v: int) -> float:
        if v not in best:
            best[v] = float(dur[v]) + max((cp(u) for u in preds[v]), default=0.0)
        return best[v]

    lengths = [cp(v) for v in range(n)]
    end = int(np.argmax(lengths))
    chain = [end]
    while preds[chain[-1]]:
        chain.append(max(preds[chain[-1]], key=lambda u: best[u]))
    return lengths[end], chain[::-1]


def path_tasks(payload: dict, path: dict) -> list[int]:
    return [payload["lanes"][li]["task"][i] for li, i in zip(path["lane"], path["index"])]


def synthetic(n: int, chains: int = 8) -> Trace:
    """`n` tasks on 8 workers and 24 cube cores, each task after the one `chains` before it (so
    `chains` independent chains), task durations all different: the longest chain is unique."""
    ev = np.zeros(n, EVENT_DTYPE)
    idx = np.arange(n)
    ev["kernel"], ev["worker"], ev["dispatcher"], ev["stream"] = idx % 3, idx % 8, idx % 4, -1
    ev["ncoords"], ev["coords"][:, 0], ev["coords"][:, 1] = 2, idx // 1000, idx
    ev["start_ns"] = idx * 10
    ev["end_ns"] = ev["start_ns"] + 7
    sim = np.zeros(n, SIMRESULT_DTYPE)
    sim["start"] = idx * 100
    sim["finish"] = sim["start"] + 50 + (idx * 7919) % 97  # distinct sums per chain
    sim["unit"], sim["core"], sim["dispatcher"], sim["group"] = 1, idx % 24, idx % 4, -1
    edges = np.stack([idx[:-chains], idx[chains:]], axis=1) if n > chains else None
    return Trace(ev, list(KERNELS), MACHINE, sim=sim, edges=edges, model_edges=edges,
                 dispatchers=[{"tasks": n // 4, "stolen": 0, "busy_cycles": 10}] * 4,
                 summary={"tasks": n, "total_cycles": int(sim["finish"].max()), "work": [0, 0],
                          "critical_path": 0, "serial_cycles": 0, "stolen": 0, "groups": 0})


@pytest.fixture(scope="module")
def csp_run():
    """worker_pool.wsp (a CSP pipeline: channels) run on cpu_sim with its trace."""
    prog = ptowsp.load(ROOT / "examples" / "worker_pool.wsp").compile(target="cpu_sim")
    prog.run(random_inputs=0, trace=True)
    return prog


# -- the data ---------------------------------------------------------------------------------

def test_the_critical_path_is_the_longest_chain_of_each_timelines_arrows(csp_run):
    tr = csp_run.trace
    payload = timeline(tr.to_chrome_trace())
    real, model = payload["critical"]  # the host's process, then the model's
    # the model: its edges (the trace's arrows), each task its modelled duration
    dur = (tr.sim["finish"] - tr.sim["start"]) / (tr.machine.clock_ghz * 1000.0)
    want, _ = longest_chain(len(tr), tr.model_edges.tolist(), dur)
    got = path_tasks(payload, model)
    assert model["us"] == pytest.approx(want, rel=1e-9)
    assert sum(dur[t] for t in got) == pytest.approx(want, rel=1e-9)
    edges = {tuple(e) for e in tr.model_edges.tolist()}
    assert all((a, b) in edges for a, b in zip(got, got[1:])), got
    # the real run: the runtime's edges between tasks that ran (what its arrows join)
    src, dst = tr._ran_edges()
    rdur = (tr.events["end_ns"] - tr.events["start_ns"]) / 1000.0
    want, _ = longest_chain(len(tr), zip(src.tolist(), dst.tolist()), rdur)
    got = path_tasks(payload, real)
    assert real["us"] == pytest.approx(want, rel=1e-9)
    assert all((a, b) in set(zip(src.tolist(), dst.tolist())) for a, b in zip(got, got[1:]))


def test_a_unique_longest_chain_is_found_task_for_task():
    tr = synthetic(400)
    payload = timeline(tr.to_chrome_trace())
    dur = (tr.sim["finish"] - tr.sim["start"]) / (MACHINE.clock_ghz * 1000.0)
    length, chain = longest_chain(len(tr), tr.model_edges.tolist(), dur)
    model = payload["critical"][1]
    assert path_tasks(payload, model) == chain
    assert model["us"] == pytest.approx(length)
    assert len(chain) == 400 // 8


def test_lanes_are_sorted_by_start_with_kernels_and_coordinates_from_the_names():
    tr = synthetic(50)
    chrome = tr.to_chrome_trace()
    payload = timeline(chrome)
    assert len(payload["lanes"]) == len(lanes_of(chrome))
    for lane in payload["lanes"]:
        assert lane["start"] == sorted(lane["start"])
        for k, t in zip(lane["kernel"], lane["task"]):
            assert payload["kernels"][k] == KERNELS[t % 3]
        at = np.concatenate([[0], np.cumsum(lane["nc"])]).astype(int)
        for i, t in enumerate(lane["task"]):
            assert lane["coords"][at[i]:at[i + 1]] == [t // 1000, t]
    assert [g["name"] for g in payload["groups"]] == ["host (real run)",
                                                      "ascend910b (cycle model)"]
    assert payload["groups"][1]["ghz"] == pytest.approx(MACHINE.clock_ghz)


def test_the_trace_carries_the_per_kernel_table_and_the_dispatchers_of_stats(csp_run):
    other = csp_run.trace.to_chrome_trace()["otherData"]
    stats = csp_run.stats.as_dict()
    assert other["kernels"] == stats["kernels"]
    assert other["dispatchers"] == stats["dispatchers"]
    page = report.render(csp_run.trace.to_chrome_trace(), "run.json")
    for row in stats["kernels"]:
        assert f"<td>{row['kernel']}</td><td>{row['tasks']:,}</td>" in page
    assert "channel" in json.dumps(timeline(csp_run.trace.to_chrome_trace())["counters"])


def test_an_mpi_runs_merged_trace_shows_each_device_and_its_tables():
    from ptowsp.backends.cpu.trace import merge_devices

    merged = json.loads(merge_devices([synthetic(40).to_json(), synthetic(40).to_json()]))
    payload = timeline(merged)
    assert [g["name"] for g in payload["groups"]] == [
        "device 0: real run", "device 1: real run", "device 0: cycle model",
        "device 1: cycle model"]
    assert sum(len(lane["start"]) for lane in payload["lanes"]) == 4 * 40
    page = report.render(merged, "mpi.json")
    assert page.count("<h3>device 0</h3>") == 2 and page.count("<h3>device 1</h3>") == 2


def test_the_page_is_self_contained(csp_run):
    page = report.render(csp_run.trace.to_chrome_trace(), "run.json")
    for outside in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert outside not in page
    assert page.count("<script") == 2  # the data and the inlined report.js


def test_the_pages_script_parses_as_strict_javascript():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no node on PATH to parse report.js with (the browser tests still load it)")
    js = ROOT / "ptowsp" / "report" / "templates" / "report.js"
    r = subprocess.run([node, "--check", str(js)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# -- errors -----------------------------------------------------------------------------------

def _no_report(r: subprocess.CompletedProcess, out: Path) -> str:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]
    return r.stderr


def test_a_trace_that_is_missing_or_not_json_is_an_error_at_the_file(tmp_path):
    out = tmp_path / "r.html"
    err = _no_report(wspc("report", tmp_path / "none.json", "-o", out), out)
    assert f"{tmp_path / 'none.json'}: error: cannot read the trace: no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    err = _no_report(wspc("report", bad, "-o", out), out)
    assert f"{bad}: error: is not JSON: Expecting value" in err
    assert "help: write the trace with `wspc run FILE --trace RUN.json`" in err
    (tmp_path / "dir.json").mkdir()
    err = _no_report(wspc("report", tmp_path / "dir.json", "-o", out), out)
    assert "dir.json: error: cannot read the trace: is a directory" in err


def test_json_that_is_not_a_trace_of_tasks_is_an_error_at_the_file(tmp_path):
    out = tmp_path / "r.html"
    for text, message in [
            ('{"traceEvents": 3}', "is not a Chrome trace: it has no `traceEvents` list"),
            ('[{"ph": "X", "name": "k[0]", "pid": 1, "tid": 1, "ts": "0", "dur": 1}]',
             "task event 0 (`k[0]`) has no numeric `ts`"),
            ('{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "ts": 0, "dur": 1}]}',
             "task event 0 (`k`) has no `tid`"),
            ('{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 0, '
             '"dur": 1e10}]}', "spans 2.8 hours: the report draws at most 2.5 hours of a run")]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        assert f"{bad}: error: {message}" in _no_report(wspc("report", bad, "-o", out), out)


def test_an_unwritable_destination_writes_nothing(tmp_path):
    src = tmp_path / "run.json"
    synthetic(20).write(str(src))
    r = wspc("report", src, "-o", "/proc/r.html")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "/proc/r.html: error: cannot create a file in /proc" in r.stderr


def test_report_needs_a_target_with_a_trace(tmp_path):
    r = wspc("run", "examples/softmax.wsp", "--target", "ref", "--random-inputs", "0",
             "--report", tmp_path / "r.html")
    assert r.returncode == 2
    assert "--report needs --target cpu_sim (ref records no trace to draw)" in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_trace_larger_than_the_limit_is_refused_unread(tmp_path, monkeypatch):
    src = tmp_path / "run.json"
    src.write_text('{"traceEvents": []}')
    monkeypatch.setattr(report, "MAX_TRACE_BYTES", 10)
    with pytest.raises(WspError) as err:
        report.read_trace(src)
    assert f"{src}: error: is larger than 10 bytes: not a trace wspc wrote" in err.value.render()


def test_render_refuses_a_trace_of_the_wrong_shape():
    with pytest.raises(WspError, match="has no `traceEvents` list"):
        report.render({"events": []}, "x.json")


# -- in the browser ---------------------------------------------------------------------------

def test_a_run_report_loads_in_chromium_and_draws_every_task_and_lane(tmp_path, csp_run,
                                                                     capsys):
    chrome = csp_run.trace.to_chrome_trace()
    trace = tmp_path / "run.json"
    trace.write_text(json.dumps(chrome))
    page = tmp_path / "report.html"
    r = wspc("report", trace, "-o", page)
    assert r.returncode == 0, r.stderr
    dom, console = browse(page, tmp_path / "profile")
    assert console == []
    check = element(dom, "wsp-selfcheck")
    assert check["ok"] and check["error"] is None, check
    tasks = sum(1 for e in chrome["traceEvents"] if e["ph"] == "X")
    assert check["tasks"] == tasks == 2 * len(csp_run.trace)  # the real run and the model's
    assert check["rects"] + check["blocks"] >= 1
    assert check["lanes"] == len(lanes_of(chrome))
    payload = timeline(chrome)
    assert check["critical"] == sum(len(p["lane"]) for p in payload["critical"])
    shot = tmp_path / "report.png"
    browse(page, tmp_path / "profile", screenshot=shot)
    assert shot.stat().st_size > 0
    with capsys.disabled():  # the artefact's path, shown even when output is captured
        print(f"\nscreenshot of a CSP run's report: {shot}")


def test_wspc_run_writes_the_report_of_its_run(tmp_path):
    page = tmp_path / "sub" / "report.html"
    r = wspc("run", "examples/softmax.wsp", "--random-inputs", "0", "--report", page)
    assert r.returncode == 0, r.stderr
    dom, console = browse(page, tmp_path / "profile")
    check = element(dom, "wsp-selfcheck")
    assert console == [] and check["ok"], (console, check)
    assert check["tasks"] > 0 and check["critical"] >= 2


def test_the_report_is_one_of_the_runs_outputs_all_or_none(tmp_path):
    page = tmp_path / "report.html"
    r = wspc("run", "examples/softmax.wsp", "--random-inputs", "0", "--report", page,
             "--outputs", "/dev/full")
    assert r.returncode == 1 and "--outputs /dev/full: error: is a character device" in r.stderr
    assert not page.exists()
    r = wspc("run", "examples/softmax.wsp", "--random-inputs", "0", "--report", page,
             "--trace", page)
    assert r.returncode == 2 and "the same destination twice" in r.stderr
    assert not page.exists()


HOVER_AND_ZOOM = """
const R = window.wspReport;
const lane = R.lanes.findIndex((l) => l.n > 3);
const l = R.lanes[lane], i = 2;
R.setView(l.start[i] - l.dur[i], l.start[i] + 2 * l.dur[i]);
const x = R.xOf(l.start[i] + l.dur[i] / 2), y = R.laneY(lane) + R.rowHeight / 2;
const hit = R.hitTest(x, y);
const tip = R.tooltip(x, y);
const miss = R.hitTest(x, 2);
const before = R.view();
const t = R.tOf(x);
R.zoomAt(x, 0.5);
const zoomed = R.view();
const tAfter = R.tOf(x);
R.panBy(100);
const panned = R.view();
R.reset();
const after = R.view();
// the same through the mouse: events dispatched on the canvas, as a user's would arrive
const canvas = document.getElementById("wsp-canvas"), box = canvas.getBoundingClientRect();
const at = (type, px, py, extra) => canvas.dispatchEvent(new (extra ? WheelEvent : MouseEvent)(
    type, { clientX: box.left + px, clientY: box.top + py, bubbles: true, cancelable: true,
            ...(extra || {}) }));
R.setView(l.start[i] - l.dur[i], l.start[i] + 2 * l.dur[i]);
at("mousemove", x, y);
const tipNode = document.getElementById("wsp-tip");
const shown = { hidden: tipNode.hidden, text: tipNode.textContent };
const spanBefore = R.view().t1 - R.view().t0;
at("wheel", x, y, { deltaY: -100 });
const wheeled = { span: R.view().t1 - R.view().t0, spanBefore, t: R.tOf(x) };
const v0 = R.view();
at("mousedown", x, y);
at("mousemove", x + 50, y);
window.dispatchEvent(new MouseEvent("mouseup"));
const dragged = { before: v0, after: R.view() };
at("dblclick", x, y);
return { lane, task: l.task[i], hit, tip, miss, before, zoomed, t, tAfter, panned,
         full: R.full(), after, drawn: R.draw(), shown, wheeled, dragged, reset: R.view() };
"""


def test_hover_and_zoom_through_the_pages_functions(tmp_path):
    tr = synthetic(200)
    page = tmp_path / "report.html"
    report.write(page, report.render(tr.to_chrome_trace(), "synthetic.json"))
    probe = with_script(page, HOVER_AND_ZOOM, tmp_path / "probe.html")
    dom, console = browse(probe, tmp_path / "profile")
    assert console == []
    got = element(dom, "wsp-test")
    assert "error" not in got, got
    task, hit = got["task"], got["hit"]
    assert hit["task"] == task and hit["lane"] == got["lane"]
    assert hit["kernel"] == KERNELS[task % 3] and hit["coords"] == [task // 1000, task]
    assert hit["name"] == f"{KERNELS[task % 3]}[{task // 1000}, {task}]"
    # the hover shows the kernel, coordinates, times, and the same task on the other timeline
    assert f"(task {task})" in got["tip"] and f"coordinates [{task // 1000}, {task}]" in got["tip"]
    assert "host (real run)" in got["tip"] and "ascend910b (cycle model)" in got["tip"]
    assert "cycles)" in got["tip"]
    assert got["miss"] is None  # the axis row holds no task
    # zooming in about x halves the window and keeps the time under x where it was
    span = got["before"]["t1"] - got["before"]["t0"]
    assert got["zoomed"]["t1"] - got["zoomed"]["t0"] == pytest.approx(span / 2)
    assert got["tAfter"] == pytest.approx(got["t"])
    # a drag of 100 px to the right shows earlier times; reset shows everything
    assert got["panned"]["t0"] < got["zoomed"]["t0"]
    assert got["after"] == got["full"]
    assert got["drawn"]["tasks"] == 2 * 200
    # the mouse: hovering shows the tooltip, the wheel zooms about the pointer, a drag pans,
    # a double click shows the whole run again
    assert got["shown"] == {"hidden": False, "text": got["tip"]}
    assert got["wheeled"]["span"] == pytest.approx(got["wheeled"]["spanBefore"] * np.exp(-0.2))
    assert got["wheeled"]["t"] == pytest.approx(got["t"])
    moved = got["dragged"]["before"]["t0"] - got["dragged"]["after"]["t0"]
    assert moved > 0
    assert got["reset"] == got["full"]


def test_a_report_of_100000_tasks_loads(tmp_path, capsys):
    n = 100_000
    tr = synthetic(n)
    page = tmp_path / "report.html"
    report.write(page, report.render(tr.to_chrome_trace(), "synthetic.json"))
    dom, console = browse(page, tmp_path / "profile", budget_ms=60_000)
    assert console == []
    check = element(dom, "wsp-selfcheck")
    assert check["ok"] and check["error"] is None, check
    assert check["tasks"] == 2 * n and check["critical"] == 2 * (n // 8)
    # level of detail: far fewer rectangles than tasks at the whole run's zoom
    assert check["rects"] + check["blocks"] < n
    shot = tmp_path / "report-100k.png"
    browse(page, tmp_path / "profile", screenshot=shot, budget_ms=60_000)
    with capsys.disabled():  # a figure for docs/tools.md, never asserted
        print(f"\n100,000 tasks: page {page.stat().st_size / 1e6:.1f} MB, loaded and drawn "
              f"in {check['load_ms']:.0f} ms in Chromium; screenshot: {shot}")
