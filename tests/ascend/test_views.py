"""Partial tiles and gather views on ascend_npu (language.md section 4, "Partial tiles", and
section 6, "Gather views"), end to end as test_end_to_end.py runs a tree: the emitted host
program, expander, dispatcher and AICore kernels compiled with g++ against the stand-in ACL
and the CPU Ascend C (whose rule checks stay on), run on the host, each output equal to ref's.

Partial: ragged last tiles of 16 rows (pad -inf under a rowmax, the default 0 under a rowsum,
valid_rows / valid_cols, stores that never touch the tensor past the view), a column edge
(pad -inf vs 0), a one-row decode view, an InOut whose store writes only its view, an i64
tile whose pad's two words differ (the scalar unit's fill) and a matmul whose right operand is
partial (its streamed rows padded with 0). Gather: a RoPE-style table read through i32
positions and an embedding read through a row of an i64 id matrix, with the index-range error
reported as cpu_sim reports it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.ir.passes import optimize

from ..backends import test_gather_views as GV
from ..backends import test_partial_tiles as PT
from .hostrun import build_host, run, write_inputs

pytestmark = [pytest.mark.cc]

SETTINGS = settings(max_examples=4, suppress_health_check=[HealthCheck.function_scoped_fixture])

_BUILT: dict = {}


def build(tmp: Path, text: str):
    """The host binary of the tree of `text` (its `main` schedule) and the optimised IR; one
    build per program for the session."""
    if text in _BUILT:
        return _BUILT[text]
    module = ptowsp.parse(textwrap.dedent(text), "t.wsp")
    ir, _ = optimize(module.ir, 2)
    _, exe = build_host(tmp, ir, "main")
    _BUILT[text] = (exe, module)
    return _BUILT[text]


def npu(tmp_path_factory, text: str, bind: dict, arrays: dict, *opts):
    """(the run, its outputs): the tree of `text` run on `arrays` with the symbols `bind`."""
    exe, module = build(tmp_path_factory.mktemp("tree"), text)
    data = tmp_path_factory.mktemp("data")
    write_inputs(data, arrays)
    done = run(exe, data, *opts, *(f"{k}={v}" for k, v in bind.items()))
    outs = {p.stem: np.load(p) for p in (data / "output").glob("*.npy")}
    return done, outs, module


def same_as_ref(tmp_path_factory, text: str, bind: dict, arrays: dict, *opts, rtol=0.0):
    """The tree's outputs, each equal to ref's (bit for bit, or to `rtol` of the largest)."""
    done, got, module = npu(tmp_path_factory, text, bind, arrays, *opts)
    assert done.returncode == 0, done.stdout + done.stderr
    want = module.compile("ref").run(bind=bind, **arrays)
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].shape == w.shape and got[k].dtype == w.dtype, k
        if rtol:
            w64 = w.astype(np.float64)
            scale = max(float(np.max(np.abs(w64[np.isfinite(w64)]), initial=1.0)), 1.0)
            np.testing.assert_allclose(got[k], w, rtol=rtol, atol=rtol * scale, err_msg=k)
        else:
            np.testing.assert_array_equal(got[k], w, err_msg=k)
    return want


# Rows of a ragged batch in 16-row tiles: the last tile of each sequence is partial.
ROWS = PT.ROWS + "    schedule main = w()\n"  # the ragged rows of tests/backends

@SETTINGS
@given(lens=st.lists(st.sampled_from([1, 2, 15, 16, 17, 33, 40]), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_ragged_rows_pad_reduce_and_store_only_the_view(tmp_path_factory, lens, seed):
    S = 48
    L = np.array(lens, np.int32)
    X = np.random.default_rng(seed).standard_normal((len(lens), S, 32)).astype(np.float32)
    out = same_as_ref(tmp_path_factory, ROWS, {"B": len(lens), "S": S}, {"L": L, "X": X},
                      "-b", "3", rtol=1e-6)
    x64 = X.astype(np.float64)
    for b, n in enumerate(lens):  # ref itself, against the formula
        np.testing.assert_array_equal(out["MX"][b, :n, 0], X[b, :n].max(axis=1))
        np.testing.assert_allclose(out["SM"][b, :n, 0], x64[b, :n].sum(axis=1), rtol=1e-5,
                                   atol=1e-5)
        assert not out["Y"][b, n:].any()
        np.testing.assert_array_equal(out["N"][b, :n, 0], np.minimum(16, n - np.arange(n) // 16 * 16))


# Columns: a Tile[4, 16] over 4 x C, C not a multiple of 16; pad -inf vs 0 in a row max.
COLS = PT.COLS + "    schedule main = w()\n"

@pytest.mark.parametrize("C", [3, 8, 16, 20])
def test_a_column_edge_pads_with_each_parameters_value(tmp_path_factory, C):
    X = -np.abs(np.random.default_rng(C).standard_normal((4, C)).astype(np.float32)) - 1
    out = same_as_ref(tmp_path_factory, COLS, {"C": C}, {"X": X})
    n = min(16, C)
    np.testing.assert_array_equal(out["MX"][:, 0], X[:, :n].max(axis=1))
    # the pad 0 is the row max of negative rows when the view is shorter than the tile
    np.testing.assert_array_equal(out["SM"][:, 0], 0.0 if n < 16 else X[:, :16].max(axis=1))
    assert not out["Y"][:, n:].any()


# One decode token: a 1-row view of the cache into 8-row tiles, an InOut updated in its view
# only, and an i64 tile padded with a value whose two 32-bit words differ.
DECODE = """\
    sym T, P
    input  K: f32[T, 64]
    input  Q: f32[1, 64]
    inout  ACC: f32[T, 64]
    output S: f32[1, 8]
    input  ID: i64[T, 4]
    output IS: i64[8, 1]
    kernel dot(k: In[Tile[8, 64, f32]], q: In[Tile[1, 64, f32]], s: Out[Tile[1, 8, f32]],
               a: InOut[Tile[8, 64, f32], pad = 1.5]) {
        store(s, transpose(rowsum(k * q)))
        store(a, a * 2.0 + k)
    }
    kernel ids(i: In[Tile[8, 4, i64], pad = -4294967296], o: Out[Tile[8, 1, i64]]) {
        store(o, rowsum(i))
    }
    workload w() {
        dot(k = K[P : P + 1, :], q = Q, s = S[:, 0:8], a = ACC[P : P + 1, :])
        ids(i = ID[P : P + 1, 0 : 3], o = IS)
    }
    schedule main = w()
"""


@pytest.mark.parametrize("P", [0, 5])
def test_a_one_row_decode_view(tmp_path_factory, P):
    rng = np.random.default_rng(P)
    arrays = {"K": rng.standard_normal((8, 64)).astype(np.float32),
              "Q": rng.standard_normal((1, 64)).astype(np.float32),
              "ACC": rng.standard_normal((8, 64)).astype(np.float32),
              "ID": rng.integers(-9, 9, (8, 4)).astype(np.int64)}
    out = same_as_ref(tmp_path_factory, DECODE, {"T": 8, "P": P}, arrays, rtol=1e-6)
    # past the view: the pad's row sums (k pads with 0, a with 1.5; ids with -2^32)
    np.testing.assert_array_equal(out["S"][0, 1:], 0.0)
    np.testing.assert_array_equal(out["IS"][1:, 0], 4 * -4294967296)
    assert out["IS"][0, 0] == arrays["ID"][P, :3].sum() - 4294967296
    keep = np.delete(np.arange(8), P)
    np.testing.assert_array_equal(out["ACC"][keep], arrays["ACC"][keep])


# A matmul whose operands are partial: rows of A and rows (K) of B past L are 0.
MATMUL = """\
    sym L
    input  A: f32[32, L]
    input  B: f32[L, 32]
    output C: f32[32, 32]
    kernel mm(a: In[Tile[32, 32, f32]], b: In[Tile[32, 32, f32]], c: Out[Tile[32, 32, f32]]) {
        store(c, matmul(a, b))
    }
    workload w() { mm(a = A[:, 0 : min(L, 32)], b = B[0 : min(L, 32), :], c = C) }
    schedule main = w()
"""


@pytest.mark.parametrize("L", [5, 32])
def test_a_matmul_over_a_partial_inner_dimension(tmp_path_factory, L):
    rng = np.random.default_rng(L)
    A = rng.standard_normal((32, L)).astype(np.float32)
    B = rng.standard_normal((L, 32)).astype(np.float32)
    out = same_as_ref(tmp_path_factory, MATMUL, {"L": L}, {"A": A, "B": B}, rtol=1e-5)
    np.testing.assert_allclose(out["C"], A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


ROPE = GV.ROWS  # tests/backends/test_gather_views.py's programs
EMB = GV.EMB

@SETTINGS
@given(seed=st.integers(0, 2**16))
def test_a_gather_view_reads_the_rows_its_indices_name(tmp_path_factory, seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 9, 12).astype(np.int32)
    Cos = rng.standard_normal((9, 8)).astype(np.float32)
    out = same_as_ref(tmp_path_factory, ROPE, {"S": 12, "P": 9}, {"pos": pos, "Cos": Cos},
                      "-b", "2")
    np.testing.assert_array_equal(out["Y"], Cos[pos] * 2)
    ids = rng.integers(0, 5, (2, 8)).astype(np.int64)
    Emb = rng.standard_normal((2, 5, 8)).astype(np.float32)
    out = same_as_ref(tmp_path_factory, EMB, {"B": 2, "S": 8, "V": 5}, {"ids": ids, "Emb": Emb})
    np.testing.assert_array_equal(out["Y"], Emb[1][ids])


# a length that is not a multiple of the tile: the last index slice is short, and gathers a
# partial tile (its rows padded with -1.0, which the column max sees)
ROPE_PARTIAL = GV.PARTIAL

@pytest.mark.parametrize("S", [5, 7])
def test_a_short_index_slice_gathers_a_partial_tile(tmp_path_factory, S):
    rng = np.random.default_rng(S)
    pos = rng.integers(0, 9, S).astype(np.int32)
    Cos = (rng.standard_normal((9, 8)) - 3.0).astype(np.float32)  # below the pad: it shows
    out = same_as_ref(tmp_path_factory, ROPE_PARTIAL, {"S": S, "P": 9}, {"pos": pos, "Cos": Cos})
    want = np.empty((S, 8), np.float32)
    for t in range(0, S, 4):
        tile = np.full((4, 8), -1.0, np.float32)
        tile[:min(4, S - t)] = Cos[pos[t:t + 4]]
        want[t:t + 4] = (tile * np.float32(2.0) + tile.max(axis=0))[:min(4, S - t)]
    np.testing.assert_array_equal(out["Y"], want)


@pytest.mark.parametrize("bad, words", [
    (9, "index `pos[t * 4 + 1]` in `x = Cos[pos[t * 4 : t * 4 + 4], :]` must be less than P, "
        "found 9 and 9 (task `cp[t]` at t=1)"),
    (-2, "index `pos[t * 4 + 1]` in `x = Cos[pos[t * 4 : t * 4 + 4], :]` must not be negative, "
         "found -2 (task `cp[t]` at t=1)"),
])
def test_a_bad_index_is_reported_as_cpu_sim_reports_it(tmp_path_factory, bad, words):
    pos = np.zeros(8, np.int32)
    pos[5] = bad
    arrays = {"pos": pos, "Cos": np.ones((9, 8), np.float32)}
    done, _, module = npu(tmp_path_factory, ROPE, {"S": 8, "P": 9}, arrays)
    assert done.returncode != 0
    assert f"error: {words}; the task was not launched" in done.stderr, done.stderr
    with pytest.raises(ptowsp.WspError) as info:
        module.compile("cpu_sim").run(bind={"S": 8, "P": 9}, **arrays)
    assert info.value.diagnostics[0].message == f"{words}; the task was not launched"


# Pads of other element sizes (f16 held in f32 after the copy, one-byte u8 and bool), and a
# tile too big for the UB, run in chunks of rows: chunks past the view are all pad.
DTYPES = """\
    sym C, L
    input  A: f16[4, C]
    input  U: u8[4, C]
    input  Q: bool[4, C]
    input  X: f32[128, 512]
    output MA: f16[4, 1]
    output SU: i32[4, 1]
    output SQ: i32[4, 1]
    output Y: f32[128, 512]
    output SY: f32[128, 1]
    kernel m(a: In[Tile[4, 40, f16], pad = -inf], u: In[Tile[4, 40, u8], pad = 7],
             q: In[Tile[4, 40, bool], pad = true],
             ma: Out[Tile[4, 1, f16]], su: Out[Tile[4, 1, i32]], sq: Out[Tile[4, 1, i32]]) {
        store(ma, rowmax(a))
        store(su, rowsum(cast(u, i32)))
        store(sq, rowsum(cast(q, i32)))
    }
    kernel big(x: In[Tile[128, 512, f32], pad = 2], y: Out[Tile[128, 512, f32]],
               s: Out[Tile[128, 1, f32]]) {
        store(y, x + 1.0)
        store(s, rowsum(x))
    }
    workload w() {
        m(a = A[:, 0 : min(40, C)], u = U[:, 0 : min(40, C)], q = Q[:, 0 : min(40, C)],
          ma = MA, su = SU, sq = SQ)
        big(x = X[0 : min(L, 128), 0 : 512], y = Y[0 : min(L, 128), 0 : 512],
            s = SY[0 : min(L, 128), :])
    }
    schedule main = w()
"""


@pytest.mark.parametrize("C, L", [(5, 1), (33, 70), (40, 128)])
def test_pads_of_every_element_size_and_chunks_past_the_view(tmp_path_factory, C, L):
    rng = np.random.default_rng(C)
    arrays = {"A": rng.standard_normal((4, C)).astype(np.float16),
              "U": rng.integers(0, 9, (4, C)).astype(np.uint8),
              "Q": rng.integers(0, 2, (4, C)).astype(np.bool_),
              "X": rng.standard_normal((128, 512)).astype(np.float32)}
    out = same_as_ref(tmp_path_factory, DTYPES, {"C": C, "L": L}, arrays, rtol=1e-6)
    pads = 40 - min(40, C)
    np.testing.assert_array_equal(out["MA"][:, 0], arrays["A"].max(axis=1))
    np.testing.assert_array_equal(out["SU"][:, 0], arrays["U"].astype(np.int64).sum(axis=1) + 7 * pads)
    np.testing.assert_array_equal(out["SQ"][:, 0], arrays["Q"].sum(axis=1) + pads)
    assert not out["Y"][L:].any() and not out["SY"][L:].any()
