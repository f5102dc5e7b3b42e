/* The keyword index of the PostgreSQL store, in memory: what a document's clauses put into it, and BM25 over what a
 * search reads back. No database here: store/postings.c moves these bytes to and from the tables.
 *
 * The index is one row per (KB, token, document): the token's postings in that document's clauses. Tokens are the
 * `cjk` tokenizer's (store/fts_cjk.h, document mode) over the same three columns as the SQLite store's FTS5 table
 * (title = the document's label, path, body), so a clause is the same bag of positions in both stores.
 *
 * A postings list (bytea) is, per clause holding the token, in increasing clause id order, unsigned LEB128 varints:
 *   clause id - previous clause id (the first: - 0) | D: the clause's positions, all columns |
 *   for each column (title, path, body): n occurrences, then each position - the previous one (the first: - 0)
 * Positions count as FTS5 counts them: one per token, COLOCATED tokens share their position. D rides along in
 * every list so that scoring a clause needs no other read; positions make phrases ("加班费" is the phrase 加班 班费)
 * exact. */
#ifndef CQ_STORE_KEYWORD_POSTINGS_H
#define CQ_STORE_KEYWORD_POSTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* ---- writing: one document's rows ---- */

typedef struct {
    int64_t clause_id;
    const char *title, *path, *body; /* NULL reads as "" */
} cq_keyword_clause;

typedef struct {
    char *token;           /* NUL-terminated folded token */
    int n_clauses;         /* clauses of the document holding it */
    unsigned char *postings;
    size_t postings_bytes;
} cq_keyword_row;

typedef struct {
    cq_keyword_row *rows;  /* sorted by token (bytes) */
    size_t n;
    int64_t n_clauses;     /* rows of the index this document adds (its clauses) */
    int64_t n_positions;   /* positions they hold: what avgdl sums */
} cq_keyword_doc;

/* The rows of a document whose clauses are c[0..n), in increasing clause_id order. */
cq_status cq_keyword_doc_build(const cq_keyword_clause *c, size_t n, cq_keyword_doc *out, cq_err *err);
void cq_keyword_doc_free(cq_keyword_doc *d);

/* ---- searching: BM25 over the rows a query's tokens read ---- */

typedef struct cq_keyword_search cq_keyword_search;

typedef struct {
    int64_t clause_id, doc_id;
    double score; /* higher is better: FTS5's bm25() negated, as search/retrieve.c reads it */
} cq_keyword_hit;

/* A search for terms[0..n_terms): each term is one phrase (the query-mode tokens of its text), the phrases OR-ed,
 * as search/retrieve.c asks FTS5 ("t1" OR "t2" ...). Terms without a token are dropped. */
cq_status cq_keyword_search_new(const char *const *terms, size_t n_terms, cq_keyword_search **out, cq_err *err);
void cq_keyword_search_free(cq_keyword_search *s);

/* The distinct tokens whose rows the search needs (NUL-terminated, owned by the search). */
size_t cq_keyword_search_tokens(const cq_keyword_search *s, const char *const **tokens);

/* Hands the search one row read back: token (one of the above), document, postings (copied). */
cq_status cq_keyword_search_add(cq_keyword_search *s, const char *token, int64_t doc_id, const unsigned char *postings,
                                size_t postings_bytes, cq_err *err);

/* Ranks: n_rows clauses holding n_positions positions in the whole KB (the sums of cq_keyword_doc's counts);
 * only clauses of doc_ids[0..n_docs) when n_docs > 0 (the statistics stay the KB's, as in FTS5). At most limit hits,
 * best first, ties by increasing clause id. *out is malloc'd. */
cq_status cq_keyword_search_rank(cq_keyword_search *s, int64_t n_rows, int64_t n_positions, const int64_t *doc_ids,
                                 size_t n_docs, size_t limit, cq_keyword_hit **out, size_t *n, cq_err *err);

#endif
