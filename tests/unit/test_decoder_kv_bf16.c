/* What a bf16 KV cache costs the logits (decoder/forward_cpu.h cq_cpu_model_set_kv_bf16), on the CPU with the real
 * model: fixed dev prompts (the Chinese and English perplexity texts of tests/data/decoder, 300 tokens each, and a
 * relevance prompt of the reranker's shape) fed with the cache in float and with its values rounded to bf16, then 16
 * greedy steps teacher-forced with the float run's tokens; every logit of the prompt's last position and of each step
 * compared. Also the rounding itself (cq_op_round_bf16: nearest even, the CUDA __float2bfloat16_rn), and the bf16
 * planes of the CUDA batched step's products (cq_op_bf16_planes, issue 31): three hold a float exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/forward_cpu.h"
#include "decoder/gguf.h"
#include "decoder/model.h"
#include "decoder/quant.h"
#include "decoder/tokenizer.h"

static void test_round(void **state) {
    (void)state;
    const float x[6] = {1.0f, 1.00390625f /* 1 + 2^-8: a tie, to even (1) */, 1.01171875f /* 1 + 3 * 2^-8: to 1.015625 */,
                        -3.14159265f, 1e-30f, 65504.0f};
    float y[6];
    cq_op_round_bf16(y, x, 6);
    assert_true(y[0] == 1.0f);
    assert_true(y[1] == 1.0f);
    assert_true(y[2] == 1.015625f);
    assert_true(fabsf(y[3] - x[3]) <= fabsf(x[3]) * 0x1p-8f);
    for (int i = 0; i < 6; i++) assert_true(y[i] == cq_bf16_to_f32(cq_f32_to_bf16(y[i]))); /* representable */
}

/* The batched step's activations as bf16 planes (the C twin of to_planes_kernel): 3 planes sum to x bit for bit over
 * 2^20 floats of every exponent from 2^-100 to 2^100 and both signs (random mantissas, ties and all-ones mantissas
 * among them), 2 planes within 2^-17 |x|, 1 plane is cq_op_round_bf16; every plane a bf16 value. */
static void test_planes(void **state) {
    (void)state;
    const size_t n = 1 << 20;
    float *x = malloc(n * 4), *p = malloc(3 * n * 4), *r = malloc(n * 4);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t mant = (uint32_t)(s >> 20) & 0x7fffffu;
        if (i % 7 == 0) mant = 0x7fffffu;                  /* all ones: rounds up through every plane */
        if (i % 11 == 0) mant = (mant & ~0xffffu) | 0x8000u; /* a tie at bf16's last bit */
        const uint32_t e = 127 - 100 + (uint32_t)((s >> 8) % 201), bits = ((uint32_t)(s & 1) << 31) | (e << 23) | mant;
        memcpy(&x[i], &bits, 4);
    }
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 1.0f;
    size_t exact = 0, within = 0;
    double worst2 = 0;
    cq_op_bf16_planes(p, x, n, 3);
    for (size_t i = 0; i < n; i++) {
        exact += (p[i] + p[n + i]) + p[2 * n + i] == x[i];
        for (int k = 0; k < 3; k++) assert_true(p[k * n + i] == cq_bf16_to_f32(cq_f32_to_bf16(p[k * n + i])));
    }
    cq_op_bf16_planes(p, x, n, 2);
    for (size_t i = 0; i < n; i++) {
        const double rel = x[i] != 0 ? fabs((double)x[i] - ((double)p[i] + p[n + i])) / fabs((double)x[i]) : 0;
        within += rel <= 0x1p-17;
        worst2 = rel > worst2 ? rel : worst2;
    }
    cq_op_bf16_planes(p, x, n, 1);
    cq_op_round_bf16(r, x, n);
    assert_memory_equal(p, r, n * 4);
    fprintf(stderr, "  bf16 planes of %zu floats: 3 planes exact for %zu, 2 planes within 2^-17 for %zu (worst %.2e)\n",
            n, exact, within, worst2);
    assert_true(exact == n);
    assert_true(within == n);
    free(x), free(p), free(r);
}

static char *read_text(const char *name) {
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/decoder/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *t = calloc(1, 1 << 16);
    size_t n = fread(t, 1, (1 << 16) - 1, f);
    t[n] = 0;
    fclose(f);
    return t;
}

typedef struct {
    double err, ref, worst, lse;
    int rows, agree;
} cmp;

static double lse_of(const float *x, int n) {
    double m = x[0], s = 0;
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void compare(cmp *c, const float *got, const float *ref, int n) {
    for (int i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        c->err += d * d, c->ref += (double)ref[i] * ref[i];
        c->worst = fabs(d) > c->worst ? fabs(d) : c->worst;
    }
    const double dl = fabs(lse_of(got, n) - lse_of(ref, n));
    c->lse = dl > c->lse ? dl : c->lse;
    c->rows++;
    c->agree += argmax(got, n) == argmax(ref, n);
}

static void test_logits(void **state) {
    (void)state;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    cq_err err = {0};
    cq_gguf *g;
    cq_gemma m;
    cq_tokenizer *tok;
    cq_cpu_model *cm;
    if (cq_gguf_open(path, &g, &err)) {
        fprintf(stderr, "the model must be present (make setup fetches it): %s\n", err.msg);
        fail();
    }
    assert_int_equal(cq_gemma_load(g, &m, &err), CQ_OK);
    assert_int_equal(cq_tokenizer_from_gguf(g, &tok, &err), CQ_OK);
    assert_int_equal(cq_cpu_model_new(&m, 2, false, &cm, &err), CQ_OK);
    const int V = m.n_vocab, P = 300, STEPS = 16;
    char *zh = read_text("ppl_zh.txt"), *en = read_text("ppl_en.txt");
    const char *rel = "任务：相关性\n材料：《中华人民共和国劳动法》第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于"
                      "劳动者正常工作时间工资的工资报酬：（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；"
                      "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；（三）法定休假日安排劳动者"
                      "工作的，支付不低于工资的百分之三百的工资报酬。\n问题：休息日加班工资怎么算？\n相关：";
    const char *texts[3] = {zh, en, rel};
    const char *names[3] = {"zh law", "en contract", "zh relevance"};
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    cmp all = {0};
    for (int i = 0; i < 3; i++) {
        int32_t *ids;
        size_t n;
        assert_int_equal(cq_tokenizer_encode(tok, texts[i], strlen(texts[i]), CQ_TOK_ADD_BOS, &ids, &n, &err), CQ_OK);
        if (n > (size_t)P) n = P;
        cq_cpu_seq *sf, *sb;
        assert_int_equal(cq_cpu_seq_new(cm, P + STEPS, &sf, &err), CQ_OK);
        assert_int_equal(cq_cpu_seq_new(cm, P + STEPS, &sb, &err), CQ_OK);
        cmp c = {0};
        int32_t next = 0;
        for (int step = 0; step <= STEPS; step++) { /* the prompt, then steps with the float run's greedy tokens */
            const int32_t *t = step ? &next : ids;
            const size_t cnt = step ? 1 : n;
            const int32_t pos = step ? (int32_t)n + step - 1 : 0;
            cq_cpu_model_set_kv_bf16(cm, false);
            assert_int_equal(cq_cpu_eval(sf, t, cnt, pos, a, false, &err), CQ_OK);
            cq_cpu_model_set_kv_bf16(cm, true);
            assert_int_equal(cq_cpu_eval(sb, t, cnt, pos, b, false, &err), CQ_OK);
            compare(&c, b, a, V);
            compare(&all, b, a, V);
            next = argmax(a, V);
        }
        fprintf(stderr, "  bf16 KV vs float, %s (%zu tokens + %d steps): logits NMSE %.2e, max |diff| %.3f, "
                        "log-sum-exp off by %.2e at most, argmax %d/%d\n",
                names[i], n, STEPS, c.err / c.ref, c.worst, c.lse, c.agree, c.rows);
        cq_cpu_seq_free(sf);
        cq_cpu_seq_free(sb);
        free(ids);
    }
    cq_cpu_model_set_kv_bf16(cm, false);
    fprintf(stderr, "  all: NMSE %.2e, max |diff| %.3f, argmax %d/%d\n", all.err / all.ref, all.worst, all.agree,
            all.rows);
    /* bf16 keeps 8 bits of mantissa: far inside the bf16 weights' own tolerance of the CUDA forward (2e-3) */
    assert_true(all.err / all.ref < 2e-3);
    assert_true(all.agree * 10 >= all.rows * 9);
    free(a), free(b), free(zh), free(en);
    cq_cpu_model_free(cm);
    cq_tokenizer_free(tok);
    cq_gemma_free(&m);
    cq_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_planes),
        cmocka_unit_test(test_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
