/* The PostgreSQL store (issue 20, docs/SCALE.md): several clauseqa nodes share one PostgreSQL database.
 *
 * This is its first slice: the schema and its migrations, the rows keyword retrieval needs (KBs, documents,
 * clauses) and the keyword index itself — the same `cjk` tokens (index/fts_cjk.h) and the same BM25 as the SQLite
 * store's FTS5 tables (index/bm25.h), kept in a table of postings lists (index/keyword_postings.h):
 *
 *   clauseqa_schema(version)                       one row; migrations in store_pg.c, run under an advisory lock
 *   kbs(id, name UNIQUE, created_at)
 *   documents(id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, status, error,
 *             quality, quality_reason, created_at, keyword_clauses, keyword_positions)
 *   clauses(id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, end_off, boxes)
 *   keyword_postings(kb_id, token, doc_id, n_clauses, postings)   PRIMARY KEY (kb_id, token, doc_id)
 *   pages(doc_id, page_no, width, height, n_chars, quality, quality_reason)
 *   originals(sha256, part, bytes)                 an uploaded file in parts (store/originals.h)
 *   settings(name, value, updated_at)
 * The SQLite store's columns and meanings (index/store.h), with the keyword statistics a document adds to its KB
 * (keyword_clauses, keyword_positions: FTS5's row count and total size, summed over the KB's documents). Deleting a
 * document (or its KB) removes its clauses and postings by cascade.
 *
 * A cq_pg is one connection (libpq): use it from one thread at a time. */
#ifndef CQ_INDEX_STORE_PG_H
#define CQ_INDEX_STORE_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/keyword_postings.h"
#include "index/store.h"

typedef struct cq_pg cq_pg;
typedef struct pg_conn PGconn;

#define CQ_PG_SCHEMA_VERSION 8

/* Connects (conninfo: a libpq connection string or postgresql:// URI) and brings the schema to
 * CQ_PG_SCHEMA_VERSION. CQ_ERR_DB when the server cannot be reached or refuses; CQ_ERR_UNSUPPORTED when its schema
 * is newer than this program. */
cq_status cq_pg_open(const char *conninfo, cq_pg **out, cq_err *err);
void cq_pg_close(cq_pg *pg);
PGconn *cq_pg_conn(cq_pg *pg); /* for index/ modules and tests that run their own SQL */
typedef struct cq_db cq_db;
cq_db *cq_pg_db(cq_pg *pg);    /* the connection through db/db.h (store/ modules) */
cq_status cq_pg_schema_version(cq_pg *pg, int *version, cq_err *err);

/* ---- a document's clauses and their keyword index (the rows of KBs, documents, pages and clauses are
 * store/documents.c's, written once for both databases) ---- */

/* Adds a document's clauses c[0..n) in one transaction: their rows (ids, increasing, into clause_ids when not NULL)
 * and their keyword index (doc_label: what the title column indexes, as cq_store_clause_add's). A document's
 * clauses come in one call: the index holds one postings list per token and document. */
cq_status cq_pg_doc_add_clauses(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c, size_t n,
                                int64_t *clause_ids, cq_err *err);

/* Clause ids for n clauses (increasing; never handed out twice), taken before the clauses are written: the store
 * (index/store.c) gives the caller a clause's id when it is added and writes the document's clauses together at
 * the document's finish. */
cq_status cq_pg_clause_ids_next(cq_pg *pg, size_t n, int64_t *ids, cq_err *err);
/* cq_pg_doc_add_clauses with ids from cq_pg_clause_ids_next (increasing). Both join the caller's transaction when
 * one is open (cq_pg_begin), else run in one of their own. */
cq_status cq_pg_doc_add_clauses_as(cq_pg *pg, int64_t doc_id, const char *doc_label, const cq_store_clause *c,
                                   size_t n, const int64_t *clause_ids, cq_err *err);

/* ---- transactions (index/store.c's cq_store_begin and commit on PostgreSQL) ---- */
cq_status cq_pg_begin(cq_pg *pg, cq_err *err);
cq_status cq_pg_commit(cq_pg *pg, cq_err *err); /* CQ_ERR_DB when the transaction had failed (rolled back) */
void cq_pg_rollback(cq_pg *pg);
bool cq_pg_in_transaction(cq_pg *pg);


/* ---- keyword retrieval ---- */

/* BM25 over KB kb_id for terms[0..n_terms) OR-ed (each term a phrase, as index/retrieve.c asks FTS5), restricted
 * to the documents doc_ids[0..n_docs) when n_docs > 0: at most limit hits, best first (ties: lower clause id),
 * scores as index/retrieve.c reads FTS5's. One statement, so one snapshot. *out is malloc'd. */
cq_status cq_pg_bm25(cq_pg *pg, int64_t kb_id, const char *const *terms, size_t n_terms, const int64_t *doc_ids,
                     size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err);
/* cq_pg_bm25 restricted to each of doc_ids[0..n_docs) in turn, the rows read once: the best `limit` of the first
 * document, then of the second, … into out (room for n_docs * limit), *n in all. What one call per document gives. */
cq_status cq_pg_bm25_each_doc(cq_pg *pg, int64_t kb_id, const char *const *terms, size_t n_terms,
                              const int64_t *doc_ids, size_t n_docs, size_t limit, cq_keyword_hit *out, size_t *n,
                              cq_err *err);

#endif
