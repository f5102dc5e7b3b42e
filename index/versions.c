/* Versions in the store (index/versions.h): each document's version row, groups, status on a day, corrections. */
#include "index/versions.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "index/store_internal.h"
#include "index/store_pg.h"
#include "index/versions_internal.h"
#include "index/versions_pg.h"

/* clauses.kind (reader/reader.h's cq_clause_kind; index/ does not include reader/) */
#define KIND_ARTICLE 1
#define KIND_PARAGRAPH 3

static cq_status db_err(sqlite3 *db, cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_DB, "versions: %s: %s", what, sqlite3_errmsg(db));
}

const char *cq_version_state_name(cq_version_state s) {
    switch (s) {
    case CQ_VERSION_IN_FORCE: return "in_force";
    case CQ_VERSION_SUPERSEDED: return "superseded";
    case CQ_VERSION_REPEALED: return "repealed";
    case CQ_VERSION_NOT_YET: return "not_yet_in_force";
    default: return "unknown";
    }
}

/* ---- analysis ----------------------------------------------------------------------------------------------- */

bool cq_version_header_take(cq_strbuf *header, int kind, const char *text, bool *first) {
    if (header->len >= CQ_VERSION_HEADER_MAX_BYTES) return false;
    /* the header is what comes before the first article; a document without articles: its first paragraph */
    if (kind == KIND_ARTICLE) return false;
    if (kind == KIND_PARAGRAPH && !*first) return false;
    cq_strbuf_printf(header, "%s\n", text ? text : "");
    *first = false;
    return true;
}

/* The header (the clauses before the first article) and the last CQ_VERSION_TAIL_CLAUSES clauses of a document. */
static cq_status read_texts(sqlite3 *db, int64_t doc_id, char **header, char **tail, cq_err *err) {
    cq_strbuf h = {0}, t = {0};
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT kind, text FROM clauses WHERE doc_id = ? ORDER BY ord", -1, &st, NULL) !=
        SQLITE_OK)
        return db_err(db, err, "read clauses");
    sqlite3_bind_int64(st, 1, doc_id);
    bool first = true;
    while (sqlite3_step(st) == SQLITE_ROW &&
           cq_version_header_take(&h, sqlite3_column_int(st, 0), (const char *)sqlite3_column_text(st, 1), &first)) {
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT text FROM (SELECT ord, text FROM clauses WHERE doc_id = ? ORDER BY ord DESC "
                               "LIMIT ?) ORDER BY ord",
                           -1, &st, NULL) != SQLITE_OK) {
        cq_strbuf_free(&h);
        return db_err(db, err, "read clauses");
    }
    sqlite3_bind_int64(st, 1, doc_id);
    sqlite3_bind_int(st, 2, CQ_VERSION_TAIL_CLAUSES);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(st, 0);
        cq_strbuf_printf(&t, "%s\n", text ? text : "");
    }
    sqlite3_finalize(st);
    if (h.failed || t.failed) {
        cq_strbuf_free(&h);
        cq_strbuf_free(&t);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    *header = cq_strbuf_take(&h);
    *tail = cq_strbuf_take(&t);
    return CQ_OK;
}

static cq_status exec_bind(sqlite3 *db, const char *sql, cq_err *err, const char *what, sqlite3_stmt **out) {
    if (sqlite3_prepare_v2(db, sql, -1, out, NULL) != SQLITE_OK) return db_err(db, err, what);
    return CQ_OK;
}

static cq_status step_done(sqlite3 *db, sqlite3_stmt *st, cq_err *err, const char *what) {
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_err(db, err, what);
}

cq_status cq_versions_analyse(cq_store *s, int64_t doc_id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_analyse(pg, doc_id, err);
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    if (exec_bind(db,
                  "SELECT d.kb_id, d.name, d.title, coalesce(v.by_user, 0), v.doc_id IS NOT NULL FROM documents d "
                  "LEFT JOIN doc_versions v ON v.doc_id = d.id WHERE d.id = ?",
                  err, "find document", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no document with id %lld", (long long)doc_id);
    }
    int64_t kb_id = sqlite3_column_int64(st, 0);
    char *name = strdup((const char *)sqlite3_column_text(st, 1));
    const unsigned char *title_col = sqlite3_column_text(st, 2);
    char *title = title_col ? strdup((const char *)title_col) : NULL;
    bool by_user = sqlite3_column_int(st, 3) != 0, has_row = sqlite3_column_int(st, 4) != 0;
    sqlite3_finalize(st);
    char *header = NULL, *tail = NULL;
    cq_status rc = name ? read_texts(db, doc_id, &header, &tail, err) : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_version_meta m;
    if (!rc) cq_version_meta_extract(name, title, header, tail, &m);
    free(name);
    free(title);
    free(header);
    free(tail);
    if (rc) return rc;
    /* A person's correction stands; only what the text repeals is refreshed. A new document's row is inserted
     * (the common case), an existing one updated: not INSERT OR REPLACE, nor an upsert, which open a statement
     * journal on this indexed table, and FTS5 writes its pending terms out as a new segment at every savepoint, so
     * each document's clauses became a segment of their own (about half the writing time of an ingest,
     * docs/PERF.md). */
    if (!by_user) {
        if (exec_bind(db,
                      has_row ? "UPDATE doc_versions SET doc_id = ?1, kb_id = ?2, key = ?3, label = ?4, "
                                "promulgated = ?5, effective = ?6, repealed = ?7, by_user = 0, analysed_at = ?8 "
                                "WHERE doc_id = ?1"
                              : "INSERT INTO doc_versions(doc_id, kb_id, key, label, promulgated, effective, "
                                "repealed, by_user, analysed_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
                      err, "write version", &st))
            return CQ_ERR_DB;
        sqlite3_bind_int64(st, 1, doc_id);
        sqlite3_bind_int64(st, 2, kb_id);
        sqlite3_bind_text(st, 3, m.key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 4, m.label, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 5, m.promulgated);
        sqlite3_bind_int(st, 6, m.effective);
        sqlite3_bind_int(st, 7, m.repealed);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)time(NULL));
        if ((rc = step_done(db, st, err, "write version"))) return rc;
    }
    if (exec_bind(db, "DELETE FROM doc_repeals WHERE doc_id = ?", err, "write repeals", &st)) return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    if ((rc = step_done(db, st, err, "write repeals"))) return rc;
    for (size_t i = 0; i < m.n_repeals; i++) {
        if (exec_bind(db, "INSERT OR IGNORE INTO doc_repeals(doc_id, kb_id, key) VALUES(?, ?, ?)", err,
                      "write repeals", &st))
            return CQ_ERR_DB;
        sqlite3_bind_int64(st, 1, doc_id);
        sqlite3_bind_int64(st, 2, kb_id);
        sqlite3_bind_text(st, 3, m.repeals[i], -1, SQLITE_TRANSIENT);
        if ((rc = step_done(db, st, err, "write repeals"))) return rc;
    }
    return CQ_OK;
}

static cq_status ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err);

/* What a connection has seen of its KBs: the documents (count, largest id) when every ready one had its version.
 * Retrieval asks for every question; the count and largest id come from an index, without reading the rows. */
#define SEEN_KBS 8
typedef struct {
    int64_t kb_id, n_docs, max_id;
} seen_kb;

static bool kb_documents(sqlite3 *db, int64_t kb_id, int64_t *n, int64_t *max_id) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*), coalesce(max(id), 0) FROM documents WHERE kb_id = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_int64(st, 1, kb_id);
    bool ok = sqlite3_step(st) == SQLITE_ROW;
    if (ok) {
        *n = sqlite3_column_int64(st, 0);
        *max_id = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return ok;
}

cq_status cq_versions_ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_ensure(pg, kb_id, redo, n_analysed, err);
    if (n_analysed) *n_analysed = 0;
    sqlite3 *db = cq_store_db(s);
    seen_kb **slot = (seen_kb **)cq_store_versions_slot(s);
    int64_t n_docs = -1, max_id = 0;
    if (!redo && kb_documents(db, kb_id, &n_docs, &max_id) && *slot)
        for (int i = 0; i < SEEN_KBS; i++)
            if ((*slot)[i].kb_id == kb_id && (*slot)[i].n_docs == n_docs && (*slot)[i].max_id == max_id) return CQ_OK;
    cq_status rc = ensure(s, kb_id, redo, n_analysed, err);
    if (!rc && n_docs >= 0 && (*slot || (*slot = calloc(SEEN_KBS, sizeof **slot)))) {
        int k = 0; /* its entry, else a free one, else the first */
        for (int i = SEEN_KBS - 1; i >= 0; i--)
            if ((*slot)[i].kb_id == kb_id || (*slot)[i].kb_id == 0) k = i;
        (*slot)[k] = (seen_kb){kb_id, n_docs, max_id};
    }
    return rc;
}

static cq_status ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err) {
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    const char *sql = redo ? "SELECT id FROM documents WHERE kb_id = ? AND status = 'ready' ORDER BY id"
                           : "SELECT d.id FROM documents d WHERE d.kb_id = ? AND d.status = 'ready' AND NOT EXISTS "
                             "(SELECT 1 FROM doc_versions v WHERE v.doc_id = d.id) ORDER BY d.id";
    if (exec_bind(db, sql, err, "find documents", &st)) return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, kb_id);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            int64_t *p = realloc(ids, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                free(ids);
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            ids = p;
        }
        ids[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (!n) return CQ_OK;
    bool own_tx = sqlite3_get_autocommit(db);
    cq_status rc = own_tx ? cq_store_begin(s, err) : CQ_OK;
    for (size_t i = 0; !rc && i < n; i++) rc = cq_versions_analyse(s, ids[i], err);
    if (own_tx) {
        if (rc) cq_store_rollback(s);
        else rc = cq_store_commit(s, err);
    }
    free(ids);
    if (!rc && n_analysed) *n_analysed = n;
    if (!rc && !redo) CQ_INFO("versions: %zu documents of KB %lld analysed", n, (long long)kb_id);
    return rc;
}

/* ---- groups ------------------------------------------------------------------------------------------------- */

void cq_version_group_free(cq_version_group *g) {
    if (!g) return;
    free(g->v);
    memset(g, 0, sizeof *g);
}

/* When a version starts to apply: its effective day, else its promulgation day (0: unknown, from always). */
static cq_date start_of(const cq_version_entry *e) { return e->effective ? e->effective : e->promulgated; }

static int cmp_entry(const void *a, const void *b) {
    const cq_version_entry *x = a, *y = b;
    cq_date sx = start_of(x), sy = start_of(y);
    if (sx != sy) return sx < sy ? -1 : 1;
    if (x->promulgated != y->promulgated) return x->promulgated < y->promulgated ? -1 : 1;
    return (x->doc_id > y->doc_id) - (x->doc_id < y->doc_id);
}

/* The day each regulation of a KB is repealed by another document of the KB (from the day that document takes
 * effect): (key, day) rows. */
#define REPEALS_SQL                                                                                                 \
    "SELECT r.key, min(CASE WHEN v.effective > 0 THEN v.effective ELSE v.promulgated END) FROM doc_repeals r "      \
    "JOIN doc_versions v ON v.doc_id = r.doc_id JOIN documents d ON d.id = r.doc_id "                              \
    "WHERE r.kb_id = ?1 AND d.status = 'ready' AND v.key <> r.key"

/* Orders a group's versions and settles the regulation's repeal: another document repeals it (repealed_by), or its
 * newest version says it was repealed. An older version that says so was replaced, not repealed. */
void cq_version_group_finish(cq_version_group *g, cq_date repealed_by) {
    if (g->n) qsort(g->v, g->n, sizeof *g->v, cmp_entry);
    g->repealed = repealed_by;
    if (g->n) {
        cq_date own = g->v[g->n - 1].repealed;
        if (own && (!g->repealed || own < g->repealed)) g->repealed = own;
    }
}

static cq_status load_group(sqlite3 *db, int64_t kb_id, const char *key, cq_version_group *g, cq_err *err) {
    memset(g, 0, sizeof *g);
    snprintf(g->key, sizeof g->key, "%s", key);
    sqlite3_stmt *st;
    if (exec_bind(db,
                  "SELECT v.doc_id, d.name, v.label, v.promulgated, v.effective, v.repealed, v.by_user FROM "
                  "doc_versions v JOIN documents d ON d.id = v.doc_id WHERE v.kb_id = ? AND v.key = ? AND "
                  "d.status = 'ready'",
                  err, "load group", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, kb_id);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (g->n == cap) {
            cap = cap ? cap * 2 : 4;
            cq_version_entry *p = realloc(g->v, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                cq_version_group_free(g);
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            g->v = p;
        }
        cq_version_entry *e = &g->v[g->n++];
        memset(e, 0, sizeof *e);
        e->doc_id = sqlite3_column_int64(st, 0);
        snprintf(e->name, sizeof e->name, "%s", (const char *)sqlite3_column_text(st, 1));
        snprintf(e->label, sizeof e->label, "%s", (const char *)sqlite3_column_text(st, 2));
        e->promulgated = sqlite3_column_int(st, 3);
        e->effective = sqlite3_column_int(st, 4);
        e->repealed = sqlite3_column_int(st, 5);
        e->by_user = sqlite3_column_int(st, 6) != 0;
    }
    sqlite3_finalize(st);
    if (exec_bind(db, REPEALS_SQL " AND r.key = ?2", err, "load repeals", &st)) {
        cq_version_group_free(g);
        return CQ_ERR_DB;
    }
    sqlite3_bind_int64(st, 1, kb_id);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
    cq_date repealed = 0;
    if (sqlite3_step(st) == SQLITE_ROW) repealed = sqlite3_column_int(st, 1);
    sqlite3_finalize(st);
    cq_version_group_finish(g, repealed);
    return CQ_OK;
}

cq_status cq_versions_group_of(cq_store *s, int64_t doc_id, cq_version_group *out, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_group_of(pg, doc_id, out, err);
    memset(out, 0, sizeof *out);
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    if (exec_bind(db, "SELECT kb_id, key FROM doc_versions WHERE doc_id = ?", err, "find version", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has no version information", (long long)doc_id);
    }
    int64_t kb_id = sqlite3_column_int64(st, 0);
    char key[CQ_VERSION_KEY_MAX];
    snprintf(key, sizeof key, "%s", (const char *)sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    cq_status rc = load_group(db, kb_id, key, out, err);
    if (rc) return rc;
    if (!key[0]) cq_version_group_alone(out, doc_id);
    return CQ_OK;
}

void cq_version_group_alone(cq_version_group *g, int64_t doc_id) {
    /* An empty key (a name with nothing left) groups nothing: the document stands alone. */
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].doc_id == doc_id) g->v[k++] = g->v[i];
    g->n = k;
}

int cq_version_group_pick(const cq_version_group *g, cq_date on, int version_year) {
    if (version_year) {
        int best = -1;
        for (size_t i = 0; i < g->n; i++) {
            cq_date d = g->v[i].promulgated ? g->v[i].promulgated : g->v[i].effective;
            if (d / 10000 == version_year) best = (int)i;
        }
        if (best < 0)
            for (size_t i = 0; i < g->n; i++)
                if (g->v[i].effective / 10000 == version_year) best = (int)i;
        return best;
    }
    int pick = -1;
    for (size_t i = 0; i < g->n; i++)
        if (start_of(&g->v[i]) <= on) pick = (int)i;
    /* copies of one version (the same day) count as one: the first of them stands for all */
    while (pick > 0 && start_of(&g->v[pick - 1]) == start_of(&g->v[pick])) pick--;
    return pick;
}

bool cq_version_group_prefers(const cq_version_group *g, int64_t doc_id, cq_date on, int version_year) {
    int pick = cq_version_group_pick(g, on, version_year);
    if (pick < 0) return true;
    const cq_version_entry *p = &g->v[pick];
    for (size_t i = 0; i < g->n; i++) {
        const cq_version_entry *e = &g->v[i];
        if (e->doc_id == doc_id) /* copies of one version share its days */
            return start_of(e) == start_of(p) && (!version_year || e->promulgated == p->promulgated);
    }
    return true;
}

static cq_version_state state_on(const cq_version_group *g, size_t i, cq_date on) {
    const cq_version_entry *e = &g->v[i];
    /* a repeal ends the versions that had begun by then; a later one of that name is a new regulation (the
     * 国家安全法 of 1993 was repealed by 反间谍法 in 2014, the 国家安全法 of 2015 is another law) */
    if (g->repealed && g->repealed <= on && start_of(e) < g->repealed) return CQ_VERSION_REPEALED;
    if (e->repealed && e->repealed <= on) return CQ_VERSION_REPEALED;
    if (start_of(e) > on) return CQ_VERSION_NOT_YET;
    for (size_t j = i + 1; j < g->n; j++)
        if (start_of(&g->v[j]) > start_of(e)) return start_of(&g->v[j]) <= on ? CQ_VERSION_SUPERSEDED : CQ_VERSION_IN_FORCE;
    return CQ_VERSION_IN_FORCE;
}

void cq_version_status_in(const cq_version_group *g, int64_t doc_id, cq_date on, cq_version_status *out) {
    memset(out, 0, sizeof *out);
    out->doc_id = doc_id;
    if (!on) on = cq_date_today();
    out->on = on;
    size_t i;
    for (i = 0; i < g->n && g->v[i].doc_id != doc_id; i++) {
    }
    if (i == g->n) return; /* CQ_VERSION_UNKNOWN */
    const cq_version_entry *e = &g->v[i];
    snprintf(out->key, sizeof out->key, "%s", g->key);
    snprintf(out->label, sizeof out->label, "%s", e->label);
    out->promulgated = e->promulgated;
    out->effective = e->effective;
    out->repealed = e->repealed ? e->repealed : g->repealed && start_of(e) < g->repealed ? g->repealed : 0;
    out->by_user = e->by_user;
    out->n_versions = (int)g->n;
    out->index = (int)i;
    out->state = state_on(g, i, on);
    cq_date today = cq_date_today();
    out->state_today = on == today ? out->state : state_on(g, i, today);
    for (size_t j = i; j-- > 0;)
        if (start_of(&g->v[j]) < start_of(e)) {
            out->previous = g->v[j];
            break;
        }
    for (size_t j = i + 1; j < g->n; j++)
        if (start_of(&g->v[j]) > start_of(e)) {
            out->next = g->v[j];
            break;
        }
    int cur = cq_version_group_pick(g, on, 0);
    if (cur >= 0 && state_on(g, (size_t)cur, on) == CQ_VERSION_IN_FORCE)
        out->current = start_of(&g->v[cur]) == start_of(e) ? *e : g->v[cur];
}

cq_status cq_version_status_from_group(cq_status rc, cq_version_group *g, int64_t doc_id, cq_date on,
                                       cq_version_status *out, cq_err *err) {
    if (rc == CQ_ERR_NOT_FOUND) { /* in no group: in force, alone */
        memset(out, 0, sizeof *out);
        out->doc_id = doc_id;
        out->on = on ? on : cq_date_today();
        cq_err_clear(err);
        return CQ_OK;
    }
    if (rc) return rc;
    cq_version_status_in(g, doc_id, on, out);
    cq_version_group_free(g);
    return CQ_OK;
}

cq_status cq_versions_status(cq_store *s, int64_t doc_id, cq_date on, cq_version_status *out, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_status(pg, doc_id, on, out, err);
    cq_version_group g;
    cq_status rc = cq_versions_group_of(s, doc_id, &g, err);
    return cq_version_status_from_group(rc, &g, doc_id, on, out, err);
}

/* ---- corrections -------------------------------------------------------------------------------------------- */

cq_status cq_version_edit_check(const cq_version_edit *e, cq_err *err) {
    if ((e->promulgated > 0 && !cq_date_valid(e->promulgated)) || (e->effective > 0 && !cq_date_valid(e->effective)) ||
        (e->repealed > 0 && !cq_date_valid(e->repealed)))
        return cq_err_set(err, CQ_ERR_INVALID, "dates are days written YYYY-MM-DD");
    return CQ_OK;
}

void cq_version_edit_key(const char *edit_key, int64_t doc_id, char key[CQ_VERSION_KEY_MAX]) {
    /* the group as a person names it: the same normalization as names get, so "公司法" joins 公司法(2018-10-26) */
    cq_version_title_key(edit_key, key, CQ_VERSION_KEY_MAX);
    if (edit_key[0] && !key[0]) snprintf(key, CQ_VERSION_KEY_MAX, "%s", edit_key);
    if (!edit_key[0]) snprintf(key, CQ_VERSION_KEY_MAX, "#%lld", (long long)doc_id); /* alone */
}

cq_status cq_versions_set(cq_store *s, int64_t doc_id, const cq_version_edit *e, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_set(pg, doc_id, e, err);
    sqlite3 *db = cq_store_db(s);
    /* a document never analysed gets its automatic row first, then the correction over it */
    sqlite3_stmt *st;
    if (exec_bind(db, "SELECT 1 FROM doc_versions WHERE doc_id = ?", err, "find version", &st)) return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    bool have = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    cq_status rc = have ? CQ_OK : cq_versions_analyse(s, doc_id, err);
    if (rc) return rc;
    if ((rc = cq_version_edit_check(e, err))) return rc;
    char key[CQ_VERSION_KEY_MAX] = "";
    if (e->key) cq_version_edit_key(e->key, doc_id, key);
    if (exec_bind(db,
                  "UPDATE doc_versions SET by_user = 1, key = coalesce(?2, key), label = coalesce(?3, label), "
                  "promulgated = CASE WHEN ?4 >= 0 THEN ?4 ELSE promulgated END, "
                  "effective = CASE WHEN ?5 >= 0 THEN ?5 ELSE effective END, "
                  "repealed = CASE WHEN ?6 >= 0 THEN ?6 ELSE repealed END WHERE doc_id = ?1",
                  err, "correct version", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    if (e->key) sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 2);
    if (e->label) sqlite3_bind_text(st, 3, e->label, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 3);
    sqlite3_bind_int(st, 4, e->promulgated);
    sqlite3_bind_int(st, 5, e->effective);
    sqlite3_bind_int(st, 6, e->repealed);
    return step_done(db, st, err, "correct version");
}

cq_status cq_versions_reset(cq_store *s, int64_t doc_id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_reset(pg, doc_id, err);
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    if (exec_bind(db, "UPDATE doc_versions SET by_user = 0 WHERE doc_id = ?", err, "reset version", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, doc_id);
    cq_status rc = step_done(db, st, err, "reset version");
    return rc ? rc : cq_versions_analyse(s, doc_id, err);
}

cq_status cq_versions_list(cq_store *s, int64_t kb_id, cq_version_group **out, size_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_list(pg, kb_id, out, n, err);
    *out = NULL;
    *n = 0;
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    if (exec_bind(db,
                  "SELECT v.key FROM doc_versions v JOIN documents d ON d.id = v.doc_id WHERE v.kb_id = ? AND "
                  "d.status = 'ready' AND v.key <> '' GROUP BY v.key HAVING count(*) > 1 ORDER BY v.key",
                  err, "list groups", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, kb_id);
    size_t cap = 0;
    cq_status rc = CQ_OK;
    char **keys = NULL;
    size_t n_keys = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (n_keys == cap) {
            cap = cap ? cap * 2 : 16;
            char **p = realloc(keys, cap * sizeof *p);
            if (!p) {
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
                break;
            }
            keys = p;
        }
        keys[n_keys] = strdup((const char *)sqlite3_column_text(st, 0));
        if (!keys[n_keys]) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else n_keys++;
    }
    sqlite3_finalize(st);
    if (!rc && n_keys) {
        *out = calloc(n_keys, sizeof **out);
        if (!*out) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && i < n_keys; i++) {
        rc = load_group(db, kb_id, keys[i], &(*out)[i], err);
        if (!rc) (*n)++;
    }
    for (size_t i = 0; i < n_keys; i++) free(keys[i]);
    free(keys);
    if (rc) {
        for (size_t i = 0; i < *n; i++) cq_version_group_free(&(*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- a whole KB ---------------------------------------------------------------------------------------------- */

static int cmp_keyed(const void *a, const void *b) {
    const cq_version_keyed *x = a, *y = b;
    int d = strcmp(x->key, y->key);
    return d ? d : (x->e.doc_id > y->e.doc_id) - (x->e.doc_id < y->e.doc_id);
}

static int cmp_status_doc(const void *a, const void *b) {
    const cq_version_status *x = a, *y = b;
    return (x->doc_id > y->doc_id) - (x->doc_id < y->doc_id);
}

cq_status cq_versions_statuses(cq_store *s, int64_t kb_id, cq_date on, cq_version_status **out, size_t *n,
                               cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_versions_statuses(pg, kb_id, on, out, n, err);
    *out = NULL;
    *n = 0;
    sqlite3 *db = cq_store_db(s);
    sqlite3_stmt *st;
    if (exec_bind(db,
                  "SELECT v.doc_id, d.name, v.label, v.promulgated, v.effective, v.repealed, v.by_user, v.key FROM "
                  "doc_versions v JOIN documents d ON d.id = v.doc_id WHERE v.kb_id = ? AND d.status = 'ready'",
                  err, "load versions", &st))
        return CQ_ERR_DB;
    sqlite3_bind_int64(st, 1, kb_id);
    cq_version_keyed *rows = NULL;
    size_t nr = 0, cap = 0;
    cq_status rc = CQ_OK;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (nr == cap) {
            cap = cap ? cap * 2 : 64;
            cq_version_keyed *p = realloc(rows, cap * sizeof *p);
            if (!p) {
                rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
                break;
            }
            rows = p;
        }
        cq_version_keyed *k = &rows[nr++];
        memset(k, 0, sizeof *k);
        k->e.doc_id = sqlite3_column_int64(st, 0);
        snprintf(k->e.name, sizeof k->e.name, "%s", (const char *)sqlite3_column_text(st, 1));
        snprintf(k->e.label, sizeof k->e.label, "%s", (const char *)sqlite3_column_text(st, 2));
        k->e.promulgated = sqlite3_column_int(st, 3);
        k->e.effective = sqlite3_column_int(st, 4);
        k->e.repealed = sqlite3_column_int(st, 5);
        k->e.by_user = sqlite3_column_int(st, 6) != 0;
        snprintf(k->key, sizeof k->key, "%s", (const char *)sqlite3_column_text(st, 7));
    }
    sqlite3_finalize(st);
    /* cross-document repeals, by key */
    cq_version_keyed *rep = NULL;
    size_t n_rep = 0, cap_rep = 0;
    if (!rc && exec_bind(db, REPEALS_SQL " GROUP BY r.key ORDER BY r.key", err, "load repeals", &st)) rc = CQ_ERR_DB;
    else if (!rc) {
        sqlite3_bind_int64(st, 1, kb_id);
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n_rep == cap_rep) {
                cap_rep = cap_rep ? cap_rep * 2 : 16;
                cq_version_keyed *p = realloc(rep, cap_rep * sizeof *p);
                if (!p) {
                    rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
                    break;
                }
                rep = p;
            }
            memset(&rep[n_rep], 0, sizeof rep[n_rep]);
            snprintf(rep[n_rep].key, sizeof rep[n_rep].key, "%s", (const char *)sqlite3_column_text(st, 0));
            rep[n_rep++].e.repealed = sqlite3_column_int(st, 1);
        }
        sqlite3_finalize(st);
    }
    if (!rc) rc = cq_versions_statuses_from(rows, nr, rep, n_rep, on, out, n, err);
    free(rows);
    free(rep);
    return rc;
}

cq_status cq_versions_statuses_from(cq_version_keyed *rows, size_t nr, const cq_version_keyed *rep, size_t n_rep,
                                    cq_date on, cq_version_status **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    if (!nr) return CQ_OK;
    for (size_t i = 0; i < nr; i++) /* an empty key stands alone */
        if (!rows[i].key[0]) snprintf(rows[i].key, sizeof rows[i].key, "#%lld", (long long)rows[i].e.doc_id);
    qsort(rows, nr, sizeof *rows, cmp_keyed);
    *out = calloc(nr, sizeof **out);
    cq_version_entry *v = malloc(nr * sizeof *v);
    cq_status rc = *out && v ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < nr;) {
        size_t j = i;
        while (j < nr && !strcmp(rows[j].key, rows[i].key)) v[j - i] = rows[j].e, j++;
        cq_version_group g = {.v = v, .n = j - i};
        snprintf(g.key, sizeof g.key, "%s", rows[i].key[0] == '#' ? "" : rows[i].key);
        cq_date by = 0;
        for (size_t r = 0; r < n_rep; r++)
            if (!strcmp(rep[r].key, rows[i].key)) by = rep[r].e.repealed;
        cq_version_group_finish(&g, by);
        for (size_t k = 0; k < g.n; k++) cq_version_status_in(&g, g.v[k].doc_id, on, &(*out)[(*n)++]);
        i = j;
    }
    free(v);
    if (!rc) qsort(*out, *n, sizeof **out, cmp_status_doc);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

const cq_version_status *cq_versions_find(const cq_version_status *v, size_t n, int64_t doc_id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].doc_id < doc_id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo].doc_id == doc_id ? &v[lo] : NULL;
}
