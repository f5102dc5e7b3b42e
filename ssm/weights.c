/* Loading a model: DIR/ssm.json (the config) and DIR/ssm.safetensors (the tensors, read by core/safetensors.h).
 * Every tensor the config implies must be present with its exact shape, and nothing else may be: a mismatch
 * almost always means weights and config from different runs, and the message says which tensor and how.
 *
 * Input layer: "tokenizer": "cq-hash-v1" has its own table embedding.weight (vocab_size, d_model); any other name is
 * an external vocabulary (cq_ssm_vocab, lent by the caller) with "token_embd_dim" and "token_table_id" in the
 * config and embedding.markers (5, d_model) + embedding.proj.weight (d_model, token_embd_dim) in the weights. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "ssm/ssm_internal.h"

#define CQ_SSM_MAX_CONFIG_BYTES (1u << 20)
#define CQ_SSM_MAX_WEIGHTS_BYTES ((size_t)4 << 30)

static cq_status config_int(const cJSON *root, const char *key, int lo, int hi, int *out, cq_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return cq_err_set(err, CQ_ERR_FORMAT, "missing \"%s\"", key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"%s\" must be an integer", key);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return cq_err_set(err, CQ_ERR_FORMAT, "\"%s\" is %g; expected %d..%d", key, v->valuedouble, lo, hi);
    *out = (int)v->valuedouble;
    return CQ_OK;
}

#define CQ_SSM_MAX_VOCAB (1 << 22)
#define CQ_SSM_MARKERS 5

static cq_status parse_config(const char *text, cq_ssm_config *cfg, char *table_id, size_t table_id_cap,
                              cq_err *err) {
    cJSON *root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return cq_err_set(err, CQ_ERR_FORMAT, "not a JSON object");
    }
    cq_status rc = CQ_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *bidir = cJSON_GetObjectItemCaseSensitive(root, "bidirectional");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "norm_eps");
    const cJSON *table = cJSON_GetObjectItemCaseSensitive(root, "token_table_id");
    const int builtin = !cJSON_IsString(tok) || !strcmp(tok->valuestring, "cq-hash-v1");
    int version = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "clauseqa-ssm"))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"format\" must be \"clauseqa-ssm\"");
    else if ((rc = config_int(root, "version", 1, 1, &version, err)))
        ;
    else if (!cJSON_IsString(tok) || !tok->valuestring[0] || strlen(tok->valuestring) >= sizeof cfg->tokenizer)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"tokenizer\" must name the input vocabulary (\"cq-hash-v1\", "
                        "\"gemma3\")");
    else if ((rc = config_int(root, "vocab_size", 8, builtin ? CQ_SSM_VOCAB_SIZE : CQ_SSM_MAX_VOCAB,
                              &cfg->vocab_size, err)))
        ;
    else if (!builtin && (rc = config_int(root, "token_embd_dim", 1, 65536, &cfg->token_embd_dim, err)))
        ;
    else if (!builtin && !cJSON_IsString(table))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"token_table_id\" (the fingerprint of the token table the weights "
                        "were trained on) is missing");
    else if ((rc = config_int(root, "d_model", 8, 8192, &cfg->d_model, err)) ||
             (rc = config_int(root, "n_layer", 1, 64, &cfg->n_layer, err)) ||
             (rc = config_int(root, "d_state", 1, 64, &cfg->d_state, err)) ||
             (rc = config_int(root, "d_conv", 1, 8, &cfg->d_conv, err)) ||
             (rc = config_int(root, "expand", 1, 8, &cfg->expand, err)) ||
             (rc = config_int(root, "dt_rank", 1, 1024, &cfg->dt_rank, err)) ||
             (rc = config_int(root, "d_embed", 8, 8192, &cfg->d_embed, err)))
        ;
    else if (bidir && !cJSON_IsBool(bidir))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"bidirectional\" must be true or false");
    else if (eps && (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0 && eps->valuedouble < 1)))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"norm_eps\" must be a number in (0, 1)");
    else if (cfg->d_model % 8)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"d_model\" is %d; it must be a multiple of 8", cfg->d_model);
    if (!rc) {
        cfg->bidirectional = cJSON_IsTrue(bidir);
        cfg->norm_eps = eps ? (float)eps->valuedouble : 1e-5f;
        snprintf(cfg->tokenizer, sizeof cfg->tokenizer, "%s", tok->valuestring);
        if (builtin) cfg->token_embd_dim = 0;
        else snprintf(table_id, table_id_cap, "%s", table->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

/* The tensors a config implies, in arena order. */
typedef struct {
    char name[64];
    int ndim;
    int64_t shape[3];
    const float **dst;
} tensor_spec;

static size_t spec_numel(const tensor_spec *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

static void add_spec(tensor_spec *specs, size_t *n, const char *name, const float **dst, int ndim, int64_t d0,
                     int64_t d1, int64_t d2) {
    tensor_spec *t = &specs[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->dst = dst;
}

static void mixer_specs(const cq_ssm_config *c, int l, const char *which, cq_ssm_mixer_w *w, tensor_spec *specs,
                        size_t *n) {
    const int64_t Di = (int64_t)c->expand * c->d_model, N = c->d_state, R = c->dt_rank;
    char nm[64];
#define MIX(field, suffix, nd, a, b_, c_)                                       \
    snprintf(nm, sizeof nm, "layers.%d.%s.%s", l, which, suffix);               \
    add_spec(specs, n, nm, &w->field, nd, a, b_, c_)
    MIX(in_proj, "in_proj.weight", 2, 2 * Di, c->d_model, 0);
    MIX(conv_w, "conv1d.weight", 3, Di, 1, c->d_conv);
    MIX(conv_b, "conv1d.bias", 1, Di, 0, 0);
    MIX(x_proj, "x_proj.weight", 2, R + 2 * N, Di, 0);
    MIX(dt_proj, "dt_proj.weight", 2, Di, R, 0);
    MIX(dt_bias, "dt_proj.bias", 1, Di, 0, 0);
    MIX(A_log, "A_log", 2, Di, N, 0);
    MIX(D, "D", 1, Di, 0, 0);
    MIX(out_proj, "out_proj.weight", 2, c->d_model, Di, 0);
#undef MIX
}

/* Copies one stored tensor into dst as F32, after checking its shape against the config's. */
static cq_status read_tensor(const cq_st_tensor *t, const tensor_spec *spec, float *dst, cq_err *err) {
    int shape_ok = t->ndim == spec->ndim;
    for (int i = 0; i < t->ndim && shape_ok; i++) shape_ok = t->shape[i] == spec->shape[i];
    if (!shape_ok) {
        char want[96], have[96];
        cq_st_shape_str(want, sizeof want, spec->ndim, spec->shape);
        cq_st_shape_str(have, sizeof have, t->ndim, t->shape);
        return cq_err_set(err, CQ_ERR_FORMAT, "tensor %s: shape %s; the config implies %s", spec->name, have, want);
    }
    return cq_st_to_f32(t, dst, err);
}

static uint32_t config_fingerprint(const cq_ssm_config *c) {
    int v[] = {c->vocab_size, c->d_model, c->n_layer, c->d_state, c->d_conv, c->expand, c->dt_rank, c->d_embed,
               c->bidirectional, c->token_embd_dim};
    /* the built-in table's fingerprint is what it was before external vocabularies existed (stored states) */
    const size_t nv = sizeof v / sizeof v[0] - (c->token_embd_dim ? 0 : 1);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < nv; i++)
        for (int k = 0; k < 4; k++) h = (h ^ (uint32_t)((v[i] >> (8 * k)) & 0xff)) * 16777619u;
    return h;
}

static cq_status load_tensors(cq_ssm_model *m, const char *buf, size_t len, cq_err *err) {
    const cq_ssm_config *c = &m->cfg;
    cq_safetensors st;
    cq_status rc = cq_safetensors_parse(buf, len, &st, err);
    if (rc) return rc;
    size_t max_specs = 5 + (size_t)c->n_layer * 19, n_specs = 0;
    tensor_spec *specs = calloc(max_specs, sizeof *specs);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!specs || !m->layers) {
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (c->token_embd_dim) {
        add_spec(specs, &n_specs, "embedding.markers", &m->markers, 2, CQ_SSM_MARKERS, c->d_model, 0);
        add_spec(specs, &n_specs, "embedding.proj.weight", &m->embd_proj, 2, c->d_model, c->token_embd_dim, 0);
    } else {
        add_spec(specs, &n_specs, "embedding.weight", &m->embedding, 2, c->vocab_size, c->d_model, 0);
    }
    for (int l = 0; l < c->n_layer; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "layers.%d.norm.weight", l);
        add_spec(specs, &n_specs, nm, &m->layers[l].norm, 1, c->d_model, 0, 0);
        mixer_specs(c, l, "mixer", &m->layers[l].fwd, specs, &n_specs);
        if (c->bidirectional) mixer_specs(c, l, "mixer_rev", &m->layers[l].rev, specs, &n_specs);
    }
    add_spec(specs, &n_specs, "norm_f.weight", &m->norm_f, 1, c->d_model, 0, 0);
    add_spec(specs, &n_specs, "pool.weight", &m->pool_w, 2, c->d_embed, 2 * c->d_model, 0);
    add_spec(specs, &n_specs, "pool.bias", &m->pool_b, 1, c->d_embed, 0, 0);

    size_t total = 0;
    for (size_t i = 0; i < n_specs; i++) total += spec_numel(&specs[i]);
    m->arena = malloc(total * sizeof(float));
    if (!m->arena) {
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %zu weights", total);
        goto done;
    }
    size_t off = 0;
    for (size_t i = 0; i < n_specs && !rc; i++) {
        const cq_st_tensor *t = cq_safetensors_find(&st, specs[i].name);
        if (!t) {
            rc = cq_err_set(err, CQ_ERR_FORMAT, "missing tensor %s (config: n_layer %d, bidirectional %s)",
                            specs[i].name, c->n_layer, c->bidirectional ? "true" : "false");
            break;
        }
        rc = read_tensor(t, &specs[i], m->arena + off, err);
        *specs[i].dst = m->arena + off;
        off += spec_numel(&specs[i]);
    }
    /* Anything stored that the config does not name is refused too. */
    for (size_t k = 0; k < st.n && !rc; k++) {
        size_t i = 0;
        while (i < n_specs && strcmp(specs[i].name, st.tensors[k].name)) i++;
        if (i == n_specs)
            rc = cq_err_set(err, CQ_ERR_FORMAT, "unexpected tensor %s (config: n_layer %d, bidirectional %s)",
                            st.tensors[k].name, c->n_layer, c->bidirectional ? "true" : "false");
    }
done:
    free(specs);
    cq_safetensors_free(&st);
    return rc;
}

/* The document head (docs/SSM.md, "Document vectors"): DIR/doc_head.safetensors, when there, with its window from
 * the config's "manifest"."doc_head"."window_tokens" (train.py's export_doc_head). Absent: no head, no error. */
#define CQ_SSM_DOC_HEAD_FILE "doc_head.safetensors"
#define CQ_SSM_MAX_DOC_WINDOW (1 << 24)

/* out = the hex SHA-256 of the bytes data[0..n) followed by the string tail (an id naming weights and what they
 * were read with). */
static void sha256_hex_with(const void *data, size_t n, const char *tail, char out[65]) {
    cq_sha256 h;
    unsigned char d[32];
    cq_sha256_init(&h);
    cq_sha256_update(&h, data, n);
    cq_sha256_update(&h, tail, strlen(tail));
    cq_sha256_final(&h, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static cq_status load_doc_head(cq_ssm_model *m, const char *dir, const char *config_text, cq_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" CQ_SSM_DOC_HEAD_FILE, dir);
    if (access(path, F_OK)) return CQ_OK;
    const cq_ssm_config *c = &m->cfg;
    cq_status rc = CQ_OK;
    cJSON *root = cJSON_Parse(config_text);
    const cJSON *man = cJSON_GetObjectItemCaseSensitive(root, "manifest");
    const cJSON *head = cJSON_GetObjectItemCaseSensitive(man, "doc_head");
    int window = 0;
    if (c->bidirectional)
        rc = cq_err_set(err, CQ_ERR_FORMAT, "%s: a document head needs a unidirectional encoder", path);
    else if (!cJSON_IsObject(head))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "%s is there but ssm.json has no \"manifest\".\"doc_head\" (its "
                        "window_tokens): export the weights and the head together (train.py --doc-head)", path);
    else if ((rc = config_int(head, "window_tokens", 1, CQ_SSM_MAX_DOC_WINDOW, &window, err)))
        cq_err_prefix(err, "ssm.json \"manifest\".\"doc_head\": ");
    cJSON_Delete(root);
    if (rc) return rc;
    char *buf = NULL;
    size_t len = 0;
    if ((rc = cq_file_read(path, CQ_SSM_MAX_WEIGHTS_BYTES, &buf, &len, err))) return rc;
    cq_safetensors st;
    if ((rc = cq_safetensors_parse(buf, len, &st, err))) {
        free(buf);
        return cq_err_prefix(err, "%s: ", path);
    }
    tensor_spec specs[2];
    size_t n_specs = 0;
    add_spec(specs, &n_specs, "doc_head.weight", &m->doc_w, 2, c->d_embed, 2 * c->d_model, 0);
    add_spec(specs, &n_specs, "doc_head.bias", &m->doc_b, 1, c->d_embed, 0, 0);
    m->doc_arena = malloc((spec_numel(&specs[0]) + spec_numel(&specs[1])) * sizeof(float));
    if (!m->doc_arena) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    size_t off = 0;
    for (size_t i = 0; i < n_specs && !rc; i++) {
        const cq_st_tensor *t = cq_safetensors_find(&st, specs[i].name);
        if (!t) rc = cq_err_set(err, CQ_ERR_FORMAT, "missing tensor %s", specs[i].name);
        else rc = read_tensor(t, &specs[i], m->doc_arena + off, err);
        off += spec_numel(&specs[i]);
    }
    for (size_t k = 0; k < st.n && !rc; k++)
        if (strcmp(st.tensors[k].name, "doc_head.weight") && strcmp(st.tensors[k].name, "doc_head.bias"))
            rc = cq_err_set(err, CQ_ERR_FORMAT, "unexpected tensor %s", st.tensors[k].name);
    for (size_t i = 0; !rc && i < (size_t)c->d_embed * (2 * (size_t)c->d_model + 1); i++)
        if (!isfinite(m->doc_arena[i])) rc = cq_err_set(err, CQ_ERR_FORMAT, "a document head weight is not finite");
    if (!rc) {
        m->doc_w = m->doc_arena;
        m->doc_b = m->doc_arena + spec_numel(&specs[0]);
        m->doc_window = window;
        char tail[32];
        snprintf(tail, sizeof tail, ":%d", window);
        sha256_hex_with(buf, len, tail, m->doc_id);
    } else {
        m->doc_w = m->doc_b = NULL;
        if (err && !strstr(err->msg, CQ_SSM_DOC_HEAD_FILE)) cq_err_prefix(err, "%s: ", path);
    }
    cq_safetensors_free(&st);
    free(buf);
    return rc;
}

/* The external vocabulary against what the config says the weights were trained on. */
static cq_status check_vocab(const cq_ssm_config *c, const char *table_id, const cq_ssm_vocab *v, cq_err *err) {
    if (!c->token_embd_dim) return CQ_OK;
    if (!v)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "these weights read text through the \"%s\" vocabulary (the "
                          "decoder's tokenizer and token table), which was not given", c->tokenizer);
    if (!v->name || strcmp(v->name, c->tokenizer) || !v->tokenize || !v->row)
        return cq_err_set(err, CQ_ERR_INVALID, "the vocabulary given is \"%s\"; the weights need \"%s\"",
                          v->name ? v->name : "?", c->tokenizer);
    if (v->n_vocab != c->vocab_size || v->n_embd != c->token_embd_dim)
        return cq_err_set(err, CQ_ERR_FORMAT, "the %s vocabulary has %d ids × %d; the weights were trained on %d × %d",
                          c->tokenizer, (int)v->n_vocab, (int)v->n_embd, c->vocab_size, c->token_embd_dim);
    if (!v->table_id || strcmp(v->table_id, table_id))
        return cq_err_set(err, CQ_ERR_FORMAT, "the %s token table (fingerprint %.16s…) is not the one the weights were "
                          "trained on (%.16s…)", c->tokenizer, v->table_id ? v->table_id : "?", table_id);
    return CQ_OK;
}

cq_status cq_ssm_model_tokenizer(const char *dir, char *name, size_t cap, cq_err *err) {
    char path[4096], table_id[128];
    char *text = NULL;
    size_t len = 0;
    cq_ssm_config cfg = {0};
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    cq_status rc = cq_file_read(path, CQ_SSM_MAX_CONFIG_BYTES, &text, &len, err);
    if (!rc && (rc = parse_config(text, &cfg, table_id, sizeof table_id, err))) cq_err_prefix(err, "%s: ", path);
    free(text);
    if (!rc) snprintf(name, cap, "%s", cfg.tokenizer);
    return rc;
}

cq_status cq_ssm_model_load(const char *dir, cq_ssm_model **out, cq_err *err) {
    return cq_ssm_model_load_vocab(dir, NULL, out, err);
}

cq_status cq_ssm_model_load_vocab(const char *dir, const cq_ssm_vocab *vocab, cq_ssm_model **out, cq_err *err) {
    *out = NULL;
    cq_ssm_model *m = calloc(1, sizeof *m);
    if (!m) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    char path[4096], table_id[128] = "";
    char *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    cq_status rc = cq_file_read(path, CQ_SSM_MAX_CONFIG_BYTES, &text, &len, err);
    if (!rc) {
        rc = parse_config(text, &m->cfg, table_id, sizeof table_id, err);
        if (!rc) rc = check_vocab(&m->cfg, table_id, vocab, err);
        if (rc) cq_err_prefix(err, "%s: ", path);
    }
    free(text);
    text = NULL;
    if (!rc) {
        m->d_inner = m->cfg.expand * m->cfg.d_model;
        m->fingerprint = config_fingerprint(&m->cfg);
        m->vocab = m->cfg.token_embd_dim ? vocab : NULL;
        snprintf(path, sizeof path, "%s/ssm.safetensors", dir);
        rc = cq_file_read(path, CQ_SSM_MAX_WEIGHTS_BYTES, &text, &len, err);
        if (!rc) {
            rc = load_tensors(m, text, len, err);
            if (rc) {
                cq_err_prefix(err, "%s: ", path);
            } else if (m->vocab && (rc = cq_ssm_row_cache_new(m, err))) {
                ;
            } else if (m->vocab) { /* the vectors depend on the table as much as on these weights */
                sha256_hex_with(text, len, table_id, m->id);
            } else {
                cq_sha256_hex(text, len, m->id);
            }
        }
        free(text);
        text = NULL;
    }
    if (!rc) { /* the document head, beside the weights when trained with one */
        snprintf(path, sizeof path, "%s/ssm.json", dir);
        rc = cq_file_read(path, CQ_SSM_MAX_CONFIG_BYTES, &text, &len, err);
        if (!rc) rc = load_doc_head(m, dir, text, err);
        free(text);
    }
    if (rc) {
        cq_err_prefix(err, "SSM model: ");
        cq_ssm_model_free(m);
        return rc;
    }
    *out = m;
    return CQ_OK;
}

void cq_ssm_model_free(cq_ssm_model *m) {
    if (!m) return;
    cq_ssm_row_cache_free(m);
    free(m->layers);
    free(m->arena);
    free(m->doc_arena);
    free(m);
}

const cq_ssm_config *cq_ssm_model_config(const cq_ssm_model *m) { return &m->cfg; }

const char *cq_ssm_model_id(const cq_ssm_model *m) { return m->id; }
int cq_ssm_model_doc_window(const cq_ssm_model *m) { return m->doc_w ? m->doc_window : 0; }
const char *cq_ssm_model_doc_head_id(const cq_ssm_model *m) { return m->doc_w ? m->doc_id : ""; }
