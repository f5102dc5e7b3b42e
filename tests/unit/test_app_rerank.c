/* Scoring prompts and reranking on the CPU (decoder/decoder.h cq_decoder_score_prompts, app/rerank.h), and the
 * answer path with an adapter, on the real model with a random adapter (its judgements mean nothing; the mechanics
 * are what is tested): scores equal the last-position logits of each prompt run alone; reranking keeps router hits
 * first, reorders only the first top_n others by logit(yes) - logit(no) of their relevance prompts, stably, in any
 * batch size, and refuses without an adapter; with an adapter the answer prompt is cq-prompt-v1 and a long English
 * question with little term coverage still reaches the model (no coverage abstention). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/answer.h"
#include "app/generate_answer.h"
#include "app/rerank.h"
#include "decoder/lora.h"
#include "core/strbuf.h"
#include "search/query.h"
#include "test_adapter_util.h"
#include "test_decoder_util.h"

static cq_decoder *dec;
static char adapter[256];
static char base_sha[65]; /* the real model's, for the adapters the tests write */

static int setup(void **state) {
    (void)state;
    cq_decoder_options o = {CQ_DEVICE_CPU, 0, false};
    if (!(dec = test_open_real_model(&o))) return -1;
    const char *root = getenv("CLAUSEQA_SOURCE_DIR");
    char model[4096];
    snprintf(model, sizeof model, "%s/data/models/gemma-3-270m-q4_k_m.gguf", root ? root : ".");
    cq_err err = {0};
    if (cq_model_file_sha256(model, base_sha, &err)) return -1;
    snprintf(adapter, sizeof adapter, "/tmp/cq_test_rerank_adapter_%d", (int)getpid());
    test_adapter_spec spec = {.rank = 4, .alpha = 4, .b_gain = 0.1f, .layer_stride = 4, .base_sha256 = base_sha};
    return test_write_adapter(adapter, cq_decoder_get_info(dec), &spec, NULL);
}

static int teardown(void **state) {
    (void)state;
    cq_decoder_close(dec);
    test_rm_adapter(adapter);
    return 0;
}

static int32_t *encode(const char *text, size_t *n) {
    int32_t *ids;
    cq_err err = {0};
    assert_int_equal(cq_tokenizer_encode(cq_decoder_tokenizer(dec), text, strlen(text), CQ_TOK_ADD_BOS, &ids, n, &err),
                     CQ_OK);
    return ids;
}

static void test_score_prompts(void **state) {
    (void)state;
    const char *texts[3] = {"第一条 为了保护劳动者的合法权益，制定本法。", "Either party may terminate.", "是"};
    int32_t *p[3];
    size_t len[3];
    for (int i = 0; i < 3; i++) p[i] = encode(texts[i], &len[i]);
    const int32_t ids[3] = {100, 2000, 30000};
    float got[9];
    cq_err err = {0};
    cq_decoder_stats s0, s1;
    cq_decoder_get_stats(dec, &s0);
    assert_int_equal(cq_decoder_score_prompts(dec, (const int32_t *const *)p, len, 3, ids, 3, got, &err), CQ_OK);
    /* one call: one observation of the rerank phases, none of an ask's prefill (its sequence is internal) */
    cq_decoder_get_stats(dec, &s1);
    assert_int_equal(s1.phase[CQ_DECODER_RERANK_WAIT].count - s0.phase[CQ_DECODER_RERANK_WAIT].count, 1);
    assert_int_equal(s1.phase[CQ_DECODER_RERANK_RUN].count - s0.phase[CQ_DECODER_RERANK_RUN].count, 1);
    assert_true(s1.phase[CQ_DECODER_RERANK_RUN].sum > s0.phase[CQ_DECODER_RERANK_RUN].sum);
    assert_int_equal(s1.phase[CQ_DECODER_PREFILL_RUN].count, s0.phase[CQ_DECODER_PREFILL_RUN].count);
    const int V = cq_decoder_get_info(dec)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    for (int i = 0; i < 3; i++) { /* each prompt alone through a sequence of its own */
        cq_decoder_seq *s;
        assert_int_equal(cq_decoder_seq_new(dec, (int32_t)len[i], &s, &err), CQ_OK);
        assert_int_equal(cq_decoder_eval(s, p[i], len[i], logits, false, &err), CQ_OK);
        for (int k = 0; k < 3; k++) assert_true(got[i * 3 + k] == logits[ids[k]]);
        cq_decoder_seq_free(s);
    }
    /* bad requests */
    size_t zero[1] = {0};
    assert_int_equal(cq_decoder_score_prompts(dec, (const int32_t *const *)p, zero, 1, ids, 1, got, &err), CQ_ERR_INVALID);
    const int32_t bad = V;
    assert_int_equal(cq_decoder_score_prompts(dec, (const int32_t *const *)p, len, 1, &bad, 1, got, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_decoder_score_prompts(dec, (const int32_t *const *)p, len, 1, ids, 0, got, &err), CQ_ERR_INVALID);
    free(logits);
    for (int i = 0; i < 3; i++) free(p[i]);
}

static void add_hit(cq_hits *h, int64_t id, const char *label, const char *text, int source) {
    h->hits = realloc(h->hits, (h->n + 1) * sizeof *h->hits);
    h->hits[h->n++] = (cq_hit){.clause_id = id, .doc_id = 1, .doc_name = strdup("劳动法"),
                               .doc_title = strdup("中华人民共和国劳动法"), .label = label ? strdup(label) : NULL,
                               .path = strdup(""), .text = strdup(text), .score = 10.0 - (double)id, .source = source};
}

static cq_hits candidates(void) {
    cq_hits h = {0};
    add_hit(&h, 1, "第三十六条", "第三十六条 国家实行劳动者每日工作时间不超过八小时的工时制度。", CQ_RETRIEVE_ROUTER);
    add_hit(&h, 2, "第四十四条", "第四十四条 休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。", CQ_RETRIEVE_BM25);
    add_hit(&h, 3, "第二十一条", "第二十一条 劳动合同可以约定试用期。试用期最长不得超过六个月。", CQ_RETRIEVE_BM25);
    add_hit(&h, 4, "第五十条", "第五十条 工资应当以货币形式按月支付给劳动者本人。", CQ_RETRIEVE_BM25);
    add_hit(&h, 5, "第二十一条", "第二十一条 劳动合同可以约定试用期。试用期最长不得超过六个月。", CQ_RETRIEVE_BM25);
    add_hit(&h, 6, "第七十条", "第七十条 国家发展社会保险事业。", CQ_RETRIEVE_BM25);
    return h;
}

/* logit(是) - logit(否) of hit h's relevance prompt, run alone */
static double relevance_cut(const char *q, const cq_hit *h, size_t chars) {
    const cq_prompt_passage p = cq_prompt_passage_of(h);
    cq_query query;
    cq_err e = {0};
    assert_int_equal(cq_query_parse(NULL, 0, q, &query, &e), CQ_OK);
    char *text = chars ? cq_prompt_relevance_cut(&query, &p, chars) : cq_prompt_relevance(q, &p);
    cq_query_free(&query);
    size_t n;
    int32_t *ids = encode(text, &n), yes, no;
    cq_err err = {0};
    assert_int_equal(cq_prompt_relevance_ids(cq_decoder_tokenizer(dec), true, &yes, &no, &err), CQ_OK);
    const int V = cq_decoder_get_info(dec)->n_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    cq_decoder_seq *s;
    assert_int_equal(cq_decoder_seq_new(dec, (int32_t)n, &s, &err), CQ_OK);
    assert_int_equal(cq_decoder_eval(s, ids, n, logits, false, &err), CQ_OK);
    double r = (double)logits[yes] - (double)logits[no];
    cq_decoder_seq_free(s);
    free(logits), free(ids), free(text);
    return r;
}

static double relevance(const char *q, const cq_hit *h) { return relevance_cut(q, h, 0); }

static void test_rerank(void **state) {
    (void)state;
    const char *text = "试用期最长多长时间？";
    cq_err err = {0};
    cq_hits h = candidates();
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, text, &q, &err), CQ_OK);
    cq_reranker r = {.decoder = dec};
    double scores[7];
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 4, scores, NULL, &err), CQ_ERR_UNSUPPORTED); /* the base model */
    cq_retrieve_options o = {0};
    cq_rerank_attach(&o, &r, dec, true);
    assert_null(o.rerank); /* no adapter: nothing attached, so mode rerank fails with the reason */
    assert_int_equal(cq_decoder_load_adapter(dec, adapter, &err), CQ_OK);
    cq_rerank_attach(&o, &r, dec, true);
    assert_ptr_equal(o.rerank, cq_rerank_score);
    assert_ptr_equal(o.rerank_ctx, &r);
    assert_int_equal(o.rerank_top_n, CQ_RERANK_TOP_N_CPU);
    assert_false(o.rerank_default); /* the CPU: reranking only when asked for */
    /* Every batch size gives each clause the score of its prompt run alone. */
    double want[7];
    for (size_t i = 0; i < h.n; i++) want[i] = relevance(text, &h.hits[i]);
    for (size_t batch = 0; batch < 3; batch++) {
        r.batch = batch;
        for (size_t i = 0; i < h.n; i++) scores[i] = NAN;
        assert_int_equal(cq_rerank_score(&r, &q, h.hits, h.n, scores, NULL, &err), CQ_OK);
        for (size_t i = 0; i < h.n; i++) assert_true(fabs(scores[i] - want[i]) < 1e-4);
        assert_true(fabs(scores[2] - scores[4]) < 1e-6); /* the same clause twice: the same score */
        fprintf(stderr, "  batch %zu: scores %.3f %.3f %.3f %.3f\n", batch, scores[1], scores[2], scores[3], scores[4]);
    }
    r.batch = 0;
    /* the cheaper first stage: retrieval sure (the first leads the second, 8 vs 7, by 1/8 of its score): only the
     * first two of hits 1-4 are scored, the others after them in their order; not sure enough: all four */
    r.sure_margin = 0.1, r.sure_top_n = 2;
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 4, scores, NULL, &err), CQ_OK);
    assert_true(fabs(scores[0] - want[1]) < 1e-4 && fabs(scores[1] - want[2]) < 1e-4);
    const double low = scores[0] < scores[1] ? scores[0] : scores[1];
    assert_true(scores[2] < low && scores[3] < scores[2]);
    r.sure_margin = 0.2;
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 4, scores, NULL, &err), CQ_OK);
    for (size_t i = 0; i < 4; i++) assert_true(fabs(scores[i] - want[i + 1]) < 1e-4);
    r.sure_margin = 0, r.sure_top_n = 0;
    /* candidates' text cut to 12 characters: each scores as its cut prompt alone */
    r.chars = 12;
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 2, scores, NULL, &err), CQ_OK);
    for (size_t i = 0; i < 2; i++) assert_true(fabs(scores[i] - relevance_cut(text, &h.hits[i + 1], 12)) < 1e-4);
    assert_true(fabs(scores[0] - want[1]) > 1e-6); /* the cut changed the prompt */
    r.chars = 0;
    cq_query_free(&q);
    cq_hits_free(&h);
    assert_int_equal(cq_decoder_load_adapter(dec, NULL, &err), CQ_OK);
}

/* keep-doc on synthetic scores: the candidates of the first one's document first, each group in score order */
static void test_keep_doc_order(void **state) {
    (void)state;
    cq_hit h[6] = {{.doc_id = 7}, {.doc_id = 3}, {.doc_id = 7}, {.doc_id = 3}, {.doc_id = 5}, {.doc_id = 7}};
    double s[6] = {1.0, 5.0, 2.0, 4.0, 3.0, -2.5};
    const double was[6] = {1.0, 5.0, 2.0, 4.0, 3.0, -2.5};
    cq_rerank_keep_doc(h, 6, s, false);
    for (size_t i = 0; i < 6; i++)
        if (h[i].doc_id == 7) assert_true(s[i] == was[i]); /* the kept document's scores are the reranker's */
    size_t order[6] = {0, 1, 2, 3, 4, 5};
    for (size_t i = 1; i < 6; i++) /* the stable sort retrieval does (index/retrieve.c rerank) */
        for (size_t j = i; j > 0 && s[order[j]] > s[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    const size_t want[6] = {2, 0, 5, 1, 3, 4};
    for (size_t i = 0; i < 6; i++) assert_int_equal(order[i], want[i]);
    /* one document only, or one candidate: nothing moves */
    cq_hit one[3] = {{.doc_id = 4}, {.doc_id = 4}, {.doc_id = 4}};
    double t[3] = {0.5, 3.0, -1.0};
    cq_rerank_keep_doc(one, 3, t, false);
    assert_true(t[0] == 0.5 && t[1] == 3.0 && t[2] == -1.0);
    cq_rerank_keep_doc(h, 1, t, false);
    assert_true(t[0] == 0.5);
    /* ties across the groups: the kept document still wins */
    cq_hit two[2] = {{.doc_id = 1}, {.doc_id = 2}};
    double u[2] = {2.0, 2.0};
    cq_rerank_keep_doc(two, 2, u, false);
    assert_true(u[0] > u[1]);
    /* first place only: the kept document's best (index 2, 2.0) above all, every other score as it was */
    double f[6] = {1.0, 5.0, 2.0, 4.0, 3.0, -2.5};
    cq_rerank_keep_doc(h, 6, f, true);
    assert_true(f[2] > 5.0);
    for (size_t i = 0; i < 6; i++)
        if (i != 2) assert_true(f[i] == was[i]);
    double g[2] = {3.0, 1.0}; /* already first: unchanged */
    cq_rerank_keep_doc(two, 2, g, true);
    assert_true(g[0] == 3.0 && g[1] == 1.0);
    /* whether the first candidate's document leads: the first other document among the first three decides */
    cq_hit d[4] = {{.doc_id = 1, .score = 10.0}, {.doc_id = 1, .score = 9.5}, {.doc_id = 2, .score = 8.0},
                   {.doc_id = 3, .score = 1.0}};
    assert_true(cq_rerank_doc_leads(d, 4, 0.2));   /* 20 % above document 2 */
    assert_false(cq_rerank_doc_leads(d, 4, 0.25)); /* not 25 % */
    d[2].doc_id = 1;                               /* the first three its own: leads, whatever comes after */
    assert_true(cq_rerank_doc_leads(d, 4, 0.9));
    assert_true(cq_rerank_doc_leads(d, 1, 0.9));
    d[0].score = 0.0; /* no positive score to measure a lead by */
    assert_false(cq_rerank_doc_leads(d, 4, 0.2));
    assert_false(cq_rerank_doc_leads(d, 0, 0.2));
}

/* keep-doc through the reranker: the setting (flag, environment, default) and the real scores it reorders */
static void test_keep_doc_rerank(void **state) {
    (void)state;
    cq_err err = {0};
    cq_retrieve_options o = {0};
    cq_reranker r = {.decoder = dec};
    assert_int_equal(cq_decoder_load_adapter(dec, adapter, &err), CQ_OK);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "1", 1);
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, 1);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "0", 1);
    r.keep_doc = 0;
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, -1);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "2", 1);
    r.keep_doc = 0;
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, 2);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "0", 1);
    r.keep_doc = 1; /* the caller's (eval's --rerank-keep-doc) beats the environment */
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, 1);
    unsetenv("CLAUSEQA_RERANK_KEEP_DOC");
    r.keep_doc = 0;
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, CQ_RERANK_KEEP_DOC_DEFAULT ? CQ_RERANK_KEEP_DOC_DEFAULT : -1);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "3", 1);
    r.keep_doc = 0;
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, 3);
    setenv("CLAUSEQA_RERANK_KEEP_DOC", "4", 1); /* not a setting: the default, with a warning */
    r.keep_doc = 0;
    cq_rerank_attach(&o, &r, dec, false);
    assert_int_equal(r.keep_doc, CQ_RERANK_KEEP_DOC_DEFAULT ? CQ_RERANK_KEEP_DOC_DEFAULT : -1);
    unsetenv("CLAUSEQA_RERANK_KEEP_DOC");
    const char *text = "试用期最长多长时间？";
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, text, &q, &err), CQ_OK);
    cq_hits h = candidates();
    h.hits[2].doc_id = h.hits[4].doc_id = 2; /* hits 1..5 scored: documents 1, 2, 1, 2, 1 */
    double off[5], on[5];
    r.keep_doc = -1;
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 5, off, NULL, &err), CQ_OK);
    r.keep_doc = 1;
    assert_int_equal(cq_rerank_score(&r, &q, h.hits + 1, 5, on, NULL, &err), CQ_OK);
    const size_t kept[3] = {0, 2, 4}, other[2] = {1, 3};
    for (size_t i = 0; i < 3; i++) {
        assert_true(on[kept[i]] == off[kept[i]]);
        for (size_t j = 0; j < 2; j++) assert_true(on[other[j]] < on[kept[i]]);
    }
    assert_true((on[1] < on[3]) == (off[1] < off[3])); /* the others keep the reranker's order */
    /* 3: keep-doc 2 when retrieval's document leads its first three candidates, the reranker's order otherwise.
     * So that keep-doc 2 changes the order, the reranker's best is made the one candidate of another document. */
    cq_hit *x = h.hits + 1;
    size_t best = 0;
    for (size_t i = 1; i < 5; i++) best = off[i] > off[best] ? i : best;
    if (best == 0) { /* the first is the best: it trades places with the last */
        const cq_hit t = x[0];
        x[0] = x[4], x[4] = t;
        best = 4;
        r.keep_doc = -1;
        assert_int_equal(cq_rerank_score(&r, &q, x, 5, off, NULL, &err), CQ_OK);
    }
    for (size_t i = 0; i < 5; i++) x[i].doc_id = i == best ? 2 : 1;
    if (best > 2) x[1].doc_id = 3; /* another document among the first three */
    double first[5], lead[5], judged[5];
    r.keep_doc = 2;
    assert_int_equal(cq_rerank_score(&r, &q, x, 5, first, judged, &err), CQ_OK);
    assert_true(first[best] == off[best]);
    for (size_t i = 0; i < 5; i++) assert_true(judged[i] == off[i]); /* the judgement, not keep-doc's order */
    bool moved = false;
    for (size_t i = 0; i < 5; i++) moved |= first[i] > off[best];
    assert_true(moved);
    r.keep_doc = 3;
    x[0].score = 10.0, x[1].score = 9.5, x[2].score = 9.2; /* the first other document 5-8 % behind */
    assert_int_equal(cq_rerank_score(&r, &q, x, 5, lead, NULL, &err), CQ_OK);
    for (size_t i = 0; i < 5; i++) assert_true(lead[i] == off[i]);
    x[1].score = 7.0, x[2].score = 6.0; /* 30-40 % behind: the first one's document leads */
    assert_int_equal(cq_rerank_score(&r, &q, x, 5, lead, NULL, &err), CQ_OK);
    for (size_t i = 0; i < 5; i++) assert_true(lead[i] == first[i]);
    cq_query_free(&q);
    cq_hits_free(&h);
    assert_int_equal(cq_decoder_load_adapter(dec, NULL, &err), CQ_OK);
}

static bool collect(void *user, const char *text, size_t len) {
    cq_strbuf_append(user, text, len);
    return true;
}

static void test_answer_with_adapter(void **state) {
    (void)state;
    cq_err err = {0};
    assert_int_equal(cq_decoder_load_adapter(dec, adapter, &err), CQ_OK);
    /* copy-constrained as before: a span of a shown clause, the refusal, or a verdict citing the first clause */
    cq_hits h = candidates();
    cq_gen_answer g;
    cq_strbuf streamed = {0};
    cq_gen_answer_options go = {.min_confidence = -1};
    cq_query tq;
    assert_int_equal(cq_query_parse(NULL, 0, "试用期最长多长时间？", &tq, &err), CQ_OK);
    assert_int_equal(cq_gen_answer_run(dec, &tq, &h, &go, collect, &streamed, &g, &err), CQ_OK);
    cq_query_free(&tq);
    assert_true(g.trained);
    fprintf(stderr, "  trained prompt: %d tokens, answer \"%s\" (clause %zu, refused %d, verdict %s)\n",
            g.prompt_tokens, g.text ? g.text : "", g.clause, g.refused, g.verdict ? g.verdict : "-");
    if (g.verdict) {
        assert_int_equal(g.clause, 0);
        assert_true(!strcmp(g.text, "是") || !strcmp(g.text, "否"));
    } else if (g.text) {
        assert_true(cq_gen_answer_supported(g.text, &h, g.clause));
        assert_string_equal(streamed.data ? streamed.data : "", g.text);
    }
    cq_gen_answer_free(&g);
    cq_strbuf_free(&streamed);

    /* a long English question whose terms the clause barely holds: the model is asked (no coverage abstention) */
    cq_hits e = {0};
    e.hits = calloc(1, sizeof *e.hits);
    e.hits[0] = (cq_hit){.clause_id = 9, .doc_name = strdup("distribution"), .doc_title = strdup("Distribution Agreement"),
                         .label = strdup("12.1"), .path = strdup("12.1"),
                         .text = strdup("12.1 Either party may end this Agreement on thirty days written notice."),
                         .source = CQ_RETRIEVE_BM25};
    e.n = 1;
    cq_answer a;
    cq_answer_options ao = {.decoder = dec};
    const char *question = "What does this distribution agreement between the supplier and the distributor say about "
                           "termination, renewal, notice periods and the consequences of ending the relationship?";
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    const double cov = cq_answer_coverage(q.all_terms, q.n_all_terms, e.hits[0].text);
    assert_true(cov < 0.25); /* the base pipeline would abstain without asking the model */
    assert_int_equal(cq_answer_from_hits(&q, &e, &ao, &a, &err), CQ_OK);
    cq_query_free(&q);
    fprintf(stderr, "  coverage %.2f; prompt %d tokens, generated %d, abstained %d: %s\n", cov, a.prompt_tokens,
            a.tokens_generated, a.abstained, a.answer);
    assert_true(a.prompt_tokens > 0);
    cq_answer_free(&a);
    cq_hits_free(&h);
    assert_int_equal(cq_decoder_load_adapter(dec, NULL, &err), CQ_OK);
}

/* The reader sees only the passages the reranker stands behind (app/answer.h reader_margin): the answer prompt holds
 * exactly the kept clauses, and an answer quotes one of them. */
static void test_answer_reader_pruned(void **state) {
    (void)state;
    cq_err err = {0};
    assert_int_equal(cq_decoder_load_adapter(dec, adapter, &err), CQ_OK);
    const char *question = "试用期最长多长时间？";
    cq_hits all = candidates();
    const double rel[5] = {1.05, 0.05, -1.71, 0.5, -3.0}; /* hits 1..5; the router hit 0 is left out */
    for (size_t i = 1; i < all.n; i++) {
        all.hits[i].reranked = i <= 5;
        all.hits[i].relevance = i <= 5 ? rel[i - 1] : 0;
    }
    const struct {
        double margin;
        size_t n;
        size_t kept[5]; /* indices into hits 1..6 */
    } cases[] = {{-1, 5, {0, 1, 2, 3, 4}}, {1.2, 3, {0, 1, 3}}, {0.7, 2, {0, 3}}, {0.1, 1, {0}}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        cq_hits h = {calloc(all.n - 1, sizeof(cq_hit)), all.n - 1, 0};
        for (size_t i = 1; i < all.n; i++) { /* a deep copy: the answer takes the hits */
            cq_hit *x = &h.hits[i - 1];
            *x = all.hits[i];
            x->doc_name = strdup(x->doc_name);
            x->doc_title = strdup(x->doc_title);
            x->label = strdup(x->label);
            x->path = strdup(x->path);
            x->text = strdup(x->text);
        }
        /* the prompt of the kept clauses alone */
        cq_prompt_passage p[5];
        for (size_t i = 0; i < cases[c].n; i++) p[i] = cq_prompt_passage_of(&h.hits[cases[c].kept[i]]);
        char *prompt = cq_prompt_answer(question, p, cases[c].n, NULL);
        size_t want;
        free(encode(prompt, &want));
        free(prompt);
        cq_query q;
        assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
        cq_answer a;
        cq_answer_options ao = {.decoder = dec, .reader_margin = cases[c].margin, .refusal_min_p = 2};
        assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
        cq_query_free(&q);
        fprintf(stderr, "  margin %.1f: prompt %d tokens (want %zu), answer \"%s\"\n", cases[c].margin, a.prompt_tokens,
                want, a.answer);
        assert_int_equal(a.prompt_tokens, (int)want);
        bool cited_kept = a.n_citations == 0;
        for (size_t i = 0; i < cases[c].n && !cited_kept; i++)
            cited_kept = a.citations[0].clause_id == a.hits.hits[cases[c].kept[i]].clause_id;
        assert_true(cited_kept);
        cq_answer_free(&a);
    }
    cq_hits_free(&all);
    assert_int_equal(cq_decoder_load_adapter(dec, NULL, &err), CQ_OK);
}

/* The adapter's own confidence floor (adapter.json "min_confidence") is applied: the same adapter's answer is the
 * generated span with a floor below its confidence and falls back to the extractive answer (with the notice) with
 * one above it, per question language; an explicit min_confidence overrides the adapter's. */
static char *floor_adapter(const char *floor) {
    static char dir[300];
    snprintf(dir, sizeof dir, "%s_floor", adapter);
    char json[512];
    snprintf(json, sizeof json, "{\"format\": \"clauseqa-lora-v1\", \"rank\": 4, \"alpha\": 4, \"prompt_format\": "
             "\"cq-prompt-v1\", \"base\": {\"sha256\": \"%s\"}, \"min_confidence\": %s}", base_sha, floor);
    test_adapter_spec spec = {.rank = 4, .alpha = 4, .b_gain = 0.1f, .layer_stride = 4, .base_sha256 = base_sha,
                              .json_override = json};
    assert_int_equal(test_write_adapter(dir, cq_decoder_get_info(dec), &spec, NULL), 0);
    return dir;
}

static cq_answer answer_floor(const char *adapter_dir, double min_confidence) {
    cq_err err = {0};
    assert_int_equal(cq_decoder_load_adapter(dec, adapter_dir, &err), CQ_OK);
    cq_hits all = candidates(); /* without the router's hit, which would be recited, not answered */
    cq_hits h = {0};
    for (size_t i = 1; i < all.n; i++) {
        const cq_hit *x = &all.hits[i];
        add_hit(&h, x->clause_id, x->label, x->text, x->source);
    }
    cq_hits_free(&all);
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, "休息日安排劳动者工作又不能安排补休的，支付多少工资报酬？", &q, &err), CQ_OK);
    cq_answer a;
    cq_answer_options ao = {.decoder = dec, .min_confidence = min_confidence, .refusal_min_p = 2,
                            .keyless_min_confidence = -1};
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    cq_query_free(&q);
    fprintf(stderr, "  floor option %.2f: \"%s\" generated %d, confidence %.4f, notice %s\n", min_confidence, a.answer,
            a.generated, a.confidence, a.notice ? a.notice : "-");
    return a;
}

static void test_answer_adapter_floor(void **state) {
    (void)state;
    /* the adapter without a floor: a generated span, not a verdict, at some confidence c in (0, 1) */
    cq_answer a = answer_floor(adapter, 0);
    assert_true(a.generated);
    assert_null(a.verdict);
    assert_null(a.notice);
    const double c = a.confidence;
    assert_true(c > 0 && c < 1);
    char *generated = strdup(a.answer);
    cq_answer_free(&a);
    char below[64], above[64], per_lang[192];
    snprintf(below, sizeof below, "%.6f", c / 2);
    snprintf(above, sizeof above, "%.6f", (c + 1) / 2);
    /* a floor below c: the same generated answer */
    a = answer_floor(floor_adapter(below), 0);
    assert_true(a.generated);
    assert_string_equal(a.answer, generated);
    cq_answer_free(&a);
    /* a floor above c: the extractive answer (sentences of the first clause, 第四十四条), with the notice saying why */
    a = answer_floor(floor_adapter(above), 0);
    assert_false(a.generated);
    assert_false(a.abstained);
    assert_non_null(a.notice);
    assert_non_null(strstr(a.notice, "把握不足"));
    assert_int_equal(a.n_citations, 1);
    assert_true(a.citations[0].clause_id == 2);
    assert_non_null(strstr(a.answer, "百分之二百"));
    assert_true(a.confidence == c); /* the same generation, only not used */
    cq_answer_free(&a);
    /* ... unless the caller sets its own (negative: no floor) */
    a = answer_floor(floor_adapter(above), -1);
    assert_true(a.generated);
    assert_string_equal(a.answer, generated);
    cq_answer_free(&a);
    /* one floor per language: a Chinese question takes the zh one */
    snprintf(per_lang, sizeof per_lang, "{\"zh\": %s, \"en\": %s}", above, below);
    a = answer_floor(floor_adapter(per_lang), 0);
    assert_false(a.generated);
    cq_answer_free(&a);
    snprintf(per_lang, sizeof per_lang, "{\"zh\": %s, \"en\": %s}", below, above);
    a = answer_floor(floor_adapter(per_lang), 0);
    assert_true(a.generated);
    cq_answer_free(&a);
    snprintf(per_lang, sizeof per_lang, "{\"en\": %s}", above); /* none for Chinese: no floor */
    a = answer_floor(floor_adapter(per_lang), 0);
    assert_true(a.generated);
    cq_answer_free(&a);
    free(generated);
    test_rm_adapter(floor_adapter("0.5"));
    cq_err err = {0};
    assert_int_equal(cq_decoder_load_adapter(dec, NULL, &err), CQ_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_prompts),
        cmocka_unit_test(test_rerank),
        cmocka_unit_test(test_keep_doc_order),
        cmocka_unit_test(test_keep_doc_rerank),
        cmocka_unit_test(test_answer_with_adapter),
        cmocka_unit_test(test_answer_reader_pruned),
        cmocka_unit_test(test_answer_adapter_floor),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
