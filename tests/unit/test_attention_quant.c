/* Weight formats: dequantization of real blocks against gguf-py (fixtures from tools/decoder_ref/
 * make_quant_fixtures.py), the AVX2 kernels against the scalar ones on random blocks, dot products against the
 * dequantized rows, and the half / bfloat16 conversions. */
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

#include "attention/quant.h"

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

/* Both kernel paths (scalar always; AVX2 where the CPU has it) against the gguf-py values. */
static void test_fixture_blocks(void **state) {
    (void)state;
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
        for (int scalar = 1; scalar >= 0; scalar--) {
            if (!scalar && !cq_quant_has_avx2()) continue;
            cq_quant_set_scalar(scalar);
            cq_dequant_row(type, raw, got, n);
            for (size_t i = 0; i < n; i++) {
                if (fabsf(got[i] - want[i]) > 1e-6f * fmaxf(1.0f, fabsf(want[i]))) {
                    fprintf(stderr, "%s (%s path) element %zu: got %.9g want %.9g\n",
                            cJSON_GetObjectItem(c, "name")->valuestring, scalar ? "scalar" : "avx2", i, got[i],
                            want[i]);
                    fail();
                }
            }
            double d = cq_dot_row(type, raw, x, n), r = ref_dot(want, x, n);
            assert_true(fabs(d - r) <= 1e-5 * (maxabs * sqrt((double)n) + 1e-3));
        }
        cq_quant_set_scalar(false);
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

/* Random blocks (random bytes, with sane scales) in every format: AVX2 and scalar agree, dot == dequant . x. */
static void test_random_blocks_both_paths(void **state) {
    (void)state;
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
            cq_quant_set_scalar(true);
            cq_dequant_row(types[ti], raw, s, n);
            double ds = cq_dot_row(types[ti], raw, x, n), r = ref_dot(s, x, n), scale = 0;
            for (size_t i = 0; i < n; i++) scale += fabs((double)s[i] * x[i]);
            assert_true(fabs(ds - r) <= 1e-5 * scale + 1e-6);
            cq_quant_set_scalar(false);
            if (cq_quant_has_avx2()) {
                cq_dequant_row(types[ti], raw, a, n);
                for (size_t i = 0; i < n; i++) {
                    if (fabsf(a[i] - s[i]) > 1e-6f * fmaxf(1.0f, fabsf(s[i]))) {
                        fprintf(stderr, "%s n=%zu element %zu: avx2 %.9g scalar %.9g\n", cq_qtype_name(types[ti]), n,
                                i, a[i], s[i]);
                        fail();
                    }
                }
                double da = cq_dot_row(types[ti], raw, x, n);
                assert_true(fabs(da - r) <= 1e-5 * scale + 1e-6);
            }
            free(raw), free(a), free(s), free(x);
        }
    }
}

/* The int16-activation products of decode steps: the quantized vector is within half a step of x everywhere, the
 * AVX2 quantizer equals the scalar one bit for bit, and both dot paths equal dequant(w) . dequant(xq) up to float
 * summation (random bytes: every weight quant value, Q8_0's -128 included, and a Q6_K scale of -128). One and three
 * blocks reach the AVX2 kernels' single-block tails, alone and after a pair. */
static void test_int16_activation_dots(void **state) {
    (void)state;
    const uint32_t types[] = {CQ_QTYPE_Q8_0, CQ_QTYPE_Q5_0, CQ_QTYPE_Q4_K, CQ_QTYPE_Q6_K};
    const size_t lengths[] = {256, 32, 96, 640, 1024, 2048};
    assert_false(cq_qtype_has_i16_dot(CQ_QTYPE_F16));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        assert_true(cq_qtype_has_i16_dot(types[ti]));
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li], be;
            assert_true(cq_qtype_block(types[ti], &be, NULL));
            if (n % be) continue;
            uint8_t *raw = random_row(types[ti], n);
            if (types[ti] == CQ_QTYPE_Q6_K) raw[192 + li] = 0x80; /* int8 scale -128 (scales at byte 192) */
            float *x = malloc(n * 4), *w = malloc(n * 4), *xd = malloc(n * 4);
            for (size_t i = 0; i < n; i++) x[i] = next_float() * (i % 37 == 0 ? 20.0f : 1.0f); /* with outliers */
            if (li == 0) memset(x, 0, 32 * sizeof *x);                                         /* an all-zero block */
            cq_i16_block *qs = malloc(n / 32 * sizeof *qs), *qa = malloc(n / 32 * sizeof *qa);
            cq_quant_set_scalar(true);
            cq_quantize_i16(x, n, qs);
            cq_dequant_row(types[ti], raw, w, n);
            for (size_t b = 0; b < n / 32; b++) {
                int sum = 0;
                for (int j = 0; j < 32; j++) {
                    xd[32 * b + j] = qs[b].d * qs[b].qs[j];
                    sum += qs[b].qs[j];
                    assert_true(fabsf(xd[32 * b + j] - x[32 * b + j]) <= 0.51f * qs[b].d); /* half a step, and float rounding */
                }
                assert_true(qs[b].dsum == qs[b].d * (float)sum);
            }
            double r = ref_dot(w, xd, n), scale = 0;
            for (size_t i = 0; i < n; i++) scale += fabs((double)w[i] * xd[i]);
            double ds = cq_dot_row_i16(types[ti], raw, qs, n);
            assert_true(fabs(ds - r) <= 1e-5 * scale + 1e-6);
            cq_quant_set_scalar(false);
            if (cq_quant_has_avx2()) {
                cq_quantize_i16(x, n, qa);
                assert_memory_equal(qa, qs, n / 32 * sizeof *qs);
                double da = cq_dot_row_i16(types[ti], raw, qa, n);
                if (fabs(da - r) > 1e-5 * scale + 1e-6) {
                    fprintf(stderr, "%s n=%zu: avx2 %.9g reference %.9g\n", cq_qtype_name(types[ti]), n, da, r);
                    fail();
                }
            }
            free(raw), free(x), free(w), free(xd), free(qs), free(qa);
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
        cmocka_unit_test(test_random_blocks_both_paths),
        cmocka_unit_test(test_int16_activation_dots),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_block_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
