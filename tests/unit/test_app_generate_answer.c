/* app/generate_answer.c: the prompt (preamble, passage of the best clauses within the budget, labels once, newlines
 * flattened, the question, Chinese or English), the support check, and copy-constrained generation on the real
 * model: the answer is a span of a clause shown, the streamed pieces are whole characters that make the answer,
 * the refusal is only taken when allowed, and answer.c uses the decoder's answer with its citation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/answer.h"
#include "app/generate_answer.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "test_decoder_util.h"

static const char *article44 =
    "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：\n"
    "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；\n"
    "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；\n"
    "（三）法定休假日安排劳动者工作的，支付不低于工资的百分之三百的工资报酬。";
static const char *article36 = "第三十六条 国家实行劳动者每日工作时间不超过八小时、平均每周工作时间不超过四十四小时的工时制度。";

static void add_hit(cq_hits *h, int64_t id, const char *doc, const char *title, const char *label, const char *text) {
    h->hits = realloc(h->hits, (h->n + 1) * sizeof *h->hits);
    h->hits[h->n++] = (cq_hit){.clause_id = id, .doc_id = 1, .doc_name = strdup(doc),
                               .doc_title = title ? strdup(title) : NULL, .label = label ? strdup(label) : NULL,
                               .path = strdup(label ? label : ""), .text = strdup(text), .source = CQ_RETRIEVE_BM25};
}

static cq_hits two_articles(void) {
    cq_hits h = {0};
    add_hit(&h, 44, "劳动法(2018-12-29)", "中华人民共和国劳动法", "第四十四条", article44);
    add_hit(&h, 36, "劳动法(2018-12-29)", "中华人民共和国劳动法", "第三十六条", article36);
    return h;
}

/* The question as the pipeline hands it on: analysed once (search/query.h); the text alone, no KB. */
static cq_query question(const char *text) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, text, &q, &err), CQ_OK);
    return q;
}

static char *prompt_of(const char *text, const cq_hits *h, size_t chars, size_t **shown) {
    cq_query q = question(text);
    char *p = cq_gen_answer_prompt(&q, h, chars, shown);
    cq_query_free(&q);
    return p;
}

static void test_prompt_zh(void **state) {
    (void)state;
    cq_hits h = two_articles();
    size_t *shown;
    char *p = prompt_of("休息日加班工资怎么算？", &h, 0, &shown);
    assert_non_null(p);
    assert_non_null(strstr(p, "用材料中的原文回答问题"));          /* the instruction and worked examples */
    assert_non_null(strstr(p, "材料：《中华人民共和国劳动法》第四十四条 有下列情形")); /* label not repeated */
    assert_null(strstr(p, "第四十四条第四十四条"));
    assert_non_null(strstr(p, "工资报酬： （一）")); /* newlines flattened: one line per passage */
    assert_non_null(strstr(p, " 《中华人民共和国劳动法》第三十六条")); /* the next clause fits in the budget */
    const char *tail = "\n问题：休息日加班工资怎么算？\n答案：";
    assert_string_equal(p + strlen(p) - strlen(tail), tail);
    assert_int_equal(shown[0], strlen(article44));
    assert_int_equal(shown[1], strlen(article36));
    free(p);
    free(shown);

    /* A small budget: the first clause cut at a character boundary, the second left out. */
    p = prompt_of("休息日加班工资怎么算？", &h, 20, &shown);
    assert_non_null(p);
    assert_true(cq_utf8_valid(p, strlen(p)));
    assert_int_equal(cq_utf8_count(article44, shown[0]), 20);
    assert_int_equal(shown[1], 0);
    assert_null(strstr(p, "第三十六条"));
    free(p);
    free(shown);
    cq_hits_free(&h);
}

static void test_prompt_en(void **state) {
    (void)state;
    cq_hits h = {0};
    add_hit(&h, 5, "services", "Sample Services Agreement", "7.2", "7.2 Payment. Invoices are due in 30 days.");
    size_t *shown;
    char *p = prompt_of("When are invoices due?", &h, 0, &shown);
    assert_non_null(strstr(p, "Passage: Sample Services Agreement. 7.2 Payment. Invoices are due in 30 days."));
    const char *tail = "\nQuestion: When are invoices due?\nAnswer:";
    assert_string_equal(p + strlen(p) - strlen(tail), tail);
    assert_string_equal(cq_gen_answer_refusal(false), "Cannot be answered");
    free(p);
    free(shown);
    cq_hits_free(&h);
}

/* The prompts take the language the query was analysed with, not the text read again (issue 28 item 4): a query
 * set to English writes an English prompt whatever its text holds. */
static void test_prompt_language_is_the_querys(void **state) {
    (void)state;
    cq_hits h = two_articles();
    cq_query q = question("第四十四条 pay?");
    assert_int_equal(q.lang, CQ_QUERY_ZH);
    q.lang = CQ_QUERY_EN;
    size_t *shown;
    char *p = cq_gen_answer_prompt(&q, &h, 0, &shown);
    assert_non_null(strstr(p, "\nQuestion: 第四十四条 pay?\nAnswer:"));
    assert_null(strstr(p, "问题："));
    free(p);
    free(shown);
    const cq_prompt_passage pp = cq_prompt_passage_of(&h.hits[0]);
    p = cq_prompt_relevance_cut(&q, &pp, 0);
    assert_true(!strncmp(p, "Task: relevance\nPassage: ", 25));
    free(p);
    q.lang = CQ_QUERY_ZH;
    p = cq_prompt_relevance_cut(&q, &pp, 0);
    assert_true(!strncmp(p, "任务：相关性", strlen("任务：相关性")));
    free(p);
    cq_query_free(&q);
    cq_hits_free(&h);
}

static void test_supported(void **state) {
    (void)state;
    cq_hits h = two_articles();
    assert_true(cq_gen_answer_supported("不低于工资的百分之二百", &h, 0));
    assert_true(cq_gen_answer_supported("工资报酬： （一）安排", &h, 0)); /* across a flattened newline */
    assert_false(cq_gen_answer_supported("不低于工资的百分之二百", &h, 1)); /* another clause */
    assert_false(cq_gen_answer_supported("不低于工资的两倍", &h, 0));     /* a paraphrase */
    assert_false(cq_gen_answer_supported("", &h, 0));
    assert_false(cq_gen_answer_supported(NULL, &h, 0));
    assert_false(cq_gen_answer_supported("第四十四条", &h, 2)); /* out of range */
    cq_hits_free(&h);
}

static void test_is_title(void **state) {
    (void)state;
    cq_hits h = {0};
    const char *title = "北京市16条举措助中小微企业渡难关 70亿元财政资金帮扶";
    add_hit(&h, 1, "6488f3b3", title, NULL,
            "北京市16条举措助中小微企业渡难关 70亿元财政资金帮扶 昨天下午举行的新闻发布会上，市发改委解读了措施。");
    add_hit(&h, 2, "notes", NULL, NULL, "没有标题的文件");
    assert_true(cq_gen_answer_is_title(title, &h, 0));
    assert_true(cq_gen_answer_is_title("北京市16条举措助中小微企业渡难关70亿元财政资金帮扶", &h, 0)); /* spaces aside */
    assert_true(cq_gen_answer_is_title("北京市16条举措助中小微企业渡难关 70亿元财政资金", &h, 0));   /* most of it */
    assert_false(cq_gen_answer_is_title("北京市16条举措", &h, 0));                 /* a part that may answer */
    assert_false(cq_gen_answer_is_title("市发改委解读了措施", &h, 0));             /* the body */
    assert_false(cq_gen_answer_is_title("", &h, 0));
    assert_false(cq_gen_answer_is_title(NULL, &h, 0));
    assert_false(cq_gen_answer_is_title("没有标题的文件", &h, 1)); /* no title */
    assert_false(cq_gen_answer_is_title(title, &h, 2));            /* out of range */
    cq_hits_free(&h);
}

/* The quote after a span that repeated a title or the question: the first clause whose best sentences are neither. */
static void test_fallback_quote(void **state) {
    (void)state;
    cq_hits h = {0};
    const char *title = "MARKETING AFFILIATE AGREEMENT";
    add_hit(&h, 1, "Affiliate_Agreement", title, NULL, "Exhibit 10.27\nMARKETING AFFILIATE AGREEMENT");
    add_hit(&h, 2, "Affiliate_Agreement", title, NULL,
            "Company may not assign this Agreement without the prior written consent of MA. Notices go to MA.");
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0,
                                    "Highlight the parts (if any) of this contract related to \"Anti-Assignment\" that "
                                    "should be reviewed by a lawyer. Contract: MARKETING AFFILIATE AGREEMENT", &q, &err),
                     CQ_OK);
    size_t clause = 9;
    char *quote = cq_answer_fallback_quote(&q, &h, q.all_terms, q.n_all_terms, &clause);
    assert_non_null(quote);
    assert_int_equal(clause, 1);
    assert_non_null(strstr(quote, "may not assign"));
    free(quote);
    /* the title clause alone: nothing to quote */
    h.n = 1;
    clause = 9;
    assert_null(cq_answer_fallback_quote(&q, &h, q.all_terms, q.n_all_terms, &clause));
    assert_int_equal(clause, 9);
    h.n = 2;
    cq_query_free(&q);
    cq_hits_free(&h);
}

/* Coverage: an English word counts in another form (its stem), other terms as written. */
static void test_coverage_forms(void **state) {
    (void)state;
    char *en[] = {"invoices", "due", "pays"};
    assert_float_equal(cq_answer_coverage(en, 3, "Customer shall pay each correct invoice within thirty days."), 2.0 / 3,
                       1e-9); /* invoice, pay; not due */
    char *zh[] = {"试用", "用期"};
    assert_float_equal(cq_answer_coverage(zh, 2, "试用期不得超过六个月"), 1.0, 1e-9);
    assert_float_equal(cq_answer_coverage(zh, 2, "试验期间"), 0.0, 1e-9);
    char *mixed[] = {"sla", "99"};
    assert_float_equal(cq_answer_coverage(mixed, 2, "The SLA is 99.9%"), 1.0, 1e-9);
    assert_float_equal(cq_answer_coverage(en, 0, "anything"), 0.0, 1e-9);
}

static void test_in_question(void **state) {
    (void)state;
    const char *q = "劳动合同期限三个月以上不满一年的，试用期不得超过多久？";
    assert_true(cq_gen_answer_in_question("三个月以上", q));
    assert_true(cq_gen_answer_in_question(" 三个月 以上", q)); /* white space aside, as norm() */
    assert_false(cq_gen_answer_in_question("一个月", q));      /* the answer */
    assert_false(cq_gen_answer_in_question("试用期不得超过一个月", q));
    assert_false(cq_gen_answer_in_question("月", q)); /* one character says nothing */
    assert_false(cq_gen_answer_in_question("长张高速", "长张高速公路的简称是什么？")); /* a short name asked for */
    assert_false(cq_gen_answer_in_question("", q));
    assert_false(cq_gen_answer_in_question(NULL, q));
    assert_false(cq_gen_answer_in_question("三个月", NULL));
    /* English: a fragment of the question's words */
    assert_true(cq_gen_answer_in_question("non", "Is there a non-compete clause?"));
    const char *cuad = "Highlight the parts (if any) of this contract related to \"Anti-Assignment\" that should be "
                       "reviewed by a lawyer. Contract: MARKETING AFFILIATE AGREEMENT (file Cybergy_Affiliate_Agreement)";
    assert_true(cq_gen_answer_in_question("affiliate agreement", cuad));
    assert_false(cq_gen_answer_in_question("Company may not assign this Agreement", cuad));
    /* a capitalised answer may be a name the question gives: a party, a defined term */
    assert_false(cq_gen_answer_in_question("MARKETING AFFILIATE AGREEMENT", cuad));
    assert_false(cq_gen_answer_in_question("ADAMS GOLF", "Highlight the parts (if any) of this contract related to "
                                                         "\"Parties\". Contract: ADAMS GOLF ENDORSEMENT AGREEMENT"));
    /* a name asked for (CUAD's "Document Name", "title", "called") may be the question's own words */
    assert_false(cq_gen_answer_in_question("marketing affiliate agreement",
                                           "Highlight the parts (if any) of this contract related to \"Document Name\" "
                                           "that should be reviewed by a lawyer. Contract: marketing affiliate agreement"));
    assert_false(cq_gen_answer_in_question("services agreement", "What is the title of the services agreement?"));
    assert_true(cq_gen_answer_in_question("services agreement", "Who signed the services agreement?"));
}

/* The constraint: no span crosses items; the item the question's terms match best is the only one quotable. */
static void test_constraint_items(void **state) {
    (void)state;
    cq_hits h = two_articles();
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, "休息日安排劳动者工作又不能安排补休的，应当支付多少工资报酬？", &q, &err), CQ_OK);
    const size_t n44 = strlen(article44);
    char **t = q.all_terms;
    const size_t nt = q.n_all_terms;
    assert_true(cq_gen_answer_admits(&h.hits[0], n44, t, nt, "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬"));
    assert_true(cq_gen_answer_admits(&h.hits[0], n44, t, nt, "百分之二百"));
    assert_false(cq_gen_answer_admits(&h.hits[0], n44, t, nt, "百分之一百五十")); /* other items: not quotable */
    assert_false(cq_gen_answer_admits(&h.hits[0], n44, t, nt, "百分之三百"));
    assert_true(cq_gen_answer_admits(&h.hits[0], n44, t, nt, "有下列情形之一的")); /* outside the items: quotable */
    /* no term picks an item (a question about all of them): every item quotable from its marker on, none crossed */
    assert_true(cq_gen_answer_admits(&h.hits[0], n44, NULL, 0, "百分之一百五十的工资报酬；"));
    assert_true(cq_gen_answer_admits(&h.hits[0], n44, NULL, 0, "（三）法定休假日"));
    assert_false(cq_gen_answer_admits(&h.hits[0], n44, NULL, 0, "工资报酬； （二）休息日"));
    assert_false(cq_gen_answer_admits(&h.hits[0], n44, NULL, 0, "工资报酬：\n（一）"));
    assert_false(cq_gen_answer_admits(&h.hits[0], n44, NULL, 0, "工资报酬： （一）安排")); /* nor from the lead in */
    /* a clause without items: any span of it */
    assert_true(cq_gen_answer_admits(&h.hits[1], strlen(article36), t, nt, "不超过八小时、平均每周"));
    /* items that match alike (a court's list of claims, cjrc): none is picked, each stays quotable */
    cq_hits c = {0};
    add_hit(&c, 9, "175", NULL, NULL,
            "刘x0向本院提起诉讼请求为:1、请求判令位于北京市大兴区黄村镇邢各庄村兴盛街北三条9号院房屋(以下简称:北三条9号院)"
            "的西房一间归原告所有;2、请求判令北京市大兴区黄村镇邢各庄村兴盛街北三条9号房屋的西房一间依法拆迁所获利益归原告所有;"
            "3、判令本案诉讼费由被告承担事实及理由为:原被告双方父亲刘x12、母亲李x16共生育刘x0等五名子女,原告对该院内房屋享有权利");
    cq_query q2;
    assert_int_equal(cq_query_parse(NULL, 0, "刘x0希望位于何处的房屋归原告所有？", &q2, &err), CQ_OK);
    assert_true(cq_gen_answer_admits(&c.hits[0], strlen(c.hits[0].text), q2.all_terms, q2.n_all_terms,
                                     "北京市大兴区黄村镇邢各庄村兴盛街北三条9号院"));
    assert_false(cq_gen_answer_admits(&c.hits[0], strlen(c.hits[0].text), q2.all_terms, q2.n_all_terms,
                                      "归原告所有;2、请求判令")); /* still no crossing */
    cq_query_free(&q2);
    cq_hits_free(&c);
    /* what is not shown cannot be quoted */
    assert_false(cq_gen_answer_admits(&h.hits[0], 30, NULL, 0, "百分之三百"));
    cq_query_free(&q);
    cq_hits_free(&h);
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

static bool collect(void *user, const char *text, size_t len) {
    cq_strbuf *b = user;
    assert_true(len > 0);
    assert_true(cq_utf8_valid(text, len)); /* whole characters only */
    cq_strbuf_append(b, text, len);
    return true;
}

static void test_generate_span(void **state) {
    (void)state;
    cq_hits h = two_articles();
    cq_strbuf streamed = {0};
    cq_gen_answer g;
    cq_err err = {0};
    cq_gen_answer_options o = {.allow_refusal = false};
    cq_query gq = question("休息日安排劳动者工作又不能安排补休的，应当支付多少工资报酬？");
    assert_int_equal(cq_gen_answer_run(dec, &gq, &h, &o, collect, &streamed, &g, &err), CQ_OK);
    cq_query_free(&gq);
    assert_false(g.refused);
    assert_non_null(g.text);
    assert_true(cq_gen_answer_supported(g.text, &h, g.clause));
    assert_string_equal(streamed.data ? streamed.data : "", g.text);
    assert_true(g.new_tokens > 0 && g.prompt_tokens > 100);
    assert_true(strlen(g.text) < strlen(article44));
    cq_gen_answer_free(&g);
    cq_strbuf_free(&streamed);

    /* Through answer.c: the decoder's answer, cited by the clause that holds it. */
    cq_answer a;
    cq_answer_options ao = {.decoder = dec};
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, "休息日安排劳动者工作又不能安排补休的，应当支付多少工资报酬？", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    assert_true(a.generated);
    assert_false(a.abstained);
    assert_null(a.notice);
    assert_int_equal(a.n_citations, 1);
    assert_string_equal(a.citations[0].quote, a.answer);
    assert_true(a.tokens_generated > 0);
    assert_true(a.confidence > 0 && a.confidence <= 1);
    cq_answer_free(&a);

    /* Asking for more confidence than the model has: the extractive answer, with a notice saying why. */
    h = two_articles();
    ao.min_confidence = 0.999999;
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    assert_false(a.generated);
    assert_false(a.abstained);
    assert_non_null(a.notice);
    assert_non_null(strstr(a.notice, "把握不足"));
    assert_int_equal(a.n_citations, 1);
    assert_non_null(strstr(article44, a.citations[0].quote));
    cq_answer_free(&a);
    cq_query_free(&q);
}

/* The generated span comes from the item asked about, with the sentence around it; an answer from a clause with
 * none of the question's key terms is refused unless the model is sure enough. */
static void test_generate_item_context_keyless(void **state) {
    (void)state;
    cq_hits h = two_articles();
    cq_answer a;
    cq_err err = {0};
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, "休息日安排劳动者工作又不能安排补休的，应当支付多少工资报酬？", &q, &err), CQ_OK);
    cq_answer_options ao = {.decoder = dec, .min_confidence = -1};
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    assert_true(a.generated);
    const char *item2 = "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；";
    if (strcmp(a.answer, item2) && strstr(article44, a.answer)) {
        assert_non_null(strstr(item2, a.answer)); /* from item (二) */
        assert_non_null(a.context);
        assert_non_null(strstr(a.context, a.answer));
        /* with the words that lead the items in, "…" for the item left out before it */
        assert_non_null(strstr(a.context, "有下列情形之一的"));
        assert_non_null(strstr(a.context, "： … （二）休息日"));
    }
    if (strstr(a.answer, "低于")) assert_non_null(strstr(a.answer, "不低于")); /* never without its 不 */
    assert_true(a.key_terms > 0);
    cq_answer_free(&a);
    cq_query_free(&q);

    /* key terms (火星, 量子 …) that the clause does not hold; the reference is no key term */
    assert_int_equal(cq_query_parse(NULL, 0, "第四十四条中火星上的量子引力是多少？", &q, &err), CQ_OK);
    h = two_articles();
    ao.keyless_min_confidence = 1.01; /* no confidence is enough */
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    if (a.tokens_generated > 0 && a.key_terms == 0) {
        assert_true(a.abstained);
        assert_non_null(a.notice);
        assert_non_null(strstr(a.notice, "关键词"));
    } else {
        fprintf(stderr, "keyless: the model answered nothing to check (tokens %d, key terms %d)\n", a.tokens_generated,
                a.key_terms);
        fail();
    }
    cq_answer_free(&a);
    h = two_articles();
    ao.keyless_min_confidence = -1; /* the rule off: the model's answer stands */
    assert_int_equal(cq_answer_from_hits(&q, &h, &ao, &a, &err), CQ_OK);
    assert_false(a.abstained && a.notice && strstr(a.notice, "关键词"));
    cq_answer_free(&a);
    cq_query_free(&q);
}

/* The context shown with a span (cq_answer_span_context): the sentence; a list with its lead-in and whole items. */
static void expect_context(const char *text, const char *span, const char *question, const char *want) {
    char *c = cq_answer_span_context(text, span, question);
    if (!want && c) fail_msg("'%s': no context expected, got '%s'", span, c);
    if (want && (!c || strcmp(c, want))) fail_msg("'%s' / '%s':\n expected '%s'\n      got '%s'", span, question, want, c ? c : "(none)");
    free(c);
}

static void test_span_context(void **state) {
    (void)state;
    const char *lead44 = "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：";
    const char *i1 = "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；";
    const char *i2 = "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；";
    const char *i3 = "（三）法定休假日安排劳动者工作的，支付不低于工资的百分之三百的工资报酬。";
    char all[1024], want[1024];
    /* a span in the lead-in sentence: the sentence and the items it announces ("怎么算" is answered by the rates) */
    snprintf(want, sizeof want, "%s%s %s %s", lead44, i1, i2, i3);
    expect_context(article44, "工资报酬", "员工加班费怎么算？", want);
    /* a span in one item: the lead-in, "…" for the items before it, the item */
    snprintf(want, sizeof want, "%s … %s", lead44, i2);
    expect_context(article44, "不低于工资的百分之二百", "休息日加班工资怎么算？", want);
    /* … unless the question asks for several: the lead-in and every item */
    snprintf(want, sizeof want, "%s %s %s %s", lead44, i1, i2, i3);
    expect_context(article44, "不低于工资的百分之二百", "有哪些情形要支付更高的工资报酬？", want);
    /* items that do not fit in 320 characters are left out whole, "…" saying so; the span's item must be shown */
    snprintf(all, sizeof all, "第五条 应当具备下列条件：\n（一）%s；\n（二）%s；\n（三）末项。", 
             "甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲"
             "甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲"
             "甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲甲",
             "乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙"
             "乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙"
             "乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙乙");
    char *c = cq_answer_span_context(all, "应当具备下列条件", "条件是什么？");
    assert_non_null(c);
    assert_non_null(strstr(c, "（一）甲"));
    assert_null(strstr(c, "（二）"));
    assert_true(strlen(c) > 3 && !strcmp(c + strlen(c) - 3, "…"));
    free(c);
    c = cq_answer_span_context(all, "末项", "有哪些条件？"); /* the list cut before the span's item: as without 哪些 */
    assert_non_null(c);
    assert_string_equal(c, "第五条 应当具备下列条件： … （三）末项。");
    free(c);
    /* a sentence that does not end with a colon leads no items in; a span that is its whole sentence has no context */
    expect_context("第一条 本法适用于劳动者。（一）甲；（二）乙。", "劳动者", "谁？", "第一条 本法适用于劳动者。");
    expect_context("试用期最长不得超过六个月。", "试用期最长不得超过六个月。", "试用期多久？", NULL);
    expect_context("试用期最长不得超过六个月。", "试用期最长不得超过六个月", "试用期多久？", NULL); /* but its 。 */
    expect_context(article36, "不在其中", "?", NULL);
    /* nor one that is its whole sentence but for the clause's label */
    expect_context("5.2 Either party may terminate on notice.", "Either party may terminate on notice.", "Can I?", NULL);
    expect_context("第六十二条 女职工生育享受不少于九十天的产假。", "女职工生育享受不少于九十天的产假。", "产假？", NULL);
    expect_context("第六十二条 女职工生育享受不少于九十天的产假。", "不少于九十天", "产假？", "第六十二条 女职工生育享受不少于九十天的产假。");
    expect_context("See 5.2 Either party may terminate.", "Either party may terminate.", "?", "See 5.2 Either party may terminate.");
    /* English: "What are" asks for several */
    const char *en = "7.1 The Supplier shall: (a) deliver the goods; (b) invoice monthly; (c) keep records.";
    expect_context(en, "invoice monthly", "What are the Supplier's duties?",
                   "7.1 The Supplier shall: (a) deliver the goods; (b) invoice monthly; (c) keep records.");
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_prompt_zh),
        cmocka_unit_test(test_prompt_en),
        cmocka_unit_test(test_prompt_language_is_the_querys),
        cmocka_unit_test(test_supported),
        cmocka_unit_test(test_is_title), cmocka_unit_test(test_in_question), cmocka_unit_test(test_fallback_quote),
        cmocka_unit_test(test_coverage_forms),
        cmocka_unit_test(test_constraint_items),
        cmocka_unit_test(test_span_context),
    };
    const struct CMUnitTest model[] = {
        cmocka_unit_test(test_generate_span),
        cmocka_unit_test(test_generate_item_context_keyless),
    };
    int rc = cmocka_run_group_tests(plain, NULL, NULL);
    return rc | cmocka_run_group_tests(model, open_model, close_model);
}
