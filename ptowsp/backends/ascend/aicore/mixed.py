"""Mixed kernels (a matmul and vector work): `split_epilogue(k)` (the rule, in the shared
`backends/mixed_split.py`, which the cycle model asks too) splits a tile kernel whose
matmuls feed vector work (matmul -> vector epilogue: swiglu_ffn's `silu(x @ w1) * (x @ w3)`, a
gemm + bias / activation) into a cube part and a vector part joined by GM workspace tiles
(docs/ascend.md, "Mixed kernels: the split"):

- the cube part (`cube`, a kernel `cube_jobs` takes): each matmul stored into its own
  workspace tile (`Out`, the matmul's shape and dtype: Fixpipe writes what ref's matmul
  value is, f32 or rounded to f16 / bf16);
- the vector part (`vector`): the kernel as written, each matmul read from its workspace tile
  (`In`), the operands only the matmuls read dropped.

On a device the two run in one MIX launch (KERNEL_TYPE_MIX_AIC_1_2): the cube part on the
group's AIC, `CrossCoreSetFlag<2, PIPE_FIX>` after its Fixpipes, the vector part on the AIVs
after `CrossCoreWaitFlag`; each AIV takes half of the rows when every vector op is row-local
(`rows_split`), else AIV 0 takes them all. tests/ascend/test_mixed.py runs the split so on the
CPU Ascend C. The rule (anything else keeps the vector path, never a wrong answer): every
matmul's operands are tile parameters (through transposes and widening converts) the kernel
does not store, with no `acc`, and the cube part is one `cube_jobs` accepts. A vector value
feeding a matmul (RMSNorm -> matmul, attention's softmax(q kᵀ) v) is not split here.

`emit_mixed` writes the two parts and the entries the MIX dispatcher calls (`dispatch.asc`'s
`wsp_dispatch_mix`, which holds the flags between tasks).
"""

from __future__ import annotations

import os

from ....ir import nodes as N
from ...mixed_split import ROW_LOCAL, MixedSplit, Source, split_epilogue  # noqa: F401 (the rule lives there)
from .cube import cube_jobs

# each workspace tile starts on a 512-byte boundary of the block's workspace
WS_ALIGN = 512


def workspace_offsets(sp: MixedSplit) -> tuple[dict[str, int], int]:
    """Each workspace tile's byte offset in one block's workspace, and the bytes in all."""
    from ....dtypes import TABLE

    offs, at = {}, 0
    for p in sp.workspace:
        offs[p.name] = at
        at += -(-p.rows * p.cols * TABLE[p.dtype].size // WS_ALIGN) * WS_ALIGN
    return offs, at


def emit_mixed(k: N.Kernel, sp: MixedSplit, module: str) -> dict[str, str]:
    """The headers of mixed kernel k: its two parts (`<name>__aic`, `<name>__aiv`, the cube and
    the vector kernel as any other) and k's own header, with the entries the MIX dispatcher
    calls, `<entry>_aic(tiles, scalars, ws)` and `<entry>_aiv(tiles, scalars, ws)`: each part's
    tiles made from the task's and the block's workspace `ws` (an AIV's share of the rows when
    `rows_split`). The flags are the dispatcher's (dispatch.asc), between tasks. Raises
    AicoreError as the two emitters do."""
    from ....dtypes import TABLE
    from .cube import emit_cube_kernel
    from .kernel import emit_tile_kernel
    from .names import describe, guard, header_path, kernel_entry

    out = {header_path(sp.cube): emit_cube_kernel(sp.cube, module, cube_jobs(sp.cube)),
           header_path(sp.vector): emit_tile_kernel(sp.vector, module)}
    offs, total = workspace_offsets(sp)
    ws = {p.name: p for p in sp.workspace}
    orig = [p for p in k.params if p.kind == "tile"]

    def tile(j: int, src: Source, split: bool) -> list[str]:
        if isinstance(src, str):
            p = ws[src]
            at = f"ws + {offs[src]}" + (f" + r0 * {p.cols * TABLE[p.dtype].size}" if split else "")
            return [f"    t[{j}] = tiles[0];",
                    f"    t[{j}].addr = (uint64_t)({at});",
                    f"    t[{j}].rows = {'rows' if split else p.rows};",
                    f"    t[{j}].cols = {p.cols};",
                    f"    t[{j}].stride = {p.cols};",
                    f"    t[{j}].index = 0;",
                    f"    t[{j}].index_stride = 0;",
                    f"    t[{j}].index_kind = 0;",
                    f"    t[{j}].col_stride = 1;"]
        lines = [f"    t[{j}] = tiles[{src}];"]
        if split:
            size = TABLE[orig[src].dtype].size
            lines += [f"    t[{j}].addr += (uint64_t)(r0 * t[{j}].stride * {size});",
                      f"    t[{j}].rows = rows;"]
        return lines

    entry = kernel_entry(k)
    aic = [f"    WspTile t[{len(sp.cube_tiles)}];"]
    for j, src in enumerate(sp.cube_tiles):
        aic += tile(j, src, False)
    aic.append(f"    {kernel_entry(sp.cube)}(t, scalars);")
    aiv = ["    const int64_t ratio = AscendC::GetTaskRatio();",
           "    const int64_t sub = AscendC::GetSubBlockIdx();"]
    if sp.rows_split:
        first = next(j for j, s in enumerate(sp.vector_tiles)
                     if isinstance(s, int) and orig[s].name in {o for o, _ in k.stores})
        aiv += [f"    const int64_t m = tiles[{sp.vector_tiles[first]}].rows;",
                "    const int64_t share = (m + ratio - 1) / ratio;",
                "    const int64_t r0 = sub * share;",
                "    const int64_t rows = m - r0 < share ? m - r0 : share;",
                "    if (rows <= 0) return;  /* no rows for this AIV */"]
    else:
        aiv += ["    (void)ratio;",
                "    if (sub != 0) return;  /* not row-local: AIV 0 takes every row */"]
    aiv.append(f"    WspTile t[{len(sp.vector_tiles)}];")
    for j, (src, split) in enumerate(zip(sp.vector_tiles, sp.row_tiles)):
        aiv += tile(j, src, split)
    aiv.append(f"    {kernel_entry(sp.vector)}(t, scalars);")
    g = guard(module, k)
    parts = [os.path.basename(header_path(x)) for x in (sp.cube, sp.vector)]
    text = "\n".join([
        f"// kernel_{entry[len('wsp_aicore_'):]}.h: AICore kernel `{k.source}` of module `{module}`, "
        "a mixed kernel split (aicore/mixed.py; docs/ascend.md, \"Mixed kernels: the split\").",
        "// Generated by wspc; do not edit.",
        "//",
        *(f"//   {describe(p)}" for p in k.params),
        "//",
        f"// the cube part ({parts[0]}) on the group's AIC, the vector part ({parts[1]}) on its AIVs"
        + ("; each AIV a share of the rows" if sp.rows_split else "; AIV 0 every row"),
        f"// joined by {total} bytes of the block's GM workspace: "
        + ", ".join(f"{p.name} {p.dtype}[{p.rows}, {p.cols}] at {offs[p.name]}" for p in sp.workspace),
        f"#ifndef {g}",
        f"#define {g}",
        '#include "kernel_operator.h"',
        '#include "wsp_aicore.h"',
        *(f'#include "{h}"' for h in parts),
        "",
        f"__aicore__ inline void {entry}_aic(const WspTile *tiles, const WspScalar *scalars, GM_ADDR ws)",
        "{", *aic, "}",
        "",
        f"__aicore__ inline void {entry}_aiv(const WspTile *tiles, const WspScalar *scalars, GM_ADDR ws)",
        "{", *aiv, "}",
        "",
        f"#endif  // {g}",
        ""])
    out[header_path(k)] = text
    return out
