/* Weight formats: dequantization of real blocks against gguf-py (fixtures from tools/decoder_ref/
 * make_quant_fixtures.py), the AVX2 and AVX-512 kernels against the scalar ones on random blocks, dot products
 * against the dequantized rows, and the half / bfloat16 conversions. Every kernel path up to the level in use
 * (decoder/cpu_isa.h: what the CPU runs, capped by CLAUSEQA_CPU_ISA) is run and compared. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "decoder/cpu_isa.h"
#include "decoder/quant.h"

static char *read_source_file(const char *rel) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static uint8_t *from_hex(const char *hex, size_t *n) {
    *n = strlen(hex) / 2;
    uint8_t *b = malloc(*n);
    for (size_t i = 0; i < *n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (uint8_t)v;
    }
    return b;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float next_float(void) { return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f; }

static double ref_dot(const float *w, const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * x[i];
    return s;
}

/* Every kernel path against the gguf-py values. */
static void test_fixture_blocks(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    char *json = read_source_file("tests/data/decoder/quant_blocks.json");
    assert_non_null(json);
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    cJSON *c;
    int seen = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        uint32_t type = (uint32_t)cJSON_GetObjectItem(c, "type")->valueint;
        size_t n = (size_t)cJSON_GetObjectItem(c, "n")->valueint, nbytes, be, bb;
        uint8_t *raw = from_hex(cJSON_GetObjectItem(c, "hex")->valuestring, &nbytes);
        assert_true(cq_qtype_block(type, &be, &bb));
        assert_int_equal(nbytes, n / be * bb);
        float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got), *x = malloc(n * sizeof *x);
        cJSON *v = cJSON_GetObjectItem(c, "values");
        float maxabs = 0;
        for (size_t i = 0; i < n; i++) {
            want[i] = (float)cJSON_GetArrayItem(v, (int)i)->valuedouble;
            maxabs = fmaxf(maxabs, fabsf(want[i]));
            x[i] = next_float();
        }
        for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
            cq_isa_set(level);
            cq_dequant_row(type, raw, got, n);
            for (size_t i = 0; i < n; i++) {
                if (fabsf(got[i] - want[i]) > 1e-6f * fmaxf(1.0f, fabsf(want[i]))) {
                    fprintf(stderr, "%s (%s path) element %zu: got %.9g want %.9g\n",
                            cJSON_GetObjectItem(c, "name")->valuestring, cq_isa_name(level), i, got[i], want[i]);
                    fail();
                }
            }
            double d = cq_dot_row(type, raw, x, n), r = ref_dot(want, x, n);
            assert_true(fabs(d - r) <= 1e-5 * (maxabs * sqrt((double)n) + 1e-3));
        }
        cq_isa_set(top);
        free(raw), free(want), free(got), free(x);
        seen++;
    }
    assert_int_equal(seen, 7); /* F32 Q8_0 Q5_0 Q4_K Q6_K F16 BF16 */
    cJSON_Delete(doc);
    free(json);
}

/* A row of n elements of `type`: random bytes, with sane scales where the format holds halves or floats. */
static uint8_t *random_row(uint32_t type, size_t n) {
    size_t be, bb;
    assert_true(cq_qtype_block(type, &be, &bb));
    size_t nbytes = n / be * bb;
    uint8_t *raw = malloc(nbytes);
    for (size_t i = 0; i < nbytes; i++) raw[i] = (uint8_t)next_u32();
    for (size_t blk = 0; blk < n / be; blk++) {
        uint8_t *b = raw + blk * bb;
        uint16_t h1 = cq_f32_to_f16(next_float() * 0.1f), h2 = cq_f32_to_f16(next_float() * 0.1f);
        switch (type) {
        case CQ_QTYPE_Q8_0: case CQ_QTYPE_Q5_0: memcpy(b, &h1, 2); break;
        case CQ_QTYPE_Q4_K: memcpy(b, &h1, 2), memcpy(b + 2, &h2, 2); break;
        case CQ_QTYPE_Q6_K: memcpy(b + 208, &h1, 2); break;
        case CQ_QTYPE_F16: memcpy(b, &h1, 2); break;
        case CQ_QTYPE_BF16: { uint16_t v = cq_f32_to_bf16(next_float()); memcpy(b, &v, 2); break; }
        case CQ_QTYPE_F32: { float v = next_float(); memcpy(b, &v, 4); break; }
        }
    }
    return raw;
}

/* Random blocks (random bytes, with sane scales) in every format: every path agrees with the scalar one, dot ==
 * dequant . x. */
static void test_random_blocks_every_path(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    const uint32_t types[] = {CQ_QTYPE_Q8_0, CQ_QTYPE_Q5_0, CQ_QTYPE_Q4_K, CQ_QTYPE_Q6_K,
                              CQ_QTYPE_F16,  CQ_QTYPE_BF16, CQ_QTYPE_F32};
    const size_t lengths[] = {256, 512, 640, 2048};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li], be, bb;
            assert_true(cq_qtype_block(types[ti], &be, &bb));
            if (n % be) continue;
            uint8_t *raw = random_row(types[ti], n);
            float *a = malloc(n * 4), *s = malloc(n * 4), *x = malloc(n * 4);
            for (size_t i = 0; i < n; i++) x[i] = next_float();
            cq_isa_set(CQ_ISA_SCALAR);
            cq_dequant_row(types[ti], raw, s, n);
            double ds = cq_dot_row(types[ti], raw, x, n), r = ref_dot(s, x, n), scale = 0;
            for (size_t i = 0; i < n; i++) scale += fabs((double)s[i] * x[i]);
            assert_true(fabs(ds - r) <= 1e-5 * scale + 1e-6);
            for (cq_isa level = CQ_ISA_AVX2; level <= top; level++) {
                cq_isa_set(level);
                cq_dequant_row(types[ti], raw, a, n);
                for (size_t i = 0; i < n; i++) {
                    if (fabsf(a[i] - s[i]) > 1e-6f * fmaxf(1.0f, fabsf(s[i]))) {
                        fprintf(stderr, "%s n=%zu element %zu: %s %.9g scalar %.9g\n", cq_qtype_name(types[ti]), n,
                                i, cq_isa_name(level), a[i], s[i]);
                        fail();
                    }
                }
                double da = cq_dot_row(types[ti], raw, x, n);
                assert_true(fabs(da - r) <= 1e-5 * scale + 1e-6);
            }
            cq_isa_set(top);
            free(raw), free(a), free(s), free(x);
        }
    }
}

/* The int16-activation products of decode steps: the quantized vector is within half a step of x everywhere, every
 * path's quantizer equals the scalar one bit for bit, and every dot path equals dequant(w) . dequant(xq) up to float
 * summation (random bytes: every weight quant value, Q8_0's -128 included, and a Q6_K scale of -128), row by row
 * over a matrix of 3 rows. One and three blocks reach the kernels' single-block tails, alone and after a pair. */
static void test_int16_activation_dots(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    const uint32_t types[] = {CQ_QTYPE_Q8_0, CQ_QTYPE_Q5_0, CQ_QTYPE_Q4_K, CQ_QTYPE_Q6_K};
    const size_t lengths[] = {256, 32, 96, 640, 1024, 2048, 2080};
    enum { ROWS = 3 };
    assert_false(cq_qtype_has_i16_dot(CQ_QTYPE_F16));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        assert_true(cq_qtype_has_i16_dot(types[ti]));
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li], be, bb;
            assert_true(cq_qtype_block(types[ti], &be, &bb));
            if (n % be) continue;
            const size_t row_bytes = n / be * bb;
            uint8_t *raw = malloc(ROWS * row_bytes);
            for (int r = 0; r < ROWS; r++) {
                uint8_t *row = random_row(types[ti], n);
                if (types[ti] == CQ_QTYPE_Q6_K) row[192 + li + r] = 0x80; /* int8 scale -128 (scales at byte 192) */
                memcpy(raw + r * row_bytes, row, row_bytes);
                free(row);
            }
            float *x = malloc(n * 4), *w = malloc(n * 4), *xd = malloc(n * 4);
            for (size_t i = 0; i < n; i++) x[i] = next_float() * (i % 37 == 0 ? 20.0f : 1.0f); /* with outliers */
            if (li == 0) memset(x, 0, 32 * sizeof *x);                                         /* an all-zero block */
            cq_i16_block *qs = malloc(n / 32 * sizeof *qs), *qa = malloc(n / 32 * sizeof *qa);
            cq_isa_set(CQ_ISA_SCALAR);
            cq_quantize_i16(x, n, qs);
            for (size_t b = 0; b < n / 32; b++) {
                int sum = 0;
                for (int j = 0; j < 32; j++) {
                    xd[32 * b + j] = qs[b].d * qs[b].qs[j];
                    sum += qs[b].qs[j];
                    assert_true(fabsf(xd[32 * b + j] - x[32 * b + j]) <= 0.51f * qs[b].d); /* half a step, and float rounding */
                }
                assert_true(qs[b].dsum == qs[b].d * (float)sum);
            }
            double r[ROWS], scale[ROWS];
            for (int row = 0; row < ROWS; row++) {
                cq_dequant_row(types[ti], raw + row * row_bytes, w, n);
                r[row] = ref_dot(w, xd, n), scale[row] = 0;
                for (size_t i = 0; i < n; i++) scale[row] += fabs((double)w[i] * xd[i]);
            }
            for (cq_isa level = CQ_ISA_SCALAR; level <= top; level++) {
                cq_isa_set(level);
                cq_quantize_i16(x, n, qa);
                assert_memory_equal(qa, qs, n / 32 * sizeof *qs);
                float y[ROWS + 1];
                y[ROWS] = 12345.0f;
                cq_dot_rows_i16(types[ti], raw, row_bytes, ROWS, qa, n, y);
                assert_true(y[ROWS] == 12345.0f);
                for (int row = 0; row < ROWS; row++) {
                    if (fabs(y[row] - r[row]) > 1e-5 * scale[row] + 1e-6) {
                        fprintf(stderr, "%s n=%zu row %d: %s %.9g reference %.9g\n", cq_qtype_name(types[ti]), n, row,
                                cq_isa_name(level), y[row], r[row]);
                        fail();
                    }
                }
            }
            cq_isa_set(top);
            free(raw), free(x), free(w), free(xd), free(qs), free(qa);
        }
    }
}

/* The int16 row tiles of prompts' integer products: every path equals the scalar one bit for bit, and scale * q - min
 * is the dequantized weight (up to float rounding), at the model's widths and single blocks, over 3 rows. */
static void test_unpack_rows_i16(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    const uint32_t types[] = {CQ_QTYPE_Q8_0, CQ_QTYPE_Q5_0, CQ_QTYPE_Q4_K, CQ_QTYPE_Q6_K};
    const size_t lengths[] = {32, 96, 256, 640, 2048};
    enum { ROWS = 3 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li], be, bb;
            assert_true(cq_qtype_block(types[ti], &be, &bb));
            if (n % be) continue;
            const size_t row_bytes = n / be * bb;
            uint8_t *raw = malloc(ROWS * row_bytes);
            for (int r = 0; r < ROWS; r++) {
                uint8_t *row = random_row(types[ti], n);
                memcpy(raw + r * row_bytes, row, row_bytes);
                free(row);
            }
            int16_t *q[2];
            float *sc[2], *mn[2], *w = malloc(n * sizeof *w);
            cq_rows_i16 tile[2];
            for (int k = 0; k < 2; k++) {
                q[k] = malloc(ROWS * n * sizeof *q[k]);
                sc[k] = calloc(ROWS * n / 16, sizeof *sc[k]);
                mn[k] = calloc(ROWS * n / 32, sizeof *mn[k]);
            }
            cq_isa_set(CQ_ISA_SCALAR);
            tile[0] = (cq_rows_i16){.q = q[0], .scale = sc[0], .min = mn[0]};
            cq_unpack_rows_i16(types[ti], raw, row_bytes, ROWS, n, &tile[0]);
            assert_int_equal(tile[0].block, types[ti] == CQ_QTYPE_Q6_K ? 16 : 32);
            assert_true(tile[0].has_min == (types[ti] == CQ_QTYPE_Q4_K));
            for (int r = 0; r < ROWS; r++) {
                cq_dequant_row(types[ti], raw + r * row_bytes, w, n);
                for (size_t i = 0; i < n; i++) {
                    float v = tile[0].scale[r * (n / tile[0].block) + i / tile[0].block] * tile[0].q[r * n + i];
                    if (tile[0].has_min) v -= tile[0].min[r * (n / 32) + i / 32];
                    assert_true(fabsf(v - w[i]) <= 1e-6f * fmaxf(1.0f, fabsf(w[i])));
                }
            }
            for (cq_isa level = CQ_ISA_AVX2; level <= top; level++) {
                cq_isa_set(level);
                tile[1] = (cq_rows_i16){.q = q[1], .scale = sc[1], .min = mn[1]};
                cq_unpack_rows_i16(types[ti], raw, row_bytes, ROWS, n, &tile[1]);
                assert_int_equal(tile[1].block, tile[0].block);
                assert_memory_equal(q[1], q[0], ROWS * n * sizeof *q[0]);
                assert_memory_equal(sc[1], sc[0], ROWS * n / tile[0].block * sizeof *sc[0]);
                assert_true(tile[1].has_min == tile[0].has_min);
                if (tile[0].has_min) assert_memory_equal(mn[1], mn[0], ROWS * n / 32 * sizeof *mn[0]);
            }
            cq_isa_set(top);
            for (int k = 0; k < 2; k++) free(q[k]), free(sc[k]), free(mn[k]);
            free(raw), free(w);
        }
    }
}

static void test_half_conversions(void **state) {
    (void)state;
    /* Every finite half survives f16 -> f32 -> f16 exactly. */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
        float f = cq_f16_to_f32((uint16_t)h);
        assert_int_equal(cq_f32_to_f16(f), h);
    }
    assert_true(cq_f16_to_f32(0x3c00) == 1.0f);
    assert_true(cq_f16_to_f32(0xc000) == -2.0f);
    assert_true(cq_f16_to_f32(0x0001) == 0x1p-24f);  /* smallest subnormal */
    assert_int_equal(cq_f32_to_f16(65520.0f), 0x7c00); /* rounds to infinity */
    assert_int_equal(cq_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie: to even */
    assert_int_equal(cq_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    assert_int_equal(cq_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(cq_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);              /* tie: to even */
    assert_int_equal(cq_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-16f), 0x3f81);
    assert_true(cq_bf16_to_f32(0xc040) == -3.0f);
    assert_true(isnan(cq_bf16_to_f32(cq_f32_to_bf16(NAN))));
}

static void test_block_table(void **state) {
    (void)state;
    size_t e, b;
    assert_true(cq_qtype_block(CQ_QTYPE_Q4_K, &e, &b) && e == 256 && b == 144);
    assert_true(cq_qtype_block(CQ_QTYPE_Q6_K, &e, &b) && e == 256 && b == 210);
    assert_true(cq_qtype_block(CQ_QTYPE_Q5_0, &e, &b) && e == 32 && b == 22);
    assert_true(cq_qtype_block(CQ_QTYPE_Q8_0, &e, &b) && e == 32 && b == 34);
    assert_false(cq_qtype_block(2 /* Q4_0: not supported */, &e, &b));
    assert_string_equal(cq_qtype_name(99), "unknown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_blocks),
        cmocka_unit_test(test_random_blocks_every_path),
        cmocka_unit_test(test_int16_activation_dots),
        cmocka_unit_test(test_unpack_rows_i16),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_block_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
