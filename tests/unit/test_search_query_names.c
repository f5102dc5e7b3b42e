/* search/query: what a question names that the KB holds nowhere (cq_query.absent_name) and the answer that says so
 * instead of quoting another document's clause (app/answer.c). English: runs of capitalised words outside quotes
 * that do not begin a sentence; a run is held when one of its words is in some clause (the keyword index) or is a
 * whole word of a document's name or title (file names: "NDA-SqillerBetaTesters", "..._20by_20SWA"). Chinese: the
 * 《titles》 it names, held when a document's title matches (the router's variants) or a clause quotes it; the
 * question is refused only when every title it names is missing. English topic words that no clause holds in any
 * form (cq_query.absent_words), when more than half of the question's: the answer says so beside its quote. The other
 * forms of an English question's terms searched beside them (cq_query.form_terms). */
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
    static const char *const labour[][4] = {
        {"第十二条", "12", "第十二条", "第十二条 劳动者就业，不因民族、种族、性别、宗教信仰不同而受歧视。"},
        {"第四十四条", "44", "第四十四条",
         "第四十四条 休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。本报《请您监督》专栏欢迎来信。"}};
    test_add_doc(s, kb, "中华人民共和国劳动法", "中华人民共和国劳动法", "a4", labour, 2);
    return kb;
}

/* What cq_query_parse finds missing for question in kb (NULL: none), as a copy: the absent name, or with words the
 * absent topic words. */
static char *absent_of(cq_store *s, int64_t kb, const char *question, bool words) {
    cq_query q;
    cq_err err = {0};
    if (cq_query_parse(s, kb, question, &q, &err)) fail_msg("%s", err.msg);
    const char *found = words ? q.absent_words : q.absent_name;
    char *copy = found ? strdup(found) : NULL;
    cq_query_free(&q);
    return copy;
}

static void expect_missing(cq_store *s, int64_t kb, const char *question, const char *want, bool words) {
    char *got = absent_of(s, kb, question, words);
    if (!want && got) fail_msg("'%s': '%s' taken for %s the KB lacks", question, got, words ? "words" : "a name");
    if (want && (!got || strcmp(got, want))) fail_msg("'%s': expected '%s' absent, got '%s'", question, want, got ? got : "(none)");
    free(got);
}

static void expect_absent(cq_store *s, int64_t kb, const char *question, const char *name) {
    expect_missing(s, kb, question, name, false);
}

static void expect_words(cq_store *s, int64_t kb, const char *question, const char *words) {
    expect_missing(s, kb, question, words, true);
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

static void test_titles_the_kb_lacks(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    expect_absent(s, kb, "《公司法》规定的注册资本最低限额是多少？", "《公司法》");
    expect_absent(s, kb, "《数字经济促进条例》第三章第十二条规定的申报条件有哪些？", "《数字经济促进条例》");
    /* the first of several, when none is held */
    expect_absent(s, kb, "《公司法》和《证券法》有何不同？", "《公司法》");
    /* held: by a title variant (中华人民共和国 left out), by a clause quoting it; one held is enough */
    expect_absent(s, kb, "《劳动法》第四十四条规定了什么？", NULL);
    expect_absent(s, kb, "《中华人民共和国劳动法》规定休息日加班工资是多少？", NULL);
    expect_absent(s, kb, "《请您监督》专栏欢迎什么？", NULL);
    expect_absent(s, kb, "根据《劳动法》、《铁路客运运价规则》等规定，加班工资如何计算？", NULL);
    /* no title named: nothing to check */
    expect_absent(s, kb, "公司的注册资本最低限额是多少？", NULL);
    expect_absent(s, kb, "《》是什么？", NULL);
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
    /* a clause's place and a date are no names, even where the KB never writes them */
    expect_absent(s, kb, "What did the Agreement say in Article 12 as of March 1, 2020?", NULL);
    expect_absent(s, kb, "What does Schedule 2 of the JBF agreement require on Monday?", NULL);
    expect_absent(s, kb, "What does the agreement say about \xe2\x80\x9cMost Favored Nation\xe2\x80\x9d terms?", NULL);
    /* a document's title counts */
    expect_absent(s, kb, "Is the Mutual Agreement of JBF binding?", NULL);
    /* a question parsed without a KB is not checked */
    expect_absent(NULL, 0, "Consider FNHA's Non-Disclosure Agreement; Does it exist?", NULL);
    expect_absent(NULL, 0, "《公司法》规定的注册资本最低限额是多少？", NULL);
}

/* The answer to a question about a document the KB lacks: an abstention that names what is missing, not the quote
 * of another NDA's clause that BM25 still finds. */
static void test_answer_says_it_is_not_here(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    cq_err err = {0};
    /* the router would recite 劳动法's 第十二条: the law asked about is not here, so nothing is recited */
    cq_query zq;
    cq_answer za;
    assert_int_equal(cq_query_parse(s, kb, "《数字经济促进条例》第十二条规定了什么？", &zq, &err), CQ_OK);
    assert_int_equal(cq_answer_question(s, &zq, NULL, &za, &err), CQ_OK);
    assert_true(za.abstained);
    assert_int_equal(za.n_citations, 0);
    assert_non_null(za.notice);
    assert_string_equal(za.notice, "知识库中没有找到《数字经济促进条例》。");
    cq_answer_free(&za);
    cq_query_free(&zq);
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

/* An English question about what no clause says: more than half of its topic words held by no clause in any form. */
static void test_words_the_kb_lacks(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    /* neither word anywhere; "party", "agreement", "either", "without" frame the question */
    expect_words(s, kb, "Can either party assign the agreement without consent?", "assign consent");
    /* "non" is a prefix, no topic word */
    expect_words(s, kb, "Is there a non-compete clause?", "compete");
    /* half is not enough: "returned" is held ("When are invoices due?" of a contract that says "invoice") */
    expect_words(s, kb, "When are returns due?", NULL);
    /* two of five topic words: "confidential", "information", "confidence" are held */
    expect_words(s, kb, "Is there a non-compete clause on confidential information in confidence?", NULL);
    /* other forms count: "terminated" by "termination", "disclosing" by "disclose", "returns" by "returned",
     * "participant" by "participants" */
    expect_words(s, kb, "How can the agreement be terminated?", NULL);
    expect_words(s, kb, "Does the recipient avoid disclosing it to a participant?", NULL);
    expect_words(s, kb, "What returns are made?", NULL);
    /* less than half missing: "during" and "arbitration" are not held, the other four are */
    expect_words(s, kb, "Is confidential information returned upon termination during arbitration?", NULL);
    /* more than half: three of five */
    expect_words(s, kb, "Is confidential information kept during arbitration?", "kept during arbitration");
    /* Chinese questions and questions that name a missing document are left to the other checks */
    expect_words(s, kb, "公司的注册资本最低限额是多少？", NULL);
    expect_words(s, kb, "Consider FNHA's Non-Disclosure Agreement; Can it be assigned without consent?", NULL);
    /* no KB: nothing is checked */
    expect_words(NULL, 0, "Can either party assign the agreement without consent?", NULL);
}

/* The answer keeps its quote and says which words no clause uses. */
static void test_answer_names_missing_words(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    cq_err err = {0};
    cq_query q;
    cq_answer a;
    assert_int_equal(cq_query_parse(s, kb, "Can the Receiving Party assign it to affiliates?", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
    assert_false(a.abstained);
    assert_true(a.n_citations > 0);
    assert_non_null(a.notice);
    assert_non_null(strstr(a.notice, "No clause in the knowledge base uses the words \"assign\" or \"affiliates\""));
    cq_answer_free(&a);
    cq_query_free(&q);
    assert_int_equal(cq_query_parse(s, kb, "Must the recipient hold confidential information in confidence?", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
    assert_false(a.abstained);
    assert_true(!a.notice || !strstr(a.notice, "No clause in the knowledge base uses"));
    cq_answer_free(&a);
    cq_query_free(&q);
}

/* An English term's other forms: the keyword index does not stem, so "invoices" finds a clause that says "invoice"
 * through q.form_terms, and the question's own form still ranks first. */
static void test_other_forms(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "services", &kb, &err), CQ_OK);
    static const char *const clauses[][4] = {
        {"Section 3.1", "3.1", "Section 3.1", "Customer shall pay each correct invoice within thirty days of receipt."},
        {"Section 5.2", "5.2", "Section 5.2", "Either party may terminate on sixty days' written notice."},
        {"Section 3.3", "3.3", "Section 3.3", "Invoices are sent monthly by email."}};
    test_add_doc(s, kb, "services", NULL, "s1", clauses, 3);
    cq_query q;
    assert_int_equal(cq_query_parse(s, kb, "When are invoices due?", &q, &err), CQ_OK);
    bool invoice = false;
    for (size_t i = 0; i < q.n_form_terms; i++) {
        invoice |= !strcmp(q.form_terms[i], "invoice");
        assert_string_not_equal(q.form_terms[i], "invoices"); /* the question's own term is not its other form */
    }
    assert_true(invoice);
    cq_hits h = {0};
    assert_int_equal(cq_retrieve(s, &q, NULL, &h, &err), CQ_OK);
    assert_int_equal(h.n, 2);                                       /* the notice clause has no form of either word */
    assert_non_null(strstr(h.hits[0].text, "Invoices are sent"));   /* its own form first */
    assert_non_null(strstr(h.hits[1].text, "correct invoice"));     /* found through "invoice" */
    cq_hits_free(&h);
    cq_query_free(&q);
    /* Chinese questions have no forms; the weight 0 turns the search of forms off */
    assert_int_equal(cq_query_parse(s, kb, "发票什么时候到期？", &q, &err), CQ_OK);
    assert_int_equal(q.n_form_terms, 0);
    cq_query_free(&q);
    setenv("CLAUSEQA_FORMS_WEIGHT", "0", 1);
    assert_int_equal(cq_query_parse(s, kb, "When are invoices due?", &q, &err), CQ_OK);
    assert_int_equal(cq_retrieve(s, &q, NULL, &h, &err), CQ_OK);
    unsetenv("CLAUSEQA_FORMS_WEIGHT");
    assert_int_equal(h.n, 1);
    cq_hits_free(&h);
    cq_query_free(&q);
}

/* "第十二条" without a document in a KB where two laws have one: named in the question's ambiguous, and the answer asks
 * which is meant instead of saying the documents lack it; versions of one law count once; a named or unique one is
 * not ambiguous. */
static void test_reference_several_documents_have(void **state) {
    cq_store *s = *state;
    const int64_t kb = kb_with_ndas(s);
    cq_err err = {0};
    static const char *const contract[][4] = {
        {"第三条", "3", "第三条", "第三条 订立劳动合同，应当遵循合法、公平、平等自愿、协商一致、诚实信用的原则。"},
        {"第十二条", "12", "第十二条", "第十二条 劳动合同期限分为固定期限、无固定期限和以完成一定工作任务为期限的劳动合同。"}};
    test_add_doc(s, kb, "劳动合同法", "中华人民共和国劳动合同法", "b1", contract, 2);
    test_add_doc(s, kb, "劳动合同法(旧)", "中华人民共和国劳动合同法", "b2", contract, 2); /* a version: the same title */
    cq_query q;
    cq_answer a;
    assert_int_equal(cq_query_parse(s, kb, "第十二条规定了什么？", &q, &err), CQ_OK);
    assert_non_null(q.ambiguous);
    assert_string_equal(q.ambiguous, "中华人民共和国劳动法\n中华人民共和国劳动合同法");
    assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
    assert_true(a.abstained);
    assert_int_equal(a.n_citations, 0);
    assert_string_equal(a.answer, "知识库中有2个文件都有第十二条：《中华人民共和国劳动法》、《中华人民共和国劳动合同法》。"
                                  "请在问题中写明是哪个文件的第十二条。");
    /* one choice a document: the question asked of it, which the router then resolves */
    assert_int_equal(a.n_choices, 2);
    assert_string_equal(a.choices[0].document, "中华人民共和国劳动法");
    assert_string_equal(a.choices[0].question, "《中华人民共和国劳动法》第十二条规定了什么？");
    assert_string_equal(a.choices[1].question, "《中华人民共和国劳动合同法》第十二条规定了什么？");
    for (size_t i = 0; i < 2; i++) {
        cq_query cq;
        cq_answer ca;
        assert_int_equal(cq_query_parse(s, kb, a.choices[i].question, &cq, &err), CQ_OK);
        assert_null(cq.ambiguous);
        assert_int_equal(cq_answer_question(s, &cq, NULL, &ca, &err), CQ_OK);
        assert_false(ca.abstained);
        assert_true(ca.n_citations > 0);
        assert_string_equal(ca.citations[0].clause, "第十二条");
        const char *want = i == 0 ? "中华人民共和国劳动法" : "劳动合同法"; /* either version of it */
        assert_int_equal(strncmp(ca.citations[0].doc, want, strlen(want)), 0);
        cq_answer_free(&ca);
        cq_query_free(&cq);
    }
    cq_answer_free(&a);
    cq_query_free(&q);
    /* named, or one only one document has (JBF's Section 3: 劳动合同法's 第三条 has the key "3" but is not a Section):
     * resolved, nothing asked */
    const char *resolved[] = {"劳动法第十二条规定了什么？", "What does Section 3 say?", "第四十四条规定了什么？"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cq_query_parse(s, kb, resolved[i], &q, &err), CQ_OK);
        if (q.ambiguous) fail_msg("'%s' taken as ambiguous: %s", resolved[i], q.ambiguous);
        assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
        assert_false(a.abstained);
        assert_true(a.n_citations > 0);
        cq_answer_free(&a);
        cq_query_free(&q);
    }
    /* English: two NDAs have a Section 1 */
    assert_int_equal(cq_query_parse(s, kb, "What does Section 1 say?", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
    assert_true(a.abstained);
    assert_string_equal(a.answer, "2 documents of the knowledge base have Section 1: NDA-SqillerBetaTesters; "
                                  "Model_20NDA_20(recommended_20by_20SWA). Name the document in the question.");
    assert_int_equal(a.n_choices, 2);
    assert_string_equal(a.choices[0].question, "What does Section 1 of NDA-SqillerBetaTesters say?");
    cq_answer_free(&a);
    cq_query_free(&q);
    /* a question whose other words find an answer keeps it, the question back beside it */
    assert_int_equal(cq_query_parse(s, kb, "第十二条关于劳动合同期限是怎么规定的？", &q, &err), CQ_OK);
    assert_int_equal(cq_answer_question(s, &q, NULL, &a, &err), CQ_OK);
    assert_false(a.abstained);
    assert_true(a.n_citations > 0);
    if (!a.notice || !strstr(a.notice, "知识库中有2个文件都有第十二条"))
        fail_msg("answer '%s', notice '%s'", a.answer, a.notice ? a.notice : "(none)");
    cq_answer_free(&a);
    cq_query_free(&q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_the_kb_lacks, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_names_the_kb_holds, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_titles_the_kb_lacks, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_answer_says_it_is_not_here, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_words_the_kb_lacks, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_answer_names_missing_words, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_other_forms, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_reference_several_documents_have, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
