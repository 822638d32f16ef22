"""Slices of tiles (`x[r0:r1, c0:c1]`) and `concat` inside kernels: cpu_sim, ref and a NumPy
formula written here agree exactly (slices and concatenation move values; the arithmetic around
them is exact), with hypothesis over shapes, bounds and dtypes, at -O2 (slices read in place,
row-by-row nests) and -O0 (every value materialised)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from tests.accuracy import UNIT, assert_close

U = UNIT["f32"]

pytestmark = pytest.mark.cc

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32}
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


@st.composite
def cases(draw):
    m, n = draw(st.integers(1, 9)), draw(st.integers(2, 40))
    r0 = draw(st.integers(0, m - 1))
    r1 = draw(st.integers(r0 + 1, m))
    c0 = draw(st.integers(0, n - 1))
    c1 = draw(st.integers(c0 + 1, n))
    h = draw(st.integers(1, n - 1))  # rotate_half's split
    return draw(st.sampled_from(sorted(NP))), m, n, (r0, r1, c0, c1), h


def program(dt: str, m: int, n: int, b: tuple, h: int) -> str:
    r0, r1, c0, c1 = b
    rs, cs = r1 - r0, c1 - c0
    return f"""
module slices
input X: {dt}[{m}, {n}]
input I: i32[{m}, {n}]
output S: {dt}[{rs}, {cs}]
output R: {dt}[{m}, {n}]
output V: {dt}[{rs + m}, {n}]
output P: f64[{m}, {cs + n}]
output Q: {dt}[{rs}, {cs}]
kernel k(x: In[Tile[{m}, {n}, {dt}]], i: In[Tile[{m}, {n}, i32]],
         s: Out[Tile[{rs}, {cs}, {dt}]], r: Out[Tile[{m}, {n}, {dt}]],
         v: Out[Tile[{rs + m}, {n}, {dt}]], p: Out[Tile[{m}, {cs + n}, f64]],
         q: Out[Tile[{rs}, {cs}, {dt}]]) {{
    store(s, x[{r0}:{r1}, {c0}:{c1}])
    store(r, concat(-x[:, {h}:], x[:, :{h}], axis = 1))
    store(v, concat(x[{r0}:{r1}], x))
    store(p, cast(concat(x[:, {c0}:{c1}], i, axis = 1), f64))
    store(q, (x * 2)[{r0}:{r1}, :][:, {c0}:{c1}] + x[{r0}:{r1}, {c0}:{c1}])
}}
workload w() {{ k(x = X, i = I, s = S, r = R, v = V, p = P, q = Q) }}
schedule main = w()
"""


def expected(dt, x, i, b, h):
    r0, r1, c0, c1 = b
    f = NP[dt]
    # concat of {dt} and i32 promotes as arithmetic does: an int tile meets a float as the float
    pd = np.float64 if dt == "f64" else (np.int32 if dt == "i32" else f)
    return {
        "S": x[r0:r1, c0:c1],
        "R": np.concatenate((-x[:, h:], x[:, :h]), axis=1).astype(f),
        "V": np.concatenate((x[r0:r1], x), axis=0),
        "P": np.concatenate((x[:, c0:c1].astype(pd), i.astype(pd)), axis=1).astype(np.float64),
        "Q": (x[r0:r1, c0:c1].astype(np.float64) * 3).astype(f),
    }


@pytest.mark.parametrize("opt", [2, 0])
@SETTINGS
@given(case=cases(), seed=st.integers(0, 2**16))
def test_slices_and_concat_agree_with_numpy(opt, case, seed):
    dt, m, n, b, h = case
    rng = np.random.default_rng(seed)
    x = (rng.integers(-1000, 1000, (m, n)) / (1 if dt == "i32" else 8)).astype(NP[dt])
    i = rng.integers(-50, 50, (m, n)).astype(np.int32)
    mod = ptowsp.parse(program(dt, m, n, b, h), "slices.wsp")
    want = expected(dt, x, i, b, h)
    for target in ("ref", "cpu_sim"):
        got = mod.compile(target=target, opt_level=opt).run(X=x, I=i)
        for name, w in want.items():
            np.testing.assert_array_equal(got[name], w, err_msg=f"{target} -O{opt} {name}")


def test_rotate_half_rope_with_a_constexpr_half():
    """The rotate_half RoPE of docs/language.md: x * cos + rotate_half(x) * sin, the halves
    sized by a Constexpr parameter (one specialisation per head size)."""
    src = """
module rope
sym T
input X: f32[T, 8, 64]
input COS: f32[T, 8, 64]
input SIN: f32[T, 8, 64]
output Y: f32[T, 8, 64]
kernel rope(x: In[Tile[8, 2 * H, f32]], c: In[Tile[8, 2 * H, f32]],
            s: In[Tile[8, 2 * H, f32]], y: Out[Tile[8, 2 * H, f32]], H: Constexpr[i32]) {
    let rot = concat(-x[:, H:], x[:, :H], axis = 1)
    store(y, x * c + rot * s)
}
axis t = DenseDyn(T)
workload w() { for i in P(t) { rope[i](x = X[i], c = COS[i], s = SIN[i], y = Y[i], H = 32) } }
schedule main = w()
"""
    rng = np.random.default_rng(11)
    x, c, s = (rng.standard_normal((3, 8, 64)).astype(np.float32) for _ in range(3))
    mod = ptowsp.parse(src, "rope.wsp")
    x64, c64, s64 = (a.astype(np.float64) for a in (x, c, s))
    rot = np.concatenate((-x64[..., 32:], x64[..., :32]), axis=-1)
    want = x64 * c64 + rot * s64
    # two f32 products and their sum: three roundings, each at most U of its terms
    terms = 2 * U * (np.abs(x64 * c64) + np.abs(rot * s64))
    for target in ("ref", "cpu_sim"):
        got = mod.compile(target=target).run(X=x, COS=c, SIN=s, bind={"T": 3})["Y"]
        assert_close(got, want, rtol=U, atol=terms, what=f"rotate_half on {target}")
