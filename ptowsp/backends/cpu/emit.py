"""All the C of a module for cpu_sim, as strings: the kernels' translation unit (`kernels.py`),
the enumerators' (`enumerate.py` for plain schedules, `csp.py` for schedules using CSP) and
`manifest.json`. Nothing here writes, compiles or loads a file (`artifact.py` builds it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...diagnostics import Diagnostic, WspError
from ...ir import nodes as N
from ..externs import kernels_missing_body
from .cpp_kernels import CPP_FILE, emit_cpp_kernels
from .csp import CO_PRELUDE, CoEmitter
from .enumerate import PRELUDE, Enumerators, LoopEmitter, entry_symbol
from .kernels import emit_kernels, kernel_symbol, row_partial_tiles


@dataclass(frozen=True)
class ModuleC:
    """The C of a module: file name -> text, and what the enumerators may report."""

    files: dict[str, str]
    enumerators: Enumerators


def emit_module(m: N.Module) -> ModuleC:
    """All C for `m`: the kernels' translation unit and the enumerators' (strings only)."""
    errors = extern_errors(m)
    if errors:
        raise WspError(errors, dict(m.sources))

    decls = "\n".join(f"int {kernel_symbol(k)}(const wsp_tile *tiles, const wsp_scalar *scalars);"
                      for k in m.kernels)
    enums = emit_enumerators(m, decls)
    manifest = {
        "module": m.name,
        "syms": [{"name": s.name, "default": s.default} for s in m.syms],
        "tensors": [{"name": t.name, "kind": t.kind, "dtype": t.dtype} for t in m.tensors],
        "schedules": {name: fn for name, fn in enums.entries.items()},
        "kernels": [k.name for k in m.kernels],
    }
    kernels = emit_kernels(m.kernels, sources=dict(m.sources), row_partial=row_partial_tiles(m))
    files = {"kernels.c": kernels, "enumerate.c": enums.source,
             "manifest.json": json.dumps(manifest, indent=2, sort_keys=True) + "\n"}
    cpp = emit_cpp_kernels(m.kernels, dict(m.sources))
    if cpp is not None:  # compiled by the C++ compiler into the same library (build.py)
        files[CPP_FILE] = cpp
    return ModuleC(files, enums)


def emit_enumerators(module: N.Module, kernel_decls: str) -> Enumerators:
    """C for every schedule of `module`; `kernel_decls` declares the kernel functions."""
    out = Enumerators(source="", entries={})
    plain, co = LoopEmitter(module, out), CoEmitter(module, out)
    parts = [PRELUDE, kernel_decls]
    if any(s.uses_csp for s in module.schedules):
        parts.append(CO_PRELUDE)
    for s in module.schedules:
        out.entries[s.name] = entry_symbol(s)
        parts.append(f"/* schedule {s.name} = {s.workload}(...) */")
        parts.append((co if s.uses_csp else plain).schedule(s))
    # the gather wrappers (gather.py) before the enumerators that call them
    parts[2:2] = out.wrapper_code
    out.source = "\n".join(parts)
    return out


def extern_errors(m: N.Module) -> list[Diagnostic]:
    """An extern kernel needs an `extern c` or `extern cpp` body here: cpu_sim compiles it (language.md
    section 4). Reported when the target is chosen, so `wspc check` accepts such kernels."""
    return [Diagnostic(
        span, "extern-no-c",
        f"kernel `{k.source}` has no `extern c` body; the cpu_sim target runs extern "
        "kernels as C", 'add an `extern c """ ... """` body (C over the kernel\'s '
        "parameters; or C++ as `extern cpp`) to run it on cpu_sim")
        for k, span in kernels_missing_body(m, "c", "cpp")]
