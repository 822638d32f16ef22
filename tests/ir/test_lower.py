"""Lowering (`lower/`): golden IR for small programs, the unsupported constructs, and
`verify` after lowering every valid program of the suite.

Golden files live in tests/golden/lower_*.ir; `pytest --update-golden` rewrites them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ptowsp import sym
from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_file, check_source
from ptowsp.ir import nodes as N
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify
from ptowsp.lower import lower
from ptowsp.primitives import COMPARE_OPERATORS, OPS

ROOT = Path(__file__).resolve().parents[2]

SPECIALISE = """\
// Constexpr specialisation, implicit conversions and the kernel primitives
module specialise

const C = 8
sym N
input  X: f32[N, 4, C]
input  H: f16[4, C]
input  Idx: i32[N, 2]
output Y: f32[N, 4, C]
output Z: f16[4, C]
output K: i32[N, 2]
output Y4: f32[N, 4, C]

kernel rows(x: In[Tile[R, C, f32]], y: Out[Tile[R, C, f32]], R: Constexpr[i32] = 2) {
    let s = rowsum(x) * R
    store(y, rowmul(x, s) + full(R, C, 1, f32))
}

kernel mixed(x: In[Tile[4, C, f32]], h: In[Tile[4, C, f16]], z: Out[Tile[4, C, f16]],
             alpha: Scalar[f32] = 0.5) {
    let a = x + h                         // f16 promoted to f32
    let m = tl.matmul(a, transpose(x), acc = full(4, 4, 0, f32))
    let c = where(a > 0, a, constant(2, f32)) * alpha
    let r = cast(row_index(4, C), f32) + pto.exp(2)
    store(z, c + r + rowmean(m) * 0)      // f32 stored into f16: an explicit convert
}

kernel ints(i: In[Tile[1, 2, i32]], k: Out[Tile[1, 2, i32]]) {
    let q = i / 2 + col_index(1, 2)
    store(k, maximum(q, -q))
}

workload w() {
    for n in P(N) {
        rows[n](x = X[n, 0:2, :], y = Y[n, 0:2, :], R = 2)
        rows[n](x = X[n, 2:4, :], y = Y[n, 2:4, :])
        rows[n](x = X[n], y = Y4[n], R = 4)
        ints[n](i = Idx[n], k = K[n])
    }
    mixed(x = X[0], h = H, z = Z, alpha = 2)
}
"""

VIEWS = """\
// views whose bounds cannot all be proved: run-time checks on the arguments
module views

sym B, S, T
input  X: f32[B, S, 64]
input  Idx: i32[T]
output Y: f32[B, S, 64]
output I2: i32[T]
output Col: f32[S, 64]

kernel tile16(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) {
    store(y, x * 2)
}
kernel pair(i: In[Tile[1, 2, i32]], o: Out[Tile[1, 2, i32]]) {
    store(o, i + 1)
}
kernel column(x: In[Tile[16, 1, f32]], y: Out[Tile[16, 1, f32]]) {
    store(y, -x)
}

workload w() {
    for b, t in P(B, T) {
        tile16[b, t](x = X[b, t * 16 : t * 16 + 16, :], y = Y[b, t * 16 : t * 16 + 16, :])
        pair[b, t](i = Idx[t * 2 : t * 2 + 2], o = I2[t * 2 : t * 2 + 2])
        column[b, t](x = X[b, 0:16, t : t + 1], y = Col[0:16, t : t + 1])
    }
}

schedule main = w().dispatch(affinity(b, n = 2)).streams(2).stream_by(t)
"""

STRUCTURE = """\
// P.seq, sequential, combine, inlined workloads with parameters, loop variables renamed
module structure

sym N
const H = 4
input  X: f32[N, 8, 16]
inout  Acc: f32[8, 16]
output Y: f32[N, 8, 16]

kernel accum(x: In[Tile[8, 16, f32]], acc: InOut[Tile[8, 16, f32]]) {
    store(acc, acc + x)
}
kernel scale(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]], s: Scalar[f32] = 1.0) {
    store(y, x * s)
}

axis rows = DenseDyn(N)
axis heads = Dense[H]

workload each(r: DenseDyn, h: Dense[4]) {
    for i in P(r) {
        for N in P.grid(h) {
            scale[i, N](x = X[i], y = Y[i], s = N + i)
        }
    }
}

workload total(r: DenseDyn) {
    for i in P.seq(r) {
        accum[i](x = X[i], acc = Acc)
    }
}

workload all() {
    sequential {
        total(rows)
        combine {
            each(rows, heads)
            scale(x = X[0], y = Y[0])
        }
    }
    for i in P.seq(N) {
        for i in P(2) {
            accum[i](x = X[i], acc = Acc)
        }
    }
}

schedule main = all().timing(batched(4)).task_graph(window = 16, mode = abort)
schedule other = total(rows).dispatch(work_steal)
"""

HEAD = """\
module t
sym N, B
input  X: f32[N, 4, 8]
input  Cnt: i32[N]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) {
    store(y, x)
}
"""


def lowered(text: str, filename: str = "t.wsp") -> N.Module:
    m = lower(check_source(textwrap.dedent(text), filename))
    verify(m)
    return m


def unsupported(text: str) -> list[tuple[int, int, str]]:
    env = check_source(textwrap.dedent(text), "t.wsp")
    with pytest.raises(WspError) as info:
        lower(env)
    diags = info.value.diagnostics
    assert all(d.code == "unsupported" for d in diags)
    return [(d.span.line, d.span.col, d.message) for d in diags]


def tasks(stmts) -> list[N.Task]:
    out = []
    for s in stmts:
        if isinstance(s, N.Task):
            out.append(s)
        else:
            out.extend(tasks(s.body))
    return out


# ---------------------------------------------------------------------------------------------
# Golden IR


def test_golden_rmsnorm(golden):
    m = lower(check_file(str(ROOT / "examples" / "rmsnorm.wsp")))
    verify(m)
    golden("lower_rmsnorm.ir", print_module(m))


@pytest.mark.parametrize("name", ["specialise", "views", "structure"])
def test_golden(name, golden):
    golden(f"lower_{name}.ir", print_module(lowered(globals()[name.upper()])))


def test_lowering_and_printing_are_deterministic():
    a, b = lowered(STRUCTURE), lowered(STRUCTURE)
    assert a == b
    assert print_module(a) == print_module(b)


# ---------------------------------------------------------------------------------------------
# Kernels


def test_constexpr_specialisation():
    m = lowered(SPECIALISE)
    assert [k.name for k in m.kernels] == ["rows__R_2", "rows__R_4", "mixed", "ints"]
    r4 = m.kernel("rows__R_4")
    assert r4.source == "rows" and r4.constexprs == (("R", 4),)
    assert [(p.name, p.rows, p.cols) for p in r4.params] == [("x", 4, 8), ("y", 4, 8)]
    used = [t.kernel for t in tasks(m.schedule("w").body)]
    assert used == ["rows__R_2", "rows__R_2", "rows__R_4", "ints", "mixed"]


def test_implicit_conversions_are_explicit():
    k = lowered(SPECIALISE).kernel("mixed")
    ops = k.ops
    # every elementwise op's operands have its dtype
    for op in ops:
        spec = OPS[op.op]
        if spec.plan == "ew" and spec.arity == (2,) and op.op not in COMPARE_OPERATORS.values():
            assert all(ops[a].dtype == op.dtype for a in op.args), op
    converts = [op for op in ops if op.op == "convert"]
    assert [(ops[c.args[0]].dtype, c.dtype) for c in converts] == [("f16", "f32"), ("f32", "f16")]
    name, idx = k.stores[0]
    assert name == "z" and ops[idx].dtype == "f16" and ops[idx].shape == (4, 8)


def test_primitive_spellings_lower_to_plain_ops():
    m = lowered(HEAD + """
        kernel k(x: In[Tile[4, 8, f32]], v: In[Tile[4, 1, f32]], y: Out[Tile[4, 8, f32]]) {
            let a = tl.rowmul(x, v) + pto.coladd(load(x), colsum(x))
            store(y, broadcast(rowmax(a), 4, 8) + a)
        }
        workload w() { k(x = X[0], v = X[0, :, 0:1], y = Y[0]) }
    """)
    ops = [op.op for op in m.kernel("k").ops]
    assert ops == ["param", "param", "mul", "colsum", "add", "add", "rowmax", "broadcast", "add"]


def test_store_of_a_scalar_broadcasts_explicitly():
    m = lowered(HEAD + """
        kernel z(y: Out[Tile[4, 8, f32]]) { store(y, 0) }
        workload w() { z(y = Y[0]) }
    """)
    k = m.kernel("z")
    assert [(op.op, op.shape, op.dtype, op.attr) for op in k.ops] == [
        ("literal", None, "f32", 0), ("broadcast", (4, 8), "f32", None)]
    assert k.stores == (("y", 1),)


def test_extern_kernels_keep_their_c_body():
    m = lowered(HEAD + '''
        kernel ext(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern c """
            y.data[0] = x.data[0];
        """
        workload w() { ext(x = X[0], y = Y[0]) }
    ''')
    k = m.kernel("ext")
    assert k.ops == () and k.stores == () and "y.data[0]" in k.extern_c


# ---------------------------------------------------------------------------------------------
# Workloads and schedules


def test_views_become_boxes_with_checks():
    m = lowered(VIEWS)
    t16, pair, col = tasks(m.schedule("main").body)
    x = t16.args[0]
    assert (x.param, x.tensor, x.mode, x.row_dim, x.col_dim) == ("x", "X", "r", 1, 2)
    assert [sym.to_str(o) for o in x.offsets] == ["b", "t * 16", "0"]
    assert [sym.to_str(e) for e in x.extents] == ["1", "16", "64"]
    assert [c.message for c in x.checks] == [
        "slice end `t * 16 + 16` in `x = X[b, t * 16 : t * 16 + 16, :]` must be at most S"]
    assert (x.checks[0].span.line, x.checks[0].span.col) == (23, 22)  # the keyword argument
    assert t16.args[1].mode == "w"
    assert (pair.args[0].row_dim, pair.args[0].col_dim) == (None, 0)  # promoted [1, 2]
    assert (col.args[0].row_dim, col.args[0].col_dim) == (1, 2)  # a [16, 1] column


def test_index_check_message():
    m = lowered(HEAD + """
        sym S
        input Z: f32[B, 64, 8]
        kernel k(x: In[Tile[16, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, colsum(x) * 0 + 1) }
        workload w() {
            for b, t in P(B, 3) {
                k[b, t](x = Z[b, t * 16 : t * 16 + 16, :], y = Y[t * 16])
            }
        }
    """)
    (t,) = tasks(m.schedules[0].body)
    assert [c.message for c in t.args[1].checks] == [
        "index `t * 16` in `y = Y[t * 16]` must be less than N"]
    assert t.args[0].checks == ()  # t * 16 + 16 <= 48 <= 64: proved


def test_structure():
    m = lowered(STRUCTURE)
    main = m.schedule("main")
    seq, loop = main.body
    assert isinstance(seq, N.Block) and seq.kind == "sequential"
    total, comb = seq.body
    assert isinstance(total, N.Loop) and total.kind == "seq" and sym.to_str(total.extent) == "N"
    assert isinstance(comb, N.Block) and comb.kind == "combine"
    each = comb.body[0]
    assert each.kind == "grid" and each.body[0].var == "N_2"  # renamed: `N` is a sym
    assert sym.to_str(each.body[0].extent) == "4"  # the `Dense[4]` parameter substituted
    assert loop.var == "i" and loop.body[0].var == "i_2"  # renamed: shadows the outer `i`
    assert (main.timing, main.window, main.window_mode) == (N.Policy("batched", (4,)), 16, "abort")
    assert m.schedule("other").dispatch == N.Policy("work_steal", (), None)
    assert m.default_schedule == "main"


def test_policies():
    m = lower(check_file(str(ROOT / "tests" / "programs" / "spec_schedules.wsp")))
    verify(m)
    fast = m.schedule("fast")
    b, h = sym.var("b"), sym.var("h")
    assert fast.dispatch == N.Policy("affinity", (b,), None)
    assert (fast.streams, fast.stream_by) == (4, sym.mod(h, 4))
    assert fast.timing == N.Policy("batched", (16,))
    assert (fast.window, fast.window_mode) == (8192, "stall")
    assert m.schedule("rr").dispatch == N.Policy("round_robin", (4,))
    assert m.schedule("hashed").dispatch == N.Policy("hash", (b * 8 + h,), 4)
    assert m.schedule("hashed").timing == N.Policy("interleaved", (2,))
    assert m.schedule("direct").dispatch == N.Policy("dispatch_by", (h,), 8)
    assert m.schedule("direct").timing == N.Policy("rate_limit", (1000,))
    assert m.schedule("stealing").dispatch == N.Policy("work_steal", (), 2)
    assert m.default_schedule is None  # several schedules, none called `main`


def test_scalar_arguments_and_defaults():
    m = lowered(HEAD + """
        kernel k(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], a: Scalar[f32] = 1e-6,
                 n: Scalar[i64] = -3, f: Scalar[bool] = true, g: Scalar[f16]) {
            store(y, where(f, x * a + n, x) * g)
        }
        workload w() {
            for i in P(N) { k[i](x = X[i], y = Y[i], g = i * 2 + 1) }
            k(x = X[0], y = Y[0], a = 2, n = B * 2, f = 1 < 2, g = 0.5 * 3)
        }
    """)
    t1, t2 = tasks(m.schedule("w").body)

    def vals(t):
        return {a.param: (a.value, a.dtype) for a in t.args if isinstance(a, N.ScalarArg)}

    i = sym.var("i")
    assert vals(t1) == {"a": (1e-6, "f32"), "n": (sym.const(-3), "i64"), "f": (True, "bool"),
                        "g": (i * 2 + 1, "f16")}
    assert vals(t2) == {"a": (2.0, "f32"), "n": (sym.var("B") * 2, "i64"), "f": (True, "bool"),
                        "g": (1.5, "f16")}


def test_default_and_implicit_schedules():
    one_root = HEAD + """
        workload part(r: DenseDyn) { for i in P(r) { copy[i](x = X[i], y = Y[i]) } }
        workload all() { part(N) }
    """
    m = lowered(one_root)
    assert [s.name for s in m.schedules] == ["all"] and m.default_schedule == "all"
    s = m.schedule("all")
    assert (s.dispatch, s.streams, s.timing, s.window) == (N.Policy("round_robin", (1,)), 1,
                                                          N.Policy("immediate"), None)
    two_roots = one_root + "workload more() { copy(x = X[0], y = Y[0]) }\n"
    m = lowered(two_roots)
    assert m.schedules == () and m.default_schedule is None
    m = lowered(two_roots + "schedule s = more()\n")
    assert m.default_schedule == "s"
    m = lowered(two_roots + "schedule main = all()\nschedule s = more()\n")
    assert m.default_schedule == "main"


# ---------------------------------------------------------------------------------------------
# Unsupported constructs: one diagnostic each, at the construct


@pytest.mark.parametrize("body, where, message", [
    ("for i in P(N) { flag[i](x = X[i], y = Y[i], f = Cnt[i] > 0) }", (15, 53),
     "passing a condition on run-time values (`Cnt[i] > 0`) to a bool scalar is not supported "
     "by this build's back ends yet"),
])
def test_unsupported(body, where, message):
    text = HEAD + textwrap.dedent("""\
        kernel flag(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], f: Scalar[bool] = true) {
            store(y, where(f, x, 0))
        }
        channel ch: Tile[4, 8, f32], depth = 2
        event ev
        workload w() {
        """) + "    " + body + "\n}\n"
    assert unsupported(text) == [(*where, message)]


@pytest.mark.parametrize("body", [
    "when N > 0 { copy(x = X[0], y = Y[0]) }",
    "slot_set(0, N)",
    "slot_load(0, Cnt[0])",
    "for i in P(N) { copy[i](x = X[Cnt[i]], y = Y[i]) }",
    "for i in P(slot(3)) { copy[i](x = X[i], y = Y[i]) }",
    "for b in P(batch) { for j in P.seq(tok[b]) { copy[b](x = X[b], y = Y[b]) } }",
    "for b in P(batch) { for e in P.sel(sp[b]) { copy[b](x = X[e], y = Y[b]) } }",
])
def test_dynamic_constructs_lower(body):
    # formerly unsupported; tests/ir/test_lower_dynamic.py checks what they become
    text = HEAD + textwrap.dedent("""\
        axis batch = DenseDyn(N)
        axis tok = Ragged(batch, Cnt)
        input  Ptr: i32[N + 1]
        axis sp = Sparse(batch, Ptr, Cnt)
        workload w() {
        """) + "    " + body + "\n}\n"
    lowered(text)


@pytest.mark.parametrize("body", [
    "pipe { process a { send(ch, copy(x = X[0], y = ch)) } process b { consume(ch) as t "
    "{ copy(x = t, y = Y[0]) } } }",
    "copy(x = X[0], y = Y[0])\n    record(ev)\n    synchronize(ev)",
    "copy(x = X[0], y = Y[0])\n    record(ev)\n    when query(ev) { copy(x = X[0], y = Y[0]) }",
])
def test_csp_constructs_lower(body):
    # formerly unsupported; tests/ir/test_lower_csp.py checks what they become
    text = HEAD + textwrap.dedent("""\
        channel ch: Tile[4, 8, f32], depth = 2
        event ev
        workload w() {
        """) + "    " + body + "\n}\n"
    m = lowered(text)
    assert m.schedules[0].uses_csp


def test_every_unsupported_construct_is_reported():
    text = HEAD + '''
        kernel npu(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern ascend """ x """
        workload w() {
            for b in P(N) { npu[b](x = X[0], y = Y[0]) }
            for b in P(N) { for b in P(2) { copy[b](x = X[b], y = Y[b]) } }
        }
        schedule main = w().dispatch(affinity(b))
    '''
    assert [m for _, _, m in unsupported(text)] == [
        "a schedule key naming the rebound loop variable `b` is not supported by this build's "
        "back ends yet"]


def test_kernel_with_only_an_ascend_body_lowers():
    # the target that needs an `extern c` body (cpu_sim) reports its absence, not lowering
    text = HEAD + '''
        kernel npu(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern ascend """ x """
        workload w() { npu(x = X[0], y = Y[0]) }
    '''
    k = next(k for k in lowered(text).kernels if k.source == "npu")
    assert k.is_extern and k.extern_c is None and k.extern_ascend == " x "
    assert k.ops == () and k.stores == () and (k.name_span.line, k.name_span.col) == (10, 16)


def test_key_on_a_renamed_loop_variable_is_unsupported():
    text = HEAD + """
        workload w() {
            for b in P(N) { for b in P(2) { copy[b](x = X[b], y = Y[b]) } }
        }
        schedule main = w().dispatch(affinity(b))
    """
    assert unsupported(text) == [
        (13, 47, "a schedule key naming the rebound loop variable `b` is not supported by "
         "this build's back ends yet")]


# ---------------------------------------------------------------------------------------------
# Every valid program of the suite: lowers and verifies, or reports only unsupported constructs

PROGRAMS = sorted((ROOT / "tests" / "programs").glob("*.wsp")) + sorted(
    (ROOT / "examples").glob("*.wsp"))
PROGRAMS = [p for p in PROGRAMS if not p.name.startswith("errors_")]
UNSUPPORTED: set[str] = set()  # every program of the suite lowers


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_programs_lower_and_verify(path: Path):
    env = check_file(str(path))
    try:
        m = lower(env)
    except WspError as err:
        assert all(d.code == "unsupported" for d in err.diagnostics), err
        return
    assert path.stem not in UNSUPPORTED, "this program uses constructs not supported yet"
    verify(m)
    assert print_module(m) == print_module(lower(env))
