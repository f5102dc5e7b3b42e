/* The router's reads (store/router_rows.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/router_rows.h"

#include "db/db.h"

/* Steps st to its end, the first column of each row into out[*n] while *n < max; finalizes it. */
static cq_status ids_into(cq_db_stmt *st, int64_t *out, size_t max, size_t *n, cq_err *err) {
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "router", &rc, err))
        if (*n < max) out[(*n)++] = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    return rc;
}

cq_status cq_store_router_docs_stat(cq_store *s, int64_t kb_id, int64_t *n_docs, int64_t *max_id, int64_t *min_id,
                                    cq_err *err) {
    int64_t v[3];
    cq_status rc = cq_db_ints(cq_store_conn(s), "router", v, 3, err,
                              "SELECT count(*), coalesce(max(id), 0), coalesce(min(id), 0) FROM documents "
                              "WHERE kb_id = ?1 AND status = 'ready'", "i", kb_id);
    *n_docs = v[0];
    *max_id = v[1];
    *min_id = v[2];
    return rc;
}

cq_status cq_store_router_docs(cq_store *s, int64_t kb_id, cq_store_router_doc_fn fn, void *ctx, cq_err *err) {
    /* by id: the cache's ties do not depend on the database's plan */
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "router", &st, err,
                    "SELECT id, name, title FROM documents WHERE kb_id = ?1 AND status = 'ready' ORDER BY id", "i",
                    kb_id))
        return err->code;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "router", &rc, err))
        fn(ctx, cq_db_col_int(st, 0), cq_db_col_text(st, 1), cq_db_col_text(st, 2));
    cq_db_finalize(st);
    return rc;
}

cq_status cq_store_router_by_key(cq_store *s, int64_t doc_id, const char *key, int64_t *out, size_t max, size_t *n,
                                 cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "router", &st, err,
                    "SELECT id FROM clauses WHERE doc_id = ?1 AND label_key = ?2 ORDER BY ord LIMIT 1", "it", doc_id,
                    key))
        return err->code;
    return ids_into(st, out, max, n, err);
}

cq_status cq_store_router_by_path(cq_store *s, int64_t doc_id, const char *pattern, int64_t *out, size_t max,
                                  size_t *n, cq_err *err) {
    if (*n >= max) return CQ_OK;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "router", &st, err,
                    "SELECT id FROM clauses WHERE doc_id = ?1 AND path LIKE ?2 AND kind = 1 ORDER BY ord LIMIT ?3",
                    "iti", doc_id, pattern, (int64_t)(max - *n)))
        return err->code;
    return ids_into(st, out, max, n, err);
}

cq_status cq_store_router_unique_doc(cq_store *s, int64_t kb_id, const char *key, int64_t *doc_id, cq_err *err) {
    *doc_id = 0;
    int64_t found[2];
    size_t n = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "router", &st, err,
                    "SELECT DISTINCT c.doc_id FROM clauses c JOIN documents d ON d.id = c.doc_id "
                    "WHERE c.label_key = ?1 AND d.kb_id = ?2 AND d.status = 'ready' LIMIT 2", "ti", key, kb_id))
        return err->code;
    cq_status rc = ids_into(st, found, 2, &n, err);
    if (!rc && n == 1) *doc_id = found[0];
    return rc;
}
