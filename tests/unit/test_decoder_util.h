/* Opening the real decoder model in unit tests (make setup fetches it into data/models/). */
#ifndef CQ_TEST_DECODER_UTIL_H
#define CQ_TEST_DECODER_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "decoder/decoder.h"

/* The Gemma-3-270M model of the source tree ($CLAUSEQA_SOURCE_DIR), or NULL with the reason on stderr. */
static inline cq_decoder *test_open_real_model(const cq_decoder_options *opt) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    cq_err err = {0};
    cq_decoder *d = NULL;
    if (cq_decoder_open(path, opt, &d, &err)) {
        fprintf(stderr, "the model must be present (make setup fetches it): %s\n", err.msg);
        return NULL;
    }
    return d;
}

#endif
