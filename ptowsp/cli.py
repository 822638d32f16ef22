"""The `wspc` command: check and compile `.wsp` modules.

Exit status: 0 success, 1 a user error (diagnostics printed), 2 bad command-line usage,
70 an internal error (the message names the stage; the traceback only with `--debug`).
Importing this module must stay cheap: no numpy, no cffi, Lark only when a file is parsed.
"""

from __future__ import annotations

import gc
import sys
from typing import Callable, TypeVar

import click

from . import __version__

EXIT_USER = 1
EXIT_INTERNAL = 70

T = TypeVar("T")


def _run_guarded(ctx: click.Context, stage: str, fn: Callable[[], T], exit_on_error: bool = True):
    """Run one stage: user errors print diagnostics (exit 1, or None when `exit_on_error` is
    false so that the caller can go on), bugs exit 70."""
    from .frontend.diagnostics import InternalError, WspError

    try:
        return fn()
    except WspError as err:
        click.echo(err.render(), err=True)
        if not exit_on_error:
            return None
        ctx.exit(EXIT_USER)
    except (KeyboardInterrupt, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except RecursionError:
        click.echo("error: the program is nested too deeply to compile", err=True)
        ctx.exit(EXIT_USER)
    except Exception as err:  # noqa: BLE001 - the one place bugs are caught
        where = err.stage if isinstance(err, InternalError) else stage
        click.echo(f"wspc: internal error in {where}: {type(err).__name__}: {err}", err=True)
        click.echo("This is a bug in wspc; please report it with the input that caused it.", err=True)
        if ctx.find_root().params.get("debug"):
            import traceback  # only here: importing it costs every run ~10 ms

            traceback.print_exc()
        else:
            click.echo("Run again with `wspc --debug ...` to see the traceback.", err=True)
        ctx.exit(EXIT_INTERNAL)
    raise AssertionError("unreachable")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    from .frontend.checker import check_file

    failed = False
    for path in files:
        env = _run_guarded(ctx, "check", lambda path=path: check_file(path), exit_on_error=False)
        if env is None:
            failed = True
        elif not quiet:
            click.echo(f"{path}: ok: module `{env.name}`: {_summary(env)}")
    if failed:
        ctx.exit(EXIT_USER)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--target", type=click.Choice(["cpu_sim", "ascend_npu"]), default="cpu_sim",
              show_default=True, help="Back end.")
@click.option("--emit", type=click.Choice(["ast"]), default=None,
              help="Print an intermediate form instead of building (`ast`: the parsed program).")
@click.option("-o", "--output", type=click.Path(), default=None, help="Write to this path.")
@click.pass_context
def compile(ctx: click.Context, file: str, target: str, emit: str | None, output: str | None) -> None:
    """Check FILE and compile it (today: `--emit ast`)."""
    from .frontend.checker import check_file
    from .frontend.printer import dump

    env = _run_guarded(ctx, "check", lambda: check_file(file))
    if emit == "ast":
        text = "".join(dump(f) for f in env.files)
        if output:
            _write_atomic(output, text)
        else:
            click.echo(text, nl=False)
        return
    click.echo(f"wspc: error: the {target} back end is not part of this build yet; "
               "use `--emit ast` to see the checked program", err=True)
    ctx.exit(2)


def _write_atomic(path, text: str) -> None:
    """Write via a temporary file and rename, so no reader sees a partial file."""
    import os
    import tempfile
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
