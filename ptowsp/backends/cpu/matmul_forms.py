"""The matmul forms of a tile kernel besides i-k-j (`kernels.py`): the register-blocked one,
the small-M form (1 to MM_MIN_ROWS - 1 rows of C at once over wide panels of B read in place)
and the dot-product form of `matmul(a, transpose(s))` (s read in place: no transposed copy).
Which form a matmul step takes is the plan's (`PlanStep.small`, `PlanStep.dot`,
`ir/passes/plan_kernels.py`); `MatmulForms` is a part of `kernels._Emitter` and uses its
`out`, `ops`, `access`, `arr`, `in_place` and `buf`.
"""

from __future__ import annotations

from typing import Optional

from ...ir import kernel_plan as KP
from .. import cexpr as C
from ..cexpr import Expr, Raw
from .kernel_values import convert

MM_MR, MM_NR = KP.MM_MR, KP.MM_NR  # the register-blocked form's blocks of C (the plan's)


class MatmulForms:
    """The small-M and dot-product matmul forms, and what they share with the blocked one."""

    def vector_types(self) -> None:
        """The 8-float vector types and the vector FMA of the matmul forms below."""
        out = self.out
        # (unused: a form without a K loop of 8 or a full panel uses only one of them)
        out("typedef float wsp_v8 __attribute__((vector_size(32), unused));")
        out("typedef float wsp_v8u __attribute__((vector_size(32), aligned(4), unused));")
        out("#if defined(__FMA__) && defined(__AVX__)")
        out("#define WSP_MM_FMA(x, y, z) __builtin_ia32_vfmaddps256((x), (y), (z))")
        out("#else")
        out("#define WSP_MM_FMA(x, y, z) ((x) * (y) + (z))")
        out("#endif")

    def add_acc(self, m: int, init: Expr) -> None:
        """C += acc after the product (the product is summed from 0, as everywhere)."""
        op = self.ops[m]
        if len(op.args) <= 2:
            return
        rows, cols = op.shape
        cell = f"{self.arr(m)}[{C.to_c(C.iadd(C.imul('i', cols) if rows > 1 else Raw('0'), 'j' if cols > 1 else 0))}]"
        self.out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        self.out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)} + {cell};")
        self.out.close()

    def matmul_small(self, step: KP.PlanStep, init: Expr) -> None:
        """C = a @ b (+ acc) for fewer rows than a blocked matmul takes: every row of C at
        once over panels of 8 * nv columns of B read in place, each element summed over k in
        i-k-j's order (the same bits), with `rows * nv` independent vector accumulators."""
        # decision: i-k-j on a 1-row C keeps one FMA chain per 8 columns and reloads C every 4
        # k; holding 8-12 accumulators (64 columns at 1 row, 32 at 2 or 3) in registers hides
        # the FMA latency: benchmarks/kernels.py --matmul has the figures
        out = self.out
        m = step.matmul
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        b_row = self.rows_of(b)
        dst = self.arr(m)
        out.open("")
        self.vector_types()
        widest = 8 if rows == 1 else 4
        nwide = cols // (8 * widest)
        j = nwide * 8 * widest
        rest = []  # (first column, vectors) of the narrower panels after the widest ones
        for nv in (4, 2, 1):
            if nv < widest and cols - j >= 8 * nv:
                rest.append((j, nv))
                j += 8 * nv

        def a_at(q: int) -> str:
            e = self.access(a, Raw(str(q)) if rows > 1 else Raw("0"), Raw("k") if inner > 1 else Raw("0"))
            return C.to_c(convert(e, self.ops[a].dtype, "f32"))

        def panel(j0: str, nv: int) -> None:
            for q in range(rows):
                out("wsp_v8 " + ", ".join(f"c{q}_{v} = {{0}}" for v in range(nv)) + ";")
            out("#pragma GCC unroll 4")
            out.open(f"for (int64_t k = 0; k < {inner}; ++k)")
            out(f"const float *bk = {b_row('k' if inner > 1 else '0')} + {j0};")
            for v in range(nv):
                out(f"const wsp_v8 w{v} = *(const wsp_v8u *)(bk + {8 * v});")
            for q in range(rows):
                out(f"const float a{q} = {a_at(q)};")
                out(f"const wsp_v8 av{q} = {{{', '.join([f'a{q}'] * 8)}}};")
                for v in range(nv):
                    out(f"c{q}_{v} = WSP_MM_FMA(av{q}, w{v}, c{q}_{v});")
            out.close()
            for q in range(rows):
                for v in range(nv):
                    out(f"*(wsp_v8u *)({dst} + {q * cols} + {j0} + {8 * v}) = c{q}_{v};")

        if nwide:
            out.open(f"for (int64_t jb = 0; jb < {8 * widest * nwide}; jb += {8 * widest})")
            panel("jb", widest)
            out.close()
        for j0, nv in rest:
            out.open("")
            panel(str(j0), nv)
            out.close()
        if j < cols:  # the last cols % 8 columns, i-k-j
            out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
            out.open(f"for (int64_t j = {j}; j < {cols}; ++j)")
            out("float c = 0.0f;")
            e = self.access(b, Raw("k") if inner > 1 else Raw("0"), Raw("j"))
            ea = self.access(a, Raw("i") if rows > 1 else Raw("0"), Raw("k") if inner > 1 else Raw("0"))
            out(f"for (int64_t k = 0; k < {inner}; ++k) c = WSP_FMAF("
                f"{C.to_c(convert(ea, self.ops[a].dtype, 'f32'))}, "
                f"{C.to_c(convert(e, self.ops[b].dtype, 'f32'))}, c);")
            out(f"{dst}[i * {cols} + j] = c;" if rows > 1 else f"{dst}[j] = c;")
            out.close()
            out.close()
        out("#undef WSP_MM_FMA")
        out.close()
        self.add_acc(m, init)

    def matmul_dot(self, step: KP.PlanStep, init: Expr) -> None:
        """C = a @ transpose(s) (+ acc), s read in place: C[i][j] is the dot product of row i
        of a and row j of s, summed in 8 lanes over k (then the lanes pairwise, then the last
        k % 8 in order), blocks of 2 rows x 4 columns of C (1 x 8 for a 1-row C) at a time.
        Rows of a that are not an f32 array or tile are first converted into `ar`."""
        # decision: no transposed copy of s: a copy costs as much as the product at small M
        # (decode attention's q @ k^T); the dot products read both operands contiguously.
        # This is the form at every level, so -O0 and -O2 give the same bits
        out = self.out
        m = step.matmul
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        (src,) = self.ops[b].args
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        s_row = self.rows_of(src)
        dst = self.arr(m)
        out.open("")
        self.vector_types()
        aop = self.ops[a]
        if aop.dtype == "f32" and (aop.op == "param" or a in self.buf):
            a_row = self.rows_of(a)
        else:
            ea = self.access(a, Raw("i") if rows > 1 else Raw("0"), Raw("k") if inner > 1 else Raw("0"))
            out(f"_Alignas(64) float ar[{rows * inner}];")
            out(f"for (int64_t i = 0; i < {rows}; ++i) for (int64_t k = 0; k < {inner}; ++k) "
                f"ar[i * {inner} + k] = {C.to_c(convert(ea, aop.dtype, 'f32'))};")
            def a_row(row: str) -> str:
                return f"ar + ({row}) * {inner}"
        rb, cb = (1, 8) if rows == 1 else (2, 4)
        main_k = inner - inner % 8

        def block(r: int, c: int) -> None:
            """Rows i0 .. i0 + r, columns j0 .. j0 + c."""
            for q in range(r):
                out(f"const float *arow{q} = {a_row(f'i0 + {q}')};")
            for t in range(c):
                out(f"const float *srow{t} = {s_row(f'j0 + {t}')};")
            if main_k:
                for q in range(r):
                    out("wsp_v8 " + ", ".join(f"d{q}_{t} = {{0}}" for t in range(c)) + ";")
                out.open(f"for (int64_t k = 0; k < {main_k}; k += 8)")
                for q in range(r):
                    out(f"const wsp_v8 av{q} = *(const wsp_v8u *)(arow{q} + k);")
                for t in range(c):
                    out(f"const wsp_v8 sv{t} = *(const wsp_v8u *)(srow{t} + k);")
                    for q in range(r):
                        out(f"d{q}_{t} = WSP_MM_FMA(av{q}, sv{t}, d{q}_{t});")
                out.close()
            for q in range(r):
                for t in range(c):
                    if main_k:
                        d = f"d{q}_{t}"
                        out(f"float e{q}_{t} = (({d}[0] + {d}[1]) + ({d}[2] + {d}[3])) + "
                            f"(({d}[4] + {d}[5]) + ({d}[6] + {d}[7]));")
                    else:
                        out(f"float e{q}_{t} = 0.0f;")
                    if main_k < inner:
                        out(f"for (int64_t k = {main_k}; k < {inner}; ++k) "
                            f"e{q}_{t} = WSP_FMAF(arow{q}[k], srow{t}[k], e{q}_{t});")
                    out(f"{dst}[(i0 + {q}) * {cols} + j0 + {t}] = e{q}_{t};")

        def columns(r: int) -> None:
            full_c = cols - cols % cb
            if full_c:
                out.open(f"for (int64_t j0 = 0; j0 < {full_c}; j0 += {cb})")
                block(r, cb)
                out.close()
            if cols % cb:
                out.open(f"for (int64_t j0 = {full_c}; j0 < {cols}; ++j0)")
                block(r, 1)
                out.close()

        full_r = rows - rows % rb
        if full_r:
            out.open(f"for (int64_t i0 = 0; i0 < {full_r}; i0 += {rb})")
            columns(rb)
            out.close()
        if rows % rb:
            out.open("")
            out(f"const int64_t i0 = {full_r};")
            columns(rows % rb)
            out.close()
        out("#undef WSP_MM_FMA")
        out.close()
        self.add_acc(m, init)


    def matmul_blocked(self, step: KP.PlanStep, mode: str) -> None:
        """C (already holding acc, or 0) += a @ b, register-blocked: B is packed, MM_KC rows
        at a time, into a contiguous zero-padded panel of MM_NR columns; an MM_MR x MM_NR block
        of C is held in 2 * MM_MR vectors of 8 floats (GCC vector extensions, no intrinsics
        header) and accumulated over k with one broadcast of a per row and vector FMAs."""
        # decision: 6 x 16 blocks (12 accumulators + 2 rows of B + 1 broadcast = 15 of the 16
        # AVX2 registers); the last rows % 6 rows run as one smaller block, the last cols % 16
        # columns through a 16-wide copy of C and the zero-padded panel; measured on 64^3
        # tiles of 1024-wide matrices 45-54 GFLOP/s per core against 20-22 for the i-k-j loop
        # (noisy machine); the 1024^3 gemm example went from ~25 to ~38 GFLOP/s on 2 workers.
        # Besides the temporaries, bp, cb and ap take up to ~49 KiB of stack
        out = self.out
        m = step.matmul
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        mr, nr = MM_MR, MM_NR
        nblk = -(-rows // mr)
        kc_max = step.kc
        kc_len = min(inner, kc_max)
        out.open("")
        self.vector_types()
        out(f"_Alignas(64) float bp[{kc_len * nr}];")
        out(f"_Alignas(64) float cb[{mr * nr}];")
        if step.pack_a:
            out(f"_Alignas(64) float ap[{nblk * mr * kc_len}];")
        if inner > kc_max:
            out.open(f"for (int64_t kc = 0; kc < {inner}; kc += {kc_max})")
            out(f"const int64_t kn = {inner} - kc < {kc_max} ? {inner} - kc : {kc_max};")
        else:
            out.open("")
            out("const int64_t kc = 0, kn = " + str(inner) + ";")
        if step.pack_a:
            # A's chunk, converted to f32, as [row block][k][row in block]
            ea = self.access(a, Raw("i") if rows > 1 else Raw("0"),
                             C.iadd("kc", "k") if inner > 1 else Raw("0"))
            out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
            out(f"for (int64_t k = 0; k < kn; ++k) ap[(i / {mr}) * ({mr} * kn) + k * {mr} + i % {mr}]"
                f" = {C.to_c(convert(ea, self.ops[a].dtype, 'f32'))};")
            out.close()
        out.open(f"for (int64_t jb = 0; jb < {cols}; jb += {nr})")
        out(f"const int64_t jn = {cols} - jb < {nr} ? {cols} - jb : {nr};")
        kk = C.iadd("kc", "k")

        def b_at(j: Expr) -> str:
            e = self.access(b, kk, C.iadd("jb", j) if cols > 1 else Raw("0"))
            return C.to_c(convert(e, self.ops[b].dtype, "f32"))

        # decision: a full panel row is packed as 8-element vector initialisers (gcc makes
        # them vector loads); a copy loop became a `rep movsl` per 64 bytes, measured 27% of
        # the kernel on 64^3 tiles
        # a B whose rows may end early (`row_at`) is packed, the packing reading its pad
        direct = None if self.guarded(b) else self.b_cols(step)
        out("const float *bb = bp;")
        out(f"int64_t bs = {nr};")
        out.open(f"if (jn == {nr})")
        if direct is not None:
            out(f"bb = {direct[0]} + kc * {direct[1]} + jb;")
            out(f"bs = {direct[1]};")
        else:
            out.open("for (int64_t k = 0; k < kn; ++k)")
            for v in range(nr // 8):
                elems = ", ".join(b_at(Raw(str(8 * v + e))) for e in range(8))
                out(f"*(wsp_v8 *)(bp + k * {nr} + {8 * v}) = (wsp_v8){{{elems}}};")
            out.close()
        out.close()
        out.open("else")
        out.open("for (int64_t k = 0; k < kn; ++k)")
        out(f"for (int64_t l = 0; l < jn; ++l) bp[k * {nr} + l] = {b_at(Raw('l'))};")
        out(f"for (int64_t l = jn; l < {nr}; ++l) bp[k * {nr} + l] = 0.0f;")
        out.close()
        out.close()
        full = rows - rows % mr
        if full:
            out.open(f"for (int64_t i0 = 0; i0 < {full}; i0 += {mr})")
            self.matmul_block(step, mr, mode)
            out.close()
        if rows % mr:
            out.open("")
            out(f"const int64_t i0 = {full};")
            self.matmul_block(step, rows % mr, mode)
            out.close()
        out.close()  # jb
        out.close()  # kc
        out("#undef WSP_MM_FMA")
        out.close()

    def a_rows(self, step: KP.PlanStep) -> Optional[tuple[str, str]]:
        """(pointer, row stride) of a blocked matmul's A operand read in place (the plan's
        `pack_a` is False: `plan_kernels.a_in_place`), or None when it is packed."""
        # decision: reading A in place (a micro-block reads 6 rows, each sequentially) instead
        # of packing it measured 70-89 against 52-63 GFLOP/s on 64^3 tiles in cache, and
        # ~50 against ~44 on the tiles of 1024-wide matrices (noisy machine, one core): the
        # scalar packing loop cost more than the strided rows it avoided
        return None if step.pack_a else self.in_place(self.ops[step.matmul].args[0])

    def b_cols(self, step: KP.PlanStep) -> Optional[tuple[str, str]]:
        """(pointer, row stride) of a blocked matmul's B operand when its full panels are read
        in place (the plan's `pack_b` is False: `plan_kernels.b_in_place`), or None."""
        return None if step.pack_b else self.in_place(self.ops[step.matmul].args[1])

    def in_place(self, v: int) -> tuple[str, str]:
        """(pointer, row stride) of value `v` where it lies: its tile, or its array. A form
        that addresses rows from these cannot read a guarded tile (`row_at`)."""
        op = self.ops[v]
        if op.op == "param":
            t = self.tile_index[str(op.attr)]
            if t in self.guard:
                self.unguarded = True
            return self.ptr(t), self.rs(t)
        return self.arr(v), str(op.shape[1])

    def guarded(self, v: int) -> bool:
        """Whether value `v` is a tile whose rows past its view read the pad (`row_at`)."""
        op = self.ops[v]
        return op.op == "param" and self.tile_index[str(op.attr)] in self.guard

    def rows_of(self, v: int):
        """row -> the C address of that row of value `v` where it lies (`in_place`, guarded
        tiles included)."""
        op = self.ops[v]
        if op.op == "param":
            t = self.tile_index[str(op.attr)]
            return lambda row: self.row_at(t, row)
        p, stride = self.arr(v), str(op.shape[1])
        return lambda row: f"{p} + ({row}) * {stride}"

    def matmul_block(self, step: KP.PlanStep, r: int, mode: str) -> None:
        """Rows i0 .. i0 + r of C, columns jb .. jb + jn, summed over k in kc .. kc + kn and
        stored into C (`set`), added to it (`add`), or continued from C's partial sums when
        kc != 0 (`kc`)."""
        out = self.out
        m = step.matmul
        op = self.ops[m]
        cols = op.shape[1]
        nr, nv = MM_NR, MM_NR // 8
        if m in self.into:
            t = self.tile_index[self.into[m]]
            dst, stride = self.ptr(t), self.rs(t)
        else:
            dst, stride = self.arr(m), str(cols)
        out(f"float *cp = &{dst}[i0 * {stride} + jb];")
        out(f"int64_t cs = {stride};")
        out.open(f"if (jn != {nr})")
        if mode != "set":
            out(f"for (int64_t q = 0; q < {r}; ++q) for (int64_t l = 0; l < {nr}; ++l) "
                f"cb[q * {nr} + l] = l < jn ? cp[q * {stride} + l] : 0.0f;")
        out(f"cp = cb; cs = {nr};")
        out.close()
        # decision: over several K chunks the block starts from C's partial sums, so a chunked
        # sum is the one FMA chain over k that an unchunked (or i-k-j) matmul computes
        for q in range(r):
            out("wsp_v8 " + ", ".join(f"c{q}_{v} = {{0}}" for v in range(nv)) + ";")
        if mode == "kc":
            out.open("if (kc != 0)")
            for q in range(r):
                for v in range(nv):
                    out(f"c{q}_{v} = *(const wsp_v8u *)(cp + {q} * cs + {8 * v});")
            out.close()
        direct = self.a_rows(step)
        if direct is None:
            out(f"const float *ak = ap + (i0 / {MM_MR}) * ({MM_MR} * kn);")
        else:
            out(f"const float *ak = {direct[0]} + i0 * {direct[1]} + kc;")
        out("#pragma GCC unroll 4")
        out.open("for (int64_t k = 0; k < kn; ++k)")
        out("const float *bk = bb + k * bs;")
        for v in range(nv):
            out(f"const wsp_v8 b{v} = *(const wsp_v8u *)(bk + {8 * v});")
        for q in range(r):
            at = f"ak[k * {MM_MR} + {q}]" if direct is None else f"ak[{q} * {direct[1]} + k]"
            out(f"const float a{q} = {at};")
            out(f"const wsp_v8 av{q} = {{{', '.join([f'a{q}'] * 8)}}};")
            for v in range(nv):
                out(f"c{q}_{v} = WSP_MM_FMA(av{q}, b{v}, c{q}_{v});")
        out.close()
        def store(add: bool) -> None:
            for q in range(r):
                for v in range(nv):
                    at = f"*(wsp_v8u *)(cp + {q} * cs + {8 * v})"
                    out(f"{at} = {at + ' + ' if add else ''}c{q}_{v};")
        store(mode == "add")
        out.open(f"if (jn != {nr})")
        out(f"for (int64_t q = 0; q < {r}; ++q) for (int64_t l = 0; l < jn; ++l) "
            f"{dst}[(i0 + q) * {stride} + jb + l] = cb[q * {nr} + l];")
        out.close()


__all__ = ["MatmulForms"]
