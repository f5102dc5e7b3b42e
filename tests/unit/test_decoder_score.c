/* The scheduling of cq_decoder_score_prompts (decoder/decoder.h, cq_decoder_set_scoring) on the CPU, with the real
 * model: concurrent calls (asks) share slices and every one completes with exactly the scores it gets alone; decode
 * steps queued while a call is part-way run between its slices (counted, not timed); prefix reuse gives bit-identical
 * logits, also after a prompt longer than the local layers' ring, and says how many tokens it saved. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_decoder_util.h"

static cq_decoder *dec;

static int setup(void **state) {
    (void)state;
    cq_decoder_options o = {CQ_DEVICE_CPU, 2, false};
    return (dec = test_open_real_model(&o)) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_decoder_close(dec);
    return 0;
}

/* A prompt of n tokens: BOS, then `shared` tokens common to every prompt made with the same salt 0, then tokens of
 * its own (seeded by salt). */
static int32_t *make_prompt(size_t n, size_t shared, unsigned salt) {
    const int32_t V = cq_decoder_get_info(dec)->n_vocab;
    int32_t *p = malloc(n * sizeof *p);
    p[0] = cq_tokenizer_bos(cq_decoder_tokenizer(dec));
    for (size_t i = 1; i < n; i++) {
        const unsigned s = i <= shared ? 0 : salt;
        p[i] = 300 + (int32_t)(((i + 1) * 7919u + s * 104729u + (i * s) % 977u) % (unsigned)(V - 300));
    }
    return p;
}

typedef struct {
    int32_t **p;
    size_t *len, n;
    int32_t ids[2];
    float *out;
    cq_status st;
} call;

static void *run_call(void *arg) {
    call *c = arg;
    cq_err err = {0};
    c->st = cq_decoder_score_prompts(dec, (const int32_t *const *)c->p, c->len, c->n, c->ids, 2, c->out, &err);
    return NULL;
}

static void make_call(call *c, size_t n, const size_t *lens, size_t shared, unsigned salt, int32_t yes, int32_t no) {
    c->n = n;
    c->p = calloc(n, sizeof *c->p);
    c->len = calloc(n, sizeof *c->len);
    c->out = calloc(2 * n, sizeof *c->out);
    for (size_t i = 0; i < n; i++) c->len[i] = lens[i], c->p[i] = make_prompt(lens[i], shared, salt + (unsigned)i);
    c->ids[0] = yes, c->ids[1] = no;
}

static void free_call(call *c) {
    for (size_t i = 0; i < c->n; i++) free(c->p[i]);
    free(c->p), free(c->len), free(c->out);
}

static uint64_t calls_seen(void) {
    cq_decoder_stats s;
    cq_decoder_get_stats(dec, &s);
    return s.score_calls;
}

/* Three asks at once: a blocker, then two asks with different ids; each gets the scores it gets alone, bit for bit,
 * and the two share a slice. */
static void test_calls_share_slices(void **state) {
    (void)state;
    cq_decoder_set_scoring(dec, 200, false);
    call blocker, a, b;
    const size_t lb[1] = {150}, la[3] = {40, 55, 30}, lbb[3] = {45, 25, 60};
    make_call(&blocker, 1, lb, 0, 1, 100, 200);
    make_call(&a, 3, la, 0, 11, 100, 200);
    make_call(&b, 3, lbb, 0, 21, 300, 200); /* ids merged in a shared slice: 100, 200, 300 */
    float alone_a[6], alone_b[6];
    run_call(&a), run_call(&b);
    assert_int_equal(a.st, CQ_OK);
    assert_int_equal(b.st, CQ_OK);
    memcpy(alone_a, a.out, sizeof alone_a), memcpy(alone_b, b.out, sizeof alone_b);
    memset(a.out, 0, sizeof alone_a), memset(b.out, 0, sizeof alone_b);

    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(dec, &s0);
    pthread_t tb, ta, tbb;
    const uint64_t c0 = calls_seen();
    pthread_create(&tb, NULL, run_call, &blocker);
    while (calls_seen() < c0 + 1) sched_yield(); /* the blocker's slice runs (~150 tokens: a good part of a second) */
    pthread_create(&ta, NULL, run_call, &a);
    while (calls_seen() < c0 + 2) sched_yield();
    pthread_create(&tbb, NULL, run_call, &b);
    pthread_join(tb, NULL), pthread_join(ta, NULL), pthread_join(tbb, NULL);
    assert_int_equal(blocker.st, CQ_OK);
    assert_int_equal(a.st, CQ_OK);
    assert_int_equal(b.st, CQ_OK);
    assert_memory_equal(a.out, alone_a, sizeof alone_a);
    assert_memory_equal(b.out, alone_b, sizeof alone_b);
    cq_decoder_get_stats(dec, &s1);
    assert_int_equal(s1.score_calls - s0.score_calls, 3);
    assert_int_equal(s1.score_prompts - s0.score_prompts, 7);
    assert_int_equal(s1.score_tokens - s0.score_tokens, 150 + 125 + 130);
    /* after the blocker: a's 125 tokens and b's first two (70) in one slice of <= 200, then b's last (60) */
    assert_true(s1.score_slices_shared - s0.score_slices_shared >= 1);
    assert_true(s1.score_slices - s0.score_slices <= 3);
    assert_int_equal(s1.phase[CQ_DECODER_RERANK_RUN].count - s0.phase[CQ_DECODER_RERANK_RUN].count, 3);
    free_call(&blocker), free_call(&a), free_call(&b);
}

typedef struct {
    cq_decoder_seq *s;
    volatile int stop;
    int steps;
    cq_status st;
} stepper;

static void *run_steps(void *arg) {
    stepper *t = arg;
    cq_err err = {0};
    const cq_top_request req = {4, 0, {0}};
    cq_top out;
    int32_t tok = 400;
    while (!t->stop && !t->st && cq_decoder_seq_pos(t->s) < cq_decoder_seq_limit(t->s)) {
        t->st = cq_decoder_eval_top(t->s, &tok, 1, &req, &out, &err);
        tok = out.top_ids[0];
        t->steps++;
    }
    return NULL;
}

/* An answer decoding while an ask reranks: its steps run between the rerank's slices (one prompt a slice here), so
 * they never wait behind the whole rerank. */
static void test_steps_between_slices(void **state) {
    (void)state;
    cq_decoder_set_scoring(dec, 1, true);
    cq_err err = {0};
    stepper t = {0};
    assert_int_equal(cq_decoder_seq_new(dec, 512, &t.s, &err), CQ_OK);
    int32_t *prompt = make_prompt(20, 0, 5);
    const cq_top_request req = {4, 0, {0}};
    cq_top out;
    assert_int_equal(cq_decoder_eval_top(t.s, prompt, 20, &req, &out, &err), CQ_OK);
    call c;
    const size_t lens[6] = {90, 70, 80, 60, 75, 85};
    make_call(&c, 6, lens, 0, 31, 100, 200);
    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(dec, &s0);
    pthread_t th;
    pthread_create(&th, NULL, run_steps, &t);
    while (t.steps < 1) sched_yield(); /* stepping */
    run_call(&c);
    t.stop = 1;
    pthread_join(th, NULL);
    assert_int_equal(c.st, CQ_OK);
    assert_int_equal(t.st, CQ_OK);
    cq_decoder_get_stats(dec, &s1);
    const uint64_t slices = s1.score_slices - s0.score_slices, mid = s1.step_forwards_mid_score - s0.step_forwards_mid_score;
    printf("6 prompts in %llu slices; %llu step forwards ran between them (%d steps in all)\n",
           (unsigned long long)slices, (unsigned long long)mid, t.steps);
    assert_int_equal(slices, 6);
    /* the stepper is queued while each slice runs, so the leader runs its step before the next slice: 5 gaps */
    assert_true(mid >= 3);
    free_call(&c);
    free(prompt);
    cq_decoder_seq_free(t.s);
}

/* Prompts sharing their first 140 tokens (a passage scored for several questions) and others that share nothing,
 * one of them longer than the ring (576 slots) in between: the same logits with and without reuse, bit for bit. */
static void test_prefix_reuse(void **state) {
    (void)state;
    cq_err err = {0};
    const size_t lens[5] = {180, 160, 600, 200, 150};
    call c;
    make_call(&c, 5, lens, 140, 41, 100, 200);
    /* prompt 2 (600 tokens) shares the 140 too, and runs between the others in token order: it overwrites ring
     * slots, so the prompt after it must not reuse what it left beyond the ring */
    cq_decoder_set_scoring(dec, 100000, false);
    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(dec, &s0);
    run_call(&c);
    assert_int_equal(c.st, CQ_OK);
    float plain[10];
    memcpy(plain, c.out, sizeof plain);
    cq_decoder_get_stats(dec, &s1);
    assert_int_equal(s1.score_reused_tokens, s0.score_reused_tokens);

    cq_decoder_set_scoring(dec, 100000, true);
    s0 = s1;
    memset(c.out, 0, sizeof plain);
    run_call(&c);
    assert_int_equal(c.st, CQ_OK);
    assert_memory_equal(c.out, plain, sizeof plain);
    cq_decoder_get_stats(dec, &s1);
    const uint64_t reused = s1.score_reused_tokens - s0.score_reused_tokens;
    printf("prefix reuse: %llu of %llu tokens not run again\n", (unsigned long long)reused,
           (unsigned long long)(s1.score_tokens - s0.score_tokens));
    /* 4 prompts of <= 576 tokens after a neighbour sharing 140: 128 each (whole chunks); the 600 one reuses none */
    assert_true(reused >= 3 * 128);
    /* again, the first two prompts only: the cache left by the last prompt is reused by the next call too */
    float again[4];
    const cq_decoder_stats s2 = s1;
    assert_int_equal(cq_decoder_score_prompts(dec, (const int32_t *const *)c.p, c.len, 2, c.ids, 2, again, &err), CQ_OK);
    assert_memory_equal(again, plain, sizeof again);
    cq_decoder_get_stats(dec, &s1);
    assert_true(s1.score_reused_tokens - s2.score_reused_tokens >= 2 * 128);
    free_call(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_share_slices),
        cmocka_unit_test(test_steps_between_slices),
        cmocka_unit_test(test_prefix_reuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
