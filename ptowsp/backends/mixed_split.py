"""The split of a mixed kernel (a matmul and a vector epilogue) into a cube part and a vector
part joined by workspace tiles, as a rule on the IR: the Ascend emitter emits it
(`backends/ascend/aicore/mixed.py`, docs/ascend.md "Mixed kernels: the split") and the cycle
model costs it (`backends/cpu/cost.py`), so both ask one rule. The rule: every matmul's
operands are tile parameters (through transposes and widening converts) the kernel does not
store, with no `acc`, and the cube part is one the cube path runs (`cube.cube_matmuls`);
anything else (a vector value feeding a matmul) is not split.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Union

from ..ir import nodes as N
from .cube import CUBE_OUT, cube_matmuls, matmul_operand

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
        from ..dtypes import TABLE

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
    if k.is_extern or not k.stores or cube_matmuls(k) is not None:
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
            src = matmul_operand(k, a)
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
    if cube_matmuls(cube) is None:
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
