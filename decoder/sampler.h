/* Internal: picking the next token from logits (parameters in decoder/decoder.h, cq_sampler_params). */
#ifndef CQ_DECODER_SAMPLER_H
#define CQ_DECODER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/decoder.h"

typedef struct {
    cq_sampler_params p;
    uint64_t rng;     /* xorshift64* state */
    float *prob;      /* (n_vocab) scratch */
    int32_t *idx;     /* (n_vocab) scratch */
    uint8_t *seen;    /* (n_vocab) tokens penalized in this call; zero between calls */
    int32_t n_vocab;
} cq_sampler;

cq_status cq_sampler_init(cq_sampler *s, const cq_sampler_params *p, int32_t n_vocab, cq_err *err);
void cq_sampler_free(cq_sampler *s);

/* Picks a token from logits (n_vocab floats, modified in place). history: the tokens the repetition penalty looks
 * at (the last repetition_window of them). Order: repetition penalty, then greedy if temperature <= 0, else
 * temperature, top-k, softmax, top-p (nucleus), and a draw. */
int32_t cq_sampler_pick(cq_sampler *s, float *logits, const int32_t *history, size_t n_history);

#endif
