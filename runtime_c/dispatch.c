/* dispatch.c: worker threads, ready queues and task completion.
 *
 * Placement. Every task carries a dispatcher index: the schedule's choice, which traces and the
 * cycle model report (round robin for now: the k-th task of a run goes to k % n; affinity, hash
 * and dispatch_by only have to choose it differently). On the host the index picks the worker
 * queue a ready task is put on (dispatcher % workers); which host thread then runs it is an
 * execution detail: a worker that releases a successor while it has nothing else of its own
 * queued keeps it (a chain stays on one core instead of paying a cross-core hand-off per task),
 * and idle workers steal from other workers' queues, so a busy or sleeping worker never holds
 * up work that another could run.
 *
 * Hand-off without per-task locks. Each worker has two rings of node pointers: `in` (ready tasks
 * from the submitter, its only producer; the owner and idle thieves pop one task at a time with a
 * CAS on `head`, so nothing queued is ever hidden in a private batch behind a long kernel) and
 * `out` (finished nodes back to the submitter, which recycles them; single producer, single
 * consumer). The submitter publishes `tail` per batch of WSP_BATCH tasks and the workers hand
 * back per batch, so those lines cross cores once per batch; readers prefetch the nodes ahead (an
 * intrusive list would make every hand-off a chain of dependent cache misses). Rare paths use a
 * mutex-protected FIFO per worker (successors released by other workers, overflow of a full
 * `in`); `out` overflows onto the lock-free `finished` stack.
 *
 * Idle workers spin briefly -- at most online CPUs - 1 of them at once, because the submitting
 * thread needs a core too -- and then sleep on their queue's condition variable. While tasks of
 * this process wait for another process's data (devices.c), the spin polls the transport
 * instead, for as long as the polls move something. No wake-up is
 * lost, by Dekker's pairing (every access below sequentially consistent):
 *   - a PUBLISHER (the submitter publishing a batch, a worker queueing a released successor)
 *     first makes the work visible (the ring's `tail`, the FIFO's `n`), then looks for whom to
 *     count on: a spinner (the spinner count), the owner (its `sleeping` flag), or some sleeper
 *     (every `sleeping` flag, wake_a_sleeper);
 *   - a SPINNER leaving the spin first leaves the count, then looks at every queue it may take
 *     from (its own, and every other one unless placement pins tasks); if it leaves for its own
 *     work it passes what it saw elsewhere on to a sleeper, whom the submitter did not wake
 *     because it counted on the spinner;
 *   - a worker going to SLEEP first announces it (its `sleeping` flag, under its queue's mutex,
 *     which fifo_push also takes), then looks again at every queue it may take from.
 * So a publisher that misses a worker's flag published its work before that worker looked, and
 * the worker takes it; while a spinner is about, publishing costs no system call. Where the
 * publisher finds a sleeper, the wake-up it chooses to send is no longer lost (wake() acts only
 * on a worker still asleep, so two publishers never spend theirs on one); which it sends is
 * policy, for cost: a sleeping owner is woken once its backlog reaches WSP_BATCH_ASLEEP, a
 * sleeper to steal from a busy owner once the backlog passes WSP_BATCH, and both whenever the
 * submitter is about to block or has submitted WSP_STALE more tasks since a task waits unshown
 * or for a sleeping owner; one spinner takes a small backlog one task at a time; and the
 * successors a worker queues wake a sleeper after a long kernel, nobody after a tiny one
 * (make_ready). The submitter itself sleeps on rt->cv in a window stall or in wsp_wait, woken
 * once by the worker whose published counters meet its condition; in wsp_await (WSP_WAIT_AWAIT)
 * it waits for a waiter node, woken by the worker that completes the waiter's last awaited
 * writer.
 *
 * Ready tasks a worker holds privately (its continuation, and a few successors of tiny kernels)
 * are invisible to thieves; everything else is stealable.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

#define SPIN_ROUNDS 300            /* ~6 us of pause instructions before sleeping */
#define AWAIT_SPIN_ROUNDS 300      /* the submitter's spin in wsp_await before it sleeps */
#define POLL_ROUNDS 4096           /* a spin's transport polls in a row that find nothing */
#define PREFETCH_AHEAD 4

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A cheap clock for telling long kernels from short ones (no need for calibrated units). */
#define LONG_KERNEL_TICKS 50000    /* ~20 us at 2.5 GHz */
static inline uint64_t ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return (uint64_t)wsp__now_ns();
#endif
}

static inline wsp_node *slot(wsp_ring *r, size_t i) {
    return atomic_load_explicit(&r->buf[i & (WSP_RING - 1)], memory_order_relaxed);
}

static inline void prefetch_node(const void *p) {
    __builtin_prefetch(p, 1, 3);
    __builtin_prefetch((const char *)p + WSP_CACHELINE, 1, 3);
}

/* ---- counters -------------------------------------------------------------------------------- */

int64_t wsp__sum_done(wsp_runtime *rt) {
    int64_t s = 0;
    for (int32_t i = 0; i < rt->nworkers; i++)
        s += atomic_load_explicit(&rt->workers[i]->done, memory_order_seq_cst);
    return s;
}

static int64_t sum_retired(wsp_runtime *rt) {
    int64_t s = 0;
    for (int32_t i = 0; i < rt->nworkers; i++)
        s += atomic_load_explicit(&rt->workers[i]->retired, memory_order_seq_cst);
    return s;
}

int64_t wsp__sum_ran(const wsp_runtime *rt) {
    int64_t s = 0;
    for (int32_t i = 0; i < rt->nworkers; i++)
        s += atomic_load_explicit(&rt->workers[i]->ran, memory_order_relaxed);
    return s;
}

/* ---- the locked FIFO and sleeping ------------------------------------------------------------ */

/* Wakes q's owner if it still sleeps; 1 if it did. Clearing `sleeping` here keeps later
 * publications from signalling again before the worker has even been scheduled. An owner no
 * longer asleep (woken by another thread, or it saw work in its second look) looks at every
 * queue before it sleeps again, so it sees what the caller published before this call; but it
 * may be busy with other work by then, so it is no use to a caller looking for a sleeper. */
static int wake(wsp_queue *q) {
    pthread_mutex_lock(&q->mu);
    int asleep = atomic_load_explicit(&q->sleeping, memory_order_relaxed);
    if (asleep) {
        q->token = 1;
        atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return asleep;
}

/* Queues n at q; 1 if that woke q's sleeping owner (which then takes it), else 0. */
static int fifo_push(wsp_queue *q, wsp_node *n) {
    int woke = 0;
    n->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = n;
    else q->head = n;
    q->tail = n;
    q->count++;
    /* seq_cst: a worker of another queue reads it without the lock, after announcing its sleep */
    atomic_store_explicit(&q->n, q->count, memory_order_seq_cst);
    if (atomic_load_explicit(&q->sleeping, memory_order_relaxed)) {
        q->token = 1;
        atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
        pthread_cond_signal(&q->cv);
        woke = 1;
    }
    pthread_mutex_unlock(&q->mu);
    return woke;
}

/* Wakes some sleeping worker other than `except` so that it steals; 0 if none sleeps. The caller
 * has just made work visible with a sequentially consistent store: a worker whose flag these
 * loads miss announced its sleep later, and then finds that work itself (next_task). A worker
 * another thread woke since its flag was read is skipped for the next: two publishers that see
 * the same sleeper wake two workers, not one twice. */
static int wake_a_sleeper(wsp_runtime *rt, int32_t except) {
    /* under pinned placement nobody steals: a woken worker would find nothing and sleep again */
    if (atomic_load_explicit(&rt->pinned, memory_order_relaxed)) return 0;
    wsp_queue *q = rt->queues, *end = rt->queues + rt->nworkers, *skip = rt->queues + except;
    for (; q != end; q++) {
        if (q != skip && atomic_load_explicit(&q->sleeping, memory_order_seq_cst)) {
            WSP_TEST_HOOK(rt, WSP_HOOK_WAKE, except);
            if (wake(q)) return 1;
        }
    }
    return 0;
}

/* ---- submitter side of the rings -------------------------------------------------------------- */

/* Makes queue i's staged tasks visible. check == 0: only that. Otherwise also make sure someone
 * will run them: an idle spinner will (it re-reads every ring after it stops spinning), else the
 * owner is woken if it sleeps, else, when the busy owner has a backlog (any backlog, with
 * check == 2: the submitter is about to block or has not looked for a while), a sleeping worker
 * is woken to steal. */
static void publish_in(wsp_runtime *rt, int32_t i, int check) {
    wsp_stage *s = &rt->stages[i];
    wsp_queue *q = &rt->queues[i];
    if (!check) {
        if (s->in_pub != s->in_tail)
            atomic_store_explicit(&q->in.tail, s->in_tail, memory_order_release);
        s->in_pub = s->in_tail;
        return;
    }
    size_t pending = s->in_tail - atomic_load_explicit(&q->in.head, memory_order_relaxed);
    if (pending == 0) return;
    /* a sequentially consistent store (even of an already published value) and loads: the
     * Dekker pairing with workers (C11 fences would do, but ThreadSanitizer cannot check them) */
    atomic_store_explicit(&q->in.tail, s->in_tail, memory_order_seq_cst);
    s->in_pub = s->in_tail;
    /* a spinning worker will steal the tasks, unless placement pins them to this queue's owner */
    if (atomic_load_explicit(&rt->spinners, memory_order_seq_cst) > 0 && pending < WSP_BATCH_ASLEEP &&
        !atomic_load_explicit(&rt->pinned, memory_order_relaxed))
        return;
    if (atomic_load_explicit(&q->sleeping, memory_order_seq_cst)) {
        /* a wake-up is a system call: let a sleeping owner's backlog grow, within the stale rule */
        if (check == 2 || pending >= WSP_BATCH_ASLEEP) wake(q);
        else if (rt->unpub_since < 0) rt->unpub_since = rt->nsub;
    } else if (pending > (check == 2 ? 0 : WSP_BATCH)) {
        wake_a_sleeper(rt, i);
    }
}

void wsp__flush_all(wsp_runtime *rt) {
    rt->unpub_since = -1;
    for (int32_t i = 0; i < rt->nworkers; i++) publish_in(rt, i, 2);
}

/* A split batch became ready (batch.c, split_close): it counts its parts as its group's members
 * before any of them can run; the caller then hands them on, each to its own worker, reading a
 * part's link before handing it on. */
static inline wsp_tasknode *fan_out(wsp_tasknode *t) {
    atomic_store_explicit(&t->h.pending, t->nparts, memory_order_relaxed);
    return t->parts;
}

void wsp__stage_ready(wsp_runtime *rt, wsp_tasknode *t) {
    if (__builtin_expect(atomic_load_explicit(&rt->graph_on, memory_order_relaxed), 0)) {
        wsp__graph_push(rt, t);  /* a run with task-graph knobs (graph.c): no batches there */
        return;
    }
    if (t->nparts) {
        for (wsp_tasknode *p = fan_out(t), *next; p; p = next) {
            next = p->parts;
            wsp__stage_ready(rt, p);
        }
        return;
    }
    int32_t i = t->queue;
    wsp_stage *s = &rt->stages[i];
    wsp_queue *q = &rt->queues[i];
    if (s->in_tail - s->in_head == WSP_RING) {
        s->in_head = atomic_load_explicit(&q->in.head, memory_order_acquire);
        if (s->in_tail - s->in_head == WSP_RING) {
            publish_in(rt, i, 1);
            fifo_push(q, &t->h);
            return;
        }
    }
    atomic_store_explicit(&q->in.buf[s->in_tail & (WSP_RING - 1)], &t->h, memory_order_relaxed);
    s->in_tail++;
    if (s->in_tail - s->in_pub >= WSP_BATCH) {
        publish_in(rt, i, 1);
        return;
    }
    /* a worker is idle: show it the task now (a plain store), checked later by the stale rule */
    if (atomic_load_explicit(&rt->spinners, memory_order_relaxed) > 0) publish_in(rt, i, 0);
    if (rt->unpub_since < 0) rt->unpub_since = rt->nsub;
}

/* Recycling just before reuse keeps the recycled nodes and records in cache, so the submitter
 * drains in small amounts (node_alloc asks for 64), rotating over the workers. */
int64_t wsp__drain(wsp_runtime *rt, int64_t max) {
    int64_t done = 0;
    for (int32_t j = 0; j < rt->nworkers && done < max; j++) {
        int32_t i = rt->drain_next + j;
        if (i >= rt->nworkers) i -= rt->nworkers;
        wsp_queue *q = &rt->queues[i];
        wsp_stage *s = &rt->stages[i];
        size_t tail = atomic_load_explicit(&q->out.tail, memory_order_acquire);
        size_t h = s->out_head;
        if (h == tail) continue;
        if ((int64_t)(tail - h) > max - done) tail = h + (size_t)(max - done);
        for (size_t k = h; k < tail && k < h + PREFETCH_AHEAD; k++)
            prefetch_node(slot(&q->out, k));
        for (; h < tail; h++) {
            if (h + PREFETCH_AHEAD < tail) prefetch_node(slot(&q->out, h + PREFETCH_AHEAD));
            wsp__recycle(rt, slot(&q->out, h));
            done++;
        }
        s->out_head = h;
        atomic_store_explicit(&q->out.head, h, memory_order_release);
    }
    if (++rt->drain_next >= rt->nworkers) rt->drain_next = 0;
    if (done < max) {
        wsp_node *n = atomic_exchange_explicit(&rt->finished, NULL, memory_order_acquire);
        while (n) {  /* rare: the stack takes what a full ring could not */
            wsp_node *next = n->next;
            wsp__recycle(rt, n);
            done++;
            n = next;
        }
    }
    return done;
}

/* ---- worker side ----------------------------------------------------------------------------- */

static inline void local_push(wsp_worker *w, wsp_tasknode *t) {
    t->h.next = NULL;
    if (w->ltail) w->ltail->h.next = &t->h;
    else w->lhead = t;
    w->ltail = t;
    w->lcount++;
}

static inline wsp_tasknode *local_pop(wsp_worker *w) {
    wsp_tasknode *t = w->lhead;
    if (t) {
        w->lhead = (wsp_tasknode *)t->h.next;
        if (!w->lhead) w->ltail = NULL;
        w->lcount--;
    }
    return t;
}

/* Moves up to WSP_BATCH tasks of queue q's locked FIFO (the worker's own, or a victim's) into
 * the private one, leaving the rest where other thieves can find them. */
static int take_fifo(wsp_worker *w, wsp_queue *q) {
    if (!atomic_load_explicit(&q->n, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&q->mu);
    wsp_node *first = q->head, *last = first;
    int64_t k = first ? 1 : 0;
    for (; k < WSP_BATCH && last && last->next; k++) last = last->next;
    if (first) {
        q->head = last->next;
        if (!q->head) q->tail = NULL;
        last->next = NULL;
        q->count -= (size_t)k;
        atomic_store_explicit(&q->n, q->count, memory_order_relaxed);
    }
    pthread_mutex_unlock(&q->mu);
    if (!first) return 0;
    if (w->ltail) w->ltail->h.next = first;
    else w->lhead = (wsp_tasknode *)first;
    w->ltail = (wsp_tasknode *)last;
    w->lcount += k;
    return 1;
}

/* Pops one published task of q's `in` ring (the worker's own, or a victim's). Several threads
 * may pop: a slot is read first and kept only if the CAS on `head` then succeeds (the submitter
 * reuses a slot only after `head` has passed it). *tail caches the ring's tail. */
static wsp_tasknode *ring_pop(wsp_queue *q, size_t *tail) {
    size_t h = atomic_load_explicit(&q->in.head, memory_order_relaxed);
    for (;;) {
        if (h >= *tail) {
            *tail = atomic_load_explicit(&q->in.tail, memory_order_seq_cst);
            if (h >= *tail) return NULL;
        }
        wsp_node *n = slot(&q->in, h);
        if (atomic_compare_exchange_weak_explicit(&q->in.head, &h, h + 1, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            if (h + 1 + PREFETCH_AHEAD < *tail) prefetch_node(slot(&q->in, h + 1 + PREFETCH_AHEAD));
            return (wsp_tasknode *)n;
        }
    }
}

/* Whether queue q holds published work (seq_cst loads: the Dekker pairing with publishers). */
static int queued(wsp_queue *q) {
    return atomic_load_explicit(&q->in.tail, memory_order_seq_cst) !=
               atomic_load_explicit(&q->in.head, memory_order_relaxed) ||
           atomic_load_explicit(&q->n, memory_order_seq_cst) != 0;
}

static int own_work(wsp_worker *w) { return queued(w->q); }

/* Whether another worker's queue holds published work this worker may steal. */
static int others_work(wsp_worker *w) {
    wsp_runtime *rt = w->rt;
    if (atomic_load_explicit(&rt->pinned, memory_order_relaxed)) return 0;
    for (int32_t i = 0; i < rt->nworkers; i++)
        if (i != w->index && queued(&rt->queues[i])) return 1;
    return 0;
}

/* An idle worker takes published work from the other workers' queues. */
static wsp_tasknode *steal(wsp_worker *w) {
    wsp_runtime *rt = w->rt;
    if (atomic_load_explicit(&rt->pinned, memory_order_relaxed)) return NULL;  /* placement: only work_steal moves tasks between workers */
    for (int32_t j = 1; j < rt->nworkers; j++) {
        int32_t v = w->index + j;
        if (v >= rt->nworkers) v -= rt->nworkers;
        size_t tail = 0;
        wsp_tasknode *t = ring_pop(&rt->queues[v], &tail);
        if (t) return t;
        if (take_fifo(w, &rt->queues[v])) return local_pop(w);
    }
    return NULL;
}

/* Hands the worker's finished nodes to the submitter and counts the tasks among them. */
static void publish_out(wsp_worker *w) {
    if (w->out_pub != w->out_tail) {
        atomic_store_explicit(&w->q->out.tail, w->out_tail, memory_order_release);
        w->out_pub = w->out_tail;
    }
    if (w->out_tasks) {
        w->retired_l += w->out_tasks;
        w->out_tasks = 0;
        atomic_store_explicit(&w->retired, w->retired_l, memory_order_seq_cst);
    }
}

static void retire(wsp_worker *w, wsp_node *n) {
    wsp_ring *r = &w->q->out;
    if (w->out_tail - w->out_head == WSP_RING) {
        w->out_head = atomic_load_explicit(&r->head, memory_order_acquire);
        if (w->out_tail - w->out_head == WSP_RING) {  /* the submitter is busy: use the stack */
            wsp_runtime *rt = w->rt;
            wsp_node *head = atomic_load_explicit(&rt->finished, memory_order_relaxed);
            do {
                n->next = head;
            } while (!atomic_compare_exchange_weak_explicit(&rt->finished, &head, n,
                                                            memory_order_release,
                                                            memory_order_relaxed));
            if (n->kind == WSP_NODE_TASK) w->out_tasks += ((wsp_tasknode *)n)->count;
            publish_out(w);
            return;
        }
    }
    atomic_store_explicit(&r->buf[w->out_tail++ & (WSP_RING - 1)], n, memory_order_relaxed);
    if (n->kind == WSP_NODE_TASK) w->out_tasks += ((wsp_tasknode *)n)->count;
    if (w->out_tail - w->out_pub >= WSP_BATCH) publish_out(w);
}

/* ---- completion ------------------------------------------------------------------------------ */

/* A worker that releases a successor while it has nothing else of its own to run continues
 * with it: a chain stays on one core. Other successors go where other workers can take them
 * (their dispatcher's queue), except after a tiny kernel, when waking a sleeping worker would
 * cost more than the task: then this worker keeps them, up to a batch. After a long kernel a
 * sleeper is woken to take them (the successors of a long kernel are likely long too). */
static void make_ready(wsp_runtime *rt, wsp_worker *w, wsp_tasknode *t) {
    if (!w || __builtin_expect(atomic_load_explicit(&rt->graph_on, memory_order_relaxed), 0)) {
        wsp__stage_ready(rt, t);
        return;
    }
    if (t->nparts) {
        for (wsp_tasknode *p = fan_out(t), *next; p; p = next) {
            next = p->parts;
            make_ready(rt, w, p);
        }
        return;
    }
    if (atomic_load_explicit(&rt->pinned, memory_order_relaxed) && t->queue != w->index) {  /* its dispatcher's worker runs it */
        fifo_push(&rt->queues[t->queue], &t->h);
        return;
    }
    if (!w->lhead) {
        local_push(w, t);
        return;
    }
    wsp_queue *home = &rt->queues[t->queue];
    int mine = t->queue == w->index;
    int asleep = atomic_load_explicit(&home->sleeping, memory_order_relaxed);
    if (w->last_ticks < LONG_KERNEL_TICKS) {
        if (!mine && !asleep) {
            fifo_push(home, &t->h);
            return;
        }
        if (w->lcount < WSP_BATCH) {
            local_push(w, t);
            return;
        }
    }
    /* the owner takes it if it slept (the push woke it); else it is busy, or it is this worker:
     * a sleeper takes it rather than wait for that */
    if (!fifo_push(home, &t->h)) wake_a_sleeper(rt, w->index);
}

static void maybe_wake_submitter(wsp_runtime *rt);

void wsp__ready_external(wsp_runtime *rt, wsp_tasknode *t) {
    if (atomic_load_explicit(&rt->graph_on, memory_order_relaxed)) {
        wsp__graph_push(rt, t);  /* locked: any thread may push */
        return;
    }
    /* the locked FIFO takes tasks from any thread; a busy owner leaves it to a sleeper */
    if (!fifo_push(&rt->queues[t->queue], &t->h)) wake_a_sleeper(rt, t->queue);
}

/* A waiter's last awaited writer finished (its pending count reached zero here). The waiter is
 * this thread's now: hand it back like a finished node, then publish its completion and wake the
 * submitter (seq_cst, pairing with wsp__submitter_wait: a submitter that announced WSP_WAIT_AWAIT
 * before this store is seen by the load of sub_waiting in maybe_wake_submitter; one that
 * announces it later finds await_done set). The release chain of the writers' decrements of the
 * waiter's count (acq_rel read-modify-writes) and this store make every awaited kernel's stores
 * visible to the submitter that reads await_done. */
static void waiter_done(wsp_runtime *rt, wsp_worker *w, wsp_tasknode *s) {
    long long id = (long long)s->seq;
    if (w) retire(w, &s->h);
    else wsp__recycle(rt, &s->h);
    atomic_store_explicit(&rt->await_done, id, memory_order_seq_cst);
    if (w) maybe_wake_submitter(rt);
}

void wsp__complete(wsp_runtime *rt, wsp_worker *w, wsp_node *n) {
    wsp_node *first = n;
    for (;;) {
        wsp_edge *e = atomic_exchange_explicit(&n->succ, WSP_CLOSED, memory_order_acq_rel);
        while (e) {
            /* read the edge before the decrement: the successor (which owns it) may then run */
            wsp_edge *next = e->next;
            wsp_tasknode *s = e->succ;
            if (atomic_fetch_sub_explicit(&s->h.pending, 1, memory_order_acq_rel) == 1) {
                if (__builtin_expect(s->h.kind == WSP_NODE_WAITER, 0)) waiter_done(rt, w, s);
                else make_ready(rt, w, s);
            }
            e = next;
        }
        wsp_group *parent = n->group;
        if (n != first) {
            if (w) retire(w, n);
            else wsp__recycle(rt, n);
        }
        if (!parent || atomic_fetch_sub_explicit(&parent->h.pending, 1, memory_order_acq_rel) != 1)
            break;
        n = &parent->h;
    }
    /* last: once the task counts as handed back, the groups it completed are handed back too */
    if (w) retire(w, first);
    else wsp__recycle(rt, first);
}

/* ---- the submitter's sleep ------------------------------------------------------------------- */

static int wait_over(wsp_runtime *rt, int mode) {
    if (mode == WSP_WAIT_AWAIT)
        return atomic_load_explicit(&rt->err, memory_order_seq_cst) != 0 ||
               atomic_load_explicit(&rt->await_done, memory_order_seq_cst) ==
                   atomic_load_explicit(&rt->wait_target, memory_order_seq_cst);
    if (mode == WSP_WAIT_STALL)
        return atomic_load_explicit(&rt->err, memory_order_seq_cst) != 0 ||
               atomic_load_explicit(&rt->submitted, memory_order_seq_cst) - wsp__sum_done(rt) <=
                   atomic_load_explicit(&rt->wait_target, memory_order_seq_cst);
    return sum_retired(rt) == atomic_load_explicit(&rt->submitted, memory_order_seq_cst);
}

/* The submitter announces what it waits for, then checks; a worker that publishes counters
 * (seq_cst) and then finds the condition met claims the wake-up (so one completion signals, not
 * every one) and signals under the mutex, which the submitter holds until it sleeps. */
void wsp__submitter_wait(wsp_runtime *rt, int mode, int64_t target) {
    /* a start policy holds the workers back, but never past a wait for them: it would not end */
    if (__builtin_expect(atomic_load_explicit(&rt->graph_on, memory_order_relaxed), 0))
        wsp__graph_start(rt);
    if (mode == WSP_WAIT_AWAIT) {
        /* an awaited writer is often a short kernel (a router): spin briefly before paying a
         * sleep and a wake-up (no announcement yet, so no worker tries to wake us) */
        for (int i = 0; i < AWAIT_SPIN_ROUNDS; i++) {
            if (atomic_load_explicit(&rt->await_done, memory_order_acquire) == target ||
                atomic_load_explicit(&rt->err, memory_order_acquire) != 0)
                return;
            cpu_relax();
        }
    }
    pthread_mutex_lock(&rt->mu);
    atomic_store_explicit(&rt->wait_target, target, memory_order_seq_cst);
    for (;;) {
        atomic_store_explicit(&rt->sub_waiting, mode, memory_order_seq_cst);
        if (wait_over(rt, mode)) break;
        pthread_cond_wait(&rt->cv, &rt->mu);
    }
    atomic_store_explicit(&rt->sub_waiting, WSP_WAIT_NONE, memory_order_seq_cst);
    pthread_mutex_unlock(&rt->mu);
}

static void maybe_wake_submitter(wsp_runtime *rt) {
    int mode = atomic_load_explicit(&rt->sub_waiting, memory_order_seq_cst);
    if (mode == WSP_WAIT_NONE || !wait_over(rt, mode)) return;
    if (!atomic_compare_exchange_strong_explicit(&rt->sub_waiting, &mode, WSP_WAIT_NONE,
                                                 memory_order_seq_cst, memory_order_seq_cst))
        return;
    pthread_mutex_lock(&rt->mu);
    pthread_cond_signal(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
}

/* ---- workers --------------------------------------------------------------------------------- */

/* The trace event of task `i` of the run, or NULL when it is not traced. */
static inline wsp_trace_event *traced(wsp_runtime *rt, int64_t i) {
    if (!rt->tracing || i >= (int64_t)WSP_TRACE_CHUNK * WSP_TRACE_MAXCHUNKS) return NULL;
    return wsp__trace_at(rt, i);
}

/* The tasks of a batch, in submission order; the first failure ends it. */
static void run_batch(wsp_runtime *rt, wsp_worker *w, wsp_tasknode *t) {
    const char *p = (const char *)t + t->subs;
    for (int32_t k = 0; k < t->count; k++) {
        if (atomic_load_explicit(&rt->err, memory_order_relaxed) != 0) return;
        const wsp_sub *s = (const wsp_sub *)p;
        const wsp_tile *tiles = (const wsp_tile *)(s + 1);
        const wsp_scalar *scalars = (const wsp_scalar *)(tiles + s->ntiles);
        wsp_trace_event *e = traced(rt, s->index);
        if (e) e->start_ns = wsp__now_ns() - rt->t_begin_ns;
        int rc = s->fn(tiles, scalars);
        if (e) {
            e->end_ns = wsp__now_ns() - rt->t_begin_ns;
            e->worker = w->index;
        }
        atomic_store_explicit(&w->ran, ++w->ran_l, memory_order_relaxed);
        if (rc != 0) {
            wsp__kernel_failed(rt, s->kernel, s->stmt, (const int64_t *)(scalars + s->nscalars),
                               s->ncoords, rc);
            return;
        }
        p += s->size;
    }
}

static void run_task(wsp_runtime *rt, wsp_worker *w, wsp_tasknode *t) {
    if (t->resume) {
        /* devices.c: a send in place that the transport has finished with: nothing to run */
    } else if (!rt->skip_kernels && atomic_load_explicit(&rt->err, memory_order_relaxed) == 0) {
        wsp__kernel_msg_clear();
        uint64_t t0 = ticks();
        if (t->subs) {
            run_batch(rt, w, t);
        } else {
            wsp_trace_event *e = traced(rt, t->lseq);
            if (e) e->start_ns = wsp__now_ns() - rt->t_begin_ns;
            int rc = t->fn(wsp__tiles(t), wsp__scalars(t));
            if (e) {
                e->end_ns = wsp__now_ns() - rt->t_begin_ns;
                e->worker = w->index;
            }
            atomic_store_explicit(&w->ran, ++w->ran_l, memory_order_relaxed);
            if (rc == WSP__DEFERRED) {
                /* the kernel set the count to two, one for the transport (which may be done
                 * already) and this one: whoever brings it to zero makes the node ready */
                w->last_ticks = ticks() - t0;
                if (atomic_fetch_sub_explicit(&t->h.pending, 1, memory_order_acq_rel) != 1)
                    return;
            } else if (rc != 0) {
                wsp__kernel_failed(rt, t->kernel, t->stmt, wsp__coords(t), t->ncoords, rc);
            }
        }
        w->last_ticks = ticks() - t0;
    }
    int32_t count = t->count;  /* t is the submitter's once complete hands it back */
    wsp__complete(rt, w, &t->h);
    w->done_l += count;
    atomic_store_explicit(&w->done, w->done_l, memory_order_seq_cst);
    if (atomic_load_explicit(&rt->sub_waiting, memory_order_seq_cst) != WSP_WAIT_NONE) {
        publish_out(w);
        maybe_wake_submitter(rt);
    }
}

static wsp_tasknode *next_task(wsp_worker *w) {
    wsp_runtime *rt = w->rt;
    wsp_queue *q = w->q;
    for (;;) {
        if (__builtin_expect(atomic_load_explicit(&rt->graph_on, memory_order_acquire), 0)) {
            /* a run with task-graph knobs: graph.c's queues; back here once the run is over */
            int stop;
            wsp_tasknode *t = wsp__graph_take(w, 0, &stop);
            if (t) return t;
            publish_out(w);  /* idle: hand everything back, the submitter may wait for it */
            maybe_wake_submitter(rt);
            if ((t = wsp__graph_take(w, 1, &stop))) return t;
            if (stop) return NULL;
            continue;
        }
        wsp_tasknode *t = local_pop(w);
        if (t || (t = ring_pop(q, &w->in_tail))) return t;
        if (take_fifo(w, q)) continue;
        /* idle: hand everything back first, the submitter may be waiting for it */
        publish_out(w);
        maybe_wake_submitter(rt);
        if ((t = steal(w))) return t;
        /* spin a little before sleeping, but never more spinners than spare cores: the
         * submitter is a thread too, and a spinning worker on its core slows every submit */
        int found = 0;
        if (atomic_fetch_add_explicit(&rt->spinners, 1, memory_order_relaxed) < rt->max_spinners) {
            WSP_TEST_HOOK(rt, WSP_HOOK_SPIN, w->index);
            /* tasks of this process wait for messages (devices.c): the spin makes the
             * transport's progress, so that a message's copy and the task it releases run on
             * this thread, with no hand-off between a progress thread and a worker; it goes on
             * while the polls find something */
            int poll = 0;
            if (atomic_load_explicit(&rt->xwaiting, memory_order_relaxed) > 0 && rt->xport.poll) {
                /* counted first, then checked again: wsp_wait, which waits for the count, ends
                 * a run only once every transfer has arrived */
                atomic_fetch_add_explicit(&rt->xpolling, 1, memory_order_seq_cst);
                poll = atomic_load_explicit(&rt->xwaiting, memory_order_seq_cst) > 0;
                if (!poll) atomic_fetch_sub_explicit(&rt->xpolling, 1, memory_order_seq_cst);
            }
            int rounds = poll ? POLL_ROUNDS : SPIN_ROUNDS;
            for (int i = 1; i <= rounds && !found && !t; i++) {
                if (poll) {
                    int r = atomic_load_explicit(&rt->xwaiting, memory_order_seq_cst) > 0
                                ? rt->xport.poll(rt->xport.ctx) : -1;
                    if (r > 0) i = 0;
                    /* a poll that moved nothing: let the threads that share this core (the
                     * submitter, the other ranks' threads) have it now and then; a poll is a
                     * system call's cost, a timeslice a millisecond */
                    if (r == 0 && (i & 7) == 0) sched_yield();
                    if (r < 0) {  /* nothing is awaited any more, or the run failed */
                        poll = 0;
                        rounds = i + SPIN_ROUNDS;
                        atomic_fetch_sub_explicit(&rt->xpolling, 1, memory_order_seq_cst);
                    }
                } else {
                    cpu_relax();
                }
                found = own_work(w);
                if (!found && (i & 15) == 0) t = steal(w);
            }
            if (poll) atomic_fetch_sub_explicit(&rt->xpolling, 1, memory_order_seq_cst);
        }
        /* seq_cst, pairing with publish_in: the submitter saw this spinner, or the scan below
         * sees what it published */
        atomic_fetch_sub_explicit(&rt->spinners, 1, memory_order_seq_cst);
        if (t || (!found && (t = steal(w)))) return t;
        if (found) {
            /* off to its own work: what the submitter left to a spinner in other queues goes
             * to a sleeper instead of waiting for this worker or a busy owner */
            if (others_work(w)) wake_a_sleeper(rt, w->index);
            continue;
        }
        WSP_TEST_HOOK(rt, WSP_HOOK_SLEEP, w->index);
        /* announce the sleep, then look again at every queue this worker may take from: work
         * published before a publisher's look for sleepers (which missed this flag) is seen
         * here (seq_cst on both sides: Dekker's pairing) */
        pthread_mutex_lock(&q->mu);
        atomic_store_explicit(&q->sleeping, 1, memory_order_seq_cst);
        if (!own_work(w) && !others_work(w) &&
            !atomic_load_explicit(&rt->graph_on, memory_order_seq_cst)) {
            while (!q->token && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        }
        q->token = 0;
        atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
        int stop = q->stop && !own_work(w);
        pthread_mutex_unlock(&q->mu);
        if (stop) return NULL;
    }
}

static void *worker_main(void *arg) {
    wsp_worker *w = arg;
    wsp_tasknode *t;
    while ((t = next_task(w))) run_task(w->rt, w, t);
    publish_out(w);
    return NULL;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static void *cache_aligned(size_t bytes) {
    bytes = (bytes + WSP_CACHELINE - 1) / WSP_CACHELINE * WSP_CACHELINE;
    void *p = aligned_alloc(WSP_CACHELINE, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* Memory for queues and workers (at wsp_runtime_new); threads start at the first wsp_begin. */
int wsp__workers_init(wsp_runtime *rt) {
    int32_t n = rt->nworkers;
    rt->stages = calloc((size_t)n, sizeof *rt->stages);
    rt->workers = calloc((size_t)n, sizeof *rt->workers);
    rt->queues = cache_aligned(sizeof(wsp_queue) * (size_t)n);
    if (!rt->stages || !rt->workers || !rt->queues) return WSP_ERR_INTERNAL;
    for (int32_t i = 0; i < n; i++) {
        wsp_queue *q = &rt->queues[i];
        q->in.buf = calloc(WSP_RING, sizeof *q->in.buf);
        q->out.buf = calloc(WSP_RING, sizeof *q->out.buf);
        wsp_worker *w = rt->workers[i] = cache_aligned(sizeof(wsp_worker));
        if (!q->in.buf || !q->out.buf || !w) return WSP_ERR_INTERNAL;
        if (pthread_mutex_init(&q->mu, NULL) != 0) return WSP_ERR_INTERNAL;
        if (pthread_cond_init(&q->cv, NULL) != 0) {
            pthread_mutex_destroy(&q->mu);
            return WSP_ERR_INTERNAL;
        }
        q->inited = 1;
        atomic_init(&q->n, 0);
        atomic_init(&q->sleeping, 0);
        atomic_init(&q->in.head, 0);
        atomic_init(&q->in.tail, 0);
        atomic_init(&q->out.head, 0);
        atomic_init(&q->out.tail, 0);
        w->rt = rt;
        w->q = q;
        w->index = i;
        atomic_init(&w->done, 0);
        atomic_init(&w->retired, 0);
        atomic_init(&w->ran, 0);
    }
    return WSP_OK;
}

/* Worker threads run this library's code: if the host unloads it while a runtime was never freed
 * (cffi closing it at interpreter exit), they would crash. Once threads exist, pin it. */
static void pin_library(void) {
    Dl_info info;
    if (dladdr((void *)&wsp__workers_start, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

int wsp__workers_start(wsp_runtime *rt) {
    pin_library();
    for (int32_t i = 0; i < rt->nworkers; i++) {
        pthread_mutex_lock(&rt->queues[i].mu);
        rt->queues[i].stop = 0;
        pthread_mutex_unlock(&rt->queues[i].mu);
    }
    for (int32_t i = 0; i < rt->nworkers; i++) {
        if (pthread_create(&rt->workers[i]->thread, NULL, worker_main, rt->workers[i]) != 0) {
            rt->threads_started = i;
            wsp__workers_stop(rt);
            return wsp__failf(rt, WSP_ERR_INTERNAL, "cannot start worker thread %d of %d", i,
                              rt->nworkers);
        }
    }
    rt->threads_started = rt->nworkers;
    return WSP_OK;
}

/* Stops and joins the started workers (they are idle: no run is in progress). */
void wsp__workers_stop(wsp_runtime *rt) {
    wsp__graph_stop(rt);
    for (int32_t i = 0; i < rt->threads_started; i++) {
        wsp_queue *q = &rt->queues[i];
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    for (int32_t i = 0; i < rt->threads_started; i++) pthread_join(rt->workers[i]->thread, NULL);
    rt->threads_started = 0;
}

void wsp__workers_destroy(wsp_runtime *rt) {
    for (int32_t i = 0; rt->queues && i < rt->nworkers; i++) {
        wsp_queue *q = &rt->queues[i];
        if (q->inited) {
            pthread_cond_destroy(&q->cv);
            pthread_mutex_destroy(&q->mu);
        }
        free(q->in.buf);
        free(q->out.buf);
    }
    for (int32_t i = 0; rt->workers && i < rt->nworkers; i++) free(rt->workers[i]);
    free(rt->queues);
    free(rt->workers);
    free(rt->stages);
    rt->queues = NULL;
    rt->workers = NULL;
    rt->stages = NULL;
}
