"""The names a kernel has in the tree: its AICore function (`kernel_entry`), its header
(`header_path`), the header's include guard, and the one-line description of a parameter in the
header's comment."""

from __future__ import annotations

import re

from ....ir import nodes as N
from ...cexpr import c_ident


def kernel_entry(kernel: N.Kernel) -> str:
    """The AICore function of `kernel` (a C identifier made from its unique name)."""
    return c_ident("wsp_aicore_", kernel.name)


def header_path(kernel: N.Kernel) -> str:
    """The relative path `emit_aicore` gives the kernel's header."""
    return f"aicore/kernel_{kernel_entry(kernel)[len('wsp_aicore_'):]}.h"


def guard(module: str, k: N.Kernel) -> str:
    """The include guard of the kernel's header."""
    name = re.sub(r"[^A-Za-z0-9]", "_", f"{module}_{k.name}").upper()
    return f"WSP_AICORE_{name}_H"


def describe(p: N.KParam) -> str:
    """A parameter as its declaration reads, for the header's comment."""
    if p.kind == "tile":
        return f"{p.name}: {p.mode}[Tile[{p.rows}, {p.cols}, {p.dtype}]]"
    return f"{p.name}: Scalar[{p.dtype}]"
