"""`aicore/dispatch.asc`: the AICore kernel that runs a wave of task records, calling each
task's kernel (part B's `aicore/kernel_<name>.h`, entry `aicore.kernel_entry`) through a switch
on the record's kernel index (the module's kernel order, as in the plan). When some kernels run
on the cube (`aicore.is_cube`), a second AIC-only dispatcher with the same loop calls those, and
the AIV one the rest: each wave is both launches, on the same stream (only the one whose kind
of kernel the module has, when it has one kind). Mixed kernels (`aicore.mixed_split`) run in a
third, MIX dispatcher: each block's AIC runs their cube parts and its two AIVs their vector
parts, with cross-core flags between (docs/ascend.md, "Mixed kernels: the split")."""

from __future__ import annotations

from ...ir import nodes as N
from .render import render


def emit_dispatch(module: N.Module, headers: list[str], entry, cube=lambda k: False,
                  mix=lambda k: None) -> dict[str, str]:
    """The dispatcher; `headers` are the kernel headers to include (paths under aicore/),
    `entry(kernel)` the name of a kernel's AICore function, `cube(kernel)` whether it runs on
    the cube cores (then a second, AIC-only dispatcher runs it), `mix(kernel)` the workspace
    bytes per block of a mixed kernel split over a group's AIC and AIVs (then a third, MIX
    dispatcher runs it), None for the others."""
    kernels = [dict(entry=entry(k), name=k.name, index=i, cube=cube(k), mix=mix(k) is not None)
               for i, k in enumerate(module.kernels)]
    workspace = max((mix(k) or 0 for k in module.kernels), default=0)
    plain = [k for k in kernels if not k["mix"]]
    text = render("aicore/dispatch.asc", module=module.name, kernels=plain,
                  mixed=[k for k in kernels if k["mix"]], workspace=workspace,
                  cube=any(k["cube"] for k in plain),
                  vector=not all(k["cube"] for k in plain) or not kernels,
                  headers=[h.split("/", 1)[1] for h in headers])
    return {"aicore/dispatch.asc": text}
