"""`matmul` on the vector unit: C[i, :] += a[i, k] * B[k, :] with Muls and Add, in k order,
accumulating in f32 (the scalar unit reads a[i, k]), for the kernels that do not run on the cube
(a kernel whose work is all matmuls does: `cube.py`). A right operand that is a parameter streams from GM in blocks of about
STREAM_BYTES of rows through a VECIN queue of its own (`chunks.streamed_operands`), so weights
need not fit the Unified Buffer.

Transposed operands are read in place, never copied transposed (`chunks.in_place_transposes`;
language.md section 4, "Matrix"):
- aᵀ @ b (a = transpose(s), s [K, M]): the same form; the scalar unit reads a[i, k] as s[k, i].
- a @ sᵀ (s [N, K]): dot products of rows, C[i, j] = ReduceSum(Mul(a[i, :], s[j, :])), the N
  sums of a row written into C's row by the scalar unit (ReduceSum writes a 32-byte aligned
  destination). Its sum order is ReduceSum's (a tree per 256-byte repeat), not k order.
- sᵀ @ tᵀ (s [K, M], t [N, K]): C = (t @ s)ᵀ, a row of t @ s at a time in the first form
  (t[j, k] read by the scalar unit, s's rows by Muls and Add, in k order), written into column j
  of C by the scalar unit.
"""

from __future__ import annotations

from ....dtypes import TABLE
from .layout import COPY_T, REPEAT, VFLOAT, ceil_to, pad_word, pc, vcount
from .vector import VectorOps


class MatmulOps(VectorOps):
    """matmul, with its right operand resident or streamed from GM."""

    def matmul(self, i: int, dst: str, chunk: bool) -> None:
        """C = a @ b (+ acc) on the vector unit: C[r, :] += a[r, k] * b[k, :] in k order (the
        scalar unit reads a[r, k]; Muls and Add do a row of C). A right operand that is a
        parameter streams from GM in blocks of rows through its own VECIN queue."""
        op = self.ops[i]
        a, b = op.args[0], op.args[1]
        n = self.count(i)
        if a in self.in_place and b in self.in_place:
            self.matmul_tt(i, dst)
        elif b in self.in_place:
            self.matmul_dot(i, dst, chunk)
        else:
            self.matmul_rows(i, dst, chunk)
        if len(op.args) > 2:  # acc + a @ b, the product first (as ref)
            acc = op.args[2]
            if self.ops[acc].dtype in VFLOAT:
                tacc = self.operand(acc, op.shape, chunk)
            else:
                tacc = self.convert_tile(self.at_or_bcast(acc, op.shape, chunk),
                                         self.ops[acc].dtype, "f32", n)
            self.vec(f"AscendC::Add({dst}, {tacc}, {dst}, {n});")

    def a_reader(self, i: int, chunk: bool):
        """`read(row, k)`: the scalar unit's read of a[row, k] (f32) for matmul i, from a's tile,
        or for a = transpose(s) from s's element [k, row] in place (s is resident; a chunked
        matmul's row `row` is a's row `c0 + row`)."""
        a = self.ops[i].args[0]
        if a not in self.in_place:
            ta, pa = self.as_float(a, chunk), pc(self.ops[a].shape[1])
            return lambda row, k: f"{ta}.GetValue({row} * {pa} + {k})"
        s = self.in_place[a]
        ts, ps = self.as_float(s, False), pc(self.ops[s].shape[1])
        c0 = "c0 + " if chunk and self.nchunks > 1 else ""
        return lambda row, k: f"{ts}.GetValue(({k}) * {ps} + {c0}{row})"

    def matmul_rows(self, i: int, dst: str, chunk: bool) -> None:
        """C[r, :] += a[r, k] * B[k, :], B resident or streamed (a possibly transposed)."""
        op = self.ops[i]
        a, b = op.args[0], op.args[1]
        rows, cols = self.rows_of(i), op.shape[1]
        inner = self.ops[a].shape[1]
        n = self.count(i)
        out = self.out
        read_a = self.a_reader(i, chunk)
        prod = self.temp("float", pc(cols))
        pn = pc(cols)
        if i in self.streams:
            src, conv = self.streams[i]
            p = self.params[str(self.ops[src].attr)]
            t = self.tile_index[p.name]
            kb = self.kblock(i)
            st, cp = TABLE[p.dtype].ascend, COPY_T[TABLE[p.dtype].size]
            nb = vcount(kb, cols)
            want = self.ops[conv].dtype if conv is not None else p.dtype
            tb = self.temp("float", nb) if (p.dtype != "f32" or want != "f32") else None
            self.vec(f"AscendC::Duplicate({dst}, 0.0f, {n});")
            self.need_s()
            out(f"for (int32_t kb = 0; kb < {inner}; kb += {kb}) {{")
            out.depth += 1
            out(f"const int32_t nk = {inner} - kb < {kb} ? {inner} - kb : {kb};")
            out(f"AscendC::LocalTensor<{st}> bq = q_mm{i}.AllocTensor<{st}>();")
            out(f"wsp_copy_in<{cp}>(bq.ReinterpretCast<{cp}>(), tiles[{t}], kb, (uint32_t)nk, "
                f"{p.cols * TABLE[p.dtype].size}, {pn * TABLE[p.dtype].size}, {TABLE[p.dtype].size}, "
                f"{pad_word(p)});")
            out(f"q_mm{i}.EnQue(bq);")
            out(f"bq = q_mm{i}.DeQue<{st}>();")
            b_t = "bq"
            if tb is not None:
                if p.dtype != "f32":
                    self.vec(f"AscendC::Cast({tb}, bq, AscendC::RoundMode::CAST_NONE, {nb});")
                    if want not in ("f32", p.dtype):  # held f32 -> rounded to `want`
                        self.vector_convert(tb, tb, "f32", want, nb)
                else:
                    self.vector_convert(tb, "bq", "f32", want, nb)
                b_t = tb
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out("    for (int32_t k = 0; k < nk; ++k) {")
            out(f"        const float aik = {read_a('i', 'kb + k')};")
            out(f"        AscendC::Muls({prod}, {b_t}[k * {pn}], aik, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out(f"        AscendC::Add({dst}[i * {pn}], {dst}[i * {pn}], {prod}, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out("    }")
            out("}")
            out(f"q_mm{i}.FreeTensor(bq);")
            out.depth -= 1
            out("}")
            self.v_dirty = True
        else:
            tb = self.as_float(b, False)
            self.vec(f"AscendC::Duplicate({dst}, 0.0f, {n});")
            self.need_s()
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    for (int32_t k = 0; k < {inner}; ++k) {{")
            out(f"        const float aik = {read_a('i', 'k')};")
            out(f"        AscendC::Muls({prod}, {tb}[k * {pn}], aik, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out(f"        AscendC::Add({dst}[i * {pn}], {dst}[i * {pn}], {prod}, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out("    }")
            out("}")
            self.v_dirty = True

    def matmul_dot(self, i: int, dst: str, chunk: bool) -> None:
        """C = a @ sᵀ, s [N, K] read in place: C[r, j] = ReduceSum(a[r, :] * s[j, :]), the N
        sums of row r gathered into C's row by the scalar unit (a is not transposed)."""
        op = self.ops[i]
        a, s = op.args[0], self.in_place[op.args[1]]
        rows, cols = self.rows_of(i), op.shape[1]
        inner = self.ops[a].shape[1]
        pk, pn = pc(inner), pc(cols)
        ta = self.as_float(a, chunk)
        ts = self.as_float(s, False)  # resident: a transpose's operand
        prod = self.temp("float", vcount(1, inner))
        work = self.temp("float", ceil_to(-(-inner // REPEAT), 8))
        # decision: ReduceSum's destination starts 32-byte aligned, so sum j goes to sums[8 j]
        # and the scalar unit gathers them: no [K, N] copy of s exists
        sums = self.temp("float", ceil_to(cols * 8, REPEAT))
        self.need_v()
        out = self.out
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t j = 0; j < {cols}; ++j) {{")
        out(f"        AscendC::Mul({prod}, {ta}[i * {pk}], {ts}[j * {pk}], {inner});")
        out("        AscendC::PipeBarrier<PIPE_V>();")
        out(f"        AscendC::ReduceSum({sums}[j * 8], {prod}, {work}, {inner});")
        out("        AscendC::PipeBarrier<PIPE_V>();")
        out("    }")
        out("    wsp_sync<AscendC::HardEvent::V_S>();")
        out(f"    for (int32_t j = 0; j < {cols}; ++j) "
            f"{dst}.SetValue(i * {pn} + j, {sums}.GetValue(j * 8));")
        out("}")
        self.v_dirty = False
        self.s_dirty = True

    def matmul_tt(self, i: int, dst: str) -> None:
        """C = sᵀ @ tᵀ = (t @ s)ᵀ, s [K, M] and t [N, K] read in place: row j of t @ s is
        sum_k t[j, k] * s[k, :] (Muls and Add in k order, t[j, k] read by the scalar unit),
        written into column j of C by the scalar unit. Resident (`chunks.chunking`)."""
        op = self.ops[i]
        s, t = self.in_place[op.args[0]], self.in_place[op.args[1]]
        rows, cols = op.shape
        inner = self.ops[s].shape[0]
        pm, pk, pn = pc(rows), pc(inner), pc(cols)
        ts = self.as_float(s, False)
        tt = self.as_float(t, False)
        row = self.temp("float", vcount(1, rows))
        prod = self.temp("float", vcount(1, rows))
        self.need_v()
        self.need_s()
        out = self.out
        out(f"for (int32_t j = 0; j < {cols}; ++j) {{")
        out(f"    AscendC::Duplicate({row}, 0.0f, {pm});")
        out("    AscendC::PipeBarrier<PIPE_V>();")
        out(f"    for (int32_t k = 0; k < {inner}; ++k) {{")
        out(f"        const float tjk = {tt}.GetValue(j * {pk} + k);")
        out(f"        AscendC::Muls({prod}, {ts}[k * {pm}], tjk, {pm});")
        out("        AscendC::PipeBarrier<PIPE_V>();")
        out(f"        AscendC::Add({row}, {row}, {prod}, {pm});")
        out("        AscendC::PipeBarrier<PIPE_V>();")
        out("    }")
        out("    wsp_sync<AscendC::HardEvent::V_S>();")
        out(f"    for (int32_t r = 0; r < {rows}; ++r) {dst}.SetValue(r * {pn} + j, "
            f"{row}.GetValue(r));")
        out("}")
        self.v_dirty = False
        self.s_dirty = True
