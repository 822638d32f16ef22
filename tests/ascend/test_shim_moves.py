"""The CPU Ascend C's `Gather`, `CreateVecIndex` and the casts the AICore moves use (float ->
int32_t with each round mode, int8_t <-> half, int16_t -> half), on their own against NumPy
through `ascendc_cpu/moves_selftest.cpp`, and the misuses a device rejects (or reads wrongly), which
the stand-in must refuse loudly: offsets not a multiple of the element size, past the source,
unaligned operands, a destination over an operand, 8- and 64-bit element types (no Gather form
on A2 / A3: a compile error)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc]

U32P = ctypes.POINTER(ctypes.c_uint32)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    out = tmp_path_factory.mktemp("moves_shim") / "moves_selftest.so"
    cmd = ["g++", *H.CXXFLAGS, "-I", str(H.HERE), "-o", str(out),
           str(H.HERE / "moves_selftest.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-6000:]
    so = ctypes.CDLL(str(out))
    so.moves_error.restype = ctypes.c_char_p
    so.m_vec_index.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_int]
    return so


class Failed(Exception):
    pass


def call(lib, name, *args):
    if getattr(lib, name)(*args) != 0:
        raise Failed(lib.moves_error().decode())


def ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.c_void_p)


def gather(lib, src: np.ndarray, off: np.ndarray, base: int = 0, src_at: int = 0,
           dst_at: int = 0) -> np.ndarray:
    out = np.zeros(len(off), src.dtype)
    off = np.ascontiguousarray(off, np.uint32)
    call(lib, "m_gather", src.itemsize, ptr(out), ptr(src), len(src), ptr(off), len(off),
         ctypes.c_uint32(base), src_at, dst_at)
    return out


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_gather_reads_the_element_at_each_byte_offset(lib, dtype):
    rng = np.random.default_rng(4)
    src = rng.integers(0, np.iinfo(dtype).max, 1000, dtype=np.uint64).astype(dtype)
    size = src.itemsize
    for count in (1, 64, 200, 777):
        idx = rng.integers(0, len(src), count)
        got = gather(lib, src, idx * size)
        np.testing.assert_array_equal(got, src[idx])
    # srcBaseOffset is bytes too, added to every offset
    idx = rng.integers(0, 900, 300)
    np.testing.assert_array_equal(gather(lib, src, idx * size, base=50 * size), src[idx + 50])


def test_gather_moves_float_bits_untouched(lib):
    """NaN payloads, -0 and subnormals come through as bits (Gather is a move)."""
    bits = np.array([0x7FC12345, 0xFFBADBAD, 0x80000000, 0x00000001, 0x7F800000, 0x3F800000],
                    np.uint32)
    off = np.array([5, 0, 1, 2, 3, 4, 0, 0], np.uint32) * 4
    np.testing.assert_array_equal(gather(lib, bits, off), bits[off // 4])


MISUSES = [
    (dict(off=[0, 6]), "is not a multiple of sizeof(T) = 4"),  # half an element
    (dict(off=[0, 4], base=2), "is not a multiple of sizeof(T) = 4"),
    (dict(off=[0, 4 * 64]), "runs past src"),
    (dict(off=[0], base=4 * 64), "runs past src"),
    (dict(off=[0], src_at=1), "src starts at UB offset"),
    (dict(off=[0], dst_at=3), "dstLocal starts at UB offset"),
]


@pytest.mark.parametrize("args,message", MISUSES)
def test_gather_refuses_what_a_device_gets_wrong(lib, args, message):
    src = np.arange(64, dtype=np.uint32)
    with pytest.raises(Failed, match="ascendc_cpu: Gather: .*" + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        gather(lib, src, np.array(args.pop("off")), **args)


@pytest.mark.parametrize("overlap,what", [(1, "dst overlaps src"), (2, "dst overlaps srcOffset")])
def test_gather_refuses_a_destination_over_an_operand(lib, overlap, what):
    with pytest.raises(Failed, match=what):
        call(lib, "m_gather_overlap", overlap)


@pytest.mark.parametrize("ctype", ["int8_t", "uint8_t", "int64_t", "double"])
def test_gather_has_no_8_or_64_bit_form(tmp_path, ctype):
    src = tmp_path / "g.cpp"
    src.write_text('#include "kernel_operator.h"\nusing namespace AscendC;\n'
                   f"void f(LocalTensor<{ctype}> d, LocalTensor<{ctype}> s, "
                   "LocalTensor<uint32_t> o) { Gather(d, s, o, 0u, 8u); }\n")
    proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-I", str(H.HERE), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Gather: A2 / A3 gather 16- and 32-bit types only" in proc.stderr


def test_create_vec_index_counts_from_its_first_value(lib):
    for first, count in ((0.0, 64), (3.0, 200), (-17.0, 33)):
        f = np.zeros(count, np.float32)
        i = np.zeros(count, np.int32)
        call(lib, "m_vec_index", ptr(f), ptr(i), first, count)
        np.testing.assert_array_equal(f, first + np.arange(count, dtype=np.float32))
        np.testing.assert_array_equal(i, int(first) + np.arange(count, dtype=np.int32))


ROUND = {"CAST_RINT": 1, "CAST_FLOOR": 2, "CAST_CEIL": 3, "CAST_ROUND": 4, "CAST_TRUNC": 5}


def test_cast_float_to_int32_rounds_as_its_mode_says(lib):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 7.0, -0.0, 1e10, -1e10, 16777216.0],
                 np.float32)
    want = {"CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil,
            "CAST_TRUNC": np.trunc,
            "CAST_ROUND": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}
    for name, mode in ROUND.items():
        out = np.zeros(len(x), np.int32)
        call(lib, "m_cast_f2i", ptr(out), ptr(x), len(x), mode)
        w = np.clip(want[name](x.astype(np.float64)), -2**31, 2**31 - 1).astype(np.int32)
        np.testing.assert_array_equal(out, w, err_msg=name)
    with pytest.raises(Failed, match="round mode is not supported"):
        call(lib, "m_cast_f2i", ptr(np.zeros(1, np.int32)), ptr(x), 1, 0)  # CAST_NONE


def test_int8_through_half_and_back_is_exact(lib):
    x = np.arange(-128, 128, dtype=np.int8)
    out = np.zeros_like(x)
    mid = np.zeros(len(x), np.uint16)
    call(lib, "m_cast_i8", ptr(out), ptr(mid), ptr(x), len(x), ROUND["CAST_RINT"])
    np.testing.assert_array_equal(mid.view(np.float16), x.astype(np.float16))
    np.testing.assert_array_equal(out, x)


def test_int16_to_half_is_exact_below_2048_and_rounds_to_nearest_even_past_it(lib):
    x = np.array([0, 1, -1, 2047, 2048, 2049, 2051, -2049, 4097, 32767, -32768], np.int16)
    out = np.zeros(len(x), np.uint16)
    call(lib, "m_cast_i16", ptr(out), ptr(x), len(x))
    np.testing.assert_array_equal(out.view(np.float16), x.astype(np.float16))
    assert out.view(np.float16)[5] == 2048 and out.view(np.float16)[6] == 2052
