/* Page images for citations: one PDF page rendered by MuPDF at a given width, with a clause's boxes highlighted as
 * translucent marker strokes, written as PNG (the PDF row's renderer in reader/formats.c).
 *
 * What one image may cost is bounded, whatever the page (issue 29: a 641-byte PDF with a 10 x 1000 point page asked
 * at width 2400 made a 2400 x 240,000 PNG in 24 s and 3.67 GB, and every other page image waited behind it):
 *   pixels  at most RENDER_MAX_PIXELS, and RENDER_MAX_SIDE on either side: a page too long or too wide for the
 *           width asked for is drawn smaller (the image is narrower than asked);
 *   memory  each render has its own MuPDF context whose allocator refuses past RENDER_MEMORY_BYTES (the pixmap,
 *           the PNG, fonts, images, MuPDF's store): such a page is "too large" (CQ_ERR_TOO_LARGE);
 *   time    past the render time limit (RENDER_TIMEOUT_S, or CLAUSEQA_RENDER_TIMEOUT_S) MuPDF is told to stop through
 *           its cookie: "too large" as well;
 *   budget  renders run at once, each holding RENDER_MEMORY_BYTES of a process-wide budget (RENDER_BUDGET_MB, or
 *           CLAUSEQA_RENDER_MEMORY_MB; at least one render); a render that finds the budget taken waits for it,
 *           within its time limit, and is then CQ_ERR_BUSY (the HTTP service answers 503 with Retry-After).
 * Contexts are not shared between threads (no locks are needed). The HTTP service caches the PNGs on disk, so each
 * page is drawn once per width and highlight. */
#include "reader/reader_internal.h"

#include <errno.h>
#include <math.h>
#include <mupdf/fitz.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fileio.h"

#define RENDER_MAX_PIXELS (12u << 20)         /* 12 Mi pixels: an A4 page at 2,900 pixels wide; 36 MiB of RGB */
#define RENDER_MAX_SIDE 10000                 /* pixels, either side */
#define RENDER_MEMORY_BYTES ((size_t)160 << 20) /* one render: twice the largest pixmap (it and its PNG) + MuPDF */
#define RENDER_STORE_BYTES ((size_t)32 << 20) /* MuPDF's cache of decoded resources, inside the above */
#define RENDER_BUDGET_MB 640                  /* all renders at once: 4 */
#define RENDER_TIMEOUT_S 15

/* ---- the budget ---------------------------------------------------------------------------------------------- */

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t budget_freed = PTHREAD_COND_INITIALIZER;
static int renders_running;

/* A whole number from the environment within [lo, hi]; def when unset or not such a number. */
static long env_long(const char *name, long def, long lo, long hi) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno || *end || n < lo || n > hi ? def : n;
}

/* Renders the budget allows at once (read at each render: the tests change it). */
static int render_slots(void) {
    long mb = env_long("CLAUSEQA_RENDER_MEMORY_MB", RENDER_BUDGET_MB, 1, 1L << 20);
    long slots = (long)(((size_t)mb << 20) / RENDER_MEMORY_BYTES);
    return slots < 1 ? 1 : slots > 4096 ? 4096 : (int)slots;
}

/* A place in the budget, waiting until the absolute CLOCK_REALTIME deadline at most. */
static bool budget_take(const struct timespec *deadline) {
    pthread_mutex_lock(&budget_lock);
    int rc = 0;
    while (renders_running >= render_slots() && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&budget_freed, &budget_lock, deadline);
    bool got = renders_running < render_slots();
    if (got) renders_running++;
    pthread_mutex_unlock(&budget_lock);
    return got;
}

static void budget_give(void) {
    pthread_mutex_lock(&budget_lock);
    renders_running--;
    pthread_cond_signal(&budget_freed);
    pthread_mutex_unlock(&budget_lock);
}

/* ---- one render's allocator: counts and refuses past its limit ------------------------------------------------ */

typedef struct {
    size_t used, limit;
    bool refused; /* an allocation was refused for the limit */
} render_alloc;

#define HDR 16 /* a size_t before each block, keeping malloc's 16-byte alignment */

static void *ra_malloc(void *user, size_t n) {
    render_alloc *a = user;
    if (n > a->limit - a->used || n > SIZE_MAX - HDR) {
        a->refused = true;
        return NULL;
    }
    unsigned char *p = malloc(n + HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    a->used += n;
    return p + HDR;
}

static void ra_free(void *user, void *ptr) {
    if (!ptr) return;
    render_alloc *a = user;
    unsigned char *p = (unsigned char *)ptr - HDR;
    size_t n;
    memcpy(&n, p, sizeof n);
    a->used -= n;
    free(p);
}

static void *ra_realloc(void *user, void *old, size_t n) {
    if (!old) return ra_malloc(user, n);
    if (n == 0) {
        ra_free(user, old);
        return NULL;
    }
    render_alloc *a = user;
    unsigned char *p = (unsigned char *)old - HDR;
    size_t was;
    memcpy(&was, p, sizeof was);
    if ((n > was && n - was > a->limit - a->used) || n > SIZE_MAX - HDR) {
        a->refused = true;
        return NULL;
    }
    unsigned char *q = realloc(p, n + HDR);
    if (!q) return NULL;
    memcpy(q, &n, sizeof n);
    a->used = a->used - was + n;
    return q + HDR;
}

/* ---- the time limit: a thread that sets the cookie's abort flag at the deadline ------------------------------- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    struct timespec deadline;
    fz_cookie *cookie;
} render_timer;

static void *timer_main(void *arg) {
    render_timer *t = arg;
    pthread_mutex_lock(&t->lock);
    int rc = 0;
    while (!t->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&t->cond, &t->lock, &t->deadline);
    if (!t->done) t->cookie->abort = 1; /* MuPDF polls it between operators */
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* The scale at which a page of page_w x page_h points is drawn for width pixels, within the pixel caps. */
static float capped_scale(float page_w, float page_h, int width) {
    if (page_w <= 0 || page_h <= 0) return 1;
    double scale = (double)width / page_w;
    if (page_h * scale > RENDER_MAX_SIDE) scale = RENDER_MAX_SIDE / (double)page_h;
    if (page_w * scale > RENDER_MAX_SIDE) scale = RENDER_MAX_SIDE / (double)page_w;
    /* (the rounding of the bounding box adds a pixel on each side) */
    double pixels = ((double)page_w * scale + 2) * ((double)page_h * scale + 2);
    if (pixels > RENDER_MAX_PIXELS) scale *= sqrt(RENDER_MAX_PIXELS / pixels);
    return (float)scale;
}

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
    long timeout_s = env_long("CLAUSEQA_RENDER_TIMEOUT_S", RENDER_TIMEOUT_S, 1, 3600);
    render_timer timer = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    clock_gettime(CLOCK_REALTIME, &timer.deadline);
    timer.deadline.tv_sec += (time_t)timeout_s;
    if (!budget_take(&timer.deadline)) {
        err->retry_after_s = 1;
        return cq_err_set(err, CQ_ERR_BUSY, "every page image being drawn holds the memory for page images: try "
                          "again shortly");
    }
    render_alloc counted = {.limit = RENDER_MEMORY_BYTES};
    fz_alloc_context alloc = {&counted, ra_malloc, ra_realloc, ra_free};
    fz_context *ctx = fz_new_context(&alloc, NULL, RENDER_STORE_BYTES);
    if (!ctx) {
        budget_give();
        return cq_err_set(err, CQ_ERR_NOMEM, "cannot create a MuPDF context (out of memory)");
    }
    fz_cookie cookie = {0};
    timer.cookie = &cookie;
    pthread_t timer_thread;
    bool timed = pthread_create(&timer_thread, NULL, timer_main, &timer) == 0;
    fz_document *doc = NULL;
    fz_page *page = NULL;
    fz_pixmap *pix = NULL;
    fz_device *dev = NULL;
    fz_buffer *png = NULL;
    fz_stream *stream = NULL;
    cq_status rc = CQ_OK;
    int n_pages = 0;
    float scale = 1;
    fz_var(stream);
    fz_var(scale);
    fz_var(doc);
    fz_var(page);
    fz_var(pix);
    fz_var(dev);
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
            scale = capped_scale(bounds.x1 - bounds.x0, bounds.y1 - bounds.y0, width);
            fz_matrix ctm = fz_scale(scale, scale);
            fz_irect bbox = fz_round_rect(fz_transform_rect(bounds, ctm));
            pix = fz_new_pixmap_with_bbox(ctx, fz_device_rgb(ctx), bbox, NULL, 0);
            fz_clear_pixmap_with_value(ctx, pix, 0xff);
            dev = fz_new_draw_device(ctx, ctm, pix);
            fz_run_page(ctx, page, dev, fz_identity, &cookie);
            fz_close_device(ctx, dev);
            if (cookie.abort)
                rc = cq_err_set(err, CQ_ERR_TOO_LARGE, "page %d takes longer than %ld s to draw", page_no, timeout_s);
        }
        if (!rc && pix) {
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
        fz_drop_device(ctx, dev);
        fz_drop_pixmap(ctx, pix);
        fz_drop_page(ctx, page);
        fz_drop_document(ctx, doc);
        fz_drop_stream(ctx, stream);
    }
    fz_catch(ctx) {
        if (counted.refused)
            rc = cq_err_set(err, CQ_ERR_TOO_LARGE, "page %d needs more than %zu MB to draw", page_no,
                            RENDER_MEMORY_BYTES >> 20);
        else if (cookie.abort)
            rc = cq_err_set(err, CQ_ERR_TOO_LARGE, "page %d takes longer than %ld s to draw", page_no, timeout_s);
        else rc = cq_err_set(err, CQ_ERR_FORMAT, "cannot render page %d: %s", page_no, fz_caught_message(ctx));
    }
    if (timed) {
        pthread_mutex_lock(&timer.lock);
        timer.done = true;
        pthread_cond_signal(&timer.cond);
        pthread_mutex_unlock(&timer.lock);
        pthread_join(timer_thread, NULL);
    }
    if (!rc && png) {
        unsigned char *data;
        size_t len = fz_buffer_storage(ctx, png, &data);
        rc = cq_file_write_atomic(png_path, data, len, err);
    }
    fz_drop_buffer(ctx, png);
    fz_drop_context(ctx);
    budget_give();
    return rc;
}
