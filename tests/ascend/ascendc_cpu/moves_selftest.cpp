// Entry points for tests/ascend/test_shim_moves.py: Gather, CreateVecIndex and the casts the
// moves use (float -> int32_t, int8_t <-> half), each on host arrays copied into UB, and the
// misuses of Gather the stand-in must refuse as a device would (or stricter, as documented in
// kernel_operator.h). `moves_error()` holds the last failure.
#include <cstdio>
#include <cstring>
#include <exception>

#include "kernel_operator.h"

using namespace AscendC;

static char g_err[2048];
extern "C" const char *moves_error() { return g_err; }

#define GUARD(...)                                                                           \
    try {                                                                                    \
        __VA_ARGS__;                                                                         \
        return 0;                                                                            \
    } catch (const std::exception &e) {                                                      \
        std::snprintf(g_err, sizeof g_err, "%s", e.what());                                  \
        return 1;                                                                            \
    }

// Gather of `count` elements of `size` bytes (2: uint16_t, 4: uint32_t) from `src` (n_src
// elements) at byte offsets `off` plus `base`; src_at / dst_at move the tensors by that many
// elements from their buffer's (32-byte aligned) start
template <typename T>
static void GatherOf(void *out, const void *src, int n_src, const uint32_t *off, int count,
                     uint32_t base, int src_at, int dst_at)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> bs, bo, bd;
    pipe.InitBuffer(bs, ((n_src + src_at) * sizeof(T) + 31) / 32 * 32);  // src ends the buffer
    pipe.InitBuffer(bo, (count + 8) * 4);
    pipe.InitBuffer(bd, (count + 64) * sizeof(T));
    LocalTensor<T> s = bs.Get<T>()[src_at];
    std::memcpy(s.ptr_, src, n_src * sizeof(T));
    LocalTensor<uint32_t> o = bo.Get<uint32_t>();
    std::memcpy(o.ptr_, off, count * 4);
    LocalTensor<T> d = bd.Get<T>()[dst_at];
    Gather(d, s, o, base, (uint32_t)count);
    std::memcpy(out, d.ptr_, count * sizeof(T));
    pipe.Destroy();
}

extern "C" int m_gather(int size, void *out, const void *src, int n_src, const uint32_t *off,
                        int count, uint32_t base, int src_at, int dst_at)
{
    GUARD({
        if (size == 2) GatherOf<uint16_t>(out, src, n_src, off, count, base, src_at, dst_at);
        else GatherOf<uint32_t>(out, src, n_src, off, count, base, src_at, dst_at);
    })
}

// Gather whose destination is the source itself (overlap == 1) or the offsets (overlap == 2)
extern "C" int m_gather_overlap(int overlap)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bs, bo;
        pipe.InitBuffer(bs, 1024);
        pipe.InitBuffer(bo, 1024);
        LocalTensor<uint32_t> s = bs.Get<uint32_t>(), o = bo.Get<uint32_t>();
        std::memset(s.ptr_, 0, 1024);
        std::memset(o.ptr_, 0, 1024);
        Gather(overlap == 1 ? s[64] : o, s, o, 0u, 64u);
        pipe.Destroy();
    })
}

extern "C" int m_vec_index(float *outf, int32_t *outi, float first, int count)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bf, bi;
        pipe.InitBuffer(bf, count * 4 + 32);
        pipe.InitBuffer(bi, count * 4 + 32);
        LocalTensor<float> f = bf.Get<float>();
        LocalTensor<int32_t> i = bi.Get<int32_t>();
        CreateVecIndex(f, first, (uint32_t)count);
        CreateVecIndex(i, (int32_t)first, (uint32_t)count);
        std::memcpy(outf, f.ptr_, count * 4);
        std::memcpy(outi, i.ptr_, count * 4);
        pipe.Destroy();
    })
}

// float -> int32_t with round mode `mode` (RoundMode's order)
extern "C" int m_cast_f2i(int32_t *out, const float *src, int n, int mode)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bs, bd;
        pipe.InitBuffer(bs, n * 4 + 32);
        pipe.InitBuffer(bd, n * 4 + 32);
        LocalTensor<float> s = bs.Get<float>();
        std::memcpy(s.ptr_, src, n * 4);
        LocalTensor<int32_t> d = bd.Get<int32_t>();
        Cast(d, s, (RoundMode)mode, (uint32_t)n);
        std::memcpy(out, d.ptr_, n * 4);
        pipe.Destroy();
    })
}

// int8_t -> half (CAST_NONE) -> int8_t (`mode`): `mid` receives the half bits
extern "C" int m_cast_i8(int8_t *out, uint16_t *mid, const int8_t *src, int n, int mode)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bs, bh, bd;
        pipe.InitBuffer(bs, n + 32);
        pipe.InitBuffer(bh, n * 2 + 32);
        pipe.InitBuffer(bd, n + 32);
        LocalTensor<int8_t> s = bs.Get<int8_t>();
        std::memcpy(s.ptr_, src, n);
        LocalTensor<half> h = bh.Get<half>();
        LocalTensor<int8_t> d = bd.Get<int8_t>();
        Cast(h, s, RoundMode::CAST_NONE, (uint32_t)n);
        PipeBarrier<PIPE_V>();
        Cast(d, h, (RoundMode)mode, (uint32_t)n);
        std::memcpy(mid, h.ptr_, n * 2);
        std::memcpy(out, d.ptr_, n);
        pipe.Destroy();
    })
}

// int16_t -> half (CAST_NONE): `out` receives the half bits
extern "C" int m_cast_i16(uint16_t *out, const int16_t *src, int n)
{
    GUARD({
        TPipe pipe;
        TBuf<TPosition::VECCALC> bs, bh;
        pipe.InitBuffer(bs, n * 2 + 32);
        pipe.InitBuffer(bh, n * 2 + 32);
        LocalTensor<int16_t> s = bs.Get<int16_t>();
        std::memcpy(s.ptr_, src, n * 2);
        LocalTensor<half> h = bh.Get<half>();
        Cast(h, s, RoundMode::CAST_NONE, (uint32_t)n);
        std::memcpy(out, h.ptr_, n * 2);
        pipe.Destroy();
    })
}
