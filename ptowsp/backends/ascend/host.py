"""The host side of the tree: `host/main.asc` (ACL set-up, .npy inputs and outputs, symbol
binding, the expand / dispatch loop, messages for run-time failures, teardown) and
`host/wsp_npy.h`. The program's tables (tensors, symbols, checks, blocking sites) are decided
here; the template lays them out.

Source positions appear as `FILE:LINE:COL` with FILE relative to the main .wsp file's folder
(`source_names`), so the tree holds no absolute path.
"""

from __future__ import annotations

import os
from typing import Optional

from ... import sym
from ...diagnostics import Diagnostic, InternalError, WspError
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


# HCCL's names for the element types (hccl_types.h); bool travels as its bytes
HCCL_DTYPES = {"i8": "INT8", "i16": "INT16", "i32": "INT32", "i64": "INT64", "u8": "UINT8",
               "u16": "UINT16", "u32": "UINT32", "u64": "UINT64", "f16": "FP16", "f32": "FP32",
               "f64": "FP64", "bf16": "BFP16", "bool": "UINT8"}
HCCL_OPS = {"sum": "HCCL_REDUCE_SUM", "max": "HCCL_REDUCE_MAX", "min": "HCCL_REDUCE_MIN",
            None: "HCCL_REDUCE_SUM"}
COLL_KINDS = {"allreduce": "WSP_COLL_ALLREDUCE", "allgather": "WSP_COLL_ALLGATHER",
              "reduce_scatter": "WSP_COLL_REDUCE_SCATTER", "all_to_all": "WSP_COLL_ALL_TO_ALL",
              "copy": "WSP_COLL_COPY"}


def _hccl_call(devices: N.Devices, comm: N.Comm, src: str, dst: str) -> Optional[tuple]:
    """What one HCCL call makes of a collective from `src` to `dst` (their global layouts in
    `devices`): (kind, axis), with kind "copy" when the layouts are equal and nothing moves;
    None when it would take more than one call (a `relayout` over several axes). Without the
    global layouts (a module not made by `ir/devices.py`), the `Comm` says it."""
    if devices.placed(src) is None or devices.placed(dst) is None:
        return comm.kind, comm.over

    def layout(name):
        p = devices.placed(name)
        lay = p.layout if p is not None else None
        return (lay.dims, set(lay.partial)) if lay else ((None,) * len(p.dims), set())

    (ds, ps), (dd, pd) = layout(src), layout(dst)
    diff = [i for i, (a, b) in enumerate(zip(ds, dd)) if a != b]
    dropped = ps - pd
    if pd - ps or len(dropped) > 1:
        return None
    if not diff:
        if dropped:
            return "allreduce", dropped.pop()
        if comm.kind == "allreduce":  # a replicated source: the copies are reduced
            return "allreduce", comm.over
        return "copy", comm.over
    if len(diff) == 1:
        i = diff[0]
        if ds[i] is not None and dd[i] is None and not dropped:
            return "allgather", ds[i]
        if ds[i] is None and dd[i] is not None and dropped == {dd[i]}:
            return "reduce_scatter", dd[i]
    if len(diff) == 2 and not dropped:
        i, j = diff if ds[diff[0]] is not None else diff[::-1]
        if ds[i] == dd[j] and ds[j] is None and dd[i] is None and ds[i] is not None:
            return "all_to_all", ds[i]
    return None


def _mesh(module: N.Module, plan: Plan, names) -> dict:
    """The template values of a mesh (docs/ascend.md, "A mesh on Ascend"): its axes, and per
    collective of the plan its kind, reduction, axis, source and destination tensors and
    HCCL data type. Every tensor has the device dimension first (`Module.devices`, made by
    `ir/devices.py`), which the host's per-rank rows rely on."""
    devices = module.devices
    if devices is None:
        return dict(mesh=False)
    axes = [a for a, _ in devices.axes]
    for t in module.tensors:
        if not t.dims or sym.const_value(t.dims[0]) != devices.count:
            raise InternalError("ascend", f"mesh: tensor `{t.name}` has no leading device "
                                f"dimension of {devices.count}")
    for p in devices.tensors:
        # decision: the tree's merge_ranks.py takes a replicated part from device 0; summing
        # a partial inout's addends there (as ir/device_arrays.py does for ref and cpu_sim) is
        # the Ascend mesh tree's to build, so it is refused rather than returned as addend 0
        if p.layout is not None and p.layout.partial and module.tensor(p.name).kind == "inout":
            raise WspError([Diagnostic(
                module.tensor(p.name).span, "ascend-mesh",
                f"inout `{p.name}` is partial over {', '.join(p.layout.partial)}: the "
                "ascend_npu target does not sum its addends for the caller yet",
                "`allreduce` it into an output, or run it on cpu_sim or ref")],
                dict(module.sources))
    tensor_index = {t.name: i for i, t in enumerate(module.tensors)}
    comms, used = [], set()
    for t in plan.comms:
        comm = module.kernel(t.kernel).comm
        reads = {a.tensor for a in t.args if isinstance(a, N.TileArg) and a.mode == "r"}
        writes = {a.tensor for a in t.args if isinstance(a, N.TileArg) and a.mode != "r"}
        if len(reads) != 1 or len(writes) != 1:
            raise InternalError("ascend", f"mesh: `{t.text}` has not one source and one "
                                "destination")
        src, dst = reads.pop(), writes.pop()
        call = _hccl_call(devices, comm, src, dst)
        if call is None:
            # decision: a relayout that amounts to several collectives is refused here rather
            # than split into several HCCL calls (each with its own group) for now
            raise WspError([Diagnostic(
                t.span, "ascend-mesh",
                f"`{t.text}` moves `{src}` to `{dst}` in more than one collective, which the "
                "ascend_npu target does not make into HCCL calls yet",
                "write it as one collective per mesh axis (`allgather`, `reduce_scatter`, "
                "`all_to_all` or `allreduce`, each over one axis)")], dict(module.sources))
        kind, axis = call
        if axis not in axes:
            raise InternalError("ascend", f"mesh: `{t.text}` is over no axis of the mesh")
        dtype = module.tensor(src).dtype
        op = comm.op
        if dtype == "bool" and op == "sum":  # a sum of booleans is their `or`
            op = "max"
        if kind != "copy":
            used.add(axis)
        comms.append(dict(kind=COLL_KINDS[kind], op=HCCL_OPS[op],
                          axis=axes.index(axis), src=tensor_index[src],
                          dst=tensor_index[dst],
                          dtype="HCCL_DATA_TYPE_" + HCCL_DTYPES[module.tensor(src).dtype],
                          text=c_string(t.text), where=_where(t.span, names)))
    return dict(mesh=True, ndevices=devices.count, comms=comms,
                axes=[dict(name=c_string(a), size=n, used=int(a in used))
                      for a, n in devices.axes])


def emit_host(module: N.Module, plan: Plan, blocks: int, capacity: int) -> dict[str, str]:
    """`host/main.asc` and `host/wsp_npy.h` of `plan` (a schedule of `module`); with a mesh,
    `host/wsp_mesh.h` too."""
    names = source_names(module)
    mesh = _mesh(module, plan, names)
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
        capacity=capacity, blocks=blocks, **mesh)
    files = {"host/main.asc": main, "host/wsp_npy.h": render("host/wsp_npy.h")}
    if mesh["mesh"]:
        files["host/wsp_mesh.h"] = render("host/wsp_mesh.h")
    return files
