"""`Program.run(inplace=True)` (docs/running.md, "The Python API"): inout arrays, such as a KV
cache, are updated where they are instead of copied in and out, on every runnable target, with
the same values as a copying run; an array that cannot be updated in place is an error at the
inout's declaration before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp

pytestmark = pytest.mark.cc

SOURCE = """\
sym N
input  X: f32[N, 16, 8]
inout  C: f32[N, 32, 8]
output Y: f32[N, 16, 8]
kernel k(x: In[Tile[16, 8, f32]], c: InOut[Tile[16, 8, f32]], y: Out[Tile[16, 8, f32]]) {
    store(c, c + x)
    store(y, c * 2.0)
}
workload w() {
    for i in P(N) { k[i](x = X[i], c = C[i, 8:24, :], y = Y[i]) }
}
"""


@pytest.fixture(scope="module")
def programs(wspc_cache):
    m = ptowsp.parse(SOURCE, "inplace.wsp")
    return {t: m.compile(target=t) for t in ("cpu_sim", "ref")}


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_an_inout_is_updated_where_it_is(programs, target):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 16, 8)).astype(np.float32)
    c = rng.standard_normal((3, 32, 8)).astype(np.float32)
    before = c.copy()
    copied = programs[target].run(X=x, C=c)
    np.testing.assert_array_equal(c, before)  # the default leaves the caller's array alone
    out = programs[target].run(X=x, C=c, inplace=True)
    assert out["C"] is c
    want = before.copy()
    want[:, 8:24] += x
    np.testing.assert_array_equal(c, want)  # rows outside the views are untouched
    np.testing.assert_array_equal(c, copied["C"])
    np.testing.assert_array_equal(out["Y"], copied["Y"])
    np.testing.assert_array_equal(out["Y"], before[:, 8:24] * np.float32(2.0))


@pytest.mark.parametrize("bad, words", [
    (lambda c: c[:, ::-1], "must be a writeable C-contiguous NumPy array"),
    (lambda c: np.asarray(c).copy().transpose(0, 2, 1).copy().transpose(0, 2, 1), "C-contiguous"),
])
def test_an_array_that_cannot_be_updated_in_place_is_an_error(programs, bad, words):
    x = np.zeros((2, 16, 8), np.float32)
    c = bad(np.zeros((2, 32, 8), np.float32))
    with pytest.raises(ptowsp.WspError) as info:
        programs["cpu_sim"].run(X=x, C=c, inplace=True)
    text = info.value.render()
    assert text.startswith("inplace.wsp:3:1: error: inout `C` is updated in place (inplace=True), "
                           "so its array must be a writeable C-contiguous NumPy array")
    assert words in text


def test_a_read_only_array_is_an_error(programs):
    c = np.zeros((2, 32, 8), np.float32)
    c.flags.writeable = False
    with pytest.raises(ptowsp.WspError, match="writeable C-contiguous"):
        programs["ref"].run(X=np.zeros((2, 16, 8), np.float32), C=c, inplace=True)
