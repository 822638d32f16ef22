/* deps.c: dependency inference over exact boxes (language.md section 6, "Data dependencies").
 *
 * A task that reads or writes a box waits for every earlier, unfinished task writing an
 * overlapping box of the same tensor (RAW, WAW); a writer also waits for earlier unfinished
 * readers of an overlapping box (WAR). Edges are added with wsp__add_edge (tasks.c), which skips
 * finished predecessors and duplicates.
 *
 * The structure. Every distinct box of a tensor in use has an ACCESS RECORD {last writer,
 * readers since that writer}. Records are grouped by SIZE CLASS: a box with extents e[d] has
 * class L with L[d] = ceil(log2 e[d]), so e[d] <= 2^L[d]. One chained hash table (per runtime)
 * maps (tensor, class, cell) to records, where cell[d] = lo[d] >> L[d]. A record of class L can
 * overlap a query box Q only if its lo[d] lies in (Q.lo[d] - 2^L[d], Q.hi[d]), that is in cells
 * (Q.lo[d] - 2^L[d] + 1) >> L[d] .. (Q.hi[d] - 1) >> L[d]; when every box of the class is aligned
 * in dim d (lo a multiple of 2^L[d], the usual tiling), the range starts at Q.lo[d] >> L[d], so a
 * tile-shaped query probes exactly one cell per class. For each live class of the tensor a query
 * probes that product of cell ranges, or walks the class's groups in the coarse index (below)
 * when they hold fewer records (a key block read against one-row appends), or scans the class's
 * own record list when the list is shorter (a whole-tensor read against many small tiles).
 *
 * Complexity per access: O(sum over the tensor's live classes of min(cells in range, records of
 * the class)) plus O(edges added); for tiled programs (a few tile shapes, aligned) that is O(1)
 * expected: one probe per class finds the exact record. Insertion and removal are O(1) expected
 * (open addressing with linear probing, load at most 1/4, each slot holding the full hash so a
 * probe reads a record only on a hash match; deletion shifts entries back instead of leaving
 * tombstones). Removing a reader is O(1): the task keeps
 * the reader's index (wsp_reg) and readers are swap-removed. Never a scan over in-flight tasks.
 *
 * Lifetime. Only the submitter touches this structure. A finished task stays registered until
 * the submitter recycles its node (wsp__deps_retire); edges to it are then skipped because its
 * successor list is closed. A record with neither writer nor readers is deleted, so the table
 * holds records of in-flight tasks plus finished ones not yet recycled (bounded by the pool).
 * A writer replaces the record's writer and clears its readers (it waits for both, so later
 * tasks that wait for it wait for them transitively); a reader's stale wsp_reg is detected by
 * checking readers[index] == task before removal.
 */
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

#define REC_INLINE 2
#define REC_CHUNK 256
#define BOX_MAX ((int64_t)1 << 62)

/* A table slot keeps the full hash so that a probe touches a record only on a hash match. */
typedef struct wsp_slot {
    uint64_t hash;
    wsp_rec *rec;               /* NULL: empty */
} wsp_slot;

struct wsp_rec {
    wsp_rec *hnext;             /* free list */
    wsp_rec *cprev, *cnext;     /* records of the same class */
    wsp_class *cls;
    uint64_t hash;
    wsp_tasknode *writer;
    wsp_tasknode **readers;     /* inl, or a heap array when more are needed */
    int32_t nreaders, capreaders;
    wsp_tasknode *inl[REC_INLINE];
    int64_t lo[WSP_MAX_DIMS], hi[WSP_MAX_DIMS];
    /* the coarse index: a record's group (NULL: not grouped) and its siblings there; a GROUP is
     * a record of its own in the table (isgroup; empty box, so it overlaps nothing) whose gnext
     * is its first member */
    wsp_rec *group, *gprev, *gnext;
    int32_t gcount, isgroup;
};

struct wsp_class {
    uint64_t key;               /* levels, 6 bits per dim */
    int32_t id, tensor, ndim, nrec;
    int32_t nwriting;           /* records with a writer: a read skips a class without any */
    uint32_t unaligned;         /* bit d: a record's lo[d] is not a multiple of 2^level[d] */
    uint8_t level[WSP_MAX_DIMS];
    wsp_rec *list;
};

typedef struct rec_chunk {
    struct rec_chunk *next;
    wsp_rec recs[REC_CHUNK];
} rec_chunk;

static inline int level_of(int64_t extent) {
    return extent <= 1 ? 0 : 64 - __builtin_clzll((unsigned long long)(extent - 1));
}

static inline uint64_t hash_cell(int32_t tensor, int32_t cls_id, int ndim, const int64_t *cell) {
    uint64_t h = (uint64_t)(uint32_t)tensor * 0x9E3779B97F4A7C15ULL
                 ^ (uint64_t)(uint32_t)cls_id * 0xC2B2AE3D27D4EB4FULL;
    for (int d = 0; d < ndim; d++) {
        h ^= (uint64_t)cell[d];
        h *= 0xFF51AFD7ED558CCDULL;
        h ^= h >> 29;
    }
    h ^= h >> 32;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return h;
}

int wsp__deps_init(wsp_deps *d, int32_t ntensors) {
    memset(d, 0, sizeof *d);
    d->ntensors = ntensors;
    d->tensors = calloc((size_t)(ntensors > 0 ? ntensors : 1), sizeof *d->tensors);
    d->mask = 1023;
    d->slots = calloc(d->mask + 1, sizeof *d->slots);
    if (!d->tensors || !d->slots) return WSP_ERR_INTERNAL;
    for (int32_t i = 0; i < ntensors; i++) d->tensors[i].ndim = -1;
    return WSP_OK;
}

static void free_classes(wsp_tensor_deps *td) {
    for (int32_t c = 0; c < td->nclass; c++) free(td->classes[c]);
    td->nclass = 0;
    td->nrec = 0;
    td->last = NULL;
    memset(td->glevel, 0, sizeof td->glevel);
}

void wsp__deps_destroy(wsp_deps *d) {
    if (d->tensors) {
        for (int32_t i = 0; i < d->ntensors; i++) {
            free_classes(&d->tensors[i]);
            free(d->tensors[i].classes);
        }
    }
    /* records still linked (only after an internal error) may own heap reader arrays */
    if (d->slots) {
        for (uint64_t b = 0; b <= d->mask; b++)
            if (d->slots[b].rec && d->slots[b].rec->readers != d->slots[b].rec->inl)
                free(d->slots[b].rec->readers);
    }
    for (rec_chunk *c = d->rec_chunks; c;) {
        rec_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(d->tensors);
    free(d->slots);
    memset(d, 0, sizeof *d);
}

/* A new run: every task of the previous one has been retired, so no record is left. */
void wsp__deps_begin(wsp_deps *d) {
    if (d->nrec != 0) {  /* cannot happen; be safe rather than keep dangling task pointers */
        for (uint64_t b = 0; b <= d->mask; b++) {
            wsp_rec *r = d->slots[b].rec;
            if (!r) continue;
            if (r->readers != r->inl) free(r->readers);
            r->readers = r->inl;
            r->capreaders = REC_INLINE;
            r->nreaders = 0;
            r->writer = NULL;
            r->hnext = d->free_recs;
            d->free_recs = r;
            d->slots[b].rec = NULL;
        }
        d->nrec = 0;
    }
    wsp__deps_compact(d);
    for (int32_t i = 0; i < d->ntensors; i++) {
        free_classes(&d->tensors[i]);
        d->tensors[i].ndim = -1;
    }
}

static wsp_rec *rec_alloc(wsp_deps *d) {
    if (!d->free_recs) {
        rec_chunk *c = malloc(sizeof *c);
        if (!c) return NULL;
        c->next = d->rec_chunks;
        d->rec_chunks = c;
        for (int i = REC_CHUNK - 1; i >= 0; i--) {
            c->recs[i].hnext = d->free_recs;
            d->free_recs = &c->recs[i];
        }
    }
    wsp_rec *r = d->free_recs;
    d->free_recs = r->hnext;
    r->writer = NULL;
    r->readers = r->inl;
    r->nreaders = 0;
    r->capreaders = REC_INLINE;
    r->group = NULL;
    r->isgroup = 0;
    return r;
}

static int resize_table(wsp_deps *d, uint64_t nb) {
    wsp_slot *ns = calloc(nb, sizeof *ns);
    if (!ns) return -1;
    for (uint64_t b = 0; b <= d->mask; b++) {
        if (!d->slots[b].rec) continue;
        uint64_t i = d->slots[b].hash & (nb - 1);
        while (ns[i].rec) i = (i + 1) & (nb - 1);
        ns[i] = d->slots[b];
    }
    free(d->slots);
    d->slots = ns;
    d->mask = nb - 1;
    return 0;
}

/* After a burst of in-flight tasks the table would stay large and sparse, and every probe a
 * cache miss: shrink a large table (to load 1/8) once it is below 1/64 full. Growth happens at
 * 1/4, so a table never oscillates between the two. */
void wsp__deps_compact(wsp_deps *d) {
    uint64_t cap = d->mask + 1;
    if (cap <= 16384 || (uint64_t)d->nrec * 64 >= cap) return;
    uint64_t nb = 1024;
    while (nb < (uint64_t)d->nrec * 8) nb *= 2;
    resize_table(d, nb);
}

static void table_remove(wsp_deps *d, wsp_rec *r) {
    uint64_t m = d->mask, i = r->hash & m;
    while (d->slots[i].rec != r) {
        if (!d->slots[i].rec) return;  /* not there: cannot happen */
        i = (i + 1) & m;
    }
    /* backward-shift deletion keeps every probe sequence unbroken, without tombstones */
    for (uint64_t j = (i + 1) & m; d->slots[j].rec; j = (j + 1) & m) {
        uint64_t k = d->slots[j].hash & m;
        int movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            d->slots[i] = d->slots[j];
            i = j;
        }
    }
    d->slots[i].rec = NULL;
}

static void rec_free(wsp_deps *d, wsp_rec *r) {
    if (r->readers != r->inl) free(r->readers);
    r->readers = r->inl;
    r->capreaders = REC_INLINE;
    r->nreaders = 0;
    r->writer = NULL;
    r->cls = NULL;
    r->isgroup = 0;
    r->hnext = d->free_recs;
    d->free_recs = r;
}

/* ---- the coarse index ---------------------------------------------------------------------------
 * A wide query against a class of small boxes (a 256-row key block read against the one-row
 * appends of the same cache) would probe one cell per row. So each record of a class that is
 * finer than the tensor's coarsest class in some dimension also belongs to a GROUP: the cell of
 * its lo at the tensor's coarse levels (glevel[d], the largest level of any of its classes). A
 * query box is no larger than a coarse cell, so it spans at most two of them per dimension; the
 * query walks the members of those groups when they are fewer than the cells it would probe. */

static inline int grouped(const wsp_tensor_deps *td, const wsp_class *c) {
    for (int d = 0; d < c->ndim; d++)
        if (c->level[d] < td->glevel[d]) return 1;
    return 0;
}

static inline uint64_t group_hash(const wsp_class *c, const int64_t *gcell) {
    return hash_cell(c->tensor, c->id | 0x40000000, c->ndim, gcell);
}

static wsp_rec *group_find(wsp_deps *dp, const wsp_class *c, uint64_t h) {
    for (uint64_t i = h & dp->mask; dp->slots[i].rec; i = (i + 1) & dp->mask) {
        wsp_rec *g = dp->slots[i].rec;
        if (dp->slots[i].hash == h && g->isgroup && g->cls == c) return g;
    }
    return NULL;
}

static int table_reserve(wsp_deps *dp);

static int group_join(wsp_deps *dp, wsp_rec *r) {
    wsp_class *c = r->cls;
    const wsp_tensor_deps *td = &dp->tensors[c->tensor];
    if (!grouped(td, c)) return 0;
    int64_t gcell[WSP_MAX_DIMS];
    for (int d = 0; d < c->ndim; d++) gcell[d] = r->lo[d] >> td->glevel[d];
    uint64_t h = group_hash(c, gcell);
    wsp_rec *g = group_find(dp, c, h);
    if (!g) {
        if (table_reserve(dp) != 0 || !(g = rec_alloc(dp))) return -1;
        memset(g->lo, 0, sizeof g->lo);
        memset(g->hi, 0, sizeof g->hi);
        g->isgroup = 1;
        g->cls = c;
        g->hash = h;
        g->gnext = NULL;
        g->gcount = 0;
        uint64_t i = h & dp->mask;
        while (dp->slots[i].rec) i = (i + 1) & dp->mask;
        dp->slots[i].hash = h;
        dp->slots[i].rec = g;
        dp->nrec++;
    }
    r->group = g;
    r->gprev = NULL;
    r->gnext = g->gnext;
    if (g->gnext) g->gnext->gprev = r;
    g->gnext = r;
    g->gcount++;
    return 0;
}

static void group_leave(wsp_deps *dp, wsp_rec *r) {
    wsp_rec *g = r->group;
    if (!g) return;
    if (r->gprev) r->gprev->gnext = r->gnext;
    else g->gnext = r->gnext;
    if (r->gnext) r->gnext->gprev = r->gprev;
    r->group = NULL;
    if (--g->gcount == 0) {
        table_remove(dp, g);
        dp->nrec--;
        rec_free(dp, g);
    }
}

/* The coarse levels of td grew: every record joins the group of the new levels. */
static int regroup(wsp_deps *dp, wsp_tensor_deps *td) {
    for (int32_t k = 0; k < td->nclass; k++)
        for (wsp_rec *r = td->classes[k]->list; r; r = r->cnext) group_leave(dp, r);
    for (int32_t k = 0; k < td->nclass; k++)
        for (wsp_rec *r = td->classes[k]->list; r; r = r->cnext)
            if (group_join(dp, r) != 0) return -1;
    return 0;
}

static void rec_delete(wsp_deps *d, wsp_rec *r) {
    group_leave(d, r);
    table_remove(d, r);
    wsp_class *c = r->cls;
    if (r->cprev) r->cprev->cnext = r->cnext;
    else c->list = r->cnext;
    if (r->cnext) r->cnext->cprev = r->cprev;
    if (--c->nrec == 0) c->unaligned = 0;
    d->tensors[c->tensor].nrec--;
    d->nrec--;
    rec_free(d, r);
}

/* ---- validation ------------------------------------------------------------------------------ */

static int bad_access(wsp_runtime *rt, const wsp_task *task, int i) {
    const wsp_access *a = &task->access[i];
    if (a->tensor < 0 || a->tensor >= rt->ntensors)
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "task of kernel %d (statement %d): access %d names tensor %d, but the "
                          "runtime has %d tensors",
                          task->kernel, task->stmt, i, a->tensor, rt->ntensors);
    if (a->mode != WSP_READ && a->mode != WSP_WRITE && a->mode != WSP_READWRITE)
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "task of kernel %d (statement %d): access %d has mode %d (expected 1, 2 "
                          "or 3)",
                          task->kernel, task->stmt, i, a->mode);
    if (a->ndim < 0 || a->ndim > WSP_MAX_DIMS)
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "task of kernel %d (statement %d): access %d has %d dimensions (at most "
                          "%d)",
                          task->kernel, task->stmt, i, a->ndim, WSP_MAX_DIMS);
    for (int d = 0; d < a->ndim; d++) {
        if (a->lo[d] < 0 || a->hi[d] < a->lo[d] || a->hi[d] > BOX_MAX)
            return wsp__failf(rt, WSP_ERR_USAGE,
                              "task of kernel %d (statement %d): access %d to tensor %d has box "
                              "[%lld, %lld) in dimension %d (need 0 <= lo <= hi <= 2^62)",
                              task->kernel, task->stmt, i, a->tensor, (long long)a->lo[d],
                              (long long)a->hi[d], d);
    }
    return wsp__failf(rt, WSP_ERR_USAGE,
                      "task of kernel %d (statement %d): tensor %d accessed with %d dimensions "
                      "after %d in the same run",
                      task->kernel, task->stmt, a->tensor, a->ndim,
                      rt->deps.tensors[a->tensor].ndim);
}

/* ---- inference ------------------------------------------------------------------------------- */

typedef struct query {
    wsp_runtime *rt;
    wsp_tasknode *t;
    int write;
    int ndim;
    const int64_t *lo, *hi;
    wsp_class *own;
    wsp_rec *exact;
    int await;                  /* wsp__deps_writers: only look for unfinished writers */
    int64_t found;              /* ... and count them here (t: the waiter, or NULL) */
} query;

static inline int overlaps(const wsp_rec *r, const query *q) {
    for (int d = 0; d < q->ndim; d++)
        if (r->lo[d] >= q->hi[d] || q->lo[d] >= r->hi[d]) return 0;
    return 1;
}

/* An awaited box: a record's writer is the one to wait for (a writer waits for the record's
 * earlier writers, WAW, so they are covered), and for a WRITE-mode await (q->write) also the
 * record's readers since that writer (earlier readers are covered: the writer waited for them,
 * WAR). The acquire load of a finished task's closed successor list makes its kernel's memory
 * accesses happen before the caller's (pairing with the exchange in wsp__complete); a task
 * already recycled was synchronised with when it was drained. */
static inline void await_one(query *q, wsp_tasknode *x) {
    if (atomic_load_explicit(&x->h.succ, memory_order_acquire) == WSP_CLOSED) return;
    q->found++;
    if (q->t) wsp__add_edge(q->rt, &x->h, q->t);
}

static void await_overlap(query *q, wsp_rec *r) {
    if (r->writer) await_one(q, r->writer);
    if (q->write)
        for (int32_t i = 0; i < r->nreaders; i++) await_one(q, r->readers[i]);
}

static void on_overlap(query *q, wsp_rec *r) {
    if (__builtin_expect(q->await, 0)) {
        await_overlap(q, r);
        return;
    }
    wsp_tasknode *t = q->t;
    if (r->writer && r->writer != t) wsp__add_edge(q->rt, &r->writer->h, t);
    if (q->write) {
        for (int32_t i = 0; i < r->nreaders; i++)
            if (r->readers[i] != t) wsp__add_edge(q->rt, &r->readers[i]->h, t);
    }
    if (r->cls == q->own && !q->exact) {
        int same = 1;
        for (int d = 0; d < q->ndim && same; d++)
            same = r->lo[d] == q->lo[d] && r->hi[d] == q->hi[d];
        if (same) q->exact = r;
    }
}

/* Records of class c in the cell whose hash is h (the cell itself is checked by overlap). */
static void probe(wsp_deps *dp, query *q, wsp_class *c, uint64_t h) {
    for (uint64_t i = h & dp->mask; dp->slots[i].rec; i = (i + 1) & dp->mask) {
        if (dp->slots[i].hash != h) continue;
        wsp_rec *r = dp->slots[i].rec;
        if (r->cls == c && overlaps(r, q)) on_overlap(q, r);
    }
}

/* The cells at levels `shift` in which a record of class c overlapping q may have its lo:
 * lo[d] .. hi[d] per dimension. Its lo lies in [q.lo - 2^level + 1, q.hi) (in [q.lo, q.hi)
 * when every box of the class is aligned in d: then the range starts at q's own cell). */
static inline void cell_range(const query *q, const wsp_class *c, const uint8_t *shift,
                              int64_t *lo, int64_t *hi) {
    for (int d = 0; d < q->ndim; d++) {
        int64_t from = q->lo[d];
        if (c->unaligned & (1u << d)) {
            from -= ((int64_t)1 << c->level[d]) - 1;
            if (from < 0) from = 0;
        }
        lo[d] = from >> shift[d];
        hi[d] = (q->hi[d] - 1) >> shift[d];
    }
}

/* The next cell of the box lo .. hi (last dimension fastest); 0 after the last. */
static inline int next_cell(int n, int64_t *cell, const int64_t *lo, const int64_t *hi) {
    int d = n - 1;
    while (d >= 0 && cell[d] == hi[d]) {
        cell[d] = lo[d];
        d--;
    }
    if (d < 0) return 0;
    cell[d]++;
    return 1;
}

/* The coarse index instead of `cells` probes, when its groups in range hold fewer records than
 * both the cells and the class (1: done). A query box is no larger than a coarse cell, so it
 * spans at most 3 groups per dimension (2 when aligned); more than 8 in all: not here. */
static int coarse_query(wsp_deps *dp, query *q, wsp_class *c, uint64_t cells) {
    const wsp_tensor_deps *td = &dp->tensors[c->tensor];
    if (!grouped(td, c)) return 0;
    int n = q->ndim;
    int64_t glo[WSP_MAX_DIMS], ghi[WSP_MAX_DIMS], g[WSP_MAX_DIMS];
    uint64_t ng = 1;
    cell_range(q, c, td->glevel, glo, ghi);
    for (int d = 0; d < n && ng <= 8; d++) ng *= (uint64_t)(ghi[d] - glo[d]) + 1;
    if (ng > 8 || ng >= cells) return 0;
    wsp_rec *groups[8];
    int found = 0;
    uint64_t members = 0;
    for (int d = 0; d < n; d++) g[d] = glo[d];
    do {
        wsp_rec *grp = group_find(dp, c, group_hash(c, g));
        if (grp) {
            groups[found++] = grp;
            members += (uint64_t)grp->gcount;
        }
    } while (next_cell(n, g, glo, ghi));
    if (members >= cells || members >= (uint64_t)c->nrec) return 0;
    for (int k = 0; k < found; k++)
        for (wsp_rec *r = groups[k]->gnext; r; r = r->gnext)
            if (overlaps(r, q)) on_overlap(q, r);
    return 1;
}

static void query_class(wsp_deps *dp, query *q, wsp_class *c) {
    int n = q->ndim;
    int64_t klo[WSP_MAX_DIMS], khi[WSP_MAX_DIMS], cell[WSP_MAX_DIMS];
    uint64_t cells = 1;
    int many = 0;
    cell_range(q, c, c->level, klo, khi);
    for (int d = 0; d < n; d++)
        many |= __builtin_mul_overflow(cells, (uint64_t)(khi[d] - klo[d]) + 1, &cells);
    if (!many && cells > 2 && coarse_query(dp, q, c, cells)) return;
    if (many || cells > (uint64_t)c->nrec) {
        for (wsp_rec *r = c->list; r; r = r->cnext)
            if (overlaps(r, q)) on_overlap(q, r);
        return;
    }
    for (int d = 0; d < n; d++) cell[d] = klo[d];
    do probe(dp, q, c, hash_cell(c->tensor, c->id, n, cell));
    while (next_cell(n, cell, klo, khi));
}

/* Whether a query must visit class c: a read conflicts only with writers, so it skips a class
 * whose records have none, except its own (where it may find its exact record). */
static inline int wanted(const query *q, const wsp_class *c) {
    return c->nrec > 0 && (q->write || c->nwriting > 0 || c == q->own);
}

static wsp_class *find_class(wsp_deps *dp, wsp_tensor_deps *td, int32_t tensor, int ndim,
                             uint64_t key) {
    if (td->last && td->last->key == key) return td->last;
    for (int32_t i = 0; i < td->nclass; i++)
        if (td->classes[i]->key == key) return td->last = td->classes[i];
    if (td->nclass == td->capclass) {
        int32_t cap = td->capclass ? td->capclass * 2 : 4;
        wsp_class **nc = realloc(td->classes, (size_t)cap * sizeof *nc);
        if (!nc) return NULL;
        td->classes = nc;
        td->capclass = cap;
    }
    wsp_class *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->key = key;
    c->id = td->nclass;
    c->tensor = tensor;
    c->ndim = ndim;
    int coarser = 0;
    for (int d = 0; d < ndim; d++) {
        c->level[d] = (uint8_t)((key >> (6 * d)) & 63);
        if (c->level[d] > td->glevel[d]) {
            td->glevel[d] = c->level[d];
            coarser = 1;
        }
    }
    td->classes[td->nclass++] = c;
    if (coarser && regroup(dp, td) != 0) return NULL;
    return td->last = c;
}

/* Makes room for one more record (load at most 1/4, so probe runs stay short; if the table
 * cannot grow, up to 7/8 still works). */
static int table_reserve(wsp_deps *dp) {
    if ((uint64_t)(dp->nrec + 1) * 4 <= dp->mask + 1) return 0;
    if (resize_table(dp, (dp->mask + 1) * 2) == 0) return 0;
    return (uint64_t)(dp->nrec + 1) * 8 > (dp->mask + 1) * 7 ? -1 : 0;
}

/* `slot` is an empty slot on h's probe sequence (table_reserve was called), or UINT64_MAX. */
static wsp_rec *insert_record(wsp_deps *dp, wsp_class *c, const query *q, uint64_t h,
                              uint32_t unaligned, uint64_t slot) {
    wsp_rec *r = rec_alloc(dp);
    if (!r) return NULL;
    memcpy(r->lo, q->lo, sizeof r->lo);  /* whole arrays: cheaper than a loop over ndim */
    memcpy(r->hi, q->hi, sizeof r->hi);
    c->unaligned |= unaligned;
    r->cls = c;
    r->hash = h;
    if (slot == UINT64_MAX)
        for (slot = h & dp->mask; dp->slots[slot].rec; slot = (slot + 1) & dp->mask) {
        }
    dp->slots[slot].hash = h;
    dp->slots[slot].rec = r;
    r->cprev = NULL;
    r->cnext = c->list;
    if (c->list) c->list->cprev = r;
    c->list = r;
    c->nrec++;
    dp->tensors[c->tensor].nrec++;
    dp->nrec++;
    return group_join(dp, r) == 0 ? r : NULL;
}

static int add_reader(wsp_rec *r, wsp_tasknode *t) {
    if (r->nreaders == r->capreaders) {
        int32_t cap = r->capreaders * 2;
        wsp_tasknode **nr;
        if (r->readers == r->inl) {
            nr = malloc((size_t)cap * sizeof *nr);
            if (nr) memcpy(nr, r->inl, sizeof r->inl);
        } else {
            nr = realloc(r->readers, (size_t)cap * sizeof *nr);
        }
        if (!nr) return -1;
        r->readers = nr;
        r->capreaders = cap;
    }
    r->readers[r->nreaders] = t;
    return r->nreaders++;
}

/* The fast test of every access; bad_access() finds the words for the first bad one. Unsigned
 * compares fold the range checks: a negative lo or hi shows up as a huge value. */
int wsp__deps_check(wsp_runtime *rt, const wsp_task *task) {
    wsp_tensor_deps *tensors = rt->deps.tensors;
    for (int i = 0; i < task->ntiles; i++) {
        const wsp_access *a = &task->access[i];
        if ((uint32_t)a->tensor >= (uint32_t)rt->ntensors || (uint32_t)(a->mode - 1) >= 3u ||
            (uint32_t)a->ndim > WSP_MAX_DIMS)
            return bad_access(rt, task, i);
        for (int d = 0; d < a->ndim; d++)  /* an early exit: vectorising this short loop costs */
            if ((uint64_t)a->lo[d] > (uint64_t)a->hi[d] || (uint64_t)a->hi[d] > (uint64_t)BOX_MAX)
                return bad_access(rt, task, i);
        int32_t nd = tensors[a->tensor].ndim;
        if (nd >= 0 && nd != a->ndim) return bad_access(rt, task, i);
        tensors[a->tensor].ndim = a->ndim;  /* fixed here, not at registration: a batch registers later */
    }
    return WSP_OK;
}

int wsp__deps_submit(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task) {
    wsp_deps *dp = &rt->deps;
    wsp_reg *regs = wsp__regs(t);
    for (int i = 0; i < task->ntiles; i++) {
        const wsp_access *a = &task->access[i];
        const int n = a->ndim;
        int empty = 0;
        uint64_t key = 0;
        uint32_t unaligned = 0;
        int64_t cell[WSP_MAX_DIMS];
        for (int d = 0; d < n; d++) {
            int64_t lo = a->lo[d], ext = a->hi[d] - lo;
            int L = level_of(ext);
            empty |= ext == 0;
            key |= (uint64_t)L << (6 * d);
            cell[d] = lo >> L;
            unaligned |= (uint32_t)((lo & (((int64_t)1 << L) - 1)) != 0) << d;
        }
        if (empty) continue;  /* an empty box conflicts with nothing */
        wsp_tensor_deps *td = &dp->tensors[a->tensor];
        td->ndim = n;
        query q = {rt, t, (a->mode & WSP_WRITE) != 0, n, a->lo, a->hi, NULL, NULL, 0, 0};
        q.own = find_class(dp, td, a->tensor, n, key);
        if (!q.own || table_reserve(dp) != 0)
            return wsp__failf(rt, WSP_ERR_INTERNAL, "out of memory (dependency records)");
        uint64_t h = hash_cell(a->tensor, q.own->id, n, cell);
        uint64_t slot = UINT64_MAX;
        if (td->nrec == q.own->nrec && !(q.own->unaligned | unaligned)) {
            /* every box of the tensor is aligned in this class: only this cell can overlap, and
             * the probe ends at the slot a new record takes */
            for (slot = h & dp->mask; dp->slots[slot].rec; slot = (slot + 1) & dp->mask) {
                if (dp->slots[slot].hash != h) continue;
                wsp_rec *r = dp->slots[slot].rec;
                if (r->cls == q.own && overlaps(r, &q)) on_overlap(&q, r);
            }
        } else {
            for (int32_t c = 0; c < td->nclass; c++)
                if (wanted(&q, td->classes[c])) query_class(dp, &q, td->classes[c]);
        }
        wsp_rec *r = q.exact;
        if (!r && !(r = insert_record(dp, q.own, &q, h, unaligned, slot)))
            return wsp__failf(rt, WSP_ERR_INTERNAL, "out of memory (dependency records)");
        wsp_reg *reg = NULL;
        for (int k = 0; k < t->nregs && !reg; k++)
            if (regs[k].rec == r) reg = &regs[k];
        if (!reg) {
            reg = &regs[t->nregs++];
            reg->rec = r;
            reg->reader = -1;
        }
        if (q.write) {
            r->cls->nwriting += r->writer == NULL;
            r->writer = t;
            r->nreaders = 0;
            reg->reader = -1;
        } else if (r->writer != t && !(r->nreaders > 0 && r->readers[r->nreaders - 1] == t)) {
            int idx = add_reader(r, t);
            if (idx < 0) return wsp__failf(rt, WSP_ERR_INTERNAL, "out of memory (readers)");
            reg->reader = idx;
        }
    }
    return WSP_OK;
}

void wsp__deps_retire(wsp_deps *dp, wsp_tasknode *t) {
    wsp_reg *regs = wsp__regs(t);
    for (int k = 0; k < t->nregs; k++) {
        wsp_rec *r = regs[k].rec;
        int removed = 0;
        if (r->writer == t) {
            r->writer = NULL;
            r->cls->nwriting--;
            removed = 1;
        }
        int32_t i = regs[k].reader;
        if (i >= 0 && i < r->nreaders && r->readers[i] == t) {
            int32_t last = --r->nreaders;
            if (i != last) {
                wsp_tasknode *m = r->readers[last];
                r->readers[i] = m;
                wsp_reg *mregs = wsp__regs(m);
                for (int j = 0; j < m->nregs; j++)
                    if (mregs[j].rec == r) mregs[j].reader = i;
            }
            removed = 1;
        }
        if (removed && !r->writer && r->nreaders == 0) rec_delete(dp, r);
    }
    t->nregs = 0;
}

/* ---- wsp_await ------------------------------------------------------------------------------- */

int wsp__deps_await_check(wsp_runtime *rt, const wsp_access *a, const char *fn) {
    if (!a) return wsp__failf(rt, WSP_ERR_USAGE, "%s: access is NULL", fn);
    if (a->mode != WSP_READ && a->mode != WSP_WRITE && a->mode != WSP_READWRITE)
        return wsp__failf(rt, WSP_ERR_USAGE, "%s: mode %d (expected 1, 2 or 3)", fn, a->mode);
    if ((uint32_t)a->tensor >= (uint32_t)rt->ntensors)
        return wsp__failf(rt, WSP_ERR_USAGE, "%s: tensor %d, but the runtime has %d tensors", fn,
                          a->tensor, rt->ntensors);
    if ((uint32_t)a->ndim > WSP_MAX_DIMS)
        return wsp__failf(rt, WSP_ERR_USAGE, "%s: %d dimensions (at most %d)", fn, a->ndim,
                          WSP_MAX_DIMS);
    for (int d = 0; d < a->ndim; d++)
        if ((uint64_t)a->lo[d] > (uint64_t)a->hi[d] || (uint64_t)a->hi[d] > (uint64_t)BOX_MAX)
            return wsp__failf(rt, WSP_ERR_USAGE,
                              "%s: box [%lld, %lld) of tensor %d in dimension %d (need 0 <= lo "
                              "<= hi <= 2^62)",
                              fn, (long long)a->lo[d], (long long)a->hi[d], a->tensor, d);
    int32_t nd = rt->deps.tensors[a->tensor].ndim;
    if (nd >= 0 && nd != a->ndim)
        return wsp__failf(rt, WSP_ERR_USAGE,
                          "%s: tensor %d read with %d dimensions after %d in the same run", fn,
                          a->tensor, a->ndim, nd);
    return WSP_OK;
}

int64_t wsp__deps_writers(wsp_runtime *rt, const wsp_access *a, wsp_tasknode *w) {
    wsp_deps *dp = &rt->deps;
    wsp_tensor_deps *td = &dp->tensors[a->tensor];
    if (td->nrec == 0 || td->ndim != a->ndim) return 0;  /* nothing registered (ndim: checked) */
    for (int d = 0; d < a->ndim; d++)
        if (a->lo[d] == a->hi[d]) return 0;  /* an empty box has no writers */
    query q = {rt, w, (a->mode & WSP_WRITE) != 0, a->ndim, a->lo, a->hi, NULL, NULL, 1, 0};
    for (int32_t c = 0; c < td->nclass; c++)
        if (wanted(&q, td->classes[c])) query_class(dp, &q, td->classes[c]);
    return q.found;
}
