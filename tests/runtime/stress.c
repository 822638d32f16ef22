/* stress.c: a standalone stress run of the runtime for sanitizer builds (test_sanitizers.py).
 * Built with harness.c and the runtime sources; exits 0 when every check passes.
 *
 *     stress [scale]     scale multiplies the task counts (default 1)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_runtime.h"

long harness_random_run(wsp_runtime *rt, long n, uint64_t seed, int ndim, int extent, int scopes,
                        int64_t window, int mode, long spin_ns, long *edges_out);
void harness_set_grain(long grain);
int harness_bulk(wsp_runtime *rt, long n, int chains, int64_t window, int mode, int kernel,
                 long spin_ns);
wsp_kernel_fn harness_kernel(int which);
long harness_await_loop(wsp_runtime *rt, long n, int ncells, int64_t window, int mode, int flags,
                        int64_t *buf);
int harness_reset(long n);
long harness_start(long id);
long harness_finish(long id);

static int failures;
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fprintf(stderr, "\n");                         \
            failures++;                                    \
        }                                                  \
    } while (0)

static int empty_kernel(const wsp_tile *t, const wsp_scalar *s) {
    (void)t;
    (void)s;
    return 0;
}

/* The cycle model with awaits (enumeration gates) in each of its loops: tiled boxes (hashed, then
 * with a dense table), a tensor whose tiling breaks (one whole-tensor record), boxes over several
 * tiles, nothing and empty boxes awaited; the results must not depend on the records' kind, the
 * run or the workers' timing. Then wsp_sim_replay_gated directly, valid and malformed. */
#define GATED_TASKS 400
static void gated_model_runs(wsp_runtime *rt, int workers) {
    static wsp_simresult first[4][GATED_TASKS];   /* per policy: the first run's results */
    static int have[4];
    wsp_machine m = {1.6, 4, 24, 48, 0, 140.0, 600.0};
    wsp_policy pols[4] = {
        {1, 0, 0, WSP_TIMING_IMMEDIATE, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0},   /* run_one */
        {3, 1, 0, WSP_TIMING_IMMEDIATE, 0, 0.0, 8, 0, 0, 0, 0, 0, 0, 0},   /* run_plain, a window */
        {3, 0, 0, WSP_TIMING_BATCHED, 4, 0.0, 0, 0, 0, 0, 0, 0, 0, 0},   /* run_general */
        {2, 0, 0, WSP_TIMING_RATE_LIMIT, 0, 1e5, 4, 0, 0, 0, 0, 0, 0, 0}};
    wsp_kcost costs[2] = {{WSP_UNIT_VECTOR, 0, 50}, {WSP_UNIT_CUBE, 0, 400}};
    wsp_simresult res[GATED_TASKS];
    for (int g = 0; g < 4; g++)
        for (int rep = 0; rep < 2; rep++) {
            CHECK(wsp_sim_enable(rt, &m, &pols[g], costs, 2) == 0, "gated: sim enable");
            CHECK(wsp_trace_enable(rt, 1) == 0, "gated: trace enable");
            int rc = wsp_begin(rt, pols[g].window, WSP_WINDOW_STALL);
            int64_t dims[2] = {64, 8};
            if (rc == 0 && rep) rc = wsp_sim_shape(rt, 0, 2, dims);
            wsp_task t;
            for (long k = 0; k < GATED_TASKS && rc == 0; k++) {
                memset(&t, 0, sizeof t);
                t.fn = harness_kernel(1);
                t.nscalars = 3;
                t.kernel = k % 9 == 0;
                t.ntiles = 1 + (k % 10 == 3);
                wsp_access *a = &t.access[0];
                a->tensor = 0;
                a->mode = WSP_WRITE;
                a->ndim = 2;
                a->lo[0] = (k % 16) * 4;
                a->hi[0] = a->lo[0] + 4;
                a->hi[1] = 8;
                a = &t.access[1];   /* tensor 1: overlapping boxes, one whole-tensor record */
                a->tensor = 1;
                a->mode = WSP_READWRITE;
                a->ndim = 1;
                a->lo[0] = k % 7;
                a->hi[0] = k % 7 + 3;
                rc = wsp_submit(rt, &t);
                if (rc == 0 && k % 25 == 24) {
                    wsp_access w;
                    memset(&w, 0, sizeof w);
                    w.tensor = 0;
                    w.mode = WSP_READ;
                    w.ndim = 2;
                    w.lo[0] = (k * 3) % 60;
                    w.hi[0] = w.lo[0] + 5;   /* two tiles */
                    w.lo[1] = 2;
                    w.hi[1] = 3;
                    rc = wsp_await(rt, &w);
                    w.lo[0] = w.hi[0] = 9;   /* empty */
                    if (rc == 0) rc = wsp_await(rt, &w);
                    w.lo[0] = 0;             /* the whole tensor */
                    w.hi[0] = 64;
                    w.lo[1] = 0;
                    w.hi[1] = 8;
                    if (rc == 0 && k % 100 == 99) rc = wsp_await(rt, &w);
                    memset(&w, 0, sizeof w);
                    w.tensor = 1;
                    w.mode = WSP_READWRITE;  /* a writer's await: readers gate it too */
                    w.ndim = 1;
                    w.lo[0] = 2;
                    w.hi[0] = 3;
                    if (rc == 0 && k % 50 == 49) rc = wsp_await(rt, &w);
                }
            }
            int wrc = wsp_wait(rt);
            CHECK(rc == 0 && wrc == 0, "gated run: policy %d: %d %d %s", g, rc, wrc,
                  wsp_error_message(rt));
            wsp_simsummary sum;
            CHECK(wsp_sim_summary(rt, &sum) == 0 && sum.tasks == GATED_TASKS &&
                      sum.critical_path <= sum.total_cycles,
                  "gated: sim summary");
            CHECK(wsp_sim_read(rt, 0, GATED_TASKS, res) == GATED_TASKS, "gated: sim read");
            CHECK(res[GATED_TASKS - 1].enumerated > 0, "gated: policy %d: no gate", g);
            if (!have[g]) {
                memcpy(first[g], res, sizeof res);
                have[g] = 1;
            } else {
                CHECK(memcmp(first[g], res, sizeof res) == 0,
                      "gated: policy %d, run %d, %d workers: results differ", g, rep, workers);
            }
        }
    CHECK(wsp_trace_enable(rt, 0) == 0 && wsp_sim_enable(rt, NULL, NULL, NULL, 0) == 0,
          "gated: off again");
    /* explicit gates */
    wsp_simtask tasks[6] = {{1, 0, -1, 0}, {0, 0, -1, 0}, {0, 0, -1, 1},
                            {0, 0, -1, 0}, {0, 0, -1, 0}, {0, 0, -1, 0}};
    int64_t preds[1] = {0};
    wsp_simgate gates[3] = {{2, 1, 0}, {4, 2, 0}, {6, 1, 0}};
    int64_t writers[4] = {1, 0, 2, 5};
    char err[128];
    wsp_simsummary sum;
    int rc = wsp_sim_replay_gated(&m, &pols[0], costs, 2, 6, tasks, preds, 3, gates, writers, res,
                                  &sum, NULL, err, sizeof err);
    CHECK(rc == 0 && res[4].enumerated >= res[0].finish, "replay gated: %d %s", rc, err);
    writers[3] = 6;   /* not an earlier task */
    rc = wsp_sim_replay_gated(&m, &pols[0], costs, 2, 6, tasks, preds, 3, gates, writers, res,
                              &sum, NULL, err, sizeof err);
    CHECK(rc == WSP_ERR_USAGE, "replay gated, bad writer: %d", rc);
}

/* Coroutines: a parent P.seq loop forking children each iteration, switched between submits,
 * the children with scopes of their own; tasks with an extra READ of an event box, probes and
 * writing awaits on it, notes with the trace on, a batch over switches; then runs that return
 * early with contexts open (an error). Every task of iteration i must finish before any task
 * of iteration i + 1 starts (K_RECORD's sequence clock). */
#define CO_ITERS 12
#define CO_TASKS 8   /* per iteration: 2 by the parent, 3 by each child */
static void coroutine_runs(wsp_runtime *rt, long scale) {
    static int64_t scratch[4];
    CHECK(wsp_trace_enable(rt, 1) == 0, "coroutines: trace enable");
    for (long rep = 0; rep < 2 * scale; rep++) {
        harness_reset(CO_ITERS * CO_TASKS);
        int rc = wsp_begin(rt, rep % 2 ? 6 : 0, WSP_WINDOW_STALL);
        if (rc == 0) rc = wsp_order_push(rt);
        if (rc == 0 && rep % 2) rc = wsp_batch(rt, CO_ITERS * CO_TASKS, 4, 0);
        wsp_task t;
        memset(&t, 0, sizeof t);
        t.fn = harness_kernel(0);   /* K_RECORD */
        t.nscalars = 3;
        t.tiles[1].data = scratch;  /* the extra access's tile: valid, 1 x 1 */
        t.tiles[1].rows = t.tiles[1].cols = 1;
        long id = 0;
        for (int i = 0; i < CO_ITERS && rc == 0; i++) {
            if (i) rc = wsp_order_next(rt);
            int32_t kids[2] = {0, 0};
            for (int j = 0; j < 2 && rc == 0; j++) {
                kids[j] = wsp_order_fork(rt);
                if (kids[j] <= 0) rc = -kids[j];
            }
            /* parent, child 0, child 1, child 0 (pushes), parent, child 1, child 0, child 1 */
            static const int who[CO_TASKS] = {0, 1, 2, 1, 0, 2, 1, 2};
            for (int k = 0; k < CO_TASKS && rc == 0; k++) {
                int32_t ctx = who[k] ? kids[who[k] - 1] : 0;
                rc = wsp_order_switch(rt, ctx);
                if (rc == 0 && who[k] == 1 && k == 3) rc = wsp_order_push(rt);
                if (rc == 0 && who[k] == 1 && k == 6) rc = wsp_order_next(rt);
                t.scalars[0].i = id;
                t.scalars[1].i = (id % 3) * 20000;
                t.ntiles = 1 + (k % 2);
                t.access[0].tensor = 0;
                t.access[0].mode = WSP_WRITE;
                t.access[0].ndim = 1;
                t.access[0].lo[0] = id;
                t.access[0].hi[0] = id + 1;
                t.access[1].tensor = 1;
                t.access[1].mode = WSP_READ;
                t.access[1].ndim = 1;
                t.access[1].lo[0] = 0;
                t.access[1].hi[0] = 1;
                if (rc == 0) rc = wsp_note(rt, 1, k);
                if (rc == 0) rc = wsp_submit(rt, &t);
                id++;
                if (rc == 0 && k == 5) {
                    wsp_access ev;
                    memset(&ev, 0, sizeof ev);
                    ev.tensor = 1;
                    ev.mode = WSP_READWRITE;
                    ev.ndim = 1;
                    ev.hi[0] = 1;
                    int p = wsp_probe(rt, &ev);
                    if (p < 0) rc = -p;
                    else if (i % 4 == 1) rc = wsp_await(rt, &ev);
                }
            }
            for (int j = 0; j < 2 && rc == 0; j++) rc = wsp_order_end(rt, kids[j]);
            if (rc == 0) rc = wsp_order_switch(rt, 0);
        }
        if (rc == 0) rc = wsp_order_pop(rt);
        int wrc = wsp_wait(rt);
        CHECK(rc == 0 && wrc == 0, "coroutines: run %ld: %d %d %s", rep, rc, wrc,
              wsp_error_message(rt));
        CHECK(wsp_note_count(rt) == CO_ITERS * CO_TASKS, "coroutines: notes");
        for (long a = 0; a < CO_ITERS * CO_TASKS; a++)
            for (long b = (a / CO_TASKS + 1) * CO_TASKS; b < CO_ITERS * CO_TASKS; b++)
                if (!(harness_finish(a) > 0 && harness_finish(a) < harness_start(b))) {
                    CHECK(0, "coroutines: run %ld: task %ld did not precede task %ld", rep, a, b);
                    a = b = CO_ITERS * CO_TASKS;
                }
    }
    /* an early return with contexts open (their own scopes too, the current one a child) */
    for (int rep = 0; rep < 3; rep++) {
        harness_reset(64);
        int rc = wsp_begin(rt, 0, WSP_WINDOW_STALL);
        if (rc == 0) rc = wsp_order_push(rt);
        wsp_task t;
        memset(&t, 0, sizeof t);
        t.fn = harness_kernel(0);
        t.nscalars = 3;
        t.ntiles = 1;
        t.access[0].tensor = 0;
        t.access[0].mode = WSP_READWRITE;
        t.access[0].ndim = 1;
        t.access[0].hi[0] = 1;
        for (int j = 0; j < 4 && rc == 0; j++) {
            int32_t c = wsp_order_fork(rt);
            rc = c > 0 ? wsp_order_switch(rt, c) : -c;
            if (rc == 0) rc = wsp_order_push(rt);
            t.scalars[0].i = j;
            t.scalars[2].i = j == 2 && rep != 1;
            if (rc == 0) rc = wsp_submit(rt, &t);
        }
        if (rep == 1) wsp_fail(rt, WSP_ERR_VIEW, "an enumerator's check failed");
        int wrc = wsp_wait(rt);
        CHECK(wrc == (rep == 1 ? WSP_ERR_VIEW : WSP_ERR_KERNEL), "coroutines: early return %d: %d",
              rep, wrc);
    }
    CHECK(wsp_trace_enable(rt, 0) == 0, "coroutines: trace off");
}

/* Each thread owns a runtime: runtimes must not share state. */
static void *own_runtime(void *arg) {
    long n = *(long *)arg;
    wsp_runtime *rt = wsp_runtime_new(2, 2);
    wsp_task t;
    memset(&t, 0, sizeof t);
    t.fn = empty_kernel;
    t.ntiles = 1;
    t.access[0].tensor = 0;
    t.access[0].ndim = 1;
    for (int run = 0; run < 3; run++) {
        int rc = wsp_begin(rt, run == 1 ? 64 : 0, WSP_WINDOW_STALL);
        for (long k = 0; k < n && rc == 0; k++) {
            t.access[0].mode = (k % 3 == 0) ? WSP_WRITE : WSP_READ;
            t.access[0].lo[0] = k % 97;
            t.access[0].hi[0] = k % 97 + 1 + k % 5;
            if (k % 50 == 0) rc = wsp_order_push(rt);
            if (rc == 0 && k % 50 == 25) rc = wsp_order_next(rt);
            if (rc == 0) rc = wsp_submit(rt, &t);
            if (rc == 0 && k % 50 == 49) rc = wsp_order_pop(rt);
        }
        int w = wsp_wait(rt);
        if (rc == 0) rc = w;
        if (rc != 0) {
            fprintf(stderr, "own_runtime: run %d failed: %d %s\n", run, rc, wsp_error_message(rt));
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
        }
    }
    int64_t cells[4];  /* awaits on several runtimes at once */
    long bad = harness_await_loop(rt, n / 10, 2, 0, WSP_WINDOW_STALL, 8, cells);
    if (bad != 0) {
        fprintf(stderr, "own_runtime: await loop: %ld\n", bad);
        __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    }
    wsp_runtime_free(rt);
    return NULL;
}

int main(int argc, char **argv) {
    long scale = argc > 1 ? atol(argv[1]) : 1;
    if (scale < 1) scale = 1;
    int worker_counts[] = {1, 2, 4};
    for (int wi = 0; wi < 3; wi++) {
        int workers = worker_counts[wi];
        wsp_runtime *rt = wsp_runtime_new(workers, 2);
        for (int ndim = 1; ndim <= 3; ndim++) {
            /* bit 0: order scopes, bit 1: batches, bit 3: awaits (8 .. 11) */
            for (int scopes = 0; scopes <= 11; scopes += scopes == 3 ? 5 : 1) {
                long edges = 0;
                long bad = harness_random_run(rt, 300 * scale, 1234 + ndim * 7 + scopes + wi, ndim,
                                              ndim == 1 ? 40 : 10, scopes, 0, WSP_WINDOW_STALL,
                                              2000, &edges);
                CHECK(bad == 0, "random run: workers %d ndim %d scopes %d: %ld", workers, ndim,
                      scopes, bad);
                bad = harness_random_run(rt, 300 * scale, 99 + ndim, ndim, 12, scopes, 3,
                                         WSP_WINDOW_STALL, 1000, &edges);
                CHECK(bad == 0, "windowed random run: workers %d ndim %d: %ld", workers, ndim, bad);
            }
        }
        /* awaits: the kernel's plain stores must be visible (and race-free) after wsp_await */
        {
            int64_t cells[8];
            int flag_sets[] = {0, 8, 1, 2, 6, 15};
            for (int f = 0; f < 6; f++) {
                long bad = harness_await_loop(rt, 500 * scale, f % 2 ? 3 : 1, f == 3 ? 2 : 0,
                                              WSP_WINDOW_STALL, flag_sets[f], cells);
                CHECK(bad == 0, "await loop: workers %d flags %d: %ld", workers, flag_sets[f], bad);
            }
        }
        int rc = harness_bulk(rt, 20000 * scale, 0, 0, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk independent: %d", rc);
        rc = harness_bulk(rt, 20000 * scale, 1, 0, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk chain: %d", rc);
        rc = harness_bulk(rt, 20000 * scale, 3, 16, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk chains with window: %d", rc);
        wsp_stats st;
        wsp_get_stats(rt, &st);
        CHECK(st.max_in_flight <= 16, "max_in_flight %lld > 16", (long long)st.max_in_flight);
        rc = harness_bulk(rt, 2000, 0, 2, WSP_WINDOW_ABORT, 0, 200000);
        CHECK(rc == WSP_ERR_WINDOW, "abort mode returned %d", rc);
        harness_set_grain(0);  /* the same, batched */
        rc = harness_bulk(rt, 20000 * scale, 0, 0, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk independent, batched: %d", rc);
        rc = harness_bulk(rt, 20000 * scale, 3, 16, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk chains with window, batched: %d", rc);
        harness_set_grain(64);
        rc = harness_bulk(rt, 20000 * scale, 1, 5, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "bulk chain, grain above the window: %d", rc);
        harness_set_grain(1);
        /* a failing kernel in the middle of a run, then the runtime is reused */
        wsp_task t;
        memset(&t, 0, sizeof t);
        t.fn = harness_kernel(0);
        t.nscalars = 3;
        t.ntiles = 1;
        t.access[0].tensor = 0;
        t.access[0].mode = WSP_READWRITE;
        t.access[0].ndim = 1;
        t.access[0].hi[0] = 1;
        rc = wsp_begin(rt, 0, WSP_WINDOW_STALL);
        for (long k = 0; k < 200 && rc == 0; k++) {
            t.scalars[0].i = 0;
            t.scalars[2].i = k == 50;
            rc = wsp_submit(rt, &t);
        }
        rc = wsp_wait(rt);
        CHECK(rc == WSP_ERR_KERNEL, "kernel failure returned %d", rc);
        rc = harness_bulk(rt, 1000, 2, 0, WSP_WINDOW_STALL, 1, 0);
        CHECK(rc == 0, "reuse after failure: %d", rc);
        /* placement, streams, the trace and the cycle model together */
        {
            wsp_machine m = {1.6, 4, 24, 48, 0, 140.0, 600.0};
            wsp_policy p = {3, 0, 2, WSP_TIMING_BATCHED, 4, 0.0, 0, 0, 0, 0, 0, 0, 0, 0};
            wsp_kcost cost = {WSP_UNIT_VECTOR, 0, 50};
            CHECK(wsp_sim_enable(rt, &m, &p, &cost, 1) == 0, "sim enable");
            CHECK(wsp_trace_enable(rt, 1) == 0, "trace enable");
            /* pass 2: independent tasks, no streams: batches split into parts per worker */
            for (int pass = 0; pass < 3; pass++) {
                int indep = pass == 2;
                rc = wsp_begin(rt, 0, WSP_WINDOW_STALL);
                if (rc == 0) rc = wsp_schedule(rt, 3, pass == 1, indep ? 0 : 2);
                if (rc == 0) rc = wsp_batch(rt, 600, 0, indep ? WSP_BATCH_INDEPENDENT : 0);
                for (long k = 0; k < 600 && rc == 0; k++) {
                    memset(&t, 0, sizeof t);
                    t.fn = harness_kernel(1);
                    t.nscalars = 3;
                    t.ntiles = 1 + (k % 3 == 0);
                    t.access[0].tensor = 0;
                    t.access[0].mode = WSP_WRITE;
                    t.access[0].ndim = 1;
                    t.access[0].lo[0] = indep ? k : k % 50;
                    t.access[0].hi[0] = t.access[0].lo[0] + 1;
                    t.access[1] = t.access[0];
                    t.access[1].mode = WSP_READ;
                    t.access[1].lo[0] = (k + 7) % 50;
                    t.access[1].hi[0] = (k + 7) % 50 + 1;
                    if (indep) t.ntiles = 1;
                    t.dispatcher = (int32_t)(k % 3);
                    t.stream = indep ? 0 : (int32_t)((k / 5) % 2);
                    rc = wsp_submit(rt, &t);
                }
                int wrc = wsp_wait(rt);
                CHECK(rc == 0 && wrc == 0, "placed run: %d %d %s", rc, wrc, wsp_error_message(rt));
                wsp_simsummary sum;
                CHECK(wsp_sim_summary(rt, &sum) == 0 && sum.tasks == 600, "sim summary");
                CHECK(wsp_trace_count(rt) == 600, "trace count");
                wsp_trace_event ev[8];
                CHECK(wsp_trace_read(rt, 592, 8, ev) == 8 && ev[7].worker >= 0, "trace read");
            }
            CHECK(wsp_trace_enable(rt, 0) == 0 && wsp_sim_enable(rt, NULL, NULL, NULL, 0) == 0,
                  "off again");
            gated_model_runs(rt, workers);
        }
        /* task-graph knobs (graph.c): each run, then a default one (workers go back to rings) */
        {
            int knobs[5][5] = {  /* ready, start, threshold, npools, window */
                {WSP_READY_PRIORITY, WSP_START_AFTER, 1, 1, 0},
                {WSP_READY_FIFO, WSP_START_THRESHOLD, 10, 2, 0},
                {WSP_READY_PRIORITY, WSP_START_AFTER, 1, 3, 4},   /* a stall starts them */
                {WSP_READY_STEAL, WSP_START_THRESHOLD, 50, 1, 0},
                {WSP_READY_FIFO, WSP_START_THRESHOLD, 1, 1, 0}};  /* pinned: per worker */
            for (int g = 0; g < 5; g++) {
                rc = wsp_begin(rt, knobs[g][4], WSP_WINDOW_STALL);
                if (rc == 0) rc = wsp_schedule(rt, g == 4 ? 3 : 0, 0, 0);
                if (rc == 0) rc = wsp_graph(rt, knobs[g][0], knobs[g][1], knobs[g][2], knobs[g][3]);
                if (rc == 0) rc = wsp_batch(rt, 400, 0, 0);  /* ignored in such a run */
                for (long k = 0; k < 400 && rc == 0; k++) {
                    memset(&t, 0, sizeof t);
                    t.fn = harness_kernel(1);
                    t.nscalars = 3;
                    t.ntiles = 1;
                    t.access[0].tensor = 0;
                    t.access[0].mode = k % 4 ? WSP_READ : WSP_WRITE;
                    t.access[0].ndim = 1;
                    t.access[0].lo[0] = k % 13;
                    t.access[0].hi[0] = k % 13 + 1;
                    t.dispatcher = (int32_t)(k % 3);
                    t.pool = (int32_t)(k % knobs[g][3]);
                    t.priority = (k * 7919) % 101;
                    rc = wsp_submit(rt, &t);
                }
                int wrc = wsp_wait(rt);
                CHECK(rc == 0 && wrc == 0, "graph run %d: %d %d %s", g, rc, wrc,
                      wsp_error_message(rt));
                CHECK(wsp_graph_time(rt, 0) >= 0, "graph run %d: never started", g);
                rc = harness_bulk(rt, 500, 1, 0, WSP_WINDOW_STALL, 1, 0);
                CHECK(rc == 0, "default run after graph run %d: %d", g, rc);
            }
        }
        /* deps = explicit (explicit.c): steps that declare every dependency run; a conflict
         * inside one step is reported (WSP_ERR_DEPS) */
        {
            wsp_machine m = {1.6, 4, 24, 48, 0, 140.0, 600.0};
            wsp_policy p = {2, 0, 0, WSP_TIMING_IMMEDIATE, 0, 0.0, 0, 0, 0, 0, 0,
                            WSP_DEPS_EXPLICIT, 0, 0};
            wsp_kcost cost = {WSP_UNIT_VECTOR, 0, 50};
            CHECK(wsp_sim_enable(rt, &m, &p, &cost, 1) == 0, "sim enable (explicit)");
            for (int bad = 0; bad < 2; bad++) {
                rc = wsp_begin(rt, 0, WSP_WINDOW_STALL);
                if (rc == 0) rc = wsp_order_push(rt);
                for (long step = 0; step < 30 && rc == 0; step++) {
                    for (long k = 0; k < 8 && rc == 0; k++) {
                        memset(&t, 0, sizeof t);
                        t.fn = harness_kernel(1);
                        t.nscalars = 3;
                        t.ntiles = 2;
                        t.ncoords = 2;
                        t.coords[0] = step;
                        t.coords[1] = k;
                        t.access[0].tensor = 0;
                        t.access[0].mode = WSP_WRITE;
                        t.access[0].ndim = 1;
                        t.access[0].lo[0] = (step % 2) * 8 + k;  /* own cell in its step */
                        t.access[0].hi[0] = t.access[0].lo[0] + 1;
                        t.access[1] = t.access[0];
                        t.access[1].mode = WSP_READ;  /* the previous step's cells */
                        t.access[1].lo[0] = ((step + 1) % 2) * 8 + (bad && step == 20 ? 0 : k);
                        t.access[1].hi[0] = t.access[1].lo[0] + (bad && step == 20 ? 8 : 1);
                        if (bad && step == 20 && k == 3) t.access[1].lo[0] = (step % 2) * 8;
                        rc = wsp_submit(rt, &t);
                    }
                    if (rc == 0) rc = wsp_order_next(rt);
                }
                if (rc == 0) rc = wsp_order_pop(rt);
                int wrc = wsp_wait(rt);
                if (!bad) {
                    CHECK(rc == 0 && wrc == 0, "explicit run: %d %d %s", rc, wrc,
                          wsp_error_message(rt));
                } else {
                    CHECK(wrc == WSP_ERR_DEPS &&
                              strstr(wsp_error_message(rt), "undeclared dependency: statement 0 "
                                                            "[20, 3] on statement 0 [20, ") != NULL,
                          "explicit report: %d %s", wrc, wsp_error_message(rt));
                }
            }
            CHECK(wsp_sim_enable(rt, NULL, NULL, NULL, 0) == 0, "model off (explicit)");
        }
        coroutine_runs(rt, scale);
        /* free in the middle of a run */
        rc = wsp_begin(rt, 0, WSP_WINDOW_STALL);
        t.scalars[2].i = 0;
        for (long k = 0; k < 100 && rc == 0; k++) rc = wsp_submit(rt, &t);
        wsp_runtime_free(rt);
    }
    pthread_t th[3];
    long n = 3000 * scale;
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, own_runtime, &n);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    wsp_runtime_free(wsp_runtime_new(0, 0));
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("stress ok\n");
    return 0;
}
