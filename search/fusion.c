#include "search/fusion.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"

/* ---- the fusion's config ------------------------------------------------------------------------------------ */

/* A language's parameters: the keep fusion's w ≥ 0 and m; the score fusion's w in 0..1, m and an optional c. */
static cq_status parse_params(const cJSON *fusion, const char *lang, bool score, cq_fusion_params *out, cq_err *err) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(fusion, lang);
    if (!cJSON_IsObject(o))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\": %s needs \"%s\": {\"w\": W, \"m\": M%s} (the parameters "
                          "for %s questions)", score ? "score" : "keep", lang, score ? ", \"c\": C" : "",
                          strcmp(lang, "zh") ? "other" : "Chinese");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "w");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "m");
    const cJSON *c = score ? cJSON_GetObjectItemCaseSensitive(o, "c") : NULL;
    if (!cq_json_number_in(w, 0, score ? 1 : INFINITY, false))
        return cq_err_set(err, CQ_ERR_FORMAT, score ? "\"fusion\".%s.w (the dense scores' weight) must be a number "
                          "in 0..1" : "\"fusion\".%s.w (the dense list's weight) must be a finite number ≥ 0", lang);
    if (!cq_json_number_in(m, 0, CQ_FUSION_MAX_KEEP, true))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\".%s.m (BM25's hits kept in place) must be a whole number "
                          "in 0..%d", lang, CQ_FUSION_MAX_KEEP);
    if (c && !cq_json_number_in(c, 0, INFINITY, false))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\".%s.c (BM25's confidence margin) must be a finite number "
                          "≥ 0", lang);
    *out = (cq_fusion_params){w->valuedouble, (int)m->valuedouble, c ? c->valuedouble : 0.0};
    return CQ_OK;
}

cq_status cq_fusion_from_config(const char *text, size_t len, cq_fusion *out, cq_err *err) {
    *out = (cq_fusion){.method = CQ_FUSION_RRF};
    char why[160];
    cJSON *root = cq_json_parse_strict(text, len, why, sizeof why);
    if (!root) return cq_err_set(err, CQ_ERR_FORMAT, "not JSON: %s", why);
    cq_status rc = CQ_OK;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "fusion");
    const cJSON *method = f ? cJSON_GetObjectItemCaseSensitive(f, "method") : NULL;
    const cJSON *fitted_on = f ? cJSON_GetObjectItemCaseSensitive(f, "fitted_on") : NULL;
    const cJSON *norm = f ? cJSON_GetObjectItemCaseSensitive(f, "norm") : NULL;
    const bool score = cJSON_IsString(method) && !strcmp(method->valuestring, "score");
    if (!f) {
        ;
    } else if (!cJSON_IsObject(f)) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\" must be an object {\"method\": \"keep\", ...}");
    } else if (!cJSON_IsString(method) || (strcmp(method->valuestring, "keep") && strcmp(method->valuestring, "rrf") &&
                                           strcmp(method->valuestring, "score"))) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\".method must be \"keep\", \"score\" or \"rrf\", not %s%s%s",
                        cJSON_IsString(method) ? "\"" : "",
                        cJSON_IsString(method) ? method->valuestring : method ? "a non-string" : "missing",
                        cJSON_IsString(method) ? "\"" : "");
    } else if (fitted_on && !cJSON_IsString(fitted_on)) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\".fitted_on must be a string");
    } else if (!strcmp(method->valuestring, "rrf")) {
        ;
    } else if (score &&
               (!cJSON_IsString(norm) || (strcmp(norm->valuestring, "minmax") && strcmp(norm->valuestring, "z")))) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"fusion\".norm must be \"minmax\" or \"z\" for the score fusion");
    } else if (!(rc = parse_params(f, "zh", score, &out->zh, err)) &&
               !(rc = parse_params(f, "en", score, &out->en, err))) {
        out->method = score ? CQ_FUSION_SCORE : CQ_FUSION_KEEP;
        if (score) out->norm = strcmp(norm->valuestring, "z") ? CQ_FUSION_NORM_MINMAX : CQ_FUSION_NORM_Z;
    }
    if (!rc && cJSON_IsString(fitted_on)) snprintf(out->fitted_on, sizeof out->fitted_on, "%s", fitted_on->valuestring);
    cJSON_Delete(root);
    if (rc) *out = (cq_fusion){.method = CQ_FUSION_RRF};
    return rc;
}

static const char *const method_names[] = {"weights", "rrf", "keep", "score"}; /* by cq_fusion_method */

cq_status cq_fusion_parse_method(const char *s, cq_fusion_method *out, cq_err *err) {
    for (int m = CQ_FUSION_WEIGHTS; m <= CQ_FUSION_SCORE; m++)
        if (!strcmp(s, method_names[m])) {
            *out = (cq_fusion_method)m;
            return CQ_OK;
        }
    return cq_err_set(err, CQ_ERR_INVALID, "unknown fusion '%s' (use weights, rrf, keep or score)", s);
}

const char *cq_fusion_method_name(cq_fusion_method m) {
    return m > CQ_FUSION_WEIGHTS && m <= CQ_FUSION_SCORE ? method_names[m] : "weights";
}

const char *cq_fusion_norm_name(cq_fusion_norm n) { return n == CQ_FUSION_NORM_Z ? "z" : "minmax"; }

cq_fusion_params cq_fusion_params_for(const cq_fusion *f, bool chinese) { return chinese ? f->zh : f->en; }

/* ---- ranking ------------------------------------------------------------------------------------------------ */

static size_t find(const cq_fused *f, size_t n, int64_t id) {
    size_t i = 0;
    while (i < n && f[i].id != id) i++;
    return i;
}

size_t cq_fusion_index_of(const int64_t *ids, size_t n, int64_t id) {
    size_t i = 0;
    while (i < n && ids[i] != id) i++;
    return i;
}

/* Adds weight / (60 + rank) to id's score in f[from..*n), appending it when it is not there yet. */
static void add_score(cq_fused *f, size_t from, size_t *n, int64_t id, double weight, size_t rank, bool dense,
                      const int64_t *bm25, size_t nb) {
    size_t i = from + find(f + from, *n - from, id);
    if (i == *n) f[(*n)++] = (cq_fused){id, 0.0, dense};
    else if (dense) f[i].from_dense = rank < cq_fusion_index_of(bm25, nb, id) + 1; /* ranks better in the dense list */
    f[i].score += weight / (CQ_FUSION_RRF_K + (double)rank);
}

void cq_fusion_sort(cq_fused *f, size_t n, bool by_id) {
    for (size_t i = 1; i < n; i++) {
        cq_fused x = f[i];
        size_t j = i;
        while (j > 0 && (f[j - 1].score < x.score || (by_id && f[j - 1].score == x.score && f[j - 1].id > x.id))) {
            f[j] = f[j - 1];
            j--;
        }
        f[j] = x;
    }
}

size_t cq_fusion_rank(cq_fusion_method method, cq_fusion_params p, const int64_t *bm25, size_t nb,
                      const int64_t *dense, size_t nd, cq_fused *out) {
    const bool keep = method == CQ_FUSION_KEEP;
    const double w = keep ? p.w : 1.0;
    const size_t kept = keep ? (p.m < 0 ? 0 : (size_t)p.m < nb ? (size_t)p.m : nb) : 0;
    size_t n = 0;
    for (size_t i = 0; i < kept; i++)
        out[n++] = (cq_fused){bm25[i], (1.0 + w) / (CQ_FUSION_RRF_K + 1.0) + 1.0 / (CQ_FUSION_RRF_K + (double)(i + 1)),
                              false};
    for (size_t i = kept; i < nb; i++)
        if (cq_fusion_index_of(bm25, kept, bm25[i]) == kept) add_score(out, kept, &n, bm25[i], 1.0, i + 1, false, bm25, nb);
    for (size_t i = 0; i < nd; i++)
        if (cq_fusion_index_of(bm25, kept, dense[i]) == kept) add_score(out, kept, &n, dense[i], w, i + 1, true, bm25, nb);
    cq_fusion_sort(out + kept, n - kept, !keep);
    return n;
}
