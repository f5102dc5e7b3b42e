/* app/ingest with the upload's record (cq_upload, issue 28 item 4): what the service found out when the upload came
 * (its format, hash, OCR mode, size and name) is what the ingest uses; nothing is read back from the spooled file's
 * name (an upload waits under a name of the server's: no extension, nothing of the client's), and the client's name
 * may hold anything, '%' included. A record whose size is not the file's is not trusted: the ingest finds out
 * itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/ingest.h"
#include "core/fileio.h"
#include "core/sha256.h"
#include "test_store_util.h"

static const char *const LAW = "# 通知\n\n第一条 各单位应当做好档案工作。\n\n"
                                "第二条 本通知自发布之日起施行。\n";

static char dir[96], spool[160];
static int64_t kb;

static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The record of data as the service makes it (format by name, the content's hash). */
static cq_upload record(const char *name, const char *format, const void *data, size_t len, cq_reader_ocr ocr) {
    cq_upload up = {.format = cq_reader_format_named(format), .ocr = ocr, .size = (int64_t)len};
    assert_non_null(up.format);
    snprintf(up.name, sizeof up.name, "%s", name);
    cq_sha256_hex(data, len, up.sha256);
    return up;
}

static char *doc_name(cq_store *s, int64_t doc_id) {
    cq_doc_info d;
    cq_err err = {0};
    assert_int_equal(cq_store_doc_get(s, doc_id, &d, &err), CQ_OK);
    char *name = strdup(d.name);
    cq_doc_info_free(&d);
    return name;
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/cq_upload_record_%d", (int)getpid());
    char cmd[200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/spool", dir);
    assert_int_equal(system(cmd), 0);
    /* the server's own name for a waiting upload: it says nothing of the file */
    snprintf(spool, sizeof spool, "%s/spool/upload-Zq81xT", dir);
    write_file(spool, LAW, strlen(LAW));
    if (test_store_setup(state)) return -1;
    cq_err err = {0};
    return cq_store_kb_create(*state, "k", &kb, &err) ? -1 : 0;
}

static int teardown(void **state) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return test_store_teardown(state);
}

static void test_record_is_what_ingest_uses(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    /* a name a format string or a file-name parser would trip on */
    const char *odd = "50% off %s %n %%d 通知.md";
    cq_upload up = record(odd, "md", LAW, strlen(LAW), CQ_OCR_AUTO);
    cq_ingest_options opt = {.upload = &up};
    cq_ingest_result res;
    if (cq_ingest_file(s, dir, kb, spool, &opt, &res, &err)) fail_msg("%s", err.msg);
    assert_string_equal(res.format, "md");
    assert_string_equal(res.sha256, up.sha256);
    assert_true(res.n_clauses >= 2);
    char *name = doc_name(s, res.doc_id);
    assert_string_equal(name, "50% off %s %n %%d 通知");
    free(name);

    /* the same bytes again under another odd name: a duplicate, found by the record's hash */
    cq_upload again = record("100%.md", "md", LAW, strlen(LAW), CQ_OCR_AUTO);
    opt.upload = &again;
    assert_int_equal(cq_ingest_file(s, dir, kb, spool, &opt, &res, &err), CQ_OK);
    assert_true(res.duplicate);
}

/* The hash is the record's, not computed again; a record whose size is not the file's is not trusted. */
static void test_hash_taken_once(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    cq_upload up = record("a.md", "md", LAW, strlen(LAW), CQ_OCR_AUTO);
    memset(up.sha256, 'e', 64); /* what the service said, which the ingest does not work out again */
    cq_ingest_options opt = {.upload = &up};
    cq_ingest_result res;
    if (cq_ingest_file(s, dir, kb, spool, &opt, &res, &err)) fail_msg("%s", err.msg);
    assert_string_equal(res.sha256, up.sha256);

    cq_upload stale = record("b.md", "md", LAW, strlen(LAW), CQ_OCR_AUTO);
    memset(stale.sha256, 'f', 64);
    stale.size++;
    const char *other = "第一条 另一份文件。\n";
    write_file(spool, other, strlen(other));
    opt.upload = &stale;
    if (cq_ingest_file(s, dir, kb, spool, &opt, &res, &err)) fail_msg("%s", err.msg);
    char sha[65];
    cq_sha256_hex(other, strlen(other), sha);
    assert_string_equal(res.sha256, sha);
}

/* The OCR mode is the record's: a scan whose upload asked for no OCR fails as such, whatever the options say. */
static void test_ocr_mode_is_the_records(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/pdf/scanned.pdf", src ? src : ".");
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(cq_file_read(path, 64u << 20, &data, &len, &err), CQ_OK);
    write_file(spool, data, len);
    cq_upload up = record("扫描件 %s.pdf", "pdf", data, len, CQ_OCR_OFF);
    free(data);
    cq_ingest_options opt = {.upload = &up, .ocr = CQ_OCR_FORCE};
    cq_ingest_result res;
    assert_int_not_equal(cq_ingest_file(s, dir, kb, spool, &opt, &res, &err), CQ_OK);
    assert_string_equal(cq_err_name(&err), "ocr_off");
    assert_non_null(strstr(err.msg, "扫描件 %s.pdf: ")); /* the message names the file as uploaded */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_record_is_what_ingest_uses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_taken_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ocr_mode_is_the_records, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
