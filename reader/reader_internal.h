/* Inside reader/: the readers the format table (reader/formats.c) names, and the helpers they share.
 * Not part of the public contract in reader/reader.h: the line-joining rules and the text-quality score live here
 * so that every format breaks paragraphs and scores text the same way. */
#ifndef CQ_READER_READER_INTERNAL_H
#define CQ_READER_READER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/text_norm.h"
#include "reader/reader.h"

/* ---- the readers (cq_reader_fn) and renderers (cq_reader_render_fn) of the table ---- */

/* PDF (MuPDF), from in->path; progress after each page. reader/pdf_extract.c */
cq_status cq_reader_read_pdf(const cq_reader_input *in, cq_doctext *out, cq_err *err);
/* A PDF page as PNG with highlights, within the pixel, memory and time caps; several renders at once within the
 * renders' memory budget. reader/page_render.c */
cq_status cq_reader_render_pdf(const char *path, int page_no, int width, const cq_box *boxes, size_t n_boxes,
                               const char *png_path, cq_err *err);
/* Markdown and plain text (UTF-8, UTF-16 or GB18030), from in->data. reader/doctext.c */
cq_status cq_reader_read_markdown(const cq_reader_input *in, cq_doctext *out, cq_err *err);
cq_status cq_reader_read_plain(const cq_reader_input *in, cq_doctext *out, cq_err *err);

/* Word (DOCX: word/document.xml with its styles and numbering, libzip + libxml2), from in->data.
 * reader/docx.c */
cq_status cq_reader_read_docx(const cq_reader_input *in, cq_doctext *out, cq_err *err);
/* HTML (gumbo; UTF-8, or the charset its <meta> declares), from in->data. reader/html.c */
cq_status cq_reader_read_html(const cq_reader_input *in, cq_doctext *out, cq_err *err);

/* ---- OCR of PDF pages (reader/ocr.c) ---- */

typedef struct fz_context fz_context;
typedef struct fz_document fz_document;

/* A text line Tesseract found: glyphs first..first+n of its page (a ' ' glyph between words), box, baseline and
 * size (the line's height) in page points, and the text block it belongs to. */
typedef struct {
    uint32_t first, n;
    float x0, y0, x1, y1, baseline, size;
    int block;
} cq_ocr_line;

/* What OCR read on one page: code points as Tesseract gives them (not yet repaired) with their horizontal extent
 * in points, the lines, and the mean symbol confidence (0..1; 0 when nothing was read). */
typedef struct {
    uint32_t *cp;
    float *x0, *x1;
    size_t n_glyphs;
    cq_ocr_line *lines;
    size_t n_lines;
    double confidence;
    bool failed;      /* the page could not be recognised: error says why */
    bool unavailable; /* … because Tesseract or its language data is missing */
    bool nomem;
    char error[200];
} cq_ocr_page;

/* A MuPDF context whose clones other threads can use (lock callbacks set), allocating through alloc, a
 * const fz_alloc_context * (MuPDF's is an anonymous struct, which cannot be declared here; NULL: the C library's);
 * NULL when out of memory. */
fz_context *cq_ocr_new_context(const void *alloc, size_t max_store);

/* Recognises pages[0..n) (0-based page indexes of doc, opened with ctx from cq_ocr_new_context) with up to
 * `threads` threads (0: cq_ocr_default_threads()), into results[0..n) (zeroed first; free each with
 * cq_ocr_page_free). on_page(user, i) is called on the calling thread as page i finishes. The document must not be
 * used by the caller meanwhile. Pages that fail are marked in their result; the call itself fails only when it
 * cannot run (out of memory, no thread) or when cancel (may be NULL) is set: the threads look at it before each page
 * they take, and the call then fails with CQ_ERR_CANCELLED. */
cq_status cq_ocr_pages(fz_context *ctx, fz_document *doc, const int *pages, int n, int threads,
                       const atomic_bool *cancel, cq_ocr_page *results, void (*on_page)(void *user, int i), void *user,
                       cq_err *err);
void cq_ocr_page_free(cq_ocr_page *p);
int cq_ocr_default_threads(void); /* online CPUs, at most 8 */

/* ---- helpers shared by the readers ---- */

/* Han ideographs, kana, hangul and CJK / full-width punctuation: characters that are written without spaces
 * between them. Unlike cq_is_cjk_punct this excludes the general punctuation block (curly quotes, dashes),
 * which English text uses as much as Chinese. */
bool cq_dt_cjkish(uint32_t cp);

/* True if the line cp[0..n) ends a sentence: its last character, after closing quotes and brackets, is one of
 * 。；：！？.;:!? (full-width or ASCII). */
bool cq_dt_ends_sentence(const uint32_t *cp, size_t n);

/* If the line cp[0..n) starts like a new item, returns the length of its label in code points (> 0), else 0.
 * Items: 第…条/章/节/编/部分/款/项 (and 之一), （一） (1) (a) (iv), 一、 1、 1. 1.2.3 2.1 A. a), Article / Section /
 * Chapter / Part / Schedule / Exhibit / Annex / Appendix + number, and bullets (• ● ■ ◆ - * followed by a space).
 * *strong (may be NULL) is set for labels that start an item wherever they stand (第…条 with its space, Article /
 * Section headings, bullets); the others ("(10)", "2.1", "一、") also occur where a sentence wraps. */
size_t cq_dt_item_label(const uint32_t *cp, size_t n, bool *strong);

/* Whether the line cp[0..n) starts a new item after the line prev[0..np) (its last characters are enough).
 * A strong label always does; a weak one only after a line that stops short (!prev_full) or closes a clause
 * (。；：.;: , "and", "or"). Never after a line ending in 第 ("…前款第" + "（一）项"). */
bool cq_dt_starts_item(const uint32_t *cp, size_t n, const uint32_t *prev, size_t np, bool prev_full);

/* True if cp[0..n) is exactly a Chinese structural label: 第 + numeral + 条/章/节/编/部分 (optionally 之 + numeral).
 * The single space after such a label ("第一条 为了…") is kept by every reader. */
bool cq_dt_is_heading_label(const uint32_t *cp, size_t n);

/* Problems found in a page or document beyond what cq_text_stats counts. */
typedef struct {
    size_t broken_digits;  /* digits of numbers printed with spaces inside ("2 0 1 7") */
    size_t spaced_letters; /* letters of letter-spaced words ("i l l u s t r a t e") */
} cq_dt_spacing;

/* Cleans the spaces of one line cp[0..n) (single spaces, no leading or trailing ones; cp holds ' ' for every
 * kind of white space) and writes what to emit per character to out[0..n): the character, ' ', '\n', or 0 to
 * drop it. Spaces that extraction put between CJK characters go ("第 一 条" → "第一条", "总 则" → "总则"); a
 * structural label keeps one space before its body ("第一条 为了…"); a number spaced out inside CJK text
 * ("2 0 1 7 年") is closed up. With cjk_gap_breaks (plain text that lost its line breaks) a space between two
 * CJK runs, or between CJK text and an item label, becomes a paragraph break. Problems are added to *sp.
 * Returns false when out of memory. */
bool cq_dt_clean_line(const uint32_t *cp, size_t n, uint32_t *out, bool cjk_gap_breaks, cq_dt_spacing *sp);

/* Text quality 0..1 from the repair counts and spacing problems, relative to st->chars (the characters read
 * from the source); writes the worst problem to reason ("" when clean). */
double cq_dt_quality(const cq_text_stats *st, const cq_dt_spacing *sp, char *reason, size_t reason_size);

/* ---- text of formats that come as blocks (DOCX, HTML) ---- */

/* Each block (a paragraph, heading, list item or table row) becomes one line of the document text; a '\n' inside a
 * block (a line break the document asks for) starts another line. Characters are repaired and spaces cleaned as
 * every reader does (cq_dt_clean_line); blocks without text are skipped. */
typedef struct cq_dt_blocks cq_dt_blocks;

cq_dt_blocks *cq_dt_blocks_new(void); /* NULL when out of memory */
/* Adds s[0..n); heading_level 1..9 marks its lines as headings (cq_doctext.headings), 0 does not. */
void cq_dt_blocks_add(cq_dt_blocks *b, const char *s, size_t n, int heading_level);
/* Moves the text into *out (zeroed first) with title (malloc'd or NULL, taken over either way) and frees b.
 * CQ_ERR_EMPTY when no block had any text, CQ_ERR_NOMEM when memory ran out along the way. */
cq_status cq_dt_blocks_finish(cq_dt_blocks *b, char *title, cq_doctext *out, cq_err *err);
void cq_dt_blocks_free(cq_dt_blocks *b);

/* A title as a document states it (DOCX properties, HTML <title>): repaired, white space collapsed and trimmed.
 * Malloc'd; NULL when nothing is left or out of memory. */
char *cq_dt_title(const char *s, size_t n);

/* Converts data[0..len) from charset `from` (an iconv name) to UTF-8. Malloc'd, NUL-terminated, length in
 * *out_len. With replaced NULL: NULL when the input is not wholly in that charset. With replaced: each byte that
 * cannot be decoded becomes U+FFFD (counted in *replaced) and decoding goes on, as browsers do. NULL also when
 * iconv does not know the charset, or out of memory. */
char *cq_dt_iconv(const char *from, const char *data, size_t len, size_t *out_len, size_t *replaced);
/* Whether utf8[0..n), converted from bytes guessed to be GB18030 with `replaced` replacements, bears the guess out. */
bool cq_dt_gb_guess_holds(const char *utf8, size_t n, size_t replaced);

#endif
