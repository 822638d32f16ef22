"""What the runtime offers CSP pipelines enumerated as deterministic coroutines (wsp_runtime.h):

1. order contexts (wsp_order_fork / switch / end): a scope stack per coroutine, a child borrowing
   its parent's stack, so a parent's P.seq step covers the tasks of the children it forked;
2. wsp_await in WRITE mode (waits for readers too) and wsp_probe (would an await wait?), in the
   real run and as enumeration gates of the cycle model;
3. tasks with more access boxes than kernel tiles (extra entries: dependencies only);
4. wsp_note, a log of (task index, tag, value) triples kept with the trace.

Kernels from harness.c: K_RECORD and K_STORE record their start and finish on one sequence clock
(harness_start/harness_finish/harness_tick), so "task j started after task i finished" is checked
without trusting clocks; K_RENDEZVOUS succeeds only if its tasks run at the same time; a gated task
(`Runtime.gated`) runs until the test opens its gate, so "not waited for" and "still running" are
facts, never races against a busy loop."""

from __future__ import annotations

import pytest

from .conftest import (
    ERR_KERNEL,
    ERR_USAGE,
    K_RENDEZVOUS,
    K_STORE,
    OK,
    READ,
    READWRITE,
    WRITE,
    Pending,
    Runtime,
    call_with_timeout,
)
from .test_sim import VECTOR, T
from .test_sim_gates import CC, COSTS, M, ModelRun, expect_gates, gok

pytestmark = pytest.mark.cc

MS = 1_000_000
INDEPENDENT = 1


def fork(r: Runtime) -> int:
    return r.lib.wsp_order_fork(r.rt)


def switch(r: Runtime, ctx: int) -> int:
    return r.lib.wsp_order_switch(r.rt, ctx)


def end(r: Runtime, ctx: int) -> int:
    return r.lib.wsp_order_end(r.rt, ctx)


def access(r: Runtime, tensor: int, box, mode: int = READ):
    a = r.ffi.new("wsp_access *")
    a.tensor, a.mode, a.ndim = tensor, mode, len(box)
    for d, (lo, hi) in enumerate(box):
        a.lo[d], a.hi[d] = lo, hi
    return a


def await_(r: Runtime, tensor: int, box, mode: int) -> int:
    return r.lib.wsp_await(r.rt, access(r, tensor, box, mode))


def probe(r: Runtime, tensor: int, box, mode: int = READ) -> int:
    return r.lib.wsp_probe(r.rt, access(r, tensor, box, mode))


def before(r: Runtime, a: int, b: int) -> bool:
    """Task a finished before task b started (both ran)."""
    fa, sb = r.lib.harness_finish(a), r.lib.harness_start(b)
    return 0 < fa < sb


def overlapped(r: Runtime, a: int, b: int) -> bool:
    """Tasks a and b ran at the same time (each started before the other finished)."""
    return (r.lib.harness_start(a) < r.lib.harness_finish(b) and
            r.lib.harness_start(b) < r.lib.harness_finish(a))


# ---- 1. order contexts ---------------------------------------------------------------------------


def test_a_parent_seq_step_covers_the_tasks_of_its_forked_children(runtime):
    """for i in P.seq(3): the parent submits one task, forks two children that submit tasks
    (switching back and forth), and waits until they end. Every task of iteration i finishes
    before any task of iteration i + 1 starts; the boxes are disjoint, so only the order scope
    orders them."""
    r = runtime(2, 2)
    r.lib.harness_reset(64)
    assert r.begin() == OK
    assert r.push() == OK
    tid, iters = 0, []
    for i in range(3):
        if i:
            assert r.next() == OK
        mine = []

        def sub(spin, mine=mine):
            nonlocal tid
            assert r.submit(tid, [(0, WRITE, [(tid, tid + 1)])], spin_ns=spin) == OK
            mine.append(tid)
            tid += 1

        sub(15 * MS)                       # the parent's task
        c1, c2 = fork(r), fork(r)
        assert c1 > 0 and c2 > 0 and c1 != c2
        assert switch(r, c1) == OK
        sub(30 * MS)
        assert switch(r, c2) == OK
        sub(10 * MS)
        assert switch(r, c1) == OK
        sub(25 * MS)                       # the last task of the iteration to finish
        assert end(r, c1) == OK            # the current one: context 0 is current again
        sub(5 * MS)                        # the parent's, after the children
        assert switch(r, c2) == OK
        sub(5 * MS)
        assert switch(r, 0) == OK
        assert end(r, c2) == OK
        iters.append(mine)
    assert r.pop() == OK
    assert r.wait() == OK, r.error()
    assert r.stats().tasks_run == tid
    for i in range(len(iters) - 1):
        for a in iters[i]:
            for b in iters[i + 1]:
                assert before(r, a, b), (i, a, b, r.times(tid))


def test_forked_children_and_their_parent_run_in_parallel_within_a_step(runtime):
    """No order beyond the program's: in the first step (nothing before it, so every task is
    ready when submitted) the parent's task and one task per child meet at a rendezvous (each
    waits until all of them have started). (Tasks released together by a barrier may be run by
    the one worker that released them, so later steps are not checked this way.)"""
    r = runtime(3, 2)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.push() == OK
    kids = [fork(r), fork(r)]
    for j, ctx in enumerate([0, *kids]):
        assert switch(r, ctx) == OK
        assert r.submit(j, [(0, WRITE, [(j, j + 1)])], kernel=K_RENDEZVOUS,
                        scalars=(j, 3, 0)) == OK
    for ctx in kids:
        assert end(r, ctx) == OK
    assert r.next() == OK
    assert r.submit(3, [(0, WRITE, [(3, 4)])]) == OK
    assert r.pop() == OK
    assert call_with_timeout(r.wait) == OK, r.error()


def test_a_childs_own_scopes_interleave_with_another_contexts_scopes(runtime):
    """Two coroutines (forked at depth 0: nothing borrowed), each with its own P.seq, switched
    between submits: each sequence is ordered within itself and not against the other."""
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    a, b = fork(r), fork(r)
    # a: 0 (fast) | 1 ;  b: 2 (slow) | 3 | 4
    assert switch(r, a) == OK and r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])], spin_ns=40 * MS) == OK
    assert switch(r, b) == OK and r.push() == OK
    assert r.submit(2, [(0, WRITE, [(2, 3)])], spin_ns=300 * MS) == OK
    assert switch(r, a) == OK and r.next() == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])], spin_ns=5 * MS) == OK
    assert switch(r, b) == OK and r.next() == OK
    assert r.submit(3, [(0, WRITE, [(3, 4)])], spin_ns=5 * MS) == OK
    assert switch(r, a) == OK and r.pop() == OK
    assert switch(r, b) == OK and r.next() == OK
    assert r.submit(4, [(0, WRITE, [(4, 5)])], spin_ns=5 * MS) == OK
    assert r.pop() == OK
    assert end(r, a) == OK and end(r, b) == OK
    assert r.wait() == OK, r.error()
    assert before(r, 0, 1) and before(r, 2, 3) and before(r, 3, 4)
    assert not before(r, 2, 1)  # a's second step did not wait for b's slow first step
    assert r.lib.harness_start(1) < r.lib.harness_finish(2)


def test_a_childs_own_nested_scopes_inside_the_parents_step(runtime):
    """The child pushes a P.seq of its own on top of the borrowed level, and forks a grandchild
    from inside it: the child's steps are ordered, the grandchild's task waits for the child's
    earlier step, and the parent's next iteration waits for all of them."""
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])], spin_ns=20 * MS) == OK      # parent, step 0
    c = fork(r)
    assert switch(r, c) == OK
    assert r.push() == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])], spin_ns=30 * MS) == OK      # child step 0
    assert r.next() == OK
    assert r.submit(2, [(0, WRITE, [(2, 3)])], spin_ns=30 * MS) == OK      # child step 1
    g = fork(r)                                                            # grandchild
    assert g > 0 and g != c
    assert switch(r, g) == OK
    assert r.submit(3, [(0, WRITE, [(3, 4)])], spin_ns=30 * MS) == OK      # in child step 1
    assert r.next() == ERR_USAGE  # the grandchild's only level is borrowed
    code, msg = r.error()
    assert code == ERR_USAGE and "borrowed" in msg
    r.wait()
    # again without the mistake
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])], spin_ns=20 * MS) == OK
    c = fork(r)
    assert c == 1  # ids restart with every run
    assert switch(r, c) == OK and r.push() == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])], spin_ns=30 * MS) == OK
    assert r.next() == OK
    assert r.submit(2, [(0, WRITE, [(2, 3)])], spin_ns=30 * MS) == OK
    g = fork(r)
    assert switch(r, g) == OK
    assert r.submit(3, [(0, WRITE, [(3, 4)])], spin_ns=30 * MS) == OK
    assert end(r, g) == OK
    assert switch(r, c) == OK and r.pop() == OK
    assert end(r, c) == OK
    assert r.next() == OK  # the parent's step 1
    assert r.submit(4, [(0, WRITE, [(4, 5)])], spin_ns=1 * MS) == OK
    assert r.pop() == OK
    assert r.wait() == OK, r.error()
    assert before(r, 1, 2) and before(r, 1, 3)
    for k in range(4):
        assert before(r, k, 4), (k, r.times(5))


def test_tasks_forked_at_depth_zero_have_no_order(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    c = fork(r)
    assert r.submit(0, [(0, WRITE, [(0, 1)])], kernel=K_RENDEZVOUS, scalars=(0, 2, 0)) == OK
    assert switch(r, c) == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])], kernel=K_RENDEZVOUS, scalars=(1, 2, 0)) == OK
    assert call_with_timeout(r.wait) == OK, r.error()  # ends c too


def test_context_ids_are_reused_and_restart_each_run(runtime):
    r = runtime(1, 1)
    for _ in range(2):
        assert r.begin() == OK
        assert [fork(r), fork(r), fork(r)] == [1, 2, 3]
        assert end(r, 2) == OK
        assert fork(r) == 2
        assert end(r, 1) == OK and end(r, 3) == OK
        assert [fork(r), fork(r), fork(r)] == [3, 1, 4]  # the last ended first
        assert r.wait() == OK


def test_switching_closes_the_open_batch(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    c = fork(r)
    assert r.batch(8, 8) == OK
    for k in range(3):
        assert r.submit(k, [(0, WRITE, [(k, k + 1)])]) == OK
    assert r.stats().batches == 0
    assert switch(r, 0) == OK  # the current one: nothing changes
    assert r.stats().batches == 0
    assert switch(r, c) == OK
    assert r.stats().batches == 1
    for k in range(3, 6):  # the announcement goes on in the child
        assert r.submit(k, [(0, WRITE, [(k, k + 1)])]) == OK
    assert end(r, c) == OK  # closes the child's batch
    assert r.stats().batches == 2
    assert r.wait() == OK
    assert r.stats().tasks_run == 6


def test_a_batch_spanning_steps_in_a_child_keeps_its_order(runtime):
    """A batch that goes on over the child's own order steps (wsp_order_next), then a switch."""
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.push() == OK
    c = fork(r)
    assert switch(r, c) == OK and r.push() == OK
    assert r.batch(6, 6) == OK
    for k in range(3):
        if k:
            assert r.next() == OK
        assert r.submit(k, [(0, WRITE, [(k, k + 1)])], spin_ns=2 * MS) == OK
    assert switch(r, 0) == OK
    assert r.submit(3, [(0, WRITE, [(3, 4)])], spin_ns=2 * MS) == OK  # parent, step 0
    assert switch(r, c) == OK
    assert r.next() == OK
    assert r.submit(4, [(0, WRITE, [(4, 5)])], spin_ns=2 * MS) == OK
    assert r.pop() == OK and end(r, c) == OK
    assert r.next() == OK
    assert r.submit(5, [(0, WRITE, [(5, 6)])]) == OK
    assert r.pop() == OK
    assert r.wait() == OK, r.error()
    assert before(r, 0, 1) and before(r, 1, 2) and before(r, 2, 4)
    for k in range(5):
        assert before(r, k, 5)


# ---- order contexts: errors ----------------------------------------------------------------------


def test_next_and_pop_on_a_borrowed_level_are_usage_errors(runtime):
    for op in ("next", "pop"):
        r = runtime(1, 1)
        assert r.begin() == OK
        assert r.push() == OK
        c = fork(r)
        assert switch(r, c) == OK
        assert getattr(r, op)() == ERR_USAGE
        code, msg = r.error()
        assert code == ERR_USAGE and "borrowed" in msg and f"wsp_order_{op}" in msg
        assert r.wait() == ERR_USAGE
    # a child's own level above the borrowed one can be popped, not the one below
    r = runtime(1, 1)
    assert r.begin() == OK
    assert r.push() == OK
    c = fork(r)
    assert switch(r, c) == OK
    assert r.push() == OK and r.next() == OK and r.pop() == OK
    assert r.pop() == ERR_USAGE
    assert r.wait() == ERR_USAGE


def test_unknown_and_ended_contexts_are_usage_errors(runtime):
    cases = [
        lambda r: switch(r, 1),                      # never forked
        lambda r: switch(r, -1),
        lambda r: end(r, 0),                         # the run's own
        lambda r: end(r, 5),
        lambda r: (end(r, fork(r)), switch(r, 1))[1],  # ended
        lambda r: (end(r, fork(r)), end(r, 1))[1],     # ended twice
    ]
    for k, case in enumerate(cases):
        r = runtime(1, 1)
        assert r.begin() == OK
        assert case(r) == ERR_USAGE, k
        assert r.error()[0] == ERR_USAGE
        assert r.wait() == ERR_USAGE
    r = runtime(1, 1)  # outside a run
    assert fork(r) == -ERR_USAGE
    assert switch(r, 0) == ERR_USAGE
    assert end(r, 1) == ERR_USAGE


def test_a_child_adding_to_a_step_its_parent_ended_is_a_usage_error(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])]) == OK
    c = fork(r)
    assert r.next() == OK  # the parent moves on while c is alive
    assert switch(r, c) == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])]) == ERR_USAGE
    code, msg = r.error()
    assert "has ended" in msg and f"order context {c}" in msg
    assert r.wait() == ERR_USAGE
    # also a push in the child (its group would nest in the ended one), then a fork from it
    for what in ("push", "fork"):
        r.lib.harness_reset(8)
        assert r.begin() == OK
        assert r.push() == OK
        c = fork(r)
        assert r.pop() == OK
        assert switch(r, c) == OK
        if what == "push":
            assert r.push() == OK
            assert r.submit(0, [(0, WRITE, [(0, 1)])]) == ERR_USAGE
        else:
            assert fork(r) == -ERR_USAGE
        assert "has ended" in r.error()[1]
        assert r.wait() == ERR_USAGE
    # the runtime is fine afterwards
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])]) == OK
    assert r.wait() == OK


def test_wait_ends_contexts_left_open_after_an_error(runtime):
    """The enumerator returns early (a failing kernel) with contexts live, their own scopes
    open and the current context a child: wsp_wait returns the error, nothing hangs or leaks,
    and the runtime is reusable."""
    r = runtime(2, 2)
    for _rep in range(3):
        r.lib.harness_reset(64)
        assert r.begin() == OK
        assert r.push() == OK
        kids = [fork(r) for _ in range(3)]
        assert kids == [1, 2, 3]
        for j, c in enumerate(kids):
            assert switch(r, c) == OK
            assert r.push() == OK
            assert r.submit(j, [(0, WRITE, [(j, j + 1)])], spin_ns=150 * MS, fail=(j == 1)) == OK
            assert r.next() == OK
            assert r.push() == OK
        assert r.submit(10, [(1, WRITE, [(0, 1)])], spin_ns=30 * MS) == OK
        assert call_with_timeout(r.wait) == ERR_KERNEL
        assert "failed on purpose" in r.error()[1]
    # a clean run after them: context 0 again, ids from 1
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])], spin_ns=5 * MS) == OK
    assert fork(r) == 1
    assert r.next() == OK
    assert r.submit(1, [(0, WRITE, [(1, 2)])]) == OK
    assert r.pop() == OK
    assert r.wait() == OK, r.error()
    assert before(r, 0, 1)


def test_wait_with_open_scopes_complains_only_about_context_zero(runtime):
    r = runtime(1, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    c = fork(r)
    assert switch(r, c) == OK and r.push() == OK  # a child's scope left open: no complaint
    assert r.submit(0, [(0, WRITE, [(0, 1)])]) == OK
    assert r.wait() == OK, r.error()
    assert r.begin() == OK
    assert r.push() == OK and r.push() == OK
    c = fork(r)
    assert switch(r, c) == OK and r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])]) == OK
    assert r.wait() == ERR_USAGE
    assert "2 order scope(s) still open" in r.error()[1]


def test_free_during_a_run_with_contexts_open(rtlib):
    lib = rtlib.lib
    r = Runtime(rtlib, 2, 1)
    lib.harness_reset(8)
    assert r.begin() == OK
    assert r.push() == OK
    c = fork(r)
    assert switch(r, c) == OK and r.push() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1)])], spin_ns=10 * MS) == OK
    call_with_timeout(r.free)


# ---- 2. await in WRITE mode, probe ---------------------------------------------------------------


@pytest.mark.parametrize("mode", [WRITE, READWRITE])
def test_a_writing_await_waits_for_readers_a_reading_one_does_not(runtime, mode):
    r = runtime(2, 2)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.gated(0, [(0, READ, [(0, 4), (0, 4)])], gate=0) == OK
    assert r.gated(1, [(1, READ, [(0, 4), (0, 4)])], gate=1) == OK  # other tensor
    # reading awaits: no writer, so they return while the reader is held
    assert call_with_timeout(lambda: await_(r, 0, [(0, 4), (0, 4)], READ)) == OK
    assert call_with_timeout(lambda: await_(r, 0, [(3, 9), (2, 3)], READ)) == OK
    assert r.lib.harness_finish(0) == 0
    # a writing await on a box overlapping the reader's returns after the reader finished
    pending = Pending(lambda: (await_(r, 0, [(3, 9), (2, 3)], mode), r.lib.harness_tick()))
    r.open_gate(0)
    rc, tick = pending.result()
    assert rc == OK and 0 < r.lib.harness_finish(0) < tick
    assert r.lib.harness_finish(1) == 0  # the other tensor's reader was not waited for
    # a neighbour box: nothing to wait for
    assert call_with_timeout(lambda: await_(r, 0, [(4, 8), (0, 4)], mode)) == OK
    r.open_gate()
    assert r.wait() == OK


def test_a_writing_await_waits_for_readers_and_the_writer(runtime, rtlib):
    r = runtime(2, 1)
    buf = rtlib.ffi.new("int64_t[4]")
    r.lib.harness_reset(8)
    assert r.begin() == OK
    r.task.dispatcher = 0
    assert r.submit(0, [(0, WRITE, [(0, 8)])], kernel=K_STORE, scalars=(0, 30 * MS, 0, 7),
                    tile_data=[buf]) == OK
    assert r.submit(1, [(0, READ, [(0, 4)])], spin_ns=40 * MS) == OK   # after 0 (RAW)
    assert r.submit(2, [(0, READ, [(4, 8)])], spin_ns=80 * MS) == OK
    assert r.gated(3, [(0, READ, [(20, 24)])]) == OK  # elsewhere, held until the end
    assert call_with_timeout(lambda: await_(r, 0, [(2, 6)], READWRITE)) == OK
    tick = r.lib.harness_tick()
    assert all(0 < r.lib.harness_finish(k) < tick for k in (0, 1, 2))
    assert buf[0] == 7 and r.lib.harness_finish(3) == 0
    r.open_gate()
    assert r.wait() == OK


def test_probe_says_whether_an_await_would_wait(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert probe(r, 0, [(0, 4)], READWRITE) == 0  # nothing submitted
    assert r.gated(0, [(0, READ, [(0, 4)])], gate=0) == OK  # a reader, held
    assert probe(r, 0, [(0, 4)], READ) == 0       # readers only: a read need not wait
    assert probe(r, 0, [(2, 3)], WRITE) == 1
    assert probe(r, 0, [(4, 8)], WRITE) == 0       # not overlapping
    assert probe(r, 0, [(0, 4)], READWRITE) == 1
    r.open_gate(0)

    def poll() -> int:
        polls = 0
        while probe(r, 0, [(0, 4)], READWRITE) == 1:  # polling makes progress on its own
            polls += 1
        return polls

    call_with_timeout(poll)
    assert r.lib.harness_finish(0) > 0
    assert probe(r, 0, [(0, 4)], WRITE) == 0
    # a writer, held: a reading probe says 1 as well
    assert r.gated(1, [(0, WRITE, [(0, 2)])], gate=1) == OK
    assert probe(r, 0, [(1, 2)], READ) == 1
    assert r.lib.harness_finish(1) == 0
    r.open_gate(1)
    assert call_with_timeout(lambda: await_(r, 0, [(1, 2)], READ)) == OK
    assert probe(r, 0, [(1, 2)], READ) == 0 and probe(r, 0, [(0, 4)], READWRITE) == 0
    assert r.wait() == OK
    st = r.stats()
    assert (st.tasks, st.tasks_run) == (2, 2)


def test_probe_closes_a_batch_only_when_it_holds_an_awaited_task(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.batch(8, 8) == OK
    for k in range(3):
        assert r.submit(k, [(0, READ, [(k, k + 1)])], spin_ns=30 * MS) == OK
    assert probe(r, 0, [(0, 3)], READ) == 0       # readers in the batch: a read need not wait
    assert probe(r, 0, [(5, 6)], WRITE) == 0      # outside the union box
    assert r.stats().batches == 0
    assert probe(r, 0, [(1, 2)], WRITE) == 1      # closes the batch, which is unfinished
    assert r.stats().batches == 1
    assert r.wait() == OK


def test_a_writing_await_closes_a_batch_holding_a_reader(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.batch(8, 8) == OK
    for k in range(3):
        assert r.submit(k, [(0, READ, [(k, k + 1)])], spin_ns=20 * MS) == OK
    assert await_(r, 0, [(1, 2)], READ) == OK
    assert r.stats().batches == 0
    assert await_(r, 0, [(1, 2)], WRITE) == OK
    tick = r.lib.harness_tick()
    assert r.stats().batches == 1 and 0 < r.lib.harness_finish(1) < tick
    assert r.wait() == OK


def test_probe_and_await_errors(runtime):
    r = runtime(1, 2)
    assert probe(r, 0, [(0, 1)]) == -ERR_USAGE  # outside a run
    for bad in ((5, [(0, 1)], READ), (0, [(2, 1)], READ), (0, [(0, 1)], 0), (0, [(0, 1)], 4)):
        for fn in (probe, await_):
            r = runtime(1, 2)
            assert r.begin() == OK
            rc = fn(r, *bad)
            assert rc == (-ERR_USAGE if fn is probe else ERR_USAGE), (fn, bad)
            assert ("wsp_probe" if fn is probe else "wsp_await") in r.error()[1]
            assert r.wait() == ERR_USAGE
    r = runtime(1, 2)
    assert r.begin() == OK
    assert r.lib.wsp_probe(r.rt, r.ffi.NULL) == -ERR_USAGE
    assert r.wait() == ERR_USAGE
    r = runtime(1, 2)  # a failed run: the error, negated
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert r.fail(ERR_KERNEL, b"x") == ERR_KERNEL
    assert probe(r, 0, [(0, 1)]) == -ERR_KERNEL
    assert r.wait() == ERR_KERNEL


def test_an_event_record_synchronize_query_round(runtime, rtlib):
    """An event: a 1-element scratch tensor (1); tasks marked by record(ev) carry an extra READ
    of it. synchronize(ev) is a READWRITE await on it, query(ev) is !probe."""
    r = runtime(2, 2)
    scratch = rtlib.ffi.new("int64_t[1]")
    r.lib.harness_reset(8)
    assert r.begin() == OK

    def mark():
        t = r.task
        t.tiles[1].data = scratch
        t.tiles[1].rows = t.tiles[1].cols = 1

    assert r.lib.wsp_probe(r.rt, access(r, 1, [(0, 1)], READWRITE)) == 0  # query: done
    mark()
    assert r.submit(0, [(0, WRITE, [(0, 1)]), (1, READ, [(0, 1)])], spin_ns=20 * MS) == OK
    mark()
    assert r.gated(1, [(0, WRITE, [(1, 2)]), (1, READ, [(0, 1)])], gate=1) == OK  # held
    assert r.gated(2, [(0, WRITE, [(5, 6)])], gate=2) == OK  # not recorded, held
    assert probe(r, 1, [(0, 1)], READWRITE) == 1                          # query: not done
    pending = Pending(lambda: (await_(r, 1, [(0, 1)], READWRITE), r.lib.harness_tick()))
    r.open_gate(1)                                                        # synchronize
    rc, tick = pending.result()
    assert rc == OK
    assert 0 < r.lib.harness_finish(0) < tick and 0 < r.lib.harness_finish(1) < tick
    assert r.lib.harness_finish(2) == 0
    assert probe(r, 1, [(0, 1)], READWRITE) == 0
    r.open_gate()
    assert r.wait() == OK


def model_await(mr: ModelRun, tensor, box, mode):
    assert await_(mr.r, tensor, box, mode) == OK


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "hashed"])
def test_a_writing_awaits_gate_lists_the_readers(rtlib, dense):
    """Tensor 0 in tiles of 4: 0 writes tile 0; 1, 2 read it, 3 reads tile 1 (slowest).
    A READ await on tile 0 gates on 0 only; a READWRITE await on tile 0 on its readers 1, 2 too
    (3 reads another tile); a WRITE await over tiles 0 and 1 adds 3; a probe gates nothing."""
    mr = ModelRun(rtlib, 2, COSTS)
    try:
        mr.begin(shapes={0: [32], 1: [32]} if dense else None)
        mr.task(2, [(0, WRITE, [(0, 4)])])
        mr.task(3, [(0, READ, [(0, 4)])])
        mr.task(2, [(0, READ, [(0, 4)])])
        mr.task(1, [(0, READ, [(4, 8)])])
        model_await(mr, 0, [(1, 2)], READ)          # gate (4, [0])
        mr.task(0, [(1, WRITE, [(0, 4)])])
        assert probe(mr.r, 0, [(0, 8)], WRITE) in (0, 1)   # no gate
        mr.task(0, [(1, WRITE, [(4, 8)])])
        model_await(mr, 0, [(0, 4)], READWRITE)     # gate (6, [1, 2])
        mr.task(0, [(1, WRITE, [(8, 12)])])
        model_await(mr, 0, [(2, 6)], WRITE)         # gate (7, [0, 3]): 1, 2 are gated already
        mr.task(0, [(1, WRITE, [(12, 16)])])
        res, summ, _ = mr.end()
        gates = [(4, [0]), (6, [1, 2]), (7, [0, 3])]
        assert [r.enumerated for r in res] == expect_gates(res, gates)
        assert res[4].enumerated == res[0].finish + CC < res[1].finish
        assert res[5].enumerated == res[4].enumerated  # the probe held nothing back
        assert res[6].enumerated == max(res[1].finish, res[2].finish) + CC
        assert res[7].enumerated == res[3].finish + CC
        tasks = [T(kernel=2), T(kernel=3, preds=(0,)), T(kernel=2, preds=(0,)), T(kernel=1),
                 T(), T(), T(), T()]
        out = gok(rtlib, tasks, COSTS, M, gates=gates)
        assert res == out.results and summ.critical_path == out.summary["critical_path"]
    finally:
        mr.free()


def test_a_writing_await_on_a_whole_tensor_record_gates_its_readers(rtlib):
    mr = ModelRun(rtlib, 2, COSTS)
    try:
        mr.begin()
        mr.task(2, [(0, WRITE, [(0, 4)])])
        mr.task(2, [(0, WRITE, [(2, 7)])])   # breaks the tiling: one record, 1 its writer
        mr.task(1, [(0, READ, [(0, 3)])])    # readers of the record
        mr.task(2, [(0, READ, [(9, 10)])])
        model_await(mr, 0, [(20, 21)], READ)       # the writer: (4, [1])
        mr.task(0, [(1, WRITE, [(0, 4)])])
        model_await(mr, 0, [(20, 21)], WRITE)      # its readers: (5, [2, 3])
        mr.task(0, [(1, WRITE, [(4, 8)])])
        res, _, _ = mr.end()
        assert [r.enumerated for r in res] == expect_gates(res, [(4, [1]), (5, [2, 3])])
        assert res[5].enumerated == max(res[2].finish, res[3].finish) + CC
    finally:
        mr.free()


def test_writing_await_gates_are_independent_of_timing(rtlib):
    """The same program with slow or instant kernels and 1 or 2 workers: identical results."""
    raws = []
    for workers, spin in ((1, 0), (2, 0), (2, 20 * MS)):
        mr = ModelRun(rtlib, workers, COSTS)
        try:
            mr.begin(shapes={0: [32]})
            for k in range(8):
                mr.task(1 + k % 3, [(0, READ if k % 3 else WRITE, [(4 * (k % 2), 4 * (k % 2) + 4)])],
                        spin_ns=spin)
                if k % 3 == 2:
                    model_await(mr, 0, [(0, 8)], READWRITE if k % 2 else WRITE)
            raws.append(mr.end()[2])
        finally:
            mr.free()
    assert raws[0] == raws[1] == raws[2]


# ---- 3. more access boxes than kernel tiles ------------------------------------------------------


def extra(r: Runtime, scratch, n_own: int, extras) -> None:
    """Valid tiles (rows = cols = 1) for the entries after the kernel's own n_own tiles."""
    for k in range(n_own, n_own + len(extras)):
        r.task.tiles[k].data = scratch
        r.task.tiles[k].rows = r.task.tiles[k].cols = 1
        r.task.tiles[k].stride = r.task.tiles[k].col_stride = 1


def test_extra_read_accesses_make_raw_and_war_dependencies(runtime, rtlib):
    r = runtime(2, 2)
    scratch = rtlib.ffi.new("int64_t[4]")
    buf = rtlib.ffi.new("int64_t[8]")
    r.lib.harness_reset(8)
    assert r.begin() == OK
    r.task.dispatcher = 0
    ev = (1, READ, [(0, 1)])
    # 0 writes the event box; 1 (K_STORE, one own tile) reads it as an extra access: RAW
    assert r.submit(0, [(1, WRITE, [(0, 1)])], spin_ns=40 * MS) == OK
    extra(r, scratch, 1, [ev])
    assert r.submit(1, [(0, WRITE, [(0, 1)]), ev], kernel=K_STORE, scalars=(1, 30 * MS, 0, 11),
                    tile_data=[buf]) == OK
    # 2 also reads it extra: no order with 1 (readers), 3 writes it: after 1 and 2 (WAR)
    extra(r, scratch, 1, [ev])
    assert r.submit(2, [(0, WRITE, [(1, 2)]), ev], kernel=K_STORE, scalars=(2, 30 * MS, 0, 12),
                    tile_data=[buf + 1]) == OK
    assert r.submit(3, [(1, WRITE, [(0, 1)])]) == OK
    assert r.wait() == OK, r.error()
    assert (buf[0], buf[1]) == (11, 12)
    assert before(r, 0, 1) and before(r, 0, 2)
    assert before(r, 1, 3) and before(r, 2, 3)
    # (two readers of the box have no order among them: the rendezvous test below)


def test_extra_readers_do_not_order_each_other(runtime, rtlib):
    """Tasks that only share an extra READ box run at the same time (a rendezvous), batched and
    not."""
    scratch = rtlib.ffi.new("int64_t[1]")
    for batched in (False, True):
        r = runtime(2, 2)
        r.lib.harness_reset(4)
        assert r.begin() == OK
        if batched:
            assert r.lib.wsp_schedule(r.rt, 2, 0, 0) == OK
            assert r.batch(2, 2, INDEPENDENT) == OK
        for k in range(2):
            r.task.dispatcher = k
            extra(r, scratch, 1, [0])
            assert r.submit(k, [(0, WRITE, [(k, k + 1)]), (1, READ, [(0, 1)])],
                            kernel=K_RENDEZVOUS, scalars=(k, 2, 0)) == OK
        assert call_with_timeout(r.wait) == OK, r.error()


@pytest.mark.parametrize("flags,nd", [(0, 0), (INDEPENDENT, 3)])
def test_extra_accesses_in_batches_split_batches_trace_and_model(runtime, rtlib, flags, nd):
    """A batched nest whose tasks carry an extra READ of an event box, then a writer of that box
    and a reader of what the nest wrote: the union boxes include the extra ones (the writer waits
    for the whole nest, WAR), the trace has every task, the model infers the same order."""
    r = runtime(2, 2)
    buf = rtlib.ffi.new("int64_t[32]")
    scratch = rtlib.ffi.new("int64_t[1]")
    mach = rtlib.ffi.new("wsp_machine *", {"clock_ghz": 1.0, "dispatchers": 1, "cube_cores": 1,
                                           "vector_cores": 4, "dispatch_ns": 1.0,
                                           "completion_ns": 1.0})
    pol = rtlib.ffi.new("wsp_policy *", {"ndispatchers": max(nd, 1)})
    kc = rtlib.ffi.new("wsp_kcost[]", [{"unit": VECTOR, "cycles": 10}])
    assert r.lib.wsp_sim_enable(r.rt, mach, pol, kc, 1) == OK
    assert r.lib.wsp_trace_enable(r.rt, 1) == OK
    n = 16
    r.lib.harness_reset(n + 2)
    assert r.begin() == OK
    if nd:
        assert r.lib.wsp_schedule(r.rt, nd, 0, 0) == OK
    assert r.batch(n, 4, flags) == OK
    for k in range(n):
        r.task.dispatcher = k % nd if nd else 0
        extra(r, scratch, 1, [0])
        assert r.submit(k, [(0, WRITE, [(k, k + 1)]), (1, READ, [(0, 1)])], kernel=K_STORE,
                        scalars=(k, 1 * MS, 0, 100 + k), tile_data=[buf + k], coords=(k,)) == OK
    r.task.dispatcher = 0
    assert r.submit(n, [(1, WRITE, [(0, 1)])]) == OK            # after every task of the nest
    assert r.submit(n + 1, [(0, READ, [(0, n)])]) == OK         # after every one too (RAW)
    assert r.wait() == OK, r.error()
    assert r.stats().batches > 0
    assert list(buf[0:n]) == [100 + k for k in range(n)]
    for k in range(n):
        assert before(r, k, n) and before(r, k, n + 1), k
    count = r.lib.wsp_trace_count(r.rt)
    assert count == n + 2
    ev = rtlib.ffi.new("wsp_trace_event[]", count)
    assert r.lib.wsp_trace_read(r.rt, 0, count, ev) == count
    assert [ev[k].coords[0] for k in range(n)] == list(range(n))
    assert all(ev[k].worker >= 0 and ev[k].end_ns >= ev[k].start_ns for k in range(count))
    res = rtlib.ffi.new("wsp_simresult[]", count)
    assert r.lib.wsp_sim_read(r.rt, 0, count, res) == count
    for k in range(n):
        assert res[n].ready >= res[k].finish and res[n + 1].ready >= res[k].finish


# ---- 4. notes --------------------------------------------------------------------------------------


def notes(r: Runtime):
    n = r.lib.wsp_note_count(r.rt)
    out = r.ffi.new("int64_t[]", 3 * max(n, 1))
    assert r.lib.wsp_note_read(r.rt, 0, n, out) == n
    return [tuple(out[3 * i:3 * i + 3]) for i in range(n)]


def test_notes_name_the_index_of_the_next_task(runtime):
    r = runtime(2, 1)
    assert r.lib.wsp_trace_enable(r.rt, 1) == OK
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.lib.wsp_note(r.rt, 7, 0) == OK                 # before any task: index 0
    for k in range(3):
        assert r.lib.wsp_note(r.rt, 1, 10 + k) == OK
        assert r.submit(k, [(0, WRITE, [(k, k + 1)])], coords=(k,)) == OK
    assert r.batch(4, 4) == OK                              # the open batch counts
    for k in range(3, 5):
        assert r.submit(k, [(0, WRITE, [(k, k + 1)])], coords=(k,)) == OK
        assert r.lib.wsp_note(r.rt, 2, -k) == OK
    assert r.lib.wsp_note_count(r.rt) == 6                  # readable during the run
    assert r.wait() == OK
    assert notes(r) == [(0, 7, 0), (0, 1, 10), (1, 1, 11), (2, 1, 12), (4, 2, -3), (5, 2, -4)]
    ev = r.ffi.new("wsp_trace_event[]", 5)
    assert r.lib.wsp_trace_read(r.rt, 0, 5, ev) == 5
    assert [ev[k].coords[0] for k in range(5)] == list(range(5))  # index k is task k
    # partial reads
    out = r.ffi.new("int64_t[]", 30)
    assert r.lib.wsp_note_read(r.rt, 4, 10, out) == 2 and list(out[0:6]) == [4, 2, -3, 5, 2, -4]
    assert r.lib.wsp_note_read(r.rt, 6, 1, out) == 0
    assert r.lib.wsp_note_read(r.rt, -1, 1, out) == 0
    assert r.lib.wsp_note_read(r.rt, 0, 0, out) == 0
    assert r.lib.wsp_note_read(r.rt, 0, 1, r.ffi.NULL) == 0
    # reset by the next run, memory kept; many notes
    assert r.begin() == OK
    assert r.lib.wsp_note_count(r.rt) == 0
    for k in range(5000):
        assert r.lib.wsp_note(r.rt, k % 3, k) == OK
        if k % 1000 == 999:
            assert r.submit(0, [(0, WRITE, [(0, 1)])]) == OK
    assert r.wait() == OK
    got = notes(r)
    assert len(got) == 5000
    assert got[:2] == [(0, 0, 0), (0, 1, 1)] and got[1000] == (1, 1, 1000)
    assert got[-1] == (4, 4999 % 3, 4999)


def test_notes_without_a_trace_keep_nothing(runtime):
    """(What a note costs without a trace is measured by benchmarks/await_costs.py.)"""
    r = runtime(1, 1)
    assert r.lib.wsp_note(r.ffi.NULL, 1, 1) == OK
    assert r.lib.wsp_note(r.rt, 1, 1) == OK  # outside a run, no trace: nothing to do
    assert r.begin() == OK
    for k in range(20000):
        assert r.lib.wsp_note(r.rt, 1, k) == OK
    assert r.lib.wsp_note_count(r.rt) == 0
    assert r.wait() == OK
    assert r.lib.wsp_note_count(r.rt) == 0


def test_note_errors(runtime):
    r = runtime(1, 1)
    assert r.lib.wsp_trace_enable(r.rt, 1) == OK
    assert r.begin() == OK
    assert r.lib.wsp_note(r.rt, 1, 1) == OK
    assert r.fail(ERR_KERNEL, b"boom") == ERR_KERNEL
    assert r.lib.wsp_note(r.rt, 1, 2) == ERR_KERNEL  # after an error: the error, no note
    r.wait()
    assert notes(r) == [(0, 1, 1)]
    assert r.begin() == OK
    assert r.wait() == OK and notes(r) == []
    assert r.lib.wsp_note(r.rt, 1, 3) == ERR_USAGE   # tracing, but outside a run
