"""`sort_values` / `sort_indices` (`sort`, `topk`) on the vector unit's `Sort32` and `MrgSort`:
rows of up to 8192 values of any float or integer dtype take one Sort32 per 32 values and a
merge pass per factor of 4, instead of the scalar unit's n^2 compares a row.

How ref's order is kept (selection.py: stable, NaN the greatest value, -0 equal to +0):
- Keys. A row of n elements is staged by the scalar unit as ceil(n / 32) runs of 32 f32 scores
  (its UB pitch), the pad -inf. Float keys (f32, f16 and bf16 held in f32) go as they are,
  -0 as +0 (they are equal); NaN as +inf, with an index tag that puts it after (ascending) or
  before (descending) the real infinities it then ties with (below). Integer keys go as f32:
  8- and 16-bit ones are exact; 32- and 64-bit ones are exact while |v| <= 2^24, and a chunk
  holding one past that is ordered by the scalar path (`scalar_ops._select_lines`) instead.
  Ascending is the descending order of the scores with the sign flipped (exact, ties kept).
- Sort32 orders each run greatest first and, as documented, equal scores in input order; a
  pad (-inf, after every real element of its run) comes last in its run and is left out of
  the merges by the list lengths, so the merged list holds exactly the n real pairs.
- MrgSort merges 2 to 4 sorted lists (lists of at most 4095 pairs), so the runs are merged in
  passes, 4 lists a group (a tail of 3, 2 or 3 + 2: never one list alone, so nothing is
  copied), ping-ponging between two buffers of 16 bytes a row element (`merge_passes`).
  Its documentation states no order between equal scores of different lists, so the scalar
  unit then puts the indices of each run of equal scores that starts before position k in
  ascending order of the tagged index (usually a run is one pair; the CPU MrgSort takes the
  later list first on a tie, so this is tested). The tag (bit 30 of the index) ranks NaN
  against the infinities; the read-back masks it off.
- The results are read back by index: `sort_values` copies the source element, so NaN
  payloads and the sign of zero come out as they went in.
The staging and the read-back of the first k pairs are scalar (n + k element moves a row);
the sort is one vector instruction per 255 runs, and the merges one per group of lists.
Rows longer than 8192 (a merge would need a list past 4095 pairs), and kernels whose sort
scratch does not fit the UB even in chunks of one row (`kernel.ScalarSorts`), stay on the
scalar path, which needs no scratch.
"""

from __future__ import annotations

from functools import lru_cache

from ....dtypes import TABLE, kind_of
from ... import cexpr as C
from .layout import pc

SORT32 = 32  # scores one Sort32 repeat orders
MAX_REPEAT = 255  # Sort32's repeatTime range is [0, 255]
MAX_LISTS = 4  # lists one MrgSort merges
MAX_LIST = 4095  # pairs in one MrgSort list (MrgSort4Info's elementLengths)
EXACT_INT = 1 << 24  # integers of at most this magnitude are exact in f32
TAG = 0x40000000  # index bit ranking a NaN against the infinities it is staged as
SORT_OPS = ("sort_values", "sort_indices")


def _group_sizes(lists: int) -> list[int]:
    """Lists merged by each MrgSort of a pass: 4 each, the tail 2, 3 or 3 + 2 (never 1)."""
    q, r = divmod(lists, MAX_LISTS)
    if r == 0:
        return [MAX_LISTS] * q
    if r == 1:
        return [MAX_LISTS] * (q - 1) + [3, 2]
    return [MAX_LISTS] * q + [r]


@lru_cache(maxsize=None)
def merge_passes(n: int) -> tuple:
    """The MrgSort passes over a row of n pairs sorted in runs of 32: each pass a tuple of
    groups (offset of its first list in pairs, lengths of its 2..4 lists). A group's result
    lands at its first list's offset in the other buffer, so the lists stay back to back."""
    lens = [min(SORT32, n - o) for o in range(0, n, SORT32)]
    passes = []
    while len(lens) > 1:
        groups, new, at, off = [], [], 0, 0
        for size in _group_sizes(len(lens)):
            g = tuple(lens[at:at + size])
            groups.append((off, g))
            new.append(sum(g))
            off += sum(g)
            at += size
        passes.append(tuple(groups))
        lens = new
    return tuple(passes)


def sort32_fits(adt: str, n: int) -> bool:
    """Whether a sort of rows of n values of dtype adt runs on Sort32 and MrgSort: float and
    integer keys (bool cannot be sorted), while no merge needs a list past 4095 pairs."""
    if kind_of(adt) not in ("float", "int") or TABLE[adt].c_compute == "double":
        return False
    return all(ln <= MAX_LIST for p in merge_passes(n) for _, g in p for ln in g)


def _needs_range_check(adt: str) -> bool:
    """Integer keys that f32 does not hold exactly whatever their value (32 and 64 bits)."""
    return kind_of(adt) == "int" and TABLE[adt].bits > 16


def sort32_lines(f, i: int, rows: int, chunk: bool, dst: str, scalar_lines: list) -> None:
    """Emit the Sort32 path of select op i (its operand's `rows` rows) into frame f's body;
    `scalar_lines` (the scalar path) is the fallback for a chunk of 32- or 64-bit integer
    keys past 2^24 (float keys and narrow integers never need it)."""
    op = f.ops[i]
    (a,) = op.args
    adt = f.ops[a].dtype
    n, k = f.ops[a].shape[1], op.shape[1]
    asc = op.attr == "asc"
    fl = kind_of(adt) == "float"
    check = _needs_range_check(adt)
    out = f.out
    p = pc(n)  # a row's elements: its runs of 32, one Sort32 repeat each, back to back
    runs = p // SORT32
    # two buffers of 2p floats a row: A stages the scores (rows * p) and indices (rows * p),
    # Sort32 writes the pairs to B, and the merge passes go B -> A -> B ...
    buf_a = f.temp("float", rows * 2 * p)
    buf_b = f.temp("float", rows * 2 * p)
    sbits = f"{buf_a}.ReinterpretCast<uint32_t>()"
    index = f"{buf_a}[{rows * p}].ReinterpretCast<uint32_t>()"
    f.vec(f"AscendC::Duplicate({sbits}, 0xff800000u, {rows * p});")  # the pad: -inf
    f.need_s()
    src = f.ops[a]
    row = C.E(0) if src.shape[0] == 1 else f.row_offset(a, chunk)
    at = C.to_c(C.iadd(C.imul(row, p), "j"))
    x = f.tensor[a]
    odd = f"odd{i}"
    if check:
        out(f"bool {odd} = false;  // a key past 2^24: not exact in f32")
    passes = merge_passes(n)
    nans = f"nan{i}" if fl and not passes else None
    if nans:  # one run: Sort32 keeps ties in position order, so only a NaN needs the fix-up
        out(f"bool {nans} = false;")
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    for (int32_t j = 0; j < {n}; ++j) {{")
    if fl:
        flip = " ^ 0x80000000u" if asc else ""
        nan_tag = f"{TAG:#x}u : 0u" if asc else f"0u : {TAG:#x}u"
        out(f"        uint32_t b = {x}.ReinterpretCast<uint32_t>().GetValue({at});")
        out("        const bool nan = (b & 0x7fffffffu) > 0x7f800000u;")
        out("        b = nan ? 0x7f800000u : b == 0x80000000u ? 0u : b;  // NaN as +inf, -0 as +0")
        out(f"        {sbits}.SetValue(i * {p} + j, b{flip});")
        out(f"        {index}.SetValue(i * {p} + j, (uint32_t)j | (nan ? {nan_tag}));")
        if nans:
            out(f"        {nans} = {nans} || nan;")
    else:
        ct = TABLE[adt].c_compute
        out(f"        const {ct} v = {x}.GetValue({at});")
        if check:
            lo = "" if not TABLE[adt].signed else f" || v < ({ct})-{EXACT_INT}"
            out(f"        {odd} = {odd} || v > ({ct}){EXACT_INT}{lo};")
        neg = "-" if asc else ""
        out(f"        {buf_a}.SetValue(i * {p} + j, {neg}(float)v);")
        out(f"        {index}.SetValue(i * {p} + j, (uint32_t)j);")
    out("    }")
    out("}")
    if check:
        out(f"if (!{odd}) {{")
        f.out.depth += 1
    out("wsp_sync<AscendC::HardEvent::S_V>();")
    for r0 in range(0, rows * runs, MAX_REPEAT):
        rep = min(MAX_REPEAT, rows * runs - r0)
        o = r0 * SORT32
        out(f"AscendC::Sort32({buf_b}[{2 * o}], {buf_a}[{o}], {index}[{o}], {rep});")
    out("AscendC::PipeBarrier<PIPE_V>();")
    bufs = (buf_b, buf_a)
    for t, groups in enumerate(passes):
        _merge_lines(out, rows, p, groups, bufs[t % 2], bufs[(t + 1) % 2])
    final = bufs[len(passes) % 2]
    mbits = f"{final}.ReinterpretCast<uint32_t>()"
    out("wsp_sync<AscendC::HardEvent::V_S>();")
    if passes:
        _tie_lines(out, rows, p, n, k, mbits)
    elif nans:
        out.open(f"if ({nans})")
        _tie_lines(out, rows, p, n, k, mbits)
        out.close()
    q = pc(k)
    src_at = C.to_c(C.iadd(C.imul(row, p), "x"))
    mask = f" & {TAG - 1:#x}u" if fl else ""
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    for (int32_t r = 0; r < {k}; ++r) {{")
    out(f"        const uint32_t x = {mbits}.GetValue(2 * (i * {p} + r) + 1){mask};")
    if op.op == "sort_values":
        out(f"        {dst}.SetValue(i * {q} + r, {x}.GetValue({src_at}));")
    else:
        out(f"        {dst}.SetValue(i * {q} + r, (int32_t)x);")
    out("    }")
    out("}")
    if check:
        f.out.depth -= 1
        out("} else {")
        for ln in scalar_lines:
            out("    " + ln)
        out("}")
    # both branches end with the scalar unit's writes, after the vector unit's were waited for
    f.v_dirty, f.s_dirty = False, True


def _merge_lines(out, rows: int, p: int, groups: tuple, src: str, dst: str) -> None:
    """One merge pass over every row: each group of 2..4 lists merged by one MrgSort (validBit
    its first 2, 3 or 4 lists); consecutive groups of the same lengths as one loop."""
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    const AscendC::LocalTensor<float> s = {src}[i * {2 * p}];")
    out(f"    const AscendC::LocalTensor<float> d = {dst}[i * {2 * p}];")
    g = 0
    while g < len(groups):
        off, lens = groups[g]
        e = g + 1
        while e < len(groups) and groups[e][1] == lens:
            e += 1
        count, total = e - g, sum(lens)
        starts, acc = [], 0
        for ln in lens:
            starts.append(acc)
            acc += ln
        lens4 = ", ".join(str(lens[q] if q < len(lens) else 0) for q in range(MAX_LISTS))
        srcs = ", ".join(f"s[o + {2 * starts[q]}]" if q < len(lens) else "s"
                         for q in range(MAX_LISTS))
        merge = (f"AscendC::MrgSort(d[o], AscendC::MrgSortSrcList<float>({srcs}), "
                 f"AscendC::MrgSort4Info(l{g}, false, {(1 << len(lens)) - 1}, 1));")
        out(f"    const uint16_t l{g}[4] = {{{lens4}}};")
        if count == 1:
            out("    {")
            out(f"        const int32_t o = {2 * off};")
        else:
            out(f"    for (int32_t g = 0; g < {count}; ++g) {{")
            out(f"        const int32_t o = {2 * off} + g * {2 * total};")
        out(f"        {merge}")
        out("    }")
        g = e
    out("}")
    out("AscendC::PipeBarrier<PIPE_V>();")


def _tie_lines(out, rows: int, p: int, n: int, k: int, mbits: str) -> None:
    """MrgSort states no order between equal scores of different lists: the scalar unit puts
    the (tagged) indices of each run of equal scores that starts before position k in
    ascending order (ref's stable order). A run is usually one pair; all equal is n^2."""
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    const int32_t o = i * {2 * p};")
    out("    int32_t r = 0;")
    out(f"    while (r < {k}) {{")
    out(f"        const uint32_t v = {mbits}.GetValue(o + 2 * r);")
    out("        int32_t e = r + 1;")
    out(f"        while (e < {n} && {mbits}.GetValue(o + 2 * e) == v) ++e;")
    out("        for (int32_t a = r + 1; a < e; ++a) {")
    out(f"            const uint32_t x = {mbits}.GetValue(o + 2 * a + 1);")
    out("            int32_t b = a;")
    out(f"            for (; b > r && {mbits}.GetValue(o + 2 * b - 1) > x; --b)")
    out(f"                {mbits}.SetValue(o + 2 * b + 1, {mbits}.GetValue(o + 2 * b - 1));")
    out(f"            {mbits}.SetValue(o + 2 * b + 1, x);")
    out("        }")
    out("        r = e;")
    out("    }")
    out("}")
