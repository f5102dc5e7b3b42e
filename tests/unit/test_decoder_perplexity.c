/* Perplexity of the real model on a fixed Chinese law text (articles 1-2 of the PRC Labour Contract Law) and a fixed
 * English contract text (~100 tokens each), pinned to transformers' Gemma-3 on the same GGUF
 * (tests/data/decoder/perplexity_ref.json, tools/decoder_ref/make_perplexity_fixtures.py). Tolerance: 0.1 % relative
 * (measured: under 1e-5), far below the change any real bug makes. Also the windowing: with a short context every
 * token is still scored once. */
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

#include "decoder/decoder.h"
#include "test_decoder_util.h"

#define PPL_REL_TOL 1e-3

static cq_decoder *dec;

static char *source_file(const char *rel, size_t *len) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
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
    if (len) *len = (size_t)n;
    return s;
}

static int setup(void **state) {
    (void)state;
    dec = test_open_real_model(NULL);
    return dec ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_decoder_close(dec);
    return 0;
}

static void test_pinned_perplexities(void **state) {
    (void)state;
    char *json = source_file("tests/data/decoder/perplexity_ref.json", NULL);
    assert_non_null(json);
    cJSON *doc = cJSON_Parse(json), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/decoder/%s", cJSON_GetObjectItem(c, "file")->valuestring);
        size_t len;
        char *text = source_file(rel, &len);
        assert_non_null(text);
        cq_perplexity p;
        cq_err err = {0};
        assert_int_equal(cq_decoder_perplexity(dec, text, len, 512, &p, &err), CQ_OK);
        double want = cJSON_GetObjectItem(c, "perplexity")->valuedouble;
        fprintf(stderr, "  %s: %lld tokens, perplexity %.4f (reference %.4f), %.1f tokens/s\n", rel,
                (long long)p.n_scored, p.perplexity, want, p.n_scored / p.seconds);
        assert_int_equal(p.n_scored, cJSON_GetObjectItem(c, "n_tokens")->valueint);
        assert_int_equal(p.n_windows, 1);
        assert_true(fabs(p.perplexity - want) <= PPL_REL_TOL * want);
        free(text);
        n++;
    }
    assert_int_equal(n, 2);
    cJSON_Delete(doc);
    free(json);
}

static void test_windows(void **state) {
    (void)state;
    size_t len;
    char *text = source_file("tests/data/decoder/ppl_en.txt", &len);
    assert_non_null(text);
    cq_perplexity p;
    cq_err err = {0};
    len = 250; /* ~55 tokens: a few windows of 24 */
    while (len && (text[len] & 0xc0) == 0x80) len--;
    assert_int_equal(cq_decoder_perplexity(dec, text, len, 24, &p, &err), CQ_OK);
    assert_int_equal(p.n_windows, (int)((p.n_tokens + 22) / 23));
    assert_true(p.n_windows >= 2);
    assert_int_equal(p.n_scored, p.n_tokens);
    assert_true(isfinite(p.perplexity) && p.perplexity > 1);
    assert_int_equal(cq_decoder_perplexity(dec, "", 0, 100, &p, &err), CQ_ERR_EMPTY);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned_perplexities),
        cmocka_unit_test(test_windows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
