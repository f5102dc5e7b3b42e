#include "decoder/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/quant.h"

#define MAX_LAYERS 1024
#define DEFAULT_GLOBAL_PERIOD 6      /* Gemma 3: 5 local layers, then 1 global */
#define DEFAULT_LOCAL_ROPE_BASE 1e4f /* not stored in Gemma-3 GGUF files written so far */

static cq_status get_u32_req(const cq_gguf *g, const char *arch, const char *key, int32_t *out, cq_err *err) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v;
    cq_status s = cq_gguf_get_u32(g, full, &v, err);
    if (s) return s;
    if (v == 0 || v > (1u << 30)) return cq_err_set(err, CQ_ERR_FORMAT, "GGUF metadata %s = %u is out of range", full, v);
    *out = (int32_t)v;
    return CQ_OK;
}

/* Optional value: absent leaves *out as it is. */
static cq_status get_f32_opt(const cq_gguf *g, const char *arch, const char *key, float *out, cq_err *err) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    cq_status s = cq_gguf_get_f32(g, full, out, err);
    if (s == CQ_ERR_NOT_FOUND) {
        cq_err_clear(err);
        return CQ_OK;
    }
    return s;
}

static cq_status get_matrix(const cq_gguf *g, const char *name, int64_t rows, int64_t cols, cq_wmat *w, cq_err *err) {
    const cq_gguf_tensor *t = cq_gguf_find_tensor(g, name);
    if (!t) return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor %s is missing", name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
        return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor %s has shape {%lld, %lld}, expected {%lld, %lld}", name,
                          (long long)t->ne[0], (long long)t->ne[1], (long long)cols, (long long)rows);
    size_t be, bb;
    if (!cq_qtype_block(t->type, &be, &bb))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "model: tensor %s has unsupported type %u", name, t->type);
    *w = (cq_wmat){t->data, t->type, rows, cols, (size_t)cols / be * bb};
    return CQ_OK;
}

/* A 1-D weight of n elements in any supported type, converted to a new float array. */
static cq_status get_vector(const cq_gguf *g, const char *name, int64_t n, float **out, cq_err *err) {
    const cq_gguf_tensor *t = cq_gguf_find_tensor(g, name);
    if (!t) return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor %s is missing", name);
    if (t->n_elements != (uint64_t)n || t->ne[0] != n)
        return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor %s has %llu elements, expected %lld", name,
                          (unsigned long long)t->n_elements, (long long)n);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_dequant_row(t->type, t->data, v, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            free(v);
            return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor %s holds a non-finite value", name);
        }
    }
    *out = v;
    return CQ_OK;
}

cq_status cq_gemma_load(const cq_gguf *g, cq_gemma *m, cq_err *err) {
    memset(m, 0, sizeof *m);
    m->file_map = cq_gguf_file_map(g, &m->file_map_bytes);
    char arch[32];
    cq_status s = cq_gguf_get_str(g, "general.architecture", arch, sizeof arch, err);
    if (s) return s;
    if (!strcmp(arch, "gemma3")) m->arch = CQ_ARCH_GEMMA3;
    else if (!strcmp(arch, "qwen2")) m->arch = CQ_ARCH_QWEN2;
    else return cq_err_set(err, CQ_ERR_UNSUPPORTED, "model: architecture '%s' is not supported (gemma3 and qwen2 are)", arch);
    const bool gemma = m->arch == CQ_ARCH_GEMMA3;
    snprintf(m->arch_name, sizeof m->arch_name, "%s", arch);
    if (cq_gguf_get_str(g, "general.name", m->name, sizeof m->name, NULL) != CQ_OK) snprintf(m->name, sizeof m->name, "%s", arch);

    if ((s = get_u32_req(g, arch, "block_count", &m->n_layer, err)) ||
        (s = get_u32_req(g, arch, "embedding_length", &m->n_embd, err)) ||
        (s = get_u32_req(g, arch, "feed_forward_length", &m->n_ff, err)) ||
        (s = get_u32_req(g, arch, "attention.head_count", &m->n_head, err)) ||
        (s = get_u32_req(g, arch, "context_length", &m->context_length, err)) ||
        (gemma && (s = get_u32_req(g, arch, "attention.sliding_window", &m->window, err))))
        return s;
    m->n_head_kv = m->n_head;
    if ((s = get_u32_req(g, arch, "attention.head_count_kv", &m->n_head_kv, err)) && s != CQ_ERR_NOT_FOUND) return s;
    m->head_dim = m->n_embd / m->n_head;
    if ((s = get_u32_req(g, arch, "attention.key_length", &m->head_dim, err)) && s != CQ_ERR_NOT_FOUND) return s;
    m->head_dim_v = m->head_dim;
    if ((s = get_u32_req(g, arch, "attention.value_length", &m->head_dim_v, err)) && s != CQ_ERR_NOT_FOUND) return s;
    cq_err_clear(err);
    if (m->n_layer > MAX_LAYERS || m->n_head % m->n_head_kv || m->head_dim % 2 || m->head_dim_v != m->head_dim)
        return cq_err_set(err, CQ_ERR_FORMAT, "model: inconsistent attention shape (%d layers, %d heads, %d kv heads, "
                          "head dims %d/%d)", m->n_layer, m->n_head, m->n_head_kv, m->head_dim, m->head_dim_v);

    m->rms_eps = 1e-6f;
    float rope_global = gemma ? 1e6f : 1e4f, rope_local = DEFAULT_LOCAL_ROPE_BASE, rope_linear = 1.0f;
    if ((s = get_f32_opt(g, arch, "attention.layer_norm_rms_epsilon", &m->rms_eps, err)) ||
        (s = get_f32_opt(g, arch, "rope.freq_base", &rope_global, err)) ||
        (s = get_f32_opt(g, arch, "rope.freq_base_swa", &rope_local, err)) ||
        (s = get_f32_opt(g, arch, "rope.scaling.factor", &rope_linear, err)) ||
        (s = get_f32_opt(g, arch, "final_logit_softcapping", &m->final_softcap, err)) ||
        (s = get_f32_opt(g, arch, "attn_logit_softcapping", &m->attn_softcap, err)))
        return s;
    char scaling[32] = "", key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (cq_gguf_get_str(g, key, scaling, sizeof scaling, NULL) == CQ_OK && strcmp(scaling, "linear") &&
        strcmp(scaling, "none"))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "model: rope scaling '%s' not supported (linear is)", scaling);
    if (!strcmp(scaling, "none")) rope_linear = 1.0f;
    if (!(m->rms_eps > 0) || !(rope_global > 0) || !(rope_local > 0) || !(rope_linear > 0) || m->final_softcap < 0 ||
        m->attn_softcap < 0)
        return cq_err_set(err, CQ_ERR_FORMAT, "model: a norm, rope or soft-capping parameter is out of range");
    if (gemma) {
        /* Gemma 3 scales scores by query_pre_attn_scalar^-1/2, which GGUF does not store: it is head_dim for every
         * size except 27B (62 layers), where it is n_embd / n_head (as llama.cpp derives it). */
        m->attn_scale = 1.0f / sqrtf((float)(m->n_layer == 62 ? m->n_embd / m->n_head : m->head_dim));
        m->embed_scale = sqrtf((float)m->n_embd);
    } else { /* qwen2: head_dim^-1/2, no embedding scale, every layer global (no sliding window) */
        m->attn_scale = 1.0f / sqrtf((float)m->head_dim);
        m->embed_scale = 1.0f;
        m->ffn_silu = true;
    }

    uint32_t period = DEFAULT_GLOBAL_PERIOD;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    if (cq_gguf_get_u32(g, key, &period, NULL) != CQ_OK || period == 0) period = DEFAULT_GLOBAL_PERIOD;
    if (!gemma) period = 1;

    const cq_gguf_tensor *emb = cq_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return cq_err_set(err, CQ_ERR_FORMAT, "model: tensor token_embd.weight is missing");
    m->n_vocab = (int32_t)emb->ne[1];
    if ((s = get_matrix(g, "token_embd.weight", m->n_vocab, m->n_embd, &m->token_embd, err))) return s;
    m->output = m->token_embd; /* tied unless the file has output.weight */
    if (cq_gguf_find_tensor(g, "output.weight") &&
        (s = get_matrix(g, "output.weight", m->n_vocab, m->n_embd, &m->output, err)))
        return s;
    if ((s = get_vector(g, "output_norm.weight", m->n_embd, &m->output_norm, err))) return s;

    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const int64_t d = m->n_embd, hd = m->head_dim, q_dim = (int64_t)m->n_head * hd, kv_dim = (int64_t)m->n_head_kv * hd;
    for (int32_t l = 0; l < m->n_layer; l++) {
        cq_gemma_layer *L = &m->layers[l];
        char name[96];
#define MAT(field, suffix, rows, cols)                                                                         \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);                                              \
    if ((s = get_matrix(g, name, rows, cols, &L->field, err))) return s;
#define VEC(field, suffix, kind, n)                                                                            \
    snprintf(name, sizeof name, "blk.%d." suffix "." kind, l);                                               \
    if ((s = get_vector(g, name, n, &L->field, err))) return s;
        MAT(wq, "attn_q", q_dim, d)
        MAT(wk, "attn_k", kv_dim, d)
        MAT(wv, "attn_v", kv_dim, d)
        MAT(wo, "attn_output", d, q_dim)
        MAT(wgate, "ffn_gate", m->n_ff, d)
        MAT(wup, "ffn_up", m->n_ff, d)
        MAT(wdown, "ffn_down", d, m->n_ff)
        VEC(attn_norm, "attn_norm", "weight", d)
        VEC(ffn_norm, "ffn_norm", "weight", d)
        if (gemma) {
            VEC(q_norm, "attn_q_norm", "weight", hd)
            VEC(k_norm, "attn_k_norm", "weight", hd)
            VEC(post_attn_norm, "post_attention_norm", "weight", d)
            VEC(post_ffw_norm, "post_ffw_norm", "weight", d)
        } else {
            VEC(bq, "attn_q", "bias", q_dim)
            VEC(bk, "attn_k", "bias", kv_dim)
            VEC(bv, "attn_v", "bias", kv_dim)
        }
#undef MAT
#undef VEC
        L->global = (uint32_t)(l + 1) % period == 0;
        L->rope_base = L->global ? rope_global : rope_local;
        L->rope_freq_scale = L->global ? 1.0f / rope_linear : 1.0f;
        m->n_global += L->global;
    }
    return CQ_OK;
}

void cq_gemma_free(cq_gemma *m) {
    if (!m) return;
    if (m->layers) {
        for (int32_t l = 0; l < m->n_layer; l++) {
            cq_gemma_layer *L = &m->layers[l];
            free(L->attn_norm), free(L->q_norm), free(L->k_norm);
            free(L->post_attn_norm), free(L->ffn_norm), free(L->post_ffw_norm);
            free(L->bq), free(L->bk), free(L->bv);
        }
    }
    free(m->layers);
    free(m->output_norm);
    memset(m, 0, sizeof *m);
}
