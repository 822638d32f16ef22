"""The seeds' `Program`: a `ptowsp.api.Program` that reads its inputs from the `Tensor`s a
workload names and writes its results back into them.

    program = workload().compile()       # cpu_sim (or target="ref")
    program.execute()                    # starts a run on the arrays' current contents
    program.is_complete()                # true once the results are in the caller's arrays
    program.synchronize()                # waits for that (and raises the run's error)
    program.stats.task_count, program.stats().total_cycles

A run goes on in a background thread and writes its results into the caller's arrays when it
ends; reading an output `Tensor`'s `data` waits for them. Also: `set_symbol_u64`,
`enable_tracing(TraceLevel...)` with `program.trace` (Chrome trace, summary), and
`Workload.enumerate()`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import re
from typing import Any, Optional

from ..api import Program as _RuntimeProgram
from ..api import Stats
from ..backends.target import RunFailure
from ..diagnostics import Diagnostic, WspError
from ..dtypes import numpy_dtype
from ..frontend import ast as A
from ..spans import Span
from .errors import CompileError, ExecutionError, ScheduleError, from_wsp, user_error
from .source import here


class TraceLevel(enum.IntEnum):
    """What `program.enable_tracing(level)` keeps of each run (docs/python.md): nothing
    (`NONE`), the summary alone (`SUMMARY`), every task's real and simulated times (`TIMING`),
    and also the dependency edges (`FULL`). Ordered, as in the seeds: `level >= TIMING`."""

    NONE = 0
    SUMMARY = 1
    TIMING = 2
    FULL = 3


class ProgramStats(Stats):
    """`ptowsp.api.Stats`, which the seeds also call: `program.stats()` is `program.stats`."""

    def __call__(self) -> "ProgramStats":
        return self

    @property
    def parallel_tasks(self) -> int:
        """The prototype's "number of tasks executed in parallel" (a field it declares and
        never sets): the most tasks in flight at once in the last run, enumerated and not yet
        finished (cpu_sim's `max_in_flight`, which a `TaskWindow` bounds); 0 before a run and
        on a target that does not count it (ref runs tasks one by one)."""
        return int(self.extra.get("max_in_flight", 0))


class Program(_RuntimeProgram):
    """A compiled workload bound to the caller's tensors."""

    @classmethod
    def adopt(cls, prog: _RuntimeProgram, asm) -> "Program":
        p = cls.__new__(cls)
        p.__dict__.update(prog.__dict__)
        p.stats = ProgramStats(**{f.name: getattr(prog.stats, f.name)
                                  for f in dataclasses.fields(prog.stats)})
        p._asm = asm
        p._symbols = {}
        p._ptrs = {}
        p._pending = None
        p._ran = False
        p._last_ok = False
        p._tracing = False
        p._trace_level = TraceLevel.NONE
        return p

    # -- symbols
    def set_symbol_u64(self, name: str, value: int) -> None:
        """Bind the run-time symbol `name` (`symbol_u64(name)` in the workload)."""
        if name not in self._asm.syms:
            known = ", ".join(f"`{n}`" for n in sorted(self._asm.syms)) or "none"
            raise user_error(here(), f"the program has no symbol `{name}` (its symbols: {known})",
                             cls=ExecutionError)
        self._symbols[name] = int(value)

    set_symbol_i64 = set_symbol_u64

    def set_axis_sizes(self, sizes: dict) -> None:
        """The prototype's run-time axis sizes: `{"batch": 2}` sizes the `DenseDyn` axis
        `batch` for the runs from now on. An extent wspc reads at run time is a symbol, so
        the axis must be `DenseDyn(symbol_u64("n"))` (the symbol is bound, as by
        `set_symbol_u64`); a size equal to a compiled extent changes nothing, and any other
        size of a compiled extent is an `ExecutionError` saying to make it a symbol."""
        from .values import Symbol

        span = here()
        if not isinstance(sizes, dict):
            raise user_error(span, f"`set_axis_sizes` takes a dict of axis names and sizes, not "
                             f"{type(sizes).__name__}", cls=ExecutionError)
        for name, size in sizes.items():
            ax = self._asm.axes.get(str(name))
            if ax is None:
                known = ", ".join(f"`{n}`" for n in sorted(self._asm.axes)) or "none"
                raise user_error(span, f"`set_axis_sizes`: the program has no axis `{name}` "
                                 f"(its axes: {known})", cls=ExecutionError)
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise user_error(span, f"`set_axis_sizes`: the size of `{name}` must be a "
                                 f"non-negative integer, not {size!r}", cls=ExecutionError)
            extent = getattr(ax, "_extent", None)
            objs = list(extent.objs.values()) if extent is not None else []
            if (len(objs) == 1 and isinstance(objs[0], Symbol)
                    and isinstance(extent.node, A.Name)):
                sym = next(n for n, s in self._asm.syms.items() if s is objs[0])
                self._symbols[sym] = size
            elif getattr(ax, "size", None) != size:
                raise user_error(span, f"`set_axis_sizes`: `{name}` is `{ax!r}`, whose extent "
                                 f"is fixed when the workload compiles, so it cannot be {size}",
                                 "size it at run time with a symbol: `DenseDyn(symbol_u64"
                                 f"(\"{name}_n\", {getattr(ax, 'size', None) or 1}))`",
                                 cls=ExecutionError)

    def set_symbol_f32(self, name: str, value: float) -> None:
        """The prototype's f32 symbol, read by a kernel's scalar argument through
        `pto_wsp.types.Symbol`: refused as that is. A scalar argument is given in the call or
        by its default, and wspc's run-time symbols are integers."""
        raise user_error(here(), "`set_symbol_f32` is not supported: wspc's run-time symbols "
                         "are integers, and a kernel's scalar argument is given in the call",
                         "pass the value as the scalar argument (`k[b](x=X[b], eps=1e-6)`), or "
                         "an integer with `set_symbol_u64`", cls=ExecutionError)

    def register_kernel(self, name: str, impl: Any, *, pass_task: bool = False) -> None:
        """The prototype's Python kernel bodies for its simulator (which its own code-
        generating mode refuses too): kernels run the code compiled from their bodies."""
        raise user_error(here(), "`register_kernel` is not supported by wspc: kernels run the "
                         "code compiled from their `@kernel` bodies",
                         "write the body with `pto.*` calls or in C++ (`@kernel(cpp_src=...)`); "
                         "on ref an extern kernel's NumPy meaning is "
                         "`ptowsp.backends.ref.register_extern`", cls=CompileError)

    def set_symbol_ptr(self, name: str, array: Any) -> None:
        """Bind the data of the workload's input tensor `name` (index data, lengths, routing
        tables) to `array` for the runs from now on, instead of its `Tensor`'s array: the
        prototype's pointer symbol. The array is read when `execute()` starts, checked as the
        tensor's own (shape, dtype); a tensor the workload writes cannot be rebound (its
        results land in its `Tensor`)."""
        import numpy as np

        span = here()
        kind = self._asm.kinds.get(str(name))
        if kind != "input":
            inputs = ", ".join(f"`{n}`" for n, k in sorted(self._asm.kinds.items())
                               if k == "input") or "none"
            why = ("is written by the workload, so its results land in its `Tensor`"
                   if kind is not None else "is not a tensor of the workload")
            raise user_error(span, f"`set_symbol_ptr`: `{name}` {why}; only input tensors "
                             f"can be bound (this program's: {inputs})", cls=ExecutionError)
        if not isinstance(array, np.ndarray):
            raise user_error(span, f"`set_symbol_ptr` binds a NumPy array, not "
                             f"{type(array).__name__}", "pass `np.asarray(...)`",
                             cls=ExecutionError)
        self._ptrs[str(name)] = array

    # -- running
    def execute(self, **kwargs: Any) -> None:
        """Start a run on the current contents of the tensors and return at once: the run goes
        on in the background, and when it ends its results are written into the caller's
        arrays (`is_complete()` is true from then on). `synchronize()` waits for it and raises
        its error; reading an output tensor's `data` waits for it too. A run still going when
        `execute()` is called again is waited for first (its error raised)."""
        import threading

        if self._pending is not None:
            self.synchronize()
        self._ran = False
        arrays = {**self._asm.arrays(), **self._ptrs}
        bind = {n: s.default for n, s in self._asm.syms.items() if s.default is not None}
        bind.update(self._symbols)
        self._check(arrays, bind, kwargs.get("workers"))
        run = _Run()
        written = [t for name, t in self._asm.tensors.items()
                   if name in self._written() and not t.scratch]
        for t in written:
            t._landing = run
        self._pending = (run, written)

        def body() -> None:
            try:
                out = self.run_arrays(arrays, bind=bind, trace=self._tracing,
                                      workers=kwargs.get("workers"))
                self._land(out)
            except BaseException as err:  # raised again by synchronize()
                run.error = err
            finally:
                for t in written:
                    if t._landing is run:
                        t._landing = None
                run.done.set()

        # not a daemon: a script that ends right after execute() still gets its results
        threading.Thread(target=body, name="pto_wsp-execute").start()

    def _check(self, arrays: dict, bind: dict, workers: Any) -> None:
        """What can be checked before the run starts (symbols, shapes, dtypes, memory,
        workers), raised by `execute()` itself; what the run finds (a view out of range, a
        deadlock) is raised by `synchronize()`."""
        from ..api import Binding, check_workers
        from ..limits import memory_limit

        try:
            check_workers(workers)
            Binding(self.module).bind(bind, arrays, None, None, memory_limit(None),
                                      schedule=self.schedule,
                                      records=getattr(self._backend, "records", None))
        except WspError as err:
            raise from_wsp(err, "run") from None

    def _written(self) -> set:
        """The tensors a run writes (outputs and inouts), by name."""
        return {t.name for t in self.module.tensors if t.kind in ("output", "inout")}

    def _land(self, out: dict) -> None:
        """The results of a run, written into the caller's arrays."""
        import numpy as np

        for name, arr in (out or {}).items():
            t = self._asm.tensors.get(name)
            if t is None:
                continue
            dst = t._data.view(numpy_dtype(t.dtype.value))  # bf16 (ml_dtypes) as its raw bits
            np.copyto(dst, arr.reshape(dst.shape))

    def synchronize(self, ev: Any = None) -> None:
        """Wait until the run `execute()` started has ended (its results are then in the
        caller's arrays); raise its error if it failed. Without a run: nothing to wait for.
        `synchronize(ev)` waits for the point where the workload records event `ev`: a run's
        events are known to have passed when it lands (docs/python.md), so it waits for the
        run as well, after checking that the workload records `ev`."""
        if ev is not None:
            self._event(ev, "synchronize")
        if self._pending is None:
            return
        run, _ = self._pending
        run.wait()
        self._pending = None
        self._ran = True
        err = run.error
        self._last_ok = err is None
        if err is None:
            return
        if isinstance(err, WspError):
            raise from_wsp(err, "run") from None
        if isinstance(err, RunFailure):
            raise ExecutionError([Diagnostic(Span("<run>", 0, 0, 0, 0), "run", str(err))],
                                 dict(self._asm.sources)) from None
        raise err

    def is_complete(self) -> bool:
        """True once the run `execute()` started has ended: its results are in the caller's
        arrays (or it failed: `synchronize()` says why). False while it runs, and before any
        `execute()`."""
        if self._pending is not None:
            return self._pending[0].done.is_set()
        return self._ran

    def query(self, ev: Any) -> bool:
        """Whether the run `execute()` started (or the last one) has passed the point where
        the workload records event `ev`, without waiting. The host learns that a run's events
        have passed when the run lands: true once it has ended without an error, false while
        it runs, after it failed, and before any `execute()`."""
        self._event(ev, "query")
        if self._pending is not None:
            run = self._pending[0]
            return run.done.is_set() and run.error is None
        return self._ran and self._last_ok

    def _event(self, ev: Any, what: str) -> str:
        """The `.wsp` name of event `ev`, which the workload must record (else a user error
        at the caller's line)."""
        from .values import Event

        span = here()
        if not isinstance(ev, Event):
            raise user_error(span, f"`program.{what}` takes an `Event` of the workload, not "
                             f"{ev!r}", "pass the `Event(...)` the workload records",
                             cls=ExecutionError)
        name = next((n for n, e in self._asm.events.items() if e is ev), None)
        if name is None or name not in self._asm.recorded:
            raise user_error(span, f"the program's workload never records event "
                             f"`{ev.name}`, so no run passes a point for it",
                             "write `record(ev)` after the statement it marks in the workload",
                             cls=ExecutionError)
        return name

    # -- tracing
    def enable_tracing(self, level: Any = TraceLevel.TIMING) -> "Program":
        """Keep a trace of each run from now on (`program.trace`), as much as `level` says
        (`TraceLevel`, or its name or number); cpu_sim only. `NONE` turns tracing off."""
        self._trace_level = trace_level(level)
        self._tracing = self._trace_level != TraceLevel.NONE
        return self

    def disable_tracing(self) -> "Program":
        """Runs from now on keep no trace (`enable_tracing(TraceLevel.NONE)`)."""
        return self.enable_tracing(TraceLevel.NONE)

    def clear_trace(self) -> None:
        """Forget the last run's trace (`program.trace` is None until the next traced run)."""
        self.trace = None

    def _record(self, info: dict, t0: float) -> None:
        super()._record(info, t0)
        if self.trace is not None and not isinstance(self.trace, ProgramTrace):
            # a trace asked for directly (`simulate(trace=True)`) is kept whole
            level = self._trace_level if self._tracing else TraceLevel.FULL
            self.trace = ProgramTrace(self.trace, level)

    @property
    def codegen_artifact_dir(self) -> Optional[str]:
        art = getattr(self._backend, "artifact", None)
        return str(art.directory) if art is not None else None

    @property
    def using_cpp_backend(self) -> bool:
        """The program runs compiled C (the seeds' C++ back end), not an interpreter."""
        return self.codegen_artifact_dir is not None


class _Run:
    """A run `execute()` started: `done` once it has ended (results landed, or `error`)."""

    def __init__(self) -> None:
        import threading

        self.done = threading.Event()
        self.error: Optional[BaseException] = None

    def wait(self) -> None:
        while not self.done.wait(0.25):  # in slices: Ctrl-C is seen while waiting
            pass


class EmittedProgram:
    """`workload.compile(target="ascend_npu")`: the CANN project tree (host, AICPU, AICore)
    written to `codegen_artifact_dir`, for a toolchain to build; it does not run here. The
    directory is `output_dir=` when given, else one under the build cache named by the
    workload and the tree's contents (the same tree, the same directory)."""

    def __init__(self, project: Any, directory: str, compile_time_ms: float):
        self.project = project
        self.files: dict = project.files
        self.warnings: list = project.warnings
        self.codegen_artifact_dir: Optional[str] = directory
        self.stats = ProgramStats(compile_time_ms=compile_time_ms)
        self.using_cpp_backend = False

    def write(self, directory: Any) -> Any:
        """The tree written again as `directory` (as `wspc compile -o DIR` does)."""
        return self.project.write(directory)

    def _no_run(self, what: str):
        return user_error(here(), f"`{what}`: an ascend_npu program is a CANN project for a "
                          "device toolchain, and does not run here (its tree is in "
                          f"`{self.codegen_artifact_dir}`)",
                          "compile with target=\"cpu_sim\" to run it on this machine",
                          cls=ExecutionError)

    def execute(self, **kwargs: Any) -> None:
        raise self._no_run("execute()")

    def synchronize(self, ev: Any = None) -> None:
        raise self._no_run("synchronize()")

    def query(self, ev: Any) -> bool:
        raise self._no_run("query(ev)")

    def is_complete(self) -> bool:
        return False


class TraceSummary(dict):
    """`program.trace.summary()`: a dict of figures whose `str()` is the text summary."""

    def __init__(self, data: dict, text: str):
        super().__init__(data)
        self.text = text

    def __str__(self) -> str:
        return self.text


def trace_level(level: Any) -> TraceLevel:
    """`level` as a `TraceLevel`: a member, its number, its name (any case), or None / False
    (`NONE`) and True (`TIMING`)."""
    if level is None or level is False:
        return TraceLevel.NONE
    if level is True:
        return TraceLevel.TIMING
    if isinstance(level, str) and level.upper() in TraceLevel.__members__:
        return TraceLevel[level.upper()]
    if isinstance(level, int):
        try:
            return TraceLevel(level)
        except ValueError:
            pass
    raise user_error(here(), f"{level!r} is not a trace level",
                     "write `TraceLevel.SUMMARY`, `TraceLevel.TIMING`, `TraceLevel.FULL` or "
                     "`TraceLevel.NONE`", cls=ExecutionError)


class ProgramTrace:
    """A run's trace (`ptowsp.backends.cpu.trace.Trace`) with the tutorial's methods, keeping
    what its `level` says: at `SUMMARY` only the summary (computed when the run ends; the
    per-task events are dropped), at `TIMING` the tasks without the dependency edges, at
    `FULL` everything."""

    def __init__(self, trace, level: TraceLevel = TraceLevel.FULL):
        self.level = level
        self._tasks = len(trace)
        if level == TraceLevel.SUMMARY:
            self._summary: Optional[TraceSummary] = _summary(trace)
            trace = None
        elif level == TraceLevel.TIMING:
            self._summary = None
            trace = copy.copy(trace)  # the same arrays, without the edges
            trace.edges = trace.batches = trace.model_edges = trace.edges[:0]
            trace.dropped_edges = 0
        else:
            self._summary = None
        self._trace = trace

    def _kept(self, what: str):
        if self._trace is None:
            raise user_error(here(), f"{what}: the trace was kept at TraceLevel.SUMMARY, which "
                             "keeps the summary and no per-task events",
                             "call `program.enable_tracing(TraceLevel.TIMING)` (or `FULL`) "
                             "before `execute()`", cls=ExecutionError)
        return self._trace

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._kept(f"`trace.{name}`"), name)

    def __len__(self) -> int:
        return self._tasks

    def to_chrome_trace(self) -> dict:
        """The Chrome trace (TIMING: per-task events; FULL: also the dependency arrows)."""
        return self._kept("`to_chrome_trace()`").to_chrome_trace()

    def _task_dicts(self) -> list:
        tr = self._kept("the per-task events")
        ev = tr.events
        out = []
        for i in range(len(ev)):
            e = ev[i]
            k = int(e["kernel"])
            out.append(TaskEvent(
                {"task": i, "kernel": tr.kernel_names[k] if 0 <= k < len(tr.kernel_names) else str(k),
                 "coords": [int(c) for c in e["coords"][:int(e["ncoords"])]],
                 "dispatcher": int(e["dispatcher"]), "stream": int(e["stream"]),
                 "worker": int(e["worker"]), "start_ns": int(e["start_ns"]),
                 "end_ns": int(e["end_ns"])}))
        return out

    def get_task_events(self) -> list:
        """One `TaskEvent` per task: kernel, coordinates, dispatcher, stream, worker, times."""
        return self._task_dicts()

    def get_events(self, category: Optional[str] = None) -> list:
        """The prototype's events by category: a task is one kernel invocation, so `"task"`,
        `"kernel"` and None give the task events, any other category none."""
        return self._task_dicts() if category in (None, "task", "kernel") else []

    def get_kernel_events(self, name: Optional[str] = None) -> list:
        """The tasks of kernel `name` (its specialisations included); every task without one."""
        return [d for d in self._task_dicts() if name is None or d["kernel"] == name
                or re.split(r"__|\+", d["kernel"])[0] == name]

    def total_time_ms(self) -> float:
        """Wall-clock time from the first task's start to the last one's end (the prototype's)."""
        return float(self.summary()["wall_time_ms"])

    def kernel_time_ms(self) -> float:
        """The tasks' run times, summed (the prototype's)."""
        return float(self.summary()["kernel_time_ms"])

    def summary(self) -> TraceSummary:
        """The run's figures (`tasks`, `kernel_time_ms`, `avg_task_time_us`, `wall_time_ms`,
        `total_cycles`, `kernels`: the per-kernel table), printing as the text summary."""
        return self._summary if self._summary is not None else _summary(self._trace)

    def print_summary(self) -> None:
        print(self.summary())


def _summary(tr) -> TraceSummary:
    """The summary of a backend trace (`ptowsp.backends.cpu.trace.Trace`), with the
    prototype's keys too (`task_count`, `total_events` and `kernel_invocations`, each the task
    count: a task is one event, one kernel invocation; `total_time_ms`, the wall time;
    `unique_kernels`)."""
    ev = tr.events
    ran = ev[ev["worker"] >= 0]
    durs = ran["end_ns"] - ran["start_ns"]
    wall = ((int(ran["end_ns"].max()) - int(ran["start_ns"].min())) / 1e6) if len(ran) else 0.0
    data = {"tasks": len(tr), "kernel_time_ms": int(durs.sum()) / 1e6,
            "avg_task_time_us": (int(durs.sum()) / len(durs) / 1e3) if len(durs) else 0.0,
            "wall_time_ms": wall,
            "total_cycles": int(tr.summary_data.get("total_cycles", 0)),
            "kernels": tr.kernel_table()}
    data.update(task_count=len(tr), total_events=len(tr), kernel_invocations=len(tr),
                total_time_ms=wall, unique_kernels=len(set(ev["kernel"].tolist())))
    return TraceSummary(data, tr.summary())


class TaskEvent(dict):
    """One task of a traced run: a dict (`task`, `kernel`, `coords`, `dispatcher`, `stream`,
    `worker`, `start_ns`, `end_ns`) with the prototype's `TraceEvent` fields as attributes:
    `name` (the kernel), `category` (`"task"`), `start_ns`, `end_ns`, `task_id`, `thread_id`
    (the worker), `metadata` (coordinates, dispatcher, stream), `duration_us`,
    `duration_ms`."""

    category = "task"
    name = property(lambda self: self["kernel"])
    start_ns = property(lambda self: self["start_ns"])
    end_ns = property(lambda self: self["end_ns"])
    task_id = property(lambda self: self["task"])
    thread_id = property(lambda self: self["worker"])
    metadata = property(lambda self: {k: self[k] for k in ("coords", "dispatcher", "stream")})
    duration_us = property(lambda self: (self["end_ns"] - self["start_ns"]) / 1e3)
    duration_ms = property(lambda self: (self["end_ns"] - self["start_ns"]) / 1e6)


class TaskResource:
    """A region of a tensor one task reads or writes through one tile parameter: `param` (the
    kernel's parameter, by its Python name), `mode` (`"In"`, `"Out"` or `"InOut"`), `tensor`
    (the `Tensor`; None for a tensor of the program's own, such as a channel's slots),
    `tensor_name`, `index` (a tuple with an int per indexed dimension and a slice per dimension
    the tile spans, with a strided view's step, so `tensor.data[index]` is the region),
    `transposed` (a `.T` view: the
    tile is the region's transpose) and `gather` (rows picked through an index tensor, so the
    region is where they may come from). `str()` is the view as a `.wsp` argument."""

    __slots__ = ("param", "mode", "tensor", "tensor_name", "index", "transposed", "gather")

    def __init__(self, param: str, mode: str, tensor: Any, tensor_name: str, index: tuple,
                 transposed: bool, gather: bool):
        self.param, self.mode, self.tensor, self.tensor_name = param, mode, tensor, tensor_name
        self.index, self.transposed, self.gather = index, transposed, gather

    @property
    def data(self) -> Any:
        """The region of the tensor's array (a NumPy view; the tile's orientation when
        transposed), or None for a scratch tensor, which has no caller's array."""
        arr = getattr(self.tensor, "data", None)
        if arr is None:
            return None
        view = arr[self.index]
        return view.T if self.transposed else view

    def __str__(self) -> str:
        def one(ix: Any) -> str:
            if isinstance(ix, int):
                return str(ix)
            return f"{ix.start}:{ix.stop}" + (f":{ix.step}" if ix.step not in (None, 1) else "")

        text = f"{self.tensor_name}[{', '.join(one(ix) for ix in self.index)}]"
        return text + (".T" if self.transposed else "")

    def __repr__(self) -> str:
        return f"<{self.mode} {self.param} = {self}>"


_MODES = {"r": "In", "w": "Out", "rw": "InOut"}


def _resources(task, order: dict, values: list, syms: dict, tensors: dict) -> Any:
    """{parameter: TaskResource} of one enumerated task (`task` its IR `N.Task`, `order` the
    kernel's parameters' positions, `values` its coordinates), or the name of a value the regions depend on that the coordinates do not
    give (a string)."""
    from .. import sym
    from ..ir import nodes as N
    from .names import python_ident

    env = dict(syms)
    for c, v in zip(task.coords, values):
        if isinstance(c, sym.Var):
            env[c.name] = v
    out = {}
    for a in sorted(task.args, key=lambda a: order.get(a.param, len(order))):
        if not isinstance(a, N.TileArg):
            continue
        try:
            offs = [sym.evaluate(o, env) for o in a.offsets]
            exts = [sym.evaluate(x, env) for x in a.extents]
        except sym.UnboundSymbol as err:
            return err.name
        spans = {a.row_dim, a.col_dim}
        # a strided view's dimension is NumPy's `o : o + (x - 1) * k + 1 : k` (its elements)
        index = tuple((slice(o, o + x) if a.step(d) == 1
                       else slice(o, o + (x - 1) * a.step(d) + 1, a.step(d))) if d in spans else o
                      for d, (o, x) in enumerate(zip(offs, exts)))
        name = python_ident(a.param)
        out[name] = TaskResource(name, _MODES.get(a.mode, a.mode), tensors.get(a.tensor),
                                 a.tensor, index, a.transposed, a.gather is not None)
    return out


class Task:
    """One enumerated task: `kernel` (its name), coordinates by name (`get("b")`), and the
    tensor regions it accesses by parameter (`resources`)."""

    def __init__(self, id: int, kernel: str, names: list, values: list, resolve=None,
                 resources: Any = None):
        self.id, self.kernel = id, kernel
        self.params = list(values)
        self.coords = dict(zip(names, values))
        self._resolve = resolve
        self._resources = {} if resources is None else resources

    @property
    def resources(self) -> dict:
        """{parameter name: `TaskResource`}: the region of a tensor the task reads (`In`),
        writes (`Out`) or both (`InOut`) through each tile parameter, in parameter order."""
        if isinstance(self._resources, str):
            raise user_error(here(), f"the regions task {self!r} accesses depend on "
                             f"`{self._resources}`, which its coordinates do not give",
                             "give the task the loop variables its views use as coordinates "
                             "(`k[b, t](...)`)", cls=ExecutionError)
        return self._resources

    @property
    def bindings(self) -> dict:
        """The prototype's name: the coordinates by loop variable name."""
        return dict(self.coords)

    def get_axis_value(self, index: int) -> int:
        """The prototype's positional read: coordinate `index` of the call, 0 past the end."""
        return self.params[index] if 0 <= index < len(self.params) else 0

    def get(self, name: str, default: Any = 0) -> Any:
        """The coordinate `name` (a loop variable, or an axis the workload loops over), else
        `default` (0, as in the prototype)."""
        if name in self.coords:
            return self.coords[name]
        if self._resolve is not None:
            alias = self._resolve(name)
            if alias in self.coords:
                return self.coords[alias]
        return default

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.coords.items())
        return f"Task({self.kernel}[{inner}])"


def _coord_names(text: str) -> list:
    """`k[b, h * 2]` -> ["b", "h * 2"] (names of the bracket coordinates as written)."""
    i = text.find("[")
    if i < 0:
        return []
    depth, cur, out = 0, "", []
    for ch in text[i + 1:]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def enumerate_tasks(w) -> list:
    """The tasks of one run of `w`, in enumeration order (cpu_sim's enumerator, kernels run only
    where task generation depends on their results)."""
    prog = w.compile(target="cpu_sim", opt_level=0)
    arrays = prog._asm.arrays()
    bind = {n: s.default for n, s in prog._asm.syms.items() if s.default is not None}
    try:
        prog.simulate(bind=bind, trace=True, **arrays)
    except WspError as err:
        raise from_wsp(err, "run") from None
    tr = prog.trace
    tasks_ir = prog._backend.enumerators.tasks
    resolver = w._resolver()

    def alias(name: str) -> Optional[str]:
        try:
            node = resolver(name, Span("<enumerate>", 0, 0, 0, 0)).node
        except ScheduleError:  # a name of no loop variable and no axis has no coordinate
            return None
        return node.id

    out = []
    ev = tr.events
    for i in range(len(ev)):
        e = ev[i]
        task = tasks_ir[int(e["stmt"])]
        names = _coord_names(task.text)
        values = [int(c) for c in e["coords"][:int(e["ncoords"])]]
        if len(names) != len(values):
            names = [f"c{j}" for j in range(len(values))]
        try:
            kernel = prog.module.kernel(task.kernel)
            kname, order = kernel.source, {p.name: j for j, p in enumerate(kernel.params)}
        except KeyError:
            kname, order = task.kernel, {}
        out.append(Task(i, kname, names, values, alias,
                        _resources(task, order, values, bind, prog._asm.tensors)))
    return out


__all__ = ["Program", "EmittedProgram", "ProgramStats", "TraceLevel", "ProgramTrace", "TraceSummary", "Task",
           "TaskResource", "enumerate_tasks", "trace_level"]
