/* PDF reader: cq_reader_read_pdf with MuPDF.
 *
 * Three passes, so that only the compact record stays in memory whatever the PDF's size:
 *  1. page by page: MuPDF's structured text for the page, turned into lines of glyphs (code point after repair,
 *     x0, x1) with their box, baseline, font size and MuPDF block; pieces of one printed line that MuPDF split
 *     (same baseline, side by side) are merged, spaces are cleaned (cq_dt_clean_line); the page's structured
 *     text is dropped before the next page is loaded;
 *  2. running headers and footers: in the top and bottom margins, lines that are only a page number and lines
 *     repeated (digits aside) at the same height on many pages are dropped; outside the margins (and as the top or
 *     bottom row of a page) a repeated line must have the same digits, or digits that follow the page number. A
 *     clause heading ("Article 12") is never a running header, a repeated line is one only where its page keeps
 *     other text, and a page that still loses all its text is flagged (quality 0.5) rather than silently empty;
 *  3. the lines are joined into the document text: '\n' after a line that ends a paragraph, nothing or one space
 *     where a line only wraps on (the rules are at line_wraps_on), '\f' between pages.
 *
 * OCR (reader/ocr.c). After pass 1, the pages without a usable text layer (cq_reader_ocr: no text but images, or
 * text too damaged to use; every page when forced) are recognised in parallel; a page's OCR lines replace its
 * text-layer lines (they are added at the end of the record, which is then put back in page order) and go through
 * passes 2 and 3 like any others. A page keeps a damaged text layer when OCR reads it with less confidence than
 * the layer's own quality score.
 *
 * MuPDF is used with one context per call (made for sharing with the OCR threads); its warnings are kept (the last
 * one goes into error messages) and never printed.
 *
 * Limits (cq_reader_limits). The page count is checked before any page is read. The memory budget covers MuPDF
 * (its context allocates through a counting allocator that refuses past the budget, shared by the OCR threads'
 * clones; the page that needed it makes the document "too large", not merely unreadable) plus the record (its
 * arrays' capacities, checked every 4,096 glyphs and after each page) plus what assembling the text will add. A
 * cancel flag is looked at before each page, by the OCR threads before each page they take, and by the counting
 * allocator at each of MuPDF's allocations (a long page stops within it). Page k is found
 * through MuPDF's page map, built once (O(n)), where MuPDF alone walks the page tree from its root for every page
 * (O(n^2): 20,000 tiny pages took 88 s, now 1.6 s; docs/RELIABILITY.md). */
#include "reader/reader.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "reader/reader_internal.h"

/* ---------------------------------------------------------------------------------------------------------
 * The record built by pass 1
 * --------------------------------------------------------------------------------------------------------- */

/* Glyphs as parallel arrays: code point (after repair) and horizontal extent in points. */
typedef struct {
    uint32_t *cp;
    float *x0, *x1;
    size_t n, cap;
} glyph_list;

typedef struct {
    uint32_t first, n;      /* glyphs in ex->g */
    float x0, y0, x1, y1;   /* box in points, origin top-left */
    float baseline, size;   /* baseline y and font size of the line's middle glyph */
    float label_end_x;      /* x where the text after a leading item label starts, 0 if no label */
    int page;               /* 0-based */
    int block;              /* MuPDF block ordinal on the page */
    bool vertical;          /* not left-to-right horizontal text: never joined to a neighbour */
    bool drop;              /* running header, footer or page number */
    bool repeated;          /* … dropped as a line repeated on many pages (not as a page number) */
} pdf_line;

typedef struct {
    float width, height;
    uint32_t first_line, n_lines;
    size_t n_images;
    float image_area;       /* square points of the page covered by images (overlaps counted twice) */
    size_t n_glyphs;        /* glyphs read from the page (before header/footer removal) */
    uint32_t n_words_dropped; /* lines with words (not page numbers) dropped as running headers / footers */
    cq_text_stats stats;
    cq_dt_spacing spacing;
    bool unreadable;
    char error[120];
    bool ocr;               /* the lines are OCR's */
    bool ocr_tried;         /* OCR ran on the page (ocr: and its result was used) */
    double ocr_confidence;
    char ocr_error[200];    /* OCR failed or is not available: why */
    bool ocr_unavailable;   /* … it is not available (Tesseract or its language data missing) */
} pdf_page_info;

typedef struct {
    glyph_list g;           /* every line's glyphs, back to back */
    pdf_line *lines;
    size_t n_lines, cap_lines;
    pdf_page_info *pages;
    int n_pages;
    bool nomem;
    char last_warning[200];
} extraction;

/* The memory budget of one reading: MuPDF's allocations (through budget_malloc and co.) plus the record's. */
typedef struct {
    size_t limit;           /* bytes, 0: none */
    _Atomic size_t mupdf;   /* what MuPDF holds now (its OCR threads' clones allocate through the same budget) */
    size_t own;             /* the record and the page scratch, as last counted */
    atomic_bool refused;    /* an allocation of MuPDF was refused for the budget (since the flag was cleared) */
    const atomic_bool *cancel; /* the reading's cancel flag (NULL: none): once set, MuPDF's allocations are refused,
                                  so that a long page stops at its next allocation, not at its end */
    atomic_bool cancelled;  /* … an allocation was refused for it */
} pdf_budget;

/* One line as MuPDF gives it, before merging and cleaning (page-local scratch). */
typedef struct {
    size_t first, n;        /* in the scratch glyph arrays */
    float x0, y0, x1, y1, baseline, size;
    int block;
    bool vertical;
} raw_line;

typedef struct {
    glyph_list g;
    raw_line *lines;
    size_t n_lines, cap_lines;
    uint32_t *clean;        /* cq_dt_clean_line output */
    size_t cap_clean;
    bool nomem;
    bool over_budget;       /* the page's glyphs went past the budget */
    pdf_budget *budget;
    size_t record_bytes;    /* the record's share of budget->own, as counted before this page */
} page_scratch;

static bool budget_allows(pdf_budget *b, size_t more) {
    if (b->cancel && atomic_load(b->cancel)) {
        b->cancelled = true;
        return false;
    }
    if (b->limit && b->mupdf + b->own + more > b->limit) {
        b->refused = true;
        return false;
    }
    return true;
}

static void *budget_malloc(void *user, size_t size) {
    pdf_budget *b = user;
    if (!budget_allows(b, size)) return NULL;
    void *p = malloc(size);
    if (p) b->mupdf += malloc_usable_size(p);
    return p;
}

static void *budget_realloc(void *user, void *old, size_t size) {
    pdf_budget *b = user;
    size_t had = old ? malloc_usable_size(old) : 0;
    if (size > had && !budget_allows(b, size - had)) return NULL;
    void *p = realloc(old, size);
    if (p || size == 0) {
        b->mupdf -= had;
        if (p) b->mupdf += malloc_usable_size(p);
    }
    return p;
}

static void budget_free(void *user, void *p) {
    pdf_budget *b = user;
    if (p) b->mupdf -= malloc_usable_size(p);
    free(p);
}

#define grow cq_grow

static bool glyphs_push(glyph_list *g, uint32_t cp, float x0, float x1) {
    if (g->n == g->cap) {
        size_t c1 = g->cap, c2 = c1, c3 = c1;
        if (!grow((void **)&g->cp, &c1, g->n + 1, sizeof *g->cp) || !grow((void **)&g->x0, &c2, g->n + 1, sizeof *g->x0) ||
            !grow((void **)&g->x1, &c3, g->n + 1, sizeof *g->x1))
            return false;
        g->cap = c1;
    }
    g->cp[g->n] = cp;
    g->x0[g->n] = x0;
    g->x1[g->n] = x1;
    g->n++;
    return true;
}

static void glyphs_free(glyph_list *g) {
    free(g->cp);
    free(g->x0);
    free(g->x1);
}

static void free_scratch(page_scratch *s) {
    glyphs_free(&s->g);
    free(s->lines);
    free(s->clean);
}

static void free_extraction(extraction *ex) {
    glyphs_free(&ex->g);
    free(ex->lines);
    free(ex->pages);
}

/* ---------------------------------------------------------------------------------------------------------
 * Pass 1: one page
 * --------------------------------------------------------------------------------------------------------- */

static float minf(float a, float b) { return a < b ? a : b; }
static float maxf(float a, float b) { return a > b ? a : b; }

/* Reads MuPDF's lines into the scratch: every character repaired (stats counted), white space as ' '. */
static void read_stext(fz_stext_page *st, page_scratch *s, pdf_page_info *pi) {
    int block_no = 0;
    for (fz_stext_block *b = st->first_block; b; b = b->next, block_no++) {
        if (b->type == FZ_STEXT_BLOCK_IMAGE) {
            pi->n_images++;
            fz_rect r = fz_intersect_rect(b->bbox, st->mediabox);
            if (!fz_is_empty_rect(r)) pi->image_area += (r.x1 - r.x0) * (r.y1 - r.y0);
            continue;
        }
        if (b->type != FZ_STEXT_BLOCK_TEXT) continue;
        for (fz_stext_line *ln = b->u.t.first_line; ln; ln = ln->next) {
            size_t first = s->g.n;
            float size_mid = 0;
            size_t n_sizes = 0;
            float baseline = 0;
            for (fz_stext_char *ch = ln->first_char; ch; ch = ch->next) {
                if (ch->c <= 0) continue;
                pi->n_glyphs++;
                uint32_t cp = cq_text_repair_cp((uint32_t)ch->c, &pi->stats);
                if (!cp) continue;
                if (cp == '\t' || cp == '\n' || cp == '\f') cp = ' ';
                fz_quad q = ch->quad;
                float x0 = minf(minf(q.ul.x, q.ll.x), minf(q.ur.x, q.lr.x));
                float x1 = maxf(maxf(q.ul.x, q.ll.x), maxf(q.ur.x, q.lr.x));
                if (!glyphs_push(&s->g, cp, x0, x1)) {
                    s->nomem = true;
                    return;
                }
                if ((s->g.n & 4095) == 0 && s->budget->limit) {
                    s->budget->own = s->record_bytes + s->g.cap * 12 + s->cap_lines * sizeof *s->lines;
                    if (!budget_allows(s->budget, 0)) {
                        s->over_budget = true;
                        return;
                    }
                }
                if (cp != ' ' && n_sizes++ == 0) {
                    baseline = ch->origin.y;
                    size_mid = ch->size;
                }
            }
            if (s->g.n == first) continue;
            /* font size of the middle non-space glyph: robust against a drop cap or a footnote mark */
            if (n_sizes > 1) {
                size_t want = n_sizes / 2, k = 0;
                for (fz_stext_char *ch = ln->first_char; ch; ch = ch->next) {
                    if (ch->c <= 0 || ch->c == ' ') continue;
                    if (k++ == want) {
                        size_mid = ch->size;
                        break;
                    }
                }
            }
            if (!grow((void **)&s->lines, &s->cap_lines, s->n_lines + 1, sizeof *s->lines)) {
                s->nomem = true;
                return;
            }
            raw_line *r = &s->lines[s->n_lines++];
            r->first = first;
            r->n = s->g.n - first;
            r->x0 = ln->bbox.x0;
            r->y0 = ln->bbox.y0;
            r->x1 = ln->bbox.x1;
            r->y1 = ln->bbox.y1;
            r->baseline = n_sizes ? baseline : ln->bbox.y1;
            r->size = size_mid > 0 ? size_mid : (ln->bbox.y1 - ln->bbox.y0);
            if (r->size <= 0) r->size = 1;
            r->block = block_no;
            r->vertical = ln->wmode != 0 || fabsf(ln->dir.y) > 0.1f || ln->dir.x < 0;
        }
    }
}

/* Length of the item label at the start of glyphs cp[0..n) (see cq_dt_item_label). */
static size_t label_of(const uint32_t *cp, size_t n) { return cq_dt_item_label(cp, n < 40 ? n : 40, NULL); }

/* Pieces of one printed line that MuPDF split (a label and its text, table cells close together) are merged:
 * consecutive in reading order, same baseline, the second just right of the first (up to 2.5 em away; 4 em
 * when the first piece is only an item label such as "1.4" or "(a)", set apart by a tab stop). */
static bool same_printed_line(const page_scratch *s, const raw_line *a, const raw_line *b) {
    if (a->vertical || b->vertical) return false;
    float size = maxf(a->size, b->size);
    if (fabsf(a->baseline - b->baseline) >= 0.3f * size || b->x0 < a->x1 - 0.25f * size ||
        minf(a->size, b->size) <= 0.6f * size)
        return false;
    float gap = b->x0 - a->x1;
    if (gap < 2.5f * size) return true;
    if (gap >= 4.0f * size || a->n > 12) return false;
    size_t n = a->n;
    while (n > 0 && s->g.cp[a->first + n - 1] == ' ') n--;
    return n > 0 && label_of(s->g.cp + a->first, n) == n;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Some PDFs (OCR layers among them) give every glyph zero width; MuPDF then puts a space after every letter
 * ("V O L .") and none at the real word gaps. For such a line the spaces are rebuilt from the distances between
 * the glyphs: a step clearly longer than the usual one is a word gap. cps/src hold the line (src: scratch index,
 * SIZE_MAX for a synthetic space); returns the new length. */
static size_t respace_zero_width(const page_scratch *s, uint32_t *cps, size_t *src, size_t m, float size) {
    size_t letters = 0, zero = 0;
    for (size_t k = 0; k < m; k++) {
        if (cps[k] == ' ' || src[k] == SIZE_MAX) continue;
        letters++;
        if (s->g.x1[src[k]] - s->g.x0[src[k]] < 0.05f * size) zero++; /* a slanted quad is not quite 0 */
    }
    if (letters < 4 || zero * 10 < letters * 6) return m;
    /* the usual step from one letter to the next */
    float steps[256];
    size_t ns = 0;
    float prev_x = 0;
    bool have_prev = false;
    for (size_t k = 0; k < m && ns < 256; k++) {
        if (cps[k] == ' ' || src[k] == SIZE_MAX) continue;
        float x = s->g.x0[src[k]];
        if (have_prev && x > prev_x) steps[ns++] = x - prev_x;
        prev_x = x;
        have_prev = true;
    }
    if (ns < 3) return m;
    qsort(steps, ns, sizeof *steps, cmp_float);
    float word_gap = 1.4f * steps[ns / 2];
    /* letters only, then a space before each letter that follows a word gap (or goes backwards); the result is
     * written in place, so it must not be longer than the line */
    size_t n = 0, gaps = 0;
    have_prev = false;
    for (size_t k = 0; k < m; k++) {
        if (cps[k] == ' ' || src[k] == SIZE_MAX) continue;
        float x = s->g.x0[src[k]];
        if (have_prev && (x - prev_x > word_gap || x < prev_x)) gaps++;
        prev_x = x;
        have_prev = true;
        n++;
    }
    if (n + gaps > m) return m;
    n = 0;
    for (size_t k = 0; k < m; k++)
        if (cps[k] != ' ' && src[k] != SIZE_MAX) {
            cps[n] = cps[k];
            src[n++] = src[k];
        }
    size_t w = n + gaps;
    for (size_t k = n; k-- > 0;) {
        cps[--w] = cps[k];
        src[w] = src[k];
        float x = s->g.x0[src[w]];
        if (k > 0 && (x - s->g.x0[src[k - 1]] > word_gap || x < s->g.x0[src[k - 1]])) {
            cps[--w] = ' ';
            src[w] = SIZE_MAX;
        }
    }
    return n + gaps;
}

/* Turns the scratch's raw lines into cleaned lines of the record. */
static void build_page_lines(extraction *ex, page_scratch *s, int page, pdf_page_info *pi) {
    size_t i = 0;
    while (i < s->n_lines && !ex->nomem && !s->nomem) {
        /* group i..j-1: one printed line */
        size_t j = i + 1;
        while (j < s->n_lines && same_printed_line(s, &s->lines[j - 1], &s->lines[j])) j++;
        /* gather its glyphs, with a space where the pieces leave a gap */
        size_t total = 0;
        for (size_t k = i; k < j; k++) total += s->lines[k].n + 1;
        if (!grow((void **)&s->clean, &s->cap_clean, 2 * total, sizeof *s->clean)) {
            s->nomem = true;
            return;
        }
        uint32_t *cps = s->clean, *out = s->clean + total;
        /* index map into the scratch arrays; a synthetic space maps to SIZE_MAX */
        size_t *src = malloc(total * sizeof *src);
        if (!src) {
            s->nomem = true;
            return;
        }
        size_t m = 0;
        for (size_t k = i; k < j; k++) {
            const raw_line *r = &s->lines[k];
            if (k > i && r->x0 - s->lines[k - 1].x1 > 0.15f * r->size) {
                cps[m] = ' ';
                src[m++] = SIZE_MAX;
            }
            for (size_t g = 0; g < r->n; g++) {
                cps[m] = s->g.cp[r->first + g];
                src[m++] = r->first + g;
            }
        }
        m = respace_zero_width(s, cps, src, m, s->lines[i].size);
        if (!cq_dt_clean_line(cps, m, out, false, &pi->spacing)) {
            free(src);
            s->nomem = true;
            return;
        }
        uint32_t first = (uint32_t)ex->g.n;
        for (size_t k = 0; k < m && !ex->nomem; k++) {
            if (!out[k]) continue;
            float x0, x1;
            if (src[k] != SIZE_MAX) {
                x0 = s->g.x0[src[k]];
                x1 = s->g.x1[src[k]];
            } else { /* a space between two pieces: it spans the gap */
                bool before = k > 0 && src[k - 1] != SIZE_MAX, after = k + 1 < m && src[k + 1] != SIZE_MAX;
                x1 = after ? s->g.x0[src[k + 1]] : before ? s->g.x1[src[k - 1]] : 0;
                x0 = before ? minf(s->g.x1[src[k - 1]], x1) : x1;
            }
            if (!glyphs_push(&ex->g, out[k], x0, x1)) ex->nomem = true;
        }
        free(src);
        if (ex->nomem) return;
        uint32_t n = (uint32_t)ex->g.n - first;
        if (n > 0) {
            if (!grow((void **)&ex->lines, &ex->cap_lines, ex->n_lines + 1, sizeof *ex->lines)) {
                ex->nomem = true;
                return;
            }
            pdf_line *L = &ex->lines[ex->n_lines++];
            memset(L, 0, sizeof *L);
            L->first = first;
            L->n = n;
            L->x0 = s->lines[i].x0;
            L->y0 = s->lines[i].y0;
            L->x1 = s->lines[i].x1;
            L->y1 = s->lines[i].y1;
            for (size_t k = i + 1; k < j; k++) {
                L->x0 = minf(L->x0, s->lines[k].x0);
                L->y0 = minf(L->y0, s->lines[k].y0);
                L->x1 = maxf(L->x1, s->lines[k].x1);
                L->y1 = maxf(L->y1, s->lines[k].y1);
            }
            /* glyph extents are tighter than MuPDF's line box (which counts trailing spaces) */
            L->x0 = ex->g.x0[first];
            L->x1 = ex->g.x1[first + n - 1];
            L->baseline = s->lines[i].baseline;
            L->size = s->lines[i].size;
            L->page = page;
            L->block = s->lines[i].block;
            L->vertical = s->lines[i].vertical;
            size_t label = label_of(ex->g.cp + first, n);
            if (label) {
                size_t k = label;
                while (k < n && ex->g.cp[first + k] == ' ') k++;
                L->label_end_x = k < n ? ex->g.x0[first + k] : L->x1;
            }
        }
        i = j;
    }
}

/* MuPDF's message msg, as text fit for ours, into dst (cap bytes): valid UTF-8 (MuPDF quotes the file's own bytes:
 * "non-page object in page tree (Pa\347e)"; each invalid byte becomes U+FFFD), no control characters, cut at a
 * character boundary. */
static void mupdf_text(char *dst, size_t cap, const char *msg) {
    size_t n = strlen(msg), o = 0;
    for (size_t i = 0; i < n && cap > 0;) {
        size_t len;
        uint32_t cp = cq_utf8_decode(msg + i, n - i, &len);
        if (len == 0) len = 1;
        char buf[4];
        size_t k;
        if (cp == CQ_UTF8_REPLACEMENT && !(len == 3 && !memcmp(msg + i, "\xEF\xBF\xBD", 3))) {
            memcpy(buf, "\xEF\xBF\xBD", 3);
            k = 3;
            len = 1;
        } else if (cp < 0x20 || cp == 0x7f) {
            buf[0] = ' ';
            k = 1;
        } else {
            memcpy(buf, msg + i, len);
            k = len;
        }
        if (o + k + 1 > cap) break;
        memcpy(dst + o, buf, k);
        o += k;
        i += len;
    }
    if (cap > 0) dst[o] = 0;
}

static void warning_cb(void *user, const char *message) {
    extraction *ex = user;
    mupdf_text(ex->last_warning, sizeof ex->last_warning, message);
}

static void error_cb(void *user, const char *message) { (void)user, (void)message; }

/* Bytes the record holds (capacities: what is allocated), the page scratch included. */
static size_t record_bytes(const extraction *ex, const page_scratch *s) {
    return ex->g.cap * 12 + ex->cap_lines * sizeof *ex->lines + (size_t)ex->n_pages * sizeof *ex->pages +
           s->g.cap * 12 + s->cap_lines * sizeof *s->lines + s->cap_clean * sizeof *s->clean;
}

typedef enum { PAGE_READ, PAGE_NOMEM, PAGE_OVER_BUDGET, PAGE_CANCELLED } page_result;

/* Reads page `page` into the record. A page MuPDF cannot read is marked unreadable (PAGE_READ); PAGE_NOMEM when
 * malloc failed, PAGE_OVER_BUDGET when the page needed more than the budget left. */
static page_result read_page(fz_context *ctx, fz_document *doc, pdf_document *map, int page, extraction *ex,
                             page_scratch *s) {
    pdf_page_info *pi = &ex->pages[page];
    fz_page *pg = NULL;
    fz_stext_page *st = NULL;
    pdf_obj *held = NULL;
    fz_var(pg);
    fz_var(st);
    fz_var(held);
    s->g.n = 0;
    s->n_lines = 0;
    s->budget->refused = false;
    s->record_bytes = ex->g.cap * 12 + ex->cap_lines * sizeof *ex->lines + (size_t)ex->n_pages * sizeof *ex->pages;
    pi->first_line = (uint32_t)ex->n_lines;
    fz_try(ctx) {
        /* With the page map (map: its document, else NULL), MuPDF 1.21's page lookup returns a reference to the page
         * object that pdf_load_page keeps once more and never gives back: each page object (~700 bytes) would stay
         * allocated for good. The extra reference is measured, and given back when there is one. */
        int refs = 0;
        if (map) {
            held = pdf_load_object(ctx, map, map->fwd_page_map[page]);
            refs = pdf_obj_refs(ctx, held);
        }
        pg = fz_load_page(ctx, doc, page);
        if (held && ((pdf_page *)pg)->obj == held && pdf_obj_refs(ctx, held) == refs + 2) pdf_drop_obj(ctx, held);
        fz_rect r = fz_bound_page(ctx, pg);
        pi->width = r.x1 - r.x0;
        pi->height = r.y1 - r.y0;
        /* Ligatures expanded, white space as spaces, no dehyphenation (we decide at line ends), images kept as
         * blocks so that a page of images without text can be told from a blank one, text outside the page
         * ignored. */
        fz_stext_options opts = {.flags = FZ_STEXT_PRESERVE_IMAGES | FZ_STEXT_MEDIABOX_CLIP};
        st = fz_new_stext_page_from_page(ctx, pg, &opts);
        read_stext(st, s, pi);
    }
    fz_always(ctx) {
        fz_drop_stext_page(ctx, st);
        fz_drop_page(ctx, pg);
        pdf_drop_obj(ctx, held);
    }
    fz_catch(ctx) {
        if (fz_caught(ctx) == FZ_ERROR_MEMORY && s->budget->refused) s->over_budget = true;
        pi->unreadable = true;
        mupdf_text(pi->error, sizeof pi->error, fz_caught_message(ctx));
        s->n_lines = 0;
    }
    if (s->budget->cancelled) return PAGE_CANCELLED;
    if (s->nomem) return PAGE_NOMEM;
    if (s->over_budget) return PAGE_OVER_BUDGET;
    build_page_lines(ex, s, page, pi);
    pi->n_lines = (uint32_t)ex->n_lines - pi->first_line;
    if (s->nomem || ex->nomem) return PAGE_NOMEM;
    s->budget->own = record_bytes(ex, s);
    if (budget_allows(s->budget, 0)) return PAGE_READ;
    return s->budget->cancelled ? PAGE_CANCELLED : PAGE_OVER_BUDGET; /* a cancel is not a budget's refusal */
}

/* ---------------------------------------------------------------------------------------------------------
 * Pass 2: running headers, footers and page numbers
 * --------------------------------------------------------------------------------------------------------- */

static bool in_margin(const pdf_line *L, const pdf_page_info *pi) {
    if (pi->height <= 0) return false;
    float mid = (L->y0 + L->y1) / 2;
    return mid < 0.12f * pi->height || mid > 0.88f * pi->height;
}

static bool is_roman_cp(uint32_t c) {
    return c == 'i' || c == 'v' || c == 'x' || c == 'l' || c == 'I' || c == 'V' || c == 'X' || c == 'L';
}

static bool is_dash_deco(uint32_t c) {
    return c == '-' || c == 0x2010 || c == 0x2012 || c == 0x2013 || c == 0x2014 || c == 0x2015 || c == 0x2212 ||
           c == 0x00B7 || c == 0x2022 || c == '|' || c == '~' || c == 0xFF0D || c == 0x2500;
}

/* A line that is only a page number: "5", "- 5 -", "— 5 —", "第 5 页", "第5页 共20页", "Page 5", "Page 5 of 20",
 * "5 / 20", "iv". */
static bool page_number_only(const uint32_t *cp, size_t n, long *value) {
    uint32_t t[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 64; i++)
        if (cp[i] != ' ') t[m++] = cp[i];
    if (m == 0 || m >= 64) return false;
    size_t i = 0, e = m;
    while (i < e && is_dash_deco(t[i])) i++;
    while (e > i && is_dash_deco(t[e - 1])) e--;
    if (i == e) return false;
    /* Page / page / PAGE prefix */
    if (e - i > 4 && (t[i] == 'P' || t[i] == 'p') && (t[i + 1] == 'a' || t[i + 1] == 'A') &&
        (t[i + 2] == 'g' || t[i + 2] == 'G') && (t[i + 3] == 'e' || t[i + 3] == 'E'))
        i += 4;
    bool chinese = false;
    if (t[i] == 0x7B2C) { /* 第 */
        chinese = true;
        i++;
    }
    size_t d = i;
    *value = -1;
    while (i < e && t[i] >= '0' && t[i] <= '9') i++;
    if (i > d && i - d <= 6) {
        *value = 0;
        for (size_t k = d; k < i; k++) *value = *value * 10 + (long)(t[k] - '0');
    }
    if (i == d) {
        while (i < e && is_roman_cp(t[i])) i++;
        if (i == d || i - d > 6) return false;
        char roman[6];
        for (size_t k = d; k < i; k++) roman[k - d] = (char)t[k]; /* ASCII: is_roman_cp */
        size_t used;
        *value = cq_roman_parse(roman, i - d, &used);
    }
    if (chinese) {
        if (i >= e || t[i] != 0x9875) return false; /* 页 */
        i++;
    }
    if (i == e) return true;
    /* "of 20", "/ 20", "共20页" */
    if (t[i] == '/' || t[i] == 0xFF0F) i++;
    else if (e - i >= 2 && t[i] == 'o' && t[i + 1] == 'f') i += 2;
    else if (t[i] == 0x5171) i++; /* 共 */
    else return false;
    size_t d2 = i;
    while (i < e && t[i] >= '0' && t[i] <= '9') i++;
    if (i == d2) return false;
    if (i < e && t[i] == 0x9875) i++;
    return i == e;
}

typedef struct {
    uint64_t key;
    uint64_t exact;         /* the text with its digits */
    float y;
    int page;
    uint32_t line;
} margin_line;

static int cmp_exact(const void *a, const void *b) {
    const margin_line *x = a, *y = b;
    if (x->exact != y->exact) return x->exact < y->exact ? -1 : 1;
    if (x->y != y->y) return x->y < y->y ? -1 : 1;
    return x->page - y->page;
}

static int cmp_margin(const void *a, const void *b) {
    const margin_line *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->y != y->y) return x->y < y->y ? -1 : 1;
    return x->page - y->page;
}

/* The line's text with digits as '#' (exact: as they are) and spaces removed, hashed (FNV-1a): "Page 3 of 20" and
 * "Page 4 of 20" are the same header. */
static uint64_t margin_key(const extraction *ex, const pdf_line *L, bool exact) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t g = L->first; g < L->first + L->n; g++) {
        uint32_t c = ex->g.cp[g];
        if (c == ' ') continue;
        if (!exact && c >= '0' && c <= '9') c = '#';
        h = (h ^ c) * 1099511628211ull;
    }
    return h;
}

/* A line that starts like a clause heading ("Article 12", "Section 7.2", "§ 3", "第十二条 …"): never a running header,
 * however often its wording repeats (a 100-page PDF with an "Article NNN" heading atop each page lost them all).
 * Chapter, part and schedule lines ("第三章 劳动合同", "Schedule 2") are not clause headings: books repeat them atop
 * their pages. */
static bool clause_heading_line(const extraction *ex, const pdf_line *L) {
    bool strong = false;
    const uint32_t *cp = ex->g.cp + L->first;
    size_t n = L->n < 40 ? L->n : 40;
    size_t k = cq_dt_item_label(cp, n, &strong);
    if (!k || !strong) return false;
    for (size_t i = 0; i < k; i++)
        if (cp[i] == 0x6761) return true; /* 条 */
    static const char *const words[] = {"Article", "ARTICLE", "Section", "SECTION", "Clause", "CLAUSE", "\xC2\xA7"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t i = 0, b = 0;
        const char *p = words[w];
        while (p[b] && i < n) { /* the word's code points, decoded from its UTF-8 */
            size_t l;
            uint32_t c = cq_utf8_decode(p + b, strlen(p + b), &l);
            if (cp[i] != c) break;
            b += l;
            i++;
        }
        if (!p[b]) return true;
    }
    return false;
}

/* Marks in row[] the lines of the top row (1) and the bottom row (2) of each page: kept horizontal lines whose
 * baseline is within half an em of the page's highest (lowest) baseline. */
static void mark_edge_rows(const extraction *ex, uint8_t *row) {
    for (int p = 0; p < ex->n_pages; p++) {
        const pdf_page_info *pi = &ex->pages[p];
        float top = 0, bottom = 0;
        bool any = false;
        for (uint32_t i = pi->first_line; i < pi->first_line + pi->n_lines; i++) {
            const pdf_line *L = &ex->lines[i];
            row[i] = 0;
            if (L->drop || L->vertical) continue;
            if (!any || L->baseline < top) top = L->baseline;
            if (!any || L->baseline > bottom) bottom = L->baseline;
            any = true;
        }
        for (uint32_t i = pi->first_line; i < pi->first_line + pi->n_lines; i++) {
            const pdf_line *L = &ex->lines[i];
            if (L->drop || L->vertical || bottom - top < 2 * L->size) continue;
            if (L->baseline <= top + 0.5f * L->size) row[i] = 1;
            else if (L->baseline >= bottom - 0.5f * L->size) row[i] = 2;
        }
    }
}

/* Page numbers printed inside the page, just under (or over) the text rather than in the margin: a number
 * alone in the top or bottom row of its page whose difference to the page's index recurs, give or take 2 (an
 * unnumbered page in between), on two pages within 5 pages either side. Numbering may restart (after the cover,
 * in an exhibit). */
static bool drop_inner_page_numbers(extraction *ex, const uint8_t *row) {
    size_t n = 0;
    for (size_t i = 0; i < ex->n_lines; i++) n += row[i] != 0;
    if (n == 0) return true;
    long *offset = malloc(n * sizeof *offset);
    uint32_t *line = malloc(n * sizeof *line);
    if (!offset || !line) {
        free(offset);
        free(line);
        return false;
    }
    n = 0;
    for (size_t i = 0; i < ex->n_lines; i++) {
        const pdf_line *L = &ex->lines[i];
        long value;
        if (row[i] && page_number_only(ex->g.cp + L->first, L->n, &value) && value >= 0) {
            offset[n] = value - (L->page + 1);
            line[n++] = (uint32_t)i;
        }
    }
    /* lines are in page order: look at candidates within 5 pages either side */
    size_t lo = 0;
    for (size_t i = 0; i < n; i++) {
        int page = ex->lines[line[i]].page, same = 0;
        while (ex->lines[line[lo]].page < page - 5) lo++;
        for (size_t j = lo; j < n && ex->lines[line[j]].page <= page + 5; j++)
            if (ex->lines[line[j]].page != page && labs(offset[j] - offset[i]) <= 2) same++;
        if (same >= 2) ex->lines[line[i]].drop = true;
    }
    free(offset);
    free(line);
    return true;
}

/* The numbers of line L (up to 4, of at most 6 digits), as value - page number, into off[]; returns how many. */
static int number_offsets(const extraction *ex, const pdf_line *L, long *off) {
    int n = 0;
    for (uint32_t g = L->first; g < L->first + L->n && n < 4;) {
        uint32_t c = ex->g.cp[g];
        if (c < '0' || c > '9') {
            g++;
            continue;
        }
        long v = 0;
        int digits = 0;
        while (g < L->first + L->n && ex->g.cp[g] >= '0' && ex->g.cp[g] <= '9') {
            if (digits++ < 6) v = v * 10 + (long)(ex->g.cp[g] - '0');
            g++;
        }
        if (digits <= 6) off[n++] = v - (L->page + 1);
    }
    return n;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Of a group c[a..b) of lines alike digits aside, outside the margins or found as the top / bottom row of their
 * pages, drops those that repeat with the same digits on `need` pages, and those whose digits follow the page
 * number (a number in each whose difference to the page's number is the same, give or take 2: "Page 7", "7 | Terms")
 * on `need` pages. A line whose digits change otherwise ("… instalment 12 within 15 days …" on one page, "… 13 …
 * 16 …" on the next) is content worded alike, not a running header. seen: n_pages zeros, left so. */
static bool drop_group_strict(extraction *ex, margin_line *c, size_t a, size_t b, int need, uint8_t *seen) {
    qsort(c + a, b - a, sizeof *c, cmp_exact);
    for (size_t e = a; e < b;) {
        size_t f = e + 1;
        while (f < b && c[f].exact == c[e].exact) f++;
        int pages = 0;
        for (size_t x = e; x < f; x++) {
            if (!seen[c[x].page]) pages++;
            seen[c[x].page] = 1;
        }
        for (size_t x = e; x < f; x++) seen[c[x].page] = 0;
        if (pages >= need)
            for (size_t x = e; x < f; x++) ex->lines[c[x].line].drop = ex->lines[c[x].line].repeated = true;
        e = f;
    }
    /* the digits that follow the page number: the most common offset */
    long *off = malloc(4 * (b - a) * sizeof *off);
    if (!off) return false;
    size_t n = 0;
    for (size_t x = a; x < b; x++)
        if (!ex->lines[c[x].line].drop) n += (size_t)number_offsets(ex, &ex->lines[c[x].line], off + n);
    if (n == 0) {
        free(off);
        return true;
    }
    qsort(off, n, sizeof *off, cmp_long);
    long mode = off[0];
    size_t best = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && off[j] == off[i]) j++;
        if (j - i > best) best = j - i, mode = off[i];
        i = j;
    }
    free(off);
    int pages = 0;
    for (size_t x = a; x < b; x++) {
        const pdf_line *L = &ex->lines[c[x].line];
        long o[4];
        int k = L->drop ? 0 : number_offsets(ex, L, o);
        bool paged = false;
        for (int i = 0; i < k && !paged; i++) paged = labs(o[i] - mode) <= 2;
        c[x].y = paged ? 1 : 0; /* the group's heights are no longer needed: marks the lines that follow the page */
        if (paged && !seen[L->page]) pages++, seen[L->page] = 1;
    }
    for (size_t x = a; x < b; x++) seen[c[x].page] = 0;
    if (pages >= need)
        for (size_t x = a; x < b; x++)
            if (c[x].y == 1) ex->lines[c[x].line].drop = ex->lines[c[x].line].repeated = true;
    return true;
}

/* Drops lines repeated on many pages: grouped by text (digits aside) and either by height (within 3 points) or,
 * with by_row, by being in the top / bottom row of their page wherever that is. In the margins (or edge rows)
 * a line must repeat on at least 40 % of the pages with text (odd and even pages may alternate) and on 3 pages
 * (2 when only 2 pages have text); in the body, where a repeated line is more likely content, on 60 % and 4. */
static bool drop_repeated(extraction *ex, const uint8_t *row, bool by_row) {
    size_t n_cand = 0;
    for (size_t i = 0; i < ex->n_lines; i++) n_cand += !ex->lines[i].drop && (!by_row || row[i]);
    uint8_t *has_word = malloc(ex->n_lines ? ex->n_lines : 1);
    if (!has_word) return false;
    for (size_t i = 0; i < ex->n_lines; i++) {
        /* numbers alone ("1.4", "12") are left to the page-number rules: "#.#" would also match section labels */
        const pdf_line *L = &ex->lines[i];
        has_word[i] = 0;
        for (uint32_t g = L->first; g < L->first + L->n && !has_word[i]; g++)
            has_word[i] = cq_is_latin_alnum(ex->g.cp[g]) ? !(ex->g.cp[g] >= '0' && ex->g.cp[g] <= '9')
                                                         : cq_dt_cjkish(ex->g.cp[g]) && !cq_is_cjk_punct(ex->g.cp[g]);
    }
    margin_line *c = malloc((n_cand ? n_cand : 1) * sizeof *c);
    uint8_t *seen = calloc((size_t)ex->n_pages, 1);
    if (!c || !seen) {
        free(c);
        free(seen);
        free(has_word);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < ex->n_lines; i++) {
        pdf_line *L = &ex->lines[i];
        if (L->drop || (by_row && !row[i]) || !has_word[i] || clause_heading_line(ex, L)) continue;
        float y = by_row ? (float)row[i] * 1000.0f : (L->y0 + L->y1) / 2;
        c[k++] = (margin_line){.key = margin_key(ex, L, false), .exact = margin_key(ex, L, true), .y = y,
                               .page = L->page, .line = (uint32_t)i};
    }
    qsort(c, k, sizeof *c, cmp_margin);
    int text_pages = 0; /* "many pages" counts pages with text: scanned pages carry no header */
    for (int p = 0; p < ex->n_pages; p++) text_pages += ex->pages[p].n_lines > 0;
    int need_margin = (int)ceil(0.4 * text_pages);
    if (need_margin < 3) need_margin = text_pages < 3 ? 2 : 3;
    int need_body = (int)ceil(0.6 * text_pages);
    if (need_body < 4) need_body = 4;
    for (size_t a = 0; a < k;) {
        size_t b = a + 1;
        while (b < k && c[b].key == c[a].key && c[b].y - c[b - 1].y <= 3.0f) b++;
        int pages = 0;
        bool margin = true;
        for (size_t x = a; x < b; x++) {
            if (!seen[c[x].page]) pages++;
            seen[c[x].page] = 1;
            const pdf_line *L = &ex->lines[c[x].line];
            if (!by_row && !in_margin(L, &ex->pages[L->page])) margin = false;
        }
        for (size_t x = a; x < b; x++) seen[c[x].page] = 0;
        if (margin && !by_row && pages >= need_margin) {
            for (size_t x = a; x < b; x++) ex->lines[c[x].line].drop = ex->lines[c[x].line].repeated = true;
        } else if (margin && by_row && pages >= need_margin) {
            if (!drop_group_strict(ex, c, a, b, need_margin, seen)) {
                free(c);
                free(seen);
                free(has_word);
                return false;
            }
        } else if (!margin && pages >= need_body) {
            if (!drop_group_strict(ex, c, a, b, need_body, seen)) {
                free(c);
                free(seen);
                free(has_word);
                return false;
            }
        }
        a = b;
    }
    free(c);
    free(seen);
    free(has_word);
    return true;
}

/* A repeated line is a running header only where its page keeps other text: a page that would lose all its text
 * gets its repeated lines back (3,500 pages of one line each lost pages 1,000 and up, whose lines were alike digits
 * aside). Then counts, per page, the lines with words still dropped (see page_quality: a page that lost all its text
 * is flagged, never silently empty). */
static void keep_page_text(extraction *ex) {
    for (int p = 0; p < ex->n_pages; p++) {
        pdf_page_info *pi = &ex->pages[p];
        uint32_t end = pi->first_line + pi->n_lines;
        bool kept = false, repeated = false;
        for (uint32_t i = pi->first_line; i < end && !kept; i++) {
            kept = !ex->lines[i].drop;
            repeated |= ex->lines[i].repeated;
        }
        if (!kept && repeated)
            for (uint32_t i = pi->first_line; i < end; i++)
                if (ex->lines[i].repeated) ex->lines[i].drop = ex->lines[i].repeated = false;
        pi->n_words_dropped = 0;
        for (uint32_t i = pi->first_line; i < end; i++) {
            const pdf_line *L = &ex->lines[i];
            long value;
            if (L->drop && !page_number_only(ex->g.cp + L->first, L->n, &value)) pi->n_words_dropped++;
        }
    }
}

/* Pass 2. Page numbers in the margins go first; then lines repeated at one height; then, until nothing changes
 * (dropping a footer can bare a page number or another footer line above it), page numbers and repeated lines
 * at the top or bottom of the text. */
static bool drop_running_lines(extraction *ex) {
    for (size_t i = 0; i < ex->n_lines; i++) {
        pdf_line *L = &ex->lines[i];
        long value;
        if (in_margin(L, &ex->pages[L->page]) && page_number_only(ex->g.cp + L->first, L->n, &value)) L->drop = true;
    }
    if (ex->n_lines == 0) return true;
    uint8_t *row = malloc(ex->n_lines);
    if (!row) return false;
    bool ok = drop_repeated(ex, row, false);
    for (int round = 0; round < 4 && ok; round++) {
        size_t before = 0, after = 0;
        for (size_t i = 0; i < ex->n_lines; i++) before += ex->lines[i].drop;
        mark_edge_rows(ex, row);
        ok = drop_inner_page_numbers(ex, row);
        mark_edge_rows(ex, row);
        ok = ok && drop_repeated(ex, row, true);
        for (size_t i = 0; i < ex->n_lines; i++) after += ex->lines[i].drop;
        if (after == before) break;
    }
    free(row);
    if (ok) keep_page_text(ex);
    return ok;
}

/* ---------------------------------------------------------------------------------------------------------
 * Pass 3: joining lines into the text
 * --------------------------------------------------------------------------------------------------------- */

static bool ends_cjk(const extraction *ex, const pdf_line *L) { return cq_dt_cjkish(ex->g.cp[L->first + L->n - 1]); }

static bool line_ends_sentence(const extraction *ex, const pdf_line *L) {
    uint32_t n = L->n < 8 ? L->n : 8;
    return cq_dt_ends_sentence(ex->g.cp + L->first + L->n - n, n);
}

/* Width of the next line's first word (up to its first space; one glyph for CJK). */
static float first_word_width(const extraction *ex, const pdf_line *B) {
    uint32_t g = B->first, end = B->first + B->n;
    if (cq_dt_cjkish(ex->g.cp[g])) return ex->g.x1[g] - ex->g.x0[g];
    while (g + 1 < end && ex->g.cp[g + 1] != ' ') g++;
    return ex->g.x1[g] - B->x0;
}

#define COLUMN_WINDOW 256 /* lines before and after a line that column_edges looks at */

/* Right edge and left margin of the text column line i belongs to: lines of the page starting within 4 em
 * of it; the second-largest right end (one wide line, such as a spanning heading, does not set the edge). */
static void column_edges(const extraction *ex, const uint32_t *kept, size_t n_kept, size_t i, float *right,
                         float *left) {
    const pdf_line *A = &ex->lines[kept[i]];
    float em = A->size;
    float best = A->x1, second = -1;
    float l = A->x0;
    size_t count = 0;
    /* The lines within COLUMN_WINDOW of line i in reading order: all of an ordinary page's (so the same answer as
     * the whole page), a bounded number on a page of tens of thousands of tiny lines (where the whole page made
     * the text assembly quadratic: 10 million glyphs on one page took 76 s, now 8 s). */
    size_t from = i > COLUMN_WINDOW ? i - COLUMN_WINDOW : 0, to = n_kept - i > COLUMN_WINDOW ? i + COLUMN_WINDOW + 1
                                                                                            : n_kept;
    for (size_t k = from; k < to; k++) {
        const pdf_line *M = &ex->lines[kept[k]];
        if (M->vertical || fabsf(M->x0 - A->x0) > 4 * em) continue;
        count++;
        if (M->x0 < l) l = M->x0;
        if (k == i) continue;
        if (M->x1 > best) {
            second = best;
            best = M->x1;
        } else if (M->x1 > second) {
            second = M->x1;
        }
    }
    *right = count >= 4 && second > 0 ? second : best;
    if (*right < A->x1) *right = A->x1;
    *left = l;
}

typedef struct {
    const extraction *ex;
    const uint32_t *kept;   /* kept lines of A's page */
    size_t n_kept;
    size_t a_index;         /* A's index in kept */
    float pitch;            /* usual baseline distance on A's page, in em (page_pitch) */
    bool para_spacing;      /* the document separates paragraphs by extra space (see measure_spacing) */
    float spacing_cut;      /* pitch (in em) below which two lines belong to one paragraph */
    bool full_stop_continues; /* with para_spacing: a full line ending a sentence usually continues its paragraph */
} join_ctx;

/* Whether line B continues the paragraph of line A (a soft wrap) or starts a new one. Same page: B follows A in
 * the page's reading order; across pages A is the last line of one page and B the first of the next. */
static bool line_wraps_on(const join_ctx *jc, const pdf_line *A, const pdf_line *B, bool same_page,
                          float b_left_margin) {
    const extraction *ex = jc->ex;
    if (A->vertical || B->vertical) return false;
    float em = maxf(A->size, B->size);
    if (fabsf(A->size - B->size) > 0.15f * em) return false;               /* heading ↔ body */
    float right, left;
    column_edges(ex, jc->kept, jc->n_kept, jc->a_index, &right, &left);
    float pitch = 0;
    if (same_page) {
        pitch = (B->baseline - A->baseline) / em;
        if (pitch < 0.3f) return false;                                     /* same line or upwards: new column */
        if (B->x0 > A->x1 || B->x1 < A->x0) return false;                   /* side by side: another column */
        if (pitch > 1.45f * jc->pitch + 0.2f) return false;                 /* extra space above B */
        if (jc->para_spacing && pitch > jc->spacing_cut) return false;     /* paragraph spacing above B */
        if (B->x0 > A->x0 + 0.8f * em) {                                    /* B is indented … */
            bool hanging = A->label_end_x > 0 && fabsf(B->x0 - A->label_end_x) < 0.6f * em;
            bool centred = fabsf((B->x0 + B->x1) - (A->x0 + A->x1)) < 2 * em; /* … or centred under A */
            if (!hanging && !centred) return false;
        }
    } else if (B->x0 > b_left_margin + 0.8f * em) {
        return false;
    }
    bool a_full;
    if (ends_cjk(ex, A)) a_full = A->x1 > right - 1.5f * A->size;
    else a_full = A->x1 + 0.3f * A->size + first_word_width(ex, B) > right; /* B's first word did not fit */
    /* 第五条, （一）, 1., Section 2 start an item (see cq_dt_starts_item) */
    uint32_t nt = A->n < 12 ? A->n : 12;
    if (cq_dt_starts_item(ex->g.cp + B->first, B->n < 40 ? B->n : 40, ex->g.cp + A->first + A->n - nt, nt, a_full))
        return false;
    if (line_ends_sentence(ex, A)) {
        /* A sentence ends at the line end: a paragraph ends too, unless the document marks paragraphs with extra
         * space and B sits at the distance of a wrapped line. Across a page break there is no distance to go by:
         * the document's own habit decides (in justified CJK text a full line ending in 。 or ；is more often
         * inside a paragraph than at its end). */
        if (!a_full || !jc->para_spacing) return false;
        return same_page ? pitch < jc->spacing_cut : jc->full_stop_continues;
    }
    if (a_full) return true;
    /* A stops short without ending a sentence: a heading or a title line in CJK; in Latin text within one
     * MuPDF block, ragged-right text that wraps early. */
    if (ends_cjk(ex, A)) return false;
    return same_page && A->block == B->block;
}

/* The usual baseline distance within a paragraph on each page: the 20th percentile of the distances between
 * consecutive lines (most pages have more wrapped lines than paragraph gaps, and headings add large gaps). */
static float page_pitch(const extraction *ex, const uint32_t *kept, size_t n_kept, float *scratch) {
    size_t m = 0;
    for (size_t k = 1; k < n_kept; k++) {
        const pdf_line *A = &ex->lines[kept[k - 1]], *B = &ex->lines[kept[k]];
        float em = maxf(A->size, B->size);
        float p = (B->baseline - A->baseline) / em;
        if (p > 0.5f && p < 4.0f) scratch[m++] = p;
    }
    if (m == 0) return 1.2f;
    qsort(scratch, m, sizeof *scratch, cmp_float);
    return scratch[(m * 2) / 10];
}

/* Does the document separate paragraphs by extra space? Compares, over all pages, the baseline distances of
 * pairs that surely wrap (A reaches the column edge, no sentence end, B no label) with those of pairs that
 * surely do not (A short or B a label). If the second are clearly larger, the cut lies half-way. */
static bool measure_spacing(const extraction *ex, uint32_t *const *kept_of_page, const size_t *n_kept_of_page,
                            float *cut, bool *full_stop_continues) {
    size_t nw = 0, np = 0, cap = 0;
    for (int p = 0; p < ex->n_pages; p++) cap += n_kept_of_page[p];
    if (cap < 4) return false;
    float *w = malloc(cap * sizeof *w), *q = malloc(cap * sizeof *q), *stop = malloc(cap * sizeof *stop);
    size_t ns = 0;
    if (!w || !q || !stop) {
        free(w);
        free(q);
        free(stop);
        return false;
    }
    for (int p = 0; p < ex->n_pages; p++) {
        const uint32_t *kept = kept_of_page[p];
        size_t n = n_kept_of_page[p];
        for (size_t k = 1; k < n; k++) {
            const pdf_line *A = &ex->lines[kept[k - 1]], *B = &ex->lines[kept[k]];
            if (A->vertical || B->vertical || fabsf(A->size - B->size) > 0.1f * A->size) continue;
            float em = maxf(A->size, B->size);
            float pitch = (B->baseline - A->baseline) / em;
            if (pitch < 0.5f || pitch > 3.0f || fabsf(B->x0 - A->x0) > 0.8f * em) continue;
            float right, left;
            column_edges(ex, kept, n, k - 1, &right, &left);
            bool full = A->x1 > right - 1.5f * A->size;
            bool label = label_of(ex->g.cp + B->first, B->n) > 0;
            if (full && !label && !line_ends_sentence(ex, A)) w[nw++] = pitch;
            else if (!full || label) q[np++] = pitch;
            else stop[ns++] = pitch; /* full line ending a sentence: decided once the cut is known */
        }
    }
    bool yes = false;
    *full_stop_continues = false;
    if (nw >= 3 && np >= 3) {
        qsort(w, nw, sizeof *w, cmp_float);
        qsort(q, np, sizeof *q, cmp_float);
        float wm = w[nw / 2], pm = q[np / 2];
        if (pm > wm * 1.06f) {
            yes = true;
            *cut = (wm + pm) / 2;
            size_t cont = 0;
            for (size_t i = 0; i < ns; i++)
                if (stop[i] < *cut) cont++;
            *full_stop_continues = cont * 2 > ns;
        }
    }
    free(stop);
    free(w);
    free(q);
    return yes;
}

typedef struct {
    cq_strbuf text;
    cq_line *lines;
    size_t n_lines, cap_lines;
    uint32_t *offsets;      /* per glyph written: byte offset of its character in text */
    size_t n_glyphs_out;    /* glyph records written; x0/x1 are compacted in place behind the read position */
} text_out;

/* Appends line L's glyphs to the text, recording each glyph's byte offset. */
static bool emit_line(extraction *ex, const pdf_line *L, text_out *o, int page_no) {
    if (!grow((void **)&o->lines, &o->cap_lines, o->n_lines + 1, sizeof *o->lines)) return false;
    cq_line *cl = &o->lines[o->n_lines++];
    cl->text_start = (uint32_t)o->text.len;
    cl->glyph_first = (uint32_t)o->n_glyphs_out;
    for (uint32_t g = L->first; g < L->first + L->n; g++) {
        uint32_t cp = ex->g.cp[g];
        size_t w = o->n_glyphs_out++;
        o->offsets[w] = (uint32_t)o->text.len;
        ex->g.x0[w] = ex->g.x0[g];
        ex->g.x1[w] = ex->g.x1[g];
        cq_strbuf_put_cp(&o->text, cp);
    }
    cl->text_end = (uint32_t)o->text.len;
    cl->n_glyphs = (uint32_t)o->n_glyphs_out - cl->glyph_first;
    cl->y0 = L->y0;
    cl->y1 = L->y1;
    cl->page_no = page_no;
    return !o->text.failed;
}

/* What goes between a line that wraps on and the next: nothing, one space, or dropping the hyphen of
 * "evaluat-" + "ing". Returns the separator; *drop_hyphen is set when the previous line's '-' must go. */
static const char *wrap_separator(const extraction *ex, const pdf_line *A, const pdf_line *B, bool *drop_hyphen) {
    uint32_t last = ex->g.cp[A->first + A->n - 1];
    uint32_t before_last = A->n > 1 ? ex->g.cp[A->first + A->n - 2] : 0;
    uint32_t next = ex->g.cp[B->first];
    *drop_hyphen = false;
    if (last == '-' && before_last >= 'a' && before_last <= 'z' && next >= 'a' && next <= 'z') {
        *drop_hyphen = true;
        return "";
    }
    if (cq_dt_cjkish(last) || cq_dt_cjkish(next)) return "";
    if (last == '-' && before_last != ' ') return "";  /* "Big-" + "Five", "10-" + "12G" */
    if (last == 0x2014 || last == 0x2013 || last == '/') return "";
    return " ";
}

/* Removes the last glyph (a hyphen) of the last emitted line. */
static void pop_last_glyph(text_out *o) {
    cq_line *cl = &o->lines[o->n_lines - 1];
    if (cl->n_glyphs == 0) return;
    cl->n_glyphs--;
    o->n_glyphs_out--;
    o->text.len -= 1; /* '-' is one byte */
    o->text.data[o->text.len] = 0;
    cl->text_end = (uint32_t)o->text.len;
}

/* ---------------------------------------------------------------------------------------------------------
 * Quality and the result
 * --------------------------------------------------------------------------------------------------------- */

static void page_quality(const pdf_page_info *pi, cq_page *pg) {
    if (pi->unreadable) {
        pg->quality = 0;
        snprintf(pg->quality_reason, sizeof pg->quality_reason, "page could not be read: %s", pi->error);
        return;
    }
    if (pg->n_chars == 0) {
        if (pi->n_words_dropped > 0) { /* text read, all of it taken for running headers and footers */
            pg->quality = 0.5;
            snprintf(pg->quality_reason, sizeof pg->quality_reason,
                     "all the page's text (%u lines) was taken for running headers or footers: check the page",
                     pi->n_words_dropped);
            return;
        }
        if (pi->n_images > 0) {
            pg->quality = 0;
            if (pi->ocr_error[0])
                snprintf(pg->quality_reason, sizeof pg->quality_reason, "no text layer (scanned page?); OCR failed: %.100s",
                         pi->ocr_error);
            else if (pi->ocr_tried)
                snprintf(pg->quality_reason, sizeof pg->quality_reason,
                         "no text layer (scanned page?); OCR recognised no text");
            else
                snprintf(pg->quality_reason, sizeof pg->quality_reason, "no text layer (scanned page?)");
        } else {
            pg->quality = 1;
            pg->quality_reason[0] = 0; /* a blank page is not a problem */
        }
        return;
    }
    char reason[sizeof pg->quality_reason];
    pg->quality = cq_dt_quality(&pi->stats, &pi->spacing, reason, sizeof reason);
    if (!pi->ocr) {
        memcpy(pg->quality_reason, reason, sizeof reason);
        return;
    }
    /* OCR: the text is as good as Tesseract was sure of it */
    pg->ocr = true;
    pg->ocr_confidence = pi->ocr_confidence;
    if (pi->ocr_confidence < pg->quality) pg->quality = pi->ocr_confidence;
    if (pi->ocr_confidence < CQ_OCR_LOW_CONFIDENCE)
        snprintf(pg->quality_reason, sizeof pg->quality_reason,
                 "low OCR confidence %.2f: the recognised text may be wrong (check it against the page image)",
                 pi->ocr_confidence);
    else if (reason[0])
        snprintf(pg->quality_reason, sizeof pg->quality_reason, "OCR (confidence %.2f): %.120s", pi->ocr_confidence,
                 reason);
    else
        snprintf(pg->quality_reason, sizeof pg->quality_reason, "text recognised by OCR (confidence %.2f)",
                 pi->ocr_confidence);
}

/* Document score: page scores weighted by characters; a page without text (scanned, unreadable) weighs as much
 * as an average text page, so that scanned pages pull the score down. Reason: the worst page's. */
static void document_quality(cq_doctext *d) {
    double chars = 0;
    int text_pages = 0;
    for (int i = 0; i < d->n_pages; i++)
        if (d->pages[i].n_chars) {
            chars += d->pages[i].n_chars;
            text_pages++;
        }
    double avg = text_pages ? chars / text_pages : 1000;
    double sum = 0, wsum = 0;
    int worst = -1, n_bad = 0;
    for (int i = 0; i < d->n_pages; i++) {
        const cq_page *p = &d->pages[i];
        double w = p->n_chars ? p->n_chars : (p->quality < 1 ? avg : 0);
        sum += w * p->quality;
        wsum += w;
        if (p->quality_reason[0]) {
            n_bad++;
            if (worst < 0 || p->quality < d->pages[worst].quality) worst = i;
        }
    }
    d->quality = wsum > 0 ? sum / wsum : 1;
    d->quality_reason[0] = 0;
    if (worst >= 0) {
        if (n_bad > 1)
            snprintf(d->quality_reason, sizeof d->quality_reason, "page %d (and %d more): %.100s",
                     d->pages[worst].page_no,
                     n_bad - 1, d->pages[worst].quality_reason);
        else
            snprintf(d->quality_reason, sizeof d->quality_reason, "page %d: %.120s", d->pages[worst].page_no,
                     d->pages[worst].quality_reason);
    }
}

/* The Info Title if it reads like a title: not empty, not a file name, not an editor's placeholder. */
static char *sensible_title(const char *raw) {
    cq_strbuf b = {0};
    cq_text_repair(raw, strlen(raw), &b, NULL);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    char *t = cq_strbuf_take(&b);
    /* trim and collapse spaces */
    size_t k = 0;
    for (size_t i = 0; t[i]; i++) {
        if (t[i] == ' ' && (k == 0 || t[k - 1] == ' ')) continue;
        t[k++] = t[i];
    }
    while (k > 0 && t[k - 1] == ' ') k--;
    t[k] = 0;
    static const char *const bad_prefix[] = {"Microsoft Word - ", "Microsoft PowerPoint - ", "untitled", "Untitled",
                                             "Document", "document", "PowerPoint Presentation"};
    static const char *const bad_suffix[] = {".doc", ".docx", ".pdf", ".PDF", ".rtf", ".txt", ".tmp", ".htm",
                                             ".html", ".wpd", ".indd", ".xls", ".xlsx", ".ppt", ".pptx"};
    bool ok = k >= 2 && k <= 400;
    for (size_t i = 0; ok && i < sizeof bad_prefix / sizeof bad_prefix[0]; i++)
        if (strncmp(t, bad_prefix[i], strlen(bad_prefix[i])) == 0) ok = false;
    for (size_t i = 0; ok && i < sizeof bad_suffix / sizeof bad_suffix[0]; i++) {
        size_t l = strlen(bad_suffix[i]);
        if (k > l && strcmp(t + k - l, bad_suffix[i]) == 0) ok = false;
    }
    if (ok) { /* needs a letter or a CJK character: not "1", "-", "()" */
        bool letter = false;
        size_t i = 0;
        while (i < k) {
            size_t l;
            uint32_t cp = cq_utf8_decode(t + i, k - i, &l);
            if (cq_is_latin_alnum(cp) && !(cp >= '0' && cp <= '9')) letter = true;
            if (cq_dt_cjkish(cp) && !cq_is_cjk_punct(cp)) letter = true;
            i += l;
        }
        ok = letter;
    }
    if (!ok) {
        free(t);
        return NULL;
    }
    return t;
}

/* ---------------------------------------------------------------------------------------------------------
 * The reader
 * --------------------------------------------------------------------------------------------------------- */

static cq_status assemble_text(extraction *ex, cq_doctext *out, cq_err *err) {
    /* kept lines per page */
    uint32_t **kept_of_page = calloc((size_t)ex->n_pages, sizeof *kept_of_page);
    size_t *n_kept_of_page = calloc((size_t)ex->n_pages, sizeof *n_kept_of_page);
    uint32_t *kept_all = malloc((ex->n_lines ? ex->n_lines : 1) * sizeof *kept_all);
    float *scratch = malloc((ex->n_lines ? ex->n_lines : 1) * sizeof *scratch);
    float *pitch = malloc((size_t)ex->n_pages * sizeof *pitch);
    text_out o = {0};
    cq_status st = CQ_OK;
    out->pages = calloc((size_t)ex->n_pages, sizeof *out->pages);
    if (!kept_of_page || !n_kept_of_page || !kept_all || !scratch || !pitch || !out->pages) {
        st = CQ_ERR_NOMEM;
        goto done;
    }
    out->n_pages = ex->n_pages;
    size_t nk = 0;
    for (int p = 0; p < ex->n_pages; p++) {
        kept_of_page[p] = kept_all + nk;
        const pdf_page_info *pi = &ex->pages[p];
        for (uint32_t i = pi->first_line; i < pi->first_line + pi->n_lines; i++)
            if (!ex->lines[i].drop) kept_all[nk++] = i;
        n_kept_of_page[p] = (size_t)(kept_all + nk - kept_of_page[p]);
        pitch[p] = page_pitch(ex, kept_of_page[p], n_kept_of_page[p], scratch);
    }
    float cut = 0;
    bool full_stop_continues = false;
    bool para_spacing = measure_spacing(ex, kept_of_page, n_kept_of_page, &cut, &full_stop_continues);

    o.offsets = malloc((ex->g.n ? ex->g.n : 1) * sizeof *o.offsets);
    if (!o.offsets) {
        st = CQ_ERR_NOMEM;
        goto done;
    }
    const pdf_line *prev = NULL; /* last emitted line */
    join_ctx prev_ctx = {0};
    for (int p = 0; p < ex->n_pages; p++) {
        const uint32_t *kept = kept_of_page[p];
        size_t n = n_kept_of_page[p];
        cq_page *pg = &out->pages[p];
        pg->page_no = p + 1;
        pg->width = ex->pages[p].width;
        pg->height = ex->pages[p].height;
        if (p > 0) {
            /* A paragraph running on to the next page gets '\f' alone; one that ends with the page "\n\f". */
            bool soft = false;
            if (prev && prev->page == p - 1 && n > 0) {
                float right, left;
                column_edges(ex, kept, n, 0, &right, &left);
                soft = line_wraps_on(&prev_ctx, prev, &ex->lines[kept[0]], false, left);
            }
            if (soft) {
                bool drop_hyphen;
                wrap_separator(ex, prev, &ex->lines[kept[0]], &drop_hyphen);
                if (drop_hyphen) pop_last_glyph(&o);
                cq_strbuf_append(&o.text, "\f", 1);
            } else if (o.text.len > 0 && o.text.data[o.text.len - 1] != '\f') {
                cq_strbuf_append(&o.text, "\n\f", 2);
            } else {
                cq_strbuf_append(&o.text, "\f", 1);
            }
        }
        pg->text_start = (uint32_t)o.text.len;
        pg->line_first = (uint32_t)o.n_lines;
        for (size_t k = 0; k < n; k++) {
            const pdf_line *L = &ex->lines[kept[k]];
            if (k > 0) {
                join_ctx jc = {.ex = ex, .kept = kept, .n_kept = n, .a_index = k - 1, .pitch = pitch[p],
                               .para_spacing = para_spacing, .spacing_cut = cut,
                               .full_stop_continues = full_stop_continues};
                if (line_wraps_on(&jc, prev, L, true, 0)) {
                    bool drop_hyphen;
                    const char *sep = wrap_separator(ex, prev, L, &drop_hyphen);
                    if (drop_hyphen) pop_last_glyph(&o);
                    cq_strbuf_puts(&o.text, sep);
                } else {
                    cq_strbuf_append(&o.text, "\n", 1);
                }
            }
            if (!emit_line(ex, L, &o, p + 1)) {
                st = CQ_ERR_NOMEM;
                goto done;
            }
            prev = L;
            prev_ctx = (join_ctx){.ex = ex, .kept = kept, .n_kept = n, .a_index = k, .pitch = pitch[p],
                                  .para_spacing = para_spacing, .spacing_cut = cut,
                               .full_stop_continues = full_stop_continues};
        }
        pg->text_end = (uint32_t)o.text.len;
        pg->n_lines = (uint32_t)o.n_lines - pg->line_first;
        pg->n_chars = (uint32_t)cq_utf8_count(o.text.data ? o.text.data + pg->text_start : "",
                                              pg->text_end - pg->text_start);
        page_quality(&ex->pages[p], pg);
    }
    if (o.text.failed) {
        st = CQ_ERR_NOMEM;
        goto done;
    }
    out->text_len = o.text.len;
    out->text = cq_strbuf_take(&o.text);
    out->lines = o.lines;
    out->n_lines = o.n_lines;
    o.lines = NULL;
    /* hand the glyph arrays over, shrunk to the glyphs written */
    out->n_glyphs = o.n_glyphs_out;
    size_t keep = out->n_glyphs ? out->n_glyphs : 1;
    uint32_t *go = realloc(o.offsets, keep * sizeof *go);
    float *gx0 = realloc(ex->g.x0, keep * sizeof *gx0);
    float *gx1 = realloc(ex->g.x1, keep * sizeof *gx1);
    if (go) o.offsets = go;
    if (gx0) ex->g.x0 = gx0;
    if (gx1) ex->g.x1 = gx1;
    out->glyph_offset = o.offsets;
    out->glyph_x0 = ex->g.x0;
    out->glyph_x1 = ex->g.x1;
    o.offsets = NULL;
    ex->g.x0 = ex->g.x1 = NULL;
    document_quality(out);
done:
    if (st != CQ_OK) cq_err_set(err, st, "out of memory while assembling the text of the PDF");
    cq_strbuf_free(&o.text);
    free(o.lines);
    free(o.offsets);
    free(kept_of_page);
    free(n_kept_of_page);
    free(kept_all);
    free(scratch);
    free(pitch);
    return st;
}

/* ---------------------------------------------------------------------------------------------------------
 * OCR
 * --------------------------------------------------------------------------------------------------------- */

/* cq_reader_ocr auto: a page with images has no usable text layer when it has no text, when its text is too
 * damaged (quality below OCR_TEXT_QUALITY_BELOW), or when it is a scan that carries a little text of its own
 * (images over OCR_SCAN_IMAGE_SHARE of the page, fewer than OCR_SCAN_TEXT_CHARS characters of text: a court's
 * filing stamp, a page number or a watermark over a scanned page). */
#define OCR_TEXT_QUALITY_BELOW 0.5
#define OCR_SCAN_IMAGE_SHARE 0.5f
#define OCR_SCAN_TEXT_CHARS 200

/* Characters (not spaces) of the page's text-layer lines. */
static size_t page_text_chars(const extraction *ex, const pdf_page_info *pi) {
    size_t n = 0;
    for (uint32_t i = pi->first_line; i < pi->first_line + pi->n_lines; i++)
        for (uint32_t g = ex->lines[i].first; g < ex->lines[i].first + ex->lines[i].n; g++) n += ex->g.cp[g] != ' ';
    return n;
}

static bool wants_ocr(const extraction *ex, const pdf_page_info *pi, cq_reader_ocr mode) {
    if (mode == CQ_OCR_FORCE) return !pi->unreadable;
    if (mode == CQ_OCR_OFF || pi->unreadable || pi->n_images == 0) return false;
    if (pi->n_lines == 0) return true;
    char reason[160];
    if (cq_dt_quality(&pi->stats, &pi->spacing, reason, sizeof reason) < OCR_TEXT_QUALITY_BELOW) return true;
    return pi->image_area >= OCR_SCAN_IMAGE_SHARE * pi->width * pi->height &&
           page_text_chars(ex, pi) < OCR_SCAN_TEXT_CHARS;
}

/* Puts the OCR result of page `page` into the record in place of its text-layer lines (appended at the end; see
 * restore_page_order), through the same repair and line building as a text layer. False when out of memory. */
static bool take_ocr_page(extraction *ex, page_scratch *s, int page, const cq_ocr_page *r) {
    pdf_page_info *pi = &ex->pages[page];
    memset(&pi->stats, 0, sizeof pi->stats);
    memset(&pi->spacing, 0, sizeof pi->spacing);
    pi->n_glyphs = 0;
    s->g.n = 0;
    s->n_lines = 0;
    for (size_t l = 0; l < r->n_lines; l++) {
        const cq_ocr_line *ol = &r->lines[l];
        size_t first = s->g.n;
        for (uint32_t g = ol->first; g < ol->first + ol->n; g++) {
            pi->n_glyphs++;
            uint32_t cp = cq_text_repair_cp(r->cp[g], &pi->stats);
            if (!cp) continue;
            if (cq_is_space(cp)) cp = ' ';
            if (!glyphs_push(&s->g, cp, r->x0[g], r->x1[g])) return false;
        }
        if (s->g.n == first) continue;
        if (!grow((void **)&s->lines, &s->cap_lines, s->n_lines + 1, sizeof *s->lines)) return false;
        s->lines[s->n_lines++] = (raw_line){.first = first, .n = s->g.n - first, .x0 = ol->x0, .y0 = ol->y0,
                                            .x1 = ol->x1, .y1 = ol->y1, .baseline = ol->baseline, .size = ol->size,
                                            .block = ol->block};
    }
    pi->first_line = (uint32_t)ex->n_lines;
    build_page_lines(ex, s, page, pi);
    pi->n_lines = (uint32_t)ex->n_lines - pi->first_line;
    pi->ocr = true;
    pi->ocr_confidence = r->confidence;
    return !s->nomem && !ex->nomem;
}

/* After OCR the lines of a page need not be together nor in page order, and lines of replaced text layers are
 * left over: the record is rebuilt page by page (emit_line compacts glyphs in place and needs them in order). */
static bool restore_page_order(extraction *ex) {
    glyph_list g = {0};
    pdf_line *lines = malloc((ex->n_lines ? ex->n_lines : 1) * sizeof *lines);
    if (!lines) return false;
    size_t n = 0;
    for (int p = 0; p < ex->n_pages; p++) {
        pdf_page_info *pi = &ex->pages[p];
        uint32_t first = (uint32_t)n;
        for (uint32_t i = pi->first_line; i < pi->first_line + pi->n_lines; i++) {
            pdf_line L = ex->lines[i];
            uint32_t gfirst = (uint32_t)g.n;
            for (uint32_t k = L.first; k < L.first + L.n; k++)
                if (!glyphs_push(&g, ex->g.cp[k], ex->g.x0[k], ex->g.x1[k])) {
                    glyphs_free(&g);
                    free(lines);
                    return false;
                }
            L.first = gfirst;
            lines[n++] = L;
        }
        pi->first_line = first;
    }
    glyphs_free(&ex->g);
    free(ex->lines);
    ex->g = g;
    ex->lines = lines;
    ex->n_lines = ex->cap_lines = n;
    if (!ex->cap_lines) ex->cap_lines = 1;
    return true;
}

typedef struct {
    cq_reader_progress_fn progress;
    void *user;
    int done, n_pages;
} progress_state;

static void ocr_page_done(void *user, int i) {
    (void)i;
    progress_state *ps = user;
    ps->done++;
    if (ps->progress) ps->progress(ps->user, ps->done, ps->n_pages);
}

/* OCR of the pages that want it (cq_reader_ocr), results into the record. */
static cq_status ocr_pages(fz_context *ctx, fz_document *doc, extraction *ex, page_scratch *s, const int *todo,
                           int n_todo, const cq_reader_input *in, progress_state *ps, cq_err *err) {
    cq_ocr_page *res = calloc((size_t)n_todo, sizeof *res);
    if (!res) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for OCR of %d pages", n_todo);
    cq_status rc = cq_ocr_pages(ctx, doc, todo, n_todo, in->ocr_threads, in->limits ? in->limits->cancel : NULL, res,
                                ocr_page_done, ps, err);
    for (int i = 0; i < n_todo && !rc; i++) {
        pdf_page_info *pi = &ex->pages[todo[i]];
        const cq_ocr_page *r = &res[i];
        if (r->failed) {
            if (r->unavailable && in->ocr == CQ_OCR_FORCE)
                rc = cq_err_set_reason(err, CQ_ERR_UNSUPPORTED, "ocr_unavailable", "OCR was asked for but is not available: %s", r->error);
            snprintf(pi->ocr_error, sizeof pi->ocr_error, "%s", r->error);
            pi->ocr_unavailable = r->unavailable;
            continue;
        }
        pi->ocr_tried = true;
        if (pi->n_lines > 0 && in->ocr != CQ_OCR_FORCE) {
            /* the page has a text layer (see wants_ocr): OCR replaces it when the layer is damaged and OCR surer of
             * its reading, or when OCR reads much more (the layer was a stamp on a scan) */
            char reason[160];
            double q = cq_dt_quality(&pi->stats, &pi->spacing, reason, sizeof reason);
            size_t layer = page_text_chars(ex, pi), read = 0;
            for (size_t g = 0; g < r->n_glyphs; g++) read += r->cp[g] != ' ';
            bool surer = q < OCR_TEXT_QUALITY_BELOW && r->confidence > q, more = read >= 2 * layer + 50;
            if (r->n_lines == 0 || !(surer || more)) continue;
        }
        if (!take_ocr_page(ex, s, todo[i], r)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory taking in OCR text");
    }
    for (int i = 0; i < n_todo; i++) cq_ocr_page_free(&res[i]);
    free(res);
    if (!rc && !restore_page_order(ex)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory ordering OCR text");
    return rc;
}

/* Checks the file itself before MuPDF sees it: readable, not empty, a PDF header near the start. */
static cq_status check_file(const char *path, cq_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return cq_err_set(err, CQ_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char head[1024];
    size_t n = fread(head, 1, sizeof head, f);
    int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (read_errno) return cq_err_set(err, CQ_ERR_IO, "cannot read %s: %s", path, strerror(read_errno));
    if (n == 0) return cq_err_set(err, CQ_ERR_EMPTY, "%s is empty (0 bytes)", path);
    for (size_t i = 0; i + 5 <= n; i++)
        if (memcmp(head + i, "%PDF-", 5) == 0) return CQ_OK;
    char shown[17];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 16; i++) shown[k++] = head[i] >= 0x20 && head[i] < 0x7F ? head[i] : '.';
    shown[k] = 0;
    return cq_err_set(err, CQ_ERR_FORMAT, "%s is not a PDF (no %%PDF- header; it starts with \"%s\")", path, shown);
}

/* Pages under page tree node `node` (kids typed /Page, under kids typed /Pages), or -1 when the tree is one that
 * MuPDF's page map does not hold as it is: a kid of another type, a cycle, deeper than 64 levels, more than
 * `most` pages. May throw (MuPDF's errors). */
static int count_tree_pages(fz_context *ctx, pdf_obj *node, int depth, int most) {
    if (!pdf_is_dict(ctx, node) || depth > 64 || pdf_mark_obj(ctx, node)) return -1;
    int total = 0;
    fz_var(total);
    fz_try(ctx) {
        pdf_obj *kids = pdf_dict_get(ctx, node, PDF_NAME(Kids));
        int n = pdf_array_len(ctx, kids);
        for (int i = 0; i < n && total >= 0; i++) {
            pdf_obj *kid = pdf_array_get(ctx, kids, i);
            pdf_obj *type = pdf_dict_get(ctx, kid, PDF_NAME(Type));
            if (pdf_name_eq(ctx, type, PDF_NAME(Page))) {
                total++;
            } else if (pdf_name_eq(ctx, type, PDF_NAME(Pages))) {
                int k = count_tree_pages(ctx, kid, depth + 1, most - total);
                total = k < 0 ? -1 : total + k;
            } else {
                total = -1;
            }
            if (total > most) total = -1;
        }
    }
    fz_always(ctx) {
        pdf_unmark_obj(ctx, node); /* MuPDF's own walks use the marks: none may stay set */
    }
    fz_catch(ctx) {
        fz_rethrow(ctx);
    }
    return total;
}

cq_status cq_reader_read_pdf(const cq_reader_input *in, cq_doctext *out, cq_err *err) {
    if (!out) return cq_err_set(err, CQ_ERR_INVALID, "no output document given");
    memset(out, 0, sizeof *out);
    if (!in || !in->path) return cq_err_set(err, CQ_ERR_INVALID, "no PDF path given");
    const char *path = in->path;
    cq_reader_progress_fn progress = in->progress;
    void *user = in->progress_user;
    cq_status st = check_file(path, err);
    if (st != CQ_OK) return st;

    const cq_reader_limits *lim = in->limits;
    pdf_budget budget = {.limit = lim ? lim->max_bytes : 0, .cancel = lim ? lim->cancel : NULL};
    fz_alloc_context alloc = {&budget, budget_malloc, budget_realloc, budget_free};
    size_t store = 64 << 20; /* MuPDF's cache of fonts and images, inside the budget */
    if (budget.limit && store > budget.limit / 8) store = budget.limit / 8;
    fz_context *ctx = cq_ocr_new_context(&alloc, store);
    if (!ctx) {
        if (budget.cancelled) return cq_err_set(err, CQ_ERR_CANCELLED, "cancelled before reading the PDF");
        if (budget.refused) return cq_reader_check_bytes(lim, SIZE_MAX, "MuPDF's context", err);
        return cq_err_set(err, CQ_ERR_NOMEM, "cannot create a MuPDF context (out of memory)");
    }
    extraction ex = {0};
    page_scratch scratch = {.budget = &budget};
    fz_set_warning_callback(ctx, warning_cb, &ex);
    fz_set_error_callback(ctx, error_cb, NULL);

    fz_document *doc = NULL;
    fz_stream *stream = NULL;
    int *ocr_todo = NULL;
    int n_pages = 0;
    bool opened = false, locked = false, page_map = false;
    pdf_document *pdf = NULL;
    char title_raw[512] = "";
    char open_error[256] = "";
    fz_var(doc);
    fz_var(stream);
    fz_var(n_pages);
    fz_var(opened);
    fz_var(locked);
    fz_var(page_map);
    fz_try(ctx) {
        fz_register_document_handlers(ctx);
        /* by content, not by name: stored uploads need not end in .pdf (the header was checked above) */
        stream = fz_open_file(ctx, path);
        doc = fz_open_document_with_stream(ctx, "application/pdf", stream);
        opened = true;
        if (fz_needs_password(ctx, doc)) {
            locked = true;
        } else {
            n_pages = fz_count_pages(ctx, doc);
            if (fz_lookup_metadata(ctx, doc, FZ_META_INFO_TITLE, title_raw, sizeof title_raw) < 0) title_raw[0] = 0;
        }
    }
    fz_catch(ctx) {
        mupdf_text(open_error, sizeof open_error, fz_caught_message(ctx));
    }
    if ((!opened || open_error[0]) && budget.cancelled) {
        st = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while opening the PDF");
        goto out;
    }
    if ((!opened || open_error[0]) && budget.refused) {
        st = cq_reader_check_bytes(lim, SIZE_MAX, "opening it", err);
        goto out;
    }
    if (!opened || open_error[0]) {
        st = cq_err_set(err, CQ_ERR_FORMAT, "%s: damaged PDF, MuPDF cannot read it (%s)", path,
                        open_error[0] ? open_error : "unknown error");
        goto out;
    }
    if (locked) {
        st = cq_err_set(err, CQ_ERR_UNSUPPORTED, "%s: encrypted PDF: a password is required", path);
        goto out;
    }
    pdf = pdf_specifics(ctx, doc);
    if (n_pages <= 0) {
        bool repaired = pdf && pdf_was_repaired(ctx, pdf);
        st = cq_err_set(err, CQ_ERR_FORMAT, "%s: the PDF has no pages%s", path,
                        repaired ? " (damaged or truncated: MuPDF rebuilt it and found none)" : "");
        goto out;
    }
    int max_pages = lim && lim->max_pages > 0 && lim->max_pages < CQ_READER_PAGES_CAP ? lim->max_pages
                                                                                      : CQ_READER_PAGES_CAP;
    if (n_pages > max_pages) {
        st = cq_err_set(err, CQ_ERR_TOO_LARGE, "%s: document too large: the PDF has %d pages, more than the %d a "
                        "document may have (--max-pages)", path, n_pages, max_pages);
        goto out;
    }

    /* MuPDF finds page k by walking the page tree from its root, counting kids: on a flat tree of n pages that is
     * O(n) a page and O(n^2) a document. Its page map (built once, O(n)) makes each lookup O(1). The map is
     * built only for a tree whose pages are exactly the n_pages its root claims (MuPDF leaves the entries of
     * missing pages uninitialised); any other tree is read by the walk, within max_pages. */
    if (pdf) {
        fz_try(ctx) {
            if (count_tree_pages(ctx, pdf_dict_getp(ctx, pdf_trailer(ctx, pdf), "Root/Pages"), 0, n_pages) ==
                n_pages) {
                pdf_load_page_tree(ctx, pdf);
                page_map = true;
            }
        }
        fz_catch(ctx) {
            page_map = false;
        }
    }

    ex.n_pages = n_pages;
    ex.pages = calloc((size_t)n_pages, sizeof *ex.pages);
    ocr_todo = malloc((size_t)n_pages * sizeof *ocr_todo);
    if (!ex.pages || !ocr_todo) {
        st = cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %d pages", n_pages);
        goto out;
    }
    progress_state ps = {progress, user, 0, n_pages};
    int n_todo = 0;
    for (int p = 0; p < n_pages; p++) {
        char when[64];
        snprintf(when, sizeof when, "after %d of %d pages", p, n_pages);
        st = cq_reader_check_cancel(lim, when, err);
        if (st) goto out;
        page_result r = read_page(ctx, doc, page_map ? pdf : NULL, p, &ex, &scratch);
        if (r == PAGE_CANCELLED) {
            st = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled after %d of %d pages, within page %d", p, n_pages,
                            p + 1);
            goto out;
        }
        if (r == PAGE_NOMEM) {
            st = cq_err_set(err, CQ_ERR_NOMEM, "%s: out of memory on page %d", path, p + 1);
            goto out;
        }
        if (r == PAGE_OVER_BUDGET) {
            char what[96];
            size_t glyphs = ex.g.n + scratch.g.n;
            if (glyphs) snprintf(what, sizeof what, "page %d of %d (%zu characters read by then)", p + 1, n_pages,
                                 glyphs);
            else snprintf(what, sizeof what, "page %d of %d", p + 1, n_pages);
            st = cq_reader_check_bytes(lim, SIZE_MAX, what, err);
            goto out;
        }
        if (wants_ocr(&ex, &ex.pages[p], in->ocr)) ocr_todo[n_todo++] = p;
        else if (progress) progress(user, ++ps.done, n_pages);
    }
    if (n_todo > 0) {
        st = cq_reader_check_cancel(lim, "before OCR", err);
        if (st) goto out;
        /* the OCR threads load their pages without read_page's care for the page map's extra reference (see there):
         * the map goes first (a page's lookup by the walk is nothing beside its recognition) */
        if (page_map) {
            pdf_drop_page_tree(ctx, pdf);
            page_map = false;
        }
        st = ocr_pages(ctx, doc, &ex, &scratch, ocr_todo, n_todo, in, &ps, err);
        if (st) {
            if (st != CQ_ERR_NOMEM && st != CQ_ERR_CANCELLED) cq_err_prefix(err, "%s: ", path);
            goto out;
        }
    }
    bool repaired = pdf && pdf_was_repaired(ctx, pdf);

    int unreadable = 0, with_text = 0, with_images = 0;
    const char *first_error = "";
    for (int p = 0; p < n_pages; p++) {
        if (ex.pages[p].unreadable) {
            if (!unreadable) first_error = ex.pages[p].error;
            unreadable++;
        }
        if (ex.pages[p].n_lines) with_text++;
        if (ex.pages[p].n_images) with_images++;
    }
    if (unreadable == n_pages) {
        st = cq_err_set(err, CQ_ERR_FORMAT, "%s: damaged PDF: none of its %d pages can be read (%s)", path, n_pages,
                        first_error);
        goto out;
    }
    if (repaired && unreadable > 0) {
        st = cq_err_set(err, CQ_ERR_FORMAT,
                        "%s: damaged or truncated PDF: MuPDF rebuilt it but %d of %d pages cannot be read (%s)", path,
                        unreadable, n_pages, first_error);
        goto out;
    }
    if (with_text == 0) {
        const char *ocr_error = "";
        bool ocr_tried = false, ocr_unavailable = false;
        for (int p = 0; p < n_pages; p++) {
            if (ex.pages[p].ocr_error[0] && !ocr_error[0]) {
                ocr_error = ex.pages[p].ocr_error;
                ocr_unavailable = ex.pages[p].ocr_unavailable;
            }
            ocr_tried |= ex.pages[p].ocr_tried;
        }
        if (with_images && in->ocr == CQ_OCR_OFF)
            st = cq_err_set_reason(err, CQ_ERR_EMPTY, "ocr_off",
                                   "%s: no text layer on any of %d pages (scanned document? OCR is off)", path,
                                   n_pages);
        else if (with_images && ocr_error[0] && !ocr_tried)
            st = cq_err_set_reason(err, CQ_ERR_EMPTY, ocr_unavailable ? "ocr_unavailable" : "ocr_failed",
                                   "%s: no text layer on any of %d pages, and OCR failed: %s", path, n_pages,
                                   ocr_error);
        else if (with_images)
            st = cq_err_set(err, CQ_ERR_EMPTY, "%s: no text layer on any of %d pages, and OCR recognised no text on "
                            "them (a scan without text, or too poor to read?)", path, n_pages);
        else
            st = cq_err_set(err, CQ_ERR_EMPTY, "%s: no text on any of its %d pages (blank document?)", path, n_pages);
        goto out;
    }
    if (!drop_running_lines(&ex)) {
        st = cq_err_set(err, CQ_ERR_NOMEM, "out of memory while looking for running headers");
        goto out;
    }
    /* assembling adds the text (at most 4 bytes a glyph, and the breaks), the glyph offsets, the lines */
    budget.own = record_bytes(&ex, &scratch);
    st = cq_reader_check_bytes(lim, budget.mupdf + budget.own + ex.g.n * 8 + ex.n_lines * (sizeof(cq_line) + 10) +
                                        (size_t)n_pages * sizeof(cq_page),
                               "its text", err);
    if (st) goto out;
    st = assemble_text(&ex, out, err);
    if (st != CQ_OK) goto out;
    if (repaired) {
        if (out->quality < 0.5) {
            st = cq_err_set(err, CQ_ERR_FORMAT,
                            "%s: damaged or truncated PDF: MuPDF rebuilt it but the text is unreadable (quality %.2f; "
                            "%s)", path, out->quality, out->quality_reason);
            cq_doctext_free(out);
            goto out;
        }
        if (!out->quality_reason[0])
            snprintf(out->quality_reason, sizeof out->quality_reason,
                     "damaged PDF repaired by MuPDF (truncated?): some text may be missing");
    }
    if (title_raw[0]) out->title = sensible_title(title_raw);

out:
    if (st != CQ_OK && st != CQ_ERR_CANCELLED && budget.cancelled) {
        /* MuPDF swallows some refused allocations (a page count of 0, a page it cannot load): once an allocation
         * was refused for the cancel, whatever failed after it is the cancel, never the document's fault. */
        st = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while reading the PDF");
    }
    if (st != CQ_OK) {
        cq_doctext_free(out);
        if (ex.last_warning[0] && err && strlen(err->msg) + 40 < sizeof err->msg && st == CQ_ERR_FORMAT) {
            char note[sizeof ex.last_warning + 16];
            snprintf(note, sizeof note, " [MuPDF: %s]", ex.last_warning);
            size_t l = strlen(err->msg);
            mupdf_text(err->msg + l, sizeof err->msg - l, note); /* cut, if it must be, between two characters */
        }
    }
    free(ocr_todo);
    free_scratch(&scratch);
    free_extraction(&ex);
    if (page_map) pdf_drop_page_tree(ctx, pdf);
    fz_drop_document(ctx, doc);
    fz_drop_stream(ctx, stream);
    fz_drop_context(ctx);
    return st;
}
