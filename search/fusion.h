/* Fusing a retrieval's BM25 list and dense list into one ranking (search/retrieve.c), and the fusion the encoder's
 * weights carry (ssm.json "fusion", read when the dense retriever opens: search/vectors.h).
 *
 * Methods (docs/SSM.md "Vectors and retrieval"; tools/ssm_train/fusion.py `ranked()` is the reference):
 *   rrf   reciprocal-rank fusion: rank r (from 1) in either list adds 1 / (60 + r); ties: the smaller clause id
 *         first. The fusion used when the weights carry none.
 *   keep  BM25's top m stay where they are; after them the rest of BM25's list and the dense list are fused by RRF
 *         with the dense side weighted w: BM25 rank r adds 1 / (60 + r) (r counted in the whole BM25 list, kept
 *         clauses included), dense rank r adds w / (60 + r), and a kept clause is not scored again from the dense
 *         list. Ties: the clause met first, reading BM25's list and then the dense list. w 0: BM25's order (the
 *         dense list only fills places BM25 leaves empty, in its own order); m at least the BM25 list's length:
 *         BM25's list as it is, then the dense-only clauses by rank.
 * keep's w and m are fitted per language on questions the encoder never trained on (the calibration part,
 * tools/dev_split.py) and chosen by the question's language: zh when it holds a CJK ideograph (cq_utf8_has_cjk:
 * U+4E00–9FFF, extensions A–H, the compatibility ideographs, 〇), en otherwise (cq_query.lang, search/query.h).
 *
 * Every score is summed in the order written above, in doubles, so a ranking equals fusion.py's bit for bit
 * (tests/unit/test_index_fusion.c against rankings fusion.py made). */
#ifndef CQ_SEARCH_FUSION_H
#define CQ_SEARCH_FUSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum {
    CQ_FUSION_WEIGHTS = 0, /* as a retrieval option: what the dense retriever's weights say (rrf when nothing) */
    CQ_FUSION_RRF = 1,
    CQ_FUSION_KEEP = 2,
    CQ_FUSION_SCORE = 3, /* the lists' scores fused (search/fusion_score.c) */
} cq_fusion_method;

typedef enum {
    CQ_FUSION_NORM_MINMAX = 0, /* score: each list's scores to (x - min) / (max - min) */
    CQ_FUSION_NORM_Z = 1,      /* score: each list's scores to (x - mean) / sd */
} cq_fusion_norm;

#define CQ_FUSION_RRF_K 60.0      /* rank r of a list adds weight / (CQ_FUSION_RRF_K + r) */
#define CQ_FUSION_MAX_KEEP 1000000 /* m above this is refused as a typo (any m ≥ the list keeps it all) */

typedef struct {
    double w; /* the dense list's weight, finite, ≥ 0 (score: in 0..1, BM25's is 1 - w) */
    int m;    /* BM25's top m kept in place, ≥ 0 */
    double c; /* score: m is kept only when BM25 is confident, its first score leading its second by a relative
               * margin ≥ c (0: always) */
} cq_fusion_params;

typedef struct {
    cq_fusion_method method; /* CQ_FUSION_RRF, CQ_FUSION_KEEP or CQ_FUSION_SCORE */
    cq_fusion_norm norm;     /* score: how each list's scores are normalized */
    cq_fusion_params zh, en; /* keep, score: by the question's language */
    char fitted_on[512];     /* what the parameters were fitted on ("" when not said; longer is cut) */
} cq_fusion;

/* The fusion of an encoder's config, ssm.json's text[0..len): its "fusion" member, or rrf when it has none:
 *   "fusion": {"method": "keep", "fitted_on": "...", "zh": {"w": 0.1, "m": 2}, "en": {"w": 0, "m": 0}}
 *   "fusion": {"method": "score", "norm": "minmax", "zh": {"w": 0.3, "m": 1, "c": 0.1}, "en": {...}}
 * ("method": "rrf" needs nothing else; other members are ignored; "c" is optional, 0). A text that is not strict
 * JSON, an unknown method, a missing language, a w that is negative or not finite (score: not in 0..1), an m that is
 * not a whole number in 0..CQ_FUSION_MAX_KEEP, a negative c, a score fusion's norm that is not "minmax" or "z":
 * CQ_ERR_FORMAT naming what is wrong. */
cq_status cq_fusion_from_config(const char *text, size_t len, cq_fusion *out, cq_err *err);

/* "rrf", "keep", "score" or "weights" (the default: what the weights say) into *out; CQ_ERR_INVALID otherwise. */
cq_status cq_fusion_parse_method(const char *s, cq_fusion_method *out, cq_err *err);
const char *cq_fusion_method_name(cq_fusion_method m);

/* The parameters for a question: zh's when it is Chinese, en's otherwise. */
cq_fusion_params cq_fusion_params_for(const cq_fusion *f, bool chinese);

typedef struct {
    int64_t id;
    double score;    /* higher is better; a kept clause scores (1 + w) / 61 + 1 / (60 + r), above any fused one */
    bool from_dense; /* the dense list is where it ranks best (ties: BM25); kept clauses: false */
} cq_fused;

/* The index of id in ids[0..n), n when it is not there. */
size_t cq_fusion_index_of(const int64_t *ids, size_t n, int64_t id);
/* Insertion sort of f[0..n), best score first; equal scores by id (by_id) or in the order they are in (stable). n is
 * a few hundred at most. */
void cq_fusion_sort(cq_fused *f, size_t n, bool by_id);

/* Fuses bm25[0..nb) and dense[0..nd) (each best first) by method (CQ_FUSION_RRF or CQ_FUSION_KEEP, with p) into
 * out, which has room for nb + nd; returns how many clauses out holds. Retrieval's lists never hold a clause twice;
 * where one does, each place adds its share (a kept clause is kept at each of its places in the top m), as in
 * fusion.py. */
size_t cq_fusion_rank(cq_fusion_method method, cq_fusion_params p, const int64_t *bm25, size_t nb,
                      const int64_t *dense, size_t nd, cq_fused *out);

/* ---- score fusion (search/fusion_score.c; issue 27) -------------------------------------------------------------
 * The lists' scores, not their ranks: BM25's scores are first made non-increasing down its list (x_i = min(x_i,
 * x_{i-1}): the documents a question names come first, and their clauses may score below later ones), then each
 * list's scores are normalized per question (norm), a clause absent from a list takes that list's lowest normalized
 * score, and fused = (1 - w) * bm25 + w * dense. When m > 0 and BM25 is confident ((s1 - s2) / max(|s1|, 1e-9) ≥ c
 * over its made-monotone scores; a list of one is confident), BM25's top m stay in place first. Ties: the clause met
 * first, reading BM25's list then the dense list. Sums run in list order in doubles, no fused multiply-add, so the
 * ranking equals `ranked_score()` of tools/ssm_train/fusion.py (tests/unit/fusion_score_vs_py.py). Retrieval reads
 * BM25 CQ_FUSION_SCORE_DEPTH deep when it fuses by score (the depth the fit read). */
#define CQ_FUSION_SCORE_DEPTH 50

/* Fuses bm25[0..nb) with its scores bs and dense[0..nd) with its scores ds (cosines) into out (room for nb + nd),
 * *n_out clauses. Scores never rise down out: a kept clause scores above every fused one. CQ_ERR_NOMEM only. */
cq_status cq_fusion_rank_scores(cq_fusion_norm norm, cq_fusion_params p, const int64_t *bm25, const double *bs,
                                size_t nb, const int64_t *dense, const double *ds, size_t nd, cq_fused *out,
                                size_t *n_out, cq_err *err);

/* How many of BM25's clauses the score fusion keeps in place first for these lists (0 when m is 0 or BM25 is not
 * confident): the first ones of cq_fusion_rank_scores' output. */
size_t cq_fusion_score_kept(cq_fusion_params p, const int64_t *bm25, const double *bs, size_t nb);

const char *cq_fusion_norm_name(cq_fusion_norm n);

#endif
