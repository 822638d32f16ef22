"""The `ref` back end on run-time values (language.md sections 5 and 6) against NumPy formulas
written here: ragged lengths (zeros included), CSR routings through `P.sel` (empty rows,
repeated experts, `e` and `e.pos` in views and scalars), `when` / `else when` / `otherwise`
tiers, slots driving extents, routers (a tile kernel and an extern kernel) whose output drives
later loops in the same run; every validation error with its position, coordinates and value;
and the zero-fill shortcut, which tasks under run-time values never satisfy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends.cpu.buffers import covered
from ptowsp.backends.ref import RunError, run
from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source
from ptowsp.ir.verify import verify
from ptowsp.lower import lower

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_CACHE: dict[str, object] = {}


def program(text: str):
    text = textwrap.dedent(text)
    if text not in _CACHE:
        m = lower(check_source(text, "t.wsp"))
        verify(m)
        _CACHE[text] = m
    return _CACHE[text]


def line_col(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based line and column of the nth occurrence of `needle` in the dedented text."""
    text = textwrap.dedent(text)
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


def fails(text: str, syms: dict, arrays: dict, externs=None) -> RunError:
    with pytest.raises(RunError) as info:
        run(program(text), None, syms, arrays, externs=externs)
    return info.value


def rand(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Ragged axes

RAGGED = """\
    module ragged
    sym B, S
    input  lens: i32[B]
    input  X: f32[B, S, 4]
    output Y: f32[B, S, 4]
    output Z: f32[B, S, 4]
    kernel dbl(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x * 2 + 1) }
    kernel pair(x: In[Tile[2, 4, f32]], y: Out[Tile[2, 4, f32]]) { store(y, x - 1) }
    axis batch = DenseDyn(B)
    axis toks = Ragged(batch, lens)
    axis pairs = Ragged(batch, lens[_] / 2)
    workload w() {
        for b in P(batch) {
            for t in P(toks[b]) { dbl[b, t](x = X[b, t], y = Y[b, t]) }
            for p in P.seq(pairs[b]) {
                pair[b, p](x = X[b, p * 2 : p * 2 + 2, :], y = Z[b, p * 2 : p * 2 + 2, :])
            }
        }
    }
"""


@SETTINGS
@given(s=st.integers(0, 5), data=st.data())
def test_ragged_rows(s, data):
    lens = np.array(data.draw(st.lists(st.integers(0, s), min_size=1, max_size=4)), np.int32)
    b = len(lens)
    x = rand(np.random.default_rng(s * 7 + b), b, s, 4)
    out = run(program(RAGGED), None, {"B": b, "S": s}, {"lens": lens, "X": x})
    want_y, want_z = np.zeros_like(x), np.zeros_like(x)
    for i, n in enumerate(lens):
        want_y[i, :n] = x[i, :n] * np.float32(2) + np.float32(1)
        m = n // 2 * 2
        want_z[i, :m] = x[i, :m] - np.float32(1)
    np.testing.assert_array_equal(out["Y"], want_y)
    np.testing.assert_array_equal(out["Z"], want_z)


def test_negative_ragged_length():
    x = np.ones((3, 4, 4), np.float32)
    err = fails(RAGGED, {"B": 3, "S": 4}, {"lens": np.array([2, -3, 1], np.int32), "X": x})
    assert (err.span.line, err.span.col) == line_col(RAGGED, "toks[b]")
    assert err.message == ("length of ragged axis `toks` at `b` must not be negative, found -3 "
                           "(at b=1)")
    assert err.coords == (("b", 1),)
    assert str(err).startswith(f"t.wsp:{err.span.line}:{err.span.col}: length of ragged axis")
    np.testing.assert_array_equal(err.partial["Y"][0, :2], 3)  # the enumeration stopped there
    np.testing.assert_array_equal(err.partial["Y"][1:], 0)


def test_negative_ragged_length_through_the_cli(tmp_path):
    src = tmp_path / "t.wsp"
    src.write_text(textwrap.dedent(RAGGED))
    np.save(tmp_path / "lens.npy", np.array([1, -2], np.int32))
    np.save(tmp_path / "x.npy", np.ones((2, 3, 4), np.float32))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(src), "--target", "ref",
                        "--input", "lens=lens.npy", "--input", "X=x.npy", "--output", "Y=y.npy"],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    line, col = line_col(RAGGED, "toks[b]")
    assert r.returncode == 1, r.stderr
    assert f"t.wsp:{line}:{col}: error: length of ragged axis `toks` at `b` must not be " \
           "negative, found -2 (at b=1)" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "y.npy").exists()  # no output is written after a failed run


# ---------------------------------------------------------------------------------------------
# CSR routings through P.sel

CSR = """\
    module csr
    sym T, E, NNZ, K
    input  indptr: i32[T + 1]
    input  indices: i32[NNZ]
    input  X: f32[T, 4]
    input  W: f32[E, 4]
    output H: f32[T, K, 4]
    output S: f32[T, 4]
    output C: i32[T, K]
    kernel ex(x: In[Tile[1, 4, f32]], w: In[Tile[1, 4, f32]], h: Out[Tile[1, 4, f32]]) {
        store(h, x * w)
    }
    kernel acc(w: In[Tile[1, 4, f32]], s: InOut[Tile[1, 4, f32]]) { store(s, s + w) }
    kernel note(c: Out[Tile[1, 1, i32]], v: Scalar[i32]) { store(c, v) }
    axis tokens = DenseDyn(T)
    axis route = Sparse(tokens, indptr, indices)
    workload w() {
        for t in P(tokens) {
            for e in P.sel(route[t]) {
                ex[t, e](x = X[t], w = W[e], h = H[t, e.pos])
                acc[t, e](w = W[e], s = S[t])
                note[t, e](c = C[t, e.pos : e.pos + 1], v = e * 100 + e.pos)
            }
        }
    }
"""


def csr_arrays(rows: list[list[int]], e: int, seed: int = 0):
    indptr = np.zeros(len(rows) + 1, np.int32)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.array([x for r in rows for x in r], np.int32)
    rng = np.random.default_rng(seed)
    arrays = {"indptr": indptr, "indices": indices, "X": rand(rng, len(rows), 4),
              "W": rand(rng, e, 4)}
    syms = {"T": len(rows), "E": e, "NNZ": len(indices),
            "K": max([len(r) for r in rows] + [1])}
    return syms, arrays


@SETTINGS
@given(e=st.integers(1, 4), data=st.data())
def test_csr_routing(e, data):
    rows = data.draw(st.lists(st.lists(st.integers(0, e - 1), max_size=3), min_size=1,
                              max_size=4))  # empty rows and repeated experts included
    syms, arrays = csr_arrays(rows, e, seed=len(rows))
    out = run(program(CSR), None, syms, arrays)
    x, w = arrays["X"], arrays["W"]
    t, k = syms["T"], syms["K"]
    want_h = np.zeros((t, k, 4), np.float32)
    want_s = np.zeros((t, 4), np.float32)
    want_c = np.zeros((t, k), np.int32)
    for i, row in enumerate(rows):
        for p, ex in enumerate(row):
            want_h[i, p] = x[i] * w[ex]
            want_s[i] = want_s[i] + w[ex]  # f32, in enumeration order
            want_c[i, p] = ex * 100 + p
    np.testing.assert_array_equal(out["H"], want_h)
    np.testing.assert_array_equal(out["S"], want_s)
    np.testing.assert_array_equal(out["C"], want_c)


@pytest.mark.parametrize("indptr, indices, message", [
    ([0, 2, 1, 3], [0, 1, 2], "`indptr` of sparse axis `route` must not decrease: `indptr[t + 1]` "
     "must be at least `indptr[t]`, found 1 and 2 (at t=1)"),
    ([0, 1, 2, 4], [0, 1, 2], "`indptr[t + 1]` of sparse axis `route` must be at most NNZ, the "
     "length of `indices`, found 4 and 3 (at t=2)"),
    ([-1, 1, 2, 3], [0, 1, 2], "`indptr[t]` of sparse axis `route` must not be negative, found -1 "
     "(at t=0)"),
])
def test_bad_indptr(indptr, indices, message):
    syms, arrays = csr_arrays([[0], [0], [0]], 3)
    arrays["indptr"] = np.array(indptr, np.int32)
    arrays["indices"] = np.array(indices, np.int32)
    syms["NNZ"], syms["K"] = len(indices), 3
    err = fails(CSR, syms, arrays)
    assert (err.span.line, err.span.col) == line_col(CSR, "route[t]")
    assert err.message == message


def test_expert_id_out_of_range_is_a_view_error_naming_the_value():
    syms, arrays = csr_arrays([[0, 1], [3, 0]], 3)
    err = fails(CSR, syms, arrays)
    assert (err.span.line, err.span.col) == line_col(CSR, "w = W[e]")
    assert err.message == ("index `e` in `w = W[e]` must be less than E, found 3 and 3 "
                           "(task `ex[t, e]` at t=1, e.pos=0)")
    assert err.coords == (("t", 1), ("e.pos", 0)) and err.values == {"e": 3, "E": 3}
    np.testing.assert_array_equal(err.partial["H"][1], 0)  # the bad task never ran
    syms, arrays = csr_arrays([[0, -1]], 3)
    err = fails(CSR, syms, arrays)
    assert err.message == ("index `e` in `w = W[e]` must not be negative, found -1 "
                           "(task `ex[t, e]` at t=0, e.pos=1)")


def test_bad_data_through_the_program_api_returns_nothing():
    prog = ptowsp.parse(textwrap.dedent(CSR), "t.wsp").compile(target="ref")
    syms, arrays = csr_arrays([[0], [1]], 2)
    arrays["indptr"] = np.array([0, 2, 1], np.int32)
    with pytest.raises(WspError) as info:
        prog.run(bind={"K": 2}, **arrays)
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.col) == line_col(CSR, "route[t]")
    assert "found 1 and 2 (at t=1)" in d.message
    assert prog._last is None  # nothing was returned
    out = prog.run(bind={"K": 1}, **csr_arrays([[0], [1]], 2)[1])
    assert set(out) == {"H", "S", "C"}


# ---------------------------------------------------------------------------------------------
# when / else when / otherwise, P.when / P.otherwise

TIERS = """\
    module tiers
    sym B
    input  lens: i32[B]
    input  X: f32[B, 4]
    output Y: f32[B, 4]
    output Z: f32[B, 4]
    output G: f32[B, 4]
    output H: f32[B, 4]
    kernel big(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x * 3) }
    kernel small(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x + 1) }
    kernel zero(y: Out[Tile[1, 4, f32]]) { store(y, 7) }
    kernel mark(y: Out[Tile[1, 4, f32]], v: Scalar[f32]) { store(y, v) }
    axis batch = DenseDyn(B)
    workload w() {
        for b in P(batch) {
            when lens[b] > 4 { big[b](x = X[b], y = Y[b]) }
            else when lens[b] > 0 { small[b](x = X[b], y = Y[b]) }
            otherwise { zero[b](y = Y[b]) }
            P.when(lens[b] == 2 or not (lens[b] >= 0)) { mark[b](y = Z[b], v = 1.0) }
            P.otherwise { mark[b](y = Z[b], v = 2.0) }
            when b + 1 < B and lens[b + 1] > lens[b] { mark[b](y = G[b], v = lens[b + 1]) }
            when not (b + 1 >= B or lens[b + 1] <= lens[b]) { mark[b](y = H[b], v = lens[b + 1]) }
        }
    }
"""


@SETTINGS
@given(lens=st.lists(st.integers(-3, 8), min_size=1, max_size=6))
def test_when_tiers(lens):
    lens = np.array(lens, np.int32)
    b = len(lens)
    x = rand(np.random.default_rng(b), b, 4)
    out = run(program(TIERS), None, {"B": b}, {"lens": lens, "X": x})
    want_y, want_z, want_g = (np.zeros((b, 4), np.float32) for _ in range(3))
    for i, n in enumerate(lens):
        want_y[i] = x[i] * np.float32(3) if n > 4 else x[i] + np.float32(1) if n > 0 else 7
        want_z[i] = 1 if n == 2 or n < 0 else 2
        # `lens[b + 1]` is never read at the last b (short circuit): no range error there
        if i + 1 < b and lens[i + 1] > n:
            want_g[i] = lens[i + 1]
    np.testing.assert_array_equal(out["Y"], want_y)
    np.testing.assert_array_equal(out["Z"], want_z)
    np.testing.assert_array_equal(out["G"], want_g)
    np.testing.assert_array_equal(out["H"], want_g)  # `not (A or B)`: the same condition


def test_read_index_out_of_range():
    text = TIERS.replace("when b + 1 < B and lens[b + 1] > lens[b]",
                         "when lens[b + 1] > lens[b]")
    err = fails(text, {"B": 3}, {"lens": np.array([1, 2, 3], np.int32),
                                 "X": np.zeros((3, 4), np.float32)})
    assert (err.span.line, err.span.col) == line_col(text, "lens[b + 1]")
    assert err.message == ("index `b + 1` of `lens[b + 1]` must be less than B, found 3 and 3 "
                           "(at b=2)")
    assert err.values == {"b + 1": 3, "B": 3}
    np.testing.assert_array_equal(err.partial["G"][:2], [[2] * 4, [3] * 4])  # b = 0, 1 ran


# ---------------------------------------------------------------------------------------------
# Slots

SLOTS = """\
    module slots
    sym N
    input  cnt: i32[2]
    input  X: f32[N, 4]
    output Y: f32[N, 4]
    output Z: f32[N, 4]
    output V: f32[N, 4]
    kernel cp(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x) }
    kernel put(y: Out[Tile[1, 4, f32]], v: Scalar[f32]) { store(y, v) }
    workload w() {
        slot_load(3, cnt[0])
        slot_set(4, slot(3) * 2)
        for i in P(slot(4)) { cp[i](x = X[i], y = Y[i]) }
        slot_set(4, slot(4) + cnt[1])
        for i in P.seq(slot(4)) { cp[i](x = X[i], y = Z[i]) }
        for i in P(slot(7)) { cp[i](x = X[i], y = V[i]) }
        for i in P.seq(2) {
            slot_set(9, slot(9) + i + 1)
            put[i](y = V[i], v = slot(9))
        }
        slot_set(7, 1)
    }
"""


@SETTINGS
@given(c0=st.integers(0, 3), c1=st.integers(0, 2), extra=st.integers(0, 2))
def test_slots_drive_extents(c0, c1, extra):
    n = max(2 * c0 + c1, 2) + extra
    x = rand(np.random.default_rng(n), n, 4)
    m = program(SLOTS)
    for _ in range(2):  # slots start at 0 in every run (slot 7 is set only at the end)
        out = run(m, None, {"N": n}, {"cnt": np.array([c0, c1], np.int32), "X": x})
        want_y, want_z = np.zeros_like(x), np.zeros_like(x)
        want_y[:2 * c0] = x[:2 * c0]
        want_z[:2 * c0 + c1] = x[:2 * c0 + c1]
        want_v = np.zeros_like(x)
        want_v[0], want_v[1] = 1, 3  # slot 9: 0 + 1, then 1 + 2
        np.testing.assert_array_equal(out["Y"], want_y)
        np.testing.assert_array_equal(out["Z"], want_z)
        np.testing.assert_array_equal(out["V"], want_v)


def test_negative_extent_from_a_slot():
    err = fails(SLOTS, {"N": 4}, {"cnt": np.array([-1, 0], np.int32),
                                  "X": np.zeros((4, 4), np.float32)})
    assert (err.span.line, err.span.col) == line_col(SLOTS, "slot(4)) {")
    assert err.message == "loop extent `slot(4)` must not be negative, found -2"


# ---------------------------------------------------------------------------------------------
# Data-dependent task generation: routers

COUNTER = """\
    module counter
    sym T
    input  X: f32[T, 8]
    scratch counts: i32[T]
    output Y: f32[T, 8, 8]
    output N: i32[1]
    kernel count(x: In[Tile[1, 8, f32]], c: Out[Tile[1, 1, i32]]) {
        store(c, cast(rowsum(cast(x > 0, f32)), i32))
    }
    kernel put(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]], j: Scalar[f32]) {
        store(y, x * 2 + j)
    }
    kernel inc(n: InOut[Tile[1, 1, i32]]) { store(n, n + 1) }
    axis tokens = DenseDyn(T)
    axis pos = Ragged(tokens, counts)
    workload w() {
        for t in P(tokens) { count[t](x = X[t], c = counts[t : t + 1]) }
        for t in P(tokens) {
            for j in P(pos[t]) { put[t, j](x = X[t], y = Y[t, j], j = j) }
            when counts[t] >= 4 { inc[t](n = N) }
        }
    }
"""


@SETTINGS
@given(t=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_tile_kernel_router_drives_a_ragged_axis(t, seed):
    x = rand(np.random.default_rng(seed), t, 8)
    out = run(program(COUNTER), None, {"T": t}, {"X": x})
    want = np.zeros((t, 8, 8), np.float32)
    counts = (x > 0).sum(axis=1)
    for i, c in enumerate(counts):
        for j in range(c):
            want[i, j] = x[i] * np.float32(2) + np.float32(j)
    np.testing.assert_array_equal(out["Y"], want)
    np.testing.assert_array_equal(out["N"], [(counts >= 4).sum()])


MOE = """\
    module moe
    const E = 4
    sym T
    input  X: f32[T, 4]
    input  Wr: f32[4, E]
    input  We: f32[E, 4]
    input  indptr: i32[T + 1]
    scratch route: i32[T * 2]
    output Y: f32[T, 4]
    output R: i32[T, 2]
    kernel topk(x: In[Tile[1, 4, f32]], w: In[Tile[4, 4, f32]],
                r: Out[Tile[1, 2, i32]]) extern c \"\"\"
        float s[4];
        for (int j = 0; j < 4; j++) {
            s[j] = 0;
            for (int k = 0; k < 4; k++) s[j] += x.data[k] * w.data[k * w.stride + j];
        }
        int a = 0;
        for (int j = 1; j < 4; j++) if (s[j] > s[a]) a = j;
        int b = a == 0 ? 1 : 0;
        for (int j = 0; j < 4; j++) if (j != a && s[j] > s[b]) b = j;
        r.data[0] = a; r.data[1] = b;
    \"\"\"
    kernel expert(x: In[Tile[1, 4, f32]], w: In[Tile[1, 4, f32]], y: InOut[Tile[1, 4, f32]]) {
        store(y, y + x * w)
    }
    kernel keep(r: In[Tile[1, 2, i32]], o: Out[Tile[1, 2, i32]]) { store(o, r) }
    axis tokens = DenseDyn(T)
    axis routing = Sparse(tokens, indptr, route)
    workload w() {
        for t in P(tokens) { topk[t](x = X[t], w = Wr, r = route[t * 2 : t * 2 + 2]) }
        for t in P(tokens) {
            for e in P.sel(routing[t]) { expert[t, e](x = X[t], w = We[e], y = Y[t]) }
            keep[t](r = route[t * 2 : t * 2 + 2], o = R[t])
        }
    }
"""


def topk(x, w, r):
    s = (x.astype(np.float64) @ w.astype(np.float64))[0]
    r[0, :] = np.argsort(-s, kind="stable")[:2]


@SETTINGS
@given(t=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_extern_router_drives_p_sel_in_the_same_run(t, seed):
    rng = np.random.default_rng(seed)
    x, wr, we = rand(rng, t, 4), rand(rng, 4, 4), rand(rng, 4, 4)
    indptr = np.arange(0, 2 * t + 1, 2, dtype=np.int32)
    out = run(program(MOE), None, {"T": t}, {"X": x, "Wr": wr, "We": we, "indptr": indptr},
              externs={"topk": topk})
    want_y = np.zeros((t, 4), np.float32)
    want_r = np.zeros((t, 2), np.int32)
    for i in range(t):
        scores = x[i].astype(np.float64) @ wr.astype(np.float64)
        for e in np.argsort(-scores, kind="stable")[:2]:
            want_y[i] = want_y[i] + x[i] * we[e]
        want_r[i] = np.argsort(-scores, kind="stable")[:2]
    np.testing.assert_array_equal(out["R"], want_r)
    np.testing.assert_array_equal(out["Y"], want_y)


def test_router_output_out_of_range_is_reported_with_the_value():
    def bad(x, w, r):
        r[0, :] = [1, 9]
    err = fails(MOE, {"T": 2}, {"X": np.ones((2, 4), np.float32), "Wr": np.ones((4, 4), np.float32),
                                "We": np.ones((4, 4), np.float32),
                                "indptr": np.array([0, 2, 4], np.int32)}, externs={"topk": bad})
    assert (err.span.line, err.span.col) == line_col(MOE, "w = We[e]")
    assert err.message == ("index `e` in `w = We[e]` must be less than 4, found 9 "
                           "(task `expert[t, e]` at t=0, e.pos=1)")


# ---------------------------------------------------------------------------------------------
# The zero-fill shortcut never trusts tasks whose existence depends on run-time values


def test_tasks_under_run_time_values_never_cover_an_output():
    full = """\
        module cover
        sym N
        input  X: f32[N, 4]
        input  lens: i32[N]
        input  ptr: i32[N + 1]
        input  idx: i32[N]
        output A: f32[N, 4]
        output Bw: f32[N, 4]
        output Cr: f32[N, 4]
        output Ds: f32[N, 4]
        output Ee: f32[N, 4]
        kernel cp(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x) }
        axis rows = DenseDyn(N)
        axis tok = Ragged(rows, lens)
        axis sp = Sparse(rows, ptr, idx)
        workload w() {
            for i in P(N) { cp[i](x = X[i], y = A[i]) }
            for i in P(N) { when lens[i] > 0 { cp[i](x = X[i], y = Bw[i]) } }
            for i in P(lens[0]) { cp[i](x = X[i], y = Cr[i]) }
            for i in P(rows) { for e in P.sel(sp[i]) { cp[i](x = X[i], y = Ds[e.pos]) } }
            slot_set(0, N)
            for i in P(slot(0)) { cp[i](x = X[i], y = Ee[i]) }
        }
    """
    m = program(full)
    s = m.schedules[0]
    syms = {"N": 1}
    assert covered(s, m.tensor("A"), syms)
    for name in ("Bw", "Cr", "Ds", "Ee"):
        assert not covered(s, m.tensor(name), syms), name
