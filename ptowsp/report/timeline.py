"""A Chrome trace (what `wspc run --trace` writes) as the columns the HTML report draws.

    payload = timeline(trace_object)   # json-ready: lanes of columns, counters, critical paths

The trace is read as Perfetto would read it: a process per timeline ("host (real run)", the
cycle model's replay; under MPI one of each per device), a thread per lane (a worker, a core, a
comm engine), a complete ("X") event per task, a flow ("s" and "f" with one id) per dependency
arrow, a counter ("C") event per change of a channel's items in flight. Nothing here runs or
models anything.

Each lane becomes columns sorted by start (the page binary-searches the visible window):
start and duration in picoseconds from its process's first task (integers: exact for the
host's ns, within a picosecond for the model's cycles), a kernel index into one string table, the task index, and
the task's coordinates (a count per task and one flat list), parsed from the event's name
`kernel[c0, c1]` as backends/cpu/trace.py writes it. No object per task: 100,000 tasks are a
few megabytes of numbers.

The critical path is computed here, once: the chain of tasks joined by arrows whose durations
add up to the most (each timeline on its own; processes joined by arrows, the devices of an MPI
run, count as one timeline). An arrow's ends are placed as Perfetto places them: the task on
the arrow's lane whose slice holds the arrow's time (trace.py puts it at the slice's middle).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np

PS_PER_US = 1_000_000  # the trace's times are µs; the page's are integer picoseconds
MAX_SPAN_US = 2**53 / PS_PER_US  # about 2.5 hours: JavaScript's numbers hold the ps exactly
_NAME = re.compile(r"^(.*)\[(-?\d+(?:, -?\d+)*)\]$")


class TraceShapeError(ValueError):
    """The object is not a Chrome trace of tasks: `str(err)` says what is wrong (the caller
    turns it into the file's diagnostic)."""


def timeline(data: Any) -> dict[str, Any]:
    """The report's data (see the module docstring) from a parsed Chrome trace object."""
    events = _events(data)
    meta = _metadata(events)
    tasks = [e for e in events if e.get("ph") == "X"]
    _check_tasks(tasks)
    counters = [e for e in events if e.get("ph") == "C" and _number(e.get("ts"))
                and _key(e.get("pid")) is not None]
    # the real runs' times from their first task or counter, and the models' from theirs:
    # the real run starts after the enumeration began, the model at 0, and one origin would
    # squeeze both; the devices of an MPI run (one clock per kind) stay aligned
    first: dict[bool, float] = {}
    for e in tasks + counters:
        kind = meta.is_model(e.get("pid"))
        first[kind] = min(first.get(kind, e["ts"]), e["ts"])
    origins = {pid: first[meta.is_model(pid)] for pid in {e.get("pid") for e in tasks + counters}}
    last = max([e["ts"] + max(e["dur"], 0) - origins[e["pid"]] for e in tasks] +
               [e["ts"] - origins[e["pid"]] for e in counters], default=0.0)
    if last > MAX_SPAN_US:  # the page's times are integer ps, exact in a double up to 2^53
        raise TraceShapeError(f"spans {last / 3.6e9:,.1f} hours: the report draws at most "
                              f"{MAX_SPAN_US / 3.6e9:.1f} hours of a run")
    kernels: dict[str, int] = {}
    lane_of: dict[tuple, int] = {}
    lanes: list[dict[str, Any]] = []
    members: list[list[int]] = []  # per lane, indices into `tasks`
    # every thread the metadata names is a lane too: an idle worker or core is worth seeing
    keys = {(e["pid"], e["tid"]) for e in tasks} | set(meta.thread)
    for key in sorted(keys, key=meta.lane_order):
        lane_of[key] = len(lanes)
        lanes.append({"pid": key[0], "tid": key[1], "name": meta.thread_name(*key)})
        members.append([])
    for i, e in enumerate(tasks):
        members[lane_of[(e["pid"], e["tid"])]].append(i)
    start_us = np.array([e["ts"] for e in tasks], np.float64)
    dur_us = np.maximum(np.array([e["dur"] for e in tasks], np.float64), 0.0)
    where = np.zeros((len(tasks), 2), np.int64)  # per task: its lane, its index in the lane
    orders = []  # per lane, its tasks (indices into `tasks`) by start
    for li, (lane, idx) in enumerate(zip(lanes, members)):
        idx_a = np.array(idx, np.int64)
        order = idx_a[np.lexsort((dur_us[idx_a], start_us[idx_a]))]
        orders.append(order)
        where[order, 0] = li
        where[order, 1] = np.arange(len(order))
        _fill_lane(lane, [tasks[i] for i in order.tolist()], start_us[order], dur_us[order],
                   origins.get(lane["pid"], 0.0), kernels)
    groups = _groups(lanes, meta, tasks)
    paths = _critical_paths(events, len(tasks), lanes, orders, where, start_us, dur_us)
    series = _counters(counters, origins, meta, groups)
    for g in groups:
        g["origin_us"] = origins.get(g["pid"], 0.0)
        del g["pid"]
    return {
        "kernels": list(kernels),
        "groups": groups,
        "lanes": [{k: v for k, v in lane.items() if k not in ("pid", "tid")} for lane in lanes],
        "counters": series,
        "critical": paths,
    }


def _events(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):  # the JSON Array Format: events only
        events = data
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events = data["traceEvents"]
    else:
        raise TraceShapeError("is not a Chrome trace: it has no `traceEvents` list (write one "
                              "with `wspc run FILE --trace RUN.json`)")
    return [e for e in events if isinstance(e, dict)]


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x \
        and abs(x) < 1e15


def _check_tasks(tasks: list[dict[str, Any]]) -> None:
    """Every task event has a lane (pid, tid) and numeric times (`_check_task`); the usual
    case, a trace wspc wrote, is seen from the set of types each field holds."""
    def kinds(field):
        return {type(e.get(field)) for e in tasks}

    times, lanes = kinds("ts") | kinds("dur"), kinds("pid") | kinds("tid")
    if times <= {int, float} and lanes <= {int, str}:
        ts = np.array([e["ts"] for e in tasks] + [e["dur"] for e in tasks], np.float64)
        if np.all(np.abs(ts) < 1e15):  # also false for NaN
            return
    for i, e in enumerate(tasks):
        _check_task(i, e)


def _check_task(i: int, e: dict[str, Any]) -> None:
    """A task event has a lane (pid, tid) and numeric times: a hand-edited or foreign trace
    without them is the user's to fix, named by its position."""
    for field in ("ts", "dur"):
        if not _number(e.get(field)):
            raise TraceShapeError(f"task event {i} (`{str(e.get('name'))[:40]}`) has no numeric "
                                  f"`{field}`")
    for field in ("pid", "tid"):
        if not isinstance(e.get(field), (int, str)) or isinstance(e.get(field), bool):
            raise TraceShapeError(f"task event {i} (`{str(e.get('name'))[:40]}`) has no "
                                  f"`{field}`")


class _Meta:
    """Process and thread names and sort orders from the metadata ("M") events."""

    def __init__(self) -> None:
        self.process: dict[Any, str] = {}
        self.thread: dict[tuple, str] = {}
        self.psort: dict[Any, float] = {}
        self.tsort: dict[tuple, float] = {}

    def lane_order(self, key: tuple) -> tuple:
        pid, tid = key
        return (self.psort.get(pid, 0), str(pid) if isinstance(pid, str) else "", _num(pid),
                self.tsort.get(key, 0), _num(tid), str(tid))

    def thread_name(self, pid, tid) -> str:
        return self.thread.get((pid, tid), f"thread {tid}")

    def is_model(self, pid) -> bool:
        """Whether the process is a cycle model's replay (trace.py names it so)."""
        return "model" in self.process.get(pid, "")

    def process_name(self, pid) -> str:
        return self.process.get(pid, f"process {pid}")


def _key(x) -> Any:
    """A process or thread id as a dict key: an int or a string (anything else: None, and
    the event it belongs to is left out)."""
    return x if isinstance(x, (int, str)) and not isinstance(x, bool) else None


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) else 0.0


def _metadata(events: list[dict[str, Any]]) -> _Meta:
    m = _Meta()
    for e in events:
        if e.get("ph") != "M" or not isinstance(e.get("args"), dict):
            continue
        kind, args, pid, tid = e.get("name"), e["args"], _key(e.get("pid")), _key(e.get("tid"))
        if pid is None or (tid is None and kind in ("thread_name", "thread_sort_index")):
            continue
        if kind == "process_name":
            m.process[pid] = str(args.get("name"))
        elif kind == "thread_name":
            m.thread[(pid, tid)] = str(args.get("name"))
        elif kind == "process_sort_index" and _number(args.get("sort_index")):
            m.psort[pid] = args["sort_index"]
        elif kind == "thread_sort_index" and _number(args.get("sort_index")):
            m.tsort[(pid, tid)] = args["sort_index"]
    return m


def _fill_lane(lane: dict[str, Any], events: list[dict], start_us: np.ndarray,
               dur_us: np.ndarray, origin: float, kernels: dict[str, int]) -> None:
    """The lane's columns (its events sorted by start, then duration)."""
    lane["start"] = np.rint((start_us - origin) * PS_PER_US).astype(np.int64).tolist()
    lane["dur"] = np.rint(dur_us * PS_PER_US).astype(np.int64).tolist()
    kernel, task, ncoords, coords = [], [], [], []
    for e in events:
        k, cs = _split_name(str(e.get("name", "")))
        kernel.append(kernels.setdefault(k, len(kernels)))
        ncoords.append(len(cs))
        coords.extend(cs)
        args = e.get("args")
        t = args.get("task") if isinstance(args, dict) else None
        task.append(t if isinstance(t, int) and not isinstance(t, bool) else -1)
    lane.update(kernel=kernel, task=task, nc=ncoords, coords=coords)


def _split_name(name: str) -> tuple[str, list[int]]:
    """`mm[0, 3]` -> ("mm", [0, 3]); a name of another form is all kernel, no coordinates."""
    if name.endswith("]"):
        k, _, rest = name.partition("[")
        try:
            return k, [int(c) for c in rest[:-1].split(", ")]
        except ValueError:
            m = _NAME.match(name)  # a kernel name with a `[` of its own
            if m:
                return m.group(1), [int(c) for c in m.group(2).split(", ")]
    return name, []


def _groups(lanes: list[dict[str, Any]], meta: _Meta, tasks: list[dict]) -> list[dict[str, Any]]:
    """A group per process, in lane order, with its lanes and its clock: the model's cycles
    per ns, read from any task whose args carry both its modelled cycles and a duration."""
    groups: list[dict[str, Any]] = []
    index: dict[Any, int] = {}
    for li, lane in enumerate(lanes):
        pid = lane["pid"]
        if pid not in index:
            index[pid] = len(groups)
            groups.append({"name": meta.process_name(pid), "pid": pid, "lanes": [],
                           "ghz": None})
        lane["group"] = index[pid]
        groups[index[pid]]["lanes"].append(li)
    for e in tasks:
        g = groups[index[e["pid"]]]
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        cyc = args.get("sim_dur_cycles")
        if g["ghz"] is None and "model" in g["name"] and _number(cyc) and e["dur"] > 0 and cyc:
            g["ghz"] = cyc / (e["dur"] * 1000.0)
    return groups


def _counters(counters: list[dict], origins: dict, meta: _Meta,
              groups: list[dict]) -> list[dict[str, Any]]:
    """A series per (process, counter name): times in ps from the origin, the first numeric
    argument's value (trace.py writes one: the channel's items in flight)."""
    series: dict[tuple, list] = defaultdict(list)
    for e in counters:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        value = next((v for v in args.values() if _number(v)), None)
        if value is not None:
            series[(e.get("pid"), str(e.get("name")))].append((e["ts"], value))
    group_of = {g["pid"]: i for i, g in enumerate(groups)}
    out = []
    for (pid, name), points in series.items():
        if pid not in group_of:  # a process without tasks: its counters get a group of their own
            group_of[pid] = len(groups)
            groups.append({"name": meta.process_name(pid), "pid": pid, "lanes": [], "ghz": None})
        points.sort(key=lambda p: p[0])
        out.append({"group": group_of[pid], "name": name,
                    "t": [round((t - origins[pid]) * PS_PER_US) for t, _ in points],
                    "v": [v for _, v in points]})
    out.sort(key=lambda c: (c["group"], c["name"]))
    return out


def _critical_paths(events, n, lanes, orders, where, start_us, dur_us) -> list[dict]:
    """Per timeline (processes joined by arrows), its longest chain of tasks by summed duration
    along the arrows: [{"lane": [...], "index": [...], "us": length}], the chain in order."""
    if not n:
        return []
    lane_keys = {(lane["pid"], lane["tid"]): li for li, lane in enumerate(lanes)}
    # an arrow's two ends: columns built with comprehensions (a loop of appends over the
    # events costs seconds at 100,000 tasks), an end without its lane or time dropped
    flows = [e for e in events if e.get("ph") in ("s", "f") and "id" in e]
    lane_a = np.array([lane_keys.get((_key(e.get("pid")), _key(e.get("tid"))), -1)
                       for e in flows], np.int64)
    ts_a = np.array([t if type(t) in (int, float) else np.nan
                     for t in (e.get("ts") for e in flows)], np.float64)
    side = np.array([e["ph"] == "f" for e in flows], np.int64)
    _, flow = np.unique(np.array([f"{e.get('cat')}\x00{e['id']}" for e in flows], object),
                        return_inverse=True) if flows else (None, np.zeros(0, np.int64))
    flow = np.asarray(flow, np.int64).reshape(-1)
    task_a = np.full(len(flows), -1, np.int64)
    for li in np.unique(lane_a[lane_a >= 0]).tolist():
        sel = np.nonzero((lane_a == li) & ~np.isnan(ts_a))[0]
        task_a[sel] = _tasks_at(orders[li], start_us, dur_us, ts_a[sel])
    pair = np.full((int(flow.max(initial=-1)) + 1, 2), -1, np.int64)  # per flow: its two ends
    pair[flow, side] = task_a
    pair = pair[(pair[:, 0] >= 0) & (pair[:, 1] >= 0) & (pair[:, 0] != pair[:, 1])]
    # timelines: a lane's process, and processes joined by an arrow (the devices under MPI)
    parent = list(range(len(lanes)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    pid_lane: dict[Any, int] = {}
    for li, lane in enumerate(lanes):
        parent[find(li)] = find(pid_lane.setdefault(lane["pid"], li))
    joined = np.unique(where[pair, 0], axis=0) if len(pair) else np.zeros((0, 2), np.int64)
    for a, b in joined.tolist():
        parent[find(a)] = find(b)
    best, via = _longest(n, pair, dur_us)
    roots = np.array([find(li) for li in range(len(lanes))], np.int64)
    comp = roots[where[:, 0]]
    paths = []
    for c in np.unique(comp).tolist():
        mine = np.nonzero(comp == c)[0]
        # the end of the longest chain; among equals, the task listed first in the trace
        end = int(mine[np.argmax(best[mine])])
        chain = [end]
        while via[chain[-1]] >= 0:
            chain.append(int(via[chain[-1]]))
        chain.reverse()
        paths.append({"lane": where[chain, 0].tolist(), "index": where[chain, 1].tolist(),
                      "us": float(best[end])})
    return paths


def _tasks_at(order: np.ndarray, start_us, dur_us, ts: np.ndarray) -> np.ndarray:
    """For each time in `ts` (an arrow's end on one lane whose tasks are `order`, by start),
    the task whose slice holds it (-1: none); among several (zero-length tasks at one
    moment), the one whose middle is nearest. Looks at the 4 latest tasks starting by then."""
    out = np.full(len(ts), -1, np.int64)
    if not len(order):
        return out
    starts, durs = start_us[order], dur_us[order]
    eps = 1e-9 * np.maximum(1.0, np.abs(ts))  # the middle is start + dur / 2 in floats
    hi = np.searchsorted(starts, ts + eps, side="right")
    gap = np.full(len(ts), np.inf)
    for back in range(1, 5):
        j = hi - back
        ok = j >= 0
        jj = np.where(ok, j, 0)
        s, d = starts[jj], durs[jj]
        ok &= (s - eps <= ts) & (ts <= s + d + eps)
        g = np.abs(s + d / 2 - ts)
        better = ok & (g < gap)
        out[better], gap[better] = order[jj[better]], g[better]
    return out


def _longest(n: int, pairs: np.ndarray, dur_us) -> tuple[np.ndarray, np.ndarray]:
    """Per task, the longest chain ending at it (its duration included) along `pairs`
    (source, target), and its predecessor on that chain (-1: none), in topological order
    (Kahn). A predecessor among equals: the one listed first. Tasks on a cycle (not a trace
    wspc writes) keep their own duration."""
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))] if len(pairs) else pairs
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs.tolist():
        succs[a].append(b)
    indeg = np.bincount(pairs[:, 1], minlength=n).tolist() if len(pairs) else [0] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    dur = dur_us.tolist()
    best_l = list(dur)
    via_l = [-1] * n
    while ready:
        nxt = []
        for u in ready:
            bu = best_l[u]
            for v in succs[u]:
                cand = bu + dur[v]
                if cand > best_l[v] or (cand == best_l[v] and via_l[v] >= 0 and u < via_l[v]):
                    best_l[v], via_l[v] = cand, u
                indeg[v] -= 1
                if indeg[v] == 0:
                    nxt.append(v)
        ready = nxt
    return np.array(best_l), np.array(via_l, np.int64)
