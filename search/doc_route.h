/* Document routing (issue 27, item 3): a question's nearest documents, found by document vectors in the encoder's
 * space, are preferred by clause retrieval. Off by default; a trained student's fit turns it on (docs/SSM.md,
 * "Document routing").
 *
 *   vectors   a document's vector is the one its encoder's document head made at ingest (store/vectors.h doc_vectors,
 *             the weights' model and head: cq_ssm_model_doc_head_id); a document without one (ingested before the
 *             head, or weights without a head) gets the normalized mean of its stored clause vectors instead
 *   methods   "search" (the one the teacher's measurement found worth having, docs/EVAL.md "Issue 27: document
 *             routing"): the R documents of the KB nearest the question (the KB's stored document vectors, and the
 *             dense list's documents without one) are routed, and inside the dense search every clause of a routed
 *             document gets + BETA on its cosine, those the nearest-k search had not found joining as candidates;
 *             the list is cut to the same depth again before the fusion.
 *             "prior": after the fusion, the fused candidates' documents only; + BETA on the fused score of the
 *             clauses of the R nearest of them (BM25's kept clauses stay first), then sorted again: the same clauses
 *   setting   ssm.json "doc_route": {"method": "search"|"prior", "zh": {"top": R, "beta": B}, "en": {...},
 *             "fitted_on": "..."} (per question language, as the fusion; top 0 or beta 0: off for it), read with
 *             the weights; CLAUSEQA_DOC_ROUTE overrides it: "off", "R,BETA" (prior), "prior:R,BETA" or
 *             "search:R,BETA" (both languages)
 *
 * The pieces here are pure where they can be (synthetic vectors in tests/unit/test_index_doc_route.c); the store gives
 * the clauses' documents and the documents' vectors (store/vectors.h), on SQLite and PostgreSQL alike. */
#ifndef CQ_INDEX_DOC_ROUTE_H
#define CQ_INDEX_DOC_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "search/fusion.h"

typedef struct cq_store cq_store;

#define CQ_DOC_ROUTE_MAX_TOP 1000

/* One language's setting. */
typedef struct {
    size_t top;  /* documents routed to; 0: routing off */
    double beta; /* added to their clauses' scores, finite, ≥ 0 (0: routing off) */
} cq_doc_route;

typedef enum { CQ_DOC_ROUTE_PRIOR = 0, CQ_DOC_ROUTE_SEARCH = 1 } cq_doc_route_method;

/* The whole setting. */
typedef struct {
    cq_doc_route_method method;
    cq_doc_route zh, en;  /* by the question's language (cq_query.lang), as the fusion */
    char source[24];      /* "ssm.json", "CLAUSEQA_DOC_ROUTE" or "" (off) */
    char fitted_on[256];  /* ssm.json's "fitted_on", when it says */
} cq_doc_routing;

/* "off" / "" / NULL → off; "R,BETA" (R in 1..CQ_DOC_ROUTE_MAX_TOP, BETA finite ≥ 0) → on. CQ_ERR_INVALID saying
 * what is wrong otherwise. */
cq_status cq_doc_route_parse(const char *value, cq_doc_route *out, cq_err *err);

/* ssm.json's "doc_route" (text: the whole file, strict JSON) into out; off when absent. CQ_ERR_FORMAT naming the
 * member when it is wrong. */
cq_status cq_doc_routing_from_config(const char *text, size_t len, cq_doc_routing *out, cq_err *err);
/* CLAUSEQA_DOC_ROUTE's value over *r: NULL or "" leaves it; "off" turns it off; "[prior:|search:]R,BETA" sets both
 * languages. CQ_ERR_INVALID saying what is wrong otherwise (*r unchanged). */
cq_status cq_doc_routing_env(const char *value, cq_doc_routing *r, cq_err *err);
/* The setting for a question (chinese: cq_query.lang is Chinese); NULL when routing is off for it. */
const cq_doc_route *cq_doc_routing_for(const cq_doc_routing *r, bool chinese);
const char *cq_doc_route_method_name(cq_doc_route_method m);

/* The top documents of doc_ids[0..n) (their vectors vecs, n × dim, row-major) by inner product with q, best
 * first, ties to the smaller document id; returns how many were written to out (min(top, n)). */
size_t cq_doc_route_top(const float *vecs, const int64_t *doc_ids, size_t n, int dim, const float *q, size_t top,
                        int64_t *out);

/* The prior on a fused list f[0..n) (best first; f[0..kept) stay in place): every clause i ≥ kept whose document
 * doc_of[i] is one of routed[0..n_routed) gets beta added to its score; f[kept..n) is sorted again by score,
 * ties in the order they were (stable). doc_of is permuted with f. */
void cq_doc_route_prefer(cq_fused *f, int64_t *doc_of, size_t n, size_t kept, const int64_t *routed,
                         size_t n_routed, double beta);

/* The KBs' stored document vectors kept between questions: one entry a (KB, model, head), used while the store's
 * cq_store_doc_vectors_stamp is what it was when read (one indexed count a question instead of every vector); safe
 * from several threads. NULL wherever a cache is taken: read every time. */
typedef struct cq_doc_route_cache cq_doc_route_cache;
cq_doc_route_cache *cq_doc_route_cache_new(void);
void cq_doc_route_cache_free(cq_doc_route_cache *c);
/* How many times the cache has read a KB's vectors from the store (tests). */
size_t cq_doc_route_cache_reads(cq_doc_route_cache *c);

/* The prior on a fused list f[0..n) (f[0..kept) BM25's kept clauses) of KB kb_id for the question vector q (dim,
 * the encoder model's; head: its document head's id, "" without): the candidates' documents, their vectors (stored,
 * else means), the top r->top of them, the prior. Nothing when r->top or r->beta is 0. */
cq_status cq_doc_route_apply(const cq_doc_route *r, cq_doc_route_cache *cache, cq_store *s, int64_t kb_id,
                             const char *model, const char *head, int dim, const float *q, cq_fused *f, size_t n,
                             size_t kept, cq_err *err);

/* The routed dense search: the dense list ids[0..*n), cos[0..*n) (best first, room for cap) of KB kb_id becomes the
 * first cap of (that list ∪ every clause of the top r->top documents), each scored by its cosine + r->beta when its
 * document is routed; ties to the clause met first (the list's, then the routed documents' in their rank order,
 * clause ids ascending in each).
 * The documents are ranked among the KB's stored document vectors and the list's documents without one (their
 * means). Nothing when r->top or r->beta is 0. */
cq_status cq_doc_route_search(const cq_doc_route *r, cq_doc_route_cache *cache, cq_store *s, int64_t kb_id,
                              const char *model, const char *head, int dim, const float *q, int64_t *ids, float *cos,
                              size_t *n, size_t cap, cq_err *err);

#endif
