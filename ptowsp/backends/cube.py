"""The cube unit's tiling of one matmul, shared by the Ascend C emitter (which emits these
loops: `backends/ascend/aicore`) and the cycle model (which costs them as a pipeline per pipe:
`backends/pipes.py`, called by `backends/cpu/cost.py`),
so the model follows the code instead of a whole-tile roofline. One fact, one place: neither
side chooses block sizes of its own.

Capacities of one AI Core of the 910B / A3 (`dav-2201`, `__NPU_ARCH__ == 2201`), as asc-devkit's
`include/utils/base/sys_constants.h` declares them: L1 512 KiB - 256, L0A and L0B 64 KiB each,
L0C 128 KiB. The cube reads its operands from L0A / L0B in fractals of 16 rows x 32 bytes (16 x 16
for f16 / bf16, 16 x 8 for f32) and accumulates 16 x 16 blocks of f32 in L0C.

C[M, N] = A[M, K] @ B[K, N] on one core runs as

    for each block (m0, n0) of C, base_m x base_n:           # one L0C buffer
        for each L1 stage k1 of K, step_k deep:              # MTE2: GM -> L1 (ND -> NZ)
            for each L0 step k0 of the stage, base_k deep:   # MTE1: L1 -> L0A / L0B
                Mmad(L0C[m0, n0] += L0A[m0, k0] @ L0B[k0, n0])
        Fixpipe L0C -> GM (or -> UB for a vector epilogue)

with `l1_buffers` / `l0_buffers` copies of each L1 / L0 operand buffer (2: double-buffered, the
next transfer overlaps the current Mmad). A block or stage at the edge is partial: its extents are
the remainder, rounded up to whole fractals in L0 (the padding is zeros and never stored).
"""

from __future__ import annotations

from dataclasses import dataclass

FRACTAL = 16            # rows of an L0A / L0B fractal, and C's 16 x 16 accumulation block
FRACTAL_BYTES = 32      # one fractal row: 16 f16 / bf16 or 8 f32 elements


@dataclass(frozen=True)
class CubeCaps:
    """One AI Core's cube-side buffers, in bytes."""
    l1: int
    l0a: int
    l0b: int
    l0c: int


# dav-2201 (910B, A3): asc-devkit include/utils/base/sys_constants.h, `__NPU_ARCH__ == 2201`
A2 = CubeCaps(l1=512 * 1024 - 256, l0a=64 * 1024, l0b=64 * 1024, l0c=128 * 1024)

# the largest C block one L0C buffer holds: 128 x 256 f32 = 128 KiB, the basic block the
# Ascend C Matmul API's own tiling uses for f16 on this core (baseM 128, baseN 256, baseK 64)
_MAX_BASE_M, _MAX_BASE_N = 128, 256
_ACC_BYTES = 4          # L0C accumulates in f32 (i32 for integer inputs): 4 bytes either way


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def _ceil_div(x: int, m: int) -> int:
    return -(-x // m)


def fractal_k(in_bytes: int) -> int:
    """Elements of K per fractal row: 16 for 2-byte inputs, 8 for f32, 32 for 1-byte."""
    return FRACTAL_BYTES // in_bytes


def k_quantum(in_bytes: int) -> int:
    """What base_k is a multiple of: a fractal's K, but 16 for f32 (two 16 x 8 fractals, the
    square the 4-byte transposing load moves)."""
    return max(fractal_k(in_bytes), FRACTAL)


@dataclass(frozen=True)
class CubeTiling:
    """How one M x K @ K x N matmul runs on one core's cube (see the module doc)."""
    m: int
    n: int
    k: int
    in_bytes: int       # element size of A and B in L0A / L0B
    base_m: int         # C block rows (multiple of 16)
    base_n: int         # C block columns (multiple of 16)
    base_k: int         # K depth of one Mmad (multiple of k_quantum)
    step_k: int         # K depth of one L1 stage (multiple of base_k)
    l1_buffers: int     # copies of each L1 operand buffer (2: double-buffered)
    l0_buffers: int     # copies of each L0A / L0B buffer

    @property
    def blocks_m(self) -> int:
        return _ceil_div(self.m, self.base_m)

    @property
    def blocks_n(self) -> int:
        return _ceil_div(self.n, self.base_n)

    @property
    def l1_stages(self) -> int:
        return _ceil_div(self.k, self.step_k)

    @property
    def k_steps(self) -> int:
        """Mmad calls per C block."""
        return _ceil_div(self.k, self.base_k)

    def l0a_bytes(self) -> int:
        return self.l0_buffers * self.base_m * self.base_k * self.in_bytes

    def l0b_bytes(self) -> int:
        return self.l0_buffers * self.base_k * self.base_n * self.in_bytes

    def l0c_bytes(self) -> int:
        return self.base_m * self.base_n * _ACC_BYTES

    def l1_bytes(self) -> int:
        return self.l1_buffers * (self.base_m + self.base_n) * self.step_k * self.in_bytes

    def fits(self, caps: CubeCaps = A2) -> bool:
        return (self.l0a_bytes() <= caps.l0a and self.l0b_bytes() <= caps.l0b
                and self.l0c_bytes() <= caps.l0c and self.l1_bytes() <= caps.l1)


def cube_tiling(m: int, n: int, k: int, in_bytes: int, caps: CubeCaps = A2) -> CubeTiling:
    """The tiling of an M x K @ K x N matmul with `in_bytes`-byte operands: the largest C block
    up to 128 x 256 that one L0C buffer holds, the deepest Mmad step that lets L0A and L0B be
    double-buffered, and the deepest L1 stage (a multiple of it) that lets both operand panels
    be double-buffered in L1. Any M, N, K >= 1 gets a tiling: a matmul larger than the buffers
    is split, never refused."""
    if min(m, n, k) < 1 or in_bytes not in (1, 2, 4):
        raise ValueError(f"cube_tiling({m}, {n}, {k}, {in_bytes})")
    base_m = min(_MAX_BASE_M, _ceil_to(m, FRACTAL))
    base_n = min(_MAX_BASE_N, _ceil_to(n, FRACTAL))
    while base_m * base_n * _ACC_BYTES > caps.l0c and max(base_m, base_n) > FRACTAL:
        if base_n >= base_m:
            base_n -= FRACTAL
        else:
            base_m -= FRACTAL
    # the deepest base_k (whole fractals) with two L0A and two L0B buffers
    widest = max(base_m, base_n)
    # (K in whole 16-deep squares for f32: its transposing load, LoadDataWithTranspose, moves
    # two 16 x 8 fractals at a time)
    kq = k_quantum(in_bytes)
    base_k = min(caps.l0a, caps.l0b) // (2 * widest * in_bytes) // kq * kq
    l0_buffers = 2
    if base_k < kq:  # cannot double-buffer even one fractal deep: single buffers
        base_k, l0_buffers = kq, 1
    base_k = min(base_k, _ceil_to(k, kq))
    # the deepest L1 stage, a multiple of base_k, with both panels double-buffered
    per_k = 2 * (base_m + base_n) * in_bytes
    step_k = max(base_k, caps.l1 // per_k // base_k * base_k)
    step_k = min(step_k, _ceil_to(k, base_k))
    l1_buffers = 2 if 2 * (base_m + base_n) * step_k * in_bytes <= caps.l1 else 1
    t = CubeTiling(m, n, k, in_bytes, base_m, base_n, base_k, step_k, l1_buffers, l0_buffers)
    assert t.fits(caps), t
    return t
