/* A stand-in for CANN's acl/acl.h, for compiling and running host/main.asc on a machine
 * without CANN (tests/ascend/test_host.py): "device" memory is host memory, streams run
 * nothing asynchronously, and every call is appended to the file $WSP_ACL_LOG. Setting
 * $WSP_ACL_FAIL to a function name makes that function fail (error 507899) to test that the
 * host program checks it. Only what main.asc uses is here, and wsp_stub_launch: what a
 * `KERNEL<<<blocks, l2ctrl, stream>>>(args)` launch becomes on the host (the tests rewrite the
 * launch into a call, tests/ascend/hostrun.py): logged as "<<<KERNEL>>>", run at once, block
 * by block; a kernel that throws (the Ascend C CPU shim's rule checks) ends the program.
 * Each declaration here has the signature of the real acl_rt.h (tests/ascend/test_real_headers.py
 * compiles main.asc against the real headers too, when they are present). */
#ifndef WSP_TEST_ACL_H
#define WSP_TEST_ACL_H
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef enum { ACL_MEM_MALLOC_HUGE_FIRST = 0 } aclrtMemMallocPolicy;
typedef enum { ACL_MEMCPY_HOST_TO_HOST = 0, ACL_MEMCPY_HOST_TO_DEVICE = 1,
               ACL_MEMCPY_DEVICE_TO_HOST = 2, ACL_MEMCPY_DEVICE_TO_DEVICE = 3 } aclrtMemcpyKind;
#define ACL_SUCCESS 0

static inline aclError wsp_stub_call(const char *name) {
    const char *log = std::getenv("WSP_ACL_LOG");
    if (log) {
        FILE *f = std::fopen(log, "a");
        if (f) { std::fprintf(f, "%s\n", name); std::fclose(f); }
    }
    const char *fail = std::getenv("WSP_ACL_FAIL");
    return fail && std::strcmp(fail, name) == 0 ? 507899 : ACL_SUCCESS;
}

static inline aclError aclInit(const char *) { return wsp_stub_call("aclInit"); }
static inline aclError aclFinalize() { return wsp_stub_call("aclFinalize"); }
static inline aclError aclrtSetDevice(int) { return wsp_stub_call("aclrtSetDevice"); }
static inline aclError aclrtResetDevice(int) { return wsp_stub_call("aclrtResetDevice"); }
inline int wsp_stub_objects[64];  /* one set for every translation unit */
static inline aclError aclrtCreateStream(aclrtStream *s) { *s = &wsp_stub_objects[0]; return wsp_stub_call("aclrtCreateStream"); }
static inline aclError aclrtDestroyStream(aclrtStream) { return wsp_stub_call("aclrtDestroyStream"); }
/* events: objects 8.. of wsp_stub_objects, each holding its creation flags. As acl_rt.h says,
 * only an event made by aclrtCreateEventWithFlag(..., ACL_EVENT_SYNC) may be reset: resetting
 * any other (aclrtCreateEvent's included) is refused here (ACL_ERROR_RT_PARAM_INVALID, with a
 * message), where the real runtime leaves it undefined. */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_ERROR_RT_PARAM_INVALID 107000
inline int wsp_stub_nevents;
static inline aclError wsp_stub_new_event(aclrtEvent *e, int flags, const char *name) {
    aclError r = wsp_stub_call(name);
    if (r) return r;
    if (wsp_stub_nevents >= 56) return ACL_ERROR_RT_PARAM_INVALID;
    int *ev = &wsp_stub_objects[8 + wsp_stub_nevents++];
    *ev = flags;
    *e = ev;
    return ACL_SUCCESS;
}
static inline aclError aclrtCreateEvent(aclrtEvent *e) { return wsp_stub_new_event(e, 0, "aclrtCreateEvent"); }
static inline aclError aclrtCreateEventWithFlag(aclrtEvent *e, uint32_t flag) {
    return wsp_stub_new_event(e, (int)flag, "aclrtCreateEventWithFlag");
}
static inline aclError aclrtDestroyEvent(aclrtEvent) { return wsp_stub_call("aclrtDestroyEvent"); }
static inline aclError aclrtRecordEvent(aclrtEvent, aclrtStream) { return wsp_stub_call("aclrtRecordEvent"); }
static inline aclError aclrtStreamWaitEvent(aclrtStream, aclrtEvent) { return wsp_stub_call("aclrtStreamWaitEvent"); }
static inline aclError aclrtResetEvent(aclrtEvent e, aclrtStream) {
    aclError r = wsp_stub_call("aclrtResetEvent");
    if (r) return r;
    if (!e || !(*(const int *)e & (int)ACL_EVENT_SYNC)) {
        std::fprintf(stderr, "stub ACL: aclrtResetEvent on an event not created with ACL_EVENT_SYNC\n");
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    return ACL_SUCCESS;
}
static inline aclError aclrtSynchronizeStream(aclrtStream) { return wsp_stub_call("aclrtSynchronizeStream"); }
static inline aclError aclrtMalloc(void **p, size_t n, aclrtMemMallocPolicy) {
    aclError e = wsp_stub_call("aclrtMalloc");
    *p = e ? nullptr : std::calloc(1, n + 64);
    return e;
}
static inline aclError aclrtFree(void *p) { std::free(p); return wsp_stub_call("aclrtFree"); }
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

template <typename F>
static inline void wsp_stub_launch(const char *kernel, uint32_t blocks, void *l2ctrl,
                                   aclrtStream stream, F &&run_block) {
    (void)l2ctrl;
    const char *log = std::getenv("WSP_ACL_LOG");
    if (log) {
        FILE *f = std::fopen(log, "a");
        if (f) { std::fprintf(f, "<<<%s>>>\n", kernel); std::fclose(f); }
    }
    if (stream != &wsp_stub_objects[0] || blocks < 1) {
        std::fprintf(stderr, "stub ACL: %s launched on %u blocks of stream %p\n", kernel, blocks, stream);
        std::exit(9);
    }
    for (uint32_t b = 0; b < blocks; b++) {
        try {
            run_block(b);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "stub ACL: %s, block %u: %s\n", kernel, b, e.what());
            std::exit(8);
        }
    }
}
#endif
