/* Helpers for the SSM unit tests: random models written to disk, fixtures, error measures. */
#ifndef CQ_TEST_SSM_UTIL_H
#define CQ_TEST_SSM_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "ssm/ssm.h"

static uint64_t ssm_test_rng = 88172645463325252ull;
static inline float ssm_test_uniform(void) { /* xorshift64*, in [0, 1) */
    ssm_test_rng ^= ssm_test_rng >> 12;
    ssm_test_rng ^= ssm_test_rng << 25;
    ssm_test_rng ^= ssm_test_rng >> 27;
    return (float)((ssm_test_rng * 2685821657736338717ull) >> 40) / 16777216.0f;
}
static inline float ssm_test_normal(void) {
    float u = ssm_test_uniform() + 1e-7f, v = ssm_test_uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

typedef struct {
    char name[64];
    int ndim;
    int64_t shape[3];
    float *data;
} ssm_test_tensor;

/* Writes dir/ssm.json and dir/ssm.safetensors for cfg with random weights on Mamba's scales. Tensors named in
 * skip are left out, and shape_bump adds one to the first dimension of the tensor so named (for loader tests). */
static inline int ssm_test_write_model(const char *dir, const cq_ssm_config *c, uint64_t seed, const char *skip,
                                const char *shape_bump) {
    ssm_test_rng = seed * 2654435761u + 1;
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"cq-hash-v1\", \"vocab_size\": %d, "
               "\"d_model\": %d, \"n_layer\": %d, \"d_state\": %d, \"d_conv\": %d, \"expand\": %d, \"dt_rank\": %d, "
               "\"d_embed\": %d, \"bidirectional\": %s, \"norm_eps\": %g}\n",
            c->vocab_size, c->d_model, c->n_layer, c->d_state, c->d_conv, c->expand, c->dt_rank, c->d_embed,
            c->bidirectional ? "true" : "false", (double)c->norm_eps);
    fclose(f);
    const int64_t dm = c->d_model, Di = (int64_t)c->expand * dm, N = c->d_state, R = c->dt_rank, K = c->d_conv;
    ssm_test_tensor t[600];
    int nt = 0;
#define T_ADD(nm, nd, a, b, cc, init)                                              \
    do {                                                                           \
        ssm_test_tensor *x = &t[nt++];                                             \
        snprintf(x->name, sizeof x->name, "%s", nm);                               \
        x->ndim = nd;                                                              \
        x->shape[0] = (a);                                                         \
        x->shape[1] = (b);                                                         \
        x->shape[2] = (cc);                                                        \
        int64_t n = x->shape[0] * (nd > 1 ? x->shape[1] : 1) * (nd > 2 ? x->shape[2] : 1);                     \
        x->data = malloc((size_t)n * sizeof(float));                               \
        for (int64_t i = 0; i < n; i++) x->data[i] = (init);                       \
    } while (0)
    char nm[64];
    T_ADD("embedding.weight", 2, (int64_t)c->vocab_size, dm, 0, ssm_test_normal());
    for (int l = 0; l < c->n_layer; l++) {
        snprintf(nm, sizeof nm, "layers.%d.norm.weight", l);
        T_ADD(nm, 1, dm, 0, 0, 1 + 0.1f * ssm_test_normal());
        for (int d = 0; d < (c->bidirectional ? 2 : 1); d++) {
            const char *mx = d ? "mixer_rev" : "mixer";
#define M_ADD(suffix, nd, a, b, cc, init)                            \
    snprintf(nm, sizeof nm, "layers.%d.%s.%s", l, mx, suffix);       \
    T_ADD(nm, nd, a, b, cc, init)
            M_ADD("in_proj.weight", 2, 2 * Di, dm, 0, ssm_test_normal() / sqrtf((float)dm));
            M_ADD("conv1d.weight", 3, Di, 1, K, ssm_test_normal() / sqrtf((float)K));
            M_ADD("conv1d.bias", 1, Di, 0, 0, 0.1f * ssm_test_normal());
            M_ADD("x_proj.weight", 2, R + 2 * N, Di, 0, ssm_test_normal() / sqrtf((float)Di));
            M_ADD("dt_proj.weight", 2, Di, R, 0, ssm_test_normal() / sqrtf((float)R));
            /* dt in [0.01, 0.5] through the inverse softplus */
            M_ADD("dt_proj.bias", 1, Di, 0, 0,
                  logf(expm1f(expf(logf(0.01f) + ssm_test_uniform() * (logf(0.5f) - logf(0.01f))))));
            M_ADD("A_log", 2, Di, N, 0, logf((float)(i % N + 1)) + 0.1f * ssm_test_normal());
            M_ADD("D", 1, Di, 0, 0, 1 + 0.1f * ssm_test_normal());
            M_ADD("out_proj.weight", 2, dm, Di, 0, ssm_test_normal() / sqrtf((float)Di));
#undef M_ADD
        }
    }
    T_ADD("norm_f.weight", 1, dm, 0, 0, 1 + 0.1f * ssm_test_normal());
    T_ADD("pool.weight", 2, (int64_t)c->d_embed, 2 * dm, 0, ssm_test_normal() / sqrtf(2.0f * dm));
    T_ADD("pool.bias", 1, (int64_t)c->d_embed, 0, 0, 0.1f * ssm_test_normal());
#undef T_ADD
    cq_strbuf h = {0};
    cq_strbuf_puts(&h, "{\"__metadata__\": {\"note\": \"random test weights\"}");
    size_t off = 0;
    for (int i = 0; i < nt; i++) {
        if (skip && !strcmp(skip, t[i].name)) continue;
        int64_t s0 = t[i].shape[0] + (shape_bump && !strcmp(shape_bump, t[i].name) ? 1 : 0);
        size_t n = (size_t)t[i].shape[0] * (t[i].ndim > 1 ? t[i].shape[1] : 1) * (t[i].ndim > 2 ? t[i].shape[2] : 1);
        cq_strbuf_printf(&h, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [%lld", t[i].name, (long long)s0);
        for (int d = 1; d < t[i].ndim; d++) cq_strbuf_printf(&h, ", %lld", (long long)t[i].shape[d]);
        cq_strbuf_printf(&h, "], \"data_offsets\": [%zu, %zu]}", off, off + n * 4);
        off += n * 4;
    }
    cq_strbuf_puts(&h, "}");
    while (h.len % 8) cq_strbuf_puts(&h, " ");
    snprintf(path, sizeof path, "%s/ssm.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t hl = h.len;
    fwrite(&hl, 8, 1, f);
    fwrite(h.data, 1, h.len, f);
    for (int i = 0; i < nt; i++) {
        size_t n = (size_t)t[i].shape[0] * (t[i].ndim > 1 ? t[i].shape[1] : 1) * (t[i].ndim > 2 ? t[i].shape[2] : 1);
        if (!(skip && !strcmp(skip, t[i].name))) fwrite(t[i].data, 4, n, f);
        free(t[i].data);
    }
    fclose(f);
    cq_strbuf_free(&h);
    return 0;
}

/* Adds a random document head to the model in dir (docs/SSM.md, "Document vectors"): dir/doc_head.safetensors
 * (doc_head.weight (d_embed, 2 d_model), doc_head.bias (d_embed), F32) and, when window > 0, ssm.json's
 * "manifest"."doc_head"."window_tokens" (the model's ssm.json must be ssm_test_write_model's one-line object). */
static inline int ssm_test_write_doc_head(const char *dir, const cq_ssm_config *c, int window, uint64_t seed) {
    ssm_test_rng = seed * 2654435761u + 7;
    char path[1100], json[4096];
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(json, 1, sizeof json - 1, f);
    fclose(f);
    json[n] = 0;
    char *end = strrchr(json, '}');
    if (!end) return -1;
    if (window > 0) {
        *end = 0;
        f = fopen(path, "w");
        if (!f) return -1;
        fprintf(f, "%s, \"manifest\": {\"doc_head\": {\"file\": \"doc_head.safetensors\", \"window_tokens\": %d}}}\n",
                json, window);
        fclose(f);
    }
    const size_t E = (size_t)c->d_embed, nw = E * 2 * (size_t)c->d_model;
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr, "{\"doc_head.weight\": {\"dtype\": \"F32\", \"shape\": [%zu, %d], "
                      "\"data_offsets\": [0, %zu]}, \"doc_head.bias\": {\"dtype\": \"F32\", \"shape\": [%zu], "
                      "\"data_offsets\": [%zu, %zu]}}", E, 2 * c->d_model, nw * 4, E, nw * 4, (nw + E) * 4);
    while (hl % 8) hdr[hl++] = ' ';
    snprintf(path, sizeof path, "%s/doc_head.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t h64 = (uint64_t)hl;
    fwrite(&h64, 8, 1, f);
    fwrite(hdr, 1, (size_t)hl, f);
    for (size_t i = 0; i < nw + E; i++) {
        float x = ssm_test_normal() * (i < nw ? 0.5f : 0.1f);
        fwrite(&x, 4, 1, f);
    }
    fclose(f);
    return 0;
}

static inline void ssm_test_rm_model(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/doc_head.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/ssm.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

/* max |a - b| / max |b|: the error relative to the tensor's scale */
static inline double ssm_test_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

#endif
