"""The seeds' task-graph knobs in the embedding (`Deps`, `DepsMode`, `ReadyPolicy`,
`StartPolicy`, `Pools`, `TracePolicy`, `TaskGraphConfig`): each becomes the `.task_graph(...)`
option of docs/schedules.md, survives the `to_wsp` round trip, and runs; misuse is a
`ScheduleError` at the user's line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptowsp
from pto_wsp import (
    Deps,
    DepsMode,
    DType,
    In,
    Out,
    P,
    Pools,
    ReadyPolicy,
    ScheduleError,
    StartPolicy,
    TaskGraphConfig,
    TaskWindow,
    Tensor,
    Tile,
    TracePolicy,
    WindowMode,
    kernel,
    pto,
    workload,
)

from .helpers import assert_roundtrip

F32 = DType.F32
HERE = str(Path(__file__).resolve())
X = np.random.default_rng(11).standard_normal((8, 32)).astype(np.float32)


@kernel
def double(x: In[Tile[1, 32, F32]], y: Out[Tile[1, 32, F32]]):
    pto.store(y, pto.load(x) * 2)


def rows(y: np.ndarray):
    xt, yt = Tensor(data=X, shape=X.shape, dtype=F32), Tensor(data=y, shape=y.shape, dtype=F32)

    @workload
    def w():
        for i in P(8):
            double[i](x=xt[i], y=yt[i])

    return w


def test_every_knob_reaches_the_schedule_and_runs():
    y = np.zeros_like(X)
    w = rows(y)().task_graph(
        window=TaskWindow(4, "tasks", WindowMode.STALL),
        deps=Deps(mode=DepsMode.tensor_map_exact),  # the seed documents' spelling
        ready=ReadyPolicy.priority(lambda t: 8 - t.get("i")),
        start=StartPolicy.after_orchestration(),
        pools=Pools.custom(lambda t: t.get("i") % 2, n=2),
        trace=TracePolicy.cycles())
    text = assert_roundtrip(w)
    assert (".task_graph(window = 4, unit = tasks, mode = stall, deps = infer_tensor_map_exact(), "
            "ready = priority(8 - i), start = after_orchestration(), pools = custom(i % 2, n = 2), "
            "trace = cycles())") in " ".join(text.split())  # the line is long: to_wsp wraps it
    program = w.compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, X * 2, rtol=1e-6)


def test_a_config_and_the_other_constructors():
    w = rows(np.zeros_like(X))().task_graph(TaskGraphConfig(
        deps=Deps.infer_bytes_overlap(), ready=ReadyPolicy.fifo(),
        start=StartPolicy.threshold(4), pools=Pools.by_exec_unit(), trace=TracePolicy.none()))
    text = assert_roundtrip(w)
    assert (".task_graph(deps = infer_bytes_overlap(), ready = fifo(), start = threshold(4), "
            "pools = by_exec_unit(), trace = none())") in " ".join(text.split())
    w = rows(np.zeros_like(X))().task_graph(deps=DepsMode.INFER_BYTES_OVERLAP,
                                            ready=ReadyPolicy.work_steal(), pools=Pools.single())
    assert ".task_graph(deps = infer_bytes_overlap(), ready = work_steal(), pools = single())" \
        in assert_roundtrip(w)
    assert Deps.infer_tensor_map_exact().name == "infer_tensor_map_exact"
    w = rows(np.zeros_like(X))().task_graph(deps=Deps.explicit())
    assert ".task_graph(deps = explicit())" in assert_roundtrip(w)
    w = rows(np.zeros_like(X))().task_graph(deps=Deps.hybrid())
    assert ".task_graph(deps = hybrid())" in assert_roundtrip(w)
    assert DepsMode.bytes_overlap is DepsMode.INFER_BYTES_OVERLAP


def _error(fn) -> ptowsp.Diagnostic:
    with pytest.raises(ScheduleError) as info:
        fn()
    (d,) = info.value.diagnostics
    assert d.span.file == HERE  # at the user's line
    return d


def test_misuse_is_a_schedule_error_at_the_users_line():
    w = rows(np.zeros_like(X))
    d = _error(lambda: Deps.hybrid(infer=DepsMode.EXPLICIT))
    assert d.message == "`Deps.hybrid(infer=...)` takes an inference mode, not `explicit`"
    d = _error(lambda: Deps.hybrid(explicit="yes"))
    assert d.message == "`Deps.hybrid(explicit=...)` is True or False, not 'yes'"
    d = _error(lambda: Deps(mode="sometimes"))
    assert d.message == "unknown dependency mode 'sometimes'"
    d = _error(lambda: w().task_graph(pools=Pools.custom(lambda t: t.get("i"))))
    assert d.message == ("`Pools.custom` needs the number of pools, `n=`, for a key that is not "
                         "a pool name")
    d = _error(lambda: w().task_graph(trace=TracePolicy.cycles(lambda t: t.get("expert"))))
    assert d.message.startswith("the schedule key names `expert`, which is neither a loop ")
    d = _error(lambda: w().task_graph(ready=Pools.single()))
    assert d.message.startswith("`.task_graph(ready=...)` takes a `ReadyPolicy`, not ")
    assert d.help == 'write e.g. `ready=ReadyPolicy.priority(lambda t: t.get("b"))`'
    d = _error(lambda: w().task_graph())
    assert d.message == "`.task_graph` needs `window=`"
    d = _error(lambda: TaskWindow(64, "tasks", WindowMode.BENCHMARK))
    assert d.message == ("`WindowMode.BENCHMARK` is not supported: wspc's window never admits a "
                         "task past its size, and counts no overflows")
    d = _error(lambda: w().task_graph(window=8, priority=3))
    assert d.message == "`.task_graph` has no option `priority`"


def _cost_by_hand(t):
    """A cost function with an `if` (the seeds' style): tabulated on the host at enumeration."""
    if t.get("i") < 3:
        return 500
    return 2000 + t.get("i")


@pytest.mark.parametrize("cost_fn, expected", [
    (lambda t: 100 * t.get("i") + 50, [100 * i + 50 for i in range(8)]),
    (_cost_by_hand, [500] * 3 + [2000 + i for i in range(3, 8)]),
])
def test_trace_cycles_cost_fn_sets_each_task_s_modelled_cycles(cost_fn, expected):
    y = np.zeros_like(X)
    w = rows(y)().task_graph(trace=TracePolicy.cycles(cost_fn))
    assert "trace = cycles(" in ptowsp.to_wsp(w)
    prog = w.compile(target="cpu_sim")
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, X * 2, rtol=1e-6)
    sim = prog.trace.sim  # `trace = cycles`: every run keeps its trace
    assert (sim["finish"] - sim["start"]).tolist() == expected
    serial = prog.stats.extra["serial_cycles"]
    # the same schedule without the cost function: the kernels' own cost again, and the
    # serial time differs by exactly the tasks' cycles (dispatch and completion unchanged)
    y2 = np.zeros_like(X)
    prog = rows(y2)().task_graph(trace=TracePolicy.cycles()).compile(target="cpu_sim")
    prog.execute()
    prog.synchronize()
    own = (prog.trace.sim["finish"] - prog.trace.sim["start"]).tolist()
    assert len(set(own)) == 1 and own != expected
    assert serial - sum(expected) == prog.stats.extra["serial_cycles"] - sum(own)


@pytest.mark.parametrize("policy, wsp", [
    (lambda: Deps.hybrid(), "deps = hybrid()"),
    (lambda: Deps.hybrid(explicit=False), "deps = hybrid()"),
    (lambda: Deps.hybrid(infer=DepsMode.INFER_BYTES_OVERLAP), "deps = infer_bytes_overlap()"),
    (lambda: Deps.hybrid(infer=DepsMode.bytes_overlap, explicit=False),
     "deps = infer_bytes_overlap()"),
])
def test_hybrid_with_any_arguments_is_its_inference_mode(policy, wsp):
    y = np.zeros_like(X)
    w = rows(y)().task_graph(deps=policy())
    assert wsp in ptowsp.to_wsp(w)
    prog = w.compile(target="cpu_sim")
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, X * 2, rtol=1e-6)


def _priority_by_hand(t):
    """A priority function with an `if` (the seeds' style), tabulated on the host: odd rows
    first, from the last, then even rows in order."""
    if t.get("i") % 2 == 0:
        return 10 + t.get("i")
    return 7 - t.get("i")


def test_a_priority_function_with_an_if_orders_the_ready_tasks():
    """`ReadyPolicy.priority(fn)` with an `if` in `fn`: one worker and one dispatcher start the
    tasks in the function's key order, smallest first, on the host and in the cycle model."""
    y = np.zeros_like(X)
    w = rows(y)().task_graph(ready=ReadyPolicy.priority(_priority_by_hand),
                             start=StartPolicy.after_orchestration())
    assert "ready = priority(" in ptowsp.to_wsp(w)
    prog = w.compile(target="cpu_sim", workers=1)
    prog.enable_tracing()
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, X * 2, rtol=1e-6)
    want = sorted(range(8), key=lambda i: 10 + i if i % 2 == 0 else 7 - i)
    assert want == [7, 5, 3, 1, 0, 2, 4, 6]
    ev = prog.trace.events
    started = ev["coords"][np.argsort(ev["start_ns"], kind="stable"), 0].tolist()
    assert started == want
    assert ev["coords"][:, 0].tolist() == list(range(8))  # task k is row k, as enumerated
    assert np.argsort(prog.trace.sim["issue"], kind="stable").tolist() == want  # the model


def _pool_by_name(t):
    """The prototype's pool function: a pool name per task, decided with an `if`."""
    if t.get("i") < 3:
        return "vec"
    return "cube"


def test_a_custom_pool_function_that_names_pools():
    """`Pools.custom(pool_fn)` without `n` (the prototype's form): the names are pools,
    numbered in the order the tasks first give them; each pool's tasks run on its workers."""
    y = np.zeros_like(X)
    w = rows(y)().task_graph(pools=Pools.custom(_pool_by_name))
    assert ", n = 2)" in ptowsp.to_wsp(w)  # two names, two pools
    prog = w.compile(target="cpu_sim", workers=2)
    prog.enable_tracing()
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, X * 2, rtol=1e-6)
    ev = prog.trace.events
    worker = dict(zip(ev["coords"][:, 0].tolist(), ev["worker"].tolist()))
    assert {worker[i] for i in range(3)} == {0} and {worker[i] for i in range(3, 8)} == {1}
    one = rows(np.zeros_like(X))().task_graph(pools=Pools.custom(lambda t: "all"))
    assert "pools = custom(0, n = 1)" in ptowsp.to_wsp(one)
