"""Order scopes in the cycle model (runtime_c/simlog_order.c, sim.c barriers): P.seq,
`sequential` and coroutine contexts (wsp_order_push / next / pop / fork / switch / end) order
the model's tasks exactly as the runtime orders the real ones: every task of a step waits for
every task of the scope's earlier steps (nested scopes' and forked children's tasks included),
through one barrier per step, not an edge per pair of tasks.

Checked through the runtime (the log), against the brute-force all-pairs relation of model.py
replayed with the explicit-graph API (wsp_sim_replay: every task's start and finish equal), on
hand-written and random programs and several policies; results bit-identical across worker
counts, host timings and batching; a step of 10^5 tasks followed by another stays linear; the
runtime itself keeps the order across a step that only forked children; and through ptowsp, a
P.seq loop is a chain in the model while a P loop is not."""

from __future__ import annotations

import random
import resource

import numpy as np
import pytest

from .conftest import K_EMPTY, OK, READ, WRITE, Runtime, call_with_timeout
from .model import ModelTask, must_wait
from .test_sim import (
    BATCHED,
    CUBE,
    DEFAULT_POLICY,
    RATE_LIMIT,
    VECTOR,
    Machine,
    Policy,
    T,
    sim,
)
from .test_sim_gates import ModelRun, gok

pytestmark = pytest.mark.cc

MS = 1_000_000
COSTS = [(VECTOR, 10), (VECTOR, 37), (CUBE, 23), (VECTOR, 0)]
M = Machine(vector=2, cube=1, dispatch_ns=2, completion_ns=5)
DC, CC = 2, 5
POLICIES = [Policy(), Policy(nd=2, steal=True), Policy(nd=2, timing=BATCHED, n=2),
            Policy(window=3), Policy(nd=3, timing=RATE_LIMIT, rate=50_000.0)]


# ---- programs: one list of operations, run by the runtime and by the brute-force model -------------


class Prog:
    """A program of tasks and order operations; contexts are named (ids come from the runtime).
    Tasks are numbered in submission order."""

    def __init__(self):
        self.ops: list[tuple] = []
        self.ntasks = 0

    def task(self, kernel=0, accesses=None, spin_ns=0):
        if accesses is None:  # a box of its own: only order scopes order it
            accesses = [(0, WRITE, [(4 * self.ntasks, 4 * self.ntasks + 4)])]
        self.ops.append(("task", kernel, accesses, spin_ns))
        self.ntasks += 1
        return self.ntasks - 1

    def push(self):
        self.ops.append(("push",))

    def next(self):
        self.ops.append(("next",))

    def pop(self):
        self.ops.append(("pop",))

    def fork(self, name):
        self.ops.append(("fork", name))

    def switch(self, name):
        self.ops.append(("switch", name))

    def end(self, name):
        self.ops.append(("end", name))

    def await_(self, tensor, box):
        self.ops.append(("await", tensor, box))


def execute(r: Runtime, prog: Prog, spin_scale=1, submit=None):
    """Runs the program's operations on runtime r (after wsp_begin). submit(i, kernel, accesses,
    spin_ns) submits a task (default: a K_RECORD task with id i)."""
    ids = {0: 0}
    n = 0
    for op in prog.ops:
        kind = op[0]
        if kind == "task":
            _, kernel, acc, spin = op
            if submit:
                submit(n, kernel, acc, spin * spin_scale)
            else:
                assert r.submit(n, acc, spin_ns=spin * spin_scale, kernel_index=kernel) == OK
            n += 1
        elif kind == "push":
            assert r.push() == OK
        elif kind == "next":
            assert r.next() == OK
        elif kind == "pop":
            assert r.pop() == OK
        elif kind == "fork":
            ids[op[1]] = r.lib.wsp_order_fork(r.rt)
            assert ids[op[1]] > 0
        elif kind == "switch":
            assert r.lib.wsp_order_switch(r.rt, ids[op[1]]) == OK
        elif kind == "end":
            assert r.lib.wsp_order_end(r.rt, ids[op[1]]) == OK
        elif kind == "await":
            assert r.await_(op[1], op[2]) == OK
    return n


def brute(prog: Prog) -> list[ModelTask]:
    """Each task with its accesses and (scope instance, step) of every level of its context's
    stack; a forked context starts with a copy of its parent's stack (steps as at the fork)."""
    stacks = {0: []}
    cur, count, tasks = 0, 0, []
    for op in prog.ops:
        kind = op[0]
        if kind == "task":
            tasks.append(ModelTask(op[2], [(s, step) for s, step in stacks[cur]]))
        elif kind == "push":
            stacks[cur].append([count, 0])
            count += 1
        elif kind == "next":
            stacks[cur][-1][1] += 1
        elif kind == "pop":
            stacks[cur].pop()
        elif kind == "fork":
            stacks[op[1]] = [list(x) for x in stacks[cur]]
        elif kind == "switch":
            cur = op[1]
        elif kind == "end":
            del stacks[op[1]]
            if cur == op[1]:
                cur = 0
    return tasks


def all_pairs(prog: Prog, p: Policy) -> list[T]:
    """The explicit graph: every pair the brute-force model orders (data or order scopes)."""
    mt = brute(prog)
    return [T(kernel=prog_kernels(prog)[k], dispatcher=k % p.nd,
              preds=tuple(j for j in range(k) if must_wait(mt[j], mt[k])))
            for k in range(len(mt))]


def prog_kernels(prog: Prog) -> list[int]:
    return [op[1] for op in prog.ops if op[0] == "task"]


def model_run(L, prog: Prog, p: Policy = DEFAULT_POLICY, workers=2, spin_scale=1,
              grain=None):
    """The program through the runtime with the model on: (results, summary, raw bytes)."""
    mr = ModelRun(L, workers, COSTS, p, M)
    try:
        mr.begin()
        if grain:
            assert mr.r.batch(prog.ntasks, grain) == OK
        mr.n = execute(mr.r, prog, spin_scale)
        return mr.end()
    finally:
        mr.free()


def check_against_all_pairs(L, prog: Prog, p: Policy, **kw):
    res, summ, raw = model_run(L, prog, p, **kw)
    out = sim(L, all_pairs(prog, p), COSTS, M, p)
    assert out.rc == OK, out.err
    for k, (a, b) in enumerate(zip(res, out.results)):
        assert a == b, (k, a, b)
    assert res == out.results
    assert summ.critical_path == out.summary["critical_path"]
    assert summ.total_cycles == out.summary["total_cycles"]
    return res, summ, raw


def ready_after(res, earlier, later):
    """Every task of `later` is ready no earlier than every task of `earlier` finished + cc."""
    last = max(res[a].finish for a in earlier)
    return all(res[b].ready >= last + CC for b in later)


# ---- hand-written programs ---------------------------------------------------------------------


def test_a_seq_loop_is_a_chain_and_a_parallel_loop_is_not(rtlib):
    seq, par = Prog(), Prog()
    seq.push()
    for i in range(8):
        if i:
            seq.next()
        seq.task(1)
        par.task(1)
    seq.pop()
    res, summ, _ = check_against_all_pairs(rtlib, seq, Policy())
    k = COSTS[1][1]
    for i in range(1, 8):
        assert res[i].ready == res[i - 1].finish + CC
        assert res[i].start == res[i].ready + DC
    assert summ.critical_path == summ.total_cycles == 8 * (DC + k) + 7 * CC
    pres, psumm, _ = check_against_all_pairs(rtlib, par, Policy())
    assert psumm.critical_path == DC + k
    assert psumm.total_cycles < summ.total_cycles


def test_a_sequential_block_with_an_empty_step(rtlib):
    """sequential { a * 3; (nothing); b * 2 }: b waits for all of a, across the empty step, and
    the a's run in parallel."""
    prog = Prog()
    prog.push()
    a = [prog.task(kind) for kind in (0, 1, 2)]
    prog.next()
    prog.next()
    b = [prog.task(0), prog.task(3)]
    prog.pop()
    for p in POLICIES:
        res, summ, _ = check_against_all_pairs(rtlib, prog, p)
        assert min(res[x].ready for x in b) == max(res[x].finish for x in a) + CC
        assert all(res[x].ready == 0 for x in a) or p.window
    res, summ, _ = check_against_all_pairs(rtlib, prog, Policy())
    assert summ.critical_path == DC + 37 + CC + DC + 10


def test_nested_seq_scopes_wait_for_the_outer_previous_step(rtlib):
    """for i in P.seq(3) { x[i]; for j in P.seq(2) { for k in P(2) { y[i, j, k] } } }: the inner
    scope's first step waits for the outer's previous step (all of it, nested tasks included),
    its second step for its first."""
    prog = Prog()
    steps = []
    prog.push()
    for i in range(3):
        if i:
            prog.next()
        outer = [prog.task(1)]
        prog.push()
        inner = []
        for j in range(2):
            if j:
                prog.next()
            inner.append([prog.task(0), prog.task(2)])
        prog.pop()
        steps.append((outer, inner))
    prog.pop()
    for p in POLICIES:
        res, _, _ = check_against_all_pairs(rtlib, prog, p)
        for i in range(3):
            outer, inner = steps[i]
            assert ready_after(res, inner[0], inner[1])
            if i:
                prev = steps[i - 1][0] + [t for s in steps[i - 1][1] for t in s]
                assert ready_after(res, prev, outer + inner[0])
        # not more: the outer task of a step does not wait for the inner tasks of its own step
        if not p.window:
            assert res[steps[1][0][0]].ready < res[steps[1][1][0][0]].finish


def test_an_order_scope_inside_a_parallel_loop_orders_only_its_own_steps(rtlib):
    """for b in P(2) { for i in P.seq(3) { t[b, i] } }: two independent chains."""
    prog = Prog()
    chains = []
    for _b in range(2):
        prog.push()
        chain = []
        for i in range(3):
            if i:
                prog.next()
            chain.append(prog.task(1))
        prog.pop()
        chains.append(chain)
    res, summ, _ = check_against_all_pairs(rtlib, prog, Policy(nd=2))
    assert res[chains[1][0]].ready == 0
    assert summ.critical_path == 3 * (DC + 37) + 2 * CC


def coroutine_program(spin=True):
    """for i in P.seq(3): the parent submits a task, forks two children that submit tasks
    (switching back and forth), and waits until they end (test_coroutines' program)."""
    prog = Prog()
    iters = []
    prog.push()
    for i in range(3):
        if i:
            prog.next()
        mine = [prog.task(0, spin_ns=2 * MS if spin else 0)]
        c1, c2 = f"a{i}", f"b{i}"
        prog.fork(c1)
        prog.fork(c2)
        prog.switch(c1)
        mine.append(prog.task(1))
        prog.switch(c2)
        mine.append(prog.task(2, spin_ns=1 * MS if spin else 0))
        prog.switch(c1)
        mine.append(prog.task(3))
        prog.end(c1)  # the current one: context 0 is current again
        mine.append(prog.task(0))
        prog.switch(c2)
        mine.append(prog.task(1))
        prog.switch(0)
        prog.end(c2)
        iters.append(mine)
    prog.pop()
    return prog, iters


def test_forked_childrens_tasks_finish_before_the_parents_next_step(rtlib):
    prog, iters = coroutine_program()
    for p in POLICIES:
        res, _, _ = check_against_all_pairs(rtlib, prog, p)
        for i in range(len(iters) - 1):
            assert ready_after(res, iters[i], iters[i + 1])
        # within a step the parent's and its children's tasks are not ordered
        assert res[iters[0][1]].ready == res[iters[0][0]].ready or p.window


def test_a_childs_own_scopes_and_a_grandchild_inside_the_parents_step(rtlib):
    """test_coroutines' nested program: the child's steps are ordered, the grandchild's task
    waits for the child's earlier step, the parent's next step for all of them."""
    prog = Prog()
    prog.push()
    t0 = prog.task(1)                 # parent, step 0
    prog.fork("c")
    prog.switch("c")
    prog.push()
    t1 = prog.task(1)                 # child step 0
    prog.next()
    t2 = prog.task(2)                 # child step 1
    prog.fork("g")
    prog.switch("g")
    t3 = prog.task(0)                 # grandchild, in child step 1
    prog.end("g")
    prog.switch("c")
    prog.pop()
    prog.end("c")
    prog.next()
    t4 = prog.task(3)                 # parent step 1
    prog.pop()
    for p in POLICIES:
        res, _, _ = check_against_all_pairs(rtlib, prog, p)
        assert ready_after(res, [t1], [t2, t3])
        assert ready_after(res, [t0, t1, t2, t3], [t4])
        assert res[t1].ready == res[t0].ready or p.window


def empty_fork_step_program(spin_ns=0):
    """step 0: a (slow); step 1: only a fork whose child submits nothing; step 2: b."""
    prog = Prog()
    prog.push()
    a = prog.task(1, spin_ns=spin_ns)
    prog.next()
    prog.fork("c")
    prog.end("c")
    prog.next()
    b = prog.task(0)
    prog.pop()
    return prog, a, b


def test_a_step_that_only_forked_keeps_the_order_in_the_model(rtlib):
    prog, a, b = empty_fork_step_program()
    res, _, _ = check_against_all_pairs(rtlib, prog, Policy())
    assert res[b].ready == res[a].finish + CC


def test_a_step_that_only_forked_keeps_the_order_in_the_runtime(runtime):
    """The step's group (created by the fork) has no task: the next step still waits for the
    step before it, as after an empty step."""
    prog, a, b = empty_fork_step_program(spin_ns=50 * MS)
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    execute(r, prog)
    assert r.wait() == OK, r.error()
    assert 0 < r.lib.harness_finish(a) < r.lib.harness_start(b), r.times(2)


def test_data_dependencies_and_order_scopes_together(rtlib):
    """A chain through tensor 1 across a P.seq: both kinds of edges, and the barrier of a step
    whose tasks are already ordered by data changes nothing beyond its own order."""
    prog = Prog()
    prog.task(2, [(1, WRITE, [(0, 4)])])
    prog.push()
    for i in range(3):
        if i:
            prog.next()
        prog.task(1, [(1, READ, [(0, 4)]), (0, WRITE, [(4 * i, 4 * i + 4)])])
        prog.task(0, [(1, WRITE, [(4, 8)])])
    prog.pop()
    prog.task(3, [(1, READ, [(4, 8)])])
    for p in POLICIES:
        check_against_all_pairs(rtlib, prog, p)


def test_awaits_and_order_scopes_together(rtlib):
    """An await inside a P.seq (an enumeration gate on the awaited box's writer) next to the
    step barriers, with a forked child in the gated step: against the explicit graph with the
    same gate (wsp_sim_replay_gated)."""
    prog = Prog()
    prog.push()
    t0 = prog.task(1, [(1, WRITE, [(0, 4)])])
    prog.task(0)
    prog.next()
    prog.await_(1, [(1, 2)])          # element 1: tile 0 of tensor 1, written by t0
    prog.task(2, [(1, READ, [(0, 4)]), (0, WRITE, [(64, 68)])])
    prog.fork("c")
    prog.switch("c")
    prog.task(3)
    prog.switch(0)
    prog.end("c")
    prog.next()
    prog.task(0)
    prog.pop()
    prog.task(1)                      # after the scope: no order
    gates = [(2, [t0])]
    for p in POLICIES:
        res, summ, _ = model_run(rtlib, prog, p)
        out = gok(rtlib, all_pairs(prog, p), COSTS, M, p, gates)
        assert res == out.results
        assert summ.critical_path == out.summary["critical_path"]
        assert res[2].enumerated == res[t0].finish + CC
        assert ready_after(res, [0, 1], [2, 3]) and ready_after(res, [2, 3], [4])


# ---- random programs ----------------------------------------------------------------------------


def random_program(rng: random.Random, max_tasks=40) -> Prog:
    """Balanced scopes, forks whose children (and grandchildren) interleave with their parent
    within one of its steps, tasks on aligned tiles of two small tensors (or on boxes of their
    own), some of them slow on the host."""
    prog = Prog()
    names = iter(range(1, 10**6))
    made = iter(range(10**6))

    def task_op():
        u = next(made)
        if u >= max_tasks:
            return []
        if rng.random() < 0.5:   # one or two tiles of tensors 0, 1 (elements 0 .. 16)
            acc = [(rng.randrange(2), rng.choice((READ, WRITE)), [(4 * t, 4 * t + 4)])
                   for t in rng.sample(range(4), rng.randint(1, 2))]
        else:                    # a tile of its own
            acc = [(0, WRITE, [(16 + 4 * u, 20 + 4 * u)])]
        return [[("task", rng.randrange(len(COSTS)), acc, rng.choice((0, 0, 0, 200_000)))]]

    def block(depth, ctx, forks_ok=True):
        """chunks: lists of operations that start and end with `ctx` current"""
        chunks = []
        for _ in range(rng.randint(1, 3)):
            x = rng.random()
            if x < 0.45 or depth >= 3:
                chunks += task_op()
            elif x < 0.8:
                chunks.append([("push",)])
                for i in range(rng.randint(1, 4)):
                    if i:
                        chunks.append([("next",)])
                    if rng.random() < 0.2:
                        continue  # an empty step
                    chunks += block(depth + 1, ctx, forks_ok)
                chunks.append([("pop",)])
            elif forks_ok:
                kids = [next(names) for _ in range(rng.randint(1, 2))]
                ops = [("fork", k) for k in kids]
                queues = {k: block(depth + 1, k, depth < 2) if rng.random() < 0.85 else []
                          for k in kids}
                queues[ctx] = [c for _ in range(rng.randint(0, 2)) for c in task_op()]
                while any(queues.values()):
                    who = rng.choice([k for k, q in queues.items() if q])
                    ops.append(("switch", who))
                    ops += queues[who].pop(0)
                ops.append(("switch", ctx))
                ops += [("end", k) for k in kids]
                chunks.append(ops)
        return chunks

    for chunk in block(0, 0):
        prog.ops += chunk
    prog.ntasks = sum(op[0] == "task" for op in prog.ops)
    return prog


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_match_the_all_pairs_graph(rtlib, seed):
    rng = random.Random(seed)
    for _ in range(4):
        prog = random_program(rng)
        if prog.ntasks == 0:
            continue
        for p in POLICIES[:4] if seed % 2 else POLICIES:
            check_against_all_pairs(rtlib, prog, p, spin_scale=0)


def test_results_are_bit_identical_across_workers_timings_and_batching(rtlib):
    rng = random.Random(7)
    progs = [random_program(rng) for _ in range(3)] + [coroutine_program()[0]]
    for prog in progs:
        for p in (Policy(), Policy(nd=2, steal=True), Policy(window=3)):
            raws = set()
            for workers in (1, 2):
                for spin_scale in (0, 1, 5):
                    raws.add(model_run(rtlib, prog, p, workers, spin_scale)[2])
                raws.add(model_run(rtlib, prog, p, workers, 1, grain=4)[2])
            assert len(raws) == 1


# ---- big steps: one barrier per step, not an edge per pair ----------------------------------------


def test_a_step_of_many_tasks_followed_by_another_stays_linear(rtlib):
    """Two steps of 10^5 independent tasks (10^10 pairs): each task of the second starts after
    the latest finish of the first (+ completion); the run takes seconds and little memory."""
    n = 100_000
    ffi, lib = rtlib.ffi, rtlib.lib
    m = Machine(vector=16, cube=1, dispatch_ns=2, completion_ns=5)
    mr = ModelRun(rtlib, 2, [(VECTOR, 10), (VECTOR, 30)], Policy(nd=2), m, ntensors=1)
    r = mr.r
    t = r.task
    t.fn = lib.harness_kernel(K_EMPTY)
    t.ntiles, t.nscalars, t.ncoords = 1, 0, 0
    a = t.access[0]
    a.tensor, a.mode, a.ndim = 0, WRITE, 1
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def body():
        mr.begin(shapes={0: [8 * n]})
        assert r.push() == OK
        for step in range(2):
            if step:
                assert r.next() == OK
            t.kernel = step
            for i in range(n):
                a.lo[0] = (step * n + i) * 4
                a.hi[0] = a.lo[0] + 4
                assert lib.wsp_submit(r.rt, t) == OK
        assert r.pop() == OK
        assert r.wait() == OK, r.error()

    try:
        call_with_timeout(body, 300)
        dt = np.dtype([("enumerated", "<i8"), ("ready", "<i8"), ("issue", "<i8"),
                       ("start", "<i8"), ("finish", "<i8"), ("core", "<i4"), ("unit", "<i4"),
                       ("dispatcher", "<i4"), ("group", "<i4")])
        assert dt.itemsize == ffi.sizeof("wsp_simresult")
        buf = ffi.new("wsp_simresult[]", 2 * n)
        assert lib.wsp_sim_read(r.rt, 0, 2 * n, buf) == 2 * n
        res = np.frombuffer(ffi.buffer(buf), dtype=dt)
        summ = ffi.new("wsp_simsummary *")
        assert lib.wsp_sim_summary(r.rt, summ) == OK
        first, second = res[:n], res[n:]
        barrier = first["finish"].max() + 5
        assert second["ready"].min() == barrier
        assert (second["start"] >= barrier + 2).all()
        assert (first["ready"] == 0).all()
        assert summ.critical_path == 2 + 10 + 5 + 2 + 30
        assert summ.total_cycles == second["finish"].max()
    finally:
        mr.free()
    # the log, the model's edges and its results: a few hundred bytes per task at most
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    assert grown_kb < 400 * 1024   # 10^10 edges would take 40 GB


# ---- through ptowsp -----------------------------------------------------------------------------

LOOP = """
sym N
input X: f32[N, 16, 128]
output Y: f32[N, 16, 128]
kernel inc(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {{ store(y, x + 1.0) }}
workload w() {{ {body} }}
schedule s = w()
"""


def simulate(body, n):
    import ptowsp

    p = ptowsp.parse(LOOP.format(body=body), "t.wsp").compile("cpu_sim")
    return p.simulate(bind={"N": n})


def test_a_compiled_seq_loop_is_a_chain_in_the_model():
    n = 8
    par = simulate("for i in P(N) { inc[i](x = X[i], y = Y[i]) }", n)
    seq = simulate("for i in P.seq(N) { inc[i](x = X[i], y = Y[i]) }", n)
    one = par.extra["critical_path_cycles"]          # dispatch + kernel of one task
    cc = par.extra["serial_cycles"] // n - one        # its completion latency
    assert par.extra["serial_cycles"] == n * (one + cc)
    chain = n * one + (n - 1) * cc
    assert seq.extra["critical_path_cycles"] == chain
    assert seq.total_cycles == chain
    assert par.total_cycles < chain
    blk = simulate("sequential { inc[0](x = X[0], y = Y[0]); inc[1](x = X[1], y = Y[1]) }", 2)
    assert blk.extra["critical_path_cycles"] == blk.total_cycles == 2 * one + cc
