/* sim.c: wsp_sim_replay(_gated), a deterministic discrete-event cycle model of an Ascend-like NPU.
 * Why one file: the replay loops inline their per-task helpers (see "ONE FILE" below).
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
 *       With nstreams == 0 it is exactly immediate. interleaved(n, priority = s)
 *       (p->timing_first = s) starts every dispatcher's current class at stream s instead of 0.
 *     rate_limit(r): issue BEGINNINGS of all dispatchers together are at least
 *       S = ceil(clock_ghz * 1e6 / r) cycles apart (r in tasks per ms).
 *   Devices and comm engines (docs/schedules.md, "The interconnect"). With m->devices = D > 1
 *     the machine is D NPUs: device v has the dispatchers v*n .. v*n + n - 1 (n = ndispatchers
 *     / D; a task's device is its dispatcher's) and its own cube and vector cores, and its
 *     tasks are issued only by its dispatchers (work_steal: thieves of its own) to its cores.
 *     A task of a WSP_UNIT_COMM kernel (a collective's message) goes to no dispatcher: when
 *     ready it joins its device's comm queue, ordered by (ready, task index), and the device's
 *     comm engine starts the first one as soon as the engine is free, with no dispatch
 *     latency; it ends `cycles` later, but the engine is free again `latency` cycles before
 *     that (messages pipeline). Its end and completion work as a kernel's. Such a run (D > 1
 *     or a comm kernel: `multi`) is replayed by run_general only.
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
 *
 * ONE FILE: the replay's loops (run_general, run_plain, run_one) and the per-task helpers they
 * share (the ready queues, the kernel heap, core and dispatcher bitmaps, readiness) stay in one
 * translation unit. The helpers are inlined into the loops, which are compiled per case from
 * always_inline templates (SIM_INLINE); in separate files every queue operation of every task
 * would be a call, and the model's cost per task counts against the runtime's (the runtime
 * replays every run it logs). What the loops do not need lives in sim_setup.c: checking the
 * inputs and turning them into the replay's state (`sim`, wsp_internal.h: successor lists,
 * gates, order-scope barriers, the ready queues' slices, the critical path), and the entry
 * points wsp_sim_replay(_gated) and wsp__sim_replay_ws.
 */
#include <stdint.h>
#include <string.h>

#include "wsp_internal.h"

static inline int64_t key_time(sim_key e) { return (int64_t)(uint64_t)(e >> 64); }

typedef struct sim_pick {
    int64_t k;
    int64_t q;                 /* queue index, or -1: the dispatcher's open group */
    int64_t cls;               /* interleaved: the class it comes from */
    int sw;                    /* interleaved: starts a new run */
} sim_pick;

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
        S->qheap = wsp__simws_get(S->ws, B_QHEAP, S->ntasks, sizeof *S->qheap);
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

/* multi runs: the free cores of unit u on the device of dispatcher v (else: the machine's) */
static inline int64_t free_cores(const sim *S, int64_t v, int u) {
    return S->multi ? S->dcores[v / S->ndpd * 2 + u].nfree : S->cores[u].nfree;
}

/* a core of unit u for task k (its device's in a multi run) */
static inline int32_t take_core(sim *S, int64_t k, int u) {
    if (!S->multi) return cores_take(&S->cores[u]);
    S->cores[u].nfree--;
    return cores_take(&S->dcores[S->tasks[k].dispatcher / S->ndpd * 2 + u]);
}

static inline void release_core(sim *S, int64_t k) {
    int32_t core = (int32_t)(S->state[k] >> 1);
    if (!S->multi) {
        cores_release(&S->cores[S->state[k] & 1], core);
        return;
    }
    int u = task_unit(S, k);
    if (u == WSP_UNIT_COMM) return;   /* its engine was free again `latency` before */
    S->cores[u].nfree++;
    cores_release(&S->dcores[S->tasks[k].dispatcher / S->ndpd * 2 + u], core);
}

void wsp__sim_q_push(sim *S, sim_queue *Q, int64_t k) { q_push(S, Q, k); }

static void make_ready(sim *S, int64_t k, int64_t t) {
    S->tkey[k] = S->prio ? S->prio[k] : t;   /* the queue order: (key, index) */
    if (S->res) S->res[k].ready = t;
    int64_t d = S->tasks[k].dispatcher, c = wsp__sim_task_class(S, k);
    int u = task_unit(S, k);
    if (u == WSP_UNIT_COMM) {   /* its device's comm engine takes it, in (ready, index) order */
        S->tkey[k] = t;
        q_push(S, &S->q[S->nqd + d / S->ndpd], k);
        S->ncomm++;
        return;
    }
    q_push(S, &S->q[wsp__sim_queue_index(S, d, c, u)], k);
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
    int64_t qi = wsp__sim_queue_index(S, v, c, 0);
    int64_t a = free_cores(S, v, 0) > 0 ? q_peek(S, &S->q[qi]) : -1;
    int64_t b = free_cores(S, v, 1) > 0 ? q_peek(S, &S->q[qi + 1]) : -1;
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
        if (G->head == G->tail || free_cores(S, v, u) == 0) continue;
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
    /* a dispatcher steals only from its own device's (its AICPUs issue to its cores) */
    const int64_t n = S->ndpd, base = d - d % n;
    for (int64_t i = 1; i < n; i++) {
        int64_t v = d + i;
        if (v >= base + n) v -= n;
        if (S->disp[v].qcount == 0) continue;
        if (S->C > 1 ? interleaved_pick(S, v, p) : best_of_class(S, v, 0, p)) return 1;
    }
    return 0;
}

/* can free dispatcher d issue something of its own now? (exact, except that under batched it
 * says whether it might) */
static inline int has_work(const sim *S, int64_t d) {
    const sim_disp *D = &S->disp[d];
    if (S->batched) return D->qcount > 0 || D->gleft > 0;
    return ((D->qunit[0] > 0) & (free_cores(S, d, 0) > 0)) |
           ((D->qunit[1] > 0) & (free_cores(S, d, 1) > 0));
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
            if (q_empty(&S->q[wsp__sim_queue_index(S, owner, c, 0)]) &&
                q_empty(&S->q[wsp__sim_queue_index(S, owner, c, 1)]))
                S->clsbits[owner * S->clswords + (c >> 6)] &= ~(UINT64_C(1) << (c & 63));
        }
        if (S->batched) group = S->groups++;   /* a stolen single */
    }
    int32_t core = take_core(S, k, u);
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

/* multi runs: every free comm engine starts the first message of its device's queue at t:
 * no dispatcher, no core, only the engine, so messages overlap the device's kernels; the
 * engine is free again `latency` before the message ends (the next one's transfer overlaps
 * this one's latency, as HCCL pipelines its chunks) */
static void comm_phase(sim *S, int64_t t) {
    for (int64_t v = 0; v < S->ndev && S->ncomm > 0; v++) {
        sim_queue *Q = &S->q[S->nqd + v];
        while (S->ebusy[v] <= t && !q_empty(Q)) {
            int64_t k = q_peek(S, Q);
            q_pop(S, Q);
            S->ncomm--;
            int32_t kernel = S->tasks[k].kernel;
            int32_t core = 0;
            S->state[k] = 0;
            int64_t fin = t + S->costs[kernel].cycles;
            S->ebusy[v] = fin - S->costs[kernel].latency;
            if (S->res) {
                wsp_simresult *r = &S->res[k];
                r->issue = r->start = t;
                r->finish = fin;
                r->core = core;
                r->unit = WSP_UNIT_COMM;
                r->dispatcher = S->tasks[k].dispatcher;
                r->group = -1;
            }
            /* its end: messages of one kernel take equal time, so end in start order */
            S->tkey[k] = fin;
            sim_fifo *K = &S->kq[kernel];
            if (K->head == K->tail)
                heap_up(S->kh, S->nkh++, (sim_key)(uint64_t)fin << 64 | (sim_key)(uint64_t)kernel);
            S->kfifo[K->base + K->tail++] = (sim_idx)k;
            S->makespan = fin > S->makespan ? fin : S->makespan;
        }
    }
}

static void dispatch_phase(sim *S, int64_t t) {
    sim_pick p, best;
    const int64_t nd = S->nd;
    if (S->ncomm > 0) comm_phase(S, t);
    /* pass 1 */
    for (;;) {
        /* picks are pure except under batched (which may open groups): skip hopeless scans */
        if (!S->batched && !issuable_anywhere(S)) break;
        int64_t who = -1;
        for (int64_t w = 0; w * 64 < nd; w++)
            for (uint64_t m = S->freew[w]; m; m &= m - 1) {
                int64_t d = w * 64 + __builtin_ctzll(m);
                if (!has_work(S, d)) continue;
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
                 * may be stolen by others, and with devices, where the next thief may be
                 * another device's */
                if (!S->batched && !S->multi) return;
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
    release_core(S, k);
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
        /* an engine becoming free with messages waiting */
        for (int64_t v = 0; S->ncomm > 0 && v < S->ndev; v++)
            if (S->ebusy[v] > t && S->ebusy[v] < next && !q_empty(&S->q[S->nqd + v]))
                next = S->ebusy[v];
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
            act |= has_work(S, d) ||
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
        if (S->ncomm > 0) act = 1;   /* an engine may be free for a waiting message */
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

int wsp__sim_run(sim *S) {
    if (S->multi) return run_general(S);   /* devices, comm engines: the general loop only */
    if (S->batched || S->C > 1 || S->timing == WSP_TIMING_RATE_LIMIT || S->prio)
        return run_general(S);
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

