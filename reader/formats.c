/* The format table (reader/reader.h): one row per format. A new format is its reader (one file, declared in
 * reader/reader_internal.h) and a row here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/strbuf.h"
#include "reader/reader.h"
#include "reader/reader_internal.h"

static const cq_reader_format formats[] = {
    {
        .name = "pdf",
        .label = "PDF",
        .extensions = {"pdf"},
        .magic = "%PDF-",
        .mime = "application/pdf",
        .has_pages = true,
        .text_title_first = true,
        .read = cq_reader_read_pdf,
        .render = cq_reader_render_pdf,
    },
    {
        .name = "md",
        .label = "Markdown",
        .extensions = {"md", "markdown"},
        .mime = "text/markdown; charset=utf-8",
        .read = cq_reader_read_markdown,
    },
    {
        .name = "txt",
        .label = "plain text",
        .extensions = {"txt", "text"},
        .mime = "text/plain; charset=utf-8",
        .read = cq_reader_read_plain,
    },
};

#define N_FORMATS (sizeof formats / sizeof formats[0])

const cq_reader_format *cq_reader_formats(size_t *n) {
    *n = N_FORMATS;
    return formats;
}

const cq_reader_format *cq_reader_format_named(const char *name) {
    for (size_t i = 0; name && i < N_FORMATS; i++)
        if (!strcmp(formats[i].name, name)) return &formats[i];
    return NULL;
}

static const cq_reader_format *format_of_extension(const char *ext) {
    for (size_t i = 0; i < N_FORMATS; i++)
        for (size_t e = 0; e < CQ_READER_MAX_EXTENSIONS && formats[i].extensions[e]; e++)
            if (!strcmp(formats[i].extensions[e], ext)) return &formats[i];
    return NULL;
}

const cq_reader_format *cq_reader_format_of_name(const char *filename) {
    char *ext = cq_path_ext_lower(filename);
    const cq_reader_format *f = ext ? format_of_extension(ext) : NULL;
    free(ext);
    return f;
}

static bool has_magic(const cq_reader_format *f, const char *head, size_t head_len) {
    size_t m = strlen(f->magic);
    for (size_t i = 0; i + m <= head_len && i < CQ_READER_HEAD_BYTES; i++)
        if (!memcmp(head + i, f->magic, m)) return true;
    return false;
}

/* "PDF, Markdown or plain text" */
static void append_labels(cq_strbuf *b) {
    for (size_t i = 0; i < N_FORMATS; i++)
        cq_strbuf_printf(b, "%s%s", i == 0 ? "" : i + 1 < N_FORMATS ? ", " : " or ", formats[i].label);
}

const cq_reader_format *cq_reader_detect(const char *filename, const char *head, size_t head_len, cq_err *err) {
    char *ext = cq_path_ext_lower(filename);
    if (!ext) {
        cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        return NULL;
    }
    const cq_reader_format *f = format_of_extension(ext);
    if (f && f->magic && !has_magic(f, head, head_len)) {
        if (head_len == 0) cq_err_set(err, CQ_ERR_EMPTY, "the file is empty");
        else cq_err_set(err, CQ_ERR_FORMAT, "named .%s but not a %s (no %s header)", ext, f->label, f->magic);
        f = NULL;
    } else if (!f) {
        for (size_t i = 0; i < N_FORMATS && !f; i++)
            if (formats[i].magic && has_magic(&formats[i], head, head_len)) f = &formats[i];
        if (!f) {
            cq_strbuf b = {0};
            append_labels(&b);
            cq_err_set(err, CQ_ERR_UNSUPPORTED, "unsupported file type '.%s' (use %s)", ext,
                       b.data ? b.data : "another format");
            cq_strbuf_free(&b);
        }
    }
    free(ext);
    return f;
}
