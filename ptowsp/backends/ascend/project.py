"""The files around the code: `CMakeLists.txt`, `README.md`, `scripts/gen_data.py`,
`scripts/verify_result.py`, the WSP sources under `wsp/`, and the CANN 8 stand-in for
`aicpu_api.h`. Everything deterministic: no dates, no absolute paths."""

from __future__ import annotations

from ... import sym
from ...ir import nodes as N
from .host import source_names
from .policies import policy_summary
from .render import render


def py_expr(e) -> str:
    """A symbolic integer as Python over a dict `s` of symbols (floor semantics; x / 0 == 0)."""
    e = sym.as_expr(e)
    if isinstance(e, sym.Const):
        return str(e.value)
    if isinstance(e, sym.Var):
        return f"s[{e.name!r}]"
    if isinstance(e, sym.Poly):
        terms = []
        for mono, coef in e.terms:
            factors = [py_expr(a) for a, p in mono for _ in range(p)]
            terms.append(" * ".join(([str(coef)] if coef != 1 else []) + factors))
        if e.const:
            terms.append(str(e.const))
        return "(" + " + ".join(terms) + ")"
    if isinstance(e, (sym.Min, sym.Max)):
        fn = "min" if isinstance(e, sym.Min) else "max"
        return f"{fn}({', '.join(py_expr(a) for a in e.args)})"
    if isinstance(e, sym.Abs):
        return f"abs({py_expr(e.arg)})"
    fn = {sym.FloorDiv: "floordiv", sym.Mod: "mod", sym.CeilDiv: "ceildiv"}[type(e)]
    return f"{fn}({py_expr(e.num)}, {py_expr(e.den)})"


def emit_project_files(module: N.Module, schedule: str, npu_arch: str, soc_version: str,
                       blocks: int, capacity: int, ndispatchers: int) -> dict[str, str]:
    s = module.schedule(schedule)
    names = source_names(module)
    main = names.get(module.sources[0][0], f"{module.name}.wsp") if module.sources else \
        f"{module.name}.wsp"
    syms = [dict(name=sd.name, default=repr(sd.default)) for sd in module.syms]
    need = [sd.name for sd in module.syms if sd.default is None]
    binds = " ".join(f"{n}=..." for n in need)  # placeholders: the user's sizes
    devices = module.devices
    # a mesh: the caller's global shapes (the tree's arrays have the device dimension first)
    placed = {t.name: devices.placed(t.name) for t in module.tensors} if devices else {}
    tensors = [dict(name=t.name, kind=t.kind, dtype=t.dtype,
                    shape="".join(py_expr(d) + ", " for d in
                                  (placed[t.name].dims if placed.get(t.name) else t.dims)))
               for t in module.tensors]
    outputs = [dict(name=t.name, dtype=t.dtype) for t in module.tensors
               if t.kind in ("output", "inout")]
    common = dict(module=module.name, schedule=schedule, source=main, npu_arch=npu_arch,
                  soc_version=soc_version, capacity=capacity, blocks=blocks, binds=binds,
                  mesh=module.devices is not None,
                  ndevices=module.devices.count if module.devices else 1)
    files = {
        "CMakeLists.txt": render("CMakeLists.txt", **common),
        "README.md": render("README.md", policies=policy_summary(s, ndispatchers), **common),
        "scripts/gen_data.py": render("scripts/gen_data.py", syms=syms, tensors=tensors, **common),
        "scripts/verify_result.py": render("scripts/verify_result.py", outputs=outputs),
        "scripts/build_and_run.sh": render("scripts/build_and_run.sh", **common),
        "host/host_expander/aicpu_api.h": render("host/aicpu_api_host.h"),
    }
    if module.devices is not None:  # one process per device (docs/ascend.md, "A mesh on Ascend")
        files["scripts/run_ranks.sh"] = render("scripts/run_ranks.sh", **common)
        files["scripts/merge_ranks.py"] = render("scripts/merge_ranks.py", outputs=outputs,
                                                 **common)
        layouts = [(p.name, list(p.layout.dims) if p.layout else [None] * len(p.dims),
                    list(p.layout.partial) if p.layout else []) for p in devices.tensors]
        files["scripts/wsp_layout.py"] = render("scripts/wsp_layout.py",
                                                axes=list(devices.axes), layouts=layouts,
                                                **common)
    for path, text in module.sources:
        files[f"wsp/{names[path]}"] = text
    return files
