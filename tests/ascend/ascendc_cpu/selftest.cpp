// Entry points for tests/ascend/test_aicore_shim.py: each runs one API of the CPU Ascend C
// implementation on host arrays (copied into UB through the test's back door, so no pipe
// hazard is involved) and copies the result back; `shim_error()` holds the last failure.
#include <cstdio>
#include <cstring>
#include <exception>

#include "kernel_operator.h"

using namespace AscendC;

static char g_err[2048];
extern "C" const char *shim_error() { return g_err; }

#define GUARD(...)                                                                           \
    try {                                                                                    \
        __VA_ARGS__;                                                                         \
        return 0;                                                                            \
    } catch (const std::exception &e) {                                                      \
        std::snprintf(g_err, sizeof g_err, "%s", e.what());                                  \
        return 1;                                                                            \
    }

// a UB tensor of n elements holding `src` (n may exceed the data: the rest is 0xFF garbage)
template <typename T>
static LocalTensor<T> Put(TPipe &pipe, TBuf<TPosition::VECCALC> &buf, const void *src, uint32_t n,
                          uint32_t copy)
{
    pipe.InitBuffer(buf, n * sizeof(T));
    LocalTensor<T> t = buf.Get<T>();
    if (src) std::memcpy(t.ptr_, src, copy * sizeof(T));
    return t;
}
template <typename T> static void Get(void *dst, const LocalTensor<T> &t, uint32_t n)
{
    std::memcpy(dst, t.ptr_, n * sizeof(T));
}

extern "C" int t_binary(int op, float *out, const float *a, const float *b, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bb, bo;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto tb = Put<float>(pipe, bb, b, n, n);
        auto to = Put<float>(pipe, bo, nullptr, n, 0);
        switch (op) {
        case 0: Add(to, ta, tb, n); break;
        case 1: Sub(to, ta, tb, n); break;
        case 2: Mul(to, ta, tb, n); break;
        case 3: Div(to, ta, tb, n); break;
        case 4: Max(to, ta, tb, n); break;
        case 5: Min(to, ta, tb, n); break;
        }
        Get(out, to, n);
    })
}

extern "C" int t_scalar(int op, float *out, const float *a, float s, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bo;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto to = Put<float>(pipe, bo, nullptr, n, 0);
        switch (op) {
        case 0: Adds(to, ta, s, n); break;
        case 1: Muls(to, ta, s, n); break;
        case 2: Maxs(to, ta, s, n); break;
        case 3: Mins(to, ta, s, n); break;
        case 4: Duplicate(to, s, n); break;
        }
        Get(out, to, n);
    })
}

extern "C" int t_unary(int op, float *out, const float *a, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bo, bt;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto to = Put<float>(pipe, bo, nullptr, n, 0);
        auto tmp = Put<uint8_t>(pipe, bt, nullptr, 4096, 0);
        switch (op) {
        case 0: Exp(to, ta, n); break;
        case 1: Ln(to, ta, n); break;
        case 2: Sqrt(to, ta, n); break;
        case 3: Abs(to, ta, n); break;
        case 4: Relu(to, ta, n); break;
        case 5: Tanh(to, ta, tmp, n); break;
        case 6: Sin(to, ta, tmp, n); break;
        case 7: Cos(to, ta, tmp, n); break;
        case 8: Power(to, ta, 1.75f, tmp, n); break;
        }
        Get(out, to, n);
    })
}

// kind: 0 f32->f16, 1 f16->f32, 2 f32->bf16, 3 bf16->f32, 4 u8->f16, 5 f16->u8, 6 i32->f32
extern "C" int t_cast(int kind, void *out, const void *in, int mode, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bi, bo;
        RoundMode m = (RoundMode)mode;
        switch (kind) {
        case 0: { auto s = Put<float>(pipe, bi, in, n, n); auto d = Put<half>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 1: { auto s = Put<half>(pipe, bi, in, n, n); auto d = Put<float>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 2: { auto s = Put<float>(pipe, bi, in, n, n); auto d = Put<bfloat16_t>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 3: { auto s = Put<bfloat16_t>(pipe, bi, in, n, n); auto d = Put<float>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 4: { auto s = Put<uint8_t>(pipe, bi, in, n, n); auto d = Put<half>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 5: { auto s = Put<half>(pipe, bi, in, n, n); auto d = Put<uint8_t>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        case 6: { auto s = Put<int32_t>(pipe, bi, in, n, n); auto d = Put<float>(pipe, bo, nullptr, n, 0); Cast(d, s, m, n); Get(out, d, n); break; }
        }
    })
}

extern "C" int t_compare(int mode, uint8_t *mask, const float *a, const float *b, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bb, bm;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto tb = Put<float>(pipe, bb, b, n, n);
        auto tm = Put<uint8_t>(pipe, bm, nullptr, n / 8 + 32, 0);
        Compare(tm, ta, tb, (CMPMODE)mode, n);
        Get(mask, tm, n / 8);
    })
}

// scalar_mode: src1 is the scalar `s`
extern "C" int t_select(int scalar_mode, float *out, const uint8_t *mask, const float *a,
                        const float *b, float s, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bb, bm, bo;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto tb = Put<float>(pipe, bb, b, n, n);
        auto tm = Put<uint8_t>(pipe, bm, mask, (n + 7) / 8 + 32, (n + 7) / 8);
        auto to = Put<float>(pipe, bo, nullptr, n, 0);
        if (scalar_mode)
            Select(to, tm, ta, s, SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
        else
            Select(to, tm, ta, tb, SELMODE::VSEL_TENSOR_TENSOR_MODE, n);
        Get(out, to, n);
    })
}

extern "C" int t_reduce(int op, float *out, const float *a, int n, int work)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bw, bo;
        auto ta = Put<float>(pipe, ba, a, n, n);
        auto tw = Put<float>(pipe, bw, nullptr, work, 0);
        auto to = Put<float>(pipe, bo, nullptr, 8, 0);
        switch (op) {
        case 0: ReduceSum(to, ta, tw, n); break;
        case 1: ReduceMax(to, ta, tw, n); break;
        case 2: ReduceMin(to, ta, tw, n); break;
        }
        Get(out, to, 1);
    })
}

extern "C" int t_copy(uint32_t *out, const uint32_t *a, int n_in, int n_out, int mask, int repeats,
                      int dstStride, int srcStride, int dstRep, int srcRep)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> ba, bo;
        auto ta = Put<uint32_t>(pipe, ba, a, n_in, n_in);
        auto to = Put<uint32_t>(pipe, bo, nullptr, n_out, 0);
        std::memset(to.ptr_, 0, n_out * 4);
        Copy(to, ta, (uint64_t)mask, (uint8_t)repeats,
             CopyRepeatParams((uint16_t)dstStride, (uint16_t)srcStride, (uint16_t)dstRep, (uint16_t)srcRep));
        Get(out, to, n_out);
    })
}

// GM -> UB -> GM through the queues: `pad` selects DataCopyPad (byte lengths, UB blocks
// padded to 32 bytes) over DataCopy (whole 32-byte blocks); `ub` receives the UB image
extern "C" int t_datacopy(int pad, uint8_t *ub, int ub_bytes, const uint8_t *gm_in, uint8_t *gm_out,
                          int count, int len, int gm_gap, int ub_gap, int pad_value)
{
    GUARD({
        TPipe pipe;
        TQue<TPosition::VECIN, 1> qi;
        TQue<TPosition::VECOUT, 1> qo;
        pipe.InitBuffer(qi, 1, ub_bytes);
        pipe.InitBuffer(qo, 1, ub_bytes);
        GlobalTensor<uint8_t> gi, go;
        gi.SetGlobalBuffer((__gm__ uint8_t *)gm_in, 1 << 20);
        go.SetGlobalBuffer((__gm__ uint8_t *)gm_out, 1 << 20);
        LocalTensor<uint8_t> a = qi.AllocTensor<uint8_t>();
        if (pad) {
            DataCopyPadExtParams<uint8_t> pp(pad_value >= 0, 0, 0, (uint8_t)(pad_value >= 0 ? pad_value : 0));
            DataCopyPad(a, gi, DataCopyExtParams(count, len, gm_gap, ub_gap, 0), pp);
        } else {
            DataCopy(a, gi, DataCopyParams(count, len, gm_gap, ub_gap));
        }
        qi.EnQue(a);
        a = qi.DeQue<uint8_t>();
        std::memcpy(ub, a.ptr_, ub_bytes);
        // hand the data to the copy-out queue through the vector unit, as kernels do
        LocalTensor<uint8_t> b = qo.AllocTensor<uint8_t>();
        Copy(b.ReinterpretCast<uint32_t>(), a.ReinterpretCast<uint32_t>(), 64, (uint8_t)(ub_bytes / 256),
             CopyRepeatParams(1, 1, 8, 8));
        qo.EnQue(b);
        b = qo.DeQue<uint8_t>();
        if (pad)
            DataCopyPad(go, b, DataCopyExtParams(count, len, ub_gap, gm_gap, 0));
        else
            DataCopy(go, b, DataCopyParams(count, len, ub_gap, gm_gap));
        qo.FreeTensor(b);
        qi.FreeTensor(a);
    })
}

// scalar unit, GetWithOffset, ReinterpretCast, and the hand-off to the vector unit
extern "C" int t_scalar_unit(float *out, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, 4096);
        LocalTensor<float> a = buf.GetWithOffset<float>(n, 0);
        LocalTensor<float> b = buf.GetWithOffset<float>(n, 2048);
        for (int i = 0; i < n; ++i) a.SetValue(i, (float)i * 0.5f);
        TEventID id = GetTPipePtr()->FetchEventID(HardEvent::S_V);
        SetFlag<HardEvent::S_V>(id);
        WaitFlag<HardEvent::S_V>(id);
        Muls(b, a, 2.0f, n);
        id = GetTPipePtr()->FetchEventID(HardEvent::V_S);
        SetFlag<HardEvent::V_S>(id);
        WaitFlag<HardEvent::V_S>(id);
        LocalTensor<uint32_t> bits = b.ReinterpretCast<uint32_t>();
        for (int i = 0; i < n; ++i) {
            uint32_t u = bits.GetValue(i);
            float f;
            std::memcpy(&f, &u, 4);
            out[i] = f + b[i].GetValue(0) - b.GetValue(i);
        }
    })
}

// the rules: each call breaks one and must fail with a message
extern "C" int t_violation(int which)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> b1, b2;
        switch (which) {
        case 0: {  // more than the Unified Buffer
            pipe.InitBuffer(b1, WSP_UB_BYTES - 1024);
            pipe.InitBuffer(b2, 2048);
            break;
        }
        case 1: {  // an operand not 32-byte aligned
            pipe.InitBuffer(b1, 1024);
            auto t = b1.Get<float>();
            Adds(t[1], t[1], 1.0f, 64);
            break;
        }
        case 2: {  // the scalar unit reads what the vector unit wrote, without a sync
            pipe.InitBuffer(b1, 1024);
            auto t = b1.Get<float>();
            Duplicate(t, 1.0f, 64);
            (void)t.GetValue(3);
            break;
        }
        case 3: {  // two dependent vector instructions without PipeBarrier<PIPE_V>
            pipe.InitBuffer(b1, 1024);
            auto t = b1.Get<float>();
            Duplicate(t, 1.0f, 64);
            Adds(t, t, 1.0f, 64);
            break;
        }
        case 4: {  // Compare on a partial repeat
            pipe.InitBuffer(b1, 1024);
            pipe.InitBuffer(b2, 1024);
            Compare(b2.Get<uint8_t>(), b1.Get<float>(), b1.Get<float>(), CMPMODE::LT, 40);
            break;
        }
        case 5: {  // a round mode the device rejects
            pipe.InitBuffer(b1, 1024);
            pipe.InitBuffer(b2, 1024);
            Cast(b2.Get<bfloat16_t>(), b1.Get<float>(), RoundMode::CAST_NONE, 64);
            break;
        }
        case 6: {  // DeQue from an empty queue
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 1, 256);
            (void)q.DeQue<float>();
            break;
        }
        case 7: {  // a vector unit reading a copy-in that was never dequeued
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 1, 256);
            pipe.InitBuffer(b1, 256);
            GlobalTensor<float> g;
            static float host[64];
            g.SetGlobalBuffer(host, 64);
            auto t = q.AllocTensor<float>();
            DataCopy(t, g, DataCopyParams(1, 8, 0, 0));
            Adds(b1.Get<float>(), t, 1.0f, 64);
            break;
        }
        case 8: {  // DataCopy into a UB address that is not 32-byte aligned
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 1, 512);
            GlobalTensor<float> g;
            static float host[64];
            g.SetGlobalBuffer(host, 64);
            auto t = q.AllocTensor<float>();
            DataCopy(t[4], g, DataCopyParams(1, 2, 0, 0));
            break;
        }
        case 9: {  // a WaitFlag with no SetFlag (a hang on the device)
            WaitFlag<HardEvent::V_S>(0);
            break;
        }
        case 10: {  // a second TPipe
            TPipe other;
            break;
        }
        case 11: {  // ReduceSum with a work buffer below the documented minimum
            pipe.InitBuffer(b1, 4096);
            pipe.InitBuffer(b2, 256);
            auto src = b1.Get<float>();
            ReduceSum(b2.Get<float>(), src, b2.Get<float>()[56], 1000);
            break;
        }
        case 12: {  // a temporary buffer overlapping the operand (Tanh)
            pipe.InitBuffer(b1, 8192);
            auto t = b1.Get<float>();
            Tanh(t, t[1024], b1.Get<uint8_t>(), 64);
            break;
        }
        case 13: {  // nine tensors of one position allocated at once
            TQue<TPosition::VECIN, 1> q[9];
            for (auto &x : q) pipe.InitBuffer(x, 1, 32);
            for (auto &x : q) (void)x.AllocTensor<float>();
            break;
        }
        case 14: {  // DataCopyPad of a length that is not a whole number of elements
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 1, 256);
            GlobalTensor<float> g;
            static float host[64];
            g.SetGlobalBuffer(host, 64);
            auto t = q.AllocTensor<float>();
            DataCopyPad(t, g, DataCopyExtParams(1, 6, 0, 0, 0), DataCopyPadExtParams<float>());
            break;
        }
        case 15: {  // releasing the pipe with a queue tensor still allocated
            TQue<TPosition::VECOUT, 1> q;
            pipe.InitBuffer(q, 1, 256);
            (void)q.AllocTensor<float>();
            pipe.Destroy();
            break;
        }
        }
    })
}

// the API's scratch space (the top 8 KiB of UB) is overwritten by Select; returns how many of
// the first 64 bytes there changed
extern "C" int t_scratch(int *changed)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> low, top;
        pipe.InitBuffer(low, WSP_TMP_UB_OFFSET);
        pipe.InitBuffer(top, WSP_UB_BYTES - WSP_TMP_UB_OFFSET);
        uint8_t *p = top.Get<uint8_t>().ptr_;
        std::memset(p, 0x11, 64);
        auto f = low.Get<float>();
        std::memset(f.ptr_, 0, 1024);
        Select(f[64], low.Get<uint8_t>(), f, f[128], SELMODE::VSEL_TENSOR_TENSOR_MODE, 64);
        *changed = 0;
        for (int i = 0; i < 64; ++i) *changed += p[i] != 0x11;
        pipe.Destroy();
    })
}
