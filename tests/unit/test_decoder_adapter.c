/* LoRA adapters on the CPU decoder (decoder/lora.h, docs/ANSWERS.md). First against transformers: a small random
 * adapter (tests/data/decoder/adapter, rank 4 on every projection of layers 0, 8 and 17) and the logits of
 * transformers' Gemma-3 with those weights merged by torch as PEFT merges LoRA (adapter_logits_ref.json, from
 * tools/decoder_ref/make_adapter_fixtures.py): the reference's top-16 logits within LOGIT_TOL at each checked
 * position, as test_decoder_forward.c holds the base model to. Then the real model with a random adapter against
 * a second reference, the same model with every adapted weight replaced by the float merge W + s B A
 * (cq_op_lora_merge_ref: dequantized, the delta summed in double), run by the CPU forward as F32 matrices. The
 * runtime instead multiplies the quantized weights and adds the low-rank term s B (A x) from bf16 factors; the
 * adapter is written in BF16 with alpha / rank = 2, so both sides use the same factor values and only summation
 * order differs.
 *
 * Tolerances (logits of the real model are 5..30): against transformers LOGIT_TOL on the top-16 logits (measured
 * 4.0e-5); against the float merge, exact mode over all 262,144 logits of every prompt position, max |difference|
 * < EXACT_TOL (measured 3.7e-4); the default decode step (int16 activations) against the exact adapted one <
 * FAST_TOL as in test_decoder_forward.c (measured 2.8e-3 to 3.9e-3). The adapter must matter: it moves the logits
 * by far more than the tolerance (measured up to 48.6). Then: removing an adapter restores the base logits bit for
 * bit; bad adapter files give errors that name the problem and leave the decoder as it was; the model's digest
 * cache. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "decoder/decoder.h"
#include "decoder/forward_cpu.h"
#include "decoder/gguf.h"
#include "decoder/lora.h"
#include "decoder/model.h"
#include "core/sha256.h"
#include "test_adapter_util.h"

#define LOGIT_TOL 0.02f
#define EXACT_TOL 2e-3f
#define FAST_TOL 0.01f

static char model[4096];
static char base_sha[65];
static cq_decoder *exact, *fast;

static int setup(void **state) {
    (void)state;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(model, sizeof model, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    cq_err err = {0};
    cq_decoder_options oe = {CQ_DEVICE_CPU, 0, true}, of = {CQ_DEVICE_CPU, 0, false};
    if (cq_decoder_open(model, &oe, &exact, &err) || cq_decoder_open(model, &of, &fast, &err)) {
        fprintf(stderr, "the model must be present (make setup fetches it): %s\n", err.msg);
        return -1;
    }
    if (cq_model_file_sha256(model, base_sha, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_decoder_close(exact);
    cq_decoder_close(fast);
    return 0;
}

static void tmp_dir(char *buf, size_t cap, const char *what) {
    snprintf(buf, cap, "/tmp/cq_test_adapter_%s_%d", what, (int)getpid());
}

/* Logits of every position of ids through d (a fresh sequence). */
static float *all_logits(cq_decoder *d, const int32_t *ids, int n) {
    const int V = cq_decoder_get_info(d)->n_vocab;
    float *out = malloc((size_t)n * V * sizeof *out);
    cq_decoder_seq *s;
    cq_err err = {0};
    assert_int_equal(cq_decoder_seq_new(d, n + 4, &s, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(s, ids, (size_t)n, out, true, &err), CQ_OK);
    cq_decoder_seq_free(s);
    return out;
}

static float max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

static int32_t *prompt_ids(cq_decoder *d, int *n) {
    static const char text[] = "第十二条 用人单位应当按照劳动合同约定和国家规定，向劳动者及时足额支付劳动报酬。问题：工资应当怎样支付？答案：";
    int32_t *ids = NULL;
    size_t len = 0;
    cq_err err = {0};
    assert_int_equal(cq_tokenizer_encode(cq_decoder_tokenizer(d), text, strlen(text), CQ_TOK_ADD_BOS, &ids, &len, &err),
                     CQ_OK);
    *n = (int)len;
    return ids;
}

/* The reference: the model's weights with the adapter merged in float, run by the exact CPU forward. */
static float *reference_logits(const test_adapter *ta, const int32_t *ids, int n) {
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    assert_int_equal(cq_gguf_open(model, &g, &err), CQ_OK);
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    float **merged = calloc((size_t)m.n_layer * TEST_N_PROJ, sizeof *merged);
    for (int32_t l = 0; l < m.n_layer; l++)
        for (int p = 0; p < TEST_N_PROJ; p++) {
            const float *a = ta->a[l * TEST_N_PROJ + p], *b = ta->b[l * TEST_N_PROJ + p];
            if (!a) continue;
            cq_wmat *w = (cq_wmat *)cq_proj_weight(&m.layers[l], (cq_proj)p);
            float *f = malloc((size_t)w->rows * w->cols * sizeof *f);
            cq_op_lora_merge_ref(w, a, b, ta->rank, ta->scale, f);
            merged[l * TEST_N_PROJ + p] = f;
            *w = (cq_wmat){f, CQ_QTYPE_F32, w->rows, w->cols, (size_t)w->cols * sizeof(float)};
        }
    cq_cpu_model *cm;
    cq_cpu_seq *s;
    assert_int_equal(cq_cpu_model_new(&m, 0, true, &cm, &err), CQ_OK);
    assert_int_equal(cq_cpu_seq_new(cm, n + 4, &s, &err), CQ_OK);
    float *out = malloc((size_t)n * m.n_vocab * sizeof *out);
    assert_int_equal(cq_cpu_eval(s, ids, (size_t)n, 0, out, true, &err), CQ_OK);
    cq_cpu_seq_free(s);
    cq_cpu_model_free(cm);
    for (int i = 0; i < m.n_layer * TEST_N_PROJ; i++) free(merged[i]);
    free(merged);
    cq_gemma_free(&m);
    cq_gguf_close(g);
    return out;
}

static void test_adapter_matches_transformers(void **state) {
    (void)state;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/tests/data/decoder/adapter", root ? root : ".");
    snprintf(path, sizeof path, "%s/tests/data/decoder/adapter_logits_ref.json", root ? root : ".");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = 0;
    fclose(f);
    cJSON *ref = cJSON_Parse(text);
    free(text);
    assert_non_null(ref);
    cq_err err = {0};
    if (cq_decoder_load_adapter(exact, dir, &err)) fail_msg("%s", err.msg);
    const int V = cq_decoder_get_info(exact)->n_vocab;
    float worst = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        const cJSON *jids = cJSON_GetObjectItem(c, "ids");
        const int n = cJSON_GetArraySize(jids);
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        for (int i = 0; i < n; i++) ids[i] = cJSON_GetArrayItem(jids, i)->valueint;
        float *got = all_logits(exact, ids, n);
        const cJSON *row;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(c, "positions")) {
            const int pos = cJSON_GetObjectItem(row, "pos")->valueint;
            const cJSON *tid = cJSON_GetObjectItem(row, "top_ids"), *tl = cJSON_GetObjectItem(row, "top_logits");
            const float *l = got + (size_t)pos * V;
            for (int k = 0; k < cJSON_GetArraySize(tid); k++) {
                float d = fabsf(l[cJSON_GetArrayItem(tid, k)->valueint] - (float)cJSON_GetArrayItem(tl, k)->valuedouble);
                worst = fmaxf(worst, d);
                assert_true(d < LOGIT_TOL);
            }
            const double gap = cJSON_GetArrayItem(tl, 0)->valuedouble - cJSON_GetArrayItem(tl, 1)->valuedouble;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (l[v] > l[best]) best = v;
            if (gap > LOGIT_TOL) assert_int_equal(best, cJSON_GetObjectItem(row, "argmax")->valueint);
        }
        free(got), free(ids);
    }
    fprintf(stderr, "  against transformers with the adapter merged: max |diff| over the top-16 logits %.2e\n",
            (double)worst);
    assert_int_equal(cq_decoder_load_adapter(exact, NULL, &err), CQ_OK);
    cJSON_Delete(ref);
}

static void adapter_matches_float_merge(const char *dtype) {
    const cq_decoder_info *info = cq_decoder_get_info(exact);
    const int V = info->n_vocab;
    char dir[256];
    tmp_dir(dir, sizeof dir, "merge");
    fprintf(stderr, "  factors stored as %s\n", dtype);
    /* every projection of every third layer, rank 8 (the runtime's paths do not depend on the rank) */
    test_adapter ta;
    test_adapter_spec spec = {.rank = 8, .alpha = 16, .layer_stride = 3, .base_sha256 = base_sha, .seed = 7,
                              .dtype = dtype};
    assert_int_equal(test_write_adapter(dir, info, &spec, &ta), 0);
    int n;
    int32_t *ids = prompt_ids(exact, &n);
    float *base = all_logits(exact, ids, n);
    cq_err err = {0};
    if (cq_decoder_load_adapter(exact, dir, &err)) fail_msg("%s", err.msg);
    const cq_adapter_info *ai = cq_decoder_adapter(exact);
    assert_non_null(ai);
    assert_string_equal(ai->name, "random-r8");
    assert_int_equal(ai->rank, 8);
    assert_int_equal(ai->steps, 0);
    assert_int_equal(ai->n_adapted, 6 * 7);
    float *got = all_logits(exact, ids, n);
    float *want = reference_logits(&ta, ids, n);
    const float e = max_abs_diff(got, want, (size_t)n * V), moved = max_abs_diff(base, want, (size_t)n * V);
    fprintf(stderr, "  %d positions x %d logits: adapted vs float merge max |diff| %.2e; the adapter moved them by "
            "up to %.2f\n", n, V, (double)e, (double)moved);
    assert_true(e < EXACT_TOL);
    assert_true(moved > 100 * EXACT_TOL);

    /* the default decoder's decode steps (int16 activations) against the exact adapted ones */
    assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
    cq_decoder_seq *se, *sf;
    assert_int_equal(cq_decoder_seq_new(exact, n + 4, &se, &err), CQ_OK);
    assert_int_equal(cq_decoder_seq_new(fast, n + 4, &sf, &err), CQ_OK);
    float *le = malloc((size_t)V * sizeof *le), *lf = malloc((size_t)V * sizeof *lf);
    assert_int_equal(cq_decoder_eval(se, ids, (size_t)n - 3, NULL, false, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(sf, ids, (size_t)n - 3, NULL, false, &err), CQ_OK);
    for (int i = n - 3; i < n; i++) {
        assert_int_equal(cq_decoder_eval(se, ids + i, 1, le, false, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(sf, ids + i, 1, lf, false, &err), CQ_OK);
        float d = max_abs_diff(le, lf, (size_t)V), dref = max_abs_diff(le, want + (size_t)i * V, (size_t)V);
        fprintf(stderr, "  decode step at %d: default vs exact %.2e, exact step vs float merge %.2e\n", i, (double)d,
                (double)dref);
        assert_true(d < FAST_TOL);
        assert_true(dref < EXACT_TOL);
    }
    cq_decoder_seq_free(se);
    cq_decoder_seq_free(sf);

    /* removing it gives the base model back, bit for bit */
    assert_int_equal(cq_decoder_load_adapter(exact, NULL, &err), CQ_OK);
    assert_int_equal(cq_decoder_load_adapter(fast, NULL, &err), CQ_OK);
    assert_null(cq_decoder_adapter(exact));
    float *again = all_logits(exact, ids, n);
    assert_memory_equal(again, base, (size_t)n * V * sizeof(float));
    free(again), free(le), free(lf), free(base), free(got), free(want), free(ids);
    test_adapter_free(&ta);
    test_rm_adapter(dir);
}

static void test_adapter_matches_float_merge(void **state) {
    (void)state;
    adapter_matches_float_merge("BF16");
}

/* int8 factors with a scale a row (tools/decoder_train/adapter_int8.py): the same forward as the float merge of the
 * values they stand for */
static void test_int8_adapter_matches_float_merge(void **state) {
    (void)state;
    adapter_matches_float_merge("I8");
}

/* Loading spec's adapter fails with a message holding needle, and the decoder keeps what it had. */
static void expect_error(const test_adapter_spec *spec, const char *needle) {
    char dir[256];
    tmp_dir(dir, sizeof dir, "bad");
    assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), spec, NULL), 0);
    const cq_adapter_info *before = cq_decoder_adapter(fast);
    char name_before[128];
    snprintf(name_before, sizeof name_before, "%s", before ? before->name : "");
    cq_err err = {0};
    assert_int_not_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
    fprintf(stderr, "  %s\n", err.msg);
    if (!strstr(err.msg, needle)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
    const cq_adapter_info *after = cq_decoder_adapter(fast);
    assert_true(!before == !after);
    if (after) assert_string_equal(after->name, name_before);
    test_rm_adapter(dir);
}

static void test_bad_adapters(void **state) {
    (void)state;
    test_adapter_spec ok = {.rank = 4, .alpha = 8, .layer_stride = 6, .base_sha256 = base_sha};
    for (int loaded = 0; loaded < 2; loaded++) { /* without an adapter, then with one: either stays */
        test_adapter_spec s = ok;
        s.bad_shape_tensor = "blk.6.ffn_up.lora_a";
        expect_error(&s, "blk.6.ffn_up.lora_a: shape [5, 640]");
        s = ok, s.extra_tensor = "blk.0.attn_q.lora_c";
        expect_error(&s, "unknown tensor blk.0.attn_q.lora_c");
        s = ok, s.extra_tensor = "blk.18.attn_q.lora_a";
        expect_error(&s, "blk.18.attn_q.lora_a: the model has 18 layers");
        s = ok, s.skip_tensor = "blk.12.attn_v.lora_b";
        expect_error(&s, "blk.12.attn_v has lora_a but not lora_b");
        s = ok, s.base_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        expect_error(&s, "was trained on base model test.gguf (sha256 0123456789ab...), not on this one");
        s = ok, s.json_override = "{\"format\": \"clauseqa-lora-v2\"}";
        expect_error(&s, "\"format\" must be \"clauseqa-lora-v1\"");
        s = ok, s.json_override = "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                                  "\"cq-prompt-v2\", \"base\": {\"sha256\": \"0\"}}";
        expect_error(&s, "prompt format \"cq-prompt-v2\" is not one this build knows");
        s = ok, s.json_override = "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4.5}";
        expect_error(&s, "\"rank\" must be an integer");
        s = ok, s.dtype = "I8", s.skip_scale = "blk.6.ffn_down.lora_b";
        expect_error(&s, "tensor blk.6.ffn_down.lora_b is I8 but blk.6.ffn_down.lora_b.scale is not there");
        s = ok, s.extra_tensor = "blk.0.attn_k.lora_a.scale"; /* scales beside a BF16 factor */
        expect_error(&s, "tensor blk.0.attn_k.lora_a.scale: scales for blk.0.attn_k.lora_a, which is not an I8 tensor");
        s = ok, s.dtype = "I8", s.extra_tensor = "blk.0.attn_q.lora_b.scale"; /* a second, [1, 1] one: a duplicate */
        expect_error(&s, "tensor blk.0.attn_q.lora_b.scale appears twice in the header");
        s = ok, s.json_override = "not json";
        expect_error(&s, "adapter.json: not a JSON object");
        s = ok, s.rank = 3; /* adapter.json says 4 */
        char json[512];
        snprintf(json, sizeof json, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                 "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}}", base_sha);
        s.json_override = json;
        expect_error(&s, "blk.0.attn_q.lora_a: shape [3, 640]; rank 4 and the model's 1024 x 640 weight need [4, 640]");
        /* the adapter's own refusal threshold: a number in (0, 2] */
        s = ok;
        snprintf(json, sizeof json, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                 "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"refusal_min_p\": 0}", base_sha);
        s.json_override = json;
        expect_error(&s, "\"refusal_min_p\" must be a number above 0 and at most 2");
        snprintf(json, sizeof json, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                 "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"refusal_min_p\": \"0.4\"}", base_sha);
        expect_error(&s, "\"refusal_min_p\" must be a number above 0 and at most 2");
        /* or one per question language, each in (0, 2], no other key; the confidence floor likewise, each in (0, 1) */
        const char *fields[][3] = {
            {"refusal_min_p", "{}", "must be a number above 0 and at most 2 (above 1: never refuse), or {"},
            {"refusal_min_p", "{\"zh\": 0.9, \"en\": 2.5}", "must be a number above 0 and at most 2"},
            {"refusal_min_p", "{\"zh\": \"0.9\"}", "must be a number above 0 and at most 2"},
            {"refusal_min_p", "{\"fr\": 0.9}", "\"refusal_min_p\": \"fr\" is not a language it knows (zh, en)"},
            {"refusal_min_p", "[0.9]", "must be a number above 0 and at most 2"},
            {"min_confidence", "0", "\"min_confidence\" must be a number above 0 and below 1, or {\"zh\": number, \"en\": number}"},
            {"min_confidence", "1", "\"min_confidence\" must be a number above 0 and below 1"},
            {"min_confidence", "-0.2", "\"min_confidence\" must be a number above 0 and below 1"},
            {"min_confidence", "\"0.3\"", "\"min_confidence\" must be a number above 0 and below 1"},
            {"min_confidence", "{}", "\"min_confidence\" must be a number above 0 and below 1"},
            {"min_confidence", "{\"zh\": 0.2, \"en\": 1.5}", "\"min_confidence\" must be a number above 0 and below 1"},
            {"min_confidence", "{\"de\": 0.2}", "\"min_confidence\": \"de\" is not a language it knows (zh, en)"},
            {"min_confidence", "[0.2]", "\"min_confidence\" must be a number above 0 and below 1"}};
        for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) {
            snprintf(json, sizeof json, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                     "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"%s\": %s}", base_sha, fields[k][0], fields[k][1]);
            expect_error(&s, fields[k][2]);
        }
        /* a truncated weights file, and a missing folder */
        char dir[256];
        tmp_dir(dir, sizeof dir, "trunc");
        assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &ok, NULL), 0);
        char path[512];
        snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(truncate(path, sb.st_size - 100), 0);
        cq_err err = {0};
        assert_int_not_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
        fprintf(stderr, "  %s\n", err.msg);
        assert_non_null(strstr(err.msg, "adapter.safetensors"));
        assert_non_null(strstr(err.msg, "data_offsets"));
        assert_int_equal(truncate(path, 5), 0);
        assert_int_not_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
        assert_non_null(strstr(err.msg, "too short"));
        test_rm_adapter(dir);
        assert_int_not_equal(cq_decoder_load_adapter(fast, "/nonexistent/adapter", &err), CQ_OK);
        assert_non_null(strstr(err.msg, "/nonexistent/adapter/adapter.json"));
        if (!loaded) { /* now with a good one loaded */
            tmp_dir(dir, sizeof dir, "good");
            assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &ok, NULL), 0);
            assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
            assert_string_equal(cq_decoder_adapter(fast)->name, "random-r4");
            assert_true(cq_decoder_adapter(fast)->refusal_min_p == 0); /* none named: the runtime's default */
            test_rm_adapter(dir);
            /* one that names its threshold keeps it */
            test_adapter_spec named = ok;
            char js[512];
            snprintf(js, sizeof js, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                     "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"refusal_min_p\": 0.35}", base_sha);
            named.json_override = js;
            assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &named, NULL), 0);
            assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
            assert_true(fabs(cq_decoder_adapter(fast)->refusal_min_p - 0.35) < 1e-12);
            assert_true(fabs(cq_decoder_adapter(fast)->refusal_min_p_en - 0.35) < 1e-12); /* one number: both */
            test_rm_adapter(dir);
            /* one per language, and a language left out (0: the runtime's default for it) */
            const char *langs[] = {"{\"zh\": 0.95, \"en\": 1.01}", "{\"en\": 0.5}"};
            const double want[][2] = {{0.95, 1.01}, {0, 0.5}};
            for (int k = 0; k < 2; k++) {
                snprintf(js, sizeof js, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                         "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"refusal_min_p\": %s}", base_sha, langs[k]);
                assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &named, NULL), 0);
                assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
                assert_true(fabs(cq_decoder_adapter(fast)->refusal_min_p - want[k][0]) < 1e-12);
                assert_true(fabs(cq_decoder_adapter(fast)->refusal_min_p_en - want[k][1]) < 1e-12);
                test_rm_adapter(dir);
            }
            /* its confidence floor: none named (0, the runtime's default), one number, one per language */
            assert_true(cq_decoder_adapter(fast)->min_confidence == 0);
            assert_true(cq_decoder_adapter(fast)->min_confidence_en == 0);
            const char *floors[] = {"0.25", "{\"zh\": 0.2, \"en\": 0.45}", "{\"en\": 0.45}"};
            const double want_floor[][2] = {{0.25, 0.25}, {0.2, 0.45}, {0, 0.45}};
            for (int k = 0; k < 3; k++) {
                snprintf(js, sizeof js, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 8, \"prompt_format\": "
                         "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"refusal_min_p\": 0.9, "
                         "\"min_confidence\": %s}", base_sha, floors[k]);
                assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &named, NULL), 0);
                assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
                assert_true(fabs(cq_decoder_adapter(fast)->min_confidence - want_floor[k][0]) < 1e-12);
                assert_true(fabs(cq_decoder_adapter(fast)->min_confidence_en - want_floor[k][1]) < 1e-12);
                assert_true(fabs(cq_decoder_adapter(fast)->refusal_min_p - 0.9) < 1e-12); /* read beside it */
                test_rm_adapter(dir);
            }
            assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(fast), &ok, NULL), 0);
            assert_int_equal(cq_decoder_load_adapter(fast, dir, &err), CQ_OK);
            test_rm_adapter(dir);
        }
    }
    cq_err err = {0};
    assert_int_equal(cq_decoder_load_adapter(fast, NULL, &err), CQ_OK);
}

static void test_model_digest_cache(void **state) {
    (void)state;
    char path[256], cache[300], hex[65], want[65];
    snprintf(path, sizeof path, "/tmp/cq_test_digest_%d.bin", (int)getpid());
    snprintf(cache, sizeof cache, "%s.sha256-cache", path);
    FILE *f = fopen(path, "wb");
    fputs("first contents", f);
    fclose(f);
    cq_err err = {0};
    assert_int_equal(cq_model_file_sha256(path, hex, &err), CQ_OK);
    cq_sha256_hex("first contents", 14, want);
    assert_string_equal(hex, want);
    assert_int_equal(access(cache, R_OK), 0);
    assert_int_equal(cq_model_file_sha256(path, hex, &err), CQ_OK); /* from the cache */
    assert_string_equal(hex, want);
    f = fopen(path, "wb"); /* new contents, another size: the cache is stale */
    fputs("second, longer contents", f);
    fclose(f);
    assert_int_equal(cq_model_file_sha256(path, hex, &err), CQ_OK);
    cq_sha256_hex("second, longer contents", 23, want);
    assert_string_equal(hex, want);
    /* the real model's digest is the one fetch_model.sh checks */
    char side[4200], line[200];
    snprintf(side, sizeof side, "%s.sha256", model);
    f = fopen(side, "r");
    if (f && fgets(line, sizeof line, f)) assert_memory_equal(line, base_sha, 64);
    if (f) fclose(f);
    unlink(path), unlink(cache);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adapter_matches_transformers),
        cmocka_unit_test(test_adapter_matches_float_merge),
        cmocka_unit_test(test_int8_adapter_matches_float_merge),
        cmocka_unit_test(test_bad_adapters),
        cmocka_unit_test(test_model_digest_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
