/* app/export_pdf.h: a conversation's PDF read back by MuPDF — Chinese and English text extracted as written (the
 * non-embedded STSong-Light and Helvetica), long paragraphs wrapped inside the page and continued on new pages,
 * characters outside the BMP as "?", PDF string delimiters escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <mupdf/fitz.h>

#include "app/export_pdf.h"

/* The text of every page of pdf (whitespace removed), and the page count. Malloc'd. */
static char *pdf_text(const char *pdf, size_t len, int *pages) {
    fz_context *ctx = fz_new_context(NULL, NULL, FZ_STORE_DEFAULT);
    assert_non_null(ctx);
    fz_register_document_handlers(ctx);
    char *out = NULL;
    fz_var(out);
    fz_try(ctx) {
        fz_stream *st = fz_open_memory(ctx, (const unsigned char *)pdf, len);
        fz_document *doc = fz_open_document_with_stream(ctx, "application/pdf", st);
        *pages = fz_count_pages(ctx, doc);
        size_t cap = 1 << 16, n = 0;
        out = malloc(cap);
        for (int i = 0; i < *pages; i++) {
            fz_buffer *b = fz_new_buffer_from_page_number(ctx, doc, i, NULL);
            unsigned char *data;
            size_t bl = fz_buffer_storage(ctx, b, &data);
            for (size_t k = 0; k < bl; k++) {
                if (data[k] == ' ' || data[k] == '\n' || data[k] == '\t') continue;
                if (n + 2 >= cap) out = realloc(out, cap *= 2);
                out[n++] = (char)data[k];
            }
            fz_drop_buffer(ctx, b);
        }
        out[n] = 0;
        fz_drop_document(ctx, doc);
        fz_drop_stream(ctx, st);
    }
    fz_catch(ctx) { fail_msg("MuPDF: %s", fz_caught_message(ctx)); }
    fz_drop_context(ctx);
    return out;
}

static void test_chinese_and_english(void **state) {
    (void)state;
    cq_pdf *p = cq_pdf_new();
    cq_pdf_para(p, CQ_PDF_TITLE, "劳动法 overtime (Article 44)");
    cq_pdf_para(p, CQ_PDF_HEADING, "1. 加班工资怎么算？");
    cq_pdf_para(p, CQ_PDF_BODY, "安排劳动者延长工作时间的，支付不低于工资的百分之一百五十的工资报酬。\nSecond line \\ back");
    cq_pdf_para(p, CQ_PDF_QUOTE, "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬");
    cq_pdf_para(p, CQ_PDF_SMALL, "emoji \xF0\x9F\x98\x80 end");
    cq_pdf_para(p, CQ_PDF_SMALL, "法 · page 3");
    char *pdf;
    size_t len;
    cq_err err = {0};
    assert_int_equal(cq_pdf_finish(p, &pdf, &len, &err), CQ_OK);
    assert_true(len > 500 && !memcmp(pdf, "%PDF-1.4", 8));
    assert_non_null(strstr(pdf, "/STSong-Light"));
    int pages = 0;
    char *text = pdf_text(pdf, len, &pages);
    assert_int_equal(pages, 1);
    assert_non_null(strstr(text, "劳动法overtime(Article44)"));
    assert_non_null(strstr(text, "加班工资怎么算？"));
    assert_non_null(strstr(text, "百分之一百五十的工资报酬。Secondline\\back"));
    assert_non_null(strstr(text, "用人单位应当按照下列标准支付"));
    assert_non_null(strstr(text, "emoji?end"));
    assert_non_null(strstr(text, "法·page3")); /* the middle dot shown (as U+30FB) and read back */
    free(text);
    free(pdf);
}

static void test_wraps_and_pages(void **state) {
    (void)state;
    cq_pdf *p = cq_pdf_new();
    char para[4096] = "";
    for (int i = 0; i < 60; i++) strcat(para, "lorem ipsum dolor sit "); /* ~1,300 characters: many lines */
    for (int i = 0; i < 12; i++) cq_pdf_para(p, CQ_PDF_BODY, para);
    char *pdf;
    size_t len;
    cq_err err = {0};
    assert_int_equal(cq_pdf_finish(p, &pdf, &len, &err), CQ_OK);
    int pages = 0;
    char *text = pdf_text(pdf, len, &pages);
    assert_true(pages >= 3);
    /* every word whole: wrapped at spaces, none cut */
    size_t words = 0;
    for (const char *q = text; (q = strstr(q, "loremipsumdolorsit")); q++) words++;
    assert_int_equal(words, 12 * 60);
    free(text);
    free(pdf);
}

static void test_empty(void **state) {
    (void)state;
    char *pdf;
    size_t len;
    cq_err err = {0};
    assert_int_equal(cq_pdf_finish(cq_pdf_new(), &pdf, &len, &err), CQ_OK);
    int pages = 0;
    char *text = pdf_text(pdf, len, &pages);
    assert_int_equal(pages, 1);
    free(text);
    free(pdf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chinese_and_english),
        cmocka_unit_test(test_wraps_and_pages),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
