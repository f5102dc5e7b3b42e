/* The kernels of the CPU forward (decoder/cpu_kernels.h), each on every level the CPU runs (scalar, AVX2, AVX-512),
 * up to the one in use (CLAUSEQA_CPU_ISA caps it). The multi-head attention kernels against their one-head twins: every
 * score equal bit for bit to cq_k_dot, every output equal bit for bit to the cq_k_axpy calls in key order, so that
 * grouping heads changes no result (the exact mode's pins depend on it). Head sizes on every path: 256 (the model),
 * 48 (a multiple of 16 but not of 32), 40 (of 8 only: the one-head dot) and 7 (scalar); odd head and key counts;
 * rows with a stride wider than a head, as in the KV cache; a second call continuing the first (a wrapped ring).
 * And the default mode's decode attention (shares of the keys with an online softmax, merged) against the plain
 * softmax attention of each head, over a wrapped ring, uneven shares and key counts around its chunk of 32.
 * The adapter's low-rank term (cq_k_lowrank_rows: B in tiles of 32 outputs, masked edges) against the sum in double
 * over every start and length of output ranges, ranks 1 to 40; the outputs outside the range untouched. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/cpu_isa.h"
#include "decoder/cpu_kernels.h"
#include "decoder/forward_cpu.h"
#include "decoder/quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float next_float(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static float *random_floats(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = next_float();
    return x;
}

/* Runs a check on every kernel level up to the one in use (decoder/cpu_isa.h), then restores it. */
static void every_level(void (*check)(void)) {
    const cq_isa top = cq_isa_active();
    for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
        cq_isa_set(level);
        check();
    }
    cq_isa_set(top);
}

static void check_dot_heads_equal_dot(void) {
    const int head_dims[] = {256, 48, 40, 7}, heads[] = {1, 2, 3, 4, 5}, keys[] = {1, 2, 7, 64, 513};
    for (size_t a = 0; a < sizeof head_dims / sizeof *head_dims; a++)
        for (size_t b = 0; b < sizeof heads / sizeof *heads; b++)
            for (size_t c = 0; c < sizeof keys / sizeof *keys; c++) {
                const int hd = head_dims[a], nh = heads[b], n = keys[c];
                const size_t stride = (size_t)hd + 3, lds = (size_t)n + 5;
                float *q = random_floats((size_t)nh * hd), *k = random_floats((size_t)n * stride);
                float *got = calloc((size_t)nh * lds, sizeof *got);
                cq_k_dot_heads(q, nh, k, stride, n, hd, got, lds);
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < n; i++) {
                        float want = cq_k_dot(q + (size_t)h * hd, k + (size_t)i * stride, hd);
                        if (memcmp(&want, &got[(size_t)h * lds + i], sizeof want)) {
                            fprintf(stderr, "hd %d heads %d keys %d: head %d key %d: %.9g, one head %.9g\n", hd, nh, n,
                                    h, i, got[(size_t)h * lds + i], want);
                            fail();
                        }
                    }
                free(q), free(k), free(got);
            }
}
static void test_dot_heads_equal_dot(void **state) {
    (void)state;
    every_level(check_dot_heads_equal_dot);
}

static void check_axpy_heads_equal_axpy(void) {
    const int head_dims[] = {256, 48, 40, 7}, heads[] = {1, 2, 3, 4, 5}, keys[] = {1, 2, 7, 64, 513};
    for (size_t a = 0; a < sizeof head_dims / sizeof *head_dims; a++)
        for (size_t b = 0; b < sizeof heads / sizeof *heads; b++)
            for (size_t c = 0; c < sizeof keys / sizeof *keys; c++) {
                const int hd = head_dims[a], nh = heads[b], n = keys[c], split = n / 3;
                const size_t stride = (size_t)hd + 3, ldp = (size_t)n + 5;
                float *p = random_floats((size_t)nh * ldp), *v = random_floats((size_t)n * stride);
                float *got = random_floats((size_t)nh * hd), *want = malloc((size_t)nh * hd * sizeof *want);
                float *start = malloc((size_t)nh * hd * sizeof *start);
                memcpy(want, got, (size_t)nh * hd * sizeof *want); /* a nonzero start: the sums continue from it */
                memcpy(start, got, (size_t)nh * hd * sizeof *start);
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < n; i++)
                        cq_k_axpy(want + (size_t)h * hd, p[(size_t)h * ldp + i], v + (size_t)i * stride, hd);
                /* in two calls, as attention over a wrapped ring makes them */
                cq_k_axpy_heads(got, (size_t)hd, nh, p, ldp, v, stride, split, hd);
                cq_k_axpy_heads(got, (size_t)hd, nh, p + split, ldp, v + (size_t)split * stride, stride, n - split, hd);
                if (memcmp(got, want, (size_t)nh * hd * sizeof *got)) {
                    fprintf(stderr, "hd %d heads %d keys %d: outputs differ from the one-head axpy\n", hd, nh, n);
                    fail();
                }
                /* by parts of a head (multiples of 8 elements), as the decode step splits the heads over threads */
                memcpy(got, start, (size_t)nh * hd * sizeof *got);
                for (int d0 = 0; d0 < hd; d0 += 16) {
                    int len = hd - d0 < 16 || hd % 8 ? hd - d0 : 16;
                    cq_k_axpy_heads(got + d0, (size_t)hd, nh, p, ldp, v + d0, stride, n, len);
                    if (len != 16) break;
                }
                if (memcmp(got, want, (size_t)nh * hd * sizeof *got)) {
                    fprintf(stderr, "hd %d heads %d keys %d: outputs by parts of a head differ from the one-head axpy\n", hd, nh, n);
                    fail();
                }
                free(p), free(v), free(got), free(want), free(start);
            }
}
static void test_axpy_heads_equal_axpy(void **state) {
    (void)state;
    every_level(check_axpy_heads_equal_axpy);
}

/* The twins themselves: a dot against a double sum, an axpy against its definition (a wrong offset or a skipped
 * element would show here, not only as a difference between the two paths). */
static void check_attention_shares(void) {
    const int keys[] = {1, 31, 32, 33, 257, 600}, shares[] = {1, 2, 3};
    const int hd = 64, H = 4, Hkv = 2, group = H / Hkv, slots = 700;
    const size_t stride = (size_t)Hkv * hd;
    for (size_t a = 0; a < sizeof keys / sizeof *keys; a++)
        for (size_t b = 0; b < sizeof shares / sizeof *shares; b++)
            for (int wrap = 0; wrap < 2; wrap++) {
                const int n = keys[a];
                /* the keys in slots [first, slots) then [0, n - n1) when wrapped, else from slot 5 */
                const int first = wrap && n > 1 ? slots - n / 2 : 5, n1 = first + n <= slots ? n : slots - first;
                float *q = random_floats((size_t)H * hd), *k = random_floats((size_t)slots * stride);
                float *v = random_floats((size_t)slots * stride), *got = malloc((size_t)H * hd * sizeof *got);
                for (size_t i = 0; i < (size_t)slots * stride; i++) k[i] *= 3.0f; /* peaked softmaxes too */
                assert_true(cq_op_attention_shares(q, H, Hkv, hd, k, v, first, n1, n, 0.125f, 0.0f, shares[b], got));
                /* the reference: the keys in order, contiguous, one head at a time */
                float *kc = malloc((size_t)n * hd * sizeof *kc), *vc = malloc((size_t)n * hd * sizeof *vc);
                float *sc = malloc((size_t)n * sizeof *sc), want[64];
                for (int h = 0; h < H; h++) {
                    const int g = h / group;
                    for (int i = 0; i < n; i++) {
                        const int slot = i < n1 ? first + i : i - n1;
                        memcpy(kc + (size_t)i * hd, k + (size_t)slot * stride + (size_t)g * hd, hd * sizeof *kc);
                        memcpy(vc + (size_t)i * hd, v + (size_t)slot * stride + (size_t)g * hd, hd * sizeof *vc);
                    }
                    cq_op_attention(q + (size_t)h * hd, kc, vc, n, (size_t)hd, hd, 0.125f, 0.0f, sc, want);
                    for (int e = 0; e < hd; e++) assert_float_equal(got[h * hd + e], want[e], 2e-5f);
                }
                free(q), free(k), free(v), free(got), free(kc), free(vc), free(sc);
            }
}
static void test_decoder_shares(void **state) {
    (void)state;
    every_level(check_attention_shares);
}

static void check_one_head_kernels(void) {
    const int sizes[] = {7, 40, 48, 256, 640};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int n = sizes[s];
        float *a = random_floats((size_t)n), *b = random_floats((size_t)n), *y = random_floats((size_t)n);
        double want = 0, mag = 0;
        for (int i = 0; i < n; i++) want += (double)a[i] * b[i], mag += fabs((double)a[i] * b[i]);
        assert_true(fabs(cq_k_dot(a, b, n) - want) <= 1e-6 * mag + 1e-7);
        float *y0 = malloc((size_t)n * sizeof *y0);
        memcpy(y0, y, (size_t)n * sizeof *y0);
        cq_k_axpy(y, 0.75f, a, n);
        for (int i = 0; i < n; i++) assert_true(fabsf(y[i] - (y0[i] + 0.75f * a[i])) <= 1e-6f);
        /* rmsnorm against its definition in double, and in place */
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)a[i] * a[i];
        const double r = 1.0 / sqrt(ss / n + 1e-6);
        cq_k_rmsnorm(y, a, b, n, 1e-6f);
        for (int i = 0; i < n; i++) assert_true(fabs(y[i] - a[i] * r * b[i]) <= 1e-6 * (fabs(a[i] * r * b[i]) + 1e-6));
        cq_k_rmsnorm(a, a, b, n, 1e-6f);
        assert_memory_equal(a, y, (size_t)n * sizeof *a);
        free(a), free(b), free(y), free(y0);
    }
}
static void test_one_head_kernels(void **state) {
    (void)state;
    every_level(check_one_head_kernels);
}

/* The float prompt products: packing (every level the same bytes as the definition: token t's element kk at
 * xt[kk * width + t], zero padding) and the product on every level: AVX-512 bit for bit the AVX2 kernel (the same
 * chain of FMAs per output), both close to a double sum, the scalar twin too. Rows around the 6- and 12-row tiles,
 * tokens around the 8-, 16- and 32-token panels. */
static void test_float_products(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    const int row_counts[] = {1, 5, 12, 13, 25}, token_counts[] = {1, 7, 8, 9, 16, 17, 33, 64}, widths[] = {8, 40, 640};
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t ni = 0; ni < sizeof token_counts / sizeof *token_counts; ni++) {
            const int k = widths[wi], nt = token_counts[ni];
            const size_t ldx = (size_t)k + 5, W = cq_k_packed_width(nt);
            float *x = random_floats((size_t)nt * ldx), *xt = malloc((size_t)k * W * sizeof *xt);
            for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
                cq_isa_set(level);
                for (size_t i = 0; i < (size_t)k * W; i++) xt[i] = 99.0f;
                cq_k_pack_tokens(x, ldx, nt, k, xt);
                for (int kk = 0; kk < k; kk++)
                    for (size_t t = 0; t < W; t++)
                        assert_true(xt[(size_t)kk * W + t] == ((int)t < nt ? x[t * ldx + (size_t)kk] : 0.0f));
            }
            for (size_t ri = 0; ri < sizeof row_counts / sizeof *row_counts; ri++) {
                const int rows = row_counts[ri];
                const size_t ldw = (size_t)k + 3, ldy = (size_t)rows + 1;
                float *w = random_floats((size_t)rows * ldw), *y[3];
                for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
                    cq_isa_set(level);
                    y[level] = malloc((size_t)nt * ldy * sizeof *y[level]);
                    for (size_t i = 0; i < (size_t)nt * ldy; i++) y[level][i] = 55.0f;
                    cq_k_rows_times_tokens(w, ldw, rows, k, xt, W, nt, y[level], ldy);
                    for (int t = 0; t < nt; t++) {
                        for (int r = 0; r < rows; r++) {
                            double want = 0, mag = 0;
                            for (int kk = 0; kk < k; kk++) {
                                want += (double)w[(size_t)r * ldw + kk] * x[(size_t)t * ldx + kk];
                                mag += fabs((double)w[(size_t)r * ldw + kk] * x[(size_t)t * ldx + kk]);
                            }
                            assert_true(fabs(y[level][(size_t)t * ldy + r] - want) <= 1e-6 * mag + 1e-7);
                        }
                        assert_true(y[level][(size_t)t * ldy + rows] == 55.0f);
                    }
                    if (level == CQ_ISA_AVX512) assert_memory_equal(y[level], y[CQ_ISA_AVX2], (size_t)nt * ldy * sizeof *y[level]);
                }
                for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) free(y[level]);
                free(w);
            }
            cq_isa_set(top);
            free(x), free(xt);
        }
}

/* A prompt's integer product: the packed tokens hold what cq_quantize_i16 gives each token, and every path's
 * product equals the scalar twin (up to float summation order) and dequant(w) . dequant(x) in double, for every
 * weight format, row counts around the 6-row tile, token counts around the 16- and 32-token panels, and widths from
 * one block to the model's 2,048. */
static uint8_t *random_quant_rows(uint32_t type, int rows, int n, size_t *row_bytes) {
    size_t be, bb;
    assert_true(cq_qtype_block(type, &be, &bb));
    *row_bytes = (size_t)n / be * bb;
    const size_t nb = (size_t)rows * n / be;
    uint8_t *raw = malloc(nb * bb);
    for (size_t i = 0; i < nb * bb; i++) raw[i] = (uint8_t)(next_float() * 1e6f);
    for (size_t b = 0; b < nb; b++) {
        uint16_t h1 = cq_f32_to_f16(next_float() * 0.1f), h2 = cq_f32_to_f16(next_float() * 0.1f);
        uint8_t *blk = raw + b * bb;
        if (type == CQ_QTYPE_Q6_K) memcpy(blk + 208, &h1, 2);
        else memcpy(blk, &h1, 2);
        if (type == CQ_QTYPE_Q4_K) memcpy(blk + 2, &h2, 2);
    }
    return raw;
}

static void test_rows_times_tokens_i16(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    const uint32_t types[] = {CQ_QTYPE_Q8_0, CQ_QTYPE_Q5_0, CQ_QTYPE_Q4_K, CQ_QTYPE_Q6_K};
    const int row_counts[] = {1, 5, 6, 7, 13}, token_counts[] = {1, 2, 15, 16, 17, 31, 33, 64}, widths[] = {32, 256, 640, 2048};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
            for (size_t ri = 0; ri < sizeof row_counts / sizeof *row_counts; ri++) {
                const int k = widths[wi], rows = row_counts[ri];
                size_t be, row_bytes;
                cq_qtype_block(types[ti], &be, NULL);
                if (k % (int)be) continue;
                uint8_t *raw = random_quant_rows(types[ti], rows, k, &row_bytes);
                float *wf = malloc((size_t)rows * k * sizeof *wf);
                for (int r = 0; r < rows; r++) cq_dequant_row(types[ti], raw + r * row_bytes, wf + (size_t)r * k, (size_t)k);
                cq_rows_i16 w = {.q = malloc((size_t)rows * k * 2), .scale = malloc((size_t)rows * k / 16 * 4),
                                 .min = malloc((size_t)rows * k / 32 * 4)};
                cq_unpack_rows_i16(types[ti], raw, row_bytes, rows, (size_t)k, &w);
                for (size_t ni = 0; ni < sizeof token_counts / sizeof *token_counts; ni++) {
                    const int nt = token_counts[ni];
                    const size_t ldx = (size_t)k + 3, ldy = (size_t)rows + 2, W = cq_k_packed_width(nt);
                    float *x = random_floats((size_t)nt * ldx);
                    for (size_t i = 0; i < (size_t)nt * ldx; i += 37) x[i] *= 20.0f; /* outliers */
                    cq_tokens_i16 xt = {.q = malloc((size_t)k / 2 * W * 4), .d = malloc((size_t)k / 32 * W * 4),
                                        .dsum = malloc((size_t)k / 32 * W * 4)};
                    cq_k_pack_tokens_i16(x, ldx, nt, k, &xt);
                    assert_int_equal(xt.width, W);
                    /* the packing, and the reference from the tokens' dequantized values */
                    float *xd = malloc((size_t)k * sizeof *xd);
                    cq_i16_block *blk = malloc((size_t)k / 32 * sizeof *blk);
                    double *want = malloc((size_t)nt * rows * sizeof *want), *mag = malloc((size_t)nt * rows * sizeof *mag);
                    for (int t = 0; t < nt; t++) {
                        cq_quantize_i16(x + (size_t)t * ldx, (size_t)k, blk);
                        for (int i = 0; i < k; i++) {
                            int16_t pair[2];
                            memcpy(pair, &xt.q[(size_t)(i / 2) * W + t], 4);
                            assert_int_equal(pair[i & 1], blk[i / 32].qs[i % 32]);
                            xd[i] = blk[i / 32].d * blk[i / 32].qs[i % 32];
                        }
                        for (int b = 0; b < k / 32; b++) {
                            assert_true(xt.d[(size_t)b * W + t] == blk[b].d && xt.dsum[(size_t)b * W + t] == blk[b].dsum);
                        }
                        for (int r = 0; r < rows; r++) {
                            double s = 0, m = 0;
                            for (int i = 0; i < k; i++) s += (double)wf[(size_t)r * k + i] * xd[i], m += fabs((double)wf[(size_t)r * k + i] * xd[i]);
                            want[t * rows + r] = s, mag[t * rows + r] = m;
                        }
                    }
                    for (int b = 0; b < k / 32; b++)
                        for (size_t t = (size_t)nt; t < W; t++) assert_true(xt.d[(size_t)b * W + t] == 0);
                    for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
                        cq_isa_set(level);
                        float *y = malloc((size_t)nt * ldy * sizeof *y);
                        for (size_t i = 0; i < (size_t)nt * ldy; i++) y[i] = 777.0f;
                        cq_k_rows_times_tokens_i16(&w, &xt, y, ldy);
                        for (int t = 0; t < nt; t++) {
                            for (int r = 0; r < rows; r++) {
                                const double e = fabs(y[(size_t)t * ldy + r] - want[t * rows + r]);
                                if (e > 2e-5 * mag[t * rows + r] + 1e-6) {
                                    fprintf(stderr, "%s k %d rows %d tokens %d (%s): token %d row %d: %.8g, reference %.8g\n",
                                            cq_qtype_name(types[ti]), k, rows, nt, cq_isa_name(level), t, r,
                                            y[(size_t)t * ldy + r], want[t * rows + r]);
                                    fail();
                                }
                            }
                            for (size_t r = (size_t)rows; r < ldy; r++) assert_true(y[(size_t)t * ldy + r] == 777.0f);
                        }
                        free(y);
                    }
                    cq_isa_set(top);
                    free(x), free(xd), free(blk), free(want), free(mag), free(xt.q), free(xt.d), free(xt.dsum);
                }
                free(raw), free(wf), free(w.q), free(w.scale), free(w.min);
            }
}

/* An adapter's low-rank term, every output range of every tile layout, on every level (the AVX2 kernel's masked
 * parts and the scalar twin). */
static void check_lowrank_rows(void) {
    for (int r = 1; r <= 40; r += 13)
        for (int out = 5; out <= 100; out += 19) {
            float *b = random_floats((size_t)out * r), *u = random_floats((size_t)r);
            uint16_t *bt = malloc(cq_k_lowrank_tiled_size(out, r) * sizeof *bt);
            cq_k_lowrank_tile(b, out, r, 0.5f, bt);
            float *y = malloc((size_t)(out + 16) * sizeof *y);
            for (int i = 0; i < out; i++)
                for (int n = 0; i + n <= out; n++) {
                    for (int k = 0; k < out + 16; k++) y[k] = (float)k;
                    cq_k_lowrank_rows(y + 8 + i, i, n, u, r, bt);
                    for (int k = 0; k < out + 16; k++) {
                        double want = k;
                        if (k >= 8 + i && k < 8 + i + n)
                            for (int j = 0; j < r; j++)
                                want += (double)u[j] * cq_bf16_to_f32(cq_f32_to_bf16(0.5f * b[(size_t)(k - 8) * r + j]));
                        if (fabs(y[k] - want) > 1e-4 * (1 + fabs(want)))
                            fail_msg("rank %d, %d outputs, [%d, %d): output %d is %g, not %g", r, out, i, i + n,
                                     k - 8, (double)y[k], want);
                    }
                }
            free(b), free(u), free(bt), free(y);
        }
}
/* SwiGLU (qwen2's FFN) on every level against silu in double: large |y| (exp over- and underflow) included */
static void check_swiglu(void) {
    const int n = 8960 + 7;
    float *y = random_floats((size_t)n), *u = random_floats((size_t)n);
    for (int i = 0; i < n; i++) y[i] *= 12.0f;
    y[0] = 100.0f, y[1] = -100.0f, y[2] = 0.0f, y[3] = -87.9f;
    float *got = malloc((size_t)n * sizeof *got);
    memcpy(got, y, (size_t)n * sizeof *got);
    cq_k_swiglu(got, u, n);
    for (int i = 0; i < n; i++) {
        const double want = (double)y[i] / (1.0 + exp(-(double)y[i])) * u[i];
        if (!(fabs(got[i] - want) <= 1e-5 * fabs(want) + 1e-6)) {
            fprintf(stderr, "swiglu y %.9g u %.9g: %.9g, want %.9g\n", y[i], u[i], got[i], want);
            fail();
        }
    }
    free(y), free(u), free(got);
}

static void test_swiglu(void **state) {
    (void)state;
    every_level(check_swiglu);
}

static void test_lowrank_rows(void **state) {
    (void)state;
    every_level(check_lowrank_rows);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_heads_equal_dot),
        cmocka_unit_test(test_axpy_heads_equal_axpy),
        cmocka_unit_test(test_one_head_kernels),
        cmocka_unit_test(test_decoder_shares),
        cmocka_unit_test(test_float_products),
        cmocka_unit_test(test_rows_times_tokens_i16),
        cmocka_unit_test(test_lowrank_rows),
        cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
