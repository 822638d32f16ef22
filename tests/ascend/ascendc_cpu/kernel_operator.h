// ascendc_cpu: a CPU implementation of exactly the subset of the Ascend C API (CANN 8.x, Atlas
// A2 / 910B vector core) that wspc's AICore emitter (ptowsp/backends/ascend/aicore/) uses, so
// that generated kernels compile with g++ and run on the host, as CANN's own CPU debug mode does.
//
// It models the real API, not wspc's semantics: the same class and function names, template
// parameters and argument orders; the documented dtype support (a type the real API lacks for
// an operation is a compile error here); the alignment rules (every vector operand and every
// UB side of a copy starts 32-byte aligned, DataCopy moves whole 32-byte blocks, Compare works
// on whole 256-byte repeats); the Unified Buffer capacity (TPipe::InitBuffer beyond WSP_UB_BYTES
// fails); queue discipline (AllocTensor / EnQue / DeQue / FreeTensor, at most 8 live tensors per
// position); and, per 32-byte UB block, the pipeline hazards a real core has: a read by one
// pipe (S, V, MTE2, MTE3) of data another pipe wrote, with no SetFlag/WaitFlag (or queue hand
// off, or PipeBarrier<PIPE_V> between two vector instructions) in between, fails. Where the
// documentation leaves a result open the model picks the behaviour a careless kernel would get
// wrong: Max/Min/Relu do not propagate NaN (`a > b ? a : b`), ReduceSum adds in the A2 order
// (binary tree within each 256-byte repeat, repeats in sequence), fresh buffers and DataCopyPad
// padding hold 0xFF bytes (NaN for floats), Cast rounds exactly as its RoundMode says.
//
// Failures throw AscendC::ShimError (a std::runtime_error) naming the API: the test driver
// catches it and reports it, so a kernel bug is a test failure, never a crash.
//
// The cube side (an AIC core of dav-2201) is modelled too: L1 (A1 / B1, 512 KiB - 256), L0A
// (A2, 64 KiB), L0B (B2, 64 KiB) and L0C (CO1, 128 KiB) are memories of their own with those
// capacities; DataCopy GM -> L1 with Nd2NzParams writes the NZ fractal layout, LoadData L1 ->
// L0A / L0B moves 512-byte fractals (transposing them with ifTranspose), Mmad reads L0A as ZZ
// and L0B as ZN and accumulates f32 (i32) in L0C's NZ layout, Fixpipe writes L0C to GM in rows
// (converting f32 to f16 / bf16, adding to GM under SetAtomicAdd): each layout really permuted
// in memory, so a wrong layout gives wrong numbers. L0 operands must start on a 512-byte
// fractal; the pipes MTE1, M and FIX join the hazard tracking (a queue hand-off at A1 / B1
// orders MTE2 -> MTE1, at A2 / B2 MTE1 -> M, at CO1 M -> FIX; or SetFlag / WaitFlag).
//
// Deliberately not modelled: timing and asynchrony (everything runs in program order, which is
// why hazards are tracked instead), level-0 mask-bit APIs, half arithmetic, the bias table.

#ifndef WSP_ASCENDC_CPU_KERNEL_OPERATOR_H
#define WSP_ASCENDC_CPU_KERNEL_OPERATOR_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#define __aicore__
#define __gm__
#define __global__
#ifndef GM_ADDR
#define GM_ADDR uint8_t *
#endif

/* the kernel type a kernel declares (KERNEL_TASK_TYPE_DEFAULT in its body, as CANN's samples
 * do): recorded in the binary's metadata on the device, nothing on the host */
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIV_1_0,
                      KERNEL_TYPE_MIX_AIC_1_0, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2 };
/* on the host it says which core the launch's blocks run on: a cube API in an AIV-only kernel,
 * or a Unified Buffer queue in an AIC-only one, fails (detail::Core::ktype) */
#define KERNEL_TASK_TYPE_DEFAULT(t) (AscendC::detail::DeclareKernelType((int)(t)))
/* which core type runs the code (in asc-devkit's impl/, as `if ASCEND_IS_AIV { ... }` uses
 * them): in a MIX launch each core's, else the kernel type's */
#define ASCEND_IS_AIC (AscendC::detail::core().ktype == (int)KERNEL_TYPE_AIC_ONLY)
#define ASCEND_IS_AIV (AscendC::detail::core().ktype != (int)KERNEL_TYPE_AIC_ONLY)

// the Unified Buffer of one 910B vector core: 192 KiB (tests may pass -DWSP_UB_BYTES=...).
// The API keeps its own temporaries in the top 8 KiB (TMP_UB_OFFSET / TMP_UB_SIZE of the CANN
// headers): TPipe may hand that space out, but Select overwrites the start of it, as on the
// device, so a kernel that keeps data there sees it clobbered.
#ifndef WSP_UB_BYTES
#define WSP_UB_BYTES (192 * 1024)
#endif
#define WSP_TMP_UB_OFFSET (WSP_UB_BYTES - 8 * 1024)
// the cube core's memories (asc-devkit sys_constants.h, __NPU_ARCH__ 2201), after the UB in one
// arena so that the hazard tracking covers them too
#define WSP_L1_BYTES (512 * 1024 - 256)
#define WSP_L0A_BYTES (64 * 1024)
#define WSP_L0B_BYTES (64 * 1024)
#define WSP_L0C_BYTES (128 * 1024)
#define WSP_L1_AT WSP_UB_BYTES
#define WSP_L0A_AT (WSP_L1_AT + 512 * 1024)
#define WSP_L0B_AT (WSP_L0A_AT + WSP_L0A_BYTES)
#define WSP_L0C_AT (WSP_L0B_AT + WSP_L0B_BYTES)
#define WSP_ARENA_BYTES (WSP_L0C_AT + WSP_L0C_BYTES)

enum pipe_t { PIPE_S = 0, PIPE_V = 1, PIPE_M = 2, PIPE_MTE1 = 3, PIPE_MTE2 = 4, PIPE_MTE3 = 5,
              PIPE_ALL = 6, PIPE_FIX = 10 };

namespace AscendC {

struct ShimError : std::runtime_error {
    explicit ShimError(const std::string &m) : std::runtime_error(m) {}
};

[[noreturn]] inline void ShimFail(const char *api, const std::string &what)
{
    throw ShimError(std::string("ascendc_cpu: ") + api + ": " + what);
}

// ------------------------------------------------------------------------------------------
// scalar types of the device that C++ lacks: bit containers with IEEE conversions

namespace detail {
inline uint32_t F32Bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float BitsF32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t F32ToF16Rint(float f)
{
    uint32_t x = F32Bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to inf (IEEE)
    if (a < 0x38800000u) {  // subnormal f16: round at 2^-24 through the FPU (to nearest even)
        uint32_t sub = F32Bits(BitsF32(a) + 0.5f) - 0x3f000000u;
        return (uint16_t)(sign | sub);
    }
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | norm);
}

inline float F16ToF32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t em = (uint32_t)h & 0x7fffu;
    if (em >= 0x7c00u) return BitsF32(sign | (em << 13) | 0x7f800000u);
    return BitsF32(F32Bits(BitsF32(em << 13) * 5.192296858534828e33f) | sign);  // * 2^112
}

inline uint16_t F32ToBf16Rint(float f)
{
    uint32_t x = F32Bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
}  // namespace detail

struct half {
    uint16_t bits;
    half() = default;
    half(float f) : bits(detail::F32ToF16Rint(f)) {}
    operator float() const { return detail::F16ToF32(bits); }
};

struct bfloat16_t {
    uint16_t bits;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(detail::F32ToBf16Rint(f)) {}
    operator float() const { return detail::BitsF32((uint32_t)bits << 16); }
};

// ------------------------------------------------------------------------------------------
// enums and parameter structs (names and fields as in the CANN headers)

enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC,
                                 LCM = VECCALC, SPM, SHM, TSCM, MAX };
using QuePosition = TPosition;
using TEventID = int8_t;

enum class HardEvent : uint8_t {
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V,
    MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3,
    S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3, MAX
};

enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC,
                       CAST_ODD };
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE,
                               VSEL_TENSOR_TENSOR_MODE };

struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn,
                   const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;   // in 32-byte blocks
    uint16_t srcStride = 0;  // gap between blocks, in 32-byte blocks
    uint16_t dstStride = 0;
};

struct DataCopyExtParams {
    DataCopyExtParams() {}
    DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn,
                      const uint32_t dstStrideIn, const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn),
          rsv(rsvIn) {}
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // in bytes
    uint32_t srcStride = 0;  // gap: bytes on the GM side, 32-byte blocks on the UB side
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    DataCopyPadExtParams() {}
    DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue,
                         const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue),
          paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = 0;
};

struct CopyRepeatParams {
    CopyRepeatParams() {}
    CopyRepeatParams(const uint16_t dstStrideIn, const uint16_t srcStrideIn,
                     uint16_t dstRepeatSizeIn, uint16_t srcRepeatSizeIn)
        : dstStride(dstStrideIn), srcStride(srcStrideIn), dstRepeatSize(dstRepeatSizeIn),
          srcRepeatSize(srcRepeatSizeIn) {}
    uint16_t dstStride = 1;      // block stride within a repeat, in 32-byte blocks
    uint16_t srcStride = 1;
    uint16_t dstRepeatSize = 8;  // repeat stride, in 32-byte blocks
    uint16_t srcRepeatSize = 8;
};

// ------------------------------------------------------------------------------------------
// the core's state: the Unified Buffer and, per 32-byte block, which pipe wrote data that
// which other pipe may not read yet

namespace detail {
enum Pipe { P_S = 0, P_V = 1, P_MTE2 = 2, P_MTE3 = 3, P_MTE1 = 4, P_M = 5, P_FIX = 6, NPIPES = 7 };
inline const char *PipeName(int p)
{
    static const char *n[] = {"S (scalar)", "V (vector)", "MTE2 (GM->UB/L1 copy)", "MTE3 (UB->GM copy)",
                              "MTE1 (L1->L0A/L0B load)", "M (cube)", "FIX (L0C->GM fixpipe)"};
    return n[p];
}
constexpr uint32_t BLOCK = 32;
constexpr uint32_t NBLOCKS = WSP_ARENA_BYTES / BLOCK;
// the memories of the arena: UB, L1, L0A, L0B, L0C
enum Mem { M_UB = 0, M_L1, M_L0A, M_L0B, M_L0C, NMEMS };
inline const char *MemName(int m)
{
    static const char *n[] = {"UB", "L1", "L0A", "L0B", "L0C"};
    return n[m];
}
constexpr uint32_t MEM_AT[NMEMS] = {0, WSP_L1_AT, WSP_L0A_AT, WSP_L0B_AT, WSP_L0C_AT};
constexpr uint32_t MEM_BYTES[NMEMS] = {WSP_UB_BYTES, WSP_L1_BYTES, WSP_L0A_BYTES, WSP_L0B_BYTES,
                                       WSP_L0C_BYTES};

struct Core {
    alignas(512) uint8_t ub[WSP_ARENA_BYTES];  // UB, then L1, L0A, L0B, L0C (MEM_AT)
    // a write by pipe `from` to block b is visible to pipe `to` once a synchronisation
    // from -> to (SetFlag/WaitFlag, a queue hand-off, PipeBarrier<PIPE_V> for V -> V) has
    // happened since: stamp[b][from][to] == gen[from][to] + 1 means "not yet"
    uint32_t stamp[NBLOCKS][NPIPES][NPIPES];
    uint32_t gen[NPIPES][NPIPES];
    void *pipe = nullptr;
    uint32_t used = 0;            // bytes of UB handed out by TPipe::InitBuffer
    uint32_t usedMem[NMEMS] = {0};  // the same for L1, L0A, L0B, L0C
    int atomic = 0;               // SetAtomicAdd<T>: 1 f32, 2 f16, 3 bf16 (0: none)
    int ktype = -1;               // KERNEL_TASK_TYPE_DEFAULT of the running kernel (-1: none)
    int live[32] = {0};           // tensors allocated and not freed, per TPosition
    bool flagSet[64][8] = {{false}};
};
// one core per thread (the cores of a MIX launch are threads: mix_launch.h)
inline Core *&CorePtr()
{
    static thread_local Core *c = nullptr;
    return c;
}
inline Core &core()
{
    Core *&c = CorePtr();
    if (!c) c = new Core();  // the main thread's is never freed: it outlives static destructors
    return *c;
}
inline void DropCore()
{
    delete CorePtr();
    CorePtr() = nullptr;
}
inline bool InUb(const void *p)
{
    const uint8_t *b = static_cast<const uint8_t *>(p);
    return b >= core().ub && b < core().ub + WSP_UB_BYTES;
}
inline uint32_t UbOffset(const void *p)
{
    return (uint32_t)(static_cast<const uint8_t *>(p) - core().ub);
}
inline bool InArena(const void *p)
{
    const uint8_t *b = static_cast<const uint8_t *>(p);
    return b >= core().ub && b < core().ub + WSP_ARENA_BYTES;
}
// the memory `p` lies in (NMEMS: not on the core)
inline int MemOf(const void *p)
{
    if (!InArena(p)) return NMEMS;
    const uint32_t o = UbOffset(p);
    for (int m = NMEMS - 1; m >= 0; --m)
        if (o >= MEM_AT[m]) return o < MEM_AT[m] + MEM_BYTES[m] ? m : NMEMS;
    return NMEMS;
}
inline void Write(const void *p, size_t bytes, Pipe by)
{
    if (!bytes || !InArena(p)) return;
    Core &c = core();
    uint32_t lo = UbOffset(p) / BLOCK, hi = (UbOffset(p) + (uint32_t)bytes - 1) / BLOCK;
    for (uint32_t b = lo; b <= hi && b < NBLOCKS; ++b)
        for (int q = 0; q < NPIPES; ++q)
            if (q != by || by == P_V) c.stamp[b][by][q] = c.gen[by][q] + 1;
}
inline void Read(const void *p, size_t bytes, Pipe by, const char *api)
{
    if (!bytes || !InArena(p)) return;
    Core &c = core();
    uint32_t lo = UbOffset(p) / BLOCK, hi = (UbOffset(p) + (uint32_t)bytes - 1) / BLOCK;
    for (uint32_t b = lo; b <= hi && b < NBLOCKS; ++b) {
        for (int from = 0; from < NPIPES; ++from) {
            if (c.stamp[b][from][by] == c.gen[from][by] + 1) {
                char msg[256];
                std::snprintf(msg, sizeof msg,
                              "reads %s bytes [%u, %u) on pipe %s, but pipe %s wrote them with no "
                              "synchronisation in between (SetFlag/WaitFlag, a queue hand-off or "
                              "PipeBarrier<PIPE_V>)",
                              MemName(MemOf(p)), UbOffset(p) - MEM_AT[MemOf(p)],
                              UbOffset(p) - MEM_AT[MemOf(p)] + (uint32_t)bytes, PipeName(by),
                              PipeName(from));
                ShimFail(api, msg);
            }
        }
    }
}
inline void Sync(Pipe from, Pipe to) { core().gen[from][to] += 2; }
inline void SyncAll()
{
    for (int a = 0; a < NPIPES; ++a)
        for (int b = 0; b < NPIPES; ++b) Sync((Pipe)a, (Pipe)b);
}
inline void CheckAligned(const void *p, const char *api, const char *what)
{
    if (InUb(p) && UbOffset(p) % BLOCK != 0) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "%s starts at UB offset %u, which is not 32-byte aligned",
                      what, UbOffset(p));
        ShimFail(api, msg);
    }
}
inline void Garbage(void *p, size_t bytes) { std::memset(p, 0xff, bytes); }
// what an API call that stages data in the API's scratch space (TMP_UB_OFFSET) does to it
inline void ApiScratch()
{
    Garbage(core().ub + WSP_TMP_UB_OFFSET, 32);
    Write(core().ub + WSP_TMP_UB_OFFSET, 32, P_V);
}
}  // namespace detail

// ------------------------------------------------------------------------------------------
// MIX launches (KERNEL_TYPE_MIX_AIC_1_2 / _1_1): one block is one cube core (AIC) and one or
// two vector cores (AIV) of an AI Core group, each with its own memories (core() is per
// thread). `mix_launch.h` runs a block's cores as threads (wsp_cpu_mix_launch) and models the
// cross-core flags and the GM workspace's producers through these hooks; here is only what a
// kernel sees (the calls, the core's place in its group), so that this header's declarations
// stay checkable against the real ones (tests/ascend/cann_decls.py scans it).

namespace detail {
inline thread_local int mixCore = -1;      // 0: the AIC, 1 / 2: AIV 0 / 1; -1: not in a MIX launch
inline thread_local int64_t mixBlock = 0;  // the block of the MIX launch
inline thread_local int mixRatio = 0;      // AIVs per AIC in the launch
struct MixHooks {
    void (*set)(int pipe, unsigned flagId);  // CrossCoreSetFlag in mode 2
    void (*wait)(unsigned flagId);           // CrossCoreWaitFlag in mode 2
    void (*gm)(const void *p, size_t bytes, bool write, int pipe, const char *api);
};
inline MixHooks mixHooks = {nullptr, nullptr, nullptr};
// a GM access by this core (tracked in the workspace of a MIX launch only)
inline void MixGm(const void *p, size_t bytes, bool write, Pipe pipe, const char *api)
{
    if (mixCore >= 0 && mixHooks.gm && bytes) mixHooks.gm(p, bytes, write, pipe, api);
}
// KERNEL_TASK_TYPE_DEFAULT: the type a launch's blocks run as; inside a MIX launch the core's
// own (set by the launcher), which the kernel must declare as the launch's MIX type
inline void DeclareKernelType(int t)
{
    if (mixCore < 0) { core().ktype = t; return; }
    const int want = mixRatio == 2 ? (int)KERNEL_TYPE_MIX_AIC_1_2 : (int)KERNEL_TYPE_MIX_AIC_1_1;
    if (t != want) ShimFail("KERNEL_TASK_TYPE_DEFAULT", "a kernel of a MIX launch declares another kernel type");
}
inline Pipe PipeOf(pipe_t p)
{
    switch (p) {
    case PIPE_V: return P_V;
    case PIPE_M: return P_M;
    case PIPE_MTE1: return P_MTE1;
    case PIPE_MTE2: return P_MTE2;
    case PIPE_MTE3: return P_MTE3;
    case PIPE_FIX: return P_FIX;
    default: return P_S;
    }
}
inline void MixCall(const char *api, int mode, uint16_t flagId)
{
    if (mode != 2) ShimFail(api, "only mode 2 (between the AIC and the AIVs of a group) is modelled");
    if (mixCore < 0 || !mixHooks.set) ShimFail(api, "mode 2 outside a MIX launch (no core of the other kind)");
    if (flagId > 10) ShimFail(api, "flag ids are 0..10 on Atlas A2 / A3");
}
}  // namespace detail

// mode 2 (the CrossCoreSetFlag page, atlasascendc_api_07_0273): the AIC's set adds 1 to the
// flag's counter on every AIV of its group, the AIVs' sets add 1 to the AIC's once each has set
template <uint8_t modeId, pipe_t pipe>
__aicore__ inline void CrossCoreSetFlag(uint16_t flagId)
{
    static_assert(pipe != PIPE_S && pipe != PIPE_ALL, "CrossCoreSetFlag: PIPE_S and PIPE_ALL are not supported on Atlas A2");
    detail::MixCall("CrossCoreSetFlag", modeId, flagId);
    detail::mixHooks.set(detail::PipeOf(pipe), flagId);
}

// blocks while the flag's counter is 0, then takes 1
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
__aicore__ inline void CrossCoreWaitFlag(uint16_t flagId)
{
    detail::MixCall("CrossCoreWaitFlag", modeId, flagId);
    detail::mixHooks.wait(flagId);
}

// ------------------------------------------------------------------------------------------
// tensors

template <typename T> class LocalTensor;

template <typename T>
class GlobalTensor {
public:
    __aicore__ inline GlobalTensor() = default;
    __aicore__ inline void SetGlobalBuffer(__gm__ T *buffer, uint64_t bufferSize)
    {
        ptr_ = buffer;
        size_ = bufferSize;
    }
    // the buffer's size unknown (as the dispatcher sets its records and control block):
    // GetValue / operator[] are then not bounds-checked
    __aicore__ inline void SetGlobalBuffer(__gm__ T *buffer)
    {
        ptr_ = buffer;
        size_ = UINT64_MAX;
    }
    // a scalar read of GM (through the scalar unit's data cache on the device)
    __aicore__ inline T GetValue(const uint64_t offset) const
    {
        if (offset >= size_) ShimFail("GlobalTensor::GetValue", "offset past the buffer");
        return ptr_[offset];
    }
    __aicore__ inline GlobalTensor operator[](const uint64_t offset) const
    {
        if (offset > size_) ShimFail("GlobalTensor::operator[]", "offset past the buffer");
        GlobalTensor g;
        g.ptr_ = ptr_ + offset;
        g.size_ = size_ - offset;
        return g;
    }
    T *ptr_ = nullptr;
    uint64_t size_ = 0;
};

template <typename T>
class LocalTensor {
public:
    __aicore__ inline LocalTensor() = default;
    __aicore__ inline LocalTensor operator[](const uint32_t offset) const
    {
        if (offset > size_) ShimFail("LocalTensor::operator[]", "offset past the tensor");
        LocalTensor t = *this;
        t.ptr_ = ptr_ + offset;
        t.size_ = size_ - offset;
        return t;
    }
    __aicore__ inline T GetValue(const uint32_t index) const
    {
        if (index >= size_) ShimFail("LocalTensor::GetValue", "index past the tensor");
        detail::Read(ptr_ + index, sizeof(T), detail::P_S, "LocalTensor::GetValue");
        return ptr_[index];
    }
    // as the real LocalTensor declares it (a template over the value's type, converted)
    template <typename S>
    __aicore__ inline void SetValue(const uint32_t index, const S value) const
    {
        if (index >= size_) ShimFail("LocalTensor::SetValue", "index past the tensor");
        ptr_[index] = (T)value;
        detail::Write(ptr_ + index, sizeof(T), detail::P_S);
    }
    template <typename U>
    __aicore__ inline LocalTensor<U> ReinterpretCast() const
    {
        LocalTensor<U> t;
        t.ptr_ = reinterpret_cast<U *>(ptr_);
        t.size_ = (uint32_t)((uint64_t)size_ * sizeof(T) / sizeof(U));
        t.pos_ = pos_;
        t.slot_ = slot_;
        return t;
    }
    __aicore__ inline uint32_t GetSize() const { return size_; }

    T *ptr_ = nullptr;
    uint32_t size_ = 0;  // elements from ptr_ to the end of its buffer
    TPosition pos_ = TPosition::VECCALC;
    int slot_ = -1;      // queue buffer index, -1 for TBuf tensors
};

// ------------------------------------------------------------------------------------------
// TPipe, TQue, TBuf

class TPipe;
inline TPipe *&CurrentPipe()
{
    static thread_local TPipe *p = nullptr;  // per core: the cores of a MIX launch are threads
    return p;
}
// GetTPipePtr is declared in the global namespace (basic_api/kernel_common.h), not in
// AscendC: it is defined after the namespace closes, so `AscendC::GetTPipePtr()` fails here too

template <TPosition pos, int32_t depth>
class TQue {
public:
    static_assert(depth >= 1, "AllocTensor (non-inplace) needs a TQue depth of at least 1");
    static constexpr TPosition position = pos;
    __aicore__ inline TQue() = default;

    template <typename T>
    __aicore__ inline LocalTensor<T> AllocTensor()
    {
        if (!base_) ShimFail("TQue::AllocTensor", "the queue has no buffers (InitBuffer first)");
        for (int i = 0; i < num_; ++i) {
            if (state_[i] == FREE) {
                if (detail::core().live[(int)pos] >= 8)
                    ShimFail("TQue::AllocTensor",
                             "more than 8 tensors of one TPosition allocated at once (910B limit)");
                ++detail::core().live[(int)pos];
                state_[i] = ALLOCATED;
                detail::Garbage(base_ + (size_t)i * len_, len_);
                LocalTensor<T> t;
                t.ptr_ = reinterpret_cast<T *>(base_ + (size_t)i * len_);
                t.size_ = len_ / sizeof(T);
                t.pos_ = pos;
                t.slot_ = i;
                return t;
            }
        }
        ShimFail("TQue::AllocTensor", "every buffer of the queue is in use (FreeTensor first)");
    }
    template <typename T>
    __aicore__ inline bool EnQue(const LocalTensor<T> &tensor)
    {
        int i = Slot(tensor, "TQue::EnQue");
        if (state_[i] != ALLOCATED) ShimFail("TQue::EnQue", "the tensor is not freshly allocated");
        if (count_ >= depth) ShimFail("TQue::EnQue", "the queue is full (its depth)");
        state_[i] = QUEUED;
        fifo_[(head_ + count_) % 8] = i;
        ++count_;
        return true;
    }
    template <typename T>
    __aicore__ inline LocalTensor<T> DeQue()
    {
        if (count_ == 0) ShimFail("TQue::DeQue", "the queue is empty");
        int i = fifo_[head_];
        head_ = (head_ + 1) % 8;
        --count_;
        state_[i] = DEQUEUED;
        // the hand-off the queue's EnQue/DeQue events make: copy-in -> vector, vector -> copy-out
        if (pos == TPosition::VECIN) detail::Sync(detail::P_MTE2, detail::P_V);
        if (pos == TPosition::VECOUT) detail::Sync(detail::P_V, detail::P_MTE3);
        // the cube's: GM -> L1 -> L0A / L0B (MTE2, MTE1), Mmad (M), L0C -> GM (FIX)
        if (pos == TPosition::A1 || pos == TPosition::B1) detail::Sync(detail::P_MTE2, detail::P_MTE1);
        if (pos == TPosition::A2 || pos == TPosition::B2) detail::Sync(detail::P_MTE1, detail::P_M);
        if (pos == TPosition::CO1) detail::Sync(detail::P_M, detail::P_FIX);
        LocalTensor<T> t;
        t.ptr_ = reinterpret_cast<T *>(base_ + (size_t)i * len_);
        t.size_ = len_ / sizeof(T);
        t.pos_ = pos;
        t.slot_ = i;
        return t;
    }
    template <typename T>
    __aicore__ inline void FreeTensor(LocalTensor<T> &tensor)
    {
        int i = Slot(tensor, "TQue::FreeTensor");
        if (state_[i] == FREE || state_[i] == QUEUED)
            ShimFail("TQue::FreeTensor", "the tensor is not allocated, or still in the queue");
        state_[i] = FREE;
        --detail::core().live[(int)pos];
    }

    // set by TPipe::InitBuffer
    uint8_t *base_ = nullptr;
    uint32_t len_ = 0;
    int num_ = 0;

private:
    enum State { FREE, ALLOCATED, QUEUED, DEQUEUED };
    template <typename T> int Slot(const LocalTensor<T> &t, const char *api) const
    {
        int i = t.slot_;
        if (i < 0 || i >= num_ || reinterpret_cast<uint8_t *>(t.ptr_) != base_ + (size_t)i * len_)
            ShimFail(api, "the tensor does not belong to this queue");
        return i;
    }
    State state_[8] = {FREE, FREE, FREE, FREE, FREE, FREE, FREE, FREE};
    int fifo_[8] = {0};
    int head_ = 0, count_ = 0;
};

template <TPosition pos = TPosition::VECCALC>
class TBuf {
public:
    static constexpr TPosition position = pos;
    __aicore__ inline TBuf() = default;
    template <typename T>
    __aicore__ inline LocalTensor<T> Get()
    {
        if (!base_) ShimFail("TBuf::Get", "the buffer has no memory (InitBuffer first)");
        LocalTensor<T> t;
        t.ptr_ = reinterpret_cast<T *>(base_);
        t.size_ = len_ / sizeof(T);
        t.pos_ = pos;
        return t;
    }
    // `size` elements of T starting `bufOffset` bytes into the buffer
    template <typename T>
    __aicore__ inline LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset)
    {
        if (!base_) ShimFail("TBuf::GetWithOffset", "the buffer has no memory (InitBuffer first)");
        if ((uint64_t)bufOffset + (uint64_t)size * sizeof(T) > len_)
            ShimFail("TBuf::GetWithOffset", "the tensor runs past the buffer");
        LocalTensor<T> t;
        t.ptr_ = reinterpret_cast<T *>(base_ + bufOffset);
        t.size_ = size;
        t.pos_ = pos;
        return t;
    }
    uint8_t *base_ = nullptr;
    uint32_t len_ = 0;
};

class TPipe {
public:
    __aicore__ inline TPipe()
    {
        if (CurrentPipe()) ShimFail("TPipe", "a second TPipe while another is alive (one per kernel)");
        CurrentPipe() = this;
        detail::core().used = 0;
        std::memset(detail::core().usedMem, 0, sizeof detail::core().usedMem);
        detail::core().atomic = 0;
        detail::SyncAll();  // nothing of an earlier kernel is pending
        std::memset(detail::core().live, 0, sizeof detail::core().live);
    }
    __aicore__ inline ~TPipe()
    {
        if (CurrentPipe() == this) CurrentPipe() = nullptr;
    }
    // releases the pipe, so that another may be built (kernels run one after another); every
    // tensor taken from a queue must have been freed
    __aicore__ inline void Destroy()
    {
        if (CurrentPipe() != this) return;
        for (int p = 0; p < 32; ++p)
            if (detail::core().live[p] != 0)
                ShimFail("TPipe::Destroy", "a queue tensor was allocated and never freed");
        CurrentPipe() = nullptr;
    }
    // as the real TPipe declares it: a template over the queue's type
    template <class Q>
    __aicore__ inline bool InitBuffer(Q &que, uint8_t num, uint32_t len)
    {
        if (num < 1 || num > 8) ShimFail("TPipe::InitBuffer", "a queue takes 1 to 8 buffers");
        uint32_t l = (len + 31u) / 32u * 32u;
        que.base_ = Take((uint64_t)l * num, "TPipe::InitBuffer", Q::position);
        que.len_ = l;
        que.num_ = num;
        return true;
    }
    template <TPosition pos>
    __aicore__ inline bool InitBuffer(TBuf<pos> &buf, uint32_t len)
    {
        uint32_t l = (len + 31u) / 32u * 32u;
        buf.base_ = Take(l, "TPipe::InitBuffer", pos);
        buf.len_ = l;
        return true;
    }
    template <HardEvent evt>
    __aicore__ inline TEventID FetchEventID() { return 0; }
    __aicore__ inline TEventID FetchEventID(HardEvent) { return 0; }

private:
    // the memory a position's buffers live in on dav-2201 (A1 / B1 / C1 in L1, A2 in L0A, B2 in
    // L0B, CO1 in L0C, the vector positions in the UB)
    static int MemOfPosition(TPosition pos, const char *api)
    {
        switch (pos) {
        case TPosition::A1: case TPosition::B1: case TPosition::C1: return detail::M_L1;
        case TPosition::A2: return detail::M_L0A;
        case TPosition::B2: return detail::M_L0B;
        case TPosition::CO1: return detail::M_L0C;
        case TPosition::CO2: case TPosition::C2:
            ShimFail(api, "CO2 / C2 buffers are not modelled (on dav-2201 Fixpipe writes L0C to GM)");
        default: return detail::M_UB;
        }
    }
    uint8_t *Take(uint64_t bytes, const char *api, TPosition pos)
    {
        const int mem = MemOfPosition(pos, api);
        if (mem == detail::M_UB && detail::core().ktype == (int)KERNEL_TYPE_AIC_ONLY)
            ShimFail(api, "a Unified Buffer queue in a KERNEL_TYPE_AIC_ONLY kernel (the cube core has no UB)");
        if (mem != detail::M_UB && detail::core().ktype == (int)KERNEL_TYPE_AIV_ONLY)
            ShimFail(api, "an L1 / L0 buffer in a KERNEL_TYPE_AIV_ONLY kernel (the vector cores have none)");
        if (mem != detail::M_UB) {
            detail::Core &c = detail::core();
            uint32_t &used = c.usedMem[mem];
            if (used + bytes > (uint64_t)detail::MEM_BYTES[mem]) {
                char msg[200];
                std::snprintf(msg, sizeof msg, "%llu more bytes after %u exceed %s (%u bytes)",
                              (unsigned long long)bytes, used, detail::MemName(mem),
                              (unsigned)detail::MEM_BYTES[mem]);
                ShimFail(api, msg);
            }
            uint8_t *p = c.ub + detail::MEM_AT[mem] + used;
            used += (uint32_t)bytes;
            detail::Garbage(p, bytes);
            return p;
        }
        detail::Core &c = detail::core();
        if (c.used + bytes > (uint64_t)WSP_UB_BYTES) {
            char msg[200];
            std::snprintf(msg, sizeof msg,
                          "%llu more bytes after %u exceed the Unified Buffer (%u bytes)",
                          (unsigned long long)bytes, c.used, (unsigned)WSP_UB_BYTES);
            ShimFail(api, msg);
        }
        uint8_t *p = c.ub + c.used;
        c.used += (uint32_t)bytes;
        detail::Garbage(p, bytes);
        return p;
    }
};

// ------------------------------------------------------------------------------------------
// synchronisation

namespace detail {
inline bool EventPipes(HardEvent e, Pipe &from, Pipe &to)
{
    switch (e) {
    case HardEvent::MTE2_V: from = P_MTE2; to = P_V; return true;
    case HardEvent::V_MTE2: from = P_V; to = P_MTE2; return true;
    case HardEvent::MTE3_V: from = P_MTE3; to = P_V; return true;
    case HardEvent::V_MTE3: from = P_V; to = P_MTE3; return true;
    case HardEvent::V_V: from = P_V; to = P_V; return true;
    case HardEvent::MTE3_MTE2: from = P_MTE3; to = P_MTE2; return true;
    case HardEvent::MTE2_MTE3: from = P_MTE2; to = P_MTE3; return true;
    case HardEvent::S_V: from = P_S; to = P_V; return true;
    case HardEvent::V_S: from = P_V; to = P_S; return true;
    case HardEvent::S_MTE2: from = P_S; to = P_MTE2; return true;
    case HardEvent::MTE2_S: from = P_MTE2; to = P_S; return true;
    case HardEvent::S_MTE3: from = P_S; to = P_MTE3; return true;
    case HardEvent::MTE3_S: from = P_MTE3; to = P_S; return true;
    case HardEvent::MTE2_MTE1: from = P_MTE2; to = P_MTE1; return true;
    case HardEvent::MTE1_MTE2: from = P_MTE1; to = P_MTE2; return true;
    case HardEvent::MTE1_M: from = P_MTE1; to = P_M; return true;
    case HardEvent::M_MTE1: from = P_M; to = P_MTE1; return true;
    case HardEvent::M_FIX: from = P_M; to = P_FIX; return true;
    case HardEvent::FIX_M: from = P_FIX; to = P_M; return true;
    case HardEvent::MTE2_M: from = P_MTE2; to = P_M; return true;
    case HardEvent::M_MTE2: from = P_M; to = P_MTE2; return true;
    default: return false;
    }
}
}  // namespace detail

template <HardEvent event>
__aicore__ inline void SetFlag(int32_t eventID)
{
    if (eventID < 0 || eventID > 7) ShimFail("SetFlag", "event ids are 0..7 on the 910B");
    detail::core().flagSet[(int)event][eventID] = true;
}

template <HardEvent event>
__aicore__ inline void WaitFlag(int32_t eventID)
{
    if (eventID < 0 || eventID > 7) ShimFail("WaitFlag", "event ids are 0..7 on the 910B");
    bool &set = detail::core().flagSet[(int)event][eventID];
    if (!set) ShimFail("WaitFlag", "no SetFlag of this event and id to wait for (a hang on the device)");
    set = false;
    detail::Pipe from, to;
    if (detail::EventPipes(event, from, to)) detail::Sync(from, to);
}

template <pipe_t pipe>
__aicore__ inline void PipeBarrier()
{
    if (pipe == PIPE_V) detail::Sync(detail::P_V, detail::P_V);
    if (pipe == PIPE_ALL) detail::SyncAll();
}

// ------------------------------------------------------------------------------------------
// data movement

namespace detail {
template <typename T> constexpr bool PadType()
{
    return std::is_same<T, half>::value || std::is_same<T, int16_t>::value ||
           std::is_same<T, uint16_t>::value || std::is_same<T, float>::value ||
           std::is_same<T, int32_t>::value || std::is_same<T, uint32_t>::value ||
           std::is_same<T, int8_t>::value || std::is_same<T, uint8_t>::value;
}
template <typename T>
inline void UbRange(const LocalTensor<T> &t, uint64_t bytes, const char *api)
{
    if (bytes > (uint64_t)t.size_ * sizeof(T)) ShimFail(api, "the UB side runs past its tensor");
}
}  // namespace detail

// GM -> UB, whole 32-byte blocks
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dstLocal, const GlobalTensor<T> &srcGlobal,
                                const DataCopyParams &repeatParams)
{
    const char *api = "DataCopy(GM->UB)";
    const DataCopyParams &p = repeatParams;
    if (p.blockCount < 1 || p.blockCount > 4095 || p.blockLen < 1)
        ShimFail(api, "blockCount must be in [1, 4095] and blockLen in [1, 65535]");
    detail::CheckAligned(dstLocal.ptr_, api, "the UB destination");
    uint64_t span = ((uint64_t)p.blockCount * (p.blockLen + p.dstStride) - p.dstStride) * 32;
    detail::UbRange(dstLocal, span, api);
    const uint8_t *src = reinterpret_cast<const uint8_t *>(srcGlobal.ptr_);
    uint8_t *dst = reinterpret_cast<uint8_t *>(dstLocal.ptr_);
    uint64_t gspan = ((uint64_t)p.blockCount * (p.blockLen + p.srcStride) - p.srcStride) * 32;
    if (gspan > srcGlobal.size_ * sizeof(T)) ShimFail(api, "the GM side runs past its buffer");
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        detail::MixGm(src + (uint64_t)b * (p.blockLen + p.srcStride) * 32, (size_t)p.blockLen * 32, false,
                      detail::P_MTE2, api);
        std::memcpy(dst + (uint64_t)b * (p.blockLen + p.dstStride) * 32,
                    src + (uint64_t)b * (p.blockLen + p.srcStride) * 32, (size_t)p.blockLen * 32);
        detail::Write(dst + (uint64_t)b * (p.blockLen + p.dstStride) * 32, (size_t)p.blockLen * 32,
                      detail::P_MTE2);
    }
}

// UB -> GM, whole 32-byte blocks
template <typename T>
__aicore__ inline void DataCopy(const GlobalTensor<T> &dstGlobal, const LocalTensor<T> &srcLocal,
                                const DataCopyParams &repeatParams)
{
    const char *api = "DataCopy(UB->GM)";
    const DataCopyParams &p = repeatParams;
    if (p.blockCount < 1 || p.blockCount > 4095 || p.blockLen < 1)
        ShimFail(api, "blockCount must be in [1, 4095] and blockLen in [1, 65535]");
    detail::CheckAligned(srcLocal.ptr_, api, "the UB source");
    uint64_t span = ((uint64_t)p.blockCount * (p.blockLen + p.srcStride) - p.srcStride) * 32;
    detail::UbRange(srcLocal, span, api);
    uint64_t gspan = ((uint64_t)p.blockCount * (p.blockLen + p.dstStride) - p.dstStride) * 32;
    if (gspan > dstGlobal.size_ * sizeof(T)) ShimFail(api, "the GM side runs past its buffer");
    const uint8_t *src = reinterpret_cast<const uint8_t *>(srcLocal.ptr_);
    uint8_t *dst = reinterpret_cast<uint8_t *>(dstGlobal.ptr_);
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        const uint8_t *s = src + (uint64_t)b * (p.blockLen + p.srcStride) * 32;
        detail::Read(s, (size_t)p.blockLen * 32, detail::P_MTE3, api);
        detail::MixGm(dst + (uint64_t)b * (p.blockLen + p.dstStride) * 32, (size_t)p.blockLen * 32, true,
                      detail::P_MTE3, api);
        std::memcpy(dst + (uint64_t)b * (p.blockLen + p.dstStride) * 32, s, (size_t)p.blockLen * 32);
    }
}

// GM -> UB, any length: each block lands 32-byte aligned, the rest of its last 32 bytes is
// padding (paddingValue when isPad, else unspecified: 0xFF bytes here)
template <typename T>
__aicore__ inline void DataCopyPad(const LocalTensor<T> &dstLocal, const GlobalTensor<T> &srcGlobal,
                                   const DataCopyExtParams &dataCopyParams,
                                   const DataCopyPadExtParams<T> &padParams)
{
    static_assert(detail::PadType<T>(), "DataCopyPad: unsupported dtype on Atlas A2");
    const char *api = "DataCopyPad(GM->UB)";
    const DataCopyExtParams &p = dataCopyParams;
    if (p.blockCount > 4095 || p.blockLen > 2097151) ShimFail(api, "blockCount/blockLen out of range");
    if (p.blockLen % sizeof(T) != 0) ShimFail(api, "blockLen must be a multiple of sizeof(T)");
    detail::CheckAligned(dstLocal.ptr_, api, "the UB destination");
    uint32_t padded = (p.blockLen + 31u) / 32u * 32u;
    uint64_t ustride = padded + (uint64_t)p.dstStride * 32;
    detail::UbRange(dstLocal, p.blockCount ? ustride * (p.blockCount - 1) + padded : 0, api);
    uint64_t gstride = p.blockLen + (uint64_t)p.srcStride;
    if (p.blockCount && gstride * (p.blockCount - 1) + p.blockLen > srcGlobal.size_ * sizeof(T))
        ShimFail(api, "the GM side runs past its buffer");
    const uint8_t *src = reinterpret_cast<const uint8_t *>(srcGlobal.ptr_);
    uint8_t *dst = reinterpret_cast<uint8_t *>(dstLocal.ptr_);
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        uint8_t *d = dst + b * ustride;
        detail::MixGm(src + b * gstride, p.blockLen, false, detail::P_MTE2, api);
        std::memcpy(d, src + b * gstride, p.blockLen);
        if (padParams.isPad) {
            T *e = reinterpret_cast<T *>(d + p.blockLen);
            for (uint32_t k = 0; k < (padded - p.blockLen) / sizeof(T); ++k) e[k] = padParams.paddingValue;
        } else {
            detail::Garbage(d + p.blockLen, padded - p.blockLen);
        }
        detail::Write(d, padded, detail::P_MTE2);
    }
}

// UB -> GM, any length: reads blockLen bytes of each 32-byte aligned UB block
template <typename T>
__aicore__ inline void DataCopyPad(const GlobalTensor<T> &dstGlobal, const LocalTensor<T> &srcLocal,
                                   const DataCopyExtParams &dataCopyParams)
{
    static_assert(detail::PadType<T>(), "DataCopyPad: unsupported dtype on Atlas A2");
    const char *api = "DataCopyPad(UB->GM)";
    const DataCopyExtParams &p = dataCopyParams;
    if (p.blockCount > 4095 || p.blockLen > 2097151) ShimFail(api, "blockCount/blockLen out of range");
    detail::CheckAligned(srcLocal.ptr_, api, "the UB source");
    uint32_t padded = (p.blockLen + 31u) / 32u * 32u;
    uint64_t ustride = padded + (uint64_t)p.srcStride * 32;
    detail::UbRange(srcLocal, p.blockCount ? ustride * (p.blockCount - 1) + p.blockLen : 0, api);
    uint64_t gstride = p.blockLen + (uint64_t)p.dstStride;
    if (p.blockCount && gstride * (p.blockCount - 1) + p.blockLen > dstGlobal.size_ * sizeof(T))
        ShimFail(api, "the GM side runs past its buffer");
    const uint8_t *src = reinterpret_cast<const uint8_t *>(srcLocal.ptr_);
    uint8_t *dst = reinterpret_cast<uint8_t *>(dstGlobal.ptr_);
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        detail::Read(src + b * ustride, p.blockLen, detail::P_MTE3, api);
        detail::MixGm(dst + b * gstride, p.blockLen, true, detail::P_MTE3, api);
        std::memcpy(dst + b * gstride, src + b * ustride, p.blockLen);
    }
}

// ------------------------------------------------------------------------------------------
// vector instructions (level 2: the first calCount elements; level 0 for Copy)

namespace detail {
template <typename T>
inline void VecIn(const LocalTensor<T> &t, uint64_t n, const char *api, const char *what)
{
    CheckAligned(t.ptr_, api, what);
    if (n > t.size_) ShimFail(api, std::string(what) + ": calCount runs past the tensor");
    Read(t.ptr_, n * sizeof(T), P_V, api);
}
template <typename T>
inline void VecOut(const LocalTensor<T> &t, uint64_t n, const char *api)
{
    CheckAligned(t.ptr_, api, "dstLocal");
    if (n > t.size_) ShimFail(api, "dstLocal: calCount runs past the tensor");
}
template <typename T> inline void VecDone(const LocalTensor<T> &t, uint64_t n)
{
    Write(t.ptr_, n * sizeof(T), P_V);
}
template <typename T>
inline void Binary(const char *api, const LocalTensor<T> &d, const LocalTensor<T> &a,
                   const LocalTensor<T> &b, int32_t n, T (*f)(T, T))
{
    if (n < 0) ShimFail(api, "negative calCount");
    VecIn(a, n, api, "src0Local");
    VecIn(b, n, api, "src1Local");
    VecOut(d, n, api);
    for (int32_t i = 0; i < n; ++i) d.ptr_[i] = f(a.ptr_[i], b.ptr_[i]);
    VecDone(d, n);
}
template <typename T>
inline void Unary(const char *api, const LocalTensor<T> &d, const LocalTensor<T> &a, int32_t n,
                  T (*f)(T))
{
    if (n < 0) ShimFail(api, "negative calCount");
    VecIn(a, n, api, "srcLocal");
    VecOut(d, n, api);
    for (int32_t i = 0; i < n; ++i) d.ptr_[i] = f(a.ptr_[i]);
    VecDone(d, n);
}
template <typename T>
inline void WithScalar(const char *api, const LocalTensor<T> &d, const LocalTensor<T> &a, T s,
                       int32_t n, T (*f)(T, T))
{
    if (n < 0) ShimFail(api, "negative calCount");
    VecIn(a, n, api, "srcLocal");
    VecOut(d, n, api);
    for (int32_t i = 0; i < n; ++i) d.ptr_[i] = f(a.ptr_[i], s);
    VecDone(d, n);
}
template <typename T> constexpr bool IsF32() { return std::is_same<T, float>::value; }
inline float FMax(float a, float b) { return a > b ? a : b; }  // the documented select
inline float FMin(float a, float b) { return a > b ? b : a; }
}  // namespace detail

// The arithmetic below exists for half/int16_t/int32_t too on the device; wspc only emits it
// for float, so only float is modelled (anything else does not compile here).
#define WSP_SHIM_BINARY(NAME, EXPR)                                                          \
    template <typename T>                                                                    \
    __aicore__ inline void NAME(const LocalTensor<T> &dstLocal, const LocalTensor<T> &src0Local, \
                                const LocalTensor<T> &src1Local, const int32_t &calCount)    \
    {                                                                                        \
        static_assert(detail::IsF32<T>(), #NAME ": only float is modelled");                 \
        detail::Binary<T>(#NAME, dstLocal, src0Local, src1Local, calCount,                    \
                          [](T a, T b) -> T { return EXPR; });                               \
    }
WSP_SHIM_BINARY(Add, a + b)
WSP_SHIM_BINARY(Sub, a - b)
WSP_SHIM_BINARY(Mul, a * b)
WSP_SHIM_BINARY(Div, a / b)
WSP_SHIM_BINARY(Max, detail::FMax(a, b))
WSP_SHIM_BINARY(Min, detail::FMin(a, b))
#undef WSP_SHIM_BINARY

#define WSP_SHIM_SCALAR(NAME, EXPR)                                                          \
    template <typename T, bool isSetMask = true>                                             \
    __aicore__ inline void NAME(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal, \
                                const T &scalarValue, const int32_t &calCount)               \
    {                                                                                        \
        static_assert(detail::IsF32<T>(), #NAME ": only float is modelled");                 \
        detail::WithScalar<T>(#NAME, dstLocal, srcLocal, scalarValue, calCount,               \
                              [](T a, T s) -> T { return EXPR; });                           \
    }
WSP_SHIM_SCALAR(Adds, a + s)
WSP_SHIM_SCALAR(Muls, a * s)
WSP_SHIM_SCALAR(Maxs, detail::FMax(a, s))
WSP_SHIM_SCALAR(Mins, detail::FMin(a, s))
#undef WSP_SHIM_SCALAR

#define WSP_SHIM_UNARY(NAME, EXPR)                                                           \
    template <typename T>                                                                    \
    __aicore__ inline void NAME(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal, \
                                const int32_t &calCount)                                     \
    {                                                                                        \
        static_assert(detail::IsF32<T>(), #NAME ": only float is modelled");                 \
        detail::Unary<T>(#NAME, dstLocal, srcLocal, calCount, [](T x) -> T { return EXPR; }); \
    }
WSP_SHIM_UNARY(Exp, std::exp(x))
WSP_SHIM_UNARY(Ln, std::log(x))
WSP_SHIM_UNARY(Sqrt, std::sqrt(x))
WSP_SHIM_UNARY(Abs, std::fabs(x))
WSP_SHIM_UNARY(Relu, x > 0.0f ? x : 0.0f)
#undef WSP_SHIM_UNARY

template <typename T>
__aicore__ inline void Duplicate(const LocalTensor<T> &dstLocal, const T &scalarValue,
                                 const int32_t &calCount)
{
    static_assert(std::is_same<T, half>::value || std::is_same<T, int16_t>::value ||
                      std::is_same<T, uint16_t>::value || std::is_same<T, float>::value ||
                      std::is_same<T, int32_t>::value || std::is_same<T, uint32_t>::value,
                  "Duplicate: unsupported dtype");
    if (calCount < 0) ShimFail("Duplicate", "negative calCount");
    detail::VecOut(dstLocal, calCount, "Duplicate");
    for (int32_t i = 0; i < calCount; ++i) dstLocal.ptr_[i] = scalarValue;
    detail::VecDone(dstLocal, calCount);
}

// Copy, level 0, mask count mode: per repeat, the first `mask` elements of 8 blocks
template <typename T, bool isSetMask = true>
__aicore__ inline void Copy(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                            const uint64_t mask, const uint8_t repeatTimes,
                            const CopyRepeatParams &repeatParams)
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Copy: 16- and 32-bit types only");
    const char *api = "Copy";
    constexpr uint32_t perBlock = 32 / sizeof(T);
    if (mask < 1 || mask > 8 * perBlock) ShimFail(api, "mask out of range for the dtype");
    detail::CheckAligned(dstLocal.ptr_, api, "dstLocal");
    detail::CheckAligned(srcLocal.ptr_, api, "srcLocal");
    const CopyRepeatParams &p = repeatParams;
    auto at = [&](uint32_t r, uint32_t e, uint32_t blk, uint32_t rep) -> uint64_t {
        return ((uint64_t)r * rep + (uint64_t)(e / perBlock) * blk) * perBlock + e % perBlock;
    };
    for (uint32_t r = 0; r < repeatTimes; ++r)
        for (uint32_t e = 0; e < mask; ++e) {
            uint64_t s = at(r, e, p.srcStride, p.srcRepeatSize);
            if (s >= srcLocal.size_) ShimFail(api, "srcLocal: a repeat runs past the tensor");
            detail::Read(srcLocal.ptr_ + s, sizeof(T), detail::P_V, api);
        }
    for (uint32_t r = 0; r < repeatTimes; ++r)
        for (uint32_t e = 0; e < mask; ++e) {
            uint64_t s = at(r, e, p.srcStride, p.srcRepeatSize);
            uint64_t d = at(r, e, p.dstStride, p.dstRepeatSize);
            if (d >= dstLocal.size_) ShimFail(api, "dstLocal: a repeat runs past the tensor");
            dstLocal.ptr_[d] = srcLocal.ptr_[s];
            detail::Write(dstLocal.ptr_ + d, sizeof(T), detail::P_V);
        }
}

// CreateVecIndex, level 2: dst[i] = firstValue + i for the first `count` elements (int16_t,
// half, int32_t, float on A2; half arithmetic is not modelled, so not half)
template <typename T>
__aicore__ inline void CreateVecIndex(LocalTensor<T> dst, const T &firstValue, uint32_t count)
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, int32_t>::value ||
                      std::is_same<T, int16_t>::value,
                  "CreateVecIndex: int16_t / int32_t / float are modelled (A2 also has half)");
    detail::VecOut(dst, count, "CreateVecIndex");
    for (uint32_t i = 0; i < count; ++i) dst.ptr_[i] = (T)(firstValue + (T)i);
    detail::VecDone(dst, count);
}

// Gather, level 2: dst[i] = the element of src that starts srcBaseOffset + srcOffset[i] BYTES
// past src's start, for the first `count` elements. As documented for A2 / A3: T is a 16- or
// 32-bit type (no 8- or 64-bit form), dst, src and srcOffset start 32-byte aligned, every
// offset is a multiple of sizeof(T) (the device reads a wrong element otherwise). Stricter
// than the device, which reads any UB address: an offset past the src tensor fails here (it
// would read another buffer's bytes), and so does a dst overlapping src or srcOffset (the
// general overlap rule: only elementwise instructions may write over their operands).
template <typename T>
__aicore__ inline void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                              const LocalTensor<uint32_t> &srcOffset, const uint32_t srcBaseOffset,
                              const uint32_t count)
{
    static_assert(std::is_same<T, int16_t>::value || std::is_same<T, uint16_t>::value ||
                      std::is_same<T, int32_t>::value || std::is_same<T, uint32_t>::value ||
                      std::is_same<T, float>::value || std::is_same<T, half>::value ||
                      std::is_same<T, bfloat16_t>::value,
                  "Gather: A2 / A3 gather 16- and 32-bit types only");
    const char *api = "Gather";
    detail::CheckAligned(src.ptr_, api, "src");
    detail::VecIn(srcOffset, count, api, "srcOffset");
    detail::VecOut(dst, count, api);
    const uint8_t *d0 = reinterpret_cast<const uint8_t *>(dst.ptr_);
    const uint8_t *d1 = d0 + (size_t)count * sizeof(T);
    auto overlaps = [&](const void *p, size_t bytes) {
        const uint8_t *b = static_cast<const uint8_t *>(p);
        return b < d1 && d0 < b + bytes;
    };
    if (overlaps(src.ptr_, (size_t)src.size_ * sizeof(T)))
        ShimFail(api, "dst overlaps src (only elementwise instructions may write over an operand)");
    if (overlaps(srcOffset.ptr_, (size_t)count * 4))
        ShimFail(api, "dst overlaps srcOffset");
    std::vector<T> got(count);
    for (uint32_t i = 0; i < count; ++i) {
        const uint64_t at = (uint64_t)srcBaseOffset + srcOffset.ptr_[i];
        if (at % sizeof(T) != 0) {
            char msg[160];
            std::snprintf(msg, sizeof msg, "srcOffset[%u] + srcBaseOffset = %llu bytes is not a "
                          "multiple of sizeof(T) = %u", i, (unsigned long long)at, (unsigned)sizeof(T));
            ShimFail(api, msg);
        }
        if (at / sizeof(T) >= src.size_) {
            char msg[160];
            std::snprintf(msg, sizeof msg, "srcOffset[%u] + srcBaseOffset = %llu bytes runs past "
                          "src (%u elements)", i, (unsigned long long)at, src.size_);
            ShimFail(api, msg);
        }
        detail::Read(src.ptr_ + at / sizeof(T), sizeof(T), detail::P_V, api);
        got[i] = src.ptr_[at / sizeof(T)];
    }
    for (uint32_t i = 0; i < count; ++i) dst.ptr_[i] = got[i];
    detail::VecDone(dst, count);
}

// Cast: the conversions of the dav_c220 table that wspc uses, each with the round modes the
// device accepts for it
namespace detail {
inline float RoundF(float x, RoundMode m)
{
    switch (m) {
    case RoundMode::CAST_FLOOR: return std::floor(x);
    case RoundMode::CAST_CEIL: return std::ceil(x);
    case RoundMode::CAST_ROUND: return std::round(x);
    case RoundMode::CAST_TRUNC: return std::trunc(x);
    default: return std::nearbyint(x);  // RINT / NONE: to nearest even
    }
}
template <typename D, typename S> inline bool CastOne(D &d, S s, RoundMode m);
template <> inline bool CastOne<half, float>(half &d, float s, RoundMode m)
{
    if (m != RoundMode::CAST_RINT && m != RoundMode::CAST_NONE) return false;  // (others exist; not modelled)
    d = half(s);
    return true;
}
template <> inline bool CastOne<float, half>(float &d, half s, RoundMode m)
{
    if (m != RoundMode::CAST_NONE) return false;
    d = (float)s;
    return true;
}
template <> inline bool CastOne<bfloat16_t, float>(bfloat16_t &d, float s, RoundMode m)
{
    if (m != RoundMode::CAST_RINT) return false;  // CAST_NONE is rejected by the device
    d = bfloat16_t(s);
    return true;
}
template <> inline bool CastOne<float, bfloat16_t>(float &d, bfloat16_t s, RoundMode m)
{
    if (m != RoundMode::CAST_NONE) return false;
    d = (float)s;
    return true;
}
template <> inline bool CastOne<half, uint8_t>(half &d, uint8_t s, RoundMode m)
{
    if (m != RoundMode::CAST_NONE) return false;
    d = half((float)s);
    return true;
}
template <> inline bool CastOne<uint8_t, half>(uint8_t &d, half s, RoundMode m)
{
    if (m == RoundMode::CAST_ODD) return false;
    float v = (float)s;
    v = (v != v) ? 0.0f : RoundF(v, m);
    d = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);  // saturates
    return true;
}
// int16_t -> half: exact up to 2048 in magnitude, rounded to nearest even past it (CAST_NONE
// means CAST_RINT where the conversion loses precision)
template <> inline bool CastOne<half, int16_t>(half &d, int16_t s, RoundMode m)
{
    if (m != RoundMode::CAST_NONE && m != RoundMode::CAST_RINT) return false;
    d = half((float)s);
    return true;
}
template <> inline bool CastOne<half, int8_t>(half &d, int8_t s, RoundMode m)
{
    if (m != RoundMode::CAST_NONE) return false;
    d = half((float)s);
    return true;
}
template <> inline bool CastOne<int8_t, half>(int8_t &d, half s, RoundMode m)
{
    if (m == RoundMode::CAST_ODD) return false;
    float v = (float)s;
    v = (v != v) ? 0.0f : RoundF(v, m);
    d = (int8_t)(v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v);  // saturates
    return true;
}
// float -> int32_t: rounded as the mode says (CAST_NONE is rejected, as for every float ->
// integer cast), saturated; NaN gives 0 (not documented: a kernel must not rely on it)
template <> inline bool CastOne<int32_t, float>(int32_t &d, float s, RoundMode m)
{
    if (m == RoundMode::CAST_NONE || m == RoundMode::CAST_ODD) return false;
    double v = (s != s) ? 0.0 : (double)RoundF(s, m);
    d = (int32_t)(v < -2147483648.0 ? -2147483648.0 : v > 2147483647.0 ? 2147483647.0 : v);
    return true;
}
template <> inline bool CastOne<float, int32_t>(float &d, int32_t s, RoundMode m)
{
    if (m == RoundMode::CAST_ODD) return false;
    d = (float)s;  // round to nearest even (directed modes differ only past 2^24; not modelled)
    return true;
}
}  // namespace detail

template <typename T1, typename T2>
__aicore__ inline void Cast(const LocalTensor<T1> &dstLocal, const LocalTensor<T2> &srcLocal,
                            const RoundMode &round_mode, const uint32_t calCount)
{
    detail::VecIn(srcLocal, calCount, "Cast", "srcLocal");
    detail::VecOut(dstLocal, calCount, "Cast");
    for (uint32_t i = 0; i < calCount; ++i)
        if (!detail::CastOne<T1, T2>(dstLocal.ptr_[i], srcLocal.ptr_[i], round_mode))
            ShimFail("Cast", "this round mode is not supported for this pair of dtypes");
    detail::VecDone(dstLocal, calCount);
}

// Compare, level 2: one result bit per element (bit i of byte i/8), on whole 256-byte repeats
template <typename T, typename U>
__aicore__ inline void Compare(const LocalTensor<U> &dstLocal, const LocalTensor<T> &src0Local,
                               const LocalTensor<T> &src1Local, CMPMODE cmpMode, uint32_t calCount)
{
    static_assert(std::is_same<T, float>::value, "Compare: only float is modelled");
    static_assert(std::is_same<U, uint8_t>::value, "Compare: the result is a uint8_t bit mask");
    const char *api = "Compare";
    if ((calCount * sizeof(T)) % 256 != 0)
        ShimFail(api, "calCount * sizeof(T) must be a multiple of 256 bytes (whole repeats; the "
                      "device silently drops the rest)");
    detail::VecIn(src0Local, calCount, api, "src0Local");
    detail::VecIn(src1Local, calCount, api, "src1Local");
    detail::VecOut(dstLocal, calCount / 8, api);
    for (uint32_t i = 0; i < calCount; i += 8) {
        uint8_t byte = 0;
        for (uint32_t k = 0; k < 8; ++k) {
            T a = src0Local.ptr_[i + k], b = src1Local.ptr_[i + k];
            bool r = false;
            switch (cmpMode) {
            case CMPMODE::LT: r = a < b; break;
            case CMPMODE::GT: r = a > b; break;
            case CMPMODE::EQ: r = a == b; break;
            case CMPMODE::LE: r = a <= b; break;
            case CMPMODE::GE: r = a >= b; break;
            case CMPMODE::NE: r = a != b; break;
            }
            byte |= (uint8_t)((r ? 1u : 0u) << k);
        }
        dstLocal.ptr_[i / 8] = byte;
    }
    detail::VecDone(dstLocal, calCount / 8);
}

// Select, level 2: dst[i] = bit i of selMask ? src0[i] : src1[i] (or the scalar src1)
template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T> &dstLocal, const LocalTensor<U> &selMask,
                              const LocalTensor<T> &src0Local, const LocalTensor<T> &src1Local,
                              SELMODE selMode, uint32_t calCount)
{
    static_assert(std::is_same<T, float>::value, "Select: only float is modelled");
    static_assert(std::is_same<U, uint8_t>::value, "Select: the mask is a uint8_t bit mask");
    const char *api = "Select";
    if (selMode != SELMODE::VSEL_TENSOR_TENSOR_MODE) ShimFail(api, "tensor-tensor needs mode 2");
    detail::ApiScratch();
    detail::VecIn(selMask, (calCount + 7) / 8, api, "selMask");
    detail::VecIn(src0Local, calCount, api, "src0Local");
    detail::VecIn(src1Local, calCount, api, "src1Local");
    detail::VecOut(dstLocal, calCount, api);
    for (uint32_t i = 0; i < calCount; ++i)
        dstLocal.ptr_[i] = ((selMask.ptr_[i / 8] >> (i % 8)) & 1u) ? src0Local.ptr_[i] : src1Local.ptr_[i];
    detail::VecDone(dstLocal, calCount);
}

template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T> &dstLocal, const LocalTensor<U> &selMask,
                              const LocalTensor<T> &src0Local, T src1Local, SELMODE selMode,
                              uint32_t calCount)
{
    static_assert(std::is_same<T, float>::value, "Select: only float is modelled");
    static_assert(std::is_same<U, uint8_t>::value, "Select: the mask is a uint8_t bit mask");
    const char *api = "Select";
    if (selMode != SELMODE::VSEL_TENSOR_SCALAR_MODE) ShimFail(api, "tensor-scalar needs mode 1");
    detail::ApiScratch();
    detail::VecIn(selMask, (calCount + 7) / 8, api, "selMask");
    detail::VecIn(src0Local, calCount, api, "src0Local");
    detail::VecOut(dstLocal, calCount, api);
    for (uint32_t i = 0; i < calCount; ++i)
        dstLocal.ptr_[i] = ((selMask.ptr_[i / 8] >> (i % 8)) & 1u) ? src0Local.ptr_[i] : src1Local;
    detail::VecDone(dstLocal, calCount);
}

// ReduceSum / ReduceMax / ReduceMin, level 2: dst[0] = the reduction of the first count
// elements; workLocal must hold the first pass rounded up to a 32-byte block: one value per
// 256-byte repeat for ReduceSum, a value and its index per repeat for ReduceMax / ReduceMin
// (the documentation's "iter1OutputCount = firstMaxRepeat * 2", whether or not calIndex). On A2 the sum is a binary tree within each repeat and the repeats' sums
// are added in sequence ("method 2" of the documentation).
namespace detail {
template <typename T>
inline void ReduceCheck(const char *api, const LocalTensor<T> &d, const LocalTensor<T> &s,
                        const LocalTensor<T> &w, int32_t count, int32_t perRepeatOut = 1)
{
    static_assert(std::is_same<T, float>::value, "Reduce*: only float is modelled");
    if (count < 1) ShimFail(api, "count must be positive");
    int32_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    int32_t first = (count + perRepeat - 1) / perRepeat * perRepeatOut;
    int32_t need = (first + perBlock - 1) / perBlock * perBlock;
    if ((int64_t)w.size_ < need) ShimFail(api, "workLocal is smaller than the documented minimum");
    VecIn(s, count, api, "srcLocal");
    CheckAligned(w.ptr_, api, "workLocal");
    VecOut(d, 1, api);
}
template <typename T> inline T Tree(const T *x, int32_t n, T (*f)(T, T), T zero)
{
    T lanes[64];
    for (int32_t i = 0; i < 64; ++i) lanes[i] = i < n ? x[i] : zero;
    for (int32_t w = 32; w >= 1; w /= 2)
        for (int32_t i = 0; i < w; ++i) lanes[i] = f(lanes[2 * i], lanes[2 * i + 1]);
    return lanes[0];
}
}  // namespace detail

template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceSum(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal,
                                 const LocalTensor<T> &workLocal, const int32_t count)
{
    detail::ReduceCheck("ReduceSum", dstLocal, srcLocal, workLocal, count);
    auto add = [](T a, T b) -> T { return a + b; };
    T acc = 0;
    for (int32_t r = 0; r * 64 < count; ++r) {
        int32_t n = count - r * 64 < 64 ? count - r * 64 : 64;
        T part = detail::Tree<T>(srcLocal.ptr_ + r * 64, n, add, (T)0);
        acc = r == 0 ? part : acc + part;
    }
    dstLocal.ptr_[0] = acc;
    detail::Garbage(workLocal.ptr_, sizeof(T) * 8);
    detail::VecDone(dstLocal, 1);
    detail::VecDone(workLocal, 8);
}

#define WSP_SHIM_REDUCE(NAME, F)                                                             \
    template <typename T>                                                                    \
    __aicore__ inline void NAME(const LocalTensor<T> &dstLocal, const LocalTensor<T> &srcLocal, \
                                const LocalTensor<T> &workLocal, const int32_t count,        \
                                bool calIndex = 0)                                           \
    {                                                                                        \
        detail::ReduceCheck(#NAME, dstLocal, srcLocal, workLocal, count, 2);                 \
        if (calIndex) ShimFail(#NAME, "calIndex is not modelled");                           \
        T acc = srcLocal.ptr_[0];                                                            \
        for (int32_t i = 1; i < count; ++i) acc = F(acc, srcLocal.ptr_[i]);                  \
        dstLocal.ptr_[0] = acc;                                                              \
        detail::Garbage(workLocal.ptr_, sizeof(T) * 8);                                      \
        detail::VecDone(dstLocal, 1);                                                        \
        detail::VecDone(workLocal, 8);                                                       \
    }
WSP_SHIM_REDUCE(ReduceMax, detail::FMax)
WSP_SHIM_REDUCE(ReduceMin, detail::FMin)
#undef WSP_SHIM_REDUCE

// ReduceRepeat (WholeReduceSum / WholeReduceMax / WholeReduceMin up to CANN 9.0), level 0,
// mask count mode: repeat r reduces the first `mask` elements of its 8 blocks (blocks
// srcBlkStride apart, repeats srcRepStride blocks apart) to one value written at
// dst[r * dstRepStride]. As documented (ReduceRepeat page of asc-devkit): repeatTime in
// [0, 255], mask in [1, 64] for float (0 or repeatTime 0: nothing happens), the strides in
// [0, 65535], src 32-byte aligned, dst 4-byte aligned for SUM and ORDER_ONLY_VALUE (8 for the
// orders that write an index, which wspc never asks for and the model refuses). A sum is a
// binary tree within the repeat (as ReduceSum's); MAX / MIN use the documented select, so NaN
// does not propagate (a kernel must see to it, as for Max / Min).
enum class ReduceType { SUM, MAX, MIN };
enum class ReduceOrder { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
__aicore__ inline void ReduceRepeat(const LocalTensor<T> &dst, const LocalTensor<U> &src,
                                    const int32_t mask, const int32_t repeatTime,
                                    const int32_t dstRepStride, const int32_t srcBlkStride,
                                    const int32_t srcRepStride,
                                    ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX)
{
    static_assert(std::is_same<T, float>::value && std::is_same<U, float>::value,
                  "ReduceRepeat: only float is modelled (A2: dst and src of one type)");
    const char *api = "ReduceRepeat";
    if (repeatTime < 0 || repeatTime > 255) ShimFail(api, "repeatTime outside [0, 255]");
    if (mask < 0 || mask > 64) ShimFail(api, "mask outside [1, 64] for float");
    for (int32_t s : {dstRepStride, srcBlkStride, srcRepStride})
        if (s < 0 || s > 65535) ShimFail(api, "a stride outside [0, 65535]");
    if (reduceType != ReduceType::SUM && order != ReduceOrder::ORDER_ONLY_VALUE)
        ShimFail(api, "only ORDER_ONLY_VALUE is modelled for MAX / MIN");
    detail::CheckAligned(src.ptr_, api, "src");
    if ((uintptr_t)dst.ptr_ % 4) ShimFail(api, "dst is not 4-byte aligned");
    if (mask == 0 || repeatTime == 0) return;  // a NOP, as documented for A2
    auto at = [&](int32_t r, int32_t e) -> uint64_t {
        return ((uint64_t)r * srcRepStride + (uint64_t)(e / 8) * srcBlkStride) * 8 + e % 8;
    };
    float out[255];
    for (int32_t r = 0; r < repeatTime; ++r) {
        float lanes[64];
        for (int32_t e = 0; e < mask; ++e) {
            uint64_t s = at(r, e);
            if (s >= src.size_) ShimFail(api, "src: a repeat runs past the tensor");
            detail::Read(src.ptr_ + s, 4, detail::P_V, api);
            lanes[e] = src.ptr_[s];
        }
        if (reduceType == ReduceType::SUM) {
            out[r] = detail::Tree<float>(lanes, mask, [](float a, float b) { return a + b; }, 0.0f);
        } else {
            float acc = lanes[0];
            for (int32_t e = 1; e < mask; ++e)
                acc = reduceType == ReduceType::MAX ? detail::FMax(acc, lanes[e])
                                                    : detail::FMin(acc, lanes[e]);
            out[r] = acc;
        }
    }
    for (int32_t r = 0; r < repeatTime; ++r) {
        uint64_t d = (uint64_t)r * dstRepStride;
        if (d >= dst.size_) ShimFail(api, "dst: a repeat runs past the tensor");
        dst.ptr_[d] = out[r];
        detail::Write(dst.ptr_ + d, 4, detail::P_V);
    }
}

// Brcb, level 0: repeat r takes the 8 elements src[8r .. 8r + 7] and fills 32-byte block j of
// the repeat (dstBlkStride blocks apart, 0 meaning 1; repeats dstRepStride blocks apart) with
// element j. As documented: repeatTime in [0, 255], src and dst 32-byte aligned and not the
// same memory.
struct BrcbRepeatParams {
    BrcbRepeatParams() {}
    BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn) {}
    uint16_t dstRepStride = 8;
    uint16_t dstBlkStride = 1;
};

template <typename T>
__aicore__ inline void Brcb(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                            const uint8_t repeatTime, const BrcbRepeatParams &repeatParams)
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb: 16- and 32-bit types only");
    const char *api = "Brcb";
    constexpr uint32_t perBlock = 32 / sizeof(T);
    detail::CheckAligned(dst.ptr_, api, "dst");
    detail::CheckAligned(src0.ptr_, api, "src0");
    if (dst.ptr_ == src0.ptr_) ShimFail(api, "src0 and dst are the same memory");
    detail::VecIn(src0, 8u * repeatTime, api, "src0");
    const uint64_t blk = repeatParams.dstBlkStride ? repeatParams.dstBlkStride : 1;
    for (uint32_t r = 0; r < repeatTime; ++r)
        for (uint32_t j = 0; j < 8; ++j) {
            uint64_t d = ((uint64_t)r * repeatParams.dstRepStride + j * blk) * perBlock;
            if (d + perBlock > dst.size_) ShimFail(api, "dst: a repeat runs past the tensor");
            for (uint32_t e = 0; e < perBlock; ++e) dst.ptr_[d + e] = src0.ptr_[8 * r + j];
            detail::Write(dst.ptr_ + d, 32, detail::P_V);
        }
}

// Sort32 (dav-2201 and later): each repeat sorts the 32 scores src0[32r .. 32r + 31] with their
// uint32 indices src1[32r ..], the greatest first, into 32 (score, index) pairs of 8 bytes at
// dst + 256r bytes: a float score in the low 4 bytes, a half score in the low 2 (2 reserved),
// the index in the high 4. As documented: T half or float, repeatTime in [0, 255], every
// operand 32-byte aligned, equal scores in their input order (the lower position first), no
// order between repeats. What the documentation does not state is refused, so a kernel cannot
// depend on it: a NaN score, and +0 and -0 in the same repeat (their order is not stated).
template <typename T>
__aicore__ inline void Sort32(const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                              const LocalTensor<uint32_t> &src1, const int32_t repeatTime)
{
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value,
                  "Sort32: half and float scores only");
    const char *api = "Sort32";
    if (repeatTime < 0 || repeatTime > 255) ShimFail(api, "repeatTime out of [0, 255]");
    const uint32_t n = 32u * (uint32_t)repeatTime;
    detail::VecIn(src0, n, api, "src0");
    detail::VecIn(src1, n, api, "src1");
    detail::CheckAligned(dst.ptr_, api, "dst");
    const uint64_t bytes = 8ull * n;
    if (bytes > (uint64_t)dst.size_ * sizeof(T)) ShimFail(api, "dst: the pairs run past the tensor");
    const uint8_t *d0 = reinterpret_cast<const uint8_t *>(dst.ptr_);
    const uint8_t *a0 = reinterpret_cast<const uint8_t *>(src0.ptr_);
    const uint8_t *b0 = reinterpret_cast<const uint8_t *>(src1.ptr_);
    if ((d0 < a0 + n * sizeof(T) && a0 < d0 + bytes) || (d0 < b0 + 4ull * n && b0 < d0 + bytes))
        ShimFail(api, "dst overlaps a source");
    std::vector<uint8_t> out(bytes, 0);
    for (uint32_t r = 0; r < (uint32_t)repeatTime; ++r) {
        float key[32];
        bool pos0 = false, neg0 = false;
        for (uint32_t e = 0; e < 32; ++e) {
            key[e] = (float)src0.ptr_[32 * r + e];
            if (key[e] != key[e]) ShimFail(api, "a NaN score: its order is not documented");
            if (key[e] == 0.0f) (std::signbit(key[e]) ? neg0 : pos0) = true;
        }
        if (pos0 && neg0) ShimFail(api, "+0 and -0 in one repeat: their order is not documented");
        uint32_t ord[32];
        for (uint32_t e = 0; e < 32; ++e) ord[e] = e;
        std::stable_sort(ord, ord + 32, [&](uint32_t x, uint32_t y) { return key[x] > key[y]; });
        for (uint32_t e = 0; e < 32; ++e) {
            uint8_t *pair = out.data() + 256ull * r + 8ull * e;
            std::memcpy(pair, &src0.ptr_[32 * r + ord[e]], sizeof(T));
            std::memcpy(pair + 4, &src1.ptr_[32 * r + ord[e]], 4);
        }
    }
    std::memcpy(dst.ptr_, out.data(), bytes);
    detail::Write(dst.ptr_, bytes, detail::P_V);
}

// MrgSort (dav-2201, the MrgSort4Info form): merges 2 to 4 lists of (score, index) pairs as
// Sort32 writes them, each sorted greatest first, into one list greatest first at dst. As
// documented: T half or float, dst 32-byte aligned, the lists 8-byte aligned, validBit 0b11,
// 0b111 or 0b1111 (the first 2, 3 or 4 lists), elementLengths in [0, 4095]. Modelled: one
// repeat, no exhausted suspension (others refused). The documentation states no order between
// equal scores of different lists: this model takes the LATER list's first, so a kernel that
// relied on the earlier list's coming first would fail here. Refused as misuse: a list that is
// not sorted greatest first, a NaN score, dst over a list.
constexpr int32_t MRG_SORT_ELEMENT_LEN = 4;  // a constant of impl/ in the real headers
struct MrgSort4Info {
    MrgSort4Info() {}
    MrgSort4Info(const uint16_t elementLengthsIn[MRG_SORT_ELEMENT_LEN], const bool ifExhaustedSuspensionIn,
                 const uint16_t validBitIn, const uint16_t repeatTimesIn)
        : ifExhaustedSuspension(ifExhaustedSuspensionIn), validBit(validBitIn),
          repeatTimes((uint8_t)repeatTimesIn)
    {
        for (int32_t i = 0; i < MRG_SORT_ELEMENT_LEN; ++i) elementLengths[i] = elementLengthsIn[i];
    }
    uint16_t elementLengths[MRG_SORT_ELEMENT_LEN] = {0};
    bool ifExhaustedSuspension = false;
    uint16_t validBit = 0;
    uint8_t repeatTimes = 1;
};

template <typename T>
struct MrgSortSrcList {
    MrgSortSrcList() {}
    MrgSortSrcList(const LocalTensor<T> &src1In, const LocalTensor<T> &src2In,
                   const LocalTensor<T> &src3In, const LocalTensor<T> &src4In)
        : src1(src1In), src2(src2In), src3(src3In), src4(src4In) {}
    LocalTensor<T> src1;
    LocalTensor<T> src2;
    LocalTensor<T> src3;
    LocalTensor<T> src4;
};

template <typename T>
__aicore__ inline void MrgSort(const LocalTensor<T> &dst, const MrgSortSrcList<T> &src,
                               const MrgSort4Info &params)
{
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value,
                  "MrgSort: half and float scores only");
    const char *api = "MrgSort";
    int lists = params.validBit == 3 ? 2 : params.validBit == 7 ? 3 : params.validBit == 15 ? 4 : 0;
    if (!lists) ShimFail(api, "validBit is not 0b11, 0b111 or 0b1111");
    if (params.repeatTimes != 1) ShimFail(api, "only repeatTimes 1 is modelled");
    if (params.ifExhaustedSuspension) ShimFail(api, "exhausted suspension is not modelled");
    detail::CheckAligned(dst.ptr_, api, "dst");
    const LocalTensor<T> *ls[4] = {&src.src1, &src.src2, &src.src3, &src.src4};
    const uint32_t perPair = 8 / sizeof(T);
    uint64_t total = 0;
    const uint8_t *d0 = reinterpret_cast<const uint8_t *>(dst.ptr_);
    for (int q = 0; q < lists; ++q) {
        if (params.elementLengths[q] > 4095) ShimFail(api, "a list longer than 4095");
        total += params.elementLengths[q];
    }
    if (8 * total > (uint64_t)dst.size_ * sizeof(T)) ShimFail(api, "dst: the pairs run past the tensor");
    for (int q = 0; q < lists; ++q) {
        const uint32_t len = params.elementLengths[q];
        const uint8_t *p = reinterpret_cast<const uint8_t *>(ls[q]->ptr_);
        if (detail::InUb(p) && detail::UbOffset(p) % 8 != 0) ShimFail(api, "a list is not 8-byte aligned");
        if ((uint64_t)len * perPair > ls[q]->size_) ShimFail(api, "a list runs past its tensor");
        if (d0 < p + 8ull * len && p < d0 + 8 * total) ShimFail(api, "dst overlaps a list");
        detail::Read(p, 8ull * len, detail::P_V, api);
    }
    auto score = [&](int q, uint32_t e) {
        float f = (float)ls[q]->ptr_[e * perPair];
        if (f != f) ShimFail("MrgSort", "a NaN score: its order is not documented");
        return f;
    };
    for (int q = 0; q < lists; ++q)
        for (uint32_t e = 1; e < params.elementLengths[q]; ++e)
            if (score(q, e) > score(q, e - 1)) ShimFail(api, "a list is not sorted greatest first");
    std::vector<uint8_t> out(8 * total);
    uint32_t at[4] = {0, 0, 0, 0};
    for (uint64_t o = 0; o < total; ++o) {
        int best = -1;
        for (int q = lists - 1; q >= 0; --q)  // ties: the later list first (see above)
            if (at[q] < params.elementLengths[q] &&
                (best < 0 || score(q, at[q]) > score(best, at[best])))
                best = q;
        std::memcpy(out.data() + 8 * o, ls[best]->ptr_ + at[best] * perPair, 8);
        ++at[best];
    }
    std::memcpy(dst.ptr_, out.data(), out.size());
    detail::Write(dst.ptr_, out.size(), detail::P_V);
}

// ------------------------------------------------------------------------------------------
// advanced math (adv_api/math): the caller passes the temporary space. The real minimum comes
// from GetXxxMaxMinTmpSize on the host; the model asks for at least 1 KiB.

namespace detail {
template <typename T>
inline void AdvCheck(const char *api, const LocalTensor<T> &d, const LocalTensor<T> &s,
                     const LocalTensor<uint8_t> &tmp, uint32_t n)
{
    static_assert(std::is_same<T, float>::value, "only float is modelled");
    VecIn(s, n, api, "srcTensor");
    VecOut(d, n, api);
    CheckAligned(tmp.ptr_, api, "sharedTmpBuffer");
    if (tmp.size_ < 1024) ShimFail(api, "sharedTmpBuffer below the modelled minimum of 1 KiB");
    const uint8_t *t0 = tmp.ptr_, *t1 = tmp.ptr_ + tmp.size_;
    const uint8_t *d0 = reinterpret_cast<const uint8_t *>(d.ptr_);
    const uint8_t *s0 = reinterpret_cast<const uint8_t *>(s.ptr_);
    if ((d0 < t1 && d0 + n * sizeof(T) > t0) || (s0 < t1 && s0 + n * sizeof(T) > t0))
        ShimFail(api, "sharedTmpBuffer overlaps an operand");
    if (d0 != s0 && d0 < s0 + n * sizeof(T) && s0 < d0 + n * sizeof(T))
        ShimFail(api, "source and destination overlap");
}
}  // namespace detail

#define WSP_SHIM_ADV(NAME, EXPR)                                                             \
    template <typename T, bool isReuseSource = false>                                        \
    __aicore__ inline void NAME(const LocalTensor<T> &dstTensor, const LocalTensor<T> &srcTensor, \
                                const LocalTensor<uint8_t> &sharedTmpBuffer, const uint32_t calCount) \
    {                                                                                        \
        detail::AdvCheck(#NAME, dstTensor, srcTensor, sharedTmpBuffer, calCount);            \
        for (uint32_t i = 0; i < calCount; ++i) {                                            \
            T x = srcTensor.ptr_[i];                                                         \
            dstTensor.ptr_[i] = EXPR;                                                        \
        }                                                                                    \
        detail::Garbage(sharedTmpBuffer.ptr_, sharedTmpBuffer.size_);                        \
        detail::VecDone(dstTensor, calCount);                                                \
        detail::VecDone(sharedTmpBuffer, sharedTmpBuffer.size_);                             \
    }
WSP_SHIM_ADV(Tanh, std::tanh(x))
WSP_SHIM_ADV(Sin, std::sin(x))
WSP_SHIM_ADV(Cos, std::cos(x))
#undef WSP_SHIM_ADV

template <typename T, bool isReuseSource = false>
__aicore__ inline void Power(const LocalTensor<T> &dstTensor, const LocalTensor<T> &src0Tensor,
                             const T &src1Scalar, const LocalTensor<uint8_t> &sharedTmpBuffer,
                             uint32_t calCount)
{
    detail::AdvCheck("Power", dstTensor, src0Tensor, sharedTmpBuffer, calCount);
    for (uint32_t i = 0; i < calCount; ++i) dstTensor.ptr_[i] = std::pow(src0Tensor.ptr_[i], src1Scalar);
    detail::Garbage(sharedTmpBuffer.ptr_, sharedTmpBuffer.size_);
    detail::VecDone(dstTensor, calCount);
    detail::VecDone(sharedTmpBuffer, sharedTmpBuffer.size_);
}

// ------------------------------------------------------------------------------------------
// the cube unit (an AIC core of dav-2201): GM -> L1 (ND -> NZ), L1 -> L0A / L0B (fractals),
// Mmad into L0C, Fixpipe L0C -> GM. Layouts, with C0 = 32 / sizeof(T) elements (16 for
// f16 / bf16, 8 for f32) and fractals of 16 rows x C0 (512 bytes):
// - NZ (L1, as Nd2Nz writes it): column block j of C0 columns holds every row in turn, row r of
//   it at (j * dstNzC0Stride + r * dstNzNStride) * C0;
// - ZZ (L0A): fractal (i, j) of A (rows 16 i.., columns C0 j..) at (i * kF + j) * 512 bytes,
//   row-major inside;
// - ZN (L0B): fractal (j, i) of B (rows C0 j.., columns 16 i..) at (j * nF + i) * 512 bytes,
//   column-major inside (16 columns of C0 consecutive k);
// - NZ (L0C): element (r, c) of C at ((c / 16) * mF * 16 + r) * 16 + c % 16, mF = ceil(m / 16).

enum QuantMode_t { NoQuant = 0, F322F16 = 1, F322BF16 = 16 };
enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
struct FixpipeConfig {
    CO2Layout format;
    __aicore__ constexpr inline FixpipeConfig(CO2Layout format_, bool isToUB_) : format(format_), isToUB(isToUB_) {}
    bool isToUB;
};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR, false};

struct Nd2NzParams {
    __aicore__ Nd2NzParams() {}
    __aicore__ Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
                           const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn,
                           const uint16_t dstNzC0StrideIn, const uint16_t dstNzNStrideIn,
                           const uint16_t dstNzMatrixStrideIn)
        : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn), srcNdMatrixStride(srcNdMatrixStrideIn),
          srcDValue(srcDValueIn), dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn) {}
    uint16_t ndNum = 0;
    uint16_t nValue = 0;
    uint16_t dValue = 0;
    uint16_t srcNdMatrixStride = 0;
    uint16_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint16_t dstNzMatrixStride = 0;
};

struct LoadData2DParams {
    __aicore__ LoadData2DParams() {}
    __aicore__ LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn,
                                const uint16_t srcStrideIn, const uint8_t sidIn, const uint16_t dstGapIn,
                                const bool ifTransposeIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn), ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};

struct LoadData2dTransposeParams {
    __aicore__ LoadData2dTransposeParams() {}
    __aicore__ LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn,
                                         const uint16_t srcStrideIn, const uint16_t dstGapIn,
                                         const uint16_t dstfracGapIn)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstfracGapIn) {}
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
};

struct MmadParams {
    __aicore__ MmadParams() {}
    __aicore__ MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
                          const bool cmatrixSourceIn, const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn),
          cmatrixInitVal(cmatrixInitValIn) {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
};

struct FixpipeParamsV220 {
    __aicore__ FixpipeParamsV220() {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

template <typename T>
struct InitConstValueParams {
    __aicore__ InitConstValueParams() {}
    __aicore__ InitConstValueParams(const uint16_t repeatTimesIn, const uint16_t blockNumIn,
                                    const uint16_t dstGapIn, const T initValueIn)
        : repeatTimes(repeatTimesIn), blockNum(blockNumIn), dstGap(dstGapIn), initValue(initValueIn) {}
    uint16_t repeatTimes = 0;
    uint16_t blockNum = 0;
    uint16_t dstGap = 0;
    T initValue = 0;
};

template <typename T> using PrimT = T;
namespace Std {
using std::enable_if;
using std::is_same;
}

namespace detail {
// a cube API: refused in a kernel declared KERNEL_TYPE_AIV_ONLY (vector cores have no cube)
inline void CubeCore(const char *api)
{
    if (core().ktype == (int)KERNEL_TYPE_AIV_ONLY)
        ShimFail(api, "a cube instruction in a KERNEL_TYPE_AIV_ONLY kernel (the vector cores have no cube)");
}
inline void CubeFail(const char *api, const char *fmt, long a = 0, long b = 0)
{
    char msg[240];
    std::snprintf(msg, sizeof msg, fmt, a, b);
    ShimFail(api, msg);
}
// tensor `t` lies in memory `mem`, `bytes` long from its start, starting `align`-byte aligned
template <typename T>
inline void CubeOperand(const char *api, const LocalTensor<T> &t, int mem, uint64_t bytes, uint32_t align,
                        const char *what)
{
    const int m = MemOf(t.ptr_);
    if (m != mem) {
        char msg[200];
        std::snprintf(msg, sizeof msg, "%s must be in %s, not %s", what, MemName(mem),
                      m == NMEMS ? "outside the core" : MemName(m));
        ShimFail(api, msg);
    }
    const uint32_t off = UbOffset(t.ptr_) - MEM_AT[mem];
    if (off % align != 0) {
        char msg[200];
        std::snprintf(msg, sizeof msg, "%s starts at %s offset %u, which is not %u-byte aligned%s", what,
                      MemName(mem), off, align, align == 512 ? " (a whole 512-byte fractal)" : "");
        ShimFail(api, msg);
    }
    if (bytes > (uint64_t)t.size_ * sizeof(T)) {
        char msg[200];
        std::snprintf(msg, sizeof msg, "%s: %llu bytes past its start run past the tensor (%llu bytes)", what,
                      (unsigned long long)bytes, (unsigned long long)t.size_ * sizeof(T));
        ShimFail(api, msg);
    }
}
template <typename T> constexpr uint32_t C0() { return 32u / (uint32_t)sizeof(T); }
template <typename T> inline float CubeIn(T v) { return (float)v; }
}  // namespace detail

// GM (ND, rows srcDValue elements apart) -> L1 (NZ): nValue rows of dValue elements per matrix
template <typename T>
__aicore__ inline void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const Nd2NzParams &intriParams)
{
    const char *api = "DataCopy (Nd2Nz)";
    detail::CubeCore(api);
    const Nd2NzParams &p = intriParams;
    constexpr uint32_t c0 = detail::C0<T>();
    if (p.ndNum < 1) ShimFail(api, "ndNum must be at least 1");
    if (p.dValue > p.srcDValue && p.nValue > 1) ShimFail(api, "dValue is larger than srcDValue (the row stride)");
    if (p.dstNzC0Stride < p.nValue) ShimFail(api, "dstNzC0Stride is smaller than nValue: column blocks overlap");
    const uint32_t blocks = (p.dValue + c0 - 1) / c0;
    uint64_t last = 0;
    for (uint32_t m = 0; m < p.ndNum; ++m)
        for (uint32_t r = 0; r < p.nValue; ++r)
            detail::MixGm(src.ptr_ + (uint64_t)m * p.srcNdMatrixStride + (uint64_t)r * p.srcDValue,
                          (size_t)p.dValue * sizeof(T), false, detail::P_MTE2, api);
    for (uint32_t m = 0; m < p.ndNum; ++m)
        for (uint32_t r = 0; r < p.nValue; ++r)
            for (uint32_t c = 0; c < p.dValue; ++c) {
                const uint64_t g = (uint64_t)m * p.srcNdMatrixStride + (uint64_t)r * p.srcDValue + c;
                const uint64_t l = (uint64_t)m * p.dstNzMatrixStride + ((uint64_t)(c / c0) * p.dstNzC0Stride
                                   + (uint64_t)r * p.dstNzNStride) * c0 + c % c0;
                if (g >= src.size_) ShimFail(api, "reads past the GlobalTensor");
                if (l + 1 > last) last = l + 1;
                if (l >= dst.size_) ShimFail(api, "writes past the L1 tensor");
                dst.ptr_[l] = src.ptr_[g];
            }
    (void)blocks;
    detail::CubeOperand(api, dst, detail::M_L1, last * sizeof(T), 32, "the destination");
    detail::Write(dst.ptr_, last * sizeof(T), detail::P_MTE2);
}

// L1 -> L0A / L0B: repeatTimes fractals of 512 bytes, the first startIndex fractals into src,
// srcStride fractals apart; in dst one after another with dstGap fractals between; with
// ifTranspose each 16 x 16 fractal (2-byte types) is transposed
template <typename T>
__aicore__ inline void LoadData(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LoadData2DParams &loadDataParams)
{
    const char *api = "LoadData (2D)";
    detail::CubeCore(api);
    const LoadData2DParams &p = loadDataParams;
    constexpr uint32_t fe = 512u / (uint32_t)sizeof(T);
    const int dm = detail::MemOf(dst.ptr_);
    if (dm != detail::M_L0A && dm != detail::M_L0B) ShimFail(api, "the destination must be in L0A or L0B");
    if (p.ifTranspose && sizeof(T) != 2) ShimFail(api, "ifTranspose transposes 16 x 16 fractals of 2-byte types only");
    if (p.repeatTimes == 0) ShimFail(api, "repeatTimes is 0");
    const uint64_t srcEnd = ((uint64_t)p.startIndex + (uint64_t)(p.repeatTimes - 1) * p.srcStride + 1) * 512u;
    const uint64_t dstEnd = ((uint64_t)(p.repeatTimes - 1) * (1u + p.dstGap) + 1) * 512u;
    detail::CubeOperand(api, src, detail::M_L1, srcEnd, 32, "the source");
    detail::CubeOperand(api, dst, dm, dstEnd, 512, "the destination");
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const T *s = src.ptr_ + ((uint64_t)p.startIndex + (uint64_t)i * p.srcStride) * fe;
        T *d = dst.ptr_ + (uint64_t)i * (1u + p.dstGap) * fe;
        detail::Read(s, 512, detail::P_MTE1, api);
        if (p.ifTranspose) {
            for (uint32_t r = 0; r < 16; ++r)
                for (uint32_t c = 0; c < 16; ++c) d[c * 16 + r] = s[r * 16 + c];
        } else {
            std::memcpy((void *)d, (const void *)s, 512);
        }
        detail::Write(d, 512, detail::P_MTE1);
    }
}

// L1 -> L0A / L0B transposing 4-byte data (the LoadDataWithTranspose page,
// atlasascendc_api_07_0239): each repeat joins two consecutive 16 x 8 fractals of the source
// side by side into a 16 x 16 square (the first its columns 0-7), transposes it and writes it
// as two 16 x 8 fractals (columns 0-7 of the transpose, then 8-15) dstFracGap fractals apart;
// srcStride counts squares (1024 bytes), dstGap the fractals between one repeat's first
// fractal and the next one's. Modelled for 4-byte types with startIndex 0 (the kernels offset
// the tensors instead), as wspc uses it; 2-byte types transpose through LoadData2DParams.
template <typename T>
__aicore__ inline void LoadDataWithTranspose(const LocalTensor<T> &dst, const LocalTensor<T> &src,
                                             const LoadData2dTransposeParams &loadDataParams)
{
    const char *api = "LoadDataWithTranspose";
    detail::CubeCore(api);
    const LoadData2dTransposeParams &p = loadDataParams;
    static_assert(sizeof(T) == 4, "LoadDataWithTranspose is modelled for 4-byte types only");
    const int dm = detail::MemOf(dst.ptr_);
    if (dm != detail::M_L0A && dm != detail::M_L0B) ShimFail(api, "the destination must be in L0A or L0B");
    if (p.startIndex != 0) ShimFail(api, "startIndex other than 0 is not modelled");
    if (p.repeatTimes == 0) ShimFail(api, "repeatTimes is 0");
    const uint64_t srcEnd = ((uint64_t)(p.repeatTimes - 1) * p.srcStride + 1) * 1024u;
    const uint64_t dstEnd = ((uint64_t)(p.repeatTimes - 1) * (1u + p.dstGap) + 2u + p.dstFracGap) * 512u;
    detail::CubeOperand(api, src, detail::M_L1, srcEnd, 32, "the source");
    detail::CubeOperand(api, dst, dm, dstEnd, 512, "the destination");
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const T *s = src.ptr_ + (uint64_t)i * p.srcStride * 256u;
        T *d0 = dst.ptr_ + (uint64_t)i * (1u + p.dstGap) * 128u;
        T *d1 = d0 + (uint64_t)(1u + p.dstFracGap) * 128u;
        detail::Read(s, 1024, detail::P_MTE1, api);
        T sq[16][16];
        for (uint32_t r = 0; r < 16; ++r)
            for (uint32_t c = 0; c < 16; ++c) sq[r][c] = s[(c / 8u) * 128u + r * 8u + c % 8u];
        for (uint32_t r = 0; r < 16; ++r)      // the transpose's row r ...
            for (uint32_t c = 0; c < 16; ++c)  // ... column c = the square's [c][r]
                (c < 8u ? d0 : d1)[r * 8u + c % 8u] = sq[c][r];
        detail::Write(d0, 512, detail::P_MTE1);
        detail::Write(d1, 512, detail::P_MTE1);
    }
}

// C (L0C, NZ, f32 or i32) = [C +] A (L0A, ZZ) @ B (L0B, ZN): m x k by k x n, in whole fractals
template <typename T, typename U, typename S>
__aicore__ inline void Mmad(const LocalTensor<T> &dst, const LocalTensor<U> &fm, const LocalTensor<S> &filter,
                            const MmadParams &mmadParams)
{
    const char *api = "Mmad";
    detail::CubeCore(api);
    static_assert((std::is_same<T, float>::value && std::is_same<U, S>::value &&
                   (std::is_same<U, half>::value || std::is_same<U, bfloat16_t>::value ||
                    std::is_same<U, float>::value)) ||
                  (std::is_same<T, int32_t>::value && std::is_same<U, int8_t>::value &&
                   std::is_same<S, int8_t>::value),
                  "Mmad on dav-2201: half x half, bfloat16_t x bfloat16_t, float x float -> float, int8 -> int32");
    const MmadParams &p = mmadParams;
    if (p.cmatrixSource) ShimFail(api, "cmatrixSource (a C matrix from the bias table) is not modelled");
    if (p.m == 0 || p.n == 0 || p.k == 0) ShimFail(api, "m, n and k must be at least 1");
    if (p.m > 4095 || p.n > 4095 || p.k > 4095) ShimFail(api, "m, n and k are at most 4095");
    constexpr uint32_t c0 = detail::C0<U>();
    const uint32_t mF = (p.m + 15u) / 16u, nF = (p.n + 15u) / 16u, kF = (p.k + c0 - 1u) / c0;
    detail::CubeOperand(api, fm, detail::M_L0A, (uint64_t)mF * kF * 512u, 512, "the left matrix (fm)");
    detail::CubeOperand(api, filter, detail::M_L0B, (uint64_t)nF * kF * 512u, 512, "the right matrix (filter)");
    detail::CubeOperand(api, dst, detail::M_L0C, (uint64_t)mF * nF * 256u * sizeof(T), 512, "the result (dst)");
    detail::Read(fm.ptr_, (size_t)mF * kF * 512u, detail::P_M, api);
    detail::Read(filter.ptr_, (size_t)nF * kF * 512u, detail::P_M, api);
    if (!p.cmatrixInitVal) detail::Read(dst.ptr_, (size_t)mF * nF * 256u * sizeof(T), detail::P_M, api);
    // the cube works on whole fractals: rows past m, columns past n and k past k (to whole C0)
    // take part as whatever the buffers hold
    const uint32_t M = mF * 16u, N = nF * 16u, K = kF * c0;
    for (uint32_t r = 0; r < M; ++r)
        for (uint32_t c = 0; c < N; ++c) {
            T acc = 0;
            for (uint32_t k = 0; k < K; ++k) {
                const U a = fm.ptr_[((r / 16u) * kF + k / c0) * 16u * c0 + (r % 16u) * c0 + k % c0];
                const S b = filter.ptr_[((k / c0) * nF + c / 16u) * 16u * c0 + (c % 16u) * c0 + k % c0];
                if (std::is_same<T, float>::value) acc += detail::CubeIn(a) * detail::CubeIn(b);
                else acc += (T)a * (T)b;
            }
            T &o = dst.ptr_[((c / 16u) * M + r) * 16u + c % 16u];
            o = p.cmatrixInitVal ? acc : (T)(o + acc);
        }
    detail::Write(dst.ptr_, (size_t)M * N * sizeof(T), detail::P_M);
}

// L0C (NZ, srcStride rows of 16 between column blocks) -> GM rows dstStride elements apart:
// mSize x nSize, f32 converted by quantPre (NoQuant f32, F322F16, F322BF16); under
// SetAtomicAdd the values are added to GM's
template <typename T, typename U, const FixpipeConfig &config = CFG_ROW_MAJOR>
__aicore__ inline void Fixpipe(const GlobalTensor<T> &dst, const LocalTensor<U> &src, const FixpipeParamsV220 &intriParams)
{
    const char *api = "Fixpipe";
    detail::CubeCore(api);
    const FixpipeParamsV220 &p = intriParams;
    static_assert(std::is_same<U, float>::value || std::is_same<U, int32_t>::value, "Fixpipe reads f32 or i32 from L0C");
    if (config.format != CO2Layout::ROW_MAJOR) ShimFail(api, "only CFG_ROW_MAJOR (NZ -> ND) is modelled");
    if (p.ndNum != 1) ShimFail(api, "ndNum other than 1 is not modelled");
    const bool want = std::is_same<T, U>::value ? p.quantPre == NoQuant
                      : std::is_same<T, half>::value ? p.quantPre == F322F16
                      : std::is_same<T, bfloat16_t>::value ? p.quantPre == F322BF16 : false;
    if (!want) ShimFail(api, "quantPre does not convert L0C's type to the destination's");
    if (p.srcStride < p.mSize || p.srcStride % 16u) ShimFail(api, "srcStride must be mSize rounded up to 16 rows (or more)");
    const uint32_t nB = (p.nSize + 15u) / 16u;
    detail::CubeOperand(api, src, detail::M_L0C, (uint64_t)((nB - 1u) * p.srcStride + p.mSize) * 16u * sizeof(U), 512,
                        "the source");
    detail::Read(src.ptr_, (size_t)((nB - 1u) * p.srcStride + p.mSize) * 16u * sizeof(U), detail::P_FIX, api);
    const int atomic = detail::core().atomic;
    if (atomic && !(atomic == 1 && std::is_same<T, float>::value))
        ShimFail(api, "SetAtomicAdd's type is not the destination's (only float is modelled)");
    for (uint32_t r = 0; r < p.mSize; ++r)
        detail::MixGm(dst.ptr_ + (uint64_t)r * p.dstStride, (size_t)p.nSize * sizeof(T), true, detail::P_FIX, api);
    for (uint32_t r = 0; r < p.mSize; ++r)
        for (uint32_t c = 0; c < p.nSize; ++c) {
            const uint64_t g = (uint64_t)r * p.dstStride + c;
            if (g >= dst.size_) ShimFail(api, "writes past the GlobalTensor");
            const U v = src.ptr_[((c / 16u) * p.srcStride + r) * 16u + c % 16u];
            if (atomic) dst.ptr_[g] = (T)((float)dst.ptr_[g] + (float)v);
            else dst.ptr_[g] = (T)v;
        }
}

// fill L1 (blocks of 32 bytes; MTE2) or L0A / L0B (blocks of 512 bytes; MTE1) with a value
template <typename T, typename U = PrimT<T>,
          typename Std::enable_if<Std::is_same<PrimT<T>, U>::value, bool>::type = true>
__aicore__ inline void Fill(const LocalTensor<T> &dst, const InitConstValueParams<U> &initConstValueParams)
{
    const char *api = "Fill";
    detail::CubeCore(api);
    const InitConstValueParams<U> &p = initConstValueParams;
    const int m = detail::MemOf(dst.ptr_);
    if (m != detail::M_L1 && m != detail::M_L0A && m != detail::M_L0B) ShimFail(api, "fills L1, L0A or L0B only");
    const uint32_t block = m == detail::M_L1 ? 32u : 512u;
    const uint64_t end = ((uint64_t)p.repeatTimes * (p.blockNum + p.dstGap)) * block;
    detail::CubeOperand(api, dst, m, end, m == detail::M_L1 ? 32u : 512u, "the destination");
    const uint32_t per = block / (uint32_t)sizeof(T);
    for (uint32_t r = 0; r < p.repeatTimes; ++r)
        for (uint32_t b = 0; b < p.blockNum; ++b) {
            T *d = dst.ptr_ + ((uint64_t)r * (p.blockNum + p.dstGap) + b) * per;
            for (uint32_t i = 0; i < per; ++i) d[i] = (T)p.initValue;
            detail::Write(d, block, m == detail::M_L1 ? detail::P_MTE2 : detail::P_MTE1);
        }
}

template <typename T>
__aicore__ inline void SetAtomicAdd()
{
    detail::core().atomic = std::is_same<T, float>::value ? 1 : std::is_same<T, half>::value ? 2
                            : std::is_same<T, bfloat16_t>::value ? 3 : 4;
}
__aicore__ inline void DisableDmaAtomic() { detail::core().atomic = 0; }

// ------------------------------------------------------------------------------------------
// what the dispatcher (aicore/dispatch.asc) uses besides the kernels' API: the block index and
// the scalar data cache. The launcher of a host test sets `test_block` before running each
// block of a launch; `test_cache_drops` counts DataCacheCleanAndInvalid calls.

inline int64_t test_block = 0;
inline int64_t test_cache_drops = 0;
enum class CacheLine { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class DcciDst { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
// in a MIX launch (wsp_cpu_mix_launch) the AIC of block b reports b, its AIVs b * ratio +
// GetSubBlockIdx() (the vector cores are numbered across the launch), GetTaskRatio() the
// AIVs per AIC on a vector core and 1 on the cube core
__aicore__ inline int64_t GetBlockIdx()
{
    if (detail::mixCore < 0) return test_block;
    return detail::mixCore == 0 ? detail::mixBlock : detail::mixBlock * detail::mixRatio + detail::mixCore - 1;
}
__aicore__ inline int64_t GetSubBlockIdx() { return detail::mixCore > 0 ? detail::mixCore - 1 : 0; }
__aicore__ inline int64_t GetTaskRatio()
{
    return detail::mixCore > 0 ? detail::mixRatio : 1;
}
template <typename T, CacheLine entireType, DcciDst dcciDst>
__aicore__ inline void DataCacheCleanAndInvalid(const GlobalTensor<T> &)
{
    test_cache_drops++;
}

}  // namespace AscendC

__aicore__ inline AscendC::TPipe *GetTPipePtr() { return AscendC::CurrentPipe(); }

// on the device `half` and `bfloat16_t` are types of the global namespace
using AscendC::bfloat16_t;
using AscendC::half;

#endif  // WSP_ASCENDC_CPU_KERNEL_OPERATOR_H
