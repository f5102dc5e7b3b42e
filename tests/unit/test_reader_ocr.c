/* reader/: OCR of scanned PDF pages (reader/ocr.c through the PDF reader).
 *
 * The test makes its own scans: MuPDF writes a page of known Chinese law text (the non-embedded STSong-Light font,
 * which MuPDF draws with its built-in CJK font), renders it at 200 dpi in grey, and puts the picture alone on the
 * page of a new PDF (what a scanner produces; tests/unit/test_scan_util.h). OCR must read it back with at least
 * 95 % of the characters right, the structure parser must find the articles, and the boxes must land where the
 * lines were printed. Five pages are recognised in all (two at a time), so the test takes seconds, not minutes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include "core/utf8.h"
#include "reader/reader.h"
#include "test_scan_util.h"

#define PAGE_W 595.0f
#define PAGE_H 842.0f
#define LEFT 72.0f
#define TOP 110.0f   /* baseline of the first line, from the top */
#define PITCH 30.0f  /* baseline to baseline */
#define SIZE 16.0f
#define SCAN_DPI 200

/* The page: a chapter heading, four articles (the first and second wrapped over two lines), two items. */
static const char *const LINES[] = {
    "第一章　总则",
    "第一条　为了规范电子文件的归档和管理，提高档案工作",
    "的质量和效率，根据有关法律法规，制定本办法。",
    "第二条　本办法适用于本市各级机关、团体和企业事业",
    "单位的电子文件归档工作。",
    "第三条　电子文件归档应当遵循下列原则：",
    "（一）真实、完整、可用、安全；",
    "（二）统一管理，分级负责。",
    "第四条　档案部门应当定期检查电子档案的保存情况，",
    "发现问题及时处理，并向主管部门报告。",
};
#define N_LINES (sizeof LINES / sizeof LINES[0])

/* The text page between the scans of the mixed document: the chapter that follows. */
static const char *const LINES2[] = {
    "第二章　归档范围",
    "第五条　具有保存价值的电子文件应当归档。",
    "第六条　归档的电子文件应当附有元数据。",
};
#define N_LINES2 (sizeof LINES2 / sizeof LINES2[0])

typedef struct {
    char text_pdf[128], scan_pdf[128], mixed_pdf[128];
} fixtures;

static fixtures fx;

/* A page of lines[0..n) with a text layer. */
static pdf_obj *text_page(fz_context *ctx, pdf_document *doc, const char *const *lines, size_t n_lines) {
    fz_font *font = fz_new_cjk_font(ctx, FZ_ADOBE_GB);
    pdf_obj *fref = pdf_add_cjk_font(ctx, doc, font, FZ_ADOBE_GB, 0, 1);
    fz_drop_font(ctx, font);
    pdf_obj *res = pdf_new_dict(ctx, doc, 1), *fonts = pdf_new_dict(ctx, doc, 1);
    pdf_dict_puts(ctx, fonts, "F1", fref);
    pdf_dict_puts_drop(ctx, res, "Font", fonts);
    pdf_drop_obj(ctx, fref);
    fz_buffer *content = fz_new_buffer(ctx, 4096);
    for (size_t i = 0; i < n_lines; i++) {
        fz_append_printf(ctx, content, "BT /F1 %g Tf %g %g Td <", SIZE, LEFT, PAGE_H - (TOP + PITCH * (float)i));
        /* UTF-16BE, as the font's UniGB-UTF16-H encoding wants */
        const char *s = lines[i];
        size_t n = strlen(s), k = 0;
        while (k < n) {
            size_t len;
            uint32_t cp = cq_utf8_decode(s + k, n - k, &len);
            char hex[8];
            snprintf(hex, sizeof hex, "%04X", (unsigned)cp);
            fz_append_string(ctx, content, hex);
            k += len;
        }
        fz_append_string(ctx, content, "> Tj ET\n");
    }
    pdf_obj *page = pdf_add_page(ctx, doc, fz_make_rect(0, 0, PAGE_W, PAGE_H), 0, res, content);
    pdf_drop_obj(ctx, res);
    fz_drop_buffer(ctx, content);
    return page;
}

static void save(fz_context *ctx, pdf_document *doc, const char *path) {
    pdf_write_options opts = pdf_default_write_options;
    opts.do_compress = 1;
    pdf_save_document(ctx, doc, path, &opts);
}

/* A court's filing stamp: real text over the picture of the third page of mixed.pdf. */
#define STAMP "Case 1:24-cv-00042 Document 7 Filed 03/01/24 Page 3 of 3"

/* text.pdf: LINES, then LINES2, with a text layer; scan.pdf: the picture of LINES' page; mixed.pdf: that picture,
 * the LINES2 page as text, the picture again with STAMP over it. */
static int make_fixtures(void **state) {
    (void)state;
    int pid = (int)getpid();
    snprintf(fx.text_pdf, sizeof fx.text_pdf, "/tmp/cq_ocr_test_%d_text.pdf", pid);
    snprintf(fx.scan_pdf, sizeof fx.scan_pdf, "/tmp/cq_ocr_test_%d_scan.pdf", pid);
    snprintf(fx.mixed_pdf, sizeof fx.mixed_pdf, "/tmp/cq_ocr_test_%d_mixed.pdf", pid);
    fz_context *ctx = fz_new_context(NULL, NULL, FZ_STORE_DEFAULT);
    if (!ctx) return -1;
    int rc = 0;
    pdf_document *text = NULL;
    fz_var(text);
    fz_try(ctx) {
        text = pdf_create_document(ctx);
        pdf_obj *p = text_page(ctx, text, LINES, N_LINES);
        pdf_insert_page(ctx, text, -1, p);
        pdf_drop_obj(ctx, p);
        p = text_page(ctx, text, LINES2, N_LINES2);
        pdf_insert_page(ctx, text, -1, p);
        pdf_drop_obj(ctx, p);
        save(ctx, text, fx.text_pdf);
    }
    fz_always(ctx) {
        pdf_drop_document(ctx, text);
    }
    fz_catch(ctx) {
        fprintf(stderr, "making the OCR fixtures: %s\n", fz_caught_message(ctx));
        rc = -1;
    }
    fz_drop_context(ctx);
    char err[256];
    const scan_page scan[] = {{0, true, NULL}}, mixed[] = {{0, true, NULL}, {1, false, NULL}, {0, true, STAMP}};
    if (!rc && (scan_pdf(fx.text_pdf, fx.scan_pdf, SCAN_DPI, scan, 1, err, sizeof err) ||
                scan_pdf(fx.text_pdf, fx.mixed_pdf, SCAN_DPI, mixed, 3, err, sizeof err))) {
        fprintf(stderr, "making the OCR fixtures: %s\n", err);
        rc = -1;
    }
    return rc;
}

static int remove_fixtures(void **state) {
    (void)state;
    if (getenv("CQ_OCR_TEST_KEEP")) return 0;
    unlink(fx.text_pdf);
    unlink(fx.scan_pdf);
    unlink(fx.mixed_pdf);
    return 0;
}

/* ---- measuring -------------------------------------------------------------------------------------------- */

/* Character accuracy: 1 - (edit distance / length of the truth). */
static double char_accuracy(const char *truth, const char *got, size_t got_len) {
    return scan_char_accuracy(truth, strlen(truth), got, got_len);
}

static char *truth_text(void) {
    size_t cap = 1;
    for (size_t i = 0; i < N_LINES; i++) cap += strlen(LINES[i]);
    char *t = malloc(cap);
    t[0] = 0;
    for (size_t i = 0; i < N_LINES; i++) strcat(t, LINES[i]);
    return t;
}

static cq_status read_pdf(const char *path, cq_reader_ocr ocr, int threads, cq_reader_progress_fn progress,
                          void *user, cq_doctext *d, cq_err *err) {
    cq_reader_input in = {.path = path, .ocr = ocr, .ocr_threads = threads, .progress = progress,
                          .progress_user = user};
    return cq_reader_format_named("pdf")->read(&in, d, err); /* as ingest calls it */
}

/* ---- tests ------------------------------------------------------------------------------------------------ */

static const cq_clause *clause_labelled(const cq_structure *st, const char *label) {
    for (size_t i = 0; i < st->n_clauses; i++)
        if (st->clauses[i].label && !strcmp(st->clauses[i].label, label)) return &st->clauses[i];
    return NULL;
}

static void test_scanned_page(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    /* OCR off: the page is flagged, and a document of scans alone has no text */
    assert_int_equal(read_pdf(fx.scan_pdf, CQ_OCR_OFF, 0, NULL, NULL, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "no text layer on any of 1 pages (scanned document? OCR is off)"));
    assert_string_equal(cq_err_name(&err), "ocr_off"); /* the page says it in its language */

    cq_status rc = read_pdf(fx.scan_pdf, CQ_OCR_AUTO, 1, NULL, NULL, &d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(d.n_pages, 1);
    assert_true(d.pages[0].ocr);
    char *truth = truth_text();
    double acc = char_accuracy(truth, d.text, d.text_len);
    print_message("  OCR character accuracy %.4f, confidence %.2f, quality %.2f (%s)\n", acc,
                  d.pages[0].ocr_confidence, d.pages[0].quality, d.pages[0].quality_reason);
    print_message("  text: %s\n", d.text);
    assert_true(acc >= 0.95);
    assert_true(d.pages[0].ocr_confidence >= CQ_OCR_LOW_CONFIDENCE);
    assert_true(d.pages[0].quality <= d.pages[0].ocr_confidence + 1e-9);
    assert_non_null(strstr(d.pages[0].quality_reason, "OCR"));
    assert_non_null(strstr(d.quality_reason, "OCR"));
    assert_null(strstr(d.text, "\n\n"));

    /* the structure parser finds the chapter and the articles */
    cq_structure st;
    assert_int_equal(cq_structure_parse(&d, &st, &err), CQ_OK);
    const char *labels[] = {"第一条", "第二条", "第三条", "第四条"};
    for (size_t i = 0; i < 4; i++) {
        const cq_clause *c = clause_labelled(&st, labels[i]);
        if (!c) fail_msg("no clause %s in:\n%s", labels[i], d.text);
        char key[4];
        snprintf(key, sizeof key, "%zu", i + 1);
        assert_string_equal(c->label_key, key);
        assert_int_equal(c->page_first, 1);
        assert_non_null(strstr(c->path, "第一章"));
    }
    /* 第三条 keeps its items */
    const cq_clause *c3 = clause_labelled(&st, "第三条");
    assert_true(char_accuracy("第三条　电子文件归档应当遵循下列原则：（一）真实、完整、可用、安全；（二）统一管理，分级负责。",
                              c3->text, strlen(c3->text)) >= 0.9);

    /* boxes land on the lines as printed: 第二条 covers lines 3 and 4 (0-based) from the left margin */
    const cq_clause *c2 = clause_labelled(&st, "第二条");
    cq_box *boxes;
    size_t nb = cq_doctext_boxes(&d, c2->start, c2->end, &boxes);
    assert_int_equal(nb, 2);
    for (size_t i = 0; i < nb; i++) {
        float baseline = TOP + PITCH * (float)(3 + i);
        assert_int_equal(boxes[i].page_no, 1);
        assert_true(boxes[i].y0 < baseline - 0.5f * SIZE && boxes[i].y1 > baseline - 0.5f * SIZE);
        assert_true(boxes[i].y1 < baseline + 0.5f * SIZE && boxes[i].y0 > baseline - 1.5f * SIZE);
        assert_true(boxes[i].x0 > LEFT - 4 && boxes[i].x0 < LEFT + 4);
        assert_true(boxes[i].x1 > boxes[i].x0 + 5 * SIZE && boxes[i].x1 < PAGE_W - LEFT + 8);
    }
    float full = boxes[0].x1 - boxes[0].x0; /* a full line is wider than its continuation */
    assert_true(full > boxes[1].x1 - boxes[1].x0);
    free(boxes);
    cq_structure_free(&st);
    cq_doctext_free(&d);
    free(truth);
}

typedef struct {
    int calls, last, n_pages;
    bool in_order;
} progress_seen;

static void on_progress(void *user, int done, int n) {
    progress_seen *p = user;
    if (done != p->last + 1) p->in_order = false;
    p->calls++;
    p->last = done;
    p->n_pages = n;
}

/* Scanned, text, scanned with a stamp: the scans recognised at once by two threads (the stamp's few characters of
 * text do not make the third page a text page), the text in page order. */
static void test_mixed_document_in_parallel(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    progress_seen p = {.in_order = true};
    cq_status rc = read_pdf(fx.mixed_pdf, CQ_OCR_AUTO, 2, on_progress, &p, &d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(p.calls, 3);
    assert_int_equal(p.last, 3);
    assert_int_equal(p.n_pages, 3);
    assert_true(p.in_order);
    assert_int_equal(d.n_pages, 3);
    assert_true(d.pages[0].ocr);
    assert_false(d.pages[1].ocr);
    assert_true(d.pages[2].ocr);
    assert_string_equal(d.pages[1].quality_reason, "");
    /* pages, lines and glyphs in order, each page's text its own */
    char *truth = truth_text();
    char truth2[512] = "", truth3[2048];
    for (size_t i = 0; i < N_LINES2; i++) strcat(truth2, LINES2[i]);
    snprintf(truth3, sizeof truth3, "%s%s", truth, STAMP);
    size_t line = 0;
    for (int pg = 0; pg < 3; pg++) {
        const cq_page *P = &d.pages[pg];
        assert_int_equal(P->line_first, line);
        double acc = char_accuracy(pg == 0 ? truth : pg == 1 ? truth2 : truth3, d.text + P->text_start,
                                   P->text_end - P->text_start);
        if (acc < 0.95) fail_msg("page %d: accuracy %.3f: %.*s", pg + 1, acc, (int)(P->text_end - P->text_start), d.text + P->text_start);
        for (uint32_t l = P->line_first; l < P->line_first + P->n_lines; l++, line++) {
            const cq_line *ln = &d.lines[l];
            assert_int_equal(ln->page_no, pg + 1);
            assert_true(ln->text_start >= P->text_start && ln->text_end <= P->text_end);
            for (uint32_t g = ln->glyph_first; g < ln->glyph_first + ln->n_glyphs; g++)
                assert_true(d.glyph_offset[g] >= ln->text_start && d.glyph_offset[g] < ln->text_end);
        }
    }
    assert_int_equal(line, d.n_lines);
    const char *page2 = "第二章 归档范围\n第五条 具有保存价值的电子文件应当归档。\n第六条 归档的电子文件应当附有元数据。";
    assert_int_equal(d.pages[1].text_end - d.pages[1].text_start, strlen(page2));
    assert_memory_equal(d.text + d.pages[1].text_start, page2, strlen(page2));
    cq_doctext_free(&d);
    free(truth);
}

/* force: the text layers are ignored, the pages read by OCR */
static void test_force(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_pdf(fx.text_pdf, CQ_OCR_AUTO, 0, NULL, NULL, &d, &err), CQ_OK);
    assert_false(d.pages[0].ocr); /* good text layers are kept */
    assert_false(d.pages[1].ocr);
    cq_doctext_free(&d);
    cq_status rc = read_pdf(fx.text_pdf, CQ_OCR_FORCE, 0, NULL, NULL, &d, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_true(d.pages[0].ocr);
    assert_true(d.pages[1].ocr);
    char *truth = truth_text();
    char truth2[512] = "";
    for (size_t i = 0; i < N_LINES2; i++) strcat(truth2, LINES2[i]);
    for (int pg = 0; pg < 2; pg++) {
        const cq_page *P = &d.pages[pg];
        double acc = char_accuracy(pg ? truth2 : truth, d.text + P->text_start, P->text_end - P->text_start);
        if (acc < 0.95) fail_msg("page %d: accuracy %.3f: %s", pg + 1, acc, d.text);
    }
    free(truth);
    cq_doctext_free(&d);
}

/* Without Tesseract's language data: auto leaves the scan flagged and says why, force fails the document. */
static void test_without_language_data(void **state) {
    (void)state;
    const char *saved = getenv("TESSDATA_PREFIX");
    char *keep = saved ? strdup(saved) : NULL;
    setenv("TESSDATA_PREFIX", "/nonexistent/tessdata", 1);
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(read_pdf(fx.scan_pdf, CQ_OCR_AUTO, 0, NULL, NULL, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "no text layer on any of 1 pages, and OCR failed: Tesseract cannot load its "
                                    "language data chi_sim+eng"));
    assert_string_equal(cq_err_name(&err), "ocr_unavailable");
    assert_int_equal(read_pdf(fx.mixed_pdf, CQ_OCR_AUTO, 0, NULL, NULL, &d, &err), CQ_OK);
    assert_false(d.pages[0].ocr);
    assert_non_null(strstr(d.pages[0].quality_reason, "no text layer (scanned page?); OCR failed: Tesseract cannot"));
    assert_string_equal(d.pages[1].quality_reason, "");
    cq_doctext_free(&d);
    assert_int_equal(read_pdf(fx.text_pdf, CQ_OCR_FORCE, 0, NULL, NULL, &d, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "OCR was asked for but is not available: Tesseract cannot load"));
    assert_string_equal(cq_err_name(&err), "ocr_unavailable");
    assert_null(d.text);
    if (keep) setenv("TESSDATA_PREFIX", keep, 1);
    else unsetenv("TESSDATA_PREFIX");
    free(keep);
}

static void test_mode_names(void **state) {
    (void)state;
    cq_reader_ocr m = CQ_OCR_FORCE;
    assert_true(cq_reader_ocr_parse("off", &m) && m == CQ_OCR_OFF);
    assert_true(cq_reader_ocr_parse("auto", &m) && m == CQ_OCR_AUTO);
    assert_true(cq_reader_ocr_parse("force", &m) && m == CQ_OCR_FORCE);
    assert_false(cq_reader_ocr_parse("on", &m));
    assert_false(cq_reader_ocr_parse(NULL, &m));
    assert_string_equal(cq_reader_ocr_name(CQ_OCR_OFF), "off");
    assert_string_equal(cq_reader_ocr_name(CQ_OCR_AUTO), "auto");
    assert_string_equal(cq_reader_ocr_name(CQ_OCR_FORCE), "force");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_names),
        cmocka_unit_test(test_scanned_page),
        cmocka_unit_test(test_mixed_document_in_parallel),
        cmocka_unit_test(test_force),
        cmocka_unit_test(test_without_language_data),
    };
    return cmocka_run_group_tests(tests, make_fixtures, remove_fixtures);
}
