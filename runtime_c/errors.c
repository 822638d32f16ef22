/* errors.c: a runtime's error state, and the clock.
 *
 * The first wsp_fail of a run wins: its code and message are what every later call and
 * wsp_wait return, and it wakes a submitter stalled on the window. A kernel's own words for
 * its failure (wsp_kernel_fail) are kept per thread until the worker that ran it reports the
 * failure (wsp__kernel_failed, dispatch.c). wsp__now_ns is the monotonic clock of the trace's
 * times and of a run's execute_ms.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "wsp_internal.h"

int64_t wsp__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void set_error(wsp_runtime *rt, int code, const char *text) {
    int won = 0;
    pthread_mutex_lock(&rt->err_mu);
    if (atomic_load_explicit(&rt->err, memory_order_relaxed) == 0) {
        snprintf(rt->errmsg, sizeof rt->errmsg, "%s", text ? text : "(no message)");
        atomic_store_explicit(&rt->err, code, memory_order_release);
        won = 1;
    }
    pthread_mutex_unlock(&rt->err_mu);
    /* many processes: receives still pending must arrive, or the run would never drain */
    if (won && rt->xport.devices > 0 && rt->xport.fail) rt->xport.fail(rt->xport.ctx);
    if (won) {  /* a submitter stalled on the window returns at once */
        pthread_mutex_lock(&rt->mu);
        pthread_cond_broadcast(&rt->cv);
        pthread_mutex_unlock(&rt->mu);
    }
}

int wsp_fail(wsp_runtime *rt, int code, const char *message) {
    if (!rt) return code ? code : WSP_ERR_USAGE;
    if (code != WSP_OK) set_error(rt, code, message);
    return atomic_load_explicit(&rt->err, memory_order_acquire);
}

int wsp__failf(wsp_runtime *rt, int code, const char *fmt, ...) {
    char buf[WSP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return wsp_fail(rt, code, buf);
}

int wsp_error_code(const wsp_runtime *rt) {
    return rt ? atomic_load_explicit(&((wsp_runtime *)rt)->err, memory_order_acquire) : WSP_OK;
}

const char *wsp_error_message(const wsp_runtime *rt) {
    if (!rt || atomic_load_explicit(&((wsp_runtime *)rt)->err, memory_order_acquire) == 0)
        return "";
    return rt->errmsg;
}

/* A kernel's own words for its failure, kept per thread until the worker reports it. */
static _Thread_local char kernel_msg[256];

int wsp_kernel_fail(const char *message) {
    snprintf(kernel_msg, sizeof kernel_msg, "%s", message ? message : "");
    return WSP_ERR_KERNEL;
}

void wsp__kernel_msg_clear(void) { kernel_msg[0] = 0; }

void wsp__kernel_failed(wsp_runtime *rt, int32_t kernel, int32_t stmt, const int64_t *c,
                        int ncoords, int rc) {
    char coords[WSP_MAX_COORDS * 24 + 4];
    size_t len = 0;
    coords[0] = 0;
    for (int i = 0; i < ncoords && len < sizeof coords; i++)
        len += (size_t)snprintf(coords + len, sizeof coords - len, "%s%lld", i ? ", " : "",
                                (long long)c[i]);
    wsp__failf(rt, WSP_ERR_KERNEL, "kernel %d (statement %d) failed at coords [%s] with code %d%s%s",
               kernel, stmt, coords, rc, kernel_msg[0] ? ": " : "", kernel_msg);
}
