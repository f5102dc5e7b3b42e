/* Document routing (search/doc_route.h; issue 27). */
#include "search/doc_route.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/json.h"
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

const char *cq_doc_route_method_name(cq_doc_route_method m) { return m == CQ_DOC_ROUTE_SEARCH ? "search" : "prior"; }

cq_status cq_doc_routing_env(const char *value, cq_doc_routing *r, cq_err *err) {
    if (!value || !*value) return CQ_OK;
    cq_doc_routing out = {0};
    if (!strcmp(value, "off")) {
        *r = out;
        return CQ_OK;
    }
    const char *v = value;
    if (!strncmp(v, "search:", 7)) {
        out.method = CQ_DOC_ROUTE_SEARCH;
        v += 7;
    } else if (!strncmp(v, "prior:", 6)) {
        v += 6;
    }
    cq_status rc = cq_doc_route_parse(v, &out.zh, err);
    if (rc || !out.zh.top) /* "search:off" and the like */
        return rc ? rc : cq_err_set(err, CQ_ERR_INVALID, "document routing '%s': use off or [prior:|search:]R,BETA",
                                    value);
    out.en = out.zh;
    snprintf(out.source, sizeof out.source, "CLAUSEQA_DOC_ROUTE");
    *r = out;
    return CQ_OK;
}

static cq_status route_lang(const cJSON *o, const char *lang, cq_doc_route *out, cq_err *err) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, lang);
    if (!cJSON_IsObject(l))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\" needs \"%s\": {\"top\": R, \"beta\": B} (for %s "
                          "questions; top 0 turns it off for them)", lang, strcmp(lang, "zh") ? "other" : "Chinese");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(l, "top"), *beta = cJSON_GetObjectItemCaseSensitive(l, "beta");
    if (!cq_json_number_in(top, 0, CQ_DOC_ROUTE_MAX_TOP, true))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\".%s.top (documents routed to) must be a whole number in "
                          "0..%d", lang, CQ_DOC_ROUTE_MAX_TOP);
    if (!cq_json_number_in(beta, 0, INFINITY, false))
        return cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\".%s.beta (added to the routed documents' clauses) must "
                          "be a finite number ≥ 0", lang);
    *out = (cq_doc_route){(size_t)top->valuedouble, beta->valuedouble};
    return CQ_OK;
}

cq_status cq_doc_routing_from_config(const char *text, size_t len, cq_doc_routing *out, cq_err *err) {
    *out = (cq_doc_routing){0};
    char why[160];
    cJSON *root = cq_json_parse_strict(text, len, why, sizeof why);
    if (!root) return cq_err_set(err, CQ_ERR_FORMAT, "not JSON: %s", why);
    cq_doc_routing r = {0};
    cq_status rc = CQ_OK;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "doc_route");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(o, "method");
    const cJSON *fitted_on = cJSON_GetObjectItemCaseSensitive(o, "fitted_on");
    if (!o) {
        ;
    } else if (!cJSON_IsObject(o)) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\" must be an object {\"method\": \"search\", ...}");
    } else if (!cJSON_IsString(method) || (strcmp(method->valuestring, "search") &&
                                           strcmp(method->valuestring, "prior"))) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\".method must be \"search\" or \"prior\"");
    } else if (fitted_on && !cJSON_IsString(fitted_on)) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "\"doc_route\".fitted_on must be a string");
    } else if (!(rc = route_lang(o, "zh", &r.zh, err)) && !(rc = route_lang(o, "en", &r.en, err))) {
        r.method = strcmp(method->valuestring, "search") ? CQ_DOC_ROUTE_PRIOR : CQ_DOC_ROUTE_SEARCH;
        snprintf(r.source, sizeof r.source, "ssm.json");
        if (cJSON_IsString(fitted_on)) snprintf(r.fitted_on, sizeof r.fitted_on, "%s", fitted_on->valuestring);
    }
    cJSON_Delete(root);
    if (!rc) *out = r;
    return rc;
}

const cq_doc_route *cq_doc_routing_for(const cq_doc_routing *r, bool chinese) {
    const cq_doc_route *x = chinese ? &r->zh : &r->en;
    return x->top && x->beta > 0 ? x : NULL;
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
        if (cq_fusion_index_of(routed, n_routed, doc_of[i]) < n_routed) f[i].score += beta;
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

/* ---- the documents' vectors ------------------------------------------------------------------------------ */

static size_t find_sorted(const int64_t *ids, size_t n, int64_t id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && ids[lo] == id ? lo : n;
}

#define CACHE_ENTRIES 16

typedef struct {
    int64_t kb_id, count, max_doc;
    char model[80], head[80];
    int dim;
    int64_t *ids;
    float *vecs;
    size_t n;
    uint64_t used;
} cache_entry;

struct cq_doc_route_cache {
    pthread_mutex_t mu;
    cache_entry e[CACHE_ENTRIES];
    size_t n;
    uint64_t clock, reads;
};

cq_doc_route_cache *cq_doc_route_cache_new(void) {
    cq_doc_route_cache *c = calloc(1, sizeof *c);
    if (c) pthread_mutex_init(&c->mu, NULL);
    return c;
}

void cq_doc_route_cache_free(cq_doc_route_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].ids);
        free(c->e[i].vecs);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

size_t cq_doc_route_cache_reads(cq_doc_route_cache *c) {
    pthread_mutex_lock(&c->mu);
    size_t r = (size_t)c->reads;
    pthread_mutex_unlock(&c->mu);
    return r;
}

static cq_status copy_out(const int64_t *ids, const float *vecs, size_t n, int dim, int64_t **oi, float **ov,
                          size_t *on, cq_err *err) {
    *oi = malloc((n + 1) * sizeof **oi);
    *ov = malloc((n + 1) * (size_t)dim * sizeof **ov);
    if (!*oi || !*ov) {
        free(*oi);
        free(*ov);
        *oi = NULL;
        *ov = NULL;
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if (n) {
        memcpy(*oi, ids, n * sizeof **oi);
        memcpy(*ov, vecs, n * (size_t)dim * sizeof **ov);
    }
    *on = n;
    return CQ_OK;
}

static bool same_key(const cache_entry *e, int64_t kb_id, const char *model, const char *head, int dim) {
    return e->kb_id == kb_id && e->dim == dim && !strcmp(e->model, model) && !strcmp(e->head, head);
}

/* The KB's stored document vectors of model and head (none when head is ""), from the cache while the store's stamp
 * is the same (copies: the caller frees them). */
static cq_status kb_doc_vectors(cq_doc_route_cache *c, cq_store *s, int64_t kb_id, const char *model, const char *head,
                                int dim, int64_t **ids, float **vecs, size_t *n, cq_err *err) {
    *ids = NULL;
    *vecs = NULL;
    *n = 0;
    if (!head || !*head) return CQ_OK;
    if (!c) return cq_store_doc_vectors_kb(s, kb_id, model, head, dim, ids, vecs, n, err);
    int64_t count = 0, max_doc = 0;
    cq_status rc = cq_store_doc_vectors_stamp(s, kb_id, model, head, &count, &max_doc, err);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    c->clock++;
    for (size_t i = 0; i < c->n; i++) {
        cache_entry *e = &c->e[i];
        if (same_key(e, kb_id, model, head, dim) && e->count == count && e->max_doc == max_doc) {
            e->used = c->clock;
            rc = copy_out(e->ids, e->vecs, e->n, dim, ids, vecs, n, err);
            pthread_mutex_unlock(&c->mu);
            return rc;
        }
    }
    pthread_mutex_unlock(&c->mu);
    /* read outside the lock (a large KB takes a while); a change made meanwhile only makes a later question read
     * again, its stamp being newer than the one kept */
    rc = cq_store_doc_vectors_kb(s, kb_id, model, head, dim, ids, vecs, n, err);
    if (rc || strlen(model) >= sizeof c->e[0].model || strlen(head) >= sizeof c->e[0].head) return rc;
    cache_entry fresh = {.kb_id = kb_id, .count = count, .max_doc = max_doc, .dim = dim};
    snprintf(fresh.model, sizeof fresh.model, "%s", model);
    snprintf(fresh.head, sizeof fresh.head, "%s", head);
    cq_err e2 = {0};
    if (copy_out(*ids, *vecs, *n, dim, &fresh.ids, &fresh.vecs, &fresh.n, &e2)) return CQ_OK; /* uncached */
    pthread_mutex_lock(&c->mu);
    c->reads++;
    fresh.used = ++c->clock;
    size_t at = c->n; /* the same key replaced, else a free slot, else the least recently used */
    for (size_t i = 0; i < c->n; i++)
        if (same_key(&c->e[i], kb_id, model, head, dim)) at = i;
    if (at == c->n && c->n == CACHE_ENTRIES) {
        at = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[at].used) at = i;
    }
    if (at < c->n) {
        free(c->e[at].ids);
        free(c->e[at].vecs);
    } else {
        c->n++;
    }
    c->e[at] = fresh;
    pthread_mutex_unlock(&c->mu);
    return CQ_OK;
}

/* Vectors of docs[0..n) into out (n × dim): the stored one (kb_ids/kb_vecs, ascending) where there is one, else the
 * normalized mean of the document's clause vectors. */
static cq_status vectors_of(cq_store *s, const char *model, int dim, const int64_t *kb_ids, const float *kb_vecs,
                            size_t kb_n, const int64_t *docs, size_t n, float *out, cq_err *err) {
    int64_t *missing = malloc((n + 1) * sizeof *missing);
    size_t *at = malloc((n + 1) * sizeof *at), nm = 0;
    float *means = NULL;
    cq_status rc = missing && at ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        size_t j = find_sorted(kb_ids, kb_n, docs[i]);
        if (j < kb_n) {
            memcpy(out + i * (size_t)dim, kb_vecs + j * (size_t)dim, (size_t)dim * sizeof *out);
        } else {
            missing[nm] = docs[i];
            at[nm++] = i;
        }
    }
    if (!rc && nm && !(means = malloc(nm * (size_t)dim * sizeof *means)))
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && nm) rc = cq_store_doc_vector_means(s, model, dim, missing, nm, means, err);
    for (size_t k = 0; !rc && k < nm; k++)
        memcpy(out + at[k] * (size_t)dim, means + k * (size_t)dim, (size_t)dim * sizeof *out);
    free(means);
    free(at);
    free(missing);
    return rc;
}

/* The distinct documents (≥ 0) of doc_of[0..n) into docs; how many. */
static size_t distinct(const int64_t *doc_of, size_t n, int64_t *docs) {
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        if (doc_of[i] >= 0 && cq_fusion_index_of(docs, nd, doc_of[i]) == nd) docs[nd++] = doc_of[i];
    return nd;
}

cq_status cq_doc_route_apply(const cq_doc_route *r, cq_doc_route_cache *cache, cq_store *s, int64_t kb_id,
                             const char *model, const char *head, int dim, const float *q, cq_fused *f, size_t n,
                             size_t kept, cq_err *err) {
    if (!r->top || !(r->beta > 0) || n <= kept) return CQ_OK;
    int64_t *doc_of = malloc(n * sizeof *doc_of), *docs = malloc(n * sizeof *docs), *routed = NULL, *kb_ids = NULL;
    float *vecs = malloc(n * (size_t)dim * sizeof *vecs), *kb_vecs = NULL;
    size_t kb_n = 0;
    cq_status rc = doc_of && docs && vecs ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) docs[i] = f[i].id;
    if (!rc) rc = cq_store_clause_docs(s, docs, n, doc_of, err);
    size_t nd = rc ? 0 : distinct(doc_of, n, docs); /* the candidates' documents, each once */
    if (!rc) rc = kb_doc_vectors(cache, s, kb_id, model, head, dim, &kb_ids, &kb_vecs, &kb_n, err);
    if (!rc) rc = vectors_of(s, model, dim, kb_ids, kb_vecs, kb_n, docs, nd, vecs, err);
    if (!rc && !(routed = malloc(((r->top < nd ? r->top : nd) + 1) * sizeof *routed)))
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) {
        size_t nr = cq_doc_route_top(vecs, docs, nd, dim, q, r->top, routed);
        cq_doc_route_prefer(f, doc_of, n, kept, routed, nr, r->beta);
    }
    free(kb_ids);
    free(kb_vecs);
    free(routed);
    free(vecs);
    free(docs);
    free(doc_of);
    return rc;
}

/* ---- the routed dense search ------------------------------------------------------------------------------- */

typedef struct {
    int64_t id;
    double score;
    size_t order; /* met: the list's first, then the routed documents' */
} cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

cq_status cq_doc_route_search(const cq_doc_route *r, cq_doc_route_cache *cache, cq_store *s, int64_t kb_id,
                              const char *model, const char *head, int dim, const float *q, int64_t *ids, float *cos,
                              size_t *n, size_t cap, cq_err *err) {
    if (!r->top || !(r->beta > 0)) return CQ_OK;
    const size_t D = (size_t)dim, nl = *n;
    int64_t *kb_ids = NULL, *doc_of = malloc((nl + 1) * sizeof *doc_of), *extra = malloc((nl + 1) * sizeof *extra);
    int64_t *all = NULL, *routed = NULL, *rids = NULL;
    float *kb_vecs = NULL, *vecs = NULL, *rx = NULL;
    cand *c = NULL;
    size_t kb_n = 0, ne = 0, nr = 0, nrc = 0, cap_rids = 0, cap_rx = 0;
    cq_status rc = doc_of && extra ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = kb_doc_vectors(cache, s, kb_id, model, head, dim, &kb_ids, &kb_vecs, &kb_n, err);
    if (!rc && nl) rc = cq_store_clause_docs(s, ids, nl, doc_of, err);
    if (!rc) { /* the list's documents without a stored vector join the KB's as candidates */
        size_t nd = distinct(doc_of, nl, extra);
        for (size_t i = 0; i < nd; i++)
            if (find_sorted(kb_ids, kb_n, extra[i]) == kb_n) extra[ne++] = extra[i];
    }
    const size_t na = kb_n + ne;
    if (!rc && (!(all = malloc((na + 1) * sizeof *all)) || !(vecs = malloc((na + 1) * D * sizeof *vecs)) ||
                !(routed = malloc((r->top + 1) * sizeof *routed))))
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) {
        if (kb_n) memcpy(all, kb_ids, kb_n * sizeof *all);
        if (ne) memcpy(all + kb_n, extra, ne * sizeof *all);
        rc = vectors_of(s, model, dim, kb_ids, kb_vecs, kb_n, all, na, vecs, err);
    }
    if (!rc) nr = cq_doc_route_top(vecs, all, na, dim, q, r->top, routed);
    /* the routed documents' clauses and their stored vectors: the documents in their rank order, each one's clause
     * ids ascending */
    for (size_t k = 0; !rc && k < nr; k++) {
        int64_t *cids = NULL;
        size_t nc = 0;
        rc = cq_vectors_doc_clause_ids(s, routed[k], &cids, &nc, err);
        if (!rc && (!cq_grow((void **)&rids, &cap_rids, nrc + nc + 1, sizeof *rids) ||
                    !cq_grow((void **)&rx, &cap_rx, nrc + nc + 1, D * sizeof *rx)))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        size_t got = 0;
        if (!rc && nc) rc = cq_store_vectors_get(s, kb_id, model, dim, cids, nc, rids + nrc, rx + nrc * D, &got, err);
        nrc += got;
        free(cids);
    }
    if (!rc && !(c = malloc((nl + nrc + 1) * sizeof *c))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    size_t nc = 0;
    for (size_t i = 0; !rc && i < nl; i++) {
        const bool in = cq_fusion_index_of(routed, nr, doc_of[i]) < nr;
        c[nc++] = (cand){ids[i], (double)cos[i] + (in ? r->beta : 0.0), i};
    }
    for (size_t j = 0; !rc && j < nrc; j++) {
        if (cq_fusion_index_of(ids, nl, rids[j]) < nl) continue; /* in the list already: boosted above */
        double d = 0.0;
        for (size_t t = 0; t < D; t++) d += (double)rx[j * D + t] * (double)q[t];
        c[nc++] = (cand){rids[j], (double)(float)d + r->beta, nl + j};
    }
    if (!rc) {
        qsort(c, nc, sizeof *c, cand_cmp);
        *n = nc < cap ? nc : cap;
        for (size_t i = 0; i < *n; i++) {
            ids[i] = c[i].id;
            cos[i] = (float)c[i].score;
        }
    }
    free(c);
    free(rids);
    free(rx);
    free(routed);
    free(vecs);
    free(all);
    free(extra);
    free(doc_of);
    free(kb_ids);
    free(kb_vecs);
    return rc;
}
