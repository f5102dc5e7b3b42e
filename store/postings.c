/* PostgreSQL's keyword index on db/db.h (store/postings.h). */
#include "store/postings.h"
#include "store/store_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

static cq_status nomem(cq_err *err) { return cq_err_set(err, CQ_ERR_NOMEM, "out of memory"); }

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cq_status cq_postings_clause_ids(cq_db *db, size_t n, int64_t *ids, cq_err *err) {
    if (!n) return CQ_OK;
    cq_db_stmt *st;
    if (cq_db_query(db, "reserve clause ids", &st, err, "SELECT nextval('clauses_id_seq') FROM generate_series(1, ?1)",
                    "i", (int64_t)n))
        return err->code;
    size_t got = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "reserve clause ids", &rc, err))
        if (got < n) ids[got++] = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    if (rc || got != n) return rc ? rc : cq_err_set(err, CQ_ERR_DB, "reserve clause ids: short answer");
    qsort(ids, n, sizeof *ids, cmp_int64);
    return CQ_OK;
}

/* The document's row, locked (its clauses and postings come in one call, once): its KB. */
static cq_status lock_document(cq_db *db, int64_t doc_id, int64_t *kb_id, cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_query(db, "add clauses", &st, err,
                    "SELECT kb_id, keyword_clauses FROM documents WHERE id = ?1 FOR UPDATE", "i", doc_id))
        return err->code;
    cq_status rc = cq_db_row(st, "add clauses", err);
    if (rc == CQ_ERR_NOT_FOUND) cq_err_set(err, rc, "no such document");
    else if (!rc && cq_db_col_int(st, 1) > 0)
        rc = cq_err_set(err, CQ_ERR_EXISTS, "the document's clauses are already there");
    if (!rc) *kb_id = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    return rc;
}

static cq_status copy_clauses(cq_db *db, int64_t doc_id, const cq_store_clause *c, size_t n, const int64_t *ids,
                              cq_err *err) {
    cq_db_stmt *st;
    cq_status rc = cq_db_bulk_begin(db, "clauses",
                                    "id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, "
                                    "start_off, end_off, boxes",
                                    13, &st, err);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < n; i++) {
        cq_db_bind_int(st, 1, ids[i]);
        cq_store_bind_clause(st, 2, doc_id, &c[i]);
        rc = cq_db_bulk_row(st, err);
    }
    return cq_db_bulk_end(st, rc, err);
}

static cq_status copy_postings(cq_db *db, int64_t kb_id, int64_t doc_id, const cq_keyword_doc *index, cq_err *err) {
    if (!index->n) return CQ_OK;
    cq_db_stmt *st;
    cq_status rc = cq_db_bulk_begin(db, "keyword_postings", "kb_id, token, doc_id, n_clauses, postings", 5, &st, err);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < index->n; i++) {
        const cq_keyword_row *x = &index->rows[i];
        cq_db_bind_int(st, 1, kb_id);
        cq_db_bind_text(st, 2, x->token);
        cq_db_bind_int(st, 3, doc_id);
        cq_db_bind_int(st, 4, x->n_clauses);
        cq_db_bind_blob(st, 5, x->postings, x->postings_bytes);
        rc = cq_db_bulk_row(st, err);
    }
    return cq_db_bulk_end(st, rc, err);
}

cq_status cq_postings_doc_add_clauses(cq_db *db, int64_t doc_id, const char *doc_label, const cq_store_clause *c,
                                      size_t n, const int64_t *given_ids, int64_t *clause_ids, cq_err *err) {
    if (cq_db_kind_of(db) != CQ_DB_POSTGRESQL)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "add clauses: the postings index is PostgreSQL's");
    for (size_t i = 1; given_ids && i < n; i++)
        if (given_ids[i] <= given_ids[i - 1])
            return cq_err_set(err, CQ_ERR_INVALID, "add clauses: the clause ids must increase");
    int64_t *ids = calloc(n ? n : 1, sizeof *ids);
    cq_keyword_clause *kc = calloc(n ? n : 1, sizeof *kc);
    cq_keyword_doc index = {0};
    int64_t kb_id = 0;
    bool own = false;
    cq_status rc = !ids || !kc ? nomem(err) : cq_db_begin_own(db, &own, err);
    if (!rc) rc = lock_document(db, doc_id, &kb_id, err);
    if (!rc && n) {
        if (given_ids) memcpy(ids, given_ids, n * sizeof *ids);
        else rc = cq_postings_clause_ids(db, n, ids, err);
    }
    if (!rc && n) rc = copy_clauses(db, doc_id, c, n, ids, err);
    for (size_t i = 0; !rc && i < n; i++) kc[i] = (cq_keyword_clause){ids[i], doc_label, c[i].path, c[i].text};
    if (!rc) rc = cq_keyword_doc_build(kc, n, &index, err);
    if (!rc) rc = copy_postings(db, kb_id, doc_id, &index, err);
    if (!rc)
        rc = cq_db_run(db, "index clauses", NULL, err,
                       "UPDATE documents SET keyword_clauses = ?2, keyword_positions = ?3 WHERE id = ?1", "iii", doc_id,
                       (int64_t)index.n_clauses, (int64_t)index.n_positions);
    rc = cq_db_end(db, own, rc, err);
    if (!rc && clause_ids && n) memcpy(clause_ids, ids, n * sizeof *ids);
    cq_keyword_doc_free(&index);
    free(kc);
    free(ids);
    return rc;
}

/* ---- keyword retrieval ---- */

/* A text[] literal: {"a","b"} with '"' and '\' escaped. */
static void array_literal(cq_strbuf *b, const char *const *items, size_t n) {
    cq_strbuf_puts(b, "{");
    for (size_t i = 0; i < n; i++) {
        cq_strbuf_puts(b, i ? ",\"" : "\"");
        for (const char *p = items[i]; *p; p++) {
            if (*p == '"' || *p == '\\') cq_strbuf_puts(b, "\\");
            cq_strbuf_append(b, p, 1);
        }
        cq_strbuf_puts(b, "\"");
    }
    cq_strbuf_puts(b, "}");
}

/* Reads the KB's statistics and every postings row of the search's tokens into s, in one statement (one snapshot,
 * so the statistics are those of the rows read). Every document's rows are read even when the hits are restricted
 * to some documents: a phrase's document frequency is the KB's. */
static cq_status bm25_read(cq_db *db, int64_t kb_id, cq_keyword_search *s, int64_t *n_rows, int64_t *n_positions,
                           cq_err *err) {
    *n_rows = *n_positions = 0;
    const char *const *tokens;
    size_t n_tokens = cq_keyword_search_tokens(s, &tokens);
    if (!n_tokens) return CQ_OK;
    cq_strbuf array = {0};
    array_literal(&array, tokens, n_tokens);
    if (array.failed) return nomem(err);
    cq_db_stmt *st;
    cq_status rc = cq_db_query(db, "keyword search", &st, err,
                               "SELECT NULL::text, sum(keyword_clauses)::bigint, sum(keyword_positions)::bigint, "
                               "NULL::bytea FROM documents WHERE kb_id = ?1 "
                               "UNION ALL SELECT token, doc_id, 0::bigint, postings FROM keyword_postings "
                               "WHERE kb_id = ?1 AND token = ANY(?2::text[])",
                               "it", kb_id, array.data);
    cq_strbuf_free(&array);
    if (rc) return rc;
    while (cq_db_next(st, "keyword search", &rc, err)) {
        if (cq_db_col_null(st, 0)) {
            if (!cq_db_col_null(st, 1)) *n_rows = cq_db_col_int(st, 1), *n_positions = cq_db_col_int(st, 2);
            continue;
        }
        size_t len = 0;
        const void *postings = cq_db_col_blob(st, 3, &len);
        rc = cq_keyword_search_add(s, cq_db_col_text(st, 0), cq_db_col_int(st, 1), postings, len, err);
    }
    cq_db_finalize(st);
    return rc;
}

cq_status cq_postings_bm25(cq_db *db, int64_t kb_id, const char *const *terms, size_t n_terms, const int64_t *doc_ids,
                           size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_keyword_search *s = NULL;
    cq_status rc = cq_keyword_search_new(terms, n_terms, &s, err);
    if (rc) return rc;
    int64_t n_rows = 0, n_positions = 0;
    rc = bm25_read(db, kb_id, s, &n_rows, &n_positions, err);
    if (!rc && !n_docs) rc = cq_keyword_search_rank(s, n_rows, n_positions, NULL, 0, limit, out, n, err);
    if (!rc && n_docs && !(*out = malloc((n_docs * limit + 1) * sizeof **out))) rc = nomem(err);
    for (size_t i = 0; !rc && i < n_docs; i++) {
        cq_keyword_hit *hits = NULL;
        size_t got = 0;
        rc = cq_keyword_search_rank(s, n_rows, n_positions, &doc_ids[i], 1, limit, &hits, &got, err);
        if (!rc) memcpy(*out + *n, hits, got * sizeof *hits);
        if (!rc) *n += got;
        free(hits);
    }
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    cq_keyword_search_free(s);
    return rc;
}
