/* Knowledge bases, documents, pages and clauses (store/store.h), written once for SQLite and PostgreSQL on db/db.h
 * (issue 28). What really differs is elsewhere: the keyword index (SQLite's FTS5 table per KB, PostgreSQL's
 * postings written with a document's clauses) behind store/store_internal.h's cq_store_keyword_* interface, and the
 * statements of db/dialect.h (the KB list's byte order, the content an unfinished job still needs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/plain_reason.h"
#include "core/utf8.h"
#include "db/db.h"
#include "db/dialect.h"
#include "store/store.h"
#include "store/store_internal.h"

/* ---- knowledge bases ---------------------------------------------------------------------------------------- */

int cq_store_kb_name_valid(const char *name) {
    size_t n = strlen(name), i = 0, chars = 0;
    if (n == 0 || name[0] == '.') return 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(name + i, n - i, &len);
        if (cp == CQ_UTF8_REPLACEMENT) return 0;
        if (!(cq_is_latin_alnum(cp) || cq_is_cjk(cp) || cp == '-' || cp == '_' || cp == '.')) return 0;
        i += len;
        chars++;
    }
    return chars <= 64;
}

static cq_status name_check(const char *name, cq_err *err) {
    if (cq_store_kb_name_valid(name)) return CQ_OK;
    return cq_err_set(err, CQ_ERR_INVALID,
                      "invalid knowledge base name '%s': use 1-64 letters, digits, Chinese characters, '-', '_' or '.'",
                      name);
}

cq_status cq_store_kb_find(cq_store *s, const char *name, int64_t *kb_id, cq_err *err) {
    cq_status rc = cq_db_int(cq_store_conn(s), "find knowledge base", kb_id, err, "SELECT id FROM kbs WHERE name = ?1",
                             "t", name);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no knowledge base named '%s'", name) : rc;
}

cq_status cq_store_kb_create(cq_store *s, const char *name, int64_t *kb_id, cq_err *err) {
    if (name_check(name, err)) return CQ_ERR_INVALID;
    cq_db *db = cq_store_conn(s);
    /* The row and its keyword index come together or not at all. ON CONFLICT DO NOTHING: a name taken is an
     * answer, not an error that would abort the caller's transaction on PostgreSQL. */
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (rc) return rc;
    rc = cq_db_int(db, "create knowledge base", kb_id, err,
                   "INSERT INTO kbs(name, created_at) VALUES(?1, ?2) ON CONFLICT (name) DO NOTHING RETURNING id", "ti",
                   name, (int64_t)time(NULL));
    if (rc == CQ_ERR_NOT_FOUND) rc = cq_err_set(err, CQ_ERR_EXISTS, "knowledge base '%s' exists already", name);
    if (!rc) rc = cq_store_keyword_kb_add(s, *kb_id, err);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_kb_ensure(cq_store *s, const char *name, int64_t *kb_id, cq_err *err) {
    if (name_check(name, err)) return CQ_ERR_INVALID;
    cq_status rc = cq_store_kb_find(s, name, kb_id, err);
    if (rc != CQ_ERR_NOT_FOUND) return rc;
    rc = cq_store_kb_create(s, name, kb_id, err);
    /* another connection (another node) created it meanwhile: its row is the answer */
    return rc == CQ_ERR_EXISTS ? cq_store_kb_find(s, name, kb_id, err) : rc;
}

static bool kb_read(cq_db_stmt *st, void *elem) {
    cq_kb_info *k = elem;
    k->id = cq_db_col_int(st, 0);
    cq_db_col_copy(st, 1, k->name, sizeof k->name);
    k->created_at = cq_db_col_int(st, 2);
    k->n_documents = cq_db_col_int(st, 3);
    k->n_clauses = cq_db_col_int(st, 4);
    return true;
}

cq_status cq_store_kb_get(cq_store *s, int64_t kb_id, cq_kb_info *out, cq_err *err) {
    cq_status rc = cq_db_one(cq_store_conn(s), "find knowledge base", kb_read, out, sizeof *out, err,
                             "SELECT " CQ_DIALECT_KB_COLUMNS " FROM kbs k WHERE k.id = ?1", "i", kb_id);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no knowledge base with id %lld", (long long)kb_id) : rc;
}

cq_status cq_store_kb_list(cq_store *s, cq_kb_info **out, size_t *n, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    return cq_db_list(db, "list knowledge bases", sizeof **out, kb_read, NULL, (void **)out, n, err,
                      cq_db_dialect(db, CQ_SQL_KB_LIST), "");
}

cq_status cq_store_kb_delete(cq_store *s, int64_t kb_id, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (rc) return rc;
    rc = cq_store_keyword_kb_drop(s, kb_id, err);
    int64_t changed = 0;
    /* its documents, clauses, pages, jobs, vectors and conversations go by cascade */
    if (!rc) rc = cq_db_run(db, "delete knowledge base", &changed, err, "DELETE FROM kbs WHERE id = ?1", "i", kb_id);
    if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base with id %lld", (long long)kb_id);
    return cq_db_end(db, own, rc, err);
}

/* ---- documents ---------------------------------------------------------------------------------------------- */

#define DOC_COLUMNS                                                                                                 \
    "id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, status, error, quality, "     \
    "quality_reason, created_at"

void cq_doc_info_free(cq_doc_info *d) {
    if (!d) return;
    free(d->name);
    free(d->filename);
    free(d->format);
    free(d->title);
    free(d->error);
    free(d->quality_reason);
    memset(d, 0, sizeof *d);
}

void cq_doc_info_free_array(cq_doc_info *d, size_t n) {
    for (size_t i = 0; i < n; i++) cq_doc_info_free(&d[i]);
    free(d);
}

/* The row of st as a document: false (nothing left allocated) when out of memory. */
static bool doc_read(cq_db_stmt *st, void *elem) {
    cq_doc_info *d = elem;
    d->id = cq_db_col_int(st, 0);
    d->kb_id = cq_db_col_int(st, 1);
    d->name = cq_db_col_strdup(st, 2);
    d->filename = cq_db_col_strdup(st, 3);
    d->format = cq_db_col_strdup(st, 4);
    cq_db_col_copy(st, 5, d->sha256, sizeof d->sha256);
    d->size_bytes = cq_db_col_int(st, 6);
    d->title = cq_db_col_strdup(st, 7);
    d->n_pages = (int)cq_db_col_int(st, 8);
    d->n_clauses = (int)cq_db_col_int(st, 9);
    if (!cq_doc_state_parse(cq_db_col_text(st, 10), &d->state)) d->state = CQ_DOC_FAILED;
    d->error = cq_db_col_strdup(st, 11);
    d->quality = cq_db_col_double(st, 12);
    d->quality_reason = cq_db_col_strdup(st, 13);
    d->created_at = cq_db_col_int(st, 14);
    bool ok = d->name && d->filename && d->format && d->quality_reason &&
              (d->title || cq_db_col_null(st, 7)) && (d->error || cq_db_col_null(st, 11));
    if (!ok) cq_doc_info_free(d);
    return ok;
}

static void doc_drop(void *d) { cq_doc_info_free(d); }

/* One document of `where` (?1 an id, ?2 text when not NULL). */
static cq_status doc_one(cq_store *s, const char *where, int64_t id, const char *text, cq_doc_info *out,
                         cq_err *err) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " DOC_COLUMNS " FROM documents WHERE %s", where);
    cq_status rc = cq_db_one(cq_store_conn(s), "find document", doc_read, out, sizeof *out, err, sql, text ? "it" : "i",
                             id, text);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no such document") : rc;
}

cq_status cq_store_doc_by_hash(cq_store *s, int64_t kb_id, const char *sha256, cq_doc_info *out, cq_err *err) {
    return doc_one(s, "kb_id = ?1 AND sha256 = ?2", kb_id, sha256, out, err);
}

cq_status cq_store_doc_by_name(cq_store *s, int64_t kb_id, const char *name, cq_doc_info *out, cq_err *err) {
    return doc_one(s, "kb_id = ?1 AND name = ?2 ORDER BY (status = 'ready') DESC, id DESC LIMIT 1", kb_id, name, out,
                   err);
}

cq_status cq_store_doc_get(cq_store *s, int64_t doc_id, cq_doc_info *out, cq_err *err) {
    return doc_one(s, "id = ?1", doc_id, NULL, out, err);
}

cq_status cq_store_doc_list(cq_store *s, int64_t kb_id, cq_doc_info **out, size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "list documents", sizeof **out, doc_read, doc_drop, (void **)out, n, err,
                      "SELECT " DOC_COLUMNS " FROM documents WHERE kb_id = ?1 ORDER BY id", "i", kb_id);
}

cq_status cq_store_content_in_use(cq_store *s, const char *sha256, bool *in_use, cq_err *err) {
    *in_use = true; /* when unsure, the original is kept */
    cq_db *db = cq_store_conn(s);
    int64_t one;
    cq_status rc = cq_db_int(db, "look up content", &one, err, cq_db_dialect(db, CQ_SQL_CONTENT_IN_USE), "t", sha256);
    if (rc && rc != CQ_ERR_NOT_FOUND) return rc;
    *in_use = rc == CQ_OK;
    return CQ_OK;
}

cq_status cq_store_doc_create(cq_store *s, int64_t kb_id, const char *name, const char *filename, const char *format,
                              const char *sha256, int64_t size_bytes, int64_t *doc_id, cq_err *err) {
    cq_status rc = cq_db_int(cq_store_conn(s), "create document", doc_id, err,
                             "INSERT INTO documents(kb_id, name, filename, format, sha256, size_bytes, status, "
                             "created_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, 'processing', ?7) RETURNING id",
                             "ittttii", kb_id, name, filename, format, sha256, size_bytes, (int64_t)time(NULL));
    if (rc == CQ_ERR_EXISTS) /* (kb_id, sha256) */
        return cq_err_set(err, CQ_ERR_EXISTS, "the same file is already in this knowledge base");
    return rc;
}

cq_status cq_store_doc_finish(cq_store *s, int64_t doc_id, cq_doc_state state, const char *error, const char *title,
                              int n_pages, int n_clauses, double quality, const char *quality_reason, cq_err *err) {
    cq_status rc = cq_store_keyword_doc_flush(s, doc_id, err); /* its clauses, where they wait (PostgreSQL) */
    if (rc) return rc;
    char plain[256];
    error = cq_plain_reason_stored("document", (long long)doc_id, error, plain, sizeof plain);
    return cq_db_run(cq_store_conn(s), "finish document", NULL, err,
                     "UPDATE documents SET status = ?1, error = ?2, title = ?3, n_pages = ?4, n_clauses = ?5, "
                     "quality = ?6, quality_reason = ?7 WHERE id = ?8",
                     "tttiidti", cq_doc_state_name(state), error, title, (int64_t)n_pages, (int64_t)n_clauses, quality,
                     quality_reason ? quality_reason : "", doc_id);
}

cq_status cq_store_doc_delete(cq_store *s, int64_t doc_id, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t kb_id;
    cq_status rc =
        cq_db_int(db, "find document", &kb_id, err, "SELECT kb_id FROM documents WHERE id = ?1", "i", doc_id);
    if (rc == CQ_ERR_NOT_FOUND) {
        cq_store_keyword_doc_drop(s, 0, doc_id, NULL);
        return cq_err_set(err, rc, "no such document");
    }
    if (rc) return rc;
    bool own;
    rc = cq_db_begin_own(db, &own, err);
    if (rc) return rc;
    rc = cq_store_keyword_doc_drop(s, kb_id, doc_id, err);
    int64_t changed = 0;
    /* its pages, clauses, jobs, versions and vectors go by cascade */
    if (!rc) rc = cq_db_run(db, "delete document", &changed, err, "DELETE FROM documents WHERE id = ?1", "i", doc_id);
    if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no such document");
    return cq_db_end(db, own, rc, err);
}

/* ---- pages -------------------------------------------------------------------------------------------------- */

cq_status cq_store_page_add(cq_store *s, int64_t doc_id, const cq_store_page *p, cq_err *err) {
    return cq_db_run(cq_store_conn(s), "add page", NULL, err,
                     "INSERT INTO pages(doc_id, page_no, width, height, n_chars, quality, quality_reason) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                     "iiddidt", doc_id, (int64_t)p->page_no, (double)p->width, (double)p->height, (int64_t)p->n_chars,
                     p->quality, p->quality_reason ? p->quality_reason : "");
}

/* ---- clauses ------------------------------------------------------------------------------------------------ */

void cq_clause_row_free(cq_clause_row *c) {
    if (!c) return;
    free(c->doc_name);
    free(c->doc_title);
    free(c->label);
    free(c->label_key);
    free(c->path);
    free(c->text);
    free(c->boxes);
    memset(c, 0, sizeof *c);
}

#define CLAUSE_COLUMNS "c.id, c.doc_id, c.kind, c.label, c.label_key, c.path, c.text, c.page_first, c.page_last"

/* A row of CLAUSE_COLUMNS (cq_store_doc_clauses' statement). */
static bool clause_read(cq_db_stmt *st, void *row) {
    cq_clause_row *c = row;
    c->id = cq_db_col_int(st, 0);
    c->doc_id = cq_db_col_int(st, 1);
    c->kind = (int)cq_db_col_int(st, 2);
    c->label = cq_db_col_strdup(st, 3);
    c->label_key = cq_db_col_strdup(st, 4);
    c->path = cq_db_col_strdup(st, 5);
    c->text = cq_db_col_strdup(st, 6);
    c->page_first = (int)cq_db_col_int(st, 7);
    c->page_last = (int)cq_db_col_int(st, 8);
    if (c->path && c->text && (c->label || cq_db_col_null(st, 3)) && (c->label_key || cq_db_col_null(st, 4)))
        return true;
    cq_clause_row_free(c);
    return false;
}
static void clause_drop(void *row) { cq_clause_row_free(row); }

/* CLAUSE_COLUMNS, then its document's name and title and its boxes (cq_store_clause_get's statement). */
static bool clause_read_whole(cq_db_stmt *st, void *row) {
    cq_clause_row *c = row;
    if (!clause_read(st, c)) return false;
    c->doc_name = cq_db_col_strdup(st, 9);
    c->doc_title = cq_db_col_strdup(st, 10);
    size_t bytes = 0;
    const void *boxes = cq_db_col_blob(st, 11, &bytes);
    c->n_boxes = bytes / sizeof(cq_store_box);
    if (c->n_boxes && (c->boxes = malloc(c->n_boxes * sizeof(cq_store_box))))
        memcpy(c->boxes, boxes, c->n_boxes * sizeof(cq_store_box));
    if (c->doc_name && (c->doc_title || cq_db_col_null(st, 10)) && (c->boxes || !c->n_boxes)) return true;
    cq_clause_row_free(c);
    return false;
}

cq_status cq_store_clause_get(cq_store *s, int64_t clause_id, cq_clause_row *out, cq_err *err) {
    cq_status rc = cq_db_one(cq_store_conn(s), "get clause", clause_read_whole, out, sizeof *out, err,
                             "SELECT " CLAUSE_COLUMNS ", d.name, d.title, c.boxes FROM clauses c "
                             "JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1",
                             "i", clause_id);
    if (rc == CQ_ERR_NOT_FOUND) cq_err_set(err, rc, "no clause with id %lld", (long long)clause_id);
    return rc;
}

cq_status cq_store_doc_clauses(cq_store *s, int64_t doc_id, cq_clause_row **out, size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "read clauses", sizeof **out, clause_read, clause_drop, (void **)out, n, err,
                      "SELECT " CLAUSE_COLUMNS " FROM clauses c WHERE c.doc_id = ?1 ORDER BY c.ord", "i", doc_id);
}

/* ---- searching a document's clauses (the citation viewer) ------------------------------------------------- */

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Whether text holds q, ASCII letters in either case (a byte of a UTF-8 sequence is never an ASCII letter, so a
 * match never starts or ends inside a character that q does not). */
static bool holds_text(const char *text, const char *q) {
    size_t nq = strlen(q);
    for (const char *t = text; *t; t++) {
        size_t i = 0;
        while (i < nq && t[i] && ascii_lower(t[i]) == ascii_lower(q[i])) i++;
        if (i == nq) return true;
    }
    return nq == 0;
}

/* Keeps the rows of *rows whose text holds q, up to limit, dropping their text; frees the others. */
static void keep_holding(cq_clause_row *rows, size_t *n, const char *q, size_t limit, bool *more) {
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        bool hit = rows[i].text && holds_text(rows[i].text, q);
        if (hit && kept == limit) *more = true;
        if (hit && kept < limit) {
            free(rows[i].text);
            rows[i].text = NULL;
            rows[kept++] = rows[i];
        } else {
            cq_clause_row_free(&rows[i]);
        }
    }
    *n = kept;
}

cq_status cq_store_clause_search(cq_store *s, int64_t doc_id, const char *q, size_t limit, cq_clause_row **out,
                                 size_t *n, bool *more, cq_err *err) {
    *more = false;
    cq_status rc = cq_store_doc_clauses(s, doc_id, out, n, err); /* none (NULL, 0) when it fails */
    if (!rc) keep_holding(*out, n, q, limit, more);
    if (!rc && !*n) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

cq_status cq_store_doc_names(cq_store *s, const int64_t *ids, size_t n, char **names, cq_err *err) {
    for (size_t i = 0; i < n; i++) names[i] = NULL;
    cq_db *db = cq_store_conn(s);
    cq_status rc = CQ_OK;
    for (size_t at = 0; !rc && at < n; at += CQ_STORE_NAMES_BATCH) {
        size_t m = n - at < CQ_STORE_NAMES_BATCH ? n - at : CQ_STORE_NAMES_BATCH;
        cq_db_stmt *st = NULL;
        rc = cq_db_prepare_in(db, "read document names", &st, err, "SELECT id, name FROM documents WHERE id IN ",
                              ids + at, m, "", "");
        while (cq_db_next(st, "read document names", &rc, err)) {
            int64_t id = cq_db_col_int(st, 0);
            for (size_t i = at; !rc && i < at + m; i++)
                if (ids[i] == id && !names[i] && !(names[i] = cq_db_col_strdup(st, 1)))
                    rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
        cq_db_finalize(st);
    }
    for (size_t i = 0; rc && i < n; i++) {
        free(names[i]);
        names[i] = NULL;
    }
    return rc;
}
