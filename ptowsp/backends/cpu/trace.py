"""Traces of a cpu_sim run: the real run on host threads and its replay on the cycle model,
as Chrome trace JSON (Perfetto, chrome://tracing) and as a text summary.

The C runtime records one `wsp_trace_event` per task (wsp_trace_read) and, with the cycle model
on, one `wsp_simresult` per task (wsp_sim_read), both in enumeration order. They arrive here as
NumPy structured arrays with exactly the C layouts (EVENT_DTYPE, SIMRESULT_DTYPE; `from_cdata`
copies a cffi buffer into one), so a million tasks cost one memcpy, not a million cdata reads.
The dependency edges (wsp_trace_links: the runtime's, its batches, the model's) arrive as
(n, 2) int64 arrays of trace indices and become the Chrome trace's flow arrows. On a mesh, an
edge from a task of device a to a collective's tile task of device b that reads its tile is a
"tile" arrow instead (`TILE`, docs/distributed.md "Traces"); under MPI each rank's trace
carries the ends of its arrows (`otherData.tile_ends`) and `merge_devices` joins them across
the ranks' processes.

    tr = Trace(events, kernel_names, machine, sim=results, schedule="main",
               summary=summary_dict(c_summary), dispatchers=dispatcher_stats(c_disp, n),
               work=[(bytes, flops), ...], edges=e, batches=b, model_edges=me)
    tr.write("run.json"); print(tr.summary()); rows = tr.kernel_table()

Nothing here runs or models anything: the numbers are the runtime's and the model's.
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ...files import write_atomic
from ..profile import kernel_rows, table_lines

if TYPE_CHECKING:
    from ..machine import Machine

MAX_COORDS = 8  # WSP_MAX_COORDS

# struct wsp_trace_event: int32 x6, int64 coords[8], int64 x2 (104 bytes, checked against cffi
# by tests/test_trace.py).
EVENT_DTYPE = np.dtype({
    "names": ["kernel", "stmt", "dispatcher", "stream", "worker", "ncoords", "coords",
              "start_ns", "end_ns"],
    "formats": ["<i4", "<i4", "<i4", "<i4", "<i4", "<i4", ("<i8", (MAX_COORDS,)), "<i8", "<i8"],
    "offsets": [0, 4, 8, 12, 16, 20, 24, 88, 96],
    "itemsize": 104,
})

# struct wsp_simresult: int64 x5, int32 x4 (56 bytes).
SIMRESULT_DTYPE = np.dtype({
    "names": ["enumerated", "ready", "issue", "start", "finish", "core", "unit", "dispatcher",
              "group"],
    "formats": ["<i8"] * 5 + ["<i4"] * 4,
    "offsets": [0, 8, 16, 24, 32, 40, 44, 48, 52],
    "itemsize": 56,
})

UNIT_NAMES = ("vector", "cube", "comm")  # WSP_UNIT_VECTOR, _CUBE, _COMM (a device's engine)
PID_REAL, PID_SIM = 1, 2
FLOW = "dependency"  # the name and category of every flow (arrow) event of one device
TILE = "tile"  # the category of a flow carrying a tile from one device to another
NO_LINKS = np.zeros((0, 2), np.int64)
SUMMARY_FIELDS = ("tasks", "total_cycles", "critical_path", "serial_cycles", "stolen", "groups")


def from_cdata(ffi, ptr, n: int, dtype: np.dtype) -> np.ndarray:
    """A NumPy copy of `n` C records at `ptr` (a cffi pointer) with layout `dtype`."""
    if n <= 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(ffi.buffer(ptr, n * dtype.itemsize), dtype=dtype, count=n).copy()


def summary_dict(s) -> dict[str, Any]:
    """A `wsp_simsummary` (cdata, or anything with its attributes) as the dict Trace takes."""
    out = {name: int(getattr(s, name)) for name in SUMMARY_FIELDS}
    out["work"] = [int(s.work[0]), int(s.work[1])]
    out["comm_cycles"] = int(getattr(s, "comm_cycles", 0))  # the comm engines' (comm.py)
    return out


def dispatcher_stats(d, n: int) -> list[dict[str, int]]:
    """`n` `wsp_simdisp` records (a cdata array) as the dicts Trace takes."""
    return [{"tasks": int(d[i].tasks), "stolen": int(d[i].stolen),
             "busy_cycles": int(d[i].busy_cycles)} for i in range(n)]


class Trace:
    """One run's tasks: real times per task, and the cycle model's times when it ran."""

    def __init__(self, events: np.ndarray, kernel_names: Sequence[str],
                 machine: Optional["Machine"] = None, *, sim: Optional[np.ndarray] = None,
                 schedule: str = "", summary: Optional[dict[str, Any]] = None,
                 dispatchers: Optional[Sequence[dict[str, int]]] = None,
                 notes: Optional[np.ndarray] = None, channels: Sequence[str] = (),
                 work: Sequence[tuple[int, int]] = (), edges: Optional[np.ndarray] = None,
                 batches: Optional[np.ndarray] = None, model_edges: Optional[np.ndarray] = None,
                 dropped_edges: int = 0, devices: int = 1,
                 comm_kernels: Sequence[bool] = (), task_devices: Optional[np.ndarray] = None,
                 rank_device: Optional[int] = None,
                 pipes: Sequence[Optional[dict[str, int]]] = ()):
        events = np.asarray(events)
        if events.dtype != EVENT_DTYPE:
            raise ValueError(f"events must have EVENT_DTYPE, not {events.dtype}")
        if sim is not None:
            sim = np.asarray(sim)
            if sim.dtype != SIMRESULT_DTYPE:
                raise ValueError(f"sim results must have SIMRESULT_DTYPE, not {sim.dtype}")
            if len(sim) != len(events):
                raise ValueError(f"{len(sim)} sim results for {len(events)} events: both are "
                                 "one per enumerated task")
            if machine is None:
                raise ValueError("sim results need the machine (cycles -> time)")
        self.events = events
        self.sim = sim
        self.kernel_names = list(kernel_names)
        self.machine = machine
        self.schedule = schedule
        self.summary_data = dict(summary) if summary else (_derive_summary(sim) if sim is not None
                                                          else {})
        self.dispatchers = [dict(d) for d in dispatchers or ()]
        # a mesh: each device a whole NPU (its cores and a comm engine), tasks on the device of
        # their dispatcher (wsp_simtask: devices numbered dispatcher / per-device count)
        self.devices = max(1, int(devices))
        self._vtid0: Optional[int] = None
        # CSP: (task, tag, item) rows from wsp_note_read; tag 2c: the task sends item `item`
        # of channel `channels[c]`, tag 2c + 1: the task holds it (a task of its consume body)
        self.notes = np.zeros((0, 3), np.int64) if notes is None else np.asarray(notes, np.int64)
        self.channels = list(channels)
        # per kernel, what one task moves and computes: (bytes, flops) (cost.moved_bytes,
        # cost.kernel_flops)
        self.work = [tuple(w) for w in work]
        # per kernel, the cycles one task keeps each pipe busy in the model (cost.kernel_pipes;
        # None: no pipeline), empty without a machine
        self.pipes = list(pipes)
        # (pred, succ) trace indices: the runtime's edges between its tasks, each named by its
        # first task; (first, count): its tasks standing for several (batches); the model's edges
        self.edges = _links(edges)
        self.batches = _links(batches)
        self.model_edges = _links(model_edges)
        self.dropped_edges = int(dropped_edges)
        # a mesh: per kernel, whether it is a collective's tile kernel; per task, its device
        # (-1: not known; of a send task under MPI, the device of the task it sends to); the
        # device this process runs under MPI (None: every device in this process, each task
        # on the workers w with w % devices == its device)
        self.comm_kernels = np.asarray(list(comm_kernels) or [False], bool)
        self.task_devices = (np.full(len(events), -1, np.int64) if task_devices is None
                             else np.asarray(task_devices, np.int64))
        self.rank_device = rank_device

    def __len__(self) -> int:
        return len(self.events)

    # -- Chrome trace -------------------------------------------------------------------------

    def to_chrome_trace(self) -> dict[str, Any]:
        """The trace as a Chrome trace object: process 1 the real run (a thread per worker),
        process 2 the cycle model (a thread per core); one complete ("X") event per task and
        track, times in µs, task details in each event's args; a flow (an "s" and an "f" event
        with one id, drawn as an arrow) per dependency edge on each track."""
        with _no_gc():
            names = self._task_names()
            args = self._task_args()
            out = self._metadata()
            out.extend(self._real_events(names, args))
            out.extend(self._counter_events("real"))
            real_flows = self._real_flows(1)
            out.extend(real_flows)
            if self.sim is not None:
                out.extend(self._sim_events(names, args))
                out.extend(self._counter_events("sim"))
                out.extend(self._sim_flows(1 + len(real_flows) // 2))
        other: dict[str, Any] = {"schedule": self.schedule, "tasks": len(self)}
        if self.rank_device is not None:
            other["tile_ends"] = self._tile_ends()
        if self.dropped_edges:
            other["edges_not_recorded"] = self.dropped_edges
        if self.machine is not None:
            other["machine"] = self.machine.name
        other.update(self.summary_data)
        # what `--stats` prints beside the timelines, for `wspc report` (ptowsp/report)
        other.setdefault("kernels", self.kernel_table())
        if self.dispatchers:
            other.setdefault("dispatchers", [dict(d, dispatcher=i)
                                             for i, d in enumerate(self.dispatchers)])
        return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": other}

    def to_json(self) -> str:
        """The Chrome trace as JSON text (what `write` writes)."""
        # decision: json.dumps, not json.dump: dumps uses the C encoder in one shot, dump the
        # pure-Python iterator (several times slower on a million events)
        return json.dumps(self.to_chrome_trace(), separators=(",", ":"))

    def write(self, path: str) -> None:
        """Write the Chrome trace JSON to `path` atomically (a reader never sees half a file)."""
        write_atomic(path, self.to_json())

    def _task_names(self) -> list[str]:
        """`kernel[c0, c1]` per task (the kernel name alone when it has no coordinates).

        Formatted a coordinate count at a time with column lists (str.format over zip): per-row
        NumPy access would cost seconds on a million tasks."""
        kn = self.kernel_names
        kernels = self.events["kernel"]
        known = (kernels >= 0) & (kernels < len(kn))
        table = np.array(kn + ["?"], dtype=object)
        base = table[np.where(known, kernels, len(kn))].tolist()
        for i in np.nonzero(~known)[0].tolist():
            base[i] = f"kernel{int(kernels[i])}"
        ncoords = np.clip(self.events["ncoords"], 0, MAX_COORDS)
        coords = self.events["coords"]
        counts = np.unique(ncoords).tolist()
        if len(counts) == 1 and counts[0] > 0:  # the usual case: one loop nest's depth
            fmt = _name_format(counts[0])
            return list(map(fmt.format, base, *(coords[:, j].tolist() for j in range(counts[0]))))
        for nc in counts:
            if nc == 0:
                continue
            idx = np.nonzero(ncoords == nc)[0]
            sub = [base[i] for i in idx.tolist()]
            cols = (coords[idx, j].tolist() for j in range(nc))
            for i, name in zip(idx.tolist(), map(_name_format(nc).format, sub, *cols)):
                base[i] = name
        return base

    def _task_args(self) -> list[dict[str, Any]]:
        """Each task's details, one dict shared by its real and its simulated event.

        `dispatcher` and `stream` are -1 for none, as in wsp_trace_event; `stolen` and `group`
        appear only where they say something, and real times only for tasks that ran."""
        ev = self.events
        cols = [np.arange(len(ev)).tolist()]
        cols += [ev[f].tolist() for f in ("dispatcher", "stream", "worker", "start_ns")]
        cols.append((ev["end_ns"] - ev["start_ns"]).tolist())
        if self.sim is None:
            out = [{"task": i, "dispatcher": d, "stream": s, "worker": w, "real_start_ns": t0,
                    "real_dur_ns": dt} for i, d, s, w, t0, dt in zip(*cols)]
        else:
            sim = self.sim
            cols += [sim["start"].tolist(), (sim["finish"] - sim["start"]).tolist(),
                     sim["dispatcher"].tolist()]
            out = [{"task": i, "dispatcher": d, "stream": s, "worker": w, "real_start_ns": t0,
                    "real_dur_ns": dt, "sim_start_cycles": c0, "sim_dur_cycles": dc,
                    "issued_by": by} for i, d, s, w, t0, dt, c0, dc, by in zip(*cols)]
            self._mark_sim_extras(out)
        for i in np.nonzero(ev["worker"] < 0)[0].tolist():
            del out[i]["real_start_ns"], out[i]["real_dur_ns"]
        return out

    def _mark_sim_extras(self, out: list[dict[str, Any]]) -> None:
        """`stolen` and `group`, set only on the (usually few) tasks they apply to."""
        assigned, issuer = self.events["dispatcher"], self.sim["dispatcher"]
        if self.devices > 1:  # the model numbers dispatchers device by device
            issuer = issuer - self._sim_device() * max(1, len(self.dispatchers) // self.devices)
        group = self.sim["group"]
        # decision: only a task with an assigned dispatcher can be stolen; without `.dispatch`
        # (assigned -1) any dispatcher may issue it
        for i in np.nonzero((assigned >= 0) & (issuer != assigned))[0].tolist():
            out[i]["stolen"] = True
        grouped = np.nonzero(group >= 0)[0]
        for i, g in zip(grouped.tolist(), group[grouped].tolist()):
            out[i]["group"] = g

    def _metadata(self) -> list[dict[str, Any]]:
        """Process and thread names and orders: the real run above the model."""
        out = [_meta(PID_REAL, None, "process_name", name="host (real run)"),
               _meta(PID_REAL, None, "process_sort_index", sort_index=PID_REAL)]
        for w in np.unique(self.events["worker"]).tolist():
            if w >= 0:
                out.append(_meta(PID_REAL, w + 1, "thread_name", name=f"worker {w}"))
                out.append(_meta(PID_REAL, w + 1, "thread_sort_index", sort_index=w + 1))
        if self.sim is None:
            return out
        out.append(_meta(PID_SIM, None, "process_name", name=f"{self.machine.name} (cycle model)"))
        out.append(_meta(PID_SIM, None, "process_sort_index", sort_index=PID_SIM))
        for dev, unit, core in self._sim_cores():
            tid = self._sim_tid(unit, core, dev)
            name = "comm engine" if unit == 2 else f"{_unit_name(unit)} {core}"
            if self.devices > 1:
                name = f"device {dev} {name}"
            out.append(_meta(PID_SIM, tid, "thread_name", name=name))
            out.append(_meta(PID_SIM, tid, "thread_sort_index", sort_index=tid))
        return out

    def _sim_cores(self) -> list[tuple[int, int, int]]:
        """Every (device, unit, core) of the machine (an idle core is a fact worth seeing),
        plus any core a result names beyond them; a comm engine where messages ran."""
        cores = set()
        for d in range(self.devices):
            cores |= {(d, 1, c) for c in range(self.machine.cube_cores)}
            cores |= {(d, 0, c) for c in range(self.machine.vector_cores)}
        if len(self.sim):
            # one int64 key per (device, unit, core): np.unique(axis=0) on pairs takes seconds
            keys = np.unique(self._sim_device() << 40 | self.sim["unit"].astype(np.int64) << 32
                             | self.sim["core"])
            cores |= {(k >> 40, (k >> 32) & 0xFF, k & 0xFFFFFFFF) for k in keys.tolist()}
        return sorted(cores, key=lambda duc: self._sim_tid(duc[1], duc[2], duc[0]))

    def _sim_device(self) -> np.ndarray:
        """Each task's device: its dispatcher's (the model numbers them device by device)."""
        if self.devices == 1:
            return np.zeros(len(self.sim), np.int64)
        per = max(1, len(self.dispatchers) // self.devices)
        return self.sim["dispatcher"].astype(np.int64) // per

    def _sim_tid(self, unit: int, core: int, device: int = 0) -> int:
        """Per device: cube cores first (tids 1..), then vector cores, then its comm engine."""
        base = device * self._device_tids
        if unit == 2:
            return base + self._comm_tid
        return base + (1 + core if unit == 1 else self._vector_tid0 + core)

    def _sim_tids(self) -> np.ndarray:
        """`_sim_tid` of every task, as an array."""
        sim = self.sim
        core = sim["core"].astype(np.int64)
        tid = np.where(sim["unit"] == 1, 1 + core, np.where(
            sim["unit"] == 2, self._comm_tid, self._vector_tid0 + core))
        return tid + self._sim_device() * self._device_tids if self.devices > 1 else tid

    @property
    def _comm_tid(self) -> int:
        """The comm engine's tid within a device: after every vector core, named or used."""
        vec = self.sim["core"][self.sim["unit"] == 0]
        return self._vector_tid0 + max(self.machine.vector_cores, int(vec.max(initial=-1)) + 1)

    @property
    def _device_tids(self) -> int:
        return self._comm_tid

    @property
    def _vector_tid0(self) -> int:
        """The first vector core's tid: after every cube core, named or used."""
        if self._vtid0 is None:
            cube = self.sim["core"][self.sim["unit"] == 1]
            self._vtid0 = 1 + max(self.machine.cube_cores, int(cube.max(initial=-1)) + 1)
        return self._vtid0

    def _real_events(self, names: list[str], args: list[dict]) -> list[dict[str, Any]]:
        """One complete event per task that ran (worker >= 0), at its host times."""
        ev = self.events
        ran = np.nonzero(ev["worker"] >= 0)[0]
        if len(ran) != len(ev):
            keep = ran.tolist()
            names, args = [names[i] for i in keep], [args[i] for i in keep]
            ev = ev[ran]
        ts = (ev["start_ns"] / 1000.0).tolist()
        dur = (np.maximum(ev["end_ns"] - ev["start_ns"], 0) / 1000.0).tolist()
        tid = (ev["worker"].astype(np.int64) + 1).tolist()
        return [{"name": n, "cat": "task", "ph": "X", "pid": PID_REAL, "tid": w, "ts": t0,
                 "dur": d, "args": a} for n, w, t0, d, a in zip(names, tid, ts, dur, args)]

    def _sim_events(self, names: list[str], args: list[dict]) -> list[dict[str, Any]]:
        """One complete event per task on its modelled core, cycles converted to µs."""
        sim = self.sim
        per_us = self.machine.clock_ghz * 1000.0  # cycles per µs
        ts = (sim["start"] / per_us).tolist()
        dur = (np.maximum(sim["finish"] - sim["start"], 0) / per_us).tolist()
        tid = self._sim_tids().tolist()
        return [{"name": n, "cat": "task", "ph": "X", "pid": PID_SIM, "tid": c, "ts": t0,
                 "dur": d, "args": a} for n, c, t0, d, a in zip(names, tid, ts, dur, args)]

    # -- dependency arrows -------------------------------------------------------------------

    def _real_flows(self, first_id: int) -> list[dict[str, Any]]:
        """A flow per runtime edge between two tasks that ran: from the predecessor's task that
        finished last (a batch's) to the successor's task that started first. An edge into a
        collective's tile task from a task of another device (in process) is a `TILE` flow
        named for that device: the tile moving between them."""
        src, dst = self._ran_edges()
        if not len(src):
            return []
        ev = self.events
        ts = ev["start_ns"] / 1000.0
        mid = ts + np.maximum(ev["end_ns"] - ev["start_ns"], 0) / 1000.0 / 2
        tid = ev["worker"].astype(np.int64) + 1
        tile = np.zeros(len(src), bool)
        if self.rank_device is None and self.devices > 1:
            device = self._real_devices()
            tile = self._is_comm(dst) & (device[src] >= 0) & (device[src] != device[dst])
        out = _flows(first_id, PID_REAL, tid[src[~tile]], mid[src[~tile]], tid[dst[~tile]],
                     mid[dst[~tile]])
        if not tile.any():
            return out
        s, d = src[tile], dst[tile]
        return out + _flows(first_id + len(out) // 2, PID_REAL, tid[s], mid[s], tid[d], mid[d],
                            names=[f"tile from device {a}" for a in device[s].tolist()],
                            cat=TILE)

    def _is_comm(self, tasks: np.ndarray) -> np.ndarray:
        """Whether each of `tasks` (trace indices) is a tile task of a collective."""
        k = self.events["kernel"][tasks]
        known = (k >= 0) & (k < len(self.comm_kernels))
        return known & self.comm_kernels[np.where(known, k, 0)]

    def _real_devices(self) -> np.ndarray:
        """Each task's device in an in-process mesh run: the one the lowering gave it where
        known, else its worker's (device d's tasks run on the workers w % devices == d)."""
        known = self.task_devices >= 0
        by_worker = np.where(self.events["worker"] >= 0, self.events["worker"] % self.devices, -1)
        return np.where(known, self.task_devices, by_worker)

    def _tile_ends(self) -> dict[str, list]:
        """This MPI rank's ends of the tile flows, for `merge_devices`: `from` a row [stmt,
        device it goes to, tid, ts, coords...] per edge from a task that ran here into a send
        task (the task that produced the tile to the send of it); `to` a row [stmt, tid, ts,
        coords...] per tile task of this device's collectives that ran. A task is its statement
        and coordinates in every rank (each rank enumerates the whole program)."""
        ev, me = self.events, self.rank_device
        ran = ev["worker"] >= 0
        ts = ev["start_ns"] / 1000.0
        mid = (ts + np.maximum(ev["end_ns"] - ev["start_ns"], 0) / 1000.0 / 2).tolist()
        tid = (ev["worker"].astype(np.int64) + 1).tolist()

        def coords(i: int) -> list:
            return ev["coords"][i][:max(0, min(int(ev["ncoords"][i]), MAX_COORDS))].tolist()

        comm = self._is_comm(np.arange(len(ev)))
        src, dst = self._ran_edges()
        sent = comm[dst] & (self.task_devices[dst] >= 0) & (self.task_devices[dst] != me)
        out_from = [[int(ev["stmt"][d]), int(self.task_devices[d]), tid[s], mid[s], *coords(d)]
                    for s, d in zip(src[sent].tolist(), dst[sent].tolist())]
        mine = np.nonzero(comm & ran & (self.task_devices == me))[0].tolist()
        out_to = [[int(ev["stmt"][i]), tid[i], mid[i], *coords(i)] for i in mine]
        return {"from": out_from, "to": out_to}

    def _ran_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(sources, destinations): the runtime's edges between tasks that ran, each end a
        task of a batch (the predecessor's that finished last, the successor's that started
        first)."""
        ev = self.events
        n = len(ev)
        e = self.edges
        if not len(e) or not n:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        ran = ev["worker"] >= 0
        last, first = np.arange(n), np.arange(n)
        for f, c in self.batches.tolist():
            seg = slice(f, min(f + c, n))
            if f < n and ran[seg].any():
                last[f] = f + int(np.argmax(np.where(ran[seg], ev["end_ns"][seg], -1)))
                first[f] = f + int(np.argmin(np.where(ran[seg], ev["start_ns"][seg],
                                                      np.iinfo(np.int64).max)))
        e = e[(e[:, 0] >= 0) & (e[:, 0] < n) & (e[:, 1] >= 0) & (e[:, 1] < n)]
        src, dst = last[e[:, 0]], first[e[:, 1]]
        keep = ran[src] & ran[dst]
        return src[keep], dst[keep]

    def _sim_flows(self, first_id: int) -> list[dict[str, Any]]:
        """A flow per edge of the cycle model's task graph, between the tasks' modelled times."""
        sim, e = self.sim, self.model_edges
        n = len(sim)
        e = e[(e[:, 0] >= 0) & (e[:, 0] < n) & (e[:, 1] >= 0) & (e[:, 1] < n)]
        if not len(e):
            return []
        per_us = self.machine.clock_ghz * 1000.0
        ts = sim["start"] / per_us
        mid = ts + np.maximum(sim["finish"] - sim["start"], 0) / per_us / 2
        tid = self._sim_tids()
        src, dst = e[:, 0], e[:, 1]
        return _flows(first_id, PID_SIM, tid[src], mid[src], tid[dst], mid[dst])

    # -- per kernel ---------------------------------------------------------------------------

    def kernel_table(self) -> list[dict[str, Any]]:
        """Per kernel: tasks, real time (total, mean), simulated cycles, bytes moved, flops and
        the rates they make (`profile.ROW_FIELDS`), the largest real time first."""
        ev = self.events
        sim = None if self.sim is None else self.sim["finish"] - self.sim["start"]
        return kernel_rows(self.kernel_names, ev["kernel"], ev["end_ns"] - ev["start_ns"],
                           ev["worker"] >= 0, sim, self.work, self.pipes)

    # -- channel occupancy (CSP) --------------------------------------------------------------

    def channel_occupancy(self, clock: str = "real") -> dict[str, list[tuple[float, int]]]:
        """Per channel, the number of items in flight over time: [(time, items), ...] at every
        change, times in ns (`clock` "real") or cycles ("sim").

        Item k of a channel is in flight from the start of the task that sends it until the
        last of its send task and its consume body's tasks has finished (its slot is free
        again). A release and a send at the same moment count as the release first. Items of
        successive runs of a pipe are told apart by enumeration order (a consume body's task
        holds the latest item k sent)."""
        if clock == "real":
            start, end, ran = self.events["start_ns"], self.events["end_ns"], self.events["worker"] >= 0
        else:
            if self.sim is None:
                return {}
            start, end = self.sim["start"], self.sim["finish"]
            ran = np.ones(len(start), bool)
        spans: dict[int, dict[tuple[int, int], list]] = {}
        latest: dict[tuple[int, int], list] = {}
        for task, tag, item in self.notes.tolist():
            c = tag >> 1
            if not ran[task]:
                continue
            if tag & 1 == 0:
                span = [int(start[task]), int(end[task])]
                latest[(c, item)] = span
                spans.setdefault(c, {})[(len(spans.get(c, {})), item)] = span
            elif (c, item) in latest:
                span = latest[(c, item)]
                span[1] = max(span[1], int(end[task]))
        out = {}
        for c, items in spans.items():
            edges = sorted([(t1, 0) for _, t1 in items.values()] +
                           [(t0, 1) for t0, _ in items.values()])  # releases first at a tie
            n, series = 0, []
            for t, up in edges:
                n += 1 if up else -1
                if series and series[-1][0] == t:
                    series[-1] = (t, n)
                else:
                    series.append((t, n))
            name = self.channels[c] if c < len(self.channels) else f"channel{c}"
            out[name] = series
        return out

    def _counter_events(self, clock: str) -> list[dict[str, Any]]:
        """Chrome counter ("C") events: a track per channel with its items in flight."""
        pid, scale = (PID_REAL, 1000.0) if clock == "real" else (
            PID_SIM, self.machine.clock_ghz * 1000.0)
        return [{"name": f"channel {name}", "ph": "C", "pid": pid, "ts": t / scale,
                 "args": {"items in flight": n}}
                for name, series in self.channel_occupancy(clock).items() for t, n in series]

    # -- text summary -------------------------------------------------------------------------

    def summary(self) -> str:
        """A readable account: the real run, the modelled makespan, per-unit utilisation and
        each dispatcher's load."""
        lines = [self._title()]
        lines += self._real_lines()
        if self.summary_data and self.machine is not None:
            lines += self._sim_lines()
        if self.dispatchers:
            lines += self._dispatcher_lines()
        table = table_lines(self.kernel_table(), "    ")
        if table:
            lines += ["  per kernel, by real time:"] + table
        return "\n".join(lines)

    def _title(self) -> str:
        where = f" on {self.machine.name}" if self.machine is not None else ""
        sched = f"schedule `{self.schedule}`" if self.schedule else "trace"
        return f"{sched}{where}: {len(self)} tasks"

    def _real_lines(self) -> list[str]:
        ran = self.events[self.events["worker"] >= 0]
        if not len(ran):
            return ["  real run        no task ran"]
        span_us = (int(ran["end_ns"].max()) - int(ran["start_ns"].min())) / 1000.0
        workers = len(np.unique(ran["worker"]))
        skipped = len(self) - len(ran)
        text = f"  real run        {len(ran)} tasks ran on {workers} workers in {span_us:,.1f} us"
        return [text + (f" ({skipped} never ran)" if skipped else "")]

    def _sim_lines(self) -> list[str]:
        s, m = self.summary_data, self.machine
        total = int(s.get("total_cycles", 0))
        lines = [f"  cycle model     {int(s.get('tasks', len(self)))} tasks, {total:,} cycles = "
                 f"{total / m.clock_ghz / 1000.0:,.1f} us at {m.clock_ghz:g} GHz"]
        for key, label in (("critical_path", "critical path"), ("serial_cycles", "serial")):
            if key in s:
                lines.append(f"  {label:<16}{int(s[key]):,} cycles")
        work = list(s.get("work", ()))
        for unit in (1, 0):
            if unit < len(work):
                cores = m.cores(unit) * self.devices
                lines.append(f"  {UNIT_NAMES[unit] + ' busy':<16}"
                             f"{_percent(work[unit], cores * total)} "
                             f"of {cores} cores ({int(work[unit]):,} kernel cycles)")
        if s.get("comm_cycles"):
            lines.append(f"  {'comm busy':<16}{_percent(s['comm_cycles'], self.devices * total)}"
                         f" of {self.devices} comm engines ({int(s['comm_cycles']):,} cycles)")
        if s.get("stolen"):
            n = int(s["stolen"])
            lines.append(f"  stolen          {n:,} task{'' if n == 1 else 's'}")
        if s.get("groups"):
            lines.append(f"  issue groups    {int(s['groups']):,}")
        return lines

    def _dispatcher_lines(self) -> list[str]:
        total = int(self.summary_data.get("total_cycles", 0))
        lines = ["  dispatcher     tasks   stolen    busy"]
        for i, d in enumerate(self.dispatchers):
            lines.append(f"  {i:>10} {int(d.get('tasks', 0)):>9,} {int(d.get('stolen', 0)):>8,} "
                         f"{_percent(d.get('busy_cycles', 0), total):>7}")
        return lines


def _links(a: Optional[np.ndarray]) -> np.ndarray:
    """Pairs as an (n, 2) int64 array (none: empty)."""
    return NO_LINKS if a is None else np.asarray(a, np.int64).reshape(-1, 2)


def _flows(first_id: int, pid, src_tid, src_ts, dst_tid, dst_ts, names=None,
           cat: str = FLOW, dst_pid=None) -> list[dict[str, Any]]:
    """Flow events: for each pair an "s" in the source's slice and an "f" bound to the enclosing
    slice of the destination ("bp": "e"), both at their slice's middle; named `cat` or by
    `names` (one each), in process `pid` (the destination's `dst_pid` when given: a flow
    between the processes of two MPI ranks).

    decision: the middle, not an end: a flow binds to the slice that encloses its timestamp, and
    a slice's own end (or its start, among other events at the same time) is ambiguous there."""
    out: list[dict[str, Any]] = []
    src_tid, src_ts, dst_tid, dst_ts = (np.asarray(x).tolist()
                                        for x in (src_tid, src_ts, dst_tid, dst_ts))
    ids = range(first_id, first_id + len(src_tid))
    names = names if names is not None else [cat] * len(src_tid)
    for i, st, sts, dt, dts, name in zip(ids, src_tid, src_ts, dst_tid, dst_ts, names):
        out.append({"name": name, "cat": cat, "ph": "s", "id": i, "pid": pid, "tid": st,
                    "ts": sts})
        out.append({"name": name, "cat": cat, "ph": "f", "bp": "e", "id": i,
                    "pid": pid if dst_pid is None else dst_pid, "tid": dt, "ts": dts})
    return out


def _derive_summary(sim: np.ndarray) -> dict[str, Any]:
    """What a summary can say from per-task results alone (no critical path, no serial time)."""
    if not len(sim):
        return {"tasks": 0, "total_cycles": 0, "work": [0, 0]}
    dur = sim["finish"] - sim["start"]
    work = [int(dur[sim["unit"] == u].sum()) for u in (0, 1)]
    return {"tasks": len(sim), "total_cycles": int(sim["finish"].max()), "work": work}


@contextmanager
def _no_gc():
    """Pause the cyclic collector while building millions of dicts.

    decision: they hold no cycles, and the collector's passes over the growing heap cost
    about 30% of the build (measured on 1M tasks with the model: 4.7 s -> 3.3 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _name_format(ncoords: int) -> str:
    """`{}[{}, {}]` for two coordinates: the kernel name, then each coordinate."""
    return "{}[" + ", ".join(["{}"] * ncoords) + "]"


def _meta(pid: int, tid: Optional[int], kind: str, **args) -> dict[str, Any]:
    """A metadata event: `kind` is process_name, thread_name or a *_sort_index."""
    event: dict[str, Any] = {"name": kind, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event


def _unit_name(unit: int) -> str:
    return UNIT_NAMES[unit] if 0 <= unit < len(UNIT_NAMES) else f"unit{unit}"


def _percent(part, whole) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def merge_devices(texts: Sequence[Optional[str]]) -> str:
    """One Chrome trace of an MPI run from each rank's (`texts[d]`: device d's `to_json`):
    one process track per device, `pid` = the device, for its real run (a thread per worker),
    and its cycle model's replay as process `devices + d`; flow ids renumbered apart; each
    device's summary in `otherData.devices`. The ranks' tile ends (`otherData.tile_ends`)
    become `TILE` flows between their processes: from the task of device a that produced a
    tile to the tile task of device b that read it (a's send of it has the reader's statement
    and coordinates)."""
    n = len(texts)
    out: list[dict[str, Any]] = []
    devices = []
    next_id = 1
    sources, sinks = [], {}  # (device a, row) of `from`; (device, stmt, coords): (tid, ts)
    for d, text in enumerate(texts):
        data = json.loads(text) if text else {"traceEvents": [], "otherData": {}}
        pids = {PID_REAL: d, PID_SIM: n + d}
        top = next_id
        for e in data.get("traceEvents", []):
            e = dict(e)
            e["pid"] = pids.get(e.get("pid"), e.get("pid"))
            if "id" in e and e.get("cat") in (FLOW, TILE):
                e["id"] = int(e["id"]) + next_id - 1
                top = max(top, e["id"] + 1)
            if e.get("ph") == "M" and e.get("name") == "process_name":
                what = "cycle model" if e["pid"] >= n else "real run"
                e["args"] = {"name": f"device {d}: {what}"}
            if e.get("ph") == "M" and e.get("name") == "process_sort_index":
                e["args"] = {"sort_index": e["pid"]}
            out.append(e)
        next_id = top
        summary = dict(data.get("otherData", {}), device=d)
        ends = summary.pop("tile_ends", None) or {}
        sources += [(d, row) for row in ends.get("from", [])]
        for stmt, tid, ts, *coords in ends.get("to", []):
            sinks[(d, stmt, tuple(coords))] = (tid, ts)
        devices.append(summary)
    for a, (stmt, b, tid, ts, *coords) in sources:
        end = sinks.get((b, stmt, tuple(coords)))
        if end is not None:  # the reader ran (a failed run may have stopped before it)
            out.extend(_flows(next_id, a, [tid], [ts], [end[0]], [end[1]],
                              names=[f"tile from device {a}"], cat=TILE, dst_pid=b))
            next_id += 1
    other = {"devices": devices, "tasks": sum(int(x.get("tasks", 0)) for x in devices)}
    return json.dumps({"traceEvents": out, "displayTimeUnit": "ns", "otherData": other},
                      separators=(",", ":"))
