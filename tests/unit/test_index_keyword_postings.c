/* index/keyword_postings: a document's postings rows from the cjk tokens (positions counted as FTS5 counts them),
 * BM25 over rows read back (store/bm25.h), and bad input. Parity with SQLite FTS5 on a real PostgreSQL store is
 * tests/pg/test_store_pg.c; this needs no server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/bm25.h"
#include "store/keyword_postings.h"

static const cq_keyword_row *row_of(const cq_keyword_doc *d, const char *token) {
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->rows[i].token, token)) return &d->rows[i];
    return NULL;
}

/* Clause 10: 加班费 (3 positions: 加+加班 | 班+班费 | 费); clause 12: title "Overtime", body 加班 (1 + 2). */
static void build_fixture(cq_keyword_doc *d) {
    const cq_keyword_clause c[] = {{10, NULL, "", "加班费"}, {12, "Overtime", NULL, "加班"}};
    cq_err err = {0};
    assert_int_equal(cq_keyword_doc_build(c, 2, d, &err), CQ_OK);
}

static void test_rows(void **state) {
    (void)state;
    cq_keyword_doc d;
    build_fixture(&d);
    assert_int_equal(d.n_clauses, 2);
    assert_int_equal(d.n_positions, 6);
    for (size_t i = 1; i < d.n; i++) assert_true(strcmp(d.rows[i - 1].token, d.rows[i].token) < 0);
    assert_int_equal(row_of(&d, "加班")->n_clauses, 2);
    assert_int_equal(row_of(&d, "班费")->n_clauses, 1);
    assert_int_equal(row_of(&d, "overtime")->n_clauses, 1);
    assert_null(row_of(&d, "加班费"));
    /* 班费 in clause 10 only: id delta 10, D 3, title 0, path 0, body 1 at position 1 */
    const cq_keyword_row *r = row_of(&d, "班费");
    const unsigned char want[] = {10, 3, 0, 0, 1, 1};
    assert_int_equal(r->postings_bytes, sizeof want);
    assert_memory_equal(r->postings, want, sizeof want);
    cq_keyword_doc_free(&d);
}

/* Feeds every row of d for the search's tokens, as the store does after its SELECT. */
static void feed(cq_keyword_search *s, const cq_keyword_doc *d, int64_t doc_id) {
    const char *const *tokens;
    size_t n = cq_keyword_search_tokens(s, &tokens);
    cq_err err = {0};
    for (size_t i = 0; i < n; i++) {
        const cq_keyword_row *r = row_of(d, tokens[i]);
        if (r) assert_int_equal(cq_keyword_search_add(s, tokens[i], doc_id, r->postings, r->postings_bytes, &err), CQ_OK);
    }
}

static void test_rank(void **state) {
    (void)state;
    cq_keyword_doc d;
    build_fixture(&d);
    cq_err err = {0};
    /* 加班费 is the phrase 加班 班费 (clause 10 only); overtime is a word of clause 12's title (weight 2) */
    const char *terms[] = {"加班费", "overtime", "？"};
    cq_keyword_search *s = NULL;
    assert_int_equal(cq_keyword_search_new(terms, 3, &s, &err), CQ_OK);
    const char *const *tokens;
    assert_int_equal(cq_keyword_search_tokens(s, &tokens), 3); /* 加班 班费 overtime */
    feed(s, &d, 7);
    cq_keyword_hit *hits = NULL;
    size_t n = 0;
    /* a KB of 4 clauses, 20 positions: the two of this document and two others without these tokens */
    assert_int_equal(cq_keyword_search_rank(s, 4, 20, NULL, 0, 10, &hits, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    const double idf = cq_bm25_idf(4, 1), avgdl = 20.0 / 4.0;
    const double s12 = cq_bm25_term(idf, CQ_BM25_W_TITLE, 3, avgdl), s10 = cq_bm25_term(idf, CQ_BM25_W_BODY, 3, avgdl);
    assert_int_equal(hits[0].clause_id, 12);
    assert_int_equal(hits[0].doc_id, 7);
    assert_true(hits[0].score == s12);
    assert_int_equal(hits[1].clause_id, 10);
    assert_true(hits[1].score == s10);
    free(hits);
    /* restricted to another document: nothing */
    int64_t other = 8;
    assert_int_equal(cq_keyword_search_rank(s, 4, 20, &other, 1, 10, &hits, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(hits);
    /* a row for a token it did not ask for is a bug */
    assert_int_equal(cq_keyword_search_add(s, "zzz", 7, (const unsigned char *)"", 0, &err), CQ_ERR_INTERNAL);
    cq_keyword_search_free(s);
    cq_keyword_doc_free(&d);
}

static void test_bad_input(void **state) {
    (void)state;
    cq_err err = {0};
    cq_keyword_doc d;
    const cq_keyword_clause c[] = {{5, "", "", "a"}, {5, "", "", "b"}};
    assert_int_equal(cq_keyword_doc_build(c, 2, &d, &err), CQ_ERR_INVALID);
    assert_int_equal(d.n, 0);
    /* a truncated postings list is reported, not read past its end */
    const char *terms[] = {"a"};
    cq_keyword_search *s = NULL;
    assert_int_equal(cq_keyword_search_new(terms, 1, &s, &err), CQ_OK);
    const unsigned char cut[] = {1, 0x80};
    assert_int_equal(cq_keyword_search_add(s, "a", 1, cut, sizeof cut, &err), CQ_OK);
    cq_keyword_hit *hits = NULL;
    size_t n = 0;
    assert_int_equal(cq_keyword_search_rank(s, 1, 1, NULL, 0, 5, &hits, &n, &err), CQ_ERR_FORMAT);
    assert_null(hits);
    cq_keyword_search_free(s);
    /* an empty KB or no terms: no hits, no error */
    assert_int_equal(cq_keyword_search_new(NULL, 0, &s, &err), CQ_OK);
    assert_int_equal(cq_keyword_search_rank(s, 0, 0, NULL, 0, 5, &hits, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    cq_keyword_search_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
