"""Mixed kernels (a matmul and vector work): `split_epilogue(k)` splits a tile kernel whose
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

import dataclasses
import os
from dataclasses import dataclass
from typing import Optional, Union

from ....ir import nodes as N
from .cube import CUBE_OUT, _operand, cube_jobs

# ops whose value's row i depends on the operands' row i only (and on whole-tile constants): a
# vector part made of these computes the same rows from a view of some of the rows (a
# broadcast too: its source has one row, read whole, or the rows of its result)
ROW_LOCAL = frozenset((
    "param", "scalar_param", "literal", "valid_cols", "iota_col", "add", "sub", "mul", "div",
    "maximum", "minimum", "pow", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "neg", "abs",
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "relu", "gelu", "silu", "not",
    "convert", "cast", "where", "rowsum", "rowmax", "rowmin", "rowmean", "slice_cols",
    "concat_cols", "broadcast"))

Source = Union[int, str]  # a part's tile: the original kernel's tile index, or a workspace's name


@dataclass(frozen=True)
class MixedSplit:
    """A mixed kernel's two parts. `cube_tiles` / `vector_tiles` give, per tile parameter of
    each part, the original kernel's tile index (its `WspTile` in the task record) or the
    name of a workspace tile; the vector part's scalars are the original's, in order."""

    cube: N.Kernel
    vector: N.Kernel
    workspace: tuple[N.KParam, ...]
    cube_tiles: tuple[Source, ...]
    vector_tiles: tuple[Source, ...]
    # the vector part's tiles an AIV takes a share of the rows of (the others whole: a [1, n]
    # row broadcast); all False when the AIVs cannot share the rows (AIV 0 takes them all)
    row_tiles: tuple[bool, ...]

    @property
    def rows_split(self) -> bool:
        return any(self.row_tiles)

    @property
    def workspace_bytes(self) -> int:
        """The GM workspace one task needs (each tile's rows x cols elements)."""
        from ....dtypes import TABLE

        return sum(p.rows * p.cols * TABLE[p.dtype].size for p in self.workspace)


def _closure(ops: tuple[N.Op, ...], roots) -> set[int]:
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(ops[i].args)
    return seen


def _subkernel(k: N.Kernel, name: str, ops: list[N.Op], keep: set[int], stores, extra):
    """A kernel of k's ops in `keep` (re-indexed), the params they name and the stored ones,
    then `extra` params; (kernel, its tile sources)."""
    index = {}
    new_ops = []
    for i, op in enumerate(ops):
        if i in keep:
            index[i] = len(new_ops)
            new_ops.append(dataclasses.replace(op, args=tuple(index[a] for a in op.args)))
    named = {str(op.attr) for op in new_ops if isinstance(op.attr, str)}
    stored = {out for out, _ in stores}
    extra_names = {p.name for p in extra}
    tiles = [p for p in k.params if p.kind == "tile"]
    params, sources = [], []
    for p in k.params:
        if p.name in extra_names:
            continue
        if p.kind == "scalar" or p.name in named or p.name in stored:
            params.append(p)
            if p.kind == "tile":
                sources.append(tiles.index(p))
    for p in extra:
        params.append(p)
        sources.append(p.name)
    sub = dataclasses.replace(k, name=name, params=tuple(params), ops=tuple(new_ops),
                              stores=tuple((out, index[v]) for out, v in stores), plan=None,
                              fused=())
    return sub, tuple(sources)


def split_epilogue(k: N.Kernel) -> Optional[MixedSplit]:
    """k's split into a cube part and a vector part (the module doc's rule), or None."""
    if k.is_extern or not k.stores or cube_jobs(k) is not None:
        return None
    params = {p.name: p for p in k.params}
    stored = {out for out, _ in k.stores}
    mms = [i for i, op in enumerate(k.ops) if op.op == "matmul"]
    if not mms:
        return None
    workspace = []
    for j, i in enumerate(mms):
        op = k.ops[i]
        if len(op.args) != 2 or op.dtype not in CUBE_OUT:
            return None
        for a in op.args:
            src = _operand(k, a)
            if src is None or src[0] in stored or params[src[0]].mode != "In":
                return None
        rows, cols = op.shape
        name = f"wsp_mm{j}"
        if name in params:
            return None
        workspace.append(N.KParam(name, "tile", op.dtype, "Out", rows, cols))
    ws_out = tuple(workspace)
    ws_in = tuple(dataclasses.replace(p, mode="In") for p in workspace)
    # the cube part: the matmuls and what they read, each stored into its workspace tile
    cube, cube_tiles = _subkernel(k, f"{k.name}__aic", list(k.ops), _closure(k.ops, mms),
                                  [(w.name, i) for w, i in zip(ws_out, mms)], ws_out)
    cube = dataclasses.replace(cube, params=tuple(p for p in cube.params if p.kind == "tile"))
    if cube_jobs(cube) is None:
        return None
    # the vector part: each matmul becomes a read of its workspace tile
    ops = list(k.ops)
    for w, i in zip(ws_in, mms):
        ops[i] = N.Op("param", (), ops[i].shape, ops[i].dtype, w.name)
    keep = _closure(tuple(ops), [v for _, v in k.stores])
    vector, vector_tiles = _subkernel(k, f"{k.name}__aiv", ops, keep, list(k.stores), ws_in)
    return MixedSplit(cube, vector, ws_out, cube_tiles, vector_tiles, _row_tiles(vector))


def _row_tiles(v: N.Kernel) -> tuple[bool, ...]:
    """Per tile of the vector part, whether an AIV takes a share of its rows: the tiles of the
    stored tiles' rows M, when every op is row-local and M > 1 (a tile of one row is a
    broadcast row, read whole)."""
    tiles = [p for p in v.params if p.kind == "tile"]
    rows = {p.rows for p in tiles if p.name in {out for out, _ in v.stores}}
    if len(rows) != 1 or not all(op.op in ROW_LOCAL for op in v.ops):
        return tuple(False for _ in tiles)
    (m,) = rows
    if m < 2 or any(p.rows not in (1, m) for p in tiles):
        return tuple(False for _ in tiles)
    return tuple(p.rows == m for p in tiles)


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
