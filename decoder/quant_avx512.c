/* AVX-512 (F/BW/DQ/VL + VNNI) kernels of the weight formats, chosen at run time by quant.c (decoder/cpu_isa.h).
 * Compiled with function-level target attributes: the file builds for baseline x86-64 and its code runs only after
 * the check. Twins: the scalar definitions in quant.c; tests/unit/test_decoder_quant.c compares them on every
 * ISA level the CPU has. */
#include "decoder/quant_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")))

/* ---- int16 activations (decode steps) ----------------------------------------------------------------------------
 * Each block's 32 weight quants become one vector of 32 int16 in element order, multiplied into the block's int16
 * activations with vpmaddwd (lane k: elements 2k and 2k+1, at most 2 x 128 x 32,767), then one float FMA per block
 * applies the scales (Q6_K: a vector of its two half-block scales). vpdpwssd would add nothing here: each block's
 * sums go to float at once. */

/* Q5_0: the 16 bytes twice as words, the low nibbles of the first copy (elements 0..15) and the high nibbles of the
 * second (16..31); then -16 where the 5th bit (bit j of qh for element j) is clear. */
AVX512 static inline __m512i q5_0_words(const block_q5_0 *b) {
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i q = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b->qs)));
    q = _mm512_and_si512(_mm512_srlv_epi16(q, shift), _mm512_set1_epi16(0x0f));
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    return _mm512_mask_sub_epi16(q, (__mmask32)~qh, q, _mm512_set1_epi16(16));
}

/* Q6_K: group g (0..3) of a 128-element half as 32 bytes q (0..63): the nibble of ql (low nibbles of ql[0..31] for
 * g = 0, of ql[32..63] for g = 1, their high nibbles for g = 2, 3) and bits 2g, 2g+1 of qh on top. */
AVX512 static inline __m256i q6_k_bytes(__m256i l, __m256i h, int g) {
    if (g >= 2) l = _mm256_srli_epi16(l, 4);
    switch (g) {
    case 0: h = _mm256_slli_epi16(h, 4); break;
    case 1: h = _mm256_slli_epi16(h, 2); break;
    case 2: break;
    default: h = _mm256_srli_epi16(h, 2); break;
    }
    /* (h & 0x30) | (l & 0x0f): ternary logic (A & B) | C = 0xea */
    return _mm256_ternarylogic_epi32(h, _mm256_set1_epi8(0x30), _mm256_and_si256(l, _mm256_set1_epi8(0x0f)), 0xea);
}

AVX512 static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

/* Q8_0: the output matrix, read from memory; a prefetch 1 KB ahead, as the AVX2 kernel does (rows follow each
 * other) */
AVX512 static float dot_q8_0(const block_q8_0 *b, const cq_i16_block *x, size_t nb) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        _mm_prefetch((const char *)&b[i] + 1024, _MM_HINT_T0);
        __m512i p0 = _mm512_madd_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b[i].qs)),
                                       _mm512_loadu_si512(x[i].qs));
        __m512i p1 = _mm512_madd_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b[i + 1].qs)),
                                       _mm512_loadu_si512(x[i + 1].qs));
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i + 1].d) * x[i + 1].d), _mm512_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m512i p = _mm512_madd_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b[i].qs)),
                                      _mm512_loadu_si512(x[i].qs));
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), _mm512_cvtepi32_ps(p), acc0);
    }
    return hsum512(_mm512_add_ps(acc0, acc1));
}

AVX512 static float dot_q5_0(const block_q5_0 *b, const cq_i16_block *x, size_t nb) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m512i p0 = _mm512_madd_epi16(q5_0_words(&b[i]), _mm512_loadu_si512(x[i].qs));
        __m512i p1 = _mm512_madd_epi16(q5_0_words(&b[i + 1]), _mm512_loadu_si512(x[i + 1].qs));
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i + 1].d) * x[i + 1].d), _mm512_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m512i p = _mm512_madd_epi16(q5_0_words(&b[i]), _mm512_loadu_si512(x[i].qs));
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(b[i].d) * x[i].d), _mm512_cvtepi32_ps(p), acc0);
    }
    return hsum512(_mm512_add_ps(acc0, acc1));
}

/* Q4_K: sub-block s of 32, d*sc_s*(q . x) - dmin*m_s*sum(x), q unsigned 0..15. The 8 scales and mins unpacked at
 * once from the three 32-bit words of `scales` (as q4k_scale_min in quant.c does one at a time). */
AVX512 static float dot_q4_k(const block_q4_k *b, const cq_i16_block *x, size_t nsb) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    for (size_t i = 0; i < nsb; i++, x += 8) {
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
            __m512i lo = _mm512_cvtepu8_epi16(_mm256_and_si256(q, m4));
            __m512i hi = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            __m512i p0 = _mm512_madd_epi16(lo, _mm512_loadu_si512(x[2 * g].qs));
            __m512i p1 = _mm512_madd_epi16(hi, _mm512_loadu_si512(x[2 * g + 1].qs));
            acc0 = _mm512_fmadd_ps(_mm512_set1_ps(scale[2 * g]), _mm512_cvtepi32_ps(p0), acc0);
            acc1 = _mm512_fmadd_ps(_mm512_set1_ps(scale[2 * g + 1]), _mm512_cvtepi32_ps(p1), acc1);
        }
    }
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(acc_min), _mm256_extractf128_ps(acc_min, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum512(_mm512_add_ps(acc0, acc1)) - _mm_cvtss_f32(m);
}

/* Q6_K: groups of 32 with two int8 scales of 16. The madd lanes 0..7 hold elements 0..15 of the group and lanes
 * 8..15 elements 16..31, so one vector of scales [sc_2g x 8 | sc_2g+1 x 8] (times d and x.d) applies both. */
AVX512 static float dot_q6_k(const block_q6_k *b, const cq_i16_block *x, size_t nsb) {
    const __m512i minus32 = _mm512_set1_epi16(32);
    /* lane k of a group's scale vector: scale 2g + (k >= 8) of the half's 8 */
    const __m512i pick0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i two = _mm512_set1_epi32(2);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (size_t i = 0; i < nsb; i++) {
        /* the 16 scales as floats times d */
        const __m512 sd = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].scales))),
                                        _mm512_set1_ps(_cvtsh_ss(b[i].d)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            __m512i pick = _mm512_add_epi32(pick0, _mm512_set1_epi32(8 * h));
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++, x++) {
                __m512i q = _mm512_sub_epi16(_mm512_cvtepu8_epi16(q6_k_bytes(g & 1 ? l1 : l0, hb, g)), minus32);
                __m512i p = _mm512_madd_epi16(q, _mm512_loadu_si512(x->qs));
                __m512 s = _mm512_mul_ps(_mm512_permutexvar_ps(pick, sd), _mm512_set1_ps(x->d));
                if (g & 1) acc1 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc1);
                else acc0 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc0);
                pick = _mm512_add_epi32(pick, two);
            }
        }
    }
    return hsum512(_mm512_add_ps(acc0, acc1));
}

AVX512 void cq_dot_rows_i16_avx512(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows,
                                   const cq_i16_block *x, size_t n, float *y) {
    switch (type) {
    case CQ_QTYPE_Q8_0:
        for (int r = 0; r < n_rows; r++) y[r] = dot_q8_0((const block_q8_0 *)(rows + (size_t)r * row_bytes), x, n / QK);
        break;
    case CQ_QTYPE_Q5_0:
        for (int r = 0; r < n_rows; r++) y[r] = dot_q5_0((const block_q5_0 *)(rows + (size_t)r * row_bytes), x, n / QK);
        break;
    case CQ_QTYPE_Q4_K:
        for (int r = 0; r < n_rows; r++) y[r] = dot_q4_k((const block_q4_k *)(rows + (size_t)r * row_bytes), x, n / QK_K);
        break;
    case CQ_QTYPE_Q6_K:
        for (int r = 0; r < n_rows; r++) y[r] = dot_q6_k((const block_q6_k *)(rows + (size_t)r * row_bytes), x, n / QK_K);
        break;
    default:
        for (int r = 0; r < n_rows; r++) y[r] = 0;
        break;
    }
}
/* ---- int16 row tiles (cq_rows_i16) for the prompts' integer products ---------------------------------------- */

AVX512 void cq_unpack_rows_i16_avx512(uint32_t type, const uint8_t *rows, size_t row_bytes, int n_rows, size_t n,
                                      cq_rows_i16 *o) {
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = rows + (size_t)r * row_bytes;
        int16_t *q = o->q + (size_t)r * n;
        float *scale = o->scale + (size_t)r * (n / o->block);
        switch (type) {
        case CQ_QTYPE_Q8_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q8_0 *b = (const block_q8_0 *)row + i;
                scale[i] = _cvtsh_ss(b->d);
                _mm512_storeu_si512(q + QK * i, _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b->qs)));
            }
            break;
        case CQ_QTYPE_Q5_0:
            for (size_t i = 0; i < n / QK; i++) {
                const block_q5_0 *b = (const block_q5_0 *)row + i;
                scale[i] = _cvtsh_ss(b->d);
                _mm512_storeu_si512(q + QK * i, q5_0_words(b));
            }
            break;
        case CQ_QTYPE_Q4_K: {
            const __m256i m4 = _mm256_set1_epi8(0x0f);
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
                    _mm512_storeu_si512(q + QK_K * i + 64 * g, _mm512_cvtepu8_epi16(_mm256_and_si256(qs, m4)));
                    _mm512_storeu_si512(q + QK_K * i + 64 * g + 32,
                                        _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(qs, 4), m4)));
                }
            }
            break;
        }
        case CQ_QTYPE_Q6_K:
            for (size_t i = 0; i < n / QK_K; i++) {
                const block_q6_k *b = (const block_q6_k *)row + i;
                _mm512_storeu_ps(scale + 16 * i,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->scales))),
                                               _mm512_set1_ps(_cvtsh_ss(b->d))));
                for (int h = 0; h < 2; h++) {
                    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
                    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
                    const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++)
                        _mm512_storeu_si512(q + QK_K * i + 128 * h + 32 * g,
                                            _mm512_sub_epi16(_mm512_cvtepu8_epi16(q6_k_bytes(g & 1 ? l1 : l0, hb, g)),
                                                             _mm512_set1_epi16(32)));
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
#endif
