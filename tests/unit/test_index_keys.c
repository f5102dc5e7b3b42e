/* index/keys and index/jobs: API keys (hashed, roles, revocation) and the job rows the ingestion queue reads. */
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

#include "core/sha256.h"
#include "index/jobs.h"
#include "index/keys.h"
#include "index/store.h"
#include "test_store_util.h"

static void test_create_check_revoke(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES];
    cq_key_info k, got;
    int64_t n;
    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(cq_store_key_create(s, "ops", CQ_ROLE_ADMIN, NULL, secret, &k, &err), CQ_OK);
    assert_int_equal(strlen(secret), CQ_KEY_SECRET_BYTES - 1);
    assert_memory_equal(secret, "cq_", 3);
    assert_memory_equal(k.prefix, secret, strlen(k.prefix));
    assert_int_equal(k.role, CQ_ROLE_ADMIN);
    assert_string_equal(k.kb, "");

    /* only the hash is stored */
    char hash[65];
    cq_sha256_hex(secret, strlen(secret), hash);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(s), "SELECT hash FROM api_keys", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), hash);
    sqlite3_finalize(st);

    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_OK);
    assert_int_equal(got.id, k.id);
    assert_true(got.last_used_at > 0);
    char wrong[CQ_KEY_SECRET_BYTES];
    memcpy(wrong, secret, sizeof wrong);
    wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
    assert_int_equal(cq_store_key_check(s, wrong, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, "cq_short", &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, "", &got, &err), CQ_ERR_NOT_FOUND);

    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(cq_store_key_revoke(s, k.id, &err), CQ_OK);
    assert_int_equal(cq_store_key_revoke(s, k.id, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_key_revoke(s, 999, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_check(s, secret, &got, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_key_count_active(s, &n, &err), CQ_OK);
    assert_int_equal(n, 0);

    cq_key_info *list;
    size_t count;
    assert_int_equal(cq_store_key_list(s, &list, &count, &err), CQ_OK);
    assert_int_equal(count, 1);
    assert_true(list[0].revoked_at > 0);
    free(list);
}

static void test_create_validates(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    char secret[CQ_KEY_SECRET_BYTES], other[CQ_KEY_SECRET_BYTES];
    assert_int_equal(cq_store_key_create(s, "x", CQ_ROLE_NONE, NULL, secret, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_key_create(s, "x", CQ_ROLE_ADMIN, "laws", secret, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_key_create(s, "x", CQ_ROLE_READER, NULL, secret, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_key_create(s, "x", CQ_ROLE_EDITOR, "../etc", secret, NULL, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_key_create(s, NULL, CQ_ROLE_READER, "*", secret, NULL, &err), CQ_OK);
    assert_int_equal(cq_store_key_create(s, NULL, CQ_ROLE_READER, "*", other, NULL, &err), CQ_OK);
    assert_string_not_equal(secret, other);
    assert_int_equal(cq_key_role_parse("editor"), CQ_ROLE_EDITOR);
    assert_int_equal(cq_key_role_parse("root"), CQ_ROLE_NONE);
    assert_string_equal(cq_key_role_name(CQ_ROLE_READER), "reader");
}

static void test_allows(void **state) {
    (void)state;
    cq_key_info admin = {.role = CQ_ROLE_ADMIN}, editor = {.role = CQ_ROLE_EDITOR}, reader = {.role = CQ_ROLE_READER},
                every = {.role = CQ_ROLE_READER};
    strcpy(editor.kb, "laws");
    strcpy(reader.kb, "laws");
    strcpy(every.kb, "*");
    assert_true(cq_key_allows(&admin, CQ_ROLE_ADMIN, NULL));
    assert_true(cq_key_allows(&admin, CQ_ROLE_EDITOR, "anything"));
    assert_true(cq_key_allows(&editor, CQ_ROLE_EDITOR, "laws"));
    assert_true(cq_key_allows(&editor, CQ_ROLE_READER, "laws"));
    assert_false(cq_key_allows(&editor, CQ_ROLE_EDITOR, "contracts"));
    assert_false(cq_key_allows(&editor, CQ_ROLE_ADMIN, NULL));
    assert_false(cq_key_allows(&editor, CQ_ROLE_READER, NULL));
    assert_true(cq_key_allows(&reader, CQ_ROLE_READER, "laws"));
    assert_false(cq_key_allows(&reader, CQ_ROLE_EDITOR, "laws"));
    assert_true(cq_key_allows(&every, CQ_ROLE_READER, "contracts"));
    assert_false(cq_key_allows(&every, CQ_ROLE_EDITOR, "contracts"));
    assert_false(cq_key_allows(NULL, CQ_ROLE_READER, "laws"));
}

static void test_jobs(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb, job1, job2;
    assert_int_equal(cq_store_kb_create(s, "laws", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_job_create(s, kb, 0, &job1, &err), CQ_OK);
    assert_int_equal(cq_store_job_set_upload(s, job1, "a.pdf", "/data/uploads/job-1.pdf", 1234, 1, &err), CQ_OK);
    assert_int_equal(cq_store_job_create(s, kb, 0, &job2, &err), CQ_OK);
    assert_int_equal(cq_store_job_update(s, job2, "running", 3, 9, NULL, &err), CQ_OK);

    cq_job_info j;
    assert_int_equal(cq_store_job_get(s, job1, &j, &err), CQ_OK);
    assert_string_equal(j.kb, "laws");
    assert_string_equal(j.state, "queued");
    assert_string_equal(j.filename, "a.pdf");
    assert_string_equal(j.upload_path, "/data/uploads/job-1.pdf");
    assert_int_equal(j.size_bytes, 1234);
    assert_int_equal(j.replace, 1);
    assert_int_equal(j.doc_id, 0);
    cq_job_info_free(&j);
    assert_int_equal(cq_store_job_get(s, 999, &j, &err), CQ_ERR_NOT_FOUND);

    cq_job_info *list;
    size_t n;
    assert_int_equal(cq_store_job_unfinished(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, job1); /* oldest first */
    assert_int_equal(list[1].done, 3);
    assert_int_equal(list[1].total, 9);
    cq_job_info_free_array(list, n);

    assert_int_equal(cq_store_job_update(s, job1, "failed", 0, 0, "not a PDF", &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(s, job1, 0, &err), CQ_OK);
    assert_int_equal(cq_store_job_get(s, job1, &j, &err), CQ_OK);
    assert_null(j.upload_path);
    assert_string_equal(j.error, "not a PDF");
    assert_string_equal(j.error_code, ""); /* failed without a code */
    cq_job_info_free(&j);
    cq_err why = {0};
    cq_err_set(&why, CQ_ERR_FORMAT, "named .pdf but not a PDF");
    assert_int_equal(cq_store_job_fail(s, job1, 0, 0, &why, &err), CQ_OK);
    assert_int_equal(cq_store_job_get(s, job1, &j, &err), CQ_OK);
    assert_string_equal(j.state, "failed");
    assert_string_equal(j.error, "named .pdf but not a PDF");
    assert_string_equal(j.error_code, "bad_format");
    cq_job_info_free(&j);
    assert_int_equal(cq_store_job_unfinished(s, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    cq_job_info_free_array(list, n);
    assert_int_equal(cq_store_job_list(s, kb, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, job2); /* newest first */
    cq_job_info_free_array(list, n);
    assert_int_equal(cq_store_job_list(s, 0, 1, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    cq_job_info_free_array(list, n);

    /* a job with its document goes when the document goes */
    int64_t doc;
    assert_int_equal(cq_store_doc_create(s, kb, "a", "a.pdf", "pdf", "abc", 10, &doc, &err), CQ_OK);
    cq_store_page p = {1, 595, 842, 100, 0.5, "no text layer"};
    assert_int_equal(cq_store_page_add(s, doc, &p, &err), CQ_OK);
    assert_int_equal(cq_store_job_finish(s, job2, doc, &err), CQ_OK);
    cq_page_info *pages;
    assert_int_equal(cq_store_page_list(s, doc, &pages, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_string_equal(pages[0].quality_reason, "no text layer");
    free(pages);
    assert_int_equal(cq_store_doc_delete(s, doc, &err), CQ_OK);
    assert_int_equal(cq_store_job_get(s, job2, &j, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_store_page_list(s, doc, &pages, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(pages);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_check_revoke, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(test_create_validates, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_allows),
        cmocka_unit_test_setup_teardown(test_jobs, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
