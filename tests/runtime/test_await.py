"""wsp_await: data-dependent enumeration (language.md section 6). The enumerator blocks until the
earlier tasks writing a box have finished, then reads what they wrote; tasks that do not write
that box are not waited for. Kernels from harness.c: K_STORE stores a value into its tile and
records its start and finish on the sequence clock that harness_tick() reads; a gated task
(`Runtime.gated`) runs until the test opens its gate, so "the await did not wait for it" is
checked by the await returning while the task still runs (under a hang guard), never by time."""

from __future__ import annotations

import pytest

from .conftest import (
    ERR_KERNEL,
    ERR_USAGE,
    K_STORE,
    OK,
    READ,
    READWRITE,
    STALL,
    WRITE,
    Runtime,
    call_with_timeout,
)

pytestmark = pytest.mark.cc

INDEPENDENT = 1


def store(r: Runtime, tid: int, tensor: int, box, cell, value: int, spin_ns: int = 0,
          fail: int = 0, mode: int = WRITE, dispatcher: int = 0) -> int:
    """A K_STORE task writing `box` of `tensor` that stores `value` into `cell` (an int64_t *)."""
    r.task.dispatcher = dispatcher
    return r.submit(tid, [(tensor, mode, box)], kernel=K_STORE,
                    scalars=(tid, spin_ns, fail, value), tile_data=[cell])


@pytest.fixture
def buf(rtlib):
    return rtlib.ffi.new("int64_t[64]")


# ---- returning at once ----------------------------------------------------------------------------


def test_await_without_writers_does_not_wait(runtime):
    r = runtime(2, 2)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert r.await_(0, [(0, 4), (0, 4)]) == OK  # nothing was ever written
    # a reader of the box and a writer of the same box of another tensor, both held until the end
    assert r.gated(0, [(0, READ, [(0, 4), (0, 4)])]) == OK
    assert r.gated(1, [(1, WRITE, [(0, 4), (0, 4)])]) == OK
    for box in ([(0, 4), (0, 4)], [(2, 3), (0, 1)], [(2, 2), (0, 4)]):  # the last one is empty
        assert call_with_timeout(lambda box=box: r.await_(0, box)) == OK
    assert r.lib.harness_finish(0) == 0 and r.lib.harness_finish(1) == 0  # not waited for
    r.open_gate()
    assert r.wait() == OK
    st = r.stats()
    assert (st.tasks, st.tasks_run, st.dependencies) == (2, 2, 0)


def test_await_with_finished_writers_does_not_wait(runtime, buf):
    r = runtime(2, 2)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 16)], buf, 7) == OK
    assert store(r, 1, 0, [(16, 32)], buf + 1, 8) == OK
    # ready tasks are shown to the workers in batches: the first await flushes and waits
    assert r.await_(0, [(0, 32)]) == OK
    assert r.lib.harness_finish(0) > 0 and r.lib.harness_finish(1) > 0
    # both workers held by tasks of another tensor: an await that needed a worker would hang
    assert r.gated(2, [(1, WRITE, [(0, 1)])]) == OK
    assert r.gated(3, [(1, WRITE, [(1, 2)])]) == OK
    r.flush(1, [(0, 2)])
    r.started(2)
    r.started(3)
    assert call_with_timeout(lambda: [r.await_(0, [(0, 32)]) for _ in range(100)]) == [OK] * 100
    assert (buf[0], buf[1]) == (7, 8)
    r.open_gate()
    assert r.wait() == OK


# ---- waiting for the writers -----------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_await_waits_for_a_slow_writer_and_sees_its_value(runtime, buf, workers):
    r = runtime(workers, 1)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 4), (0, 4)], buf, 42, spin_ns=100_000_000) == OK
    assert r.await_(0, [(2, 3), (1, 2)]) == OK  # a sub-box of the written one
    tick = r.lib.harness_tick()
    assert 0 < r.lib.harness_finish(0) < tick
    assert buf[0] == 42
    assert r.wait() == OK


def test_await_waits_for_every_overlapping_writer_and_their_chain(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 8)], buf, 1, spin_ns=60_000_000) == OK
    assert store(r, 1, 0, [(6, 12)], buf + 1, 2, spin_ns=30_000_000) == OK   # WAW with 0
    assert store(r, 2, 0, [(20, 24)], buf + 2, 3, spin_ns=30_000_000) == OK  # elsewhere
    assert r.await_(0, [(4, 7)]) == OK  # overlaps 0 and 1
    tick = r.lib.harness_tick()
    assert 0 < r.lib.harness_finish(0) < r.lib.harness_finish(1) < tick
    assert (buf[0], buf[1]) == (1, 2)
    assert r.wait() == OK


def test_await_does_not_wait_for_unrelated_tasks(runtime, buf):
    r = runtime(4, 2)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 8)], buf, 5, spin_ns=20_000_000) == OK
    assert r.gated(1, [(0, READ, [(0, 8)])]) == OK    # reads the box
    assert r.gated(2, [(0, WRITE, [(8, 16)])]) == OK  # writes a neighbour
    assert r.gated(3, [(1, WRITE, [(0, 8)])]) == OK   # the same box, other tensor
    assert call_with_timeout(lambda: r.await_(0, [(0, 8)])) == OK
    assert call_with_timeout(lambda: r.await_(0, [(2, 6)])) == OK
    assert r.lib.harness_finish(0) > 0 and buf[0] == 5
    assert [r.lib.harness_finish(i) for i in (1, 2, 3)] == [0, 0, 0]  # held: not waited for
    r.open_gate()
    assert r.wait() == OK


def test_await_of_a_read_write_task(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 1)], buf, 9, spin_ns=50_000_000, mode=READWRITE) == OK
    assert r.await_(0, [(0, 1)]) == OK
    assert r.lib.harness_finish(0) > 0 and buf[0] == 9
    assert r.wait() == OK


# ---- batches ---------------------------------------------------------------------------------------


def test_await_closes_an_open_batch_holding_a_writer(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.batch(10, 10) == OK
    for k in range(3):
        assert store(r, k, 0, [(k, k + 1)], buf + k, 100 + k, spin_ns=20_000_000) == OK
    assert r.await_(0, [(7, 9)]) == OK  # the batch writes no such box: it stays open
    assert r.stats().batches == 0
    assert r.await_(0, [(1, 2)]) == OK
    tick = r.lib.harness_tick()
    assert r.stats().batches == 1
    assert 0 < r.lib.harness_finish(1) < tick and buf[1] == 101
    for k in range(3, 10):  # the rest of the announcement goes on batching
        assert store(r, k, 0, [(k, k + 1)], buf + k, 100 + k) == OK
    assert r.wait() == OK
    assert list(buf[0:10]) == [100 + k for k in range(10)]
    assert r.stats().batches == 2


def test_await_waits_for_the_parts_of_a_split_batch(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(16)
    assert r.begin() == OK
    assert r.lib.wsp_schedule(r.rt, 4, 0, 0) == OK
    assert r.batch(8, 8, INDEPENDENT) == OK
    for k in range(6):  # dispatchers 0..3 on workers 0, 1: a batch in two parts, still open
        assert store(r, k, 0, [(k, k + 1)], buf + k, 200 + k, spin_ns=30_000_000,
                     dispatcher=k % 4) == OK
    assert r.await_(0, [(3, 4)]) == OK  # dispatcher 3: worker 1, not the batch's own part
    tick = r.lib.harness_tick()
    assert 0 < r.lib.harness_finish(3) < tick and buf[3] == 203
    assert r.stats().batches >= 2  # the parts
    assert r.await_(0, [(0, 6)]) == OK
    tick = r.lib.harness_tick()
    assert all(0 < r.lib.harness_finish(k) < tick for k in range(6))
    assert list(buf[0:6]) == [200 + k for k in range(6)]
    assert r.wait() == OK


# ---- errors ----------------------------------------------------------------------------------------


def test_await_returns_the_error_of_a_failing_writer(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 4)], buf, 1, spin_ns=50_000_000, fail=1) == OK
    assert r.await_(0, [(0, 4)]) == ERR_KERNEL
    code, msg = r.error()
    assert code == ERR_KERNEL and "failed on purpose" in msg
    assert r.await_(0, [(0, 4)]) == ERR_KERNEL  # later calls return it at once
    assert r.wait() == ERR_KERNEL
    # the runtime is reusable
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 4)], buf, 3, spin_ns=10_000_000) == OK
    assert r.await_(0, [(0, 4)]) == OK and buf[0] == 3
    assert r.wait() == OK


def test_an_error_elsewhere_ends_the_await_early(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(4)
    assert r.begin() == OK
    assert r.gated(0, [(0, WRITE, [(0, 4)])]) == OK  # the awaited writer, held
    assert r.submit(1, [(0, WRITE, [(8, 9)])], fail=1) == OK
    assert call_with_timeout(lambda: r.await_(0, [(0, 4)])) == ERR_KERNEL
    assert r.lib.harness_finish(0) == 0  # the await ended before its writer finished
    r.open_gate()
    assert r.wait() == ERR_KERNEL


def test_await_usage_errors(rtlib, runtime):
    r = runtime(1, 2)
    assert r.await_(0, [(0, 1)]) == ERR_USAGE  # outside a run
    for bad in ((5, [(0, 1)]), (0, [(2, 1)]), (0, [(-1, 1)])):
        r = runtime(1, 2)
        assert r.begin() == OK
        assert r.await_(*bad) == ERR_USAGE, bad
        assert r.wait() == ERR_USAGE
    r = runtime(1, 2)
    assert r.begin() == OK
    assert r.submit(0, [(0, WRITE, [(0, 1), (0, 1)])], kernel=1) == OK
    assert r.await_(0, [(0, 1)]) == ERR_USAGE  # 1 dimension after 2
    assert "dimensions" in r.error()[1]
    assert r.wait() == ERR_USAGE
    r = runtime(1, 2)
    assert r.begin() == OK
    assert r.lib.wsp_await(r.rt, r.ffi.NULL) == ERR_USAGE
    assert r.wait() == ERR_USAGE


# ---- composition -----------------------------------------------------------------------------------


def test_await_inside_order_scopes(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [(0, WRITE, [(9, 10)])], spin_ns=80_000_000) == OK  # step 0: slow
    assert r.next() == OK
    assert store(r, 1, 0, [(0, 1)], buf, 11) == OK  # step 1: waits for task 0 (barrier)
    assert r.await_(0, [(0, 1)]) == OK
    tick = r.lib.harness_tick()
    assert 0 < r.lib.harness_finish(0) < r.lib.harness_start(1) < r.lib.harness_finish(1) < tick
    assert buf[0] == 11
    assert r.submit(2, [(0, WRITE, [(20, 21)])], spin_ns=50_000_000) == OK  # step 1
    assert r.await_(0, [(30, 31)]) == OK  # nothing to wait for: the scope is unchanged
    assert r.next() == OK
    assert r.submit(3, [(0, WRITE, [(40, 41)])]) == OK  # step 2: after task 2
    assert r.push() == OK  # a nested scope
    assert store(r, 4, 0, [(1, 2)], buf + 1, 12) == OK
    assert r.await_(0, [(1, 2)]) == OK and buf[1] == 12
    assert r.pop() == OK
    assert r.pop() == OK
    assert r.wait() == OK
    assert r.lib.harness_finish(2) < r.lib.harness_start(3)
    assert r.lib.harness_finish(2) < r.lib.harness_start(4)  # the nested scope is in step 2
    st = r.stats()
    assert st.tasks == st.tasks_run == 5


def test_await_with_a_stalling_window(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(64)
    for c in range(4):
        buf[c] = -1
    assert r.begin(2, STALL) == OK
    for k in range(20):
        assert store(r, k, 0, [(k % 4, k % 4 + 1)], buf + k % 4, k, spin_ns=2_000_000) == OK
        if k % 3 == 2:
            assert r.await_(0, [(0, 4)]) == OK
            # the last value stored in each cell so far
            assert [buf[c] for c in range(4)] == [c + 4 * ((k - c) // 4) if c <= k else -1
                                                  for c in range(4)]
    assert r.wait() == OK
    assert r.stats().max_in_flight <= 2


def test_await_in_a_model_only_run(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(4)
    assert r.lib.wsp_execute(r.rt, 0) == OK
    assert r.begin() == OK
    assert store(r, 0, 0, [(0, 1)], buf, 1) == OK
    assert r.await_(0, [(0, 1)]) == OK  # the task completes without running its kernel
    assert r.wait() == OK
    assert r.stats().tasks_run == 0


def test_awaits_add_no_dependencies(runtime, buf):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    for k in range(4):
        assert store(r, k, 0, [(0, 1)], buf, k, spin_ns=5_000_000) == OK
        assert r.await_(0, [(0, 1)]) == OK and buf[0] == k
    assert r.wait() == OK
    st = r.stats()
    assert (st.tasks, st.dependencies) == (4, 0)  # each writer found the previous one finished


# ---- many awaits: no lost wake-ups -----------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("flags,window", [(0, 0), (8, 0), (1, 0), (0, 3), (9, 2), (2, 0), (6, 0),
                                          (7, 4), (14, 0)])
def test_many_short_awaits(rtlib, runtime, workers, flags, window):
    r = runtime(workers, 2)
    cells = rtlib.ffi.new("int64_t[8]")
    for ncells in (1, 4):
        got = call_with_timeout(lambda ncells=ncells: r.lib.harness_await_loop(
            r.rt, 2000, ncells, window, STALL, flags, cells), 120)
        assert got == 0, (got, r.error())


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("ndim,extent", [(1, 64), (2, 12)])
@pytest.mark.parametrize("scopes", [8, 9, 10, 15])  # bit 3: random awaits, checked at once
def test_random_programs_with_awaits(rtlib, workers, ndim, extent, scopes):
    """harness_random_run with awaits among order scopes, batches and placement: every await
    returns after the earlier writers of its box, and every dependency still holds."""
    rt = rtlib.lib.wsp_runtime_new(workers, 2)
    edges = rtlib.ffi.new("long *")
    try:
        for seed, window in ((1, 0), (2, 3)):
            bad = call_with_timeout(
                lambda seed=seed, window=window: rtlib.lib.harness_random_run(
                    rt, 1500, seed * 31 + ndim, ndim, extent, scopes, window, STALL, 3000, edges),
                120)
            assert bad == 0
    finally:
        rtlib.lib.wsp_runtime_free(rt)


def test_many_awaits_on_several_runtimes_at_once(rtlib):
    import threading
    results = []

    def work():
        rt = rtlib.lib.wsp_runtime_new(2, 2)
        cells = rtlib.ffi.new("int64_t[8]")
        for flags in (0, 8, 6):
            results.append(rtlib.lib.harness_await_loop(rt, 1000, 3, 0, STALL, flags, cells))
        rtlib.lib.wsp_runtime_free(rt)

    # harness_await_loop touches no global state (k_put and k_empty only)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert results == [0] * 9
