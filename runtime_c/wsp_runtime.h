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
    int64_t coords[WSP_MAX_COORDS];
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

/* Life cycle: new -> begin -> (submit | batch | order_* )* -> wait -> stats/error -> free.
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
int wsp_batch(wsp_runtime *rt, int64_t ntasks, int64_t grain);

/* Order scopes for P.seq and `sequential`: inside a scope, tasks submitted after
 * wsp_order_next() start only after every task submitted in the scope before that call (and
 * in enclosing scopes' previous steps) has finished. Scopes nest like the loops that open them. */
int wsp_order_push(wsp_runtime *rt);
int wsp_order_next(wsp_runtime *rt);
int wsp_order_pop(wsp_runtime *rt);

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
