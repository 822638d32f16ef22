"""The ascend_npu back end: IR -> a CANN project tree (docs/ascend.md).

    project = emit_project(module_ir, "main", options)   # strings only; raises WspError
    project.write("out/rmsnorm_npu")                     # atomically: all of it or nothing

The tree: `include/` (the plan ABI shared by all three sides, this schedule's plan words),
`host/main.asc` (ACL host program), `aicpu/expand.aicpu` (the task expander, `plan.py` +
`expander.py`), `aicore/` (the dispatcher, `dispatch.py`, and the kernels, the `aicore` package),
`CMakeLists.txt`, `scripts/`, `README.md` and the WSP sources (`project.py`). The same input
gives the same bytes. `policies.py` says what happens to each schedule combinator and warns
about the ones the NPU cannot honour.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from ... import sym
from ...diagnostics import Diagnostic, WspError, file_error
from ...files import FileError, replace_dir
from ...ir import nodes as N
from ...ir import visit as V
from ..cube import vector_only_kernels
from ..target import KeepsNothing, KernelCode, target_options
from .aicore import emit_aicore, f64_errors, is_cube, kernel_entry, mixed_split
from .aicore.mixed import workspace_offsets
from .dispatch import emit_dispatch
from .expander import plan_files, shared_files
from .host import emit_host
from .plan import dispatchers
from .policies import policy_warnings
from .project import emit_project_files

DEFAULT_NPU_ARCH = "dav-2201"   # Atlas A2 (910B) AICore
DEFAULT_SOC = "Ascend910B1"     # CANN 8's SOC_VERSION for the same chip
DEFAULT_CAPACITY = 4096         # task records per segment


@dataclass(frozen=True)
class AscendOptions:
    """The settings of a tree beyond the IR (which carries every source fact: `extern ascend`
    bodies, kernel and combinator spans)."""

    npu_arch: str = DEFAULT_NPU_ARCH
    soc_version: str = DEFAULT_SOC
    capacity: int = DEFAULT_CAPACITY
    blocks: Optional[int] = None  # AICore blocks; default: the dispatchers, or the vector cores


@dataclass
class Project:
    """The tree (relative path -> text) and the compile warnings to print; what
    `Module.compile(target="ascend_npu")` returns (docs/ascend.md, "Python API")."""

    files: dict[str, str]
    warnings: list[Diagnostic]

    def write(self, directory) -> Path:
        """Write the tree as `directory`, atomically (`write_project`, as the CLI does)."""
        return write_project(directory, self.files)


def emit_project(module: N.Module, schedule: str,
                 options: Optional[AscendOptions] = None) -> Project:
    """The CANN project of `schedule` of `module` (an optimised IR module)."""
    options = options or AscendOptions()
    s = module.schedule(schedule)
    errors = (extern_errors(module) + f64_errors(module) + layout_errors(module, s)
              + gather_errors(module, s) + transpose_errors(s) + strided_extern_errors(module, s)
              + mesh_csp_errors(module, s))
    if errors:
        raise WspError(errors, dict(module.sources))
    plan, files = plan_files(module, schedule)
    files.update(shared_files())
    vector_only = cube_views(module)
    kernels = emit_aicore(module, vector_only)
    files.update(kernels)
    headers = [p for p in kernels if os.path.basename(p).startswith("kernel_")]
    files.update(emit_dispatch(module, headers, kernel_entry,
                               lambda k: is_cube(k, vector_only), lambda k: _workspace(k, vector_only)))
    nd = dispatchers(s) if "dispatch" in s.given else 0
    blocks = options.blocks or _default_blocks(s, nd)
    mix = max((_workspace(k, vector_only) or 0 for k in module.kernels), default=0)
    files.update(emit_host(module, plan, blocks, options.capacity, mix))
    files.update(emit_project_files(module, schedule, options.npu_arch, options.soc_version,
                                    blocks, options.capacity, nd))
    return Project(dict(sorted(files.items())), policy_warnings(s, dict(s.combinator_spans)))


def _workspace(k: N.Kernel, vector_only: frozenset) -> Optional[int]:
    """The GM workspace bytes per block of mixed kernel k (None: not split)."""
    sp = mixed_split(k, vector_only)
    return None if sp is None else workspace_offsets(sp)[1]


def cube_views(module: N.Module) -> frozenset:
    """The kernels that stay on the vector path because a task of some schedule passes them a
    gather view or a view strided along its columns (`backends/cube.vector_only_kernels`, the
    rule the cycle model follows too)."""
    return vector_only_kernels(module)


def _default_blocks(s: N.Schedule, nd: int) -> int:
    """One block per dispatcher under pinned placement; else every vector core of the machine."""
    if nd and s.dispatch.name != "work_steal":
        return nd
    from ..machine import load_machine

    return load_machine(None).vector_cores


def mesh_csp_errors(module: N.Module, s: N.Schedule) -> list[Diagnostic]:
    """A mesh of several devices with a pipe or an event: the Ascend mesh tree (HCCL, one
    process per device) does not run each device's instance of a pipe, nor its events, yet."""
    if module.devices is None or not s.uses_csp:
        return []
    return [Diagnostic(
        module.devices.span, "ascend-mesh", "the ascend_npu target does not run pipes, channels or events on "
        "a mesh of several devices yet", "run it on cpu_sim (`--mesh`, or `--launcher mpi`), "
        "or on a mesh of one device")]


def extern_errors(module: N.Module) -> list[Diagnostic]:
    """An `extern` kernel needs an `extern ascend` body here (language.md section 4)."""
    from ..externs import kernels_missing_body

    return [Diagnostic(
        span, "ascend-extern",
        f"extern kernel `{k.source}` has no `extern ascend` body, which the ascend_npu "
        f"target needs (its `extern {_cpu_lang(k)}` body runs only on cpu_sim)",
        f'add `extern ascend """ ... """` after the `extern {_cpu_lang(k)}` body: Ascend C over '
        "the kernel's WspTile / WspScalar parameters")
        for k, span in kernels_missing_body(module, "ascend")]


def _cpu_lang(k: N.Kernel) -> str:
    # decision: an `extern cpp` body is refused here as an `extern c` one is (both are for
    # cpu_sim); the message names the body the kernel has
    return "c" if k.extern_c is not None else "cpp"


def gather_errors(module: N.Module, s: N.Schedule) -> list[Diagnostic]:
    """A gather view (`Cos[pos[a : b], :]`) passed to an extern kernel: its `extern ascend`
    body takes a WspTile of rows `stride` apart, which cannot name gathered rows (cpu_sim
    gathers them into a buffer first); an error at the view (language.md section 6)."""
    # decision: the tile kernels gather row by row in their copy-in; an extern body would have to read the index itself, which is easy to forget, so the view is refused rather than run on the wrong rows
    return [Diagnostic(
        a.gather.span, "ascend-gather",
        f"in `{t.text}`, `{a.param}` is a gather view of `{a.tensor}` by `{a.gather.index}`, "
        f"which the ascend_npu target does not pass to the extern kernel `{k.source}`",
        "gather the rows in a tile kernel first, or run it on cpu_sim")
        for t in V.tasks(s.body) for k in (module.kernel(t.kernel),) if k.is_extern
        for a in t.args if isinstance(a, N.TileArg) and a.gather is not None] + [Diagnostic(
        a.gather.span, "ascend-gather",
        f"in `{t.text}`, `{a.param}` gathers rows of `{a.tensor}`, whose rows are sharded over "
        "the mesh, which the ascend_npu target does not run yet",
        "`allgather` it into a tensor replicated over that axis and gather from it, or run it "
        "on cpu_sim")
        # decision: the AICore copy-in reads global indices from row 0 of the tensor; a
        # gather of a shard (indices counted from the shard's first row) is refused there
        for t in V.tasks(s.body) for a in t.args
        if isinstance(a, N.TileArg) and a.gather is not None and a.gather.base is not None]


def strided_extern_errors(module: N.Module, s: N.Schedule) -> list[Diagnostic]:
    """A view strided along its columns (`X[r, 0:64:2]`) passed to an extern kernel: the tile
    kernels copy such a view element by element (wsp_copy_in / wsp_copy_out), but an
    `extern ascend` body copies rows of contiguous elements; an error at the view
    (language.md section 6, "Strided views"). A step on the rows is its WspTile's stride."""
    # decision: refused rather than handed over with a col_stride an extern body may ignore (a silent wrong answer)
    return [Diagnostic(
        a.span if a.span.line else t.span, "ascend-strided",
        f"in `{t.text}`, the columns of `{a.param}` are a strided view of `{a.tensor}` (step "
        f"{a.step(a.col_dim)}), which the ascend_npu target does not pass to the extern kernel "
        f"`{k.source}`",
        "pass whole rows and take `slice_even` / `slice_odd` in a tile kernel, or run it on "
        "cpu_sim")
        for t in V.tasks(s.body) for k in (module.kernel(t.kernel),) if k.is_extern
        for a in t.args if isinstance(a, N.TileArg) and a.step(a.col_dim) != 1]


def transpose_errors(s: N.Schedule) -> list[Diagnostic]:
    """A transposed view (`K[b, a : a + 64, :].T`, language.md section 6) needs data copies
    that transpose, which this target's (DataCopy of contiguous rows) do not: a compile
    error at the view, never a wrong result."""
    # decision: ascend_npu does not run transposed views yet: a clear compile error, not a silent copy; `matmul(q, transpose(k))` reads k transposed there without one
    return [Diagnostic(
        a.span if a.span.line else t.span, "ascend-transpose",
        f"in `{t.text}`, `{a.param}` is a transposed view of `{a.tensor}`, which the "
        "ascend_npu target does not run",
        "pass the untransposed view and transpose in the kernel (`matmul(q, transpose(k))` "
        "reads k transposed without a copy), or run it on cpu_sim")
        for t in V.tasks(s.body) for a in t.args
        if isinstance(a, N.TileArg) and a.transposed]


def layout_errors(module: N.Module, s: N.Schedule) -> list[Diagnostic]:
    """A tile whose columns are provably not contiguous in its tensor: the AICore kernels
    take rows of contiguous elements (`WspTile` has no column stride). Undecided cases are
    checked by the expander at run time."""
    out = []
    for t in V.tasks(s.body):
        kernel = module.kernel(t.kernel)
        cols = {p.name: p.cols for p in kernel.params if p.kind == "tile"}
        for a in t.args:
            if (not isinstance(a, N.TileArg) or a.col_dim is None or a.transposed
                    or cols.get(a.param, 1) <= 1):
                continue  # a transposed view: transpose_errors
            dims = module.tensor(a.tensor).dims[a.col_dim + 1:]
            stride = sym.as_expr(1)
            for d in dims:
                stride = stride * sym.as_expr(d)
            if sym.prove_eq(stride, 1) is False:
                out.append(Diagnostic(
                    t.span, "ascend-layout",
                    f"in `{t.text}`, the columns of `{a.param}` are {sym.to_str(stride)} "
                    f"elements apart in `{a.tensor}`: ascend_npu tiles need contiguous rows",
                    "index the trailing dimensions, or make the tile's columns the last one"))
    return out


def write_project(directory, files: Mapping[str, str]) -> Path:
    """Write the tree as DIR, atomically (`files.replace_dir`): a failure leaves DIR as it was
    (absent, or the previous tree). Only an empty directory or a project tree (its
    CMakeLists.txt and wsp/ folder) is replaced: `-o src` must not delete a folder."""

    def fill(tmp: Path) -> None:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="surrogateescape")  # file names: bytes
            if rel.startswith("scripts/"):
                path.chmod(0o755)

    try:
        return replace_dir(directory, fill, ours=lambda names: {"CMakeLists.txt", "wsp"} <= names)
    except FileError as err:
        raise file_error(err) from None


class AscendTarget(KeepsNothing):
    """The `ascend_npu` target: one schedule's CANN project. It does not run here: `build`
    and `open` give the `Project` itself (docs/ascend.md, "Python API")."""

    name = "ascend_npu"
    runs_here = False
    cycle_model = False
    one_schedule = True
    product = "a CANN project"

    def options(self, given: Mapping[str, object]) -> AscendOptions:
        return target_options(self.name, AscendOptions, given)

    def emit(self, module: N.Module, schedule: str, options: Mapping[str, object]) -> Project:
        return emit_project(module, schedule, self.options(options))

    def kernel_code(self, module: N.Module, kernel: str,
                    options: Mapping[str, object]) -> KernelCode:
        """The kernel's AICore header, as `emit` writes it into the tree; a split mixed
        kernel's stages' and the one joining them, whose task functions are `<entry>_aic` and
        `<entry>_aiv` (the first is given)."""
        from .aicore import header_path

        self.options(options)
        k = module.kernel(kernel)
        vector_only = cube_views(module)
        files = emit_aicore(module, vector_only)
        sp = mixed_split(k, vector_only)
        if sp is None:
            return KernelCode(kernel_entry(k), files[header_path(k)])
        code = "\n".join(files[header_path(x)] for x in (*(s.kernel for s in sp.stages), k))
        return KernelCode(f"{kernel_entry(k)}_aic", code)

    def build(self, emitted: Project) -> Project:
        return emitted  # nothing to build here: the tree is the product

    def open(self, artifact: Project) -> Project:
        return artifact


__all__ = ["AscendOptions", "Project", "emit_project", "write_project",
           "extern_errors", "gather_errors", "layout_errors"]
