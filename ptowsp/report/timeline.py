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
from typing import Any, Optional

import numpy as np

PS_PER_US = 1_000_000  # the trace's times are µs; the page's are integer picoseconds
_NAME = re.compile(r"^(.*)\[(-?\d+(?:, -?\d+)*)\]$")


class TraceShapeError(ValueError):
    """The object is not a Chrome trace of tasks: `str(err)` says what is wrong (the caller
    turns it into the file's diagnostic)."""


def timeline(data: Any) -> dict[str, Any]:
    """The report's data (see the module docstring) from a parsed Chrome trace object."""
    events = _events(data)
    meta = _metadata(events)
    tasks = [e for e in events if e.get("ph") == "X"]
    for i, e in enumerate(tasks):
        _check_task(i, e)
    counters = [e for e in events if e.get("ph") == "C" and _number(e.get("ts"))]
    # the real runs' times from their first task or counter, and the models' from theirs:
    # the real run starts after the enumeration began, the model at 0, and one origin would
    # squeeze both; the devices of an MPI run (one clock per kind) stay aligned
    first: dict[bool, float] = {}
    for e in tasks + counters:
        kind = meta.is_model(e.get("pid"))
        first[kind] = min(first.get(kind, e["ts"]), e["ts"])
    origins = {pid: first[meta.is_model(pid)] for pid in {e.get("pid") for e in tasks + counters}}
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


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) else 0.0


def _metadata(events: list[dict[str, Any]]) -> _Meta:
    m = _Meta()
    for e in events:
        if e.get("ph") != "M" or not isinstance(e.get("args"), dict):
            continue
        kind, args, pid, tid = e.get("name"), e["args"], e.get("pid"), e.get("tid")
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
        name = str(e.get("name", ""))
        m = _NAME.match(name)
        k = m.group(1) if m else name
        kernel.append(kernels.setdefault(k, len(kernels)))
        cs = [int(c) for c in m.group(2).split(", ")] if m else []
        ncoords.append(len(cs))
        coords.extend(cs)
        args = e.get("args")
        t = args.get("task") if isinstance(args, dict) else None
        task.append(t if isinstance(t, int) and not isinstance(t, bool) else -1)
    lane.update(kernel=kernel, task=task, nc=ncoords, coords=coords)


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
    sorted_start = [start_us[order] for order in orders]
    ends: dict[Any, list] = defaultdict(lambda: [None, None])
    for e in events:
        ph = e.get("ph")
        if ph not in ("s", "f") or "id" not in e or not _number(e.get("ts")):
            continue
        li = lane_keys.get((e.get("pid"), e.get("tid")))
        if li is None:
            continue
        t = _task_at(sorted_start[li], orders[li], start_us, dur_us, e["ts"])
        if t is not None:
            ends[(e.get("cat"), e["id"])][0 if ph == "s" else 1] = t
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    parent = list(range(len(lanes)))  # union-find over lanes' processes, joined by arrows

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    pid_lane: dict[Any, int] = {}
    for li, lane in enumerate(lanes):
        first = pid_lane.setdefault(lane["pid"], li)
        parent[find(li)] = find(first)
    for a, b in ends.values():
        if a is None or b is None or a == b:
            continue
        preds[b].append(a)
        succs[a].append(b)
        parent[find(int(where[a, 0]))] = find(int(where[b, 0]))
    best, via = _longest(preds, succs, dur_us)
    paths = []
    comp = np.array([find(int(li)) for li in where[:, 0].tolist()], np.int64)
    for c in sorted(set(comp.tolist())):
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


def _task_at(starts: np.ndarray, order: np.ndarray, start_us, dur_us, ts: float) -> Optional[int]:
    """The task of a lane whose slice holds `ts` (an arrow's end); among several (zero-length
    tasks at one moment), the one whose middle is nearest."""
    if not len(starts):
        return None
    eps = 1e-9 * max(1.0, abs(ts))  # the middle is start + dur / 2 in floats
    hi = int(np.searchsorted(starts, ts + eps, side="right"))
    best, gap = None, None
    for j in range(hi - 1, max(-1, hi - 9), -1):
        t = int(order[j])
        s, d = start_us[t], dur_us[t]
        if s - eps <= ts <= s + d + eps:
            g = abs(s + d / 2 - ts)
            if gap is None or g < gap:
                best, gap = t, g
    return best


def _longest(preds, succs, dur_us) -> tuple[np.ndarray, np.ndarray]:
    """Per task, the longest chain ending at it (its duration included) and its predecessor
    on that chain (-1: none), in topological order (Kahn). A predecessor among equals: the
    one listed first. Tasks on a cycle (not a trace wspc writes) keep their own duration."""
    n = len(preds)
    best = dur_us.astype(np.float64).copy()
    via = np.full(n, -1, np.int64)
    indeg = [len(p) for p in preds]
    ready = [i for i in range(n) if indeg[i] == 0]
    dur = dur_us.tolist()
    best_l = best.tolist()
    via_l = via.tolist()
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
