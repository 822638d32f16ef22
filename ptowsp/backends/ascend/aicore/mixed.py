"""Mixed kernels (matmuls and vector work): `split_mixed(k)` (the rule, in the shared
`backends/mixed_split.py`, which the cycle model asks too) splits a tile kernel into stages that
alternate between the cube core (AIC) and the vector cores (AIVs) of one AI Core group, joined by
GM workspace tiles (docs/ascend.md, "Mixed kernels: the split"): matmul -> vector epilogue
(swiglu's `silu(x @ w1) * (x @ w3)`), vector prologue -> matmul (RMSNorm -> proj) and chains of
both (attention's `softmax(q kᵀ) v`). Each stage is a kernel of its kind as any other: a cube
stage one `cube_jobs` takes (its operands tile parameters or workspace tiles an earlier vector
stage wrote, its products stored into workspace tiles or, as they are, into the task's tiles), a
vector stage the vector path's (its matmul values read from the workspace).

`emit_mixed` writes the stages and the kernel's own header with the two task functions the MIX
dispatcher (`dispatch.asc`'s `wsp_dispatch_mix`, KERNEL_TYPE_MIX_AIC_1_2) calls,
`<entry>_aic(tiles, scalars, ws, pending)` on the group's AIC and `<entry>_aiv(...)` on each
AIV: each runs its kind's stages in order with the cross-core flags between them (mode 2):

- flag 0, AIC -> AIVs: a cube stage's Fixpipes into the workspace are done (set on PIPE_FIX);
  the next vector stage waits for it;
- flag 2, AIVs -> AIC: a vector stage's copies into the workspace are done (set on PIPE_MTE3,
  by both AIVs); the next cube stage waits for it;
- flag 1, AIVs -> AIC: the AIVs are done with the task (set on PIPE_MTE2, after their last
  copies from the workspace); the AIC waits for it before its next task's stages (`pending`)
  and, after the last task of its run, the dispatcher does;
- flag 3, AIC -> AIVs: when the kernel's vector stages write the workspace, the AIC's relay of
  flag 1 (set on PIPE_MTE2 after its wait and its own copies): the AIVs wait for it before a
  task's first stage, so no AIV overwrites workspace the AIC or the other AIV still reads.

Each AIV takes a share of the rows of every vector stage when the split is `rows_split`, else
AIV 0 takes them all (AIV 1 still keeps the flags). tests/ascend/test_mixed.py runs the splits
so on the CPU Ascend C.
"""

from __future__ import annotations

import os

from ....ir import nodes as N
from ...mixed_split import CUBE, ROW_LOCAL, MixedSplit, Source, Stage, split_mixed  # noqa: F401 (the rule lives there)
from .cube import cube_jobs

# each workspace tile starts on a 512-byte boundary of the block's workspace, each of its rows
# on a 32-byte one (so the AIVs' shares of rows never share a 32-byte block)
WS_ALIGN = 512
WS_ROW_ALIGN = 32


def ws_stride(p: N.KParam) -> int:
    """The row stride of workspace tile p, in elements: its columns rounded up to 32 bytes."""
    from ....dtypes import TABLE

    size = TABLE[p.dtype].size
    return -(-p.cols * size // WS_ROW_ALIGN) * WS_ROW_ALIGN // size


def workspace_offsets(sp: MixedSplit) -> tuple[dict[str, int], int]:
    """Each workspace tile's byte offset in one block's workspace, and the bytes in all."""
    from ....dtypes import TABLE

    offs, at = {}, 0
    for p in sp.workspace:
        offs[p.name] = at
        at += -(-p.rows * ws_stride(p) * TABLE[p.dtype].size // WS_ALIGN) * WS_ALIGN
    return offs, at


def _stage_tiles(sp: MixedSplit, s: Stage, orig: list[N.KParam], offs: dict[str, int],
                 split: bool, d: str) -> list[str]:
    """The C lines making stage s's tiles `t` from the task's `tiles` and the workspace `ws`;
    `split`: of an AIV's rows [r0, r0 + rows) (its original tiles clipped to their rows)."""
    from ....dtypes import TABLE

    ws = {p.name: p for p in sp.workspace}
    lines = [f"{d}WspTile t[{len(s.tiles)}];"]
    for j, (src, rows) in enumerate(zip(s.tiles, s.row_tiles)):
        rows = rows and split
        if isinstance(src, str):
            p = ws[src]
            stride = ws_stride(p)
            at = f"ws + {offs[src]}" + (f" + r0 * {stride * TABLE[p.dtype].size}" if rows else "")
            lines += [f"{d}t[{j}] = tiles[0];",
                      f"{d}t[{j}].addr = (uint64_t)({at});",
                      f"{d}t[{j}].rows = {'rows' if rows else p.rows};",
                      f"{d}t[{j}].cols = {p.cols};",
                      f"{d}t[{j}].stride = {stride};",
                      f"{d}t[{j}].index = 0;",
                      f"{d}t[{j}].index_stride = 0;",
                      f"{d}t[{j}].index_kind = 0;",
                      f"{d}t[{j}].col_stride = 1;"]
            continue
        lines.append(f"{d}t[{j}] = tiles[{src}];")
        if rows:
            size = TABLE[orig[src].dtype].size
            lines += [f"{d}t[{j}].addr += (uint64_t)(r0 * t[{j}].stride * {size});",
                      f"{d}t[{j}].rows = t[{j}].rows - r0 < rows ? "
                      f"(t[{j}].rows > r0 ? t[{j}].rows - r0 : 0) : rows;"]
    return lines


def _task_functions(k: N.Kernel, sp: MixedSplit) -> tuple[list[str], list[str]]:
    """The bodies of `<entry>_aic` and `<entry>_aiv` (the module doc's flags)."""
    from .names import kernel_entry

    offs, _ = workspace_offsets(sp)
    orig = [p for p in k.params if p.kind == "tile"]
    last = len(sp.stages) - 1
    relay = sp.vector_writes
    aic = ["    /* the AIVs are done with the previous task (their set after their last copies) */",
           f"    if (pending) AscendC::CrossCoreWaitFlag<2, {'PIPE_MTE2' if relay else 'PIPE_FIX'}>(1);"]
    if relay:
        aic.append("    if (pending) AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(3);  "
                   "/* so is the AIC: the AIVs may overwrite the workspace */")
    aiv = ["    const int64_t ratio = AscendC::GetTaskRatio();",
           "    const int64_t sub = AscendC::GetSubBlockIdx();"]
    if sp.rows_split:
        s0 = sp.of("vector")[0]
        m = next(p.rows for p, r in zip((p for p in s0.kernel.params if p.kind == "tile"),
                                        s0.row_tiles) if r)
        aiv += [f"    const int64_t share = ({m} + ratio - 1) / ratio;  /* of the {m} rows */",
                "    const int64_t r0 = sub * share;",
                f"    const int64_t rows = {m} - r0 < share ? {m} - r0 : share;",
                "    const bool mine = rows > 0;  /* AIV 1 of a one-row task has none */"]
    else:
        aiv += ["    (void)ratio;",
                "    const bool mine = sub == 0;  /* not row-local: AIV 0 takes every row */"]
    if relay:
        aiv.append("    if (pending) AscendC::CrossCoreWaitFlag<2, PIPE_MTE3>(3);  "
                   "/* the group is done with the previous task's workspace */")
    else:
        aiv.append("    (void)pending;")
    for i, s in enumerate(sp.stages):
        entry = kernel_entry(s.kernel)
        if s.kind == CUBE:
            if i > 0:
                aic.append("    AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(2);  "
                           f"/* stage {i - 1}'s workspace, from the AIVs */")
            aic += [f"    {{  /* stage {i}: {s.kernel.name} */",
                    *_stage_tiles(sp, s, orig, offs, False, "        "),
                    f"        {entry}(t, scalars);", "    }"]
            if i < last:
                aic.append("    AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);  /* after the Fixpipes */")
        else:
            if i > 0:
                aiv.append("    AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(0);  "
                           f"/* stage {i - 1}'s workspace, from the AIC */")
            aiv += [f"    if (mine) {{  /* stage {i}: {s.kernel.name} */",
                    *_stage_tiles(sp, s, orig, offs, sp.rows_split, "        "),
                    f"        {entry}(t, scalars);", "    }"]
            if i < last:
                aiv.append("    AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(2);  "
                           "/* after the copies into the workspace */")
    aiv.append("    AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(1);  /* done with the task */")
    return aic, aiv


def emit_mixed(k: N.Kernel, sp: MixedSplit, module: str) -> dict[str, str]:
    """The headers of mixed kernel k: its stages (`<name>__s<i>`, each a cube or a vector kernel
    as any other) and k's own header, with the task functions the MIX dispatcher calls,
    `<entry>_aic(tiles, scalars, ws, pending)` and `<entry>_aiv(tiles, scalars, ws, pending)`
    (`ws`: the block's workspace; `pending`: a mixed task ran before on the group in this
    launch). Raises AicoreError as the two emitters do."""
    from .cube import emit_cube_kernel
    from .kernel import emit_tile_kernel
    from .names import describe, guard, header_path, kernel_entry

    out = {}
    for s in sp.stages:
        out[header_path(s.kernel)] = (emit_cube_kernel(s.kernel, module, cube_jobs(s.kernel))
                                      if s.kind == CUBE else emit_tile_kernel(s.kernel, module))
    offs, total = workspace_offsets(sp)
    aic, aiv = _task_functions(k, sp)
    entry = kernel_entry(k)
    g = guard(module, k)
    parts = [os.path.basename(header_path(s.kernel)) for s in sp.stages]
    args = "const WspTile *tiles, const WspScalar *scalars, GM_ADDR ws, bool pending"
    text = "\n".join([
        f"// kernel_{entry[len('wsp_aicore_'):]}.h: AICore kernel `{k.source}` of module `{module}`, "
        "a mixed kernel split (aicore/mixed.py; docs/ascend.md, \"Mixed kernels: the split\").",
        "// Generated by wspc; do not edit.",
        "//",
        *(f"//   {describe(p)}" for p in k.params),
        "//",
        f"// stages {sp.form}: "
        + ", ".join(f"{h} on the {'AIC' if s.kind == CUBE else 'AIVs'}"
                    for h, s in zip(parts, sp.stages))
        + ("; each AIV a share of the rows" if sp.rows_split else "; AIV 0 every row"),
        f"// joined by {total} bytes of the block's GM workspace: "
        + ", ".join(f"{p.name} {p.dtype}[{p.rows}, {p.cols}] at {offs[p.name]}" for p in sp.workspace),
        f"#ifndef {g}",
        f"#define {g}",
        '#include "kernel_operator.h"',
        '#include "wsp_aicore.h"',
        *(f'#include "{h}"' for h in parts),
        "",
        f"__aicore__ inline void {entry}_aic({args})",
        "{", *aic, "}",
        "",
        f"__aicore__ inline void {entry}_aiv({args})",
        "{", *aiv, "}",
        "",
        f"#endif  // {g}",
        ""])
    out[header_path(k)] = text
    return out
