/* Clause vectors, document states and the change feed in the PostgreSQL store (vectors_pg.h). Vectors travel as
 * bytea: arrays of them as hex text in one statement (a document's few hundred vectors), results in binary. */
#include "index/vectors_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strbuf.h"
#include "index/pg_rows.h"

#define ID_TEXT(buf, v) snprintf(buf, sizeof buf, "%lld", (long long)(v))

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

cq_status cq_pg_vectors_store(cq_pg *pg, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids,
                              const float *vectors, size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    PGconn *c = cq_pg_conn(pg);
    cq_strbuf ids = {0}, vecs = {0};
    ids_literal(&ids, clause_ids, n);
    vectors_literal(&vecs, vectors, n, dim);
    if (ids.failed || vecs.failed) {
        cq_strbuf_free(&ids);
        cq_strbuf_free(&vecs);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    char kb[32];
    ID_TEXT(kb, kb_id);
    bool began;
    cq_status rc = cq_pgr_begin(c, &began, err);
    const char *del[] = {ids.data};
    /* a replaced vector goes first: never updated in place (the feed's triggers see a delete and an add) */
    if (!rc)
        rc = cq_pgr_exec(c, "DELETE FROM clause_vectors WHERE clause_id = ANY($1::bigint[])", 1, del,
                         "store vectors", NULL, err);
    /* the clauses' documents, checked to be the KB's: the same statement */
    const char *ins[] = {kb, model, ids.data, vecs.data};
    int64_t added = 0;
    if (!rc)
        rc = cq_pgr_exec(c,
                         "INSERT INTO clause_vectors(clause_id, doc_id, kb_id, model, vec) SELECT c.id, c.doc_id, $1, "
                         "$2, u.vec FROM unnest($3::bigint[], $4::bytea[]) u(id, vec) JOIN clauses c ON c.id = u.id "
                         "JOIN documents d ON d.id = c.doc_id AND d.kb_id = $1",
                         4, ins, "store vectors", &added, err);
    if (!rc && (size_t)added != n)
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "store vectors: %zu of %zu clauses are not in knowledge base %lld",
                        n - (size_t)added, n, (long long)kb_id);
    cq_strbuf_free(&ids);
    cq_strbuf_free(&vecs);
    return cq_pgr_end(c, began, rc, err);
}

cq_status cq_pg_vectors_delete(cq_pg *pg, const int64_t *clause_ids, size_t n, cq_err *err) {
    if (!n) return CQ_OK;
    cq_strbuf ids = {0};
    ids_literal(&ids, clause_ids, n);
    if (ids.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const char *params[] = {ids.data};
    cq_status rc = cq_pgr_exec(cq_pg_conn(pg), "DELETE FROM clause_vectors WHERE clause_id = ANY($1::bigint[])", 1,
                               params, "remove vectors", NULL, err);
    cq_strbuf_free(&ids);
    return rc;
}

cq_status cq_pg_vectors_count(cq_pg *pg, int64_t kb_id, const char *model, size_t *n, cq_err *err) {
    *n = 0;
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb, model};
    PGresult *r = cq_pgr_query(cq_pg_conn(pg), "SELECT count(*) FROM clause_vectors WHERE kb_id = $1 AND model = $2", 2,
                               params, "count vectors", err);
    if (!r) return CQ_ERR_DB;
    *n = (size_t)cq_pgr_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

/* The feed position a snapshot's rows are current to: the largest seq it sees (writers are serialised, so every
 * change it does not see comes after), or the horizon when the changes were pruned. */
#define FEED_SEQ_SQL                                                                                                \
    "greatest((SELECT coalesce(max(seq), 0) FROM vector_changes), (SELECT pruned_to FROM vector_changes_horizon))"

cq_status cq_pg_vectors_read_all(cq_pg *pg, int64_t kb_id, const char *model, int dim, int64_t **ids, float **x,
                                 size_t *n, int64_t *seq, cq_err *err) {
    *ids = NULL;
    *x = NULL;
    *n = 0;
    *seq = 0;
    PGconn *c = cq_pg_conn(pg);
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb, model};
    /* One statement, one snapshot (even at READ COMMITTED): the feed position first, then the rows, one at a time
     * (a KB's vectors can be hundreds of MB; single-row mode never holds them twice). */
    if (!PQsendQueryParams(c,
                           "SELECT NULL::bigint, " FEED_SEQ_SQL ", NULL::bytea UNION ALL (SELECT 0, clause_id, vec FROM "
                           "clause_vectors WHERE kb_id = $1 AND model = $2 ORDER BY clause_id)",
                           2, NULL, params, NULL, NULL, 1) ||
        !PQsetSingleRowMode(c))
        return cq_pgr_error(c, err, "read vectors");
    const size_t bytes = (size_t)dim * sizeof(float);
    size_t cap = 0;
    cq_status rc = CQ_OK;
    PGresult *r;
    while ((r = PQgetResult(c))) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_SINGLE_TUPLE && !rc) {
            if (PQgetisnull(r, 0, 0)) {
                *seq = cq_pgr_int64(r, 0, 1);
            } else if ((size_t)PQgetlength(r, 0, 2) != bytes) {
                rc = cq_err_set(err, CQ_ERR_FORMAT, "clause %lld: stored vector has %d bytes, expected %zu",
                                (long long)cq_pgr_int64(r, 0, 1), PQgetlength(r, 0, 2), bytes);
            } else {
                if (*n == cap) {
                    cap = cap ? 2 * cap : 1024;
                    int64_t *pi = realloc(*ids, cap * sizeof *pi);
                    if (pi) *ids = pi;
                    float *px = pi ? realloc(*x, cap * bytes) : NULL;
                    if (px) *x = px;
                    if (!pi || !px) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %zu vectors", cap);
                }
                if (!rc) {
                    (*ids)[*n] = cq_pgr_int64(r, 0, 1);
                    memcpy(*x + *n * (size_t)dim, PQgetvalue(r, 0, 2), bytes);
                    (*n)++;
                }
            }
        } else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && !rc) {
            rc = cq_pgr_error(c, err, "read vectors");
        }
        PQclear(r);
    }
    if (rc) {
        free(*ids);
        free(*x);
        *ids = NULL;
        *x = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_pg_vectors_get(cq_pg *pg, int64_t kb_id, const char *model, int dim, const int64_t *clause_ids, size_t n,
                            int64_t *out_ids, float *out_x, size_t *got, cq_err *err) {
    *got = 0;
    if (!n) return CQ_OK;
    cq_strbuf ids = {0};
    ids_literal(&ids, clause_ids, n);
    if (ids.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {ids.data, kb, model};
    PGresult *r = cq_pgr_query(cq_pg_conn(pg),
                               "SELECT clause_id, vec FROM clause_vectors WHERE clause_id = ANY($1::bigint[]) AND "
                               "kb_id = $2 AND model = $3 ORDER BY clause_id",
                               3, params, "read vectors", err);
    cq_strbuf_free(&ids);
    if (!r) return CQ_ERR_DB;
    const size_t bytes = (size_t)dim * sizeof(float);
    cq_status rc = CQ_OK;
    for (int i = 0, rows = PQntuples(r); !rc && i < rows && *got < n; i++) {
        if ((size_t)PQgetlength(r, i, 1) != bytes) {
            rc = cq_err_set(err, CQ_ERR_FORMAT, "clause %lld: stored vector has %d bytes, expected %zu",
                            (long long)cq_pgr_int64(r, i, 0), PQgetlength(r, i, 1), bytes);
            break;
        }
        out_ids[*got] = cq_pgr_int64(r, i, 0);
        memcpy(out_x + *got * (size_t)dim, PQgetvalue(r, i, 1), bytes);
        (*got)++;
    }
    PQclear(r);
    return rc;
}

cq_status cq_pg_vectors_keep_stored(cq_pg *pg, int64_t kb_id, const char *model, int64_t *ids, float *scores,
                                    size_t *n, cq_err *err) {
    if (!*n) return CQ_OK;
    cq_strbuf list = {0};
    ids_literal(&list, ids, *n);
    if (list.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {list.data, kb, model};
    PGresult *r = cq_pgr_query(cq_pg_conn(pg),
                               "SELECT clause_id FROM clause_vectors WHERE clause_id = ANY($1::bigint[]) AND "
                               "kb_id = $2 AND model = $3",
                               3, params, "check vectors", err);
    cq_strbuf_free(&list);
    if (!r) return CQ_ERR_DB;
    size_t kept = 0;
    const int rows = PQntuples(r);
    for (size_t i = 0; i < *n; i++) {
        bool stored = false;
        for (int j = 0; j < rows && !stored; j++) stored = cq_pgr_int64(r, j, 0) == ids[i];
        if (stored) {
            ids[kept] = ids[i];
            scores[kept++] = scores[i];
        }
    }
    PQclear(r);
    *n = kept;
    return CQ_OK;
}

cq_status cq_pg_vectors_doc_kb(cq_pg *pg, int64_t doc_id, int64_t *kb_id, cq_err *err) {
    *kb_id = -1;
    char doc[32];
    ID_TEXT(doc, doc_id);
    const char *params[] = {doc};
    PGresult *r = cq_pgr_query(cq_pg_conn(pg), "SELECT kb_id FROM documents WHERE id = $1", 1, params, "find document",
                               err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) == 1) *kb_id = cq_pgr_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

/* ---- the change feed ---- */

void cq_vector_changes_free(cq_vector_change *c, size_t n) {
    for (size_t i = 0; c && i < n; i++) free(c[i].clause_ids);
    free(c);
}

/* "1,2,3" → ids. */
static cq_status parse_ids(const char *s, int64_t **ids, size_t *n, cq_err *err) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (const char *p = s; *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        (*ids)[(*n)++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return CQ_OK;
}

cq_status cq_pg_vector_changes(cq_pg *pg, int64_t after, size_t limit, cq_vector_change **out, size_t *n,
                               cq_err *err) {
    *out = NULL;
    *n = 0;
    char from[32], lim[32];
    ID_TEXT(from, after);
    snprintf(lim, sizeof lim, "%zu", limit);
    const char *params[] = {from, lim};
    PGresult *r = cq_pgr_query(cq_pg_conn(pg),
                               "SELECT seq, kb_id, doc_id, op = 'delete', array_to_string(clause_ids, ',') FROM "
                               "vector_changes WHERE seq > $1 ORDER BY seq LIMIT $2",
                               2, params, "read vector changes", err);
    if (!r) return CQ_ERR_DB;
    size_t rows = (size_t)PQntuples(r);
    cq_status rc = CQ_OK;
    if (rows && !(*out = calloc(rows, sizeof **out))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < rows; i++) {
        cq_vector_change *c = &(*out)[i];
        c->seq = cq_pgr_int64(r, (int)i, 0);
        c->kb_id = cq_pgr_int64(r, (int)i, 1);
        c->doc_id = cq_pgr_int64(r, (int)i, 2);
        c->deleted = cq_pgr_bool(r, (int)i, 3);
        rc = parse_ids(PQgetvalue(r, (int)i, 4), &c->clause_ids, &c->n_clause_ids, err);
        *n = i + 1;
    }
    PQclear(r);
    if (rc) {
        cq_vector_changes_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_pg_vector_feed_bounds(cq_pg *pg, int64_t *pruned_to, int64_t *last, cq_err *err) {
    PGresult *r = cq_pgr_query(cq_pg_conn(pg),
                               "SELECT pruned_to, coalesce(pg_sequence_last_value(pg_get_serial_sequence("
                               "'vector_changes', 'seq')), 0) FROM vector_changes_horizon",
                               0, NULL, "read the vector feed's bounds", err);
    if (!r) return CQ_ERR_DB;
    *pruned_to = cq_pgr_int64(r, 0, 0);
    *last = cq_pgr_int64(r, 0, 1);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_vector_changes_prune(cq_pg *pg, int64_t max_age_s, int64_t *pruned, cq_err *err) {
    if (pruned) *pruned = 0;
    char cutoff[32];
    ID_TEXT(cutoff, (int64_t)time(NULL) - max_age_s);
    const char *params[] = {cutoff};
    /* one statement: the newest old change, the rows up to it, the horizon moved past them */
    PGresult *r = cq_pgr_query(cq_pg_conn(pg),
                               "WITH cut AS (SELECT max(seq) AS s FROM vector_changes WHERE created_at < $1::bigint), "
                               "gone AS (DELETE FROM vector_changes WHERE seq <= (SELECT s FROM cut) RETURNING seq), "
                               "moved AS (UPDATE vector_changes_horizon SET pruned_to = greatest(pruned_to, "
                               "(SELECT s FROM cut)) WHERE (SELECT s FROM cut) IS NOT NULL RETURNING 1) "
                               "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM moved)",
                               1, params, "prune vector changes", err);
    if (!r) return CQ_ERR_DB;
    if (pruned) *pruned = cq_pgr_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}
