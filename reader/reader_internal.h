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
/* A PDF page as PNG with highlights (one page at a time: the lock bounds MuPDF's memory). reader/page_render.c */
cq_status cq_reader_render_pdf(const char *path, int page_no, int width, const cq_box *boxes, size_t n_boxes,
                               const char *png_path, cq_err *err);
/* Markdown and plain text (UTF-8, UTF-16 or GB18030), from in->data. reader/doctext.c */
cq_status cq_reader_read_markdown(const cq_reader_input *in, cq_doctext *out, cq_err *err);
cq_status cq_reader_read_plain(const cq_reader_input *in, cq_doctext *out, cq_err *err);

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

#endif
