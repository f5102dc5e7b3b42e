#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "db/db.h"
#include "store/bm25.h"
#include "store/fts_cjk.h"
#include "store/store_internal.h"
#include "store/postings.h"
#include "store/schema.h"
#include "store/vectors.h"

/* A document's clauses on PostgreSQL, held until its finish (or the commit): the keyword index there holds one
 * postings list per token and document, so they are written together (store/postings.h). Each has its id
 * from the moment it is added, from a block reserved ahead (ids left over are never used: ids may have gaps). */
typedef struct {
    int64_t doc_id;
    char *label;
    cq_store_clause *clauses; /* deep copies */
    int64_t *ids;
    size_t n, cap, cap_ids;
    int64_t reserved[64];
    size_t n_reserved, next_reserved;
} pending_clauses;

/* The keyword index behind the store's rows (store/store_internal.h): what really differs between the two
 * databases, as a table of functions (NULL: nothing to do there); the store picks one when it opens. */
typedef struct keyword_index {
    bool takes_tokens; /* the clauses' tokens made ahead are replayed (cq_store_clause.text_tokens): FTS5's */
    cq_status (*clause_add)(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                            const cq_store_clause *c, int64_t *clause_id, cq_err *err);
    cq_status (*kb_add)(cq_store *s, int64_t kb_id, cq_err *err);
    cq_status (*kb_drop)(cq_store *s, int64_t kb_id, cq_err *err);
    cq_status (*doc_drop)(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err);
    cq_status (*flush)(cq_store *s, int64_t doc_id, cq_err *err); /* before a document's finish or the commit */
    void (*discard)(cq_store *s);                                   /* at a rollback */
    const char *bulk_on, *bulk_off; /* cq_store_bulk's settings */
    cq_status (*bm25)(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms, const int64_t *doc_ids,
                      size_t n_docs, size_t want, cq_bm25_hit *found, int64_t *doc_of, size_t *n, cq_err *err);
} keyword_index;

static const keyword_index fts5, postings; /* below */

struct cq_store {
    cq_db *conn;         /* the connection (db/db.h), SQLite's or PostgreSQL's */
    sqlite3 *db;         /* SQLite's handle of conn, NULL on PostgreSQL */
    const keyword_index *keyword; /* FTS5 tables (SQLite) or postings (PostgreSQL): below */
    pending_clauses pending; /* postings only */
    void *router_cache; /* search/router.c's, freed with router_free */
    void (*router_free)(void *cache);
    void *versions_seen; /* store/versions.c */
    void *bm25_cache;    /* store/bm25.c */
    /* cq_store_clause_add's statements, prepared once (preparing them took as long as the insert of a short
     * clause); the FTS one is for the table of fts_kb */
    cq_db_stmt *clause_insert, *fts_insert;
    int64_t fts_kb;
};

static void clause_statements_drop(cq_store *s) {
    cq_db_finalize(s->clause_insert);
    cq_db_finalize(s->fts_insert);
    s->clause_insert = s->fts_insert = NULL;
    s->fts_kb = 0;
}

void **cq_store_router_slot(cq_store *s, void (*free_fn)(void *cache)) {
    s->router_free = free_fn;
    return &s->router_cache;
}
void **cq_store_versions_slot(cq_store *s) { return &s->versions_seen; }
void **cq_store_bm25_slot(cq_store *s) { return &s->bm25_cache; }

/* SQLite's process-wide setup, once before its first use: no memory statistics. With them on (SQLite's default)
 * every allocation of every connection takes one global mutex, and a BM25 search allocates a lot: asks retrieving
 * at once on different connections then wait on each other (issue 15: on the 16-core H200 box, retrieval-only asks
 * gave about the same asks/s at 4 clients as at 1). Nothing here reads sqlite3_memory_used. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static void sqlite_setup(void) {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); /* SQLITE_MISUSE when something initialized SQLite before: harmless */
    sqlite3_initialize();
}

cq_status cq_store_open(const char *path, cq_store **out, cq_err *err) {
    *out = NULL;
    pthread_once(&sqlite_once, sqlite_setup);
    cq_store *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    /* db/db_sqlite.c: the file (0600 when new), WAL, the busy timeout, foreign keys */
    cq_status rc = cq_db_sqlite_open(path, &s->conn, err); /* its messages name the file already */
    const bool opened = !rc;
    s->db = cq_db_sqlite(s->conn);
    s->keyword = &fts5;
    if (!rc) rc = cq_fts_cjk_register(s->db, err);
    if (!rc) rc = cq_bm25_register(s->db, err);
    if (!rc) rc = cq_store_migrate(s->conn, err);
    if (rc && opened) cq_err_prefix(err, "database %s: ", path);
    if (rc) cq_store_close(s);
    else *out = s;
    return rc;
}

static void pending_drop(cq_store *s);

void cq_store_close(cq_store *s) {
    if (!s) return;
    pending_drop(s);
    free(s->pending.clauses);
    free(s->pending.ids);
    if (s->router_cache && s->router_free) s->router_free(s->router_cache);
    free(s->versions_seen);
    cq_bm25_cache_free(s->bm25_cache);
    clause_statements_drop(s);
    cq_db_close(s->conn);
    free(s);
}

sqlite3 *cq_store_db(cq_store *s) { return s->db; }
cq_db *cq_store_conn(cq_store *s) { return s->conn; }
cq_status cq_store_check(cq_store *s, cq_err *err) { return cq_db_check(s->conn, err); }

cq_status cq_store_open_uri(const char *where, cq_store **out, cq_err *err) {
    *out = NULL;
    if (!where || !*where) return cq_err_set(err, CQ_ERR_INVALID, "no store given");
    if (cq_db_where_kind(where) == CQ_DB_SQLITE) return cq_store_open(cq_db_where_path(where), out, err);
    cq_store *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    s->keyword = &postings;
    cq_status rc = cq_db_pg_open(where, &s->conn, err);
    if (!rc) rc = cq_store_migrate(s->conn, err);
    if (rc) {
        char shown[512];
        cq_db_where_redact(where, shown, sizeof shown);
        cq_err_prefix(err, "store %s: ", shown);
        cq_store_close(s);
    } else {
        *out = s;
    }
    return rc;
}

/* ---- clauses held for PostgreSQL ------------------------------------------------------------------------------ */

/* What pending_add copied of a clause. */
static void clause_copy_free(cq_store_clause *c) {
    free((char *)c->label);
    free((char *)c->label_key);
    free((char *)c->path);
    free((char *)c->text);
    free((cq_store_box *)c->boxes);
}

static void pending_drop(cq_store *s) {
    pending_clauses *p = &s->pending;
    for (size_t i = 0; i < p->n; i++) clause_copy_free(&p->clauses[i]);
    free(p->label);
    p->label = NULL;
    p->n = 0;
    p->doc_id = 0;
}

static cq_status pending_flush(cq_store *s, cq_err *err) {
    pending_clauses *p = &s->pending;
    if (!p->n) return CQ_OK;
    cq_status rc = cq_postings_doc_add_clauses(s->conn, p->doc_id, p->label, p->clauses, p->n, p->ids, NULL, err);
    pending_drop(s);
    return rc;
}

static char *dup_or_null(const char *v, bool *failed) {
    if (!v) return NULL;
    char *d = strdup(v);
    if (!d) *failed = true;
    return d;
}

/* Postings' clause_add: the clauses are held and written with their postings at the document's finish, the commit,
 * or when a clause of another document comes (store/postings.h). */
static cq_status pending_add(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                             const cq_store_clause *c, int64_t *clause_id, cq_err *err) {
    (void)kb_id;
    pending_clauses *p = &s->pending;
    if (p->n && p->doc_id != doc_id) {
        cq_status rc = pending_flush(s, err);
        if (rc) return rc;
    }
    if (p->next_reserved == p->n_reserved) {
        size_t want = sizeof p->reserved / sizeof p->reserved[0];
        cq_status rc = cq_postings_clause_ids(s->conn, want, p->reserved, err);
        if (rc) return rc;
        p->n_reserved = want;
        p->next_reserved = 0;
    }
    if (!cq_grow((void **)&p->clauses, &p->cap, p->n + 1, sizeof *p->clauses) ||
        !cq_grow((void **)&p->ids, &p->cap_ids, p->n + 1, sizeof *p->ids))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    bool failed = false;
    cq_store_clause copy = *c;
    copy.label = dup_or_null(c->label, &failed);
    copy.label_key = dup_or_null(c->label_key, &failed);
    copy.path = dup_or_null(c->path, &failed);
    copy.text = dup_or_null(c->text ? c->text : "", &failed);
    copy.boxes = NULL;
    if (c->n_boxes) {
        cq_store_box *b = malloc(c->n_boxes * sizeof *b);
        if (b) memcpy(b, c->boxes, c->n_boxes * sizeof *b);
        else failed = true;
        copy.boxes = b;
    }
    if (!p->n && !failed) p->label = dup_or_null(doc_label ? doc_label : "", &failed);
    if (failed) {
        clause_copy_free(&copy);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    p->doc_id = doc_id;
    p->clauses[p->n] = copy;
    p->ids[p->n] = p->reserved[p->next_reserved++];
    if (clause_id) *clause_id = p->ids[p->n];
    p->n++;
    return CQ_OK;
}

cq_status cq_store_begin(cq_store *s, cq_err *err) { return cq_db_begin(s->conn, err); }

cq_status cq_store_commit(cq_store *s, cq_err *err) {
    /* the clauses held for their postings, in this transaction */
    cq_status rc = s->keyword->flush ? s->keyword->flush(s, 0, err) : CQ_OK;
    if (rc) {
        cq_store_rollback(s);
        return rc;
    }
    return cq_db_commit(s->conn, err);
}

void cq_store_rollback(cq_store *s) {
    if (s->keyword->discard) s->keyword->discard(s);
    cq_db_rollback(s->conn);
}

cq_status cq_store_bulk(cq_store *s, bool on, cq_err *err) {
    const char *sql = on ? s->keyword->bulk_on : s->keyword->bulk_off;
    return sql ? cq_db_exec(s->conn, sql, err) : CQ_OK;
}

/* ---- the keyword index and clauses (SQLite: FTS5; PostgreSQL: clauses held for their postings) --------------- */

void cq_store_bind_clause(cq_db_stmt *st, int first, int64_t doc_id, const cq_store_clause *c) {
    cq_db_bind_int(st, first, doc_id);
    cq_db_bind_int(st, first + 1, c->ord);
    cq_db_bind_int(st, first + 2, c->kind);
    cq_db_bind_text(st, first + 3, c->label);
    cq_db_bind_text(st, first + 4, c->label_key);
    cq_db_bind_text(st, first + 5, c->path ? c->path : "");
    cq_db_bind_text(st, first + 6, c->text ? c->text : "");
    cq_db_bind_int(st, first + 7, c->page_first);
    cq_db_bind_int(st, first + 8, c->page_last);
    cq_db_bind_int(st, first + 9, c->start_off);
    cq_db_bind_int(st, first + 10, c->end_off);
    if (c->n_boxes) cq_db_bind_blob(st, first + 11, c->boxes, c->n_boxes * sizeof *c->boxes);
    else cq_db_bind_null(st, first + 11);
}

static cq_status fts5_clause_add(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                                const cq_store_clause *c, int64_t *clause_id, cq_err *err) {
    if (s->fts_insert && s->fts_kb != kb_id) {
        cq_db_finalize(s->fts_insert);
        s->fts_insert = NULL;
    }
    if (!s->clause_insert &&
        cq_db_prepare(s->conn,
                      "INSERT INTO clauses(doc_id, ord, kind, label, label_key, path, text, page_first, page_last, "
                      "start_off, end_off, boxes) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                      &s->clause_insert, err))
        return CQ_ERR_DB;
    if (!s->fts_insert) {
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO " CQ_FTS_TABLE_FMT "(rowid, title, path, body) VALUES(?1, ?2, ?3, ?4)",
                 (long long)kb_id);
        if (cq_db_prepare(s->conn, sql, &s->fts_insert, err)) return CQ_ERR_DB;
        s->fts_kb = kb_id;
    }
    cq_db_stmt *st = s->clause_insert;
    cq_store_bind_clause(st, 1, doc_id, c);
    int step = cq_db_step(st, "add clause", err);
    cq_db_reset(st);
    if (step < 0) return err->code;
    const int64_t id = sqlite3_last_insert_rowid(s->db); /* the clause's id (FTS5 is SQLite's own) */
    st = s->fts_insert;
    cq_db_bind_int(st, 1, id);
    cq_db_bind_text(st, 2, doc_label ? doc_label : "");
    cq_db_bind_text(st, 3, c->path ? c->path : "");
    cq_db_bind_text(st, 4, c->text);
    cq_fts_tokens_offer(c->text_tokens); /* the body's tokens, when the caller made them */
    step = cq_db_step(st, "index clause", err);
    cq_fts_tokens_offer(NULL);
    cq_db_reset(st);
    if (step < 0) return err->code;
    if (clause_id) *clause_id = id;
    return CQ_OK;
}

/* ---- the keyword index (store/store_internal.h): FTS5 tables or postings -------------------------------------- */

static cq_status fts5_kb_add(cq_store *s, int64_t kb_id, cq_err *err) {
    char sql[160];
    snprintf(sql, sizeof sql,
             "CREATE VIRTUAL TABLE IF NOT EXISTS " CQ_FTS_TABLE_FMT " USING fts5(title, path, body, tokenize='cjk')",
             (long long)kb_id);
    return cq_db_exec(s->conn, sql, err);
}

static cq_status fts5_kb_drop(cq_store *s, int64_t kb_id, cq_err *err) {
    clause_statements_drop(s); /* its FTS table goes */
    char sql[96];
    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS " CQ_FTS_TABLE_FMT, (long long)kb_id);
    return cq_db_exec(s->conn, sql, err);
}

static cq_status fts5_doc_drop(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err) {
    if (!kb_id) return CQ_OK;
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM " CQ_FTS_TABLE_FMT " WHERE rowid IN (SELECT id FROM clauses WHERE doc_id = ?1)",
             (long long)kb_id);
    return cq_db_run(s->conn, "delete index rows", NULL, err, sql, "i", doc_id);
}

static cq_status postings_doc_drop(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err) {
    (void)kb_id, (void)err;
    if (s->pending.doc_id == doc_id) pending_drop(s);
    return CQ_OK;
}

/* doc_id 0: whatever document's clauses are held */
static cq_status postings_flush(cq_store *s, int64_t doc_id, cq_err *err) {
    return !doc_id || s->pending.doc_id == doc_id ? pending_flush(s, err) : CQ_OK;
}

/* ---- keyword search: BM25 through either index ---- */

/* FTS5 (store/bm25.h): over the KB, or each document's rowid range in turn (a document's clauses are inserted
 * together, so their ids are consecutive). */
static cq_status fts5_bm25(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms,
                           const int64_t *doc_ids, size_t n_docs, size_t want, cq_bm25_hit *found, int64_t *doc_of,
                           size_t *n, cq_err *err) {
    *n = 0;
    cq_status rc = CQ_OK;
    if (!n_docs) { /* the hits' documents, as store/vectors.h reads them */
        rc = cq_bm25_top(s, kb_id, terms, n_terms, 1, 0, want, found, n, NULL, err);
        int64_t *ids = rc ? NULL : malloc((*n + 1) * sizeof *ids);
        if (!rc && !ids) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; ids && i < *n; i++) ids[i] = found[i].id;
        if (ids) rc = cq_store_clause_docs(s, ids, *n, doc_of, err);
        free(ids);
        return rc;
    }
    for (size_t i = 0; !rc && i < n_docs; i++) {
        int64_t range[2]; /* none: 1, 0 (empty) */
        size_t got = 0;
        rc = cq_db_ints(s->conn, "bm25", range, 2, err,
                        "SELECT coalesce(min(id), 1), coalesce(max(id), 0) FROM clauses WHERE doc_id = ?1", "i",
                        doc_ids[i]);
        if (!rc && range[0] <= range[1])
            rc = cq_bm25_top(s, kb_id, terms, n_terms, range[0], range[1], want, found + *n, &got, NULL, err);
        for (size_t j = 0; j < got; j++) doc_of[*n + j] = doc_ids[i];
        *n += got;
    }
    return rc;
}

/* Postings (store/postings.h): the same pools, the rows read once. */
static cq_status postings_bm25(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms,
                               const int64_t *doc_ids, size_t n_docs, size_t want, cq_bm25_hit *found,
                               int64_t *doc_of, size_t *n, cq_err *err) {
    *n = 0;
    cq_keyword_hit *hits = NULL;
    size_t got = 0;
    cq_status rc = cq_postings_bm25(s->conn, kb_id, terms, n_terms, doc_ids, n_docs, want, &hits, &got, err);
    for (size_t j = 0; !rc && j < got; j++) {
        found[*n] = (cq_bm25_hit){hits[j].clause_id, hits[j].score};
        doc_of[(*n)++] = hits[j].doc_id;
    }
    free(hits);
    return rc;
}

cq_status cq_store_keyword_bm25(cq_store *s, int64_t kb_id, const char *const *terms, size_t n_terms,
                                const int64_t *doc_ids, size_t n_docs, size_t want, cq_bm25_hit *found,
                                int64_t *doc_of, size_t *n, cq_err *err) {
    return s->keyword->bm25(s, kb_id, terms, n_terms, doc_ids, n_docs, want, found, doc_of, n, err);
}

static const keyword_index fts5 = {
    .bm25 = fts5_bm25,
    .takes_tokens = true,
    .clause_add = fts5_clause_add,
    .kb_add = fts5_kb_add,
    .kb_drop = fts5_kb_drop,
    .doc_drop = fts5_doc_drop,
    .bulk_on = "PRAGMA cache_size = -262144; PRAGMA temp_store = MEMORY",
    .bulk_off = "PRAGMA cache_size = -2000; PRAGMA temp_store = DEFAULT",
};

/* No kb_add (postings come with each document's clauses), no kb_drop (documents_postings_gone, a trigger, deletes
 * the postings with the documents). */
static const keyword_index postings = {
    .bm25 = postings_bm25,
    .clause_add = pending_add,
    .doc_drop = postings_doc_drop,
    .flush = postings_flush,
    .discard = pending_drop,
};

bool cq_store_keyword_takes_tokens(cq_store *s) { return s->keyword->takes_tokens; }

cq_status cq_store_clause_add(cq_store *s, int64_t kb_id, int64_t doc_id, const char *doc_label,
                              const cq_store_clause *c, int64_t *clause_id, cq_err *err) {
    return s->keyword->clause_add(s, kb_id, doc_id, doc_label, c, clause_id, err);
}

cq_status cq_store_keyword_kb_add(cq_store *s, int64_t kb_id, cq_err *err) {
    return s->keyword->kb_add ? s->keyword->kb_add(s, kb_id, err) : CQ_OK;
}

cq_status cq_store_keyword_kb_drop(cq_store *s, int64_t kb_id, cq_err *err) {
    return s->keyword->kb_drop ? s->keyword->kb_drop(s, kb_id, err) : CQ_OK;
}

cq_status cq_store_keyword_doc_drop(cq_store *s, int64_t kb_id, int64_t doc_id, cq_err *err) {
    return s->keyword->doc_drop(s, kb_id, doc_id, err);
}

cq_status cq_store_keyword_doc_flush(cq_store *s, int64_t doc_id, cq_err *err) {
    return doc_id && s->keyword->flush ? s->keyword->flush(s, doc_id, err) : CQ_OK;
}
