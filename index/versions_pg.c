/* Versions in the PostgreSQL store (versions_pg.h): the SQL of index/versions.c for index/store_pg.c's tables. */
#include "index/versions_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/strbuf.h"
#include "index/pg_rows.h"
#include "index/versions_internal.h"

#define ID_TEXT(buf, v) snprintf(buf, sizeof buf, "%lld", (long long)(v))

static void copy_text(const PGresult *r, int row, int col, char *out, size_t cap) {
    int len = PQgetlength(r, row, col);
    if ((size_t)len >= cap) len = (int)cap - 1;
    memcpy(out, PQgetvalue(r, row, col), (size_t)len);
    out[len] = 0;
}

/* The header and last clauses of a document, as versions.c's read_texts. */
static cq_status read_texts(PGconn *c, const char *doc, char **header, char **tail, cq_err *err) {
    const char *params[] = {doc};
    PGresult *r = cq_pgr_query(c, "SELECT kind, text FROM clauses WHERE doc_id = $1 ORDER BY ord", 1, params,
                               "versions: read clauses", err);
    if (!r) return CQ_ERR_DB;
    cq_strbuf h = {0}, t = {0};
    bool first = true;
    for (int i = 0, n = PQntuples(r); i < n && cq_version_header_take(&h, cq_pgr_int32(r, i, 0), PQgetvalue(r, i, 1),
                                                                        &first);
         i++) {
    }
    /* the last clauses in order: the rows are in order already */
    for (int n = PQntuples(r), i = n > CQ_VERSION_TAIL_CLAUSES ? n - CQ_VERSION_TAIL_CLAUSES : 0; i < n; i++)
        cq_strbuf_printf(&t, "%s\n", PQgetvalue(r, i, 1));
    PQclear(r);
    if (h.failed || t.failed) {
        cq_strbuf_free(&h);
        cq_strbuf_free(&t);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    *header = cq_strbuf_take(&h);
    *tail = cq_strbuf_take(&t);
    return CQ_OK;
}

/* A text[] literal of keys: {"a","b"} with '"' and '\' escaped. */
static void keys_literal(cq_strbuf *b, const cq_version_meta *m) {
    cq_strbuf_puts(b, "{");
    for (size_t i = 0; i < m->n_repeals; i++) {
        cq_strbuf_puts(b, i ? ",\"" : "\"");
        for (const char *p = m->repeals[i]; *p; p++) {
            if (*p == '"' || *p == '\\') cq_strbuf_puts(b, "\\");
            cq_strbuf_append(b, p, 1);
        }
        cq_strbuf_puts(b, "\"");
    }
    cq_strbuf_puts(b, "}");
}

cq_status cq_pg_versions_analyse(cq_pg *pg, int64_t doc_id, cq_err *err) {
    PGconn *c = cq_pg_conn(pg);
    char doc[32];
    ID_TEXT(doc, doc_id);
    const char *params[] = {doc};
    PGresult *r = cq_pgr_query(c, "SELECT kb_id, name, title FROM documents WHERE id = $1", 1, params,
                               "versions: find document", err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no document with id %lld", (long long)doc_id);
    }
    int64_t kb_id = cq_pgr_int64(r, 0, 0);
    char *name = strdup(PQgetvalue(r, 0, 1));
    char *title = PQgetisnull(r, 0, 2) ? NULL : strdup(PQgetvalue(r, 0, 2));
    bool nomem = !name || (!PQgetisnull(r, 0, 2) && !title);
    PQclear(r);
    char *header = NULL, *tail = NULL;
    cq_status rc = nomem ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : read_texts(c, doc, &header, &tail, err);
    cq_version_meta m;
    if (!rc) cq_version_meta_extract(name, title, header, tail, &m);
    free(name);
    free(title);
    free(header);
    free(tail);
    if (rc) return rc;
    char kb[32], prom[16], eff[16], rep[16], now[32];
    ID_TEXT(kb, kb_id);
    snprintf(prom, sizeof prom, "%d", (int)m.promulgated);
    snprintf(eff, sizeof eff, "%d", (int)m.effective);
    snprintf(rep, sizeof rep, "%d", (int)m.repealed);
    ID_TEXT(now, time(NULL));
    cq_strbuf keys = {0};
    keys_literal(&keys, &m);
    if (keys.failed) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    bool began;
    rc = cq_pgr_begin(c, &began, err);
    /* A person's correction stands (the WHERE of the update, so one made meanwhile by another node stands too);
     * what the text repeals is always refreshed. */
    const char *row[] = {doc, kb, m.key, m.label, prom, eff, rep, now};
    if (!rc)
        rc = cq_pgr_exec(c,
                         "INSERT INTO doc_versions(doc_id, kb_id, key, label, promulgated, effective, repealed, "
                         "by_user, analysed_at) VALUES($1, $2, $3, $4, $5, $6, $7, false, $8) ON CONFLICT (doc_id) "
                         "DO UPDATE SET kb_id = excluded.kb_id, key = excluded.key, label = excluded.label, "
                         "promulgated = excluded.promulgated, effective = excluded.effective, "
                         "repealed = excluded.repealed, analysed_at = excluded.analysed_at "
                         "WHERE NOT doc_versions.by_user",
                         8, row, "versions: write version", NULL, err);
    if (!rc) rc = cq_pgr_exec(c, "DELETE FROM doc_repeals WHERE doc_id = $1", 1, params, "versions: write repeals", NULL, err);
    const char *rp[] = {doc, kb, keys.data};
    if (!rc && m.n_repeals)
        rc = cq_pgr_exec(c,
                         "INSERT INTO doc_repeals(doc_id, kb_id, key) SELECT $1, $2, k FROM unnest($3::text[]) k "
                         "ON CONFLICT DO NOTHING",
                         3, rp, "versions: write repeals", NULL, err);
    cq_strbuf_free(&keys);
    return cq_pgr_end(c, began, rc, err);
}

cq_status cq_pg_versions_ensure(cq_pg *pg, int64_t kb_id, bool redo, size_t *n_analysed, cq_err *err) {
    if (n_analysed) *n_analysed = 0;
    PGconn *c = cq_pg_conn(pg);
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb};
    PGresult *r = cq_pgr_query(c,
                               redo ? "SELECT id FROM documents WHERE kb_id = $1 AND status = 'ready' ORDER BY id"
                                    : "SELECT d.id FROM documents d WHERE d.kb_id = $1 AND d.status = 'ready' AND "
                                      "NOT EXISTS (SELECT 1 FROM doc_versions v WHERE v.doc_id = d.id) ORDER BY d.id",
                               1, params, "versions: find documents", err);
    if (!r) return CQ_ERR_DB;
    size_t n = (size_t)PQntuples(r);
    int64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) ids[i] = cq_pgr_int64(r, (int)i, 0);
    PQclear(r);
    if (!ids) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    if (n) {
        bool began;
        rc = cq_pgr_begin(c, &began, err);
        for (size_t i = 0; !rc && i < n; i++) {
            rc = cq_pg_versions_analyse(pg, ids[i], err);
            /* deleted by another node since the list was read: nothing to analyse */
            if (rc == CQ_ERR_NOT_FOUND) {
                cq_err_clear(err);
                rc = CQ_OK;
            }
        }
        rc = cq_pgr_end(c, began, rc, err);
    }
    free(ids);
    if (!rc && n_analysed) *n_analysed = n;
    if (!rc && n && !redo) CQ_INFO("versions: %zu documents of KB %lld analysed", n, (long long)kb_id);
    return rc;
}

/* ---- groups ------------------------------------------------------------------------------------------------- */

#define ENTRY_COLUMNS "v.doc_id, d.name, v.label, v.promulgated, v.effective, v.repealed, v.by_user"

static void read_entry(const PGresult *r, int i, cq_version_entry *e) {
    memset(e, 0, sizeof *e);
    e->doc_id = cq_pgr_int64(r, i, 0);
    copy_text(r, i, 1, e->name, sizeof e->name);
    copy_text(r, i, 2, e->label, sizeof e->label);
    e->promulgated = cq_pgr_int32(r, i, 3);
    e->effective = cq_pgr_int32(r, i, 4);
    e->repealed = cq_pgr_int32(r, i, 5);
    e->by_user = cq_pgr_bool(r, i, 6);
}

/* The day each regulation of a KB is repealed by another document of the KB (from the day that document takes
 * effect): (key, day) rows, as versions.c's REPEALS_SQL. */
#define REPEALS_SQL                                                                                                 \
    "SELECT r.key, min(CASE WHEN v.effective > 0 THEN v.effective ELSE v.promulgated END) FROM doc_repeals r "      \
    "JOIN doc_versions v ON v.doc_id = r.doc_id JOIN documents d ON d.id = r.doc_id "                              \
    "WHERE r.kb_id = $1 AND d.status = 'ready' AND v.key <> r.key"

static cq_status load_group(PGconn *c, int64_t kb_id, const char *key, cq_version_group *g, cq_err *err) {
    memset(g, 0, sizeof *g);
    snprintf(g->key, sizeof g->key, "%s", key);
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb, key};
    /* one statement, one snapshot: the versions and the repeal that applies to them */
    PGresult *r = cq_pgr_query(c,
                               "SELECT " ENTRY_COLUMNS ", NULL::integer FROM doc_versions v JOIN documents d "
                               "ON d.id = v.doc_id WHERE v.kb_id = $1 AND v.key = $2 AND d.status = 'ready' "
                               "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, day FROM (" REPEALS_SQL
                               " AND r.key = $2 GROUP BY r.key) rep(key, day)",
                               2, params, "versions: load group", err);
    if (!r) return CQ_ERR_DB;
    int rows = PQntuples(r);
    g->v = calloc(rows ? (size_t)rows : 1, sizeof *g->v);
    if (!g->v) {
        PQclear(r);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_date repealed = 0;
    for (int i = 0; i < rows; i++) {
        if (PQgetisnull(r, i, 0)) {
            if (!PQgetisnull(r, i, 7)) repealed = cq_pgr_int32(r, i, 7);
            continue;
        }
        read_entry(r, i, &g->v[g->n++]);
    }
    PQclear(r);
    cq_version_group_finish(g, repealed);
    return CQ_OK;
}

cq_status cq_pg_versions_group_of(cq_pg *pg, int64_t doc_id, cq_version_group *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    PGconn *c = cq_pg_conn(pg);
    char doc[32];
    ID_TEXT(doc, doc_id);
    const char *params[] = {doc};
    PGresult *r = cq_pgr_query(c, "SELECT kb_id, key FROM doc_versions WHERE doc_id = $1", 1, params,
                               "versions: find version", err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has no version information", (long long)doc_id);
    }
    int64_t kb_id = cq_pgr_int64(r, 0, 0);
    char key[CQ_VERSION_KEY_MAX];
    copy_text(r, 0, 1, key, sizeof key);
    PQclear(r);
    cq_status rc = load_group(c, kb_id, key, out, err);
    if (!rc && !key[0]) cq_version_group_alone(out, doc_id);
    return rc;
}

cq_status cq_pg_versions_status(cq_pg *pg, int64_t doc_id, cq_date on, cq_version_status *out, cq_err *err) {
    cq_version_group g;
    cq_status rc = cq_pg_versions_group_of(pg, doc_id, &g, err);
    return cq_version_status_from_group(rc, &g, doc_id, on, out, err);
}

/* ---- corrections -------------------------------------------------------------------------------------------- */

cq_status cq_pg_versions_set(cq_pg *pg, int64_t doc_id, const cq_version_edit *e, cq_err *err) {
    cq_status rc = cq_version_edit_check(e, err);
    if (rc) return rc;
    PGconn *c = cq_pg_conn(pg);
    char doc[32];
    ID_TEXT(doc, doc_id);
    bool began;
    rc = cq_pgr_begin(c, &began, err);
    /* a document never analysed gets its automatic row first, then the correction over it */
    const char *params[] = {doc};
    PGresult *r = rc ? NULL
                     : cq_pgr_query(c, "SELECT 1 FROM doc_versions WHERE doc_id = $1", 1, params,
                                    "versions: find version", err);
    if (!rc && !r) rc = CQ_ERR_DB;
    bool have = r && PQntuples(r) == 1;
    PQclear(r);
    if (!rc && !have) rc = cq_pg_versions_analyse(pg, doc_id, err);
    char key[CQ_VERSION_KEY_MAX] = "", prom[16], eff[16], rep[16];
    if (e->key) cq_version_edit_key(e->key, doc_id, key);
    snprintf(prom, sizeof prom, "%d", (int)e->promulgated);
    snprintf(eff, sizeof eff, "%d", (int)e->effective);
    snprintf(rep, sizeof rep, "%d", (int)e->repealed);
    const char *row[] = {doc, e->key ? key : NULL, e->label, prom, eff, rep};
    if (!rc)
        rc = cq_pgr_exec(c,
                         "UPDATE doc_versions SET by_user = true, key = coalesce($2, key), label = coalesce($3, label), "
                         "promulgated = CASE WHEN $4::int >= 0 THEN $4::int ELSE promulgated END, "
                         "effective = CASE WHEN $5::int >= 0 THEN $5::int ELSE effective END, "
                         "repealed = CASE WHEN $6::int >= 0 THEN $6::int ELSE repealed END WHERE doc_id = $1",
                         6, row, "versions: correct version", NULL, err);
    return cq_pgr_end(c, began, rc, err);
}

cq_status cq_pg_versions_reset(cq_pg *pg, int64_t doc_id, cq_err *err) {
    PGconn *c = cq_pg_conn(pg);
    char doc[32];
    ID_TEXT(doc, doc_id);
    const char *params[] = {doc};
    bool began;
    cq_status rc = cq_pgr_begin(c, &began, err);
    if (!rc)
        rc = cq_pgr_exec(c, "UPDATE doc_versions SET by_user = false WHERE doc_id = $1", 1, params,
                         "versions: reset version", NULL, err);
    if (!rc) rc = cq_pg_versions_analyse(pg, doc_id, err);
    return cq_pgr_end(c, began, rc, err);
}

/* ---- a whole KB ---------------------------------------------------------------------------------------------- */

cq_status cq_pg_versions_list(cq_pg *pg, int64_t kb_id, cq_version_group **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    PGconn *c = cq_pg_conn(pg);
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb};
    /* keys compare as bytes (COLLATE "C" in the schema): the order SQLite gives */
    PGresult *r = cq_pgr_query(c,
                               "SELECT v.key FROM doc_versions v JOIN documents d ON d.id = v.doc_id WHERE "
                               "v.kb_id = $1 AND d.status = 'ready' AND v.key <> '' GROUP BY v.key HAVING count(*) > 1 "
                               "ORDER BY v.key",
                               1, params, "versions: list groups", err);
    if (!r) return CQ_ERR_DB;
    size_t n_keys = (size_t)PQntuples(r);
    cq_status rc = CQ_OK;
    if (n_keys && !(*out = calloc(n_keys, sizeof **out))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n_keys; i++) {
        rc = load_group(c, kb_id, PQgetvalue(r, (int)i, 0), &(*out)[i], err);
        if (!rc) (*n)++;
    }
    PQclear(r);
    if (rc) {
        for (size_t i = 0; i < *n; i++) cq_version_group_free(&(*out)[i]);
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_pg_versions_statuses(cq_pg *pg, int64_t kb_id, cq_date on, cq_version_status **out, size_t *n,
                                  cq_err *err) {
    *out = NULL;
    *n = 0;
    PGconn *c = cq_pg_conn(pg);
    char kb[32];
    ID_TEXT(kb, kb_id);
    const char *params[] = {kb};
    /* the versions and the cross-document repeals in one statement (one snapshot); repeal rows have no doc_id */
    PGresult *r = cq_pgr_query(c,
                               "SELECT " ENTRY_COLUMNS ", v.key, NULL::integer FROM doc_versions v JOIN documents d "
                               "ON d.id = v.doc_id WHERE v.kb_id = $1 AND d.status = 'ready' "
                               "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, key, day FROM (" REPEALS_SQL
                               " GROUP BY r.key) rep(key, day)",
                               1, params, "versions: load versions", err);
    if (!r) return CQ_ERR_DB;
    int rows = PQntuples(r);
    cq_version_keyed *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
    cq_version_keyed *rep = calloc(rows ? (size_t)rows : 1, sizeof *rep);
    size_t nv = 0, n_rep = 0;
    cq_status rc = v && rep ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < rows; i++) {
        if (PQgetisnull(r, i, 0)) {
            copy_text(r, i, 7, rep[n_rep].key, sizeof rep[n_rep].key);
            rep[n_rep++].e.repealed = PQgetisnull(r, i, 8) ? 0 : cq_pgr_int32(r, i, 8);
            continue;
        }
        read_entry(r, i, &v[nv].e);
        copy_text(r, i, 7, v[nv].key, sizeof v[nv].key);
        nv++;
    }
    PQclear(r);
    if (!rc) rc = cq_versions_statuses_from(v, nv, rep, n_rep, on, out, n, err);
    free(v);
    free(rep);
    return rc;
}
