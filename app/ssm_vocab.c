#include "app/ssm_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/gguf.h"
#include "decoder/quant.h"
#include "decoder/tokenizer.h"
#include "core/sha256.h"

enum { ROW_STRIDE = 64, N_MARKERS = 5, UNK_MARKER = 1 };

struct cq_ssm_gemma_vocab {
    cq_ssm_vocab v;
    cq_gguf *g;
    cq_tokenizer *tok;
    const unsigned char *table; /* token_embd.weight in the map: n_vocab rows of row_bytes */
    uint32_t type;
    size_t row_bytes;
    char table_id[65];
};

static cq_status gemma_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, cq_err *err) {
    cq_ssm_gemma_vocab *v = ctx;
    cq_status rc = cq_tokenizer_encode(v->tok, text, len, 0, ids, n, err);
    for (size_t i = 0; !rc && i < *n; i++)
        if ((*ids)[i] < N_MARKERS) (*ids)[i] = UNK_MARKER;
    return rc;
}

static void gemma_row(void *ctx, int32_t id, float *out) {
    cq_ssm_gemma_vocab *v = ctx;
    cq_dequant_row(v->type, v->table + (size_t)id * v->row_bytes, out, (size_t)v->v.n_embd);
}

cq_status cq_ssm_gemma_vocab_open(const char *gguf_path, cq_ssm_gemma_vocab **out, cq_err *err) {
    *out = NULL;
    cq_ssm_gemma_vocab *v = calloc(1, sizeof *v);
    if (!v) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = cq_gguf_open(gguf_path, &v->g, err);
    if (!rc) rc = cq_tokenizer_from_gguf(v->g, &v->tok, err);
    const cq_gguf_tensor *t = rc ? NULL : cq_gguf_find_tensor(v->g, "token_embd.weight");
    size_t be = 0, bb = 0;
    if (!rc && (!t || t->n_dims != 2))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "no 2-D token_embd.weight");
    else if (!rc && (!cq_qtype_block(t->type, &be, &bb) || t->ne[0] % (int64_t)be))
        rc = cq_err_set(err, CQ_ERR_UNSUPPORTED, "token_embd.weight: type %s", cq_qtype_name(t->type));
    else if (!rc && t->ne[1] != cq_tokenizer_vocab_size(v->tok))
        rc = cq_err_set(err, CQ_ERR_FORMAT, "token_embd.weight has %lld rows for %d tokens", (long long)t->ne[1],
                        (int)cq_tokenizer_vocab_size(v->tok));
    if (!rc) {
        v->table = t->data;
        v->type = t->type;
        v->row_bytes = (size_t)t->ne[0] / be * bb;
        v->v = (cq_ssm_vocab){.name = "gemma3", .n_vocab = (int32_t)t->ne[1], .n_embd = (int32_t)t->ne[0],
                              .table_id = v->table_id, .ctx = v, .tokenize = gemma_tokenize, .row = gemma_row};
        char head[96];
        int n = snprintf(head, sizeof head, "%s:%lldx%lld\n", cq_qtype_name(t->type), (long long)t->ne[0],
                         (long long)t->ne[1]);
        cq_sha256 h;
        unsigned char d[32];
        cq_sha256_init(&h);
        cq_sha256_update(&h, head, (size_t)n);
        for (int64_t r = 0; r < t->ne[1]; r += ROW_STRIDE) cq_sha256_update(&h, v->table + r * v->row_bytes, v->row_bytes);
        cq_sha256_final(&h, d);
        for (int i = 0; i < 32; i++) snprintf(v->table_id + 2 * i, 3, "%02x", d[i]);
    }
    if (rc) {
        cq_err_prefix(err, "%s: ", gguf_path);
        cq_ssm_gemma_vocab_close(v);
        return rc;
    }
    *out = v;
    return CQ_OK;
}

const cq_ssm_vocab *cq_ssm_gemma_vocab_get(const cq_ssm_gemma_vocab *v) { return &v->v; }

void cq_ssm_gemma_vocab_close(cq_ssm_gemma_vocab *v) {
    if (!v) return;
    cq_tokenizer_free(v->tok);
    cq_gguf_close(v->g);
    free(v);
}

cq_status cq_ssm_vocab_open_for_dense(const char *gguf_path, const char *name, const cq_ssm_vocab **vocab,
                                      void **handle, cq_err *err) {
    *vocab = NULL;
    *handle = NULL;
    if (strcmp(name, "gemma3"))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "the encoder needs the \"%s\" vocabulary, which clauseqa does not "
                          "have", name);
    cq_ssm_gemma_vocab *v = NULL;
    cq_status rc = cq_ssm_gemma_vocab_open(gguf_path, &v, err);
    if (rc) return cq_err_prefix(err, "the encoder reads text through the decoder's vocabulary: ");
    *vocab = cq_ssm_gemma_vocab_get(v);
    *handle = v;
    return CQ_OK;
}

void cq_ssm_vocab_close_for_dense(void *handle) { cq_ssm_gemma_vocab_close(handle); }
