"""Lowering: a checked `ModuleEnv` (frontend) becomes the IR of `ir/nodes.py`.

`lower(env) -> nodes.Module` is pure (module.py). Schedules become loop trees with workload
parameters substituted and inlined workloads expanded (schedules.py, workloads.py), run-time
values statements of those trees (values.py), kernel calls tasks whose views are `TileArg`
boxes (tasks.py), CSP constructs pipes, processes, sends and consumes (csp.py), and kernel
bodies op DAGs, specialised once per `Constexpr` assignment a task uses (kernels.py). What
lowering decides is written next to its code as `# decision:`.
"""

from .csp import reject_csp
from .module import lower

__all__ = ["lower", "reject_csp"]
