/* app/export_pdf.h: paragraphs wrapped by estimated widths (the viewer's fonts are not known here: ASCII is taken
 * as 0.56 em, a space 0.28 em, other characters a full em — CJK's width — so that a line never runs past the right
 * margin of the A4 page). */
#include "app/export_pdf.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/utf8.h"

#define PAGE_W 595.0
#define PAGE_H 842.0
#define MARGIN_X 56.0
#define MARGIN_TOP 60.0
#define MARGIN_BOTTOM 60.0

typedef struct {
    double size, indent, gray;
    bool bold, bar;
} style_info;

static const style_info styles[] = {
    [CQ_PDF_TITLE] = {18, 0, 0, true, false},
    [CQ_PDF_HEADING] = {13, 0, 0, true, false},
    [CQ_PDF_BODY] = {11, 0, 0, false, false},
    [CQ_PDF_QUOTE] = {10, 16, 0.3, false, true},
    [CQ_PDF_SMALL] = {9, 0, 0.4, false, false},
};

struct cq_pdf {
    cq_strbuf *pages; /* each page's content stream */
    size_t n_pages, cap_pages;
    double y;         /* the baseline of the next line on the last page */
    bool failed;
};

cq_pdf *cq_pdf_new(void) { return calloc(1, sizeof(cq_pdf)); }

void cq_pdf_free(cq_pdf *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_pages; i++) cq_strbuf_free(&p->pages[i]);
    free(p->pages);
    free(p);
}

static cq_strbuf *new_page(cq_pdf *p) {
    if (p->n_pages == p->cap_pages) {
        size_t cap = p->cap_pages ? 2 * p->cap_pages : 8;
        cq_strbuf *n = realloc(p->pages, cap * sizeof *n);
        if (!n) {
            p->failed = true;
            return NULL;
        }
        p->pages = n;
        p->cap_pages = cap;
    }
    cq_strbuf *b = &p->pages[p->n_pages++];
    memset(b, 0, sizeof *b);
    p->y = PAGE_H - MARGIN_TOP;
    return b;
}

static double char_width(uint32_t cp, double size) {
    if (cp == ' ') return 0.28 * size;
    if (cp < 0x80) return 0.56 * size;
    return size;
}

/* One line of code points at the current position, as runs of Helvetica (ASCII) and STSong-Light (the rest). */
static void put_line(cq_pdf *p, const style_info *st, const uint32_t *cp, size_t n) {
    if (p->n_pages == 0 || p->y - st->size < MARGIN_BOTTOM) {
        if (!new_page(p)) return;
    }
    cq_strbuf *b = &p->pages[p->n_pages - 1];
    double x = MARGIN_X + st->indent, y = p->y - st->size;
    if (st->bar) cq_strbuf_printf(b, "0.75 G 1.5 w %.1f %.1f m %.1f %.1f l S\n", x - 8, y - 3, x - 8, y + st->size);
    cq_strbuf_printf(b, "%.2f g BT %.1f %.1f Td\n", st->gray, x, y);
    size_t i = 0;
    while (i < n) {
        bool ascii = cp[i] < 0x80;
        size_t j = i;
        while (j < n && (cp[j] < 0x80) == ascii) j++;
        if (ascii) {
            cq_strbuf_printf(b, "/%s %.1f Tf (", st->bold ? "F3" : "F1", st->size);
            for (size_t k = i; k < j; k++) {
                char c = (char)cp[k];
                if (c == '(' || c == ')' || c == '\\') cq_strbuf_append(b, "\\", 1);
                if (c < 0x20) c = ' ';
                cq_strbuf_append(b, &c, 1);
            }
            cq_strbuf_puts(b, ") Tj\n");
        } else {
            cq_strbuf_printf(b, "/F2 %.1f Tf <", st->size);
            for (size_t k = i; k < j; k++) cq_strbuf_printf(b, "%04X", cp[k] > 0xFFFF ? (unsigned)'?' : (unsigned)cp[k]);
            cq_strbuf_puts(b, "> Tj\n");
        }
        i = j;
    }
    cq_strbuf_puts(b, "ET\n");
    if (b->failed) p->failed = true;
    p->y -= st->size * 1.45;
}

static bool latin_word(uint32_t cp) { return cp > ' ' && cp < 0x80; }

void cq_pdf_para(cq_pdf *p, cq_pdf_style style, const char *text) {
    if (!p || p->failed || !text) return;
    const style_info *st = &styles[style];
    size_t len = strlen(text), n = 0;
    uint32_t *cp = malloc((len + 1) * sizeof *cp);
    if (!cp) {
        p->failed = true;
        return;
    }
    for (size_t i = 0; i < len;) {
        size_t l;
        uint32_t c = cq_utf8_decode(text + i, len - i, &l);
        if (l == 0) l = 1;
        if (c == '\t' || c == '\r' || c == 0x3000) c = ' ';
        if (c == 0xB7 || c == 0x2022) c = 0x30FB; /* the middle dot and the bullet: not in UniGB-UCS2-H, its dot is */
        cp[n++] = c;
        i += l;
    }
    const double max = PAGE_W - 2 * MARGIN_X - st->indent;
    size_t start = 0;
    if (p->n_pages && style <= CQ_PDF_HEADING) p->y -= st->size * 0.5; /* room above a heading */
    while (start <= n) {
        double w = 0;
        size_t i = start, last_space = SIZE_MAX;
        while (i < n && cp[i] != '\n') {
            double cw = char_width(cp[i], st->size);
            if (w + cw > max && i > start) break;
            if (cp[i] == ' ') last_space = i;
            w += cw;
            i++;
        }
        size_t end = i, next = i;
        bool wrapped = i < n && cp[i] != '\n';
        if (i < n && cp[i] == '\n') {
            next = i + 1;
        } else if (i < n) { /* wrapped: not inside a Latin word when a space before allows */
            if (latin_word(cp[i]) && i > start && latin_word(cp[i - 1]) && last_space != SIZE_MAX &&
                last_space > start) {
                end = last_space;
                next = last_space + 1;
            }
        } else {
            next = n + 1;
        }
        put_line(p, st, cp + start, end - start);
        if (p->failed) break;
        start = next;
        while (wrapped && start < n && cp[start] == ' ') start++; /* no leading space after a wrap */
    }
    p->y -= st->size * 0.6;
    free(cp);
}

cq_status cq_pdf_finish(cq_pdf *p, char **out, size_t *len, cq_err *err) {
    *out = NULL;
    *len = 0;
    if (!p) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!p->n_pages) new_page(p);
    if (p->failed) {
        cq_pdf_free(p);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    const size_t fixed = 7, n_obj = fixed + 2 * p->n_pages;
    size_t *offset = calloc(n_obj + 1, sizeof *offset);
    cq_strbuf b = {0};
    if (!offset) {
        cq_pdf_free(p);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_strbuf_puts(&b, "%PDF-1.4\n%\xE2\xE3\xCF\xD3\n");
#define OBJ(k) (offset[k] = b.len, cq_strbuf_printf(&b, "%zu 0 obj\n", (size_t)(k)))
    OBJ(1);
    cq_strbuf_puts(&b, "<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    OBJ(2);
    cq_strbuf_printf(&b, "<< /Type /Pages /Count %zu /Kids [", p->n_pages);
    for (size_t i = 0; i < p->n_pages; i++) cq_strbuf_printf(&b, " %zu 0 R", fixed + 1 + 2 * i);
    cq_strbuf_puts(&b, " ] >>\nendobj\n");
    OBJ(3);
    cq_strbuf_puts(&b, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>\nendobj\n");
    OBJ(4);
    cq_strbuf_puts(&b, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>\n"
                       "endobj\n");
    OBJ(5);
    cq_strbuf_puts(&b, "<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /UniGB-UCS2-H "
                       "/DescendantFonts [6 0 R] >>\nendobj\n");
    OBJ(6);
    cq_strbuf_puts(&b, "<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light /CIDSystemInfo << /Registry "
                       "(Adobe) /Ordering (GB1) /Supplement 4 >> /FontDescriptor 7 0 R /DW 1000 >>\nendobj\n");
    OBJ(7);
    cq_strbuf_puts(&b, "<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [-25 -254 1000 880] "
                       "/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 93 >>\nendobj\n");
    for (size_t i = 0; i < p->n_pages; i++) {
        size_t page = fixed + 1 + 2 * i, content = page + 1;
        OBJ(page);
        cq_strbuf_printf(&b,
                         "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.0f %.0f] /Resources << /Font << /F1 3 0 R "
                         "/F2 5 0 R /F3 4 0 R >> >> /Contents %zu 0 R >>\nendobj\n",
                         PAGE_W, PAGE_H, content);
        OBJ(content);
        cq_strbuf_printf(&b, "<< /Length %zu >>\nstream\n", p->pages[i].len);
        cq_strbuf_append(&b, p->pages[i].data ? p->pages[i].data : "", p->pages[i].len);
        cq_strbuf_puts(&b, "\nendstream\nendobj\n");
    }
#undef OBJ
    size_t xref = b.len;
    cq_strbuf_printf(&b, "xref\n0 %zu\n0000000000 65535 f \n", n_obj + 1);
    for (size_t k = 1; k <= n_obj; k++) cq_strbuf_printf(&b, "%010zu 00000 n \n", offset[k]);
    cq_strbuf_printf(&b, "trailer\n<< /Size %zu /Root 1 0 R >>\nstartxref\n%zu\n%%%%EOF\n", n_obj + 1, xref);
    free(offset);
    cq_pdf_free(p);
    if (b.failed) {
        cq_strbuf_free(&b);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    *len = b.len;
    *out = cq_strbuf_take(&b);
    return CQ_OK;
}
