"""Sorting and selection (`topk`, `sort`, `argmax`, `argmin`; language.md section 4, "Sorting
and selection"): cpu_sim == ref == an independent formula written here in plain Python (a row
sorted by the key (NaN, value, column), which is the documented order), at -O0 and -O2.

One module holds kernels over a grid of shapes, dtypes and k (k = 1, inner values and the row
length; k <= 16 and sorts over more than 16 columns take the two code paths of
`wsp_order_<T>`); hypothesis draws the values, from few distinct ones so that ties are the
rule, with NaN, infinities and signed zeros among floats.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.dtypes import numpy_dtype

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

# (rows, cols, dtype, k of topk)
CASES = [
    (1, 1, "f32", 1), (3, 5, "f32", 2), (4, 8, "f32", 8), (2, 17, "f32", 17),
    (5, 40, "f32", 3), (2, 40, "f32", 20), (3, 12, "f16", 4), (2, 9, "f64", 9),
    (3, 10, "i32", 3), (2, 19, "u8", 18), (2, 6, "i64", 1), (3, 33, "i16", 16),
]


def _kernel(n: int, r: int, c: int, dt: str, k: int) -> str:
    return f"""
kernel sel{n}(x: In[Tile[{r}, {c}, {dt}]], tv: Out[Tile[{r}, {k}, {dt}]],
              ti: Out[Tile[{r}, {k}, i32]], sv: Out[Tile[{r}, {c}, {dt}]],
              si: Out[Tile[{r}, {c}, i32]], dv: Out[Tile[{r}, {c}, {dt}]],
              di: Out[Tile[{r}, {c}, i32]], amax: Out[Tile[{r}, 1, i32]],
              amin: Out[Tile[{r}, 1, i32]]) {{
    let v, i = topk(x, {k})
    store(tv, v)
    store(ti, i)
    let s, si_ = sort(x)
    store(sv, s)
    store(si, si_)
    let _, d = sort(x, descending = true)
    let dvals, _ = sort(x, descending = true)
    store(dv, dvals)
    store(di, d)
    store(amax, argmax(x))
    store(amin, argmin(x))
}}
input X{n}: {dt}[{r}, {c}]
output TV{n}: {dt}[{r}, {k}]
output TI{n}: i32[{r}, {k}]
output SV{n}: {dt}[{r}, {c}]
output SI{n}: i32[{r}, {c}]
output DV{n}: {dt}[{r}, {c}]
output DI{n}: i32[{r}, {c}]
output AMAX{n}: i32[{r}, 1]
output AMIN{n}: i32[{r}, 1]
"""


def _source(cases=CASES) -> str:
    parts = ["module selection"]
    calls = []
    for n, (r, c, dt, k) in enumerate(cases):
        parts.append(_kernel(n, r, c, dt, k))
        calls.append(f"    sel{n}[0](x = X{n}, tv = TV{n}, ti = TI{n}, sv = SV{n}, si = SI{n}, "
                     f"dv = DV{n}, di = DI{n}, amax = AMAX{n}, amin = AMIN{n})")
    parts.append("workload main() {\n" + "\n".join(calls) + "\n}")
    return "\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def programs():
    m = ptowsp.parse(_source(), "selection.wsp")
    return {"ref": m.compile("ref"), "O0": m.compile("cpu_sim", opt_level=0),
            "O2": m.compile("cpu_sim", opt_level=2)}


# ---------------------------------------------------------------------------------------------
# The independent formula: Python's stable sort on a key


def _key(v, j: int, desc: bool):
    """NaN is the greatest value; equal values keep their column order."""
    v = float(v)
    if math.isnan(v):
        return (0 if desc else 1, 0.0, j)
    return (1 if desc else 0, -v if desc else v, j)


def order(row, desc: bool) -> list[int]:
    return sorted(range(len(row)), key=lambda j: _key(row[j], j, desc))


def expected(x: np.ndarray, k: int) -> dict:
    out = {name: [] for name in ("TV", "TI", "SV", "SI", "DV", "DI", "AMAX", "AMIN")}
    for row in x:
        asc, desc = order(row, False), order(row, True)
        out["TI"].append(desc[:k])
        out["TV"].append([row[j] for j in desc[:k]])
        out["SI"].append(asc)
        out["SV"].append([row[j] for j in asc])
        out["DI"].append(desc)
        out["DV"].append([row[j] for j in desc])
        nans = [j for j, v in enumerate(row) if math.isnan(float(v))]
        # NumPy's argmax/argmin: the first NaN, else the first extreme
        vals = [float(v) for v in row]
        out["AMAX"].append([nans[0] if nans else vals.index(max(vals))])
        out["AMIN"].append([nans[0] if nans else vals.index(min(vals))])
    return {name: np.array(v, dtype=x.dtype if name in ("TV", "SV", "DV") else np.int32)
            for name, v in out.items()}


def values(data, r: int, c: int, dt: str) -> np.ndarray:
    if dt[0] == "f":
        pool = [0.0, -0.0, 1.5, -1.5, 2.0, 1e30 if dt != "f16" else 6e4, -math.inf, math.inf,
                math.nan]
    else:
        info = np.iinfo(numpy_dtype(dt))
        pool = [int(info.min), int(info.max), 0, 1, 2, -1 if info.min < 0 else 3]
    flat = data.draw(st.lists(st.sampled_from(pool), min_size=r * c, max_size=r * c))
    return np.array(flat, dtype=numpy_dtype(dt)).reshape(r, c)


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":  # bit for bit: signed zeros kept, NaN where NaN
        return np.array_equal(a.view(np.uint8), b.view(np.uint8)) or (
            np.array_equal(a, b, equal_nan=True)
            and np.array_equal(np.signbit(a), np.signbit(b)))
    return np.array_equal(a, b)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_selection_cpu_sim_equals_ref_equals_formula(programs, data):
    inputs = {f"X{n}": values(data, r, c, dt) for n, (r, c, dt, _) in enumerate(CASES)}
    got = {name: p.run(**inputs) for name, p in programs.items()}
    for n, (_, _, _, k) in enumerate(CASES):
        x = inputs[f"X{n}"]
        for out, w in expected(x, k).items():
            for name, res in got.items():
                assert same(res[f"{out}{n}"], w), (name, out, x, np.asarray(res[f"{out}{n}"]), w)


def test_topk_is_the_start_of_the_descending_sort_and_argmax_its_first():
    # the documented consistency: topk(x, k) = sort(x, descending = true)[:, :k], and
    # argmax(x) = topk(x, 1)'s column (NaN first in both)
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (6, 11)).astype(np.float32)
    x[1, 4] = x[3, 0] = x[3, 7] = np.nan
    got = expected(x, 3)
    assert np.array_equal(got["TI"], got["DI"][:, :3])
    assert np.array_equal(got["AMAX"][:, 0], got["TI"][:, 0])
    assert np.array_equal(got["AMAX"][:, 0], np.argmax(x, axis=1))
    assert np.array_equal(got["AMIN"][:, 0], np.argmin(x, axis=1))
