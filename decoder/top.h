/* A decode step's candidates: the top K logits of the next token, the log-sum-exp of all of them, and the logits of
 * a few ids the caller names. What a constrained decoder needs from a step (app/generate_answer.c: the best
 * admissible candidate, its log-probability, the probability mass of a few tokens), without the n_vocab logits:
 * on CUDA it is computed where the logits are (forward_cuda.h) and only these few hundred bytes come back.
 * cq_top_from_logits is the reference, and what the CPU backend returns. */
#ifndef CQ_DECODER_TOP_H
#define CQ_DECODER_TOP_H

#include <stdint.h>

#define CQ_TOP_MAX 64    /* candidates at most */
#define CQ_TOP_MAX_IDS 8 /* named ids at most */

typedef struct {
    int32_t k;                   /* candidates wanted, 1..CQ_TOP_MAX */
    int32_t n_ids;               /* named ids, 0..CQ_TOP_MAX_IDS */
    int32_t ids[CQ_TOP_MAX_IDS]; /* each in [0, n_vocab) */
} cq_top_request;

typedef struct {
    int32_t n;                       /* candidates filled (k, or n_vocab when smaller) */
    int32_t top_ids[CQ_TOP_MAX];     /* largest logit first; equal logits: the smaller id first */
    float top_logits[CQ_TOP_MAX];
    double lse;                      /* log(sum_i exp(logit_i)): log p(i) = logit_i - lse */
    float id_logits[CQ_TOP_MAX_IDS]; /* the logits of the request's ids, in its order */
} cq_top;

/* The reference from a full row of logits: insertion into a sorted list for the top k, the log-sum-exp in double. */
void cq_top_from_logits(const float *logits, int32_t n_vocab, const cq_top_request *req, cq_top *out);

#endif
