"""The last prototype spellings of issue 19 (docs/python.md): `ProgramStats.parallel_tasks`,
`Tensor.with_layout` / `.base` / `.index_exprs`, `MemLayout.permute` / `col_major`,
`t.params[i]` (and the refused `t.tags[...]`) in key functions, and the refused task-window
units `bytes` / `entries`; each against NumPy or its documented meaning, each refusal at the
user's line with its message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptowsp
from pto_wsp import (
    DispatchPolicy,
    DType,
    In,
    MemLayout,
    Out,
    P,
    ScheduleError,
    TaskWindow,
    Tensor,
    TensorLayout,
    Tile,
    TypeCheckError,
    WindowMode,
    kernel,
    pto,
    workload,
)

F32 = DType.F32
HERE = str(Path(__file__).resolve())
X = np.random.default_rng(19).standard_normal((8, 32)).astype(np.float32)


@kernel
def double(x: In[Tile[1, 32, F32]], y: Out[Tile[1, 32, F32]]):
    pto.store(y, pto.load(x) * 2)


def _at_user(err) -> ptowsp.Diagnostic:
    (d,) = err.value.diagnostics
    assert d.span.file == HERE
    return d


def _rows(y: np.ndarray, x: np.ndarray = X):
    xt, yt = Tensor(data=x, shape=x.shape, dtype=F32), Tensor(data=y, shape=y.shape, dtype=F32)

    @workload
    def w():
        for i in P(8):
            double[i](x=xt[i], y=yt[i])

    return w


# -- ProgramStats.parallel_tasks


@pytest.mark.parametrize("window", [1, 3, 8])
def test_parallel_tasks_is_the_most_tasks_in_flight_which_a_window_bounds(window):
    y = np.zeros_like(X)
    p = _rows(y)().task_graph(window=TaskWindow(window, "tasks", WindowMode.STALL)) \
        .compile(target="cpu_sim")
    assert p.stats.parallel_tasks == 0  # no run yet: the prototype's default
    p.execute()
    p.synchronize()
    np.testing.assert_array_equal(y, X * 2)
    assert 1 <= p.stats.parallel_tasks <= window
    assert p.stats.parallel_tasks == p.stats.extra["max_in_flight"]
    assert p.stats().parallel_tasks == p.stats.parallel_tasks


def test_parallel_tasks_is_0_where_the_target_does_not_count_it():
    y = np.zeros_like(X)
    p = _rows(y)().compile(target="ref")
    p.execute()
    p.synchronize()
    np.testing.assert_array_equal(y, X * 2)
    assert p.stats.parallel_tasks == 0


# -- Tensor.base, index_exprs, with_layout


def test_base_and_index_exprs_as_the_prototype_defines_them():
    t = Tensor(data=np.zeros((4, 6, 8), np.float32))
    assert t.base is t and t.index_exprs == ()
    seen = {}

    @workload
    def w():
        for b in P(4):
            v = t[b][2]
            seen["v"] = v
            seen["s"] = t[b, 1:5, :][1:3]
    ptowsp.to_wsp(w())
    v, s = seen["v"], seen["s"]
    assert v.base is t and s.base is t
    b, two = v.index_exprs
    assert ptowsp.embed.values.named(b) == "b" and ptowsp.embed.values.named(two) == "2"
    b2, rows, whole = s.index_exprs
    assert ptowsp.embed.values.named(b2) == "b" and whole == slice(None, None, None)
    assert isinstance(rows, slice) and rows.step is None
    assert (ptowsp.embed.values.named(rows.start), ptowsp.embed.values.named(rows.stop)) == \
        ("2", "4")  # `[1:5][1:3]` composes to rows 2 and 3 of the tensor


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_with_layout_is_the_same_array_with_another_layout(target):
    x = X.copy()
    y = np.zeros_like(X)
    xt = Tensor(data=x, shape=x.shape, dtype=F32)
    yt0 = Tensor(data=y, shape=y.shape, dtype=F32)
    yt = yt0.with_layout(TensorLayout.default(2))
    assert yt.data is y and yt.base is yt and yt.layout == TensorLayout.default(2)
    assert yt0.layout == TensorLayout.default(2)

    @workload
    def w():
        for i in P(8):
            double[i](x=xt[i], y=yt[i])

    p = w().compile(target=target)
    p.execute()
    p.synchronize()
    np.testing.assert_array_equal(y, X * 2)  # the results land in the original's array


def test_with_layout_and_its_tensor_in_one_workload_is_an_error():
    xt = Tensor(data=X.copy(), shape=X.shape, dtype=F32)
    x2 = xt.with_layout(TensorLayout.default(2))  # MARK-alias

    @workload
    def w():
        for i in P(8):
            double[i](x=xt[i], y=x2[i])

    with pytest.raises(TypeCheckError) as err:
        ptowsp.to_wsp(w())
    d = _at_user(err)
    assert "`x2` and `xt` are one array (one is the other's `with_layout`), and the " \
        "workload uses both" in d.message
    assert "MARK-alias" in Path(HERE).read_text().splitlines()[d.span.line - 1]


def test_with_layout_of_a_scratch_tensor_is_an_error():
    s = Tensor(shape=(8, 32), dtype=F32, scratch=True)
    with pytest.raises(TypeCheckError) as err:
        s.with_layout(TensorLayout.default(2))
    assert "`with_layout` of a scratch tensor: the program owns its storage, so another " \
        "layout would be another tensor" in _at_user(err).message


# -- MemLayout.permute, col_major


def test_permute_and_col_major_are_storage_orders():
    shape = (4, 8)
    cm = MemLayout.col_major(shape)
    assert (cm.strides, cm.order) == ((1, 4), (1, 0))
    assert cm.strides_for(shape) == (1, 4)
    rm = MemLayout.row_major((8, 4))
    # the transposed tensor's layout: dimension k is the original's perm[k]
    pt = rm.permute((1, 0))
    assert (pt.strides, pt.order) == ((1, 4), (1, 0))
    assert pt == MemLayout.col_major(shape)
    assert MemLayout(order=(0, 2, 1)).permute((2, 0, 1)).order == (1, 0, 2)
    assert MemLayout().permute((1, 0)) == MemLayout()
    # element [i, j] of a permuted layout lies where [j, i] of the original does
    buf = np.arange(32, dtype=np.float32)
    t = Tensor(data=buf, shape=shape, dtype=F32, layout=TensorLayout(None, mem=pt))
    np.testing.assert_array_equal(t.data, buf.reshape(8, 4).T)


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_col_major_tensor_runs_against_numpy(target):
    y = np.zeros((8, 32), np.float32, order="F")
    yt = Tensor(shape=(8, 32), dtype=F32,
                layout=TensorLayout(None, mem=MemLayout.row_major((32, 8)).permute((1, 0))))
    assert yt.data.flags.f_contiguous
    xt = Tensor(data=X, shape=X.shape, dtype=F32)

    @workload
    def w():
        for i in P(8):
            double[i](x=xt[i], y=yt[i])

    p = w().compile(target=target)
    p.execute()
    p.synchronize()
    y[...] = yt.data
    np.testing.assert_array_equal(y, X * 2)


def test_a_bad_permutation_is_an_error_at_the_users_line():
    with pytest.raises(TypeCheckError) as err:
        MemLayout.row_major((4, 8)).permute((0, 0))
    assert "`permute` takes an order of the layout's dimensions (0 to 2 - 1, each once), " \
        "not (0, 0)" in _at_user(err).message


# -- t.params[i] and t.tags[...] in keys


def _disp_of(p) -> list:
    p.enable_tracing("full")
    p.execute()
    p.synchronize()
    return [(e["coords"][0], e["dispatcher"]) for e in p.trace.get_task_events()]


@pytest.mark.parametrize("key", [
    lambda t: t.params[0] % 3,
    lambda t: 0 if t.params[0] < 5 else 2,  # an `if`: tabulated on the host
])
def test_params_in_a_key_are_the_calls_coordinates(key):
    y = np.zeros_like(X)
    w = _rows(y)
    p = w().dispatch(DispatchPolicy.dispatch_by(key, num_aicpus=3)).compile(target="cpu_sim")
    got = _disp_of(p)
    np.testing.assert_array_equal(y, X * 2)
    assert sorted(got) == [(i, key(type("T", (), {"params": [i]}))) for i in range(8)]


def test_params_past_the_calls_coordinates_are_0_and_differing_calls_an_error():
    y = np.zeros_like(X)
    w = _rows(y)
    text = ptowsp.to_wsp(w().dispatch(DispatchPolicy.dispatch_by(lambda t: t.params[1] + 1,
                                                                 num_aicpus=2)))
    assert "dispatch_by(0 + 1, n = 2)" in text
    xt, yt = Tensor(data=X, shape=X.shape, dtype=F32), Tensor(data=y, shape=y.shape, dtype=F32)

    @workload
    def two():
        for i in P(4):
            double[i](x=xt[i], y=yt[i])
        for j in P(4):
            double[j + 4](x=xt[j + 4], y=yt[j + 4])

    with pytest.raises(ScheduleError) as err:
        ptowsp.to_wsp(two().dispatch(DispatchPolicy.dispatch_by(lambda t: t.params[0],
                                                                num_aicpus=2)))
    assert "`t.params[0]` is coordinate 0 of the task's call, and the workload's calls differ " \
        "there (`i`, `j + 4`): a key is one expression for every task" in _at_user(err).message
    with pytest.raises(ScheduleError) as err:
        ptowsp.to_wsp(two().dispatch(DispatchPolicy.dispatch_by(
            lambda t: 0 if t.params[0] < 1 else 1, num_aicpus=2)))
    assert "differ there" in _at_user(err).message


def test_a_params_coordinate_that_is_no_loop_variable_in_a_host_key_is_an_error():
    y = np.zeros_like(X)
    xt, yt = Tensor(data=X, shape=X.shape, dtype=F32), Tensor(data=y, shape=y.shape, dtype=F32)

    @workload
    def w():
        for i in P(4):
            double[i * 2](x=xt[i * 2], y=yt[i * 2])

    text = ptowsp.to_wsp(w().dispatch(DispatchPolicy.dispatch_by(lambda t: t.params[0] % 2,
                                                                 num_aicpus=2)))
    assert "dispatch_by(i * 2 % 2, n = 2)" in text
    with pytest.raises(ScheduleError) as err:
        ptowsp.to_wsp(w().dispatch(DispatchPolicy.dispatch_by(
            lambda t: 0 if t.params[0] < 2 else 1, num_aicpus=2)))
    assert "`t.params[0]` is the coordinate `i * 2`; a key function with an `if` reads " \
        "coordinates that are loop variables" in _at_user(err).message
    with pytest.raises(ScheduleError) as err:
        ptowsp.to_wsp(w().dispatch(DispatchPolicy.dispatch_by(lambda t: t.params["b"],
                                                              num_aicpus=2)))
    assert "`t.params[...]` takes a coordinate's position (0, 1, ...), not 'b'" in \
        _at_user(err).message


@pytest.mark.parametrize("key", [lambda t: t.tags["phase"],
                                 lambda t: 0 if t.tags["phase"] else 1])
def test_tags_in_a_key_are_refused_as_the_prototypes_placeholder(key):
    with pytest.raises(ScheduleError) as err:
        ptowsp.to_wsp(_rows(np.zeros_like(X))().dispatch(
            DispatchPolicy.dispatch_by(key, num_aicpus=2)))
    assert "`t.tags['phase']` is not supported: the prototype's task tags are a placeholder " \
        "(nothing sets a tag; its runtime reads the run-time symbol of that name instead)" in \
        _at_user(err).message


# -- task-window units


@pytest.mark.parametrize("unit", ["bytes", "entries"])
def test_window_units_other_than_tasks_are_refused_with_the_reason(unit):
    with pytest.raises(ScheduleError) as err:
        TaskWindow(1 << 20, unit, WindowMode.STALL)
    assert f"a task window in `{unit}` is not supported: the prototype declares the unit but " \
        "enforces only windows counted in tasks, so it gives it no meaning to follow" in \
        _at_user(err).message
