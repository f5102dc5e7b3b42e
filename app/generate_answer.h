/* Generated answers: the decoder reads the retrieved clauses and the question and writes the answer, token by token.
 *
 * With an adapter trained for the job (decoder/decoder.h cq_decoder_load_adapter; docs/ANSWERS.md) the prompt is
 * the one it was trained on, cq-prompt-v1 (cq_prompt_answer below: a task line, numbered passages, no examples),
 * and the model decides itself whether the passages answer the question (its refusal phrase) and answers a yes/no
 * question with a verdict word (是/否, Yes/No), reported in cq_gen_answer.verdict.
 *
 * Without one the model is a small *base* model (Gemma-3-270M: no chat template, no instruction tuning), so the
 * prompt is a reading-comprehension pattern it continues: an instruction, two fixed worked examples (one answered with a
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

#include "decoder/decoder.h"
#include "core/error.h"
#include "search/query.h"
#include "search/retrieve.h"

/* Pieces of answer text as they are generated (whole UTF-8 characters); return false to stop. */
typedef bool (*cq_answer_text_fn)(void *user, const char *text, size_t len);

typedef struct {
    char *text;          /* the answer (a verbatim span of hits[clause], or the verdict word) or NULL */
    size_t clause;       /* index into the hits of the clause it quotes (the first one for a verdict) */
    bool refused;        /* the model said the clauses do not answer the question */
    const char *verdict; /* "yes" / "no": the trained model answered with a verdict word; NULL otherwise */
    bool trained;        /* the adapter's prompt (cq-prompt-v1) was used */
    int prompt_tokens, new_tokens;
    double mean_logprob; /* mean natural-log probability of the tokens taken (the model's confidence), 0 if none */
    double refusal_p;    /* probability the model gave, at the answer's first token, to starting the refusal phrase
                          * (0 when the refusal was not admissible) */
    double prefill_ms, decode_ms;
} cq_gen_answer;

typedef struct {
    size_t max_context_chars; /* base model: clause text shown, all clauses together (default 600; the trained
                               * prompt shows CQ_PROMPT_ANSWER_CHARS) */
    int max_new_tokens;       /* default 96 */
    int candidates;           /* top logits examined per step for an admissible token (default and most: 64) */
    bool allow_refusal;       /* base model: the refusal phrase is admissible (else only spans of the clauses are);
                               * the trained model may always refuse */
    double min_confidence;    /* streaming starts once the answer so far is this likely (answer.h's floor) */
    double refusal_min_p;     /* the refusal may be chosen only when refusal_p is at least this (0: whenever it is
                               * the likeliest admissible start; above 1: never) */
} cq_gen_answer_options;

/* The question is the analysed query (search/query.h): its language picks the prompt's, and its terms (all_terms)
 * the item (项) of a listing clause the answer may come from. Spans keep their meaning (app/answer_span.h): a span
 * never crosses from one item of a clause into another, and when the question's terms match one item of a shown clause clearly better than every other (half again the
 * terms of any other, and three more), the span may come from
 * that item (or the clause's text outside its items) only. The span the model wrote is then extended over the
 * negation and limit words at its edges (不, 不得, 不超过, …以上; not, unless, …); what was streamed is its start
 * unless that extension added words before it (then the final answer differs from the streamed text). */

/* The base model's prompt for the question over the first hits (at most max_context_chars of clause text); *shown
 * receives how many bytes of each hit's text were shown (an array of hits->n, malloc'd). */
char *cq_gen_answer_prompt(const cq_query *q, const cq_hits *hits, size_t max_context_chars, size_t **shown);

cq_status cq_gen_answer_run(cq_decoder *d, const cq_query *q, const cq_hits *hits, const cq_gen_answer_options *opt,
                            cq_answer_text_fn on_text, void *user, cq_gen_answer *out, cq_err *err);
void cq_gen_answer_free(cq_gen_answer *g);

/* May span be quoted from hit h shown up to byte `shown`: a verbatim span of its flattened text that crosses no item
 * boundary and lies outside the items the question's terms rule out (see above; terms may be NULL)? */
bool cq_gen_answer_admits(const cq_hit *h, size_t shown, char *const *terms, size_t n_terms, const char *span);

/* The check an answer must pass to be used: non-empty and a verbatim span of the text of hits[clause]. */
bool cq_gen_answer_supported(const char *answer, const cq_hits *hits, size_t clause);

/* True when the answer only repeats the title of hits[clause]'s document: the title holds the answer (both as the eval format's norm() sees them:
 * folded, white space removed)
 * and the answer is at least 80 % of the title's characters. News-style notices often open with their headline,
 * which the copy-constrained decoder can quote; that is no answer to a question about the notice. */
bool cq_gen_answer_is_title(const char *answer, const cq_hits *hits, size_t clause);

/* True when the answer only repeats words of the question (both as norm() sees them; two characters or more):
 * "劳动合同期限三个月以上不满一年的，试用期不得超过多久？" → "三个月以上", "Is there a non-compete clause?" → "non".
 * Not for a question asking a name (简称, 缩写 …, name, title, called: "长张高速公路的简称是什么？" → "长张高速" is
 * right), nor for an answer with a capital letter: a name the question gives may answer it (CUAD's "Parties" →
 * "Sponsor", "ADAMS GOLF"; on cuad-dev's train part such answers lost as often as they gained). */
bool cq_gen_answer_in_question(const char *answer, const char *question);

/* The refusal phrase the prompt teaches, for the question's language. */
const char *cq_gen_answer_refusal(bool zh);

/* ---- the trained prompt, cq-prompt-v1 (docs/ANSWERS.md; `clauseqa prompt --jsonl` prints it) ---------------- */

#define CQ_PROMPT_ANSWER_PASSAGES 5
#define CQ_PROMPT_ANSWER_CHARS 800   /* passage text of an answer prompt, all passages together (code points) */
#define CQ_PROMPT_RELEVANCE_CHARS 400

typedef struct {
    const char *title; /* the document's title, or its name when it has none (NULL: "") */
    const char *label; /* the clause label (第十二条, 7.2) or NULL */
    const char *text;
} cq_prompt_passage;

cq_prompt_passage cq_prompt_passage_of(const cq_hit *h);

/* Task 1 (answer, also abstention) over the first passages of p[0..n), without <bos> (the tokenizer adds it).
 * shown (may be NULL) receives, for each of the n passages, the bytes of its text shown (0: not shown; malloc'd).
 * NULL when out of memory. The language is the question's (Chinese when it holds a Han character, as the query's
 * lang: cq_gen_answer_run takes that). */
char *cq_prompt_answer(const char *question, const cq_prompt_passage *p, size_t n, size_t **shown);
/* Task 3 (relevance) of one passage, its text cut to CQ_PROMPT_RELEVANCE_CHARS. */
char *cq_prompt_relevance(const char *question, const cq_prompt_passage *p);
/* The same for the analysed question, with the text cut to `chars` code points (at most CQ_PROMPT_RELEVANCE_CHARS,
 * as trained; 0: that). */
char *cq_prompt_relevance_cut(const cq_query *q, const cq_prompt_passage *p, size_t chars);
/* The first tokens of the relevance task's answer words (是/否, " yes"/" no") for the question's language. */
cq_status cq_prompt_relevance_ids(const cq_tokenizer *tok, bool zh, int32_t *yes, int32_t *no, cq_err *err);

#endif
