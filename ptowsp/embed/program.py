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

import dataclasses
import enum
import re
from typing import Any, Optional

from ..api import Program as _RuntimeProgram
from ..api import Stats
from ..backends.target import RunFailure
from ..diagnostics import Diagnostic, WspError
from ..dtypes import numpy_dtype
from ..spans import Span
from .errors import ExecutionError, ScheduleError, from_wsp, user_error
from .source import here


class TraceLevel(enum.Enum):
    NONE = "none"
    SUMMARY = "summary"
    TIMING = "timing"
    FULL = "full"


class ProgramStats(Stats):
    """`ptowsp.api.Stats`, which the seeds also call: `program.stats()` is `program.stats`."""

    def __call__(self) -> "ProgramStats":
        return self


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
        p._pending = None
        p._ran = False
        p._tracing = False
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

    def set_symbol_ptr(self, name: str, array: Any) -> None:
        raise user_error(here(), "`set_symbol_ptr` is not supported: pass index data as a "
                         "`Tensor` (or a list) to `Ragged` / `Sparse`", cls=ExecutionError)

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
        arrays = self._asm.arrays()
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

    def synchronize(self) -> None:
        """Wait until the run `execute()` started has ended (its results are then in the
        caller's arrays); raise its error if it failed. Without a run: nothing to wait for."""
        if self._pending is None:
            return
        run, _ = self._pending
        run.wait()
        self._pending = None
        self._ran = True
        err = run.error
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

    # -- tracing
    def enable_tracing(self, level: Any = TraceLevel.TIMING) -> None:
        """Record a trace of each run (`program.trace`); cpu_sim only."""
        self._tracing = level not in (TraceLevel.NONE, None, False, "none")

    def _record(self, info: dict, t0: float) -> None:
        super()._record(info, t0)
        if self.trace is not None and not isinstance(self.trace, ProgramTrace):
            self.trace = ProgramTrace(self.trace)

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

    def synchronize(self) -> None:
        raise self._no_run("synchronize()")

    def is_complete(self) -> bool:
        return False


class TraceSummary(dict):
    """`program.trace.summary()`: a dict of figures whose `str()` is the text summary."""

    def __init__(self, data: dict, text: str):
        super().__init__(data)
        self.text = text

    def __str__(self) -> str:
        return self.text


class ProgramTrace:
    """A run's trace (`ptowsp.backends.cpu.trace.Trace`) with the tutorial's methods."""

    def __init__(self, trace):
        self._trace = trace

    def __getattr__(self, name: str):
        return getattr(self._trace, name)

    def __len__(self) -> int:
        return len(self._trace)

    def to_chrome_trace(self) -> dict:
        return self._trace.to_chrome_trace()

    def _task_dicts(self) -> list:
        tr = self._trace
        ev = tr.events
        out = []
        for i in range(len(ev)):
            e = ev[i]
            k = int(e["kernel"])
            out.append({"task": i, "kernel": tr.kernel_names[k] if 0 <= k < len(tr.kernel_names) else str(k),
                        "coords": [int(c) for c in e["coords"][:int(e["ncoords"])]],
                        "dispatcher": int(e["dispatcher"]), "stream": int(e["stream"]),
                        "worker": int(e["worker"]), "start_ns": int(e["start_ns"]),
                        "end_ns": int(e["end_ns"])})
        return out

    def get_task_events(self) -> list:
        """One dict per task: kernel, coordinates, dispatcher, stream, worker, times (ns)."""
        return self._task_dicts()

    def get_kernel_events(self, name: str) -> list:
        """The tasks of kernel `name` (its specialisations included)."""
        return [d for d in self._task_dicts()
                if d["kernel"] == name or re.split(r"__|\+", d["kernel"])[0] == name]

    def summary(self) -> TraceSummary:
        tasks = [d for d in self._task_dicts() if d["worker"] >= 0]
        durs = [d["end_ns"] - d["start_ns"] for d in tasks]
        data = {"tasks": len(self._trace), "kernel_time_ms": sum(durs) / 1e6,
                "avg_task_time_us": (sum(durs) / len(durs) / 1e3) if durs else 0.0,
                "wall_time_ms": ((max(d["end_ns"] for d in tasks) - min(d["start_ns"] for d in tasks))
                                 / 1e6) if tasks else 0.0,
                "total_cycles": int(self._trace.summary_data.get("total_cycles", 0)),
                "kernels": self._trace.kernel_table()}
        return TraceSummary(data, self._trace.summary())

    def print_summary(self) -> None:
        print(self.summary())


class Task:
    """One enumerated task: `kernel` (its name), coordinates by name (`get("b")`)."""

    def __init__(self, id: int, kernel: str, names: list, values: list, resolve=None):
        self.id, self.kernel = id, kernel
        self.params = list(values)
        self.coords = dict(zip(names, values))
        self._resolve = resolve

    def get(self, name: str, default: Any = None) -> Any:
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
            kname = prog.module.kernel(task.kernel).source
        except KeyError:
            kname = task.kernel
        out.append(Task(i, kname, names, values, alias))
    return out


__all__ = ["Program", "EmittedProgram", "ProgramStats", "TraceLevel", "ProgramTrace", "TraceSummary", "Task",
           "enumerate_tasks"]
