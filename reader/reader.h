/* reader/: documents in, text and clauses out. A leaf module: it needs core/ and MuPDF, nothing of the index.
 *
 *   file ─ cq_reader_detect ─→ format ─ format->read ─→ cq_doctext ─ cq_structure_parse ─→ cq_structure (clauses)
 *
 * Formats. One table (cq_reader_formats) says what a format is: its name, file extensions, magic bytes, MIME type,
 * whether it has pages, its reader and, for formats with pages, its page renderer. Ingest, the service, the CLI
 * and (through the service's health answer) the web page ask the table; nothing else compares format names.
 * Adding a format is one file (its reader, declared in reader/reader_internal.h) plus one row (reader/formats.c).
 * A format without pages leaves cq_doctext.pages NULL: clauses then have no page numbers and no boxes.
 *
 * Document text. One UTF-8 string for the whole document (repaired, see core/text_norm.h) plus, for formats with
 * pages, where each piece sits on its page. Line structure in `text`:
 *   '\n'  a hard break: end of a paragraph, heading or list item (a PDF line that does not simply wrap on);
 *   '\f'  a page break (paged formats only), always between two pages' text (one per page boundary, also around
 *         empty pages): "\n\f" where a paragraph ends with its page, '\f' alone where a paragraph runs on to the
 *         next page (there '\f' stands for the join: nothing between CJK characters, a space between Latin words);
 * soft wraps inside a paragraph are already joined by the reader (CJK-CJK without a space, Latin with one),
 * and running headers / footers / page numbers are dropped. The text never has an empty line ("\n\n").
 * Markdown and plain text have no pages (n_pages = 0) and one '\n' between paragraphs.
 *
 * Memory: a PDF is read one page at a time; what stays is this compact record (text + a few floats per glyph),
 * so a 200-page document needs a few MB whatever the PDF's size.
 *
 * Structure. cq_structure_parse turns the text into clauses:
 * Chinese legal structure: 编 / 分编 / 章 / 节 are headings (they go into the heading path); 条 (including
 * 第X条之一) is the clause; 款 are its paragraphs and 项 （一）/ 目 1. items stay inside the article's text.
 * 附则 and 附件 headings, a 序言/preamble before the first article.
 * English: Article N / ARTICLE IV / Section 7.2 / § 3 / numbered headings "7.2 Termination." / "12. Notices";
 * headings without numbers in capitals are headings. Where a document has no recognisable numbering the
 * fallback is paragraphs, merged up to a useful size and split at sentence ends when too long.
 * A clause's text is the document text of its span, heading kept with the body ("第十二条 申请人应当..."),
 * hard breaks kept as '\n' (they separate 款), page breaks removed. */
#ifndef CQ_READER_READER_H
#define CQ_READER_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* ---- document text ------------------------------------------------------------------------------------------ */

/* One printed line of a page, or the part of it that survived header/footer removal. */
typedef struct {
    uint32_t text_start, text_end; /* byte span of the line's characters in cq_doctext.text */
    uint32_t glyph_first, n_glyphs; /* its glyphs in cq_doctext.glyph_* */
    float y0, y1;                  /* vertical extent, points, origin top-left of the page */
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
    cq_page *pages;                /* n_pages entries; NULL for formats without pages */
    int n_pages;
    cq_line *lines;
    size_t n_lines;
    /* Per glyph (paged formats only): the byte offset of its character in text and its horizontal extent. */
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

/* Pages covered by the byte span [start, end) of text: first and last page number, 0/0 when there are no pages. */
void cq_doctext_page_span(const cq_doctext *doc, uint32_t start, uint32_t end, int *first, int *last);

/* The highlight boxes of [start, end): one box per line it touches, cut to the glyphs inside the span.
 * Returns the number of boxes written to *out (malloc'd, caller frees); 0 and NULL for documents without pages. */
size_t cq_doctext_boxes(const cq_doctext *doc, uint32_t start, uint32_t end, cq_box **out);

void cq_doctext_free(cq_doctext *doc);

/* ---- formats ------------------------------------------------------------------------------------------------ */

/* Called by readers of paged formats after each page (pages_read of n_pages); may be NULL. */
typedef void (*cq_reader_progress_fn)(void *user, int pages_read, int n_pages);

/* What a reader reads: the file (readers that open files themselves, as MuPDF does, use path) and its bytes. */
typedef struct {
    const char *path;
    const char *data;
    size_t len;
    cq_reader_progress_fn progress;
    void *progress_user;
} cq_reader_input;

/* Fills *out (zeroed first) or returns an error with a message a person can act on: not this format, encrypted,
 * truncated/damaged, no text at all (CQ_ERR_EMPTY, "no text layer on any of N pages ..."). */
typedef cq_status (*cq_reader_fn)(const cq_reader_input *in, cq_doctext *out, cq_err *err);

/* Renders page page_no (1-based) of the file at path, width pixels wide, highlighting the boxes on that page
 * (boxes of other pages are ignored), and writes the PNG to png_path atomically. NOT_FOUND when the document has
 * no such page. */
typedef cq_status (*cq_reader_render_fn)(const char *path, int page_no, int width, const cq_box *boxes,
                                         size_t n_boxes, const char *png_path, cq_err *err);

#define CQ_READER_MAX_EXTENSIONS 4
/* Magic bytes are looked for within the first CQ_READER_HEAD_BYTES bytes of a file. */
#define CQ_READER_HEAD_BYTES 1024

typedef struct {
    const char *name;  /* "pdf": documents.format, and the stored original's extension (files/<sha256>.<name>) */
    const char *label; /* "PDF": how messages name it */
    const char *extensions[CQ_READER_MAX_EXTENSIONS]; /* lower case, without the dot; unused entries NULL */
    const char *magic; /* bytes found within the head of every such file ("%PDF-"), or NULL */
    const char *mime;  /* the original's MIME type, as downloads are served */
    bool has_pages;    /* page numbers, glyph boxes and page images (render is set) */
    bool text_title_first; /* the title the text shows beats the one the format states (PDF metadata often names
                              the tool that wrote the file) */
    cq_reader_fn read;
    cq_reader_render_fn render; /* NULL for formats without pages */
} cq_reader_format;

/* The table: *n formats, in the order messages list them. */
const cq_reader_format *cq_reader_formats(size_t *n);

/* The format named name (documents.format), or NULL. */
const cq_reader_format *cq_reader_format_named(const char *name);

/* The format a file name's extension says (case-insensitive), or NULL: what a directory listing would ingest. */
const cq_reader_format *cq_reader_format_of_name(const char *filename);

/* The format of a file from its name and its first bytes (head: up to CQ_READER_HEAD_BYTES of them). The
 * extension decides when it is known, and a format with magic bytes must have them (a file named .pdf that is not
 * one is CQ_ERR_FORMAT, an empty one CQ_ERR_EMPTY); an unknown extension is identified by magic bytes alone, else
 * CQ_ERR_UNSUPPORTED naming the formats accepted. NULL with the message in err when none fits. */
const cq_reader_format *cq_reader_detect(const char *filename, const char *head, size_t head_len, cq_err *err);

/* ---- structure ---------------------------------------------------------------------------------------------- */

typedef enum {
    CQ_CLAUSE_ARTICLE = 1,   /* 第X条 / Article / Section / numbered clause: has a label */
    CQ_CLAUSE_PREAMBLE = 2,  /* text before the first article (title block, 序言, recitals) */
    CQ_CLAUSE_PARAGRAPH = 3, /* fallback chunk of unstructured text: no label */
} cq_clause_kind;

typedef struct {
    cq_clause_kind kind;
    uint32_t start, end;  /* byte span in cq_doctext.text */
    char *label;          /* "第十二条", "第二十条之一", "Section 7.2", "Article 5", "§ 3"; NULL for paragraphs */
    char *label_key;      /* canonical key for lookups: "12", "20-1", "7.2", "5"; NULL without label */
    char *path;           /* "第三章 申报条件 > 第一节 一般规定 > 第十二条"; for paragraphs the headings above */
    char *text;           /* display text, see above */
    int page_first, page_last; /* 1-based; 0 when the document has no pages */
} cq_clause;

typedef struct {
    cq_clause *clauses;
    size_t n_clauses;
    char *title; /* the title the text itself shows (first heading line), or NULL */
} cq_structure;

cq_status cq_structure_parse(const cq_doctext *doc, cq_structure *out, cq_err *err);
void cq_structure_free(cq_structure *s);

#endif
