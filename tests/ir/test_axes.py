"""Axis transforms (`.split`, `.tile`, `.reorder`, `.fuse_axes`, `.decompose`; ir/axes.py):
golden IR, `verify`, bit-identical outputs with and without each transform on ref (and on
cpu_sim, marked `cc`), the enumeration order from cpu_sim traces, and the order proof."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source
from ptowsp.ir import axes
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify
from ptowsp.lower import lower

ROOT = Path(__file__).resolve().parents[2]

GRID = """\
sym B = 3, T = 5
input  X: f32[B, T, 16]
output Y: f32[B, T, 16]
kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]], c: Scalar[f32]) { store(y, x * 2 + c) }
workload w() {
    for b, t in P(B, T) {
        k[b, t](x = X[b, t], y = Y[b, t], c = b * 100 + t)
    }
}
"""

SCHEDULES = {
    "plain": "w()",
    "split": "w().split(t, 2)",
    "split_outer": "w().split(b, 4).dispatch(affinity(b, n = 2))",
    "tile": "w().tile(b, t, 2, 3)",
    "reorder": "w().reorder(t, b).stream_by(t).streams(2)",
    "fuse": "w().fuse_axes(b, t)",
    "split_reorder": "w().split(t, 2).reorder(t_o, b)",
}

RAGGED = """\
sym B = 6
input  lens: i32[B]
input  X: f32[B, 8, 16]
output Y: f32[B, 8, 16]
kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]], c: Scalar[f32]) { store(y, x + c) }
axis batch = DenseDyn(B)
axis toks = Ragged(batch, lens)
workload w() {
    for b in P(batch) {
        for t in P(toks[b]) {
            k[b, t](x = X[b, t], y = Y[b, t], c = b * 10 + t)
        }
    }
}
"""


def module(text: str, schedules: dict[str, str]) -> str:
    return text + "".join(f"schedule {n} = {s}\n" for n, s in schedules.items())


def test_golden_ir(golden):
    m = lower(check_source(module(GRID, SCHEDULES), "axes.wsp"))
    verify(m)
    golden("lower_axes.ir", print_module(m))


def test_golden_decompose(golden):
    sched = {"plain": "w()", "dec": "w().decompose(t, bucket(2, n = 3))",
             "dec_default": "w().decompose(pow2_bucket(n = 2))"}
    m = lower(check_source(module(RAGGED, sched), "ragged.wsp"))
    verify(m)
    golden("lower_axes_decompose.ir", print_module(m))


def run(text: str, schedule: str, target: str, bind: dict, trace: bool = False, **arrays):
    m = ptowsp.parse(text + f"schedule s = {schedule}\n", "axes.wsp")
    prog = m.compile(target=target)
    out = prog.run(bind=bind, trace=trace, **arrays) if trace else prog.run(bind=bind, **arrays)
    return prog, out


def grid_x(b: int, t: int) -> np.ndarray:
    return np.arange(b * t * 16, dtype=np.float32).reshape(b, t, 16)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.integers(0, 5), t=st.integers(0, 7), fa=st.integers(1, 4), fb=st.integers(1, 9),
       which=st.sampled_from(["split", "tile", "reorder", "fuse", "split_reorder", "split_b"]))
def test_ref_outputs_identical(b, t, fa, fb, which):
    scheds = {"split": f"w().split(t, {fb})", "tile": f"w().tile(b, t, {fa}, {fb})",
              "reorder": "w().reorder(t, b)", "fuse": "w().fuse_axes(b, t)",
              "split_reorder": f"w().split(t, {fb}).reorder(t_o, b, t_i)",
              "split_b": f"w().split(b, {fa}).split(t, {fb})"}
    x = grid_x(b, t)
    _, want = run(GRID, "w()", "ref", {"B": b, "T": t}, X=x)
    _, got = run(GRID, scheds[which], "ref", {"B": b, "T": t}, X=x)
    np.testing.assert_array_equal(got["Y"], want["Y"])
    assert want["Y"].shape == (b, t, 16)
    if b and t:  # every task ran, with its own coordinates
        np.testing.assert_array_equal(want["Y"][:, :, 0] - x[:, :, 0] * 2,
                                      np.add.outer(np.arange(b) * 100, np.arange(t)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lens=st.lists(st.integers(0, 8), min_size=0, max_size=6), k=st.integers(1, 4),
       n=st.integers(1, 4))
def test_ref_decompose_identical(lens, k, n):
    b = len(lens)
    x = np.arange(b * 8 * 16, dtype=np.float32).reshape(b, 8, 16)
    arrays = dict(lens=np.array(lens, dtype=np.int32), X=x)
    _, want = run(RAGGED, "w()", "ref", {"B": b}, **arrays)
    _, got = run(RAGGED, f"w().decompose(t, bucket({k}, n = {n}))", "ref", {"B": b}, **arrays)
    np.testing.assert_array_equal(got["Y"], want["Y"])


def test_buckets():
    assert axes.buckets("bucket", 4, 3) == [(8, None), (4, 8), (None, 4)]
    assert axes.buckets("pow2_bucket", None, 4) == [(8, None), (4, 8), (2, 4), (None, 2)]
    assert axes.buckets("bucket", 4, 1) == [(None, None)]


def lowered_error(text: str) -> list:
    with pytest.raises(WspError) as info:
        lower(check_source(text, "axes.wsp"))
    return info.value.diagnostics


CONFLICT = """\
sym N = 4
input  X: f32[N, N, 16]
inout  Y: f32[8, 16]
kernel acc(x: In[Tile[1, 16, f32]], y: InOut[Tile[1, 16, f32]]) { store(y, y * 0.5 + x) }
workload w() {
    for i, j in P(N, N) {
        acc[i, j](x = X[i, j], y = Y[i + j])
    }
}
"""


@pytest.mark.parametrize("sched", ["w().reorder(j, i)", "w().tile(i, j, 2, 2)"])
def test_reorder_of_conflicting_tasks_is_refused(sched):
    (d,) = lowered_error(CONFLICT + f"schedule s = {sched}\n")
    assert "could change the result" in d.message and "`Y`" in d.message
    assert d.span.line == 10


def test_order_preserving_transforms_of_conflicting_tasks_are_allowed():
    for sched in ("w().split(j, 3)", "w().fuse_axes(i, j)"):
        m = lower(check_source(CONFLICT + f"schedule s = {sched}\n", "axes.wsp"))
        verify(m)


def test_reorder_of_slot_set_is_refused():
    text = GRID.replace("        k[b, t]", "        slot_set(0, b)\n        k[b, t]")
    (d,) = lowered_error(text + "schedule s = w().reorder(t, b)\n")
    assert "slot_set" in d.message


def test_decompose_attention_varlen_ir():
    text = (ROOT / "examples/attention_varlen.wsp").read_text()
    text += "schedule dec = attention().decompose(bucket(2))\n"
    m = lower(check_source(text, str(ROOT / "examples/attention_varlen.wsp")))
    verify(m)
    s = m.schedule("dec")
    assert s.transforms == ("decompose(bucket(2))",)
    (block,) = s.body
    assert block.kind == "combine" and len(block.body) == 8


# ---- cpu_sim: the same outputs, and the enumeration order from traces


@pytest.fixture
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


def coords(text, schedule, bind, **arrays):
    prog, out = run(text, schedule, "cpu_sim", bind, trace=True, **arrays)
    return [tuple(int(v) for v in c[:2]) for c in prog.trace.events["coords"]], out


@pytest.mark.cc
@pytest.mark.usefixtures("_cache")
def test_cpu_sim_order_and_outputs():
    bind, x = {"B": 3, "T": 5}, grid_x(3, 5)
    plain, want = coords(GRID, "w()", bind, X=x)
    assert plain == [(b, t) for b in range(3) for t in range(5)]
    cases = {
        "w().split(t, 2)": plain,  # the same order
        "w().fuse_axes(b, t)": plain,
        "w().reorder(t, b)": [(b, t) for t in range(5) for b in range(3)],
        "w().tile(b, t, 2, 3)": [(bo * 2 + bi, to * 3 + ti) for bo in range(2) for to in range(2)
                                 for bi in range(2) for ti in range(3)
                                 if bo * 2 + bi < 3 and to * 3 + ti < 5],
        "w().split(t, 2).reorder(t_o, b, t_i)": [(b, to * 2 + ti) for to in range(3)
                                                 for b in range(3) for ti in range(2)
                                                 if to * 2 + ti < 5],
    }
    for sched, order in cases.items():
        got, out = coords(GRID, sched, bind, X=x)
        assert got == order, sched
        np.testing.assert_array_equal(out["Y"], want["Y"])


@pytest.mark.cc
@pytest.mark.usefixtures("_cache")
def test_cpu_sim_keys_follow_coordinates():
    prog, _ = run(GRID, "w().reorder(t, b).dispatch(affinity(b, n = 3))", "cpu_sim",
                  {"B": 3, "T": 5}, trace=True, X=grid_x(3, 5))
    ev = prog.trace.events
    np.testing.assert_array_equal(ev["dispatcher"], ev["coords"][:, 0] % 3)


@pytest.mark.cc
@pytest.mark.usefixtures("_cache")
def test_cpu_sim_decompose_groups_lengths():
    lens = np.array([1, 7, 0, 4, 8, 2], dtype=np.int32)
    x = np.arange(6 * 8 * 16, dtype=np.float32).reshape(6, 8, 16)
    plain, want = coords(RAGGED, "w()", {"B": 6}, lens=lens, X=x)
    got, out = coords(RAGGED, "w().decompose(t, bucket(3))", {"B": 6}, lens=lens, X=x)
    np.testing.assert_array_equal(out["Y"], want["Y"])
    assert sorted(got) == sorted(plain)
    # buckets [6, 9), [3, 6), [0, 3): longest first, the original order within a bucket
    rows = [b for b, _ in got]
    assert list(dict.fromkeys(rows)) == [1, 4, 3, 0, 5]
    buckets = [int(lens[b]) // 3 for b in rows]
    assert buckets == sorted(buckets, reverse=True)
