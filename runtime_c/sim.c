/* sim.c: wsp_sim_replay, a deterministic discrete-event cycle model of an Ascend-like NPU.
 *
 * Time is counted in integer clock cycles (int64). Nanoseconds become cycles as
 * round-half-away(ns * clock_ghz) (llround, computed without libm): `dispatch` from the
 * machine's dispatch_ns, `completion` from its completion_ns.
 *
 * THE MODEL
 *   Enumerator. Produces the tasks in order, instantly, at time 0. With a window N > 0 task k is
 *     produced only when fewer than N produced tasks are unfinished (finished = its kernel has
 *     ended), so it waits for kernel ends. `enumerated` is that time.
 *   Readiness. Task k is ready at max(enumerated, finish[j] + completion for every predecessor j,
 *     and for a task of stream s: finish of the previous task of s in enumeration order +
 *     completion). So a stream's tasks never overlap and start in enumeration order.
 *   Dispatchers (AICPUs, p->ndispatchers). Each holds the ready tasks assigned to it, ordered by
 *     (ready, task index). A free dispatcher issues the first task in that order whose unit
 *     (cube: m->cube_cores, vector: m->vector_cores) has a free core: it is busy for `dispatch`
 *     cycles, the task starts at issue + dispatch on the lowest-numbered free core of its unit and
 *     finishes `cycles` later (0 allowed). The core is reserved from issue to finish.
 *   Completion. At `finish` the core is free and the window counts the task finished; dependents
 *     see it at finish + completion.
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
 *     cp[k] = max(0, cp[j] + completion over predecessors j and the stream predecessor)
 *     + dispatch + cycles[k]; work[u] = kernel cycles of unit u; serial_cycles = sum over tasks
 *     of dispatch + cycles + completion; stolen; groups.
 *   disp[d]: tasks issued by d, of those stolen, busy_cycles = tasks * dispatch.
 *   Guarantees: total >= critical_path; total >= work[u] / cores[u]; total <= serial_cycles
 *   except under rate_limit (at each instant before the end some task is being dispatched,
 *   runs or waits out its completion latency, or the lowest unissued task is issued right then).
 *   The result does not depend on the order in which the changes of one instant are applied.
 *
 * COST. The event "queue" is a set of FIFOs, because the model is monotone: kernels of one kind
 * have one duration, so their ends come in the order they were issued (a FIFO per kernel, and a
 * binary heap over the kernels' first ends); completions are seen `completion` after ends, in
 * end order (one FIFO); a dispatcher is busy for `dispatch` after each issue (one FIFO). Ready
 * tasks wait in one queue per (dispatcher, class, unit): a FIFO ordered by (ready, index) with a
 * small heap beside it for the rare out-of-order arrival within one instant, so the first
 * issuable task of a dispatcher is the better of two heads. Free dispatchers are a bitmap.
 * Per task O(log kernels + free dispatchers scanned); memory O(ntasks + npreds + nkernels +
 * ndispatchers * (nstreams + 1)), the last term only for interleaved; everything is malloc'ed
 * and freed before returning; no global state (reentrant). Task indices are kept in 32 bits:
 * ntasks < 2^31 - 1. Cycle counts are checked not to overflow (serial_cycles plus the rate
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
    const wsp_kcost *costs;
    const wsp_simtask *tasks;
    wsp_simresult *res;
    int64_t ntasks;
    int32_t nd, timing, steal, batched;
    int64_t tn, window, C, dc, cc, spacing;

    int64_t *tkey;             /* ready time while queued, finish once issued (cp before) */
    uint32_t *state;           /* until ready: unfinished predecessors (+1 for a stream
                                  predecessor); while running: core << 1 | unit */
    int64_t *succ_off;         /* successors (CSR); NULL when there are no predecessors */
    sim_idx *succ;
    sim_idx *snext;            /* next task of the same stream, -1; NULL without streams */

    sim_queue *q;              /* ready queues: nd * C * 2 */
    sim_idx *fifo, *qheap;     /* qheap is allocated on first use */
    sim_fifo *gq;              /* batched: the open group per (dispatcher, unit) */
    sim_idx *gfifo;
    uint64_t *clsbits;         /* interleaved: per dispatcher, classes with ready tasks */
    int64_t clswords;

    sim_disp *disp;
    uint64_t *freew;           /* free dispatchers (busy_until <= now), a bitmap */
    int32_t *bring;            /* busy dispatchers in busy_until order, a ring of nd */
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

static void *sim_alloc(int64_t n, size_t size) {
    if (n <= 0) n = 1;
    if ((uint64_t)n > SIZE_MAX / size) return NULL;
    return malloc((size_t)n * size);
}

static void *sim_zalloc(int64_t n, size_t size) {
    if (n <= 0) n = 1;
    if ((uint64_t)n > SIZE_MAX / size) return NULL;
    return calloc((size_t)n, size);
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

static void heap_up(sim_key *h, int64_t i, sim_key x) {
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
static void heap_replace_top(sim_key *h, int64_t n, sim_key x) {
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

static void q_push(sim *S, sim_queue *Q, int64_t k) {
    if (Q->head == Q->tail || before(S, S->fifo[Q->base + Q->tail - 1], k)) {
        S->fifo[Q->base + Q->tail++] = (sim_idx)k;
        return;
    }
    if (!S->qheap) {
        S->qheap = sim_alloc(S->ntasks, sizeof *S->qheap);
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

static void q_pop(sim *S, sim_queue *Q) {
    if (!Q->hlen) {
        Q->head++;
        return;
    }
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
    while (S->next_enum < S->ntasks && S->unfinished < S->window) {
        int64_t k = S->next_enum++;
        S->unfinished++;
        if (S->res) S->res[k].enumerated = t;
        if (S->state[k] == 0) make_ready(S, k, t);
    }
}

static void deps_seen(sim *S, int64_t k, int64_t t) {
    if (S->succ_off) {
        for (int64_t i = S->succ_off[k]; i < S->succ_off[k + 1]; i++) {
            int64_t s = S->succ[i];
            if (--S->state[s] == 0 && s < S->next_enum) make_ready(S, s, t);
        }
    }
    if (S->snext) {
        int64_t s = S->snext[k];
        if (s >= 0 && --S->state[s] == 0 && s < S->next_enum) make_ready(S, s, t);
    }
}

static inline int has_dependents(const sim *S, int64_t k) {
    return (S->succ_off && S->succ_off[k + 1] > S->succ_off[k]) || (S->snext && S->snext[k] >= 0);
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

static int run(sim *S) {
    int64_t t = 0;
    if (S->window > 0) {
        enumerate(S, 0);
    } else {
        /* everything is enumerated at 0; tasks without predecessors are ready then, in index
         * order, so they go straight to the ends of their FIFOs */
        S->next_enum = S->ntasks;
        for (int64_t k = 0; k < S->ntasks; k++) {
            if (S->res) S->res[k].enumerated = 0;
            if (S->state[k] != 0) continue;
            S->tkey[k] = 0;
            if (S->res) S->res[k].ready = 0;
            int64_t d = S->tasks[k].dispatcher, c = task_class(S, k);
            int u = task_unit(S, k);
            sim_queue *Q = &S->q[queue_index(S, d, c, u)];
            S->fifo[Q->base + Q->tail++] = (sim_idx)k;
            S->disp[d].qcount++;
            S->disp[d].qunit[u]++;
            S->nready_u[u]++;
            if (S->clsbits) S->clsbits[d * S->clswords + (c >> 6)] |= UINT64_C(1) << (c & 63);
        }
    }
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

/* ---- setup ----------------------------------------------------------------------------------- */

static void sim_free(sim *S) {
    free(S->tkey);
    free(S->state);
    free(S->succ_off);
    free(S->succ);
    free(S->snext);
    free(S->q);
    free(S->fifo);
    free(S->qheap);
    free(S->gq);
    free(S->gfifo);
    free(S->clsbits);
    free(S->disp);
    free(S->freew);
    free(S->bring);
    free(S->cores[0].bits);
    free(S->cores[1].bits);
    free(S->kq);
    free(S->kfifo);
    free(S->kh);
    free(S->dq);
}

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

int wsp_sim_replay(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                   int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                   const int64_t *preds, wsp_simresult *results, wsp_simsummary *summary,
                   wsp_simdisp *disp, char *err, int32_t errlen) {
    if (err && errlen > 0) err[0] = '\0';
    int64_t dc = 0, cc = 0, spacing = 0;
    int rc = check_setup(m, p, costs, nkernels, ntasks, tasks, &dc, &cc, &spacing, err, errlen);
    if (rc) return rc;

    sim S;
    memset(&S, 0, sizeof S);
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
    int64_t nq = (int64_t)S.nd * S.C * 2;
    int64_t *last = NULL;

    rc = WSP_ERR_INTERNAL;
    S.kq = sim_zalloc(nkernels, sizeof *S.kq);
    if (!S.kq) goto out;

    /* the tasks: ranges, predecessor count, units in use, tasks per kernel, serial and work */
    int64_t npreds = 0, serial = 0, work[2] = {0, 0};
    int used[2] = {0, 0};
    for (int64_t k = 0; k < ntasks; k++) {
        const wsp_simtask *tk = &tasks[k];
        rc = WSP_ERR_USAGE;
        if (tk->kernel < 0 || tk->kernel >= nkernels) {
            sim_fail(err, errlen, "cycle model: task %" PRId64 " has kernel %d of %d", k,
                     (int)tk->kernel, (int)nkernels);
            goto out;
        }
        if (tk->dispatcher < 0 || tk->dispatcher >= p->ndispatchers) {
            sim_fail(err, errlen, "cycle model: task %" PRId64 " has dispatcher %d of %d", k,
                     (int)tk->dispatcher, (int)p->ndispatchers);
            goto out;
        }
        if (tk->stream < -1 || tk->stream >= p->nstreams) {
            sim_fail(err, errlen, "cycle model: task %" PRId64 " has stream %d of %d", k,
                     (int)tk->stream, (int)p->nstreams);
            goto out;
        }
        if (tk->npreds < 0 || tk->npreds == INT32_MAX) {
            sim_fail(err, errlen, "cycle model: task %" PRId64 " has %d predecessors", k,
                     (int)tk->npreds);
            goto out;
        }
        npreds += tk->npreds;
        const wsp_kcost *kc = &costs[tk->kernel];
        used[kc->unit] = 1;
        work[kc->unit] += kc->cycles;
        S.kq[tk->kernel].tail++;
        if (__builtin_add_overflow(serial, dc + cc, &serial) ||
            __builtin_add_overflow(serial, kc->cycles, &serial) || serial > SIM_TIME_LIMIT ||
            work[kc->unit] > SIM_TIME_LIMIT) {
            sim_fail(err, errlen, "cycle model: cycle counts overflow");
            goto out;
        }
    }
    rc = WSP_ERR_USAGE;
    if (npreds > 0 && !preds) {
        sim_fail(err, errlen, "cycle model: no predecessor array");
        goto out;
    }
    int64_t ncores[2] = {m->vector_cores, m->cube_cores};
    for (int u = 0; u < 2; u++)
        if (used[u] && ncores[u] == 0) {
            sim_fail(err, errlen, "cycle model: tasks need %s cores but the machine has none",
                     u == WSP_UNIT_CUBE ? "cube" : "vector");
            goto out;
        }
    {
        int64_t extra;
        if (__builtin_mul_overflow(ntasks, spacing, &extra) || extra > SIM_TIME_LIMIT ||
            serial + extra > SIM_TIME_LIMIT) {
            sim_fail(err, errlen, "cycle model: cycle counts overflow");
            goto out;
        }
    }

    rc = WSP_ERR_INTERNAL;
    S.tkey = sim_alloc(ntasks, sizeof *S.tkey);
    S.state = sim_alloc(ntasks, sizeof *S.state);
    S.fifo = sim_alloc(ntasks, sizeof *S.fifo);
    S.kfifo = sim_alloc(ntasks, sizeof *S.kfifo);
    S.kh = sim_alloc(nkernels, sizeof *S.kh);
    S.q = sim_zalloc(nq, sizeof *S.q);
    S.disp = sim_zalloc(S.nd, sizeof *S.disp);
    S.freew = sim_alloc(((int64_t)S.nd + 63) / 64, sizeof *S.freew);
    S.bring = sim_alloc(S.nd, sizeof *S.bring);
    if (!S.tkey || !S.state || !S.fifo || !S.kfifo || !S.kh || !S.q || !S.disp ||
        !S.freew || !S.bring)
        goto out;
    bits_fill(S.freew, S.nd);
    if (npreds > 0) {
        S.succ_off = sim_zalloc(ntasks + 1, sizeof *S.succ_off);
        S.succ = sim_alloc(npreds, sizeof *S.succ);
        if (!S.succ_off || !S.succ) goto out;
    }
    if (p->nstreams > 0) {
        S.snext = sim_alloc(ntasks, sizeof *S.snext);
        last = sim_alloc(p->nstreams, sizeof *last);
        if (!S.snext || !last) goto out;
        for (int32_t s = 0; s < p->nstreams; s++) last[s] = -1;
    }
    if (cc > 0 && (npreds > 0 || p->nstreams > 0)) {
        S.dq = sim_alloc(ntasks, sizeof *S.dq);
        if (!S.dq) goto out;
    }

    /* predecessors: validation, pending counts, successor counts, the critical path (in tkey),
     * queue sizes */
    int64_t cp_max = 0;
    {
        int64_t off = 0;
        for (int64_t k = 0; k < ntasks; k++) {
            const wsp_simtask *tk = &tasks[k];
            int64_t base = 0;
            for (int32_t i = 0; i < tk->npreds; i++) {
                int64_t j = preds[off + i];
                if (j < 0 || j >= k) {
                    rc = sim_fail(err, errlen,
                                  "cycle model: task %" PRId64 " has predecessor %" PRId64
                                  " (must be an earlier task, 0 .. %" PRId64 ")", k, j, k - 1);
                    goto out;
                }
                if (S.tkey[j] + cc > base) base = S.tkey[j] + cc;
                S.succ_off[j + 1]++;
            }
            off += tk->npreds;
            S.state[k] = (uint32_t)tk->npreds;
            if (S.snext) {
                S.snext[k] = -1;
                if (tk->stream >= 0) {
                    int64_t j = last[tk->stream];
                    if (j >= 0) {
                        if (S.tkey[j] + cc > base) base = S.tkey[j] + cc;
                        S.snext[j] = (sim_idx)k;
                        S.state[k]++;
                    }
                    last[tk->stream] = k;
                }
            }
            S.tkey[k] = base + dc + costs[tk->kernel].cycles;
            if (S.tkey[k] > cp_max) cp_max = S.tkey[k];
            S.q[queue_index(&S, tk->dispatcher, task_class(&S, k), task_unit(&S, k))].tail++;
        }
    }
    if (npreds > 0) {
        for (int64_t k = 0; k < ntasks; k++) S.succ_off[k + 1] += S.succ_off[k];
        int64_t *cursor = sim_alloc(ntasks, sizeof *cursor);
        if (!cursor) goto out;
        memcpy(cursor, S.succ_off, (size_t)ntasks * sizeof *cursor);
        int64_t off = 0;
        for (int64_t k = 0; k < ntasks; k++)
            for (int32_t i = 0; i < tasks[k].npreds; i++)
                S.succ[cursor[preds[off++]]++] = (sim_idx)k;
        free(cursor);
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
    if (S.batched) {
        S.gq = sim_zalloc(nq, sizeof *S.gq);
        S.gfifo = sim_alloc(ntasks, sizeof *S.gfifo);
        if (!S.gq || !S.gfifo) goto out;
        for (int64_t i = 0; i < nq; i++) S.gq[i].base = S.q[i].base;
    }
    if (S.C > 1) {
        S.clswords = (S.C + 63) / 64;
        S.clsbits = sim_zalloc(S.nd * S.clswords, sizeof *S.clsbits);
        if (!S.clsbits) goto out;
    }
    for (int u = 0; u < 2; u++) {
        if (!used[u]) continue;
        int64_t n = ncores[u] < ntasks ? ncores[u] : ntasks;
        sim_cores *c = &S.cores[u];
        c->nwords = (n + 63) / 64;
        c->bits = sim_alloc(c->nwords, sizeof *c->bits);
        if (!c->bits) goto out;
        bits_fill(c->bits, n);
        c->nfree = n;
    }

    rc = run(&S);
    if (rc == WSP_ERR_INTERNAL && !S.oom && err && errlen > 0)
        snprintf(err, (size_t)errlen, "cycle model: stalled with %" PRId64 " of %" PRId64
                 " tasks finished", S.finished, ntasks);
    if (rc) goto out;

    if (summary) {
        summary->tasks = ntasks;
        summary->total_cycles = S.makespan;
        summary->critical_path = cp_max;
        summary->work[0] = work[0];
        summary->work[1] = work[1];
        summary->serial_cycles = serial;
        summary->stolen = S.stolen;
        summary->groups = S.groups;
    }
    if (disp)
        for (int32_t d = 0; d < S.nd; d++) {
            disp[d].tasks = S.disp[d].ntasks;
            disp[d].stolen = S.disp[d].stolen;
            disp[d].busy_cycles = S.disp[d].ntasks * dc;
        }
out:
    free(last);
    sim_free(&S);
    return rc;
}
