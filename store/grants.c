/* KB grants of keys and users (store/grants.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/grants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

static const char *const role_names[] = {"none", "reader", "editor", "admin"}; /* by cq_key_role */

const char *cq_key_role_name(cq_key_role role) {
    return role > CQ_ROLE_NONE && role <= CQ_ROLE_ADMIN ? role_names[role] : "none";
}

cq_key_role cq_key_role_parse(const char *name) {
    for (int r = CQ_ROLE_ADMIN; name && r > CQ_ROLE_NONE; r--)
        if (!strcmp(name, role_names[r])) return (cq_key_role)r;
    return CQ_ROLE_NONE;
}

/* The names of a list, in order, each once: *n of them, pointing into buf (a copy of kbs with ',' cut). False when
 * there are more than CQ_GRANT_MAX_KBS distinct names. */
static bool split(const char *kbs, char buf[CQ_GRANT_BYTES], const char *names[CQ_GRANT_MAX_KBS], size_t *n) {
    snprintf(buf, CQ_GRANT_BYTES, "%s", kbs);
    *n = 0;
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        bool seen = false;
        for (size_t i = 0; i < *n && !seen; i++) seen = !strcmp(names[i], p);
        if (seen) continue;
        if (*n == CQ_GRANT_MAX_KBS) return false;
        names[(*n)++] = p;
    }
    return true;
}

cq_status cq_grants_check(cq_key_role role, const char *kbs, const char *what, char norm[CQ_GRANT_BYTES],
                          cq_err *err) {
    if (norm) norm[0] = 0;
    if (role == CQ_ROLE_NONE)
        return cq_err_set(err, CQ_ERR_INVALID, "a %s needs a role: admin, editor or reader", what);
    if (role == CQ_ROLE_ADMIN) {
        if (kbs && *kbs)
            return cq_err_set(err, CQ_ERR_INVALID, "an admin %s covers every knowledge base: give no KB", what);
        return CQ_OK;
    }
    if (!kbs || !*kbs)
        return cq_err_set(err, CQ_ERR_INVALID, "a %s %s needs a KB (one or more names, or * for every KB)",
                          cq_key_role_name(role), what);
    if (!strcmp(kbs, "*")) {
        if (norm) snprintf(norm, CQ_GRANT_BYTES, "*");
        return CQ_OK;
    }
    char buf[CQ_GRANT_BYTES];
    const char *names[CQ_GRANT_MAX_KBS];
    size_t n;
    if (strlen(kbs) >= CQ_GRANT_BYTES || !split(kbs, buf, names, &n))
        return cq_err_set(err, CQ_ERR_INVALID, "too many knowledge bases for one %s (at most %d)", what,
                          CQ_GRANT_MAX_KBS);
    if (n == 0) return cq_err_set(err, CQ_ERR_INVALID, "a %s needs a KB name", what);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(names[i], "*"))
            return cq_err_set(err, CQ_ERR_INVALID, "* (every KB) cannot be combined with named KBs");
        if (!cq_store_kb_name_valid(names[i]))
            return cq_err_set(err, CQ_ERR_INVALID, "invalid knowledge base name '%s'", names[i]);
    }
    size_t len = 0;
    for (size_t i = 0; norm && i < n; i++)
        len += (size_t)snprintf(norm + len, CQ_GRANT_BYTES - len, "%s%s", i ? "," : "", names[i]);
    return CQ_OK;
}

cq_status cq_grants_remove(cq_db *db, const char *subject, int64_t subject_id, cq_err *err) {
    return cq_db_run(db, "remove grants", NULL, err, "DELETE FROM kb_grants WHERE subject = ?1 AND subject_id = ?2",
                     "ti", subject, subject_id);
}

cq_status cq_grants_write(cq_db *db, const char *subject, int64_t subject_id, const char *kbs, cq_err *err) {
    if (cq_grants_remove(db, subject, subject_id, err)) return err->code;
    if (!kbs || !*kbs || !strcmp(kbs, "*")) return CQ_OK;
    char buf[CQ_GRANT_BYTES];
    const char *names[CQ_GRANT_MAX_KBS];
    size_t n;
    if (!split(kbs, buf, names, &n))
        return cq_err_set(err, CQ_ERR_INVALID, "too many knowledge bases (at most %d)", CQ_GRANT_MAX_KBS);
    cq_status rc = CQ_OK;
    for (size_t i = 0; i < n && !rc; i++) { /* the KB's id found by the INSERT itself: no row when there is none */
        int64_t added = 0;
        rc = cq_db_run(db, "grant", &added, err,
                       "INSERT INTO kb_grants(subject, subject_id, kb_id, kb) SELECT ?1, ?2, id, ?3 FROM kbs "
                       "WHERE name = ?3",
                       "tit", subject, subject_id, names[i]);
        if (!rc && !added)
            rc = cq_err_set(err, CQ_ERR_NOT_FOUND,
                            "no knowledge base named '%s': create it first (clauseqa kb create %s), or give * for "
                            "every KB",
                            names[i], names[i]);
    }
    return rc;
}

cq_status cq_grants_read(cq_db *db, const char *subject, int64_t subject_id, bool current, char kb[CQ_GRANT_BYTES],
                         bool *gone, cq_err *err) {
    if (gone) *gone = false;
    if (!*kb || !strcmp(kb, "*")) return CQ_OK;
    kb[0] = 0;
    cq_db_stmt *st;
    if (cq_db_query(db, "read grants", &st, err,
                    "SELECT g.kb, CASE WHEN b.id IS NULL THEN 0 ELSE 1 END FROM kb_grants g "
                    "LEFT JOIN kbs b ON b.id = g.kb_id WHERE g.subject = ?1 AND g.subject_id = ?2 ORDER BY g.kb",
                    "ti", subject, subject_id))
        return err->code;
    size_t len = 0, alive = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "read grants", &rc, err)) {
        bool exists = cq_db_col_int(st, 1) != 0;
        alive += exists;
        if (current && !exists) continue;
        const char *name = cq_db_col_text(st, 0);
        int w = snprintf(kb + len, CQ_GRANT_BYTES - len, "%s%s", len ? "," : "", name ? name : "");
        if (w > 0 && (size_t)w < CQ_GRANT_BYTES - len) len += (size_t)w;
        else kb[len] = 0; /* cannot happen: the grant was checked to fit when it was made */
    }
    cq_db_finalize(st);
    if (!rc && gone) *gone = alive == 0;
    return rc;
}

bool cq_grant_has(const char *kbs, const char *kb) {
    if (!kbs || !kb || !*kb) return false;
    if (!strcmp(kbs, "*")) return true;
    size_t n = strlen(kb);
    for (const char *p = kbs; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, kb, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

bool cq_grant_allows(cq_key_role role, const char *kbs, cq_key_role need, const char *kb_name) {
    if (role == CQ_ROLE_NONE) return false;
    if (role == CQ_ROLE_ADMIN) return true;
    if (need == CQ_ROLE_ADMIN || !kb_name || !kbs || !*kbs) return false;
    return cq_grant_has(kbs, kb_name) && role >= need;
}

/* ---- what keys, users and groups share ---------------------------------------------------------------------- */

#define FIELD(info, off, type) ((type *)((char *)(info) + (off)))

void cq_principal_from_row(const cq_principal_layout *l, cq_db_stmt *st, void *info) {
    *FIELD(info, l->id, int64_t) = cq_db_col_int(st, 0);
    cq_db_col_copy(st, 1, FIELD(info, l->name, char), l->name_bytes);
    *FIELD(info, l->role, cq_key_role) = cq_key_role_parse(cq_db_col_text(st, 2));
    cq_db_col_copy(st, 3, FIELD(info, l->kb, char), CQ_GRANT_BYTES);
    *FIELD(info, l->created_at, int64_t) = cq_db_col_int(st, 4);
}

void cq_principal_set(const cq_principal_layout *l, void *info, int64_t id, const char *name, cq_key_role role,
                      const char *grant, int64_t now) {
    memset(info, 0, l->size);
    *FIELD(info, l->id, int64_t) = id;
    snprintf(FIELD(info, l->name, char), l->name_bytes, "%s", name);
    *FIELD(info, l->role, cq_key_role) = role;
    snprintf(FIELD(info, l->kb, char), CQ_GRANT_BYTES, "%s", grant);
    *FIELD(info, l->created_at, int64_t) = now;
}

cq_status cq_principal_list(cq_db *db, const cq_principal_layout *l, const char *what,
                            bool (*read)(cq_db_stmt *st, void *elem), const char *sql, void **out, size_t *n,
                            cq_err *err) {
    cq_status rc = cq_db_list(db, what, l->size, read, NULL, out, n, err, sql, "");
    for (size_t i = 0; i < *n && !rc; i++) {
        char *info = (char *)*out + i * l->size;
        rc = cq_grants_read(db, l->subject, *FIELD(info, l->id, int64_t), false, FIELD(info, l->kb, char),
                            FIELD(info, l->kb_gone, bool), err);
    }
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
