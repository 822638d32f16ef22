"""`sort_values` / `sort_indices` (`sort`, `topk`) on the vector unit's `Sort32` and `MrgSort`:
rows of any float or integer dtype take one Sort32 per 32 values and a merge pass per factor
of 4 (by blocks past 8192 columns), instead of the scalar unit's n^2 compares a row.

How ref's order is kept (selection.py: stable, NaN the greatest value, -0 equal to +0):
- Keys. A row of n elements is staged by the scalar unit as ceil(n / 32) runs of 32 f32 scores
  (its UB pitch), the pad -inf. Float keys (f32, f16 and bf16 held in f32) go as they are,
  -0 as +0 (they are equal); NaN as +inf, with an index tag that puts it after (ascending) or
  before (descending) the real infinities it then ties with (below). Integer keys go as f32:
  8- and 16-bit ones exactly; 32- and 64-bit ones rounded, which is monotone, so the sort
  is right but for keys whose scores became equal, and those are runs of equal scores that
  the tie pass (below) orders by the exact keys, read back by index.
  Ascending is the descending order of the scores with the sign flipped (exact, ties kept).
- Sort32 orders each run greatest first and, as documented, equal scores in input order; a
  pad (-inf, after every real element of its run) comes last in its run and is left out of
  the merges by the list lengths, so the merged list holds exactly the n real pairs.
- MrgSort merges 2 to 4 sorted lists (lists of at most 4095 pairs), so the runs are merged in
  passes, 4 lists a group (a tail of 3, 2 or 3 + 2: never one list alone, so nothing is
  copied), ping-ponging between two buffers of 16 bytes a row element (`merge_passes`).
  Its documentation states no order between equal scores of different lists, so the scalar
  unit then puts the indices of each run of equal scores that starts before position k in
  ascending order of the tagged index, or of (exact key, index) for 32- / 64-bit integers
  (usually a run is one pair; the CPU MrgSort takes the later list first on a tie, so this
  is tested). The tag (bit 30 of the index) ranks NaN against the infinities; the read-back
  masks it off.
- The results are read back by index: `sort_values` copies the source element, so NaN
  payloads and the sign of zero come out as they went in.
The staging and the read-back of the first k pairs are scalar (n + k element moves a row);
the sort is one vector instruction per 255 runs, and the merges one per group of lists. The
values and the indices of one `topk` / `sort` are sorted once (`sort_pairs`).

Rows longer than 8192 (a merge would need a list past 4095 pairs) go by blocks of 2048
columns (`blocked_lines`): each block is sorted and merged as a row is, its first
kk = min(k, 2048) pairs tie-fixed (so they are the block's first kk in ref's order, a
superset of what the block gives the row's first k) and kept; the scalar unit then merges
the blocks' lists (k x blocks compares a row: a top-k of k << n sorts blocks, never the whole
row). A kernel whose whole-row scratch does not fit the UB even in chunks of one row sorts by
blocks of 512, and if the winners do not fit either, on the scalar path, which needs no
scratch (`ub_plan.search` tries them in turn: `sort_plan.Sorts`).

The rules without text (the merge passes, which keys sort, which rows go whole, the pairs of
one `topk`) are `backends/sort_plan.py`, below both back ends: the UB plan sizes the two
buffers and the winners each path takes from them (`ub_plan.UbPlan._sort`).
"""

from __future__ import annotations

from ....dtypes import TABLE, kind_of
from ... import cexpr as C
from ...sort_plan import (  # noqa: F401 (re-exported: the rules, below both back ends)
    BLOCK,
    MAX_LIST,
    MAX_LISTS,
    MAX_REPEAT,
    SMALL_BLOCK,
    SORT32,
    SORT_OPS,
    merge_passes,
    sort32_fits,
    sort_pairs,
    sortable,
)
from .layout import pc

TAG = 0x40000000  # index bit ranking a NaN against the infinities it is staged as


def _inexact(adt: str) -> bool:
    """Integer keys that f32 does not hold exactly whatever their value (32 and 64 bits)."""
    return kind_of(adt) == "int" and TABLE[adt].bits > 16


class _Sort:
    """What the Sort32 paths of one select op share: its operand, order and key kind, and the
    emission of one block of w columns staged, sorted, merged and tie-fixed in two buffers."""

    def __init__(self, f, i: int, rows: int, chunk: bool, dst: str, side=None, width: int = 0):
        op = f.ops[i]
        (a,) = op.args
        self.f, self.i, self.op, self.rows, self.out = f, i, op, rows, f.out
        self.adt = f.ops[a].dtype
        self.n, self.k = f.ops[a].shape[1], op.shape[1]
        self.asc = op.attr == "asc"
        self.fl = kind_of(self.adt) == "float"
        # 32- and 64-bit keys: their f32 scores are rounded (monotone), so equal scores are
        # ordered by the exact keys, read back by index (`before`)
        self.refine = _inexact(self.adt)
        self.p = pc(self.n)  # the source's row pitch
        self.row = C.E(0) if f.ops[a].shape[0] == 1 else f.row_offset(a, chunk)
        self.x = f.tensor[a]
        self.mask = f" & {TAG - 1:#x}u" if self.fl else ""
        # two buffers of 2 * width floats a row: A stages the scores and indices of a block
        # (rows * pw each), Sort32 writes the pairs to B, the merge passes go B -> A -> B ...
        self.dst, self.side = dst, side
        if width:
            w = pc(width)
            self.buf_a = f.temp("float", rows * 2 * w)
            self.buf_b = f.temp("float", rows * 2 * w)

    def src_at(self, col: str) -> str:
        return C.to_c(C.iadd(C.imul(self.row, self.p), col))

    def block(self, c0: str, w: int, kk: int, nans=None, always: bool = False) -> str:
        """Stage columns [c0, c0 + w) of every row (the pad -inf; indices the columns, tagged),
        sort and merge them, and put the ties of the first kk pairs in ref's order (`before`);
        the buffer holding the rows' sorted pairs at pitch 2 * pc(w). A single run needs that
        only for 32- / 64-bit keys, or `always`, or when the flag `nans` says it held a NaN:
        else Sort32's order (equal scores by position) is already ref's."""
        out, rows, pw = self.out, self.rows, pc(w)
        sbits = f"{self.buf_a}.ReinterpretCast<uint32_t>()"
        index = f"{self.buf_a}[{rows * pw}].ReinterpretCast<uint32_t>()"
        at = self.src_at(f"{c0} + j" if c0 != "0" else "j")
        col = "(uint32_t)j" if c0 == "0" else f"(uint32_t)({c0} + j)"
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t j = 0; j < {w}; ++j) {{")
        if self.fl:
            flip = " ^ 0x80000000u" if self.asc else ""
            nan_tag = f"{TAG:#x}u : 0u" if self.asc else f"0u : {TAG:#x}u"
            out(f"        uint32_t b = {self.x}.ReinterpretCast<uint32_t>().GetValue({at});")
            out("        const bool nan = (b & 0x7fffffffu) > 0x7f800000u;")
            out("        b = nan ? 0x7f800000u : b == 0x80000000u ? 0u : b;  "
                "// NaN as +inf, -0 as +0")
            out(f"        {sbits}.SetValue(i * {pw} + j, b{flip});")
            out(f"        {index}.SetValue(i * {pw} + j, {col} | (nan ? {nan_tag}));")
            if nans:
                out(f"        {nans} = {nans} || nan;")
        else:
            ct = TABLE[self.adt].c_compute
            out(f"        const {ct} v = {self.x}.GetValue({at});")
            neg = "-" if self.asc else ""
            out(f"        {self.buf_a}.SetValue(i * {pw} + j, {neg}(float)v);")
            out(f"        {index}.SetValue(i * {pw} + j, {col});")
        out("    }")
        if pw > w:  # the pad of the last run: -inf, after every real element (Sort32 is stable)
            out(f"    for (int32_t j = {w}; j < {pw}; ++j) {{")
            out(f"        {sbits}.SetValue(i * {pw} + j, 0xff800000u);")
            out(f"        {index}.SetValue(i * {pw} + j, 0u);")
            out("    }")
        out("}")
        out("wsp_sync<AscendC::HardEvent::S_V>();")
        runs = rows * pw // SORT32
        for r0 in range(0, runs, MAX_REPEAT):
            o = r0 * SORT32
            out(f"AscendC::Sort32({self.buf_b}[{2 * o}], {self.buf_a}[{o}], {index}[{o}], "
                f"{min(MAX_REPEAT, runs - r0)});")
        out("AscendC::PipeBarrier<PIPE_V>();")
        bufs = (self.buf_b, self.buf_a)
        passes = merge_passes(w)
        for t, groups in enumerate(passes):
            _merge_lines(out, rows, pw, groups, bufs[t % 2], bufs[(t + 1) % 2])
        final = bufs[len(passes) % 2]
        mbits = f"{final}.ReinterpretCast<uint32_t>()"
        out("wsp_sync<AscendC::HardEvent::V_S>();")
        if passes or always or self.refine:
            _tie_lines(out, rows, pw, w, kk, mbits, self.before)
        elif nans:
            out.open(f"if ({nans})")
            _tie_lines(out, rows, pw, w, kk, mbits, self.before)
            out.close()
        return final

    def put(self, r: str, idx: str) -> str:
        """The statements writing result r of row i: the source element at column idx (values)
        or idx itself (indices), and idx to the side buffer the paired op reads (`side`)."""
        q = pc(self.k)
        keep = f" {self.side}.SetValue(i * {q} + {r}, (int32_t){idx});" if self.side else ""
        if self.op.op == "sort_values":
            return (f"{self.dst}.SetValue(i * {q} + {r}, {self.x}.GetValue({self.src_at(idx)}));"
                    + keep)
        return f"{self.dst}.SetValue(i * {q} + {r}, (int32_t){idx});" + keep

    def before(self, a: str, b: str) -> str:
        """C: the element at (tagged) index a goes before the one at b, both of one run of
        equal scores: by the exact key for 32- / 64-bit integers, then by index."""
        if not self.refine:
            return f"{a} < {b}"
        va, vb = (f"{self.x}.GetValue({self.src_at(e)})" for e in (a, b))
        cmp = "<" if self.asc else ">"
        return f"({va} {cmp} {vb} || ({va} == {vb} && {a} < {b}))"

    def finish(self, body) -> None:
        """`body` (the emission), after the hand-off to the scalar unit that stages."""
        self.f.need_s()
        body()
        # it ends with the scalar unit's writes, after the vector unit's were waited for
        self.f.v_dirty, self.f.s_dirty = False, True


def sort32_lines(f, i: int, rows: int, chunk: bool, dst: str, side=None) -> None:
    """Emit the Sort32 path of select op i (its operand's `rows` rows, whole) into frame f's
    body; with `side`, the indices also go there for the paired op (`paired_lines`)."""
    s = _Sort(f, i, rows, chunk, dst, side, f.ops[f.ops[i].args[0]].shape[1])

    def body():
        out, n = s.out, s.n
        nans = f"nan{i}" if s.fl and not merge_passes(n) else None
        if nans:  # one run: Sort32 keeps ties in position order, so only a NaN needs the fix-up
            out(f"bool {nans} = false;")
        final = s.block("0", n, s.k, nans)
        mbits = f"{final}.ReinterpretCast<uint32_t>()"
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t r = 0; r < {s.k}; ++r) {{")
        out(f"        const uint32_t x = {mbits}.GetValue(2 * (i * {pc(n)} + r) + 1){s.mask};")
        out(f"        {s.put('r', 'x')}")
        out("    }")
        out("}")

    s.finish(body)


def blocked_lines(f, i: int, rows: int, chunk: bool, dst: str, width: int,
                  side=None) -> None:
    """Emit the Sort32 path of select op i by blocks of `width` columns: each block sorted and
    merged as a whole row is (`_Sort.block`), its first kk = min(k, width) pairs (ties in
    index order, so they are the block's first kk in ref's order) kept in a list of winners,
    and the rows' k results taken from the blocks' lists by the scalar unit (k x blocks
    compares a row). For rows past 8192 columns, and for kernels whose whole-row scratch does
    not fit the UB (`sort_plan.Sorts` with a block)."""
    s = _Sort(f, i, rows, chunk, dst, side, width)
    n, k = s.n, s.k
    nb = -(-n // width)
    full = n // width  # blocks of `width` columns; the last one may be narrower
    last = n - (nb - 1) * width
    kk = min(k, width)
    wins = f.temp("float", rows * nb * kk * 2)
    wbits = f"{wins}.ReinterpretCast<uint32_t>()"
    out = s.out

    def keep(final: str, w: int, b: str) -> None:
        """Copy the first min(kk, w) pairs of each row's block b to the winners."""
        mbits = f"{final}.ReinterpretCast<uint32_t>()"
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t r = 0; r < {min(kk, w) * 2}; ++r)")
        out(f"        {wbits}.SetValue(2 * (i * {nb * kk} + {b} * {kk}) + r, "
            f"{mbits}.GetValue(2 * i * {pc(w)} + r));")
        out("}")

    def body():
        if full:
            out.open(f"for (int32_t cb = 0; cb < {full}; ++cb)")
            out(f"const int32_t cb0 = cb * {width};")
            keep(s.block("cb0", width, kk, always=True), width, "cb")
            out.close()
        if last < width:
            keep(s.block(str(full * width), last, kk, always=True), last, str(full))
        tail = min(kk, last)
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    int32_t h[{nb}] = {{0}};  // the next pair of each block's list")
        out(f"    for (int32_t r = 0; r < {k}; ++r) {{")
        out("        int32_t best = -1;")
        out("        float bs = 0.0f;")
        out("        uint32_t bi = 0u;")
        out(f"        for (int32_t b = 0; b < {nb}; ++b) {{")
        out(f"            if (h[b] >= (b == {nb - 1} ? {tail} : {kk})) continue;")
        out(f"            const int32_t e = 2 * (i * {nb * kk} + b * {kk} + h[b]);")
        out(f"            const float sc = {wins}.GetValue(e);")
        out(f"            const uint32_t ix = {wbits}.GetValue(e + 1);")
        out(f"            if (best < 0 || sc > bs || (sc == bs && {s.before('ix', 'bi')})) {{")
        out("                best = b;")
        out("                bs = sc;")
        out("                bi = ix;")
        out("            }")
        out("        }")
        out("        ++h[best];")
        out(f"        const uint32_t x = bi{s.mask};")
        out(f"        {s.put('r', 'x')}")
        out("    }")
        out("}")

    s.finish(body)


def paired_lines(f, i: int, rows: int, chunk: bool, dst: str, side: str) -> None:
    """Select op i whose pair already sorted: its results from the indices left in `side`
    (k element moves a row)."""
    s = _Sort(f, i, rows, chunk, dst)
    q = pc(s.k)

    def body():
        out = s.out
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t r = 0; r < {s.k}; ++r) {{")
        out(f"        const uint32_t x = (uint32_t){side}.GetValue(i * {q} + r);")
        out(f"        {s.put('r', 'x')}")
        out("    }")
        out("}")

    s.finish(body)


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


def _tie_lines(out, rows: int, p: int, n: int, k: int, mbits: str, before) -> None:
    """MrgSort states no order between equal scores of different lists: the scalar unit puts
    each run of equal scores that starts before position k in ref's order (`before`: the
    tagged index, or the exact key then the index; all distinct, so no stability is needed):
    the first `need` of a long run by selection (need x run compares), else the run by a
    Shell sort (gaps x 5 / 11). A run is usually one pair, which costs one compare."""
    get = lambda e: f"{mbits}.GetValue(o + 2 * ({e}) + 1)"  # noqa: E731
    put = lambda e, v: f"{mbits}.SetValue(o + 2 * ({e}) + 1, {v});"  # noqa: E731
    out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
    out(f"    const int32_t o = i * {2 * p};")
    out("    int32_t r = 0;")
    out(f"    while (r < {k}) {{")
    out(f"        const uint32_t v = {mbits}.GetValue(o + 2 * r);")
    out("        int32_t e = r + 1;")
    out(f"        while (e < {n} && {mbits}.GetValue(o + 2 * e) == v) ++e;")
    out(f"        const int32_t need = (e < {k} ? e : {k}) - r;")
    out("        if (need * 8 < e - r) {")
    out("            for (int32_t t = r; t < r + need; ++t) {")
    out("                int32_t m = t;")
    out(f"                uint32_t mx = {get('t')};")
    out("                for (int32_t a = t + 1; a < e; ++a) {")
    out(f"                    const uint32_t y = {get('a')};")
    out(f"                    if ({before('y', 'mx')}) {{")
    out("                        m = a;")
    out("                        mx = y;")
    out("                    }")
    out("                }")
    out(f"                if (m != t) {{ {put('m', get('t'))} {put('t', 'mx')} }}")
    out("            }")
    out("        } else {")
    out("            for (int32_t g = (e - r) / 2; g > 0; g = g == 2 ? 1 : g * 5 / 11) {")
    out("                for (int32_t a = r + g; a < e; ++a) {")
    out(f"                    const uint32_t x = {get('a')};")
    out("                    int32_t b = a;")
    out(f"                    for (; b - g >= r && {before('x', get('b - g'))}; b -= g)")
    out(f"                        {put('b', get('b - g'))}")
    out(f"                    {put('b', 'x')}")
    out("                }")
    out("            }")
    out("        }")
    out("        r = e;")
    out("    }")
    out("}")
