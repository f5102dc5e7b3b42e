/* The answer pipeline: question → retrieved clauses → an answer with citations, or an abstention.
 *
 * A clause the question names exactly (router hit) is recited (or the 款 asked for). Otherwise, with a decoder that
 * runs the trained adapter, the model answers and decides itself when the clauses do not answer the question (no
 * term-coverage rule: a long question is not a reason to abstain), a yes/no question with a verdict that cites the
 * first clause. Without the adapter, when the best clause covers too little of the question, the pipeline abstains
 * and says so; else, with a decoder, the answer is generated (app/generate_answer.h: a verbatim span of a
 * retrieved clause, checked, streamed as it is written; the model may also decline, which is an abstention), and
 * without one — or when the generated answer is empty or not supported by the clauses, which adds a notice — it is
 * extractive: the sentences of the best clause that cover the question's terms best. Every quote is a verbatim span
 * of its cited clause.
 *
 * Versions (app/answer_versions.c, store/versions.h). A question about a day ("2020年时…", as_of) is answered from
 * the version in force then and the answer starts by saying which ("依据2018年修正版（2018-10-26起施行）…"); every
 * answer says in version_notice when the version it cites is not the one in force, or when the cited clause changed
 * in the last CQ_ANSWER_RECENT_MONTHS months. A question comparing versions ("新旧版本第六十条有何不同？") is answered
 * from the clause-by-clause comparison of the two versions (search/compare.h). */
#ifndef CQ_APP_ANSWER_H
#define CQ_APP_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/generate_answer.h"
#include "decoder/decoder.h"
#include "core/error.h"
#include "search/compare.h"
#include "search/query.h"
#include "search/retrieve.h"
#include "store/store.h"

typedef struct {
    int64_t clause_id, doc_id;
    char *doc;    /* document name */
    char *clause; /* label or NULL */
    char *path;
    int page;     /* first page of the quote's clause, 0 when the document has no pages */
    char *quote;  /* verbatim span of the clause text */
    cq_version_status version; /* its document's version on the day asked about (store/versions.h) */
} cq_citation;

/* A question comparing two versions: the comparison and what the answer was about. */
typedef struct {
    cq_comparison cmp;          /* a: the older version, b: the newer */
    cq_version_status va, vb;   /* their versions */
    char *name_a, *name_b;      /* the documents' names */
    char *title_a, *title_b;    /* their titles (may be NULL) */
    char key[32];               /* the article asked about (its label key), "" for the whole regulation */
} cq_answer_compare;

/* A document a clause reference may mean, and the question asked of it (cq_answer.choices). */
typedef struct {
    char *document; /* what to call it (its title, else its name) */
    char *question; /* the question with the document named: "《中华人民共和国劳动法》第四十四条规定了什么？" */
} cq_answer_choice;

typedef struct {
    char *answer;
    bool abstained;
    cq_citation *citations;
    size_t n_citations;
    cq_hits hits;        /* the retrieved clauses the answer was built from */
    double coverage;     /* share of the question's terms found in the cited text */
    bool generated;      /* the answer was written by the decoder */
    const char *verdict; /* "yes" / "no" when the answer is the trained model's verdict on a yes/no question */
    bool forbidden;      /* the verdict is "no" because a clause forbids what the question asks leave for
                          * (cq_span_forbids), whatever the reader said; its quote is the forbidding sentence */
    char *notice;        /* why a generated answer was not used (then the answer is extractive or an abstention),
                          * or NULL */
    char *context;       /* a generated span: the sentence of its clause around it (flattened; "…" marks where a
                          * long sentence was cut), when that says more than the span; else NULL */
    int key_terms;       /* a generated answer: how many of the question's key terms its clause holds; -1: none */
    int key_terms_sentence; /* a generated span: how many the sentence around it holds (context); -1: none */
    int n_key_terms;     /* the question's key terms (search/query.h terms) */
    cq_answer_choice *choices; /* a clause the question names without its document that several documents have
                                * (search/query.h ambiguous): each of them, with the question naming it */
    size_t n_choices;
    char *version_notice; /* which version the answer rests on, when that matters (see above), or NULL */
    cq_date as_of;        /* the day the question asked about (its own date or the request's), 0: none */
    cq_answer_compare *compare; /* a question comparing versions: what was compared, or NULL */
    int prompt_tokens, tokens_generated;
    double confidence;   /* a generated answer's mean token probability (geometric), 0 when none was generated */
    double refusal_p;    /* the probability the decoder gave to refusing (generate_answer.h), 0 when not asked */
    double retrieve_ms;  /* stage timings */
    double answer_ms;
} cq_answer;

/* A cited clause that changed less than this many months ago gets a note (version_notice). */
#define CQ_ANSWER_RECENT_MONTHS 12

/* Below this geometric-mean token probability a generated answer is replaced by the extractive one: on the dev
 * suites (docs/EVAL.md) the answers under it were mostly wrong spans; 0.2-0.4 scored alike, 0.3 is the middle.
 * The base model's floor. A trained adapter carries its own, chosen on the dev suites' train parts for that adapter
 * (adapter.json "min_confidence", one number or {"zh": f, "en": f}; docs/ANSWERS.md, docs/EVAL.md "Issue 26: the
 * trained reader's confidence floor"; the Gemma adapter's: {"zh": 0.5}); an adapter that names none (or none for
 * the question's language) gets CQ_ANSWER_MIN_CONFIDENCE_TRAINED, -1: no floor (the Qwen adapter's answers were not
 * measured below any yet; in English the Gemma one's fallback mostly abstains). */
#define CQ_ANSWER_MIN_CONFIDENCE 0.3
#define CQ_ANSWER_MIN_CONFIDENCE_TRAINED (-1.0)
/* The confidence floor a question in language lang gets: caller (the option's, non-zero; negative: none) if given,
 * else with an adapter ai its floor for that language (adapter.json "min_confidence") or
 * CQ_ANSWER_MIN_CONFIDENCE_TRAINED when it names none, else (the base model, ai NULL) CQ_ANSWER_MIN_CONFIDENCE. */
double cq_answer_min_confidence(double caller, const cq_adapter_info *ai, cq_query_lang lang);
/* The trained model refuses only when it gives the refusal at least this probability. Chosen on the dev suites'
 * train parts (docs/EVAL.md, tools/decoder_train/refusal_threshold.py): the model's refusal separates unanswerable
 * questions only partly, so refusing whenever it is the likeliest start refused a third of the answerable ones;
 * at 0.9 false abstention stays under 5 % on every train part and the confident refusals remain. */
#define CQ_ANSWER_REFUSAL_MIN_P 0.9

/* The refusal threshold a question in language lang gets: caller (the option's, > 0) if given, else the adapter ai's
 * for that language (adapter.json "refusal_min_p", NULL: none loaded), else CQ_ANSWER_REFUSAL_MIN_P. */
double cq_answer_refusal_min_p(double caller, const cq_adapter_info *ai, cq_query_lang lang);
/* A generated answer cited from a clause that holds none of the question's key terms (its BM25 terms: question and
 * stop words removed, search/query.h) is a refusal candidate: it is refused unless the model's confidence (the mean
 * token probability) is at least this. Chosen on the dev suites (docs/EVAL.md, "Spans that keep their meaning"). */
#define CQ_ANSWER_KEYLESS_MIN_CONFIDENCE 0.8
/* The sentence shown around a short span (context) is cut to this many characters around it. */
#define CQ_ANSWER_CONTEXT_CHARS 160

/* The context of a generated span in its clause's text (cq_answer.context): the sentence around it (flattened,
 * "…" where cut), or NULL when the span is that whole sentence or is not in the text (or out of memory). A clause's
 * list is shown with the words that lead it in and as many whole items as fit in twice CQ_ANSWER_CONTEXT_CHARS:
 * after a span in the sentence that announces the items ("…按照下列标准支付…工资报酬：" — "怎么算" is answered by
 * the rates), and around a span in one of them when the question asks for several (哪些, 哪几, which, what are);
 * a span in one item otherwise gets the lead-in and its item ("… " for those left out). */
char *cq_answer_span_context(const char *text, const char *span, const char *question);
/* Reader passages pruned by rerank margin (issue 26, docs/EVAL.md "Issue 26: reader passages pruned by rerank
 * margin"): when the reranker judged the retrieved clauses, the reader may be shown only the first clause and the
 * judged ones whose relevance (cq_hit.relevance) is at most the margin below the first's, at most reader_max of
 * them. The default margin: negative, off (measured on the CPU with the Gemma reader: see that section). */
#define CQ_ANSWER_READER_MARGIN (-1.0)

typedef struct {
    cq_retrieve_options retrieve; /* how cq_answer_question retrieves (zeroed: the default, search/retrieve.h) */
    double min_coverage; /* abstain below this share of question terms in the best clause (default 0.25), unless
                          * the trained model answers */
    cq_decoder *decoder; /* generate answers with it; NULL: extractive answers */
    double min_confidence; /* a generated answer less likely than this falls back to the extractive one (0: the
                              default, cq_answer_min_confidence: the adapter's floor, CQ_ANSWER_MIN_CONFIDENCE
                              without one; negative: never) */
    double refusal_min_p;  /* the trained model may refuse only when it gives the refusal at least this probability
                              (default CQ_ANSWER_REFUSAL_MIN_P; above 1: never), generate_answer.h */
    double keyless_min_confidence; /* a generated answer whose clause holds none of the question's key terms is
                              refused below this confidence (default CQ_ANSWER_KEYLESS_MIN_CONFIDENCE; negative:
                              never) */
    double reader_margin;  /* the reader sees the first clause and the clauses the reranker judged at most this
                              below it (relevance; unjudged ones not) when the reranker ran (0: CLAUSEQA_READER_MARGIN
                              of the environment, else CQ_ANSWER_READER_MARGIN; negative: every clause, no pruning) */
    size_t reader_max;     /* with the reranker run, at most this many clauses for the reader (0:
                              CLAUSEQA_READER_MAX of the environment, else no cap) */
    cq_answer_text_fn on_text; /* generated answer text as it is written (may be NULL) */
    void *user;
} cq_answer_options;

/* Retrieves the clauses for q (parsed for its KB, search/query.h) and answers from them, with the version notes
 * above; a question comparing versions is answered from their comparison. */
cq_status cq_answer_question(cq_store *s, const cq_query *q, const cq_answer_options *opt, cq_answer *out,
                             cq_err *err);

/* The answer step alone, from clauses already retrieved for q: out takes ownership of *hits (left empty). q needs
 * no KB (its text, language and terms are read). */
cq_status cq_answer_from_hits(const cq_query *q, cq_hits *hits, const cq_answer_options *opt, cq_answer *out,
                              cq_err *err);
void cq_answer_free(cq_answer *a);

/* The clauses of h the reader is shown under opt's reader_margin and reader_max (resolved as above): their indices
 * into keep (room for h->n), in order; returns how many. Every clause when no clause was judged by the reranker,
 * or neither a margin nor a cap is set; else hits[0] always, then the judged clauses whose relevance is at least
 * the reference's minus the margin (the reference: hits[0]'s relevance, or the best judged one when hits[0] was not
 * judged), at most reader_max in all. */
size_t cq_answer_reader_passages(const cq_hits *h, const cq_answer_options *opt, size_t *keep);

/* Share of terms (a query's all_terms) that occur in text after folding; 0 when there are no terms. */
double cq_answer_coverage(char **terms, size_t n_terms, const char *text);

/* The quote when the reader's span only repeated the question's words or a document's title (the reader took the
 * question for answerable; the answer step quotes whatever the coverage): the best sentences for terms of the first
 * of hits' first three clauses whose best sentences are neither, malloc'd, its index into *clause; NULL when there is
 * none (or out of memory). CUAD's title clause ("Exhibit 10.27 MARKETING AFFILIATE AGREEMENT") ranks first for the
 * questions that name their contract: the clause after it is the one quoted. */
char *cq_answer_fallback_quote(const cq_query *q, const cq_hits *hits, char **terms, size_t n_terms, size_t *clause);

#endif
