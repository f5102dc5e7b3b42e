/* Dense plumbing with random encoder weights (no trained weights exist yet): ingest encodes every clause and keeps
 * the document state; retrieve serves --mode dense and fuses router, BM25 and dense; without weights dense is a
 * clear error and the default hybrid mode does not need it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "app/ingest.h"
#include "index/retrieve.h"
#include "index/store.h"
#include "index/vectors.h"
#include "test_ssm_util.h"
#include "test_store_util.h"

/* Retrieval of question in KB kb with the given modes, k and dense retriever. */
static cq_status retrieve(cq_store *s, int64_t kb, const char *question, int modes, size_t k, cq_dense *d,
                          cq_hits *h, cq_err *err) {
    cq_query q;
    cq_status rc = cq_query_parse(s, kb, question, &q, err);
    cq_retrieve_options o = {.modes = modes, .k = k, .dense = d};
    if (!rc) rc = cq_retrieve(s, &q, &o, h, err);
    cq_query_free(&q);
    return rc;
}

static void test_dense_plumbing(void **state) {
    (void)state;
    char dir[] = "/tmp/cq_dense_XXXXXX", path[512], models[512];
    assert_non_null(mkdtemp(dir));
    cq_err err = {0};
    cq_store *s;
    snprintf(path, sizeof path, "%s/clauseqa.db", dir);
    assert_int_equal(cq_store_open(path, &s, &err), CQ_OK);
    int64_t kb;
    assert_int_equal(cq_store_kb_ensure(s, "demo", &kb, &err), CQ_OK);

    /* No weights: dense is refused with a reason; the default modes work. */
    cq_dense *d = NULL;
    assert_int_equal(cq_dense_open(dir, NULL, &d, &err), CQ_ERR_UNSUPPORTED);
    cq_hits h;
    assert_int_equal(retrieve(s, kb, "加班", CQ_RETRIEVE_DENSE, 5, NULL, &h, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "models/ssm"));

    /* Random weights of the production vocabulary, small sizes. */
    snprintf(models, sizeof models, "%s/models", dir);
    mkdir(models, 0755);
    snprintf(models, sizeof models, "%s/models/ssm", dir);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 1, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = 32, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(models, &c, 11, NULL, NULL), 0);
    /* As configured (CLAUSEQA_DENSE): off, on, a bad value, and auto — on only when the encoder has a GPU. */
    setenv("CLAUSEQA_DENSE", "off", 1);
    assert_int_equal(cq_dense_open_configured(dir, models, &d, &err), CQ_ERR_UNSUPPORTED);
    setenv("CLAUSEQA_DENSE", "maybe", 1);
    assert_int_equal(cq_dense_open_configured(dir, models, &d, &err), CQ_ERR_INVALID);
    unsetenv("CLAUSEQA_DENSE");
    cq_status auto_rc = cq_dense_open_configured(dir, models, &d, &err);
    if (auto_rc == CQ_OK) {
        assert_int_equal(cq_dense_backend(d), CQ_SSM_BACKEND_CUDA);
        cq_dense_close(d);
    } else {
        assert_int_equal(auto_rc, CQ_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "CLAUSEQA_DENSE=on"));
    }
    setenv("CLAUSEQA_DENSE", "on", 1);
    if (cq_dense_open_configured(dir, models, &d, &err)) fail_msg("%s", err.msg);
    unsetenv("CLAUSEQA_DENSE");

    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/demo/劳动合同法(2012-12-28).md", src ? src : ".");
    cq_ingest_result r;
    cq_ingest_options io = {.dense = d}; /* ingest encodes into the retriever it is given */
    if (cq_ingest_file(s, dir, kb, path, &io, &r, &err)) fail_msg("%s", err.msg);
    assert_true(r.n_clauses > 50);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clause_vectors"), r.n_clauses);
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_states"), 1);

    /* Dense alone: k nearest clauses, all from the dense list. */
    assert_int_equal(retrieve(s, kb, "劳动者加班费怎么计算", CQ_RETRIEVE_DENSE, 5, d, &h, &err), CQ_OK);
    assert_int_equal(h.n, 5);
    for (size_t i = 0; i < h.n; i++) assert_int_equal(h.hits[i].source, CQ_RETRIEVE_DENSE);
    cq_hits_free(&h);
    /* Router + BM25 + dense: the exact reference stays first; fused results follow without duplicates. */
    assert_int_equal(retrieve(s, kb, "劳动合同法第三十条 劳动报酬", CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_DENSE, 8, d, &h, &err),
                     CQ_OK);
    assert_int_equal(h.n, 8);
    assert_int_equal(h.hits[0].source, CQ_RETRIEVE_ROUTER);
    assert_string_equal(h.hits[0].label, "第三十条");
    int sources = 0;
    for (size_t i = 1; i < h.n; i++) {
        sources |= h.hits[i].source;
        for (size_t j = 0; j < i; j++) assert_true(h.hits[i].clause_id != h.hits[j].clause_id);
        if (i > 1) assert_true(h.hits[i].score <= h.hits[i - 1].score);
    }
    assert_true(sources & (CQ_RETRIEVE_BM25 | CQ_RETRIEVE_DENSE));
    cq_hits_free(&h);

    cq_store_close(s);
    cq_dense_close(d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dense_plumbing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
