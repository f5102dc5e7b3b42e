/* Retrieval: ranked clauses for a question (a cq_query, search/query.h).
 *
 * Retrievers, chosen by the modes of cq_retrieve_options:
 *   router  exact clause references (search/router.h): 《X条例》第十二条, Article 5, Section 7.2
 *   bm25    FTS5 full-text ranking with the cjk tokenizer over the clauses' title, path and body columns; when the
 *           question names documents (title match), their clauses are ranked first, then the whole KB; a local
 *           regulation the question does not place is lowered (LOCAL_PRIOR in retrieve.c)
 *   dense   nearest clauses by SSM encoder vectors (search/vectors.h): needs the dense retriever in the options
 * Fusion: router hits first (they are exact), then the BM25 list; with dense, the BM25 and dense lists after the
 * router hits are fused (search/fusion.h): by reciprocal rank, or, when the encoder's weights carry a fitted "keep"
 * fusion (or the options ask for one), BM25's top m in place and the rest by reciprocal rank with the dense list
 * weighted w, m and w by the question's language. Duplicates keep their best place.
 * Reranking (mode rerank, after fusion): the options' reranker (the trained decoder's relevance judgement,
 * app/rerank.h) rescores the first rerank_top_n hits after the router hits and they are put in its order (see
 * cq_retrieve_options).
 * Versions (store/versions.h): among the documents the router looks in, and among the hits of one regulation's
 * versions, the version meant for the query's day (q->as_of, else today; q->version_year) comes first, the other
 * versions keep their places after it; every hit carries its document's version status on that day.
 *
 * Every retriever is passed in the options: nothing rides on the store connection. */
#ifndef CQ_SEARCH_RETRIEVE_H
#define CQ_SEARCH_RETRIEVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "search/fusion.h"
#include "search/query.h"
#include "store/store.h"
#include "store/versions.h"

enum {
    CQ_RETRIEVE_ROUTER = 1,
    CQ_RETRIEVE_BM25 = 2,
    CQ_RETRIEVE_DENSE = 4,
    CQ_RETRIEVE_HYBRID = CQ_RETRIEVE_ROUTER | CQ_RETRIEVE_BM25,
    CQ_RETRIEVE_RERANK = 8, /* the last stage: the options' reranker rescores the fused candidates */
};

/* The default retrieval (what --mode and the API's "mode" mean when left out) and its name; one is the parse of
 * the other (a unit test holds them together). Dense joins the default once it beats BM25 (docs/EVAL.md). */
#define CQ_RETRIEVE_DEFAULT_MODES CQ_RETRIEVE_HYBRID
#define CQ_RETRIEVE_DEFAULT_MODE "hybrid"
#define CQ_RETRIEVE_DEFAULT_K 5   /* clauses retrieved when k is left out */
#define CQ_RETRIEVE_MAX_K 200     /* larger k are cut to this */

/* Parses "router,bm25" / "hybrid" / "bm25" / "router,bm25,rerank" into a mode mask (NULL: CQ_RETRIEVE_DEFAULT_MODES); 0 with a message in
 * err when invalid. */
int cq_retrieve_parse_mode(const char *s, cq_err *err);
/* "router", "bm25" or "dense": the name of a hit's source (as JSON and the CLI print it). */
const char *cq_retrieve_source_name(int source);

typedef struct {
    int64_t clause_id, doc_id;
    char *doc_name;   /* document name (file name without extension) */
    char *doc_title;  /* title or NULL */
    char *label;      /* "第十二条" or NULL */
    char *path;       /* heading path */
    char *text;       /* clause text */
    int page_first, page_last; /* 0 for documents without pages */
    double score;     /* higher is better; router hits score 1000; a reranker's score when it reordered the hit */
    bool reranked;    /* the reranker judged this hit (mode rerank): relevance holds its judgement */
    double relevance; /* the reranker's own relevance score of the hit, before any ordering rule (keep-doc) moved
                       * it: what the answer step's passage pruning compares (app/answer.h); 0 when not reranked */
    int source;       /* CQ_RETRIEVE_ROUTER, CQ_RETRIEVE_BM25 or CQ_RETRIEVE_DENSE: the list it came from */
    int paragraph;    /* 款 the question named (router), 0 none */
    int item;         /* 项 the question named with it (router), 0 none */
    cq_store_box *boxes;
    size_t n_boxes;
    cq_version_status version; /* its document's version on the day asked about (state unknown when never
                                  analysed, store/versions.h) */
} cq_hit;

typedef struct {
    cq_hit *hits;
    size_t n;
    int n_query_terms; /* distinct BM25 terms used */
} cq_hits;

typedef struct cq_dense cq_dense; /* search/vectors.h */

/* A reranker: scores hits[0..n) for the question into scores[0..n) (higher is better: the order they are put in),
 * and into relevance[0..n) its own judgement of each hit, before any rule that orders them otherwise (NAN, as the
 * caller fills it, for a hit it did not judge). Returns an error code to fail the retrieval. Called on the
 * retrieval's thread with the caller's store connection idle. */
typedef cq_status (*cq_rerank_fn)(void *ctx, const cq_query *q, const cq_hit *hits, size_t n, double *scores,
                                  double *relevance, cq_err *err);

/* How to retrieve. A zeroed struct (or NULL) is the default: router + BM25, 5 clauses, no dense, no reranking. */
typedef struct {
    int modes;       /* CQ_RETRIEVE_* mask; 0: CQ_RETRIEVE_DEFAULT_MODES */
    size_t k;        /* clauses wanted; 0: CQ_RETRIEVE_DEFAULT_K; at most CQ_RETRIEVE_MAX_K */
    cq_dense *dense; /* the dense retriever (search/vectors.h) CQ_RETRIEVE_DENSE searches; borrowed. NULL with
                        CQ_RETRIEVE_DENSE asked for: CQ_ERR_UNSUPPORTED with the reason */
    /* Reranking, the last stage, when the modes hold CQ_RETRIEVE_RERANK (rerank NULL then: CQ_ERR_UNSUPPORTED with
     * the reason; a reranker given without the mode is not used): max(k, rerank_top_n) candidates (rerank_top_n 0: k; at most
     * CQ_RETRIEVE_MAX_K) are fused; the candidates after the router hits, at most rerank_top_n of them, are
     * rescored by rerank(rerank_ctx, ...) and sorted by that score (ties keep the fused order); then the list is
     * cut to k. Router hits stay first and are not rescored. */
    cq_rerank_fn rerank;
    void *rerank_ctx;
    size_t rerank_top_n;
    /* How the BM25 and dense lists are fused when both are asked for (search/fusion.h): CQ_FUSION_WEIGHTS (0, the
     * default) as the dense retriever's weights say (their ssm.json "fusion"; reciprocal rank when they say
     * nothing), CQ_FUSION_RRF reciprocal rank whatever they say, CQ_FUSION_KEEP the weights' fitted keep fusion
     * (CQ_ERR_UNSUPPORTED when they carry none). */
    cq_fusion_method fusion;
    bool rerank_default; /* with rerank set, rerank every question even without CQ_RETRIEVE_RERANK in the modes:
                            what callers set when the modes were left to the default and reranking is cheap (the
                            GPU); docs/EVAL.md says where reranking wins */
} cq_retrieve_options;

/* The clauses of KB q->kb_id (q parsed with a store) that answer q, best first, at most k. */
cq_status cq_retrieve(cq_store *s, const cq_query *q, const cq_retrieve_options *opt, cq_hits *out, cq_err *err);
void cq_hits_free(cq_hits *h);
/* Keeps the first k hits, freeing the others. */
void cq_hits_truncate(cq_hits *h, size_t k);

#endif
