/* batch.c: batches (wsp_batch). After wsp_batch announces a loop nest of n tasks, consecutive
 * submissions are packed, up to `grain` of them, into one runtime task: a node holding their
 * wsp_sub records, which one worker runs in submission order. Dependencies are inferred on the
 * union of the batch's boxes per tensor and mode: coarser, never reordering. A batch of a nest
 * announced independent may hold tasks of several worker queues; it is then split into one part
 * per worker, which run in parallel (split_close). A batch may go on over the steps of its
 * order scope (wsp_order_next keeps the barriers it passes); when it closes it splits the step
 * it ends in (batch_ends_step). Submitter only.
 */
#include <string.h>

#include "wsp_internal.h"

/* A batch node: the header, room for the tiles and registrations of up to WSP_MAX_TILES union
 * accesses (wsp__regs follows tiles[ntiles]), then the wsp_sub records. */
#define BATCH_SUBS ((sizeof(wsp_tasknode) + WSP_MAX_TILES * (sizeof(wsp_tile) + sizeof(wsp_reg)) + 7) / 8 * 8)

int wsp_batch(wsp_runtime *rt, int64_t ntasks, int64_t grain, int32_t flags) {
    if (!rt) return WSP_ERR_USAGE;
    int rc = atomic_load_explicit(&rt->err, memory_order_acquire);
    if (rc) return rc;
    if (!rt->running)
        return wsp_fail(rt, WSP_ERR_USAGE, "wsp_batch called outside wsp_begin ... wsp_wait");
    if ((rc = wsp__batch_close(rt))) return rc;
    /* graph.c orders and places single tasks: a run with task-graph knobs has no batches */
    if (atomic_load_explicit(&rt->graph_on, memory_order_relaxed)) return WSP_OK;
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
    wsp_tasknode *b = wsp__tasknode_new(rt, BATCH_SUBS + WSP_BATCH_BYTES);
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

int wsp__batch_add(wsp_runtime *rt, const wsp_task *task, int64_t index) {
    size_t bytes = sizeof(wsp_sub) + (size_t)task->ntiles * sizeof(wsp_tile) +
                   (size_t)(task->nscalars + task->ncoords) * 8;
    int rc;
    if (rt->batch && !batch_fits(rt, task, bytes) && (rc = wsp__batch_close(rt))) return rc;
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
        return wsp__batch_close(rt);
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
    wsp__group_close(rt, g);
    if (s->barrier) wsp__group_unref(rt, s->barrier);
    s->barrier = g;
}

/* A batch with parts on several workers: one node is inferred for all its tasks (the union
 * accesses) and stands for them; it runs nothing itself. When it is ready its parts become
 * ready, each on its own worker (wsp__stage_ready), and as their group it finishes when they
 * all have. Its tasks are independent, so the parts need no order among themselves. */
static int split_close(wsp_runtime *rt, wsp_tasknode *b, int64_t ntasks) {
    wsp_tasknode *s = wsp__tasknode_new(rt, BATCH_SUBS);
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
            wsp__node_free(rt, &p->h);
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
    wsp__enqueue(rt, s, &rt->batch_acc, ntasks);
    return WSP_OK;
}

/* Submits the open batch, if any. */
int wsp__batch_close(wsp_runtime *rt) {
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
        wsp_tasknode *t = wsp__tasknode_new(rt, bytes);
        if (!t) {
            wsp__node_free(rt, &b->h);
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
        wsp__node_free(rt, &b->h);
        wsp__enqueue(rt, t, &rt->batch_acc, 1);
        batch_ends_step(rt);
        return WSP_OK;
    }
    b->ntiles = (int16_t)rt->batch_acc.ntiles;  /* wsp__regs(b) needs room for this many */
    rt->nbatches++;
    wsp__enqueue(rt, b, &rt->batch_acc, b->count);
    batch_ends_step(rt);
    return WSP_OK;
}
