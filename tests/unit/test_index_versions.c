/* index/versions: days, dates written in both languages, group keys of names and titles, a document's version
 * (dates, label, repeals) from its header and last articles, the date and comparison a question asks for, and in
 * the store: analysis, groups, status on a day, the version meant for a day, repeals by another document, a
 * person's corrections, whole-KB statuses, and retrieval that puts the version meant first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "search/query.h"
#include "search/retrieve.h"
#include "store/versions.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/versions_bodies.h"

/* ---- days --------------------------------------------------------------------------------------------------- */

static void test_days(void **state) {
    (void)state;
    assert_int_equal(cq_date_make(2018, 10, 26), 20181026);
    assert_int_equal(cq_date_make(2019, 2, 29), 0);
    assert_int_equal(cq_date_make(2020, 2, 29), 20200229);
    assert_int_equal(cq_date_make(1900, 2, 29), 0);
    assert_int_equal(cq_date_make(2000, 2, 29), 20000229);
    assert_int_equal(cq_date_make(2020, 13, 1), 0);
    assert_true(cq_date_valid(20240701));
    assert_false(cq_date_valid(20240631));
    assert_false(cq_date_valid(0));
    assert_int_equal(cq_date_parse_iso("2024-07-01"), 20240701);
    assert_int_equal(cq_date_parse_iso("2024-7-1"), 0);
    assert_int_equal(cq_date_parse_iso("2024-02-30"), 0);
    assert_int_equal(cq_date_parse_iso("2024-07-01x"), 0);
    assert_int_equal(cq_date_parse_iso(NULL), 0);
    char b[11];
    assert_string_equal(cq_date_format(20181026, b), "2018-10-26");
    assert_string_equal(cq_date_format(0, b), "");
    assert_int_equal(cq_date_add_days(20200820, -1), 20200819);
    assert_int_equal(cq_date_add_days(20200301, -1), 20200229);
    assert_int_equal(cq_date_add_days(20201231, 1), 20210101);
    assert_int_equal(cq_date_add_months(20240131, 1), 20240229);
    assert_int_equal(cq_date_add_months(20241201, -12), 20231201);
    assert_int_equal(cq_date_add_months(20240115, -1), 20231215);
    assert_int_equal(cq_date_last_day(2023, 2), 28);
    assert_int_equal(cq_date_last_day(2024, 12), 31);
    assert_true(cq_date_valid(cq_date_today()));
}

/* ---- dates in text ------------------------------------------------------------------------------------------ */

typedef struct {
    cq_date d[8];
    char span[8][64];
    int n;
    const char *text;
} scanned;

static int collect(void *ctx, cq_date d, size_t start, size_t end) {
    scanned *s = ctx;
    if (s->n < 8) {
        s->d[s->n] = d;
        snprintf(s->span[s->n], sizeof s->span[0], "%.*s", (int)(end - start), s->text + start);
        s->n++;
    }
    return 0;
}

static void scan_one(const char *text, cq_date want, const char *span) {
    scanned s = {.text = text};
    cq_dates_scan(text, collect, &s);
    if (s.n != 1 || s.d[0] != want) fail_msg("'%s': %d dates, first %d, expected %d", text, s.n, s.n ? s.d[0] : 0, want);
    assert_string_equal(s.span[0], span);
}

static void scan_none(const char *text) {
    scanned s = {.text = text};
    cq_dates_scan(text, collect, &s);
    if (s.n) fail_msg("'%s': found %d", text, s.d[0]);
}

static void test_dates_in_text(void **state) {
    (void)state;
    scan_one("2018年10月26日 第十三届全国人民代表大会常务委员会第六次会议修正", 20181026, "2018年10月26日");
    scan_one("二〇一八年十月二十六日公布", 20181026, "二〇一八年十月二十六日");
    scan_one("（二○一九年十二月二十八日通过）", 20191228, "二○一九年十二月二十八日"); /* ○ typed for 〇 */
    scan_one("自2024年7月1日起施行", 20240701, "2024年7月1日");
    scan_one("于 2018 年 10 月 26 日通过", 20181026, "2018 年 10 月 26 日"); /* spaces a PDF left */
    scan_one("２０１８年１０月２６日", 20181026, "２０１８年１０月２６日"); /* full-width digits */
    scan_one("2020年8月20号之前", 20200820, "2020年8月20号");
    scan_one("发布日期：2018-10-26", 20181026, "2018-10-26");
    scan_one("2018.10.26 印发", 20181026, "2018.10.26");
    scan_one("2018/1/6", 20180106, "2018/1/6");
    scan_one("dated as of 26 October 2018, between", 20181026, "26 October 2018");
    scan_one("Effective Date: October 26, 2018.", 20181026, "October 26, 2018");
    scan_one("as amended on 1st March 2020", 20200301, "1st March 2020");
    scan_one("made on the 5th of June, 2019", 20190605, "5th of June, 2019");
    scan_one("Sept. 3, 2021", 20210903, "Sept. 3, 2021");
    /* not days */
    scan_none("2018年修正");
    scan_none("2019年12月");
    scan_none("2019年2月30日");
    scan_none("12018-10-26");
    scan_none("2018-13-01");
    scan_none("No. 2018-10-26-1");
    scan_none("Section 2018.10 of the Act");
    scan_none("October 2018");
    /* several */
    scanned s = {.text = "1993年12月29日通过 2018年10月26日修正"};
    cq_dates_scan(s.text, collect, &s);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.d[0], 19931229);
    assert_int_equal(s.d[1], 20181026);
}

/* ---- group keys --------------------------------------------------------------------------------------------- */

static void key_is(const char *name, const char *title, const char *want) {
    char k[CQ_VERSION_KEY_MAX];
    cq_version_key(name, title, k, sizeof k);
    if (strcmp(k, want)) fail_msg("key of '%s' / '%s': '%s', expected '%s'", name, title ? title : "", k, want);
}

static void same_key(const char *a, const char *b) {
    char ka[CQ_VERSION_KEY_MAX], kb[CQ_VERSION_KEY_MAX];
    cq_version_key(a, NULL, ka, sizeof ka);
    cq_version_key(b, NULL, kb, sizeof kb);
    if (strcmp(ka, kb)) fail_msg("'%s' (%s) and '%s' (%s) should be versions of one regulation", a, ka, b, kb);
}

static void other_key(const char *a, const char *b) {
    char ka[CQ_VERSION_KEY_MAX], kb[CQ_VERSION_KEY_MAX];
    cq_version_key(a, NULL, ka, sizeof ka);
    cq_version_key(b, NULL, kb, sizeof kb);
    if (!strcmp(ka, kb)) fail_msg("'%s' and '%s' share key '%s'", a, b, ka);
}

static void test_keys(void **state) {
    (void)state;
    key_is("公司法(2018-10-26)", "中华人民共和国公司法", "公司法");
    key_is("公司法", NULL, "公司法");
    same_key("公司法(2018-10-26)", "公司法(2023-12-29)");
    same_key("公司法(2018-10-26)", "中华人民共和国公司法（2023年修订）");
    same_key("公司法(2018-10-26)", "《中华人民共和国公司法》（2018年10月26日修正）");
    same_key("公司法(2018-10-26)", "公司法2018修正版");
    same_key("公司法(2018-10-26)", "20181026公司法");
    same_key("公司法(2018-10-26)", "公司法 [最新修订]");
    same_key("行政复议法实施条例（试行）", "行政复议法实施条例");
    same_key("北京市未成年人保护条例", "北京市未成年人保护条例(2023-05-26)");
    same_key("Acme_Credit_Agreement_2019", "Acme Credit Agreement (Amended and Restated 2021)");
    same_key("CopAcc_NDA-and-ToP-Mentors_2.0_2017", "CopAcc_NDA-and-ToP-Mentors_1.0_2016");
    same_key("Supply Agreement v2", "supply-agreement-v3 (final)");
    /* amendments are instruments of their own, parts of a code are different documents */
    other_key("宪法修正案（2004年）", "宪法修正案（2018年）");
    other_key("刑法修正案（十一）", "刑法修正案（十二）(2023-12-29)");
    other_key("刑法修正案（十二）(2023-12-29)", "刑法");
    other_key("全国人民代表大会常务委员会关于修改《中华人民共和国公司法》的决定", "公司法");
    other_key("First Amendment to Credit Agreement", "Credit Agreement");
    other_key("民法典_合同编", "民法典_物权编");
    other_key("最高人民法院关于适用《民法典》物权编的解释（一）(2020-12-29)", "最高人民法院关于适用《民法典》物权编的解释（二）");
    other_key("上海市住宅物业管理规定", "北京市住宅物业管理规定");
    key_is("宪法修正案（2004年）", NULL, "宪法修正案2004年");
    /* a name that says nothing of its content: the title names the regulation, if it names one */
    key_is("scan0001", "中华人民共和国公司法", "公司法");
    key_is("文档1", "中华人民共和国慈善法", "慈善法");
    key_is("download (3)", "劳动合同", "download3");
    key_is("合同范本", "中华人民共和国公司法", "合同范本");
    char k[CQ_VERSION_KEY_MAX];
    cq_version_title_key("《中华人民共和国民事诉讼法（试行）》", k, sizeof k);
    assert_string_equal(k, "民事诉讼法");
    cq_version_title_key("", k, sizeof k);
    assert_string_equal(k, "");
}

/* ---- a document's version ----------------------------------------------------------------------------------- */

static const char gs2018_header[] =
    "中华人民共和国公司法\n"
    "1993年12月29日 第八届全国人民代表大会常务委员会第五次会议通过\n"
    "1999年12月25日 第九届全国人民代表大会常务委员会第十三次会议《关于修改〈中华人民共和国公司法〉的决定》第一次修正\n"
    "2005年10月27日 第十届全国人民代表大会常务委员会第十八次会议修订\n"
    "2018年10月26日 第十三届全国人民代表大会常务委员会第六次会议《关于修改〈中华人民共和国公司法〉的决定》第四次修正\n";

static void test_meta(void **state) {
    (void)state;
    cq_version_meta m;
    /* an amendment takes effect when promulgated: the last article still names the first version's day */
    cq_version_meta_extract("公司法(2018-10-26)", "中华人民共和国公司法", gs2018_header,
                            "第二百一十八条 本法自2006年1月1日起施行。\n", &m);
    assert_string_equal(m.key, "公司法");
    assert_int_equal(m.promulgated, 20181026);
    assert_int_equal(m.effective, 20181026);
    assert_int_equal(m.repealed, 0);
    assert_string_equal(m.label, "2018年修正");
    /* a revision with a later day of effect */
    cq_version_meta_extract("公司法(2023-12-29)", "中华人民共和国公司法",
                            "2018年10月26日 …决定》第四次修正\n2023年12月29日 第十四届全国人民代表大会常务委员会第七次会议第二次修订\n",
                            "第二百六十六条 本法自2024年7月1日起施行。\n本法施行前已登记设立的公司…\n", &m);
    assert_int_equal(m.promulgated, 20231229);
    assert_int_equal(m.effective, 20240701);
    assert_string_equal(m.label, "2023年修订");
    /* a first version; no date in the name */
    cq_version_meta_extract("慈善法", NULL, "中华人民共和国慈善法\n2016年3月16日 第十二届全国人民代表大会第四次会议通过\n",
                            "第一百一十二条 本法自2016年9月1日起施行。", &m);
    assert_int_equal(m.promulgated, 20160316);
    assert_int_equal(m.effective, 20160901);
    assert_string_equal(m.label, "2016年通过");
    /* the official bracket form, 施行 in the header */
    cq_version_meta_extract("某某条例", NULL,
                            "（2019年12月28日某某省第十三届人民代表大会常务委员会第十五次会议通过　自2020年6月1日起施行）",
                            NULL, &m);
    assert_int_equal(m.promulgated, 20191228);
    assert_int_equal(m.effective, 20200601);
    /* 自公布之日起施行, and what it repeals */
    cq_version_meta_extract("民法典", NULL, "2020年5月28日第十三届全国人民代表大会第三次会议通过",
                            "第一千二百六十条 本法自2021年1月1日起施行。《中华人民共和国婚姻法》、《中华人民共和国继承法》、"
                            "《中华人民共和国合同法》同时废止。\n",
                            &m);
    assert_int_equal(m.effective, 20210101);
    assert_int_equal(m.n_repeals, 3);
    assert_string_equal(m.repeals[0], "婚姻法");
    assert_string_equal(m.repeals[2], "合同法");
    /* its own older text (试行) is not a repeal; an article of another law is not a repeal of that law */
    cq_version_meta_extract("民事诉讼法(2021-12-24)", NULL, NULL,
                            "第二百九十一条 本法自公布之日起施行，《中华人民共和国民事诉讼法（试行）》同时废止。\n"
                            "《中华人民共和国某某法》第十条废止。",
                            &m);
    assert_int_equal(m.promulgated, 20211224);
    assert_int_equal(m.effective, 20211224);
    assert_int_equal(m.n_repeals, 0);
    /* repealed, by its own words */
    cq_version_meta_extract("某某办法（已废止）", NULL, "2001年3月1日发布\n2015年6月30日 国务院令第六百五十九号废止", NULL, &m);
    assert_int_equal(m.promulgated, 20010301);
    assert_int_equal(m.repealed, 20150630);
    assert_string_equal(m.key, "某某办法");
    /* English */
    cq_version_meta_extract("Acme Credit Agreement (Amended and Restated)", "AMENDED AND RESTATED CREDIT AGREEMENT",
                            "AMENDED AND RESTATED CREDIT AGREEMENT dated as of March 1, 2020, effective as of April 1, "
                            "2020, among Acme Corp. …",
                            NULL, &m);
    assert_int_equal(m.promulgated, 20200301);
    assert_int_equal(m.effective, 20200401);
    assert_string_equal(m.label, "Amended and Restated 2020");
    /* nothing known */
    cq_version_meta_extract("notes", NULL, "no dates here", "", &m);
    assert_int_equal(m.promulgated, 0);
    assert_int_equal(m.effective, 0);
    assert_string_equal(m.label, "");
}

/* ---- questions ---------------------------------------------------------------------------------------------- */

static void asks(const char *q, cq_date on, cq_date first, int version_year, const char *span) {
    cq_question_date d;
    if (!cq_question_date_find(q, &d)) fail_msg("'%s': no date found", q);
    if (d.on != on || d.first != first || d.version_year != version_year)
        fail_msg("'%s': on %d first %d year %d, expected %d %d %d", q, d.on, d.first, d.version_year, on, first,
                 version_year);
    if (d.end - d.start != strlen(span) || memcmp(q + d.start, span, strlen(span)))
        fail_msg("'%s': span '%.*s', expected '%s'", q, (int)(d.end - d.start), q + d.start, span);
}

static void asks_nothing(const char *q) {
    cq_question_date d;
    if (cq_question_date_find(q, &d)) fail_msg("'%s': found a date (%d)", q, d.on);
}

static void test_question_dates(void **state) {
    (void)state;
    asks("2020年时该条怎么规定的？", 20201231, 20200101, 0, "2020年时");
    asks("2020年时公司法第六十条怎么规定的？", 20201231, 20200101, 0, "2020年时");
    asks("2019年12月的规定是什么", 20191231, 20191201, 0, "2019年12月的规定");
    asks("截至2021年3月1日，公司法第六十条", 20210301, 20210301, 0, "2021年3月1日");
    asks("在2020年8月20号之前的借款适用合同成立时一年期贷款市场报价利率四倍吗？", 20200819, 20200819, 0,
         "2020年8月20号之前");
    asks("2024年7月1日起公司法第六十条", 20240701, 20240701, 0, "2024年7月1日起");
    asks("2018年修正的公司法第六十条", 20181231, 20180101, 2018, "2018年修正的");
    asks("公司法2018年版第六十条", 20181231, 20180101, 2018, "2018年版");
    asks("二〇一九年时的规定", 20191231, 20190101, 0, "二〇一九年时");
    asks("What did Article 5 say as of 1 March 2020?", 20200301, 20200301, 0, "as of 1 March 2020");
    asks("What did Article 5 say in 2019?", 20191231, 20190101, 0, "in 2019");
    asks("the rule before 2020-08-20", 20200819, 20200819, 0, "before 2020-08-20");
    asks("Section 7.2 as at December 2019", 20191231, 20191201, 0, "as at December 2019");
    asks("What does the 2018 version of Article 5 say?", 20181231, 20180101, 2018, "2018");
    /* a year in a name is not a date asked about */
    asks_nothing("宪法修正案2004年第二十三条的内容是什么？");
    asks_nothing("宪法修正案（2004年）第二十三条");
    asks_nothing("公司法(2018-10-26)第六十条");
    asks_nothing("民法商法公司法第六十条的内容是什么？");
    asks_nothing("员工加班费怎么算？");
    asks_nothing("What does Section 2019 say?");
    asks_nothing("试用期最长多长时间？");
}

static void test_comparison_questions(void **state) {
    (void)state;
    assert_int_equal(cq_question_is_comparison("新旧版本第六十条有何不同？"), 2);
    assert_int_equal(cq_question_is_comparison("公司法修订前后第六十条有什么变化"), 2);
    assert_int_equal(cq_question_is_comparison("2018年和2023年的公司法有什么区别"), 2);
    assert_int_equal(cq_question_is_comparison("What is the difference between the old and new versions of Article 5?"), 2);
    assert_int_equal(cq_question_is_comparison("公司法第六十条修改了什么"), 1);
    assert_int_equal(cq_question_is_comparison("What changed in Article 5?"), 1);
    assert_int_equal(cq_question_is_comparison("第二条和第三条有什么区别"), 0);
    assert_int_equal(cq_question_is_comparison("公司章程如何修改？"), 0);
    assert_int_equal(cq_question_is_comparison("劳动法第四十四条规定了什么？"), 0);
    int years[4];
    assert_int_equal(cq_question_years("2018年和2023年的公司法", years, 4), 2);
    assert_int_equal(years[0], 2018);
    assert_int_equal(years[1], 2023);
}

/* ---- in the store ------------------------------------------------------------------------------------------- */

typedef conf_versions fixture;

static int setup(void **state) {
    cq_store *s;
    if (test_store_setup((void **)&s)) return -1;
    fixture *f = calloc(1, sizeof *f);
    conf_versions_make(s, f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    void *s = f->s;
    free(f);
    return test_store_teardown(&s);
}

/* Retrieval puts the version meant for the day first (the router too, with k = 1), keeps the other after it, and
 * says each hit's version. */
static void test_retrieve_as_of(void **state) {
    fixture *f = *state;
    cq_err err = {0};
    cq_query q;
    cq_hits h;
    /* no date: the version in force today, first (the documents are analysed on the way) */
    assert_int_equal(cq_query_parse(f->s, f->kb, "公司法第三条", &q, &err), CQ_OK);
    assert_int_equal(cq_retrieve(f->s, &q, &(cq_retrieve_options){.k = 2, .modes = CQ_RETRIEVE_ROUTER}, &h, &err), CQ_OK);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.hits[0].doc_id, f->v2);
    assert_int_equal(h.hits[1].doc_id, f->v1);
    assert_int_equal(h.hits[0].version.state, CQ_VERSION_IN_FORCE);
    assert_int_equal(h.hits[1].version.state, CQ_VERSION_SUPERSEDED);
    cq_hits_free(&h);
    cq_query_free(&q);
    /* a date in the question */
    assert_int_equal(cq_query_parse(f->s, f->kb, "2020年时公司法第三条怎么规定的？", &q, &err), CQ_OK);
    assert_int_equal(q.as_of, 20201231);
    assert_int_equal(cq_retrieve(f->s, &q, &(cq_retrieve_options){.k = 1}, &h, &err), CQ_OK);
    assert_int_equal(h.n, 1);
    assert_int_equal(h.hits[0].doc_id, f->v1);
    assert_int_equal(h.hits[0].version.state, CQ_VERSION_IN_FORCE);
    assert_int_equal(h.hits[0].version.on, 20201231);
    assert_int_equal(h.hits[0].version.state_today, CQ_VERSION_SUPERSEDED);
    cq_hits_free(&h);
    cq_query_free(&q);
    /* a request's day overrides; BM25 hits of the two versions: the one meant first */
    assert_int_equal(cq_query_parse(f->s, f->kb, "有限责任公司不设股东会 书面形式", &q, &err), CQ_OK);
    cq_query_set_as_of(&q, 20190601);
    assert_int_equal(cq_retrieve(f->s, &q, &(cq_retrieve_options){.k = 2}, &h, &err), CQ_OK);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.hits[0].doc_id, f->v1);
    assert_int_equal(h.hits[1].doc_id, f->v2);
    cq_hits_free(&h);
    cq_query_set_as_of(&q, 20250101);
    assert_int_equal(cq_retrieve(f->s, &q, &(cq_retrieve_options){.k = 2}, &h, &err), CQ_OK);
    assert_int_equal(h.hits[0].doc_id, f->v2);
    cq_hits_free(&h);
    cq_query_free(&q);
    /* "2018年修正的" names that year's version */
    assert_int_equal(cq_query_parse(f->s, f->kb, "2018年修正的公司法第三条", &q, &err), CQ_OK);
    assert_int_equal(q.version_year, 2018);
    assert_int_equal(cq_retrieve(f->s, &q, &(cq_retrieve_options){.k = 1}, &h, &err), CQ_OK);
    assert_int_equal(h.hits[0].doc_id, f->v1);
    cq_hits_free(&h);
    cq_query_free(&q);
}

/* The date a question asks about says when, not what: its words are not BM25 terms. */
static void test_query_as_of_terms(void **state) {
    (void)state;
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(NULL, 0, "2019年12月的规定中加班费怎么算", &q, &err), CQ_OK);
    assert_int_equal(q.as_of, 20191231);
    for (size_t i = 0; i < q.n_terms; i++) {
        assert_null(strstr(q.terms[i], "2019"));
        assert_null(strstr(q.terms[i], "月的"));
    }
    bool found = false;
    for (size_t i = 0; i < q.n_terms; i++) found |= !strcmp(q.terms[i], "加班");
    assert_true(found);
    assert_int_equal(q.compare, 0);
    cq_query_free(&q);
    assert_int_equal(cq_query_parse(NULL, 0, "新旧版本第六十条有何不同？", &q, &err), CQ_OK);
    assert_int_equal(q.compare, 2);
    assert_int_equal(q.as_of, 0);
    cq_query_free(&q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_days),
        cmocka_unit_test(test_dates_in_text),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_question_dates),
        cmocka_unit_test(test_comparison_questions),
        cmocka_unit_test(test_query_as_of_terms),
        cmocka_unit_test_setup_teardown(conf_versions_groups, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_versions_repeal_and_corrections, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_versions_from_clauses, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_retrieve_as_of, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
