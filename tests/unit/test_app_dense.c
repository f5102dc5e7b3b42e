/* Dense plumbing with random encoder weights: ingest encodes every clause and keeps the document state; retrieve
 * serves --mode dense and fuses router, BM25 and dense, by the fusion the weights' ssm.json names; without weights
 * dense is a clear error and the default hybrid mode does not need it. */
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
#include "core/fileio.h"
#include "search/retrieve.h"
#include "store/store.h"
#include "search/vectors.h"
#include "store/vectors.h"
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

/* Rewrites models/ssm.json with member name: value (NULL: without one), kept last (so one call can replace it). */
static void set_member(const char *models, const char *name, const char *value) {
    char path[600], key[64], *text = NULL;
    size_t len = 0;
    cq_err err = {0};
    snprintf(path, sizeof path, "%s/ssm.json", models);
    snprintf(key, sizeof key, ", \"%s\"", name);
    if (cq_file_read(path, 1 << 20, &text, &len, &err)) fail_msg("%s", err.msg);
    char *at = strstr(text, key);
    if (!at) at = strrchr(text, '}');
    assert_non_null(at);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s%s}\n", (int)(at - text), text, value ? key : "", value ? ": " : "", value ? value : "");
    fclose(f);
    free(text);
}

static void set_fusion(const char *models, const char *fusion) { set_member(models, "fusion", fusion); }

/* The clause ids of a retrieval, and whether every hit came from BM25. */
static size_t retrieve_ids(cq_store *s, int64_t kb, const char *question, int modes, cq_fusion_method fusion,
                           cq_dense *d, int64_t *ids, double *scores, bool *all_bm25) {
    cq_query q;
    cq_hits h;
    cq_err err = {0};
    cq_retrieve_options o = {.modes = modes, .k = 8, .dense = d, .fusion = fusion};
    if (cq_query_parse(s, kb, question, &q, &err) || cq_retrieve(s, &q, &o, &h, &err)) fail_msg("%s", err.msg);
    *all_bm25 = true;
    for (size_t i = 0; i < h.n; i++) {
        ids[i] = h.hits[i].clause_id;
        scores[i] = h.hits[i].score;
        *all_bm25 = *all_bm25 && h.hits[i].source == CQ_RETRIEVE_BM25;
    }
    size_t n = h.n;
    cq_hits_free(&h);
    cq_query_free(&q);
    return n;
}

/* The fusion the weights carry (ssm.json "fusion", search/fusion.h): read when the retriever opens, a bad one refused
 * then; keep by the question's language; reciprocal rank without it, or when asked for. d was opened without one and
 * KB kb holds a Chinese law and an English agreement, encoded with these weights. */
static void check_fusion(cq_store *s, int64_t kb, const char *dir, const char *models, cq_dense *d) {
    const char *zh = "劳动者加班费怎么计算", *en = "termination of this agreement for convenience";
    const int both = CQ_RETRIEVE_BM25 | CQ_RETRIEVE_DENSE;
    int64_t a[8], b[8];
    double sa[8], sb[8];
    bool bm25_a, bm25_b;
    cq_err err = {0};
    /* without a fusion in ssm.json: reciprocal rank, the same asked for or not; keep refused */
    assert_int_equal(cq_dense_fusion(d)->method, CQ_FUSION_RRF);
    size_t na = retrieve_ids(s, kb, zh, both, CQ_FUSION_WEIGHTS, d, a, sa, &bm25_a);
    size_t nb = retrieve_ids(s, kb, zh, both, CQ_FUSION_RRF, d, b, sb, &bm25_b);
    assert_int_equal(na, 8);
    assert_int_equal(nb, na);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(sa, sb, sizeof sa);
    cq_query q;
    cq_hits h;
    cq_retrieve_options o = {.modes = both, .k = 8, .dense = d, .fusion = CQ_FUSION_KEEP};
    assert_int_equal(cq_query_parse(s, kb, zh, &q, &err), CQ_OK);
    assert_int_equal(cq_retrieve(s, &q, &o, &h, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "fitted"));
    o.fusion = (cq_fusion_method)7;
    assert_int_equal(cq_retrieve(s, &q, &o, &h, &err), CQ_ERR_INVALID);
    cq_query_free(&q);

    /* keep: Chinese questions w 0 with every BM25 hit kept (BM25's order alone), others a heavy dense side */
    set_fusion(models, "{\"method\": \"keep\", \"fitted_on\": \"a test\", \"zh\": {\"w\": 0, \"m\": 100}, "
                       "\"en\": {\"w\": 5, \"m\": 1}}");
    cq_dense *k = NULL;
    if (cq_dense_open(dir, models, &k, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_dense_fusion(k)->method, CQ_FUSION_KEEP);
    assert_string_equal(cq_dense_fusion(k)->fitted_on, "a test");
    nb = retrieve_ids(s, kb, zh, both, CQ_FUSION_WEIGHTS, k, b, sb, &bm25_b);
    na = retrieve_ids(s, kb, zh, CQ_RETRIEVE_BM25, CQ_FUSION_WEIGHTS, k, a, sa, &bm25_a);
    assert_int_equal(na, 8);
    assert_int_equal(nb, 8);
    assert_memory_equal(a, b, sizeof a);
    assert_true(bm25_b);
    /* asked for reciprocal rank, these weights (the same vectors) fuse as the ones without a fusion did */
    int64_t c[8];
    double sc[8];
    bool bm25_c;
    retrieve_ids(s, kb, zh, both, CQ_FUSION_WEIGHTS, d, a, sa, &bm25_a);
    assert_int_equal(retrieve_ids(s, kb, zh, both, CQ_FUSION_RRF, k, c, sc, &bm25_c), 8);
    assert_memory_equal(a, c, sizeof a);
    assert_memory_equal(sa, sc, sizeof sa);
    /* an English question gets en's w and m: the BM25 and dense lists fused as search/fusion.h says */
    na = retrieve_ids(s, kb, en, CQ_RETRIEVE_BM25, CQ_FUSION_WEIGHTS, k, a, sa, &bm25_a);
    assert_true(na > 1);
    int64_t dense_ids[50];
    float cos[50];
    size_t nd = 0;
    assert_int_equal(cq_dense_search(k, s, kb, en, 50, dense_ids, cos, &nd, &err), CQ_OK);
    cq_fused want[58];
    size_t nw = cq_fusion_rank(CQ_FUSION_KEEP, cq_dense_fusion(k)->en, a, na, dense_ids, nd, want);
    nb = retrieve_ids(s, kb, en, both, CQ_FUSION_WEIGHTS, k, b, sb, &bm25_b);
    assert_int_equal(nb, nw < 8 ? nw : 8);
    assert_int_equal(b[0], a[0]); /* m 1 */
    for (size_t i = 0; i < nb; i++) {
        assert_int_equal(b[i], want[i].id);
        assert_true(sb[i] == want[i].score);
    }
    assert_false(bm25_b); /* the dense side weighs five times BM25's */
    /* router hits stay first and exact */
    assert_int_equal(retrieve(s, kb, "劳动合同法第三十条 劳动报酬", CQ_RETRIEVE_HYBRID | CQ_RETRIEVE_DENSE, 8, k, &h, &err),
                     CQ_OK);
    assert_int_equal(h.n, 8);
    assert_int_equal(h.hits[0].source, CQ_RETRIEVE_ROUTER);
    assert_string_equal(h.hits[0].label, "第三十条");
    for (size_t i = 1; i < h.n; i++) assert_int_equal(h.hits[i].source, CQ_RETRIEVE_BM25); /* zh: w 0 */
    cq_hits_free(&h);
    cq_dense_close(k);

    /* score (issue 27): English questions fuse BM25's scores, read CQ_FUSION_SCORE_DEPTH deep whatever k, with the
     * cosines as index/fusion_score.c says; Chinese ones w 0, m 0: BM25's order */
    set_fusion(models, "{\"method\": \"score\", \"norm\": \"z\", \"zh\": {\"w\": 0, \"m\": 0}, \"en\": {\"w\": "
                       "0.6, \"m\": 1, \"c\": 0}}");
    if (cq_dense_open(dir, models, &k, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_dense_fusion(k)->method, CQ_FUSION_SCORE);
    {
        cq_retrieve_options deep = {.modes = CQ_RETRIEVE_BM25, .k = CQ_FUSION_SCORE_DEPTH, .dense = k};
        assert_int_equal(cq_query_parse(s, kb, en, &q, &err), CQ_OK);
        assert_int_equal(cq_retrieve(s, &q, &deep, &h, &err), CQ_OK);
        cq_query_free(&q);
        assert_true(h.n > 8); /* deeper than the k asked below: the fusion must read all of it */
        int64_t bid[CQ_FUSION_SCORE_DEPTH];
        double bsc[CQ_FUSION_SCORE_DEPTH], dsc[50];
        const size_t n_b = h.n;
        for (size_t i = 0; i < n_b; i++) {
            bid[i] = h.hits[i].clause_id;
            bsc[i] = h.hits[i].score;
        }
        cq_hits_free(&h);
        assert_int_equal(cq_dense_search(k, s, kb, en, 50, dense_ids, cos, &nd, &err), CQ_OK);
        for (size_t i = 0; i < nd; i++) dsc[i] = cos[i];
        cq_fused sw[CQ_FUSION_SCORE_DEPTH + 50];
        size_t nsw = 0;
        assert_int_equal(cq_fusion_rank_scores(CQ_FUSION_NORM_Z, cq_dense_fusion(k)->en, bid, bsc, n_b, dense_ids, dsc,
                                               nd, sw, &nsw, &err), CQ_OK);
        nb = retrieve_ids(s, kb, en, both, CQ_FUSION_WEIGHTS, k, b, sb, &bm25_b);
        assert_int_equal(nb, 8);
        assert_int_equal(b[0], bid[0]); /* m 1, c 0: BM25's first stays */
        for (size_t i = 0; i < nb; i++) {
            assert_int_equal(b[i], sw[i].id);
            assert_true(sb[i] == sw[i].score);
        }
        /* the dense list alone reports its cosines */
        na = retrieve_ids(s, kb, en, CQ_RETRIEVE_DENSE, CQ_FUSION_WEIGHTS, k, a, sa, &bm25_a);
        assert_int_equal(na, nd < 8 ? nd : 8);
        for (size_t i = 0; i < na; i++) {
            assert_int_equal(a[i], dense_ids[i]);
            assert_true(sa[i] == (double)cos[i]);
        }
    }
    na = retrieve_ids(s, kb, zh, CQ_RETRIEVE_BM25, CQ_FUSION_WEIGHTS, k, a, sa, &bm25_a);
    nb = retrieve_ids(s, kb, zh, both, CQ_FUSION_WEIGHTS, k, b, sb, &bm25_b);
    assert_int_equal(nb, na);
    assert_memory_equal(a, b, na * sizeof *a);
    cq_dense_close(k);
    /* document routing (CLAUSEQA_DOC_ROUTE, index/doc_route.h): a bad value fails the open; "1,100" puts the
     * clauses of the nearest candidate document right after BM25's kept first clause */
    setenv("CLAUSEQA_DOC_ROUTE", "3,x", 1);
    assert_int_equal(cq_dense_open(dir, models, &k, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "CLAUSEQA_DOC_ROUTE"));
    unsetenv("CLAUSEQA_DOC_ROUTE");
    {
        /* the dense list alone (random weights: the two documents' clauses interleaved), without and with routing */
        int64_t ids_off[50], ids_on[50], docs_off[50], docs_on[50];
        size_t n_off = 0, n_on = 0;
        for (int on = 0; on < 2; on++) {
            if (on) setenv("CLAUSEQA_DOC_ROUTE", "1,100", 1);
            if (cq_dense_open(dir, models, &k, &err)) fail_msg("%s", err.msg);
            unsetenv("CLAUSEQA_DOC_ROUTE");
            assert_int_equal(cq_dense_doc_route(k)->en.top, on ? 1 : 0);
            assert_int_equal(cq_dense_doc_route(k)->method, CQ_DOC_ROUTE_PRIOR);
            cq_retrieve_options ro = {.modes = CQ_RETRIEVE_DENSE, .k = 50, .dense = k};
            assert_int_equal(cq_query_parse(s, kb, en, &q, &err), CQ_OK);
            assert_int_equal(cq_retrieve(s, &q, &ro, &h, &err), CQ_OK);
            cq_query_free(&q);
            for (size_t i = 0; i < h.n; i++) {
                (on ? ids_on : ids_off)[i] = h.hits[i].clause_id;
                (on ? docs_on : docs_off)[i] = h.hits[i].doc_id;
            }
            *(on ? &n_on : &n_off) = h.n;
            cq_hits_free(&h);
            cq_dense_close(k);
        }
        size_t first_other = 1; /* without routing the documents alternate: the test can see a move */
        while (first_other < n_off && docs_off[first_other] == docs_off[0]) first_other++;
        int back = 0;
        for (size_t i = first_other; i < n_off; i++) back |= docs_off[i] == docs_off[0];
        assert_true(back);
        assert_int_equal(n_on, n_off); /* a prior, not a filter: the same clauses */
        for (size_t i = 0; i < n_on; i++) {
            size_t j = 0;
            while (j < n_off && ids_off[j] != ids_on[i]) j++;
            assert_true(j < n_off);
        }
        size_t i = 1; /* with it, every clause of the routed document comes first */
        while (i < n_on && docs_on[i] == docs_on[0]) i++;
        for (; i < n_on; i++) assert_true(docs_on[i] != docs_on[0]);
    }
    /* asked for by name, score needs weights that carry it */
    o.fusion = CQ_FUSION_SCORE;
    assert_int_equal(cq_query_parse(s, kb, en, &q, &err), CQ_OK);
    assert_int_equal(cq_retrieve(s, &q, &o, &h, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "fusion score needs"));
    cq_query_free(&q);

    /* a bad fusion fails the open, naming the file and the member */
    set_fusion(models, "{\"method\": \"keep\", \"zh\": {\"w\": -1, \"m\": 0}, \"en\": {\"w\": 0, \"m\": 0}}");
    assert_int_equal(cq_dense_open(dir, models, &k, &err), CQ_ERR_FORMAT);
    assert_null(k);
    assert_non_null(strstr(err.msg, "ssm.json"));
    assert_non_null(strstr(err.msg, "\"fusion\".zh.w"));
    set_fusion(models, "{\"method\": \"rank-sum\"}");
    assert_int_equal(cq_dense_open(dir, models, &k, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "\"rank-sum\""));
    set_fusion(models, NULL);
}

/* A store in the fresh temporary folder dir (a mkdtemp template) with the KB "demo" (its id in *kb). */
static cq_store *open_demo(char *dir, int64_t *kb) {
    char path[512];
    cq_err err = {0};
    cq_store *s;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/clauseqa.db", dir);
    assert_int_equal(cq_store_open(path, &s, &err), CQ_OK);
    assert_int_equal(cq_store_kb_ensure(s, "demo", kb, &err), CQ_OK);
    return s;
}

static void test_dense_plumbing(void **state) {
    (void)state;
    char dir[] = "/tmp/cq_dense_XXXXXX", path[512], models[512];
    cq_err err = {0};
    int64_t kb;
    cq_store *s = open_demo(dir, &kb);

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
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_vectors"), 0); /* weights without a document head */

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

    snprintf(path, sizeof path, "%s/data/demo/sample-services-agreement.md", src ? src : ".");
    if (cq_ingest_file(s, dir, kb, path, &io, &r, &err)) fail_msg("%s", err.msg);
    check_fusion(s, kb, dir, models, d);

    cq_store_close(s);
    cq_dense_close(d);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void set_doc_route(const char *models, const char *v) { set_member(models, "doc_route", v); }

/* Dense-only retrieval (50 deep) of question: clause ids and document ids. */
static size_t dense_docs(cq_store *s, int64_t kb, const char *question, cq_dense *d, int64_t *ids, int64_t *docs) {
    cq_hits h;
    cq_err err = {0};
    if (retrieve(s, kb, question, CQ_RETRIEVE_DENSE, 50, d, &h, &err)) fail_msg("%s", err.msg);
    for (size_t i = 0; i < h.n; i++) {
        ids[i] = h.hits[i].clause_id;
        docs[i] = h.hits[i].doc_id;
    }
    size_t n = h.n;
    cq_hits_free(&h);
    return n;
}

/* Weights with a document head (issue 27): ingest stores each document's vector (what the encoder gives its
 * clauses, under the weights' model and head); ssm.json's "doc_route" search routes the dense list to the nearest
 * document by those vectors; CLAUSEQA_DOC_ROUTE=off overrides it; a KB without them routes by the clause means;
 * a bad "doc_route" fails the open. */
static void test_doc_head_routing(void **state) {
    (void)state;
    char dir[] = "/tmp/cq_dense_head_XXXXXX", path[512], models[512];
    cq_err err = {0};
    int64_t kb;
    cq_store *s = open_demo(dir, &kb);
    snprintf(models, sizeof models, "%s/models", dir);
    mkdir(models, 0755);
    snprintf(models, sizeof models, "%s/models/ssm", dir);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 1, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = 32, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(models, &c, 11, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(models, &c, 64, 5), 0);
    cq_dense *d = NULL;
    unsetenv("CLAUSEQA_DOC_ROUTE");
    if (cq_dense_open(dir, models, &d, &err)) fail_msg("%s", err.msg);
    const cq_ssm_model *m = cq_dense_model(d);
    assert_int_equal(cq_ssm_model_doc_window(m), 64);
    assert_null(cq_doc_routing_for(cq_dense_doc_route(d), false)); /* off without a "doc_route" */
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    const char *files[] = {"劳动合同法(2012-12-28).md", "sample-services-agreement.md"};
    int64_t doc_ids[2];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/data/demo/%s", src ? src : ".", files[i]);
        cq_ingest_result r;
        cq_ingest_options io = {.dense = d};
        if (cq_ingest_file(s, dir, kb, path, &io, &r, &err)) fail_msg("%s", err.msg);
        doc_ids[i] = r.doc_id;
    }
    /* one vector a document, the one the encoder gives its clauses */
    int64_t *vid = NULL;
    float *vv = NULL;
    size_t nv = 0;
    assert_int_equal(cq_store_doc_vectors_kb(s, kb, cq_ssm_model_id(m), cq_ssm_model_doc_head_id(m), 32, &vid, &vv,
                                             &nv, &err), CQ_OK);
    assert_int_equal(nv, 2);
    cq_ssm_encoder *e = NULL;
    assert_int_equal(cq_ssm_encoder_new(m, CQ_SSM_BACKEND_REF, 1, &e, &err), CQ_OK);
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(vid[k], doc_ids[k]);
        int64_t *cids = NULL;
        size_t nc = 0;
        assert_int_equal(cq_vectors_doc_clause_ids(s, vid[k], &cids, &nc, &err), CQ_OK);
        const char **texts = calloc(nc, sizeof *texts);
        size_t *lens = calloc(nc, sizeof *lens);
        for (size_t i = 0; i < nc; i++) {
            char sql[128];
            snprintf(sql, sizeof sql, "SELECT text FROM clauses WHERE id = %lld", (long long)cids[i]);
            sqlite3_stmt *st;
            assert_int_equal(sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
            assert_int_equal(sqlite3_step(st), SQLITE_ROW);
            texts[i] = strdup((const char *)sqlite3_column_text(st, 0));
            lens[i] = strlen(texts[i]);
            sqlite3_finalize(st);
        }
        float *cv = malloc(nc * 32 * sizeof *cv), dv[32];
        cq_ssm_state *st = NULL;
        assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
        assert_int_equal(cq_ssm_encode_document_vec(e, st, texts, lens, nc, cv, dv, &err), CQ_OK);
        double rel = ssm_test_rel_err(vv + k * 32, dv, 32);
        if (rel > 1e-4) fail_msg("document %zu: stored vector off by %.3e", k, rel);
        cq_ssm_state_free(st);
        for (size_t i = 0; i < nc; i++) free((void *)texts[i]);
        free(texts);
        free(lens);
        free(cv);
        free(cids);
    }
    cq_ssm_encoder_free(e);
    /* the document nearest an English question by those vectors */
    const char *en = "What are the payment terms and how is the agreement terminated?";
    float q[32];
    assert_int_equal(cq_dense_query_vector(d, en, q, &err), CQ_OK);
    double sc[2] = {0, 0};
    for (size_t k = 0; k < 2; k++)
        for (int j = 0; j < 32; j++) sc[k] += (double)vv[k * 32 + j] * q[j];
    const int64_t top = sc[0] >= sc[1] ? vid[0] : vid[1];
    free(vid);
    free(vv);
    int64_t ids_off[50], docs_off[50], ids_on[50], docs_on[50];
    size_t n_off = dense_docs(s, kb, en, d, ids_off, docs_off);
    assert_int_equal(n_off, 50);
    size_t lead = 0; /* unrouted, the list mixes the two documents from its start */
    while (lead < n_off && docs_off[lead] == top) lead++;
    int64_t *cids = NULL;
    size_t n_top = 0;
    assert_int_equal(cq_vectors_doc_clause_ids(s, top, &cids, &n_top, &err), CQ_OK);
    free(cids);
    const size_t want_lead = n_top < 50 ? n_top : 50;
    assert_true(lead < want_lead);
    cq_dense_close(d);

    /* "doc_route" search, top 1, beta 100: the routed document's clauses (every one, up to the depth) lead */
    set_doc_route(models, "{\"method\": \"search\", \"fitted_on\": \"a test\", \"zh\": {\"top\": 0, "
                          "\"beta\": 0}, \"en\": {\"top\": 1, \"beta\": 100}}");
    if (cq_dense_open(dir, models, &d, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_dense_doc_route(d)->method, CQ_DOC_ROUTE_SEARCH);
    size_t n_on = dense_docs(s, kb, en, d, ids_on, docs_on);
    assert_int_equal(n_on, 50);
    for (size_t i = 0; i < want_lead; i++) assert_int_equal(docs_on[i], top);
    for (size_t i = want_lead; i < n_on; i++) assert_true(docs_on[i] != top);
    /* a Chinese question: off for it (zh top 0), the list as unrouted */
    const char *zh = "劳动者加班费怎么计算";
    int64_t zi_on[50], zd_on[50], zi_off[50], zd_off[50];
    size_t nz_on = dense_docs(s, kb, zh, d, zi_on, zd_on);
    cq_dense_close(d);
    /* CLAUSEQA_DOC_ROUTE=off over the weights' setting: as unrouted */
    setenv("CLAUSEQA_DOC_ROUTE", "off", 1);
    if (cq_dense_open(dir, models, &d, &err)) fail_msg("%s", err.msg);
    unsetenv("CLAUSEQA_DOC_ROUTE");
    assert_int_equal(dense_docs(s, kb, en, d, ids_on, docs_on), n_off);
    assert_memory_equal(ids_on, ids_off, n_off * sizeof *ids_on);
    assert_int_equal(dense_docs(s, kb, zh, d, zi_off, zd_off), nz_on);
    assert_memory_equal(zi_on, zi_off, nz_on * sizeof *zi_on);
    cq_dense_close(d);
    /* a KB ingested before the head (no document vectors): routing reads the clause means and still routes */
    assert_int_equal(test_count(s, "SELECT count(*) FROM doc_vectors"), 2);
    assert_int_equal(sqlite3_exec(cq_store_db(s), "DELETE FROM doc_vectors", NULL, NULL, NULL), SQLITE_OK);
    if (cq_dense_open(dir, models, &d, &err)) fail_msg("%s", err.msg);
    n_on = dense_docs(s, kb, en, d, ids_on, docs_on);
    assert_int_equal(n_on, 50);
    size_t lead2 = 0;
    while (lead2 < n_on && docs_on[lead2] == docs_on[0]) lead2++;
    assert_true(lead2 >= (n_top < 50 ? 1 : 50) && lead2 > lead); /* one document's clauses first */
    cq_dense_close(d);
    /* a bad "doc_route" fails the open, naming the member */
    set_doc_route(models, "{\"method\": \"search\", \"zh\": {\"top\": 1, \"beta\": 1}}");
    assert_int_equal(cq_dense_open(dir, models, &d, &err), CQ_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err.msg, "ssm.json"));
    assert_non_null(strstr(err.msg, "\"en\""));

    cq_store_close(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dense_plumbing), cmocka_unit_test(test_doc_head_routing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
