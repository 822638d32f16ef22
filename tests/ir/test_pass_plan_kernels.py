"""The `plan-kernels` pass (`ir/passes/plan_kernels.py`): golden plans of small kernels, buffer
reuse by liveness, `ir.verify` after the pass (and on broken plans), the pipeline and printer
wiring, and semantic preservation: -O0 (the trivial plan) and -O2 give the same bits on the
kernels of tests/backends/test_cpu_kernels.py, on random chains with reductions and on every
example (C builds: `cc`)."""

from __future__ import annotations

import glob
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import InternalError, WspError
from ptowsp.ir import nodes as N
from ptowsp.ir.passes import optimize, pass_names
from ptowsp.ir.passes.plan_kernels import plan_kernel, plan_kernels
from ptowsp.ir.printer import kernel_lines, print_module
from ptowsp.ir.verify import verify

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in glob.glob(str(ROOT / "examples" / "*.wsp")) if "errors_demo" not in p)

HEAD = "input X: f32[16, 128]\ninput W: f32[1, 128]\noutput Y: f32[16, 128]\n"
KERNELS = {
    # an elementwise chain: one nest, values in registers, the store from the nest
    "chain": HEAD + """
kernel k(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, sigmoid(exp(x) * w + 1.0) - tanh(x))
}""",
    # a row reduction accumulated in lanes within its input's nest, then broadcast
    "rmsnorm": HEAD + """
kernel k(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, x * rsqrt(rowmean(x * x) + 1e-6) * w)
}""",
    "softmax": HEAD + """
kernel k(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, softmax(x * w))
}""",
    # a blocked matmul into an array, read by an elementwise epilogue
    "matmul_epilogue": """
input A: f32[32, 64]
input B: f32[64, 32]
input W: f32[1, 32]
output Y: f32[32, 32]
kernel k(a: In[Tile[32, 64, f32]], b: In[Tile[64, 32, f32]], w: In[Tile[1, 32, f32]],
         y: Out[Tile[32, 32, f32]]) {
    store(y, relu(matmul(a, b) + w))
}""",
    # transposes and column reductions force arrays; the early ones die before the later ones
    "reuse": HEAD + """
kernel k(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
    store(y, transpose(transpose(transpose(transpose(exp(x)) * 2.0) + 1.0) * 3.0) * w)
}""",
}


def _workload(text: str, params: str) -> str:
    return text + f"\nworkload main_w() {{ k({params}) }}\n"


def lowered(name: str) -> N.Module:
    text = KERNELS[name]
    params = {"matmul_epilogue": "a = A, b = B, w = W, y = Y"}.get(name, "x = X, w = W, y = Y")
    return ptowsp.parse(_workload(text, params), f"{name}.wsp").ir


def planned(name: str) -> N.Kernel:
    m = plan_kernels(lowered(name))
    verify(m)
    return m.kernels[0]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_golden_plans(golden, name):
    golden(f"plan_kernels_{name}.ir", "\n".join(kernel_lines(planned(name))) + "\n")


def test_chain_is_one_nest_in_registers():
    k = planned("chain")
    (step,) = k.plan.steps
    (nest,) = step.nests
    assert nest.shape == (16, 128) and nest.stores == (("y", k.stores[0][1]),)
    assert k.plan.buffers == () and k.plan.temp_bytes_after == 0 and k.plan.stores == ()


def test_rmsnorm_reduces_in_lanes_row_by_row():
    k = planned("rmsnorm")
    (step,) = k.plan.steps
    assert len(step.nests) == 3  # row by row: reduction, [16, 1] rsqrt, scaling
    (red,) = step.nests[0].rowreds
    assert k.ops[red].op == "rowmean" and k.plan.kinds[red] == "red"
    # the only arrays are the two [16, 1] row vectors
    assert sorted(k.plan.buffers) == [("f32", 16), ("f32", 16)]


def test_softmax_is_expanded_and_fused():
    k = planned("softmax")
    assert "softmax" not in [op.op for op in k.ops]
    assert [op.op for op in k.ops if op.op.startswith("row")] == ["rowmax", "rowsum"]
    (step,) = k.plan.steps
    assert len(step.nests) >= 3


def test_matmul_epilogue():
    k = planned("matmul_epilogue")
    mm = next(s for s in k.plan.steps if s.matmul is not None)
    assert mm.blocked and not mm.pack_a and not mm.pack_b  # f32 tiles: A and B in place
    assert mm.matmul in dict(k.plan.assign)  # the epilogue reads it from an array


def test_matmul_b_packed_when_converted_in_place_when_f32():
    f16 = KERNELS["matmul_epilogue"].replace("b: In[Tile[64, 32, f32]]", "b: In[Tile[64, 32, f16]]")
    f16 = f16.replace("input B: f32[64, 32]", "input B: f16[64, 32]")
    m = plan_kernels(ptowsp.parse(_workload(f16, "a = A, b = B, w = W, y = Y"), "h.wsp").ir)
    k = m.kernels[0]
    mm = next(s for s in k.plan.steps if s.matmul is not None)
    b = k.ops[k.ops[mm.matmul].args[1]]
    # the f16 weight is converted once into an f32 array, whose panels are then read in place
    assert b.op == "convert" and b.dtype == "f32"
    assert not mm.pack_b and k.ops[mm.matmul].args[1] in dict(k.plan.assign)


def test_trivial_plan_runs_matmuls_unblocked():
    k = plan_kernel(lowered("matmul_epilogue").kernels[0], fuse=False)
    steps = [s for s in k.plan.steps if s.matmul is not None]
    assert steps and all(not s.blocked and s.kc == 0 and s.pack_b for s in steps)


def test_liveness_reuse_shrinks_temporaries():
    k = planned("reuse")
    p = k.plan
    assert p.temp_bytes_after < p.temp_bytes_before
    assert len(p.buffers) < len(p.assign)
    # the trivial plan: one buffer per value, nothing shared
    t = plan_kernel(lowered("reuse").kernels[0], fuse=False).plan
    assert t.temp_bytes_after == t.temp_bytes_before and len(t.buffers) == len(t.assign)


def test_pass_is_idempotent_and_leaves_extern_kernels():
    m = plan_kernels(lowered("chain"))
    assert plan_kernels(m) is m
    ext = N.Kernel("e", "e", (N.KParam("y", "tile", "f32", "Out", 1, 1),), (), (), extern_c="")
    assert plan_kernel(ext) is ext


def test_pipeline_runs_it_last_at_O2_only():
    assert pass_names()[-1] == "plan-kernels"
    m = lowered("rmsnorm")
    assert all(k.plan is None for k in optimize(m, 0)[0].kernels)
    assert all(k.plan is None for k in optimize(m, 1)[0].kernels)
    o2, pm = optimize(m, 2, verify_each=True)
    assert all(k.plan is not None for k in o2.kernels)
    assert "plan-kernels" in [t.name for t in pm.timings]
    assert "temporaries: 128 bytes -> 128 bytes" in print_module(o2)


def test_print_after_plan_kernels_cli(tmp_path):
    from click.testing import CliRunner

    from ptowsp.cli import main

    src = tmp_path / "r.wsp"
    src.write_text(_workload(KERNELS["reuse"], "x = X, w = W, y = Y"))
    r = CliRunner().invoke(main, ["compile", str(src), "--emit", "ir", "-O2", "--print-after",
                                  "plan-kernels"])
    assert r.exit_code == 0, r.output
    assert "; ---- IR after plan-kernels" in r.output
    assert "plan:" in r.output and "buffer b0:" in r.output and "temporaries: " in r.output


def test_python_pass_class():
    from ptowsp.passes import PassManager, PlanKernelsPass

    m = PassManager([PlanKernelsPass()]).run(lowered("chain"))
    assert m.kernels[0].plan is not None


@pytest.mark.parametrize("path", EXAMPLES, ids=[Path(p).stem for p in EXAMPLES])
def test_examples_verify_after_the_pass(path):
    m, _ = optimize(ptowsp.load(path).ir, 2, verify_each=True)
    for k in m.kernels:
        assert (k.plan is None) == (k.extern_c is not None)
        assert k.plan is None or k.plan.temp_bytes_after <= k.plan.temp_bytes_before
        # the trivial plan (what the cpu back end uses at -O0) verifies too
        if k.extern_c is None:
            verify(replace(m, kernels=(plan_kernel(replace(k, plan=None), fuse=False),) + tuple(
                q for q in m.kernels if q.name != k.name)))


def _broken(k: N.Kernel, **changes) -> N.Module:
    m = lowered("reuse")
    return replace(m, kernels=(replace(k, plan=replace(k.plan, **changes)),))


def test_verify_rejects_broken_plans():
    k = planned("reuse")
    p = k.plan
    # every array in one buffer: values live at once would share it
    big = max(n for _, n in p.buffers)
    with pytest.raises(InternalError, match="share buffer"):
        verify(_broken(k, buffers=(("f32", big),), assign=tuple((u, 0) for u, _ in p.assign),
                       temp_bytes_after=4 * big))
    with pytest.raises(InternalError, match="temporaries"):
        verify(_broken(k, temp_bytes_after=p.temp_bytes_after + 1))
    with pytest.raises(InternalError, match="has no array"):
        verify(_broken(k, assign=p.assign[1:]))
    with pytest.raises(InternalError, match="in no step"):
        verify(_broken(k, steps=p.steps[1:]))


# ---------------------------------------------------------------------------------------------
# Semantic preservation: -O0 (the trivial plan) == -O2, bit for bit


@pytest.fixture(scope="module")
def both_levels(tmp_path_factory):
    """Every kernel of test_cpu_kernels.py, built unplanned and planned (two libraries)."""
    from concurrent.futures import ThreadPoolExecutor

    from ptowsp.backends.cpu import kernels as K
    from tests.backends import test_cpu_kernels as T

    o0 = dict(T.KERNELS)
    o2 = {n: plan_kernel(k) for n, k in o0.items()}
    dirs = [tmp_path_factory.mktemp("o0"), tmp_path_factory.mktemp("o2")]
    srcs = [K.emit_kernels(o0.values()), K.emit_kernels(o2.values())]
    with ThreadPoolExecutor(2) as pool:
        sos = list(pool.map(T.build_shared, srcs, dirs))
    return T, T.Lib(o0, [(list(o0), sos[0])]), T.Lib(o2, [(list(o2), sos[1])])


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _nan(a: np.ndarray, dt: str) -> np.ndarray:
    if dt == "bf16":  # bits in uint16
        return ((a & 0x7F80) == 0x7F80) & ((a & 0x7F) != 0)
    if a.dtype.kind == "f":
        return np.isnan(a)
    return np.zeros(a.shape, bool)


def _same(a: np.ndarray, b: np.ndarray, dt: str) -> bool:
    """The same bits, except that any NaN equals any NaN (its sign and payload may depend on
    vectorisation: which operand a NaN came from is not part of the value semantics)."""
    na, nb = _nan(a, dt), _nan(b, dt)
    if not np.array_equal(na, nb):
        return False
    keep = ~na
    return _bits(a[keep]) == _bits(b[keep])


@pytest.mark.cc
def test_cpu_kernels_same_bits_at_O0_and_O2(both_levels):
    T, lib0, lib2 = both_levels
    rng = np.random.default_rng(7)
    for name, k in T.KERNELS.items():
        inputs, scalars = {}, {}
        for p in k.params:
            if p.kind == "scalar":
                scalars[p.name] = float(rng.uniform(-3, 3)) if p.dtype in T.FLOATS else \
                    int(rng.integers(-5, 6)) if p.dtype != "bool" else 1
                if p.dtype in T.FLOATS or p.dtype == "bool":
                    continue
                lo, hi = T.LIMITS[p.dtype]
                scalars[p.name] = max(lo, min(hi, scalars[p.name]))
            elif p.mode != "Out":
                inputs[p.name] = T.rand(p.dtype, (p.rows, p.cols), rng)
        a = lib0.run(name, scalars, **{n: v.copy() for n, v in inputs.items()})
        b = lib2.run(name, scalars, **{n: v.copy() for n, v in inputs.items()})
        for p in k.params:
            if p.kind == "tile" and p.mode != "In":
                assert _same(a[p.name], b[p.name], p.dtype), f"{name}: {p.name} differs"


@pytest.fixture
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


BINDS = {"attention_tiered": {"B": 2, "H": 1, "S": 256},
         "attention_varlen": {"B": 2, "H": 1, "S": 128}, "moe": {"T": 32}, "moe_extern": {"T": 32}, "rmsnorm": {"B": 2, "T": 2}, "softmax": {"R": 256},
         "gemm": {"M": 128, "N": 128, "K": 128}, "swiglu_ffn": {"T": 64}}


def _outcome(prog, bind, arrays):
    try:
        return prog.run(bind=bind, random_inputs=3, **arrays)
    except WspError as err:
        return str(err)


@pytest.mark.cc
@pytest.mark.parametrize("path", EXAMPLES, ids=[Path(p).stem for p in EXAMPLES])
def test_examples_same_bits_at_O0_and_O2(path, cache):
    name = Path(path).stem
    from tests.test_optimizer import BIND, MESH  # the mesh examples: sized as test_optimizer does

    bind = BINDS.get(name, BIND[name] if name in MESH else {})
    arrays = {}
    if name.startswith("attention"):
        arrays["seq_lens"] = np.array([bind["S"], bind["S"] // 2 + 3], np.int32)
    module = ptowsp.load(path)
    mesh = MESH.get(name)
    a = _outcome(module.compile(target="cpu_sim", opt_level=0, mesh=mesh), bind, arrays)
    b = _outcome(module.compile(target="cpu_sim", opt_level=2, mesh=mesh), bind, arrays)
    assert type(a) is type(b)
    if isinstance(a, str):
        assert a == b
        return
    assert sorted(a) == sorted(b)
    for t in a:
        assert _same(a[t], b[t], module.ir.tensor(t).dtype), f"{name}: {t} differs at -O0, -O2"


_CHAINS: dict = {}


def _chains(seed: int, dt: str):
    """A module of random elementwise chains (test_differential's generator), each also
    normalised by a row reduction and by a column reduction, compiled at -O0 and -O2."""
    from tests.backends.test_differential import random_expr

    if (seed, dt) in _CHAINS:
        return _CHAINS[(seed, dt)]
    rng = random.Random(seed)
    m, n = 8, 40
    lines = [f"input X: {dt}[{m}, {n}]", f"input Y: {dt}[{m}, {n}]"]
    calls = []
    i = 0
    while i < 6:
        text, _, kind = random_expr(rng, 3)
        if kind != "tile":
            continue
        body = [text, f"({text}) * rsqrt(rowmean(({text}) * ({text})) + 1.0)",
                f"({text}) - colmax({text}) + rowsum(y)"][i % 3]
        lines.append(f"output O{i}: {dt}[{m}, {n}]")
        lines.append(f"kernel k{i}(x: In[Tile[{m}, {n}, {dt}]], y: In[Tile[{m}, {n}, {dt}]], "
                     f"o: Out[Tile[{m}, {n}, {dt}]]) {{ store(o, {body}) }}")
        calls.append(f"    k{i}(x = X, y = Y, o = O{i})")
        i += 1
    lines.append("workload w() {\n" + "\n".join(calls) + "\n}")
    module = ptowsp.parse("\n".join(lines), f"plan_chains_{seed}_{dt}.wsp")
    out = (module.compile(target="cpu_sim", opt_level=0), module.compile(target="cpu_sim"))
    _CHAINS[(seed, dt)] = out
    return out


@pytest.mark.cc
@pytest.mark.parametrize("seed, dt", [(1, "f32"), (2, "f16"), (3, "f64")])
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_chains_same_bits_at_O0_and_O2(seed, dt, data, cache):
    from hypothesis.extra import numpy as hnp

    o0, o2 = _chains(seed, dt)
    np_dt = {"f32": np.float32, "f16": np.float16, "f64": np.float64}[dt]
    elems = st.floats(-20, 20, allow_nan=False, width=16) | st.sampled_from([0.0, -0.0, 1e-3])
    x = data.draw(hnp.arrays(np_dt, (8, 40), elements=elems))
    y = data.draw(hnp.arrays(np_dt, (8, 40), elements=elems))
    a, b = o0.run(X=x, Y=y), o2.run(X=x, Y=y)
    for t in a:
        assert _same(a[t], b[t], dt), f"{t} differs between -O0 and -O2"
