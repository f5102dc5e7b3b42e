/* The text of one document as extraction leaves it, before structure parsing.
 *
 * One UTF-8 string for the whole document (repaired, see core/text_norm.h) plus, for PDFs, where each piece sits
 * on its page. Line structure in `text`:
 *   '\n'  a hard break: end of a paragraph, heading or list item (a PDF line that does not simply wrap on);
 *   '\f'  a page break (PDFs only), always between two pages' text (one per page boundary, also around empty
 *         pages): "\n\f" where a paragraph ends with its page, '\f' alone where a paragraph runs on to the next
 *         page (there '\f' stands for the join: nothing between CJK characters, a space between Latin words);
 * soft wraps inside a paragraph are already joined by the extractor (CJK-CJK without a space, Latin with one),
 * and running headers / footers / page numbers are dropped. The text never has an empty line ("\n\n").
 * Markdown and plain text have no pages (n_pages = 0) and one '\n' between paragraphs.
 *
 * Memory: a PDF is read one page at a time; what stays is this compact record (text + a few floats per glyph),
 * so a 200-page document needs a few MB whatever the PDF's size. */
#ifndef CQ_APP_DOCTEXT_H
#define CQ_APP_DOCTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* One printed line of a PDF page, or the part of it that survived header/footer removal. */
typedef struct {
    uint32_t text_start, text_end; /* byte span of the line's characters in cq_doctext.text */
    uint32_t glyph_first, n_glyphs; /* its glyphs in cq_doctext.glyph_* */
    float y0, y1;                  /* vertical extent, PDF points, origin top-left of the page */
    int page_no;                   /* 1-based */
} cq_line;

typedef struct {
    int page_no;                   /* 1-based */
    float width, height;           /* points */
    uint32_t text_start, text_end; /* byte span of the page's text in cq_doctext.text */
    uint32_t line_first, n_lines;  /* its lines in cq_doctext.lines */
    uint32_t n_chars;              /* code points of text on the page */
    double quality;                /* 0 (unusable) .. 1 (clean) */
    char quality_reason[160];      /* "" when clean; else e.g. "no text layer (scanned page?)" */
} cq_page;

typedef struct {
    char *text;                    /* whole document, NUL-terminated */
    size_t text_len;
    cq_page *pages;                /* n_pages entries; NULL for Markdown / plain text */
    int n_pages;
    cq_line *lines;
    size_t n_lines;
    /* Per glyph (PDF only): the byte offset of its character in text and its horizontal extent. */
    uint32_t *glyph_offset;
    float *glyph_x0, *glyph_x1;
    size_t n_glyphs;
    char *title;                   /* the document's own title if the format states it (PDF metadata, a leading
                                      Markdown "# " heading), else NULL; malloc'd */
    double quality;                /* document score: character-weighted mean of page scores (1 for text) */
    char quality_reason[160];      /* worst problem found, "" when clean */
} cq_doctext;

/* A rectangle to highlight: page and box in points (origin top-left). */
typedef struct {
    int page_no;
    float x0, y0, x1, y1;
} cq_box;

/* Readers. Each fills *out (zeroed first) or returns an error with a message a person can act on:
 * not a PDF, encrypted, truncated/damaged, no text at all (CQ_ERR_EMPTY, "no text layer on any of N pages ..."). */
cq_status cq_doctext_from_pdf(const char *path, cq_doctext *out, cq_err *err);
/* The same, calling progress(user, pages_read, n_pages) after each page (progress may be NULL). */
typedef void (*cq_doctext_progress_fn)(void *user, int pages_read, int n_pages);
cq_status cq_doctext_from_pdf_progress(const char *path, cq_doctext_progress_fn progress, void *user, cq_doctext *out,
                                       cq_err *err);
cq_status cq_doctext_from_markdown(const char *data, size_t len, cq_doctext *out, cq_err *err);
cq_status cq_doctext_from_plain(const char *data, size_t len, cq_doctext *out, cq_err *err);

/* Pages covered by the byte span [start, end) of text: first and last page number, 0/0 when there are no pages. */
void cq_doctext_page_span(const cq_doctext *doc, uint32_t start, uint32_t end, int *first, int *last);

/* The highlight boxes of [start, end): one box per line it touches, cut to the glyphs inside the span.
 * Returns the number of boxes written to *out (malloc'd, caller frees); 0 and NULL for documents without pages. */
size_t cq_doctext_boxes(const cq_doctext *doc, uint32_t start, uint32_t end, cq_box **out);

void cq_doctext_free(cq_doctext *doc);

#endif
