"""`aicore/dispatch.asc`: the AICore kernel that runs a wave of task records, calling each
task's kernel (part B's `aicore/kernel_<name>.h`, entry `aicore.kernel_entry`) through a switch
on the record's kernel index (the module's kernel order, as in the plan)."""

from __future__ import annotations

from ...ir import nodes as N
from .render import render


def emit_dispatch(module: N.Module, headers: list[str], entry) -> dict[str, str]:
    """The dispatcher; `headers` are the kernel headers to include (paths under aicore/),
    `entry(kernel)` the name of a kernel's AICore function."""
    kernels = [dict(entry=entry(k), name=k.name) for k in module.kernels]
    text = render("aicore/dispatch.asc", module=module.name, kernels=kernels,
                  headers=[h.split("/", 1)[1] for h in headers])
    return {"aicore/dispatch.asc": text}
