"""Kernels with an `extern ascend` body (language.md section 4): the body verbatim in the
kernel's header, after const bindings of its parameters (a tile parameter as its `WspTile`, a
scalar as a plain value of its dtype), with a `#line` directive into the tree's copy of the .wsp
file so that compiler errors point into the user's source, and one back into the header."""

from __future__ import annotations

import os
import re
from typing import Optional

from ....cnames import reserved_reason
from ....diagnostics import InternalError
from ....dtypes import TABLE
from ....ir import nodes as N
from ....version import __version__
from ...cexpr import line_file_lit
from ..render import render
from .names import describe, guard, header_path, kernel_entry
from .scalar import scalar_param

_RESTORE = "// wsp:restore-line"


def _extern_line(k: N.Kernel, body: str, sources: dict) -> Optional[int]:
    """The .wsp line where the `extern ascend` body starts (for `#line`): the body as written
    after `extern ascend` in the kernel's declaration."""
    text = sources.get(k.span.file)
    if text is None or not k.span.line:
        return None
    lines = text.split("\n")
    start = sum(len(x) + 1 for x in lines[: k.span.line - 1])
    m = re.compile(r"extern\s+ascend\s+(\"\"\"|\")").search(text, start)
    if m is None:
        return None
    at = text.find(body, m.end())
    if at < 0:
        return None
    return text.count("\n", 0, at) + 1


def emit_extern(k: N.Kernel, module: str, body: str, sources: dict, names: dict) -> str:
    tiles = [p for p in k.params if p.kind == "tile"]
    scalars = [p for p in k.params if p.kind == "scalar"]
    binds = []
    for p in tiles + scalars:
        # the checker refuses such names at the parameter (language.md section 4): the body uses
        # its parameters by name, so a renamed one would silently break it
        why = reserved_reason(p.name, "ascend")
        if why is not None:
            raise InternalError("ascend", f"extern parameter `{p.name}` of `{k.source}`: {why}")
    for t, p in enumerate(tiles):
        name = p.name
        binds.append(f"const WspTile &{name} = tiles[{t}];")
        binds.append(f"(void){name};")
    for s, p in enumerate(scalars):
        name = p.name
        ctype = "bool" if p.dtype == "bool" else TABLE[p.dtype].c_compute
        binds.append(f"const {ctype} {name} = {scalar_param(p.dtype, s)};")
        binds.append(f"(void){name};")
    line = _extern_line(k, body, sources)
    copy = names.get(k.span.file) or os.path.basename(k.span.file)
    directive = f"#line {line} {line_file_lit('../wsp/' + copy)}" if line else ""
    text = render(
        "aicore/kernel_extern.h", name=k.name, source=k.source, module=module, version=__version__,
        params=[describe(p) for p in k.params], guard=guard(module, k), entry=kernel_entry(k),
        binds=binds, line=directive, body=body, restore=_RESTORE if directive else "")
    if not directive:
        return text
    out = text.split("\n")
    for n, ln in enumerate(out):
        if ln == _RESTORE:
            out[n] = f"#line {n + 2} {line_file_lit(header_path(k))}"
    return "\n".join(out)
