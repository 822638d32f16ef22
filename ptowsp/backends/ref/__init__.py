"""The `ref` back end: a NumPy interpreter of the IR, the semantic oracle for tests
(see `interp.py` for the semantics it defines), and `RefTarget`, its face to the driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ...diagnostics import Diagnostic
from ...ir import nodes as N
from ..target import KeepsNothing, target_options
from .interp import Backend, execute, run
from .runner import RunError, register_extern, unregister_extern


@dataclass(frozen=True)
class RefOptions:
    """ref runs every task in enumeration order on the calling thread: `workers` is taken
    (so one call can name any target that runs here) and has no effect."""

    workers: Optional[int] = None


@dataclass(frozen=True)
class Interpretable:
    """What ref emits and builds: the module itself, which it interprets. No files."""

    module: N.Module
    options: RefOptions
    files: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[Diagnostic, ...] = ()


class Interpreter(Backend):
    """The runnable of the ref target: `Backend.run` with no cycle model, so a run takes no
    trace and no machine (callers ask `cycle_model` before passing them)."""

    cycle_model = False

    def __init__(self, module: N.Module):
        super().__init__()
        self.module = module


class RefTarget(KeepsNothing):
    """The `ref` target: nothing to emit or build; `open` gives the interpreter."""

    name = "ref"
    runs_here = True
    cycle_model = False
    one_schedule = False
    product = None

    def options(self, given: Mapping[str, Any]) -> RefOptions:
        return target_options(self.name, RefOptions, given)

    def emit(self, module: N.Module, schedule: Optional[str],
             options: Mapping[str, Any]) -> Interpretable:
        return Interpretable(module, self.options(options))

    def kernel_code(self, module: N.Module, kernel: str, options: Mapping[str, Any]) -> None:
        self.options(options)
        return None  # the interpreter runs the IR itself: no kernel source exists

    def build(self, emitted: Interpretable) -> Interpretable:
        return emitted

    def open(self, artifact: Interpretable) -> Interpreter:
        return Interpreter(artifact.module)


__all__ = ["run", "execute", "Backend", "RunError", "register_extern", "unregister_extern",
           "RefTarget", "RefOptions", "Interpreter"]
