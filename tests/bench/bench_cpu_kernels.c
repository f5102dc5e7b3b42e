/* The CPU decoder's quantized kernels on every ISA level this CPU runs (decoder/cpu_isa.h), one thread: random
 * weights at the real model's shapes, each kernel checked against the scalar path, then timed. Not a test: prints a
 * table. The matrices of one layer fit in L2 (the kernels' compute speed); the 178 MB output matrix comes from
 * memory. Then the prompts' products of 64 tokens, weights in tiles of 12 rows: dequantized to float (cq_dequant_row,
 * cq_k_rows_times_tokens) and unpacked to int16 against int16 tokens (cq_unpack_rows_i16,
 * cq_k_rows_times_tokens_i16), in GFLOP/s. Then a decode step's attention (cq_op_attention_shares: 4 heads of 256
 * over one KV head, 2 shares) at 512 and 2,048 keys, in microseconds. Levels alternate within each round, and the table shows the best and
 * the median round: on a shared machine the best is the kernel's own speed, the median what the neighbours left
 * of it.
 *   bench_cpu_kernels [--rounds N] [--big 0|1] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decoder/cpu_isa.h"
#include "decoder/cpu_kernels.h"
#include "decoder/forward_cpu.h"
#include "decoder/quant.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x853c49e6748fea9bull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float next_float(void) { return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* rows x cols of type: random bytes with sane half scales (the layouts of decoder/quant.h) */
static uint8_t *random_matrix(uint32_t type, int rows, int cols, size_t *row_bytes) {
    size_t be, bb;
    cq_qtype_block(type, &be, &bb);
    *row_bytes = (size_t)cols / be * bb;
    const size_t nb = (size_t)rows * cols / be;
    uint8_t *m = malloc(nb * bb);
    for (size_t i = 0; i < nb * bb; i++) m[i] = (uint8_t)next_u32();
    for (size_t b = 0; b < nb; b++) {
        uint16_t h = cq_f32_to_f16(next_float() * 0.05f);
        size_t at = type == CQ_QTYPE_Q6_K ? 208 : 0;
        memcpy(m + b * bb + at, &h, 2);
        if (type == CQ_QTYPE_Q4_K) memcpy(m + b * bb + 2, &h, 2);
    }
    return m;
}

typedef struct {
    const char *what;
    uint32_t type;
    int rows, cols;
    int reps; /* products per timing */
} shape;

int main(int argc, char **argv) {
    int rounds = 9, big = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--big")) big = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    const cq_isa top = cq_isa_active();
    const shape shapes[] = {
        {"attn_q / ffn_gate, ffn_up (Q5_0)", CQ_QTYPE_Q5_0, 2048, 640, 20},
        {"attn_v (Q8_0)", CQ_QTYPE_Q8_0, 256, 640, 100},
        {"attn_output (Q4_K)", CQ_QTYPE_Q4_K, 640, 1024, 40},
        {"ffn_down (Q4_K)", CQ_QTYPE_Q4_K, 640, 2048, 20},
        {"ffn_down (Q6_K)", CQ_QTYPE_Q6_K, 640, 2048, 20},
        {"output, from memory (Q8_0)", CQ_QTYPE_Q8_0, 262144, 640, 1},
    };
    const int n_shapes = (int)(sizeof shapes / sizeof *shapes) - (big ? 0 : 1);
    printf("decode products (int16 activations), 1 thread, levels up to %s; GB/s of weights: best / median of %d rounds\n",
           cq_isa_name(top), rounds);
    printf("%-34s %12s", "matrix", "rows x cols");
    for (cq_isa l = CQ_ISA_SCALAR; l <= top; l++) printf(" %20s", cq_isa_name(l));
    printf("\n");
    for (int si = 0; si < n_shapes; si++) {
        const shape *sh = &shapes[si];
        size_t row_bytes;
        uint8_t *w = random_matrix(sh->type, sh->rows, sh->cols, &row_bytes);
        float *x = malloc((size_t)sh->cols * sizeof *x), *want = malloc((size_t)sh->rows * sizeof *want),
              *got = malloc((size_t)sh->rows * sizeof *got);
        for (int i = 0; i < sh->cols; i++) x[i] = next_float();
        cq_i16_block *xq = malloc((size_t)sh->cols / 32 * sizeof *xq);
        cq_quantize_i16(x, (size_t)sh->cols, xq);
        cq_isa_set(CQ_ISA_SCALAR);
        cq_dot_rows_i16(sh->type, w, row_bytes, sh->rows, xq, (size_t)sh->cols, want);
        double *t = malloc((size_t)rounds * 3 * sizeof *t);
        const int scalar_reps = sh->rows > 10000 ? 1 : 2;
        for (int r = 0; r < rounds; r++) {
            for (cq_isa l = CQ_ISA_SCALAR; l <= top; l++) {
                cq_isa_set(l);
                const int reps = l == CQ_ISA_SCALAR ? scalar_reps : sh->reps;
                double t0 = now_s();
                for (int k = 0; k < reps; k++)
                    cq_dot_rows_i16(sh->type, w, row_bytes, sh->rows, xq, (size_t)sh->cols, got);
                t[l * rounds + r] = (now_s() - t0) / reps;
                for (int i = 0; i < sh->rows; i++) {
                    if (fabsf(got[i] - want[i]) > 1e-4f * (fabsf(want[i]) + 1.0f)) {
                        fprintf(stderr, "%s row %d: %s %.7g, scalar %.7g\n", sh->what, i, cq_isa_name(l), got[i], want[i]);
                        return 1;
                    }
                }
            }
        }
        char dims[32];
        snprintf(dims, sizeof dims, "%d x %d", sh->rows, sh->cols);
        printf("%-34s %12s", sh->what, dims);
        const double bytes = (double)sh->rows * row_bytes;
        for (cq_isa l = CQ_ISA_SCALAR; l <= top; l++) {
            qsort(t + l * rounds, (size_t)rounds, sizeof *t, cmp_double);
            char cell[32];
            snprintf(cell, sizeof cell, "%.2f / %.2f", bytes / t[l * rounds] / 1e9, bytes / t[l * rounds + rounds / 2] / 1e9);
            printf(" %20s", cell);
        }
        printf("\n");
        free(w), free(x), free(want), free(got), free(xq), free(t);
    }
    /* prompts: 64 tokens */
    enum { T = 64, TILE = 12 };
    printf("\nprompt products, %d tokens, tiles of %d rows, 1 thread; GFLOP/s: best / median of %d rounds\n", T, TILE, rounds);
    printf("%-34s %12s", "matrix", "rows x cols");
    for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) printf(" %16s float %16s int16", cq_isa_name(l), cq_isa_name(l));
    printf("\n");
    for (int si = 0; si < n_shapes && shapes[si].rows < 10000; si++) {
        const shape *sh = &shapes[si];
        const int k = sh->cols;
        size_t row_bytes;
        uint8_t *w = random_matrix(sh->type, sh->rows, k, &row_bytes);
        float *x = malloc((size_t)T * k * sizeof *x), *y = malloc((size_t)T * sh->rows * sizeof *y);
        for (size_t i = 0; i < (size_t)T * k; i++) x[i] = next_float();
        const size_t W = cq_k_packed_width(T);
        float *xt = malloc((size_t)k * W * sizeof *xt), *tile = malloc((size_t)TILE * k * sizeof *tile);
        cq_k_pack_tokens(x, (size_t)k, T, k, xt);
        cq_tokens_i16 x16 = {.q = malloc((size_t)k / 2 * W * 4), .d = malloc((size_t)k / 32 * W * 4),
                             .dsum = malloc((size_t)k / 32 * W * 4)};
        cq_k_pack_tokens_i16(x, (size_t)k, T, k, &x16);
        cq_rows_i16 t16 = {.q = malloc((size_t)TILE * k * 2), .scale = malloc((size_t)TILE * k / 16 * 4),
                           .min = malloc((size_t)TILE * k / 32 * 4)};
        double *t = malloc((size_t)rounds * 6 * sizeof *t);
        for (int r = 0; r < rounds; r++) {
            for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) {
                cq_isa_set(l);
                for (int v = 0; v < 2; v++) {
                    double t0 = now_s();
                    for (int r0 = 0; r0 < sh->rows; r0 += TILE) {
                        const int nr = sh->rows - r0 < TILE ? sh->rows - r0 : TILE;
                        if (v == 0) {
                            for (int i = 0; i < nr; i++)
                                cq_dequant_row(sh->type, w + (size_t)(r0 + i) * row_bytes, tile + (size_t)i * k, (size_t)k);
                            cq_k_rows_times_tokens(tile, (size_t)k, nr, k, xt, W, T, y + r0, (size_t)sh->rows);
                        } else {
                            cq_unpack_rows_i16(sh->type, w + (size_t)r0 * row_bytes, row_bytes, nr, (size_t)k, &t16);
                            cq_k_rows_times_tokens_i16(&t16, &x16, y + r0, (size_t)sh->rows);
                        }
                    }
                    t[(2 * l + v) * rounds + r] = now_s() - t0;
                }
            }
        }
        char dims[32];
        snprintf(dims, sizeof dims, "%d x %d", sh->rows, k);
        printf("%-34s %12s", sh->what, dims);
        const double flop = 2.0 * sh->rows * k * T;
        for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) {
            for (int v = 0; v < 2; v++) {
                double *tv = t + (2 * l + v) * rounds;
                qsort(tv, (size_t)rounds, sizeof *tv, cmp_double);
                char cell[32];
                snprintf(cell, sizeof cell, "%.1f / %.1f", flop / tv[0] / 1e9, flop / tv[rounds / 2] / 1e9);
                printf(" %22s", cell);
            }
        }
        printf("\n");
        free(w), free(x), free(y), free(xt), free(tile), free(x16.q), free(x16.d), free(x16.dsum);
        free(t16.q), free(t16.scale), free(t16.min), free(t);
    }
    /* decode attention */
    printf("\ndecode attention, 4 heads x 256 on one KV head, 2 shares, 1 thread; microseconds: best / median of %d "
           "rounds\n%-34s", rounds, "keys");
    for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) printf(" %22s", cq_isa_name(l));
    printf("\n");
    const int key_counts[] = {512, 2048};
    for (int ki = 0; ki < 2; ki++) {
        const int n = key_counts[ki], H = 4, hd = 256;
        float *q = malloc((size_t)H * hd * sizeof *q), *k = malloc((size_t)n * hd * sizeof *k),
              *v = malloc((size_t)n * hd * sizeof *v), *out = malloc((size_t)H * hd * sizeof *out);
        for (int i = 0; i < H * hd; i++) q[i] = next_float();
        for (size_t i = 0; i < (size_t)n * hd; i++) k[i] = next_float(), v[i] = next_float();
        double *t = malloc((size_t)rounds * 3 * sizeof *t);
        for (int r = 0; r < rounds; r++) {
            for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) {
                cq_isa_set(l);
                double t0 = now_s();
                for (int rep = 0; rep < 10; rep++) cq_op_attention_shares(q, H, 1, hd, k, v, 0, n, n, 0.0625f, 0.0f, 2, out);
                t[l * rounds + r] = (now_s() - t0) / 10;
            }
        }
        char what[32];
        snprintf(what, sizeof what, "%d", n);
        printf("%-34s", what);
        for (cq_isa l = CQ_ISA_SCALAR + 1; l <= top; l++) {
            double *tv = t + l * rounds;
            qsort(tv, (size_t)rounds, sizeof *tv, cmp_double);
            char cell[32];
            snprintf(cell, sizeof cell, "%.0f / %.0f", tv[0] * 1e6, tv[rounds / 2] * 1e6);
            printf(" %22s", cell);
        }
        printf("\n");
        free(q), free(k), free(v), free(out), free(t);
    }
    cq_isa_set(top);
    return 0;
}
