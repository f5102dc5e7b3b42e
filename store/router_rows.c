/* The router's reads (store/router_rows.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/router_rows.h"

#include <stdlib.h>

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

cq_status cq_store_router_docs_with_key(cq_store *s, int64_t kb_id, const char *key, cq_store_label_doc *out,
                                       size_t max, size_t *n, cq_err *err) {
    *n = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "router", &st, err,
                    "SELECT d.id, coalesce(d.title, d.name), coalesce(v.key, ''), coalesce((SELECT c.label FROM clauses c "
                    "WHERE c.doc_id = d.id AND c.label_key = ?1 ORDER BY c.ord LIMIT 1), '') FROM documents d "
                    "LEFT JOIN doc_versions v ON v.doc_id = d.id WHERE d.kb_id = ?2 AND d.status = 'ready' "
                    "AND EXISTS (SELECT 1 FROM clauses c WHERE c.doc_id = d.id AND c.label_key = ?1) "
                    "ORDER BY d.id LIMIT ?3", "tii", key, kb_id, (int64_t)max))
        return err->code;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "router", &rc, err) && *n < max) {
        cq_store_label_doc *d = &out[*n];
        d->doc_id = cq_db_col_int(st, 0);
        d->name = cq_db_col_strdup(st, 1);
        d->group = cq_db_col_strdup(st, 2);
        d->label = cq_db_col_strdup(st, 3);
        ++*n;
        if (!d->name || !d->group || !d->label) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
    }
    cq_db_finalize(st);
    if (rc) {
        cq_store_label_docs_free(out, *n);
        *n = 0;
    }
    return rc;
}

void cq_store_label_docs_free(cq_store_label_doc *docs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(docs[i].name);
        free(docs[i].group);
        free(docs[i].label);
        docs[i].name = docs[i].group = docs[i].label = NULL;
    }
}
