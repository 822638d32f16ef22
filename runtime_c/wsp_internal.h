/* wsp_internal.h: what the runtime's files share. Not an ABI: nothing here is seen by generated
 * code or Python, and every symbol is hidden inside the shared object.
 *
 * Threads and ownership (the rule that keeps the runtime mostly lock-free):
 *   - the SUBMITTER is the one thread that calls wsp_begin, submit, order_* and wait for a run. It
 *     alone owns the node pools, the dependency structures (deps.c), the order-scope stacks and
 *     the producer side of the workers' `in` rings. Calls for one runtime must not overlap
 *     (generated code enumerates on one thread); distinct runtimes are fully independent.
 *   - WORKERS run kernels. Besides running a task they touch other nodes only through atomic
 *     header fields (successor list, pending count), and they hand finished nodes back to the
 *     submitter (their `out` ring, or the `finished` stack when it is full); the submitter
 *     recycles them ("drains") and only then unregisters them from deps.c. So no node is reused
 *     while any structure still points at it, and deps.c needs no lock.
 */
#ifndef WSP_INTERNAL_H
#define WSP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "wsp_runtime.h"

#define WSP_HIDDEN __attribute__((visibility("hidden")))
#define WSP_CACHELINE 64
#define WSP_MSG_MAX 1024          /* error messages are truncated to this many bytes */

/* ---- graph nodes: tasks and order groups ---------------------------------------------------- */

typedef struct wsp_node wsp_node;
typedef struct wsp_tasknode wsp_tasknode;
typedef struct wsp_group wsp_group;

/* An edge pred -> succ lives in the successor's memory and is linked into pred's list. */
typedef struct wsp_edge {
    struct wsp_edge *next;
    wsp_tasknode *succ;
} wsp_edge;

#define WSP_CLOSED ((wsp_edge *)(uintptr_t)1)   /* successor list of a finished node */
#define WSP_PENDING_GUARD (1 << 30)              /* held by the submitter while adding edges */

/* A WAITER (wsp_await) is a wsp_tasknode that is never dispatched: its edges come from the
 * awaited writers, and whoever brings its pending count to zero signals the submitter and hands
 * it back like a finished task (dispatch.c, waiter_done). */
enum { WSP_NODE_TASK = 0, WSP_NODE_GROUP = 1, WSP_NODE_WAITER = 2 };

struct wsp_node {
    _Atomic(wsp_edge *) succ;  /* successor edges; WSP_CLOSED once the node has finished */
    atomic_int pending;        /* task: unfinished predecessors (+guard); group: members + 1 open */
    uint8_t kind;
    uint8_t sclass;            /* pool size class */
    uint16_t unused;
    wsp_node *next;            /* a queue FIFO or private list while ready, the `finished` stack
                                  when done, then a free list: one owner at a time */
    wsp_group *group;          /* task: its order group; group: the enclosing scope's group */
    uint64_t mark;             /* submitter only: seq+1 of the last task given an edge from here */
};

#define WSP_INLINE_EDGES 2
#define WSP_CHUNK_EDGES 15
typedef struct wsp_edgechunk {
    struct wsp_edgechunk *next;
    wsp_edge e[WSP_CHUNK_EDGES];
} wsp_edgechunk;

/* Where a task is registered in deps.c: one entry per distinct access record. */
typedef struct wsp_reg {
    struct wsp_rec *rec;
    int32_t reader;            /* index in rec's readers when added as a reader, else -1 */
    int32_t unused;
} wsp_reg;

struct wsp_tasknode {
    wsp_node h;
    wsp_kernel_fn fn;
    int32_t kernel, stmt;
    int16_t ntiles, nscalars, ncoords, nregs;
    int32_t dispatcher;        /* the schedule's dispatcher (-1: none, any worker) */
    int32_t queue;             /* the worker queue it is put on: dispatcher % workers */
    int32_t stream;            /* -1: none */
    int32_t nparts;            /* a split batch: its parts (it runs nothing itself); else 0 */
    int64_t lseq;              /* index in the run of its (first) task, for the trace */
    int32_t nedges;            /* edge slots used: inline first, then chunks */
    int32_t count;             /* tasks it stands for: 1, or the tasks of a batch */
    uint32_t subs;             /* a batch: byte offset of its wsp_sub records from the node */
    int32_t pool;              /* graph.c: its pool (set only in a run with wsp_graph knobs) */
    int16_t holds;             /* devices.c: receives it waits for besides its predecessors */
    uint16_t owned;            /* devices.c: tiles (bit i) whose data is a receive buffer, freed
                                  when the node is recycled */
    int32_t resume;            /* devices.c: a send in place the transport has been given: the
                                  node's next run only completes it (dispatch.c, run_task) */
    int64_t gkey;              /* graph.c: its ready-queue key (priority, or ready order) */
    uint64_t seq;              /* submission number, unique over the runtime's life */
    wsp_edgechunk *chunks;     /* newest first */
    wsp_tasknode *parts;       /* a split batch: its first part; a part: the next one */
    wsp_edge edges[WSP_INLINE_EDGES];
    /* tail: wsp_tile[ntiles], wsp_scalar[nscalars], int64_t[ncoords], wsp_reg[ntiles] */
};

struct wsp_group {
    wsp_node h;
    int32_t scope_refs;        /* submitter only: references from the scope stacks */
    int32_t drained;           /* submitter only: finished and handed back */
    int32_t closed;            /* submitter only: its step ended (group_close); a forked context
                                  that borrowed it must not add to it any more */
    int32_t used;              /* submitter only: a task joined it or a group nested in it (a
                                  group made by wsp_order_fork may get none: an empty step) */
};

/* One task of a batch (a runtime task standing for `count` consecutive submissions, run in
 * submission order on one worker): the task's own fields, then its tail. */
typedef struct wsp_sub {
    wsp_kernel_fn fn;
    int32_t kernel, stmt;
    int16_t ntiles, nscalars, ncoords;
    uint16_t size;             /* bytes of the record with its tail (a multiple of 8) */
    int64_t index;             /* the task's number in the run, for the trace */
    /* tail: wsp_tile[ntiles], wsp_scalar[nscalars], int64_t[ncoords] */
} wsp_sub;

static inline wsp_tile *wsp__tiles(wsp_tasknode *t) { return (wsp_tile *)(t + 1); }
static inline wsp_scalar *wsp__scalars(wsp_tasknode *t) {
    return (wsp_scalar *)(wsp__tiles(t) + t->ntiles);
}
static inline int64_t *wsp__coords(wsp_tasknode *t) {
    return (int64_t *)(wsp__scalars(t) + t->nscalars);
}
static inline wsp_reg *wsp__regs(wsp_tasknode *t) { return (wsp_reg *)(wsp__coords(t) + t->ncoords); }

/* ---- dependency inference (deps.c) ---------------------------------------------------------- */

typedef struct wsp_class wsp_class;
typedef struct wsp_rec wsp_rec;

typedef struct wsp_tensor_deps {
    int32_t ndim;              /* fixed by the first access of a run; -1 before */
    int32_t nclass, capclass;
    int64_t nrec;              /* live records over all classes */
    wsp_class *last;           /* the class found last (tiles repeat) */
    wsp_class **classes;
    uint8_t glevel[WSP_MAX_DIMS]; /* the coarse index's levels: the largest of any class */
} wsp_tensor_deps;

typedef struct wsp_deps {
    int32_t ntensors;
    wsp_tensor_deps *tensors;
    struct wsp_slot *slots;    /* open addressing over (tensor, class, cell), linear probing */
    uint64_t mask;
    int64_t nrec;
    wsp_rec *free_recs;
    void *rec_chunks;
} wsp_deps;

typedef struct wsp_runtime wsp_runtime;

WSP_HIDDEN int wsp__deps_init(wsp_deps *d, int32_t ntensors);
WSP_HIDDEN void wsp__deps_destroy(wsp_deps *d);
WSP_HIDDEN void wsp__deps_begin(wsp_deps *d);
/* Checks a task's accesses (WSP_ERR_USAGE with a message) before anything is allocated. */
WSP_HIDDEN int wsp__deps_check(wsp_runtime *rt, const wsp_task *task);
/* Adds t's edges to earlier conflicting tasks and registers its accesses. */
WSP_HIDDEN int wsp__deps_submit(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task);
/* Shrinks the table after a burst (called after draining). */
WSP_HIDDEN void wsp__deps_compact(wsp_deps *d);
/* Unregisters a finished task (submitter, while recycling it). */
WSP_HIDDEN void wsp__deps_retire(wsp_deps *d, wsp_tasknode *t);
/* wsp_await, wsp_probe (named `fn` in the message): checks `acc` (WSP_ERR_USAGE with a message;
 * registers nothing). */
WSP_HIDDEN int wsp__deps_await_check(wsp_runtime *rt, const wsp_access *acc, const char *fn);
/* The unfinished tasks registered as writers of a box overlapping acc's, and when acc->mode has
 * WSP_WRITE also its readers (RAW + WAW + WAR, as a writer would wait for): with w == NULL
 * only counts them (allocates nothing), else also adds an edge from each to the waiter w. */
WSP_HIDDEN int64_t wsp__deps_writers(wsp_runtime *rt, const wsp_access *acc, wsp_tasknode *w);

/* ---- workers and queues (dispatch.c) -------------------------------------------------------- */

#define WSP_BATCH 32               /* ring entries published at once */
#define WSP_BATCH_ASLEEP 256       /* backlog that wakes a sleeping owner although a spinner runs */
#define WSP_STALE 256              /* submissions a staged ready task waits at most */
#define WSP_RING 4096              /* entries per ring (a power of two) */

/* A ring of node pointers with one producer, which keeps its position privately and publishes
 * `tail` in batches. `in` rings have several consumers (CAS on `head`), `out` rings one. */
typedef struct wsp_ring {
    _Alignas(WSP_CACHELINE) atomic_size_t tail;    /* written by the producer */
    _Alignas(WSP_CACHELINE) atomic_size_t head;    /* written by the consumer(s) */
    _Alignas(WSP_CACHELINE) _Atomic(wsp_node *) *buf;   /* relaxed: ordered by tail and head */
} wsp_ring;

/* Per worker: `in` carries ready tasks from the submitter (its only producer); the worker and
 * idle thieves pop them with a CAS on `head`. `out` carries finished nodes back to the
 * submitter. The mutex-protected FIFO (linked through h.next) takes ready tasks released by
 * other workers, and from the submitter when `in` is full; the worker sleeps on cv. */
typedef struct wsp_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wsp_node *head, *tail;         /* under mu */
    size_t count;                  /* under mu */
    int token, stop, inited;       /* under mu: a wake-up is pending / the runtime is freed */
    atomic_size_t n;               /* == count, for peeking without the lock */
    _Alignas(WSP_CACHELINE) atomic_int sleeping;   /* written by the owner (and a waker) */
    wsp_ring in, out;
} wsp_queue;

typedef struct wsp_worker {
    wsp_runtime *rt;
    wsp_queue *q;
    int32_t index;
    pthread_t thread;
    /* private to the worker thread */
    wsp_tasknode *lhead, *ltail;   /* FIFO of tasks this worker made ready for itself */
    int64_t lcount;
    uint64_t last_ticks;           /* how long the last kernel ran (time-stamp counter ticks) */
    size_t in_tail;                /* the last `tail` of q->in this worker read */
    size_t out_tail, out_head, out_pub;   /* producer side of q->out */
    int64_t out_tasks;             /* tasks in q->out not yet counted in `retired` */
    int64_t done_l, retired_l, ran_l;
    /* published by the worker, read by the submitter (cumulative over the runtime's life) */
    _Alignas(WSP_CACHELINE) atomic_llong done;     /* tasks completed */
    atomic_llong retired;                          /* tasks handed back to the submitter */
    atomic_llong ran;                              /* kernels executed */
} wsp_worker;

/* The submitter's side of one worker's rings. */
typedef struct wsp_stage {
    size_t in_tail, in_head, in_pub;   /* producer side of q->in (in_head: a cached view) */
    size_t out_head;                   /* consumer side of q->out */
} wsp_stage;

WSP_HIDDEN int wsp__workers_init(wsp_runtime *rt);
WSP_HIDDEN int wsp__workers_start(wsp_runtime *rt);
WSP_HIDDEN void wsp__workers_stop(wsp_runtime *rt);
WSP_HIDDEN void wsp__workers_destroy(wsp_runtime *rt);
/* Submitter: a task became ready (published per batch, or at once when a worker is idle). */
WSP_HIDDEN void wsp__stage_ready(wsp_runtime *rt, wsp_tasknode *t);
WSP_HIDDEN void wsp__flush_all(wsp_runtime *rt);
/* Submitter: recycles up to `max` nodes the workers have handed back (wsp__recycle on each);
 * returns how many. */
WSP_HIDDEN int64_t wsp__drain(wsp_runtime *rt, int64_t max);
/* Completes a node (a finished task, or a group whose count reached zero) on a worker (w) or on
 * the submitter (w == NULL): releases successors and cascades into enclosing groups. */
WSP_HIDDEN void wsp__complete(wsp_runtime *rt, wsp_worker *w, wsp_node *n);
/* Submitter waits: WSP_WAIT_STALL until in-flight <= wait_target (or an error), WSP_WAIT_ALL
 * until every submitted task has been handed back, WSP_WAIT_AWAIT until the waiter whose seq is
 * wait_target has completed (await_done == target) or an error. */
enum { WSP_WAIT_NONE = 0, WSP_WAIT_STALL = 1, WSP_WAIT_ALL = 2, WSP_WAIT_AWAIT = 3 };
WSP_HIDDEN void wsp__submitter_wait(wsp_runtime *rt, int mode, int64_t target);

typedef struct wsp_graph wsp_graph_t;
/* graph.c: a run with task-graph knobs (wsp_graph). Called only when rt->graph_on is set. */
WSP_HIDDEN int wsp__graph_task(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task);
WSP_HIDDEN void wsp__graph_submitted(wsp_runtime *rt);
WSP_HIDDEN void wsp__graph_push(wsp_runtime *rt, wsp_tasknode *t);
/* the next task for worker w; block: wait for one. NULL: none, or the run's knobs are off (go
 * back to the rings), or *stop: the workers are stopping */
WSP_HIDDEN wsp_tasknode *wsp__graph_take(wsp_worker *w, int block, int *stop);
WSP_HIDDEN void wsp__graph_start(wsp_runtime *rt);
WSP_HIDDEN void wsp__graph_enumerated(wsp_runtime *rt);
WSP_HIDDEN void wsp__graph_end(wsp_runtime *rt);          /* the run is over: knobs off */
WSP_HIDDEN void wsp__graph_stop(wsp_runtime *rt);         /* workers stop: leave the wait */
WSP_HIDDEN void wsp__graph_reset(wsp_runtime *rt);         /* wsp_begin: no times yet */
WSP_HIDDEN void wsp__graph_free(wsp_runtime *rt);
WSP_HIDDEN int64_t wsp__sum_done(wsp_runtime *rt);
WSP_HIDDEN int64_t wsp__sum_ran(const wsp_runtime *rt);

/* Test hooks: only the runtime tests' library is built with -DWSP_TEST_HOOKS, and its
 * tests/runtime/hooks.c defines the hook. It may hold a worker at a decision point of dispatch.c,
 * so that a race's window is a state a test sets up rather than a chance it waits for. Elsewhere
 * the hook compiles to nothing. */
enum {
    WSP_HOOK_SPIN = 1,             /* a worker counted in `spinners`, before it spins */
    WSP_HOOK_SLEEP = 2,            /* an idle worker after its last look, before it announces sleep */
    WSP_HOOK_WAKE = 3              /* wake_a_sleeper (worker: `except`) saw a sleeper, not yet woken */
};
#ifdef WSP_TEST_HOOKS
WSP_HIDDEN void wsp__test_hook(wsp_runtime *rt, int point, int32_t worker);
#define WSP_TEST_HOOK(rt, point, worker) wsp__test_hook(rt, point, worker)
#else
#define WSP_TEST_HOOK(rt, point, worker) ((void)0)
#endif

/* ---- the runtime (tasks.c; order.c, batch.c, await.c, trace.c, errors.c) -------------------- */

#define WSP_NCLASSES 168           /* node size classes: 64 * (k + 1) bytes */
#define WSP_GRAIN_MAX 64           /* tasks per batch at most */
#define WSP_BATCH_BYTES 8192       /* wsp_sub records per batch at most */
#define WSP_BATCH_WAITS 8          /* order steps a batch may span, after its first */
#define WSP_XBUFS 64               /* receive buffers kept between receives (devices.c) */

typedef struct wsp_scope {
    wsp_group *barrier;            /* every task of the scope's current step waits for it */
    wsp_group *current;            /* tasks of the current step (created lazily) */
} wsp_scope;

/* An order context (wsp_order_fork): a scope stack of its own. Levels [0, borrowed) are a copy
 * of its parent's stack at the fork, holding references to the parent's groups (never closed
 * by this context); the levels above are its own. The CURRENT context's stack lives in the
 * runtime's scopes/depth/capscopes/borrowed fields (the per-task paths read them directly);
 * its entry in `ctxs` is stale until a switch saves it there. */
typedef struct wsp_octx {
    wsp_scope *scopes;             /* kept (and reused) after the context ends */
    int32_t depth, cap;
    int32_t borrowed;
    int32_t live;                  /* forked and not yet ended */
    int32_t next_free;             /* the free-id stack's next entry, -1 */
    int32_t unused;
} wsp_octx;

struct wsp_runtime {
    /* read-mostly: workers read these for every task, so nothing written per task lives here */
    int32_t nworkers, ntensors;
    int32_t max_spinners;          /* idle workers that may spin at once: online CPUs - 1 */
    atomic_int pinned;             /* this run: tasks stay on their dispatcher's worker */
    atomic_int graph_on;           /* this run: ready tasks go through graph.c's queues */
    struct wsp_graph *graph;       /* graph.c's state, made at the first wsp_graph call */
    int32_t tracing;               /* this run records a trace (workers write times) */
    int32_t skip_kernels;          /* wsp_execute(rt, 0): no kernel is called */
    struct wsp_trace_event **tchunks;   /* the trace: WSP_TRACE_CHUNK events per chunk */
    wsp_worker **workers;
    wsp_queue *queues;
    atomic_int err;                /* the first wsp_fail wins */
    atomic_int sub_waiting;        /* WSP_WAIT_*: the submitter sleeps in a stall or wsp_wait */
    atomic_llong wait_target;
    atomic_llong await_done;       /* seq of the last waiter completed by a worker (wsp_await) */

    /* written when a worker starts or stops spinning, read by the submitter per ready task */
    _Alignas(WSP_CACHELINE) atomic_int spinners;

    /* the submitter's sleep, and the error text */
    _Alignas(WSP_CACHELINE) pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t err_mu;
    char errmsg[WSP_MSG_MAX];

    /* written by the submitter for every task; workers read `submitted` only while it sleeps */
    _Alignas(WSP_CACHELINE) atomic_llong submitted;   /* tasks submitted, cumulative */
    int32_t threads_started;
    int running;
    int64_t window;
    int32_t window_mode;
    int64_t nsub;                  /* == submitted */
    int64_t run_sub0, run_ran0;    /* counters at wsp_begin */
    int64_t done_cache, done_cache_at;
    int64_t max_in_flight;
    int64_t ndeps;
    uint64_t seq;
    uint64_t rr;
    int64_t t_begin_ns;
    double execute_ms;
    int finished_run;              /* execute_ms is final */
    wsp_stage *stages;
    int32_t drain_next;            /* the worker whose `out` ring is drained first next time */
    int64_t unpub_since;           /* nsub since ready tasks wait unpublished or unwoken; -1 */
    wsp_node *free_nodes[WSP_NCLASSES];
    wsp_edgechunk *free_chunks;
    void *node_chunks;             /* malloc'd blocks, freed with the runtime */
    wsp_scope *scopes;             /* the current order context's stack (see wsp_octx) */
    int32_t depth, capscopes;
    int32_t borrowed;              /* its borrowed levels */
    int32_t cur;                   /* the current order context (0: the run's own) */
    wsp_octx *ctxs;                /* every context's saved stack, by id (NULL before a fork) */
    int32_t nctx, capctx;          /* ids handed out so far (0 included), entries allocated */
    int32_t free_ctx;              /* the most recently ended id, -1: none */
    int32_t nlive;                 /* live forked contexts */
    /* wsp_note: (index, tag, value) triples of this run, kept between runs */
    int64_t *notes;
    int64_t nnotes, capnotes;
    wsp_deps deps;
    /* batching (wsp_batch): the open batch, its records' bytes, the union of its accesses */
    int64_t grain;                 /* tasks per batch; 1: every submission is its own task */
    int64_t batch_left;            /* submissions the last wsp_batch call still covers */
    int64_t nbatches;              /* batches submitted in this run */
    wsp_tasknode *batch;           /* holds the records of the tasks of the batch's own queue */
    size_t batch_bytes;
    int64_t batch_count;           /* tasks in the open batch, its parts' included */
    wsp_task batch_acc;            /* access[0 .. ntiles) */
    int32_t batch_indep;           /* the announced tasks are mutually independent: a batch may
                                      hold tasks of several worker queues, split into parts */
    int32_t nxparts;               /* parts of the open batch besides `batch` */
    wsp_tasknode **xpart;          /* per worker queue: the open batch's part there, or NULL */
    size_t *xbytes;                /* their records' bytes */
    /* schedules (wsp_schedule), per run */
    int32_t ndisp, steal_ok, nstreams, capstreams;
    wsp_tasknode **stream_last;    /* the last task submitted in each stream */
    /* trace */
    int32_t trace_on;              /* wsp_trace_enable: record the next runs */
    int64_t ntrace;                /* tasks traced in this run */
    int64_t ntchunks;              /* chunks allocated */
    int64_t *tlinks[2];            /* this run's (pred, succ) edges and (first, count) batches,
                                      in pairs (wsp_trace_links), kept between runs */
    int64_t ntlinks[2], captlinks[2];
    int64_t tlinks_dropped;        /* edges past WSP_TRACE_MAXLINKS: not recorded */
    /* cycle model */
    struct wsp_simlog *simlog;     /* NULL unless wsp_sim_enable */
    int32_t batch_depth;           /* the order-scope depth the open batch was started at */
    int32_t batch_steps;           /* order steps it went on into (wsp_order_next calls) */
    int32_t nbatch_waits;
    wsp_group *batch_waits[WSP_BATCH_WAITS];  /* barriers of the order steps it spans */

    /* devices.c: the transport (xport.devices == 0: none), per tensor its element size when
     * its first dimension is the device dimension, and this run's remote reads so far */
    wsp_transport xport;
    int32_t *xelem;
    int32_t nxelem;
    int64_t xseq;
    /* receives and sends in place posted and not arrived (workers poll the transport while
     * there are some: tasks wait for them), and workers inside such polls (wsp_wait returns
     * once none is: the transport may go after) */
    _Atomic int64_t xwaiting;
    atomic_int xpolling;
    /* devices.c: receive buffers kept for the next receives of their size (submitter only):
     * a fresh malloc of a tile's size is a fresh mapping, every page of which faults in */
    void *xbuf[WSP_XBUFS];
    size_t xbuf_bytes[WSP_XBUFS];
    int32_t nxbuf;

    _Alignas(WSP_CACHELINE) _Atomic(wsp_node *) finished;   /* handed back by workers */
    char pad_end[WSP_CACHELINE];
};

#define WSP_TRACE_CHUNK 4096
/* A kernel's return code (devices.c, a send in place): the node is not finished; the transport
 * makes it ready again once it is (dispatch.c, run_task). Never a kernel's own code. */
#define WSP__DEFERRED (-1)
#define WSP_TRACE_MAXCHUNKS 65536   /* 268M tasks traced at most; later tasks go untraced */

#define WSP_TRACE_MAXLINKS ((int64_t)1 << 25)  /* edges (and batches) recorded per run at most */

static inline wsp_trace_event *wsp__trace_at(const wsp_runtime *rt, int64_t i) {
    return &rt->tchunks[i / WSP_TRACE_CHUNK][i % WSP_TRACE_CHUNK];
}

/* Tasks submitted so far, the open batch's included. */
static inline int64_t wsp__enumerated(const wsp_runtime *rt) {
    return rt->nsub + rt->batch_count;
}

/* Node pools, edges and submission (tasks.c; submitter only). */
WSP_HIDDEN wsp_node *wsp__node_alloc(wsp_runtime *rt, size_t bytes);
WSP_HIDDEN void wsp__node_free(wsp_runtime *rt, wsp_node *n);
/* Takes back a node a worker handed back (a group stays while scope stacks refer to it). */
WSP_HIDDEN void wsp__recycle(wsp_runtime *rt, wsp_node *n);
/* Drops a scope stack's reference to g: freed once it is also drained. */
WSP_HIDDEN void wsp__group_unref(wsp_runtime *rt, wsp_group *g);
WSP_HIDDEN wsp_tasknode *wsp__tasknode_new(wsp_runtime *rt, size_t bytes);
/* t waits for pred unless pred has finished or t already waits for it. */
WSP_HIDDEN void wsp__add_edge(wsp_runtime *rt, wsp_node *pred, wsp_tasknode *t);
/* Hands a filled node standing for `ntasks` tasks to dependency inference and dispatch; `acc`
 * holds its accesses. */
WSP_HIDDEN int wsp__enqueue(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *acc,
                            int64_t ntasks);

/* The window's admission of one more task (tasks.c): WSP_OK, or the run's error. */
WSP_HIDDEN int wsp__window_admit(wsp_runtime *rt);
/* One unbatched task's node filled from *task, task number `index` of the run (tasks.c);
 * NULL when out of memory. wsp__submit_node hands it on (task-graph knobs, enqueue). */
WSP_HIDDEN wsp_tasknode *wsp__task_node(wsp_runtime *rt, const wsp_task *task, int64_t index);
WSP_HIDDEN int wsp__submit_node(wsp_runtime *rt, wsp_tasknode *t, const wsp_task *task);

/* Many processes (devices.c). wsp__device_submit: with a transport set, takes every task that
 * is not a plain task of this device (another device's: its sends; this device's with remote
 * tiles: its receives) and sets *taken; else leaves it to wsp_submit. */
WSP_HIDDEN int wsp__device_submit(wsp_runtime *rt, const wsp_task *task, int *taken);
/* A recycled node's receive buffers (submitter): kept for later receives, or freed. */
WSP_HIDDEN void wsp__device_release(wsp_runtime *rt, wsp_tasknode *t);
/* The receive buffers kept (wsp_runtime_free). */
WSP_HIDDEN void wsp__device_free(wsp_runtime *rt);
/* A task made ready by a thread that is neither a worker nor the submitter (dispatch.c). */
WSP_HIDDEN void wsp__ready_external(wsp_runtime *rt, wsp_tasknode *t);

/* Traced runs only (trace.c): the edge pred -> t as the trace's task indices, and t standing
 * for the `ntasks` tasks from its first (a batch). */
WSP_HIDDEN void wsp__trace_edge(wsp_runtime *rt, const wsp_node *pred, const wsp_tasknode *t);
WSP_HIDDEN void wsp__trace_batch(wsp_runtime *rt, const wsp_tasknode *t, int64_t ntasks);

/* Order scopes and contexts (order.c). */
WSP_HIDDEN void wsp__group_close(wsp_runtime *rt, wsp_group *g);
/* t joins the innermost scope's current step and waits for its barrier. */
WSP_HIDDEN int wsp__order_attach(wsp_runtime *rt, wsp_tasknode *t);
WSP_HIDDEN void wsp__scope_pop(wsp_runtime *rt);
/* Every forked context of the run ended, context 0 current again (its scopes stay). */
WSP_HIDDEN void wsp__ctx_end_all(wsp_runtime *rt);

/* Batches (batch.c). */
/* Task number `index` of the run joins the open batch (closing it first if it does not fit). */
WSP_HIDDEN int wsp__batch_add(wsp_runtime *rt, const wsp_task *task, int64_t index);
/* Submits the open batch, if any. */
WSP_HIDDEN int wsp__batch_close(wsp_runtime *rt);

/* The trace's event and the cycle model's log entry of task `index` of the run (trace.c). */
WSP_HIDDEN int wsp__record(wsp_runtime *rt, const wsp_task *task, int64_t index);

/* Errors and the clock (errors.c). */
WSP_HIDDEN int wsp__failf(wsp_runtime *rt, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A kernel's failure, with its own message (wsp_kernel_fail) if it gave one. */
WSP_HIDDEN void wsp__kernel_failed(wsp_runtime *rt, int32_t kernel, int32_t stmt,
                                   const int64_t *coords, int ncoords, int rc);
WSP_HIDDEN void wsp__kernel_msg_clear(void);
WSP_HIDDEN int64_t wsp__now_ns(void);

/* ---- the cycle model's view of a run (simlog.c) ---------------------------------------------- */

/* Logs each submitted task with its predecessors, inferred from the boxes exactly as enumerated
 * (host timing plays no part), and replays the log with wsp_sim_replay (sim.c) after the run. */
typedef struct wsp_simlog wsp_simlog;
WSP_HIDDEN wsp_simlog *wsp__simlog_new(int32_t ntensors, const wsp_machine *m, const wsp_policy *p,
                                       const wsp_kcost *costs, int32_t nkernels);
WSP_HIDDEN void wsp__simlog_free(wsp_simlog *l);
WSP_HIDDEN void wsp__simlog_begin(wsp_simlog *l);
WSP_HIDDEN void wsp__simlog_limit(wsp_simlog *l, int64_t bytes);
WSP_HIDDEN int wsp__simlog_over(const wsp_simlog *l);  /* 0, 1 memory, 2 tasks */
WSP_HIDDEN void wsp__simlog_shape(wsp_simlog *l, int32_t tensor, int32_t ndim, const int64_t *dims);
/* `dispatcher`/`stream` as the model sees them; returns 0, WSP_ERR_RECORDS (past the limit of
 * wsp_sim_limit, or of the replay's task count: l->over says which) or WSP_ERR_INTERNAL */
WSP_HIDDEN int wsp__simlog_add(wsp_simlog *l, const wsp_task *task, int32_t dispatcher,
                               int32_t stream);
/* A wsp_await of the run on acc's box, `index` tasks into it: the log's own last writers of the
 * tiles the box overlaps (and, when acc->mode has WSP_WRITE, their readers since; from its
 * tables, so independent of host timing) become an enumeration gate at that index (sim.c).
 * Records nothing when there is no such task; an out of memory makes the replay fail. */
WSP_HIDDEN void wsp__simlog_await(wsp_simlog *l, const wsp_access *acc, int64_t index);
/* Order scopes as the model sees them (order.c calls these exactly where the runtime changes
 * its scope stacks, after the call succeeded): the log keeps a scope stack per order context
 * and the step groups of the run, and logs for each task in a scope its innermost step group
 * and the barrier (an earlier step group) it waits for (simlog_order.c). Out of memory makes the
 * replay fail. `id` is the runtime's context id. */
WSP_HIDDEN void wsp__simlog_order_push(wsp_simlog *l);
WSP_HIDDEN void wsp__simlog_order_next(wsp_simlog *l);
WSP_HIDDEN void wsp__simlog_order_pop(wsp_simlog *l);
WSP_HIDDEN void wsp__simlog_order_fork(wsp_simlog *l, int32_t id);
WSP_HIDDEN void wsp__simlog_order_switch(wsp_simlog *l, int32_t id);   /* ctx_load */
WSP_HIDDEN void wsp__simlog_order_end(wsp_simlog *l, int32_t id);      /* ctx_release */
/* Replays the run; keeps per-task results when `keep_results`. Returns 0 or an error code
 * with a message in err. */
WSP_HIDDEN int wsp__simlog_replay(wsp_simlog *l, int keep_results, char *err, int32_t errlen);
/* Model edges first .. first+n-1 as (pred, succ) pairs into out; n < 0: how many there are. */
WSP_HIDDEN int64_t wsp__simlog_edges(const wsp_simlog *l, int64_t first, int64_t n, int64_t *out);
WSP_HIDDEN const wsp_simsummary *wsp__simlog_summary(const wsp_simlog *l);
WSP_HIDDEN const wsp_simdisp *wsp__simlog_disp(const wsp_simlog *l, int32_t *n);
WSP_HIDDEN const wsp_simresult *wsp__simlog_results(const wsp_simlog *l, int64_t *n);
WSP_HIDDEN int32_t wsp__simlog_dispatchers(const wsp_simlog *l);

/* Order scopes in the replay (the log's, see simlog_order.c; not in the public API). A STEP GROUP
 * holds the tasks of one step of an order scope, those of the scopes nested in it (and of
 * forked contexts that borrowed it) included: a task is in its innermost scope's current step
 * group and in every group that one nests in, if it was enumerated before that group's step
 * ended (`close`). A group some task waits for is a BARRIER: it completes when every task in it
 * has finished and its completion has been seen (the latest finish + completion), and the
 * tasks that wait for it are ready no earlier. In the replay a barrier is no task: it has no
 * result, occupies no core and no dispatcher; it is exactly as if each task waiting for it had
 * every task in it as a predecessor, at the cost of one edge per task in a scope. */
typedef struct wsp_simgroup {
    int32_t parent;            /* the group it nests in (a smaller id), -1 */
    int32_t close;             /* tasks enumerated when its step ended (INT32_MAX: never) */
} wsp_simgroup;

typedef struct wsp_simmemb {
    int32_t task;              /* a task in an order scope; entries in increasing task order */
    int32_t group;             /* its innermost scope's current step group */
    int32_t barrier;           /* the group it waits for (closed before it), -1 */
    int32_t unused;
} wsp_simmemb;

/* The replay (sim.c) with working memory that outlives it: *ws is created on first use, grown
 * as needed and kept for the next replay (wsp__simws_free releases it), so a log replayed after
 * every run maps and clears no fresh memory. `prio`: per task, the keys of a priority ready
 * policy (the log's; NULL otherwise). Predecessors come as int64 (preds64, the public
 * wsp_sim_replay) or int32 (preds32, the log); the other is NULL. npreds_known: their number,
 * or -1 (then counted). Gates' writers likewise come as int64 (gw64) or int32 (gw32).
 * Order scopes: ngroups step groups and nmemb memberships (wsp_simgroup above; 0 and NULL:
 * none). Otherwise as wsp_sim_replay_gated. */
typedef struct wsp_simws wsp_simws;
WSP_HIDDEN int wsp__sim_replay_ws(wsp_simws **ws, const wsp_machine *m, const wsp_policy *p,
                                  const wsp_kcost *costs, int32_t nkernels, int64_t ntasks,
                                  const wsp_simtask *tasks, const int64_t *preds64,
                                  const int32_t *preds32, int64_t npreds_known, int64_t ngates,
                                  const wsp_simgate *gates, const int64_t *gw64,
                                  const int32_t *gw32, int64_t ngroups,
                                  const wsp_simgroup *groups, int64_t nmemb,
                                  const wsp_simmemb *memb, const int64_t *prio,
                                  wsp_simresult *results,
                                  wsp_simsummary *summary, wsp_simdisp *disp, char *err,
                                  int32_t errlen);
WSP_HIDDEN void wsp__simws_free(wsp_simws *ws);

/* ---- the cycle model's replay state (sim.c runs it, sim_setup.c builds it) ----------------- */

#define SIM_NEVER INT64_MAX

/* A kernel heap entry: first end << 64 | kernel. Times are >= 0, so the unsigned order is
 * (time, kernel), compared without branches. */
__extension__ typedef unsigned __int128 sim_key;

/* a task index in the model's own arrays (ntasks < 2^31 is checked) */
typedef int32_t sim_idx;

/* A ready queue: fifo[base+head .. base+tail) sorted by (ready, index), plus a heap
 * qheap[base .. base+hlen) of tasks that arrived out of order; its slice of both arrays is as
 * large as the number of tasks that can ever enter the queue. */
typedef struct sim_queue {
    int64_t base, head, tail, hlen;
} sim_queue;

/* A plain FIFO slice: a[base+head .. base+tail), every entry pushed once. */
typedef struct sim_fifo {
    int64_t base, head, tail;
} sim_fifo;

typedef struct sim_disp {
    int64_t busy_until;
    int64_t qcount;            /* ready tasks in its queues (not in an open group) */
    int64_t qunit[2];          /* of those, per unit */
    int64_t cur, run;          /* interleaved: current class, tasks issued in this run */
    int64_t gleft;             /* batched: unissued tasks of the open group */
    int64_t gid;               /* batched: the open group's number */
    int64_t ntasks, stolen;
    uint32_t umask;            /* plain loop: units (bit u) with ready tasks in its queues */
} sim_disp;

typedef struct sim_cores {
    uint64_t *bits;            /* set: free */
    int64_t nwords, nfree, hint;
} sim_cores;

typedef struct sim {
    wsp_simws *ws;
    const wsp_kcost *costs;
    const wsp_simtask *tasks;
    wsp_simresult *res;
    int64_t ntasks;
    int32_t nd, timing, steal, batched;
    int64_t tn, window, C, dc, cc, spacing;

    int64_t *tkey;             /* ready time while queued (prio[k] under a priority ready
                                  policy), finish once issued (cp before) */
    const int64_t *prio;       /* per task: WSP_READY_PRIORITY's keys; NULL otherwise */
    uint32_t *state;           /* until ready: unfinished predecessors (+1 for a stream
                                  predecessor); while running: core << 1 | unit */
    sim_idx *shead;            /* successors: the first edge of each task's list, -1; NULL
                                  when there are no predecessors */
    sim_idx *enext, *eto;      /* per edge (numbered as in the predecessor array): the next
                                  edge of the same list, -1; the successor */
    sim_idx *snext;            /* next task of the same stream, -1; NULL without streams */

    sim_queue *q;              /* ready queues: nd * C * 2 */
    sim_idx *fifo, *qheap;     /* qheap is allocated on first use */
    sim_fifo *gq;              /* batched: the open group per (dispatcher, unit) */
    sim_idx *gfifo;
    uint64_t *clsbits;         /* interleaved: per dispatcher, classes with ready tasks */
    int64_t clswords;

    sim_disp *disp;
    uint64_t *freew;           /* free dispatchers (busy_until <= now), a bitmap */
    int32_t *bring;            /* busy dispatchers in busy_until order, a ring of nd (its
                                  buffer holds ringmask + 1 >= nd, a power of two) */
    int64_t ringmask;
    unsigned used;             /* units (bit u) that tasks need */
    int32_t nkernels;
    int64_t bhead, bcount;
    sim_cores cores[2];        /* per unit; in a multi run only nfree counts (every device's) */
    int64_t nready_u[2];       /* tasks in ready queues, per unit */
    /* Devices and comm engines (m->devices > 1, or a kernel of WSP_UNIT_COMM): a `multi` run,
     * which run_general alone replays. Device v has dispatchers v*ndpd .. v*ndpd + ndpd - 1,
     * cores dcores[v*2 + unit], and a comm engine busy until ebusy[v] with the ready queue
     * q[nqd + v] of its messages, which no dispatcher issues: the engine starts them in
     * (ready, index) order, each as soon as it is free, and is free again `latency` before
     * the message ends. */
    int multi;
    int64_t ndev, ndpd, nqd;   /* devices; dispatchers per device; dispatcher queues */
    sim_cores *dcores;
    int64_t *ebusy;
    int64_t ncomm;             /* comm tasks in ready queues */

    sim_fifo *kq;              /* running tasks per kernel, in end order */
    sim_idx *kfifo;
    sim_key *kh;               /* heap over kernels with running tasks */
    int64_t nkh;
    sim_idx *dq;               /* ended tasks with dependents whose completion is not seen yet */
    int64_t dhead, dtail;
    int64_t rate_at;           /* when a rate-limited issue may go, or SIM_NEVER */

    int64_t next_enum, unfinished, finished;
    int64_t elim;              /* tasks below it may be produced: the first closed gate's index,
                                  or ntasks */
    int64_t wlim;              /* the window, or INT64_MAX without one */
    int64_t ngates, gnext;     /* gates (those with writers, index < ntasks); the first closed */
    int64_t *gidx, *goff, *gpend; /* per gate: its index, its writers gw[goff[i] .. goff[i+1]),
                                  writer edges whose completion is not seen yet */
    sim_idx *gw;
    /* order scopes (wsp_simgroup): a task in a scope has one more edge, eto = ntasks + its
     * innermost group, when some group it is in is a barrier */
    int64_t nbar;              /* barriers (groups some task waits for); 0: no order scopes */
    const wsp_simgroup *grp;
    int64_t *bpend;            /* per group: its tasks whose completion is not seen yet */
    int64_t *bdoff;            /* per group: its waiting tasks bdl[bdoff[g] .. bdoff[g+1]) */
    sim_idx *bdl;
    int64_t next_allowed;
    int oom;
    int64_t makespan, stolen, groups;
} sim;

/* The working memory's buffers, one per array (sim_setup.c, "working memory"). */
enum {
    B_TKEY, B_STATE, B_FIFO, B_KFIFO, B_SHEAD, B_STAIL, B_ENEXT, B_ETO, B_SNEXT, B_DQ, B_GFIFO,
    B_QHEAP, B_READY0, B_GIDX, B_GOFF, B_GPEND, B_GW, B_BPEND, B_BDOFF, B_BDL, B_BCP,
    B_LAST, B_Q, B_GQ, B_KQ, B_KH, B_DISP, B_FREEW, B_BRING, B_CLS, B_CORES0, B_CORES1,
    B_DCORES, B_DBITS, B_EBUSY, B_COUNT
};

struct wsp_simws {
    void *buf[B_COUNT];
    size_t cap[B_COUNT];       /* bytes */
};

/* Task k's class: its stream, or the last class for none (interleaved with streams; else 0). */
static inline int64_t wsp__sim_task_class(const sim *S, int64_t k) {
    if (S->C == 1) return 0;
    int32_t s = S->tasks[k].stream;
    return s < 0 ? S->C - 1 : s;
}

/* The ready queue of dispatcher d, class c, unit u. */
static inline int64_t wsp__sim_queue_index(const sim *S, int64_t d, int64_t c, int u) {
    return (d * S->C + c) * 2 + u;
}

/* Buffer b of the working memory with room for max(n, 1) elements of `size` bytes (contents
 * undefined), or NULL (sim_setup.c). */
WSP_HIDDEN void *wsp__simws_get(wsp_simws *w, int b, int64_t n, size_t size);
/* Runs the model on the state sim_setup.c built: WSP_OK, or WSP_ERR_INTERNAL when it stalls or
 * runs out of memory (sim.c). */
WSP_HIDDEN int wsp__sim_run(sim *S);
WSP_HIDDEN void wsp__sim_q_push(sim *S, sim_queue *Q, int64_t k);   /* in (tkey, index) order */

/* ---- the cycle model's log (simlog.c; its order scopes: simlog_order.c) --------------------- */

/* the log's record tables, private to simlog.c */
typedef struct stens stens;
typedef struct hrec hrec;
typedef struct rchunk rchunk;

/* One level of an order context's scope stack: group ids of this run, -1 for none. */
typedef struct sscope {
    int32_t barrier;           /* the group every task of the level's current step waits for */
    int32_t current;           /* the current step's group (created lazily) */
} sscope;

typedef struct sctx {          /* a saved order context: its stack */
    sscope *sc;
    int32_t depth, cap, borrowed, unused;
} sctx;

struct wsp_simlog {
    int32_t ntensors;
    uint32_t epoch;            /* the run: 1, 2, ... (0 marks nothing) */
    stens *tens;
    hrec *recs;
    int64_t nrecs, caprecs;
    rchunk *chunks;
    int64_t nchunks, capchunks;
    int32_t free_chunk;        /* -1: none */
    wsp_simtask *tasks;
    int64_t ntasks, captasks;
    int64_t *prio;             /* per task, only under WSP_READY_PRIORITY: its priority */
    int64_t capprio;
    int32_t *preds;
    int64_t npreds, cappreds;
    int32_t last_pred;         /* of the current task: skips immediate duplicates */
    wsp_simgate *gates;        /* wsp_await: enumeration gates (sim.c), in index order */
    int64_t ngates, capgates;
    int32_t *gw;               /* their writers, gate after gate, each gate's sorted */
    int64_t ngw, capgw;
    int gate_readers;          /* the await being logged writes: records' readers join its gate */
    /* order scopes (see "order scopes" below): the current context's stack, the others' */
    sscope *sc;                /* levels [0, depth) of the current context */
    int32_t depth, capsc, borrowed, cur;
    sctx *ctxs;                /* by context id; ctxs[cur] is stale (its stack is sc) */
    int32_t capctx;
    wsp_simgroup *groups;      /* this run's step groups, by id */
    int64_t ngroups, capgroups;
    uint8_t *gused;            /* per group: a task joined it (or a group nested in it) */
    int64_t capgused;
    wsp_simmemb *memb;         /* the tasks in order scopes, in task order */
    int64_t nmemb, capmemb;
    int32_t *gbar;             /* per group: the barrier of its level while it was current */
    int64_t capgbar;
    /* deps = explicit (explicit.c): per task its statement and coordinates, and the tensor of
     * each predecessor of the task being logged; the message of a failed check */
    struct wsp_simwho *who;
    int64_t capwho;
    int32_t *ptens;
    int64_t capptens;
    int32_t *named;            /* every logged task's named predecessors (`after`), task after
                                  task, and per task its first one (one past the last task) */
    int64_t nnamed, capnamed;
    int64_t *namedat;
    int64_t capnamedat;
    int64_t *seen;             /* per task: the last walk of the named edges that reached it */
    int64_t capseen, walks;
    int32_t *stack;            /* that walk's tasks to visit */
    int64_t capstack;
    wsp_access *acc;           /* every logged task's boxes, task after task */
    int64_t nacc, capacc;
    int64_t *accat;            /* per task: its first box in acc (and one past the last task) */
    int64_t capaccat;
    char deps_msg[512];
    int oom;
    int over;                  /* past the limit: 1 wsp_sim_limit's bytes, 2 the task count */
    int64_t limit;             /* wsp_sim_limit: bytes (0: none) */
    wsp_machine m;
    wsp_policy p;              /* p.ndispatchers counts every device's: ndpd * devices */
    int32_t ndpd;              /* dispatchers per device (the schedule's count) */
    wsp_kcost *costs;          /* the kernels' costs, then this run's per-task cost entries */
    int32_t nkernels;          /* entries in use: nbase, plus one per distinct (kernel, cycles) */
    int32_t nbase;             /* the kernels' own (wsp_sim_enable's) */
    int64_t capcosts;
    int64_t *vkey;             /* task cycles: open-addressed map (kernel, cycles) -> entry */
    int32_t *vidx;
    int64_t capv;              /* a power of two (0: no map yet) */
    wsp_simsummary summary;
    wsp_simdisp *disp;
    wsp_simresult *results;
    int64_t nresults, capresults;
    wsp_simws *ws;             /* the replay's working memory */
};

/* Grows *buf (*cap elements of `size` bytes) to hold `need`, doubling from 1024; -1: no memory. */
WSP_HIDDEN int wsp__grow(void **buf, int64_t *cap, int64_t need, size_t size);
/* The task being logged (index l->ntasks) is in an order scope: its entry (simlog_order.c). */
WSP_HIDDEN int wsp__simlog_order_note(wsp_simlog *l);
/* The cost entry of `kernel` taking `cycles` in this run (simlog_cycles.c); -1: out of memory. */
WSP_HIDDEN int32_t wsp__simlog_task_entry(wsp_simlog *l, int32_t kernel, int64_t cycles);
/* explicit.c: deps = explicit. note: the predecessors the access of `tensor` added since index
 * `from`; check: the task being logged (after its order note), 0 or WSP_ERR_DEPS (deps_msg set)
 * or WSP_ERR_INTERNAL */
WSP_HIDDEN int wsp__explicit_note(wsp_simlog *l, int64_t from, int32_t tensor);
WSP_HIDDEN int wsp__explicit_check(wsp_simlog *l, const wsp_task *task, int64_t first,
                                   int32_t stream);

#endif
