/* Relevance reranking; see rerank.h. */
#include "app/rerank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/generate_answer.h"

cq_status cq_rerank_score(void *ctx, const cq_query *q, const cq_hit *hits, size_t n, double *scores, double *relevance,
                          cq_err *err) {
    const cq_reranker *r = ctx;
    if (!r || !r->decoder || !cq_decoder_adapter(r->decoder))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "reranking needs the decoder's trained adapter (docs/ANSWERS.md)");
    if (n == 0) return CQ_OK;
    const size_t all = n;
    if (r->sure_margin > 0 && r->sure_top_n && n > r->sure_top_n && n > 1 && hits[0].score > 0 &&
        hits[0].score - hits[1].score >= r->sure_margin * hits[0].score)
        n = r->sure_top_n; /* retrieval is sure enough: rescore only the first few */
    size_t batch = r->batch && r->batch < n ? r->batch : n;
    const cq_tokenizer *tok = cq_decoder_tokenizer(r->decoder);
    int32_t ids[2];
    cq_status rc = cq_prompt_relevance_ids(tok, q->lang == CQ_QUERY_ZH, &ids[0], &ids[1], err);
    if (rc) return rc;
    int32_t **prompts = calloc(n, sizeof *prompts);
    size_t *lens = calloc(n, sizeof *lens);
    float *logits = malloc(n * 2 * sizeof *logits);
    if (!prompts || !lens || !logits) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const cq_prompt_passage p = cq_prompt_passage_of(&hits[i]);
        char *text = cq_prompt_relevance_cut(q, &p, r->chars);
        rc = text ? cq_tokenizer_encode(tok, text, strlen(text), CQ_TOK_ADD_BOS, &prompts[i], &lens[i], err)
                  : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        free(text);
    }
    for (size_t i = 0; !rc && i < n; i += batch)
        rc = cq_decoder_score_prompts(r->decoder, (const int32_t *const *)prompts + i, lens + i,
                                      n - i < batch ? n - i : batch, ids, 2, logits + 2 * i, err);
    double low = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        scores[i] = (double)logits[2 * i] - (double)logits[2 * i + 1];
        if (relevance) relevance[i] = scores[i]; /* keep-doc below may move the order, not the judgement */
        if (i == 0 || scores[i] < low) low = scores[i];
    }
    for (size_t i = n; !rc && i < all; i++) scores[i] = low - 1.0 - (double)(i - n); /* unscored: after, in order */
    if (!rc && r->keep_doc > 0 && (r->keep_doc != 3 || cq_rerank_doc_leads(hits, all, CQ_RERANK_KEEP_DOC_LEAD)))
        cq_rerank_keep_doc(hits, all, scores, r->keep_doc >= 2);
    for (size_t i = 0; prompts && i < n; i++) free(prompts[i]);
    free(prompts), free(lens), free(logits);
    return rc;
}

void cq_rerank_keep_doc(const cq_hit *hits, size_t n, double *scores, bool first_only) {
    if (n < 2) return;
    double lo = scores[0], hi = scores[0];
    size_t best = 0; /* the kept document's best-scored candidate */
    for (size_t i = 1; i < n; i++) {
        if (scores[i] < lo) lo = scores[i];
        if (scores[i] > hi) hi = scores[i];
        if (hits[i].doc_id == hits[0].doc_id && scores[i] > scores[best]) best = i;
    }
    if (first_only) { /* only the first place is the kept document's */
        if (scores[best] < hi) scores[best] = hi + 1.0;
        return;
    }
    /* the others drop below the lowest of the kept document's; its scores stay the reranker's */
    const double drop = hi - lo + 1.0;
    for (size_t i = 0; i < n; i++)
        if (hits[i].doc_id != hits[0].doc_id) scores[i] -= drop;
}

bool cq_rerank_doc_leads(const cq_hit *hits, size_t n, double lead) {
    if (n == 0 || hits[0].score <= 0) return false;
    for (size_t i = 1; i < n && i < 3; i++)
        if (hits[i].doc_id != hits[0].doc_id) return hits[0].score - hits[i].score >= lead * hits[0].score;
    return true; /* the first three are all its own */
}

static int keep_doc_setting(void) {
    const char *e = getenv("CLAUSEQA_RERANK_KEEP_DOC");
    if (e && e[0] >= '1' && e[0] <= '3' && !e[1]) return e[0] - '0';
    if (e && !strcmp(e, "0")) return -1;
    if (e && *e) fprintf(stderr, "clauseqa: CLAUSEQA_RERANK_KEEP_DOC='%s' is not 0, 1, 2 or 3; using the default\n", e);
    return CQ_RERANK_KEEP_DOC_DEFAULT ? CQ_RERANK_KEEP_DOC_DEFAULT : -1;
}

void cq_rerank_attach(cq_retrieve_options *o, cq_reranker *r, cq_decoder *d, bool mode_defaulted) {
    if (!d || !cq_decoder_adapter(d)) return;
    const bool gpu = cq_decoder_get_info(d)->device == CQ_DEVICE_CUDA;
    r->decoder = d;
    if (!r->keep_doc) r->keep_doc = keep_doc_setting();
    o->rerank = cq_rerank_score;
    o->rerank_ctx = r;
    o->rerank_default = mode_defaulted && gpu;
    if (!o->rerank_top_n) o->rerank_top_n = gpu ? CQ_RERANK_TOP_N_GPU : CQ_RERANK_TOP_N_CPU;
}
