#include "app/ingest.h"
#include "app/originals.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "store/fts_cjk.h"
#include "search/vectors.h"
#include "store/versions.h"
#include "reader/reader.h"
#include "ssm/ssm.h"

/* Documents a transaction (and a GPU encoder call), and the file bytes that end a group early. A group is cut by
 * these alone, never by timing, so any number of workers gives the same groups and so the same store. */
#define GROUP_DOCS 64
#define GROUP_BYTES (64u << 20)

/* A file on its way in. The first part is what reading and parsing give without the store (a batch's worker
 * threads fill it); the store's part is done by one thread. */
typedef struct {
    const char *path;
    const char *filename;          /* as uploaded: its base name */
    char *name;                    /* the document's name: the file name's stem */
    char *data;                    /* the file's bytes (NULL once parsed in a batch) */
    size_t len;
    const cq_reader_format *format;
    char sha[65];
    char *stored;                  /* DATA/files/<sha256>.<format>, once kept */
    bool original_new;             /* the batch's worker wrote the stored original (no file was there) */
    cq_status load_rc, keep_rc, parse_rc; /* reading and detecting; keeping the original; reading its text */
    cq_err load_err, keep_err, parse_err;
    bool parsed;                   /* parse_rc is the reader's */
    cq_doctext doc;
    cq_structure st;
    double seconds;                /* reading and parsing */
    /* The encoder's input (a batch with a dense retriever; NULL when it could not be made: then the document is
     * encoded when written, as cq_ingest_file does) and output (NULL until encoded). */
    int32_t *tokens;
    size_t n_tokens;
    uint32_t *ends;
    cq_fts_tokens *fts_tokens;     /* each clause text's FTS tokens (a batch), or NULL */
    float *vectors;
    float *doc_vector;             /* with the encoder's document head: the document's vector (d_embed), or NULL */
    /* the outcome */
    int64_t doc_id;                /* its documents row, once created */
    int64_t *clause_ids;
    bool written;                  /* its rows are in the open transaction (vectors in FAISS) */
    cq_status rc;
    cq_err err;
    cq_ingest_result res;
} ingest_doc;

static void ingest_doc_free(ingest_doc *d) {
    for (size_t i = 0; d->fts_tokens && i < d->st.n_clauses; i++) cq_fts_tokens_free(&d->fts_tokens[i]);
    free(d->fts_tokens);
    d->fts_tokens = NULL;
    free(d->name);
    free(d->data);
    free(d->stored);
    cq_doctext_free(&d->doc);
    cq_structure_free(&d->st);
    free(d->tokens);
    free(d->ends);
    free(d->vectors);
    free(d->doc_vector);
    free(d->clause_ids);
    d->name = d->data = d->stored = NULL;
    d->tokens = NULL;
    d->ends = NULL;
    d->vectors = NULL;
    d->doc_vector = NULL;
    d->clause_ids = NULL;
}

/* The FTS title column of a document: its title and its name, so that either finds it. */
static char *doc_label(const char *title, const char *name) {
    cq_strbuf b = {0};
    if (title) cq_strbuf_printf(&b, "%s ", title);
    cq_strbuf_puts(&b, name);
    return cq_strbuf_take(&b);
}

static cq_status store_clauses(cq_store *s, int64_t kb_id, int64_t doc_id, const char *label, const cq_doctext *doc,
                               const cq_structure *st, const cq_fts_tokens *fts_tokens, int64_t *clause_ids,
                               cq_err *err) {
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
            .text_tokens = fts_tokens ? &fts_tokens[i] : NULL,
        };
        cq_status rc = cq_store_clause_add(s, kb_id, doc_id, label, &sc, &clause_ids[i], err);
        free(sb);
        if (rc) return rc;
    }
    return CQ_OK;
}

/* Documents encoded whose vectors (and document vectors) wait for flush_vectors: one document's until its rows are in, or a
 * batch group's until the group's end, when their rows go in with one statement and FAISS gets one add. */
typedef struct {
    ingest_doc *docs[GROUP_DOCS];
    size_t n;
} pending_vectors;

/* The clauses' texts and lengths, for the encoder. */
static cq_status clause_texts(const cq_structure *st, const char ***texts, size_t **lens, cq_err *err) {
    *texts = malloc(st->n_clauses * sizeof **texts);
    *lens = malloc(st->n_clauses * sizeof **lens);
    if (!*texts || !*lens) {
        free(*texts);
        free(*lens);
        *texts = NULL;
        *lens = NULL;
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < st->n_clauses; i++) {
        (*texts)[i] = st->clauses[i].text;
        (*lens)[i] = strlen(st->clauses[i].text);
    }
    return CQ_OK;
}

/* The document's vector, when the encoder has a document head (docs/SSM.md, "Document vectors"): room for it. */
static bool want_doc_vector(const cq_ssm_model *m, ingest_doc *d) {
    if (!cq_ssm_model_doc_window(m)) return true;
    if (!d->doc_vector) d->doc_vector = malloc((size_t)cq_ssm_model_config(m)->d_embed * sizeof *d->doc_vector);
    return d->doc_vector != NULL;
}

/* A document's vector per clause (and its document vector, with a document head), encoded here (one encoder pass
 * over the document, from a fresh state) unless a batch encoded it already, and queued for flush_vectors. */
static cq_status encode_clauses(cq_dense *d, ingest_doc *doc, pending_vectors *queue, cq_err *err) {
    const cq_structure *st = &doc->st;
    if (!d || st->n_clauses == 0) return CQ_OK;
    const cq_ssm_model *m = cq_dense_model(d);
    size_t n = st->n_clauses, dim = (size_t)cq_ssm_model_config(m)->d_embed;
    cq_status rc = CQ_OK;
    if (!doc->vectors) {
        const char **texts = NULL;
        size_t *lens = NULL;
        cq_ssm_state *state = NULL;
        doc->vectors = malloc(n * dim * sizeof *doc->vectors);
        if (!doc->vectors || !want_doc_vector(m, doc)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        if (!rc) rc = clause_texts(st, &texts, &lens, err);
        if (!rc) rc = cq_ssm_state_new(m, &state, err);
        if (!rc) rc = cq_dense_encode_document(d, state, texts, lens, n, doc->vectors, doc->doc_vector, err);
        cq_ssm_state_free(state);
        free(texts);
        free(lens);
    }
    if (rc) {
        cq_err_prefix(err, "encoding clauses: ");
        return rc;
    }
    queue->docs[queue->n++] = doc;
    return CQ_OK;
}

/* Writes the queued documents' vectors (one statement, one FAISS add) and document vectors, in the open
 * transaction, once their documents' rows are in (on PostgreSQL a document's clauses reach the server with
 * cq_store_doc_finish, and the vector rows refer to them). */
static cq_status flush_vectors(cq_store *s, cq_dense *d, int64_t kb_id, pending_vectors *p, cq_err *err) {
    if (!p->n) return CQ_OK;
    const cq_ssm_model *m = cq_dense_model(d);
    size_t dim = (size_t)cq_ssm_model_config(m)->d_embed, total = 0;
    for (size_t k = 0; k < p->n; k++) total += p->docs[k]->st.n_clauses;
    cq_vectors *v = NULL;
    cq_status rc = cq_dense_kb(d, s, kb_id, &v, err);
    /* One add for the group, unless it takes a flat index past CQ_VECTORS_IVF_MIN: the inverted file is then
     * trained on what SQLite holds, which must be the vectors up to the document that crosses the size, as when
     * documents are added one by one (cq_ingest_file), so there each is added in turn. */
    bool together = !rc && p->n > 1 && (cq_vectors_is_ivf(v) || cq_vectors_count(v) + total < CQ_VECTORS_IVF_MIN);
    if (together) {
        int64_t *ids = malloc(total * sizeof *ids);
        float *x = malloc(total * dim * sizeof *x);
        if (!ids || !x) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        for (size_t k = 0, at = 0; !rc && k < p->n; k++) {
            const ingest_doc *doc = p->docs[k];
            size_t n = doc->st.n_clauses;
            memcpy(ids + at, doc->clause_ids, n * sizeof *ids);
            memcpy(x + at * dim, doc->vectors, n * dim * sizeof *x);
            at += n;
        }
        if (!rc) rc = cq_vectors_add(v, s, ids, x, total, err);
        free(ids);
        free(x);
    }
    for (size_t k = 0; !rc && !together && k < p->n; k++)
        rc = cq_vectors_add(v, s, p->docs[k]->clause_ids, p->docs[k]->vectors, p->docs[k]->st.n_clauses, err);
    for (size_t k = 0; !rc && k < p->n; k++)
        if (p->docs[k]->doc_vector)
            rc = cq_store_doc_vector_put(s, kb_id, p->docs[k]->doc_id, cq_ssm_model_id(m), cq_ssm_model_doc_head_id(m),
                                         (int)dim, p->docs[k]->doc_vector, err);
    if (rc) cq_err_prefix(err, "encoding clauses: ");
    p->n = 0;
    return rc;
}

/* Reads the file, names the document, detects the format and hashes the content (no store work): the upload's
 * record says all but the bytes when there is one (up, may be NULL) and the file is the size it says. */
static cq_status load(ingest_doc *d, const char *path, const char *filename, const cq_upload *up, cq_err *err) {
    d->path = path;
    if (up) filename = up->name;
    if (!filename) filename = path;
    const char *slash = strrchr(filename, '/');
    d->filename = slash ? slash + 1 : filename;
    cq_status rc = cq_file_read(path, CQ_INGEST_MAX_BYTES, &d->data, &d->len, err);
    if (rc) return rc;
    d->name = cq_path_stem(d->filename);
    if (!d->name || !*d->name) return cq_err_set(err, CQ_ERR_INVALID, "'%s' is not a usable file name", d->filename);
    if (up && up->format && up->sha256[0] && (int64_t)d->len == up->size) {
        d->format = up->format;
        memcpy(d->sha, up->sha256, sizeof d->sha);
        return CQ_OK;
    }
    d->format = cq_reader_detect(d->filename, d->data, d->len, err);
    if (!d->format) return err ? err->code : CQ_ERR_FORMAT;
    cq_sha256_hex(d->data, d->len, d->sha);
    return CQ_OK;
}

/* Reads and parses the document (no database work), within opt->limits: the record, and then the record with the
 * clauses (which copy its text about once), must fit the memory budget. */
static cq_status extract(const char *stored_path, const cq_reader_format *format, const char *data, size_t len,
                         const cq_ingest_options *opt, cq_reader_progress_fn progress, void *progress_user,
                         cq_doctext *doc, cq_structure *st, cq_err *err) {
    cq_reader_input in = {.path = stored_path, .data = data, .len = len, .progress = progress,
                          .progress_user = progress_user, .ocr = opt->ocr, .limits = &opt->limits};
    cq_status rc = format->read(&in, doc, err);
    if (rc && rc != CQ_ERR_CANCELLED && opt->limits.cancel && atomic_load(opt->limits.cancel)) {
        /* a reader stopped by the flag may report it as another failure (a refused allocation): while the flag is
         * up, the failure is the cancel's, and no failed document is recorded for it */
        return cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while reading");
    }
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

/* extract on the stored original; the stored copy's path is an internal detail: a message names the file as
 * uploaded (the caller's prefix). */
static void parse(ingest_doc *d, const cq_ingest_options *opt, cq_reader_progress_fn progress, void *progress_user) {
    d->parsed = true;
    cq_err *err = &d->parse_err;
    d->parse_rc = extract(d->stored, d->format, d->data, d->len, opt, progress, progress_user, &d->doc, &d->st, err);
    size_t n = strlen(d->stored);
    if (d->parse_rc && !strncmp(err->msg, d->stored, n) && !strncmp(err->msg + n, ": ", 2))
        memmove(err->msg, err->msg + n + 2, strlen(err->msg + n + 2) + 1);
}

/* What the KB holds of this content or name. Identical content that is ready: *duplicate, res filled, nothing to
 * do (a failed earlier attempt is deleted and retried). A ready document of the same name: refused unless
 * opt->replace; *old is then the document the new one replaces. */
static cq_status check_existing(cq_store *s, int64_t kb_id, const ingest_doc *d, const cq_ingest_options *opt,
                                cq_doc_info *old, bool *duplicate, cq_ingest_result *res, cq_err *err) {
    *duplicate = false;
    cq_doc_info same = {0};
    cq_status rc = cq_store_doc_by_hash(s, kb_id, d->sha, &same, err);
    if (rc == CQ_OK) {
        if (same.state == CQ_DOC_READY) {
            *duplicate = true;
            res->duplicate = true;
            res->doc_id = same.id;
            res->n_pages = same.n_pages;
            res->n_clauses = same.n_clauses;
            res->quality = same.quality;
            snprintf(res->quality_reason, sizeof res->quality_reason, "%s", same.quality_reason ? same.quality_reason : "");
            cq_doc_info_free(&same);
            return CQ_OK;
        }
        rc = cq_dense_forget_doc(opt->dense, s, same.id, err);
        if (!rc) rc = cq_store_doc_delete(s, same.id, err);
    }
    cq_doc_info_free(&same);
    if (rc != CQ_OK && rc != CQ_ERR_NOT_FOUND) return rc;
    cq_err_clear(err);
    rc = cq_store_doc_by_name(s, kb_id, d->name, old, err);
    if (rc == CQ_OK && old->state == CQ_DOC_READY && !opt->replace)
        return cq_err_set(err, CQ_ERR_EXISTS,
                          "a different document named '%s' is already in this knowledge base (replace it explicitly)",
                          d->name);
    if (rc != CQ_OK && rc != CQ_ERR_NOT_FOUND) return rc;
    cq_err_clear(err);
    return CQ_OK;
}

/* A cancelled ingest leaves nothing: the stored original goes unless a document uses the same content. */
static void forget_original(cq_store *s, const char *data_dir, const ingest_doc *d) {
    cq_original_remove_unused(s, data_dir, d->sha, d->format->name);
}

static void record_failure(cq_store *s, int64_t kb_id, const ingest_doc *d, const char *why) {
    cq_err e2 = {0};
    int64_t doc_id;
    if (cq_store_doc_create(s, kb_id, d->name, d->filename, d->format->name, d->sha, (int64_t)d->len, &doc_id, &e2) ==
        CQ_OK)
        cq_store_doc_finish(s, doc_id, CQ_DOC_FAILED, why, NULL, 0, 0, 0, "", &e2);
}

/* Its version of a regulation (store/versions.h), from the clauses just written, as they are in memory. */
static cq_status analyse_version(cq_store *s, int64_t doc_id, const cq_structure *st, cq_err *err) {
    cq_version_clause *c = st->n_clauses ? malloc(st->n_clauses * sizeof *c) : NULL;
    if (st->n_clauses && !c) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < st->n_clauses; i++) c[i] = (cq_version_clause){(int)st->clauses[i].kind, st->clauses[i].text};
    cq_status rc = cq_versions_analyse_clauses(s, doc_id, c, st->n_clauses, err);
    free(c);
    return rc;
}

/* Writes the parsed document in a transaction of its own: all there or not at all; what failed is undone (its
 * vectors taken out of FAISS again, a cancelled document's original removed). in_batch: inside the batch's open
 * transaction instead, which the caller rolls back whole when this fails (no savepoint per document: FTS5 writes
 * its pending terms out as a segment at every savepoint, which is what a batch saves). */
static cq_status write_doc(cq_store *s, const char *data_dir, int64_t kb_id, ingest_doc *d,
                           const cq_ingest_options *opt, const cq_doc_info *old, pending_vectors *pending,
                           cq_err *err) {
    const bool in_batch = pending != NULL;
    pending_vectors own = {.n = 0}; /* alone: its vectors, written after its rows */
    const char *title = d->doc.title;
    if (d->st.title && (!title || d->format->text_title_first)) title = d->st.title;
    char *label = doc_label(title, d->name);
    int64_t doc_id = 0;
    d->clause_ids = calloc(d->st.n_clauses, sizeof *d->clause_ids);
    cq_status rc = d->clause_ids && label ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc && !in_batch) rc = cq_store_begin(s, err);
    if (!rc)
        rc = cq_store_doc_create(s, kb_id, d->name, d->filename, d->format->name, d->sha, (int64_t)d->len, &doc_id,
                                 err);
    d->doc_id = doc_id;
    if (!rc) rc = store_clauses(s, kb_id, doc_id, label, &d->doc, &d->st, d->fts_tokens, d->clause_ids, err);
    if (!rc) rc = encode_clauses(opt->dense, d, in_batch ? pending : &own, err);
    if (!rc)
        rc = cq_store_doc_finish(s, doc_id, CQ_DOC_READY, NULL, title, d->doc.n_pages, (int)d->st.n_clauses,
                                 d->doc.quality, d->doc.quality_reason, err);
    bool encoded = false; /* its vectors are in FAISS from here on (a batch's: at its group's end) */
    if (!rc && !in_batch) {
        encoded = true;
        rc = flush_vectors(s, opt->dense, kb_id, &own, err);
    }
    if (!rc) rc = analyse_version(s, doc_id, &d->st, err);
    if (!rc && old->id) rc = cq_dense_forget_doc(opt->dense, s, old->id, err);
    if (!rc && old->id) rc = cq_store_doc_delete(s, old->id, err);
    free(label);
    if (!rc) rc = cq_reader_check_cancel(&opt->limits, "before the document was saved", err);
    if (!rc && opt->before_commit) rc = opt->before_commit(opt->before_commit_user, s, doc_id, err);
    if (!rc && !in_batch) rc = cq_store_commit(s, err);
    if (rc) {
        if (!in_batch) cq_store_rollback(s);
        cq_err e2 = {0};
        if (encoded && d->clause_ids)
            cq_dense_forget(opt->dense, kb_id, d->clause_ids, d->st.n_clauses, &e2); /* their rows were rolled back */
        if (rc == CQ_ERR_CANCELLED) forget_original(s, data_dir, d);
        return rc;
    }
    d->written = true;
    d->res.doc_id = doc_id;
    d->res.n_pages = d->doc.n_pages;
    d->res.n_clauses = (int)d->st.n_clauses;
    d->res.quality = d->doc.quality;
    snprintf(d->res.quality_reason, sizeof d->res.quality_reason, "%s", d->doc.quality_reason);
    return CQ_OK;
}

cq_status cq_ingest_file(cq_store *s, const char *data_dir, int64_t kb_id, const char *path,
                         const cq_ingest_options *opt, cq_ingest_result *res, cq_err *err) {
    static const cq_ingest_options defaults = {0};
    if (!opt) opt = &defaults;
    memset(res, 0, sizeof *res);
    double t0 = cq_clock_seconds();
    ingest_doc d = {0};
    cq_doc_info old = {0};
    bool duplicate = false;
    cq_status rc = load(&d, path, opt->filename, opt->upload, err);
    cq_ingest_options with_ocr;
    if (opt->upload) { /* the upload's OCR mode */
        with_ocr = *opt;
        with_ocr.ocr = opt->upload->ocr;
        opt = &with_ocr;
    }
    if (!rc) {
        snprintf(d.res.format, sizeof d.res.format, "%s", d.format->name);
        rc = check_existing(s, kb_id, &d, opt, &old, &duplicate, &d.res, err);
    }
    if (!rc && !duplicate) {
        /* Keep the original: page images and downloads are served from it. */
        size_t n = strlen(data_dir) + 96;
        d.stored = malloc(n);
        rc = d.stored ? cq_original_keep(s, data_dir, d.sha, d.format->name, d.data, d.len, d.stored, n, err)
                      : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    if (!rc && !duplicate) {
        parse(&d, opt, opt->progress, opt->progress_user);
        rc = d.parse_rc;
        if (rc && err) *err = d.parse_err;
        if (rc == CQ_ERR_CANCELLED) forget_original(s, data_dir, &d);
        else if (rc) record_failure(s, kb_id, &d, d.parse_err.msg[0] ? d.parse_err.msg : "extraction failed");
    }
    if (!rc && !duplicate) {
        rc = write_doc(s, data_dir, kb_id, &d, opt, &old, NULL, err);
        if (!rc) cq_fault_point("after-document-commit"); /* the crash tests (core/fault.h) */
    }
    if (rc && err) cq_err_prefix(err, "%s: ", d.filename);
    if (!rc) *res = d.res;
    else snprintf(res->format, sizeof res->format, "%s", d.res.format);
    memcpy(res->sha256, d.sha, sizeof res->sha256);
    res->seconds = cq_clock_seconds() - t0;
    cq_doc_info_free(&old);
    ingest_doc_free(&d);
    return rc;
}

/* ---- many files: cq_ingest_files ------------------------------------------------------------------------------ */

/* File bytes read ahead of the writer at most (the group it waits for is always read). */
#define AHEAD_BYTES (512u << 20)

typedef struct {
    cq_store *s;
    const char *data_dir;
    int64_t kb_id;
    const char *const *paths;
    size_t n;
    const cq_ingest_options *opt;
    const cq_ingest_batch_options *bo;
    pthread_mutex_t report_mu; /* bo's callbacks, one at a time */
    const cq_ssm_model *model; /* the encoder's, when there is a dense retriever */
    ingest_doc *docs;
    bool *ready;
    pthread_mutex_t mu;
    pthread_cond_t ready_cv, room_cv;
    size_t next;        /* the next file a worker takes */
    size_t consumed;    /* files before this one are reported and freed */
    size_t want;        /* the writer waits for this file */
    size_t window;      /* files read ahead of consumed at most (past want) */
    size_t bytes_ahead; /* bytes of files read and not yet consumed */
    double wait_s, encode_s, write_s; /* the writer's time: waiting for files, encoding, writing the store */
    double write_cpu_s;                /* its CPU time writing the store */
    pending_vectors pending; /* the group's documents written but for their vectors and states */
} batch;

typedef struct {
    batch *b;
    size_t index;
} page_report;

static void report_pages(void *user, int pages_read, int n_pages) {
    page_report *r = user;
    pthread_mutex_lock(&r->b->report_mu);
    r->b->bo->pages(r->b->bo->user, r->index, pages_read, n_pages);
    pthread_mutex_unlock(&r->b->report_mu);
}

/* A worker's part of one file: read, keep the original's file, parse, tokenize for the encoder. */
static void prepare(batch *b, ingest_doc *d, size_t index) {
    const char *path = b->paths[index];
    page_report pages = {b, index};
    double t0 = cq_clock_seconds();
    d->load_rc = load(d, path, NULL, NULL, &d->load_err);
    if (d->load_rc) goto out;
    size_t n = strlen(b->data_dir) + 96;
    d->stored = malloc(n);
    if (!d->stored) {
        d->keep_rc = cq_err_set(&d->keep_err, CQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    d->original_new = cq_original_path(b->data_dir, d->sha, d->format->name, d->stored, n) && access(d->stored, F_OK);
    d->keep_rc = cq_original_keep_file(b->data_dir, d->sha, d->format->name, d->data, d->len, d->stored, n,
                                       &d->keep_err);
    if (d->keep_rc) goto out;
    parse(d, b->opt, b->bo && b->bo->pages ? report_pages : NULL, &pages);
    free(d->data); /* parsed: the original is kept */
    d->data = NULL;
    if (!d->parse_rc && cq_store_keyword_takes_tokens(b->s)) { /* the FTS5 tokens of the clauses (SQLite): the writer replays them */
        d->fts_tokens = calloc(d->st.n_clauses, sizeof *d->fts_tokens);
        cq_err e2 = {0};
        for (size_t i = 0; d->fts_tokens && i < d->st.n_clauses; i++)
            if (cq_fts_tokens_make(d->st.clauses[i].text, strlen(d->st.clauses[i].text), &d->fts_tokens[i], &e2))
                break; /* those left empty are tokenized by FTS5 itself */
    }
    if (!d->parse_rc && b->model) {
        const char **texts = NULL;
        size_t *lens = NULL;
        cq_err e2 = {0};
        d->ends = malloc(d->st.n_clauses * sizeof *d->ends);
        if (d->ends && !clause_texts(&d->st, &texts, &lens, &e2) &&
            cq_ssm_document_tokens(b->model, true, texts, lens, d->st.n_clauses, &d->tokens, &d->n_tokens, d->ends,
                                   &e2)) {
            free(d->ends); /* encoded when written instead, where the error is reported */
            d->ends = NULL;
        }
        free(texts);
        free(lens);
    }
out:
    d->seconds = cq_clock_seconds() - t0;
}

static void *worker_main(void *arg) {
    batch *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (b->next < b->n && b->next > b->want &&
               (b->next >= b->consumed + b->window || b->bytes_ahead >= AHEAD_BYTES))
            pthread_cond_wait(&b->room_cv, &b->mu);
        if (b->next >= b->n) break;
        size_t i = b->next++;
        pthread_mutex_unlock(&b->mu);
        prepare(b, &b->docs[i], i);
        pthread_mutex_lock(&b->mu);
        b->ready[i] = true;
        b->bytes_ahead += b->docs[i].len;
        pthread_cond_broadcast(&b->ready_cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void wait_ready(batch *b, size_t i) {
    double t0 = cq_clock_seconds();
    pthread_mutex_lock(&b->mu);
    b->want = i;
    pthread_cond_broadcast(&b->room_cv);
    while (!b->ready[i]) pthread_cond_wait(&b->ready_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    b->wait_s += cq_clock_seconds() - t0;
}

/* Whether d will be written, as far as the store before the group and the group's earlier documents tell: only
 * those are worth encoding ahead (a document that turns out otherwise is encoded when written). */
static bool will_write(batch *b, size_t first, size_t i) {
    ingest_doc *d = &b->docs[i];
    if (d->load_rc || d->keep_rc || d->parse_rc || !d->tokens) return false;
    for (size_t j = first; j < i; j++) {
        const ingest_doc *e = &b->docs[j];
        if (!e->tokens) continue;
        if (!strcmp(e->sha, d->sha) || (!b->opt->replace && !strcmp(e->name, d->name))) return false;
    }
    cq_doc_info info = {0};
    cq_err e2 = {0};
    bool write = true;
    if (cq_store_doc_by_hash(b->s, b->kb_id, d->sha, &info, &e2) == CQ_OK && info.state == CQ_DOC_READY)
        write = false;
    cq_doc_info_free(&info);
    if (write && !b->opt->replace && cq_store_doc_by_name(b->s, b->kb_id, d->name, &info, &e2) == CQ_OK &&
        info.state == CQ_DOC_READY)
        write = false;
    cq_doc_info_free(&info);
    return write;
}

/* Encodes the group's documents that will be written: on a GPU in one call (a call's cost is mostly fixed), on the
 * CPU one document a call as cq_ingest_file does (its threads are the parallelism there, and a block cut at the
 * same tokens gives the same vectors to the last bit). A document left without vectors (not worth it, or its
 * encoding failed) is encoded by write_doc if it is written after all, which reports any error. */
static void encode_group(batch *b, size_t first, size_t end) {
    cq_dense *dense = b->opt->dense;
    const size_t dim = (size_t)cq_ssm_model_config(b->model)->d_embed;
    const bool together = cq_dense_backend(dense) == CQ_SSM_BACKEND_CUDA;
    cq_ssm_seq *seqs = calloc(end - first, sizeof *seqs);
    ingest_doc **of = calloc(end - first, sizeof *of);
    size_t n = 0;
    cq_err e2 = {0};
    for (size_t i = first; seqs && of && i < end; i++) {
        ingest_doc *d = &b->docs[i];
        if (!will_write(b, first, i)) continue;
        d->vectors = malloc(d->st.n_clauses * dim * sizeof *d->vectors);
        if (!d->vectors || !want_doc_vector(b->model, d)) {
            free(d->vectors);
            d->vectors = NULL;
            continue;
        }
        seqs[n] = (cq_ssm_seq){.tokens = d->tokens, .n_tokens = d->n_tokens, .segment_ends = d->ends,
                               .n_segments = d->st.n_clauses, .vectors = d->vectors, .doc_vector = d->doc_vector};
        of[n++] = d;
    }
    bool done = together && n && cq_dense_encode_tokens(dense, seqs, n, &e2) == CQ_OK;
    for (size_t k = 0; k < n; k++) {
        ingest_doc *d = of[k];
        if (!done && !together && cq_dense_encode_tokens(dense, &seqs[k], 1, &e2) == CQ_OK) continue;
        if (!done) { /* write_doc encodes it again from a fresh state, and says what failed */
            free(d->vectors);
            d->vectors = NULL;
        }
    }
    for (size_t i = first; i < end; i++) { /* the tokens are done with */
        free(b->docs[i].tokens);
        b->docs[i].tokens = NULL;
    }
    free(seqs);
    free(of);
}

/* The store's part of one file of the group: inside the group's transaction, or (alone) in transactions of its
 * own as cq_ingest_file writes. Returns false when the group's transaction must be rolled back: the document's
 * writing failed part way (a refusal or a file that cannot be read is an outcome, not a failure of the group). */
static bool write_in_group(batch *b, ingest_doc *d, bool alone) {
    cq_err *err = &d->err;
    const cq_ingest_options *opt = b->opt;
    cq_doc_info old = {0};
    bool duplicate = false, intact = true;
    if (d->load_rc) {
        d->rc = d->load_rc;
        d->err = d->load_err;
        goto out;
    }
    snprintf(d->res.format, sizeof d->res.format, "%s", d->format->name);
    d->rc = check_existing(b->s, b->kb_id, d, opt, &old, &duplicate, &d->res, err);
    if (d->rc && d->rc != CQ_ERR_EXISTS) intact = false;
    if (d->rc || duplicate) goto out;
    if (d->keep_rc) {
        d->rc = d->keep_rc;
        d->err = d->keep_err;
        goto out;
    }
    d->rc = cq_original_keep_in_store(b->s, d->sha, d->stored, err);
    if (d->rc) goto out;
    if (d->parse_rc) {
        d->rc = d->parse_rc;
        d->err = d->parse_err;
        if (d->rc == CQ_ERR_CANCELLED) forget_original(b->s, b->data_dir, d);
        else record_failure(b->s, b->kb_id, d, d->parse_err.msg[0] ? d->parse_err.msg : "extraction failed");
        goto out;
    }
    d->rc = write_doc(b->s, b->data_dir, b->kb_id, d, opt, &old, alone ? NULL : &b->pending, err);
    if (d->rc) intact = false;
out:
    if (d->rc) cq_err_prefix(err, "%s: ", d->filename);
    cq_doc_info_free(&old);
    return intact || alone;
}

/* Forgets what a rolled-back group's documents had added to FAISS, and their outcomes. */
static void group_undone(batch *b, size_t first, size_t end) {
    b->pending.n = 0;
    for (size_t i = first; i < end; i++) {
        ingest_doc *d = &b->docs[i];
        cq_err e2 = {0};
        if (d->written) cq_dense_forget(b->opt->dense, b->kb_id, d->clause_ids, d->st.n_clauses, &e2);
        d->written = false;
        free(d->clause_ids);
        d->clause_ids = NULL;
        d->rc = CQ_OK;
        memset(&d->err, 0, sizeof d->err);
        memset(&d->res, 0, sizeof d->res);
    }
}

/* Writes files [first, end) in one transaction. When a document fails part way, the group is rolled back and
 * written again one document a transaction, as cq_ingest_file does (rare: a full disk, a database error). */
static void write_group_store(batch *b, size_t first, size_t end) {
    cq_err gerr = {0};
    cq_status grc = cq_store_begin(b->s, &gerr);
    bool intact = true;
    for (size_t i = first; !grc && intact && i < end; i++) {
        /* A document of the same name or content may replace or delete a pending one: those go in first. */
        const ingest_doc *d = &b->docs[i];
        for (size_t k = 0; intact && !d->load_rc && k < b->pending.n; k++)
            if (!strcmp(b->pending.docs[k]->sha, d->sha) || !strcmp(b->pending.docs[k]->name, d->name))
                intact = flush_vectors(b->s, b->opt->dense, b->kb_id, &b->pending, &gerr) == CQ_OK;
        if (intact) intact = write_in_group(b, &b->docs[i], false);
    }
    if (!grc && intact) intact = flush_vectors(b->s, b->opt->dense, b->kb_id, &b->pending, &gerr) == CQ_OK;
    if (!grc && !intact) {
        cq_store_rollback(b->s);
        group_undone(b, first, end);
        for (size_t i = first; i < end; i++) write_in_group(b, &b->docs[i], true);
        return;
    }
    if (!grc) grc = cq_store_commit(b->s, &gerr);
    if (!grc) {
        cq_fault_point("after-document-commit"); /* the crash tests (core/fault.h): a group is in */
        return;
    }
    /* nothing of the group is in: every document fails with the reason, unless it could not be read */
    cq_store_rollback(b->s);
    group_undone(b, first, end);
    for (size_t i = first; i < end; i++) {
        ingest_doc *d = &b->docs[i];
        if (d->load_rc) {
            write_in_group(b, d, true);
            continue;
        }
        d->rc = grc;
        d->err = gerr;
        cq_err_prefix(&d->err, "%s: ", d->filename);
    }
}

/* The calling thread's CPU time, seconds. */
static double thread_cpu_seconds(void) {
    struct timespec t;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) ? 0 : (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Encodes and writes files [first, end). */
static void write_group(batch *b, size_t first, size_t end) {
    double t0 = cq_clock_seconds();
    if (b->model) encode_group(b, first, end);
    double t1 = cq_clock_seconds(), cpu1 = thread_cpu_seconds();
    write_group_store(b, first, end);
    b->write_s += cq_clock_seconds() - t1;
    b->write_cpu_s += thread_cpu_seconds() - cpu1;
    b->encode_s += t1 - t0;
}

/* Frees what the writer no longer needs of files [from, to) and lets the workers read further. */
static void consume(batch *b, size_t from, size_t to) {
    size_t bytes = 0;
    for (size_t i = from; i < to; i++) {
        bytes += b->docs[i].len;
        ingest_doc_free(&b->docs[i]);
    }
    pthread_mutex_lock(&b->mu);
    b->consumed = to;
    b->bytes_ahead -= bytes;
    pthread_cond_broadcast(&b->room_cv);
    pthread_mutex_unlock(&b->mu);
}

cq_status cq_ingest_files(cq_store *s, const char *data_dir, int64_t kb_id, const char *const *paths, size_t n,
                          const cq_ingest_options *opt, const cq_ingest_batch_options *bo, cq_err *err) {
    static const cq_ingest_options defaults = {0};
    if (!opt) opt = &defaults;
    if (opt->before_commit || opt->filename || opt->progress || opt->upload)
        return cq_err_set(err, CQ_ERR_INVALID, "a batch ingest takes no before_commit, filename, upload or progress "
                          "(its options' pages reports the pages read)");
    if (!n) return CQ_OK;
    int n_workers = bo && bo->n_workers > 0 ? bo->n_workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_workers < 1) n_workers = 1;
    if ((size_t)n_workers > n) n_workers = (int)n;
    batch b = {.s = s, .data_dir = data_dir, .kb_id = kb_id, .paths = paths, .n = n, .opt = opt, .bo = bo,
               .model = opt->dense ? cq_dense_model(opt->dense) : NULL,
               .window = 2 * GROUP_DOCS + (size_t)n_workers};
    b.docs = calloc(n, sizeof *b.docs);
    b.ready = calloc(n, sizeof *b.ready);
    pthread_t *threads = calloc((size_t)n_workers, sizeof *threads);
    if (!b.docs || !b.ready || !threads) {
        free(b.docs);
        free(b.ready);
        free(threads);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory for %zu files", n);
    }
    cq_err e2 = {0};
    cq_store_bulk(s, true, &e2); /* a group's pages stay in memory until its commit */
    pthread_mutex_init(&b.mu, NULL);
    pthread_mutex_init(&b.report_mu, NULL);
    pthread_cond_init(&b.ready_cv, NULL);
    pthread_cond_init(&b.room_cv, NULL);
    int started = 0;
    while (started < n_workers && pthread_create(&threads[started], NULL, worker_main, &b) == 0) started++;
    cq_status rc = started ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "cannot start a worker thread");
    /* originals the workers kept for files that were then refused: removed at the end, when no worker can be
     * keeping the same content for a later file */
    size_t *refused = calloc(n, sizeof *refused), n_refused = 0;
    for (size_t first = 0; !rc && first < n;) {
        size_t end = first, bytes = 0;
        while (end < n && end - first < GROUP_DOCS) {
            wait_ready(&b, end);
            if (end > first && bytes + b.docs[end].len > GROUP_BYTES) break;
            bytes += b.docs[end].len;
            end++;
        }
        write_group(&b, first, end);
        for (size_t i = first; i < end; i++) {
            ingest_doc *d = &b.docs[i];
            d->res.seconds = d->seconds;
            if (bo && bo->done) {
                pthread_mutex_lock(&b.report_mu);
                bo->done(bo->user, i, paths[i], d->rc, &d->err, &d->res);
                pthread_mutex_unlock(&b.report_mu);
            }
            if (d->rc && d->original_new && refused) refused[n_refused++] = i;
        }
        consume(&b, first, end);
        first = end;
    }
    pthread_mutex_lock(&b.mu);
    b.next = n; /* workers stop (only on an error before the end) */
    pthread_cond_broadcast(&b.room_cv);
    pthread_mutex_unlock(&b.mu);
    for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
    CQ_DEBUG("ingest: %zu files, %d workers; the writer waited %.2f s for parsed files, encoded %.2f s, wrote %.2f s "
            "(CPU %.2f s; its CPU time in all %.2f s)", n, started, b.wait_s, b.encode_s, b.write_s, b.write_cpu_s,
            thread_cpu_seconds());
    for (size_t k = 0; k < n_refused; k++) forget_original(s, data_dir, &b.docs[refused[k]]); /* sha, format stay */
    free(threads);
    free(refused);
    for (size_t i = 0; i < n; i++) ingest_doc_free(&b.docs[i]);
    free(b.docs);
    free(b.ready);
    cq_store_bulk(s, false, &e2);
    pthread_mutex_destroy(&b.mu);
    pthread_mutex_destroy(&b.report_mu);
    pthread_cond_destroy(&b.ready_cv);
    pthread_cond_destroy(&b.room_cv);
    return rc;
}
