"""Transposed views (language.md section 6, "Transposed views"): `VIEW.T` passes a tensor view
to a tile with its rows and columns swapped. cpu_sim == ref == NumPy's `.T` over shapes, dtypes
(f32, f16, i32) and modes (In, Out, InOut, any mix of transposed and plain arguments); `let`s
of transposed views and `.T.T`; a 1-D view's `.T` (a column); partial transposed views (pad and
store-only-the-view); dependencies on the untransposed box (a transposed Out read back, plain,
by the next task); the IR; ascend_npu's compile error.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ptowsp import driver
from ptowsp.diagnostics import WspError
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V

pytestmark = pytest.mark.cc

# the partial-tile tests' settings, build cache and compiled programs (one per text and target)
from .test_partial_tiles import SETTINGS, _cache, compiled  # noqa: E402, F401


def both(text: str, bind: dict, arrays: dict, workers=None) -> dict:
    """The outputs of ref, checked bit for bit against cpu_sim's (every test's values are
    small integers, exact in every dtype and every order of additions)."""
    cpu = compiled(text, "cpu_sim").run(bind=bind, workers=workers, **arrays)
    ref = compiled(text, "ref").run(bind=bind, **arrays)
    assert set(cpu) == set(ref)
    for k in ref:
        np.testing.assert_array_equal(cpu[k], ref[k], err_msg=k)
    return ref


def ints(rng, shape, dtype) -> np.ndarray:
    return rng.integers(-8, 9, shape).astype(dtype)


# One kernel reading x (In), updating z (InOut) and writing y (Out); each argument is passed
# plainly or transposed, the tensor laid out to fit: `X[b].T` of an [C, R] slice is [R, C].
MODES = """\
    sym B
    input  X: DT[B, XS]
    inout  Z: DT[B, ZS]
    output Y: DT[B, YS]
    kernel k(x: In[Tile[R, C, DT]], z: InOut[Tile[R, C, DT]], y: Out[Tile[R, C, DT]]) {
        store(y, x * 2 + z)
        store(z, z - x)
    }
    axis batch = DenseDyn(B)
    workload w() {
        for b in P(batch) {
            k[b](x = XV, z = ZV, y = YV)
        }
    }
"""

DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32}


def modes_program(r: int, c: int, dt: str, flips: tuple[bool, bool, bool]) -> str:
    text = MODES.replace("DT", dt).replace("R, C", f"{r}, {c}")
    for name, flip in zip("XZY", flips):
        text = text.replace(f"{name}S", f"{c}, {r}" if flip else f"{r}, {c}")
        text = text.replace(f"{name}V", f"{name}[b].T" if flip else f"{name}[b]")
    return text


@SETTINGS
@given(r=st.sampled_from([1, 3, 16]), c=st.sampled_from([1, 5, 32]),
       dt=st.sampled_from(sorted(DTYPES)), flips=st.tuples(st.booleans(), st.booleans(),
                                                           st.booleans()),
       b=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_in_out_inout_through_transposed_views(r, c, dt, flips, b, seed):
    rng = np.random.default_rng(seed)
    shape = {name: (b, c, r) if flip else (b, r, c) for name, flip in zip("XZY", flips)}
    X, Z = ints(rng, shape["X"], DTYPES[dt]), ints(rng, shape["Z"], DTYPES[dt])
    out = both(modes_program(r, c, dt, flips), {"B": b}, {"X": X, "Z": Z}, workers=2)

    def tile(a, flip):  # NumPy's `.T` of each batch's slice, as the kernel sees it
        return a.transpose(0, 2, 1) if flip else a

    x, z = tile(X, flips[0]).astype(np.int64), tile(Z, flips[1]).astype(np.int64)
    np.testing.assert_array_equal(tile(out["Y"], flips[2]), x * 2 + z)
    np.testing.assert_array_equal(tile(out["Z"], flips[1]), z - x)


# `let`s of transposed views, `.T.T`, and a 1-D view's `.T` (a column).
LETS = """\
    sym B
    input  K: f32[B, 8, 4]
    input  V: f32[B, 8]
    output S: f32[B, 4, 8]
    output U: f32[B, 8, 4]
    output C: f32[B, 8, 1]
    kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
    kernel cp2(x: In[Tile[8, 4, f32]], y: Out[Tile[8, 4, f32]]) { store(y, x) }
    kernel col(v: In[Tile[8, 1, f32]], y: Out[Tile[8, 1, f32]]) { store(y, v * 3.0) }
    axis batch = DenseDyn(B)
    workload w() {
        for b in P(batch) {
            let kt = K[b, :, :].T
            let k2 = kt
            cp[b](x = k2, y = S[b])
            cp2[b](x = kt.T, y = U[b].T.T)
            col[b](v = V[b, :].T, y = C[b])
        }
    }
"""


@SETTINGS
@given(b=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_lets_double_transposes_and_columns(b, seed):
    rng = np.random.default_rng(seed)
    K, V = ints(rng, (b, 8, 4), np.float32), ints(rng, (b, 8), np.float32)
    out = both(LETS, {"B": b}, {"K": K, "V": V})
    np.testing.assert_array_equal(out["S"], K.transpose(0, 2, 1) + 1)
    np.testing.assert_array_equal(out["U"], K)
    np.testing.assert_array_equal(out["C"][:, :, 0], V * 3)


# Attention scores over a ragged key length, the keys passed transposed: the last key tile is
# partial along the tile's columns (the view's rows). pad = -inf keeps it out of rowmax; the
# transposed Out writes only the view.
RAGGED = """\
    sym B, S
    input  L: i32[B]
    input  Q: f32[B, 4, 8]
    input  K: f32[B, S, 8]
    output SC: f32[B, 4, S]
    output MX: f32[B, S / 16, 8]
    output KC: f32[B, S, 8]
    kernel scores(q: In[Tile[4, 8, f32]], kt: In[Tile[8, 16, f32], pad = 0],
                  kt2: In[Tile[8, 16, f32], pad = -inf], s: Out[Tile[4, 16, f32]],
                  mx: Out[Tile[1, 8, f32]], kc: Out[Tile[8, 16, f32]]) {
        store(s, matmul(q, kt))
        store(mx, transpose(rowmax(kt2)))
        store(kc, kt * 2.0 + valid_cols(kt))
    }
    axis batch = DenseDyn(B)
    axis tiles = Ragged(batch, ceildiv(L[_], 16))
    workload w() {
        for b in P(batch) {
            for t in P(tiles[b]) {
                let k = K[b, t*16 : min(t*16 + 16, L[b]), :]
                scores[b, t](q = Q[b], kt = k.T, kt2 = k.T, s = SC[b, :, t*16 : min(t*16 + 16, L[b])],
                             mx = MX[b, t, :], kc = KC[b, t*16 : min(t*16 + 16, L[b]), :].T)
            }
        }
    }
"""


@SETTINGS
@given(lens=st.lists(st.sampled_from([1, 5, 15, 16, 17, 32]), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_partial_transposed_views_pad_and_store_only_the_view(lens, seed):
    S = 32
    rng = np.random.default_rng(seed)
    bsz = len(lens)
    L = np.array(lens, np.int32)
    Q, K = ints(rng, (bsz, 4, 8), np.float32), ints(rng, (bsz, S, 8), np.float32)
    out = both(RAGGED, {"B": bsz, "S": S}, {"L": L, "Q": Q, "K": K}, workers=2)
    q64, k64 = Q.astype(np.float64), K.astype(np.float64)
    for b, n in enumerate(lens):
        np.testing.assert_array_equal(out["SC"][b, :, :n], q64[b] @ k64[b, :n].T)
        assert not out["SC"][b, :, n:].any() and not out["KC"][b, n:].any()
        for t in range(-(-n // 16)):
            rows = K[b, t * 16: min(t * 16 + 16, n)]
            np.testing.assert_array_equal(out["MX"][b, t], rows.max(axis=0))  # -inf pad ignored
            np.testing.assert_array_equal(out["KC"][b, t * 16: t * 16 + len(rows)],
                                          rows * 2 + len(rows))


# A transposed Out read back, plainly, by the next task of the same grid cell, and overwritten
# (transposed) after it: dependencies are on the box, the same elements either way.
DEPS = """\
    sym B
    input  X: f32[B, 16, 8]
    scratch T: f32[B, 8, 16]
    output Y: f32[B, 8, 16]
    output W: f32[B, 16, 8]
    kernel put(x: In[Tile[16, 8, f32]], t: Out[Tile[16, 8, f32]]) { store(t, x * 2.0) }
    kernel get(t: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, t + 1.0) }
    kernel back(t: In[Tile[16, 8, f32]], w: Out[Tile[16, 8, f32]]) { store(w, t) }
    axis batch = DenseDyn(B)
    workload w() {
        for b in P(batch) {
            put[b](x = X[b], t = T[b].T)
            get[b](t = T[b], y = Y[b])
            put[b](x = X[b] , t = T[b].T)
            back[b](t = T[b].T, w = W[b])
        }
    }
"""


@SETTINGS
@given(b=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_a_transposed_out_orders_tasks_on_its_elements(b, seed):
    rng = np.random.default_rng(seed)
    X = ints(rng, (b, 16, 8), np.float32)
    out = both(DEPS, {"B": b}, {"X": X}, workers=4)
    np.testing.assert_array_equal(out["Y"], X.transpose(0, 2, 1) * 2 + 1)
    np.testing.assert_array_equal(out["W"], X * 2)


def test_the_box_of_a_transposed_view_is_the_untransposed_one():
    """Dependencies are inferred on boxes: `T[b].T` and `T[b]` have the same one (the same
    elements); only the tile's dimensions differ. The IR prints them."""
    ir = driver.lower(driver.check_text(textwrap.dedent(DEPS), "t.wsp"))
    put, get = [t for t in V.tasks(ir.schedules[0].body)][:2]
    wt = next(a for a in put.args if isinstance(a, N.TileArg) and a.param == "t")
    rt = next(a for a in get.args if isinstance(a, N.TileArg) and a.param == "t")
    assert (wt.offsets, wt.extents) == (rt.offsets, rt.extents)
    assert (wt.row_dim, wt.col_dim, wt.transposed) == (2, 1, True)
    assert (rt.row_dim, rt.col_dim, rt.transposed) == (1, 2, False)
    from ptowsp.ir.printer import print_module
    assert "t: w T[b, 0:8, 0:16] rows=2 cols=1" in print_module(ir)


def test_ascend_refuses_a_transposed_view():
    with pytest.raises(WspError) as info:
        compiled(LETS, "ascend_npu")
    messages = [(d.message, d.span.line) for d in info.value.diagnostics]
    assert ("in `cp[b]`, `x` is a transposed view of `K`, which the ascend_npu target does "
            "not run", 13) in messages
    assert ("in `col[b]`, `v` is a transposed view of `V`, which the ascend_npu target does "
            "not run", 17) in messages


EXTERN = """\
    input  X: f32[8, 4]
    output Y: f32[8, 4]
    kernel e(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern c \"\"\"
        for (int i = 0; i < x.rows; ++i)
            for (int j = 0; j < x.cols; ++j)
                y.data[i * y.stride + j] = x.data[i * x.stride + j] * 10 + i;
    \"\"\"
    workload w() { e(x = X.T, y = Y.T) }
"""


def test_an_extern_c_kernel_sees_the_transposed_tile():
    """An `extern c` body indexes rows with `stride` only: cpu_sim hands it contiguous copies of
    a transposed view (and writes a transposed Out back)."""
    X = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = compiled(EXTERN, "cpu_sim").run(X=X)["Y"]
    np.testing.assert_array_equal(out, (X.T * 10 + np.arange(4)[:, None]).T)
