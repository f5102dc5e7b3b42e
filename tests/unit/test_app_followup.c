/* app/followup: follow-up questions (index/query.h values) completed from the clause cited before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "app/followup.h"

/* names_document: the question names a document of the KB (a title match, as cq_query_parse finds with a store). */
static void assert_resolves(const char *question, const char *doc, const char *clause, bool names_document,
                            const char *expected) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    if (names_document) q.titles[q.n_titles++] = (cq_title_match){.doc_id = 1, .score = 3};
    cq_followup_context ctx = {doc, clause};
    char *got = cq_followup_resolve(&q, &ctx);
    cq_query_free(&q);
    if (!expected) {
        if (got) fail_msg("'%s' should stay as it is, got '%s'", question, got);
        return;
    }
    if (!got) fail_msg("'%s' was not resolved (expected '%s')", question, expected);
    assert_string_equal(got, expected);
    free(got);
}

/* What a question refers to, as follow-up resolution reads it from the query. */
static void assert_type(const char *question, cq_query_type type, const char *ref) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    assert_int_equal(q.type, type);
    if (ref) {
        assert_int_equal(q.ref.end - q.ref.start, strlen(ref));
        assert_memory_equal(question + q.ref.start, ref, strlen(ref));
    }
    cq_query_free(&q);
}

static void test_classify(void **state) {
    (void)state;
    assert_type("那第二款呢？", CQ_QUERY_PARAGRAPH, "第二款");
    assert_type("第三项是什么", CQ_QUERY_PARAGRAPH, "第三项");
    assert_type("第二款第三项呢", CQ_QUERY_PARAGRAPH, "第二款第三项");
    assert_type("第五十条呢？", CQ_QUERY_CLAUSE, "第五十条");
    assert_type("劳动法第四十四条第二款", CQ_QUERY_CLAUSE, "第四十四条第二款");
    assert_type("What about Section 7.2?", CQ_QUERY_CLAUSE, "Section 7.2");
    assert_type("加班费怎么算？", CQ_QUERY_TOPIC, NULL);
    assert_type("第二个问题", CQ_QUERY_TOPIC, NULL);
    assert_type("", CQ_QUERY_TOPIC, NULL);
}

static void test_paragraph_takes_article(void **state) {
    (void)state;
    assert_resolves("那第二款呢？", "劳动法(2018-12-29)", "第四十四条", false, "那《劳动法(2018-12-29)》第四十四条第二款呢？");
    assert_resolves("第三项呢", "劳动法(2018-12-29)", "第四十四条", false, "《劳动法(2018-12-29)》第四十四条第三项呢");
    /* the document is named or not: a paragraph alone always needs the article */
    assert_resolves("那第二款呢？", "劳动法(2018-12-29)", "第四十四条", true, "那《劳动法(2018-12-29)》第四十四条第二款呢？");
    assert_resolves("那第二款呢？", "农民专业合作社法", "第二十条之一", false, "那《农民专业合作社法》第二十条之一第二款呢？");
}

static void test_article_takes_document(void **state) {
    (void)state;
    assert_resolves("那第五十条呢？", "劳动法(2018-12-29)", "第四十四条", false, "那《劳动法(2018-12-29)》第五十条呢？");
    assert_resolves("第五十条规定了什么", "劳动法(2018-12-29)", NULL, false, "《劳动法(2018-12-29)》第五十条规定了什么");
    assert_resolves("And Section 7.2?", "sample-services-agreement", "Section 5.2", false,
                    "And sample-services-agreement Section 7.2?");
    /* a question that names its document stands */
    assert_resolves("劳动合同法第十条呢", "劳动法(2018-12-29)", "第四十四条", true, NULL);
}

static void test_no_context_or_nothing_to_complete(void **state) {
    (void)state;
    assert_resolves("加班费怎么算？", "劳动法(2018-12-29)", "第四十四条", false, NULL);
    assert_resolves("那第二款呢？", "", "第四十四条", false, NULL);
    assert_resolves("那第二款呢？", NULL, NULL, false, NULL);
    /* a paragraph of something that is not an article (a section label, a paragraph chunk) cannot be formed */
    assert_resolves("那第二款呢？", "sample-services-agreement", "Section 5.2", false, NULL);
    assert_resolves("那第二款呢？", "劳动法(2018-12-29)", NULL, false, NULL);
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, "那第二款呢？", &q, &err), CQ_OK);
    assert_null(cq_followup_resolve(&q, NULL));
    cq_query_free(&q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_paragraph_takes_article),
        cmocka_unit_test(test_article_takes_document),
        cmocka_unit_test(test_no_context_or_nothing_to_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
