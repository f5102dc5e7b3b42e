/* Document routing (issue 27, item 3): a question's nearest documents, found by document vectors in the encoder's
 * space, are preferred by clause retrieval — a prior on the fused list, not a filter. Off by default: with the
 * teacher it gave nothing on the fused ranking (docs/EVAL.md, "Issue 27: document routing"), so it waits for a
 * student whose document vectors earn it.
 *
 *   setting   CLAUSEQA_DOC_ROUTE = "off" (the default) or "R,BETA": the R nearest documents among the candidates'
 *             documents; BETA added to the fused score of each of their clauses (after BM25's kept clauses, which
 *             stay where they are), then the list is sorted again (ties keep the fused order)
 *   vectors   a document's vector is the normalized mean of its stored clause vectors (clause_vectors, the
 *             encoder's model; what tools/teacher/doc_routing.py calls "mean"); the trained document head
 *             (train.py --doc-head, doc_head.safetensors) will replace it once the runtime reads it
 *
 * The pieces here are pure (synthetic vectors in tests/unit/test_index_doc_route.c); the store gives the clauses'
 * documents and the documents' vectors (store/vectors.h cq_store_clause_docs, cq_store_doc_vector_means), on SQLite
 * and PostgreSQL alike. */
#ifndef CQ_INDEX_DOC_ROUTE_H
#define CQ_INDEX_DOC_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "search/fusion.h"

typedef struct cq_store cq_store;

#define CQ_DOC_ROUTE_MAX_TOP 1000

typedef struct {
    size_t top;  /* documents routed to; 0: routing off */
    double beta; /* added to the fused score of their clauses, finite, ≥ 0 */
} cq_doc_route;

/* "off" / "" / NULL → off; "R,BETA" (R in 1..CQ_DOC_ROUTE_MAX_TOP, BETA finite ≥ 0) → on. CQ_ERR_INVALID saying
 * what is wrong otherwise. */
cq_status cq_doc_route_parse(const char *value, cq_doc_route *out, cq_err *err);

/* The top documents of doc_ids[0..n) (their vectors vecs, n × dim, row-major) by inner product with q, best
 * first, ties to the smaller document id; returns how many were written to out (min(top, n)). */
size_t cq_doc_route_top(const float *vecs, const int64_t *doc_ids, size_t n, int dim, const float *q, size_t top,
                        int64_t *out);

/* The prior on a fused list f[0..n) (best first; f[0..kept) stay in place): every clause i ≥ kept whose document
 * doc_of[i] is one of routed[0..n_routed) gets beta added to its score; f[kept..n) is sorted again by score,
 * ties in the order they were (stable). doc_of is permuted with f. */
void cq_doc_route_prefer(cq_fused *f, int64_t *doc_of, size_t n, size_t kept, const int64_t *routed,
                         size_t n_routed, double beta);

/* Routing on a fused list f[0..n) (f[0..kept) BM25's kept clauses) for the question vector q (dim, the encoder
 * model's): the candidates' documents, their vectors, the top r->top of them, the prior. Nothing when r->top is
 * 0. */
cq_status cq_doc_route_apply(const cq_doc_route *r, cq_store *s, const char *model, int dim, const float *q,
                             cq_fused *f, size_t n, size_t kept, cq_err *err);

#endif
