/* Sampler (greedy, temperature, top-k, top-p, repetition penalty) on hand-made logits, and generation on the real
 * model: greedy text equals the reference's greedy tokens, streaming delivers the same text in whole characters,
 * stop strings cut the output, the callback can stop it, max_tokens holds; two sequences on one model from two
 * threads at once. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/decoder.h"
#include "test_decoder_util.h"
#include "decoder/sampler.h"
#include "core/utf8.h"

static cq_decoder *dec;

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

/* frequencies of n draws over 4 tokens with probabilities 0.1 0.2 0.3 0.4 */
static void draw(cq_sampler_params p, int n, double freq[4]) {
    cq_sampler s;
    cq_err err = {0};
    assert_int_equal(cq_sampler_init(&s, &p, 4, &err), CQ_OK);
    int count[4] = {0};
    for (int i = 0; i < n; i++) {
        float logits[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
        int32_t t = cq_sampler_pick(&s, logits, NULL, 0);
        assert_true(t >= 0 && t < 4);
        count[t]++;
    }
    for (int i = 0; i < 4; i++) freq[i] = (double)count[i] / n;
    cq_sampler_free(&s);
}

static void test_sampler(void **state) {
    (void)state;
    cq_sampler_params p = cq_sampler_defaults();
    double f[4];
    draw(p, 100, f); /* greedy */
    assert_true(f[3] == 1.0);
    p.temperature = 1.0f;
    draw(p, 40000, f);
    for (int i = 0; i < 4; i++) assert_true(fabs(f[i] - 0.1 * (i + 1)) < 0.015);
    p.top_p = 0.5f; /* nucleus: {0.4, 0.3} */
    draw(p, 40000, f);
    assert_true(f[0] == 0 && f[1] == 0);
    assert_true(fabs(f[3] - 0.4 / 0.7) < 0.015);
    p.top_p = 1.0f;
    p.top_k = 1;
    draw(p, 1000, f);
    assert_true(f[3] == 1.0);
    p.top_k = 3;
    draw(p, 40000, f);
    assert_true(f[0] == 0);
    assert_true(fabs(f[1] - 0.2 / 0.9) < 0.015);
    p.temperature = 0.01f; /* nearly greedy */
    p.top_k = 0;
    draw(p, 1000, f);
    assert_true(f[3] > 0.99);

    /* repetition penalty: the favourite, once seen, loses to the runner-up */
    cq_sampler s;
    cq_err err = {0};
    p = cq_sampler_defaults();
    p.repetition_penalty = 2.0f;
    assert_int_equal(cq_sampler_init(&s, &p, 4, &err), CQ_OK);
    float logits[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int32_t hist[3] = {3, 3, 3}; /* penalized once, not three times */
    assert_int_equal(cq_sampler_pick(&s, logits, hist, 3), 2);
    assert_true(logits[3] == 2.0f);
    float neg[4] = {-1.0f, -2.0f, -3.0f, -0.5f};
    assert_int_equal(cq_sampler_pick(&s, neg, hist, 3), 0); /* -0.5 * 2 = -1.0 ties, first wins */
    cq_sampler_free(&s);

    p.top_p = 0;
    assert_int_equal(cq_sampler_init(&s, &p, 4, &err), CQ_ERR_INVALID);
    p = cq_sampler_defaults();
    p.temperature = -1;
    assert_int_equal(cq_sampler_init(&s, &p, 4, &err), CQ_ERR_INVALID);
}

typedef struct {
    char buf[4096];
    size_t len;
    int calls, stop_after;
} sink;

static bool collect(void *user, const char *text, size_t len) {
    sink *k = user;
    assert_true(k->len + len < sizeof k->buf);
    assert_true(cq_utf8_valid(text, len)); /* whole characters only */
    memcpy(k->buf + k->len, text, len);
    k->len += len;
    k->calls++;
    return !(k->stop_after && k->calls >= k->stop_after);
}

static void test_generate_greedy_and_stream(void **state) {
    (void)state;
    const cq_tokenizer *tok = cq_decoder_tokenizer(dec);
    /* greedy tokens of the reference (tests/data/decoder/logits_ref.json, "en_short") */
    const int32_t want_ids[8] = {506, 5279, 529, 506, 2891, 529, 7001, 236761};
    char *want;
    cq_err err = {0};
    assert_int_equal(cq_tokenizer_decode(tok, want_ids, 8, false, &want, NULL, &err), CQ_OK);
    cq_decoder_seq *s;
    assert_int_equal(cq_decoder_seq_new(dec, 64, &s, &err), CQ_OK);
    cq_generate_params p = cq_generate_defaults();
    p.max_tokens = 8;
    sink k = {0};
    char *out;
    cq_generate_stats st;
    assert_int_equal(cq_decoder_generate(s, "The capital of France is", &p, collect, &k, &out, &st, &err), CQ_OK);
    assert_string_equal(out, want);
    assert_int_equal(k.len, strlen(want));
    assert_memory_equal(k.buf, want, k.len);
    assert_int_equal(st.new_tokens, 8);
    assert_int_equal(st.prompt_tokens, 6);
    free(out);

    /* a stop string inside the text: output ends before it, nothing of it streamed */
    const char *stop[] = {"France", " of the", NULL};
    p.stop = stop;
    k = (sink){0};
    assert_int_equal(cq_decoder_generate(s, "The capital of France is", &p, collect, &k, &out, &st, &err), CQ_OK);
    const char *cut = strstr(want, " of the");
    assert_non_null(cut);
    assert_int_equal(strlen(out), (size_t)(cut - want));
    assert_memory_equal(out, want, strlen(out));
    assert_int_equal(k.len, strlen(out));
    assert_true(st.stopped_by_string);
    free(out);

    /* the callback stops it */
    p.stop = NULL;
    k = (sink){.stop_after = 1};
    assert_int_equal(cq_decoder_generate(s, "The capital of France is", &p, collect, &k, &out, &st, &err), CQ_OK);
    assert_true(st.stopped_by_callback);
    assert_int_equal(k.calls, 1);
    assert_true(st.new_tokens < 8);
    free(out);

    /* sampling with a seed is repeatable */
    p.sampler.temperature = 0.8f;
    p.sampler.top_k = 40;
    p.sampler.top_p = 0.95f;
    p.sampler.seed = 42;
    p.max_tokens = 4;
    char *a, *b;
    assert_int_equal(cq_decoder_generate(s, "第一条", &p, NULL, NULL, &a, NULL, &err), CQ_OK);
    assert_int_equal(cq_decoder_generate(s, "第一条", &p, NULL, NULL, &b, NULL, &err), CQ_OK);
    assert_string_equal(a, b);
    assert_true(cq_utf8_valid(a, strlen(a)));
    free(a), free(b);
    assert_int_equal(cq_decoder_generate(s, "", &p, NULL, NULL, &a, NULL, &err), CQ_OK); /* BOS alone is a prompt */
    free(a);
    p.encode_flags = 0;
    assert_int_equal(cq_decoder_generate(s, "", &p, NULL, NULL, &a, NULL, &err), CQ_ERR_INVALID);
    cq_decoder_seq_free(s);
    free(want);
}

/* Two sequences on one model from two threads at once give what each gives alone. */
typedef struct {
    const char *prompt;
    char *out;
    cq_status rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    cq_decoder_seq *s;
    cq_err err = {0};
    j->rc = cq_decoder_seq_new(dec, 64, &s, &err);
    if (j->rc) return NULL;
    cq_generate_params p = cq_generate_defaults();
    p.max_tokens = 6;
    j->rc = cq_decoder_generate(s, j->prompt, &p, NULL, NULL, &j->out, NULL, &err);
    cq_decoder_seq_free(s);
    return NULL;
}

static void test_concurrent_sequences(void **state) {
    (void)state;
    job alone[2] = {{"The capital of France is", NULL, 0}, {"第一条 为了保护劳动者的合法权益，", NULL, 0}};
    job together[2] = {alone[0], alone[1]};
    run_job(&alone[0]);
    run_job(&alone[1]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run_job, &together[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(alone[i].rc, CQ_OK);
        assert_int_equal(together[i].rc, CQ_OK);
        assert_string_equal(alone[i].out, together[i].out);
        free(alone[i].out), free(together[i].out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_generate_greedy_and_stream),
        cmocka_unit_test(test_concurrent_sequences),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
