/* app/ingest: the page progress the job queue shows (cq_ingest_options.progress). */
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
#include "store/store.h"

typedef struct {
    int calls, last_read, n_pages;
    int monotonic;
} seen;

static void on_progress(void *user, int pages_read, int n_pages) {
    seen *s = user;
    if (pages_read != s->last_read + 1 || (s->n_pages && n_pages != s->n_pages)) s->monotonic = 0;
    s->calls++;
    s->last_read = pages_read;
    s->n_pages = n_pages;
}

static void test_pdf_reports_every_page(void **state) {
    (void)state;
    char dir[64], db[96], pdf[512];
    snprintf(dir, sizeof dir, "/tmp/cq_test_progress_%d", (int)getpid());
    snprintf(db, sizeof db, "%s.db", dir);
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(pdf, sizeof pdf, "%s/tests/data/pdf/zh_law.pdf", src ? src : ".");
    unlink(db);
    cq_store *s;
    cq_err err = {0};
    assert_int_equal(cq_store_open(db, &s, &err), CQ_OK);
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "k", &kb, &err), CQ_OK);
    seen p = {.monotonic = 1};
    cq_ingest_options opt = {.progress = on_progress, .progress_user = &p};
    cq_ingest_result res;
    cq_status rc = cq_ingest_file(s, dir, kb, pdf, &opt, &res, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_true(res.n_pages > 1);
    assert_int_equal(p.calls, res.n_pages);
    assert_int_equal(p.last_read, res.n_pages);
    assert_int_equal(p.n_pages, res.n_pages);
    assert_true(p.monotonic);

    /* Markdown has no pages: no calls */
    char md[128];
    snprintf(md, sizeof md, "%s.md", dir);
    FILE *f = fopen(md, "w");
    fputs("# 标题\n\n第一条 内容。\n", f);
    fclose(f);
    seen q = {.monotonic = 1};
    opt.progress_user = &q;
    assert_int_equal(cq_ingest_file(s, dir, kb, md, &opt, &res, &err), CQ_OK);
    assert_int_equal(q.calls, 0);
    cq_store_close(s);
    char cmd[640];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s-wal %s-shm %s", dir, db, db, db, md);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pdf_reports_every_page)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
