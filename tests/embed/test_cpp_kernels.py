"""`@kernel(cpp_src=...)`, `cpp_body_path=` and `cpp_includes=[...]`: C++17 bodies (`extern cpp`,
language.md section 4) with a header of our own (tests/backends/cpp_headers: a namespace, a
template, an inline function), run on cpu_sim and checked against NumPy; the include
directories come from `compile(include_dirs=[...])`; errors land on the user's lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_wsp import (
    CompileError,
    DType,
    In,
    KernelError,
    Out,
    P,
    Scalar,
    Tensor,
    Tile,
    kernel,
    workload,
)
from tests.embed.helpers import markers

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

F32 = DType.F32

HEADERS = Path(__file__).resolve().parents[1] / "backends" / "cpp_headers"
BODY = Path(__file__).resolve().parent / "cpp_bodies" / "cumsum.cpp"
line_of, at = markers(__file__)


@kernel(cpp_src="""
    // a template from our header, std::array and a lambda: C++ a C body cannot use
    auto at = [&](int64_t r, int64_t c) { return x.data[r * x.stride + c]; };
    for (int64_t r = 0; r < x.rows; r++) {
        std::array<float, 8> row{};
        for (int64_t c = 0; c < x.cols; c++) row[c] = at(r, c);
        const float total = mathx::sum(row);
        for (int64_t c = 0; c < x.cols; c++) y.data[r * y.stride + c] = mathx::blend(row[c], total, w);
    }
""", cpp_includes=["mathx/blend.hpp"])
def blend(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]], w: Scalar[F32]):
    pass


@kernel(cpp_body_path=str(BODY), cpp_includes=["<numeric>"])
def cumsum(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pass


def test_cpp_src_with_a_header_on_cpu_sim_against_numpy():
    x = np.random.default_rng(190).standard_normal((3, 4, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def w():
        for i in P(3):
            blend[i](x=X[i], y=Y[i], w=0.75)

    program = w().compile(include_dirs=[str(HEADERS)])
    program.execute()
    program.synchronize()
    total = x.sum(axis=-1, keepdims=True, dtype=np.float32)
    np.testing.assert_allclose(y, x * np.float32(0.75) + total * np.float32(0.25), rtol=1e-5, atol=1e-5)


def test_cpp_body_path_on_cpu_sim_against_numpy():
    x = np.random.default_rng(191).standard_normal((2, 4, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def w():
        for i in P(2):
            cumsum[i](x=X[i], y=Y[i])

    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, np.cumsum(x, axis=-1), rtol=1e-5, atol=1e-5)


def test_a_missing_cpp_body_path_is_an_error_at_the_def():
    with pytest.raises(KernelError) as info:
        @kernel(cpp_body_path="no/such/body.cpp")
        def lost(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):  # E:lost
            pass
    text = at(info.value, "lost")
    assert "kernel `lost`: cannot read its `cpp_body_path` 'no/such/body.cpp': " in text


def test_a_cpp_error_is_reported_at_its_line_in_the_python_file():
    @kernel(cpp_src="""
        for (int64_t c = 0; c < x.cols; c++)
            y.data[c] = mathx::blend(x.data[c], 0.0f);  // # E:cxx
    """, cpp_includes=["mathx/blend.hpp"])
    def bad(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pass

    X, Y = Tensor(data=np.zeros((1, 8), np.float32)), Tensor(data=np.zeros((1, 8), np.float32))

    @workload
    def w():
        bad(x=X, y=Y)

    with pytest.raises(CompileError) as info:
        w().compile(include_dirs=[str(HEADERS)])
    assert "in `extern cpp` body: " in at(info.value, "cxx")


def test_a_missing_include_dir_in_compile_is_named(tmp_path):
    X, Y = Tensor(data=np.zeros((4, 8), np.float32)), Tensor(data=np.zeros((4, 8), np.float32))

    @workload
    def w():
        blend(x=X, y=Y, w=0.5)

    with pytest.raises(CompileError, match="include directory `.*gone` does not exist"):
        w().compile(include_dirs=[str(tmp_path / "gone")])


def test_an_error_in_a_cpp_body_path_file_is_reported_at_its_line_in_that_file():
    body = BODY.parent / "broken.cpp"

    @kernel(cpp_body_path=str(body))
    def broken(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pass

    X, Y = Tensor(data=np.zeros((1, 8), np.float32)), Tensor(data=np.zeros((1, 8), np.float32))

    @workload
    def w():
        broken(x=X, y=Y)

    with pytest.raises(CompileError) as info:
        w().compile()
    text = str(info.value)
    (d,) = [d for d in info.value.diagnostics if "no_such_function" in d.message]
    assert (d.span.file, d.span.line) == (str(body), 4), text
    assert d.message.startswith("in `extern cpp` body: ")
    assert f"{body}:4:" in text and "y.data[c] = no_such_function(x.data[c]);" in text


def test_f16_and_bf16_tiles_in_a_cpp_body_convert_as_in_c():
    # f16 and bf16 elements are raw uint16_t bits; the body converts them with wspc's helpers
    @kernel(cpp_src="""
        for (int64_t r = 0; r < x.rows; r++)
            for (int64_t c = 0; c < x.cols; c++) {
                const float xv = wsp_f16_to_f32(x.data[r * x.stride + c]);
                const float bv = wsp_bf16_to_f32(b.data[r * b.stride + c]);
                y.data[r * y.stride + c] = wsp_f32_to_f16(xv * 2.0f + bv);
                z.data[r * z.stride + c] = wsp_f32_to_bf16(std::max(xv, bv));
            }
    """)
    def halves(x: In[Tile[4, 8, DType.F16]], b: In[Tile[4, 8, DType.BF16]],
               y: Out[Tile[4, 8, DType.F16]], z: Out[Tile[4, 8, DType.BF16]]):
        pass

    rng = np.random.default_rng(1916)
    x = (rng.integers(-64, 64, (2, 4, 8)) / 4).astype(np.float16)   # exact in f16 and bf16
    bf = rng.integers(-32, 32, (2, 4, 8)).astype(np.float32)         # exact in bf16
    b_bits = (bf.view(np.uint32) >> 16).astype(np.uint16)
    y = np.zeros((2, 4, 8), np.float16)
    z = np.zeros((2, 4, 8), np.uint16)
    X, Bt = Tensor(data=x), Tensor(data=b_bits, dtype=DType.BF16)
    Y, Z = Tensor(data=y), Tensor(data=z, dtype=DType.BF16)

    @workload
    def w():
        for i in P(2):
            halves[i](x=X[i], b=Bt[i], y=Y[i], z=Z[i])

    program = w().compile()
    program.execute()
    program.synchronize()
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(y, (x32 * 2 + bf).astype(np.float16))
    np.testing.assert_array_equal((z.astype(np.uint32) << 16).view(np.float32), np.maximum(x32, bf))
