/* wsp_mpi.c: the MPI transport of the runtime (wsp_transport in wsp_runtime.h, "many
 * processes"), built only for `wspc run --launcher mpi` (backends/cpu/mpi.py compiles it
 * against the mpich wheel's mpi.h and libmpi into a library of its own), so the runtime linked
 * into every module never needs MPI.
 *
 * A send is posted (MPI_Isend on a duplicate of MPI_COMM_WORLD, tagged with the remote read's
 * number) by the worker that runs its send task, as soon as the tile is written: from the
 * tensor's memory when the tile is one block, else packed. A receive is queued by the submitter
 * when the reading task is enumerated. Every other MPI call is a STEP of progress, made by
 * whoever holds `poll_mu`: it posts the queued receives (MPI_Irecv), tests a window of what is
 * outstanding (MPI_Testsome: on one host, MPI copies a message inside it), tells the runtime of
 * each receive that completed (wsp_arrived: the reading task may then run) and of each send
 * from a tensor (its send task may then finish, and the tile's next writer run), and frees each
 * packed send's buffer. The steps are made by
 *   - an idle worker, in its spin, while tasks of its process wait for a transfer (`poll`, see
 *     dispatch.c): the task a receive releases then runs on the thread that copied the
 *     message, without a wake-up; on a host with a core per rank, the hand-offs between a
 *     progress thread and a worker were most of the time of a 1 MiB allreduce;
 *   - else the PROGRESS THREAD, so that messages move while every worker runs a kernel. It
 *     naps while workers poll, sleeps when nothing is outstanding, and backs off to short
 *     sleeps when nothing completes, so that it does not take a core from the kernels.
 * No thread ever waits in MPI for a message (a worker's MPI_Isend waits at most for MPI's
 * lock). Point-to-point messages match by (source, tag), so the tiles of one collective may
 * become ready in any order on each process: no MPI collective call (which every process must
 * start in the same order) is used, and the reduction is the kernel's own fixed order.
 *
 * A failed run (the runtime calls `fail`): every receive (and send from a tensor) still
 * outstanding is reported to the runtime as not arrived (the run drains: no task runs after an error) and its buffer kept
 * until MPI is done with it; the process is about to end (MPI_Abort from Python).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsp_runtime.h"

typedef void (*wsp_arrived_fn)(wsp_runtime *rt, void *token, void *buf, int ok);

enum { OP_RECV = 0, OP_SEND = 1, OP_SEND_FROM = 2 };  /* SEND_FROM: the tensor's memory */
#define WINDOW 64              /* requests tested per MPI_Testsome */

typedef struct op {
    struct op *next;
    MPI_Request req;           /* a send posted by its caller: the request to test */
    int posted;                /* so: the progress thread only tests it */
    void *buf;
    void *token;               /* a receive's or send_from's task; NULL once reported (orphaned) */
    int64_t bytes;
    int32_t peer;
    int32_t kind;
    int tag;
} op;

typedef struct wsp_mpi {
    MPI_Comm comm;
    int rank, size, tag_ub;
    wsp_runtime *rt;
    wsp_arrived_fn arrived;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op *head, *tail;           /* queued, not yet posted (under mu) */
    int stop;                  /* under mu */
    atomic_int failed;
    atomic_llong outstanding;  /* queued + posted, for wsp_mpi_quiet */
    atomic_int n_posted;       /* n, for reading without `poll_mu` */
    atomic_int idle_wait;      /* the progress thread waits on cv with nothing outstanding */
    /* whoever makes progress holds poll_mu: the progress thread, or an idle worker (x_poll) */
    pthread_mutex_t poll_mu;
    atomic_int seen_failed;
    atomic_llong polls;        /* x_poll calls: a worker making progress, which the thread leaves to it */
    atomic_llong worker_steps; /* x_poll calls that moved something (wsp_mpi_worker_steps) */    /* the outstanding operations were orphaned after a failure */
    MPI_Request *reqs;
    op **ops;
    int *idx;
    int n, cap;
    int win;                   /* the first request the next test looks at */
    char error[256];
} wsp_mpi;

static void orphan(wsp_mpi *m, op *o) {
    if (o->kind != OP_SEND && o->token) {
        m->arrived(m->rt, o->token, o->kind == OP_RECV ? o->buf : NULL, 0);
        o->token = NULL;
    }
}

static int grow(wsp_mpi *m) {
    int cap = m->cap ? 2 * m->cap : 256;
    MPI_Request *r = realloc(m->reqs, (size_t)cap * sizeof *r);
    if (r) m->reqs = r;
    op **o = realloc(m->ops, (size_t)cap * sizeof *o);
    if (o) m->ops = o;
    int *ix = realloc(m->idx, (size_t)cap * sizeof *ix);
    if (ix) m->idx = ix;
    if (!r || !o || !ix) return -1;
    m->cap = cap;
    return 0;
}

/* Posts o (or takes the request its caller posted); on failure reports it (a receive as not
 * arrived) and frees what it can. */
static void post(wsp_mpi *m, op *o) {
    int rc = MPI_ERR_OTHER;
    if (m->n == m->cap && grow(m) != 0) {
        if (o->posted) {  /* MPI has the buffer: wait for it rather than lose it */
            MPI_Wait(&o->req, MPI_STATUS_IGNORE);
            o->posted = 0;
        }
        snprintf(m->error, sizeof m->error, "out of memory (MPI requests)");
    } else if (o->bytes > INT_MAX) {
        snprintf(m->error, sizeof m->error, "a tile of %lld bytes (MPI counts are int)",
                 (long long)o->bytes);
    } else if (o->posted) {
        m->reqs[m->n] = o->req;
        rc = MPI_SUCCESS;
    } else if (o->kind == OP_RECV) {
        rc = MPI_Irecv(o->buf, (int)o->bytes, MPI_BYTE, o->peer, o->tag, m->comm, &m->reqs[m->n]);
    } else {  /* OP_SEND, OP_SEND_FROM */
        rc = MPI_Isend(o->buf, (int)o->bytes, MPI_BYTE, o->peer, o->tag, m->comm, &m->reqs[m->n]);
    }
    if (rc == MPI_SUCCESS) {
        m->ops[m->n++] = o;
        if (atomic_load_explicit(&m->failed, memory_order_acquire)) orphan(m, o);
        return;
    }
    if (o->kind != OP_SEND && o->token)
        m->arrived(m->rt, o->token, o->kind == OP_RECV ? o->buf : NULL, 0);
    if (o->kind != OP_SEND_FROM) free(o->buf);
    free(o);
    atomic_fetch_sub(&m->outstanding, 1);
}

/* One completed operation: a receive is handed to the runtime (its buffer is the task's), a
 * send_from's task told (the memory is the tensor's), a send's buffer freed; an orphaned
 * receive's buffer is freed too. */
static void done(wsp_mpi *m, op *o) {
    if (o->kind == OP_RECV && o->token) {
        m->arrived(m->rt, o->token, o->buf, 1);
    } else if (o->kind == OP_SEND_FROM) {
        if (o->token) m->arrived(m->rt, o->token, NULL, 1);
    } else {
        free(o->buf);
    }
    free(o);
    atomic_fetch_sub(&m->outstanding, 1);
}

/* One step of progress, under poll_mu: posts what is queued, then tests a window of the
 * outstanding requests and reports what completed. 1 if it posted or completed anything. */
static int step(wsp_mpi *m) {
    pthread_mutex_lock(&m->mu);
    op *list = m->head;
    m->head = m->tail = NULL;
    pthread_mutex_unlock(&m->mu);
    for (op *o = list, *next; o; o = next) {
        next = o->next;
        post(m, o);
    }
    if (!atomic_load_explicit(&m->seen_failed, memory_order_relaxed) &&
        atomic_load_explicit(&m->failed, memory_order_acquire)) {
        atomic_store_explicit(&m->seen_failed, 1, memory_order_relaxed);
        for (int i = 0; i < m->n; i++) orphan(m, m->ops[i]);
    }
    if (list) {
        /* posted by a worker's step: the progress thread may have gone to wait, having seen
         * nothing queued and nothing outstanding, and must test these once workers stop
         * polling. seq_cst store, then load: Dekker's pairing with the thread's announcement,
         * which it makes under mu before it looks at n_posted, so a signal sent under mu after
         * it announced is not lost */
        atomic_store_explicit(&m->n_posted, m->n, memory_order_seq_cst);
        if (m->n > 0 && atomic_load_explicit(&m->idle_wait, memory_order_seq_cst)) {
            pthread_mutex_lock(&m->mu);
            pthread_cond_signal(&m->cv);
            pthread_mutex_unlock(&m->mu);
        }
    }
    if (m->n == 0) return list != NULL;
    /* a window of the outstanding requests per call: testing all of them would make a run
     * of n messages cost n^2 (a collective of 16 MiB is 1024 tiles each way); the window
     * moves on when nothing in it completes. Messages mostly complete in enumeration order,
     * which is the order of the array (compaction keeps it), so the oldest go first. */
    if (m->win >= m->n) m->win = 0;
    int first = m->win, count = m->n - first < WINDOW ? m->n - first : WINDOW;
    int outcount = 0;
    if (MPI_Testsome(count, m->reqs + first, &outcount, m->idx, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS || outcount == MPI_UNDEFINED)
        outcount = 0;
    for (int k = 0; k < outcount; k++) {
        done(m, m->ops[first + m->idx[k]]);
        m->ops[first + m->idx[k]] = NULL;
    }
    if (outcount == 0) {
        m->win = first + count;
        return list != NULL;
    }
    int j = 0;  /* compact: the order of what is left does not matter */
    for (int i = 0; i < m->n; i++) {
        if (!m->ops[i]) continue;
        m->ops[j] = m->ops[i];
        m->reqs[j] = m->reqs[i];
        j++;
    }
    m->n = j;
    atomic_store_explicit(&m->n_posted, m->n, memory_order_relaxed);
    return 1;
}

/* Sleeps on cv for up to `ns` (a newly queued operation ends it: enqueue signals). */
static void nap(wsp_mpi *m, long ns) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ns;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    if (!m->head && !m->stop) pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    pthread_mutex_unlock(&m->mu);
}

static void *progress(void *arg) {
    wsp_mpi *m = arg;
    int idle = 0;
    long long polls = 0;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        atomic_store_explicit(&m->idle_wait, 1, memory_order_seq_cst);
        while (!m->head && atomic_load_explicit(&m->n_posted, memory_order_seq_cst) == 0 &&
               !m->stop && atomic_load_explicit(&m->failed, memory_order_acquire) ==
                               atomic_load_explicit(&m->seen_failed, memory_order_relaxed))
            pthread_cond_wait(&m->cv, &m->mu);
        atomic_store_explicit(&m->idle_wait, 0, memory_order_relaxed);
        int stop = m->stop, queued = m->head != NULL;
        pthread_mutex_unlock(&m->mu);
        if (stop && !queued && atomic_load_explicit(&m->n_posted, memory_order_relaxed) == 0)
            break;
        if (queued) idle = 0;  /* new work: its messages are near, so poll before backing off */
        long long seen = atomic_load_explicit(&m->polls, memory_order_relaxed);
        if (seen != polls || pthread_mutex_trylock(&m->poll_mu) != 0) {
            /* an idle worker is making progress (x_poll): leave it the core and the calls */
            polls = seen;
            nap(m, 50000);
            continue;
        }
        int got = step(m);
        pthread_mutex_unlock(&m->poll_mu);
        if (got) {
            idle = 0;
            continue;
        }
        /* nothing completed: a message is often microseconds away, so give the core to
         * whoever wants it (the kernels) without sleeping first, then sleep in short steps,
         * which a newly queued operation ends (enqueue signals) */
        if (++idle > 16) {
            if (idle < 4096) sched_yield();
            else nap(m, 50000);
        }
    }
    return NULL;
}

/* The transport's `poll`: a step of progress on the calling thread (an idle worker while tasks
 * of this process wait for messages), so that a receive's copy and the task it releases run on
 * one thread with no hand-off between them; the progress thread naps while workers poll. 1 if
 * it posted or completed anything, 0 if not (or another thread is making progress), -1 once
 * the run has failed (the progress thread reports what is outstanding then). */
static int x_poll(void *ctx) {
    wsp_mpi *m = ctx;
    if (atomic_load_explicit(&m->failed, memory_order_acquire)) return -1;
    atomic_fetch_add_explicit(&m->polls, 1, memory_order_relaxed);
    if (pthread_mutex_trylock(&m->poll_mu) != 0) return 0;
    int got = step(m);
    pthread_mutex_unlock(&m->poll_mu);
    if (got) atomic_fetch_add_explicit(&m->worker_steps, 1, memory_order_relaxed);
    return got;
}

static void enqueue(wsp_mpi *m, op *o) {
    atomic_fetch_add(&m->outstanding, 1);
    pthread_mutex_lock(&m->mu);
    o->next = NULL;
    if (m->tail) m->tail->next = o;
    else m->head = o;
    m->tail = o;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

static op *new_op(wsp_mpi *m, int kind, void *buf, int64_t bytes, int32_t peer, int64_t tag,
                  void *token) {
    op *o = malloc(sizeof *o);
    if (!o) return NULL;
    o->posted = 0;
    o->buf = buf;
    o->token = token;
    o->bytes = bytes;
    o->peer = peer;
    o->kind = kind;
    o->tag = (int)(tag % ((int64_t)m->tag_ub + 1));
    return o;
}

static int x_recv(void *ctx, void *buf, int64_t bytes, int32_t from, int64_t tag, void *token) {
    wsp_mpi *m = ctx;
    op *o = new_op(m, OP_RECV, buf, bytes, from, tag, token);
    if (!o) return -1;
    enqueue(m, o);
    return 0;
}

/* A send is posted by the thread that asks for it (the worker whose send task runs once the
 * tile's producer has finished), then handed to the progress thread only to be tested: queued
 * for that thread to post, it would wait for the thread's current MPI call, and a receive's
 * MPI_Testsome on this host copies the whole message (a 256 KiB tile: about 20 us), so the
 * peer waited that long for a tile that was ready. MPI_THREAD_MULTIPLE (checked at
 * wsp_mpi_new) allows the call from any thread. */
static int send_now(wsp_mpi *m, op *o) {
    if (o->bytes > INT_MAX ||
        MPI_Isend(o->buf, (int)o->bytes, MPI_BYTE, o->peer, o->tag, m->comm, &o->req) !=
            MPI_SUCCESS)
        return -1;
    o->posted = 1;
    enqueue(m, o);
    return 0;
}

static int x_send(void *ctx, void *buf, int64_t bytes, int32_t to, int64_t tag) {
    wsp_mpi *m = ctx;
    op *o = new_op(m, OP_SEND, buf, bytes, to, tag, NULL);
    if (!o || send_now(m, o) != 0) {
        free(buf);
        free(o);
        return -1;
    }
    return 0;
}

static int x_send_from(void *ctx, const void *buf, int64_t bytes, int32_t to, int64_t tag,
                       void *token) {
    wsp_mpi *m = ctx;
    op *o = new_op(m, OP_SEND_FROM, (void *)buf, bytes, to, tag, token);
    if (!o || send_now(m, o) != 0) {
        free(o);
        return -1;
    }
    return 0;
}

static void x_fail(void *ctx) {
    wsp_mpi *m = ctx;
    atomic_store_explicit(&m->failed, 1, memory_order_release);
    pthread_mutex_lock(&m->mu);
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* ---- the library's entry points (cffi, backends/cpu/mpi.py) ------------------------------- */

/* A transport over MPI_COMM_WORLD (MPI initialised with MPI_THREAD_MULTIPLE, as mpi4py does),
 * for runtime `rt` whose wsp_arrived is `arrived`; NULL with a reason in `why`. */
wsp_mpi *wsp_mpi_new(wsp_runtime *rt, wsp_arrived_fn arrived, char *why, int whylen) {
    int inited = 0, level = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        snprintf(why, (size_t)whylen, "MPI is not initialised");
        return NULL;
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
        snprintf(why, (size_t)whylen, "MPI gives thread level %d, not MPI_THREAD_MULTIPLE", level);
        return NULL;
    }
    wsp_mpi *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, (size_t)whylen, "out of memory");
        return NULL;
    }
    m->rt = rt;
    m->arrived = arrived;
    atomic_init(&m->failed, 0);
    atomic_init(&m->outstanding, 0);
    /* a communicator of our own: the tags never meet a Python-side message */
    MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(m->comm, MPI_TAG_UB, &ub, &flag);
    m->tag_ub = flag && ub ? *ub : 32767;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->poll_mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    atomic_init(&m->n_posted, 0);
    atomic_init(&m->idle_wait, 0);
    atomic_init(&m->seen_failed, 0);
    atomic_init(&m->polls, 0);
    atomic_init(&m->worker_steps, 0);
    if (pthread_create(&m->thread, NULL, progress, m) != 0) {
        snprintf(why, (size_t)whylen, "cannot start the MPI progress thread");
        MPI_Comm_free(&m->comm);
        free(m);
        return NULL;
    }
    m->started = 1;
    return m;
}

/* The transport's table for wsp_transport_set. */
void wsp_mpi_transport(wsp_mpi *m, wsp_transport *out) {
    memset(out, 0, sizeof *out);
    out->ctx = m;
    out->device = m->rank;
    out->devices = m->size;
    out->recv = x_recv;
    out->send = x_send;
    out->fail = x_fail;
    out->send_from = x_send_from;
    out->poll = x_poll;
}

/* Operations queued or in flight (0 once every send of the runs so far has gone). */
int64_t wsp_mpi_outstanding(wsp_mpi *m) { return atomic_load(&m->outstanding); }

/* Steps of progress that workers made (`poll`) and that moved something, over every run. */
int64_t wsp_mpi_worker_steps(wsp_mpi *m) { return atomic_load(&m->worker_steps); }

/* Waits until nothing is outstanding (after a successful run every send completes, since every
 * process posted its receives while enumerating), then stops the thread and frees everything;
 * after a failure it does not wait. */
void wsp_mpi_free(wsp_mpi *m) {
    if (!m) return;
    if (!atomic_load(&m->failed)) {
        while (atomic_load(&m->outstanding) > 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->started && !atomic_load(&m->failed)) pthread_join(m->thread, NULL);
    else if (m->started) pthread_detach(m->thread);
    if (!atomic_load(&m->failed)) {
        MPI_Comm_free(&m->comm);
        free(m->reqs);
        free(m->ops);
        free(m->idx);
        pthread_mutex_destroy(&m->mu);
        pthread_mutex_destroy(&m->poll_mu);
        pthread_cond_destroy(&m->cv);
        free(m);
    }
}
