"""The `Target` protocol every back end implements for the driver, and what the back ends
share to implement it: checking a target's options, and `KeepsNothing` for a target whose
artifacts do not outlive the process. (`backends/__init__.py` lists the targets.)"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional, Protocol, Sequence, runtime_checkable


class TargetError(ValueError):
    """The caller named a target that does not exist, or an option its target does not take."""


class RunFailure(Exception):
    """A run failed for a reason that is not the program's (the runtime could not start, the
    task window in abort mode, an internal runtime error). A runnable raises a subclass; a
    fault of the program itself is a `WspError` at the construct to blame."""


class KernelCode(NamedTuple):
    """One kernel's generated source on a target: `code` defines the function `entry` (what
    the target's build compiles for that kernel, e.g. for `kernel.compile(...)` in Python)."""

    entry: str
    code: str


@runtime_checkable
class Target(Protocol):
    """What every back end offers the driver. `options` are the target's own settings (a
    mapping of names to values; `options()` checks them), e.g. cpu_sim's `workers` and
    ascend_npu's `AscendOptions` fields."""

    name: str  # as `--target` spells it
    runs_here: bool  # `open` gives a runnable; else it gives the product (to ship elsewhere)
    cycle_model: bool  # its runs replay on the cycle model (`simulate`, traces, `--machine`)
    one_schedule: bool  # `emit` makes one schedule's code (else every schedule's)
    product: Optional[str]  # what `build` makes, for messages; None: nothing to build

    def options(self, given: Mapping[str, Any]) -> Any:
        """The target's settings from `given`; a name it does not take is a `TargetError`."""

    def emit(self, module, schedule: Optional[str], options: Mapping[str, Any]) -> Any:
        """What the target makes of `module` (`.files`: path -> text, `.warnings`:
        diagnostics), as strings only. `schedule` is None when `one_schedule` is false and
        the caller chose none."""

    def kernel_code(self, module, kernel: str, options: Mapping[str, Any]) -> Optional[KernelCode]:
        """The generated source of the optimised `module`'s kernel `kernel`, exactly as `emit`
        writes it; None for a target that generates no kernel source (it interprets the IR).
        A kernel the target cannot generate is a `WspError` at the kernel, as from `emit`."""

    def build(self, emitted) -> Any:
        """The artifact: built (through a cache), or the product as it is."""

    def open(self, artifact) -> Any:
        """A runnable (`run(...)`, `cycle_model`) if the target runs here, else the product."""

    def load(self, directory: Path, options: Mapping[str, Any]) -> Any:
        """The artifact in `directory`, written by `artifact.write` before; a `WspError` if
        it is not one (or the target keeps no artifact directories)."""

    def cached(self, main: Path, opt_level: int, options: Mapping[str, Any],
               variant: str = "") -> Any:
        """The artifact built last from `main` (with its imports) at `opt_level` and
        `variant` (what else decided the build: a mesh's sizes, from the driver), if neither
        it nor wspc changed since; else None."""

    def remember(self, main: Path, files: Sequence[str], artifact, opt_level: int,
                 variant: str = "") -> None:
        """Note that `main` (with `files`, its imports included) built to `artifact`."""


def target_options(name: str, cls: type, given: Mapping[str, Any]):
    """`cls(**given)` for the dataclass of target `name`'s settings, with a name it has no
    field for reported as a `TargetError` (not Python's TypeError)."""
    if isinstance(given, cls):
        return given
    known = [f.name for f in fields(cls)]
    for key in given:
        if key not in known:
            raise TargetError(f"target {name} has no option `{key}` "
                              f"(its options: {', '.join(known) or 'none'})")
    return cls(**given)


class KeepsNothing:
    """`load`, `cached` and `remember` of a target whose artifacts do not outlive the process:
    no artifact directories, no index of compiled sources."""

    name: str

    def load(self, directory: Path, options: Mapping[str, Any]):
        from ..diagnostics import Diagnostic, WspError
        from ..spans import Span

        raise WspError([Diagnostic(Span(str(directory), 0, 0, 0, 0), "io",
                                   f"target {self.name} does not run artifact directories",
                                   "run the .wsp file, or run the directory on the target that "
                                   "built it (`wspc compile FILE.wsp -o DIR`)")])

    def cached(self, main: Path, opt_level: int, options: Mapping[str, Any],
               variant: str = ""):
        return None

    def remember(self, main: Path, files: Sequence[str], artifact, opt_level: int,
                 variant: str = "") -> None:
        return None
