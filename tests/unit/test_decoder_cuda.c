/* CUDA decoder against its C twins (skipped without a GPU).
 *
 * Kernels on random data at production and odd sizes (1 and 7 tokens, window edges): RMSNorm, fused QK-norm + RoPE
 * up to position 32767, GeGLU, SwiGLU (qwen2), prefill attention (cuBLAS and online-softmax paths) with and without a window and
 * split over long key ranges, the decode step's fused attention (1 to 4 query heads, up to 9000 keys), and the bf16
 * matrix products of the real model's own quantized matrices (every format) against the exact float product, and the
 * decode step's logits kernel on the output matrix (token_embd when tied, qwen2's untied output.weight when not;
 * Q8_0 as stored: float rounding only, other formats through bf16).
 * Then the whole forward, CUDA vs CPU, on every model found: the real model if present (on the GPU machine only when
 * carried there) and the synthetic ones named by $CLAUSEQA_SYNTH_GGUF (colon-separated; tools/decoder_ref/make_synthetic_gguf.py),
 * over a prompt past the sliding window and the ring (fed twice, so that the full chunks replay as CUDA graphs), then
 * single-token decode steps (a graph too; greedy steps with the argmax on the GPU must pick the argmax of the same
 * step's logits), and decode steps from position 0.
 * Adapters (decoder/lora.h): CUDA merges them into its bf16 weights (cq_cuda_op_lora_merge against the float
 * merge cq_op_lora_merge_ref, bf16 threshold), and the whole forward with a random adapter against the CPU's
 * low-rank side product (forward thresholds); removing it gives the base logits back bit for bit. Packed prompts
 * (cq_decoder_score_prompts): their attention kernel (block-diagonal causal mask, window, a chunk that starts inside
 * a prompt; cuBLAS and online-softmax paths) against per-prompt C attention (f32 threshold), and the packed
 * forward against each prompt run alone on the CPU and on the GPU (forward threshold over the scored logits).
 * Prompt lengths are built around the sliding window (W - 1, W + 3, 2 W + 5, ...); a model without one (qwen2: every
 * layer global) uses the CUDA chunk (CQ_CUDA_BATCH) instead, so that they stay long and positive.
 *
 * Thresholds: f32 kernels by normalized mean squared error (NMSE) < 1e-10 (float rounding only; measured 1e-17 to
 * 3e-12 on an H200); the bf16 products < 1e-4 (bf16 keeps 8 significant bits; measured 2e-6 to 6e-6); the whole
 * forward in bf16 < 2e-3 on the logits with the argmax agreeing on at least 90 % of positions (measured 8e-5 to
 * 1.3e-4, argmax 64/64, prefill and decode). Every figure is printed.
 * A step's candidates (decoder/top.h): the kernels against cq_top_from_logits on rows with many ties (the same
 * ids and logits exactly, the log-sum-exp within 1e-5), and cq_decoder_eval_top against the full logits of the same
 * kernels (exactly). Batched decode steps (cq_cuda_decode_batch: bf16 GEMMs of B rows) against the same sequences
 * stepped one at a time (the batch-1 kernels, float inputs): the logits of 8 named ids and the top candidates' logits
 * by NMSE < 2e-3 (the forward's bf16 threshold), the best candidate agreeing on at least 90 % of rows, over 6
 * sequences from 1 token to past the ring and over CQ_CUDA_DECODE_BATCH_MAX short ones; and threads stepping their
 * own sequences through cq_decoder_eval_top at once (batched by the decoder) against each sequence alone. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/decoder.h"
#include "decoder/cpu_kernels.h"
#include "decoder/forward_cpu.h"
#include "decoder/lora.h"
#include "test_adapter_util.h"
#include "decoder/forward_cuda.h"
#include "decoder/gguf.h"
#include "decoder/model.h"
#include "decoder/quant.h"
#include "decoder/tokenizer.h"

#define NMSE_F32 1e-10
#define NMSE_BF16_MATMUL 1e-4
#define NMSE_BF16_FORWARD 2e-3
/* batched vs single steps with the batched products' inputs in 3 bf16 planes (exactly batch 1's float inputs):
 * float rounding only, 20x below the 2-5e-5 that the bf16 inputs gave on an H100 (issue 31) */
#define NMSE_BATCH_PLANES 1e-6

static uint64_t rng = 0x853c49e6748fea9bull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24 * 2.0 - 1.0);
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
}

static double nmse(const float *a, const float *ref, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        e += d * d;
        r += (double)ref[i] * ref[i];
    }
    return r > 0 ? e / r : e;
}

#define SKIP_WITHOUT_GPU()                                                                                        \
    do {                                                                                                          \
        if (!cq_cuda_available()) {                                                                               \
            fprintf(stderr, "  no GPU: skipped\n");                                                               \
            skip();                                                                                               \
        }                                                                                                         \
    } while (0)

static void test_rmsnorm(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int shapes[][2] = {{7, 640}, {1, 256}, {64, 1152}, {3, 200}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], n = shapes[s][1];
        float *x = malloc((size_t)rows * n * 4), *w = malloc((size_t)n * 4), *a = malloc((size_t)rows * n * 4),
              *b = malloc((size_t)rows * n * 4);
        fill(x, (size_t)rows * n, 3.0f);
        fill(w, (size_t)n, 1.0f);
        cq_err err = {0};
        assert_int_equal(cq_cuda_op_rmsnorm(a, x, w, rows, n, 1e-6f, &err), CQ_OK);
        for (int r = 0; r < rows; r++) cq_op_rmsnorm(b + (size_t)r * n, x + (size_t)r * n, w, n, 1e-6f);
        double e = nmse(a, b, (size_t)rows * n);
        fprintf(stderr, "  rmsnorm %dx%d: nmse %.2e\n", rows, n, e);
        assert_true(e < NMSE_F32);
        free(x), free(w), free(a), free(b);
    }
}

static void test_qk_norm_rope(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int32_t pos[] = {0, 1, 7, 511, 512, 4095, 32767};
    const int rows = 7;
    const int dims[] = {256, 64};
    for (int di = 0; di < 2; di++) {
        int hd = dims[di];
        float *x = malloc((size_t)rows * hd * 4), *a = malloc((size_t)rows * hd * 4), *ones = malloc((size_t)hd * 4);
        fill(x, (size_t)rows * hd, 2.0f);
        for (int i = 0; i < hd; i++) ones[i] = 1.0f;
        memcpy(a, x, (size_t)rows * hd * 4);
        cq_err err = {0};
        assert_int_equal(cq_cuda_op_rope(a, rows, hd, pos, 1e6f, 0.125f, &err), CQ_OK);
        for (int r = 0; r < rows; r++) {
            cq_op_rmsnorm(x + (size_t)r * hd, x + (size_t)r * hd, ones, hd, 0.0f);
            cq_op_rope(x + (size_t)r * hd, hd, pos[r], 1e6f, 0.125f);
        }
        double e = nmse(a, x, (size_t)rows * hd);
        fprintf(stderr, "  qk-norm + rope, head_dim %d, positions to 32767: nmse %.2e\n", hd, e);
        assert_true(e < NMSE_F32);
        free(x), free(a), free(ones);
    }
}

/* qwen2's attention input: the projection bias added, no QK-norm, RoPE (base 1e6), against the C ops */
static void test_bias_rope(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int32_t pos[] = {0, 1, 7, 511, 4095, 32767, 100};
    const int rows = 7, dims[] = {128, 64};
    for (int di = 0; di < 2; di++) {
        const int hd = dims[di];
        float *x = malloc((size_t)rows * hd * 4), *b = malloc((size_t)rows * hd * 4), *a = malloc((size_t)rows * hd * 4);
        fill(x, (size_t)rows * hd, 2.0f);
        fill(b, (size_t)rows * hd, 1.0f);
        memcpy(a, x, (size_t)rows * hd * 4);
        cq_err err = {0};
        assert_int_equal(cq_cuda_op_bias_rope(a, rows, hd, pos, b, 1e6f, &err), CQ_OK);
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < hd; i++) x[(size_t)r * hd + i] += b[(size_t)r * hd + i];
            cq_op_rope(x + (size_t)r * hd, hd, pos[r], 1e6f, 1.0f);
        }
        double e = nmse(a, x, (size_t)rows * hd);
        fprintf(stderr, "  bias + rope (no QK-norm), head_dim %d: nmse %.2e\n", hd, e);
        assert_true(e < NMSE_F32);
        free(x), free(a), free(b);
    }
}

/* qwen2's FFN activation: silu(y) * u against cq_k_swiglu (decoder/cpu_kernels.h), large |y| included */
static void test_swiglu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int n = 7 * 8960 + 5;
    float *y = malloc(n * 4), *u = malloc(n * 4), *ref = malloc(n * 4);
    fill(y, n, 12.0f);
    fill(u, n, 2.0f);
    y[0] = 95.0f, y[1] = -95.0f;
    memcpy(ref, y, n * 4);
    cq_k_swiglu(ref, u, n);
    cq_err err = {0};
    assert_int_equal(cq_cuda_op_swiglu(y, u, n, &err), CQ_OK);
    double e = nmse(y, ref, n);
    fprintf(stderr, "  swiglu %d: nmse %.2e\n", n, e);
    assert_true(e < NMSE_F32);
    free(y), free(u), free(ref);
}

static void test_geglu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int n = 7 * 2048 + 3;
    float *y = malloc(n * 4), *u = malloc(n * 4), *ref = malloc(n * 4);
    fill(y, n, 6.0f);
    fill(u, n, 2.0f);
    for (int i = 0; i < n; i++) ref[i] = cq_op_gelu_tanh(y[i]) * u[i];
    cq_err err = {0};
    assert_int_equal(cq_cuda_op_geglu(y, u, n, &err), CQ_OK);
    double e = nmse(y, ref, n);
    fprintf(stderr, "  geglu %d: nmse %.2e\n", n, e);
    assert_true(e < NMSE_F32);
    free(y), free(u), free(ref);
}

/* The kernels that read a batched step's GEMM outputs over 1 to 3 planes (issue 31: CLAUSEQA_BATCH_PLANES) and
 * sum them as they read: GeGLU, the residual step + next norm, QK-norm + RoPE + KV store, against the C ops on the
 * planes summed in the same order (f32 threshold). */
static void plane_sums(float *out, const float *planes, int P, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = planes[i];
        for (int p = 1; p < P; p++) v += planes[(size_t)p * n + i];
        out[i] = v;
    }
}

static void test_planes_consumers(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    cq_err err = {0};
    for (int P = 1; P <= 3; P++) {
        /* GeGLU over 7 rows of 2048 */
        const int n = 7 * 2048 + 3;
        float *yp = malloc((size_t)P * n * 4), *up = malloc((size_t)P * n * 4), *y = malloc((size_t)n * 4),
              *ys = malloc((size_t)n * 4), *us = malloc((size_t)n * 4);
        fill(yp, (size_t)P * n, 6.0f);
        fill(up, (size_t)P * n, 2.0f);
        assert_int_equal(cq_cuda_op_geglu_planes(y, yp, up, n, P, &err), CQ_OK);
        plane_sums(ys, yp, P, (size_t)n), plane_sums(us, up, P, (size_t)n);
        for (int i = 0; i < n; i++) ys[i] = cq_op_gelu_tanh(ys[i]) * us[i];
        const double eg = nmse(y, ys, (size_t)n);
        free(yp), free(up), free(y), free(ys), free(us);
        /* the residual step and the next norm: 7 rows of 640 */
        const int rows = 7, d = 640;
        const size_t rd = (size_t)rows * d;
        float *x = malloc(rd * 4), *xr = malloc(rd * 4), *xn = malloc(rd * 4), *xnr = malloc(rd * 4),
              *o = malloc((size_t)P * rd * 4), *os = malloc(rd * 4), *wp = malloc((size_t)d * 4),
              *wn = malloc((size_t)d * 4), *t = malloc((size_t)d * 4);
        fill(x, rd, 3.0f), fill(o, (size_t)P * rd, 2.0f), fill(wp, (size_t)d, 1.0f), fill(wn, (size_t)d, 1.0f);
        memcpy(xr, x, rd * 4);
        assert_int_equal(cq_cuda_op_addnorm_planes(x, xn, o, wp, wn, rows, d, 1e-6f, P, &err), CQ_OK);
        plane_sums(os, o, P, rd);
        for (int r = 0; r < rows; r++) {
            cq_op_rmsnorm(t, os + (size_t)r * d, wp, d, 1e-6f);
            for (int i = 0; i < d; i++) xr[(size_t)r * d + i] += t[i];
            cq_op_rmsnorm(xnr + (size_t)r * d, xr + (size_t)r * d, wn, d, 1e-6f);
        }
        const double ex = nmse(x, xr, rd), exn = nmse(xn, xnr, rd);
        free(x), free(xr), free(xn), free(xnr), free(o), free(os), free(wp), free(wn), free(t);
        /* QK-norm + RoPE + the KV store: 7 tokens from position 4090 (a ring of 7 slots), head_dim 256 */
        const int hd = 256;
        const int32_t pos0 = 4090;
        const size_t rh = (size_t)rows * hd;
        float *q = malloc((size_t)P * rh * 4), *k = malloc((size_t)P * rh * 4), *v = malloc((size_t)P * rh * 4);
        float *qo = malloc(rh * 4), *ko = malloc(rh * 4), *vo = malloc(rh * 4), *qs = malloc(rh * 4),
              *ks = malloc(rh * 4), *vs = malloc(rh * 4), *ones = malloc((size_t)hd * 4);
        fill(q, (size_t)P * rh, 2.0f), fill(k, (size_t)P * rh, 2.0f), fill(v, (size_t)P * rh, 2.0f);
        for (int i = 0; i < hd; i++) ones[i] = 1.0f;
        assert_int_equal(cq_cuda_op_qk_store_planes(q, k, v, rows, hd, pos0, 1e6f, P, qo, ko, vo, &err), CQ_OK);
        plane_sums(qs, q, P, rh), plane_sums(ks, k, P, rh), plane_sums(vs, v, P, rh);
        for (int r = 0; r < rows; r++) {
            float *qr = qs + (size_t)r * hd, *kr = ks + (size_t)r * hd;
            cq_op_rmsnorm(qr, qr, ones, hd, 0.0f), cq_op_rope(qr, hd, pos0 + r, 1e6f, 1.0f);
            cq_op_rmsnorm(kr, kr, ones, hd, 0.0f), cq_op_rope(kr, hd, pos0 + r, 1e6f, 1.0f);
        }
        const double eq = nmse(qo, qs, rh), ek = nmse(ko, ks, rh), ev = nmse(vo, vs, rh);
        free(q), free(k), free(v), free(qo), free(ko), free(vo), free(qs), free(ks), free(vs), free(ones);
        fprintf(stderr, "  %d plane%s: geglu nmse %.2e; residual + norm %.2e, %.2e; qk-norm + rope q %.2e, k %.2e, "
                        "v %.2e\n", P, P > 1 ? "s" : "", eg, ex, exn, eq, ek, ev);
        assert_true(eg < NMSE_F32 && ex < NMSE_F32 && exn < NMSE_F32);
        assert_true(eq < NMSE_F32 && ek < NMSE_F32 && ev < NMSE_F32);
    }
}

static void test_attention(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    /* (queries, keys, window): single decode steps, a batch of 7, window edges, and long ranges split over blocks */
    /* (more than one query takes the cuBLAS path up to 8192 keys, the online-softmax kernel beyond) */
    const int cases[][3] = {{1, 1, 0},      {7, 7, 0},     {7, 600, 512},  {1, 513, 512},   {1, 2048, 0},
                            {1, 9000, 0},   {64, 700, 512}, {5, 40, 16},   {16, 9000, 512}, {64, 8500, 0},
                            {512, 1024, 512}};
    const int hds[] = {256, 64};
    for (int hi = 0; hi < 2; hi++) {
        int hd = hds[hi];
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int nq = cases[c][0], nk = cases[c][1], win = cases[c][2];
            float *q = malloc((size_t)nq * hd * 4), *k = malloc((size_t)nk * hd * 4), *v = malloc((size_t)nk * hd * 4);
            float *a = malloc((size_t)nq * hd * 4), *b = malloc((size_t)nq * hd * 4), *sc = malloc((size_t)nk * 4);
            fill(q, (size_t)nq * hd, 1.0f);
            fill(k, (size_t)nk * hd, 1.0f);
            fill(v, (size_t)nk * hd, 1.0f);
            const float scale = 1.0f / sqrtf((float)hd) * 4.0f; /* peaky enough to notice a wrong key */
            cq_err err = {0};
            /* a float cache, then a bf16 one against its C twin: the same attention over the rounded values */
            float *kr = malloc((size_t)nk * hd * 4), *vr = malloc((size_t)nk * hd * 4);
            for (int kv16 = 0; kv16 < 2; kv16++) {
                cq_op_round_bf16(kr, k, (size_t)nk * hd);
                cq_op_round_bf16(vr, v, (size_t)nk * hd);
                const float *kk = kv16 ? kr : k, *vv = kv16 ? vr : v;
                assert_int_equal(cq_cuda_op_attention(q, k, v, nq, nk, hd, win, scale, 0.0f, kv16, a, &err), CQ_OK);
                for (int i = 0; i < nq; i++) {
                    int hi_k = nk - nq + i + 1, lo = win > 0 && hi_k - win > 0 ? hi_k - win : 0;
                    cq_op_attention(q + (size_t)i * hd, kk + (size_t)lo * hd, vv + (size_t)lo * hd, hi_k - lo,
                                    (size_t)hd, hd, scale, 0.0f, sc, b + (size_t)i * hd);
                }
                double e = nmse(a, b, (size_t)nq * hd);
                fprintf(stderr, "  attention hd %d, %d queries x %d keys, window %d, %s cache: nmse %.2e\n", hd, nq, nk,
                        win, kv16 ? "bf16" : "float", e);
                assert_true(e < NMSE_F32);
            }
            free(kr), free(vr);
            free(q), free(k), free(v), free(a), free(b), free(sc);
        }
    }
}

/* Packed prompts: each query attends to its own prompt only, the last n_q tokens forming the chunk. */
static void test_decoder_packed(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    /* prompt lengths, queries (the chunk: the last n_q tokens), window */
    const struct {
        int lens[6], n_lens, n_q, window;
    } cases[] = {{{5, 1, 30, 7}, 4, 43, 0},        {{5, 1, 30, 7}, 4, 20, 16}, {{600, 300, 90}, 3, 512, 512},
                 {{100, 700, 1}, 3, 512, 0},      {{1, 1, 1}, 3, 3, 0},       {{40, 40, 40, 40, 40, 40}, 6, 100, 16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t starts[8] = {0};
        for (int i = 0; i < cases[c].n_lens; i++) starts[i + 1] = starts[i] + cases[c].lens[i];
        const int n = starts[cases[c].n_lens], nq = cases[c].n_q, hd = 256, win = cases[c].window;
        float *q = malloc((size_t)nq * hd * 4), *k = malloc((size_t)n * hd * 4), *v = malloc((size_t)n * hd * 4);
        float *a = malloc((size_t)nq * hd * 4), *b = malloc((size_t)nq * hd * 4), *sc = malloc((size_t)n * 4);
        fill(q, (size_t)nq * hd, 1.0f);
        fill(k, (size_t)n * hd, 1.0f);
        fill(v, (size_t)n * hd, 1.0f);
        const float scale = 1.0f / sqrtf((float)hd) * 4.0f;
        float *kr = malloc((size_t)n * hd * 4), *vr = malloc((size_t)n * hd * 4);
        cq_op_round_bf16(kr, k, (size_t)n * hd);
        cq_op_round_bf16(vr, v, (size_t)n * hd);
        for (int kv16 = 0; kv16 < 2; kv16++) {
            const float *kk = kv16 ? kr : k, *vv = kv16 ? vr : v; /* a bf16 cache: attention over the rounded values */
            for (int i = 0; i < nq; i++) { /* query at packed index p of prompt [s, e) */
                const int p = n - nq + i;
                int j = 0;
                while (starts[j + 1] <= p) j++;
                int lo = starts[j];
                if (win > 0 && p - win + 1 > lo) lo = p - win + 1;
                cq_op_attention(q + (size_t)i * hd, kk + (size_t)lo * hd, vv + (size_t)lo * hd, p - lo + 1, (size_t)hd,
                                hd, scale, 0.0f, sc, b + (size_t)i * hd);
            }
            for (int gemm = 0; gemm < 2; gemm++) {
                cq_err err = {0};
                assert_int_equal(cq_cuda_op_attention_packed(q, k, v, starts, cases[c].n_lens, nq, hd, win, scale, 0.0f,
                                                             gemm, kv16, NULL, a, &err),
                                 CQ_OK);
                double e = nmse(a, b, (size_t)nq * hd);
                fprintf(stderr,
                        "  packed attention, %d prompts, %d tokens, last %d queries, window %d, %s, %s cache: nmse %.2e\n",
                        cases[c].n_lens, n, nq, win, gemm ? "cuBLAS" : "online softmax", kv16 ? "bf16" : "float", e);
                assert_true(e < NMSE_F32);
            }
        }
        free(kr), free(vr);
        free(q), free(k), free(v), free(a), free(b), free(sc);
    }
}

/* Packed prompts sharing a prefix (prefix reuse): a follower's rows hold its positions c.. only, and its queries read
 * the first c rows of its leader (the nearest earlier prompt stored whole) for positions [0, c); against C attention
 * over the keys gathered in position order (window by position in the prompt), float and bf16, both paths. */
static void test_packed_shared(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const struct {
        int lens[5], pre[5], n_lens, n_q, window;
    } cases[] = {{{50, 30, 20, 40}, {0, 35, 10, 0}, 4, 140, 0},     {{50, 30, 20, 40}, {0, 35, 10, 0}, 4, 90, 16},
                 {{600, 100, 300}, {0, 550, 0}, 3, 512, 512},      {{5, 1, 3, 8, 2}, {0, 4, 5, 0, 7}, 5, 19, 3},
                 {{200, 60, 60}, {0, 199, 120}, 3, 320, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int np = cases[c].n_lens, hd = 64, win = cases[c].window, nq = cases[c].n_q;
        int32_t starts[8] = {0};
        for (int i = 0; i < np; i++) starts[i + 1] = starts[i] + cases[c].lens[i];
        const int n = starts[np];
        float *q = malloc((size_t)nq * hd * 4), *k = malloc((size_t)n * hd * 4), *v = malloc((size_t)n * hd * 4);
        float *kr = malloc((size_t)n * hd * 4), *vr = malloc((size_t)n * hd * 4), *a = malloc((size_t)nq * hd * 4);
        float *b = malloc((size_t)nq * hd * 4), *gk = malloc((size_t)2048 * hd * 4), *gv = malloc((size_t)2048 * hd * 4);
        float *sc = malloc(2048 * 4);
        fill(q, (size_t)nq * hd, 1.0f);
        fill(k, (size_t)n * hd, 1.0f);
        fill(v, (size_t)n * hd, 1.0f);
        cq_op_round_bf16(kr, k, (size_t)n * hd);
        cq_op_round_bf16(vr, v, (size_t)n * hd);
        const float scale = 1.0f / sqrtf((float)hd) * 4.0f;
        for (int kv16 = 0; kv16 < 2; kv16++) {
            const float *kk = kv16 ? kr : k, *vv = kv16 ? vr : v;
            for (int i = 0; i < nq; i++) { /* the query at row p of prompt j, position cpre + p - own in its prompt */
                const int p = n - nq + i;
                int j = 0;
                while (starts[j + 1] <= p) j++;
                int l = j;
                while (l > 0 && cases[c].pre[l]) l--;
                const int cpre = cases[c].pre[j], own = starts[j], rp = cpre + p - own;
                const int lo = win > 0 && rp - win + 1 > 0 ? rp - win + 1 : 0;
                for (int vpos = lo; vpos <= rp; vpos++) {
                    const int row = vpos < cpre ? starts[l] + vpos : own + vpos - cpre;
                    memcpy(gk + (size_t)(vpos - lo) * hd, kk + (size_t)row * hd, (size_t)hd * 4);
                    memcpy(gv + (size_t)(vpos - lo) * hd, vv + (size_t)row * hd, (size_t)hd * 4);
                }
                cq_op_attention(q + (size_t)i * hd, gk, gv, rp - lo + 1, (size_t)hd, hd, scale, 0.0f, sc,
                                b + (size_t)i * hd);
            }
            for (int gemm = 0; gemm < 2; gemm++) {
                cq_err err = {0};
                assert_int_equal(cq_cuda_op_attention_packed(q, k, v, starts, np, nq, hd, win, scale, 0.0f, gemm,
                                                             kv16, cases[c].pre, a, &err),
                                 CQ_OK);
                const double e = nmse(a, b, (size_t)nq * hd);
                fprintf(stderr, "  packed attention with shared prefixes, case %zu, window %d, %s, %s cache: nmse %.2e\n",
                        c, win, gemm ? "cuBLAS" : "online softmax", kv16 ? "bf16" : "float", e);
                assert_true(e < NMSE_F32);
            }
        }
        free(q), free(k), free(v), free(kr), free(vr), free(a), free(b), free(gk), free(gv), free(sc);
    }
}

/* The decode step's fused attention (QK-norm of the query and the new key, RoPE at angle 0, the new key taken
 * from the kernel's own copy, splits merged by the last block) against normalize-then-attend in C. */
static void test_decode_attention(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int cases[][3] = {{1, 0, 1},    {2, 0, 4},    {37, 0, 4},   {600, 512, 4}, {513, 512, 1},
                            {9000, 0, 4}, {40, 16, 2},  {2100, 0, 4}, {4097, 0, 1}};
    const int hds[] = {256, 64};
    for (int hi = 0; hi < 2; hi++) {
        const int hd = hds[hi];
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int nk = cases[c][0], win = cases[c][1], H = cases[c][2];
            float *q = malloc((size_t)H * hd * 4), *k = malloc((size_t)nk * hd * 4), *v = malloc((size_t)nk * hd * 4);
            float *a = malloc((size_t)H * hd * 4), *b = malloc((size_t)H * hd * 4), *sc = malloc((size_t)nk * 4);
            float *ones = malloc((size_t)hd * 4);
            fill(q, (size_t)H * hd, 3.0f);
            fill(k, (size_t)nk * hd, 1.0f);
            fill(v, (size_t)nk * hd, 1.0f);
            for (int i = 0; i < hd; i++) ones[i] = 1.0f;
            const float scale = 1.0f / sqrtf((float)hd) * 4.0f;
            cq_err err = {0};
            /* a float cache, then a bf16 one: its C twin rounds the cache rows, and the new key once normalized, and
             * the new value, as the kernel stores them and reads them back */
            float *a16 = malloc((size_t)H * hd * 4), *k16 = malloc((size_t)nk * hd * 4), *v16 = malloc((size_t)nk * hd * 4);
            assert_int_equal(cq_cuda_op_decode_attention(q, H, k, v, nk, hd, win, scale, 0.0f, false, a, &err), CQ_OK);
            assert_int_equal(cq_cuda_op_decode_attention(q, H, k, v, nk, hd, win, scale, 0.0f, true, a16, &err), CQ_OK);
            const int lo = win > 0 && nk - win > 0 ? nk - win : 0;
            cq_op_round_bf16(k16, k, (size_t)(nk - 1) * hd);
            cq_op_round_bf16(v16, v, (size_t)nk * hd);
            cq_op_rmsnorm(k + (size_t)(nk - 1) * hd, k + (size_t)(nk - 1) * hd, ones, hd, 1e-6f);
            cq_op_round_bf16(k16 + (size_t)(nk - 1) * hd, k + (size_t)(nk - 1) * hd, (size_t)hd);
            for (int kv16 = 0; kv16 < 2; kv16++) {
                for (int h = 0; h < H; h++) {
                    float qn[512];
                    cq_op_rmsnorm(qn, q + (size_t)h * hd, ones, hd, 1e-6f);
                    cq_op_attention(qn, (kv16 ? k16 : k) + (size_t)lo * hd, (kv16 ? v16 : v) + (size_t)lo * hd,
                                    nk - lo, (size_t)hd, hd, scale, 0.0f, sc, b + (size_t)h * hd);
                }
                double e = nmse(kv16 ? a16 : a, b, (size_t)H * hd);
                fprintf(stderr, "  decode attention hd %d, %d heads x %d keys, window %d, %s cache: nmse %.2e\n", hd, H,
                        nk, win, kv16 ? "bf16" : "float", e);
                assert_true(e < NMSE_F32);
            }
            free(a16), free(k16), free(v16);
            free(q), free(k), free(v), free(a), free(b), free(sc), free(ones);
        }
    }
}

static char *model_path(void) {
    static char path[4096];
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    return path;
}

/* The C twin of the decode step's products and of the batched step's in 3 planes: W's rows dequantized and rounded to
 * bf16 (as uploaded), times float x, summed in double. */
static void matmul_bf16w_ref(const cq_wmat *w, const float *x, int T, float *y) {
    float *row = malloc((size_t)w->cols * 4);
    for (int64_t r = 0; r < w->rows; r++) {
        cq_dequant_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row, (size_t)w->cols);
        for (int64_t c = 0; c < w->cols; c++) row[c] = cq_bf16_to_f32(cq_f32_to_bf16(row[c]));
        for (int t = 0; t < T; t++) {
            double acc = 0;
            for (int64_t c = 0; c < w->cols; c++) acc += (double)row[c] * x[(size_t)t * w->cols + c];
            y[(size_t)t * w->rows + r] = (float)acc;
        }
    }
    free(row);
}

/* Every weight format of the real model (or of the small synthetic one), 1 and 7 tokens. */
static void test_matmul_bf16(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const char *paths[2] = {model_path(), getenv("CLAUSEQA_SYNTH_GGUF")};
    int tested = 0;
    for (int pi = 0; pi < 2; pi++) {
        if (!paths[pi]) continue;
        char first[4096];
        snprintf(first, sizeof first, "%s", paths[pi]);
        char *colon = strchr(first, ':');
        if (colon) *colon = 0;
        cq_gguf *g;
        cq_err err = {0};
        if (cq_gguf_open(first, &g, &err)) continue;
        cq_gemma m;
        assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
        const cq_wmat *mats[] = {&m.layers[0].wq, &m.layers[0].wk, &m.layers[0].wv, &m.layers[0].wo,
                                 &m.layers[0].wgate, &m.layers[0].wdown, &m.layers[1].wdown};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            for (int T = 1; T <= 7; T += 6) {
                const cq_wmat *w = mats[i];
                float *x = malloc((size_t)T * w->cols * 4), *a = malloc((size_t)T * w->rows * 4),
                      *b = malloc((size_t)T * w->rows * 4);
                fill(x, (size_t)T * w->cols, 1.0f);
                assert_int_equal(cq_cuda_op_matmul(w, x, T, a, &err), CQ_OK);
                cq_op_matmul_ref(w, x, (size_t)w->cols, T, b, (size_t)w->rows);
                double e = nmse(a, b, (size_t)T * w->rows);
                fprintf(stderr, "  matmul %s %lldx%lld, %d tokens: nmse %.2e\n", first, (long long)w->rows,
                        (long long)w->cols, T, e);
                assert_true(e < NMSE_BF16_MATMUL);
                /* the batched step's products (issue 31): x in 1, 2, 3 bf16 planes through one GEMM, against the
                 * float-input product with bf16 weights (the decode kernel's, checked on the same twin): 3 planes
                 * hold x exactly (float rounding only), 1 plane is the GEMM above */
                float *c = malloc((size_t)T * w->rows * 4), *pl = malloc((size_t)T * w->rows * 4);
                matmul_bf16w_ref(w, x, T, c);
                double ep[4] = {0};
                for (int P = 1; P <= 3; P++) {
                    assert_int_equal(cq_cuda_op_matmul_planes(w, x, T, P, pl, &err), CQ_OK);
                    ep[P] = nmse(pl, c, (size_t)T * w->rows);
                }
                const double ed = T == 1 ? nmse(a, c, (size_t)w->rows) : -1;
                fprintf(stderr, "    vs float x, bf16 weights: planes 1 %.2e, 2 %.2e, 3 %.2e%s", ep[1], ep[2], ep[3],
                        T == 1 ? "" : "\n");
                if (T == 1) fprintf(stderr, ", the decode kernel %.2e\n", ed);
                assert_true(ep[3] < NMSE_F32);
                assert_true(ep[1] < NMSE_BF16_MATMUL);
                if (T == 1) assert_true(ed < NMSE_F32);
                free(x), free(a), free(b), free(c), free(pl);
            }
        }
        /* the decode step's logits kernel: the output matrix (token_embd when tied; qwen2's own output.weight when
         * not) as stored when it is Q8_0 (then exact), else bf16 */
        const cq_wmat *e = &m.output;
        float *x = malloc((size_t)e->cols * 4), *a = malloc((size_t)e->rows * 4), *b = malloc((size_t)e->rows * 4);
        fill(x, (size_t)e->cols, 1.0f);
        assert_int_equal(cq_cuda_op_logits(&m, x, a, &err), CQ_OK);
        cq_op_matmul_ref(e, x, (size_t)e->cols, 1, b, (size_t)e->rows);
        if (m.final_softcap > 0)
            for (int64_t r = 0; r < e->rows; r++) b[r] = m.final_softcap * tanhf(b[r] / m.final_softcap);
        double el = nmse(a, b, (size_t)e->rows);
        fprintf(stderr, "  logits %s %lldx%lld (%s %s): nmse %.2e\n", first, (long long)e->rows, (long long)e->cols,
                e->data == m.token_embd.data ? "tied" : "output", cq_qtype_name(e->type), el);
        assert_true(el < (e->type == CQ_QTYPE_Q8_0 && e->cols % 128 == 0 ? NMSE_F32 : NMSE_BF16_MATMUL));
        free(x), free(a), free(b);
        /* the batched steps' logits kernel: 11 rows (one group of 8 and a part) against the decode step's kernel on
         * each row, float rounding only (the same weights, the same products) */
        {
            const int R = 11;
            const size_t V = (size_t)e->rows, D = (size_t)e->cols;
            float *xr = malloc((size_t)R * D * 4), *got = malloc((size_t)R * V * 4), *one = malloc((size_t)R * V * 4);
            fill(xr, (size_t)R * D, 1.0f);
            assert_int_equal(cq_cuda_op_logits_rows(&m, xr, R, got, &err), CQ_OK);
            for (int r = 0; r < R; r++) assert_int_equal(cq_cuda_op_logits(&m, xr + r * D, one + r * V, &err), CQ_OK);
            const double er = nmse(got, one, (size_t)R * V);
            double worst_lse = 0;
            for (int r = 0; r < R; r++) {
                const cq_top_request rq = {CQ_TOP_MAX, 0, {0}};
                cq_top ta, tb;
                cq_top_from_logits(one + r * V, (int32_t)V, &rq, &ta);
                cq_top_from_logits(got + r * V, (int32_t)V, &rq, &tb);
                worst_lse = fabs(ta.lse - tb.lse) > worst_lse ? fabs(ta.lse - tb.lse) : worst_lse;
            }
            fprintf(stderr, "  logits of %d rows %s: nmse %.2e vs the decode kernel row by row, log-sum-exp off by "
                            "%.2e at most\n", R, first, er, worst_lse);
            assert_true(er < NMSE_F32);
            assert_true(worst_lse < 1e-4);
            /* the batched steps' default logits (the cuBLAS GEMM on the bf16 copy), 3 rows with the states in 1 and 3
             * planes, against the C twin of the bf16 weights times float states: 3 planes by the f32 threshold */
            const int R3 = 3;
            float *gl = malloc((size_t)R3 * V * 4), *tw = malloc((size_t)R3 * V * 4);
            matmul_bf16w_ref(e, xr, R3, tw);
            if (m.final_softcap > 0)
                for (size_t i = 0; i < (size_t)R3 * V; i++) tw[i] = m.final_softcap * tanhf(tw[i] / m.final_softcap);
            double eg[4] = {0};
            for (int P = 1; P <= 3; P += 2) {
                assert_int_equal(cq_cuda_op_logits_gemm(&m, xr, R3, P, gl, &err), CQ_OK);
                eg[P] = nmse(gl, tw, (size_t)R3 * V);
            }
            fprintf(stderr, "  logits GEMM of %d rows %s vs float states, bf16 weights: 1 plane %.2e, 3 planes %.2e\n",
                    R3, first, eg[1], eg[3]);
            assert_true(eg[3] < NMSE_F32);
            assert_true(eg[1] < NMSE_BF16_MATMUL);
            free(xr), free(got), free(one), free(gl), free(tw);
        }
        cq_gemma_free(&m);
        cq_gguf_close(g);
        tested++;
    }
    assert_true(tested > 0);
}

/* The adapter merge (W + s B A in float on the GPU, rounded to bf16 once) for every weight format of the model. */
static void test_lora_merge(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const char *paths[2] = {model_path(), getenv("CLAUSEQA_SYNTH_GGUF")};
    int tested = 0;
    for (int pi = 0; pi < 2; pi++) {
        if (!paths[pi]) continue;
        char first[4096];
        snprintf(first, sizeof first, "%s", paths[pi]);
        char *colon = strchr(first, ':');
        if (colon) *colon = 0;
        cq_gguf *g;
        cq_gemma m;
        cq_err err = {0};
        if (cq_gguf_open(first, &g, &err)) continue;
        assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
        uint32_t done = 0;
        for (int p = 0; p < CQ_N_PROJ; p++) {
            const cq_wmat *w = cq_proj_weight(&m.layers[0], (cq_proj)p);
            if (done & (1u << w->type)) continue; /* one matrix per format */
            done |= 1u << w->type;
            const int rank = 16;
            const size_t n = (size_t)w->rows * w->cols;
            float *a = malloc((size_t)rank * w->cols * 4), *b = malloc((size_t)w->rows * rank * 4);
            float *got = malloc(n * 4), *want = malloc(n * 4), *base = malloc(n * 4);
            fill(a, (size_t)rank * w->cols, 1.0f / sqrtf((float)w->cols));
            fill(b, (size_t)w->rows * rank, 0.5f / sqrtf((float)rank));
            assert_int_equal(cq_cuda_op_lora_merge(w, a, b, rank, 2.0f, got, &err), CQ_OK);
            cq_op_lora_merge_ref(w, a, b, rank, 2.0f, want);
            cq_op_lora_merge_ref(w, a, b, 0, 0.0f, base);
            double e = nmse(got, want, n), moved = nmse(base, want, n);
            fprintf(stderr, "  lora merge %s %s %lldx%lld, rank %d: nmse %.2e (the delta alone: %.2e)\n", first,
                    cq_qtype_name(w->type), (long long)w->rows, (long long)w->cols, rank, e, moved);
            assert_true(e < NMSE_BF16_MATMUL);
            assert_true(moved > 100 * e);
            free(a), free(b), free(got), free(want), free(base);
        }
        cq_gemma_free(&m);
        cq_gguf_close(g);
        tested++;
    }
    assert_true(tested > 0);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The span the prompt lengths are built around: the sliding window, or for a model without one (qwen2: every layer
 * global, window 0) the CUDA chunk, so that lengths like W - 1 or 2 W + 5 stay long and positive. */
static int window_span(int window) { return window > 0 ? window : CQ_CUDA_BATCH; }

/* A random adapter for the model at path, written to dir (every projection of every second layer). */
static void write_adapter(const char *path, const cq_decoder_info *info, const char *dir) {
    char sha[65];
    cq_err err = {0};
    assert_int_equal(cq_model_file_sha256(path, sha, &err), CQ_OK);
    test_adapter_spec spec = {.rank = 16, .alpha = 32, .b_gain = 0.3f, .layer_stride = 2, .base_sha256 = sha};
    assert_int_equal(test_write_adapter(dir, info, &spec, NULL), 0);
}

/* CUDA vs CPU forward on one model: a prompt past window + ring, logits at every position, then decode steps; with
 * a random adapter on both when with_adapter. */
static void compare_forward(const char *path, bool with_adapter) {
    cq_err err = {0};
    cq_decoder *cpu, *gpu;
    cq_decoder_options oc = {CQ_DEVICE_CPU, 0, false}, og = {CQ_DEVICE_CUDA, 0, false};
    assert_int_equal(cq_decoder_open(path, &oc, &cpu, &err), CQ_OK);
    if (cq_decoder_open(path, &og, &gpu, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    char adapter[128];
    snprintf(adapter, sizeof adapter, "/tmp/cq_test_cuda_adapter_%d", (int)getpid());
    if (with_adapter) {
        write_adapter(path, cq_decoder_get_info(cpu), adapter);
        assert_int_equal(cq_decoder_load_adapter(cpu, adapter, &err), CQ_OK);
        if (cq_decoder_load_adapter(gpu, adapter, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            fail();
        }
    }
    const cq_decoder_info *info = cq_decoder_get_info(cpu);
    assert_int_equal(cq_decoder_get_info(gpu)->device, CQ_DEVICE_CUDA);
    const int V = info->n_vocab;
    /* past window + batch, so that both backends' rings (window + their batch) wrap, with several full CUDA chunks
     * before the tail (fed twice on the GPU: the second time they replay as captured prefill graphs) */
    int T = info->sliding_window + 2 * (CQ_CPU_BATCH > CQ_CUDA_BATCH ? CQ_CPU_BATCH : CQ_CUDA_BATCH) + 100, steps = 4;
    int32_t *ids = malloc((size_t)(T + steps) * sizeof *ids);
    for (int i = 0; i < T + steps; i++) /* BOS, then a fixed spread of ordinary tokens */
        ids[i] = i == 0 ? cq_tokenizer_bos(cq_decoder_tokenizer(cpu)) : 300 + (int)((unsigned)(i * 7919) % (unsigned)(V - 300));
    cq_decoder_seq *sc, *sg;
    assert_int_equal(cq_decoder_seq_new(cpu, T + steps, &sc, &err), CQ_OK);
    assert_int_equal(cq_decoder_seq_new(gpu, T + steps, &sg, &err), CQ_OK);
    /* logits at the last 64 prompt positions (all of them would be T x V floats) */
    const int tail = 64, head = T - tail;
    float *a = malloc((size_t)tail * V * 4), *b = malloc((size_t)tail * V * 4);
    assert_int_equal(cq_decoder_eval(sc, ids, (size_t)head, NULL, false, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(sg, ids, (size_t)head, NULL, false, &err), CQ_OK);
    cq_decoder_seq_reset(sg);
    assert_int_equal(cq_decoder_eval(sg, ids, (size_t)head, NULL, false, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(sc, ids + head, tail, b, true, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(sg, ids + head, tail, a, true, &err), CQ_OK);
    double e = nmse(a, b, (size_t)tail * V);
    int agree = 0;
    for (int t = 0; t < tail; t++) agree += argmax(a + (size_t)t * V, V) == argmax(b + (size_t)t * V, V);
    fprintf(stderr, "  forward %s%s: %d-token prompt, last %d positions: nmse %.2e, argmax agrees %d/%d\n", path,
            with_adapter ? " with an adapter" : "", T, tail, e, agree, tail);
    assert_true(e < NMSE_BF16_FORWARD);
    assert_true(agree * 10 >= tail * 9);
    /* a second, fresh GPU sequence (its chunks run directly, no graphs) decodes greedily (argmax on the GPU) */
    cq_decoder_seq *sg2;
    assert_int_equal(cq_decoder_seq_new(gpu, T + steps, &sg2, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(sg2, ids, (size_t)T, NULL, false, &err), CQ_OK);
    for (int i = 0; i < steps; i++) { /* decode: one token at a time */
        assert_int_equal(cq_decoder_eval(sc, ids + T + i, 1, b, false, &err), CQ_OK);
        if (cq_decoder_eval(sg, ids + T + i, 1, a, false, &err)) {
            fprintf(stderr, "decode step %d: %s\n", i, err.msg);
            fail();
        }
        int32_t next;
        assert_int_equal(cq_decoder_eval_greedy(sg2, ids[T + i], &next, &err), CQ_OK);
        double es = nmse(a, b, (size_t)V);
        const int ga = argmax(a, V), ca = argmax(b, V);
        /* the CPU's argmax is not asserted: bf16 vs float may swap a near-tie (the logits' error is, by nmse);
         * printed with the CPU's own margin between the two picks */
        fprintf(stderr, "  decode step %d: nmse %.2e, argmax GPU %d (on the GPU %d) CPU %d", i, es, ga, next, ca);
        if (ga != ca) fprintf(stderr, " (CPU logits: %.4f at its pick, %.4f at the GPU's)", b[ca], b[ga]);
        fprintf(stderr, "\n");
        assert_true(es < NMSE_BF16_FORWARD);
        assert_int_equal(next, ga); /* the same kernels: the same logits */
    }
    cq_decoder_seq_free(sg2);
    /* decode from the start: short key ranges spread over many (mostly empty) splits */
    cq_decoder_seq_reset(sc);
    cq_decoder_seq_reset(sg);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(cq_decoder_eval(sc, ids + i, 1, b, false, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(sg, ids + i, 1, a, false, &err), CQ_OK);
        double es = nmse(a, b, (size_t)V);
        fprintf(stderr, "  decode at position %d: nmse %.2e\n", i, es);
        assert_true(es < NMSE_BF16_FORWARD);
    }
    if (with_adapter) { /* removed: the GPU's base weights come back, bit for bit */
        float *base = malloc((size_t)V * 4);
        cq_decoder *fresh;
        assert_int_equal(cq_decoder_open(path, &og, &fresh, &err), CQ_OK);
        cq_decoder_seq *sf;
        assert_int_equal(cq_decoder_seq_new(fresh, 16, &sf, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(sf, ids, 8, base, false, &err), CQ_OK);
        assert_int_equal(cq_decoder_load_adapter(gpu, NULL, &err), CQ_OK);
        cq_decoder_seq_reset(sg);
        assert_int_equal(cq_decoder_eval(sg, ids, 8, a, false, &err), CQ_OK);
        assert_memory_equal(a, base, (size_t)V * 4);
        cq_decoder_seq_free(sf);
        cq_decoder_close(fresh);
        free(base);
        test_rm_adapter(adapter);
    }
    free(a), free(b), free(ids);
    cq_decoder_seq_free(sc);
    cq_decoder_seq_free(sg);
    cq_decoder_close(cpu);
    cq_decoder_close(gpu);
}

/* Packed scoring on the GPU (with a random adapter) against each prompt alone on the CPU and on the GPU: prompts of
 * 1 token to past the window, more than two chunks in all, the logits of 8 ids at each prompt's end. */
static void compare_packed(const char *path) {
    cq_err err = {0};
    cq_decoder *cpu, *gpu;
    cq_decoder_options oc = {CQ_DEVICE_CPU, 0, false}, og = {CQ_DEVICE_CUDA, 0, false};
    assert_int_equal(cq_decoder_open(path, &oc, &cpu, &err), CQ_OK);
    assert_int_equal(cq_decoder_open(path, &og, &gpu, &err), CQ_OK);
    char adapter[128];
    snprintf(adapter, sizeof adapter, "/tmp/cq_test_cuda_packed_adapter_%d", (int)getpid());
    const cq_decoder_info *info = cq_decoder_get_info(cpu);
    write_adapter(path, info, adapter);
    assert_int_equal(cq_decoder_load_adapter(cpu, adapter, &err), CQ_OK);
    assert_int_equal(cq_decoder_load_adapter(gpu, adapter, &err), CQ_OK);
    const int V = info->n_vocab, W = window_span(info->sliding_window);
    const size_t lens[] = {1, 37, (size_t)W - 1, (size_t)W + 3, 2, 300, 511, 513, 64, (size_t)W * 2 + 5, 3, 250};
    const size_t n = sizeof lens / sizeof lens[0];
    int32_t *prompts[sizeof lens / sizeof lens[0]];
    for (size_t i = 0; i < n; i++) {
        prompts[i] = malloc(lens[i] * sizeof(int32_t));
        for (size_t t = 0; t < lens[i]; t++)
            prompts[i][t] = t == 0 ? cq_tokenizer_bos(cq_decoder_tokenizer(cpu))
                                   : 300 + (int32_t)((unsigned)((t + 17 * i) * 7919) % (unsigned)(V - 300));
    }
    int32_t ids[8] = {5, 300, 301, 1000, 2000, 4000, 8000, 9999};
    for (int k = 0; k < 8; k++) ids[k] %= V;
    float *a = malloc(n * 8 * 4), *b = malloc(n * 8 * 4), *c = malloc(n * 8 * 4), *logits = malloc((size_t)V * 4);
    assert_int_equal(cq_decoder_score_prompts(gpu, (const int32_t *const *)prompts, lens, n, ids, 8, a, &err), CQ_OK);
    assert_int_equal(cq_decoder_score_prompts(cpu, (const int32_t *const *)prompts, lens, n, ids, 8, b, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) { /* each prompt alone on the GPU */
        cq_decoder_seq *s;
        assert_int_equal(cq_decoder_seq_new(gpu, (int32_t)lens[i] + 1, &s, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(s, prompts[i], lens[i], logits, false, &err), CQ_OK);
        for (int k = 0; k < 8; k++) c[i * 8 + k] = logits[ids[k]];
        cq_decoder_seq_free(s);
    }
    double e_cpu = nmse(a, b, n * 8), e_gpu = nmse(a, c, n * 8);
    fprintf(stderr, "  packed scoring %s, %zu prompts: nmse %.2e vs the CPU, %.2e vs the GPU one at a time\n", path,
            n, e_cpu, e_gpu);
    for (size_t i = 0; i < n; i++) {
        double ei = nmse(a + i * 8, b + i * 8, 8);
        if (ei > NMSE_BF16_FORWARD) fprintf(stderr, "    prompt %zu (%zu tokens): nmse %.2e\n", i, lens[i], ei);
    }
    assert_true(e_cpu < NMSE_BF16_FORWARD);
    assert_true(e_gpu < NMSE_BF16_FORWARD);
    for (size_t i = 0; i < n; i++) free(prompts[i]);
    free(a), free(b), free(c), free(logits);
    test_rm_adapter(adapter);
    cq_decoder_close(cpu);
    cq_decoder_close(gpu);
}

/* fn on every model: the real one when present, the synthetic ones of $CLAUSEQA_SYNTH_GGUF. */
static void for_each_model(void (*fn)(const char *path, int variant), int variant) {
    int tested = 0;
    FILE *f = fopen(model_path(), "rb");
    if (f) {
        fclose(f);
        fn(model_path(), variant);
        tested++;
    }
    const char *synth = getenv("CLAUSEQA_SYNTH_GGUF");
    if (synth) {
        char list[8192];
        snprintf(list, sizeof list, "%s", synth);
        for (char *p = strtok(list, ":"); p; p = strtok(NULL, ":")) {
            fn(p, variant);
            tested++;
        }
    }
    if (!tested) fprintf(stderr, "no model to compare: fetch the real one or set CLAUSEQA_SYNTH_GGUF\n");
    assert_true(tested > 0);
}

static void forward_fn(const char *path, int with_adapter) { compare_forward(path, with_adapter != 0); }
static void packed_fn(const char *path, int unused) {
    (void)unused;
    compare_packed(path);
}

static void test_forward_vs_cpu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(forward_fn, 0);
}

static void test_adapter_vs_cpu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(forward_fn, 1);
}

static void test_packed_scoring(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(packed_fn, 0);
}

/* Rows of logits with many ties (values from a few levels, the best tied), spread ones, and one where each pass-1
 * segment (960 logits) starts with 63 large ones, so that thousands of keys pass pass 2's bound and it merges them
 * chunk by chunk; odd sizes too. */
static void test_top_kernel(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int sizes[] = {262144, 1000, 70001, 64, 7};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int V = sizes[si], rows = 4;
        float *x = malloc((size_t)rows * V * sizeof *x);
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < V; i++)
                x[(size_t)r * V + i] = r == 0   ? (float)(int)(frand() * 6)
                                       : r == 1 ? frand() * 30
                                       : r == 2 ? -fabsf(frand()) * 1e3f
                                                : (i % 960 < 63 ? 1000.0f : 0.0f) + frand();
        cq_top_request req[4];
        for (int r = 0; r < rows; r++) req[r] = (cq_top_request){r == 2 ? 5 : CQ_TOP_MAX, 3, {0, V - 1, V / 3}};
        cq_top gpu[4], cpu;
        cq_err err = {0};
        if (cq_cuda_op_top(x, rows, V, req, gpu, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            fail();
        }
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            cq_top_from_logits(x + (size_t)r * V, V, &req[r], &cpu);
            assert_int_equal(gpu[r].n, cpu.n);
            assert_memory_equal(gpu[r].top_ids, cpu.top_ids, (size_t)cpu.n * sizeof(int32_t));
            assert_memory_equal(gpu[r].top_logits, cpu.top_logits, (size_t)cpu.n * sizeof(float));
            assert_memory_equal(gpu[r].id_logits, cpu.id_logits, 3 * sizeof(float));
            const double e = fabs(gpu[r].lse - cpu.lse);
            worst = e > worst ? e : worst;
            assert_true(e < 1e-5 * fabs(cpu.lse) + 1e-5);
        }
        fprintf(stderr, "  candidates of %d logits: ids and logits equal, log-sum-exp off by %.2e at most\n", V, worst);
        free(x);
    }
}

static int32_t test_token(int V, int i, int t) { return 300 + (int32_t)((unsigned)(i * 7919 + t * 104729) % (unsigned)(V - 300)); }

/* cq_decoder_eval_top on the GPU against cq_decoder_eval's logits (the same kernels: equal), prefill and steps;
 * prompts whose last chunk is several tokens (700) and one token (513, a decode step). */
static void eval_top_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_decoder *gpu;
    cq_decoder_options og = {CQ_DEVICE_CUDA, 0, false};
    assert_int_equal(cq_decoder_open(path, &og, &gpu, &err), CQ_OK);
    const int V = cq_decoder_get_info(gpu)->n_vocab;
    const int lens[2] = {700, CQ_CUDA_BATCH + 1};
    for (int li = 0; li < 2; li++) {
        const int T = lens[li];
        int32_t *ids = malloc((T + 4) * sizeof *ids);
        for (int i = 0; i < T + 4; i++) ids[i] = test_token(V, 1, i);
        cq_decoder_seq *a, *b;
        assert_int_equal(cq_decoder_seq_new(gpu, T + 4, &a, &err), CQ_OK);
        assert_int_equal(cq_decoder_seq_new(gpu, T + 4, &b, &err), CQ_OK);
        float *logits = malloc((size_t)V * 4);
        const cq_top_request req = {CQ_TOP_MAX, 2, {5, 300 % V}};
        cq_top ta, tb;
        for (int step = 0; step < 4; step++) {
            const size_t n = step ? 1 : (size_t)T;
            const int32_t *t = step ? ids + T + step - 1 : ids;
            assert_int_equal(cq_decoder_eval(a, t, n, logits, false, &err), CQ_OK);
            cq_top_from_logits(logits, V, &req, &ta);
            if (cq_decoder_eval_top(b, t, n, &req, &tb, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                fail();
            }
            assert_memory_equal(ta.top_ids, tb.top_ids, sizeof ta.top_ids);
            assert_memory_equal(ta.top_logits, tb.top_logits, sizeof ta.top_logits);
            assert_memory_equal(ta.id_logits, tb.id_logits, 2 * sizeof(float));
            assert_true(fabs(ta.lse - tb.lse) < 1e-5 * fabs(ta.lse) + 1e-5);
        }
        fprintf(stderr, "  eval_top %s: %d-token prefill and 3 steps equal to the full logits' candidates\n", path, T);
        free(ids), free(logits);
        cq_decoder_seq_free(a);
        cq_decoder_seq_free(b);
    }
    cq_decoder_close(gpu);
}

#define BATCH_WORST 6 /* rows of a comparison printed, the log-sum-exp's largest moves first */

/* Accumulates the batched row's differences from the single row's. */
typedef struct {
    double err_ids, ref_ids, err_top, ref_top, lse;
    int rows, agree;
    /* the log-sum-exp per row (issue 31): rows whose log-sum-exp moved more than 0.1 + twice the largest move of
     * their top logits (a normalizer that disagrees with the logits it normalizes); lse_bound > 0: no row may move
     * more than that at all */
    int lse_bad;
    double lse_bound;
    /* the next row's sequence, its prompt length and position (set by the caller before batch_compare; 0 0 0 when
     * not told), and the rows whose log-sum-exp moved most, printed by batch_check_agree (issue 31: which
     * sequences and positions break) */
    int seq, len, pos;
    struct {
        double dl, moved;
        float lse_single, lse_batched;
        int row, seq, len, pos, top_single, top_batched;
    } worst[BATCH_WORST];
    int n_worst;
} batch_cmp;

static void batch_compare(batch_cmp *c, const cq_top *single, const cq_top *batched) {
    for (int j = 0; j < CQ_TOP_MAX_IDS; j++) {
        const double d = (double)batched->id_logits[j] - single->id_logits[j];
        c->err_ids += d * d, c->ref_ids += (double)single->id_logits[j] * single->id_logits[j];
    }
    double moved = 0;
    for (int j = 0; j < single->n; j++) {
        const double d = (double)batched->top_logits[j] - single->top_logits[j];
        c->err_top += d * d, c->ref_top += (double)single->top_logits[j] * single->top_logits[j];
        moved = fabs(d) > moved ? fabs(d) : moved;
    }
    const double dl = fabs(batched->lse - single->lse);
    if (dl > 0.1 + 2 * moved) {
        fprintf(stderr, "  row %d: log-sum-exp %.4f vs %.4f alone, its top logits moved %.4f at most\n", c->rows,
                batched->lse, single->lse, moved);
        c->lse_bad++;
    }
    c->lse = dl > c->lse ? dl : c->lse;
    int at = c->n_worst < BATCH_WORST ? c->n_worst++ : BATCH_WORST; /* insertion into the worst rows, largest first */
    while (at > 0 && c->worst[at - 1].dl < dl) {
        if (at < BATCH_WORST) c->worst[at] = c->worst[at - 1];
        at--;
    }
    if (at < BATCH_WORST) {
        c->worst[at].dl = dl, c->worst[at].moved = moved;
        c->worst[at].lse_single = single->lse, c->worst[at].lse_batched = batched->lse;
        c->worst[at].row = c->rows, c->worst[at].seq = c->seq, c->worst[at].len = c->len, c->worst[at].pos = c->pos;
        c->worst[at].top_single = single->n ? single->top_ids[0] : -1;
        c->worst[at].top_batched = batched->n ? batched->top_ids[0] : -1;
    }
    c->rows++;
    c->agree += batched->top_ids[0] == single->top_ids[0];
}

/* The rows whose log-sum-exp moved most: sequence, prompt length, position, log-sum-exp and best id of each path. */
static void batch_print_worst(const batch_cmp *c) {
    for (int k = 0; k < c->n_worst; k++)
        fprintf(stderr, "    row %d (seq %d, prompt %d, pos %d): lse %.4f vs %.4f alone (off %.4f), top-1 %d vs %d "
                        "alone%s, top %d logits moved %.4f at most\n",
                c->worst[k].row, c->worst[k].seq, c->worst[k].len, c->worst[k].pos, c->worst[k].lse_batched,
                c->worst[k].lse_single, c->worst[k].dl, c->worst[k].top_batched, c->worst[k].top_single,
                c->worst[k].top_batched == c->worst[k].top_single ? "" : " (differs)", CQ_TOP_MAX, c->worst[k].moved);
}

/* Only what batch_check prints, no asserts: a diagnostic comparison (issue 31). */
static void batch_report(const batch_cmp *c, const char *what) {
    fprintf(stderr, "  %s: %d rows, nmse %.2e (8 named ids) %.2e (top %d), log-sum-exp off by %.2e at most, best "
                    "candidate agrees %d/%d (diagnostic, not checked)\n",
            what, c->rows, c->err_ids / c->ref_ids, c->err_top / c->ref_top, CQ_TOP_MAX, c->lse, c->agree, c->rows);
    batch_print_worst(c);
}

/* As batch_check, the best candidates agreeing on at least num/den of the rows (few rows: one that swaps with a
 * close second weighs more). */
static void batch_check_agree(const batch_cmp *c, const char *what, int num, int den);
static void batch_check(const batch_cmp *c, const char *what) { batch_check_agree(c, what, 9, 10); }
static void batch_check_agree(const batch_cmp *c, const char *what, int num, int den) {
    const double e_ids = c->err_ids / c->ref_ids, e_top = c->err_top / c->ref_top;
    fprintf(stderr, "  %s: %d rows, nmse %.2e (8 named ids) %.2e (top %d), log-sum-exp off by %.2e at most, best "
                    "candidate agrees %d/%d\n",
            what, c->rows, e_ids, e_top, CQ_TOP_MAX, c->lse, c->agree, c->rows);
    batch_print_worst(c);
    assert_true(e_ids < NMSE_BF16_FORWARD);
    assert_true(e_top < NMSE_BF16_FORWARD);
    assert_true(c->agree * den >= c->rows * num);
    assert_int_equal(c->lse_bad, 0);
    if (c->lse_bound > 0) assert_true(c->lse < c->lse_bound);
}

/* B sequences (prompt lengths lens) stepped `steps` times one at a time (batch 1: cq_cuda_eval_top) and as batches
 * (cq_cuda_decode_batch), compared into c (checked by the caller, after every comparison of the test is printed).
 * Diagnostics (issue 31), printed only: a third copy of each sequence stepped through the batched kernels one row at
 * a time (cq_cuda_forward_rows of that row alone), against the batch (rows_vs_batch: the other rows' effect, if the
 * batched kernels mix rows) and against batch 1 (rows_vs_single: the batched kernels' bf16 activations against the
 * decode kernels' float ones, the other rows left out). */
static void batch_vs_single(cq_cuda_model *cm, const cq_gemma *m, const int *lens, int B, int steps, batch_cmp *c,
                            batch_cmp *rows_vs_batch, batch_cmp *rows_vs_single) {
    cq_err err = {0};
    const int V = m->n_vocab;
    cq_cuda_seq **sa = calloc((size_t)B, sizeof *sa), **sb = calloc((size_t)B, sizeof *sb);
    cq_cuda_seq **sc = calloc((size_t)B, sizeof *sc);
    int32_t *tokens = malloc((size_t)B * sizeof *tokens), *pos = malloc((size_t)B * sizeof *pos);
    cq_top_request *req = malloc((size_t)B * sizeof *req);
    cq_top *ta = malloc((size_t)B * sizeof *ta), *tb = malloc((size_t)B * sizeof *tb), *tc = malloc((size_t)B * sizeof *tc);
    for (int i = 0; i < B; i++) {
        int32_t *p = malloc((size_t)lens[i] * sizeof *p);
        for (int t = 0; t < lens[i]; t++) p[t] = t == 0 ? 2 : test_token(V, i, t);
        assert_int_equal(cq_cuda_seq_new(cm, lens[i] + steps + 1, &sa[i], &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, lens[i] + steps + 1, &sb[i], &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, lens[i] + steps + 1, &sc[i], &err), CQ_OK);
        assert_int_equal(cq_cuda_eval(sa[i], p, (size_t)lens[i], 0, NULL, false, &err), CQ_OK);
        assert_int_equal(cq_cuda_eval(sb[i], p, (size_t)lens[i], 0, NULL, false, &err), CQ_OK);
        assert_int_equal(cq_cuda_eval(sc[i], p, (size_t)lens[i], 0, NULL, false, &err), CQ_OK);
        req[i] = (cq_top_request){CQ_TOP_MAX, CQ_TOP_MAX_IDS, {5, 300, 301, 1000, 2000, 4000, 8000, 9999}};
        for (int j = 0; j < CQ_TOP_MAX_IDS; j++) req[i].ids[j] %= V;
        free(p);
    }
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < B; i++) {
            tokens[i] = test_token(V, i + 1000, step), pos[i] = lens[i] + step;
            assert_int_equal(cq_cuda_eval_top(sa[i], &tokens[i], 1, pos[i], &req[i], &ta[i], &err), CQ_OK);
            const int32_t row0 = 0;
            if (cq_cuda_forward_rows(&sc[i], &tokens[i], &pos[i], 1, &row0, 1, &req[i], &tc[i], &err)) {
                fprintf(stderr, "a row alone, step %d: %s\n", step, err.msg);
                fail();
            }
        }
        if (cq_cuda_decode_batch(sb, tokens, pos, B, req, tb, &err)) {
            fprintf(stderr, "batched step %d: %s\n", step, err.msg);
            fail();
        }
        for (int i = 0; i < B; i++) {
            batch_cmp *all[3] = {c, rows_vs_batch, rows_vs_single};
            for (int k = 0; k < 3; k++) all[k]->seq = i, all[k]->len = lens[i], all[k]->pos = pos[i];
            batch_compare(c, &ta[i], &tb[i]);
            batch_compare(rows_vs_batch, &tc[i], &tb[i]);
            batch_compare(rows_vs_single, &ta[i], &tc[i]);
        }
    }
    for (int i = 0; i < B; i++) cq_cuda_seq_free(sa[i]), cq_cuda_seq_free(sb[i]), cq_cuda_seq_free(sc[i]);
    free(sa), free(sb), free(sc), free(tokens), free(pos), free(req), free(ta), free(tb), free(tc);
}

static void batch_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    cq_cuda_model *cm;
    assert_int_equal(cq_gguf_open(path, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    assert_int_equal(cq_cuda_model_new(&m, &cm, &err), CQ_OK);
    const int W = window_span(m.window);
    const int lens[] = {1, 5, 37, 300, W + CQ_CUDA_BATCH + 30, 2 * W + 5};
    char what[3][256];
    /* the real model: every row's log-sum-exp within 0.25 of batch 1's (issue 31: the batched step's logits were a
     * bf16 GEMM, up to 1.3 off; now batch 1's logits kernel on each row). With the products' inputs rounded to bf16
     * (CLAUSEQA_BATCH_PLANES=1) this failed on an H100 (0.73, best 29/30; the float emulation of these steps,
     * lse_steps_emul.py: 0.39, 29/30); main() sets 3 planes, the float inputs exactly as batch 1 takes them: the
     * emulation's gap is then float rounding (docs/PERF.md). A row's logits are then held to a float forward's
     * error too (NMSE_BATCH_PLANES), when the model was made with 3 planes. */
    const double bound = !strcmp(path, model_path()) ? 0.25 : 0;
    const char *pe = getenv("CLAUSEQA_BATCH_PLANES");
    const bool exact = pe && !strcmp(pe, "3");
    batch_cmp c[3], rb[3], rs[3];
    memset(c, 0, sizeof c), memset(rb, 0, sizeof rb), memset(rs, 0, sizeof rs);
    for (int k = 0; k < 3; k++) c[k].lse_bound = bound;
    snprintf(what[0], sizeof what[0], "batched vs single steps, %s, 6 sequences of 1 to %d tokens", path, lens[5]);
    batch_vs_single(cm, &m, lens, 6, 5, &c[0], &rb[0], &rs[0]);
    int many[CQ_CUDA_DECODE_BATCH_MAX];
    for (int i = 0; i < CQ_CUDA_DECODE_BATCH_MAX; i++) many[i] = 3 + i;
    snprintf(what[1], sizeof what[1], "batched vs single steps, %s, %d sequences", path, CQ_CUDA_DECODE_BATCH_MAX);
    batch_vs_single(cm, &m, many, CQ_CUDA_DECODE_BATCH_MAX, 2, &c[1], &rb[1], &rs[1]);
    /* with a bf16 KV cache (sequences made after the switch): the batched kernels' bf16 instances */
    assert_int_equal(cq_cuda_model_set_kv_bf16(cm, true, &err), CQ_OK);
    snprintf(what[2], sizeof what[2], "batched vs single steps, bf16 KV, %s, 6 sequences of 1 to %d tokens", path,
             lens[5]);
    batch_vs_single(cm, &m, lens, 6, 3, &c[2], &rb[2], &rs[2]);
    assert_int_equal(cq_cuda_model_set_kv_bf16(cm, false, &err), CQ_OK);
    /* diagnostics (issue 31; their log-sum-exp printed, not bounded), both with the batched products' inputs
     * rounded to bf16 (CLAUSEQA_BATCH_PLANES=1, the product's default until a GPU has run the planes): (p1) against
     * batch 1 as it is (float inputs): the gap the planes close (H100, a55b470: 0.73); (a16) against batch 1 with its
     * inputs rounded to bf16 as well (CLAUSEQA_DECODE_BF16_ACT=1): both paths round alike, so the gap closes to
     * float rounding if rounding was the whole cause, and stays if a batched kernel is wrong */
    /* and (cg, checked as the batch is) the batched steps' default logits, the cuBLAS GEMM on the bf16 copy of the
     * output matrix (CLAUSEQA_BATCH_LOGITS unset), with the planes main() set: their states in planes too (the
     * emulation: 0.009 on these rows with 3 planes, the weights' bf16 alone; 0.21 with the states in bf16) */
    batch_cmp a16, p1, cg;
    memset(&a16, 0, sizeof a16), memset(&p1, 0, sizeof p1), memset(&cg, 0, sizeof cg);
    cg.lse_bound = bound;
    char *old_pl = pe ? strdup(pe) : NULL, *old_lg = getenv("CLAUSEQA_BATCH_LOGITS");
    old_lg = old_lg ? strdup(old_lg) : NULL;
    for (int k = 0; k < 3; k++) {
        cq_cuda_model *cmd;
        if (k < 2) setenv("CLAUSEQA_BATCH_PLANES", "1", 1);
        if (k == 1) setenv("CLAUSEQA_DECODE_BF16_ACT", "1", 1);
        if (k == 2) unsetenv("CLAUSEQA_BATCH_LOGITS");
        const cq_status std = cq_cuda_model_new(&m, &cmd, &err);
        unsetenv("CLAUSEQA_DECODE_BF16_ACT");
        if (old_pl) setenv("CLAUSEQA_BATCH_PLANES", old_pl, 1);
        else unsetenv("CLAUSEQA_BATCH_PLANES");
        if (old_lg) setenv("CLAUSEQA_BATCH_LOGITS", old_lg, 1);
        assert_int_equal(std, CQ_OK);
        batch_cmp rbd, rsd, *out = k == 0 ? &p1 : k == 1 ? &a16 : &cg;
        memset(&rbd, 0, sizeof rbd), memset(&rsd, 0, sizeof rsd);
        batch_vs_single(cmd, &m, lens, 6, 5, out, &rbd, &rsd);
        char d[1024];
        if (k < 2) {
            snprintf(d, sizeof d, "%s, batched inputs in bf16 (CLAUSEQA_BATCH_PLANES=1) vs batch 1%s", what[0],
                     k ? " with bf16 inputs too (CLAUSEQA_DECODE_BF16_ACT=1)" : "");
            batch_report(out, d);
            snprintf(d, sizeof d, "%s, each row alone through the batched kernels (1 plane) vs batch 1%s", what[0],
                     k ? " with bf16 inputs" : "");
            batch_report(&rsd, d);
        }
        cq_cuda_model_free(cmd);
    }
    free(old_pl), free(old_lg);
    pe = getenv("CLAUSEQA_BATCH_PLANES"); /* the environment changed under the pointer */
    char what_g[1024];
    snprintf(what_g, sizeof what_g, "%s, the GEMM's logits (CLAUSEQA_BATCH_LOGITS unset, CLAUSEQA_BATCH_PLANES=%s)",
             what[0], pe ? pe : "1");
    batch_report(&cg, what_g);
    /* every comparison printed before any is checked: one run tells which sequences and positions break */
    for (int k = 0; k < 3; k++) {
        char d[1024];
        snprintf(d, sizeof d, "%s: batched vs each row alone through the batched kernels", what[k]);
        batch_report(&rb[k], d);
        snprintf(d, sizeof d, "%s: each row alone through the batched kernels vs single", what[k]);
        batch_report(&rs[k], d);
        batch_report(&c[k], what[k]);
    }
    for (int k = 0; k < 3; k++) batch_check(&c[k], what[k]);
    batch_check(&cg, what_g);
    /* batch 1's rounding points: what is left is float rounding, far below the bf16 forward's 3e-5; with the float
     * cache only (a bf16 cache rounds K and V on both paths, where float noise can flip a rounding: bf16-level
     * differences, as the forwards of rows showed, 2.35e-6 on the H100) */
    if (exact)
        for (int k = 0; k < 2; k++) {
            assert_true(c[k].err_ids / c[k].ref_ids < NMSE_BATCH_PLANES);
            assert_true(c[k].err_top / c[k].ref_top < NMSE_BATCH_PLANES);
        }
    /* the diagnostics' steps are still a forward of bf16 tolerance (their log-sum-exp printed above only) */
    const batch_cmp *dg[2] = {&a16, &p1};
    for (int k = 0; k < 2; k++) {
        assert_true(dg[k]->err_ids / dg[k]->ref_ids < NMSE_BF16_FORWARD);
        assert_true(dg[k]->err_top / dg[k]->ref_top < NMSE_BF16_FORWARD);
        assert_int_equal(dg[k]->lse_bad, 0);
    }
    int32_t t = 5, p = 0;
    cq_top_request r = {1, 0, {0}};
    cq_top o;
    assert_int_equal(cq_cuda_decode_batch(NULL, &t, &p, CQ_CUDA_DECODE_BATCH_MAX + 1, &r, &o, &err), CQ_ERR_INVALID);
    cq_cuda_model_free(cm);
    cq_gemma_free(&m);
    cq_gguf_close(g);
}

/* Threads stepping their own sequences at once through the decoder's batcher. */
#define CONC_THREADS 8
#define CONC_STEPS 12
typedef struct {
    cq_decoder_seq *s;
    int index;
    cq_top out[CONC_STEPS];
    cq_status st;
} conc_job;

static void *conc_main(void *arg) {
    conc_job *j = arg;
    cq_err err = {0};
    const int V = cq_decoder_get_info(cq_decoder_seq_decoder(j->s))->n_vocab;
    cq_top_request req = {CQ_TOP_MAX, CQ_TOP_MAX_IDS, {5, 300, 301, 1000, 2000, 4000, 8000, 9999}};
    for (int k = 0; k < CQ_TOP_MAX_IDS; k++) req.ids[k] %= V;
    for (int step = 0; step < CONC_STEPS && !j->st; step++) {
        const int32_t t = test_token(V, j->index + 2000, step);
        j->st = cq_decoder_eval_top(j->s, &t, 1, &req, &j->out[step], &err);
    }
    return NULL;
}

static void concurrent_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_decoder *gpu;
    cq_decoder_options og = {CQ_DEVICE_CUDA, 0, false};
    assert_int_equal(cq_decoder_open(path, &og, &gpu, &err), CQ_OK);
    const int V = cq_decoder_get_info(gpu)->n_vocab;
    conc_job alone[CONC_THREADS], together[CONC_THREADS];
    for (int pass = 0; pass < 2; pass++) {
        conc_job *jobs = pass ? together : alone;
        for (int i = 0; i < CONC_THREADS; i++) {
            const int len = 20 + 37 * i;
            int32_t *p = malloc((size_t)len * sizeof *p);
            for (int t = 0; t < len; t++) p[t] = test_token(V, i, t);
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].index = i;
            assert_int_equal(cq_decoder_seq_new(gpu, len + CONC_STEPS, &jobs[i].s, &err), CQ_OK);
            assert_int_equal(cq_decoder_eval(jobs[i].s, p, (size_t)len, NULL, false, &err), CQ_OK);
            free(p);
        }
        cq_decoder_stats s0, s1;
        cq_decoder_get_stats(gpu, &s0);
        if (pass == 0) {
            for (int i = 0; i < CONC_THREADS; i++) conc_main(&jobs[i]);
        } else {
            pthread_t th[CONC_THREADS];
            for (int i = 0; i < CONC_THREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, conc_main, &jobs[i]), 0);
            for (int i = 0; i < CONC_THREADS; i++) pthread_join(th[i], NULL);
        }
        cq_decoder_get_stats(gpu, &s1);
        fprintf(stderr, "  %s: %llu steps in %llu forwards\n", pass ? "threads at once" : "one after the other",
                (unsigned long long)(s1.steps - s0.steps), (unsigned long long)(s1.forwards - s0.forwards));
        assert_int_equal(s1.steps - s0.steps, CONC_THREADS * CONC_STEPS);
        if (pass == 0) assert_int_equal(s1.forwards - s0.forwards, CONC_THREADS * CONC_STEPS);
        for (int i = 0; i < CONC_THREADS; i++) assert_int_equal(jobs[i].st, CQ_OK);
    }
    batch_cmp c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < CONC_THREADS; i++) {
        for (int step = 0; step < CONC_STEPS; step++) {
            c.seq = i, c.len = 20 + 37 * i, c.pos = c.len + step; /* the prompts' lengths above */
            batch_compare(&c, &alone[i].out[step], &together[i].out[step]);
        }
        cq_decoder_seq_free(alone[i].s);
        cq_decoder_seq_free(together[i].s);
    }
    batch_check(&c, "threads at once vs one after the other");
    cq_decoder_close(gpu);
}

/* One forward of rows of several sequences (cq_cuda_forward_rows) against each sequence fed alone: whole prompts
 * from position 0, a chunk after a prefix longer than the local window (the ring's wrap), a decode step; then steps
 * on both, which read the caches the forward of rows wrote. */
static void rows_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    cq_cuda_model *cm;
    assert_int_equal(cq_gguf_open(path, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    assert_int_equal(cq_cuda_model_new(&m, &cm, &err), CQ_OK);
    const int V = m.n_vocab, W = window_span(m.window), STEPS = 3, N = 5;
    const int prefix[5] = {0, 0, 0, W + 30, 50}, chunk[5] = {5, 37, 300, 120, 1};
    cq_cuda_seq *sa[5], *sb[5];
    cq_top_request req[5];
    cq_top ta[5], tb[5];
    int32_t *tok[5];
    int total = 0;
    for (int i = 0; i < N; i++) {
        const int len = prefix[i] + chunk[i] + STEPS;
        tok[i] = malloc((size_t)len * sizeof *tok[i]);
        for (int t = 0; t < len; t++) tok[i][t] = t == 0 ? 2 : test_token(V, i + 50, t);
        assert_int_equal(cq_cuda_seq_new(cm, len + 1, &sa[i], &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, len + 1, &sb[i], &err), CQ_OK);
        if (prefix[i]) {
            assert_int_equal(cq_cuda_eval(sa[i], tok[i], (size_t)prefix[i], 0, NULL, false, &err), CQ_OK);
            assert_int_equal(cq_cuda_eval(sb[i], tok[i], (size_t)prefix[i], 0, NULL, false, &err), CQ_OK);
        }
        req[i] = (cq_top_request){CQ_TOP_MAX, CQ_TOP_MAX_IDS, {5, 300, 301, 1000, 2000, 4000, 8000, 9999}};
        for (int j = 0; j < CQ_TOP_MAX_IDS; j++) req[i].ids[j] %= V;
        total += chunk[i];
    }
    assert_true(total <= CQ_CUDA_ROWS_MAX);
    cq_cuda_seq **seqs = malloc((size_t)total * sizeof *seqs);
    int32_t *tokens = malloc((size_t)total * sizeof *tokens), *pos = malloc((size_t)total * sizeof *pos), out_rows[5];
    int R = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(cq_cuda_eval_top(sa[i], tok[i] + prefix[i], (size_t)chunk[i], prefix[i], &req[i], &ta[i], &err),
                         CQ_OK);
        for (int t = 0; t < chunk[i]; t++, R++) seqs[R] = sb[i], tokens[R] = tok[i][prefix[i] + t], pos[R] = prefix[i] + t;
        out_rows[i] = R - 1;
    }
    if (cq_cuda_forward_rows(seqs, tokens, pos, R, out_rows, N, req, tb, &err)) {
        fprintf(stderr, "forward of rows: %s\n", err.msg);
        fail();
    }
    batch_cmp c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < N; i++) {
        c.seq = i, c.len = prefix[i] + chunk[i], c.pos = prefix[i] + chunk[i] - 1;
        batch_compare(&c, &ta[i], &tb[i]);
    }
    char what[256];
    snprintf(what, sizeof what, "forward of %d rows (4 prompts, a step) vs each alone, %s", R, path);
    batch_check_agree(&c, what, 3, 4);
    memset(&c, 0, sizeof c);
    for (int step = 0; step < STEPS; step++) { /* the caches the forward of rows wrote, read by steps */
        int32_t st_tok[5], st_pos[5];
        for (int i = 0; i < N; i++) {
            st_pos[i] = prefix[i] + chunk[i] + step, st_tok[i] = tok[i][st_pos[i]];
            assert_int_equal(cq_cuda_eval_top(sa[i], &st_tok[i], 1, st_pos[i], &req[i], &ta[i], &err), CQ_OK);
        }
        assert_int_equal(cq_cuda_decode_batch(sb, st_tok, st_pos, N, req, tb, &err), CQ_OK);
        for (int i = 0; i < N; i++) {
            c.seq = i, c.len = prefix[i] + chunk[i], c.pos = st_pos[i];
            batch_compare(&c, &ta[i], &tb[i]);
        }
    }
    snprintf(what, sizeof what, "steps after the forward of rows vs after each alone, %s", path);
    batch_check_agree(&c, what, 3, 4);
    /* a forward that only fills a cache (no candidates): a prompt's first part; its second part gives them */
    {
        const int len = 90;
        cq_cuda_seq *pa, *pb, *rs[90];
        int32_t *pt = malloc((size_t)len * sizeof *pt), pp[90], last = 29;
        for (int t = 0; t < len; t++) pt[t] = t == 0 ? 2 : test_token(V, 77, t), pp[t] = t;
        assert_int_equal(cq_cuda_seq_new(cm, len, &pa, &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, len, &pb, &err), CQ_OK);
        for (int t = 0; t < len; t++) rs[t] = pb;
        assert_int_equal(cq_cuda_eval_top(pa, pt, (size_t)len, 0, &req[0], &ta[0], &err), CQ_OK);
        assert_int_equal(cq_cuda_forward_rows(rs, pt, pp, 60, NULL, 0, req, tb, &err), CQ_OK);
        assert_int_equal(cq_cuda_forward_rows(rs, pt + 60, pp + 60, 30, &last, 1, req, tb, &err), CQ_OK);
        memset(&c, 0, sizeof c);
        batch_compare(&c, &ta[0], &tb[0]); /* one row: the logits' error only (the best may swap with a close one) */
        fprintf(stderr, "  a prompt fed in two forwards of rows (60 + 30) vs alone: nmse %.2e (8 named ids) %.2e "
                        "(top %d), best candidate %s\n",
                c.err_ids / c.ref_ids, c.err_top / c.ref_top, CQ_TOP_MAX, c.agree ? "the same" : "differs");
        assert_true(c.err_ids / c.ref_ids < NMSE_BF16_FORWARD);
        assert_true(c.err_top / c.ref_top < NMSE_BF16_FORWARD);
        cq_cuda_seq_free(pa), cq_cuda_seq_free(pb), free(pt);
    }
    /* bad forwards: no rows, too many, a gap in a sequence's positions, a sequence in two runs, a bad output row */
    assert_int_equal(cq_cuda_forward_rows(seqs, tokens, pos, 0, out_rows, 1, req, tb, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_cuda_forward_rows(seqs, tokens, pos, CQ_CUDA_ROWS_MAX + 1, out_rows, 1, req, tb, &err),
                     CQ_ERR_INVALID);
    cq_cuda_seq *two[3] = {sb[0], sb[0], sb[1]};
    int32_t tt[3] = {5, 6, 7}, gap[3] = {0, 2, 0}, ok_pos[3] = {0, 1, 0}, row0 = 0, bad_row = 3;
    assert_int_equal(cq_cuda_forward_rows(two, tt, gap, 3, &row0, 1, req, tb, &err), CQ_ERR_INVALID);
    cq_cuda_seq *apart[3] = {sb[0], sb[1], sb[0]};
    assert_int_equal(cq_cuda_forward_rows(apart, tt, ok_pos, 3, &row0, 1, req, tb, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_cuda_forward_rows(two, tt, ok_pos, 3, &bad_row, 1, req, tb, &err), CQ_ERR_INVALID);
    for (int i = 0; i < N; i++) cq_cuda_seq_free(sa[i]), cq_cuda_seq_free(sb[i]), free(tok[i]);
    free(seqs), free(tokens), free(pos);
    cq_cuda_model_free(cm);
    cq_gemma_free(&m);
    cq_gguf_close(g);
}

/* Threads prefilling prompts (one longer than a forward's rows: fed in parts) and stepping at once through the
 * decoder's batcher, against the same one after the other. */
#define PRE_THREADS 8
#define PRE_STEPS 6
typedef struct {
    cq_decoder_seq *s;
    int index, len;
    cq_top out[PRE_STEPS + 1];
    cq_status st;
    pthread_barrier_t *go;
} pre_job;

static void *pre_main(void *arg) {
    pre_job *j = arg;
    cq_err err = {0};
    const int V = cq_decoder_get_info(cq_decoder_seq_decoder(j->s))->n_vocab;
    cq_top_request req = {CQ_TOP_MAX, CQ_TOP_MAX_IDS, {5, 300, 301, 1000, 2000, 4000, 8000, 9999}};
    for (int k = 0; k < CQ_TOP_MAX_IDS; k++) req.ids[k] %= V;
    int32_t *p = malloc((size_t)j->len * sizeof *p);
    for (int t = 0; t < j->len; t++) p[t] = t == 0 ? 2 : test_token(V, j->index + 3000, t);
    if (j->go) pthread_barrier_wait(j->go);
    j->st = cq_decoder_eval_top(j->s, p, (size_t)j->len, &req, &j->out[0], &err);
    for (int step = 0; step < PRE_STEPS && !j->st; step++) {
        const int32_t t = j->out[step].top_ids[0];
        j->st = cq_decoder_eval_top(j->s, &t, 1, &req, &j->out[step + 1], &err);
    }
    if (j->st) fprintf(stderr, "thread %d: %s\n", j->index, err.msg);
    free(p);
    return NULL;
}

static void prefill_batch_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_decoder *gpu;
    cq_decoder_options og = {CQ_DEVICE_CUDA, 0, false};
    setenv("CLAUSEQA_BATCH_PREFILL", "1", 1); /* prompts through the batcher (off by default) */
    assert_int_equal(cq_decoder_open(path, &og, &gpu, &err), CQ_OK);
    unsetenv("CLAUSEQA_BATCH_PREFILL");
    pre_job alone[PRE_THREADS], together[PRE_THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, PRE_THREADS);
    for (int pass = 0; pass < 2; pass++) {
        pre_job *jobs = pass ? together : alone;
        for (int i = 0; i < PRE_THREADS; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].index = i, jobs[i].len = i == 3 ? CQ_CUDA_ROWS_MAX + 200 : 30 + 61 * i;
            jobs[i].go = pass ? &go : NULL;
            assert_int_equal(cq_decoder_seq_new(gpu, jobs[i].len + PRE_STEPS + 1, &jobs[i].s, &err), CQ_OK);
        }
        cq_decoder_stats s0, s1;
        cq_decoder_get_stats(gpu, &s0);
        if (pass == 0) {
            for (int i = 0; i < PRE_THREADS; i++) pre_main(&jobs[i]);
        } else {
            pthread_t th[PRE_THREADS];
            for (int i = 0; i < PRE_THREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, pre_main, &jobs[i]), 0);
            for (int i = 0; i < PRE_THREADS; i++) pthread_join(th[i], NULL);
        }
        cq_decoder_get_stats(gpu, &s1);
        fprintf(stderr, "  prompts %s: %llu prompt forwards, %llu shared; %llu steps in %llu forwards\n",
                pass ? "at once" : "one after the other",
                (unsigned long long)(s1.prompt_forwards - s0.prompt_forwards),
                (unsigned long long)(s1.prompt_forwards_shared - s0.prompt_forwards_shared),
                (unsigned long long)(s1.steps - s0.steps), (unsigned long long)(s1.forwards - s0.forwards));
        if (pass == 0) {
            assert_int_equal(s1.prompt_forwards - s0.prompt_forwards, PRE_THREADS);
            assert_int_equal(s1.prompt_forwards_shared, s0.prompt_forwards_shared);
        }
        for (int i = 0; i < PRE_THREADS; i++) {
            assert_int_equal(jobs[i].st, CQ_OK);
            assert_int_equal(cq_decoder_seq_pos(jobs[i].s), jobs[i].len + PRE_STEPS);
        }
    }
    pthread_barrier_destroy(&go);
    batch_cmp c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < PRE_THREADS; i++) {
        /* the prompt's candidates; the steps feed each pass's own best candidate, so compare them while they agree */
        c.seq = i, c.len = alone[i].len, c.pos = alone[i].len - 1;
        batch_compare(&c, &alone[i].out[0], &together[i].out[0]);
        for (int step = 1; step <= PRE_STEPS && alone[i].out[step - 1].top_ids[0] == together[i].out[step - 1].top_ids[0];
             step++) {
            c.pos = alone[i].len + step - 1;
            batch_compare(&c, &alone[i].out[step], &together[i].out[step]);
        }
        cq_decoder_seq_free(alone[i].s);
        cq_decoder_seq_free(together[i].s);
    }
    batch_check_agree(&c, "prompts and steps of threads at once vs one after the other", 3, 4);
    cq_decoder_close(gpu);
}

/* cq_decoder_score_prompts from 4 threads at once (asks reranking together: their prompts gathered into shared
 * slices of 1,536 tokens, packed passes whose chunks differ from the alone runs') against each call alone: the same
 * scores within the packed path's bf16 tolerance (NMSE 2e-3, the forward's; the same best candidate), every call
 * completes, and slices were shared. */
typedef struct {
    cq_decoder *d;
    int32_t **p;
    size_t *len, n;
    int32_t ids[2];
    float *out;
    cq_status st;
} score_call;

static void *score_thread(void *arg) {
    score_call *c = arg;
    cq_err err = {0};
    c->st = cq_decoder_score_prompts(c->d, (const int32_t *const *)c->p, c->len, c->n, c->ids, 2, c->out, &err);
    if (c->st) fprintf(stderr, "%s\n", err.msg);
    return NULL;
}

static void score_calls_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_decoder *gpu;
    cq_decoder_options og = {CQ_DEVICE_CUDA, 0, false};
    assert_int_equal(cq_decoder_open(path, &og, &gpu, &err), CQ_OK);
    cq_decoder_set_scoring(gpu, 1536, true);
    const int V = cq_decoder_get_info(gpu)->n_vocab;
    enum { CALLS = 4, PROMPTS = 20 };
    score_call c[CALLS];
    float alone[CALLS][PROMPTS * 2];
    for (int k = 0; k < CALLS; k++) {
        c[k] = (score_call){gpu, calloc(PROMPTS, sizeof(int32_t *)), calloc(PROMPTS, sizeof(size_t)), PROMPTS,
                            {5 + k, 300 % V}, calloc(PROMPTS * 2, sizeof(float)), CQ_OK};
        for (int i = 0; i < PROMPTS; i++) {
            c[k].len[i] = 60 + (size_t)((i * 37 + k * 11) % 240);
            c[k].p[i] = malloc(c[k].len[i] * sizeof(int32_t));
            for (size_t t = 0; t < c[k].len[i]; t++) c[k].p[i][t] = test_token(V, k * PROMPTS + i, (int)t);
        }
        score_thread(&c[k]);
        assert_int_equal(c[k].st, CQ_OK);
        memcpy(alone[k], c[k].out, sizeof alone[k]);
        memset(c[k].out, 0, sizeof alone[k]);
    }
    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(gpu, &s0);
    pthread_t th[CALLS];
    for (int k = 0; k < CALLS; k++) pthread_create(&th[k], NULL, score_thread, &c[k]);
    for (int k = 0; k < CALLS; k++) pthread_join(th[k], NULL);
    cq_decoder_get_stats(gpu, &s1);
    double worst = 0;
    int best_same = 0;
    for (int k = 0; k < CALLS; k++) {
        assert_int_equal(c[k].st, CQ_OK);
        const double e = nmse(c[k].out, alone[k], PROMPTS * 2);
        worst = e > worst ? e : worst;
        int ba = 0, bb = 0;
        for (int i = 1; i < PROMPTS; i++) {
            if (alone[k][2 * i] - alone[k][2 * i + 1] > alone[k][2 * ba] - alone[k][2 * ba + 1]) ba = i;
            if (c[k].out[2 * i] - c[k].out[2 * i + 1] > c[k].out[2 * bb] - c[k].out[2 * bb + 1]) bb = i;
        }
        best_same += ba == bb;
        for (int i = 0; i < PROMPTS; i++) free(c[k].p[i]);
        free(c[k].p), free(c[k].len), free(c[k].out);
    }
    fprintf(stderr, "  %d concurrent scoring calls of %d prompts: %llu slices (%llu shared), NMSE vs alone %.2e, "
                    "best candidate the same %d/%d\n",
            CALLS, PROMPTS, (unsigned long long)(s1.score_slices - s0.score_slices),
            (unsigned long long)(s1.score_slices_shared - s0.score_slices_shared), worst, best_same, CALLS);
    assert_true(worst < 2e-3);
    assert_int_equal(s1.score_prompts - s0.score_prompts, CALLS * PROMPTS);
    cq_decoder_close(gpu);
}

/* What a bf16 KV cache costs the logits on the GPU (issue 31; the CPU twin: test_decoder_kv_bf16.c): fixed dev
 * prompts (the zh and en perplexity texts, a relevance prompt, and the two texts joined, past the local window) fed
 * to a sequence with a float cache and to one with a bf16 cache, then 16 decode steps teacher-forced with the float
 * run's greedy tokens; every logit of the prompt's last position and of each step compared. The bf16 forward's
 * tolerance (NMSE 2e-3, argmax on 90 % of positions); the log-sum-exp gap printed. */
static char *read_data_text(const char *name) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/decoder/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *t = calloc(1, 1 << 16);
    size_t n = fread(t, 1, (1 << 16) - 1, f);
    t[n] = 0;
    fclose(f);
    return t;
}

static double lse_row(const float *x, int n) {
    double mx = x[0], sum = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return mx + log(sum);
}

static void kv_bf16_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    cq_tokenizer *tok;
    cq_cuda_model *cm;
    assert_int_equal(cq_gguf_open(path, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    assert_int_equal(cq_tokenizer_from_gguf(g, &tok, &err), CQ_OK);
    assert_int_equal(cq_cuda_model_new(&m, &cm, &err), CQ_OK);
    const int V = m.n_vocab, STEPS = 16;
    char *zh = read_data_text("ppl_zh.txt"), *en = read_data_text("ppl_en.txt");
    char *both = malloc(strlen(zh) + strlen(en) + 1);
    strcpy(both, zh), strcat(both, en);
    const char *rel = "任务：相关性\n材料：《中华人民共和国劳动法》第四十四条 有下列情形之一的，用人单位应当按照下列标准支付"
                      "高于劳动者正常工作时间工资的工资报酬：（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十"
                      "的工资报酬。\n问题：休息日加班工资怎么算？\n相关：";
    const char *texts[4] = {zh, en, rel, both};
    const char *names[4] = {"zh law", "en contract", "zh relevance", "zh + en"};
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
    double err2 = 0, ref2 = 0, worst_lse = 0;
    int rows = 0, agree = 0;
    for (int i = 0; i < 4; i++) {
        int32_t *ids;
        size_t n;
        assert_int_equal(cq_tokenizer_encode(tok, texts[i], strlen(texts[i]), CQ_TOK_ADD_BOS, &ids, &n, &err), CQ_OK);
        if (n > 900) n = 900;
        cq_cuda_seq *sf, *sb;
        assert_int_equal(cq_cuda_model_set_kv_bf16(cm, false, &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, (int32_t)n + STEPS, &sf, &err), CQ_OK);
        assert_int_equal(cq_cuda_model_set_kv_bf16(cm, true, &err), CQ_OK);
        assert_int_equal(cq_cuda_seq_new(cm, (int32_t)n + STEPS, &sb, &err), CQ_OK);
        assert_true(cq_cuda_seq_kv_bytes(sb) * 2 == cq_cuda_seq_kv_bytes(sf));
        double e2 = 0, r2 = 0, wl = 0;
        int ag = 0;
        int32_t next = 0;
        for (int step = 0; step <= STEPS; step++) {
            const int32_t *t = step ? &next : ids;
            const size_t cnt = step ? 1 : n;
            const int32_t pos = step ? (int32_t)n + step - 1 : 0;
            assert_int_equal(cq_cuda_eval(sf, t, cnt, pos, a, false, &err), CQ_OK);
            assert_int_equal(cq_cuda_eval(sb, t, cnt, pos, b, false, &err), CQ_OK);
            for (int j = 0; j < V; j++) {
                const double d = (double)b[j] - a[j];
                e2 += d * d, r2 += (double)a[j] * a[j];
            }
            const double dl = fabs(lse_row(b, V) - lse_row(a, V));
            wl = dl > wl ? dl : wl;
            next = argmax(a, V);
            ag += argmax(b, V) == next;
        }
        fprintf(stderr, "  bf16 KV vs float on the GPU, %s, %s (%zu tokens + %d steps): logits NMSE %.2e, log-sum-exp "
                        "off by %.2e at most, argmax %d/%d\n",
                path, names[i], n, STEPS, e2 / r2, wl, ag, STEPS + 1);
        err2 += e2, ref2 += r2, rows += STEPS + 1, agree += ag;
        worst_lse = wl > worst_lse ? wl : worst_lse;
        cq_cuda_seq_free(sf);
        cq_cuda_seq_free(sb);
        free(ids);
    }
    fprintf(stderr, "  bf16 KV vs float on the GPU, %s, all: NMSE %.2e, log-sum-exp off by %.2e at most, argmax %d/%d\n",
            path, err2 / ref2, worst_lse, agree, rows);
    assert_true(err2 / ref2 < NMSE_BF16_FORWARD);
    assert_true(agree * 10 >= rows * 9);
    free(a), free(b), free(zh), free(en), free(both);
    cq_cuda_model_free(cm);
    cq_tokenizer_free(tok);
    cq_gemma_free(&m);
    cq_gguf_close(g);
}

static void test_kv_bf16_logits(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(kv_bf16_fn, 0);
}

/* Prefix reuse in packed passes (issue 31 item 2 on CUDA): prompts sharing their first tokens — a group of six
 * sharing 140 (the instruction and a passage), a group of three sharing more than the local window (W + 60, so that
 * the shared rows and the window's edge meet), a prompt that is another's prefix plus one token, and unrelated ones —
 * scored with the prefix stored once (min_share 16) and every prompt whole (0), float and bf16 caches: the scores
 * within a tight NMSE (1e-4, against the forward's 2e-3: the same tokens at the same positions, only the GEMMs'
 * shapes and the chunks' company differ), the best prompt the same, and the shared tokens counted. */
static void share_fn(const char *path, int unused) {
    (void)unused;
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    cq_cuda_model *cm;
    assert_int_equal(cq_gguf_open(path, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    assert_int_equal(cq_cuda_model_new(&m, &cm, &err), CQ_OK);
    const int V = m.n_vocab, W = window_span(m.window);
    enum { N = 14 };
    int lens[N], share[N];
    int32_t *tokens = malloc((size_t)16384 * sizeof *tokens), starts[N + 1] = {0};
    for (int i = 0; i < N; i++) { /* prompt i: its group's shared beginning, then its own tail */
        const int group = i < 6 ? 0 : i < 9 ? 1 : i < 11 ? 2 : 3 + i;
        share[i] = group == 0 ? 140 : group == 1 ? W + 60 : group == 2 ? 90 : 0;
        lens[i] = share[i] + (group == 2 ? (i == 9 ? 0 : 1) : 20 + (i * 37) % 150);
        if (group == 2 && i == 9) lens[i] = share[i];
        starts[i + 1] = starts[i] + lens[i];
        for (int t = 0; t < lens[i]; t++)
            tokens[starts[i] + t] = t == 0 ? 2 : t < share[i] ? test_token(V, 500 + group, t) : test_token(V, i, t);
    }
    const int32_t ids[2] = {5, 300 % V};
    float whole[N * 2], once[N * 2];
    for (int kv16 = 0; kv16 < 2; kv16++) {
        assert_int_equal(cq_cuda_model_set_kv_bf16(cm, kv16 != 0, &err), CQ_OK);
        cq_cuda_seq *s;
        assert_int_equal(cq_cuda_seq_new_packed(cm, starts[N], &s, &err), CQ_OK);
        int64_t shared = -1;
        assert_int_equal(cq_cuda_score_packed(s, tokens, starts, N, ids, 2, 0, &shared, whole, &err), CQ_OK);
        assert_int_equal(shared, 0);
        if (cq_cuda_score_packed(s, tokens, starts, N, ids, 2, CQ_CUDA_SHARE_MIN, &shared, once, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            fail();
        }
        const double e = nmse(once, whole, N * 2);
        int best_w = 0, best_o = 0;
        for (int i = 1; i < N; i++) {
            if (whole[2 * i] - whole[2 * i + 1] > whole[2 * best_w] - whole[2 * best_w + 1]) best_w = i;
            if (once[2 * i] - once[2 * i + 1] > once[2 * best_o] - once[2 * best_o + 1]) best_o = i;
        }
        fprintf(stderr, "  prefix reuse, %s, %s cache: %d prompts, %d tokens, %lld not run again; scores NMSE %.2e vs "
                        "every prompt whole, best prompt %d vs %d\n",
                path, kv16 ? "bf16" : "float", N, starts[N], (long long)shared, e, best_o, best_w);
        assert_true(e < 1e-4);
        assert_int_equal(best_o, best_w);
        /* group 0: 5 followers of 140; group 1: 2 of W + 60; group 2: the prefix prompt (90, one token its own) */
        assert_true(shared >= 5 * 140 + 2 * (W + 60) + 89);
        cq_cuda_seq_free(s);
    }
    free(tokens);
    cq_cuda_model_free(cm);
    cq_gemma_free(&m);
    cq_gguf_close(g);
}

static void test_prefix_share(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(share_fn, 0);
}

static void test_score_calls(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(score_calls_fn, 0);
}

static void test_forward_rows(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(rows_fn, 0);
}

static void test_batched_prefill(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(prefill_batch_fn, 0);
}

static void test_eval_top(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(eval_top_fn, 0);
}

static void test_batched_decode(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(batch_fn, 0);
}

static void test_concurrent_decode(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    for_each_model(concurrent_fn, 0);
}

int main(void) {
    /* the batched steps' logits as batch 1's (off by default in the product until measured on a GPU): what
     * test_batched_decode's log-sum-exp check holds them to */
    setenv("CLAUSEQA_BATCH_LOGITS", "rows", 1);
    /* and their products' float inputs exactly, in 3 bf16 planes (issue 31; 1 plane, bf16 inputs, by default) */
    if (!getenv("CLAUSEQA_BATCH_PLANES")) setenv("CLAUSEQA_BATCH_PLANES", "3", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),        cmocka_unit_test(test_qk_norm_rope),  cmocka_unit_test(test_geglu),
        cmocka_unit_test(test_planes_consumers),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_bias_rope),
        cmocka_unit_test(test_attention),      cmocka_unit_test(test_decoder_packed), cmocka_unit_test(test_packed_shared),
        cmocka_unit_test(test_decode_attention),
        cmocka_unit_test(test_matmul_bf16),    cmocka_unit_test(test_lora_merge),
        cmocka_unit_test(test_forward_vs_cpu), cmocka_unit_test(test_adapter_vs_cpu),
        cmocka_unit_test(test_packed_scoring), cmocka_unit_test(test_top_kernel),
        cmocka_unit_test(test_eval_top),       cmocka_unit_test(test_batched_decode),
        cmocka_unit_test(test_concurrent_decode), cmocka_unit_test(test_forward_rows),
        cmocka_unit_test(test_batched_prefill), cmocka_unit_test(test_score_calls),
        cmocka_unit_test(test_kv_bf16_logits), cmocka_unit_test(test_prefix_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
