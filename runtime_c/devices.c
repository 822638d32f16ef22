/* devices.c: one device of several, each in its own process (wsp_transport_set; the contract is
 * in wsp_runtime.h, "many processes"). Every process enumerates the whole lowered program; here
 * wsp_submit's task is sorted by its device and its tiles' devices:
 *   - another device's task: dropped, except that each of its remote tiles held by this device
 *     becomes a SEND task of this device (send_in_place, or send_kernel below);
 *   - this device's task with remote tiles: its node gets a private buffer per remote tile and
 *     one hold per receive; the transport's wsp_arrived releases them;
 *   - anything else goes on through wsp_submit as usual (batched, traced, modelled).
 * The remote reads are numbered in enumeration order over the whole program (every process
 * counts the same ones), and that number is the message's tag. No MPI here: the transport
 * (runtime_c/mpi/wsp_mpi.c for MPI) is a table of calls, so the runtime never needs MPI.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "wsp_internal.h"

int wsp_transport_set(wsp_runtime *rt, const wsp_transport *x, int32_t ntensors,
                      const int32_t *elem_bytes) {
    if (!rt) return WSP_ERR_USAGE;
    if (rt->running) return wsp_fail(rt, WSP_ERR_USAGE, "wsp_transport_set called during a run");
    if (!x || x->devices <= 0) {
        memset(&rt->xport, 0, sizeof rt->xport);
        return WSP_OK;
    }
    if (x->device < 0 || x->device >= x->devices || !x->recv || !x->send || ntensors < 0 ||
        (ntensors > 0 && !elem_bytes))
        return wsp__failf(rt, WSP_ERR_USAGE, "wsp_transport_set: device %d of %d, %d tensors",
                          x->device, x->devices, ntensors);
    int32_t *e = malloc(((size_t)ntensors + 1) * sizeof *e);
    if (!e) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (transport)");
    for (int32_t i = 0; i < ntensors; i++) e[i] = elem_bytes[i] > 0 ? elem_bytes[i] : 0;
    free(rt->xelem);
    rt->xelem = e;
    rt->nxelem = ntensors;
    rt->xport = *x;
    return WSP_OK;
}

int64_t wsp_transport_count(const wsp_runtime *rt) { return rt ? rt->xseq : 0; }

int32_t wsp_device(const wsp_runtime *rt) {
    return rt && rt->xport.devices > 0 ? rt->xport.device : 0;
}

/* The element size of access a's tensor when its first dimension is the device dimension. */
static inline int32_t device_elem(const wsp_runtime *rt, const wsp_access *a) {
    if (a->tensor < 0 || a->tensor >= rt->nxelem || a->ndim < 1) return 0;
    return rt->xelem[a->tensor];
}

/* A send task's kernel: scalars are the runtime, the destination, the tag and the element size;
 * tile 0 is the tile, packed row by row into a buffer the transport frees once it is sent. */
static int send_kernel(const wsp_tile *tiles, const wsp_scalar *s) {
    wsp_runtime *rt = (wsp_runtime *)(intptr_t)s[0].i;
    const wsp_tile *tl = &tiles[0];
    size_t eb = (size_t)s[3].i;
    size_t rows = (size_t)tl->rows, cols = (size_t)tl->cols;
    size_t bytes = rows * cols * eb;
    char *buf = malloc(bytes ? bytes : 1);
    if (!buf) return wsp_kernel_fail("out of memory (a tile to send to another device)");
    const char *src = tl->data;
    for (size_t i = 0; i < rows; i++) {
        const char *row = src + (size_t)tl->stride * i * eb;
        char *out = buf + i * cols * eb;
        if (tl->col_stride == 1) {
            memcpy(out, row, cols * eb);
        } else {
            for (size_t j = 0; j < cols; j++)
                memcpy(out + j * eb, row + (size_t)tl->col_stride * j * eb, eb);
        }
    }
    if (rt->xport.send(rt->xport.ctx, buf, (int64_t)bytes, (int32_t)s[1].i, s[2].i) != 0)
        return wsp_kernel_fail("the transport could not send a tile to another device");
    return 0;
}

/* A send task's kernel when its tile is contiguous and the transport sends in place
 * (`send_from`): scalars as send_kernel's, then the task's node. The tile's memory goes to the
 * transport as it is, so the node must not finish (the tile's later writers wait for it) until
 * the transport is done with it: the kernel sets the node's count to two and returns
 * WSP__DEFERRED; the worker takes one off, the transport's wsp_arrived (buf NULL) the other,
 * and whoever reaches zero makes the node ready again, to be completed (t->resume: no kernel
 * then). */
static int send_in_place(const wsp_tile *tiles, const wsp_scalar *s) {
    wsp_runtime *rt = (wsp_runtime *)(intptr_t)s[0].i;
    wsp_tasknode *t = (wsp_tasknode *)(intptr_t)s[4].i;
    const wsp_tile *tl = &tiles[0];
    int64_t bytes = tl->rows * tl->cols * s[3].i;
    t->resume = 1;
    atomic_store_explicit(&t->h.pending, 2, memory_order_relaxed);
    atomic_fetch_add_explicit(&rt->xwaiting, 1, memory_order_seq_cst);  /* as a receive's */
    if (rt->xport.send_from(rt->xport.ctx, tl->data, bytes, (int32_t)s[1].i, s[2].i, t) != 0) {
        atomic_fetch_sub_explicit(&rt->xwaiting, 1, memory_order_seq_cst);
        t->resume = 0;
        atomic_store_explicit(&t->h.pending, 0, memory_order_relaxed);
        return wsp_kernel_fail("the transport could not send a tile to another device");
    }
    return WSP__DEFERRED;
}

/* Whether tile `tl` is one block of memory (whole rows of its tensor, or one row). */
static inline int contiguous(const wsp_tile *tl) {
    return tl->col_stride == 1 && (tl->rows <= 1 || tl->stride == tl->cols);
}

/* Submits the send of tile i of `task` (a task of device `to`) to that device, unbatched: a
 * send left in an open batch while this process waits (wsp_await) could hold up another
 * process that waits for it. A contiguous tile is sent from the tensor itself when the
 * transport can (send_in_place), else packed into a buffer (send_kernel). */
static int submit_send(wsp_runtime *rt, const wsp_task *task, int i, int32_t to, int64_t tag,
                       int32_t eb) {
    wsp_task s;
    memset(&s, 0, sizeof s);
    int in_place = rt->xport.send_from && contiguous(&task->tiles[i]);
    s.fn = in_place ? send_in_place : send_kernel;
    s.kernel = task->kernel;
    s.stmt = task->stmt;
    s.ntiles = 1;
    s.tiles[0] = task->tiles[i];
    s.access[0] = task->access[i];
    s.access[0].mode = WSP_READ;
    s.nscalars = 4;
    s.scalars[0].i = (int64_t)(intptr_t)rt;
    s.scalars[1].i = to;
    s.scalars[2].i = tag;
    s.scalars[3].i = eb;
    s.nscalars = in_place ? 5 : 4;  /* s[4]: the node, set below */
    s.ncoords = task->ncoords;
    for (int k = 0; k < task->ncoords; k++) s.coords[k] = task->coords[k];
    s.dispatcher = task->dispatcher;
    s.stream = task->stream;
    s.pool = task->pool;
    s.priority = task->priority;
    s.device = rt->xport.device;
    int rc = wsp__batch_close(rt);
    if (rc) return rc;
    if (!in_place) {
        int64_t grain = rt->grain;
        rt->grain = 1;
        rc = wsp_submit(rt, &s);  /* a task of this device without remote tiles: the usual path */
        rt->grain = grain;
        return rc;
    }
    /* wsp_submit's path, keeping the node for its kernel */
    if (rt->window > 0 && (rc = wsp__window_admit(rt))) return rc;
    int64_t index = wsp__enumerated(rt) - rt->run_sub0;
    if ((rt->tracing || rt->simlog) && (rc = wsp__record(rt, &s, index))) return rc;
    wsp_tasknode *t = wsp__task_node(rt, &s, index);
    if (!t) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
    wsp__scalars(t)[4].i = (int64_t)(intptr_t)t;
    return wsp__submit_node(rt, t, &s);
}

/* A buffer of `bytes` for a receive: a kept one about that size (malloc's usable size of it:
 * the runtime keeps no size of its own), else a new one. */
static void *recv_buffer(wsp_runtime *rt, size_t bytes) {
    for (int32_t i = rt->nxbuf - 1; i >= 0; i--)
        if (rt->xbuf_bytes[i] >= bytes && rt->xbuf_bytes[i] - bytes <= bytes / 8 + 64) {
            void *b = rt->xbuf[i];
            rt->nxbuf--;
            rt->xbuf[i] = rt->xbuf[rt->nxbuf];
            rt->xbuf_bytes[i] = rt->xbuf_bytes[rt->nxbuf];
            return b;
        }
    return malloc(bytes ? bytes : 1);
}

int wsp__device_submit(wsp_runtime *rt, const wsp_task *task, int *taken) {
    const int32_t me = rt->xport.device;
    if (task->device < 0 || task->device >= rt->xport.devices)
        return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d) runs on device %d "
                          "of %d", task->kernel, task->stmt, task->device, rt->xport.devices);
    int remote[WSP_MAX_TILES];
    int64_t tags[WSP_MAX_TILES];
    int nremote = 0;
    for (int i = 0; i < task->ntiles; i++) {
        const wsp_access *a = &task->access[i];
        if (!device_elem(rt, a)) continue;
        int64_t dev = a->lo[0];
        if (a->hi[0] != dev + 1 || dev < 0 || dev >= rt->xport.devices)
            return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d): tile %d spans "
                              "devices %lld .. %lld", task->kernel, task->stmt, i, (long long)dev,
                              (long long)a->hi[0] - 1);
        if (dev == task->device) continue;
        if (a->mode & WSP_WRITE)
            return wsp__failf(rt, WSP_ERR_USAGE, "task of kernel %d (statement %d) on device %d "
                              "writes tile %d on device %lld", task->kernel, task->stmt,
                              task->device, i, (long long)dev);
        remote[nremote] = i;
        tags[nremote++] = rt->xseq++;
    }
    if (task->device != me) {  /* another device's task: only the tiles it reads from here */
        *taken = 1;
        for (int k = 0; k < nremote; k++) {
            const wsp_access *a = &task->access[remote[k]];
            if (a->lo[0] != me) continue;
            int rc = submit_send(rt, task, remote[k], task->device, tags[k], device_elem(rt, a));
            if (rc) return rc;
        }
        return WSP_OK;
    }
    if (nremote == 0) return WSP_OK;  /* a plain task of this device: wsp_submit goes on */
    *taken = 1;
    int rc;
    if (rt->window > 0 && (rc = wsp__window_admit(rt))) return rc;
    if ((rc = wsp__batch_close(rt))) return rc;  /* its holds need a node of its own */
    int64_t index = wsp__enumerated(rt) - rt->run_sub0;
    if ((rt->tracing || rt->simlog) && (rc = wsp__record(rt, task, index))) return rc;
    wsp_tasknode *t = wsp__task_node(rt, task, index);
    if (!t) return wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (task pool)");
    wsp_tile *tiles = wsp__tiles(t);
    for (int k = 0; k < nremote; k++) {  /* buffers first: a failure leaves nothing posted */
        wsp_tile *tl = &tiles[remote[k]];
        size_t bytes = (size_t)tl->rows * (size_t)tl->cols *
                       (size_t)device_elem(rt, &task->access[remote[k]]);
        void *buf = recv_buffer(rt, bytes);
        if (!buf) {
            wsp_fail(rt, WSP_ERR_INTERNAL, "out of memory (a tile from another device)");
            wsp__device_release(rt, t);
            t->holds = 0;
            wsp__submit_node(rt, t, task);  /* it goes through (and will not run: the error) */
            return atomic_load_explicit(&rt->err, memory_order_acquire);
        }
        tl->data = buf;
        tl->stride = tl->cols;
        tl->col_stride = 1;
        t->owned |= (uint16_t)(1u << remote[k]);
    }
    t->holds = (int16_t)nremote;
    for (int k = 0; k < nremote; k++) {
        const wsp_access *a = &task->access[remote[k]];
        wsp_tile *tl = &tiles[remote[k]];
        int64_t bytes = tl->rows * tl->cols * device_elem(rt, a);
        /* counted before it is posted: its arrival (any thread) counts it off */
        atomic_fetch_add_explicit(&rt->xwaiting, 1, memory_order_seq_cst);
        if (rt->xport.recv(rt->xport.ctx, tl->data, bytes, (int32_t)a->lo[0], tags[k], t) != 0) {
            atomic_fetch_sub_explicit(&rt->xwaiting, 1, memory_order_seq_cst);
            /* the receives not posted never arrive: release their holds here */
            wsp_fail(rt, WSP_ERR_INTERNAL, "the transport could not receive a tile from another "
                     "device");
            t->holds = (int16_t)k;
            break;
        }
    }
    return wsp__submit_node(rt, t, task);
}

void wsp_arrived(wsp_runtime *rt, void *token, void *buf, int ok) {
    wsp_tasknode *t = token;
    atomic_fetch_sub_explicit(&rt->xwaiting, 1, memory_order_seq_cst);
    if (!ok && buf) {  /* the buffer is the transport's now: the node must not free it */
        wsp_fail(rt, WSP_ERR_INTERNAL, "a tile from another device did not arrive");
        wsp_tile *tiles = wsp__tiles(t);
        for (int i = 0; i < t->ntiles; i++)
            if ((t->owned & (1u << i)) && tiles[i].data == buf) t->owned &= (uint16_t)~(1u << i);
    } else if (!ok) {
        wsp_fail(rt, WSP_ERR_INTERNAL, "a tile could not be sent to another device");
    }
    /* a hold is a predecessor: whoever brings the count to zero makes the task ready */
    if (atomic_fetch_sub_explicit(&t->h.pending, 1, memory_order_acq_rel) == 1)
        wsp__ready_external(rt, t);
}

void wsp__device_release(wsp_runtime *rt, wsp_tasknode *t) {
    wsp_tile *tiles = wsp__tiles(t);
    for (int i = 0; i < t->ntiles; i++) {
        if (!(t->owned & (1u << i))) continue;
        if (rt->nxbuf < WSP_XBUFS) {
            rt->xbuf[rt->nxbuf] = tiles[i].data;
            rt->xbuf_bytes[rt->nxbuf++] = malloc_usable_size(tiles[i].data);
        } else {
            free(tiles[i].data);
        }
    }
    t->owned = 0;
}

void wsp__device_free(wsp_runtime *rt) {
    for (int32_t i = 0; i < rt->nxbuf; i++) free(rt->xbuf[i]);
    rt->nxbuf = 0;
}
