/* index/doc_route: the setting, the top documents by synthetic vectors, the prior on a fused list, and the document
 * vectors (normalized means of stored clause vectors) on a SQLite store, end to end through cq_doc_route_apply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>

#include "search/doc_route.h"
#include "store/vectors.h"
#include "store/store.h"
#include "test_store_util.h"

static void test_parse(void **state) {
    (void)state;
    cq_doc_route r;
    cq_err err = {0};
    assert_int_equal(cq_doc_route_parse(NULL, &r, &err), CQ_OK);
    assert_int_equal(r.top, 0);
    assert_int_equal(cq_doc_route_parse("off", &r, &err), CQ_OK);
    assert_int_equal(r.top, 0);
    assert_int_equal(cq_doc_route_parse("", &r, &err), CQ_OK);
    assert_int_equal(cq_doc_route_parse("3,0.2", &r, &err), CQ_OK);
    assert_int_equal(r.top, 3);
    assert_true(r.beta == 0.2);
    const char *bad[] = {"0,1", "3", "3,", "3,-1", "3,x", "x,1", "1001,1", "3,1e999", "3,0.2z", "on"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(cq_doc_route_parse(bad[i], &r, &err), CQ_ERR_INVALID);
        assert_non_null(strstr(err.msg, "document routing"));
        assert_int_equal(r.top, 0);
    }
}

static void test_top(void **state) {
    (void)state;
    /* q = (1, 0, 0): scores 0.9 (doc 7), 0.1 (doc 3), 0.9 (doc 5), -1 (doc 2), 0.5 (doc 9) */
    const float v[] = {0.9f, 0.1f, 0, 0.1f, 0.9f, 0, 0.9f, 0, 0.4f, -1, 0, 0, 0.5f, 0.5f, 0.5f};
    const int64_t ids[] = {7, 3, 5, 2, 9};
    const float q[] = {1, 0, 0};
    int64_t out[8];
    assert_int_equal(cq_doc_route_top(v, ids, 5, 3, q, 3, out), 3);
    assert_int_equal(out[0], 5); /* ties: the smaller id first */
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 9);
    assert_int_equal(cq_doc_route_top(v, ids, 5, 3, q, 8, out), 5);
    const int64_t all[] = {5, 7, 9, 3, 2};
    assert_memory_equal(out, all, sizeof all);
    assert_int_equal(cq_doc_route_top(v, ids, 5, 3, q, 0, out), 0);
    assert_int_equal(cq_doc_route_top(v, ids, 0, 3, q, 3, out), 0);
}

static void test_prefer(void **state) {
    (void)state;
    /* kept 1: clause 10 stays first whatever its document (it is not lifted); +0.3 lifts the clauses of document 2 */
    cq_fused f[] = {{10, 9.0, false}, {11, 0.9, false}, {12, 0.8, true}, {13, 0.7, false}, {14, 0.6, true},
                    {15, 0.6, false}};
    int64_t doc_of[] = {1, 1, 3, 2, 2, 4};
    const int64_t routed[] = {2};
    cq_doc_route_prefer(f, doc_of, 6, 1, routed, 1, 0.3);
    /* 13: 0.7 + 0.3; 11 (0.9) before 14 (0.6 + 0.3: no higher), 12, 15 */
    const int64_t want[] = {10, 13, 11, 14, 12, 15};
    const int64_t want_docs[] = {1, 2, 1, 2, 3, 4};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(f[i].id, want[i]);
        assert_int_equal(doc_of[i], want_docs[i]);
        if (i > 1) assert_true(f[i].score <= f[i - 1].score);
    }
    assert_true(fabs(f[1].score - 1.0) < 1e-12);
    assert_true(f[0].score == 9.0);
    /* beta 0: nothing moves; ties keep their order */
    cq_fused g[] = {{1, 0.5, false}, {2, 0.5, false}, {3, 0.4, false}};
    int64_t gd[] = {9, 8, 8};
    cq_doc_route_prefer(g, gd, 3, 0, (const int64_t[]){8}, 1, 0.0);
    assert_int_equal(g[0].id, 1);
    assert_int_equal(g[1].id, 2);
    /* kept beyond the list: nothing moves */
    cq_doc_route_prefer(g, gd, 3, 5, (const int64_t[]){8}, 1, 9.0);
    assert_int_equal(g[0].id, 1);
    assert_true(g[0].score == 0.5);
}

/* Stores vec (dim 2) for clause id under model. */
static void put_vec(cq_store *s, int64_t kb, int64_t clause, float x, float y) {
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    float v[2] = {x, y};
    assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO clause_vectors(clause_id, kb_id, model, vec) VALUES(?, ?, "
                                            "'m1', ?)", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, clause);
    sqlite3_bind_int64(st, 2, kb);
    sqlite3_bind_blob(st, 3, v, sizeof v, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
}

static int64_t clause_of(cq_store *s, int64_t doc, int ord) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(s), "SELECT id FROM clauses WHERE doc_id = ? AND ord = ?", -1, &st,
                                        NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, doc);
    sqlite3_bind_int(st, 2, ord);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

static void test_store_vectors_and_apply(void **state) {
    cq_store *s = test_store_of(state);
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_ensure(s, "demo", &kb, &err), CQ_OK);
    const char *const a[][4] = {{NULL, NULL, "", "alpha one"}, {NULL, NULL, "", "alpha two"}};
    const char *const b[][4] = {{NULL, NULL, "", "beta one"}, {NULL, NULL, "", "beta two"}};
    int64_t da = test_add_doc(s, kb, "a", "A", "sha-a", a, 2), db = test_add_doc(s, kb, "b", "B", "sha-b", b, 2);
    int64_t a0 = clause_of(s, da, 0), a1 = clause_of(s, da, 1), b0 = clause_of(s, db, 0), b1 = clause_of(s, db, 1);
    put_vec(s, kb, a0, 1, 0);
    put_vec(s, kb, a1, 0.6f, 0.8f); /* document a: mean (0.8, 0.4), normalized */
    put_vec(s, kb, b0, 0, 1);
    put_vec(s, kb, b1, 0, 1); /* document b: (0, 1) */
    float vecs[6];
    const int64_t docs[] = {da, db, 999};
    assert_int_equal(cq_store_doc_vector_means(s, "m1", 2, docs, 3, vecs, &err), CQ_OK);
    assert_true(fabs(vecs[0] - 0.8 / sqrt(0.8)) < 1e-6 && fabs(vecs[1] - 0.4 / sqrt(0.8)) < 1e-6);
    assert_true(vecs[2] == 0 && vecs[3] == 1);
    assert_true(vecs[4] == 0 && vecs[5] == 0); /* no vectors: zeros */
    assert_int_equal(cq_store_doc_vector_means(s, "other-model", 2, docs, 1, vecs, &err), CQ_OK);
    assert_true(vecs[0] == 0 && vecs[1] == 0);
    assert_int_equal(cq_store_doc_vector_means(s, "m1", 3, docs, 1, vecs, &err), CQ_ERR_FORMAT); /* wrong dimension */

    /* the question points at b: routing to 1 document with beta 0.5 lifts b's clauses above a's (a0 kept) */
    cq_fused f[] = {{a0, 5.0, false}, {a1, 0.9, false}, {b0, 0.7, true}, {b1, 0.2, true}};
    const float q[] = {0, 1};
    cq_doc_route r = {1, 0.5};
    assert_int_equal(cq_doc_route_apply(&r, s, "m1", 2, q, f, 4, 1, &err), CQ_OK);
    const int64_t want[] = {a0, b0, a1, b1};
    for (size_t i = 0; i < 4; i++) assert_int_equal(f[i].id, want[i]);
    /* off: nothing */
    cq_doc_route off = {0, 0.0};
    assert_int_equal(cq_doc_route_apply(&off, s, "m1", 2, (const float[]){1, 0}, f, 4, 0, &err), CQ_OK);
    for (size_t i = 0; i < 4; i++) assert_int_equal(f[i].id, want[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_top),
        cmocka_unit_test(test_prefer),
        cmocka_unit_test_setup_teardown(test_store_vectors_and_apply, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
