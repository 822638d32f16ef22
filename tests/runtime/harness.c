/* harness.c: kernels and drivers for the runtime tests (tests/runtime/).
 *
 * Kernels record when they start and finish on one global sequence counter, so a test can check
 * "task j started after task i finished" without trusting clocks. A gated kernel (K_GATE) does
 * not finish until the test opens its gate, so "still running" and "returned without waiting
 * for it" are facts, not races against a busy loop's length. Drivers submit many tasks from C
 * (random programs with their own brute-force checker, chains) where Python would be too slow.
 * Test-only code: global state is fine here, one test runs at a time.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsp_runtime.h"

/* scalars of the recording kernels: [0] task id, [1] busy time in ns, [2] nonzero to fail;
 * K_STORE also [3]: a value it stores (a plain store) into tile 0's first int64_t element;
 * K_GATE: [1] its gate (0 .. NGATES - 1), [3] a wsp_runtime * whose error also opens it, or 0;
 * K_GATE_STORE: K_GATE's scalars, and [4] a value it stores into tile 0 as K_STORE does */
enum { K_RECORD = 0, K_EMPTY = 1, K_RENDEZVOUS = 2, K_STORE = 3, K_GATE = 4, K_GATE_STORE = 5 };

static atomic_long seq_clock;
static long *starts, *finishes, *threads;
static long capacity;
static atomic_long running, max_running;
static atomic_long arrived;

/* Gates: closed by harness_reset, opened by the test. A gated kernel polls its gate every 50 us
 * (sleeping, so a loaded machine keeps its cores) and gives up after GATE_GUARD_NS with a
 * failure: a guard against hanging a failed test, never what a test measures. */
#define NGATES 64
#define GATE_GUARD_NS (120LL * 1000000000LL)
static atomic_int gates[NGATES];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void busy(int64_t ns) {
    if (ns <= 0) return;
    int64_t end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

int harness_reset(long n) {
    free(starts);
    free(finishes);
    free(threads);
    starts = calloc((size_t)(n > 0 ? n : 1), sizeof *starts);
    finishes = calloc((size_t)(n > 0 ? n : 1), sizeof *finishes);
    threads = calloc((size_t)(n > 0 ? n : 1), sizeof *threads);
    capacity = n;
    atomic_store(&seq_clock, 0);
    atomic_store(&running, 0);
    atomic_store(&max_running, 0);
    atomic_store(&arrived, 0);
    for (int g = 0; g < NGATES; g++) atomic_store(&gates[g], 0);
    return starts && finishes && threads ? 0 : -1;
}

/* Read while tasks run (a gated task's finish is 0 until its gate opens): atomic loads. */
long harness_start(long id) {
    return id >= 0 && id < capacity ? __atomic_load_n(&starts[id], __ATOMIC_ACQUIRE) : -1;
}
long harness_finish(long id) {
    return id >= 0 && id < capacity ? __atomic_load_n(&finishes[id], __ATOMIC_ACQUIRE) : -1;
}
long harness_max_running(void) { return atomic_load(&max_running); }
/* A reading of the clock harness_start/harness_finish use (it advances it). */
long harness_tick(void) { return atomic_fetch_add(&seq_clock, 1) + 1; }
/* A number for the thread that ran task `id` (equal numbers: the same thread). */
long harness_thread(long id) { return id >= 0 && id < capacity ? threads[id] : -1; }

/* Opens gate g (every gate when g < 0): its waiting kernels finish, later ones do not wait. */
void harness_gate_open(int g) {
    for (int k = 0; k < NGATES; k++)
        if (g < 0 || g == k) atomic_store(&gates[k], 1);
}

/* Waits until task `id` has started; returns its start tick, or 0 after the guard time. */
long harness_wait_started(long id) {
    if (id < 0 || id >= capacity) return 0;
    int64_t end = now_ns() + GATE_GUARD_NS;
    struct timespec pause = {0, 50000};
    while (now_ns() < end) {
        long s = __atomic_load_n(&starts[id], __ATOMIC_ACQUIRE);
        if (s > 0) return s;
        nanosleep(&pause, NULL);
    }
    return 0;
}

static _Thread_local char thread_marker;

static int k_record(const wsp_tile *tiles, const wsp_scalar *s) {
    (void)tiles;
    long id = (long)s[0].i;
    if (id < 0 || id >= capacity) return wsp_kernel_fail("task id out of range");
    long r = atomic_fetch_add(&running, 1) + 1;
    long m = atomic_load(&max_running);
    while (r > m && !atomic_compare_exchange_weak(&max_running, &m, r)) {
    }
    starts[id] = atomic_fetch_add(&seq_clock, 1) + 1;
    threads[id] = (long)(intptr_t)&thread_marker;
    busy(s[1].i);
    finishes[id] = atomic_fetch_add(&seq_clock, 1) + 1;
    atomic_fetch_sub(&running, 1);
    if (s[2].i) return s[2].i > 1 ? (int)s[2].i : wsp_kernel_fail("harness kernel failed on purpose");
    return 0;
}

/* k_record's protocol, storing s[3] into tile 0 before it counts as finished. */
static int k_store(const wsp_tile *tiles, const wsp_scalar *s) {
    long id = (long)s[0].i;
    if (id < 0 || id >= capacity) return wsp_kernel_fail("task id out of range");
    starts[id] = atomic_fetch_add(&seq_clock, 1) + 1;
    threads[id] = (long)(intptr_t)&thread_marker;
    busy(s[1].i);
    *(int64_t *)tiles[0].data = s[3].i;
    finishes[id] = atomic_fetch_add(&seq_clock, 1) + 1;
    if (s[2].i) return wsp_kernel_fail("store kernel failed on purpose");
    return 0;
}

/* Stores s[0] into tile 0 and nothing else: no global state, for many runtimes at once. */
static int k_put(const wsp_tile *tiles, const wsp_scalar *s) {
    *(int64_t *)tiles[0].data = s[0].i;
    return 0;
}

/* Records its start, waits for its gate (or an error of the runtime in s[3]), stores s[4] into
 * tile 0 if `store`, records its finish. Fails when s[2] is nonzero or the guard time passes. */
static int gated(const wsp_tile *tiles, const wsp_scalar *s, int store) {
    long id = (long)s[0].i;
    int g = (int)s[1].i;
    const wsp_runtime *rt = (const wsp_runtime *)(intptr_t)s[3].i;
    if (id < 0 || id >= capacity || g < 0 || g >= NGATES) return wsp_kernel_fail("gate task out of range");
    threads[id] = (long)(intptr_t)&thread_marker;
    __atomic_store_n(&starts[id], atomic_fetch_add(&seq_clock, 1) + 1, __ATOMIC_RELEASE);
    int64_t end = now_ns() + GATE_GUARD_NS;
    struct timespec pause = {0, 50000};
    int open = 0;
    while (!(open = atomic_load(&gates[g]) || (rt && wsp_error_code(rt) != WSP_OK)) && now_ns() < end)
        nanosleep(&pause, NULL);
    if (store) *(int64_t *)tiles[0].data = s[4].i;
    __atomic_store_n(&finishes[id], atomic_fetch_add(&seq_clock, 1) + 1, __ATOMIC_RELEASE);
    if (!open) return wsp_kernel_fail("gate never opened (the test's hang guard)");
    if (s[2].i) return wsp_kernel_fail("gated kernel failed on purpose");
    return 0;
}

static int k_gate(const wsp_tile *tiles, const wsp_scalar *s) { return gated(tiles, s, 0); }
static int k_gate_store(const wsp_tile *tiles, const wsp_scalar *s) { return gated(tiles, s, 1); }

static int k_empty(const wsp_tile *tiles, const wsp_scalar *s) {
    (void)tiles;
    (void)s;
    return 0;
}

/* Waits (up to 2 s) until s[1] tasks have arrived: succeeds only if they run concurrently. */
static int k_rendezvous(const wsp_tile *tiles, const wsp_scalar *s) {
    (void)tiles;
    long want = (long)s[1].i;
    atomic_fetch_add(&arrived, 1);
    int64_t end = now_ns() + 2000000000LL;
    while (atomic_load(&arrived) < want) {
        if (now_ns() > end) return wsp_kernel_fail("rendezvous timed out");
    }
    return 0;
}

wsp_kernel_fn harness_kernel(int which) {
    switch (which) {
    case K_RECORD: return k_record;
    case K_EMPTY: return k_empty;
    case K_RENDEZVOUS: return k_rendezvous;
    case K_STORE: return k_store;
    case K_GATE: return k_gate;
    case K_GATE_STORE: return k_gate_store;
    default: return NULL;
    }
}

/* ---- random programs with a brute-force checker ------------------------------------------------ */

typedef struct rtask {
    int nacc;
    int tensor[3], mode[3];
    int64_t lo[3][3], hi[3][3];
    int depth;
    long scope[8], step[8];   /* the scope instances the task is in, and its step in each */
} rtask;

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rndint(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static int conflict(const rtask *a, const rtask *b, int ndim) {
    for (int i = 0; i < a->nacc; i++)
        for (int j = 0; j < b->nacc; j++) {
            if (a->tensor[i] != b->tensor[j]) continue;
            if (!((a->mode[i] | b->mode[j]) & WSP_WRITE)) continue;
            int over = 1;
            for (int d = 0; d < ndim; d++)
                over &= a->lo[i][d] < b->hi[j][d] && b->lo[j][d] < a->hi[i][d];
            if (over) return 1;
        }
    return 0;
}

static int ordered(const rtask *a, const rtask *b) {
    for (int i = 0; i < a->depth; i++)
        for (int j = 0; j < b->depth; j++)
            if (a->scope[i] == b->scope[j] && a->step[i] < b->step[j]) return 1;
    return 0;
}

/* Submits `n` random tasks (boxes in [0, extent)^ndim, random modes; `scopes` bit 0: random
 * order scopes, bit 1: random wsp_batch announcements, some flagged WSP_BATCH_INDEPENDENT over
 * tasks made independent (each writes a box of its own, beyond the random ones, and reads
 * tensor 1 only), bit 2: placement on 4 dispatchers, each task on a random one, bit 3: random
 * wsp_await calls, each checked at once: every earlier task writing an overlapping box has
 * finished), waits, and checks every ordering constraint. Returns the number of violations,
 * or -1 - code when the run itself failed. `*edges_out` gets the dependencies statistic. */
long harness_random_run(wsp_runtime *rt, long n, uint64_t seed, int ndim, int extent, int scopes,
                        int64_t window, int mode, long spin_ns, long *edges_out) {
    rng_state = seed ? seed : 88172645463325252ULL;
    rtask *tasks = calloc((size_t)n, sizeof *tasks);
    if (!tasks || harness_reset(n) != 0) return -1 - WSP_ERR_INTERNAL;
    long scope_stack[8], step_stack[8];
    int depth = 0;
    long next_scope = 0;
    int rc = wsp_begin(rt, window, mode);
    if (rc == 0 && (scopes & 4)) rc = wsp_schedule(rt, 4, 0, 0);
    wsp_task *t = calloc(1, sizeof *t);
    long indep_left = 0;  /* tasks the last independent announcement still covers */
    long await_bad = 0;   /* awaits that returned before a writer of their box finished */
    for (long k = 0; k < n && rc == 0; k++) {
        if ((scopes & 2) && rnd() % 16 == 0) {  /* batching: explicit grains and the default */
            long m = rndint(1, 100);
            int flags = rnd() % 2 ? WSP_BATCH_INDEPENDENT : 0;
            indep_left = flags ? m : 0;
            rc = wsp_batch(rt, m, rnd() % 4 == 0 ? 0 : rndint(1, 70), flags);
            if (rc) break;
        }
        if (scopes & 1) {
            int op = (int)(rnd() % 8);
            if (op == 0 && depth < 8) {
                rc = wsp_order_push(rt);
                scope_stack[depth] = next_scope++;
                step_stack[depth] = 0;
                depth++;
            } else if (op == 1 && depth > 0) {
                rc = wsp_order_next(rt);
                step_stack[depth - 1]++;
            } else if (op == 2 && depth > 0) {
                rc = wsp_order_pop(rt);
                depth--;
            }
            if (rc) break;
        }
        if ((scopes & 8) && rnd() % 8 == 0) {  /* an await on a random box */
            rtask q;
            memset(&q, 0, sizeof q);
            q.nacc = 1;
            q.tensor[0] = (int)rndint(0, 1);
            q.mode[0] = WSP_WRITE;  /* for conflict(): only the other side's writes count */
            wsp_access a;
            memset(&a, 0, sizeof a);
            a.tensor = q.tensor[0];
            a.mode = WSP_READ;
            a.ndim = ndim;
            for (int d = 0; d < ndim; d++) {
                int64_t len = rnd() % 4 == 0 ? rndint(1, extent) : rndint(1, 3);
                int64_t lo = rndint(0, extent - 1);
                if (lo + len > extent) len = extent - lo;
                q.lo[0][d] = a.lo[d] = lo;
                q.hi[0][d] = a.hi[d] = lo + len;
            }
            if ((rc = wsp_await(rt, &a))) break;
            for (long j = 0; j < k; j++) {
                rtask w = tasks[j];
                for (int i = 0; i < w.nacc; i++)
                    if (!(w.mode[i] & WSP_WRITE)) w.tensor[i] = -1;  /* its reads do not count */
                if (conflict(&w, &q, ndim) && finishes[j] <= 0) {
                    if (await_bad < 5)
                        fprintf(stderr, "await before task %ld: writer %ld not finished\n", k, j);
                    await_bad++;
                }
            }
        }
        rtask *r = &tasks[k];
        r->depth = depth;
        memcpy(r->scope, scope_stack, sizeof scope_stack);
        memcpy(r->step, step_stack, sizeof step_stack);
        r->nacc = (int)rndint(1, 3);
        memset(t, 0, sizeof *t);
        t->fn = k_record;
        t->kernel = 7;
        t->stmt = 1;
        t->ntiles = r->nacc;
        t->nscalars = 3;
        t->scalars[0].i = k;
        t->scalars[1].i = (rnd() % 4 == 0) ? spin_ns : 0;
        t->ncoords = 1;
        t->coords[0] = k;
        t->dispatcher = (scopes & 4) ? (int32_t)rndint(0, 3) : 0;
        int indep = indep_left-- > 0;
        for (int i = 0; i < r->nacc; i++) {
            r->tensor[i] = (int)rndint(0, 1);
            r->mode[i] = (int)rndint(1, 3);
            wsp_access *a = &t->access[i];
            a->tensor = r->tensor[i];
            a->mode = r->mode[i];
            a->ndim = ndim;
            for (int d = 0; d < ndim; d++) {
                int64_t len = rnd() % 3 == 0 ? rndint(1, extent) : rndint(1, 3);
                int64_t lo = rndint(0, extent - 1);
                if (rnd() % 2) lo -= lo % len;  /* often aligned, as tiles are */
                if (lo + len > extent) len = extent - lo;
                r->lo[i][d] = a->lo[d] = lo;
                r->hi[i][d] = a->hi[d] = lo + len;
            }
            if (indep && i == 0) {  /* a write of its own: row extent + k of tensor 0 */
                r->tensor[0] = a->tensor = 0;
                r->mode[0] = a->mode = WSP_WRITE;
                r->lo[0][0] = a->lo[0] = extent + k;
                r->hi[0][0] = a->hi[0] = extent + k + 1;
            } else if (indep) {  /* reads of tensor 1, which none of the batch's tasks writes */
                r->tensor[i] = a->tensor = 1;
                r->mode[i] = a->mode = WSP_READ;
            }
        }
        rc = wsp_submit(rt, t);
    }
    while (rc == 0 && depth-- > 0) rc = wsp_order_pop(rt);
    int wrc = wsp_wait(rt);
    free(t);
    if (rc == 0) rc = wrc;
    if (rc) {
        free(tasks);
        return -1 - rc;
    }
    wsp_stats st;
    wsp_get_stats(rt, &st);
    if (edges_out) *edges_out = (long)st.dependencies;
    long bad = await_bad;
    if (st.tasks != n || st.tasks_run != n) bad++;
    for (long j = 0; j < n; j++) {
        if (starts[j] <= 0 || finishes[j] <= starts[j]) {
            bad++;
            continue;
        }
        for (long i = 0; i < j; i++) {
            if ((conflict(&tasks[i], &tasks[j], ndim) || ordered(&tasks[i], &tasks[j])) &&
                !(finishes[i] < starts[j])) {
                if (bad < 5)
                    fprintf(stderr, "violation: task %ld (finish %ld) vs task %ld (start %ld)\n", i,
                            finishes[i], j, starts[j]);
                bad++;
            }
        }
    }
    free(tasks);
    return bad;
}

/* Runs `n` tasks of `kernel`: with `chains` == 0 each writes its own box, else task k reads box
 * k - chains and writes box k (interleaved RAW chains). Returns the first error code. Touches
 * no global state unless kernel == K_RECORD, so threads may run it on their own runtimes. */
static long bulk_grain = 1;

/* The grain harness_bulk asks wsp_batch for (1: no batching, 0: the runtime's choice). */
void harness_set_grain(long grain) { bulk_grain = grain; }

int harness_bulk(wsp_runtime *rt, long n, int chains, int64_t window, int mode, int kernel,
                 long spin_ns) {
    wsp_task *t = calloc(1, sizeof *t);
    if (!t || (kernel == K_RECORD && harness_reset(n) != 0)) return -1;
    int rc = wsp_begin(rt, window, mode);
    if (rc == 0 && bulk_grain != 1) rc = wsp_batch(rt, n, bulk_grain, chains == 0 ? WSP_BATCH_INDEPENDENT : 0);
    t->fn = harness_kernel(kernel);
    t->nscalars = 3;
    t->scalars[1].i = spin_ns;
    for (long k = 0; k < n && rc == 0; k++) {
        t->scalars[0].i = kernel == K_RECORD ? k : 0;
        t->ntiles = 1;
        wsp_access *a = &t->access[0];
        a->tensor = 0;
        a->mode = WSP_WRITE;
        a->ndim = 2;
        a->lo[0] = k;
        a->hi[0] = k + 1;
        a->lo[1] = 0;
        a->hi[1] = 16;
        if (chains > 0 && k >= chains) {
            t->ntiles = 2;
            t->access[1] = *a;
            t->access[1].mode = WSP_READ;
            t->access[1].lo[0] = k - chains;
            t->access[1].hi[0] = k - chains + 1;
        }
        rc = wsp_submit(rt, t);
    }
    int wrc = wsp_wait(rt);
    free(t);
    return rc ? rc : wrc;
}

/* ---- wsp_await ----------------------------------------------------------------------------- */

/* Enumerates `n` steps on a fresh run; step i writes value i into cell i % ncells of `buf` (a
 * k_put task writing box [c, c+1) of tensor 0), maybe among other tasks, then awaits that box
 * and checks that buf[c] == i (a plain read: ThreadSanitizer checks the await's ordering).
 * flags: bit 0: order scopes (a scope around everything, a step every 3 iterations), bit 1:
 * the writer is announced with wsp_batch among `ncells` tasks (the open batch holds it), bit 2:
 * placement on 3 dispatchers, tasks on dispatcher i % 3 and independent batches (split into
 * parts), bit 3: a reader of the cell and a writer of another tensor before each await (not
 * waited for). Returns the number of wrong reads, or -1 - code when the run failed. */
long harness_await_loop(wsp_runtime *rt, long n, int ncells, int64_t window, int mode, int flags,
                        int64_t *buf) {
    wsp_task *t = calloc(1, sizeof *t);
    int64_t *other = calloc(4, sizeof *other);
    if (!t || !other || ncells < 1) return -1 - WSP_ERR_INTERNAL;
    long bad = 0;
    int rc = wsp_begin(rt, window, mode);
    if (rc == 0 && (flags & 4)) rc = wsp_schedule(rt, 3, 0, 0);
    if (rc == 0 && (flags & 1)) rc = wsp_order_push(rt);
    for (int c = 0; c < ncells; c++) buf[c] = -1;
    for (long i = 0; i < n && rc == 0; i++) {
        int c = (int)(i % ncells);
        if ((flags & 1) && i % 3 == 0 && (rc = wsp_order_next(rt))) break;
        /* a batch: the writer and the other cells' writers of this round (values it - c + k) */
        /* one more task announced than the round submits: the batch is still open at the await
         * (unless the reader of flag 8 joins it) */
        if ((flags & 2) && c == 0 &&
            (rc = wsp_batch(rt, ncells + !(flags & 8), ncells + 1,
                            (flags & 4) && !(flags & 8) ? WSP_BATCH_INDEPENDENT : 0)))
            break;
        if (!(flags & 2) || c == 0) {
            for (int k = (flags & 2) ? 0 : c; k < ((flags & 2) ? ncells : c + 1) && rc == 0; k++) {
                memset(t, 0, sizeof *t);
                t->fn = k_put;
                t->nscalars = 1;
                t->scalars[0].i = i - c + k;
                t->ntiles = 1;
                t->tiles[0].data = &buf[k];
                t->tiles[0].rows = t->tiles[0].cols = t->tiles[0].stride = t->tiles[0].col_stride = 1;
                t->access[0].tensor = 0;
                t->access[0].mode = WSP_WRITE;
                t->access[0].ndim = 1;
                t->access[0].lo[0] = k;
                t->access[0].hi[0] = k + 1;
                t->dispatcher = (int32_t)((i + k) % 3);
                rc = wsp_submit(rt, t);
            }
        }
        if (rc == 0 && (flags & 8)) {  /* a reader of the cell, a writer elsewhere */
            memset(t, 0, sizeof *t);
            t->fn = k_empty;
            t->ntiles = 1;
            t->access[0].tensor = 0;
            t->access[0].mode = WSP_READ;
            t->access[0].ndim = 1;
            t->access[0].lo[0] = c;
            t->access[0].hi[0] = c + 1;
            t->dispatcher = (int32_t)(i % 3);
            rc = wsp_submit(rt, t);
            if (rc == 0) {
                t->fn = k_put;
                t->nscalars = 1;
                t->scalars[0].i = i;
                t->tiles[0].data = &other[i % 4];
                t->access[0].tensor = 1;
                t->access[0].mode = WSP_WRITE;
                t->access[0].lo[0] = i % 4;
                t->access[0].hi[0] = i % 4 + 1;
                rc = wsp_submit(rt, t);
            }
        }
        if (rc) break;
        wsp_access a;
        memset(&a, 0, sizeof a);
        a.tensor = 0;
        a.mode = WSP_READ;
        a.ndim = 1;
        a.lo[0] = c;
        a.hi[0] = c + 1;
        if ((rc = wsp_await(rt, &a))) break;
        if (buf[c] != i) {
            if (bad < 5) fprintf(stderr, "await loop: step %ld read %lld\n", i, (long long)buf[c]);
            bad++;
        }
    }
    if (rc == 0 && (flags & 1)) rc = wsp_order_pop(rt);
    int wrc = wsp_wait(rt);
    free(t);
    free(other);
    if (rc == 0) rc = wrc;
    return rc ? -1 - rc : bad;
}
