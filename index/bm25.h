/* BM25 as clauseqa scores keywords, in both stores: SQLite computes it with FTS5's bm25() (index/retrieve.c), the
 * PostgreSQL store with these functions (index/keyword_postings.c); tests/pg/test_store_pg.c holds the two equal.
 *
 * FTS5's definition (SQLite 3.40, ext/fts5/fts5_aux.c), for a row with D positions over all its columns in a table
 * of N rows holding T positions in all (avgdl = T / N), and query phrases i:
 *   idf_i   = log((N - n_i + 0.5) / (n_i + 0.5)), and 1e-6 when that is <= 0   n_i: rows where phrase i occurs
 *   f_i     = sum over the phrase's occurrences in the row of its column's weight
 *   score   = sum over i of idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl)),  k1 = 1.2, b = 0.75
 * FTS5 returns -score; a position is one token, or a token with the tokens COLOCATED with it (index/fts_cjk.h). The
 * expressions below are written in FTS5's order of operations, so the two stores agree to the last bit. */
#ifndef CQ_INDEX_BM25_H
#define CQ_INDEX_BM25_H

#include <math.h>
#include <stdint.h>

#define CQ_BM25_K1 1.2
#define CQ_BM25_B 0.75

/* Column weights, in the columns' order (title, path, body; index/store.h). The title weighs more than the body
 * because a question that names a law should prefer that law's articles. */
#define CQ_BM25_W_TITLE 2.0
#define CQ_BM25_W_PATH 1.5
#define CQ_BM25_W_BODY 1.0
#define CQ_BM25_N_COLUMNS 3

static inline double cq_bm25_idf(int64_t n_rows, int64_t n_hit) {
    double idf = log(((double)n_rows - (double)n_hit + 0.5) / ((double)n_hit + 0.5));
    return idf <= 0.0 ? 1e-6 : idf;
}

/* One phrase's share of a row's score. */
static inline double cq_bm25_term(double idf, double freq, double row_positions, double avgdl) {
    const double k1 = CQ_BM25_K1, b = CQ_BM25_B;
    return idf * ((freq * (k1 + 1.0)) / (freq + k1 * (1 - b + b * row_positions / avgdl)));
}

#endif
