"""What the Ascend vector emitter never holds whole in the Unified Buffer, as rules on a kernel's
op DAG: a matmul's right operand streamed from GM in blocks of rows, and a transpose that only
matmuls read (read in place, never computed); and the UB's layout facts (its size, the row
pitch, the repeats). Shared by the emitter, which emits it (`backends/ascend/aicore/`), the UB
plan (`backends/ub_plan.py`), which sizes it, and the cycle model, which costs it
(`backends/cpu/cost.py`), so the model follows the code: one rule, one place.
"""

from __future__ import annotations

from typing import Optional

from ..dtypes import FLOAT_DTYPES, TABLE
from ..primitives import OPS

# the dtypes the vector unit computes in f32 (f16 / bf16 held in f32, as nodes.py says)
VFLOAT = tuple(n for n in FLOAT_DTYPES if TABLE[n].c_compute == "float")

# -- how values lie in the Unified Buffer (UB) of one AICore vector core (the emitter's
# `aicore/layout.py` says why; the UB plan, `ub_plan.py`, sizes kernels with the same facts)

# bytes of each C++ element type a UB tensor is declared with (f16 and bf16 as half and
# bfloat16_t; a value held as float, double or an integer)
CXX_SIZE = {d.ascend: d.size for d in TABLE.values()}
ROW_ALIGN = 32  # elements: a UB row is a multiple of 32 elements of any dtype
REPEAT = 64  # elements: vector instructions run over whole 256-byte repeats of f32
ADV_TMP = 8 * 1024  # sharedTmpBuffer of Tanh/Sin/Cos/Power (their minimum is far below)
MAX_LIVE = 8  # tensors one TPosition may have allocated at once (910B)
STREAM_BYTES = 16 * 1024  # a block of matmul weights streamed from GM

# The Unified Buffer of one 910B vector core
UB_BYTES = 192 * 1024
# Ascend C keeps the top 8 KiB of UB for its own temporaries (TMP_UB_OFFSET = 184 KiB,
# TMP_UB_SIZE = 8 KiB in the CANN headers; Select stages its mask address there): a kernel's
# buffers must stay below it
API_RESERVE = 8 * 1024
UB_BUDGET = UB_BYTES - API_RESERVE


def ceil_to(a: int, b: int) -> int:
    """`a` rounded up to a multiple of `b`."""
    return -(-a // b) * b


def pc(cols: int) -> int:
    """Elements between the rows of a UB tile of `cols` columns."""
    return ceil_to(max(cols, 1), ROW_ALIGN)


def vcount(rows: int, cols: int) -> int:
    """Elements a vector instruction covers for a UB tile: whole 256-byte f32 repeats."""
    return ceil_to(rows * pc(cols), REPEAT)


def held_size(dtype: str) -> int:
    """Bytes of a value of `dtype` as a kernel holds it (f16 and bf16 as f32)."""
    return CXX_SIZE[TABLE[dtype].c_compute]


def streamed_operands(ops: tuple, stored: frozenset = frozenset()) -> dict[int, tuple[int, Optional[int]]]:
    """matmul op -> (param op, convert op or None) for a right operand read straight from GM in
    blocks of rows (a parameter, possibly converted to f32, that nothing else reads and the
    kernel does not store to: its GM rows must keep their entry values while the chunks run):
    it is never resident, so the weights of a matmul need not fit the UB."""
    users: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for a in op.args:
            users.setdefault(a, []).append(i)

    def only_b(u: int) -> bool:
        return all(ops[c].op == "matmul" and ops[c].args[1] == u and u not in ops[c].args[:1] +
                   ops[c].args[2:] for c in users.get(u, []))

    out = {}
    for i, op in enumerate(ops):
        if op.op != "matmul":
            continue
        b = op.args[1]
        src = ops[b].args[0] if ops[b].op in ("convert", "cast") else b
        if ops[src].op != "param" or str(ops[src].attr) in stored:
            continue
        if ops[b].op == "param" and ops[b].dtype in VFLOAT and only_b(b):
            out[i] = (b, None)
        elif (ops[b].op in ("convert", "cast") and ops[b].dtype in VFLOAT and only_b(b)
              and ops[ops[b].args[0]].op == "param" and ops[ops[b].args[0]].dtype in VFLOAT
              and all(c == b or (ops[c].op in ("convert", "cast") and only_b(c))
                      for c in users.get(ops[b].args[0], []))):
            out[i] = (ops[b].args[0], b)
    return out


def in_place_transposes(ops: tuple, stored: frozenset = frozenset()) -> dict[int, int]:
    """transpose op -> its operand, for every `transpose` that is read only as the left or right
    operand of matmuls (never as an accumulator, never stored): the matmuls read the operand in
    place, so the transpose is never computed (language.md section 4, "Matrix")."""
    users: dict[int, list[tuple[int, int]]] = {}
    for i, op in enumerate(ops):
        for pos, a in enumerate(op.args):
            users.setdefault(a, []).append((i, pos))
    return {i: op.args[0] for i, op in enumerate(ops)
            if op.op == "transpose" and i not in stored and users.get(i)
            and all(ops[u].op == "matmul" and pos < 2 for u, pos in users[i])}


_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


def vector_ok(op, ops: tuple) -> bool:
    """Whether the vector unit has instructions for `op` (of the kernel's `ops`): the one rule
    the Ascend emitter (`aicore/vector.py`) and the UB plan (`ub_plan.py`) both follow."""
    name, dt = op.op, op.dtype
    kind = OPS[name].plan
    args = [ops[a] for a in op.args]
    adts = [a.dtype for a in args]
    if name == "matmul":
        return True
    if name == "broadcast" or kind == "red":
        return dt in VFLOAT and adts[0] in VFLOAT
    if name in ("convert", "cast"):
        src = adts[0]
        return dt in VFLOAT and (src in VFLOAT or src == "bool" or (src == "i32" and dt != "bf16"))
    if name in _COMPARES:
        return all(d in VFLOAT for d in adts)
    if name == "where":
        return dt in VFLOAT and adts[0] == "bool" and all(d in VFLOAT for d in adts[1:])
    if name == "pow":
        return dt in VFLOAT and adts[0] in VFLOAT and args[1].shape is None
    if name in ("and", "or", "not"):
        return False
    # every other float elementwise op has instructions; leaves and the other views (index
    # maps) are not elementwise: copies (`copy_ok`), gathers (moves.py) or the scalar unit
    return kind == "ew" and dt in VFLOAT and all(d in VFLOAT for d in adts)


def copy_ok(op, ops: tuple) -> bool:
    """A slice or a concatenation the vector unit moves as boxes of 32-bit words
    (`wsp_copy_box`, `wsp_copy_words`): one dtype (any: a UB row is whole 32-byte blocks), the
    same rows, and every column offset on a 32-byte block, where Copy can start."""
    if op.op not in ("slice_cols", "concat_cols", "slice_rows", "concat_rows"):
        return False
    args = [ops[a] for a in op.args]
    if any(a.shape is None or a.dtype != op.dtype for a in args):
        return False
    es = held_size(op.dtype)
    if op.op == "slice_cols":
        return int(op.attr) * es % 32 == 0 and args[0].shape[0] == op.shape[0]
    if op.op == "concat_cols":
        return args[0].shape[1] * es % 32 == 0 and all(a.shape[0] == op.shape[0] for a in args)
    return all(a.shape[1] == op.shape[1] for a in args)
