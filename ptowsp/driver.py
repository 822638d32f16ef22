"""The pipeline: the one way from `.wsp` text to something that runs or ships.

The CLI, `ptowsp.api` and the Python embedding all go through these functions, one per stage,
so a caller can stop between two of them (`wspc compile --emit ast|ir|c` prints there):

    env = check_file(path)                        # or check_text / check_sources: ModuleEnv
    ir = lower(env)                               # the IR, verified
    ir, pm = optimize(ir, level)                  # the -O pipeline (ir/passes)
    name = choose_schedule(ir, schedule)          # language.md section 8
    emitted = emit(target, ir, name, options)     # strings only (backends.Target)
    artifact = build(target, emitted)             # compiled, through the cache
    runnable = open_artifact(target, artifact)    # ready to run, or the product to ship

`compile_ir` runs the stages after lowering; `compile_file` runs them all, and first looks the
file up in its target's index of compiled sources (a warm `wspc run FILE` then skips checking,
lowering and code generation); `load_artifact` reopens an artifact directory.

Importing this module costs nothing: each stage imports its package when it runs.

Every stage runs on a thread with a large stack and a high recursion limit (`deep`): the
stages recurse on the AST and the IR, and a flat chain `a - b - ... - z` of 40,000 operators is a
tree 40,000 levels deep. The front end bounds the nesting it accepts (language.md section 2), so
the limits here hold whatever is accepted, and a `RecursionError` is a bug.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, TextIO, TypeVar

from .diagnostics import Diagnostic, WspError, did_you_mean, printable
from .spans import Span

if TYPE_CHECKING:
    from .backends.target import KernelCode, Target
    from .frontend.env import ModuleEnv
    from .ir import nodes as N
    from .ir.passes import PassManager

_NO_SPAN = Span("<command line>", 0, 0, 0, 0)

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# Deep programs

# The front end accepts expressions nested up to 100,000 levels (frontend/nesting.py); the
# deepest visitor takes a few Python frames per level, and in CPython 3.11 a Python frame costs
# no C stack unless C code calls back into Python (hash, repr, pickle, generators driven by
# `any`), which 512 MiB of stack holds with room to spare at that depth (measured: 64 MiB
# suffice for a 100,000-level chain through every stage). The stack is reserved, not used:
# only the pages touched are memory.
DEEP_STACK_BYTES = 512 << 20
DEEP_RECURSION_LIMIT = 4_000_000

_deep_lock = threading.Lock()
_deep_local = threading.local()
_deep_active = 0  # deep calls running (the recursion limit is the process's, not the thread's)
_saved_limit = 0


def deep(fn: Callable[[], T]) -> T:
    """`fn()` on a thread with a large stack and a high recursion limit (its result, or its
    exception re-raised here). Inside such a thread it is just `fn()`. Where no such thread
    can be made (a tight `ulimit -v`), `fn()` runs here with the usual limits."""
    global _deep_active, _saved_limit
    if getattr(_deep_local, "inside", False):
        return fn()
    outcome: dict[str, Any] = {}

    def body() -> None:
        _deep_local.inside = True
        try:
            outcome["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller as it is
            outcome["error"] = err

    worker = threading.Thread(target=body, name="wspc-deep", daemon=True)
    with _deep_lock:
        old_size = threading.stack_size()
        try:
            threading.stack_size(DEEP_STACK_BYTES)
            if _deep_active == 0:
                _saved_limit = sys.getrecursionlimit()
                sys.setrecursionlimit(max(_saved_limit, DEEP_RECURSION_LIMIT))
            _deep_active += 1
            worker.start()
        except (RuntimeError, ValueError, MemoryError):
            _deep_active -= 1
            if _deep_active == 0:
                sys.setrecursionlimit(_saved_limit)
            worker = None
        finally:
            threading.stack_size(old_size)
    if worker is None:
        return fn()
    try:
        worker.join()
    finally:
        with _deep_lock:
            _deep_active -= 1
            if _deep_active == 0:
                sys.setrecursionlimit(_saved_limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _deep_stage(fn):
    """A stage that runs through `deep`."""

    @functools.wraps(fn)
    def stage(*args, **kwargs):
        return deep(lambda: fn(*args, **kwargs))

    return stage


@dataclass(frozen=True)
class Compiled:
    """A module through every stage for one target: the optimised IR, the schedule to run, the
    artifact, and what `open` gave (a runnable, or the product of a target that does not run
    here)."""

    module: "N.Module"
    schedule: Optional[str]
    target: "Target"
    artifact: Any
    runnable: Any
    opt_level: Optional[int]  # None: reopened, not compiled (no pass ran here)
    passes: Optional["PassManager"]  # the pass manager that ran (timings)
    compile_time_ms: float


# ---------------------------------------------------------------------------------------------
# The stages


def target(name: str) -> "Target":
    """The target called `name` (`backends.TARGETS`); an unknown name is a `TargetError`."""
    from .backends import target as lookup

    return lookup(name)


@_deep_stage
def check_file(path) -> "ModuleEnv":
    """The checked module in the file `path`, with its imports (a `WspError` lists every
    error)."""
    from .frontend.checker import check_file as check

    return check(str(path))


@_deep_stage
def check_text(text: str, filename: str = "<string>") -> "ModuleEnv":
    """The checked module `text`; its imports are relative to `filename`."""
    from .frontend.checker import check_source

    return check_source(text, filename)


def read_source(path) -> str:
    """The text of the `.wsp` file `path`, read as `check_file` reads it (a `WspError` at the
    file when it may not be read)."""
    from .frontend.checker import read_main

    return read_main(str(path))


@_deep_stage
def format_text(text: str, filename: str = "<string>") -> str:
    """`wspc fmt`: the canonical layout of module text, comments kept (docs/tools.md); a
    `WspError` with the parser's diagnostic when the text does not parse."""
    from .frontend.source_printer import format_text as fmt

    return fmt(text, filename)


@_deep_stage
def check_text_partial(text: str, filename: str, proofs: Optional[dict] = None
                       ) -> tuple["ModuleEnv", list[Diagnostic]]:
    """For an editor: the module `text` as far as its check got, and its errors (the list
    `check_text` would raise; empty when it checks). Only for reading declarations and types:
    a module with errors goes no further down the pipeline. `proofs`: a dict the caller keeps
    from one check to the next, so that each symbolic proof is made once."""
    from .frontend.checker import check_source_partial

    return check_source_partial(text, filename, proofs)


@_deep_stage
def check_sources(files, sources: Mapping[str, str]) -> "ModuleEnv":
    """The checked module of source files already parsed, or built by the Python embedding
    (`SourceFile`s; `sources` maps file names to text for the diagnostics' source lines)."""
    from .frontend.checker import check_files

    return check_files(list(files), dict(sources))


@_deep_stage
def lower(env: "ModuleEnv") -> "N.Module":
    """The IR of a checked module, verified (a `WspError` for what no back end supports)."""
    from .ir.verify import verify
    from .lower import lower as lower_env

    m = lower_env(env)
    verify(m)
    return m


@_deep_stage
def optimize(m: "N.Module", level: Optional[int] = None, *, verify_each: bool = False,
             print_after: Iterable[str] = (), time_passes: bool = False,
             out: Optional[TextIO] = None, mesh: Optional[Mapping[str, int]] = None,
             bind: Optional[Mapping[str, int]] = None) -> tuple["N.Module", "PassManager"]:
    """`m` through the `-O<level>` pipeline (default -O2; -O0 runs no pass), and the pass
    manager that ran it (its timings). `print_after` passes print the IR to `out`. A module
    with a mesh is first made a single-device one (`ir/devices.py`), its axes sized by `mesh`
    (axis: devices) or by the syms of `bind` that size them; `mesh` on a module without one
    is an error."""
    from .ir.devices import lower_devices
    from .ir.passes import optimize as run_pipeline
    from .ir.verify import verify

    # a mesh program becomes a single-device one first: no pass and no target sees a mesh
    # (ir/devices.py, docs/distributed.md)
    if m.mesh is not None or mesh:
        m = lower_devices(m, mesh, bind)
        verify(m)
    return run_pipeline(m, opt_level(level), verify_each=verify_each, print_after=print_after,
                        time_passes=time_passes, out=out)


def opt_level(level: Optional[int]) -> int:
    """The optimisation level a caller meant: `level`, or the default (-O2)."""
    from .ir.passes import DEFAULT_LEVEL

    return DEFAULT_LEVEL if level is None else int(level)


def choose_schedule(m: "N.Module", name: Optional[str]) -> str:
    """The schedule to run: the one named, `main`, or the only one (language.md section 8)."""
    names = [s.name for s in m.schedules]
    if name is not None:
        if name not in names:
            # placed at the option that named it, as every command-line value is (`--bind Q=3:`)
            where = Span(f"--schedule {printable(name)}", 0, 0, 0, 0)
            raise WspError([Diagnostic(where, "binding", f"module `{m.name}` has no schedule `{printable(name)}`",
                                       did_you_mean(name, names) or (f"its schedules: {', '.join(names)}" if names else None))],
                           dict(m.sources))
        return name
    if m.default_schedule is not None:
        return m.default_schedule
    if not names:
        raise WspError([Diagnostic(_NO_SPAN, "binding", f"module `{m.name}` has nothing to run",
                                   "declare `schedule main = my_workload(...)`")], dict(m.sources))
    raise WspError([Diagnostic(_NO_SPAN, "binding", f"module `{m.name}` has several schedules and none is `main`",
                               f"choose one with --schedule: {', '.join(names)}")], dict(m.sources))


@_deep_stage
def emit(target: "Target", m: "N.Module", schedule: Optional[str],
         options: Mapping[str, Any]) -> Any:
    """What `target` makes of the optimised module `m`: files as strings, and warnings."""
    return target.emit(m, schedule, options)


@_deep_stage
def kernel_code(m: "N.Module", target: "Target", kernel: str, level: Optional[int] = None,
                options: Optional[Mapping[str, Any]] = None) -> Optional["KernelCode"]:
    """The generated source of kernel `kernel` of the lowered module `m` on `target`, after the
    `-O<level>` pipeline (what `emit` writes for it); None for a target that generates none."""
    options = dict(options or {})
    target.options(options)  # a bad option is reported before any work
    m, _ = optimize(m, level)
    return target.kernel_code(m, kernel, options)


@_deep_stage
def build(target: "Target", emitted) -> Any:
    """The artifact of what `target` emitted (compiled through the cache, or the product)."""
    return target.build(emitted)


@_deep_stage
def open_artifact(target: "Target", artifact) -> Any:
    """A runnable of `artifact`, or, for a target that does not run here, its product."""
    return target.open(artifact)


# ---------------------------------------------------------------------------------------------
# Whole pipelines


@_deep_stage
def compile_ir(m: "N.Module", target: "Target", schedule: Optional[str] = None,
               level: Optional[int] = None, options: Optional[Mapping[str, Any]] = None, *,
               verify_each: bool = False, print_after: Iterable[str] = (),
               time_passes: bool = False, out: Optional[TextIO] = None,
               mesh: Optional[Mapping[str, int]] = None,
               bind: Optional[Mapping[str, int]] = None) -> Compiled:
    """The lowered module `m` optimised, emitted, built and opened for `target` (`mesh` and
    `bind` size its mesh: `optimize`)."""
    t0 = time.perf_counter()
    options = dict(options or {})
    target.options(options)  # a bad option is reported before any work
    level = opt_level(level)
    m, pm = optimize(m, level, verify_each=verify_each, print_after=print_after,
                     time_passes=time_passes, out=out, mesh=mesh, bind=bind)
    name = choose_schedule(m, schedule)
    artifact = build(target, emit(target, m, name, options))
    runnable = open_artifact(target, artifact)
    return Compiled(m, name, target, artifact, runnable, level, pm,
                    (time.perf_counter() - t0) * 1000)


@_deep_stage
def compile_file(path, target: "Target", schedule: Optional[str] = None,
                 level: Optional[int] = None, options: Optional[Mapping[str, Any]] = None, *,
                 verify_each: bool = False, print_after: Iterable[str] = (),
                 time_passes: bool = False, out: Optional[TextIO] = None,
                 mesh: Optional[Mapping[str, int]] = None,
                 bind: Optional[Mapping[str, int]] = None) -> Compiled:
    """The file `path` through every stage for `target`, reusing the last build of the same
    sources when the target keeps one (then nothing is checked, lowered or generated). `mesh`
    and `bind` size its mesh (`optimize`); a module with a mesh is kept in the index by its
    sources and the `mesh` and `bind` it was compiled with (`_mesh_variant`)."""
    t0 = time.perf_counter()
    main = Path(path)
    options = dict(options or {})
    level = opt_level(level)
    from .frontend.checker import check_readable

    check_readable(main)  # a FIFO, a device, a file not `.wsp`: refused before the index reads it
    # a build from the index runs no pass: asking to see the passes means compiling
    if not (verify_each or print_after or time_passes):
        # a module without a mesh under `mesh` alone (a --mesh on it is an error, so a hit
        # there is one compiled without); a mesh module under `mesh` and `bind` too
        for variant in (_mesh_variant(mesh, None), _mesh_variant(mesh, bind or {})):
            artifact = target.cached(main, level, options, variant)
            if artifact is not None:
                return _reopened(target, artifact, schedule, t0)
    env = check_file(main)
    compiled = compile_ir(lower(env), target, schedule, level, options, verify_each=verify_each,
                          print_after=print_after, time_passes=time_passes, out=out, mesh=mesh,
                          bind=bind)
    variant = _mesh_variant(mesh, None if env.mesh is None else bind or {})
    target.remember(main, [f.path for f in env.files], compiled.artifact, level, variant)
    return compiled


def _mesh_variant(mesh: Optional[Mapping[str, int]],
                  bind: Optional[Mapping[str, int]]) -> str:
    """What else than its sources decided a module's build, for the index of compiled sources:
    "" for a module without a mesh (nothing else); for a mesh module (`bind` given, even
    empty) the `--mesh` and every `--bind` it was compiled with. Before the file is read it is
    not known which syms size the mesh (`--bind TP=4` may, as may the sym's default in the
    text, which the sources' hash covers), so every bound sym is in the key: a mesh module run
    with other bindings is checked and lowered again (its C build still comes from the
    cache), never reopened with the wrong sizes."""
    if bind is None:
        return "" if not mesh else "mesh " + " ".join(f"{a}={n}" for a, n in sorted(mesh.items()))
    return "mesh " + " ".join(f"{a}={n}" for a, n in sorted((mesh or {}).items())) + \
        " | bind " + " ".join(f"{s}={v}" for s, v in sorted(bind.items()))


@_deep_stage
def load_artifact(directory, target: "Target", schedule: Optional[str] = None,
                  options: Optional[Mapping[str, Any]] = None) -> Compiled:
    """The artifact directory written by `wspc compile -o DIR`, opened for `target`."""
    t0 = time.perf_counter()
    return _reopened(target, target.load(Path(directory), dict(options or {})), schedule, t0)


def _reopened(target: "Target", artifact, schedule: Optional[str], t0: float) -> Compiled:
    """A `Compiled` of an artifact built before (its runnable holds the IR it was built from)."""
    runnable = open_artifact(target, artifact)
    m = runnable.module
    return Compiled(m, choose_schedule(m, schedule), target, artifact, runnable, None, None,
                    (time.perf_counter() - t0) * 1000)
