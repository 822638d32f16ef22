/* simlog_order.c: order scopes as the cycle model's log sees them (wsp__simlog_order_*, called
 * by order.c wherever the runtime changes its scope stacks), and the order-scope entry of each
 * logged task in a scope (wsp__simlog_order_note, from wsp__simlog_add). The log's state is
 * struct wsp_simlog (wsp_internal.h); the replay turns the barriers into edges (sim_setup.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

/* ---- order scopes ------------------------------------------------------------------------------
 * The runtime orders the steps of a scope with groups (order.c): a scope level has the group of
 * its current step, which nests in the enclosing level's current step group, and a barrier,
 * the group of its previous step (or, before its first step ends, the enclosing level's
 * barrier at the push), which every task submitted at that level waits for. The log keeps the
 * same stacks, per order context, with its own group ids (0, 1, ... in this run), and logs
 * for each task in a scope (wsp_simmemb) its innermost level's step group and barrier; the
 * replay (sim.c) turns each barrier into one node that waits for every task in the group. So
 * the model orders exactly what the runtime does, as enumerated (no host timing), with one
 * entry per task in a scope and nothing per task outside one (a depth test).
 *
 * A step ends (wsp_order_next, pop, the end of a context) when its group `close`s: tasks
 * enumerated from then on are not in it, even in a group nested in it that stays open (which a
 * live forked child could still add to: a misuse the runtime reports only for the borrowed
 * level itself). A group no task joined while it was open (a step that only forked children,
 * which submitted nothing) leaves the barrier as it was, as an empty step does: its next step
 * waits for the previous one still. Forked contexts borrow the parent's levels, as in the
 * runtime: the same barrier and the same current step group (created at the fork). */

static int32_t group_new(wsp_simlog *l, int32_t parent) {
    if (l->ngroups >= INT32_MAX - 1 ||
        wsp__grow((void **)&l->groups, &l->capgroups, l->ngroups + 1, sizeof *l->groups) ||
        wsp__grow((void **)&l->gused, &l->capgused, l->ngroups + 1, sizeof *l->gused))
        return -1;
    int32_t g = (int32_t)l->ngroups++;
    l->groups[g].parent = parent;
    l->groups[g].close = INT32_MAX;
    l->gused[g] = 0;
    return g;
}

/* level's current step group, created (with the enclosing ones) on first use; -1: no memory */
static int32_t step_group(wsp_simlog *l, int32_t level) {
    if (l->sc[level].current >= 0) return l->sc[level].current;
    int32_t parent = -1;
    if (level > 0 && (parent = step_group(l, level - 1)) < 0) return -1;
    int32_t g = group_new(l, parent);
    if (g < 0) return -1;
    /* the barrier every task of this step waits for, for deps = explicit's check (explicit.c) */
    if (l->p.deps == WSP_DEPS_EXPLICIT) {
        if (wsp__grow((void **)&l->gbar, &l->capgbar, g + 1, sizeof *l->gbar)) return -1;
        l->gbar[g] = l->sc[level].barrier;
    }
    return l->sc[level].current = g;
}

static void group_close(wsp_simlog *l, int32_t g) {
    if (l->groups[g].close == INT32_MAX) l->groups[g].close = (int32_t)l->ntasks;
}

/* The task being added (index ntasks) is in a scope: its group and barrier. */
__attribute__((noinline)) int wsp__simlog_order_note(wsp_simlog *l) {
    int32_t level = l->depth - 1, g = l->sc[level].current;
    if (g < 0 && (g = step_group(l, level)) < 0) return -1;
    if (l->nmemb == l->capmemb &&
        wsp__grow((void **)&l->memb, &l->capmemb, l->nmemb + 1, sizeof *l->memb))
        return -1;
    wsp_simmemb *m = &l->memb[l->nmemb++];
    m->task = (int32_t)l->ntasks;
    m->group = g;
    m->barrier = l->sc[level].barrier;
    m->unused = 0;
    /* the groups it joins are used (those they nest in too; marked once) */
    for (int32_t x = g; x >= 0 && !l->gused[x]; x = l->groups[x].parent) l->gused[x] = 1;
    return 0;
}

static int ctx_room(wsp_simlog *l, int32_t id) {
    if (id < l->capctx) return 0;
    int32_t cap = l->capctx ? l->capctx : 8;
    while (cap <= id) cap = cap < INT32_MAX / 2 ? cap * 2 : INT32_MAX;
    sctx *nc = realloc(l->ctxs, (size_t)cap * sizeof *nc);
    if (!nc) return -1;
    memset(nc + l->capctx, 0, (size_t)(cap - l->capctx) * sizeof *nc);
    l->ctxs = nc;
    l->capctx = cap;
    return 0;
}

void wsp__simlog_order_push(wsp_simlog *l) {
    if (l->oom) return;
    if (l->depth == l->capsc) {
        int32_t cap = l->capsc ? l->capsc * 2 : 8;
        sscope *ns = realloc(l->sc, (size_t)cap * sizeof *ns);
        if (!ns) {
            l->oom = 1;
            return;
        }
        l->sc = ns;
        l->capsc = cap;
    }
    sscope *s = &l->sc[l->depth];
    s->barrier = l->depth > 0 ? l->sc[l->depth - 1].barrier : -1;
    s->current = -1;
    l->depth++;
}

void wsp__simlog_order_next(wsp_simlog *l) {
    if (l->oom || l->depth <= 0) return;
    sscope *s = &l->sc[l->depth - 1];
    if (s->current < 0) return;   /* an empty step changes nothing */
    int32_t g = s->current;
    group_close(l, g);
    if (l->gused[g]) s->barrier = g;
    s->current = -1;
}

void wsp__simlog_order_pop(wsp_simlog *l) {
    if (l->oom || l->depth <= 0) return;
    sscope *s = &l->sc[l->depth - 1];
    if (s->current >= 0) group_close(l, s->current);
    l->depth--;
}

void wsp__simlog_order_fork(wsp_simlog *l, int32_t id) {
    if (l->oom || id <= 0 || id == l->cur) return;
    if ((l->depth > 0 && step_group(l, l->depth - 1) < 0) || ctx_room(l, id)) {
        l->oom = 1;
        return;
    }
    sctx *c = &l->ctxs[id];
    if (c->cap < l->depth) {
        int32_t cap = l->depth > 8 ? l->depth : 8;
        sscope *ns = realloc(c->sc, (size_t)cap * sizeof *ns);
        if (!ns) {
            l->oom = 1;
            return;
        }
        c->sc = ns;
        c->cap = cap;
    }
    if (l->depth > 0) memcpy(c->sc, l->sc, (size_t)l->depth * sizeof *c->sc);
    c->depth = c->borrowed = l->depth;
}

void wsp__simlog_order_switch(wsp_simlog *l, int32_t id) {
    if (id == l->cur || id < 0) return;
    if (ctx_room(l, id > l->cur ? id : l->cur)) {
        l->oom = 1;
        return;
    }
    sctx *c = &l->ctxs[l->cur];
    c->sc = l->sc;
    c->depth = l->depth;
    c->cap = l->capsc;
    c->borrowed = l->borrowed;
    c = &l->ctxs[id];
    l->sc = c->sc;
    l->depth = c->depth;
    l->capsc = c->cap;
    l->borrowed = c->borrowed;
    l->cur = id;
}

void wsp__simlog_order_end(wsp_simlog *l, int32_t id) {
    if (id <= 0 || id == l->cur || id >= l->capctx) return;
    sctx *c = &l->ctxs[id];
    for (int32_t i = c->depth - 1; i >= c->borrowed && !l->oom; i--)
        if (c->sc[i].current >= 0) group_close(l, c->sc[i].current);
    c->depth = c->borrowed = 0;
}
