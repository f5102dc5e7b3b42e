/* ssm/: the C encoder against the PyTorch reference (tools/ssm_ref/, fixtures in tests/data/ssm/), the tokenizer
 * against its Python twin, and the loader's messages.
 *
 * Tolerance: the fixtures hold float64 results for float32 weights; the float32 C result must match each tensor
 * (final outputs, vectors, final conv and scan states) to max|c - ref| / max|ref| <= 1e-4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "core/fileio.h"
#include "ssm/ssm_internal.h"
#include "test_json_util.h"
#include "test_ssm_util.h"

#define TOL 1e-4

static cJSON *load_json(const char *rel) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/ssm/%s", src ? src : ".", rel);
    return test_read_json(path);
}

static size_t json_len(const cJSON *a) { return (size_t)cJSON_GetArraySize(a); }

static float *json_floats(const cJSON *a) {
    size_t n = json_len(a);
    float *v = malloc((n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *x = a->child; x; x = x->next) v[i++] = (float)x->valuedouble;
    return v;
}

static void test_tokenizer_matches_python(void **state) {
    (void)state;
    cJSON *j = load_json("tokenizer.json");
    const cJSON *items = cJSON_GetObjectItem(j, "items");
    int n_items = 0;
    for (const cJSON *it = items->child; it; it = it->next, n_items++) {
        const char *hex = cJSON_GetObjectItem(it, "hex")->valuestring;
        size_t len = strlen(hex) / 2;
        char *text = malloc(len + 1);
        for (size_t i = 0; i < len; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            text[i] = (char)v;
        }
        const cJSON *want = cJSON_GetObjectItem(it, "ids");
        int32_t ids[512];
        size_t n = cq_ssm_tokenize(text, len, ids, 512);
        assert_int_equal(n, json_len(want));
        size_t i = 0;
        for (const cJSON *x = want->child; x; x = x->next, i++) assert_int_equal(ids[i], x->valueint);
        /* a short buffer still reports the full count */
        if (n > 2) assert_int_equal(cq_ssm_tokenize(text, len, ids, 2), n);
        free(text);
    }
    assert_true(n_items >= 8);
    cJSON_Delete(j);
}

/* The external vocabulary of the "table" fixture: table.json's rows (tools/ssm_ref/make_fixtures.py). */
typedef struct {
    float *rows;
    int n_embd;
    int calls; /* row() calls: each id is projected once, then cached */
} test_table;

static void test_table_row(void *ctx, int32_t id, float *out) {
    test_table *t = ctx;
    __atomic_add_fetch(&t->calls, 1, __ATOMIC_RELAXED);
    memcpy(out, t->rows + (size_t)id * t->n_embd, (size_t)t->n_embd * sizeof(float));
}

static cq_status test_table_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n, cq_err *err) {
    (void)ctx;
    *ids = malloc((len + 1) * sizeof **ids);
    if (!*ids) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) (*ids)[i] = 5 + (unsigned char)text[i]; /* one id per byte, 5..260 */
    *n = len;
    return CQ_OK;
}

static test_table table_ctx;
static cq_ssm_vocab table_vocab = {.name = "test-table", .n_vocab = 300, .n_embd = 16, .table_id = "test-table-1",
                                   .ctx = &table_ctx, .tokenize = test_table_tokenize, .row = test_table_row};

static void load_table(void) {
    if (table_ctx.rows) return;
    cJSON *j = load_json("table/table.json");
    table_ctx.rows = json_floats(cJSON_GetObjectItem(j, "rows"));
    table_ctx.n_embd = cJSON_GetObjectItem(j, "n_embd")->valueint;
    assert_int_equal(cJSON_GetObjectItem(j, "n_vocab")->valueint, 300);
    cJSON_Delete(j);
}

static void run_fixture(const char *name, cq_ssm_backend backend) {
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char dir[1024], rel[64];
    snprintf(dir, sizeof dir, "%s/tests/data/ssm/%s", src ? src : ".", name);
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    const cq_ssm_vocab *vocab = NULL;
    if (!strcmp(name, "table")) {
        load_table();
        vocab = &table_vocab;
    }
    if (cq_ssm_model_load_vocab(dir, vocab, &m, &err)) fail_msg("%s", err.msg);
    const cq_ssm_config *c = cq_ssm_model_config(m);
    cq_ssm_encoder *e = NULL;
    cq_status rc = cq_ssm_encoder_new(m, backend, 2, &e, &err);
    if (rc == CQ_ERR_UNSUPPORTED && backend == CQ_SSM_BACKEND_CUDA) {
        cq_ssm_model_free(m);
        skip();
    }
    if (rc) fail_msg("%s", err.msg);
    snprintf(rel, sizeof rel, "%s/cases.json", name);
    cJSON *j = load_json(rel);
    int n_cases = 0;
    for (const cJSON *cs = cJSON_GetObjectItem(j, "cases")->child; cs; cs = cs->next, n_cases++) {
        const cJSON *jt = cJSON_GetObjectItem(cs, "tokens"), *je = cJSON_GetObjectItem(cs, "segment_ends");
        size_t T = json_len(jt), S = json_len(je), split = (size_t)cJSON_GetObjectItem(cs, "split")->valueint;
        int32_t *tok = malloc(T * sizeof *tok);
        uint32_t *ends = malloc(S * sizeof *ends);
        size_t i = 0;
        for (const cJSON *x = jt->child; x; x = x->next) tok[i++] = x->valueint;
        i = 0;
        for (const cJSON *x = je->child; x; x = x->next) ends[i++] = (uint32_t)x->valueint;
        float *want_out = json_floats(cJSON_GetObjectItem(cs, "outputs"));
        float *want_vec = json_floats(cJSON_GetObjectItem(cs, "vectors"));
        float *want_conv = json_floats(cJSON_GetObjectItem(cs, "conv"));
        float *want_h = json_floats(cJSON_GetObjectItem(cs, "h"));
        float *out = calloc(T * c->d_model, sizeof *out), *vec = calloc(S * c->d_embed, sizeof *vec);
        size_t n_conv = (size_t)c->n_layer * m->d_inner * (c->d_conv - 1);
        size_t n_h = (size_t)c->n_layer * m->d_inner * c->d_state;

        /* whole, then cut at `split` into two calls that carry the state */
        for (int pass = 0; pass < 2; pass++) {
            cq_ssm_state *st = NULL;
            assert_int_equal(cq_ssm_state_new(m, &st, &err), CQ_OK);
            memset(out, 0, T * c->d_model * sizeof *out);
            if (pass == 0 || split == 0) {
                cq_ssm_seq s = {tok, T, ends, S, st, vec, out, NULL};
                if (cq_ssm_encode_tokens(e, &s, 1, &err)) fail_msg("%s", err.msg);
            } else {
                size_t s1 = 0;
                while (ends[s1] != split) s1++;
                s1++;
                uint32_t *ends2 = malloc(S * sizeof *ends2);
                for (size_t k = s1; k < S; k++) ends2[k - s1] = ends[k] - (uint32_t)split;
                cq_ssm_seq a = {tok, split, ends, s1, st, vec, out, NULL};
                cq_ssm_seq b = {tok + split, T - split, ends2, S - s1, st, vec + s1 * c->d_embed,
                                out + split * c->d_model, NULL};
                if (cq_ssm_encode_tokens(e, &a, 1, &err) || cq_ssm_encode_tokens(e, &b, 1, &err))
                    fail_msg("%s", err.msg);
                free(ends2);
            }
            double e_out = ssm_test_rel_err(out, want_out, T * c->d_model);
            double e_vec = ssm_test_rel_err(vec, want_vec, S * c->d_embed);
            double e_conv = ssm_test_rel_err(st->conv, want_conv, n_conv);
            double e_h = ssm_test_rel_err(st->h, want_h, n_h);
            if (e_out > TOL || e_vec > TOL || e_conv > TOL || e_h > TOL)
                fail_msg("%s backend %d case %d pass %d (T=%zu): rel err outputs %.2e vectors %.2e conv %.2e h %.2e",
                         name, backend, n_cases, pass, T, e_out, e_vec, e_conv, e_h);
            assert_int_equal(cq_ssm_state_tokens(st), (int64_t)T);
            cq_ssm_state_free(st);
        }
        free(tok);
        free(ends);
        free(want_out);
        free(want_vec);
        free(want_conv);
        free(want_h);
        free(out);
        free(vec);
    }
    assert_int_equal(n_cases, 4);
    cJSON_Delete(j);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
}

static void test_fixture_uni_ref(void **state) { (void)state; run_fixture("uni", CQ_SSM_BACKEND_REF); }
static void test_fixture_bidir_ref(void **state) { (void)state; run_fixture("bidir", CQ_SSM_BACKEND_REF); }
static void test_fixture_uni_cpu(void **state) { (void)state; run_fixture("uni", CQ_SSM_BACKEND_CPU); }
static void test_fixture_bidir_cpu(void **state) { (void)state; run_fixture("bidir", CQ_SSM_BACKEND_CPU); }
static void test_fixture_table_ref(void **state) { (void)state; run_fixture("table", CQ_SSM_BACKEND_REF); }
static void test_fixture_table_cpu(void **state) { (void)state; run_fixture("table", CQ_SSM_BACKEND_CPU); }
static void test_fixture_table_cuda(void **state) { (void)state; run_fixture("table", CQ_SSM_BACKEND_CUDA); }

/* An external vocabulary: each id's row is projected once and kept; text goes through the vocabulary's tokenizer;
 * the wrong vocabulary, or none, is refused with a reason. */
static void test_table_vocab(void **state) {
    (void)state;
    load_table();
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/ssm/table", src ? src : ".");
    cq_err err = {0};
    cq_ssm_model *m = NULL;
    assert_int_not_equal(cq_ssm_model_load(dir, &m, &err), CQ_OK);
    assert_non_null(strstr(err.msg, "\"test-table\" vocabulary"));
    cq_ssm_vocab other = table_vocab;
    other.table_id = "another table";
    assert_int_not_equal(cq_ssm_model_load_vocab(dir, &other, &m, &err), CQ_OK);
    assert_non_null(strstr(err.msg, "is not the one the weights were trained on"));
    other = table_vocab;
    other.n_embd = 32;
    assert_int_not_equal(cq_ssm_model_load_vocab(dir, &other, &m, &err), CQ_OK);
    assert_non_null(strstr(err.msg, "300 ids × 32"));
    char name[32];
    assert_int_equal(cq_ssm_model_tokenizer(dir, name, sizeof name, &err), CQ_OK);
    assert_string_equal(name, "test-table");

    assert_int_equal(cq_ssm_model_load_vocab(dir, &table_vocab, &m, &err), CQ_OK);
    cq_ssm_model *m2 = NULL; /* the id covers the table: same weights, same table, same id */
    assert_int_equal(cq_ssm_model_load_vocab(dir, &table_vocab, &m2, &err), CQ_OK);
    assert_string_equal(cq_ssm_model_id(m), cq_ssm_model_id(m2));
    cq_ssm_model_free(m2);
    cq_ssm_encoder *e = NULL;
    assert_int_equal(cq_ssm_encoder_new(m, CQ_SSM_BACKEND_REF, 1, &e, &err), CQ_OK);
    const char *q = "abcabc";
    size_t len = strlen(q);
    float v1[8], v2[8];
    table_ctx.calls = 0;
    assert_int_equal(cq_ssm_encode_queries(e, &q, &len, 1, v1, &err), CQ_OK);
    assert_int_equal(table_ctx.calls, 3); /* a, b, c: three ids, each projected once */
    /* the text reads as QRY + one id per byte: the same vector as the token-level call */
    int32_t tok[7] = {CQ_SSM_TOK_QRY, 5 + 'a', 5 + 'b', 5 + 'c', 5 + 'a', 5 + 'b', 5 + 'c'};
    uint32_t end = 7;
    cq_ssm_seq s = {tok, 7, &end, 1, NULL, v2, NULL, NULL};
    assert_int_equal(cq_ssm_encode_tokens(e, &s, 1, &err), CQ_OK);
    assert_true(ssm_test_rel_err(v1, v2, 8) < 1e-6);
    assert_int_equal(table_ctx.calls, 3);
    cq_ssm_encoder_free(e);
    cq_ssm_model_free(m);
}

static void expect_load_error(const char *dir, const char *needle) {
    cq_ssm_model *m = NULL;
    cq_err err = {0};
    assert_int_not_equal(cq_ssm_model_load(dir, &m, &err), CQ_OK);
    assert_null(m);
    if (!strstr(err.msg, needle)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
}

static void test_loader_messages(void **state) {
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/cq_test_ssm_load_%d", (int)getpid());
    cq_ssm_config c = {.vocab_size = 64, .d_model = 8, .n_layer = 2, .d_state = 4, .d_conv = 4, .expand = 2,
                       .dt_rank = 2, .d_embed = 8, .norm_eps = 1e-5f};
    expect_load_error(dir, "ssm.json");
    assert_int_equal(ssm_test_write_model(dir, &c, 1, "layers.1.mixer.A_log", NULL), 0);
    expect_load_error(dir, "missing tensor layers.1.mixer.A_log");
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, "layers.0.mixer.x_proj.weight"), 0);
    expect_load_error(dir, "tensor layers.0.mixer.x_proj.weight: shape [11, 16]; the config implies [10, 16]");
    /* weights of a bidirectional model under a unidirectional config */
    c.bidirectional = true;
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/ssm.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"cq-hash-v1\", \"vocab_size\": 64, "
               "\"d_model\": 8, \"n_layer\": 2, \"d_state\": 4, \"d_conv\": 4, \"expand\": 2, \"dt_rank\": 2, "
               "\"d_embed\": 8}");
    fclose(f);
    expect_load_error(dir, "unexpected tensor layers.0.mixer_rev");
    f = fopen(path, "w");
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"cq-hash-v1\", \"vocab_size\": 64, "
               "\"d_model\": 8, \"n_layer\": 2, \"d_state\": 4, \"d_conv\": 4, \"expand\": 2.5, \"dt_rank\": 2, "
               "\"d_embed\": 8}");
    fclose(f);
    expect_load_error(dir, "\"expand\" must be an integer");
    f = fopen(path, "w");
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"gemma3\", \"vocab_size\": 64, "
               "\"d_model\": 8, \"n_layer\": 2, \"d_state\": 4, \"d_conv\": 4, \"expand\": 2, \"dt_rank\": 2, "
               "\"d_embed\": 8}");
    fclose(f);
    expect_load_error(dir, "missing \"token_embd_dim\"");
    f = fopen(path, "w");
    fprintf(f, "{\"format\": \"clauseqa-ssm\", \"version\": 1, \"tokenizer\": \"gemma3\", \"vocab_size\": 64, "
               "\"token_embd_dim\": 16, \"token_table_id\": \"ab\", \"d_model\": 8, \"n_layer\": 2, \"d_state\": 4, "
               "\"d_conv\": 4, \"expand\": 2, \"dt_rank\": 2, \"d_embed\": 8}");
    fclose(f);
    expect_load_error(dir, "\"gemma3\" vocabulary (the decoder's tokenizer and token table), which was not given");
    f = fopen(path, "w");
    fprintf(f, "not json");
    fclose(f);
    expect_load_error(dir, "not a JSON object");
    /* a truncated weights file */
    c.bidirectional = false;
    assert_int_equal(ssm_test_write_model(dir, &c, 1, NULL, NULL), 0);
    snprintf(path, sizeof path, "%s/ssm.safetensors", dir);
    assert_int_equal(truncate(path, 200), 0);
    expect_load_error(dir, "ssm.safetensors");
    ssm_test_rm_model(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_matches_python), cmocka_unit_test(test_fixture_uni_ref),
        cmocka_unit_test(test_fixture_table_ref), cmocka_unit_test(test_fixture_table_cpu),
        cmocka_unit_test(test_fixture_table_cuda), cmocka_unit_test(test_table_vocab),
        cmocka_unit_test(test_fixture_bidir_ref),        cmocka_unit_test(test_fixture_uni_cpu),
        cmocka_unit_test(test_fixture_bidir_cpu),        cmocka_unit_test(test_loader_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
