"""Index maps on the vector unit with Ascend C's `Gather`: `transpose`, `gather_cols` (indices
of any integer dtype), `slice_cols` and `concat_cols` off a 32-byte block, `slice_even` /
`slice_odd` and `interleave`, of values of every size.

Each op is dst[e] = src[offset[e]] over the op's UB tile (rows x pitch elements, `count` of
them), one `Gather` (level 2: byte offsets from src's start, as the API takes them). The
offsets are built on the vector unit: the first row's source indices in f32 (`CreateVecIndex`,
`Muls`, `Adds`, `Maxs` / `Mins`, a `Cast` with CAST_FLOOR for an interleave's halves; exact
integers, the UB being far below 2^24 elements), the other rows by doubling (`wsp_rows_plus`:
one `Adds` per power of two), then bytes as int32 in place (`wsp_byte_offsets`); in a kernel
run in chunks of rows they are the same for every chunk, so the first chunk builds them into a
buffer that lives through the loop (`_offsets_buffer`). A source of two operands (a
concatenation, an interleave) is first staged row by row as [a row | b row] (`wsp_copy_box`,
32-bit words), so one Gather reads both. A `gather_cols` stages its x with one zeroed 32-byte
block after it: an index out of range (a `Compare` of the index in f32, then `Select`) reads that
block, so it gives 0 as on every target, and no element crosses the scalar unit.

A2 / A3 `Gather` takes 16- and 32-bit types only: 32-bit words (f32; f16 / bf16 held in f32;
i32, u32) gather as uint32_t, 16-bit ones as uint16_t, 8-bit values (i8, u8, bool) are cast to
half (exact), gathered, and cast back, and 64-bit values (i64, u64) move as their two 32-bit
words, the offsets built per word (`_first_row` with k = 2). Left to the scalar unit
(`scalar_ops.py`): a `gather_cols` of 64-bit values (its offsets come per element), one over
more than 2048 columns with 16-bit indices
(through half they are exact only below 2048), operands of another dtype than the result or of
other rows (broadcasts), and every move of a kernel that does not fit the UB with the moves'
temporaries (`ub_plan.search` tries it with `Sorts.moves` False). Which ops move here is
`backends/move_plan.vector_move`, and each temporary below is declared for the UB plan by
`move_plan.MovePlan` too: a writer that changes its temporaries changes those with it.

Padding columns (the pitch past the columns) gather a valid element too (their indices are
clamped into the source row), so every offset stays inside the source tensor, as the CPU
Ascend C checks.
"""

from __future__ import annotations

from ....dtypes import TABLE
from ....ir import nodes as N
from ...move_plan import GATHER_T, vector_move
from .frame import Frame
from .layout import CXX_SIZE, ceil_to, held_size, pc, vcount


class MoveOps(Frame):
    """The ops `move_ok` accepts, each one Gather over byte offsets built on the vector unit."""

    def move_ok(self, op: N.Op) -> bool:
        """Whether op moves by one Gather here: the kernel's moves on the vector unit (not the
        search's scalar fallback, `Sorts.moves`) and the op one the vector unit takes
        (`move_plan.vector_move`, shared with the UB plan)."""
        return self.sorts.moves and vector_move(self.ops, op)

    # -- helpers
    def _gtensor(self, name: str, ct: str) -> str:
        """A tensor of C++ type `ct` as the type Gather moves it in."""
        return name if ct == "half" else f"{name}.ReinterpretCast<{GATHER_T[CXX_SIZE[ct]]}>()"

    def _words(self, t: str) -> str:
        return f"{t}.ReinterpretCast<uint32_t>()"

    def _source(self, u: int, rows: int, chunk: bool) -> tuple[str, str]:
        """(tensor, its C++ type) Gather reads value u from: the value itself, or for 8-bit
        values a half copy."""
        op = self.ops[u]
        src = self.at(u, chunk)
        if held_size(op.dtype) != 1:
            return src, TABLE[op.dtype].c_compute
        n = rows * pc(op.shape[1])
        h = self.temp("half", n)
        self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
        return h, "half"

    def move_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        rows, cols = self.rows_of(i), op.shape[1]
        pd = pc(cols)
        count = rows * pd
        self.need_v()
        if op.op == "gather_cols":
            src, gdt, offs = self._gather_cols_offsets(i, rows, chunk)
        else:
            src, gdt, pitch, maxc = self._staged(i, rows, chunk)
            # the same offsets for every chunk: built by the first, kept in a buffer of their
            # own that lives through the chunk loop
            cached = chunk and self.nchunks > 1
            # a 64-bit element is two 32-bit words, each gathered: k words an element
            k = 2 if held_size(op.dtype) == 8 else 1
            n = k * vcount(rows, cols)
            f = self._offsets_buffer(i, n) if cached else self.temp("float", n)
            if cached:
                self.out.open("if (c == 0)")
            self._first_row(op, f, k * pd, k)
            self.vec(f"AscendC::Mins({f}, {f}, {float(k * maxc + k - 1)}f, {k * pd});")
            self.out(f"wsp_rows_plus({f}, {rows}, {k * pd}, {float(k * pitch)}f);")
            self.out(f"wsp_byte_offsets({f}, {k * count}, {CXX_SIZE[gdt] // k});")
            if cached:
                self.out.close()
            offs = f
            count *= k
        narrow = held_size(op.dtype) == 1
        out = self.temp("half", count) if narrow else dst
        self.out(f"AscendC::Gather({self._gtensor(out, gdt)}, {self._gtensor(src, gdt)}, "
                 f"{self._words(offs)}, 0u, {count});")
        self.out("AscendC::PipeBarrier<PIPE_V>();")
        if narrow:
            self.out(f"AscendC::Cast({dst}, {out}, AscendC::RoundMode::CAST_RINT, {count});")
            self.out("AscendC::PipeBarrier<PIPE_V>();")
        self.v_dirty = True

    def _offsets_buffer(self, i: int, n: int) -> str:
        """A float tensor of n elements for op i's offsets (built as f32 indices, then made
        int32 bytes in place), live from the chunk loop's start to its end (the arena places
        nothing else there meanwhile)."""
        off = self.request(("off", i), n * 4, self.loop_start, self.loop_end)
        self.temp_at += 1
        name = f"w{self.temp_at}"
        self.out(f"const AscendC::LocalTensor<float> {name} = "
                 f"calc.GetWithOffset<float>({n}, {off});")
        return name

    def _staged(self, i: int, rows: int, chunk: bool) -> tuple[str, str, int, int]:
        """(source, its C++ type, the step from one output row's sources to the next's, the
        largest source index a row may read): the operand, or two operands side by side, row by
        row (8-bit values as half)."""
        op = self.ops[i]
        if op.op == "transpose":  # output row r is a's column r: row steps of 1 element
            (a,) = op.args
            ra = self.ops[a].shape[0]
            src, gdt = self._source(a, ra, chunk)
            return src, gdt, 1, (ra - 1) * pc(self.ops[a].shape[1])
        if len(op.args) == 1:
            (a,) = op.args
            src, gdt = self._source(a, rows, chunk)
            p = pc(self.ops[a].shape[1])
            return src, gdt, p, p - 1
        a, b = op.args
        pa, pb = pc(self.ops[a].shape[1]), pc(self.ops[b].shape[1])
        sa, gdt = self._source(a, rows, chunk)
        sb, _ = self._source(b, rows, chunk)
        s = self.temp(gdt, rows * (pa + pb))
        w = CXX_SIZE[gdt]
        self.out(f"wsp_copy_box({self._words(s)}, {self._words(sa)}, {rows}, {pa * w // 4}, "
                 f"{(pa + pb) * w // 4}, {pa * w // 4});")
        self.out(f"wsp_copy_box({self._words(f'{s}[{pa}]')}, {self._words(sb)}, {rows}, "
                 f"{pb * w // 4}, {(pa + pb) * w // 4}, {pb * w // 4});")
        return s, gdt, pa + pb, pa + pb - 1

    def _first_row(self, op: N.Op, f: str, m: int, k: int) -> None:
        """f[0, m) = the source index of each element (k = 1) or 32-bit word (k = 2: a 64-bit
        element's two words) of the op's first row, from j, the element's column."""
        n = ceil_to(m, 64)
        if k == 1:
            self.vec(f"AscendC::CreateVecIndex({f}, 0.0f, {m});")
        else:  # word w is half w - 2 j of element j = floor(w / 2)
            w = self.temp("float", n)
            fl = self.temp("int32_t", n)
            self.vec(f"AscendC::CreateVecIndex({w}, 0.0f, {m});")
            self.vec(f"AscendC::Muls({f}, {w}, 0.5f, {m});")
            self.vec(f"AscendC::Cast({fl}, {f}, AscendC::RoundMode::CAST_FLOOR, {m});")
            self.vec(f"AscendC::Cast({f}, {fl}, AscendC::RoundMode::CAST_RINT, {m});")
            self.vec(f"AscendC::Sub({w}, {w}, {f}, {m});")
            self.vec(f"AscendC::Sub({w}, {w}, {f}, {m});")  # the half: w - 2 j
        if op.op == "transpose":  # column j of row 0 is a[j, 0]
            self.vec(f"AscendC::Muls({f}, {f}, {float(pc(self.ops[op.args[0]].shape[1]))}f, {m});")
        elif op.op == "slice_cols":
            self.vec(f"AscendC::Adds({f}, {f}, {float(int(op.attr))}f, {m});")
        elif op.op in ("slice_even", "slice_odd"):
            self.vec(f"AscendC::Muls({f}, {f}, 2.0f, {m});")
            if op.op == "slice_odd":
                self.vec(f"AscendC::Adds({f}, {f}, 1.0f, {m});")
        elif op.op == "concat_cols":
            # column j + (pa - na) past a's na columns: j + clamp(j - na + 1, 0, 1) * (pa - na)
            a = op.args[0]
            na, pa = self.ops[a].shape[1], pc(self.ops[a].shape[1])
            t = self.temp("float", n)
            self.vec(f"AscendC::Adds({t}, {f}, {float(1 - na)}f, {m});")
            self.vec(f"AscendC::Maxs({t}, {t}, 0.0f, {m});")
            self.vec(f"AscendC::Mins({t}, {t}, 1.0f, {m});")
            self.vec(f"AscendC::Muls({t}, {t}, {float(pa - na)}f, {m});")
            self.vec(f"AscendC::Add({f}, {f}, {t}, {m});")
        elif op.op == "interleave":
            # column j of the result is a's (even j) or b's (odd j) column j / 2: h + parity * pa,
            # h = floor(j / 2) (a Cast with CAST_FLOOR), parity = j - 2 h
            pa = pc(self.ops[op.args[0]].shape[1])
            h = self.temp("float", n)
            fl = self.temp("int32_t", n)
            self.vec(f"AscendC::Muls({h}, {f}, 0.5f, {m});")
            self.vec(f"AscendC::Cast({fl}, {h}, AscendC::RoundMode::CAST_FLOOR, {m});")
            self.vec(f"AscendC::Cast({h}, {fl}, AscendC::RoundMode::CAST_RINT, {m});")
            self.vec(f"AscendC::Muls({f}, {f}, 0.5f, {m});")
            self.vec(f"AscendC::Sub({f}, {f}, {h}, {m});")  # parity / 2
            self.vec(f"AscendC::Muls({f}, {f}, {float(2 * pa)}f, {m});")
            self.vec(f"AscendC::Add({f}, {f}, {h}, {m});")
        if k == 2:  # word 2 c + half of source element c
            self.vec(f"AscendC::Muls({f}, {f}, 2.0f, {m});")
            self.vec(f"AscendC::Add({f}, {f}, {w}, {m});")

    def _index_as_float(self, b: int, n: int, chunk: bool) -> tuple[str, str]:
        """(f32 tile of index tile b, f32 tile of its high words or ""): exact for every index
        that can be in range (the columns are far below 2^24). i32 and u32 (as int32: one at
        2^31 or above reads negative, out of range either way) by `Cast`; i8 / u8 through half
        (exact), i16 and u16 (as int16, likewise) through half when the row has at most 2048
        columns (exact below 2048; a larger index rounds to 2048 or more, still out of range);
        i64 / u64 as their two 32-bit words, taken apart by two Gathers (byte offsets
        8 e, `srcBaseOffset` 0 for the low words, 4 for the high ones), the index in range only
        where the high word is 0 and the low one, as int32, is."""
        dt = self.ops[b].dtype
        idx = self.at(b, chunk)
        fi = self.temp("float", n)
        if dt in ("i32", "u32"):
            self.vec(f"AscendC::Cast({fi}, {idx}.ReinterpretCast<int32_t>(), "
                     f"AscendC::RoundMode::CAST_RINT, {n});")
            return fi, ""
        if dt in ("i8", "u8", "i16", "u16"):
            h = self.temp("half", n)
            src = f"{idx}.ReinterpretCast<int16_t>()" if dt == "u16" else idx
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
            self.vec(f"AscendC::Cast({fi}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
            return fi, ""
        words = self._words(idx)
        offs = self.temp("float", n)
        self.vec(f"AscendC::CreateVecIndex({offs}, 0.0f, {n});")
        self.out(f"wsp_byte_offsets({offs}, {n}, 8);")
        fh = self.temp("float", n)
        for half_, base in ((fi, 0), (fh, 4)):
            # the word lands in the f32 tile's bytes, then Cast in place (one width)
            w = self._words(half_)
            self.vec(f"AscendC::Gather({w}, {words}, {self._words(offs)}, {base}u, {n});")
            self.vec(f"AscendC::Cast({half_}, {half_}.ReinterpretCast<int32_t>(), "
                     f"AscendC::RoundMode::CAST_RINT, {n});")
        return fi, fh

    def _gather_cols_offsets(self, i: int, rows: int, chunk: bool) -> tuple[str, str, str]:
        """(source, its dtype, offsets) of a gather within rows: x staged with a zeroed 32-byte
        block after it, each index's element offset, or the block's for an index out of
        range."""
        op = self.ops[i]
        a, b = op.args
        ncols = self.ops[a].shape[1]
        pa = pc(ncols)
        cols = op.shape[1]
        pd = pc(cols)
        n = vcount(rows, cols)
        xs = self.at(a, chunk)
        narrow = held_size(op.dtype) == 1
        gdt = "half" if narrow else TABLE[op.dtype].c_compute
        w = CXX_SIZE[gdt]
        zero = rows * pa  # the zero block's first element
        s = self.temp(gdt, zero + 32 // w)
        if narrow:
            self.vec(f"AscendC::Cast({s}, {xs}, AscendC::RoundMode::CAST_NONE, {zero});")
        else:
            self.out(f"wsp_copy_words({self._words(s)}, {self._words(xs)}, {zero * w // 4});")
        self.vec(f"AscendC::Duplicate({self._words(f'{s}[{zero}]')}, 0u, 8);")
        fi, hi = self._index_as_float(b, n, chunk)
        f = self.temp("float", n)
        self.vec(f"AscendC::Duplicate({f}, 0.0f, {pd});")
        self.out(f"wsp_rows_plus({f}, {rows}, {pd}, {float(pa)}f);")
        self.vec(f"AscendC::Add({f}, {f}, {fi}, {rows * pd});")
        t = self.temp("float", n)
        m = self.temp("uint8_t", n // 8)
        tests = [(fi, 0, "GE"), (fi, ncols, "LT")] + ([(hi, 0, "EQ")] if hi else [])
        for val, bound, mode in tests:
            self.vec(f"AscendC::Duplicate({t}, {float(bound)}f, {n});")
            self.vec(f"AscendC::Compare({m}, {val}, {t}, AscendC::CMPMODE::{mode}, {n});")
            self.vec(f"AscendC::Select({f}, {m}, {f}, {float(zero)}f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
        self.out(f"wsp_byte_offsets({f}, {rows * pd}, {w});")
        return s, gdt, f
