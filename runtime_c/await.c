/* await.c: data-dependent enumeration. wsp_await blocks the enumerator until every unfinished
 * task writing a box that overlaps the awaited one (and, when the await's mode has WSP_WRITE,
 * reading it) has finished, so that it can read elements earlier tasks of the same run write (a
 * router's indices driving expert tasks); wsp_probe asks the same without waiting. Every await
 * is also an enumeration gate of the cycle model (wsp__simlog_await), whether or not the host
 * blocks.
 */
#include "wsp_internal.h"

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
 * pending guard (as in wsp__enqueue) keeps writers that finish meanwhile from completing it early;
 * once the guard is dropped the waiter belongs to whoever brings its count to zero: this thread
 * (then it is recycled here) or the worker finishing the last writer (dispatch.c, waiter_done),
 * which hands it back like a finished task, so it is never freed while a writer's successor list
 * still links one of its edges, even when an error ends the wait early. */
static int await_block(wsp_runtime *rt, const wsp_access *acc) {
    wsp_tasknode *w = wsp__tasknode_new(rt, sizeof(wsp_tasknode));
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
    if (rt->batch && batch_conflicts(rt, acc) && (rc = wsp__batch_close(rt))) return rc;
    note_await(rt, acc, wsp__enumerated(rt) - rt->run_sub0);
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
    if (rt->batch && batch_conflicts(rt, acc) && (rc = wsp__batch_close(rt))) return -rc;
    if (wsp__deps_writers(rt, acc, NULL) == 0) return 0;
    wsp__flush_all(rt);
    /* a poll loop waits for workers: a start policy must not hold them back (graph.c) */
    if (atomic_load_explicit(&rt->graph_on, memory_order_relaxed)) wsp__graph_start(rt);
    return 1;
}
