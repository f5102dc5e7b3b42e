/* The answer pipeline: question → retrieved clauses → an answer with citations, or an abstention.
 *
 * A clause the question names exactly (router hit) is recited (or the 款 asked for). Otherwise, when the best
 * clause covers too little of the question, the pipeline abstains and says so; else, with a decoder, the answer is
 * generated (app/generate_answer.h: a verbatim span of a retrieved clause, checked, streamed as it is written; the
 * model may also decline, which is an abstention), and without one — or when the generated answer is empty or not
 * supported by the clauses, which adds a notice — it is extractive: the sentences of the best clause that cover
 * the question's terms best. Every quote is a verbatim span of its cited clause. */
#ifndef CQ_APP_ANSWER_H
#define CQ_APP_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/generate_answer.h"
#include "attention/decoder.h"
#include "core/error.h"
#include "index/query.h"
#include "index/retrieve.h"
#include "index/store.h"

typedef struct {
    int64_t clause_id, doc_id;
    char *doc;    /* document name */
    char *clause; /* label or NULL */
    char *path;
    int page;     /* first page of the quote's clause, 0 when the document has no pages */
    char *quote;  /* verbatim span of the clause text */
} cq_citation;

typedef struct {
    char *answer;
    bool abstained;
    cq_citation *citations;
    size_t n_citations;
    cq_hits hits;        /* the retrieved clauses the answer was built from */
    double coverage;     /* share of the question's terms found in the cited text */
    bool generated;      /* the answer was written by the decoder */
    char *notice;        /* why a generated answer was not used (then the answer is extractive), or NULL */
    int prompt_tokens, tokens_generated;
    double confidence;   /* a generated answer's mean token probability (geometric), 0 when none was generated */
    double retrieve_ms;  /* stage timings */
    double answer_ms;
} cq_answer;

/* Below this geometric-mean token probability a generated answer is replaced by the extractive one: on the dev
 * suites (docs/EVAL.md) the answers under it were mostly wrong spans; 0.2-0.4 scored alike, 0.3 is the middle. */
#define CQ_ANSWER_MIN_CONFIDENCE 0.3

typedef struct {
    cq_retrieve_options retrieve; /* how cq_answer_question retrieves (zeroed: the default, index/retrieve.h) */
    double min_coverage; /* abstain below this share of question terms in the best clause (default 0.25) */
    cq_decoder *decoder; /* generate answers with it; NULL: extractive answers */
    double min_confidence; /* a generated answer less likely than this falls back to the extractive one (default
                              CQ_ANSWER_MIN_CONFIDENCE; negative: never) */
    cq_answer_text_fn on_text; /* generated answer text as it is written (may be NULL) */
    void *user;
} cq_answer_options;

/* Retrieves the clauses for q (parsed for its KB, index/query.h) and answers from them. */
cq_status cq_answer_question(cq_store *s, const cq_query *q, const cq_answer_options *opt, cq_answer *out,
                             cq_err *err);

/* The answer step alone, from clauses already retrieved for q: out takes ownership of *hits (left empty). q needs
 * no KB (its text, language and terms are read). */
cq_status cq_answer_from_hits(const cq_query *q, cq_hits *hits, const cq_answer_options *opt, cq_answer *out,
                              cq_err *err);
void cq_answer_free(cq_answer *a);

/* Share of terms (a query's all_terms) that occur in text after folding; 0 when there are no terms. */
double cq_answer_coverage(char **terms, size_t n_terms, const char *text);

#endif
