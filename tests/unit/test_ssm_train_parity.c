/* The C runtime against the TRAINING model (issue 6): tests/data/ssm/train/ holds a small random model and the
 * vectors tools/ssm_train/model.py (the parallel forward the encoder is trained with, its document/query layout and
 * its pooling) gives for a few documents and questions, computed in float64 by tools/ssm_train/make_parity_fixture.py.
 * The C text-level calls (tokenizer, BOS/SEP/QRY, encoder, pooling) must give the same vectors for the same
 * weights: max|c - ref| / max|ref| <= 1e-4 per document / question, for the reference and the fast CPU backends
 * (and CUDA where a GPU is present).
 *
 * tests/data/ssm/train_gemma/ is the same for an encoder on the decoder's vocabulary (docs/SSM.md, "Input layer"):
 * the C side gets the Gemma-3 tokenizer and token table from the installed GGUF through app/ssm_vocab.c (skipped
 * where data/models/gemma-3-270m-q4_k_m.gguf is not installed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "app/ssm_vocab.h"
#include "core/fileio.h"
#include "ssm/ssm_internal.h"
#include "test_json_util.h"
#include "test_ssm_util.h"

#define TOL 1e-4

static cJSON *load_cases(const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/cases.json", dir);
    return test_read_json(path);
}

static float *floats(const cJSON *a, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(a);
    float *v = malloc((*n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *x = a->child; x; x = x->next) v[i++] = (float)x->valuedouble;
    return v;
}

static void run_fixture(const char *name, cq_ssm_backend backend) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char dir[1024], gguf[1100];
    snprintf(dir, sizeof dir, "%s/tests/data/ssm/%s", src ? src : ".", name);
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    cq_ssm_gemma_vocab *gv = NULL;
    if (!strcmp(name, "train_gemma")) {
        snprintf(gguf, sizeof gguf, "%s/data/models/gemma-3-270m-q4_k_m.gguf", src ? src : ".");
        if (access(gguf, R_OK)) skip();
        if (cq_ssm_gemma_vocab_open(gguf, &gv, &err)) fail_msg("%s", err.msg);
    }
    if (cq_ssm_model_load_vocab(dir, gv ? cq_ssm_gemma_vocab_get(gv) : NULL, &m, &err)) fail_msg("%s", err.msg);
    const cq_ssm_config *c = cq_ssm_model_config(m);
    cq_ssm_encoder *e = NULL;
    cq_status rc = cq_ssm_encoder_new(m, backend, 2, &e, &err);
    if (rc == CQ_ERR_UNSUPPORTED && backend == CQ_SSM_BACKEND_CUDA) {
        cq_ssm_model_free(m);
        cq_ssm_gemma_vocab_close(gv);
        skip();
    }
    if (rc) fail_msg("%s", err.msg);
    cJSON *j = load_cases(dir);
    int n_docs = 0, n_queries = 0;
    const cJSON *ids = cJSON_GetObjectItem(j, "token_ids");
    if (gv && ids) { /* the adapter's tokenizer gives the ids training saw (gemma_vocab.py) */
        const cJSON *qs = cJSON_GetObjectItem(ids, "queries");
        const cJSON *cs = cJSON_GetObjectItem(j, "cases")->child;
        while (cs && strcmp(cJSON_GetObjectItem(cs, "kind")->valuestring, "query")) cs = cs->next;
        for (const cJSON *q = qs->child; q && cs; q = q->next, cs = cs->next) {
            const char *text = cJSON_GetObjectItem(cs, "text")->valuestring;
            int32_t *got = NULL;
            size_t n = 0;
            const cq_ssm_vocab *v = cq_ssm_gemma_vocab_get(gv);
            assert_int_equal(v->tokenize(v->ctx, text, strlen(text), &got, &n, &err), CQ_OK);
            assert_int_equal(n, (size_t)cJSON_GetArraySize(q));
            size_t i = 0;
            for (const cJSON *x = q->child; x; x = x->next, i++) assert_int_equal(got[i], x->valueint);
            free(got);
        }
    }
    for (const cJSON *cs = cJSON_GetObjectItem(j, "cases")->child; cs; cs = cs->next) {
        const char *kind = cJSON_GetObjectItem(cs, "kind")->valuestring;
        size_t n_want = 0;
        float *want = floats(cJSON_GetObjectItem(cs, "vectors"), &n_want);
        float *got = NULL;
        if (!strcmp(kind, "document")) {
            const cJSON *cl = cJSON_GetObjectItem(cs, "clauses");
            size_t n = (size_t)cJSON_GetArraySize(cl), i = 0;
            const char **texts = malloc(n * sizeof *texts);
            size_t *lens = malloc(n * sizeof *lens);
            for (const cJSON *x = cl->child; x; x = x->next, i++) {
                texts[i] = x->valuestring;
                lens[i] = strlen(x->valuestring);
            }
            assert_int_equal(n_want, n * (size_t)c->d_embed);
            got = calloc(n_want, sizeof *got);
            cq_ssm_state *st = NULL;
            assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
            if (cq_ssm_encode_document(e, st, texts, lens, n, got, &err)) fail_msg("%s", err.msg);
            cq_ssm_state_free(st);
            free(texts);
            free(lens);
            n_docs++;
        } else {
            const char *q = cJSON_GetObjectItem(cs, "text")->valuestring;
            size_t len = strlen(q);
            assert_int_equal(n_want, (size_t)c->d_embed);
            got = calloc(n_want, sizeof *got);
            if (cq_ssm_encode_queries(e, &q, &len, 1, got, &err)) fail_msg("%s", err.msg);
            n_queries++;
        }
        double rel = ssm_test_rel_err(got, want, n_want);
        if (rel > TOL) fail_msg("backend %d, %s case %d: relative error %.3e > %.0e", backend, kind,
                                n_docs + n_queries, rel, TOL);
        free(got);
        free(want);
    }
    assert_true(n_docs >= 3 && n_queries >= 3);
    cJSON_Delete(j);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
    cq_ssm_gemma_vocab_close(gv);
}

static void test_train_parity_ref(void **state) { (void)state; run_fixture("train", CQ_SSM_BACKEND_REF); }
static void test_train_parity_cpu(void **state) { (void)state; run_fixture("train", CQ_SSM_BACKEND_CPU); }
static void test_train_parity_cuda(void **state) { (void)state; run_fixture("train", CQ_SSM_BACKEND_CUDA); }
static void test_gemma_parity_ref(void **state) { (void)state; run_fixture("train_gemma", CQ_SSM_BACKEND_REF); }
static void test_gemma_parity_cpu(void **state) { (void)state; run_fixture("train_gemma", CQ_SSM_BACKEND_CPU); }
static void test_gemma_parity_cuda(void **state) { (void)state; run_fixture("train_gemma", CQ_SSM_BACKEND_CUDA); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_parity_ref),
        cmocka_unit_test(test_train_parity_cpu),
        cmocka_unit_test(test_train_parity_cuda),
        cmocka_unit_test(test_gemma_parity_ref),
        cmocka_unit_test(test_gemma_parity_cpu),
        cmocka_unit_test(test_gemma_parity_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
