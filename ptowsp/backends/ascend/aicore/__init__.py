"""AICore kernels in Ascend C: `emit_aicore(module) -> {relative path: text}` and
`kernel_entry(kernel) -> str`. Strings only: nothing here writes or compiles a file.

Every kernel becomes `aicore/kernel_<name>.h` (`header_path`), defining

    __aicore__ inline void <kernel_entry(k)>(const WspTile *tiles, const WspScalar *scalars)

(`tiles` in the order of the kernel's tile parameters, `scalars` in the order of its scalar
parameters; `abi.ABI_C`), run once per task on one vector core (AIV). `aicore/wsp_aicore.h`
holds what the kernels share (ABI, scalar-unit helpers, row copies). A kernel with an
`extern ascend` body gets that body verbatim, with a `#line` directive into the .wsp file
(`extern.py`).

How a tile kernel becomes Ascend C (`kernel.py`):
1. Ops. The kernel's plan (`ir/passes/plan_kernels.py`; `plan_kernel(k, fuse=False)` when the
   pass did not run) gives the ops to compute: dead ops dropped, `softmax` spelled out as
   rowmax / sub / exp / rowsum / reciprocal / mul, snapshot copies where a store would read an
   overwritten tile. On a vector machine every tile value lives in the Unified Buffer (the
   plan's registers and inline recomputation have no counterpart): each op is one or a few
   vector instructions over a whole UB tile, and the buffers are reused by liveness
   (`frame.py`).
2. Layout (`layout.py`). A value of shape [rows, cols] occupies rows x pc elements, pc = cols
   rounded up to 32 elements, whatever its dtype; instructions cover whole 256-byte repeats.
3. Chunks (`chunks.py`). The row extent of the stored tiles is split into chunks of R rows, R
   the largest divisor whose footprint fits the UB (192 KiB less the 8 KiB Ascend C keeps for
   its own temporaries); values that need all rows are resident, a matmul's weights stream from
   GM. Inputs and results go through double-buffered queues so copies overlap the compute
   (past the 8 tensors a queue position holds, inputs are copied into the arena instead). If
   even R = 1 does not fit, a kernel elementwise along its rows, or reducing them, runs in
   blocks of columns too, in passes when a reduction feeds the row again
   (`chunks.column_passes`); any other is a compile error, at the call that creates the
   specialisation when it has Constexpr values, else at the kernel.
4. Units. A kernel whose work is all matmuls (f16 / bf16 / f32 operands) runs on the cube core
   (AIC) instead (`cube.py`, `cube_jobs`: GM -> L1 -> L0A / L0B -> Mmad -> L0C -> GM, the
   tiling of `backends/cube.py`); `aicore/wsp_cube.h` holds what those kernels share.
   Otherwise float values (f16/bf16 held in f32, as nodes.py says) are computed by the vector
   unit (`vector.py`, reductions in `reductions.py`; `matmul.py` on the vector unit too,
   reading a transposed operand
   in place: a transpose only matmuls read is never computed). Everything else (integer
   and bool arithmetic, f64 (refused), float -> integer casts, transpose, slices, interleave, concat,
   gather, iota) runs on the scalar unit over GetValue / SetValue (`scalar_ops.py`,
   expressions from `scalar.py`): slow, exact, and documented as the fallback.
5. Value semantics are ref's (nodes.py); where the real API differs, the emitter composes
   ref's result (see `vector.py`).
6. Pipes. Dependent vector instructions are separated by PipeBarrier<PIPE_V>; a hand-off
   between the vector pipe, the scalar unit and the copy engines is a SetFlag/WaitFlag pair
   (`wsp_sync<E>`) unless a queue's EnQue/DeQue makes it.
"""

from __future__ import annotations

from typing import Optional

from ....diagnostics import Diagnostic, Note, WspError
from ....ir import nodes as N
from ....ir import visit as V
from ....version import __version__
from ...cube import runs_on_cube
from ..abi import ABI_C
from ..host import source_names
from ..render import render
from .cube import cube_header, cube_jobs, emit_cube_kernel
from .errors import AicoreError, UbOverflow
from .extern import emit_extern
from .kernel import emit_tile_kernel
from .layout import API_RESERVE, UB_BUDGET, UB_BYTES, pc, vcount
from .mixed import MixedSplit, emit_mixed, split_mixed
from .names import header_path, kernel_entry


def support_header() -> str:
    """The text of `aicore/wsp_aicore.h`."""
    return render("aicore/wsp_aicore.h", abi=ABI_C, version=__version__)


def f64_error(k: N.Kernel) -> Optional[Diagnostic]:
    """Kernel `k` with an f64 parameter or value, as an error at its name: the AI Core has no
    double (bisheng refuses `double` in AI Core code, and its vector unit has no f64), so the
    kernel is refused rather than emitted as code a real toolkit would refuse."""
    # decision: refused rather than emulated in integer arithmetic on the scalar unit: f64 in
    # an NPU kernel is almost always a mistake, and emulation would be orders slower
    what = next((f"its parameter `{p.name}` is f64" for p in k.params if p.dtype == "f64"), None)
    if what is None and any(op.dtype == "f64" for op in k.ops):
        what = "it computes an f64 value"
    if what is None:
        return None
    return Diagnostic(
        k.name_span if k.name_span.line else k.span, "ascend-f64",
        f"kernel `{k.source}` cannot run on the ascend_npu target: {what}, and the AI Core has "
        "no f64 (no double in AI Core code)",
        "compute in f32 (or f16 / bf16); f64 runs on cpu_sim and ref")


def f64_errors(module: N.Module) -> list[Diagnostic]:
    """`f64_error` of every kernel, once per source kernel (specialisations share a span)."""
    out: dict = {}
    for k in module.kernels:
        d = f64_error(k)
        if d is not None:
            out.setdefault((d.span, d.message), d)
    return list(out.values())


def is_cube(k: N.Kernel, vector_only: frozenset = frozenset()) -> bool:
    """Whether kernel `k` runs on the cube core (AIC): all its work is matmuls the cube runs
    (`cube.cube_jobs`) and it is not in `vector_only` (kernels some task passes a view the cube
    copies cannot read: `cube_views`). The rule is `backends/cube.runs_on_cube`, which the cycle
    model asks too, so both see the same kernels on the cube."""
    return runs_on_cube(k, vector_only)


def creating_call(module: N.Module, kernel: str) -> Optional[N.Span]:
    """The span of the first call (in schedule order) that runs specialisation `kernel`."""
    for s in module.schedules:
        for t in V.tasks(s.body):
            if t.kernel == kernel and t.span.line:
                return t.span
    return None


def ub_diagnostic(k: N.Kernel, e: UbOverflow, module: N.Module) -> Diagnostic:
    """A kernel too big for the Unified Buffer: at the call that creates its specialisation
    when it has Constexpr values (the values are what the user chose there), the kernel's
    declaration as a note; else at the kernel."""
    call = creating_call(module, k.name) if k.constexprs else None
    if call is None:
        return Diagnostic(e.span, "ascend-kernel", e.message, e.help)
    where = k.name_span if k.name_span.line else k.span
    return Diagnostic(call, "ascend-kernel", e.message, e.help,
                      (Note(where, f"kernel `{k.source}` is declared here"),))


def mixed_split(k: N.Kernel, vector_only: frozenset = frozenset()) -> Optional[MixedSplit]:
    """The split of mixed kernel `k` into cube and vector stages (`mixed.py`), or None
    (`k` is not one, or runs wholly on the vector path: in `vector_only`, or f64)."""
    if k.name in vector_only or f64_error(k) is not None:
        return None
    return split_mixed(k)


def emit_aicore(module: N.Module, vector_only: frozenset = frozenset()) -> dict[str, str]:
    """Every kernel of `module` as Ascend C: {"aicore/wsp_aicore.h": ..., "aicore/kernel_<name>.h":
    ...}, and "aicore/wsp_cube.h" when a kernel runs on the cube (`is_cube`; never the kernels
    named in `vector_only`) or is split over the cube and the vector cores (`mixed_split`: its
    two parts' headers and its own joining them). Raises WspError with a diagnostic at the span of every kernel that cannot run on the
    AICore (too big for the UB even in chunks, an op it has no code for, an extern kernel
    without an `extern ascend` body)."""
    out = {"aicore/wsp_aicore.h": support_header()}
    diags: list[Diagnostic] = []
    sources = dict(module.sources)
    names = source_names(module)
    diags += f64_errors(module)
    for k in module.kernels:
        if f64_error(k) is not None:
            continue
        if k.is_extern and k.extern_ascend is None:  # extern c only (language.md section 4)
            diags.append(Diagnostic(
                k.name_span if k.name_span.line else k.span, "extern-no-ascend",
                f"kernel `{k.source}` has no `extern ascend` body, which the ascend_npu target "
                "needs", "add an `extern ascend \"\"\"...\"\"\"` body (Ascend C) after its "
                "`extern c` body"))
            continue
        try:
            if is_cube(k, vector_only):
                out["aicore/wsp_cube.h"] = cube_header()
                out[header_path(k)] = emit_cube_kernel(k, module.name, cube_jobs(k))
                continue
            sp = mixed_split(k, vector_only)
            if sp is not None:
                out["aicore/wsp_cube.h"] = cube_header()
                out.update(emit_mixed(k, sp, module.name))
                continue
            out[header_path(k)] = emit_kernel(k, module.name, sources, names)
        except UbOverflow as e:
            diags.append(ub_diagnostic(k, e, module))
        except AicoreError as e:
            diags.append(Diagnostic(e.span, "ascend-kernel", e.message, e.help))
    if diags:
        raise WspError(diags, sources)
    return dict(sorted(out.items()))


def emit_kernel(k: N.Kernel, module: str = "wsp", sources: Optional[dict] = None,
                names: Optional[dict] = None) -> str:
    """The header of one kernel (raises AicoreError, or ValueError for an extern kernel without
    an `extern ascend` body). `sources` (path -> text) locates an `extern ascend` body for its
    `#line`; `names` (path -> name in the tree, `host.source_names`; default: the base name)
    is the file that `#line` names, as `../wsp/<name>`: the copy in the tree, relative to the
    header, so the tree holds no absolute path."""
    if k.extern_ascend is not None:
        return emit_extern(k, module, k.extern_ascend, sources or {}, names or {})
    if k.is_extern:
        raise ValueError(f"kernel `{k.source}` has only an `extern c` body: the AICore needs "
                         "an `extern ascend` body")
    return emit_tile_kernel(k, module)


__all__ = ["emit_aicore", "is_cube", "mixed_split", "f64_errors", "emit_kernel", "kernel_entry", "header_path", "support_header",
           "AicoreError", "UB_BYTES", "UB_BUDGET", "API_RESERVE", "pc", "vcount"]
