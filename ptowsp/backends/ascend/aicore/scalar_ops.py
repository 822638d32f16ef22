"""Tile ops on the scalar unit, element by element over GetValue / SetValue: integer and
bool arithmetic, f64, float -> integer casts, iota, sorts (only where `Sort32` / `MrgSort`
cannot take them: sorting.py) and their reductions, and the data moves no vector API covers:
a `gather_cols` of 64-bit values or of more than 2048 columns with 16-bit indices, moves of
broadcast or converted operands. Slow, exact, and the documented fallback for whatever the
vector unit has no instruction for (`VectorOps.vector_ok`; slices and concatenations on
32-byte blocks are copied by the vector unit, `VectorOps.copy_ok`, the other moves gathered,
`MoveOps.move_ok` in moves.py, and a `gather_rows` reads only its indices here,
`gather_rows_by_copies`)."""

from __future__ import annotations

from ....dtypes import TABLE, kind_of
from ....primitives import GATHER_OPS, OPS
from ... import cexpr as C
from ...cexpr import Expr, ExprLike
from ...sort_plan import whole_rows
from .errors import AicoreError
from .frame import Frame
from .layout import held_size, pc
from .scalar import float_lit, int_lit, sconvert, sexpr
from .sorting import (
    BLOCK,
    blocked_lines,
    paired_lines,
    sort32_lines,
    sort_pairs,
    sortable,
)


class ScalarOps(Frame):
    """Tile ops computed element by element on the scalar unit."""

    def sread(self, u: int, i: ExprLike, j: ExprLike, chunk: bool) -> Expr:
        """Element (i, j) of the op's index space, read from value u (broadcast); `i` is the
        op's row variable ("i", which a chunk offsets) or another row (an expression)."""
        op = self.ops[u]
        if op.shape is None:
            return C.E(self.scalars[u])
        row = C.E(0) if op.shape[0] == 1 else (self.row_offset(u, chunk) if i == "i" else C.E(i))
        col = C.E(0) if op.shape[1] == 1 else C.E(j)
        return C.call(f"{self.tensor[u]}.GetValue", C.iadd(C.imul(row, pc(op.shape[1])), col))

    def gather_rows_by_copies(self, i: int, dst: str, chunk: bool) -> None:
        """`gather_rows` (any dtype: a UB row is whole 32-bit words): the scalar unit reads each row's index
        and the vector unit copies the whole row (`wsp_copy_words`), or fills it with 0 when
        the index is out of range; no element crosses the scalar unit."""
        op = self.ops[i]
        a, b = op.args
        rows, p = self.rows_of(i), pc(op.shape[1])
        w = p * held_size(op.dtype) // 4  # a UB row is whole 32-byte blocks in any dtype
        k = self.sread(b, "i", 0, chunk)
        n = self.ops[a].shape[0]
        ok = C.binop("<", C.cast("uint64_t", k), int_lit(n, "u64"))
        x = self.tensor[a]
        words = lambda t: f"{t}.ReinterpretCast<uint32_t>()"  # noqa: E731
        out = self.out
        self.need_v()  # x may come from the scalar unit; the loop itself only reads indices
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    const bool ok = {ok};")
        out(f"    const int64_t r = ok ? (int64_t){k} : 0;")
        out(f"    if (ok) wsp_copy_words({words(f'{dst}[i * {p}]')}, {words(f'{x}[r * {p}]')}, {w});")
        out(f"    else {{ AscendC::Duplicate({words(f'{dst}[i * {p}]')}, 0u, {w}); "
            "AscendC::PipeBarrier<PIPE_V>(); }")
        out("}")
        self.v_dirty = True

    def scalar_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        name = op.op
        rows, cols = self.rows_of(i), op.shape[1]
        p = pc(cols)
        self.need_s()
        out = self.out
        kind = OPS[name].plan
        if name == "gather_rows" and self.ops[op.args[0]].dtype == op.dtype:
            self.gather_rows_by_copies(i, dst, chunk)
            return
        if kind == "red":
            self.scalar_reduction(i, dst, chunk)
            self.s_dirty = True
            return
        if kind == "select":
            self.scalar_select(i, dst, chunk)
            self.s_dirty = True
            return
        if name == "iota_row":
            row = C.binop("+", "c0", "i") if chunk and self.nchunks > 1 else "i"
            e = sconvert(C.cast("int64_t", row), "i64", op.dtype)
        elif name == "iota_col":
            e = sconvert(C.cast("int64_t", "j"), "i64", op.dtype)
        elif name == "transpose":
            (a,) = op.args
            at = C.iadd(C.imul("j", pc(self.ops[a].shape[1])), "i")
            e = C.call(f"{self.tensor[a]}.GetValue", at)
        elif name in ("slice_even", "slice_odd"):
            (a,) = op.args
            k = C.imul(2, "j")
            e = self.sread(a, "i", k if name == "slice_even" else C.iadd(k, 1), chunk)
        elif name == "interleave":
            a, b = op.args
            half = C.binop(">>", "j", 1)
            va = sconvert(self.sread(a, "i", half, chunk), self.ops[a].dtype, op.dtype)
            vb = sconvert(self.sread(b, "i", half, chunk), self.ops[b].dtype, op.dtype)
            e = C.cond(C.binop("==", C.binop("&", "j", 1), 0), va, vb)
        elif name == "slice_cols":
            (a,) = op.args
            e = self.sread(a, "i", C.iadd("j", op.attr), chunk)
        elif name == "slice_rows":
            # not row-local, so neither it nor its operand is chunked: rows are the tile's own
            (a,) = op.args
            e = self.sread(a, C.iadd("i", op.attr), "j", chunk)
        elif name in ("concat_rows", "concat_cols"):
            # a conditional: the other side's index is out of its range
            a, b = op.args
            if name == "concat_rows":
                n = self.ops[a].shape[0]
                first = C.binop("<", "i", n)
                vb = self.sread(b, C.binop("-", "i", n), "j", chunk)
            else:
                n = self.ops[a].shape[1]
                first = C.binop("<", "j", n)
                vb = self.sread(b, "i", C.binop("-", "j", n), chunk)
            va = sconvert(self.sread(a, "i", "j", chunk), self.ops[a].dtype, op.dtype)
            e = C.cond(first, va, sconvert(vb, self.ops[b].dtype, op.dtype))
        elif name in GATHER_OPS:
            # x at the index idx holds, under a conditional: out of range (as uint64_t a
            # negative index is too) reads nothing and gives 0. gather_rows' x is resident
            # (chunks.py), so its row is the index itself
            a, b = op.args
            by_rows = name == "gather_rows"
            k = self.sread(b, "i", 0 if by_rows else "j", chunk)
            n = self.ops[a].shape[0 if by_rows else 1]
            ok = C.binop("<", C.cast("uint64_t", k), int_lit(n, "u64"))
            at = C.cast("int64_t", k)
            va = self.sread(a, at, "j", chunk) if by_rows else self.sread(a, "i", at, chunk)
            e = C.cond(ok, sconvert(va, self.ops[a].dtype, op.dtype),
                       C.cast(TABLE[op.dtype].c_compute, 0))
        elif name == "broadcast":
            (a,) = op.args
            e = sconvert(self.sread(a, "i", "j", chunk), self.ops[a].dtype, op.dtype)
        elif kind == "ew":
            xs = [self.sread(a, "i", "j", chunk) for a in op.args]
            e = sexpr(name, op.dtype, xs, [self.ops[a].dtype for a in op.args],
                      self.exponent(op))
        else:
            raise AicoreError(f"op `{name}` has no AICore implementation")
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t j = 0; j < {cols}; ++j) {{")
        out(f"        {dst}.SetValue({C.iadd(C.imul('i', p), 'j')}, "
            f"{C.cast_to(TABLE[op.dtype].c_compute, e)});")
        out("    }")
        out("}")
        self.s_dirty = True

    def scalar_select(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        adt = self.ops[a].dtype
        rows, n = self.urows(a, chunk), self.ops[a].shape[1]

        def read(j: str) -> Expr:
            return sconvert(self.sread(a, "i", j, chunk), adt, adt)

        # `self.sorts` (sort_plan.Sorts): on Sort32 / MrgSort, whole rows or by blocks, or all
        # on the scalar unit, which needs no scratch (the fallbacks of a kernel whose sort
        # scratch overflows the UB, `ub_plan.search`); `UbPlan._sort` declares the same buffers
        if self.sorts.vector and sortable(adt):
            side = self.sort_side(i, rows)
            if side is not None and self.sort_pairs[i][1] == i:
                paired_lines(self, i, rows, chunk, dst, side)
            elif whole_rows(self.sorts, adt, n):
                sort32_lines(self, i, rows, chunk, dst, side)
            else:
                blocked_lines(self, i, rows, chunk, dst, self.sorts.block or BLOCK, side)
            return
        for line in _select_lines(op, adt, n, op.shape[1], pc(op.shape[1]), rows, dst, read):
            self.out(line)

    def sort_side(self, i: int, rows: int):
        """The buffer of indices shared by the two results of one `topk` / `sort` (the first
        sorts and leaves its indices there, the second reads them: `sorting.sort_pairs`),
        live from the first's step to the second's; None when op i has no such pair (or the
        kernel runs in passes, which may emit one without the other)."""
        if not hasattr(self, "sort_pairs"):
            self.sort_pairs = sort_pairs(self.ops)
        pair = self.sort_pairs.get(i)
        if pair is None or self.passes or any(j not in self.when for j in pair):
            return None
        first, second = pair
        elems = rows * pc(self.ops[i].shape[1])
        off = self.request(("sorted", first), elems * 4, self.when[first], self.when[second])
        name = f"sorted{first}"
        self.out(f"const AscendC::LocalTensor<int32_t> {name} = "
                 f"calc.GetWithOffset<int32_t>({elems}, {off});")
        return name

    def scalar_reduction(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        dt = op.dtype
        ct = TABLE[dt].c_compute
        fl = kind_of(dt) == "float"
        what = op.op[3:]
        sa = self.ops[a].shape
        rows = self.urows(a, chunk)
        cols = sa[1]
        if what in ("sum", "mean"):
            init = C.cast(ct, 0)
        elif fl:
            init = float_lit(float("-inf") if what == "max" else float("inf"), ct)
        else:
            lo, hi = TABLE[dt].limits
            init = int_lit(lo if what == "max" else hi, dt)

        def step(acc: str, x: Expr) -> Expr:
            if what in ("sum", "mean"):
                return sexpr("add", dt, [acc, x], [dt, dt])
            return sexpr("maximum" if what == "max" else "minimum", dt, [acc, x], [dt, dt])

        x = sconvert(self.sread(a, "i" if op.op.startswith("row") else "r", "j"
                                if op.op.startswith("row") else "j", chunk), self.ops[a].dtype, dt)
        out = self.out
        if op.op.startswith("row"):
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t j = 0; j < {cols}; ++j) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = {_mean('acc', cols, ct, fl)};")
            out(f"    {dst}.SetValue(i * {pc(1)}, acc);")
            out("}")
        else:
            out(f"for (int32_t j = 0; j < {cols}; ++j) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t r = 0; r < {rows}; ++r) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = {_mean('acc', rows, ct, fl)};")
            out(f"    {dst}.SetValue(j, acc);")
            out("}")


def _select_lines(op, adt: str, n: int, k: int, p: int, rows: int, dst: str, read) -> list:
    """`sort_values` / `sort_indices` on the scalar unit: element j of a row goes to its rank,
    the number of elements ordered before it (strictly before, or equal at a lower column), if
    that is below k. n^2 compares per row and no scratch memory: the order is ref's (stable,
    NaN the greatest value; selection.py). Sorts take `Sort32` / `MrgSort` (sorting.py)
    unless the kernel's UB cannot hold their scratch (`sort_plan.Sorts`). Not the API's
    `Sort`: the 910B's `Sort<T, isFullSort>` orders region proposals, descending only; the
    advanced `Sort` (`SortConfig`: ascending or descending) is declared for other
    `__NPU_ARCH__`es only, for fewer dtypes, and neither states an order of ties or NaN."""
    ct = TABLE[adt].c_compute
    fl = kind_of(adt) == "float"
    desc = op.attr == "desc"

    def before(a: str, b: str) -> str:
        cmp = ">" if desc else "<"
        if not fl:
            return f"({a} {cmp} {b})"
        na, nb = f"({a} != {a})", f"({b} != {b})"
        if desc:  # NaN first
            return f"({na} ? !{nb} : (!{nb} && {a} > {b}))"
        return f"({nb} ? !{na} : (!{na} && {a} < {b}))"

    got = "xj" if op.op == "sort_values" else "j"
    return [
        f"for (int32_t i = 0; i < {rows}; ++i) {{",
        f"    for (int32_t j = 0; j < {n}; ++j) {{",
        f"        const {ct} xj = {C.to_c(read('j'))};",
        "        int32_t r = 0;",
        f"        for (int32_t l = 0; l < {n}; ++l) {{",
        f"            const {ct} xl = {C.to_c(read('l'))};",
        f"            r += {before('xl', 'xj')} || (l < j && !{before('xj', 'xl')});",
        "        }",
        f"        if (r < {k}) {dst}.SetValue(i * {p} + r, "
        f"{C.to_c(C.cast_to(TABLE[op.dtype].c_compute, C.E(got)))});",
        "    }",
        "}",
    ]


def _mean(acc: str, n: int, ct: str, fl: bool) -> Expr:
    """A sum of `n` elements as their mean (integers: the quotient truncated toward zero, by
    integer division: there is no double on the AI Core; the same value as cpu_sim's division
    in double while the sum is below 2^53)."""
    if fl:
        return C.binop("/", acc, C.cast(ct, n))
    return C.cast(ct, C.binop("/", acc, C.cast(ct, n)))
