"""The CPU implementation of the Ascend C API (`ascendc_cpu/kernel_operator.h`) on its own,
against NumPy: each API function the AICore emitter uses, through `ascendc_cpu/selftest.cpp`
(one g++ run), so the shim is tested independently of the kernels that run on it.

What is checked, per function: IEEE results bit for bit (Add, Sub, Mul, Div, Adds, Muls,
Sqrt, Abs, Duplicate, Copy, DataCopy, DataCopyPad, Cast with its round modes, Compare's bit
order, Select), the documented non-IEEE choices (Max/Min/Maxs/Mins/Relu select `a > b ? a : b`
and so do not propagate NaN; ReduceSum adds in the A2 order: a binary tree per 256-byte repeat,
repeats in sequence), libm-backed math within a few ulp (Exp, Ln, Tanh, Sin, Cos, Power), the
UB layout DataCopyPad produces (rows padded to 32 bytes, padding unspecified unless isPad), and
that breaking a rule of the real API fails loudly with a message: UB capacity, 32-byte
alignment, pipe hazards without SetFlag/WaitFlag or PipeBarrier, partial Compare repeats,
rejected round modes, queue misuse, the 8-tensors-per-position limit, one TPipe per kernel.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from ptowsp.backends.ref import values as R

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

F32P = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    out = tmp_path_factory.mktemp("shim") / "selftest.so"
    cmd = ["g++", *H.CXXFLAGS, "-I", str(H.HERE), "-o", str(out), str(H.HERE / "selftest.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-6000:]
    lib = ctypes.CDLL(str(out))
    lib.shim_error.restype = ctypes.c_char_p
    return lib


class Failed(Exception):
    pass


def call(lib, name, *args):
    if getattr(lib, name)(*args) != 0:
        raise Failed(lib.shim_error().decode())


def ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


def specials(rng, n: int) -> np.ndarray:
    """float32 values with NaN, +-inf, +-0, subnormals and ordinary numbers."""
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-39, 65520.0, 1e38], np.float32)
    x[: len(sp)] = sp
    rng.shuffle(x)
    return x


def test_binary(shim):
    rng = np.random.default_rng(1)
    n = 200
    a, b = specials(rng, n), specials(rng, n)
    want = [a + b, a - b, a * b, a / b, np.where(a > b, a, b), np.where(a > b, b, a)]
    for op, w in enumerate(want):
        out = np.empty(n, np.float32)
        call(shim, "t_binary", op, ptr(out), ptr(a), ptr(b), n)
        np.testing.assert_array_equal(out, w, err_msg=f"binary op {op}")


def test_scalar_ops(shim):
    rng = np.random.default_rng(2)
    n = 130
    a = specials(rng, n)
    for s in (2.5, -0.0, np.float32(np.nan)):
        s = np.float32(s)
        want = [a + s, a * s, np.where(a > s, a, s), np.where(a > s, s, a), np.full(n, s)]
        for op, w in enumerate(want):
            out = np.empty(n, np.float32)
            call(shim, "t_scalar", op, ptr(out), ptr(a), ctypes.c_float(s), n)
            np.testing.assert_array_equal(out, w, err_msg=f"scalar op {op} with {s}")


def test_unary(shim):
    rng = np.random.default_rng(3)
    n = 300
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    pos = np.abs(a) + np.float32(0.01)

    def run(op, x):
        out = np.empty(n, np.float32)
        call(shim, "t_unary", op, ptr(out), ptr(x), n)
        return out

    np.testing.assert_array_max_ulp(run(0, a), np.exp(a), 2)
    np.testing.assert_array_max_ulp(run(1, pos), np.log(pos), 2)
    np.testing.assert_array_equal(run(2, pos), np.sqrt(pos))
    np.testing.assert_array_equal(run(3, a), np.abs(a))
    s = specials(rng, n)
    np.testing.assert_array_equal(run(4, s), np.where(s > 0, s, np.float32(0)))  # NaN -> 0
    np.testing.assert_array_max_ulp(run(5, a), np.tanh(a), 3)
    np.testing.assert_array_max_ulp(run(6, a), np.sin(a), 3)
    np.testing.assert_array_max_ulp(run(7, a), np.cos(a), 3)
    np.testing.assert_array_max_ulp(run(8, pos), np.power(pos, np.float32(1.75)), 3)


def test_cast(shim):
    rng = np.random.default_rng(4)
    n = 256
    x = specials(rng, n)
    x[10:20] = np.float32([6e-8, 3e-8, 2.9802322e-08, 65504, 65519.99, 1e-5, -7e-6, 0.1, 2049, 3])
    rint, none, trunc = 1, 0, 5

    def cast(kind, src, dtype, mode):
        out = np.empty(n, dtype)
        call(shim, "t_cast", kind, ptr(out), ptr(src), mode, n)
        return out

    h = cast(0, x, np.uint16, rint)
    np.testing.assert_array_equal(h.view(np.float16), x.astype(np.float16))  # f32 -> f16, RNE
    f = cast(1, h, np.float32, none)
    np.testing.assert_array_equal(f, h.view(np.float16).astype(np.float32))
    bf = cast(2, x, np.uint16, rint)
    np.testing.assert_array_equal(bf, R.bf16_bits(x))
    np.testing.assert_array_equal(cast(3, bf, np.float32, none), R.bf16_from_bits(bf))
    u8 = rng.integers(0, 256, n).astype(np.uint8)
    np.testing.assert_array_equal(cast(4, u8, np.uint16, none).view(np.float16),
                                  u8.astype(np.float16))
    hv = np.float16([0.5, 1.5, 2.5, -3, 300, 254.6, np.nan, 7.49]).repeat(n // 8)
    got = cast(5, hv.view(np.uint16), np.uint8, none)
    np.testing.assert_array_equal(got, np.clip(np.nan_to_num(np.rint(hv.astype(np.float32))), 0, 255))
    got = cast(5, hv.view(np.uint16), np.uint8, trunc)
    np.testing.assert_array_equal(got, np.clip(np.nan_to_num(np.trunc(hv.astype(np.float32))), 0, 255))
    i = rng.integers(-2**31, 2**31, n).astype(np.int32)
    np.testing.assert_array_equal(cast(6, i, np.float32, rint), i.astype(np.float32))


def test_compare_bits(shim):
    rng = np.random.default_rng(5)
    n = 192
    a, b = specials(rng, n), specials(rng, n)
    b[:40] = a[:40]
    ops = [np.less, np.greater, np.equal, np.less_equal, np.greater_equal, np.not_equal]
    for mode, f in enumerate(ops):
        mask = np.zeros(n // 8, np.uint8)
        call(shim, "t_compare", mode, ptr(mask), ptr(a), ptr(b), n)
        np.testing.assert_array_equal(mask, np.packbits(f(a, b), bitorder="little"), err_msg=str(f))


def test_select(shim):
    rng = np.random.default_rng(6)
    n = 100
    a, b = specials(rng, n), specials(rng, n)
    bits = rng.random(n) < 0.5
    mask = np.packbits(bits, bitorder="little")
    out = np.empty(n, np.float32)
    call(shim, "t_select", 0, ptr(out), ptr(mask), ptr(a), ptr(b), ctypes.c_float(0), n)
    np.testing.assert_array_equal(out, np.where(bits, a, b))
    call(shim, "t_select", 1, ptr(out), ptr(mask), ptr(a), ptr(b), ctypes.c_float(-2.0), n)
    np.testing.assert_array_equal(out, np.where(bits, a, np.float32(-2.0)))


def _a2_sum(x: np.ndarray) -> np.float32:
    """ReduceSum's order on A2 (documented "method 2"): a binary tree within each repeat of 64
    f32, absent lanes 0, the repeats' sums added in sequence."""
    acc = None
    for r in range(0, len(x), 64):
        lanes = np.zeros(64, np.float32)
        part = x[r:r + 64]
        lanes[: len(part)] = part
        while len(lanes) > 1:
            lanes = (lanes[0::2] + lanes[1::2]).astype(np.float32)
        acc = lanes[0] if acc is None else np.float32(acc + lanes[0])
    return acc


def test_reduce(shim):
    rng = np.random.default_rng(7)
    for n in (1, 7, 64, 100, 1000):
        x = (rng.standard_normal(n) * 4).astype(np.float32)
        out = np.zeros(1, np.float32)
        call(shim, "t_reduce", 0, ptr(out), ptr(x), n, 16)
        assert out[0] == _a2_sum(x), n
        np.testing.assert_allclose(out[0], np.sum(x, dtype=np.float64), rtol=1e-5, atol=1e-5)
        call(shim, "t_reduce", 1, ptr(out), ptr(x), n, 32)
        assert out[0] == x.max()
        call(shim, "t_reduce", 2, ptr(out), ptr(x), n, 32)
        assert out[0] == x.min()


@pytest.mark.parametrize("n", [257, 1000])
def test_reduce_max_min_work_minimum(shim, n):
    """ReduceMax / ReduceMin keep a value and an index per repeat in the work buffer (the API
    documentation's iter1OutputCount = firstMaxRepeat * 2, rounded up to a 32-byte block);
    ReduceSum one value per repeat. The stand-in refuses less, from 257 f32 columns on the
    size that ReduceSum needs."""
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(1, np.float32)
    repeats = -(-n // 64)
    sum_work, max_work = -(-repeats // 8) * 8, -(-2 * repeats // 8) * 8
    assert max_work > sum_work
    call(shim, "t_reduce", 0, ptr(out), ptr(x), n, sum_work)
    for op in (1, 2):
        with pytest.raises(Failed, match="documented minimum"):
            call(shim, "t_reduce", op, ptr(out), ptr(x), n, sum_work)
        call(shim, "t_reduce", op, ptr(out), ptr(x), n, max_work)


def test_copy_strides(shim):
    rng = np.random.default_rng(8)
    a = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    for mask, repeats, ds, ss, dr, sr in [(64, 3, 1, 1, 8, 8), (20, 5, 1, 1, 4, 8),
                                          (64, 4, 1, 0, 8, 1), (33, 2, 2, 1, 16, 8)]:
        n_out = 4096
        out = np.empty(n_out, np.uint32)
        call(shim, "t_copy", ptr(out), ptr(a), len(a), n_out, mask, repeats, ds, ss, dr, sr)
        want = np.zeros(n_out, np.uint32)
        for r in range(repeats):
            for e in range(mask):
                d = (r * dr + (e // 8) * ds) * 8 + e % 8
                s = (r * sr + (e // 8) * ss) * 8 + e % 8
                want[d] = a[s]
        np.testing.assert_array_equal(out, want, err_msg=str((mask, repeats, ds, ss, dr, sr)))


@pytest.mark.parametrize("pad", [0, 1])
def test_datacopy(shim, pad):
    rng = np.random.default_rng(9 + pad)
    ub_bytes = 2048
    count = 5
    gm_gap = 24 if pad else 2  # bytes (DataCopyPad) or 32-byte blocks (DataCopy)
    length = 100 if pad else 3  # bytes (DataCopyPad) or 32-byte blocks (DataCopy)
    ub_gap = 1  # 32-byte blocks between UB rows
    gm_in = rng.integers(0, 256, 4096).astype(np.uint8)
    gm_out = np.zeros(4096, np.uint8)
    ub = np.zeros(ub_bytes, np.uint8)
    for pad_value in ((-1, 7) if pad else (-1,)):
        call(shim, "t_datacopy", pad, ptr(ub), ub_bytes, ptr(gm_in), ptr(gm_out), count, length,
             gm_gap, ub_gap, pad_value)
        row = length if pad else length * 32
        gstride = row + (gm_gap if pad else gm_gap * 32)
        ustride = (row + 31) // 32 * 32 + ub_gap * 32
        for r in range(count):
            np.testing.assert_array_equal(ub[r * ustride:r * ustride + row],
                                          gm_in[r * gstride:r * gstride + row])
            tail = ub[r * ustride + row:r * ustride + (row + 31) // 32 * 32]
            assert (tail == (0xFF if pad_value < 0 else pad_value)).all()
            np.testing.assert_array_equal(gm_out[r * gstride:r * gstride + row],
                                          gm_in[r * gstride:r * gstride + row])
            assert not gm_out[r * gstride + row:(r + 1) * gstride].any()  # gaps untouched


def test_scalar_unit(shim):
    out = np.empty(50, np.float32)
    call(shim, "t_scalar_unit", ptr(out), 50)
    np.testing.assert_array_equal(out, np.arange(50, dtype=np.float32))


def test_api_scratch_is_clobbered(shim):
    """Select stages data in the top 8 KiB of UB, as the device does: kernels must not keep
    anything there (the emitter's budget stops below it)."""
    changed = ctypes.c_int(0)
    call(shim, "t_scratch", ctypes.byref(changed))
    assert changed.value == 32


VIOLATIONS = {
    0: "exceed the Unified Buffer",
    1: "not 32-byte aligned",
    2: "pipe S (scalar), but pipe V (vector) wrote them",
    3: "pipe V (vector), but pipe V (vector) wrote them",
    4: "multiple of 256 bytes",
    5: "round mode is not supported",
    6: "queue is empty",
    7: "pipe V (vector), but pipe MTE2 (GM->UB/L1 copy) wrote them",
    8: "not 32-byte aligned",
    9: "no SetFlag",
    10: "a second TPipe",
    11: "workLocal is smaller",
    12: "overlaps an operand",
    13: "more than 8 tensors",
    14: "multiple of sizeof(T)",
    15: "allocated and never freed",
}


@pytest.mark.parametrize("which", sorted(VIOLATIONS))
def test_violations_fail_loudly(shim, which):
    with pytest.raises(Failed, match="ascendc_cpu: .*" + VIOLATIONS[which].replace("(", r"\(")
                       .replace(")", r"\)")):
        call(shim, "t_violation", which)
