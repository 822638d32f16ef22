/* A stand-in for CANN's aicpu_api.h: only the qualifiers of an AICPU kernel, so that
 * aicpu/expand.aicpu compiles with the host C++ compiler (tests/ascend). */
#ifndef WSP_TEST_AICPU_API_H
#define WSP_TEST_AICPU_API_H
#define __global__
#define __aicpu__
/* aicpu_api.h's store barrier (`dsb st` on the AICPU): a release fence on the host */
namespace AscendC {
static inline void DataStoreBarrier(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
}  // namespace AscendC
#endif
