"""Gather views (language.md section 6, "Gather views"): `Cos[pos[a : b], :]` gives the rows
`pos[a]`, `pos[a + 1]`, ... of `Cos`. cpu_sim == ref == NumPy (`Cos[pos]`) over index data,
bad indices are errors naming the index with the task's coordinates on both targets, a gather
from a tensor an earlier task writes (and by indices an earlier task writes) sees those
writes, and ascend_npu refuses a gather view only into an extern kernel (it runs the others:
tests/ascend/test_views.py).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError
from ptowsp.ir.printer import print_module

from . import test_ref_dynamic as R
from .test_cpu_dynamic import both, compiled, same_error

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


ROWS = """
sym S, P
input  pos: i32[S]
input  Cos: f32[P, 8]
output Y: f32[S, 8]
kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x * 2.0) }
workload w() {
    for t in P(S / 4) {
        cp[t](x = Cos[pos[t*4 : t*4 + 4], :], y = Y[t*4 : t*4 + 4, :])
    }
}
schedule main = w()
"""

# an embedding lookup: a 2-D index tensor, a row of it per b, and a 3-D table indexed first
EMB = """
sym B, S, V
input  ids: i64[B, S]
input  Emb: f32[2, V, 8]
output Y: f32[B, S, 8]
kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
workload w() {
    for b, t in P(B, S / 4) {
        let rows = Emb[1, ids[b, t*4 : t*4 + 4], :]
        cp[b, t](x = rows, y = Y[b, t*4 : t*4 + 4, :])
    }
}
schedule main = w()
"""

# the table and the indices are written by earlier tasks of the same run
WRITTEN = """
sym S, P
input  X: f32[P, 8]
input  src: i32[S]
scratch T: f32[P, 8]
scratch pos: i32[S]
output Y: f32[S, 8]
kernel dbl(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x * 2.0) }
kernel rev(i: In[Tile[1, 4, i32]], o: Out[Tile[1, 4, i32]], n: Scalar[i32]) { store(o, n - 1 - i) }
kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
workload w() {
    for r in P(P) { dbl[r](x = X[r:r + 1, :], y = T[r:r + 1, :]) }
    for t in P(S / 4) { rev[t](i = src[t*4 : t*4 + 4], o = pos[t*4 : t*4 + 4], n = P) }
    for t in P(S / 4) {
        cp[t](x = T[pos[t*4 : t*4 + 4], :], y = Y[t*4 : t*4 + 4, :])
    }
}
schedule main = w()
"""


def table(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@R.SETTINGS
@given(p=st.integers(1, 9), data=st.data())
def test_rows_by_position(p, data):
    pos = np.array(data.draw(st.lists(st.integers(0, p - 1), min_size=1, max_size=3)
                             .map(lambda xs: xs * 4)), np.int32)
    cos = table(np.random.default_rng(p), p, 8)
    out = both(ROWS, {"S": len(pos), "P": p}, {"pos": pos, "Cos": cos})
    np.testing.assert_array_equal(out["Y"], cos[pos] * np.float32(2.0))


@R.SETTINGS
@given(b=st.integers(1, 3), v=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_embedding_rows(b, v, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, v, (b, 8)).astype(np.int64)
    emb = table(rng, 2, v, 8)
    out = both(EMB, {"B": b, "S": 8, "V": v}, {"ids": ids, "Emb": emb})
    np.testing.assert_array_equal(out["Y"], emb[1][ids])


def test_rows_written_by_earlier_tasks_and_indices_too():
    rng = np.random.default_rng(3)
    x, src = table(rng, 5, 8), rng.integers(0, 5, 12).astype(np.int32)
    for workers in (1, 2):
        out = both(WRITTEN, {"S": 12, "P": 5}, {"X": x, "src": src}, workers=workers)
        np.testing.assert_array_equal(out["Y"], x[4 - src] * np.float32(2.0) + np.float32(1.0))


@pytest.mark.parametrize("bad, words", [
    (9, "index `pos[t * 4 + 1]` in `x = Cos[pos[t * 4 : t * 4 + 4], :]` must be less than P, "
        "found 9 and 9 (task `cp[t]` at t=1)"),
    (-2, "index `pos[t * 4 + 1]` in `x = Cos[pos[t * 4 : t * 4 + 4], :]` must not be negative, "
         "found -2 (task `cp[t]` at t=1)"),
])
def test_bad_index_is_an_error_at_the_view(bad, words):
    pos = np.zeros(8, np.int32)
    pos[5] = bad
    msg = same_error(ROWS, {"S": 8, "P": 9}, {"pos": pos, "Cos": np.ones((9, 8), np.float32)})
    assert msg.removesuffix("; the task was not launched") == words


def test_the_first_index_has_no_offset_in_its_name():
    pos = np.array([7, 0, 0, 0], np.int32)
    msg = same_error(ROWS, {"S": 4, "P": 3}, {"pos": pos, "Cos": np.ones((3, 8), np.float32)})
    assert msg.startswith("index `pos[t * 4]` in")


def test_the_dependencies_cover_every_row_and_the_index_slice():
    # every row of T (a box cannot name scattered rows), and the indices' slice
    text = print_module(ptowsp.parse(textwrap.dedent(WRITTEN), "t.wsp").ir)
    assert "x: r T[0:P, 0:8] rows=0 cols=1" in text
    assert "gather rows from pos[t * 4:t * 4 + 4]: pos@1, pos@2, pos@3, pos@4" in text


def test_ascend_refuses_a_gather_view_into_an_extern_kernel():
    # tile kernels gather on ascend_npu (tests/ascend/test_views.py); an extern body is not
    # handed gathered rows there
    text = ROWS.replace('{ store(y, x * 2.0) }',
                        'extern c """ (void)x; (void)y; """ extern ascend """ (void)x; (void)y; """')
    with pytest.raises(WspError) as info:
        compiled(text, "ascend_npu")
    (d,) = info.value.diagnostics
    assert d.message == ("in `cp[t]`, `x` is a gather view of `Cos` by `pos`, which the "
                         "ascend_npu target does not pass to the extern kernel `cp`")
    assert (d.span.line, d.span.col) == (9, 15)
    compiled(ROWS, "ascend_npu")  # the tile kernel: no error


@pytest.mark.parametrize("k, words", [
    (5, "must have at most 4 rows to fit Tile[4, 8, f32], found 5"),
    (0, "must have at least 1 row, found 0"),
])
def test_an_index_slice_longer_than_the_tile_or_empty_is_an_error_before_any_index_is_read(k, words):
    text = ROWS.replace("sym S, P", "sym S, P, K").replace("t*4 + 4], :]", "t*4 + K], :]")
    msg = same_error(text, {"S": 8, "P": 9, "K": k},
                     {"pos": np.full(8, 99, np.int32), "Cos": np.ones((9, 8), np.float32)})
    assert msg.removesuffix("; the task was not launched") == (
        f"`x = Cos[pos[t * 4 : t * 4 + K], :]` {words} (at t=0)")


# the last tile of a length that is not a multiple of 4 gathers fewer rows: a partial tile
PARTIAL = """
sym S, P
input  pos: i32[S]
input  Cos: f32[P, 8]
output Y: f32[S, 8]
output N: i32[S, 1]
kernel cp(x: In[Tile[4, 8, f32], pad = -1.0], y: Out[Tile[4, 8, f32]], n: Out[Tile[4, 1, i32]]) {
    store(y, x * 2.0 + colmax(x))             // the pad shows in a column's max
    store(n, valid_rows(x) + 0 * col_index(4, 1))
}
workload w() {
    for t in P(ceildiv(S, 4)) {
        let r = t*4 : min(t*4 + 4, S)
        cp[t](x = Cos[pos[t*4 : min(t*4 + 4, S)], :], y = Y[t*4 : min(t*4 + 4, S), :],
              n = N[t*4 : min(t*4 + 4, S), :])
    }
}
schedule main = w()
""".replace("        let r = t*4 : min(t*4 + 4, S)\n", "")


@R.SETTINGS
@given(p=st.integers(1, 9), data=st.data())
def test_a_short_index_slice_gathers_a_partial_tile(p, data):
    pos = np.array(data.draw(st.lists(st.integers(0, p - 1), min_size=1, max_size=11)), np.int32)
    cos = table(np.random.default_rng(p), p, 8)
    out = both(PARTIAL, {"S": len(pos), "P": p}, {"pos": pos, "Cos": cos})
    s = len(pos)
    want_y = np.empty((s, 8), np.float32)
    for t in range(0, s, 4):
        tile = np.full((4, 8), -1.0, np.float32)  # the pad
        tile[:min(4, s - t)] = cos[pos[t:t + 4]]
        want_y[t:t + 4] = (tile * np.float32(2.0) + tile.max(axis=0))[:min(4, s - t)]
    np.testing.assert_array_equal(out["Y"], want_y)
    want = np.array([[min(4, s - (i // 4) * 4)] for i in range(s)], np.int32)
    np.testing.assert_array_equal(out["N"], want)
