/* OCR of PDF pages: MuPDF renders a page into a grey pixmap (at OCR_DPI, or again at the resolution that gives its
 * text lines the height Tesseract reads best: ocr_one), Tesseract's C API recognises it as one column of lines, and
 * its symbols come back as lines of glyphs in page coordinates (reader_internal.h: cq_ocr_page), which the PDF
 * reader treats as it treats the glyphs of a text layer.
 *
 * Threads. Pages are recognised by up to `threads` workers at once, each with its own MuPDF context (cloned from
 * the reader's, which was made with cq_ocr_new_context: MuPDF across threads needs its lock callbacks) and its own
 * Tesseract engine. A MuPDF document may be used by one thread at a time: workers load a page and record its
 * display list under doc_lock, then render and recognise outside it. Tesseract is built with OpenMP and would
 * start its own threads inside every worker (ten times slower on a busy machine); each worker turns OpenMP
 * parallelism off for itself (omp_set_max_active_levels is per thread), the parallelism is across pages.
 * Progress is reported on the calling thread, which waits for the workers.
 *
 * Chinese print read by Tesseract often has ASCII punctuation where the page has full-width marks ("，" as ",",
 * "（一）" as "(一)"); between Han characters they are put back as printed. */
#include "reader/reader_internal.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mupdf/fitz.h>
#include <tesseract/capi.h>

#include "core/grow.h"
#include "core/utf8.h"

#define OCR_DPI 300              /* the first rendering */
#define OCR_LINE_PX 44           /* the text line height (pixels) Tesseract reads best, and the range left alone */
#define OCR_LINE_PX_LOW 24
#define OCR_LINE_PX_HIGH 54
#define OCR_MIN_DPI 150
#define OCR_MAX_DPI 600
#define OCR_MAX_PIXELS (40u * 1000u * 1000u) /* a page larger than A3 at 300 dpi is rendered at a lower dpi */
#define OCR_MAX_THREADS 8
#define OCR_MIN_WORD_CONFIDENCE 20.0f /* words below this (0..100) that hold no letter or digit are noise */

/* ---------------------------------------------------------------------------------------------------------
 * MuPDF contexts that threads can share
 * --------------------------------------------------------------------------------------------------------- */

static pthread_mutex_t mupdf_mutex[FZ_LOCK_MAX];
static pthread_once_t mupdf_once = PTHREAD_ONCE_INIT;

static void mupdf_init_locks(void) {
    for (int i = 0; i < FZ_LOCK_MAX; i++) pthread_mutex_init(&mupdf_mutex[i], NULL);
}
static void mupdf_lock(void *user, int lock) {
    (void)user;
    pthread_mutex_lock(&mupdf_mutex[lock]);
}
static void mupdf_unlock(void *user, int lock) {
    (void)user;
    pthread_mutex_unlock(&mupdf_mutex[lock]);
}

fz_context *cq_ocr_new_context(const void *alloc, size_t max_store) {
    pthread_once(&mupdf_once, mupdf_init_locks);
    static const fz_locks_context locks = {NULL, mupdf_lock, mupdf_unlock};
    return fz_new_context(alloc, &locks, max_store);
}

/* ---------------------------------------------------------------------------------------------------------
 * One page
 * --------------------------------------------------------------------------------------------------------- */

void cq_ocr_page_free(cq_ocr_page *p) {
    if (!p) return;
    free(p->cp);
    free(p->x0);
    free(p->x1);
    free(p->lines);
    memset(p, 0, sizeof *p);
}

static bool push_glyph(cq_ocr_page *p, size_t *cap, uint32_t cp, float x0, float x1) {
    if (p->n_glyphs == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        uint32_t *a = realloc(p->cp, c * sizeof *a);
        if (!a) return false;
        p->cp = a;
        float *b = realloc(p->x0, c * sizeof *b);
        if (!b) return false;
        p->x0 = b;
        float *d = realloc(p->x1, c * sizeof *d);
        if (!d) return false;
        p->x1 = d;
        *cap = c;
    }
    p->cp[p->n_glyphs] = cp;
    p->x0[p->n_glyphs] = x0;
    p->x1[p->n_glyphs] = x1;
    p->n_glyphs++;
    return true;
}

static bool is_han(uint32_t cp) { return cq_is_cjk(cp) && !cq_is_cjk_punct(cp); }

static bool is_dash(uint32_t cp) {
    return cp == '-' || cp == 0x2010 || cp == 0x2012 || cp == 0x2013 || cp == 0x2014 || cp == 0x2015 ||
           cp == 0x2212 || cp == 0x2500 || cp == 0xFF0D || cp == 0x30FC;
}

/* Chinese punctuation as printed: ASCII , : ; ! ? ( ) next to Han characters become full-width, and 一 read as a
 * dash where only 一 makes sense: "(—)" → "（一）", a line starting "—、" → "一、". */
static void fix_cjk_punctuation(cq_ocr_page *p, const cq_ocr_line *L) {
    uint32_t *cp = p->cp + L->first;
    uint32_t n = L->n;
    for (uint32_t g = 0; g < n; g++) {
        uint32_t c = cp[g], full;
        switch (c) {
        case ',': full = 0xFF0C; break;
        case ':': full = 0xFF1A; break;
        case ';': full = 0xFF1B; break;
        case '!': full = 0xFF01; break;
        case '?': full = 0xFF1F; break;
        case '(': full = 0xFF08; break;
        case ')': full = 0xFF09; break;
        default: continue;
        }
        uint32_t before = 0, after = 0; /* nearest characters either side, spaces skipped */
        for (uint32_t k = g; k > 0 && !before;)
            if (cp[--k] != ' ') before = cp[k];
        for (uint32_t k = g + 1; k < n && !after; k++)
            if (cp[k] != ' ') after = cp[k];
        bool han_before = is_han(before) || cq_is_cjk_punct(before), han_after = is_han(after);
        bool paren_dash = (c == '(' && g + 2 < n && is_dash(cp[g + 1]) && (cp[g + 2] == ')' || cp[g + 2] == 0xFF09)) ||
                          (c == ')' && g >= 2 && is_dash(cp[g - 1]) && (cp[g - 2] == '(' || cp[g - 2] == 0xFF08));
        if (c == '(' || c == ')' ? han_after || han_before || paren_dash : han_before) cp[g] = full;
    }
    for (uint32_t g = 0; g + 2 < n; g++)
        if (cp[g] == 0xFF08 && is_dash(cp[g + 1]) && cp[g + 2] == 0xFF09) cp[g + 1] = 0x4E00; /* （一） */
    if (n >= 2 && is_dash(cp[0]) && cp[1] == 0x3001) cp[0] = 0x4E00; /* 一、 */
}

/* Pieces of one printed line that Tesseract put in separate blocks ("…可用、安" and, blocks later, "全；") are moved
 * next to each other, so that the PDF reader's line rules join them as they join the pieces of a text layer:
 * same baseline (within 0.3 of the line height), the second starting where the first ends (up to 2.5 heights
 * on), neither taller than the other by half. */
static void attach_fragments(cq_ocr_page *p) {
    for (size_t j = 1; j < p->n_lines; j++) {
        cq_ocr_line b = p->lines[j];
        for (size_t i = 0; i + 1 < j; i++) {
            const cq_ocr_line *a = &p->lines[i];
            float size = a->size > b.size ? a->size : b.size;
            if (fabsf(a->baseline - b.baseline) >= 0.3f * size || b.x0 < a->x1 - 0.25f * size ||
                b.x0 - a->x1 > 2.5f * size || (a->size < b.size ? a->size : b.size) < 0.5f * size)
                continue;
            memmove(&p->lines[i + 2], &p->lines[i + 1], (j - i - 1) * sizeof *p->lines);
            p->lines[i + 1] = b;
            break;
        }
    }
}

/* Reads Tesseract's result into p: a line per text line, symbol boxes converted from pixels to page points
 * (x_pt = (px + origin_x) / scale). Between words a ' ' glyph (spanning the gap) where the page shows a space:
 * between Latin words always; between Chinese and Latin letters or digits across a gap of OCR_MIXED_SPACE_EM;
 * between two Chinese characters only after a structural label ("第一条　为了", which every reader keeps) across
 * OCR_LABEL_SPACE_EM: Tesseract cuts Chinese into "words" anywhere and its boxes of Chinese characters are rough
 * (narrower than the ink, so that characters set solid seem up to half an em apart), while Chinese print has no
 * spaces inside its sentences; never next to full-width punctuation (its white space is part of its glyph).
 * The page's confidence is the mean word confidence weighted by characters (symbol confidences are high even for
 * misread characters). */
#define OCR_LABEL_SPACE_EM 0.3f
#define OCR_MIXED_SPACE_EM 0.5f

/* A Han character, kana, hangul, a Latin letter or a digit: not punctuation. */
static bool is_letter(uint32_t cp) {
    return cq_is_latin_alnum(cp) || (cq_dt_cjkish(cp) && !cq_is_cjk_punct(cp) && !(cp >= 0xFF01 && cp <= 0xFF0F) &&
                                     !(cp >= 0xFF1A && cp <= 0xFF20) && !(cp >= 0xFF3B && cp <= 0xFF40) &&
                                     !(cp >= 0xFF5B && cp <= 0xFF65));
}

/* Is there a space between the line so far, line[0..n) (n > 0), and the next word, which starts with `after`
 * gap points on? */
static bool word_space(const uint32_t *line, uint32_t n, uint32_t after, float gap, float em) {
    uint32_t before = line[n - 1];
    bool cjk_before = cq_dt_cjkish(before), cjk_after = cq_dt_cjkish(after);
    if (!cjk_before && !cjk_after) return true;
    if (!is_letter(before) || !is_letter(after)) return false;
    if (cjk_before && cjk_after) return gap > OCR_LABEL_SPACE_EM * em && cq_dt_is_heading_label(line, n);
    return gap > OCR_MIXED_SPACE_EM * em;
}

static bool is_quote(uint32_t cp) {
    return cp == 0x201C || cp == 0x201D || cp == 0x2018 || cp == 0x2019 || cp == '"' || cp == '\'';
}
static bool is_closing_quote(uint32_t cp) { return cp == 0x201D || cp == 0x2019 || cp == '"' || cp == '\''; }

/* Body lines of a page are of one size: line boxes vary with the ink (a line of 。and ，is lower), so every line
 * within a quarter of the page's median height takes the median (headings keep theirs). */
static void even_sizes(cq_ocr_page *p) {
    float h[512];
    size_t n = 0;
    for (size_t i = 0; i < p->n_lines && n < 512; i++) h[n++] = p->lines[i].size;
    if (n == 0) return;
    for (size_t i = 1; i < n; i++) /* insertion sort: a page has few lines */
        for (size_t k = i; k > 0 && h[k - 1] > h[k]; k--) {
            float t = h[k];
            h[k] = h[k - 1];
            h[k - 1] = t;
        }
    float median = h[n / 2];
    for (size_t i = 0; i < p->n_lines; i++)
        if (fabsf(p->lines[i].size - median) < 0.25f * median) p->lines[i].size = median;
}

static bool collect(TessBaseAPI *api, cq_ocr_page *p, float scale, int origin_x, int origin_y) {
    size_t cap_glyphs = 0, cap_lines = 0;
    double conf_sum = 0, conf_weight = 0;
    TessResultIterator *it = TessBaseAPIGetIterator(api);
    if (!it) return true; /* nothing recognised */
    TessPageIterator *pi = TessResultIteratorGetPageIterator(it);
    int block = -1;
    bool ok = true, skip_word = false, word_start = false, pending_space = false, quote_skipped = false;
    cq_ocr_line *L = NULL;
    float word_x0 = 0, prev_word_x1 = 0, gap_from = 0;
    do {
        if (TessPageIteratorIsAtBeginningOf(pi, RIL_BLOCK)) block++;
        if (TessPageIteratorIsAtBeginningOf(pi, RIL_TEXTLINE)) {
            if (L && L->n == 0) p->n_lines--; /* a line whose words were all noise */
            if (!cq_grow((void **)&p->lines, &cap_lines, p->n_lines + 1, sizeof *p->lines)) {
                ok = false;
                break;
            }
            L = &p->lines[p->n_lines++];
            memset(L, 0, sizeof *L);
            L->first = (uint32_t)p->n_glyphs;
            L->block = block;
            int l, t, r, b;
            if (TessPageIteratorBoundingBox(pi, RIL_TEXTLINE, &l, &t, &r, &b)) {
                L->x0 = (float)(l + origin_x) / scale;
                L->x1 = (float)(r + origin_x) / scale;
                L->y0 = (float)(t + origin_y) / scale;
                L->y1 = (float)(b + origin_y) / scale;
            }
            int bx1, by1, bx2, by2;
            L->baseline = TessPageIteratorBaseline(pi, RIL_TEXTLINE, &bx1, &by1, &bx2, &by2)
                              ? ((float)(by1 + by2) / 2 + (float)origin_y) / scale
                              : L->y1;
            L->size = L->y1 - L->y0 > 1 ? L->y1 - L->y0 : 1;
        }
        if (!L) continue;
        word_start = TessPageIteratorIsAtBeginningOf(pi, RIL_WORD);
        if (word_start) {
            float wconf = TessResultIteratorConfidence(it, RIL_WORD);
            char *w = TessResultIteratorGetUTF8Text(it, RIL_WORD);
            size_t wlen = w ? strlen(w) : 0, len;
            bool meaningful = false;
            size_t chars = 0;
            for (size_t i = 0; i < wlen;) {
                uint32_t cp = cq_utf8_decode(w + i, wlen - i, &len);
                meaningful |= cq_is_latin_alnum(cp) || is_han(cp);
                chars++;
                i += len ? len : 1;
            }
            TessDeleteText(w);
            /* noise: a low-confidence word without a letter, digit or Han character */
            skip_word = !meaningful && wconf < OCR_MIN_WORD_CONFIDENCE;
            if (!skip_word) {
                conf_sum += (double)wconf * (double)chars;
                conf_weight += (double)chars;
            }
            int l, t, r, b;
            bool box = TessPageIteratorBoundingBox(pi, RIL_WORD, &l, &t, &r, &b);
            word_x0 = box ? (float)(l + origin_x) / scale : prev_word_x1;
            pending_space = !skip_word && L->n > 0;
            quote_skipped = false;
            gap_from = prev_word_x1;
            if (!skip_word && box) prev_word_x1 = (float)(r + origin_x) / scale;
        }
        if (skip_word) continue;
        char *sym = TessResultIteratorGetUTF8Text(it, RIL_SYMBOL);
        if (!sym) continue;
        int l, t, r, b;
        if (!TessPageIteratorBoundingBox(pi, RIL_SYMBOL, &l, &t, &r, &b)) {
            TessDeleteText(sym);
            continue;
        }
        float x0 = (float)(l + origin_x) / scale, x1 = (float)(r + origin_x) / scale;
        size_t n = strlen(sym), k = 0, count = cq_utf8_count(sym, n), first_len;
        uint32_t sym_cp = n ? cq_utf8_decode(sym, n, &first_len) : 0;
        if (count == 1 && is_quote(sym_cp) &&
            ((word_start && is_closing_quote(sym_cp) && !TessPageIteratorIsAtFinalElement(pi, RIL_WORD, RIL_SYMBOL)) ||
             cq_dt_is_heading_label(p->cp + L->first, L->n))) {
            /* a closing quote opening a word, or any quote right after a label, is what the LSTM reads into a wide
             * gap ("第一条　为了" as "第一条 ”为了"), not a character */
            TessDeleteText(sym);
            quote_skipped = true;
            continue;
        }
        /* a symbol may be several code points (a ligature): the box is shared out */
        for (size_t i = 0; i < n && ok;) {
            size_t len;
            uint32_t cp = cq_utf8_decode(sym + i, n - i, &len);
            i += len ? len : 1;
            float a = x0 + (x1 - x0) * (float)k / (float)count, z = x0 + (x1 - x0) * (float)(k + 1) / (float)count;
            k++;
            if (cq_is_space(cp)) continue;
            if (pending_space) { /* decided at the word's first character */
                pending_space = false;
                float from = quote_skipped ? a : word_x0;
                if (word_space(p->cp + L->first, L->n, cp, from - gap_from, L->size)) {
                    if (!push_glyph(p, &cap_glyphs, ' ', gap_from, from > gap_from ? from : gap_from)) {
                        ok = false;
                        break;
                    }
                    L->n++;
                }
            }
            if (!push_glyph(p, &cap_glyphs, cp, a, z)) ok = false;
            else L->n++;
        }
        TessDeleteText(sym);
    } while (ok && TessPageIteratorNext(pi, RIL_SYMBOL));
    if (ok && L && L->n == 0) p->n_lines--;
    TessResultIteratorDelete(it);
    if (!ok) return false;
    for (size_t i = 0; i < p->n_lines; i++) fix_cjk_punctuation(p, &p->lines[i]);
    even_sizes(p);
    attach_fragments(p);
    p->confidence = conf_weight > 0 ? conf_sum / conf_weight / 100.0 : 0;
    if (p->confidence > 1) p->confidence = 1;
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * The workers
 * --------------------------------------------------------------------------------------------------------- */

typedef struct {
    fz_context *ctx;
    fz_document *doc;
    const int *pages;
    int n;
    cq_ocr_page *results;
    const atomic_bool *cancel; /* NULL: never */
    pthread_mutex_t doc_lock; /* the document: one thread at a time */
    pthread_mutex_t lock;     /* next, done, finished */
    pthread_cond_t cond;
    int next, workers_left;
    bool *finished;
} ocr_run;

static void noop_message(void *user, const char *message) { (void)user, (void)message; }

/* A Tesseract engine for CQ_OCR_LANGUAGES, or NULL with the reason in why. */
static TessBaseAPI *engine_new(char *why, size_t cap) {
    TessBaseAPI *api = TessBaseAPICreate();
    if (!api) {
        snprintf(why, cap, "out of memory starting Tesseract");
        return NULL;
    }
    TessBaseAPISetVariable(api, "debug_file", "/dev/null"); /* Tesseract's chatter would go to stderr */
    if (TessBaseAPIInit3(api, NULL, CQ_OCR_LANGUAGES) != 0) {
        snprintf(why, cap, "Tesseract cannot load its language data %s (install tesseract-ocr-chi-sim and "
                 "tesseract-ocr-eng, or set TESSDATA_PREFIX)", CQ_OCR_LANGUAGES);
        TessBaseAPIDelete(api);
        return NULL;
    }
    /* One column of text lines of any size: documents are rarely set in columns, and the automatic layout
     * analysis takes a column of article labels ("第五条" over "第六条", set off by a wide space) for vertical
     * text, or drops it */
    TessBaseAPISetPageSegMode(api, PSM_SINGLE_COLUMN);
    return api;
}

/* Pixels per point: dpi / 72, or less for a page that would exceed OCR_MAX_PIXELS. */
static float render_scale(fz_rect bounds, double dpi) {
    double w = bounds.x1 - bounds.x0, h = bounds.y1 - bounds.y0, scale = dpi / 72.0;
    if (w > 0 && h > 0 && w * h * scale * scale > OCR_MAX_PIXELS) scale = sqrt(OCR_MAX_PIXELS / (w * h));
    return (float)scale;
}

/* The display list as a grey pixmap; NULL with the reason in error. */
static fz_pixmap *render_list(fz_context *ctx, fz_display_list *list, float scale, char *error, size_t cap) {
    fz_pixmap *pix = NULL;
    fz_var(pix);
    fz_try(ctx) {
        pix = fz_new_pixmap_from_display_list(ctx, list, fz_scale(scale, scale), fz_device_gray(ctx), 0);
    }
    fz_catch(ctx) {
        snprintf(error, cap, "cannot render the page: %s", fz_caught_message(ctx));
        pix = NULL;
    }
    return pix;
}

static void set_image(fz_context *ctx, TessBaseAPI *api, fz_pixmap *pix, float scale) {
    TessBaseAPISetImage(api, fz_pixmap_samples(ctx, pix), fz_pixmap_width(ctx, pix), fz_pixmap_height(ctx, pix), 1,
                        (int)fz_pixmap_stride(ctx, pix));
    TessBaseAPISetSourceResolution(api, (int)(scale * 72 + 0.5f));
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The median height in pixels of the text lines Tesseract's layout analysis finds in the image set, 0 if none. */
static int median_line_px(TessBaseAPI *api) {
    TessPageIterator *pi = TessBaseAPIAnalyseLayout(api);
    if (!pi) return 0;
    int h[512], n = 0;
    do {
        int l, t, r, b;
        if (TessPageIteratorBoundingBox(pi, RIL_TEXTLINE, &l, &t, &r, &b) && b - t >= 8 && n < 512) h[n++] = b - t;
    } while (TessPageIteratorNext(pi, RIL_TEXTLINE));
    TessPageIteratorDelete(pi);
    if (n == 0) return 0;
    qsort(h, (size_t)n, sizeof *h, cmp_int);
    return h[n / 2];
}

/* Renders and recognises page run->pages[i] into run->results[i]. The page is drawn at OCR_DPI; when the layout
 * analysis finds its text lines far from OCR_LINE_PX high (large print such as the 16-point type of official
 * documents reads worse at 300 dpi than at 200, small print worse than larger), it is drawn again at the
 * resolution that gives that height, between OCR_MIN_DPI and OCR_MAX_DPI. */
static void ocr_one(ocr_run *run, fz_context *ctx, TessBaseAPI *api, int i) {
    cq_ocr_page *res = &run->results[i];
    fz_page *page = NULL;
    fz_display_list *list = NULL;
    fz_rect bounds = fz_empty_rect;
    fz_var(page);
    fz_var(list);
    pthread_mutex_lock(&run->doc_lock);
    fz_try(ctx) {
        page = fz_load_page(ctx, run->doc, run->pages[i]);
        bounds = fz_bound_page(ctx, page);
        list = fz_new_display_list_from_page(ctx, page);
    }
    fz_always(ctx) {
        fz_drop_page(ctx, page);
    }
    fz_catch(ctx) {
        snprintf(res->error, sizeof res->error, "%s", fz_caught_message(ctx));
    }
    pthread_mutex_unlock(&run->doc_lock);
    if (!list) {
        res->failed = true;
        return;
    }
    float scale = render_scale(bounds, OCR_DPI);
    fz_pixmap *pix = render_list(ctx, list, scale, res->error, sizeof res->error);
    if (pix) {
        set_image(ctx, api, pix, scale);
        int line_px = median_line_px(api);
        if (line_px > OCR_LINE_PX_HIGH || (line_px > 0 && line_px < OCR_LINE_PX_LOW)) {
            double dpi = OCR_DPI * (double)OCR_LINE_PX / line_px;
            dpi = dpi < OCR_MIN_DPI ? OCR_MIN_DPI : dpi > OCR_MAX_DPI ? OCR_MAX_DPI : dpi;
            float rescaled = render_scale(bounds, dpi);
            if (fabsf(rescaled - scale) > 0.05f * scale) {
                fz_drop_pixmap(ctx, pix);
                scale = rescaled;
                pix = render_list(ctx, list, scale, res->error, sizeof res->error);
                if (pix) set_image(ctx, api, pix, scale);
            }
        }
    }
    fz_drop_display_list(ctx, list);
    if (!pix) {
        res->failed = true;
        TessBaseAPIClear(api);
        return;
    }
    if (TessBaseAPIRecognize(api, NULL) != 0) {
        snprintf(res->error, sizeof res->error, "Tesseract could not recognise the page");
        res->failed = true;
    } else if (!collect(api, res, scale, fz_pixmap_x(ctx, pix), fz_pixmap_y(ctx, pix))) {
        cq_ocr_page_free(res);
        snprintf(res->error, sizeof res->error, "out of memory");
        res->failed = true;
        res->nomem = true;
    }
    TessBaseAPIClear(api);
    fz_drop_pixmap(ctx, pix);
}

static void *worker(void *arg) {
    ocr_run *run = arg;
    omp_set_max_active_levels(0); /* see the top of this file */
    char why[200] = "";
    fz_context *ctx = fz_clone_context(run->ctx);
    TessBaseAPI *api = ctx ? engine_new(why, sizeof why) : NULL;
    if (!ctx) snprintf(why, sizeof why, "out of memory for a MuPDF context");
    if (ctx) {
        fz_set_warning_callback(ctx, noop_message, NULL);
        fz_set_error_callback(ctx, noop_message, NULL);
    }
    for (;;) {
        pthread_mutex_lock(&run->lock);
        int i = run->next++;
        pthread_mutex_unlock(&run->lock);
        if (i >= run->n) break;
        if (run->cancel && atomic_load(run->cancel)) {
            run->results[i].failed = true;
            snprintf(run->results[i].error, sizeof run->results[i].error, "cancelled");
        } else if (api) {
            ocr_one(run, ctx, api, i);
        } else {
            run->results[i].failed = true;
            run->results[i].unavailable = true;
            snprintf(run->results[i].error, sizeof run->results[i].error, "%s", why);
        }
        pthread_mutex_lock(&run->lock);
        run->finished[i] = true;
        pthread_cond_signal(&run->cond);
        pthread_mutex_unlock(&run->lock);
    }
    if (api) {
        TessBaseAPIEnd(api);
        TessBaseAPIDelete(api);
    }
    fz_drop_context(ctx);
    pthread_mutex_lock(&run->lock);
    run->workers_left--;
    pthread_cond_signal(&run->cond);
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

int cq_ocr_default_threads(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > OCR_MAX_THREADS ? OCR_MAX_THREADS : (int)cpus;
}

cq_status cq_ocr_pages(fz_context *ctx, fz_document *doc, const int *pages, int n, int threads,
                       const atomic_bool *cancel, cq_ocr_page *results, void (*on_page)(void *user, int i), void *user,
                       cq_err *err) {
    memset(results, 0, (size_t)n * sizeof *results);
    if (n <= 0) return CQ_OK;
    if (threads <= 0) threads = cq_ocr_default_threads();
    if (threads > n) threads = n;
    ocr_run run = {.ctx = ctx, .doc = doc, .pages = pages, .n = n, .results = results, .cancel = cancel};
    run.finished = calloc((size_t)n, sizeof *run.finished);
    bool *reported = calloc((size_t)n, sizeof *reported);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!run.finished || !reported || !tids) {
        free(run.finished);
        free(reported);
        free(tids);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for OCR of %d pages", n);
    }
    pthread_mutex_init(&run.doc_lock, NULL);
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);
    /* Tesseract and MuPDF's rendering need more stack than a small default: 8 MB, as for the main thread */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        pthread_mutex_lock(&run.lock);
        run.workers_left++;
        pthread_mutex_unlock(&run.lock);
        if (pthread_create(&tids[t], &attr, worker, &run) != 0) {
            pthread_mutex_lock(&run.lock);
            run.workers_left--;
            pthread_mutex_unlock(&run.lock);
            break;
        }
        started++;
    }
    pthread_attr_destroy(&attr);
    cq_status rc = CQ_OK;
    if (started == 0) {
        rc = cq_err_set(err, CQ_ERR_INTERNAL, "cannot start an OCR thread");
    } else {
        /* report pages as they finish, in whatever order */
        pthread_mutex_lock(&run.lock);
        for (int done = 0; done < n;) {
            int ready = -1;
            for (int i = 0; i < n && ready < 0; i++)
                if (run.finished[i] && !reported[i]) ready = i;
            if (ready < 0) {
                if (run.workers_left == 0) break;
                pthread_cond_wait(&run.cond, &run.lock);
                continue;
            }
            reported[ready] = true;
            done++;
            pthread_mutex_unlock(&run.lock);
            if (on_page) on_page(user, ready);
            pthread_mutex_lock(&run.lock);
        }
        while (run.workers_left > 0) pthread_cond_wait(&run.cond, &run.lock);
        pthread_mutex_unlock(&run.lock);
        for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    }
    pthread_mutex_destroy(&run.doc_lock);
    pthread_mutex_destroy(&run.lock);
    pthread_cond_destroy(&run.cond);
    free(run.finished);
    free(reported);
    free(tids);
    for (int i = 0; i < n && !rc; i++)
        if (results[i].nomem) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory during OCR");
    if (!rc && cancel && atomic_load(cancel)) rc = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled during OCR");
    return rc;
}
