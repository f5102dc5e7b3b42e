/* Page images for citations: one PDF page rendered by MuPDF at a given width, with a clause's boxes highlighted as
 * translucent marker strokes, written as PNG (the PDF row's renderer in reader/formats.c).
 *
 * Rendering is serialized by one lock (a fresh MuPDF context per call, so nothing is shared across threads); the
 * HTTP service caches the PNGs on disk, so each page is drawn once per highlight. */
#include "reader/reader_internal.h"

#include <mupdf/fitz.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

/* MuPDF contexts are not shared between threads here; the lock keeps rendering to one page at a time, which bounds
 * its memory (a 2400-pixel page is ~20 MB of pixmap) as well. */
static pthread_mutex_t render_lock = PTHREAD_MUTEX_INITIALIZER;

#define PAD_PX 2        /* highlight margin around the glyph boxes */
#define BAR_PX 3        /* the marker bar left of a highlighted line */
#define BAR_GAP_PX 4

/* Marker colour, applied as a multiply blend so that the text stays dark: channel *= 1 - a + a * c / 255. */
static const float HL_RGB[3] = {255, 208, 0};
static const float HL_ALPHA = 0.55f;
static const float BAR_RGB[3] = {230, 120, 0};

static void blend_rect(unsigned char *samples, int stride, int n, int w, int h, int x0, int y0, int x1, int y1,
                       const float rgb[3], float alpha, int multiply) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > w) x1 = w;
    if (y1 > h) y1 = h;
    for (int y = y0; y < y1; y++) {
        unsigned char *p = samples + (size_t)y * (size_t)stride + (size_t)x0 * (size_t)n;
        for (int x = x0; x < x1; x++, p += n)
            for (int c = 0; c < 3; c++) {
                float v = p[c];
                v = multiply ? v * (1 - alpha + alpha * rgb[c] / 255.0f) : v * (1 - alpha) + rgb[c] * alpha;
                p[c] = (unsigned char)(v + 0.5f);
            }
    }
}

cq_status cq_reader_render_pdf(const char *pdf_path, int page_no, int width, const cq_box *boxes, size_t n_boxes,
                               const char *png_path, cq_err *err) {
    if (width < 16 || width > 10000) return cq_err_set(err, CQ_ERR_INVALID, "width %d is out of range", width);
    pthread_mutex_lock(&render_lock);
    fz_context *ctx = fz_new_context(NULL, NULL, 32 << 20);
    if (!ctx) {
        pthread_mutex_unlock(&render_lock);
        return cq_err_set(err, CQ_ERR_NOMEM, "cannot create a MuPDF context (out of memory)");
    }
    fz_document *doc = NULL;
    fz_page *page = NULL;
    fz_pixmap *pix = NULL;
    fz_buffer *png = NULL;
    fz_stream *stream = NULL;
    cq_status rc = CQ_OK;
    int n_pages = 0;
    fz_var(stream);
    fz_var(doc);
    fz_var(page);
    fz_var(pix);
    fz_var(png);
    fz_var(rc);
    fz_var(n_pages);
    fz_try(ctx) {
        fz_register_document_handlers(ctx);
        stream = fz_open_file(ctx, pdf_path);
        doc = fz_open_document_with_stream(ctx, "application/pdf", stream);
        n_pages = fz_count_pages(ctx, doc);
        if (page_no < 1 || page_no > n_pages) {
            rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "the document has %d pages; there is no page %d", n_pages,
                            page_no);
        } else {
            page = fz_load_page(ctx, doc, page_no - 1);
            fz_rect bounds = fz_bound_page(ctx, page);
            float page_w = bounds.x1 - bounds.x0;
            float scale = page_w > 0 ? (float)width / page_w : 1;
            pix = fz_new_pixmap_from_page(ctx, page, fz_scale(scale, scale), fz_device_rgb(ctx), 0);
            unsigned char *samples = fz_pixmap_samples(ctx, pix);
            int stride = fz_pixmap_stride(ctx, pix), n = fz_pixmap_components(ctx, pix);
            int w = fz_pixmap_width(ctx, pix), h = fz_pixmap_height(ctx, pix);
            int ox = fz_pixmap_x(ctx, pix), oy = fz_pixmap_y(ctx, pix);
            for (size_t i = 0; i < n_boxes; i++) {
                const cq_box *b = &boxes[i];
                if (b->page_no != page_no) continue;
                /* Boxes are in the page's own coordinates (as MuPDF reports text); the pixmap starts at (ox, oy). */
                int x0 = (int)(b->x0 * scale) - ox - PAD_PX, x1 = (int)(b->x1 * scale + 0.999f) - ox + PAD_PX;
                int y0 = (int)(b->y0 * scale) - oy - PAD_PX, y1 = (int)(b->y1 * scale + 0.999f) - oy + PAD_PX;
                blend_rect(samples, stride, n, w, h, x0, y0, x1, y1, HL_RGB, HL_ALPHA, 1);
                blend_rect(samples, stride, n, w, h, x0 - BAR_GAP_PX - BAR_PX, y0, x0 - BAR_GAP_PX, y1, BAR_RGB, 0.9f,
                           0);
            }
            png = fz_new_buffer_from_pixmap_as_png(ctx, pix, fz_default_color_params);
        }
    }
    fz_always(ctx) {
        fz_drop_pixmap(ctx, pix);
        fz_drop_page(ctx, page);
        fz_drop_document(ctx, doc);
        fz_drop_stream(ctx, stream);
    }
    fz_catch(ctx) {
        rc = cq_err_set(err, CQ_ERR_FORMAT, "cannot render page %d: %s", page_no, fz_caught_message(ctx));
    }
    if (!rc && png) {
        unsigned char *data;
        size_t len = fz_buffer_storage(ctx, png, &data);
        rc = cq_file_write_atomic(png_path, data, len, err);
    }
    fz_drop_buffer(ctx, png);
    fz_drop_context(ctx);
    pthread_mutex_unlock(&render_lock);
    return rc;
}
