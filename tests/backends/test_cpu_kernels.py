"""Kernels of the cpu back end (`backends/cpu/kernels.py`) against NumPy formulas written here.

Every kernel below is built as an IR `Kernel` directly (no front end), all of them are compiled
in one translation unit per module (`lib` fixture), and each test runs some of them through
cffi on NumPy arrays and compares with an independent NumPy (or plain Python) formula: every
primitive, every dtype, wrap-around and floor division, cast saturation, broadcasting, odd and
strided shapes, stores reading entry values, aliasing, `extern c` and the accuracy of wsp_expf,
wsp_logf and wsp_tanhf over a million points each.
"""

from __future__ import annotations

import math
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ptowsp.backends.cpu import kernels as K
from ptowsp.ir import nodes as N
from tests.kernel_builder import KB

# the references overflow on purpose (inf inputs, f16 overflow)
pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_H = ROOT / "runtime_c" / "wsp_runtime.h"
FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
ALL = FLOATS + INTS + ("bool",)
NP = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}
LIMITS = {d: (int(np.iinfo(NP[d]).min), int(np.iinfo(NP[d]).max)) for d in INTS}
BF16_MAX = float(np.uint32(0x7F7F0000).view(np.float32))
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------------------------------------
# Building kernels by hand


KERNELS: dict[str, N.Kernel] = {}
FAMILIES: list[list[str]] = []  # kernels registered together are compiled together


def kernel(fn):
    """Register the kernel(s) `fn` builds (a KB or a list of them)."""
    out = fn()
    FAMILIES.append([])
    for kb in out if isinstance(out, list) else [out]:
        KERNELS[kb.name] = kb.kernel() if isinstance(kb, KB) else kb
        FAMILIES[-1].append(kb.name)
    return fn


BIN_OPS = ("add", "sub", "mul", "div", "maximum", "minimum")
FLOAT_UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos",
               "relu", "gelu", "silu")
CMP = ("lt", "le", "gt", "ge", "eq", "ne")
SHAPE = (8, 24)


@kernel
def _binary():
    out = []
    for dt in FLOATS + INTS:
        kb = KB(f"bin_{dt}")
        a, b = kb.tile("a", *SHAPE, dt), kb.tile("b", *SHAPE, dt)
        for name in BIN_OPS:
            kb.out(f"y_{name}", kb.op(name, a, b))
        out.append(kb)
    return out


@kernel
def _unary():
    out = []
    for dt in FLOATS:
        kb = KB(f"un_{dt}")
        x = kb.tile("x", *SHAPE, dt)
        for name in FLOAT_UNARY:
            kb.out(f"y_{name}", kb.op(name, x))
        out.append(kb)
    for dt in INTS:
        kb = KB(f"unint_{dt}")
        x = kb.tile("x", *SHAPE, dt)
        for name in ("neg", "abs", "relu"):
            kb.out(f"y_{name}", kb.op(name, x))
        out.append(kb)
    return out


@kernel
def _compare():
    out = []
    for dt in ("f32", "i32", "u8", "f16"):
        kb = KB(f"cmp_{dt}")
        a, b = kb.tile("a", *SHAPE, dt), kb.tile("b", *SHAPE, dt)
        for name in CMP:
            kb.out(f"y_{name}", kb.op(name, a, b))
        out.append(kb)
    kb = KB("logic")
    p, q = kb.tile("p", *SHAPE, "bool"), kb.tile("q", *SHAPE, "bool")
    x, y = kb.tile("x", *SHAPE, "f32"), kb.tile("y", *SHAPE, "f32")
    kb.out("o_and", kb.op("and", p, q))
    kb.out("o_or", kb.op("or", p, q))
    kb.out("o_not", kb.op("not", p))
    kb.out("o_eqb", kb.op("eq", p, q))
    kb.out("o_where", kb.op("where", p, kb.op("exp", x), kb.op("div", x, y)))
    kb.out("o_where_s", kb.op("where", kb.op("gt", x, kb.lit(0.0)), x, kb.lit(-1.5)))
    ii = kb.tile("ii", *SHAPE, "i32")
    kb.out("o_where_i", kb.op("where", p, ii, kb.lit(7, "i32")))
    out.append(kb)
    return out


@kernel
def _casts():
    out = []
    for src in ALL:
        for op in ("cast", "convert"):
            kb = KB(f"{op}_{src}")
            x = kb.tile("x", 4, 32, src)
            for dst in ALL:
                if dst != src:
                    kb.out(f"y_{dst}", kb.op(op, x, dtype=dst))
            out.append(kb)
            if src in ("bool", "u64", "i64", "bf16", "f16", "u8"):
                break  # convert is the same code as cast; both are checked on the others
    return out


RED = ("rowsum", "rowmax", "rowmin", "rowmean", "colsum", "colmax", "colmin", "colmean")


@kernel
def _reductions():
    out = []
    for dt in ("f32", "f16", "bf16", "f64", "i32", "u8", "i64"):
        kb = KB(f"red_{dt}")
        x = kb.tile("x", 5, 37, dt)
        for name in RED:
            if name.endswith("mean") and dt not in FLOATS:
                continue
            shape = (5, 1) if name.startswith("row") else (1, 37)
            kb.out(f"y_{name}", kb.op(name, x, shape=shape))
        out.append(kb)
    return out


@kernel
def _broadcasting():
    kb = KB("bcast")
    x = kb.tile("x", 6, 10, "f32")
    r = kb.tile("r", 6, 1, "f32")
    c = kb.tile("c", 1, 10, "f32")
    one = kb.tile("one", 1, 1, "f32")
    s = kb.scalar("s", "f32")
    kb.out("y_r", kb.op("sub", x, r))
    kb.out("y_c", kb.op("div", c, x))
    kb.out("y_rc", kb.op("mul", r, c))  # [6,1] * [1,10] -> [6,10]
    kb.out("y_one", kb.op("add", x, one))
    kb.out("y_s", kb.op("mul", kb.op("add", x, s), kb.lit(2.0)))
    kb.out("y_full", kb.op("broadcast", kb.lit(3.25), shape=(6, 10)))
    kb.out("y_bc", kb.op("broadcast", c, shape=(6, 10)))
    kb.tile("y_rstore", 6, 10, "f32", "Out")
    kb.store("y_rstore", kb.op("exp", r))  # a [6,1] value stored into [6,10]
    kb.tile("y_sstore", 6, 10, "f16", "Out")
    kb.store("y_sstore", kb.op("mul", s, s))  # a scalar stored into an f16 tile
    rows, cols = kb.add("iota_row", (), (6, 10), "i32"), kb.add("iota_col", (), (6, 10), "i32")
    kb.out("y_iota", kb.op("add", rows, kb.op("mul", cols, kb.lit(100, "i32"))))
    return kb


@kernel
def _scalars():
    kb = KB("scalars")
    x = kb.tile("x", 2, 8, "f32")
    names = {}
    for dt in ("f16", "bf16", "f64", "i8", "u16", "i64", "bool"):
        names[dt] = kb.scalar(f"s_{dt}", dt)
    for dt in ("f16", "bf16", "f64", "i8", "u16", "i64"):
        kb.out(f"y_{dt}", kb.op("broadcast", names[dt], shape=(2, 8)))
    kb.out("y_bool", kb.op("where", names["bool"], x, kb.op("neg", x)))
    e = kb.scalar("e", "f32")
    kb.out("y_pow_s", kb.op("pow", kb.op("abs", x), e))
    kb.out("y_pow_2", kb.op("pow", x, kb.lit(2.0)))
    kb.out("y_pow_h", kb.op("pow", kb.op("abs", x), kb.lit(0.5)))
    kb.out("y_pow_m1", kb.op("pow", x, kb.lit(-1)))
    kb.out("y_scalar_math", kb.op("add", x, kb.op("exp", kb.op("mul", e, kb.lit(0.5)))))
    return kb


@kernel
def _special():
    out = []
    for dt in ("f32", "f16", "f64"):
        kb = KB(f"softmax_{dt}")
        x = kb.tile("x", 7, 33, dt)
        kb.out("y", kb.op("softmax", x))
        out.append(kb)
    kb = KB("matmul")
    a, b = kb.tile("a", 5, 7, "f32"), kb.tile("b", 7, 9, "f32")
    acc = kb.tile("acc", 5, 9, "f32")
    a16, b8 = kb.tile("a16", 5, 7, "f16"), kb.tile("b8", 7, 9, "i8")
    kb.out("y", kb.op("matmul", a, b, shape=(5, 9)))
    kb.out("y_acc", kb.op("matmul", a, b, acc, shape=(5, 9)))
    kb.out("y_mixed", kb.op("matmul", a16, b8, shape=(5, 9), dtype="f32"))
    # matmul of computed values and of a transposed view, feeding elementwise work
    t = kb.op("transpose", b, shape=(9, 7))
    tt = kb.op("transpose", t, shape=(7, 9))
    kb.out("y_chain", kb.op("exp", kb.op("matmul", kb.op("mul", a, a), tt, shape=(5, 9))))
    out.append(kb)
    # register-blocked matmuls: rows % 6, cols % 16 and K remainders
    kb = KB("matmul_blocked")
    a, b = kb.tile("a", 13, 37, "f32"), kb.tile("b", 37, 29, "f32")
    acc = kb.tile("acc", 13, 29, "f32")
    a16, bb = kb.tile("a16", 13, 37, "f16"), kb.tile("bb", 37, 29, "bf16")
    kb.out("y", kb.op("matmul", a, b, shape=(13, 29)))
    kb.out("y_acc", kb.op("matmul", a, b, acc, shape=(13, 29)))
    kb.out("y_half", kb.op("matmul", a16, bb, shape=(13, 29), dtype="f32"))
    kb.out("y_half_acc", kb.op("matmul", a16, bb, acc, shape=(13, 29), dtype="f32"), "f16")
    bt = kb.tile("bt", 29, 37, "f32")
    kb.out("y_bt", kb.op("matmul", kb.op("mul", a, a), kb.op("transpose", bt, shape=(37, 29)),
                         shape=(13, 29)))
    out.append(kb)
    kb = KB("matmul_chunked")  # K longer than one chunk: A read in place, and packed
    a, b = kb.tile("a", 8, 300, "f32"), kb.tile("b", 300, 20, "f32")
    acc = kb.tile("acc", 8, 20, "f32")
    kb.out("y", kb.op("matmul", a, b, shape=(8, 20)))
    kb.out("y_acc", kb.op("matmul", a, b, acc, shape=(8, 20)))
    a16, b2 = kb.tile("a16", 64, 200, "f16"), kb.tile("b2", 200, 20, "f32")
    kb.out("y_half", kb.op("matmul", a16, b2, shape=(64, 20), dtype="f32"))
    out.append(kb)
    kb = KB("matmul_inout")  # the gemm example's kernel (c = c + a @ b) on 16^3 tiles
    a, b = kb.tile("a", 16, 16, "f32"), kb.tile("b", 16, 16, "f32")
    c = kb.tile("c", 16, 16, "f32", "InOut")
    kb.store("c", kb.op("matmul", a, b, c, shape=(16, 16)))
    out.append(kb)
    kb = KB("views")
    x = kb.tile("x", 4, 10, "f32")
    y = kb.tile("y", 4, 10, "i32")
    kb.out("y_t", kb.op("transpose", x, shape=(10, 4)))
    ev = kb.op("slice_even", x, shape=(4, 5))
    od = kb.op("slice_odd", x, shape=(4, 5))
    kb.out("y_even", ev)
    kb.out("y_odd", od)
    kb.out("y_inter", kb.op("interleave", od, ev, shape=(4, 10)))
    kb.out("y_inter_i", kb.op("interleave", kb.op("slice_odd", y, shape=(4, 5)),
                              kb.op("slice_even", y, shape=(4, 5)), shape=(4, 10)))
    # a view of a computed value, reduced
    ex = kb.op("transpose", kb.op("exp", x), shape=(10, 4))
    kb.out("y_tsum", kb.op("rowsum", ex, shape=(10, 1)))
    out.append(kb)
    return out


SHAPES = [(3, 5), (1, 1), (7, 129), (16, 128), (2, 17), (1, 40), (33, 1)]


@kernel
def _fused():
    out = []
    for r, c in SHAPES:
        kb = KB(f"fused_{r}x{c}")
        x = kb.tile("x", r, c, "f32")
        w = kb.tile("w", 1, c, "f16")
        eps = kb.scalar("eps", "f32")
        # RMSNorm, softmax, SiLU * y and column statistics in one kernel
        ms = kb.op("rowmean", kb.op("mul", x, x), shape=(r, 1))
        w32 = kb.op("convert", w, dtype="f32")
        kb.out("y_norm", kb.op("mul", kb.op("mul", x, kb.op("rsqrt", kb.op("add", ms, eps))), w32))
        kb.out("y_soft", kb.op("softmax", x), dtype="bf16")
        kb.out("y_silu", kb.op("mul", kb.op("silu", x), w32))
        kb.out("y_cmax", kb.op("colmax", kb.op("abs", x), shape=(1, c)))
        kb.out("y_rmin", kb.op("rowmin", x, shape=(r, 1)))
        out.append(kb)
    return out


@kernel
def _entry_values():
    out = []
    # flash-attention style running statistics: stores read entry values of l and m
    kb = KB("online")
    x = kb.tile("x", 4, 16, "f32")
    lsum = kb.tile("l", 4, 1, "f32", "InOut")
    m = kb.tile("m", 4, 1, "f32", "InOut")
    acc = kb.tile("acc", 4, 16, "f32", "InOut")
    m_new = kb.op("maximum", m, kb.op("rowmax", x, shape=(4, 1)))
    alpha = kb.op("exp", kb.op("sub", m, m_new))
    p = kb.op("exp", kb.op("sub", x, m_new))
    kb.store("l", kb.op("add", kb.op("mul", lsum, alpha), kb.op("rowsum", p, shape=(4, 1))))
    kb.store("m", m_new)
    kb.store("acc", kb.op("add", kb.op("mul", acc, alpha), p))
    out.append(kb)
    kb = KB("swap")
    a = kb.tile("a", 3, 5, "i32", "InOut")
    b = kb.tile("b", 3, 5, "i32", "InOut")
    kb.store("a", b)
    kb.store("b", a)
    out.append(kb)
    kb = KB("inplace")  # an InOut updated in the nest that reads it, plus a copy of its entry
    z = kb.tile("z", 6, 20, "f32", "InOut")
    kb.store("z", kb.op("add", kb.op("mul", z, kb.lit(2.0)), kb.lit(1.0)))
    kb.out("zin", kb.op("rowsum", z, shape=(6, 1)))
    out.append(kb)
    kb = KB("alias")  # In and Out bound to overlapping memory by the caller
    x = kb.tile("x", 4, 12, "f32")
    kb.out("y", kb.op("sub", x, kb.op("rowmean", x, shape=(4, 1))))
    out.append(kb)
    return out


@kernel
def _names():
    # kernel names that would collide with generated helper names under a naive scheme
    out = []
    for n, name in enumerate(("cpy", "cpy_body", "b_cpy", "kb_cpy")):
        kb = KB(name)
        x = kb.tile("x", 1, 3, "i32")
        kb.out("y", kb.op("add", x, kb.lit(n, "i32")))
        out.append(kb)
    return out


BIG = (1000, 1000)


@kernel
def _accuracy():
    kb = KB("mathacc")
    x = kb.tile("x", *BIG, "f32")
    kb.out("y_exp", kb.op("exp", x))
    kb.out("y_log", kb.op("log", x))
    kb.out("y_tanh", kb.op("tanh", x))
    k2 = KB("halfconv")
    h = k2.tile("h", 256, 256, "f16")
    f = k2.tile("f", 256, 256, "f32")
    d = k2.tile("d", 256, 256, "f64")
    k2.out("h2f", k2.op("convert", h, dtype="f32"))
    k2.out("f2h", k2.op("convert", f, dtype="f16"))
    k2.out("f2b", k2.op("convert", f, dtype="bf16"))
    k2.tile("f2h_store", 256, 256, "f16", "Out")
    k2.store("f2h_store", f)  # rounding by the store itself
    k2.out("d2h", k2.op("convert", d, dtype="f16"))
    k2.out("d2b", k2.op("convert", d, dtype="bf16"))
    k3 = KB("heap")  # temporaries beyond the stack limit: one malloc'd block per call
    x = k3.tile("x", 128, 160, "f32")
    s = k3.op("softmax", x)
    k3.out("y", k3.op("add", s, k3.op("rowsum", k3.op("mul", s, s), shape=(128, 1))))
    return [kb, k2, k3]


EXTERN_BODY = """
    for (int64_t i = 0; i < y.rows; ++i)
        for (int64_t j = 0; j < y.cols; ++j) {
            float v = x.data[i * x.stride + j] * scale + wsp_f16_to_f32(h.data[i * h.stride + j]);
            y.data[i * y.stride + j] = flag ? v : -v;
            c.data[i * c.stride + j] += n;
            hb.data[i * hb.stride + j] = wsp_f32_to_bf16(v);
            h2.data[i * h2.stride + j] = wsp_f32_to_f16(wsp_bf16_to_f32(wsp_f32_to_bf16(v)));
        }
"""


@kernel
def _extern():
    tiles = [("x", "f32", "In"), ("h", "f16", "In"), ("y", "f32", "Out"), ("c", "i32", "InOut"),
             ("hb", "bf16", "Out"), ("h2", "f16", "Out")]
    params = tuple(N.KParam(n, "tile", dt, mode, 3, 7) for n, dt, mode in tiles) + (
        N.KParam("scale", "scalar", "f32"), N.KParam("n", "scalar", "i32"),
        N.KParam("flag", "scalar", "bool"))
    from ptowsp.spans import Span

    text = EXTERN_BODY
    span = Span("ext.wsp", 10, 1, 10 + text.count("\n"), 4)
    return N.Kernel("ext_k", "ext_k", params, (), (), text, (), span)


# ---------------------------------------------------------------------------------------------
# Build and run


def build_shared(c_source: str, workdir: Path) -> Path:
    """Compile one translation unit to a shared object (not a library API: build.py is)."""
    src = Path(workdir) / "kernels.c"
    src.write_text(c_source)
    so = Path(workdir) / "kernels.so"
    # WSPC_TEST_CFLAGS adds flags, e.g. "-fsanitize=undefined -fno-sanitize-recover" (run python
    # with LD_PRELOAD=$(cc -print-file-name=libubsan.so))
    extra = os.environ.get("WSPC_TEST_CFLAGS", "").split()
    cmd = ["cc", "-std=c11", "-O3", "-march=native", "-fPIC", "-shared", "-Wall", "-Werror",
           "-Wno-unused-function", *extra, "-I", str(RUNTIME_H.parent), str(src), "-o", str(so),
           "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[:6000]
    return so


def _cdef() -> str:
    text = RUNTIME_H.read_text()
    return text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")]


class Lib:
    """Kernels compiled into one or more shared objects, callable by kernel name."""

    def __init__(self, kernels: dict[str, N.Kernel], parts: list[tuple[list[str], Path]]):
        import cffi

        self.kernels = kernels
        self.ffi = cffi.FFI()
        self.ffi.cdef(_cdef())
        self.ffi.cdef("\n".join(K.emit_kernel(k).declaration for k in kernels.values()))
        self.lib_of = {}
        for names, so in parts:
            lib = self.ffi.dlopen(str(so))
            self.lib_of.update({n: lib for n in names})

    def call(self, name: str, tiles: dict, scalars: dict = None) -> int:
        k = self.kernels[name]
        ffi = self.ffi
        tps = [p for p in k.params if p.kind == "tile"]
        sps = [p for p in k.params if p.kind == "scalar"]
        ts = ffi.new("wsp_tile[]", max(1, len(tps)))
        for t, p in enumerate(tps):
            a = tiles[p.name]
            assert a.shape == (p.rows, p.cols) and a.dtype == NP[p.dtype], (p, a.shape, a.dtype)
            ts[t].data = ffi.cast("void *", a.ctypes.data)
            ts[t].rows, ts[t].cols = p.rows, p.cols
            ts[t].stride = a.strides[0] // a.itemsize
            ts[t].col_stride = a.strides[1] // a.itemsize
        ss = ffi.new("wsp_scalar[]", max(1, len(sps)))
        for s, p in enumerate(sps):
            v = (scalars or {})[p.name]
            if p.dtype in FLOATS:
                ss[s].f = float(v)
            else:
                ss[s].i = int(v)
        return getattr(self.lib_of[name], K.kernel_symbol(k))(ts, ss)

    def run(self, name: str, scalars: dict = None, **inputs) -> dict:
        """Run with fresh outputs (filled with garbage); returns every tile by name."""
        k = self.kernels[name]
        tiles = dict(inputs)
        for p in k.params:
            if p.kind == "tile" and p.name not in tiles:
                garbage = np.full((p.rows, p.cols, np.dtype(NP[p.dtype]).itemsize), 0x5A, np.uint8)
                tiles[p.name] = garbage.view(NP[p.dtype])[..., 0] if p.dtype != "bool" else \
                    np.zeros((p.rows, p.cols), np.bool_)
        assert self.call(name, tiles, scalars) == 0
        return tiles


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Lib:
    """Every kernel of this module, in two translation units compiled side by side."""
    from concurrent.futures import ThreadPoolExecutor

    groups: list[list[str]] = [[], []]
    for family in sorted(FAMILIES, key=len, reverse=True):
        min(groups, key=len).extend(family)
    dirs = [tmp_path_factory.mktemp(f"cpu_kernels{g}") for g in range(len(groups))]
    srcs = [K.emit_kernels([KERNELS[n] for n in group]) for group in groups]
    with ThreadPoolExecutor(len(groups)) as pool:
        sos = list(pool.map(build_shared, srcs, dirs))
    return Lib(KERNELS, list(zip(groups, sos)))


# ---------------------------------------------------------------------------------------------
# Reference helpers (NumPy / Python, independent of the generator)


def bf16_bits(f32) -> np.ndarray:
    """f32 -> bf16 bits, round to nearest even, NaN kept quiet (bit manipulation)."""
    f32 = np.asarray(f32, np.float32)
    u = f32.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def bf16_f32(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_f32(a, dt) -> np.ndarray:
    """The f32 (or f64) value of an array of dtype dt."""
    if dt == "bf16":
        return bf16_f32(a)
    if dt == "f64":
        return a
    return a.astype(np.float32)


def round_to(v32, dt):
    """A float result rounded to dt's memory form."""
    if dt == "bf16":
        return bf16_bits(v32)
    return np.asarray(v32).astype(NP[dt])


def same(y, ref):
    """Bitwise-equal values, NaN equal to NaN."""
    y, ref = np.asarray(y), np.asarray(ref)
    assert y.dtype == ref.dtype, (y.dtype, ref.dtype)
    if y.dtype.kind == "f":
        np.testing.assert_array_equal(y, ref)
    else:
        assert np.array_equal(y, ref), (y, ref)


def rand(dt, shape, rng, special=True):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in INTS:
        lo, hi = LIMITS[dt]
        a = rng.integers(lo, hi, size=shape, dtype=NP[dt], endpoint=True)
        flat = a.reshape(-1)
        edge = [lo, hi, 0, 1, -1 if lo < 0 else 2, lo + 1, hi - 1, 3, 7][: flat.size]
        flat[: len(edge)] = np.array(edge, dtype=object).astype(NP[dt])
        return a
    v = rng.standard_normal(shape) * 3
    if special:
        flat = v.reshape(-1)
        sp = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 7e4, -1e5, 0.5, 2.5, 1e-8]
        flat[: len(sp)] = sp[: flat.size]
    if dt == "bf16":
        return bf16_bits(v.astype(np.float32))
    return v.astype(NP[dt])


def ulp_of(ref, dt) -> np.ndarray:
    """The spacing of dt at |ref| (denormal spacing at least)."""
    ref = np.abs(np.asarray(ref, np.float64))
    mant, emin = {"f16": (10, -14), "bf16": (7, -126), "f32": (23, -126), "f64": (52, -1022)}[dt]
    e = np.floor(np.log2(np.where(ref > 0, ref, 1.0)))
    e = np.maximum(np.where(ref > 0, e, emin), emin)
    return 2.0 ** (e - mant)


def close_ulp(y, ref, dt, n, atol=0.0, what=""):
    """y (memory form of dt) within n ulps of dt (or atol) of the float64 reference, NaN and
    inf where the reference has them; returns the largest error in ulps."""
    yv = to_f32(y, dt).astype(np.float64)
    ref = np.asarray(ref, np.float64)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(yv), nan), (yv[np.isnan(yv) != nan], ref[np.isnan(yv) != nan])
    big = {"f16": 65504.0, "bf16": BF16_MAX, "f32": float(np.finfo(np.float32).max),
           "f64": float(np.finfo(np.float64).max)}[dt]
    mant = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}[dt]
    with np.errstate(over="ignore"):
        inf = ~nan & (np.isinf(ref) | (np.abs(ref) >= big * (1 + 2.0 ** -(mant + 1))))
    fin = ~nan & ~inf & np.isfinite(yv)
    diff = np.abs(yv[fin] - ref[fin])
    err = np.where(diff <= atol, 0.0, diff / ulp_of(ref[fin], dt))
    n = np.broadcast_to(np.asarray(n, np.float64), ref.shape)[fin]
    bad = err > n
    assert not bad.any(), (what, f"{err[bad].max()} ulp > {n[bad][np.argmax(err[bad])]}",
                           yv[fin][bad][:5], ref[fin][bad][:5])
    worst = float(err.max()) if err.size else 0.0
    assert np.all(np.isinf(yv[inf]) | (np.abs(yv[inf]) >= big)), "overflow expected"
    rest = ~nan & ~inf & ~np.isfinite(yv)
    assert not rest.any(), (yv[rest], ref[rest])
    return worst


def wrap(v: int, dt: str) -> int:
    lo, hi = LIMITS[dt]
    return (v - lo) % (hi - lo + 1) + lo


def py_floordiv(a: int, b: int) -> int:
    return 0 if b == 0 else a // b


# ---------------------------------------------------------------------------------------------
# Elementwise


@pytest.mark.parametrize("dt", FLOATS)
def test_binary_float(lib, dt):
    rng = np.random.default_rng(1)
    a, b = rand(dt, SHAPE, rng), rand(dt, SHAPE, rng)
    b.reshape(-1)[20:24] = a.reshape(-1)[20:24]  # equal operands (max/min of equals, x - x)
    out = lib.run(f"bin_{dt}", a=a, b=b)
    fa, fb = to_f32(a, dt), to_f32(b, dt)
    with np.errstate(all="ignore"):
        refs = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb, "div": fa / fb,
                "maximum": np.maximum(fa, fb), "minimum": np.minimum(fa, fb)}
    for name, ref in refs.items():
        same(out[f"y_{name}"], round_to(ref, dt))


@pytest.mark.parametrize("dt", INTS)
def test_binary_int_wraps_and_floors(lib, dt):
    rng = np.random.default_rng(2)
    a, b = rand(dt, SHAPE, rng), rand(dt, SHAPE, rng)
    lo, hi = LIMITS[dt]
    # the interesting pairs: overflow, MIN / -1, division by zero, negative floor division
    pairs = [(hi, 1), (lo, -1), (lo, lo), (hi, hi), (7, 0), (-7, 2), (7, -2), (-7, -2), (0, 0),
             (lo, 2), (hi, -3)]
    for n, (x, y) in enumerate(pairs):
        a.reshape(-1)[n] = wrap(x, dt)
        b.reshape(-1)[n] = wrap(y, dt)
    out = lib.run(f"bin_{dt}", a=a, b=b)
    pa, pb = a.astype(object).reshape(-1), b.astype(object).reshape(-1)
    refs = {"add": [wrap(x + y, dt) for x, y in zip(pa, pb)],
            "sub": [wrap(x - y, dt) for x, y in zip(pa, pb)],
            "mul": [wrap(x * y, dt) for x, y in zip(pa, pb)],
            "div": [wrap(py_floordiv(x, y), dt) for x, y in zip(pa, pb)],
            "maximum": [max(x, y) for x, y in zip(pa, pb)],
            "minimum": [min(x, y) for x, y in zip(pa, pb)]}
    for name, ref in refs.items():
        same(out[f"y_{name}"], np.array(ref, dtype=object).astype(NP[dt]).reshape(SHAPE))


def unary_ref(name, x):
    """float64 reference of a unary function."""
    with np.errstate(all="ignore"):
        if name == "gelu":
            # 0.5 x (1 + tanh(u)) == x sigmoid(2u): the sigmoid form is accurate for x << 0
            u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
            r = x / (1 + np.exp(-2 * u))
            return np.where(x == -np.inf, -0.0, r)
        if name == "silu":
            return np.where(x == -np.inf, -0.0, x / (1 + np.exp(-x)))
        return {
            "neg": lambda: -x, "abs": lambda: np.abs(x), "exp": lambda: np.exp(x),
            "log": lambda: np.log(x), "sqrt": lambda: np.sqrt(x),
            "rsqrt": lambda: 1 / np.sqrt(x), "tanh": lambda: np.tanh(x),
            "sigmoid": lambda: 1 / (1 + np.exp(-x)), "sin": lambda: np.sin(x),
            "cos": lambda: np.cos(x), "relu": lambda: np.where(np.isnan(x), x, np.maximum(x, 0)),
        }[name]()


# Error bounds in ulps of the result type. f16/bf16 results are within one ulp of the target
# type (the f32 value may sit on the other side of a rounding boundary).
ULP_F32 = {"neg": 0, "abs": 0, "exp": 1.5, "log": 1.5, "sqrt": 0.5, "rsqrt": 1.5, "tanh": 2.5,
           "sigmoid": 2.5, "sin": 1, "cos": 1, "relu": 0, "gelu": 4, "silu": 3.5}


def unary_ulps(name, dt, x):
    if name in ("neg", "abs", "relu"):
        return 0
    if dt in ("f16", "bf16"):
        return 1
    n = ULP_F32[name] if dt == "f32" else 2
    if name == "gelu":
        # u = sqrt(2/pi)(x + 0.044715 x^3) is rounded in the target type before sigmoid(2u):
        # for x < 0 that error is multiplied by 2|u| (the problem's condition number)
        with np.errstate(all="ignore"):
            u = np.abs(0.7978845608028654 * (x + 0.044715 * x**3))
        return n + np.where(x < 0, 6 * np.nan_to_num(u, posinf=1e300), 0)
    return n


def unary_atol(name, dt):
    # results below the smallest normal number carry the subnormal spacing's error
    return {"f32": 2.0**-126, "f64": 2.0**-1022}.get(dt, 0.0) if name in ("gelu", "silu") else 0.0


@pytest.mark.parametrize("dt", FLOATS)
def test_unary_float(lib, dt):
    rng = np.random.default_rng(3)
    x = rand(dt, SHAPE, rng)
    out = lib.run(f"un_{dt}", x=x)
    fx = to_f32(x, dt).astype(np.float64)
    for name in FLOAT_UNARY:
        close_ulp(out[f"y_{name}"], unary_ref(name, fx), dt, unary_ulps(name, dt, fx),
                  unary_atol(name, dt), what=name)


@pytest.mark.parametrize("dt", INTS)
def test_unary_int(lib, dt):
    rng = np.random.default_rng(4)
    x = rand(dt, SHAPE, rng)
    out = lib.run(f"unint_{dt}", x=x)
    px = x.astype(object).reshape(-1)
    refs = {"neg": [wrap(-v, dt) for v in px], "abs": [wrap(abs(v), dt) for v in px],
            "relu": [max(v, 0) for v in px]}
    for name, ref in refs.items():
        same(out[f"y_{name}"], np.array(ref, dtype=object).astype(NP[dt]).reshape(SHAPE))


@pytest.mark.parametrize("dt", ("f32", "i32", "u8", "f16"))
def test_comparisons(lib, dt):
    rng = np.random.default_rng(5)
    a, b = rand(dt, SHAPE, rng), rand(dt, SHAPE, rng)
    b.reshape(-1)[30:40] = a.reshape(-1)[30:40]
    out = lib.run(f"cmp_{dt}", a=a, b=b)
    ops = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}
    for name, f in ops.items():
        same(out[f"y_{name}"], f(a, b))


def test_logic_and_where(lib):
    rng = np.random.default_rng(6)
    p, q = rand("bool", SHAPE, rng), rand("bool", SHAPE, rng)
    x, y = rand("f32", SHAPE, rng), rand("f32", SHAPE, rng)
    ii = rand("i32", SHAPE, rng)
    # a bool tile holding 2 (not 0/1) still reads as true
    p_raw = p.view(np.uint8).copy()
    p_raw.reshape(-1)[:3] = 2
    out = lib.run("logic", p=p_raw.view(np.bool_), q=q, x=x, y=y, ii=ii)
    p = p_raw != 0
    same(out["o_and"], p & q)
    same(out["o_or"], p | q)
    same(out["o_not"], ~p)
    same(out["o_eqb"], p == q)
    with np.errstate(all="ignore"):
        close_ulp(out["o_where"], np.where(p, np.exp(x.astype(np.float64)), x / y), "f32", 1.5)
    same(out["o_where_s"], np.where(x > 0, x, np.float32(-1.5)))
    same(out["o_where_i"], np.where(p, ii, np.int32(7)))
    assert set(np.unique(out["o_not"].view(np.uint8))) <= {0, 1}


# ---------------------------------------------------------------------------------------------
# Conversions


def _round_binary(x: Fraction, mant: int, emin: int, emax_val: float) -> float:
    """x rounded to a binary float with `mant` fraction bits (RNE), subnormals below 2^emin."""
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    ax = abs(x)
    e = math.frexp(float(ax))[1] - 1  # floor(log2(ax)), up to the corrections below
    while Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    q = Fraction(2) ** (max(e, emin) - mant)
    r = round(ax / q) * q  # round() of a Fraction ties to even
    if r > emax_val:  # rounded beyond the largest finite value
        return sign * math.inf
    return sign * float(r)


def ref_cast(v, src: str, dst: str):
    """One element's cast (Python values in, Python value out)."""
    if src == "bool":
        v = int(bool(v))
    if dst == "bool":
        return bool(v != 0) if not (isinstance(v, float) and math.isnan(v)) else True
    if dst in INTS:
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            if math.isinf(v):
                return LIMITS[dst][1] if v > 0 else LIMITS[dst][0]
            t = int(math.trunc(v))
            return min(max(t, LIMITS[dst][0]), LIMITS[dst][1])
        return wrap(int(v), dst)
    # float destination
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return v
    x = Fraction(v)
    if dst == "f64":
        return float(x)
    if dst == "f32":
        return _round_binary(x, 23, -126, float(np.finfo(np.float32).max))
    if dst == "f16":
        return _round_binary(x, 10, -14, 65504.0)
    return _round_binary(x, 7, -126, BF16_MAX)


def _float_of(a, dt):
    return [float(v) for v in to_f32(a, dt).reshape(-1)]


@pytest.mark.parametrize("src", ALL)
def test_casts(lib, src):
    rng = np.random.default_rng(7)
    x = rand(src, (4, 32), rng)
    if src in FLOATS:
        extra = [1e10, -1e10, 3e9, -3e9, 2.0**31, -(2.0**31), 2.0**63, 255.9, -0.9, 65535.5,
                 127.5, -128.9, 65519.0, 65520.0, 1.17e-38, 6e-8, 3e-8, 2.0**-24 * 1.5]
        flat = x.reshape(-1)
        vals = np.array(extra, np.float64)
        if src == "bf16":
            vals = bf16_bits(vals.astype(np.float32))
        else:
            with np.errstate(over="ignore"):
                vals = vals.astype(NP[src])
        flat[12:12 + len(extra)] = vals
    if src == "u64":
        x.reshape(-1)[12:16] = [2**64 - 1, 2**63 + 2**40 + 1, 2**53 + 1, 16777217]
    if src == "i64":
        x.reshape(-1)[12:16] = [2**53 + 1, -(2**53) - 1, 16777217, 2**24 + 2**16 + 1]
    for op in ("cast", "convert"):
        name = f"{op}_{src}"
        if name not in lib.kernels:
            continue
        out = lib.run(name, x=x)
        vals = _float_of(x, src) if src in FLOATS else [
            bool(v) if src == "bool" else int(v) for v in x.reshape(-1)]
        for dst in ALL:
            if dst == src:
                continue
            ref = [ref_cast(v, src, dst) for v in vals]
            y = out[f"y_{dst}"]
            if dst == "bf16":
                refa = bf16_bits(np.array(ref, np.float64).astype(np.float32))  # exact: ref is bf16
            elif dst in FLOATS:
                with np.errstate(over="ignore"):
                    refa = np.array(ref, np.float64).astype(NP[dst])
            else:
                refa = np.array(ref, dtype=object).astype(NP[dst])
            if dst == "bf16":
                np.testing.assert_array_equal(bf16_f32(y).reshape(-1), bf16_f32(refa),
                                              err_msg=f"{src}->{dst}")
            else:
                np.testing.assert_array_equal(y.reshape(-1), refa, err_msg=f"{src}->{dst}")


def test_half_conversions_exhaustive(lib):
    rng = np.random.default_rng(8)
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    f = rng.standard_normal((256, 256)).astype(np.float32) * np.float32(2.0) ** rng.integers(
        -30, 30, (256, 256)).astype(np.float32)
    # f16 rounding boundaries: halfway points and their neighbours, overflow, subnormals
    hv = np.arange(0, 0x7C00, 7, dtype=np.uint16).view(np.float16).astype(np.float32)
    mid = (hv[:-1].astype(np.float64) + np.diff(hv.astype(np.float64)) / 2).astype(np.float32)
    flat = f.reshape(-1)
    flat[: mid.size] = mid
    flat[mid.size: 2 * mid.size] = np.nextafter(mid, np.float32(np.inf))
    flat[-8:] = [np.nan, -np.inf, np.inf, 65519.996, 65520.0, -0.0, 2.0**-25, 2.0**-26 * 3]
    d = rng.standard_normal((256, 256)) * 2.0 ** rng.integers(-30, 20, (256, 256))
    dd = d.reshape(-1)
    # f64 values just off an f32 halfway point: rounding through f32 twice would be wrong here
    base = np.arange(1, 4097, dtype=np.float64) * 2.0**-8 + 1.0
    dd[: base.size] = base + 2.0**-12 + 2.0**-40  # bf16 halfway + tiny: must round up
    dd[base.size: 2 * base.size] = base + 2.0**-12 - 2.0**-40
    out = lib.run("halfconv", h=h, f=f, d=d)
    same(out["h2f"], h.astype(np.float32))
    same(out["f2h"], f.astype(np.float16))
    same(out["f2h_store"], f.astype(np.float16))
    np.testing.assert_array_equal(bf16_f32(out["f2b"]), bf16_f32(bf16_bits(f)))
    same(out["d2h"], d.astype(np.float16))  # NumPy rounds f64 -> f16 directly
    ref_b = [ref_cast(float(v), "f64", "bf16") for v in d.reshape(-1)[: 2 * base.size + 50]]
    np.testing.assert_array_equal(bf16_f32(out["d2b"]).reshape(-1)[: len(ref_b)],
                                  np.array(ref_b, np.float32))


# ---------------------------------------------------------------------------------------------
# Reductions, broadcasting, special primitives


@pytest.mark.parametrize("dt", ("f32", "f16", "bf16", "f64", "i32", "u8", "i64"))
def test_reductions(lib, dt):
    rng = np.random.default_rng(9)
    x = rand(dt, (5, 37), rng, special=False)
    if dt in FLOATS:
        x.reshape(-1)[40] = bf16_bits(np.float32([np.nan]))[0] if dt == "bf16" else np.nan
    out = lib.run(f"red_{dt}", x=x)
    if dt in FLOATS:
        v = to_f32(x, dt).astype(np.float64)
        for name in RED:
            ax = 1 if name.startswith("row") else 0
            f = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}[name[3:]]
            ref = f(v, axis=ax, keepdims=True)
            n = 0 if name[3:] in ("max", "min") else {"f64": 64, "f32": 64, "f16": 1,
                                                      "bf16": 1}[dt]
            if dt in ("f32", "f64") and name[3:] in ("sum", "mean"):
                # an f32/f64 sum is within n * eps * sum(|x|) of the exact one
                y = to_f32(out[f"y_{name}"], dt).astype(np.float64)
                scale = np.sum(np.abs(v), axis=ax, keepdims=True) / (37 if ax else 5) ** (
                    name.endswith("mean"))
                eps = np.finfo(NP[dt]).eps
                ok = np.isnan(ref) & np.isnan(y) | (np.abs(y - ref) <= 40 * eps * scale)
                assert ok.all(), (name, y, ref)
            elif dt in ("f16", "bf16") and name[3:] in ("sum", "mean"):
                y = to_f32(out[f"y_{name}"], dt).astype(np.float64)
                tol = 1.01 * ulp_of(ref, dt) + 1e-6 * np.abs(ref)
                ok = np.isnan(ref) & np.isnan(y) | (np.abs(y - ref) <= tol)
                assert ok.all(), (name, y, ref)
            else:
                close_ulp(out[f"y_{name}"], ref, dt, n)
    else:
        v = x.astype(object)
        for name in RED:
            if name.endswith("mean"):
                continue
            ax = 1 if name.startswith("row") else 0
            f = {"sum": lambda a: wrap(sum(a), dt), "max": max, "min": min}[name[3:]]
            cols = v if ax == 1 else v.T
            ref = np.array([f(list(r)) for r in cols], dtype=object).astype(NP[dt])
            same(out[f"y_{name}"].reshape(-1), ref)


def test_broadcasting_and_stores(lib):
    rng = np.random.default_rng(10)
    x = rand("f32", (6, 10), rng)
    r, c = rand("f32", (6, 1), rng, special=False), rand("f32", (1, 10), rng, special=False)
    one = np.array([[0.25]], np.float32)
    s = 1.7
    out = lib.run("bcast", scalars={"s": s}, x=x, r=r, c=c, one=one)
    s32 = np.float32(s)
    with np.errstate(all="ignore"):
        same(out["y_r"], x - r)
        same(out["y_c"], c / x)
        same(out["y_rc"], r * c)
        same(out["y_one"], x + one)
        same(out["y_s"], (x + s32) * np.float32(2))
    same(out["y_full"], np.full((6, 10), 3.25, np.float32))
    same(out["y_bc"], np.broadcast_to(c, (6, 10)))
    close_ulp(out["y_rstore"], np.broadcast_to(np.exp(r.astype(np.float64)), (6, 10)), "f32", 1.5)
    same(out["y_sstore"], np.full((6, 10), s32 * s32, np.float32).astype(np.float16))
    same(out["y_iota"], (np.arange(6)[:, None] + 100 * np.arange(10)[None, :]).astype(np.int32))


def test_scalar_params(lib):
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    sc = {"s_f16": 1.0 + 2**-11 + 2**-13, "s_bf16": 1.0 + 2**-8 + 2**-10, "s_f64": 1 / 3,
          "s_i8": 300, "s_u16": -1, "s_i64": -(2**62), "s_bool": 1, "e": 1.5}
    out = lib.run("scalars", scalars=sc, x=x)
    same(out["y_f16"], np.full((2, 8), sc["s_f16"]).astype(np.float16))  # direct f64 -> f16
    assert np.all(bf16_f32(out["y_bf16"]) == np.float32(1.0 + 2**-7))
    same(out["y_f64"], np.full((2, 8), 1 / 3))
    same(out["y_i8"], np.full((2, 8), 300 - 256, np.int8))
    same(out["y_u16"], np.full((2, 8), 65535, np.uint16))
    same(out["y_i64"], np.full((2, 8), -(2**62), np.int64))
    same(out["y_bool"], x)
    out0 = lib.run("scalars", scalars=dict(sc, s_bool=0), x=x)
    same(out0["y_bool"], -x)
    close_ulp(out["y_pow_s"], np.abs(x.astype(np.float64)) ** 1.5, "f32", 1)
    same(out["y_pow_2"], x * x)
    close_ulp(out["y_pow_h"], np.sqrt(np.abs(x.astype(np.float64))), "f32", 1)
    with np.errstate(divide="ignore"):
        same(out["y_pow_m1"], np.float32(1) / x)
    close_ulp(out["y_scalar_math"], x + np.float32(np.exp(0.75)), "f32", 1)


@pytest.mark.parametrize("dt", ("f32", "f16", "f64"))
def test_softmax(lib, dt):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((7, 33)) * 20).astype(NP[dt])
    x[0, :] = 1000  # large equal values: max subtraction keeps them finite
    x[1, 3] = -np.inf
    out = lib.run(f"softmax_{dt}", x=x)
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    # x - max(x) is rounded in the compute type: the exp multiplies that error by |x - max|
    with np.errstate(invalid="ignore"):
        cond = np.nan_to_num(np.abs(v - v.max(axis=1, keepdims=True)), posinf=0)
    n = {"f32": 4 + cond, "f16": 1, "f64": 4 + cond}[dt]
    close_ulp(out["y"], ref, dt, n, what="softmax")


def test_matmul(lib):
    rng = np.random.default_rng(12)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 9)).astype(np.float32)
    acc = rng.standard_normal((5, 9)).astype(np.float32)
    a16 = rng.standard_normal((5, 7)).astype(np.float16)
    b8 = rng.integers(-128, 127, (7, 9), dtype=np.int8, endpoint=True)
    out = lib.run("matmul", a=a, b=b, acc=acc, a16=a16, b8=b8)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = dict(rtol=2e-6, atol=2e-6 * 7 * 4)
    np.testing.assert_allclose(out["y"], a64 @ b64, **tol)
    np.testing.assert_allclose(out["y_acc"], acc + a64 @ b64, **tol)
    np.testing.assert_allclose(out["y_mixed"], a16.astype(np.float64) @ b8.astype(np.float64),
                               rtol=2e-6, atol=1e-3)
    np.testing.assert_allclose(out["y_chain"], np.exp((a64 * a64) @ b64), rtol=1e-5)


def test_matmul_blocked(lib):
    rng = np.random.default_rng(21)
    a = rng.standard_normal((13, 37)).astype(np.float32)
    b = rng.standard_normal((37, 29)).astype(np.float32)
    acc = rng.standard_normal((13, 29)).astype(np.float32)
    a16 = rng.standard_normal((13, 37)).astype(np.float16)
    bb = bf16_bits(rng.standard_normal((37, 29)))
    bt = rng.standard_normal((29, 37)).astype(np.float32)
    out = lib.run("matmul_blocked", a=a, b=b, acc=acc, a16=a16, bb=bb, bt=bt)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = dict(rtol=2e-6, atol=2e-6 * 37 * 4)
    np.testing.assert_allclose(out["y"], a64 @ b64, **tol)
    np.testing.assert_allclose(out["y_acc"], acc + a64 @ b64, **tol)
    h = a16.astype(np.float64) @ bf16_f32(bb).astype(np.float64)
    np.testing.assert_allclose(out["y_half"], h, **tol)
    np.testing.assert_allclose(out["y_half_acc"].astype(np.float64), acc + h, rtol=1e-3,
                               atol=1e-2)
    np.testing.assert_allclose(out["y_bt"], (a64 * a64) @ bt.T.astype(np.float64), rtol=1e-5,
                               atol=1e-4)


def test_matmul_over_several_k_chunks(lib):
    """K = 300 runs in chunks of 256 (A read in place) and K = 200 in chunks of 124 (A packed
    from f16): partial sums carry over chunks, and `acc` is added once at the end."""
    rng = np.random.default_rng(23)
    a = rng.standard_normal((8, 300)).astype(np.float32)
    b = rng.standard_normal((300, 20)).astype(np.float32)
    acc = rng.standard_normal((8, 20)).astype(np.float32)
    a16 = rng.standard_normal((64, 200)).astype(np.float16)
    b2 = rng.standard_normal((200, 20)).astype(np.float32)
    out = lib.run("matmul_chunked", a=a, b=b, acc=acc, a16=a16, b2=b2)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tol = dict(rtol=2e-6, atol=2e-6 * 300 * 4)
    np.testing.assert_allclose(out["y"], a64 @ b64, **tol)
    np.testing.assert_allclose(out["y_acc"], acc + a64 @ b64, **tol)
    np.testing.assert_allclose(out["y_half"], a16.astype(np.float64) @ b2.astype(np.float64),
                               rtol=2e-6, atol=2e-6 * 200 * 4)


def test_matmul_blocked_strided(lib):
    """The gemm example's kernel on row-strided 16x16 tiles of 64-wide matrices, accumulating
    in place."""
    rng = np.random.default_rng(22)
    A = rng.standard_normal((64, 64)).astype(np.float32)
    B = rng.standard_normal((64, 64)).astype(np.float32)
    C = np.zeros((64, 64), np.float32)
    for i in range(4):
        for j in range(4):
            for k in range(4):
                t = (slice(i * 16, i * 16 + 16), slice(j * 16, j * 16 + 16))
                lib.run("matmul_inout", a=A[t[0], k * 16:k * 16 + 16],
                        b=B[k * 16:k * 16 + 16, t[1]], c=C[t])
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5,
                               atol=2e-6 * 64 * 4)


def test_views(lib):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((4, 10)).astype(np.float32)
    y = rng.integers(-100, 100, (4, 10), dtype=np.int32)
    out = lib.run("views", x=x, y=y)
    same(out["y_t"], x.T.copy())
    same(out["y_even"], x[:, 0::2].copy())
    same(out["y_odd"], x[:, 1::2].copy())
    inter = np.empty_like(x)
    inter[:, 0::2], inter[:, 1::2] = x[:, 1::2], x[:, 0::2]
    same(out["y_inter"], inter)
    inter_i = np.empty_like(y)
    inter_i[:, 0::2], inter_i[:, 1::2] = y[:, 1::2], y[:, 0::2]
    same(out["y_inter_i"], inter_i)
    np.testing.assert_allclose(out["y_tsum"][:, 0], np.exp(x.astype(np.float64)).sum(axis=0),
                               rtol=1e-6)


def fused_ref(x, w, eps):
    v = x.astype(np.float64)
    w = w.astype(np.float64)
    norm = v / np.sqrt((v * v).mean(axis=1, keepdims=True) + np.float32(eps)) * w
    e = np.exp(v - v.max(axis=1, keepdims=True))
    soft = e / e.sum(axis=1, keepdims=True)
    silu = v / (1 + np.exp(-v)) * w
    return norm, soft, silu, np.abs(v).max(axis=0, keepdims=True), v.min(axis=1, keepdims=True)


def check_fused(out, x, w, eps):
    norm, soft, silu, cmax, rmin = fused_ref(x, w, eps)
    np.testing.assert_allclose(out["y_norm"], norm, rtol=4e-6, atol=1e-30)
    np.testing.assert_allclose(bf16_f32(out["y_soft"]), soft, rtol=2 ** -8, atol=1e-30)
    np.testing.assert_allclose(out["y_silu"], silu, rtol=4e-6, atol=1e-37)
    same(out["y_cmax"], cmax.astype(np.float32))
    same(out["y_rmin"], rmin.astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_odd_shapes(lib, shape):
    r, c = shape
    rng = np.random.default_rng(r * 1000 + c)
    x = rng.standard_normal(shape).astype(np.float32) * 3
    w = rng.standard_normal((1, c)).astype(np.float16)
    out = lib.run(f"fused_{r}x{c}", scalars={"eps": 1e-6}, x=x, w=w)
    check_fused(out, x, w, 1e-6)


@pytest.mark.parametrize("shape", [(7, 129), (3, 5), (16, 128)], ids=["7x129", "3x5", "16x128"])
@pytest.mark.parametrize("how", ["row_strided", "col_strided", "outputs_strided"])
def test_strided_views(lib, shape, how):
    r, c = shape
    rng = np.random.default_rng(17)
    big = rng.standard_normal((3 * r + 2, 3 * c + 5)).astype(np.float32)
    w_big = rng.standard_normal((2, 2 * c)).astype(np.float16)
    if how == "row_strided":
        x, w = big[1:1 + 2 * r:2, 3:3 + c], w_big[:1, :c]
    else:
        x, w = big[1:1 + r, 2:2 + 3 * c:3], w_big[:1, ::2]  # col_stride 3 and 2
    assert x.shape == shape
    tiles = {"x": x, "w": w}
    canvases = {}
    k = lib.kernels[f"fused_{r}x{c}"]
    for p in k.params:
        if p.kind == "tile" and p.mode == "Out":
            if how == "outputs_strided":
                canvas = np.full((2 * p.rows + 1, 2 * p.cols + 1), 7, NP[p.dtype])
                where = np.s_[1::2, 1::2]
            else:
                canvas = np.full((p.rows + 2, p.cols + 3), 7, NP[p.dtype])
                where = np.s_[1:1 + p.rows, 1:1 + p.cols]
            tiles[p.name] = canvas[where]
            canvases[p.name] = (canvas, where)
    assert lib.call(k.name, tiles, {"eps": 1e-6}) == 0
    check_fused(tiles, x, w, 1e-6)
    for canvas, where in canvases.values():  # nothing outside the tiles was touched
        outside = np.ones(canvas.shape, bool)
        outside[where] = False
        assert np.all(canvas[outside] == 7)


# ---------------------------------------------------------------------------------------------
# Stores take effect as the kernel ends; aliasing


def test_stores_read_entry_values(lib):
    rng = np.random.default_rng(18)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    l0 = rng.random((4, 1)).astype(np.float32) + 1
    m0 = rng.standard_normal((4, 1)).astype(np.float32)
    acc0 = rng.standard_normal((4, 16)).astype(np.float32)
    lsum, m, acc = l0.copy(), m0.copy(), acc0.copy()
    assert lib.call("online", {"x": x, "l": lsum, "m": m, "acc": acc}) == 0
    v = x.astype(np.float64)
    m_new = np.maximum(m0, v.max(axis=1, keepdims=True))
    alpha = np.exp(m0 - m_new)
    p = np.exp(v - m_new)
    np.testing.assert_allclose(m, m_new.astype(np.float32))
    np.testing.assert_allclose(lsum, l0 * alpha + p.sum(axis=1, keepdims=True), rtol=3e-6)
    np.testing.assert_allclose(acc, acc0 * alpha + p, rtol=3e-6, atol=1e-6)

    a0 = rng.integers(-9, 9, (3, 5), dtype=np.int32)
    b0 = rng.integers(-9, 9, (3, 5), dtype=np.int32)
    a, b = a0.copy(), b0.copy()
    assert lib.call("swap", {"a": a, "b": b}) == 0
    same(a, b0)
    same(b, a0)

    z0 = rng.standard_normal((6, 20)).astype(np.float32)
    z, zin = z0.copy(), np.zeros((6, 1), np.float32)
    assert lib.call("inplace", {"z": z, "zin": zin}) == 0
    same(z, z0 * np.float32(2) + np.float32(1))
    np.testing.assert_allclose(zin[:, 0], z0.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_aliasing_in_and_out(lib):
    rng = np.random.default_rng(19)
    for shift in (0, 1, 13):
        buf = rng.standard_normal(4 * 12 + 13).astype(np.float32)
        x = buf[:48].reshape(4, 12)
        x0 = x.copy()
        y = buf[shift:shift + 48].reshape(4, 12)  # overlaps x (exactly when shift == 0)
        assert lib.call("alias", {"x": x, "y": y}) == 0
        ref = x0.astype(np.float64) - x0.astype(np.float64).mean(axis=1, keepdims=True)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# extern c


def test_extern_abi(lib):
    rng = np.random.default_rng(20)
    big = rng.standard_normal((3, 14)).astype(np.float32)
    x = big[:, ::2]  # col_stride 2: the body runs on a contiguous copy
    h = rng.standard_normal((3, 7)).astype(np.float16)
    c_big = np.arange(3 * 14, dtype=np.int32).reshape(3, 14)
    c = c_big[:, 1::2]  # a strided InOut is copied in and back out
    c0 = c.copy()
    tiles = {"x": x, "h": h, "y": np.zeros((3, 7), np.float32), "c": c,
             "hb": np.zeros((3, 7), np.uint16), "h2": np.zeros((3, 7), np.float16)}
    for flag in (1, 0):
        c[...] = c0
        assert lib.call("ext_k", tiles, {"scale": 0.5, "n": 5, "flag": flag}) == 0
        v = x * np.float32(0.5) + h.astype(np.float32)
        same(tiles["y"], v if flag else -v)
        same(c, c0 + 5)
        same(tiles["hb"], bf16_bits(v))
        same(tiles["h2"], bf16_f32(bf16_bits(v)).astype(np.float16))
    same(c_big[:, 0::2], np.arange(3 * 14, dtype=np.int32).reshape(3, 14)[:, 0::2])


def test_extern_line_directives():
    src = K.emit_kernels([KERNELS["ext_k"], KERNELS["bin_f32"]], filename="kernels.c")
    lines = src.split("\n")
    at = next(n for n, line in enumerate(lines) if line.startswith('#line') and "ext.wsp" in line)
    assert lines[at] == '#line 10 "ext.wsp"'  # the body's first line: span end minus its lines
    back = next(n for n, line in enumerate(lines)
                if line.startswith("#line") and "kernels.c" in line)
    assert lines[back] == f'#line {back + 2} "kernels.c"'


# ---------------------------------------------------------------------------------------------
# Accuracy of the vectorised math, and hypothesis over values


def test_math_accuracy(lib):
    rng = np.random.default_rng(21)
    n = BIG[0] * BIG[1]
    x = np.concatenate([
        rng.uniform(-104, 89, n // 2),
        rng.uniform(-1, 1, n // 8),
        rng.standard_normal(n // 8) * 1e-6,
        np.linspace(-103.97, -87.3, n // 16),  # subnormal results
        np.linspace(85, 88.7, n // 16),
    ]).astype(np.float32)
    x = np.concatenate([x, (2.0 ** rng.uniform(-149, 128, n - x.size)).astype(np.float32)])
    x[:8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72283, 88.72284, -1.0]
    x = x.reshape(BIG)
    out = lib.run("mathacc", x=x)
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        worst = {"exp": close_ulp(out["y_exp"], np.exp(v), "f32", 1.5),
                 "log": close_ulp(out["y_log"], np.log(v), "f32", 1.5),
                 "tanh": close_ulp(out["y_tanh"], np.tanh(v), "f32", 2.5)}
    print("max ulp error over 1e6 points:", worst)
    assert out["y_exp"][0, 0] == np.inf and out["y_exp"][0, 1] == 0.0
    assert np.isnan(out["y_exp"][0, 2]) and out["y_exp"][0, 3] == 1.0


floats32 = hnp.arrays(np.float32, SHAPE, elements=st.floats(width=32, allow_nan=True,
                                                               allow_infinity=True))


@FAST
@given(floats32)
def test_hypothesis_math(lib, x):
    out = lib.run("un_f32", x=x)
    v = x.astype(np.float64)
    for name in FLOAT_UNARY:
        close_ulp(out[f"y_{name}"], unary_ref(name, v), "f32", unary_ulps(name, "f32", v),
                  unary_atol(name, "f32"), what=name)


@FAST
@given(hnp.arrays(np.float32, (7, 129), elements=st.floats(-(2.0**59), 2.0**59, width=32)))
def test_hypothesis_fused(lib, x):
    w = np.linspace(-2, 2, 129).astype(np.float16).reshape(1, 129)
    out = lib.run("fused_7x129", scalars={"eps": 1e-6}, x=x, w=w)
    check_fused(out, x, w, 1e-6)


@FAST
@given(hnp.arrays(np.float32, (4, 32), elements=st.floats(width=32)),
       st.sampled_from(["i8", "u8", "i32", "u32", "i64", "u64"]))
def test_hypothesis_cast_saturates(lib, x, dst):
    out = lib.run("cast_f32", x=x)
    ref = [ref_cast(float(v), "f32", dst) for v in x.reshape(-1)]
    np.testing.assert_array_equal(out[f"y_{dst}"].reshape(-1),
                                  np.array(ref, dtype=object).astype(NP[dst]))


@FAST
@given(st.sampled_from(INTS), st.data())
def test_hypothesis_int_arith(lib, dt, data):
    lo, hi = LIMITS[dt]
    a = data.draw(hnp.arrays(NP[dt], SHAPE, elements=st.integers(lo, hi)))
    b = data.draw(hnp.arrays(NP[dt], SHAPE, elements=st.integers(lo, hi)))
    out = lib.run(f"bin_{dt}", a=a, b=b)
    pa, pb = a.astype(object).reshape(-1), b.astype(object).reshape(-1)
    mul = [wrap(x * y, dt) for x, y in zip(pa, pb)]
    div = [wrap(py_floordiv(x, y), dt) for x, y in zip(pa, pb)]
    same(out["y_mul"].reshape(-1), np.array(mul, dtype=object).astype(NP[dt]))
    same(out["y_div"].reshape(-1), np.array(div, dtype=object).astype(NP[dt]))


# ---------------------------------------------------------------------------------------------
# The emitted text


def test_emit_is_deterministic_and_mangled():
    ks = list(KERNELS.values())
    assert K.emit_kernels(ks) == K.emit_kernels(ks)
    k = KERNELS["bin_f32"]
    odd = N.Kernel("we-ird.name", "we-ird.name", k.params, k.ops, k.stores)
    kc = K.emit_kernel(odd)
    assert kc.symbol == "wsp_k_we_2d_ird_2e_name"
    assert kc.tiles == ("a", "b") + tuple(f"y_{n}" for n in BIN_OPS) and kc.scalars == ()
    assert kc.declaration.startswith("int wsp_k_we_2d_ird_2e_name(const wsp_tile *tiles")


def test_kernel_names_do_not_collide(lib):
    x = np.arange(3, dtype=np.int32).reshape(1, 3)
    for n, name in enumerate(("cpy", "cpy_body", "b_cpy", "kb_cpy")):
        same(lib.run(name, x=x)["y"], x + n)


def test_heap_temporaries(lib):
    rng = np.random.default_rng(22)
    x = rng.standard_normal((128, 160)).astype(np.float32)
    src = K.emit_kernel(KERNELS["heap"]).source
    assert "malloc(" in src and "free(wsp_arena)" in src
    out = lib.run("heap", x=x)
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out["y"], s + (s * s).sum(axis=1, keepdims=True), rtol=3e-6)


def test_extern_compile_error_points_into_the_wsp_file(tmp_path):
    from ptowsp.spans import Span

    body = "\n    y.data[0] = no_such_name;\n"
    k = N.Kernel("bad", "bad", (N.KParam("y", "tile", "f32", "Out", 1, 4),), (), (), body, (),
                 Span("dir/bad.wsp", 3, 1, 5, 4))  # `"""` opens on line 3, closes on line 5
    src = K.emit_kernels([k])
    (tmp_path / "kernels.c").write_text(src)
    res = subprocess.run(["cc", "-std=c11", "-c", "-I", str(RUNTIME_H.parent),
                          str(tmp_path / "kernels.c"), "-o", str(tmp_path / "k.o")],
                         capture_output=True, text=True)
    assert res.returncode != 0
    assert "dir/bad.wsp:4:17: error:" in res.stderr and "no_such_name" in res.stderr


def test_c_expression_printer():
    from ptowsp.backends import cexpr as C
    from ptowsp.dtypes import round_float

    a, b, c = C.E("a"), C.E("b"), C.E("c")
    assert C.to_c(C.binop("*", C.binop("+", a, b), c)) == "(a + b) * c"
    assert C.to_c(C.binop("-", a, C.binop("-", b, c))) == "a - (b - c)"
    assert C.to_c(C.binop("-", C.binop("-", a, b), c)) == "a - b - c"
    assert C.to_c(C.binop("&", C.binop("==", a, b), c)) == "(a == b) & c"  # -Wparentheses
    assert C.to_c(C.neg(C.float_lit(-1.5, "float"))) == "-(-1.5f)"
    assert C.to_c(C.cast("float", C.binop("+", a, b))) == "(float)(a + b)"
    assert C.to_c(C.cond(C.binop("<", a, b), a, C.cond(c, a, b))) == "a < b ? a : c ? a : b"
    assert C.to_c(C.imul(C.E("i"), 1)) == "i" and C.to_c(C.iadd(0, C.imul(0, "x"))) == "0"
    assert C.to_c(C.int_lit(-(2**63), "i64")) == "INT64_MIN"
    assert C.to_c(C.int_lit(2**64 - 1, "u64")) == "UINT64_C(18446744073709551615)"
    assert C.to_c(C.int_lit(300, "i8")) == "44"
    assert round_float(1e-6, "f32") == float(np.float32(1e-6)) and round_float(1e39, "f32") == math.inf
    assert round_float(65519.0, "f16") == 65504.0 and round_float(65520.0, "f16") == math.inf
    assert round_float(1.0 + 2**-8, "bf16") == 1.0 and round_float(1.0 + 3 * 2**-8, "bf16") == 1.0 + 2**-6
    assert C.to_c(C.float_lit(0.1, "double")) == "0.1"
    assert C.to_c(C.float_lit(round_float(0.1, "f32"), "float")) == "0.100000001f"
    assert C.c_ident("wsp_k_", "a.b") == "wsp_k_a_2e_b"


@pytest.mark.parametrize("seed", [0, 1])
def test_agrees_with_the_ref_interpreter(lib, seed):
    """Every tile kernel of this module against `backends/ref` (the IR's executable definition)
    on moderate random values: integers and bools exactly, floats within a few ulps."""
    from ptowsp.backends.ref import values as R
    from ptowsp.backends.ref.kernels import eval_kernel

    rng = np.random.default_rng(seed)
    for name, k in KERNELS.items():
        if k.extern_c is not None or name == "mathacc":
            continue
        tiles, values, scalars = {}, {}, {}
        for p in k.params:
            if p.kind == "tile" and p.mode != "Out":
                a = rand(p.dtype, (p.rows, p.cols), rng, special=False)
                if p.dtype in FLOATS:
                    v = np.clip(to_f32(a, p.dtype), -3, 3).astype(np.float32)
                    a = bf16_bits(v) if p.dtype == "bf16" else v.astype(NP[p.dtype])
                tiles[p.name] = a
                values[p.name] = R.to_compute(a, p.dtype)
            elif p.kind == "scalar":
                scalars[p.name] = 0.75 if p.dtype in FLOATS else 3
                values[p.name] = R.scalar_value(scalars[p.name], p.dtype)
        out = lib.run(name, scalars=scalars, **{n: a.copy() for n, a in tiles.items()})
        for pname, want in eval_kernel(k, values).items():
            dt = next(q.dtype for q in k.params if q.name == pname)
            got = R.to_compute(out[pname], dt)
            if dt in FLOATS:
                rtol = {"f16": 2.0**-10, "bf16": 2.0**-7}.get(dt, 1e-5)
                # a dot product of K terms (|x| <= 3) summed in another order: K ulps of 9 K
                kmax = max((k.ops[o.args[0]].shape[1] for o in k.ops if o.op == "matmul"),
                           default=0)
                atol = max(1e-6, kmax * 9 * kmax * 2.0**-24)
                ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
            else:
                ok = got == want
            assert ok.all(), (name, pname, got[~ok][:4], np.asarray(want)[~ok][:4])
