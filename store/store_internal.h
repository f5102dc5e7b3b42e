/* Internals shared by the store/ modules (not part of the public API). */
#ifndef CQ_STORE_STORE_INTERNAL_H
#define CQ_STORE_STORE_INTERNAL_H

#include "store/store.h"

/* The router's per-connection title cache (search/router.c): owned by the store, freed with it by free_fn (the store
 * calls nothing of search/). */
void **cq_store_router_slot(cq_store *s, void (*free_fn)(void *cache));
/* store/versions.c's per-connection note of the KBs whose documents all have versions (malloc'd; freed with the
 * store). */
void **cq_store_versions_slot(cq_store *s);

/* store/bm25.c's per-connection statistics (freed with the store by cq_bm25_cache_free). */
void **cq_store_bm25_slot(cq_store *s);
void cq_bm25_cache_free(void *cache);

/* A clause's columns (doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, end_off,
 * boxes) bound to placeholders first, first + 1, …: the clauses table's row as store.c (SQLite) and postings.c
 * (PostgreSQL's COPY) write it. */
typedef struct cq_db_stmt cq_db_stmt;
void cq_store_bind_clause(cq_db_stmt *st, int first, int64_t doc_id, const cq_store_clause *c);

/* The keyword index behind the store's rows (store/documents.c writes the rows once for both databases; this is
 * what really differs): SQLite keeps one FTS5 table per KB (CQ_FTS_TABLE_FMT), written clause by clause by
 * cq_store_clause_add; PostgreSQL keeps postings lists per token and document (store/keyword_postings.h), written
 * with the document's clauses, which cq_store_clause_add holds until then.
 *   kb_add:    a new KB's index (SQLite: its FTS table), in the caller's transaction
 *   kb_drop:   before the KB's row is deleted (SQLite: its FTS table; PostgreSQL: its postings go by trigger)
 *   doc_drop:  before a document's row is deleted (SQLite: its FTS rows; PostgreSQL: its clauses still held)
 *   doc_flush: before a document is finished (PostgreSQL: its clauses held, written with their postings) */
cq_status cq_store_keyword_kb_add(cq_store *s, int64_t kb_id, cq_err *err);
cq_status cq_store_keyword_kb_drop(cq_store *s, int64_t kb_id, cq_err *err);
cq_status cq_store_keyword_doc_drop(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err);
cq_status cq_store_keyword_doc_flush(cq_store *s, int64_t doc_id, cq_err *err);

#endif
