"""Scratch tensors in the Python embedding (docs/python.md): `Tensor(shape=..., dtype=...,
scratch=True)` or `scratch(shape, dtype)` is declared `scratch`, exactly as in `.wsp`, so a
Python program builds the IR of the equivalent `.wsp` text, the optimiser fuses the scratch
away as it does there, and the results are those of the `.wsp` program and of NumPy; the
caller passes no array for it and sees none."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from pto_wsp import DType, In, Out, P, Tensor, Tile, kernel, pto, scratch, workload
from ptowsp.embed.errors import CompileError

from .helpers import assert_roundtrip, ir_text

F32 = DType.F32


@kernel
def square(x: In[Tile[16, 64, F32]], y: Out[Tile[16, 64, F32]]):
    pto.store(y, x * x)


@kernel
def scaled(x: In[Tile[16, 64, F32]], y: Out[Tile[16, 64, F32]]):
    pto.store(y, x * 0.5 + 1.0)


# what the workload below is, as `.wsp` text (a tensor the caller's arrays are updated in is
# `inout`: docs/python.md, "Decisions")
WSP = """\
module two_steps
input X: f32[4, 16, 64]
scratch H: f32[4, 16, 64]
inout Y: f32[4, 16, 64]
kernel square(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) { store(y, x * x) }
kernel scaled(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) { store(y, x * 0.5 + 1.0) }
workload two_steps() {
    for i in P(Dense[4]) { square[i](x = X[i], y = H[i]) }
    for i in P(Dense[4]) { scaled[i](x = H[i], y = Y[i]) }
}
schedule main = two_steps()
"""


def two_steps(x: np.ndarray, y: np.ndarray, spelling: str):
    X, Y = Tensor(data=x), Tensor(data=y)
    H = scratch((4, 16, 64), F32) if spelling == "function" else \
        Tensor(shape=(4, 16, 64), dtype=F32, scratch=True)

    @workload
    def two_steps():
        for i in P(4):
            square[i](x=X[i], y=H[i])
        for i in P(4):
            scaled[i](x=H[i], y=Y[i])

    return two_steps(), H


@pytest.mark.parametrize("spelling", ["function", "keyword"])
def test_a_python_scratch_is_the_wsp_scratch(spelling):
    x = np.zeros((4, 16, 64), np.float32)
    w, H = two_steps(x, np.zeros_like(x), spelling)
    assert H.scratch and H.shape == (4, 16, 64) and H.data is None and H.nbytes() == 16384
    assert "scratch H: f32[4, 16, 64]" in assert_roundtrip(w)
    wsp = ptowsp.parse(WSP, "two_steps.wsp")
    assert ir_text(w.module()) == ir_text(wsp)
    # the optimiser treats both alike: at -O2 the two nests fuse and `H` is gone
    fused = [ir_text(m.compile("ref", opt_level=2).module) for m in (w.module(), wsp)]
    assert fused[0] == fused[1]
    assert " H[" not in fused[0] and "square__scaled" in fused[0]


@pytest.mark.cc
@pytest.mark.usefixtures("wspc_cache")
@pytest.mark.parametrize("opt_level", [0, 2])
def test_a_python_scratch_gives_the_wsp_results(opt_level):
    x = np.random.default_rng(7).standard_normal((4, 16, 64)).astype(np.float32)
    want = (x.astype(np.float64) ** 2) * 0.5 + 1.0
    wsp = ptowsp.parse(WSP, "two_steps.wsp")
    for target in ("cpu_sim", "ref"):
        y = np.zeros_like(x)
        w, _ = two_steps(x, y, "function")
        program = w.compile(target, opt_level=opt_level)
        program.execute()
        program.synchronize()
        np.testing.assert_allclose(y, want, rtol=1e-6)
        out = wsp.compile(target, opt_level=opt_level).run(X=x, Y=np.zeros_like(x))
        np.testing.assert_array_equal(out["Y"], y)
        assert set(out) == {"Y"}  # a scratch is never a result


def test_scratch_mistakes():
    with pytest.raises(CompileError, match="a scratch tensor has no data: the program allocates it"):
        Tensor(data=np.zeros(3, np.float32), scratch=True)
    with pytest.raises(CompileError, match="a scratch tensor needs `shape` and `dtype`"):
        Tensor(shape=(2, 2), scratch=True)
    with pytest.raises(CompileError, match="non-negative whole numbers, not"):
        scratch((2, -1), F32)
    with pytest.raises(CompileError, match="unknown data type"):
        scratch((2, 2), "f33")
