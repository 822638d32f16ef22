"""`pto_wsp.auto_schedule` (docs/python.md, "Exploring schedules"): the explorer compares
schedules on the cycle model, picks the fewest cycles of what it tried, gives the same answer
on every call, samples a space larger than `trials` with a fixed seed, and the schedule it
picks runs on cpu_sim with the unscheduled workload's results (checked against NumPy). Errors
are at the user's line: each marked `# E:name`."""

from __future__ import annotations

import importlib
import random

import numpy as np
import pytest

import pto_wsp
from pto_wsp import (
    DType,
    In,
    Out,
    P,
    Ragged,
    ScheduleError,
    Tensor,
    Tile,
    WindowMode,
    kernel,
    pto,
    workload,
)
from pto_wsp.auto_schedule import (
    AutoScheduler,
    DispatchOption,
    ExplorationSummary,
    ScheduleConfig,
    SearchSpace,
    TimingOption,
)
from pto_wsp.schedule import DispatchPolicy

from . import helpers

line_of, at = helpers.markers(__file__)


@kernel
def expmul(x: In[Tile[16, 64, DType.F32]], out: Out[Tile[16, 64, DType.F32]]):
    pto.store(out, pto.mul(pto.exp(x), x))


def ragged_case():
    """An imbalanced ragged workload: rows 0 and 4 hold most of the tiles, so placing tasks
    by row (`affinity`) loads one dispatcher, and one stream serialises every task."""
    lens = np.array([12, 1, 1, 1, 9, 1, 1, 1], np.int64)
    x = np.random.default_rng(7).standard_normal((8, 12, 16, 64)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x, dtype=DType.F32), Tensor(data=y, dtype=DType.F32)
    L = Tensor(data=lens, dtype=DType.I64)
    batch = pto_wsp.Dense[8]()
    toks = Ragged(batch, L)

    @workload
    def rag():
        for b in P(batch):
            for t in P(toks[b]):
                expmul[b, t](x=X[b, t], out=Y[b, t])

    return rag, x, y, lens


def expected(x, lens):
    want = np.zeros_like(x)
    for b, n in enumerate(lens):
        want[b, :n] = np.exp(x[b, :n]) * x[b, :n]
    return want


def space():
    return (SearchSpace()
            .add_streams([None, 1, 4])
            .add_dispatch(["round_robin", DispatchOption.AFFINITY, "work_steal"], [2, 4])
            .add_timing(["immediate", TimingOption.BATCHED], [4]))


def test_the_explorer_picks_the_fewest_cycles_and_is_deterministic():
    rag, x, y, lens = ragged_case()
    sp = space()
    assert sp.size == 3 * 6 * 2 == len(sp.enumerate_configs())
    best, summary = AutoScheduler(rag()).explore(sp)
    assert isinstance(summary, ExplorationSummary)
    assert [r.config for r in summary.results] == sp.enumerate_configs()  # all, in order
    assert all(r.success and r.total_cycles > 0 and r.task_count == 27 for r in summary.results)
    cycles = {r.config: r.total_cycles for r in summary.results}
    assert len(set(cycles.values())) > 3  # the choice matters here
    assert cycles[best] == min(cycles.values()) == summary.best_cycles
    assert best == next(r.config for r in summary.results if r.total_cycles == min(cycles.values()))
    # the choices that matter: one stream is worst, affinity by row worse than round robin
    one = ScheduleConfig(streams=1, dispatch="round_robin", dispatch_param=4)
    aff = ScheduleConfig(dispatch="affinity", dispatch_param=4)
    assert cycles[one] > cycles[ScheduleConfig(streams=4)] > cycles[ScheduleConfig()]
    assert cycles[aff] > cycles[ScheduleConfig()]
    assert summary.baseline_cycles == cycles[ScheduleConfig()]
    assert summary.speedup == summary.baseline_cycles / summary.best_cycles
    assert summary.best.total_cycles == summary.best_cycles
    assert summary.best.model["critical_path_cycles"] > 0
    top = summary.top_configs(3)
    assert top[0][0] == best and [c for _, c in top] == sorted(c for _, c in top)
    # the same call, the same answer and the same results (compile times aside)
    again_best, again = AutoScheduler(rag()).explore(space())
    assert again_best == best and again == summary
    assert not y.any()  # exploring never writes the caller's arrays


def test_the_best_schedule_runs_and_matches_numpy():
    rag, x, y, lens = ragged_case()
    best, _ = AutoScheduler(rag()).explore(space())
    scheduled = best.apply(rag())
    assert ".dispatch(" in pto_wsp.to_wsp(scheduled)
    prog = scheduled.compile(target="cpu_sim")
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, expected(x, lens), rtol=1e-5, atol=1e-6)
    got = y.copy()
    y[:] = 0
    plain = rag().compile(target="cpu_sim")  # the unscheduled workload: the same results
    plain.execute()
    plain.synchronize()
    np.testing.assert_array_equal(y, got)


def test_fewer_trials_sample_the_space_with_a_fixed_seed():
    rag, *_ = ragged_case()
    sp = space()
    configs = sp.enumerate_configs()
    best, summary = AutoScheduler(rag()).explore(sp, trials=5)
    picked = sorted(random.Random(0).sample(range(len(configs)), 5))
    assert [r.config for r in summary.results] == [configs[i] for i in picked]
    assert summary.best_cycles == min(r.total_cycles for r in summary.results)
    assert AutoScheduler(rag()).explore(sp, trials=5) == (best, summary)
    _, other = AutoScheduler(rag()).explore(sp, trials=5, seed=3)
    picked3 = sorted(random.Random(3).sample(range(len(configs)), 5))
    assert [r.config for r in other.results] == [configs[i] for i in picked3]
    # as many trials as configurations or more: all of them
    _, whole = AutoScheduler(rag()).explore(sp, trials=1000)
    assert len(whole.results) == len(configs)


def test_descent_walks_wspc_tunes_search():
    # `descent=True` (find_best's way) tries the points of `ptowsp.tuning.search`: the first
    # configuration first, then its coordinates one dimension at a time, never one twice
    rag, *_ = ragged_case()
    sp = space()
    configs = sp.enumerate_configs()
    best, summary = AutoScheduler(rag()).explore(sp, trials=8, descent=True)
    tried = [r.config for r in summary.results]
    assert len(tried) == 8 == len(set(tried)) and tried[0] == configs[0]
    assert tried[1:3] == [configs[12], configs[24]]  # the other stream counts, the rest held
    assert AutoScheduler(rag()).explore(sp, trials=8, descent=True) == (best, summary)


def test_applying_replaces_the_workloads_own_schedule():
    rag, x, y, lens = ragged_case()
    w = rag().dispatch(DispatchPolicy.affinity("b", n=2)).streams(1)
    cfg = ScheduleConfig(dispatch="hash", dispatch_param=4, streams=2, stream_by="t",
                         timing="interleaved", timing_param=2, window=64)
    text = pto_wsp.to_wsp(cfg.apply(w))
    assert "affinity" not in text and ".streams(1)" not in text
    for part in ("hash(b, n = 4)", ".streams(2)", ".stream_by(t)", "interleaved(2)",
                 "window = 64"):
        assert part in text, text
    # `str` is the schedule as combinators; a key left to the explorer is not shown
    assert str(cfg) == (".dispatch(hash(n = 4)).streams(2).stream_by(t)"
                        ".timing(interleaved(2)).task_graph(window = 64, mode = stall)")
    assert str(ScheduleConfig(dispatch="affinity", dispatch_key="t")) == \
        ".dispatch(affinity(t, n = 4)).timing(immediate)"
    prog = cfg.apply(w).compile()
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, expected(x, lens), rtol=1e-5, atol=1e-6)


def test_windows_keys_and_policy_objects_in_a_space():
    rag, *_ = ragged_case()
    sp = (SearchSpace()
          .add_streams([2])
          .add_stream_by([None, "b", lambda t: t.get("t") % 2])
          .add_dispatch([DispatchPolicy.round_robin(4), DispatchPolicy.affinity("t", n=4)])
          .add_task_window([None, 2], [WindowMode.STALL, "abort"]))
    assert sp.size == 3 * 2 * 3
    best, summary = AutoScheduler(rag()).explore(sp)
    failed = [r for r in summary.results if not r.success]
    # a window of 2 in abort mode fails the run: recorded, never the best
    assert failed and all(r.config.window == 2 and r.config.window_mode == "abort"
                          for r in failed)
    assert all("task window of 2 tasks is full" in r.error for r in failed)
    assert best.window_mode != "abort"
    assert best == min((r for r in summary.results if r.success), key=lambda r: r.total_cycles).config


def test_find_best_and_auto_schedule():
    rag, x, y, lens = ragged_case()
    module = importlib.import_module("pto_wsp.auto_schedule")
    assert pto_wsp.auto_schedule is module.auto_schedule  # the function, not the module
    assert callable(pto_wsp.auto_schedule) and pto_wsp.AutoScheduler is AutoScheduler
    best = AutoScheduler(rag).find_best(max_streams=4)  # an uncalled @workload works too
    assert best.streams in (None, 1, 2, 4) and best.dispatch in ("round_robin", "work_steal")
    prog = pto_wsp.auto_schedule(rag()).compile()
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(y, expected(x, lens), rtol=1e-5, atol=1e-6)
    assert ScheduleConfig().to_dict()["dispatch"] == "round_robin"


def test_errors_at_the_users_line():
    rag, *_ = ragged_case()
    with pytest.raises(ScheduleError) as e:
        SearchSpace().add_streams([])  # E:empty
    assert "`add_streams` needs at least one option: an empty list leaves no configuration" \
        in at(e.value, "empty")
    with pytest.raises(ScheduleError) as e:
        SearchSpace().add_dispatch(["fastest"])  # E:option
    assert "'fastest' is not a dispatch option" in at(e.value, "option")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(rag()).explore(SearchSpace(), trials=0)  # E:trials
    assert "`trials` must be a positive integer, not 0" in at(e.value, "trials")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(rag()).explore(SearchSpace(), warmup=-1)  # E:warmup
    assert "`warmup` must be a non-negative integer, not -1" in at(e.value, "warmup")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(rag()).explore([1, 2])  # E:space
    assert "`explore` takes a `SearchSpace`, not [1, 2]" in at(e.value, "space")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(42)  # E:workload
    assert "schedules are explored for a workload, not 42" in at(e.value, "workload")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(rag()).explore(SearchSpace().add_stream_by(["b"]))  # E:keys
    assert "a `stream_by` key needs a stream count: the space has none" in at(e.value, "keys")
    for config, why in ((ScheduleConfig(stream_by="b"), "`stream_by` needs a stream count"),
                        (ScheduleConfig(dispatch_key="b"), "`dispatch_key` is for affinity"),
                        (ScheduleConfig(timing_param=3), "`timing_param` is for a timing")):
        with pytest.raises(ScheduleError) as e:
            config.apply(rag())  # E:unused
        assert f"this configuration sets what it does not use: {why}" in at(e.value, "unused")
    with pytest.raises(pto_wsp.CompileError) as e:
        AutoScheduler(rag()).register_kernel("expmul", lambda x: x)  # E:register
    assert "`register_kernel` is not supported by wspc" in at(e.value, "register")

    @workload
    def flat():
        expmul(x=Tensor(data=np.zeros((16, 64), np.float32), dtype=DType.F32),
               out=Tensor(data=np.zeros((16, 64), np.float32), dtype=DType.F32))

    with pytest.raises(ScheduleError) as e:
        ScheduleConfig(dispatch="affinity").apply(flat())  # E:noloop
    assert "this workload has no loop" in at(e.value, "noloop")
    with pytest.raises(ScheduleError) as e:
        SearchSpace().add_timing(["batched"])  # E:batch
    assert "the `batched` count must be a positive integer, not None" in at(e.value, "batch")


def test_a_space_nothing_in_which_simulates_raises_the_first_error():
    rag, *_ = ragged_case()
    sp = SearchSpace().add_task_window([1], ["abort"])
    with pytest.raises(pto_wsp.ExecutionError) as e:
        AutoScheduler(rag()).explore(sp)
    assert "task window of 1 tasks is full" in str(e.value)


def test_symbols_bind_the_simulations():
    @kernel
    def dbl(x: In[Tile[16, 64, DType.F32]], out: Out[Tile[16, 64, DType.F32]]):
        pto.store(out, pto.add(x, x))

    x = np.arange(6 * 16 * 64, dtype=np.float32).reshape(6, 16, 64)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x, dtype=DType.F32), Tensor(data=y, dtype=DType.F32)
    rows = pto_wsp.DenseDyn(pto_wsp.symbol_u64("n"))

    @workload
    def dyn():
        for r in P(rows):
            dbl[r](x=X[r], out=Y[r])

    sp = SearchSpace().add_streams([None, 2]).add_timing([pto_wsp.TimingPolicy.rate_limit(50)])
    best, summary = AutoScheduler(dyn(), symbols={"n": 4}).explore(sp)
    assert [r.task_count for r in summary.results] == [4, 4]
    prog = best.apply(dyn()).compile()
    prog.set_symbol_u64("n", 4)
    prog.execute()
    prog.synchronize()
    np.testing.assert_array_equal(y[:4], 2 * x[:4])
    assert not y[4:].any()
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(dyn()).explore(sp)  # E:nosym
    assert "symbol `n` has no default, and simulating needs its value" in at(e.value, "nosym")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(dyn(), symbols={"m": 4}).explore(sp)  # E:othersym
    assert "the workload has no symbol `m` (its symbols: `n`)" in at(e.value, "othersym")
    with pytest.raises(ScheduleError) as e:
        AutoScheduler(dyn(), symbols={"n": -1})  # E:negsym
    assert "symbol `n` must be bound to a non-negative integer, not -1" in at(e.value, "negsym")
    with pytest.raises(ScheduleError) as e:
        SearchSpace().add_timing(["rate_limit"], [0])  # E:rate
    assert "the `rate_limit` rate must be a positive number of tasks per ms, not 0" \
        in at(e.value, "rate")
