/* The few Ascend C names aicore/dispatch.asc uses, on the host (tests/ascend/test_dispatch.py):
 * GM_ADDR and the qualifiers, GlobalTensor's SetGlobalBuffer / GetValue (each read reported to
 * the test's test_read: a block must read only its own tasks), GetBlockIdx (the block the test
 * is running) and DataCacheCleanAndInvalid (counted: the dispatcher must drop stale cache
 * lines before reading records another processor wrote). Not part B's CPU
 * implementation of the kernels' API: the kernels are replaced by recording stubs here. */
#ifndef WSP_TEST_DISPATCH_SHIM_H
#define WSP_TEST_DISPATCH_SHIM_H
#include <stdint.h>

#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR uint8_t *

/* the kernel type a kernel declares (KERNEL_TASK_TYPE_DEFAULT in its body, as CANN's samples
 * do): recorded in the binary's metadata on the device, nothing on the host */
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIV_1_0,
                      KERNEL_TYPE_MIX_AIC_1_0, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2 };
#define KERNEL_TASK_TYPE_DEFAULT(t) ((void)(t))

namespace AscendC {
extern int64_t test_block;        /* the block GetBlockIdx reports */
extern int64_t test_cache_drops;  /* DataCacheCleanAndInvalid calls */
void test_read(const void *at);   /* a GetValue of the word at `at` */
enum class CacheLine { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class DcciDst { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(T *buffer) { ptr_ = buffer; }
    T GetValue(const uint64_t offset) const {
        test_read(ptr_ + offset);
        return ptr_[offset];
    }
    T *ptr_ = nullptr;
};
inline int64_t GetBlockIdx() { return test_block; }
template <typename T, CacheLine entire, DcciDst dst>
inline void DataCacheCleanAndInvalid(const GlobalTensor<T> &) { test_cache_drops++; }
}  // namespace AscendC
#endif
