"""Enumeration gates in the cycle model (runtime_c/sim.c THE MODEL, simlog.c): a wsp_await at
enumeration index g on a box that earlier tasks write holds back task g and every later task until
those writers have finished and their completion has been seen.

Through wsp_sim_replay_gated (explicit gates): hand-computed cases, two gates, a gate whose
writers finished long before, gates with a window, every validation error, and hypothesis
properties: with no window a gate is exactly "its writers become predecessors of every later
task" (checked against test_sim.reference), and with any window the exact enumeration, readiness
and critical-path formulas plus the model's invariants. Through the runtime (simlog.c finds the
writers in its own tables): dense, hashed and whole-tensor records, results bit-identical across
1/2/4 workers and repeated runs. And one program through ptowsp: expert tasks start after their
router in simulated time."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ERR_USAGE, OK, READ, WRITE, Runtime
from .test_sim import (
    BATCHED,
    CUBE,
    DEFAULT_MACHINE,
    DEFAULT_POLICY,
    INTERLEAVED,
    RATE_LIMIT,
    SCALE,
    VECTOR,
    Machine,
    Out,
    Policy,
    R,
    T,
    check_streams,
    cycles_of,
    reference,
    replay_inputs,
    replay_outputs,
    workloads,
)
from .test_sim import ok as ok_plain

pytestmark = pytest.mark.cc


def gsim(L, tasks, costs, m: Machine = DEFAULT_MACHINE, p: Policy = DEFAULT_POLICY, gates=(), *,
         ngates=None, null_writers=False) -> Out:
    """Calls wsp_sim_replay_gated. gates: [(index, [writers])]."""
    ffi, lib = L.ffi, L.lib
    mach, pol, kc, tk, preds = replay_inputs(ffi, tasks, costs, m, p)
    g = ffi.new("wsp_simgate[]", [{"index": i, "nwriters": len(w)} for i, w in gates] or 1)
    wr = ffi.NULL if null_writers else ffi.new("int64_t[]", [x for _, w in gates for x in w] or 1)
    res = ffi.new("wsp_simresult[]", max(1, len(tasks)))
    summ = ffi.new("wsp_simsummary *")
    disp = ffi.new("wsp_simdisp[]", max(1, p.nd))
    err = ffi.new("char[]", 256)
    rc = lib.wsp_sim_replay_gated(mach, pol, kc, len(costs), len(tasks), tk, preds,
                                  len(gates) if ngates is None else ngates, g, wr, res, summ, disp,
                                  err, 256)
    return replay_outputs(ffi, rc, err, len(tasks), res, summ, disp, p.nd)


def gok(L, tasks, costs, m=DEFAULT_MACHINE, p=DEFAULT_POLICY, gates=()) -> Out:
    out = gsim(L, tasks, costs, m, p, gates)
    assert out.rc == OK, out.err
    return out


def gate_open(gates, k, res, cc):
    """When every gate at or before task k is open (0 without one)."""
    return max([res[w].finish + cc for g, ws in gates if g <= k for w in ws], default=0)


def check_gated(tasks, costs, m, p, gates, out):
    """Everything the model promises, gates included, from the results alone."""
    s, res = out.summary, out.results
    dc, cc = cycles_of(m.dispatch_ns, m.clock), cycles_of(m.completion_ns, m.clock)
    n = len(tasks)
    assert s["tasks"] == n
    assert s["total_cycles"] == max((r.finish for r in res), default=0)
    assert s["total_cycles"] >= s["critical_path"]
    for u, cores in ((VECTOR, m.vector), (CUBE, m.cube)):
        assert s["total_cycles"] * cores >= s["work"][u]
    if p.timing != RATE_LIMIT:
        assert s["total_cycles"] <= s["serial_cycles"]
    last, sp = {}, [None] * n
    for k, t in enumerate(tasks):
        if t.stream >= 0:
            sp[k] = last.get(t.stream)
            last[t.stream] = k
    cp = [0] * n
    for k, (t, r) in enumerate(zip(tasks, res)):
        unit, cycles = costs[t.kernel]
        # the enumerator: in order, the window, the gates (exactly when the last of them allows)
        prev = res[k - 1].enumerated if k else 0
        fin = sorted(res[j].finish for j in range(k))
        win = fin[k - p.window] if p.window and k >= p.window else 0
        assert r.enumerated == max(prev, win, gate_open(gates, k, res, cc)), k
        deps = list(t.preds) + ([sp[k]] if sp[k] is not None else [])
        assert r.ready == max([r.enumerated] + [res[j].finish + cc for j in deps])
        assert r.issue >= r.ready
        assert r.start == r.issue + dc and r.finish == r.start + cycles
        assert r.unit == unit and 0 <= r.core < (m.cube if unit == CUBE else m.vector)
        assert (r.group >= 0) == (p.timing == BATCHED)
        if not p.steal:
            assert r.dispatcher == t.dispatcher
        floor = max([cp[w] + cc for g, ws in gates if g <= k for w in ws], default=0)
        cp[k] = max([floor] + [cp[j] + cc for j in deps]) + dc + cycles
    assert s["critical_path"] == max(cp, default=0)
    by_core = {}
    for r in res:
        if r.finish > r.issue:
            by_core.setdefault((r.unit, r.core), []).append((r.issue, r.finish))
    for spans in by_core.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    for d in range(p.nd):
        issues = sorted(r.issue for r in res if r.dispatcher == d)
        assert all(b - a >= dc for a, b in zip(issues, issues[1:]))
        assert out.disp[d][0] == len(issues)
    check_streams(tasks, res, cc)


# ---- hand-computed cases -------------------------------------------------------------------------

ROUTER = [(VECTOR, 10), (VECTOR, 100)]  # kernel 1: the router, slow
M = Machine(vector=8, dispatch_ns=2, completion_ns=5)


def test_tasks_after_the_await_wait_for_the_router_and_earlier_ones_do_not(rtlib):
    # 0: router; 1, 2: enumerated before the await (unrelated); await at 3 on what 0 wrote;
    # 3 .. 5: enumerated after it
    tasks = [T(kernel=1)] + [T() for _ in range(5)]
    plain = ok_plain(rtlib, tasks, ROUTER, M)
    out = gok(rtlib, tasks, ROUTER, M, gates=[(3, [0])])
    r0 = out.results[0]
    assert (r0.issue, r0.start, r0.finish) == (0, 2, 102)
    assert out.results[:3] == plain.results[:3]          # before the await: unaffected
    for k in (3, 4, 5):
        r = out.results[k]
        assert r.enumerated == r.ready == 102 + 5       # finish + completion
        assert r.start > r0.finish
    assert [r.issue for r in out.results[3:]] == [107, 109, 111]
    assert out.summary["critical_path"] == 107 + 2 + 10 > plain.summary["critical_path"]
    check_gated(tasks, ROUTER, M, Policy(), [(3, [0])], out)


@pytest.mark.parametrize("p", [Policy(), Policy(nd=3), Policy(nd=3, steal=True),
                               Policy(nd=2, timing=BATCHED, n=2),
                               Policy(nd=2, nstreams=2, timing=INTERLEAVED, n=2),
                               Policy(timing=RATE_LIMIT, rate=1e5)])
def test_every_loop_honours_a_gate(rtlib, p):
    """run_one, run_plain (several dispatchers, stealing) and run_general (batched,
    interleaved, rate_limit)."""
    tasks = [T(kernel=1, dispatcher=0, stream=0 if p.nstreams else -1)] + \
        [T(dispatcher=k % p.nd, stream=k % 2 if p.nstreams else -1) for k in range(1, 8)]
    gates = [(4, [0])]
    out = gok(rtlib, tasks, ROUTER, M, p, gates)
    check_gated(tasks, ROUTER, M, p, gates, out)
    assert all(r.enumerated == out.results[0].finish + 5 for r in out.results[4:])
    assert all(r.enumerated == 0 for r in out.results[:4])


def test_two_gates(rtlib):
    # 0: slow router A, 1: fast router B; gate at 2 on B, gate at 4 on A
    costs = [(VECTOR, 10), (VECTOR, 100), (VECTOR, 30)]
    tasks = [T(kernel=1), T(kernel=2)] + [T() for _ in range(4)]
    gates = [(2, [1]), (4, [0])]
    out = gok(rtlib, tasks, costs, M, gates=gates)
    fa, fb = out.results[0].finish, out.results[1].finish
    assert (fa, fb) == (102, 34)
    assert [r.enumerated for r in out.results] == [0, 0, 39, 39, 107, 107]
    check_gated(tasks, costs, M, Policy(), gates, out)
    # the order of two gates' openings does not matter: a later gate on the fast router
    gates = [(2, [0]), (4, [1])]
    out = gok(rtlib, tasks, costs, M, gates=gates)
    assert [r.enumerated for r in out.results] == [0, 0, 107, 107, 107, 107]
    check_gated(tasks, costs, M, Policy(), gates, out)


def test_a_gate_whose_writers_finished_long_before_changes_nothing(rtlib):
    """Under a window the enumerator reaches the gate long after its writer was seen."""
    tasks = [T(kernel=0)] + [T(kernel=1, preds=(k - 1,)) for k in range(1, 12)]
    p = Policy(window=2)
    plain = ok_plain(rtlib, tasks, ROUTER, M, p)
    out = gok(rtlib, tasks, ROUTER, M, p, [(10, [0]), (11, [0, 3])])
    assert out.results == plain.results and out.summary == plain.summary
    assert out.results[10].enumerated > out.results[0].finish + 5


def test_a_gate_with_a_window(rtlib):
    # window 2: 0 (router) and 1 go at 0; 2 when one of them ends; the gate at 3 waits for 0
    costs = [(VECTOR, 10), (VECTOR, 100)]
    tasks = [T(kernel=1), T(), T(), T(), T(), T()]
    for p in (Policy(window=2), Policy(window=2, nd=2), Policy(window=1)):
        gates = [(3, [0])]
        out = gok(rtlib, tasks, costs, M, p, gates)
        check_gated(tasks, costs, M, p, gates, out)
        if p.window == 2:
            assert out.results[2].enumerated < out.results[0].finish
            assert out.results[3].enumerated == out.results[0].finish + 5


def test_gates_at_the_end_or_without_writers_cost_nothing(rtlib):
    tasks = [T(kernel=1), T(), T(preds=(0,))]
    plain = ok_plain(rtlib, tasks, ROUTER, M)
    for gates in ([(3, [0, 1])], [(1, []), (2, []), (3, [2])], [(0, []), (3, [])]):
        out = gok(rtlib, tasks, ROUTER, M, gates=gates)
        assert out.raw == plain.raw


def test_several_gates_at_one_index_and_duplicate_writers(rtlib):
    costs = [(VECTOR, 10), (VECTOR, 100), (VECTOR, 30)]
    tasks = [T(kernel=1), T(kernel=2), T(), T()]
    one = gok(rtlib, tasks, costs, M, gates=[(2, [0, 1])])
    two = gok(rtlib, tasks, costs, M, gates=[(2, [1, 1]), (2, [0]), (2, [0, 1])])
    assert one.raw == two.raw


@pytest.mark.parametrize("gates, ngates, words", [
    ([(2, [0]), (1, [0])], None, "gate 1 has index 1"),
    ([(5, [0])], None, "gate 0 has index 5"),
    ([(-1, [])], None, "gate 0 has index -1"),
    ([(2, [2])], None, "gate 0 has writer 2 (must be an earlier task, 0 .. 1)"),
    ([(2, [0]), (3, [-1])], None, "gate 1 has writer -1"),
    ([], -1, "bad gate count -1"),
])
def test_malformed_gates_are_usage_errors(rtlib, gates, ngates, words):
    out = gsim(rtlib, [T()] * 4, [(VECTOR, 1)], gates=gates, ngates=ngates)
    assert out.rc == ERR_USAGE and words in out.err, out.err


def test_writers_without_an_array_is_a_usage_error(rtlib):
    out = gsim(rtlib, [T()] * 4, [(VECTOR, 1)], gates=[(2, [0])], null_writers=True)
    assert out.rc == ERR_USAGE and "no array" in out.err
    assert gsim(rtlib, [T()] * 4, [(VECTOR, 1)], gates=[(2, [])], null_writers=True).rc == OK


def test_a_large_gated_graph(rtlib):
    """10^5 tasks, a gate every 1000 tasks on a few earlier writers, every loop."""
    n = 100_000
    tasks = many = [T(kernel=k % 2, dispatcher=k % 4, stream=k % 3 if k % 5 == 0 else -1,
               preds=tuple({k - 1 - (k * 7919) % min(k, 50), k // 2}) if k else ())
             for k in range(n)]
    gates = [(g, [g - 1 - (g * 31) % 200, g // 3]) for g in range(1000, n, 1000)]
    m = Machine(cube=8, vector=16, dispatch_ns=3, completion_ns=2)
    one = [T(kernel=t.kernel, preds=t.preds) for t in tasks]   # one dispatcher, no streams
    for p in (Policy(), Policy(nd=4, nstreams=3), Policy(nd=4, steal=True, nstreams=3),
              Policy(nd=4, nstreams=3, timing=BATCHED, n=8),
              Policy(nd=4, nstreams=3, timing=INTERLEAVED, n=3, window=64)):
        tasks = one if p.nd == 1 else many
        out = gok(rtlib, tasks, [(VECTOR, 20), (CUBE, 45)], m, p, gates)
        s = out.summary
        assert s["tasks"] == n and s["critical_path"] <= s["total_cycles"] <= s["serial_cycles"]
        assert sum(d[0] for d in out.disp) == n
        for g, ws in gates[::10]:
            assert out.results[g].enumerated >= max(out.results[w].finish for w in ws) + 2
        assert gok(rtlib, tasks, [(VECTOR, 20), (CUBE, 45)], m, p, gates).raw == out.raw


# ---- properties --------------------------------------------------------------------------------


@st.composite
def gated(draw, max_tasks=24):
    tasks, costs, m, p = draw(workloads(max_tasks))
    n = len(tasks)
    gates = []
    for _ in range(draw(st.integers(0, 3))):
        g = draw(st.integers(0, n))
        ws = draw(st.lists(st.integers(0, g - 1), max_size=3)) if g else []
        gates.append((g, ws))
    gates.sort(key=lambda x: x[0])
    return tasks, costs, m, p, gates


@settings(max_examples=250 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=gated())
def test_without_a_window_a_gate_is_predecessors_of_every_later_task(rtlib, w):
    tasks, costs, m, p, gates = w
    p = Policy(**{**p.__dict__, "window": 0})
    out = gok(rtlib, tasks, costs, m, p, gates)
    check_gated(tasks, costs, m, p, gates, out)
    extended = [T(t.kernel, t.dispatcher, t.stream,
                  t.preds + tuple(x for g, ws in gates if g <= k for x in ws))
                for k, t in enumerate(tasks)]
    results, summary, disp = reference(extended, costs, m, p)
    cc = cycles_of(m.completion_ns, m.clock)
    assert out.results == [r._replace(enumerated=gate_open(gates, k, results, cc))
                           for k, r in enumerate(results)]
    assert out.summary == summary
    assert out.disp == disp
    assert gok(rtlib, tasks, costs, m, p, gates).raw == out.raw


@settings(max_examples=250 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=gated())
def test_gates_keep_the_invariants_under_every_window(rtlib, w):
    tasks, costs, m, p, gates = w
    out = gok(rtlib, tasks, costs, m, p, gates)
    check_gated(tasks, costs, m, p, gates, out)
    assert gok(rtlib, tasks, costs, m, p, gates).raw == out.raw
    if not gates:
        assert out.raw == ok_plain(rtlib, tasks, costs, m, p).raw


@settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=gated(max_tasks=200))
def test_larger_gated_workloads_keep_the_invariants(rtlib, w):
    tasks, costs, m, p, gates = w
    out = gok(rtlib, tasks, costs, m, p, gates)
    check_gated(tasks, costs, m, p, gates, out)


# ---- through the runtime: the log finds the writers ------------------------------------------


class ModelRun:
    """A runtime with the cycle model and the trace on; tasks of harness kernel K_RECORD whose
    `kernel` index picks their model cost."""

    def __init__(self, L, workers, costs, p: Policy = DEFAULT_POLICY, m: Machine = M, ntensors=2):
        self.L = L
        self.r = Runtime(L, workers, ntensors)
        ffi, lib = L.ffi, L.lib
        mach = ffi.new("wsp_machine *", {"clock_ghz": m.clock, "dispatchers": m.dispatchers,
                                         "cube_cores": m.cube, "vector_cores": m.vector,
                                         "dispatch_ns": m.dispatch_ns,
                                         "completion_ns": m.completion_ns})
        pol = ffi.new("wsp_policy *", {"ndispatchers": p.nd, "steal": int(p.steal),
                                       "nstreams": p.nstreams, "timing": p.timing,
                                       "timing_n": p.n, "rate_per_ms": p.rate,
                                       "window": p.window})
        kc = ffi.new("wsp_kcost[]", [{"unit": u, "cycles": c} for u, c in costs])
        assert lib.wsp_sim_enable(self.r.rt, mach, pol, kc, len(costs)) == OK
        assert lib.wsp_trace_enable(self.r.rt, 1) == OK
        self.n = 0

    def begin(self, window=0, shapes=None):
        self.n = 0
        self.r.lib.harness_reset(1000)
        assert self.r.begin(window) == OK
        for tensor, dims in (shapes or {}).items():
            d = self.L.ffi.new("int64_t[]", list(dims))
            assert self.r.lib.wsp_sim_shape(self.r.rt, tensor, len(dims), d) == OK

    def task(self, kernel, accesses, spin_ns=0, dispatcher=0):
        self.r.task.dispatcher = dispatcher
        assert self.r.submit(self.n, accesses, spin_ns=spin_ns, kernel_index=kernel) == OK
        self.n += 1

    def await_(self, tensor, box):
        assert self.r.await_(tensor, box) == OK

    def end(self):
        ffi, lib = self.L.ffi, self.L.lib
        assert self.r.wait() == OK, self.r.error()
        n = lib.wsp_trace_count(self.r.rt)
        res = ffi.new("wsp_simresult[]", max(n, 1))
        assert lib.wsp_sim_read(self.r.rt, 0, n, res) == n == self.n
        summ = ffi.new("wsp_simsummary *")
        assert lib.wsp_sim_summary(self.r.rt, summ) == OK
        results = [R(r.enumerated, r.ready, r.issue, r.start, r.finish, r.core, r.unit,
                     r.dispatcher, r.group) for r in (res[k] for k in range(n))]
        raw = bytes(ffi.buffer(res, ffi.sizeof("wsp_simresult") * n)) + bytes(ffi.buffer(summ))
        return results, summ, raw

    def free(self):
        self.r.free()


COSTS = [(VECTOR, 10), (VECTOR, 500), (VECTOR, 50), (VECTOR, 20)]
CC = 5


def expect_gates(res, gates):
    """enumerated of each task with no window: when every gate at or before it opened."""
    return [gate_open(gates, k, res, CC) for k in range(len(res))]


def router_program(mr: ModelRun, spin_ns=0):
    """Tensor 0 (32 elements, tiles of 4): 0 writes tile 0 (slow), 1 writes tile 1, 2 reads
    tile 0 and writes tensor 1; awaits after them. Returns the expected gates."""
    mr.task(1, [(0, WRITE, [(0, 4)])], spin_ns=spin_ns)
    mr.task(2, [(0, WRITE, [(4, 8)])])
    mr.task(3, [(0, READ, [(0, 4)]), (1, WRITE, [(0, 4)])])
    mr.await_(0, [(5, 6)])            # element 5: tile 1, writer 1
    mr.task(0, [(1, WRITE, [(4, 8)])])
    mr.await_(0, [(2, 6)])            # tiles 0 and 1: writers 0 and 1 (1 is gated already)
    mr.task(0, [(1, WRITE, [(8, 12)])])
    mr.await_(0, [(16, 20)])          # nobody wrote it: no gate
    mr.await_(0, [(0, 4)])            # a reader (2) is no writer; 0 is gated already
    mr.task(0, [(1, WRITE, [(12, 16)])])
    mr.await_(1, [(0, 1)])            # tensor 1, written by 2
    mr.task(0, [(1, WRITE, [(16, 20)])])
    mr.task(0, [(0, READ, [(4, 8)]), (1, WRITE, [(20, 24)])])
    return [(3, [1]), (4, [0, 1]), (6, [2])]


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "hashed"])
def test_the_log_gates_on_exactly_the_writers_of_the_awaited_box(rtlib, dense):
    mr = ModelRun(rtlib, 2, COSTS)
    try:
        mr.begin(shapes={0: [32], 1: [32]} if dense else None)
        gates = router_program(mr)
        res, summ, _ = mr.end()
        assert [r.enumerated for r in res] == expect_gates(res, gates)
        assert res[3].enumerated == res[1].finish + CC < res[0].finish
        assert res[4].enumerated == res[0].finish + CC
        assert res[6].enumerated == res[2].finish + CC
        tasks = [T(kernel=k) for k in (1, 2, 3, 0, 0, 0, 0, 0)]
        tasks[2] = T(kernel=3, preds=(0,))
        tasks[7] = T(kernel=0, preds=(1,))
        out = gok(rtlib, tasks, COSTS, M, Policy(), gates)
        assert res == out.results and summ.critical_path == out.summary["critical_path"]
    finally:
        mr.free()


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "hashed"])
def test_a_box_over_several_tiles_of_a_matrix(rtlib, dense):
    """An 8x8 tensor in 2x2 tiles: the awaited box [1, 5) x [1, 3) overlaps tiles (0..2, 0..1)."""
    mr = ModelRun(rtlib, 1, [(VECTOR, 10)] + [(VECTOR, 100 + 10 * i) for i in range(1, 8)])
    try:
        mr.begin(shapes={0: [8, 8]} if dense else None)
        tiles = [(0, 0), (2, 1), (1, 1), (3, 0), (0, 2), (2, 0)]   # (row tile, col tile)
        for i, (a, b) in enumerate(tiles):
            mr.task(i + 1, [(0, WRITE, [(2 * a, 2 * a + 2), (2 * b, 2 * b + 2)])])
        mr.await_(0, [(1, 5), (1, 3)])
        mr.task(0, [(1, WRITE, [(0, 1)])])
        mr.await_(0, [(0, 8), (0, 8)])   # everything: hashed, this scans the table
        mr.task(0, [(1, WRITE, [(1, 2)])])
        res, _, _ = mr.end()
        inside = [i for i, (a, b) in enumerate(tiles) if a <= 2 and b <= 1]
        assert inside == [0, 1, 2, 5]
        assert [r.enumerated for r in res] == expect_gates(res, [(6, inside), (7, range(6))])
    finally:
        mr.free()


@pytest.mark.parametrize("shapes", [None, {0: [32], 1: [32]}], ids=["hashed", "dense"])
def test_a_whole_tensor_record_gates_on_its_last_writer(rtlib, shapes):
    """Boxes that break the tiling: the tensor has one record, its writer is the gate
    (conservative: it waited for everything before it), whether the tiles it had were in the
    hash table or the dense one."""
    mr = ModelRun(rtlib, 2, COSTS)
    try:
        mr.begin(shapes=shapes)
        mr.task(1, [(0, WRITE, [(0, 4)])])
        mr.task(2, [(0, WRITE, [(2, 7)])])   # breaks the tiling: waits for 0, is the writer
        mr.task(0, [(1, WRITE, [(0, 4)])])
        mr.await_(0, [(20, 21)])
        mr.task(0, [(1, WRITE, [(4, 8)])])
        res, _, _ = mr.end()
        assert res[1].ready == res[0].finish + CC
        assert [r.enumerated for r in res] == expect_gates(res, [(3, [1])])
    finally:
        mr.free()


def test_awaits_with_a_window_and_several_dispatchers(rtlib):
    p = Policy(nd=3, window=3)
    mr = ModelRun(rtlib, 2, COSTS, p)
    try:
        mr.begin(window=3, shapes={0: [32], 1: [32]})
        gates = router_program(mr)
        res, _, _ = mr.end()
        tasks = [T(kernel=k, dispatcher=i % 3) for i, k in enumerate((1, 2, 3, 0, 0, 0, 0, 0))]
        tasks[2] = T(kernel=3, dispatcher=2, preds=(0,))
        tasks[7] = T(kernel=0, dispatcher=1, preds=(1,))
        out = gok(rtlib, tasks, COSTS, M, p, gates)
        check_gated(tasks, COSTS, M, p, gates, out)
        assert res == out.results
    finally:
        mr.free()


def test_results_are_bit_identical_across_workers_and_runs(rtlib):
    """The real router is slow (its await blocks the enumerator for real): the model sees none
    of the host's timing."""
    raws = []
    for workers in (1, 2, 4):
        for p in (Policy(), Policy(nd=2, steal=True), Policy(nd=2, timing=BATCHED, n=2)):
            mr = ModelRun(rtlib, workers, COSTS, p)
            try:
                for run in range(2):
                    mr.begin(shapes={0: [32]} if run else None)   # dense, then hashed
                    for i in range(3):
                        router_program(mr, spin_ns=2_000_000 if i == 0 else 0)
                    raws.append((p, mr.end()[2]))
            finally:
                mr.free()
    for p in {p for p, _ in raws}:
        mine = [raw for q, raw in raws if q == p]
        assert len(mine) == 6 and all(raw == mine[0] for raw in mine)


# ---- through ptowsp: a router drives ragged expert tasks --------------------------------------

ROUTED = """\
    module routed
    sym T
    input  X: f32[T, 64]
    scratch counts: i32[T]
    output Y: f32[T, 8, 64]
    kernel count(x: In[Tile[1, 64, f32]], c: Out[Tile[1, 1, i32]]) extern c \"\"\"
        int n = 0;
        for (int j = 0; j < 64; j++) n += x.data[j] > 0;
        c.data[0] = n % 8;
    \"\"\"
    kernel put(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 2) }
    axis tokens = DenseDyn(T)
    axis pos = Ragged(tokens, counts)
    workload w() {
        for t in P(tokens) { count[t](x = X[t], c = counts[t : t + 1]) }
        for t in P(tokens) {
            for j in P(pos[t]) { put[t, j](x = X[t], y = Y[t, j]) }
        }
    }
    schedule main = w()
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_compiled_router_program_starts_experts_after_their_router(tmp_path, monkeypatch,
                                                                     workers):
    import ptowsp

    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    prog = ptowsp.parse(textwrap.dedent(ROUTED), "t.wsp").compile(target="cpu_sim")
    t = 5
    rng = np.random.default_rng(3)
    x = (rng.random((t, 64)) - 0.4).astype(np.float32)
    counts = (x > 0).sum(1) % 8
    assert counts.sum() > 0
    prog.run(bind={"T": t}, trace=True, workers=workers, X=x)
    tr = prog.trace
    assert tr.sim is not None
    names = np.array([tr.kernel_names[k] for k in tr.events["kernel"]])
    token = tr.events["coords"][:, 0]
    sim = tr.sim
    router_finish = {int(token[i]): int(sim["finish"][i]) for i in np.flatnonzero(names == "count")}
    puts = np.flatnonzero(names == "put")
    assert len(puts) == counts.sum()
    for i in puts:
        assert sim["start"][i] > router_finish[int(token[i])]
        assert sim["enumerated"][i] >= router_finish[int(token[i])]
    # the routers were enumerated before any await: at 0
    assert (sim["enumerated"][names == "count"] == 0).all()
    prog.run(bind={"T": t}, trace=True, workers=3 - workers, X=x)
    assert prog.trace.sim.tobytes() == sim.tobytes()
