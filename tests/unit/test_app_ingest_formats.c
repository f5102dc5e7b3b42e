/* app/ingest with Word and HTML files: a good one of each is stored without pages; bad ones (a truncated Word file,
 * a zip bomb, an XML entity bomb, HTML nested too deep, a page without visible text) fail with their reason,
 * leave a failed document and nothing else (no clauses, no FTS rows, the database intact), and never disturb the
 * documents already there. The scanned-PDF path (OCR) has its own tests (test_reader_ocr.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zip.h>

#include "app/ingest.h"
#include "core/strbuf.h"
#include "test_store_util.h"

#define W_NS "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\""

static char dir[96];

static void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A .docx at path whose word/document.xml is xml (xml_len bytes, or strlen). */
static void write_docx(const char *path, const char *xml, size_t xml_len) {
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    assert_non_null(z);
    zip_source_t *src = zip_source_buffer(z, xml, xml_len ? xml_len : strlen(xml), 0);
    assert_true(zip_file_add(z, "word/document.xml", src, 0) >= 0);
    assert_int_equal(zip_close(z), 0);
}

static const char *const GOOD_DOCX =
    "<w:document " W_NS "><w:body>"
    "<w:p><w:pPr><w:outlineLvl w:val=\"0\"/></w:pPr><w:r><w:t>第一章 总则</w:t></w:r></w:p>"
    "<w:p><w:r><w:t>第一条 为了规范档案管理，制定本办法。</w:t></w:r></w:p>"
    "<w:p><w:r><w:t>第二条 本办法自公布之日起施行。</w:t></w:r></w:p>"
    "</w:body></w:document>";

static const char *const GOOD_HTML =
    "<html><head><meta charset=\"utf-8\"><title>通知</title></head><body><nav>首页</nav>"
    "<h1>关于档案工作的通知</h1><p>第一条 各单位应当做好档案工作。</p><p>第二条 本通知自发布之日起施行。</p>"
    "</body></html>";

static cq_status ingest(cq_store *s, int64_t kb, const char *path, cq_ingest_result *res, cq_err *err) {
    cq_err_clear(err);
    return cq_ingest_file(s, dir, kb, path, NULL, res, err);
}

/* Nothing half there: failed documents without clauses, FTS rows = clauses, the database intact. */
static void check_consistent(cq_store *s, int64_t ready_docs) {
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id "
                                   "WHERE d.status != 'ready'"), 0);
    assert_int_equal(test_count(s, "SELECT (SELECT count(*) FROM fts_kb1_docsize) = (SELECT count(*) FROM clauses)"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM documents WHERE status = 'ready'"), ready_docs);
    assert_int_equal(test_count(s, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'"), 0);
}

/* name: what a client is told (cq_err_name: the code's name, or the reader's finer reason) */
static void expect_failure(cq_store *s, int64_t kb, const char *path, cq_status code, const char *name,
                           const char *message, int64_t ready_docs) {
    cq_ingest_result res;
    cq_err err = {0};
    cq_status rc = ingest(s, kb, path, &res, &err);
    if (rc != code || strcmp(cq_err_name(&err), name) || !strstr(err.msg, message))
        fail_msg("%s: expected %s (%s) \"%s\", got %s (%s): %s", path, cq_status_name(code), name, message,
                 cq_status_name(rc), cq_err_name(&err), err.msg);
    check_consistent(s, ready_docs);
}

static void test_word_and_html(void **state) {
    cq_store *s = *state;
    snprintf(dir, sizeof dir, "/tmp/cq_ingest_formats_%d", (int)getpid());
    char path[160];
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "k", &kb, &err), CQ_OK);
    assert_int_equal(kb, 1);
    assert_int_equal(system("mkdir -p /tmp/cq_ingest_formats_in"), 0);

    /* good ones */
    cq_ingest_result res;
    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/办法.docx");
    write_docx(path, GOOD_DOCX, 0);
    cq_status rc = ingest(s, kb, path, &res, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(res.format, "docx");
    assert_int_equal(res.n_pages, 0);
    assert_int_equal(res.n_clauses, 2);
    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/通知.html");
    write_file(path, GOOD_HTML, strlen(GOOD_HTML));
    rc = ingest(s, kb, path, &res, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(res.format, "html");
    assert_int_equal(res.n_clauses, 3); /* the title line, as a preamble, and two articles */
    check_consistent(s, 2);
    /* stored without pages: no page rows, no boxes, clauses without page numbers; the title the text shows */
    assert_int_equal(test_count(s, "SELECT count(*) FROM pages"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses WHERE page_first != 0"), 0);
    assert_int_equal(test_count(s, "SELECT count(*) FROM documents WHERE format = 'html' AND title = '关于档案工作的通知'"), 1);
    assert_int_equal(test_count(s, "SELECT count(*) FROM clauses WHERE path = '第一章 总则 > 第二条'"), 1);

    /* bad ones */
    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/truncated.docx");
    write_docx(path, GOOD_DOCX, 0);
    FILE *f = fopen(path, "rb");
    char head[200];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    write_file(path, head, n / 2);
    expect_failure(s, kb, path, CQ_ERR_FORMAT, "bad_format", "truncated.docx: damaged or truncated Word file", 2);

    size_t big = 70u << 20;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/bomb.docx");
    write_docx(path, huge, big);
    free(huge);
    expect_failure(s, kb, path, CQ_ERR_UNSUPPORTED, "too_large", "bomb.docx: word/document.xml would expand to 70 MB", 2);

    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/entities.docx");
    write_docx(path,
               "<!DOCTYPE d [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]><w:document " W_NS
               "><w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>",
               0);
    expect_failure(s, kb, path, CQ_ERR_FORMAT, "bad_format", "entities.docx: word/document.xml declares a DTD", 2);

    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/deep.html");
    cq_strbuf b = {0};
    for (int i = 0; i < 20000; i++) cq_strbuf_puts(&b, "<span>");
    cq_strbuf_puts(&b, "第一条 深。");
    write_file(path, b.data, b.len);
    cq_strbuf_free(&b);
    expect_failure(s, kb, path, CQ_ERR_FORMAT, "too_deep", "deep.html: the HTML nests elements more than 1000 deep", 2);

    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/scripts.htm");
    write_file(path, "<script>alert(1)</script><style>p{}</style>", 43);
    expect_failure(s, kb, path, CQ_ERR_EMPTY, "empty", "scripts.htm: the HTML page has no visible text", 2);

    snprintf(path, sizeof path, "/tmp/cq_ingest_formats_in/renamed.docx");
    write_file(path, GOOD_HTML, strlen(GOOD_HTML));
    expect_failure(s, kb, path, CQ_ERR_FORMAT, "bad_format", "named .docx but not a Word (DOCX) file", 2);

    /* each failure is listed as a failed document with its reason */
    assert_int_equal(test_count(s, "SELECT count(*) FROM documents WHERE status = 'failed' AND error != ''"), 5);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s /tmp/cq_ingest_formats_in", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_word_and_html, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
