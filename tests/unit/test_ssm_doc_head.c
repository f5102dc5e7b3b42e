/* The document head (docs/SSM.md, "Document vectors"; issue 27): tests/data/ssm/dochead/ holds a tiny random encoder
 * with a random head, exported as train.py exports them, and the document vectors train.py's own doc_prefix and
 * doc_vectors give five documents (tools/ssm_train/make_dochead_fixture.py, float64). The C runtime encodes each whole
 * document (cq_ssm_seq.doc_vector) and must match to a relative error <= 1e-4: one document a call and all of them in
 * one call, on the reference, fast CPU and CUDA backends (CUDA skipped without a GPU). The head's loading refuses a
 * head without its window, a wrong shape, a bidirectional encoder; a request without a head or from a state that has
 * read tokens is refused; asking for the document vector leaves the clause vectors as they were. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "ssm/ssm_internal.h"
#include "test_json_util.h"
#include "test_ssm_util.h"

#define TOL 1e-4

typedef struct {
    int32_t *tokens;
    uint32_t *ends;
    size_t n_tokens, n_segments;
    float want[64];
} doc_case;

static size_t load_cases(const char *dir, doc_case *cases, size_t cap) {
    char path[1100];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    cJSON *j = test_read_json(path);
    assert_non_null(j);
    size_t n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(j, "cases")->child; c && n < cap; c = c->next, n++) {
        doc_case *d = &cases[n];
        const cJSON *t = cJSON_GetObjectItem(c, "tokens"), *e = cJSON_GetObjectItem(c, "segment_ends"),
                    *v = cJSON_GetObjectItem(c, "doc_vector");
        d->n_tokens = (size_t)cJSON_GetArraySize(t);
        d->n_segments = (size_t)cJSON_GetArraySize(e);
        d->tokens = malloc(d->n_tokens * sizeof *d->tokens);
        d->ends = malloc(d->n_segments * sizeof *d->ends);
        size_t i = 0;
        for (const cJSON *x = t->child; x; x = x->next) d->tokens[i++] = x->valueint;
        i = 0;
        for (const cJSON *x = e->child; x; x = x->next) d->ends[i++] = (uint32_t)x->valueint;
        i = 0;
        for (const cJSON *x = v->child; x && i < 64; x = x->next) d->want[i++] = (float)x->valuedouble;
    }
    cJSON_Delete(j);
    return n;
}

static void fixture_dir(char *dir, size_t cap) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(dir, cap, "%s/tests/data/ssm/dochead", src ? src : ".");
}

static void run_parity(cq_ssm_backend backend) {
    char dir[1024];
    fixture_dir(dir, sizeof dir);
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    if (cq_ssm_model_load(dir, &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(cq_ssm_model_doc_window(m), 1500);
    assert_int_equal(strlen(cq_ssm_model_doc_head_id(m)), 64);
    cq_ssm_encoder *e = NULL;
    cq_status rc = cq_ssm_encoder_new(m, backend, 2, &e, &err);
    if (rc == CQ_ERR_UNSUPPORTED && backend == CQ_SSM_BACKEND_CUDA) {
        cq_ssm_model_free(m);
        skip();
    }
    if (rc) fail_msg("%s", err.msg);
    const size_t E = (size_t)cq_ssm_model_config(m)->d_embed;
    doc_case cases[8];
    size_t n = load_cases(dir, cases, 8);
    assert_int_equal(n, 5);
    cq_ssm_seq seqs[8];
    float got[8][64], plain[8][64];
    float *vec[8], *vec_plain[8];
    for (size_t i = 0; i < n; i++) { /* one document a call, a fresh state each (as ingest on the CPU) */
        vec[i] = calloc(cases[i].n_segments * E, sizeof(float));
        vec_plain[i] = calloc(cases[i].n_segments * E, sizeof(float));
        cq_ssm_state *st = NULL;
        assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
        seqs[i] = (cq_ssm_seq){.tokens = cases[i].tokens, .n_tokens = cases[i].n_tokens,
                               .segment_ends = cases[i].ends, .n_segments = cases[i].n_segments, .state = st,
                               .vectors = vec[i], .doc_vector = got[i]};
        if (cq_ssm_encode_tokens(e, &seqs[i], 1, &err)) fail_msg("%s", err.msg);
        double rel = ssm_test_rel_err(got[i], cases[i].want, E);
        if (rel > TOL) fail_msg("backend %d, document %zu alone: relative error %.3e > %.0e", backend, i, rel, TOL);
        cq_ssm_state_free(st);
        /* the clause vectors are what they are without the document vector */
        cq_ssm_seq p = {.tokens = cases[i].tokens, .n_tokens = cases[i].n_tokens, .segment_ends = cases[i].ends,
                        .n_segments = cases[i].n_segments, .vectors = vec_plain[i]};
        if (cq_ssm_encode_tokens(e, &p, 1, &err)) fail_msg("%s", err.msg);
        assert_memory_equal(vec[i], vec_plain[i], cases[i].n_segments * E * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) { /* all in one call (as ingest on the GPU), no states */
        seqs[i].state = NULL;
        seqs[i].doc_vector = plain[i];
    }
    if (cq_ssm_encode_tokens(e, seqs, n, &err)) fail_msg("%s", err.msg);
    for (size_t i = 0; i < n; i++) {
        double rel = ssm_test_rel_err(plain[i], cases[i].want, E);
        if (rel > TOL) fail_msg("backend %d, document %zu in a batch: relative error %.3e > %.0e", backend, i, rel, TOL);
        free(vec[i]);
        free(vec_plain[i]);
        free(cases[i].tokens);
        free(cases[i].ends);
    }
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
}

static void test_parity_ref(void **state) { (void)state; run_parity(CQ_SSM_BACKEND_REF); }
static void test_parity_cpu(void **state) { (void)state; run_parity(CQ_SSM_BACKEND_CPU); }
static void test_parity_cuda(void **state) { (void)state; run_parity(CQ_SSM_BACKEND_CUDA); }

/* The text-level call gives the token-level call's document vector. */
static void test_text_level(void **state) {
    (void)state;
    char dir[] = "/tmp/cq_dochead_textXXXXXX";
    assert_non_null(mkdtemp(dir));
    rmdir(dir);
    cq_ssm_config c = {.vocab_size = CQ_SSM_VOCAB_SIZE, .d_model = 16, .n_layer = 2, .d_state = 4, .d_conv = 4,
                       .expand = 2, .dt_rank = 2, .d_embed = 16, .norm_eps = 1e-5f};
    assert_int_equal(ssm_test_write_model(dir, &c, 3, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 12, 4), 0);
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    if (cq_ssm_model_load(dir, &m, &err)) fail_msg("%s", err.msg);
    cq_ssm_encoder *e = NULL;
    assert_int_equal(cq_ssm_encoder_new(m, CQ_SSM_BACKEND_REF, 1, &e, &err), CQ_OK);
    const char *texts[] = {"Article 1 Scope", "Article 2 The parties agree to the terms below", "Article 3 Notice"};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(texts[i]);
    float v[3 * 16], dv[16], dv2[16];
    cq_ssm_state *st = NULL;
    assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
    if (cq_ssm_encode_document_vec(e, st, texts, lens, 3, v, dv, &err)) fail_msg("%s", err.msg);
    /* a state that has read tokens: refused */
    assert_int_equal(cq_ssm_encode_document_vec(e, st, texts, lens, 1, v, dv2, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "document's start"));
    cq_ssm_state_free(st);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    uint32_t ends[3];
    assert_int_equal(cq_ssm_document_tokens(m, true, texts, lens, 3, &ids, &n_ids, ends, &err), CQ_OK);
    assert_true(ends[0] <= 12 && ends[1] > 12); /* the window holds the first clause only */
    cq_ssm_seq s = {.tokens = ids, .n_tokens = n_ids, .segment_ends = ends, .n_segments = 3, .vectors = v,
                    .doc_vector = dv2};
    assert_int_equal(cq_ssm_encode_tokens(e, &s, 1, &err), CQ_OK);
    assert_memory_equal(dv, dv2, sizeof dv);
    double norm = 0;
    for (int i = 0; i < 16; i++) norm += (double)dv[i] * dv[i];
    assert_true(fabs(norm - 1.0) < 1e-5);
    /* only the window counts: another third clause leaves the document vector as it was */
    const char *texts2[] = {texts[0], texts[1], "Article 3 Something else entirely, and longer than before"};
    size_t lens2[3] = {lens[0], lens[1], strlen(texts2[2])};
    assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
    assert_int_equal(cq_ssm_encode_document_vec(e, st, texts2, lens2, 3, v, dv2, &err), CQ_OK);
    assert_memory_equal(dv, dv2, sizeof dv);
    cq_ssm_state_free(st);
    free(ids);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
    ssm_test_rm_model(dir);
}

static cq_status load_err(const char *dir, cq_err *err) {
    cq_ssm_model *m = NULL;
    cq_status rc = cq_ssm_model_load(dir, &m, err);
    cq_ssm_model_free(m);
    return rc;
}

static void test_loader(void **state) {
    (void)state;
    char dir[] = "/tmp/cq_dochead_loadXXXXXX";
    assert_non_null(mkdtemp(dir));
    rmdir(dir);
    cq_ssm_config c = {.vocab_size = 64, .d_model = 8, .n_layer = 1, .d_state = 4, .d_conv = 4, .expand = 2,
                       .dt_rank = 2, .d_embed = 8, .norm_eps = 1e-5f};
    cq_err err = {0};
    /* no head: none, no error; a request for a document vector is refused */
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    cq_ssm_model *m = NULL;
    assert_int_equal(cq_ssm_model_load(dir, &m, &err), CQ_OK);
    assert_int_equal(cq_ssm_model_doc_window(m), 0);
    assert_string_equal(cq_ssm_model_doc_head_id(m), "");
    cq_ssm_encoder *e = NULL;
    assert_int_equal(cq_ssm_encoder_new(m, CQ_SSM_BACKEND_REF, 1, &e, &err), CQ_OK);
    int32_t toks[4] = {2, 3, 9, 10};
    uint32_t end = 4;
    float v[8], dv[8];
    cq_ssm_seq s = {.tokens = toks, .n_tokens = 4, .segment_ends = &end, .n_segments = 1, .vectors = v,
                    .doc_vector = dv};
    assert_int_equal(cq_ssm_encode_tokens(e, &s, 1, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "document head"));
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
    /* a head without its window in the manifest */
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 0, 2), 0);
    assert_int_equal(load_err(dir, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "window_tokens"));
    /* a window that is not a positive integer */
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 0, 2), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"cq-hash-v1\", \"vocab_size\": 64, "
               "\"d_model\": 8, \"n_layer\": 1, \"d_state\": 4, \"d_conv\": 4, \"expand\": 2, \"dt_rank\": 2, "
               "\"d_embed\": 8, \"manifest\": {\"doc_head\": {\"window_tokens\": -3}}}\n");
    fclose(f);
    assert_int_equal(load_err(dir, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "window_tokens"));
    /* a head of another shape (trained for d_embed 16) */
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    cq_ssm_config other = c;
    other.d_embed = 16;
    assert_int_equal(ssm_test_write_doc_head(dir, &other, 64, 2), 0);
    assert_int_equal(load_err(dir, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "doc_head.weight"));
    assert_non_null(strstr(err.msg, "doc_head.safetensors"));
    /* a bidirectional encoder: no head (training's parallel forward is unidirectional) */
    c.bidirectional = true;
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 64, 2), 0);
    assert_int_equal(load_err(dir, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "unidirectional"));
    /* and a good one loads, its identity following the window */
    c.bidirectional = false;
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 64, 2), 0);
    assert_int_equal(cq_ssm_model_load(dir, &m, &err), CQ_OK);
    assert_int_equal(cq_ssm_model_doc_window(m), 64);
    char id64[65];
    snprintf(id64, sizeof id64, "%s", cq_ssm_model_doc_head_id(m));
    cq_ssm_model_free(m);
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    assert_int_equal(ssm_test_write_doc_head(dir, &c, 65, 2), 0);
    assert_int_equal(cq_ssm_model_load(dir, &m, &err), CQ_OK);
    assert_string_not_equal(cq_ssm_model_doc_head_id(m), id64);
    cq_ssm_model_free(m);
    ssm_test_rm_model(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_ref),
        cmocka_unit_test(test_parity_cpu),
        cmocka_unit_test(test_parity_cuda),
        cmocka_unit_test(test_text_level),
        cmocka_unit_test(test_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
