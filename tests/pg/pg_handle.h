/* The PostgreSQL store as the tests and benches under tests/ hold it (issue 28: the product's cq_pg, index/store_pg.c,
 * is gone; a PostgreSQL store is a cq_store on db/db.h). cq_pg here is a cq_store known to be on PostgreSQL, with its
 * libpq connection for the tests' own SQL, and the calls of store/postings.h and store/schema.h under the names the
 * tests were written with. Test code only. */
#ifndef CQ_TESTS_PG_HANDLE_H
#define CQ_TESTS_PG_HANDLE_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "db/db.h"
#include "store/store.h"
#include "store/postings.h"
#include "store/schema.h"


typedef struct cq_store cq_pg;

#define CQ_PG_SCHEMA_VERSION CQ_STORE_PG_SCHEMA_VERSION

/* The store as a cq_pg when it is a PostgreSQL one, else NULL. */
static inline cq_pg *cq_store_pg(cq_store *s) {
    return s && cq_db_kind_of(cq_store_conn(s)) == CQ_DB_POSTGRESQL ? s : NULL;
}
static inline cq_status cq_pg_open(const char *conninfo, cq_pg **out, cq_err *err) {
    return cq_store_open_uri(conninfo, out, err);
}
static inline void cq_pg_close(cq_pg *pg) { cq_store_close(pg); }
static inline cq_db *cq_pg_db(cq_pg *pg) { return cq_store_conn(pg); }
static inline PGconn *cq_pg_conn(cq_pg *pg) { return cq_db_pg(cq_store_conn(pg)); }
static inline cq_status cq_pg_schema_version(cq_pg *pg, int *version, cq_err *err) {
    return cq_store_schema_version(cq_store_conn(pg), version, err);
}
static inline cq_status cq_pg_begin(cq_pg *pg, cq_err *err) { return cq_store_begin(pg, err); }
static inline cq_status cq_pg_commit(cq_pg *pg, cq_err *err) { return cq_store_commit(pg, err); }
static inline void cq_pg_rollback(cq_pg *pg) { cq_store_rollback(pg); }
static inline bool cq_pg_in_transaction(cq_pg *pg) { return cq_db_in_transaction(cq_store_conn(pg)); }
static inline cq_status cq_pg_clause_ids_next(cq_pg *pg, size_t n, int64_t *ids, cq_err *err) {
    return cq_postings_clause_ids(cq_store_conn(pg), n, ids, err);
}
static inline cq_status cq_pg_doc_add_clauses(cq_pg *pg, int64_t doc_id, const char *doc_label,
                                                        const cq_store_clause *c, size_t n, int64_t *clause_ids,
                                                        cq_err *err) {
    return cq_postings_doc_add_clauses(cq_store_conn(pg), doc_id, doc_label, c, n, NULL, clause_ids, err);
}
static inline cq_status cq_pg_doc_add_clauses_as(cq_pg *pg, int64_t doc_id, const char *doc_label,
                                                           const cq_store_clause *c, size_t n,
                                                           const int64_t *clause_ids, cq_err *err) {
    return cq_postings_doc_add_clauses(cq_store_conn(pg), doc_id, doc_label, c, n, clause_ids, NULL, err);
}
static inline cq_status cq_pg_bm25(cq_pg *pg, int64_t kb_id, const char *const *terms, size_t n_terms,
                                             const int64_t *doc_ids, size_t n_docs, size_t limit,
                                             cq_keyword_hit **out, size_t *n, cq_err *err) {
    return cq_postings_bm25(cq_store_conn(pg), kb_id, terms, n_terms, doc_ids, n_docs, limit, out, n, err);
}

#endif
