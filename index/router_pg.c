/* The router's reads on PostgreSQL (router_pg.h). Text results: a few rows a question. */
#include "index/router_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/pg_rows.h"

static PGresult *run(cq_pg *pg, const char *sql, int n, const char *const *params, cq_err *err) {
    PGresult *r = PQexecParams(cq_pg_conn(pg), sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) return r;
    /* the server's refusal, or "store unreachable" (503 + Retry-After over HTTP) when the connection is gone */
    cq_pgr_error(cq_pg_conn(pg), err, "router");
    PQclear(r);
    return NULL;
}

static int64_t int_at(const PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

cq_status cq_pg_router_docs_stat(cq_pg *pg, int64_t kb_id, int64_t *n_docs, int64_t *max_id, int64_t *min_id,
                                 cq_err *err) {
    char kb[32];
    snprintf(kb, sizeof kb, "%lld", (long long)kb_id);
    const char *params[] = {kb};
    PGresult *r = run(pg,
                      "SELECT count(*), coalesce(max(id), 0), min(id) FROM documents WHERE kb_id = $1 AND "
                      "status = 'ready'",
                      1, params, err);
    if (!r) return CQ_ERR_DB;
    *n_docs = int_at(r, 0, 0);
    *max_id = int_at(r, 0, 1);
    *min_id = int_at(r, 0, 2);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_router_docs(cq_pg *pg, int64_t kb_id, cq_pg_router_doc_fn fn, void *ctx, cq_err *err) {
    char kb[32];
    snprintf(kb, sizeof kb, "%lld", (long long)kb_id);
    const char *params[] = {kb};
    /* ORDER BY id: the order SQLite's scan of the primary key gives, which the cache's ties follow */
    PGresult *r = run(pg, "SELECT id, name, title FROM documents WHERE kb_id = $1 AND status = 'ready' ORDER BY id",
                      1, params, err);
    if (!r) return CQ_ERR_DB;
    for (int i = 0; i < PQntuples(r); i++)
        fn(ctx, int_at(r, i, 0), PQgetvalue(r, i, 1), PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2));
    PQclear(r);
    return CQ_OK;
}

static cq_status ids_into(PGresult *r, int64_t *out, size_t max, size_t *n) {
    for (int i = 0; i < PQntuples(r) && *n < max; i++) out[(*n)++] = int_at(r, i, 0);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_router_by_key(cq_pg *pg, int64_t doc_id, const char *key, int64_t *out, size_t max, size_t *n,
                              cq_err *err) {
    char doc[32];
    snprintf(doc, sizeof doc, "%lld", (long long)doc_id);
    const char *params[] = {doc, key};
    PGresult *r = run(pg, "SELECT id FROM clauses WHERE doc_id = $1 AND label_key = $2 ORDER BY ord LIMIT 1", 2,
                      params, err);
    return r ? ids_into(r, out, max, n) : CQ_ERR_DB;
}

cq_status cq_pg_router_by_path(cq_pg *pg, int64_t doc_id, const char *pattern, int64_t *out, size_t max, size_t *n,
                               cq_err *err) {
    if (*n >= max) return CQ_OK;
    char doc[32], limit[32];
    snprintf(doc, sizeof doc, "%lld", (long long)doc_id);
    snprintf(limit, sizeof limit, "%zu", max - *n);
    const char *params[] = {doc, pattern, limit};
    PGresult *r = run(pg,
                      "SELECT id FROM clauses WHERE doc_id = $1 AND path LIKE $2 AND kind = 1 ORDER BY ord LIMIT $3",
                      3, params, err);
    return r ? ids_into(r, out, max, n) : CQ_ERR_DB;
}

cq_status cq_pg_router_unique_doc(cq_pg *pg, int64_t kb_id, const char *key, int64_t *doc_id, cq_err *err) {
    *doc_id = 0;
    char kb[32];
    snprintf(kb, sizeof kb, "%lld", (long long)kb_id);
    const char *params[] = {key, kb};
    PGresult *r = run(pg,
                      "SELECT DISTINCT c.doc_id FROM clauses c JOIN documents d ON d.id = c.doc_id "
                      "WHERE c.label_key = $1 AND d.kb_id = $2 AND d.status = 'ready' LIMIT 2",
                      2, params, err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) == 1) *doc_id = int_at(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}
