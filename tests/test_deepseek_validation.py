"""The seeds' DeepSeek-V3 validation set (seeds/001, "Real-Data Validation": Attention 32 tasks,
RMSNorm 200 tasks, FFN 200 tasks, MoE 800 expert calls) at exactly those task counts, on
cpu_sim and ref, against float64 NumPy. `pytest -s` prints the table.

Sizes: attention = examples/attention_tiered.wsp with batch 4 x heads 8 (lengths <= 128, so
each (b, h) is one task of the short tiers); RMSNorm = examples/rmsnorm.wsp with B=4, T=50
(16x128 tiles); FFN = examples/swiglu_ffn.wsp with T=1600 tokens (100 gate + 100 down tasks);
MoE = examples/moe.wsp with 400 tokens, top-2 of 8 experts (800 expert tasks, plus 25 route
and 50 mix tasks). Every element is held to its own bound, as tests/test_examples_dynamic.py
explains (a relative one, and for the elements near 0 the rounding error of their terms); the
largest absolute error, and how much of its bound the worst element uses, are printed."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from tests.accuracy import assert_close, used

from .test_examples_dynamic import (
    RTOL,
    C,
    U,
    attention_inputs,
    attention_numpy,
    moe_numpy,
    programs,
    swiglu_numpy,
    topk_inputs,
    topk_routing_numpy,
)

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def f64(a):
    return np.asarray(a, np.float64)


def kernel_counts(trace) -> collections.Counter:
    names = trace.kernel_names
    return collections.Counter(names[k] for k in trace.events["kernel"].tolist())


def report(name, tasks, out, want, ref_out, err=0.0):
    """`err`: the rounding error of each element's terms, in units of U (0: no cancellation)."""
    atol = C * U * np.asarray(err)
    abs_err = float(np.abs(f64(out) - want).max())
    print(f"\nDeepSeek validation {name:<9} tasks {tasks:4d}  max |err| {abs_err:.2e}  "
          f"of its bound {used(out, want, rtol=RTOL, atol=atol):.0%}  cpu_sim vs ref "
          f"{used(out, ref_out, rtol=2 * RTOL, atol=2 * atol):.0%}")
    assert_close(out, want, rtol=RTOL, atol=atol, what=f"{name} vs NumPy")
    assert_close(out, ref_out, rtol=2 * RTOL, atol=2 * atol, what=f"{name}: cpu_sim vs ref")


def both(path, opt_level=None, **kw):
    m = ptowsp.load(str(path))
    cpu = m.compile(target="cpu_sim", opt_level=opt_level)
    out = cpu.run(trace=True, **kw)
    ref = m.compile(target="ref", opt_level=opt_level)
    ref_out = ref.run(**kw)
    assert ref.stats.task_count == cpu.stats.task_count
    return out, ref_out, cpu


def test_attention_32_tasks():
    lens = [37, 64, 100, 128]
    inputs = attention_inputs(lens, heads=8, s=128, seed=10)
    cpu, ref = programs("attention_tiered")
    out = cpu.run(**inputs)["O"]
    assert cpu.stats.task_count == 32
    ref_out = ref.run(**inputs)["O"]
    assert ref.stats.task_count == 32
    want, err = attention_numpy(inputs["Q"], inputs["K"], inputs["V"], lens, errors=True)
    report("attention", 32, out, want, ref_out, err)


def test_rmsnorm_200_tasks():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 50, 16, 128), dtype=np.float32)
    w = rng.standard_normal((1, 128), dtype=np.float32)
    out, ref_out, cpu = both(EXAMPLES / "rmsnorm.wsp", X=x, W=w)
    assert cpu.stats.task_count == 200
    want = f64(x) / np.sqrt((f64(x) ** 2).mean(-1, keepdims=True) + 1e-6) * f64(w)
    # no cancellation here: every element is within a few roundings of its own value
    report("RMSNorm", 200, out["Y"], want, ref_out["Y"])


def test_ffn_200_tasks():
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((1600, 64)) * 0.5).astype(np.float32)
    w1, w3 = ((rng.standard_normal((64, 256)) / 8).astype(np.float32) for _ in range(2))
    w2 = (rng.standard_normal((256, 64)) / 16).astype(np.float32)
    # -O1: the validation set counts the tasks as written (-O2 fuses gate and down: 100 tasks)
    out, ref_out, cpu = both(EXAMPLES / "swiglu_ffn.wsp", 1, X=x, W1=w1, W3=w3, W2=w2)
    assert cpu.stats.task_count == 200
    assert kernel_counts(cpu.trace) == {"gate": 100, "down": 100}
    want, err = swiglu_numpy(x, w1, w3, w2)
    report("FFN", 200, out["Y"], want, ref_out["Y"], err)


def test_moe_800_expert_calls():
    inputs = topk_inputs(400, seed=13)
    cpu, ref = programs("moe")
    out = cpu.run(trace=True, **inputs)
    counts = kernel_counts(cpu.trace)
    assert counts["expert"] == 800
    assert cpu.stats.task_count == 800 + 25 + 50
    ref_out = ref.run(**inputs)
    assert ref.stats.task_count == cpu.stats.task_count
    routes, margin = topk_routing_numpy(inputs["X"], inputs["Wg"])
    assert margin > 1e-4
    np.testing.assert_array_equal(out["Experts"], [r[0] for r in routes])
    want, err = moe_numpy(inputs, routes)
    report("MoE", counts["expert"], out["Y"], want, ref_out["Y"], err)
