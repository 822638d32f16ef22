"""Meshes, layouts and collectives (docs/distributed.md, language.md "Meshes and layouts"): every
accepted form parses, checks, lowers to the IR and prints back; a mesh of one device runs on
ref and cpu_sim with each collective (a copy), against NumPy; a larger mesh compiles for every
target (tests/test_mesh_run.py runs it). The errors are in tests/errors/ (mesh_*, layout_*, collective_*).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ptowsp
from ptowsp import driver, sym
from ptowsp.diagnostics import WspError
from ptowsp.frontend import ast as A
from ptowsp.frontend.parser import parse
from ptowsp.frontend.source_printer import format_source
from ptowsp.ir import nodes as N
from ptowsp.ir.printer import print_module
from tests.mesh_programs import doc_tp_mlp

# every collective over a one-device mesh, on tensors of every rank the copy tiles: 1-D, 2-D
# (a dimension longer than a copy tile and sized at run time), 3-D; a partial scratch written
# by a task pinned by a sharded operand, as the row-parallel matmul of the page does
ONE_DEVICE = """\
module mesh1
mesh tp = 1
sym T
const D = 100
input   X:  f32[T, D] @ [R, S(tp)]
scratch Zp: f32[T, D] @ [R, R] partial(tp)
output  Y:  f32[T, D]
scratch Zq: f32[T, D] @ [R, R] partial(tp)
output  Ys: f32[T, D] @ [R, S(tp)]
input   W:  f32[D, 8] @ [S(tp), R]
output  G:  f32[D, 8]
input   U:  f32[3, T, 8] @ [R, S(tp), R]
output  V:  f32[3, T, 8] @ [R, R, S(tp)]
input   Bv: i32[40] @ [S(tp)]
output  B:  i32[40]
scratch M:  f32[T, D] @ [R, R] partial(tp)
output  Mx: f32[T, D]
kernel acc(x: In[Tile[16, 100, f32]], z: InOut[Tile[16, 100, f32]]) { store(z, z + x * 2.0) }
workload w() {
    for t in P(DenseDyn(ceildiv(T, 16))) {
        acc[t](x = X[t*16 : min(t*16 + 16, T), :], z = Zp[t*16 : min(t*16 + 16, T), :])
        acc[t](x = X[t*16 : min(t*16 + 16, T), :], z = Zq[t*16 : min(t*16 + 16, T), :])
        acc[t](x = X[t*16 : min(t*16 + 16, T), :], z = M[t*16 : min(t*16 + 16, T), :])
    }
    allreduce(Zp, into = Y, over = tp)
    reduce_scatter(Zq, into = Ys, over = tp, dim = 1, op = sum)
    allreduce(M, into = Mx, over = tp, op = max)
    allgather(W, into = G, over = tp)
    all_to_all(U, into = V, over = tp)
    relayout(Bv, into = B)
}
schedule main = w()
"""


# docs/distributed.md's tensor-parallel MLP as the page writes it, with its two kernels
TP_MLP = doc_tp_mlp(256, 1024, 16, 64)


def _inputs(T: int = 37):
    rng = np.random.default_rng(7)
    return {"X": rng.standard_normal((T, 100)).astype(np.float32),
            "W": rng.standard_normal((100, 8)).astype(np.float32),
            "U": rng.standard_normal((3, T, 8)).astype(np.float32),
            "Bv": rng.integers(-1000, 1000, 40).astype(np.int32)}


# ---- parsing: every accepted form ------------------------------------------------------------


def test_mesh_declarations_parse():
    f = parse("mesh tp = 4\n", "t.wsp")
    assert f.decls == (A.MeshDecl((A.MeshAxis(A.Name("tp"), A.IntLit(4)),)),)
    f = parse("sym TP\nconst DP = 2\nmesh dp = DP, tp = TP\n", "t.wsp")
    mesh = f.decls[-1]
    assert [a.name.id for a in mesh.axes] == ["dp", "tp"]
    assert mesh.axes[1].size == A.Name("TP")


def test_layouts_parse():
    f = parse("mesh dp = 2, tp = 4\n"
              "input W: f32[8, 16] @ [R, S(tp)]\n"
              "scratch Z: f32[8, 16] @ [S(dp), R] partial(tp)\n"
              "output Y: f32[8, 16]\n", "t.wsp")
    w, z, y = f.decls[1:]
    assert w.layout == A.Layout((A.LayoutDim(None), A.LayoutDim(A.Name("tp"))))
    assert z.layout == A.Layout((A.LayoutDim(A.Name("dp")), A.LayoutDim(None)), (A.Name("tp"),))
    assert y.layout is None


@pytest.mark.parametrize("text, want", [
    ("allreduce(Z, into = Y, over = tp)", A.Collective("allreduce", A.Name("Z"), A.Name("Y"),
                                                        A.Name("tp"))),
    ("allreduce(Z, into = Y, over = tp, op = max)",
     A.Collective("allreduce", A.Name("Z"), A.Name("Y"), A.Name("tp"), A.Name("max"))),
    ("reduce_scatter(Z, into = Y, over = tp, dim = 1, op = sum)",
     A.Collective("reduce_scatter", A.Name("Z"), A.Name("Y"), A.Name("tp"), A.Name("sum"),
                  A.IntLit(1))),
    ("allgather(H, into = G, over = tp)",
     A.Collective("allgather", A.Name("H"), A.Name("G"), A.Name("tp"))),
    ("all_to_all(H, into = G, over = ep)",
     A.Collective("all_to_all", A.Name("H"), A.Name("G"), A.Name("ep"))),
    ("relayout(H, into = G)", A.Collective("relayout", A.Name("H"), A.Name("G"))),
])
def test_collective_statements_parse(text, want):
    (w,) = parse("workload w() {\n    " + text + "\n}\n", "t.wsp").decls
    assert w.body == (want,)


def test_mesh_is_a_keyword():
    with pytest.raises(WspError) as info:
        parse("const mesh = 4\n", "t.wsp")
    assert "`mesh` is a keyword" in str(info.value.diagnostics[0].help)


def test_source_printer_round_trips():
    f = parse(ONE_DEVICE, "m.wsp")
    text = format_source(f)
    assert "mesh tp = 1" in text
    assert "scratch Zp: f32[T, D] @ [R, R] partial(tp)" in text
    assert "reduce_scatter(Zq, into = Ys, over = tp, dim = 1, op = sum)" in text
    assert parse(text, "m.wsp").decls == f.decls


# ---- checking and the IR ---------------------------------------------------------------------


def test_the_tensor_parallel_mlp_of_the_page_checks():
    # docs/distributed.md's example as written (with kernels): a 4-device mesh checks and
    # lowers
    env = driver.check_text(TP_MLP, "tp_mlp.wsp")
    assert [a.name for a in env.mesh.axes] == ["tp"]
    assert env.tensors["W1"].layout.dims == (None, "tp")
    assert env.tensors["Zp"].layout.partial == ("tp",)
    m = driver.lower(env)
    assert [(a.name, a.size) for a in m.mesh.axes] == [("tp", sym.const(4))]
    assert m.tensor("X").layout is None
    assert m.tensor("W2").layout == N.Layout(("tp", None))
    (c,) = [s for s in m.schedule("main").body if isinstance(s, N.Collective)]
    assert (c.kind, c.source, c.into, c.over, c.op, c.dim) == ("allreduce", "Zp", "Y", "tp",
                                                               "sum", None)
    text = print_module(m)
    assert "mesh tp = 4" in text
    assert "scratch Zp: f32[T, 256] @ [R, R] partial(tp)" in text
    assert "  allreduce(Zp, into = Y, over = tp, op = sum)" in text
    lowered, _ = driver.optimize(m, 0)  # the device dimension (tests/test_mesh_run.py runs it)
    assert lowered.mesh is None and lowered.tensor("W1").dims == (sym.const(4), sym.const(256),
                                                                  sym.const(256))


def test_sharded_dimensions_sized_at_run_time_are_checked_at_the_declaration():
    env = driver.check_text("mesh tp = 4\nsym F\ninput W: f32[8, F] @ [R, S(tp)]\n"
                            "output Y: f32[8, F]\n", "t.wsp")
    m = driver.lower(env)
    (c,) = [c for c in m.checks if "multiple" in c.message]
    assert c.message == "`W` shards its columns over tp: their number must be a multiple of tp's size"
    assert (c.span.line, c.span.col) == (3, 26)  # at `S(tp)`


def test_an_all_replicated_layout_is_no_layout_in_the_ir():
    m = driver.lower(driver.check_text("mesh tp = 1\ninput X: f32[4, 4] @ [R, R]\n"
                                       "output Y: f32[4, 4]\n", "t.wsp"))
    assert m.tensor("X").layout is None and m.mesh is not None


def test_the_ir_without_its_mesh_is_a_single_device_program():
    m = driver.lower(driver.check_text(ONE_DEVICE, "m.wsp"))
    single, _ = driver.optimize(m, 0)
    assert single.mesh is None and all(t.layout is None for t in single.tensors)
    text = print_module(single)
    assert "kernel mesh_copy_f32_64x64(src: In f32[64, 64], dst: Out f32[64, 64])  # copy" in text
    assert "# allreduce(Zp, into = Y, over = tp)" in text
    assert "Collective" not in text and "@ [" not in text


# ---- running a one-device mesh ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
@pytest.mark.parametrize("level", [0, 2])
def test_a_one_device_mesh_runs_each_collective_as_a_copy(target, level):
    m = ptowsp.parse(ONE_DEVICE, "mesh1.wsp")
    x = _inputs()
    out = m.compile(target, opt_level=level).run(**x)
    # one device holds every addend there is: each reduction is its one addend
    np.testing.assert_array_equal(out["Y"], x["X"] * np.float32(2))
    np.testing.assert_array_equal(out["Ys"], x["X"] * np.float32(2))
    np.testing.assert_array_equal(out["Mx"], x["X"] * np.float32(2))
    np.testing.assert_array_equal(out["G"], x["W"])
    np.testing.assert_array_equal(out["V"], x["U"])
    np.testing.assert_array_equal(out["B"], x["Bv"])


CSP = """\
mesh tp = 1
input   X: f32[4, 8] @ [R, S(tp)]
output  Y: f32[4, 8]
output  Z: f32[4, 8]
channel c: Tile[4, 8, f32], depth = 1
kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
workload w() {
    pipe {
        process a {
            send(c, cp(x = X, y = c))
        }
        process b {
            consume(c) as t {
                cp(x = t, y = Y)
                allgather(X, into = Z, over = tp)
            }
        }
    }
}
schedule main = w()
"""


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_collective_in_a_consume_body_holds_its_item_like_any_task(target):
    # the copy reads the item's slot box, as every task of a consume body does (ir/nodes.py)
    m = ptowsp.parse(CSP, "csp.wsp")
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = m.compile(target).run(X=x)
    np.testing.assert_array_equal(out["Y"], x)
    np.testing.assert_array_equal(out["Z"], x)


def test_a_collective_whose_shapes_differ_at_run_time_is_an_error_there():
    text = ("mesh tp = 1\nsym T, U\ninput X: f32[T, 4] @ [S(tp), R]\noutput Y: f32[U, 4]\n"
            "workload w() {\n    allgather(X, into = Y, over = tp)\n}\nschedule main = w()\n")
    p = ptowsp.parse(text, "t.wsp").compile("ref")
    with pytest.raises(WspError) as info:
        p.run(bind={"U": 3}, X=np.zeros((2, 4), np.float32))
    d = info.value.diagnostics[0]
    assert "`allgather` needs `X` and `Y` of the same shape" in d.message
    assert (d.span.line, d.span.col) == (6, 5)


# ---- a larger mesh runs (tests/test_mesh_run.py has the rest) ----------------------------------


@pytest.mark.parametrize("mesh", ["mesh tp = 4", "mesh dp = 2, tp = 1", "sym TP = 2\nmesh tp = TP"])
@pytest.mark.parametrize("target", ["ref", "cpu_sim", "ascend_npu"])
def test_a_mesh_of_more_than_one_device_compiles_for_every_target(mesh, target):
    text = (f"{mesh}\ninput X: f32[4, 8]\noutput Y: f32[4, 8]\n"
            "kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }\n"
            "workload w() {\n    cp(x = X, y = Y)\n}\nschedule main = w()\n")
    m = ptowsp.parse(text, "t.wsp")
    p = m.compile(target)
    if target != "ascend_npu":
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        assert np.array_equal(p.run(X=x, check_replicas=True)["Y"], x)


def test_a_mesh_sized_by_an_unbound_sym_is_an_error_at_its_declaration():
    text = ("sym TP\nmesh tp = TP\ninput X: f32[4, 8]\noutput Y: f32[4, 8]\n"
            "kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }\n"
            "workload w() {\n    cp(x = X, y = Y)\n}\nschedule main = w()\n")
    m = ptowsp.parse(text, "t.wsp")
    with pytest.raises(WspError) as info:
        m.compile("ref")
    (d,) = info.value.diagnostics
    assert d.message == ("mesh axis `tp` is sized by `TP`, which is not bound: the mesh's size "
                         "is fixed when the module is compiled")
    assert (d.span.line, d.span.col) == (2, 6)
    assert "--mesh tp=N" in d.help and "--bind TP=N" in d.help


def test_a_larger_mesh_on_the_command_line(tmp_path):
    f = tmp_path / "m.wsp"
    f.write_text("mesh tp = 4\ninput X: f32[4, 8]\noutput Y: f32[4, 8]\n"
                 "kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }\n"
                 "workload w() {\n    cp(x = X, y = Y)\n}\nschedule main = w()\n")
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(f), "--input", "X=x.npy",
                        "--output", "Y=y.npy", "--check-replicas"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), x)
