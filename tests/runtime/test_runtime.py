"""The C task runtime (runtime_c/): dependencies, order scopes, the task window, errors and
reuse, checked against the brute-force model in model.py with kernels from harness.c that record
their start and finish on one sequence counter."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import (
    ABORT,
    ERR_KERNEL,
    ERR_USAGE,
    ERR_VIEW,
    ERR_WINDOW,
    K_EMPTY,
    K_RENDEZVOUS,
    OK,
    READ,
    READWRITE,
    RUNTIME_DIR,
    STALL,
    STRICT_FLAGS,
    WRITE,
    Runtime,
    call_with_timeout,
    compiler,
    runtime_sources,
)
from .model import ModelTask, ScopeTracker, violations

pytestmark = pytest.mark.cc


def gate(g: int) -> tuple[str, int]:
    """In place of a task's spin time in run_program: the task is held until gate g opens."""
    return ("gate", g)


def run_program(r: Runtime, ops, window: int = 0, mode: int = STALL, before_wait=None):
    """Submits ops ("task", accesses, spin_ns or gate(g)) / ("push",) / ("next",) / ("pop",) /
    ("batch", ntasks, grain); next and pop outside any scope are skipped, open scopes are popped
    at the end; then calls before_wait() (which opens the gates), and waits. Returns (model,
    times)."""
    tracker = ScopeTracker()
    tasks: list[ModelTask] = []
    r.lib.harness_reset(max(1, sum(op[0] == "task" for op in ops)))
    assert r.begin(window, mode) == OK
    for op in ops:
        if op[0] == "task":
            tasks.append(ModelTask(op[1], tracker.current()))
            if isinstance(op[2], tuple):
                assert r.gated(len(tasks) - 1, op[1], gate=op[2][1]) == OK, r.error()
            else:
                assert r.submit(len(tasks) - 1, op[1], spin_ns=op[2]) == OK, r.error()
        elif op[0] == "batch":
            assert r.batch(op[1], op[2]) == OK
        elif op[0] == "push":
            assert r.push() == OK
            tracker.push()
        elif op[0] == "next" and tracker.stack:
            assert r.next() == OK
            tracker.next()
        elif op[0] == "pop" and tracker.stack:
            assert r.pop() == OK
            tracker.pop()
    while tracker.stack:
        assert r.pop() == OK
        tracker.pop()
    if before_wait is not None:
        before_wait()
    r.open_gate()
    assert call_with_timeout(r.wait) == OK, r.error()
    return tasks, r.times(len(tasks))


def box(*dims):
    return list(dims)


# ---- building -------------------------------------------------------------------------------------


def test_runtime_compiles_with_strict_flags(tmp_path):
    cc = compiler()
    out = tmp_path / "libwsp_runtime.so"
    proc = subprocess.run([cc, *STRICT_FLAGS, "-I", str(RUNTIME_DIR), *runtime_sources(), "-o",
                           str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_runtime_compiles_with_strict_flags_and_sanitizers(tmp_path, sanitizer):
    """Compile only (no sanitizer runtime needed): -O3 -Werror warnings differ under them."""
    cc = compiler()
    flags = [f for f in STRICT_FLAGS if f != "-shared"] + [f"-fsanitize={sanitizer}", "-c"]
    for src in runtime_sources():
        proc = subprocess.run([cc, *flags, "-I", str(RUNTIME_DIR), src, "-o",
                               str(tmp_path / "out.o")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


# ---- life cycle -----------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_free_without_begin(rtlib, workers):
    rt = rtlib.lib.wsp_runtime_new(workers, 3)
    assert rt != rtlib.ffi.NULL
    expected = workers if workers > 0 else os.cpu_count()
    assert rtlib.lib.wsp_runtime_workers(rt) == expected
    rtlib.lib.wsp_runtime_free(rt)


def test_free_null_and_zero_tensors(rtlib):
    rtlib.lib.wsp_runtime_free(rtlib.ffi.NULL)
    rt = rtlib.lib.wsp_runtime_new(1, 0)
    assert rtlib.lib.wsp_begin(rt, 0, STALL) == OK
    assert rtlib.lib.wsp_wait(rt) == OK
    rtlib.lib.wsp_runtime_free(rt)


def test_several_runtimes_at_once(rtlib):
    results = []

    def work():
        rt = rtlib.lib.wsp_runtime_new(2, 1)
        results.append(rtlib.lib.harness_bulk(rt, 20000, 4, 64, STALL, K_EMPTY, 0))
        results.append(rtlib.lib.harness_bulk(rt, 20000, 0, 0, STALL, K_EMPTY, 0))
        rtlib.lib.wsp_runtime_free(rt)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert results == [OK] * 6


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_independent_tasks_all_run(runtime, workers):
    r = runtime(workers, 1)
    ops = [("task", [(0, WRITE, box((i, i + 1), (0, 4)))], 0) for i in range(300)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    st_ = r.stats()
    assert (st_.tasks, st_.tasks_run, st_.dependencies) == (300, 300, 0)
    assert 1 <= st_.max_in_flight <= 300
    assert st_.execute_ms > 0


def test_runtime_is_reusable_for_several_runs(runtime):
    r = runtime(2, 1)
    for n in (10, 200, 3):
        ops = [("task", [(0, READWRITE, box((0, 1)))], 0) for _ in range(n)]
        tasks, times = run_program(r, ops)
        assert violations(tasks, times) == []
        st_ = r.stats()
        assert (st_.tasks, st_.tasks_run) == (n, n)


def test_free_during_a_run_drops_queued_tasks(rtlib):
    r = Runtime(rtlib, 1, 1)
    r.lib.harness_reset(50)
    assert r.begin() == OK
    # task 0 runs until the run fails (freeing during a run fails it); the rest queue behind it
    assert r.gated(0, [(0, READWRITE, box((0, 1)))], on_error=True) == OK
    for i in range(1, 50):
        assert r.submit(i, [(0, READWRITE, box((0, 1)))]) == OK
    r.flush(0, [(0, 1)])
    r.started(0)
    call_with_timeout(r.free)  # joins the workers: the running kernel finishes
    assert r.lib.harness_finish(0) > 0
    assert [r.lib.harness_start(i) for i in range(1, 50)] == [0] * 49  # the queued ones dropped


# ---- dependencies ---------------------------------------------------------------------------------


def test_raw_war_waw_on_the_same_box(runtime):
    r = runtime(4, 1)
    A = box((0, 8), (0, 8))
    # the writer is held until everything is submitted, so every later task finds it running
    ops = [("task", [(0, WRITE, A)], gate(0)),
           ("task", [(0, READ, A)], 0),
           ("task", [(0, READ, A)], 0),
           ("task", [(0, WRITE, A)], 0),
           ("task", [(0, READWRITE, A)], 0)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    # reads after the writer (2), writer after writer and both readers (3), rw after writer (1):
    # no edge between the two readers (readers do not wait for readers)
    assert r.stats().dependencies == 6
    (s0, f0), (s1, f1), (s2, f2), (s3, f3), (s4, f4) = times
    assert f0 < s1 and f0 < s2 and f1 < s3 and f2 < s3 and f3 < s4


def test_partially_overlapping_boxes(runtime):
    r = runtime(4, 2)
    # round robin: task k is placed on worker k % 4, so tasks 1 and 2 find idle workers
    ops = [("task", [(0, WRITE, box((0, 8)))], gate(0)),
           ("task", [(0, READ, box((8, 16)))], 0),      # disjoint from every write: runs at once
           ("task", [(1, WRITE, box((0, 8)))], 0),      # other tensor: independent
           ("task", [(0, READ, box((4, 12)))], 0),      # RAW on [4, 8)
           ("task", [(0, WRITE, box((6, 7)))], 0)]      # WAW with 0, WAR with 3

    def release():  # tasks 1 and 2 run while task 0 is held
        r.flush(0, box((0, 8)))
        r.started(1)
        r.started(2)

    tasks, times = run_program(r, ops, before_wait=release)
    assert violations(tasks, times) == []
    assert r.stats().dependencies == 3
    assert times[1][0] < times[0][1] and times[2][0] < times[0][1]


def test_multi_dimensional_boxes(runtime):
    r = runtime(4, 1)
    ops = [("task", [(0, WRITE, box((0, 4), (0, 4), (0, 2)))], gate(0)),
           ("task", [(0, WRITE, box((0, 4), (4, 8), (0, 2)))], gate(0)),   # disjoint in dim 1
           ("task", [(0, READ, box((0, 4), (0, 4), (2, 3)))], 0),    # disjoint in dim 2
           ("task", [(0, READ, box((2, 6), (3, 5), (1, 2)))], 0)]    # overlaps 0 and 1

    def release():  # tasks 1 and 2 run while task 0 is held
        r.flush(0, box((0, 4), (0, 4), (0, 2)))
        r.started(1)
        r.started(2)

    tasks, times = run_program(r, ops, before_wait=release)
    assert violations(tasks, times) == []
    assert r.stats().dependencies == 2
    assert times[1][0] < times[0][1] and times[2][0] < times[0][1]


@pytest.mark.parametrize("boxes", [
    [box((0, 4)), box((4, 8))],
    [box((0, 4), (0, 4)), box((0, 4), (4, 8))],
    [box((0, 2), (0, 8), (0, 8)), box((2, 4), (0, 8), (0, 8))],
])
def test_disjoint_boxes_run_concurrently(runtime, boxes):
    """Each kernel waits until both have started: it succeeds only if they overlap in time."""
    r = runtime(2, 1)
    r.lib.harness_reset(2)
    assert r.begin() == OK
    for i, b in enumerate(boxes):
        assert r.submit(i, [(0, WRITE, b)], kernel=K_RENDEZVOUS, scalars=(i, 2)) == OK
    assert r.wait() == OK, r.error()
    assert r.stats().dependencies == 0


# Stealing and spreading: a task another worker could take now never waits for its busy owner
# while that worker sleeps (dispatch.c's wake-up protocol; test_wakeups.py holds a worker at each
# of its races).
def test_idle_worker_steals_from_a_busy_one(runtime):
    """Round robin puts tasks 0 and 2 on worker 0; worker 1, idle after task 1, takes task 2
    (task 0 is held until task 2 has started: without stealing it never would)."""
    r = runtime(2, 1)
    ops = [("task", [(0, WRITE, box((0, 1)))], gate(0)),
           ("task", [(0, WRITE, box((1, 2)))], 0),
           ("task", [(0, WRITE, box((2, 3)))], 0)]

    def release():
        r.flush(0, box((0, 1)))
        r.started(2)

    tasks, times = run_program(r, ops, before_wait=release)
    assert violations(tasks, times) == []
    assert times[2][0] < times[0][1]
    assert r.lib.harness_thread(2) != r.lib.harness_thread(0)


def test_released_successors_of_a_long_kernel_spread(runtime):
    """A writer releases three readers: they must not queue up behind each other (each is held
    until all three have started, which they can only do on three workers). The writer is long
    (its gate opens only once it runs): a tiny kernel's worker may keep its successors, by
    policy (docs/running.md)."""
    r = runtime(4, 1)
    ops = [("task", [(0, WRITE, box((0, 8)))], gate(0))]
    ops += [("task", [(0, READ, box((0, 8)))], gate(1)) for _ in range(3)]

    def release():
        r.flush(0, box((0, 8)))
        r.started(0)
        r.open_gate(0)
        for k in (1, 2, 3):
            r.started(k)

    tasks, times = run_program(r, ops, before_wait=release)
    assert violations(tasks, times) == []
    readers = times[1:]
    assert max(s for s, _ in readers) < min(f for _, f in readers)  # all three overlap
    assert len({r.lib.harness_thread(i) for i in range(1, 4)}) == 3


def test_whole_tensor_access_against_many_tiles(runtime):
    """A query much larger than the records: the class scan path."""
    r = runtime(2, 1)
    tiles = [("task", [(0, WRITE, box((4 * i, 4 * i + 4), (0, 16)))], 20_000) for i in range(300)]
    whole = [("task", [(0, READ, box((0, 1200), (0, 16)))], 0)]
    again = [("task", [(0, WRITE, box((4 * i + 1, 4 * i + 3), (0, 8)))], 0) for i in range(50)]
    tasks, times = run_program(r, tiles + whole + again + whole)
    assert violations(tasks, times) == []


def test_wide_reads_against_one_row_writes_find_exactly_their_writer(runtime):
    """The decode pattern: one-row appends to each sequence's cache, each followed by reads of
    256-row key blocks of that cache (the coarse index's path: a block read would otherwise
    probe 256 cells). Every read waits for the append inside its block and for nothing else,
    including appends registered before the first block read made the index coarser. The
    appends are held until everything is submitted, so every edge is made."""
    r = runtime(2, 1)
    ctx = [3, 300, 511, 0, 257, 255, 600, 64]
    early = [("task", [(0, WRITE, box((b, b + 1), (c, c + 1), (0, 64)))], gate(0))
             for b, c in enumerate(ctx[:4])]
    ops = list(early)
    for b, c in enumerate(ctx):
        if b >= 4:
            ops.append(("task", [(0, WRITE, box((b, b + 1), (c, c + 1), (0, 64)))], gate(0)))
        for j in range(0, c + 1, 256):
            ops.append(("task", [(0, READ, box((b, b + 1), (j, min(j + 256, c + 1)), (0, 64)))],
                        0))
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    # each sequence's read blocks: only the one holding row ctx[b] waits for its append
    assert r.stats().dependencies == len(ctx)


def test_empty_boxes_conflict_with_nothing(runtime):
    r = runtime(2, 1)
    ops = [("task", [(0, WRITE, box((0, 8)))], gate(0)),
           ("task", [(0, WRITE, box((3, 3)))], 0)]

    def release():  # the empty box's writer runs while task 0 is held
        r.flush(0, box((0, 8)))
        r.started(1)

    tasks, times = run_program(r, ops, before_wait=release)
    assert r.stats().dependencies == 0
    assert times[1][0] < times[0][1]


access = st.tuples(st.integers(0, 1), st.sampled_from([READ, WRITE, READWRITE]))


@st.composite
def programs(draw):
    ndim = draw(st.integers(1, 3))
    extent = 24 if ndim == 1 else 6

    def a_box():
        out = []
        for _ in range(ndim):
            lo = draw(st.integers(0, extent - 1))
            out.append((lo, draw(st.integers(lo, min(extent, lo + draw(st.integers(1, 6)))))))
        return out

    ops = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["task"] * 7 + ["push", "next", "pop", "batch"]))
        if kind == "batch":
            ops.append(("batch", draw(st.integers(0, 40)), draw(st.sampled_from([0, 1, 2, 5, 64]))))
        elif kind == "task":
            accs = [(t, m, a_box()) for t, m in draw(st.lists(access, min_size=1, max_size=3))]
            ops.append(("task", accs, draw(st.sampled_from([0, 0, 0, 30_000, 300_000]))))
        else:
            ops.append((kind,))
    return ops


@pytest.fixture(scope="module")
def pool(rtlib):
    """One runtime per worker count, reused by many hypothesis examples."""
    made = {w: Runtime(rtlib, w, 2) for w in (1, 2, 4)}
    yield made
    for r in made.values():
        r.free()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=programs(), workers=st.sampled_from([1, 2, 4]))
def test_random_programs_respect_every_dependency(pool, ops, workers):
    r = pool[workers]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    st_ = r.stats()
    assert st_.tasks == st_.tasks_run == len(tasks)


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("ndim,extent", [(1, 64), (2, 12), (3, 6)])
@pytest.mark.parametrize("scopes", [0, 1, 2, 3, 6, 7])  # bit 0: order scopes, bit 1: batches,
# bit 2: placement on 4 dispatchers (with independent announcements: batches split into parts)
def test_random_programs_in_c(rtlib, workers, ndim, extent, scopes):
    """Larger random programs generated and checked (O(n^2)) inside harness.c."""
    rt = rtlib.lib.wsp_runtime_new(workers, 2)
    edges = rtlib.ffi.new("long *")
    try:
        for seed in (1, 2):
            bad = rtlib.lib.harness_random_run(rt, 1500, seed * 7919 + ndim, ndim, extent, scopes,
                                               0, STALL, 3000, edges)
            assert bad == 0
    finally:
        rtlib.lib.wsp_runtime_free(rt)


# ---- batches --------------------------------------------------------------------------------------


def test_batches_cover_many_tasks_and_still_use_every_worker(runtime):
    r = runtime(2, 1)
    n = 2048
    ops = [("batch", n, 0)] + [("task", [(0, WRITE, box((i, i + 1)))], 20_000) for i in range(n)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    st_ = r.stats()
    assert st_.tasks == st_.tasks_run == n  # counted per task, not per batch
    # 2048 / (2 workers * 16) = 64 tasks per batch: 32 batches, both workers busy
    assert st_.batches == n // 64
    assert len({r.lib.harness_thread(i) for i in range(n)}) == 2


def test_a_batch_runs_its_tasks_in_submission_order(runtime):
    """Tasks of one batch (grain 8) conflict pairwise, and still run one after another."""
    r = runtime(2, 1)
    ops = [("batch", 8, 8)] + [("task", [(0, READWRITE, box((0, 4)))], 1000) for _ in range(8)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    assert r.stats().batches == 1
    starts = [s for s, _ in times]
    assert starts == sorted(starts)


def test_batches_go_on_over_order_steps_and_end_with_the_scope(runtime):
    r = runtime(2, 1)
    ops = ([("batch", 100, 64), ("push",)] +
           [("task", [(0, WRITE, box((i, i + 1)))], 0) for i in range(5)] + [("next",)] +
           [("task", [(0, READ, box((0, 5)))], 0) for _ in range(3)] + [("pop",)] +
           [("batch", 4, 4)] + [("task", [(0, WRITE, box((i, i + 1)))], 0) for i in range(6)])
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    # [5 writers, next, 3 readers] up to the pop | [4 covered by the second call] | 2 single tasks
    assert r.stats().batches == 2
    assert r.stats().tasks == 14


def test_a_step_split_by_a_batch_still_orders_its_later_tasks(runtime):
    """A batch holding steps 0 and 1 fills up in step 1; the rest of step 1 must still wait
    for step 0 (inside the batch), and step 2 for all of step 1."""
    r = runtime(2, 1)
    ops = ([("push",), ("task", [(0, WRITE, box((0, 1)))], 0), ("batch", 5, 3)] +
           [("task", [(0, WRITE, box((i, i + 1)))], 200_000) for i in range(1, 3)] + [("next",)] +
           [("task", [(0, WRITE, box((i, i + 1)))], 0) for i in range(3, 8)] + [("next",)] +
           [("task", [(0, WRITE, box((i, i + 1)))], 0) for i in range(8, 10)] + [("pop",)])
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []


def test_kernel_failure_inside_a_batch_reports_that_task(runtime):
    r = runtime(1, 1)
    r.lib.harness_reset(10)
    assert r.begin() == OK
    assert r.batch(10, 10) == OK
    for i in range(10):
        assert r.submit(i, [(0, WRITE, box((i, i + 1)))], fail=3 if i == 4 else 0, kernel_index=2,
                        stmt=5, coords=(i,)) == OK
    assert r.wait() == ERR_KERNEL
    msg = r.error()[1]
    assert "kernel 2 (statement 5) failed at coords [4] with code 3" in msg
    st_ = r.stats()
    assert st_.tasks == 10 and st_.tasks_run == 5  # the batch stopped at its failing task


@pytest.mark.parametrize("grain", [0, 3, 64])
@pytest.mark.parametrize("window", [1, 2, 5])
def test_window_counts_the_tasks_of_batches(rtlib, grain, window):
    r = Runtime(rtlib, 2, 1)
    try:
        rtlib.lib.harness_set_grain(grain)
        for chains in (0, 1, 3):
            rc = call_with_timeout(
                lambda chains=chains: rtlib.lib.harness_bulk(r.rt, 5000, chains, window, STALL,
                                                             K_EMPTY, 0))
            assert rc == OK
            assert r.stats().tasks == 5000 and r.stats().max_in_flight <= window
    finally:
        rtlib.lib.harness_set_grain(1)
        r.free()


def test_window_abort_counts_the_open_batch(runtime):
    r = runtime(1, 1)
    r.lib.harness_reset(20)
    assert r.begin(3, ABORT) == OK
    assert r.batch(20, 64) == OK
    codes = [r.submit(i, [(0, WRITE, box((i, i + 1)))], spin_ns=1_000) for i in range(5)]
    assert codes[:3] == [OK] * 3 and codes[3] == ERR_WINDOW
    assert r.wait() == ERR_WINDOW


def test_batch_outside_a_run_is_a_usage_error(runtime):
    r = runtime(1, 1)
    assert r.batch(10, 2) == ERR_USAGE
    assert "wsp_batch called outside" in r.error()[1]


def test_rank_mismatch_inside_one_batch_is_a_usage_error(runtime):
    r = runtime(1, 1)
    assert r.begin() == OK
    assert r.batch(4, 4) == OK
    assert r.submit(0, [(0, WRITE, box((0, 1)))], kernel=K_EMPTY) == OK
    assert r.submit(1, [(0, WRITE, box((0, 1), (0, 1)))], kernel=K_EMPTY) == ERR_USAGE
    assert r.wait() == ERR_USAGE
    assert "2 dimensions after 1" in r.error()[1]


# ---- order scopes ---------------------------------------------------------------------------------


def test_seq_loops_nested_in_a_grid(runtime):
    """for b in P(2) { for i in P.seq(4) { for j in P(3) { t[b, i, j] } } } on disjoint boxes."""
    r = runtime(4, 1)
    ops, ids = [], {}
    for b in range(2):
        ops.append(("push",))
        for i in range(4):
            if i:
                ops.append(("next",))
            for j in range(3):
                ids[b, i, j] = len(ids)
                ops.append(("task", [(0, WRITE, box((b, b + 1), (i, i + 1), (j, j + 1)))],
                            200_000))
        ops.append(("pop",))
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    for b in range(2):
        for i in range(3):
            last_finish = max(times[ids[b, i, j]][1] for j in range(3))
            first_start = min(times[ids[b, i + 1, j]][0] for j in range(3))
            assert last_finish < first_start
    # one barrier edge per task after the first step, none between the two grid iterations
    assert r.stats().dependencies <= 2 * 3 * 3


def test_nested_seq_scopes_order_everything(runtime):
    r = runtime(4, 1)
    ops = [("push",)]
    for i in range(3):
        if i:
            ops.append(("next",))
        ops.append(("push",))
        for j in range(3):
            if j:
                ops.append(("next",))
            ops.append(("task", [(0, WRITE, box((3 * i + j, 3 * i + j + 1)))], 50_000))
        ops.append(("pop",))
    ops.append(("pop",))
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    for k in range(len(times) - 1):
        assert times[k][1] < times[k + 1][0]


def test_sequential_block_with_empty_steps(runtime):
    """sequential { a * 3; (nothing); b * 2 }: b waits for all of a, across the empty step."""
    r = runtime(4, 1)
    ops = [("push",)]
    ops += [("task", [(0, WRITE, box((i, i + 1)))], 300_000) for i in range(3)]
    ops += [("next",), ("next",)]
    ops += [("task", [(0, WRITE, box((10 + i, 11 + i)))], 0) for i in range(2)]
    ops += [("pop",), ("task", [(0, WRITE, box((20, 21)))], 0)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    assert max(f for _, f in times[:3]) < min(s for s, _ in times[3:5])
    assert r.stats().dependencies <= 2  # one barrier edge for each of b; none for the last task


def test_inner_scope_waits_for_the_outer_previous_step(runtime):
    r = runtime(4, 1)
    ops = [("push",), ("task", [(0, WRITE, box((0, 1)))], 20_000_000), ("next",),
           ("push",), ("task", [(0, WRITE, box((1, 2)))], 0), ("pop",), ("pop",)]
    tasks, times = run_program(r, ops)
    assert times[0][1] < times[1][0]


def test_order_misuse_is_a_usage_error(runtime):
    r = runtime(1, 1)
    assert r.begin() == OK
    assert r.next() == ERR_USAGE
    assert "no open order scope" in r.error()[1]
    assert r.wait() == ERR_USAGE
    assert r.begin() == OK
    assert r.push() == OK
    assert r.submit(0, [], kernel=K_EMPTY) == OK
    assert r.wait() == ERR_USAGE  # a scope was left open
    assert "order scope" in r.error()[1]


# ---- the window -----------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("window", [1, 2, 5])
def test_window_stall_bounds_tasks_in_flight(runtime, workers, window):
    r = runtime(workers, 1)
    ops = [("task", [(0, WRITE, box((i % 7, i % 7 + 1)))], 20_000) for i in range(120)]
    tasks, times = call_with_timeout(lambda: run_program(r, ops, window, STALL))
    assert violations(tasks, times) == []
    st_ = r.stats()
    assert 1 <= st_.max_in_flight <= window
    assert r.lib.harness_max_running() <= window


@pytest.mark.parametrize("workers", [1, 2])
def test_window_stall_never_deadlocks_on_chains(rtlib, workers):
    r = Runtime(rtlib, workers, 1)
    try:
        for window, chains in ((1, 1), (2, 3), (8, 1), (8, 20), (64, 5)):
            rc = call_with_timeout(
                lambda chains=chains, window=window: rtlib.lib.harness_bulk(
                    r.rt, 20000, chains, window, STALL, K_EMPTY, 0))
            assert rc == OK
            assert r.stats().max_in_flight <= window
    finally:
        r.free()


def test_window_abort_fails_the_run(runtime):
    r = runtime(1, 1)
    r.lib.harness_reset(20)
    assert r.begin(3, ABORT) == OK
    codes = [r.gated(i, [(0, WRITE, box((i, i + 1)))]) for i in range(5)]  # held: none finishes
    assert codes[:3] == [OK] * 3
    assert codes[3] == ERR_WINDOW and codes[4] == ERR_WINDOW
    r.open_gate()
    assert r.wait() == ERR_WINDOW
    code, msg = r.error()
    assert code == ERR_WINDOW and "window of 3 tasks" in msg
    assert r.stats().max_in_flight <= 3


# ---- errors ---------------------------------------------------------------------------------------


def test_kernel_failure_stops_the_run_and_reports(runtime):
    r = runtime(1, 1)
    r.lib.harness_reset(100)
    assert r.begin() == OK
    # task 0 runs first, is held until every later task is queued behind it, and fails
    assert r.gated(0, [(0, WRITE, box((0, 1)))], fail=1, kernel_index=4, stmt=9,
                   coords=(3, 17)) == OK
    for i in range(1, 100):
        assert r.submit(i, [(0, WRITE, box((i, i + 1)))]) == OK
    r.open_gate()
    assert r.wait() == ERR_KERNEL
    code, msg = r.error()
    assert code == ERR_KERNEL
    assert "kernel 4" in msg and "statement 9" in msg and "[3, 17]" in msg
    assert "failed on purpose" in msg
    st_ = r.stats()
    assert st_.tasks == 100 and st_.tasks_run == 1  # queued tasks were dropped, not run


def test_submits_after_a_kernel_failure_return_the_error(runtime):
    r = runtime(2, 1)
    r.lib.harness_reset(8)
    assert r.begin() == OK
    assert r.submit(0, [(0, WRITE, box((0, 1)))], fail=7) == OK
    # the enumerator learns of the failure (here from an await on the failed task's box) ...
    assert call_with_timeout(lambda: r.await_(0, [(0, 1)])) == ERR_KERNEL
    # ... and every later submission returns it
    for i in range(1, 4):
        assert r.submit(i, [(0, READ, box((0, 1)))]) == ERR_KERNEL
    assert r.wait() == ERR_KERNEL
    assert "with code 7" in r.error()[1]
    assert r.stats().tasks_run == 1


def test_first_error_wins_and_the_runtime_is_reusable(runtime):
    r = runtime(2, 1)
    assert r.begin() == OK
    assert r.fail(ERR_VIEW, b"VIEW 1 [2] 3 4") == ERR_VIEW
    assert r.fail(ERR_KERNEL, b"second") == ERR_VIEW
    assert r.submit(0, [(0, WRITE, box((0, 1)))], kernel=K_EMPTY) == ERR_VIEW
    assert r.push() == ERR_VIEW
    assert r.wait() == ERR_VIEW
    assert r.error() == (ERR_VIEW, "VIEW 1 [2] 3 4")
    # a new run starts clean
    ops = [("task", [(0, READWRITE, box((0, 1)))], 0) for _ in range(20)]
    tasks, times = run_program(r, ops)
    assert violations(tasks, times) == []
    assert r.error() == (OK, "")
    assert r.stats().tasks_run == 20


def test_long_messages_are_truncated(runtime):
    r = runtime(1, 1)
    assert r.begin() == OK
    assert r.fail(ERR_VIEW, b"x" * 10000) == ERR_VIEW
    assert r.wait() == ERR_VIEW
    msg = r.error()[1]
    assert 100 < len(msg) < 1024 and set(msg) == {"x"}


@pytest.mark.parametrize("mutate,needle", [
    (lambda t: setattr(t.access[0], "tensor", 7), "tensor 7"),
    (lambda t: setattr(t.access[0], "mode", 9), "mode 9"),
    (lambda t: setattr(t.access[0], "ndim", 9), "9 dimensions"),
    (lambda t: (setattr(t.access[0], "ndim", 1), t.access[0].lo.__setitem__(0, 5),
                t.access[0].hi.__setitem__(0, 2)), "[5, 2)"),
    (lambda t: setattr(t, "ntiles", 17), "17 tiles"),
    (lambda t: setattr(t, "fn", __import__("cffi").FFI().NULL), "no function"),
])
def test_malformed_tasks_are_usage_errors(runtime, mutate, needle):
    r = runtime(1, 2)
    assert r.begin() == OK
    t = r.task
    t.fn = r.lib.harness_kernel(K_EMPTY)
    t.ntiles, t.nscalars, t.ncoords = 1, 0, 0
    a = t.access[0]
    a.tensor, a.mode, a.ndim = 0, WRITE, 1
    a.lo[0], a.hi[0] = 0, 1
    mutate(t)
    assert r.lib.wsp_submit(r.rt, t) == ERR_USAGE
    assert r.wait() == ERR_USAGE
    assert needle in r.error()[1]


def test_inconsistent_rank_is_a_usage_error(runtime):
    r = runtime(1, 1)
    assert r.begin() == OK
    assert r.submit(0, [(0, WRITE, box((0, 1)))], kernel=K_EMPTY) == OK
    assert r.submit(1, [(0, WRITE, box((0, 1), (0, 1)))], kernel=K_EMPTY) == ERR_USAGE
    assert r.wait() == ERR_USAGE
    assert "2 dimensions after 1" in r.error()[1]


def test_calls_outside_a_run_are_usage_errors(runtime):
    r = runtime(1, 1)
    assert r.submit(0, [], kernel=K_EMPTY) == ERR_USAGE
    assert r.begin() == OK  # begin clears the error
    assert r.begin() == ERR_USAGE
    assert r.wait() == ERR_USAGE
    assert r.begin(0, 7) == ERR_USAGE
    assert r.wait() == ERR_USAGE
    assert "window mode 7" in r.error()[1]


# ---- placement ------------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_pinned_placement_runs_every_task_on_its_dispatchers_worker(rtlib, workers):
    """Many short runs under round_robin(3) placement: no wake-up may be lost (a pinned task
    can only be run by its owner, so nobody else may be woken in its place)."""
    r = Runtime(rtlib, workers, 1)
    try:
        def body():
            for run in range(150):
                n = 1 + run % 23
                r.lib.harness_reset(n)
                assert r.begin() == OK
                assert r.lib.wsp_schedule(r.rt, 3, 0, 0) == OK
                for i in range(n):
                    r.task.dispatcher = i % 3
                    chain = [(0, READ, box((i - 1, i)))] if i and run % 2 else []
                    assert r.submit(i, [(0, WRITE, box((i, i + 1)))] + chain,
                                    spin_ns=2000 if i % 5 == 0 else 0) == OK
                assert r.wait() == OK, r.error()
                for i in range(n):
                    assert r.lib.harness_thread(i) >= 0
            return True
        assert call_with_timeout(body)
    finally:
        r.free()


@pytest.mark.parametrize("flags", [0, 1])  # 1: WSP_BATCH_INDEPENDENT
def test_batches_under_placement_keep_every_task_on_its_dispatchers_worker(runtime, flags):
    """round_robin(4) on 2 workers, the nest announced with wsp_batch: independent tasks are
    still packed (into batches split into one part per worker; without the flag consecutive
    tasks alternate between workers, so no batch forms), yet dispatcher d's tasks all run on one
    thread, d and d + 2 share it, and a second nest that reads the first one's boxes still
    waits for their writers."""
    r = runtime(2, 1)
    n = 512
    r.lib.harness_reset(2 * n)
    assert r.begin() == OK
    assert r.lib.wsp_schedule(r.rt, 4, 0, 0) == OK
    assert r.batch(n, 0, flags) == OK
    for i in range(n):
        r.task.dispatcher = i % 4
        assert r.submit(i, [(0, WRITE, box((i, i + 1)))], spin_ns=500 if i % 7 == 0 else 0) == OK
    assert r.batch(n, 0, flags) == OK
    for i in range(n):  # reads box n - 1 - i of the first nest: every task waits for one writer
        r.task.dispatcher = i % 4
        assert r.submit(n + i, [(0, READ, box((n - 1 - i, n - i))),
                                (0, WRITE, box((n + i, n + i + 1)))]) == OK
    assert r.wait() == OK, r.error()
    st_ = r.stats()
    assert st_.tasks == st_.tasks_run == 2 * n
    if flags:
        assert 2 < st_.batches < n  # packed, not task by task
    else:
        assert st_.batches == 0
    thread_of = {}
    for i in range(2 * n):
        thread_of.setdefault(i % 4 % 2, set()).add(r.lib.harness_thread(i))
    assert all(len(t) == 1 for t in thread_of.values())
    assert thread_of[0] != thread_of[1]
    for i in range(n):
        assert r.lib.harness_finish(n - 1 - i) < r.lib.harness_start(n + i)


def test_placement_errors_are_usage_errors(runtime):
    r = runtime(2, 1)
    assert r.begin() == OK
    assert r.lib.wsp_schedule(r.rt, 2, 0, 2) == OK
    r.task.dispatcher, r.task.stream = 5, 0
    assert r.submit(0, [(0, WRITE, box((0, 1)))], kernel=K_EMPTY) == ERR_USAGE
    assert "dispatcher 5 of 2" in r.error()[1]
    assert r.wait() == ERR_USAGE
    assert r.begin() == OK
    assert r.submit(0, [(0, WRITE, box((0, 1)))], kernel=K_EMPTY) == OK
    assert r.lib.wsp_schedule(r.rt, 2, 0, 0) == ERR_USAGE  # after a task: too late
    assert r.wait() == ERR_USAGE
