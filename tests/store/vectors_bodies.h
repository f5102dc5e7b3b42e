/* search/vectors.h's rows on both stores (tests/store/conformance.h): the document states, a KB's model and a
 * document's clause ids, written once on db/ (issue 28); the vectors' own rows through a KB's index. */
#ifndef CQ_TESTS_STORE_VECTORS_BODIES_H
#define CQ_TESTS_STORE_VECTORS_BODIES_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/fileio.h"
#include "search/vectors.h"
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
    assert_int_equal(cq_store_doc_finish(s, doc, "ready", NULL, "x", 1, (int)n, 1.0, "", &err), CQ_OK);
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

    /* document states: every byte value, replaced in place, per model; an empty state is a state */
    unsigned char bytes[300];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7);
    assert_int_equal(cq_vectors_state_put(s, doc, "m1", 77, bytes, sizeof bytes, &err), CQ_OK);
    bytes[0] = 0xff;
    assert_int_equal(cq_vectors_state_put(s, doc, "m1", 78, bytes, sizeof bytes, &err), CQ_OK);
    void *back = NULL;
    size_t len = 0;
    assert_int_equal(cq_vectors_state_get(s, doc, "m1", &back, &len, &err), CQ_OK);
    assert_int_equal(len, sizeof bytes);
    assert_memory_equal(back, bytes, len);
    free(back);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_states WHERE n_tokens = 78"), 1);
    assert_int_equal(cq_vectors_state_get(s, doc, "m2", &back, &len, &err), CQ_ERR_NOT_FOUND);
    assert_null(back);
    assert_int_equal(len, 0);
    assert_int_equal(cq_vectors_state_put(s, doc, "m2", 0, "", 0, &err), CQ_OK);
    assert_int_equal(cq_vectors_state_get(s, doc, "m2", &back, &len, &err), CQ_OK);
    assert_non_null(back);
    assert_int_equal(len, 0);
    free(back);
    assert_int_equal(cq_vectors_state_get(s, doc, "m1", &back, &len, &err), CQ_ERR_NOT_FOUND); /* one per document */

    /* deleting the document takes its state and vectors */
    assert_int_equal(cq_store_doc_delete(s, doc, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM doc_states"), 0);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM clause_vectors"), 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

#endif
