/* Reranking retrieved clauses with the trained decoder's relevance judgement (docs/ANSWERS.md, cq-prompt-v1 task 3):
 * the reranker of retrieval mode `rerank` (search/retrieve.h, cq_retrieve_options).
 *
 * Each candidate clause becomes one relevance prompt (question and the clause, cut to 400 characters); its score is
 * logit(yes) - logit(no) at the prompt's last position, the first tokens of 是/否 (Chinese questions) or " yes"/
 * " no". The candidates go to the decoder `batch` prompts a call (cq_decoder_score_prompts: one packed batched
 * prefill on the GPU, one prompt after another on the CPU). Retrieval sorts by the scores; router hits (exact
 * clause references) stay first and are never scored. */
#ifndef CQ_APP_RERANK_H
#define CQ_APP_RERANK_H

#include <stddef.h>

#include "decoder/decoder.h"
#include "core/error.h"
#include "search/retrieve.h"

/* Candidates rescored when the caller does not say: the GPU scores twenty in one packed prefill in about the time
 * of a short answer; on the CPU each prompt costs a prefill of a few hundred tokens (docs/PERF.md). */
#define CQ_RERANK_TOP_N_GPU 20
#define CQ_RERANK_TOP_N_CPU 3

typedef struct {
    cq_decoder *decoder; /* with its trained adapter; borrowed */
    size_t batch;        /* prompts per decoder call (0: all at once) */
    /* A cheaper first stage (docs/EVAL.md says what each costs in hit@5; off when 0):
     * chars: each candidate's text cut to this many code points in its relevance prompt (0: CQ_PROMPT_RELEVANCE_CHARS);
     * sure_margin, sure_top_n: when the first candidate's score leads the second's by at least sure_margin of the
     * first's (fused scores, BM25's without dense), only the first sure_top_n candidates are scored; the others keep
     * their order after them. */
    size_t chars;
    double sure_margin;
    size_t sure_top_n;
    /* Keep retrieval's document (issue 26, docs/EVAL.md): the candidates of the first candidate's document (retrieval's
     * top-1 after the router hits) come first, in the reranker's order, then the others in its order. The reranker
     * judges a clause by its content alone: on contracts-en-dev, where the question names its contract, it moved a
     * similar clause of another contract to the top. 1 on, 2 only the first place (that document's best candidate
     * first, everything else in the reranker's order), 3 as 2 when retrieval's document leads (cq_rerank_doc_leads)
     * and plain reranking otherwise, -1 off, 0: the environment's CLAUSEQA_RERANK_KEEP_DOC (0/1/2/3) or else
     * CQ_RERANK_KEEP_DOC_DEFAULT (cq_rerank_attach resolves it). */
    int keep_doc;
} cq_reranker;

/* 3 (docs/EVAL.md, issue 26: on the GPU with the Qwen reader, the only variant at or above both router,bm25 and plain
 * reranking in hit@1 and hit@5 on every dev suite's validation part) */
#define CQ_RERANK_KEEP_DOC_DEFAULT 3
/* Retrieval's document leads when its first candidate's score is at least this share of it above the best score of
 * another document's candidate among the first three (or when the first three are all its own). Measured on the
 * validation parts with the Qwen reader: any of 0.15-0.3 keeps every suite at or above both orders; 0.1 loses
 * policy-zh-dev's hit@1, 0 (keep-doc 2) loses cjrc-dev's, where questions name no document and judgments look
 * alike. */
#define CQ_RERANK_KEEP_DOC_LEAD 0.2

/* Whether hits[0]'s document leads the first candidates by lead (CQ_RERANK_KEEP_DOC_LEAD): false when hits[0]'s
 * score is not positive. */
bool cq_rerank_doc_leads(const cq_hit *hits, size_t n, double lead);

/* keep-doc's order as scores: lowers scores[i] of the candidates outside hits[0]'s document (doc_id) below every
 * score of that document's candidates (theirs stay as they are), keeping the order within each group: a stable
 * sort by the result is the keep-doc order. first_only: only that document's best-scored candidate is raised, to
 * the first place. */
void cq_rerank_keep_doc(const cq_hit *hits, size_t n, double *scores, bool first_only);

/* A cq_rerank_fn: scores[i] = the relevance score of hits[i] for q, moved by keep-doc where it applies; relevance[i]
 * (relevance may be NULL) = the relevance score itself, for the candidates scored (the others' left as they are).
 * ctx is a cq_reranker. CQ_ERR_UNSUPPORTED when the decoder runs no trained adapter (a base model's yes/no says
 * nothing). */
cq_status cq_rerank_score(void *ctx, const cq_query *q, const cq_hit *hits, size_t n, double *scores, double *relevance,
                          cq_err *err);

/* Makes r (decoder d) the reranker of o when d runs a trained adapter: o->rerank, o->rerank_ctx, and
 * o->rerank_top_n when it is 0 (CQ_RERANK_TOP_N_GPU or _CPU by d's device). Leaves o as it is otherwise, so a
 * retrieval asking for mode rerank then fails with the reason. r must outlive the retrievals.
 * mode_defaulted: the caller's modes are the default (the user chose none); then, on the GPU, every question is
 * reranked by default (o->rerank_default): on the dev suites' validation parts reranking with keep-doc 3 (the
 * default) lifted hit@1 on every suite, Chinese and English, and costs ~25 ms on the GPU against seconds on the CPU
 * (docs/EVAL.md, docs/PERF.md). Until keep-doc, English questions were not reranked: the reranker crossed documents
 * on contracts-en-dev. r->keep_doc 0 is resolved here (CLAUSEQA_RERANK_KEEP_DOC, else the default). */
void cq_rerank_attach(cq_retrieve_options *o, cq_reranker *r, cq_decoder *d, bool mode_defaulted);

#endif
