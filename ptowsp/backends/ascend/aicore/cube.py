"""Matmul kernels on the Cube unit: `cube_jobs(k)` says whether a tile kernel runs on an AI Core's
cube core (AIC) instead of its vector cores, and `emit_cube_kernel(k, module)` writes it.

A kernel goes to the cube when all its work is matmuls (docs/ascend.md, "The AICore kernels";
the rule is `backends/cube.cube_matmuls`, shared with the cycle model):
every store receives `matmul(a, b)` (or `matmul(a, b, acc = y)` stored back into the InOut `y`
it reads), possibly converted to the stored tile's f16 / bf16 (Fixpipe converts on the way out),
whose operands are f16, bf16 or f32 tile parameters (both the same dtype), each possibly
transposed, f16 / bf16 widened to f32 (exact: the cube multiplies them exactly and accumulates in
f32, which is ref's f32 matmul up to the order of the sums). A kernel mixing matmuls with
vector work is split by `mixed.py` into stages, its cube stages kernels of this module's kind
(their operands and products in GM workspace, cross-core flags between); one the split refuses
keeps the vector path (`matmul.py`).

Each matmul C[M, N] = A[M, K] @ B[K, N] runs the loops of `backends/cube.py`'s tiling, never
block sizes of its own:

    for each C block (m0, n0), base_m x base_n:                 L0C buffer (TQue<CO1>)
        for each L1 stage k1, step_k deep:                       GM -> L1, ND -> NZ (MTE2)
            for each L0 step k0, base_k deep:                    L1 -> L0A (ZZ) / L0B (ZN) (MTE1)
                Mmad(L0C += L0A @ L0B)                           (M; the first step initialises)
        Fixpipe L0C -> GM, f32 -> the stored dtype              (FIX; SetAtomicAdd for `acc`)

with TQue<A1 / B1> (l1_buffers) and TQue<A2 / B2> (l0_buffers): two buffers each, so the next
stage's copy and the next step's loads overlap the current Mmad, the queues' EnQue / DeQue
making the MTE2 -> MTE1 -> M -> FIX hand-offs. Transposed operands are loaded transposed, never
copied: `a` [M, K] is NZ in L1 and loads into ZZ as is; `s` of aᵀ = transpose(s) ([K, M]) is NZ
by K and each fractal loads transposed (`ifTranspose`); `b` [K, N] loads its fractals
transposed into ZN; `t` of tᵀ ([N, K]) is already ZN's fractal order. For f32 (16 x 8 fractals,
which `ifTranspose` does not transpose) `b` and `s` are copied in slabs of 16 rows and their
16 x 16 squares transposed by `LoadDataWithTranspose` (docs/ascend.md says how). A block or stage at an
edge is partial: rounded up to whole 16 x 16 fractals, its K padding zero (`Fill` of the L1
buffer, before the copy), its M / N padding never stored; a partial view (a ragged last tile)
is clipped the same way at run time (its pad must be 0, which the kernel's parameter says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ....dtypes import TABLE
from ....ir import nodes as N
from ....version import __version__
from ...cube import CubeTiling, cube_buffers, cube_matmuls, fractal_k
from ..render import render
from .names import describe, guard, kernel_entry

QUANT = {"f32": "NoQuant", "f16": "F322F16", "bf16": "F322BF16"}


@dataclass(frozen=True)
class Operand:
    """A matmul operand: tile parameter `param` (index `t` in `tiles`), read transposed or not."""
    param: str
    t: int
    transposed: bool


@dataclass(frozen=True)
class CubeJob:
    """One store of a cube kernel: `out` (index `t_out`) = [out +] a @ b."""
    out: str
    t_out: int
    a: Operand
    b: Operand
    acc: bool
    dtype: str          # A's and B's dtype (f16 / bf16 / f32)
    out_dtype: str
    tiling: CubeTiling


def cube_jobs(k: N.Kernel) -> Optional[list[CubeJob]]:
    """The cube jobs of tile kernel `k`, or None when it is not all matmuls the cube runs: the
    shared rule `backends/cube.cube_matmuls` (the cycle model asks the same one), with each
    parameter's index in `tiles`."""
    mms = cube_matmuls(k)
    if mms is None:
        return None
    tindex = {p.name: j for j, p in enumerate(p for p in k.params if p.kind == "tile")}
    return [CubeJob(x.out, tindex[x.out], Operand(x.a, tindex[x.a], x.a_t),
                    Operand(x.b, tindex[x.b], x.b_t), x.acc, x.dtype, x.out_dtype, x.tiling)
            for x in mms]


def buffers(jobs: list[CubeJob]) -> dict[str, int]:
    """The queues' buffer counts and bytes per buffer for `jobs` (the largest each needs)."""
    return cube_buffers([j.tiling for j in jobs])


class _Lines(list):
    """The body's lines: `out(line, depth)` appends `line` indented `depth` levels in."""

    def __call__(self, line: str, depth: int = 0) -> None:
        self.append("    " * (depth + 1) + line)


def emit_cube_kernel(k: N.Kernel, module: str, jobs: list[CubeJob]) -> str:
    """The header of cube kernel `k` (`jobs`: `cube_jobs(k)`)."""
    out = _Lines()
    b = buffers(jobs)
    l1a, l1b, l0a, l0b, l0c = b["l1a"], b["l1b"], b["l0a"], b["l0b"], b["l0c"]
    nl1, nl0 = b["l1_buffers"], b["l0_buffers"]
    out("AscendC::TPipe pipe;")
    out(f"AscendC::TQue<AscendC::TPosition::A1, {nl1}> q_a1;")
    out(f"AscendC::TQue<AscendC::TPosition::B1, {nl1}> q_b1;")
    out(f"AscendC::TQue<AscendC::TPosition::A2, {nl0}> q_a2;")
    out(f"AscendC::TQue<AscendC::TPosition::B2, {nl0}> q_b2;")
    out("AscendC::TQue<AscendC::TPosition::CO1, 1> q_co1;")
    out(f"pipe.InitBuffer(q_a1, {nl1}, {l1a});")
    out(f"pipe.InitBuffer(q_b1, {nl1}, {l1b});")
    out(f"pipe.InitBuffer(q_a2, {nl0}, {l0a});")
    out(f"pipe.InitBuffer(q_b2, {nl0}, {l0b});")
    out(f"pipe.InitBuffer(q_co1, 1, {l0c});")
    for j in jobs:
        _job(out, j)
    out("pipe.Destroy();")
    summary = [f"on the cube (AIC): {_describe(j)}" for j in jobs] + [
        f"L1 {nl1} x ({l1a} + {l1b}) bytes, L0A {nl0} x {l0a}, L0B {nl0} x {l0b}, L0C {l0c}"]
    return render("aicore/kernel.h", name=k.name, source=k.source, module=module,
                  version=__version__, params=[describe(q) for q in k.params], summary=summary,
                  guard=guard(module, k), entry=kernel_entry(k), body=out,
                  includes=["wsp_cube.h"])


def _describe(j: CubeJob) -> str:
    t = j.tiling
    a = f"transpose({j.a.param})" if j.a.transposed else j.a.param
    b = f"transpose({j.b.param})" if j.b.transposed else j.b.param
    acc = f"{j.out} + " if j.acc else ""
    return (f"{j.out} = {acc}{a} @ {b} ({t.m} x {t.k} @ {t.k} x {t.n}, {j.dtype} -> f32 -> "
            f"{j.out_dtype}); blocks {t.base_m} x {t.base_n}, L1 stages of {t.step_k}, Mmad "
            f"steps of {t.base_k}")


def _job(out: _Lines, j: CubeJob) -> None:
    """The loops of one matmul (see the module doc)."""
    t = j.tiling
    it, ot = TABLE[j.dtype].ascend, TABLE[j.out_dtype].ascend
    M, N_, K = t.m, t.n, t.k
    a, b = j.a, j.b
    out("{")
    out(f"// {j.out} = {'acc + ' if j.acc else ''}a @ b: {M} x {K} @ {K} x {N_}", 1)
    out(f"for (int32_t m0 = 0; m0 < {M}; m0 += {t.base_m}) {{", 1)
    out(f"const int32_t bm = {M} - m0 < {t.base_m} ? {M} - m0 : {t.base_m};", 2)
    out("const int32_t bmp = (bm + 15) / 16 * 16;", 2)
    out(f"for (int32_t n0 = 0; n0 < {N_}; n0 += {t.base_n}) {{", 2)
    d = 3
    out(f"const int32_t bn = {N_} - n0 < {t.base_n} ? {N_} - n0 : {t.base_n};", d)
    out("const int32_t bnp = (bn + 15) / 16 * 16;", d)
    out("AscendC::LocalTensor<float> c = q_co1.AllocTensor<float>();", d)
    out(f"for (int32_t k1 = 0; k1 < {K}; k1 += {t.step_k}) {{", d)
    d = 4
    out(f"const int32_t sk = {K} - k1 < {t.step_k} ? {K} - k1 : {t.step_k};", d)
    out("const int32_t skp = (sk + 15) / 16 * 16;", d)
    # A's block: a rows m0.., columns k1.. (NZ by M: C0 stride bmp); or s rows k1.., columns
    # m0.. (NZ by K: C0 stride skp; for f32 in slabs of 16 rows, the transposing load's squares)
    wide = t.in_bytes == 4
    out(f"AscendC::LocalTensor<{it}> a1 = q_a1.AllocTensor<{it}>();", d)
    if a.transposed:
        fn = "wsp_cube_in_slabs" if wide else "wsp_cube_in"
        out(f"{fn}<{it}>(a1, tiles[{a.t}], k1, m0, sk, bm, skp);", d)
    else:
        out(f"wsp_cube_in<{it}>(a1, tiles[{a.t}], m0, k1, bm, sk, bmp);", d)
    out("q_a1.EnQue(a1);", d)
    out(f"AscendC::LocalTensor<{it}> b1 = q_b1.AllocTensor<{it}>();", d)
    if b.transposed:
        out(f"wsp_cube_in<{it}>(b1, tiles[{b.t}], n0, k1, bn, sk, bnp);", d)
    else:
        fn = "wsp_cube_in_slabs" if wide else "wsp_cube_in"
        out(f"{fn}<{it}>(b1, tiles[{b.t}], k1, n0, sk, bn, skp);", d)
    out("q_b1.EnQue(b1);", d)
    out(f"a1 = q_a1.DeQue<{it}>();", d)
    out(f"b1 = q_b1.DeQue<{it}>();", d)
    out(f"for (int32_t k0 = 0; k0 < skp; k0 += {t.base_k}) {{", d)
    d = 5
    fk, fe = fractal_k(t.in_bytes), 512 // t.in_bytes  # K of a fractal, elements of one
    out(f"const int32_t kk = skp - k0 < {t.base_k} ? skp - k0 : {t.base_k};", d)
    out(f"const int32_t kf = kk / {fk}, mf = bmp / 16, nf = bnp / 16;", d)
    out(f"AscendC::LocalTensor<{it}> a2 = q_a2.AllocTensor<{it}>();", d)
    if a.transposed and wide:
        # each 16-row slab of s: squares of two 16 x 8 fractals (m 16q..16q+15) transposed
        # into A's ZZ fractals (q, 2j) and (q, 2j + 1), kf apart from one square to the next
        out("for (int32_t j = 0; j < kk / 16; ++j) {", d)
        out("AscendC::LoadData2dTransposeParams p(0, (uint8_t)mf, 1, (uint16_t)(kf - 1), 0);", d + 1)
        out(f"AscendC::LoadDataWithTranspose(a2[2 * j * {fe}], a1[(k0 / 16 + j) * 16 * bmp], p);", d + 1)
    else:
        out("for (int32_t i = 0; i < mf; ++i) {", d)
        if a.transposed:  # s's fractal (k, i) transposed is A's (i, k)
            out("AscendC::LoadData2DParams p((uint16_t)(i * (skp / 16) + k0 / 16), (uint8_t)kf, 1, 0, 0, "
                "true, 0);", d + 1)
        else:  # a's NZ fractals (k, i), mf apart, in ZZ order
            out(f"AscendC::LoadData2DParams p((uint16_t)((k0 / {fk}) * mf + i), (uint8_t)kf, (uint16_t)mf, "
                "0, 0, false, 0);", d + 1)
        out(f"AscendC::LoadData(a2[i * kf * {fe}], a1, p);", d + 1)
    out("}", d)
    out("q_a2.EnQue(a2);", d)
    out(f"AscendC::LocalTensor<{it}> b2 = q_b2.AllocTensor<{it}>();", d)
    if not b.transposed and wide:
        # each 16-row slab of b: squares of two 16 x 8 fractals (n 16p..16p+15) transposed into
        # ZN fractals (2j, p) and (2j + 1, p), nf apart
        out("for (int32_t j = 0; j < kk / 16; ++j) {", d)
        out("AscendC::LoadData2dTransposeParams p(0, (uint8_t)nf, 1, 0, (uint16_t)(nf - 1));", d + 1)
        out(f"AscendC::LoadDataWithTranspose(b2[2 * j * nf * {fe}], b1[(k0 / 16 + j) * 16 * bnp], p);",
            d + 1)
    else:
        out("for (int32_t j = 0; j < kf; ++j) {", d)
        if b.transposed:  # t's NZ fractal (k, n) is ZN's as it is
            out(f"AscendC::LoadData2DParams p((uint16_t)((k0 / {fk} + j) * nf), (uint8_t)nf, 1, 0, 0, false, "
                "0);", d + 1)
        else:  # b's NZ fractal (n, k) transposed is ZN's (k, n)
            out("AscendC::LoadData2DParams p((uint16_t)(k0 / 16 + j), (uint8_t)nf, (uint16_t)(skp / 16), 0, "
                "0, true, 0);", d + 1)
        out(f"AscendC::LoadData(b2[j * nf * {fe}], b1, p);", d + 1)
    out("}", d)
    out("q_b2.EnQue(b2);", d)
    out(f"a2 = q_a2.DeQue<{it}>();", d)
    out(f"b2 = q_b2.DeQue<{it}>();", d)
    # m in whole fractals (bmp, never 1: m == 1 would put the cube in its GEMV mode, which
    # reads L0A in another layout); the padding rows are computed and never stored
    out("AscendC::MmadParams mp((uint16_t)bmp, (uint16_t)bn, (uint16_t)kk, 0, false, "
        "k1 == 0 && k0 == 0);", d)
    out("AscendC::Mmad(c, a2, b2, mp);", d)
    out("q_a2.FreeTensor(a2);", d)
    out("q_b2.FreeTensor(b2);", d)
    d = 4
    out("}", d)
    out("q_a1.FreeTensor(a1);", d)
    out("q_b1.FreeTensor(b1);", d)
    d = 3
    out("}", d)
    out("q_co1.EnQue(c);", d)
    out("c = q_co1.DeQue<float>();", d)
    out(f"wsp_cube_out<{ot}>(tiles[{j.t_out}], c, m0, n0, bm, bn, bmp, "
        f"{'true' if j.acc else 'false'});", d)
    out("q_co1.FreeTensor(c);", d)
    out("}", 2)
    out("}", 1)
    out("}")


def cube_header() -> str:
    """`aicore/wsp_cube.h`: the copies of the cube kernels (in the tree when one exists)."""
    return render("aicore/wsp_cube.h", version=__version__)
