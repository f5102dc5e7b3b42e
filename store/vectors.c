/* Clause vectors and their change feed on db/db.h (store/vectors.h). */
#include "store/vectors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "core/strbuf.h"
#include "db/db.h"
#include "db/dialect.h"

bool cq_store_vectors_shared(cq_store *s) { return cq_db_kind_of(cq_store_conn(s)) == CQ_DB_POSTGRESQL; }

static cq_status nomem(cq_err *err) { return cq_err_set(err, CQ_ERR_NOMEM, "out of memory"); }

static size_t batch_of(size_t n, size_t at) { return n - at < CQ_STORE_VECTORS_BATCH ? n - at : CQ_STORE_VECTORS_BATCH; }

/* ---- storing: row by row (SQLite), a batch per statement (PostgreSQL: the feed's statement triggers) ---- */

static cq_status store_rows(cq_db *db, int64_t kb_id, const char *model, int dim, const int64_t *ids, const float *x,
                            size_t n, bool *replaced, cq_err *err) {
    *replaced = false;
    cq_db_stmt *ins = NULL, *upd = NULL;
    cq_status rc = cq_db_prepare(db, "INSERT INTO clause_vectors(clause_id, kb_id, model, vec) VALUES(?1, ?2, ?3, ?4)",
                                 &ins, err);
    if (!rc)
        rc = cq_db_prepare(db, "UPDATE clause_vectors SET kb_id = ?2, model = ?3, vec = ?4 WHERE clause_id = ?1", &upd,
                           err);
    const size_t bytes = (size_t)dim * sizeof(float);
    for (size_t i = 0; !rc && i < n; i++) {
        for (int k = 0; k < 2; k++) {
            cq_db_stmt *q = k ? upd : ins;
            cq_db_reset(q);
            cq_db_bind_int(q, 1, ids[i]);
            cq_db_bind_int(q, 2, kb_id);
            cq_db_bind_text(q, 3, model);
            cq_db_bind_blob(q, 4, x + i * (size_t)dim, bytes);
        }
        cq_err e = {0};
        int step = cq_db_step(ins, "store vectors", &e);
        if (step < 0 && e.code == CQ_ERR_EXISTS) { /* the clause has one: updated */
            *replaced = true;
            cq_err_clear(&e);
            step = cq_db_step(upd, "store vectors", &e);
        }
        if (step < 0) {
            rc = e.code;
            if (err) *err = e;
        }
    }
    cq_db_finalize(ins);
    cq_db_finalize(upd);
    return rc;
}

static void ids_literal(cq_strbuf *b, const int64_t *ids, size_t n) {
    cq_strbuf_puts(b, "{");
    for (size_t i = 0; i < n; i++) cq_strbuf_printf(b, i ? ",%lld" : "%lld", (long long)ids[i]);
    cq_strbuf_puts(b, "}");
}

/* {"\\x…","\\x…"}: a bytea[] literal of n vectors of dim floats (the backslash escaped for the array). */
static void vectors_literal(cq_strbuf *b, const float *x, size_t n, int dim) {
    static const char hex[] = "0123456789abcdef";
    size_t bytes = (size_t)dim * sizeof(float);
    char *buf = malloc(2 * bytes + 8);
    if (!buf) {
        b->failed = true;
        return;
    }
    cq_strbuf_puts(b, "{");
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)(x + i * (size_t)dim);
        size_t k = 0;
        for (size_t j = 0; j < bytes; j++) {
            buf[k++] = hex[p[j] >> 4];
            buf[k++] = hex[p[j] & 15];
        }
        cq_strbuf_puts(b, i ? ",\"\\\\x" : "\"\\\\x");
        cq_strbuf_append(b, buf, k);
        cq_strbuf_puts(b, "\"");
    }
    cq_strbuf_puts(b, "}");
    free(buf);
}

static cq_status store_batch(cq_db *db, int64_t kb_id, const char *model, int dim, const int64_t *ids, const float *x,
                             size_t n, cq_err *err) {
    cq_strbuf id_list = {0}, vecs = {0};
    ids_literal(&id_list, ids, n);
    vectors_literal(&vecs, x, n, dim);
    bool own = false;
    cq_status rc = id_list.failed || vecs.failed ? nomem(err) : cq_db_begin_own(db, &own, err);
    /* a replaced vector goes first: never updated in place (the feed's triggers see a delete and an add) */
    if (!rc)
        rc = cq_db_run(db, "store vectors", NULL, err, "DELETE FROM clause_vectors WHERE clause_id = ANY(?1::bigint[])",
                       "t", id_list.data);
    /* the clauses' documents, checked to be the KB's: the same statement */
    int64_t added = 0;
    if (!rc)
        rc = cq_db_run(db, "store vectors", &added, err,
                       "INSERT INTO clause_vectors(clause_id, doc_id, kb_id, model, vec) SELECT c.id, c.doc_id, ?1, ?2, "
                       "u.vec FROM unnest(?3::bigint[], ?4::bytea[]) u(id, vec) JOIN clauses c ON c.id = u.id "
                       "JOIN documents d ON d.id = c.doc_id AND d.kb_id = ?1",
                       "ittt", kb_id, model, id_list.data, vecs.data);
    if (!rc && (size_t)added != n)
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "store vectors: %zu of %zu clauses are not in knowledge base %lld",
                        n - (size_t)added, n, (long long)kb_id);
    cq_strbuf_free(&id_list);
    cq_strbuf_free(&vecs);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_vectors_store(cq_store *s, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                                 const float *vectors, size_t n, bool *replaced, cq_err *err) {
    bool any = cq_store_vectors_shared(s); /* a batch deletes what it replaces without telling: any may have been */
    if (replaced) *replaced = false;
    if (!n) return CQ_OK;
    cq_db *db = cq_store_conn(s);
    cq_status rc = any ? store_batch(db, kb_id, model, dim, clause_ids, vectors, n, err)
                       : store_rows(db, kb_id, model, dim, clause_ids, vectors, n, &any, err);
    if (replaced) *replaced = any;
    return rc;
}

/* ---- written once ---- */

cq_status cq_store_vectors_delete(cq_store *s, const int64_t *clause_ids, size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    cq_db *db = cq_store_conn(s);
    bool own = false;
    cq_status rc = n > CQ_STORE_VECTORS_BATCH ? cq_db_begin_own(db, &own, err) : CQ_OK;
    for (size_t at = 0; !rc && at < n; at += CQ_STORE_VECTORS_BATCH) {
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(db, "remove vectors", &st, err, "DELETE FROM clause_vectors WHERE clause_id IN ",
                              clause_ids + at, batch_of(n, at), "", "");
        if (!rc && cq_db_step(st, "remove vectors", err) < 0) rc = err ? err->code : CQ_ERR_DB;
        cq_db_finalize(st);
    }
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_vectors_count(cq_store *s, int64_t kb_id, const char *model, size_t *n, cq_err *err) {
    int64_t count;
    cq_status rc = cq_db_int(cq_store_conn(s), "count vectors", &count, err,
                             "SELECT count(*) FROM clause_vectors WHERE kb_id = ?1 AND model = ?2", "it", kb_id, model);
    *n = rc ? 0 : (size_t)count;
    return rc;
}

/* The vector of column id_col + 1, or NULL with *rc set when it is not bytes long; row: what the id of column id_col
 * names ("clause", "document"). */
static const void *vector_col(cq_db_stmt *st, const char *row, int id_col, size_t bytes, cq_status *rc, cq_err *err) {
    size_t len = 0;
    const void *v = cq_db_col_blob(st, id_col + 1, &len);
    if (len == bytes) return v;
    *rc = cq_err_set(err, CQ_ERR_FORMAT, "%s %lld: stored vector has %zu bytes, expected %zu", row,
                     (long long)cq_db_col_int(st, id_col), len, bytes);
    return NULL;
}

/* Every row st has left, its id (column id_col) and its vector (the next column) appended to *ids and *x (malloc'd;
 * emptied on a failure); st finalized. With seq, a row whose column 0 is NULL is the feed position (column 1). */
static cq_status read_vector_rows(cq_db_stmt *st, const char *what, const char *row, int id_col, size_t bytes,
                                  int64_t **ids, float **x, size_t *n, int64_t *seq, cq_err *err) {
    size_t cap_ids = 0, cap_x = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, what, &rc, err)) {
        if (seq && cq_db_col_null(st, 0)) {
            *seq = cq_db_col_int(st, 1);
            continue;
        }
        const void *v = vector_col(st, row, id_col, bytes, &rc, err);
        if (!v) break;
        if (!cq_grow((void **)ids, &cap_ids, *n + 1, sizeof **ids) || !cq_grow((void **)x, &cap_x, *n + 1, bytes)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %zu vectors", *n + 1);
            break;
        }
        (*ids)[*n] = cq_db_col_int(st, id_col);
        memcpy((char *)*x + *n * bytes, v, bytes);
        (*n)++;
    }
    cq_db_finalize(st);
    if (rc) {
        free(*ids);
        free(*x);
        *ids = NULL;
        *x = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_store_vectors_read_all(cq_store *s, int64_t kb_id, const char *model, int dim, int64_t **ids, float **x,
                                    size_t *n, int64_t *seq, cq_err *err) {
    *ids = NULL;
    *x = NULL;
    *n = 0;
    *seq = cq_store_vectors_shared(s) ? 0 : -1;
    cq_db *db = cq_store_conn(s);
    cq_db_stmt *st;
    /* One statement, one snapshot: on PostgreSQL the feed position comes first (db/dialect.h); the rows one at a
     * time (a KB's vectors can be hundreds of MB). */
    if (cq_db_query(db, "read vectors", &st, err, cq_db_dialect(db, CQ_SQL_VECTORS_READ_ALL), "it", kb_id, model))
        return err->code;
    cq_db_stream(st);
    return read_vector_rows(st, "read vectors", "clause", 1, (size_t)dim * sizeof(float), ids, x, n, seq, err);
}

cq_status cq_store_vectors_get(cq_store *s, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                               size_t n, int64_t *out_ids, float *out_x, size_t *got, cq_err *err) {
    *got = 0;
    cq_db *db = cq_store_conn(s);
    const size_t bytes = (size_t)dim * sizeof(float);
    cq_status rc = CQ_OK;
    for (size_t at = 0; !rc && at < n; at += CQ_STORE_VECTORS_BATCH) {
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(db, "read vectors", &st, err,
                              "SELECT clause_id, vec FROM clause_vectors WHERE kb_id = ?1 AND model = ?2 "
                              "AND clause_id IN ",
                              clause_ids + at, batch_of(n, at), " ORDER BY clause_id", "it", kb_id, model);
        while (*got < n && cq_db_next(st, "read vectors", &rc, err)) {
            const void *v = vector_col(st, "clause", 0, bytes, &rc, err);
            if (!v) break;
            out_ids[*got] = cq_db_col_int(st, 0);
            memcpy(out_x + *got * (size_t)dim, v, bytes);
            (*got)++;
        }
        cq_db_finalize(st);
    }
    return rc;
}

cq_status cq_store_clause_docs(cq_store *s, const int64_t *clause_ids, size_t n, int64_t *doc_of, cq_err *err) {
    for (size_t i = 0; i < n; i++) doc_of[i] = -1;
    cq_status rc = CQ_OK;
    for (size_t at = 0; !rc && at < n; at += CQ_STORE_VECTORS_BATCH) {
        const size_t m = batch_of(n, at);
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(cq_store_conn(s), "clauses' documents", &st, err,
                              "SELECT id, doc_id FROM clauses WHERE id IN ", clause_ids + at, m, "", "");
        while (cq_db_next(st, "clauses' documents", &rc, err)) {
            const int64_t id = cq_db_col_int(st, 0), doc = cq_db_col_int(st, 1);
            for (size_t i = at; i < at + m; i++) /* a clause may stand more than once */
                if (clause_ids[i] == id) doc_of[i] = doc;
        }
        cq_db_finalize(st);
    }
    return rc;
}

cq_status cq_store_doc_vector_means(cq_store *s, const char *model, int dim, const int64_t *docs, size_t n,
                                    float *vecs, cq_err *err) {
    memset(vecs, 0, n * (size_t)dim * sizeof *vecs);
    const size_t bytes = (size_t)dim * sizeof(float);
    double *acc = calloc(n * (size_t)dim + 1, sizeof *acc); /* the sums, a row a document */
    cq_status rc = acc ? CQ_OK : nomem(err);
    for (size_t at = 0; !rc && at < n; at += CQ_STORE_VECTORS_BATCH) { /* the documents' vectors, a statement a batch */
        const size_t m = batch_of(n, at);
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(cq_store_conn(s), "the documents' vectors", &st, err,
                              "SELECT v.clause_id, v.vec, c.doc_id FROM clause_vectors v JOIN clauses c ON "
                              "c.id = v.clause_id WHERE v.model = ?1 AND c.doc_id IN ",
                              docs + at, m, "", "t", model);
        while (cq_db_next(st, "the documents' vectors", &rc, err)) {
            const unsigned char *b = vector_col(st, "clause", 0, bytes, &rc, err);
            if (!b) break;
            const int64_t doc = cq_db_col_int(st, 2);
            for (size_t i = at; i < at + m; i++) /* a document may stand more than once */
                if (docs[i] == doc)
                    for (int k = 0; k < dim; k++) {
                        float x;
                        memcpy(&x, b + (size_t)k * sizeof x, sizeof x);
                        acc[i * (size_t)dim + (size_t)k] += x;
                    }
        }
        cq_db_finalize(st);
    }
    for (size_t i = 0; !rc && i < n; i++) { /* normalized; none stored (a zero sum): zeros */
        const double *a = acc + i * (size_t)dim;
        double norm = 0.0;
        for (int k = 0; k < dim; k++) norm += a[k] * a[k];
        norm = sqrt(norm);
        for (int k = 0; norm > 0 && k < dim; k++) vecs[i * (size_t)dim + (size_t)k] = (float)(a[k] / norm);
    }
    free(acc);
    return rc;
}

cq_status cq_store_vectors_keep_stored(cq_store *s, int64_t kb_id, const char *model, int64_t *ids, float *scores,
                                       size_t *n, cq_err *err) {
    if (!*n) return CQ_OK;
    bool *stored = calloc(*n, sizeof *stored);
    if (!stored) return nomem(err);
    cq_db *db = cq_store_conn(s);
    cq_status rc = CQ_OK;
    for (size_t at = 0; !rc && at < *n; at += CQ_STORE_VECTORS_BATCH) {
        size_t m = batch_of(*n, at);
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(db, "check vectors", &st, err,
                              "SELECT clause_id FROM clause_vectors WHERE kb_id = ?1 AND model = ?2 AND clause_id IN ",
                              ids + at, m, "", "it", kb_id, model);
        while (cq_db_next(st, "check vectors", &rc, err)) {
            int64_t id = cq_db_col_int(st, 0);
            for (size_t i = 0; i < m; i++)
                if (ids[at + i] == id) stored[at + i] = true;
        }
        cq_db_finalize(st);
    }
    if (!rc) {
        size_t kept = 0;
        for (size_t i = 0; i < *n; i++)
            if (stored[i]) {
                ids[kept] = ids[i];
                scores[kept++] = scores[i];
            }
        *n = kept;
    }
    free(stored);
    return rc;
}

cq_status cq_store_doc_kb(cq_store *s, int64_t doc_id, int64_t *kb_id, cq_err *err) {
    cq_status rc = cq_db_int(cq_store_conn(s), "find document", kb_id, err, "SELECT kb_id FROM documents WHERE id = ?1",
                             "i", doc_id);
    if (rc) *kb_id = -1;
    return rc == CQ_ERR_NOT_FOUND ? CQ_OK : rc;
}

/* ---- what else search/vectors.h reads and writes: a KB's model, a document's clause ids, document states ---- */

cq_status cq_vectors_kb_model(cq_store *s, int64_t kb_id, char model[80], int *dim, cq_err *err) {
    model[0] = 0;
    *dim = 0;
    cq_db_stmt *st;
    /* clause_id is SQLite's rowid: the newest vector on both stores */
    if (cq_db_query(cq_store_conn(s), "find the KB's vectors", &st, err,
                    "SELECT model, length(vec) FROM clause_vectors WHERE kb_id = ?1 ORDER BY clause_id DESC LIMIT 1",
                    "i", kb_id))
        return err->code;
    int step = cq_db_step(st, "find the KB's vectors", err);
    if (step == CQ_DB_ROW) {
        cq_db_col_copy(st, 0, model, 80);
        *dim = (int)(cq_db_col_int(st, 1) / (int64_t)sizeof(float));
    }
    cq_db_finalize(st);
    return step < 0 ? err->code : CQ_OK;
}

cq_status cq_vectors_doc_clause_ids(cq_store *s, int64_t doc_id, int64_t **ids, size_t *n, cq_err *err) {
    return cq_db_ids(cq_store_conn(s), "clause ids", ids, n, err, "SELECT id FROM clauses WHERE doc_id = ?1 ORDER BY id",
                     "i", doc_id);
}

cq_status cq_store_doc_vector_put(cq_store *s, int64_t kb_id, int64_t doc_id, const char *model, const char *head,
                                  int dim, const float *vec, cq_err *err) {
    return cq_db_run(cq_store_conn(s), "store a document vector", NULL, err,
                     "INSERT INTO doc_vectors(doc_id, kb_id, model, head, vec) VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT "
                     "(doc_id) DO UPDATE SET kb_id = excluded.kb_id, model = excluded.model, head = excluded.head, "
                     "vec = excluded.vec",
                     "iittb", doc_id, kb_id, model, head, (const void *)vec, (size_t)dim * sizeof(float));
}

cq_status cq_store_doc_vectors_stamp(cq_store *s, int64_t kb_id, const char *model, const char *head, int64_t *count,
                                     int64_t *max_doc, cq_err *err) {
    int64_t v[2];
    cq_status rc = cq_db_ints(cq_store_conn(s), "count document vectors", v, 2, err,
                              "SELECT count(*), coalesce(max(doc_id), 0) FROM doc_vectors WHERE kb_id = ?1 AND "
                              "model = ?2 AND head = ?3", "itt", kb_id, model, head);
    *count = v[0];
    *max_doc = v[1];
    return rc;
}

cq_status cq_store_doc_vectors_kb(cq_store *s, int64_t kb_id, const char *model, const char *head, int dim,
                                  int64_t **ids, float **vecs, size_t *n, cq_err *err) {
    *ids = NULL;
    *vecs = NULL;
    *n = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "read document vectors", &st, err,
                    "SELECT doc_id, vec FROM doc_vectors WHERE kb_id = ?1 AND model = ?2 AND head = ?3 ORDER BY doc_id",
                    "itt", kb_id, model, head))
        return err ? err->code : CQ_ERR_DB;
    return read_vector_rows(st, "read document vectors", "document", 0, (size_t)dim * sizeof(float), ids, vecs, n,
                            NULL, err);
}

/* ---- the change feed (PostgreSQL's tables) ---- */

void cq_vector_changes_free(cq_vector_change *c, size_t n) {
    for (size_t i = 0; c && i < n; i++) free(c[i].clause_ids);
    free(c);
}

static cq_status feed_only(cq_store *s, const char *what, cq_err *err) {
    if (cq_store_vectors_shared(s)) return CQ_OK;
    return cq_err_set(err, CQ_ERR_UNSUPPORTED, "%s: only a PostgreSQL store has a vector feed", what);
}

/* A change's row, its clause ids from "1,2,3": false when out of memory. */
static bool change_read(cq_db_stmt *st, void *elem) {
    cq_vector_change *c = elem;
    c->seq = cq_db_col_int(st, 0);
    c->kb_id = cq_db_col_int(st, 1);
    c->doc_id = cq_db_col_int(st, 2);
    c->deleted = (int)cq_db_col_int(st, 3);
    const char *s = cq_db_col_text(st, 4);
    size_t cap = 1;
    for (const char *p = s; p && *p; p++) cap += *p == ',';
    if (!(c->clause_ids = malloc(cap * sizeof *c->clause_ids))) return false;
    for (const char *p = s; p && *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        c->clause_ids[c->n_clause_ids++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return true;
}

static void change_drop(void *c) { free(((cq_vector_change *)c)->clause_ids); }

cq_status cq_store_vector_changes(cq_store *s, int64_t after, size_t limit, cq_vector_change **out, size_t *n,
                                  cq_err *err) {
    *out = NULL;
    *n = 0;
    if (feed_only(s, "read vector changes", err)) return err->code;
    return cq_db_list(cq_store_conn(s), "read vector changes", sizeof **out, change_read, change_drop, (void **)out, n,
                      err,
                      "SELECT seq, kb_id, doc_id, op = 'delete', array_to_string(clause_ids, ',') FROM "
                      "vector_changes WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                      "ii", after, (int64_t)limit);
}

cq_status cq_store_vector_feed_bounds(cq_store *s, int64_t *pruned_to, int64_t *last, cq_err *err) {
    int64_t v[2] = {0, 0};
    cq_status rc = feed_only(s, "read the vector feed's bounds", err);
    if (!rc) /* the horizon's one row (its migration inserts it; pruning updates it) */
        rc = cq_db_ints(cq_store_conn(s), "read the vector feed's bounds", v, 2, err,
                        "SELECT pruned_to, coalesce(pg_sequence_last_value(pg_get_serial_sequence("
                        "'vector_changes', 'seq')), 0) FROM vector_changes_horizon",
                        "");
    *pruned_to = v[0];
    *last = v[1];
    return rc;
}

cq_status cq_store_vector_changes_prune(cq_store *s, int64_t max_age_s, int64_t *pruned, cq_err *err) {
    if (pruned) *pruned = 0;
    if (feed_only(s, "prune vector changes", err)) return err->code;
    int64_t gone;
    /* one statement: the newest old change, the rows up to it, the horizon moved past them */
    cq_status rc = cq_db_int(cq_store_conn(s), "prune vector changes", &gone, err,
                             "WITH cut AS (SELECT max(seq) AS s FROM vector_changes WHERE created_at < ?1), "
                             "gone AS (DELETE FROM vector_changes WHERE seq <= (SELECT s FROM cut) RETURNING seq), "
                             "moved AS (UPDATE vector_changes_horizon SET pruned_to = greatest(pruned_to, "
                             "(SELECT s FROM cut)) WHERE (SELECT s FROM cut) IS NOT NULL RETURNING 1) "
                             "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)",
                             "i", (int64_t)time(NULL) - max_age_s);
    if (!rc && pruned) *pruned = gone;
    return rc;
}
