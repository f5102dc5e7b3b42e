/* Golden test of the CPU forward on the real model: logits against transformers' Gemma-3 (float32, same GGUF;
 * tests/data/decoder/logits_ref.json from tools/decoder_ref/make_logit_fixtures.py), on short English, Chinese
 * and chat prompts and on one of 753 tokens, longer than the 512-token sliding window (positions before, at and
 * after the window edge, and with the local ring buffer wrapped; the prompt goes in uneven pieces of 1 to 411
 * tokens, split at the checked positions). Plus greedy continuations, sequence limits and bad ids.
 *
 * Two decoders: the exact one (options.exact, as CLAUSEQA_CPU_EXACT=1: float products everywhere, the reference)
 * and the default one, whose decode steps and part of whose prompts quantize activations to int16 for integer
 * products (decoder/forward_cpu.h).
 *
 * Tolerance: every one of the reference's top-16 logits within LOGIT_TOL (absolute; logits here are 5..30), and
 * the same argmax wherever the reference's top two differ by more than that. Measured: exact, max 3.9e-5 on the
 * short prompts and 1.8e-4 on the long one (both sides are float32; the rest is summation order); default, max
 * 2.9e-3. The default against the exact one, over all 262,144 logits of every checked position: max |difference|
 * within FAST_TOL (measured 3.9e-3 with the AVX-512 kernels, 4.5e-3 with the AVX2 ones), and the greedy
 * continuations identical. The exact mode computes the same bits on the AVX2 and AVX-512 levels. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "decoder/cpu_isa.h"
#include "decoder/decoder.h"

#define LOGIT_TOL 0.02f
#define FAST_TOL 0.01f

static cq_decoder *dec;  /* exact */
static cq_decoder *fast; /* the default */
static cJSON *ref;

static char *source_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static int setup(void **state) {
    (void)state;
    cq_err err = {0};
    cq_decoder_options opt = {CQ_DEVICE_CPU, 0, false}, exact = {CQ_DEVICE_CPU, 0, true};
    cq_status st = cq_decoder_open(source_path("data/models/gemma-3-270m-q4_k_m.gguf"), &exact, &dec, &err);
    if (st || cq_decoder_open(source_path("data/models/gemma-3-270m-q4_k_m.gguf"), &opt, &fast, &err)) {
        fprintf(stderr, "the model must be present (make setup fetches it): %s\n", err.msg);
        return -1;
    }
    char *json = read_file(source_path("tests/data/decoder/logits_ref.json"));
    ref = json ? cJSON_Parse(json) : NULL;
    free(json);
    return ref ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_decoder_close(dec);
    cq_decoder_close(fast);
    cJSON_Delete(ref);
    return 0;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int32_t *case_ids(cJSON *c, int *n) {
    cJSON *ids = cJSON_GetObjectItem(c, "ids");
    *n = cJSON_GetArraySize(ids);
    int32_t *out = malloc((size_t)*n * sizeof *out);
    for (int i = 0; i < *n; i++) out[i] = cJSON_GetArrayItem(ids, i)->valueint;
    return out;
}

/* Every checked position of every case through d: the reference's top-16 within LOGIT_TOL. With other (a second
 * decoder), also the largest |difference| between the two over all logits, into *other_worst. */
static void check_reference_logits(cq_decoder *d, cq_decoder *other, float *other_worst) {
    const int V = cq_decoder_get_info(d)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits), *logits2 = malloc((size_t)V * sizeof *logits2);
    cJSON *c;
    int n_checked = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        int n;
        int32_t *ids = case_ids(c, &n);
        cq_decoder_seq *s, *s2 = NULL;
        cq_err err = {0};
        assert_int_equal(cq_decoder_seq_new(d, n + 16, &s, &err), CQ_OK);
        if (other) assert_int_equal(cq_decoder_seq_new(other, n + 16, &s2, &err), CQ_OK);
        int fed = 0;
        float worst = 0;
        cJSON *pos;
        cJSON_ArrayForEach(pos, cJSON_GetObjectItem(c, "positions")) {
            int p = cJSON_GetObjectItem(pos, "pos")->valueint;
            /* feed up to p without logits, then token p with them */
            assert_int_equal(cq_decoder_eval(s, ids + fed, (size_t)(p - fed), NULL, false, &err), CQ_OK);
            assert_int_equal(cq_decoder_eval(s, ids + p, 1, logits, false, &err), CQ_OK);
            if (other) {
                assert_int_equal(cq_decoder_eval(s2, ids + fed, (size_t)(p - fed), NULL, false, &err), CQ_OK);
                assert_int_equal(cq_decoder_eval(s2, ids + p, 1, logits2, false, &err), CQ_OK);
                for (int i = 0; i < V; i++) *other_worst = fmaxf(*other_worst, fabsf(logits[i] - logits2[i]));
            }
            fed = p + 1;
            cJSON *top_ids = cJSON_GetObjectItem(pos, "top_ids"), *top = cJSON_GetObjectItem(pos, "top_logits");
            for (int k = 0; k < cJSON_GetArraySize(top_ids); k++) {
                int id = cJSON_GetArrayItem(top_ids, k)->valueint;
                float want = (float)cJSON_GetArrayItem(top, k)->valuedouble, d = fabsf(logits[id] - want);
                if (d > worst) worst = d;
                if (d > LOGIT_TOL) {
                    fprintf(stderr, "%s pos %d token %d: logit %.5f, reference %.5f\n",
                            cJSON_GetObjectItem(c, "name")->valuestring, p, id, logits[id], want);
                    fail();
                }
            }
            float gap = (float)(cJSON_GetArrayItem(top, 0)->valuedouble - cJSON_GetArrayItem(top, 1)->valuedouble);
            if (gap > LOGIT_TOL) assert_int_equal(argmax(logits, V), cJSON_GetObjectItem(pos, "argmax")->valueint);
            n_checked++;
        }
        fprintf(stderr, "  %-12s %4d tokens: max |logit - reference| %.2e over the top-16 at %d positions\n",
                cJSON_GetObjectItem(c, "name")->valuestring, n, worst, cJSON_GetArraySize(cJSON_GetObjectItem(c, "positions")));
        cq_decoder_seq_free(s);
        cq_decoder_seq_free(s2);
        free(ids);
    }
    assert_true(n_checked >= 12);
    free(logits), free(logits2);
}

static void test_logits_match_reference(void **state) {
    (void)state;
    check_reference_logits(dec, NULL, NULL);
}

/* The default decoder against transformers as well, and against the exact decoder over all logits. */
static void test_default_decode_close_to_exact(void **state) {
    (void)state;
    float worst = 0;
    check_reference_logits(fast, dec, &worst);
    fprintf(stderr, "  default vs exact: max |logit difference| %.2e over all logits (tolerance %.0e)\n", worst, FAST_TOL);
    assert_true(worst <= FAST_TOL);
}

static void greedy_continuations(cq_decoder *dec) {
    const int V = cq_decoder_get_info(dec)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        cJSON *greedy = cJSON_GetObjectItem(c, "greedy");
        if (cJSON_GetArraySize(greedy) == 0) continue;
        int n;
        int32_t *ids = case_ids(c, &n);
        cq_decoder_seq *s;
        cq_err err = {0};
        assert_int_equal(cq_decoder_seq_new(dec, 128, &s, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(s, ids, (size_t)n, logits, false, &err), CQ_OK);
        for (int i = 0; i < cJSON_GetArraySize(greedy); i++) {
            int32_t next = argmax(logits, V);
            assert_int_equal(next, cJSON_GetArrayItem(greedy, i)->valueint);
            assert_int_equal(cq_decoder_eval(s, &next, 1, logits, false, &err), CQ_OK);
        }
        cq_decoder_seq_free(s);
        free(ids);
    }
    free(logits);
}

/* both decoders produce the reference's greedy tokens */
static void test_greedy_continuations(void **state) {
    (void)state;
    greedy_continuations(dec);
    greedy_continuations(fast);
}

/* The exact mode computes the same bits on every vector level (its AVX-512 kernels keep the AVX2 ones' order of
 * operations): a 300-token prompt in chunks (the prompt attention's blocks, the ring) and 3 decode steps, all
 * logits compared between AVX2 and AVX-512 where the CPU runs both. */
static void test_exact_same_on_every_level(void **state) {
    (void)state;
    const cq_isa top = cq_isa_active();
    if (top < CQ_ISA_AVX512) return;
    const int V = cq_decoder_get_info(dec)->n_vocab, n_steps = 3, P = 300;
    cJSON *c, *long_case = NULL; /* the longest case */
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases")) {
        if (!long_case || cJSON_GetArraySize(cJSON_GetObjectItem(c, "ids")) >
                              cJSON_GetArraySize(cJSON_GetObjectItem(long_case, "ids")))
            long_case = c;
    }
    int n;
    int32_t *ids = case_ids(long_case, &n);
    assert_true(n > P + n_steps);
    float *logits[2];
    for (int k = 0; k < 2; k++) {
        cq_isa_set(k ? CQ_ISA_AVX512 : CQ_ISA_AVX2);
        logits[k] = malloc((size_t)(n_steps + 1) * V * sizeof *logits[k]);
        cq_decoder_seq *s;
        cq_err err = {0};
        assert_int_equal(cq_decoder_seq_new(dec, P + n_steps + 1, &s, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(s, ids, P, logits[k], false, &err), CQ_OK);
        for (int i = 0; i < n_steps; i++)
            assert_int_equal(cq_decoder_eval(s, ids + P + i, 1, logits[k] + (size_t)(i + 1) * V, false, &err), CQ_OK);
        cq_decoder_seq_free(s);
    }
    cq_isa_set(top);
    assert_memory_equal(logits[0], logits[1], (size_t)(n_steps + 1) * V * sizeof *logits[0]);
    free(logits[0]), free(logits[1]), free(ids);
}

static void test_bad_input(void **state) {
    (void)state;
    cq_decoder_seq *s;
    cq_err err = {0};
    assert_int_equal(cq_decoder_seq_new(dec, 16, &s, &err), CQ_OK);
    int32_t bad[2] = {2, 1 << 30};
    assert_int_equal(cq_decoder_eval(s, bad, 2, NULL, false, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_equal(cq_decoder_seq_pos(s), 0);
    /* a full sequence refuses more and stays as it was */
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = 2 + i;
    assert_int_equal(cq_decoder_eval(s, ids, 16, NULL, false, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(s, ids, 1, NULL, false, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_decoder_seq_pos(s), 16);
    cq_decoder_seq_free(s);
    assert_int_equal(cq_decoder_seq_new(dec, 1 << 30, &s, &err), CQ_ERR_INVALID);
    cq_decoder *d2;
    assert_int_equal(cq_decoder_open("/nonexistent.gguf", NULL, &d2, &err), CQ_ERR_NOT_FOUND);
    const cq_decoder_info *info = cq_decoder_get_info(dec);
    assert_int_equal(info->n_layer, 18);
    assert_int_equal(info->n_global_layers, 3);
    assert_int_equal(info->sliding_window, 512);
    assert_int_equal(info->head_dim, 256);
}

/* The weights are read from the CPU's own copy: the pages of the GGUF's file mapping they were copied from are
 * given back (docs/OPERATIONS.md: before, the 270M model counted twice, ~240 MiB). Each mapping of the file (one a
 * decoder) keeps resident at most a quarter of the file (its header, the tokenizer's vocabulary). */
static void test_weights_counted_once(void **state) {
    (void)state;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) skip();
    char line[1024];
    bool in_model = false;
    int maps = 0;
    long long size_kb = 0;
    while (fgets(line, sizeof line, f)) {
        long long a, b, kb;
        if (sscanf(line, "%llx-%llx", &a, &b) == 2 && strchr(line, ' ')) {
            in_model = strstr(line, "gemma-3-270m-q4_k_m.gguf") != NULL;
            size_kb = (b - a) / 1024;
            if (in_model) maps++;
        } else if (in_model && sscanf(line, "Rss: %lld kB", &kb) == 1) {
            fprintf(stderr, "  the GGUF's mapping: %lld of %lld kB resident\n", kb, size_kb);
            assert_true(kb < size_kb / 4);
        }
    }
    fclose(f);
    assert_int_equal(maps, 2); /* the exact and the default decoder, each its own mapping */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_counted_once),
        cmocka_unit_test(test_logits_match_reference),
        cmocka_unit_test(test_default_decode_close_to_exact),
        cmocka_unit_test(test_greedy_continuations),
        cmocka_unit_test(test_exact_same_on_every_level),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
