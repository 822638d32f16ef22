"""`matmul` on the vector unit: C[i, :] += a[i, k] * B[k, :] with Muls and Add, in k order,
accumulating in f32 (the scalar unit reads a[i, k]); the cube unit (Mmad, L0A/L0B/L0C) is not
used by this emitter. A right operand that is a parameter streams from GM in blocks of about
STREAM_BYTES of rows through a VECIN queue of its own (`chunks.streamed_operands`), so weights
need not fit the Unified Buffer."""

from __future__ import annotations

from ....dtypes import TABLE
from .layout import COPY_T, STREAM_BYTES, VFLOAT, pc, vcount
from .vector import VectorOps


class MatmulOps(VectorOps):
    """matmul, with its right operand resident or streamed from GM."""

    def kblock(self, mm: int) -> int:
        """Rows of a streamed matmul operand per block (about STREAM_BYTES of UB)."""
        src = self.streams[mm][0]
        p = self.params[str(self.ops[src].attr)]
        return max(1, min(p.rows, STREAM_BYTES // (pc(p.cols) * 4)))

    def matmul(self, i: int, dst: str, chunk: bool) -> None:
        """C = a @ b (+ acc) on the vector unit: C[r, :] += a[r, k] * b[k, :] in k order (the
        scalar unit reads a[r, k]; Muls and Add do a row of C). A right operand that is a
        parameter streams from GM in blocks of rows through its own VECIN queue."""
        op = self.ops[i]
        a, b = op.args[0], op.args[1]
        rows, cols = self.rows_of(i), op.shape[1]
        inner = self.ops[a].shape[1]
        n = self.count(i)
        out = self.out
        ta = self.as_float(a, chunk)
        prod = self.temp("float", pc(cols))
        pa, pn = pc(inner), pc(cols)
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
                f"{p.cols * TABLE[p.dtype].size}, {pn * TABLE[p.dtype].size}, {TABLE[p.dtype].size});")
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
            out(f"        const float aik = {ta}.GetValue(i * {pa} + kb + k);")
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
            out(f"        const float aik = {ta}.GetValue(i * {pa} + k);")
            out(f"        AscendC::Muls({prod}, {tb}[k * {pn}], aik, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out(f"        AscendC::Add({dst}[i * {pn}], {dst}[i * {pn}], {prod}, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out("    }")
            out("}")
            self.v_dirty = True
        if len(op.args) > 2:  # acc + a @ b, the product first (as ref)
            acc = op.args[2]
            if self.ops[acc].dtype in VFLOAT:
                tacc = self.operand(acc, op.shape, chunk)
            else:
                tacc = self.convert_tile(self.at_or_bcast(acc, op.shape, chunk),
                                         self.ops[acc].dtype, "f32", n)
            self.vec(f"AscendC::Add({dst}, {tacc}, {dst}, {n});")
