/* reader/: silent text loss in PDFs (issue 29, item 11). The running header and footer removal took lines repeated
 * on many pages (digits aside) for headers even when they were all the page had, or a clause heading:
 *   - 3,500 pages of one line each, worded alike but for the page's number: every page from 1,000 on (the lines with
 *     four digits: 71 % of the pages) came out empty, and the document was read at quality 1.00 without a warning;
 *   - 100 pages each headed "Article N" at the top: the headings (alike but for N) were all dropped, and the body
 *     line worded alike but for its numbers ("pay 137 euros within 11 days") with them.
 * Now a repeated line is a header only when its page keeps other text, a clause heading never is one, a body line
 * must repeat with its digits, and a page that still loses all its text is flagged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "reader/reader.h"
#include "test_pdf_gen.h"

static char path[96];

static int setup(void **state) {
    (void)state;
    snprintf(path, sizeof path, "/tmp/cq_pdf_loss_%d.pdf", (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(path);
    return 0;
}

static cq_status read_pdf(cq_doctext *d, cq_err *err) {
    cq_reader_limits lim = {.max_pages = 5000, .max_bytes = 512u << 20};
    cq_reader_input in = {.path = path, .limits = &lim, .ocr = CQ_OCR_OFF};
    return cq_reader_format_named("pdf")->read(&in, d, err);
}

static size_t one_line(int k, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap, "BT /F1 11 Tf 72 400 Td (This is the only line on page %d of the document.) Tj ET",
                            k + 1);
}

static void test_one_line_a_page(void **state) {
    (void)state;
    test_pdf_letter_pages(path, 3500, one_line);
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_pdf(&d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(d.n_pages, 3500);
    int empty = 0, first_empty = 0;
    for (int p = 0; p < d.n_pages; p++)
        if (!d.pages[p].n_chars && !empty++) first_empty = p + 1;
    if (empty) fail_msg("%d of 3,500 pages came out empty, from page %d", empty, first_empty);
    assert_non_null(strstr(d.text, "This is the only line on page 3500 of the document."));
    assert_non_null(strstr(d.text, "This is the only line on page 1430 of the document."));
    cq_doctext_free(&d);
}

/* "Article N" atop each page, a body line worded alike on every page but for its numbers, a line the same on every
 * page in the body and a page number at the foot. */
static size_t article_page(int k, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap,
                            "BT /F1 14 Tf 72 740 Td (Article %d) Tj ET\n"
                            "BT /F1 11 Tf 72 600 Td (The party shall pay %d euros within %d days of the invoice.) "
                            "Tj ET\n"
                            "BT /F1 11 Tf 72 586 Td (Payment is made by bank transfer to the seller's account.) Tj ET\n"
                            "BT /F1 10 Tf 300 40 Td (%d) Tj ET",
                            k + 1, 100 + (k * 37) % 900, 10 + k % 7, k + 1);
}

static void test_article_headings(void **state) {
    (void)state;
    test_pdf_letter_pages(path, 100, article_page);
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_pdf(&d, &err);
    if (rc) fail_msg("%s", err.msg);
    int lost = 0;
    for (int k = 1; k <= 100; k++) {
        char want[96];
        snprintf(want, sizeof want, "Article %d\nThe party shall pay %d euros within", k, 100 + ((k - 1) * 37) % 900);
        lost += !strstr(d.text, want);
    }
    if (lost) fail_msg("%d of 100 'Article N' headings or their text lost:\n%.400s", lost, d.text);
    for (int p = 0; p < d.n_pages; p++) assert_true(d.pages[p].n_chars > 0);
    /* the page numbers are still running footers */
    assert_null(strstr(d.text, "\n57\n"));
    cq_structure st;
    assert_int_equal(cq_structure_parse(&d, &st, &err), CQ_OK);
    size_t articles = 0;
    for (size_t i = 0; i < st.n_clauses; i++) articles += st.clauses[i].kind == CQ_CLAUSE_ARTICLE;
    assert_int_equal(articles, 100);
    cq_structure_free(&st);
    cq_doctext_free(&d);
}

/* A real running header still goes: the same words atop every page that has other text, a chapter's name too (books
 * repeat it atop their pages: only clause headings, Article / Section / 第…条, are kept). */
static size_t headed_page(int k, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap,
                            "BT /F1 9 Tf 72 760 Td (SERVICES AGREEMENT - CONFIDENTIAL) Tj ET\n"
                            "BT /F1 9 Tf 72 748 Td (Chapter 3 Payments) Tj ET\n"
                            "BT /F1 11 Tf 72 600 Td (Clause text number %d says something of its own, %s.) Tj ET\n"
                            "BT /F1 9 Tf 300 30 Td (Page %d of 40) Tj ET",
                            k + 1, k % 2 ? "odd" : "even", k + 1);
}

static void test_running_header_still_dropped(void **state) {
    (void)state;
    test_pdf_letter_pages(path, 40, headed_page);
    cq_doctext d;
    cq_err err = {0};
    cq_status rc = read_pdf(&d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_null(strstr(d.text, "CONFIDENTIAL"));
    assert_null(strstr(d.text, "Chapter 3"));
    assert_null(strstr(d.text, "of 40"));
    assert_non_null(strstr(d.text, "Clause text number 40 says"));
    assert_true(d.quality > 0.99);
    cq_doctext_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_line_a_page),
        cmocka_unit_test(test_article_headings),
        cmocka_unit_test(test_running_header_still_dropped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
