/* search/lexicon: the statutory words added to BM25's search for a question's everyday ones ("加班" → 延长工作时间),
 * the query's exp_terms (search/query.h), retrieval with them at a lower weight (search/retrieve.c) and the switch
 * that turns it off (CLAUSEQA_QUERY_EXPAND, CLAUSEQA_QUERY_EXPAND_WEIGHT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "search/lexicon.h"
#include "search/query.h"
#include "search/retrieve.h"
#include "test_store_util.h"

static void expect_expansion(const char *text, const char *const *want, size_t n_want, const char *const *not_want,
                             size_t n_not) {
    int failed = 1;
    char *x = cq_lexicon_expand(text, &failed);
    assert_int_equal(failed, 0);
    for (size_t i = 0; i < n_want; i++)
        if (!x || !strstr(x, want[i])) fail_msg("'%s': expected '%s' in the expansion '%s'", text, want[i], x ? x : "(none)");
    for (size_t i = 0; i < n_not; i++)
        if (x && strstr(x, not_want[i])) fail_msg("'%s': '%s' should not be in the expansion '%s'", text, not_want[i], x);
    free(x);
}

static void test_expand(void **state) {
    (void)state;
    unsetenv("CLAUSEQA_QUERY_EXPAND");
    expect_expansion("员工加班费怎么算？", (const char *[]){"延长工作时间", "工资报酬", "劳动者"}, 3, NULL, 0);
    expect_expansion("租房期间家具坏了，可以找房东修吗？", (const char *[]){"租赁", "承租人", "出租人"}, 3, NULL, 0);
    /* a statutory phrase the question already holds is not added again */
    expect_expansion("延长工作时间算加班吗？", NULL, 0, (const char *[]){"延长工作时间"}, 1);
    /* English: whole words and their plural, any case; not inside another word */
    expect_expansion("Can the Landlord enter the flat?", (const char *[]){"lessor"}, 1, NULL, 0);
    expect_expansion("What may landlords charge tenants?", (const char *[]){"lessor", "lessee"}, 2, NULL, 0);
    expect_expansion("Is the quitclaim deed valid?", NULL, 0, (const char *[]){"resign"}, 1);
    int failed = 1;
    assert_null(cq_lexicon_expand("第四十四条规定了什么？", &failed)); /* nothing lay: no expansion */
    assert_int_equal(failed, 0);
    /* the key-term count of app/answer.c: a phrase held whole counts once */
    assert_int_equal(cq_lexicon_phrases_in("延长工作时间 工资报酬 劳动者", "安排劳动者延长工作时间的，支付工资报酬"), 3);
    assert_int_equal(cq_lexicon_phrases_in("延长工作时间 工资报酬", "延长工作的时间"), 0);
    assert_int_equal(cq_lexicon_phrases_in(NULL, "延长工作时间"), 0);
}

/* The question in the words of the passage the reader reads first (cq_lexicon_reword). */
static void expect_reword(const char *question, const char *passage, const char *want) {
    int failed = 1;
    char *r = cq_lexicon_reword(question, passage, &failed);
    assert_int_equal(failed, 0);
    if (!want && r) fail_msg("'%s' reworded as '%s' for '%s'", question, r, passage);
    if (want && (!r || strcmp(r, want))) fail_msg("'%s': expected '%s', got '%s'", question, want, r ? r : "(unchanged)");
    free(r);
}

static void test_reword(void **state) {
    (void)state;
    unsetenv("CLAUSEQA_QUERY_EXPAND");
    const char *a44 = "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：（一）安排劳动者"
                      "延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；";
    const char *a85 = "第八十五条 用人单位有下列情形之一的，由劳动行政部门责令限期支付劳动报酬、加班费或者经济补偿；";
    /* the longest lay word (加班费, not 加班) and each one the passage lacks while it holds the statutory phrase */
    expect_reword("员工加班费怎么算？", a44, "劳动者延长工作时间的工资报酬怎么算？");
    expect_reword("加班工资怎么计算？", a44, "延长工作时间工资怎么计算？"); /* 工资: the passage says it too */
    /* a passage that says the lay word itself (85: 加班费), or none of the statutory phrases: unchanged */
    expect_reword("加班费怎么算？", a85, NULL);
    expect_reword("员工加班费怎么算？", "第三十六条 国家实行每日工作时间不超过八小时的工时制度。", NULL);
    /* lay words with no drop-in stay (打工, 辞退 …), and so does one whose drop-in the question already holds */
    expect_reword("我在工厂打工被辞退了怎么办？", "劳动者 用人单位 解除劳动合同", NULL);
    expect_reword("装饰装修的标准是什么？", "住宅室内装饰装修管理", NULL);
    expect_reword("房东可以随时进屋吗？", "出租人应当按照约定将租赁物交付承租人", "出租人可以随时进屋吗？");
    /* English: whole words, any case, the plural's s kept; not inside another word */
    expect_reword("Can the Landlord enter?", "The Lessor may enter the premises.", "Can the lessor enter?");
    expect_reword("What may landlords charge tenants?", "the lessor and the lessee", "What may lessors charge lessees?");
    expect_reword("Is the bosses' rule valid?", "the employer", NULL); /* bosses: not boss + s */
    expect_reword("Landlordship?", "the lessor", NULL);
    /* broken UTF-8 and a character cut at the end are copied as they are */
    expect_reword("员工\xff加班费怎么\xe7", a44, "劳动者\xff延长工作时间的工资报酬怎么\xe7");
    /* off with the expansion */
    setenv("CLAUSEQA_QUERY_EXPAND", "0", 1);
    expect_reword("员工加班费怎么算？", a44, NULL);
    unsetenv("CLAUSEQA_QUERY_EXPAND");
    int failed = 1;
    assert_null(cq_lexicon_reword(NULL, a44, &failed));
    assert_null(cq_lexicon_reword("员工加班费", NULL, &failed));
    assert_int_equal(failed, 0);
}

static void test_switch(void **state) {
    (void)state;
    int failed = 1;
    setenv("CLAUSEQA_QUERY_EXPAND", "off", 1);
    assert_false(cq_lexicon_enabled());
    assert_null(cq_lexicon_expand("员工加班费怎么算？", &failed));
    assert_int_equal(failed, 0);
    assert_true(cq_lexicon_weight() == 0.0);
    setenv("CLAUSEQA_QUERY_EXPAND", "1", 1);
    assert_true(cq_lexicon_enabled());
    unsetenv("CLAUSEQA_QUERY_EXPAND_WEIGHT");
    assert_true(cq_lexicon_weight() == CQ_LEXICON_WEIGHT);
    setenv("CLAUSEQA_QUERY_EXPAND_WEIGHT", "2", 1);
    assert_true(cq_lexicon_weight() == 2.0);
    const char *bad[] = {"abc", "9", "-1", "0", "0.5x", ""};
    /* a bad value falls back, with one warning a process (stderr caught in a file meanwhile) */
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(fileno(log), 2) == 2);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("CLAUSEQA_QUERY_EXPAND_WEIGHT", bad[i], 1);
        if (cq_lexicon_weight() != CQ_LEXICON_WEIGHT) fail_msg("weight '%s' taken as %g", bad[i], cq_lexicon_weight());
    }
    fflush(stderr);
    assert_true(dup2(saved, 2) == 2);
    close(saved);
    char text[4096] = {0};
    rewind(log);
    size_t got = fread(text, 1, sizeof text - 1, log);
    fclose(log);
    const char *first = strstr(text, "CLAUSEQA_QUERY_EXPAND_WEIGHT is a number");
    if (!got || !first || strstr(first + 1, "CLAUSEQA_QUERY_EXPAND_WEIGHT is a number"))
        fail_msg("expected one warning for the bad weights, the log says '%s'", text);
    assert_non_null(strstr(text, "'abc'"));
    unsetenv("CLAUSEQA_QUERY_EXPAND_WEIGHT");
    unsetenv("CLAUSEQA_QUERY_EXPAND");
}

/* The query: the expansion's terms are kept apart from the question's own, and none repeats one of them. */
static void test_query_terms(void **state) {
    (void)state;
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, "员工加班费怎么算？", &q, &err), CQ_OK);
    assert_non_null(q.expansion);
    assert_true(q.n_exp_terms > 0);
    int has_yanchang = 0;
    for (size_t i = 0; i < q.n_exp_terms; i++) {
        has_yanchang |= !strcmp(q.exp_terms[i], "延长");
        for (size_t j = 0; j < q.n_terms; j++)
            if (!strcmp(q.exp_terms[i], q.terms[j])) fail_msg("'%s' is both a term and an expansion term", q.terms[j]);
    }
    assert_true(has_yanchang);
    for (size_t j = 0; j < q.n_terms; j++) assert_string_not_equal(q.terms[j], "延长");
    cq_query_free(&q);
    assert_int_equal(cq_query_parse(NULL, 0, "《劳动法》第四十四条规定了什么？", &q, &err), CQ_OK);
    assert_null(q.expansion);
    assert_int_equal(q.n_exp_terms, 0);
    cq_query_free(&q);
}

/* The rank of the clause labelled label in KB kb's BM25 results for question (0: not among the first 5). */
static size_t rank_of(cq_store *s, int64_t kb, const char *question, const char *label) {
    cq_query q;
    cq_hits h = {0};
    cq_err err = {0};
    cq_retrieve_options o = {.modes = CQ_RETRIEVE_BM25, .k = 5};
    if (cq_query_parse(s, kb, question, &q, &err) || cq_retrieve(s, &q, &o, &h, &err)) fail_msg("%s", err.msg);
    size_t rank = 0;
    for (size_t i = 0; i < h.n && !rank; i++)
        if (h.hits[i].label && !strcmp(h.hits[i].label, label)) rank = i + 1;
    cq_hits_free(&h);
    cq_query_free(&q);
    return rank;
}

static void test_retrieval(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "labour", &kb, &err), CQ_OK);
    static const char *const labour[][4] = {
        {"第四十四条", "44", "第四十四条",
         "第四十四条 安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬。"},
        {"第八十五条", "85", "第八十五条",
         "第八十五条 用人单位未依照劳动合同的约定支付加班费的，由劳动行政部门责令限期支付。"},
        {"第十二条", "12", "第十二条", "第十二条 劳动者就业，不因民族、种族、性别、宗教信仰不同而受歧视。"}};
    test_add_doc(s, kb, "劳动法", "劳动法", "a1", labour, 3);
    const char *question = "员工加班费怎么算？";
    unsetenv("CLAUSEQA_QUERY_EXPAND");
    size_t with = rank_of(s, kb, question, "第四十四条"), literal = rank_of(s, kb, question, "第八十五条");
    setenv("CLAUSEQA_QUERY_EXPAND", "0", 1);
    size_t without = rank_of(s, kb, question, "第四十四条"), literal_off = rank_of(s, kb, question, "第八十五条");
    unsetenv("CLAUSEQA_QUERY_EXPAND");
    assert_int_equal(without, 0); /* no word of the question is in it */
    assert_true(with > 0);        /* found through 延长工作时间 and 工资报酬 */
    assert_int_equal(literal_off, 1);
    assert_true(literal > 0); /* the question's own words still count */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_reword),
        cmocka_unit_test(test_switch),
        cmocka_unit_test(test_query_terms),
        cmocka_unit_test_setup_teardown(test_retrieval, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
