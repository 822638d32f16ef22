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

`ptowsp.ir.passes` holds the manager and the pipeline (`-O1` .. `-O3`); each built-in pass is
a function in a module of its own there, wrapped here as a class.
"""

from __future__ import annotations

from .ir import passes as _p
from .ir.passes import FunctionPass, Pass, PassError, PrintPass, Timing, optimize, pipeline
from .ir.passes.dead_tasks import eliminate_dead_tasks
from .ir.passes.flatten import flatten_blocks
from .ir.passes.fuse_tasks import FusionConfig, fuse_tasks
from .ir.passes.plan_kernels import plan_kernels
from .ir.passes.simplify import simplify_module


class PassManager(_p.PassManager):
    """`ir.passes.PassManager` that also takes a checked `ptowsp` module (its IR is used)."""

    def run(self, m, verbose: bool = False):
        return super().run(getattr(m, "ir", m), verbose)


class FlattenCombinePass(FunctionPass):
    """Nested `combine` / `sequential` blocks merged into their parents."""

    def __init__(self):
        super().__init__("flatten", flatten_blocks)


class SimplifyPass(FunctionPass):
    """Empty loops and constant `when`s folded; kernel values deduplicated."""

    def __init__(self):
        super().__init__("simplify", simplify_module)


class DeadTaskPass(FunctionPass):
    """Tasks whose writes nobody reads removed, then unused kernels and scratch tensors."""

    def __init__(self):
        super().__init__("dead-tasks", eliminate_dead_tasks)


class PlanKernelsPass(FunctionPass):
    """Each kernel's ops fused into loop nests; its temporaries in buffers reused by liveness."""

    def __init__(self):
        super().__init__("plan-kernels", plan_kernels)


class FuseTasksPass(FunctionPass):
    """Producer / consumer tasks over one iteration space fused into one task, by operator
    category (the seeds' `fuse_by_category`); `config` is a `FusionConfig` (the policy)."""

    def __init__(self, config: FusionConfig | None = None):
        cfg = config or FusionConfig()
        super().__init__("fuse-tasks", lambda m: fuse_tasks(m, cfg),
                         "producer / consumer tasks fused by operator category")
        self.config = cfg


__all__ = ["Pass", "PassManager", "PrintPass", "FunctionPass", "PassError", "Timing",
           "FlattenCombinePass", "SimplifyPass", "DeadTaskPass", "FuseTasksPass", "FusionConfig",
           "PlanKernelsPass", "optimize", "pipeline"]
