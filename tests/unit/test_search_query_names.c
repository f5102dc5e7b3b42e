/* search/query: an English question's proper names that the KB holds nowhere (cq_query.absent_name) and the answer
 * that says so instead of quoting another document's clause (app/answer.c). The names are runs of capitalised words
 * outside quotes that do not begin a sentence; a run is held when one of its words is in some clause (the keyword
 * index) or is a whole word of a document's name or title (file names: "NDA-SqillerBetaTesters", "..._20by_20SWA"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "app/answer.h"
#include "search/query.h"
#include "search/retrieve.h"
#include "test_store_util.h"

static int64_t kb_with_ndas(cq_store *s) {
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "ndas", &kb, &err), CQ_OK);
    static const char *const sqiller[][4] = {
        {"Section 1", "1", "Section 1", "The Receiving Party shall hold the Confidential Information in confidence."},
        {"Section 2", "2", "Section 2",
         "This agreement is made between Furtwangen University and the participants of a thesis."}};
    test_add_doc(s, kb, "NDA-SqillerBetaTesters", NULL, "a1", sqiller, 2);
    static const char *const swa[][4] = {
        {"Section 1", "1", "Section 1", "Confidential Information shall be returned upon the termination of the Agreement."}};
    test_add_doc(s, kb, "Model_20NDA_20(recommended_20by_20SWA)", NULL, "a2", swa, 1);
    static const char *const jbf[][4] = {
        {"Section 3", "3", "Section 3", "The Recipient shall not disclose the existence of this Agreement."}};
    test_add_doc(s, kb, "JBF_NDA_rev-2017033-1", "Mutual Non-Disclosure Agreement", "a3", jbf, 1);
    return kb;
}

/* The absent name cq_query_parse finds for question in kb (NULL: none), as a copy. */
static char *absent(cq_store *s, int64_t kb, const char *question) {
    cq_query q;
    cq_err err = {0};
    if (cq_query_parse(s, kb, question, &q, &err)) fail_msg("%s", err.msg);
    char *name = q.absent_name ? strdup(q.absent_name) : NULL;
    cq_query_free(&q);
    return name;
}

static void expect_absent(cq_store *s, int64_t kb, const char *question, const char *name) {
    char *got = absent(s, kb, question);
    if (!name && got) fail_msg("'%s': '%s' taken for a name the KB lacks", question, got);
    if (name && (!got || strcmp(got, name))) fail_msg("'%s': expected '%s' absent, got '%s'", question, name, got ? got : "(none)");
    free(got);
}

static void test_names_the_kb_lacks(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    /* a party no clause and no file name mentions: its document is not in the KB */
    expect_absent(s, kb,
                  "Consider FNHA's Non-Disclosure Agreement; Does the document specify whether the Receiving Party is "
                  "required to destroy or return Confidential Information?",
                  "FNHA");
    /* every word of the run missing: the whole run is named */
    expect_absent(s, kb, "Consider JB Machine LLC's Non-Disclosure Agreement; Does the document permit copies?",
                  "JB Machine LLC");
    /* a file name's tail of another contract is not it */
    expect_absent(s, kb,
                  "Highlight the parts (if any) of this contract related to \"Parties\" that should be reviewed by a "
                  "lawyer. Contract: JOINT FILING AGREEMENT (file QBIOMEDINC_04_08_2020-EX-99.1-JOINT_FILING)",
                  "QBIOMEDINC_04_08_2020-EX-99");
}

static void test_names_the_kb_holds(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    /* in a file name: camel case and a URL's escaped space part its words */
    expect_absent(s, kb, "Consider the Non-Disclosure Agreement between Sqiller and Beta Testers; Does it bind them?", NULL);
    expect_absent(s, kb, "Consider SWA's Non-Disclosure Agreement; Does the document mention returns?", NULL);
    /* one word of a run in a clause is enough: the document says "Furtwangen University" */
    expect_absent(s, kb,
                  "Consider the Non-Disclosure Agreement between Hochschule Furtwangen University and Thesis "
                  "Participants; Does the document bind them?",
                  NULL);
    /* words inside quotes and at a sentence's start are no names */
    expect_absent(s, kb, "Highlight the parts related to \"Uncapped Liability\" of the Agreement.", NULL);
    expect_absent(s, kb, "Zebras aside: Xylophones of the Agreement?", NULL);
    expect_absent(s, kb, "What does the agreement say about \xe2\x80\x9cMost Favored Nation\xe2\x80\x9d terms?", NULL);
    /* a document's title counts */
    expect_absent(s, kb, "Is the Mutual Agreement of JBF binding?", NULL);
    /* Chinese questions, and a question parsed without a KB, are not checked */
    expect_absent(s, kb, "《公司法》规定的注册资本最低限额是多少？", NULL);
    expect_absent(NULL, 0, "Consider FNHA's Non-Disclosure Agreement; Does it exist?", NULL);
}

/* The answer to a question about a document the KB lacks: an abstention that names what is missing, not the quote
 * of another NDA's clause that BM25 still finds. */
static void test_answer_says_it_is_not_here(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    cq_err err = {0};
    const char *ask[] = {"Consider FNHA's Non-Disclosure Agreement; Does the Receiving Party hold Confidential "
                         "Information in confidence?",
                         "Consider SWA's Non-Disclosure Agreement; Does the Receiving Party hold Confidential "
                         "Information in confidence?"};
    for (int i = 0; i < 2; i++) {
        cq_query q;
        cq_answer a;
        assert_int_equal(cq_query_parse(s, kb, ask[i], &q, &err), CQ_OK);
        assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
        assert_true(a.hits.n > 0); /* retrieval still ran: the clauses stay for the user to see */
        if (i == 0) {
            assert_true(a.abstained);
            assert_int_equal(a.n_citations, 0);
            assert_non_null(a.notice);
            assert_non_null(strstr(a.notice, "\"FNHA\""));
        } else {
            assert_false(a.abstained);
            assert_true(a.n_citations > 0);
        }
        cq_answer_free(&a);
        cq_query_free(&q);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_the_kb_lacks, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_names_the_kb_holds, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_answer_says_it_is_not_here, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
