/* app/followup: follow-up questions (search/query.h values) completed from the clause cited before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "app/followup.h"

/* A document of the chat's context and the clause keys it has (search/router.h keys: "44", "5.2"); keys NULL: the
 * store is not asked (has_clause unknown). */
typedef struct {
    const char *doc, *clause;
    const char *const *keys;
} chat;

static int has_key(void *arg, const cq_clause_ref *ref) {
    const chat *c = arg;
    for (const char *const *k = c->keys; *k; k++)
        if (!strcmp(*k, ref->key)) return 1;
    return 0;
}

/* title_doc: the document of the KB the question names (a title match, as cq_query_parse finds with a store), 0
 * none; the context's document is doc 1. */
static char *resolve_in(const chat *c, const char *question, int64_t title_doc) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    if (title_doc) q.titles[q.n_titles++] = (cq_title_match){.doc_id = title_doc, .score = 3};
    cq_followup_context ctx = {c->doc, c->clause, 1, c->keys ? has_key : NULL, (void *)c};
    char *got = cq_followup_resolve(&q, &ctx);
    cq_query_free(&q);
    return got;
}

static void expect(const chat *c, const char *question, int64_t title_doc, const char *expected) {
    char *got = resolve_in(c, question, title_doc);
    if (!expected) {
        if (got) fail_msg("'%s' (after %s %s) should stand, got '%s'", question, c->doc, c->clause ? c->clause : "",
                          got);
        return;
    }
    if (!got) fail_msg("'%s' (after %s %s) was not resolved (expected '%s')", question, c->doc,
                       c->clause ? c->clause : "", expected);
    assert_string_equal(got, expected);
    free(got);
}

/* Why a question depends on (or stands without) the chat before. */
static void expect_reason(const chat *c, const char *question, int64_t title_doc, cq_followup_reason reason) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    if (title_doc) q.titles[q.n_titles++] = (cq_title_match){.doc_id = title_doc, .score = 3};
    cq_followup_context ctx = {c->doc, c->clause, 1, c->keys ? has_key : NULL, (void *)c};
    cq_followup_reason got = cq_followup_classify(&q, &ctx);
    cq_query_free(&q);
    if (got != reason)
        fail_msg("'%s': %s, expected %s", question, cq_followup_reason_name(got), cq_followup_reason_name(reason));
}

/* The old test's form: a context without a store (has_clause unknown). */
static void assert_resolves(const char *question, const char *doc, const char *clause, bool names_document,
                            const char *expected) {
    chat c = {doc, clause, NULL};
    expect(&c, question, names_document ? 2 : 0, expected);
}

static const char *const labor_keys[] = {"44", "50", "20-1", NULL};
static const char *const contract_keys[] = {"5.2", "7.2", "3", NULL};
static const chat LABOR = {"劳动法(2018-12-29)", "第四十四条", labor_keys};
static const chat CONTRACT = {"sample-services-agreement", "Section 5.2", contract_keys};

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
    /* a paragraph of another document named stands; of the same one, only the article goes in */
    assert_resolves("那劳动合同法第二款呢？", "劳动法(2018-12-29)", "第四十四条", true, NULL);
    expect(&LABOR, "《劳动法》第二款呢？", 1, "《劳动法》第四十四条第二款呢？");
    assert_resolves("那第二款呢？", "农民专业合作社法", "第二十条之一", false, "那《农民专业合作社法》第二十条之一第二款呢？");
}

static void test_article_takes_document(void **state) {
    (void)state;
    assert_resolves("那第五十条呢？", "劳动法(2018-12-29)", "第四十四条", false, "那《劳动法(2018-12-29)》第五十条呢？");
    /* a full question about a bare reference: the document before when it has the clause (or, without a store, its
     * clauses are written the same way) */
    assert_resolves("第五十条规定了什么", "劳动法(2018-12-29)", "第四十四条", false, "《劳动法(2018-12-29)》第五十条规定了什么");
    assert_resolves("第五十条规定了什么", "劳动法(2018-12-29)", NULL, false, NULL);
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

/* A chat about 劳动法第四十四条 (a Chinese law): what is read in it, and what is not. */
static void test_chinese_chat(void **state) {
    (void)state;
    /* the case: an English section reference after a Chinese law is another document's */
    expect(&LABOR, "What does Section 5.2 say?", 0, NULL);
    expect_reason(&LABOR, "What does Section 5.2 say?", 0, CQ_FOLLOWUP_STANDS);
    expect(&LABOR, "And Section 7.2?", 0, NULL); /* elliptical, but 劳动法 has no Section 7.2 */
    expect(&LABOR, "What does Article 44 say?", 0, NULL); /* a full question in another language */
    /* elliptical and pronoun follow-ups are read in 劳动法 */
    expect(&LABOR, "那第二款呢？", 0, "那《劳动法(2018-12-29)》第四十四条第二款呢？");
    expect(&LABOR, "第三项呢", 0, "《劳动法(2018-12-29)》第四十四条第三项呢");
    expect(&LABOR, "那第五十条呢？", 0, "那《劳动法(2018-12-29)》第五十条呢？");
    expect_reason(&LABOR, "那第五十条呢？", 0, CQ_FOLLOWUP_ELLIPTICAL);
    expect(&LABOR, "第五十条的罚则呢", 0, "《劳动法(2018-12-29)》第五十条的罚则呢");
    expect(&LABOR, "第五十条规定了什么？", 0, "《劳动法(2018-12-29)》第五十条规定了什么？");
    expect_reason(&LABOR, "第五十条规定了什么？", 0, CQ_FOLLOWUP_BARE_CLAUSE);
    expect(&LABOR, "第九十九条规定了什么？", 0, NULL); /* 劳动法 (here) has no article 99: the whole KB */
    expect(&LABOR, "这一条的罚则是什么？", 0, "《劳动法(2018-12-29)》第四十四条的罚则是什么？");
    expect(&LABOR, "该条第二款怎么规定的", 0, "该条《劳动法(2018-12-29)》第四十四条第二款怎么规定的");
    expect(&LABOR, "该法第五十条呢", 0, "该法《劳动法(2018-12-29)》第五十条呢");
    expect_reason(&LABOR, "该法第五十条呢", 0, CQ_FOLLOWUP_PRONOUN);
    expect(&LABOR, "它适用于非全日制用工吗？", 0, "《劳动法(2018-12-29)》第四十四条适用于非全日制用工吗？");
    expect(&LABOR, "What does that clause say about night work?", 0,
           "What does 《劳动法(2018-12-29)》第四十四条 say about night work?");
    /* another document named: never read in 劳动法 */
    expect(&LABOR, "《劳动合同法》第十条规定了什么", 0, NULL);
    expect_reason(&LABOR, "《劳动合同法》第十条规定了什么", 0, CQ_FOLLOWUP_OTHER_DOCUMENT);
    expect(&LABOR, "民法典第五条呢？", 0, NULL);
    expect(&LABOR, "合同第五条是什么", 0, NULL);
    expect(&LABOR, "劳动合同法第十条呢", 2, NULL);
    expect(&LABOR, "《劳动合同法》这一条怎么说", 0, NULL);
    /* the same document named: complete already */
    expect(&LABOR, "劳动法第五十条呢", 1, NULL);
    expect_reason(&LABOR, "劳动法第五十条呢", 1, CQ_FOLLOWUP_STANDS);
    /* self-contained topics, and words that only look like pronouns */
    expect(&LABOR, "加班费怎么算？", 0, NULL);
    expect(&LABOR, "其它情形怎么处理？", 0, NULL);
    expect(&LABOR, "该条例第三条规定了什么", 2, NULL);
}

/* A chat about Section 5.2 of an English services agreement. */
static void test_english_chat(void **state) {
    (void)state;
    expect(&CONTRACT, "And Section 7.2?", 0, "And sample-services-agreement Section 7.2?");
    expect(&CONTRACT, "What about Section 3?", 0, "What about sample-services-agreement Section 3?");
    expect(&CONTRACT, "What does Section 7.2 say?", 0, "What does sample-services-agreement Section 7.2 say?");
    expect(&CONTRACT, "What does Section 9.9 say?", 0, NULL); /* not in the agreement: the whole KB */
    expect(&CONTRACT, "Does it apply to subcontractors?", 0,
           "Does sample-services-agreement Section 5.2 apply to subcontractors?");
    expect(&CONTRACT, "What does that clause say about fees?", 0,
           "What does sample-services-agreement Section 5.2 say about fees?");
    expect(&CONTRACT, "What does the agreement say about termination?", 0,
           "What does sample-services-agreement say about termination?");
    expect(&CONTRACT, "What does Section 3 of this agreement say?", 0,
           "What does sample-services-agreement Section 3 of this agreement say?");
    expect(&CONTRACT, "这一条是什么意思？", 0, "sample-services-agreement Section 5.2是什么意思？");
    /* another document, or self-contained */
    expect(&CONTRACT, "What does Section 5.2 of the NDA say?", 0, NULL);
    expect_reason(&CONTRACT, "What does Section 5.2 of the NDA say?", 0, CQ_FOLLOWUP_OTHER_DOCUMENT);
    expect(&CONTRACT, "Does the contract allow subcontracting under Section 4?", 0, NULL);
    expect(&CONTRACT, "What is the notice period in Section 9 of the lease?", 0, NULL);
    expect(&CONTRACT, "Is it legal to terminate early?", 0, NULL);
    expect(&CONTRACT, "How are fees invoiced?", 0, NULL);
    expect(&CONTRACT, "第五十条规定了什么？", 0, NULL); /* a Chinese article after an English agreement */
    expect(&CONTRACT, "那第五十条呢？", 0, NULL);
    expect(&CONTRACT, "那第二款呢？", 0, NULL); /* Section 5.2 is no article to take a 款 */
    expect(&CONTRACT, "《劳动法》第四十四条呢", 0, NULL);
    expect(&CONTRACT, "What does Section 7.2 of the Privacy Policy say?", 0, NULL);
}

/* Which questions are worth rebuilding the context for (whatever it was). */
static void may_depend(const char *question, bool expected) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, question, &q, &err), CQ_OK);
    if (cq_followup_may_depend(&q) != expected) fail_msg("'%s': may depend should be %d", question, expected);
    cq_query_free(&q);
}

static void test_may_depend(void **state) {
    (void)state;
    may_depend("那第二款呢？", true);
    may_depend("What does Section 5.2 say?", true); /* a reference: the context decides */
    may_depend("这一条的罚则是什么？", true);
    may_depend("Does it apply to subcontractors?", true);
    may_depend("What does the agreement say about fees?", true);
    may_depend("该法对加班有何规定", true);
    may_depend("加班费怎么算？", false);
    may_depend("How are fees invoiced?", false);
    may_depend("Is it legal to terminate early?", false);
    may_depend("其它情形怎么处理？", false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_paragraph_takes_article),
        cmocka_unit_test(test_article_takes_document),
        cmocka_unit_test(test_no_context_or_nothing_to_complete),
        cmocka_unit_test(test_chinese_chat),
        cmocka_unit_test(test_english_chat),
        cmocka_unit_test(test_may_depend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
