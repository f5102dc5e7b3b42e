#include "app/ingest.h"
#include "app/originals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "index/vectors.h"
#include "index/versions.h"
#include "reader/reader.h"
#include "ssm/ssm.h"

/* The FTS title column of a document: its title and its name, so that either finds it. */
static char *doc_label(const char *title, const char *name) {
    cq_strbuf b = {0};
    if (title) cq_strbuf_printf(&b, "%s ", title);
    cq_strbuf_puts(&b, name);
    return cq_strbuf_take(&b);
}

static cq_status store_clauses(cq_store *s, int64_t kb_id, int64_t doc_id, const char *label, const cq_doctext *doc,
                               const cq_structure *st, int64_t *clause_ids, cq_err *err) {
    for (int i = 0; i < doc->n_pages; i++) {
        const cq_page *p = &doc->pages[i];
        cq_store_page sp = {p->page_no, p->width, p->height, (int)p->n_chars, p->quality, p->quality_reason};
        cq_status rc = cq_store_page_add(s, doc_id, &sp, err);
        if (rc) return rc;
    }
    for (size_t i = 0; i < st->n_clauses; i++) {
        const cq_clause *c = &st->clauses[i];
        cq_box *boxes = NULL;
        size_t n_boxes = cq_doctext_boxes(doc, c->start, c->end, &boxes);
        cq_store_box *sb = n_boxes ? malloc(n_boxes * sizeof *sb) : NULL;
        if (n_boxes && !sb) {
            free(boxes);
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
        for (size_t b = 0; b < n_boxes; b++)
            sb[b] = (cq_store_box){boxes[b].x0, boxes[b].y0, boxes[b].x1, boxes[b].y1, boxes[b].page_no};
        free(boxes);
        cq_store_clause sc = {
            .ord = (int)i,
            .kind = (int)c->kind,
            .label = c->label,
            .label_key = c->label_key,
            .path = c->path,
            .text = c->text,
            .page_first = c->page_first,
            .page_last = c->page_last,
            .start_off = c->start,
            .end_off = c->end,
            .boxes = sb,
            .n_boxes = n_boxes,
        };
        cq_status rc = cq_store_clause_add(s, kb_id, doc_id, label, &sc, &clause_ids[i], err);
        free(sb);
        if (rc) return rc;
    }
    return CQ_OK;
}

/* With a dense retriever (index/vectors.h), one encoder pass over the document gives a vector per clause and the
 * document's final state; both are written in the ingest transaction. */
static cq_status encode_clauses(cq_store *s, cq_dense *d, int64_t kb_id, int64_t doc_id, const cq_structure *st,
                                const int64_t *clause_ids, cq_err *err) {
    if (!d || st->n_clauses == 0) return CQ_OK;
    const cq_ssm_model *m = cq_dense_model(d);
    size_t n = st->n_clauses, dim = (size_t)cq_ssm_model_config(m)->d_embed, state_bytes = cq_ssm_state_size_bytes(m);
    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    float *vectors = malloc(n * dim * sizeof *vectors);
    void *state_buf = malloc(state_bytes);
    cq_ssm_state *state = NULL;
    cq_vectors *v = NULL;
    cq_status rc = texts && lens && vectors && state_buf ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        texts[i] = st->clauses[i].text;
        lens[i] = strlen(texts[i]);
    }
    if (!rc) rc = cq_ssm_state_new(m, &state, err);
    if (!rc) rc = cq_dense_encode_document(d, state, texts, lens, n, vectors, err);
    if (!rc) rc = cq_dense_kb(d, s, kb_id, &v, err);
    if (!rc) rc = cq_vectors_add(v, s, clause_ids, vectors, n, err);
    if (!rc) rc = cq_ssm_state_save(state, state_buf, state_bytes, err);
    if (!rc)
        rc = cq_vectors_state_put(s, doc_id, cq_ssm_model_id(m), cq_ssm_state_tokens(state), state_buf, state_bytes,
                                  err);
    if (rc) cq_err_prefix(err, "encoding clauses: ");
    cq_ssm_state_free(state);
    free(state_buf);
    free(vectors);
    free(lens);
    free(texts);
    return rc;
}

/* Reads and parses the document (no database work), within opt->limits: the record, and then the record with the
 * clauses (which copy its text about once), must fit the memory budget. */
static cq_status extract(const char *stored_path, const cq_reader_format *format, const char *data, size_t len,
                         const cq_ingest_options *opt, cq_doctext *doc, cq_structure *st, cq_err *err) {
    cq_reader_input in = {.path = stored_path, .data = data, .len = len, .progress = opt->progress,
                          .progress_user = opt->progress_user, .ocr = opt->ocr, .limits = &opt->limits};
    cq_status rc = format->read(&in, doc, err);
    if (rc) return rc;
    rc = cq_reader_check_bytes(&opt->limits, cq_doctext_bytes(doc) + 2 * doc->text_len, "its clauses", err);
    if (!rc) rc = cq_reader_check_cancel(&opt->limits, "after reading", err);
    if (rc) return rc;
    rc = cq_structure_parse(doc, st, err);
    if (rc) return rc;
    rc = cq_reader_check_bytes(&opt->limits, cq_doctext_bytes(doc) + cq_structure_bytes(st), "its clauses", err);
    if (rc) return rc;
    if (st->n_clauses == 0) return cq_err_set(err, CQ_ERR_EMPTY, "no text could be read from the document");
    return CQ_OK;
}

/* A cancelled ingest leaves nothing: the stored original goes unless a document uses the same content. */
static void forget_original(cq_store *s, const char *data_dir, const char *sha, const char *format) {
    cq_original_remove_unused(s, data_dir, sha, format);
}

static void record_failure(cq_store *s, int64_t kb_id, const char *name, const char *filename, const char *format,
                           const char *sha, int64_t size, const char *why) {
    cq_err e2 = {0};
    int64_t doc_id;
    if (cq_store_doc_create(s, kb_id, name, filename, format, sha, size, &doc_id, &e2) == CQ_OK)
        cq_store_doc_finish(s, doc_id, "failed", why, NULL, 0, 0, 0, "", &e2);
}

cq_status cq_ingest_file(cq_store *s, const char *data_dir, int64_t kb_id, const char *path,
                         const cq_ingest_options *opt, cq_ingest_result *res, cq_err *err) {
    static const cq_ingest_options defaults = {0};
    if (!opt) opt = &defaults;
    memset(res, 0, sizeof *res);
    double t0 = cq_clock_seconds();
    const char *filename = opt->filename ? opt->filename : path;
    const char *slash = strrchr(filename, '/');
    if (slash) filename = slash + 1;

    char *data = NULL, *name = NULL, *stored = NULL;
    size_t len = 0;
    cq_doctext doc = {0};
    cq_structure st = {0};
    cq_doc_info old = {0}, same = {0};
    int64_t doc_id = 0, *clause_ids = NULL;
    char sha[65];
    cq_status rc = cq_file_read(path, CQ_INGEST_MAX_BYTES, &data, &len, err);
    if (rc) goto out;
    name = cq_path_stem(filename);
    if (!name || !*name) {
        rc = cq_err_set(err, CQ_ERR_INVALID, "'%s' is not a usable file name", filename);
        goto out;
    }
    const cq_reader_format *format = cq_reader_detect(filename, data, len, err);
    if (!format) {
        rc = err ? err->code : CQ_ERR_FORMAT;
        goto out;
    }
    snprintf(res->format, sizeof res->format, "%s", format->name);
    cq_sha256_hex(data, len, sha);

    /* Duplicate content: done already (a failed earlier attempt is retried). */
    rc = cq_store_doc_by_hash(s, kb_id, sha, &same, err);
    if (rc == CQ_OK) {
        if (!strcmp(same.status, "ready")) {
            res->duplicate = true;
            res->doc_id = same.id;
            res->n_pages = same.n_pages;
            res->n_clauses = same.n_clauses;
            res->quality = same.quality;
            snprintf(res->quality_reason, sizeof res->quality_reason, "%s", same.quality_reason ? same.quality_reason : "");
            goto out;
        }
        rc = cq_dense_forget_doc(opt->dense, s, same.id, err);
        if (!rc) rc = cq_store_doc_delete(s, same.id, err);
        if (rc) goto out;
    } else if (rc != CQ_ERR_NOT_FOUND) {
        goto out;
    }
    cq_err_clear(err);
    rc = cq_store_doc_by_name(s, kb_id, name, &old, err);
    if (rc == CQ_OK && !strcmp(old.status, "ready") && !opt->replace) {
        rc = cq_err_set(err, CQ_ERR_EXISTS,
                        "a different document named '%s' is already in this knowledge base (replace it explicitly)",
                        name);
        goto out;
    }
    if (rc != CQ_OK && rc != CQ_ERR_NOT_FOUND) goto out;
    cq_err_clear(err);
    rc = CQ_OK;

    /* Keep the original: page images and downloads are served from it. */
    size_t n = strlen(data_dir) + 96;
    stored = malloc(n);
    if (!stored) {
        rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = cq_original_keep(s, data_dir, sha, format->name, data, len, stored, n, err);
    if (rc) goto out;

    rc = extract(stored, format, data, len, opt, &doc, &st, err);
    if (rc && err && !strncmp(err->msg, stored, strlen(stored)) && !strncmp(err->msg + strlen(stored), ": ", 2)) {
        /* The stored copy's path is an internal detail: the message names the file as uploaded (prefix below). */
        size_t skip = strlen(stored) + 2;
        memmove(err->msg, err->msg + skip, strlen(err->msg + skip) + 1);
    }
    if (rc == CQ_ERR_CANCELLED) {
        forget_original(s, data_dir, sha, format->name);
        goto out;
    }
    if (rc) {
        record_failure(s, kb_id, name, filename, format->name, sha, (int64_t)len, err ? err->msg : "extraction failed");
        goto out;
    }
    const char *title = doc.title;
    if (st.title && (!title || format->text_title_first)) title = st.title;
    char *label = doc_label(title, name);
    clause_ids = calloc(st.n_clauses, sizeof *clause_ids);
    rc = clause_ids ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = cq_store_begin(s, err);
    if (!rc) rc = cq_store_doc_create(s, kb_id, name, filename, format->name, sha, (int64_t)len, &doc_id, err);
    if (!rc) rc = store_clauses(s, kb_id, doc_id, label, &doc, &st, clause_ids, err);
    if (!rc) rc = encode_clauses(s, opt->dense, kb_id, doc_id, &st, clause_ids, err);
    const bool encoded = !rc; /* the vectors are in FAISS from here on */
    if (!rc)
        rc = cq_store_doc_finish(s, doc_id, "ready", NULL, title, doc.n_pages, (int)st.n_clauses, doc.quality,
                                 doc.quality_reason, err);
    if (!rc) rc = cq_versions_analyse(s, doc_id, err); /* its version of a regulation (index/versions.h) */
    if (!rc && old.id) rc = cq_dense_forget_doc(opt->dense, s, old.id, err);
    if (!rc && old.id) rc = cq_store_doc_delete(s, old.id, err);
    free(label);
    if (!rc) rc = cq_reader_check_cancel(&opt->limits, "before the document was saved", err);
    if (!rc && opt->before_commit) rc = opt->before_commit(opt->before_commit_user, s, doc_id, err);
    if (!rc) rc = cq_store_commit(s, err);
    if (rc) {
        cq_store_rollback(s);
        cq_err e2 = {0};
        if (encoded) cq_dense_forget(opt->dense, kb_id, clause_ids, st.n_clauses, &e2); /* their rows were rolled back */
        if (rc == CQ_ERR_CANCELLED) forget_original(s, data_dir, sha, format->name);
        doc_id = 0;
        goto out;
    }
    cq_fault_point("after-document-commit"); /* the crash tests (core/fault.h) */
    res->doc_id = doc_id;
    res->n_pages = doc.n_pages;
    res->n_clauses = (int)st.n_clauses;
    res->quality = doc.quality;
    snprintf(res->quality_reason, sizeof res->quality_reason, "%s", doc.quality_reason);

out:
    if (rc && err) cq_err_prefix(err, "%s: ", filename);
    res->seconds = cq_clock_seconds() - t0;
    free(clause_ids);
    cq_structure_free(&st);
    cq_doctext_free(&doc);
    cq_doc_info_free(&old);
    cq_doc_info_free(&same);
    free(stored);
    free(name);
    free(data);
    return rc;
}
