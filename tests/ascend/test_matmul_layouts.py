"""matmul with transposed operands on the AICore (`backends/ascend/aicore/matmul.py`), compiled
against the CPU Ascend C of `ascendc_cpu/`: every layout (a @ b, a @ sᵀ, sᵀ @ b, sᵀ @ tᵀ, and
with `acc`) and dtype (f32, f16, bf16, integers converted to f32), at -O0 and -O2, equals ref
and NumPy in float64; shapes and values vary under hypothesis; a kernel whose tiles exceed the
Unified Buffer runs the transposed forms in row chunks; and the emitted code never computes a
transpose that a matmul reads (no transposed copy of an operand in the Unified Buffer).

The kernel is tests/backends/test_matmul_layouts.py's (one kernel stores all five layouts), so
cpu_sim and the AICore are held to the same program."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptowsp import driver
from ptowsp.backends.ascend import aicore
from ptowsp.ir.passes import optimize
from tests.accuracy import UNIT, assert_close
from tests.backends.test_matmul_layouts import LAYOUTS, program, values

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _units(m: int, k: int, n: int, dt: str):
    """(unit name, module, kernel) of the layouts' kernel at -O0 and at -O2."""
    base = driver.lower(driver.check_text(program(m, k, n, dt), f"mm_{m}_{k}_{n}_{dt}.wsp"))
    out = []
    for level in (0, 2):
        mod, _ = optimize(base, level)
        name = H.unit_name(f"mm_{m}_{k}_{n}_{dt}_O{level}")
        (kern,) = mod.kernels
        out.append((name, dataclasses.replace(mod, name=name), kern))
    return out


def _task(kern, arrays: dict) -> H.Task:
    """The tiles of `kern` holding `arrays` (by tile parameter name), contiguous; outputs
    start as garbage (NaN bytes)."""
    tiles, views, inputs = [], [], {}
    for p in kern.params:
        buf = np.zeros(p.rows * p.cols, H.NP[p.dtype])
        buf.view(np.uint8)[:] = 0xFF
        if p.mode != "Out":
            buf[:] = arrays[p.name].reshape(-1)
            inputs[p.name] = arrays[p.name]
        tiles.append(buf)
        views.append((0, p.cols))
    return H.Task(tiles, views, {}, inputs)


def check(m: int, k: int, n: int, dt: str, seed: int, tmp_path) -> dict:
    """Run the layouts' kernel on the shim at -O0 and -O2 and check every stored product
    against ref and float64 NumPy; the emitted headers by unit name."""
    units = _units(m, k, n, dt)
    files = {name: aicore.emit_aicore(mod) for name, mod, _ in units}
    lib = H.build([H.Unit(name, files[name], [kern]) for name, _, kern in units], tmp_path)
    rng = np.random.default_rng(seed)
    (a, a64), (at, at64), (b, b64), (bt, bt64) = (
        values(rng, s, dt) for s in ((m, k), (k, m), (k, n), (n, k)))
    acc = rng.standard_normal((m, n)).astype(np.float32)
    arrays = dict(a=a, at=at, b=b, bt=bt, c=acc)
    terms = {"y0": (a64, b64), "y1": (a64, bt64.T), "y2": (at64.T, b64),
             "y3": (at64.T, bt64.T), "y4": (a64, bt64.T)}
    got = {}
    for name, _, kern in units:
        task = _task(kern, arrays)
        got[name] = H.run_task(lib, name, kern, task)
        H.compare(kern, got[name], H.ref_outputs(kern, task), name)
        for y, (x, w) in terms.items():
            plus = acc.astype(np.float64) if y == "y4" else 0.0
            # f32 sums of k terms (k order, or ReduceSum's tree per 256-byte repeat): each
            # element within ~sqrt(k) roundings of its terms' size
            atol = 4 * np.sqrt(k) * UNIT["f32"] * (np.abs(x) @ np.abs(w) + np.abs(plus))
            assert_close(got[name][y], x @ w + plus, rtol=4 * k * UNIT["f32"], atol=atol,
                         what=f"{LAYOUTS[y.upper()]} {name}")
    # the AICore's matmul forms do not depend on the level: the same bits
    (n0, _, _), (n2, _, _) = units
    for y in terms:
        np.testing.assert_array_equal(got[n0][y], got[n2][y], err_msg=LAYOUTS[y.upper()])
    return {name: files[name][aicore.header_path(kern)] for name, _, kern in units}


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i32"])
def test_every_layout_and_dtype(dt, tmp_path):
    check(3, 37, 29, dt, 1, tmp_path)


CHUNKED = """
input A: f32[512, 32]
input AT: f32[32, 512]
input B: f32[32, 32]
input BT: f32[32, 32]
output Y1: f32[512, 32]
output Y2: f32[512, 32]
kernel mm(a: In[Tile[512, 32, f32]], at: In[Tile[32, 512, f32]], b: In[Tile[32, 32, f32]],
          bt: In[Tile[32, 32, f32]], y1: Out[Tile[512, 32, f32]], y2: Out[Tile[512, 32, f32]]) {
    store(y1, matmul(a, transpose(bt)))
    store(y2, matmul(transpose(at), b))
}
workload w() { mm[0](a = A, at = AT, b = B, bt = BT, y1 = Y1, y2 = Y2) }
schedule main = w()
"""


def test_chunked_rows(tmp_path):
    """Tiles past the Unified Buffer: a @ sᵀ and sᵀ @ b run per chunk of rows (s resident,
    sᵀ's rows read as s's columns from the chunk's first row) and still equal ref and NumPy."""
    mod = driver.lower(driver.check_text(CHUNKED, "chunked.wsp"))
    (kern,) = mod.kernels
    # all matmuls of f32 tiles: the cube would take it (test_cube.py); the vector path's
    # chunks are what this test is about
    assert aicore.is_cube(kern)
    files = aicore.emit_aicore(mod, vector_only=frozenset({kern.name}))
    assert "chunks of" in files[aicore.header_path(kern)]
    lib = H.build([H.Unit("chunked", files, [kern])], tmp_path)
    rng = np.random.default_rng(11)
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
              (("a", (512, 32)), ("at", (32, 512)), ("b", (32, 32)), ("bt", (32, 32)))}
    task = _task(kern, arrays)
    got = H.run_task(lib, "chunked", kern, task)
    H.compare(kern, got, H.ref_outputs(kern, task))
    f64 = {name: v.astype(np.float64) for name, v in arrays.items()}
    for y, (x, w) in {"y1": (f64["a"], f64["bt"].T), "y2": (f64["at"].T, f64["b"])}.items():
        atol = 4 * np.sqrt(32) * UNIT["f32"] * (np.abs(x) @ np.abs(w))
        assert_close(got[y], x @ w, rtol=4 * 32 * UNIT["f32"], atol=atol, what=y)


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 9), st.integers(1, 80), st.integers(1, 40),
       st.sampled_from(["f32", "f16", "bf16", "i32"]), st.integers(0, 2**31))
def test_shapes_and_values(tmp_path_factory, m, k, n, dt, seed):
    check(m, k, n, dt, seed, tmp_path_factory.mktemp("mm"))


@pytest.mark.parametrize("level", [0, 2])
def test_no_transposed_copy(level):
    """No transpose is computed for a matmul operand: the header has no transpose op and no
    scalar-unit transposition loop, at either level; a transpose that is stored is still
    computed (so the check can see one)."""
    (name, mod, kern) = _units(2, 48, 24, "f32")[level // 2]
    # the vector path's matmul (the kernel would be split, its matmul on the cube: kept on the
    # vector path as a task passing it a gather view would keep it)
    text = aicore.emit_aicore(mod, frozenset({kern.name}))[aicore.header_path(kern)]
    assert "= transpose(" not in text, text
    assert "AscendC::ReduceSum(" in text  # a @ sᵀ: dot products of rows
    stored = driver.lower(driver.check_text("""
input X: f32[4, 8]
output Y: f32[8, 4]
output Z: f32[4, 4]
kernel t(x: In[Tile[4, 8, f32]], y: Out[Tile[8, 4, f32]], z: Out[Tile[4, 4, f32]]) {
    store(y, transpose(x))
    store(z, matmul(x, transpose(x)))
}
workload w() { t[0](x = X, y = Y, z = Z) }
schedule main = w()
""", "t.wsp"))
    # (the kernel is split: the matmul on the cube, the stored transpose in the vector part's
    # header, tests/ascend/test_mixed.py)
    text = "\n".join(aicore.emit_aicore(stored).values())
    assert text.count("= transpose(") == 1, text
