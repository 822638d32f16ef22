"""`gather` on the AICore: the kernels of tests/backends/test_gather.py (a grid of shapes, value
dtypes and index dtypes; rows gathered, elements gathered within rows, one gather in the other,
gathers at computed indices under a `where`) emitted at -O0 and -O2, compiled with g++ against
the CPU Ascend C (`ascendc_cpu/`, whose rule checks stay on), and run on indices in range and out
of it (negative, the extent, the index dtype's extremes), contiguous and strided: every result
equals ref's bit for bit (ref equals the independent formula there). A gather within rows is
a `Gather` (aicore/moves.py: an index out of range reads a zeroed block) unless its values are
64-bit or its indices 16-bit (the scalar unit, under a conditional); a gather of rows reads one
index a row and copies the row.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.ir.passes import optimize
from tests.backends.test_gather import CASES, source

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


# f64 is not an AI Core type (a compile error for ascend_npu: test_aicore.py::test_f64_is_refused)
AICORE_CASES = [c for c in CASES if "f64" not in (c[2], c[5])]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return H.build_levels(source(AICORE_CASES), "gathers",
                          tmp_path_factory.mktemp("aicore_gathers"))


def _indices(dtype: str, shape, extent: int, rng) -> np.ndarray:
    """Half in range, half out of it: -1, -extent, the extent, the dtype's extremes."""
    info = np.iinfo(H.NP[dtype])
    outside = [v for v in (-1, -extent, extent, extent + 1, int(info.min), int(info.max))
               if info.min <= v <= info.max]
    inside = rng.integers(0, extent, shape)
    out = np.array(outside, dtype=object)[rng.integers(0, len(outside), shape)]
    pick = rng.random(shape) < 0.5
    return np.where(pick, inside.astype(object), out).astype(H.NP[dtype])


@pytest.mark.parametrize("level", (0, 2))
def test_gather_on_the_aicore_equals_ref(lib, level):
    built, units = lib
    unit = units[level // 2]
    rng = np.random.default_rng(19)
    assert len(unit.kernels) == len(AICORE_CASES)
    gathered = 0
    for k, (m, c, *_) in zip(unit.kernels, AICORE_CASES):
        gathered += sum(op.op.startswith("gather_") for op in k.ops)
        for strided in (False, True):
            task = H.random_task(k, rng, strided=strided)
            for name, extent in (("r", m), ("c", c)):
                p = next(q for q in k.params if q.name == name)
                arr = task.inputs[name]
                arr[...] = _indices(p.dtype, arr.shape, extent, rng)
                H.tile_view(task, k, name)[...] = arr
            got = H.run_task(built, unit.name, k, task)
            H.compare(k, got, H.ref_outputs(k, task), f"O{level} (strided={strided})")
    assert gathered >= 4 * len(AICORE_CASES)  # the gathers reached the AICore, not folded away


CHUNKED = """
module gathers_chunked
kernel embed(table: In[Tile[64, 64, f32]], ids: In[Tile[1024, 1, i32]],
             x: In[Tile[1024, 64, f32]], pick: In[Tile[1024, 8, i32]],
             y: Out[Tile[1024, 64, f32]], z: Out[Tile[1024, 8, f32]]) {
    store(y, gather(table, ids) + x)
    store(z, gather(x * 2, pick, axis = 1))
}
input T: f32[64, 64]
input IDS: i32[1024, 1]
input X: f32[1024, 64]
input PICK: i32[1024, 8]
output Y: f32[1024, 64]
output Z: f32[1024, 8]
workload main() { embed[0](table = T, ids = IDS, x = X, pick = PICK, y = Y, z = Z) }
"""


def test_gathers_in_a_chunked_kernel(tmp_path):
    """Tiles past the UB run in row chunks: a row gather keeps only its x (the table) resident
    and streams its indices and result with the chunks; a gather within rows streams all."""
    m, _ = optimize(ptowsp.parse(CHUNKED, "chunked.wsp").ir, 2)
    m = dataclasses.replace(m, name="gathers_chunked")
    (k,) = m.kernels
    built = H.build([H.Unit(m.name, aicore.emit_aicore(m), [k])], tmp_path)
    text = aicore.emit_aicore(m)["aicore/kernel_embed.h"]
    assert "c0" in text  # chunked: rows offset by the chunk's first
    rng = np.random.default_rng(5)
    task = H.random_task(k, rng)
    for name, extent in (("ids", 64), ("pick", 64)):
        arr = task.inputs[name]
        arr[...] = _indices("i32", arr.shape, extent, rng)
        H.tile_view(task, k, name)[...] = arr
    got = H.run_task(built, m.name, k, task)
    H.compare(k, got, H.ref_outputs(k, task), "chunked")
