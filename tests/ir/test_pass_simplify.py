"""The `simplify` pass (ptowsp/ir/passes/simplify.py): golden IR before and after on small
programs, `ir.verify` after it, the same object when nothing changes, idempotence, what it must
leave alone, and the same results on ref with and without it.

Lowering already folds a `when` decided at compile time and shares identical kernel ops, so
the source cannot spell a constant `when` or a repeated op: those cases are built by editing a
lowered module (what an axis transform or a later pass could leave)."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import numpy as np
import pytest

import ptowsp
from ptowsp import sym
from ptowsp.backends.ref.interp import execute
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.passes import optimize
from ptowsp.ir.passes.simplify import cond_value, simplify, simplify_kernel
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify


def ir(text: str) -> N.Module:
    return ptowsp.parse(textwrap.dedent(text), "t.wsp").ir


def simplified(m: N.Module) -> N.Module:
    out = simplify(m)
    verify(out)
    assert simplify(out) is out  # idempotent
    return out


def golden_pair(golden, name: str, m: N.Module) -> N.Module:
    after = simplified(m)
    golden(f"simplify_{name}.ir", "; before\n" + print_module(m) + "\n; after simplify\n"
           + print_module(after))
    return after


def run(m: N.Module, arrays: dict, syms: dict | None = None) -> tuple[dict, int]:
    out, info = execute(m, None, syms or {}, arrays)
    return out, info["task_count"]


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        assert np.signbit(a[k]).tolist() == np.signbit(b[k]).tolist(), k  # -0.0 is not 0.0


def ntasks(m: N.Module) -> int:
    return sum(len(V.tasks(s.body)) for s in m.schedules)


X32 = {"X": np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)}

LOOPS = """
    module loops
    sym T = 32
    const Z = 0
    input X: f32[32, 16]
    output Y: f32[32, 16]
    kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
    workload w() {
        for i in P(0) { k[i](x = X[i*8 : i*8 + 8, :], y = Y[i*8 : i*8 + 8, :]) }
        for i in P(Z) {
            for j in P(4) { k[i, j](x = X[j*8 : j*8 + 8, :], y = Y[j*8 : j*8 + 8, :]) }
        }
        for i in P.seq(T - T) { k[i](x = X[i*8 : i*8 + 8, :], y = Y[i*8 : i*8 + 8, :]) }
        for o in P(1) {
            for t in P(T / 8) { k[o, t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
        }
    }
    schedule main = w()
"""


def test_empty_loops_removed_one_trip_loops_kept(golden):
    m = ir(LOOPS)
    after = golden_pair(golden, "loops", m)
    body = after.schedules[0].body
    # the three empty loops are gone; the one-trip loop and the symbolic one stay
    assert len(body) == 1 and isinstance(body[0], N.Loop) and body[0].var == "o"
    assert sym.const_value(body[0].extent) == 1
    assert isinstance(body[0].body[0], N.Loop) and body[0].body[0].var == "t"
    r0, n0 = run(m, X32)
    r1, n1 = run(after, X32)
    same(r0, r1)
    assert n0 == n1 == 4


def test_nothing_to_do_is_the_same_object():
    m = ir(LOOPS.replace("for i in P(0)", "for i in P(2)").replace("P(Z)", "P(1)")
           .replace("P.seq(T - T)", "P.seq(T / 8)"))
    assert simplify(m) is m
    for name in ("rmsnorm", "swiglu_ffn", "softmax", "gemm"):
        mod = ptowsp.load(f"examples/{name}.wsp").ir
        assert simplify(mod) is mod, name


# --------------------------------------------------------------------------------------------
# `when` with a constant predicate (built: lowering folds the ones the source can write)

WHENS = """
    module whens
    sym T = 32
    input X: f32[32, 16]
    output Y: f32[32, 16]
    kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
    kernel h(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x + 1.0) }
    workload w() {
        k[0](x = X[0:8, :], y = Y[0:8, :])
        h[0](x = X[0:8, :], y = Y[0:8, :])
        k[1](x = X[8:16, :], y = Y[8:16, :])
        k[2](x = X[16:24, :], y = Y[16:24, :])
        h[3](x = X[24:32, :], y = Y[24:32, :])
    }
    schedule main = w()
"""


def lt(a, b) -> N.Cond:
    return N.Cond("<", (sym.as_expr(a), sym.as_expr(b)))


def with_body(m: N.Module, body: tuple) -> N.Module:
    return replace(m, schedules=(replace(m.schedules[0], body=body),))


def when_module() -> N.Module:
    m = ir(WHENS)
    k0, h0, k1, k2, h3 = m.schedules[0].body
    T = sym.var("T")
    body = (
        # 1 < 2: the first branch, two statements (a combine block)
        N.When(((lt(1, 2), (k0, h0)),), (h3,)),
        # 3 < 2 fails: the otherwise branch, one statement
        N.When(((lt(3, 2), (h3,)),), (k1,)),
        # decided false, then undecided, then decided true: `when T < 64 {k2} otherwise {h3}`
        N.When(((N.Cond("const", (False,)), (h0,)), (lt(T, 64), (k2,)),
                (N.Cond("not", (lt(2, 1),)), (h3,))), (k0,)),
        # undecided predicate: left alone
        N.When(((lt(T, 16), (h3,)),)),
        # every branch decided false and no otherwise: nothing
        N.When(((lt(5, 5), (k1,)),)),
    )
    out = with_body(m, body)
    verify(out)
    return out


def test_constant_when_becomes_its_branch(golden):
    m = when_module()
    after = golden_pair(golden, "when", m)
    b = after.schedules[0].body
    assert len(b) == 4
    assert isinstance(b[0], N.Block) and b[0].kind == "combine" and len(b[0].body) == 2
    assert isinstance(b[1], N.Task) and b[1].text == "k[1]"
    assert isinstance(b[2], N.When) and len(b[2].branches) == 1
    assert b[2].branches[0][0] == lt(sym.var("T"), 64) and b[2].otherwise[0].text == "h[3]"
    assert b[3] is m.schedules[0].body[3]
    for T in (8, 32, 100):  # both sides of the undecided predicates
        same(run(m, X32, {"T": T})[0], run(after, X32, {"T": T})[0])


def test_chosen_branch_stays_one_step_of_a_sequential():
    """A folded branch of two statements inside `sequential` must not become two ordered steps
    (the pass returns them as one `combine` block, as lowering does)."""
    m = ir(WHENS)
    k0, h0, k1, k2, h3 = m.schedules[0].body
    seq = N.Block("sequential", (N.When(((lt(0, 1), (k1, k2)),)), h3))
    after = simplified(with_body(m, (seq,)))
    (out,) = after.schedules[0].body
    assert out.kind == "sequential" and len(out.body) == 2
    assert out.body[0] == N.Block("combine", (k1, k2)) and out.body[1] is h3
    # flatten keeps that block: a combine inside a sequential is one step
    from ptowsp.ir.passes.flatten import flatten

    assert flatten(after) is after


@pytest.mark.parametrize("c, v", [
    (N.Cond("const", (True,)), True),
    (lt(1, 2), True), (lt(2, 1), False),
    (N.Cond("==", (sym.const(4), sym.add(sym.const(2), sym.const(2)))), True),
    (N.Cond("not", (lt(1, 2),)), False),
    (N.Cond("and", (lt(sym.var("T"), 4), lt(2, 1))), False),   # false whatever T is
    (N.Cond("and", (lt(sym.var("T"), 4), lt(1, 2))), None),
    (N.Cond("or", (lt(sym.var("T"), 4), lt(1, 2))), True),
    (N.Cond("or", (lt(2, 1), lt(2, 1))), False),
    (lt(sym.var("T"), 4), None),
    (N.Cond("query", ("ev",)), None),
])
def test_cond_value(c, v):
    assert cond_value(c) is v


def test_run_time_and_sym_predicates_left_alone():
    # `when T < 64` (T a sym with a default) and a predicate on an element read stay
    m = ir("""
        module m
        sym T = 32
        input L: i32[4, 1]
        input X: f32[32, 16]
        output Y: f32[32, 16]
        kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        workload w() {
            when T < 64 { k(x = X[0:8, :], y = Y[0:8, :]) }
            for b in P(4) {
                when L[b, 0] > 0 { k[b](x = X[b*8 : b*8 + 8, :], y = Y[b*8 : b*8 + 8, :]) }
            }
        }
        schedule main = w()
    """)
    assert sum(isinstance(s, N.When) for s in V.walk(m.schedules[0].body)) == 2
    assert simplify(m) is m


# --------------------------------------------------------------------------------------------
# Kernels: common subexpressions, unreachable ops

def test_common_subexpressions_merged(golden):
    m = ir("""
        module cse
        input X: f32[8, 16]
        output Y: f32[8, 16]
        kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, exp(x * 2.0) + x) }
        workload w() { k(x = X, y = Y) }
        schedule main = w()
    """)
    (k,) = m.kernels
    assert [op.op for op in k.ops] == ["param", "literal", "mul", "exp", "add"]
    # exp(x * 2.0) written twice: `exp(x * 2.0) + exp(x * 2.0)`, with its own param, literal
    # and mul (as a pass that concatenates two kernels' ops would leave it)
    ops = k.ops[:4] + (
        N.Op("param", (), (8, 16), "f32", "x"),        # 4 = 0
        N.Op("literal", (), None, "f32", 2.0),         # 5 = 1
        N.Op("mul", (4, 5), (8, 16), "f32"),           # 6 = 2
        N.Op("exp", (6,), (8, 16), "f32"),             # 7 = 3
        N.Op("add", (3, 7), (8, 16), "f32"),           # 8
    )
    before = replace(m, kernels=(replace(k, ops=ops, stores=(("y", 8),)),))
    verify(before)
    after = golden_pair(golden, "cse", before)
    (k2,) = after.kernels
    assert [op.op for op in k2.ops] == ["param", "literal", "mul", "exp", "add"]
    assert k2.ops[4].args == (3, 3) and k2.stores == (("y", 4),)
    x = X32["X"][:8]
    same(run(before, {"X": x})[0], run(after, {"X": x})[0])


def test_unreachable_ops_dropped(golden):
    m = ir("""
        module dead_ops
        input X: f32[8, 16]
        input W: f32[1, 16]
        output Y: f32[8, 16]
        kernel k(x: In[Tile[8, 16, f32]], w: In[Tile[1, 16, f32]], y: Out[Tile[8, 16, f32]]) {
            let unused = exp(x) * w
            let s = x + 1.0
            store(y, s * s)
        }
        workload w() { k(x = X, w = W, y = Y) }
        schedule main = w()
    """)
    after = golden_pair(golden, "unreachable", m)
    (k,) = after.kernels
    assert [op.op for op in k.ops] == ["param", "literal", "add", "mul"]
    assert [p.name for p in k.params] == ["x", "w", "y"]  # the signature stays
    arrays = {"X": X32["X"][:8], "W": np.ones((1, 16), np.float32)}
    same(run(m, arrays)[0], run(after, arrays)[0])


def test_signed_zero_literals_are_two_values():
    """Regression: `literal 0.0` and `literal -0.0` compare equal (and hash alike) in Python;
    merging them turned `x * 0.0 + x * -0.0` (0.0 for x < 0) into `2 * (x * 0.0)` (-0.0)."""
    mod = ptowsp.parse(textwrap.dedent("""
        module zeros
        input X: f32[8, 16]
        output Y: f32[8, 16]
        kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) {
            store(y, x * 0.0 + x * -0.0)
        }
        workload w() { k(x = X, y = Y) }
        schedule main = w()
    """), "zeros.wsp")
    assert simplify(mod.ir) is mod.ir
    x = -np.ones((8, 16), np.float32)
    r0 = mod.compile("ref", opt_level=0).run(X=x)
    assert not np.signbit(r0["Y"]).any()
    for level in (1, 2, 3):
        same(r0, mod.compile("ref", opt_level=level).run(X=x))


def test_extern_and_planned_kernels_left_alone():
    ext = N.Kernel("e", "e", (N.KParam("y", "tile", "f32", "Out", 1, 1),), (), (), extern_c="")
    assert simplify_kernel(ext) is ext
    # a planned kernel: its plan indexes the ops (regression: simplify after plan-kernels,
    # e.g. a second pipeline run, renumbered the ops and left a stale plan)
    m = ir("""
        module planned
        input A: f32[16, 16]
        input A2: f32[16, 16]
        input B: f16[16, 16]
        output Y: f32[16, 16]
        kernel k(a: In[Tile[16, 16, f32]], a2: In[Tile[16, 16, f32]], b: In[Tile[16, 16, f16]],
                 y: Out[Tile[16, 16, f32]]) {
            store(y, matmul(a, b) + matmul(a2, b))
        }
        workload w() { k(a = A, a2 = A2, b = B, y = Y) }
        schedule main = w()
    """)
    o2, _ = optimize(m, 2)
    assert o2.kernels[0].plan is not None
    assert simplify(o2) is o2
    again, _ = optimize(o2, 3, verify_each=True)
    assert again is o2


def test_in_the_pipeline_and_the_python_class():
    from ptowsp.passes import PassManager, SimplifyPass

    pm = PassManager([SimplifyPass()], verify_each=True)
    out = pm.run(ptowsp.parse(textwrap.dedent(LOOPS), "loops.wsp"))
    assert ntasks(out) == 1 and pm.timings[0].name == "simplify" and pm.timings[0].changed
    o1, pm1 = optimize(ir(LOOPS), 1)
    assert [t.name for t in pm1.timings][0] == "simplify"
