/* Page images (reader/page_render.c) cost a bounded amount whatever the page (issue 29, item 5): a page far longer
 * than wide asked at width 2400 is drawn within the pixel caps; a page that takes too long to draw stops at the time
 * limit; renders run at once (a slow page no longer holds every other page image), within the memory budget. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "reader/reader.h"
#include "test_pdf_gen.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cq_test_render_%d", (int)getpid());
    mkdir(dir, 0700);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

/* One page of w x h points with the given content stream. */
static void write_page(const char *path, int w, int h, const char *content, size_t len) {
    test_pdf p;
    test_pdf_begin(&p, path, 5);
    test_pdf_object(&p, 1, "<< /Type /Catalog /Pages 2 0 R >>");
    test_pdf_object(&p, 2, "<< /Type /Pages /Count 1 /Kids [4 0 R] >>");
    test_pdf_object(&p, 3, "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>");
    test_pdf_object(&p, 4,
                    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 3 0 R >> >> "
                    "/Contents 5 0 R >>",
                    w, h);
    test_pdf_stream(&p, 5, content, len);
    test_pdf_end(&p);
}

/* A page that takes long to draw: `fills` fills of the whole page. */
static void write_slow_page(const char *path, int fills) {
    const char op[] = "0.5 g 0 0 612 792 re f ";
    size_t n = (size_t)fills * (sizeof op - 1);
    char *s = malloc(n + 1);
    assert_non_null(s);
    for (int i = 0; i < fills; i++) memcpy(s + (size_t)i * (sizeof op - 1), op, sizeof op - 1);
    write_page(path, 612, 792, s, n);
    free(s);
}

static void png_size(const char *path, int *w, int *h) {
    unsigned char head[24];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    assert_memory_equal(head, "\x89PNG\r\n\x1a\n", 8);
    *w = (int)((unsigned)head[16] << 24 | (unsigned)head[17] << 16 | (unsigned)head[18] << 8 | head[19]);
    *h = (int)((unsigned)head[20] << 24 | (unsigned)head[21] << 16 | (unsigned)head[22] << 8 | head[23]);
}

static cq_status render(const char *pdf, int width, const char *png, cq_err *err) {
    const cq_reader_format *f = cq_reader_format_named("pdf");
    assert_non_null(f);
    cq_box box = {1, 2, 2, 8, 8};
    return f->render(pdf, 1, width, &box, 1, png, err);
}

/* The page: MediaBox [0 0 10 1000] at width 2400 made a 2400 x 240,000 PNG (24 s, 3.67 GB). */
static void test_pixel_cap(void **state) {
    (void)state;
    char pdf[128], png[128];
    snprintf(pdf, sizeof pdf, "%s/tall.pdf", dir);
    snprintf(png, sizeof png, "%s/tall.png", dir);
    const char content[] = "BT /F1 8 Tf 1 990 Td (x) Tj ET 0 0 m 10 1000 l S";
    write_page(pdf, 10, 1000, content, sizeof content - 1);
    cq_err err = {0};
    double t0 = cq_clock_seconds();
    cq_status rc = render(pdf, 2400, png, &err);
    double dt = cq_clock_seconds() - t0;
    if (rc) fail_msg("render: %s", err.msg);
    int w, h;
    png_size(png, &w, &h);
    print_message("10 x 1000 points at width 2400: %d x %d pixels, %.2f s\n", w, h, dt);
    assert_true(h <= 10000 && w <= 10000);
    assert_true((long long)w * h <= 12LL << 20);
    assert_true(w >= 90 && h >= 9000); /* drawn as large as the caps allow, not smaller */
    /* A wide page: the other side. */
    snprintf(pdf, sizeof pdf, "%s/wide.pdf", dir);
    write_page(pdf, 20000, 10, content, sizeof content - 1);
    assert_int_equal(render(pdf, 10000, png, &err), CQ_OK);
    png_size(png, &w, &h);
    assert_true(w <= 10000 && (long long)w * h <= 12LL << 20);
    /* An ordinary page at an ordinary width is drawn as asked. */
    snprintf(pdf, sizeof pdf, "%s/letter.pdf", dir);
    write_page(pdf, 612, 792, content, sizeof content - 1);
    assert_int_equal(render(pdf, 1200, png, &err), CQ_OK);
    png_size(png, &w, &h);
    assert_int_equal(w, 1200);
    assert_int_equal(h, 1553);
}

/* A page that takes longer than the time limit stops at it: "too large", not a worker held for minutes. */
static void test_time_limit(void **state) {
    (void)state;
    char pdf[128], png[128];
    snprintf(pdf, sizeof pdf, "%s/slow.pdf", dir);
    snprintf(png, sizeof png, "%s/slow.png", dir);
    write_slow_page(pdf, 200000);
    setenv("CLAUSEQA_RENDER_TIMEOUT_S", "1", 1);
    cq_err err = {0};
    double t0 = cq_clock_seconds();
    cq_status rc = render(pdf, 2400, png, &err);
    double dt = cq_clock_seconds() - t0;
    unsetenv("CLAUSEQA_RENDER_TIMEOUT_S");
    print_message("200,000 page fills with a 1 s limit: %s after %.2f s\n", rc ? err.msg : "drawn", dt);
    assert_int_equal(rc, CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "longer than 1 s"));
    assert_true(dt < 3.0);
    assert_int_equal(access(png, F_OK), -1);
}

typedef struct {
    const char *pdf, *png;
    int width;
    cq_status rc;
    double started, ended;
} job;

static void *render_job(void *arg) {
    job *j = arg;
    cq_err err = {0};
    j->started = cq_clock_seconds();
    j->rc = render(j->pdf, j->width, j->png, &err);
    j->ended = cq_clock_seconds();
    return NULL;
}

/* A slow page and a quick one asked 0.3 s later: the quick one no longer waits for the slow one (renders were
 * serialized by one lock), unless the memory budget has room for one render only. */
static void run_pair(double *slow_end, double *quick_end, cq_status *slow_rc, cq_status *quick_rc) {
    char slow_pdf[128], slow_png[128], quick_pdf[128], quick_png[128];
    snprintf(slow_pdf, sizeof slow_pdf, "%s/slow.pdf", dir);
    snprintf(slow_png, sizeof slow_png, "%s/slow-pair.png", dir);
    snprintf(quick_pdf, sizeof quick_pdf, "%s/quick.pdf", dir);
    snprintf(quick_png, sizeof quick_png, "%s/quick.png", dir);
    write_slow_page(slow_pdf, 200000);
    const char content[] = "BT /F1 12 Tf 72 700 Td (Quick) Tj ET";
    write_page(quick_pdf, 612, 792, content, sizeof content - 1);
    job slow = {slow_pdf, slow_png, 2400, 0, 0, 0}, quick = {quick_pdf, quick_png, 400, 0, 0, 0};
    pthread_t a, b;
    double t0 = cq_clock_seconds();
    assert_int_equal(pthread_create(&a, NULL, render_job, &slow), 0);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    assert_int_equal(pthread_create(&b, NULL, render_job, &quick), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    *slow_end = slow.ended - t0;
    *quick_end = quick.ended - t0;
    *slow_rc = slow.rc;
    *quick_rc = quick.rc;
}

static void test_concurrent(void **state) {
    (void)state;
    setenv("CLAUSEQA_RENDER_TIMEOUT_S", "3", 1);
    double slow_end, quick_end;
    cq_status slow_rc, quick_rc;
    run_pair(&slow_end, &quick_end, &slow_rc, &quick_rc);
    print_message("slow page stopped at %.2f s; a quick page asked at 0.30 s ended at %.2f s\n", slow_end, quick_end);
    assert_int_equal(slow_rc, CQ_ERR_TOO_LARGE);
    assert_int_equal(quick_rc, CQ_OK);
    assert_true(quick_end < slow_end);
    assert_true(quick_end < 2.0);

    /* A budget of one render: the quick page waits for the slow one's place, and is drawn after it. */
    setenv("CLAUSEQA_RENDER_MEMORY_MB", "160", 1);
    setenv("CLAUSEQA_RENDER_TIMEOUT_S", "2", 1);
    run_pair(&slow_end, &quick_end, &slow_rc, &quick_rc);
    print_message("budget of one render: slow page stopped at %.2f s; the quick page ended at %.2f s (%s)\n",
                  slow_end, quick_end, quick_rc ? "busy" : "drawn");
    assert_true(quick_end >= slow_end - 0.05);
    (void)quick_rc; /* drawn, unless the loaded machine took its last 0.3 s */
    unsetenv("CLAUSEQA_RENDER_TIMEOUT_S");
    unsetenv("CLAUSEQA_RENDER_MEMORY_MB");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pixel_cap),
        cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
