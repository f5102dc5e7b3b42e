/* Reranking retrieved clauses with the trained decoder's relevance judgement (docs/ANSWERS.md, cq-prompt-v1 task 3).
 *
 * Each candidate clause becomes one relevance prompt (question and the clause, cut to 400 characters); its score is
 * logit(yes) - logit(no) at the prompt's last position, the first tokens of 是/否 (Chinese questions) or " yes"/
 * " no". All candidates go to the decoder together (cq_decoder_score_prompts: one packed batched prefill on the
 * GPU, one prompt after another on the CPU), `batch` prompts a call. Needs nothing from the service: retrieval
 * options call it with the hits they retrieved. */
#ifndef CQ_APP_RERANK_H
#define CQ_APP_RERANK_H

#include <stddef.h>

#include "attention/decoder.h"
#include "core/error.h"
#include "index/retrieve.h"

/* Reorders the first top_n hits after the leading router hits (exact clause references: they stay first, not
 * scored) by relevance score, highest first, stable for equal scores; each reranked hit's score becomes its
 * relevance score. batch: prompts per decoder call (0: all at once). The decoder must run the trained adapter
 * (CQ_ERR_UNSUPPORTED otherwise: a base model's yes/no says nothing). On error the hits are unchanged. */
cq_status cq_rerank_hits(cq_decoder *d, const char *question, cq_hits *hits, size_t top_n, size_t batch,
                         cq_err *err);

#endif
