/* hooks.c: the runtime's test hook (wsp_internal.h, WSP_TEST_HOOKS) and gated kernels, for the
 * tests of the workers' sleep and wake-up protocol (test_wakeups.py).
 *
 * A race between a worker going to sleep and a thread publishing work has a window of a few
 * instructions; waiting for it to open by chance makes a flaky test. Here the test holds one
 * worker at a decision point of dispatch.c (wsp__test_hook), does the racing step while it is
 * held, then lets it go: the interleaving is a fact of the test, not a matter of timing. Gated
 * kernels keep a worker busy until the test opens their gate, so "busy" is a fact too.
 *
 * Every wait here is a hang guard (GUARD_NS, generous), never a measurement: a guard that runs
 * out is reported to the test, which fails. Test-only code: global state, one test at a time.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "wsp_internal.h"

#define GUARD_NS (60LL * 1000000000LL)
#define NGATES 16
#define NTASKS 64

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pause_50us(void) {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* ---- holding a worker ------------------------------------------------------------------------ */

static _Atomic(wsp_runtime *) hold_rt;   /* armed while non-NULL */
static atomic_int hold_point, hold_worker;
static atomic_int held;                  /* 0: not yet, 1: held now, 2: held and let go */
static atomic_int released;

/* The first time worker `worker` of `rt` reaches `point` after hooks_hold armed it, it waits
 * there until hooks_release (or the guard); every other call returns at once. */
void wsp__test_hook(wsp_runtime *rt, int point, int32_t worker) {
    if (atomic_load(&hold_rt) != rt || atomic_load(&hold_point) != point ||
        atomic_load(&hold_worker) != worker)
        return;
    wsp_runtime *armed = rt;
    if (!atomic_compare_exchange_strong(&hold_rt, &armed, NULL)) return;   /* once */
    atomic_store(&held, 1);
    int64_t end = now_ns() + GUARD_NS;
    while (!atomic_load(&released) && now_ns() < end) pause_50us();
    atomic_store(&held, 2);
}

void hooks_hold(wsp_runtime *rt, int point, int worker) {
    atomic_store(&held, 0);
    atomic_store(&released, 0);
    atomic_store(&hold_point, point);
    atomic_store(&hold_worker, worker);
    atomic_store(&hold_rt, rt);
}

/* 1 once the armed worker is held, 0 if it did not get there within the guard. */
int hooks_wait_held(void) {
    int64_t end = now_ns() + GUARD_NS;
    while (atomic_load(&held) == 0) {
        if (now_ns() > end) return 0;
        pause_50us();
    }
    return 1;
}

/* Lets the held worker go on (and disarms a hold that never happened). */
void hooks_release(void) {
    atomic_store(&hold_rt, NULL);
    atomic_store(&released, 1);
}

/* ---- the workers' state ---------------------------------------------------------------------- */

/* Waits until every worker of rt has announced its sleep; 1, or 0 after the guard. */
int hooks_settle(wsp_runtime *rt) {
    int64_t end = now_ns() + GUARD_NS;
    for (;;) {
        int32_t asleep = 0;
        for (int32_t i = 0; i < rt->nworkers; i++)
            asleep += atomic_load(&rt->queues[i].sleeping) != 0;
        if (asleep == rt->nworkers) return 1;
        if (now_ns() > end) return 0;
        pause_50us();
    }
}

int hooks_max_spinners(wsp_runtime *rt) { return rt->max_spinners; }

/* ---- gated kernels --------------------------------------------------------------------------- */

static atomic_int gates[NGATES];
static atomic_long started[NTASKS];      /* a number for the thread that started task i, or 0 */
static _Thread_local char thread_marker;

/* Closes every gate and forgets which tasks started. */
void hooks_reset(void) {
    for (int g = 0; g < NGATES; g++) atomic_store(&gates[g], 0);
    for (int i = 0; i < NTASKS; i++) atomic_store(&started[i], 0);
}

/* Opens gate g (every gate when g < 0). */
void hooks_open(int g) {
    for (int k = 0; k < NGATES; k++)
        if (g < 0 || g == k) atomic_store(&gates[k], 1);
}

/* scalars: [0] task id (0 .. NTASKS - 1), [1] its gate (0 .. NGATES - 1), or -1 for none. It
 * records that it started, then returns once its gate is open (it fails after the guard). */
static int k_gated(const wsp_tile *tiles, const wsp_scalar *s) {
    (void)tiles;
    int64_t id = s[0].i, g = s[1].i;
    if (id < 0 || id >= NTASKS || g < -1 || g >= NGATES) return wsp_kernel_fail("bad scalars");
    atomic_store(&started[id], (long)(intptr_t)&thread_marker);
    if (g < 0) return 0;
    int64_t end = now_ns() + GUARD_NS;
    while (!atomic_load(&gates[g])) {
        if (now_ns() > end) return wsp_kernel_fail("gate never opened");
        pause_50us();
    }
    return 0;
}

wsp_kernel_fn hooks_gated_kernel(void) { return k_gated; }

/* A number for the thread that started task `id`, or 0 if it has not started. */
long hooks_started(long id) { return id >= 0 && id < NTASKS ? atomic_load(&started[id]) : 0; }

/* Waits until task `id` has started: its thread's number, or 0 after the guard. */
long hooks_wait_started(long id) {
    int64_t end = now_ns() + GUARD_NS;
    for (;;) {
        long s = hooks_started(id);
        if (s || now_ns() > end) return s;
        pause_50us();
    }
}

/* Waits until task a or task b has started: 1, or 0 after the guard. */
int hooks_wait_either(long a, long b) {
    int64_t end = now_ns() + GUARD_NS;
    for (;;) {
        if (hooks_started(a) || hooks_started(b)) return 1;
        if (now_ns() > end) return 0;
        pause_50us();
    }
}
