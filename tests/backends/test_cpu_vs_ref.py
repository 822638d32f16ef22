"""Whole programs through cpu_sim, checked against the `ref` interpreter and an independent NumPy
formula: the examples, views with expressions and strides, composition, inlined workloads,
bit-identical results across worker counts, and run-time view failures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError
from tests.accuracy import UNIT, assert_close

U = UNIT["f32"]

pytestmark = pytest.mark.cc

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


def both(module, **kw):
    """Run on cpu_sim and ref; returns (cpu outputs, ref outputs, cpu program)."""
    prog = module.compile(target="cpu_sim")
    cpu = prog.run(**kw)
    ref = module.compile(target="ref").run(**kw)
    return cpu, ref, prog


def f64(a):
    return np.asarray(a, dtype=np.float64)


def matmul_atol(a, b, c: float = 2.0):
    """The rounding error an f32 product a @ b may carry in each element, sized from its
    terms: c sqrt(K) u (|a| @ |b|) (sums of K terms round about sqrt(K) times; where the
    terms cancel, this is what is left of a small element's accuracy). Measured errors are
    at most about a fifth of it."""
    return c * np.sqrt(a.shape[-1]) * U * (np.abs(f64(a)) @ np.abs(f64(b)))


def test_rmsnorm_example():
    m = ptowsp.load(str(EXAMPLES / "rmsnorm.wsp"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 16, 128)).astype(np.float32)
    w = rng.standard_normal((1, 128)).astype(np.float32)
    cpu, ref, prog = both(m, X=x, W=w)
    expected = f64(x) / np.sqrt((f64(x) ** 2).mean(-1, keepdims=True) + 1e-6) * f64(w)
    # products of x, w and a row's rsqrt: no cancellation, every element relative
    assert_close(cpu["Y"], ref["Y"], rtol=16 * U, what="rmsnorm cpu_sim vs ref")
    assert_close(cpu["Y"], expected, rtol=16 * U, what="rmsnorm cpu_sim vs NumPy")
    assert prog.stats.task_count == 15


_SOFTMAX: list = []


def check_softmax_example(rows: int, seed: int) -> None:
    """examples/softmax.wsp at R = rows (a partial last tile unless rows is a multiple of 16)
    against NumPy; one task per 16 rows or fewer."""
    if not _SOFTMAX:
        m = ptowsp.load(str(EXAMPLES / "softmax.wsp"))
        _SOFTMAX.append((m.compile(target="cpu_sim"), m.compile(target="ref")))
    prog, ref_prog = _SOFTMAX[0]
    x = (np.random.default_rng(seed).standard_normal((rows, 128)) * 8).astype(np.float32)
    cpu = prog.run(X=x, bind={"R": rows})
    ref = ref_prog.run(X=x, bind={"R": rows})
    assert prog.stats.task_count == -(-rows // 16)
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    # exp(x - max) carries the rounding of x - max (up to ~64 here) as a relative error
    d = f64(x).max(1, keepdims=True) - f64(x)
    rtol = 16 * U * (1 + d)
    assert_close(cpu["Y"], e / e.sum(1, keepdims=True), rtol=rtol, what="softmax vs NumPy")
    assert_close(ref["Y"], e / e.sum(1, keepdims=True), rtol=rtol, what="softmax ref vs NumPy")
    assert_close(cpu["Y"], ref["Y"], rtol=2 * rtol, what="softmax cpu_sim vs ref")


@pytest.mark.parametrize("rows", [256, 1, 15, 17, 250])
def test_softmax_example(rows):
    check_softmax_example(rows, 4)


@settings(max_examples=10)
@given(rows=st.integers(1, 100), seed=st.integers(0, 2**16))
def test_softmax_example_any_rows(rows, seed):
    check_softmax_example(rows, seed)


_GEMM: list = []


def check_gemm_example(m_: int, n: int, k: int, seed: int):
    """examples/gemm.wsp at M, N, K (partial edge tiles where one is not a multiple of 64)
    against the float64 product; one task per (i, j, k) tile, edges included."""
    if not _GEMM:
        m = ptowsp.load(str(EXAMPLES / "gemm.wsp"))
        _GEMM.append((m.compile(target="cpu_sim"), m.compile(target="ref")))
    prog, ref_prog = _GEMM[0]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m_, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bind = {"M": m_, "N": n, "K": k}
    cpu = prog.run(A=a, B=b, bind=bind)
    ref = ref_prog.run(A=a, B=b, bind=bind)
    want = f64(a) @ f64(b)
    assert_close(cpu["C"], want, rtol=4 * U, atol=matmul_atol(a, b), what="gemm")
    assert_close(ref["C"], want, rtol=4 * U, atol=matmul_atol(a, b), what="gemm on ref")
    assert_close(cpu["C"], ref["C"], rtol=8 * U, atol=2 * matmul_atol(a, b), what="gemm vs ref")
    assert prog.stats.task_count == -(-m_ // 64) * -(-n // 64) * -(-k // 64)


@pytest.mark.parametrize("mnk", [(128, 64, 192), (1, 1, 1), (70, 33, 130), (64, 65, 63)])
def test_gemm_example(mnk):
    check_gemm_example(*mnk, seed=5)


@settings(max_examples=10)
@given(m_=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 150),
       seed=st.integers(0, 2**16))
def test_gemm_example_any_sizes(m_, n, k, seed):
    check_gemm_example(m_, n, k, seed)


def test_swiglu_example():
    m = ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp"))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 64)).astype(np.float32) * 0.3
    w1, w3 = (rng.standard_normal((64, 256)).astype(np.float32) * 0.1 for _ in range(2))
    w2 = rng.standard_normal((256, 64)).astype(np.float32) * 0.1
    cpu, ref, _ = both(m, X=x, W1=w1, W3=w3, W2=w2)
    g = f64(x) @ f64(w1)
    v = f64(x) @ f64(w3)
    h = (g / (1 + np.exp(-g))) * v
    expected = h @ f64(w2)
    # the errors of g and v (sized from their terms) through silu (slope <= 1.1) and the
    # product, plus h's own rounding, summed with the terms of the last product
    err_h = 1.1 * matmul_atol(x, w1) * np.abs(v) + np.abs(h / v) * matmul_atol(x, w3) \
        + 4 * U * np.abs(h)
    atol = err_h @ np.abs(f64(w2)) + matmul_atol(h, w2)
    assert_close(cpu["Y"], expected, rtol=4 * U, atol=atol, what="swiglu vs NumPy")
    assert_close(cpu["Y"], ref["Y"], rtol=8 * U, atol=2 * atol, what="swiglu cpu_sim vs ref")


VIEWS = """
sym R, C
input  X: f32[R, C]
output Y: f32[R, C]
output Cols: f32[C, R]
kernel twice(x: In[Tile[4, 3, f32]], y: Out[Tile[4, 3, f32]]) { store(y, x * 2) }
kernel col(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x + 1) }
workload blocks() {
    for i, j in P(R / 4, C / 3) {
        twice[i, j](x = X[i*4 : i*4 + 4, j*3 : j*3 + 3], y = Y[i*4 : i*4 + 4, j*3 : j*3 + 3])
    }
}
workload columns() {
    for j in P(C) {
        for i in P(R / 4) {
            col[j, i](x = X[i*4 : i*4 + 4, j], y = Cols[j, i*4 : i*4 + 4])
        }
    }
}
workload both() {
    combine { blocks() }
    sequential { columns() }
}
schedule main = both()
"""


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31))
def test_views_with_expressions_strides_and_inlining(r4, c3, seed):
    m = _views()
    x = np.random.default_rng(seed).standard_normal((4 * r4, 3 * c3)).astype(np.float32)
    cpu, ref, prog = both(m, X=x)
    np.testing.assert_array_equal(cpu["Y"], x * 2)
    np.testing.assert_array_equal(cpu["Cols"], x.T + 1)  # a column view: non-unit column stride
    for k in cpu:
        np.testing.assert_array_equal(cpu[k], ref[k])
    assert prog.stats.task_count == r4 * c3 + 3 * c3 * r4


_VIEWS_MODULE = []


def _views():
    if not _VIEWS_MODULE:
        _VIEWS_MODULE.append(ptowsp.parse(VIEWS, "views.wsp"))
    return _VIEWS_MODULE[0]


def test_bit_identical_across_workers_and_runs():
    m = ptowsp.load(str(EXAMPLES / "gemm.wsp"))
    rng = np.random.default_rng(8)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    prog = m.compile(target="cpu_sim")
    results = [prog.run(A=a, B=b, workers=w)["C"] for w in (1, 2, 4, 2, 4)]
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()


def test_large_nests_run_in_batches_with_the_same_results():
    """4096 tasks: the runtime packs them (wsp_batch) yet counts, orders and computes them as
    single tasks: a grid of independent rows, then a P.seq chain per row over a shared tile."""
    m = ptowsp.parse("""
sym N
input  X: f32[N, 8]
output Y: f32[N, 8]
output S: f32[4, 8]
kernel twice(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x * 2) }
kernel acc(x: In[Tile[1, 8, f32]], s: InOut[Tile[1, 8, f32]]) { store(s, s * 0.5 + x) }
workload w() {
    for i in P(N) { twice[i](x = X[i], y = Y[i]) }
    for r in P(4) { for i in P.seq(N / 4) { acc[r, i](x = Y[r * (N / 4) + i], s = S[r]) } }
}
""", "batched.wsp")
    x = np.random.default_rng(9).standard_normal((2048, 8)).astype(np.float32)
    prog = m.compile(target="cpu_sim")
    outs = [prog.run(X=x, workers=w) for w in (1, 2, 4)]
    ref = m.compile(target="ref").run(X=x)
    assert prog.stats.task_count == 4096 and prog.stats.extra["batches"] > 0
    s = np.zeros((4, 8))
    terms = np.zeros((4, 8))  # the same recurrence on magnitudes: what s's roundings scale with
    for r in range(4):
        for i in range(512):
            s[r] = s[r] * 0.5 + 2 * f64(x[r * 512 + i])
            terms[r] = terms[r] * 0.5 + 2 * np.abs(f64(x[r * 512 + i]))
    for out in outs:
        np.testing.assert_array_equal(out["Y"], x * 2)
        assert_close(out["S"], s, rtol=4 * U, atol=8 * U * terms, what="P.seq accumulation")
        assert out["S"].tobytes() == ref["S"].tobytes() == outs[0]["S"].tobytes()


def test_inputs_are_never_modified():
    m = ptowsp.parse("""
sym N
inout  Z: f32[N, 4]
kernel inc(z: InOut[Tile[1, 4, f32]]) { store(z, z + 1) }
workload w() { for i in P(N) { inc[i](z = Z[i]) } }
""", "inc.wsp")
    z = np.zeros((3, 4), np.float32)
    out = m.compile(target="cpu_sim").run(Z=z)
    np.testing.assert_array_equal(out["Z"], np.ones((3, 4)))
    np.testing.assert_array_equal(z, 0)


def test_bad_view_is_reported_with_coordinates_and_nothing_is_written():
    m = ptowsp.parse("""
sym N, S
input  X: f32[N, 8]
output Y: f32[N, 8]
kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() { for i in P(N) { cp[i](x = X[i + S], y = Y[i]) } }
""", "shift.wsp")
    x = np.ones((4, 8), np.float32)
    with pytest.raises(WspError) as info:
        m.compile(target="cpu_sim").run(X=x, bind={"S": 2})
    (d,) = info.value.diagnostics
    assert (d.span.file, d.span.line) == ("shift.wsp", 6)
    assert "i=2" in d.message and "the task was not launched" in d.message
    rendered = info.value.render()
    assert rendered.startswith("shift.wsp:6:")


def test_runs_from_several_threads_at_once_share_nothing_they_should_not():
    """A program keeps its runtime between runs; a second thread running it meanwhile gets a
    runtime of its own, and every result is right."""
    import threading

    m = ptowsp.load(str(EXAMPLES / "gemm.wsp"))
    prog = m.compile(target="cpu_sim")
    rng = np.random.default_rng(10)
    pairs = [(rng.standard_normal((128, 64)).astype(np.float32),
              rng.standard_normal((64, 128)).astype(np.float32)) for _ in range(4)]
    errors: list = []

    def body(i):
        try:
            for _ in range(5):
                a, b = pairs[i]
                out = prog.run(A=a, B=b, workers=1 + i % 2)
                assert_close(out["C"], f64(a) @ f64(b), rtol=4 * U, atol=matmul_atol(a, b),
                             what=f"gemm on thread {i}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
