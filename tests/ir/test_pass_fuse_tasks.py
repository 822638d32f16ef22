"""Task fusion by operator category (ptowsp/ir/passes/fuse_tasks.py): golden IR before and
after on small programs, the cases that must not fuse, the policy table, and semantic
preservation (every example and generated programs give bit-identical results at -O0 and -O3
on ref; a few on cpu_sim)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import sym
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.passes import pass_names, pipeline
from ptowsp.ir.passes.fuse_tasks import FusionConfig, category, fuse_tasks
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify
from ptowsp.primitives import BROADCAST, COMPLEX, INJECTIVE, OPAQUE, REDUCTION

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def ir(text: str) -> N.Module:
    return ptowsp.parse(textwrap.dedent(text), "t.wsp").ir


def fused(m: N.Module, **config) -> N.Module:
    out = fuse_tasks(m, FusionConfig(**config)) if config else fuse_tasks(m)
    verify(out)
    return out


def ntasks(m: N.Module) -> int:
    return sum(len(V.tasks(s.body)) for s in m.schedules)


def golden_pair(golden, name: str, m: N.Module) -> N.Module:
    after = fused(m)
    golden(f"fuse_tasks_{name}.ir", "; before\n" + print_module(m) + "\n; after fuse-tasks\n"
           + print_module(after))
    return after


RMS_MM = """
    module rms_mm
    sym T = 64
    input X: f32[T, 128]
    input W: f32[1, 128]
    input Wo: f32[128, 32]
    scratch Nx: f32[T, 128]
    output Y: f32[T, 32]
    kernel rms(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]]) {
        store(y, x * rsqrt(rowmean(x * x) + 1e-6) * w)
    }
    kernel proj(n: In[Tile[16, 128, f32]], w: In[Tile[128, 32, f32]], y: Out[Tile[16, 32, f32]]) {
        store(y, matmul(n, w))
    }
    workload f() {
        for t in P(T / 16) {
            rms[t](x = X[t*16 : t*16 + 16, :], w = W, y = Nx[t*16 : t*16 + 16, :])
            proj[t](n = Nx[t*16 : t*16 + 16, :], w = Wo, y = Y[t*16 : t*16 + 16, :])
        }
    }
    schedule main = f()
"""

# three elementwise stages through f16 and bf16 scratch, in three loops (the last one's
# variable spelled differently): the stores' roundings must survive fusion bit for bit
CHAIN3 = """
    module chain3
    sym T = 64
    input X: f16[T, 32]
    scratch A: f16[T, 32]
    scratch B: bf16[T, 32]
    output Y: f32[T, 32]
    kernel scale(x: In[Tile[16, 32, f16]], y: Out[Tile[16, 32, f16]]) { store(y, x * 1.3 + 0.1) }
    kernel shift(x: In[Tile[16, 32, f16]], y: Out[Tile[16, 32, bf16]]) { store(y, silu(x) - 0.7) }
    kernel act(x: In[Tile[16, 32, bf16]], y: Out[Tile[16, 32, f32]]) { store(y, exp(x) * 0.5) }
    workload w() {
        for t in P(T / 16) { scale[t](x = X[t*16 : t*16 + 16, :], y = A[t*16 : t*16 + 16, :]) }
        for t in P(T / 16) { shift[t](x = A[t*16 : t*16 + 16, :], y = B[t*16 : t*16 + 16, :]) }
        for u in P(T / 16) { act[u](x = B[u*16 : u*16 + 16, :], y = Y[u*16 : u*16 + 16, :]) }
    }
    schedule main = w()
"""

# a template for the cases that must not fuse: two kernels, one scratch S
PAIR = """
    module pair
    sym T = 64
    input X: f32[T + 16, 32]
    scratch S: f32[T + 16, 32]
    output Y: f32[T, 32]
    output Z: f32[T, 32]
    kernel p(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) { store(y, x * 2.0) }
    kernel c(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) { store(y, x + 1.0) }
    kernel c32(x: In[Tile[32, 32, f32]], y: Out[Tile[32, 32, f32]]) { store(y, x + 1.0) }
    kernel ext(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) extern c \"\"\"
        for (int64_t r = 0; r < x.rows; r++)
            for (int64_t c = 0; c < x.cols; c++) y.data[r * y.stride + c] = x.data[r * x.stride + c];
    \"\"\"
    workload w() {
BODY
    }
    schedule main = w()
"""

PRODUCE = "for t in P(T / 16) { p[t](x = X[t*16 : t*16 + 16, :], y = S[t*16 : t*16 + 16, :]) }"
CONSUME = "for t in P(T / 16) { c[t](x = S[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :]) }"

NO_FUSE = {
    "read_twice": [PRODUCE, CONSUME,
                   "for t in P(T / 16) { c[t](x = S[t*16 : t*16 + 16, :], y = Z[t*16 : t*16 + 16, :]) }"],
    "output": [PRODUCE.replace("y = S", "y = Z"), CONSUME.replace("x = S", "x = Z")],
    "shifted": [PRODUCE, CONSUME.replace("x = S[t*16 : t*16 + 16", "x = S[t*16 + 16 : t*16 + 32")],
    "opaque": [PRODUCE.replace("p[t]", "ext[t]"), CONSUME],
    "extents": [PRODUCE,
                "for t in P(T / 32) { c32[t](x = S[t*32 : t*32 + 32, :], y = Y[t*32 : t*32 + 32, :]) }"],
    "seq_between": [PRODUCE,
                    "for s in P.seq(2) { c[s](x = X[s*16 : s*16 + 16, :], y = Z[s*16 : s*16 + 16, :]) }",
                    CONSUME],
    # the producer's box does not move with t: every iteration overwrites S[0:16]
    "not_iteration_local": [
        "for t in P(T / 16) { p[t](x = X[t*16 : t*16 + 16, :], y = S[0 : 16, :]) }",
        "for t in P(T / 16) { c[t](x = S[0 : 16, :], y = Y[t*16 : t*16 + 16, :]) }"],
}


def pair(*stmts: str) -> N.Module:
    body = "\n".join("        " + s for s in stmts)
    return ir(PAIR.replace("BODY", textwrap.dedent(body)))


# --------------------------------------------------------------------------------------------
# Golden IR


def test_swiglu_two_loops(golden):
    m = ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp")).ir
    after = golden_pair(golden, "swiglu", m)
    assert ntasks(m) == 2 and ntasks(after) == 1
    (k,) = after.kernels
    assert k.name == "gate__down" and k.source == "gate+down"
    assert k.fused == ("gate (complex-out-fusable) -> down (complex-out-fusable) via H "
                       "[whole tile]",)
    assert "H" not in {t.name for t in after.tensors}


def test_rmsnorm_feeding_matmul(golden):
    after = golden_pair(golden, "rms_mm", ir(RMS_MM))
    assert [k.name for k in after.kernels] == ["rms__proj"]
    # both kernels call their weight parameter `w`: B's is renamed
    assert [p.name for p in after.kernels[0].params] == ["x", "w", "w_2", "y"]
    assert "# fused: rms (reduction) -> proj (complex-out-fusable) via Nx [whole tile]" in \
        print_module(after)


def test_chain_of_three(golden):
    after = golden_pair(golden, "chain3", ir(CHAIN3))
    assert ntasks(after) == 1 and {t.name for t in after.tensors} == {"X", "Y"}
    (k,) = after.kernels
    assert k.source == "scale+shift+act" and len(k.fused) == 2
    # the f16 store of `scale` is a rounding: convert to f32 and back keeps it
    ops = [op.op for op in k.ops]
    assert ops.count("convert") >= 2


@pytest.mark.parametrize("case", sorted(NO_FUSE))
def test_must_not_fuse(golden, case):
    m = pair(*NO_FUSE[case])
    assert fuse_tasks(m) is m
    golden(f"fuse_tasks_no_{case}.ir", print_module(m))


def test_inout_intermediate_not_fused():
    m = ir("""
        module m
        input X: f32[32, 32]
        scratch S: f32[32, 32]
        output Y: f32[32, 32]
        kernel p(x: In[Tile[16, 32, f32]], y: InOut[Tile[16, 32, f32]]) { store(y, y + x) }
        kernel c(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) { store(y, x * 3.0) }
        workload w() {
            for t in P(2) {
                p[t](x = X[t*16 : t*16 + 16, :], y = S[t*16 : t*16 + 16, :])
                c[t](x = S[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :])
            }
        }
        schedule main = w()
    """)
    assert fuse_tasks(m) is m


def test_one_loop_body_with_a_task_in_between():
    # gate -> act through G with `up` (which act also needs) in between: all four fuse
    m = ir(SWIGLU_CHAIN)
    after = fused(m)
    assert ntasks(m) == 4 and ntasks(after) == 1
    assert {t.name for t in after.tensors if t.kind == "scratch"} == set()
    (k,) = after.kernels
    assert sorted(k.source.split("+")) == ["act", "down", "gate", "up"]
    # X is read by gate and up with the same box: one parameter
    assert sum(1 for p in k.params if p.name.startswith("x")) == 1


def test_unchanged_is_the_same_object_and_idempotent():
    m = ptowsp.load(str(EXAMPLES / "softmax.wsp")).ir
    assert fuse_tasks(m) is m
    once = fused(ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp")).ir)
    assert fuse_tasks(once) is once


def test_in_the_pipeline_at_level_2():
    assert "fuse-tasks" in pass_names()
    assert "fuse-tasks" not in [p.name for p in pipeline(1)]
    assert "fuse-tasks" in [p.name for p in pipeline(2)]
    from ptowsp.passes import FuseTasksPass, PassManager

    pm = PassManager([FuseTasksPass()], verify_each=True)
    out = pm.run(ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp")))
    assert [k.name for k in out.kernels] == ["gate__down"]
    assert pm.timings[0].name == "fuse-tasks" and pm.timings[0].changed


def test_print_after_shows_the_reason():
    import io

    from ptowsp.ir.passes import optimize

    out = io.StringIO()
    optimize(ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp")).ir, 2, print_after=["fuse-tasks"],
             out=out)
    assert "# fused: gate (complex-out-fusable) -> down (complex-out-fusable) via H" in \
        out.getvalue()


# --------------------------------------------------------------------------------------------
# Categories and the policy


def test_categories():
    m = ir(RMS_MM)
    assert category(m.kernel("rms")) == REDUCTION
    assert category(m.kernel("proj")) == COMPLEX
    m = ir(CHAIN3)
    assert category(m.kernel("scale")) == INJECTIVE
    m = pair(PRODUCE, CONSUME)
    assert category(m.kernel("ext")) == OPAQUE
    m = ir(CHAIN3.replace("exp(x) * 0.5", "rowmax(x) + x"))
    assert category(m.kernel("act")) == REDUCTION
    m = ir(RMS_MM.replace("x * rsqrt(rowmean(x * x) + 1e-6) * w", "x * w"))
    assert category(m.kernel("rms")) == BROADCAST


def test_policy_table():
    c = FusionConfig()
    assert c.rule(INJECTIVE, COMPLEX) == "injective"
    assert c.rule(BROADCAST, REDUCTION) == "injective"
    assert c.rule(COMPLEX, INJECTIVE) == "epilogue"
    assert c.rule(REDUCTION, BROADCAST) == "epilogue"
    assert c.rule(COMPLEX, COMPLEX) == "whole tile"
    assert c.rule(OPAQUE, INJECTIVE) is None and c.rule(INJECTIVE, OPAQUE) is None
    tvm = FusionConfig(whole_tiles=False)
    assert tvm.rule(COMPLEX, COMPLEX) is None and tvm.rule(REDUCTION, COMPLEX) is None


def test_tvm_rules_keep_matmul_chains_apart():
    m = ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp")).ir
    assert fuse_tasks(m, FusionConfig(whole_tiles=False)) is m
    # SwiGLU chain under TVM's rules: only gate -> act (matmul then elementwise) may fuse
    after = fused(ir(SWIGLU_CHAIN), whole_tiles=False)
    assert ntasks(after) == 3


def test_max_fused_ops():
    after = fused(ir(CHAIN3), max_fused_ops=2)
    assert ntasks(after) == 2
    assert fuse_tasks(ir(CHAIN3), FusionConfig(max_fused_ops=1)).kernels == ir(CHAIN3).kernels


# --------------------------------------------------------------------------------------------
# Semantic preservation

SWIGLU_CHAIN = """
    module swiglu_chain
    sym T = 64
    input X: f32[T, 64]
    input W1: f32[64, 128]
    input W3: f32[64, 128]
    input W2: f32[128, 64]
    scratch G: f32[T, 128]
    scratch U: f32[T, 128]
    scratch H: f32[T, 128]
    output Y: f32[T, 64]
    kernel gate(x: In[Tile[16, 64, f32]], w: In[Tile[64, 128, f32]], y: Out[Tile[16, 128, f32]]) {
        store(y, matmul(x, w))
    }
    kernel up(x: In[Tile[16, 64, f32]], w: In[Tile[64, 128, f32]], y: Out[Tile[16, 128, f32]]) {
        store(y, matmul(x, w))
    }
    kernel act(g: In[Tile[16, 128, f32]], u: In[Tile[16, 128, f32]], h: Out[Tile[16, 128, f32]]) {
        store(h, silu(g) * u)
    }
    kernel down(h: In[Tile[16, 128, f32]], w: In[Tile[128, 64, f32]], y: Out[Tile[16, 64, f32]]) {
        store(y, matmul(h, w))
    }
    workload f() {
        for t in P(T / 16) {
            gate[t](x = X[t*16 : t*16 + 16, :], w = W1, y = G[t*16 : t*16 + 16, :])
            up[t](x = X[t*16 : t*16 + 16, :], w = W3, y = U[t*16 : t*16 + 16, :])
            act[t](g = G[t*16 : t*16 + 16, :], u = U[t*16 : t*16 + 16, :], h = H[t*16 : t*16 + 16, :])
            down[t](h = H[t*16 : t*16 + 16, :], w = W2, y = Y[t*16 : t*16 + 16, :])
        }
    }
    schedule main = f()
"""

# the examples' small bindings and inputs: test_optimizer's (the Llama layer's batch included)
from tests.test_optimizer import BIND, MESH  # noqa: E402
from tests.test_optimizer import example_inputs as inputs  # noqa: E402


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k


def examples():
    """The single-device examples: this test runs the pass on the module's IR itself, and a
    mesh program's passes see it only lowered to devices (test_optimizer.py runs the mesh
    examples at every level)."""
    return sorted(p.stem for p in EXAMPLES.glob("*.wsp")
                  if p.stem != "errors_demo" and p.stem not in MESH)


@pytest.fixture
def route_extern():
    from ptowsp.backends.ref import register_extern, unregister_extern
    from tests.test_examples_dynamic import route_python

    register_extern("route", route_python)
    yield
    unregister_extern("route")


def run_ir(m: N.Module, schedule: str, bind: dict, arrays: dict) -> dict:
    from ptowsp.backends.ref import run

    syms = {s.name: s.default for s in m.syms if s.default is not None}
    syms.update(bind)
    return run(m, schedule, syms, arrays)


def close(a: dict, b: dict) -> None:
    """-O3 also runs passes that may reassociate kernel arithmetic (plan-kernels): within
    rounding there; this pass alone is checked bit for bit."""
    assert a.keys() == b.keys()
    for k in a:
        x, y, tol = a[k], b[k], 1e-5
        if x.dtype == np.uint16:  # bf16 bits
            x, y = (np.left_shift(v.astype(np.uint32), 16).view(np.float32) for v in (x, y))
            tol = 1e-2
        elif x.dtype == np.float16:
            tol = 2e-3
        np.testing.assert_allclose(y, x, rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("name", examples())
def test_examples_same_at_o0_and_o3_on_ref(name, route_extern):
    mod = ptowsp.load(str(EXAMPLES / f"{name}.wsp"))
    bind = BIND[name]
    after = fused(mod.ir)
    for s in mod.ir.schedules:
        arrays = inputs(mod.ir, bind, 1)
        r0 = mod.compile("ref", s.name, opt_level=0).run(bind, **arrays)
        same(r0, run_ir(after, s.name, bind, arrays))
        close(r0, mod.compile("ref", s.name, opt_level=3, verify_each=True).run(bind, **arrays))


def run_text(text: str, target: str, level: int, seed: int = 3) -> dict:
    mod = ptowsp.parse(textwrap.dedent(text), "t.wsp")
    arrays = inputs(mod.ir, {}, seed)
    if any(t.dtype == "f16" for t in mod.ir.tensors if t.kind == "input"):
        arrays = {k: v.astype(np.float16) for k, v in arrays.items()}
    if level == -1:  # this pass alone
        return run_ir(fused(mod.ir), "main", {}, arrays)
    return mod.compile(target, opt_level=level).run(**arrays)


@pytest.mark.parametrize("text", [RMS_MM, CHAIN3, SWIGLU_CHAIN], ids=["rms_mm", "chain3", "swiglu"])
def test_small_programs_same_on_ref(text):
    r0 = run_text(text, "ref", 0)
    same(r0, run_text(text, "ref", -1))
    close(r0, run_text(text, "ref", 3))


@pytest.mark.cc
@pytest.mark.parametrize("text", [RMS_MM, CHAIN3, SWIGLU_CHAIN], ids=["rms_mm", "chain3", "swiglu"])
def test_small_programs_same_on_cpu_sim(text, tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path))
    r0, r3 = run_text(text, "cpu_sim", 0), run_text(text, "cpu_sim", 3)
    if text is CHAIN3:
        same(r0, r3)  # elementwise only: the same C arithmetic, bit for bit
    else:  # a fused matmul may accumulate in another order; stay within rounding
        for k in r0:
            np.testing.assert_allclose(r3[k], r0[k], rtol=2e-5, atol=2e-5)


@pytest.mark.cc
def test_swiglu_example_on_cpu_sim(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path))
    mod = ptowsp.load(str(EXAMPLES / "swiglu_ffn.wsp"))
    arrays = inputs(mod.ir, {"T": 64}, 2)
    r0 = mod.compile("cpu_sim", opt_level=0).run({"T": 64}, **arrays)
    p3 = mod.compile("cpu_sim", opt_level=3)
    r3 = p3.run({"T": 64}, **arrays)
    assert p3.stats.task_count == 4
    np.testing.assert_allclose(r3["Y"], r0["Y"], rtol=2e-5, atol=2e-5)


# --------------------------------------------------------------------------------------------
# Generated programs: chains of stages through scratch tensors, in one loop or several

DTYPES = ("f32", "f16", "bf16")
STAGES = {  # (body with `x` and optional `w`, needs the weight, keeps the shape)
    "ew": "x * 1.5 - 0.25",
    "silu": "silu(x) + x",
    "norm": "x * rsqrt(rowmean(x * x) + 0.5)",
    "rowmax": "x - rowmax(x)",
    "mm": "matmul(x, w)",
}


@st.composite
def chain_program(draw):
    n = draw(st.integers(2, 4))
    kinds = [draw(st.sampled_from(sorted(STAGES))) for _ in range(n)]
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in range(n)]  # each stage's output dtype
    split = [draw(st.booleans()) for _ in range(n)]  # True: a new loop starts at this stage
    # a stage's output read twice (by the next stage and by an extra reader) or made an output
    reread = draw(st.integers(-1, n - 2))
    tensors = ["input X: f32[T, 16]", "input Wt: f32[16, 16]"]
    kernels, calls = [], []
    prev, prev_dt = "X", "f32"
    for i, (kind, dt) in enumerate(zip(kinds, dtypes)):
        last = i == n - 1
        out = "Y" if last else f"S{i}"
        kind_out = "output" if last or i == reread and draw(st.booleans()) else "scratch"
        tensors.append(f"{kind_out} {out}: {dt}[T, 16]")
        w = ", w: In[Tile[16, 16, f32]]" if kind == "mm" else ""
        kernels.append(f"kernel k{i}(x: In[Tile[8, 16, {prev_dt}]]{w}, "
                       f"y: Out[Tile[8, 16, {dt}]]) {{ store(y, {STAGES[kind]}) }}")
        wa = ", w = Wt" if kind == "mm" else ""
        calls.append((split[i] or i == 0,
                      f"k{i}[t](x = {prev}[t*8 : t*8 + 8, :]{wa}, y = {out}[t*8 : t*8 + 8, :])"))
        if i == reread:
            tensors.append(f"output Z{i}: {dt}[T, 16]")
            kernels.append(f"kernel r{i}(x: In[Tile[8, 16, {dt}]], y: Out[Tile[8, 16, {dt}]]) "
                           "{ store(y, x) }")
            calls.append((draw(st.booleans()),
                          f"r{i}[t](x = {out}[t*8 : t*8 + 8, :], y = Z{i}[t*8 : t*8 + 8, :])"))
        prev, prev_dt = out, dt
    loops, cur = [], []
    for new, call in calls:
        if new and cur:
            loops.append(cur)
            cur = []
        cur.append(call)
    loops.append(cur)
    body = "\n".join("    for t in P(T / 8) {\n" + "\n".join(f"        {c}" for c in lp)
                     + "\n    }" for lp in loops)
    return ("module gen\nsym T = 32\n" + "\n".join(tensors) + "\n" + "\n".join(kernels)
            + "\nworkload w() {\n" + body + "\n}\nschedule main = w()\n")


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(chain_program(), st.integers(0, 3))
def test_generated_programs_same_at_o0_and_o3(text, seed):
    mod = ptowsp.parse(text, "gen.wsp")
    arrays = inputs(mod.ir, {}, seed)
    r0 = mod.compile("ref", opt_level=0).run(**arrays)
    same(r0, run_ir(fused(mod.ir), "main", {}, arrays))
    close(r0, mod.compile("ref", opt_level=3).run(**arrays))


# --------------------------------------------------------------------------------------------
# Nests of the same ragged loop: `for b in P(batch) { for t in P(toks[b]) {...} }` twice. Each
# outer body reads the length (and asserts it is not negative) before its inner loop; the
# second nest's read of the same element, written by no task of either nest, gives the same
# value, so the nests fuse as dense ones do, keeping the first nest's read and assert.

RAGGED = """
    module rag
    sym B, S
    input  lens: i32[B]
    input  lens2: i32[B]
    input  X: f32[B, S, 64]
    output Y: f32[B, S, 64]
    scratch H: f32[B, S, 64]
    kernel square(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * x) }
    kernel scaled(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 0.5 + 1.0) }
    axis batch = DenseDyn(B)
    axis toks = Ragged(batch, lens)
    axis toks2 = Ragged(batch, lens2)
    workload w() {
        for b in P(batch) { for t in P(toks[b]) { square[b, t](x = X[b, t], y = H[b, t]) } }
        SECOND
    }
    schedule main = w()
"""
SECOND = "for c in P(batch) { for u in P(toks[c]) { scaled[c, u](x = H[c, u], y = Y[c, u]) } }"
RAGGED_NO_FUSE = {
    # the lengths of another tensor: another task space
    "other_lengths": SECOND.replace("toks[c]", "toks2[c]"),
    # the consumer reads the producer's box of the token before: not iteration-local
    "ragged_shifted": SECOND.replace("x = H[c, u]", "x = H[c, u - 1]"),
}


def test_ragged_nests_fuse(golden):
    m = ir(RAGGED.replace("SECOND", SECOND))
    after = golden_pair(golden, "ragged", m)
    assert ntasks(m) == 2 and ntasks(after) == 1
    assert [k.name for k in after.kernels] == ["square__scaled"]
    assert "H" not in {t.name for t in after.tensors}
    (body,) = after.schedules[0].body
    read, check, inner = body.body
    assert isinstance(read, N.Read) and isinstance(check, N.Assert) and isinstance(inner, N.Loop)
    assert (read.tensor, read.span.line, inner.extent) == ("lens", 15, sym.var(read.var))


@pytest.mark.parametrize("case", sorted(RAGGED_NO_FUSE))
def test_ragged_nests_that_must_not_fuse(golden, case):
    m = ir(RAGGED.replace("SECOND", RAGGED_NO_FUSE[case]))
    assert fuse_tasks(m) is m
    golden(f"fuse_tasks_no_{case}.ir", print_module(m))


def test_ragged_print_after_fuse_tasks(tmp_path):
    from click.testing import CliRunner

    from ptowsp.cli import main

    path = tmp_path / "rag.wsp"
    path.write_text(textwrap.dedent(RAGGED.replace("SECOND", SECOND)))
    r = CliRunner().invoke(main, ["compile", str(path), "--emit", "ir", "-O2",
                                  "--print-after", "fuse-tasks"])
    assert r.exit_code == 0, r.output
    after = r.stderr.split("; ---- IR after fuse-tasks")[1]
    assert "task square__scaled[b, t]  # square[b, t] + scaled[c, u]" in after
    assert after.count("read lens@") == 1 and "grid(lens@1)" in after


@pytest.mark.parametrize("target", ["ref", pytest.param("cpu_sim", marks=pytest.mark.cc)])
def test_ragged_nests_fused_give_the_same_results(target, tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path))
    mod = ptowsp.parse(textwrap.dedent(RAGGED.replace("SECOND", SECOND)), "t.wsp")
    rng = np.random.default_rng(5)
    lens = np.array([3, 0, 4, 1], np.int32)
    x = rng.standard_normal((4, 4, 64)).astype(np.float32)
    arrays = {"lens": lens, "lens2": lens, "X": x}
    want = np.zeros((4, 4, 64))
    for b, n in enumerate(lens):
        want[b, :n] = x[b, :n].astype(np.float64) ** 2 * 0.5 + 1.0
    results = []
    for level in (0, 2):
        prog = mod.compile(target, opt_level=level)
        results.append(prog.run(**arrays)["Y"])
        np.testing.assert_allclose(results[-1], want, rtol=1e-6)
    np.testing.assert_array_equal(results[0], results[1])
    assert prog.stats.task_count in (0, int(lens.sum()))  # one fused task per token (ref: 0)
