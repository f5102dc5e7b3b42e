/* The multi-head attention kernels of the CPU forward (attention/cpu_kernels.h) against their one-head twins: every
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

#include "attention/cpu_kernels.h"
#include "attention/forward_cpu.h"
#include "attention/quant.h"

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

static void test_dot_heads_equal_dot(void **state) {
    (void)state;
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

static void test_axpy_heads_equal_axpy(void **state) {
    (void)state;
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

/* The twins themselves: a dot against a double sum, an axpy against its definition (a wrong offset or a skipped
 * element would show here, not only as a difference between the two paths). */
static void test_attention_shares(void **state) {
    (void)state;
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

static void test_one_head_kernels(void **state) {
    (void)state;
    const int sizes[] = {7, 40, 48, 256};
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
        free(a), free(b), free(y), free(y0);
    }
}

static void test_lowrank_rows(void **state) {
    (void)state;
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_heads_equal_dot),
        cmocka_unit_test(test_axpy_heads_equal_axpy),
        cmocka_unit_test(test_one_head_kernels),
        cmocka_unit_test(test_attention_shares),
        cmocka_unit_test(test_lowrank_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
