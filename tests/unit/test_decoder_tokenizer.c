/* Tokenizer read from the real Gemma-3 GGUF: ids against fixtures from two independent reference tokenizers
 * (tools/decoder_ref/make_tokenizer_fixtures.py), and exact decode(encode(s)) round trips for arbitrary bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "decoder/gguf.h"
#include "decoder/tokenizer.h"

static cq_tokenizer *tok;

static char *source_path(const char *rel) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    static char buf[4096];
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
    const char *path = source_path("data/models/gemma-3-270m-q4_k_m.gguf");
    cq_gguf *g;
    cq_err err = {0};
    if (cq_gguf_open(path, &g, &err)) {
        fprintf(stderr, "cannot load the model (run make setup / tools/fetch_model.sh): %s\n", err.msg);
        return -1;
    }
    cq_status s = cq_tokenizer_from_gguf(g, &tok, &err);
    cq_gguf_close(g); /* the tokenizer keeps its own copy */
    if (s) fprintf(stderr, "%s\n", err.msg);
    return s ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    cq_tokenizer_free(tok);
    return 0;
}

static void assert_round_trip(const char *text, size_t len, unsigned flags, bool render_special) {
    int32_t *ids;
    size_t n;
    cq_err err = {0};
    assert_int_equal(cq_tokenizer_encode(tok, text, len, flags, &ids, &n, &err), CQ_OK);
    char *back;
    size_t back_len;
    assert_int_equal(cq_tokenizer_decode(tok, ids, n, render_special, &back, &back_len, &err), CQ_OK);
    if (back_len != len || memcmp(back, text, len)) {
        fprintf(stderr, "round trip failed for %zu bytes: got %zu bytes\n", len, back_len);
        fail();
    }
    free(back);
    free(ids);
}

static void test_fixture_ids(void **state) {
    (void)state;
    char *json = read_file(source_path("tests/data/decoder/tokenizer_ids.json"));
    assert_non_null(json);
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetObjectItem(doc, "vocab_size")->valueint, cq_tokenizer_vocab_size(tok));
    cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t *ids;
        size_t n;
        cq_err err = {0};
        assert_int_equal(cq_tokenizer_encode(tok, text, strlen(text), CQ_TOK_PARSE_SPECIAL, &ids, &n, &err), CQ_OK);
        int ok = (int)n == cJSON_GetArraySize(want);
        for (size_t i = 0; ok && i < n; i++) ok = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        if (!ok) {
            fprintf(stderr, "ids differ for %s\n got:", text);
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        assert_true(ok);
        /* The same text round-trips both ways: specials parsed and rendered, or left as text. */
        assert_round_trip(text, strlen(text), CQ_TOK_PARSE_SPECIAL, true);
        assert_round_trip(text, strlen(text), 0, false);
        free(ids);
        n_cases++;
    }
    assert_true(n_cases >= 20);
    cJSON_Delete(doc);
    free(json);
}

static void test_special_tokens(void **state) {
    (void)state;
    assert_int_equal(cq_tokenizer_bos(tok), 2);
    assert_int_equal(cq_tokenizer_eos(tok), 1);
    int32_t sot = cq_tokenizer_find(tok, "<start_of_turn>");
    assert_true(sot > 0);
    assert_int_equal(cq_tokenizer_type(tok, sot), CQ_TOKEN_CONTROL);
    int32_t *ids;
    size_t n;
    cq_err err = {0};
    const char *text = "<start_of_turn>user";
    assert_int_equal(cq_tokenizer_encode(tok, text, strlen(text), CQ_TOK_ADD_BOS | CQ_TOK_PARSE_SPECIAL, &ids, &n, &err),
                     CQ_OK);
    assert_true(n >= 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], sot);
    free(ids);
    /* Without PARSE_SPECIAL the control token is plain text. */
    assert_int_equal(cq_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], sot);
    free(ids);
    /* Control tokens render as nothing unless asked. */
    char buf[64];
    assert_int_equal(cq_tokenizer_piece(tok, sot, false, buf, sizeof buf), 0);
    assert_int_equal(cq_tokenizer_piece(tok, sot, true, buf, sizeof buf), strlen("<start_of_turn>"));
    int32_t bad = 1 << 30;
    char *out;
    assert_int_equal(cq_tokenizer_decode(tok, &bad, 1, false, &out, NULL, &err), CQ_ERR_INVALID);
}

static void test_round_trip_any_bytes(void **state) {
    (void)state;
    const char *fixed[] = {"\xe2\x96\x81 literal U+2581 \xe2\x96\x81\xe2\x96\x81", "\xff\xfe invalid \xc3 utf-8 \xed\xa0\x80",
                           "   ", "\t\t\n \n", "\xf0\x9f\x98", "a\0b"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        assert_round_trip(fixed[i], i == 5 ? 3 : strlen(fixed[i]), 0, false);
    /* Random byte strings, biased towards ASCII, spaces and multi-byte lead bytes. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[300];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = (size_t)(iter % 97) * 3;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned r = (unsigned)(x >> 32);
            const char alphabet[] = " \n<>abcxyz019\xe4\xb8\xad\xe2\x96\x81\xf0\x9f";
            buf[i] = (r & 3) ? alphabet[r % (sizeof alphabet - 1)] : (char)(r >> 8);
        }
        assert_round_trip(buf, len, 0, false);
        assert_round_trip(buf, len, CQ_TOK_PARSE_SPECIAL, true);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_ids),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_round_trip_any_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
