/* Document routing (search/doc_route.h; issue 27). */
#include "search/doc_route.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/vectors.h"

cq_status cq_doc_route_parse(const char *value, cq_doc_route *out, cq_err *err) {
    *out = (cq_doc_route){0, 0.0};
    if (!value || !*value || !strcmp(value, "off")) return CQ_OK;
    char *end = NULL;
    errno = 0;
    long long top = strtoll(value, &end, 10);
    if (end == value || *end != ',' || errno || top < 1 || top > CQ_DOC_ROUTE_MAX_TOP)
        return cq_err_set(err, CQ_ERR_INVALID, "document routing '%s': use off or R,BETA with R (documents) in "
                          "1..%d", value, CQ_DOC_ROUTE_MAX_TOP);
    const char *b = end + 1;
    errno = 0;
    double beta = strtod(b, &end);
    if (end == b || *end || errno || !isfinite(beta) || beta < 0)
        return cq_err_set(err, CQ_ERR_INVALID, "document routing '%s': BETA (added to the routed documents' "
                          "clauses) must be a finite number ≥ 0", value);
    *out = (cq_doc_route){(size_t)top, beta};
    return CQ_OK;
}

size_t cq_doc_route_top(const float *vecs, const int64_t *doc_ids, size_t n, int dim, const float *q, size_t top,
                        int64_t *out) {
    if (top > n) top = n;
    double *best = top ? malloc(top * sizeof *best) : NULL;
    if (top && !best) return 0;
    size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < dim; j++) s += (double)vecs[i * (size_t)dim + (size_t)j] * (double)q[j];
        /* insertion into the top list: better score first, equal scores the smaller id first */
        size_t at = have;
        while (at > 0 && (best[at - 1] < s || (best[at - 1] == s && out[at - 1] > doc_ids[i]))) at--;
        if (at >= top) continue;
        size_t last = have < top ? have : top - 1;
        for (size_t k = last; k > at; k--) {
            best[k] = best[k - 1];
            out[k] = out[k - 1];
        }
        best[at] = s;
        out[at] = doc_ids[i];
        if (have < top) have++;
    }
    free(best);
    return have;
}

void cq_doc_route_prefer(cq_fused *f, int64_t *doc_of, size_t n, size_t kept, const int64_t *routed,
                         size_t n_routed, double beta) {
    if (kept > n) kept = n;
    for (size_t i = kept; i < n; i++)
        for (size_t r = 0; r < n_routed; r++)
            if (doc_of[i] == routed[r]) {
                f[i].score += beta;
                break;
            }
    for (size_t i = kept + 1; i < n; i++) { /* stable insertion sort: the fused list is a hundred clauses at most */
        cq_fused x = f[i];
        int64_t d = doc_of[i];
        size_t j = i;
        while (j > kept && f[j - 1].score < x.score) {
            f[j] = f[j - 1];
            doc_of[j] = doc_of[j - 1];
            j--;
        }
        f[j] = x;
        doc_of[j] = d;
    }
}

cq_status cq_doc_route_apply(const cq_doc_route *r, cq_store *s, const char *model, int dim, const float *q,
                             cq_fused *f, size_t n, size_t kept, cq_err *err) {
    if (!r->top || n <= kept) return CQ_OK;
    int64_t *doc_of = malloc(n * sizeof *doc_of), *docs = malloc(n * sizeof *docs), *routed = NULL;
    float *vecs = malloc(n * (size_t)dim * sizeof *vecs);
    cq_status rc = doc_of && docs && vecs ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) docs[i] = f[i].id;
    if (!rc) rc = cq_store_clause_docs(s, docs, n, doc_of, err);
    size_t nd = 0; /* the candidates' documents, each once */
    for (size_t i = 0; !rc && i < n; i++) {
        size_t j = 0;
        while (j < nd && docs[j] != doc_of[i]) j++;
        if (j == nd && doc_of[i] >= 0) docs[nd++] = doc_of[i];
    }
    if (!rc) rc = cq_store_doc_vector_means(s, model, dim, docs, nd, vecs, err);
    if (!rc && !(routed = malloc((r->top < nd ? r->top : nd) * sizeof *routed + 1)))
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) {
        size_t nr = cq_doc_route_top(vecs, docs, nd, dim, q, r->top, routed);
        cq_doc_route_prefer(f, doc_of, n, kept, routed, nr, r->beta);
    }
    free(routed);
    free(vecs);
    free(docs);
    free(doc_of);
    return rc;
}
