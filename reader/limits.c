/* What reading a document may cost (reader/reader.h, cq_reader_limits): the checks every reader and the ingest
 * pipeline share, and the bytes a record and its clauses hold. */
#include <stdint.h>
#include <string.h>

#include "reader/reader.h"

cq_status cq_reader_check_cancel(const cq_reader_limits *limits, const char *what, cq_err *err) {
    if (!limits || !limits->cancel || !atomic_load(limits->cancel)) return CQ_OK;
    return cq_err_set(err, CQ_ERR_CANCELLED, "cancelled%s%s", what && *what ? " " : "", what ? what : "");
}

cq_status cq_reader_check_bytes(const cq_reader_limits *limits, size_t bytes, const char *what, cq_err *err) {
    if (!limits || !limits->max_bytes || bytes <= limits->max_bytes) return CQ_OK;
    const double mb = 1024.0 * 1024.0;
    if (bytes == SIZE_MAX)
        return cq_err_set(err, CQ_ERR_TOO_LARGE,
                          "document too large: %s needs more than the memory a document may take (%.0f MB, "
                          "--doc-memory-mb)", what ? what : "reading it", (double)limits->max_bytes / mb);
    return cq_err_set(err, CQ_ERR_TOO_LARGE,
                      "document too large: %s would take %.0f MB, more than the memory a document may take (%.0f MB, "
                      "--doc-memory-mb)", what ? what : "reading it", (double)bytes / mb,
                      (double)limits->max_bytes / mb);
}

size_t cq_doctext_bytes(const cq_doctext *doc) {
    if (!doc) return 0;
    size_t n = doc->text_len + 1 + (size_t)(doc->n_pages > 0 ? doc->n_pages : 0) * sizeof *doc->pages;
    n += doc->n_lines * sizeof *doc->lines;
    n += doc->n_glyphs * (sizeof *doc->glyph_offset + sizeof *doc->glyph_x0 + sizeof *doc->glyph_x1);
    if (doc->title) n += strlen(doc->title) + 1;
    return n;
}

size_t cq_structure_bytes(const cq_structure *s) {
    if (!s) return 0;
    size_t n = s->n_clauses * sizeof *s->clauses;
    for (size_t i = 0; i < s->n_clauses; i++) {
        const cq_clause *c = &s->clauses[i];
        const char *str[] = {c->label, c->label_key, c->path, c->text};
        for (size_t k = 0; k < 4; k++)
            if (str[k]) n += strlen(str[k]) + 1;
    }
    if (s->title) n += strlen(s->title) + 1;
    return n;
}
