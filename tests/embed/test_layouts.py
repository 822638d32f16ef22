"""Meshes, layouts and collectives in the Python embedding (docs/python.md, "Meshes, layouts
and collectives"): every name, the join table, the `.wsp` text `to_wsp` prints (parsed back to
the same IR), every error at the user's line, and programs on meshes of 1, 2 and 4 devices on
ref and cpu_sim against NumPy formulas written here."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

import pto_wsp
import ptowsp
from pto_wsp import (
    DistElem,
    In,
    LayoutIncompatibleError,
    MemLayout,
    Out,
    P,
    Replicate,
    Shard,
    Tensor,
    TensorLayout,
    TensorReplicate,
    TensorShard,
    Tile,
    TypeCheckError,
    all_to_all,
    allgather,
    allreduce,
    kernel,
    pto,
    reduce_scatter,
    relayout,
    scratch,
    tensor_layout_join,
    workload,
)
from pto_wsp.types import Dense, DType

from .helpers import assert_roundtrip, markers

pytestmark = pytest.mark.usefixtures("wspc_cache")

F32 = DType.F32
R, S0, S1 = TensorReplicate(), TensorShard(0), TensorShard(1)
line_of, at = markers(__file__)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "tp_mlp.py"


# ---------------------------------------------------------------------------------------------
# The names


def test_every_name_is_importable_from_both_packages_and_the_prototypes_modules():
    import pto_wsp.type_checker as tc
    import pto_wsp.types as ty

    for name in ("TensorLayout", "TensorShard", "TensorReplicate", "MemLayout", "Shard",
                 "Replicate", "DistElem", "tensor_layout_join", "LayoutIncompatibleError",
                 "relayout", "allreduce", "allgather", "reduce_scatter", "all_to_all"):
        assert getattr(pto_wsp, name) is getattr(ptowsp, name)
        if hasattr(ty, name):
            assert getattr(ty, name) is getattr(ptowsp, name)
    assert (tc.Layout, tc.LayoutShard, tc.LayoutReplicate, tc.layout_join) == (
        TensorLayout, TensorShard, TensorReplicate, tensor_layout_join)
    assert Shard is TensorShard and Replicate is TensorReplicate
    assert isinstance(S0, DistElem) and isinstance(R, DistElem)


def test_the_factories_give_the_seeds_layouts():
    assert TensorLayout.default(rank=4).dist == (R, R, R, R)
    assert TensorLayout.replicated(rank=2).is_replicated()
    lay = TensorLayout.sharded(dim=0, rank=4, mesh_axis=0)
    assert lay.dist == (S0, R, R, R) and lay.sharded_dims() == [0] and not lay.is_replicated()
    assert repr(lay) == "TensorLayout(S(0), R, R, R)"
    mem = MemLayout.row_major((2, 3, 4, 5))
    assert mem.strides == (60, 20, 5, 1) and mem.order == (0, 1, 2, 3)
    explicit = TensorLayout((TensorShard(0), TensorReplicate(), R, R), mem=mem)
    assert explicit.dist == lay.dist and explicit.mem == mem
    named = TensorLayout((R, TensorShard("tp")), partial="dp")
    assert named.dist == (R, TensorShard("tp")) and named.partial == ("dp",)
    assert repr(named) == "TensorLayout(R, S('tp'), partial=('dp',))"
    # without a rank, a layout fits the tensor it is given to
    X = Tensor(data=np.zeros((4, 6), np.float32), layout=TensorLayout.sharded(dim=1, mesh_axis=1))
    assert X.layout.dist == (R, S1)
    assert Tensor(data=np.zeros((4, 6), np.float32)).layout.dist == (R, R)  # the default
    Tensor(data=np.zeros((2, 3), np.float32), layout=TensorLayout((R, R), mem=MemLayout.row_major((2, 3))))


JOIN = [
    ((R, R), (R, R), (R, R)),
    ((R, R), (S0, R), (S0, R)),  # R ⊔ S(i) = S(i)
    ((S0, R), (R, R), (S0, R)),  # S(i) ⊔ R = S(i)
    ((S0, R), (S0, R), (S0, R)),  # S(i) ⊔ S(i) = S(i)
    ((S0, R), (R, S1), (S0, S1)),
]


@pytest.mark.parametrize("a, b, want", JOIN)
def test_the_join_table(a, b, want):
    got = tensor_layout_join(TensorLayout(a), TensorLayout(b))
    assert got.dist == want
    assert tensor_layout_join(TensorLayout(b), TensorLayout(a)).dist == want


def test_a_join_without_ranks_fits_the_other_side_and_keeps_memory_layouts():
    mem = MemLayout.row_major((4, 4))
    got = tensor_layout_join(TensorLayout.sharded(dim=1, mesh_axis=0),
                             TensorLayout((R, R), mem=mem))
    assert got.dist == (R, S0) and got.mem == mem
    assert tensor_layout_join(TensorLayout.sharded(dim=0), TensorLayout.default()).rank is None


def test_join_conflicts_are_layout_incompatible_errors_at_the_users_line():
    with pytest.raises(LayoutIncompatibleError) as e:
        tensor_layout_join(TensorLayout((S0, R)), TensorLayout((S1, R)))  # E:join
    assert "cannot join the layouts at dimension 0: S(0) ⊔ S(1)" in at(e.value, "join")
    assert isinstance(e.value, TypeCheckError)
    with pytest.raises(LayoutIncompatibleError, match="cannot join layouts of ranks 2 and 3"):
        tensor_layout_join(TensorLayout((R, R)), TensorLayout((R, R, R)))
    with pytest.raises(LayoutIncompatibleError, match=r"cannot join a layout partial over "
                       r"\(0\) with one partial over no axis"):
        tensor_layout_join(TensorLayout((R, R), partial=0), TensorLayout((R, R)))
    with pytest.raises(LayoutIncompatibleError, match="mesh axis 0 would shard dimensions 0 and 1"):
        tensor_layout_join(TensorLayout((S0, R)), TensorLayout((R, S0)))
    with pytest.raises(TypeCheckError, match="takes two `TensorLayout`s"):
        tensor_layout_join(TensorLayout((R,)), "R")


def test_bad_layout_arguments_are_errors_at_the_users_line():
    with pytest.raises(TypeCheckError) as e:
        TensorShard(-1)  # E:shard
    assert "`TensorShard` names a mesh axis by its position (0, 1, ...) or its name, not -1" in \
        at(e.value, "shard")
    with pytest.raises(TypeCheckError, match="a layout's entries are `TensorReplicate\\(\\)`"):
        TensorLayout(("R", "R"))
    with pytest.raises(TypeCheckError, match="`dim=2` is not a dimension of a layout of rank 2"):
        TensorLayout.sharded(dim=2, rank=2)
    with pytest.raises(TypeCheckError, match="`dim=` takes a dimension"):
        TensorLayout.sharded(dim="x")
    with pytest.raises(TypeCheckError, match="`rank=` is a positive integer, not 0"):
        TensorLayout.default(rank=0)
    with pytest.raises(TypeCheckError, match="`mem=` takes a `MemLayout`"):
        TensorLayout((R,), mem=(1,))
    with pytest.raises(TypeCheckError, match="`partial=` names a mesh axis"):
        TensorLayout((R,), partial=1.5)
    with pytest.raises(TypeCheckError) as e:
        Tensor(data=np.zeros((2, 3), np.float32), layout=TensorLayout.default(rank=3))  # E:rank
    assert "a layout of rank 3 is given to a tensor of rank 2" in at(e.value, "rank")
    with pytest.raises(TypeCheckError) as e:
        Tensor(data=np.zeros((2, 3), np.float32),  # E:colmajor
               layout=TensorLayout((R, R), mem=MemLayout.col_major((3, 2, 1))))
    assert "cannot store a tensor of shape (2, 3): it has 3 strides" in at(e.value, "colmajor")
    with pytest.raises(TypeCheckError, match="`layout=` takes a `TensorLayout`, not 'R'"):
        Tensor(data=np.zeros((2, 3), np.float32), layout="R")
    with pytest.raises(TypeCheckError, match="a layout of rank 1 is given to a tensor of rank 2"):
        scratch((2, 3), F32, layout=TensorLayout((R,)))


# ---------------------------------------------------------------------------------------------
# The module: `spatial_map`, layouts and collectives as `.wsp`


@kernel
def copy8(x: In[Tile[8, 8, F32]], y: Out[Tile[8, 8, F32]]):
    pto.store(y, x)


@kernel
def copy4(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x)


def _arrays(*shapes):
    rng = np.random.default_rng(11)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_a_tuple_grid_names_its_axes_d0_d1_and_positions_refer_to_them():
    x, y = _arrays((8, 8), (8, 8))
    X = Tensor(data=x, layout=TensorLayout.sharded(dim=1, mesh_axis=1))
    Y = Tensor(data=y)

    X2 = Tensor(data=np.zeros((8, 8), np.float32))

    @workload
    def gather2d():
        Xg = allgather(X)
        copy8(x=Xg, y=Y)
        relayout(X, into=X2)  # the destination's declared layout (replicated) says what to do

    text = assert_roundtrip(gather2d().spatial_map(grid=(2, 4)))
    assert "relayout(X, into = X2)" in text and "inout X2: f32[8, 8]\n" in text
    assert "mesh d0 = 2, d1 = 4" in text, text
    assert "input X: f32[8, 8] @ [R, S(d1)]" in text and "scratch Xg: f32[8, 8]\n" in text
    assert "allgather(X, into = Xg, over = d1)" in text


def test_a_dict_grid_names_its_axes_and_every_collective_prints_as_its_statement():
    (x,) = _arrays((8, 8))
    X = Tensor(data=x, layout=TensorLayout.sharded(dim=0, mesh_axis="tp"))
    Y = Tensor(data=np.zeros((8, 8), np.float32))
    Zp = scratch((4, 8), F32, layout=TensorLayout.replicated(partial="tp"))

    @workload
    def every():
        for i in P(Dense[2]):
            copy4[i](x=X[i * 4:i * 4 + 4, :], y=Zp)
        Z = allreduce(Zp, op="max")
        Zs = reduce_scatter(Zp, dim=1)
        Zr = relayout(Zs, TensorLayout.replicated())
        Xt = all_to_all(X, dim=1)
        Xr = allgather(Xt, mesh_axis="tp")
        copy8(x=Xr, y=Y)
        copy4(x=Z, y=Zr)

    text = assert_roundtrip(every().spatial_map(grid={"dp": 1, "tp": 2}))
    for line in ("mesh dp = 1, tp = 2",
                 "input X: f32[8, 8] @ [S(tp), R]",
                 "scratch Zp: f32[4, 8] @ [R, R] partial(tp)",
                 "scratch Z: f32[4, 8]\n", "scratch Zs: f32[4, 8] @ [R, S(tp)]",
                 "scratch Xt: f32[8, 8] @ [R, S(tp)]",
                 "allreduce(Zp, into = Z, over = tp, op = max)",
                 "reduce_scatter(Zp, into = Zs, over = tp, dim = 1, op = sum)",
                 "relayout(Zs, into = Zr)", "all_to_all(X, into = Xt, over = tp)",
                 "allgather(Xt, into = Xr, over = tp)", "inout Y: f32[8, 8]"):
        assert line in text, text


def test_a_replicated_layout_prints_as_no_layout_and_needs_no_mesh():
    x, y = _arrays((8, 8), (8, 8))
    X = Tensor(data=x, layout=TensorLayout.default())
    Y = Tensor(data=y)

    @workload
    def plain():
        copy8(x=X, y=Y)

    text = assert_roundtrip(plain())
    assert "mesh" not in text and "input X: f32[8, 8]\n" in text


def test_a_collectives_result_has_the_layout_it_makes():
    (x,) = _arrays((8, 8))
    X = Tensor(data=x, layout=TensorLayout.sharded(dim=0, mesh_axis="tp"))
    Zp = scratch((8, 8), F32, layout=TensorLayout.replicated(partial="tp"))
    seen = {}

    @workload
    def w():
        seen["all"] = allreduce(Zp).layout
        seen["rs"] = reduce_scatter(Zp, dim=1).layout
        seen["ag"] = allgather(X).layout
        seen["a2a"] = all_to_all(X, dim=1).layout
        seen["re"] = relayout(X, TensorLayout.sharded(dim=1, mesh_axis="tp")).layout

    w()
    tp = TensorShard("tp")
    assert seen["all"].dist == (R, R) and seen["all"].partial == ()
    assert seen["rs"].dist == (R, tp) and seen["rs"].partial == ()
    assert seen["ag"].dist == (R, R)
    assert seen["a2a"].dist == (R, tp)
    assert seen["re"].dist == (R, tp)


# ---------------------------------------------------------------------------------------------
# Errors, each at the user's line


def _one_copy(X, Y):
    @workload
    def w():
        copy8(x=X, y=Y)

    return w()


def test_a_layout_without_a_mesh_is_an_error_at_the_tensor():
    X = Tensor(data=np.zeros((8, 8), np.float32), layout=TensorLayout.sharded(0))  # E:nomesh
    with pytest.raises(TypeCheckError) as e:
        ptowsp.to_wsp(_one_copy(X, Tensor(data=np.zeros((8, 8), np.float32))))
    text = at(e.value, "nomesh")
    assert "mesh axis `0` is named here, but the workload declares no mesh" in text
    assert "`.spatial_map(grid=(4,))`" in text


def test_an_unknown_mesh_axis_is_an_error_at_the_tensor():
    X = Tensor(data=np.zeros((8, 8), np.float32), layout=TensorLayout.sharded(0, mesh_axis=2))  # E:pos
    W = Tensor(data=np.zeros((8, 8), np.float32), layout=TensorLayout.sharded(0, mesh_axis="ep"))  # E:name
    Y = Tensor(data=np.zeros((8, 8), np.float32))
    with pytest.raises(TypeCheckError) as e:
        _one_copy(X, Y).spatial_map(grid=(2, 2)).compile(target="ref")
    assert "mesh axis 2 does not exist: the mesh has 2 axes (d0, d1)" in at(e.value, "pos")
    with pytest.raises(TypeCheckError) as e:
        _one_copy(W, Y).spatial_map(grid={"tp": 2}).compile(target="ref")
    assert "`ep` is not an axis of the mesh (tp)" in at(e.value, "name")


def test_collective_errors_are_at_the_call():
    X = Tensor(data=np.zeros((8, 8), np.float32))
    Xs = Tensor(data=np.zeros((8, 8), np.float32), layout=TensorLayout.sharded(0, mesh_axis=0))

    @workload
    def ambiguous():
        allreduce(X)  # E:which

    with pytest.raises(TypeCheckError) as e:
        ptowsp.to_wsp(ambiguous().spatial_map(grid=(2, 2)))
    assert "which mesh axis? The mesh has 2 (d0, d1)" in at(e.value, "which")

    @workload
    def unknown():
        allreduce(X, mesh_axis="sp")  # E:over

    with pytest.raises(TypeCheckError) as e:
        ptowsp.to_wsp(unknown().spatial_map(grid={"tp": 2}))
    assert "`sp` is not an axis of the mesh (tp)" in at(e.value, "over")

    @workload
    def mismatch():
        allgather(X, mesh_axis=0)  # E:mismatch

    with pytest.raises(TypeCheckError) as e:  # the checker's error, at the Python line
        mismatch().spatial_map(grid=(2,)).compile(target="ref")
    assert ("`allgather` over d0 needs a source sharded over d0 (`S(d0)` on a dimension), but "
            "`X` is `[R, R]`") in at(e.value, "mismatch")

    Y = Tensor(data=np.zeros((8, 8), np.float32))

    @workload
    def into_wrong():
        allreduce(Xs, into=Y)  # E:into

    with pytest.raises(TypeCheckError) as e:
        into_wrong().spatial_map(grid=(2,)).compile(target="ref")
    assert ("`allreduce` over d0 needs a source partial over d0 (or replicated over it), but "
            "`Xs` is `[S(d0), R]`") in at(e.value, "into")


def test_misused_collectives_are_errors_at_the_call():
    X = Tensor(data=np.zeros((8, 8), np.float32))
    with pytest.raises(ptowsp.CompileError) as e:
        allreduce(X)  # E:outside
    assert "`allreduce` is a statement of a workload" in at(e.value, "outside")
    cases = {
        "view": (lambda: allreduce(X[0:4]), "`allreduce` moves a whole tensor"),
        "op": (lambda: allreduce(X, op="mean"), "`op='mean'` is not a reduction of `allreduce`"),
        "dim": (lambda: reduce_scatter(X, dim=2), "`dim=2` is not a dimension of the 2-D"),
        "into": (lambda: allreduce(X, into=np.zeros(2)), "`into=` takes the destination"),
        "a2a": (lambda: all_to_all(X), "`all_to_all` needs the dimension"),
        "re": (lambda: relayout(X, "R"), "`relayout` takes the layout to give the tensor"),
        "both": (lambda: relayout(X, TensorLayout.default(), into=X), "not both"),
        "axis": (lambda: allgather(X, mesh_axis=1.0), "`mesh_axis=` names a mesh axis"),
    }
    for fn, message in cases.values():
        with pytest.raises(ptowsp.CompileError, match=message.replace("(", r"\(")):
            _traced(fn)


def _traced(fn):
    """`fn` called in the body of a workload being traced."""
    @workload
    def w():
        fn()

    return w()


def test_bad_spatial_maps_are_schedule_errors_at_the_line():
    w = _one_copy(Tensor(data=np.zeros((8, 8), np.float32)),
                  Tensor(data=np.zeros((8, 8), np.float32)))
    for grid, message in [(4, "takes a tuple of axis sizes or a dict"),
                          ((), "a mesh has at least one axis"),
                          ((0,), "mesh axis `d0` has size 0: a size is a positive integer"),
                          ({"input": 2}, "mesh axis name 'input' is not a `.wsp` name"),
                          ({"tp": True}, "has size True")]:
        with pytest.raises(pto_wsp.ScheduleError, match=message):
            w.spatial_map(grid=grid)
    with pytest.raises(pto_wsp.ScheduleError) as e:
        w.spatial_map(grid=(2,)).spatial_map(grid=(2,))  # E:twice
    assert "the workload already has a mesh" in at(e.value, "twice")


def test_a_mesh_axis_named_like_a_tensor_leaves_the_tensor_renamed():
    x, y = _arrays((8, 8), (8, 8))
    tp = Tensor(data=x)
    Y = Tensor(data=y)

    @workload
    def w():
        copy8(x=tp, y=Y)

    text = assert_roundtrip(w().spatial_map(grid={"tp": 1}))
    assert "input tp_2: f32[8, 8]" in text


# ---------------------------------------------------------------------------------------------
# Running on meshes, against NumPy


@kernel
def copy_rows(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x)


def _collectives_program(tp: int):
    """Row blocks of X (sharded over tp) summed by allreduce and reduce_scatter; X's rows moved
    to columns by all_to_all and gathered back."""
    T, D = 4 * tp, 8
    x = np.random.default_rng(tp).standard_normal((T, D)).astype(np.float32)
    X = Tensor(data=x, layout=TensorLayout.sharded(dim=0, mesh_axis=0))
    S = Tensor(data=np.zeros((4, D), np.float32))
    M = Tensor(data=np.zeros((4, D), np.float32))
    RS = Tensor(data=np.zeros((4, D), np.float32))
    Y = Tensor(data=np.zeros((T, D), np.float32))
    Zp = scratch((4, D), F32, layout=TensorLayout.replicated(partial=0))

    @kernel
    def whole(x: In[Tile[T, D, F32]], y: Out[Tile[T, D, F32]]):
        pto.store(y, x)

    @workload
    def coll():
        for i in P(Dense[tp]):  # the task reading block i runs on device i
            copy_rows[i](x=X[i * 4:i * 4 + 4, :], y=Zp)
        allreduce(Zp, into=S)
        copy_rows(x=allreduce(Zp, op="max"), y=M)
        copy_rows(x=relayout(reduce_scatter(Zp, dim=1), TensorLayout.replicated()), y=RS)
        whole(x=allgather(all_to_all(X, dim=1)), y=Y)

    blocks = x.reshape(tp, 4, D)
    want = {"S": blocks.sum(0, dtype=np.float32), "M": blocks.max(0), "Y": x}
    want["RS"] = want["S"]
    return coll().spatial_map(grid=(tp,)), {"S": S, "M": M, "RS": RS, "Y": Y}, want


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_every_collective_runs_on_a_mesh_against_numpy(target, tp):
    w, outs, want = _collectives_program(tp)
    program = w.compile(target=target)
    program.execute()
    program.synchronize()
    for name, t in outs.items():
        # the fixed order of the reduction: device 0, then 1, ... in f32, as NumPy's sum
        np.testing.assert_allclose(t.data, want[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_compile_mesh_resizes_a_grid_axis():
    w, outs, want = _collectives_program(2)
    program = w.compile(target="ref", mesh={"d0": 2})
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(outs["S"].data, want["S"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_the_tp_mlp_example_on_two_and_four_devices(target):
    g = runpy.run_path(str(EXAMPLE))  # not as __main__: the test runs what it needs
    want = g["reference"]()
    # an independent formula: the column and row blocks of Megatron's MLP, summed per device
    for tp in (2, 4):
        cols = g["F"] // tp
        parts = [(g["x_np"] @ g["w1_np"][:, d * cols:(d + 1) * cols]) @
                 g["w2_np"][d * cols:(d + 1) * cols, :] for d in range(tp)]
        np.testing.assert_allclose(sum(parts), want, rtol=1e-4, atol=1e-4)
        got = g["run"](target, tp)
        np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-4)
        # up and down: one task per tile; the allreduce: one task per device
        assert got["tasks"] == 2 * (g["T"] // g["TB"]) * (g["F"] // g["FB"]) + tp
    text = assert_roundtrip(got["program"].workload)
    assert "mesh tp = 4" in text and "input W1: f32[64, 128] @ [R, S(tp)]" in text
    assert "scratch Zp: f32[32, 64] @ [R, R] partial(tp)" in text
    assert "allreduce(Zp, into = Y, over = tp, op = sum)" in text


def test_the_example_runs_as_a_script():
    g = runpy.run_path(str(EXAMPLE), run_name="__main__")
    assert np.abs(g["got"]["y"] - g["reference"]()).max() < 1e-4


def test_the_seed_documents_spellings():
    """The specification's and the tutorial's layout and collective lines, as written there
    (sizes made small), in a workload on a mesh."""
    B, H, S, D = 2, 2, 4, 8
    layout2 = TensorLayout(
        (TensorShard(0), TensorReplicate(), TensorReplicate(), TensorReplicate()),
        mem=MemLayout.row_major((B, H, S, D)),
    )
    T4 = Tensor(shape=(B, H, S, D), dtype=DType.F32, layout=layout2)
    assert T4.layout.dist == (S0, R, R, R)
    A_ = Tensor(shape=(8, 8), dtype=DType.F16,
                layout=TensorLayout.sharded(dim=0, rank=2, mesh_axis=0))
    partial_sum = scratch((8, 8), F32, layout=TensorLayout.replicated(rank=2, partial=0))
    seen = {}

    @workload
    def seeds():
        B = relayout(A_, TensorLayout.replicated(rank=2))  # Shard -> Replicate
        y = relayout(A_, to=TensorLayout.sharded(dim=0, rank=2))  # noqa: F841
        z = allreduce(partial_sum)  # noqa: F841
        result = allreduce(partial_sum, op="sum", mesh_axis=0)  # noqa: F841
        gathered = allgather(A_, mesh_axis=0)  # noqa: F841
        scattered = reduce_scatter(partial_sum, op="sum", mesh_axis=0)
        seen.update(B=B, scattered=scattered)

    text = ptowsp.to_wsp(seeds().spatial_map(grid=(4, 4)))
    assert "mesh d0 = 4, d1 = 4" in text
    for line in ("relayout(A_, into = B)", "relayout(A_, into = y)",
                 "allreduce(partial_sum, into = z, over = d0, op = sum)",
                 "allgather(A_, into = gathered, over = d0)",
                 "reduce_scatter(partial_sum, into = scattered, over = d0, dim = 0, op = sum)",
                 "scratch scattered: f32[8, 8] @ [S(d0), R]", "scratch y: f16[8, 8] @ [S(d0), R]"):
        assert line in text, text
    assert seen["B"].layout.is_replicated() and seen["scattered"].layout.dist == (S0, R)


@kernel
def half_cols(x: In[Tile[8, 4, F32]], y: Out[Tile[8, 4, F32]]):
    pto.store(y, x)


def test_the_checkers_placement_and_shard_errors_are_at_the_python_lines():
    X = Tensor(data=np.zeros((8, 8), np.float32), layout=TensorLayout.sharded(1, mesh_axis="tp"))
    H = Tensor(data=np.zeros((8, 8), np.float32))

    @workload
    def pinned():
        for f in P(Dense[2]):
            half_cols[f](x=X[:, f * 4:f * 4 + 4], y=H[:, f * 4:f * 4 + 4])  # E:replica

    with pytest.raises(TypeCheckError) as e:  # layouts are types: a placement error is one
        pinned().spatial_map(grid={"tp": 2}).compile(target="ref")
    assert ("`H` is replicated over tp, but `half_cols` runs only on one tp coordinate (it reads "
            "`X` sharded over tp)") in at(e.value, "replica")

    U = Tensor(data=np.zeros((8, 6), np.float32), layout=TensorLayout.sharded(1, mesh_axis="tp"))  # E:uneven
    V = Tensor(data=np.zeros((8, 6), np.float32))

    @workload
    def uneven():
        allgather(U, into=V)

    with pytest.raises(TypeCheckError) as e:
        uneven().spatial_map(grid={"tp": 4}).compile(target="ref")
    assert "`U` shards its 6 columns over tp = 4: 6 is not a multiple of 4" in at(e.value, "uneven")


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_data_and_tensor_parallel_mlp_on_a_2x2_grid(target):
    """The example's kernels on `spatial_map(grid=(2, 2))`: tokens over d0 (data parallel),
    the hidden width over d1 (tensor parallel), the output sharded over d0 and gathered."""
    g = runpy.run_path(str(EXAMPLE))
    T, D, F, TB, FB = g["T"], g["D"], g["F"], g["TB"], g["FB"]
    dp, tp = TensorShard(0), TensorShard(1)
    y = np.zeros((T, D), np.float32)
    X = Tensor(data=g["x_np"], layout=TensorLayout((dp, R)))
    W1 = Tensor(data=g["w1_np"], layout=TensorLayout((R, tp)))
    W2 = Tensor(data=g["w2_np"], layout=TensorLayout((tp, R)))
    Y = Tensor(data=y, layout=TensorLayout((dp, R)))
    H = scratch((T, F), F32, layout=TensorLayout((dp, tp)))
    Zp = scratch((T, D), F32, layout=TensorLayout((dp, R), partial=1))
    rows, cols = Dense[T // TB](), Dense[F // FB]()
    up, down = g["up"], g["down"]

    @workload
    def mlp2d():
        for t, f in P(rows, cols):
            up[t, f](x=X[t * TB:t * TB + TB, :], w=W1[:, f * FB:f * FB + FB],
                     h=H[t * TB:t * TB + TB, f * FB:f * FB + FB])
        for t in P(rows):
            for f in P.seq(cols):
                down[t, f](h=H[t * TB:t * TB + TB, f * FB:f * FB + FB],
                           w=W2[f * FB:f * FB + FB, :], acc=Zp[t * TB:t * TB + TB, :])
        allreduce(Zp, into=Y)

    w = mlp2d().spatial_map(grid=(2, 2))
    text = assert_roundtrip(w)
    assert "scratch Zp: f32[32, 64] @ [S(d0), R] partial(d1)" in text
    assert "allreduce(Zp, into = Y, over = d1, op = sum)" in text
    program = w.compile(target=target)
    program.execute()
    program.synchronize()
    want = sum((g["x_np"] @ g["w1_np"][:, c:c + F // 2]) @ g["w2_np"][c:c + F // 2, :]
               for c in (0, F // 2))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# MemLayout: the storage order of a tensor's elements; kernels see logical tiles


@kernel
def scale_add(x: In[Tile[4, 8, F32]], b: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x * 2.0 + b)


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_mem_layout_is_the_storage_order_and_kernels_see_logical_tiles(target):
    rng = np.random.default_rng(5)
    logical = rng.standard_normal((8, 8)).astype(np.float32)
    bias = rng.standard_normal((8, 8)).astype(np.float32)
    flat = np.ascontiguousarray(logical.T).reshape(-1)  # the caller's column-major storage
    X = Tensor(data=flat, shape=(8, 8), dtype=F32,
               layout=TensorLayout((R, R), mem=MemLayout.col_major((8, 8))))
    assert np.array_equal(X.data, logical) and np.shares_memory(X.data, flat)
    B = Tensor(data=np.asfortranarray(bias))  # any array of the shape is its values
    padded = MemLayout(strides=(16, 1))  # rows 16 elements apart: 8 of padding each
    storage = np.full(7 * 16 + 8, -1.0, np.float32)  # the caller's, the padding marked -1
    Y = Tensor(data=storage, shape=(8, 8), dtype=F32, layout=TensorLayout((R, R), mem=padded))
    assert Y.data.strides == (64, 4)
    Yt = Tensor(shape=(8, 8), dtype=F32, layout=TensorLayout((R, R), mem=MemLayout(order=(1, 0))))
    assert Yt.data.strides == (4, 32)  # order (1, 0): dimension 0 innermost (column-major)

    @workload
    def stored():
        for i in P(Dense[2]):
            scale_add[i](x=X[i * 4:i * 4 + 4, :], b=B[i * 4:i * 4 + 4, :], y=Y[i * 4:i * 4 + 4, :])
            scale_add[i](x=X[i * 4:i * 4 + 4, :], b=B[i * 4:i * 4 + 4, :],
                         y=Yt[i * 4:i * 4 + 4, :])

    program = stored().compile(target=target)
    program.execute()
    program.synchronize()
    want = logical * np.float32(2.0) + bias
    assert np.array_equal(Y.data, want) and np.array_equal(Yt.data, want)
    assert Y.data.strides == (64, 4) and Yt.data.strides == (4, 32)  # written where it lies
    assert np.array_equal(storage[np.arange(120) % 16 < 8], want.reshape(-1))  # in its storage
    assert (storage[np.arange(120) % 16 >= 8] == -1).all()  # the padding never written
    Z = Tensor(shape=(8, 8), dtype=F32, layout=TensorLayout((R, R), mem=padded))
    assert Z.data.strides == (64, 4) and not Z.data.any()  # storage of its own, zeroed


def test_a_mem_layout_that_cannot_store_the_tensor_is_an_error_at_its_line():
    with pytest.raises(TypeCheckError) as e:
        Tensor(shape=(4, 8), dtype=F32,  # E:overlap
               layout=TensorLayout((R, R), mem=MemLayout(strides=(4, 1))))
    assert ("MemLayout(strides=(4, 1)) cannot store a tensor of shape (4, 8): two elements "
            "would share a place (a stride smaller than the extent of a faster dimension)"
            in at(e.value, "overlap"))
    with pytest.raises(TypeCheckError, match="`order` \\(0, 0\\) is not an order of its 2 "
                                             "dimensions"):
        Tensor(shape=(4, 8), dtype=F32, layout=TensorLayout((R, R), mem=MemLayout(order=(0, 0))))
    with pytest.raises(TypeCheckError, match="a stride below 1"):
        Tensor(shape=(4, 8), dtype=F32, layout=TensorLayout((R, R), mem=MemLayout(strides=(0, 1))))
    with pytest.raises(TypeCheckError, match="it has 3 strides"):
        Tensor(shape=(4, 8), dtype=F32,
               layout=TensorLayout((R, R), mem=MemLayout(strides=(1, 2, 3))))
    with pytest.raises(TypeCheckError, match="`order` \\(0, 1\\) disagrees with the strides "
                                             "\\(1, 4\\)"):
        Tensor(shape=(4, 8), dtype=F32,
               layout=TensorLayout((R, R), mem=MemLayout(strides=(1, 4), order=(0, 1))))
    with pytest.raises(TypeCheckError, match="wspc stores no swizzled or packed tensors"):
        Tensor(shape=(4, 8), dtype=F32,
               layout=TensorLayout((R, R), mem=MemLayout(swizzle="xor")))
    with pytest.raises(TypeCheckError, match="needs 32 contiguous elements; the array has 31"):
        Tensor(data=np.zeros(31, np.float32), shape=(4, 8), dtype=F32,
               layout=TensorLayout((R, R), mem=MemLayout.col_major((4, 8))))


def test_check_layouts_compatible_joins_or_gives_none_as_the_prototype():
    from pto_wsp.type_checker import check_layouts_compatible

    a = Tensor(data=np.zeros((4, 8), np.float32), layout=TensorLayout.sharded(dim=0, mesh_axis=0))
    b = Tensor(data=np.zeros((4, 8), np.float32), layout=TensorLayout.sharded(dim=1, mesh_axis=1))
    c = Tensor(data=np.zeros((4, 8), np.float32), layout=TensorLayout.sharded(dim=1, mesh_axis=0))
    plain = Tensor(data=np.zeros((4, 8), np.float32))
    assert check_layouts_compatible(a, b) == TensorLayout((S0, S1))
    assert check_layouts_compatible(a, plain, b) == TensorLayout((S0, S1))
    assert check_layouts_compatible(a, c) is None  # mesh axis 0 on both dimensions
    assert check_layouts_compatible(b, c) is None  # S(1) ⊔ S(0) on dimension 1
    assert check_layouts_compatible(a) == a.layout
    assert check_layouts_compatible() is None and check_layouts_compatible(object()) is None
