/* search/doc_route: the setting (CLAUSEQA_DOC_ROUTE and ssm.json's "doc_route"), the top documents by synthetic
 * vectors, the prior on a fused list, the document vectors (the stored document-head vectors, else normalized means of
 * stored clause vectors) on a SQLite store end to end through cq_doc_route_apply, and the routed dense search
 * (cq_doc_route_search). */
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

static void test_config(void **state) {
    (void)state;
    cq_err err = {0};
    cq_doc_routing r;
    const char *none = "{\"format\": \"clauseqa-ssm\"}";
    assert_int_equal(cq_doc_routing_from_config(none, strlen(none), &r, &err), CQ_OK);
    assert_int_equal(r.zh.top + r.en.top, 0);
    assert_null(cq_doc_routing_for(&r, true));
    assert_null(cq_doc_routing_for(&r, false));
    const char *fit = "{\"doc_route\": {\"method\": \"search\", \"fitted_on\": \"calib\", \"zh\": {\"top\": 0, "
                      "\"beta\": 0}, \"en\": {\"top\": 1, \"beta\": 0.05}}}";
    assert_int_equal(cq_doc_routing_from_config(fit, strlen(fit), &r, &err), CQ_OK);
    assert_int_equal(r.method, CQ_DOC_ROUTE_SEARCH);
    assert_string_equal(r.source, "ssm.json");
    assert_string_equal(r.fitted_on, "calib");
    assert_null(cq_doc_routing_for(&r, true)); /* top 0: off for Chinese questions */
    const cq_doc_route *en = cq_doc_routing_for(&r, false);
    assert_non_null(en);
    assert_true(en->top == 1 && en->beta == 0.05);
    /* the environment over it: left alone, off, both languages */
    cq_doc_routing keep = r;
    assert_int_equal(cq_doc_routing_env(NULL, &r, &err), CQ_OK);
    assert_memory_equal(&keep, &r, sizeof r);
    assert_int_equal(cq_doc_routing_env("", &r, &err), CQ_OK);
    assert_memory_equal(&keep, &r, sizeof r);
    assert_int_equal(cq_doc_routing_env("bad", &r, &err), CQ_ERR_INVALID);
    assert_memory_equal(&keep, &r, sizeof r);
    assert_int_equal(cq_doc_routing_env("search:x", &r, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_doc_routing_env("search:off", &r, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_doc_routing_env("prior:2,0.5", &r, &err), CQ_OK);
    assert_int_equal(r.method, CQ_DOC_ROUTE_PRIOR);
    assert_true(r.zh.top == 2 && r.en.top == 2 && r.zh.beta == 0.5);
    assert_string_equal(r.source, "CLAUSEQA_DOC_ROUTE");
    assert_int_equal(cq_doc_routing_env("3,0.1", &r, &err), CQ_OK); /* the setting of before: the prior */
    assert_int_equal(r.method, CQ_DOC_ROUTE_PRIOR);
    assert_int_equal(cq_doc_routing_env("search:4,0.2", &r, &err), CQ_OK);
    assert_int_equal(r.method, CQ_DOC_ROUTE_SEARCH);
    assert_non_null(cq_doc_routing_for(&r, true));
    assert_int_equal(cq_doc_routing_env("off", &r, &err), CQ_OK);
    assert_null(cq_doc_routing_for(&r, true));
    assert_null(cq_doc_routing_for(&r, false));
    /* β 0 is off too (the fits' "no routing") */
    assert_int_equal(cq_doc_routing_env("search:4,0", &r, &err), CQ_OK);
    assert_null(cq_doc_routing_for(&r, true));
    /* bad members are named */
    const char *bad[][2] = {
        {"{\"doc_route\": 3}", "must be an object"},
        {"{\"doc_route\": {\"method\": \"filter\", \"zh\": {\"top\": 1, \"beta\": 1}, \"en\": {\"top\": 1, \"beta\": 1}}}",
         "\"doc_route\".method"},
        {"{\"doc_route\": {\"method\": \"search\", \"en\": {\"top\": 1, \"beta\": 1}}}", "\"zh\""},
        {"{\"doc_route\": {\"method\": \"search\", \"zh\": {\"top\": 1.5, \"beta\": 1}, \"en\": {\"top\": 1, \"beta\": 1}}}",
         "\"doc_route\".zh.top"},
        {"{\"doc_route\": {\"method\": \"search\", \"zh\": {\"top\": 1, \"beta\": 1}, \"en\": {\"top\": 1, \"beta\": -1}}}",
         "\"doc_route\".en.beta"},
        {"{\"doc_route\": {\"method\": \"search\", \"zh\": {\"top\": 1, \"beta\": NaN}, \"en\": {\"top\": 1, \"beta\": 1}}}",
         "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(cq_doc_routing_from_config(bad[i][0], strlen(bad[i][0]), &r, &err), CQ_ERR_FORMAT);
        if (!strstr(err.msg, bad[i][1])) fail_msg("%s: %s", bad[i][0], err.msg);
        assert_null(cq_doc_routing_for(&r, false));
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
    assert_int_equal(cq_doc_route_apply(&r, NULL, s, kb, "m1", "", 2, q, f, 4, 1, &err), CQ_OK);
    const int64_t want[] = {a0, b0, a1, b1};
    for (size_t i = 0; i < 4; i++) assert_int_equal(f[i].id, want[i]);
    /* off: nothing */
    cq_doc_route off = {0, 0.0};
    assert_int_equal(cq_doc_route_apply(&off, NULL, s, kb, "m1", "", 2, (const float[]){1, 0}, f, 4, 0, &err), CQ_OK);
    for (size_t i = 0; i < 4; i++) assert_int_equal(f[i].id, want[i]);
}

/* Three documents: a (clauses a0 a1 a2), b (b0 b1), c (c0 c1); a and b have stored document-head vectors, c none. The
 * routed search ranks the KB's documents by their stored vectors (not their clause means), adds the routed
 * documents' clauses the dense list did not have, + beta on every routed clause, cuts to cap; c joins the
 * candidates only through the list (its mean). The prior reads the stored vectors too. */
static void test_search_and_stored(void **state) {
    cq_store *s = test_store_of(state);
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_ensure(s, "demo", &kb, &err), CQ_OK);
    const char *const a[][4] = {{NULL, NULL, "", "alpha one"}, {NULL, NULL, "", "alpha two"},
                                {NULL, NULL, "", "alpha three"}};
    const char *const b[][4] = {{NULL, NULL, "", "beta one"}, {NULL, NULL, "", "beta two"}};
    const char *const c[][4] = {{NULL, NULL, "", "gamma one"}, {NULL, NULL, "", "gamma two"}};
    int64_t da = test_add_doc(s, kb, "a", "A", "sha-a", a, 3), db = test_add_doc(s, kb, "b", "B", "sha-b", b, 2),
            dc = test_add_doc(s, kb, "c", "C", "sha-c", c, 2);
    int64_t a0 = clause_of(s, da, 0), a1 = clause_of(s, da, 1), a2 = clause_of(s, da, 2), b0 = clause_of(s, db, 0),
            b1 = clause_of(s, db, 1), c0 = clause_of(s, dc, 0), c1 = clause_of(s, dc, 1);
    put_vec(s, kb, a0, 1, 0);
    put_vec(s, kb, a1, 0.8f, 0.6f);
    put_vec(s, kb, a2, 0.6f, 0.8f);
    put_vec(s, kb, b0, 1, 0); /* b's clauses point along x, like a's ... */
    put_vec(s, kb, b1, 1, 0);
    put_vec(s, kb, c0, 0, 1);
    put_vec(s, kb, c1, 0.6f, 0.8f);
    const float va[2] = {1, 0}, vb[2] = {0, 1}; /* ... but b's document vector points along y */
    assert_int_equal(cq_store_doc_vector_put(s, kb, da, "m1", "h1", 2, va, &err), CQ_OK);
    assert_int_equal(cq_store_doc_vector_put(s, kb, db, "m1", "h1", 2, vb, &err), CQ_OK);
    const float q[2] = {0, 1};

    /* off (top 0 or beta 0): the list as it was */
    int64_t ids[8] = {a2, a1, a0};
    float cos[8] = {0.8f, 0.6f, 0.0f};
    size_t n = 3;
    cq_doc_route off = {1, 0.0};
    assert_int_equal(cq_doc_route_search(&off, NULL, s, kb, "m1", "h1", 2, q, ids, cos, &n, 8, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_true(ids[0] == a2 && cos[0] == 0.8f);

    /* routed to 1 document: b, by its stored vector (its clause mean would have lost to c's); b0, b1 join with
     * cosine 0 + 0.5, above a0 (0) and below a2 (0.8); the cut keeps 4 */
    cq_doc_route one = {1, 0.5};
    assert_int_equal(cq_doc_route_search(&one, NULL, s, kb, "m1", "h1", 2, q, ids, cos, &n, 4, &err), CQ_OK);
    assert_int_equal(n, 4);
    const int64_t want1[] = {a2, a1, b0, b1};
    for (size_t i = 0; i < 4; i++) assert_int_equal(ids[i], want1[i]);
    assert_true(fabsf(cos[2] - 0.5f) < 1e-6f && fabsf(cos[3] - 0.5f) < 1e-6f);

    /* routed to 2 documents with c in the list: b (stored, 1) and c (no stored vector: its clause mean, 0.95; a: 0);
     * c0 (cosine 1) joins, c1 (listed) gets + 1 too; b0, b1 (cosine 0) + 1; a unrouted */
    int64_t ids2[8] = {a2, c1, a0};
    float cos2[8] = {0.8f, 0.8f, 0.0f};
    n = 3;
    cq_doc_route two = {2, 1.0};
    assert_int_equal(cq_doc_route_search(&two, NULL, s, kb, "m1", "h1", 2, q, ids2, cos2, &n, 8, &err), CQ_OK);
    assert_int_equal(n, 6);
    const int64_t want2[] = {c0, c1, b0, b1, a2, a0};
    const float score2[] = {2.0f, 1.8f, 1.0f, 1.0f, 0.8f, 0.0f};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(ids2[i], want2[i]);
        assert_true(fabsf(cos2[i] - score2[i]) < 1e-6f);
    }

    /* without stored vectors (another head: a KB ingested before it): the list's documents by their means only */
    int64_t ids3[8] = {a2, a1};
    float cos3[8] = {0.8f, 0.6f};
    n = 2;
    assert_int_equal(cq_doc_route_search(&one, NULL, s, kb, "m1", "h-other", 2, q, ids3, cos3, &n, 8, &err), CQ_OK);
    assert_int_equal(n, 3); /* a is routed: a0 joins */
    assert_true(ids3[0] == a2 && ids3[1] == a1 && ids3[2] == a0);
    assert_true(fabsf(cos3[0] - 1.3f) < 1e-6f && fabsf(cos3[2] - 0.5f) < 1e-6f);

    /* the prior reads the stored vector too: b over a although b's clause mean equals a0's direction */
    cq_fused f[] = {{a0, 5.0, false}, {a1, 0.9, false}, {b0, 0.7, true}, {b1, 0.2, true}};
    assert_int_equal(cq_doc_route_apply(&one, NULL, s, kb, "m1", "h1", 2, q, f, 4, 1, &err), CQ_OK);
    const int64_t want3[] = {a0, b0, a1, b1};
    for (size_t i = 0; i < 4; i++) assert_int_equal(f[i].id, want3[i]);
    /* and with the means (no head): a's mean (0.86, 0.50) beats b's (1, 0): a1 stays second */
    cq_fused g[] = {{a0, 5.0, false}, {a1, 0.9, false}, {b0, 0.7, true}, {b1, 0.2, true}};
    assert_int_equal(cq_doc_route_apply(&one, NULL, s, kb, "m1", "", 2, q, g, 4, 1, &err), CQ_OK);
    const int64_t want4[] = {a0, a1, b0, b1};
    for (size_t i = 0; i < 4; i++) assert_int_equal(g[i].id, want4[i]);

    /* the cache: the same lists as without it, the store read once while nothing changes, again when a document
     * vector comes or goes (the stamp: count and largest document id) */
    cq_doc_route_cache *cache = cq_doc_route_cache_new();
    assert_non_null(cache);
    for (int round = 0; round < 3; round++) {
        int64_t ci[8] = {a2, c1, a0};
        float cc[8] = {0.8f, 0.8f, 0.0f};
        n = 3;
        assert_int_equal(cq_doc_route_search(&two, cache, s, kb, "m1", "h1", 2, q, ci, cc, &n, 8, &err), CQ_OK);
        assert_int_equal(n, 6);
        for (size_t i = 0; i < 6; i++) assert_int_equal(ci[i], want2[i]);
    }
    assert_int_equal(cq_doc_route_cache_reads(cache), 1);
    cq_fused h[] = {{a0, 5.0, false}, {a1, 0.9, false}, {b0, 0.7, true}, {b1, 0.2, true}};
    assert_int_equal(cq_doc_route_apply(&one, cache, s, kb, "m1", "h1", 2, q, h, 4, 1, &err), CQ_OK);
    for (size_t i = 0; i < 4; i++) assert_int_equal(h[i].id, want3[i]);
    assert_int_equal(cq_doc_route_cache_reads(cache), 1);
    /* c gets a stored vector pointing away from the question: c is no longer routed (b and a are) */
    const float vc[2] = {0, -1};
    assert_int_equal(cq_store_doc_vector_put(s, kb, dc, "m1", "h1", 2, vc, &err), CQ_OK);
    int64_t ci[8] = {a2, c1, a0};
    float cc[8] = {0.8f, 0.8f, 0.0f};
    n = 3;
    assert_int_equal(cq_doc_route_search(&two, cache, s, kb, "m1", "h1", 2, q, ci, cc, &n, 8, &err), CQ_OK);
    assert_int_equal(cq_doc_route_cache_reads(cache), 2);
    const int64_t want5[] = {a2, a1, a0, b0, b1, c1}; /* a routed now: 1.8, 1.6, then 1.0 (listed first), c1 0.8 */
    assert_int_equal(n, 6);
    for (size_t i = 0; i < 6; i++) assert_int_equal(ci[i], want5[i]);
    assert_true(fabsf(cc[0] - 1.8f) < 1e-6f && fabsf(cc[5] - 0.8f) < 1e-6f);
    for (size_t i = 0; i < n; i++) assert_true(ci[i] != c0); /* c's unlisted clause does not join */
    /* b deleted: read again, b's clauses gone from the routing */
    assert_int_equal(cq_store_doc_delete(s, db, &err), CQ_OK);
    int64_t di[8] = {a2, c1};
    float dc2[8] = {0.8f, 0.8f};
    n = 2;
    assert_int_equal(cq_doc_route_search(&one, cache, s, kb, "m1", "h1", 2, q, di, dc2, &n, 8, &err), CQ_OK);
    assert_int_equal(cq_doc_route_cache_reads(cache), 3);
    for (size_t i = 0; i < n; i++) assert_true(di[i] != b0 && di[i] != b1);
    cq_doc_route_cache_free(cache);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_config),
        cmocka_unit_test_setup_teardown(test_search_and_stored, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_top),
        cmocka_unit_test(test_prefer),
        cmocka_unit_test_setup_teardown(test_store_vectors_and_apply, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
