#include "search/retrieve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/log.h"
#include "store/bm25.h"
#include "search/compare.h"
#include "search/lexicon.h"
#include "search/router.h"
#include "search/vectors.h"

#define MAX_TITLE_DOCS 8      /* documents a question may name for the in-document BM25 pass */
#define ROUTER_SCORE 1000.0
/* A local regulation (上海市…, 广东省…) applies in one place; a question that names no place is about the law that
 * applies everywhere, so local documents' BM25 scores are lowered unless the question names their place. Measured
 * on laws-zh semantic questions (gold national in 1,233 of 1,234): see docs/EVAL.md. */
#define LOCAL_PRIOR 0.8
#define PRIOR_POOL 3 /* candidates fetched per result wanted, for the prior to reorder */
#define GROUPS_MAX 64 /* version groups one retrieval looks at (more: the others keep their order) */

const char *cq_retrieve_source_name(int source) {
    return source == CQ_RETRIEVE_ROUTER ? "router" : source == CQ_RETRIEVE_DENSE ? "dense" : "bm25";
}

int cq_retrieve_parse_mode(const char *s, cq_err *err) {
    if (!s) return CQ_RETRIEVE_DEFAULT_MODES;
    int modes = 0;
    char *copy = strdup(s);
    if (!copy) return 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "router")) modes |= CQ_RETRIEVE_ROUTER;
        else if (!strcmp(t, "bm25")) modes |= CQ_RETRIEVE_BM25;
        else if (!strcmp(t, "dense")) modes |= CQ_RETRIEVE_DENSE;
        else if (!strcmp(t, "hybrid")) modes |= CQ_RETRIEVE_HYBRID;
        else if (!strcmp(t, "rerank")) modes |= CQ_RETRIEVE_RERANK;
        else {
            cq_err_set(err, CQ_ERR_INVALID, "unknown retrieval mode '%s' (use router, bm25, dense, hybrid or rerank)",
                       t);
            free(copy);
            return 0;
        }
    }
    free(copy);
    if (!(modes & ~CQ_RETRIEVE_RERANK)) {
        cq_err_set(err, CQ_ERR_INVALID, modes ? "rerank needs a retriever before it (e.g. router,bm25,rerank)"
                                              : "empty retrieval mode");
        return 0;
    }
    return modes;
}

/* ---- hits --------------------------------------------------------------------------------------------------- */

static void hit_free(cq_hit *x) {
    free(x->doc_name);
    free(x->doc_title);
    free(x->label);
    free(x->path);
    free(x->text);
    free(x->boxes);
}

void cq_hits_free(cq_hits *h) {
    for (size_t i = 0; i < h->n; i++) hit_free(&h->hits[i]);
    free(h->hits);
    memset(h, 0, sizeof *h);
}

void cq_hits_truncate(cq_hits *h, size_t k) {
    while (h->n > k) hit_free(&h->hits[--h->n]);
}

/* The router hits lead the list: how many there are. */
static size_t n_routed(const cq_hits *h) {
    size_t routed = 0;
    while (routed < h->n && h->hits[routed].source == CQ_RETRIEVE_ROUTER) routed++;
    return routed;
}

static int has_clause(const cq_hits *h, int64_t id) {
    for (size_t i = 0; i < h->n; i++)
        if (h->hits[i].clause_id == id) return 1;
    return 0;
}

static cq_status add_hit(cq_store *s, cq_hits *h, size_t k, int64_t clause_id, double score, int source,
                         int paragraph, int item, cq_err *err) {
    if (h->n >= k || has_clause(h, clause_id)) return CQ_OK;
    cq_clause_row row;
    cq_status rc = cq_store_clause_get(s, clause_id, &row, err);
    if (rc) return rc;
    cq_hit *x = &h->hits[h->n++];
    *x = (cq_hit){
        .clause_id = row.id,
        .doc_id = row.doc_id,
        .doc_name = row.doc_name,
        .doc_title = row.doc_title,
        .label = row.label,
        .path = row.path,
        .text = row.text,
        .page_first = row.page_first,
        .page_last = row.page_last,
        .score = score,
        .source = source,
        .paragraph = paragraph,
        .item = item,
        .boxes = row.boxes,
        .n_boxes = row.n_boxes,
    };
    free(row.label_key); /* the hit owns every other field now */
    return CQ_OK;
}

/* ---- BM25 --------------------------------------------------------------------------------------------------- */

static int cmp_scored(const void *a, const void *b) {
    const cq_bm25_hit *x = a, *y = b;
    return x->score < y->score ? 1 : (x->score > y->score ? -1 : (x->id > y->id) - (x->id < y->id));
}

/* The local prior: a hit of a local regulation whose place the question does not name counts less (LOCAL_PRIOR);
 * the hits' document names read in one statement. */
static cq_status apply_local_prior(cq_store *s, const char *question, cq_bm25_hit *found, const int64_t *doc_of,
                                   size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    int64_t *docs = malloc(n * sizeof *docs);
    char **names = calloc(n, sizeof *names);
    size_t n_docs = 0;
    cq_status rc = docs && names ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        if (cq_fusion_index_of(docs, n_docs, doc_of[i]) == n_docs) docs[n_docs++] = doc_of[i];
    if (!rc) rc = cq_store_doc_names(s, docs, n_docs, names, err);
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = names[cq_fusion_index_of(docs, n_docs, doc_of[i])];
        char place[64];
        if (name && cq_router_local_place(name, place, sizeof place)) {
            /* "上海市" is also asked as "上海": drop the last character (省/市/县) before looking. */
            size_t len = strlen(place);
            if (len > 3) place[len - 3] = 0;
            if (!strstr(question, place)) found[i].score *= LOCAL_PRIOR;
        }
    }
    for (size_t j = 0; names && j < n_docs; j++) free(names[j]);
    free(names);
    free(docs);
    return rc;
}

/* Terms searched beside the question's own (the lexicon's expansion, search/lexicon.h; an English term's other
 * forms, query.h form_terms): searched alone, and weight × their score added to each clause's — to the clauses the
 * question's own terms found, and the others appended with that share alone. *found and *doc_of (n entries) grow to
 * hold them. */
static cq_status add_expansion(cq_store *s, const cq_query *q, char *const *terms, size_t n_terms, double weight,
                               const int64_t *doc_ids, size_t n_docs, size_t want, cq_bm25_hit **found,
                               int64_t **doc_of, size_t *n, cq_err *err) {
    if (weight <= 0.0 || !n_terms) return CQ_OK;
    size_t cap = want * (n_docs ? n_docs : 1), m = 0;
    cq_bm25_hit *more = malloc(cap * sizeof *more);
    int64_t *more_doc = malloc(cap * sizeof *more_doc);
    cq_bm25_hit *f = realloc(*found, (*n + cap) * sizeof *f);
    if (f) *found = f;
    int64_t *d = f ? realloc(*doc_of, (*n + cap) * sizeof *d) : NULL;
    if (d) *doc_of = d;
    cq_status rc = more && more_doc && f && d ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = cq_store_keyword_bm25(s, q->kb_id, (const char *const *)terms, n_terms, doc_ids, n_docs, want, more,
                                   more_doc, &m, err);
    const size_t own = *n;
    for (size_t i = 0; !rc && i < m; i++) {
        size_t j = 0;
        while (j < own && f[j].id != more[i].id) j++;
        if (j == own) {
            j = (*n)++;
            f[j] = (cq_bm25_hit){.id = more[i].id, .score = 0.0};
            d[j] = more_doc[i];
        }
        f[j].score += weight * more[i].score;
    }
    free(more);
    free(more_doc);
    return rc;
}

/* CQ_QUERY_FORMS_WEIGHT, or CLAUSEQA_FORMS_WEIGHT when it is a number in [0, 4] (anything else: one warning). */
static double forms_weight(void) {
    const char *v = getenv("CLAUSEQA_FORMS_WEIGHT");
    if (!v) return CQ_QUERY_FORMS_WEIGHT;
    char *end = NULL;
    const double w = strtod(v, &end);
    if (end != v && !*end && w >= 0.0 && w <= 4.0) return w;
    static int warned; /* once a process: this is read for every question */
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        CQ_WARN("CLAUSEQA_FORMS_WEIGHT is a number in [0, 4], not '%s': using %.1f", v, CQ_QUERY_FORMS_WEIGHT);
    return CQ_QUERY_FORMS_WEIGHT;
}

/* BM25 through the store's keyword index (store/store.h cq_store_keyword_bm25: FTS5 or postings): the query's terms
 * OR-ed; when docs are given, only their clauses (best first over all of them), with the local prior. Adds the
 * results to h after what it holds. */
static cq_status bm25(cq_store *s, const cq_query *query, const cq_title_match *docs, size_t n_docs, cq_hits *h,
                      size_t k, cq_err *err) {
    if (query->n_terms == 0 || h->n >= k) return CQ_OK;
    const int64_t kb_id = query->kb_id;
    const char *const *terms = (const char *const *)query->terms;
    size_t want = (k + h->n) * PRIOR_POOL, cap = want * (n_docs ? n_docs : 1), n = 0;
    cq_bm25_hit *found = malloc(cap * sizeof *found);
    int64_t *doc_of = malloc(cap * sizeof *doc_of), *doc_ids = n_docs ? malloc(n_docs * sizeof *doc_ids) : NULL;
    cq_status rc = found && doc_of && (doc_ids || !n_docs) ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n_docs; i++) doc_ids[i] = docs[i].doc_id;
    if (!rc) rc = cq_store_keyword_bm25(s, kb_id, terms, query->n_terms, doc_ids, n_docs, want, found, doc_of, &n, err);
    if (!rc)
        rc = add_expansion(s, query, query->exp_terms, query->n_exp_terms, cq_lexicon_weight(), doc_ids, n_docs, want,
                           &found, &doc_of, &n, err);
    if (!rc)
        rc = add_expansion(s, query, query->form_terms, query->n_form_terms, forms_weight(), doc_ids, n_docs, want,
                           &found, &doc_of, &n, err);
    if (!rc) rc = apply_local_prior(s, query->text, found, doc_of, n, err);
    free(doc_of);
    free(doc_ids);
    if (!rc) qsort(found, n, sizeof *found, cmp_scored);
    for (size_t i = 0; !rc && i < n && h->n < k; i++) rc = add_hit(s, h, k, found[i].id, found[i].score, CQ_RETRIEVE_BM25, 0, 0, err);
    free(found);
    return rc;
}

/* ---- fusion ------------------------------------------------------------------------------------------------- */

#define DENSE_POOL 50 /* nearest clauses fetched from the vector index */

/* The fusion a retrieval uses: the option's, else the one the weights carry (search/fusion.h). keep's parameters
 * come from the weights either way. */
static cq_status fusion_for(const cq_retrieve_options *o, const cq_query *q, cq_fusion_method *method,
                            cq_fusion_params *p, cq_err *err) {
    const cq_fusion *f = cq_dense_fusion(o->dense);
    *method = o->fusion != CQ_FUSION_WEIGHTS ? o->fusion : f->method;
    *p = cq_fusion_params_for(f, q->lang == CQ_QUERY_ZH);
    if (*method != CQ_FUSION_RRF && f->method != *method)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "fusion %s needs its parameters fitted for the encoder's weights "
                          "(\"fusion\" in their ssm.json, docs/SSM.md); these weights have none: use rrf",
                          cq_fusion_method_name(*method));
    return CQ_OK;
}

/* Document routing's prior (search/doc_route.h) on the fused list f[0..nf): BM25's kept clauses stay (BM25's
 * hits: ids bm25, scores bs). */
static cq_status route(cq_store *s, const cq_retrieve_options *o, const cq_query *q, const cq_doc_route *r,
                       const float *qv, const int64_t *bm25, const double *bs, size_t nb, cq_fusion_method method,
                       cq_fusion_params p, cq_fused *f, size_t nf, cq_err *err) {
    const cq_ssm_model *m = cq_dense_model(o->dense);
    const int dim = cq_ssm_model_config(m)->d_embed;
    size_t kept = 0;
    if (method == CQ_FUSION_KEEP) kept = p.m < 0 ? 0 : (size_t)p.m < nb ? (size_t)p.m : nb;
    else if (method == CQ_FUSION_SCORE) kept = cq_fusion_score_kept(p, bm25, bs, nb);
    return cq_doc_route_apply(r, cq_dense_doc_route_cache(o->dense), s, q->kb_id, cq_ssm_model_id(m),
                              cq_ssm_model_doc_head_id(m), dim, qv, f, nf, kept, err);
}

/* Dense retrieval and its fusion with what h holds: router hits stay first (they are exact); the BM25 list after
 * them and the dense list are fused (search/fusion.h: the fusion the options or the weights choose; only the dense
 * list, by reciprocal rank, when BM25 was not asked for). */
static cq_status dense_fuse(cq_store *s, const cq_retrieve_options *o, int modes, const cq_query *q, cq_hits *h,
                            size_t k, cq_err *err) {
    cq_fusion_method method = CQ_FUSION_RRF;
    cq_fusion_params params = {1.0, 0, 0.0};
    cq_status rc = modes & CQ_RETRIEVE_BM25 ? fusion_for(o, q, &method, &params, err) : CQ_OK;
    if (rc) return rc;
    int64_t ids[DENSE_POOL];
    float cos[DENSE_POOL];
    double ds[DENSE_POOL]; /* the cosines as the score fusion reads them */
    size_t nd = 0, nf = 0;
    /* document routing (search/doc_route.h): the search inside the dense list, or the prior after the fusion */
    const cq_doc_routing *routing = cq_dense_doc_route(o->dense);
    const cq_doc_route *dr = cq_doc_routing_for(routing, q->lang == CQ_QUERY_ZH);
    const cq_ssm_model *m = cq_dense_model(o->dense);
    const int dim = cq_ssm_model_config(m)->d_embed;
    const size_t routed = n_routed(h), nb = h->n - routed;
    float *qv = malloc((size_t)dim * sizeof *qv);
    int64_t *bm25 = malloc((nb + 1) * sizeof *bm25);
    double *bs = malloc((nb + 1) * sizeof *bs);
    cq_fused *f = NULL;
    cq_hits old = {malloc((nb + 1) * sizeof *old.hits), 0, 0}; /* the BM25 hits, moved aside */
    if (!qv || !bm25 || !bs || !old.hits) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = cq_dense_query_vector(o->dense, q->text, qv, err);
    if (!rc) rc = cq_dense_search_vec(o->dense, s, q->kb_id, qv, DENSE_POOL, ids, cos, &nd, err);
    if (!rc && dr && routing->method == CQ_DOC_ROUTE_SEARCH)
        rc = cq_doc_route_search(dr, cq_dense_doc_route_cache(o->dense), s, q->kb_id, cq_ssm_model_id(m),
                                 cq_ssm_model_doc_head_id(m), dim, qv, ids, cos, &nd, DENSE_POOL, err);
    if (!rc && !(f = malloc((nb + nd + 1) * sizeof *f))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < nb; i++) {
        bm25[i] = h->hits[routed + i].clause_id;
        bs[i] = h->hits[routed + i].score;
    }
    for (size_t i = 0; i < nd; i++) ds[i] = cos[i];
    if (!rc && method == CQ_FUSION_SCORE) /* search/fusion_score.c */
        rc = cq_fusion_rank_scores(cq_dense_fusion(o->dense)->norm, params, bm25, bs, nb, ids, ds, nd, f, &nf, err);
    else if (!rc)
        nf = cq_fusion_rank(method, params, bm25, nb, ids, nd, f);
    if (!rc && !(modes & CQ_RETRIEVE_BM25)) /* the dense list alone, in its order: its hits report their cosines */
        for (size_t i = 0; i < nf && i < nd; i++)
            if (f[i].id == ids[i]) f[i].score = cos[i];
    if (!rc && dr && routing->method == CQ_DOC_ROUTE_PRIOR)
        rc = route(s, o, q, dr, qv, bm25, bs, nb, method, params, f, nf, err);
    if (!rc) { /* the list after the router hits rebuilt in the fused order; the BM25 hits freed after */
        memcpy(old.hits, h->hits + routed, nb * sizeof *old.hits);
        old.n = nb;
        h->n = routed;
    }
    for (size_t i = 0; !rc && i < nf && h->n < k; i++) /* add_hit skips a clause h holds */
        rc = add_hit(s, h, k, f[i].id, f[i].score, f[i].from_dense ? CQ_RETRIEVE_DENSE : CQ_RETRIEVE_BM25, 0, 0, err);
    cq_hits_free(&old);
    free(f);
    free(bs);
    free(bm25);
    free(qv);
    return rc;
}

/* ---- reranking ---------------------------------------------------------------------------------------------- */

/* The reranker's order for the first top_n hits after the router hits (stable: ties keep the fused order). */
static cq_status rerank(const cq_retrieve_options *o, const cq_query *q, cq_hits *h, size_t top_n, cq_err *err) {
    const size_t routed = n_routed(h);
    size_t n = h->n - routed < top_n ? h->n - routed : top_n;
    if (n == 0) return CQ_OK;
    double *scores = malloc(2 * n * sizeof *scores);
    if (!scores) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    double *relevance = scores + n;
    for (size_t i = 0; i < n; i++) relevance[i] = NAN;
    cq_hit *x = h->hits + routed;
    cq_status rc = o->rerank(o->rerank_ctx, q, x, n, scores, relevance, err);
    for (size_t i = 0; !rc && i < n; i++) {
        x[i].score = scores[i];
        x[i].reranked = !isnan(relevance[i]);
        x[i].relevance = x[i].reranked ? relevance[i] : 0;
    }
    for (size_t i = 1; !rc && i < n; i++) /* insertion sort: n is a few dozen at most */
        for (size_t j = i; j > 0 && x[j].score > x[j - 1].score; j--) {
            cq_hit t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    free(scores);
    return rc;
}

/* ---- versions ----------------------------------------------------------------------------------------------- */

/* The version groups a retrieval has looked at (a question touches a few), and the documents that have none. */
typedef struct {
    cq_version_group *g;
    size_t n, cap;
    int64_t *none;
    size_t n_none, cap_none;
} group_cache;

static void group_cache_free(group_cache *c) {
    for (size_t i = 0; i < c->n; i++) cq_version_group_free(&c->g[i]);
    free(c->g);
    free(c->none);
}

/* The group of doc_id, or NULL when it has none (not analysed) or on failure (versions are a refinement: a
 * retrieval does not fail for them). */
static const cq_version_group *group_for(cq_store *s, group_cache *c, int64_t doc_id) {
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < c->g[i].n; k++)
            if (c->g[i].v[k].doc_id == doc_id) return &c->g[i];
    for (size_t i = 0; i < c->n_none; i++)
        if (c->none[i] == doc_id) return NULL;
    cq_version_group g;
    cq_err err = {0};
    if (cq_versions_group_of(s, doc_id, &g, &err) == CQ_OK && c->n < c->cap) {
        c->g[c->n] = g;
        return &c->g[c->n++];
    }
    cq_version_group_free(&g); /* none, or no room left to keep it */
    if (!cq_grow((void **)&c->none, &c->cap_none, c->n_none + 1, sizeof *c->none)) return NULL;
    c->none[c->n_none++] = doc_id;
    return NULL;
}

/* Stable reordering of the items [0, n) that belong to version groups with several versions: within the places
 * one group's items hold, an item of the version meant for the day moves ahead of an item of another version —
 * of any item of it (documents, and router hits: the clause the question names, in each version), or, with twins
 * set, of the item it is a twin of (BM25 and dense hits: the same clause in another version, text similarity at
 * least TWIN_SIMILARITY; a clause the version meant for the day no longer has keeps its rank). doc(i) is item
 * i's document; move exchanges two items. */
#define TWIN_SIMILARITY 0.5
typedef struct {
    cq_store *s;
    group_cache *cache;
    cq_date on;
    int version_year;
} prefer_ctx;

static bool twins(void *items, size_t i, size_t j) {
    const cq_hit *h = items;
    return cq_text_similarity(h[i].text, h[j].text) >= TWIN_SIMILARITY;
}

static void prefer_order(prefer_ctx *x, size_t n, int64_t (*doc)(void *, size_t), void (*move)(void *, size_t, size_t),
                         bool (*twin)(void *, size_t, size_t), void *items) {
    for (size_t i = 0; i < n; i++) {
        const cq_version_group *g = group_for(x->s, x->cache, doc(items, i));
        if (!g || g->n < 2 || cq_version_group_prefers(g, doc(items, i), x->on, x->version_year)) continue;
        /* item i is a version not meant: the first later item of the same group that is meant moves into its
         * place, and the items of that group between them shift back by one */
        size_t j;
        for (j = i + 1; j < n; j++) {
            const cq_version_group *h = group_for(x->s, x->cache, doc(items, j));
            if (h == g && cq_version_group_prefers(g, doc(items, j), x->on, x->version_year) &&
                (!twin || twin(items, i, j)))
                break;
        }
        if (j == n) continue;
        size_t prev = j;
        for (size_t k = j; k-- > i;) {
            if (group_for(x->s, x->cache, doc(items, k)) != g) continue;
            move(items, prev, k); /* the meant item travels from prev back to k */
            prev = k;
        }
    }
}

static int64_t title_doc(void *items, size_t i) { return ((cq_title_match *)items)[i].doc_id; }
static void title_move(void *items, size_t from, size_t to) {
    cq_title_match *t = items;
    int64_t doc = t[from].doc_id; /* places keep their scores: only the documents trade */
    t[from].doc_id = t[to].doc_id;
    t[to].doc_id = doc;
}
static int64_t hit_doc(void *items, size_t i) { return ((cq_hit *)items)[i].doc_id; }
static void hit_move(void *items, size_t from, size_t to) {
    cq_hit *h = items, x = h[from];
    h[from] = h[to];
    h[to] = x;
}

/* Versions of a regulation among the hits: the version meant for the day first (router hits among router hits,
 * the others among the others); every hit gets its document's status on that day. */
static void prefer_versions(prefer_ctx *x, cq_hits *h) {
    const size_t routed = n_routed(h);
    prefer_order(x, routed, hit_doc, hit_move, NULL, h->hits);
    prefer_order(x, h->n - routed, hit_doc, hit_move, twins, h->hits + routed);
    for (size_t i = 0; i < h->n; i++) {
        cq_hit *t = &h->hits[i];
        const cq_version_group *g = group_for(x->s, x->cache, t->doc_id);
        if (g) cq_version_status_in(g, t->doc_id, x->on, &t->version);
        else t->version = (cq_version_status){.doc_id = t->doc_id, .on = x->on};
    }
}

/* ---- retrieval ---------------------------------------------------------------------------------------------- */

cq_status cq_retrieve(cq_store *s, const cq_query *q, const cq_retrieve_options *opt, cq_hits *out, cq_err *err) {
    static const cq_retrieve_options defaults = {0};
    if (!opt) opt = &defaults;
    memset(out, 0, sizeof *out);
    if (!q->kb_id) return cq_err_set(err, CQ_ERR_INVALID, "the question was not parsed for a knowledge base");
    int modes = opt->modes ? opt->modes : CQ_RETRIEVE_DEFAULT_MODES;
    size_t k = opt->k ? opt->k : CQ_RETRIEVE_DEFAULT_K;
    if (k > CQ_RETRIEVE_MAX_K) k = CQ_RETRIEVE_MAX_K;
    if ((modes & CQ_RETRIEVE_DENSE) && !opt->dense)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                          "dense retrieval is off: it needs trained SSM encoder weights (models/ssm/ in a models folder) and, "
                          "without a GPU, CLAUSEQA_DENSE=on (docs/SSM.md); use --mode router,bm25");
    if ((unsigned)opt->fusion > CQ_FUSION_SCORE)
        return cq_err_set(err, CQ_ERR_INVALID, "unknown fusion %d", (int)opt->fusion);
    if ((modes & CQ_RETRIEVE_RERANK) && !opt->rerank)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                          "reranking needs the decoder with its trained adapter (DATA/models/answer/, "
                          "docs/ANSWERS.md); use --mode router,bm25");
    const bool reranking = (modes & CQ_RETRIEVE_RERANK) || (opt->rerank && opt->rerank_default);
    size_t top_n = reranking ? (opt->rerank_top_n ? opt->rerank_top_n : k) : 0;
    size_t pool = top_n > k ? top_n : k; /* candidates fused before reranking cuts them to k */
    if (pool > CQ_RETRIEVE_MAX_K) pool = CQ_RETRIEVE_MAX_K;
    /* the score fusion reads BM25 as deep as its fit did (search/fusion.h) */
    if ((modes & CQ_RETRIEVE_DENSE) && (modes & CQ_RETRIEVE_BM25) && opt->dense && pool < CQ_FUSION_SCORE_DEPTH &&
        (opt->fusion == CQ_FUSION_WEIGHTS ? cq_dense_fusion(opt->dense)->method : opt->fusion) == CQ_FUSION_SCORE)
        pool = CQ_FUSION_SCORE_DEPTH;
    out->hits = calloc(pool, sizeof *out->hits);
    if (!out->hits) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    /* Documents ingested before versions existed are analysed once, when their KB is first asked about. */
    cq_err verr = {0};
    if (cq_versions_ensure(s, q->kb_id, false, NULL, &verr) && verr.code != CQ_ERR_UNSUPPORTED)
        CQ_WARN("versions: %s", verr.msg);
    group_cache groups = {0};
    groups.g = calloc(GROUPS_MAX, sizeof *groups.g);
    groups.cap = groups.g ? GROUPS_MAX : 0;
    prefer_ctx versions = {s, &groups, q->as_of ? q->as_of : cq_date_today(), q->version_year};
    /* The documents the question names, the best tier with the version meant for the day first. */
    cq_title_match titles[CQ_QUERY_MAX_TITLES];
    size_t n_titles = q->n_titles, tier = 0;
    memcpy(titles, q->titles, n_titles * sizeof *titles);
    while (tier < n_titles && titles[tier].score >= titles[0].score) tier++;
    prefer_order(&versions, tier, title_doc, title_move, NULL, titles);
    if ((modes & CQ_RETRIEVE_ROUTER) && q->type == CQ_QUERY_CLAUSE) {
        int64_t ids[64];
        size_t n = 0;
        rc = cq_router_resolve(s, q->kb_id, titles, n_titles, &q->ref, ids, pool < 64 ? pool : 64, &n, err);
        for (size_t i = 0; !rc && i < n; i++)
            rc = add_hit(s, out, pool, ids[i], ROUTER_SCORE - (double)i, CQ_RETRIEVE_ROUTER, (int)q->ref.paragraph,
                         (int)q->ref.item, err);
    }
    if (!rc && (modes & CQ_RETRIEVE_BM25)) {
        out->n_query_terms = (int)q->n_terms;
        /* Documents the question names are searched first (only the best-matching tier of the first
         * MAX_TITLE_DOCS), then the whole KB. */
        size_t n_docs = n_titles < MAX_TITLE_DOCS ? n_titles : MAX_TITLE_DOCS, first = 0;
        while (first < n_docs && titles[first].score >= titles[0].score) first++;
        if (first) rc = bm25(s, q, titles, first, out, pool, err);
        if (!rc) rc = bm25(s, q, NULL, 0, out, pool, err);
    }
    if (!rc && (modes & CQ_RETRIEVE_DENSE)) rc = dense_fuse(s, opt, modes, q, out, pool, err);
    if (!rc && reranking) rc = rerank(opt, q, out, top_n, err);
    if (!rc) prefer_versions(&versions, out);
    group_cache_free(&groups);
    if (rc) cq_hits_free(out); /* n = 0 */
    cq_hits_truncate(out, k); /* candidates that were there for the reranker */
    return rc;
}
