/* sim_setup.c: the cycle model's inputs turned into its starting state (sim.c's THE MODEL
 * defines what the state means and runs it): the machine, policy and cost table checked; one
 * pass over the tasks that validates them, threads each task's successors through the edges,
 * sizes the ready queues and kernel FIFOs and computes the critical path, serial cycles and
 * work; the enumeration gates (wsp_await) and order-scope barriers as extra edges, with their
 * part of the critical path; the tasks ready at 0 queued. Also the replay's working memory
 * (kept between replays by the runtime's log) and the entry points: wsp_sim_replay(_gated) and
 * the log's wsp__sim_replay_ws.
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

static int sim_fail(char *err, int32_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)errlen, fmt, ap);
        va_end(ap);
    }
    return WSP_ERR_USAGE;
}

/* ---- working memory ---------------------------------------------------------------------------
 * One buffer per array, grown (never shrunk) on demand and kept in the wsp_simws between
 * replays: the simlog replays after every run, and mapping and faulting in tens of MB afresh
 * each time would cost more than the replay itself. Nothing is carried over but the memory. */

void wsp__simws_free(wsp_simws *w) {
    if (!w) return;
    for (int b = 0; b < B_COUNT; b++) free(w->buf[b]);
    free(w);
}

/* buffer b with room for max(n, 1) elements of `size` bytes (contents undefined), or NULL */
void *wsp__simws_get(wsp_simws *w, int b, int64_t n, size_t size) {
    if (n <= 0) n = 1;
    if ((uint64_t)n > SIZE_MAX / size) return NULL;
    size_t need = (size_t)n * size;
    if (need > w->cap[b]) {
        free(w->buf[b]);
        w->buf[b] = malloc(need);
        w->cap[b] = w->buf[b] ? need : 0;
    }
    return w->buf[b];
}

/* the same, its first max(n, 1) elements zeroed */
static void *ws_zget(wsp_simws *w, int b, int64_t n, size_t size) {
    void *p = wsp__simws_get(w, b, n, size);
    if (p) memset(p, 0, (size_t)(n > 0 ? n : 1) * size);
    return p;
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

static void bits_fill(uint64_t *bits, int64_t n) {
    for (int64_t w = 0; w * 64 < n; w++)
        bits[w] = (n - w * 64 >= 64) ? ~UINT64_C(0) : ((UINT64_C(1) << (n - w * 64)) - 1);
}

/* ---- setup ----------------------------------------------------------------------------------- */

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
    if (m->devices < 0 || (m->devices > 1 && p->ndispatchers % m->devices != 0))
        return sim_fail(err, errlen, "cycle model: %d dispatchers do not split over %d devices",
                        (int)p->ndispatchers, (int)m->devices);
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
    if (p->timing_first != 0 &&
        (p->timing != WSP_TIMING_INTERLEAVED || p->timing_first < 0 ||
         p->timing_first >= p->nstreams))
        return sim_fail(err, errlen, "cycle model: interleaved priority stream %" PRId64
                        " is not one of the %d streams", p->timing_first, (int)p->nstreams);
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
        if (costs[i].unit != WSP_UNIT_VECTOR && costs[i].unit != WSP_UNIT_CUBE &&
            costs[i].unit != WSP_UNIT_COMM)
            return sim_fail(err, errlen, "cycle model: kernel %d has unit %d (not 0, 1 or 2)",
                            (int)i, (int)costs[i].unit);
        if (costs[i].cycles < 0)
            return sim_fail(err, errlen, "cycle model: kernel %d has negative cycles %" PRId64,
                            (int)i, costs[i].cycles);
        if (costs[i].latency < 0 || costs[i].latency > costs[i].cycles ||
            (costs[i].latency != 0 && costs[i].unit != WSP_UNIT_COMM))
            return sim_fail(err, errlen, "cycle model: kernel %d has latency %d (0 .. its %"
                            PRId64 " cycles, and only on the comm unit)", (int)i,
                            (int)costs[i].latency, costs[i].cycles);
    }
    if (ntasks < 0 || ntasks >= INT32_MAX || (ntasks > 0 && !tasks))
        return sim_fail(err, errlen, "cycle model: bad task count %" PRId64 " (0 .. 2^31 - 2)",
                        ntasks);
    return WSP_OK;
}

/* The first malformed field of task k, in the order the checks are documented (a task-field
 * error is found by one combined test per task; this says which). */
static int task_error(const wsp_policy *p, int32_t nkernels, int64_t k, const wsp_simtask *tk,
                      char *err, int32_t errlen) {
    if (tk->kernel < 0 || tk->kernel >= nkernels)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has kernel %d of %d", k,
                        (int)tk->kernel, (int)nkernels);
    if (tk->dispatcher < 0 || tk->dispatcher >= p->ndispatchers)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has dispatcher %d of %d", k,
                        (int)tk->dispatcher, (int)p->ndispatchers);
    if (tk->stream < -1 || tk->stream >= p->nstreams)
        return sim_fail(err, errlen, "cycle model: task %" PRId64 " has stream %d of %d", k,
                        (int)tk->stream, (int)p->nstreams);
    return sim_fail(err, errlen, "cycle model: task %" PRId64 " has %d predecessors", k,
                    (int)tk->npreds);
}

/* What one pass over the tasks finds besides the per-task arrays. */
typedef struct scan_out {
    int64_t npreds, serial, work[2], comm, cp_max;
    unsigned used;             /* units (bit u) that tasks need */
    int missing_preds;         /* a task has predecessors, but there is no array */
    int64_t bad_task, bad_pred;/* the first predecessor out of range: task, predecessor; or -1 */
    int64_t nready0;           /* tasks without predecessors, listed in ready0 */
} scan_out;

/* One pass over the tasks, in order:
 *   - fields in range (the first bad one is reported at once);
 *   - serial and work: each a sum of terms below SIM_TIME_LIMIT that stops as soon as it passes
 *     it, so never overflows (`checked` only if some task could make them pass it);
 *   - tasks per kernel and per ready queue (the slices' sizes);
 *   - predecessors: a bad one is only recorded (it is reported after the checks that come before
 *     it); each edge is appended to its predecessor's successor list (allocated at the first
 *     edge), so every list comes out in increasing task order with no second pass;
 *   - pending counts, stream links, the tasks without predecessors (listed in ready0, if given)
 *     and the critical path (in tkey; gate_cp adds the gates' part).
 * p64 or p32 is the predecessor array: each caller's loop is compiled for its width. */
static inline __attribute__((always_inline)) int
scan_tasks(sim *S, const wsp_policy *p, int32_t nkernels, const int64_t *p64, const int32_t *p32,
           int64_t npreds_cap, sim_idx *ready0, int64_t *last, scan_out *o, char *err,
           int32_t errlen, const int checked) {
    const wsp_simtask *tasks = S->tasks;
    const wsp_kcost *costs = S->costs;
    const int64_t cc = S->cc, dc = S->dc, ntasks = S->ntasks;
    const uint32_t nk32 = (uint32_t)nkernels, nd32 = (uint32_t)p->ndispatchers,
                   ns32 = (uint32_t)p->nstreams;
    const int havep = p64 || p32;
    /* locals, not S's fields: the stores to the int64 arrays could reach those */
    const int64_t C = S->C;
    sim_fifo *const kq = S->kq;
    sim_queue *const q = S->q;
    sim_idx *const snext = S->snext;
    int64_t *const tkey = S->tkey, cpm = 0, serial = 0, work[3] = {0, 0, 0}, off = 0;
    const int64_t ndpd = S->ndpd, nqd = S->nqd;
    sim_idx *shead = NULL, *stail = NULL, *enext = NULL, *eto = NULL;
    uint32_t *const state = S->state;
    unsigned used = 0;
    for (int64_t k = 0; k < ntasks; k++) {
        const wsp_simtask *tk = &tasks[k];
        if (((uint32_t)tk->kernel >= nk32) | ((uint32_t)tk->dispatcher >= nd32) |
            ((uint32_t)tk->stream + 1u > ns32) | ((uint32_t)tk->npreds >= (uint32_t)INT32_MAX))
            return task_error(p, nkernels, k, tk, err, errlen);
        const wsp_kcost *kc = &costs[tk->kernel];
        int u = kc->unit;
        used |= 1u << u;
        if (checked) {
            if (kc->cycles > SIM_TIME_LIMIT)
                return sim_fail(err, errlen, "cycle model: cycle counts overflow");
            work[u] += kc->cycles - kc->latency;
            serial += (u == WSP_UNIT_COMM ? 0 : dc) + cc + kc->cycles;
            if (serial > SIM_TIME_LIMIT || work[u] > SIM_TIME_LIMIT)
                return sim_fail(err, errlen, "cycle model: cycle counts overflow");
        } else {
            work[u] += kc->cycles - kc->latency;   /* a comm engine's busy time */
            serial += (u == WSP_UNIT_COMM ? 0 : dc) + cc + kc->cycles;
        }
        kq[tk->kernel].tail++;
        if (u == WSP_UNIT_COMM) {   /* its device's comm queue (a multi run) */
            q[nqd + tk->dispatcher / ndpd].tail++;
        } else {
            int64_t c = C == 1 ? 0 : tk->stream < 0 ? C - 1 : tk->stream;   /* task_class */
            q[(tk->dispatcher * C + c) * 2 + u].tail++;
        }
        int64_t base = 0;
        if (shead) shead[k] = -1;
        if (tk->npreds > 0) {
            if (!havep) {
                o->missing_preds = 1;
            } else {
                if (!shead) {
                    shead = S->shead = wsp__simws_get(S->ws, B_SHEAD, ntasks, sizeof *shead);
                    stail = wsp__simws_get(S->ws, B_STAIL, ntasks, sizeof *stail);
                    enext = S->enext = wsp__simws_get(S->ws, B_ENEXT, npreds_cap, sizeof *enext);
                    eto = S->eto = wsp__simws_get(S->ws, B_ETO, npreds_cap, sizeof *eto);
                    if (!shead || !stail || !enext || !eto) return WSP_ERR_INTERNAL;
                    for (int64_t i = 0; i <= k; i++) shead[i] = -1;
                }
                for (int32_t i = 0; i < tk->npreds; i++) {
                    int64_t e = off + i, j = p32 ? p32[e] : p64[e];
                    if (j < 0 || j >= k) {
                        if (o->bad_task < 0) {
                            o->bad_task = k;
                            o->bad_pred = j;
                        }
                        continue;
                    }
                    if (tkey[j] + cc > base) base = tkey[j] + cc;
                    /* edge e: appended to j's list */
                    eto[e] = (sim_idx)k;
                    enext[e] = -1;
                    if (shead[j] < 0) shead[j] = (sim_idx)e;
                    else enext[stail[j]] = (sim_idx)e;
                    stail[j] = (sim_idx)e;
                }
            }
        }
        off += tk->npreds;
        uint32_t pending = (uint32_t)tk->npreds;
        if (snext) {
            snext[k] = -1;
            if (tk->stream >= 0) {
                int64_t j = last[tk->stream];
                if (j >= 0) {
                    if (tkey[j] + cc > base) base = tkey[j] + cc;
                    snext[j] = (sim_idx)k;
                    pending++;
                }
                last[tk->stream] = k;
            }
        }
        state[k] = pending;
        if (ready0 && pending == 0) ready0[o->nready0++] = (sim_idx)k;
        tkey[k] = base + (u == WSP_UNIT_COMM ? 0 : dc) + kc->cycles;
        if (tkey[k] > cpm) cpm = tkey[k];
    }
    o->npreds = off;
    o->serial = serial;
    o->work[0] = work[0];
    o->work[1] = work[1];
    o->comm = work[2];
    o->cp_max = cpm;
    o->used = used;
    return WSP_OK;
}

/* Checks the gates and keeps those that gate something (writers, index < ntasks) in S's gate
 * arrays, their writers copied; *ngw gets the writers kept. */
static int setup_gates(sim *S, int64_t ngates, const wsp_simgate *gates, const int64_t *gw64,
                       const int32_t *gw32, int64_t *ngw, char *err, int32_t errlen) {
    *ngw = 0;
    if (ngates < 0 || (ngates > 0 && !gates))
        return sim_fail(err, errlen, "cycle model: bad gate count %" PRId64, ngates);
    int64_t prev = 0, total = 0, kept = 0, keptw = 0;
    for (int64_t i = 0; i < ngates; i++) {
        const wsp_simgate *g = &gates[i];
        if (g->index < prev || g->index > S->ntasks)
            return sim_fail(err, errlen,
                            "cycle model: gate %" PRId64 " has index %" PRId64 " (gates in "
                            "nondecreasing order, %" PRId64 " .. %" PRId64 ")", i, g->index, prev,
                            S->ntasks);
        if (g->nwriters < 0 || (g->nwriters > 0 && !gw64 && !gw32))
            return sim_fail(err, errlen, "cycle model: gate %" PRId64 " has %d writers%s", i,
                            (int)g->nwriters, g->nwriters > 0 ? " but there is no array" : "");
        for (int64_t j = total; j < total + g->nwriters; j++) {
            int64_t w = gw32 ? gw32[j] : gw64[j];
            if (w < 0 || w >= g->index)
                return sim_fail(err, errlen,
                                "cycle model: gate %" PRId64 " has writer %" PRId64 " (must be "
                                "an earlier task, 0 .. %" PRId64 ")", i, w, g->index - 1);
        }
        total += g->nwriters;
        if (g->nwriters > 0 && g->index < S->ntasks) {
            kept++;
            keptw += g->nwriters;
        }
        prev = g->index;
    }
    if (kept == 0) return WSP_OK;
    if (keptw >= INT32_MAX)
        return sim_fail(err, errlen, "cycle model: too many gate writers (%" PRId64 ")", keptw);
    S->gidx = wsp__simws_get(S->ws, B_GIDX, kept, sizeof *S->gidx);
    S->goff = wsp__simws_get(S->ws, B_GOFF, kept + 1, sizeof *S->goff);
    S->gpend = wsp__simws_get(S->ws, B_GPEND, kept, sizeof *S->gpend);
    S->gw = wsp__simws_get(S->ws, B_GW, keptw, sizeof *S->gw);
    if (!S->gidx || !S->goff || !S->gpend || !S->gw) return WSP_ERR_INTERNAL;
    int64_t n = 0, off = 0;
    total = 0;
    for (int64_t i = 0; i < ngates; i++) {
        const wsp_simgate *g = &gates[i];
        if (g->nwriters > 0 && g->index < S->ntasks) {
            S->gidx[n] = g->index;
            S->goff[n] = off;
            S->gpend[n] = g->nwriters;
            for (int64_t j = total; j < total + g->nwriters; j++)
                S->gw[off++] = (sim_idx)(gw32 ? gw32[j] : gw64[j]);
            n++;
        }
        total += g->nwriters;
    }
    S->goff[n] = off;
    S->ngates = n;
    *ngw = off;
    return WSP_OK;
}

/* The critical path with gates and order scopes: from the first gate on, a task's chain may
 * also start at the completion of any writer of a gate at or before it (the floor), as its
 * enumeration does; and a task waiting for a barrier, at the completion of any task in that
 * group (bcp: the latest cp + completion of the group's tasks so far; every one of them comes
 * before the task). Recomputes cp (tkey) from the first gate or the first task in a scope,
 * after scan_tasks (which checked the tasks and predecessors); a separate pass, so that runs
 * without either pay nothing for it. Returns the new maximum. */
static __attribute__((noinline)) int64_t extra_cp(sim *S, const int64_t *p64, const int32_t *p32,
                                                  int64_t *last, int32_t nstreams, int64_t cpm,
                                                  int64_t nmemb, const wsp_simmemb *memb,
                                                  int64_t *bcp, int64_t ngroups) {
    const int64_t cc = S->cc;
    int64_t g0 = S->ngates > 0 ? S->gidx[0] : S->ntasks;
    if (S->nbar > 0 && memb[0].task < g0) g0 = memb[0].task;
    int64_t *tkey = S->tkey, off = 0, floor = 0, gi = 0, mi = 0;
    for (int64_t g = 0; S->nbar > 0 && g < ngroups; g++) bcp[g] = 0;
    for (int32_t s = 0; s < nstreams; s++) last[s] = -1;
    for (int64_t k = 0; k < S->ntasks; k++) {
        const wsp_simtask *tk = &S->tasks[k];
        int64_t sp = -1;
        if (tk->stream >= 0) {
            sp = last[tk->stream];
            last[tk->stream] = k;
        }
        if (k < g0) {
            off += tk->npreds;
            continue;
        }
        for (; gi < S->ngates && S->gidx[gi] == k; gi++)
            for (int64_t j = S->goff[gi]; j < S->goff[gi + 1]; j++)
                if (tkey[S->gw[j]] + cc > floor) floor = tkey[S->gw[j]] + cc;
        int64_t base = floor;
        for (int32_t i = 0; i < tk->npreds; i++) {
            int64_t j = p32 ? p32[off + i] : p64[off + i];
            if (tkey[j] + cc > base) base = tkey[j] + cc;
        }
        off += tk->npreds;
        if (sp >= 0 && tkey[sp] + cc > base) base = tkey[sp] + cc;
        const wsp_simmemb *mb = S->nbar > 0 && mi < nmemb && memb[mi].task == k ? &memb[mi++]
                                                                                : NULL;
        if (mb && mb->barrier >= 0 && S->bpend[mb->barrier] > 0 && bcp[mb->barrier] > base)
            base = bcp[mb->barrier];
        const wsp_kcost *kc = &S->costs[tk->kernel];
        tkey[k] = base + (kc->unit == WSP_UNIT_COMM ? 0 : S->dc) + kc->cycles;
        if (tkey[k] > cpm) cpm = tkey[k];
        for (int64_t g = mb ? mb->group : -1; g >= 0; g = S->grp[g].parent)
            if (k < S->grp[g].close && tkey[k] + cc > bcp[g]) bcp[g] = tkey[k] + cc;
    }
    return cpm;
}

/* Each gate writer's edge (eto = ~gate, numbered from npreds on) at the end of its successor
 * list, so that the writer counts as having dependents. */
static int gate_edges(sim *S, int64_t npreds, int64_t cap) {
    sim_idx *shead = S->shead, *stail = S->ws->buf[B_STAIL];   /* scan_tasks' lists */
    if (!shead) {   /* no predecessors: the lists hold gate (and order) edges only: cap */
        shead = S->shead = wsp__simws_get(S->ws, B_SHEAD, S->ntasks, sizeof *shead);
        stail = wsp__simws_get(S->ws, B_STAIL, S->ntasks, sizeof *stail);
        S->enext = wsp__simws_get(S->ws, B_ENEXT, cap, sizeof *S->enext);
        S->eto = wsp__simws_get(S->ws, B_ETO, cap, sizeof *S->eto);
        if (!shead || !stail || !S->enext || !S->eto) return WSP_ERR_INTERNAL;
        for (int64_t k = 0; k < S->ntasks; k++) shead[k] = -1;
    }
    int64_t e = npreds;
    for (int64_t i = 0; i < S->ngates; i++)
        for (int64_t j = S->goff[i]; j < S->goff[i + 1]; j++, e++) {
            int64_t w = S->gw[j];
            S->eto[e] = ~(sim_idx)i;
            S->enext[e] = -1;
            if (shead[w] < 0) shead[w] = (sim_idx)e;
            else S->enext[stail[w]] = (sim_idx)e;
            stail[w] = (sim_idx)e;
        }
    return WSP_OK;
}

/* Order scopes: checks the groups and memberships (the log's; malformed ones are usage
 * errors) and finds the barriers (groups some task waits for). With any, sets S's order arrays:
 * the groups, their pending counts (bpend: tasks in the group), the tasks waiting for each
 * (bdoff/bdl, in task order); *nedges gets the number of tasks in a scope that are in some
 * barrier (each gets one edge, order_edges). Without any (S->nbar == 0), scopes change
 * nothing. */
static int setup_orders(sim *S, int64_t ngroups, const wsp_simgroup *groups, int64_t nmemb,
                        const wsp_simmemb *memb, int64_t *nedges, char *err, int32_t errlen) {
    *nedges = 0;
    if (ngroups < 0 || ngroups >= INT32_MAX || (ngroups > 0 && !groups) || nmemb < 0 ||
        (nmemb > 0 && !memb))
        return sim_fail(err, errlen, "cycle model: bad order scopes (%" PRId64 " groups, %"
                        PRId64 " tasks in them)", ngroups, nmemb);
    if (nmemb == 0) return WSP_OK;
    if (S->ntasks + ngroups >= INT32_MAX)
        return sim_fail(err, errlen, "cycle model: too many order groups (%" PRId64 ")",
                        ngroups);
    for (int64_t g = 0; g < ngroups; g++)
        if (groups[g].parent < -1 || groups[g].parent >= g || groups[g].close < 0)
            return sim_fail(err, errlen, "cycle model: order group %" PRId64 " has parent %d, "
                            "close %d", g, (int)groups[g].parent, (int)groups[g].close);
    int64_t prev = -1, nb = 0;
    S->bdoff = ws_zget(S->ws, B_BDOFF, ngroups + 1, sizeof *S->bdoff);
    if (!S->bdoff) return WSP_ERR_INTERNAL;
    for (int64_t i = 0; i < nmemb; i++) {
        const wsp_simmemb *m = &memb[i];
        if (m->task <= prev || m->task >= S->ntasks || m->group < 0 || m->group >= ngroups ||
            m->barrier < -1 || m->barrier >= ngroups ||
            (m->barrier >= 0 && groups[m->barrier].close > m->task))
            return sim_fail(err, errlen, "cycle model: order scope entry %" PRId64 " (task %d, "
                            "group %d, barrier %d) is malformed", i, (int)m->task,
                            (int)m->group, (int)m->barrier);
        prev = m->task;
        if (m->barrier >= 0) {
            S->bdoff[m->barrier + 1]++;
            nb++;
        }
    }
    if (nb == 0) return WSP_OK;   /* nobody waits for a group */
    S->bpend = ws_zget(S->ws, B_BPEND, ngroups, sizeof *S->bpend);
    S->bdl = wsp__simws_get(S->ws, B_BDL, nb, sizeof *S->bdl);
    if (!S->bpend || !S->bdl) return WSP_ERR_INTERNAL;
    int64_t nbar = 0;
    for (int64_t g = 0; g < ngroups; g++) {
        nbar += S->bdoff[g + 1] > 0;
        S->bdoff[g + 1] += S->bdoff[g];
    }
    /* the waiting tasks (bdoff[g] counts up while filling, then is restored) */
    for (int64_t i = 0; i < nmemb; i++)
        if (memb[i].barrier >= 0) S->bdl[S->bdoff[memb[i].barrier]++] = memb[i].task;
    for (int64_t g = ngroups; g > 0; g--) S->bdoff[g] = S->bdoff[g - 1];
    S->bdoff[0] = 0;
    /* pending counts: each task in every group it is in; an edge if one of them is a barrier */
    int64_t ne = 0;
    for (int64_t i = 0; i < nmemb; i++) {
        int any = 0;
        for (int64_t g = memb[i].group; g >= 0; g = groups[g].parent)
            if (memb[i].task < groups[g].close) {
                S->bpend[g]++;
                any |= S->bdoff[g + 1] > S->bdoff[g];
            }
        ne += any;
    }
    S->grp = groups;
    S->nbar = nbar;
    *nedges = ne;
    return WSP_OK;
}

/* After scan_tasks: a task waiting for a barrier that has tasks (always, from the log) has one
 * more pending count (so it is not ready at 0), and each task in some barrier one more edge
 * (eto = ntasks + its innermost group, numbered from e on) at the end of its successor list,
 * so that it counts as having dependents; its completion is seen by its groups (bar_seen). */
static int order_edges(sim *S, int64_t nmemb, const wsp_simmemb *memb, int64_t e, int64_t cap) {
    sim_idx *shead = S->shead, *stail = S->ws->buf[B_STAIL];
    if (!shead) {   /* no predecessors or gates: the lists hold order edges only */
        shead = S->shead = wsp__simws_get(S->ws, B_SHEAD, S->ntasks, sizeof *shead);
        stail = wsp__simws_get(S->ws, B_STAIL, S->ntasks, sizeof *stail);
        S->enext = wsp__simws_get(S->ws, B_ENEXT, cap, sizeof *S->enext);
        S->eto = wsp__simws_get(S->ws, B_ETO, cap, sizeof *S->eto);
        if (!shead || !stail || !S->enext || !S->eto) return WSP_ERR_INTERNAL;
        for (int64_t k = 0; k < S->ntasks; k++) shead[k] = -1;
    }
    const wsp_simgroup *grp = S->grp;
    for (int64_t i = 0; i < nmemb; i++) {
        const wsp_simmemb *m = &memb[i];
        int64_t k = m->task;
        if (m->barrier >= 0 && S->bpend[m->barrier] > 0) S->state[k]++;
        int any = 0;
        for (int64_t g = m->group; g >= 0 && !any; g = grp[g].parent)
            any = k < grp[g].close && S->bdoff[g + 1] > S->bdoff[g];
        if (!any) continue;
        S->eto[e] = (sim_idx)(S->ntasks + m->group);
        S->enext[e] = -1;
        if (shead[k] < 0) shead[k] = (sim_idx)e;
        else S->enext[stail[k]] = (sim_idx)e;
        stail[k] = (sim_idx)e;
        e++;
    }
    return WSP_OK;
}

int wsp__sim_replay_ws(wsp_simws **wsp, const wsp_machine *m, const wsp_policy *p,
                       const wsp_kcost *costs, int32_t nkernels, int64_t ntasks,
                       const wsp_simtask *tasks, const int64_t *preds64, const int32_t *preds32,
                       int64_t npreds_known, int64_t ngates, const wsp_simgate *gates,
                       const int64_t *gw64, const int32_t *gw32, int64_t ngroups,
                       const wsp_simgroup *groups, int64_t nmemb, const wsp_simmemb *memb,
                       const int64_t *prio, wsp_simresult *results, wsp_simsummary *summary,
                       wsp_simdisp *disp, char *err, int32_t errlen) {
    if (err && errlen > 0) err[0] = '\0';
    int64_t dc = 0, cc = 0, spacing = 0;
    int rc = check_setup(m, p, costs, nkernels, ntasks, tasks, &dc, &cc, &spacing, err, errlen);
    if (rc) return rc;
    if (!*wsp && !(*wsp = calloc(1, sizeof **wsp))) return WSP_ERR_INTERNAL;
    wsp_simws *ws = *wsp;

    sim S;
    memset(&S, 0, sizeof S);
    S.ws = ws;
    S.costs = costs;
    S.tasks = tasks;
    S.prio = p->ready == WSP_READY_PRIORITY ? prio : NULL;
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
    S.wlim = S.window > 0 ? S.window : INT64_MAX;
    int64_t nq = (int64_t)S.nd * S.C * 2;
    /* devices and comm engines: the multi model (wsp_internal.h, `sim`) */
    S.ndev = m->devices > 1 ? m->devices : 1;
    S.ndpd = S.nd / S.ndev;
    S.nqd = nq;
    S.multi = S.ndev > 1;
    for (int32_t i = 0; i < nkernels && !S.multi; i++) S.multi = costs[i].unit == WSP_UNIT_COMM;
    if (S.multi) nq += S.ndev;
    int64_t *last = NULL;
    int64_t ngw = 0, nbe = 0;
    if (ngates != 0 && (rc = setup_gates(&S, ngates, gates, gw64, gw32, &ngw, err, errlen)))
        return rc;
    if ((ngroups != 0 || nmemb != 0) &&
        (rc = setup_orders(&S, ngroups, groups, nmemb, memb, &nbe, err, errlen)))
        return rc;
    S.elim = S.ngates > 0 ? S.gidx[0] : ntasks;
    S.next_enum = S.window > 0 ? 0 : S.elim;

    rc = WSP_ERR_INTERNAL;
    S.kq = ws_zget(ws, B_KQ, nkernels, sizeof *S.kq);
    S.q = ws_zget(ws, B_Q, nq, sizeof *S.q);
    S.tkey = wsp__simws_get(ws, B_TKEY, ntasks, sizeof *S.tkey);
    S.state = wsp__simws_get(ws, B_STATE, ntasks, sizeof *S.state);
    if (!S.kq || !S.q || !S.tkey || !S.state) return rc;
    if (p->nstreams > 0) {
        S.snext = wsp__simws_get(ws, B_SNEXT, ntasks, sizeof *S.snext);
        last = wsp__simws_get(ws, B_LAST, p->nstreams, sizeof *last);
        if (!S.snext || !last) return rc;
        for (int32_t s = 0; s < p->nstreams; s++) last[s] = -1;
    }

    scan_out o;
    memset(&o, 0, sizeof o);
    o.bad_task = o.bad_pred = -1;
    /* room for every edge: the sum of the valid predecessor counts (an invalid one is reported
     * before any later task's edges are read) */
    if (npreds_known < 0) {
        npreds_known = 0;
        for (int64_t k = 0; k < ntasks; k++)
            if (tasks[k].npreds > 0 && tasks[k].npreds < INT32_MAX) npreds_known += tasks[k].npreds;
    }
    npreds_known += ngw + nbe;   /* the gates' writer edges and the order edges follow */
    /* serial and work stay below SIM_TIME_LIMIT if every task could take the longest kernel */
    int64_t longest = 0, bound;
    for (int32_t i = 0; i < nkernels; i++)
        if (costs[i].cycles > longest) longest = costs[i].cycles;
    int checked = longest > SIM_TIME_LIMIT ||
                  __builtin_mul_overflow(ntasks, dc + cc + longest, &bound) ||
                  bound > SIM_TIME_LIMIT;
    /* with no window, the tasks without predecessors are ready at 0: listed for the queues */
    sim_idx *ready0 = NULL;
    if (S.window == 0 && !(ready0 = wsp__simws_get(ws, B_READY0, ntasks, sizeof *ready0)))
        return rc;
    if (checked)
        rc = preds32 ? scan_tasks(&S, p, nkernels, NULL, preds32, npreds_known, ready0, last, &o,
                                  err, errlen, 1)
                     : scan_tasks(&S, p, nkernels, preds64, NULL, npreds_known, ready0, last, &o,
                                  err, errlen, 1);
    else
        rc = preds32 ? scan_tasks(&S, p, nkernels, NULL, preds32, npreds_known, ready0, last, &o,
                                  err, errlen, 0)
                     : scan_tasks(&S, p, nkernels, preds64, NULL, npreds_known, ready0, last, &o,
                                  err, errlen, 0);
    if (rc) return rc;
    int64_t npreds = o.npreds;
    S.used = o.used;
    S.nkernels = nkernels;
    if (o.missing_preds) return sim_fail(err, errlen, "cycle model: no predecessor array");
    int64_t ncores[2] = {m->vector_cores, m->cube_cores};
    for (int u = 0; u < 2; u++)
        if ((o.used >> u & 1) && ncores[u] == 0)
            return sim_fail(err, errlen,
                            "cycle model: tasks need %s cores but the machine has none",
                            u == WSP_UNIT_CUBE ? "cube" : "vector");
    {
        int64_t extra;
        if (__builtin_mul_overflow(ntasks, spacing, &extra) || extra > SIM_TIME_LIMIT ||
            o.serial + extra > SIM_TIME_LIMIT)
            return sim_fail(err, errlen, "cycle model: cycle counts overflow");
    }
    if (o.bad_task >= 0)
        return sim_fail(err, errlen,
                        "cycle model: task %" PRId64 " has predecessor %" PRId64
                        " (must be an earlier task, 0 .. %" PRId64 ")", o.bad_task, o.bad_pred,
                        o.bad_task - 1);
    if (S.ngates > 0 || S.nbar > 0) {
        if (npreds + ngw + nbe >= INT32_MAX)
            return sim_fail(err, errlen, "cycle model: too many edges (%" PRId64 ")",
                            npreds + ngw + nbe);
        if (S.ngates > 0 && gate_edges(&S, npreds, ngw + nbe)) return WSP_ERR_INTERNAL;
        int64_t *bcp = NULL;
        if (S.nbar > 0) {
            if (order_edges(&S, nmemb, memb, npreds + ngw, ngw + nbe)) return WSP_ERR_INTERNAL;
            if (!(bcp = wsp__simws_get(ws, B_BCP, ngroups, sizeof *bcp))) return WSP_ERR_INTERNAL;
            /* the tasks waiting for a barrier are not ready at 0 */
            int64_t n0 = 0;
            for (int64_t i = 0; ready0 && i < o.nready0; i++)
                if (S.state[ready0[i]] == 0) ready0[n0++] = ready0[i];
            o.nready0 = n0;
        }
        o.cp_max = extra_cp(&S, preds64, preds32, last, p->nstreams, o.cp_max, nmemb, memb, bcp,
                            ngroups);
    }

    rc = WSP_ERR_INTERNAL;
    S.fifo = wsp__simws_get(ws, B_FIFO, ntasks, sizeof *S.fifo);
    S.kfifo = wsp__simws_get(ws, B_KFIFO, ntasks, sizeof *S.kfifo);
    S.kh = wsp__simws_get(ws, B_KH, nkernels, sizeof *S.kh);
    S.disp = ws_zget(ws, B_DISP, S.nd, sizeof *S.disp);
    S.freew = wsp__simws_get(ws, B_FREEW, ((int64_t)S.nd + 63) / 64, sizeof *S.freew);
    for (S.ringmask = 1; S.ringmask < S.nd; S.ringmask *= 2) {
    }
    S.ringmask--;
    S.bring = wsp__simws_get(ws, B_BRING, S.ringmask + 1, sizeof *S.bring);
    if (!S.fifo || !S.kfifo || !S.kh || !S.disp || !S.freew || !S.bring) return rc;
    bits_fill(S.freew, S.nd);
    /* interleaved(n, priority = s): every dispatcher's first run is of stream s */
    if (S.C > 1 && p->timing_first > 0)
        for (int64_t d = 0; d < S.nd; d++) S.disp[d].cur = p->timing_first;
    if (cc > 0 && (npreds > 0 || p->nstreams > 0 || S.ngates > 0 || S.nbar > 0)) {
        S.dq = wsp__simws_get(ws, B_DQ, ntasks, sizeof *S.dq);
        if (!S.dq) return rc;
    }
    if (S.C > 1) {
        S.clswords = (S.C + 63) / 64;
        S.clsbits = ws_zget(ws, B_CLS, S.nd * S.clswords, sizeof *S.clsbits);
        if (!S.clsbits) return rc;
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
    if (S.window == 0) {
        /* everything before the first gate is enumerated at 0; the tasks without predecessors
         * are ready then, in index order, so they go straight to the ends of their FIFOs */
        const int64_t elim = S.elim;
        int64_t nready0 = o.nready0;
        while (nready0 > 0 && ready0[nready0 - 1] >= elim) nready0--;   /* behind a gate */
        for (int64_t k = 0; results && k < elim; k++) results[k].enumerated = 0;
        for (int64_t i = 0; i < nready0; i++) {
            int64_t k = ready0[i];
            S.tkey[k] = 0;
            if (results) results[k].ready = 0;
            int64_t d = tasks[k].dispatcher, c = wsp__sim_task_class(&S, k);
            int u = costs[tasks[k].kernel].unit;
            if (u == WSP_UNIT_COMM) {   /* its device's comm queue, in index order */
                sim_queue *Q = &S.q[S.nqd + d / S.ndpd];
                S.fifo[Q->base + Q->tail++] = (sim_idx)k;
                S.ncomm++;
                continue;
            }
            sim_queue *Q = &S.q[wsp__sim_queue_index(&S, d, c, u)];
            if (S.prio) {  /* a priority ready policy: queued in key order */
                S.tkey[k] = S.prio[k];
                wsp__sim_q_push(&S, Q, k);
                if (S.oom) return WSP_ERR_INTERNAL;
            } else {
                S.fifo[Q->base + Q->tail++] = (sim_idx)k;
            }
            S.disp[d].qcount++;
            S.disp[d].qunit[u]++;
            S.disp[d].umask |= 1u << u;
            S.nready_u[u]++;
            if (S.clsbits) S.clsbits[d * S.clswords + (c >> 6)] |= UINT64_C(1) << (c & 63);
        }
    }
    if (S.batched) {
        S.gq = ws_zget(ws, B_GQ, nq, sizeof *S.gq);
        S.gfifo = wsp__simws_get(ws, B_GFIFO, ntasks, sizeof *S.gfifo);
        if (!S.gq || !S.gfifo) return rc;
        for (int64_t i = 0; i < nq; i++) S.gq[i].base = S.q[i].base;
    }
    for (int u = 0; u < 2 && !S.multi; u++) {
        if (!(o.used >> u & 1)) continue;
        int64_t n = ncores[u] < ntasks ? ncores[u] : ntasks;
        sim_cores *c = &S.cores[u];
        c->nwords = (n + 63) / 64;
        c->bits = wsp__simws_get(ws, u ? B_CORES1 : B_CORES0, c->nwords, sizeof *c->bits);
        if (!c->bits) return rc;
        bits_fill(c->bits, n);
        c->nfree = n;
    }
    if (S.multi) {
        /* every device its own cores of each unit and a comm engine (free at 0);
         * S.cores[u].nfree counts them all (what issuable_anywhere asks) */
        int64_t per[2], words = 0;
        for (int u = 0; u < 2; u++) {
            per[u] = ncores[u] < ntasks ? ncores[u] : ntasks;
            words += (per[u] + 63) / 64;
        }
        S.dcores = wsp__simws_get(ws, B_DCORES, S.ndev * 2, sizeof *S.dcores);
        uint64_t *bits = wsp__simws_get(ws, B_DBITS, S.ndev * words, sizeof *bits);
        S.ebusy = ws_zget(ws, B_EBUSY, S.ndev, sizeof *S.ebusy);
        if (!S.dcores || !bits || !S.ebusy) return rc;
        for (int64_t v = 0; v < S.ndev; v++)
            for (int u = 0; u < 2; u++) {
                sim_cores *c = &S.dcores[v * 2 + u];
                c->nwords = (per[u] + 63) / 64;
                c->bits = bits;
                c->hint = 0;
                bits += c->nwords;
                bits_fill(c->bits, per[u]);
                c->nfree = per[u];
                S.cores[u].nfree += per[u];
            }
    }

    rc = wsp__sim_run(&S);
    if (rc == WSP_ERR_INTERNAL && !S.oom && err && errlen > 0)
        snprintf(err, (size_t)errlen, "cycle model: stalled with %" PRId64 " of %" PRId64
                 " tasks finished", S.finished, ntasks);
    if (rc) return rc;

    if (summary) {
        summary->tasks = ntasks;
        summary->total_cycles = S.makespan;
        summary->critical_path = o.cp_max;
        summary->work[0] = o.work[0];
        summary->work[1] = o.work[1];
        summary->serial_cycles = o.serial;
        summary->stolen = S.stolen;
        summary->groups = S.groups;
        summary->comm_cycles = o.comm;
    }
    if (disp)
        for (int32_t d = 0; d < S.nd; d++) {
            disp[d].tasks = S.disp[d].ntasks;
            disp[d].stolen = S.disp[d].stolen;
            disp[d].busy_cycles = S.disp[d].ntasks * dc;
        }
    return WSP_OK;
}

int wsp_sim_replay_gated(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                         int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                         const int64_t *preds, int64_t ngates, const wsp_simgate *gates,
                         const int64_t *writers, wsp_simresult *results,
                         wsp_simsummary *summary, wsp_simdisp *disp, char *err, int32_t errlen) {
    wsp_simws *ws = NULL;   /* reentrant: this call's working memory is its own */
    int rc = wsp__sim_replay_ws(&ws, m, p, costs, nkernels, ntasks, tasks, preds, NULL, -1,
                                ngates, gates, writers, NULL, 0, NULL, 0, NULL, NULL, results,
                                summary, disp, err, errlen);
    wsp__simws_free(ws);
    return rc;
}

int wsp_sim_replay(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                   int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                   const int64_t *preds, wsp_simresult *results, wsp_simsummary *summary,
                   wsp_simdisp *disp, char *err, int32_t errlen) {
    return wsp_sim_replay_gated(m, p, costs, nkernels, ntasks, tasks, preds, 0, NULL, NULL,
                                results, summary, disp, err, errlen);
}

