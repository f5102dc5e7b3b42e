/* PDFs written by the tests themselves (include after <cmocka.h>): many tiny pages in a flat or two-level page tree,
 * a page tree whose /Count lies or that loops, one page with a given content stream. Plain PDF 1.4, no compression,
 * the standard Courier font; fast to write (20,000 pages in a few milliseconds). */
#ifndef CQ_TEST_PDF_GEN_H
#define CQ_TEST_PDF_GEN_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    FILE *f;
    long *offsets; /* of object i (1-based) */
    int n_objects, cap;
} test_pdf;

static inline void test_pdf_begin(test_pdf *p, const char *path, int n_objects) {
    p->f = fopen(path, "wb");
    assert_non_null(p->f);
    p->cap = n_objects + 1;
    p->offsets = calloc((size_t)p->cap, sizeof *p->offsets);
    assert_non_null(p->offsets);
    p->n_objects = n_objects;
    fputs("%PDF-1.4\n", p->f);
}

/* Object num with the printf-formatted body. */
static inline void test_pdf_object(test_pdf *p, int num, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void test_pdf_object(test_pdf *p, int num, const char *fmt, ...) {
    p->offsets[num] = ftell(p->f);
    fprintf(p->f, "%d 0 obj\n", num);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->f, fmt, ap);
    va_end(ap);
    fputs("\nendobj\n", p->f);
}

static inline void test_pdf_stream(test_pdf *p, int num, const char *data, size_t len) {
    p->offsets[num] = ftell(p->f);
    fprintf(p->f, "%d 0 obj\n<< /Length %zu >>\nstream\n", num, len);
    fwrite(data, 1, len, p->f);
    fputs("\nendstream\nendobj\n", p->f);
}

static inline void test_pdf_end(test_pdf *p) {
    long xref = ftell(p->f);
    fprintf(p->f, "xref\n0 %d\n0000000000 65535 f \n", p->n_objects + 1);
    for (int i = 1; i <= p->n_objects; i++) fprintf(p->f, "%010ld 00000 n \n", p->offsets[i]);
    fprintf(p->f, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%ld\n%%%%EOF\n", p->n_objects + 1, xref);
    assert_int_equal(fclose(p->f), 0);
    free(p->offsets);
}

/* n_pages pages of 200 x 50 points saying "Page K" and a word (K from 1). fanout 0: every page a kid of the root;
 * fanout F: the root's kids are nodes of F pages each. count: the /Count the root claims (0: the truth); cycle: the
 * root also lists itself among its kids. */
static inline void test_pdf_pages(const char *path, int n_pages, int fanout, int count, int cycle) {
    int n_nodes = fanout ? (n_pages + fanout - 1) / fanout : 0;
    /* 1 catalog, 2 root, 3 font, 4.. nodes, then per page: page, content */
    int first_page = 4 + n_nodes, n_objects = first_page + 2 * n_pages - 1;
    test_pdf p;
    test_pdf_begin(&p, path, n_objects);
    test_pdf_object(&p, 1, "<< /Type /Catalog /Pages 2 0 R >>");
    p.offsets[2] = ftell(p.f);
    fprintf(p.f, "2 0 obj\n<< /Type /Pages /Count %d /Kids [", count ? count : n_pages);
    if (fanout)
        for (int i = 0; i < n_nodes; i++) fprintf(p.f, "%d 0 R ", 4 + i);
    else
        for (int i = 0; i < n_pages; i++) fprintf(p.f, "%d 0 R ", first_page + 2 * i);
    if (cycle) fputs("2 0 R ", p.f);
    fputs("] >>\nendobj\n", p.f);
    test_pdf_object(&p, 3, "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>");
    for (int i = 0; i < n_nodes; i++) {
        int lo = i * fanout, hi = lo + fanout < n_pages ? lo + fanout : n_pages;
        p.offsets[4 + i] = ftell(p.f);
        fprintf(p.f, "%d 0 obj\n<< /Type /Pages /Parent 2 0 R /Count %d /Kids [", 4 + i, hi - lo);
        for (int k = lo; k < hi; k++) fprintf(p.f, "%d 0 R ", first_page + 2 * k);
        fputs("] >>\nendobj\n", p.f);
    }
    for (int k = 0; k < n_pages; k++) {
        int obj = first_page + 2 * k;
        test_pdf_object(&p, obj,
                        "<< /Type /Page /Parent %d 0 R /MediaBox [0 0 200 50] /Resources << /Font << /F1 3 0 R >> "
                        ">> /Contents %d 0 R >>",
                        fanout ? 4 + k / fanout : 2, obj + 1);
        /* a word of its own on each page: a line the same on every page (digits aside) is a running header */
        char word[8];
        int w = 0;
        for (int v = k + 1; v > 0 && w < 7; v /= 26) word[w++] = (char)('a' + v % 26);
        word[w] = 0;
        char content[96];
        int len = snprintf(content, sizeof content, "BT /F1 10 Tf 10 20 Td (Page %d %s) Tj ET", k + 1, word);
        test_pdf_stream(&p, obj + 1, content, (size_t)len);
    }
    test_pdf_end(&p);
}

/* n_pages US-letter pages (Courier as /F1) whose content streams content(k, buf, cap) writes (k from 0; returns
 * the length, at most cap). */
static inline void test_pdf_letter_pages(const char *path, int n_pages, size_t (*content)(int k, char *buf, size_t cap)) {
    int n_objects = 3 + 2 * n_pages;
    test_pdf p;
    test_pdf_begin(&p, path, n_objects);
    test_pdf_object(&p, 1, "<< /Type /Catalog /Pages 2 0 R >>");
    p.offsets[2] = ftell(p.f);
    fprintf(p.f, "2 0 obj\n<< /Type /Pages /Count %d /Kids [", n_pages);
    for (int k = 0; k < n_pages; k++) fprintf(p.f, "%d 0 R ", 4 + 2 * k);
    fputs("] >>\nendobj\n", p.f);
    test_pdf_object(&p, 3, "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>");
    char buf[4096];
    for (int k = 0; k < n_pages; k++) {
        test_pdf_object(&p, 4 + 2 * k,
                        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                        "/Contents %d 0 R >>", 5 + 2 * k);
        size_t len = content(k, buf, sizeof buf);
        test_pdf_stream(&p, 5 + 2 * k, buf, len);
    }
    test_pdf_end(&p);
}

/* One US-letter page whose content stream is `content` (Courier as /F1). */
static inline void test_pdf_one_page(const char *path, const char *content, size_t len) {
    test_pdf p;
    test_pdf_begin(&p, path, 5);
    test_pdf_object(&p, 1, "<< /Type /Catalog /Pages 2 0 R >>");
    test_pdf_object(&p, 2, "<< /Type /Pages /Count 1 /Kids [4 0 R] >>");
    test_pdf_object(&p, 3, "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>");
    test_pdf_object(&p, 4,
                    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                    "/Contents 5 0 R >>");
    test_pdf_stream(&p, 5, content, len);
    test_pdf_end(&p);
}

/* A content stream of `depth` nested q operators and one line of text: MuPDF keeps a graphics state per level. */
static inline char *test_pdf_nested_q(int depth, size_t *len) {
    const char tail[] = "BT /F1 12 Tf 72 700 Td (Hello nested) Tj ET";
    char *s = malloc((size_t)depth * 2 + sizeof tail);
    assert_non_null(s);
    for (int i = 0; i < depth; i++) memcpy(s + 2 * i, "q ", 2);
    memcpy(s + 2 * (size_t)depth, tail, sizeof tail);
    *len = 2 * (size_t)depth + sizeof tail - 1;
    return s;
}

/* A content stream of `lines` lines of 100 glyphs in 1-point Courier, 700 lines a column block, all on the page. */
static inline char *test_pdf_tiny_glyphs(int lines, size_t *len) {
    const char line[] = "(ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd "
                        "ab cd efgh) Tj T* ";
    size_t cap = 64 + (size_t)lines * (sizeof line + 16);
    char *s = malloc(cap);
    assert_non_null(s);
    size_t n = (size_t)snprintf(s, cap, "BT /F1 1 Tf 1 TL 10 780 Td ");
    for (int i = 0; i < lines; i++) {
        if (i && i % 700 == 0) n += (size_t)snprintf(s + n, cap - n, "0 700 Td ");
        memcpy(s + n, line, sizeof line - 1);
        n += sizeof line - 1;
    }
    n += (size_t)snprintf(s + n, cap - n, "ET");
    *len = n;
    return s;
}

#endif
