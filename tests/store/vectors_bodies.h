/* search/vectors.h's rows on both stores (tests/store/conformance.h): the document vectors, a KB's model and a
 * document's clause ids, written once on db/ (issue 28); the vectors' own rows through a KB's index. */
#ifndef CQ_TESTS_STORE_VECTORS_BODIES_H
#define CQ_TESTS_STORE_VECTORS_BODIES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/fileio.h"
#include "search/vectors.h"
#include "store/vectors.h"
#include "tests/store/conformance.h"

#define CONF_DIM 4

/* A ready document of KB kb with n clauses; their ids into ids. */
static int64_t conf_doc(cq_store *s, int64_t kb, const char *sha, size_t n, int64_t *ids) {
    cq_err err = {0};
    int64_t doc;
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, sha, "x.md", "md", sha, 10, &doc, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) {
        cq_store_clause c = {.ord = (int)i, .kind = 1, .label = "第一条", .label_key = "1", .path = "p", .text = "正文"};
        assert_int_equal(cq_store_clause_add(s, kb, doc, "x", &c, &ids[i], &err), CQ_OK);
    }
    assert_int_equal(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, "x", 1, (int)n, 1.0, "", &err), CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

static void conf_vectors_rows(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, ids[3];
    assert_int_equal(cq_store_kb_create(s, "v", &kb, &err), CQ_OK);
    int64_t doc = conf_doc(s, kb, "h1", 3, ids);

    /* a document's clause ids, in order */
    int64_t *got = NULL;
    size_t n = 0;
    assert_int_equal(cq_vectors_doc_clause_ids(s, doc, &got, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(got, ids, sizeof ids);
    free(got);
    assert_int_equal(cq_vectors_doc_clause_ids(s, doc + 1000, &got, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_null(got);

    /* the KB's model: none, then the vectors' (their count read back when the index is opened again) */
    char model[80];
    int dim = -1;
    assert_int_equal(cq_vectors_kb_model(s, kb, model, &dim, &err), CQ_OK);
    assert_string_equal(model, "");
    assert_int_equal(dim, 0);
    char dir[96];
    snprintf(dir, sizeof dir, "/tmp/cq_conf_vectors_%d_%p", (int)getpid(), (void *)s);
    assert_int_equal(cq_mkdirs(dir, &err), CQ_OK);
    cq_vectors *v = NULL;
    CONF_EXPECT(cq_vectors_open(s, dir, kb, "m1", CONF_DIM, &v, &err), CQ_OK);
    float x[3 * CONF_DIM] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    CONF_EXPECT(cq_vectors_add(v, s, ids, x, 3, &err), CQ_OK);
    assert_int_equal(cq_vectors_count(v), 3);
    cq_vectors_close(v);
    assert_int_equal(cq_vectors_kb_model(s, kb, model, &dim, &err), CQ_OK);
    assert_string_equal(model, "m1");
    assert_int_equal(dim, CONF_DIM);
    int64_t other_kb;
    assert_int_equal(cq_store_kb_create(s, "w", &other_kb, &err), CQ_OK);
    assert_int_equal(cq_vectors_kb_model(s, other_kb, model, &dim, &err), CQ_OK);
    assert_string_equal(model, "");

    /* a document vector (conf_vectors_doc_vectors has the rest) */
    const float dv[CONF_DIM] = {0.5f, -0.5f, 0.5f, -0.5f};
    assert_int_equal(cq_store_doc_vector_put(s, kb, doc, "m1", "h1", CONF_DIM, dv, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 1);

    /* deleting the document takes its document vector and vectors */
    assert_int_equal(cq_store_doc_delete(s, doc, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 0);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM clause_vectors"), 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* store/vectors.h on both stores: the rows FAISS is built from, written once (clause ids as IN lists, in batches of
 * CQ_STORE_VECTORS_BATCH) except storing (row by row on SQLite, a batch a statement on PostgreSQL), and the local
 * prior's document names (cq_store_doc_names). */
static void conf_vectors_store_rows(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, ids[3];
    assert_int_equal(cq_store_kb_create(s, "sv", &kb, &err), CQ_OK);
    int64_t doc = conf_doc(s, kb, "h9", 3, ids);
    const bool shared = cq_store_vectors_shared(s);
    assert_int_equal(shared, cq_store_keyword_is_postings(s)); /* both: a PostgreSQL store */

    float x[3 * CONF_DIM] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    bool replaced = true;
    assert_int_equal(cq_store_vectors_store(s, kb, "m1", CONF_DIM, ids, x, 2, &replaced, &err), CQ_OK);
    if (!shared) assert_false(replaced); /* PostgreSQL assumes a replacement */
    size_t n = 0;
    assert_int_equal(cq_store_vectors_count(s, kb, "m1", &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    /* a clause's vector replaced: still one row */
    float y[CONF_DIM] = {0, 0, 0, 1};
    assert_int_equal(cq_store_vectors_store(s, kb, "m1", CONF_DIM, &ids[1], y, 1, &replaced, &err), CQ_OK);
    assert_true(replaced);
    assert_int_equal(cq_store_vectors_count(s, kb, "m1", &n, &err), CQ_OK);
    assert_int_equal(n, 2);

    /* get and keep_stored, with more ids than one statement takes (most of them no clause's) */
    const size_t many = 2 * CQ_STORE_VECTORS_BATCH + 7;
    int64_t *ask = malloc(many * sizeof *ask);
    float *scores = malloc(many * sizeof *scores);
    int64_t *got_ids = malloc(many * sizeof *got_ids);
    float *got_x = malloc(many * CONF_DIM * sizeof *got_x);
    assert_non_null(ask);
    assert_non_null(scores);
    assert_non_null(got_ids);
    assert_non_null(got_x);
    for (size_t i = 0; i < many; i++) ask[i] = 900000 + (int64_t)i, scores[i] = (float)i;
    ask[3] = ids[0];
    ask[CQ_STORE_VECTORS_BATCH + 1] = ids[2]; /* no vector */
    ask[many - 1] = ids[1];
    size_t got = 0;
    assert_int_equal(cq_store_vectors_get(s, kb, "m1", CONF_DIM, ask, many, got_ids, got_x, &got, &err), CQ_OK);
    assert_int_equal(got, 2);
    assert_int_equal(got_ids[0], ids[0]);
    assert_memory_equal(&got_x[0], &x[0], sizeof y);
    assert_int_equal(got_ids[1], ids[1]);
    assert_memory_equal(&got_x[CONF_DIM], y, sizeof y);
    assert_int_equal(cq_store_vectors_get(s, kb, "m2", CONF_DIM, ask, many, got_ids, got_x, &got, &err), CQ_OK);
    assert_int_equal(got, 0);
    n = many;
    assert_int_equal(cq_store_vectors_keep_stored(s, kb, "m1", ask, scores, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ask[0], ids[0]);
    assert_true(scores[0] == 3.0f);
    assert_int_equal(ask[1], ids[1]);
    assert_true(scores[1] == (float)(many - 1));

    /* every vector of the KB and model, a row at a time, and the feed position (SQLite has no feed: -1) */
    int64_t *all_ids = NULL, seq = 0;
    float *all = NULL;
    assert_int_equal(cq_store_vectors_read_all(s, kb, "m1", CONF_DIM, &all_ids, &all, &n, &seq, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(all_ids[0], ids[0]);
    assert_int_equal(all_ids[1], ids[1]);
    assert_memory_equal(&all[CONF_DIM], y, sizeof y);
    assert_true(shared ? seq >= 0 : seq == -1);
    free(all_ids);
    free(all);
    assert_int_equal(cq_store_vectors_read_all(s, kb, "m1", CONF_DIM + 1, &all_ids, &all, &n, &seq, &err),
                     CQ_ERR_FORMAT);
    assert_null(all_ids);
    assert_int_equal(n, 0);
    cq_vector_change *c = NULL;
    assert_int_equal(cq_store_vector_changes(s, 0, 10, &c, &n, &err), shared ? CQ_OK : CQ_ERR_UNSUPPORTED);
    cq_vector_changes_free(c, n);

    /* a document's KB; the local prior's names, repeated and missing ids included */
    int64_t kb_of = 0;
    assert_int_equal(cq_store_doc_kb(s, doc, &kb_of, &err), CQ_OK);
    assert_int_equal(kb_of, kb);
    assert_int_equal(cq_store_doc_kb(s, doc + 1000, &kb_of, &err), CQ_OK);
    assert_int_equal(kb_of, -1);
    const int64_t name_ids[] = {doc, doc + 1000, doc};
    char *names[3];
    assert_int_equal(cq_store_doc_names(s, name_ids, 3, names, &err), CQ_OK);
    assert_string_equal(names[0], "h9");
    assert_null(names[1]);
    assert_string_equal(names[2], "h9");
    free(names[0]);
    free(names[2]);

    /* deleting, in batches too: nothing left */
    ask[0] = ids[0];
    assert_int_equal(cq_store_vectors_delete(s, ask, 1, &err), CQ_OK);
    assert_int_equal(cq_store_vectors_count(s, kb, "m1", &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    for (size_t i = 0; i < many; i++) ask[i] = 900000 + (int64_t)i;
    ask[many - 2] = ids[1];
    assert_int_equal(cq_store_vectors_delete(s, ask, many, &err), CQ_OK);
    assert_int_equal(cq_store_vectors_count(s, kb, "m1", &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(ask);
    free(scores);
    free(got_ids);
    free(got_x);
}

/* document routing's reads (search/doc_route.h): each clause's document, each document's mean clause vector */
static void conf_vectors_doc_means(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, a[2], b[1];
    assert_int_equal(cq_store_kb_create(s, "dm", &kb, &err), CQ_OK);
    const int64_t da = conf_doc(s, kb, "hm1", 2, a), db = conf_doc(s, kb, "hm2", 1, b);
    const float xa[2 * CONF_DIM] = {3, 0, 0, 0, 0, 4, 0, 0}, xb[CONF_DIM] = {0, 0, 0, 2};
    assert_int_equal(cq_store_vectors_store(s, kb, "m1", CONF_DIM, a, xa, 2, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_vectors_store(s, kb, "m1", CONF_DIM, b, xb, 1, NULL, &err), CQ_OK);
    /* more clause ids than one statement takes, one of them twice, one of them no clause's */
    const size_t many = CQ_STORE_VECTORS_BATCH + 3;
    int64_t *ask = malloc(many * sizeof *ask), *doc_of = malloc(many * sizeof *doc_of);
    assert_non_null(ask);
    assert_non_null(doc_of);
    for (size_t i = 0; i < many; i++) ask[i] = a[0];
    ask[1] = b[0], ask[many - 1] = a[1], ask[many - 2] = 987654321;
    assert_int_equal(cq_store_clause_docs(s, ask, many, doc_of, &err), CQ_OK);
    assert_int_equal(doc_of[0], da);
    assert_int_equal(doc_of[1], db);
    assert_int_equal(doc_of[CQ_STORE_VECTORS_BATCH], da);
    assert_int_equal(doc_of[many - 1], da);
    assert_int_equal(doc_of[many - 2], -1);
    free(ask);
    free(doc_of);
    /* means: (3, 4)/2 normalized, (0, 0, 0, 1), zeros for a document without vectors of the model */
    const int64_t docs[3] = {da, db, 987654321};
    float v[3 * CONF_DIM];
    assert_int_equal(cq_store_doc_vector_means(s, "m1", CONF_DIM, docs, 3, v, &err), CQ_OK);
    assert_true(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] - 0.8f) < 1e-6f && v[2] == 0 && v[3] == 0);
    assert_true(v[4] == 0 && v[5] == 0 && v[6] == 0 && v[7] == 1);
    for (int j = 0; j < CONF_DIM; j++) assert_true(v[2 * CONF_DIM + j] == 0);
    assert_int_equal(cq_store_doc_vector_means(s, "m2", CONF_DIM, docs, 1, v, &err), CQ_OK);
    assert_true(v[0] == 0 && v[1] == 0);
    assert_int_equal(cq_store_doc_vector_means(s, "m1", 3, docs, 1, v, &err), CQ_ERR_FORMAT); /* not 3 floats */
}

/* The encoder's document vectors (store/vectors.h, issue 27): every float value round trip, one a document (replaced
 * in place by a new model or head), read by KB, model and head, ids ascending; a vector of another size refused;
 * none for a document that is not there; gone with its document, and with its KB. */
static void conf_vectors_doc_vectors(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, kb2, ids[1];
    assert_int_equal(cq_store_kb_create(s, "dv", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "dv2", &kb2, &err), CQ_OK);
    const int64_t d1 = conf_doc(s, kb, "hd1", 1, ids), d2 = conf_doc(s, kb, "hd2", 1, ids),
                  d3 = conf_doc(s, kb2, "hd3", 1, ids);
    const float x1[CONF_DIM] = {1e-38f, -0.0f, 3.4e38f, 0.1f}, x2[CONF_DIM] = {0, 1, 0, 0},
                x3[CONF_DIM] = {0, 0, 1, 0}, x1b[CONF_DIM] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_int_equal(cq_store_doc_vector_put(s, kb, d2, "m1", "h1", CONF_DIM, x2, &err), CQ_OK);
    assert_int_equal(cq_store_doc_vector_put(s, kb, d1, "m1", "h1", CONF_DIM, x1, &err), CQ_OK);
    assert_int_equal(cq_store_doc_vector_put(s, kb2, d3, "m1", "h1", CONF_DIM, x3, &err), CQ_OK);
    int64_t *got = NULL;
    float *x = NULL;
    size_t n = 0;
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, "m1", "h1", CONF_DIM, &got, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_true(got[0] == d1 && got[1] == d2);
    assert_memory_equal(x, x1, sizeof x1);
    assert_memory_equal(x + CONF_DIM, x2, sizeof x2);
    free(got);
    free(x);
    /* another head or model: none; another size: refused, nothing returned */
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, "m1", "h2", CONF_DIM, &got, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, "m2", "h1", CONF_DIM, &got, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, "m1", "h1", CONF_DIM + 1, &got, &x, &n, &err), CQ_ERR_FORMAT);
    assert_null(got);
    assert_null(x);
    assert_int_equal(n, 0);
    /* encoded again by another head: replaced, one row a document */
    assert_int_equal(cq_store_doc_vector_put(s, kb, d1, "m1", "h2", CONF_DIM, x1b, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 3);
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, "m1", "h2", CONF_DIM, &got, &x, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_true(got[0] == d1);
    assert_memory_equal(x, x1b, sizeof x1b);
    free(got);
    free(x);
    /* a document that is not there */
    CONF_EXPECT(cq_store_doc_vector_put(s, kb, d3 + 1000, "m1", "h1", CONF_DIM, x1, &err), CQ_ERR_DB);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 3);
    /* gone with the document, and with the KB */
    assert_int_equal(cq_store_doc_delete(s, d2, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 2);
    assert_int_equal(cq_store_kb_delete(s, kb2, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_vectors"), 1);
}

#endif
