/* libFuzzer target for the document readers (reader/reader.h): every format of the format table, through the
 * table's read function, on arbitrary bytes, then the structure parser and the highlight boxes of every clause.
 *
 * An input is "NAME\0BYTES": NAME picks the format by its name in the table ("pdf", "md", "txt", whatever the table
 * holds); an input without a known name picks format byte[0] % n and reads the rest. The bytes are written to a
 * temporary file named with the format's extension (MuPDF reads files) and handed over as bytes too. Reading runs
 * within limits (64 pages, a 256 MB memory budget), as the service reads uploads.
 *
 * Besides crashes and sanitizer reports it stops on a broken contract (reader/reader.h): text that is not valid
 * UTF-8 or not NUL-terminated at text_len, an empty line ("\n\n"), page breaks not exactly one per page boundary,
 * page, line, glyph or clause spans outside the text or out of order, a box on no page, an error without a message
 * or with one that is not UTF-8. Seeds and a longer run: tests/fuzz/run_fuzz_reader.sh, docs/RELIABILITY.md. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/utf8.h"
#include "reader/reader.h"

#define FUZZ_MAX_PAGES 64
#define FUZZ_MAX_BYTES (256u << 20)

static void broken(const char *what, const char *format) {
    fprintf(stderr, "fuzz_reader: broken contract (%s): %s\n", format, what);
    abort();
}

static void check_doctext(const cq_reader_format *f, const cq_doctext *d) {
    if (!d->text) broken("no text", f->name);
    if (d->text[d->text_len] != 0 || strlen(d->text) != d->text_len)
        broken("text not NUL-terminated at text_len", f->name);
    if (!cq_utf8_valid(d->text, d->text_len)) broken("text not valid UTF-8", f->name);
    if (strstr(d->text, "\n\n")) broken("an empty line in the text", f->name);
    size_t breaks = 0;
    for (size_t i = 0; i < d->text_len; i++) breaks += d->text[i] == '\f';
    if (f->has_pages) {
        if (d->n_pages < 1 || !d->pages) broken("a paged document without pages", f->name);
        if (breaks != (size_t)d->n_pages - 1) broken("page breaks are not one per page boundary", f->name);
    } else if (d->pages || d->n_pages || breaks) {
        broken("pages in a format without pages", f->name);
    }
    uint32_t prev_end = 0;
    for (int p = 0; p < d->n_pages; p++) {
        const cq_page *pg = &d->pages[p];
        if (pg->page_no != p + 1) broken("page numbers not 1, 2, 3 ...", f->name);
        if (pg->text_start < prev_end || pg->text_end < pg->text_start || pg->text_end > d->text_len)
            broken("a page's text span out of order or outside the text", f->name);
        if ((size_t)pg->line_first + pg->n_lines > d->n_lines) broken("a page's lines outside the lines", f->name);
        if (!(pg->quality >= 0 && pg->quality <= 1)) broken("page quality outside 0..1", f->name);
        prev_end = pg->text_end;
    }
    for (size_t i = 0; i < d->n_lines; i++) {
        const cq_line *ln = &d->lines[i];
        if (ln->text_end < ln->text_start || ln->text_end > d->text_len) broken("a line outside the text", f->name);
        if ((size_t)ln->glyph_first + ln->n_glyphs > d->n_glyphs) broken("a line's glyphs outside the glyphs", f->name);
        if (f->has_pages && (ln->page_no < 1 || ln->page_no > d->n_pages)) broken("a line on no page", f->name);
    }
    for (size_t i = 0; i < d->n_glyphs; i++)
        if (d->glyph_offset[i] >= d->text_len) broken("a glyph outside the text", f->name);
    if (d->title && !cq_utf8_valid(d->title, strlen(d->title))) broken("title not valid UTF-8", f->name);
    if (!(d->quality >= 0 && d->quality <= 1)) broken("document quality outside 0..1", f->name);
}

static void check_structure(const cq_reader_format *f, const cq_doctext *d, const cq_structure *s) {
    for (size_t i = 0; i < s->n_clauses; i++) {
        const cq_clause *c = &s->clauses[i];
        if (c->end < c->start || c->end > d->text_len) broken("a clause outside the text", f->name);
        if (!c->text || !cq_utf8_valid(c->text, strlen(c->text))) broken("clause text missing or not UTF-8", f->name);
        if (!c->path || !cq_utf8_valid(c->path, strlen(c->path))) broken("clause path missing or not UTF-8", f->name);
        if (c->label && !cq_utf8_valid(c->label, strlen(c->label))) broken("clause label not UTF-8", f->name);
        if (c->page_last < c->page_first || c->page_last > d->n_pages) broken("clause pages out of order", f->name);
        cq_box *boxes = NULL;
        size_t n = cq_doctext_boxes(d, c->start, c->end, &boxes);
        for (size_t b = 0; b < n; b++)
            if (boxes[b].page_no < 1 || boxes[b].page_no > d->n_pages) broken("a box on no page", f->name);
        free(boxes);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t n_formats;
    const cq_reader_format *formats = cq_reader_formats(&n_formats);
    if (size == 0 || n_formats == 0) return 0;
    const cq_reader_format *f = NULL;
    const uint8_t *nul = memchr(data, 0, size < 9 ? size : 9);
    if (nul) {
        char name[9];
        memcpy(name, data, (size_t)(nul - data));
        name[nul - data] = 0;
        f = cq_reader_format_named(name);
    }
    if (f) {
        size -= (size_t)(nul - data) + 1;
        data = nul + 1;
    } else {
        f = &formats[data[0] % n_formats];
        data++;
        size--;
    }

    static char path[64];
    snprintf(path, sizeof path, "/tmp/cq_fuzz_reader_%d.%s", (int)getpid(), f->extensions[0]);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) abort();

    cq_reader_limits limits = {.max_pages = FUZZ_MAX_PAGES, .max_bytes = FUZZ_MAX_BYTES};
    /* OCR off: Tesseract's recognition of a rendered page takes seconds, and it reads pixels, not the file */
    cq_reader_input in = {.path = path, .data = (const char *)data, .len = size, .limits = &limits, .ocr = CQ_OCR_OFF};
    cq_doctext doc;
    cq_err err = {0};
    cq_status rc = f->read(&in, &doc, &err);
    if (rc != CQ_OK) {
        if (!err.msg[0]) broken("an error without a message", f->name);
        if (!cq_utf8_valid(err.msg, strlen(err.msg))) broken("an error message that is not UTF-8", f->name);
        if (doc.text || doc.pages || doc.lines) broken("a failed read left a document", f->name);
        unlink(path);
        return 0;
    }
    check_doctext(f, &doc);
    cq_structure st;
    if (cq_structure_parse(&doc, &st, &err) == CQ_OK) {
        check_structure(f, &doc, &st);
        cq_structure_free(&st);
    }
    cq_doctext_free(&doc);
    unlink(path);
    return 0;
}
