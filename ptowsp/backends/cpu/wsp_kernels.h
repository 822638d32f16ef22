/* wsp_kernels.h: support code of the kernels that backends/cpu/kernels.py generates.
 *
 * The generator pastes this text once at the top of every kernel translation unit (so the unit
 * needs only wsp_runtime.h on the include path); everything here is `static inline` or a macro.
 *
 * Vectorisation rules every helper follows (gcc -O3, default -ftrapping-math):
 *  - no branches in the hot path; a choice between two floating-point values is a bit-mask
 *    select (wsp_self/wsp_seld/wsp_selu32): with `c ? a : b` gcc sinks the computation of an
 *    operand used in one arm into a branch and, since that operation "could trap", refuses to
 *    if-convert the loop;
 *  - floats are reinterpreted with memcpy (vectorised as a plain register move).
 *
 * Contents: bit casts and selects; f16/bf16 <-> f32/f64 with round-to-nearest-even; saturating
 * float -> integer casts; floor division; NaN-propagating max/min; wsp_expf, wsp_logf,
 * wsp_tanhf, sigmoid, silu, gelu; the row orders of `sort` and `topk`; the `extern c` tile
 * structs; the tile checks and the copying slow path of the kernel entry points.
 */
#ifndef WSP_KERNELS_H
#define WSP_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* bit casts and branch-free selects                                                         */

static inline float wsp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint32_t wsp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline double wsp_bits_f64(uint64_t u) { double f; memcpy(&f, &u, sizeof f); return f; }
static inline uint64_t wsp_f64_bits(double f) { uint64_t u; memcpy(&u, &f, sizeof u); return u; }

static inline uint32_t wsp_selu32(int c, uint32_t a, uint32_t b)
{
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (m & a) | (~m & b);
}
static inline float wsp_self(int c, float a, float b)
{
    return wsp_bits_f32(wsp_selu32(c, wsp_f32_bits(a), wsp_f32_bits(b)));
}
static inline double wsp_seld(int c, double a, double b)
{
    uint64_t m = (uint64_t)0 - (uint64_t)(c != 0);
    return wsp_bits_f64((m & wsp_f64_bits(a)) | (~m & wsp_f64_bits(b)));
}

/* Before the lane loop of a row reduction (`for l < 16: acc[l] = op(acc[l], x[j + l])`): gcc
 * would unroll it completely and then fail to vectorise 16 scalar reductions of a custom op
 * (NaN-propagating max); kept as a loop, it vectorises over l with acc in memory. The lanes
 * are independent (lane l touches element jb + l of each operand and acc[l]; a kernel never
 * writes a tile it reads at another element), so `ivdep`: without it gcc versions the loop
 * for possible aliasing and the scalar copy runs (half of a 64x64 attention step's time). */
#if defined(__clang__)
#define WSP_LANE_LOOP _Pragma("clang loop unroll(disable) vectorize(assume_safety)")
#elif defined(__GNUC__)
#define WSP_LANE_LOOP _Pragma("GCC ivdep") _Pragma("GCC unroll 1")
#else
#define WSP_LANE_LOOP
#endif

#if defined(__FMA__)
#define WSP_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define WSP_FMAF(a, b, c) ((a) * (b) + (c))
#endif

/* ---------------------------------------------------------------------------------------- */
/* f16 and bf16 (raw uint16_t bits), round to nearest even, NaN stays NaN (quiet), overflow
 * rounds to inf; subnormals are exact both ways. */

static inline float wsp_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t em = (uint32_t)h & 0x7fffu;
    /* the exponent field moved into a float is off by 127-15: one exact multiply fixes normals
     * and subnormals alike */
    float mag = wsp_bits_f32(em << 13) * 0x1p112f;
    uint32_t special = (em << 13) | 0x7f800000u; /* inf, NaN (payload kept) */
    return wsp_bits_f32(wsp_selu32(em >= 0x7c00u, special, wsp_f32_bits(mag)) | sign);
}

static inline uint16_t wsp_f32_to_f16(float f)
{
    uint32_t x = wsp_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    /* normal results: rebias the exponent (-112 << 23) and round the 13 dropped bits to even;
     * a carry out of the mantissa bumps the exponent, up to inf */
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    /* subnormal results (|f| < 2^-14): adding 0.5 makes the FPU round at 2^-24, the f16 quantum */
    uint32_t sub = wsp_f32_bits(wsp_bits_f32(a) + 0.5f) - 0x3f000000u;
    uint32_t big = wsp_selu32(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x3ffu), 0x7c00u);
    uint32_t o = wsp_selu32(a < 0x38800000u, sub, norm);
    o = wsp_selu32(a >= 0x47800000u, big, o);
    return (uint16_t)(o | sign);
}

static inline float wsp_bf16_to_f32(uint16_t h) { return wsp_bits_f32((uint32_t)h << 16); }

static inline uint16_t wsp_f32_to_bf16(float f)
{
    uint32_t x = wsp_f32_bits(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x40u;
    return (uint16_t)wsp_selu32((x & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

/* f64 -> f32 rounding to odd (truncate, then set the last bit if anything was dropped): a
 * second rounding to f16/bf16 (far fewer bits) is then the correctly rounded f64 result. */
static inline float wsp_f64_to_f32_odd(double d)
{
    float f = (float)d;
    double back = (double)f;
    uint32_t u = wsp_f32_bits(f);
    int inexact = back != d;
    u = (inexact && fabs(back) > fabs(d)) ? u - 1u : u; /* rounded away from zero: step back */
    u = inexact ? (u | 1u) : u;
    return wsp_bits_f32(u);
}
static inline uint16_t wsp_f64_to_f16(double d) { return wsp_f32_to_f16(wsp_f64_to_f32_odd(d)); }
static inline uint16_t wsp_f64_to_bf16(double d) { return wsp_f32_to_bf16(wsp_f64_to_f32_odd(d)); }

/* a value rounded to f16/bf16 and held in f32, as kernels compute with it */
static inline float wsp_round_f16(float f) { return wsp_f16_to_f32(wsp_f32_to_f16(f)); }
static inline float wsp_round_bf16(float f) { return wsp_bf16_to_f32(wsp_f32_to_bf16(f)); }
static inline float wsp_round_f16_d(double d) { return wsp_f16_to_f32(wsp_f64_to_f16(d)); }
static inline float wsp_round_bf16_d(double d) { return wsp_bf16_to_f32(wsp_f64_to_bf16(d)); }

/* ---------------------------------------------------------------------------------------- */
/* float -> integer: truncate toward zero, saturate to the type's range, NaN -> 0. The value is
 * clamped in the float domain first, so the C conversion itself is always defined. */

#define WSP_F2I(NAME, F, T, LO, HI, TMAX)                                                      \
    static inline T NAME(F x)                                                                  \
    {                                                                                          \
        F c = (x != x) ? (F)0 : x;                                                             \
        c = (c >= (F)(HI)) ? (F)0 : c;                                                         \
        c = (c <= (F)(LO)) ? (F)(LO) : c;                                                      \
        T r = (T)c;                                                                            \
        return (x >= (F)(HI)) ? (T)(TMAX) : r;                                                 \
    }
/* HI is the first value above the range (a power of two, exact in float and double); LO is
 * the type's minimum (signed) or -1 (unsigned: anything above -1 truncates to 0) */
#define WSP_F2I_ALL(F, P)                                                                      \
    WSP_F2I(wsp_##P##2i_i8, F, int8_t, -128.0, 128.0, INT8_MAX)                                \
    WSP_F2I(wsp_##P##2i_i16, F, int16_t, -32768.0, 32768.0, INT16_MAX)                         \
    WSP_F2I(wsp_##P##2i_i32, F, int32_t, -2147483648.0, 2147483648.0, INT32_MAX)               \
    WSP_F2I(wsp_##P##2i_i64, F, int64_t, -9223372036854775808.0, 9223372036854775808.0,       \
            INT64_MAX)                                                                         \
    WSP_F2I(wsp_##P##2i_u8, F, uint8_t, 0.0, 256.0, UINT8_MAX)                                 \
    WSP_F2I(wsp_##P##2i_u16, F, uint16_t, 0.0, 65536.0, UINT16_MAX)                            \
    WSP_F2I(wsp_##P##2i_u32, F, uint32_t, 0.0, 4294967296.0, UINT32_MAX)                       \
    WSP_F2I(wsp_##P##2i_u64, F, uint64_t, 0.0, 18446744073709551616.0, UINT64_MAX)
WSP_F2I_ALL(float, f)
WSP_F2I_ALL(double, d)

/* ---------------------------------------------------------------------------------------- */
/* integer floor division; x / 0 == 0; MIN / -1 wraps to MIN */

#define WSP_FDIV_SIGNED(NAME, T, U)                                                            \
    static inline T NAME(T a, T b)                                                             \
    {                                                                                          \
        if (b == 0) return 0;                                                                  \
        if (b == -1) return (T)((U)0 - (U)a);                                                  \
        T q = (T)(a / b);                                                                      \
        return (a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;                         \
    }
#define WSP_FDIV_UNSIGNED(NAME, T)                                                             \
    static inline T NAME(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }
WSP_FDIV_SIGNED(wsp_fdiv_i8, int8_t, uint32_t)
WSP_FDIV_SIGNED(wsp_fdiv_i16, int16_t, uint32_t)
WSP_FDIV_SIGNED(wsp_fdiv_i32, int32_t, uint32_t)
WSP_FDIV_SIGNED(wsp_fdiv_i64, int64_t, uint64_t)
WSP_FDIV_UNSIGNED(wsp_fdiv_u8, uint8_t)
WSP_FDIV_UNSIGNED(wsp_fdiv_u16, uint16_t)
WSP_FDIV_UNSIGNED(wsp_fdiv_u32, uint32_t)
WSP_FDIV_UNSIGNED(wsp_fdiv_u64, uint64_t)

/* ---------------------------------------------------------------------------------------- */
/* maximum / minimum as NumPy's: a NaN operand gives NaN */

/* (`|`, not `||`: a short-circuit is a branch, and the loop would not vectorise) */
static inline float wsp_maxf(float a, float b) { return wsp_self((a >= b) | (a != a), a, b); }
static inline float wsp_minf(float a, float b) { return wsp_self((a <= b) | (a != a), a, b); }
static inline double wsp_maxd(double a, double b) { return wsp_seld((a >= b) | (a != a), a, b); }
static inline double wsp_mind(double a, double b) { return wsp_seld((a <= b) | (a != a), a, b); }

/* ---------------------------------------------------------------------------------------- */
/* Vectorisable f32 math (no libm call, no branch: gcc -O3 vectorises loops that use it).
 * Error against float64 NumPy, measured by test_math_accuracy in
 * tests/backends/test_cpu_kernels.py on 10^6 points spread over the whole domain (uniform on
 * [-104, 89] and [-1, 1], tiny values, the subnormal-result range, 2^[-149, 128]) and asserted
 * there with a margin: wsp_expf 1.00 ulp (bound 1.5), wsp_logf 0.77 ulp (1.5), wsp_tanhf 1.26
 * ulp (2.5); sigmoid/silu within 2.5/3.5 ulp; gelu within 4 ulp plus 6 |u| ulp for x < 0 (u,
 * its tanh argument, is itself rounded: the function's own condition number). Special values
 * as libm: exp(+-inf) = inf/0, exp(NaN) = NaN; log(0) = -inf, log(x < 0) = NaN. */

/* e^x: x = n ln2 + r (Cody-Waite, |r| <= ln2/2), e^r by Cephes' degree-6 polynomial, 2^n
 * applied as two exact power-of-two factors so that results in the subnormal range are rounded
 * once. NaN propagates through the arithmetic; +inf clamps to 89 (-> inf), -inf to -104 (-> 0). */
static inline float wsp_expf(float x)
{
    float xc = (x > 89.0f) ? 89.0f : x;
    xc = (xc < -104.0f) ? -104.0f : xc;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float t = WSP_FMAF(xc, 1.44269504088896341f, magic);
    float n = t - magic;
    int32_t ni = (int32_t)(wsp_f32_bits(t) - wsp_f32_bits(magic));
    float r = WSP_FMAF(n, -0.693359375f, xc);
    r = WSP_FMAF(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = WSP_FMAF(p, r, 1.3981999507e-3f);
    p = WSP_FMAF(p, r, 8.3334519073e-3f);
    p = WSP_FMAF(p, r, 4.1665795894e-2f);
    p = WSP_FMAF(p, r, 1.6666665459e-1f);
    p = WSP_FMAF(p, r, 5.0000001201e-1f);
    p = WSP_FMAF(p, r * r, r) + 1.0f;
    int32_t n1 = ni >> 1, n2 = ni - n1;
    float s1 = wsp_bits_f32((uint32_t)(n1 + 127) << 23);
    float s2 = wsp_bits_f32((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by Cephes' degree-9 polynomial;
 * subnormals are scaled by 2^23 first; x < 0 -> NaN, 0 -> -inf, inf -> inf, NaN -> NaN. */
static inline float wsp_logf(float x)
{
    uint32_t ux = wsp_f32_bits(x);
    int sub = ux < 0x00800000u; /* +0 and positive subnormals */
    float xs = wsp_self(sub, x * 8388608.0f, x);
    uint32_t u = wsp_f32_bits(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (sub ? 23 : 0);
    float m = wsp_bits_f32((u & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    int small = m < 0.707106781186547524f;
    e -= small;
    m = wsp_self(small, m + m, m) - 1.0f;
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = WSP_FMAF(y, m, -1.1514610310e-1f);
    y = WSP_FMAF(y, m, 1.1676998740e-1f);
    y = WSP_FMAF(y, m, -1.2420140846e-1f);
    y = WSP_FMAF(y, m, 1.4249322787e-1f);
    y = WSP_FMAF(y, m, -1.6668057665e-1f);
    y = WSP_FMAF(y, m, 2.0000714765e-1f);
    y = WSP_FMAF(y, m, -2.4999993993e-1f);
    y = WSP_FMAF(y, m, 3.3333331174e-1f);
    y = y * m * z;
    float fe = (float)e;
    y = WSP_FMAF(fe, -2.12194440e-4f, y);
    y = WSP_FMAF(z, -0.5f, y);
    float r = WSP_FMAF(fe, 0.693359375f, m + y);
    r = wsp_self(x == 0.0f, -INFINITY, r);
    r = wsp_self(x == INFINITY, x, r);
    r = wsp_self((x < 0.0f) | (x != x), NAN, r);
    return r;
}

/* tanh x: Cephes' odd polynomial for |x| <= 0.625, 1 - 2 / (e^{2|x|} + 1) with x's sign above */
static inline float wsp_tanhf(float x)
{
    float ax = fabsf(x);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = WSP_FMAF(p, z, 2.06390887954e-2f);
    p = WSP_FMAF(p, z, -5.37397155531e-2f);
    p = WSP_FMAF(p, z, 1.33314422036e-1f);
    p = WSP_FMAF(p, z, -3.33332819422e-1f);
    float small = WSP_FMAF(p * z, x, x);
    float big = 1.0f - 2.0f / (wsp_expf(ax + ax) + 1.0f);
    big = wsp_bits_f32(wsp_f32_bits(big) | (wsp_f32_bits(x) & 0x80000000u));
    return wsp_self(ax <= 0.625f, small, big);
}

/* 1 / (1 + e^-x) as (x >= 0 ? 1 : e) / (1 + e), e = e^-|x|: never e^{+large}, so the result
 * keeps its relative accuracy down to the subnormal range for x << 0 */
static inline float wsp_sigmoidf(float x)
{
    float e = wsp_expf(-fabsf(x));
    return wsp_self(x >= 0.0f, 1.0f, e) / (1.0f + e);
}

/* silu = x sigmoid(x); silu(-inf) = -0 (the limit, not -inf * 0) */
static inline float wsp_siluf(float x)
{
    return wsp_self(x == -INFINITY, -0.0f, x * wsp_sigmoidf(x));
}

/* gelu, tanh approximation: 0.5 x (1 + tanh(u)) == x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715
 * x^3); the sigmoid form has no cancellation for x << 0. gelu(-inf) = -0. */
static inline float wsp_geluf(float x)
{
    float u = 0.7978845608028654f * WSP_FMAF(0.044715f * x, x * x, x);
    return wsp_self(x == -INFINITY, -0.0f, x * wsp_sigmoidf(u + u));
}

/* f64: libm (correctly rounded or nearly; not vectorised, f64 kernels are rare) */
static inline double wsp_sigmoid(double x)
{
    double e = exp(-fabs(x));
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
static inline double wsp_silu(double x) { return x == -INFINITY ? -0.0 : x * wsp_sigmoid(x); }
static inline double wsp_gelu(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x == -INFINITY ? -0.0 : x * wsp_sigmoid(2.0 * u);
}

/* ---------------------------------------------------------------------------------------- */
/* `extern c` tiles (language.md section 4): element (i, j) of p is p.data[i * p.stride + j] */

#define WSP_EXTERN_TILE(NAME, T)                                                               \
    typedef struct { const T *data; int64_t rows, cols, stride; } wsp_in_##NAME;               \
    typedef struct { T *data; int64_t rows, cols, stride; } wsp_out_##NAME;
WSP_EXTERN_TILE(f16, uint16_t)
WSP_EXTERN_TILE(bf16, uint16_t)
WSP_EXTERN_TILE(f32, float)
WSP_EXTERN_TILE(f64, double)
WSP_EXTERN_TILE(i8, int8_t)
WSP_EXTERN_TILE(i16, int16_t)
WSP_EXTERN_TILE(i32, int32_t)
WSP_EXTERN_TILE(i64, int64_t)
WSP_EXTERN_TILE(u8, uint8_t)
WSP_EXTERN_TILE(u16, uint16_t)
WSP_EXTERN_TILE(u32, uint32_t)
WSP_EXTERN_TILE(u64, uint64_t)
WSP_EXTERN_TILE(bool, uint8_t)

/* ---------------------------------------------------------------------------------------- */
/* Kernel entry points. A generated body assumes every tile has contiguous columns
 * (col_stride 1) and, for tile kernels, that no written tile overlaps another tile (its
 * pointers are `restrict`; stores take effect as the kernel ends). The entry point checks that
 * in a few instructions and otherwise runs the body on contiguous copies. */

/* the bytes [lo, hi) a tile spans */
static inline void wsp_tile_span(const wsp_tile *t, int32_t esize, uintptr_t *lo, uintptr_t *hi)
{
    int64_t r = (t->rows - 1) * t->stride, c = (t->cols - 1) * t->col_stride;
    int64_t a = (r < 0 ? r : 0) + (c < 0 ? c : 0), b = (r > 0 ? r : 0) + (c > 0 ? c : 0) + 1;
    *lo = (uintptr_t)t->data + (uintptr_t)(a * esize);
    *hi = (uintptr_t)t->data + (uintptr_t)(b * esize);
}

static inline int wsp_tile_strided(const wsp_tile *t) { return t->cols > 1 && t->col_stride != 1; }

/* whether tile a (written) overlaps tile b */
static inline int wsp_tiles_overlap(const wsp_tile *a, int32_t ea, const wsp_tile *b, int32_t eb)
{
    uintptr_t alo, ahi, blo, bhi;
    wsp_tile_span(a, ea, &alo, &ahi);
    wsp_tile_span(b, eb, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* 1 when the body may run on `t` as it is */
static inline int wsp_tiles_direct(const wsp_tile *t, int n, const int32_t *esize,
                                   const int32_t *mode, int check_overlap)
{
    for (int a = 0; a < n; ++a)
        if (wsp_tile_strided(&t[a])) return 0;
    if (!check_overlap) return 1;
    for (int a = 0; a < n; ++a) {
        if (!(mode[a] & 2)) continue;
        for (int b = 0; b < n; ++b)
            if (b != a && wsp_tiles_overlap(&t[a], esize[a], &t[b], esize[b])) return 0;
    }
    return 1;
}

static inline void wsp_tile_copy(const wsp_tile *dst, const wsp_tile *src, int32_t esize)
{
    /* whole rows at a time where both sides' columns are contiguous (the common case: a
     * partial view's padded copy); element by element, typed, where one side is strided */
    const int contiguous = (src->cols == 1 || (src->col_stride == 1 && dst->col_stride == 1));
    for (int64_t i = 0; i < src->rows; ++i) {
        char *d = (char *)dst->data + i * dst->stride * esize;
        const char *r = (const char *)src->data + i * src->stride * esize;
        if (contiguous) {
            memcpy(d, r, (size_t)(src->cols * esize));
            continue;
        }
        const int64_t ds = dst->col_stride * esize, rs = src->col_stride * esize;
        switch (esize) {
        case 1: for (int64_t j = 0; j < src->cols; ++j) d[j * ds] = r[j * rs]; break;
        case 2: for (int64_t j = 0; j < src->cols; ++j) memcpy(d + j * ds, r + j * rs, 2); break;
        case 4: for (int64_t j = 0; j < src->cols; ++j) memcpy(d + j * ds, r + j * rs, 4); break;
        case 8: for (int64_t j = 0; j < src->cols; ++j) memcpy(d + j * ds, r + j * rs, 8); break;
        default: for (int64_t j = 0; j < src->cols; ++j) memcpy(d + j * ds, r + j * rs, (size_t)esize);
        }
    }
}

/* n elements of `esize` bytes at p set to the low bytes of `pad` (little-endian) */
static inline void wsp_fill_elems(char *p, int64_t n, int32_t esize, uint64_t pad)
{
    if (n <= 0) return;
    switch (esize) {
    case 1: memset(p, (int)(pad & 0xff), (size_t)n); return;
    case 2: { const uint16_t v = (uint16_t)pad; for (int64_t e = 0; e < n; ++e) memcpy(p + 2 * e, &v, 2); return; }
    case 4: { const uint32_t v = (uint32_t)pad; for (int64_t e = 0; e < n; ++e) memcpy(p + 4 * e, &v, 4); return; }
    default: for (int64_t e = 0; e < n; ++e) memcpy(p + e * esize, &pad, (size_t)esize);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* sort and topk: the order of a row                                                          */

/* wsp_order_<T>(x, n, k, desc, idx, tmp): the columns of the first k of x[0..n) in ascending
 * (desc = 0) or descending order into idx[0..k) (idx and tmp hold n each). The order is
 * stable (equal values keep their column order) and NaN is the greatest value: last ascending,
 * first descending (language.md, "Sorting and selection"; ref's meaning in
 * ptowsp/primitives/selection.py). k <= 16: each element is inserted into the k first so far
 * (n k compares, no tmp); otherwise a bottom-up merge sort of all n (n log n). Off the hot
 * path of elementwise code, so plain branches. */
#define WSP_IS_NAN(a) ((a) != (a))
#define WSP_NEVER_NAN(a) 0
#define WSP_DEFINE_ORDER(T, NAME, ISNAN)                                                         \
    static inline int NAME##_before(T a, T b, int desc)                                        \
    {                                                                                          \
        const int na = ISNAN(a), nb = ISNAN(b);                                                \
        if (desc) return na ? !nb : (!nb && a > b);                                            \
        return nb ? !na : (!na && a < b);                                                      \
    }                                                                                          \
    static void NAME(const T *x, int64_t n, int64_t k, int desc, int32_t *idx, int32_t *tmp)  \
    {                                                                                          \
        if (k <= 16) {                                                                         \
            int64_t cnt = 0;                                                                   \
            for (int64_t j = 0; j < n; ++j) {                                                  \
                int64_t pos;                                                                   \
                if (cnt < k) pos = cnt++;                                                      \
                else if (NAME##_before(x[j], x[idx[k - 1]], desc)) pos = k - 1;                \
                else continue;                                                                 \
                while (pos > 0 && NAME##_before(x[j], x[idx[pos - 1]], desc)) {                \
                    idx[pos] = idx[pos - 1];                                                   \
                    --pos;                                                                     \
                }                                                                              \
                idx[pos] = (int32_t)j;                                                         \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        int32_t *src = idx, *dst = tmp;                                                        \
        for (int64_t j = 0; j < n; ++j) src[j] = (int32_t)j;                                   \
        for (int64_t w = 1; w < n; w *= 2) {                                                   \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                        \
                const int64_t mid = lo + w < n ? lo + w : n;                                   \
                const int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;                            \
                int64_t a = lo, b = mid, o = lo;                                               \
                while (a < mid && b < hi) /* the right run wins only when strictly before */   \
                    dst[o++] = NAME##_before(x[src[b]], x[src[a]], desc) ? src[b++] : src[a++]; \
                while (a < mid) dst[o++] = src[a++];                                           \
                while (b < hi) dst[o++] = src[b++];                                            \
            }                                                                                  \
            int32_t *t = src; src = dst; dst = t;                                              \
        }                                                                                      \
        if (src != idx) memcpy(idx, src, (size_t)k * sizeof *idx);                             \
    }
WSP_DEFINE_ORDER(float, wsp_order_float, WSP_IS_NAN)
WSP_DEFINE_ORDER(double, wsp_order_double, WSP_IS_NAN)
WSP_DEFINE_ORDER(int8_t, wsp_order_int8_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(int16_t, wsp_order_int16_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(int32_t, wsp_order_int32_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(int64_t, wsp_order_int64_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(uint8_t, wsp_order_uint8_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(uint16_t, wsp_order_uint16_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(uint32_t, wsp_order_uint32_t, WSP_NEVER_NAN)
WSP_DEFINE_ORDER(uint64_t, wsp_order_uint64_t, WSP_NEVER_NAN)
#undef WSP_DEFINE_ORDER
#undef WSP_IS_NAN
#undef WSP_NEVER_NAN

typedef int (*wsp_body_fn)(const wsp_tile *tiles, const wsp_scalar *scalars);

/* copy[a] = copy[b] = 1 for every written tile a overlapping another tile b (the copied paths) */
static inline void wsp_mark_overlaps(const wsp_tile *t, int n, const int32_t *esize,
                                     const int32_t *mode, int *copy)
{
    for (int a = 0; a < n; ++a) {
        if (!(mode[a] & 2)) continue;
        for (int b = 0; b < n; ++b)
            if (b != a && wsp_tiles_overlap(&t[a], esize[a], &t[b], esize[b]))
                copy[a] = copy[b] = 1;
    }
}

/* The body on `local`, then the copied written tiles back in `order` (later ones win where they
 * overlap); frees the copies' buffer */
static inline int wsp_run_copies(const wsp_tile *t, const wsp_tile *local, const wsp_scalar *s,
                                 const int32_t *esize, const int *copy, const int32_t *order,
                                 int norder, char *buf, wsp_body_fn body)
{
    int rc = body(local, s);
    if (rc == 0)
        for (int k = 0; k < norder; ++k) {
            int a = order[k];
            if (copy[a]) wsp_tile_copy(&t[a], &local[a], esize[a]);
        }
    free(buf);
    return rc;
}

/* The slow path: every strided tile (and, with check_overlap, every tile involved in an overlap
 * with a written tile) is copied to a contiguous buffer (mode bit 1: copied in), the body runs
 * on the copies, and the written tiles listed in `order` are copied back in that order (later
 * ones win where they overlap). Returns WSP_ERR_INTERNAL (4) when out of memory. */
static int wsp_call_copied(const wsp_tile *t, const wsp_scalar *s, int n, const int32_t *esize,
                           const int32_t *mode, const int32_t *order, int norder,
                           int check_overlap, wsp_body_fn body)
{
    wsp_tile local[WSP_MAX_TILES];
    size_t off[WSP_MAX_TILES];
    int copy[WSP_MAX_TILES];
    size_t total = 0;
    if (n > WSP_MAX_TILES) return 5;
    for (int a = 0; a < n; ++a) copy[a] = wsp_tile_strided(&t[a]);
    if (check_overlap) wsp_mark_overlaps(t, n, esize, mode, copy);
    for (int a = 0; a < n; ++a) {
        local[a] = t[a];
        off[a] = total;
        if (copy[a]) total += ((size_t)(t[a].rows * t[a].cols * esize[a]) + 63u) & ~(size_t)63u;
    }
    char *buf = (char *)malloc(total ? total : 1);
    if (!buf) return 4;
    for (int a = 0; a < n; ++a) {
        if (!copy[a]) continue;
        local[a].data = buf + off[a];
        local[a].stride = t[a].cols;
        local[a].col_stride = 1;
        if (mode[a] & 1) wsp_tile_copy(&local[a], &t[a], esize[a]);
    }
    return wsp_run_copies(t, local, s, esize, copy, order, norder, buf, body);
}

/* Partial tiles (language.md section 4): a tile whose view is shorter than the kernel's static
 * [trows[a], tcols[a]] (its rows/cols, 1 <= rows <= trows, are the view's) runs on a full
 * contiguous copy: a read tile (mode bit 1) is filled with its pad (`pad[a]`, the element's
 * bits) and then its view copied in; the body sees rows/cols = the view's (`valid_rows`); the
 * written tiles listed in `order` get back only the view. A whole tile is copied only where the
 * fast path would copy it (strided columns, or an overlap with a written tile), so a task with
 * a short activation tile still reads its weights in place (measured on a [16, 256] x
 * [256, 64] projection: copying the weight doubled the task's time). Returns 5 for an extent
 * outside [1, tile], 4 out of memory. */
static int wsp_call_padded(const wsp_tile *t, const wsp_scalar *s, int n, const int32_t *esize,
                           const int32_t *mode, const int32_t *order, int norder,
                           const int64_t *trows, const int64_t *tcols, const uint64_t *pad,
                           wsp_body_fn body)
{
    wsp_tile local[WSP_MAX_TILES];
    size_t off[WSP_MAX_TILES];
    int copy[WSP_MAX_TILES];
    size_t total = 0;
    if (n > WSP_MAX_TILES) return 5;
    for (int a = 0; a < n; ++a) {
        if (t[a].rows < 1 || t[a].rows > trows[a] || t[a].cols < 1 || t[a].cols > tcols[a])
            return 5;
        copy[a] = t[a].rows != trows[a] || t[a].cols != tcols[a] || wsp_tile_strided(&t[a]);
    }
    wsp_mark_overlaps(t, n, esize, mode, copy);
    for (int a = 0; a < n; ++a) {
        off[a] = total;
        if (copy[a]) total += ((size_t)(trows[a] * tcols[a] * esize[a]) + 63u) & ~(size_t)63u;
    }
    char *buf = (char *)malloc(total ? total : 1);
    if (!buf) return 4;
    for (int a = 0; a < n; ++a) {
        local[a] = t[a];
        if (!copy[a]) continue;
        local[a].data = buf + off[a];
        local[a].stride = tcols[a];
        local[a].col_stride = 1;
        if (mode[a] & 1) {  /* the view, then the pad where the view is not */
            char *d = (char *)local[a].data;
            const int64_t vr = t[a].rows, vc = t[a].cols, tc = tcols[a];
            wsp_tile_copy(&local[a], &t[a], esize[a]);
            if (vc < tc)
                for (int64_t i = 0; i < vr; ++i)
                    wsp_fill_elems(d + (i * tc + vc) * esize[a], tc - vc, esize[a], pad[a]);
            wsp_fill_elems(d + vr * tc * esize[a], (trows[a] - vr) * tc, esize[a], pad[a]);
        }
    }
    return wsp_run_copies(t, local, s, esize, copy, order, norder, buf, body);
}

#endif /* WSP_KERNELS_H */
