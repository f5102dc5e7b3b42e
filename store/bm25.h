/* BM25 as clauseqa scores keywords, in both stores: the SQLite store with FTS5's bm25() and the search below
 * (bm25.c), which repeats its arithmetic with these functions; the PostgreSQL store with these functions too
 * (store/keyword_postings.c, searched by store/postings.c); tests/pg/test_store_pg.c and tests/unit/test_index_bm25.c hold them equal.
 *
 * FTS5's definition (SQLite 3.40, ext/fts5/fts5_aux.c), for a row with D positions over all its columns in a table
 * of N rows holding T positions in all (avgdl = T / N), and query phrases i:
 *   idf_i   = log((N - n_i + 0.5) / (n_i + 0.5)), and 1e-6 when that is <= 0   n_i: rows where phrase i occurs
 *   f_i     = sum over the phrase's occurrences in the row of its column's weight
 *   score   = sum over i of idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl)),  k1 = 1.2, b = 0.75
 * FTS5 returns -score; a position is one token, or a token with the tokens COLOCATED with it (store/fts_cjk.h). The
 * expressions below are written in FTS5's order of operations, so the two stores agree to the last bit (the files
 * that use them are built with -ffp-contract=off: no fused multiply-add, whatever -march a build adds).
 *
 * The SQLite store's search (internal to store/): the best clauses for a query's terms OR-ed, ranked by FTS5's
 * bm25() with the column weights title 2, path 1.5, body 1.
 *
 * cq_bm25_top returns what cq_bm25_top_reference returns — the same rows, the same scores bit for bit, in the same
 * order — without scoring every row that matches a term (a frequent bigram such as 规定 or 责任 matches tens of
 * thousands of clauses; FTS5 scores every one). How, with BM25's per-term bound (a term adds
 * idf * f (k1 + 1) / (f + K) < idf (k1 + 1), whatever its frequency f in the row and the row's length):
 *   1. the terms' document frequencies (one FTS5 count per term, as bm25() makes them; the connection keeps them,
 *      and every row's length, while the database does not change: bm25.c);
 *   2. a first pass over the rows of the rarest terms only (at most 1/32 of the table), each scored in full (the
 *      MATCH "(rare terms) AND (all terms)": the rows of the first group, the phrases of the second to score
 *      them); their limit-th best score, theta, is at most the final limit-th best;
 *   3. the most frequent terms whose bounds add up to less than theta cannot bring a row that has none of the
 *      other terms into the result (its score is below theta): the second pass, "(other terms) AND (all terms)",
 *      visits only the rows of the other terms and scores them in full (MaxScore's essential terms). FTS5 still
 *      steps through the frequent terms' lists to the rows visited, but scores only those rows.
 * Every full score is computed as FTS5's bm25() computes it (same operations, same order), so ties and their
 * order (rowid ascending, as SQLite's ORDER BY ... LIMIT keeps equal keys) come out the same. */
#ifndef CQ_STORE_BM25_H
#define CQ_STORE_BM25_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_BM25_K1 1.2
#define CQ_BM25_B 0.75

/* Column weights, in the columns' order (title, path, body; store/store.h). The title weighs more than the body
 * because a question that names a law should prefer that law's articles. */
#define CQ_BM25_W_TITLE 2.0
#define CQ_BM25_W_PATH 1.5
#define CQ_BM25_W_BODY 1.0
#define CQ_BM25_N_COLUMNS 3
static const double cq_bm25_column_weight[CQ_BM25_N_COLUMNS] = {CQ_BM25_W_TITLE, CQ_BM25_W_PATH, CQ_BM25_W_BODY};

static inline double cq_bm25_idf(int64_t n_rows, int64_t n_hit) {
    double idf = log(((double)n_rows - (double)n_hit + 0.5) / ((double)n_hit + 0.5));
    return idf <= 0.0 ? 1e-6 : idf;
}

/* One phrase's share of a row's score. */
static inline double cq_bm25_term(double idf, double freq, double row_positions, double avgdl) {
    const double k1 = CQ_BM25_K1, b = CQ_BM25_B;
    return idf * ((freq * (k1 + 1.0)) / (freq + k1 * (1 - b + b * row_positions / avgdl)));
}

typedef struct cq_bm25_hit {
    int64_t id;   /* clause id (the FTS rowid) */
    double score; /* -bm25(): larger is better */
} cq_bm25_hit;

/* What a search did (for benchmarks and tests). */
typedef struct {
    int passes;             /* FTS5 queries that scored rows: 1 (no pruning) or 2 */
    size_t pruned_terms;    /* terms whose rows the last pass did not visit */
    int64_t rows_visited;   /* rows scored in all passes */
    int kept_lengths;       /* the rows' lengths came from the connection's copy, not a lookup a row */
} cq_bm25_trace;

/* The best `limit` clauses of KB kb_id for the n_terms terms (each quoted as one FTS5 phrase, OR-ed), restricted
 * to rowids [lo, hi] when lo <= hi, best first: out[0 .. *n_out), *n_out <= limit. trace may be NULL. */
cq_status cq_bm25_top(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms, int64_t lo, int64_t hi,
                      size_t limit, cq_bm25_hit *out, size_t *n_out, cq_bm25_trace *trace, cq_err *err);

/* The plain twin: FTS5's own bm25() over every matching row, ORDER BY it, LIMIT. */
cq_status cq_bm25_top_reference(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms, int64_t lo,
                                int64_t hi, size_t limit, cq_bm25_hit *out, size_t *n_out, cq_err *err);

/* Registers the auxiliary functions cq_bm25_score and cq_bm25_stats on db (once per connection; store.c). */
cq_status cq_bm25_register(sqlite3 *db, cq_err *err);

#endif
