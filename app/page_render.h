/* Page images for citations: one PDF page rendered by MuPDF at a given width, with a clause's boxes highlighted as
 * translucent marker strokes, written as PNG.
 *
 * Rendering is serialized by one lock (a fresh MuPDF context per call, so nothing is shared across threads); the
 * HTTP service caches the PNGs on disk, so each page is drawn once per highlight. */
#ifndef CQ_APP_PAGE_RENDER_H
#define CQ_APP_PAGE_RENDER_H

#include <stddef.h>

#include "core/error.h"
#include "index/store.h"

/* Renders page page_no (1-based) of the PDF at pdf_path, width pixels wide, highlighting the boxes on that page
 * (points, origin top-left, as the store keeps them; boxes of other pages are ignored), and writes the PNG to
 * png_path atomically. NOT_FOUND when the document has no such page. */
cq_status cq_page_render_png(const char *pdf_path, int page_no, int width, const cq_store_box *boxes, size_t n_boxes,
                             const char *png_path, cq_err *err);

#endif
