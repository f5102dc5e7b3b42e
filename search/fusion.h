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
} cq_fusion_method;

#define CQ_FUSION_RRF_K 60.0      /* rank r of a list adds weight / (CQ_FUSION_RRF_K + r) */
#define CQ_FUSION_MAX_KEEP 1000000 /* m above this is refused as a typo (any m ≥ the list keeps it all) */

typedef struct {
    double w; /* the dense list's weight, finite, ≥ 0 */
    int m;    /* BM25's top m kept in place, ≥ 0 */
} cq_fusion_params;

typedef struct {
    cq_fusion_method method; /* CQ_FUSION_RRF or CQ_FUSION_KEEP */
    cq_fusion_params zh, en; /* keep: by the question's language */
    char fitted_on[512];     /* what the parameters were fitted on ("" when not said; longer is cut) */
} cq_fusion;

/* The fusion of an encoder's config, ssm.json's text[0..len): its "fusion" member, or rrf when it has none:
 *   "fusion": {"method": "keep", "fitted_on": "...", "zh": {"w": 0.1, "m": 2}, "en": {"w": 0, "m": 0}}
 * ("method": "rrf" needs nothing else; other members are ignored). A text that is not strict JSON, an unknown
 * method, a missing language, a w that is negative or not finite, an m that is not a whole number in
 * 0..CQ_FUSION_MAX_KEEP: CQ_ERR_FORMAT naming what is wrong. */
cq_status cq_fusion_from_config(const char *text, size_t len, cq_fusion *out, cq_err *err);

/* "rrf", "keep" or "weights" (the default: what the weights say) into *out; CQ_ERR_INVALID otherwise. */
cq_status cq_fusion_parse_method(const char *s, cq_fusion_method *out, cq_err *err);
const char *cq_fusion_method_name(cq_fusion_method m);

/* The parameters for a question: zh's when it is Chinese, en's otherwise. */
cq_fusion_params cq_fusion_params_for(const cq_fusion *f, bool chinese);

typedef struct {
    int64_t id;
    double score;    /* higher is better; a kept clause scores (1 + w) / 61 + 1 / (60 + r), above any fused one */
    bool from_dense; /* the dense list is where it ranks best (ties: BM25); kept clauses: false */
} cq_fused;

/* Fuses bm25[0..nb) and dense[0..nd) (each best first) by method (CQ_FUSION_RRF or CQ_FUSION_KEEP, with p) into
 * out, which has room for nb + nd; returns how many clauses out holds. Retrieval's lists never hold a clause twice;
 * where one does, each place adds its share (a kept clause is kept at each of its places in the top m), as in
 * fusion.py. */
size_t cq_fusion_rank(cq_fusion_method method, cq_fusion_params p, const int64_t *bm25, size_t nb,
                      const int64_t *dense, size_t nd, cq_fused *out);

#endif
