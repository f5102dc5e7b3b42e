/* Perplexity: how well the model predicts a text, token by token. */
#include <math.h>
#include <stdlib.h>

#include "decoder/cpu_kernels.h"
#include "decoder/decoder.h"
#include "core/clock.h"

#define SCORE_CHUNK 64 /* tokens whose logits are held at once (64 x vocabulary floats) */

/* -log softmax(logits)[target] */
static double token_nll(const float *logits, int32_t n, int32_t target) {
    float mx = logits[0];
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    return log(cq_k_sum_exp(logits, n, mx)) + mx - logits[target];
}

cq_status cq_decoder_perplexity(cq_decoder *d, const char *text, size_t len, int32_t context, cq_perplexity *out,
                                cq_err *err) {
    *out = (cq_perplexity){0};
    const cq_tokenizer *tok = cq_decoder_tokenizer(d);
    const int32_t V = cq_decoder_get_info(d)->n_vocab, bos = cq_tokenizer_bos(tok);
    if (context <= 1) context = 512;
    if (context > cq_decoder_get_info(d)->context_length) context = cq_decoder_get_info(d)->context_length;
    int32_t *ids;
    size_t n_ids;
    cq_status rc = cq_tokenizer_encode(tok, text, len, 0, &ids, &n_ids, err);
    if (rc) return rc;
    if (n_ids == 0) {
        free(ids);
        return cq_err_set(err, CQ_ERR_EMPTY, "perplexity: the text has no tokens");
    }
    int32_t *win = malloc((size_t)context * sizeof *win);
    float *logits = malloc((size_t)SCORE_CHUNK * V * sizeof *logits);
    cq_decoder_seq *s = NULL;
    if (!win || !logits) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = cq_decoder_seq_new(d, context, &s, err);
    double t0 = cq_clock_seconds();
    /* Windows of BOS + up to context-1 text tokens; every text token is predicted once, from its window's start. */
    for (size_t start = 0; !rc && start < n_ids; start += (size_t)context - 1) {
        size_t n_text = n_ids - start < (size_t)context - 1 ? n_ids - start : (size_t)context - 1;
        size_t n = n_text + 1;
        win[0] = bos;
        for (size_t i = 0; i < n_text; i++) win[1 + i] = ids[start + i];
        cq_decoder_seq_reset(s);
        for (size_t c = 0; !rc && c < n; c += SCORE_CHUNK) {
            size_t m = n - c < SCORE_CHUNK ? n - c : SCORE_CHUNK;
            rc = cq_decoder_eval(s, win + c, m, logits, true, err);
            for (size_t j = 0; !rc && j < m; j++) {
                size_t p = c + j; /* logits at p predict token p + 1 */
                if (p + 1 >= n) break;
                out->nll_sum += token_nll(logits + j * (size_t)V, V, win[p + 1]);
                out->n_scored++;
            }
        }
        out->n_windows++;
    }
    out->seconds = cq_clock_seconds() - t0;
    out->n_tokens = (int64_t)n_ids;
    out->perplexity = out->n_scored ? exp(out->nll_sum / (double)out->n_scored) : NAN;
    cq_decoder_seq_free(s);
    free(win);
    free(logits);
    free(ids);
    return rc;
}
