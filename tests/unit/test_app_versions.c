/* app/answer_versions.c and the JSON of versions (app/json.c): an answer for a day says which version it rests on;
 * a superseded version cited, and a clause changed recently, get a note; questions comparing versions are answered
 * from the comparison (a clause, a whole regulation, the two years named), or asked back when several regulations
 * could be meant; hits, citations and comparisons carry their versions in JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "app/answer.h"
#include "app/json.h"
#include "store/versions.h"
#include "test_store_util.h"

typedef struct {
    cq_store *s;
    int64_t kb, v1, v2;
} fixture;

static int64_t add_version(cq_store *s, int64_t kb, const char *name, const char *sha, const char *header,
                           const char *const *articles, size_t n) {
    cq_err err = {0};
    int64_t doc;
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, name, name, "md", sha, 100, &doc, &err), CQ_OK);
    cq_store_clause h = {.ord = 0, .kind = 2, .text = header};
    assert_int_equal(cq_store_clause_add(s, kb, doc, "中华人民共和国某某法", &h, NULL, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) {
        static const char *const labels[] = {"第一条", "第二条", "第三条", "第四条"};
        char key[24];
        snprintf(key, sizeof key, "%zu", i + 1);
        cq_store_clause c = {.ord = (int)i + 1, .kind = 1, .label = labels[i], .label_key = key, .path = labels[i],
                             .text = articles[i]};
        assert_int_equal(cq_store_clause_add(s, kb, doc, "中华人民共和国某某法", &c, NULL, &err), CQ_OK);
    }
    assert_int_equal(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, "中华人民共和国某某法", 0, (int)n + 1, 1, "", &err),
                     CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

static const char *const old_text[] = {
    "第一条 为了规范某某活动，制定本法。",
    "第二条 一人有限责任公司章程由股东制定。",
    "第三条 一人有限责任公司不设股东会。股东作出决定时，应当采用书面形式。",
};
static const char *const new_text[] = {
    "第一条 为了规范某某活动，制定本法。",
    "第二条 只有一个股东的有限责任公司不设股东会。股东作出决定时，应当采用书面形式，并由股东签名。",
    "第三条 某某活动应当依法登记。",
};

/* The newer version took effect `days_ago` days ago (negative: it will). */
static void make(fixture *f, int days_ago) {
    cq_err err = {0};
    assert_int_equal(cq_store_kb_create(f->s, "laws", &f->kb, &err), CQ_OK);
    char header[256];
    cq_date eff = cq_date_add_days(cq_date_today(), -days_ago), prom = cq_date_add_days(eff, -30);
    f->v1 = add_version(f->s, f->kb, "某某法(2018-10-26)", "s1", "中华人民共和国某某法\n2018年10月26日 第一次修正",
                        old_text, 3);
    snprintf(header, sizeof header, "中华人民共和国某某法\n%d年%d月%d日 第二次修订\n自%d年%d月%d日起施行", prom / 10000,
             prom / 100 % 100, prom % 100, eff / 10000, eff / 100 % 100, eff % 100);
    char name[64];
    snprintf(name, sizeof name, "某某法(%04d-%02d-%02d)", prom / 10000, prom / 100 % 100, prom % 100);
    f->v2 = add_version(f->s, f->kb, name, "s2", header, new_text, 3);
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (test_store_setup((void **)&f->s)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    void *s = f->s;
    free(f);
    return test_store_teardown(&s);
}

static void ask(fixture *f, const char *question, cq_date as_of, cq_answer *a) {
    cq_query q;
    cq_err err = {0};
    assert_int_equal(cq_query_parse(f->s, f->kb, question, &q, &err), CQ_OK);
    if (as_of) cq_query_set_as_of(&q, as_of);
    assert_int_equal(cq_answer_question(f->s, &q, NULL, a, &err), CQ_OK);
    cq_query_free(&q);
}

/* A question about a day: the version in force then, and the answer says so (and which version is in force now). */
static void test_as_of_answer(void **state) {
    fixture *f = *state;
    make(f, 400);
    cq_answer a;
    ask(f, "2020年时某某法第二条怎么规定的？", 0, &a);
    assert_false(a.abstained);
    assert_int_equal(a.citations[0].doc_id, f->v1);
    assert_non_null(a.version_notice);
    assert_non_null(strstr(a.version_notice, "依据2018年修正版（2018-10-26起施行）回答，这是2020年时有效的版本。"));
    assert_non_null(strstr(a.version_notice, "现行版本为"));
    assert_true(!strncmp(a.answer, a.version_notice, strlen(a.version_notice))); /* the answer says so */
    assert_non_null(strstr(a.answer, "一人有限责任公司章程由股东制定。"));
    assert_int_equal(a.as_of, 20201231);
    cJSON *j = cq_json_answer(&a);
    assert_string_equal(cJSON_GetObjectItem(j, "as_of")->valuestring, "2020-12-31");
    cJSON *v = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "citations"), 0), "version");
    assert_string_equal(cJSON_GetObjectItem(v, "status")->valuestring, "in_force");
    assert_string_equal(cJSON_GetObjectItem(v, "status_today")->valuestring, "superseded");
    assert_string_equal(cJSON_GetObjectItem(v, "on")->valuestring, "2020-12-31");
    assert_non_null(cJSON_GetObjectItem(v, "next"));
    cJSON_Delete(j);
    cq_answer_free(&a);
    /* the request's day */
    ask(f, "某某法第二条", 20190101, &a);
    assert_int_equal(a.citations[0].doc_id, f->v1);
    assert_non_null(strstr(a.version_notice, "这是2019-01-01时有效的版本"));
    cq_answer_free(&a);
    /* no day: the version in force today, no note (its change is more than a year old) */
    ask(f, "某某法第二条", 0, &a);
    assert_int_equal(a.citations[0].doc_id, f->v2);
    assert_null(a.version_notice);
    cq_answer_free(&a);
}

/* The clause cited changed a month ago: the answer says when and what it was. */
static void test_recent_change_note(void **state) {
    fixture *f = *state;
    make(f, 30);
    cq_answer a;
    ask(f, "某某法第二条", 0, &a);
    assert_int_equal(a.citations[0].doc_id, f->v2);
    assert_non_null(a.version_notice);
    assert_non_null(strstr(a.version_notice, "第二条于"));
    assert_non_null(strstr(a.version_notice, "修改前为2018年修正版第三条"));
    assert_null(strstr(a.answer, a.version_notice)); /* a note, not part of the answer */
    cq_answer_free(&a);
    /* a clause new in that version */
    ask(f, "某某法第三条", 0, &a);
    assert_non_null(a.version_notice);
    assert_non_null(strstr(a.version_notice, "新增的条文"));
    cq_answer_free(&a);
    /* unchanged: no note */
    ask(f, "某某法第一条", 0, &a);
    assert_null(a.version_notice);
    cq_answer_free(&a);
}

/* The newer version is not in force yet: today's answers come from the older one; citing the newer one says so. */
static void test_not_yet_note(void **state) {
    fixture *f = *state;
    make(f, -60);
    cq_answer a;
    ask(f, "某某法第二条", 0, &a);
    assert_int_equal(a.citations[0].doc_id, f->v1);
    assert_null(a.version_notice);
    cq_answer_free(&a);
    /* a clause only the newer version has */
    ask(f, "某某活动应当依法登记吗", 0, &a);
    assert_int_equal(a.citations[0].doc_id, f->v2);
    assert_non_null(a.version_notice);
    assert_non_null(strstr(a.version_notice, "尚未施行"));
    cq_answer_free(&a);
    /* the same clause in both: the version in force ranks first, even below the other's score */
    ask(f, "只有一个股东的有限责任公司不设股东会 签名", 0, &a);
    assert_int_equal(a.citations[0].doc_id, f->v1);
    cq_answer_free(&a);
}

static void test_compare_answers(void **state) {
    fixture *f = *state;
    make(f, 400);
    cq_answer a;
    /* one clause: renumbered and changed, and what became of the old clause of that number */
    ask(f, "某某法新旧版本第二条有何不同？", 0, &a);
    assert_non_null(a.compare);
    assert_non_null(strstr(a.answer, "2018年修正版（2018-10-26起施行）与"));
    assert_non_null(strstr(a.answer, "新版第二条（原第三条）有修改"));
    assert_non_null(strstr(a.answer, "旧版第二条在新版中已删除"));
    assert_int_equal(a.n_citations, 3);
    assert_int_equal(a.citations[0].doc_id, f->v2);
    assert_int_equal(a.citations[1].doc_id, f->v1);
    cJSON *j = cq_json_answer(&a);
    cJSON *c = cJSON_GetObjectItem(j, "compare");
    assert_non_null(c);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "pairs")), 2);
    assert_non_null(strstr(cJSON_GetObjectItem(c, "url")->valuestring, "?clause=2"));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "a"), "doc")->valuestring, "某某法(2018-10-26)");
    cJSON_Delete(j);
    cq_answer_free(&a);
    /* without the law's name: the KB's only regulation with versions */
    ask(f, "新旧版本第一条有何不同？", 0, &a);
    assert_non_null(a.compare);
    assert_non_null(strstr(a.answer, "第一条内容未变"));
    cq_answer_free(&a);
    /* the whole regulation */
    ask(f, "某某法修订前后有什么变化", 0, &a);
    assert_non_null(a.compare);
    assert_non_null(strstr(a.answer, "原3条，现3条"));
    j = cq_json_answer(&a);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "compare"), "pairs")), 0);
    cJSON_Delete(j);
    cq_answer_free(&a);
    /* "修改了什么" alone asks for a comparison when the regulation has versions */
    ask(f, "某某法第二条修改了什么", 0, &a);
    assert_non_null(a.compare);
    cq_answer_free(&a);
}

static void test_compare_ambiguous(void **state) {
    fixture *f = *state;
    make(f, 400);
    cq_err err = {0};
    static const char *const other[] = {"第一条 为了规范另一活动，制定本条例。"};
    int64_t o1 = add_version(f->s, f->kb, "另一条例(2010-01-01)", "s3", "2010年1月1日 通过", other, 1);
    int64_t o2 = add_version(f->s, f->kb, "另一条例(2020-01-01)", "s4", "2020年1月1日 修订", other, 1);
    (void)o1;
    (void)o2;
    (void)err;
    cq_answer a;
    ask(f, "新旧版本第一条有何不同？", 0, &a);
    assert_null(a.compare);
    assert_non_null(strstr(a.answer, "请指明要比较哪一部"));
    assert_non_null(strstr(a.answer, "某某法"));
    assert_non_null(strstr(a.answer, "另一条例"));
    cq_answer_free(&a);
    /* "修改了什么" without a regulation: an ordinary question */
    ask(f, "为了规范某某活动修改了什么", 0, &a);
    assert_null(a.compare);
    cq_answer_free(&a);
}

/* JSON: the version of a hit, and a comparison's filter. */
static void test_json(void **state) {
    fixture *f = *state;
    make(f, 400);
    cq_err err = {0};
    assert_int_equal(cq_versions_ensure(f->s, f->kb, false, NULL, &err), CQ_OK);
    cq_version_status v;
    assert_int_equal(cq_versions_status(f->s, f->v1, 0, &v, &err), CQ_OK);
    cJSON *o = cq_json_version(&v);
    assert_string_equal(cJSON_GetObjectItem(o, "status")->valuestring, "superseded");
    assert_string_equal(cJSON_GetObjectItem(o, "label")->valuestring, "2018年修正");
    assert_string_equal(cJSON_GetObjectItem(o, "effective")->valuestring, "2018-10-26");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "repealed")));
    assert_int_equal(cJSON_GetObjectItem(o, "versions")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "next"), "document_id")->valueint, (int)f->v2);
    assert_null(cJSON_GetObjectItem(o, "previous"));
    cJSON_Delete(o);
    cq_version_status unknown = {.doc_id = 5};
    assert_null(cq_json_version(&unknown));
    cq_comparison c;
    assert_int_equal(cq_compare_docs(f->s, f->v1, f->v2, &c, &err), CQ_OK);
    cq_doc_info da = {.id = f->v1, .name = "a"}, db = {.id = f->v2, .name = "b"};
    cq_compare_filter all = {0}, changed = {.changes_only = true}, key = {.clause_key = "3"};
    o = cq_json_comparison(&c, &da, &db, &v, &v, &all);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "pairs")), (int)c.al.n_pairs);
    cJSON *s = cJSON_GetObjectItem(o, "summary");
    assert_int_equal(cJSON_GetObjectItem(s, "same")->valueint, 1);
    cJSON_Delete(o);
    o = cq_json_comparison(&c, &da, &db, &v, &v, &changed);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "pairs")), (int)c.al.n_pairs - 1);
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "pairs"), 0);
    assert_non_null(cJSON_GetObjectItem(p, "kind"));
    cJSON_Delete(o);
    o = cq_json_comparison(&c, &da, &db, &v, &v, &key);
    cJSON *pairs = cJSON_GetObjectItem(o, "pairs");
    assert_true(cJSON_GetArraySize(pairs) >= 1);
    cJSON_ArrayForEach(p, pairs) {
        cJSON *d = cJSON_GetObjectItem(p, "diff");
        if (!d) continue;
        cJSON *x;
        cJSON_ArrayForEach(x, d) {
            const char *op = cJSON_GetObjectItem(x, "op")->valuestring;
            assert_true(!strcmp(op, "equal") || !strcmp(op, "removed") || !strcmp(op, "added"));
        }
    }
    cJSON_Delete(o);
    cq_comparison_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_as_of_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recent_change_note, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_yet_note, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_ambiguous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
