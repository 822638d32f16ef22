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
from ...diagnostics import Diagnostic, InternalError, WspError
from ...dtypes import TABLE
from ...ir import nodes as N
from ...ir import visit as V
from ..cexpr import string_lit
from .plan import Plan, comm_tensors
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
# the steps a collective is made of on the host (host/wsp_mesh.h's WSP_COLL_*): the four HCCL
# calls, a copy of this device's part, and `slice` (keep this device's block of a dimension
# every device holds whole: no communication)
COLL_KINDS = {"allreduce": "WSP_COLL_ALLREDUCE", "allgather": "WSP_COLL_ALLGATHER",
              "reduce_scatter": "WSP_COLL_REDUCE_SCATTER", "all_to_all": "WSP_COLL_ALL_TO_ALL",
              "copy": "WSP_COLL_COPY", "slice": "WSP_COLL_SLICE"}


def collective_steps(devices: N.Devices, comm: N.Comm, src: str,
                     dst: str) -> list[tuple[str, str, tuple]]:
    """The one-axis steps that move a collective's source `src` to its destination `dst`
    (their global layouts in `devices`), in order: (kind, axis, the layout after the step:
    per dimension its sharding axis or None). One step for every collective but a `relayout`
    that changes more than one axis, which becomes (decision, docs/distributed.md): a
    reduction for each partial axis the destination drops (`reduce_scatter` when the
    destination shards a dimension the source holds whole over that axis, else `allreduce`),
    then for each dimension whose sharding axis changes an `all_to_all` when the destination
    shards another, whole dimension over that axis, else an `allgather`, then a `slice` of each
    dimension the destination shards and the source did not. Equal layouts: one `copy`.
    Without the global layouts (a module not made by `ir/devices.py`) the `Comm` says it."""
    ps, pd = devices.placed(src), devices.placed(dst)
    if ps is None or pd is None:
        return [(comm.kind, comm.over, ())]

    def layout(p):
        return (p.layout.dims, set(p.layout.partial)) if p.layout else ((None,) * len(p.dims),
                                                                          set())

    (cur, partial), (want, kept) = layout(ps), layout(pd)
    cur = list(cur)
    steps = []
    if comm.kind == "allreduce" and not partial - kept:  # a replicated source: add the copies
        return [("allreduce", comm.over, tuple(cur))]
    for axis in [a for a, _ in devices.axes if a in partial - kept]:
        dims = [i for i, a in enumerate(want) if a == axis and cur[i] is None]
        if dims:
            cur[dims[0]] = axis
            steps.append(("reduce_scatter", axis, tuple(cur)))
        else:
            steps.append(("allreduce", axis, tuple(cur)))
    for i, axis in enumerate(list(cur)):
        if axis is None or axis == want[i]:
            continue
        to = [j for j, a in enumerate(want) if a == axis and cur[j] is None]
        cur[i] = None
        if to:
            cur[to[0]] = axis
            steps.append(("all_to_all", axis, tuple(cur)))
        else:
            steps.append(("allgather", axis, tuple(cur)))
    for i, axis in enumerate(want):
        if axis is not None and cur[i] is None:
            cur[i] = axis
            steps.append(("slice", axis, tuple(cur)))
    if tuple(cur) != tuple(want):
        raise InternalError("ascend", f"mesh: no steps from {ps.layout} to {pd.layout}")
    return steps or [("copy", comm.over, tuple(cur))]


def _step_shape(devices: N.Devices, src: str, after: tuple) -> tuple[list[int], list[int]]:
    """A step's result's local shape as factors of the source's local shape: dimension d is
    source[d] * mul[d] / div[d] (the source's sharding undone, the step's applied)."""
    sizes = dict(devices.axes)
    p = devices.placed(src)
    lay = p.layout.dims if p.layout else (None,) * len(p.dims)
    mul = [sizes[a] if a else 1 for a in lay]
    div = [sizes[a] if a else 1 for a in after]
    return mul, div


def _mesh(module: N.Module, plan: Plan, names) -> dict:
    """The template values of a mesh (docs/ascend.md, "A mesh on Ascend"): its axes, and per
    collective of the plan its source and destination tensors, HCCL data type and steps (each
    a kind, reduction, axis, the buffers it reads and writes and the local shape it makes).
    Every tensor has the device dimension first (`Module.devices`, made by `ir/devices.py`),
    which the host's per-rank rows rely on."""
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
    comms, steps, used = [], [], set()
    for t in plan.comms:
        comm = module.kernel(t.kernel).comm
        src, dst = comm_tensors(t)
        dtype = module.tensor(src).dtype
        op = comm.op
        if dtype == "bool" and op == "sum":  # a sum of booleans is their `or`
            op = "max"
        made = collective_steps(devices, comm, src, dst)
        comms.append(dict(src=tensor_index[src], dst=tensor_index[dst],
                          dtype="HCCL_DATA_TYPE_" + HCCL_DTYPES[dtype], first=len(steps),
                          nsteps=len(made), text=c_string(t.text), where=_where(t.span, names)))
        for i, (kind, axis, after) in enumerate(made):
            if axis not in axes:
                raise InternalError("ascend", f"mesh: `{t.text}` is over no axis of the mesh")
            if kind not in ("copy", "slice"):
                used.add(axis)
            last = i == len(made) - 1
            mul, div = _step_shape(devices, src, after) if not last else ([], [])
            steps.append(dict(kind=COLL_KINDS[kind], op=HCCL_OPS[op], axis=axes.index(axis),
                              frm=0 if i == 0 else 1 + i, to=1 if last else 2 + i,
                              mul=", ".join(map(str, mul)) or "0",
                              div=", ".join(map(str, div)) or "0"))
    return dict(mesh=True, ndevices=devices.count, comms=comms, steps=steps,
                axes=[dict(name=c_string(a), size=n, used=int(a in used))
                      for a, n in devices.axes])


def emit_host(module: N.Module, plan: Plan, blocks: int, capacity: int,
              mix_workspace: int = 0) -> dict[str, str]:
    """`host/main.asc` and `host/wsp_npy.h` of `plan` (a schedule of `module`); with a mesh,
    `host/wsp_mesh.h` too. `mix_workspace`: the GM workspace bytes per block of the mixed
    kernels (0: none), which the host allocates and frees with the run's other buffers."""
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
        capacity=capacity, blocks=blocks, mix_workspace=mix_workspace, **mesh)
    files = {"host/main.asc": main, "host/wsp_npy.h": render("host/wsp_npy.h")}
    if mesh["mesh"]:
        files["host/wsp_mesh.h"] = render("host/wsp_mesh.h")
    return files
