/* Relevance reranking; see rerank.h. */
#include "app/rerank.h"

#include <stdlib.h>
#include <string.h>

#include "app/generate_answer.h"
#include "core/utf8.h"

cq_status cq_rerank_hits(cq_decoder *d, const char *question, cq_hits *hits, size_t top_n, size_t batch,
                         cq_err *err) {
    if (!cq_decoder_adapter(d))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "reranking needs the decoder's trained adapter (docs/ANSWERS.md)");
    size_t first = 0;
    while (first < hits->n && hits->hits[first].source == CQ_RETRIEVE_ROUTER) first++;
    const size_t n = hits->n - first < top_n ? hits->n - first : top_n;
    if (n == 0) return CQ_OK;
    if (!batch || batch > n) batch = n;
    const cq_tokenizer *tok = cq_decoder_tokenizer(d);
    int32_t ids[2];
    cq_status rc = cq_prompt_relevance_ids(tok, cq_utf8_has_cjk(question), &ids[0], &ids[1], err);
    if (rc) return rc;
    int32_t **prompts = calloc(n, sizeof *prompts);
    size_t *lens = calloc(n, sizeof *lens), *order = malloc(n * sizeof *order);
    float *logits = malloc(n * 2 * sizeof *logits);
    double *score = malloc(n * sizeof *score);
    cq_hit *moved = malloc(n * sizeof *moved);
    if (!prompts || !lens || !order || !logits || !score || !moved) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const cq_prompt_passage p = cq_prompt_passage_of(&hits->hits[first + i]);
        char *text = cq_prompt_relevance(question, &p);
        rc = text ? cq_tokenizer_encode(tok, text, strlen(text), CQ_TOK_ADD_BOS, &prompts[i], &lens[i], err)
                  : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        free(text);
    }
    for (size_t i = 0; !rc && i < n; i += batch)
        rc = cq_decoder_score_prompts(d, (const int32_t *const *)prompts + i, lens + i, n - i < batch ? n - i : batch,
                                      ids, 2, logits + 2 * i, err);
    if (!rc) {
        /* a stable insertion sort by score, highest first (n is a few dozen at most) */
        for (size_t i = 0; i < n; i++) {
            score[i] = (double)logits[2 * i] - (double)logits[2 * i + 1];
            size_t j = i;
            while (j > 0 && score[order[j - 1]] < score[i]) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = i;
        }
        for (size_t i = 0; i < n; i++) {
            moved[i] = hits->hits[first + order[i]];
            moved[i].score = score[order[i]];
        }
        memcpy(hits->hits + first, moved, n * sizeof *moved);
    }
    for (size_t i = 0; prompts && i < n; i++) free(prompts[i]);
    free(prompts), free(lens), free(order), free(logits), free(score), free(moved);
    return rc;
}
