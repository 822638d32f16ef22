/* simlog.c: what the cycle model (sim.c) needs of a run, recorded by the submitter.
 *
 * The real run's dependency edges depend on host timing (an edge to a task that already
 * finished is skipped, records are forgotten when nodes are recycled), so the model gets its
 * own: each submitted task is logged with its kernel, dispatcher and stream, and with
 * predecessors inferred from its boxes in enumeration order only.
 *
 * The inference. Per tensor, while every box of it is one aligned tile of a single shape
 * (extents equal, lo a multiple of the extent: boxes are then equal or disjoint, the common case
 * of tiled programs), a hash table maps the tile's coordinates to a record {last writer,
 * readers since}: exact, O(1) per access. The first box that breaks the tiling switches the
 * tensor to one whole-tensor record: that access waits for every task any record names, and
 * from then on every access of the tensor conflicts with every other (conservative: the model
 * never misses an order the program needs, and may add some). A read waits for the writer; a
 * write waits for the writer and the readers, then becomes the writer.
 *
 * Memory: a record per distinct tile written or read in the run (about 48 bytes), a log entry
 * per task (16 bytes) and 8 bytes per edge. Freed at the next wsp_begin or with the runtime.
 */
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

#define INLINE_READERS 2

typedef struct srec {
    uint64_t key;              /* packed tile coordinates */
    int64_t writer;            /* -1: none */
    int32_t nreaders, cap;
    int64_t inl[INLINE_READERS];
    int64_t *more;             /* cap > INLINE_READERS: all readers live here */
} srec;

typedef struct stens {
    int32_t mode;              /* 0: untouched, 1: one tiling, 2: whole-tensor record */
    int32_t ndim;
    int32_t bits;              /* bits per packed coordinate */
    int64_t ext[WSP_MAX_DIMS];
    int64_t *slots;            /* open addressing: record index + 1, 0 empty */
    uint64_t mask;
    int64_t nrec;
    srec whole;                /* mode 2 */
    int64_t dims[WSP_MAX_DIMS];/* the tensor's shape this run (wsp_sim_shapes), or ndims = -1 */
    int32_t ndims;
    srec *dense;               /* known shape, one tiling: a record per tile, by linear index */
    int64_t ndense;
    int64_t tiles[WSP_MAX_DIMS];/* tiles per dimension of the dense table */
    srec *spare;               /* the last run's dense table, zeroed, for reuse */
    int64_t nspare;
} stens;

struct wsp_simlog {
    int32_t ntensors;
    stens *tens;
    srec *recs;
    int64_t nrecs, caprecs;
    wsp_simtask *tasks;
    int64_t ntasks, captasks;
    int64_t *preds;
    int64_t npreds, cappreds;
    int64_t last_pred;         /* of the current task: skips immediate duplicates */
    wsp_machine m;
    wsp_policy p;
    wsp_kcost *costs;
    int32_t nkernels;
    wsp_simsummary summary;
    wsp_simdisp *disp;
    wsp_simresult *results;
    int64_t nresults;
};

static int grow(void **buf, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *nb = realloc(*buf, (size_t)c * size);
    if (!nb) return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

static void rec_clear(srec *r) {
    if (r->cap > INLINE_READERS) free(r->more);
    r->more = NULL;
    r->cap = INLINE_READERS;
    r->nreaders = 0;
    r->writer = -1;
}

static void reset_tensors(wsp_simlog *l) {
    for (int64_t i = 0; i < l->nrecs; i++) rec_clear(&l->recs[i]);
    l->nrecs = 0;
    for (int32_t t = 0; t < l->ntensors; t++) {
        stens *ts = &l->tens[t];
        free(ts->slots);
        rec_clear(&ts->whole);
        for (int64_t i = 0; ts->dense && i < ts->ndense; i++)
            if (ts->dense[i].cap > INLINE_READERS) free(ts->dense[i].more);
        /* the dense table stays for the next run (freeing and mapping tens of MB again per run
         * cost more than the replay: page faults, and TLB shootdowns with the workers running) */
        srec *dense = ts->dense ? ts->dense : ts->spare;  /* never both */
        int64_t ndense = ts->dense ? ts->ndense : ts->nspare;
        if (ts->dense) memset(dense, 0, (size_t)ndense * sizeof *dense);
        memset(ts, 0, sizeof *ts);
        ts->spare = dense;
        ts->nspare = ndense;
        ts->ndims = -1;
        ts->whole.writer = -1;
        ts->whole.cap = INLINE_READERS;
    }
}

wsp_simlog *wsp__simlog_new(int32_t ntensors, const wsp_machine *m, const wsp_policy *p,
                            const wsp_kcost *costs, int32_t nkernels) {
    wsp_simlog *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->ntensors = ntensors;
    l->tens = calloc((size_t)(ntensors > 0 ? ntensors : 1), sizeof *l->tens);
    l->costs = malloc((size_t)(nkernels > 0 ? nkernels : 1) * sizeof *costs);
    l->disp = calloc((size_t)(p->ndispatchers > 0 ? p->ndispatchers : 1), sizeof *l->disp);
    if (!l->tens || !l->costs || !l->disp) {
        wsp__simlog_free(l);
        return NULL;
    }
    if (nkernels > 0) memcpy(l->costs, costs, (size_t)nkernels * sizeof *costs);
    l->nkernels = nkernels;
    l->m = *m;
    l->p = *p;
    reset_tensors(l);
    return l;
}

void wsp__simlog_free(wsp_simlog *l) {
    if (!l) return;
    if (l->tens) {
        reset_tensors(l);
        for (int32_t t = 0; t < l->ntensors; t++) free(l->tens[t].spare);
    }
    free(l->tens);
    free(l->recs);
    free(l->tasks);
    free(l->preds);
    free(l->costs);
    free(l->disp);
    free(l->results);
    free(l);
}

void wsp__simlog_begin(wsp_simlog *l) {
    reset_tensors(l);
    l->ntasks = l->npreds = 0;
    memset(&l->summary, 0, sizeof l->summary);
    l->nresults = 0;
}

int32_t wsp__simlog_dispatchers(const wsp_simlog *l) { return l->p.ndispatchers; }

void wsp__simlog_shape(wsp_simlog *l, int32_t tensor, int32_t ndim, const int64_t *dims) {
    if (tensor < 0 || tensor >= l->ntensors || ndim < 0 || ndim > WSP_MAX_DIMS) return;
    stens *ts = &l->tens[tensor];
    ts->ndims = ndim;
    for (int d = 0; d < ndim; d++) ts->dims[d] = dims[d];
}

/* ---- inference ------------------------------------------------------------------------------ */

static int add_pred(wsp_simlog *l, int64_t j) {
    if (j < 0 || j == l->last_pred || j == l->ntasks) return 0;
    if (grow((void **)&l->preds, &l->cappreds, l->npreds + 1, sizeof *l->preds)) return -1;
    l->preds[l->npreds++] = j;
    l->last_pred = j;
    return 0;
}

static int64_t *readers_of(srec *r) { return r->cap > INLINE_READERS ? r->more : r->inl; }

static int add_reader(srec *r, int64_t k) {
    if (r->nreaders > 0 && readers_of(r)[r->nreaders - 1] == k) return 0;
    if (r->nreaders == r->cap) {
        int32_t cap = r->cap * 2;
        int64_t *m = malloc((size_t)cap * sizeof *m);
        if (!m) return -1;
        memcpy(m, readers_of(r), (size_t)r->nreaders * sizeof *m);
        if (r->cap > INLINE_READERS) free(r->more);
        r->more = m;
        r->cap = cap;
    }
    readers_of(r)[r->nreaders++] = k;
    return 0;
}

/* The edges of one access to record r, then r updated. */
static int access_rec(wsp_simlog *l, srec *r, int write) {
    int64_t k = l->ntasks;
    if (add_pred(l, r->writer)) return -1;
    if (!write) return r->writer == k ? 0 : add_reader(r, k);
    int64_t *rd = readers_of(r);
    for (int32_t i = 0; i < r->nreaders; i++)
        if (add_pred(l, rd[i])) return -1;
    r->nreaders = 0;
    r->writer = k;
    return 0;
}

/* Every task any record of the tensor names becomes a predecessor; the tensor keeps one
 * record from now on, with this task as its writer (it waited for everything before). */
static int to_whole(wsp_simlog *l, stens *ts) {
    for (uint64_t s = 0; ts->slots && s <= ts->mask; s++) {
        if (!ts->slots[s]) continue;
        srec *r = &l->recs[ts->slots[s] - 1];
        if (add_pred(l, r->writer)) return -1;
        int64_t *rd = readers_of(r);
        for (int64_t i = 0; i < r->nreaders; i++)
            if (add_pred(l, rd[i])) return -1;
    }
    for (int64_t i = 0; ts->dense && i < ts->ndense; i++) {
        srec *r = &ts->dense[i];
        if (r->cap == 0) continue;
        if (add_pred(l, r->writer)) return -1;
        int64_t *rd = readers_of(r);
        for (int32_t k = 0; k < r->nreaders; k++)
            if (add_pred(l, rd[k])) return -1;
    }
    free(ts->slots);
    ts->slots = NULL;
    ts->mode = 2;
    return access_rec(l, &ts->whole, 1);
}

/* The slot of a tile: its coordinates in a mixed radix (last dimension fastest) rather than a
 * scrambling hash, so that tiles enumerated one after another land in neighbouring slots (a
 * million-tile run then walks its table instead of missing the cache on every task). */
static uint64_t mix(const stens *ts, uint64_t key) {
    if (ts->bits >= 64) return key;
    uint64_t h = 0, m = ((uint64_t)1 << ts->bits) - 1;
    for (int d = 0; d < ts->ndim; d++)
        h = h * 0x9E3779B1ULL + ((key >> (ts->bits * (ts->ndim - 1 - d))) & m);
    return h;
}

static srec *find_or_add(wsp_simlog *l, stens *ts, uint64_t key) {
    if ((uint64_t)(ts->nrec + 1) * 2 > ts->mask + 1 || !ts->slots) {
        uint64_t size = ts->slots ? (ts->mask + 1) * 2 : 64;
        int64_t *ns = calloc(size, sizeof *ns);
        if (!ns) return NULL;
        for (uint64_t s = 0; ts->slots && s <= ts->mask; s++) {
            if (!ts->slots[s]) continue;
            uint64_t h = mix(ts, l->recs[ts->slots[s] - 1].key) & (size - 1);
            while (ns[h]) h = (h + 1) & (size - 1);
            ns[h] = ts->slots[s];
        }
        free(ts->slots);
        ts->slots = ns;
        ts->mask = size - 1;
    }
    uint64_t h = mix(ts, key) & ts->mask;
    for (; ts->slots[h]; h = (h + 1) & ts->mask)
        if (l->recs[ts->slots[h] - 1].key == key) return &l->recs[ts->slots[h] - 1];
    if (grow((void **)&l->recs, &l->caprecs, l->nrecs + 1, sizeof *l->recs)) return NULL;
    srec *r = &l->recs[l->nrecs++];
    memset(r, 0, sizeof *r);
    r->key = key;
    r->writer = -1;
    r->cap = INLINE_READERS;
    ts->slots[h] = l->nrecs;
    ts->nrec++;
    return r;
}

static int access(wsp_simlog *l, const wsp_access *a) {
    stens *ts = &l->tens[a->tensor];
    int n = a->ndim;
    for (int d = 0; d < n; d++)
        if (a->hi[d] == a->lo[d]) return 0;  /* an empty box conflicts with nothing */
    int write = (a->mode & WSP_WRITE) != 0;
    if (ts->mode == 2) return access_rec(l, &ts->whole, write);
    if (ts->mode == 0) {
        ts->mode = 1;
        ts->ndim = n;
        ts->bits = n > 0 ? 64 / n : 64;
        for (int d = 0; d < n; d++) ts->ext[d] = a->hi[d] - a->lo[d];
    }
    uint64_t key = 0;
    int64_t coord[WSP_MAX_DIMS];
    int tiled = ts->ndim == n;
    for (int d = 0; d < n && tiled; d++) {
        int64_t e = ts->ext[d];
        int64_t c = a->lo[d] / e;
        coord[d] = c;
        tiled = a->hi[d] - a->lo[d] == e && c * e == a->lo[d] &&
                (ts->bits >= 64 || (uint64_t)c < ((uint64_t)1 << ts->bits));
        key = ts->bits >= 64 ? (uint64_t)c : (key << ts->bits) | (uint64_t)c;
    }
    if (!tiled) return to_whole(l, ts);
    if (ts->ndims == n && n > 0 && !ts->slots) {  /* the shape is known: index the tile directly */
        if (!ts->dense) {
            int64_t total = 1;
            for (int d = 0; d < n && total > 0; d++) {
                int64_t tiles = (ts->dims[d] + ts->ext[d] - 1) / ts->ext[d];
                ts->tiles[d] = tiles;
                total = tiles > 0 && total <= ((int64_t)1 << 40) / tiles ? total * tiles : -1;
            }
            if (total > 0 && total <= ((int64_t)1 << 28)) {
                if (ts->spare && ts->nspare >= total) {
                    ts->dense = ts->spare;
                    ts->ndense = ts->nspare;
                } else {
                    free(ts->spare);
                    ts->dense = calloc((size_t)total, sizeof *ts->dense);  /* pages come lazily */
                    if (!ts->dense) return -1;
                    ts->ndense = total;
                }
                ts->spare = NULL;
                ts->nspare = 0;
            } else {
                ts->ndims = -1;
            }
        }
        if (ts->dense) {
            int64_t idx = 0;
            for (int d = 0; d < n; d++) {
                if (coord[d] >= ts->tiles[d]) return to_whole(l, ts);
                idx = idx * ts->tiles[d] + coord[d];
            }
            srec *r = &ts->dense[idx];
            if (r->cap == 0) {  /* first touch */
                r->writer = -1;
                r->cap = INLINE_READERS;
            }
            return access_rec(l, r, write);
        }
    }
    srec *r = find_or_add(l, ts, key);
    return r ? access_rec(l, r, write) : -1;
}

int wsp__simlog_add(wsp_simlog *l, const wsp_task *task, int32_t dispatcher, int32_t stream) {
    if (grow((void **)&l->tasks, &l->captasks, l->ntasks + 1, sizeof *l->tasks)) return WSP_ERR_INTERNAL;
    int64_t first = l->npreds;
    l->last_pred = -1;
    for (int i = 0; i < task->ntiles; i++)
        if (access(l, &task->access[i])) return WSP_ERR_INTERNAL;
    wsp_simtask *t = &l->tasks[l->ntasks++];
    t->kernel = task->kernel;
    t->dispatcher = dispatcher;
    t->stream = stream;
    t->npreds = (int32_t)(l->npreds - first);
    return WSP_OK;
}

/* ---- replay --------------------------------------------------------------------------------- */

int wsp__simlog_replay(wsp_simlog *l, int keep_results, char *err, int32_t errlen) {
    free(l->results);
    l->results = NULL;
    l->nresults = 0;
    if (keep_results && l->ntasks > 0) {
        l->results = malloc((size_t)l->ntasks * sizeof *l->results);
        if (!l->results) return WSP_ERR_INTERNAL;
        l->nresults = l->ntasks;
    }
    memset(l->disp, 0, (size_t)l->p.ndispatchers * sizeof *l->disp);
    return wsp_sim_replay(&l->m, &l->p, l->costs, l->nkernels, l->ntasks, l->tasks, l->preds,
                          l->results, &l->summary, l->disp, err, errlen);
}

const wsp_simsummary *wsp__simlog_summary(const wsp_simlog *l) { return &l->summary; }

const wsp_simdisp *wsp__simlog_disp(const wsp_simlog *l, int32_t *n) {
    *n = l->p.ndispatchers;
    return l->disp;
}

const wsp_simresult *wsp__simlog_results(const wsp_simlog *l, int64_t *n) {
    *n = l->nresults;
    return l->results;
}
