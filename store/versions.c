/* Versions in the store (store/versions.h): each document's version row, groups, status on a day, corrections.
 * Written once for SQLite and PostgreSQL on db/db.h (issue 28; it replaces versions_pg.c); the two statements that
 * differ are db/dialect.h's CQ_SQL_VERSION_INSERT and CQ_SQL_REPEAL_INSERT. */
#include "store/versions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "db/db.h"
#include "db/dialect.h"
#include "store/store_internal.h"

/* clauses.kind (reader/reader.h's cq_clause_kind; store/ does not include reader/) */
#define KIND_ARTICLE 1
#define KIND_PARAGRAPH 3

#define CQ_VERSION_HEADER_MAX_BYTES 6000 /* the header (preamble clauses) read for dates */
#define CQ_VERSION_TAIL_CLAUSES 3        /* the last articles read for 施行 and 废止 */

/* A KB's version rows with their keys (an empty key stands alone) and the day another document repeals their
 * regulation (0: none). */
typedef struct {
    char key[CQ_VERSION_KEY_MAX];
    cq_version_entry e;
    cq_date repealed_by;
} cq_version_keyed;

const char *cq_version_state_name(cq_version_state s) {
    static const char *const names[] = {"unknown", "in_force", "superseded", "repealed", "not_yet_in_force"};
    return s > CQ_VERSION_UNKNOWN && s <= CQ_VERSION_NOT_YET ? names[s] : "unknown";
}

/* ---- analysis ----------------------------------------------------------------------------------------------- */

/* Feeds a document's clauses in order into its header: the clauses before the first article; a document without
 * articles: its first paragraph. Returns false once the header is complete (stop feeding). */
static bool header_take(cq_strbuf *header, int kind, const char *text, bool *first) {
    if (header->len >= CQ_VERSION_HEADER_MAX_BYTES || kind == KIND_ARTICLE || (kind == KIND_PARAGRAPH && !*first))
        return false;
    cq_strbuf_printf(header, "%s\n", text ? text : "");
    *first = false;
    return true;
}

/* The header (the clauses before the first article) and the last CQ_VERSION_TAIL_CLAUSES clauses of a document
 * whose clauses are c[0..n), in order. */
static cq_status texts_of(const cq_version_clause *c, size_t n, char **header, char **tail, cq_err *err) {
    cq_strbuf h = {0}, t = {0};
    bool first = true;
    size_t i = 0;
    while (i < n && header_take(&h, c[i].kind, c[i].text, &first)) i++;
    for (i = n > CQ_VERSION_TAIL_CLAUSES ? n - CQ_VERSION_TAIL_CLAUSES : 0; i < n; i++)
        cq_strbuf_printf(&t, "%s\n", c[i].text ? c[i].text : "");
    *header = cq_strbuf_finish(&h); /* the caller frees both, whatever the outcome */
    *tail = cq_strbuf_finish(&t);
    return *header && *tail ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
}

static bool clause_read(cq_db_stmt *st, void *elem) {
    cq_version_clause *c = elem;
    c->kind = (int)cq_db_col_int(st, 0);
    return (c->text = cq_db_col_strdup(st, 1)) != NULL;
}

static void clause_drop(void *elem) { free((void *)((cq_version_clause *)elem)->text); }

/* The document's KB, name and title, and whether its version row exists and is a person's. */
static cq_status read_document(cq_db *db, int64_t doc_id, int64_t *kb_id, char **name, char **title, bool *by_user,
                               bool *has_row, cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_query(db, "versions: find document", &st, err,
                    "SELECT d.kb_id, d.name, d.title, CASE WHEN v.by_user THEN 1 ELSE 0 END, v.doc_id IS NOT NULL "
                    "FROM documents d LEFT JOIN doc_versions v ON v.doc_id = d.id WHERE d.id = ?1", "i", doc_id))
        return err->code;
    cq_status rc = cq_db_row(st, "versions: find document", err);
    if (rc == CQ_ERR_NOT_FOUND) cq_err_set(err, rc, "no document with id %lld", (long long)doc_id);
    if (!rc) {
        *kb_id = cq_db_col_int(st, 0);
        *name = cq_db_col_strdup(st, 1);
        *title = cq_db_col_strdup(st, 2);
        *by_user = cq_db_col_int(st, 3) != 0;
        *has_row = cq_db_col_int(st, 4) != 0;
        if (!*name || (!*title && !cq_db_col_null(st, 2))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_db_finalize(st);
    return rc;
}

/* The automatic version row and the document's repeals, inside the caller's transaction or one of their own. A
 * person's correction stands (also one another node makes meanwhile: the writes skip a row by_user); what the text
 * repeals is always refreshed. A new document's row is inserted (the common case), an existing one updated: on
 * SQLite not an upsert, which opens a statement journal on this indexed table, and FTS5 writes its pending terms
 * out as a new segment at every savepoint, so each document's clauses became a segment of their own (about half
 * the writing time of an ingest, docs/PERF.md); PostgreSQL's insert is an upsert (another node may insert first). */
static cq_status write_version(cq_db *db, int64_t doc_id, int64_t kb_id, const cq_version_meta *m, bool by_user,
                               bool has_row, cq_err *err) {
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc && !by_user)
        rc = cq_db_run(db, "versions: write version", NULL, err,
                       has_row ? "UPDATE doc_versions SET kb_id = ?2, key = ?3, label = ?4, promulgated = ?5, "
                                 "effective = ?6, repealed = ?7, analysed_at = ?8 WHERE doc_id = ?1 AND NOT by_user"
                               : cq_db_dialect(db, CQ_SQL_VERSION_INSERT),
                       "iittiiii", doc_id, kb_id, m->key, m->label, (int64_t)m->promulgated, (int64_t)m->effective,
                       (int64_t)m->repealed, (int64_t)time(NULL));
    if (!rc) rc = cq_db_run(db, "versions: write repeals", NULL, err, "DELETE FROM doc_repeals WHERE doc_id = ?1", "i",
                            doc_id);
    for (size_t i = 0; !rc && i < m->n_repeals; i++)
        rc = cq_db_run(db, "versions: write repeals", NULL, err, cq_db_dialect(db, CQ_SQL_REPEAL_INSERT), "iit",
                       doc_id, kb_id, m->repeals[i]);
    return cq_db_end(db, own, rc, err);
}

/* clauses NULL: read from the store */
static cq_status analyse(cq_store *s, int64_t doc_id, const cq_version_clause *clauses, size_t n, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t kb_id = 0;
    char *name = NULL, *title = NULL, *header = NULL, *tail = NULL;
    bool by_user = false, has_row = false;
    cq_status rc = read_document(db, doc_id, &kb_id, &name, &title, &by_user, &has_row, err);
    cq_version_clause *read = NULL; /* the clauses as stored, when none are given */
    if (!rc && !clauses)
        rc = cq_db_list(db, "versions: read clauses", sizeof *read, clause_read, clause_drop, (void **)&read, &n, err,
                        "SELECT kind, text FROM clauses WHERE doc_id = ?1 ORDER BY ord", "i", doc_id);
    if (!rc) rc = texts_of(clauses ? clauses : read, n, &header, &tail, err);
    for (size_t i = 0; read && i < n; i++) clause_drop(&read[i]);
    free(read);
    cq_version_meta m;
    if (!rc) cq_version_meta_extract(name, title, header, tail, &m);
    free(name);
    free(title);
    free(header);
    free(tail);
    return rc ? rc : write_version(db, doc_id, kb_id, &m, by_user, has_row, err);
}

cq_status cq_versions_analyse(cq_store *s, int64_t doc_id, cq_err *err) { return analyse(s, doc_id, NULL, 0, err); }

cq_status cq_versions_analyse_clauses(cq_store *s, int64_t doc_id, const cq_version_clause *clauses, size_t n,
                                      cq_err *err) {
    static const cq_version_clause none;
    return analyse(s, doc_id, clauses ? clauses : &none, clauses ? n : 0, err);
}

static cq_status ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    const char *sql = redo ? "SELECT id FROM documents WHERE kb_id = ?1 AND status = 'ready' ORDER BY id"
                           : "SELECT d.id FROM documents d WHERE d.kb_id = ?1 AND d.status = 'ready' AND NOT EXISTS "
                             "(SELECT 1 FROM doc_versions v WHERE v.doc_id = d.id) ORDER BY d.id";
    int64_t *ids;
    size_t n;
    cq_status rc = cq_db_ids(db, "versions: find documents", &ids, &n, err, sql, "i", kb_id);
    if (!rc && n) {
        bool own;
        rc = cq_db_begin_own(db, &own, err);
        for (size_t i = 0; !rc && i < n; i++) {
            rc = cq_versions_analyse(s, ids[i], err);
            /* deleted by another node since the list was read: nothing to analyse */
            if (rc == CQ_ERR_NOT_FOUND) {
                cq_err_clear(err);
                rc = CQ_OK;
            }
        }
        rc = cq_db_end(db, own, rc, err);
    }
    free(ids);
    if (!rc && n_analysed) *n_analysed = n;
    if (!rc && n && !redo) CQ_INFO("versions: %zu documents of KB %lld analysed", n, (long long)kb_id);
    return rc;
}

/* What a connection has seen of its KBs: the documents (count, largest id) when every ready one had its version.
 * Retrieval asks for every question; the count and largest id come from an index, without reading the rows. SQLite
 * only: on PostgreSQL other nodes write too (a document of theirs may turn ready without changing the count), so
 * the database is asked every time (one NOT EXISTS query a question). */
#define SEEN_KBS 8
typedef struct {
    int64_t kb_id, n_docs, max_id;
} seen_kb;

cq_status cq_versions_ensure(cq_store *s, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err) {
    if (n_analysed) *n_analysed = 0;
    seen_kb **slot = (seen_kb **)cq_store_versions_slot(s);
    cq_db *db = cq_store_conn(s);
    int64_t docs[2] = {0, 0}; /* the KB's documents: count, largest id */
    cq_err ignored = {0};
    const bool counted = !redo && cq_db_kind_of(db) == CQ_DB_SQLITE &&
                         !cq_db_ints(db, "versions: count documents", docs, 2, &ignored,
                                     "SELECT count(*), coalesce(max(id), 0) FROM documents WHERE kb_id = ?1", "i",
                                     kb_id);
    for (int i = 0; counted && *slot && i < SEEN_KBS; i++)
        if ((*slot)[i].kb_id == kb_id && (*slot)[i].n_docs == docs[0] && (*slot)[i].max_id == docs[1]) return CQ_OK;
    cq_status rc = ensure(s, kb_id, redo, n_analysed, err);
    if (!rc && counted && (*slot || (*slot = calloc(SEEN_KBS, sizeof **slot)))) {
        int k = 0; /* its entry, else a free one, else the first */
        for (int i = SEEN_KBS - 1; i >= 0; i--)
            if ((*slot)[i].kb_id == kb_id || (*slot)[i].kb_id == 0) k = i;
        (*slot)[k] = (seen_kb){kb_id, docs[0], docs[1]};
    }
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
 * effect): (key, day) rows, joined to the versions as `rep`. */
#define REPEALS_SQL                                                                                                 \
    "SELECT r.key AS key, min(CASE WHEN v.effective > 0 THEN v.effective ELSE v.promulgated END) AS day "          \
    "FROM doc_repeals r "                                                                                           \
    "JOIN doc_versions v ON v.doc_id = r.doc_id JOIN documents d ON d.id = r.doc_id "                              \
    "WHERE r.kb_id = ?1 AND d.status = 'ready' AND v.key <> r.key"

/* Orders a group's versions and settles the regulation's repeal: another document repeals it (repealed_by), or its
 * newest version says it was repealed. An older version that says so was replaced, not repealed. */
static void cq_version_group_finish(cq_version_group *g, cq_date repealed_by) {
    if (g->n) qsort(g->v, g->n, sizeof *g->v, cmp_entry);
    g->repealed = repealed_by;
    if (g->n) {
        cq_date own = g->v[g->n - 1].repealed;
        if (own && (!g->repealed || own < g->repealed)) g->repealed = own;
    }
}

#define ENTRY_COLUMNS "v.doc_id, d.name, v.label, v.promulgated, v.effective, v.repealed, v.by_user"

static void read_entry(cq_db_stmt *st, cq_version_entry *e) {
    memset(e, 0, sizeof *e);
    e->doc_id = cq_db_col_int(st, 0);
    cq_db_col_copy(st, 1, e->name, sizeof e->name);
    cq_db_col_copy(st, 2, e->label, sizeof e->label);
    e->promulgated = (cq_date)cq_db_col_int(st, 3);
    e->effective = (cq_date)cq_db_col_int(st, 4);
    e->repealed = (cq_date)cq_db_col_int(st, 5);
    e->by_user = cq_db_col_int(st, 6) != 0;
}

static cq_status load_group(cq_db *db, int64_t kb_id, const char *key, cq_version_group *g, cq_err *err) {
    memset(g, 0, sizeof *g);
    snprintf(g->key, sizeof g->key, "%s", key);
    cq_db_stmt *st;
    /* one statement, one snapshot: the versions, each with the repeal that applies to them */
    if (cq_db_query(db, "versions: load group", &st, err,
                    "SELECT " ENTRY_COLUMNS ", rep.day FROM doc_versions v JOIN documents d ON d.id = v.doc_id "
                    "LEFT JOIN (" REPEALS_SQL " AND r.key = ?2 GROUP BY r.key) rep ON rep.key = v.key "
                    "WHERE v.kb_id = ?1 AND v.key = ?2 AND d.status = 'ready'",
                    "it", kb_id, key))
        return err->code;
    size_t cap = 0;
    cq_date repealed = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "versions: load group", &rc, err)) {
        if (!cq_grow((void **)&g->v, &cap, g->n + 1, sizeof *g->v)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        read_entry(st, &g->v[g->n++]);
        repealed = (cq_date)cq_db_col_int(st, 7);
    }
    cq_db_finalize(st);
    if (rc) cq_version_group_free(g);
    else cq_version_group_finish(g, repealed);
    return rc;
}

cq_status cq_versions_group_of(cq_store *s, int64_t doc_id, cq_version_group *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_db *db = cq_store_conn(s);
    cq_db_stmt *st;
    if (cq_db_query(db, "versions: find version", &st, err, "SELECT kb_id, key FROM doc_versions WHERE doc_id = ?1",
                    "i", doc_id))
        return err->code;
    cq_status rc = cq_db_row(st, "versions: find version", err);
    int64_t kb_id = rc ? 0 : cq_db_col_int(st, 0);
    char key[CQ_VERSION_KEY_MAX] = "";
    if (!rc) cq_db_col_copy(st, 1, key, sizeof key);
    cq_db_finalize(st);
    if (rc == CQ_ERR_NOT_FOUND)
        return cq_err_set(err, rc, "document %lld has no version information", (long long)doc_id);
    if (!rc) rc = load_group(db, kb_id, key, out, err);
    size_t k = 0; /* an empty key (a name with nothing left) groups nothing: the document stands alone */
    for (size_t i = 0; !rc && !key[0] && i < out->n; i++)
        if (out->v[i].doc_id == doc_id) out->v[k++] = out->v[i];
    if (!rc && !key[0]) out->n = k;
    return rc;
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
    size_t i = 0;
    while (i < g->n && g->v[i].doc_id != doc_id) i++;
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

cq_status cq_versions_status(cq_store *s, int64_t doc_id, cq_date on, cq_version_status *out, cq_err *err) {
    cq_version_group g;
    cq_status rc = cq_versions_group_of(s, doc_id, &g, err);
    if (rc == CQ_ERR_NOT_FOUND) cq_err_clear(err); /* in no group (g is empty): in force, alone */
    else if (rc) return rc;
    cq_version_status_in(&g, doc_id, on, out);
    cq_version_group_free(&g);
    return CQ_OK;
}

/* ---- corrections -------------------------------------------------------------------------------------------- */

static cq_status edit_check(const cq_version_edit *e, cq_err *err) {
    if ((e->promulgated > 0 && !cq_date_valid(e->promulgated)) || (e->effective > 0 && !cq_date_valid(e->effective)) ||
        (e->repealed > 0 && !cq_date_valid(e->repealed)))
        return cq_err_set(err, CQ_ERR_INVALID, "dates are days written YYYY-MM-DD");
    return CQ_OK;
}

static void edit_key_of(const char *edit_key, int64_t doc_id, char key[CQ_VERSION_KEY_MAX]) {
    /* the group as a person names it: the same normalization as names get, so "公司法" joins 公司法(2018-10-26) */
    cq_version_title_key(edit_key, key, CQ_VERSION_KEY_MAX);
    if (edit_key[0] && !key[0]) snprintf(key, CQ_VERSION_KEY_MAX, "%s", edit_key);
    if (!edit_key[0]) snprintf(key, CQ_VERSION_KEY_MAX, "#%lld", (long long)doc_id); /* alone */
}

cq_status cq_versions_set(cq_store *s, int64_t doc_id, const cq_version_edit *e, cq_err *err) {
    cq_status rc = edit_check(e, err);
    if (rc) return rc;
    cq_db *db = cq_store_conn(s);
    bool own;
    rc = cq_db_begin_own(db, &own, err);
    /* a document never analysed gets its automatic row first, then the correction over it */
    int64_t one;
    if (!rc) rc = cq_db_int(db, "versions: find version", &one, err, "SELECT 1 FROM doc_versions WHERE doc_id = ?1", "i",
                            doc_id);
    if (rc == CQ_ERR_NOT_FOUND) rc = cq_versions_analyse(s, doc_id, err);
    char key[CQ_VERSION_KEY_MAX] = "";
    if (e->key) edit_key_of(e->key, doc_id, key);
    if (!rc)
        rc = cq_db_run(db, "versions: correct version", NULL, err,
                       "UPDATE doc_versions SET by_user = TRUE, key = coalesce(?2, key), label = coalesce(?3, label), "
                       "promulgated = CASE WHEN ?4 >= 0 THEN ?4 ELSE promulgated END, "
                       "effective = CASE WHEN ?5 >= 0 THEN ?5 ELSE effective END, "
                       "repealed = CASE WHEN ?6 >= 0 THEN ?6 ELSE repealed END WHERE doc_id = ?1",
                       "ittiii", doc_id, e->key ? key : NULL, e->label, (int64_t)e->promulgated,
                       (int64_t)e->effective, (int64_t)e->repealed);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_versions_reset(cq_store *s, int64_t doc_id, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc)
        rc = cq_db_run(db, "versions: reset version", NULL, err,
                       "UPDATE doc_versions SET by_user = FALSE WHERE doc_id = ?1", "i", doc_id);
    if (!rc) rc = cq_versions_analyse(s, doc_id, err);
    return cq_db_end(db, own, rc, err);
}

static bool key_read(cq_db_stmt *st, void *key) { return (*(char **)key = cq_db_col_strdup(st, 0)) != NULL; }
static void key_drop(void *key) { free(*(char **)key); }

cq_status cq_versions_list(cq_store *s, int64_t kb_id, cq_version_group **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db *db = cq_store_conn(s);
    char **keys;
    size_t n_keys;
    /* keys compare as bytes (COLLATE "C" on PostgreSQL): the same order on both */
    cq_status rc = cq_db_list(db, "versions: list groups", sizeof *keys, key_read, key_drop, (void **)&keys, &n_keys, err,
                              "SELECT v.key FROM doc_versions v JOIN documents d ON d.id = v.doc_id WHERE v.kb_id = ?1 "
                              "AND d.status = 'ready' AND v.key <> '' GROUP BY v.key HAVING count(*) > 1 ORDER BY v.key",
                              "i", kb_id);
    if (!rc && n_keys && !(*out = calloc(n_keys, sizeof **out))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
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

/* Every ready document's status on `on` from the KB's version rows (sorted in place), ordered by document id. */
static cq_status cq_versions_statuses_from(cq_version_keyed *rows, size_t nr, cq_date on, cq_version_status **out,
                                           size_t *n, cq_err *err) {
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
        for (; j < nr && !strcmp(rows[j].key, rows[i].key); j++) v[j - i] = rows[j].e;
        cq_version_group g = {.v = v, .n = j - i};
        snprintf(g.key, sizeof g.key, "%s", rows[i].key[0] == '#' ? "" : rows[i].key);
        cq_version_group_finish(&g, rows[i].repealed_by);
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

static bool keyed_read(cq_db_stmt *st, void *elem) {
    cq_version_keyed *k = elem;
    read_entry(st, &k->e);
    cq_db_col_copy(st, 7, k->key, sizeof k->key);
    k->repealed_by = (cq_date)cq_db_col_int(st, 8);
    return true;
}

cq_status cq_versions_statuses(cq_store *s, int64_t kb_id, cq_date on, cq_version_status **out, size_t *n,
                               cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_version_keyed *rows;
    size_t nr;
    /* the versions and the cross-document repeals in one statement (one snapshot; an empty key stands alone) */
    cq_status rc = cq_db_list(cq_store_conn(s), "versions: load versions", sizeof *rows, keyed_read, NULL,
                              (void **)&rows, &nr, err,
                              "SELECT " ENTRY_COLUMNS ", v.key, rep.day FROM doc_versions v JOIN documents d "
                              "ON d.id = v.doc_id LEFT JOIN (" REPEALS_SQL " GROUP BY r.key) rep "
                              "ON rep.key = v.key AND v.key <> '' WHERE v.kb_id = ?1 AND d.status = 'ready'",
                              "i", kb_id);
    if (!rc) rc = cq_versions_statuses_from(rows, nr, on, out, n, err);
    free(rows);
    return rc;
}

const cq_version_status *cq_versions_find(const cq_version_status *v, size_t n, int64_t doc_id) {
    const cq_version_status key = {.doc_id = doc_id};
    return n ? bsearch(&key, v, n, sizeof *v, cmp_status_doc) : NULL;
}
