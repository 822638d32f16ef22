"""The cycle model (runtime_c/sim.c, wsp_sim_replay): hand-computed cases, each timing policy,
streams, the task window, work stealing, every validation error, and hypothesis properties over
random graphs and policies: exact agreement with a small brute-force Python model of the same
rules (reference() below), the invariants the model promises, determinism and monotonicity."""

from __future__ import annotations

import os
from collections import namedtuple
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ERR_USAGE, OK

pytestmark = pytest.mark.cc

# WSP_SIM_EXAMPLES=N multiplies the hypothesis examples (a longer soak run).
SCALE = max(1, int(os.environ.get("WSP_SIM_EXAMPLES", "1")))

IMMEDIATE, BATCHED, INTERLEAVED, RATE_LIMIT = 0, 1, 2, 3
VECTOR, CUBE = 0, 1


@dataclass(frozen=True)
class Machine:
    clock: float = 1.0           # GHz: 1.0 makes ns and cycles the same
    cube: int = 1
    vector: int = 1
    dispatch_ns: float = 0.0
    completion_ns: float = 0.0
    dispatchers: int = 1


@dataclass(frozen=True)
class Policy:
    nd: int = 1
    steal: bool = False
    nstreams: int = 0
    timing: int = IMMEDIATE
    n: int = 1
    rate: float = 0.0
    window: int = 0
    first: int = 0  # interleaved(n, priority = first)


# the helpers' default arguments (frozen, so one instance serves every call)
DEFAULT_MACHINE = Machine()
DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class T:
    kernel: int = 0
    dispatcher: int = 0
    stream: int = -1
    preds: tuple = field(default_factory=tuple)


R = namedtuple("R", "enumerated ready issue start finish core unit dispatcher group")
SUMMARY_FIELDS = ("tasks", "total_cycles", "critical_path", "work", "serial_cycles", "stolen",
                  "groups")


@dataclass
class Out:
    rc: int
    err: str
    results: list
    summary: dict
    disp: list            # (tasks, stolen, busy_cycles) per dispatcher
    raw: bytes = b""      # results + summary + disp as bytes, for determinism checks


def replay_inputs(ffi, tasks, costs, m: Machine, p: Policy):
    """The machine, policy, kernel costs, tasks and flat predecessor arrays of a replay."""
    mach = ffi.new("wsp_machine *", {"clock_ghz": m.clock, "dispatchers": m.dispatchers,
                                     "cube_cores": m.cube, "vector_cores": m.vector,
                                     "dispatch_ns": m.dispatch_ns,
                                     "completion_ns": m.completion_ns})
    pol = ffi.new("wsp_policy *", {"ndispatchers": p.nd, "steal": int(p.steal),
                                   "nstreams": p.nstreams, "timing": p.timing, "timing_n": p.n,
                                   "rate_per_ms": p.rate, "window": p.window,
                                   "timing_first": p.first})
    kc = ffi.new("wsp_kcost[]", [{"unit": u, "cycles": c} for u, c in costs] or 1)
    tk = ffi.new("wsp_simtask[]", [{"kernel": t.kernel, "dispatcher": t.dispatcher,
                                    "stream": t.stream, "npreds": len(t.preds)}
                                   for t in tasks] or 1)
    preds = ffi.new("int64_t[]", [j for t in tasks for j in t.preds] or 1)
    return mach, pol, kc, tk, preds


def replay_outputs(ffi, rc, err, ntasks, res, summ, disp, nd) -> Out:
    """What a replay wrote (results and dispatcher table only when asked for: not NULL)."""
    out = Out(rc, ffi.string(err).decode(), [], {}, [])
    if rc != OK:
        return out
    if res != ffi.NULL:
        out.results = [R(r.enumerated, r.ready, r.issue, r.start, r.finish, r.core, r.unit,
                         r.dispatcher, r.group) for r in (res[k] for k in range(ntasks))]
        out.raw += bytes(ffi.buffer(res, ffi.sizeof("wsp_simresult") * ntasks))
    out.summary = {f: (tuple(getattr(summ, f)) if f == "work" else getattr(summ, f))
                   for f in SUMMARY_FIELDS}
    out.raw += bytes(ffi.buffer(summ))
    if disp != ffi.NULL:
        out.disp = [(disp[d].tasks, disp[d].stolen, disp[d].busy_cycles) for d in range(nd)]
        out.raw += bytes(ffi.buffer(disp, ffi.sizeof("wsp_simdisp") * nd))
    return out


def sim(L, tasks, costs, m: Machine = DEFAULT_MACHINE, p: Policy = DEFAULT_POLICY, *,
        with_results=True, with_disp=True, nkernels=None, ntasks=None) -> Out:
    """Calls wsp_sim_replay. costs: [(unit, cycles)]."""
    ffi, lib = L.ffi, L.lib
    mach, pol, kc, tk, preds = replay_inputs(ffi, tasks, costs, m, p)
    n = len(tasks) if ntasks is None else ntasks
    res = ffi.new("wsp_simresult[]", max(1, len(tasks))) if with_results else ffi.NULL
    summ = ffi.new("wsp_simsummary *")
    disp = ffi.new("wsp_simdisp[]", max(1, p.nd)) if with_disp else ffi.NULL
    err = ffi.new("char[]", 256)
    rc = lib.wsp_sim_replay(mach, pol, kc, len(costs) if nkernels is None else nkernels, n, tk,
                            preds, res, summ, disp, err, 256)
    return replay_outputs(ffi, rc, err, len(tasks), res, summ, disp, p.nd)


def ok(L, tasks, costs, m=DEFAULT_MACHINE, p=DEFAULT_POLICY, **kw) -> Out:
    out = sim(L, tasks, costs, m, p, **kw)
    assert out.rc == OK, out.err
    return out


# ---- a brute-force model of the same rules -------------------------------------------------------


def cycles_of(ns: float, clock: float) -> int:
    x = ns * clock
    i = int(x)
    return i + 1 if x - i >= 0.5 else i


def ceil_of(x: float) -> int:
    i = int(x)
    return i + 1 if i < x else i


def reference(tasks, costs, m: Machine, p: Policy):
    """The model of sim.c's header comment, evaluated instant by instant with plain lists
    (quadratic and slow; small graphs only). Returns (results, summary, disp)."""
    N = len(tasks)
    dc, cc = cycles_of(m.dispatch_ns, m.clock), cycles_of(m.completion_ns, m.clock)
    spacing = ceil_of(m.clock * 1e6 / p.rate) if p.timing == RATE_LIMIT else 0
    unit = [costs[t.kernel][0] for t in tasks]
    cyc = [costs[t.kernel][1] for t in tasks]
    ncls = p.nstreams + 1 if p.timing == INTERLEAVED and p.nstreams > 0 else 1
    cls = [0 if ncls == 1 else (t.stream if t.stream >= 0 else p.nstreams) for t in tasks]
    deps = []
    last = {}
    for k, t in enumerate(tasks):
        d = list(t.preds)
        if t.stream >= 0:
            if t.stream in last:
                d.append(last[t.stream])
            last[t.stream] = k
        deps.append(d)
    needed = {j for d in deps for j in d}   # a completion without dependents changes nothing
    busy_core = {VECTOR: [False] * min(m.vector, max(N, 1)), CUBE: [False] * min(m.cube, max(N, 1))}
    enum, ready, issue, finish = [None] * N, [None] * N, [None] * N, [None] * N
    core, issuer, group = [None] * N, [None] * N, [-1] * N
    processed = [False] * N
    inq, grp = set(), [[] for _ in range(p.nd)]
    busy_until, cur, run, gid = [0] * p.nd, [0] * p.nd, [0] * p.nd, [0] * p.nd
    dtasks, dstolen = [0] * p.nd, [0] * p.nd
    st_ = {"groups": 0, "stolen": 0, "next_allowed": None, "next_enum": 0, "unfinished": 0}

    def key(k):
        return (ready[k], k)

    def queue(d, c=None):
        return sorted((k for k in inq if tasks[k].dispatcher == d and (c is None or cls[k] == c)),
                      key=key)

    def free(u):
        return not all(busy_core[u])

    def first_issuable(lst):
        return next((k for k in lst if free(unit[k])), None)

    def interleaved_pick(v):
        if run[v] < p.n:
            k = first_issuable(queue(v, cur[v]))
            if k is not None:
                return (k, "q", cur[v], False)
        for i in range(1, ncls + 1):
            c = (cur[v] + i) % ncls
            k = first_issuable(queue(v, c))
            if k is not None:
                return (k, "q", c, True)
        return None

    def form_group(d, count):
        q = queue(d)[:count]
        grp[d] = q
        inq.difference_update(q)
        gid[d] = st_["groups"]
        st_["groups"] += 1

    def own_pick(d):
        if p.timing == BATCHED:
            if not grp[d]:
                if len(queue(d)) < p.n:
                    return None
                form_group(d, p.n)
            k = first_issuable(grp[d])
            return None if k is None else (k, "g", 0, False)
        if ncls > 1:
            return interleaved_pick(d)
        k = first_issuable(queue(d))
        return None if k is None else (k, "q", 0, False)

    def steal_pick(d):
        for i in range(1, p.nd):
            v = (d + i) % p.nd
            if not queue(v):
                continue
            pk = interleaved_pick(v) if ncls > 1 else (
                (lambda k: None if k is None else (k, "q", 0, False))(first_issuable(queue(v))))
            if pk is not None:
                return pk
        return None

    def do_issue(d, pk, t, stolen):
        k, src, c, sw = pk
        if src == "g":
            grp[d].remove(k)
            group[k] = gid[d]
        else:
            inq.remove(k)
            if p.timing == BATCHED:
                group[k] = st_["groups"]
                st_["groups"] += 1
        u = unit[k]
        ci = busy_core[u].index(False)
        busy_core[u][ci] = True
        core[k], issue[k], issuer[k] = ci, t, d
        finish[k] = t + dc + cyc[k]
        busy_until[d] = t + dc
        dtasks[d] += 1
        if stolen:
            dstolen[d] += 1
            st_["stolen"] += 1
        elif ncls > 1:
            if sw:
                cur[d], run[d] = c, 1
            else:
                run[d] += 1
        st_["next_allowed"] = t + spacing

    def rate_blocked(t):
        return (p.timing == RATE_LIMIT and st_["next_allowed"] is not None
                and t < st_["next_allowed"])

    def phase(t):
        while True:
            picks = [(key(pk[0]), d, pk) for d in range(p.nd)
                     if busy_until[d] <= t and (queue(d) or grp[d])
                     for pk in [own_pick(d)] if pk is not None]
            if not picks:
                break
            if rate_blocked(t):
                return
            _, d, pk = min(picks)
            do_issue(d, pk, t, False)
        if p.steal:
            for d in range(p.nd):
                while busy_until[d] <= t and not grp[d]:
                    pk = steal_pick(d)
                    if pk is None:
                        break
                    if rate_blocked(t):
                        return
                    do_issue(d, pk, t, True)

    def enumerate_(t):
        while st_["next_enum"] < N and (p.window == 0 or st_["unfinished"] < p.window):
            k = st_["next_enum"]
            st_["next_enum"] += 1
            st_["unfinished"] += 1
            enum[k] = t

    t = 0
    enumerate_(0)
    while True:
        while True:  # rounds of one instant
            for k in range(N):
                if issue[k] is not None and not processed[k] and finish[k] <= t:
                    processed[k] = True
                    busy_core[unit[k]][core[k]] = False
                    st_["unfinished"] -= 1
            enumerate_(t)
            for k in range(N):
                if enum[k] is not None and ready[k] is None and all(
                        processed[j] and finish[j] + cc <= t for j in deps[k]):
                    ready[k] = t
                    inq.add(k)
            phase(t)
            if not any(issue[k] is not None and not processed[k] and finish[k] <= t
                       for k in range(N)):
                break
        later = [finish[k] for k in range(N) if issue[k] is not None and finish[k] > t]
        later += [finish[k] + cc for k in range(N)
                  if processed[k] and finish[k] + cc > t and k in needed]
        later += [b for b in busy_until if b > t]
        if st_["next_allowed"] is not None and st_["next_allowed"] > t:
            later.append(st_["next_allowed"])
        if later:
            t = min(later)
            continue
        if p.timing == BATCHED and inq:
            for d in range(p.nd):
                if queue(d) and not grp[d]:
                    form_group(d, len(queue(d)))
            phase(t)
            continue
        break
    assert all(processed), "reference model stalled"
    results = [R(enum[k], ready[k], issue[k], issue[k] + dc, finish[k], core[k], unit[k],
                 issuer[k], group[k]) for k in range(N)]
    cp = [0] * N
    for k in range(N):
        cp[k] = max([0] + [cp[j] + cc for j in deps[k]]) + dc + cyc[k]
    summary = {"tasks": N, "total_cycles": max(finish, default=0),
               "critical_path": max(cp, default=0),
               "work": (sum(c for u, c in zip(unit, cyc) if u == VECTOR),
                        sum(c for u, c in zip(unit, cyc) if u == CUBE)),
               "serial_cycles": sum(dc + c + cc for c in cyc), "stolen": st_["stolen"],
               "groups": st_["groups"]}
    disp = [(dtasks[d], dstolen[d], dtasks[d] * dc) for d in range(p.nd)]
    return results, summary, disp


# ---- hand-computed cases -----------------------------------------------------------------------


def test_one_task(rtlib):
    out = ok(rtlib, [T()], [(CUBE, 10)], Machine(dispatch_ns=3, completion_ns=5))
    assert out.results == [R(0, 0, 0, 3, 13, 0, CUBE, 0, -1)]
    assert out.summary == {"tasks": 1, "total_cycles": 13, "critical_path": 13, "work": (0, 10),
                           "serial_cycles": 18, "stolen": 0, "groups": 0}
    assert out.disp == [(1, 0, 3)]


def test_no_tasks(rtlib):
    out = ok(rtlib, [], [], Machine(), Policy(nd=3))
    assert out.summary == {"tasks": 0, "total_cycles": 0, "critical_path": 0, "work": (0, 0),
                           "serial_cycles": 0, "stolen": 0, "groups": 0}
    assert out.disp == [(0, 0, 0)] * 3


def test_ns_are_converted_with_the_clock(rtlib):
    # 1.5 GHz: dispatch 3 ns = 4.5 -> 5 cycles (half away from zero), completion 1 ns = 1.5 -> 2
    out = ok(rtlib, [T(), T(preds=(0,))], [(VECTOR, 10)],
             Machine(clock=1.5, dispatch_ns=3, completion_ns=1))
    assert [(r.issue, r.start, r.finish) for r in out.results] == [(0, 5, 15), (17, 22, 32)]


def test_chain_with_completion_latency(rtlib):
    tasks = [T(), T(preds=(0,)), T(preds=(1,))]
    out = ok(rtlib, tasks, [(VECTOR, 10)], Machine(dispatch_ns=2, completion_ns=5))
    assert [(r.ready, r.issue, r.start, r.finish) for r in out.results] == [
        (0, 0, 2, 12), (17, 17, 19, 29), (34, 34, 36, 46)]
    assert out.summary["critical_path"] == out.summary["total_cycles"] == 46
    assert out.summary["serial_cycles"] == 3 * 17


def test_two_independent_tasks_on_one_core_and_on_two(rtlib):
    one = ok(rtlib, [T(), T()], [(CUBE, 10)], Machine(cube=1))
    assert [(r.start, r.finish, r.core) for r in one.results] == [(0, 10, 0), (10, 20, 0)]
    assert one.summary["total_cycles"] == 20
    two = ok(rtlib, [T(), T()], [(CUBE, 10)], Machine(cube=2))
    assert [(r.start, r.finish, r.core) for r in two.results] == [(0, 10, 0), (0, 10, 1)]
    assert two.summary["total_cycles"] == 10


def test_dispatch_latency_serialises_one_dispatcher(rtlib):
    tasks = [T(dispatcher=0)] * 3
    out = ok(rtlib, tasks, [(VECTOR, 1)], Machine(vector=3, dispatch_ns=4))
    assert [(r.issue, r.start, r.finish) for r in out.results] == [(0, 4, 5), (4, 8, 9),
                                                                    (8, 12, 13)]
    assert out.disp == [(3, 0, 12)]
    spread = ok(rtlib, [T(dispatcher=d) for d in range(3)], [(VECTOR, 1)],
                Machine(vector=3, dispatch_ns=4), Policy(nd=3))
    assert [r.finish for r in spread.results] == [5, 5, 5]
    assert spread.disp == [(1, 0, 4)] * 3


def test_a_core_is_reserved_from_issue_to_finish(rtlib):
    # two dispatchers, one core: the second task is issued only when the first has finished
    out = ok(rtlib, [T(dispatcher=0), T(dispatcher=1)], [(VECTOR, 10)],
             Machine(vector=1, dispatch_ns=3), Policy(nd=2))
    assert [(r.issue, r.finish) for r in out.results] == [(0, 13), (13, 26)]


def test_units_have_their_own_cores_and_a_blocked_unit_does_not_block_the_queue(rtlib):
    # cube task 0 holds the only cube core; cube task 1 waits, vector task 2 goes first
    tasks = [T(kernel=0), T(kernel=0), T(kernel=1)]
    out = ok(rtlib, tasks, [(CUBE, 100), (VECTOR, 5)], Machine(cube=1, vector=1, dispatch_ns=1))
    r = out.results
    assert (r[0].issue, r[2].issue, r[1].issue) == (0, 1, 101)
    assert (r[0].unit, r[1].unit, r[2].unit) == (CUBE, CUBE, VECTOR)
    assert out.summary["work"] == (5, 200)


def test_zero_latencies_and_zero_cost_tasks(rtlib):
    tasks = [T(), T(preds=(0,)), T(preds=(1, 0, 1)), T()]
    out = ok(rtlib, tasks, [(VECTOR, 0)])
    assert all(r[:5] == (0, 0, 0, 0, 0) for r in out.results)
    assert out.summary["total_cycles"] == 0


# ---- timing policies -----------------------------------------------------------------------------


def test_batched_groups_of_n_and_the_partial_last_group(rtlib):
    tasks = [T()] * 5
    out = ok(rtlib, tasks, [(VECTOR, 10)], Machine(vector=5, dispatch_ns=1),
             Policy(timing=BATCHED, n=2))
    r = out.results
    assert [x.group for x in r] == [0, 0, 1, 1, 2]
    assert [x.issue for x in r[:4]] == [0, 1, 2, 3]
    # the fifth waits for a second companion until nothing else can happen: the last finish
    assert r[4].issue == r[3].finish == 14
    assert out.summary["groups"] == 3 and out.summary["total_cycles"] == 25


def test_batched_dependency_chain_does_not_deadlock(rtlib):
    tasks = [T(), T(preds=(0,)), T(preds=(1,))]
    out = ok(rtlib, tasks, [(VECTOR, 10)], Machine(completion_ns=2),
             Policy(timing=BATCHED, n=2))
    assert [r.group for r in out.results] == [0, 1, 2]
    assert [r.issue for r in out.results] == [0, 12, 24]


def test_batched_group_waits_for_n_ready_tasks(rtlib):
    # 0 and 2 are ready at once and form a group of 2; 1 (after 0) goes alone at the end
    tasks = [T(), T(preds=(0,)), T()]
    out = ok(rtlib, tasks, [(VECTOR, 10)], Machine(vector=2), Policy(timing=BATCHED, n=2))
    assert [r.group for r in out.results] == [0, 1, 0]
    assert [r.issue for r in out.results] == [0, 10, 0]


def test_interleaved_alternates_across_two_streams(rtlib):
    tasks = [T(stream=s) for s in (0, 0, 0, 1, 1, 1)]
    m = Machine(vector=2, dispatch_ns=1)
    inter = ok(rtlib, tasks, [(VECTOR, 0)], m, Policy(nstreams=2, timing=INTERLEAVED, n=2))
    order = [k for k, _ in sorted(enumerate(inter.results), key=lambda kv: kv[1].issue)]
    assert order == [0, 1, 3, 4, 2, 5]
    imm = ok(rtlib, tasks, [(VECTOR, 0)], m, Policy(nstreams=2, timing=IMMEDIATE))
    order = [k for k, _ in sorted(enumerate(imm.results), key=lambda kv: kv[1].issue)]
    assert order == [0, 3, 1, 4, 2, 5]


def test_interleaved_priority_stream_runs_first(rtlib):
    tasks = [T(stream=s) for s in (0, 0, 0, 1, 1, 1)]
    m = Machine(vector=2, dispatch_ns=1)
    out = ok(rtlib, tasks, [(VECTOR, 0)], m, Policy(nstreams=2, timing=INTERLEAVED, n=2, first=1))
    order = [k for k, _ in sorted(enumerate(out.results), key=lambda kv: kv[1].issue)]
    assert order == [3, 4, 0, 1, 5, 2]


def test_interleaved_without_streams_is_immediate(rtlib):
    tasks = [T(dispatcher=k % 2, preds=(k - 3,) if k >= 3 else ()) for k in range(12)]
    m = Machine(vector=2, dispatch_ns=2, completion_ns=3)
    a = ok(rtlib, tasks, [(VECTOR, 7)], m, Policy(nd=2, timing=INTERLEAVED, n=2))
    b = ok(rtlib, tasks, [(VECTOR, 7)], m, Policy(nd=2, timing=IMMEDIATE))
    assert a.raw == b.raw


@pytest.mark.parametrize("rate,spacing", [(1e5, 10), (3e5, 4), (2.5e5, 4)])
def test_rate_limit_spaces_issues_over_all_dispatchers(rtlib, rate, spacing):
    tasks = [T(dispatcher=k % 4) for k in range(8)]
    out = ok(rtlib, tasks, [(VECTOR, 3)], Machine(vector=8), Policy(nd=4, timing=RATE_LIMIT,
                                                                      rate=rate))
    assert sorted(r.issue for r in out.results) == [spacing * i for i in range(8)]


# ---- streams, window, stealing -------------------------------------------------------------------


def check_streams(tasks, results, cc):
    last = {}
    for k, t in enumerate(tasks):
        if t.stream >= 0:
            if t.stream in last:
                j = last[t.stream]
                assert results[k].ready >= results[j].finish + cc
                assert results[k].start >= results[j].finish
            last[t.stream] = k


def check_window(results, window):
    if window == 0:
        assert all(r.enumerated == 0 for r in results)
        return
    for k, r in enumerate(results):
        assert k == 0 or results[k - 1].enumerated <= r.enumerated
        unfinished = sum(1 for j in range(k) if results[j].finish > r.enumerated)
        assert unfinished < window


def test_streams_never_overlap_and_start_in_enumeration_order(rtlib):
    tasks = [T(dispatcher=k % 3, stream=k % 2) for k in range(10)]
    out = ok(rtlib, tasks, [(VECTOR, 5)], Machine(vector=4, dispatch_ns=1, completion_ns=2),
             Policy(nd=3, nstreams=2))
    check_streams(tasks, out.results, 2)
    for s in (0, 1):
        starts = [r.start for k, r in enumerate(out.results) if k % 2 == s]
        assert starts == sorted(starts)


def test_window_keeps_at_most_n_tasks_unfinished(rtlib):
    tasks = [T(dispatcher=k % 2) for k in range(20)]
    out = ok(rtlib, tasks, [(VECTOR, 10)], Machine(vector=8, dispatch_ns=1),
             Policy(nd=2, window=3))
    check_window(out.results, 3)
    assert max(r.enumerated for r in out.results) > 0
    free = ok(rtlib, tasks, [(VECTOR, 10)], Machine(vector=8, dispatch_ns=1), Policy(nd=2))
    assert free.summary["total_cycles"] < out.summary["total_cycles"]


def test_work_steal_on_a_skewed_assignment(rtlib):
    tasks = [T(dispatcher=0)] * 40
    m = Machine(vector=16, dispatch_ns=10)
    plain = ok(rtlib, tasks, [(VECTOR, 1)], m, Policy(nd=4))
    steal = ok(rtlib, tasks, [(VECTOR, 1)], m, Policy(nd=4, steal=True))
    assert plain.summary["stolen"] == 0 and plain.disp[0] == (40, 0, 400)
    assert steal.summary["stolen"] > 0
    assert steal.summary["total_cycles"] < plain.summary["total_cycles"]
    assert sum(d[1] for d in steal.disp) == steal.summary["stolen"]
    assert sum(d[0] for d in steal.disp) == 40
    assert sum(r.dispatcher != 0 for r in steal.results) == steal.summary["stolen"]


def test_results_and_disp_are_optional(rtlib):
    tasks = [T(dispatcher=k % 2, preds=(k // 2,) if k else ()) for k in range(9)]
    m, p = Machine(dispatch_ns=1, completion_ns=1), Policy(nd=2, steal=True)
    full = ok(rtlib, tasks, [(VECTOR, 4)], m, p)
    bare = ok(rtlib, tasks, [(VECTOR, 4)], m, p, with_results=False, with_disp=False)
    assert bare.summary == full.summary


# ---- validation ----------------------------------------------------------------------------------

BAD = [
    ("ndispatchers", [T()], [(0, 1)], Machine(), Policy(nd=0)),
    ("dispatcher", [T(dispatcher=2)], [(0, 1)], Machine(), Policy(nd=2)),
    ("dispatcher", [T(dispatcher=-1)], [(0, 1)], Machine(), Policy()),
    ("stream", [T(stream=1)], [(0, 1)], Machine(), Policy(nstreams=1)),
    ("stream", [T(stream=0)], [(0, 1)], Machine(), Policy()),
    ("stream", [T(stream=-2)], [(0, 1)], Machine(), Policy(nstreams=1)),
    ("kernel", [T(kernel=1)], [(0, 1)], Machine(), Policy()),
    ("kernel", [T(kernel=-1)], [(0, 1)], Machine(), Policy()),
    ("unit", [T()], [(3, 1)], Machine(), Policy()),
    ("negative cycles", [T()], [(0, -1)], Machine(), Policy()),
    ("cube cores", [T()], [(CUBE, 1)], Machine(cube=0), Policy()),
    ("vector cores", [T()], [(VECTOR, 1)], Machine(vector=0), Policy()),
    ("predecessor", [T(), T(preds=(1,))], [(0, 1)], Machine(), Policy()),
    ("predecessor", [T(), T(preds=(2,))], [(0, 1)], Machine(), Policy()),
    ("predecessor", [T(), T(preds=(-1,))], [(0, 1)], Machine(), Policy()),
    ("clock", [T()], [(0, 1)], Machine(clock=0.0), Policy()),
    ("clock", [T()], [(0, 1)], Machine(clock=-1.0), Policy()),
    ("batched", [T()], [(0, 1)], Machine(), Policy(timing=BATCHED, n=0)),
    ("interleaved", [T()], [(0, 1)], Machine(), Policy(timing=INTERLEAVED, n=0)),
    ("interleaved priority stream 2 is not one of the 2 streams", [T()], [(0, 1)], Machine(),
     Policy(nstreams=2, timing=INTERLEAVED, n=1, first=2)),
    ("interleaved priority stream 1 is not one of the 0 streams", [T()], [(0, 1)], Machine(),
     Policy(timing=IMMEDIATE, first=1)),
    ("rate", [T()], [(0, 1)], Machine(), Policy(timing=RATE_LIMIT, rate=0.0)),
    ("rate", [T()], [(0, 1)], Machine(), Policy(timing=RATE_LIMIT, rate=-3.0)),
    ("timing", [T()], [(0, 1)], Machine(), Policy(timing=7)),
    ("window", [T()], [(0, 1)], Machine(), Policy(window=-1)),
    ("dispatch_ns", [T()], [(0, 1)], Machine(dispatch_ns=-1.0), Policy()),
    ("completion_ns", [T()], [(0, 1)], Machine(completion_ns=float("nan")), Policy()),
    ("overflow", [T()] * 3, [(0, 2 ** 62)], Machine(), Policy()),
]


@pytest.mark.parametrize("what,tasks,costs,m,p", BAD, ids=[b[0] for b in BAD])
def test_malformed_input_is_a_usage_error(rtlib, what, tasks, costs, m, p):
    out = sim(rtlib, tasks, costs, m, p)
    assert out.rc == ERR_USAGE
    assert out.err.startswith("cycle model:")
    assert what.split()[0] in out.err
    if "priority" in what:
        assert out.err == f"cycle model: {what}"


def test_bad_counts_are_usage_errors(rtlib):
    assert sim(rtlib, [T()], [(0, 1)], nkernels=-1).rc == ERR_USAGE
    assert sim(rtlib, [T()], [(0, 1)], ntasks=-1).rc == ERR_USAGE


def test_an_unused_unit_may_have_no_cores(rtlib):
    out = ok(rtlib, [T()], [(VECTOR, 3), (CUBE, 1)], Machine(cube=0))
    assert out.summary["total_cycles"] == 3


# ---- properties ----------------------------------------------------------------------------------


@st.composite
def workloads(draw, max_tasks=24):
    nk = draw(st.integers(1, 3))
    costs = [(draw(st.sampled_from([VECTOR, CUBE])), draw(st.sampled_from([0, 1, 3, 10, 25])))
             for _ in range(nk)]
    nd = draw(st.integers(1, 4))
    nstreams = draw(st.integers(0, 3))
    timing = draw(st.sampled_from([IMMEDIATE, BATCHED, INTERLEAVED, RATE_LIMIT]))
    p = Policy(nd=nd, steal=draw(st.booleans()), nstreams=nstreams, timing=timing,
               n=draw(st.integers(1, 4)),
               rate=draw(st.sampled_from([1e5, 2.5e5, 1e6, 4e6])),
               window=draw(st.sampled_from([0, 0, 1, 2, 5])))
    m = Machine(clock=draw(st.sampled_from([1.0, 1.5, 0.7])), cube=draw(st.integers(1, 3)),
                vector=draw(st.integers(1, 3)), dispatch_ns=draw(st.sampled_from([0, 1, 2.5, 7])),
                completion_ns=draw(st.sampled_from([0, 1, 4, 9.3])))
    n = draw(st.integers(0, max_tasks))
    tasks = []
    for k in range(n):
        preds = tuple(draw(st.lists(st.integers(0, k - 1), max_size=3))) if k else ()
        tasks.append(T(kernel=draw(st.integers(0, nk - 1)), dispatcher=draw(st.integers(0, nd - 1)),
                       stream=draw(st.integers(-1, nstreams - 1)), preds=preds))
    return tasks, costs, m, p


def check_invariants(tasks, costs, m, p, out):
    s, res = out.summary, out.results
    dc, cc = cycles_of(m.dispatch_ns, m.clock), cycles_of(m.completion_ns, m.clock)
    assert s["tasks"] == len(tasks)
    assert s["total_cycles"] == max((r.finish for r in res), default=0)
    assert s["total_cycles"] >= s["critical_path"]
    for u, cores in ((VECTOR, m.vector), (CUBE, m.cube)):
        assert s["total_cycles"] * cores >= s["work"][u]
    if p.timing != RATE_LIMIT:
        assert s["total_cycles"] <= s["serial_cycles"]
    for t, r in zip(tasks, res):
        unit, cycles = costs[t.kernel]
        assert r.unit == unit and 0 <= r.core < (m.cube if unit == CUBE else m.vector)
        assert r.enumerated <= r.ready <= r.issue
        assert r.start == r.issue + dc and r.finish == r.start + cycles
        for j in t.preds:
            assert r.ready >= res[j].finish + cc
        assert (r.group >= 0) == (p.timing == BATCHED)
        if not p.steal:
            assert r.dispatcher == t.dispatcher
    # a core holds one task at a time (from issue to finish), a dispatcher issues dispatch apart
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
    assert sum(d[1] for d in out.disp) == s["stolen"]
    assert sum(r.dispatcher != t.dispatcher for t, r in zip(tasks, res)) == s["stolen"]
    if p.timing == RATE_LIMIT:
        issues = sorted(r.issue for r in res)
        spacing = ceil_of(m.clock * 1e6 / p.rate)
        assert all(b - a >= spacing for a, b in zip(issues, issues[1:]))
    if p.timing == BATCHED:
        members = {}
        for r in res:
            members.setdefault(r.group, []).append(r)
        assert sorted(members) == list(range(s["groups"]))
        for g in members.values():
            assert len(g) <= p.n and len({r.dispatcher for r in g}) == 1
    check_streams(tasks, res, cc)
    check_window(res, p.window)


@settings(max_examples=250 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads())
def test_random_workloads_match_the_reference_and_keep_the_invariants(rtlib, w):
    tasks, costs, m, p = w
    out = ok(rtlib, tasks, costs, m, p)
    check_invariants(tasks, costs, m, p, out)
    results, summary, disp = reference(tasks, costs, m, p)
    assert out.results == results
    assert out.summary == summary
    assert out.disp == disp
    again = ok(rtlib, tasks, costs, m, p)
    assert again.raw == out.raw


@settings(max_examples=60 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(max_tasks=300))
def test_larger_random_workloads_keep_the_invariants(rtlib, w):
    tasks, costs, m, p = w
    out = ok(rtlib, tasks, costs, m, p)
    check_invariants(tasks, costs, m, p, out)
    assert ok(rtlib, tasks, costs, m, p).raw == out.raw


@settings(max_examples=150 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 60), cycles=st.sampled_from([0, 1, 5, 40]),
       unit=st.sampled_from([VECTOR, CUBE]), nd=st.integers(1, 6), cores=st.integers(1, 8),
       dispatch=st.sampled_from([0, 1, 3, 20]), completion=st.sampled_from([0, 2]),
       policy=st.sampled_from(["immediate", "steal", "interleaved", "rate", "window"]))
def test_more_dispatchers_or_cores_are_never_slower(rtlib, n, cycles, unit, nd, cores, dispatch,
                                                    completion, policy):
    """Identical independent tasks, assigned round robin (k % ndispatchers). (Not batched: there
    more dispatchers can mean more partial groups waiting for quiescence.)"""
    def total(ndisp, ncores):
        tasks = [T(dispatcher=k % ndisp) for k in range(n)]
        p = Policy(nd=ndisp, steal=policy == "steal",
                   timing={"interleaved": INTERLEAVED, "rate": RATE_LIMIT}.get(policy, IMMEDIATE),
                   n=2, rate=2e5, window=3 if policy == "window" else 0)
        m = Machine(cube=ncores, vector=ncores, dispatch_ns=dispatch, completion_ns=completion)
        return ok(rtlib, tasks, [(unit, cycles)], m, p).summary["total_cycles"]

    base = total(nd, cores)
    assert total(nd + 1, cores) <= base
    assert total(nd, cores + 1) <= base
    assert total(nd + 2, cores + 3) <= base


def test_a_large_graph(rtlib):
    """10^5 tasks with a few predecessors each: exercises the queues' out-of-order path."""
    n = 100_000
    tasks = [T(kernel=k % 2, dispatcher=k % 4, stream=k % 3 if k % 5 == 0 else -1,
               preds=tuple({k - 1 - (k * 7919) % min(k, 50), k // 2}) if k else ())
             for k in range(n)]
    m = Machine(cube=8, vector=16, dispatch_ns=3, completion_ns=2)
    for p in (Policy(nd=4, steal=True, nstreams=3), Policy(nd=4, nstreams=3, timing=BATCHED, n=8),
              Policy(nd=4, nstreams=3, timing=INTERLEAVED, n=3, window=64)):
        out = ok(rtlib, tasks, [(VECTOR, 20), (CUBE, 45)], m, p, with_results=False)
        s = out.summary
        assert s["tasks"] == n and s["critical_path"] <= s["total_cycles"] <= s["serial_cycles"]
        assert sum(d[0] for d in out.disp) == n
