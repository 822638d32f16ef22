"""Which kernels run on the cube unit, and the cube's tiling of one matmul, shared by the
Ascend C emitter (which emits these loops for these kernels: `backends/ascend/aicore`) and the
cycle model (which costs them as a pipeline per pipe: `backends/pipes.py`, called by
`backends/cpu/cost.py`, and every other kernel as the vector code the emitter writes), so the
model follows the code instead of a whole-tile roofline. One fact, one place: neither side
chooses the unit or the block sizes of its own (`runs_on_cube`, `cube_tiling`).

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

from ..ir import nodes as N

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


# -- which kernels run on the cube: one rule for the Ascend emitter (`aicore/cube.py` writes
# these kernels, `aicore.is_cube` asks this) and the cycle model (`cpu/cost.py` costs these on
# the cube and every other kernel with a matmul as the vector matmul the emitter writes then)

CUBE_IN = ("f16", "bf16", "f32")   # operand dtypes the cube path takes
CUBE_OUT = ("f32", "f16", "bf16")  # stored dtypes Fixpipe writes (NoQuant, F322F16, F322BF16)


@dataclass(frozen=True)
class CubeMatmul:
    """One store of a cube kernel: tile parameter `out` = [out +] a @ b, `a` and `b` tile
    parameters read transposed or not (`a_t`, `b_t`), `dtype` theirs, `out_dtype` the stored
    one, `tiling` the loops it runs."""
    out: str
    a: str
    a_t: bool
    b: str
    b_t: bool
    acc: bool
    dtype: str
    out_dtype: str
    tiling: CubeTiling


def _operand(k: "N.Kernel", i: int):
    """(param, transposed) of op i through widening converts and transposes, or None."""
    ops, flips = k.ops, 0
    while True:
        op = ops[i]
        if op.op == "param":
            return str(op.attr), flips % 2 == 1
        if op.op == "transpose":
            flips += 1
        elif op.op == "convert" and op.dtype == "f32" and ops[op.args[0]].dtype in ("f16", "bf16"):
            pass  # widening f16 / bf16 -> f32: exact, the cube's own input conversion
        else:
            return None
        i = op.args[0]


def cube_matmuls(k: "N.Kernel", caps: CubeCaps = A2) -> "list[CubeMatmul] | None":
    """The matmuls of tile kernel `k` when all its work is matmuls the cube runs, else None
    (docs/ascend.md, "The AICore kernels"): every store receives `matmul(a, b)` (or
    `matmul(a, b, acc = y)` stored back into the f32 InOut `y` it reads, once), possibly
    converted to the stored tile's dtype, whose operands are tile parameters of one dtype of
    CUBE_IN with pad 0, each possibly transposed or widened to f32, that the kernel does not
    store to; the largest A and B panels of its matmuls (each its own tiling, the queues sized
    for the largest) fit L1 together. An extern kernel, one with nothing stored and one with an
    f64 value never run on the cube (the AI Core has no f64)."""
    from ..dtypes import size_of

    if k.is_extern or not k.stores:
        return None
    if any(p.dtype == "f64" for p in k.params) or any(op.dtype == "f64" for op in k.ops):
        return None
    params = {p.name: p for p in k.params}
    stored = {name for name, _ in k.stores}
    out: list[CubeMatmul] = []
    for name, v in k.stores:
        op = k.ops[v]
        pout = params[name]
        if op.op == "convert" and op.dtype == pout.dtype:
            op = k.ops[op.args[0]]
        if op.op != "matmul" or pout.dtype not in CUBE_OUT or (pout.rows, pout.cols) != op.shape:
            return None  # (a store broadcasting the product is vector work)
        a, b = (_operand(k, j) for j in op.args[:2])
        if a is None or b is None:
            return None
        pa, pb = params[a[0]], params[b[0]]
        if pa.dtype != pb.dtype or pa.dtype not in CUBE_IN or pa.pad != 0 or pb.pad != 0:
            return None
        if a[0] in stored or b[0] in stored:
            return None  # an operand the kernel also writes: the order of the two matters
        acc = len(op.args) > 2
        if acc:
            ao = k.ops[op.args[2]]
            # acc + a @ b stored into the acc's own tile: Fixpipe adds to GM (SetAtomicAdd)
            if (ao.op != "param" or str(ao.attr) != name or pout.mode != "InOut"
                    or pout.dtype != "f32" or pout.pad != 0):
                return None
            if sum(1 for s, _ in k.stores if s == name) != 1:
                return None
        m, n = op.shape
        kk = k.ops[op.args[0]].shape[1]
        out.append(CubeMatmul(name, a[0], a[1], b[0], b[1], acc, pa.dtype, pout.dtype,
                              cube_tiling(m, n, kk, size_of(pa.dtype), caps)))
    b = cube_buffers([x.tiling for x in out])
    # several matmuls share the queues, sized for the largest of each: each tiling fits the
    # core alone, but their largest A and B panels together may not fit L1 (then the kernel
    # keeps the vector path rather than a tiling of its own that the cycle model would not see)
    if b["l1_buffers"] * (b["l1a"] + b["l1b"]) > caps.l1:
        return None
    return out


def cube_buffers(tilings: "list[CubeTiling]") -> dict[str, int]:
    """The cube kernel's queues: buffer counts, and bytes per buffer (the largest each of
    `tilings` needs)."""
    return dict(
        l1_buffers=min(t.l1_buffers for t in tilings),
        l0_buffers=min(t.l0_buffers for t in tilings),
        l1a=max(t.base_m * t.step_k * t.in_bytes for t in tilings),
        l1b=max(t.base_n * t.step_k * t.in_bytes for t in tilings),
        l0a=max(t.base_m * t.base_k * t.in_bytes for t in tilings),
        l0b=max(t.base_n * t.base_k * t.in_bytes for t in tilings),
        l0c=max(t.base_m * t.base_n for t in tilings) * _ACC_BYTES)


def vector_only_kernels(module: "N.Module") -> frozenset:
    """The kernels that stay on the vector path because a task of some schedule passes them a
    gather view or a view strided along its columns: the cube's copies (Nd2Nz, rows of
    contiguous elements) read neither (the vector path's copy-in reads both)."""
    from ..ir.visit import tasks

    return frozenset(
        t.kernel for s in module.schedules for t in tasks(s.body) for a in t.args
        if isinstance(a, N.TileArg) and (a.gather is not None or a.step(a.col_dim) != 1))


def runs_on_cube(k: "N.Kernel", vector_only: frozenset = frozenset()) -> bool:
    """Whether kernel `k` runs on a cube core (AIC): all its work is matmuls the cube runs
    (`cube_matmuls`) and no task passes it a view the cube's copies cannot read (`vector_only`:
    `vector_only_kernels` of its module). Every other kernel runs on a vector core."""
    return k.name not in vector_only and cube_matmuls(k) is not None
