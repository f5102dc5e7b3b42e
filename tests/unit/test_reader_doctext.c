/* reader/: the PDF, Markdown and plain-text readers, the format table and the page / box queries.
 *
 * Committed fixtures (tests/data/pdf, made by tools/make_test_pdfs.py) cover the product without ../shared;
 * the real documents of ../shared/eval are used when $CLAUSEQA_SHARED points at them (skipped otherwise). */
#include <iconv.h>
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
#include "reader/reader_internal.h"
#include "core/utf8.h"

/* ---- helpers ----------------------------------------------------------------------------------------------- */

/* The readers, called as the format table calls them. PDFs are read with OCR off: these tests are about text
 * layers (OCR has tests/unit/test_reader_ocr.c); one case below checks what auto does with an image of no text. */
static cq_status from_pdf_ocr(const char *path, cq_reader_ocr ocr, cq_doctext *out, cq_err *err) {
    cq_reader_input in = {.path = path, .ocr = ocr};
    return cq_reader_read_pdf(&in, out, err);
}

static cq_status from_pdf(const char *path, cq_doctext *out, cq_err *err) {
    return from_pdf_ocr(path, CQ_OCR_OFF, out, err);
}

static cq_status from_markdown(const char *data, size_t len, cq_doctext *out, cq_err *err) {
    cq_reader_input in = {.data = data, .len = len};
    return cq_reader_read_markdown(&in, out, err);
}

static cq_status from_plain(const char *data, size_t len, cq_doctext *out, cq_err *err) {
    cq_reader_input in = {.data = data, .len = len};
    return cq_reader_read_plain(&in, out, err);
}

static char *fixture_path(const char *name) {
    static char buf[4096];
    const char *src = getenv("CLAUSEQA_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/tests/data/pdf/%s", src ? src : ".", name);
    return buf;
}

/* Path of a file under ../shared/eval, or NULL (and a note) when the shared data is absent. */
static const char *shared_path(const char *rel) {
    static char buf[4096];
    const char *shared = getenv("CLAUSEQA_SHARED");
    if (!shared) {
        print_message("  (skipped: CLAUSEQA_SHARED is not set)\n");
        return NULL;
    }
    snprintf(buf, sizeof buf, "%s/eval/%s", shared, rel);
    if (access(buf, R_OK) != 0) {
        print_message("  (skipped: %s not found)\n", buf);
        return NULL;
    }
    return buf;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

static char *write_temp(const char *bytes, size_t n, const char *suffix) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/cq_doctext_test_%d_%s", (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
    return path;
}

/* The text without page breaks: what a reader sees when a paragraph runs on to the next page. */
static char *without_ff(const cq_doctext *d) {
    char *s = malloc(d->text_len + 1);
    size_t k = 0;
    for (size_t i = 0; i < d->text_len; i++)
        if (d->text[i] != '\f') s[k++] = d->text[i];
    s[k] = 0;
    return s;
}

/* True if `line` is one whole line (between '\n' / '\f' / the ends) of the text. */
static bool has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = strstr(text, line); p; p = strstr(p + 1, line)) {
        bool start = p == text || p[-1] == '\n' || p[-1] == '\f';
        bool end = p[n] == 0 || p[n] == '\n' || p[n] == '\f';
        if (start && end) return true;
    }
    return false;
}

static uint32_t offset_of(const cq_doctext *d, const char *needle) {
    const char *p = strstr(d->text, needle);
    assert_non_null(p);
    return (uint32_t)(p - d->text);
}

/* The invariants every PDF result keeps. */
static void check_pdf_invariants(const cq_doctext *d) {
    assert_int_equal(strlen(d->text), d->text_len);
    assert_true(cq_utf8_valid(d->text, d->text_len));
    assert_null(strstr(d->text, "\n\n"));
    int ff = 0;
    for (size_t i = 0; i < d->text_len; i++) ff += d->text[i] == '\f';
    assert_int_equal(ff, d->n_pages - 1);
    uint32_t prev_end = 0;
    size_t line = 0;
    for (int p = 0; p < d->n_pages; p++) {
        const cq_page *pg = &d->pages[p];
        assert_int_equal(pg->page_no, p + 1);
        assert_true(pg->text_start <= pg->text_end && pg->text_end <= d->text_len);
        assert_true(pg->text_start >= prev_end);
        assert_true(pg->quality >= 0 && pg->quality <= 1);
        assert_int_equal(pg->line_first, line);
        assert_int_equal(pg->n_chars, cq_utf8_count(d->text + pg->text_start, pg->text_end - pg->text_start));
        for (uint32_t l = pg->line_first; l < pg->line_first + pg->n_lines; l++, line++) {
            const cq_line *ln = &d->lines[l];
            assert_int_equal(ln->page_no, p + 1);
            assert_true(ln->text_start >= pg->text_start && ln->text_end <= pg->text_end);
            assert_true(ln->text_start < ln->text_end);
            assert_true(ln->y0 <= ln->y1 && ln->y0 >= -1 && ln->y1 <= pg->height + 1);
            assert_true(ln->glyph_first + ln->n_glyphs <= d->n_glyphs);
            for (uint32_t g = ln->glyph_first; g < ln->glyph_first + ln->n_glyphs; g++) {
                uint32_t off = d->glyph_offset[g];
                assert_true(off >= ln->text_start && off < ln->text_end);
                assert_true(((unsigned char)d->text[off] & 0xC0) != 0x80); /* starts a character */
                assert_true(d->glyph_x0[g] <= d->glyph_x1[g] + 0.01f);
                if (g > ln->glyph_first) assert_true(off > d->glyph_offset[g - 1]);
            }
        }
        prev_end = pg->text_end;
    }
    assert_int_equal(line, d->n_lines);
    assert_true(d->quality >= 0 && d->quality <= 1);
}

static void check_boxes_inside(const cq_doctext *d, uint32_t start, uint32_t end, int page_first, int page_last,
                               size_t min_boxes) {
    cq_box *boxes = NULL;
    size_t n = cq_doctext_boxes(d, start, end, &boxes);
    assert_true(n >= min_boxes);
    for (size_t i = 0; i < n; i++) {
        assert_true(boxes[i].page_no >= page_first && boxes[i].page_no <= page_last);
        const cq_page *pg = &d->pages[boxes[i].page_no - 1];
        assert_true(boxes[i].x0 >= 0 && boxes[i].x0 < boxes[i].x1 && boxes[i].x1 <= pg->width);
        assert_true(boxes[i].y0 >= 0 && boxes[i].y0 < boxes[i].y1 && boxes[i].y1 <= pg->height);
    }
    free(boxes);
}

/* ---- committed PDF fixtures -------------------------------------------------------------------------------- */

static void test_pdf_zh_fixture(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(fixture_path("zh_law.pdf"), &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    assert_int_equal(d.n_pages, 3);
    assert_string_equal(d.title, "测试法规");

    /* a wrapped article is one line, CJK joined without a space */
    assert_true(has_line(d.text, "第一条 为了规范测试文件的组织和行为，鼓励、支持、引导测试工作的发展，保护测试人员的合法权益，"
                                 "制定本法。"));
    assert_true(has_line(d.text, "第一章 总则"));
    assert_true(has_line(d.text, "（一）测试以需求为依据；"));
    /* a full line ending in a character, then a sentence end in the middle of the next, is still one paragraph */
    assert_true(has_line(d.text, "第七条 国家鼓励公民、法人和其他组织参与测试工作，依法保护其合法权益。本条所称测试工作包括单元测试"
                                 "和集成测试。"));
    /* "第 五 条" printed with gaps: label closed up, one space before the body; "2 0 1 7年" closed up */
    assert_true(has_line(d.text, "第五条 本法自2017年起施行。"));
    /* running header and page numbers are gone */
    assert_null(strstr(d.text, "测试法规汇编"));
    assert_null(strstr(d.text, "- 1 -"));
    assert_null(strstr(d.text, "- 2 -"));
    /* an article running on to page 2: '\f' alone at the wrap, "\n\f" where page 2 ends a paragraph */
    assert_non_null(strstr(d.text, "不得隐瞒\f测试中发现的缺陷。"));
    assert_non_null(strstr(d.text, "责令改正。\n\f第二章 附则"));
    char *flat = without_ff(&d);
    assert_true(has_line(flat, "第六条 测试人员应当如实记录结果，任何单位和个人不得篡改测试记录，不得隐瞒测试中发现的缺陷。"));
    free(flat);

    /* quality: the spaced-out year counts against page 1 */
    assert_true(d.pages[0].quality < 1.0);
    assert_non_null(strstr(d.pages[0].quality_reason, "broken spacing"));
    assert_true(d.pages[1].quality == 1.0);
    assert_string_equal(d.pages[1].quality_reason, "");
    assert_non_null(strstr(d.quality_reason, "page 1"));

    /* page spans and boxes */
    int first, last;
    uint32_t a = offset_of(&d, "第二条"), b = a + (uint32_t)strlen("第二条");
    cq_doctext_page_span(&d, a, b, &first, &last);
    assert_int_equal(first, 1);
    assert_int_equal(last, 1);
    cq_box *boxes = NULL;
    assert_int_equal(cq_doctext_boxes(&d, a, b, &boxes), 1);
    assert_int_equal(boxes[0].page_no, 1);
    assert_float_equal(boxes[0].x0, 60.0, 0.5); /* three 12-pt glyphs from x = 60 */
    assert_float_equal(boxes[0].x1, 96.0, 0.5);
    free(boxes);
    /* article 2 is two printed lines: two boxes */
    a = offset_of(&d, "第二条");
    b = offset_of(&d, "程序行为的文件。") + (uint32_t)strlen("程序行为的文件。");
    check_boxes_inside(&d, a, b, 1, 1, 2);
    assert_int_equal(cq_doctext_boxes(&d, a, b, &boxes), 2);
    free(boxes);
    /* article 6 crosses the page */
    a = offset_of(&d, "第六条");
    b = offset_of(&d, "发现的缺陷。");
    cq_doctext_page_span(&d, a, b, &first, &last);
    assert_int_equal(first, 1);
    assert_int_equal(last, 2);
    check_boxes_inside(&d, a, b, 1, 2, 2);
    cq_doctext_page_span(&d, offset_of(&d, "第九条"), (uint32_t)d.text_len, &first, &last);
    assert_int_equal(first, 3);
    assert_int_equal(last, 3);
    /* empty span */
    assert_int_equal(cq_doctext_boxes(&d, 10, 10, &boxes), 0);
    assert_null(boxes);
    cq_doctext_free(&d);
    assert_null(d.text);
}

static void test_pdf_en_fixture(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(fixture_path("en_contract.pdf"), &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    assert_int_equal(d.n_pages, 3);
    assert_null(d.title); /* "Microsoft Word - ….docx" is not a title */

    assert_true(has_line(d.text, "SERVICES AGREEMENT"));
    assert_true(has_line(d.text, "1. Definitions."));
    assert_true(has_line(d.text, "Section 3 Fees"));
    assert_true(has_line(d.text, "\"Services\" means the consulting services described in Exhibit A, as amended from time to "
                                 "time by written agreement of the parties, together with any reports delivered under "
                                 "this Agreement."));
    /* "termi-" + "nation": the hyphen of a word split at the line end goes; a real hyphen stays */
    assert_non_null(strstr(d.text, "legal consequences of termination are set out in Section 5."));
    assert_non_null(strstr(d.text, "forty-five days"));
    /* Latin wrap across pages: '\f' stands for the space */
    assert_non_null(strstr(d.text, "per month\funtil paid in full"));
    /* a label and its text set apart by a tab stop are one line */
    assert_true(has_line(d.text, "5.1 All notices under this Agreement shall be in writing."));
    assert_null(strstr(d.text, "CONFIDENTIAL"));
    assert_null(strstr(d.text, "Page 1 of"));

    /* page 3 is an image without text */
    assert_int_equal(d.pages[2].n_chars, 0);
    assert_true(d.pages[2].quality == 0.0);
    assert_string_equal(d.pages[2].quality_reason, "no text layer (scanned page?)");
    assert_true(d.quality < 0.9 && d.quality > 0.3);
    assert_non_null(strstr(d.quality_reason, "page 3"));

    uint32_t a = offset_of(&d, "Section 3 Fees");
    check_boxes_inside(&d, a, a + 14, 1, 1, 1);
    cq_box *boxes = NULL;
    assert_int_equal(cq_doctext_boxes(&d, a, a + 7, &boxes), 1); /* "Section": 7 Courier glyphs, 6 pt each */
    assert_float_equal(boxes[0].x0, 72.0, 0.5);
    assert_float_equal(boxes[0].x1, 72.0 + 7 * 6.0, 0.5);
    free(boxes);
    cq_doctext_free(&d);
}

static void test_pdf_bad_inputs(void **state) {
    (void)state;
    cq_doctext d;
    cq_err err = {0};

    assert_int_equal(from_pdf("/nonexistent/dir/x.pdf", &d, &err), CQ_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_null(d.text);

    assert_int_equal(from_pdf("/tmp", &d, &err), CQ_ERR_IO); /* a directory */
    assert_non_null(strstr(err.msg, "cannot read"));

    char *p = write_temp("", 0, "empty.pdf");
    assert_int_equal(from_pdf(p, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "empty"));
    unlink(p);

    const char junk[] = "PK\003\004 this is a zip file, not a PDF at all";
    p = write_temp(junk, sizeof junk - 1, "junk.pdf");
    assert_int_equal(from_pdf(p, &d, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a PDF"));
    unlink(p);

    /* the first half of a real PDF: MuPDF rebuilds it and finds no pages */
    size_t n = 0;
    char *whole = read_file(fixture_path("zh_law.pdf"), &n);
    assert_non_null(whole);
    p = write_temp(whole, n / 2, "half.pdf");
    assert_int_equal(from_pdf(p, &d, &err), CQ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "truncated"));
    unlink(p);
    /* a header and then garbage */
    p = write_temp("%PDF-1.4\n%garbage\n1 0 obj\n<<", 28, "stub.pdf");
    assert_int_equal(from_pdf(p, &d, &err), CQ_ERR_FORMAT);
    unlink(p);
    free(whole);

    assert_int_equal(from_pdf(fixture_path("encrypted.pdf"), &d, &err), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "encrypted PDF: a password is required"));

    assert_int_equal(from_pdf(fixture_path("scanned.pdf"), &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "no text layer on any of 2 pages (scanned document? OCR is off)"));
    assert_null(d.text);
    assert_null(d.pages);
    /* OCR finds nothing to read in a grey gradient: the same failure, saying so */
    assert_int_equal(from_pdf_ocr(fixture_path("scanned.pdf"), CQ_OCR_AUTO, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "no text layer on any of 2 pages, and OCR recognised no text on them"));
    assert_null(d.text);

    assert_int_equal(from_pdf(NULL, &d, &err), CQ_ERR_INVALID);
}

/* ---- real documents from ../shared/eval -------------------------------------------------------------------- */

static void test_pdf_shared_law(void **state) {
    (void)state;
    const char *path = shared_path("laws-zh-pdf/docs/农民专业合作社法(2017-12-27).pdf");
    if (!path) return;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(path, &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    assert_int_equal(d.n_pages, 8);
    assert_string_equal(d.title, "中华人民共和国农民专业合作社法");
    assert_true(d.quality > 0.99);
    /* "…保护农" / "民专业合作社…" on two printed lines */
    assert_true(has_line(d.text, "第一条 为了规范农民专业合作社的组织和行为，鼓励、支持、引导农民专业合作社的发展，保护农民专业合作社"
                                 "及其成员的合法权益，推进农业农村现代化，制定本法。"));
    const char *art = "第三十三条 农民专业合作社设理事长一名，可以设理事会。理事长为本社的法定代表人。";
    assert_true(has_line(d.text, art));
    uint32_t a = offset_of(&d, art), b = a + (uint32_t)strlen(art);
    int first, last;
    cq_doctext_page_span(&d, a, b, &first, &last);
    assert_int_equal(first, 5);
    assert_int_equal(last, 5);
    check_boxes_inside(&d, a, b, 5, 5, 1);
    /* a paragraph of two printed lines: two boxes on page 5, one above the other */
    const char *para = "理事长、理事、执行监事或者监事会成员，由成员大会从本社成员中选举产生，依照本法和章程的规定行使职权，"
                       "对成员大会负责。";
    assert_true(has_line(d.text, para));
    a = offset_of(&d, para);
    cq_box *boxes = NULL;
    size_t nb = cq_doctext_boxes(&d, a, a + (uint32_t)strlen(para), &boxes);
    assert_int_equal(nb, 2);
    for (size_t i = 0; i < nb; i++) assert_int_equal(boxes[i].page_no, 5);
    assert_true(boxes[0].y1 <= boxes[1].y0 + 1);
    free(boxes);
    cq_doctext_free(&d);
}

static void test_pdf_shared_contract(void **state) {
    (void)state;
    const char *path =
        shared_path("cuad-dev/docs/2ThemartComInc_19990826_10-12G_EX-10.10_6700288_EX-10.10_Co-Branding_Agreement_Agency_"
                    "Agreement.pdf");
    if (!path) return;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(path, &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    assert_true(has_line(d.text, "1. DEFINITIONS."));
    assert_true(has_line(d.text, "(c) \"CUSTOMERS\" means all users who access Co-Branded Site."));
    assert_non_null(strstr(d.text, "(a) \"CONTENT\" means all content or information, in any medium, provided by a party to "
                                   "the other party for use in conjunction with the performance of its obligations "
                                   "hereunder"));
    /* the running footer "Source: 2THEMART COM INC, 10-12G, 8/26/1999" is on every page */
    assert_null(strstr(d.text, "Source: 2THEMART"));
    cq_doctext_free(&d);
}

/* A contract whose page numbers sit right under the text, not in the margin, above a running footer. */
static void test_pdf_shared_page_numbers(void **state) {
    (void)state;
    const char *path = shared_path("cuad-dev/docs/ConformisInc_20191101_10-Q_EX-10.6_11861402_EX-10.6_Development_"
                                   "Agreement.pdf");
    if (!path) return;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(path, &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    for (int p = 0; p < d.n_pages; p++) {
        const cq_page *pg = &d.pages[p];
        char num[16];
        snprintf(num, sizeof num, "%d", p + 1);
        char *page_text = strndup(d.text + pg->text_start, pg->text_end - pg->text_start);
        assert_false(has_line(page_text, num));
        free(page_text);
    }
    assert_null(strstr(d.text, "Source: CONFORMIS"));
    cq_doctext_free(&d);
}

/* An OCR layer whose glyphs have no width: MuPDF spaces out every letter; the reader rebuilds the words. */
static void test_pdf_shared_zero_width_glyphs(void **state) {
    (void)state;
    const char *path = shared_path("mmlongbench-dev/docs/fd76bbefe469561966e5387aa709c482.pdf");
    if (!path) return;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_pdf(path, &d, &err), CQ_OK);
    check_pdf_invariants(&d);
    assert_non_null(strstr(d.text, "Slight shock"));
    assert_null(strstr(d.text, "S l i g h t"));
    assert_true(d.quality > 0.9);
    cq_doctext_free(&d);
}

static void test_markdown_shared_law(void **state) {
    (void)state;
    const char *path = shared_path("laws-zh/docs/农民专业合作社法(2017-12-27).md");
    if (!path) return;
    size_t n = 0;
    char *data = read_file(path, &n);
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_markdown(data, n, &d, &err), CQ_OK);
    assert_string_equal(d.title, "中华人民共和国农民专业合作社法");
    assert_true(has_line(d.text, "第三十三条 农民专业合作社设理事长一名，可以设理事会。理事长为本社的法定代表人。"));
    assert_true(has_line(d.text, "第一章 总则"));
    assert_null(strstr(d.text, "<!--"));
    assert_null(strstr(d.text, "#"));
    assert_null(strstr(d.text, "\n\n"));
    cq_doctext_free(&d);
    free(data);
}

/* ---- Markdown ---------------------------------------------------------------------------------------------- */

static cq_doctext md(const char *s) {
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_markdown(s, strlen(s), &d, &err), CQ_OK);
    return d;
}

static void test_markdown(void **state) {
    (void)state;
    cq_doctext d = md("# 中华人民共和国测试法\n\n2020年1月1日 通过\n\n<!-- INFO END -->\n\n## 第一章 总则\n\n"
                      "第一条 为了**规范**测试，制定本法。\n\n\n\n第二条 见[附件](http://x/y.md)。\n"
                      "<!-- FORCE BREAK -->\n"
                      "| 条文 | 罪名 |\n|-----|-----|\n| 第一条 | 测试罪 |\n");
    assert_string_equal(d.title, "中华人民共和国测试法");
    assert_string_equal(d.text, "中华人民共和国测试法\n2020年1月1日 通过\n第一章 总则\n第一条 为了规范测试，制定本法。\n"
                                "第二条 见附件。\n条文 罪名\n第一条 测试罪");
    assert_int_equal(d.n_pages, 0);
    assert_null(d.pages);
    assert_true(d.quality == 1.0);
    int first = -1, last = -1;
    cq_doctext_page_span(&d, 0, 5, &first, &last);
    assert_int_equal(first, 0);
    assert_int_equal(last, 0);
    cq_box *boxes = (cq_box *)&d; /* must be reset */
    assert_int_equal(cq_doctext_boxes(&d, 0, 5, &boxes), 0);
    assert_null(boxes);
    cq_doctext_free(&d);

    /* a heading that is not first is not the title; multi-line comments; lists; CRLF; BOM */
    d = md("\xEF\xBB\xBFIntro text.\r\n\r\n# Not a title\r\n<!-- a\r\ncomment -->\r\n- item one\r\n- item two\r\n"
           "1. first\r\n2. second\r\n");
    assert_null(d.title);
    assert_string_equal(d.text, "Intro text.\nNot a title\nitem one\nitem two\n1. first\n2. second");
    cq_doctext_free(&d);

    /* hard-wrapped paragraphs separated by blank lines are joined (Latin with a space, CJK without) */
    d = md("Title line\n\nThis paragraph is wrapped by the editor at a fixed width of about\n"
           "sixty columns, as many Markdown files are, and its lines must be\n"
           "joined into one paragraph of text for the parser to see it whole.\n\n"
           "Second paragraph is short and stays a line of its own here today.\n\n"
           "A third one, also wrapped at the same width as the others are in\n"
           "this file, ends here.\n");
    assert_string_equal(d.text, "Title line\nThis paragraph is wrapped by the editor at a fixed width of about sixty "
                                "columns, as many Markdown files are, and its lines must be joined into one paragraph "
                                "of text for the parser to see it whole.\nSecond paragraph is short and stays a line "
                                "of its own here today.\nA third one, also wrapped at the same width as the others are "
                                "in this file, ends here.");
    cq_doctext_free(&d);

    /* the laws corpus: consecutive short lines are kept as lines */
    d = md("# 标题\n\n2022年1月24日 会议审议批准\n2022年2月25日 发布\n");
    assert_string_equal(d.text, "标题\n2022年1月24日 会议审议批准\n2022年2月25日 发布");
    cq_doctext_free(&d);

    /* single * and _ are not markup; code spans and escapes are */
    d = md("每月 40*4=160h，文件 a_b_c，`code` 和 \\*星号\\*\n");
    assert_string_equal(d.text, "每月 40*4=160h，文件 a_b_c，code 和 *星号*");
    cq_doctext_free(&d);

    cq_err err = {0};
    assert_int_equal(from_markdown("", 0, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "the file contains no text"));
    assert_int_equal(from_markdown("  \n\n<!-- only a comment -->\n# \n", 30, &d, &err), CQ_ERR_EMPTY);
    assert_string_equal(err.msg, "the file contains no text");
    assert_null(d.text);
}

/* ---- plain text -------------------------------------------------------------------------------------------- */

static cq_doctext plain(const char *s, size_t n) {
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_plain(s, n, &d, &err), CQ_OK);
    assert_true(cq_utf8_valid(d.text, d.text_len));
    assert_null(strstr(d.text, "\n\n"));
    return d;
}

static void test_plain(void **state) {
    (void)state;
    /* CRLF, a BOM, blank lines collapse, spaces trimmed */
    const char crlf[] = "\xEF\xBB\xBF" "MUTUAL NDA\r\n\r\n\r\n1. Scope   of  this NDA.  \r\n2. Term.\r\n";
    cq_doctext d = plain(crlf, sizeof crlf - 1);
    assert_string_equal(d.text, "MUTUAL NDA\n1. Scope of this NDA.\n2. Term.");
    assert_null(d.title);
    assert_true(d.quality == 1.0);
    cq_doctext_free(&d);

    /* old Mac line ends */
    const char cr[] = "line one\rline two\r";
    d = plain(cr, sizeof cr - 1);
    assert_string_equal(d.text, "line one\nline two");
    cq_doctext_free(&d);

    /* a policy notice flattened onto one long line (200 characters or more): spaces between CJK runs were its
     * paragraph breaks */
    const char flat[] = "国家税务总局南阳市税务局 各省辖市税务局，局内各单位：为坚决贯彻落实党中央、国务院关于打赢疫情防控阻击战"
                        "决策部署，现就我省税务系统认真落实各项税收支持政策提出以下要求。 一、支持疫情防控物资供应 "
                        "对生产、销售疫情防控重点物资的企业，申请办理期末留抵税额退税的，主管税务机关要加快审核进度。 "
                        "二、支持疾控医疗救治 对非营利性医疗机构提供的医疗服务免征增值税，对其自产自用的制剂免征增值税，"
                        "其自用的房产、土地免征房产税、城镇土地使用税。";
    d = plain(flat, sizeof flat - 1);
    assert_true(has_line(d.text, "一、支持疫情防控物资供应"));
    assert_true(has_line(d.text, "二、支持疾控医疗救治"));
    assert_true(has_line(d.text, "国家税务总局南阳市税务局"));
    assert_non_null(strstr(d.text, "\n对非营利性医疗机构提供的医疗服务免征增值税，"));
    cq_doctext_free(&d);
    /* … but a short line keeps its spaces, and a label its one space */
    const char label[] = "第一条 为了规范测试 制定本法。\n第 二 条 本法自2 0 1 7年起施行。\n";
    d = plain(label, sizeof label - 1);
    assert_string_equal(d.text, "第一条 为了规范测试 制定本法。\n第二条 本法自2017年起施行。");
    assert_true(d.quality < 1.0);
    assert_non_null(strstr(d.quality_reason, "broken spacing"));
    cq_doctext_free(&d);

    /* a hard-wrapped text without blank lines: lines reaching the width are joined unless a sentence ends */
    const char wrapped[] = "This agreement is made between the parties named below and sets out the\n"
                           "terms under which the receiving party may use the confidential information\n"
                           "of the disclosing party.\n"
                           "The receiving party shall protect the information with reasonable care and\n"
                           "shall not disclose it to any third party without prior written consent.\n"
                           "1. Definitions in this agreement apply to every schedule and to every annex\n"
                           "attached to it.\n";
    d = plain(wrapped, sizeof wrapped - 1);
    assert_string_equal(d.text, "This agreement is made between the parties named below and sets out the terms under "
                                "which the receiving party may use the confidential information of the disclosing "
                                "party.\nThe receiving party shall protect the information with reasonable care and "
                                "shall not disclose it to any third party without prior written consent.\n1. "
                                "Definitions in this agreement apply to every schedule and to every annex attached to "
                                "it.");
    cq_doctext_free(&d);

    /* GB18030 / GBK bytes are converted: "中华人民共和国\n" */
    const char gbk[] = "\xD6\xD0\xBB\xAA\xC8\xCB\xC3\xF1\xB9\xB2\xBA\xCD\xB9\xFA\n";
    d = plain(gbk, sizeof gbk - 1);
    assert_string_equal(d.text, "中华人民共和国");
    assert_true(d.quality == 1.0);
    cq_doctext_free(&d);

    /* UTF-16LE with a BOM */
    const char u16[] = "\xFF\xFE" "A\0B\0\n\0" "\x2D\x4E";
    d = plain(u16, sizeof u16 - 1);
    assert_string_equal(d.text, "AB\n中");
    cq_doctext_free(&d);

    /* mostly valid UTF-8 with a few bad bytes: kept as UTF-8, the bad bytes count against quality */
    const char bad[] = "合同 contract text with one bad byte \xFF here and another \xFE there.";
    d = plain(bad, sizeof bad - 1);
    assert_non_null(strstr(d.text, "one bad byte here"));
    assert_true(d.quality < 1.0);
    assert_non_null(strstr(d.quality_reason, "U+FFFD"));
    cq_doctext_free(&d);

    /* control characters and private-use characters are dropped and counted */
    const char ctl[] = "abc\x01\x02" "def \xEE\x80\x80" "ghi";
    d = plain(ctl, sizeof ctl - 1);
    assert_string_equal(d.text, "abcdef ghi");
    assert_true(d.quality < 1.0);
    cq_doctext_free(&d);

    cq_err err = {0};
    assert_int_equal(from_plain("", 0, &d, &err), CQ_ERR_EMPTY);
    assert_non_null(strstr(err.msg, "the file contains no text"));
    assert_int_equal(from_plain(" \r\n\t\n\xE3\x80\x80\n", 8, &d, &err), CQ_ERR_EMPTY);
    assert_string_equal(err.msg, "the file contains no text");
    assert_int_equal(from_plain("\xEF\xBB\xBF", 3, &d, &err), CQ_ERR_EMPTY);
    assert_int_equal(from_plain(NULL, 0, NULL, &err), CQ_ERR_INVALID);
}

static void test_free_twice_and_null(void **state) {
    (void)state;
    cq_doctext_free(NULL);
    cq_doctext d = md("text");
    cq_doctext_free(&d);
    cq_doctext_free(&d);
    int first = 7, last = 7;
    cq_doctext_page_span(NULL, 0, 1, &first, &last);
    assert_int_equal(first, 0);
    assert_int_equal(last, 0);
}

/* 第壹条 (financial numerals) is a label to the line rules as it is to the structure parser and the router: its
 * space is kept, the line starts an item, and the clause gets its number. */
static void test_financial_numerals(void **state) {
    (void)state;
    const char *labels[] = {"第壹条", "第贰拾条", "第拾伍条之壹", "第叁章", "第伍佰零壹条"};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        uint32_t cp[32];
        size_t n = 0;
        for (const char *p = labels[i]; *p && n < 32;) {
            size_t len;
            cp[n++] = cq_utf8_decode(p, strlen(p), &len);
            p += len;
        }
        assert_true(cq_dt_is_heading_label(cp, n));
        cp[n] = ' ';
        bool strong = false;
        assert_int_equal(cq_dt_item_label(cp, n + 1, &strong), n);
        assert_true(strong);
    }
    const char *text = "第壹条 甲方应当按时付款。\n第贰条 乙方应当按时交货。\n";
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_plain(text, strlen(text), &d, &err), CQ_OK);
    assert_string_equal(d.text, "第壹条 甲方应当按时付款。\n第贰条 乙方应当按时交货。");
    cq_structure st;
    assert_int_equal(cq_structure_parse(&d, &st, &err), CQ_OK);
    assert_int_equal(st.n_clauses, 2);
    assert_string_equal(st.clauses[0].label, "第壹条");
    assert_string_equal(st.clauses[0].label_key, "1");
    assert_string_equal(st.clauses[1].label, "第贰条");
    assert_string_equal(st.clauses[1].label_key, "2");
    cq_structure_free(&st);
    cq_doctext_free(&d);
}

/* ---- the format table ------------------------------------------------------------------------------------- */

static const char *detect(const char *filename, const char *head, cq_err *err) {
    cq_err_clear(err);
    const cq_reader_format *f = cq_reader_detect(filename, head, strlen(head), err);
    return f ? f->name : NULL;
}

static void test_format_table(void **state) {
    (void)state;
    size_t n;
    const cq_reader_format *t = cq_reader_formats(&n);
    assert_true(n >= 3);
    for (size_t i = 0; i < n; i++) {
        /* every row is complete, names and extensions name one format each */
        assert_non_null(t[i].name);
        assert_non_null(t[i].label);
        assert_non_null(t[i].mime);
        assert_non_null(t[i].read);
        assert_non_null(t[i].extensions[0]);
        assert_int_equal(t[i].has_pages, t[i].render != NULL);
        assert_ptr_equal(cq_reader_format_named(t[i].name), &t[i]);
        for (size_t e = 0; e < CQ_READER_MAX_EXTENSIONS && t[i].extensions[e]; e++) {
            char name[64];
            snprintf(name, sizeof name, "Some File.%s", t[i].extensions[e]);
            assert_ptr_equal(cq_reader_format_of_name(name), &t[i]);
        }
    }
    assert_null(cq_reader_format_named("doc"));
    assert_null(cq_reader_format_named(NULL));
    assert_null(cq_reader_format_of_name("scan.png"));
    assert_null(cq_reader_format_of_name("README"));
    assert_string_equal(cq_reader_format_of_name("LAW.PDF")->name, "pdf");
    assert_true(cq_reader_format_named("pdf")->has_pages);
    assert_false(cq_reader_format_named("md")->has_pages);
    assert_string_equal(cq_reader_format_named("pdf")->mime, "application/pdf");
    assert_false(cq_reader_format_named("docx")->has_pages);
    assert_false(cq_reader_format_named("html")->has_pages);
    assert_string_equal(cq_reader_format_of_name("通知.HTM")->name, "html");
}

static void test_format_detect(void **state) {
    (void)state;
    cq_err e = {0};
    assert_string_equal(detect("law.pdf", "%PDF-1.7\n", &e), "pdf");
    assert_string_equal(detect("law.PDF", "\n\n%PDF-1.4", &e), "pdf");
    assert_string_equal(detect("notes.md", "# Title", &e), "md");
    assert_string_equal(detect("notes.Markdown", "# Title", &e), "md");
    assert_string_equal(detect("a.txt", "text", &e), "txt");
    assert_string_equal(detect("a.text", "text", &e), "txt");
    /* the extension decides: a Markdown file that quotes a PDF header stays Markdown */
    assert_string_equal(detect("a.md", "%PDF-1.7", &e), "md");
    /* an unknown extension (an upload's spool name) is recognised by its magic bytes */
    assert_string_equal(detect("upload.bin", "%PDF-1.7", &e), "pdf");
    assert_string_equal(detect("upload", "%PDF-1.7", &e), "pdf");
    /* a format with magic bytes must have them */
    assert_null(detect("fake.pdf", "this is plain text, not a PDF", &e));
    assert_int_equal(e.code, CQ_ERR_FORMAT);
    assert_string_equal(e.msg, "named .pdf but not a PDF (no %PDF- header)");
    assert_null(detect("empty.pdf", "", &e));
    assert_int_equal(e.code, CQ_ERR_EMPTY);
    assert_null(detect("image.png", "\x89PNG", &e));
    assert_int_equal(e.code, CQ_ERR_UNSUPPORTED);
    assert_string_equal(e.msg, "unsupported file type '.png' (use PDF, Word (DOCX), HTML, Markdown or plain text)");
    /* Word files are zip archives; HTML has no magic bytes, its extension says it */
    assert_string_equal(detect("law.docx", "PK\x03\x04\x14\x00", &e), "docx");
    assert_string_equal(detect("upload", "PK\x03\x04\x14\x00", &e), "docx");
    assert_null(detect("old.docx", "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", &e)); /* a .doc, or a password-protected file */
    assert_int_equal(e.code, CQ_ERR_FORMAT);
    assert_string_equal(e.msg, "named .docx but not a Word (DOCX) file (it does not start like one)");
    assert_null(detect("old.doc", "\xd0\xcf\x11\xe0", &e));
    assert_int_equal(e.code, CQ_ERR_UNSUPPORTED);
    assert_string_equal(detect("page.html", "<!DOCTYPE html>", &e), "html");
    assert_string_equal(detect("page.HTM", "<html>", &e), "html");
    assert_string_equal(detect("page.xhtml", "<?xml version=\"1.0\"?>", &e), "html");
    /* magic bytes count only within the head */
    char head[CQ_READER_HEAD_BYTES + 16];
    memset(head, ' ', sizeof head);
    memcpy(head + CQ_READER_HEAD_BYTES + 1, "%PDF-", 5);
    cq_err err = {0};
    assert_null(cq_reader_detect("late.bin", head, sizeof head, &err));
    assert_int_equal(err.code, CQ_ERR_UNSUPPORTED);
}

/* Issue 29: a GB18030 text file with one byte that fits no GB18030 sequence: only that byte is replaced (iconv
 * refused the whole file, which was then read as UTF-8: every Chinese character replaced). */
static void test_plain_gb_bad_byte(void **state) {
    (void)state;
    const char *law = "第一条 为了保护劳动者的合法权益，调整劳动关系，建立和维护适应社会主义市场经济的劳动制度，"
                      "促进经济发展和社会进步，根据宪法，制定本法。\n第二条 在中华人民共和国境内的企业、个体经济组织"
                      "和与之形成劳动关系的劳动者，适用本法。\n";
    size_t len;
    iconv_t cd = iconv_open("GB18030", "UTF-8");
    assert_true(cd != (iconv_t)-1);
    size_t in_left = strlen(law), cap = in_left * 2 + 16, out_left = cap;
    char *buf = malloc(cap + 1), *o = buf + 1, *in = (char *)law;
    assert_true(iconv(cd, &in, &in_left, &o, &out_left) != (size_t)-1);
    iconv_close(cd);
    len = cap - out_left;
    /* the bad byte after the first character (第 is two bytes) */
    memmove(buf, buf + 1, 2);
    buf[2] = (char)0xFF;
    cq_doctext d;
    cq_err err = {0};
    assert_int_equal(from_plain(buf, len + 1, &d, &err), CQ_OK);
    assert_non_null(strstr(d.text, "第一条 为了保护劳动者的合法权益"));
    assert_non_null(strstr(d.text, "第二条 在中华人民共和国境内的企业"));
    assert_true(d.quality > 0.9 && d.quality < 1);
    cq_doctext_free(&d);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pdf_zh_fixture),      cmocka_unit_test(test_pdf_en_fixture),
        cmocka_unit_test(test_pdf_bad_inputs),      cmocka_unit_test(test_pdf_shared_law),
        cmocka_unit_test(test_pdf_shared_contract), cmocka_unit_test(test_pdf_shared_page_numbers),
        cmocka_unit_test(test_pdf_shared_zero_width_glyphs), cmocka_unit_test(test_markdown_shared_law),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_plain),               cmocka_unit_test(test_plain_gb_bad_byte),               cmocka_unit_test(test_free_twice_and_null),
        cmocka_unit_test(test_financial_numerals),
        cmocka_unit_test(test_format_table),        cmocka_unit_test(test_format_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
