"""The cube tiling (ptowsp/backends/cube.py): every matmul gets one that fits the buffers it
names and covers the whole product, with the block shapes the cube's fractals require."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptowsp.backends.cube import A2, FRACTAL, CubeCaps, cube_tiling, fractal_k


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 20000),
       st.sampled_from([1, 2, 4]))
def test_every_matmul_gets_a_tiling_that_fits_and_covers(m, n, k, in_bytes):
    t = cube_tiling(m, n, k, in_bytes)
    assert t.fits(A2)
    assert t.base_m % FRACTAL == 0 and t.base_n % FRACTAL == 0
    assert t.base_k % fractal_k(in_bytes) == 0 and t.step_k % t.base_k == 0
    # the blocks cover C and the stages cover K, with less than one block of slack
    assert t.blocks_m * t.base_m >= m > (t.blocks_m - 1) * t.base_m
    assert t.blocks_n * t.base_n >= n > (t.blocks_n - 1) * t.base_n
    assert t.l1_stages * t.step_k >= k > (t.l1_stages - 1) * t.step_k
    assert t.k_steps * t.base_k >= k


def test_a_large_f16_gemm_uses_the_128_by_256_block_double_buffered():
    t = cube_tiling(4096, 4096, 4096, 2)
    assert (t.base_m, t.base_n, t.base_k) == (128, 256, 64)
    assert t.l0_buffers == 2 and t.l1_buffers == 2
    # 128 x 256 f32 fills L0C exactly; two 64-deep B buffers fill L0B exactly
    assert t.l0c_bytes() == A2.l0c and t.l0b_bytes() == A2.l0b


def test_small_buffers_split_rather_than_refuse():
    tiny = CubeCaps(l1=8 * 1024, l0a=2 * 1024, l0b=2 * 1024, l0c=4 * 1024)
    t = cube_tiling(1000, 1000, 1000, 4, tiny)
    assert t.fits(tiny) and t.base_m * t.base_n * 4 <= tiny.l0c


def test_bad_arguments_are_a_bug_not_a_tiling():
    with pytest.raises(ValueError):
        cube_tiling(0, 4, 4, 2)
