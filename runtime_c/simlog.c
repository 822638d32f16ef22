/* simlog.c: what the cycle model (sim.c) needs of a run, recorded by the submitter.
 *
 * The real run's dependency edges depend on host timing (an edge to a task that already
 * finished is skipped, records are forgotten when nodes are recycled), so the model gets its
 * own: each submitted task is logged with its kernel, dispatcher and stream, and with
 * predecessors inferred from its boxes in enumeration order only.
 *
 * The inference. Per tensor, while every box of it is one aligned tile of a single shape
 * (extents equal, lo a multiple of the extent: boxes are then equal or disjoint, the common case
 * of tiled programs), a record {last writer, readers since} per tile: exact, O(1) per access; a
 * box of several whole tiles counts as an access to each (exact too: multi_tile).
 * The records live in a dense table indexed by the tile's coordinates when the tensor's shape is
 * known (wsp_sim_shape), else in a hash table keyed by them. The first box that breaks the tiling
 * switches the tensor to one whole-tensor record: that access waits for every task any record
 * names, and from then on every access of the tensor conflicts with every other (conservative:
 * the model never misses an order the program needs, and may add some). A read waits for the
 * writer; a write waits for the writer and the readers, then becomes the writer.
 *
 * Awaits. wsp_await (await.c, note_await) reports every await of the run, with the number of
 * tasks enumerated before it, before the host decides whether to block. The log looks up the
 * last writers of the records the awaited box overlaps (a READ-mode await is RAW only: readers
 * do not count; an earlier writer of a tile is a predecessor of its last one, so it is covered)
 * and, for an await whose mode has WSP_WRITE, also the records' readers since their writers
 * (WAR, as a writing task would wait for; earlier readers are the writer's predecessors), and
 * records an enumeration gate (sim.c: the tasks from that index on are produced only once those
 * tasks' completions are seen). A whole-tensor record gives its writer (and readers),
 * conservatively. Tasks that the previous gate already holds are dropped, an await with none
 * left records nothing, and two awaits with no task between them make one gate. Gates and their
 * tasks live in two more grow-only arrays, emptied (not freed) by wsp__simlog_begin. (wsp_probe
 * reports nothing here: it never blocks enumeration.)
 *
 * Cost. This runs on the submitter for every task and the replay in wsp_wait, so both count
 * against the runtime's own per-task cost (benchmarks/tasks.py: the cycle model adds under
 * 100 ns per task). Hence:
 *   - nothing big is allocated, freed or cleared per run: the log, the records, the hash and
 *     dense tables and the replay's working memory (wsp_simws) only grow, and stay for the next
 *     run (a fresh mapping of tens of MB per run costs more in page faults than the replay);
 *   - a run number (`epoch`) in every dense record and hash slot says whether it belongs to
 *     this run, so starting a run clears nothing (on the rare wrap-around every table is zeroed);
 *   - records are 16 bytes with task indices in 32 bits (the replay needs ntasks < 2^31 anyway);
 *     a record's second and later readers go to fixed chunks from a pool with a free list;
 *   - a box that is a tile of a tensor with a dense table (the common case) takes a fast path,
 *     dense_rec: the record's index in one branch-free pass over the dimensions (a shift, not a
 *     division, for power-of-two extents); anything else goes through access();
 *   - the replay gets the predecessors as 32-bit indices and their number, and no copy.
 *
 * Order scopes (wsp_order_*; simlog_order.c): the log mirrors the runtime's scope stacks
 * (per order context) and logs, for each task in a scope, its step group and the barrier it
 * waits for; the replay makes each barrier one node (sim.c). A task outside every scope pays
 * one test (the depth); one in a scope, an entry and a walk up the groups it joins that stops
 * at the first one already marked.
 *
 * Memory: a dense record per tile of a shaped tensor (16 bytes), a record per distinct tile
 * otherwise (24 bytes, plus 16 in the hash table), 8 bytes per record a run touches, a log entry
 * per task (16 bytes), 4 bytes per edge, 16 bytes per gate and 4 per gate writer, 16 bytes per
 * task in an order scope and 9 per step group, the replay's O(ntasks + edges + groups). Kept until the cycle model is disabled
 * or the runtime freed.
 *
 * The limit (wsp_sim_limit). The log is the one part of a run that grows with the task count
 * whatever the tensors are (a loop over a large sym makes a chain of tiny tasks), so it must not
 * grow until the kernel's OOM killer ends the process. The task and edge arrays grow by
 * doubling; before each doubling the room they would then have is priced at
 * WSP_SIM_TASK_BYTES per task and WSP_SIM_EDGE_BYTES per edge (the log's entry and the replay's
 * arrays for it: measured about 57 bytes per task with one edge) and, past the limit, the task
 * fails with WSP_ERR_RECORDS before anything is allocated. A check per doubling, not per task: it
 * costs nothing measurable. Per-tile records are bounded by the tensors, not priced.
 */
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

/* The 16-byte record of one tile (or of a whole tensor). Readers: none, one (`rd`), or, from the
 * second on, a chain of chunks whose newest is `rd` (readers are kept in no particular order:
 * an edge's position among a task's predecessors changes nothing in the replay). */
typedef struct srec {
    uint32_t epoch;            /* dense tables: the run it belongs to; older ones are empty */
    int32_t writer;            /* -1: none */
    int32_t nreaders;
    int32_t rd;                /* nreaders == 1: the reader; > 1: its newest chunk */
} srec;

#define CHUNK_READERS 6
typedef struct rchunk {
    int32_t prev;              /* the older chunk of the same record, -1; on the free list: next */
    int32_t n;
    int32_t r[CHUNK_READERS];
} rchunk;

typedef struct hrec {          /* a hashed tile's record */
    uint64_t key;              /* packed tile coordinates */
    srec r;
} hrec;

typedef struct stens {
    /* this run (reset by wsp__simlog_begin) */
    int32_t mode;              /* 0: untouched, 1: one tiling, 2: whole-tensor record */
    int32_t ndim;
    int32_t bits;              /* bits per packed coordinate */
    int32_t dense_on;          /* the dense table indexes this run's tiles */
    int32_t fast;              /* dense_on and the shape still as at its opening: dense_rec */
    int32_t pow2;              /* every extent is a power of two (2: and there are two) */
    int64_t ext[WSP_MAX_DIMS];
    int32_t shift[WSP_MAX_DIMS];/* log2(ext) when a power of two, else -1 */
    int64_t nrec;              /* hashed records of this run */
    srec whole;                /* mode 2 */
    int64_t dims[WSP_MAX_DIMS];/* the tensor's shape this run (wsp_sim_shape), or ndims = -1 */
    int32_t ndims;
    int64_t tiles[WSP_MAX_DIMS];/* tiles per dimension of the dense table */
    int64_t lim[WSP_MAX_DIMS]; /* coordinates below it are tiled and in the table */
    int64_t ndense;            /* tiles of the dense table this run */
    int64_t ntouched;          /* entries of `touched` this run */
    /* kept between runs */
    int64_t *touched;          /* the records this run made: a dense index, or -(hashed + 1) */
    int64_t captouched;
    uint64_t *slots;           /* open addressing: epoch << 32 | (record index + 1); another
                                  run's entry counts as empty */
    uint64_t mask;
    srec *dense;               /* a record per tile, by linear index */
    int64_t capdense;
} stens;

int wsp__grow(void **buf, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    if ((uint64_t)c > SIZE_MAX / size) return -1;
    void *nb = realloc(*buf, (size_t)c * size);
    if (!nb) return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

static const srec EMPTY_REC = {0, -1, 0, 0};

static void reset_tensors(wsp_simlog *l) {
    l->nrecs = 0;
    l->nchunks = 0;
    l->free_chunk = -1;
    if (++l->epoch == 0) {
        /* after 2^32 - 1 runs: entries of run 1 would look current again */
        l->epoch = 1;
        for (int32_t t = 0; t < l->ntensors; t++) {
            stens *ts = &l->tens[t];
            if (ts->slots) memset(ts->slots, 0, (size_t)(ts->mask + 1) * sizeof *ts->slots);
            if (ts->dense) memset(ts->dense, 0, (size_t)ts->capdense * sizeof *ts->dense);
        }
    }
    for (int32_t t = 0; t < l->ntensors; t++) {
        stens *ts = &l->tens[t];
        ts->mode = 0;
        ts->ndim = 0;
        ts->dense_on = 0;
        ts->fast = 0;
        ts->nrec = 0;
        ts->ndense = 0;
        ts->ntouched = 0;
        ts->whole = EMPTY_REC;
        ts->ndims = -1;
    }
}

wsp_simlog *wsp__simlog_new(int32_t ntensors, const wsp_machine *m, const wsp_policy *p,
                            const wsp_kcost *costs, int32_t nkernels) {
    wsp_simlog *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->ntensors = ntensors;
    l->tens = calloc((size_t)(ntensors > 0 ? ntensors : 1), sizeof *l->tens);
    l->costs = malloc((size_t)(nkernels > 0 ? nkernels : 1) * sizeof *costs);
    /* each device has the schedule's dispatchers (its AICPUs): the replay numbers them
     * device by device (wsp_simtask) */
    int64_t ndev = m->devices > 1 ? m->devices : 1;
    if (p->ndispatchers > 0 && (int64_t)p->ndispatchers * ndev > INT32_MAX / 2) {
        free(l);
        return NULL;
    }
    l->disp = calloc((size_t)(p->ndispatchers > 0 ? p->ndispatchers * ndev : 1), sizeof *l->disp);
    if (!l->tens || !l->costs || !l->disp) {
        wsp__simlog_free(l);
        return NULL;
    }
    if (nkernels > 0) memcpy(l->costs, costs, (size_t)nkernels * sizeof *costs);
    l->nkernels = l->nbase = nkernels;
    l->capcosts = nkernels > 0 ? nkernels : 1;
    l->m = *m;
    l->p = *p;
    l->ndpd = p->ndispatchers;
    l->p.ndispatchers = (int32_t)(p->ndispatchers * ndev);
    reset_tensors(l);
    return l;
}

void wsp__simlog_free(wsp_simlog *l) {
    if (!l) return;
    for (int32_t t = 0; l->tens && t < l->ntensors; t++) {
        free(l->tens[t].slots);
        free(l->tens[t].dense);
        free(l->tens[t].touched);
    }
    free(l->tens);
    free(l->recs);
    free(l->chunks);
    free(l->tasks);
    free(l->prio);
    free(l->gbar);
    free(l->who);
    free(l->ptens);
    free(l->acc);
    free(l->accat);
    free(l->named);
    free(l->namedat);
    free(l->seen);
    free(l->stack);
    free(l->preds);
    free(l->gates);
    free(l->gw);
    for (int32_t i = 0; l->ctxs && i < l->capctx; i++)
        if (i != l->cur) free(l->ctxs[i].sc);
    free(l->ctxs);
    free(l->sc);
    free(l->groups);
    free(l->gused);
    free(l->memb);
    free(l->costs);
    free(l->vkey);
    free(l->vidx);
    free(l->disp);
    free(l->results);
    wsp__simws_free(l->ws);
    free(l);
}

void wsp__simlog_begin(wsp_simlog *l) {
    reset_tensors(l);
    l->ntasks = l->npreds = 0;
    l->ngates = l->ngw = 0;
    /* every context ended, context 0 current and empty (the runtime's state at wsp_begin) */
    wsp__simlog_order_switch(l, 0);
    for (int32_t i = 0; i < l->capctx; i++) l->ctxs[i].depth = l->ctxs[i].borrowed = 0;
    l->depth = l->borrowed = 0;
    l->ngroups = l->nmemb = 0;
    l->nkernels = l->nbase;  /* the per-task cost entries are this run's */
    if (l->capv) memset(l->vidx, 0xff, (size_t)l->capv * sizeof *l->vidx);
    l->oom = 0;
    l->over = 0;
    memset(&l->summary, 0, sizeof l->summary);
    l->nresults = 0;
}

int32_t wsp__simlog_dispatchers(const wsp_simlog *l) { return l->ndpd; }   /* per device */

void wsp__simlog_limit(wsp_simlog *l, int64_t bytes) { l->limit = bytes > 0 ? bytes : 0; }

int wsp__simlog_over(const wsp_simlog *l) { return l->over; }

/* Whether room for `tasks` tasks and `edges` edges stays within the limit (else l->over). */
static __attribute__((noinline)) int fits(wsp_simlog *l, int64_t tasks, int64_t edges) {
    if (l->limit > 0 && (double)tasks * WSP_SIM_TASK_BYTES + (double)edges * WSP_SIM_EDGE_BYTES >
                            (double)l->limit) {
        l->over = 1;
        return 0;
    }
    return 1;
}

/* The next doubling of a grow-only array of `cap` elements (wsp__grow's rule). */
static inline int64_t doubled(int64_t cap) { return cap ? 2 * cap : 1024; }

void wsp__simlog_shape(wsp_simlog *l, int32_t tensor, int32_t ndim, const int64_t *dims) {
    if (tensor < 0 || tensor >= l->ntensors || ndim < 0 || ndim > WSP_MAX_DIMS) return;
    stens *ts = &l->tens[tensor];
    ts->ndims = ndim;
    ts->fast = 0;   /* access() decides what a shape given late means */
    for (int d = 0; d < ndim; d++) ts->dims[d] = dims[d];
}

/* ---- inference ------------------------------------------------------------------------------ */

/* j becomes a predecessor of the task being added (not itself, and not twice in a row) */
static inline int add_pred(wsp_simlog *l, int32_t j) {
    if (j < 0 || j == l->last_pred || j == (int32_t)l->ntasks) return 0;
    if (__builtin_expect(l->npreds == l->cappreds, 0) &&
        (!fits(l, l->captasks, doubled(l->cappreds)) ||
         wsp__grow((void **)&l->preds, &l->cappreds, l->npreds + 1, sizeof *l->preds)))
        return -1;
    l->preds[l->npreds++] = j;
    l->last_pred = j;
    return 0;
}

/* every reader of r becomes a predecessor */
static __attribute__((noinline)) int readers_to_preds(wsp_simlog *l, const srec *r) {
    if (r->nreaders == 1) return add_pred(l, r->rd);
    if (r->nreaders == 0) return 0;
    for (int32_t c = r->rd; c >= 0; c = l->chunks[c].prev)
        for (int32_t i = 0; i < l->chunks[c].n; i++)
            if (add_pred(l, l->chunks[c].r[i])) return -1;
    return 0;
}

/* r forgets its readers; their chunks go back to the pool */
static void clear_readers(wsp_simlog *l, srec *r) {
    if (r->nreaders > 1) {
        int32_t c = r->rd;
        while (l->chunks[c].prev >= 0) c = l->chunks[c].prev;
        l->chunks[c].prev = l->free_chunk;
        l->free_chunk = r->rd;
    }
    r->nreaders = 0;
}

static __attribute__((noinline)) int add_reader_more(wsp_simlog *l, srec *r, int32_t k);

static inline int add_reader(wsp_simlog *l, srec *r, int32_t k) {
    if (r->nreaders == 0) {
        r->rd = k;
        r->nreaders = 1;
        return 0;
    }
    return add_reader_more(l, r, k);
}

/* a second or later reader */
static __attribute__((noinline)) int add_reader_more(wsp_simlog *l, srec *r, int32_t k) {
    if (r->nreaders == 1) {
        if (r->rd == k) return 0;
    } else {
        rchunk *c = &l->chunks[r->rd];
        if (c->r[c->n - 1] == k) return 0;
        if (c->n < CHUNK_READERS) {
            c->r[c->n++] = k;
            r->nreaders++;
            return 0;
        }
    }
    /* a new chunk: for the second reader (the first moves in with it), or the last one is full */
    int32_t ci = l->free_chunk;
    if (ci >= 0) {
        l->free_chunk = l->chunks[ci].prev;
    } else {
        if (l->nchunks >= INT32_MAX ||
            wsp__grow((void **)&l->chunks, &l->capchunks, l->nchunks + 1, sizeof *l->chunks))
            return -1;
        ci = (int32_t)l->nchunks++;
    }
    rchunk *c = &l->chunks[ci];
    if (r->nreaders == 1) {
        c->prev = -1;
        c->n = 2;
        c->r[0] = r->rd;
        c->r[1] = k;
    } else {
        c->prev = r->rd;
        c->n = 1;
        c->r[0] = k;
    }
    r->rd = ci;
    r->nreaders++;
    return 0;
}

/* The edges of one access to record r, then r updated. */
static inline int access_rec(wsp_simlog *l, srec *r, int write) {
    int32_t k = (int32_t)l->ntasks;
    if (add_pred(l, r->writer)) return -1;
    if (!write) return r->writer == k ? 0 : add_reader(l, r, k);
    if (r->nreaders) {
        if (readers_to_preds(l, r)) return -1;
        clear_readers(l, r);
    }
    r->writer = k;
    return 0;
}

/* Notes a record made in this run (entry: see stens.touched), for to_whole; on failure the log
 * is marked unusable, and the next wsp__simlog_add fails. */
static void touch(wsp_simlog *l, stens *ts, int64_t entry) {
    if (wsp__grow((void **)&ts->touched, &ts->captouched, ts->ntouched + 1, sizeof *ts->touched)) {
        l->oom = 1;
        return;
    }
    ts->touched[ts->ntouched++] = entry;
}

/* Every task any record of the tensor names becomes a predecessor; the tensor keeps one
 * record from now on, with this task as its writer (it waited for everything before). The
 * records are those this run touched: the tables themselves may be far larger (a dense table
 * of a KV cache has a record per row of every sequence). */
static int to_whole(wsp_simlog *l, stens *ts) {
    for (int64_t i = 0; i < ts->ntouched; i++) {
        int64_t e = ts->touched[i];
        srec *r = e >= 0 ? &ts->dense[e] : &l->recs[-e - 1].r;
        if (add_pred(l, r->writer) || readers_to_preds(l, r)) return -1;
    }
    ts->ntouched = 0;
    ts->nrec = 0;
    ts->dense_on = 0;
    ts->fast = 0;
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
    const uint64_t ep = (uint64_t)l->epoch << 32;
    if (!ts->slots || (uint64_t)(ts->nrec + 1) * 2 > ts->mask + 1) {
        /* grow (this run's entries move; entries of earlier runs are dropped) */
        uint64_t size = ts->slots ? (ts->mask + 1) * 2 : 64;
        uint64_t *ns = calloc(size, sizeof *ns);
        if (!ns) return NULL;
        for (uint64_t s = 0; ts->nrec > 0 && s <= ts->mask; s++) {
            if ((ts->slots[s] >> 32) != (uint64_t)l->epoch) continue;
            uint64_t h = mix(ts, l->recs[(uint32_t)ts->slots[s] - 1].key) & (size - 1);
            while (ns[h]) h = (h + 1) & (size - 1);
            ns[h] = ts->slots[s];
        }
        free(ts->slots);
        ts->slots = ns;
        ts->mask = size - 1;
    }
    uint64_t h = mix(ts, key) & ts->mask;
    for (; (ts->slots[h] & ~(uint64_t)UINT32_MAX) == ep; h = (h + 1) & ts->mask)
        if (l->recs[(uint32_t)ts->slots[h] - 1].key == key)
            return &l->recs[(uint32_t)ts->slots[h] - 1].r;
    if (l->nrecs >= UINT32_MAX - 1 ||
        wsp__grow((void **)&l->recs, &l->caprecs, l->nrecs + 1, sizeof *l->recs))
        return NULL;
    hrec *r = &l->recs[l->nrecs++];
    r->key = key;
    r->r = EMPTY_REC;
    ts->slots[h] = ep | (uint64_t)l->nrecs;
    ts->nrec++;
    touch(l, ts, -l->nrecs);
    return &r->r;
}

/* The dense table of a tensor whose shape is known, at its first tiled access of the run; 0 if
 * the shape makes no sensible table (then it is hashed). */
static int dense_open(stens *ts, int n) {
    int64_t total = 1;
    for (int d = 0; d < n && total > 0; d++) {
        int64_t tiles = (ts->dims[d] + ts->ext[d] - 1) / ts->ext[d];
        ts->tiles[d] = tiles;
        total = tiles > 0 && total <= ((int64_t)1 << 40) / tiles ? total * tiles : -1;
    }
    if (total <= 0 || total > ((int64_t)1 << 28)) return 0;
    if (ts->capdense < total) {
        /* zeroed (epoch 0: empty); its pages come lazily */
        srec *nd = calloc((size_t)total, sizeof *nd);
        if (!nd) return 0;
        free(ts->dense);
        ts->dense = nd;
        ts->capdense = total;
    }
    ts->ndense = total;
    ts->dense_on = 1;
    ts->fast = 1;
    /* a coordinate that overflows the packed key sends access() to to_whole even with a table:
     * dense_rec leaves such boxes to access() */
    for (int d = 0; d < n; d++) {
        int64_t fit = ts->bits < 64 ? (int64_t)1 << ts->bits : INT64_MAX;
        ts->lim[d] = ts->tiles[d] < fit ? ts->tiles[d] : fit;
    }
    return 1;
}

static int access(wsp_simlog *l, const wsp_access *a);

/* A box of several whole tiles of the tensor's tiling (in each dimension it starts on a tile
 * boundary and spans a whole number of tiles): one access per tile, exactly what one task per
 * tile would log, so the tiling survives (a device's collective reading every tile the one
 * before it wrote, ir/collective_tiles.py). Past MULTI_TILES tiles, or for any other box, the
 * whole-tensor record. */
#define MULTI_TILES 4096
static int multi_tile(wsp_simlog *l, stens *ts, const wsp_access *a) {
    int n = ts->ndim;
    int64_t first[WSP_MAX_DIMS], count[WSP_MAX_DIMS], c[WSP_MAX_DIMS], total = 1;
    for (int d = 0; d < n; d++) {
        int64_t e = ts->ext[d], lo = a->lo[d], span = a->hi[d] - lo;
        if (lo % e != 0 || span % e != 0) return to_whole(l, ts);
        first[d] = lo / e;
        count[d] = span / e;
        total *= count[d];
        if (total > MULTI_TILES) return to_whole(l, ts);
        c[d] = 0;
    }
    wsp_access t = *a;
    for (int64_t i = 0; i < total; i++) {
        for (int d = 0; d < n; d++) {
            t.lo[d] = (first[d] + c[d]) * ts->ext[d];
            t.hi[d] = t.lo[d] + ts->ext[d];
        }
        int rc = access(l, &t);   /* one tile: access() takes it without coming back here */
        if (rc || ts->mode == 2) return rc;   /* (a coordinate past the table went whole) */
        for (int d = n - 1; d >= 0 && ++c[d] == count[d]; d--) c[d] = 0;
    }
    return 0;
}

static __attribute__((noinline)) int access(wsp_simlog *l, const wsp_access *a) {
    stens *ts = &l->tens[a->tensor];
    int n = a->ndim;
    for (int d = 0; d < n; d++)
        if (a->hi[d] == a->lo[d]) return 0;  /* an empty box conflicts with nothing */
    int write = (a->mode & WSP_WRITE) != 0;
    if (ts->mode == 2) return access_rec(l, &ts->whole, write);
    if (ts->mode == 0) {   /* (multi_tile only ever sees a tensor already tiled) */
        ts->mode = 1;
        ts->ndim = n;
        ts->bits = n > 0 ? 64 / n : 64;
        ts->pow2 = 1;
        for (int d = 0; d < n; d++) {
            int64_t e = a->hi[d] - a->lo[d];
            ts->ext[d] = e;
            ts->shift[d] = (e & (e - 1)) == 0 ? __builtin_ctzll((uint64_t)e) : -1;
            ts->pow2 &= ts->shift[d] >= 0;
        }
        if (ts->pow2 && n == 2) ts->pow2 = 2;
    }
    if (ts->ndim != n) return to_whole(l, ts);
    uint64_t key = 0;
    int64_t coord[WSP_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        /* lo >= 0 (wsp__deps_check), so a shift divides */
        int64_t e = ts->ext[d], lo = a->lo[d];
        int64_t c = ts->shift[d] >= 0 ? lo >> ts->shift[d] : lo / e;
        coord[d] = c;
        if (a->hi[d] - lo != e || c * e != lo) return multi_tile(l, ts, a);
        if (ts->bits < 64 && (uint64_t)c >= ((uint64_t)1 << ts->bits)) return to_whole(l, ts);
        key = ts->bits >= 64 ? (uint64_t)c : (key << ts->bits) | (uint64_t)c;
    }
    if (ts->ndims == n && n > 0 && ts->nrec == 0 && (ts->dense_on || dense_open(ts, n))) {
        /* the shape is known: the tile's record by its linear index */
        int64_t idx = 0;
        for (int d = 0; d < n; d++) {
            if (coord[d] >= ts->tiles[d]) return to_whole(l, ts);
            idx = idx * ts->tiles[d] + coord[d];
        }
        srec *r = &ts->dense[idx];
        if (r->epoch != l->epoch) {  /* first touch in this run */
            *r = EMPTY_REC;
            r->epoch = l->epoch;
            touch(l, ts, idx);
        }
        return access_rec(l, r, write);
    }
    if (ts->ndims == n && n > 0 && !ts->dense_on) ts->ndims = -1;  /* no table: hash from now on */
    srec *r = find_or_add(l, ts, key);
    return r ? access_rec(l, r, write) : -1;
}

/* The fast path of access() for the common case: tensor a->tensor is tiled with a dense table
 * and the box is one of its tiles. Returns the tile's record, or NULL when access() must decide
 * (it then starts from scratch: nothing was changed here). Branch-free per dimension; the
 * index is computed unsigned (a bad box's may wrap, and is not used). */
static inline srec *dense_rec(wsp_simlog *l, stens *ts, const wsp_access *a) {
    uint64_t idx = 0, bad = 0;
    if (ts->pow2 == 2) {   /* two dimensions (tiles of a matrix, the most common): unrolled */
        int64_t lo0 = a->lo[0], lo1 = a->lo[1], c0 = lo0 >> ts->shift[0], c1 = lo1 >> ts->shift[1];
        bad = (uint64_t)((a->hi[0] - lo0) ^ ts->ext[0]) | (uint64_t)(lo0 & (ts->ext[0] - 1)) |
              (uint64_t)((a->hi[1] - lo1) ^ ts->ext[1]) | (uint64_t)(lo1 & (ts->ext[1] - 1)) |
              (uint64_t)(c0 >= ts->lim[0]) | (uint64_t)(c1 >= ts->lim[1]);
        idx = (uint64_t)c0 * (uint64_t)ts->tiles[1] + (uint64_t)c1;
    } else if (ts->pow2) {
        for (int d = 0; d < ts->ndim; d++) {
            int64_t lo = a->lo[d], e = ts->ext[d], c = lo >> ts->shift[d];
            bad |= (uint64_t)((a->hi[d] - lo) ^ e) | (uint64_t)(lo & (e - 1)) |
                   (uint64_t)(c >= ts->lim[d]);
            idx = idx * (uint64_t)ts->tiles[d] + (uint64_t)c;
        }
    } else {
        for (int d = 0; d < ts->ndim; d++) {
            int64_t lo = a->lo[d], e = ts->ext[d], c = lo / e;
            bad |= (uint64_t)((a->hi[d] - lo) ^ e) | (uint64_t)(lo - c * e) |
                   (uint64_t)(c >= ts->lim[d]);
            idx = idx * (uint64_t)ts->tiles[d] + (uint64_t)c;
        }
    }
    if (bad) return NULL;
    srec *r = &ts->dense[idx];
    if (r->epoch != l->epoch) {  /* first touch in this run */
        *r = EMPTY_REC;
        r->epoch = l->epoch;
        touch(l, ts, (int64_t)idx);
    }
    return r;
}


int wsp__simlog_add(wsp_simlog *l, const wsp_task *task, int32_t dispatcher, int32_t stream) {
    if (__builtin_expect(task->device != 0, 0) &&
        (task->device < 0 || task->device >= (l->m.devices > 1 ? l->m.devices : 1)))
        return WSP_ERR_USAGE;   /* generated code numbers devices of the mesh the model has */
    if (__builtin_expect(l->ntasks == l->captasks || l->oom, 0)) {
        /* task indices are 32-bit here and in the replay, which takes fewer than 2^31 - 1 */
        if (!l->oom && l->ntasks >= INT32_MAX - 1) l->over = 2;
        if (l->oom || l->over || !fits(l, doubled(l->captasks), l->cappreds) ||
            wsp__grow((void **)&l->tasks, &l->captasks, l->ntasks + 1, sizeof *l->tasks))
            return l->over ? WSP_ERR_RECORDS : WSP_ERR_INTERNAL;
    }
    int64_t first = l->npreds;
    l->last_pred = -1;
    const int explicit_deps = l->p.deps == WSP_DEPS_EXPLICIT;
    for (const wsp_access *a = task->access, *end = a + task->ntiles; a < end; a++) {
        stens *ts = &l->tens[a->tensor];
        srec *r = ts->fast && a->ndim == ts->ndim ? dense_rec(l, ts, a) : NULL;
        int64_t before = l->npreds;
        if (r ? access_rec(l, r, (a->mode & WSP_WRITE) != 0) : access(l, a)) {
            l->oom = 1;  /* the records may be half updated: the log is unusable */
            return l->over ? WSP_ERR_RECORDS : WSP_ERR_INTERNAL;
        }
        if (__builtin_expect(explicit_deps, 0) && wsp__explicit_note(l, before, a->tensor)) {
            l->oom = 1;
            return WSP_ERR_INTERNAL;
        }
    }
    if (__builtin_expect(l->depth > 0, 0) && wsp__simlog_order_note(l)) {
        l->oom = 1;
        return WSP_ERR_INTERNAL;
    }
    if (__builtin_expect(explicit_deps, 0)) {
        int rc = wsp__explicit_check(l, task, first, stream);
        if (rc) return rc;  /* the log is still whole: the run fails for the program's fault */
    }
    if (__builtin_expect(l->p.ready == WSP_READY_PRIORITY, 0)) {  /* its key, for the replay */
        if (wsp__grow((void **)&l->prio, &l->capprio, l->ntasks + 1, sizeof *l->prio)) {
            l->oom = 1;
            return WSP_ERR_INTERNAL;
        }
        l->prio[l->ntasks] = task->priority;
    }
    int32_t kernel = task->kernel;
    if (__builtin_expect(l->p.task_cycles != WSP_TASK_CYCLES_NONE, 0) && kernel >= 0 &&
        kernel < l->nbase) {
        int64_t c = task->cycles;
        if (l->p.task_cycles == WSP_TASK_CYCLES_ADD)
            c = c > 0 ? (c > INT64_MAX - l->costs[kernel].cycles ? INT64_MAX
                                                                 : l->costs[kernel].cycles + c)
                      : l->costs[kernel].cycles;
        if ((kernel = wsp__simlog_task_entry(l, kernel, c)) < 0) {
            l->oom = 1;
            return WSP_ERR_INTERNAL;
        }
    }
    wsp_simtask *t = &l->tasks[l->ntasks++];
    t->kernel = kernel;
    t->dispatcher = task->device * l->ndpd + dispatcher;
    t->stream = stream;
    t->npreds = (int32_t)(l->npreds - first);
    return WSP_OK;
}

/* ---- wsp_await: enumeration gates -------------------------------------------------------------
 * The writers of an awaited box are the last writers of the records it overlaps (an earlier
 * writer of a tile is a predecessor of its last one: covered); a WRITE-mode await adds those
 * records' readers (gate_readers). A tensor in one tiling: the tiles the box overlaps (dense
 * table: by linear index; hashed: looked up tile by tile, or the table scanned when the box
 * spans more tiles than it holds). A whole-tensor record: its writer and readers (conservative,
 * as every access of such a tensor). */

static int push_writer(wsp_simlog *l, int32_t w) {
    if (w < 0) return 0;
    if (__builtin_expect(l->ngw == l->capgw, 0) &&
        wsp__grow((void **)&l->gw, &l->capgw, l->ngw + 1, sizeof *l->gw))
        return -1;
    l->gw[l->ngw++] = w;
    return 0;
}

/* r's writer, and its readers when the await being logged writes (l->gate_readers) */
static int push_rec(wsp_simlog *l, const srec *r) {
    if (push_writer(l, r->writer)) return -1;
    if (!l->gate_readers || r->nreaders == 0) return 0;
    if (r->nreaders == 1) return push_writer(l, r->rd);
    for (int32_t c = r->rd; c >= 0; c = l->chunks[c].prev)
        for (int32_t i = 0; i < l->chunks[c].n; i++)
            if (push_writer(l, l->chunks[c].r[i])) return -1;
    return 0;
}

/* the record of a hashed tile, or NULL (adds nothing) */
static const srec *find_rec(const wsp_simlog *l, const stens *ts, uint64_t key) {
    if (!ts->slots || ts->nrec == 0) return NULL;
    const uint64_t ep = (uint64_t)l->epoch << 32;
    for (uint64_t h = mix(ts, key) & ts->mask; (ts->slots[h] & ~(uint64_t)UINT32_MAX) == ep;
         h = (h + 1) & ts->mask)
        if (l->recs[(uint32_t)ts->slots[h] - 1].key == key)
            return &l->recs[(uint32_t)ts->slots[h] - 1].r;
    return NULL;
}

/* The writers of every tile in [c0[d], c1[d]] (inclusive, c0 <= c1) of a tiled tensor. */
static int tile_writers(wsp_simlog *l, const stens *ts, const int64_t *c0, const int64_t *c1) {
    int n = ts->ndim;
    if (ts->dense_on) {
        int64_t hi[WSP_MAX_DIMS], c[WSP_MAX_DIMS];
        int any = 1;
        for (int d = 0; d < n; d++) {
            hi[d] = c1[d] < ts->tiles[d] - 1 ? c1[d] : ts->tiles[d] - 1;
            c[d] = c0[d];
            any &= c0[d] <= hi[d];
        }
        while (any) {   /* an odometer over the tiles, last dimension fastest */
            int64_t idx = 0;
            for (int d = 0; d < n; d++) idx = idx * ts->tiles[d] + c[d];
            const srec *r = &ts->dense[idx];
            if (r->epoch == l->epoch && push_rec(l, r)) return -1;
            int d = n - 1;
            for (; d >= 0 && c[d] == hi[d]; d--) c[d] = c0[d];
            if (d < 0) break;
            c[d]++;
        }
    }
    if (ts->nrec == 0) return 0;
    /* hashed: the tiles the box spans (coordinates beyond the packed key's range are not
     * recorded), or every record when that is fewer */
    int64_t hi[WSP_MAX_DIMS], c[WSP_MAX_DIMS];
    uint64_t span = 1;
    int any = 1;
    for (int d = 0; d < n; d++) {
        int64_t fit = ts->bits < 64 ? ((int64_t)1 << ts->bits) - 1 : INT64_MAX;
        hi[d] = c1[d] < fit ? c1[d] : fit;
        c[d] = c0[d];
        any &= c0[d] <= hi[d];
        uint64_t w = any ? (uint64_t)(hi[d] - c0[d]) + 1 : 1;
        span = span > ((uint64_t)1 << 62) / w ? (uint64_t)1 << 62 : span * w;
    }
    if (!any) return 0;
    if (span > (uint64_t)ts->nrec) {
        uint64_t m = ts->bits < 64 ? ((uint64_t)1 << ts->bits) - 1 : ~(uint64_t)0;
        for (uint64_t s = 0; s <= ts->mask; s++) {
            if ((uint32_t)(ts->slots[s] >> 32) != l->epoch) continue;
            const hrec *h = &l->recs[(uint32_t)ts->slots[s] - 1];
            int in = 1;
            for (int d = 0; d < n && in; d++) {
                int64_t x = (int64_t)(ts->bits >= 64 ? h->key
                                                     : (h->key >> (ts->bits * (n - 1 - d))) & m);
                in = x >= c0[d] && x <= hi[d];
            }
            if (in && push_rec(l, &h->r)) return -1;
        }
        return 0;
    }
    for (;;) {
        uint64_t key = 0;
        for (int d = 0; d < n; d++)
            key = ts->bits >= 64 ? (uint64_t)c[d] : (key << ts->bits) | (uint64_t)c[d];
        const srec *r = find_rec(l, ts, key);
        if (r && push_rec(l, r)) return -1;
        int d = n - 1;
        for (; d >= 0 && c[d] == hi[d]; d--) c[d] = c0[d];
        if (d < 0) break;
        c[d]++;
    }
    return 0;
}

/* Every writer (and reader, when the await writes) any record of the tensor names (a box the
 * tiling cannot place). */
static int all_writers(wsp_simlog *l, const stens *ts) {
    for (uint64_t s = 0; ts->nrec > 0 && s <= ts->mask; s++)
        if ((uint32_t)(ts->slots[s] >> 32) == l->epoch &&
            push_rec(l, &l->recs[(uint32_t)ts->slots[s] - 1].r))
            return -1;
    for (int64_t i = 0; ts->dense_on && i < ts->ndense; i++)
        if (ts->dense[i].epoch == l->epoch && push_rec(l, &ts->dense[i])) return -1;
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* sorts gw[from .. ngw) and drops duplicates, and those in sorted[0 .. n) */
static void gate_unique(wsp_simlog *l, int64_t from, const int32_t *sorted, int64_t n) {
    int32_t *w = l->gw + from;
    int64_t m = l->ngw - from, out = 0, j = 0;
    if (m > 1) qsort(w, (size_t)m, sizeof *w, cmp_i32);
    for (int64_t i = 0; i < m; i++) {
        if (out > 0 && w[out - 1] == w[i]) continue;
        while (j < n && sorted[j] < w[i]) j++;
        if (j < n && sorted[j] == w[i]) continue;
        w[out++] = w[i];
    }
    l->ngw = from + out;
}

static int simlog_await(wsp_simlog *l, const wsp_access *a) {
    stens *ts = &l->tens[a->tensor];
    int n = a->ndim;
    for (int d = 0; d < n; d++)
        if (a->hi[d] <= a->lo[d]) return 0;   /* an empty box has no writers */
    int64_t first = l->ngw;
    l->gate_readers = (a->mode & WSP_WRITE) != 0;
    if (ts->mode == 2) {
        if (push_rec(l, &ts->whole)) return -1;
    } else if (ts->mode == 1) {
        if (n != ts->ndim) {
            if (all_writers(l, ts)) return -1;
        } else {
            int64_t c0[WSP_MAX_DIMS], c1[WSP_MAX_DIMS];
            for (int d = 0; d < n; d++) {
                c0[d] = a->lo[d] / ts->ext[d];
                c1[d] = (a->hi[d] - 1) / ts->ext[d];
            }
            if (tile_writers(l, ts, c0, c1)) return -1;
        }
    }
    if (l->ngw == first) return 0;
    /* the previous gate's writers gate this one's tasks already; at the same index, the two
     * gates are one */
    wsp_simgate *prev = l->ngates > 0 ? &l->gates[l->ngates - 1] : NULL;
    int64_t poff = prev ? first - prev->nwriters : first;
    gate_unique(l, first, l->gw + poff, prev ? prev->nwriters : 0);
    int64_t added = l->ngw - first;
    if (added == 0) return 0;
    if (prev && prev->index == l->ntasks) {
        if (prev->nwriters + added >= INT32_MAX) return -1;
        prev->nwriters += (int32_t)added;
        qsort(l->gw + poff, (size_t)prev->nwriters, sizeof *l->gw, cmp_i32);
        return 0;
    }
    if (added >= INT32_MAX ||
        (l->ngates == l->capgates &&
         wsp__grow((void **)&l->gates, &l->capgates, l->ngates + 1, sizeof *l->gates)))
        return -1;
    wsp_simgate *g = &l->gates[l->ngates++];
    g->index = l->ntasks;
    g->nwriters = (int32_t)added;
    g->unused = 0;
    return 0;
}

void wsp__simlog_await(wsp_simlog *l, const wsp_access *acc, int64_t index) {
    (void)index;   /* == l->ntasks: the log holds exactly the tasks enumerated before it */
    if (l->oom || l->ntasks == 0) return;
    if (simlog_await(l, acc)) l->oom = 1;   /* the replay then fails: out of memory */
}

/* ---- replay --------------------------------------------------------------------------------- */

int wsp__simlog_replay(wsp_simlog *l, int keep_results, char *err, int32_t errlen) {
    l->nresults = 0;
    if (l->oom) return WSP_ERR_INTERNAL;
    if (keep_results && l->ntasks > 0) {
        if (wsp__grow((void **)&l->results, &l->capresults, l->ntasks, sizeof *l->results))
            return WSP_ERR_INTERNAL;
        l->nresults = l->ntasks;
    }
    memset(l->disp, 0, (size_t)l->p.ndispatchers * sizeof *l->disp);
    int rc = wsp__sim_replay_ws(&l->ws, &l->m, &l->p, l->costs, l->nkernels, l->ntasks, l->tasks,
                                NULL, l->preds, l->npreds, l->ngates, l->gates, NULL, l->gw,
                                l->ngroups, l->groups, l->nmemb, l->memb, l->prio,
                                keep_results ? l->results : NULL,
                                &l->summary, l->disp, err, errlen);
    if (rc) l->nresults = 0;
    return rc;
}

int64_t wsp__simlog_edges(const wsp_simlog *l, int64_t first, int64_t n, int64_t *out) {
    if (n < 0) return l->npreds;
    int64_t e = 0, k = 0;  /* e: the edge index; the preds are the tasks' in task order */
    for (int64_t i = 0; i < l->ntasks && k < n; i++) {
        for (int32_t j = 0; j < l->tasks[i].npreds; j++, e++) {
            if (e < first) continue;
            if (k == n) break;
            out[2 * k] = l->preds[e];
            out[2 * k + 1] = i;
            k++;
        }
    }
    return k;
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
