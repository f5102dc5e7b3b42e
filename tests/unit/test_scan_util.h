/* Scans made by MuPDF, for the OCR test (tests/unit/test_reader_ocr.c) and benchmark (tests/bench/bench_ocr.c):
 * pages of a PDF drawn at a resolution in grey and put alone, as a picture, on the page of a new PDF (what a
 * scanner gives), optionally with a line of real text over the picture (a court's filing stamp) and with text
 * pages copied in between. */
#ifndef CQ_TEST_SCAN_UTIL_H
#define CQ_TEST_SCAN_UTIL_H

#include <stdbool.h>
#include <stdio.h>

#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

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

#endif
