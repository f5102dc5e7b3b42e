/* PostgreSQL's keyword index (issue 20, written on db/db.h since issue 28): one postings list per token and document
 * (store/keyword_postings.h: the same `cjk` tokens and the same BM25 as SQLite's FTS5 tables), in
 *
 *   keyword_postings(kb_id, token, doc_id, n_clauses, postings)   PRIMARY KEY (kb_id, token, doc_id)
 *   documents.keyword_clauses, documents.keyword_positions        FTS5's row count and total size, per document
 *
 * A document's clauses and postings go in together, with COPY (db/db.h's bulk insert): one document of laws-zh is
 * ~50 clauses and ~2,000 postings rows, which row-by-row INSERTs would make ~100 times slower. The store
 * (store/store.c) holds a document's clauses until its finish and gives each its id at once (cq_postings_clause_ids).
 * These calls are the postings side of the store's keyword interface (store/store_internal.h); on SQLite they are
 * CQ_ERR_UNSUPPORTED. */
#ifndef CQ_STORE_POSTINGS_H
#define CQ_STORE_POSTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "db/db.h"
#include "store/keyword_postings.h"
#include "store/store.h"

/* Clause ids for n clauses (increasing; never handed out twice), taken before the clauses are written. */
cq_status cq_postings_clause_ids(cq_db *db, size_t n, int64_t *ids, cq_err *err);

/* Adds a document's clauses c[0..n) and their keyword index (doc_label: what the title column indexes, as
 * cq_store_clause_add's) in the caller's transaction when one is open, else in one of their own. A document's
 * clauses come in one call (the index holds one postings list per token and document): CQ_ERR_EXISTS when it has
 * clauses already. Ids: given_ids (increasing, from cq_postings_clause_ids), or new ones into clause_ids (may be
 * NULL) when given_ids is NULL. */
cq_status cq_postings_doc_add_clauses(cq_db *db, int64_t doc_id, const char *doc_label, const cq_store_clause *c,
                                      size_t n, const int64_t *given_ids, int64_t *clause_ids, cq_err *err);

/* BM25 over KB kb_id for terms[0..n_terms) OR-ed (each term a phrase, as search/retrieve.c asks FTS5): at most limit
 * hits, best first (ties: lower clause id), scores as search/retrieve.c reads FTS5's; with n_docs > 0, the best
 * `limit` of the first of doc_ids[0..n_docs), then of the second, … (the rows read once). One statement, so one
 * snapshot. *out is malloc'd, *n hits in all. */
cq_status cq_postings_bm25(cq_db *db, int64_t kb_id, const char *const *terms, size_t n_terms, const int64_t *doc_ids,
                           size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err);

#endif
