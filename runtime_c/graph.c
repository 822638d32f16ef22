/* graph.c: the task graph's knobs on the host (wsp_graph): when the workers start, which ready
 * task runs next, and which workers run which tasks (docs/schedules.md, "The task graph").
 *
 * A run that sets none of them never comes here: dispatch.c's lock-free rings carry its ready
 * tasks, and the only cost is a relaxed load of rt->graph_on where a task becomes ready and
 * where a worker looks for one. A run that sets any of them hands every ready task to this
 * file instead: one binary heap per pool, all under one mutex, ordered by (key, submission),
 * the key being the task's priority (WSP_READY_PRIORITY) or the order in which it became ready.
 * A lock per task is what the knobs cost; they are for studying schedules, not for speed.
 *
 * Workers. Pool p is served by the workers w with w % npools == p when there are at least as
 * many workers as pools, else by worker p % W; a worker takes the smallest key among the tops of
 * the pools it serves. Before the start moment nobody takes anything. Workers wait on this
 * file's condition variable; wsp_graph wakes those asleep in dispatch.c so they come here, and
 * wsp__graph_end (the run is over: every task retired) sends them back.
 */
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

typedef struct wsp_gheap {
    wsp_tasknode **a;
    int64_t n, cap;
} wsp_gheap;

struct wsp_graph {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t ready, start, npools, cappools;
    int32_t by_queue;          /* npools == workers, a task's pool is its worker queue */
    int32_t active, started, stop;   /* under mu */
    int64_t threshold;
    uint64_t order;            /* the ready order: the key of a non-priority run */
    int64_t started_ns, enumerated_ns;
    wsp_gheap *pools;
    wsp_tasknode *spill;       /* tasks a heap had no memory for (the run has failed) */
};

static inline int less(const wsp_tasknode *a, const wsp_tasknode *b) {
    return a->gkey < b->gkey || (a->gkey == b->gkey && a->seq < b->seq);
}

static int heap_push(wsp_gheap *h, wsp_tasknode *t) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 256;
        wsp_tasknode **a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return WSP_ERR_INTERNAL;
        h->a = a;
        h->cap = cap;
    }
    int64_t i = h->n++;
    while (i > 0 && less(t, h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = t;
    return WSP_OK;
}

static wsp_tasknode *heap_pop(wsp_gheap *h) {
    wsp_tasknode *top = h->a[0], *last = h->a[--h->n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && less(h->a[c + 1], h->a[c])) c++;
        if (!less(h->a[c], last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

int wsp_graph(wsp_runtime *rt, int32_t ready, int32_t start, int64_t threshold, int32_t npools) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running || rt->nsub != rt->run_sub0 || rt->batch)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_graph must come after wsp_begin, before any task");
    if (ready < WSP_READY_STEAL || ready > WSP_READY_PRIORITY || start < WSP_START_THRESHOLD ||
        start > WSP_START_AFTER || npools < 1 || threshold < 1)
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_graph: ready %d, start %d, threshold %lld, "
                          "%d pools", ready, start, (long long)threshold, npools);
    if (ready == WSP_READY_STEAL && start == WSP_START_THRESHOLD && threshold == 1 && npools == 1)
        return WSP_OK;  /* the defaults: the rings */
    wsp_graph_t *g = rt->graph;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task graph)");
        if (pthread_mutex_init(&g->mu, NULL) != 0) {
            free(g);
            return wsp_fail(rt, WSP_ERR_INTERNAL, "cannot create a mutex (task graph)");
        }
        if (pthread_cond_init(&g->cv, NULL) != 0) {
            pthread_mutex_destroy(&g->mu);
            free(g);
            return wsp_fail(rt, WSP_ERR_INTERNAL, "cannot create a condition (task graph)");
        }
        rt->graph = g;
    }
    int32_t by_queue = npools == 1 && atomic_load_explicit(&rt->pinned, memory_order_relaxed);
    if (by_queue) npools = rt->nworkers;
    if (npools > g->cappools) {
        wsp_gheap *p = realloc(g->pools, (size_t)npools * sizeof *p);
        if (!p) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task graph)");
        memset(p + g->cappools, 0, (size_t)(npools - g->cappools) * sizeof *p);
        g->pools = p;
        g->cappools = npools;
    }
    pthread_mutex_lock(&g->mu);
    for (int32_t i = 0; i < npools; i++) g->pools[i].n = 0;
    g->ready = ready;
    g->start = start;
    g->threshold = start == WSP_START_THRESHOLD ? threshold : INT64_MAX;
    g->npools = npools;
    g->by_queue = by_queue;
    g->order = 0;
    g->started = 0;
    g->stop = 0;
    g->spill = NULL;
    g->started_ns = g->enumerated_ns = -1;
    g->active = 1;
    pthread_mutex_unlock(&g->mu);
    rt->grain = 1;  /* no batches in such a run (wsp_batch checks graph_on from now on) */
    rt->batch_left = 0;
    /* seq_cst, then each queue's mutex: a worker about to sleep in dispatch.c either sees the
     * flag (it checks it under that mutex) or is asleep already and gets the token */
    atomic_store_explicit(&rt->graph_on, 1, memory_order_seq_cst);
    for (int32_t i = 0; i < rt->nworkers; i++) {
        wsp_queue *q = &rt->queues[i];
        pthread_mutex_lock(&q->mu);
        q->token = 1;
        pthread_cond_signal(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    return WSP_OK;
}

int64_t wsp_graph_time(const wsp_runtime *rt, int32_t what) {
    if (!rt || !rt->graph) return -1;
    return what == 0 ? rt->graph->started_ns : rt->graph->enumerated_ns;
}

/* wsp_submit: the task's pool and key, checked */
int wsp__graph_task(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task) {
    wsp_graph_t *g = rt->graph;
    t->gkey = g->ready == WSP_READY_PRIORITY ? task->priority : 0;
    if (g->by_queue || g->npools == 1) {
        t->pool = 0;
        return WSP_OK;
    }
    t->pool = 0;
    if (task->pool < 0 || task->pool >= g->npools)
        return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d) names pool %d of %d",
                          task->kernel, task->stmt, task->pool, g->npools);
    t->pool = task->pool;
    return WSP_OK;
}

void wsp__graph_start(wsp_runtime *rt) {
    wsp_graph_t *g = rt->graph;
    pthread_mutex_lock(&g->mu);
    if (!g->started) {
        g->started = 1;
        g->started_ns = wsp__now_ns() - rt->t_begin_ns;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
}

/* after a submit: the threshold start (the submitter alone writes `started` from 0 to 1) */
void wsp__graph_submitted(wsp_runtime *rt) {
    wsp_graph_t *g = rt->graph;
    if (!g->started && rt->nsub - rt->run_sub0 >= g->threshold) wsp__graph_start(rt);
}

void wsp__graph_enumerated(wsp_runtime *rt) {
    rt->graph->enumerated_ns = wsp__now_ns() - rt->t_begin_ns;
}

void wsp__graph_push(wsp_runtime *rt, wsp_tasknode *t) {
    wsp_graph_t *g = rt->graph;
    pthread_mutex_lock(&g->mu);
    if (g->ready != WSP_READY_PRIORITY) t->gkey = (int64_t)g->order++;
    int32_t p = g->by_queue ? t->queue : t->pool;
    if (heap_push(&g->pools[p], t) != WSP_OK) {
        /* no memory: the run fails, and the task still has to go through (it will not run) */
        wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task graph queue)");
        t->h.next = &g->spill->h;
        g->spill = t;
    }
    if (g->started) pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline int serves(const wsp_graph_t *g, int32_t W, int32_t w, int32_t p) {
    return g->npools <= W ? w % g->npools == p : p % W == w;
}

wsp_tasknode *wsp__graph_take(wsp_worker *w, int block, int *stop) {
    wsp_runtime *rt = w->rt;
    wsp_graph_t *g = rt->graph;
    int32_t W = rt->nworkers;
    wsp_tasknode *t = NULL;
    *stop = 0;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (g->stop) {
            *stop = 1;
            break;
        }
        if (!g->active) break;
        if (g->spill) {
            t = g->spill;
            g->spill = (wsp_tasknode *)t->h.next;
            break;
        }
        if (g->started) {
            wsp_gheap *best = NULL;
            for (int32_t p = 0; p < g->npools; p++) {
                wsp_gheap *h = &g->pools[p];
                if (h->n && serves(g, W, w->index, p) && (!best || less(h->a[0], best->a[0])))
                    best = h;
            }
            if (best) {
                t = heap_pop(best);
                break;
            }
        }
        if (!block) break;
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return t;
}

void wsp__graph_end(wsp_runtime *rt) {
    wsp_graph_t *g = rt->graph;
    atomic_store_explicit(&rt->graph_on, 0, memory_order_seq_cst);
    pthread_mutex_lock(&g->mu);
    g->active = 0;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void wsp__graph_stop(wsp_runtime *rt) {
    wsp_graph_t *g = rt->graph;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void wsp__graph_reset(wsp_runtime *rt) {
    rt->graph->started_ns = rt->graph->enumerated_ns = -1;
}

void wsp__graph_free(wsp_runtime *rt) {
    wsp_graph_t *g = rt->graph;
    if (!g) return;
    for (int32_t i = 0; i < g->cappools; i++) free(g->pools[i].a);
    free(g->pools);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
    rt->graph = NULL;
}
