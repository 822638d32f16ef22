"""`sort_values` / `sort_indices` (`sort`, `topk`) of values held in f32 (f32, f16, bf16) with
rows of at most 32 elements, on the vector unit's `Sort32`: the MoE router's `topk` over its
experts takes one instruction for every row of a chunk instead of n^2 scalar compares a row.

How ref's order is kept (selection.py: stable, NaN the greatest value):
- Sort32 orders the 32 scores of a repeat greatest first and, as documented, equal scores in
  their input order: the stable descending order. Ascending is the descending order of the
  negated scores (the sign bit flipped: exact, and equal values stay equal and in order).
- A row is staged into a repeat of its own, padded with -inf past its n elements: a padding
  element ties only with a real -inf, and comes after it (a higher position), so the first n
  pairs are the row's elements.
- What Sort32's documentation leaves open (the place of NaN, the order of -0 and +0) never
  reaches it: the scalar pass that stages the rows notes a NaN or a -0, and a chunk holding
  one is ordered by the scalar path instead (`scalar_ops._select_lines`, ref's order by
  definition). The CPU Ascend C refuses both, so a kernel that passed one would fail its tests.
The staging and the read-back of the first k pairs are scalar (n + k element moves a row,
against n^2 compares); the sort itself is one vector instruction per 255 rows.
Integer values stay on the scalar path: Sort32 takes half and float scores only.
"""

from __future__ import annotations

from ....dtypes import TABLE
from ... import cexpr as C
from .layout import pc

SORT32 = 32  # scores one Sort32 repeat orders
MAX_REPEAT = 255  # Sort32's repeatTime range is [0, 255]


def sort32_fits(adt: str, n: int) -> bool:
    """Whether a sort of rows of n values of dtype adt runs on Sort32."""
    return TABLE[adt].c_compute == "float" and n <= SORT32


def sort32_lines(f, i: int, rows: int, chunk: bool, dst: str, scalar_lines: list) -> None:
    """Emit the Sort32 path of select op i (its operand's `rows` rows) into frame f's
    body, with `scalar_lines` (the scalar path) as the fallback for a chunk with NaN or -0."""
    op = f.ops[i]
    (a,) = op.args
    n, k = f.ops[a].shape[1], op.shape[1]
    odd = f"odd{i}"
    asc = op.attr == "asc"
    out = f.out
    stage = f.temp("float", rows * SORT32)
    index = f.temp("uint32_t", rows * SORT32)
    pairs = f.temp("float", rows * SORT32 * 2)
    sbits = f"{stage}.ReinterpretCast<uint32_t>()"
    pbits = f"{pairs}.ReinterpretCast<uint32_t>()"
    # the padding (-inf) and indices the scalar pass does not write
    f.vec(f"AscendC::Duplicate({sbits}, 0xff800000u, {rows * SORT32});")
    f.vec(f"AscendC::Duplicate({index}, 0u, {rows * SORT32});")
    f.need_s()
    src = f.ops[a]
    row = C.E(0) if src.shape[0] == 1 else f.row_offset(a, chunk)
    at = C.to_c(C.iadd(C.imul(row, pc(n)), "j"))
    x = f"{f.tensor[a]}.ReinterpretCast<uint32_t>()"
    flip = " ^ 0x80000000u" if asc else ""
    out(f"bool {odd} = false;  // a NaN or a -0: Sort32 does not document their order")
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    for (int32_t j = 0; j < {n}; ++j) {{")
    out(f"        const uint32_t b = {x}.GetValue({at});")
    out(f"        {odd} = {odd} || (b & 0x7fffffffu) > 0x7f800000u || b == 0x80000000u;")
    out(f"        {sbits}.SetValue(i * {SORT32} + j, b{flip});")
    out(f"        {index}.SetValue(i * {SORT32} + j, (uint32_t)j);")
    out("    }")
    out("}")
    out(f"if (!{odd}) {{")
    out("    wsp_sync<AscendC::HardEvent::S_V>();")
    for r0 in range(0, rows, MAX_REPEAT):
        rep = min(MAX_REPEAT, rows - r0)
        o = r0 * SORT32
        out(f"    AscendC::Sort32({pairs}[{2 * o}], {stage}[{o}], {index}[{o}], {rep});")
    out("    AscendC::PipeBarrier<PIPE_V>();")
    out("    wsp_sync<AscendC::HardEvent::V_S>();")
    p = pc(op.shape[1])
    if op.op == "sort_values":
        put = f"{dst}.ReinterpretCast<uint32_t>().SetValue(i * {p} + r, " \
              f"{pbits}.GetValue(2 * (i * {SORT32} + r)){flip});"
    else:
        put = f"{dst}.SetValue(i * {p} + r, " \
              f"(int32_t){pbits}.GetValue(2 * (i * {SORT32} + r) + 1));"
    out(f"    for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"        for (int32_t r = 0; r < {k}; ++r) {put}")
    out("    }")
    out("} else {")
    for ln in scalar_lines:
        out("    " + ln)
    out("}")
    # both branches end with the scalar unit's writes, after the vector unit's were waited for
    f.v_dirty, f.s_dirty = False, True
