/* index/store: schema, KBs, documents, delete. The router and retrieval have their own tests (test_index_router,
 * test_index_retrieve). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "index/store.h"
#include "test_store_util.h"

static const char *const company_law[][4] = {
    {NULL, NULL, "", "中华人民共和国公司法"},
    {"第一条", "1", "第一章 总则 > 第一条", "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。"},
    {"第十二条", "12", "第一章 总则 > 第十二条",
     "第十二条 公司的经营范围由公司章程规定，并依法登记。\n公司可以修改公司章程，改变经营范围，但是应当办理变更登记。"},
    {"第二十条之一", "20-1", "第二章 有限责任公司 > 第二十条之一", "第二十条之一 股东会会议由股东按照出资比例行使表决权。"},
};
static const char *const labour_law[][4] = {
    {"第四十四条", "44", "第四章 工作时间和休息休假 > 第四十四条",
     "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：安排劳动者延长工作时间的，"
     "支付不低于工资的百分之一百五十的工资报酬。"},
    {"第三条", "3", "第一章 总则 > 第三条", "第三条 劳动者享有平等就业和选择职业的权利。"},
};

static void test_kb(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t a, b;
    assert_int_equal(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "laws", &b, &err), CQ_ERR_EXISTS);
    assert_int_equal(cq_store_kb_ensure(s, "laws", &b, &err), CQ_OK);
    assert_int_equal(a, b);
    assert_int_equal(cq_store_kb_create(s, "../etc", &b, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_kb_create(s, "", &b, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_kb_create(s, "法规库-2024", &b, &err), CQ_OK);
    assert_int_equal(cq_store_kb_find(s, "nope", &b, &err), CQ_ERR_NOT_FOUND);
    /* By id, with its counts. */
    cq_kb_info info;
    assert_int_equal(cq_store_kb_get(s, a, &info, &err), CQ_OK);
    assert_string_equal(info.name, "laws");
    assert_int_equal(info.id, a);
    assert_int_equal(info.n_documents, 0);
    assert_true(info.created_at > 0);
    assert_int_equal(cq_store_kb_get(s, a + b + 100, &info, &err), CQ_ERR_NOT_FOUND);
    cq_kb_info *list;
    size_t n;
    assert_int_equal(cq_store_kb_list(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    free(list);
}

static void test_doc_delete(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_ensure(s, "t", &kb, &err), CQ_OK);
    test_add_doc(s, kb, "公司法(2013-12-28)", "中华人民共和国公司法", "h1", company_law, 4);
    test_add_doc(s, kb, "公司法(2018-10-26)", "中华人民共和国公司法", "h2", company_law, 4);
    int64_t labour = test_add_doc(s, kb, "劳动法(2018-12-29)", "中华人民共和国劳动法", "h3", labour_law, 2);

    /* Delete: rows, FTS entries and jobs all go. */
    int64_t job;
    assert_int_equal(cq_store_job_create(s, kb, labour, &job, &err), CQ_OK);
    assert_int_equal(cq_store_doc_delete(s, labour, &err), CQ_OK);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses WHERE doc_id NOT IN (SELECT id FROM documents)"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM jobs"), 0);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM fts_kb%lld", (long long)kb);
    assert_int_equal(test_count(s, sql), test_count(s, "SELECT count(*) FROM clauses"));
    /* The originals' contents in use: any document of any KB, in any state. */
    bool in_use = false;
    assert_int_equal(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_true(in_use);
    assert_int_equal(cq_store_content_in_use(s, "h3", &in_use, &err), CQ_OK); /* deleted above */
    assert_false(in_use);
    int64_t other, failed;
    assert_int_equal(cq_store_kb_ensure(s, "other", &other, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, other, "x", "x.pdf", "pdf", "h9", 10, &failed, &err), CQ_OK);
    assert_int_equal(cq_store_doc_finish(s, failed, "failed", "not a PDF", NULL, 0, 0, 0, "", &err), CQ_OK);
    assert_int_equal(cq_store_content_in_use(s, "h9", &in_use, &err), CQ_OK);
    assert_true(in_use);
    cq_kb_info info;
    assert_int_equal(cq_store_kb_get(s, kb, &info, &err), CQ_OK);
    assert_int_equal(info.n_documents, 2);
    assert_int_equal(info.n_clauses, 8);
    /* Deleting the KB removes everything of it. */
    assert_int_equal(cq_store_kb_delete(s, kb, &err), CQ_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM documents WHERE kb_id = %lld", (long long)kb);
    assert_int_equal(test_count(s, sql), 0);
    assert_int_equal(cq_store_content_in_use(s, "h1", &in_use, &err), CQ_OK);
    assert_false(in_use);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'fts_kb%lld%%'", (long long)kb);
    assert_int_equal(test_count(s, sql), 0);
}

static void test_schema_reopen(void **state) {
    (void)state;
    /* Opening an existing database runs no migration twice and keeps data. */
    cq_store *s2;
    cq_err err = {0};
    assert_int_equal(cq_store_open(test_db_path, &s2, &err), CQ_OK);
    assert_int_equal(test_count(s2, "PRAGMA user_version"), CQ_STORE_SCHEMA_VERSION);
    cq_store_close(s2);
    cq_store *bad;
    assert_int_equal(cq_store_open("/nonexistent-dir/x.db", &bad, &err), CQ_ERR_DB);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.db"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kb, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_doc_delete, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_schema_reopen, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
