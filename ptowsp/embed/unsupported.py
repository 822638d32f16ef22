"""Names of the seeds' Python API that have no counterpart in the WSP language.

They import (so a seed program's `from pto_wsp import (...)` line works), and any use raises a
`CompileError` at the user's line saying why and what to write instead; nothing is silently
accepted and ignored.
"""

from __future__ import annotations

from .errors import user_error
from .source import here


class Unsupported:
    """A seed API name wspc does not implement: calling it or any attribute of it is an error."""

    def __init__(self, name: str, why: str, help: str):
        self._name, self._why, self._help = name, why, help

    def __call__(self, *args, **kwargs):
        raise user_error(here(), f"`{self._name}` is not supported by wspc: {self._why}", self._help)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unsupported(f"{self._name}.{attr}", self._why, self._help)

    def __getitem__(self, item):
        return self.__call__()

    def __repr__(self) -> str:
        return f"<unsupported {self._name}>"


_LAYOUT = ("tensors are plain row-major arrays; layouts and distribution have no counterpart in "
           "the language", "leave layouts out; index tensors with views (`X[b, t]`)")
_COLLECTIVE = ("there is no device mesh, so no collectives",
               "write the reduction as a kernel over the tiles")
_GRAPH = ("dependencies are always inferred exactly from the tensor regions tasks access, and "
          "ready tasks are issued by the schedule's dispatch and timing policies",
          "use `.dispatch(DispatchPolicy.work_steal())` and `.task_graph(window=TaskWindow(...))`")

TensorLayout = Unsupported("TensorLayout", *_LAYOUT)
TensorShard = Unsupported("TensorShard", *_LAYOUT)
TensorReplicate = Unsupported("TensorReplicate", *_LAYOUT)
MemLayout = Unsupported("MemLayout", *_LAYOUT)
relayout = Unsupported("relayout", *_LAYOUT)
Shard = Unsupported("Shard", *_LAYOUT)
Replicate = Unsupported("Replicate", *_LAYOUT)
allreduce = Unsupported("allreduce", *_COLLECTIVE)
allgather = Unsupported("allgather", *_COLLECTIVE)
reduce_scatter = Unsupported("reduce_scatter", *_COLLECTIVE)
Deps = Unsupported("Deps", *_GRAPH)
DepsMode = Unsupported("DepsMode", *_GRAPH)
ReadyPolicy = Unsupported("ReadyPolicy", *_GRAPH)
StartPolicy = Unsupported("StartPolicy", *_GRAPH)
TracePolicy = Unsupported("TracePolicy", *_GRAPH)
Pools = Unsupported("Pools", *_GRAPH)
ExternalKernel = Unsupported("ExternalKernel", "external kernels are deprecated in the seeds",
                             "write `@kernel(cpp_src=...)` with a C body")
ptoisa_kernel = Unsupported("ptoisa_kernel", "PTO-ISA instructions are not available",
                            "write the body with `pto.*` or as C with `@kernel(cpp_src=...)`")

__all__ = ["Unsupported", "TensorLayout", "TensorShard", "TensorReplicate", "MemLayout",
           "relayout", "Shard", "Replicate", "allreduce", "allgather", "reduce_scatter", "Deps",
           "DepsMode", "ReadyPolicy", "StartPolicy", "TracePolicy", "Pools", "ExternalKernel",
           "ptoisa_kernel"]
