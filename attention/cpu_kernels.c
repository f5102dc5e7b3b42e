#include "attention/cpu_kernels.h"

#include <math.h>
#include <string.h>

#include "attention/quant.h"
#include "core/exp_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CQ_X86 1
#define AVX2 __attribute__((target("avx2,fma")))

static int g_avx2 = -1;
static inline int have_avx2(void) {
    if (g_avx2 < 0) g_avx2 = cq_quant_has_avx2();
    return g_avx2;
}

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
    if (have_avx2() && hd % 8 == 0) {
        axpy_heads_avx2(out, ldo, n_heads, p, ldp, v, stride, n, hd);
        return;
    }
#endif
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < n; i++) cq_k_axpy(out + (size_t)h * ldo, p[(size_t)h * ldp + i], v + (size_t)i * stride, hd);
}

float cq_k_gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
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

size_t cq_k_packed_width(int n_tokens) { return ((size_t)n_tokens + 15) / 16 * 16; }

void cq_k_pack_tokens(const float *x, size_t ldx, int n_tokens, int k, float *xt) {
    size_t w = cq_k_packed_width(n_tokens);
    for (int kk = 0; kk < k; kk++) {
        float *row = xt + (size_t)kk * w;
        for (int t = 0; t < n_tokens; t++) row[t] = x[(size_t)t * ldx + kk];
        for (size_t t = (size_t)n_tokens; t < w; t++) row[t] = 0;
    }
}

void cq_k_rows_times_tokens(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt, int n_tokens,
                            float *y, size_t ldy) {
#ifdef CQ_X86
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
