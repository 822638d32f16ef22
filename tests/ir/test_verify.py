"""The IR verifier (`ir/verify.py`): a hand-built valid module passes, and each broken
invariant, built by editing one piece of it, raises `InternalError("verify", ...)` naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ptowsp import sym
from ptowsp.diagnostics import InternalError
from ptowsp.ir import nodes as N
from ptowsp.ir.verify import verify

B, b, t = sym.var("B"), sym.var("b"), sym.var("t")


def kernel(**kw) -> N.Kernel:
    """y = x * rowsum(x) + s; acc = acc + x."""
    fields = dict(
        name="k",
        source="k",
        params=(
            N.KParam("x", "tile", "f32", "In", 4, 8),
            N.KParam("y", "tile", "f32", "Out", 4, 8),
            N.KParam("acc", "tile", "f32", "InOut", 4, 8),
            N.KParam("s", "scalar", "f32"),
        ),
        ops=(
            N.Op("param", (), (4, 8), "f32", "x"),        # 0
            N.Op("rowsum", (0,), (4, 1), "f32"),          # 1
            N.Op("mul", (0, 1), (4, 8), "f32"),           # 2
            N.Op("scalar_param", (), None, "f32", "s"),   # 3
            N.Op("add", (2, 3), (4, 8), "f32"),           # 4
            N.Op("param", (), (4, 8), "f32", "acc"),      # 5
            N.Op("add", (5, 0), (4, 8), "f32"),           # 6
        ),
        stores=(("y", 4), ("acc", 6)),
    )
    fields.update(kw)
    return N.Kernel(**fields)


def task(**kw) -> N.Task:
    fields = dict(
        kernel="k",
        coords=(b, t),
        args=(
            N.TileArg("x", "X", "r", (b, t * 4, sym.const(0)), (sym.const(1), sym.const(4),
                                                               sym.const(8)), 1, 2),
            N.TileArg("y", "Y", "w", (b, t * 4, sym.const(0)), (sym.const(1), sym.const(4),
                                                               sym.const(8)), 1, 2),
            N.TileArg("acc", "A", "rw", (sym.const(0), sym.const(0)), (sym.const(4),
                                                                     sym.const(8)), 0, 1),
            N.ScalarArg("s", 0.5, "f32"),
        ),
        text="k[b, t]",
    )
    fields.update(kw)
    return N.Task(**fields)


def module(kernels=None, body=None, **kw) -> N.Module:
    body = body if body is not None else (
        N.Loop("b", B, "grid", (N.Loop("t", sym.const(2), "seq", (task(),)),)),)
    fields = dict(
        name="m",
        syms=(N.SymDecl("B", None),),
        tensors=(
            N.TensorDecl("X", "input", "f32", (B, sym.const(8), sym.const(8))),
            N.TensorDecl("Y", "output", "f32", (B, sym.const(8), sym.const(8))),
            N.TensorDecl("A", "inout", "f32", (sym.const(4), sym.const(8))),
        ),
        kernels=kernels if kernels is not None else (kernel(),),
        schedules=(N.Schedule("main", "w", body, dispatch=N.Policy("affinity", (b,), 2)),),
        default_schedule="main",
    )
    fields.update(kw)
    return N.Module(**fields)


def with_op(i: int, op: N.Op, **kw) -> N.Module:
    k = kernel(**kw)
    ops = list(k.ops)
    ops[i] = op
    return module(kernels=(replace(k, ops=tuple(ops)),))


ROW_NUMBERS = N.Op("iota_row", (), (4, 1), "i32")


def with_gather(op: N.Op, idx: N.Op = ROW_NUMBERS) -> N.Module:
    """Op 2 (what y stores, plus s) replaced by a gather of x (op 0) at `idx` (op 1)."""
    k = kernel()
    ops = list(k.ops)
    ops[1], ops[2] = idx, op
    return module(kernels=(replace(k, ops=tuple(ops)),))


def with_arg(i: int, arg) -> N.Module:
    args = list(task().args)
    args[i] = arg
    return module(body=(N.Loop("b", B, "grid", (N.Loop("t", sym.const(2), "seq",
                                                       (task(args=tuple(args)),)),)),))


def loop_body(*stmts) -> N.Module:
    return module(body=tuple(stmts))


X_ARG = task().args[0]

BROKEN = {
    # kernels
    "forward reference": (with_op(2, N.Op("mul", (0, 4), (4, 8), "f32")), "not an earlier op"),
    "unknown op": (with_op(1, N.Op("rowsmu", (0,), (4, 1), "f32")), "unknown operation"),
    "operand dtype": (with_op(2, N.Op("mul", (0, 1), (4, 8), "f16")), "operand dtype f32"),
    "no broadcast": (with_op(1, N.Op("transpose", (0,), (8, 4), "f32")), "do not broadcast"),
    "wrong result shape": (with_op(2, N.Op("mul", (0, 1), (4, 1), "f32")), "shape (4, 1)"),
    "reduction shape": (with_op(1, N.Op("rowsum", (0,), (1, 8), "f32")), "should be (4, 1)"),
    "matmul inner dims": (
        with_op(2, N.Op("matmul", (0, 0), (4, 8), "f32")), "inner dimensions differ"),
    "matmul dtype": (with_op(1, N.Op("matmul", (0, 0), (4, 4), "f16")), "inner dimensions"),
    "comparison operands": (
        with_op(2, N.Op("lt", (0, 1), (4, 8), "f32")), "a comparison yields bool"),
    "where condition": (with_op(2, N.Op("where", (0, 0, 0), (4, 8), "f32")), "not bool"),
    "gather index dtype": (with_op(2, N.Op("gather_rows", (0, 1), (4, 8), "f32")),
                           "indices of dtype f32"),
    "gather_rows index shape": (with_gather(N.Op("gather_rows", (0, 1), (4, 8), "f32"),
                                            N.Op("iota_row", (), (4, 2), "i32")), "[R, 1]"),
    "gather_rows shape": (with_gather(N.Op("gather_rows", (0, 1), (4, 4), "f32")),
                          "shape (4, 4) should be (4, 8)"),
    "gather_cols rows": (with_gather(N.Op("gather_cols", (0, 1), (2, 8), "f32"),
                                     N.Op("iota_col", (), (2, 8), "u8")), "x's 4 rows"),
    "gather dtype": (with_gather(N.Op("gather_cols", (0, 1), (4, 8), "f16"),
                                 N.Op("iota_col", (), (4, 8), "i64")), "x's f32"),
    "unknown parameter": (with_op(0, N.Op("param", (), (4, 8), "f32", "z")), "`z` does not exist"),
    "param of an Out": (with_op(0, N.Op("param", (), (4, 8), "f32", "y")), "not an In or InOut"),
    "param dtype": (with_op(0, N.Op("param", (), (4, 8), "f16", "x")), "differs from parameter"),
    "literal without value": (with_op(3, N.Op("literal", (), None, "f32")), "is not a number"),
    "Out never stored": (module(kernels=(kernel(stores=(("acc", 6),)),)), "stored 0 times"),
    "Out stored twice": (
        module(kernels=(kernel(stores=(("y", 4), ("y", 4))),)), "stored 2 times"),
    "InOut stored twice": (
        module(kernels=(kernel(stores=(("y", 4), ("acc", 6), ("acc", 6))),)), "at most once"),
    "store to In": (module(kernels=(kernel(stores=(("y", 4), ("x", 0))),)), "not an Out"),
    "store of a wrong dtype": (
        module(kernels=(kernel(stores=(("y", 7), ("acc", 6)), ops=kernel().ops + (
            N.Op("convert", (4,), (4, 8), "f16"),)),)), "of an f16 value"),
    "duplicate kernel": (module(kernels=(kernel(), kernel())), "declared twice"),
    # schedules
    "unknown kernel": (module(body=(task(kernel="nope", coords=()),)), "does not exist"),
    "unbound loop var": (module(body=(task(),)), "unbound symbol `b`"),
    "param bound twice": (with_arg(1, X_ARG), "binds `x` twice"),
    "param not bound": (
        module(body=(N.Loop("b", B, "grid", (N.Loop("t", B, "grid", (
            task(args=task().args[:3]),)),)),)), "does not bind `s`"),
    "box rank": (with_arg(0, replace(X_ARG, offsets=X_ARG.offsets[:2])), "2 offsets"),
    "row dim out of range": (with_arg(0, replace(X_ARG, row_dim=3, col_dim=4)),
                             "not a dimension"),
    "rows and cols one dim": (with_arg(0, replace(X_ARG, row_dim=2, col_dim=2)),
                              "both dimension 2"),
    "extent mismatch": (
        with_arg(0, replace(X_ARG, extents=(sym.const(1), sym.const(2), sym.const(8)))),
        "extent 2 where the tile has 4"),
    "extra dim not 1": (
        with_arg(0, replace(X_ARG, extents=(sym.const(2), sym.const(4), sym.const(8)))),
        "dimension 0"),
    "mode mismatch": (with_arg(1, replace(task().args[1], mode="r")), "mode `r`"),
    "write to input": (with_arg(1, replace(task().args[1], tensor="X")), "writes input"),
    "scalar for a tile": (with_arg(0, N.ScalarArg("x", 1.0, "f32")), "a scalar value"),
    "scalar dtype": (with_arg(3, N.ScalarArg("s", 1.0, "f64")), "given as f64"),
    "bool for a float": (with_arg(3, N.ScalarArg("s", True, "f32")), "bool value"),
    "unbound in a box": (
        with_arg(0, replace(X_ARG, offsets=(sym.var("q"), t * 4, sym.const(0)))),
        "unbound symbol `q`"),
    "shadowing loop var": (
        loop_body(N.Loop("b", B, "grid", (N.Loop("b", B, "grid", (
            N.Loop("t", B, "grid", (task(),)),)),))), "rebinds"),
    "loop var named like a sym": (
        loop_body(N.Loop("B", B, "grid", (N.Loop("b", B, "grid", (
            N.Loop("t", B, "grid", (task(),)),)),))), "rebinds"),
    "extent uses an unbound var": (
        loop_body(N.Loop("b", t, "grid", (N.Loop("t", B, "grid", (task(),)),))),
        "unbound symbol `t`"),
    "loop kind": (loop_body(N.Loop("b", B, "par", (N.Loop("t", B, "grid", (task(),)),))),
                  "loop kind"),
    "block kind": (loop_body(N.Block("parallel", ())), "block kind"),
    "key unbound at a task": (
        loop_body(N.Loop("t", B, "grid", (task(coords=(t,), args=(
            replace(X_ARG, offsets=(sym.const(0), t * 4, sym.const(0))),) + tuple(
            replace(a, offsets=(sym.const(0), t * 4, sym.const(0))) if a.param == "y" else a
            for a in task().args[1:])),))), "a schedule key"),
    "default schedule missing": (module(default_schedule="nope"), "does not exist"),
    "unknown dispatch policy": (
        module(schedules=(N.Schedule("main", "w", (), dispatch=N.Policy("random")),)),
        "unknown policy"),
    "bad tensor dim": (
        module(tensors=module().tensors + (N.TensorDecl("Z", "scratch", "f32",
                                                         (sym.var("Q"),)),)),
        "unbound symbol `Q`"),
}


def test_the_base_module_is_valid():
    verify(module())


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_modules_raise(name):
    m, fragment = BROKEN[name]
    with pytest.raises(InternalError) as info:
        verify(m)
    assert info.value.stage == "verify"
    assert fragment in str(info.value), str(info.value)


def test_extern_kernels_need_no_ops_and_have_none():
    ext = kernel(ops=(), stores=(), extern_c="y.data[0] = 0;")
    verify(module(kernels=(ext,)))
    with pytest.raises(InternalError, match="extern kernel has ops"):
        verify(module(kernels=(replace(ext, stores=(("y", 0),)),)))
