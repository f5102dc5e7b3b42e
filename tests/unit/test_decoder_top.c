/* A step's candidates (decoder/top.h): cq_top_from_logits against a plain sort of every id (larger logit first,
 * the smaller id on ties) and the log-sum-exp summed in long double; then cq_decoder_eval_top on the CPU decoder
 * against cq_decoder_eval's full logits for a prompt and a few decode steps, its errors (k, named ids, token ids,
 * the sequence's limit), and its stats. The CUDA kernels are compared with cq_top_from_logits in
 * test_decoder_cuda.c. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/top.h"
#include "test_decoder_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static const float *sort_logits;
static int by_logit_then_id(const void *a, const void *b) {
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (sort_logits[i] != sort_logits[j]) return sort_logits[i] > sort_logits[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

/* n_vocab logits drawn from few values (many ties) or spread, checked for k = 1, 7, 64 and named ids. */
static void check_row(int32_t n_vocab, bool ties) {
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int32_t *order = malloc((size_t)n_vocab * sizeof *order);
    for (int32_t i = 0; i < n_vocab; i++) {
        logits[i] = ties ? (float)(next_u32() % 9) - 4.0f : (float)(next_u32() % 2000001) / 40000.0f - 25.0f;
        order[i] = i;
    }
    sort_logits = logits;
    qsort(order, (size_t)n_vocab, sizeof *order, by_logit_then_id);
    long double sum = 0;
    float mx = logits[order[0]];
    for (int32_t i = 0; i < n_vocab; i++) sum += expl((long double)logits[i] - mx);
    const double lse = (double)(mx + logl(sum));
    const int ks[] = {1, 7, CQ_TOP_MAX};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        cq_top_request req = {ks[t], 3, {n_vocab - 1, 0, n_vocab / 2}};
        cq_top top;
        cq_top_from_logits(logits, n_vocab, &req, &top);
        const int want = ks[t] < n_vocab ? ks[t] : n_vocab;
        assert_int_equal(top.n, want);
        for (int i = 0; i < want; i++) {
            assert_int_equal(top.top_ids[i], order[i]);
            assert_true(top.top_logits[i] == logits[order[i]]);
        }
        assert_true(fabs(top.lse - lse) < 1e-9 * fabs(lse) + 1e-9);
        for (int j = 0; j < req.n_ids; j++) assert_true(top.id_logits[j] == logits[req.ids[j]]);
    }
    free(logits);
    free(order);
}

static void test_top_reference(void **state) {
    (void)state;
    const int32_t sizes[] = {1, 5, 64, 65, 1000, 4033, 262144};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        check_row(sizes[i], true);
        check_row(sizes[i], false);
    }
}

static cq_decoder *dec;

static int open_model(void **state) {
    (void)state;
    cq_decoder_options opt = {CQ_DEVICE_CPU, 0, false};
    dec = test_open_real_model(&opt);
    return dec ? 0 : -1;
}

static int close_model(void **state) {
    (void)state;
    cq_decoder_close(dec);
    return 0;
}

/* The same prompt and steps through cq_decoder_eval (full logits, candidates on the host) and cq_decoder_eval_top. */
static void test_eval_top_cpu(void **state) {
    (void)state;
    cq_err err = {0};
    const int32_t V = cq_decoder_get_info(dec)->n_vocab;
    const cq_tokenizer *tok = cq_decoder_tokenizer(dec);
    int32_t prompt[24];
    for (int i = 0; i < 24; i++) prompt[i] = i == 0 ? cq_tokenizer_bos(tok) : 300 + (i * 7919) % (V - 300);
    cq_decoder_seq *a, *b;
    assert_int_equal(cq_decoder_seq_new(dec, 30, &a, &err), CQ_OK);
    assert_int_equal(cq_decoder_seq_new(dec, 30, &b, &err), CQ_OK);
    float *logits = malloc((size_t)V * sizeof *logits);
    const cq_top_request req = {CQ_TOP_MAX, 2, {cq_tokenizer_eos(tok), 300}};
    cq_top ta, tb;
    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(dec, &s0);
    assert_int_equal(s0.seqs, 2);
    assert_true(s0.kv_bytes > 0);
    assert_int_equal(cq_decoder_eval(a, prompt, 24, logits, false, &err), CQ_OK);
    cq_top_from_logits(logits, V, &req, &ta);
    assert_int_equal(cq_decoder_eval_top(b, prompt, 24, &req, &tb, &err), CQ_OK);
    assert_int_equal(cq_decoder_seq_pos(b), 24);
    for (int step = 0;; step++) {
        assert_memory_equal(ta.top_ids, tb.top_ids, sizeof ta.top_ids);
        assert_memory_equal(ta.top_logits, tb.top_logits, sizeof ta.top_logits);
        assert_true(ta.lse == tb.lse);
        assert_memory_equal(ta.id_logits, tb.id_logits, 2 * sizeof(float));
        if (step == 3) break;
        const int32_t pick = tb.top_ids[0];
        assert_int_equal(cq_decoder_eval(a, &pick, 1, logits, false, &err), CQ_OK);
        cq_top_from_logits(logits, V, &req, &ta);
        assert_int_equal(cq_decoder_eval_top(b, &pick, 1, &req, &tb, &err), CQ_OK);
    }
    cq_decoder_get_stats(dec, &s1);
    assert_int_equal(s1.steps - s0.steps, 3);
    assert_int_equal(s1.forwards - s0.forwards, 3);
    assert_int_equal(s1.batch_hist[0] - s0.batch_hist[0], 3);
    /* errors leave the sequence where it was */
    const int32_t one = 5, bad = V;
    cq_top_request r = req;
    r.k = 0;
    assert_int_equal(cq_decoder_eval_top(b, &one, 1, &r, &tb, &err), CQ_ERR_INVALID);
    r.k = CQ_TOP_MAX + 1;
    assert_int_equal(cq_decoder_eval_top(b, &one, 1, &r, &tb, &err), CQ_ERR_INVALID);
    r = req, r.n_ids = CQ_TOP_MAX_IDS + 1;
    assert_int_equal(cq_decoder_eval_top(b, &one, 1, &r, &tb, &err), CQ_ERR_INVALID);
    r = req, r.ids[1] = V;
    assert_int_equal(cq_decoder_eval_top(b, &one, 1, &r, &tb, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_decoder_eval_top(b, &bad, 1, &req, &tb, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_decoder_eval_top(b, prompt, 0, &req, &tb, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_decoder_eval_top(b, prompt, 4, &req, &tb, &err), CQ_ERR_INVALID); /* past 30 */
    assert_int_equal(cq_decoder_seq_pos(b), 27);
    free(logits);
    cq_decoder_seq_free(a);
    cq_decoder_seq_free(b);
    cq_decoder_get_stats(dec, &s1);
    assert_int_equal(s1.seqs, 0);
    assert_int_equal(s1.kv_bytes, 0);
    /* each sequence's prompt and steps went into the phase histograms when it was freed, once a sequence */
    const cq_lat_hist *h0 = s0.phase, *h1 = s1.phase;
    for (int p = CQ_DECODER_PREFILL_WAIT; p <= CQ_DECODER_DECODE_RUN; p++)
        assert_int_equal(h1[p].count - h0[p].count, 2);
    assert_true(h1[CQ_DECODER_PREFILL_RUN].sum > h0[CQ_DECODER_PREFILL_RUN].sum);
    assert_true(h1[CQ_DECODER_DECODE_RUN].sum > h0[CQ_DECODER_DECODE_RUN].sum);
    assert_int_equal(h1[CQ_DECODER_RERANK_RUN].count, h0[CQ_DECODER_RERANK_RUN].count);
    assert_string_equal(cq_decoder_phase_name(CQ_DECODER_DECODE_WAIT), "decode_wait");
}

/* Decode steps of several threads at once go through the decoder's batcher (on the CPU one after another, on CUDA
 * one batched forward): each row's candidates and log-sum-exp must be the ones the same sequence gets stepping
 * alone (issue 31: on CUDA the batched step's log-sum-exp was up to 1.3 off batch 1's; test_decoder_cuda.c checks
 * that path on a GPU). Bit for bit on the CPU. */
#define STEP_THREADS 4
#define STEP_COUNT 6
typedef struct {
    cq_decoder_seq *s;
    int index;
    cq_top out[STEP_COUNT];
    cq_status st;
} step_job;

static void *step_main(void *arg) {
    step_job *j = arg;
    cq_err err = {0};
    const int32_t V = cq_decoder_get_info(dec)->n_vocab;
    const cq_top_request req = {8, 2, {5, 300}};
    for (int k = 0; k < STEP_COUNT && !j->st; k++) {
        const int32_t t = 300 + (int32_t)((unsigned)(j->index * 7919 + k * 104729) % (unsigned)(V - 300));
        j->st = cq_decoder_eval_top(j->s, &t, 1, &req, &j->out[k], &err);
    }
    return NULL;
}

static void test_concurrent_steps_lse_cpu(void **state) {
    (void)state;
    cq_err err = {0};
    const int32_t V = cq_decoder_get_info(dec)->n_vocab;
    step_job alone[STEP_THREADS], together[STEP_THREADS];
    for (int pass = 0; pass < 2; pass++) {
        step_job *jobs = pass ? together : alone;
        for (int i = 0; i < STEP_THREADS; i++) {
            int32_t p[40];
            const int len = 8 + 9 * i;
            for (int t = 0; t < len; t++)
                p[t] = t == 0 ? 2 : 300 + (int32_t)((unsigned)(i * 31 + t * 7919) % (unsigned)(V - 300));
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].index = i;
            assert_int_equal(cq_decoder_seq_new(dec, len + STEP_COUNT, &jobs[i].s, &err), CQ_OK);
            assert_int_equal(cq_decoder_eval(jobs[i].s, p, (size_t)len, NULL, false, &err), CQ_OK);
        }
        if (!pass) {
            for (int i = 0; i < STEP_THREADS; i++) step_main(&jobs[i]);
        } else {
            pthread_t th[STEP_THREADS];
            for (int i = 0; i < STEP_THREADS; i++)
                assert_int_equal(pthread_create(&th[i], NULL, step_main, &jobs[i]), 0);
            for (int i = 0; i < STEP_THREADS; i++) pthread_join(th[i], NULL);
        }
    }
    for (int i = 0; i < STEP_THREADS; i++) {
        assert_int_equal(alone[i].st, CQ_OK);
        assert_int_equal(together[i].st, CQ_OK);
        for (int k = 0; k < STEP_COUNT; k++) {
            const cq_top *a = &alone[i].out[k], *b = &together[i].out[k];
            assert_true(a->lse == b->lse); /* per row: the normalizer of that row's own logits */
            assert_memory_equal(a->top_ids, b->top_ids, 8 * sizeof(int32_t));
            assert_memory_equal(a->top_logits, b->top_logits, 8 * sizeof(float));
            assert_memory_equal(a->id_logits, b->id_logits, 2 * sizeof(float));
        }
        /* rows differ from each other: a mixed-up row would not pass by chance */
        if (i) assert_true(alone[i].out[0].lse != alone[0].out[0].lse);
        cq_decoder_seq_free(alone[i].s);
        cq_decoder_seq_free(together[i].s);
    }
}

int main(void) {
    const struct CMUnitTest plain[] = {cmocka_unit_test(test_top_reference)};
    const struct CMUnitTest model[] = {cmocka_unit_test(test_eval_top_cpu),
                                        cmocka_unit_test(test_concurrent_steps_lse_cpu)};
    int rc = cmocka_run_group_tests(plain, NULL, NULL);
    return rc | cmocka_run_group_tests(model, open_model, close_model);
}
