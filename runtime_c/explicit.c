/* explicit.c: `.task_graph(deps = explicit)`, the check that the order a program declares
 * implies every dependency the tasks' accesses imply (docs/schedules.md, "The task graph").
 *
 * The declared order is what the language states about order itself: the steps of order scopes
 * (`P.seq`, `sequential`: a task waits for the previous step of its scope, which waited for the
 * one before, and so on out through the enclosing scopes) and the order of one stream. The check
 * runs in the cycle model's log (simlog.c), which infers dependencies in enumeration order
 * without host timing, so a run reports the same first undeclared dependency every time, and it
 * runs as each task is logged: before the task is handed to the runtime. The runtime itself
 * still infers and keeps every edge, so the tasks enumerated before the report never race.
 *
 * The log's inference is exact while a tensor's boxes are tiles of one shape, and coarser after
 * (simlog.c: one record for the whole tensor). So a predecessor counts only when one of its
 * boxes really overlaps one of t's boxes of that tensor, one of the two writing: the check never
 * reports a dependency that is not there. (It may then miss one through such a tensor, whose
 * order the runtime still keeps: a miss is a missed report, never a race.)
 *
 * p is declared before t when both are in one stream, or when p is in a step group on t's chain
 * of barriers: t's barrier B (the previous step of its innermost scope), then the barrier B's
 * tasks waited for (gbar[B], recorded when B was made), and so on. The chain's groups closed one
 * after another, so the walk stops at the first group closed before p was logged. A stream
 * order followed by a step order (or the reverse) is not followed: such a pair is reported.
 *
 * Named edges (`after`, lower/edges.py). A task handle's order tensor (the policy's last
 * edge_tensors tensors) has a box per task of the handle, which the tasks whose `after` names
 * it read: a dependency through it IS a named edge, declared by definition. A task's named
 * predecessors are those whose box of such a tensor overlaps one of its own (found among its
 * predecessors, whichever tensor the log found them through first: it keeps one entry per
 * predecessor); they are kept per task. p is then also declared before t when p is one of
 * them, or is declared before one of them (by a step, a stream, or again a named edge): a walk
 * back from t over named edges, which visits only tasks logged after p (edges go forward) and
 * each at most once. A chain in which a step or a stream's order FOLLOWS a named edge (p named
 * by q, q a step before t) is not followed: such a pair is reported, as the mixed chains above.
 */
#include <stdio.h>
#include <string.h>

#include "wsp_internal.h"

struct wsp_simwho {
    int32_t stmt, ncoords;
    int64_t coords[WSP_MAX_COORDS];
};

int wsp__explicit_note(wsp_simlog *l, int64_t from, int32_t tensor) {
    if (l->npreds > from &&
        wsp__grow((void **)&l->ptens, &l->capptens, l->npreds, sizeof *l->ptens))
        return -1;
    for (int64_t i = from; i < l->npreds; i++) l->ptens[i] = tensor;
    return 0;
}

/* the order-scope entry of task k (entries are in task order), or NULL when k is in none */
static const wsp_simmemb *memb_of(const wsp_simlog *l, int64_t k) {
    int64_t lo = 0, hi = l->nmemb;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (l->memb[mid].task < k) lo = mid + 1;
        else hi = mid;
    }
    return lo < l->nmemb && l->memb[lo].task == k ? &l->memb[lo] : NULL;
}

static int declared(const wsp_simlog *l, int32_t p, int32_t stream, int32_t barrier) {
    if (stream >= 0 && l->tasks[p].stream == stream) return 1;
    const wsp_simmemb *mp = barrier >= 0 ? memb_of(l, p) : NULL;
    if (!mp) return 0;
    for (int32_t b = barrier; b >= 0 && b < l->capgbar; b = l->gbar[b]) {
        if (l->groups[b].close <= p) return 0;  /* closed before p: so were the older ones */
        for (int32_t g = mp->group; g >= 0; g = l->groups[g].parent)
            if (g == b) return 1;
    }
    return 0;
}

static int is_edge(const wsp_simlog *l, int32_t tensor) {
    return l->p.edge_tensors > 0 && tensor >= l->ntensors - l->p.edge_tensors;
}

/* whether task p has a box of `tensor` that overlaps one of t's (`task`), one of them writing */
static int conflicts(const wsp_simlog *l, int32_t p, const wsp_task *task, int32_t tensor) {
    for (int64_t i = l->accat[p]; i < l->accat[p + 1]; i++) {
        const wsp_access *a = &l->acc[i];
        if (a->tensor != tensor) continue;
        for (int32_t j = 0; j < task->ntiles; j++) {
            const wsp_access *b = &task->access[j];
            if (b->tensor != tensor || !((a->mode | b->mode) & WSP_WRITE)) continue;
            int overlap = 1;
            for (int32_t d = 0; d < a->ndim && d < b->ndim && overlap; d++)
                overlap = a->lo[d] < b->hi[d] && b->lo[d] < a->hi[d] && a->lo[d] < a->hi[d] &&
                          b->lo[d] < b->hi[d];
            if (overlap) return 1;
        }
    }
    return 0;
}

/* whether p is a named predecessor of the task: a box of p on an order tensor overlaps one of
 * the task's (the tensor the log found p through may be another: it keeps one entry) */
static int named_by(const wsp_simlog *l, int32_t p, const wsp_task *task) {
    for (int32_t j = 0; j < task->ntiles; j++) {
        int32_t e = task->access[j].tensor;
        if (is_edge(l, e) && conflicts(l, p, task, e)) return 1;
    }
    return 0;
}

/* whether p is declared before a task whose named predecessors are named[from .. to): one of
 * them is p, or p is declared before one of them (walking back over named edges) */
static int reached(wsp_simlog *l, int32_t p, int64_t from, int64_t to) {
    int64_t n = 0, walk = ++l->walks;
    for (int64_t i = from; i < to; i++) {
        if (wsp__grow((void **)&l->stack, &l->capstack, n + 1, sizeof *l->stack)) return -1;
        l->stack[n++] = l->named[i];
    }
    while (n > 0) {
        int32_t q = l->stack[--n];
        if (q == p) return 1;
        if (q < p || l->seen[q] == walk) continue;  /* edges go forward: q < p never leads to p */
        l->seen[q] = walk;
        const wsp_simmemb *mq = memb_of(l, q);
        if (declared(l, p, l->tasks[q].stream, mq ? mq->barrier : -1)) return 1;
        for (int64_t i = l->namedat[q]; i < l->namedat[q + 1]; i++) {
            if (wsp__grow((void **)&l->stack, &l->capstack, n + 1, sizeof *l->stack)) return -1;
            l->stack[n++] = l->named[i];
        }
    }
    return 0;
}

static int coords_text(char *out, size_t n, int32_t ncoords, const int64_t *coords) {
    int len = 0;
    for (int32_t i = 0; i < ncoords && (size_t)len < n; i++)
        len += snprintf(out + len, n - (size_t)len, "%s%lld", i ? ", " : "", (long long)coords[i]);
    return len;
}

int wsp__explicit_check(wsp_simlog *l, const wsp_task *task, int64_t first, int32_t stream) {
    int64_t t = l->ntasks;
    if (wsp__grow((void **)&l->who, &l->capwho, t + 1, sizeof *l->who)) return WSP_ERR_INTERNAL;
    struct wsp_simwho *w = &l->who[t];
    w->stmt = task->stmt;
    w->ncoords = task->ncoords;
    memcpy(w->coords, task->coords, sizeof w->coords);
    if (t == 0) l->nacc = l->nnamed = 0;  /* a new run */
    if (wsp__grow((void **)&l->accat, &l->capaccat, t + 2, sizeof *l->accat) ||
        wsp__grow((void **)&l->acc, &l->capacc, l->nacc + task->ntiles, sizeof *l->acc))
        return WSP_ERR_INTERNAL;
    l->accat[t] = l->nacc;
    l->accat[t + 1] = l->nacc;  /* its boxes are added once it passes */
    int32_t barrier = -1;
    if (l->depth > 0 && l->nmemb > 0 && l->memb[l->nmemb - 1].task == t)
        barrier = l->memb[l->nmemb - 1].barrier;
    /* the named predecessors (`after`), kept for the tasks after this one */
    int64_t n0 = l->nnamed;
    int names = 0;
    for (int32_t j = 0; j < task->ntiles && !names; j++) names = is_edge(l, task->access[j].tensor);
    if (wsp__grow((void **)&l->namedat, &l->capnamedat, t + 2, sizeof *l->namedat) ||
        wsp__grow((void **)&l->seen, &l->capseen, t + 1, sizeof *l->seen))
        return WSP_ERR_INTERNAL;
    l->seen[t] = 0;
    for (int64_t i = first; i < l->npreds && names; i++) {
        int32_t p = l->preds[i];
        if (!named_by(l, p, task)) continue;
        if (wsp__grow((void **)&l->named, &l->capnamed, l->nnamed + 1, sizeof *l->named))
            return WSP_ERR_INTERNAL;
        l->named[l->nnamed++] = p;
    }
    for (int64_t i = first; i < l->npreds; i++) {
        int32_t p = l->preds[i];
        if (is_edge(l, l->ptens[i]) || declared(l, p, stream, barrier) ||
            !conflicts(l, p, task, l->ptens[i]))
            continue;
        int r = l->nnamed > n0 ? reached(l, p, n0, l->nnamed) : 0;
        if (r < 0) return WSP_ERR_INTERNAL;
        if (r) continue;
        char ct[200], cp[200];
        coords_text(ct, sizeof ct, w->ncoords, w->coords);
        coords_text(cp, sizeof cp, l->who[p].ncoords, l->who[p].coords);
        snprintf(l->deps_msg, sizeof l->deps_msg,
                 "undeclared dependency: statement %d [%s] on statement %d [%s] through tensor %d",
                 w->stmt, ct, l->who[p].stmt, cp, l->ptens[i]);
        l->npreds = first;  /* the task is not logged */
        l->nnamed = n0;
        return WSP_ERR_DEPS;
    }
    l->namedat[t] = n0;
    l->namedat[t + 1] = l->nnamed;
    if (task->ntiles > 0)
        memcpy(&l->acc[l->nacc], task->access, (size_t)task->ntiles * sizeof *l->acc);
    l->nacc += task->ntiles;
    l->accat[t + 1] = l->nacc;
    return WSP_OK;
}
