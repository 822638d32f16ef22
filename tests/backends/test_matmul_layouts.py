"""matmul with transposed operands and few rows: cpu_sim == ref == NumPy in float64, for every
layout (a @ b, a @ s^T, s^T @ b, s^T @ t^T, and with `acc`), dtypes (f32, f16, bf16, integers
converted to f32), M = 1..8 and non-square shapes; and the plan never makes a transposed copy.

One kernel stores all five layouts, so one C build covers them for a shape and dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver
from ptowsp.backends.cpu.kernels import emit_kernel
from ptowsp.ir.passes.plan_kernels import plan_kernel
from tests.accuracy import UNIT, assert_close

LAYOUTS = {
    "Y0": "matmul(a, b)",
    "Y1": "matmul(a, transpose(bt))",
    "Y2": "matmul(transpose(at), b)",
    "Y3": "matmul(transpose(at), transpose(bt))",
    "Y4": "matmul(a, transpose(bt), acc = c)",
}


def program(m: int, k: int, n: int, dt: str) -> str:
    outs = "\n".join(f"output {y}: f32[{m}, {n}]" for y in LAYOUTS)
    params = ", ".join(f"{y.lower()}: Out[Tile[{m}, {n}, f32]]" for y in LAYOUTS)
    stores = "\n".join(f"    store({y.lower()}, {e})" for y, e in LAYOUTS.items())
    args = ", ".join(f"{y.lower()} = {y}" for y in LAYOUTS)
    return f"""
input A: {dt}[{m}, {k}]
input AT: {dt}[{k}, {m}]
input B: {dt}[{k}, {n}]
input BT: {dt}[{n}, {k}]
input ACC: f32[{m}, {n}]
{outs}
kernel mm(a: In[Tile[{m}, {k}, {dt}]], at: In[Tile[{k}, {m}, {dt}]], b: In[Tile[{k}, {n}, {dt}]],
          bt: In[Tile[{n}, {k}, {dt}]], c: In[Tile[{m}, {n}, f32]], {params}) {{
{stores}
}}
workload w() {{ mm[0](a = A, at = AT, b = B, bt = BT, c = ACC, {args}) }}
schedule main = w()
"""


def values(rng, shape, dt: str):
    """(the array to pass, its values in float64): exactly representable in `dt`."""
    if dt == "i32":
        v = rng.integers(-8, 9, shape).astype(np.int32)
        return v, v.astype(np.float64)
    x = rng.standard_normal(shape).astype(np.float32)
    if dt == "f16":
        x = x.astype(np.float16)
        return x, x.astype(np.float64)
    if dt == "bf16":  # passed as raw bits; its values are the top 16 bits of an f32
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x, x.astype(np.float64)


def check(m: int, k: int, n: int, dt: str, seed: int) -> None:
    mod = ptowsp.parse(program(m, k, n, dt), f"mm_{m}_{k}_{n}_{dt}.wsp")
    rng = np.random.default_rng(seed)
    (a, a64), (at, at64), (b, b64), (bt, bt64) = (
        values(rng, s, dt) for s in ((m, k), (k, m), (k, n), (n, k)))
    acc = rng.standard_normal((m, n)).astype(np.float32)
    arrays = dict(A=a, AT=at, B=b, BT=bt, ACC=acc)
    ref = mod.compile(target="ref").run(**arrays)
    runs = {f"-O{o}": mod.compile(target="cpu_sim", opt_level=o).run(**arrays) for o in (0, 2)}
    terms = {"Y0": (a64, b64), "Y1": (a64, bt64.T), "Y2": (at64.T, b64), "Y3": (at64.T, bt64.T),
             "Y4": (a64, bt64.T)}
    for y, (x, w) in terms.items():
        want = x @ w + (acc.astype(np.float64) if y == "Y4" else 0.0)
        # f32 sums of k terms: each element within ~sqrt(k) roundings of its terms' size
        atol = 4 * np.sqrt(k) * UNIT["f32"] * (np.abs(x) @ np.abs(w) + (np.abs(acc) if y == "Y4" else 0))
        for name, out in [("ref", ref), *runs.items()]:
            assert_close(out[y], want, rtol=4 * k * UNIT["f32"], atol=atol,
                         what=f"{LAYOUTS[y]} {name} [{m}, {k}] x [{k}, {n}] {dt}")
        # the layout's kernel form does not depend on the level: the same bits
        np.testing.assert_array_equal(runs["-O0"][y], runs["-O2"][y], err_msg=LAYOUTS[y])


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "i32"])
def test_every_layout_and_dtype(wspc_cache, dt):
    check(3, 37, 29, dt, 1)


@pytest.mark.parametrize("m", [1, 2, 4, 6, 8, 13])
def test_small_and_blocked_rows(wspc_cache, m):
    check(m, 70, 81, "f32", m)  # 81 columns: wide panels, narrower ones and a scalar rest


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 8), st.integers(1, 40), st.integers(1, 40),
       st.sampled_from(["f32", "f16", "i32"]), st.integers(0, 2**31))
def test_shapes_and_values(wspc_cache, m, k, n, dt, seed):
    check(m, k, n, dt, seed)


@pytest.mark.parametrize("level", [0, 2])
def test_no_transposed_copy(level):
    """The plan reads transpose(s) in place: no `convert` (a copy) of the transposed operand,
    the matmul step is the dot form, and no C array holds a [K, N] value."""
    (k,) = driver.lower(driver.check_text(program(2, 48, 24, "f32"), "mm.wsp")).kernels
    k = plan_kernel(k, fuse=level > 0)  # as -O2 plans it, or the trivial plan of -O0
    for i, op in enumerate(k.ops):
        if op.op == "convert":
            pytest.fail(f"a copy %{i} of %{op.args[0]} ({k.ops[op.args[0]].op})")
    forms = [("dot" if s.dot else "small" if s.small else "blocked" if s.blocked else "ikj")
             for s in k.plan.steps if s.matmul is not None]
    bt = [k.ops[k.ops[s.matmul].args[1]].op == "transpose" for s in k.plan.steps
          if s.matmul is not None]
    assert [f == "dot" for f in forms] == bt
    # every array of the kernel is an [M, N] result: nothing holds a transposed operand
    assert all(n == 2 * 24 for _, n in k.plan.buffers), k.plan.buffers
    assert "matmul#" in emit_kernel(k).source


def test_transposed_f16_operand_is_converted_in_its_own_layout():
    """transpose(s) of an f16 tile: s is converted to f32 as [N, K] (its layout), then read
    in place as B's columns: the copy is never transposed."""
    text = program(1, 16, 12, "f16")
    (k,) = driver.lower(driver.check_text(text, "mm.wsp")).kernels
    k = plan_kernel(k)
    for op in k.ops:
        if op.op == "convert" and k.ops[op.args[0]].op == "param" \
                and k.ops[op.args[0]].attr == "bt":
            assert op.shape == (12, 16)
        if op.op == "convert":
            assert k.ops[op.args[0]].op != "transpose"
