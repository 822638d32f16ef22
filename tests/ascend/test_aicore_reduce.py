"""Row reductions and the broadcasts of their results on the vector unit, checked on the host
against the CPU Ascend C (`ascendc_cpu/`), ref and an independent NumPy formula.

What each test proves:
- test_reductions_odd_widths: rowsum / rowmean / rowmax / rowmin of f32, f16 and bf16 tiles at
  widths 1, 63, 64, 65, 257 and 4097 (inside a block, at a block edge, past it, many blocks),
  with NaN / inf in some rows, equal ref and NumPy (max / min bit for bit, sums to the
  documented tolerance), with the stand-in's ReduceRepeat / Brcb rules on.
- test_no_scalar_round_trip: the emitted kernels of rmsnorm and softmax read no UB value on the
  scalar unit (no GetValue, no wsp_bcast_cols): a row's value never leaves the vector unit.
- test_stand_in_checks_reduce_rules: the stand-in refuses the misuses the documentation
  names (repeatTime past 255, mask past 64, a misaligned source, Brcb in place), so it cannot
  hide them.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptowsp.backends.ascend import aicore
from ptowsp.backends.ref import values as R
from ptowsp.ir import nodes as N

from .ascendc_cpu import harness as H
from .ascendc_cpu.harness import KB

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

WIDTHS = (1, 63, 64, 65, 257, 4097)
DTYPES = ("f32", "f16", "bf16")
ROWS = 3


def _kernel(dt: str, cols: int) -> N.Kernel:
    b = KB(f"red_{dt}_{cols}")
    x = b.tile("x", ROWS, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    for what in ("rowsum", "rowmean", "rowmax", "rowmin"):
        b.out(what, b.op(what, xf), "f32")
    # the per-row value broadcast back along the row (a softmax's x - max(x))
    b.out("centered", b.op("sub", xf, b.op("rowmax", xf)), dt)
    return b.kernel()


KERNELS = [_kernel(dt, c) for dt in DTYPES for c in WIDTHS]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    m = N.Module("reduce", (), (), tuple(KERNELS), (), None)
    return H.build([H.Unit("reduce", aicore.emit_aicore(m), KERNELS)],
                   tmp_path_factory.mktemp("aicore_reduce"))


def _numpy(x: np.ndarray) -> dict:
    """The reductions in float64 from the f32 values: the independent formula."""
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return {"rowsum": x64.sum(1, keepdims=True), "rowmean": x64.mean(1, keepdims=True),
                "rowmax": x64.max(1, keepdims=True), "rowmin": x64.min(1, keepdims=True)}


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_reductions_odd_widths(lib, k):
    rng = np.random.default_rng(len(k.name))
    for trial in range(2):
        task = H.random_task(k, rng, strided=trial == 1)
        x = task.inputs["x"]
        if trial == 1 and x.shape[1] >= 2:  # row 1 holds a NaN, row 2 an inf
            vals = np.array([np.nan, np.inf]).astype(x.dtype) if x.dtype != np.uint16 else \
                np.array([0x7fc0, 0x7f80], dtype=np.uint16)
            x[1, -1], x[2, 0] = vals
            H.tile_view(task, k, "x")[...] = x
        got = H.run_task(lib, "reduce", k, task)
        want = H.ref_outputs(k, task)
        H.compare(k, got, want, f"trial {trial}")
        xf = R.to_compute(x, k.params[0].dtype).astype(np.float32)
        for what, v in _numpy(xf).items():
            g = got[what].astype(np.float64)
            if what in ("rowmax", "rowmin"):
                np.testing.assert_array_equal(g, v.astype(np.float32), err_msg=what)
            else:
                np.testing.assert_allclose(g, v, rtol=2e-5, atol=2e-6 * max(1.0, np.nanmax(
                    np.abs(v[np.isfinite(v)]), initial=1.0)), equal_nan=True, err_msg=what)


def _program_kernel(src: str, name: str) -> str:
    import ptowsp
    m = ptowsp.parse(src, f"{name}.wsp").ir
    files = aicore.emit_aicore(m)
    return "\n".join(t for p, t in files.items() if p.startswith("aicore/kernel_"))


def test_no_scalar_round_trip():
    src = """module rms
input X: f32[16, 4096]
input W: f32[1, 4096]
output Y: f32[16, 4096]
output S: f32[16, 4096]

kernel rmsnorm(x: In[Tile[16, 4096, f32]], w: In[Tile[1, 4096, f32]], y: Out[Tile[16, 4096, f32]]) {
    store(y, x * rsqrt(rowmean(x * x) + 0.00001) * w)
}

kernel sm(x: In[Tile[16, 4096, f32]], y: Out[Tile[16, 4096, f32]]) {
    store(y, softmax(x))
}

workload w() {
    rmsnorm(x = X, w = W, y = Y)
    sm(x = X, y = S)
}
"""
    text = _program_kernel(src, "rms")
    assert "wsp_row_reduce<AscendC::ReduceType::SUM>" in text and "wsp_brcb_rows" in text
    assert "wsp_bcast_blocks" in text
    for scalar in ("GetValue", "SetValue", "wsp_bcast_cols", "AscendC::ReduceSum("):
        assert scalar not in text, scalar


_MISUSE = r'''
#include "kernel_operator.h"
#include <cstdio>
using namespace AscendC;
int main(int argc, char **argv)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 1024);
    LocalTensor<float> a = buf.GetWithOffset<float>(8192, 0);
    LocalTensor<float> d = buf.GetWithOffset<float>(4096, 32768);
    Duplicate(a, 1.0f, 8192);
    PipeBarrier<PIPE_V>();
    try {
        switch (argv[1][0]) {
        case '0': ReduceRepeat<ReduceType::SUM, float, float>(d, a, 64, 10, 1, 1, 8); break;
        case '1': ReduceRepeat<ReduceType::SUM, float, float>(d, a, 64, 256, 1, 1, 0); break;
        case '2': ReduceRepeat<ReduceType::SUM, float, float>(d, a, 65, 1, 1, 1, 8); break;
        case '3': ReduceRepeat<ReduceType::SUM, float, float>(d, a[1], 64, 1, 1, 1, 8); break;
        case '4': ReduceRepeat<ReduceType::MAX, float, float>(d, a, 64, 1, 1, 1, 8); break;
        case '5': Brcb(a, a, 1, BrcbRepeatParams(1, 8)); break;
        case '6': Brcb(d, a[4], 1, BrcbRepeatParams(1, 8)); break;
        }
    } catch (const ShimError &e) {
        std::printf("%s\n", e.what());
        return 1;
    }
    std::printf("%g\n", (double)d.ptr_[0]);
    return 0;
}
'''


def test_stand_in_checks_reduce_rules(tmp_path):
    run = H.misuse_program(tmp_path, _MISUSE)
    ok = run("0")
    assert ok.returncode == 0 and ok.stdout.strip() == "64", ok.stdout
    for case, words in (("1", "repeatTime outside [0, 255]"), ("2", "mask outside [1, 64]"),
                        ("3", "not 32-byte aligned"), ("4", "only ORDER_ONLY_VALUE"),
                        ("5", "the same memory"), ("6", "not 32-byte aligned")):
        r = run(case)
        assert r.returncode == 1 and words in r.stdout, (case, r.stdout)
