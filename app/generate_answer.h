/* Generated answers: the decoder reads the retrieved clauses and the question and writes the answer, token by token.
 *
 * The model is a small *base* model (Gemma-3-270M: no chat template, no instruction tuning), so the prompt is a
 * reading-comprehension pattern it continues: an instruction, two fixed worked examples (one answered with a
 * verbatim span, one "cannot be answered"), then the clauses (label, heading path, text) and the question, and
 * "答案：" / "Answer:" to continue. Greedy decoding is *copy-constrained*: a token is taken only when the answer so
 * far plus the token is still a verbatim span of one of the clauses shown (or a prefix of the refusal phrase); the
 * best-scoring such token among the model's top candidates wins, and a newline, the end of text, or no admissible
 * candidate ends the answer. So every generated answer is a quote the clauses support by construction; it is still
 * checked (cq_gen_answer_supported) before it is used, and the caller falls back to the extractive answer with a
 * notice when it is not, or when the model wrote nothing usable. The refusal phrase is an abstention. */
#ifndef CQ_APP_GENERATE_ANSWER_H
#define CQ_APP_GENERATE_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

#include "attention/decoder.h"
#include "core/error.h"
#include "index/retrieve.h"

/* Pieces of answer text as they are generated (whole UTF-8 characters); return false to stop. */
typedef bool (*cq_answer_text_fn)(void *user, const char *text, size_t len);

typedef struct {
    char *text;          /* the answer (a verbatim span of hits[clause]) or NULL */
    size_t clause;       /* index into the hits of the clause it quotes */
    bool refused;        /* the model said the clauses do not answer the question */
    int prompt_tokens, new_tokens;
    double mean_logprob; /* mean natural-log probability of the tokens taken (the model's confidence), 0 if none */
    double prefill_ms, decode_ms;
} cq_gen_answer;

typedef struct {
    size_t max_context_chars; /* clause text shown to the model, all clauses together (default 600) */
    int max_new_tokens;       /* default 96 */
    int candidates;           /* top logits examined per step for an admissible token (default 64) */
    bool allow_refusal;       /* the refusal phrase is admissible (else only spans of the clauses are) */
    double min_confidence;    /* streaming starts once the answer so far is this likely (answer.h's floor) */
} cq_gen_answer_options;

/* The prompt for question over the first hits (at most max_context_chars of clause text); *shown receives how many
 * bytes of each hit's text were shown (an array of hits->n, malloc'd). */
char *cq_gen_answer_prompt(const char *question, const cq_hits *hits, size_t max_context_chars, size_t **shown);

cq_status cq_gen_answer_run(cq_decoder *d, const char *question, const cq_hits *hits, const cq_gen_answer_options *opt,
                            cq_answer_text_fn on_text, void *user, cq_gen_answer *out, cq_err *err);
void cq_gen_answer_free(cq_gen_answer *g);

/* The check an answer must pass to be used: non-empty and a verbatim span of the text of hits[clause]. */
bool cq_gen_answer_supported(const char *answer, const cq_hits *hits, size_t clause);

/* True when the answer only repeats the title of hits[clause]'s document: the title holds the answer (both as the eval format's norm() sees them:
 * folded, white space removed)
 * and the answer is at least 80 % of the title's characters. News-style notices often open with their headline,
 * which the copy-constrained decoder can quote; that is no answer to a question about the notice. */
bool cq_gen_answer_is_title(const char *answer, const cq_hits *hits, size_t clause);

/* The refusal phrase the prompt teaches, for the question's language. */
const char *cq_gen_answer_refusal(bool zh);

#endif
