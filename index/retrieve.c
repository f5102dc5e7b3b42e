#include "index/retrieve.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/utf8.h"
#include "index/fts_cjk.h"
#include "index/router.h"
#include "index/vectors.h"

/* BM25 column weights for (kb, doc, title, path, body): kb and doc are filters, not evidence. The title weighs
 * more than the body because a question that names a law should prefer that law's articles. */
#define W_TITLE 2.0
#define W_PATH 1.5
#define W_BODY 1.0
#define MAX_TERMS 40          /* a long question keeps its first MAX_TERMS distinct terms */
#define MAX_TITLE_DOCS 8      /* documents a question may name for the in-document BM25 pass */
#define ROUTER_SCORE 1000.0
/* A local regulation (上海市…, 广东省…) applies in one place; a question that names no place is about the law that
 * applies everywhere, so local documents' BM25 scores are lowered unless the question names their place. Measured
 * on laws-zh semantic questions (gold national in 1,233 of 1,234): see docs/EVAL.md. */
#define LOCAL_PRIOR 0.8
#define PRIOR_POOL 3 /* candidates fetched per result wanted, for the prior to reorder */

const char *cq_retrieve_source_name(int source) {
    return source == CQ_RETRIEVE_ROUTER ? "router" : source == CQ_RETRIEVE_DENSE ? "dense" : "bm25";
}

int cq_retrieve_parse_mode(const char *s, cq_err *err) {
    int modes = 0;
    char *copy = strdup(s ? s : "");
    if (!copy) return 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "router")) modes |= CQ_RETRIEVE_ROUTER;
        else if (!strcmp(t, "bm25")) modes |= CQ_RETRIEVE_BM25;
        else if (!strcmp(t, "dense")) modes |= CQ_RETRIEVE_DENSE;
        else if (!strcmp(t, "hybrid")) modes |= CQ_RETRIEVE_HYBRID;
        else {
            cq_err_set(err, CQ_ERR_INVALID, "unknown retrieval mode '%s' (use router, bm25, dense or hybrid)", t);
            free(copy);
            return 0;
        }
    }
    free(copy);
    if (!modes) cq_err_set(err, CQ_ERR_INVALID, "empty retrieval mode");
    return modes;
}

/* ---- query terms -------------------------------------------------------------------------------------------- */

/* Bigrams that only say "this is a question" and words that carry no topic. They are removed from the query;
 * everything else is weighed by BM25's IDF. */
static const char *const stop_terms[] = {
    "什么", "是什", "么是", "么的", "哪些", "些是", "有哪", "怎么", "么办", "怎样", "如何", "多少", "是否", "为什",
    "么样", "请问", "哪个", "哪里", "哪项", "的是", "是多", "吗?", "的内", "内容", "容是", "条的", "条规", "定了",
    "了什", "是怎", "么规", "规定", "定的", "的规", "应当", "可以", "什么?",
    "the", "a", "an", "of", "to", "in", "and", "or", "is", "are", "was", "be", "by", "for", "on", "with", "as",
    "at", "that", "this", "what", "which", "who", "whom", "does", "do", "did", "how", "any", "if", "it", "its",
    "there", "from", "under", "shall", "may", "not", "no", "than", "then", "these", "those", "such", "into",
};

static int is_stop(const char *t) {
    for (size_t i = 0; i < sizeof stop_terms / sizeof stop_terms[0]; i++)
        if (!strcmp(t, stop_terms[i])) return 1;
    return 0;
}

typedef struct {
    char **terms;
    size_t n, cap;
} term_list;

static int collect_term(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)start;
    (void)end;
    term_list *l = ctx;
    if (flags & CQ_FTS_TOK_TAIL) return 0; /* the tail unigram of a run adds nothing to its bigrams */
    if (l->n >= MAX_TERMS || len == 0 || len > 64) return 0;
    char buf[72];
    memcpy(buf, tok, len);
    buf[len] = 0;
    if (is_stop(buf)) return 0;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->terms[i], buf)) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **p = realloc(l->terms, cap * sizeof *p);
        if (!p) return 0;
        l->terms = p;
        l->cap = cap;
    }
    char *d = strdup(buf);
    if (d) l->terms[l->n++] = d;
    return 0;
}

size_t cq_retrieve_terms(const char *question, char ***terms) {
    term_list l = {0};
    cq_fts_cjk_tokenize(question, strlen(question), CQ_FTS_CJK_QUERY, collect_term, &l);
    *terms = l.terms;
    return l.n;
}

void cq_retrieve_terms_free(char **terms, size_t n) {
    for (size_t i = 0; i < n; i++) free(terms[i]);
    free(terms);
}

/* ---- hits --------------------------------------------------------------------------------------------------- */

void cq_hits_free(cq_hits *h) {
    for (size_t i = 0; i < h->n; i++) {
        cq_hit *x = &h->hits[i];
        free(x->doc_name);
        free(x->doc_title);
        free(x->label);
        free(x->path);
        free(x->text);
        free(x->boxes);
    }
    free(h->hits);
    memset(h, 0, sizeof *h);
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

static void append_quoted(cq_strbuf *b, const char *t) {
    cq_strbuf_puts(b, "\"");
    for (const char *p = t; *p; p++) {
        if (*p == '"') cq_strbuf_puts(b, "\"\"");
        else cq_strbuf_append(b, p, 1);
    }
    cq_strbuf_puts(b, "\"");
}

/* The rowid range of a document's clauses (they are inserted together, so their ids are consecutive). */
static cq_status doc_rowid_range(sqlite3 *db, int64_t doc_id, int64_t *lo, int64_t *hi, cq_err *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT min(id), max(id) FROM clauses WHERE doc_id = ?", -1, &st, NULL) != SQLITE_OK)
        return cq_err_set(err, CQ_ERR_DB, "bm25: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, doc_id);
    *lo = 1;
    *hi = 0;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *lo = sqlite3_column_int64(st, 0);
        *hi = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return CQ_OK;
}

typedef struct {
    int64_t id;
    double score;
} scored;

static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->score < y->score ? 1 : (x->score > y->score ? -1 : (x->id > y->id) - (x->id < y->id));
}

/* Appends up to `limit` (clause id, score) pairs for the query, restricted to rowids [lo, hi] when lo <= hi. */
static cq_status bm25_query(sqlite3 *db, int64_t kb_id, const char *match, int64_t lo, int64_t hi, size_t limit,
                            scored *out, size_t *n, size_t cap, cq_err *err) {
    char sql[320];
    snprintf(sql, sizeof sql,
             "SELECT rowid, bm25(" CQ_FTS_TABLE_FMT ", %g, %g, %g) AS r FROM " CQ_FTS_TABLE_FMT " WHERE "
             CQ_FTS_TABLE_FMT " MATCH ?1 %s ORDER BY r LIMIT ?2",
             (long long)kb_id, W_TITLE, W_PATH, W_BODY, (long long)kb_id, (long long)kb_id,
             lo <= hi ? "AND rowid BETWEEN ?3 AND ?4" : "");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return cq_err_set(err, CQ_ERR_DB, "bm25: %s", sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, match, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)limit);
    if (lo <= hi) {
        sqlite3_bind_int64(st, 3, lo);
        sqlite3_bind_int64(st, 4, hi);
    }
    int rc;
    while (*n < cap && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        out[*n].id = sqlite3_column_int64(st, 0);
        out[*n].score = -sqlite3_column_double(st, 1); /* FTS5 bm25 is negative: more negative is better */
        (*n)++;
    }
    sqlite3_finalize(st);
    return CQ_OK;
}

static cq_status apply_local_prior(sqlite3 *db, const char *question, scored *found, size_t n, cq_err *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT d.name FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return cq_err_set(err, CQ_ERR_DB, "bm25: %s", sqlite3_errmsg(db));
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, found[i].id);
        char place[64];
        if (sqlite3_step(st) == SQLITE_ROW &&
            cq_router_local_place((const char *)sqlite3_column_text(st, 0), place, sizeof place)) {
            /* "上海市" is also asked as "上海": drop the last character (省/市/县) before looking. */
            size_t len = strlen(place);
            if (len > 3) place[len - 3] = 0;
            if (!strstr(question, place)) found[i].score *= LOCAL_PRIOR;
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return CQ_OK;
}

/* BM25 over the KB's FTS table: terms OR-ed; when docs are given, only their clauses (best first over all of
 * them). Adds the results to h after what it holds. */
static cq_status bm25(cq_store *s, int64_t kb_id, const char *question, char **terms, size_t n_terms,
                      const cq_title_match *docs, size_t n_docs, cq_hits *h, size_t k, cq_err *err) {
    if (n_terms == 0 || h->n >= k) return CQ_OK;
    cq_strbuf q = {0};
    for (size_t i = 0; i < n_terms; i++) {
        if (i) cq_strbuf_puts(&q, " OR ");
        append_quoted(&q, terms[i]);
    }
    if (q.failed) {
        cq_strbuf_free(&q);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    sqlite3 *db = cq_store_db(s);
    size_t want = (k + h->n) * PRIOR_POOL, cap = want * (n_docs ? n_docs : 1), n = 0;
    scored *found = malloc(cap * sizeof *found);
    cq_status rc = found ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && !n_docs) rc = bm25_query(db, kb_id, q.data, 1, 0, want, found, &n, cap, err);
    for (size_t i = 0; !rc && i < n_docs; i++) {
        int64_t lo = 1, hi = 0;
        rc = doc_rowid_range(db, docs[i].doc_id, &lo, &hi, err);
        if (!rc && lo <= hi) rc = bm25_query(db, kb_id, q.data, lo, hi, want, found, &n, cap, err);
    }
    cq_strbuf_free(&q);
    if (!rc) rc = apply_local_prior(db, question, found, n, err);
    if (!rc) qsort(found, n, sizeof *found, cmp_scored);
    for (size_t i = 0; !rc && i < n && h->n < k; i++) rc = add_hit(s, h, k, found[i].id, found[i].score, CQ_RETRIEVE_BM25, 0, 0, err);
    free(found);
    return rc;
}

/* ---- fusion ------------------------------------------------------------------------------------------------- */

#define RRF_K 60.0    /* reciprocal-rank fusion: a list's rank r adds 1 / (RRF_K + r) */
#define DENSE_POOL 50 /* nearest clauses fetched from the vector index */

typedef struct {
    int64_t id;
    double score;
    int source;   /* the list where the clause ranks best */
    int best_rank;
} fused;

static int cmp_fused(const void *a, const void *b) {
    const fused *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void fuse_add(fused *f, size_t *n, int64_t id, int rank, int source) {
    size_t i;
    for (i = 0; i < *n && f[i].id != id; i++) {
    }
    if (i == *n) f[(*n)++] = (fused){id, 0, source, rank};
    f[i].score += 1.0 / (RRF_K + rank);
    if (rank < f[i].best_rank) {
        f[i].best_rank = rank;
        f[i].source = source;
    }
}

/* Dense retrieval and its fusion with what h holds: router hits stay first (they are exact); the BM25 list after
 * them and the dense list are merged by reciprocal-rank fusion (only the dense list when BM25 was not asked for). */
static cq_status dense_fuse(cq_store *s, int64_t kb_id, const char *question, cq_hits *h, size_t k, cq_err *err) {
    int64_t ids[DENSE_POOL];
    float cos[DENSE_POOL];
    size_t nd = 0;
    cq_status rc = cq_dense_search(cq_dense_attached(s), s, kb_id, question, DENSE_POOL, ids, cos, &nd, err);
    if (rc) return rc;
    size_t routed = 0;
    while (routed < h->n && h->hits[routed].source == CQ_RETRIEVE_ROUTER) routed++;
    fused *f = malloc((h->n + nd + 1) * sizeof *f);
    if (!f) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    size_t nf = 0;
    for (size_t i = routed; i < h->n; i++) fuse_add(f, &nf, h->hits[i].clause_id, (int)(i - routed) + 1, CQ_RETRIEVE_BM25);
    for (size_t i = 0; i < nd; i++) fuse_add(f, &nf, ids[i], (int)i + 1, CQ_RETRIEVE_DENSE);
    qsort(f, nf, sizeof *f, cmp_fused);
    /* Rebuild the list after the router hits in the fused order; the BM25 hits move aside and are freed after. */
    cq_hits old = {malloc((h->n - routed + 1) * sizeof *old.hits), h->n - routed, 0};
    if (!old.hits) {
        free(f);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    memcpy(old.hits, h->hits + routed, old.n * sizeof *old.hits);
    h->n = routed;
    for (size_t i = 0; !rc && i < nf && h->n < k; i++) {
        if (has_clause(h, f[i].id)) continue;
        rc = add_hit(s, h, k, f[i].id, f[i].score, f[i].source, 0, 0, err);
    }
    cq_hits_free(&old);
    free(f);
    return rc;
}

cq_status cq_retrieve(cq_store *s, int64_t kb_id, const char *question, int modes, size_t k, cq_hits *out,
                      cq_err *err) {
    memset(out, 0, sizeof *out);
    if (k == 0) return CQ_OK;
    if (k > 200) k = 200;
    if ((modes & CQ_RETRIEVE_DENSE) && !cq_dense_attached(s))
        return cq_err_set(err, CQ_ERR_UNSUPPORTED,
                          "dense retrieval is off: it needs trained SSM encoder weights (models/ssm/ in a models folder) and, "
                          "without a GPU, CLAUSEQA_DENSE=on (docs/SSM.md); use --mode router,bm25");
    out->hits = calloc(k, sizeof *out->hits);
    if (!out->hits) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    cq_clause_ref ref;
    int has_ref = cq_router_parse(question, &ref);
    if (modes & CQ_RETRIEVE_ROUTER) {
        if (has_ref) {
            int64_t ids[64];
            size_t n = 0;
            rc = cq_router_resolve(s, kb_id, question, &ref, ids, k < 64 ? k : 64, &n, err);
            for (size_t i = 0; !rc && i < n; i++)
                rc = add_hit(s, out, k, ids[i], ROUTER_SCORE - (double)i, CQ_RETRIEVE_ROUTER, (int)ref.paragraph,
                             (int)ref.item, err);
        }
    }
    if (!rc && (modes & CQ_RETRIEVE_BM25)) {
        /* The reference itself ("第四十四条") says where, not what: its digits would only match other articles. */
        char *topic = strdup(question);
        if (!topic) {
            cq_hits_free(out);
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
        if (has_ref && ref.end > ref.start) memset(topic + ref.start, ' ', ref.end - ref.start);
        char **terms;
        size_t n_terms = cq_retrieve_terms(topic, &terms);
        free(topic);
        out->n_query_terms = (int)n_terms;
        cq_title_match docs[MAX_TITLE_DOCS];
        size_t n_docs = 0;
        rc = cq_router_titles(s, kb_id, question, docs, MAX_TITLE_DOCS, &n_docs, err);
        /* Documents the question names are searched first (only the best-matching tier), then the whole KB. */
        size_t tier = 0;
        while (tier < n_docs && docs[tier].score >= docs[0].score) tier++;
        if (!rc && tier) rc = bm25(s, kb_id, question, terms, n_terms, docs, tier, out, k, err);
        if (!rc) rc = bm25(s, kb_id, question, terms, n_terms, NULL, 0, out, k, err);
        cq_retrieve_terms_free(terms, n_terms);
    }
    if (!rc && (modes & CQ_RETRIEVE_DENSE)) rc = dense_fuse(s, kb_id, question, out, k, err);
    if (rc) cq_hits_free(out);
    return rc;
}
