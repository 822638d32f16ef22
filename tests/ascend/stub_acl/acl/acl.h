/* A stand-in for CANN's acl/acl.h, for compiling and running host/main.asc on a machine
 * without CANN (tests/ascend/test_host.py): "device" memory is host memory, and every call is
 * appended to the file $WSP_ACL_LOG (`{rank}` in it: $RANK_ID). Setting $WSP_ACL_FAIL to a function name makes that
 * function fail (error 507899) to test that the host program checks it. Only what main.asc
 * uses is here, and wsp_stub_launch: what a `KERNEL<<<blocks, l2ctrl, stream>>>(args)` launch
 * becomes on the host (the tests rewrite the launch into a call, tests/ascend/hostrun.py):
 * logged as "<<<KERNEL>>>", run block by block; a kernel that throws (the Ascend C CPU shim's
 * rule checks) ends the program.
 *
 * Streams and events are modelled, so that a missing wait shows (acl_streams.h): work on a
 * stream (kernel launches, aclrtMemcpyAsync, what the stand-in HCCL enqueues) is queued and
 * runs in stream order when something needs it: aclrtSynchronizeStream, aclrtSynchronizeEvent,
 * or a stream waiting for an event recorded on another (aclrtStreamWaitEvent runs that stream
 * up to the record). $WSP_STUB_STREAMS picks the order among streams: `late` (the default)
 * runs a stream only when it is needed, so a reader that does not wait for a writer on
 * another stream sees the old data; `early` runs every other stream as far as it can before
 * the one needed, so a writer that does not wait for a reader on another stream overwrites
 * its data first; `sync` runs everything when it is enqueued (no concurrency: a missing wait
 * never shows). Each op run is logged as "@STREAM:NAME" (streams numbered from 1 in creation
 * order). Enforced: an ACL_EVENT_SYNC event (aclrtCreateEventWithFlag) is not recorded again
 * before it is reset; a stream never waits for an event that nothing recorded (it would hang).
 * A reset puts an event back to not recorded, and only an ACL_EVENT_SYNC event may be reset
 * (acl_rt.h: resetting any other is undefined; refused here, ACL_ERROR_RT_PARAM_INVALID).
 * Each declaration here has the signature of the real acl_rt.h (tests/ascend/test_real_headers.py
 * compiles main.asc against the real headers too, when they are present). */
#ifndef WSP_TEST_ACL_H
#define WSP_TEST_ACL_H
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef enum { ACL_MEM_MALLOC_HUGE_FIRST = 0 } aclrtMemMallocPolicy;
typedef enum { ACL_MEMCPY_HOST_TO_HOST = 0, ACL_MEMCPY_HOST_TO_DEVICE = 1,
               ACL_MEMCPY_DEVICE_TO_HOST = 2, ACL_MEMCPY_DEVICE_TO_DEVICE = 3 } aclrtMemcpyKind;
#define ACL_SUCCESS 0
#define ACL_EVENT_SYNC 0x00000001U  /* acl_rt.h's values */
#define ACL_ERROR_RT_PARAM_INVALID 107000  /* acl_rt.h's value */
#define ACL_EVENT_TIME_LINE 0x00000008U

/* the log: $WSP_ACL_LOG, with `{rank}` replaced by $RANK_ID (one log per rank of a mesh) */
static inline void wsp_stub_log(const std::string &line) {
    const char *log = std::getenv("WSP_ACL_LOG");
    if (log) {
        std::string path = log;
        const size_t at = path.find("{rank}");
        if (at != std::string::npos) path.replace(at, 6, std::getenv("RANK_ID") ? std::getenv("RANK_ID") : "");
        FILE *f = std::fopen(path.c_str(), "a");
        if (f) { std::fprintf(f, "%s\n", line.c_str()); std::fclose(f); }
    }
}

static inline aclError wsp_stub_call(const char *name) {
    wsp_stub_log(name);
    const char *fail = std::getenv("WSP_ACL_FAIL");
    return fail && std::strcmp(fail, name) == 0 ? 507899 : ACL_SUCCESS;
}

#include "acl_streams.h"

static inline aclError aclInit(const char *) { return wsp_stub_call("aclInit"); }
/* device memory's allocations, tracked: aclrtFree of a pointer aclrtMalloc did not return is
 * refused, and aclFinalize with an allocation never freed fails (a leak of the program) */
static inline std::vector<void *> &wsp_stub_allocations() {
    static std::vector<void *> live;
    return live;
}
static inline aclError aclFinalize() {
    aclError e = wsp_stub_call("aclFinalize");
    if (!e && !wsp_stub_allocations().empty()) {
        std::fprintf(stderr, "stub ACL: aclFinalize with %zu device allocations never freed (aclrtMalloc "
                     "without aclrtFree)\n", wsp_stub_allocations().size());
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    return e;
}
static inline aclError aclrtSetDevice(int) { return wsp_stub_call("aclrtSetDevice"); }
static inline aclError aclrtResetDevice(int) { return wsp_stub_call("aclrtResetDevice"); }
static inline aclError aclrtMalloc(void **p, size_t n, aclrtMemMallocPolicy) {
    aclError e = wsp_stub_call("aclrtMalloc");
    *p = e ? nullptr : std::calloc(1, n + 64);
    if (*p) wsp_stub_allocations().push_back(*p);
    return e;
}
static inline aclError aclrtFree(void *p) {
    std::vector<void *> &live = wsp_stub_allocations();
    auto at = std::find(live.begin(), live.end(), p);
    if (at == live.end()) {
        std::fprintf(stderr, "stub ACL: aclrtFree(%p), which aclrtMalloc did not return or was freed\n", p);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    live.erase(at);
    std::free(p);
    return wsp_stub_call("aclrtFree");
}
/* synchronous: runs now, whatever the streams hold (as the real call: it does not wait for them) */
static inline aclError aclrtMemcpy(void *dst, size_t max, const void *src, size_t n, aclrtMemcpyKind) {
    aclError e = wsp_stub_call("aclrtMemcpy");
    if (!e && n > max) return 107000;
    if (!e) std::memmove(dst, src, n);
    return e;
}
static inline aclError aclrtMemset(void *p, size_t max, int v, size_t n) {
    aclError e = wsp_stub_call("aclrtMemset");
    if (!e && n > max) return 107000;
    if (!e) std::memset(p, v, n);
    return e;
}
static inline aclError aclrtMemcpyAsync(void *dst, size_t max, const void *src, size_t n,
                                        aclrtMemcpyKind, aclrtStream stream) {
    aclError e = wsp_stub_call("aclrtMemcpyAsync");
    if (!e && n > max) return 107000;
    if (!e) e = wsp_stub_enqueue(stream, "aclrtMemcpyAsync", [=]() {
        std::memmove(dst, src, n);
        return ACL_SUCCESS;
    });
    return e;
}

template <typename F>
static inline void wsp_stub_launch(const char *kernel, uint32_t blocks, void *l2ctrl,
                                   aclrtStream stream, F &&run_block) {
    (void)l2ctrl;
    const std::string name = std::string("<<<") + kernel + ">>>";
    wsp_stub_log(name);
    if (!wsp_stub_stream_live(stream) || blocks < 1) {
        std::fprintf(stderr, "stub ACL: %s launched on %u blocks of stream %p\n", kernel, blocks, stream);
        std::exit(9);
    }
    std::function<void(uint32_t)> body = run_block;  /* the launch's arguments, by value */
    const std::string what = kernel;
    wsp_stub_enqueue(stream, name, [body, blocks, what]() {
        for (uint32_t b = 0; b < blocks; b++) {
            try {
                body(b);
            } catch (const std::exception &e) {
                std::fprintf(stderr, "stub ACL: %s, block %u: %s\n", what.c_str(), b, e.what());
                std::exit(8);
            }
        }
        return ACL_SUCCESS;
    });
}
#endif
