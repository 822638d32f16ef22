"""The cpu_sim back end at run time: load a built module with cffi (ABI mode: no Python
extension to compile) and run its schedules on the runtime.

`Backend(built)` (a `artifact.Built`) binds arrays and symbols, calls the schedule's
enumerator, waits, and turns a run-time failure into a diagnostic (a bad view: at its argument,
with coordinates and values; a kernel failure, a full window in abort mode, a CSP deadlock) or
an `ExecutionError`. With the cycle model on (always), every run is also replayed on the
machine (`cost.py`, `trace.py`).

Ctrl-C (docs/running.md, "Interrupting a run"): the C calls that run the tasks block for as
long as the run lasts, and Python's signal handler runs only between bytecodes of the main
thread, so on the main thread the run (wsp_begin ... wsp_wait) happens on a helper thread while
the main thread waits, interruptibly. KeyboardInterrupt there fails the run with
WSP_ERR_CANCELLED (no further task starts, running ones finish), waits for the helper to drain
it, and is raised again: the runtime is left between runs, ready for the next one.
"""

from __future__ import annotations

import _thread
import os
import re
import threading
from pathlib import Path
from typing import Any, Optional

from ... import sym
from ...diagnostics import Diagnostic, InternalError, Note, WspError
from ...ir import nodes as N
from ...ir import visit as V
from ...limits import MAX_WORKERS
from ...progress import phase
from ..target import RunFailure
from .buffers import BufferPool, covered
from .csp import REPORT_WORDS
from .enumerate import ENTRY_PARAMS, parse_view_failure, task_cycles_mode


class ExecutionError(RunFailure):
    """A run failed for a reason that is not a user's view (a kernel failure, the task window
    in abort mode, an internal runtime error)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


# wsp_runtime.h's transport between processes (also declared by mpi.py's cdef)
TRANSPORT_CDEF = """\
typedef struct wsp_transport {
    void *ctx; int32_t device; int32_t devices;
    int (*recv)(void *ctx, void *buf, int64_t bytes, int32_t from, int64_t tag, void *token);
    int (*send)(void *ctx, void *buf, int64_t bytes, int32_t to, int64_t tag);
    void (*fail)(void *ctx);
    int (*send_from)(void *ctx, const void *buf, int64_t bytes, int32_t to, int64_t tag, void *token);
    int (*poll)(void *ctx);
} wsp_transport;
"""

# Only what Python calls: a small cdef keeps cffi's parsing (paid on every start) short.
_CDEF = """
typedef struct wsp_runtime wsp_runtime;
typedef struct wsp_stats {
    int64_t tasks; int64_t tasks_run; int64_t dependencies; int64_t max_in_flight; int64_t batches;
    double execute_ms;
} wsp_stats;
typedef struct wsp_machine {
    double clock_ghz; int32_t dispatchers; int32_t cube_cores; int32_t vector_cores; int32_t devices;
    double dispatch_ns; double completion_ns;
} wsp_machine;
typedef struct wsp_kcost { int32_t unit; int32_t latency; int64_t cycles; } wsp_kcost;
typedef struct wsp_policy {
    int32_t ndispatchers; int32_t steal; int32_t nstreams; int32_t timing; int64_t timing_n;
    double rate_per_ms; int64_t window; int64_t timing_first;
    int32_t start; int32_t ready; int64_t start_n; int32_t deps; int32_t task_cycles;
    int32_t edge_tensors;
} wsp_policy;
typedef struct wsp_simsummary {
    int64_t tasks; int64_t total_cycles; int64_t critical_path; int64_t work[2];
    int64_t serial_cycles; int64_t stolen; int64_t groups; int64_t comm_cycles;
} wsp_simsummary;
typedef struct wsp_simdisp { int64_t tasks; int64_t stolen; int64_t busy_cycles; } wsp_simdisp;
int wsp_schedule(wsp_runtime *rt, int32_t ndispatchers, int32_t steal, int32_t nstreams);
int wsp_execute(wsp_runtime *rt, int32_t on);
int wsp_graph(wsp_runtime *rt, int32_t ready, int32_t start, int64_t threshold, int32_t npools);
int64_t wsp_graph_time(const wsp_runtime *rt, int32_t what);
int wsp_trace_enable(wsp_runtime *rt, int32_t on);
int64_t wsp_trace_count(const wsp_runtime *rt);
typedef struct wsp_trace_event wsp_trace_event;
typedef struct wsp_simresult wsp_simresult;
int64_t wsp_trace_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_trace_event *out);
int64_t wsp_trace_links(const wsp_runtime *rt, int32_t what, int64_t first, int64_t n,
                        int64_t *out);
int64_t wsp_note_count(const wsp_runtime *rt);
int64_t wsp_note_read(const wsp_runtime *rt, int64_t first, int64_t n, int64_t *out);
int wsp_sim_enable(wsp_runtime *rt, const wsp_machine *m, const wsp_policy *p,
                   const wsp_kcost *costs, int32_t nkernels);
int wsp_sim_shape(wsp_runtime *rt, int32_t tensor, int32_t ndim, const int64_t *dims);
int wsp_sim_summary(const wsp_runtime *rt, wsp_simsummary *out);
int wsp_sim_dispatchers(const wsp_runtime *rt, int32_t first, int32_t n, wsp_simdisp *out);
int64_t wsp_sim_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_simresult *out);
wsp_runtime *wsp_runtime_new(int32_t workers, int32_t ntensors);
void wsp_runtime_free(wsp_runtime *rt);
int32_t wsp_runtime_workers(const wsp_runtime *rt);
int wsp_begin(wsp_runtime *rt, int64_t window, int32_t window_mode);
int wsp_wait(wsp_runtime *rt);
void wsp_get_stats(const wsp_runtime *rt, wsp_stats *out);
int wsp_error_code(const wsp_runtime *rt);
const char *wsp_error_message(const wsp_runtime *rt);
int wsp_fail(wsp_runtime *rt, int code, const char *message);
int wsp_sim_limit(wsp_runtime *rt, int64_t bytes);
""" + TRANSPORT_CDEF + """int wsp_transport_set(wsp_runtime *rt, const wsp_transport *x, int32_t ntensors,
                      const int32_t *elem_bytes);
void wsp_arrived(wsp_runtime *rt, void *token, void *buf, int ok);
int64_t wsp_transport_count(const wsp_runtime *rt);
"""

# wsp_runtime.h's codes and the cycle model's price of a task and of an edge (wsp_sim_limit),
# which the memory check before a run uses too (tests/runtime checks them against the header)
ERR_WINDOW, ERR_KERNEL, ERR_RECORDS, ERR_CANCELLED, ERR_DEPS = 2, 3, 6, 7, 8
SIM_TASK_BYTES, SIM_EDGE_BYTES = 64, 12
MAX_TASKS = 2**31 - 2  # the replay's task indices are int32 (simlog.c)

_LOADED: dict[str, Any] = {}


def device_elem_bytes(m: N.Module) -> list[int]:
    """Per tensor, its element size when its first dimension is the device dimension of the
    lowering (docs/distributed.md), else 0: what the runtime's transport needs."""
    from ...dtypes import numpy_dtype

    if m.devices is None:
        return [0] * len(m.tensors)
    return [numpy_dtype(t.dtype).itemsize if m.devices.placed(t.name) else 0 for t in m.tensors]


def load(library: Path, entries: dict[str, str]):
    """The cffi handle of a built module (one per process and path)."""
    key = str(library)
    if key not in _LOADED:
        import cffi

        ffi = cffi.FFI()
        ffi.cdef(_CDEF + "".join(f"int {fn}({ENTRY_PARAMS});\n" for fn in entries.values()))
        _LOADED[key] = (ffi, ffi.dlopen(key))
    return _LOADED[key]


class Backend:
    """A module built for cpu_sim, loaded and ready to run any of its schedules."""

    cycle_model = True  # every run is replayed on the machine's cycle model
    # ... which keeps a record per task: what the memory check before a run counts (api.py)
    records = (SIM_TASK_BYTES, MAX_TASKS)
    inplace = True  # `run(inplace=True)` uses the inout arrays themselves
    transports = True  # a run may be one device of several processes (`transport`, mpi.py)

    def __init__(self, built):  # an `artifact.Built` (not imported: artifact.py imports this)
        self.artifact = built
        self.module = built.module
        self.directory = Path(built.directory)
        self.enumerators = built.enumerators
        self.ffi, self.lib = load(built.library, built.enumerators.entries)
        self.workers = built.workers
        self.pool = BufferPool()
        self._rt = None
        self._rt_key = None
        self._model_on = None  # (machine, policy) the shared runtime's cycle model is on for
        self._rt_lock = threading.Lock()
        self._read: dict[str, set] = {}  # tensors each schedule reads (a walk of its body)
        self._layouts: dict = {}  # (schedule, sym values): `_layout`
        # `mpi.Transport` when this process is one device of an MPI run (launch.py): every
        # run then keeps this device's tasks and moves remote tiles through it
        self.transport = None

    def run(self, m: N.Module, schedule: str, syms: dict[str, int], inputs: dict[str, Any],
            workers: Optional[int] = None, trace: bool = False,
            machine: Any = None, execute: bool = True,
            record_limit: int = 0, inplace: bool = False) -> tuple[dict[str, Any], dict]:
        """Runs `schedule`; `record_limit` bounds the bytes of the cycle model's records (0:
        none): past it the run fails at the task's call (`_failure`). With `inplace`, the
        inout arrays (C-contiguous and writeable: the caller checked) are the tensors."""
        import numpy as np


        ffi, lib = self.ffi, self.lib
        sched = m.schedule(schedule)
        read = self._read.get(schedule)
        if read is None:
            read = self._read[schedule] = V.read_tensors(sched.body)
        arrays = []
        outputs = {}
        for t, (shape, dtype, zero) in zip(m.tensors, self._layout(m, sched, syms)):
            if not execute and t.kind in ("input", "inout") and t.name in read:
                a = np.ascontiguousarray(inputs[t.name])  # enumeration reads its elements
            elif not execute:  # nothing is read or written: untouched pages cost nothing
                a = np.empty(shape, dtype=dtype)
                if t.kind in ("output", "inout"):
                    outputs[t.name] = a
            elif t.kind == "input":
                a = np.ascontiguousarray(inputs[t.name])
            elif t.kind == "inout" and inplace:
                a = inputs[t.name]  # a KV cache updated where it is: no copy in, none out
                outputs[t.name] = a
            elif t.kind == "inout":
                a = np.array(inputs[t.name], copy=True, order="C")  # the caller's array stays as it was
                outputs[t.name] = a
            else:
                # zero-filled as language.md says, unless every element is provably written
                a = self.pool.take(shape, dtype, zero=zero)
                if t.kind == "output":
                    outputs[t.name] = a
            arrays.append(a)
        # what the enumerator counts (CSP: items, records; after them, room for a deadlock report)
        layout = self.enumerators.info.get(schedule, [])
        counters = ffi.new("int64_t[]", len(layout) + (REPORT_WORDS if layout else 1))
        workers = int(workers or self.workers or 0)
        if m.devices is not None and self.transport is None:
            # at least one worker per device (its pool: graph_pools), as far as the runtime's
            # limit allows (past it, workers serve several pools)
            workers = min(max(workers or (os.cpu_count() or 1), m.devices.count), MAX_WORKERS)
        elif m.devices is not None and not workers:
            # one device of several processes on this host: its share of the cores
            workers = max(1, (os.cpu_count() or 1) // m.devices.count)
        rt, owned = self._runtime(workers, len(m.tensors))
        try:
            if self.transport is not None:
                self.transport.attach(ffi, lib, rt, device_elem_bytes(m))
            mach = machine or _default_machine()
            policy = schedule_policy(sched, mach.dispatchers, m)
            self._enable_model(rt, m, mach, policy, keep=not owned)
            lib.wsp_sim_limit(rt, max(int(record_limit), 0))
            # `.task_graph(trace = cycles)`: every run of the schedule records its trace
            trace = trace or sched.trace == "cycles"
            lib.wsp_trace_enable(rt, 1 if trace else 0)
            lib.wsp_execute(rt, 1 if execute else 0)
            mode = 1 if sched.window_mode == "abort" else 0
            # host placement only where the schedule asks for it (docs/schedules.md)
            pinned = policy["ndispatchers"] if "dispatch" in sched.given else 0
            # deps = infer_bytes_overlap: every access is a range of a flat tensor (wsp_flat)
            flat = sched.deps == "infer_bytes_overlap"
            shapes = [ffi.new("int64_t[]", [a.size] if flat else list(a.shape) or [0])
                      for a in arrays]
            syms_c = ffi.new("int64_t[]", [int(syms[s.name]) for s in m.syms] or [0])
            bufs = [ffi.from_buffer(a) if a.size else ffi.NULL for a in arrays]
            tensors_c = ffi.new("void *[]", bufs or [ffi.NULL])
            fn = getattr(lib, self.enumerators.entries[schedule])

            def begin() -> int:
                rc = lib.wsp_begin(rt, int(sched.window or 0), mode)
                if rc == 0:
                    rc = lib.wsp_schedule(rt, pinned, policy["steal"], policy["nstreams"])
                if rc == 0:
                    rc = lib.wsp_graph(rt, policy["ready"], policy["start"],
                                       max(policy["start_n"], 1),
                                       graph_pools(sched, m if self.transport is None else None))
                    for i, a in enumerate(arrays):
                        if not N.is_edge_tensor(m.tensors[i].name):  # (coordinates: hashed)
                            lib.wsp_sim_shape(rt, i, 1 if flat else a.ndim, shapes[i])
                return rc

            def tasks() -> None:
                fn(rt, syms_c, tensors_c, counters)

            def done() -> str:  # read while the run goes on: a moment's figures
                now = ffi.new("wsp_stats *")
                lib.wsp_get_stats(rt, now)
                if not execute:
                    return f"{now.tasks} tasks enumerated"
                return f"{now.tasks_run} of {now.tasks} enumerated tasks done"

            with phase("running" if execute else "simulating", done):
                _run_interruptibly(lib, rt, begin, tasks)
            code = lib.wsp_error_code(rt)
            message = ffi.string(lib.wsp_error_message(rt)).decode("utf-8", "replace") if code else ""
            stats = ffi.new("wsp_stats *")
            lib.wsp_get_stats(rt, stats)
            graph = {"started_ns": int(lib.wsp_graph_time(rt, 0)),
                     "enumerated_ns": int(lib.wsp_graph_time(rt, 1))}
            info = {"task_count": int(stats.tasks), "dependencies": int(stats.dependencies),
                    "max_in_flight": int(stats.max_in_flight), "batches": int(stats.batches),
                    "runtime_ms": float(stats.execute_ms),
                    "workers": int(lib.wsp_runtime_workers(rt))}
            if graph["started_ns"] >= 0:  # a run with task-graph knobs: when workers started
                info["graph_start_ms"] = graph["started_ns"] / 1e6
                info["graph_enumerated_ms"] = graph["enumerated_ns"] / 1e6
            if layout and not code:
                info.update(csp_info(m, layout, counters))
            if not code:
                info.update(self._model_results(rt, mach, policy))
                if trace:
                    info["trace"] = self._trace(rt, m, sched, mach, info)
                    info["kernels"] = info["trace"].kernel_table()
                    if any(k.comm is not None for k in m.kernels):
                        from .comm import collective_table

                        info["collectives"] = collective_table(
                            m, mach, info["trace"], [t.text for t in self.enumerators.tasks])
        finally:
            if owned:
                lib.wsp_runtime_free(rt)
            else:
                self._rt_lock.release()
        if code:
            if message.startswith("CSP "):
                raise self._csp_failure(message, counters, len(layout))
            raise self._failure(code, message, sched, record_limit)
        self.pool.keep(a for t, a in zip(m.tensors, arrays) if t.kind in ("output", "scratch"))
        if self.transport is not None and m.devices is not None:
            # each process computed its own device's slice: every process gets all of them
            # (device d's from rank d), so the caller gathers (and checks replicas) as one
            # process running every device would
            self.transport.share(outputs.values())
        return outputs, info

    def _layout(self, m: N.Module, sched: N.Schedule, syms: dict[str, int]) -> list:
        """(shape, NumPy dtype, zero-filled) of each tensor for these sym values: kept for the
        sizes seen last (a service runs the same ones again; `covered` walks the schedule)."""
        from ...dtypes import numpy_dtype

        key = (sched.name, tuple(sorted(syms.items())))
        found = self._layouts.get(key)
        if found is None:
            found = [(tuple(_eval(d, syms) for d in t.dims), numpy_dtype(t.dtype),
                      t.kind in ("output", "scratch") and not covered(sched, t, syms))
                     for t in m.tensors]
            if len(self._layouts) >= 64:
                del self._layouts[next(iter(self._layouts))]
            self._layouts[key] = found
        return found

    def _runtime(self, workers: int, ntensors: int):
        """(runtime, owned): the backend's runtime, kept between runs (its threads, pools and
        the model's tables are then reused), or a runtime of the call's own when another
        thread is running this backend (owned: free it after the run)."""
        import weakref

        lib, ffi = self.lib, self.ffi
        if self._rt_lock.acquire(blocking=False):
            if self._rt is not None and self._rt_key == (workers, ntensors):
                return self._rt, False
            if self._rt is not None:
                self._rt_free()  # the finalizer frees it once
            rt = lib.wsp_runtime_new(workers, ntensors)
            if rt == ffi.NULL:
                self._rt_lock.release()
                raise ExecutionError(4, "cannot start the runtime (out of memory?)")
            self._rt, self._rt_key = rt, (workers, ntensors)
            self._model_on = None  # the new runtime has no cycle model yet
            self._rt_free = weakref.finalize(self, lib.wsp_runtime_free, rt)
            return rt, False
        rt = lib.wsp_runtime_new(workers, ntensors)
        if rt == ffi.NULL:
            raise ExecutionError(4, "cannot start the runtime (out of memory?)")
        return rt, True

    def _enable_model(self, rt, m: N.Module, mach, policy: dict, keep: bool) -> None:
        """Turns the cycle model on for the run: the machine, the schedule and kernel costs.
        On the backend's own runtime (`keep`) it is left on between runs with the same machine
        and policy: enabling makes a new log, whose tables (a dense record per tile of every
        tensor: 4 MB for a decode step's KV cache) would be allocated and faulted in again on
        every run, where the log is made to reuse them (runtime_c/simlog.c)."""
        from .cost import kernel_costs

        key = (mach, tuple(sorted(policy.items())))
        if keep and getattr(self, "_model_on", None) == key:
            return
        ffi, lib = self.ffi, self.lib
        if getattr(self, "_costs_for", None) != mach:
            from .comm import comm_latencies

            self._costs = kernel_costs(m, mach)
            self._latencies = comm_latencies(m, mach)
            self._costs_for = mach
        from .comm import devices

        cm = ffi.new("wsp_machine *", {
            "clock_ghz": mach.clock_ghz, "dispatchers": mach.dispatchers,
            "cube_cores": mach.cube_cores, "vector_cores": mach.vector_cores,
            "devices": devices(m),  # each device of the mesh a whole NPU of the machine
            "dispatch_ns": mach.dispatch_ns, "completion_ns": mach.completion_ns})
        cp = ffi.new("wsp_policy *", policy)
        costs = ffi.new("wsp_kcost[]", [{"unit": u, "cycles": c, "latency": lat} for (u, c), lat
                                        in zip(self._costs, self._latencies)] or 1)
        if keep:
            self._model_on = None
        if lib.wsp_sim_enable(rt, cm, cp, costs, len(self._costs)):
            raise ExecutionError(4, "cannot start the cycle model (out of memory?)")
        if keep:
            self._model_on = key

    def _model_results(self, rt, mach, policy: dict) -> dict:
        from .comm import devices
        from .trace import dispatcher_stats, summary_dict

        ffi, lib = self.ffi, self.lib
        s = ffi.new("wsp_simsummary *")
        lib.wsp_sim_summary(rt, s)
        ndev = devices(self.module)
        nd = policy["ndispatchers"] * ndev  # every device has the schedule's dispatchers
        d = ffi.new("wsp_simdisp[]", nd)
        lib.wsp_sim_dispatchers(rt, 0, nd, d)
        sm = summary_dict(s)
        total = sm["total_cycles"]
        util = {}
        for unit, name, cores in ((1, "cube", mach.cube_cores), (0, "vector", mach.vector_cores)):
            cores *= ndev
            util[name] = sm["work"][unit] / (cores * total) if total and cores else 0.0
        out = {"total_cycles": total, "critical_path_cycles": sm["critical_path"],
               "simulated_us": total / mach.clock_ghz / 1000.0,
               "serial_cycles": sm["serial_cycles"], "stolen": sm["stolen"],
               "utilisation": util,
               "dispatchers": [{"dispatcher": i, **x}
                               for i, x in enumerate(dispatcher_stats(d, nd))]}
        if ndev > 1 or sm["comm_cycles"]:
            # the interconnect (docs/running.md): devices, and the comm engines' busy time
            out["devices"] = ndev
            out["comm_cycles"] = sm["comm_cycles"]
            out["comm_us"] = sm["comm_cycles"] / mach.clock_ghz / 1000.0
        return out

    def _trace(self, rt, m: N.Module, sched: N.Schedule, mach, info: dict):
        import numpy as np

        from .trace import EVENT_DTYPE, SIMRESULT_DTYPE, Trace

        ffi, lib = self.ffi, self.lib
        n = int(lib.wsp_trace_count(rt))
        real = np.zeros(n, dtype=EVENT_DTYPE)
        sim = np.zeros(n, dtype=SIMRESULT_DTYPE)
        if n:
            lib.wsp_trace_read(rt, 0, n, ffi.cast("wsp_trace_event *", ffi.from_buffer(real)))
            got = lib.wsp_sim_read(rt, 0, n, ffi.cast("wsp_simresult *", ffi.from_buffer(sim)))
            if got != n:
                sim = None
        names = [k.name for k in m.kernels]
        summary = {k: info[k] for k in ("task_count", "total_cycles", "critical_path_cycles",
                                        "simulated_us", "utilisation", "stolen", "comm_cycles")
                   if k in info}
        nn = int(lib.wsp_note_count(rt))
        notes = np.zeros((nn, 3), np.int64)
        if nn:
            lib.wsp_note_read(rt, 0, nn, ffi.cast("int64_t *", ffi.from_buffer(notes)))
        if getattr(self, "_work_for", None) is not m:
            from .cost import kernel_flops, moved_bytes

            self._work = [(moved_bytes(k), kernel_flops(k)) for k in m.kernels]
            self._work_for = m
        if mach is not None and getattr(self, "_pipes_for", None) != (m, mach):
            from .cost import kernel_pipes

            self._pipes = kernel_pipes(m, mach)
            self._pipes_for = (m, mach)
        return Trace(real, names, mach, sim=sim, schedule=sched.name, summary=summary,
                     dispatchers=info.get("dispatchers", []), notes=notes,
                     channels=[c.name for c in m.channels], work=self._work,
                     pipes=self._pipes if mach is not None else (),
                     edges=self._links(rt, 0), batches=self._links(rt, 1),
                     model_edges=self._links(rt, 2) if sim is not None else None,
                     dropped_edges=int(lib.wsp_trace_links(rt, 3, 0, 0, ffi.NULL)),
                     devices=info.get("devices", m.devices.count if m.devices else 1),
                     comm_kernels=[k.comm is not None for k in m.kernels],
                     task_devices=self._task_devices(m, real),
                     rank_device=self.transport.device if self.transport is not None
                     and m.devices is not None else None)

    def _task_devices(self, m: N.Module, events):
        """Per trace event, the device of the task it stands for, where the trace says it: a
        collective's tile task (its coordinates are the loop variables its device is an
        expression of: ir/collective_tiles.py); under MPI a send task has the coordinates of
        the task it sends to, so this is that task's device. -1 elsewhere."""
        import numpy as np

        out = np.full(len(events), -1, np.int64)
        if m.devices is None:
            return out
        comm = {i for i, k in enumerate(m.kernels) if k.comm is not None}
        tasks = self.enumerators.tasks
        memo: dict = {}
        for i in np.nonzero(np.isin(events["kernel"], list(comm)))[0].tolist():
            stmt = int(events["stmt"][i])
            if not 0 <= stmt < len(tasks) or tasks[stmt].device is None:
                continue
            t = tasks[stmt]
            names = [c.name if isinstance(c, sym.Var) else None for c in t.coords]
            nc = int(events["ncoords"][i])
            key = (stmt, tuple(events["coords"][i][:nc].tolist()))
            if key not in memo:
                env = {v: x for v, x in zip(names, key[1]) if v is not None}
                try:
                    memo[key] = sym.evaluate(t.device, env)
                except sym.SymError:
                    memo[key] = -1
            out[i] = memo[key]
        return out

    def _links(self, rt, what: int):
        """The run's WSP_LINKS_* pairs (`what`: 0 edges, 1 batches, 2 the model's edges)."""
        import numpy as np

        ffi, lib = self.ffi, self.lib
        n = int(lib.wsp_trace_links(rt, what, 0, 0, ffi.NULL))
        out = np.zeros((n, 2), np.int64)
        if n:
            got = lib.wsp_trace_links(rt, what, 0, n, ffi.cast("int64_t *", ffi.from_buffer(out)))
            out = out[:got]
        return out

    def _csp_failure(self, message: str, counters, base: int) -> WspError:
        """A deadlock or a channel opened twice, worded as the ref back end words it."""
        e = self.enumerators
        if message.startswith("CSP OPEN"):
            pid, other, ch = (int(x) for x in message.split()[2:5])
            span, sp = e.pipes[pid][0], e.pipes[other][0]
            name = self.module.channels[ch].name
            text = (f"channel `{name}` is still open in another run of the pipe at "
                    f"{sp.line}:{sp.col}; a channel serves one pipe at a time")
            return WspError([Diagnostic(span, "run", text)], dict(self.module.sources))
        words = [int(counters[base + 1 + i]) for i in range(int(counters[base]))]
        blocked = []
        while words:
            site, replica, k, free, nv = words[:5]
            values, words = words[5:5 + nv], words[5 + nv:]
            blocked.append((e.sites[site], replica, k, free, values))
        return WspError([deadlock_diagnostic(blocked)], dict(self.module.sources))

    def _failure(self, code: int, message: str, sched: Optional[N.Schedule] = None,
                 record_limit: int = 0) -> Exception:
        from ...limits import size_text

        sources = dict(self.module.sources)
        limit = re.match(r"cycle model limit: (\w+) at statement (\d+) after (\d+) tasks", message)
        if code == ERR_RECORDS and limit and int(limit.group(2)) < len(self.enumerators.tasks):
            task = self.enumerators.tasks[int(limit.group(2))]
            done = int(limit.group(3))
            if limit.group(1) == "tasks":
                return WspError([Diagnostic(task.span, "too-many-tasks",
                                            f"the run makes more than {done} tasks (at `{task.text}`), "
                                            "more than the cycle model replays in one run",
                                            "bind smaller sizes")], sources)
            return WspError([Diagnostic(
                task.span, "memory",
                f"the run's tasks need more memory than the limit leaves them: after {done} "
                f"tasks, at `{task.text}`, the cycle model's records ({SIM_TASK_BYTES} bytes a "
                f"task, {SIM_EDGE_BYTES} a dependency) would pass {size_text(record_limit)}, "
                "what the memory limit leaves after the tensors",
                "bind smaller sizes, or set another limit (`--max-memory SIZE`; in Python, "
                "`max_memory=`)")], sources)
        if code == ERR_WINDOW and sched is not None:  # the schedule's window, in abort mode
            return WspError([Diagnostic(sched.window_span, "window", message,
                                        "raise the window, or use `mode = stall`")], sources)
        undeclared = re.match(r"undeclared dependency: statement (\d+) \[([^]]*)\] on statement "
                              r"(\d+) \[([^]]*)\] through tensor (\d+)", message)
        if code == ERR_DEPS and undeclared:  # deps = explicit (runtime_c/explicit.c)
            t, p = (self.enumerators.tasks[int(undeclared.group(i))] for i in (1, 3))
            tensor = self.module.tensors[int(undeclared.group(5))].name
            return WspError([Diagnostic(
                t.span, "undeclared-dependency",
                f"`deps = explicit`: `{t.text}` at [{undeclared.group(2)}] depends on "
                f"`{p.text}` at [{undeclared.group(4)}] through `{tensor}`, and the schedule "
                "does not declare that order",
                "declare it (both in steps of a `P.seq` loop or `sequential`, or in one "
                "stream), or let wspc infer it: `deps = hybrid`",
                notes=[Note(p.span, "the task it depends on")])], sources)
        kernel = re.match(r"kernel \d+ \(statement (\d+)\) failed at coords \[([^]]*)\] (.*)", message)
        if code == ERR_KERNEL and kernel and int(kernel.group(1)) < len(self.enumerators.tasks):
            task = self.enumerators.tasks[int(kernel.group(1))]
            return WspError([Diagnostic(task.span, "kernel-failed",
                                        f"`{task.text}` failed at [{kernel.group(2)}] "
                                        f"{kernel.group(3)}")], sources)
        view = parse_view_failure(message)
        if view is None:
            return ExecutionError(code, message)
        k, coords, lhs, rhs, shown = view
        chk = self.enumerators.checks[k]
        found = chk.found.format(*shown) if chk.found else found_values(chk.check, lhs, rhs)
        text = f"{chk.message}, {found}"
        task = self.enumerators.check_tasks.get(k)
        if task:
            text += f" (task `{task}`{' at ' + coords if coords else ''})"
        elif coords:  # a read or a fact about data read during enumeration
            text += f" (at {coords})"
        if k in self.enumerators.data_checks:  # a length or an indptr read during the run
            return WspError([Diagnostic(chk.span, "bad-data", text)], dict(self.module.sources))
        return WspError([Diagnostic(chk.span, "bad-view", text + "; the task was not launched")],
                        dict(self.module.sources))


def _run_interruptibly(lib, rt, begin, tasks) -> None:
    """begin() (wsp_begin and the run's settings: returns a code), then, if it succeeded,
    tasks() (the enumerator), then wsp_wait, always: the runtime ends between runs whatever
    happens. On the main thread they run on a helper thread, so that Ctrl-C is seen at once;
    a KeyboardInterrupt cancels the run, waits until it has drained and is raised again."""
    def body() -> None:
        try:
            if begin() == 0:
                if state[0] == "cancelled":  # it came before wsp_begin, which forgets errors
                    lib.wsp_fail(rt, ERR_CANCELLED, b"the run was interrupted")
                tasks()
        finally:
            lib.wsp_wait(rt)  # always drain: tasks may be in flight after a failure
            done.set()

    if threading.current_thread() is not threading.main_thread():
        state = ["running"]  # only the main thread gets signals: nothing to wait for
        done = threading.Event()
        body()
        return
    # the helper touches the runtime only once it has claimed the run ("running"); an
    # interrupt before that (even while the thread is being started) claims it first
    state, mu, done = ["new"], threading.Lock(), threading.Event()

    def helper() -> None:
        with mu:
            if state[0] != "new":
                return
            state[0] = "running"
        body()

    try:
        # the bare thread: threading.Thread.start would wait for it to start (a switch more)
        _thread.start_new_thread(helper, ())
        while not done.wait(0.25):  # the wait is interruptible anyway; the slice is a backstop
            pass
    except KeyboardInterrupt:
        import signal

        # a second Ctrl-C must not leave the helper running on a runtime the caller then frees
        previous = signal.signal(signal.SIGINT, lambda *_: None)
        try:
            with mu:
                started, state[0] = state[0] == "running", "cancelled"
            if started:  # tasks already running finish, nothing else starts
                lib.wsp_fail(rt, ERR_CANCELLED, b"the run was interrupted")
                done.wait()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        raise


def csp_info(m: N.Module, layout, counters) -> dict:
    """`channels` and `events` of a CSP run, as the ref back end reports them."""
    got = {entry: int(counters[i]) for i, entry in enumerate(layout)}
    channels = {c.name: {"items": got[("channels", c.name, "items")],
                         "max_in_flight": got[("channels", c.name, "max_in_flight")],
                         "depth": c.depth}
                for c in m.channels if c.slots is not None}
    events = {}
    for c in m.channels:
        r, s = got.get(("events", c.name, "records"), 0), got.get(("events", c.name, "synchronizes"), 0)
        if r or s:
            events[c.name] = {"records": r, "synchronizes": s}
    return {"channels": channels, **({"events": events} if events else {})}


def deadlock_diagnostic(blocked) -> Diagnostic:
    """The deadlock error (docs/csp.md, "Deadlocks at run time") from the blocked coroutines:
    (site, replica, item, slot free, variables) each, in coroutine order."""
    from ...diagnostics import Note

    parts, spans = [], []
    for (kind, span, ch, depth, proc, replicated, scope, index), replica, k, free, values \
            in blocked:
        who = f"process `{proc}`" + (f" (replica {replica})" if replicated else "")
        at = ", ".join(f"{v}={values[index[v]]}" for v in scope)
        at = f" (at {at})" if at else ""
        if kind == "send":
            why = f"until item {k - max(depth, 1)} is consumed" if not free else \
                "until a process waits to consume it"
            parts.append(f"{who} waits to send item {k} on `{ch}` (depth {depth}) {why}{at}")
        else:
            parts.append(f"{who} waits for item {k} on `{ch}`{at}")
        spans.append((span, f"{who} is blocked here"))
    notes = tuple(Note(sp, text) for sp, text in spans[1:])
    return Diagnostic(spans[0][0], "deadlock",
                      "deadlock: no process can make progress: " + "; ".join(parts), None, notes)


def found_values(c, lhs: int, rhs: int) -> str:
    """`found 3` / `found 1 and 2`: the values of a failed check's non-constant sides (the
    wording of the ref back end)."""
    from ... import sym

    if sym.is_const(c.rhs):
        return f"found {lhs}"
    if sym.is_const(c.lhs):
        return f"found {rhs}"
    return f"found {lhs} and {rhs}"


_TIMING = {"immediate": 0, "batched": 1, "interleaved": 2, "rate_limit": 3}


def schedule_policy(s: N.Schedule, machine_dispatchers: int,
                    module: Optional[N.Module] = None) -> dict:
    """The schedule as the runtime and the cycle model take it (`wsp_policy`)."""
    d = s.dispatch
    if "dispatch" not in s.given:
        nd = 1  # language.md section 8: no `.dispatch` deals round_robin(1)
    elif d.name == "round_robin":
        nd = int(d.args[0]) if d.args else machine_dispatchers
    else:
        nd = int(d.n) if d.n is not None else machine_dispatchers
    t = s.timing
    streams = int(s.streams) if "streams" in s.given else 0
    if module is not None and module.devices is not None:
        streams *= module.devices.count  # each device its own streams (enumerate.placement)
    return {"ndispatchers": nd, "steal": int(d.name == "work_steal" and "dispatch" in s.given),
            "nstreams": streams,
            "timing": _TIMING[t.name],
            "timing_n": int(t.args[0]) if t.name in ("batched", "interleaved") else 0,
            "rate_per_ms": float(t.args[0]) if t.name == "rate_limit" else 0.0,
            "window": int(s.window or 0),
            # interleaved(n, priority = s): the stream every dispatcher starts with
            "timing_first": int(t.args[1]) if t.name == "interleaved" and len(t.args) > 1 else 0,
            # the task-graph knobs (graph.c on the host; the model orders by priority)
            "ready": _READY[s.ready.name], "start": _START[s.start.name],
            "start_n": int(s.start.args[0]) if s.start.name == "threshold" else 0,
            "deps": int(s.deps == "explicit"),  # WSP_DEPS_EXPLICIT: the log checks the order
            # WSP_TASK_CYCLES_*: what each task's `cycles` means (enumerate.task_cycles_mode)
            "task_cycles": task_cycles_mode(module, s) if module is not None else 0,
            # the task handles' order tensors, the module's last (named edges: explicit.c)
            "edge_tensors": edge_tensor_count(module) if module is not None else 0}


def edge_tensor_count(m: N.Module) -> int:
    """How many of the module's last tensors are task handles' order tensors (lowering puts
    them last, ir/devices.py keeps them there); the explicit check knows them by that."""
    n = sum(N.is_edge_tensor(t.name) for t in m.tensors)
    if n and not all(N.is_edge_tensor(t.name) for t in m.tensors[len(m.tensors) - n:]):
        raise InternalError("emit", "the task handles' order tensors are not the module's last")
    return n


_READY = {"work_steal": 0, "fifo": 1, "priority": 2}  # WSP_READY_*
_START = {"threshold": 0, "after_orchestration": 1}  # WSP_START_*


def graph_pools(s: N.Schedule, m: Optional[N.Module] = None) -> int:
    """How many ready queues `.task_graph(pools = ...)` asks for (wsp_graph's npools); a
    module lowered to several devices has one per device, whatever the schedule says."""
    if m is not None and m.devices is not None:
        return m.devices.count
    if s.pools.name == "by_exec_unit":
        return 2  # vector (WSP_UNIT_VECTOR, 0) and cube (1): a task's pool is its unit
    return int(s.pools.n) if s.pools.name == "custom" else 1


_MACHINE: list = []


def _default_machine():
    if not _MACHINE:
        from ..machine import load_machine

        _MACHINE.append(load_machine(None))
    return _MACHINE[0]


def _eval(d, syms) -> int:
    from ... import sym

    return sym.evaluate(d, syms)


__all__ = ["Backend", "ExecutionError", "load", "schedule_policy"]
