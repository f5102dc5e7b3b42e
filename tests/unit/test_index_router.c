/* index/router: clause references in both languages, the local-regulation place, title and file-name matching
 * (versions, prefixes, parts, generic titles, Latin file-name words, the cache), and resolution (named documents
 * only, the best tier only, a unique label without a title, chapters). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/numerals.h"
#include "search/router.h"
#include "store/versions.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/router_bodies.h"

/* ---- parsing ------------------------------------------------------------------------------------------------ */

/* Parses q; checks the key and that the reference's span is exactly `span`. */
static cq_clause_ref parse_ok(const char *q, const char *key, const char *span) {
    cq_clause_ref r;
    if (!cq_router_parse(q, &r)) fail_msg("no reference found in '%s'", q);
    assert_string_equal(r.key, key);
    if (r.end - r.start != strlen(span) || memcmp(q + r.start, span, strlen(span)))
        fail_msg("'%s': span '%.*s', expected '%s'", q, (int)(r.end - r.start), q + r.start, span);
    return r;
}

static void test_parse_chinese(void **state) {
    (void)state;
    cq_clause_ref r = parse_ok("《数字经济促进条例》第三章第十二条规定的申报条件有哪些？", "12", "第三章第十二条");
    assert_int_equal(r.chapter, 3);
    assert_int_equal(r.article, 12);
    assert_int_equal(r.paragraph, 0);
    r = parse_ok("公司法第12条第二款是什么", "12", "第12条第二款");
    assert_int_equal(r.paragraph, 2);
    r = parse_ok("劳动法第四十四条第一款第二项", "44", "第四十四条第一款第二项");
    assert_int_equal(r.paragraph, 1);
    assert_int_equal(r.item, 2);
    r = parse_ok("刑法第二十条之一", "20-1", "第二十条之一");
    assert_int_equal(r.article, 20);
    assert_int_equal(r.article_sub, 1);
    parse_ok("民法商法农民专业合作社法第三十三条的内容是什么？", "33", "第三十三条");
    parse_ok("第一百零五条", "105", "第一百零五条");
    parse_ok("第１２条", "12", "第１２条");   /* full-width digits */
    parse_ok("第 十 条", "10", "第 十 条"); /* spaces a PDF left */
    parse_ok("合同第壹条", "1", "第壹条");  /* financial numerals, as the reader splits them */
    /* The first article and what directly follows it; a second article is another question. */
    r = parse_ok("第二条和第三条有什么区别", "2", "第二条");
    assert_int_equal(r.article, 2);
    /* Headings without an article: no key, the heading numbers. */
    r = parse_ok("第三章讲了什么", "", "第三章");
    assert_int_equal(r.chapter, 3);
    r = parse_ok("第二编第一章第四节", "", "第二编第一章第四节");
    assert_int_equal(r.part, 2);
    assert_int_equal(r.chapter, 1);
    assert_int_equal(r.section, 4);
    /* A number too large for any document is still a reference (to a clause none has), not words to search. */
    r = parse_ok("第99999999999条规定了什么", "100000000", "第99999999999条");
    assert_int_equal(r.article, CQ_NUMBER_TOO_LARGE);
    /* Not references. */
    cq_clause_ref none;
    assert_false(cq_router_parse("员工加班费怎么算？", &none));
    assert_false(cq_router_parse("第二个问题", &none));
    assert_false(cq_router_parse("那第二款呢？", &none)); /* a paragraph alone: a follow-up's fragment */
    assert_false(cq_router_parse("", &none));
    assert_int_equal(none.article, 0);
    assert_string_equal(none.key, "");
}

static void test_parse_english(void **state) {
    (void)state;
    cq_clause_ref r = parse_ok("What does Section 7.2 say about termination?", "7.2", "Section 7.2");
    assert_int_equal(r.article, 7);
    parse_ok("see Sec. 7.2(a) of the lease", "7.2", "Sec. 7.2");
    parse_ok("Art. 5 applies", "5", "Art. 5");
    parse_ok("under clause 4.1.3", "4.1.3", "clause 4.1.3");
    parse_ok("§ 3 applies", "3", "§ 3");
    parse_ok("§12 applies", "12", "§12");
    /* Roman numerals (core/numerals.h), either case; a trailing dot is not part of the number. */
    parse_ok("see ARTICLE IV of the agreement", "4", "ARTICLE IV");
    parse_ok("Article xiv.", "14", "Article xiv");
    parse_ok("ARTICLE XL", "40", "ARTICLE XL");
    cq_clause_ref none;
    assert_false(cq_router_parse("the party shall", &none));      /* "part" is not "Article" */
    assert_false(cq_router_parse("a particle 5 microns", &none));  /* "article" inside a word */
    assert_false(cq_router_parse("Article IVy", &none));           /* a word, not a numeral */
    assert_false(cq_router_parse("the section heading", &none));   /* no number */
    /* Chinese references win over English ones in a mixed question. */
    parse_ok("Section 2 和第五条", "5", "第五条");
}

static void test_local_place(void **state) {
    (void)state;
    char place[64];
    assert_true(cq_router_local_place("上海市住宅物业管理规定", place, sizeof place));
    assert_string_equal(place, "上海市");
    assert_true(cq_router_local_place("广东省实施《中华人民共和国土地管理法》办法", place, sizeof place));
    assert_string_equal(place, "广东省");
    assert_true(cq_router_local_place("内蒙古自治区草原管理条例", place, sizeof place));
    assert_string_equal(place, "内蒙古自治区");
    assert_true(cq_router_local_place("延边朝鲜族自治州森林保护条例", place, sizeof place));
    assert_string_equal(place, "延边朝鲜族自治州");
    /* National laws, and a prefix that would leave too short a name, are not local. */
    assert_false(cq_router_local_place("中华人民共和国公司法", place, sizeof place));
    assert_false(cq_router_local_place("公司法(2018-10-26)", place, sizeof place));
    assert_false(cq_router_local_place("上海市条例", place, sizeof place));
    /* The place is cut to the room given. */
    char small[4];
    assert_true(cq_router_local_place("上海市住宅物业管理规定", small, sizeof small));
    assert_int_equal(strlen(small), 3);
}

/* ---- titles ------------------------------------------------------------------------------------------------- */

static const char *const company_law[][4] = {
    {NULL, NULL, "", "中华人民共和国公司法"},
    {"第一条", "1", "第一章 总则 > 第一条", "第一条 为了规范公司的组织和行为，制定本法。"},
    {"第二条", "2", "第一章 总则 > 第二条", "第二条 本法所称公司是指依照本法在中国境内设立的公司。"},
    {"第十二条", "12", "第二章 公司登记 > 第十二条", "第十二条 公司的经营范围由公司章程规定。"},
};
static const char *const labour_law[][4] = {
    {"第一条", "1", "第一章 总则 > 第一条", "第一条 为了保护劳动者的合法权益，制定本法。"},
    {"第三条", "3", "第一章 总则 > 第三条", "第三条 劳动者享有平等就业和选择职业的权利。"},
};
static const char *const one_article[][4] = {
    {"第十条", "10", "第二章 管理 > 第十条", "第十条 业主大会应当定期召开。"},
};
static const char *const contract[][4] = {
    {"Section 1", "1", "Section 1", "Section 1 The Receiving Party shall keep the information confidential."},
};

typedef struct {
    cq_store *s;
    int64_t kb;
    int64_t company_2013, company_2018, labour, shanghai, civil_contracts, copacc;
} fixture;

static int setup_kb(void **state) {
    if (test_store_setup(state)) return -1;
    cq_store *s = *state;
    fixture *f = calloc(1, sizeof *f);
    cq_err err = {0};
    f->s = s;
    if (cq_store_kb_ensure(s, "t", &f->kb, &err)) return -1;
    f->company_2013 = test_add_doc(s, f->kb, "公司法(2013-12-28)", "中华人民共和国公司法", "h1", company_law, 4);
    f->company_2018 = test_add_doc(s, f->kb, "公司法(2018-10-26)", "中华人民共和国公司法", "h2", company_law, 4);
    f->labour = test_add_doc(s, f->kb, "劳动法(2018-12-29)", "中华人民共和国劳动法", "h3", labour_law, 2);
    f->shanghai = test_add_doc(s, f->kb, "上海市住宅物业管理规定", NULL, "h4", one_article, 1);
    f->civil_contracts = test_add_doc(s, f->kb, "民法典_合同编", NULL, "h5", one_article, 1);
    /* Three contracts titled alike, and one whose file name is its only name. */
    test_add_doc(s, f->kb, "Acme_NDA_2019", "NON-DISCLOSURE AGREEMENT", "h6", contract, 1);
    test_add_doc(s, f->kb, "Globex Mutual NDA", "NON-DISCLOSURE AGREEMENT", "h7", contract, 1);
    test_add_doc(s, f->kb, "Initech-NDA-final", "NON-DISCLOSURE AGREEMENT", "h8", contract, 1);
    f->copacc = test_add_doc(s, f->kb, "CopAcc_NDA-and-ToP-Mentors_2.0_2017", NULL, "h9", contract, 1);
    *state = f;
    return 0;
}

static int teardown_kb(void **state) {
    fixture *f = *state;
    *state = f->s;
    free(f);
    return test_store_teardown(state);
}

static size_t titles(fixture *f, const char *q, cq_title_match *m) {
    size_t n = 99;
    cq_err err = {0};
    assert_int_equal(cq_router_titles(f->s, f->kb, q, m, 16, &n, &err), CQ_OK);
    return n;
}

static void test_titles(void **state) {
    fixture *f = *state;
    cq_title_match m[16];
    /* Both versions of a law, newest first, in one tier; category words before the name are tolerated. */
    assert_int_equal(titles(f, "民法商法公司法第十二条的内容是什么？", m), 2);
    assert_int_equal(m[0].doc_id, f->company_2018);
    assert_int_equal(m[1].doc_id, f->company_2013);
    assert_true(m[0].score == m[1].score);
    /* The full title with 《》 beats the short name: a longer match scores more. */
    assert_int_equal(titles(f, "《中华人民共和国劳动法》第三条", m), 1);
    assert_int_equal(m[0].doc_id, f->labour);
    assert_true(m[0].score >= 9);
    double full = m[0].score;
    assert_int_equal(titles(f, "劳动法第三条", m), 1);
    assert_true(m[0].score < full);
    /* A province prefix left out still finds the local regulation, as a weaker match. */
    assert_int_equal(titles(f, "住宅物业管理规定第十条", m), 1);
    assert_int_equal(m[0].doc_id, f->shanghai);
    double weak = m[0].score;
    assert_int_equal(titles(f, "上海市住宅物业管理规定第十条", m), 1);
    assert_true(m[0].score > weak + 2);
    /* Parts of a code: "民法典合同编" names the part; "民法典" alone names it weakly. */
    assert_int_equal(titles(f, "民法典合同编第十条", m), 1);
    assert_int_equal(m[0].doc_id, f->civil_contracts);
    assert_int_equal(titles(f, "民法典第十条", m), 1);
    assert_true(m[0].score == 3 - 0.5);
    /* A title several differently named documents share names none of them. */
    assert_int_equal(titles(f, "What does the NON-DISCLOSURE AGREEMENT say about return of materials?", m), 0);
    /* A Latin file name, said as words: most of its rare words must be in the question. */
    assert_int_equal(titles(f, "Does the Non-Disclosure Agreement between CopAcc and ToP Mentors expire?", m), 1);
    assert_int_equal(m[0].doc_id, f->copacc);
    assert_true(m[0].score > 1 && m[0].score <= 2);
    assert_int_equal(titles(f, "Does the agreement with Mentors expire?", m), 0); /* too little of the name */
    /* Nothing named. */
    assert_int_equal(titles(f, "加班工资怎么支付？", m), 0);
    assert_int_equal(titles(f, "", m), 0);
}

static void test_titles_cache_follows_documents(void **state) {
    fixture *f = *state;
    cq_title_match m[16];
    assert_int_equal(titles(f, "消费者权益保护法第二条", m), 0);
    int64_t doc = test_add_doc(f->s, f->kb, "消费者权益保护法(2013-10-25)", NULL, "h10", labour_law, 2);
    assert_int_equal(titles(f, "消费者权益保护法第二条", m), 1);
    assert_int_equal(m[0].doc_id, doc);
    cq_err err = {0};
    assert_int_equal(cq_store_doc_delete(f->s, doc, &err), CQ_OK);
    assert_int_equal(titles(f, "消费者权益保护法第二条", m), 0);
}

/* ---- resolving ---------------------------------------------------------------------------------------------- */

/* The clause ids the reference in q resolves to, with the titles q names. */
static size_t resolve(fixture *f, int64_t kb, const char *q, int64_t *ids, size_t max) {
    cq_clause_ref ref;
    assert_true(cq_router_parse(q, &ref));
    cq_title_match m[16];
    size_t nm = 0, n = 99;
    cq_err err = {0};
    assert_int_equal(cq_router_titles(f->s, kb, q, m, 16, &nm, &err), CQ_OK);
    assert_int_equal(cq_router_resolve(f->s, kb, m, nm, &ref, ids, max, &n, &err), CQ_OK);
    return n;
}

static void check_label(fixture *f, int64_t clause_id, int64_t doc_id, const char *label) {
    cq_clause_row row;
    cq_err err = {0};
    assert_int_equal(cq_store_clause_get(f->s, clause_id, &row, &err), CQ_OK);
    assert_int_equal(row.doc_id, doc_id);
    assert_string_equal(row.label, label);
    cq_clause_row_free(&row);
}

static void test_resolve(void **state) {
    fixture *f = *state;
    int64_t ids[8];
    /* Every version of the named law, newest first. */
    assert_int_equal(resolve(f, f->kb, "民法商法公司法第十二条的内容是什么？", ids, 8), 2);
    check_label(f, ids[0], f->company_2018, "第十二条");
    check_label(f, ids[1], f->company_2013, "第十二条");
    assert_int_equal(resolve(f, f->kb, "公司法第十二条", ids, 1), 1); /* max is kept */
    check_label(f, ids[0], f->company_2018, "第十二条");
    /* A reference the named document lacks gives nothing: not a neighbour, and not another document's clause
     * (劳动法 has the only 第三条 of the KB). */
    assert_int_equal(resolve(f, f->kb, "劳动法第九百条", ids, 8), 0);
    assert_int_equal(resolve(f, f->kb, "《中华人民共和国公司法》第三条", ids, 8), 0);
    /* No document named: a label several documents have is ambiguous; one only one document has is not. */
    assert_int_equal(resolve(f, f->kb, "第一条说了什么", ids, 8), 0);
    assert_int_equal(resolve(f, f->kb, "第三条说了什么", ids, 8), 1);
    check_label(f, ids[0], f->labour, "第三条");
    assert_int_equal(resolve(f, f->kb, "What does Section 1 say?", ids, 8), 0); /* key "1": six documents */
    /* Only the versions of one law have it (one title; after the versions analysis, which ingest runs, one version
     * group): the reference means them (retrieval puts the version meant for the day first). Three NDAs titled
     * alike and one named otherwise are not one document's versions. */
    cq_err err = {0};
    for (int analysed = 0; analysed < 2; analysed++) {
        if (analysed) assert_int_equal(cq_versions_ensure(f->s, f->kb, false, NULL, &err), CQ_OK);
        assert_int_equal(resolve(f, f->kb, "第十二条说了什么", ids, 8), 2);
        check_label(f, ids[0], f->company_2013, "第十二条");
        check_label(f, ids[1], f->company_2018, "第十二条");
    }
    assert_int_equal(resolve(f, f->kb, "第一条说了什么", ids, 8), 0); /* 公司法's versions and 劳动法 */
    assert_int_equal(resolve(f, f->kb, "What does Section 1 say?", ids, 8), 0);
}

static void test_resolve_chapters(void **state) {
    fixture *f = *state;
    int64_t ids[8];
    /* A chapter of a named document: its articles in order (the newest version's, then the older one's). */
    assert_int_equal(resolve(f, f->kb, "公司法第一章", ids, 8), 4);
    check_label(f, ids[0], f->company_2018, "第一条");
    check_label(f, ids[1], f->company_2018, "第二条");
    check_label(f, ids[2], f->company_2013, "第一条");
    assert_int_equal(resolve(f, f->kb, "公司法第一章", ids, 1), 1);
    /* Without a document, a chapter is resolved only in a KB of one document. */
    assert_int_equal(resolve(f, f->kb, "第一章讲了什么", ids, 8), 0);
    int64_t solo_kb;
    cq_err err = {0};
    assert_int_equal(cq_store_kb_ensure(f->s, "solo", &solo_kb, &err), CQ_OK);
    int64_t solo = test_add_doc(f->s, solo_kb, "物业管理条例", NULL, "s1", one_article, 1);
    assert_int_equal(resolve(f, solo_kb, "第二章讲了什么", ids, 8), 1);
    check_label(f, ids[0], solo, "第十条");
    assert_int_equal(resolve(f, solo_kb, "第九章讲了什么", ids, 8), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_chinese),
        cmocka_unit_test(test_parse_english),
        cmocka_unit_test(test_local_place),
        cmocka_unit_test_setup_teardown(test_titles, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_titles_cache_follows_documents, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_resolve, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(test_resolve_chapters, setup_kb, teardown_kb),
        cmocka_unit_test_setup_teardown(conf_router_rows, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
