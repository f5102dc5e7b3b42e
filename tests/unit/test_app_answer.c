/* app/answer.c: answers from retrieved clauses — recitation of a named article, its paragraphs (款) and items (项),
 * extractive sentences, abstention. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "app/answer.h"

static const char *article44 =
    "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付工资报酬：\n"
    "（一）安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；\n"
    "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；\n"
    "（三）法定休假日安排劳动者工作的，支付不低于工资的百分之三百的工资报酬。";
static const char *article30 = "第三十条 用人单位应当及时足额支付劳动报酬。\n"
                               "用人单位拖欠劳动报酬的，劳动者可以依法申请支付令。";

/* One retrieved clause as the router (source ROUTER) or BM25 would return it. */
static cq_hits one_hit(const char *text, const char *label, int source, int paragraph, int item) {
    cq_hits h = {0};
    h.hits = calloc(1, sizeof *h.hits);
    h.n = 1;
    h.hits[0] = (cq_hit){.clause_id = 7, .doc_id = 1, .doc_name = strdup("劳动法"), .label = strdup(label),
                         .path = strdup(label), .text = strdup(text), .page_first = 4, .page_last = 4,
                         .score = 1000, .source = source, .paragraph = paragraph, .item = item};
    return h;
}

static char *answer_for(const char *question, const char *text, const char *label, int source, int paragraph,
                        int item, int *abstained) {
    cq_hits h = one_hit(text, label, source, paragraph, item);
    cq_answer a;
    cq_err err = {0};
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    assert_int_equal(cq_answer_from_hits(&q, &h, NULL, &a, &err), CQ_OK);
    cq_query_free(&q);
    char *out = strdup(a.answer);
    *abstained = a.abstained;
    if (!a.abstained) {
        assert_int_equal(a.n_citations, 1);
        assert_int_equal(a.citations[0].clause_id, 7);
        assert_int_equal(a.citations[0].page, 4);
        assert_non_null(strstr(text, a.citations[0].quote)); /* quotes are verbatim */
    }
    cq_answer_free(&a);
    return out;
}

static void test_recite(void **state) {
    (void)state;
    int ab;
    char *a = answer_for("劳动法第四十四条", article44, "第四十四条", CQ_RETRIEVE_ROUTER, 0, 0, &ab);
    assert_false(ab);
    assert_true(!strncmp(a, "有下列情形之一的", strlen("有下列情形之一的"))); /* label dropped */
    assert_non_null(strstr(a, "百分之三百"));
    free(a);
}

static void test_paragraph_and_item(void **state) {
    (void)state;
    int ab;
    char *a = answer_for("第三十条第二款", article30, "第三十条", CQ_RETRIEVE_ROUTER, 2, 0, &ab);
    assert_string_equal(a, "用人单位拖欠劳动报酬的，劳动者可以依法申请支付令。");
    free(a);
    /* Items belong to the paragraph above them: paragraph 1 of article 44 is the lead-in and its three items. */
    a = answer_for("第四十四条第一款", article44, "第四十四条", CQ_RETRIEVE_ROUTER, 1, 0, &ab);
    assert_non_null(strstr(a, "（三）法定休假日"));
    free(a);
    a = answer_for("第四十四条第一款第二项", article44, "第四十四条", CQ_RETRIEVE_ROUTER, 1, 2, &ab);
    assert_string_equal(a, "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；");
    free(a);
    a = answer_for("第四十四条第三项", article44, "第四十四条", CQ_RETRIEVE_ROUTER, 0, 3, &ab);
    assert_true(!strncmp(a, "（三）", strlen("（三）")));
    free(a);
    /* A paragraph the article does not have: said, then the whole article. */
    a = answer_for("第四十四条第二款", article44, "第四十四条", CQ_RETRIEVE_ROUTER, 2, 0, &ab);
    assert_true(!strncmp(a, "第四十四条没有第二款", strlen("第四十四条没有第二款")));
    assert_non_null(strstr(a, "百分之三百"));
    free(a);
}

static void test_extractive_and_abstain(void **state) {
    (void)state;
    int ab;
    char *a = answer_for("拖欠劳动报酬怎么办？", article30, "第三十条", CQ_RETRIEVE_BM25, 0, 0, &ab);
    assert_false(ab);
    assert_string_equal(a, "用人单位拖欠劳动报酬的，劳动者可以依法申请支付令。");
    free(a);
    a = answer_for("火星上的量子引力如何影响足球转播？", article30, "第三十条", CQ_RETRIEVE_BM25, 0, 0, &ab);
    assert_true(ab);
    free(a);
    /* Nothing retrieved: abstain, in the question's language. */
    cq_hits none = {0};
    cq_answer ans;
    cq_err err = {0};
    cq_query q;
    assert_int_equal(cq_query_parse(NULL, 0, "What is the notice period?", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_from_hits(&q, &none, NULL, &ans, &err), CQ_OK);
    cq_query_free(&q);
    assert_true(ans.abstained);
    assert_non_null(strstr(ans.answer, "do not contain"));
    cq_answer_free(&ans);
}

/* The extractive answer keeps to one item (项): the neighbour sentence is another item, not added. */
static void test_extractive_one_item(void **state) {
    (void)state;
    int ab;
    char *a = answer_for("休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？", article44, "第四十四条",
                         CQ_RETRIEVE_BM25, 0, 0, &ab);
    assert_false(ab);
    assert_string_equal(a, "（二）休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬；");
    free(a);
    /* sentences of one paragraph are still joined when both match */
    a = answer_for("拖欠劳动报酬的，劳动报酬怎么办？", article30, "第三十条", CQ_RETRIEVE_BM25, 0, 0, &ab);
    assert_false(ab);
    assert_non_null(strstr(a, "申请支付令"));
    free(a);
}

/* The refusal threshold by question language: the caller's first, then the adapter's for the language (a single number
 * holds for both, a language it leaves out takes the default), then the default. */
static void test_refusal_threshold_by_language(void **state) {
    (void)state;
    cq_adapter_info ai = {0};
    assert_true(cq_answer_refusal_min_p(0, NULL, CQ_QUERY_ZH) == CQ_ANSWER_REFUSAL_MIN_P);
    assert_true(cq_answer_refusal_min_p(0, &ai, CQ_QUERY_EN) == CQ_ANSWER_REFUSAL_MIN_P); /* none named */
    ai.refusal_min_p = 0.95, ai.refusal_min_p_en = 1.01;
    assert_true(cq_answer_refusal_min_p(0, &ai, CQ_QUERY_ZH) == 0.95);
    assert_true(cq_answer_refusal_min_p(0, &ai, CQ_QUERY_EN) == 1.01);
    assert_true(cq_answer_refusal_min_p(0.5, &ai, CQ_QUERY_EN) == 0.5); /* --refusal-min-p: every language */
    ai.refusal_min_p = 0; /* {"en": 1.01}: Chinese takes the default */
    assert_true(cq_answer_refusal_min_p(0, &ai, CQ_QUERY_ZH) == CQ_ANSWER_REFUSAL_MIN_P);
}

/* The confidence floor by question language: the caller's first (negative: none), then with an adapter its floor for
 * the language (a single number holds for both), none where it names none; without an adapter the base model's. */
static void test_confidence_floor_by_language(void **state) {
    (void)state;
    cq_adapter_info ai = {0};
    assert_true(cq_answer_min_confidence(0, NULL, CQ_QUERY_ZH) == CQ_ANSWER_MIN_CONFIDENCE);
    assert_true(cq_answer_min_confidence(0, &ai, CQ_QUERY_ZH) == CQ_ANSWER_MIN_CONFIDENCE_TRAINED); /* none named */
    assert_true(cq_answer_min_confidence(0, &ai, CQ_QUERY_EN) == CQ_ANSWER_MIN_CONFIDENCE_TRAINED);
    ai.min_confidence = 0.2;
    ai.min_confidence_en = 0.4;
    assert_true(cq_answer_min_confidence(0, &ai, CQ_QUERY_ZH) == 0.2);
    assert_true(cq_answer_min_confidence(0, &ai, CQ_QUERY_EN) == 0.4);
    assert_true(cq_answer_min_confidence(0.5, &ai, CQ_QUERY_ZH) == 0.5); /* --min-confidence: every language */
    assert_true(cq_answer_min_confidence(-1, &ai, CQ_QUERY_EN) == -1);   /* negative: no floor */
    assert_true(cq_answer_min_confidence(-1, NULL, CQ_QUERY_ZH) == -1);
    ai.min_confidence = 0; /* {"en": 0.4}: Chinese gets none */
    assert_true(cq_answer_min_confidence(0, &ai, CQ_QUERY_ZH) == CQ_ANSWER_MIN_CONFIDENCE_TRAINED);
}

/* Reader passages pruned by rerank margin (cq_answer_reader_passages): only when the reranker judged the clauses;
 * hits[0] always; judged clauses within the margin of hits[0]'s relevance; unjudged ones dropped; a cap; the
 * environment's settings when the options leave them. */
static void test_reader_passages(void **state) {
    (void)state;
    cq_hit x[6] = {{.clause_id = 1}, {.clause_id = 2}, {.clause_id = 3}, {.clause_id = 4}, {.clause_id = 5},
                   {.clause_id = 6}};
    cq_hits h = {x, 6, 0};
    size_t keep[6];
    unsetenv("CLAUSEQA_READER_MARGIN");
    unsetenv("CLAUSEQA_READER_MAX");
    /* no rerank: every clause, whatever the settings */
    cq_answer_options o = {.reader_margin = 0.5, .reader_max = 2};
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 6);
    for (size_t i = 0; i < 6; i++) assert_int_equal(keep[i], i);
    /* reranked: relevance 1.05, 0.05, -1.71 (the demo question's), then one judged higher, two not judged */
    const double rel[4] = {1.05, 0.05, -1.71, 2.0};
    for (size_t i = 0; i < 4; i++) {
        x[i].reranked = true;
        x[i].relevance = rel[i];
    }
    o = (cq_answer_options){.reader_margin = -1};
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 6); /* off: every clause */
    o.reader_margin = 1.5;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 3); /* 1.05 - 1.5 = -0.45: the third is out */
    assert_int_equal(keep[0], 0);
    assert_int_equal(keep[1], 1);
    assert_int_equal(keep[2], 3); /* above the first: kept; the unjudged 5th and 6th are not */
    o.reader_margin = 0.5;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 2);
    assert_int_equal(keep[1], 3);
    o.reader_margin = INFINITY; /* every judged clause */
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 4);
    o.reader_max = 2;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 2);
    assert_int_equal(keep[1], 1);
    o = (cq_answer_options){.reader_margin = -1, .reader_max = 5}; /* a cap alone */
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 5);
    /* the first clause stays when it is below the margin itself (keep-doc put it first) */
    x[0].relevance = -9;
    o = (cq_answer_options){.reader_margin = 1};
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 4);
    /* not judged first (a version put first): the reference is the best judged one, 2.0 */
    x[0].reranked = false;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 2);
    assert_int_equal(keep[0], 0);
    assert_int_equal(keep[1], 3);
    x[0].reranked = true;
    x[0].relevance = 1.05;
    /* the environment's settings when the options leave them (0); the options win */
    setenv("CLAUSEQA_READER_MARGIN", "1.5", 1);
    o = (cq_answer_options){0};
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 3);
    o.reader_margin = -1;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 6);
    setenv("CLAUSEQA_READER_MAX", "1", 1);
    o.reader_margin = 0;
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 1);
    setenv("CLAUSEQA_READER_MARGIN", "off", 1);
    unsetenv("CLAUSEQA_READER_MAX");
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), 6);
    size_t want[6];
    const size_t n_default = cq_answer_reader_passages(&h, &(cq_answer_options){.reader_margin = CQ_ANSWER_READER_MARGIN}, want);
    setenv("CLAUSEQA_READER_MARGIN", "wide", 1); /* not a setting: the default (with one warning) */
    assert_int_equal(cq_answer_reader_passages(&h, &o, keep), n_default);
    unsetenv("CLAUSEQA_READER_MARGIN");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_recite), cmocka_unit_test(test_paragraph_and_item),
                                       cmocka_unit_test(test_extractive_and_abstain),
                                       cmocka_unit_test(test_extractive_one_item),
                                       cmocka_unit_test(test_refusal_threshold_by_language),
                                       cmocka_unit_test(test_confidence_floor_by_language),
                                       cmocka_unit_test(test_reader_passages)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
