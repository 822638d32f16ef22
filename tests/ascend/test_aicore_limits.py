"""Size limits a user does not meet in the AICore kernels, checked on the host against the CPU
Ascend C (`ascendc_cpu/`), ref and an independent NumPy formula.

What each test proves:
- test_many_inputs: a kernel reading more tiles than an AICore TPosition may hold tensors at
  once (8) runs: the first inputs through queues, the rest copied into the arena with
  explicit MTE2 / V hand-offs, in one chunk and in many (double-buffered) chunks, with f16
  inputs among them, up to the language's MAX_TILES parameters.
"""

from __future__ import annotations

import numpy as np
import pytest

from ptowsp.backends.ascend import aicore
from ptowsp.backends.ref import values as R
from ptowsp.ir import nodes as N
from ptowsp.limits import MAX_TILES

from .ascendc_cpu import harness as H
from .ascendc_cpu.harness import KB

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _many(name: str, n: int, rows: int, cols: int) -> N.Kernel:
    """y = x0 + 2 x1 + 3 x2 + ... over n input tiles: [rows, cols], every third a [1, cols]
    row and every fifth f16."""
    b = KB(name)
    acc = None
    for i in range(n):
        shape = (1, cols) if i % 3 == 2 else (rows, cols)
        dt = "f16" if i % 5 == 4 else "f32"
        t = b.tile(f"x{i}", *shape, dt)
        v = t if dt == "f32" else b.op("convert", t, dtype="f32")
        v = b.op("mul", v, b.lit(float(i + 1)))
        acc = v if acc is None else b.op("add", acc, v)
    b.out("y", acc)
    return b.kernel()


KERNELS = [_many("many12", 12, 4, 40), _many("many12_chunked", 12, 256, 200),
           _many("many_max", MAX_TILES - 1, 2, 8)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    m = N.Module("limits", (), (), tuple(KERNELS), (), None)
    files = aicore.emit_aicore(m)
    return H.build([H.Unit("limits", files, KERNELS)], tmp_path_factory.mktemp("limits")), files


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_many_inputs(lib, k):
    dll, files = lib
    text = files[aicore.header_path(k)]
    assert "calc.GetWithOffset" in text and "wsp_sync<AscendC::HardEvent::MTE2_V>();" in text
    rng = np.random.default_rng(5)
    task = H.random_task(k, rng, strided=True)
    got = H.run_task(dll, "limits", k, task)
    H.compare(k, got, H.ref_outputs(k, task))
    want = None
    for i, p in enumerate(p for p in k.params if p.kind == "tile" and p.mode == "In"):
        x = R.to_compute(task.inputs[p.name], p.dtype).astype(np.float64) * (i + 1)
        want = x if want is None else want + x
    np.testing.assert_allclose(got["y"].astype(np.float64), want, rtol=1e-5, atol=1e-4)
