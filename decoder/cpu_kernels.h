/* Internal: the vector and matrix kernels of the CPU forward. AVX2+FMA versions are chosen at run time when the
 * CPU has them; the portable C versions compute the same thing (and are what non-x86 builds run). */
#ifndef CQ_DECODER_CPU_KERNELS_H
#define CQ_DECODER_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/quant.h"

float cq_k_dot(const float *a, const float *b, int n);
void cq_k_axpy(float *y, float a, const float *x, int n); /* y += a x */
/* Attention of n_heads queries sharing one KV head, q_h = q + h * hd, against n rows k_i = k + i * stride:
 * scores[h * lds + i] = q_h . k_i, each equal bit for bit to cq_k_dot(q_h, k_i, hd); and out_h += sum_i p[h * ldp + i]
 * v_i for hd elements of rows v_i = v + i * stride, out_h = out + h * ldo, equal bit for bit to cq_k_axpy(out_h,
 * p[h * ldp + i], v_i, hd) for i = 0, 1, ... (hd may be a part of a head: with a multiple of 8 elements before it and
 * in it, element by element the same). Several heads per pass, so that each K and V row is read once for all. */
void cq_k_dot_heads(const float *q, int n_heads, const float *k, size_t stride, int n, int hd, float *scores,
                    size_t lds);
void cq_k_axpy_heads(float *out, size_t ldo, int n_heads, const float *p, size_t ldp, const float *v, size_t stride,
                     int n, int hd);
/* out[i] = x[i] * r * w[i], r = 1 / sqrt(mean(x^2) + eps) with the squares summed in double; out may be x */
void cq_k_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
float cq_k_gelu_tanh(float x);
void cq_k_geglu(float *y, const float *u, int n); /* y = gelu_tanh(y) * u */
float cq_k_silu(float x);                          /* x / (1 + exp(-x)) */
void cq_k_swiglu(float *y, const float *u, int n); /* y = silu(y) * u (qwen2's FFN) */
double cq_k_sum_exp(const float *x, int n, float shift); /* sum of exp(x[i] - shift), shift >= max x for safety */
/* x[i] = exp(x[i] - shift) in place (0 for -inf), returning their sum; shift >= max x. */
double cq_k_exp_shift(float *x, int n, float shift);

/* Multi-token matrix products read the tokens k-major: xt[kk * ldxt + t] = x[t * ldx + kk], ldxt a multiple of 16
 * with zero padding, so that one vector load covers 8 tokens. */
size_t cq_k_packed_width(int n_tokens);
void cq_k_pack_tokens(const float *x, size_t ldx, int n_tokens, int k, float *xt);

/* y[t * ldy + i] = w_i . x_t for rows i < n_rows (row-major, stride ldw floats) and tokens t < n_tokens. */
void cq_k_rows_times_tokens(const float *w, size_t ldw, int n_rows, int k, const float *xt, size_t ldxt, int n_tokens,
                            float *y, size_t ldy);

/* The tokens of a prompt's integer product (default mode): each token quantized to int16 per block of 32 exactly as
 * cq_quantize_i16 does it, stored as pairs so that one 32-bit lane holds elements 2p and 2p+1 of one token:
 * q[p * width + t] = (x_t[2p], x_t[2p+1]) for p < k / 2, width = cq_k_packed_width(n_tokens), padding zero; d and
 * dsum (k / 32, width): the block's scale and d * sum(q), dsum[b * width + t]. q, d and dsum point to the caller's
 * room. */
typedef struct {
    int n_tokens, k;
    size_t width;
    int32_t *q;
    float *d, *dsum;
} cq_tokens_i16;

/* k a multiple of 32; sets out's n_tokens, k and width. */
void cq_k_pack_tokens_i16(const float *x, size_t ldx, int n_tokens, int k, cq_tokens_i16 *out);
/* y[t * ldy + r] = w_r . x_t for the rows of w and the tokens of x (w->n == x->k): per block of w, the integer dot of
 * the quants times scale_r * d_t, minus min_r * dsum_t per block of 32 where w has mins. */
void cq_k_rows_times_tokens_i16(const cq_rows_i16 *w, const cq_tokens_i16 *x, float *y, size_t ldy);
/* Whether the integer product above is the faster one here: on AVX-512 VNNI (vpdpwssd: 32 int16 products an
 * instruction against 16 float FMAs; 175 vs 95 GFLOP/s a core on an EPYC 9004, bench_cpu_kernels) and on AVX2
 * (vpmaddwd + vpaddd on more ports than the FMAs: 106 vs 95); not for the plain C twin, where prompts stay in
 * float. */
bool cq_k_tokens_i16_fast(void);

/* An adapter's low-rank term (forward_cpu.c): y[k] += sum_j u[j] * B[i + k][j] for outputs i .. i + n - 1, j < rank,
 * with B held as bt by cq_k_lowrank_tile: bf16, tiles of 16 outputs, each tile rank x 16 values front to back (the
 * rank index outer), so that a run of outputs reads its tiles in order, whole lines. */
void cq_k_lowrank_rows(float *y, int i, int n, const float *u, int rank, const uint16_t *bt);
/* bt (cq_k_lowrank_tiled_size values) from b (n_out, rank) row-major float, times scale. */
size_t cq_k_lowrank_tiled_size(int n_out, int rank);
void cq_k_lowrank_tile(const float *b, int n_out, int rank, float scale, uint16_t *bt);

#endif
