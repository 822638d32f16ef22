"""The optimiser's pipeline: `PASSES`, every built-in pass in the order it runs, the level
from which it runs and why it sits where it does; `pipeline(level)` and `optimize`.

Each pass is a pure function `Module -> Module` in a module of its own, and one word names it
everywhere: the module (`dead_tasks.py`), the function (`dead_tasks(m)`) and, `_` written
`-`, what `--print-after` accepts and `--time-passes` shows (`dead-tasks`). `pipeline`,
`pass_names` and the public pass classes of `ptowsp.passes` are all made from `PASSES`. How
passes run (timing, printing, verifying, naming a pass that fails) is `manager.py`.
`-O0` runs no pass: what was lowered is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, TextIO

from .. import nodes as N
from . import dead_tasks, flatten, fuse_tasks, plan_kernels, simplify
from .manager import FunctionPass, PassManager


@dataclass(frozen=True)
class PassEntry:
    """A built-in pass: its function, the level from which it runs, why it sits where it does."""

    function: Callable[..., N.Module]
    level: int  # runs at -O<level> and above
    why: str

    @property
    def name(self) -> str:
        """The pass's name: its function's, `_` written `-` (`dead-tasks`)."""
        return self.function.__name__.replace("_", "-")


PASSES: tuple[PassEntry, ...] = (
    PassEntry(simplify.simplify, 1,
              "fold what lowering left decided at compile time: empty loops, constant `when` "
              "branches, repeated kernel values; everything after sees a smaller tree"),
    PassEntry(flatten.flatten, 1,
              "nested combine / sequential blocks into one: fusion looks at siblings, so it "
              "must see them side by side"),
    PassEntry(dead_tasks.dead_tasks, 1,
              "tasks whose writes nobody reads and no output receives, and then their kernels "
              "and scratch tensors; after flattening (fewer blocks to look through)"),
    PassEntry(fuse_tasks.fuse_tasks, 2,
              "producer -> consumer tasks over one iteration space into one task (and adjacent "
              "grid nests into one nest when that lets tasks fuse): after dead-tasks, so no "
              "dead reader keeps an intermediate alive, and before kernel planning, which "
              "plans the fused kernels"),
    PassEntry(plan_kernels.plan_kernels, 2,
              "kernel-local fusion into loop nests, temporaries in buffers reused by liveness: "
              "last, so every kernel (fused ones too) is planned once its ops are final"),
)

LEVELS = (0, 1, 2, 3)
DEFAULT_LEVEL = 2


def pass_names() -> list[str]:
    """Every pass of the pipeline, in order (what `--print-after` accepts)."""
    return [p.name for p in PASSES]


def pipeline(level: int) -> list[FunctionPass]:
    """The passes `-O<level>` runs."""
    return [FunctionPass(p.name, p.function) for p in PASSES if p.level <= level]


def optimize(m: N.Module, level: int = DEFAULT_LEVEL, *, verify_each: bool = False,
             print_after: Iterable[str] = (), time_passes: bool = False,
             out: Optional[TextIO] = None) -> tuple[N.Module, PassManager]:
    """`m` through `-O<level>`'s pipeline; also returns the manager (timings)."""
    if level not in LEVELS:
        raise ValueError(f"optimisation level {level}: use 0, 1, 2 or 3")
    pm = PassManager(pipeline(level), verify_each=verify_each, print_after=print_after,
                     time_passes=time_passes, out=out)
    return pm.run(m), pm


__all__ = ["PassEntry", "PASSES", "LEVELS", "DEFAULT_LEVEL", "pass_names", "pipeline",
           "optimize"]
