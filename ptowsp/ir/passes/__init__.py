"""The optimiser: `PIPELINE`, the ordered passes of `-O1` .. `-O3`, and the `PassManager`.

Every pass is a pure function `Module -> Module` in a module of its own named by its verb
(`flatten.py` exports `flatten_blocks`); a `Pass` object wraps it with a name, so the manager
can time it (`--time-passes`), print the IR after it (`--print-after NAME`), verify after it
(`--verify-each`) and name it when it fails. Users add their own passes in Python through the
same classes (`ptowsp.passes`):

    pm = PassManager()
    pm.add(PrintPass("before"))
    pm.add(FlattenCombinePass())
    pm.add(PrintPass("after"))
    m = pm.run(module.ir)

A pass returns the same `Module` object when it changed nothing (so "unchanged" is `is`).
`-O0` runs no pass: what was lowered is what runs.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, TextIO

from .. import nodes as N


class Pass:
    """One transformation of a module. Subclasses set `name` (a verb, as `--print-after` spells
    it) and implement `run`; a function `Module -> Module` becomes one with `FunctionPass`."""

    name = "pass"
    description = ""

    def run(self, m: N.Module) -> N.Module:
        raise NotImplementedError

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
        from ..printer import print_module

        out = self.out or sys.stdout
        out.write(f"; ---- IR {self.label}\n".replace(" \n", "\n") + print_module(m))
        return m


class PassError(Exception):
    """A pass raised, or left IR the verifier rejects: a compiler bug naming the pass."""

    def __init__(self, pass_name: str, cause: BaseException):
        super().__init__(f"pass `{pass_name}`: {type(cause).__name__}: {cause}")
        self.pass_name = pass_name
        self.cause = cause
        self.stage = f"pass `{pass_name}`"  # as InternalError names its stage


@dataclass
class Timing:
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
        from ..printer import print_module
        from ..verify import verify

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
                from ...diagnostics import WspError

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


# ---------------------------------------------------------------------------------------------
# The pipeline


def _pipeline():
    from .dead_tasks import eliminate_dead_tasks
    from .flatten import flatten_blocks
    from .fuse_tasks import fuse_tasks
    from .plan_kernels import plan_kernels
    from .simplify import simplify_module

    # (level, name, function): a pass runs at -O<level> and above, in this order
    return [
        # fold what lowering left decided at compile time: empty loops, constant `when`
        # branches, repeated kernel values; everything after sees a smaller tree
        (1, "simplify", simplify_module),
        # nested combine / sequential blocks into one: fusion looks at siblings, so it must see
        # them side by side
        (1, "flatten", flatten_blocks),
        # tasks whose writes nobody reads and no output receives, and then their kernels and
        # scratch tensors; after flattening (fewer blocks to look through)
        (1, "dead-tasks", eliminate_dead_tasks),
        # producer -> consumer tasks over one iteration space into one task (and adjacent grid
        # nests into one nest when that lets tasks fuse): after dead-tasks, so no dead reader
        # keeps an intermediate alive, and before kernel planning, which plans the fused kernels
        (2, "fuse-tasks", fuse_tasks),
        # kernel-local fusion into loop nests, temporaries in buffers reused by liveness: last,
        # so every kernel (fused ones too) is planned once its ops are final
        (2, "plan-kernels", plan_kernels),
    ]


def pass_names() -> list[str]:
    """Every pass of the pipeline, in order (what `--print-after` accepts)."""
    return [name for _, name, _ in _pipeline()]


def pipeline(level: int) -> list[Pass]:
    """The passes `-O<level>` runs."""
    return [FunctionPass(name, fn) for lv, name, fn in _pipeline() if lv <= level]


LEVELS = (0, 1, 2, 3)
DEFAULT_LEVEL = 2


def optimize(m: N.Module, level: int = DEFAULT_LEVEL, *, verify_each: bool = False,
             print_after: Iterable[str] = (), time_passes: bool = False,
             out: Optional[TextIO] = None) -> tuple[N.Module, PassManager]:
    """`m` through `-O<level>`'s pipeline; also returns the manager (timings)."""
    if level not in LEVELS:
        raise ValueError(f"optimisation level {level}: use 0, 1, 2 or 3")
    pm = PassManager(pipeline(level), verify_each=verify_each, print_after=print_after,
                     time_passes=time_passes, out=out)
    return pm.run(m), pm


__all__ = ["Pass", "FunctionPass", "PrintPass", "PassManager", "PassError", "Timing",
           "pipeline", "pass_names", "optimize", "LEVELS", "DEFAULT_LEVEL"]
