"""Sorting and selection on the AICore (`topk`, `sort`, `argmax`, `argmin`): the kernels of
tests/backends/test_selection.py (a grid of shapes, dtypes and k) emitted at -O0 and -O2,
compiled with g++ against the CPU Ascend C (`ascendc_cpu/`, whose rule checks stay on), and
run on values full of ties, NaN, infinities and signed zeros, contiguous and strided: every
result equals ref's bit for bit (ref equals the independent formula there). `sort_values` /
`sort_indices` run on `Sort32` / `MrgSort` (test_sort32.py; the integer limits here are keys
whose f32 scores tie, ordered by the tie pass); argmax / argmin are their
expansion (rowmax, compare, select, rowmin) on the vector and scalar units.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_selection import CASES, _source

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


# f64 is not an AI Core type (a compile error for ascend_npu: test_aicore.py::test_f64_is_refused)
AICORE_CASES = [c for c in CASES if c[2] != "f64"]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return H.build_levels(_source(AICORE_CASES), "selection",
                          tmp_path_factory.mktemp("aicore_selection"))


def _tied(dtype: str, shape, rng) -> np.ndarray:
    """Few distinct values (ties everywhere), with NaN, +-inf and signed zeros for floats."""
    if dtype[0] == "f":
        pool = np.array([0.0, -0.0, 1.5, -1.5, 2.0, np.inf, -np.inf, np.nan])
    else:
        info = np.iinfo(H.NP[dtype])
        pool = np.array([info.min, info.max, 0, 1, 2], dtype=np.float64)
    return pool[rng.integers(0, len(pool), shape)].astype(H.NP[dtype])


@pytest.mark.parametrize("level", (0, 2))
def test_selection_on_the_aicore_equals_ref(lib, level):
    built, units = lib
    unit = units[level // 2]
    rng = np.random.default_rng(18)
    assert len(unit.kernels) == len(AICORE_CASES)
    for k in unit.kernels:
        for strided in (False, True):
            task = H.random_task(k, rng, strided=strided)
            for name, arr in task.inputs.items():
                p = next(q for q in k.params if q.name == name)
                arr[...] = _tied(p.dtype, arr.shape, rng)
                H.tile_view(task, k, name)[...] = arr
            got = H.run_task(built, unit.name, k, task)
            H.compare(k, got, H.ref_outputs(k, task), f"O{level} (strided={strided})")
