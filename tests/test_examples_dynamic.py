"""The dynamic-workload examples (examples/attention_varlen.wsp, attention_tiered.wsp, moe.wsp,
moe_extern.wsp) on cpu_sim and ref, against independent float64 NumPy implementations written
here, and cpu_sim against ref; hypothesis draws ragged lengths (zeros, partial blocks, long
tails), token counts and routings (moe: top-k of the gate logits; moe_extern: skewed to repeat
experts, thresholds that route tokens to nothing).

Error measure. Every element is held to its own bound (tests/accuracy.py):
|out - expected| <= rtol |expected| + atol, with rtol a few f32 roundings and atol for the
elements near 0 only. Attention outputs are convex combinations of V rows and MoE outputs sums
of expert outputs, so an entry near 0 comes from cancellation and carries the absolute rounding
error of its terms: atol is that error, computed per element from the terms' magnitudes
(`attention_numpy`, `moe_numpy`: the float64 formula evaluated on magnitudes, each score's
rounding magnified by exp), never from the result's largest value. cpu_sim and ref differ by
the same kinds of roundings (another summation order, exp within an ulp), so they get twice
the bound against each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends.ref import register_extern, unregister_extern
from tests.accuracy import UNIT, assert_close

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCALE = 0.125  # 1 / sqrt(64), the kernels' default `scale`
U = UNIT["f32"]
# f32 results against float64: RTOL of each element, and C times the rounding error its terms
# carry (the errors of attention_numpy and moe_numpy are in units of U). Measured errors are
# at most about a tenth of the bound.
RTOL = 16 * U
C = 1
HSET = settings(max_examples=8, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


_PROGRAMS: dict = {}


def programs(name: str, schedule=None):
    """(cpu_sim program, ref program) of examples/NAME.wsp, compiled once per test session."""
    key = (name, schedule)
    if key not in _PROGRAMS:
        m = ptowsp.load(str(EXAMPLES / f"{name}.wsp"))
        _PROGRAMS[key] = (m.compile(target="cpu_sim", schedule=schedule),
                          m.compile(target="ref", schedule=schedule))
    return _PROGRAMS[key]


# --------------------------------------------------------------------------------------------
# Attention


def attention_numpy(q, k, v, lens, scale=SCALE, errors=False):
    """Masked attention in float64, sequence by sequence: rows >= lens[b] are 0. With
    `errors`, also the rounding error (in units of U) an f32 computation carries into each
    element: a score's error (sqrt(D) roundings of its terms' magnitude) is a relative error
    of its weight after exp, and each weight's error scales |v|."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    out = np.zeros_like(q)
    err = np.zeros_like(q)
    for b, n in enumerate(int(x) for x in lens):
        if n == 0:
            continue
        s = np.einsum("hid,hjd->hij", q[b, :, :n], k[b, :, :n]) * scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
        out[b, :, :n] = p @ v[b, :, :n]
        if errors:
            terms = np.einsum("hid,hjd->hij", np.abs(q[b, :, :n]), np.abs(k[b, :, :n])) * scale
            rel = 8 + 2 * np.sqrt(q.shape[-1]) * terms  # of each weight
            err[b, :, :n] = (p * rel) @ np.abs(v[b, :, :n])
    return (out, err) if errors else out


def attention_inputs(lens, heads=2, s=256, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((len(lens), heads, s, 64), dtype=np.float32) for _ in range(3))
    return dict(Q=q, K=k, V=v, seq_lens=np.asarray(lens, np.int32))


def varlen_tasks(lens, heads):
    """attention_varlen: per (b, h) nq query blocks, each nq KV steps and a finalize."""
    return heads * sum(nq * (nq + 1) for nq in (-(-int(n) // 64) for n in lens))


def tiered_tasks(lens, heads):
    """attention_tiered: none for an empty sequence, one task per (b, h) up to 128 tokens,
    else the blocked tier."""
    return heads * sum(min(n, 1) if n <= 128 else nq * (nq + 1)
                       for n, nq in ((int(n), -(-int(n) // 64)) for n in lens))


def check_attention(name, inputs, expected_tasks):
    cpu, ref = programs(name)
    o_cpu = cpu.run(**inputs)["O"]
    assert cpu.stats.task_count == expected_tasks
    o_ref = ref.run(**inputs)["O"]
    assert ref.stats.task_count == expected_tasks
    want, err = attention_numpy(inputs["Q"], inputs["K"], inputs["V"], inputs["seq_lens"],
                                errors=True)
    for target, out in (("cpu_sim", o_cpu), ("ref", o_ref)):
        # padded rows are documented to be exactly 0
        for b, n in enumerate(inputs["seq_lens"]):
            assert not out[b, :, n:].any(), f"padded rows of batch {b} are not 0"
        assert_close(out, want, rtol=RTOL, atol=C * U * err, what=f"{name} on {target}")
    # cpu_sim and ref on the whole output (padding included)
    assert_close(o_cpu, o_ref, rtol=2 * RTOL, atol=2 * C * U * err, what=f"{name}: cpu_sim vs ref")
    return o_cpu


EDGE_LENS = [0, 1, 63, 64, 65, 128, 129, 200, 256]


@pytest.mark.parametrize("name,count", [("attention_varlen", varlen_tasks),
                                        ("attention_tiered", tiered_tasks)])
def test_attention_edges(name, count):
    inputs = attention_inputs(EDGE_LENS, heads=2, seed=1)
    check_attention(name, inputs, count(EDGE_LENS, 2))


@pytest.mark.parametrize("name,count", [("attention_varlen", varlen_tasks),
                                        ("attention_tiered", tiered_tasks)])
@pytest.mark.parametrize("s", [1, 63, 100, 130, 199])
def test_attention_padded_length_not_a_multiple_of_the_block(name, count, s):
    """S is any length: sequences up to S, the longest ending in a partial block at S."""
    lens = sorted({0, 1, s // 2, s - 1, s})
    check_attention(name, attention_inputs(lens, heads=2, s=s, seed=s), count(lens, 2))


def test_attention_varlen_same_result_under_every_schedule():
    inputs = attention_inputs([200, 7, 0, 130], heads=3, seed=2)
    outs = []
    for sched in ("main", "by_batch", "steal"):
        cpu, _ = programs("attention_varlen", sched)
        outs.append(cpu.run(workers=2, **inputs)["O"])
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_attention_large_scores_do_not_overflow():
    """Scores around +-100: the running max keeps exp in range; masked keys stay masked."""
    inputs = attention_inputs([190, 64, 3], heads=1, seed=3)
    inputs["Q"] *= 10
    inputs["K"] *= 10
    for name in ("attention_varlen", "attention_tiered"):
        cpu, _ = programs(name)
        out = cpu.run(**inputs)["O"]
        want, err = attention_numpy(inputs["Q"], inputs["K"], inputs["V"], inputs["seq_lens"],
                                    errors=True)
        assert np.isfinite(out).all()
        # scores of size ~100 carry absolute errors of ~1e-5 in f32 (ulp of 100 is 7.6e-6),
        # and exp turns them into relative errors of the weights: `err` says by how much
        assert_close(out, want, rtol=RTOL, atol=C * U * err, what=f"{name}, large scores")


def test_attention_varlen_simulate_matches_the_run():
    inputs = attention_inputs([100, 200, 7], heads=2, s=256)
    cpu, _ = programs("attention_varlen")
    cpu.run(**inputs)
    tasks, cycles = cpu.stats.task_count, cpu.stats.total_cycles
    st_ = cpu.simulate(bind={"B": 3, "H": 2, "S": 256}, seq_lens=inputs["seq_lens"])
    assert (st_.task_count, st_.total_cycles) == (tasks, cycles)


@st.composite
def lengths(draw):
    """(S, sequence lengths <= S): S a multiple of the 64-row block or any length."""
    s = draw(st.one_of(st.sampled_from([64, 128, 256]), st.integers(1, 256)))
    lens = draw(st.lists(
        st.one_of(st.sampled_from([n for n in EDGE_LENS if n <= s] + [s]), st.integers(0, min(s, 24)),
                  st.integers(0, s)),
        min_size=1, max_size=4))
    return s, lens


@HSET
@given(s_lens=lengths(), seed=st.integers(0, 2**16))
def test_attention_varlen_random_lengths(s_lens, seed):
    s, lens = s_lens
    check_attention("attention_varlen", attention_inputs(lens, heads=2, s=s, seed=seed),
                    varlen_tasks(lens, 2))


@HSET
@given(s_lens=lengths(), seed=st.integers(0, 2**16))
def test_attention_tiered_random_lengths(s_lens, seed):
    s, lens = s_lens
    check_attention("attention_tiered", attention_inputs(lens, heads=2, s=s, seed=seed),
                    tiered_tasks(lens, 2))


def test_attention_too_long_is_a_view_error():
    cpu, _ = programs("attention_varlen")
    inputs = attention_inputs([300], heads=1, s=256)
    with pytest.raises(ptowsp.WspError) as info:
        cpu.run(**inputs)
    assert "task was not launched" in info.value.render()


# --------------------------------------------------------------------------------------------
# MoE: moe.wsp (top-k routing with `topk`, exactly K experts per token) and moe_extern.wsp (an
# `extern c` router with a threshold: a CSR routing of 0..K experts per token, and `P.sel`)

E, K, DM, F, TC = 8, 2, 64, 128, 16


def route_python(logits, bias, ptr, idx, g, base, pmin):
    """The `route` extern kernel of moe_extern.wsp for the ref back end: the same f32 arithmetic as
    its C body (softmax, top-k of logits + bias with ties to the lower expert, threshold). ref
    hands it padded tiles: the rows of a partial last chunk past its tokens are NaN (the
    parameter's pad), and routed to nothing, as the C body, handed the view, never sees them."""
    nk = g.shape[1]
    thr = np.float32(int(pmin)) * np.float32(0.001)
    n = 0
    for r in range(logits.shape[0]):
        lg = np.asarray(logits[r], np.float32)
        if np.isnan(lg).all():
            break
        p = np.exp(lg - lg.max())
        total_p = np.float32(0)
        for val in p:
            total_p = np.float32(total_p + val)
        p = p / total_p
        score = lg + np.asarray(bias[0], np.float32)
        kept = [int(e) for e in np.argsort(-score, kind="stable")[:nk] if p[e] >= thr]
        total = np.float32(0)
        for e in kept:
            total = np.float32(total + p[e])
        g[r, :] = 0
        for j, e in enumerate(kept):
            g[r, j] = p[e] / total
            idx[0, n] = e
            n += 1
        ptr[0, r] = int(base) + n
    idx[0, n:] = 0


@pytest.fixture(scope="module", autouse=True)
def _router():
    register_extern("route", route_python)
    yield
    unregister_extern("route")


def moe_inputs(tokens, seed=0, skew=0.0, logit_scale=0.3):
    """Random weights; `skew` s gives expert e the selection bias -s * log(e + 1) (Zipf-like
    popularity: large s sends most tokens to the first experts)."""
    rng = np.random.default_rng(seed)
    return dict(
        X=rng.standard_normal((tokens, DM), dtype=np.float32),
        Wg=(rng.standard_normal((DM, E)) * logit_scale).astype(np.float32),
        Bias=(-skew * np.log(np.arange(1, E + 1)))[None].astype(np.float32),
        W1=(rng.standard_normal((E, DM, F)) / 8).astype(np.float32),
        W3=(rng.standard_normal((E, DM, F)) / 8).astype(np.float32),
        W2=(rng.standard_normal((E, F, DM)) / 11).astype(np.float32))


def moe_routing_numpy(x, wg, bias, k=K, pmin=0):
    """Per token, in float64: the chosen experts in order and their gate weights, and the
    smallest decision margin (score gaps around the top k, distance of p to the threshold)."""
    logits = np.asarray(x, np.float64) @ np.asarray(wg, np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    score = logits + np.asarray(bias, np.float64)[0]
    thr = pmin / 1000
    routes, margin = [], np.inf
    for t in range(len(x)):
        order = np.argsort(-score[t], kind="stable")
        srt = score[t][order]
        margin = min(margin, float(np.min(srt[:k] - srt[1:k + 1])))
        chosen = order[:k]
        margin = min(margin, float(np.min(np.abs(p[t, chosen] - thr))))
        kept = [int(e) for e in chosen if p[t, e] >= thr]
        w = p[t, kept] / p[t, kept].sum() if kept else np.zeros(0)
        routes.append((kept, w))
    return routes, margin


def swiglu_numpy(x, w1, w3, w2):
    """(silu(x @ w1) * (x @ w3)) @ w2 in float64, and the rounding error in units of U an f32
    computation carries into each element, from the terms' magnitudes: each product's sqrt(K)
    roundings of its terms, through silu (slope <= 1.1) and the product."""
    x, w1, w3, w2 = (np.asarray(a, np.float64) for a in (x, w1, w3, w2))
    a, v = x @ w1, x @ w3
    sa = a / (1 + np.exp(-a))
    h = sa * v
    da = np.sqrt(x.shape[-1]) * (np.abs(x) @ np.abs(w1))
    dv = np.sqrt(x.shape[-1]) * (np.abs(x) @ np.abs(w3))
    dh = 1.1 * da * np.abs(v) + np.abs(sa) * dv + 4 * np.abs(h)
    return h @ w2, dh @ np.abs(w2) + np.sqrt(w2.shape[0]) * (np.abs(h) @ np.abs(w2))


def moe_numpy(inputs, routes):
    """(Y in float64 from the routing: the sum over the chosen experts of gate * SwiGLU FFN;
    the rounding error in units of U an f32 computation carries into each element of Y:
    each expert's (swiglu_numpy) through its gate, and the gate's own, relative, error: that of
    the logits it is the softmax of)."""
    x = np.asarray(inputs["X"], np.float64)
    wg = np.asarray(inputs["Wg"], np.float64)
    y, err = np.zeros_like(x), np.zeros_like(x)
    for t, (experts, gates) in enumerate(routes):
        gate_err = 8 + 4 * np.sqrt(x.shape[1]) * float((np.abs(x[t]) @ np.abs(wg)).max())
        for e, g in zip(experts, gates):
            f, df = swiglu_numpy(x[t], inputs["W1"][e], inputs["W3"][e], inputs["W2"][e])
            y[t] += g * f
            err[t] += g * (df + gate_err * np.abs(f))
    return y, err


def topk_inputs(tokens, seed=0, logit_scale=0.3):
    """moe.wsp's inputs: moe_extern's without the selection bias."""
    inputs = moe_inputs(tokens, seed=seed, logit_scale=logit_scale)
    del inputs["Bias"]
    return inputs


def topk_routing_numpy(x, wg, k=K):
    """Standard top-k routing in float64, written from its definition: per token the k experts
    with the largest logits x @ wg (largest first, ties to the lower expert) and the softmax of
    their k logits; and the smallest gap between consecutive logits of the first k + 1 (a closer
    call could legitimately order f32 logits otherwise)."""
    logits = np.asarray(x, np.float64) @ np.asarray(wg, np.float64)
    routes, margin = [], np.inf
    for row in logits:
        order = np.argsort(-row, kind="stable")
        srt = row[order]
        margin = min(margin, float(np.min(srt[:k] - srt[1:k + 1])))
        chosen = order[:k]
        w = np.exp(row[chosen] - row[chosen].max())
        routes.append(([int(e) for e in chosen], w / w.sum()))
    return routes, margin


def expert_tasks(prog) -> list:
    """The (token, expert) coordinates of the expert tasks of the traced run, in start order."""
    tr = prog.trace
    ev = tr.events[np.argsort(tr.events["start_ns"], kind="stable")]
    names = tr.kernel_names
    return [tuple(int(c) for c in e["coords"][:2]) for e in ev if names[e["kernel"]] == "expert"]


def check_moe(inputs, schedule=None, drawn=False):
    """moe.wsp on cpu_sim and ref against the float64 top-k MoE layer, and each other; the
    expert tasks that ran are exactly the (token, expert) pairs the routing names."""
    tokens = len(inputs["X"])
    routes, margin = topk_routing_numpy(inputs["X"], inputs["Wg"])
    if drawn:
        assume(margin > 1e-4)
    else:
        assert margin > 1e-4
    cpu, ref = programs("moe", schedule)
    out_cpu = cpu.run(trace=True, **inputs)
    out_ref = ref.run(**inputs)
    chunks = -(-tokens // TC)
    # a route task per chunk (the last one partial unless TC divides the tokens), K expert tasks per token, K mix steps per chunk
    assert cpu.stats.task_count == ref.stats.task_count == chunks + K * tokens + K * chunks
    experts = np.asarray([r[0] for r in routes])
    gate = np.asarray([r[1] for r in routes])
    assert sorted(expert_tasks(cpu)) == sorted((t, int(e)) for t, row in enumerate(experts)
                                               for e in row)
    want, err = moe_numpy(inputs, routes)
    logit_terms = np.abs(inputs["X"].astype(np.float64)) @ np.abs(inputs["Wg"].astype(np.float64))
    gate_rtol = C * U * (8 + 4 * np.sqrt(DM) * logit_terms.max(axis=1, keepdims=True))
    for target, out in (("cpu_sim", out_cpu), ("ref", out_ref)):
        np.testing.assert_array_equal(out["Experts"], experts)
        assert_close(out["Gate"], gate, rtol=gate_rtol, what=f"moe gates on {target}")
        assert_close(out["Y"], want, rtol=RTOL, atol=C * U * err, what=f"moe on {target}")
    assert_close(out_cpu["Gate"], out_ref["Gate"], rtol=2 * gate_rtol, what="gates: cpu vs ref")
    assert_close(out_cpu["Y"], out_ref["Y"], rtol=2 * RTOL, atol=2 * C * U * err,
                 what="moe: cpu_sim vs ref")
    return out_cpu, routes


def test_moe_top2():
    out, routes = check_moe(topk_inputs(64, seed=1))
    assert len({e for r in routes for e in r[0]}) == E      # every expert gets tokens


def test_moe_hot_expert_takes_most_tokens():
    """Gate logits dominated by expert 5 (a column of large positive weights, positive tokens):
    it is every token's first choice, so its expert tasks repeat the same weights."""
    inputs = topk_inputs(48, seed=2)
    inputs["X"] = np.abs(inputs["X"])
    inputs["Wg"][:, 5] = 0.5
    out, routes = check_moe(inputs)
    assert all(r[0][0] == 5 for r in routes)
    assert np.all(out["Gate"][:, 0] > out["Gate"][:, 1])


def test_moe_ties_go_to_the_lower_expert():
    """All logits equal (a zero gate): experts 0 and 1 for every token, weights 1/2, on both
    targets (topk's stable order)."""
    inputs = topk_inputs(32, seed=3)
    inputs["Wg"][:] = 0
    routes = [([0, 1], np.array([0.5, 0.5]))] * 32
    want, err = moe_numpy(inputs, routes)
    for prog in programs("moe"):
        out = prog.run(**inputs)
        np.testing.assert_array_equal(out["Experts"], np.tile([0, 1], (32, 1)))
        np.testing.assert_array_equal(out["Gate"], np.full((32, K), 0.5, np.float32))
        assert_close(out["Y"], want, rtol=RTOL, atol=C * U * err, what="moe, tied logits")


def test_moe_same_result_under_every_schedule():
    inputs = topk_inputs(32, seed=4)
    ys = [programs("moe", s)[0].run(workers=2, **inputs)["Y"] for s in ("main", "rr")]
    np.testing.assert_array_equal(ys[0], ys[1])


# token counts: whole chunks of TC, and any other (a partial last chunk)
TOKENS = st.one_of(st.integers(1, 4).map(lambda c: c * TC), st.integers(1, 64))


@pytest.mark.parametrize("tokens", [1, 15, 17, 50])
def test_moe_partial_last_chunk(tokens):
    check_moe(topk_inputs(tokens, seed=6))


@HSET
@given(tokens=TOKENS, seed=st.integers(0, 2**16), logit_scale=st.sampled_from([0.05, 0.3, 2.0]))
def test_moe_random_routings(tokens, seed, logit_scale):
    check_moe(topk_inputs(tokens, seed=seed, logit_scale=logit_scale), drawn=True)


def test_moe_task_window():
    """A window of one task: each expert task's read of Experts waits for its route task."""
    text = (EXAMPLES / "moe.wsp").read_text() + (
        "schedule win = moe_layer().dispatch(round_robin(4))"
        ".task_graph(window = 1, mode = stall)\n")
    prog = ptowsp.parse(text, str(EXAMPLES / "moe_window.wsp")).compile(schedule="win")
    inputs = topk_inputs(32, seed=5)
    y = prog.run(workers=2, **inputs)["Y"]
    assert prog.stats.extra["max_in_flight"] <= 1
    np.testing.assert_array_equal(y, programs("moe")[0].run(**inputs)["Y"])


def test_moe_cli_run(tmp_path):
    """`wspc run` of the example on random inputs: K experts for every token."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(EXAMPLES / "moe.wsp"),
                        "--random-inputs", "0", "--bind", "T=32", "--json",
                        "--outputs", str(tmp_path / "out.npz")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    out = np.load(tmp_path / "out.npz")
    assert out["Experts"].shape == (32, K) and out["Experts"].dtype == np.int32
    assert all(len(set(row)) == K for row in out["Experts"].tolist())
    assert stats["task_count"] == 2 + 32 * K + K * 2


def check_moe_extern(inputs, pmin=0, schedule=None, drawn=False):
    tokens = len(inputs["X"])
    routes, margin = moe_routing_numpy(inputs["X"], inputs["Wg"], inputs["Bias"], pmin=pmin)
    # f32 logits differ from float64 ones by ~1e-6: a closer call could legitimately differ
    if drawn:
        assume(margin > 1e-4)
    else:
        assert margin > 1e-4
    cpu, ref = programs("moe_extern", schedule)
    out_cpu = cpu.run(bind={"PMIN": pmin}, **inputs)
    out_ref = ref.run(bind={"PMIN": pmin}, **inputs)
    nnz = sum(len(r[0]) for r in routes)
    # gate + route chunks, one expert task per (token, chosen expert), K mix steps per chunk
    chunks = -(-tokens // TC)
    assert cpu.stats.task_count == ref.stats.task_count == 2 * chunks + nnz + K * chunks
    indptr = np.concatenate([[0], np.cumsum([len(r[0]) for r in routes])])
    indices = np.zeros(tokens * K, np.int64)
    indices[:nnz] = [e for r in routes for e in r[0]]
    gate = np.zeros((tokens, K))
    for t, (_, w) in enumerate(routes):
        gate[t, :len(w)] = w
    want, err = moe_numpy(inputs, routes)
    # gates inherit the rounding of the f32 logits: relative, sized from the logits' terms
    logit_terms = np.abs(inputs["X"].astype(np.float64)) @ np.abs(inputs["Wg"].astype(np.float64))
    gate_rtol = C * U * (8 + 4 * np.sqrt(DM) * logit_terms.max(axis=1, keepdims=True))
    for target, out in (("cpu_sim", out_cpu), ("ref", out_ref)):
        np.testing.assert_array_equal(out["Indptr"], indptr)
        np.testing.assert_array_equal(out["Indices"], indices)
        assert_close(out["Gate"], gate, rtol=gate_rtol, what=f"moe gates on {target}")
        assert_close(out["Y"], want, rtol=RTOL, atol=C * U * err, what=f"moe on {target}")
    unrouted = [t for t, r in enumerate(routes) if not r[0]]
    assert not out_cpu["Y"][unrouted].any()
    np.testing.assert_array_equal(out_cpu["Indices"], out_ref["Indices"])
    assert_close(out_cpu["Gate"], out_ref["Gate"], rtol=2 * gate_rtol, what="gates: cpu vs ref")
    assert_close(out_cpu["Y"], out_ref["Y"], rtol=2 * RTOL, atol=2 * C * U * err,
                 what="moe: cpu_sim vs ref")
    return out_cpu, routes


def test_moe_extern_top2():
    out, routes = check_moe_extern(moe_inputs(64, seed=1))
    assert all(len(r[0]) == K for r in routes)


def test_moe_extern_skewed_routing_repeats_experts_and_drops_tokens():
    out, routes = check_moe_extern(moe_inputs(48, seed=2, skew=4.0, logit_scale=0.3), pmin=100)
    counts = np.bincount([e for r in routes for e in r[0]], minlength=E)
    assert counts.max() >= 16, counts                       # a hot expert
    assert any(not r[0] for r in routes)                    # tokens routed to nothing
    assert any(len(r[0]) == 1 for r in routes)


def test_moe_extern_same_result_under_every_schedule():
    inputs = moe_inputs(32, seed=4, skew=1.0)
    ys = [programs("moe_extern", s)[0].run(workers=2, **inputs)["Y"] for s in ("main", "rr")]
    np.testing.assert_array_equal(ys[0], ys[1])


@pytest.mark.parametrize("tokens,pmin", [(1, 0), (17, 0), (40, 100), (45, 450)])
def test_moe_extern_partial_last_chunk(tokens, pmin):
    """A partial last chunk: its route task appends only its own tokens' experts, and the
    entries past Indptr[T] stay 0 (a threshold drops some, so the chunk has room left)."""
    out, routes = check_moe_extern(moe_inputs(tokens, seed=7, skew=2.0), pmin=pmin)
    if pmin:
        assert sum(len(r[0]) for r in routes) < tokens * K


@HSET
@given(tokens=TOKENS, seed=st.integers(0, 2**16),
       skew=st.sampled_from([0.0, 0.5, 2.0, 6.0]), logit_scale=st.sampled_from([0.1, 0.5, 2.0]),
       pmin=st.sampled_from([0, 0, 200, 450, 700, 1000]))
def test_moe_extern_random_routings(tokens, seed, skew, logit_scale, pmin):
    check_moe_extern(moe_inputs(tokens, seed=seed, skew=skew, logit_scale=logit_scale), pmin=pmin,
                     drawn=True)


@pytest.mark.parametrize("window,mode", [(1, "stall"), (3, "stall"), (4096, "abort")])
def test_moe_extern_task_window(window, mode):
    """The enumerator waits for the router's writes while the window holds other tasks."""
    text = (EXAMPLES / "moe_extern.wsp").read_text() + (
        f"schedule win = moe_layer().dispatch(round_robin(4))"
        f".task_graph(window = {window}, mode = {mode})\n")
    prog = ptowsp.parse(text, str(EXAMPLES / "moe_extern_window.wsp")).compile(schedule="win")
    inputs = moe_inputs(32, seed=5, skew=1.0)
    y = prog.run(workers=2, **inputs)["Y"]
    assert prog.stats.extra["max_in_flight"] <= window
    np.testing.assert_array_equal(y, programs("moe_extern")[0].run(**inputs)["Y"])


def test_moe_extern_cli_run(tmp_path):
    """`wspc run` of the example on random inputs: the routing drives the task count."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(EXAMPLES / "moe_extern.wsp"),
                        "--random-inputs", "0", "--bind", "T=32", "--json",
                        "--outputs", str(tmp_path / "out.npz")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    out = np.load(tmp_path / "out.npz")
    assert int(out["Indptr"][-1]) == 32 * K                 # PMIN = 0: every token gets K experts
    assert stats["task_count"] == 2 * 2 + 32 * K + K * 2
