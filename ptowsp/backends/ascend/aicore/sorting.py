"""`sort_values` / `sort_indices` (`sort`, `topk`) of values held in f32 (f32, f16, bf16) with
rows of at most 128 elements, on the vector unit's `Sort32` and `MrgSort`: the MoE router's
`topk` over its experts takes one instruction for every row of a chunk instead of n^2 scalar
compares a row.

How ref's order is kept (selection.py: stable, NaN the greatest value):
- A row of n elements is staged as ceil(n / 32) runs of 32 (its UB pitch), padded with -inf
  and an index above every column's. Sort32 orders each run greatest first and, as
  documented, equal scores in their input order. Ascending is the descending order of the
  scores with the sign bit flipped (exact: equal values stay equal and in order).
- More than one run: one MrgSort a row merges them greatest first. Its documentation states
  no order between equal scores of different runs, so the scalar unit then puts the indices
  of each run of equal scores that starts before position k in ascending order (usually a
  run is one pair; the CPU MrgSort takes the later list first on a tie, so this is tested).
  A pad ties only with a real -inf, and its index puts it after the real one.
- What the documentation leaves open, the place of NaN and the order of -0 against +0, never
  reaches the instructions: the scalar pass that stages the rows notes a NaN or a -0, and a
  chunk holding one is ordered by the scalar path instead (`scalar_ops._select_lines`, ref's
  order by definition). The CPU Ascend C refuses a NaN, so a kernel that passed one fails.
The staging and the read-back of the first k pairs are scalar (n + k element moves a row,
against n^2 compares); the sort is one vector instruction per 255 runs, the merge one a row.
Integer values, and rows longer than 128, stay on the scalar path: Sort32 and MrgSort take
half and float scores only, and a merge of more than 4 runs needs passes over the merged
lists (not written yet).
"""

from __future__ import annotations

from ....dtypes import TABLE
from ... import cexpr as C
from .layout import pc

SORT32 = 32  # scores one Sort32 repeat orders
MAX_REPEAT = 255  # Sort32's repeatTime range is [0, 255]
MAX_LISTS = 4  # lists one MrgSort merges


def sort32_fits(adt: str, n: int) -> bool:
    """Whether a sort of rows of n values of dtype adt runs on Sort32 (and MrgSort)."""
    return TABLE[adt].c_compute == "float" and n <= SORT32 * MAX_LISTS


def sort32_lines(f, i: int, rows: int, chunk: bool, dst: str, scalar_lines: list) -> None:
    """Emit the Sort32 path of select op i (its operand's `rows` rows) into frame f's
    body, with `scalar_lines` (the scalar path) as the fallback for a chunk with NaN or -0."""
    op = f.ops[i]
    (a,) = op.args
    n, k = f.ops[a].shape[1], op.shape[1]
    odd = f"odd{i}"
    asc = op.attr == "asc"
    out = f.out
    p = pc(n)  # a row's elements: its runs of 32, one Sort32 repeat each, back to back
    runs = p // SORT32
    stage = f.temp("float", rows * p)
    index = f.temp("uint32_t", rows * p)
    pairs = f.temp("float", rows * p * 2)
    merged = f.temp("float", rows * p * 2) if runs > 1 else pairs
    sbits = f"{stage}.ReinterpretCast<uint32_t>()"
    mbits = f"{merged}.ReinterpretCast<uint32_t>()"
    # the padding the scalar pass does not write: -inf, with an index above every column's (a
    # pad ties only with a real -inf, and the tie fix-up then keeps it after the real one)
    f.vec(f"AscendC::Duplicate({sbits}, 0xff800000u, {rows * p});")
    f.vec(f"AscendC::Duplicate({index}, 0xffffffffu, {rows * p});")
    f.need_s()
    src = f.ops[a]
    row = C.E(0) if src.shape[0] == 1 else f.row_offset(a, chunk)
    at = C.to_c(C.iadd(C.imul(row, p), "j"))
    x = f"{f.tensor[a]}.ReinterpretCast<uint32_t>()"
    flip = " ^ 0x80000000u" if asc else ""
    out(f"bool {odd} = false;  // a NaN or a -0: Sort32 does not document their order")
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    for (int32_t j = 0; j < {n}; ++j) {{")
    out(f"        const uint32_t b = {x}.GetValue({at});")
    out(f"        {odd} = {odd} || (b & 0x7fffffffu) > 0x7f800000u || b == 0x80000000u;")
    out(f"        {sbits}.SetValue(i * {p} + j, b{flip});")
    out(f"        {index}.SetValue(i * {p} + j, (uint32_t)j);")
    out("    }")
    out("}")
    out(f"if (!{odd}) {{")
    out("    wsp_sync<AscendC::HardEvent::S_V>();")
    for r0 in range(0, rows * runs, MAX_REPEAT):
        rep = min(MAX_REPEAT, rows * runs - r0)
        o = r0 * SORT32
        out(f"    AscendC::Sort32({pairs}[{2 * o}], {stage}[{o}], {index}[{o}], {rep});")
    out("    AscendC::PipeBarrier<PIPE_V>();")
    if runs > 1:
        _merge_lines(out, rows, p, runs, pairs, merged)
    out("    wsp_sync<AscendC::HardEvent::V_S>();")
    if runs > 1:
        _tie_lines(out, rows, p, k, mbits)
    q = pc(op.shape[1])
    if op.op == "sort_values":
        put = f"{dst}.ReinterpretCast<uint32_t>().SetValue(i * {q} + r, " \
              f"{mbits}.GetValue(2 * (i * {p} + r)){flip});"
    else:
        put = f"{dst}.SetValue(i * {q} + r, " \
              f"(int32_t){mbits}.GetValue(2 * (i * {p} + r) + 1));"
    out(f"    for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"        for (int32_t r = 0; r < {k}; ++r) {put}")
    out("    }")
    out("} else {")
    for ln in scalar_lines:
        out("    " + ln)
    out("}")
    # both branches end with the scalar unit's writes, after the vector unit's were waited for
    f.v_dirty, f.s_dirty = False, True


def _merge_lines(out, rows: int, p: int, runs: int, pairs: str, merged: str) -> None:
    """A row's sorted runs of 32 merged by one MrgSort (validBit: the first `runs` lists)."""
    lens = ", ".join(str(SORT32 if q < runs else 0) for q in range(MAX_LISTS))
    srcs = ", ".join(f"s[{2 * SORT32 * q}]" if q < runs else "s" for q in range(MAX_LISTS))
    out(f"    const uint16_t lens[4] = {{{lens}}};")
    out(f"    for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"        const AscendC::LocalTensor<float> s = {pairs}[i * {2 * p}];")
    out(f"        AscendC::MrgSort({merged}[i * {2 * p}], AscendC::MrgSortSrcList<float>({srcs}), "
        f"AscendC::MrgSort4Info(lens, false, {(1 << runs) - 1}, 1));")
    out("    }")
    out("    AscendC::PipeBarrier<PIPE_V>();")


def _tie_lines(out, rows: int, p: int, k: int, mbits: str) -> None:
    """MrgSort states no order between equal scores of different lists: the scalar unit puts
    the indices of each run of equal scores that starts before position k in ascending order
    (ref's stable order). A run is usually one pair; all equal is the scalar path's n^2."""
    out(f"    for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"        const int32_t o = i * {2 * p};")
    out("        int32_t r = 0;")
    out(f"        while (r < {k}) {{")
    out(f"            const uint32_t v = {mbits}.GetValue(o + 2 * r);")
    out("            int32_t e = r + 1;")
    out(f"            while (e < {p} && {mbits}.GetValue(o + 2 * e) == v) ++e;")
    out("            for (int32_t a = r + 1; a < e; ++a) {")
    out(f"                const uint32_t x = {mbits}.GetValue(o + 2 * a + 1);")
    out("                int32_t b = a;")
    out(f"                for (; b > r && {mbits}.GetValue(o + 2 * b - 1) > x; --b)")
    out(f"                    {mbits}.SetValue(o + 2 * b + 1, {mbits}.GetValue(o + 2 * b - 1));")
    out(f"                {mbits}.SetValue(o + 2 * b + 1, x);")
    out("            }")
    out("            r = e;")
    out("        }")
    out("    }")
