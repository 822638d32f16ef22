/* trace.c: what a run records besides its results, for Python to read after wsp_wait: the
 * trace (wsp_trace_enable: an event per task, whose start and end the worker that ran it
 * writes, dispatch.c), the run's notes (wsp_note), and the cycle model's log and replay
 * (wsp_sim_enable ... wsp_sim_read: the runtime's side of simlog.c and sim.c). wsp__record
 * writes a submitted task's trace event and log entry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

/* The trace's event and the cycle model's log entry of task `index` of the run. */
int wsp__record(wsp_runtime *rt, const wsp_task *task, int64_t index) {
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
        int rc = wsp__simlog_add(rt->simlog, task, d, st);
        if (rc == WSP_ERR_RECORDS)  /* program.py reads this message: keep them in step */
            return wsp__failf(rt, WSP_ERR_RECORDS, "cycle model limit: %s at statement %d after %lld tasks",
                              wsp__simlog_over(rt->simlog) == 2 ? "tasks" : "memory", task->stmt,
                              (long long)index);
        if (rc == WSP_ERR_USAGE)
            return wsp__failf(rt, WSP_ERR_USAGE, "task device %d outside the cycle model's %d devices",
                              (int)task->device, (int)(rt->simlog->m.devices > 1 ? rt->simlog->m.devices : 1));
        if (rc == WSP_ERR_DEPS)  /* program.py reads this message too */
            return wsp_fail(rt, WSP_ERR_DEPS, rt->simlog->deps_msg);
        if (rc) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (cycle model log)");
    }
    return WSP_OK;
}

/* ---- the trace ------------------------------------------------------------------------------ */

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

/* ---- dependency edges (traced runs only) ----------------------------------------------------- */

/* Appends the pair (a, b) to links[k]; past the bound an edge is counted, not kept. */
static void add_link(wsp_runtime *rt, int k, int64_t a, int64_t b) {
    if (rt->ntlinks[k] >= WSP_TRACE_MAXLINKS ||
        (rt->ntlinks[k] == rt->captlinks[k] &&
         wsp__grow((void **)&rt->tlinks[k], &rt->captlinks[k], rt->ntlinks[k] + 1, 2 * sizeof(int64_t)))) {
        if (k == WSP_LINKS_EDGES) rt->tlinks_dropped++;
        return;  /* decision: a trace without some arrows beats a failed run */
    }
    int64_t *p = rt->tlinks[k] + 2 * rt->ntlinks[k]++;
    p[0] = a;
    p[1] = b;
}

void wsp__trace_edge(wsp_runtime *rt, const wsp_node *pred, const wsp_tasknode *t) {
    /* a barrier (group) or a waiter (wsp_await) is no task of the trace */
    if (pred->kind != WSP_NODE_TASK || t->h.kind != WSP_NODE_TASK) return;
    add_link(rt, WSP_LINKS_EDGES, ((const wsp_tasknode *)pred)->lseq, t->lseq);
}

void wsp__trace_batch(wsp_runtime *rt, const wsp_tasknode *t, int64_t ntasks) {
    if (t->h.kind == WSP_NODE_TASK) add_link(rt, WSP_LINKS_BATCHES, t->lseq, ntasks);
}

int64_t wsp_trace_links(const wsp_runtime *rt, int32_t what, int64_t first, int64_t n,
                        int64_t *out) {
    if (!rt || !rt->tracing || rt->running || first < 0) return 0;
    if (what == WSP_LINKS_DROPPED) return rt->tlinks_dropped;
    if (what == WSP_LINKS_MODEL)
        return rt->simlog ? wsp__simlog_edges(rt->simlog, first, out ? n : -1, out) : 0;
    if (what != WSP_LINKS_EDGES && what != WSP_LINKS_BATCHES) return 0;
    int64_t have = rt->ntlinks[what];
    if (!out) return have;
    if (n <= 0 || first >= have) return 0;
    if (n > have - first) n = have - first;
    memcpy(out, rt->tlinks[what] + 2 * first, (size_t)n * 2 * sizeof *out);
    return n;
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
    n[0] = wsp__enumerated(rt) - rt->run_sub0;  /* the index the next submitted task gets */
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

/* ---- the cycle model ------------------------------------------------------------------------ */

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

int wsp_sim_limit(wsp_runtime *rt, int64_t bytes) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_sim_limit called during a run");
    if (rt->simlog) wsp__simlog_limit(rt->simlog, bytes);
    return WSP_OK;
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
