"""The optimiser's public Python API (the seeds' `pto_wsp` pass classes):

    from ptowsp.passes import PassManager, FlattenCombinePass, PrintPass, Pass

    pm = PassManager()
    pm.add(PrintPass("before"))
    pm.add(FlattenCombinePass())
    pm.add(PrintPass("after"))
    ir = pm.run(ptowsp.load("model.wsp"))       # a checked module or its IR (`module.ir`)

    class MyPass(Pass):
        name = "my-pass"
        def run(self, m):                          # ir.nodes.Module -> ir.nodes.Module
            return m

Every built-in pass of the pipeline (`ptowsp.ir.passes.PASSES`) has a class here, made from
it: `SimplifyPass`, `FlattenCombinePass` (the seeds' name for `flatten`), `DeadTaskPass`
(`dead-tasks`), `FuseTasksPass` and `PlanKernelsPass`. A class takes the options of its pass
function: `FuseTasksPass(FusionConfig(whole_tiles=False))` runs `fuse_tasks(m, config)`.
"""

from __future__ import annotations

import inspect
from functools import partial

from .ir.passes import PASSES, PassEntry, optimize, pipeline
from .ir.passes.fuse_tasks import FusionConfig
from .ir.passes.manager import FunctionPass, Pass, PassError, PrintPass, Timing
from .ir.passes.manager import PassManager as _PassManager


class PassManager(_PassManager):
    """`ir.passes.manager.PassManager` that also takes a checked `ptowsp` module (its IR is
    used) or a workload of the embedding (its leading user passes take and return the
    Workload: docs/python.md, "Passes")."""

    def run(self, m, verbose: bool = False):
        # a Workload of the embedding runs its own passes first (embed/workload.py)
        hook = getattr(m, "__wsp_passes__", None)
        if hook is not None:
            return hook(self, verbose)
        return super().run(getattr(m, "ir", m), verbose)


# The seed documents' class names, where they are not `<Name>Pass` of the pass's name.
_SEED_NAMES = {"flatten": "FlattenCombinePass", "dead-tasks": "DeadTaskPass"}


def _class_name(pass_name: str) -> str:
    words = pass_name.split("-")
    return _SEED_NAMES.get(pass_name) or "".join(w.capitalize() for w in words) + "Pass"


def _pass_class(entry: PassEntry) -> type:
    """The public class of a built-in pass: constructed with the pass function's options, which
    it keeps as attributes (`FuseTasksPass(cfg).config`)."""
    fn = entry.function
    options = list(inspect.signature(fn).parameters.values())[1:]
    summary = (fn.__doc__ or "").strip().split("\n")[0]

    def __init__(self, *args, **kwargs):
        bound = inspect.Signature(options).bind(*args, **kwargs)
        FunctionPass.__init__(self, entry.name, partial(fn, *args, **kwargs), summary)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            setattr(self, name, value)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __init__.__signature__ = inspect.Signature([self_param] + options)
    name = _class_name(entry.name)
    return type(name, (FunctionPass,), {
        "__init__": __init__, "__module__": __name__, "__qualname__": name,
        "__doc__": f"The `{entry.name}` pass: {summary[:1].lower()}{summary[1:]}"})


PASS_CLASSES: tuple[type, ...] = tuple(_pass_class(p) for p in PASSES)
globals().update({cls.__name__: cls for cls in PASS_CLASSES})

__all__ = ["Pass", "PassManager", "PrintPass", "FunctionPass", "PassError", "Timing",
           "FusionConfig", "optimize", "pipeline", "PASS_CLASSES"]
__all__ += [cls.__name__ for cls in PASS_CLASSES]
