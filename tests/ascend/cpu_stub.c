/* cpu_sim's enumerator (the C that backends/cpu/enumerate.py and csp.py emit, unchanged) run
 * against a stand-in runtime that records every task it submits instead of running it: the
 * oracle of tests/ascend/test_expander.py.
 *
 * The stand-in finishes tasks the way the ascend_npu target does: nothing finishes until a
 * segment ends, and a segment ends when it holds `capacity` tasks or when the enumerator must
 * wait (wsp_await) for one of its tasks; then all of them have finished. That fixes the one
 * outcome that depends on timing (`query`), and the places segments end are printed too.
 *
 *   cpu_stub DATA SCHEDULE NDISPATCHERS NSTREAMS CAPACITY
 *
 * prints one line per task (see print_task), "flush" where a segment ends, "#..." lines for
 * order scopes and coroutine contexts, then "end ok" or "end error CODE MESSAGE" (a deadlock
 * also prints its report words).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness_io.h"
#include "wsp_runtime.h"

typedef int (*entry_fn)(wsp_runtime *, const int64_t *, void *const *, int64_t *);
extern entry_fn wsp_test_entries[];

struct wsp_runtime {
    harness_data *data;
    int32_t nd, ns;
    int64_t capacity, ntasks;
    wsp_access *pending;
    int64_t npending, cap_pending;
    int code;
    char message[512];
    int32_t next_ctx;
};

static wsp_runtime RT;

static int overlap(const wsp_access *a, const wsp_access *b) {
    if (a->tensor != b->tensor) return 0;
    for (int d = 0; d < a->ndim && d < b->ndim; d++)
        if (!(a->lo[d] < b->hi[d] && b->lo[d] < a->hi[d])) return 0;
    return 1;
}

/* 1 when some unfinished task's box conflicts with acc (as wsp_await would wait for it) */
static int conflicts(const wsp_access *acc) {
    for (int64_t i = 0; i < RT.npending; i++) {
        const wsp_access *p = &RT.pending[i];
        int clash = (acc->mode & WSP_WRITE) ? 1 : (p->mode & WSP_WRITE) != 0;
        if (clash && overlap(p, acc)) return 1;
    }
    return 0;
}

static void flush(void) {
    printf("flush\n");
    RT.npending = 0;
    RT.ntasks = 0;
}

static int64_t tensor_of(const void *data) {
    for (int64_t t = 0; t < RT.data->ntensors; t++) {
        const char *b = RT.data->tensors[t];
        if ((const char *)data >= b && (const char *)data < b + RT.data->nbytes[t] + 8) return t;
    }
    return -1;
}

static void print_task(const wsp_task *t) {
    printf("task stmt=%d kernel=%d coords=", (int)t->stmt, (int)t->kernel);
    for (int i = 0; i < t->ncoords && i < WSP_MAX_COORDS; i++) printf("%s%lld", i ? "," : "", (long long)t->coords[i]);
    printf(" disp=%d stream=%d tiles=", (int)t->dispatcher, (int)t->stream);
    int64_t nk = RT.data->ktiles[t->kernel];
    for (int64_t i = 0; i < nk; i++) {
        const wsp_tile *x = &t->tiles[i];
        int64_t tn = tensor_of(x->data);
        printf("[%lld:%lld:%lld:%lld:%lld:%lld]", (long long)tn,
               (long long)((const char *)x->data - RT.data->tensors[tn]), (long long)x->rows,
               (long long)x->cols, (long long)x->stride, (long long)x->col_stride);
    }
    printf(" acc=");
    for (int i = 0; i < t->ntiles; i++) {
        const wsp_access *a = &t->access[i];
        printf("[%d:%d:", (int)a->tensor, (int)a->mode);
        for (int d = 0; d < a->ndim; d++) printf("%s%lld-%lld", d ? "," : "", (long long)a->lo[d], (long long)a->hi[d]);
        printf("]");
    }
    printf(" scal=");
    for (int i = 0; i < t->nscalars; i++) printf("%s%lld", i ? "," : "", (long long)t->scalars[i].i);
    printf("\n");
}

int wsp_submit(wsp_runtime *rt, const wsp_task *t) {
    if (rt->code) return rt->code;
    if (rt->ntasks == rt->capacity) flush();
    print_task(t);
    if (rt->npending + t->ntiles > rt->cap_pending) {
        rt->cap_pending = (rt->cap_pending + t->ntiles) * 2;
        rt->pending = (wsp_access *)realloc(rt->pending, (size_t)rt->cap_pending * sizeof(wsp_access));
    }
    for (int i = 0; i < t->ntiles; i++) rt->pending[rt->npending++] = t->access[i];
    rt->ntasks++;
    return 0;
}

int wsp_await(wsp_runtime *rt, const wsp_access *acc) {
    if (rt->code) return rt->code;
    if (conflicts(acc)) flush();
    return 0;
}

int wsp_probe(wsp_runtime *rt, const wsp_access *acc) {
    if (rt->code) return -rt->code;
    return conflicts(acc);
}

int wsp_batch(wsp_runtime *rt, int64_t ntasks, int64_t grain, int32_t flags) {
    (void)ntasks; (void)grain; (void)flags;
    return rt->code;
}
int wsp_order_push(wsp_runtime *rt) { printf("#push\n"); return rt->code; }
int wsp_order_next(wsp_runtime *rt) { printf("#next\n"); return rt->code; }
int wsp_order_pop(wsp_runtime *rt) { printf("#pop\n"); return rt->code; }
int32_t wsp_order_fork(wsp_runtime *rt) {
    int32_t id = ++rt->next_ctx;
    printf("#fork %d\n", (int)id);
    return id;
}
int wsp_order_switch(wsp_runtime *rt, int32_t ctx) { printf("#switch %d\n", (int)ctx); return rt->code; }
int wsp_order_end(wsp_runtime *rt, int32_t ctx) { printf("#end %d\n", (int)ctx); return rt->code; }
int wsp_note(wsp_runtime *rt, int64_t tag, int64_t value) { (void)tag; (void)value; return rt->code; }
int32_t wsp_schedule_dispatchers(const wsp_runtime *rt) { return rt->nd; }
int32_t wsp_schedule_streams(const wsp_runtime *rt) { return rt->ns; }
int wsp_error_code(const wsp_runtime *rt) { return rt->code; }
int wsp_fail(wsp_runtime *rt, int code, const char *message) {
    if (!rt->code) {
        rt->code = code;
        snprintf(rt->message, sizeof rt->message, "%s", message);
    }
    return rt->code;
}

/* kernels never run here (the stream is the enumeration's); a gather wrapper links to this */
int wsp_kernel_fail(const char *message) { (void)message; return WSP_ERR_KERNEL; }

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s DATA SCHEDULE NDISPATCHERS NSTREAMS CAPACITY\n", argv[0]);
        return 2;
    }
    static harness_data data;
    harness_read(argv[1], &data);
    RT.data = &data;
    RT.nd = atoi(argv[3]);
    RT.ns = atoi(argv[4]);
    RT.capacity = atoll(argv[5]);
    int64_t *info = (int64_t *)calloc(1 << 16, sizeof(int64_t));
    int rc = wsp_test_entries[atoi(argv[2])](&RT, data.syms, (void *const *)data.tensors, info);
    if (rc == 0 && RT.code == 0) {
        printf("end ok\n");
        return 0;
    }
    printf("end error %d %s\n", RT.code, RT.message);
    if (strcmp(RT.message, "CSP DEADLOCK") == 0) {
        /* the report words csp.py writes after the counters (argv: none; the test passes the
           counter count through the environment) */
        const char *base = getenv("WSP_INFO_BASE");
        int64_t b = base ? atoll(base) : 0, n = info[b];
        printf("deadlock");
        for (int64_t i = 0; i < n; i++) printf(" %lld", (long long)info[b + 1 + i]);
        printf("\n");
    }
    return 0;
}
