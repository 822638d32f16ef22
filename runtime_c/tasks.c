/* tasks.c: the runtime's life cycle and the task's: new/free, begin, submit (validate, window,
 * copy into a pooled node, order scopes, dependency inference in deps.c, hand-off to
 * dispatch.c), wait, schedules and statistics. The rest of the submitter's side has files of
 * its own: errors.c (errors and the clock), order.c (order scopes and contexts), batch.c
 * (batches), await.c (wsp_await, wsp_probe), trace.c (the trace, notes, the model's log entry).
 *
 * Nodes (tasks and order groups) come from per-size-class free lists (a cache line per class
 * step) owned by the submitter; workers hand finished nodes back (dispatch.c) and the submitter
 * recycles a few dozen at a time when a free list runs dry ("drain"), which is also when deps.c
 * forgets them: recycled memory is reused while it is still in cache, and steady state
 * allocates nothing.
 *
 * In-flight accounting without a shared counter: the submitter counts submissions, each worker
 * publishes how many tasks it completed on its own cache line, and the submitter sums those only
 * when its cached estimate (an upper bound) reaches the window or a new maximum. The window is
 * therefore exact; max_in_flight may overstate the true maximum by the tasks that finished
 * during the last 16 submissions, and never exceeds the window.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include "wsp_internal.h"

#define NODE_CHUNK_BYTES (64 * 1024)
#define MAX_REFRESH_EVERY 16

/* ---- node pools (submitter only) -------------------------------------------------------------- */

/* Size classes step by a cache line, so a task takes only the lines it needs. */
static inline int size_class(size_t bytes) { return bytes <= 64 ? 0 : (int)((bytes - 1) >> 6); }

static int refill(wsp_runtime *rt, int k) {
    size_t size = (size_t)64 * (size_t)(k + 1);
    size_t bytes = NODE_CHUNK_BYTES > 16 * size ? NODE_CHUNK_BYTES : 16 * size;
    char *chunk = aligned_alloc(WSP_CACHELINE, bytes);
    if (!chunk) return -1;
    *(void **)chunk = rt->node_chunks;  /* the first slot links the chunk list */
    rt->node_chunks = chunk;
    for (size_t off = size > WSP_CACHELINE ? size : WSP_CACHELINE; off + size <= bytes; off += size) {
        wsp_node *n = (wsp_node *)(chunk + off);
        n->sclass = (uint8_t)k;
        n->next = rt->free_nodes[k];
        rt->free_nodes[k] = n;
    }
    return 0;
}

void wsp__node_free(wsp_runtime *rt, wsp_node *n) {
    n->next = rt->free_nodes[n->sclass];
    rt->free_nodes[n->sclass] = n;
}

void wsp__recycle(wsp_runtime *rt, wsp_node *n) {
    if (n->kind != WSP_NODE_GROUP) {  /* a task, or a waiter (wsp_await: no regs, no stream) */
        wsp_tasknode *t = (wsp_tasknode *)n;
        wsp__deps_retire(&rt->deps, t);
        if (t->owned) wsp__device_release(rt, t);
        if (t->stream >= 0 && t->stream < rt->nstreams && rt->stream_last[t->stream] == t)
            rt->stream_last[t->stream] = NULL;
        while (t->chunks) {
            wsp_edgechunk *c = t->chunks;
            t->chunks = c->next;
            c->next = rt->free_chunks;
            rt->free_chunks = c;
        }
        wsp__node_free(rt, n);
    } else {
        wsp_group *g = (wsp_group *)n;
        g->drained = 1;
        if (g->scope_refs == 0) wsp__node_free(rt, n);
    }
}

wsp_node *wsp__node_alloc(wsp_runtime *rt, size_t bytes) {
    int k = size_class(bytes);
    if (k >= WSP_NCLASSES) return NULL;
    if (!rt->free_nodes[k]) {
        while (!rt->free_nodes[k] && wsp__drain(rt, 64) > 0) {
        }
        wsp__deps_compact(&rt->deps);
        if (!rt->free_nodes[k] && refill(rt, k) != 0) return NULL;
    }
    wsp_node *n = rt->free_nodes[k];
    rt->free_nodes[k] = n->next;
    n->next = NULL;
    n->group = NULL;
    n->mark = 0;
    atomic_store_explicit(&n->succ, NULL, memory_order_relaxed);
    return n;
}

void wsp__group_unref(wsp_runtime *rt, wsp_group *g) {
    if (--g->scope_refs == 0 && g->drained) wsp__node_free(rt, &g->h);
}

/* ---- edges ----------------------------------------------------------------------------------- */

static wsp_edge *edge_slot(wsp_runtime *rt, wsp_tasknode *t) {
    int32_t i = t->nedges;
    if (i < WSP_INLINE_EDGES) return &t->edges[i];
    int32_t j = (i - WSP_INLINE_EDGES) % WSP_CHUNK_EDGES;
    if (j == 0) {
        wsp_edgechunk *c = rt->free_chunks;
        if (c) rt->free_chunks = c->next;
        else c = malloc(sizeof *c);
        if (!c) return NULL;
        c->next = t->chunks;
        t->chunks = c;
    }
    return &t->chunks->e[j];
}

/* t waits for pred unless pred has finished or t already waits for it. */
void wsp__add_edge(wsp_runtime *rt, wsp_node *pred, wsp_tasknode *t) {
    if (pred == &t->h || pred->mark == t->seq + 1) return;
    wsp_edge *head = atomic_load_explicit(&pred->succ, memory_order_acquire);
    if (head == WSP_CLOSED) return;
    pred->mark = t->seq + 1;
    /* a slot of a new chunk that ends up unused stays with t and is reused by its next edge */
    wsp_edge *e = edge_slot(rt, t);
    if (!e) {
        wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (dependency edges)");
        return;
    }
    e->succ = t;
    do {
        if (head == WSP_CLOSED) return;
        e->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&pred->succ, &head, e, memory_order_release,
                                                    memory_order_acquire));
    t->nedges++;
    rt->ndeps++;
    if (rt->tracing) wsp__trace_edge(rt, pred, t);
}

/* ---- life cycle ------------------------------------------------------------------------------ */

static int32_t online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)(n > 1024 ? 1024 : n) : 1;
}

wsp_runtime *wsp_runtime_new(int32_t workers, int32_t ntensors) {
    if (ntensors < 0) return NULL;
    size_t size = (sizeof(wsp_runtime) + WSP_CACHELINE - 1) / WSP_CACHELINE * WSP_CACHELINE;
    wsp_runtime *rt = aligned_alloc(WSP_CACHELINE, size);
    if (!rt) return NULL;
    memset(rt, 0, sizeof *rt);
    rt->nworkers = workers > 0 ? workers : online_cpus();
    rt->xpart = calloc((size_t)rt->nworkers, sizeof *rt->xpart);
    rt->xbytes = calloc((size_t)rt->nworkers, sizeof *rt->xbytes);
    if (!rt->xpart || !rt->xbytes) {
        free(rt->xpart);
        free(rt->xbytes);
        free(rt);
        return NULL;
    }
    rt->max_spinners = online_cpus() - 1;
    atomic_init(&rt->spinners, 0);
    atomic_init(&rt->pinned, 0);
    atomic_init(&rt->graph_on, 0);
    atomic_init(&rt->xwaiting, 0);
    atomic_init(&rt->xpolling, 0);
    rt->unpub_since = -1;
    rt->free_ctx = -1;
    rt->ntensors = ntensors;
    atomic_init(&rt->err, 0);
    atomic_init(&rt->sub_waiting, 0);
    atomic_init(&rt->wait_target, 0);
    atomic_init(&rt->await_done, -1);
    atomic_init(&rt->submitted, 0);
    atomic_init(&rt->finished, NULL);
    if (pthread_mutex_init(&rt->err_mu, NULL) != 0) {
        free(rt->xpart);
        free(rt->xbytes);
        free(rt);
        return NULL;
    }
    if (pthread_mutex_init(&rt->mu, NULL) != 0) {
        pthread_mutex_destroy(&rt->err_mu);
        free(rt->xpart);
        free(rt->xbytes);
        free(rt);
        return NULL;
    }
    if (pthread_cond_init(&rt->cv, NULL) != 0) {
        pthread_mutex_destroy(&rt->mu);
        pthread_mutex_destroy(&rt->err_mu);
        free(rt->xpart);
        free(rt->xbytes);
        free(rt);
        return NULL;
    }
    if (wsp__deps_init(&rt->deps, ntensors) != WSP_OK || wsp__workers_init(rt) != WSP_OK) {
        wsp__workers_destroy(rt);
        wsp__deps_destroy(&rt->deps);
        pthread_cond_destroy(&rt->cv);
        pthread_mutex_destroy(&rt->mu);
        pthread_mutex_destroy(&rt->err_mu);
        free(rt->xpart);
        free(rt->xbytes);
        free(rt);
        return NULL;
    }
    return rt;
}

int32_t wsp_runtime_workers(const wsp_runtime *rt) { return rt ? rt->nworkers : 0; }

void wsp_runtime_free(wsp_runtime *rt) {
    if (!rt) return;
    if (rt->running) {  /* drop whatever has not started, let running kernels finish */
        wsp_fail(rt, WSP_ERR_USAGE, "wsp_runtime_free called during a run (before wsp_wait)");
        wsp_wait(rt);
    }
    wsp__workers_stop(rt);
    for (int i = 0; i < rt->depth; i++) {  /* only after an internal error */
        if (rt->scopes[i].barrier) wsp__group_unref(rt, rt->scopes[i].barrier);
        if (rt->scopes[i].current) wsp__group_unref(rt, rt->scopes[i].current);
    }
    free(rt->scopes);
    for (int32_t id = 0; id < rt->capctx; id++)  /* the current one's entry is stale */
        if (id != rt->cur) free(rt->ctxs[id].scopes);
    free(rt->ctxs);
    free(rt->notes);
    while (rt->free_chunks) {
        wsp_edgechunk *c = rt->free_chunks;
        rt->free_chunks = c->next;
        free(c);
    }
    while (rt->node_chunks) {
        void *c = rt->node_chunks;
        rt->node_chunks = *(void **)c;
        free(c);
    }
    wsp__deps_destroy(&rt->deps);
    wsp__workers_destroy(rt);
    wsp__graph_free(rt);
    free(rt->stream_last);
    free(rt->xpart);
    free(rt->xbytes);
    free(rt->xelem);
    wsp__device_free(rt);
    for (int64_t c = 0; c < rt->ntchunks; c++) free(rt->tchunks[c]);
    free(rt->tchunks);
    free(rt->tlinks[0]);
    free(rt->tlinks[1]);
    wsp__simlog_free(rt->simlog);
    pthread_cond_destroy(&rt->cv);
    pthread_mutex_destroy(&rt->mu);
    pthread_mutex_destroy(&rt->err_mu);
    free(rt);
}

int wsp_begin(wsp_runtime *rt, int64_t window, int32_t window_mode) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_begin called again before wsp_wait ended the run");
    /* a new run: forget the previous run's error (no worker is busy between runs) */
    pthread_mutex_lock(&rt->err_mu);
    atomic_store_explicit(&rt->err, 0, memory_order_release);
    rt->errmsg[0] = 0;
    pthread_mutex_unlock(&rt->err_mu);
    rt->running = 1;
    rt->finished_run = 0;
    rt->window = window > 0 ? window : 0;
    rt->window_mode = window_mode;
    rt->run_sub0 = rt->nsub;
    rt->run_ran0 = wsp__sum_ran(rt);
    rt->done_cache = wsp__sum_done(rt);  /* exact: no task is in flight between runs */
    rt->done_cache_at = rt->nsub;
    rt->max_in_flight = 0;
    rt->ndeps = 0;
    rt->nbatches = 0;
    rt->grain = 1;
    rt->batch_left = 0;
    rt->ndisp = rt->steal_ok = rt->nstreams = 0;
    atomic_store_explicit(&rt->pinned, 0, memory_order_relaxed);
    if (rt->graph) wsp__graph_reset(rt);  /* knobs are per run: wsp_graph sets them again */
    rt->tracing = rt->trace_on;
    rt->ntrace = 0;
    rt->ntlinks[0] = rt->ntlinks[1] = rt->tlinks_dropped = 0;
    rt->nnotes = 0;
    wsp__ctx_end_all(rt);  /* wsp_wait ended them; only context 0, with its stack, is left */
    if (rt->ctxs) {
        rt->nctx = 1;  /* ids restart at 1: a run's ids do not depend on earlier runs */
        rt->free_ctx = -1;
    }
    if (rt->simlog) wsp__simlog_begin(rt->simlog);
    rt->rr = 0;
    rt->xseq = 0;
    rt->execute_ms = 0;
    rt->t_begin_ns = wsp__now_ns();
    wsp__deps_begin(&rt->deps);
    if (window_mode != WSP_WINDOW_STALL && window_mode != WSP_WINDOW_ABORT)
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_begin: unknown window mode %d", window_mode);
    if (!rt->threads_started) {
        int rc = wsp__workers_start(rt);
        if (rc) return rc;
    }
    return WSP_OK;
}

/* ---- in-flight accounting --------------------------------------------------------------------- */

static void refresh_done(wsp_runtime *rt) {
    rt->done_cache = wsp__sum_done(rt);
    rt->done_cache_at = rt->nsub;
}

int wsp__window_admit(wsp_runtime *rt) {
    if (wsp__enumerated(rt) - rt->done_cache < rt->window) return WSP_OK;
    refresh_done(rt);
    if (wsp__enumerated(rt) - rt->done_cache < rt->window) return WSP_OK;
    if (rt->window_mode == WSP_WINDOW_ABORT)
        return wsp__failf(rt, WSP_ERR_WINDOW,
                          "task window of %lld tasks is full (mode = abort): %lld tasks are "
                          "enumerated but unfinished",
                          (long long)rt->window, (long long)(wsp__enumerated(rt) - rt->done_cache));
    /* stall: resume a little below the limit so a full window costs one wake-up per batch;
     * the open batch goes out first, or the tasks it holds would never finish */
    int64_t slack = (rt->window - 1) / 4;
    if (slack > 256) slack = 256;
    int rc = wsp__batch_close(rt);
    if (rc) return rc;
    wsp__flush_all(rt);
    wsp__submitter_wait(rt, WSP_WAIT_STALL, rt->window - 1 - slack);
    refresh_done(rt);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

static void note_in_flight(wsp_runtime *rt) {
    int64_t est = rt->nsub - rt->done_cache;
    if (est <= rt->max_in_flight) return;
    if (rt->nsub - rt->done_cache_at >= MAX_REFRESH_EVERY) {
        refresh_done(rt);
        est = rt->nsub - rt->done_cache;
    }
    if (est > rt->max_in_flight) rt->max_in_flight = est;
}

/* ---- submit ---------------------------------------------------------------------------------- */

static int check_task(wsp_runtime *rt, const wsp_task *task) {
    if (!task) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_submit: task is NULL");
    if (!task->fn)
        return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d) has no function",
                          task->kernel, task->stmt);
    if (task->ntiles < 0 || task->ntiles > WSP_MAX_TILES || task->nscalars < 0 ||
        task->nscalars > WSP_MAX_SCALARS || task->ncoords < 0 || task->ncoords > WSP_MAX_COORDS)
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "task of kernel %d (statement %d) has %d tiles, %d scalars, %d coords "
                          "(at most %d, %d, %d)",
                          task->kernel, task->stmt, task->ntiles, task->nscalars, task->ncoords,
                          WSP_MAX_TILES, WSP_MAX_SCALARS, WSP_MAX_COORDS);
    if (rt->ndisp > 0 && (task->dispatcher < 0 || task->dispatcher >= rt->ndisp))
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "task of kernel %d (statement %d) names dispatcher %d of %d",
                          task->kernel, task->stmt, task->dispatcher, rt->ndisp);
    if (rt->nstreams > 0 && (task->stream < 0 || task->stream >= rt->nstreams))
        return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d) names stream %d of %d",
                          task->kernel, task->stmt, task->stream, rt->nstreams);
    return wsp__deps_check(rt, task);
}

/* Hands a filled node to dependency inference and dispatch; `acc` holds its accesses. */
int wsp__enqueue(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *acc, int64_t ntasks) {
    t->seq = rt->seq++;
    if (rt->ndisp > 0) {
        t->queue = t->dispatcher % rt->nworkers;  /* dispatcher d is served by worker d % W */
    } else {  /* round robin without a division per task */
        t->queue = (int32_t)rt->rr;
        if (++rt->rr == (uint64_t)rt->nworkers) rt->rr = 0;
    }

    rt->nsub += ntasks;
    atomic_store_explicit(&rt->submitted, rt->nsub, memory_order_relaxed);
    note_in_flight(rt);
    if (rt->depth > 0) wsp__order_attach(rt, t);
    if (t->stream >= 0) {  /* a stream's tasks start in order and never overlap */
        wsp_tasknode *prev = rt->stream_last[t->stream];
        if (prev) wsp__add_edge(rt, &prev->h, t);
        rt->stream_last[t->stream] = t;
    }
    for (int32_t i = 0; i < rt->nbatch_waits; i++) {  /* a batch spanning order steps */
        wsp__add_edge(rt, &rt->batch_waits[i]->h, t);
        wsp__group_unref(rt, rt->batch_waits[i]);
    }
    rt->nbatch_waits = 0;
    wsp__deps_submit(rt, t, acc);
    if (rt->tracing && ntasks > 1) wsp__trace_batch(rt, t, ntasks);
    /* on an error above the task still goes through (it will not run), so counts stay exact;
     * without edges nobody else can touch the count, so no atomic read-modify-write is needed.
     * A hold (devices.c: a receive) counts as one more predecessor, which the transport's
     * thread may release at any time, even before this point. */
    int release = WSP_PENDING_GUARD - t->nedges - t->holds;
    if (t->nedges == 0 && t->holds == 0) {
        atomic_store_explicit(&t->h.pending, 0, memory_order_relaxed);
        wsp__stage_ready(rt, t);
    } else if (atomic_fetch_sub_explicit(&t->h.pending, release, memory_order_acq_rel) == release) {
        wsp__stage_ready(rt, t);
    }
    /* a ready task waits for at most WSP_STALE further submissions before workers see it */
    if (rt->unpub_since >= 0 && rt->nsub - rt->unpub_since >= WSP_STALE) wsp__flush_all(rt);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

wsp_tasknode *wsp__tasknode_new(wsp_runtime *rt, size_t bytes) {
    wsp_tasknode *t = (wsp_tasknode *)wsp__node_alloc(rt, bytes);
    if (!t) return NULL;
    t->h.kind = WSP_NODE_TASK;
    atomic_store_explicit(&t->h.pending, WSP_PENDING_GUARD, memory_order_relaxed);
    t->nregs = 0;
    t->nedges = 0;
    t->chunks = NULL;
    t->count = 1;
    t->subs = 0;
    t->dispatcher = -1;
    t->stream = -1;
    t->lseq = 0;
    t->nparts = 0;
    t->parts = NULL;
    t->holds = 0;
    t->owned = 0;
    t->resume = 0;
    return t;
}

int wsp_submit(wsp_runtime *rt, const wsp_task *task) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_submit called outside wsp_begin ... wsp_wait");
    if ((rc = check_task(rt, task))) return rc;
    if (rt->xport.devices > 0) {  /* one device of several (devices.c) */
        int taken = 0;
        rc = wsp__device_submit(rt, task, &taken);
        if (taken || rc) return rc;
    }
    if (rt->window > 0 && (rc = wsp__window_admit(rt))) return rc;
    int64_t index = wsp__enumerated(rt) - rt->run_sub0;  /* the task's number in this run */
    if ((rt->tracing || rt->simlog) && (rc = wsp__record(rt, task, index))) return rc;
    if (rt->grain > 1) {
        if ((rc = wsp__batch_add(rt, task, index))) return rc;
        return atomic_load_explicit(&rt->err, memory_order_acquire);
    }

    wsp_tasknode *t = wsp__task_node(rt, task, index);
    if (!t) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
    return wsp__submit_node(rt, t, task);
}

wsp_tasknode *wsp__task_node(wsp_runtime *rt, const wsp_task *task, int64_t index) {
    size_t bytes = sizeof(wsp_tasknode) + (size_t)task->ntiles * (sizeof(wsp_tile) + sizeof(wsp_reg)) +
                   (size_t)task->nscalars * sizeof(wsp_scalar) + (size_t)task->ncoords * sizeof(int64_t);
    wsp_tasknode *t = wsp__tasknode_new(rt, bytes);
    if (!t) return NULL;
    t->fn = task->fn;
    t->kernel = task->kernel;
    t->stmt = task->stmt;
    t->dispatcher = rt->ndisp > 0 ? task->dispatcher : -1;
    t->stream = rt->nstreams > 0 ? task->stream : -1;
    t->lseq = index;
    t->ntiles = (int16_t)task->ntiles;
    t->nscalars = (int16_t)task->nscalars;
    t->ncoords = (int16_t)task->ncoords;
    /* short loops beat memcpy calls for the handful of entries a task has */
    wsp_tile *tiles = wsp__tiles(t);
    for (int i = 0; i < task->ntiles; i++) tiles[i] = task->tiles[i];
    wsp_scalar *scalars = wsp__scalars(t);
    for (int i = 0; i < task->nscalars; i++) scalars[i] = task->scalars[i];
    int64_t *coords = wsp__coords(t);
    for (int i = 0; i < task->ncoords; i++) coords[i] = task->coords[i];
    return t;
}

int wsp__submit_node(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task) {
    if (__builtin_expect(atomic_load_explicit(&rt->graph_on, memory_order_relaxed), 0)) {
        wsp__graph_task(rt, t, task);  /* a bad pool fails the run; the task still goes through */
        int rc = wsp__enqueue(rt, t, task, 1);
        wsp__graph_submitted(rt);
        return rc;
    }
    return wsp__enqueue(rt, t, task, 1);
}

/* ---- schedules, and a run without kernels -------------------------------------------------- */

int wsp_schedule(wsp_runtime *rt, int32_t ndispatchers, int32_t steal, int32_t nstreams) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running || rt->nsub != rt->run_sub0 || rt->batch)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_schedule must come after wsp_begin, before any task");
    if (ndispatchers < 0 || nstreams < 0)
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_schedule: %d dispatchers, %d streams",
                          ndispatchers, nstreams);
    if (nstreams > rt->capstreams) {
        wsp_tasknode **ns = realloc(rt->stream_last, (size_t)nstreams * sizeof *ns);
        if (!ns) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (streams)");
        rt->stream_last = ns;
        rt->capstreams = nstreams;
    }
    for (int32_t i = 0; i < nstreams; i++) rt->stream_last[i] = NULL;
    rt->ndisp = ndispatchers;
    rt->steal_ok = steal != 0;
    rt->nstreams = nstreams;
    atomic_store_explicit(&rt->pinned, ndispatchers > 0 && !steal, memory_order_relaxed);
    return WSP_OK;
}

int32_t wsp_schedule_dispatchers(const wsp_runtime *rt) { return rt ? rt->ndisp : 0; }
int32_t wsp_schedule_streams(const wsp_runtime *rt) { return rt ? rt->nstreams : 0; }

int wsp_execute(wsp_runtime *rt, int32_t on) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_execute called during a run");
    rt->skip_kernels = !on;
    return WSP_OK;
}

/* ---- wait and statistics --------------------------------------------------------------------- */

int wsp_wait(wsp_runtime *rt) {
    if (!rt) return WSP_ERR_USAGE;
    if (!rt->running) return atomic_load_explicit(&rt->err, memory_order_acquire);
    wsp__batch_close(rt);
    rt->grain = 1;
    rt->batch_left = 0;
    /* forked contexts still live (an enumerator that returned early) end here; the usage check
     * below counts the scopes of context 0 only */
    wsp__ctx_end_all(rt);
    if (atomic_load_explicit(&rt->graph_on, memory_order_relaxed)) wsp__graph_enumerated(rt);
    int32_t open = rt->depth;
    while (rt->depth > 0) wsp__scope_pop(rt);
    wsp__flush_all(rt);
    /* the log is complete once enumeration is: the model replays it while the workers finish
     * the real run, on the thread that would otherwise sleep */
    if (rt->simlog && atomic_load_explicit(&rt->err, memory_order_acquire) == 0) {
        char msg[256];
        int rc = wsp__simlog_replay(rt->simlog, rt->tracing, msg, sizeof msg);
        if (rc) wsp__failf(rt, rc, "cycle model: %s", rc == WSP_ERR_INTERNAL ? "out of memory" : msg);
    }
    wsp__submitter_wait(rt, WSP_WAIT_ALL, 0);
    if (atomic_load_explicit(&rt->graph_on, memory_order_relaxed)) wsp__graph_end(rt);
    wsp__drain(rt, INT64_MAX);
    /* every receive and send in place has arrived (or was released by the failure), so a
     * worker still inside the transport's poll leaves it at once (dispatch.c) */
    while (atomic_load_explicit(&rt->xpolling, memory_order_seq_cst) > 0) sched_yield();
    rt->running = 0;
    rt->execute_ms = (double)(wsp__now_ns() - rt->t_begin_ns) / 1e6;
    rt->finished_run = 1;
    for (int32_t i = 0; i < rt->nstreams; i++) rt->stream_last[i] = NULL;
    if (open > 0)
        wsp__failf(rt, WSP_ERR_USAGE, "wsp_wait called with %d order scope(s) still open", open);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

void wsp_get_stats(const wsp_runtime *rt, wsp_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!rt) return;
    out->tasks = rt->nsub - rt->run_sub0;
    out->tasks_run = wsp__sum_ran(rt) - rt->run_ran0;
    out->dependencies = rt->ndeps;
    out->max_in_flight = rt->max_in_flight;
    out->batches = rt->nbatches;
    if (rt->finished_run) out->execute_ms = rt->execute_ms;
    else if (rt->running) out->execute_ms = (double)(wsp__now_ns() - rt->t_begin_ns) / 1e6;
}
