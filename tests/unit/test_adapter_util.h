/* Random LoRA adapters (docs/ANSWERS.md, clauseqa-lora-v1) for the tests and the decoder bench: written to a folder
 * as adapter.json + adapter.safetensors, with the factors kept in memory (rounded to the stored dtype) so that a
 * test can build its own reference. Faults can be injected for the loader's error tests. */
#ifndef CQ_TEST_ADAPTER_UTIL_H
#define CQ_TEST_ADAPTER_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/decoder.h"
#include "decoder/quant.h"

#define TEST_N_PROJ 7
static const char *const test_proj_names[TEST_N_PROJ] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                         "ffn_gate", "ffn_up", "ffn_down"};

typedef struct {
    int rank;
    float alpha;
    const char *dtype;      /* "BF16" (default), "F16", "F32" or "I8" (int8 with a scale a row: NAME.scale, F32) */
    const char *skip_scale; /* I8: this tensor's NAME.scale is not written */
    float b_gain;           /* B entries uniform in +-b_gain / sqrt(rank) (default 0.5); A in +-1 / sqrt(in) */
    uint64_t seed;
    unsigned proj_mask;     /* bit p: adapt projection p (0: all seven) */
    int layer_stride;       /* adapt layers 0, stride, 2 stride ... (0: all) */
    const char *base_sha256;/* NULL: 64 zeros */
    /* faults */
    const char *extra_tensor;     /* a tensor of this name is added */
    const char *bad_shape_tensor; /* this tensor gets one row too many */
    const char *skip_tensor;      /* this tensor is left out */
    const char *json_override;    /* adapter.json is this text instead */
} test_adapter_spec;

typedef struct {
    int n_layer, rank;
    float scale;                      /* alpha / rank */
    float **a, **b;                   /* (n_layer * TEST_N_PROJ): (rank, in) and (out, rank), or NULL */
    int64_t rows[TEST_N_PROJ], cols[TEST_N_PROJ];
} test_adapter;

static inline void test_adapter_free(test_adapter *t) {
    for (int i = 0; t->a && i < t->n_layer * TEST_N_PROJ; i++) free(t->a[i]), free(t->b[i]);
    free(t->a), free(t->b);
    memset(t, 0, sizeof *t);
}

static uint64_t test_adapter_rng_state;
static inline float test_adapter_uniform(void) { /* in [-1, 1) */
    uint64_t *s = &test_adapter_rng_state;
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((*s >> 40) * 0x1p-24 * 2.0 - 1.0);
}

/* The value as the dtype stores it, and its bytes (little-endian) appended at out. */
static inline float test_adapter_store(const char *dtype, float v, unsigned char **out) {
    if (!strcmp(dtype, "F32")) {
        memcpy(*out, &v, 4);
        *out += 4;
        return v;
    }
    uint16_t h = !strcmp(dtype, "F16") ? cq_f32_to_f16(v) : cq_f32_to_bf16(v);
    (*out)[0] = (unsigned char)(h & 0xff), (*out)[1] = (unsigned char)(h >> 8);
    *out += 2;
    return !strcmp(dtype, "F16") ? cq_f16_to_f32(h) : cq_bf16_to_f32(h);
}

/* Writes the adapter for a model of info's shapes to dir (created); fills *t (may be NULL). 0 on success. */
static inline int test_write_adapter(const char *dir, const cq_decoder_info *info, const test_adapter_spec *spec,
                                     test_adapter *t) {
    test_adapter tmp;
    if (!t) t = &tmp;
    memset(t, 0, sizeof *t);
    const char *dtype = spec->dtype ? spec->dtype : "BF16";
    const size_t esize = !strcmp(dtype, "F32") ? 4 : !strcmp(dtype, "I8") ? 1 : 2;
    const int r = spec->rank, L = info->n_layer, stride = spec->layer_stride > 0 ? spec->layer_stride : 1;
    const int64_t d = info->n_embd, qd = (int64_t)info->n_head * info->head_dim,
                  kvd = (int64_t)info->n_head_kv * info->head_dim, ff = info->n_ff;
    const int64_t rows[TEST_N_PROJ] = {qd, kvd, kvd, d, ff, ff, d}, cols[TEST_N_PROJ] = {d, d, d, qd, d, d, ff};
    t->n_layer = L, t->rank = r, t->scale = spec->alpha / (float)r;
    memcpy(t->rows, rows, sizeof rows), memcpy(t->cols, cols, sizeof cols);
    t->a = calloc((size_t)L * TEST_N_PROJ, sizeof *t->a);
    t->b = calloc((size_t)L * TEST_N_PROJ, sizeof *t->b);
    test_adapter_rng_state = spec->seed ? spec->seed : 0x9e3779b97f4a7c15ull;
    const float b_gain = spec->b_gain > 0 ? spec->b_gain : 0.5f;
    /* header and data built together: every tensor, in layer and projection order */
    size_t cap_hdr = 1 << 16, n_hdr = 0, cap_data = 0, n_data = 0;
    for (int l = 0; l < L; l += stride)
        for (int p = 0; p < TEST_N_PROJ; p++) cap_data += (size_t)r * (size_t)(rows[p] + cols[p] + 1) * 4;
    cap_data += (size_t)1 << 16; /* the faults' extra row and tensor */
    char *hdr = malloc(cap_hdr);
    unsigned char *data = malloc(cap_data);
    if (!t->a || !t->b || !hdr || !data) return -1;
    n_hdr += (size_t)snprintf(hdr, cap_hdr, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int l = 0; l < L; l += stride) {
        for (int p = 0; p < TEST_N_PROJ; p++) {
            if (spec->proj_mask && !(spec->proj_mask & (1u << p))) continue;
            for (int which = 0; which < 2; which++) { /* lora_a (r, in), lora_b (out, r) */
                char name[96];
                snprintf(name, sizeof name, "blk.%d.%s.lora_%c", l, test_proj_names[p], which ? 'b' : 'a');
                int64_t sh0 = which ? rows[p] : r, sh1 = which ? r : cols[p];
                const float gain = which ? b_gain / sqrtf((float)r) : 1.0f / sqrtf((float)cols[p]);
                float *vals = malloc((size_t)(sh0 * sh1) * sizeof *vals);
                if (!vals) return -1;
                (which ? t->b : t->a)[l * TEST_N_PROJ + p] = vals;
                if (spec->skip_tensor && !strcmp(spec->skip_tensor, name)) {
                    for (int64_t i = 0; i < sh0 * sh1; i++) vals[i] = 0; /* not written */
                    continue;
                }
                if (spec->bad_shape_tensor && !strcmp(spec->bad_shape_tensor, name)) sh0++;
                size_t begin = n_data;
                unsigned char *o = data + n_data;
                const int64_t kept = (which ? rows[p] : r) * sh1;
                if (!strcmp(dtype, "I8")) { /* int8 with one scale a row, the scales after the matrix (F32) */
                    float *raw = malloc((size_t)(sh0 * sh1) * sizeof *raw), *sc = malloc((size_t)sh0 * sizeof *sc);
                    if (!raw || !sc) return -1;
                    for (int64_t i = 0; i < sh0 * sh1; i++) raw[i] = test_adapter_uniform() * gain;
                    for (int64_t i = 0; i < sh0; i++) {
                        float m = 0;
                        for (int64_t j = 0; j < sh1; j++) m = fmaxf(m, fabsf(raw[i * sh1 + j]));
                        sc[i] = m > 0 ? m / 127.0f : 1.0f;
                        for (int64_t j = 0; j < sh1; j++) {
                            long q = lrintf(raw[i * sh1 + j] / sc[i]);
                            *o++ = (unsigned char)(int8_t)q;
                            /* as the runtime holds it: the dequantized value in bf16 */
                            if (i * sh1 + j < kept) vals[i * sh1 + j] = cq_bf16_to_f32(cq_f32_to_bf16((float)q * sc[i]));
                        }
                    }
                    size_t end = (size_t)(o - data);
                    n_hdr += (size_t)snprintf(hdr + n_hdr, cap_hdr - n_hdr,
                                              ", \"%s\": {\"dtype\": \"I8\", \"shape\": [%lld, %lld], "
                                              "\"data_offsets\": [%zu, %zu]}",
                                              name, (long long)sh0, (long long)sh1, begin, end);
                    if (!spec->skip_scale || strcmp(spec->skip_scale, name)) {
                        for (int64_t i = 0; i < sh0; i++) test_adapter_store("F32", sc[i], &o);
                        n_hdr += (size_t)snprintf(hdr + n_hdr, cap_hdr - n_hdr,
                                                  ", \"%s.scale\": {\"dtype\": \"F32\", \"shape\": [%lld], "
                                                  "\"data_offsets\": [%zu, %zu]}",
                                                  name, (long long)sh0, end, (size_t)(o - data));
                    }
                    n_data = (size_t)(o - data);
                    free(raw), free(sc);
                } else {
                    for (int64_t i = 0; i < sh0 * sh1; i++) {
                        float v = test_adapter_store(dtype, test_adapter_uniform() * gain, &o);
                        if (i < kept) vals[i] = v;
                    }
                    n_data = (size_t)(o - data);
                    n_hdr += (size_t)snprintf(hdr + n_hdr, cap_hdr - n_hdr,
                                              ", \"%s\": {\"dtype\": \"%s\", \"shape\": [%lld, %lld], "
                                              "\"data_offsets\": [%zu, %zu]}",
                                              name, dtype, (long long)sh0, (long long)sh1, begin, n_data);
                }
                if (cap_hdr - n_hdr < 512) {
                    cap_hdr *= 2;
                    hdr = realloc(hdr, cap_hdr);
                    if (!hdr) return -1;
                }
            }
        }
    }
    if (spec->extra_tensor)
        n_hdr += (size_t)snprintf(hdr + n_hdr, cap_hdr - n_hdr,
                                  ", \"%s\": {\"dtype\": \"%s\", \"shape\": [1, 1], \"data_offsets\": [%zu, %zu]}",
                                  spec->extra_tensor, dtype, n_data, n_data + esize),
        memset(data + n_data, 0, esize), n_data += esize;
    n_hdr += (size_t)snprintf(hdr + n_hdr, cap_hdr - n_hdr, "}");
    while (n_hdr % 8) hdr[n_hdr++] = ' ';
    mkdir(dir, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)n_hdr >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(hdr, 1, n_hdr, f);
    fwrite(data, 1, n_data, f);
    fclose(f);
    free(hdr), free(data);
    snprintf(path, sizeof path, "%s/adapter.json", dir);
    if (!(f = fopen(path, "w"))) return -1;
    if (spec->json_override) {
        fputs(spec->json_override, f);
    } else {
        char zeros[65];
        memset(zeros, '0', 64), zeros[64] = 0;
        fprintf(f,
                "{\"format\": \"clauseqa-lora-v1\", \"rank\": %d, \"alpha\": %g, \"prompt_format\": \"cq-prompt-v1\",\n"
                " \"base\": {\"file\": \"test.gguf\", \"sha256\": \"%s\"},\n"
                " \"manifest\": {\"name\": \"random-r%d\", \"steps\": 0, \"note\": \"random factors for tests\"}}\n",
                r, (double)spec->alpha, spec->base_sha256 ? spec->base_sha256 : zeros, r);
    }
    fclose(f);
    if (t == &tmp) test_adapter_free(t);
    return 0;
}

static inline void test_rm_adapter(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

#endif
