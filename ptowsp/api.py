"""`Module` and `Program`: the Python face of a compiled WSP module, shared by every back end.

    m = ptowsp.load("rmsnorm.wsp")            # checked; raises WspError with the diagnostics
    prog = m.compile(target="cpu_sim")        # or "ref", the NumPy oracle
    out = prog.run(bind={"B": 4}, X=x, W=w)   # {"Y": array}; prog.stats has the counts

What this module owns is language.md section 9: binding symbols (explicit, inferred from the
shapes of bound arrays, or defaults), checking every array's dtype and shape against its
declaration, filling unbound inputs with reproducible random data on request, and allocating
outputs and scratch. Every mistake there is a diagnostic at the declaration concerned. Running
the tasks is the back end's job (`backends/ref`, `backends/cpu`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional

from . import sym
from .diagnostics import Diagnostic, Note, WspError
from .dtypes import FLOAT_DTYPES, numpy_dtype
from .spans import Span

if TYPE_CHECKING:  # numpy is imported only when something runs
    import numpy as np

    from .frontend.env import ModuleEnv
    from .ir import nodes


def _is_bf16_array(a) -> bool:
    return getattr(a.dtype, "name", "") == "bfloat16"  # ml_dtypes.bfloat16


@dataclass
class Stats:
    """What a run cost: counts and times. `total_cycles` comes with the cycle model."""

    task_count: int = 0
    compile_time_ms: float = 0.0
    execute_time_ms: float = 0.0
    total_cycles: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"task_count": self.task_count, "compile_time_ms": round(self.compile_time_ms, 3),
                "execute_time_ms": round(self.execute_time_ms, 3), "total_cycles": self.total_cycles,
                **self.extra}


class Binding:
    """The symbols and arrays of one run, checked against the declarations (section 9)."""

    def __init__(self, module: "nodes.Module"):
        self.module = module
        self.sources = dict(module.sources)
        self.diags: list[Diagnostic] = []

    def error(self, span, message: str, help: Optional[str] = None, notes=()) -> None:
        self.diags.append(Diagnostic(span, "binding", message, help, tuple(notes)))

    def raise_if_any(self) -> None:
        if self.diags:
            raise WspError(self.diags, self.sources)

    def bind(self, bind: Mapping[str, int], arrays: Mapping[str, Any], random_seed: Optional[int],
             sources: Optional[Mapping[str, str]] = None) -> tuple[dict[str, int], dict[str, Any]]:
        """Symbols and input arrays for a run. `sources` names where each array came from
        (`x.npy`) for messages; unknown names and every inconsistency are diagnostics."""
        import numpy as np

        m = self.module
        sources = dict(sources or {})
        syms = {s.name: s for s in m.syms}
        tensors = {t.name: t for t in m.tensors}
        values: dict[str, int] = {}
        origin: dict[str, str] = {}
        for name, v in bind.items():
            if name not in syms:
                raise WspError([Diagnostic(_NO_SPAN, "binding", f"`{name}` is not a sym of module `{m.name}`",
                                           _near(name, syms))], self.sources)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                self.error(syms[name].span, f"sym `{name}` is bound to {v!r}, but syms are non-negative integers")
                continue
            values[name] = int(v)
            origin[name] = f"--bind {name}={v}"
        inputs: dict[str, Any] = {}
        for name, a in arrays.items():
            t = tensors.get(name)
            if t is None:
                raise WspError([Diagnostic(_NO_SPAN, "binding", f"`{name}` is not a tensor of module `{m.name}`",
                                           _near(name, tensors))], self.sources)
            if t.kind in ("output", "scratch"):
                self.error(t.span, f"`{name}` is {'an' if t.kind == 'output' else 'a'} {t.kind}; "
                           "it takes no input array", "pass inputs and inouts only")
                continue
            inputs[name] = a
        # infer syms from the bare-symbol dimensions of bound arrays: the first binding fixes
        for name, a in inputs.items():
            t = tensors[name]
            shape = tuple(getattr(a, "shape", ()))
            if len(shape) != len(t.dims):
                continue  # reported below with the shape check
            for d, n in zip(t.dims, shape):
                if not isinstance(d, sym.Var):
                    continue
                where = f"the shape {list(shape)} of `{name}` ({sources.get(name, 'the array')})"
                if d.name in values:
                    if values[d.name] != n:
                        self.error(tensors[name].span,
                                   f"`{d.name}` is {values[d.name]} from {origin[d.name]}, "
                                   f"but {where} makes it {n}",
                                   notes=[Note(syms[d.name].span, f"`{d.name}` is declared here")])
                else:
                    values[d.name] = int(n)
                    origin[d.name] = where
        for name, s in syms.items():
            if name not in values and s.default is not None:
                values[name] = s.default
                origin[name] = "its default"
        missing_syms = [s for n, s in syms.items() if n not in values]
        self.raise_if_any()
        # random data for unbound inputs
        if random_seed is not None:
            rng = np.random.default_rng(random_seed)
            for t in m.tensors:
                if t.kind in ("input", "inout") and t.name not in inputs:
                    shape = self._shape(t, values)
                    if shape is None:
                        continue  # a sym is unbound: reported below
                    inputs[t.name] = _random_array(rng, t.dtype, shape)
        for s in missing_syms:
            users = [t.name for t in m.tensors if t.kind in ("input", "inout")
                     and any(isinstance(d, sym.Var) and d.name == s.name for d in t.dims)]
            help = f"bind it with `--bind {s.name}=N`" + (
                f" or pass an array for `{users[0]}`" if users else "")
            self.error(s.span, f"sym `{s.name}` is not bound", help)
        self.raise_if_any()
        # every input present, with exactly its declared dtype and shape
        for t in m.tensors:
            if t.kind not in ("input", "inout"):
                continue
            if t.name not in inputs:
                self.error(t.span, f"{t.kind} `{t.name}` has no array",
                           f"pass it with `--input {t.name}=FILE.npy` (or `--random-inputs SEED`)")
                continue
            a = inputs[t.name]
            want_shape = self._shape(t, values)
            want = np.dtype(numpy_dtype(t.dtype))
            got_dtype = getattr(a, "dtype", None)
            if t.dtype == "bf16" and got_dtype is not None and _is_bf16_array(a):
                a = a.view(np.uint16)
                inputs[t.name] = a
            elif got_dtype != want:
                shown = "bfloat16 (as uint16 raw bits)" if t.dtype == "bf16" else str(want)
                self.error(t.span, f"`{t.name}` is declared {t.dtype}, but its array "
                           f"({sources.get(t.name, 'the array')}) has dtype {got_dtype}",
                           f"convert it first, e.g. `x.astype(np.{shown.split(' ')[0]})`: wspc never casts silently")
                continue
            if want_shape is not None and tuple(a.shape) != want_shape:
                self.error(t.span, f"`{t.name}` is declared {t.dtype}[{', '.join(map(sym.to_str, t.dims))}] = "
                           f"{list(want_shape)}, but its array ({sources.get(t.name, 'the array')}) "
                           f"has shape {list(a.shape)}")
        self.raise_if_any()
        for c in m.checks:
            try:
                ok = c.check.evaluate(values)
            except sym.SymError:
                ok = False
            if not ok:
                self.error(c.span, f"{c.message} (with {_show_syms(values, sym.free_vars(c.check.lhs) | sym.free_vars(c.check.rhs))})")
        self.raise_if_any()
        return values, inputs

    def _shape(self, t: "nodes.TensorDecl", values: Mapping[str, int]) -> Optional[tuple[int, ...]]:
        try:
            dims = tuple(sym.evaluate(d, values) for d in t.dims)
        except sym.SymError:
            return None
        for d, n in zip(t.dims, dims):
            if n < 0:
                self.error(t.span, f"dimension `{sym.to_str(d)}` of `{t.name}` is {n} "
                           f"(with {_show_syms(values, sym.free_vars(d))})")
                return None
        return dims


def _show_syms(values: Mapping[str, int], names) -> str:
    return ", ".join(f"{n} = {values[n]}" for n in sorted(names) if n in values) or "no syms"


def _near(name: str, names) -> Optional[str]:
    from .diagnostics import did_you_mean

    return did_you_mean(name, list(names))


def _random_array(rng, dtype: str, shape):
    import numpy as np

    if dtype in FLOAT_DTYPES:
        a = rng.standard_normal(shape, dtype=np.float32)
        if dtype == "bf16":
            return (a.view(np.uint32) >> 16).astype(np.uint16)
        return a.astype(numpy_dtype(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 8, shape).astype(numpy_dtype(dtype))


_NO_SPAN = Span("<command line>", 0, 0, 0, 0)


def sym_names(e) -> frozenset:
    from . import sym

    return sym.free_vars(e)


def sym_eval(e, syms) -> int:
    from . import sym

    return sym.evaluate(e, syms)


class Program:
    """A module compiled for one target and schedule: call `run` as often as you like."""

    def __init__(self, module: "nodes.Module", schedule: str, target: str, backend: Any,
                 compile_time_ms: float):
        self.module = module
        self.schedule = schedule
        self.target = target
        self._backend = backend
        self.stats = Stats(compile_time_ms=compile_time_ms)
        self._last: Optional[dict] = None
        self.machine: Any = None  # the cycle model's machine (None: the built-in ascend910b)
        self.trace: Any = None  # a `ptowsp.backends.cpu.trace.Trace` after a run with trace=True
        self.opt_level: Optional[int] = None  # the optimiser level it was compiled at
        self.passes: Any = None  # the `ir.passes.PassManager` that ran (timings), if any

    def run(self, bind: Optional[Mapping[str, int]] = None, random_inputs: Optional[int] = None,
            workers: Optional[int] = None, trace: bool = False,
            **arrays) -> dict[str, "np.ndarray"]:
        """Run with `bind` symbols and the input arrays by name; returns the outputs and inouts
        (new arrays: the caller's arrays are never modified, inouts included). With `trace`,
        `self.trace` then holds the run's trace (real and simulated)."""
        return self.run_arrays(arrays, bind, random_inputs, workers, trace=trace)

    def run_arrays(self, arrays: Mapping[str, Any], bind: Optional[Mapping[str, int]] = None,
                   random_inputs: Optional[int] = None, workers: Optional[int] = None,
                   sources: Optional[Mapping[str, str]] = None,
                   trace: bool = False) -> dict[str, "np.ndarray"]:
        """`run`, with `sources` naming where each array came from (for messages)."""
        syms, inputs = Binding(self.module).bind(bind or {}, arrays, random_inputs, sources)
        t0 = time.perf_counter()
        if self.target == "cpu_sim":
            outputs, info = self._backend.run(self.module, self.schedule, syms, inputs,
                                              workers=workers, trace=trace, machine=self.machine)
        else:
            outputs, info = self._backend.run(self.module, self.schedule, syms, inputs,
                                              workers=workers)
        self._record(info, t0)
        self._last = outputs
        return outputs

    def _record(self, info: dict, t0: float) -> None:
        """Stats (and the trace, if one was taken) of the run that started at t0."""
        self.stats.execute_time_ms = (time.perf_counter() - t0) * 1000
        self.stats.task_count = int(info.get("task_count", 0))
        self.stats.total_cycles = int(info.get("total_cycles", 0))
        self.trace = info.pop("trace", None)
        self.stats.extra = {k: v for k, v in info.items()
                            if k not in ("task_count", "total_cycles")}

    def simulate(self, bind: Optional[Mapping[str, int]] = None, trace: bool = False,
                 **arrays) -> Stats:
        """The cycle model alone: tasks are enumerated, ordered and replayed on the machine, no
        kernel runs and no data is needed (symbols come from `bind` and their defaults).
        Returns `self.stats` (`total_cycles`, utilisation, dispatcher loads in `extra`).

        A schedule whose task space depends on data (a ragged length, a CSR routing, a `when`
        on a tensor element) needs those tensors: pass them by name as in `run`. When it reads
        what its own tasks write (a router's output), the kernels must run to produce it, so
        such a schedule is simulated on a real run (all inputs needed)."""
        import numpy as np

        if self.target != "cpu_sim":
            raise ValueError("simulate needs the cpu_sim target (ref has no cycle model)")
        from .ir import visit as V

        name = self.schedule or self.module.default_schedule
        names = {s.name for s in self.module.schedules}
        body = self.module.schedule(name).body if name in names else ()  # else: run() reports it
        read, produced = V.read_tensors(body), V.written_tensors(body)
        execute = bool(read & produced)
        missing = [t for t in sorted(read) if t not in arrays and t not in produced]
        if missing:
            t = self.module.tensor(missing[0])
            raise WspError([Diagnostic(t.span, "binding",
                                       f"simulating this schedule needs the data of `{t.name}`: "
                                       "its elements decide which tasks exist",
                                       f"pass it: simulate({t.name}=...)")],
                           dict(self.module.sources))
        syms = {s.name: s.default for s in self.module.syms if s.default is not None}
        syms.update(bind or {})
        fake = dict(arrays)
        for t in self.module.tensors:  # zero-strided stand-ins: the binding checks their shapes
            if t.kind in ("input", "inout") and t.name not in fake and all(
                    v in syms for d in t.dims for v in sym_names(d)):
                shape = tuple(sym_eval(d, syms) for d in t.dims)
                zero = np.zeros((), numpy_dtype(t.dtype))
                # kernels that run read real (contiguous) arrays; otherwise nothing is read
                fake[t.name] = np.zeros(shape, zero.dtype) if execute else np.broadcast_to(zero, shape)
        syms, inputs = Binding(self.module).bind(bind or {}, fake, None, None)
        t0 = time.perf_counter()
        _, info = self._backend.run(self.module, self.schedule, syms, inputs, trace=trace,
                                    machine=self.machine, execute=execute)
        self._record(info, t0)
        return self.stats


class Module:
    """A checked module (from `ptowsp.load` or `ptowsp.parse`)."""

    def __init__(self, env: "ModuleEnv"):
        self.env = env
        self.name = env.name
        self._ir: Optional["nodes.Module"] = None

    @property
    def ir(self) -> "nodes.Module":
        """The lowered module (raises WspError for constructs no back end supports yet)."""
        if self._ir is None:
            from .ir.verify import verify
            from .lower import lower

            self._ir = lower(self.env)
            verify(self._ir)
        return self._ir

    def compile(self, target: str = "cpu_sim", schedule: Optional[str] = None,
                opt_level: Optional[int] = None, *, verify_each: bool = False,
                print_after=(), time_passes: bool = False, **options) -> Program:
        """A `Program` for `target`, after the optimiser's `-O<opt_level>` pipeline (default
        2; 0 runs no pass). For "ascend_npu" it is the CANN project instead (`.files`,
        `.warnings`, `.write(directory)`; `options` are `AscendOptions`' settings). `verify_each`, `print_after` (pass names) and `time_passes` are the
        pass manager's (`ir/passes`); the timings are in `Program.passes`."""
        from .ir.passes import DEFAULT_LEVEL, optimize

        t0 = time.perf_counter()
        level = DEFAULT_LEVEL if opt_level is None else int(opt_level)
        m, pm = optimize(self.ir, level, verify_each=verify_each, print_after=print_after,
                         time_passes=time_passes)
        name = choose_schedule(m, schedule)
        if target == "ref":
            from .backends import ref

            backend: Any = ref.Backend()
        elif target == "cpu_sim":
            from .backends.cpu.artifact import build_module
            from .backends.cpu.emit import emit_module
            from .backends.cpu.program import Backend

            backend = Backend(build_module(m, emit_module(m), **options))
        elif target == "ascend_npu":  # a CANN project, not a Program (docs/ascend.md)
            from .backends.ascend import AscendOptions, emit_project

            return emit_project(m, name, AscendOptions(**options))
        else:
            raise ValueError(f"unknown target {target!r}: use 'cpu_sim', 'ref' or 'ascend_npu'")
        prog = Program(m, name, target, backend, (time.perf_counter() - t0) * 1000)
        prog.opt_level = level
        prog.passes = pm
        return prog


def load_artifact(directory, schedule: Optional[str] = None, workers: Optional[int] = None) -> Program:
    """A `Program` from an artifact directory written by `wspc compile -o DIR`."""
    from .backends.cpu.artifact import load_directory
    from .backends.cpu.program import Backend

    t0 = time.perf_counter()
    backend = Backend(load_directory(directory, workers))
    m = backend.module
    return Program(m, choose_schedule(m, schedule), "cpu_sim", backend, (time.perf_counter() - t0) * 1000)


def program_for_file(path, target: str = "cpu_sim", schedule: Optional[str] = None,
                     workers: Optional[int] = None, opt_level: Optional[int] = None,
                     **passes) -> Program:
    """Compile a .wsp file, reusing the last build of the same sources when there is one (a warm
    `wspc run` then skips checking, lowering and code generation)."""
    from pathlib import Path

    from .frontend.checker import check_file
    from .ir.passes import DEFAULT_LEVEL

    level = DEFAULT_LEVEL if opt_level is None else int(opt_level)
    t0 = time.perf_counter()
    if target == "cpu_sim":
        from .backends.cpu.artifact import cached_build, record_build
        from .backends.cpu.program import Backend

        # a build from the index runs no pass: asking to see passes means compiling
        built = None if any(passes.values()) else cached_build(Path(path), level, workers)
        if built is not None:
            m = built.module
            return Program(m, choose_schedule(m, schedule), target, Backend(built),
                           (time.perf_counter() - t0) * 1000)
    module = Module(check_file(str(path)))
    prog = module.compile(target=target, schedule=schedule, workers=workers, opt_level=level,
                          **passes)
    if target == "cpu_sim":
        record_build(Path(path), [f.path for f in module.env.files], prog._backend.artifact, level)
    return prog


def choose_schedule(m: "nodes.Module", name: Optional[str]) -> str:
    """The schedule to run: the one named, `main`, or the only one (section 8)."""
    names = [s.name for s in m.schedules]
    if name is not None:
        if name not in names:
            raise WspError([Diagnostic(_NO_SPAN, "binding", f"module `{m.name}` has no schedule `{name}`",
                                       _near(name, names) or (f"its schedules: {', '.join(names)}" if names else None))],
                           dict(m.sources))
        return name
    if m.default_schedule is not None:
        return m.default_schedule
    if not names:
        raise WspError([Diagnostic(_NO_SPAN, "binding", f"module `{m.name}` has nothing to run",
                                   "declare `schedule main = my_workload(...)`")], dict(m.sources))
    raise WspError([Diagnostic(_NO_SPAN, "binding", f"module `{m.name}` has several schedules and none is `main`",
                               f"choose one with --schedule: {', '.join(names)}")], dict(m.sources))
