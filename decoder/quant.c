#include "decoder/quant.h"

#include <math.h>
#include <string.h>

#include "decoder/cpu_isa.h"
#include "decoder/quant_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CQ_X86 1
#endif

bool cq_qtype_block(uint32_t type, size_t *block_elems, size_t *block_bytes) {
    size_t e, b;
    switch (type) {
    case CQ_QTYPE_F32: e = 1, b = 4; break;
    case CQ_QTYPE_F16: e = 1, b = 2; break;
    case CQ_QTYPE_BF16: e = 1, b = 2; break;
    case CQ_QTYPE_Q8_0: e = QK, b = sizeof(block_q8_0); break;
    case CQ_QTYPE_Q5_0: e = QK, b = sizeof(block_q5_0); break;
    case CQ_QTYPE_Q4_K: e = QK_K, b = sizeof(block_q4_k); break;
    case CQ_QTYPE_Q6_K: e = QK_K, b = sizeof(block_q6_k); break;
    default: return false;
    }
    if (block_elems) *block_elems = e;
    if (block_bytes) *block_bytes = b;
    return true;
}

const char *cq_qtype_name(uint32_t type) {
    switch (type) {
    case CQ_QTYPE_F32: return "F32";
    case CQ_QTYPE_F16: return "F16";
    case CQ_QTYPE_BF16: return "BF16";
    case CQ_QTYPE_Q8_0: return "Q8_0";
    case CQ_QTYPE_Q5_0: return "Q5_0";
    case CQ_QTYPE_Q4_K: return "Q4_K";
    case CQ_QTYPE_Q6_K: return "Q6_K";
    default: return "unknown";
    }
}

/* ---- half and bfloat16 ---------------------------------------------------------------------------------------- */

float cq_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf / nan */
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: value = mant * 2^-24 */
            float f = (float)mant * 0x1p-24f;
            return sign ? -f : f;
        }
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t cq_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffff;
    if (absx >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
    if (absx >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds past the largest half: inf */
    if (absx < 0x38800000) {                                    /* below the smallest normal half */
        float a;
        memcpy(&a, &absx, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 0x1p24f)); /* subnormal, round to nearest even */
    }
    uint32_t mant = absx & 0x7fffff, exp = (absx >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* carries into the exponent correctly */
    return (uint16_t)(sign | h);
}

float cq_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t cq_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static inline uint16_t rd16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Q4_K packs 8 six-bit scales and 8 six-bit mins in 12 bytes: entries 0..3 in the low 6 bits of bytes 0..3
 * (scales) and 4..7 (mins); entries 4..7 in the nibbles of bytes 8..11 with their top 2 bits in the high bits
 * of bytes 0..7. */
static inline void q4k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* ---- scalar dequantization (the definition; everything else is tested against it) ----------------------------- */

static void dequant_scalar(uint32_t type, const void *row, float *y, size_t n) {
    switch (type) {
    case CQ_QTYPE_F32: memcpy(y, row, n * sizeof(float)); break;
    case CQ_QTYPE_F16:
        for (size_t i = 0; i < n; i++) y[i] = cq_f16_to_f32(rd16((const uint8_t *)row + 2 * i));
        break;
    case CQ_QTYPE_BF16:
        for (size_t i = 0; i < n; i++) y[i] = cq_bf16_to_f32(rd16((const uint8_t *)row + 2 * i));
        break;
    case CQ_QTYPE_Q8_0: {
        const block_q8_0 *b = row;
        for (size_t i = 0; i < n / QK; i++, y += QK) {
            float d = cq_f16_to_f32(b[i].d);
            for (int j = 0; j < QK; j++) y[j] = d * (float)b[i].qs[j];
        }
        break;
    }
    case CQ_QTYPE_Q5_0: {
        const block_q5_0 *b = row;
        for (size_t i = 0; i < n / QK; i++, y += QK) {
            float d = cq_f16_to_f32(b[i].d);
            uint32_t qh;
            memcpy(&qh, b[i].qh, 4);
            for (int j = 0; j < QK / 2; j++) {
                int lo = (b[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
                int hi = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
                y[j] = d * (float)(lo - 16);
                y[j + QK / 2] = d * (float)(hi - 16);
            }
        }
        break;
    }
    case CQ_QTYPE_Q4_K: {
        const block_q4_k *b = row;
        for (size_t i = 0; i < n / QK_K; i++) {
            float d = cq_f16_to_f32(b[i].d), dmin = cq_f16_to_f32(b[i].dmin);
            for (int g = 0; g < 4; g++) {
                const uint8_t *q = b[i].qs + 32 * g;
                uint8_t sc0, m0, sc1, m1;
                q4k_scale_min(b[i].scales, 2 * g, &sc0, &m0);
                q4k_scale_min(b[i].scales, 2 * g + 1, &sc1, &m1);
                float a0 = d * sc0, c0 = dmin * m0, a1 = d * sc1, c1 = dmin * m1;
                for (int l = 0; l < 32; l++) y[l] = a0 * (float)(q[l] & 0x0f) - c0;
                for (int l = 0; l < 32; l++) y[32 + l] = a1 * (float)(q[l] >> 4) - c1;
                y += 64;
            }
        }
        break;
    }
    case CQ_QTYPE_Q6_K: {
        const block_q6_k *b = row;
        for (size_t i = 0; i < n / QK_K; i++) {
            float d = cq_f16_to_f32(b[i].d);
            for (int h = 0; h < 2; h++) { /* two halves of 128: ql 64 bytes, qh 32 bytes, 8 scales each */
                const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
                const int8_t *sc = b[i].scales + 8 * h;
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * sc[is] * (float)q1;
                    y[l + 32] = d * sc[is + 2] * (float)q2;
                    y[l + 64] = d * sc[is + 4] * (float)q3;
                    y[l + 96] = d * sc[is + 6] * (float)q4;
                }
                y += 128;
            }
        }
        break;
    }
    default: memset(y, 0, n * sizeof(float)); break;
    }
}

/* Scalar dot: dequantize one block at a time into a small buffer, then multiply. */
static float dot_scalar(uint32_t type, const void *row, const float *x, size_t n) {
    if (type == CQ_QTYPE_F32) {
        const float *w = row;
        float s = 0;
        for (size_t i = 0; i < n; i++) s += w[i] * x[i];
        return s;
    }
    size_t be, bb;
    if (!cq_qtype_block(type, &be, &bb)) return 0;
    size_t chunk = be < 64 ? 64 : be; /* F16/BF16: 64 elements at a time */
    float buf[QK_K], s = 0;
    const uint8_t *p = row;
    for (size_t i = 0; i < n; i += chunk) {
        size_t m = n - i < chunk ? n - i : chunk;
        dequant_scalar(type, p + i / be * bb, buf, m);
        for (size_t j = 0; j < m; j++) s += buf[j] * x[i + j];
    }
    return s;
}

/* ---- AVX2 + FMA kernels ------------------------------------------------------------------------------------- *
 * Each format has a "decode" step that turns bytes into float vectors of weights (scale applied); dequant stores
 * them, dot multiplies them into an accumulator. */
#ifdef CQ_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 weights as 4 x 8 floats. A struct, not an array, so that the compiler keeps it in registers. */
typedef struct {
    __m256 v0, v1, v2, v3;
} f32x32;

AVX2 static inline f32x32 i8x32_to_f32(__m256i q) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    return (f32x32){_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo))),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)))};
}

/* 32 unsigned bytes (0..15) -> 4 x 8 floats */
AVX2 static inline f32x32 u8x32_to_f32(__m256i q) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    return (f32x32){_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(lo, lo))),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(hi, hi)))};
}

AVX2 static inline f32x32 scale2(f32x32 w, __m256 s01, __m256 s23) {
    return (f32x32){_mm256_mul_ps(w.v0, s01), _mm256_mul_ps(w.v1, s01), _mm256_mul_ps(w.v2, s23),
                    _mm256_mul_ps(w.v3, s23)};
}

AVX2 static inline f32x32 load_f16x32(const uint16_t *h) {
    return (f32x32){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8))),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 16))),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 24)))};
}

AVX2 static inline __m256 bf16x8(const uint16_t *h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h)), 16));
}

/* Q5_0 block -> 32 signed quants (-16..15) as bytes in element order */
AVX2 static inline __m256i q5_0_bytes(const block_q5_0 *b) {
    __m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
    __m128i m4 = _mm_set1_epi8(0x0f);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_and_si128(qs, m4));
    /* Spread the 32 bits of qh over 32 bytes: byte j gets 0x10 when bit j is set. */
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                       _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                         0x0101010101010101LL, 0x0000000000000000LL));
    __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i hb = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bits, sel), sel), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(q, hb), _mm256_set1_epi8(16));
}

/* Q6_K: group g (0..3) of a 128-element half -> 32 signed quants (-32..31) in element order */
AVX2 static inline __m256i q6_k_bytes(const uint8_t *ql, const uint8_t *qh, int g) {
    __m256i l = _mm256_loadu_si256((const __m256i *)(ql + 32 * (g & 1)));
    __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    if (g >= 2) l = _mm256_srli_epi16(l, 4);
    /* high bits of group g are bits 2g..2g+1 of qh: move them to bits 4..5 */
    switch (g) {
    case 0: h = _mm256_slli_epi16(h, 4); break;
    case 1: h = _mm256_slli_epi16(h, 2); break;
    case 2: break;
    default: h = _mm256_srli_epi16(h, 2); break;
    }
    __m256i q = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_and_si256(h, m2));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(32));
}

/* The shared walk over a row: for every 32 weights, EMIT(k, w) with w the f32x32 of elements 32k..32k+31. A macro
 * so that dequant (store) and dot (fma) share the decoding with no call in the loop: calls out of AVX code into
 * non-VEX code cost far more than the arithmetic here. Half scales convert with F16C (_cvtsh_ss) for that reason. */
#define WALK_ROW(type, row, n, EMIT)                                                                              \
    do {                                                                                                          \
        switch (type) {                                                                                           \
        case CQ_QTYPE_Q8_0: {                                                                                     \
            const block_q8_0 *b_ = (row);                                                                         \
            for (size_t i_ = 0; i_ < (n) / QK; i_++) {                                                            \
                __m256 d_ = _mm256_set1_ps(_cvtsh_ss(b_[i_].d));                                                  \
                f32x32 w_ = scale2(i8x32_to_f32(_mm256_loadu_si256((const __m256i *)b_[i_].qs)), d_, d_);         \
                EMIT(i_, w_);                                                                                     \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        case CQ_QTYPE_Q5_0: {                                                                                     \
            const block_q5_0 *b_ = (row);                                                                         \
            for (size_t i_ = 0; i_ < (n) / QK; i_++) {                                                            \
                __m256 d_ = _mm256_set1_ps(_cvtsh_ss(b_[i_].d));                                                  \
                f32x32 w_ = scale2(i8x32_to_f32(q5_0_bytes(&b_[i_])), d_, d_);                                    \
                EMIT(i_, w_);                                                                                     \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        case CQ_QTYPE_Q4_K: {                                                                                     \
            const block_q4_k *b_ = (row);                                                                         \
            const __m256i m4_ = _mm256_set1_epi8(0x0f);                                                           \
            for (size_t i_ = 0; i_ < (n) / QK_K; i_++) {                                                          \
                float d_ = _cvtsh_ss(b_[i_].d), dm_ = _cvtsh_ss(b_[i_].dmin);                                     \
                for (int s_ = 0; s_ < 8; s_++) {                                                                  \
                    uint8_t sc_, mn_;                                                                             \
                    q4k_scale_min(b_[i_].scales, s_, &sc_, &mn_);                                                 \
                    __m256i q_ = _mm256_loadu_si256((const __m256i *)(b_[i_].qs + 32 * (s_ / 2)));                \
                    if (s_ & 1) q_ = _mm256_srli_epi16(q_, 4);                                                    \
                    f32x32 w_ = u8x32_to_f32(_mm256_and_si256(q_, m4_));                                          \
                    __m256 a_ = _mm256_set1_ps(d_ * sc_), c_ = _mm256_set1_ps(dm_ * mn_);                         \
                    w_.v0 = _mm256_fmsub_ps(w_.v0, a_, c_);                                                       \
                    w_.v1 = _mm256_fmsub_ps(w_.v1, a_, c_);                                                       \
                    w_.v2 = _mm256_fmsub_ps(w_.v2, a_, c_);                                                       \
                    w_.v3 = _mm256_fmsub_ps(w_.v3, a_, c_);                                                       \
                    EMIT(i_ * 8 + s_, w_);                                                                        \
                }                                                                                                 \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        case CQ_QTYPE_Q6_K: {                                                                                     \
            const block_q6_k *b_ = (row);                                                                         \
            for (size_t i_ = 0; i_ < (n) / QK_K; i_++) {                                                          \
                float d_ = _cvtsh_ss(b_[i_].d);                                                                   \
                for (int h_ = 0; h_ < 2; h_++) {                                                                  \
                    const uint8_t *ql_ = b_[i_].ql + 64 * h_, *qh_ = b_[i_].qh + 32 * h_;                         \
                    const int8_t *sc_ = b_[i_].scales + 8 * h_;                                                   \
                    for (int g_ = 0; g_ < 4; g_++) { /* 32 elements, two scales of 16 */                          \
                        f32x32 w_ = scale2(i8x32_to_f32(q6_k_bytes(ql_, qh_, g_)),                               \
                                           _mm256_set1_ps(d_ * sc_[2 * g_]), _mm256_set1_ps(d_ * sc_[2 * g_ + 1])); \
                        EMIT(i_ * 8 + h_ * 4 + g_, w_);                                                           \
                    }                                                                                             \
                }                                                                                                 \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        case CQ_QTYPE_F16: {                                                                                      \
            const uint16_t *h_ = (row);                                                                           \
            for (size_t i_ = 0; i_ < (n) / 32; i_++) {                                                            \
                f32x32 w_ = load_f16x32(h_ + 32 * i_);                                                            \
                EMIT(i_, w_);                                                                                     \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        case CQ_QTYPE_BF16: {                                                                                     \
            const uint16_t *h_ = (row);                                                                           \
            for (size_t i_ = 0; i_ < (n) / 32; i_++) {                                                            \
                const uint16_t *p_ = h_ + 32 * i_;                                                                \
                f32x32 w_ = {bf16x8(p_), bf16x8(p_ + 8), bf16x8(p_ + 16), bf16x8(p_ + 24)};                       \
                EMIT(i_, w_);                                                                                     \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        default: { /* F32 */                                                                                      \
            const float *f_ = (const float *)(row);                                                               \
            for (size_t i_ = 0; i_ < (n) / 32; i_++) {                                                            \
                const float *p_ = f_ + 32 * i_;                                                                   \
                f32x32 w_ = {_mm256_loadu_ps(p_), _mm256_loadu_ps(p_ + 8), _mm256_loadu_ps(p_ + 16),              \
                             _mm256_loadu_ps(p_ + 24)};                                                           \
                EMIT(i_, w_);                                                                                     \
            }                                                                                                     \
            break;                                                                                                \
        }                                                                                                         \
        }                                                                                                         \
    } while (0)

AVX2 static void dequant_avx2(uint32_t type, const void *row, float *y, size_t n) {
#define STORE(k, w)                                                                                               \
    do {                                                                                                          \
        float *y_ = y + 32 * (k);                                                                                 \
        _mm256_storeu_ps(y_, (w).v0);                                                                             \
        _mm256_storeu_ps(y_ + 8, (w).v1);                                                                         \
        _mm256_storeu_ps(y_ + 16, (w).v2);                                                                        \
        _mm256_storeu_ps(y_ + 24, (w).v3);                                                                        \
    } while (0)
    WALK_ROW(type, row, n, STORE);
#undef STORE
}

/* Dot of 32 signed quants (bytes) with x[0..32), unscaled: the block scale is applied once per block. */
AVX2 static inline __m256 i8x32_dot(__m256i q, const float *x) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_loadu_ps(x));
    __m256 b = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo))), _mm256_loadu_ps(x + 8));
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), _mm256_loadu_ps(x + 16), a);
    b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi))), _mm256_loadu_ps(x + 24), b);
    return _mm256_add_ps(a, b);
}

/* The same from 32 bytes in memory, widening 8 at a time straight from the load (no shuffles to split the row). */
AVX2 static inline __m256 i8x32_dot_mem(const int8_t *q, const float *x) {
    __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q))),
                             _mm256_loadu_ps(x));
    __m256 b = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8)))),
                             _mm256_loadu_ps(x + 8));
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 16)))),
                        _mm256_loadu_ps(x + 16), a);
    b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 24)))),
                        _mm256_loadu_ps(x + 24), b);
    return _mm256_add_ps(a, b);
}

/* Q8_0 and Q5_0, the formats of the embedding/output matrix and of most layer weights, are the decode hot path:
 * two blocks per iteration into independent accumulators, each block's scale applied once. */
AVX2 static float dot_q8_0_avx2(const block_q8_0 *b, const float *x, size_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m256 s0 = i8x32_dot_mem(b[i].qs, x + 32 * i);
        __m256 s1 = i8x32_dot_mem(b[i + 1].qs, x + 32 * i + 32);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d)), s0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i + 1].d)), s1, acc1);
    }
    for (; i < nb; i++)
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d)), i8x32_dot_mem(b[i].qs, x + 32 * i), acc0);
    return hsum256(_mm256_add_ps(acc0, acc1));
}

AVX2 static float dot_q5_0_avx2(const block_q5_0 *b, const float *x, size_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m256 s0 = i8x32_dot(q5_0_bytes(&b[i]), x + 32 * i);
        __m256 s1 = i8x32_dot(q5_0_bytes(&b[i + 1]), x + 32 * i + 32);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d)), s0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i + 1].d)), s1, acc1);
    }
    for (; i < nb; i++)
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d)), i8x32_dot(q5_0_bytes(&b[i]), x + 32 * i), acc0);
    return hsum256(_mm256_add_ps(acc0, acc1));
}

AVX2 static float dot_avx2(uint32_t type, const void *row, const float *x, size_t n) {
    if (type == CQ_QTYPE_Q8_0) return dot_q8_0_avx2(row, x, n / QK);
    if (type == CQ_QTYPE_Q5_0) return dot_q5_0_avx2(row, x, n / QK);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
#define FMA(k, w)                                                                                                 \
    do {                                                                                                          \
        const float *x_ = x + 32 * (k);                                                                           \
        acc0 = _mm256_fmadd_ps((w).v0, _mm256_loadu_ps(x_), acc0);                                                \
        acc1 = _mm256_fmadd_ps((w).v1, _mm256_loadu_ps(x_ + 8), acc1);                                            \
        acc0 = _mm256_fmadd_ps((w).v2, _mm256_loadu_ps(x_ + 16), acc0);                                           \
        acc1 = _mm256_fmadd_ps((w).v3, _mm256_loadu_ps(x_ + 24), acc1);                                           \
    } while (0)
    WALK_ROW(type, row, n, FMA);
#undef FMA
    return hsum256(_mm256_add_ps(acc0, acc1));
}

/* ---- int16 activations (the fast decode products) --------------------------------------------------------------
 * x arrives as cq_i16_block (x = d*q per 32 elements, q int16). The weights' integer quants widen to int16 and
 * vpmaddwd sums pairs into int32 (no float conversion of the weights), then one float FMA per block applies the two
 * scales. Weight quants are at most 8 bits, and Q6_K's are pre-multiplied by their int8 scale (at most 32 x 128 in
 * magnitude), so no int32 sum can overflow. */
AVX2 static inline __m256i i16x32_dot(__m256i w_lo, __m256i w_hi, const int16_t *x) { /* 8 int32 partial sums */
    return _mm256_add_epi32(_mm256_madd_epi16(w_lo, _mm256_loadu_si256((const __m256i *)x)),
                            _mm256_madd_epi16(w_hi, _mm256_loadu_si256((const __m256i *)(x + 16))));
}

/* 32 signed bytes in element order -> their dot with x, as 8 floats */
AVX2 static inline __m256 i8x32_dot_i16(__m256i q, const int16_t *x) {
    return _mm256_cvtepi32_ps(i16x32_dot(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)),
                                         _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), x));
}

/* Q5_0 block . 32 int16 activations, as the 8 int32 sums of i16x32_dot (lane k: elements 2k, 2k+1, 2k+16, 2k+17).
 * The quants are built as bytes in the order (0..7, 16..23 | 8..15, 24..31), so that the in-lane byte unpacks give
 * elements 0..15 and 16..31 as words: each byte holds its 4-bit quant in bits 4..7, and the byte unpacked above it
 * is 0xff where the 5th bit is clear (q - 16 < 0), so that the word is 16 * (q - 16) plus junk in bits 0..3, which
 * the arithmetic shift drops. */
AVX2 static inline __m256i q5_0_dot_i16(const block_q5_0 *b, const int16_t *x) {
    __m256i qs = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b->qs)),
                                     _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                      14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    __m256i nib = _mm256_sllv_epi64(qs, _mm256_setr_epi64x(4, 0, 4, 0)); /* low nibbles up; high ones in place */
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    /* byte j of the order above gets the qh byte of its element; one bit of it is the element's */
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                       _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1,
                                                        1, 1, 3, 3, 3, 3, 3, 3, 3, 3));
    __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(bits, sel), _mm256_setzero_si256());
    __m256i lo = _mm256_srai_epi16(_mm256_unpacklo_epi8(nib, neg), 4), hi = _mm256_srai_epi16(_mm256_unpackhi_epi8(nib, neg), 4);
    return i16x32_dot(lo, hi, x);
}

AVX2 static float dot_i16_avx2(uint32_t type, const void *row, const cq_i16_block *x, size_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float min_sum = 0;
    switch (type) {
    case CQ_QTYPE_Q8_0: { /* the output matrix, read from memory: a prefetch 1 KB ahead (rows follow each other) */
        const block_q8_0 *b = row;
        size_t nb = n / QK, i = 0;
        for (; i + 2 <= nb; i += 2) {
            _mm_prefetch((const char *)&b[i] + 1024, _MM_HINT_T0);
            __m256 s0 = _mm256_cvtepi32_ps(i16x32_dot(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b[i].qs)),
                                                      _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b[i].qs + 16))),
                                                      x[i].qs));
            __m256 s1 = _mm256_cvtepi32_ps(
                i16x32_dot(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b[i + 1].qs)),
                           _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b[i + 1].qs + 16))), x[i + 1].qs));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), s0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * x[i + 1].d), s1, acc1);
        }
        for (; i < nb; i++)
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d) * x[i].d),
                                   i8x32_dot_i16(_mm256_loadu_si256((const __m256i *)b[i].qs), x[i].qs), acc0);
        break;
    }
    case CQ_QTYPE_Q5_0: {
        const block_q5_0 *b = row;
        size_t nb = n / QK, i = 0;
        for (; i + 2 <= nb; i += 2) {
            __m256 s0 = _mm256_cvtepi32_ps(q5_0_dot_i16(&b[i], x[i].qs));
            __m256 s1 = _mm256_cvtepi32_ps(q5_0_dot_i16(&b[i + 1], x[i + 1].qs));
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), s0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * x[i + 1].d), s1, acc1);
        }
        for (; i < nb; i++)
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d) * x[i].d),
                                   _mm256_cvtepi32_ps(q5_0_dot_i16(&b[i], x[i].qs)), acc0);
        break;
    }
    case CQ_QTYPE_Q4_K: { /* sub-block s: d*sc*(q . x) - dmin*m*sum(x), q unsigned 0..15 */
        const block_q4_k *b = row;
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        __m256 acc_min = _mm256_setzero_ps();
        for (size_t i = 0; i < n / QK_K; i++, x += 8) {
            /* the 8 scales and 8 mins of q4k_scale_min at once, from the three 32-bit words of `scales` */
            uint64_t sc, mn;
            cq_q4k_scales_mins(&b[i], &sc, &mn);
            __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)));
            __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn)));
            __m256 xd = _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
            __m256 xs = _mm256_setr_ps(x[0].dsum, x[1].dsum, x[2].dsum, x[3].dsum, x[4].dsum, x[5].dsum, x[6].dsum,
                                       x[7].dsum);
            float scale[8]; /* d*sc*x.d of each sub-block, broadcast from memory below */
            _mm256_storeu_ps(scale, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b[i].d)), scf), xd));
            acc_min = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b[i].dmin)), mnf), xs, acc_min);
            for (int g = 0; g < 4; g++) { /* 32 bytes: low nibbles sub-block 2g, high nibbles 2g+1 */
                __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * g));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                __m256 f0 = _mm256_cvtepi32_ps(i16x32_dot(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(lo)),
                                                          _mm256_cvtepu8_epi16(_mm256_extracti128_si256(lo, 1)), x[2 * g].qs));
                __m256 f1 = _mm256_cvtepi32_ps(i16x32_dot(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(hi)),
                                                          _mm256_cvtepu8_epi16(_mm256_extracti128_si256(hi, 1)), x[2 * g + 1].qs));
                acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[2 * g]), f0, acc0);
                acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[2 * g + 1]), f1, acc1);
            }
        }
        min_sum = hsum256(acc_min);
        break;
    }
    case CQ_QTYPE_Q6_K: { /* groups of 32 with two int8 scales of 16, multiplied into the int16 quants */
        /* As in q5_0_dot_i16, the bytes of a half's sources are permuted to the order (0..7, 16..23 | 8..15, 24..31)
         * so that the byte unpacks give elements 0..15 and 16..31 as words. Byte j gets q ^ 32 in its top 6 bits
         * (the 2 high bits of q, their top one flipped, in bits 6..7; the nibble in bits 2..5; bits 0..1 zero), so the
         * word with that byte on top is 1024 * (q - 32), and vpmulhw by 64 * scale gives (q - 32) * scale exactly. */
        const block_q6_k *b = row;
        const __m256i m_nib = _mm256_set1_epi8(0x3c), m_high = _mm256_set1_epi8((char)0xc0),
                      flip = _mm256_set1_epi8((char)0xaa), zero = _mm256_setzero_si256();
        for (size_t i = 0; i < n / QK_K; i++) {
            float d = _cvtsh_ss(b[i].d);
            __m256i sc64 = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b[i].scales)), 6);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
                __m256i sc = h ? _mm256_permute4x64_epi64(sc64, 0xee) : _mm256_permute4x64_epi64(sc64, 0x44);
                __m256i l0 = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)ql), 0xd8);
                __m256i l1 = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)(ql + 32)), 0xd8);
                __m256i hb = _mm256_xor_si256(_mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i *)qh), 0xd8), flip);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++, x++) {
                    __m256i l = g & 1 ? l1 : l0;
                    l = g < 2 ? _mm256_slli_epi16(l, 2) : _mm256_srli_epi16(l, 2);
                    __m256i hg = g == 0 ? _mm256_slli_epi16(hb, 6) : g == 1 ? _mm256_slli_epi16(hb, 4) : g == 2 ? _mm256_slli_epi16(hb, 2) : hb;
                    __m256i v = _mm256_or_si256(_mm256_and_si256(l, m_nib), _mm256_and_si256(hg, m_high));
                    /* word 2g (4g+1: bytes) of each lane of sc: the scale of elements 0..15, word 2g+1 that of 16..31 */
                    __m256i s_lo = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 * (4 * g + 1) + 4 * g)));
                    __m256i s_hi = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 * (4 * g + 3) + 4 * g + 2)));
                    __m256i lo = _mm256_mulhi_epi16(_mm256_unpacklo_epi8(zero, v), s_lo);
                    __m256i hi = _mm256_mulhi_epi16(_mm256_unpackhi_epi8(zero, v), s_hi);
                    __m256 f = _mm256_cvtepi32_ps(i16x32_dot(lo, hi, x->qs));
                    if (g & 1) acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), f, acc1);
                    else acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d * x->d), f, acc0);
                }
            }
        }
        break;
    }
    default: return 0;
    }
    return hsum256(_mm256_add_ps(acc0, acc1)) - min_sum;
}

AVX2 static void quantize_i16_avx2(const float *x, size_t n, cq_i16_block *out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n / QK; i++, x += QK) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
               v3 = _mm256_loadu_ps(x + 24);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m), d = amax / 32767.0f;
        __m256 id = _mm256_set1_ps(d > 0 ? 32767.0f / amax : 0.0f);
        /* round to nearest even, as lrintf in the scalar twin */
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id)),
                i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_hadd_epi32(s4, s4);
        s4 = _mm_hadd_epi32(s4, s4);
        /* packs interleaves the 128-bit lanes; a permute of 64-bit quarters restores element order */
        __m256i p0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i0, i1), 0xd8);
        __m256i p1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i2, i3), 0xd8);
        _mm256_storeu_si256((__m256i *)out[i].qs, p0);
        _mm256_storeu_si256((__m256i *)(out[i].qs + 16), p1);
        out[i].d = d;
        out[i].dsum = d * (float)_mm_cvtsi128_si32(s4);
    }
}

/* cq_rows_i16 on AVX2: the signed bytes of q5_0_bytes / q6_k_bytes (element order, offsets applied) widened */
AVX2 static inline void store_i8x32_as_i16(int16_t *q, __m256i b) {
    _mm256_storeu_si256((__m256i *)q, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b)));
    _mm256_storeu_si256((__m256i *)(q + 16), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1)));
}

AVX2 static void unpack_rows_i16_avx2(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows, size_t n,
                                      cq_rows_i16 *o) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        int16_t *q = o->q + (size_t)r * n;
        float *scale = o->scale + (size_t)r * (n / o->block);
        switch (type) {
        case CQ_QTYPE_Q8_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q8_0 *b = (const block_q8_0 *)row + i;
                scale[i] = _cvtsh_ss(b->d);
                store_i8x32_as_i16(q + QK * i, _mm256_loadu_si256((const __m256i *)b->qs));
            }
            break;
        case CQ_QTYPE_Q5_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q5_0 *b = (const block_q5_0 *)row + i;
                scale[i] = _cvtsh_ss(b->d);
                store_i8x32_as_i16(q + QK * i, q5_0_bytes(b));
            }
            break;
        case CQ_QTYPE_Q4_K: {
            float *min = o->min + (size_t)r * (n / QK);
            for (size_t i = 0; i < n / QK_K; i++) {
                const block_q4_k *b = (const block_q4_k *)row + i;
                uint64_t sc, mn;
                cq_q4k_scales_mins(b, &sc, &mn);
                _mm256_storeu_ps(scale + 8 * i, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->d)),
                                                              _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)))));
                _mm256_storeu_ps(min + 8 * i, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->dmin)),
                                                            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn)))));
                for (int g = 0; g < 4; g++) {
                    __m256i qs = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * g));
                    store_i8x32_as_i16(q + QK_K * i + 64 * g, _mm256_and_si256(qs, m4));
                    store_i8x32_as_i16(q + QK_K * i + 64 * g + 32, _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4));
                }
            }
            break;
        }
        case CQ_QTYPE_Q6_K:
            for (size_t i = 0; i < n / QK_K; i++) {
                const block_q6_k *b = (const block_q6_k *)row + i;
                const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
                const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
                _mm256_storeu_ps(scale + 16 * i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d));
                _mm256_storeu_ps(scale + 16 * i + 8,
                                 _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc))), d));
                for (int h = 0; h < 2; h++)
                    for (int g = 0; g < 4; g++)
                        store_i8x32_as_i16(q + QK_K * i + 128 * h + 32 * g, q6_k_bytes(b->ql + 64 * h, b->qh + 32 * h, g));
            }
            break;
        default:
            memset(q, 0, n * sizeof *q);
            for (size_t i = 0; i < n / o->block; i++) scale[i] = 0;
            break;
        }
    }
}

#endif

/* The AVX2 kernels (and the AVX-512 ones, which take the products that they speed up) from CQ_ISA_AVX2 on. */
static inline int use_avx2(void) { return cq_isa_active() >= CQ_ISA_AVX2; }

void cq_dequant_row(uint32_t type, const void *row, float *out, size_t n) {
#ifdef CQ_X86
    /* F16/BF16/F32 rows need n % 32 == 0 for the vector walk; fall back otherwise. */
    if (use_avx2() && n % 32 == 0) {
        dequant_avx2(type, row, out, n);
        return;
    }
#endif
    dequant_scalar(type, row, out, n);
}

float cq_dot_row(uint32_t type, const void *row, const float *x, size_t n) {
#ifdef CQ_X86
    if (use_avx2() && n % 32 == 0) return dot_avx2(type, row, x, n);
#endif
    return dot_scalar(type, row, x, n);
}

/* ---- int16 activations: scalar twins and dispatch ------------------------------------------------------------- */

bool cq_qtype_has_i16_dot(uint32_t type) {
    return type == CQ_QTYPE_Q8_0 || type == CQ_QTYPE_Q5_0 || type == CQ_QTYPE_Q4_K || type == CQ_QTYPE_Q6_K;
}

static void quantize_i16_scalar(const float *x, size_t n, cq_i16_block *out) {
    for (size_t i = 0; i < n / QK; i++, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 32767.0f, id = d > 0 ? 32767.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            out[i].qs[j] = (int16_t)lrintf(x[j] * id);
            sum += out[i].qs[j];
        }
        out[i].d = d;
        out[i].dsum = d * (float)sum;
    }
}

/* The definition: the weights dequantized by block, against the dequantized activations. */
static float dot_i16_scalar(uint32_t type, const void *row, const cq_i16_block *x, size_t n) {
    size_t be, bb;
    if (!cq_qtype_has_i16_dot(type) || !cq_qtype_block(type, &be, &bb)) return 0;
    float w[QK_K], s = 0;
    const uint8_t *p = row;
    for (size_t i = 0; i < n; i += be, p += bb) {
        dequant_scalar(type, p, w, be);
        for (size_t j = 0; j < be; j++) s += w[j] * (x[(i + j) / QK].d * (float)x[(i + j) / QK].qs[(i + j) % QK]);
    }
    return s;
}

/* The definition of the int16 row tiles (cq_rows_i16), block by block as dequant_scalar reads them. */
static void unpack_rows_i16_scalar(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows, size_t n,
                                   cq_rows_i16 *o) {
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        int16_t *q = o->q + (size_t)r * n;
        float *scale = o->scale + (size_t)r * (n / o->block), *min = o->min + (size_t)r * (n / QK);
        switch (type) {
        case CQ_QTYPE_Q8_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q8_0 *b = (const block_q8_0 *)row + i;
                scale[i] = cq_f16_to_f32(b->d);
                for (int j = 0; j < QK; j++) q[QK * i + j] = b->qs[j];
            }
            break;
        case CQ_QTYPE_Q5_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q5_0 *b = (const block_q5_0 *)row + i;
                uint32_t qh;
                memcpy(&qh, b->qh, 4);
                scale[i] = cq_f16_to_f32(b->d);
                for (int j = 0; j < QK / 2; j++) {
                    q[QK * i + j] = (int16_t)(((b->qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4)) - 16);
                    q[QK * i + j + QK / 2] = (int16_t)(((b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16);
                }
            }
            break;
        case CQ_QTYPE_Q4_K:
            for (size_t i = 0; i < n / QK_K; i++) {
                const block_q4_k *b = (const block_q4_k *)row + i;
                const float d = cq_f16_to_f32(b->d), dmin = cq_f16_to_f32(b->dmin);
                for (int s = 0; s < 8; s++) {
                    uint8_t sc, m;
                    q4k_scale_min(b->scales, s, &sc, &m);
                    scale[8 * i + s] = d * sc, min[8 * i + s] = dmin * m;
                    const uint8_t *qs = b->qs + 32 * (s / 2);
                    for (int l = 0; l < 32; l++) q[QK_K * i + 32 * s + l] = (int16_t)(s & 1 ? qs[l] >> 4 : qs[l] & 0x0f);
                }
            }
            break;
        case CQ_QTYPE_Q6_K:
            for (size_t i = 0; i < n / QK_K; i++) {
                const block_q6_k *b = (const block_q6_k *)row + i;
                const float d = cq_f16_to_f32(b->d);
                for (int s = 0; s < 16; s++) scale[16 * i + s] = d * b->scales[s];
                for (int h = 0; h < 2; h++) {
                    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
                    int16_t *y = q + QK_K * i + 128 * h;
                    for (int l = 0; l < 32; l++) {
                        y[l] = (int16_t)(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
                        y[l + 32] = (int16_t)(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                        y[l + 64] = (int16_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                        y[l + 96] = (int16_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                    }
                }
            }
            break;
        default:
            memset(q, 0, n * sizeof *q);
            for (size_t i = 0; i < n / o->block; i++) scale[i] = 0;
            break;
        }
    }
}

void cq_unpack_rows_i16(uint32_t type, const void *rows, size_t row_bytes, int n_rows, size_t n, cq_rows_i16 *out) {
    out->n_rows = n_rows, out->n = (int)n, out->block = type == CQ_QTYPE_Q6_K ? 16 : QK;
    out->has_min = type == CQ_QTYPE_Q4_K;
#ifdef CQ_X86
    if (cq_isa_active() >= CQ_ISA_AVX512) {
        cq_unpack_rows_i16_avx512(type, rows, row_bytes, n_rows, n, out);
        return;
    }
    if (use_avx2()) {
        unpack_rows_i16_avx2(type, rows, row_bytes, n_rows, n, out);
        return;
    }
#endif
    unpack_rows_i16_scalar(type, rows, row_bytes, n_rows, n, out);
}

void cq_quantize_i16(const float *x, size_t n, cq_i16_block *out) {
#ifdef CQ_X86
    if (use_avx2()) {
        quantize_i16_avx2(x, n, out);
        return;
    }
#endif
    quantize_i16_scalar(x, n, out);
}

void cq_dot_rows_i16(uint32_t type, const void *rows, size_t row_bytes, int n_rows, const cq_i16_block *x, size_t n,
                     float *y) {
    const uint8_t *p = rows;
    if (!cq_qtype_has_i16_dot(type)) {
        for (int r = 0; r < n_rows; r++) y[r] = 0;
        return;
    }
#ifdef CQ_X86
    const cq_isa isa = cq_isa_active();
    if (isa >= CQ_ISA_AVX512) {
        cq_dot_rows_i16_avx512(type, p, row_bytes, n_rows, x, n, y);
        return;
    }
    if (isa >= CQ_ISA_AVX2) {
        for (int r = 0; r < n_rows; r++) y[r] = dot_i16_avx2(type, p + (size_t)r * row_bytes, x, n);
        return;
    }
#endif
    for (int r = 0; r < n_rows; r++) y[r] = dot_i16_scalar(type, p + (size_t)r * row_bytes, x, n);
}
