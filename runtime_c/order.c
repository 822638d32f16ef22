/* order.c: order scopes (wsp_order_push / next / pop) and order contexts (wsp_order_fork /
 * switch / end: one scope stack per coroutine of an enumerator), on the submitter.
 *
 * A scope level orders its steps with groups (wsp_group: a node that completes once its members
 * have): the group of its current step, which nests in the enclosing level's current step
 * group, and a barrier, the group of its previous step, which every task submitted at that
 * level waits for (wsp__order_attach, called by wsp__enqueue for every task in a scope). The
 * cycle model's log mirrors each change of the stacks (wsp__simlog_order_*, simlog_order.c).
 * An open batch may go on over the steps of its scope (wsp_order_next; batch.c).
 */
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

/* ---- order scopes ---------------------------------------------------------------------------- */

static wsp_group *group_new(wsp_runtime *rt, wsp_group *parent) {
    wsp_group *g = (wsp_group *)wsp__node_alloc(rt, sizeof(wsp_group));
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

void wsp__group_close(wsp_runtime *rt, wsp_group *g) {
    g->closed = 1;
    if (atomic_fetch_sub_explicit(&g->h.pending, 1, memory_order_acq_rel) == 1)
        wsp__complete(rt, NULL, &g->h);
}

int wsp__order_attach(wsp_runtime *rt, wsp_tasknode *t) {
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    if (s->barrier) {
        if (atomic_load_explicit(&s->barrier->h.succ, memory_order_acquire) == WSP_CLOSED) {
            wsp__group_unref(rt, s->barrier);
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
    if (rc || (rc = wsp__batch_close(rt))) return rc;
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
     * the scope's barrier then (wsp__batch_close). Only a batch started in this scope, and with
     * room to keep the barrier, does so. */
    if (rt->batch) {
        if (rt->batch_depth != rt->depth || rt->nxparts > 0 ||
            (s->current && s->barrier && rt->nbatch_waits == WSP_BATCH_WAITS)) {
            if ((rc = wsp__batch_close(rt))) return rc;
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
        wsp__group_close(rt, g);
        wsp__group_unref(rt, g);
    } else if (s->current) {
        if (rt->batch && s->barrier) {
            s->barrier->scope_refs++;
            rt->batch_waits[rt->nbatch_waits++] = s->barrier;
        }
        wsp_group *g = s->current;
        s->current = NULL;
        wsp__group_close(rt, g);
        if (s->barrier) wsp__group_unref(rt, s->barrier);
        s->barrier = g;
    }
    if (rt->simlog) wsp__simlog_order_next(rt->simlog);
    return WSP_OK;
}

void wsp__scope_pop(wsp_runtime *rt) {
    wsp_scope *s = &rt->scopes[rt->depth - 1];
    if (s->current) {
        wsp__group_close(rt, s->current);
        wsp__group_unref(rt, s->current);
    }
    if (s->barrier) wsp__group_unref(rt, s->barrier);
    rt->depth--;
    if (rt->simlog) wsp__simlog_order_pop(rt->simlog);
}

int wsp_order_pop(wsp_runtime *rt) {
    int rc = order_check(rt, "wsp_order_pop", 1);
    if (rc || (rc = wsp__batch_close(rt))) return rc;
    wsp__scope_pop(rt);
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
            if (i >= borrowed) wsp__group_close(rt, sc[i].current);
            wsp__group_unref(rt, sc[i].current);
        }
        if (sc[i].barrier) wsp__group_unref(rt, sc[i].barrier);
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
void wsp__ctx_end_all(wsp_runtime *rt) {
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
    if (rc || (rc = wsp__batch_close(rt))) return -rc;
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
    if ((rc = wsp__batch_close(rt))) return rc;  /* a batch holds tasks of one context's scopes */
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
        wsp__batch_close(rt);
        ctx_save(rt);
        ctx_load(rt, 0);
    }
    ctx_release(rt, ctx);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

