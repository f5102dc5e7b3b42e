#include "decoder/cpu_kernels.h"

#include <math.h>
#include <string.h>

#include "decoder/cpu_isa.h"
#include "core/exp_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CQ_X86 1
#define AVX2 __attribute__((target("avx2,fma")))

static inline int have_avx2(void) { return cq_isa_active() >= CQ_ISA_AVX2; }

AVX2 static void axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* The sum of two accumulators of a dot product: the one order that dot_avx2 and dot_heads_avx2 share. */
AVX2 static inline float hsum_pair(__m256 s0, __m256 s1) {
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

AVX2 static float dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = hsum_pair(s0, s1);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Two heads against two keys per pass (8 accumulators): each key row is loaded once for both heads, and every
 * (head, key) sum takes dot_avx2's exact sequence of operations. hd a multiple of 16. */
AVX2 static void dot_heads_avx2(const float *q, int n_heads, const float *k, size_t stride, int n, int hd,
                                float *scores, size_t lds) {
    int h = 0;
    for (; h + 2 <= n_heads; h += 2) {
        const float *qa = q + (size_t)h * hd, *qb = qa + hd;
        float *sa = scores + (size_t)h * lds, *sb = sa + lds;
        int i = 0;
        for (; i + 2 <= n; i += 2) {
            const float *k0 = k + (size_t)i * stride, *k1 = k0 + stride;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, b00 = a00, b01 = a00, b10 = a00,
                   b11 = a00;
            for (int d = 0; d < hd; d += 16) {
                __m256 x0 = _mm256_loadu_ps(k0 + d), x1 = _mm256_loadu_ps(k0 + d + 8);
                __m256 y0 = _mm256_loadu_ps(k1 + d), y1 = _mm256_loadu_ps(k1 + d + 8);
                __m256 qa0 = _mm256_loadu_ps(qa + d), qa1 = _mm256_loadu_ps(qa + d + 8);
                a00 = _mm256_fmadd_ps(qa0, x0, a00), a01 = _mm256_fmadd_ps(qa1, x1, a01);
                a10 = _mm256_fmadd_ps(qa0, y0, a10), a11 = _mm256_fmadd_ps(qa1, y1, a11);
                __m256 qb0 = _mm256_loadu_ps(qb + d), qb1 = _mm256_loadu_ps(qb + d + 8);
                b00 = _mm256_fmadd_ps(qb0, x0, b00), b01 = _mm256_fmadd_ps(qb1, x1, b01);
                b10 = _mm256_fmadd_ps(qb0, y0, b10), b11 = _mm256_fmadd_ps(qb1, y1, b11);
            }
            sa[i] = hsum_pair(a00, a01), sa[i + 1] = hsum_pair(a10, a11);
            sb[i] = hsum_pair(b00, b01), sb[i + 1] = hsum_pair(b10, b11);
        }
        for (; i < n; i++) {
            sa[i] = dot_avx2(qa, k + (size_t)i * stride, hd);
            sb[i] = dot_avx2(qb, k + (size_t)i * stride, hd);
        }
    }
    for (; h < n_heads; h++)
        for (int i = 0; i < n; i++) scores[(size_t)h * lds + i] = dot_avx2(q + (size_t)h * hd, k + (size_t)i * stride, hd);
}

/* out_h += sum_i p_h[i] v_i with the partial sums of 32 elements of two heads held in registers across all keys
 * (8 accumulators): each V row is loaded once for both heads, and every element takes axpy_avx2's fmas in key
 * order. hd a multiple of 8. */
AVX2 static void axpy_heads_avx2(float *out, size_t ldo, int n_heads, const float *p, size_t ldp, const float *v,
                                 size_t stride, int n, int hd) {
    int h = 0;
    for (; h + 2 <= n_heads; h += 2) {
        float *oa = out + (size_t)h * ldo, *ob = oa + ldo;
        const float *pa = p + (size_t)h * ldp, *pb = pa + ldp;
        int d = 0;
        for (; d + 32 <= hd; d += 32) {
            __m256 a0 = _mm256_loadu_ps(oa + d), a1 = _mm256_loadu_ps(oa + d + 8), a2 = _mm256_loadu_ps(oa + d + 16),
                   a3 = _mm256_loadu_ps(oa + d + 24), b0 = _mm256_loadu_ps(ob + d), b1 = _mm256_loadu_ps(ob + d + 8),
                   b2 = _mm256_loadu_ps(ob + d + 16), b3 = _mm256_loadu_ps(ob + d + 24);
            const float *vi = v + d;
            for (int i = 0; i < n; i++, vi += stride) {
                __m256 x0 = _mm256_loadu_ps(vi), x1 = _mm256_loadu_ps(vi + 8), x2 = _mm256_loadu_ps(vi + 16),
                       x3 = _mm256_loadu_ps(vi + 24);
                __m256 ca = _mm256_broadcast_ss(pa + i), cb = _mm256_broadcast_ss(pb + i);
                a0 = _mm256_fmadd_ps(ca, x0, a0), a1 = _mm256_fmadd_ps(ca, x1, a1);
                a2 = _mm256_fmadd_ps(ca, x2, a2), a3 = _mm256_fmadd_ps(ca, x3, a3);
                b0 = _mm256_fmadd_ps(cb, x0, b0), b1 = _mm256_fmadd_ps(cb, x1, b1);
                b2 = _mm256_fmadd_ps(cb, x2, b2), b3 = _mm256_fmadd_ps(cb, x3, b3);
            }
            _mm256_storeu_ps(oa + d, a0), _mm256_storeu_ps(oa + d + 8, a1), _mm256_storeu_ps(oa + d + 16, a2);
            _mm256_storeu_ps(oa + d + 24, a3), _mm256_storeu_ps(ob + d, b0), _mm256_storeu_ps(ob + d + 8, b1);
            _mm256_storeu_ps(ob + d + 16, b2), _mm256_storeu_ps(ob + d + 24, b3);
        }
        for (; d < hd; d += 8) {
            __m256 a0 = _mm256_loadu_ps(oa + d), b0 = _mm256_loadu_ps(ob + d);
            for (int i = 0; i < n; i++) {
                __m256 x0 = _mm256_loadu_ps(v + (size_t)i * stride + d);
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(pa + i), x0, a0);
                b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(pb + i), x0, b0);
            }
            _mm256_storeu_ps(oa + d, a0), _mm256_storeu_ps(ob + d, b0);
        }
    }
    for (; h < n_heads; h++)
        for (int i = 0; i < n; i++) axpy_avx2(out + (size_t)h * ldo, p[(size_t)h * ldp + i], v + (size_t)i * stride, hd);
}


AVX2 static double sum_exp_avx2(const float *x, int n, float shift) {
    __m256 acc = _mm256_setzero_ps(), sh = _mm256_set1_ps(shift);
    double total = 0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        acc = _mm256_add_ps(acc, cq_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh)));
        if ((i & 1023) == 1016) { /* flush to double every 1024 elements: float partial sums stay exact enough */
            float t[8];
            _mm256_storeu_ps(t, acc);
            for (int k = 0; k < 8; k++) total += t[k];
            acc = _mm256_setzero_ps();
        }
    }
    float t[8];
    _mm256_storeu_ps(t, acc);
    for (int k = 0; k < 8; k++) total += t[k];
    for (; i < n; i++) total += exp((double)(x[i] - shift));
    return total;
}

AVX2 static double exp_shift_avx2(float *x, int n, float shift) {
    __m256 acc = _mm256_setzero_ps(), sh = _mm256_set1_ps(shift);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = cq_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float t[8];
    _mm256_storeu_ps(t, acc);
    double total = 0;
    for (int k = 0; k < 8; k++) total += t[k];
    for (; i < n; i++) total += (x[i] = expf(x[i] - shift));
    return total;
}

AVX2 static void rmsnorm_avx2(float *out, const float *x, const float *w, int n, float eps) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        s0 = _mm256_fmadd_pd(a, a, s0), s1 = _mm256_fmadd_pd(b, b, s1);
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    double ss = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / n + eps));
    const __m256 vr = _mm256_set1_ps(r);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vr), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * r * w[i];
}

/* y = gelu(y) * u with tanh(z) = 1 - 2 / (exp(2z) + 1) */
AVX2 static void geglu_avx2(float *y, const float *u, int n) {
    const __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f), half = _mm256_set1_ps(0.5f),
                 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(y + i);
        __m256 z = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, x), _mm256_mul_ps(x, x), x));
        __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(cq_exp256(_mm256_mul_ps(two, z)), one)));
        __m256 g = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(g, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = cq_k_gelu_tanh(y[i]) * u[i];
}

/* y = silu(y) * u = y / (1 + exp(-y)) * u */
AVX2 static void swiglu_avx2(float *y, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(y + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, cq_exp256(_mm256_sub_ps(zero, x))));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = cq_k_silu(y[i]) * u[i];
}

/* cq_k_pack_tokens by 8 x 8 blocks (8 tokens' 8 elements in, 8 elements' 8 tokens out): the strided reads of
 * the plain loop made the packing ~4 % of a prompt's time. k a multiple of 8. */
AVX2 static void pack_tokens_avx2(const float *x, size_t ldx, int n_tokens, int k, float *xt, size_t w) {
    int t = 0;
    for (; t + 8 <= n_tokens; t += 8) {
        for (int kk = 0; kk < k; kk += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(x + (size_t)(t + i) * ldx + kk);
            /* 8 x 8 transpose: pairs, then quads, then 128-bit halves */
            __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
            __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
            __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
            __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
            __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xee);
            __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xee);
            __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xee);
            __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xee);
            float *o = xt + (size_t)kk * w + t;
            _mm256_storeu_ps(o, _mm256_permute2f128_ps(b0, b4, 0x20));
            _mm256_storeu_ps(o + w, _mm256_permute2f128_ps(b1, b5, 0x20));
            _mm256_storeu_ps(o + 2 * w, _mm256_permute2f128_ps(b2, b6, 0x20));
            _mm256_storeu_ps(o + 3 * w, _mm256_permute2f128_ps(b3, b7, 0x20));
            _mm256_storeu_ps(o + 4 * w, _mm256_permute2f128_ps(b0, b4, 0x31));
            _mm256_storeu_ps(o + 5 * w, _mm256_permute2f128_ps(b1, b5, 0x31));
            _mm256_storeu_ps(o + 6 * w, _mm256_permute2f128_ps(b2, b6, 0x31));
            _mm256_storeu_ps(o + 7 * w, _mm256_permute2f128_ps(b3, b7, 0x31));
        }
    }
    for (int kk = 0; kk < k; kk++) {
        float *row = xt + (size_t)kk * w;
        for (int tt = t; tt < n_tokens; tt++) row[tt] = x[(size_t)tt * ldx + kk];
        for (size_t tt = (size_t)n_tokens; tt < w; tt++) row[tt] = 0;
    }
}

/* 6 rows x 16 tokens: per k, two vector loads of packed tokens meet six broadcast weights (12 FMAs). Rows past
 * n_rows repeat the last row and are not stored. */
AVX2 static void kernel_6x16(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt, int n_tok,
                             float *y, size_t ldy) {
    const float *w0 = w, *w1 = w + (n_rows > 1) * ldw, *w2 = w + (n_rows > 2 ? 2 : n_rows - 1) * ldw,
                *w3 = w + (n_rows > 3 ? 3 : n_rows - 1) * ldw, *w4 = w + (n_rows > 4 ? 4 : n_rows - 1) * ldw,
                *w5 = w + (n_rows > 5 ? 5 : n_rows - 1) * ldw;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int i = 0; i < k; i++) {
        const float *xi = xt + (size_t)i * ldxt;
        __m256 x0 = _mm256_loadu_ps(xi), x1 = _mm256_loadu_ps(xi + 8), b;
        b = _mm256_broadcast_ss(w0 + i), c00 = _mm256_fmadd_ps(b, x0, c00), c01 = _mm256_fmadd_ps(b, x1, c01);
        b = _mm256_broadcast_ss(w1 + i), c10 = _mm256_fmadd_ps(b, x0, c10), c11 = _mm256_fmadd_ps(b, x1, c11);
        b = _mm256_broadcast_ss(w2 + i), c20 = _mm256_fmadd_ps(b, x0, c20), c21 = _mm256_fmadd_ps(b, x1, c21);
        b = _mm256_broadcast_ss(w3 + i), c30 = _mm256_fmadd_ps(b, x0, c30), c31 = _mm256_fmadd_ps(b, x1, c31);
        b = _mm256_broadcast_ss(w4 + i), c40 = _mm256_fmadd_ps(b, x0, c40), c41 = _mm256_fmadd_ps(b, x1, c41);
        b = _mm256_broadcast_ss(w5 + i), c50 = _mm256_fmadd_ps(b, x0, c50), c51 = _mm256_fmadd_ps(b, x1, c51);
    }
    float out[6][16];
    _mm256_storeu_ps(out[0], c00), _mm256_storeu_ps(out[0] + 8, c01);
    _mm256_storeu_ps(out[1], c10), _mm256_storeu_ps(out[1] + 8, c11);
    _mm256_storeu_ps(out[2], c20), _mm256_storeu_ps(out[2] + 8, c21);
    _mm256_storeu_ps(out[3], c30), _mm256_storeu_ps(out[3] + 8, c31);
    _mm256_storeu_ps(out[4], c40), _mm256_storeu_ps(out[4] + 8, c41);
    _mm256_storeu_ps(out[5], c50), _mm256_storeu_ps(out[5] + 8, c51);
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n_rows; r++) y[(size_t)t * ldy + r] = out[r][t];
}

/* 6 rows x 8 tokens, for the last panel when it holds 8 tokens or fewer. */
AVX2 static void kernel_6x8(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt, int n_tok,
                            float *y, size_t ldy) {
    const float *wr[6];
    for (int r = 0; r < 6; r++) wr[r] = w + (size_t)(r < n_rows ? r : n_rows - 1) * ldw;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    for (int i = 0; i < k; i++) {
        __m256 x0 = _mm256_loadu_ps(xt + (size_t)i * ldxt);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[0] + i), x0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[1] + i), x0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[2] + i), x0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[3] + i), x0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[4] + i), x0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(wr[5] + i), x0, c5);
    }
    float out[6][8];
    _mm256_storeu_ps(out[0], c0), _mm256_storeu_ps(out[1], c1), _mm256_storeu_ps(out[2], c2);
    _mm256_storeu_ps(out[3], c3), _mm256_storeu_ps(out[4], c4), _mm256_storeu_ps(out[5], c5);
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n_rows; r++) y[(size_t)t * ldy + r] = out[r][t];
}

AVX2 static void rows_times_tokens_avx2(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt,
                                        int n_tokens, float *y, size_t ldy) {
    for (int r = 0; r < n_rows; r += 6) {
        int nr = n_rows - r < 6 ? n_rows - r : 6;
        int t = 0;
        for (; n_tokens - t > 8; t += 16) {
            int nt = n_tokens - t < 16 ? n_tokens - t : 16;
            kernel_6x16(w + (size_t)r * ldw, ldw, nr, k, xt + t, ldxt, nt, y + (size_t)t * ldy + r, ldy);
        }
        if (t < n_tokens) kernel_6x8(w + (size_t)r * ldw, ldw, nr, k, xt + t, ldxt, n_tokens - t, y + (size_t)t * ldy + r, ldy);
    }
}
/* ---- the prompts' integer products (AVX2) -----------------------------------------------------------------------
 * 3 rows x 16 tokens (two vectors of 8; 8 when fewer remain): per pair of elements, vpmaddwd of the broadcast row
 * pair with the tokens' pairs, added into int32 lanes; after each block of the weights, the lanes go to float as in
 * kernel_i16_avx512. 6 int32 accumulators (the float sums in L1): vpmaddwd (16 products) and vpaddd run on more ports
 * than the FMA (8), so this does a little more products a cycle than the float tiles. */
#define TILE_ROWS_AVX2 3

AVX2 __attribute__((always_inline)) static inline void kernel_i16_avx2(const cq_rows_i16 *w, int r0, int nr,
                                                                     const cq_tokens_i16 *x, int t0, int nt, float *y,
                                                                     size_t ldy, const int nj, const int B) {
    const int k = w->n, nblk = k / B;
    const int16_t *wq[TILE_ROWS_AVX2];
    const float *ws[TILE_ROWS_AVX2], *wm[TILE_ROWS_AVX2];
    for (int r = 0; r < TILE_ROWS_AVX2; r++) {
        const int rr = r0 + (r < nr ? r : nr - 1);
        wq[r] = w->q + (size_t)rr * k, ws[r] = w->scale + (size_t)rr * nblk;
        wm[r] = w->min + (size_t)rr * (k / 32);
    }
    const size_t W = x->width;
    /* the float sums live in memory (L1): 16 registers hold the int32 sums, the token pairs and a broadcast */
    float out[TILE_ROWS_AVX2][16];
    memset(out, 0, sizeof out);
    for (int b = 0; b < nblk; b++) {
        __m256i acc[TILE_ROWS_AVX2][2];
#pragma GCC unroll 3
        for (int r = 0; r < TILE_ROWS_AVX2; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        const int32_t *xq = x->q + (size_t)b * (B / 2) * W + t0;
#pragma GCC unroll 16
        for (int p = 0; p < B / 2; p++, xq += W) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)xq),
                          x1 = nj > 1 ? _mm256_loadu_si256((const __m256i *)(xq + 8)) : x0;
#pragma GCC unroll 3
            for (int r = 0; r < TILE_ROWS_AVX2; r++) {
                int32_t pair;
                memcpy(&pair, wq[r] + b * B + 2 * p, 4);
                const __m256i wb = _mm256_set1_epi32(pair);
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(wb, x0));
                if (nj > 1) acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(wb, x1));
                /* keeps each sum a chain in its register: reassociated into trees, the products of a block were all
                 * live at once and spilled */
                __asm__("" : "+x"(acc[r][0]), "+x"(acc[r][1]));
            }
        }
        const size_t xb = (size_t)(b * B / 32) * W + t0;
        const __m256 d0 = _mm256_loadu_ps(x->d + xb), d1 = nj > 1 ? _mm256_loadu_ps(x->d + xb + 8) : d0;
        const __m256 m0 = w->has_min ? _mm256_loadu_ps(x->dsum + xb) : _mm256_setzero_ps(),
                     m1 = nj > 1 && w->has_min ? _mm256_loadu_ps(x->dsum + xb + 8) : m0;
#pragma GCC unroll 3
        for (int r = 0; r < TILE_ROWS_AVX2; r++) {
            const __m256 sc = _mm256_set1_ps(ws[r][b]), mr = _mm256_set1_ps(w->has_min ? wm[r][b] : 0.0f);
            __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(sc, d0), _mm256_loadu_ps(out[r]));
            _mm256_storeu_ps(out[r], _mm256_fnmadd_ps(mr, m0, f));
            if (nj > 1) {
                f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(sc, d1), _mm256_loadu_ps(out[r] + 8));
                _mm256_storeu_ps(out[r] + 8, _mm256_fnmadd_ps(mr, m1, f));
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) y[(size_t)(t0 + t) * ldy + r0 + r] = out[r][t];
}

#define KERNEL_I16_AVX2(B)                                                                                           \
    AVX2 static void rows_times_tokens_i16_avx2_##B(const cq_rows_i16 *w, const cq_tokens_i16 *x, float *y,         \
                                                    size_t ldy) {                                                   \
        for (int r = 0; r < w->n_rows; r += TILE_ROWS_AVX2) {                                                       \
            const int nr = w->n_rows - r < TILE_ROWS_AVX2 ? w->n_rows - r : TILE_ROWS_AVX2;                         \
            int t = 0;                                                                                              \
            for (; x->n_tokens - t > 8; t += 16)                                                                    \
                kernel_i16_avx2(w, r, nr, x, t, x->n_tokens - t < 16 ? x->n_tokens - t : 16, y, ldy, 2, B);         \
            if (t < x->n_tokens) kernel_i16_avx2(w, r, nr, x, t, x->n_tokens - t, y, ldy, 1, B);                    \
        }                                                                                                           \
    }
KERNEL_I16_AVX2(32)
KERNEL_I16_AVX2(16)

/* ---- the prompts' integer products (AVX-512 VNNI) ------------------------------------------------------------- *
 * 6 rows x 32 tokens (two vectors of 16 tokens; 16 when fewer remain): per pair of elements, one load of the pairs
 * of 16 tokens meets the broadcast pair of each row in vpdpwssd (int32 lanes = tokens); after each block of the
 * weights, the lanes go to float times scale_r * d_t (and - min_r * dsum_t). 12 int32 and 12 float accumulators. */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma")))
#define TILE_ROWS 6

AVX512 __attribute__((always_inline)) static inline void kernel_i16_avx512(const cq_rows_i16 *w, int r0, int nr, const cq_tokens_i16 *x, int t0,
                                            int nt, float *y, size_t ldy, const int nj, const int B) {
    const int k = w->n, nblk = k / B;
    const int16_t *wq[TILE_ROWS];
    const float *ws[TILE_ROWS], *wm[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; r++) {
        const int rr = r0 + (r < nr ? r : nr - 1); /* rows past nr repeat the last one and are not stored */
        wq[r] = w->q + (size_t)rr * k, ws[r] = w->scale + (size_t)rr * nblk;
        wm[r] = w->min + (size_t)rr * (k / 32);
    }
    const size_t W = x->width;
    __m512 f[TILE_ROWS][2];
#pragma GCC unroll 6
    for (int r = 0; r < TILE_ROWS; r++) f[r][0] = f[r][1] = _mm512_setzero_ps();
    for (int b = 0; b < nblk; b++) {
        __m512i acc[TILE_ROWS][2];
#pragma GCC unroll 6
        for (int r = 0; r < TILE_ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
        const int32_t *xq = x->q + (size_t)b * (B / 2) * W + t0;
#pragma GCC unroll 16
        for (int p = 0; p < B / 2; p++, xq += W) {
            const __m512i x0 = _mm512_loadu_si512(xq), x1 = nj > 1 ? _mm512_loadu_si512(xq + 16) : x0;
#pragma GCC unroll 6
            for (int r = 0; r < TILE_ROWS; r++) {
                int32_t pair;
                memcpy(&pair, wq[r] + b * B + 2 * p, 4);
                const __m512i wb = _mm512_set1_epi32(pair);
                acc[r][0] = _mm512_dpwssd_epi32(acc[r][0], wb, x0);
                if (nj > 1) acc[r][1] = _mm512_dpwssd_epi32(acc[r][1], wb, x1);
            }
        }
        const size_t xb = (size_t)(b * B / 32) * W + t0;
        const __m512 d0 = _mm512_loadu_ps(x->d + xb), d1 = nj > 1 ? _mm512_loadu_ps(x->d + xb + 16) : d0;
#pragma GCC unroll 6
        for (int r = 0; r < TILE_ROWS; r++) {
            const __m512 s = _mm512_set1_ps(ws[r][b]);
            f[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]), _mm512_mul_ps(s, d0), f[r][0]);
            if (nj > 1) f[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][1]), _mm512_mul_ps(s, d1), f[r][1]);
        }
        if (w->has_min) { /* Q4_K: block 32 */
            const __m512 m0 = _mm512_loadu_ps(x->dsum + xb), m1 = nj > 1 ? _mm512_loadu_ps(x->dsum + xb + 16) : m0;
#pragma GCC unroll 6
            for (int r = 0; r < TILE_ROWS; r++) {
                const __m512 m = _mm512_set1_ps(wm[r][b]);
                f[r][0] = _mm512_fnmadd_ps(m, m0, f[r][0]);
                if (nj > 1) f[r][1] = _mm512_fnmadd_ps(m, m1, f[r][1]);
            }
        }
    }
    float out[TILE_ROWS][32];
#pragma GCC unroll 6
    for (int r = 0; r < TILE_ROWS; r++) {
        _mm512_storeu_ps(out[r], f[r][0]);
        if (nj > 1) _mm512_storeu_ps(out[r] + 16, f[r][1]);
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) y[(size_t)(t0 + t) * ldy + r0 + r] = out[r][t];
}

/* ---- attention on AVX-512: the same sums as the AVX2 kernels, bit for bit ---------------------------------------
 * A zmm accumulator over 16 elements holds dot_avx2's two ymm ones (lanes 0..7 and 8..15), and its halves added
 * first give hsum_pair's order; an axpy element is the same chain of FMAs in key order. So the exact mode's results
 * do not depend on the level. What changes is the traffic: four heads per pass over the keys (each K row read once
 * for all four), and V rows read 256 bytes at a time for four heads. */

AVX512 static inline float hsum_zmm(__m512 z) { /* = hsum_pair(low half, high half) */
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(z), _mm512_extractf32x8_ps(z, 1));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* four heads against two keys per pass (8 accumulators); hd a multiple of 16 */
AVX512 static void dot_heads_avx512(const float *q, int n_heads, const float *k, size_t stride, int n, int hd,
                                    float *scores, size_t lds) {
    int h = 0;
    for (; h + 4 <= n_heads; h += 4) {
        const float *q0 = q + (size_t)h * hd, *q1 = q0 + hd, *q2 = q1 + hd, *q3 = q2 + hd;
        float *s0 = scores + (size_t)h * lds, *s1 = s0 + lds, *s2 = s1 + lds, *s3 = s2 + lds;
        int i = 0;
        for (; i + 2 <= n; i += 2) {
            const float *ka = k + (size_t)i * stride, *kb = ka + stride;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int d = 0; d < hd; d += 16) {
                const __m512 x = _mm512_loadu_ps(ka + d), y = _mm512_loadu_ps(kb + d);
                __m512 w = _mm512_loadu_ps(q0 + d);
                a0 = _mm512_fmadd_ps(w, x, a0), b0 = _mm512_fmadd_ps(w, y, b0);
                w = _mm512_loadu_ps(q1 + d);
                a1 = _mm512_fmadd_ps(w, x, a1), b1 = _mm512_fmadd_ps(w, y, b1);
                w = _mm512_loadu_ps(q2 + d);
                a2 = _mm512_fmadd_ps(w, x, a2), b2 = _mm512_fmadd_ps(w, y, b2);
                w = _mm512_loadu_ps(q3 + d);
                a3 = _mm512_fmadd_ps(w, x, a3), b3 = _mm512_fmadd_ps(w, y, b3);
            }
            s0[i] = hsum_zmm(a0), s1[i] = hsum_zmm(a1), s2[i] = hsum_zmm(a2), s3[i] = hsum_zmm(a3);
            s0[i + 1] = hsum_zmm(b0), s1[i + 1] = hsum_zmm(b1), s2[i + 1] = hsum_zmm(b2), s3[i + 1] = hsum_zmm(b3);
        }
        if (i < n) dot_heads_avx2(q0, 4, k + (size_t)i * stride, stride, 1, hd, scores + (size_t)h * lds + i, lds);
    }
    if (h < n_heads) dot_heads_avx2(q + (size_t)h * hd, n_heads - h, k, stride, n, hd, scores + (size_t)h * lds, lds);
}

/* four heads x 64 elements held in 16 accumulators across all keys; hd a multiple of 16 */
AVX512 static void axpy_heads_avx512(float *out, size_t ldo, int n_heads, const float *p, size_t ldp, const float *v,
                                     size_t stride, int n, int hd) {
    int h = 0;
    for (; h + 4 <= n_heads; h += 4) {
        float *o[4];
        const float *ph[4];
        for (int j = 0; j < 4; j++) o[j] = out + (size_t)(h + j) * ldo, ph[j] = p + (size_t)(h + j) * ldp;
        int d = 0;
        for (; d + 64 <= hd; d += 64) {
            __m512 acc[4][4];
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++) acc[j][e] = _mm512_loadu_ps(o[j] + d + 16 * e);
            const float *vi = v + d;
            for (int i = 0; i < n; i++, vi += stride) {
                const __m512 x0 = _mm512_loadu_ps(vi), x1 = _mm512_loadu_ps(vi + 16), x2 = _mm512_loadu_ps(vi + 32),
                             x3 = _mm512_loadu_ps(vi + 48);
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const __m512 c = _mm512_set1_ps(ph[j][i]);
                    acc[j][0] = _mm512_fmadd_ps(c, x0, acc[j][0]), acc[j][1] = _mm512_fmadd_ps(c, x1, acc[j][1]);
                    acc[j][2] = _mm512_fmadd_ps(c, x2, acc[j][2]), acc[j][3] = _mm512_fmadd_ps(c, x3, acc[j][3]);
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++) _mm512_storeu_ps(o[j] + d + 16 * e, acc[j][e]);
        }
        for (; d < hd; d += 16) {
            __m512 a0 = _mm512_loadu_ps(o[0] + d), a1 = _mm512_loadu_ps(o[1] + d), a2 = _mm512_loadu_ps(o[2] + d),
                   a3 = _mm512_loadu_ps(o[3] + d);
            for (int i = 0; i < n; i++) {
                const __m512 x = _mm512_loadu_ps(v + (size_t)i * stride + d);
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(ph[0][i]), x, a0), a1 = _mm512_fmadd_ps(_mm512_set1_ps(ph[1][i]), x, a1);
                a2 = _mm512_fmadd_ps(_mm512_set1_ps(ph[2][i]), x, a2), a3 = _mm512_fmadd_ps(_mm512_set1_ps(ph[3][i]), x, a3);
            }
            _mm512_storeu_ps(o[0] + d, a0), _mm512_storeu_ps(o[1] + d, a1), _mm512_storeu_ps(o[2] + d, a2);
            _mm512_storeu_ps(o[3] + d, a3);
        }
    }
    if (h < n_heads) axpy_heads_avx2(out + (size_t)h * ldo, ldo, n_heads - h, p + (size_t)h * ldp, ldp, v, stride, n, hd);
}

/* The float product on AVX-512: 12 rows x 32 tokens (16 when fewer remain), per k two loads of packed tokens meet
 * 12 broadcast weights (24 FMAs, 24 accumulators). Every output is the same chain of FMAs in k order as in
 * kernel_6x16, so the results are bit for bit those of the AVX2 path. Rows past n_rows repeat the last row and are
 * not stored. */
#define FTILE_ROWS 12
AVX512 __attribute__((always_inline)) static inline void kernel_f32_avx512(const float *w, size_t ldw, int n_rows, int k,
                                                                         const float *xt, size_t ldxt, int n_tok,
                                                                         float *y, size_t ldy, const int nj) {
    const float *wr[FTILE_ROWS];
    for (int r = 0; r < FTILE_ROWS; r++) wr[r] = w + (size_t)(r < n_rows ? r : n_rows - 1) * ldw;
    __m512 c[FTILE_ROWS][2];
#pragma GCC unroll 12
    for (int r = 0; r < FTILE_ROWS; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (int i = 0; i < k; i++) {
        const float *xi = xt + (size_t)i * ldxt;
        const __m512 x0 = _mm512_loadu_ps(xi), x1 = nj > 1 ? _mm512_loadu_ps(xi + 16) : x0;
#pragma GCC unroll 12
        for (int r = 0; r < FTILE_ROWS; r++) {
            const __m512 b = _mm512_set1_ps(wr[r][i]);
            c[r][0] = _mm512_fmadd_ps(b, x0, c[r][0]);
            if (nj > 1) c[r][1] = _mm512_fmadd_ps(b, x1, c[r][1]);
        }
    }
    float out[FTILE_ROWS][32];
#pragma GCC unroll 12
    for (int r = 0; r < FTILE_ROWS; r++) {
        _mm512_storeu_ps(out[r], c[r][0]);
        if (nj > 1) _mm512_storeu_ps(out[r] + 16, c[r][1]);
    }
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n_rows; r++) y[(size_t)t * ldy + r] = out[r][t];
}

AVX512 static void rows_times_tokens_avx512(const float *w, size_t ldw, int n_rows, int k, const float *xt,
                                            size_t ldxt, int n_tokens, float *y, size_t ldy) {
    for (int r = 0; r < n_rows; r += FTILE_ROWS) {
        const int nr = n_rows - r < FTILE_ROWS ? n_rows - r : FTILE_ROWS;
        int t = 0;
        for (; n_tokens - t > 16; t += 32)
            kernel_f32_avx512(w + (size_t)r * ldw, ldw, nr, k, xt + t, ldxt, n_tokens - t < 32 ? n_tokens - t : 32,
                              y + (size_t)t * ldy + r, ldy, 2);
        if (t < n_tokens)
            kernel_f32_avx512(w + (size_t)r * ldw, ldw, nr, k, xt + t, ldxt, n_tokens - t, y + (size_t)t * ldy + r, ldy, 1);
    }
}

/* the kernel specialized by block size (the inner loop unrolled) */
#define KERNEL_I16_AVX512(B)                                                                                         \
    AVX512 static void rows_times_tokens_i16_avx512_##B(const cq_rows_i16 *w, const cq_tokens_i16 *x, float *y,     \
                                                        size_t ldy) {                                               \
        for (int r = 0; r < w->n_rows; r += TILE_ROWS) {                                                            \
            const int nr = w->n_rows - r < TILE_ROWS ? w->n_rows - r : TILE_ROWS;                                   \
            int t = 0;                                                                                              \
            for (; x->n_tokens - t > 16; t += 32)                                                                   \
                kernel_i16_avx512(w, r, nr, x, t, x->n_tokens - t < 32 ? x->n_tokens - t : 32, y, ldy, 2, B);       \
            if (t < x->n_tokens) kernel_i16_avx512(w, r, nr, x, t, x->n_tokens - t, y, ldy, 1, B);                  \
        }                                                                                                           \
    }
KERNEL_I16_AVX512(32)
KERNEL_I16_AVX512(16)
#else
static inline int have_avx2(void) { return 0; }
#endif

float cq_k_dot(const float *a, const float *b, int n) {
#ifdef CQ_X86
    if (have_avx2()) return dot_avx2(a, b, n);
#endif
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void cq_k_axpy(float *y, float a, const float *x, int n) {
#ifdef CQ_X86
    if (have_avx2()) {
        axpy_avx2(y, a, x, n);
        return;
    }
#endif
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

void cq_k_dot_heads(const float *q, int n_heads, const float *k, size_t stride, int n, int hd, float *scores,
                    size_t lds) {
#ifdef CQ_X86
    if (cq_isa_active() >= CQ_ISA_AVX512 && hd % 16 == 0) {
        dot_heads_avx512(q, n_heads, k, stride, n, hd, scores, lds);
        return;
    }
    if (have_avx2() && hd % 16 == 0) {
        dot_heads_avx2(q, n_heads, k, stride, n, hd, scores, lds);
        return;
    }
#endif
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < n; i++) scores[(size_t)h * lds + i] = cq_k_dot(q + (size_t)h * hd, k + (size_t)i * stride, hd);
}

void cq_k_axpy_heads(float *out, size_t ldo, int n_heads, const float *p, size_t ldp, const float *v, size_t stride,
                     int n, int hd) {
#ifdef CQ_X86
    if (cq_isa_active() >= CQ_ISA_AVX512 && hd % 16 == 0) {
        axpy_heads_avx512(out, ldo, n_heads, p, ldp, v, stride, n, hd);
        return;
    }
    if (have_avx2() && hd % 8 == 0) {
        axpy_heads_avx2(out, ldo, n_heads, p, ldp, v, stride, n, hd);
        return;
    }
#endif
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < n; i++) cq_k_axpy(out + (size_t)h * ldo, p[(size_t)h * ldp + i], v + (size_t)i * stride, hd);
}

void cq_k_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
#ifdef CQ_X86
    if (have_avx2()) {
        rmsnorm_avx2(out, x, w, n, eps);
        return;
    }
#endif
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

float cq_k_gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

float cq_k_silu(float x) { return x / (1.0f + expf(-x)); }

void cq_k_swiglu(float *y, const float *u, int n) {
#ifdef CQ_X86
    if (have_avx2()) {
        swiglu_avx2(y, u, n);
        return;
    }
#endif
    for (int i = 0; i < n; i++) y[i] = cq_k_silu(y[i]) * u[i];
}

void cq_k_geglu(float *y, const float *u, int n) {
#ifdef CQ_X86
    if (have_avx2()) {
        geglu_avx2(y, u, n);
        return;
    }
#endif
    for (int i = 0; i < n; i++) y[i] = cq_k_gelu_tanh(y[i]) * u[i];
}

double cq_k_sum_exp(const float *x, int n, float shift) {
#ifdef CQ_X86
    if (have_avx2()) return sum_exp_avx2(x, n, shift);
#endif
    double total = 0;
    for (int i = 0; i < n; i++) total += exp((double)(x[i] - shift));
    return total;
}

double cq_k_exp_shift(float *x, int n, float shift) {
#ifdef CQ_X86
    if (have_avx2()) return exp_shift_avx2(x, n, shift);
#endif
    double total = 0;
    for (int i = 0; i < n; i++) total += (x[i] = expf(x[i] - shift));
    return total;
}

size_t cq_k_packed_width(int n_tokens) { return ((size_t)n_tokens + 15) / 16 * 16; }

void cq_k_pack_tokens(const float *x, size_t ldx, int n_tokens, int k, float *xt) {
    size_t w = cq_k_packed_width(n_tokens);
#ifdef CQ_X86
    if (have_avx2() && k % 8 == 0) {
        pack_tokens_avx2(x, ldx, n_tokens, k, xt, w);
        return;
    }
#endif
    for (int kk = 0; kk < k; kk++) {
        float *row = xt + (size_t)kk * w;
        for (int t = 0; t < n_tokens; t++) row[t] = x[(size_t)t * ldx + kk];
        for (size_t t = (size_t)n_tokens; t < w; t++) row[t] = 0;
    }
}

void cq_k_rows_times_tokens(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt, int n_tokens,
                            float *y, size_t ldy) {
#ifdef CQ_X86
    if (cq_isa_active() >= CQ_ISA_AVX512) {
        rows_times_tokens_avx512(w, ldw, n_rows, k, xt, ldxt, n_tokens, y, ldy);
        return;
    }
    if (have_avx2()) {
        rows_times_tokens_avx2(w, ldw, n_rows, k, xt, ldxt, n_tokens, y, ldy);
        return;
    }
#endif
    for (int r = 0; r < n_rows; r++) {
        for (int t = 0; t < n_tokens; t++) {
            float s = 0;
            for (int kk = 0; kk < k; kk++) s += w[(size_t)r * ldw + kk] * xt[(size_t)kk * ldxt + t];
            y[(size_t)t * ldy + r] = s;
        }
    }
}

void cq_k_pack_tokens_i16(const float *x, size_t ldx, int n_tokens, int k, cq_tokens_i16 *out) {
    const size_t W = cq_k_packed_width(n_tokens);
    out->n_tokens = n_tokens, out->k = k, out->width = W;
    for (int t = 0; t < (int)W; t++) {
        for (int b = 0; b < k / 32; b++) {
            cq_i16_block blk;
            if (t < n_tokens) cq_quantize_i16(x + (size_t)t * ldx + 32 * b, 32, &blk);
            else memset(&blk, 0, sizeof blk);
            for (int p = 0; p < 16; p++) memcpy(&out->q[(size_t)(16 * b + p) * W + t], &blk.qs[2 * p], 4);
            out->d[(size_t)b * W + t] = blk.d, out->dsum[(size_t)b * W + t] = blk.dsum;
        }
    }
}

void cq_k_rows_times_tokens_i16(const cq_rows_i16 *w, const cq_tokens_i16 *x, float *y, size_t ldy) {
#ifdef CQ_X86
    if (cq_isa_active() >= CQ_ISA_AVX512 && (w->block == 32 || w->block == 16)) {
        if (w->block == 32) rows_times_tokens_i16_avx512_32(w, x, y, ldy);
        else rows_times_tokens_i16_avx512_16(w, x, y, ldy);
        return;
    }
    if (have_avx2() && (w->block == 32 || w->block == 16)) {
        if (w->block == 32) rows_times_tokens_i16_avx2_32(w, x, y, ldy);
        else rows_times_tokens_i16_avx2_16(w, x, y, ldy);
        return;
    }
#endif
    const int k = w->n, B = w->block;
    for (int r = 0; r < w->n_rows; r++) {
        const int16_t *q = w->q + (size_t)r * k;
        for (int t = 0; t < x->n_tokens; t++) {
            float s = 0;
            for (int b = 0; b < k / B; b++) {
                int32_t dot = 0;
                for (int i = b * B; i < (b + 1) * B; i++) {
                    int16_t xi[2];
                    memcpy(xi, &x->q[(size_t)(i / 2) * x->width + t], 4);
                    dot += q[i] * xi[i & 1];
                }
                s += w->scale[(size_t)r * (k / B) + b] * x->d[(size_t)(b * B / 32) * x->width + t] * (float)dot;
                if (w->has_min && B == 32) s -= w->min[(size_t)r * (k / 32) + b] * x->dsum[(size_t)b * x->width + t];
            }
            y[(size_t)t * ldy + r] = s;
        }
    }
}

bool cq_k_tokens_i16_fast(void) { return cq_isa_active() >= CQ_ISA_AVX2; }

/* ---- low-rank side product of an adapter (forward_cpu.c) ------------------------------------------------------ */

#define LOWRANK_TILE 16 /* outputs a tile of the B factor holds: for each rank index, 16 consecutive bf16 (32 B) */

static inline size_t lowrank_index(int rank, int i, int j) {
    return (size_t)(i / LOWRANK_TILE) * rank * LOWRANK_TILE + (size_t)j * LOWRANK_TILE + i % LOWRANK_TILE;
}

#ifdef CQ_X86
#define BF16X8(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
/* cnt outputs from output i (i % 8 + cnt <= 8) by one masked vector: the tile's 8 values of i's group rotated so
 * that lane l holds output i + l, and y read and written in lanes l < cnt only (no output of another task). */
AVX2 static void lowrank_part8(float *y, int i, int cnt, const float *u, int rank, const uint16_t *bt) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), lane);
    const __m256i from = _mm256_and_si256(_mm256_add_epi32(lane, _mm256_set1_epi32(i % 8)), _mm256_set1_epi32(7));
    const uint16_t *b = bt + lowrank_index(rank, i - i % 8, 0);
    __m256 a0 = _mm256_maskload_ps(y, mask);
    for (int j = 0; j < rank; j++, b += LOWRANK_TILE)
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(u[j]), _mm256_permutevar8x32_ps(BF16X8(b), from), a0);
    _mm256_maskstore_ps(y, mask, a0);
}

/* Outputs [i, i + n): whole tiles (16 outputs, read front to back: two at once where they can), and 8 outputs at a
 * time where the range starts or ends inside a tile, masked inside 8. */
AVX2 static void lowrank_rows_avx2(float *y, int i, int n, const float *u, int rank, const uint16_t *bt) {
    const size_t tile = (size_t)rank * LOWRANK_TILE;
    int k = 0;
    if (i % 8) { /* up to the next multiple of 8 */
        k = 8 - i % 8 < n ? 8 - i % 8 : n;
        lowrank_part8(y, i, k, u, rank, bt);
    }
    while (k < n) {
        const uint16_t *b = bt + lowrank_index(rank, i + k, 0);
        if ((i + k) % LOWRANK_TILE == 0 && k + 32 <= n) {
            __m256 a0 = _mm256_loadu_ps(y + k), a1 = _mm256_loadu_ps(y + k + 8), a2 = _mm256_loadu_ps(y + k + 16),
                   a3 = _mm256_loadu_ps(y + k + 24);
            for (int j = 0; j < rank; j++, b += LOWRANK_TILE) {
                const __m256 uj = _mm256_set1_ps(u[j]);
                a0 = _mm256_fmadd_ps(uj, BF16X8(b), a0);
                a1 = _mm256_fmadd_ps(uj, BF16X8(b + 8), a1);
                a2 = _mm256_fmadd_ps(uj, BF16X8(b + tile), a2);
                a3 = _mm256_fmadd_ps(uj, BF16X8(b + tile + 8), a3);
            }
            _mm256_storeu_ps(y + k, a0), _mm256_storeu_ps(y + k + 8, a1);
            _mm256_storeu_ps(y + k + 16, a2), _mm256_storeu_ps(y + k + 24, a3);
            k += 32;
        } else if ((i + k) % LOWRANK_TILE == 0 && k + 16 <= n) {
            __m256 a0 = _mm256_loadu_ps(y + k), a1 = _mm256_loadu_ps(y + k + 8);
            for (int j = 0; j < rank; j++, b += LOWRANK_TILE) {
                const __m256 uj = _mm256_set1_ps(u[j]);
                a0 = _mm256_fmadd_ps(uj, BF16X8(b), a0);
                a1 = _mm256_fmadd_ps(uj, BF16X8(b + 8), a1);
            }
            _mm256_storeu_ps(y + k, a0), _mm256_storeu_ps(y + k + 8, a1);
            k += 16;
        } else { /* 8 outputs, or the last few */
            const int cnt = n - k < 8 ? n - k : 8;
            lowrank_part8(y + k, i + k, cnt, u, rank, bt);
            k += cnt;
        }
    }
}
#undef BF16X8
#endif

size_t cq_k_lowrank_tiled_size(int n_out, int rank) {
    return (size_t)(n_out + LOWRANK_TILE - 1) / LOWRANK_TILE * LOWRANK_TILE * (size_t)rank;
}

void cq_k_lowrank_tile(const float *b, int n_out, int rank, float scale, uint16_t *bt) {
    memset(bt, 0, cq_k_lowrank_tiled_size(n_out, rank) * sizeof *bt);
    for (int o = 0; o < n_out; o++)
        for (int j = 0; j < rank; j++) bt[lowrank_index(rank, o, j)] = cq_f32_to_bf16(scale * b[(size_t)o * rank + j]);
}

void cq_k_lowrank_rows(float *y, int i, int n, const float *u, int rank, const uint16_t *bt) {
#ifdef CQ_X86
    if (have_avx2()) {
        lowrank_rows_avx2(y, i, n, u, rank, bt);
        return;
    }
#endif
    for (int k = 0; k < n; k++)
        for (int j = 0; j < rank; j++) y[k] += u[j] * cq_bf16_to_f32(bt[lowrank_index(rank, i + k, j)]);
}
