/* A stand-in for CANN's hccl/hccl.h, for running the host program of a mesh (host/main.asc of
 * a module with a `mesh`, one process per rank) on a machine without CANN or NPUs
 * (tests/ascend/test_hccl.py). Each rank is a process, as scripts/run_ranks.sh starts them;
 * the ranks of a communicator meet through files in a directory that HcclGetRootInfo makes
 * (under $WSP_STUB_HCCL_DIR, else $TMPDIR, else /tmp) and names in the root info, which the
 * program shares with the other ranks as it would share CANN's.
 *
 * The signatures are those of CANN's public hccl.h (mirrored at github.com/Ascend/pytorch,
 * third_party/hccl/inc/hccl/hccl.h; used as in github.com/hicann/hccl, examples/02_collectives):
 * only the calls main.asc makes. Their semantics as documented there: HcclAllReduce (every
 * rank gets the reduction of every rank's `count` elements), HcclAllGather (every rank gets
 * the ranks' `sendCount` elements one after another in rank order), HcclReduceScatter (rank
 * r gets block r of the reduction, `recvCount` elements), HcclAlltoAll (block q of rank r's
 * send buffer lands in block r of rank q's receive buffer). Reductions go rank 0, 1, ... in
 * f32 for f16/bf16 (rounded once), in the element type otherwise: a real HCCL reduces in its
 * own order, so on a device results agree to float tolerance only.
 *
 * Misuse fails the call, with a line on stderr saying what, so that the program's checks are
 * exercised and nothing is hidden: a null pointer (HCCL_E_PTR); a communicator that was never
 * initialised or is already destroyed, a rank outside the communicator, root info that
 * HcclGetRootInfo did not make, ranks that disagree on a call (its kind, count, data type or
 * reduction) or on the communicator's size (HCCL_E_PARA); a communicator made before
 * aclrtSetDevice, or a stream created on another device than the communicator's
 * (HCCL_E_RUNTIME); a rank that does not arrive within $WSP_STUB_HCCL_TIMEOUT seconds (60)
 * (HCCL_E_TIMEOUT). aclrtResetDevice with a live communicator fails as an ACL error. Every call
 * is logged like the stub ACL's ($WSP_ACL_LOG), and $WSP_ACL_FAIL naming an HCCL call makes it
 * return HCCL_E_INTERNAL.
 *
 * A collective runs on its stream, as on a device: the call checks its arguments and queues
 * the exchange on the stream (the stub ACL's model, stub_acl/acl/acl.h), which runs when the
 * stream does; so a program that reads the result without waiting for the stream sees the old
 * data. A failure there (ranks that disagree, a rank that never arrives) is the stream's error,
 * returned by the next aclrtSynchronizeStream. With $WSP_STUB_STREAMS=sync the exchange runs
 * within the call and its failure is the call's result (hccl_driver.cpp's scenarios).
 */
#ifndef WSP_TEST_HCCL_H
#define WSP_TEST_HCCL_H
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "hccl/hccl_types.h"

/* ---- the device and streams main.asc sets up, as far as HCCL's checks need them --------- */
inline int wsp_hccl_device = -1;         /* aclrtSetDevice's device, -1 before */
inline int wsp_hccl_stream_device = -1;  /* the device current when the streams were made */
inline std::set<void *> wsp_hccl_live;   /* communicators initialised and not destroyed */

static inline aclError wsp_hccl_set_device(int d) {
    const aclError e = aclrtSetDevice(d);
    if (e == ACL_SUCCESS) wsp_hccl_device = d;
    return e;
}
static inline aclError wsp_hccl_create_stream(aclrtStream *s) {
    const aclError e = aclrtCreateStream(s);
    if (e == ACL_SUCCESS) wsp_hccl_stream_device = wsp_hccl_device;
    return e;
}
static inline aclError wsp_hccl_reset_device(int d) {
    if (!wsp_hccl_live.empty()) {
        std::fprintf(stderr, "stand-in HCCL: aclrtResetDevice(%d) with %zu communicator(s) not "
                             "destroyed\n", d, wsp_hccl_live.size());
        return 507033;
    }
    return aclrtResetDevice(d);
}
#define aclrtSetDevice wsp_hccl_set_device
#define aclrtCreateStream wsp_hccl_create_stream
#define aclrtResetDevice wsp_hccl_reset_device

/* ---- files: the ranks' meeting place ------------------------------------------------------ */
#define WSP_HCCL_MAGIC "wsp-stub-hccl 1 "

struct WspHcclComm {
    std::string dir;
    uint32_t n = 0, rank = 0;
    uint64_t seq = 0;  /* collectives so far */
    int device = -1;
};

static inline HcclResult wsp_hccl_fail(HcclResult r, const std::string &what) {
    std::fprintf(stderr, "stand-in HCCL: %s\n", what.c_str());
    return r;
}

static inline HcclResult wsp_hccl_enter(const char *call) {
    return wsp_stub_call(call) == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_INTERNAL;
}

/* write `data` to `path` atomically: a temporary file renamed into place */
static inline bool wsp_hccl_publish(const std::string &path, const std::string &data) {
    const std::string tmp = path + ".tmp" + std::to_string((long)getpid());
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f) return false;
    const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    if (std::fclose(f) != 0 || !ok) return false;
    return std::rename(tmp.c_str(), path.c_str()) == 0;
}

static inline bool wsp_hccl_slurp(const std::string &path, std::string &out) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    out.clear();
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
    return true;
}

/* wait until every rank's `prefix.<rank>` exists; false on timeout */
static inline bool wsp_hccl_wait(const WspHcclComm &c, const std::string &prefix) {
    const char *env = std::getenv("WSP_STUB_HCCL_TIMEOUT");
    const double limit = env ? std::atof(env) : 60.0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        uint32_t here = 0;
        struct stat sb;
        for (uint32_t r = 0; r < c.n; r++)
            if (stat((c.dir + "/" + prefix + "." + std::to_string(r)).c_str(), &sb) == 0) here++;
        if (here == c.n) return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > limit)
            return false;
        usleep(200);
    }
}

/* ---- elements ----------------------------------------------------------------------------- */
static inline size_t wsp_hccl_size(HcclDataType t) {
    switch (t) {
    case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16: case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32: case HCCL_DATA_TYPE_FP32: return 4;
    case HCCL_DATA_TYPE_INT64: case HCCL_DATA_TYPE_UINT64: case HCCL_DATA_TYPE_FP64: return 8;
    default: return 0;
    }
}

static inline float wsp_hccl_half_to_float(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? std::ldexp((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY) : std::ldexp((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}
static inline uint16_t wsp_hccl_float_to_half(float f) {  /* round to nearest even */
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (std::isnan(f)) return (uint16_t)(sign | 0x7e00);
    const float a = std::fabs(f);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00);
    if (a < std::ldexp(1.0f, -14)) {  /* subnormal: a multiple of 2^-24 */
        return (uint16_t)(sign | (uint16_t)std::nearbyint(std::ldexp(a, 24)));
    }
    int e;
    const float frac = std::frexp(a, &e);  /* a = frac * 2^e, frac in [0.5, 1) */
    uint32_t m = (uint32_t)std::nearbyint(std::ldexp(frac, 11));  /* 11 significant bits */
    if (m == 2048) { m = 1024; e++; }
    return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)(m & 1023));
}
static inline float wsp_hccl_bf16_to_float(uint16_t b) {
    const uint32_t x = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
static inline uint16_t wsp_hccl_float_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if (std::isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

template <typename T>
static inline T wsp_hccl_apply(HcclReduceOp op, T a, T b) {
    switch (op) {
    case HCCL_REDUCE_SUM: return (T)(a + b);
    case HCCL_REDUCE_PROD: return (T)(a * b);
    case HCCL_REDUCE_MAX: return (a != a || a > b) ? a : b;  /* a NaN wins */
    default: return (a != a || a < b) ? a : b;
    }
}

template <typename T>
static inline void wsp_hccl_reduce_as(const std::vector<const char *> &src, char *dst,
                                      uint64_t count, HcclReduceOp op) {
    for (uint64_t i = 0; i < count; i++) {
        T acc;
        std::memcpy(&acc, src[0] + i * sizeof(T), sizeof(T));
        for (size_t r = 1; r < src.size(); r++) {
            T v;
            std::memcpy(&v, src[r] + i * sizeof(T), sizeof(T));
            acc = wsp_hccl_apply(op, acc, v);
        }
        std::memcpy(dst + i * sizeof(T), &acc, sizeof(T));
    }
}

/* dst[i] = src[0][i] op src[1][i] op ... in rank order (f16/bf16 in f32, rounded once) */
static inline void wsp_hccl_reduce(const std::vector<const char *> &src, char *dst, uint64_t count,
                                   HcclDataType t, HcclReduceOp op) {
    switch (t) {
    case HCCL_DATA_TYPE_INT8: wsp_hccl_reduce_as<int8_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_UINT8: wsp_hccl_reduce_as<uint8_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_INT16: wsp_hccl_reduce_as<int16_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_UINT16: wsp_hccl_reduce_as<uint16_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_INT32: wsp_hccl_reduce_as<int32_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_UINT32: wsp_hccl_reduce_as<uint32_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_INT64: wsp_hccl_reduce_as<int64_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_UINT64: wsp_hccl_reduce_as<uint64_t>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_FP32: wsp_hccl_reduce_as<float>(src, dst, count, op); break;
    case HCCL_DATA_TYPE_FP64: wsp_hccl_reduce_as<double>(src, dst, count, op); break;
    default: {  /* FP16, BFP16 */
        const bool half = t == HCCL_DATA_TYPE_FP16;
        for (uint64_t i = 0; i < count; i++) {
            float acc = 0;
            for (size_t r = 0; r < src.size(); r++) {
                uint16_t bits;
                std::memcpy(&bits, src[r] + 2 * i, 2);
                const float v = half ? wsp_hccl_half_to_float(bits) : wsp_hccl_bf16_to_float(bits);
                acc = r == 0 ? v : wsp_hccl_apply(op, acc, v);
            }
            const uint16_t out = half ? wsp_hccl_float_to_half(acc) : wsp_hccl_float_to_bf16(acc);
            std::memcpy(dst + 2 * i, &out, 2);
        }
    }
    }
}

/* ---- one collective: every rank publishes its call and its send buffer, then reads all ---- */
struct WspHcclCall {
    int64_t kind, count, dtype, op, bytes;
};

static inline const char *wsp_hccl_dtype_name(int64_t t) {
    static const char *const names[] = {"INT8", "INT16", "INT32", "FP16", "FP32", "INT64",
                                        "UINT64", "UINT8", "UINT16", "UINT32", "FP64", "BFP16"};
    return t >= 0 && t < 12 ? names[t] : "RESERVED";
}

static inline std::string wsp_hccl_describe(const char *const *kinds, const WspHcclCall &c) {
    return std::string(kinds[c.kind]) + "(count " + std::to_string(c.count) + ", " +
           wsp_hccl_dtype_name(c.dtype) + ", op " + std::to_string(c.op) + ")";
}

static inline HcclResult wsp_hccl_check_comm(HcclComm comm, aclrtStream stream, const char *call) {
    if (comm == nullptr || wsp_hccl_live.count(comm) == 0)
        return wsp_hccl_fail(HCCL_E_PARA, std::string(call) + " on a communicator that is not "
                             "initialised (or already destroyed)");
    if (stream == nullptr) return wsp_hccl_fail(HCCL_E_PTR, std::string(call) + " without a stream");
    const WspHcclComm *c = (const WspHcclComm *)comm;
    if (wsp_hccl_stream_device != c->device || wsp_hccl_device != c->device)
        return wsp_hccl_fail(HCCL_E_RUNTIME, std::string(call) + ": the stream belongs to device " +
                             std::to_string(wsp_hccl_stream_device) + ", the communicator to device " +
                             std::to_string(c->device));
    return HCCL_SUCCESS;
}

/* publish this rank's call and data, wait for the others, check they agree; `all` receives
 * each rank's send buffer in rank order */
static inline HcclResult wsp_hccl_exchange(HcclComm comm, WspHcclCall call, const void *send,
                                           std::vector<std::string> &all) {
    static const char *const kinds[] = {"HcclAllReduce", "HcclAllGather", "HcclReduceScatter",
                                        "HcclAlltoAll"};
    WspHcclComm *c = (WspHcclComm *)comm;
    const uint64_t seq = ++c->seq;
    std::string mine((const char *)&call, sizeof call);
    if (call.bytes) mine.append((const char *)send, (size_t)call.bytes);
    const std::string op = "op" + std::to_string(seq);
    if (!wsp_hccl_publish(c->dir + "/" + op + "." + std::to_string(c->rank), mine))
        return wsp_hccl_fail(HCCL_E_SYSCALL, std::string("cannot write in ") + c->dir);
    if (!wsp_hccl_wait(*c, op))
        return wsp_hccl_fail(HCCL_E_TIMEOUT, std::string(kinds[call.kind]) + " #" + std::to_string(seq) +
                             ": not every rank of the communicator arrived (rank " +
                             std::to_string(c->rank) + " of " + std::to_string(c->n) + ")");
    all.assign(c->n, std::string());
    HcclResult rc = HCCL_SUCCESS;
    for (uint32_t r = 0; r < c->n; r++) {
        if (!wsp_hccl_slurp(c->dir + "/" + op + "." + std::to_string(r), all[r]) ||
            all[r].size() < sizeof(WspHcclCall))
            return wsp_hccl_fail(HCCL_E_SYSCALL, "cannot read rank " + std::to_string(r) + "'s call");
        WspHcclCall theirs;
        std::memcpy(&theirs, all[r].data(), sizeof theirs);
        if (rc == HCCL_SUCCESS && (theirs.kind != call.kind || theirs.count != call.count ||
                                   theirs.dtype != call.dtype || theirs.op != call.op))
            rc = wsp_hccl_fail(HCCL_E_PARA, "collective #" + std::to_string(seq) + ": rank " +
                               std::to_string(c->rank) + " called " + wsp_hccl_describe(kinds, call) +
                               ", rank " + std::to_string(r) + " " + wsp_hccl_describe(kinds, theirs));
        all[r].erase(0, sizeof(WspHcclCall));
    }
    /* everyone has read every file before any is removed */
    const std::string done = "done" + std::to_string(seq);
    if (!wsp_hccl_publish(c->dir + "/" + done + "." + std::to_string(c->rank), "") || !wsp_hccl_wait(*c, done))
        return wsp_hccl_fail(HCCL_E_TIMEOUT, "collective #" + std::to_string(seq) + ": a rank did not finish");
    std::remove((c->dir + "/" + op + "." + std::to_string(c->rank)).c_str());
    return rc;
}

/* a queued call runs only while its communicator lives */
static inline HcclResult wsp_hccl_live_comm(HcclComm comm, const char *call) {
    if (wsp_hccl_live.count(comm)) return HCCL_SUCCESS;
    return wsp_hccl_fail(HCCL_E_PARA, std::string(call) + " ran on its stream after its communicator "
                         "was destroyed");
}

static inline HcclResult wsp_hccl_args(const void *send, const void *recv, HcclDataType t,
                                       const char *call) {
    if (send == nullptr || recv == nullptr)
        return wsp_hccl_fail(HCCL_E_PTR, std::string(call) + " with a null buffer");
    if (wsp_hccl_size(t) == 0)
        return wsp_hccl_fail(HCCL_E_PARA, std::string(call) + " with data type " + std::to_string((int)t));
    return HCCL_SUCCESS;
}

/* run `op` (a collective's exchange) on `stream`: queued, or now in the sync mode */
static inline HcclResult wsp_hccl_submit(aclrtStream stream, const char *call, std::function<HcclResult()> op) {
    if (wsp_stub_mode() == 2) {
        WspStubStream *s = (WspStubStream *)stream;
        wsp_stub_drive(s);  /* what the stream holds runs first */
        wsp_stub_log("@" + std::to_string(s->id) + ":" + call);
        return op();
    }
    const std::string name = call;
    const aclError e = wsp_stub_enqueue(stream, call, [op, name]() -> aclError {
        const HcclResult r = op();
        if (r == HCCL_SUCCESS) return ACL_SUCCESS;
        std::fprintf(stderr, "stand-in HCCL: %s failed on its stream with HCCL error %d\n", name.c_str(), (int)r);
        return 507900 + (aclError)r;
    });
    return e == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_RUNTIME;
}

/* ---- the API ------------------------------------------------------------------------------ */
extern "C" {

static inline HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
    HcclResult r = wsp_hccl_enter("HcclGetRootInfo");
    if (r) return r;
    if (rootInfo == nullptr) return wsp_hccl_fail(HCCL_E_PTR, "HcclGetRootInfo(nullptr)");
    const char *base = std::getenv("WSP_STUB_HCCL_DIR");
    if (!base) base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/wsp_hccl_XXXXXX";
    std::vector<char> path(tmpl.begin(), tmpl.end());
    path.push_back(0);
    if (!mkdtemp(path.data())) return wsp_hccl_fail(HCCL_E_SYSCALL, "cannot make " + tmpl);
    const std::string text = std::string(WSP_HCCL_MAGIC) + path.data();
    if (text.size() >= HCCL_ROOT_INFO_BYTES) return wsp_hccl_fail(HCCL_E_PARA, "path too long");
    std::memset(rootInfo->internal, 0, HCCL_ROOT_INFO_BYTES);
    std::memcpy(rootInfo->internal, text.data(), text.size());
    return HCCL_SUCCESS;
}

static inline HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                              uint32_t rank, HcclComm *comm) {
    HcclResult r = wsp_hccl_enter("HcclCommInitRootInfo");
    if (r) return r;
    if (rootInfo == nullptr || comm == nullptr)
        return wsp_hccl_fail(HCCL_E_PTR, "HcclCommInitRootInfo with a null pointer");
    const size_t m = std::strlen(WSP_HCCL_MAGIC);
    if (std::memcmp(rootInfo->internal, WSP_HCCL_MAGIC, m) != 0 ||
        std::memchr(rootInfo->internal, 0, HCCL_ROOT_INFO_BYTES) == nullptr)
        return wsp_hccl_fail(HCCL_E_PARA, "HcclCommInitRootInfo: root info not made by HcclGetRootInfo");
    if (nRanks == 0 || rank >= nRanks)
        return wsp_hccl_fail(HCCL_E_PARA, "HcclCommInitRootInfo: rank " + std::to_string(rank) +
                             " of " + std::to_string(nRanks));
    if (wsp_hccl_device < 0)
        return wsp_hccl_fail(HCCL_E_RUNTIME, "HcclCommInitRootInfo before aclrtSetDevice");
    WspHcclComm *c = new WspHcclComm;
    c->dir = rootInfo->internal + m;
    c->n = nRanks;
    c->rank = rank;
    c->device = wsp_hccl_device;
    const std::string me = c->dir + "/init." + std::to_string(rank);
    struct stat sb;
    if (stat(me.c_str(), &sb) == 0) {
        delete c;
        return wsp_hccl_fail(HCCL_E_PARA, "HcclCommInitRootInfo: rank " + std::to_string(rank) +
                             " joined the communicator twice");
    }
    if (!wsp_hccl_publish(me, std::to_string(nRanks))) {
        delete c;
        return wsp_hccl_fail(HCCL_E_SYSCALL, "cannot write in " + c->dir);
    }
    if (!wsp_hccl_wait(*c, "init")) {
        delete c;
        return wsp_hccl_fail(HCCL_E_TIMEOUT, "HcclCommInitRootInfo: not every rank joined");
    }
    for (uint32_t k = 0; k < nRanks; k++) {
        std::string n;
        if (!wsp_hccl_slurp(c->dir + "/init." + std::to_string(k), n) || n != std::to_string(nRanks)) {
            delete c;
            return wsp_hccl_fail(HCCL_E_PARA, "HcclCommInitRootInfo: rank " + std::to_string(k) +
                                 " joined with " + n + " ranks, rank " + std::to_string(rank) +
                                 " with " + std::to_string(nRanks));
        }
    }
    wsp_hccl_live.insert(c);
    *comm = c;
    return HCCL_SUCCESS;
}

static inline HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                       HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                       aclrtStream stream) {
    HcclResult r = wsp_hccl_enter("HcclAllReduce");
    if (!r) r = wsp_hccl_check_comm(comm, stream, "HcclAllReduce");
    if (!r) r = wsp_hccl_args(sendBuf, recvBuf, dataType, "HcclAllReduce");
    if (r) return r;
    return wsp_hccl_submit(stream, "HcclAllReduce", [=]() {
        const int64_t bytes = (int64_t)(count * wsp_hccl_size(dataType));
        std::vector<std::string> all;
        HcclResult e = wsp_hccl_live_comm(comm, "HcclAllReduce");
        if (e || (e = wsp_hccl_exchange(comm, {0, (int64_t)count, dataType, op, bytes}, sendBuf, all))) return e;
        std::vector<const char *> src;
        for (const std::string &s : all) src.push_back(s.data());
        wsp_hccl_reduce(src, (char *)recvBuf, count, dataType, op);
        return HCCL_SUCCESS;
    });
}

static inline HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                                       HcclDataType dataType, HcclComm comm, aclrtStream stream) {
    HcclResult r = wsp_hccl_enter("HcclAllGather");
    if (!r) r = wsp_hccl_check_comm(comm, stream, "HcclAllGather");
    if (!r) r = wsp_hccl_args(sendBuf, recvBuf, dataType, "HcclAllGather");
    if (r) return r;
    return wsp_hccl_submit(stream, "HcclAllGather", [=]() {
        const size_t bytes = (size_t)sendCount * wsp_hccl_size(dataType);
        std::vector<std::string> all;
        HcclResult e = wsp_hccl_live_comm(comm, "HcclAllGather");
        if (e || (e = wsp_hccl_exchange(comm, {1, (int64_t)sendCount, dataType, -1, (int64_t)bytes}, sendBuf, all)))
            return e;
        for (size_t k = 0; k < all.size(); k++) std::memcpy((char *)recvBuf + k * bytes, all[k].data(), bytes);
        return HCCL_SUCCESS;
    });
}

static inline HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                           HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                           aclrtStream stream) {
    HcclResult r = wsp_hccl_enter("HcclReduceScatter");
    if (!r) r = wsp_hccl_check_comm(comm, stream, "HcclReduceScatter");
    if (!r) r = wsp_hccl_args(sendBuf, recvBuf, dataType, "HcclReduceScatter");
    if (r) return r;
    return wsp_hccl_submit(stream, "HcclReduceScatter", [=]() {
        HcclResult e = wsp_hccl_live_comm(comm, "HcclReduceScatter");
        if (e) return e;
        const WspHcclComm *c = (const WspHcclComm *)comm;
        const size_t block = (size_t)recvCount * wsp_hccl_size(dataType);
        std::vector<std::string> all;
        if ((e = wsp_hccl_exchange(comm, {2, (int64_t)recvCount, dataType, op, (int64_t)(block * c->n)},
                                   sendBuf, all)))
            return e;
        std::vector<const char *> src;
        for (const std::string &s : all) src.push_back(s.data() + block * c->rank);
        wsp_hccl_reduce(src, (char *)recvBuf, recvCount, dataType, op);
        return HCCL_SUCCESS;
    });
}

static inline HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                                      const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                                      HcclComm comm, aclrtStream stream) {
    HcclResult r = wsp_hccl_enter("HcclAlltoAll");
    if (!r) r = wsp_hccl_check_comm(comm, stream, "HcclAlltoAll");
    if (!r) r = wsp_hccl_args(sendBuf, recvBuf, sendType, "HcclAlltoAll");
    if (r) return r;
    if (sendType != recvType || sendCount != recvCount)
        return wsp_hccl_fail(HCCL_E_PARA, "HcclAlltoAll: sends " + std::to_string(sendCount) + " " +
                             wsp_hccl_dtype_name(sendType) + " but receives " + std::to_string(recvCount) +
                             " " + wsp_hccl_dtype_name(recvType) + " per rank");
    return wsp_hccl_submit(stream, "HcclAlltoAll", [=]() {
        HcclResult e = wsp_hccl_live_comm(comm, "HcclAlltoAll");
        if (e) return e;
        const WspHcclComm *c = (const WspHcclComm *)comm;
        const size_t block = (size_t)sendCount * wsp_hccl_size(sendType);
        std::vector<std::string> all;
        if ((e = wsp_hccl_exchange(comm, {3, (int64_t)sendCount, sendType, -1, (int64_t)(block * c->n)},
                                   sendBuf, all)))
            return e;
        for (size_t q = 0; q < all.size(); q++)
            std::memcpy((char *)recvBuf + q * block, all[q].data() + block * c->rank, block);
        return HCCL_SUCCESS;
    });
}

static inline HcclResult HcclCommDestroy(HcclComm comm) {
    HcclResult r = wsp_hccl_enter("HcclCommDestroy");
    if (r) return r;
    if (comm == nullptr || wsp_hccl_live.erase(comm) == 0)
        return wsp_hccl_fail(HCCL_E_PARA, "HcclCommDestroy on a communicator that is not initialised "
                             "(or already destroyed)");
    delete (WspHcclComm *)comm;
    return HCCL_SUCCESS;
}

}  /* extern "C" */
#endif
