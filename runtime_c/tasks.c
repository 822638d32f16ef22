/* tasks.c: the runtime's life cycle and its submitter side: new/free, begin, submit (validate,
 * window, copy into a pooled node, order scopes, dependency inference in deps.c, hand-off to
 * dispatch.c), wait, order scopes and order contexts (one scope stack per coroutine), awaits and
 * probes (wsp_await, wsp_probe: data-dependent enumeration), notes, errors and statistics.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wsp_internal.h"

#define NODE_CHUNK_BYTES (64 * 1024)
#define MAX_REFRESH_EVERY 16

int64_t wsp__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void set_error(wsp_runtime *rt, int code, const char *text) {
    int won = 0;
    pthread_mutex_lock(&rt->err_mu);
    if (atomic_load_explicit(&rt->err, memory_order_relaxed) == 0) {
        snprintf(rt->errmsg, sizeof rt->errmsg, "%s", text ? text : "(no message)");
        atomic_store_explicit(&rt->err, code, memory_order_release);
        won = 1;
    }
    pthread_mutex_unlock(&rt->err_mu);
    if (won) {  /* a submitter stalled on the window returns at once */
        pthread_mutex_lock(&rt->mu);
        pthread_cond_broadcast(&rt->cv);
        pthread_mutex_unlock(&rt->mu);
    }
}

int wsp_fail(wsp_runtime *rt, int code, const char *message) {
    if (!rt) return code ? code : WSP_ERR_USAGE;
    if (code != WSP_OK) set_error(rt, code, message);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

int wsp__failf(wsp_runtime *rt, int code, const char *fmt, ...) {
    char buf[WSP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return wsp_fail(rt, code, buf);
}

int wsp_error_code(const wsp_runtime *rt) {
    return rt ? atomic_load_explicit(&((wsp_runtime *)rt)->err, memory_order_acquire) : WSP_OK;
}

const char *wsp_error_message(const wsp_runtime *rt) {
    if (!rt || atomic_load_explicit(&((wsp_runtime *)rt)->err, memory_order_acquire) == 0)
        return "";
    return rt->errmsg;
}

/* A kernel's own words for its failure, kept per thread until the worker reports it. */
static _Thread_local char kernel_msg[256];

int wsp_kernel_fail(const char *message) {
    snprintf(kernel_msg, sizeof kernel_msg, "%s", message ? message : "");
    return WSP_ERR_KERNEL;
}

void wsp__kernel_msg_clear(void) { kernel_msg[0] = 0; }

void wsp__kernel_failed(wsp_runtime *rt, int32_t kernel, int32_t stmt, const int64_t *c,
                        int ncoords, int rc) {
    char coords[WSP_MAX_COORDS * 24 + 4];
    size_t len = 0;
    coords[0] = 0;
    for (int i = 0; i < ncoords && len < sizeof coords; i++)
        len += (size_t)snprintf(coords + len, sizeof coords - len, "%s%lld", i ? ", " : "",
                                (long long)c[i]);
    wsp__failf(rt, WSP_ERR_KERNEL, "kernel %d (statement %d) failed at coords [%s] with code %d%s%s",
               kernel, stmt, coords, rc, kernel_msg[0] ? ": " : "", kernel_msg);
}

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

static void node_free(wsp_runtime *rt, wsp_node *n) {
    n->next = rt->free_nodes[n->sclass];
    rt->free_nodes[n->sclass] = n;
}

void wsp__recycle(wsp_runtime *rt, wsp_node *n) {
    if (n->kind != WSP_NODE_GROUP) {  /* a task, or a waiter (wsp_await: no regs, no stream) */
        wsp_tasknode *t = (wsp_tasknode *)n;
        wsp__deps_retire(&rt->deps, t);
        if (t->stream >= 0 && t->stream < rt->nstreams && rt->stream_last[t->stream] == t)
            rt->stream_last[t->stream] = NULL;
        while (t->chunks) {
            wsp_edgechunk *c = t->chunks;
            t->chunks = c->next;
            c->next = rt->free_chunks;
            rt->free_chunks = c;
        }
        node_free(rt, n);
    } else {
        wsp_group *g = (wsp_group *)n;
        g->drained = 1;
        if (g->scope_refs == 0) node_free(rt, n);
    }
}

static wsp_node *node_alloc(wsp_runtime *rt, size_t bytes) {
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

static void group_unref(wsp_runtime *rt, wsp_group *g) {
    if (--g->scope_refs == 0 && g->drained) node_free(rt, &g->h);
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
        if (rt->scopes[i].barrier) group_unref(rt, rt->scopes[i].barrier);
        if (rt->scopes[i].current) group_unref(rt, rt->scopes[i].current);
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
    free(rt->stream_last);
    free(rt->xpart);
    free(rt->xbytes);
    for (int64_t c = 0; c < rt->ntchunks; c++) free(rt->tchunks[c]);
    free(rt->tchunks);
    wsp__simlog_free(rt->simlog);
    pthread_cond_destroy(&rt->cv);
    pthread_mutex_destroy(&rt->mu);
    pthread_mutex_destroy(&rt->err_mu);
    free(rt);
}

static void ctx_end_all(wsp_runtime *rt);

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
    rt->tracing = rt->trace_on;
    rt->ntrace = 0;
    rt->nnotes = 0;
    ctx_end_all(rt);  /* wsp_wait ended them; only context 0, with its stack, is left */
    if (rt->ctxs) {
        rt->nctx = 1;  /* ids restart at 1: a run's ids do not depend on earlier runs */
        rt->free_ctx = -1;
    }
    if (rt->simlog) wsp__simlog_begin(rt->simlog);
    rt->rr = 0;
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

/* Tasks submitted so far, the open batch's included. */
static inline int64_t enumerated(const wsp_runtime *rt) {
    return rt->nsub + rt->batch_count;
}

static int batch_close(wsp_runtime *rt);

static int window_admit(wsp_runtime *rt) {
    if (enumerated(rt) - rt->done_cache < rt->window) return WSP_OK;
    refresh_done(rt);
    if (enumerated(rt) - rt->done_cache < rt->window) return WSP_OK;
    if (rt->window_mode == WSP_WINDOW_ABORT)
        return wsp__failf(rt, WSP_ERR_WINDOW,
                          "task window of %lld tasks is full (mode = abort): %lld tasks are "
                          "enumerated but unfinished",
                          (long long)rt->window, (long long)(enumerated(rt) - rt->done_cache));
    /* stall: resume a little below the limit so a full window costs one wake-up per batch;
     * the open batch goes out first, or the tasks it holds would never finish */
    int64_t slack = (rt->window - 1) / 4;
    if (slack > 256) slack = 256;
    int rc = batch_close(rt);
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

/* ---- order scopes ---------------------------------------------------------------------------- */

static wsp_group *group_new(wsp_runtime *rt, wsp_group *parent) {
    wsp_group *g = (wsp_group *)node_alloc(rt, sizeof(wsp_group));
    if (!g) return NULL;
    g->h.kind = WSP_NODE_GROUP;
    g->h.group = parent;
    atomic_store_explicit(&g->h.pending, 1, memory_order_relaxed);  /* open until closed */
    g->scope_refs = 1;
    g->drained = 0;
    g->closed = 0;
    g->used = 0;
    if (parent) atomic_fetch_add_explicit(&parent->h.pending, 1, memory_order_relaxed);
    return g;
}

/* A borrowed level's group whose step the parent has ended may already have completed: adding
 * a member (or a nested group) to it would complete it twice. */
static int borrowed_ended(wsp_runtime *rt, int32_t level) {
    return wsp__failf(rt, WSP_ERR_USAGE,
                      "order context %d: the step of order scope level %d it borrowed at "
                      "wsp_order_fork has ended (its parent called wsp_order_next, wsp_order_pop "
                      "or wsp_order_end there before this context ended)",
                      rt->cur, level);
}

/* The group of scope `level`'s current step, created (with its enclosing ones) on first use.
 * NULL: out of memory, or a borrowed group that has closed (a usage error, reported here). A
 * borrowed level always has its group (wsp_order_fork created it), so only own levels create. */
static wsp_group *step_group(wsp_runtime *rt, int32_t level) {
    wsp_scope *s = &rt->scopes[level];
    if (s->current) {
        if (__builtin_expect(s->current->closed, 0)) {  /* only a borrowed one can be */
            borrowed_ended(rt, level);
            return NULL;
        }
        return s->current;
    }
    wsp_group *parent = NULL;
    if (level > 0 && !(parent = step_group(rt, level - 1))) return NULL;
    s->current = group_new(rt, parent);
    return s->current;
}

static void group_close(wsp_runtime *rt, wsp_group *g) {
    g->closed = 1;
    if (atomic_fetch_sub_explicit(&g->h.pending, 1, memory_order_acq_rel) == 1)
        wsp__complete(rt, NULL, &g->h);
}

static int order_attach(wsp_runtime *rt, wsp_tasknode *t) {
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    if (s->barrier) {
        if (atomic_load_explicit(&s->barrier->h.succ, memory_order_acquire) == WSP_CLOSED) {
            group_unref(rt, s->barrier);
            s->barrier = NULL;
        } else {
            wsp__add_edge(rt, &s->barrier->h, t);
        }
    }
    wsp_group *g = step_group(rt, rt->depth - 1);
    if (!g) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (order scopes)");
    atomic_fetch_add_explicit(&g->h.pending, 1, memory_order_relaxed);
    t->h.group = g;
    for (wsp_group *x = g; x && !x->used; x = x->h.group) x->used = 1;  /* each group once */
    return WSP_OK;
}

static int order_check(wsp_runtime *rt, const char *fn, int need_scope) {
    if (!rt) return WSP_ERR_USAGE;
    int e = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (e) return e;
    if (!rt->running)
        return wsp__failf(rt, WSP_ERR_USAGE, "%s called outside wsp_begin ... wsp_wait", fn);
    if (need_scope && rt->depth == 0)
        return wsp__failf(rt, WSP_ERR_USAGE, "%s called with no open order scope", fn);
    if (need_scope && rt->depth <= rt->borrowed)  /* the parent's step: not this context's */
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "%s in order context %d on a scope borrowed from its parent (only "
                          "scopes the context pushed itself can be advanced or popped)",
                          fn, rt->cur);
    return WSP_OK;
}

int wsp_order_push(wsp_runtime *rt) {
    int rc = order_check(rt, "wsp_order_push", 0);
    if (rc || (rc = batch_close(rt))) return rc;
    if (rt->depth == rt->capscopes) {
        int32_t cap = rt->capscopes ? rt->capscopes * 2 : 8;
        wsp_scope *ns = realloc(rt->scopes, (size_t)cap * sizeof *ns);
        if (!ns) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (order scopes)");
        rt->scopes = ns;
        rt->capscopes = cap;
    }
    wsp_scope *s = &rt->scopes[rt->depth];
    /* tasks of the new scope also wait for the enclosing scopes' previous steps */
    s->barrier = rt->depth > 0 ? rt->scopes[rt->depth - 1].barrier : NULL;
    if (s->barrier) s->barrier->scope_refs++;
    s->current = NULL;
    rt->depth++;
    if (rt->simlog) wsp__simlog_order_push(rt->simlog);
    return WSP_OK;
}

int wsp_order_next(wsp_runtime *rt) {
    int rc = order_check(rt, "wsp_order_next", 1);
    if (rc) return rc;
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    /* An open batch may go on into the next step: its tasks run in submission order anyway,
     * and when it is submitted it waits for every barrier its steps had (kept here), besides
     * the scope's barrier then (batch_close). Only a batch started in this scope, and with room
     * to keep the barrier, does so. */
    if (rt->batch) {
        if (rt->batch_depth != rt->depth || rt->nxparts > 0 ||
            (s->current && s->barrier && rt->nbatch_waits == WSP_BATCH_WAITS)) {
            if ((rc = batch_close(rt))) return rc;
        } else {
            rt->batch_steps++;
        }
    }
    /* An empty step changes nothing: the old barrier still covers it. So does a step whose
     * group no task joined (wsp_order_fork made it, and the children submitted nothing): that
     * group completes as it closes, and as the barrier it would order nothing. (Tasks of the
     * step still in the open batch wait for the old barrier when it is submitted, and the
     * batch runs them before its later tasks.) */
    if (s->current && !s->current->used) {
        wsp_group *g = s->current;
        s->current = NULL;
        group_close(rt, g);
        group_unref(rt, g);
    } else if (s->current) {
        if (rt->batch && s->barrier) {
            s->barrier->scope_refs++;
            rt->batch_waits[rt->nbatch_waits++] = s->barrier;
        }
        wsp_group *g = s->current;
        s->current = NULL;
        group_close(rt, g);
        if (s->barrier) group_unref(rt, s->barrier);
        s->barrier = g;
    }
    if (rt->simlog) wsp__simlog_order_next(rt->simlog);
    return WSP_OK;
}

static void scope_pop(wsp_runtime *rt) {
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    if (s->current) {
        group_close(rt, s->current);
        group_unref(rt, s->current);
    }
    if (s->barrier) group_unref(rt, s->barrier);
    rt->depth--;
    if (rt->simlog) wsp__simlog_order_pop(rt->simlog);
}

int wsp_order_pop(wsp_runtime *rt) {
    int rc = order_check(rt, "wsp_order_pop", 1);
    if (rc || (rc = batch_close(rt))) return rc;
    scope_pop(rt);
    return WSP_OK;
}

/* ---- order contexts (wsp_order_fork / switch / end) -------------------------------------------
 * Coroutines of one enumerator each get a scope stack. The current context's stack is the one
 * in rt->scopes (so submit, push, next and pop need no indirection); switching saves it into
 * its `ctxs` entry and loads the other. A fork copies the current stack as the child's borrowed
 * levels: the same barrier and the same current-step group per level (created here, so parent
 * and child share one), each with a reference of its own. The child adds its tasks to those
 * groups, and its own scopes' groups nest in them, but it never closes them: the parent's
 * next/pop/end does. Ids are reused (last ended first), entries and their stacks kept. */

static void ctx_save(wsp_runtime *rt) {
    wsp_octx *c = &rt->ctxs[rt->cur];
    c->scopes = rt->scopes;
    c->depth = rt->depth;
    c->cap = rt->capscopes;
    c->borrowed = rt->borrowed;
}

static void ctx_load(wsp_runtime *rt, int32_t id) {
    wsp_octx *c = &rt->ctxs[id];
    rt->scopes = c->scopes;
    rt->depth = c->depth;
    rt->capscopes = c->cap;
    rt->borrowed = c->borrowed;
    rt->cur = id;
    if (rt->simlog) wsp__simlog_order_switch(rt->simlog, id);
}

static int ctx_valid(const wsp_runtime *rt, int32_t id) {
    return id == 0 || (rt->ctxs && id > 0 && id < rt->nctx && rt->ctxs[id].live);
}

/* Drops a stack's references, innermost level first: its own levels' current groups are
 * closed (their steps end, as wsp_order_pop does), borrowed ones only released. */
static void scopes_release(wsp_runtime *rt, wsp_scope *sc, int32_t depth, int32_t borrowed) {
    for (int32_t i = depth - 1; i >= 0; i--) {
        if (sc[i].current) {
            if (i >= borrowed) group_close(rt, sc[i].current);
            group_unref(rt, sc[i].current);
        }
        if (sc[i].barrier) group_unref(rt, sc[i].barrier);
        sc[i].current = sc[i].barrier = NULL;
    }
}

/* Ends context `id`, which is not the current one: its id goes on the free stack. */
static void ctx_release(wsp_runtime *rt, int32_t id) {
    wsp_octx *c = &rt->ctxs[id];
    scopes_release(rt, c->scopes, c->depth, c->borrowed);
    if (rt->simlog) wsp__simlog_order_end(rt->simlog, id);
    c->depth = c->borrowed = 0;
    c->live = 0;
    c->next_free = rt->free_ctx;
    rt->free_ctx = id;
    rt->nlive--;
}

/* Every forked context of the run ended, context 0 current again (its scopes stay). */
static void ctx_end_all(wsp_runtime *rt) {
    if (!rt->ctxs) return;
    if (rt->cur != 0) {
        ctx_save(rt);
        ctx_load(rt, 0);
    }
    for (int32_t id = 1; id < rt->nctx && rt->nlive > 0; id++)
        if (rt->ctxs[id].live) ctx_release(rt, id);
}

/* A fresh id: the last ended one, or the next new entry (its kept stack reused). */
static int32_t ctx_alloc(wsp_runtime *rt) {
    if (!rt->ctxs) {  /* the first fork of the runtime's life: an entry for context 0 too */
        rt->ctxs = calloc(8, sizeof *rt->ctxs);
        if (!rt->ctxs) return -1;
        rt->capctx = 8;
        rt->nctx = 1;
        rt->free_ctx = -1;
        rt->ctxs[0].live = 1;
        rt->ctxs[0].next_free = -1;
    }
    if (rt->free_ctx >= 0) {
        int32_t id = rt->free_ctx;
        rt->free_ctx = rt->ctxs[id].next_free;
        return id;
    }
    if (rt->nctx == INT32_MAX) return -1;
    if (rt->nctx == rt->capctx) {
        int32_t cap = rt->capctx < INT32_MAX / 2 ? rt->capctx * 2 : INT32_MAX;
        wsp_octx *nc = realloc(rt->ctxs, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        memset(nc + rt->capctx, 0, (size_t)(cap - rt->capctx) * sizeof *nc);
        rt->ctxs = nc;
        rt->capctx = cap;
    }
    return rt->nctx++;
}

int32_t wsp_order_fork(wsp_runtime *rt) {
    int rc = order_check(rt, "wsp_order_fork", 0);
    if (rc || (rc = batch_close(rt))) return -rc;
    /* the groups parent and child share: every level's current step, created now */
    if (rt->depth > 0 && !step_group(rt, rt->depth - 1))
        return -wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (order scopes)");
    int32_t id = ctx_alloc(rt);
    if (id < 0) return -wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (order contexts)");
    wsp_octx *c = &rt->ctxs[id];
    if (c->cap < rt->depth) {
        int32_t cap = rt->depth > 8 ? rt->depth : 8;
        wsp_scope *ns = realloc(c->scopes, (size_t)cap * sizeof *ns);
        if (!ns) {
            c->next_free = rt->free_ctx;  /* back on the free stack */
            rt->free_ctx = id;
            return -wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (order contexts)");
        }
        c->scopes = ns;
        c->cap = cap;
    }
    for (int32_t i = 0; i < rt->depth; i++) {
        wsp_scope *s = &rt->scopes[i];
        if (s->barrier) s->barrier->scope_refs++;
        if (s->current) s->current->scope_refs++;
        c->scopes[i] = *s;
    }
    c->depth = c->borrowed = rt->depth;
    c->live = 1;
    c->next_free = -1;
    rt->nlive++;
    if (rt->simlog) wsp__simlog_order_fork(rt->simlog, id);
    return id;
}

int wsp_order_switch(wsp_runtime *rt, int32_t ctx) {
    int rc = order_check(rt, "wsp_order_switch", 0);
    if (rc) return rc;
    if (!ctx_valid(rt, ctx))
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_order_switch: no live order context %d", ctx);
    if (ctx == rt->cur) return WSP_OK;
    if ((rc = batch_close(rt))) return rc;  /* a batch holds tasks of one context's scopes */
    ctx_save(rt);
    ctx_load(rt, ctx);
    return WSP_OK;
}

int wsp_order_end(wsp_runtime *rt, int32_t ctx) {
    if (!rt) return WSP_ERR_USAGE;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_order_end called outside wsp_begin ... wsp_wait");
    if (ctx == 0 || !ctx_valid(rt, ctx))
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_order_end: %s order context %d",
                          ctx == 0 ? "cannot end the run's own" : "no live", ctx);
    /* after an error too: an enumerator on its way out may end its coroutines */
    if (ctx == rt->cur) {
        batch_close(rt);
        ctx_save(rt);
        ctx_load(rt, 0);
    }
    ctx_release(rt, ctx);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

/* ---- notes (wsp_note) ------------------------------------------------------------------------ */

int wsp_note(wsp_runtime *rt, int64_t tag, int64_t value) {
    if (!rt || !rt->tracing) return WSP_OK;  /* off: the one branch it costs */
    if (!rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_note called outside wsp_begin ... wsp_wait");
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (rt->nnotes == rt->capnotes) {
        int64_t cap = rt->capnotes ? rt->capnotes * 2 : 1024;
        int64_t *nn = (uint64_t)cap <= SIZE_MAX / (3 * sizeof *nn)
                          ? realloc(rt->notes, (size_t)cap * 3 * sizeof *nn) : NULL;
        if (!nn) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (notes)");
        rt->notes = nn;
        rt->capnotes = cap;
    }
    int64_t *n = rt->notes + 3 * rt->nnotes++;
    n[0] = enumerated(rt) - rt->run_sub0;  /* the index the next submitted task gets */
    n[1] = tag;
    n[2] = value;
    return WSP_OK;
}

int64_t wsp_note_count(const wsp_runtime *rt) { return rt && rt->tracing ? rt->nnotes : 0; }

int64_t wsp_note_read(const wsp_runtime *rt, int64_t first, int64_t n, int64_t *out) {
    if (!rt || !rt->tracing || first < 0 || n <= 0 || !out || first >= rt->nnotes) return 0;
    if (n > rt->nnotes - first) n = rt->nnotes - first;
    memcpy(out, rt->notes + 3 * first, (size_t)n * 3 * sizeof *out);
    return n;
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

/* The trace's event and the cycle model's log entry of task `index` of the run. */
static int record(wsp_runtime *rt, const wsp_task *task, int64_t index) {
    if (rt->tracing && index < (int64_t)WSP_TRACE_CHUNK * WSP_TRACE_MAXCHUNKS) {
        int64_t c = index / WSP_TRACE_CHUNK;
        if (c >= rt->ntchunks) {
            rt->tchunks[c] = malloc(WSP_TRACE_CHUNK * sizeof(wsp_trace_event));
            if (!rt->tchunks[c]) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (trace)");
            rt->ntchunks = c + 1;
        }
        wsp_trace_event *e = wsp__trace_at(rt, index);
        e->kernel = task->kernel;
        e->stmt = task->stmt;
        e->dispatcher = rt->ndisp > 0 ? task->dispatcher : -1;
        e->stream = rt->nstreams > 0 ? task->stream : -1;
        e->worker = -1;
        e->ncoords = task->ncoords;
        for (int i = 0; i < WSP_MAX_COORDS; i++) e->coords[i] = i < task->ncoords ? task->coords[i] : 0;
        e->start_ns = e->end_ns = 0;
        rt->ntrace = index + 1;
    }
    if (rt->simlog) {
        /* without `.dispatch` the model deals tasks round robin over its dispatchers */
        int32_t d = rt->ndisp > 0 ? task->dispatcher
                                  : (int32_t)(index % wsp__simlog_dispatchers(rt->simlog));
        int32_t st = rt->nstreams > 0 ? task->stream : -1;
        if (wsp__simlog_add(rt->simlog, task, d, st))
            return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (cycle model log)");
    }
    return WSP_OK;
}

/* Hands a filled node to dependency inference and dispatch; `acc` holds its accesses. */
static int enqueue(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *acc, int64_t ntasks) {
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
    if (rt->depth > 0) order_attach(rt, t);
    if (t->stream >= 0) {  /* a stream's tasks start in order and never overlap */
        wsp_tasknode *prev = rt->stream_last[t->stream];
        if (prev) wsp__add_edge(rt, &prev->h, t);
        rt->stream_last[t->stream] = t;
    }
    for (int32_t i = 0; i < rt->nbatch_waits; i++) {  /* a batch spanning order steps */
        wsp__add_edge(rt, &rt->batch_waits[i]->h, t);
        group_unref(rt, rt->batch_waits[i]);
    }
    rt->nbatch_waits = 0;
    wsp__deps_submit(rt, t, acc);
    /* on an error above the task still goes through (it will not run), so counts stay exact;
     * without edges nobody else can touch the count, so no atomic read-modify-write is needed */
    int release = WSP_PENDING_GUARD - t->nedges;
    if (t->nedges == 0) {
        atomic_store_explicit(&t->h.pending, 0, memory_order_relaxed);
        wsp__stage_ready(rt, t);
    } else if (atomic_fetch_sub_explicit(&t->h.pending, release, memory_order_acq_rel) == release) {
        wsp__stage_ready(rt, t);
    }
    /* a ready task waits for at most WSP_STALE further submissions before workers see it */
    if (rt->unpub_since >= 0 && rt->nsub - rt->unpub_since >= WSP_STALE) wsp__flush_all(rt);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

static wsp_tasknode *tasknode_new(wsp_runtime *rt, size_t bytes) {
    wsp_tasknode *t = (wsp_tasknode *)node_alloc(rt, bytes);
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
    return t;
}

/* ---- batches --------------------------------------------------------------------------------- */

/* A batch node: the header, room for the tiles and registrations of up to WSP_MAX_TILES union
 * accesses (wsp__regs follows tiles[ntiles]), then the wsp_sub records. */
#define BATCH_SUBS ((sizeof(wsp_tasknode) + WSP_MAX_TILES * (sizeof(wsp_tile) + sizeof(wsp_reg)) + 7) / 8 * 8)

int wsp_batch(wsp_runtime *rt, int64_t ntasks, int64_t grain, int32_t flags) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_batch called outside wsp_begin ... wsp_wait");
    if ((rc = batch_close(rt))) return rc;
    if (grain <= 0) {  /* about 16 batches per worker, as in chunked loop scheduling */
        grain = ntasks / ((int64_t)rt->nworkers * 16);
        if (rt->window > 0 && grain > rt->window / (2 * (int64_t)rt->nworkers))
            grain = rt->window / (2 * (int64_t)rt->nworkers);
    }
    if (grain > WSP_GRAIN_MAX) grain = WSP_GRAIN_MAX;
    rt->grain = grain >= 2 && ntasks >= 2 ? grain : 1;
    rt->batch_left = rt->grain > 1 ? ntasks : 0;
    rt->batch_indep = (flags & WSP_BATCH_INDEPENDENT) != 0;
    return WSP_OK;
}

static inline int same_key(const wsp_access *a, const wsp_access *b) {
    return a->tensor == b->tensor && a->mode == b->mode && a->ndim == b->ndim;
}

/* The batch's union access of a's tensor and mode, or -1. */
static int find_key(const wsp_task *u, const wsp_access *a) {
    for (int i = 0; i < u->ntiles; i++)
        if (same_key(&u->access[i], a)) return i;
    return -1;
}

static int box_empty(const wsp_access *a) {
    for (int d = 0; d < a->ndim; d++)
        if (a->lo[d] == a->hi[d]) return 1;
    return 0;
}

/* Whether `task` joins the open batch: room for its records, and for its (tensor, mode) pairs
 * among the batch's union accesses. Empty boxes conflict with nothing and take no slot. */
static int batch_fits(const wsp_runtime *rt, const wsp_task *task, size_t bytes) {
    if (rt->batch_count >= rt->grain) return 0;
    /* one batch, one stream; its records run on their dispatchers' workers: on the batch's
     * worker, or, when the tasks are independent and the batch stays in one order step, in
     * the batch's part on another worker */
    if (rt->nstreams > 0 && task->stream != rt->batch->stream) return 0;
    size_t used = rt->batch_bytes;
    if (rt->ndisp > 0) {
        int32_t q = task->dispatcher % rt->nworkers;
        if (q != rt->batch->queue) {
            if (!rt->batch_indep || rt->nstreams > 0 || rt->batch_steps > 0) return 0;
            used = rt->xpart[q] ? rt->xbytes[q] : 0;
        }
    }
    if (used + bytes > WSP_BATCH_BYTES) return 0;
    const wsp_task *u = &rt->batch_acc;
    int extra = 0;
    for (int i = 0; i < task->ntiles; i++) {
        const wsp_access *a = &task->access[i];
        if (box_empty(a) || find_key(u, a) >= 0) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_key(&task->access[j], a) && !box_empty(&task->access[j]);
        extra += !seen;
    }
    return u->ntiles + extra <= WSP_MAX_TILES;
}

/* A node for a batch's records: the header with room for the union accesses, then the records. */
static wsp_tasknode *batch_node(wsp_runtime *rt, const wsp_task *task, int64_t index) {
    wsp_tasknode *b = tasknode_new(rt, BATCH_SUBS + WSP_BATCH_BYTES);
    if (!b) return NULL;
    b->fn = NULL;
    b->kernel = task->kernel;
    b->stmt = task->stmt;
    b->ntiles = b->nscalars = b->ncoords = 0;
    b->count = 0;
    b->subs = (uint32_t)BATCH_SUBS;
    b->dispatcher = rt->ndisp > 0 ? task->dispatcher : -1;
    b->queue = rt->ndisp > 0 ? task->dispatcher % rt->nworkers : 0;
    b->stream = rt->nstreams > 0 ? task->stream : -1;
    b->lseq = index;
    return b;
}

static int batch_add(wsp_runtime *rt, const wsp_task *task, int64_t index) {
    size_t bytes = sizeof(wsp_sub) + (size_t)task->ntiles * sizeof(wsp_tile) +
                   (size_t)(task->nscalars + task->ncoords) * 8;
    int rc;
    if (rt->batch && !batch_fits(rt, task, bytes) && (rc = batch_close(rt))) return rc;
    wsp_tasknode *b = rt->batch;
    if (!b) {
        if (!(b = batch_node(rt, task, index)))
            return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
        rt->batch = b;
        rt->batch_bytes = 0;
        rt->batch_count = 0;
        rt->batch_acc.ntiles = 0;
        rt->batch_depth = rt->depth;
        rt->batch_steps = 0;
        rt->nbatch_waits = 0;
    }
    size_t *used = &rt->batch_bytes;
    if (rt->ndisp > 0 && task->dispatcher % rt->nworkers != b->queue) {  /* batch_fits allowed it */
        int32_t q = task->dispatcher % rt->nworkers;
        if (!rt->xpart[q]) {
            if (!(rt->xpart[q] = batch_node(rt, task, index)))
                return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
            rt->xbytes[q] = 0;
            rt->nxparts++;
        }
        b = rt->xpart[q];
        used = &rt->xbytes[q];
    }
    wsp_sub *s = (wsp_sub *)((char *)b + b->subs + *used);
    s->fn = task->fn;
    s->kernel = task->kernel;
    s->stmt = task->stmt;
    s->ntiles = (int16_t)task->ntiles;
    s->nscalars = (int16_t)task->nscalars;
    s->ncoords = (int16_t)task->ncoords;
    s->size = (uint16_t)bytes;
    s->index = index;
    wsp_tile *tiles = (wsp_tile *)(s + 1);
    for (int i = 0; i < task->ntiles; i++) tiles[i] = task->tiles[i];
    wsp_scalar *scalars = (wsp_scalar *)(tiles + task->ntiles);
    for (int i = 0; i < task->nscalars; i++) scalars[i] = task->scalars[i];
    int64_t *coords = (int64_t *)(scalars + task->nscalars);
    for (int i = 0; i < task->ncoords; i++) coords[i] = task->coords[i];
    *used += bytes;
    b->count++;
    rt->batch_count++;
    wsp_task *u = &rt->batch_acc;
    for (int i = 0; i < task->ntiles; i++) {
        const wsp_access *a = &task->access[i];
        if (box_empty(a)) continue;  /* conflicts with nothing, so it must not widen the union */
        int k = find_key(u, a);
        if (k < 0) {  /* batch_fits made room */
            u->access[u->ntiles++] = *a;
            continue;
        }
        wsp_access *x = &u->access[k];
        for (int d = 0; d < a->ndim; d++) {
            if (a->lo[d] < x->lo[d]) x->lo[d] = a->lo[d];
            if (a->hi[d] > x->hi[d]) x->hi[d] = a->hi[d];
        }
    }
    if (--rt->batch_left <= 0) {  /* the nest is done: no reason to hold its last batch */
        rt->grain = 1;
        return batch_close(rt);
    }
    return WSP_OK;
}

/* After a batch that went on over order steps: every task of the current step so far is in
 * it, but it also holds tasks of earlier steps, which the step's later tasks must wait for. So
 * the step is split here: the batch's group becomes the barrier of what follows (only more
 * order than the program asks for, never less). */
static void batch_ends_step(wsp_runtime *rt) {
    if (rt->batch_steps == 0 || rt->depth == 0 || rt->batch_depth != rt->depth) return;
    rt->batch_steps = 0;
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    if (!s->current) return;
    wsp_group *g = s->current;
    s->current = NULL;
    group_close(rt, g);
    if (s->barrier) group_unref(rt, s->barrier);
    s->barrier = g;
}

/* A batch with parts on several workers: one node is inferred for all its tasks (the union
 * accesses) and stands for them; it runs nothing itself. When it is ready its parts become
 * ready, each on its own worker (wsp__stage_ready), and as their group it finishes when they
 * all have. Its tasks are independent, so the parts need no order among themselves. */
static int split_close(wsp_runtime *rt, wsp_tasknode *b, int64_t ntasks) {
    wsp_tasknode *s = tasknode_new(rt, BATCH_SUBS);
    wsp_tasknode *tail = b;
    int32_t n = 1;
    for (int32_t q = 0; q < rt->nworkers; q++) {
        wsp_tasknode *p = rt->xpart[q];
        if (!p) continue;
        rt->xpart[q] = NULL;
        tail->parts = p;
        tail = p;
        n++;
    }
    tail->parts = NULL;
    rt->nxparts = 0;
    if (!s) {
        for (wsp_tasknode *p = b, *next; p; p = next) {
            next = p->parts;
            node_free(rt, &p->h);
        }
        return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
    }
    s->fn = NULL;
    s->kernel = b->kernel;
    s->stmt = b->stmt;
    s->ntiles = (int16_t)rt->batch_acc.ntiles;  /* wsp__regs(s) needs room for this many */
    s->nscalars = s->ncoords = 0;
    s->count = 0;  /* its parts count the tasks */
    s->dispatcher = b->dispatcher;
    s->lseq = b->lseq;
    s->nparts = n;
    s->parts = b;
    for (wsp_tasknode *p = b; p; p = p->parts) {
        p->h.group = (wsp_group *)s;  /* only its header is used: a parent's pending count */
        p->seq = rt->seq++;
        p->queue = p->dispatcher % rt->nworkers;
    }
    rt->nbatches += n;
    enqueue(rt, s, &rt->batch_acc, ntasks);
    return WSP_OK;
}

/* Submits the open batch, if any. */
static int batch_close(wsp_runtime *rt) {
    wsp_tasknode *b = rt->batch;
    if (!b) return WSP_OK;
    rt->batch = NULL;
    int64_t ntasks = rt->batch_count;
    rt->batch_count = 0;
    if (rt->nxparts > 0) return split_close(rt, b, ntasks);
    if (b->count == 1) {  /* a batch of one is a plain task: a node of its own size */
        const wsp_sub *s = (const wsp_sub *)((char *)b + b->subs);
        size_t bytes = sizeof(wsp_tasknode) + (size_t)s->ntiles * (sizeof(wsp_tile) + sizeof(wsp_reg)) +
                       (size_t)(s->nscalars + s->ncoords) * 8;
        wsp_tasknode *t = tasknode_new(rt, bytes);
        if (!t) {
            node_free(rt, &b->h);
            return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
        }
        t->fn = s->fn;
        t->kernel = s->kernel;
        t->stmt = s->stmt;
        t->dispatcher = b->dispatcher;
        t->stream = b->stream;
        t->lseq = b->lseq;
        t->ntiles = s->ntiles;
        t->nscalars = s->nscalars;
        t->ncoords = s->ncoords;
        memcpy(wsp__tiles(t), s + 1, s->size - sizeof *s);  /* tiles, scalars, coords */
        node_free(rt, &b->h);
        enqueue(rt, t, &rt->batch_acc, 1);
        batch_ends_step(rt);
        return WSP_OK;
    }
    b->ntiles = (int16_t)rt->batch_acc.ntiles;  /* wsp__regs(b) needs room for this many */
    rt->nbatches++;
    enqueue(rt, b, &rt->batch_acc, b->count);
    batch_ends_step(rt);
    return WSP_OK;
}

/* ---- submit ---------------------------------------------------------------------------------- */

int wsp_submit(wsp_runtime *rt, const wsp_task *task) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_submit called outside wsp_begin ... wsp_wait");
    if ((rc = check_task(rt, task))) return rc;
    if (rt->window > 0 && (rc = window_admit(rt))) return rc;
    int64_t index = enumerated(rt) - rt->run_sub0;  /* the task's number in this run */
    if ((rt->tracing || rt->simlog) && (rc = record(rt, task, index))) return rc;
    if (rt->grain > 1) {
        if ((rc = batch_add(rt, task, index))) return rc;
        return atomic_load_explicit(&rt->err, memory_order_acquire);
    }

    size_t bytes = sizeof(wsp_tasknode) + (size_t)task->ntiles * (sizeof(wsp_tile) + sizeof(wsp_reg)) +
                   (size_t)task->nscalars * sizeof(wsp_scalar) + (size_t)task->ncoords * sizeof(int64_t);
    wsp_tasknode *t = tasknode_new(rt, bytes);
    if (!t) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
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
    return enqueue(rt, t, task, 1);
}

/* ---- schedules, trace, cycle model ------------------------------------------------------- */

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

int wsp_trace_enable(wsp_runtime *rt, int32_t on) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_trace_enable called during a run");
    if (on && !rt->tchunks) {
        rt->tchunks = calloc(WSP_TRACE_MAXCHUNKS, sizeof *rt->tchunks);
        if (!rt->tchunks) return WSP_ERR_INTERNAL;
    }
    rt->trace_on = on != 0;
    return WSP_OK;
}

int64_t wsp_trace_count(const wsp_runtime *rt) { return rt && rt->tracing ? rt->ntrace : 0; }

int64_t wsp_trace_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_trace_event *out) {
    if (!rt || !rt->tracing || rt->running || first < 0 || n <= 0 || !out) return 0;
    int64_t k = 0;
    for (; k < n && first + k < rt->ntrace; k++) out[k] = *wsp__trace_at(rt, first + k);
    return k;
}

int wsp_sim_enable(wsp_runtime *rt, const wsp_machine *m, const wsp_policy *p,
                   const wsp_kcost *costs, int32_t nkernels) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_sim_enable called during a run");
    wsp__simlog_free(rt->simlog);
    rt->simlog = NULL;
    if (!m || !p) return WSP_OK;  /* off */
    if (p->ndispatchers < 1 || nkernels < 0 || (nkernels > 0 && !costs))
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_sim_enable: bad policy or costs");
    rt->simlog = wsp__simlog_new(rt->ntensors, m, p, costs, nkernels);
    return rt->simlog ? WSP_OK : WSP_ERR_INTERNAL;
}

int wsp_sim_shape(wsp_runtime *rt, int32_t tensor, int32_t ndim, const int64_t *dims) {
    if (!rt || !dims) return WSP_ERR_USAGE;
    if (rt->simlog && rt->running) wsp__simlog_shape(rt->simlog, tensor, ndim, dims);
    return WSP_OK;
}

int wsp_sim_summary(const wsp_runtime *rt, wsp_simsummary *out) {
    if (!rt || !out) return WSP_ERR_USAGE;
    memset(out, 0, sizeof *out);
    if (!rt->simlog) return WSP_ERR_USAGE;
    *out = *wsp__simlog_summary(rt->simlog);
    return WSP_OK;
}

int wsp_sim_dispatchers(const wsp_runtime *rt, int32_t first, int32_t n, wsp_simdisp *out) {
    if (!rt || !rt->simlog || !out || first < 0) return 0;
    int32_t nd;
    const wsp_simdisp *d = wsp__simlog_disp(rt->simlog, &nd);
    int32_t k = 0;
    for (; k < n && first + k < nd; k++) out[k] = d[first + k];
    return k;
}

int64_t wsp_sim_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_simresult *out) {
    if (!rt || !rt->simlog || !out || first < 0) return 0;
    int64_t nr;
    const wsp_simresult *r = wsp__simlog_results(rt->simlog, &nr);
    int64_t k = 0;
    for (; k < n && first + k < nr; k++) out[k] = r[first + k];
    return k;
}

/* ---- data-dependent enumeration: wsp_await ---------------------------------------------------- */

/* Whether the open batch holds a task the await on acc waits for: one writing a box that
 * overlaps acc's (its union boxes), or for a WRITE-mode await also one reading it. */
static int batch_conflicts(const wsp_runtime *rt, const wsp_access *acc) {
    const wsp_task *u = &rt->batch_acc;
    int32_t modes = (acc->mode & WSP_WRITE) ? WSP_READWRITE : WSP_WRITE;
    for (int i = 0; i < u->ntiles; i++) {
        const wsp_access *x = &u->access[i];
        if (x->tensor != acc->tensor || !(x->mode & modes) || x->ndim != acc->ndim) continue;
        int over = 1;
        for (int d = 0; d < x->ndim && over; d++)
            over = x->lo[d] < acc->hi[d] && acc->lo[d] < x->hi[d] && acc->lo[d] < acc->hi[d];
        if (over) return 1;
    }
    return 0;
}

/* Every wsp_await of the run passes here once, before the host decides whether to block (the
 * model must not depend on host timing): the tensor and box (acc) and the enumeration index, the
 * number of tasks enumerated before the await. */
static void note_await(wsp_runtime *rt, const wsp_access *acc, int64_t index) {
    /* cycle model: simlog hook (see simlog.c) */
    if (rt->simlog) wsp__simlog_await(rt->simlog, acc, index);
}

/* A waiter: a node that is never dispatched, with an edge from each unfinished writer. The
 * pending guard (as in enqueue) keeps writers that finish meanwhile from completing it early;
 * once the guard is dropped the waiter belongs to whoever brings its count to zero: this thread
 * (then it is recycled here) or the worker finishing the last writer (dispatch.c, waiter_done),
 * which hands it back like a finished task, so it is never freed while a writer's successor list
 * still links one of its edges, even when an error ends the wait early. */
static int await_block(wsp_runtime *rt, const wsp_access *acc) {
    wsp_tasknode *w = tasknode_new(rt, sizeof(wsp_tasknode));
    if (!w) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
    w->h.kind = WSP_NODE_WAITER;
    w->count = 0;
    w->seq = rt->seq++;
    int64_t id = (int64_t)w->seq;
    int64_t ndeps = rt->ndeps;
    wsp__deps_writers(rt, acc, w);
    rt->ndeps = ndeps;  /* the statistic counts edges between tasks */
    int release = WSP_PENDING_GUARD - w->nedges;
    if (w->nedges == 0 ||
        atomic_fetch_sub_explicit(&w->h.pending, release, memory_order_acq_rel) == release) {
        wsp__recycle(rt, &w->h);  /* every writer finished meanwhile (acquire: their stores) */
        return atomic_load_explicit(&rt->err, memory_order_acquire);
    }
    /* the writers may sit among ready tasks not yet shown to the workers */
    wsp__flush_all(rt);
    /* it returns after an acquire load of await_done == id (the acquire the caller's reads
     * need: no fence, which ThreadSanitizer could not check), or on an error */
    wsp__submitter_wait(rt, WSP_WAIT_AWAIT, id);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

int wsp_await(wsp_runtime *rt, const wsp_access *acc) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_await called outside wsp_begin ... wsp_wait");
    if ((rc = wsp__deps_await_check(rt, acc, "wsp_await"))) return rc;
    /* a task of the open batch must be submitted to be waited for; otherwise the batch stays */
    if (rt->batch && batch_conflicts(rt, acc) && (rc = batch_close(rt))) return rc;
    note_await(rt, acc, enumerated(rt) - rt->run_sub0);
    if (wsp__deps_writers(rt, acc, NULL) == 0) return WSP_OK;  /* the fast path: no allocation */
    return await_block(rt, acc);
}

/* wsp_await's question without the wait and without a gate in the model. A poll loop of probes
 * must make progress, so a positive answer shows the workers any ready task still staged. */
int wsp_probe(wsp_runtime *rt, const wsp_access *acc) {
    if (!rt) return -WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return -rc;
    if (!rt->running)
        return -wsp_fail(rt, WSP_ERR_USAGE, "wsp_probe called outside wsp_begin ... wsp_wait");
    if ((rc = wsp__deps_await_check(rt, acc, "wsp_probe"))) return -rc;
    if (rt->batch && batch_conflicts(rt, acc) && (rc = batch_close(rt))) return -rc;
    if (wsp__deps_writers(rt, acc, NULL) == 0) return 0;
    wsp__flush_all(rt);
    return 1;
}

/* ---- wait and statistics --------------------------------------------------------------------- */

int wsp_wait(wsp_runtime *rt) {
    if (!rt) return WSP_ERR_USAGE;
    if (!rt->running) return atomic_load_explicit(&rt->err, memory_order_acquire);
    batch_close(rt);
    rt->grain = 1;
    rt->batch_left = 0;
    /* forked contexts still live (an enumerator that returned early) end here; the usage check
     * below counts the scopes of context 0 only */
    ctx_end_all(rt);
    int32_t open = rt->depth;
    while (rt->depth > 0) scope_pop(rt);
    wsp__flush_all(rt);
    /* the log is complete once enumeration is: the model replays it while the workers finish
     * the real run, on the thread that would otherwise sleep */
    if (rt->simlog && atomic_load_explicit(&rt->err, memory_order_acquire) == 0) {
        char msg[256];
        int rc = wsp__simlog_replay(rt->simlog, rt->tracing, msg, sizeof msg);
        if (rc) wsp__failf(rt, rc, "cycle model: %s", rc == WSP_ERR_INTERNAL ? "out of memory" : msg);
    }
    wsp__submitter_wait(rt, WSP_WAIT_ALL, 0);
    wsp__drain(rt, INT64_MAX);
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
