"""The timeline report: one self-contained HTML page of a run (docs/tools.md, "The timeline
report"), from the Chrome trace `wspc run --trace` writes.

    data = read_trace("run.json")            # a WspError `run.json: error: ...` if it is not one
    html = render(data, "run.json")          # the page: the template, its CSS and JS inlined
    write("report.html", html)               # atomically (files.write_atomic)

`wspc report RUN.json -o report.html` is these three; `wspc run ... --report report.html`
renders the run's trace object (`Trace.to_chrome_trace()`) without writing the trace.

The page needs nothing but itself (no network, works from `file://`): the template
`templates/report.html.j2` inlines `report.css` and `report.js`, and the run's data as one JSON
object (timeline.py: columns of numbers and a string table). The per-kernel table and the
dispatchers' loads are the trace's `otherData.kernels` and `otherData.dispatchers`, the same
rows `--stats` prints (backends/profile.py); the page draws everything else from the events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Union

from ..diagnostics import Diagnostic, WspError
from ..files import FileError, read_bounded, write_atomic
from ..spans import Span
from .timeline import TraceShapeError, timeline

TEMPLATES = Path(__file__).resolve().parent / "templates"
# decision: a trace is read whole (json.loads needs it all); a million tasks with the model
# make about 700 MB of JSON, so 4 GiB is a file that is certainly not a trace of a run
MAX_TRACE_BYTES = 4 << 30


def read_trace(path: Union[str, Path]) -> Any:
    """The parsed Chrome trace in `path`; a file that cannot be read or is not JSON is a
    `WspError` at the file (`file: error: ...`)."""
    try:
        raw = read_bounded(path, MAX_TRACE_BYTES)
    except FileError as err:
        raise _at_file(err.where, f"cannot read the trace: {err.message}") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise _at_file(path, f"is larger than {MAX_TRACE_BYTES:,} bytes: not a trace wspc wrote")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as err:
        raise _at_file(path, f"is not JSON: {err}",
                     "write the trace with `wspc run FILE --trace RUN.json`") from None


def render(data: Any, source: str) -> str:
    """The HTML page of the trace object `data` (read from `source`, named in the page); a
    trace of the wrong shape is a `WspError` at `source`."""
    try:
        payload = timeline(data)
    except TraceShapeError as err:
        raise _at_file(source, str(err)) from None
    other = data.get("otherData", {}) if isinstance(data, dict) else {}
    other = other if isinstance(other, dict) else {}
    devices = [d for d in other.get("devices", ()) if isinstance(d, dict)]
    tables = [(f"device {d.get('device', i)}", d) for i, d in enumerate(devices)] or [("", other)]
    payload["tasks"] = sum(len(lane["start"]) for lane in payload["lanes"])
    env = _env()
    return env.get_template("report.html.j2").render(
        title=f"{other.get('schedule') or 'run'}: {Path(source).name}",
        source=source,
        summary=_summary(other),
        kernels=[(name, _rows(t.get("kernels"))) for name, t in tables],
        dispatchers=[(name, _dispatchers(t.get("dispatchers")), _int(t.get("total_cycles")))
                     for name, t in tables],
        css=(TEMPLATES / "report.css").read_text(encoding="utf-8"),
        js=(TEMPLATES / "report.js").read_text(encoding="utf-8"),
        data=_script_json(payload),
    )


def write(path: Union[str, Path], html: str) -> None:
    """Write the page atomically: a reader never sees half of it, a failure leaves none."""
    write_atomic(path, html)


def _at_file(where: Union[str, Path], message: str, help: Optional[str] = None) -> WspError:
    return WspError([Diagnostic(Span(str(where), 0, 0, 0, 0), "io", message, help)])


def _env():
    from ..backends.templates import template_env

    env = template_env(str(TEMPLATES))
    return env.overlay(autoescape=True)  # names and kernel names are text, not HTML


def _script_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no `</script>` and no `<!--` can end or open
    anything, because every `<` is written as its escape."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


SUMMARY = (("tasks", "task_count", "{:,}"), ("machine", "machine", "{}"),
           ("modelled", "total_cycles", "{:,} cycles"),
           ("critical path", "critical_path_cycles", "{:,} cycles"),
           ("simulated", "simulated_us", "{:,.1f} µs"), ("stolen", "stolen", "{:,} tasks"))


def _summary(other: dict) -> list[tuple[str, str]]:
    """The header's figures, as `--stats` names them (those the trace holds)."""
    out = [("schedule", str(other["schedule"]))] if other.get("schedule") else []
    for label, key, fmt in SUMMARY:
        v = other.get(key)
        if v is None and key == "task_count":
            v = other.get("tasks")
        if isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, str):
            try:
                out.append((label, fmt.format(v)))
            except (ValueError, TypeError):
                out.append((label, str(v)))
    util = other.get("utilisation")
    for unit, u in (util.items() if isinstance(util, dict) else ()):
        if isinstance(u, (int, float)) and not isinstance(u, bool):
            out.append((f"{unit} busy", f"{100.0 * u:.1f}%"))
    return out


def _int(x: Any) -> int:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x \
        and abs(x) < 1e18 else 0


def _dispatchers(rows: Any) -> list[dict[str, int]]:
    """`--json`'s dispatcher rows, each field an int (0 where a hand-edited trace lacks it)."""
    if not isinstance(rows, list):
        return []
    return [{k: _int(r.get(k)) for k in ("dispatcher", "tasks", "stolen", "busy_cycles")}
            for r in rows if isinstance(r, dict)]


def _rows(rows: Any) -> list[dict[str, Any]]:
    """The per-kernel rows (profile.ROW_FIELDS) with each cell as `--stats` prints it."""
    if not isinstance(rows, list):
        return []
    good = [r for r in rows if isinstance(r, dict) and "kernel" in r]

    def num(x) -> float:
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and x == x
        return float(x) if ok and abs(x) < 1e300 else 0.0

    def rate(x):
        return "-" if x is None else f"{num(x):.2f}"

    total = sum(num(r.get("real_ms")) for r in good)
    out = []
    for r in good:
        real = num(r.get("real_ms"))
        sim = r.get("sim_cycles")
        out.append({"kernel": str(r["kernel"]), "tasks": f"{_int(r.get('tasks')):,}",
                    "real_ms": f"{real:.3f}",
                    "share": f"{100.0 * real / total:.0f}" if total > 0 else "-",
                    "mean_us": f"{num(r.get('real_mean_us')):.2f}",
                    "sim": f"{_int(sim):,}" if sim is not None else "-",
                    "mb": f"{_int(r.get('bytes')) / 1e6:.2f}",
                    "gbs": rate(r.get("gb_per_s")), "gflops": rate(r.get("gflop_per_s"))})
    return out


__all__ = ["read_trace", "render", "write", "MAX_TRACE_BYTES"]
