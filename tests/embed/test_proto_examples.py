"""The prototype-style example programs of issue 19 (examples/python/proto_*.py, docs/python.md):
each runs unchanged on cpu_sim and on ref, and both match the example's own NumPy formula;
each workload prints as `.wsp` text that checks to the same IR. Every program under
examples/python/ is run by some test."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from .helpers import assert_roundtrip

pytestmark = pytest.mark.usefixtures("wspc_cache")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"


def _main(name: str) -> dict:
    """The example run as `python examples/python/NAME.py` (on cpu_sim, checking itself): its
    globals, `got` its results."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")


def test_csp_rmsnorm_pipeline_on_both_targets():
    g = _main("proto_csp_rmsnorm")
    for got in (g["got"], g["run"]("ref")):
        assert got["admitted"] == g["QUEUE"] and got["tasks"] == 3 * g["QUEUE"]
        np.testing.assert_allclose(got["y"], g["reference"](got["admitted"]), rtol=1e-5, atol=1e-5)
    text = assert_roundtrip(got["program"].workload)
    assert "process normer {" in text and "channel l2c: Tile[16, 64, f32], depth = 2" in text


def test_tiered_decode_on_both_targets():
    g = _main("proto_tiered_decode")
    for got in (g["got"], g["run"]("ref")):
        assert got["tasks"] == g["BATCH"]
        np.testing.assert_allclose(got["o"], g["reference"](), rtol=1e-5, atol=1e-5)
    text = assert_roundtrip(got["program"].workload)
    assert "slot_load(0, L[b])" in text and "rows_by" not in text, text
    assert "k = KV[b, 0 : 2 * slot(0) : 2], v = KV[b, 1 : 2 * slot(0) : 2]" in text, text


def test_cpp_swiglu_on_both_targets(ref_extern):
    g = _main("proto_cpp_swiglu")
    ref_extern("silu_gate", g["silu_gate_numpy"])
    for got in (g["got"], g["run"]("ref")):
        assert got["tasks"] == 3 * g["TILES"]
        np.testing.assert_allclose(got["y"], g["reference"](), rtol=1e-4, atol=1e-4)
    assert "kernel silu_gate(" in assert_roundtrip(got["program"].workload)


def test_varlen_attention_on_both_targets():
    g = _main("proto_varlen_attention")
    got = g["got"]
    tiles = int(sum(-(-n // g["QT"]) for n in g["seq_lens_np"]))
    assert got["tasks"] == tiles and len(got["summary"].results) == 8
    assert got["summary"].best_cycles <= got["summary"].baseline_cycles
    np.testing.assert_allclose(got["o"], g["reference"](), rtol=1e-5, atol=1e-5)
    ref = g["run"]("ref", explore=False)
    np.testing.assert_allclose(ref["o"], g["reference"](), rtol=1e-5, atol=1e-5)
    text = assert_roundtrip(got["program"].workload)
    assert "for t in P(qtiles[b]) {" in text and "O[b, t * 16 : min(t * 16 + 16, L[b])]" in text


def test_every_python_example_is_run_by_a_test():
    tests = "".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    missing = [p.name for p in sorted(EXAMPLES.glob("*.py")) if p.stem not in tests]
    assert not missing, f"examples no test runs: {missing}"
    assert len(list(EXAMPLES.glob("proto_*.py"))) >= 6


def test_named_edges_on_both_targets():
    g = _main("proto_named_edges")
    want = g["reference"]()
    for got in (g["got"], g["run"]("ref")):
        assert got["tasks"] == 3 * g["TILES"] + 1
        for key, ref in zip(("y", "m", "s"), want):
            np.testing.assert_allclose(got[key], ref, rtol=1e-4, atol=1e-4)
    text = assert_roundtrip(got["program"].workload)
    assert "let t = rmsnorm[i](x = X[i], h = H[i])" in text, text
    assert "stamp[i](x = X[i], s = M[i]) after [g, g[i - 1]]" in text, text
    # the stamps share no data with the gates: the edges alone order them, in the model too
    prog = g["got"]["program"]
    ev, sim, names = prog.trace.events, prog.trace.sim, prog.trace.kernel_names
    at = {(names[ev["kernel"][k]], int(ev["coords"][k][0])): k for k in range(len(ev))}
    for i in range(g["TILES"]):
        for j in (i - 1, i):
            if j >= 0:
                assert sim["start"][at[("stamp", i)]] >= sim["finish"][at[("gate", j)]]
