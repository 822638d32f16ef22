"""The split of a mixed kernel (matmuls and vector work) into stages that alternate between the
cube core (AIC) and the vector cores (AIVs) of one AI Core group, joined by GM workspace tiles,
as a rule on the IR: the Ascend emitter emits it (`backends/ascend/aicore/mixed.py`,
docs/ascend.md "Mixed kernels: the split") and the cycle model costs it (`backends/cpu/cost.py`),
so both ask one rule (`split_mixed`).

Each op gets a level: a value computed by the vector unit from the kernel's parameters is at
level 0; a matmul is at the odd level just past its operands (1 when they are parameters); a
vector op at the even level of its latest argument (a matmul's level + 1). Each level with work
is a stage: odd levels run on the cube, even ones on the vector cores. So

- matmul -> vector epilogue (swiglu's `silu(x @ w1) * (x @ w3)`) is cube 1, vector 2;
- vector prologue -> matmul (RMSNorm -> proj) is vector 0, cube 1;
- attention's `softmax(q kᵀ) v` is cube 1, vector 2, cube 3 (and vector 4 for work after).

A matmul operand computed by the vector unit (the value under its transposes and widening
converts) is written by its vector stage into a workspace tile `wsp_v<j>` the cube stage reads
as a parameter; a matmul's product goes into a workspace tile `wsp_mm<j>` that later vector
stages read, unless it is stored as it is (or converted to the stored dtype) into a tile
nothing in the kernel reads: then the cube stage stores it. Every other store is the last
vector stage's (a stored `InOut` tile is read with its old value by every stage before).
A later vector stage reads what an earlier stage put in the workspace and recomputes the rest.
A `matmul(a, b, acc = c)` of f32 is `c + matmul(a, b)`, the addition a vector op.

The rule (anything else keeps the vector path for the whole kernel, never a wrong answer): a
matmul's operands are parameters (`In`, not stored) or vector values, never another matmul's
product as it is; every cube stage is one the cube path runs (`cube.cube_matmuls`: dtypes,
`pad`, L1 room).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Union

from ..ir import nodes as N
from .cube import CUBE_OUT, cube_matmuls

# ops whose value's row i depends on the operands' row i only (and on whole-tile constants): a
# vector part made of these computes the same rows from a view of some of the rows (a
# broadcast too: its source has one row, read whole, or the rows of its result)
ROW_LOCAL = frozenset((
    "param", "scalar_param", "literal", "valid_cols", "iota_col", "add", "sub", "mul", "div",
    "maximum", "minimum", "pow", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "neg", "abs",
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "relu", "gelu", "silu", "not",
    "convert", "cast", "where", "rowsum", "rowmax", "rowmin", "rowmean", "slice_cols",
    "concat_cols", "broadcast"))

Source = Union[int, str]  # a stage's tile: the original kernel's tile index, or a workspace's name

CUBE, VECTOR = "cube", "vector"


@dataclass(frozen=True)
class Stage:
    """One stage of a split kernel: a kernel run on the group's AIC (`kind` CUBE) or AIVs
    (VECTOR); `tiles` gives, per tile parameter, the original kernel's tile index (its `WspTile`
    in the task record) or the name of a workspace tile; its scalars are the original's, in
    order; `row_tiles`, per tile, whether an AIV takes a share of its rows (a vector stage of a
    split whose `rows_split`; else all False)."""

    kind: str
    kernel: N.Kernel
    tiles: tuple[Source, ...]
    row_tiles: tuple[bool, ...]

    def writes(self) -> tuple[str, ...]:
        """The workspace tiles this stage stores."""
        return tuple(s for s in self.tiles if isinstance(s, str)
                     and s in {out for out, _ in self.kernel.stores})


@dataclass(frozen=True)
class MixedSplit:
    """A mixed kernel's stages (alternating kinds, in order) and its workspace tiles (`Out`, as
    their writer declares them); `rows_split`: the AIVs share the rows of every vector stage
    (every vector op row-local, one row count), else AIV 0 takes every row."""

    stages: tuple[Stage, ...]
    workspace: tuple[N.KParam, ...]
    rows_split: bool

    def of(self, kind: str) -> tuple[Stage, ...]:
        return tuple(s for s in self.stages if s.kind == kind)

    @property
    def vector_writes(self) -> bool:
        """Whether a vector stage writes the workspace (a prologue, or a chain): then the AIVs'
        writes of a task wait for the group to be done with the previous one."""
        return any(s.writes() for s in self.of(VECTOR))

    @property
    def form(self) -> str:
        """The stages' kinds, e.g. `cube -> vector` (an epilogue)."""
        return " -> ".join(s.kind for s in self.stages)

    @property
    def workspace_bytes(self) -> int:
        """The GM workspace one task needs (each tile's rows x cols elements)."""
        from ..dtypes import TABLE

        return sum(p.rows * p.cols * TABLE[p.dtype].size for p in self.workspace)


def _closure(ops, roots) -> set[int]:
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
    then `extra` params (those named or stored only); (kernel, its tile sources)."""
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
        if p.name in named or p.name in stored:
            params.append(p)
            sources.append(p.name)
    sub = dataclasses.replace(k, name=name, params=tuple(params), ops=tuple(new_ops),
                              stores=tuple((out, index[v]) for out, v in stores), plan=None,
                              fused=())
    return sub, tuple(sources)


def _without_acc(ops: tuple[N.Op, ...], stores):
    """ops with each f32 `matmul(a, b, acc = c)` as `c + matmul(a, b)`; (ops, stores)."""
    out: list[N.Op] = []
    at: dict[int, int] = {}
    for i, op in enumerate(ops):
        args = tuple(at[a] for a in op.args)
        if op.op == "matmul" and len(args) == 3 and op.dtype == "f32":
            out.append(dataclasses.replace(op, args=args[:2]))
            out.append(N.Op("add", (args[2], len(out) - 1), op.shape, op.dtype))
        else:
            out.append(dataclasses.replace(op, args=args))
        at[i] = len(out) - 1
    return tuple(out), tuple((o, at[v]) for o, v in stores)


def _operand_root(ops, i: int) -> int:
    """The op under op i's transposes and widening converts (what the cube loads)."""
    while True:
        op = ops[i]
        if op.op == "transpose" or (op.op == "convert" and op.dtype == "f32"
                                    and ops[op.args[0]].dtype in ("f16", "bf16")):
            i = op.args[0]
        else:
            return i


def split_mixed(k: N.Kernel) -> Optional[MixedSplit]:
    """k's stages (the module doc's rule), or None: k is not mixed (no matmul, or all matmuls:
    the cube kernel as it is) or does not split."""
    if k.is_extern or not k.stores or cube_matmuls(k) is not None:
        return None
    if not any(op.op == "matmul" for op in k.ops):
        return None
    ops, stores = _without_acc(k.ops, k.stores)
    params = {p.name: p for p in k.params}
    stored = {out for out, _ in stores}
    read = {str(op.attr) for op in ops if op.op == "param"}
    if len(stored) != len(stores):
        return None  # a tile stored twice: the order of the stages would matter
    level = [0] * len(ops)
    roots: list[int] = []  # vector values a matmul reads (through the workspace)
    for i, op in enumerate(ops):
        if op.op == "matmul":
            if len(op.args) != 2 or op.dtype not in CUBE_OUT:
                return None
            lv = 0
            for a in op.args:
                j = _operand_root(ops, a)
                if ops[j].op == "param":
                    name = str(ops[j].attr)
                    if name in stored or params[name].mode != "In":
                        return None
                    continue
                if ops[j].op == "matmul":
                    return None  # a product the cube would read as it is: not split
                if j not in roots:
                    roots.append(j)
                lv = max(lv, level[j])
            level[i] = lv + 1
        else:
            level[i] = max((level[a] + (ops[a].op == "matmul") for a in op.args), default=0)
    uses = [0] * len(ops)
    for op in ops:
        for a in op.args:
            uses[a] += 1
    for _, v in stores:
        uses[v] += 1
    # the stores the cube makes: a product stored as it is (or converted to the stored dtype),
    # used by nothing else, into a tile nothing reads
    direct: dict[str, int] = {}  # out -> the matmul
    for out, v in stores:
        m = v
        if ops[m].op == "convert" and ops[m].dtype == params[out].dtype and uses[m] == 1:
            m = ops[m].args[0]
        p = params[out]
        if (ops[m].op == "matmul" and uses[m] == 1 and out not in read
                and p.dtype in CUBE_OUT and (p.rows, p.cols) == ops[m].shape):
            direct[out] = m
    mms = [i for i, op in enumerate(ops) if op.op == "matmul"]
    mm_ws = {i: f"wsp_mm{j}" for j, i in enumerate(i for i in mms if i not in direct.values())}
    v_ws = {i: f"wsp_v{j}" for j, i in enumerate(roots)}
    if any(n in params for n in (*mm_ws.values(), *v_ws.values())):
        return None
    ws = {name: N.KParam(name, "tile", ops[i].dtype, "Out", *ops[i].shape)
          for i, name in (*mm_ws.items(), *v_ws.items())}
    vstores = [(out, v) for out, v in stores if out not in direct]
    last_v = max([level[v] + (ops[v].op == "matmul") for _, v in vstores]
                 + [level[j] for j in roots], default=-1)
    levels = sorted({level[i] for i in mms} | {level[j] for j in roots}
                    | ({last_v} if vstores else set()))

    def reads(lv: int) -> list[N.Op]:
        """ops with every value put in the workspace before level lv read from there."""
        out = list(ops)
        for i, name in (*mm_ws.items(), *v_ws.items()):
            if level[i] < lv:
                out[i] = N.Op("param", (), ops[i].shape, ops[i].dtype, name)
        return out

    def ws_in(names) -> list[N.KParam]:
        return [dataclasses.replace(ws[n], mode="In") for n in names]

    stages: list[Stage] = []
    for lv in levels:
        sub_ops = reads(lv)
        if lv % 2:
            here = [i for i in mms if level[i] == lv]
            st = [(out, v) for out, v in stores if direct.get(out) in here]
            st += [(mm_ws[i], i) for i in here if i in mm_ws]
            extra = [ws[mm_ws[i]] for i in here if i in mm_ws] + ws_in(
                v_ws[j] for j in roots if level[j] < lv)
            sub, tiles = _subkernel(k, f"{k.name}__s{len(stages)}", sub_ops,
                                    _closure(sub_ops, [v for _, v in st]), st, extra)
            sub = dataclasses.replace(sub, params=tuple(p for p in sub.params if p.kind == "tile"))
            if cube_matmuls(sub) is None:
                return None
            stages.append(Stage(CUBE, sub, tiles, tuple(False for _ in tiles)))
        else:
            st = [(v_ws[j], j) for j in roots if level[j] == lv]
            if lv == last_v:
                st += vstores
            extra = [ws[v_ws[j]] for j in roots if level[j] == lv] + ws_in(
                n for i, n in (*mm_ws.items(), *v_ws.items()) if level[i] < lv)
            sub, tiles = _subkernel(k, f"{k.name}__s{len(stages)}", sub_ops,
                                    _closure(sub_ops, [v for _, v in st]), st, extra)
            stages.append(Stage(VECTOR, sub, tiles, ()))
    vec = [s for s in stages if s.kind == VECTOR]
    split = [_row_tiles(s.kernel) for s in vec]
    rows_split = bool(vec) and all(m is not None for m, _ in split) and len({m for m, _ in split}) == 1
    it = iter(split)
    stages = [dataclasses.replace(s, row_tiles=(next(it)[1] if rows_split else
                                                tuple(False for _ in s.tiles)))
              if s.kind == VECTOR else s for s in stages]
    used = {n for s in stages for n in s.tiles if isinstance(n, str)}
    return MixedSplit(tuple(stages), tuple(p for n, p in ws.items() if n in used), rows_split)


def _row_tiles(v: N.Kernel) -> tuple[Optional[int], tuple[bool, ...]]:
    """(M, per tile of vector stage v whether an AIV takes a share of its rows): the tiles of
    the stored tiles' rows M, when every op is row-local and M > 1 (a tile of one row is a
    broadcast row, read whole); (None, ()) when the rows cannot be shared."""
    tiles = [p for p in v.params if p.kind == "tile"]
    rows = {p.rows for p in tiles if p.name in {out for out, _ in v.stores}}
    if len(rows) != 1 or not all(op.op in ROW_LOCAL for op in v.ops):
        return None, ()
    (m,) = rows
    if m < 2 or any(p.rows not in (1, m) for p in tiles):
        return None, ()
    return m, tuple(p.rows == m for p in tiles)
