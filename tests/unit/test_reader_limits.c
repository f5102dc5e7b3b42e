/* reader/: what reading a document may cost (issue 16, items 4 and 5): pages found in linear time, the page limit,
 * the memory budget, cancelling between pages, page trees that lie. The PDFs are written by the test
 * (test_pdf_gen.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "reader/reader.h"
#include "test_pdf_gen.h"

static char pdf_path[128];

static int setup(void **state) {
    (void)state;
    snprintf(pdf_path, sizeof pdf_path, "/tmp/cq_test_limits_%d.pdf", (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(pdf_path);
    return 0;
}

typedef struct {
    int calls, cancel_at;
    atomic_bool *flag;
} progress_seen;

static void on_progress(void *user, int pages_read, int n_pages) {
    (void)n_pages;
    progress_seen *p = user;
    p->calls++;
    if (p->cancel_at && pages_read == p->cancel_at) atomic_store(p->flag, true);
}

static cq_status read_pdf(const cq_reader_limits *limits, progress_seen *seen, cq_doctext *doc, cq_err *err) {
    cq_reader_input in = {.path = pdf_path, .limits = limits};
    if (seen) {
        in.progress = on_progress;
        in.progress_user = seen;
    }
    return cq_reader_format_named("pdf")->read(&in, doc, err);
}

/* The text of page k (1-based) holds "Page k ". */
static void assert_page_text(const cq_doctext *doc, int k) {
    const cq_page *pg = &doc->pages[k - 1];
    char want[32], got[64];
    snprintf(want, sizeof want, "Page %d ", k);
    size_t n = pg->text_end - pg->text_start;
    snprintf(got, sizeof got, "%.*s", (int)(n < 63 ? n : 63), doc->text + pg->text_start);
    if (!strstr(got, want)) fail_msg("page %d reads '%s'", k, got);
}

static void test_page_limit(void **state) {
    (void)state;
    test_pdf_pages(pdf_path, 30, 0, 0, 0);
    cq_doctext doc;
    cq_err err = {0};
    cq_reader_limits lim = {.max_pages = 20};
    progress_seen seen = {0};
    assert_int_equal(read_pdf(&lim, &seen, &doc, &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "document too large: the PDF has 30 pages, more than the 20"));
    assert_int_equal(seen.calls, 0); /* refused before a page is read */
    lim.max_pages = 30;
    assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_OK);
    assert_int_equal(doc.n_pages, 30);
    cq_doctext_free(&doc);
}

/* Pages come in order through MuPDF's page map, from a flat tree and from a tree of page nodes. */
static void test_page_trees(void **state) {
    (void)state;
    const int fanouts[] = {0, 7, 100};
    for (size_t f = 0; f < 3; f++) {
        test_pdf_pages(pdf_path, 250, fanouts[f], 0, 0);
        cq_doctext doc;
        cq_err err = {0};
        assert_int_equal(read_pdf(NULL, NULL, &doc, &err), CQ_OK);
        assert_int_equal(doc.n_pages, 250);
        for (int k = 1; k <= 250; k += 31) assert_page_text(&doc, k);
        assert_page_text(&doc, 250);
        cq_doctext_free(&doc);
    }
}

/* A root that claims more pages than its tree has, or lists itself among its kids: read without the page map,
 * without a crash (the sanitizers watch), and the pages that exist are there. */
static void test_lying_page_trees(void **state) {
    (void)state;
    cq_doctext doc;
    cq_err err = {0};
    test_pdf_pages(pdf_path, 3, 0, 5, 0);
    cq_status rc = read_pdf(NULL, NULL, &doc, &err);
    if (rc == CQ_OK) {
        assert_true(doc.n_pages >= 3);
        assert_page_text(&doc, 3);
        cq_doctext_free(&doc);
    } else {
        assert_int_equal(rc, CQ_ERR_FORMAT);
    }
    test_pdf_pages(pdf_path, 3, 0, 0, 1);
    rc = read_pdf(NULL, NULL, &doc, &err);
    if (rc == CQ_OK) cq_doctext_free(&doc);
    else assert_int_equal(rc, CQ_ERR_FORMAT);
    test_pdf_pages(pdf_path, 3, 0, 2000000000, 0); /* a /Count past any limit */
    cq_reader_limits lim = {.max_pages = 0};
    assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "2000000000 pages"));
}

/* Reading time grows with the pages, not with their square: 8 times the pages may take about 8 times as long. Before
 * the page map, 8,000 pages took 64 times (and more) as long as 1,000 (20,000 tiny pages: 206 s). The machine is
 * shared: each size is timed as the better of two reads, and a round whose ratio a burst of load spoiled is done
 * again (at most 3 rounds; the quadratic reading was over x30 in every one). */
static void test_pages_in_linear_time(void **state) {
    (void)state;
    const int sizes[2] = {1000, 8000};
    double seconds[2], ratio = 1e9;
    for (int round = 0; round < 3 && ratio > 20; round++) {
        for (int i = 0; i < 2; i++) {
            test_pdf_pages(pdf_path, sizes[i], 0, 0, 0);
            seconds[i] = 1e9;
            for (int run = 0; run < 2; run++) {
                cq_doctext doc;
                cq_err err = {0};
                cq_reader_limits lim = {.max_pages = 0};
                double t0 = cq_clock_seconds();
                assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_OK);
                double t = cq_clock_seconds() - t0;
                if (t < seconds[i]) seconds[i] = t;
                assert_int_equal(doc.n_pages, sizes[i]);
                assert_page_text(&doc, sizes[i]);
                cq_doctext_free(&doc);
            }
        }
        ratio = seconds[1] / (seconds[0] > 1e-3 ? seconds[0] : 1e-3);
        printf("pages read: %d in %.3f s, %d in %.3f s (x%.1f for x8 pages)\n", sizes[0], seconds[0], sizes[1],
               seconds[1], ratio);
    }
    if (ratio > 20) fail_msg("8 times the pages took %.1f times as long, in each of 3 rounds", ratio);
}

static void test_cancel_between_pages(void **state) {
    (void)state;
    test_pdf_pages(pdf_path, 200, 0, 0, 0);
    atomic_bool flag = false;
    cq_reader_limits lim = {.cancel = &flag};
    progress_seen seen = {.cancel_at = 5, .flag = &flag};
    cq_doctext doc;
    cq_err err = {0};
    assert_int_equal(read_pdf(&lim, &seen, &doc, &err), CQ_ERR_CANCELLED);
    assert_string_equal(err.msg, "cancelled after 5 of 200 pages");
    assert_int_equal(seen.calls, 5);
    assert_null(doc.text);
    /* set before the reading starts: not a page is read */
    seen = (progress_seen){0};
    assert_int_equal(read_pdf(&lim, &seen, &doc, &err), CQ_ERR_CANCELLED);
    assert_int_equal(seen.calls, 0);
    assert_int_equal(cq_reader_check_cancel(NULL, "x", &err), CQ_OK);
}

/* A 400 KB content stream of 200,000 nested q operators (MuPDF allocated ~600 bytes a level: two million took
 * 1.2 GB), and a page of 60,000 glyphs: over a small budget they fail as too large, quickly. (Small sizes: under
 * AddressSanitizer a page of 300,000 glyphs takes minutes, its realloc copying every time.) */
static void test_memory_budget(void **state) {
    (void)state;
    size_t len;
    char *content = test_pdf_nested_q(200000, &len);
    test_pdf_one_page(pdf_path, content, len);
    free(content);
    cq_reader_limits lim = {.max_bytes = 16u << 20};
    cq_doctext doc;
    cq_err err = {0};
    assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "document too large: page 1 of 1 needs more than the memory a document may take "
                                    "(16 MB, --doc-memory-mb)"));

    content = test_pdf_tiny_glyphs(600, &len);
    test_pdf_one_page(pdf_path, content, len);
    free(content);
    lim.max_bytes = 3u << 20; /* it needs about 5 MB */
    assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_ERR_TOO_LARGE);
    lim.max_bytes = 64u << 20;
    assert_int_equal(read_pdf(&lim, NULL, &doc, &err), CQ_OK);
    assert_true(doc.n_glyphs > 50000);
    size_t bytes = cq_doctext_bytes(&doc);
    assert_true(bytes > doc.n_glyphs * 12 && bytes < (16u << 20));
    cq_reader_limits small = {.max_bytes = bytes / 2};
    assert_int_equal(cq_reader_check_bytes(&small, bytes, "its clauses", &err), CQ_ERR_TOO_LARGE);
    assert_non_null(strstr(err.msg, "document too large: its clauses would take"));
    cq_doctext_free(&doc);
}

/* Issue 29: a cancel set while a long page is read stops the reading within the page (MuPDF's allocations are
 * refused once the flag is set); the flag was looked at only before each page, so a one-page document read on to its
 * end and came back as read. */
static atomic_bool cancel_later_flag;

static void *cancel_later(void *arg) {
    (void)arg;
    usleep(20 * 1000);
    atomic_store(&cancel_later_flag, true);
    return NULL;
}

static void test_cancel_within_a_page(void **state) {
    (void)state;
    size_t len;
    char *content = test_pdf_tiny_glyphs(20000, &len); /* 2 million glyphs on one page: seconds of MuPDF */
    test_pdf_one_page(pdf_path, content, len);
    free(content);
    atomic_store(&cancel_later_flag, false);
    cq_reader_limits lim = {.max_bytes = 1024u << 20, .cancel = &cancel_later_flag};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_later, NULL), 0);
    cq_doctext doc;
    cq_err err = {0};
    double t0 = cq_clock_seconds();
    cq_status rc = read_pdf(&lim, NULL, &doc, &err);
    double took = cq_clock_seconds() - t0;
    pthread_join(t, NULL);
    printf("cancelled read of one long page: %s after %.2f s\n", err.msg, took);
    assert_int_equal(rc, CQ_ERR_CANCELLED);
    assert_null(doc.text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_page_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page_trees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lying_page_trees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pages_in_linear_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_between_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_within_a_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_budget, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
