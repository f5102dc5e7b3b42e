/* Score fusion of BM25 and dense (search/fusion.h, "score fusion"; issue 27). Compiled with -ffp-contract=off
 * (search/CMakeLists.txt): (1 - w) * b + w * d must not become a fused multiply-add, or rankings would differ from
 * tools/ssm_train/fusion.py's ranked_score() in the last bit of equal-looking scores. */
#include "search/fusion.h"

#include <math.h>
#include <stdlib.h>

/* ---- ranking ------------------------------------------------------------------------------------------------ */

/* x[0..n) normalized in place (fusion.py normalized()). */
static void normalize(double *x, size_t n, cq_fusion_norm norm) {
    if (!n) return;
    if (norm == CQ_FUSION_NORM_MINMAX) {
        double lo = x[0], hi = x[0];
        for (size_t i = 1; i < n; i++) {
            if (x[i] < lo) lo = x[i];
            if (x[i] > hi) hi = x[i];
        }
        for (size_t i = 0; i < n; i++) x[i] = hi > lo ? (x[i] - lo) / (hi - lo) : 1.0;
        return;
    }
    double total = 0.0, var = 0.0;
    for (size_t i = 0; i < n; i++) total += x[i];
    const double mean = total / (double)n;
    for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    const double sd = sqrt(var / (double)n);
    for (size_t i = 0; i < n; i++) x[i] = sd > 0 ? (x[i] - mean) / sd : 0.0;
}

size_t cq_fusion_score_kept(cq_fusion_params p, const int64_t *bm25, const double *bs, size_t nb) {
    if (p.m <= 0 || !nb) return 0;
    double b0 = bs[0], b1 = nb > 1 ? (bs[1] >= b0 ? b0 : bs[1]) : 0.0;
    const double conf = nb < 2 ? 1.0 : (b0 - b1) / fmax(fabs(b0), 1e-9);
    if (!(conf >= p.c)) return 0;
    size_t kept = 0;
    for (size_t i = 0; i < nb && i < (size_t)p.m; i++) kept += cq_fusion_index_of(bm25, i, bm25[i]) == i;
    return kept;
}

cq_status cq_fusion_rank_scores(cq_fusion_norm norm, cq_fusion_params p, const int64_t *bm25, const double *bs,
                                size_t nb, const int64_t *dense, const double *ds, size_t nd, cq_fused *out,
                                size_t *n_out, cq_err *err) {
    *n_out = 0;
    double *b = malloc((nb + nd + 1) * sizeof *b), *d = b ? b + nb : NULL;
    if (!b) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nb; i++) b[i] = i && bs[i] >= b[i - 1] ? b[i - 1] : bs[i]; /* non-increasing */
    for (size_t i = 0; i < nd; i++) d[i] = ds[i];
    normalize(b, nb, norm);
    normalize(d, nd, norm);
    const double low_b = nb ? b[nb - 1] : 0.0, low_d = nd ? d[nd - 1] : 0.0;
    /* BM25's top m when it is confident (a clause twice in them kept once) */
    const size_t kept = cq_fusion_score_kept(p, bm25, bs, nb);
    size_t n = 0;
    for (size_t i = 0; n < kept; i++)
        if (cq_fusion_index_of(bm25, i, bm25[i]) == i) out[n++] = (cq_fused){bm25[i], 0.0, false};
    /* every other clause once, in the order met: BM25's list, then the dense list; its first place in each */
    for (size_t i = 0; i < nb + nd; i++) {
        const int64_t id = i < nb ? bm25[i] : dense[i - nb];
        if (cq_fusion_index_of(bm25, i < nb ? i : nb, id) < (i < nb ? i : nb)) continue; /* met in BM25's list before */
        if (i >= nb && cq_fusion_index_of(dense, i - nb, id) < i - nb) continue;           /* met in the dense list before */
        bool is_kept = false;
        for (size_t j = 0; j < kept && !is_kept; j++) is_kept = out[j].id == id;
        if (is_kept) continue;
        const size_t rb = cq_fusion_index_of(bm25, nb, id), rd = cq_fusion_index_of(dense, nd, id);
        const double xb = rb < nb ? b[rb] : low_b, xd = rd < nd ? d[rd] : low_d;
        out[n++] = (cq_fused){id, (1.0 - p.w) * xb + p.w * xd, rd < rb};
    }
    cq_fusion_sort(out + kept, n - kept, false); /* the fused ones by score, ties in the order met */
    const double top = n > kept ? out[kept].score : 0.0;
    for (size_t i = 0; i < kept; i++) out[i].score = top + (double)(kept - i);
    free(b);
    *n_out = n;
    return CQ_OK;
}
