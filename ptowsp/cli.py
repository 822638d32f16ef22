"""The `wspc` command: check and compile `.wsp` modules.

Exit status: 0 success, 1 a user error (diagnostics printed), 2 bad command-line usage,
70 an internal error (the message names the stage; the traceback only with `--debug`), 130
interrupted (Ctrl-C: `wspc: interrupted`, nothing written).
Importing this module must stay cheap: no numpy, no cffi, Lark only when a file is parsed.
"""

from __future__ import annotations

import gc
import sys
from typing import Any, Callable, NamedTuple, Optional, TypeVar

import click

from . import run_io
from .backends import TARGETS
from .limits import MAX_WORKERS
from .version import __version__

EXIT_USER = 1
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # the shell's 128 + SIGINT, as a process killed by Ctrl-C reports

T = TypeVar("T")


def _run_guarded(ctx: click.Context, stage: str, fn: Callable[[], T], exit_on_error: bool = True):
    """Run one stage: user errors print diagnostics (exit 1, or None when `exit_on_error` is
    false so that the caller can go on), bugs exit 70."""
    from .diagnostics import InternalError, WspError

    try:
        return fn()
    except WspError as err:
        _rank_report(err.render(), EXIT_USER)
        click.echo(err.render(), err=True)
        if not exit_on_error:
            return None
        ctx.exit(EXIT_USER)
    except (KeyboardInterrupt, click.exceptions.Exit, click.exceptions.Abort,
            click.ClickException):  # a usage error: click reports it (exit 2)
        raise
    except Exception as err:  # noqa: BLE001 - the one place bugs are caught
        if isinstance(err, InternalError):  # it names its stage and says what broke
            head = f"wspc: internal error in {err.stage}: {err.message}"
        else:
            head = f"wspc: internal error in {stage}: {type(err).__name__}: {err}"
        bug = "This is a bug in wspc; please report it with the input that caused it."
        _rank_report(f"{head}\n{bug}", EXIT_INTERNAL)
        click.echo(head, err=True)
        click.echo(bug, err=True)
        if ctx.find_root().params.get("debug"):
            import traceback  # only here: importing it costs every run ~10 ms

            traceback.print_exc()
        else:
            click.echo("Run again with `wspc --debug ...` to see the traceback.", err=True)
        ctx.exit(EXIT_INTERNAL)
    raise InternalError("cli", f"stage {stage} neither returned nor exited")  # ctx.exit raises


def _rank_report(text: str, status: int) -> None:
    """In an MPI rank (`wspc run --rank-dir`): the report goes to the launcher, prefixed with
    the rank, and every rank ends (launch.rank_fail does not return). Elsewhere nothing."""
    launch = sys.modules.get("ptowsp.launch")
    if launch is not None and launch.RANK is not None:
        launch.rank_fail(text, status)


class _Wspc(click.Group):
    """The command group: a Ctrl-C anywhere (a run stops promptly: backends/cpu/program.py)
    ends wspc with one line and exit 130 instead of click's `Aborted!` and exit 1. Every
    output is written only after its stage succeeded, so an interrupt leaves none behind."""

    def invoke(self, ctx: click.Context):
        # a file name is bytes on POSIX: one that is not UTF-8 (`\xff.wsp`) reaches Python as
        # surrogates, and is written back as the bytes the user gave, never a UnicodeEncodeError
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="surrogateescape")
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("wspc: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


@click.group(cls=_Wspc, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wspc")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for internal errors.")
def main(debug: bool) -> None:
    """wspc: compile WSP workload-schedule programs."""
    # The front end allocates many small acyclic objects; the default collector thresholds
    # make Python scan them over and over (15% of checking a large module). As mypy does.
    gc.set_threshold(100_000, 50, 100)


def _summary(env) -> str:
    parts = []
    for label, items in (("tensor", env.tensors), ("axis", env.axes), ("kernel", env.kernels),
                         ("workload", env.workloads), ("schedule", env.schedules),
                         ("channel", env.channels)):
        n = len(items)
        if n:
            plural = "axes" if label == "axis" and n != 1 else label + ("s" if n != 1 else "")
            parts.append(f"{n} {plural}")
    checks = len(env.checks)
    if checks:
        parts.append(f"{checks} run-time check{'s' if checks != 1 else ''}")
    return ", ".join(parts) or "empty"


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when the files are correct.")
@click.pass_context
def check(ctx: click.Context, files: tuple[str, ...], quiet: bool) -> None:
    """Parse and check FILES; report every error."""
    from .driver import check_file

    failed = False
    for path in files:
        env = _run_guarded(ctx, "check", lambda path=path: check_file(path), exit_on_error=False)
        if env is None:
            failed = True
        elif not quiet:
            click.echo(f"{path}: ok: module `{env.name}`: {_summary(env)}")
    if failed:
        ctx.exit(EXIT_USER)


def _opt_options(fn):
    """-O0 .. -O3 and the pass manager's switches (ir/passes), shared by compile and run."""
    fn = click.option("--verify-each", is_flag=True,
                      help="Check the IR's invariants after every pass.")(fn)
    fn = click.option("--time-passes", is_flag=True,
                      help="Print each pass's time (to stderr).")(fn)
    fn = click.option("--print-after", "print_after", multiple=True, metavar="PASS",
                      help="Print the IR after PASS (or `all`) to stderr; repeatable.")(fn)
    fn = click.option("-O", "opt_level", type=click.IntRange(0, 3), default=None, metavar="0..3",
                      help="Optimisation level: -O0 runs no pass (default -O2).")(fn)
    return fn


def _check_pass_names(ctx: click.Context, print_after) -> None:
    from .ir.passes import pass_names

    known = pass_names()
    for name in print_after:
        if name != "all" and name not in known:
            raise click.BadParameter(f"no pass `{name}`; the passes: {', '.join(known)}, all",
                                     ctx=ctx, param_hint="--print-after")


def _target(ctx: click.Context, name: str, options: dict):
    """The target called `name` (a choice of `--target`), with `options` checked: an option
    it does not take is a usage error, before any file is read."""
    from .backends.target import TargetError
    from .driver import target

    t = target(name)

    def check() -> Optional[TargetError]:
        try:
            t.options(options)  # a missing --include-dir is a user error (exit 1)
        except TargetError as err:
            return err
        return None

    err = _run_guarded(ctx, "options", check)
    if err is not None:
        raise click.UsageError(f"{', '.join(_OPTION_FLAGS[k] for k in options)}: {err}",
                               ctx=ctx) from None
    return t


_OPTION_FLAGS = {"npu_arch": "--npu-arch", "workers": "--workers",
                 "include_dirs": "--include-dir"}  # target options by flag

_QUIET = click.option("-q", "--quiet", is_flag=True,
                      help="No progress line (shown on a terminal when a step takes over 0.5 s).")


def _progress(quiet: bool) -> None:
    """Progress on a terminal (stderr a tty) unless --quiet: docs/tools.md, "Progress"."""
    from . import progress

    progress.enable(sys.stderr if sys.stderr.isatty() and not quiet else None)


_INCLUDE_DIR = click.option(
    "--include-dir", "include_dirs", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
    help="cpu_sim: a directory the headers of `extern cpp` bodies are found in (repeatable).")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--target", "target_name", type=click.Choice(list(TARGETS)), default="cpu_sim",
              show_default=True,
              help="Back end: cpu_sim (a runnable artifact), ascend_npu (a CANN project; needs "
                   "-o DIR); ref interprets the IR when run and has nothing to build.")
@click.option("--emit", type=click.Choice(["ast", "ir", "c"]), default=None,
              help="Print an intermediate form instead of building: the parsed program, the IR, "
                   "or the generated C.")
@click.option("-o", "--output", type=click.Path(), default=None,
              help="With --emit: the file to write. Otherwise: the artifact directory to write.")
@click.option("--schedule", default=None, help="The schedule to check exists (default: main or the only one).")
@click.option("--depfile", type=click.Path(dir_okay=False), default=None,
              help="With -o: write a Makefile rule making the output depend on the module's source "
                   "files (for make -MD style builds).")
@click.option("--npu-arch", default=None, metavar="ARCH",
              help="ascend_npu: the default --npu-arch of the project's CMakeLists.txt (dav-2201).")
@_INCLUDE_DIR
@click.option("--mesh", "meshes", multiple=True, metavar="AXIS=N",
              callback=lambda ctx, param, values: _mesh_sizes(ctx, param, values),  # below
              help="Devices along a mesh axis (overrides its size; --emit ir shows the result).")
@_opt_options
@_QUIET
@click.pass_context
def compile(ctx: click.Context, file: str, target_name: str, emit: Optional[str],
            output: Optional[str], schedule: Optional[str], depfile: Optional[str],
            npu_arch: Optional[str], include_dirs: tuple, meshes, opt_level: Optional[int],
            print_after, time_passes: bool, verify_each: bool, quiet: bool) -> None:
    """Check FILE and build it for TARGET (or print an intermediate form)."""
    _progress(quiet)
    from . import driver

    options = {"npu_arch": npu_arch} if npu_arch is not None else {}
    if include_dirs:
        options["include_dirs"] = include_dirs
    target = _target(ctx, target_name, options)
    if depfile and not output:
        raise click.UsageError("--depfile needs -o: the rule it writes is about the output",
                               ctx=ctx)
    if target.product is None:
        raise click.UsageError(f"--target {target.name} has nothing to build: it interprets the "
                               f"IR when run (`wspc run FILE --target {target.name}`)")
    if not target.runs_here:  # its product is a tree to ship, written to -o
        if emit is not None:
            raise click.UsageError(f"--emit does not apply to --target {target.name}: it writes a "
                                   "project directory (use --target cpu_sim --emit ...)")
        if not output:
            raise click.UsageError(f"--target {target.name} writes {target.product}: give its "
                                   "directory with -o DIR")
    env = _run_guarded(ctx, "check", lambda: driver.check_file(file))
    deps = [f.path for f in env.files]  # every source file read, each once
    if depfile:  # a name make cannot read back is refused before anything is written
        _run_guarded(ctx, "check", lambda: _make_words([output or file, *deps], depfile))
    if emit == "ast":
        from .frontend.printer import dump

        _emit(ctx, output, driver.deep(lambda: "".join(dump(f) for f in env.files)), depfile,
              deps)
        return
    ir = _run_guarded(ctx, "lower", lambda: driver.lower(env))
    _check_pass_names(ctx, print_after)
    ir, pm = _run_guarded(ctx, "optimise", lambda: driver.optimize(
        ir, opt_level, verify_each=verify_each, print_after=print_after, time_passes=time_passes,
        out=sys.stderr, mesh={p.name: p.value for p in meshes}))
    if time_passes:
        click.echo(pm.report(), err=True, nl=False)
    name = None
    if schedule is not None or target.one_schedule:
        name = _run_guarded(ctx, "compile", lambda: driver.choose_schedule(ir, schedule))
    if emit == "ir":
        from .ir.printer import print_module

        _emit(ctx, output, driver.deep(lambda: print_module(ir)), depfile, deps)
        return
    emitted = _run_guarded(ctx, "emit", lambda: driver.emit(target, ir, name, options))
    if emit == "c":
        _emit(ctx, output, "".join(f"/* ==== {n} ==== */\n{t}" for n, t in sorted(emitted.files.items())
                                   if n.endswith((".c", ".cpp"))), depfile, deps)
        return
    if emitted.warnings:
        from .diagnostics import render

        for w in emitted.warnings:
            click.echo(render(w, dict(ir.sources)), err=True)
    artifact = _run_guarded(ctx, "build", lambda: driver.build(target, emitted))
    if target.runs_here:
        if output:
            _run_guarded(ctx, "write", lambda: _write_output(output, lambda: artifact.write(output)))
        if depfile:
            # the rule's target is the file make tracks: the library inside the artifact directory
            _write_depfile(ctx, depfile, f"{output}/{artifact.library.name}", deps)
        where = output or str(artifact.directory)
        click.echo(f"{file}: built {where} ({'cached' if artifact.cached else 'compiled'})")
        return
    _run_guarded(ctx, "write", lambda: _write_output(output, lambda: artifact.write(output)))
    if depfile:
        _write_depfile(ctx, depfile, f"{output}/CMakeLists.txt", deps)
    click.echo(f"{file}: wrote {output} ({target.name}, schedule `{name}`, "
               f"{len(artifact.files)} files)")


def _write_output(path: str, write: Callable[[], object]) -> None:
    """Run `write` (it writes `path` atomically); a path that cannot be written is the user's
    error naming it, and leaves nothing behind."""
    from .diagnostics import Diagnostic, WspError
    from .spans import Span

    try:
        write()
    except OSError as err:
        raise WspError([Diagnostic(Span("<command line>", 0, 0, 0, 0), "io",
                                   f"cannot write {path}: {err.strerror or err}")]) from None


def _make_words(names: list[str], depfile: str) -> list[str]:
    """`names` escaped as make reads them in a rule (as `gcc -MD` writes them: `\\ ` for a
    space, `\\#`, `$$`); a name make cannot read back (a line break in it) is an error."""
    from .diagnostics import Diagnostic, WspError, printable
    from .spans import Span

    words = []
    for name in names:
        if "\n" in name or "\r" in name:
            raise WspError([Diagnostic(Span(f"--depfile {printable(depfile)}", 0, 0, 0, 0), "io",
                                       f"`{printable(name)}` cannot be named in a Makefile rule "
                                       "(a line break in a file name)")])
        words.append(name.replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$"))
    return words


def _write_depfile(ctx: click.Context, path: str, target: str, deps: list[str]) -> None:
    """A Makefile rule `target: deps`, written after the output (so a failed compile leaves the
    old rule), and an empty rule for each imported file, as `cc -MP` writes: deleting an import
    must not make the next `make` fail for want of a rule to make it."""
    from .files import write_atomic

    words = _make_words([target, *deps], path)
    text = f"{words[0]}: {' '.join(words[1:])}\n" + "".join(f"\n{w}:\n" for w in words[2:])
    _run_guarded(ctx, "write", lambda: _write_output(path, lambda: write_atomic(path, text)))


def _emit(ctx: click.Context, output: Optional[str], text: str, depfile: Optional[str],
          deps: list[str]) -> None:
    if output:
        from .files import write_atomic

        _run_guarded(ctx, "write", lambda: _write_output(output, lambda: write_atomic(output, text)))
        if depfile:
            _write_depfile(ctx, depfile, output, deps)
    else:
        click.echo(text, nl=False)


class _Pair(NamedTuple):
    """One `NAME=VALUE` of a repeatable option; `where` is the option as given
    (`--bind R=16`), which diagnostics about it name."""

    name: str
    value: Any
    where: str


def _pairs_of(option: str):
    """A click callback: the `NAME=VALUE`s of `option` as `_Pair`s, each name at most once."""

    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[_Pair]:
        out: list[_Pair] = []
        seen: dict[str, str] = {}
        for v in values:
            name, sep, rest = v.partition("=")
            name, rest = name.strip(), rest.strip()
            if not sep or not name or not rest:
                raise click.BadParameter(f"expected NAME=VALUE, got {v!r}", ctx=ctx,
                                         param_hint=option)
            if name in seen:
                raise click.BadParameter(f"`{name}` is given twice ({option} {seen[name]} and "
                                         f"{option} {v})", ctx=ctx, param_hint=option)
            seen[name] = v
            out.append(_Pair(name, rest, f"{option} {name}={rest}"))
        return out

    return parse


def _binds(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[_Pair]:
    """`--bind SYM=N`: N an integer as Python writes one, in ASCII digits only (`4096`,
    `0x1000`, `4_096`), from 0 to 2^63 - 1 (docs/running.md, "Command-line values")."""
    from .limits import INT64_MAX

    out = []
    for pair in _pairs_of("--bind")(ctx, param, values):
        name, text = pair.name, pair.value
        try:
            if not text.isascii():
                raise ValueError(text)
            value = int(text, 0)
        except ValueError:
            raise click.BadParameter(f"{name}={text}: not an integer (ASCII digits, or 0x, 0o, "
                                     "0b and _ as Python writes integers)", ctx=ctx,
                                     param_hint="--bind") from None
        if value < 0:
            raise click.BadParameter(f"{name}={text}: a sym is a non-negative integer", ctx=ctx,
                                     param_hint="--bind")
        if value > INT64_MAX:
            raise click.BadParameter(f"{name}={text}: more than a sym can be (2^63 - 1: the "
                                     "runtime computes in int64)", ctx=ctx, param_hint="--bind")
        out.append(pair._replace(value=value))
    return out


def _mesh_sizes(ctx: click.Context, param: click.Parameter,
                values: tuple[str, ...]) -> list[_Pair]:
    """`--mesh AXIS=N`: N a decimal integer (a size below 1 is the driver's diagnostic)."""
    out = []
    for pair in _pairs_of("--mesh")(ctx, param, values):
        text = pair.value
        if not (text.isascii() and text.lstrip("-").isdigit()):
            raise click.BadParameter(f"{pair.name}={text}: not an integer", ctx=ctx,
                                     param_hint="--mesh")
        out.append(pair._replace(value=int(text)))
    return out


class _Size(click.ParamType):
    """`--max-memory SIZE`: `8G`, `512M`, `1.5GiB`, `4096` (binary units)."""

    name = "SIZE"

    def convert(self, value, param, ctx):
        from .limits import MemoryLimit, parse_size

        if isinstance(value, MemoryLimit):
            return value
        try:
            return MemoryLimit(parse_size(value), f"--max-memory {value}", True)
        except ValueError as err:
            self.fail(str(err), param, ctx)


def _named(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    """A click callback: a file option given is a file name, not an empty string (which
    would otherwise read as the option not given)."""
    if value is not None and not value.strip():
        raise click.BadParameter("an empty file name", ctx=ctx, param=param)
    return value


_at = run_io.at


@main.command()
@click.argument("target_path", metavar="FILE|DIR", type=click.Path())
@click.option("--schedule", default=None, help="The schedule to run (default: main or the only one).")
@click.option("--bind", "binds", multiple=True, metavar="SYM=N", callback=_binds,
              help="Bind a sym (an integer: 4096, 0x1000, 4_096).")
@click.option("--input", "inputs", multiple=True, metavar="NAME=F.npy",
              callback=_pairs_of("--input"), help="An input or inout array.")
@click.option("--inputs", "inputs_npz", type=click.Path(), default=None, callback=_named,
              metavar="F.npz",
              help="Input arrays by name from one .npz file.")
@click.option("--output", "outputs", multiple=True, metavar="NAME=F.npy",
              callback=_pairs_of("--output"),
              help="Write an output or inout array (only after a successful run).")
@click.option("--outputs", "outputs_npz", type=click.Path(), default=None, callback=_named,
              metavar="F.npz",
              help="Write every output and inout array into one .npz file.")
@click.option("--random-inputs", type=click.IntRange(min=0), default=None, metavar="SEED",
              help="Fill inputs that have no array with reproducible random data.")
@click.option("--workers", type=click.IntRange(1, MAX_WORKERS), default=None,
              help=f"Worker threads, 1 to {MAX_WORKERS} (default: the host's cores).")
@click.option("--max-memory", type=_Size(), default=None,
              help="The most memory the run's tensors may need, e.g. 8G (default: the machine's).")
@click.option("--target", "target_name", type=click.Choice(list(TARGETS)), default="cpu_sim",
              show_default=True,
              help="cpu_sim, or ref: the NumPy reference interpreter (slow; the oracle); "
                   "ascend_npu does not run here.")
@click.option("--trace", "trace_file", type=click.Path(), default=None, callback=_named,
              metavar="T.json", help="Write the run (real and simulated) as a Chrome trace.")
@click.option("--machine", "machine_file", type=click.Path(dir_okay=False), default=None,
              callback=_named,
              metavar="M.toml", help="The cycle model's machine (default: the built-in ascend910b).")
@click.option("--report", "report_file", type=click.Path(), default=None, callback=_named,
              metavar="R.html",
              help="Write the run's timeline report: one self-contained HTML page.")
@click.option("--stats", is_flag=True,
              help="Print task count, times, simulated cycles, loads and a per-kernel table.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--mesh", "meshes", multiple=True, metavar="AXIS=N", callback=_mesh_sizes,
              help="Devices along a mesh axis (binds the sym sizing it, or overrides its size).")
@click.option("--check-replicas", is_flag=True,
              help="On a mesh, check that every replica of each output agrees.")
@click.option("--launcher", type=click.Choice(["none", "mpi"]), default="none", show_default=True,
              help="mpi: one process per device under mpiexec (the `mpi` extra; "
                   "docs/running.md, \"Running on MPI\").")
# the launcher's ranks: this command again, as one rank of an MPI run (launch.py)
@click.option("--rank-dir", "rank_dir", type=click.Path(file_okay=False), default=None,
              hidden=True)
@_INCLUDE_DIR
@_opt_options
@_QUIET
@click.pass_context
def run(ctx: click.Context, target_path: str, schedule: Optional[str], binds, inputs, inputs_npz,
        outputs, outputs_npz, random_inputs, workers, max_memory, target_name, trace_file,
        machine_file, report_file, stats, as_json, meshes, check_replicas, launcher, rank_dir,
        include_dirs, opt_level, print_after, time_passes, verify_each, quiet) -> None:
    """Run a module (a .wsp file, or an artifact directory from `wspc compile -o`).

    Every output file (--output, --outputs, --trace, --report) is checked before anything
    runs and written only when the run succeeded, all of them or none."""
    _progress(quiet or rank_dir is not None)
    if rank_dir is not None:
        from . import launch

        _run_guarded(ctx, "mpi", lambda: launch.rank_begin(rank_dir))
    target = _target(ctx, target_name, {"include_dirs": include_dirs} if include_dirs else {})
    if not target.runs_here:
        raise click.UsageError(f"--target {target.name} does not run here: it makes "
                               f"{target.product} (`wspc compile FILE --target {target.name} "
                               "-o DIR`)")
    if not target.cycle_model and (trace_file or machine_file):
        raise click.UsageError(f"--trace and --machine need --target cpu_sim ({target.name} has "
                               "no cycle model)")
    if not target.cycle_model and report_file:
        raise click.UsageError(f"--report needs --target cpu_sim ({target.name} records no "
                               "trace to draw)")
    destinations = [(p.value, p.where) for p in outputs]
    destinations += [(outputs_npz, f"--outputs {outputs_npz}")] if outputs_npz else []
    destinations += [(trace_file, f"--trace {trace_file}")] if trace_file else []
    destinations += [(report_file, f"--report {report_file}")] if report_file else []
    _run_guarded(ctx, "outputs", lambda: _check_destinations(ctx, destinations))
    machine = None
    if machine_file:
        from .backends.machine import load_machine

        _run_guarded(ctx, "machine", lambda: run_io.check_source(machine_file, "machine file"))
        machine = _run_guarded(ctx, "machine", lambda: load_machine(machine_file))
    _check_pass_names(ctx, print_after)
    passes = {"opt_level": opt_level, "print_after": print_after, "time_passes": time_passes,
              "verify_each": verify_each}
    mesh = {p.name: p.value for p in meshes}
    bind = {p.name: p.value for p in binds}
    program = _run_guarded(ctx, "compile", lambda: _program(target_path, target.name, schedule,
                                                           workers, passes, include_dirs,
                                                           mesh, bind))
    if time_passes and program.passes is not None:
        click.echo(program.passes.report(), err=True, nl=False)
    program.machine = machine
    _run_guarded(ctx, "inputs", lambda: run_io.check_names(program, binds, inputs, outputs))
    if max_memory is None:
        from .limits import memory_limit

        max_memory = memory_limit()
    arrays, sources = _run_guarded(ctx, "inputs", lambda: run_io.read_inputs(program, inputs, inputs_npz,
                                                                       max_memory))
    if launcher == "mpi":  # everything is checked: now the ranks run it (launch.py)
        _launch_mpi(ctx, program)
    rank = None
    if rank_dir is not None:
        from . import launch

        _run_guarded(ctx, "mpi", lambda: launch.attach(program))
        rank = launch.RANK
    results = _run_guarded(ctx, "run", lambda: program.run_arrays(
        # the per-kernel table of --stats and --json comes from the trace's per-task times
        arrays, bind, random_inputs, workers, sources,
        trace=bool(trace_file or report_file or stats or as_json),
        max_memory=max_memory, check_replicas=check_replicas))
    trace_write = None
    if rank is not None:  # rank 0 writes every rank's trace, one process track per device
        texts = _run_guarded(ctx, "mpi", lambda: launch.gather_traces(
            program.trace.to_json() if trace_file or report_file else None))
        if rank.rank != 0:
            _run_guarded(ctx, "mpi", launch.rank_end)
            return
        if trace_file or report_file:
            from .backends.cpu.trace import merge_devices

            merged = merge_devices(texts).encode("utf-8")

            def trace_write(fh):
                fh.write(merged)
    report_write = None
    if report_file:  # the page of the run's trace object: the trace need not be written
        report_write = _run_guarded(ctx, "report", lambda: _report_of(program, trace_write))
    _run_guarded(ctx, "outputs", lambda: run_io.write_outputs(program, results, outputs, outputs_npz,
                                                        trace_file, trace_write, report_file,
                                                        report_write))
    if rank is not None:
        _run_guarded(ctx, "mpi", launch.rank_end)
    if stats or as_json:
        info = program.stats.as_dict()
        info["schedule"] = program.schedule
        info["target"] = program.target
        if as_json:
            import json

            click.echo(json.dumps(info, sort_keys=True))
        else:
            for line in run_io.stats_lines(info):
                click.echo(line)


def _check_destinations(ctx: click.Context, destinations: list[tuple[str, str]]) -> None:
    """Every output file can be written (`files.check_destination`), and no two are one."""
    from .diagnostics import Diagnostic, WspError
    from .files import FileError, check_destination

    diags, seen = [], {}
    for path, where in destinations:
        try:
            real = check_destination(path)
        except FileError as err:
            diags.append(Diagnostic(_at(where), "io", err.message))
            continue
        if real in seen:
            raise click.UsageError(f"{seen[real]} and {where}: the same destination twice "
                                   "(one would overwrite the other)", ctx=ctx)
        seen[real] = where
    if diags:
        raise WspError(diags)


def _report_of(program, merged_write=None):
    """What `--report` writes: the page of the run's trace (of every rank's, merged, under
    MPI: `merged_write` writes that trace's JSON)."""
    import io
    import json

    from . import report

    if merged_write is not None:
        buf = io.BytesIO()
        merged_write(buf)
        data = json.loads(buf.getvalue())
    else:
        data = program.trace.to_chrome_trace()
    page = report.render(data, f"the run of {program.module.name}").encode("utf-8")
    return lambda fh: fh.write(page)


def _program(path: str, target: str, schedule: Optional[str], workers: Optional[int],
             passes: dict, include_dirs: tuple = (), mesh: Optional[dict] = None,
             bind: Optional[dict] = None):
    from pathlib import Path

    from .api import load_artifact, program_for_file

    p = Path(path)
    if p.is_dir():
        if mesh:
            raise click.UsageError("--mesh sizes a mesh when a module is compiled; an artifact "
                                   "directory keeps the sizes it was compiled with")
        return load_artifact(p, schedule, workers, target)
    run_io.check_source(path, "file")
    level = passes["opt_level"]
    flags = {k: v for k, v in passes.items() if k != "opt_level" and v}
    return program_for_file(p, target, schedule, workers, level, include_dirs=include_dirs,
                            mesh=mesh, bind=bind, **flags)


def _launch_mpi(ctx: click.Context, program) -> None:
    """`--launcher mpi`: this command again on one rank per device; prints what the ranks
    report and exits with their status (launch.py)."""
    from . import launch

    install = _run_guarded(ctx, "mpi", lambda: launch.prepare(program))
    outcome = _run_guarded(ctx, "mpi", lambda: launch.launch(install, launch.devices(program),
                                                             sys.argv[1:]))
    click.echo(outcome.stdout, nl=False)
    click.echo(outcome.stderr, err=True, nl=False)
    ctx.exit(outcome.status)


@main.command()
@click.argument("trace_file", metavar="RUN.json", type=click.Path())
@click.option("-o", "--output", "output", type=click.Path(), required=True,
              metavar="REPORT.html", help="The page to write (replaced atomically).")
@click.pass_context
def report(ctx: click.Context, trace_file: str, output: str) -> None:
    """Write the timeline report of a run: one self-contained HTML page (real and modelled
    timelines, the critical path, channels, dispatchers, the per-kernel table) from the
    Chrome trace `wspc run FILE --trace RUN.json` wrote (docs/tools.md)."""
    from . import report as pages

    _run_guarded(ctx, "outputs", lambda: _check_destinations(ctx, [(output, output)]))
    data = _run_guarded(ctx, "report", lambda: pages.read_trace(trace_file))
    html = _run_guarded(ctx, "report", lambda: pages.render(data, trace_file))

    def write() -> None:
        from .diagnostics import file_error
        from .files import FileError

        try:
            pages.write(output, html)
        except FileError as err:
            raise file_error(err) from None
        except OSError as err:
            raise file_error(FileError(output, f"cannot write it: {err.strerror or err}")) from None

    _run_guarded(ctx, "outputs", write)


@main.command()
@click.pass_context
def lsp(ctx: click.Context) -> None:
    """Run the language server over standard input and output, for editors (docs/tools.md)."""
    from .lsp import serve

    _run_guarded(ctx, "lsp", serve)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--schedule", default=None, help="The schedule to start from (default: main or the only one).")
@click.option("--budget", type=int, default=None, metavar="N", help="Candidates to simulate (default 48; deterministic).")
@click.option("--seconds", type=float, default=None, metavar="S", help="Search about S seconds instead (not deterministic).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The search's seed.")
@click.option("--apply", "apply_", is_flag=True,
              help="Add the winner to FILE as a new schedule, and write its tile sizes where they are written "
                   "(in FILE, or in the imported file that declares the const).")
@click.option("--tile-sizes/--no-tile-sizes", default=True, show_default=True,
              help="Also search the tile sizes: consts and literal Constexpr arguments that size kernel tiles "
                   "(where the outputs stay the same).")
@click.option("--name", default="tuned", show_default=True, help="The new schedule's name for --apply.")
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="Candidates to list.")
@click.option("--bind", "binds", multiple=True, metavar="SYM=N", callback=_binds, help="Bind a sym (as `wspc run`).")
@click.option("--input", "inputs", multiple=True, metavar="NAME=F.npy", callback=_pairs_of("--input"),
              help="An input whose data decides the task space (default: random data).")
@click.option("--mesh", "meshes", multiple=True, metavar="AXIS=N", callback=_mesh_sizes, help="As `wspc run`.")
@click.option("--machine", "machine_file", type=click.Path(dir_okay=False), default=None, callback=_named,
              metavar="M.toml", help="The cycle model's machine (default: the built-in ascend910b).")
@_QUIET
@click.pass_context
def tune(ctx: click.Context, file: str, schedule, budget, seconds, seed: int, apply_: bool, tile_sizes: bool,
         name: str, top: int, binds, inputs, meshes, machine_file, quiet: bool) -> None:
    """Search FILE's schedules on the cycle model and print the best (docs/tools.md)."""
    from . import tuning
    from .limits import memory_limit

    _progress(quiet)
    for path, what in ((file, "file"), (machine_file, "machine file")):
        if path:
            _run_guarded(ctx, "check", lambda path=path, what=what: run_io.check_source(path, what))
    job = _run_guarded(ctx, "tune", lambda: tuning.Job(file, budget, seconds, name if apply_ else None,
                                                       machine_file))
    _run_guarded(ctx, "inputs", lambda: run_io.check_names(job, binds, inputs, []))
    arrays, _ = _run_guarded(ctx, "inputs", lambda: run_io.read_inputs(job, inputs, None, memory_limit()))
    result = _run_guarded(ctx, "tune", lambda: job.search(
        schedule, {p.name: p.value for p in binds}, arrays, seed, {p.name: p.value for p in meshes},
        tile_sizes))
    click.echo(tuning.report(result, file, top))
    if apply_:
        written = _run_guarded(ctx, "tune", lambda: tuning.apply(result, file, name, [p.where for p in binds]))
        click.echo("")
        for path in written:
            if path != file:  # an imported file: every module that imports it gets the new sizes
                sizes = ", ".join(f"`{c.name} = {v}`" for c, v in result.changes() if c.file == path)
                click.echo(f"wrote {sizes} into {path} (imported by {file}: every module importing it gets the value)")
        click.echo(f"wrote schedule `{name}` into {file}")


# ---- wspc fmt (docs/tools.md, "wspc fmt"; its files: frontend/formatting.py) -----------------


def _fmt_one(path: str, check_only: bool, diff: bool) -> bool:
    """Format one file (`-`: standard input to standard output); True when it changes."""
    from .driver import format_text
    from .frontend import formatting as F

    text = F.read(path)
    formatted = format_text(text, F.name_of(path))
    changed = formatted != text
    if diff and changed:
        click.echo(F.diff(path, text, formatted), nl=False)
    if check_only and changed:
        click.echo(F.name_of(path))
    elif path == F.STDIN and not (check_only or diff):
        click.echo(formatted, nl=False)
    elif changed and not (check_only or diff):
        F.write(path, formatted)
    return changed


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--check", "check_only", is_flag=True,
              help="Write nothing; print the files not formatted and exit 1 if there are any.")
@click.option("--diff", is_flag=True, help="Write nothing; print what would change as a unified diff.")
@click.pass_context
def fmt(ctx: click.Context, files: tuple[str, ...], check_only: bool, diff: bool) -> None:
    """Rewrite FILES (and the .wsp files below a directory) in the canonical layout.

    `-` formats standard input to standard output. A file that does not parse is reported
    and left as it is."""
    from .frontend.formatting import files_of

    failed = unformatted = False
    for path in files_of(files):
        changed = _run_guarded(ctx, "fmt", lambda path=path: _fmt_one(path, check_only, diff),
                               exit_on_error=False)
        failed, unformatted = failed or changed is None, unformatted or bool(changed)
    if failed or (check_only and unformatted):
        ctx.exit(EXIT_USER)


@main.group()
def cache() -> None:
    """The build cache ($WSPC_CACHE_DIR or ~/.cache/wspc)."""


@cache.command("info")
@click.pass_context
def cache_info(ctx: click.Context) -> None:
    """Where the cache is and what it holds (damaged and temporary entries counted apart)."""
    from .backends.cpu.build import cache_info as info_of

    info = _run_guarded(ctx, "cache", info_of)
    click.echo(f"directory: {info['directory']}")
    if info["problem"]:
        click.echo(f"unusable:  {info['problem']} (builds go to a temporary cache; set "
                   "WSPC_CACHE_DIR to a writable directory)")
    click.echo(f"modules:   {info['modules']}")
    click.echo(f"runtimes:  {info['runtimes']}")
    click.echo(f"index:     {info['index']}")
    click.echo(f"damaged:   {info['damaged']} (rebuilt when next needed)")
    click.echo(f"temporary: {info['temporary']} (of builds running or killed)")
    if info["other"]:
        click.echo(f"other:     {info['other']} (not wspc's; `wspc cache clear` leaves them)")
    click.echo(f"size:      {info['bytes'] / 1e6:.1f} MB")


@cache.command("clear")
@click.pass_context
def cache_clear(ctx: click.Context) -> None:
    """Remove everything wspc keeps in the cache (damaged and temporary entries too)."""
    from .backends.cpu.build import cache_clear as clear
    from .files import cache_dir

    result = _run_guarded(ctx, "cache", clear)
    click.echo(f"removed {result['bytes'] / 1e6:.1f} MB from {cache_dir()}")
    if result["in_use"]:
        click.echo(f"kept {result['in_use']} temporary entries of builds still running")
    if result["failed"]:
        for path, reason in result["failed"]:
            click.echo(f"{path}: error: cannot remove it: {reason}", err=True)
        ctx.exit(EXIT_USER)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
