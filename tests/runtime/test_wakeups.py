"""No lost wake-ups in the runtime's workers (runtime_c/dispatch.c): a ready task that an idle
worker could take never waits for a busy worker because the idle one went to sleep.

Each test sets up the race's interleaving instead of waiting for it: hooks.c holds one worker at
a decision point of dispatch.c (WSP_HOOK_SLEEP: after its last look at the queues, before it
announces its sleep; WSP_HOOK_SPIN: counted as a spinner, before it spins), the test publishes
work while it is held, then lets it go. The worker that owns the work is kept busy by a gated
kernel (hooks.c), which returns only when the test opens its gate, and the task the idle worker
should take holds nothing up until it has started: so a lost wake-up is a task that never
starts (a hang guard reports it), not a slow run. No test measures time."""

from __future__ import annotations

import pytest

from .conftest import OK, READ, WRITE, Runtime

pytestmark = pytest.mark.cc

HOOK_SPIN, HOOK_SLEEP, HOOK_WAKE = 1, 2, 3  # wsp_internal.h


class Gated:
    """A runtime with every task on the dispatcher the test names (wsp_schedule with stealing:
    dispatcher d's tasks are queued at worker d, and idle workers may take them) and gated
    kernels from hooks.c."""

    def __init__(self, r: Runtime):
        self.r, self.lib, self.ffi = r, r.lib, r.ffi
        self.lib.hooks_reset()
        assert r.begin() == OK
        assert self.lib.wsp_schedule(r.rt, r.lib.wsp_runtime_workers(r.rt), 1, 0) == OK
        # idle from the start: every worker asleep, so that no worker but the one a test wakes
        # or holds can take a task before the test wants it to
        assert self.lib.hooks_settle(r.rt) == 1, "the workers never went to sleep"

    def task(self, tid: int, worker: int, box, mode: int = WRITE, gate: int = -1) -> None:
        """Task `tid` queued at `worker`, accessing cell range `box` of tensor 0 in `mode`; with
        a gate >= 0, it runs until the test opens that gate."""
        t = self.r.task
        t.fn = self.lib.hooks_gated_kernel()
        t.ntiles, t.nscalars, t.ncoords = 1, 2, 0
        t.scalars[0].i, t.scalars[1].i = tid, gate
        a = t.access[0]
        a.tensor, a.mode, a.ndim = 0, mode, 1
        a.lo[0], a.hi[0] = box
        t.dispatcher = worker
        assert self.lib.wsp_submit(self.r.rt, t) == OK, self.r.error()

    def show(self, box) -> None:
        """Shows the workers every staged ready task, as the runtime does when the enumerator
        is about to block (a probe that finds an unfinished writer of `box` flushes)."""
        a = self.ffi.new("wsp_access *")
        a.tensor, a.mode, a.ndim = 0, READ, 1
        a.lo[0], a.hi[0] = box
        assert self.lib.wsp_probe(self.r.rt, a) == 1

    def hold(self, point: int, worker: int, wake_box) -> None:
        """Holds `worker` at `point` the next time it gets there: it is woken with a task of its
        own (writing `wake_box`; id 63), runs it, and is held once it is idle again."""
        self.lib.hooks_hold(self.r.rt, point, worker)
        self.task(63, worker, wake_box)
        self.show(wake_box)
        assert self.lib.hooks_wait_held() == 1, f"worker {worker} never reached the hook"

    def started(self, tid: int) -> int:
        """Waits until task `tid` has started (a hang guard): its thread's number, 0 if never."""
        return self.lib.hooks_wait_started(tid)

    def finish(self) -> None:
        self.lib.hooks_release()
        self.lib.hooks_open(-1)
        assert self.r.wait() == OK, self.r.error()


@pytest.fixture
def gated(runtime):
    made: list[Gated] = []

    def make(workers: int) -> Gated:
        g = Gated(runtime(workers, 1))
        made.append(g)
        return g

    yield make
    for g in made:  # a failed test leaves gates closed and maybe a worker held
        g.lib.hooks_release()
        g.lib.hooks_open(-1)


def test_a_worker_about_to_sleep_takes_work_published_to_a_busy_owner(gated):
    """The submitter publishes T to busy worker 0's queue and looks for a sleeper to wake while
    worker 1, idle, has looked at every queue but not yet announced its sleep: worker 1 must
    see T (it looks again after announcing), or the submitter must see it sleeping."""
    g = gated(2)
    g.hold(HOOK_SLEEP, 1, wake_box=(10, 11))
    g.task(0, 0, (0, 1), gate=0)  # G: keeps worker 0 busy
    g.show((0, 1))
    assert g.started(0)
    g.task(1, 0, (1, 2))  # T, queued at busy worker 0
    g.show((1, 2))  # published; nobody sleeps yet, so nobody is woken
    g.lib.hooks_release()
    taker = g.started(1)
    assert taker, "T waited for its busy owner while worker 1 slept (a lost wake-up)"
    assert taker != g.lib.hooks_started(0)
    g.finish()


def test_a_worker_about_to_sleep_takes_a_successor_released_by_a_busy_worker(gated):
    """A long kernel on worker 0 releases two successors: worker 0 keeps one, queues the other
    in its own queue and looks for a sleeper to wake, while worker 1, idle, has not yet
    announced its sleep. Each successor runs until both have started, so worker 1 must take
    the queued one."""
    g = gated(2)
    g.hold(HOOK_SLEEP, 1, wake_box=(10, 11))
    g.task(0, 0, (0, 4), gate=0)  # the writer, long (held until both readers are submitted)
    g.show((0, 4))
    assert g.started(0)
    g.task(1, 0, (0, 4), mode=READ, gate=1)
    g.task(2, 0, (0, 4), mode=READ, gate=1)
    g.lib.hooks_open(0)
    assert g.lib.hooks_wait_either(1, 2) == 1, "neither reader started"
    g.lib.hooks_release()  # worker 0 has released both: it runs one of them
    assert g.started(1) and g.started(2), \
        "a released successor waited for its busy worker while worker 1 slept (a lost wake-up)"
    assert g.lib.hooks_started(1) != g.lib.hooks_started(2)
    g.finish()


def test_a_long_kernels_successor_queued_at_another_busy_worker_wakes_a_sleeper(gated):
    """A long kernel on worker 0 releases two successors whose dispatcher is worker 1, busy with
    a gated task: worker 0 keeps one and queues the other at worker 1. Worker 2 sleeps: it must
    be woken to take that one (each successor runs until both have started), not left to wait
    for worker 1's task. No hook: every worker but the two busy ones is asleep."""
    g = gated(3)
    g.task(5, 1, (20, 21), gate=2)  # B: keeps worker 1 busy
    g.show((20, 21))
    assert g.started(5)
    g.task(0, 0, (0, 4), gate=0)  # the writer, long (held until both readers are submitted)
    g.show((0, 4))
    assert g.started(0)
    g.task(1, 1, (0, 4), mode=READ, gate=1)
    g.task(2, 1, (0, 4), mode=READ, gate=1)
    g.lib.hooks_open(0)
    assert g.started(1) and g.started(2), \
        "a successor queued at a busy worker waited for it while worker 2 slept (a lost wake-up)"
    assert len({g.lib.hooks_started(i) for i in (5, 1, 2)}) == 3
    g.finish()


def test_a_spinner_that_finds_its_own_work_passes_on_what_it_was_counted_on_for(gated):
    """Worker 1 spins; the submitter publishes T to busy worker 0's queue and wakes nobody
    (an idle spinner will steal it), but then worker 1 finds a task of its own, U, and runs it.
    Worker 2 sleeps: it must be woken for T. U runs until T has started."""
    g = gated(3)
    if g.lib.hooks_max_spinners(g.r.rt) < 1:
        g.finish()
        pytest.skip("one online CPU: workers never spin")
    g.task(0, 0, (0, 1), gate=0)  # G: keeps worker 0 busy
    g.show((0, 1))
    assert g.started(0)
    g.hold(HOOK_SPIN, 1, wake_box=(10, 11))  # worker 1 counted as a spinner, held
    g.task(1, 0, (1, 2))  # T, at busy worker 0: the submitter counts on the spinner
    g.task(2, 1, (2, 3), gate=1)  # U, worker 1's own
    g.show((2, 3))
    g.lib.hooks_release()
    assert g.started(2), "worker 1 never ran its own task"
    assert g.started(1), "T waited for busy workers while worker 2 slept (a lost wake-up)"
    g.finish()


def test_a_sleeper_another_thread_woke_is_not_the_one_woken_for_a_second_task(gated):
    """Worker 0, done with a long kernel, queues one of its two successors in its own queue and
    picks sleeping worker 1 to take it; before it wakes worker 1, the submitter wakes worker 1
    for a task of its own. Worker 1 is busy with that task now, so worker 0 must wake another
    sleeper (worker 2 or 3) for the successor, not send worker 1 a second wake-up."""
    g = gated(4)
    g.task(0, 0, (0, 4), gate=0)  # the writer, long (held until both readers are submitted)
    g.show((0, 4))
    assert g.started(0)
    g.task(1, 0, (0, 4), mode=READ, gate=1)
    g.task(2, 0, (0, 4), mode=READ, gate=1)
    g.lib.hooks_hold(g.r.rt, HOOK_WAKE, 0)
    g.lib.hooks_open(0)
    assert g.lib.hooks_wait_held() == 1, "worker 0 never looked for a sleeper"
    g.task(3, 1, (10, 11), gate=2)  # worker 1's own: the submitter wakes it
    g.show((10, 11))
    assert g.started(3)
    g.lib.hooks_release()
    assert g.started(1) and g.started(2), \
        "a successor waited for its busy worker while two workers slept (a lost wake-up)"
    assert len({g.lib.hooks_started(i) for i in (1, 2, 3)}) == 3
    g.finish()


def test_a_staged_task_is_shown_and_a_sleeper_woken_within_the_stale_rule(gated):
    """docs/running.md: a task the program has not yet shown to the workers waits for at most
    256 further submissions (WSP_STALE), even if the program never waits. T, queued at busy
    worker 0, is staged (no spinner to show it to); 256 submissions later (tasks that wait for
    worker 0's kernel, so none of them wakes anyone) worker 1, asleep, must take it."""
    g = gated(2)
    g.task(0, 0, (0, 1), gate=0)  # G: keeps worker 0 busy
    g.show((0, 1))
    assert g.started(0)
    g.task(1, 0, (1, 2))  # T: staged, not shown
    for _ in range(256):
        g.task(62, 1, (0, 1), mode=READ)
    assert g.started(1), "T stayed staged past the stale rule while worker 1 slept"
    assert g.lib.hooks_started(1) != g.lib.hooks_started(0)
    g.finish()
