/* store/keys on SQLite: the conformance bodies of tests/store/keys_bodies.h (which tests/pg/test_store_backends_pg.c
 * runs on both stores), cq_key_allows, and the job rows the ingestion queue reads (index/jobs.h). */
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

#include "index/jobs.h"
#include "index/store.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/keys_bodies.h"

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
    /* a key whose KB was deleted reaches nothing, whatever its role */
    reader.kb_gone = true;
    assert_false(cq_key_allows(&reader, CQ_ROLE_READER, "laws"));
    cq_key_info nameless = {.role = CQ_ROLE_EDITOR};
    assert_false(cq_key_allows(&nameless, CQ_ROLE_READER, ""));
    /* several KBs: each one, never a part of a name nor the list itself */
    cq_key_info two = {.role = CQ_ROLE_READER};
    strcpy(two.kb, "laws,合同");
    assert_true(cq_key_allows(&two, CQ_ROLE_READER, "laws"));
    assert_true(cq_key_allows(&two, CQ_ROLE_READER, "合同"));
    assert_false(cq_key_allows(&two, CQ_ROLE_READER, "law"));
    assert_false(cq_key_allows(&two, CQ_ROLE_READER, "laws,合同"));
    assert_false(cq_key_allows(&two, CQ_ROLE_EDITOR, "laws"));
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
    /* a reader's finer reason is the code a client is given */
    cq_err_set_reason(&why, CQ_ERR_UNSUPPORTED, "too_large", "word/document.xml would expand to 70 MB");
    assert_int_equal(cq_store_job_fail(s, job1, 0, 0, &why, &err), CQ_OK);
    assert_int_equal(cq_store_job_get(s, job1, &j, &err), CQ_OK);
    assert_string_equal(j.error_code, "too_large");
    cq_job_info_free(&j);
    cq_err_set(&why, CQ_ERR_FORMAT, "named .pdf but not a PDF"); /* cq_err_set forgets the reason */
    assert_null(why.reason);
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
        cmocka_unit_test_setup_teardown(conf_keys_create_check_revoke, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_create_validates, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_bound_to_kb_id, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_several_kbs, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_last_use_once_a_minute, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_auth_stays_required, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_keys_revoke_race, test_store_setup, test_store_teardown),
        cmocka_unit_test(test_allows),
        cmocka_unit_test_setup_teardown(test_jobs, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
