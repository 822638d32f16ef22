"""How passes run: `Pass` (one transformation, named), `PassManager` (runs passes in order)
and `PassError` (a pass that failed: a compiler bug naming it).

A pass is a function `Module -> Module` wrapped with a name, so the manager can time it
(`--time-passes`), print the IR after it (`--print-after NAME`), verify after it
(`--verify-each`) and name it when it fails. Users add their own passes in Python through the
same classes (`ptowsp.passes`):

    pm = PassManager()
    pm.add(PrintPass("before"))
    pm.add(FlattenCombinePass())
    pm.add(PrintPass("after"))
    m = pm.run(module.ir)

A pass returns the same `Module` object when it changed nothing (so "unchanged" is `is`).
Which passes `-O1` .. `-O3` run is the registry's (`passes/__init__.py`).
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, TextIO

from ...diagnostics import InternalError, WspError
from .. import nodes as N
from ..printer import print_module
from ..verify import verify


class Pass(ABC):
    """One transformation of a module. Subclasses set `name` (a verb, as `--print-after` spells
    it) and implement `run`; a function `Module -> Module` becomes one with `FunctionPass`."""

    name = "pass"
    description = ""

    def __init__(self, name: Optional[str] = None):
        # the prototype's `Pass(name=None)`: a subclass may call `super().__init__("mine")`
        if name is not None:
            self.name = name

    @abstractmethod
    def run(self, m: N.Module) -> N.Module:
        """The module after the pass (the same object when nothing changed)."""

    def __call__(self, m: N.Module) -> N.Module:
        return self.run(m)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FunctionPass(Pass):
    """A pass from a function `Module -> Module`."""

    def __init__(self, name: str, fn: Callable[[N.Module], N.Module], description: str = ""):
        self.name = name
        self.fn = fn
        self.description = description or (fn.__doc__ or "").strip().split("\n")[0]

    def run(self, m: N.Module) -> N.Module:
        return self.fn(m)

    def __repr__(self) -> str:
        return f"FunctionPass({self.name!r})"


class PrintPass(Pass):
    """Prints the module's IR (with a heading) and returns it unchanged."""

    name = "print"

    def __init__(self, label: str = "", out: Optional[TextIO] = None):
        self.label = label
        self.out = out

    def run(self, m: N.Module) -> N.Module:
        out = self.out or sys.stdout
        out.write(f"; ---- IR {self.label}\n".replace(" \n", "\n") + print_module(m))
        return m


class PassError(InternalError):
    """A pass raised, or left IR the verifier rejects: a compiler bug in stage "pass `NAME`"."""

    def __init__(self, pass_name: str, cause: BaseException):
        super().__init__(f"pass `{pass_name}`", f"{type(cause).__name__}: {cause}")
        self.pass_name = pass_name
        self.cause = cause


@dataclass(frozen=True)
class Timing:
    """One pass's run: its name, its time and whether it changed the module."""

    name: str
    ms: float
    changed: bool


class PassManager:
    """Runs passes in order. `verify_each`: run `ir.verify` after every pass; `print_after`:
    names of passes (or "all") after which the IR is printed to `out`; `time_passes`: keep each
    pass's time (`timings`, `report()`)."""

    def __init__(self, passes: Iterable[Pass] = (), *, verify_each: bool = False,
                 print_after: Iterable[str] = (), time_passes: bool = False,
                 out: Optional[TextIO] = None):
        self.passes: list[Pass] = list(passes)
        self.verify_each = verify_each
        self.print_after = set(print_after)
        self.time_passes = time_passes
        self.out = out
        self.timings: list[Timing] = []

    def add(self, p: Pass) -> "PassManager":
        if not isinstance(p, Pass):
            raise TypeError(f"PassManager.add takes a Pass, not {type(p).__name__}")
        self.passes.append(p)
        return self

    def run(self, m: N.Module, verbose: bool = False) -> N.Module:
        """The module after every pass, in order. `verbose` prints each pass's name and time."""
        out = self.out or sys.stderr
        self.timings = []
        for p in self.passes:
            t0 = time.perf_counter()
            try:
                after = p.run(m)
                if not isinstance(after, N.Module):
                    raise TypeError(f"returned {type(after).__name__}, not a Module")
                if self.verify_each:
                    verify(after)
            except Exception as err:  # noqa: BLE001 - a pass's failure is a bug: name the pass
                if isinstance(err, WspError):
                    raise
                raise PassError(p.name, err) from err
            ms = (time.perf_counter() - t0) * 1000
            self.timings.append(Timing(p.name, ms, after is not m))
            if verbose:
                out.write(f"pass {p.name}: {ms:.2f} ms{'' if after is not m else ' (no change)'}\n")
            if p.name in self.print_after or "all" in self.print_after:
                out.write(f"; ---- IR after {p.name}\n" + print_module(after))
            m = after
        return m

    def report(self) -> str:
        """The `--time-passes` table."""
        total = sum(t.ms for t in self.timings)
        lines = ["pass                    time (ms)   changed"]
        for t in self.timings:
            lines.append(f"{t.name:<22} {t.ms:10.2f}   {'yes' if t.changed else 'no'}")
        lines.append(f"{'total':<22} {total:10.2f}")
        return "\n".join(lines) + "\n"


__all__ = ["Pass", "FunctionPass", "PrintPass", "PassManager", "PassError", "Timing"]
