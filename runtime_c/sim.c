/* sim.c: wsp_sim_replay(_gated), a deterministic discrete-event cycle model of an Ascend-like NPU.
 *
 * Time is counted in integer clock cycles (int64). Nanoseconds become cycles as
 * round-half-away(ns * clock_ghz) (llround, computed without libm): `dispatch` from the
 * machine's dispatch_ns, `completion` from its completion_ns.
 *
 * THE MODEL
 *   Enumerator. Produces the tasks in order, instantly, at time 0, except that
 *     - with a window N > 0 task k is produced only when fewer than N produced tasks are
 *       unfinished (finished = its kernel has ended), so it waits for kernel ends;
 *     - an ENUMERATION GATE (index g, writers W: tasks before g) holds back task g and every
 *       later task until every task of W has finished AND its completion has been seen (finish
 *       + completion). A gate is a wsp_await of the run: the enumerator read an element that the
 *       tasks of W write (simlog.c finds them in its own tables) and waited for exactly them.
 *       There may be several gates (in index order); one without writers, or at index ntasks,
 *       holds back nothing and is dropped. The tasks before a gate are not held back by it
 *       (though they may be issued at other times: those it holds back no longer compete).
 *     `enumerated` is the time task k is produced: the latest of enumerated[k - 1], the window's
 *     moment and the opening of every gate at or before k.
 *   Readiness. Task k is ready at max(enumerated, finish[j] + completion for every predecessor j,
 *     and for a task of stream s: finish of the previous task of s in enumeration order +
 *     completion, and for a task waiting for a barrier: the barrier's completion). So a
 *     stream's tasks never overlap and start in enumeration order.
 *   Barriers (order scopes: P.seq, `sequential`; only through the runtime's log, see
 *     wsp_simgroup in wsp_internal.h). A barrier is a step group of the run: it completes at the
 *     latest finish + completion of the tasks in it, and the tasks waiting for it are ready no
 *     earlier: exactly as if each of them had every task of the group as a predecessor (in
 *     every output, the critical path included), with one edge per task in a scope instead of
 *     one per pair. A barrier is no task: no result, no core, no dispatcher.
 *   Dispatchers (AICPUs, p->ndispatchers). Each holds the ready tasks assigned to it, ordered by
 *     (ready, task index). A free dispatcher issues the first task in that order whose unit
 *     (cube: m->cube_cores, vector: m->vector_cores) has a free core: it is busy for `dispatch`
 *     cycles, the task starts at issue + dispatch on the lowest-numbered free core of its unit and
 *     finishes `cycles` later (0 allowed). The core is reserved from issue to finish.
 *   Completion. At `finish` the core is free and the window counts the task finished; dependents
 *     and gates see it at finish + completion.
 *   One instant. All changes of an instant (kernel ends, completions seen, dispatchers becoming
 *     free, the rate limit expiring) are applied first, then:
 *     pass 1: among the free dispatchers that have a task of their own to issue, the one whose
 *       task comes first in (ready, task index) order issues it; repeated until none can. (Not
 *       "lowest dispatcher index first": with a fixed priority a dispatcher beyond the core
 *       count can starve, and one more dispatcher could slow identical independent tasks down.)
 *       With dispatch = 0 a dispatcher stays free and may issue again at the same instant.
 *     pass 2 (work_steal): free dispatchers in index order that had nothing of their own to
 *       issue steal.
 *     If that started kernels of zero length, their ends are a new round of the same instant.
 *   work_steal. A thief d takes, from the first victim d+1, d+2, ... (wrapping) that has one, the
 *     task that victim would issue next by its own rule (its state unchanged). The task counts
 *     as stolen: results.dispatcher = d, disp[d].stolen, summary.stolen.
 *   Timing policies.
 *     immediate: as above.
 *     batched(n): a free dispatcher with no open group and at least n ready tasks takes the first
 *       n of them (queue order) as a group (results.group = running group number from 0,
 *       summary.groups counts them; it opens even if no core is free yet) and then issues only
 *       that group's tasks, in group order (the first one whose unit has a free core), back to
 *       back, until all are issued. Partial groups: when the model is quiescent (no kernel
 *       running, no completion pending that has dependents, no dispatcher busy) EVERY dispatcher
 *       holding ready tasks takes all of them as a group (in dispatcher order, which numbers the
 *       groups). At quiescence every core and every dispatcher is free, so this never
 *       deadlocks. With work_steal, a free dispatcher without an open group and with fewer than
 *       n ready tasks of its own steals single tasks from the other dispatchers' queues (never
 *       from an open group); each is issued as a group of its own (it gets a group number and
 *       counts in summary.groups). Adding dispatchers can make batched slower (more partial
 *       groups waiting for quiescence); this is the rule, not a bug.
 *     interleaved(n): with p->nstreams > 0 a dispatcher's ready tasks fall into classes: one per
 *       stream, plus a last class (index nstreams) for tasks of no stream. A dispatcher keeps a
 *       current class (initially 0): it issues up to n tasks of it (the first whose unit has a
 *       free core, queue order), then (or as soon as the current class has nothing issuable)
 *       moves to the next class after it in cyclic order that has an issuable task, the current
 *       one last, and starts a new run of up to n. Stolen tasks do not count in the victim's run.
 *       With nstreams == 0 it is exactly immediate.
 *     rate_limit(r): issue BEGINNINGS of all dispatchers together are at least
 *       S = ceil(clock_ghz * 1e6 / r) cycles apart (r in tasks per ms).
 *
 * OUTPUTS
 *   results[k]: enumerated, ready, issue, start, finish, core (within its unit), unit,
 *     dispatcher (the issuer), group (-1 unless batched).
 *   summary: tasks; total_cycles = max finish (0 for no tasks); critical_path = max cp[k] where
 *     cp[k] = max(0, gate floor, cp[j] + completion over predecessors j, the stream
 *     predecessor and the tasks of the barrier k waits for) + dispatch + cycles[k], the gate
 *     floor being max cp[w] + completion over the writers w of every gate at or before k (so
 *     with no window a gate is, in every output but `enumerated`, exactly its writers made
 *     predecessors of every task from its index on);
 *     work[u] = kernel cycles of unit u; serial_cycles = sum over tasks of dispatch + cycles +
 *     completion; stolen; groups.
 *   disp[d]: tasks issued by d, of those stolen, busy_cycles = tasks * dispatch.
 *   Guarantees: total >= critical_path (finish[k] >= cp[k]: ready[k] >= enumerated[k] >= the
 *   completion of each gate writer); total >= work[u] / cores[u]; total <= serial_cycles
 *   except under rate_limit (at each instant before the end some task is being dispatched,
 *   runs or waits out its completion latency, or the lowest unissued task is issued right then:
 *   with gates too, since the writers of a gate at or before the lowest unissued task come
 *   before it, so are issued, and when none of them runs or waits out its latency it is open).
 *   The result does not depend on the order in which the changes of one instant are applied,
 *   and is a function of the inputs alone (the runtime's log: of the run as enumerated, never of
 *   host timing or the worker count).
 *
 * COST. The event "queue" is a set of FIFOs, because the model is monotone: kernels of one kind
 * have one duration, so their ends come in the order they were issued (a FIFO per kernel, and a
 * binary heap over the kernels' first ends); completions are seen `completion` after ends, in
 * end order (one FIFO); a dispatcher is busy for `dispatch` after each issue (one FIFO). Ready
 * tasks wait in one queue per (dispatcher, class, unit): a FIFO ordered by (ready, index) with a
 * small heap beside it for the rare out-of-order arrival within one instant, so the first
 * issuable task of a dispatcher is the better of two heads. Free dispatchers are a bitmap.
 * Successors are linked lists threaded through the edges, built in the one pass over the tasks
 * that also validates them and computes the critical path.
 * Gates: each writer of a gate gets one more edge at the end of its successor list, to ~gate
 * (negative: no task), so it counts as having dependents; seen, it counts the gate's pending
 * writers down, and the first closed gate's index bounds the enumerator (elim). Only runs with
 * gates pay for them: the plain loops are compiled again for them (G), and the gates' part of
 * the critical path is a second pass over the tasks from the first gate (extra_cp).
 * Barriers likewise: each task in a barrier gets one edge at the end of its successor list, to
 * ntasks + its innermost group (beyond every task), so it counts as having dependents; seen, it
 * counts down the pending tasks of each barrier it is in (bar_seen: up the nesting, at most the
 * scope depth), and a barrier reaching zero makes its waiting tasks (a list per barrier) see it.
 * A task waiting for one has one more pending count. Runs with barriers use the G loops too,
 * and extra_cp computes their part of the critical path (bcp: per group, the latest cp +
 * completion of its tasks so far).
 * Three loops apply these rules. run_general does every policy, instant by instant. The plain
 * policies (immediate; interleaved without streams) have leaner copies that give the same
 * results: run_plain (several dispatchers) skips the instants at which nothing can happen, and
 * run_one (one dispatcher, the default schedule) applies events one after the other until the
 * dispatcher is free with something to issue; see "the plain policies" below. This matters
 * because the runtime replays every run it logs (simlog.c): the model's cost per task is part
 * of the runtime's (benchmarks/tasks.py).
 * Per task O(log kernels + free dispatchers scanned + scope depth); memory O(ntasks + npreds +
 * nkernels + ndispatchers * (nstreams + 1) + gates + their writers + groups), the interleaved
 * term only for interleaved. The arrays live in a
 * wsp_simws: wsp_sim_replay frees it before returning (no global state: reentrant), the
 * runtime's log keeps it between replays (wsp__sim_replay_ws). Task indices are kept in 32
 * bits: ntasks < 2^31 - 1. Cycle counts are checked not to overflow (serial_cycles plus the rate
 * limit's spacing per task below 2^61). Errors: WSP_ERR_USAGE with a message for malformed
 * input, WSP_ERR_INTERNAL when out of memory.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

#define SIM_TIME_LIMIT (INT64_MAX / 4)
#define SIM_NEVER INT64_MAX

/* A kernel heap entry: first end << 64 | kernel. Times are >= 0, so the unsigned order is
 * (time, kernel), compared without branches. */
__extension__ typedef unsigned __int128 sim_key;

/* a task index in the model's own arrays (ntasks < 2^31 is checked) */
typedef int32_t sim_idx;

static inline int64_t key_time(sim_key e) { return (int64_t)(uint64_t)(e >> 64); }

/* A ready queue: fifo[base+head .. base+tail) sorted by (ready, index), plus a heap
 * qheap[base .. base+hlen) of tasks that arrived out of order; its slice of both arrays is as
 * large as the number of tasks that can ever enter the queue. */
typedef struct sim_queue {
    int64_t base, head, tail, hlen;
} sim_queue;

/* A plain FIFO slice: a[base+head .. base+tail), every entry pushed once. */
typedef struct sim_fifo {
    int64_t base, head, tail;
} sim_fifo;

typedef struct sim_disp {
    int64_t busy_until;
    int64_t qcount;            /* ready tasks in its queues (not in an open group) */
    int64_t qunit[2];          /* of those, per unit */
    int64_t cur, run;          /* interleaved: current class, tasks issued in this run */
    int64_t gleft;             /* batched: unissued tasks of the open group */
    int64_t gid;               /* batched: the open group's number */
    int64_t ntasks, stolen;
    uint32_t umask;            /* plain loop: units (bit u) with ready tasks in its queues */
} sim_disp;

typedef struct sim_cores {
    uint64_t *bits;            /* set: free */
    int64_t nwords, nfree, hint;
} sim_cores;

typedef struct sim_pick {
    int64_t k;
    int64_t q;                 /* queue index, or -1: the dispatcher's open group */
    int64_t cls;               /* interleaved: the class it comes from */
    int sw;                    /* interleaved: starts a new run */
} sim_pick;

typedef struct sim {
    wsp_simws *ws;
    const wsp_kcost *costs;
    const wsp_simtask *tasks;
    wsp_simresult *res;
    int64_t ntasks;
    int32_t nd, timing, steal, batched;
    int64_t tn, window, C, dc, cc, spacing;

    int64_t *tkey;             /* ready time while queued, finish once issued (cp before) */
    uint32_t *state;           /* until ready: unfinished predecessors (+1 for a stream
                                  predecessor); while running: core << 1 | unit */
    sim_idx *shead;            /* successors: the first edge of each task's list, -1; NULL
                                  when there are no predecessors */
    sim_idx *enext, *eto;      /* per edge (numbered as in the predecessor array): the next
                                  edge of the same list, -1; the successor */
    sim_idx *snext;            /* next task of the same stream, -1; NULL without streams */

    sim_queue *q;              /* ready queues: nd * C * 2 */
    sim_idx *fifo, *qheap;     /* qheap is allocated on first use */
    sim_fifo *gq;              /* batched: the open group per (dispatcher, unit) */
    sim_idx *gfifo;
    uint64_t *clsbits;         /* interleaved: per dispatcher, classes with ready tasks */
    int64_t clswords;

    sim_disp *disp;
    uint64_t *freew;           /* free dispatchers (busy_until <= now), a bitmap */
    int32_t *bring;            /* busy dispatchers in busy_until order, a ring of nd (its
                                  buffer holds ringmask + 1 >= nd, a power of two) */
    int64_t ringmask;
    unsigned used;             /* units (bit u) that tasks need */
    int32_t nkernels;
    int64_t bhead, bcount;
    sim_cores cores[2];
    int64_t nready_u[2];       /* tasks in ready queues, per unit */

    sim_fifo *kq;              /* running tasks per kernel, in end order */
    sim_idx *kfifo;
    sim_key *kh;               /* heap over kernels with running tasks */
    int64_t nkh;
    sim_idx *dq;               /* ended tasks with dependents whose completion is not seen yet */
    int64_t dhead, dtail;
    int64_t rate_at;           /* when a rate-limited issue may go, or SIM_NEVER */

    int64_t next_enum, unfinished, finished;
    int64_t elim;              /* tasks below it may be produced: the first closed gate's index,
                                  or ntasks */
    int64_t wlim;              /* the window, or INT64_MAX without one */
    int64_t ngates, gnext;     /* gates (those with writers, index < ntasks); the first closed */
    int64_t *gidx, *goff, *gpend; /* per gate: its index, its writers gw[goff[i] .. goff[i+1]),
                                  writer edges whose completion is not seen yet */
    sim_idx *gw;
    /* order scopes (wsp_simgroup): a task in a scope has one more edge, eto = ntasks + its
     * innermost group, when some group it is in is a barrier */
    int64_t nbar;              /* barriers (groups some task waits for); 0: no order scopes */
    const wsp_simgroup *grp;
    int64_t *bpend;            /* per group: its tasks whose completion is not seen yet */
    int64_t *bdoff;            /* per group: its waiting tasks bdl[bdoff[g] .. bdoff[g+1]) */
    sim_idx *bdl;
    int64_t next_allowed;
    int oom;
    int64_t makespan, stolen, groups;
} sim;

static int sim_fail(char *err, int32_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)errlen, fmt, ap);
        va_end(ap);
    }
    return WSP_ERR_USAGE;
}

/* ---- working memory ---------------------------------------------------------------------------
 * One buffer per array, grown (never shrunk) on demand and kept in the wsp_simws between
 * replays: the simlog replays after every run, and mapping and faulting in tens of MB afresh
 * each time would cost more than the replay itself. Nothing is carried over but the memory. */
enum {
    B_TKEY, B_STATE, B_FIFO, B_KFIFO, B_SHEAD, B_STAIL, B_ENEXT, B_ETO, B_SNEXT, B_DQ, B_GFIFO,
    B_QHEAP, B_READY0, B_GIDX, B_GOFF, B_GPEND, B_GW, B_BPEND, B_BDOFF, B_BDL, B_BCP,
    B_LAST, B_Q, B_GQ, B_KQ, B_KH, B_DISP, B_FREEW, B_BRING, B_CLS, B_CORES0, B_CORES1, B_COUNT
};

struct wsp_simws {
    void *buf[B_COUNT];
    size_t cap[B_COUNT];       /* bytes */
};

void wsp__simws_free(wsp_simws *w) {
    if (!w) return;
    for (int b = 0; b < B_COUNT; b++) free(w->buf[b]);
    free(w);
}

/* buffer b with room for max(n, 1) elements of `size` bytes (contents undefined), or NULL */
static void *ws_get(wsp_simws *w, int b, int64_t n, size_t size) {
    if (n <= 0) n = 1;
    if ((uint64_t)n > SIZE_MAX / size) return NULL;
    size_t need = (size_t)n * size;
    if (need > w->cap[b]) {
        free(w->buf[b]);
        w->buf[b] = malloc(need);
        w->cap[b] = w->buf[b] ? need : 0;
    }
    return w->buf[b];
}

/* the same, its first max(n, 1) elements zeroed */
static void *ws_zget(wsp_simws *w, int b, int64_t n, size_t size) {
    void *p = ws_get(w, b, n, size);
    if (p) memset(p, 0, (size_t)(n > 0 ? n : 1) * size);
    return p;
}

/* round half away from zero of a finite x >= 0 (llround without libm) */
static int64_t sim_round(double x) {
    int64_t i = (int64_t)x;
    if (x - (double)i >= 0.5) i++;
    return i;
}

static int64_t sim_ceil(double x) {
    int64_t i = (int64_t)x;
    if ((double)i < x) i++;
    return i;
}

/* ---- the kernel heap ------------------------------------------------------------------------ */

static inline void heap_up(sim_key *h, int64_t i, sim_key x) {
    while (i > 0) {
        int64_t parent = (i - 1) >> 1;
        if (!(x < h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

/* replaces the minimum of h[0 .. n) by x; bottom-up: the hole at the root sinks to a leaf along
 * the smaller children, then x rises from there */
static inline void heap_replace_top(sim_key *h, int64_t n, sim_key x) {
    int64_t i = 0, c;
    while ((c = 2 * i + 2) < n) {
        c -= h[c - 1] < h[c];
        h[i] = h[c];
        i = c;
    }
    if (c - 1 < n) {
        h[i] = h[c - 1];
        i = c - 1;
    }
    heap_up(h, i, x);
}

/* ---- ready queues ---------------------------------------------------------------------------- */

static inline int before(const sim *S, int64_t a, int64_t b) {
    return S->tkey[a] < S->tkey[b] || (S->tkey[a] == S->tkey[b] && a < b);
}

static inline int64_t q_peek(const sim *S, const sim_queue *Q) {
    int64_t f = Q->head < Q->tail ? S->fifo[Q->base + Q->head] : -1;
    if (!Q->hlen) return f;
    int64_t h = S->qheap[Q->base];
    return (f < 0 || before(S, h, f)) ? h : f;
}

static inline int q_empty(const sim_queue *Q) { return Q->head == Q->tail && Q->hlen == 0; }

/* the rare out-of-order arrival: into the queue's heap (out of line) */
static __attribute__((noinline)) void q_push_heap(sim *S, sim_queue *Q, int64_t k) {
    if (!S->qheap) {
        S->qheap = ws_get(S->ws, B_QHEAP, S->ntasks, sizeof *S->qheap);
        if (!S->qheap) {
            S->oom = 1;
            return;
        }
    }
    sim_idx *h = S->qheap + Q->base;
    int64_t i = Q->hlen++;
    while (i > 0) {
        int64_t parent = (i - 1) >> 1;
        if (!before(S, k, h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = (sim_idx)k;
}

static inline void q_push(sim *S, sim_queue *Q, int64_t k) {
    if (__builtin_expect(Q->head == Q->tail || before(S, S->fifo[Q->base + Q->tail - 1], k), 1))
        S->fifo[Q->base + Q->tail++] = (sim_idx)k;
    else
        q_push_heap(S, Q, k);
}

static __attribute__((noinline)) void q_pop_heap(sim *S, sim_queue *Q) {
    int64_t f = Q->head < Q->tail ? S->fifo[Q->base + Q->head] : -1;
    if (f >= 0 && before(S, f, S->qheap[Q->base])) {
        Q->head++;
        return;
    }
    sim_idx *h = S->qheap + Q->base;
    int64_t n = --Q->hlen, i = 0;
    sim_idx x = h[n];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(S, h[c + 1], h[c])) c++;
        if (!before(S, h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = x;
}

static inline void q_pop(sim *S, sim_queue *Q) {
    if (__builtin_expect(!Q->hlen, 1)) Q->head++;
    else q_pop_heap(S, Q);
}

/* ---- cores, bitmaps -------------------------------------------------------------------------- */

static int32_t cores_take(sim_cores *c) {
    int64_t w = c->hint;
    while (c->bits[w] == 0) w++;
    c->hint = w;
    int b = __builtin_ctzll(c->bits[w]);
    c->bits[w] &= c->bits[w] - 1;
    c->nfree--;
    return (int32_t)(w * 64 + b);
}

static void cores_release(sim_cores *c, int32_t core) {
    int64_t w = core >> 6;
    c->bits[w] |= UINT64_C(1) << (core & 63);
    c->nfree++;
    if (w < c->hint) c->hint = w;
}

static void bits_fill(uint64_t *bits, int64_t n) {
    for (int64_t w = 0; w * 64 < n; w++)
        bits[w] = (n - w * 64 >= 64) ? ~UINT64_C(0) : ((UINT64_C(1) << (n - w * 64)) - 1);
}

/* first set bit in [from, lim) of a bitmap, or -1 */
static inline int64_t next_set(const uint64_t *bits, int64_t from, int64_t lim) {
    if (from >= lim) return -1;
    int64_t w = from >> 6;
    uint64_t word = bits[w] & (~UINT64_C(0) << (from & 63));
    for (;;) {
        if (word) {
            int64_t i = w * 64 + __builtin_ctzll(word);
            return i < lim ? i : -1;
        }
        if (++w * 64 >= lim) return -1;
        word = bits[w];
    }
}

/* ---- task helpers ---------------------------------------------------------------------------- */

static inline int task_unit(const sim *S, int64_t k) {
    return S->costs[S->tasks[k].kernel].unit;
}

static inline int64_t task_class(const sim *S, int64_t k) {
    if (S->C == 1) return 0;
    int32_t s = S->tasks[k].stream;
    return s < 0 ? S->C - 1 : s;
}

static inline int64_t queue_index(const sim *S, int64_t d, int64_t c, int u) {
    return (d * S->C + c) * 2 + u;
}

static void make_ready(sim *S, int64_t k, int64_t t) {
    S->tkey[k] = t;
    if (S->res) S->res[k].ready = t;
    int64_t d = S->tasks[k].dispatcher, c = task_class(S, k);
    int u = task_unit(S, k);
    q_push(S, &S->q[queue_index(S, d, c, u)], k);
    S->disp[d].qcount++;
    S->disp[d].qunit[u]++;
    S->nready_u[u]++;
    if (S->clsbits) S->clsbits[d * S->clswords + (c >> 6)] |= UINT64_C(1) << (c & 63);
}

static void enumerate(sim *S, int64_t t) {
    while (S->next_enum < S->elim && S->unfinished < S->wlim) {
        int64_t k = S->next_enum++;
        S->unfinished++;
        if (S->res) S->res[k].enumerated = t;
        if (S->state[k] == 0) make_ready(S, k, t);
    }
}

/* One writer edge of gate i is seen: when that opens the first closed gate, the enumerator
 * goes on (up to the next closed gate). */
static void gate_seen(sim *S, int64_t i, int64_t t) {
    if (--S->gpend[i] != 0 || i != S->gnext) return;
    while (++S->gnext < S->ngates && S->gpend[S->gnext] == 0) {
    }
    S->elim = S->gnext < S->ngates ? S->gidx[S->gnext] : S->ntasks;
    enumerate(S, t);
}

/* Task k's completion is seen at t by the groups it is in, from g (its innermost) outwards: a
 * barrier whose last task that was is complete, and its waiting tasks see it. */
static void bar_seen(sim *S, int64_t g, int64_t k, int64_t t) {
    for (; g >= 0; g = S->grp[g].parent) {
        if (k >= S->grp[g].close || --S->bpend[g] != 0) continue;
        for (int64_t i = S->bdoff[g]; i < S->bdoff[g + 1]; i++) {
            int64_t s = S->bdl[i];
            if (--S->state[s] == 0 && s < S->next_enum) make_ready(S, s, t);
        }
    }
}

static void deps_seen(sim *S, int64_t k, int64_t t) {
    if (S->shead) {
        for (int64_t e = S->shead[k]; e >= 0; e = S->enext[e]) {
            int64_t s = S->eto[e];
            if (s < 0) gate_seen(S, ~s, t);   /* a gate's writer edge (~gate) */
            else if (s >= S->ntasks) bar_seen(S, s - S->ntasks, k, t);   /* its groups' */
            else if (--S->state[s] == 0 && s < S->next_enum) make_ready(S, s, t);
        }
    }
    if (S->snext) {
        int64_t s = S->snext[k];
        if (s >= 0 && --S->state[s] == 0 && s < S->next_enum) make_ready(S, s, t);
    }
}

static inline int has_dependents(const sim *S, int64_t k) {
    return (S->shead && S->shead[k] >= 0) || (S->snext && S->snext[k] >= 0);
}

/* ---- choosing a task ------------------------------------------------------------------------- */

/* The first task (queue order) of class c of dispatcher v whose unit has a free core. */
static int best_of_class(const sim *S, int64_t v, int64_t c, sim_pick *p) {
    int64_t qi = queue_index(S, v, c, 0);
    int64_t a = S->cores[0].nfree > 0 ? q_peek(S, &S->q[qi]) : -1;
    int64_t b = S->cores[1].nfree > 0 ? q_peek(S, &S->q[qi + 1]) : -1;
    if (b >= 0 && (a < 0 || before(S, b, a))) {
        a = b;
        qi++;
    } else if (a < 0) {
        return 0;
    }
    p->k = a;
    p->q = qi;
    p->cls = c;
    p->sw = 0;
    return 1;
}

/* interleaved: what v would issue next (pure) */
static int interleaved_pick(const sim *S, int64_t v, sim_pick *p) {
    const sim_disp *D = &S->disp[v];
    if (D->run < S->tn && best_of_class(S, v, D->cur, p)) return 1;
    const uint64_t *bits = S->clsbits + v * S->clswords;
    int64_t start = D->cur + 1 == S->C ? 0 : D->cur + 1;
    for (int64_t c = next_set(bits, start, S->C); c >= 0; c = next_set(bits, c + 1, S->C))
        if (best_of_class(S, v, c, p)) {
            p->sw = 1;
            return 1;
        }
    for (int64_t c = next_set(bits, 0, start); c >= 0; c = next_set(bits, c + 1, start))
        if (best_of_class(S, v, c, p)) {
            p->sw = 1;
            return 1;
        }
    return 0;
}

/* batched: the first task of v's open group whose unit has a free core */
static int group_pick(const sim *S, int64_t v, sim_pick *p) {
    int64_t best = -1;
    for (int u = 0; u < 2; u++) {
        const sim_fifo *G = &S->gq[v * 2 + u];
        if (G->head == G->tail || S->cores[u].nfree == 0) continue;
        int64_t k = S->gfifo[G->base + G->head];
        if (best < 0 || before(S, k, best)) best = k;
    }
    if (best < 0) return 0;
    p->k = best;
    p->q = -1;
    p->cls = 0;
    p->sw = 0;
    return 1;
}

/* batched: v's first `count` ready tasks (queue order) become its open group */
static void form_group(sim *S, int64_t v, int64_t count) {
    sim_disp *D = &S->disp[v];
    for (int64_t i = 0; i < count; i++) {
        int64_t a = q_peek(S, &S->q[v * 2]), b = q_peek(S, &S->q[v * 2 + 1]);
        int u = (a < 0 || (b >= 0 && before(S, b, a))) ? 1 : 0;
        int64_t k = u ? b : a;
        q_pop(S, &S->q[v * 2 + u]);
        sim_fifo *G = &S->gq[v * 2 + u];
        S->gfifo[G->base + G->tail++] = (sim_idx)k;
        S->nready_u[u]--;
        D->qunit[u]--;
    }
    D->qcount -= count;
    D->gleft = count;
    D->gid = S->groups++;
}

/* what free dispatcher d issues of its own work; batched: may open a group */
static int own_pick(sim *S, int64_t d, sim_pick *p) {
    sim_disp *D = &S->disp[d];
    if (S->batched) {
        if (D->gleft == 0) {
            if (D->qcount < S->tn) return 0;
            form_group(S, d, S->tn);
        }
        return group_pick(S, d, p);
    }
    if (S->C > 1) return interleaved_pick(S, d, p);
    return best_of_class(S, d, 0, p);
}

static int steal_pick(const sim *S, int64_t d, sim_pick *p) {
    for (int64_t i = 1; i < S->nd; i++) {
        int64_t v = d + i;
        if (v >= S->nd) v -= S->nd;
        if (S->disp[v].qcount == 0) continue;
        if (S->C > 1 ? interleaved_pick(S, v, p) : best_of_class(S, v, 0, p)) return 1;
    }
    return 0;
}

/* can free dispatcher d issue something of its own now? (exact, except that under batched it
 * says whether it might) */
static inline int has_work(const sim *S, const sim_disp *D) {
    if (S->batched) return D->qcount > 0 || D->gleft > 0;
    return ((D->qunit[0] > 0) & (S->cores[0].nfree > 0)) |
           ((D->qunit[1] > 0) & (S->cores[1].nfree > 0));
}

static inline int issuable_anywhere(const sim *S) {
    return ((S->nready_u[0] > 0) & (S->cores[0].nfree > 0)) |
           ((S->nready_u[1] > 0) & (S->cores[1].nfree > 0));
}

/* ---- issuing --------------------------------------------------------------------------------- */

static void issue(sim *S, int64_t d, const sim_pick *p, int64_t t, int stolen) {
    int64_t k = p->k;
    int32_t kernel = S->tasks[k].kernel;
    const wsp_kcost *kc = &S->costs[kernel];
    int u = kc->unit;
    sim_disp *D = &S->disp[d];
    int64_t group = -1;
    if (p->q < 0) {
        S->gq[d * 2 + u].head++;
        D->gleft--;
        group = D->gid;
    } else {
        q_pop(S, &S->q[p->q]);
        int64_t owner = S->tasks[k].dispatcher;
        S->disp[owner].qcount--;
        S->disp[owner].qunit[u]--;
        S->nready_u[u]--;
        if (S->clsbits) {
            int64_t c = p->cls;
            if (q_empty(&S->q[queue_index(S, owner, c, 0)]) &&
                q_empty(&S->q[queue_index(S, owner, c, 1)]))
                S->clsbits[owner * S->clswords + (c >> 6)] &= ~(UINT64_C(1) << (c & 63));
        }
        if (S->batched) group = S->groups++;   /* a stolen single */
    }
    int32_t core = cores_take(&S->cores[u]);
    S->state[k] = (uint32_t)core << 1 | (uint32_t)u;
    int64_t start = t + S->dc, fin = start + kc->cycles;
    if (S->res) {
        wsp_simresult *r = &S->res[k];
        r->issue = t;
        r->start = start;
        r->finish = fin;
        r->core = core;
        r->unit = u;
        r->dispatcher = (int32_t)d;
        r->group = (int32_t)group;
    }
    /* its end: kernels of one kind end in issue order */
    S->tkey[k] = fin;
    sim_fifo *K = &S->kq[kernel];
    if (K->head == K->tail)
        heap_up(S->kh, S->nkh++, (sim_key)(uint64_t)fin << 64 | (sim_key)(uint64_t)kernel);
    S->kfifo[K->base + K->tail++] = (sim_idx)k;
    /* the dispatcher: busy until start, in issue order */
    D->busy_until = start;
    if (S->dc > 0) {
        S->freew[d >> 6] &= ~(UINT64_C(1) << (d & 63));
        int64_t slot = S->bhead + S->bcount++;
        S->bring[slot >= S->nd ? slot - S->nd : slot] = (int32_t)d;
    }
    D->ntasks++;
    if (stolen) {
        D->stolen++;
        S->stolen++;
    } else if (S->clsbits) {
        if (p->sw) {
            D->cur = p->cls;
            D->run = 1;
        } else {
            D->run++;
        }
    }
    S->next_allowed = t + S->spacing;
    S->makespan = fin > S->makespan ? fin : S->makespan;
}

/* 1 when rate_limit holds issues back at t (nothing more then), else 0 */
static inline int rate_blocked(sim *S, int64_t t) {
    if (S->timing != WSP_TIMING_RATE_LIMIT || t >= S->next_allowed) return 0;
    S->rate_at = S->next_allowed;
    return 1;
}

static void dispatch_phase(sim *S, int64_t t) {
    sim_pick p, best;
    const int64_t nd = S->nd;
    /* pass 1 */
    for (;;) {
        /* picks are pure except under batched (which may open groups): skip hopeless scans */
        if (!S->batched && !issuable_anywhere(S)) break;
        int64_t who = -1;
        for (int64_t w = 0; w * 64 < nd; w++)
            for (uint64_t m = S->freew[w]; m; m &= m - 1) {
                int64_t d = w * 64 + __builtin_ctzll(m);
                if (!has_work(S, &S->disp[d])) continue;
                if (own_pick(S, d, &p) && (who < 0 || before(S, p.k, best.k))) {
                    who = d;
                    best = p;
                }
            }
        if (who < 0) break;
        if (rate_blocked(S, t)) return;
        issue(S, who, &best, t, 0);
    }
    if (!S->steal) return;
    /* pass 2: free dispatchers that had nothing of their own to issue (batched: no open group
     * and fewer than n ready tasks) steal, in index order */
    for (int64_t d = next_set(S->freew, 0, nd); d >= 0 && issuable_anywhere(S);
         d = next_set(S->freew, d + 1, nd)) {
        const sim_disp *D = &S->disp[d];
        while (D->busy_until <= t && D->gleft == 0) {
            if (!steal_pick(S, d, &p)) {
                /* d's own queues hold nothing issuable (pass 1), so no other thief finds
                 * anything either; except under batched, where d's tasks below the group size
                 * may be stolen by others */
                if (!S->batched) return;
                break;
            }
            if (rate_blocked(S, t)) return;
            issue(S, d, &p, t, 1);
        }
    }
}

/* the kernel end first in (time, kernel, issue) order */
static void finish_next(sim *S, int64_t t) {
    int64_t kernel = (int64_t)(uint64_t)S->kh[0];
    sim_fifo *K = &S->kq[kernel];
    int64_t k = S->kfifo[K->base + K->head++];
    if (K->head < K->tail)
        heap_replace_top(S->kh, S->nkh,
                         (sim_key)(uint64_t)S->tkey[S->kfifo[K->base + K->head]] << 64 |
                             (uint64_t)kernel);
    else if (--S->nkh > 0)
        heap_replace_top(S->kh, S->nkh, S->kh[S->nkh]);
    cores_release(&S->cores[S->state[k] & 1], (int32_t)(S->state[k] >> 1));
    S->finished++;
    if (S->window > 0) {
        S->unfinished--;
        enumerate(S, t);
    }
    if (S->cc == 0)
        deps_seen(S, k, t);
    else if (has_dependents(S, k))
        S->dq[S->dtail++] = (sim_idx)k;
}

static int run_general(sim *S) {
    int64_t t = 0;
    /* with no window, the setup produced the tasks before the first gate and put those ready at
     * 0 into their queues */
    if (S->window > 0) enumerate(S, 0);
    int act = 1;
    for (;;) {
        if (S->oom) return WSP_ERR_INTERNAL;   /* a ready queue's overflow heap */
        if (act) dispatch_phase(S, t);
        /* the next instant */
        int64_t next = S->nkh ? key_time(S->kh[0]) : SIM_NEVER;
        if (S->dhead < S->dtail && S->tkey[S->dq[S->dhead]] + S->cc < next)
            next = S->tkey[S->dq[S->dhead]] + S->cc;
        if (S->bcount && S->disp[S->bring[S->bhead]].busy_until < next)
            next = S->disp[S->bring[S->bhead]].busy_until;
        if (S->rate_at < next) next = S->rate_at;
        if (next == SIM_NEVER) {
            /* quiescent: nothing pending, hence no kernel running and no dispatcher busy (a busy
             * dispatcher's last task has not ended yet) */
            if (S->batched && S->nready_u[0] + S->nready_u[1] > 0) {
                /* every dispatcher's partial group goes out */
                for (int64_t d = 0; d < S->nd; d++)
                    if (S->disp[d].qcount > 0 && S->disp[d].gleft == 0)
                        form_group(S, d, S->disp[d].qcount);
                act = 1;
                continue;
            }
            break;
        }
        t = next;
        /* Dispatchers becoming free: if none of them has anything to do and nothing else
         * happens, nothing has changed for anybody since the last phase, which is skipped. */
        act = 0;
        while (S->bcount && S->disp[S->bring[S->bhead]].busy_until <= t) {
            int64_t d = S->bring[S->bhead];
            S->bhead = S->bhead + 1 == S->nd ? 0 : S->bhead + 1;
            S->bcount--;
            S->freew[d >> 6] |= UINT64_C(1) << (d & 63);
            act |= has_work(S, &S->disp[d]) ||
                   (S->steal && (S->batched ? S->nready_u[0] + S->nready_u[1] > 0
                                            : issuable_anywhere(S)));
        }
        while (S->nkh && key_time(S->kh[0]) == t) {
            finish_next(S, t);
            act = 1;
        }
        while (S->dhead < S->dtail && S->tkey[S->dq[S->dhead]] + S->cc == t) {
            deps_seen(S, S->dq[S->dhead++], t);
            act = 1;
        }
        if (S->rate_at == t) {
            S->rate_at = SIM_NEVER;
            act = 1;
        }
    }
    return S->finished == S->ntasks ? WSP_OK : WSP_ERR_INTERNAL;
}

/* ---- the plain policies ------------------------------------------------------------------------
 * run_general above is the model for every policy. Most schedules need none of its issue groups,
 * classes or rate limit (immediate, and interleaved without streams, which is the same), and for
 * them the loops below compute exactly the same results with much less work per task:
 *   - the state that changes per task is a local struct (`plain`): the stores to the task
 *     arrays cannot reach it (they could reach S's fields), so the compiler need not reload it;
 *     the units are also bit masks (with a free core; with ready tasks, overall and per
 *     dispatcher), so "can anything be issued" and "has this dispatcher work" are one AND;
 *   - the helpers are compiled per case: one dispatcher or several (`one`), the unit every task
 *     needs when there is only one (`U`: 0, 1; 2 for both), a single kernel (`K1`: its FIFO is
 *     the kernel heap);
 *   - instants at which nothing can happen are skipped. Between two instants the state is
 *     settled (nothing more could be issued at the last one), so:
 *       a dispatcher becoming free matters only if it could then issue (own work, or stealing);
 *       a kernel end matters if the window counts it, if its dependents see it at once
 *         (completion 0), or if a unit has no free core while tasks of it wait; otherwise it
 *         only frees a core that nobody waits for, and is applied later, still in order and at
 *         its own time;
 *       the dependents of an end see it `completion` later: the earliest pending end + that
 *         latency bounds each such moment from below, and a seen completion is an instant;
 *     so every instant at which run_general issues, readies or enumerates a task is an instant
 *     here too, with the same state, and an extra instant issues nothing (run_plain). With one
 *     dispatcher nothing at all can be issued while it is busy, nor while it is free with
 *     nothing issuable: the events up to the first moment it is free with something issuable
 *     are applied in their order (at each time kernel ends, then completions seen), with no
 *     dispatch phase or search for the next instant in between (run_one).
 * In the benchmark's loops (an issue every `dispatch` cycles, a kernel end and perhaps a
 * completion per task) a task costs one pass through the loop instead of two or three. */

#define SIM_INLINE static inline __attribute__((always_inline))

typedef struct plain {
    int64_t nd, dc, cc, window, ntasks, ringmask;   /* copies of S's (S's could be aliased) */
    int steal;
    unsigned rmask, fmask;     /* units (bit u) with ready tasks / with a free core (run_one
                                  with a single unit in use counts instead) */
    int64_t nready[2], nfree[2], hint[2];   /* hint: no free core in the words below it */
    int64_t nkh, dhead, dtail; /* kernel heap; ended tasks whose dependents wait for completion */
    int64_t kx, cx;            /* the first kernel end, the first completion seen (or never) */
    int64_t bhead, bcount;     /* busy dispatchers (ring of ringmask + 1 >= nd) */
    int64_t nfreed;            /* free dispatchers */
    int64_t pend;              /* run_plain: running tasks with dependents */
    int64_t next_enum, unfinished, finished, makespan, stolen;
    int64_t elim, wlim;        /* as S's */
    int64_t issued;            /* run_one: tasks issued (else counted per dispatcher) */
} plain;

SIM_INLINE void pl_init(const sim *S, plain *P) {
    memset(P, 0, sizeof *P);
    P->nd = S->nd;
    P->dc = S->dc;
    P->cc = S->cc;
    P->window = S->window;
    P->ntasks = S->ntasks;
    P->steal = S->steal;
    P->ringmask = S->ringmask;
    P->nfreed = S->nd;
    for (int u = 0; u < 2; u++) {
        P->nfree[u] = S->cores[u].nfree;
        if (P->nfree[u] > 0) P->fmask |= 1u << u;
        P->nready[u] = S->nready_u[u];   /* with no window, the setup queued the tasks ready at 0 */
        if (P->nready[u] > 0) P->rmask |= 1u << u;
    }
    P->next_enum = S->next_enum;   /* with no window, the setup produced the first tasks */
    P->elim = S->elim;
    P->wlim = S->wlim;
    P->kx = P->cx = SIM_NEVER;
}

SIM_INLINE int pl_done(sim *S, const plain *P) {
    S->finished = P->finished;
    S->makespan = P->makespan;
    S->stolen = P->stolen;
    return P->finished == P->ntasks ? WSP_OK : WSP_ERR_INTERNAL;
}

SIM_INLINE int pl_has_deps(const sim *S, int64_t k) {
    return (S->shead && S->shead[k] >= 0) || (S->snext && S->snext[k] >= 0);
}

/* what dispatcher v would issue: the first task (queue order) among its queues of the units in
 * um (non-empty queues whose unit has a free core; um != 0); *u gets its unit */
SIM_INLINE int64_t pl_pick(const sim *S, int64_t v, unsigned um, int *u) {
    if (um == 3) {
        int64_t a = q_peek(S, &S->q[v * 2]), b = q_peek(S, &S->q[v * 2 + 1]);
        *u = before(S, b, a);
        return *u ? b : a;
    }
    *u = (int)(um >> 1);
    return q_peek(S, &S->q[v * 2 + (um >> 1)]);
}

SIM_INLINE void pl_ready(sim *S, plain *P, int64_t k, int64_t t, const int one, const int U) {
    S->tkey[k] = t;
    if (S->res) S->res[k].ready = t;
    int64_t d = one ? 0 : S->tasks[k].dispatcher;
    int u = U < 2 ? U : S->costs[S->tasks[k].kernel].unit;
    q_push(S, &S->q[d * 2 + u], k);
    if (!one) {
        S->disp[d].qunit[u]++;
        S->disp[d].umask |= 1u << u;
    }
    P->nready[u]++;
    if (!one || U == 2) P->rmask |= 1u << u;
}

SIM_INLINE void pl_enumerate(sim *S, plain *P, int64_t t, const int one, const int U) {
    while (P->next_enum < P->elim && P->unfinished < P->wlim) {
        int64_t k = P->next_enum++;
        P->unfinished++;
        if (S->res) S->res[k].enumerated = t;
        if (S->state[k] == 0) pl_ready(S, P, k, t, one, U);
    }
}

/* gate_seen (G: the run has gates, whose writer edges are in the successor lists) */
SIM_INLINE void pl_gate_seen(sim *S, plain *P, int64_t i, int64_t t, const int one, const int U) {
    if (--S->gpend[i] != 0 || i != S->gnext) return;
    while (++S->gnext < S->ngates && S->gpend[S->gnext] == 0) {
    }
    P->elim = S->gnext < S->ngates ? S->gidx[S->gnext] : P->ntasks;
    pl_enumerate(S, P, t, one, U);
}

/* bar_seen */
SIM_INLINE void pl_bar_seen(sim *S, plain *P, int64_t g, int64_t k, int64_t t, const int one,
                            const int U) {
    for (; g >= 0; g = S->grp[g].parent) {
        if (k >= S->grp[g].close || --S->bpend[g] != 0) continue;
        for (int64_t i = S->bdoff[g]; i < S->bdoff[g + 1]; i++) {
            int64_t s = S->bdl[i];
            if (--S->state[s] == 0 && s < P->next_enum) pl_ready(S, P, s, t, one, U);
        }
    }
}

/* G: the run has gates or order scopes, whose edges (eto < 0: ~gate; >= ntasks: ntasks + group)
 * are in the successor lists */
SIM_INLINE void pl_deps_seen(sim *S, plain *P, int64_t k, int64_t t, const int one, const int U,
                             const int G) {
    if (S->shead)
        for (int64_t e = S->shead[k]; e >= 0; e = S->enext[e]) {
            int64_t s = S->eto[e];
            if (G && (uint64_t)s >= (uint64_t)P->ntasks) {
                if (s < 0) pl_gate_seen(S, P, ~s, t, one, U);
                else pl_bar_seen(S, P, s - P->ntasks, k, t, one, U);
            } else if (--S->state[s] == 0 && s < P->next_enum) pl_ready(S, P, s, t, one, U);
        }
    if (S->snext) {
        int64_t s = S->snext[k];
        if (s >= 0 && --S->state[s] == 0 && s < P->next_enum) pl_ready(S, P, s, t, one, U);
    }
}

/* dispatcher d issues task k of unit u from its owner's queue at t. A task with dependents goes
 * into its kernel's FIFO as ~k (negative), so that its end need not ask again. */
SIM_INLINE void pl_issue(sim *S, plain *P, int64_t d, int64_t k, int u, int64_t t, int stolen,
                         const int one, const int U, const int K1) {
    int64_t owner = stolen ? S->tasks[k].dispatcher : d;
    q_pop(S, &S->q[owner * 2 + u]);
    if (!one) {
        sim_disp *O = &S->disp[owner];
        if (--O->qunit[u] == 0) O->umask &= ~(1u << u);
    }
    if (--P->nready[u] == 0 && (!one || U == 2)) P->rmask &= ~(1u << u);
    /* the lowest free core of the unit */
    uint64_t *bits = S->cores[u].bits;
    int64_t w = P->hint[u];
    while (bits[w] == 0) w++;
    P->hint[u] = w;
    int32_t core = (int32_t)(w * 64 + __builtin_ctzll(bits[w]));
    bits[w] &= bits[w] - 1;
    if (--P->nfree[u] == 0 && (!one || U == 2)) P->fmask &= ~(1u << u);
    S->state[k] = (uint32_t)core << 1 | (uint32_t)u;
    int32_t kernel = K1 ? 0 : S->tasks[k].kernel;
    int64_t start = t + P->dc, fin = start + S->costs[kernel].cycles;
    if (__builtin_expect(S->res != NULL, 0)) {
        wsp_simresult *r = &S->res[k];
        r->issue = t;
        r->start = start;
        r->finish = fin;
        r->core = core;
        r->unit = u;
        r->dispatcher = (int32_t)d;
        r->group = -1;
    }
    S->tkey[k] = fin;   /* kernels of one kind end in issue order */
    sim_fifo *K = &S->kq[kernel];
    if (K->head == K->tail) {
        if (K1) {
            P->kx = fin;
        } else {
            heap_up(S->kh, P->nkh++, (sim_key)(uint64_t)fin << 64 | (sim_key)(uint64_t)kernel);
            P->kx = key_time(S->kh[0]);
        }
    }
    int deps = pl_has_deps(S, k);
    S->kfifo[K->base + K->tail++] = deps ? ~(sim_idx)k : (sim_idx)k;
    if (one) {
        P->issued++;   /* (and it is free again at t + dispatch: run_one keeps that) */
    } else {
        P->pend += deps;
        sim_disp *D = &S->disp[d];
        D->busy_until = start;
        if (P->dc > 0) {
            S->freew[d >> 6] &= ~(UINT64_C(1) << (d & 63));
            P->nfreed--;
            S->bring[(P->bhead + P->bcount++) & P->ringmask] = (int32_t)d;
        }
        D->ntasks++;
        if (stolen) {
            D->stolen++;
            P->stolen++;
        }
    }
    if (fin > P->makespan) P->makespan = fin;
}

/* The kernel end first in (time, kernel, issue) order, at its time e (the heap's first): its
 * core is free, the window counts it, its dependents see it (now, or after the completion
 * latency). */
SIM_INLINE void pl_end(sim *S, plain *P, int64_t e, const int one, const int U, const int K1,
                       const int G) {
    int64_t kernel = K1 ? 0 : (int64_t)(uint64_t)S->kh[0];
    sim_fifo *K = &S->kq[kernel];
    int64_t k = S->kfifo[K->base + K->head++];
    int deps = k < 0;
    if (deps) k = ~k;
    if (K1) {
        sim_idx n = K->head < K->tail ? S->kfifo[K->base + K->head] : 0;
        P->kx = K->head < K->tail ? S->tkey[n < 0 ? ~n : n] : SIM_NEVER;
    } else {
        if (K->head < K->tail) {
            sim_idx n = S->kfifo[K->base + K->head];
            sim_key next = (sim_key)(uint64_t)S->tkey[n < 0 ? ~n : n] << 64 | (uint64_t)kernel;
            if (P->nkh == 1) S->kh[0] = next;
            else heap_replace_top(S->kh, P->nkh, next);
        } else if (--P->nkh > 0) {
            heap_replace_top(S->kh, P->nkh, S->kh[P->nkh]);
        }
        P->kx = P->nkh ? key_time(S->kh[0]) : SIM_NEVER;
    }
    uint32_t st = S->state[k];
    int u = U < 2 ? U : (int)(st & 1);
    int64_t w = (int64_t)(st >> 7);   /* the word of core st >> 1 */
    S->cores[u].bits[w] |= UINT64_C(1) << (st >> 1 & 63);
    if (w < P->hint[u]) P->hint[u] = w;
    P->nfree[u]++;
    if (!one || U == 2) P->fmask |= 1u << u;
    P->finished++;
    if (P->window > 0) {
        P->unfinished--;
        pl_enumerate(S, P, e, one, U);
    }
    if (!deps) return;
    if (!one) P->pend--;
    if (P->cc == 0) {
        pl_deps_seen(S, P, k, e, one, U, G);
    } else {
        if (P->dhead == P->dtail) P->cx = e + P->cc;
        S->dq[P->dtail++] = (sim_idx)k;
    }
}

/* the completions seen at x (the first pending one's time) */
SIM_INLINE void pl_completions(sim *S, plain *P, int64_t x, const int one, const int U,
                               const int G) {
    while (P->cx == x) {
        pl_deps_seen(S, P, S->dq[P->dhead++], x, one, U, G);
        P->cx = P->dhead < P->dtail ? S->tkey[S->dq[P->dhead]] + P->cc : SIM_NEVER;
    }
}

/* ---- several dispatchers: instant by instant ---- */

/* run_general's dispatch_phase */
SIM_INLINE void pl_dispatch(sim *S, plain *P, int64_t t) {
    const int64_t nd = P->nd;
    /* pass 1: among the free dispatchers with work, the first task in (ready, index) order */
    for (;;) {
        unsigned avail = P->rmask & P->fmask;
        if (!avail || !P->nfreed) return;
        int64_t d = -1, k = 0;
        int u = 0;
        for (int64_t w = 0; w * 64 < nd; w++)
            for (uint64_t m = S->freew[w]; m; m &= m - 1) {
                int64_t v = w * 64 + __builtin_ctzll(m);
                unsigned um = S->disp[v].umask & avail;
                if (!um) continue;
                int vu;
                int64_t vk = pl_pick(S, v, um, &vu);
                if (d < 0 || before(S, vk, k)) {
                    d = v;
                    k = vk;
                    u = vu;
                }
            }
        if (d < 0) break;
        pl_issue(S, P, d, k, u, t, 0, 0, 2, 0);
    }
    if (!P->steal) return;
    /* pass 2: the free dispatchers in index order steal what the first victim after them that
     * has something would issue next; when one finds nothing, no other does (pass 1 left
     * nothing issuable in the free dispatchers' own queues) */
    for (int64_t d = next_set(S->freew, 0, nd); d >= 0 && (P->rmask & P->fmask);
         d = next_set(S->freew, d + 1, nd)) {
        while (S->disp[d].busy_until <= t) {
            int64_t v = -1;
            unsigned um = 0;
            for (int64_t i = 1; i < nd; i++) {
                v = d + i >= nd ? d + i - nd : d + i;
                if ((um = S->disp[v].umask & P->fmask)) break;
            }
            if (!um) return;
            int u;
            int64_t k = pl_pick(S, v, um, &u);
            pl_issue(S, P, d, k, u, t, 1, 0, 2, 0);
        }
    }
}

/* the next instant after a dispatch phase: the first event that can change what happens */
SIM_INLINE int64_t pl_next(const sim *S, const plain *P) {
    int64_t next = SIM_NEVER;
    if (P->nkh) {
        if (P->window > 0 || (P->cc == 0 && P->pend > 0) || (P->rmask & ~P->fmask))
            next = P->kx;
        else if (P->pend > 0)
            next = P->kx + P->cc;
    }
    if (P->cx < next) next = P->cx;
    int thief = P->steal && (P->rmask & P->fmask);
    for (int64_t i = 0; i < P->bcount; i++) {
        const sim_disp *D = &S->disp[S->bring[(P->bhead + i) & P->ringmask]];
        if (D->busy_until >= next) break;
        if (thief || (D->umask & P->fmask)) {
            next = D->busy_until;
            break;
        }
    }
    if (next == SIM_NEVER && P->nkh) next = P->kx;   /* the last ends, to count them */
    return next;
}

SIM_INLINE int run_plain_t(sim *S, const int G) {
    plain P;
    pl_init(S, &P);
    int64_t t = 0;
    if (P.window > 0) pl_enumerate(S, &P, 0, 0, 2);
    for (;;) {
        if (S->oom) return WSP_ERR_INTERNAL;   /* a ready queue's overflow heap */
        pl_dispatch(S, &P, t);
        int64_t next = pl_next(S, &P);
        if (next == SIM_NEVER) break;
        t = next;
        /* the instant's changes: dispatchers becoming free, kernel ends (those skipped before
         * first, in order), completions seen */
        while (P.bcount && S->disp[S->bring[P.bhead]].busy_until <= t) {
            int64_t d = S->bring[P.bhead];
            P.bhead = (P.bhead + 1) & P.ringmask;
            P.bcount--;
            P.nfreed++;
            S->freew[d >> 6] |= UINT64_C(1) << (d & 63);
        }
        while (P.nkh && P.kx <= t) pl_end(S, &P, P.kx, 0, 2, 0, G);
        pl_completions(S, &P, t, 0, 2, G);
    }
    return pl_done(S, &P);
}

static __attribute__((noinline)) int run_plain(sim *S) { return run_plain_t(S, 0); }
static __attribute__((noinline)) int run_plain_gated(sim *S) { return run_plain_t(S, 1); }

/* ---- one dispatcher: event by event ---- */

SIM_INLINE int pl_issuable(const plain *P, const int U) {
    if (U < 2) return P->nready[U] > 0 && P->nfree[U] > 0;
    return (P->rmask & P->fmask) != 0;
}

SIM_INLINE int run_one_t(sim *S, const int U, const int K1, const int G) {
    plain P;
    pl_init(S, &P);
    int64_t t = 0, busy = 0;   /* the dispatcher is free when busy <= t */
    if (P.window > 0) pl_enumerate(S, &P, 0, 1, U);
    for (;;) {
        if (S->oom) return WSP_ERR_INTERNAL;   /* a ready queue's overflow heap */
        /* free at t: issue while something is issuable (with dispatch 0 it stays free) */
        while (pl_issuable(&P, U)) {
            int u;
            int64_t k = pl_pick(S, 0, U < 2 ? 1u << U : P.rmask & P.fmask, &u);
            pl_issue(S, &P, 0, k, u, t, 0, 1, U, K1);
            busy = t + P.dc;
            if (busy > t) break;
        }
        /* the events up to the first moment it is free with something issuable */
        for (;;) {
            int64_t x = P.kx < P.cx ? P.kx : P.cx;
            if (busy > t && x > busy) {
                t = busy;   /* free again, with the events up to then applied */
                if (pl_issuable(&P, U)) break;
            }
            if (x == SIM_NEVER) {
                S->disp[0].ntasks = P.issued;
                return pl_done(S, &P);
            }
            while (P.kx == x) pl_end(S, &P, x, 1, U, K1, G);
            pl_completions(S, &P, x, 1, U, G);
            if (x < busy) continue;
            t = x;
            if (pl_issuable(&P, U)) break;
        }
    }
}

static __attribute__((noinline)) int run_one_any(sim *S) { return run_one_t(S, 2, 0, 0); }
static __attribute__((noinline)) int run_one_vector(sim *S) { return run_one_t(S, 0, 0, 0); }
static __attribute__((noinline)) int run_one_cube(sim *S) { return run_one_t(S, 1, 0, 0); }
static __attribute__((noinline)) int run_one_vector_k1(sim *S) { return run_one_t(S, 0, 1, 0); }
static __attribute__((noinline)) int run_one_cube_k1(sim *S) { return run_one_t(S, 1, 1, 0); }
static __attribute__((noinline)) int run_one_gated(sim *S) { return run_one_t(S, 2, 0, 1); }
/* order scopes (P.seq loops of one kernel, on one dispatcher) are common: as lean as without */
static __attribute__((noinline)) int run_one_vector_k1_gated(sim *S) {
    return run_one_t(S, 0, 1, 1);
}
static __attribute__((noinline)) int run_one_cube_k1_gated(sim *S) {
    return run_one_t(S, 1, 1, 1);
}

static int run(sim *S) {
    if (S->batched || S->C > 1 || S->timing == WSP_TIMING_RATE_LIMIT) return run_general(S);
    if (S->ngates > 0 || S->nbar > 0) {
        if (S->nd > 1) return run_plain_gated(S);
        if (S->nkernels == 1 && S->used == 1) return run_one_vector_k1_gated(S);
        if (S->nkernels == 1 && S->used == 2) return run_one_cube_k1_gated(S);
        return run_one_gated(S);
    }
    if (S->nd > 1) return run_plain(S);
    if (S->used == 1) return S->nkernels == 1 ? run_one_vector_k1(S) : run_one_vector(S);
    if (S->used == 2) return S->nkernels == 1 ? run_one_cube_k1(S) : run_one_cube(S);
    return run_one_any(S);
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int check_ns(double ns, double clock, const char *what, int64_t *out, char *err,
                    int32_t errlen) {
    if (!isfinite(ns) || ns < 0)
        return sim_fail(err, errlen, "cycle model: machine %s must be finite and >= 0 (got %g)",
                        what, ns);
    double c = ns * clock;
    if (!(c < 1e18))
        return sim_fail(err, errlen, "cycle model: machine %s is too large", what);
    *out = sim_round(c);
    return WSP_OK;
}

/* everything about the machine and the policy; the tasks come later */
static int check_setup(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                       int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks, int64_t *dc,
                       int64_t *cc, int64_t *spacing, char *err, int32_t errlen) {
    if (!m || !p) return sim_fail(err, errlen, "cycle model: no machine or policy given");
    if (!isfinite(m->clock_ghz) || m->clock_ghz <= 0)
        return sim_fail(err, errlen, "cycle model: clock_ghz must be > 0 (got %g)", m->clock_ghz);
    if (m->cube_cores < 0 || m->vector_cores < 0)
        return sim_fail(err, errlen, "cycle model: negative core count (cube %d, vector %d)",
                        (int)m->cube_cores, (int)m->vector_cores);
    if (p->ndispatchers < 1)
        return sim_fail(err, errlen, "cycle model: ndispatchers must be >= 1 (got %d)",
                        (int)p->ndispatchers);
    if (p->nstreams < 0)
        return sim_fail(err, errlen, "cycle model: nstreams must be >= 0 (got %d)",
                        (int)p->nstreams);
    if (p->window < 0)
        return sim_fail(err, errlen, "cycle model: window must be >= 0 (got %" PRId64 ")",
                        p->window);
    if (p->timing < WSP_TIMING_IMMEDIATE || p->timing > WSP_TIMING_RATE_LIMIT)
        return sim_fail(err, errlen, "cycle model: unknown timing policy %d", (int)p->timing);
    if ((p->timing == WSP_TIMING_BATCHED || p->timing == WSP_TIMING_INTERLEAVED) &&
        p->timing_n < 1)
        return sim_fail(err, errlen, "cycle model: %s(n) needs n >= 1 (got %" PRId64 ")",
                        p->timing == WSP_TIMING_BATCHED ? "batched" : "interleaved", p->timing_n);
    *spacing = 0;
    if (p->timing == WSP_TIMING_RATE_LIMIT) {
        if (isnan(p->rate_per_ms) || p->rate_per_ms <= 0)
            return sim_fail(err, errlen, "cycle model: rate_limit needs a rate > 0 (got %g)",
                            p->rate_per_ms);
        double s = m->clock_ghz * 1e6 / p->rate_per_ms;
        if (!(s < 1e18))
            return sim_fail(err, errlen, "cycle model: rate_limit rate %g is too small",
                            p->rate_per_ms);
        *spacing = sim_ceil(s);
    }
    int rc = check_ns(m->dispatch_ns, m->clock_ghz, "dispatch_ns", dc, err, errlen);
    if (rc) return rc;
    rc = check_ns(m->completion_ns, m->clock_ghz, "completion_ns", cc, err, errlen);
    if (rc) return rc;
    if (nkernels < 0 || (nkernels > 0 && !costs))
        return sim_fail(err, errlen, "cycle model: bad kernel cost table (%d entries)",
                        (int)nkernels);
    for (int32_t i = 0; i < nkernels; i++) {
        if (costs[i].unit != WSP_UNIT_VECTOR && costs[i].unit != WSP_UNIT_CUBE)
            return sim_fail(err, errlen, "cycle model: kernel %d has unit %d (not 0 or 1)",
                            (int)i, (int)costs[i].unit);
        if (costs[i].cycles < 0)
            return sim_fail(err, errlen, "cycle model: kernel %d has negative cycles %" PRId64,
                            (int)i, costs[i].cycles);
    }
    if (ntasks < 0 || ntasks >= INT32_MAX || (ntasks > 0 && !tasks))
        return sim_fail(err, errlen, "cycle model: bad task count %" PRId64 " (0 .. 2^31 - 2)",
                        ntasks);
    return WSP_OK;
}

/* The first malformed field of task k, in the order the checks are documented (a task-field
 * error is found by one combined test per task; this says which). */
static int task_error(const wsp_policy *p, int32_t nkernels, int64_t k, const wsp_simtask *tk,
                      char *err, int32_t errlen) {
    if (tk->kernel < 0 || tk->kernel >= nkernels)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has kernel %d of %d", k,
                        (int)tk->kernel, (int)nkernels);
    if (tk->dispatcher < 0 || tk->dispatcher >= p->ndispatchers)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has dispatcher %d of %d", k,
                        (int)tk->dispatcher, (int)p->ndispatchers);
    if (tk->stream < -1 || tk->stream >= p->nstreams)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has stream %d of %d", k,
                        (int)tk->stream, (int)p->nstreams);
    return sim_fail(err, errlen, "cycle model: task %" PRId64 " has %d predecessors", k,
                    (int)tk->npreds);
}

/* What one pass over the tasks finds besides the per-task arrays. */
typedef struct scan_out {
    int64_t npreds, serial, work[2], cp_max;
    unsigned used;             /* units (bit u) that tasks need */
    int missing_preds;         /* a task has predecessors, but there is no array */
    int64_t bad_task, bad_pred;/* the first predecessor out of range: task, predecessor; or -1 */
    int64_t nready0;           /* tasks without predecessors, listed in ready0 */
} scan_out;

/* One pass over the tasks, in order:
 *   - fields in range (the first bad one is reported at once);
 *   - serial and work: each a sum of terms below SIM_TIME_LIMIT that stops as soon as it passes
 *     it, so never overflows (`checked` only if some task could make them pass it);
 *   - tasks per kernel and per ready queue (the slices' sizes);
 *   - predecessors: a bad one is only recorded (it is reported after the checks that come before
 *     it); each edge is appended to its predecessor's successor list (allocated at the first
 *     edge), so every list comes out in increasing task order with no second pass;
 *   - pending counts, stream links, the tasks without predecessors (listed in ready0, if given)
 *     and the critical path (in tkey; gate_cp adds the gates' part).
 * p64 or p32 is the predecessor array: each caller's loop is compiled for its width. */
static inline __attribute__((always_inline)) int
scan_tasks(sim *S, const wsp_policy *p, int32_t nkernels, const int64_t *p64, const int32_t *p32,
           int64_t npreds_cap, sim_idx *ready0, int64_t *last, scan_out *o, char *err,
           int32_t errlen, const int checked) {
    const wsp_simtask *tasks = S->tasks;
    const wsp_kcost *costs = S->costs;
    const int64_t cc = S->cc, dc = S->dc, ntasks = S->ntasks;
    const uint32_t nk32 = (uint32_t)nkernels, nd32 = (uint32_t)p->ndispatchers,
                   ns32 = (uint32_t)p->nstreams;
    const int havep = p64 || p32;
    /* locals, not S's fields: the stores to the int64 arrays could reach those */
    const int64_t C = S->C;
    sim_fifo *const kq = S->kq;
    sim_queue *const q = S->q;
    sim_idx *const snext = S->snext;
    int64_t *const tkey = S->tkey, cpm = 0, serial = 0, work[2] = {0, 0}, off = 0;
    sim_idx *shead = NULL, *stail = NULL, *enext = NULL, *eto = NULL;
    uint32_t *const state = S->state;
    unsigned used = 0;
    for (int64_t k = 0; k < ntasks; k++) {
        const wsp_simtask *tk = &tasks[k];
        if (((uint32_t)tk->kernel >= nk32) | ((uint32_t)tk->dispatcher >= nd32) |
            ((uint32_t)tk->stream + 1u > ns32) | ((uint32_t)tk->npreds >= (uint32_t)INT32_MAX))
            return task_error(p, nkernels, k, tk, err, errlen);
        const wsp_kcost *kc = &costs[tk->kernel];
        int u = kc->unit;
        used |= 1u << u;
        if (checked) {
            if (kc->cycles > SIM_TIME_LIMIT)
                return sim_fail(err, errlen, "cycle model: cycle counts overflow");
            work[u] += kc->cycles;
            serial += dc + cc + kc->cycles;
            if (serial > SIM_TIME_LIMIT || work[u] > SIM_TIME_LIMIT)
                return sim_fail(err, errlen, "cycle model: cycle counts overflow");
        } else {
            work[u] += kc->cycles;
            serial += dc + cc + kc->cycles;
        }
        kq[tk->kernel].tail++;
        int64_t c = C == 1 ? 0 : tk->stream < 0 ? C - 1 : tk->stream;   /* task_class */
        q[(tk->dispatcher * C + c) * 2 + u].tail++;
        int64_t base = 0;
        if (shead) shead[k] = -1;
        if (tk->npreds > 0) {
            if (!havep) {
                o->missing_preds = 1;
            } else {
                if (!shead) {
                    shead = S->shead = ws_get(S->ws, B_SHEAD, ntasks, sizeof *shead);
                    stail = ws_get(S->ws, B_STAIL, ntasks, sizeof *stail);
                    enext = S->enext = ws_get(S->ws, B_ENEXT, npreds_cap, sizeof *enext);
                    eto = S->eto = ws_get(S->ws, B_ETO, npreds_cap, sizeof *eto);
                    if (!shead || !stail || !enext || !eto) return WSP_ERR_INTERNAL;
                    for (int64_t i = 0; i <= k; i++) shead[i] = -1;
                }
                for (int32_t i = 0; i < tk->npreds; i++) {
                    int64_t e = off + i, j = p32 ? p32[e] : p64[e];
                    if (j < 0 || j >= k) {
                        if (o->bad_task < 0) {
                            o->bad_task = k;
                            o->bad_pred = j;
                        }
                        continue;
                    }
                    if (tkey[j] + cc > base) base = tkey[j] + cc;
                    /* edge e: appended to j's list */
                    eto[e] = (sim_idx)k;
                    enext[e] = -1;
                    if (shead[j] < 0) shead[j] = (sim_idx)e;
                    else enext[stail[j]] = (sim_idx)e;
                    stail[j] = (sim_idx)e;
                }
            }
        }
        off += tk->npreds;
        uint32_t pending = (uint32_t)tk->npreds;
        if (snext) {
            snext[k] = -1;
            if (tk->stream >= 0) {
                int64_t j = last[tk->stream];
                if (j >= 0) {
                    if (tkey[j] + cc > base) base = tkey[j] + cc;
                    snext[j] = (sim_idx)k;
                    pending++;
                }
                last[tk->stream] = k;
            }
        }
        state[k] = pending;
        if (ready0 && pending == 0) ready0[o->nready0++] = (sim_idx)k;
        tkey[k] = base + dc + kc->cycles;
        if (tkey[k] > cpm) cpm = tkey[k];
    }
    o->npreds = off;
    o->serial = serial;
    o->work[0] = work[0];
    o->work[1] = work[1];
    o->cp_max = cpm;
    o->used = used;
    return WSP_OK;
}

/* Checks the gates and keeps those that gate something (writers, index < ntasks) in S's gate
 * arrays, their writers copied; *ngw gets the writers kept. */
static int setup_gates(sim *S, int64_t ngates, const wsp_simgate *gates, const int64_t *gw64,
                       const int32_t *gw32, int64_t *ngw, char *err, int32_t errlen) {
    *ngw = 0;
    if (ngates < 0 || (ngates > 0 && !gates))
        return sim_fail(err, errlen, "cycle model: bad gate count %" PRId64, ngates);
    int64_t prev = 0, total = 0, kept = 0, keptw = 0;
    for (int64_t i = 0; i < ngates; i++) {
        const wsp_simgate *g = &gates[i];
        if (g->index < prev || g->index > S->ntasks)
            return sim_fail(err, errlen,
                            "cycle model: gate %" PRId64 " has index %" PRId64 " (gates in "
                            "nondecreasing order, %" PRId64 " .. %" PRId64 ")", i, g->index, prev,
                            S->ntasks);
        if (g->nwriters < 0 || (g->nwriters > 0 && !gw64 && !gw32))
            return sim_fail(err, errlen, "cycle model: gate %" PRId64 " has %d writers%s", i,
                            (int)g->nwriters, g->nwriters > 0 ? " but there is no array" : "");
        for (int64_t j = total; j < total + g->nwriters; j++) {
            int64_t w = gw32 ? gw32[j] : gw64[j];
            if (w < 0 || w >= g->index)
                return sim_fail(err, errlen,
                                "cycle model: gate %" PRId64 " has writer %" PRId64 " (must be "
                                "an earlier task, 0 .. %" PRId64 ")", i, w, g->index - 1);
        }
        total += g->nwriters;
        if (g->nwriters > 0 && g->index < S->ntasks) {
            kept++;
            keptw += g->nwriters;
        }
        prev = g->index;
    }
    if (kept == 0) return WSP_OK;
    if (keptw >= INT32_MAX)
        return sim_fail(err, errlen, "cycle model: too many gate writers (%" PRId64 ")", keptw);
    S->gidx = ws_get(S->ws, B_GIDX, kept, sizeof *S->gidx);
    S->goff = ws_get(S->ws, B_GOFF, kept + 1, sizeof *S->goff);
    S->gpend = ws_get(S->ws, B_GPEND, kept, sizeof *S->gpend);
    S->gw = ws_get(S->ws, B_GW, keptw, sizeof *S->gw);
    if (!S->gidx || !S->goff || !S->gpend || !S->gw) return WSP_ERR_INTERNAL;
    int64_t n = 0, off = 0;
    total = 0;
    for (int64_t i = 0; i < ngates; i++) {
        const wsp_simgate *g = &gates[i];
        if (g->nwriters > 0 && g->index < S->ntasks) {
            S->gidx[n] = g->index;
            S->goff[n] = off;
            S->gpend[n] = g->nwriters;
            for (int64_t j = total; j < total + g->nwriters; j++)
                S->gw[off++] = (sim_idx)(gw32 ? gw32[j] : gw64[j]);
            n++;
        }
        total += g->nwriters;
    }
    S->goff[n] = off;
    S->ngates = n;
    *ngw = off;
    return WSP_OK;
}

/* The critical path with gates and order scopes: from the first gate on, a task's chain may
 * also start at the completion of any writer of a gate at or before it (the floor), as its
 * enumeration does; and a task waiting for a barrier, at the completion of any task in that
 * group (bcp: the latest cp + completion of the group's tasks so far; every one of them comes
 * before the task). Recomputes cp (tkey) from the first gate or the first task in a scope,
 * after scan_tasks (which checked the tasks and predecessors); a separate pass, so that runs
 * without either pay nothing for it. Returns the new maximum. */
static __attribute__((noinline)) int64_t extra_cp(sim *S, const int64_t *p64, const int32_t *p32,
                                                  int64_t *last, int32_t nstreams, int64_t cpm,
                                                  int64_t nmemb, const wsp_simmemb *memb,
                                                  int64_t *bcp, int64_t ngroups) {
    const int64_t cc = S->cc;
    int64_t g0 = S->ngates > 0 ? S->gidx[0] : S->ntasks;
    if (S->nbar > 0 && memb[0].task < g0) g0 = memb[0].task;
    int64_t *tkey = S->tkey, off = 0, floor = 0, gi = 0, mi = 0;
    for (int64_t g = 0; S->nbar > 0 && g < ngroups; g++) bcp[g] = 0;
    for (int32_t s = 0; s < nstreams; s++) last[s] = -1;
    for (int64_t k = 0; k < S->ntasks; k++) {
        const wsp_simtask *tk = &S->tasks[k];
        int64_t sp = -1;
        if (tk->stream >= 0) {
            sp = last[tk->stream];
            last[tk->stream] = k;
        }
        if (k < g0) {
            off += tk->npreds;
            continue;
        }
        for (; gi < S->ngates && S->gidx[gi] == k; gi++)
            for (int64_t j = S->goff[gi]; j < S->goff[gi + 1]; j++)
                if (tkey[S->gw[j]] + cc > floor) floor = tkey[S->gw[j]] + cc;
        int64_t base = floor;
        for (int32_t i = 0; i < tk->npreds; i++) {
            int64_t j = p32 ? p32[off + i] : p64[off + i];
            if (tkey[j] + cc > base) base = tkey[j] + cc;
        }
        off += tk->npreds;
        if (sp >= 0 && tkey[sp] + cc > base) base = tkey[sp] + cc;
        const wsp_simmemb *mb = S->nbar > 0 && mi < nmemb && memb[mi].task == k ? &memb[mi++]
                                                                                : NULL;
        if (mb && mb->barrier >= 0 && S->bpend[mb->barrier] > 0 && bcp[mb->barrier] > base)
            base = bcp[mb->barrier];
        tkey[k] = base + S->dc + S->costs[tk->kernel].cycles;
        if (tkey[k] > cpm) cpm = tkey[k];
        for (int64_t g = mb ? mb->group : -1; g >= 0; g = S->grp[g].parent)
            if (k < S->grp[g].close && tkey[k] + cc > bcp[g]) bcp[g] = tkey[k] + cc;
    }
    return cpm;
}

/* Each gate writer's edge (eto = ~gate, numbered from npreds on) at the end of its successor
 * list, so that the writer counts as having dependents. */
static int gate_edges(sim *S, int64_t npreds, int64_t cap) {
    sim_idx *shead = S->shead, *stail = S->ws->buf[B_STAIL];   /* scan_tasks' lists */
    if (!shead) {   /* no predecessors: the lists hold gate (and order) edges only: cap */
        shead = S->shead = ws_get(S->ws, B_SHEAD, S->ntasks, sizeof *shead);
        stail = ws_get(S->ws, B_STAIL, S->ntasks, sizeof *stail);
        S->enext = ws_get(S->ws, B_ENEXT, cap, sizeof *S->enext);
        S->eto = ws_get(S->ws, B_ETO, cap, sizeof *S->eto);
        if (!shead || !stail || !S->enext || !S->eto) return WSP_ERR_INTERNAL;
        for (int64_t k = 0; k < S->ntasks; k++) shead[k] = -1;
    }
    int64_t e = npreds;
    for (int64_t i = 0; i < S->ngates; i++)
        for (int64_t j = S->goff[i]; j < S->goff[i + 1]; j++, e++) {
            int64_t w = S->gw[j];
            S->eto[e] = ~(sim_idx)i;
            S->enext[e] = -1;
            if (shead[w] < 0) shead[w] = (sim_idx)e;
            else S->enext[stail[w]] = (sim_idx)e;
            stail[w] = (sim_idx)e;
        }
    return WSP_OK;
}

/* Order scopes: checks the groups and memberships (the log's; malformed ones are usage
 * errors) and finds the barriers (groups some task waits for). With any, sets S's order arrays:
 * the groups, their pending counts (bpend: tasks in the group), the tasks waiting for each
 * (bdoff/bdl, in task order); *nedges gets the number of tasks in a scope that are in some
 * barrier (each gets one edge, order_edges). Without any (S->nbar == 0), scopes change
 * nothing. */
static int setup_orders(sim *S, int64_t ngroups, const wsp_simgroup *groups, int64_t nmemb,
                        const wsp_simmemb *memb, int64_t *nedges, char *err, int32_t errlen) {
    *nedges = 0;
    if (ngroups < 0 || ngroups >= INT32_MAX || (ngroups > 0 && !groups) || nmemb < 0 ||
        (nmemb > 0 && !memb))
        return sim_fail(err, errlen, "cycle model: bad order scopes (%" PRId64 " groups, %"
                        PRId64 " tasks in them)", ngroups, nmemb);
    if (nmemb == 0) return WSP_OK;
    if (S->ntasks + ngroups >= INT32_MAX)
        return sim_fail(err, errlen, "cycle model: too many order groups (%" PRId64 ")",
                        ngroups);
    for (int64_t g = 0; g < ngroups; g++)
        if (groups[g].parent < -1 || groups[g].parent >= g || groups[g].close < 0)
            return sim_fail(err, errlen, "cycle model: order group %" PRId64 " has parent %d, "
                            "close %d", g, (int)groups[g].parent, (int)groups[g].close);
    int64_t prev = -1, nb = 0;
    S->bdoff = ws_zget(S->ws, B_BDOFF, ngroups + 1, sizeof *S->bdoff);
    if (!S->bdoff) return WSP_ERR_INTERNAL;
    for (int64_t i = 0; i < nmemb; i++) {
        const wsp_simmemb *m = &memb[i];
        if (m->task <= prev || m->task >= S->ntasks || m->group < 0 || m->group >= ngroups ||
            m->barrier < -1 || m->barrier >= ngroups ||
            (m->barrier >= 0 && groups[m->barrier].close > m->task))
            return sim_fail(err, errlen, "cycle model: order scope entry %" PRId64 " (task %d, "
                            "group %d, barrier %d) is malformed", i, (int)m->task,
                            (int)m->group, (int)m->barrier);
        prev = m->task;
        if (m->barrier >= 0) {
            S->bdoff[m->barrier + 1]++;
            nb++;
        }
    }
    if (nb == 0) return WSP_OK;   /* nobody waits for a group */
    S->bpend = ws_zget(S->ws, B_BPEND, ngroups, sizeof *S->bpend);
    S->bdl = ws_get(S->ws, B_BDL, nb, sizeof *S->bdl);
    if (!S->bpend || !S->bdl) return WSP_ERR_INTERNAL;
    int64_t nbar = 0;
    for (int64_t g = 0; g < ngroups; g++) {
        nbar += S->bdoff[g + 1] > 0;
        S->bdoff[g + 1] += S->bdoff[g];
    }
    /* the waiting tasks (bdoff[g] counts up while filling, then is restored) */
    for (int64_t i = 0; i < nmemb; i++)
        if (memb[i].barrier >= 0) S->bdl[S->bdoff[memb[i].barrier]++] = memb[i].task;
    for (int64_t g = ngroups; g > 0; g--) S->bdoff[g] = S->bdoff[g - 1];
    S->bdoff[0] = 0;
    /* pending counts: each task in every group it is in; an edge if one of them is a barrier */
    int64_t ne = 0;
    for (int64_t i = 0; i < nmemb; i++) {
        int any = 0;
        for (int64_t g = memb[i].group; g >= 0; g = groups[g].parent)
            if (memb[i].task < groups[g].close) {
                S->bpend[g]++;
                any |= S->bdoff[g + 1] > S->bdoff[g];
            }
        ne += any;
    }
    S->grp = groups;
    S->nbar = nbar;
    *nedges = ne;
    return WSP_OK;
}

/* After scan_tasks: a task waiting for a barrier that has tasks (always, from the log) has one
 * more pending count (so it is not ready at 0), and each task in some barrier one more edge
 * (eto = ntasks + its innermost group, numbered from e on) at the end of its successor list,
 * so that it counts as having dependents; its completion is seen by its groups (bar_seen). */
static int order_edges(sim *S, int64_t nmemb, const wsp_simmemb *memb, int64_t e, int64_t cap) {
    sim_idx *shead = S->shead, *stail = S->ws->buf[B_STAIL];
    if (!shead) {   /* no predecessors or gates: the lists hold order edges only */
        shead = S->shead = ws_get(S->ws, B_SHEAD, S->ntasks, sizeof *shead);
        stail = ws_get(S->ws, B_STAIL, S->ntasks, sizeof *stail);
        S->enext = ws_get(S->ws, B_ENEXT, cap, sizeof *S->enext);
        S->eto = ws_get(S->ws, B_ETO, cap, sizeof *S->eto);
        if (!shead || !stail || !S->enext || !S->eto) return WSP_ERR_INTERNAL;
        for (int64_t k = 0; k < S->ntasks; k++) shead[k] = -1;
    }
    const wsp_simgroup *grp = S->grp;
    for (int64_t i = 0; i < nmemb; i++) {
        const wsp_simmemb *m = &memb[i];
        int64_t k = m->task;
        if (m->barrier >= 0 && S->bpend[m->barrier] > 0) S->state[k]++;
        int any = 0;
        for (int64_t g = m->group; g >= 0 && !any; g = grp[g].parent)
            any = k < grp[g].close && S->bdoff[g + 1] > S->bdoff[g];
        if (!any) continue;
        S->eto[e] = (sim_idx)(S->ntasks + m->group);
        S->enext[e] = -1;
        if (shead[k] < 0) shead[k] = (sim_idx)e;
        else S->enext[stail[k]] = (sim_idx)e;
        stail[k] = (sim_idx)e;
        e++;
    }
    return WSP_OK;
}

int wsp__sim_replay_ws(wsp_simws **wsp, const wsp_machine *m, const wsp_policy *p,
                       const wsp_kcost *costs, int32_t nkernels, int64_t ntasks,
                       const wsp_simtask *tasks, const int64_t *preds64, const int32_t *preds32,
                       int64_t npreds_known, int64_t ngates, const wsp_simgate *gates,
                       const int64_t *gw64, const int32_t *gw32, int64_t ngroups,
                       const wsp_simgroup *groups, int64_t nmemb, const wsp_simmemb *memb,
                       wsp_simresult *results, wsp_simsummary *summary, wsp_simdisp *disp,
                       char *err, int32_t errlen) {
    if (err && errlen > 0) err[0] = '\0';
    int64_t dc = 0, cc = 0, spacing = 0;
    int rc = check_setup(m, p, costs, nkernels, ntasks, tasks, &dc, &cc, &spacing, err, errlen);
    if (rc) return rc;
    if (!*wsp && !(*wsp = calloc(1, sizeof **wsp))) return WSP_ERR_INTERNAL;
    wsp_simws *ws = *wsp;

    sim S;
    memset(&S, 0, sizeof S);
    S.ws = ws;
    S.costs = costs;
    S.tasks = tasks;
    S.res = results;
    S.ntasks = ntasks;
    S.nd = p->ndispatchers;
    S.timing = p->timing;
    S.steal = p->steal != 0;
    S.batched = p->timing == WSP_TIMING_BATCHED;
    S.tn = p->timing_n;
    S.window = p->window;
    S.C = (p->timing == WSP_TIMING_INTERLEAVED && p->nstreams > 0) ? (int64_t)p->nstreams + 1 : 1;
    S.dc = dc;
    S.cc = cc;
    S.spacing = spacing;
    S.next_allowed = INT64_MIN;
    S.rate_at = SIM_NEVER;
    S.wlim = S.window > 0 ? S.window : INT64_MAX;
    int64_t nq = (int64_t)S.nd * S.C * 2;
    int64_t *last = NULL;
    int64_t ngw = 0, nbe = 0;
    if (ngates != 0 && (rc = setup_gates(&S, ngates, gates, gw64, gw32, &ngw, err, errlen)))
        return rc;
    if ((ngroups != 0 || nmemb != 0) &&
        (rc = setup_orders(&S, ngroups, groups, nmemb, memb, &nbe, err, errlen)))
        return rc;
    S.elim = S.ngates > 0 ? S.gidx[0] : ntasks;
    S.next_enum = S.window > 0 ? 0 : S.elim;

    rc = WSP_ERR_INTERNAL;
    S.kq = ws_zget(ws, B_KQ, nkernels, sizeof *S.kq);
    S.q = ws_zget(ws, B_Q, nq, sizeof *S.q);
    S.tkey = ws_get(ws, B_TKEY, ntasks, sizeof *S.tkey);
    S.state = ws_get(ws, B_STATE, ntasks, sizeof *S.state);
    if (!S.kq || !S.q || !S.tkey || !S.state) return rc;
    if (p->nstreams > 0) {
        S.snext = ws_get(ws, B_SNEXT, ntasks, sizeof *S.snext);
        last = ws_get(ws, B_LAST, p->nstreams, sizeof *last);
        if (!S.snext || !last) return rc;
        for (int32_t s = 0; s < p->nstreams; s++) last[s] = -1;
    }

    scan_out o;
    memset(&o, 0, sizeof o);
    o.bad_task = o.bad_pred = -1;
    /* room for every edge: the sum of the valid predecessor counts (an invalid one is reported
     * before any later task's edges are read) */
    if (npreds_known < 0) {
        npreds_known = 0;
        for (int64_t k = 0; k < ntasks; k++)
            if (tasks[k].npreds > 0 && tasks[k].npreds < INT32_MAX) npreds_known += tasks[k].npreds;
    }
    npreds_known += ngw + nbe;   /* the gates' writer edges and the order edges follow */
    /* serial and work stay below SIM_TIME_LIMIT if every task could take the longest kernel */
    int64_t longest = 0, bound;
    for (int32_t i = 0; i < nkernels; i++)
        if (costs[i].cycles > longest) longest = costs[i].cycles;
    int checked = longest > SIM_TIME_LIMIT ||
                  __builtin_mul_overflow(ntasks, dc + cc + longest, &bound) ||
                  bound > SIM_TIME_LIMIT;
    /* with no window, the tasks without predecessors are ready at 0: listed for the queues */
    sim_idx *ready0 = NULL;
    if (S.window == 0 && !(ready0 = ws_get(ws, B_READY0, ntasks, sizeof *ready0))) return rc;
    if (checked)
        rc = preds32 ? scan_tasks(&S, p, nkernels, NULL, preds32, npreds_known, ready0, last, &o,
                                  err, errlen, 1)
                     : scan_tasks(&S, p, nkernels, preds64, NULL, npreds_known, ready0, last, &o,
                                  err, errlen, 1);
    else
        rc = preds32 ? scan_tasks(&S, p, nkernels, NULL, preds32, npreds_known, ready0, last, &o,
                                  err, errlen, 0)
                     : scan_tasks(&S, p, nkernels, preds64, NULL, npreds_known, ready0, last, &o,
                                  err, errlen, 0);
    if (rc) return rc;
    int64_t npreds = o.npreds;
    S.used = o.used;
    S.nkernels = nkernels;
    if (o.missing_preds) return sim_fail(err, errlen, "cycle model: no predecessor array");
    int64_t ncores[2] = {m->vector_cores, m->cube_cores};
    for (int u = 0; u < 2; u++)
        if ((o.used >> u & 1) && ncores[u] == 0)
            return sim_fail(err, errlen,
                            "cycle model: tasks need %s cores but the machine has none",
                            u == WSP_UNIT_CUBE ? "cube" : "vector");
    {
        int64_t extra;
        if (__builtin_mul_overflow(ntasks, spacing, &extra) || extra > SIM_TIME_LIMIT ||
            o.serial + extra > SIM_TIME_LIMIT)
            return sim_fail(err, errlen, "cycle model: cycle counts overflow");
    }
    if (o.bad_task >= 0)
        return sim_fail(err, errlen,
                        "cycle model: task %" PRId64 " has predecessor %" PRId64
                        " (must be an earlier task, 0 .. %" PRId64 ")", o.bad_task, o.bad_pred,
                        o.bad_task - 1);
    if (S.ngates > 0 || S.nbar > 0) {
        if (npreds + ngw + nbe >= INT32_MAX)
            return sim_fail(err, errlen, "cycle model: too many edges (%" PRId64 ")",
                            npreds + ngw + nbe);
        if (S.ngates > 0 && gate_edges(&S, npreds, ngw + nbe)) return WSP_ERR_INTERNAL;
        int64_t *bcp = NULL;
        if (S.nbar > 0) {
            if (order_edges(&S, nmemb, memb, npreds + ngw, ngw + nbe)) return WSP_ERR_INTERNAL;
            if (!(bcp = ws_get(ws, B_BCP, ngroups, sizeof *bcp))) return WSP_ERR_INTERNAL;
            /* the tasks waiting for a barrier are not ready at 0 */
            int64_t n0 = 0;
            for (int64_t i = 0; ready0 && i < o.nready0; i++)
                if (S.state[ready0[i]] == 0) ready0[n0++] = ready0[i];
            o.nready0 = n0;
        }
        o.cp_max = extra_cp(&S, preds64, preds32, last, p->nstreams, o.cp_max, nmemb, memb, bcp,
                            ngroups);
    }

    rc = WSP_ERR_INTERNAL;
    S.fifo = ws_get(ws, B_FIFO, ntasks, sizeof *S.fifo);
    S.kfifo = ws_get(ws, B_KFIFO, ntasks, sizeof *S.kfifo);
    S.kh = ws_get(ws, B_KH, nkernels, sizeof *S.kh);
    S.disp = ws_zget(ws, B_DISP, S.nd, sizeof *S.disp);
    S.freew = ws_get(ws, B_FREEW, ((int64_t)S.nd + 63) / 64, sizeof *S.freew);
    for (S.ringmask = 1; S.ringmask < S.nd; S.ringmask *= 2) {
    }
    S.ringmask--;
    S.bring = ws_get(ws, B_BRING, S.ringmask + 1, sizeof *S.bring);
    if (!S.fifo || !S.kfifo || !S.kh || !S.disp || !S.freew || !S.bring) return rc;
    bits_fill(S.freew, S.nd);
    if (cc > 0 && (npreds > 0 || p->nstreams > 0 || S.ngates > 0 || S.nbar > 0)) {
        S.dq = ws_get(ws, B_DQ, ntasks, sizeof *S.dq);
        if (!S.dq) return rc;
    }
    if (S.C > 1) {
        S.clswords = (S.C + 63) / 64;
        S.clsbits = ws_zget(ws, B_CLS, S.nd * S.clswords, sizeof *S.clsbits);
        if (!S.clsbits) return rc;
    }

    /* slices: a ready queue per (dispatcher, class, unit) and a FIFO per kernel, each as large
     * as the tasks that can enter it (counted above) */
    {
        int64_t base = 0;
        for (int64_t i = 0; i < nq; i++) {
            int64_t n = S.q[i].tail;
            S.q[i].base = base;
            S.q[i].tail = 0;
            base += n;
        }
        base = 0;
        for (int32_t i = 0; i < nkernels; i++) {
            int64_t n = S.kq[i].tail;
            S.kq[i].base = base;
            S.kq[i].tail = 0;
            base += n;
        }
    }
    if (S.window == 0) {
        /* everything before the first gate is enumerated at 0; the tasks without predecessors
         * are ready then, in index order, so they go straight to the ends of their FIFOs */
        const int64_t elim = S.elim;
        int64_t nready0 = o.nready0;
        while (nready0 > 0 && ready0[nready0 - 1] >= elim) nready0--;   /* behind a gate */
        for (int64_t k = 0; results && k < elim; k++) results[k].enumerated = 0;
        for (int64_t i = 0; i < nready0; i++) {
            int64_t k = ready0[i];
            S.tkey[k] = 0;
            if (results) results[k].ready = 0;
            int64_t d = tasks[k].dispatcher, c = task_class(&S, k);
            int u = costs[tasks[k].kernel].unit;
            sim_queue *Q = &S.q[queue_index(&S, d, c, u)];
            S.fifo[Q->base + Q->tail++] = (sim_idx)k;
            S.disp[d].qcount++;
            S.disp[d].qunit[u]++;
            S.disp[d].umask |= 1u << u;
            S.nready_u[u]++;
            if (S.clsbits) S.clsbits[d * S.clswords + (c >> 6)] |= UINT64_C(1) << (c & 63);
        }
    }
    if (S.batched) {
        S.gq = ws_zget(ws, B_GQ, nq, sizeof *S.gq);
        S.gfifo = ws_get(ws, B_GFIFO, ntasks, sizeof *S.gfifo);
        if (!S.gq || !S.gfifo) return rc;
        for (int64_t i = 0; i < nq; i++) S.gq[i].base = S.q[i].base;
    }
    for (int u = 0; u < 2; u++) {
        if (!(o.used >> u & 1)) continue;
        int64_t n = ncores[u] < ntasks ? ncores[u] : ntasks;
        sim_cores *c = &S.cores[u];
        c->nwords = (n + 63) / 64;
        c->bits = ws_get(ws, u ? B_CORES1 : B_CORES0, c->nwords, sizeof *c->bits);
        if (!c->bits) return rc;
        bits_fill(c->bits, n);
        c->nfree = n;
    }

    rc = run(&S);
    if (rc == WSP_ERR_INTERNAL && !S.oom && err && errlen > 0)
        snprintf(err, (size_t)errlen, "cycle model: stalled with %" PRId64 " of %" PRId64
                 " tasks finished", S.finished, ntasks);
    if (rc) return rc;

    if (summary) {
        summary->tasks = ntasks;
        summary->total_cycles = S.makespan;
        summary->critical_path = o.cp_max;
        summary->work[0] = o.work[0];
        summary->work[1] = o.work[1];
        summary->serial_cycles = o.serial;
        summary->stolen = S.stolen;
        summary->groups = S.groups;
    }
    if (disp)
        for (int32_t d = 0; d < S.nd; d++) {
            disp[d].tasks = S.disp[d].ntasks;
            disp[d].stolen = S.disp[d].stolen;
            disp[d].busy_cycles = S.disp[d].ntasks * dc;
        }
    return WSP_OK;
}

int wsp_sim_replay_gated(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                         int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                         const int64_t *preds, int64_t ngates, const wsp_simgate *gates,
                         const int64_t *writers, wsp_simresult *results,
                         wsp_simsummary *summary, wsp_simdisp *disp, char *err, int32_t errlen) {
    wsp_simws *ws = NULL;   /* reentrant: this call's working memory is its own */
    int rc = wsp__sim_replay_ws(&ws, m, p, costs, nkernels, ntasks, tasks, preds, NULL, -1,
                                ngates, gates, writers, NULL, 0, NULL, 0, NULL, results, summary,
                                disp, err, errlen);
    wsp__simws_free(ws);
    return rc;
}

int wsp_sim_replay(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                   int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                   const int64_t *preds, wsp_simresult *results, wsp_simsummary *summary,
                   wsp_simdisp *disp, char *err, int32_t errlen) {
    return wsp_sim_replay_gated(m, p, costs, nkernels, ntasks, tasks, preds, 0, NULL, NULL,
                                results, summary, disp, err, errlen);
}
