"""Partial tiles (language.md section 4, "Partial tiles", and section 6): a view shorter than its
tile. cpu_sim == ref == a NumPy formula (float64 where it matters) over lengths that are and are
not multiples of the tile, 1 included; the pad seen through reductions (rowmax with pad = -inf,
rowsum with the default 0); stores that never touch the tensor outside the view; two tasks on
either side of a ragged edge, one reading what the other wrote; valid_rows/valid_cols; the
run-time checks of a view's extent (ascend_npu: tests/ascend/test_views.py).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError

pytestmark = pytest.mark.cc

SETTINGS = settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


_PROGRAMS: dict = {}


def compiled(text: str, target: str):
    key = (text, target)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = ptowsp.parse(textwrap.dedent(text), "t.wsp").compile(target=target)
    return _PROGRAMS[key]


def both(text: str, bind: dict, arrays: dict, workers=None) -> dict:
    cpu = compiled(text, "cpu_sim").run(bind=bind, workers=workers, **arrays)
    ref = compiled(text, "ref").run(bind=bind, **arrays)
    for k in ref:
        if ref[k].dtype.kind == "f":  # a row sum's order of additions is the target's own
            np.testing.assert_allclose(cpu[k], ref[k], rtol=2e-6, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(cpu[k], ref[k], err_msg=k)
    return ref


# Rows of a ragged batch in 16-row tiles: the last tile of each sequence is partial.
ROWS = """\
    sym B, S
    input  L: i32[B]
    input  X: f32[B, S, 32]
    output Y: f32[B, S, 32]
    output MX: f32[B, S, 1]
    output SM: f32[B, S, 1]
    output N: i32[B, S, 2]
    kernel k(x: In[Tile[16, 32, f32], pad = -inf], z: In[Tile[16, 32, f32]],
             y: Out[Tile[16, 32, f32]], mx: Out[Tile[16, 1, f32]], sm: Out[Tile[16, 1, f32]],
             n: Out[Tile[16, 2, i32]]) {
        store(y, z * 2.0 + 1.0)
        store(mx, rowmax(x))
        store(sm, rowsum(z))
        store(n, where(col_index(16, 2) == 0, valid_rows(x), valid_cols(y)))
    }
    axis batch = DenseDyn(B)
    axis tiles = Ragged(batch, ceildiv(L[_], 16))
    workload w() {
        for b in P(batch) {
            for t in P(tiles[b]) {
                let r = X[b, t*16 : min(t*16 + 16, L[b]), :]
                k[b, t](x = r, z = r, y = Y[b, t*16 : min(t*16 + 16, L[b]), :],
                        mx = MX[b, t*16 : min(t*16 + 16, L[b]), :],
                        sm = SM[b, t*16 : min(t*16 + 16, L[b]), :],
                        n = N[b, t*16 : min(t*16 + 16, L[b]), :])
            }
        }
    }
"""


@SETTINGS
@given(lens=st.lists(st.sampled_from([1, 2, 15, 16, 17, 31, 32, 33, 40]), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_ragged_rows_pad_reduce_and_store_only_the_view(lens, seed):
    S = 48
    L = np.array(lens, np.int32)
    X = np.random.default_rng(seed).standard_normal((len(lens), S, 32)).astype(np.float32)
    out = both(ROWS, {"B": len(lens), "S": S}, {"L": L, "X": X})
    x64 = X.astype(np.float64)
    for b, n in enumerate(lens):
        # inside the view: the formula; outside it: never written (the outputs' zero fill)
        np.testing.assert_allclose(out["Y"][b, :n], x64[b, :n] * 2 + 1, rtol=1e-6)
        assert not out["Y"][b, n:].any() and not out["MX"][b, n:].any()
        # pad = -inf: rowmax sees only the view's columns (all 32 here); pad 0: sums unchanged
        np.testing.assert_array_equal(out["MX"][b, :n, 0], X[b, :n].max(axis=1))
        np.testing.assert_allclose(out["SM"][b, :n, 0], x64[b, :n].sum(axis=1), rtol=1e-5,
                                   atol=1e-5)
        rows = np.minimum(16, n - (np.arange(n) // 16) * 16)
        np.testing.assert_array_equal(out["N"][b, :n, 0], rows)
        np.testing.assert_array_equal(out["N"][b, :n, 1], 32)


# Columns: a Tile[4, 16] over a tensor 4 x C, C not a multiple of 16; pad -inf vs 0 in a row max.
COLS = """\
    sym C
    input  X: f32[4, C]
    output MX: f32[4, 1]
    output SM: f32[4, 1]
    output Y: f32[4, C]
    kernel first(x: In[Tile[4, 16, f32], pad = -inf], z: In[Tile[4, 16, f32], pad = 0],
                 mx: Out[Tile[4, 1, f32]], sm: Out[Tile[4, 1, f32]], y: Out[Tile[4, 16, f32]]) {
        store(mx, rowmax(x))
        store(sm, rowmax(z))
        store(y, z - valid_cols(x))
    }
    workload w() {
        first(x = X[:, 0 : min(16, C)], z = X[:, 0 : min(16, C)], mx = MX, sm = SM,
              y = Y[:, 0 : min(16, C)])
    }
"""


@SETTINGS
@given(c=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_partial_columns_with_pads(c, seed):
    X = (-1.0 - np.random.default_rng(seed).random((4, c))).astype(np.float32)  # all negative
    out = both(COLS, {"C": c}, {"X": X})
    v = min(16, c)
    np.testing.assert_array_equal(out["MX"][:, 0], X[:, :v].max(axis=1))
    # pad 0 is larger than every element: it shows through the max exactly when the view is short
    np.testing.assert_array_equal(out["SM"][:, 0], X[:, :v].max(axis=1) if v == 16 else 0.0)
    np.testing.assert_array_equal(out["Y"][:, :v], X[:, :v] - np.float32(v))
    assert not out["Y"][:, v:].any()


# Two tasks around an edge: the second reads what the first wrote, through partial views, and
# each writes only its own rows (no task may clobber its neighbour's rows with padding).
EDGE = """\
    sym N
    input  X: f32[N, 8]
    scratch T: f32[N, 8]
    output Y: f32[N, 8]
    kernel inc(x: In[Tile[16, 8, f32]], y: Out[Tile[16, 8, f32]]) { store(y, x + 1.0) }
    kernel dbl(x: InOut[Tile[16, 8, f32], pad = 5], y: Out[Tile[16, 8, f32]]) {
        store(y, x * 2.0 + rowsum(x) * 0.0)
        store(x, x * 0.5)
    }
    workload w() {
        for t in P(ceildiv(N, 16)) {
            inc[t](x = X[t*16 : min(t*16 + 16, N), :], y = T[t*16 : min(t*16 + 16, N), :])
        }
        for t in P(ceildiv(N, 16)) {
            dbl[t](x = T[t*16 : min(t*16 + 16, N), :], y = Y[t*16 : min(t*16 + 16, N), :])
        }
    }
"""


@SETTINGS
@given(n=st.sampled_from([1, 7, 16, 17, 33, 47]), seed=st.integers(0, 2**16))
def test_two_tasks_around_an_edge(n, seed):
    X = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    out = both(EDGE, {"N": n}, {"X": X}, workers=2)
    np.testing.assert_array_equal(out["Y"], (X + np.float32(1)) * np.float32(2))


# A decode step: one token's row into a 16-row tile (no Constexpr tier, no padding of the data).
DECODE = """\
    sym B, S
    input  P: i32[B]
    input  X: f32[B, S, 16]
    output Y: f32[B, 1, 16]
    kernel norm(x: In[Tile[16, 16, f32]], y: Out[Tile[16, 16, f32]]) {
        store(y, x * rsqrt(rowsum(x * x) / valid_cols(x) + 1e-6))
    }
    workload w() {
        for b in P(B) { norm[b](x = X[b, P[b] : P[b] + 1, :], y = Y[b, 0:1, :]) }
    }
"""


def test_one_decode_row_in_a_sixteen_row_tile():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3, 5, 16)).astype(np.float32)
    P = np.array([0, 4, 2], np.int32)
    out = both(DECODE, {"B": 3, "S": 5}, {"P": P, "X": X})
    x = X[np.arange(3), P].astype(np.float64)
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(out["Y"][:, 0], want, rtol=1e-5)


TOO_LONG = """\
    sym N
    input  X: f32[N, 8]
    input  L: i32[2]
    output Y: f32[N, 8]
    kernel copy(x: In[Tile[2, 8, f32]], y: Out[Tile[2, 8, f32]]) { store(y, x) }
    workload w() { copy(x = X[0 : L[0]], y = Y[0 : 2]) }
"""


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_view_longer_than_its_tile_or_empty_is_an_error_at_run_time(target):
    X = np.zeros((4, 8), np.float32)
    with pytest.raises(WspError) as info:
        compiled(TOO_LONG, target).run(X=X, L=np.array([3, 0], np.int32))
    assert info.value.diagnostics[0].message.startswith(
        "`x = X[0 : L[0]]` must have at most 2 rows to fit Tile[2, 8, f32], found 3")
    with pytest.raises(WspError) as info:
        compiled(TOO_LONG, target).run(X=X, L=np.array([0, 0], np.int32))
    assert info.value.diagnostics[0].message.startswith(
        "`x = X[0 : L[0]]` must have at least 1 row, found 0")
    out = compiled(TOO_LONG, target).run(X=X + 1, L=np.array([1, 0], np.int32))
    np.testing.assert_array_equal(out["Y"], [[1] * 8, [0] * 8, [0] * 8, [0] * 8])


# A partial activation tile beside whole ones: a weight read in place, a whole tile with
# strided columns (the middle dimension of a 3-D tensor) and a whole InOut that a partial In of
# the same tensor overlaps. cpu_sim copies only what it must (the partial tiles, the strided
# one, the overlapping pair) and must still agree with ref and NumPy.
MIXED = """\
    sym T
    input  X: f32[T, 32]
    input  W: f32[32, 32]
    input  G: f32[32, 32, 2]
    inout  A: f32[T, 32]
    output Y: f32[T, 32]
    kernel k(x: In[Tile[16, 32, f32]], w: In[Tile[32, 32, f32]], g: In[Tile[32, 32, f32]],
             a: In[Tile[16, 32, f32]], acc: InOut[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) {
        store(y, matmul(x, w) + matmul(x, g))
        store(acc, acc + a * 2.0)
    }
    axis tiles = DenseDyn(ceildiv(T, 16))
    workload w() {
        for t in P(tiles) {
            let r0 = t * 16
            let r1 = min(r0 + 16, T)
            k[t](x = X[r0 : r1, :], w = W, g = G[:, :, 1], a = A[r0 : r1, :],
                 acc = A[0:16, :], y = Y[r0 : r1, :])
        }
    }
"""


@pytest.mark.parametrize("T", [16, 21, 37])
def test_whole_tiles_beside_a_partial_one_are_read_in_place_and_agree(T):
    rng = np.random.default_rng(T)
    X = rng.standard_normal((T, 32)).astype(np.float32)
    W = (rng.standard_normal((32, 32)) * 0.05).astype(np.float32)
    G = (rng.standard_normal((32, 32, 2)) * 0.05).astype(np.float32)
    A = rng.standard_normal((T, 32)).astype(np.float32)
    out = both(MIXED, {}, {"X": X, "W": W, "G": G, "A": A.copy()}, workers=1)
    x64 = X.astype(np.float64)
    np.testing.assert_allclose(out["Y"], x64 @ W + x64 @ G[:, :, 1], rtol=1e-5, atol=1e-5)
    a = A.astype(np.float64)
    for t in range(-(-T // 16)):  # in task order: each adds twice its rows (0-padded) to A[0:16]
        part = np.zeros((16, 32))
        rows = a[t * 16:min(t * 16 + 16, T)]
        part[:len(rows)] = rows
        a[0:16] += 2.0 * part
    np.testing.assert_allclose(out["A"], a, rtol=1e-5, atol=1e-5)


# Decode attention's shape: one query row against key blocks whose last one is partial, read
# in place (no padded copy): the dot form of q @ k^T, the small-M form of p @ v, the
# register-blocked form (16 rows: B packed from the view and the pad), an elementwise read
# with pad = -inf, each past the view reading the pad.
IN_PLACE = """\
    sym N
    const KB = 32
    input  Q: f32[1, 16]
    input  K: f32[N, 16]
    input  V: f32[N, 16]
    input  P: f32[1, N]
    output S: f32[ceildiv(N, KB), KB]
    output O: f32[ceildiv(N, KB), 16]
    output M: f32[ceildiv(N, KB), 16]
    input  P16: f32[16, ceildiv(N, KB) * KB]
    output O16: f32[ceildiv(N, KB), 16, 16]
    kernel scores(q: In[Tile[1, 16, f32]], k: In[Tile[KB, 16, f32]], s: Out[Tile[1, KB, f32]]) {
        store(s, matmul(q, transpose(k)))
    }
    kernel mix(p: In[Tile[1, KB, f32]], v: In[Tile[KB, 16, f32]], o: Out[Tile[1, 16, f32]]) {
        store(o, matmul(p, v))
    }
    kernel mix16(p: In[Tile[16, KB, f32]], v: In[Tile[KB, 16, f32]], o: Out[Tile[16, 16, f32]]) {
        store(o, matmul(p, v))
    }
    kernel top(v: In[Tile[KB, 16, f32], pad = -inf], m: Out[Tile[1, 16, f32]]) {
        store(m, transpose(rowmax(transpose(v))))
    }
    axis blocks = DenseDyn(ceildiv(N, KB))
    workload w() {
        for j in P(blocks) {
            let r0 = j * KB
            let r1 = min(j * KB + KB, N)
            scores[j](q = Q, k = K[r0 : r1, :], s = S[j : j + 1, :])
            mix[j](p = P[:, r0 : r0 + KB], v = V[r0 : r1, :], o = O[j : j + 1, :])
            top[j](v = V[r0 : r1, :], m = M[j : j + 1, :])
            mix16[j](p = P16[:, r0 : r0 + KB], v = V[r0 : r1, :], o = O16[j, :, :])
        }
    }
    schedule main = w()
"""


@SETTINGS
@given(n=st.integers(1, 100), seed=st.integers(0, 2**16))
def test_partial_rows_are_read_in_place_with_the_pad_past_the_view(n, seed):
    rng = np.random.default_rng(seed)
    nb = -(-n // 32)
    def quarters(*shape):  # exact sums in any order: the forms add in their own orders
        return (rng.integers(-8, 9, shape) / 4).astype(np.float32)

    a = {"Q": quarters(1, 16), "K": quarters(n, 16), "V": quarters(n, 16),
         "P": quarters(1, nb * 32), "P16": quarters(16, nb * 32)}
    out = both(IN_PLACE.replace("P: f32[1, N]", "P: f32[1, ceildiv(N, KB) * KB]"), {}, a)
    k = np.zeros((nb * 32, 16))
    k[:n] = a["K"]
    v = np.zeros((nb * 32, 16))
    v[:n] = a["V"]
    vm = np.full((nb * 32, 16), -np.inf)
    vm[:n] = a["V"]
    q, p = a["Q"].astype(np.float64), a["P"].astype(np.float64)
    for j in range(nb):
        blk = slice(j * 32, j * 32 + 32)
        np.testing.assert_allclose(out["S"][j], (q @ k[blk].T)[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["O"][j], (p[:, blk] @ v[blk])[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(out["M"][j], vm[blk].max(axis=0).astype(np.float32))
        np.testing.assert_allclose(out["O16"][j], a["P16"][:, blk].astype(np.float64) @ v[blk],
                                   rtol=1e-5, atol=1e-5)


def test_kernels_given_partial_rows_get_a_body_that_reads_them_in_place():
    """What the test above runs: each kernel has its in-place body (`wsp_kbr_`), so the
    partial blocks never take the padded copy; a kernel whose views are whole has none."""
    src = IN_PLACE.replace("P: f32[1, N]", "P: f32[1, ceildiv(N, KB) * KB]")
    prog = compiled(src, "cpu_sim")
    c = (prog._backend.directory / "kernels.c").read_text()
    for k in ("scores", "mix", "mix16", "top"):
        assert f"static int wsp_kbr_{k}(" in c, k
    whole = compiled(src.replace("let r1 = min(j * KB + KB, N)", "let r1 = j * KB + KB")
                     .replace("sym N", "sym N = 64"), "cpu_sim")
    assert "wsp_kbr_" not in (whole._backend.directory / "kernels.c").read_text()
