"""Placement hints: `input X: f32[...], location = ub` (also `l1`, `l2`, `global`). The hint
reaches the IR, the cycle model charges a task's bytes of an on-chip tensor at that level's
rate instead of HBM's (backends/cpu/cost.py), results never change, and the Ascend tree
records where each tensor was asked to be placed."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu import cost
from ptowsp.backends.machine import load_machine

SRC = """
input X: f32[8, 16, 512]{loc}
output Y: f32[8, 16, 512]
kernel k(x: In[Tile[16, 512, f32]], y: Out[Tile[16, 512, f32]]) {{ store(y, x * 2) }}
workload rows() {{ for i in P(8) {{ k[i](x = X[i], y = Y[i]) }} }}
schedule s = rows().dispatch(round_robin(4))
"""


def _run(loc: str):
    m = ptowsp.parse(SRC.format(loc=f", location = {loc}" if loc else ""), "place.wsp")
    x = np.random.default_rng(3).random((8, 16, 512)).astype(np.float32)
    prog = m.compile()
    out = prog.run(X=x)
    np.testing.assert_array_equal(out["Y"], x * 2)
    return m, prog.stats.total_cycles


def test_an_on_chip_input_costs_fewer_cycles_and_the_same_results():
    cycles = {loc: _run(loc)[1] for loc in ("", "global", "l2", "l1", "ub")}
    assert cycles[""] == cycles["global"]
    assert cycles["global"] > cycles["l2"] > cycles["l1"] > cycles["ub"]


def test_the_ir_carries_the_hint_and_the_cost_follows_it():
    m, _ = _run("ub")
    assert "input X: f32[8, 16, 512], location = ub" in ptowsp.ir.printer.print_module(m.ir)
    mach = load_machine(None)
    k = m.ir.kernels[0]
    assert cost.placements(m.ir) == {k.name: {"x": "ub"}}
    # x's 32 KiB through UB at 256 B/cycle, y's through the core's share of HBM
    hbm = 16 * 512 * 4 / (mach.hbm_gbps / mach.vector_cores) * mach.clock_ghz
    assert cost.memory_cycles(k, mach, cost.UNIT_VECTOR, {"x": "ub"}) == pytest.approx(
        16 * 512 * 4 / 256 + hbm, abs=1)


def test_calls_that_disagree_keep_global_memory():
    src = """
input X: f32[16, 512], location = ub
input Z: f32[16, 512]
output Y: f32[2, 16, 512]
kernel k(x: In[Tile[16, 512, f32]], y: Out[Tile[16, 512, f32]]) { store(y, x * 2) }
workload w() {
    k[0](x = X, y = Y[0])
    k[1](x = Z, y = Y[1])
}
"""
    m = ptowsp.parse(src, "mixed.wsp")
    assert cost.placements(m.ir) == {}


def test_the_ascend_tree_records_the_placement():
    m = ptowsp.parse(SRC.format(loc=", location = l1"), "place.wsp")
    proj = m.compile(target="ascend_npu")
    header = proj.files["include/wsp_plan_data.h"]
    assert "X: input f32[8, 16, 512] (location = l1: a hint; allocated in global memory)" in header


@pytest.mark.parametrize("decl, msg", [
    ("input X: f32[4], location = hbm", "a tensor's location is one of `global`, `l2`, `l1`, `ub`"),
    ("input X: f32[4], place = ub", "unknown tensor option `place`"),
    ("input X: f32[4], location = ub, location = l1", "`location` is given twice"),
])
def test_bad_locations_are_errors_at_the_option(decl, msg):
    with pytest.raises(ptowsp.WspError) as err:
        ptowsp.parse(decl + "\n", "bad.wsp")
    assert msg in str(err.value) and "bad.wsp:1:" in str(err.value)
