/* The store: SQLite (WAL) or PostgreSQL (cq_store_open_uri) is the truth for knowledge bases, documents, pages,
 * clauses, jobs and everything else store/ keeps; search/ reads it, and it calls nothing above it.
 *
 * Schema (SQLite's; store/schema.c holds the migrations of both databases side by side, PostgreSQL's adds the
 * keyword postings of store/postings.h and the vector change feed of store/vectors.h):
 *   kbs(id, name UNIQUE, created_at)
 *   documents(id, kb_id, name, filename, format, sha256, size_bytes, title, n_pages, n_clauses, status, error,
 *             quality, quality_reason, created_at)         status: cq_doc_state's names (below)
 *   pages(doc_id, page_no, width, height, n_chars, quality, quality_reason)
 *   clauses(id, doc_id, ord, kind, label, label_key, path, text, page_first, page_last, start_off, end_off, boxes)
 *   fts_kb<ID>  one FTS5(title, path, body) table per KB with the `cjk` tokenizer; rowid = clauses.id (a
 *               document's clauses have consecutive ids, so a rowid range limits a MATCH to one document)
 *   jobs(id, kb_id, doc_id, state, done, total, error, created_at, updated_at, filename, upload_path, size_bytes,
 *        replace_doc, error_code, attempts)           state: store/jobs.h
 *   api_keys (store/keys.h), conversations and conversation_turns (store/conversations.h)
 *   doc_versions(doc_id, kb_id, key, label, promulgated, effective, repealed, by_user, analysed_at),
 *   doc_repeals(doc_id, kb_id, key)   versions of a regulation (store/versions.h)
 *   settings(name, value, updated_at)
 * Ids (KBs, documents, clauses, jobs, keys, conversations and their turns) are never used twice, even after
 * deletion (AUTOINCREMENT), so an id a client kept names what it named or nothing. A new database file is made mode
 * 0600.
 * Deleting a document removes its pages, clauses, FTS rows and jobs in one transaction.
 *
 * A cq_store is one connection: use it from one thread at a time (open one per thread). */
#ifndef CQ_STORE_STORE_H
#define CQ_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct cq_store cq_store;
typedef struct sqlite3 sqlite3;

#include "store/schema.h" /* CQ_STORE_SCHEMA_VERSION: the migrations of both databases */

/* printf format of a KB's FTS table name, from its id (long long). */
#define CQ_FTS_TABLE_FMT "fts_kb%lld"

/* Opens (creating when absent) the database at path, sets WAL, registers the cjk tokenizer, migrates. */
cq_status cq_store_open(const char *path, cq_store **out, cq_err *err);

/* Where a store is (`--store`, `store =` of clauseqa.conf; docs/SCALE.md): "postgresql://…", "postgres://…" or a
 * libpq "key=value …" string is a PostgreSQL database (store/schema.h migrates it on open); "sqlite:PATH" or a
 * plain path is a SQLite file (cq_store_open). The PostgreSQL password belongs in ~/.pgpass or $PGPASSFILE; errors
 * name the store without it (db/db.h: cq_db_where_kind, cq_db_where_redact). */
cq_status cq_store_open_uri(const char *where, cq_store **out, cq_err *err);
void cq_store_close(cq_store *s);
sqlite3 *cq_store_db(cq_store *s); /* for store/ modules that run their own queries; NULL on PostgreSQL */
/* The store's connection through db/db.h, on either database: what the store/ modules write their SQL against. */
typedef struct cq_db cq_db;
cq_db *cq_store_conn(cq_store *s);
/* Whether the store's connection is usable, re-established if the server dropped it (db/db.h cq_db_check):
 * CQ_ERR_BUSY with reason "store_unreachable" and retry_after_s while a PostgreSQL server is away. */
cq_status cq_store_check(cq_store *s, cq_err *err);

cq_status cq_store_begin(cq_store *s, cq_err *err);
cq_status cq_store_commit(cq_store *s, cq_err *err);
void cq_store_rollback(cq_store *s);
/* Bulk writing on this connection (SQLite; nothing on PostgreSQL): a page cache of 256 MiB (a transaction larger
 * than the cache spills pages to the WAL as it goes and writes many of them again) and temporary files in memory
 * (statement journals). off: SQLite's defaults again. */
cq_status cq_store_bulk(cq_store *s, bool on, cq_err *err);

/* ---- knowledge bases ---- */
typedef struct {
    int64_t id;
    char name[128];
    int64_t n_documents;
    int64_t n_clauses;
    int64_t created_at;
} cq_kb_info;

/* Valid KB names: 1-64 characters of letters, digits, CJK, '-', '_', '.'; not starting with '.'. */
int cq_store_kb_name_valid(const char *name);
cq_status cq_store_kb_create(cq_store *s, const char *name, int64_t *kb_id, cq_err *err); /* EXISTS if taken */
cq_status cq_store_kb_ensure(cq_store *s, const char *name, int64_t *kb_id, cq_err *err); /* create or find */
cq_status cq_store_kb_find(cq_store *s, const char *name, int64_t *kb_id, cq_err *err);   /* NOT_FOUND */
cq_status cq_store_kb_get(cq_store *s, int64_t kb_id, cq_kb_info *out, cq_err *err);      /* NOT_FOUND */
cq_status cq_store_kb_list(cq_store *s, cq_kb_info **out, size_t *n, cq_err *err);
cq_status cq_store_kb_delete(cq_store *s, int64_t kb_id, cq_err *err);

/* ---- documents ---- */

/* A document's state. The database keeps its name (documents.status; the API's JSON says the same word): the names
 * are mapped here and nowhere else (store/states.c, one table with the jobs' states). */
typedef enum {
    CQ_DOC_PROCESSING, /* created, its clauses going in */
    CQ_DOC_READY,
    CQ_DOC_FAILED,
} cq_doc_state;
const char *cq_doc_state_name(cq_doc_state state);            /* "processing", "ready", "failed" ("unknown") */
bool cq_doc_state_parse(const char *name, cq_doc_state *out); /* false: no state has that name */

typedef struct {
    int64_t id, kb_id;
    char *name;      /* file name without extension: the name citations and evaluation use */
    char *filename;  /* as uploaded */
    char *format;    /* a reader/formats.c name: pdf | docx | html | md | txt */
    char sha256[65];
    int64_t size_bytes;
    char *title;     /* the document's title (from the text), or NULL */
    int n_pages, n_clauses;
    cq_doc_state state; /* a name the store does not know reads as CQ_DOC_FAILED */
    char *error;     /* why it failed, or NULL */
    double quality;
    char *quality_reason;
    int64_t created_at;
} cq_doc_info;

void cq_doc_info_free(cq_doc_info *d);
void cq_doc_info_free_array(cq_doc_info *d, size_t n);

/* Finds a document of the KB by content hash or by name: NOT_FOUND when none. */
cq_status cq_store_doc_by_hash(cq_store *s, int64_t kb_id, const char *sha256, cq_doc_info *out, cq_err *err);
cq_status cq_store_doc_by_name(cq_store *s, int64_t kb_id, const char *name, cq_doc_info *out, cq_err *err);
cq_status cq_store_doc_get(cq_store *s, int64_t doc_id, cq_doc_info *out, cq_err *err);
cq_status cq_store_doc_list(cq_store *s, int64_t kb_id, cq_doc_info **out, size_t *n, cq_err *err);
/* Whether a document of any KB (in any state) has content sha256: its stored original is still needed. */
cq_status cq_store_content_in_use(cq_store *s, const char *sha256, bool *in_use, cq_err *err);

/* Creates the row (CQ_DOC_PROCESSING). */
cq_status cq_store_doc_create(cq_store *s, int64_t kb_id, const char *name, const char *filename, const char *format,
                              const char *sha256, int64_t size_bytes, int64_t *doc_id, cq_err *err);

typedef struct {
    int page_no;
    float width, height;
    int n_chars;
    double quality;
    const char *quality_reason;
} cq_store_page;
cq_status cq_store_page_add(cq_store *s, int64_t doc_id, const cq_store_page *p, cq_err *err);

typedef struct {
    float x0, y0, x1, y1;
    int32_t page_no;
} cq_store_box;

typedef struct {
    int ord;                /* order in the document */
    int kind;               /* cq_clause_kind of reader/reader.h */
    const char *label, *label_key, *path, *text;
    int page_first, page_last;
    uint32_t start_off, end_off;
    const cq_store_box *boxes;
    size_t n_boxes;
    const struct cq_fts_tokens *text_tokens; /* text's FTS tokens made ahead (store/fts_cjk.h), or NULL (SQLite) */
} cq_store_clause;
/* doc_label: what the FTS title column indexes for this document (its title and name). */
/* On PostgreSQL the clauses of a document are held in the store (their ids given at once) and written together at
 * cq_store_doc_finish of that document, or at cq_store_commit, or when a clause of another document comes;
 * cq_store_rollback and cq_store_doc_delete drop them. */
cq_status cq_store_clause_add(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                              const cq_store_clause *c, int64_t *clause_id, cq_err *err);
/* Whether the store's keyword index takes a clause's tokens made ahead (text_tokens: SQLite's FTS5 replays them);
 * PostgreSQL's postings are built from the text. */
bool cq_store_keyword_takes_tokens(cq_store *s);
/* BM25 through the keyword index, either one (FTS5's bm25() ranking and scores, bit for bit): KB kb_id's clauses for
 * terms[0..n_terms) OR-ed (each a phrase); n_docs == 0: the best `want` of the KB; else the best `want` of each of
 * doc_ids[0..n_docs) in turn. Hits into found (room for want × max(n_docs, 1)), each one's document into doc_of,
 * *n in all; scores larger is better (store/bm25.h cq_bm25_hit). */
typedef struct cq_bm25_hit cq_bm25_hit;
cq_status cq_store_keyword_bm25(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms,
                                const int64_t *doc_ids, size_t n_docs, size_t want, cq_bm25_hit *found,
                                int64_t *doc_of, size_t *n, cq_err *err);

/* Marks the document ready (or failed with error) and records its summary. */
cq_status cq_store_doc_finish(cq_store *s, int64_t doc_id, cq_doc_state state, const char *error, const char *title,
                              int n_pages, int n_clauses, double quality, const char *quality_reason, cq_err *err);

/* Removes the document and everything derived from it, in one transaction. */
cq_status cq_store_doc_delete(cq_store *s, int64_t doc_id, cq_err *err);

/* ---- clauses ---- */
typedef struct {
    int64_t id, doc_id;
    char *doc_name, *doc_title;
    int kind;
    char *label, *label_key, *path, *text;
    int page_first, page_last;
    cq_store_box *boxes;
    size_t n_boxes;
} cq_clause_row;

void cq_clause_row_free(cq_clause_row *c);
cq_status cq_store_clause_get(cq_store *s, int64_t clause_id, cq_clause_row *out, cq_err *err);
/* names[i] (malloc'd) of documents ids[0..n), NULL for an id with no document: one statement per
 * CQ_STORE_NAMES_BATCH ids. */
#define CQ_STORE_NAMES_BATCH 500
cq_status cq_store_doc_names(cq_store *s, const int64_t *ids, size_t n, char **names, cq_err *err);
/* A document's clauses in order (id, doc_id, kind, label, label_key, path, text, pages; no document fields, no
 * boxes): *out malloc'd, each row freed with cq_clause_row_free; none for a document without clauses or none. */
cq_status cq_store_doc_clauses(cq_store *s, int64_t doc_id, cq_clause_row **out, size_t *n, cq_err *err);
/* The clauses of document doc_id whose text holds q (ASCII letters in either case; other bytes as they are), in the
 * document's order: at most limit of them (id, kind, label, path, page_first, page_last; no text, no boxes), and
 * *more when there were others. None is not an error (the document is looked up by the caller). */
cq_status cq_store_clause_search(cq_store *s, int64_t doc_id, const char *q, size_t limit, cq_clause_row **out,
                                 size_t *n, bool *more, cq_err *err);

#endif
