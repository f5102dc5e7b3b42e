/* Scans made by MuPDF, for the OCR test (tests/unit/test_reader_ocr.c) and benchmark (tests/bench/bench_ocr.c):
 * pages of a PDF drawn at a resolution in grey and put alone, as a picture, on the page of a new PDF (what a
 * scanner gives), optionally with a line of real text over the picture (a court's filing stamp) and with text
 * pages copied in between; and the character accuracy of what OCR read. */
#ifndef CQ_TEST_SCAN_UTIL_H
#define CQ_TEST_SCAN_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include "core/text_norm.h"
#include "core/utf8.h"

typedef struct {
    int page;          /* 0-based page of the source */
    bool scanned;      /* as a picture; false: the page itself, text layer and all */
    const char *stamp; /* scanned pages: ASCII text set in Helvetica 9 pt at the foot of the page, or NULL */
} scan_page;

/* Writes out_pdf from pages[0..n) of in_pdf, pictures drawn at dpi. 0, or -1 with the reason in err. */
static inline int scan_pdf(const char *in_pdf, const char *out_pdf, int dpi, const scan_page *pages, int n,
                           char *err, size_t err_size) {
    fz_context *ctx = fz_new_context(NULL, NULL, FZ_STORE_DEFAULT);
    if (!ctx) {
        snprintf(err, err_size, "no MuPDF context");
        return -1;
    }
    int rc = 0;
    pdf_document *src = NULL, *dst = NULL;
    fz_page *page = NULL;
    fz_pixmap *pix = NULL;
    fz_image *img = NULL;
    pdf_obj *res = NULL, *xobj = NULL, *iref = NULL, *new_page = NULL;
    fz_buffer *content = NULL;
    fz_var(src);
    fz_var(dst);
    fz_var(page);
    fz_var(pix);
    fz_var(img);
    fz_var(res);
    fz_var(xobj);
    fz_var(iref);
    fz_var(new_page);
    fz_var(content);
    fz_try(ctx) {
        fz_register_document_handlers(ctx);
        src = pdf_open_document(ctx, in_pdf);
        dst = pdf_create_document(ctx);
        for (int i = 0; i < n; i++) {
            if (!pages[i].scanned) {
                pdf_graft_page(ctx, dst, -1, src, pages[i].page);
                continue;
            }
            page = fz_load_page(ctx, (fz_document *)src, pages[i].page);
            fz_rect box = fz_bound_page(ctx, page);
            float scale = (float)dpi / 72.0f;
            pix = fz_new_pixmap_from_page(ctx, page, fz_scale(scale, scale), fz_device_gray(ctx), 0);
            fz_set_pixmap_resolution(ctx, pix, dpi, dpi);
            img = fz_new_image_from_pixmap(ctx, pix, NULL);
            iref = pdf_add_image(ctx, dst, img);
            res = pdf_new_dict(ctx, dst, 1);
            xobj = pdf_new_dict(ctx, dst, 1);
            pdf_dict_puts(ctx, xobj, "Im0", iref);
            pdf_dict_puts(ctx, res, "XObject", xobj);
            content = fz_new_buffer(ctx, 64);
            fz_append_printf(ctx, content, "q %g 0 0 %g 0 0 cm /Im0 Do Q\n", box.x1 - box.x0, box.y1 - box.y0);
            if (pages[i].stamp) {
                pdf_obj *fonts = pdf_dict_puts_dict(ctx, res, "Font", 1);
                pdf_obj *font = pdf_dict_puts_dict(ctx, fonts, "F1", 3);
                pdf_dict_puts_drop(ctx, font, "Type", pdf_new_name(ctx, "Font"));
                pdf_dict_puts_drop(ctx, font, "Subtype", pdf_new_name(ctx, "Type1"));
                pdf_dict_puts_drop(ctx, font, "BaseFont", pdf_new_name(ctx, "Helvetica"));
                fz_append_printf(ctx, content, "BT /F1 9 Tf 72 30 Td (%s) Tj ET\n", pages[i].stamp);
            }
            new_page = pdf_add_page(ctx, dst, fz_make_rect(0, 0, box.x1 - box.x0, box.y1 - box.y0), 0, res, content);
            pdf_insert_page(ctx, dst, -1, new_page);
            pdf_drop_obj(ctx, new_page);
            new_page = NULL;
            fz_drop_buffer(ctx, content);
            content = NULL;
            pdf_drop_obj(ctx, xobj);
            xobj = NULL;
            pdf_drop_obj(ctx, res);
            res = NULL;
            pdf_drop_obj(ctx, iref);
            iref = NULL;
            fz_drop_image(ctx, img);
            img = NULL;
            fz_drop_pixmap(ctx, pix);
            pix = NULL;
            fz_drop_page(ctx, page);
            page = NULL;
        }
        pdf_write_options opts = pdf_default_write_options;
        opts.do_compress = 1;
        opts.do_compress_images = 1;
        pdf_save_document(ctx, dst, out_pdf, &opts);
    }
    fz_always(ctx) {
        pdf_drop_obj(ctx, new_page);
        fz_drop_buffer(ctx, content);
        pdf_drop_obj(ctx, xobj);
        pdf_drop_obj(ctx, res);
        pdf_drop_obj(ctx, iref);
        fz_drop_image(ctx, img);
        fz_drop_pixmap(ctx, pix);
        fz_drop_page(ctx, page);
        pdf_drop_document(ctx, src);
        pdf_drop_document(ctx, dst);
    }
    fz_catch(ctx) {
        snprintf(err, err_size, "%s", fz_caught_message(ctx));
        rc = -1;
    }
    fz_drop_context(ctx);
    return rc;
}

/* The code points of s[0..n) after fold (NFKC: full-width and ASCII punctuation alike) without white space, in
 * *out (malloc'd); how many. */
static inline size_t scan_folded(const char *s, size_t n, uint32_t **out) {
    char *f = cq_text_fold(s, n);
    size_t len = f ? strlen(f) : 0, m = 0, i = 0;
    *out = malloc((len + 1) * sizeof **out);
    while (i < len) {
        size_t l;
        uint32_t cp = cq_utf8_decode(f + i, len - i, &l);
        i += l;
        if (!cq_is_space(cp)) (*out)[m++] = cp;
    }
    free(f);
    return m;
}

/* Character accuracy of got against truth, both folded: 1 - edit distance / the truth's length (1 for no truth). */
static inline double scan_char_accuracy(const char *truth, size_t truth_len, const char *got, size_t got_len) {
    uint32_t *a, *b;
    size_t n = scan_folded(truth, truth_len, &a), m = scan_folded(got, got_len, &b);
    size_t *row = malloc((m + 1) * sizeof *row);
    for (size_t j = 0; j <= m; j++) row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    double acc = n ? 1.0 - (double)row[m] / (double)n : 1;
    free(row);
    free(a);
    free(b);
    return acc;
}

#endif
