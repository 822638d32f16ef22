/* wsp_runtime.h: the one ABI between generated code, the C runtime and Python (cffi cdef).
 *
 * Generated code (backends/cpu) contains one kernel function per specialised kernel and one
 * enumerator per schedule. An enumerator walks the schedule's loop tree with the bound symbols,
 * checks every view, fills a wsp_task per task and hands it to wsp_submit(). The runtime infers
 * dependencies from the tasks' access boxes (RAW, WAR, WAW over exact boxes), keeps at most
 * `window` tasks in flight, and runs kernels on worker threads. Errors come back as a code and a
 * message (wsp_error_message); the runtime never calls abort() or exit().
 *
 * Everything between the two CDEF markers must stay parseable by cffi's cdef (no macros other
 * than integer #defines, no inline functions).
 */
#ifndef WSP_RUNTIME_H
#define WSP_RUNTIME_H

#include <stdint.h>

/* CDEF-BEGIN */
#define WSP_MAX_DIMS 8
#define WSP_MAX_TILES 16
#define WSP_MAX_SCALARS 16
#define WSP_MAX_COORDS 8

/* error codes (0 is success) */
#define WSP_OK 0
#define WSP_ERR_VIEW 1        /* a view failed its run-time check: the task never launched */
#define WSP_ERR_WINDOW 2      /* task window full in abort mode */
#define WSP_ERR_KERNEL 3      /* a kernel reported a failure */
#define WSP_ERR_INTERNAL 4    /* out of memory, thread creation failed, ... */
#define WSP_ERR_USAGE 5       /* the runtime was used wrongly (a bug in generated code) */
#define WSP_ERR_RECORDS 6     /* the cycle model's records passed wsp_sim_limit, or 2^31 - 2 tasks */
#define WSP_ERR_CANCELLED 7   /* wsp_fail(rt, WSP_ERR_CANCELLED, ...) from another thread: Ctrl-C */
#define WSP_ERR_DEPS 8        /* deps = explicit: an inferred dependency the declared order lacks */

/* access modes of a task's tile argument */
#define WSP_READ 1
#define WSP_WRITE 2
#define WSP_READWRITE 3

/* window modes */
#define WSP_WINDOW_STALL 0
#define WSP_WINDOW_ABORT 1

/* A tile argument as a kernel sees it (also the `extern c` ABI of language.md section 4):
 * element (i, j) is at data[i * stride + j * col_stride] (in elements). */
typedef struct wsp_tile {
    void *data;
    int64_t rows;
    int64_t cols;
    int64_t stride;       /* elements between rows */
    int64_t col_stride;   /* elements between columns (1 for a contiguous row) */
} wsp_tile;

typedef union wsp_scalar {
    int64_t i;
    double f;
} wsp_scalar;

/* A kernel: returns 0, or a nonzero code after wsp_kernel_fail(). */
typedef int (*wsp_kernel_fn)(const wsp_tile *tiles, const wsp_scalar *scalars);

/* A box of one tensor that a task reads and/or writes: [lo[d], hi[d]) in every dimension. */
typedef struct wsp_access {
    int32_t tensor;       /* index of the tensor in the module (0 .. ntensors-1) */
    int32_t mode;         /* WSP_READ, WSP_WRITE or WSP_READWRITE */
    int32_t ndim;
    int64_t lo[WSP_MAX_DIMS];
    int64_t hi[WSP_MAX_DIMS];
} wsp_access;

typedef struct wsp_task {
    wsp_kernel_fn fn;
    int32_t kernel;       /* kernel index, for traces and statistics */
    int32_t stmt;         /* statement index (the call in the source), for traces and errors */
    int32_t ntiles;
    int32_t nscalars;
    int32_t ncoords;
    wsp_tile tiles[WSP_MAX_TILES];
    wsp_scalar scalars[WSP_MAX_SCALARS];
    wsp_access access[WSP_MAX_TILES];   /* one per tile, same order */
    /* ntiles may exceed the kernel's tile parameters: entries after them are extra access boxes
     * (dependencies only; e.g. an event's scratch tensor read by every task `record(ev)`
     * marks). Their tiles must still be valid (data: any valid pointer, rows = cols = 1); the
     * kernel is passed them all and reads only its leading ones. */
    int64_t coords[WSP_MAX_COORDS];
    int32_t dispatcher;   /* 0 .. n-1 under wsp_schedule(n > 0, ...); ignored otherwise */
    int32_t stream;       /* 0 .. s-1 under wsp_schedule(..., s > 0); ignored otherwise */
    int32_t pool;         /* 0 .. npools-1 under wsp_graph(..., npools > 1); ignored otherwise */
    int64_t priority;     /* under wsp_graph(rt, WSP_READY_PRIORITY, ...): smaller runs first */
    int32_t device;       /* the device it runs on (the IR's Task.device: row-major over the mesh
                             axes); 0 in a program of one device. The cycle model places it on
                             that device's cores; a transport (wsp_transport_set) runs only this
                             process's device's tasks: see "Many processes" below */
    int64_t cycles;       /* the cycle model's cycles of this task, under wsp_policy.task_cycles:
                             WSP_TASK_CYCLES_ADD adds them to its kernel's, _SET replaces those
                             (a negative count counts as 0); ignored under _NONE */
} wsp_task;

typedef struct wsp_runtime wsp_runtime;

typedef struct wsp_stats {
    int64_t tasks;            /* tasks submitted */
    int64_t tasks_run;        /* tasks whose kernel ran */
    int64_t dependencies;     /* dependency edges inferred */
    int64_t max_in_flight;    /* the most tasks enumerated but unfinished at once */
    int64_t batches;          /* runtime tasks that stood for several submitted tasks */
    double execute_ms;        /* from wsp_begin to the end of wsp_wait */
} wsp_stats;

/* Life cycle: new -> begin -> (submit | batch | order_* | await | probe | note)* -> wait ->
 * stats/error -> free.
 * workers <= 0 means the host's core count; window <= 0 means no window. */
wsp_runtime *wsp_runtime_new(int32_t workers, int32_t ntensors);
void wsp_runtime_free(wsp_runtime *rt);
int32_t wsp_runtime_workers(const wsp_runtime *rt);
int wsp_begin(wsp_runtime *rt, int64_t window, int32_t window_mode);
int wsp_submit(wsp_runtime *rt, const wsp_task *task);      /* copies *task */
int wsp_wait(wsp_runtime *rt);                              /* all submitted tasks finished */
void wsp_get_stats(const wsp_runtime *rt, wsp_stats *out);

/* Batching: the next `ntasks` submissions may be packed, in submission order, into runtime
 * tasks of up to `grain` tasks each (at most 64), which one worker runs one after the other;
 * dependencies are inferred for the union of their boxes per tensor and mode, so nothing is
 * ever reordered, only parallelism inside a batch is given up. grain <= 0 lets the runtime
 * choose from ntasks and the worker count (enough batches to keep every worker busy). Order
 * scope calls, a full window, wsp_wait and the last of the `ntasks` close the open batch.
 * Statistics and the window count submitted tasks, not batches. Enumerators call it before a
 * parallel loop nest with the nest's task count. */
int wsp_batch(wsp_runtime *rt, int64_t ntasks, int64_t grain, int32_t flags);

/* wsp_batch flags. INDEPENDENT: no two of the announced tasks conflict (the compiler proved
 * their written boxes pairwise disjoint and untouched by the others). Then, with placement on
 * several worker queues and no streams, one batch may hold tasks of several queues: it is
 * inferred as one node and runs as one part per queue, in parallel, each part in submission
 * order on its dispatcher's worker. */
#define WSP_BATCH_INDEPENDENT 1

/* ---- schedules, the cycle model and the trace ------------------------------------------- */

/* Placement for one run, called after wsp_begin and before the first submit.
 * ndispatchers > 0: a task's `dispatcher` is honoured: dispatcher d's tasks run on worker
 *   d % workers, and only if `steal` (work_steal) may an idle worker take them; 0: any worker
 *   runs any task (no `.dispatch` in the schedule).
 * nstreams > 0: tasks of one `stream` start in submission order and never overlap. */
int wsp_schedule(wsp_runtime *rt, int32_t ndispatchers, int32_t steal, int32_t nstreams);
int32_t wsp_schedule_dispatchers(const wsp_runtime *rt);   /* as set for this run (0: none) */

/* The task graph's knobs for one run (`.task_graph(ready = ..., start = ..., pools = ...)`),
 * called after wsp_begin and wsp_schedule, before the first task. With their defaults
 * (WSP_READY_STEAL, WSP_START_THRESHOLD with threshold 1, npools 1) it changes nothing: ready
 * tasks go to per-worker queues that idle workers steal from. Any other value hands every ready
 * task of the run to one queue per pool instead (graph.c), where
 *   ready: WSP_READY_FIFO: a pool's tasks run in the order they became ready;
 *          WSP_READY_PRIORITY: in the order of their `priority`, then of submission;
 *   start: WSP_START_THRESHOLD: no task starts before `threshold` tasks are submitted;
 *          WSP_START_AFTER: none before wsp_wait (the enumeration has ended);
 *          either way workers start when the submitter must wait for them (a full window in
 *          stall mode, wsp_await, a wsp_probe that answers 1), or the run would never end;
 *   npools > 1: a task's `pool` picks its queue; pool p is served by the workers w with
 *          w % npools == p when npools <= workers, else by worker p % workers.
 * With npools 1 and placement pinned by wsp_schedule (no steal) the pools are the workers'
 * own queues (dispatcher % workers). Batching (wsp_batch) is off in such a run. */
#define WSP_READY_STEAL 0
#define WSP_READY_FIFO 1
#define WSP_READY_PRIORITY 2
#define WSP_START_THRESHOLD 0
#define WSP_START_AFTER 1
int wsp_graph(wsp_runtime *rt, int32_t ready, int32_t start, int64_t threshold, int32_t npools);
/* When the workers of the last wsp_graph run could start (what 0) and when its enumeration
 * ended (what 1), in ns since wsp_begin; -1 when the run set no knob. */
int64_t wsp_graph_time(const wsp_runtime *rt, int32_t what);
int32_t wsp_schedule_streams(const wsp_runtime *rt);

/* The machine the cycle model replays a run on (times in ns are converted with clock_ghz). */
typedef struct wsp_machine {
    double clock_ghz;
    int32_t dispatchers;      /* AICPUs: the default dispatcher count */
    int32_t cube_cores;
    int32_t vector_cores;
    int32_t devices;          /* NPUs, each with these cores and dispatchers and a comm engine
                                 (docs/performance.md, "The interconnect"); 0 or 1: one */
    double dispatch_ns;       /* a dispatcher's time to issue one task */
    double completion_ns;     /* from a kernel's end until its dependents may be issued */
} wsp_machine;

#define WSP_UNIT_VECTOR 0
#define WSP_UNIT_CUBE 1
#define WSP_UNIT_COMM 2       /* a collective's message: its device's comm engine, no dispatcher */

/* A kernel's duration on one core of its unit (from the IR's operation counts). */
typedef struct wsp_kcost {
    int32_t unit;             /* WSP_UNIT_VECTOR, WSP_UNIT_CUBE or WSP_UNIT_COMM */
    int32_t latency;          /* WSP_UNIT_COMM: the last `latency` of its `cycles` are the
                                 message's latency, during which its engine already moves the
                                 next message (messages pipeline); 0 .. cycles; 0 on cores */
    int64_t cycles;
} wsp_kcost;

#define WSP_TIMING_IMMEDIATE 0
#define WSP_TIMING_BATCHED 1
#define WSP_TIMING_INTERLEAVED 2
#define WSP_TIMING_RATE_LIMIT 3

/* A schedule as the cycle model sees it. */
typedef struct wsp_policy {
    int32_t ndispatchers;     /* >= 1 */
    int32_t steal;            /* work_steal */
    int32_t nstreams;         /* 0: tasks are in no stream */
    int32_t timing;           /* WSP_TIMING_* */
    int64_t timing_n;         /* batched(n), interleaved(n) */
    double rate_per_ms;       /* rate_limit(tasks_per_ms) */
    int64_t window;           /* task_graph(window = N); 0: none */
    int64_t timing_first;     /* interleaved(n, priority = s): the stream each dispatcher
                                 starts with (0 .. nstreams-1; 0 without a priority) */
    int32_t start;            /* WSP_START_*: no task is issued before the start moment */
    int32_t ready;            /* WSP_READY_*: PRIORITY orders a dispatcher's queue by priority */
    int64_t start_n;          /* WSP_START_THRESHOLD: the enumeration of task start_n - 1 */
    int32_t deps;             /* WSP_DEPS_*: EXPLICIT checks every inferred edge (explicit.c) */
    int32_t task_cycles;      /* WSP_TASK_CYCLES_*: what wsp_task.cycles means to the model */
    int32_t edge_tensors;     /* the last edge_tensors tensors are task handles' order tensors
                                 (named edges, `after`): under EXPLICIT their edges are declared */
} wsp_policy;

/* wsp_policy.task_cycles: the cycles a task takes in the model are its kernel's (wsp_kcost;
 * NONE), its kernel's plus task->cycles (ADD: a kernel's `add_cycles(n)`, n per call), or
 * task->cycles alone (SET: `.task_graph(trace = cycles(key))`). The log gives each distinct
 * (kernel, cycles) pair a cost entry of its own (simlog.c), so the replay is unchanged. */
#define WSP_TASK_CYCLES_NONE 0
#define WSP_TASK_CYCLES_ADD 1
#define WSP_TASK_CYCLES_SET 2

/* wsp_policy.deps. EXPLICIT: the order a program declares (the steps of order scopes, one
 * stream's order, the edges named with `after`) must imply every dependency the log infers; the first one it does not imply
 * fails the run (WSP_ERR_DEPS: "undeclared dependency: statement S [coords] on statement P
 * [coords] through tensor T") as the task is logged, before it can run. The runtime still
 * infers and keeps every edge, so nothing races meanwhile. Not with forked order contexts. */
#define WSP_DEPS_INFER 0
#define WSP_DEPS_EXPLICIT 1

/* One task of a replayed graph: its predecessors are the next `npreds` entries of the preds
 * array (indices of earlier tasks), tasks in enumeration order. With m->devices = D > 1 the
 * policy's ndispatchers (a multiple of D) are split evenly: dispatcher d belongs to device
 * d / (ndispatchers / D), and the task runs on that device's cores or comm engine. */
typedef struct wsp_simtask {
    int32_t kernel;
    int32_t dispatcher;       /* assigned (0 .. ndispatchers-1) */
    int32_t stream;           /* -1: none */
    int32_t npreds;
} wsp_simtask;

typedef struct wsp_simresult {
    int64_t enumerated;       /* cycles: when the enumerator produced it (window) */
    int64_t ready;            /* predecessors complete (and stream predecessor finished) */
    int64_t issue;            /* its dispatcher began issuing it */
    int64_t start, finish;    /* on its core */
    int32_t core;             /* index within its unit's cores */
    int32_t unit;
    int32_t dispatcher;       /* the dispatcher that issued it (differs when stolen) */
    int32_t group;            /* batched: the issue group's number; else -1 */
} wsp_simresult;

typedef struct wsp_simsummary {
    int64_t tasks;
    int64_t total_cycles;     /* makespan: the last finish */
    int64_t critical_path;    /* the longest chain of dispatch + kernel + completion */
    int64_t work[2];          /* kernel cycles per unit */
    int64_t serial_cycles;    /* every task one after another (dispatch + kernel + completion) */
    int64_t stolen;
    int64_t groups;           /* batched issue groups */
    int64_t comm_cycles;      /* the comm engines' busy cycles: cycles - latency per message */
} wsp_simsummary;

typedef struct wsp_simdisp {
    int64_t tasks;            /* issued by this dispatcher */
    int64_t stolen;           /* of those, assigned to another one */
    int64_t busy_cycles;      /* time spent issuing */
} wsp_simdisp;

/* The cycle model on an explicit graph: fills `results` (ntasks entries, or NULL), `summary`
 * and `disp` (policy->ndispatchers entries, or NULL). Deterministic: a function of its inputs.
 * Returns 0, or WSP_ERR_USAGE for malformed input (a message in `err`, if given). */
int wsp_sim_replay(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                   int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                   const int64_t *preds, wsp_simresult *results, wsp_simsummary *summary,
                   wsp_simdisp *disp, char *err, int32_t errlen);

/* An enumeration gate of a replayed graph (a wsp_await of the run): task `index` and every later
 * task are produced only after each of the gate's `nwriters` tasks (the next entries of the
 * writers array: indices of tasks before `index`; for a run's await, the awaited box's writers,
 * and its readers too when the await's mode has WSP_WRITE) has finished and its completion has
 * been seen. Gates come in nondecreasing index order; 0 <= index <= ntasks. */
typedef struct wsp_simgate {
    int64_t index;
    int32_t nwriters;
    int32_t unused;
} wsp_simgate;

/* wsp_sim_replay with enumeration gates (ngates entries, their writers in `writers`); with
 * ngates == 0 it is wsp_sim_replay. */
int wsp_sim_replay_gated(const wsp_machine *m, const wsp_policy *p, const wsp_kcost *costs,
                         int32_t nkernels, int64_t ntasks, const wsp_simtask *tasks,
                         const int64_t *preds, int64_t ngates, const wsp_simgate *gates,
                         const int64_t *writers, wsp_simresult *results,
                         wsp_simsummary *summary, wsp_simdisp *disp, char *err, int32_t errlen);

/* The trace of a run (after wsp_trace(rt, 1) before wsp_begin... see trace.c): one record per
 * task in enumeration order, real times in ns since wsp_begin. */
typedef struct wsp_trace_event {
    int32_t kernel, stmt;
    int32_t dispatcher;       /* assigned; -1 when the schedule has no .dispatch */
    int32_t stream;           /* -1: none */
    int32_t worker;           /* the host thread that ran it; -1 if it never ran */
    int32_t ncoords;
    int64_t coords[WSP_MAX_COORDS];
    int64_t start_ns, end_ns;
} wsp_trace_event;

/* 0: the next runs call no kernel (tasks are enumerated, ordered and dispatched, and the cycle
 * model replays them: a model-only run needs no data); 1 (the default): kernels run. */
int wsp_execute(wsp_runtime *rt, int32_t on);

/* Record a trace in the next runs (off by default: it costs memory and time per task). */
int wsp_trace_enable(wsp_runtime *rt, int32_t on);
int64_t wsp_trace_count(const wsp_runtime *rt);
/* Copies events first .. first+n-1 of the last run into out; returns how many. */
int64_t wsp_trace_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_trace_event *out);

/* The dependency edges of the last traced run, as pairs of int64 (what: WSP_LINKS_*):
 *   EDGES  (pred, succ): the edges the runtime added (an edge to a task already finished is
 *          never added), from task node to task node, each named by its first task's trace
 *          index; an order scope's barrier (a wait for a whole step) is not a task: not here;
 *   BATCHES (first, count): runtime tasks standing for `count` > 1 consecutive trace indices
 *          (wsp_batch); every other runtime task is one task;
 *   MODEL  (pred, succ): the cycle model's predecessors, task to task (its own inference: see
 *          wsp_sim_enable), when the model replayed the run;
 *   DROPPED: no pairs; the count is the EDGES not recorded past 2^25 in one run.
 * Copies pairs first .. first+n-1 into out (2n int64) and returns how many; with out NULL
 * returns the number of pairs (0 without a trace). */
enum { WSP_LINKS_EDGES = 0, WSP_LINKS_BATCHES = 1, WSP_LINKS_MODEL = 2, WSP_LINKS_DROPPED = 3 };
int64_t wsp_trace_links(const wsp_runtime *rt, int32_t what, int64_t first, int64_t n,
                        int64_t *out);

/* The cycle model after each run (off by default): the machine, the schedule's policy and the
 * kernels' costs; wsp_wait then replays the run's task graph (dependencies inferred exactly as
 * enumerated, independent of host timing; each wsp_await an enumeration gate on exactly the
 * tasks it waits for: the writers of the awaited box, and for a WRITE-mode await its readers
 * too; wsp_probe adds nothing) and keeps the results. */
int wsp_sim_enable(wsp_runtime *rt, const wsp_machine *m, const wsp_policy *p,
                   const wsp_kcost *costs, int32_t nkernels);
/* The shape of a tensor in this run (after wsp_begin, before its first task): lets the model
 * index tiles directly instead of hashing them. Optional. */
int wsp_sim_shape(wsp_runtime *rt, int32_t tensor, int32_t ndim, const int64_t *dims);
/* The most bytes the cycle model's records (its log and the replay's working memory) may take
 * in the next runs; 0 (the default): no limit but the machine's. The log grows per task (tasks
 * without a bound: a loop over a large sym), so a run whose records would pass `bytes` fails
 * with WSP_ERR_RECORDS before they are allocated ("cycle model limit: memory at statement S after
 * K tasks"; "tasks" instead of "memory" past the replay's 2^31 - 2 tasks). The log reserves
 * room in doublings, each checked against WSP_SIM_TASK_BYTES per task and WSP_SIM_EDGE_BYTES
 * per dependency edge: a bound on what the log and the replay take for them. Call it after
 * wsp_sim_enable (which resets it to 0), outside a run. */
#define WSP_SIM_TASK_BYTES 64
#define WSP_SIM_EDGE_BYTES 12
int wsp_sim_limit(wsp_runtime *rt, int64_t bytes);
int wsp_sim_summary(const wsp_runtime *rt, wsp_simsummary *out);
int wsp_sim_dispatchers(const wsp_runtime *rt, int32_t first, int32_t n, wsp_simdisp *out);
/* Per-task model results of the last run when tracing was on (else 0 copied). */
int64_t wsp_sim_read(const wsp_runtime *rt, int64_t first, int64_t n, wsp_simresult *out);

/* Order scopes for P.seq and `sequential`: inside a scope, tasks submitted after
 * wsp_order_next() start only after every task submitted in the scope before that call (and
 * in enclosing scopes' previous steps) has finished. Scopes nest like the loops that open them.
 * They act on the current order context's stack (below). */
int wsp_order_push(wsp_runtime *rt);
int wsp_order_next(wsp_runtime *rt);
int wsp_order_pop(wsp_runtime *rt);

/* Order contexts, for coroutines (CSP processes enumerated as a state machine in one
 * enumerator, one running at a time on the submitter thread): each context has its own stack
 * of order scopes. Every run starts in context 0; wsp_begin resets them (ids restart at 1).
 *
 * wsp_order_fork: a new context (returned: an id > 0; not made current) whose stack starts as a
 *   BORROWED copy of the current context's whole stack: at each borrowed level the child's
 *   tasks join the parent's current step (one group per level, shared with the parent, created
 *   here) and wait for the parent's barriers. So in `for i in P.seq(n) { fork children; they
 *   submit; the parent waits (in enumeration) until they end }`, every task of iteration i + 1
 *   (the parent's and its new children's) waits for every task of iteration i, the children's
 *   included. The child may push/next/pop scopes of its own on top; next/pop on a borrowed
 *   level is a usage error, and so is a child adding to a borrowed step its parent has already
 *   ended (the parent must not call next/pop/end on a level while a child that borrowed it is
 *   alive and still submits). Closes the open batch. On failure returns minus the run's error
 *   code (WSP_ERR_INTERNAL when out of memory; the run fails).
 * wsp_order_switch: makes `ctx` (0, or a live forked id) current. Closes the open batch first
 *   (a batch never spans contexts). Unknown or ended ids: WSP_ERR_USAGE.
 * wsp_order_end: the coroutine finished: its own scopes are popped (their steps end, as with
 *   wsp_order_pop), its references to borrowed levels dropped, and its id may be reused by a
 *   later fork. Ending the current context makes context 0 current (switch explicitly to go on
 *   elsewhere); context 0 cannot be ended. Works after a run's error too (it only releases),
 *   then returns that error.
 * wsp_wait ends every context still live (an enumerator that returned early after an error
 *   leaks nothing) without complaint; its "order scope(s) still open" usage error counts only
 *   context 0's own scopes. */
int32_t wsp_order_fork(wsp_runtime *rt);
int wsp_order_switch(wsp_runtime *rt, int32_t ctx);
int wsp_order_end(wsp_runtime *rt, int32_t ctx);

/* Data-dependent enumeration (language.md section 6: reading a tensor element that earlier
 * tasks of the run write waits for those writers). Blocks the submitter until every task
 * submitted so far (open batches included) that writes a box overlapping `acc`'s box of
 * `acc->tensor` has finished, so the caller may then read those elements. With acc->mode ==
 * WSP_READ tasks that do not write that box are not waited for; when acc->mode has the
 * WSP_WRITE bit (WSP_WRITE, WSP_READWRITE: the caller will write the elements) the unfinished
 * READERS of overlapping boxes are waited for too, as a writing task would (RAW + WAW + WAR);
 * other modes are usage errors. Returns WSP_OK, or the run's error code if the run failed
 * meanwhile (then the caller must stop enumerating). Only those tasks (and, through them, what
 * they wait for themselves); a task in a batch is waited for with its batch, whose union boxes
 * count as its boxes (an open batch holding one is closed first; otherwise it stays open). An
 * await adds no order among tasks and leaves order scopes, streams and the window as they were;
 * with nothing to wait for it returns at once. (Events: `synchronize(ev)` is a WSP_READWRITE
 * await on the event's scratch tensor, which every task `record(ev)` marks reads as an extra
 * access; `query(ev)` is !wsp_probe of the same access.) */
int wsp_await(wsp_runtime *rt, const wsp_access *acc);

/* Whether wsp_await(rt, acc) would have to wait now: 1 when some task it would wait for has not
 * finished, 0 when none, or minus an error code (a usage error fails the run as wsp_await's
 * would; a failed run's code is returned as is, negated). Never blocks and adds no gate to the
 * cycle model. Closes the open batch only if it holds a task the await would wait for. When it
 * returns 1 it shows the workers any ready task still staged, so a loop of probes makes
 * progress. */
int wsp_probe(wsp_runtime *rt, const wsp_access *acc);

/* Notes for traces (channel occupancy and the like): when the run records a trace
 * (wsp_trace_enable(rt, 1) before wsp_begin), wsp_note appends the triple (index, tag, value),
 * index being the number of tasks submitted so far in the run: a note made just before a
 * wsp_submit names that task's trace index. Without a trace it returns WSP_OK at once (a
 * branch). Out of memory fails the run (WSP_ERR_INTERNAL); after an error it returns the error.
 * Notes are reset by wsp_begin (memory kept). wsp_note_count: notes of the current or last run
 * (0 without a trace); wsp_note_read copies notes first .. first+n-1 into out (3 int64 each:
 * index, tag, value) and returns how many it copied. Read on the submitter's thread or after
 * wsp_wait. */
int wsp_note(wsp_runtime *rt, int64_t tag, int64_t value);
int64_t wsp_note_count(const wsp_runtime *rt);
int64_t wsp_note_read(const wsp_runtime *rt, int64_t first, int64_t n, int64_t *out);

/* ---- many processes, one device each (docs/running.md, "Running on MPI") ------------------
 *
 * A program lowered for a mesh (docs/distributed.md) gives every tensor a leading device
 * dimension and every task a `device`. With a transport set, this process is one device
 * (`x->device` of `x->devices`): every process enumerates the whole program, and wsp_submit
 * keeps only the tasks of its own device. A tile whose box lies in another device's slice of a
 * tensor (its first dimension's coordinate, for tensors with elem_bytes[t] > 0) is REMOTE: it
 * may only be read (a collective's source tile). Every remote read of the run is numbered in
 * enumeration order (the same numbers in every process), and that number is the message's tag:
 *   - on the device that reads it, the task gets a private buffer for the tile and waits (a
 *     hold, like a predecessor) until `recv` has filled it and the transport calls wsp_arrived;
 *     the kernel then reads the buffer as the tile (stride = cols);
 *   - on the device that holds it, a SEND task is submitted in its place: it reads the tile
 *     (so it waits for the tile's writers, and later writers wait for it). A tile that is one
 *     block of memory goes to `send_from` (when the transport has it) as it is: the send task
 *     finishes only when the transport calls wsp_arrived(rt, token, NULL, ok) to say it no
 *     longer reads the memory. Any other tile is packed row by row into a new buffer handed
 *     to `send`, which frees it (free()) once sent. It is traced and counted as a task of the
 *     reading task's kernel and statement.
 * Messages match by (device, tag), not by order, so each tile moves as soon as its holder has
 * it, whatever order the tasks of a collective become ready in on each device. The transport
 * calls must not block; `fail` (may be NULL) is called once when the run fails, from any
 * thread: the transport must then make every receive and `send_from` still pending arrive
 * (a receive's buffer as it is), so that the run drains (no task runs after an error).
 * `poll` (may be NULL) makes progress on the calling thread: an idle worker calls it in its
 * spin while a receive or a `send_from` of this process is pending, and the task a receive
 * releases then runs on that worker without a wake-up. It returns 1 if anything moved, 0 if not, -1 once the run
 * has failed; wsp_wait returns only when no worker is inside it. */
typedef struct wsp_transport {
    void *ctx;
    int32_t device;           /* this process's device */
    int32_t devices;          /* the devices of the mesh (processes) */
    int (*recv)(void *ctx, void *buf, int64_t bytes, int32_t from, int64_t tag, void *token);
    int (*send)(void *ctx, void *buf, int64_t bytes, int32_t to, int64_t tag);
    void (*fail)(void *ctx);
    int (*send_from)(void *ctx, const void *buf, int64_t bytes, int32_t to, int64_t tag,
                     void *token);    /* may be NULL: every tile is packed for `send` */
    int (*poll)(void *ctx);   /* may be NULL: see below */
} wsp_transport;
/* Between runs: x == NULL (or x->devices == 0) removes it. elem_bytes: per tensor, its element
 * size when its first dimension is the device dimension, else 0 (ntensors entries). */
int wsp_transport_set(wsp_runtime *rt, const wsp_transport *x, int32_t ntensors,
                      const int32_t *elem_bytes);
/* The transport: the receive of `buf` posted with `token` has filled it (ok != 0), or will not
 * (ok == 0: the run fails, if it has not already; the buffer becomes the transport's, which
 * frees it once nothing can write it any more); or, with buf NULL, the `send_from` posted with
 * `token` no longer reads its memory (ok == 0: it was not sent, and the run fails). From any
 * thread, once per receive or send_from. */
void wsp_arrived(wsp_runtime *rt, void *token, void *buf, int ok);
/* This process's device (x->device of the transport set), 0 without one. An enumerator reads
 * an element of a tensor with the device dimension (a `Read` of an index tensor, replicated:
 * every device computes its copy) from this device's copy: in one process every device's copy
 * is computed, in one process per device only its own. */
int32_t wsp_device(const wsp_runtime *rt);
/* Remote reads numbered in the last (or current) run: receives plus sends plus the reads that
 * concern two other devices. */
int64_t wsp_transport_count(const wsp_runtime *rt);

/* Errors: the first error wins; later submits return it at once and no further task starts. */
int wsp_fail(wsp_runtime *rt, int code, const char *message);
int wsp_error_code(const wsp_runtime *rt);
const char *wsp_error_message(const wsp_runtime *rt);

/* Called by a kernel (on its worker thread) to explain a failure: the text (kept per thread,
 * truncated to 255 bytes) joins the run's WSP_ERR_KERNEL message. Returns WSP_ERR_KERNEL, so a
 * kernel can `return wsp_kernel_fail("...");`. */
int wsp_kernel_fail(const char *message);
/* CDEF-END */

#endif
