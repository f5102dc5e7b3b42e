/* BM25 top-k over a KB's FTS table with frequent-term pruning (store/bm25.h). */
#include "store/bm25.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/strbuf.h"
#include "db/db.h"
#include "store/fts_cjk.h"
#include "store/strmap.h"
#include "store/store_internal.h"

/* The first pass visits at most this share of the table's rows (the sum of its terms' rows; the rarest term always):
 * 4.6k of laws-zh's 148k. */
#define FIRST_PASS_SHARE 32
/* Bounds are compared with this relative slack: a sum of rounded terms may exceed its exact value by a few ulps. */
#define BOUND_SLACK 1e-9

/* ---- cq_bm25_stats(fts, request): the statistics bm25() starts from, once per statement ---------------------- */

typedef struct {
    size_t n_phrases;
    sqlite3_int64 *n_hit; /* rows holding each phrase of the MATCH */
    sqlite3_int64 n_row, n_tok;
    int done;
} stats_request;

static int count_row(const Fts5ExtensionApi *api, Fts5Context *fts, void *ctx) {
    (void)api, (void)fts;
    (*(sqlite3_int64 *)ctx)++;
    return SQLITE_OK;
}

static void stats_fn(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int n_val,
                     sqlite3_value **val) {
    stats_request *r = n_val == 1 ? sqlite3_value_pointer(val[0], "cq_bm25_stats") : NULL;
    if (!r || (size_t)api->xPhraseCount(fts) != r->n_phrases) {
        sqlite3_result_error(ctx, "cq_bm25_stats: bad request", -1);
        return;
    }
    if (r->done) return;
    int rc = api->xRowCount(fts, &r->n_row);
    if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &r->n_tok);
    for (size_t i = 0; rc == SQLITE_OK && i < r->n_phrases; i++) {
        r->n_hit[i] = 0;
        rc = api->xQueryPhrase(fts, (int)i, &r->n_hit[i], count_row);
    }
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    r->done = 1;
    sqlite3_result_null(ctx);
}

/* ---- cq_bm25_score(fts, scan): one pass's score of each row ------------------------------------------------- */

#define NO_TERM ((size_t)-1)

typedef struct {
    size_t n_terms;
    const double *idf; /* per term of the query */
    double avgdl;
    const size_t *phrase_term; /* the MATCH's phrase p counts for term phrase_term[p], or for none (NO_TERM) */
    size_t n_phrases;
    double *freq; /* per term, the current row's weighted frequency */
    const int32_t *doc_len; /* tokens of row doc_len_first + i (-1: none), or NULL: ask FTS5 (a lookup a row) */
    int64_t doc_len_first, doc_len_count;
    int64_t rows, lookups;
} scan;

static void score_fn(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int n_val,
                     sqlite3_value **val) {
    scan *sc = n_val == 1 ? sqlite3_value_pointer(val[0], "cq_bm25_scan") : NULL;
    if (!sc || (size_t)api->xPhraseCount(fts) != sc->n_phrases) {
        sqlite3_result_error(ctx, "cq_bm25_score: bad scan", -1);
        return;
    }
    memset(sc->freq, 0, sc->n_terms * sizeof *sc->freq);
    for (size_t p = 0; p < sc->n_phrases; p++) {
        if (sc->phrase_term[p] == NO_TERM) continue;
        Fts5PhraseIter it;
        int col, off;
        int rc = api->xPhraseFirst(fts, (int)p, &it, &col, &off);
        for (; rc == SQLITE_OK && col >= 0; api->xPhraseNext(fts, &it, &col, &off))
            sc->freq[sc->phrase_term[p]] += col < CQ_BM25_N_COLUMNS ? cq_bm25_column_weight[col] : 1.0;
        if (rc != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return;
        }
    }
    int n_tok = -1, rc = SQLITE_OK;
    if (sc->doc_len) {
        const int64_t i = api->xRowid(fts) - sc->doc_len_first;
        if (i >= 0 && i < sc->doc_len_count) n_tok = sc->doc_len[i];
    }
    if (n_tok < 0) {
        rc = api->xColumnSize(fts, -1, &n_tok);
        sc->lookups++;
    }
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    const double doc_len = (double)n_tok;
    sc->rows++;
    double score = 0.0; /* terms with no instance add +0.0: skipping them leaves the sum as it is */
    for (size_t t = 0; t < sc->n_terms; t++)
        if (sc->freq[t] > 0) score += cq_bm25_term(sc->idf[t], sc->freq[t], doc_len, sc->avgdl);
    sqlite3_result_double(ctx, -1.0 * score);
}

/* ---- what a connection keeps between searches ----------------------------------------------------------------
 * Per KB: the FTS table's row and token counts, the rows holding each term seen (bm25()'s idf inputs, one FTS5
 * count per term otherwise), and every row's length in tokens (one docsize lookup per scored row otherwise, the
 * largest share of a row's score: measured ~1.4 of ~2.3 us). They hold while the database is unchanged: the stamp
 * is PRAGMA data_version (commits of other connections) and this connection's sqlite3_total_changes64; any
 * difference drops everything (and so does a search whose fresh counts disagree with the kept ones). The lengths
 * are read once the lookups made without them pass an eighth of the rows (reading them all costs about that many
 * lookups: ~25 ms for 148k rows), so a process that asks one question rarely pays for them. */

#define CACHE_KBS 4
#define CACHE_TERMS 65536 /* terms kept per KB; at that many the table starts over */

typedef struct {
    int64_t kb_id; /* 0: free */
    sqlite3_int64 n_row, n_tok;
    cq_strmap terms;          /* the terms seen */
    sqlite3_int64 *term_hits; /* rows holding terms.keys[i] */
    size_t cap_hits;
    int32_t *doc_len;
    int64_t doc_len_first, doc_len_count, lookups;
    int doc_len_failed;
} kb_cache;

typedef struct {
    sqlite3_int64 data_version, total_changes;
    kb_cache kb[CACHE_KBS];
    unsigned next;
} bm25_cache;

static void kb_cache_clear(kb_cache *k) {
    cq_strmap_free(&k->terms, false);
    free(k->term_hits);
    free(k->doc_len);
    memset(k, 0, sizeof *k);
}

void cq_bm25_cache_free(void *p) {
    bm25_cache *c = p;
    if (!c) return;
    for (int i = 0; i < CACHE_KBS; i++) kb_cache_clear(&c->kb[i]);
    free(c);
}

/* The KB's entry, emptied when the database changed since the last search; NULL when out of memory (no cache). */
static kb_cache *cache_for(cq_store *s, int64_t kb_id) {
    void **slot = cq_store_bm25_slot(s);
    bm25_cache *c = *slot;
    if (!c && !(c = *slot = calloc(1, sizeof *c))) return NULL;
    int64_t dv;
    cq_err ignored = {0};
    if (cq_db_int(cq_store_conn(s), "bm25", &dv, &ignored, "PRAGMA data_version", "")) dv = -1;
    const sqlite3_int64 tc = sqlite3_total_changes64(cq_store_db(s));
    if (dv < 0 || dv != c->data_version || tc != c->total_changes) {
        for (int i = 0; i < CACHE_KBS; i++) kb_cache_clear(&c->kb[i]);
        c->data_version = dv;
        c->total_changes = tc;
        if (dv < 0) return NULL;
    }
    for (int i = 0; i < CACHE_KBS; i++)
        if (c->kb[i].kb_id == kb_id) return &c->kb[i];
    kb_cache *k = &c->kb[c->next++ % CACHE_KBS];
    kb_cache_clear(k);
    k->kb_id = kb_id;
    return k;
}

static void term_put(kb_cache *k, const char *term, sqlite3_int64 n_hit) {
    if (k->terms.n >= CACHE_TERMS) cq_strmap_free(&k->terms, false); /* full: start over */
    if (!cq_grow((void **)&k->term_hits, &k->cap_hits, k->terms.n + 1, sizeof *k->term_hits)) return;
    const long i = cq_strmap_find(&k->terms, term, strlen(term), true);
    if (i >= 0) k->term_hits[i] = n_hit;
}

/* SQLite's varint (FTS5's docsize records: one a column). */
static int read_varint(const unsigned char *p, int n, int *at, uint64_t *v) {
    *v = 0;
    for (int i = 0; i < 9; i++) {
        if (*at >= n) return 0;
        const unsigned char b = p[(*at)++];
        if (i == 8) {
            *v = (*v << 8) | b;
            return 1;
        }
        *v = (*v << 7) | (b & 0x7f);
        if (!(b & 0x80)) return 1;
    }
    return 1;
}

/* Every row's length from the FTS table's docsize records; kept only when they add up to FTS5's own row and token
 * counts (else the lookups go on). */
static void load_doc_len(cq_store *s, kb_cache *k) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT coalesce(min(id), 1), coalesce(max(id), 0) FROM " CQ_FTS_TABLE_FMT "_docsize",
             (long long)k->kb_id);
    int64_t range[2]; /* none: 1, 0 */
    cq_err ignored = {0};
    k->doc_len_failed = 1;
    if (cq_db_ints(cq_store_conn(s), "bm25", range, 2, &ignored, sql, "")) return;
    const int64_t first = range[0], last = range[1];
    if (last < first || last - first >= 64 * (k->n_row + 1024)) return; /* sparse: not worth an array */
    int32_t *len = malloc((size_t)(last - first + 1) * sizeof *len);
    if (!len) return;
    for (int64_t i = 0; i <= last - first; i++) len[i] = -1;
    snprintf(sql, sizeof sql, "SELECT id, sz FROM " CQ_FTS_TABLE_FMT "_docsize", (long long)k->kb_id);
    sqlite3_int64 rows = 0, tokens = 0;
    sqlite3_stmt *st;
    int ok = sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) == SQLITE_OK;
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        const int64_t id = sqlite3_column_int64(st, 0);
        const unsigned char *p = sqlite3_column_blob(st, 1);
        const int n = sqlite3_column_bytes(st, 1);
        uint64_t sum = 0, v;
        int at = 0, cols = 0;
        for (; at < n && read_varint(p, n, &at, &v); cols++) sum += v;
        ok = id >= first && id <= last && cols == CQ_BM25_N_COLUMNS && sum <= INT32_MAX;
        if (!ok) break;
        len[id - first] = (int32_t)sum;
        rows++;
        tokens += (sqlite3_int64)sum;
    }
    sqlite3_finalize(st);
    if (!ok || rows != k->n_row || tokens != k->n_tok) {
        free(len);
        return;
    }
    k->doc_len = len;
    k->doc_len_first = first;
    k->doc_len_count = last - first + 1;
    k->doc_len_failed = 0;
}

/* ---- queries ------------------------------------------------------------------------------------------------ */

static void append_quoted(cq_strbuf *b, const char *t) {
    cq_strbuf_puts(b, "\"");
    for (const char *p = t; *p; p++) {
        if (*p == '"') cq_strbuf_puts(b, "\"\"");
        else cq_strbuf_append(b, p, 1);
    }
    cq_strbuf_puts(b, "\"");
}

static void or_group(cq_strbuf *q, const char *const *terms, size_t n, const unsigned char *use) {
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (use && !use[i]) continue;
        if (any++) cq_strbuf_puts(q, " OR ");
        append_quoted(q, terms[i]);
    }
}

/* "t1" OR "t2" ... over the terms i with use[i] (all when use is NULL); with all, "(those) AND (the terms with
 * all[i])": the rows of the first group, with the phrases of the second to score them. */
static char *match_of(const char *const *terms, size_t n, const unsigned char *use, const unsigned char *all) {
    cq_strbuf q = {0};
    if (all) cq_strbuf_puts(&q, "(");
    or_group(&q, terms, n, use);
    if (all) {
        cq_strbuf_puts(&q, ") AND (");
        or_group(&q, terms, n, all);
        cq_strbuf_puts(&q, ")");
    }
    return cq_strbuf_finish(&q);
}

/* Runs `SELECT rowid, <fn> AS r ... MATCH match [AND rowid BETWEEN lo AND hi] ORDER BY r LIMIT limit` and puts the
 * rows in out (score = -r); frees match (NULL: out of memory). fn is FTS5's bm25() with the column weights, or
 * cq_bm25_score(fts, ?3) with sc bound. */
static cq_status run_scan(sqlite3 *db, int64_t kb_id, char *match, scan *sc, int64_t lo, int64_t hi, size_t limit,
                          cq_bm25_hit *out, size_t *n_out, cq_err *err) {
    if (!match) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    char fn[96], sql[512];
    if (sc) snprintf(fn, sizeof fn, "cq_bm25_score(" CQ_FTS_TABLE_FMT ", ?3)", (long long)kb_id);
    else
        snprintf(fn, sizeof fn, "bm25(" CQ_FTS_TABLE_FMT ", %g, %g, %g)", (long long)kb_id, cq_bm25_column_weight[0],
                 cq_bm25_column_weight[1], cq_bm25_column_weight[2]);
    snprintf(sql, sizeof sql,
             "SELECT rowid, %s AS r FROM " CQ_FTS_TABLE_FMT " WHERE " CQ_FTS_TABLE_FMT
             " MATCH ?1 %s ORDER BY r LIMIT ?2",
             fn, (long long)kb_id, (long long)kb_id, lo <= hi ? "AND rowid BETWEEN ?4 AND ?5" : "");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    *n_out = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, match, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)limit);
        if (sc) sqlite3_bind_pointer(st, 3, sc, "cq_bm25_scan", NULL);
        if (lo <= hi) {
            sqlite3_bind_int64(st, 4, lo);
            sqlite3_bind_int64(st, 5, hi);
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n_out < limit) {
            out[*n_out].id = sqlite3_column_int64(st, 0);
            out[*n_out].score = -sqlite3_column_double(st, 1); /* bm25 is negative: more negative is better */
            (*n_out)++;
        }
    }
    sqlite3_finalize(st);
    free(match);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? CQ_OK : cq_err_set(err, CQ_ERR_DB, "bm25: %s", sqlite3_errmsg(db));
}

cq_status cq_bm25_top_reference(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms, int64_t lo,
                                int64_t hi, size_t limit, cq_bm25_hit *out, size_t *n_out, cq_err *err) {
    *n_out = 0;
    if (!n_terms || !limit) return CQ_OK;
    return run_scan(cq_store_db(s), kb_id, match_of(terms, n_terms, NULL, NULL), NULL, lo, hi, limit, out, n_out, err);
}

/* The rows holding each term with use[i], and the table's row and token counts, as bm25() gets them; r->done stays
 * 0 when no row holds any of them. */
static cq_status term_stats(sqlite3 *db, int64_t kb_id, const char *const *terms, size_t n_terms,
                            const unsigned char *use, stats_request *r, cq_err *err) {
    char *match = match_of(terms, n_terms, use, NULL);
    if (!match) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT cq_bm25_stats(" CQ_FTS_TABLE_FMT ", ?2) FROM " CQ_FTS_TABLE_FMT " WHERE " CQ_FTS_TABLE_FMT
             " MATCH ?1 LIMIT 1",
             (long long)kb_id, (long long)kb_id, (long long)kb_id);
    sqlite3_stmt *st = NULL;
    int step = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (step == SQLITE_OK) {
        sqlite3_bind_text(st, 1, match, -1, SQLITE_STATIC);
        sqlite3_bind_pointer(st, 2, r, "cq_bm25_stats", NULL);
        step = sqlite3_step(st);
    }
    cq_status rc = step == SQLITE_ROW || step == SQLITE_DONE ? CQ_OK
                                                             : cq_err_set(err, CQ_ERR_DB, "bm25: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    free(match);
    return rc;
}

typedef struct {
    sqlite3_int64 *n_hit, *stat_hit;
    double *idf, *freq;
    size_t *by_rows, *phrase_term;
    unsigned char *use, *live;
} work;

static void work_free(work *w) {
    free(w->n_hit);
    free(w->stat_hit);
    free(w->idf);
    free(w->freq);
    free(w->by_rows);
    free(w->phrase_term);
    free(w->use);
    free(w->live);
}

static _Thread_local const sqlite3_int64 *t_sort_rows; /* cmp_rows' context (threads search at once) */

static int cmp_rows(const void *a, const void *b) {
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const sqlite3_int64 x = t_sort_rows[i], y = t_sort_rows[j];
    if (x != y) return x < y ? -1 : 1;
    return (i > j) - (i < j);
}

/* The MATCH of a pass and its phrases' terms: the terms with w->use[i]; with all, "(those) AND (all's)", scored by
 * the second group's phrases. */
static char *pass_match(const char *const *terms, size_t n_terms, scan *sc, work *w, const unsigned char *all) {
    sc->n_phrases = 0;
    for (size_t i = 0; i < n_terms; i++)
        if (w->use[i]) w->phrase_term[sc->n_phrases++] = all ? NO_TERM : i;
    for (size_t i = 0; all && i < n_terms; i++)
        if (all[i]) w->phrase_term[sc->n_phrases++] = i;
    return match_of(terms, n_terms, w->use, all);
}

cq_status cq_bm25_top(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms, int64_t lo, int64_t hi,
                      size_t limit, cq_bm25_hit *out, size_t *n_out, cq_bm25_trace *trace, cq_err *err) {
    *n_out = 0;
    if (trace) memset(trace, 0, sizeof *trace);
    if (!n_terms || !limit) return CQ_OK;
    sqlite3 *db = cq_store_db(s);
    work w = {0};
    w.n_hit = calloc(n_terms, sizeof *w.n_hit);
    w.stat_hit = calloc(n_terms, sizeof *w.stat_hit);
    w.idf = calloc(n_terms, sizeof *w.idf);
    w.freq = calloc(n_terms, sizeof *w.freq);
    w.by_rows = calloc(n_terms, sizeof *w.by_rows);
    w.phrase_term = calloc(2 * n_terms, sizeof *w.phrase_term);
    w.use = calloc(n_terms, 1);
    w.live = calloc(n_terms, 1);
    if (!w.n_hit || !w.stat_hit || !w.idf || !w.freq || !w.by_rows || !w.phrase_term || !w.use || !w.live) {
        work_free(&w);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    /* the rows of each term, and the table's rows and tokens: kept from earlier searches, or counted now */
    kb_cache *k = cache_for(s, kb_id);
    sqlite3_int64 n_row = 0, n_tok = 0;
    cq_status rc = CQ_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t n_unknown = 0;
        for (size_t i = 0; i < n_terms; i++) {
            const long e = k ? cq_strmap_find(&k->terms, terms[i], strlen(terms[i]), false) : -1;
            w.use[i] = e < 0; /* not kept: its rows are counted below */
            if (e >= 0) w.n_hit[i] = k->term_hits[e];
            else n_unknown++;
        }
        n_row = k ? k->n_row : 0;
        n_tok = k ? k->n_tok : 0;
        if (!n_unknown) break;
        stats_request req = {n_unknown, w.stat_hit, 0, 0, 0};
        rc = term_stats(db, kb_id, terms, n_terms, w.use, &req, err);
        if (rc) break;
        if (req.done && k && k->n_row && (k->n_row != req.n_row || k->n_tok != req.n_tok)) {
            /* the table changed without the stamp showing it: forget it all and count again */
            const int64_t id = k->kb_id;
            kb_cache_clear(k);
            k->kb_id = id;
            continue;
        }
        if (req.done) {
            n_row = req.n_row;
            n_tok = req.n_tok;
        }
        if (k) { /* the counts kept (the same ones when none were made) */
            k->n_row = n_row;
            k->n_tok = n_tok;
        }
        for (size_t i = 0, j = 0; i < n_terms; i++) {
            if (!w.use[i]) continue;
            w.n_hit[i] = req.done ? req.n_hit[j++] : 0;
            if (k && n_row) term_put(k, terms[i], w.n_hit[i]);
        }
        break;
    }
    memset(w.use, 0, n_terms);
    /* terms by their rows, rarest first; a term in no row is left out of every MATCH (it would add +0.0) */
    size_t n_live = 0;
    for (size_t i = 0; i < n_terms; i++) {
        w.live[i] = w.n_hit[i] > 0;
        if (w.live[i]) w.by_rows[n_live++] = i;
    }
    if (rc || !n_row || !n_live) { /* an error, or no row holds any term */
        work_free(&w);
        return rc;
    }
    for (size_t i = 0; i < n_terms; i++) w.idf[i] = cq_bm25_idf(n_row, w.n_hit[i]);
    scan sc = {.n_terms = n_terms, .idf = w.idf, .avgdl = (double)n_tok / (double)n_row,
               .phrase_term = w.phrase_term, .freq = w.freq};
    if (k && k->doc_len) {
        sc.doc_len = k->doc_len;
        sc.doc_len_first = k->doc_len_first;
        sc.doc_len_count = k->doc_len_count;
    }
    t_sort_rows = w.n_hit;
    qsort(w.by_rows, n_live, sizeof *w.by_rows, cmp_rows);
    size_t n_first = 0;
    sqlite3_int64 first_rows = 0;
    while (n_first < n_live && (n_first == 0 || first_rows + w.n_hit[w.by_rows[n_first]] <= n_row / FIRST_PASS_SHARE))
        first_rows += w.n_hit[w.by_rows[n_first++]];

    size_t n_pruned = 0;
    int64_t rows = 0;
    int passes = 1;
    if (lo > hi && n_first < n_live) {
        /* first pass: the rarest terms' rows (few), scored in full; their limit-th best, theta, is at most the final
         * limit-th best */
        for (size_t i = 0; i < n_first; i++) w.use[w.by_rows[i]] = 1;
        rc = run_scan(db, kb_id, pass_match(terms, n_terms, &sc, &w, w.live), &sc, lo, hi, limit, out, n_out, err);
        const double theta = !rc && *n_out == limit ? out[limit - 1].score : 0.0;
        /* the most frequent terms while their bounds idf (k1 + 1) add up to less than theta: a row with none of the
         * other terms scores less than theta, and is not visited */
        double bound = 0.0;
        memcpy(w.use, w.live, n_terms);
        for (size_t r = n_live; !rc && r-- > 0;) {
            const size_t t = w.by_rows[r];
            const double b = w.idf[t] * (CQ_BM25_K1 + 1.0);
            if ((bound + b) * (1 + BOUND_SLACK) >= theta) break;
            w.use[t] = 0;
            bound += b;
            n_pruned++;
        }
        rows = sc.rows;
        sc.rows = 0;
        passes = 2;
    } else {
        memcpy(w.use, w.live, n_terms);
    }
    if (!rc)
        rc = run_scan(db, kb_id, pass_match(terms, n_terms, &sc, &w, n_pruned ? w.live : NULL), &sc, lo, hi, limit, out,
                      n_out, err);
    if (k && !k->doc_len && !k->doc_len_failed && (k->lookups += sc.lookups) > k->n_row / 8) load_doc_len(s, k);
    if (trace) {
        trace->kept_lengths = sc.doc_len != NULL;
        trace->passes = passes;
        trace->pruned_terms = n_pruned;
        trace->rows_visited = rows + sc.rows;
    }
    work_free(&w);
    return rc;
}

cq_status cq_bm25_register(sqlite3 *db, cq_err *err) {
    fts5_api *api = NULL;
    cq_status rc = cq_fts5_api(db, &api, err);
    if (rc) return rc;
    if (api->xCreateFunction(api, "cq_bm25_score", NULL, score_fn, NULL) != SQLITE_OK ||
        api->xCreateFunction(api, "cq_bm25_stats", NULL, stats_fn, NULL) != SQLITE_OK)
        return cq_err_set(err, CQ_ERR_DB, "bm25: cannot register the FTS5 functions");
    return CQ_OK;
}
