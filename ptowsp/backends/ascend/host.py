"""The host side of the tree: `host/main.asc` (ACL set-up, .npy inputs and outputs, symbol
binding, the expand / dispatch loop, messages for run-time failures, teardown) and
`host/wsp_npy.h`. The program's tables (tensors, symbols, checks, blocking sites) are decided
here; the template lays them out.

Source positions appear as `FILE:LINE:COL` with FILE relative to the main .wsp file's folder
(`source_names`), so the tree holds no absolute path.
"""

from __future__ import annotations

import os

from ... import sym
from ...dtypes import TABLE
from ...ir import nodes as N
from ...ir import visit as V
from ..cexpr import string_lit
from .plan import Plan
from .render import render


def source_names(module: N.Module) -> dict[str, str]:
    """Each source file's name in the tree and in messages: relative to the main file's
    folder (its base name when it lies outside)."""
    files = [f for f, _ in module.sources]
    if not files:
        return {}
    base = os.path.dirname(files[0])
    out = {}
    for f in files:
        rel = os.path.relpath(f, base) if base or not os.path.isabs(f) else os.path.basename(f)
        out[f] = os.path.basename(f) if rel.startswith("..") or os.path.isabs(rel) else rel
    return out


def c_string(text) -> str:
    """A C string literal (or nullptr for None)."""
    return "nullptr" if text is None else string_lit(str(text))


def _where(span, names: dict[str, str]) -> str:
    if span is None or not getattr(span, "line", 0):
        return c_string("wsp")
    return c_string(f"{names.get(span.file, os.path.basename(span.file))}:{span.line}:{span.col}")


def _tensors(module: N.Module, names) -> list[dict]:
    syms = {s.name: i for i, s in enumerate(module.syms)}
    out = []
    for t in module.tensors:
        dims = [syms.get(d.name, -1) if isinstance(d, sym.Var) else -1 for d in t.dims]
        out.append(dict(name=c_string(t.name), kind=t.kind, dtype=t.dtype,
                        descr=TABLE[t.dtype].npy_descr, ndim=len(t.dims),
                        sym=", ".join(str(d) for d in dims) or "-1",
                        where=_where(t.span, names)))
    return out


def _syms(module: N.Module, names) -> list[dict]:
    return [dict(name=c_string(s.name), has_default=int(s.default is not None),
                 value=f"{s.default or 0}LL", where=_where(s.span, names)) for s in module.syms]


def _checks(plan: Plan, names) -> list[dict]:
    out = []
    for c in plan.checks:
        chk = c.check.check
        scope = [c_string(v.split("'")[0]) for v in c.scope[:8]]
        out.append(dict(where=_where(c.check.span, names), message=c_string(c.check.message),
                        task=c_string(c.task), lhs_const=int(sym.is_const(chk.lhs)),
                        rhs_const=int(sym.is_const(chk.rhs)), nscope=len(scope),
                        scope=", ".join(scope) or "nullptr"))
    return out


def _sites(plan: Plan, names) -> list[dict]:
    return [dict(where=_where(s.span, names), send=int(s.kind == "send"),
                 channel=c_string(s.channel), depth=s.depth, process=c_string(s.process),
                 replicated=int(s.replicated))
            for s in plan.sites]


def _list(items) -> str:
    return ", ".join(items) if items else "nullptr"


def emit_host(module: N.Module, plan: Plan, blocks: int, capacity: int) -> dict[str, str]:
    """`host/main.asc` and `host/wsp_npy.h` of `plan` (a schedule of `module`)."""
    names = source_names(module)
    tensor_index = {t.name: i for i, t in enumerate(module.tensors)}
    reads = sorted(tensor_index[t] for t in V.read_tensors(module.schedule(plan.schedule).body))
    main = render(
        "host/main.asc", module=module.name, schedule=plan.schedule,
        tensors=_tensors(module, names), syms=_syms(module, names), checks=_checks(plan, names),
        sites=_sites(plan, names),
        pipes=_list([_where(p.span, names) for p in plan.pipes]),
        channels=_list([c_string(c.name) for c in module.channels]),
        task_text=_list([c_string(t.text) for t in plan.tasks]),
        reads=", ".join(str(r) for r in reads) or "-1", nreads=len(reads),
        capacity=capacity, blocks=blocks)
    return {"host/main.asc": main, "host/wsp_npy.h": render("host/wsp_npy.h")}
