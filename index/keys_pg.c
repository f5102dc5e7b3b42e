/* API keys on PostgreSQL (keys_pg.h). */
#include "index/keys_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/pg_query.h"

#define KEY_COLUMNS                                                                                              \
    "id, name, prefix, role, coalesce(kb, ''), created_at, coalesce(last_used_at, 0), coalesce(revoked_at, 0) " \
    "FROM api_keys"

static void key_from_row(const PGresult *r, int row, cq_key_info *k) {
    memset(k, 0, sizeof *k);
    k->id = cq_pgq_int64(r, row, 0);
    snprintf(k->name, sizeof k->name, "%s", cq_pgq_str(r, row, 1));
    snprintf(k->prefix, sizeof k->prefix, "%s", cq_pgq_str(r, row, 2));
    k->role = cq_key_role_parse(cq_pgq_str(r, row, 3));
    snprintf(k->kb, sizeof k->kb, "%s", cq_pgq_str(r, row, 4));
    k->created_at = cq_pgq_int64(r, row, 5);
    k->last_used_at = cq_pgq_int64(r, row, 6);
    k->revoked_at = cq_pgq_int64(r, row, 7);
}

cq_status cq_pg_key_create(cq_pg *pg, const char *name, cq_key_role role, const char *kb,
                           char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err) {
    char hash[65], prefix[CQ_KEY_PREFIX_CHARS + 1];
    cq_status rc = cq_key_prepare(&name, role, kb, secret, hash, prefix, err);
    if (rc) return rc;
    int64_t now = (int64_t)time(NULL), id = 0;
    /* The key and "authentication is required" come together. */
    int own;
    rc = cq_pgq_begin(pg, &own, err);
    if (!rc) rc = cq_pg_auth_set_required(pg, true, err);
    if (!rc) {
        cq_pgq_args a = {0};
        cq_pgq_text(&a, name);
        cq_pgq_text(&a, prefix);
        cq_pgq_text(&a, hash);
        cq_pgq_text(&a, cq_key_role_name(role));
        cq_pgq_text(&a, role == CQ_ROLE_ADMIN ? NULL : kb);
        cq_pgq_int(&a, now);
        PGresult *r = cq_pgq_run(pg,
                                 "INSERT INTO api_keys(name, prefix, hash, role, kb, created_at) "
                                 "VALUES($1, $2, $3, $4, $5, $6) RETURNING id",
                                 &a, "create key", err);
        if (!r) rc = CQ_ERR_DB;
        else id = cq_pgq_int64(r, 0, 0);
        PQclear(r);
    }
    rc = cq_pgq_end(pg, own, rc, err);
    if (rc) return rc;
    if (info) {
        memset(info, 0, sizeof *info);
        info->id = id;
        snprintf(info->name, sizeof info->name, "%s", name);
        snprintf(info->prefix, sizeof info->prefix, "%s", prefix);
        info->role = role;
        snprintf(info->kb, sizeof info->kb, "%s", role == CQ_ROLE_ADMIN ? "" : kb);
        info->created_at = now;
    }
    return CQ_OK;
}

cq_status cq_pg_key_list(cq_pg *pg, cq_key_info **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    PGresult *r = cq_pgq_run(pg, "SELECT " KEY_COLUMNS " ORDER BY id", NULL, "list keys", err);
    if (!r) return CQ_ERR_DB;
    int rows = PQntuples(r);
    cq_key_info *list = calloc(rows ? (size_t)rows : 1, sizeof *list);
    if (!list) {
        PQclear(r);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rows; i++) key_from_row(r, i, &list[i]);
    PQclear(r);
    *out = list;
    *n = (size_t)rows;
    return CQ_OK;
}

cq_status cq_pg_key_revoke(cq_pg *pg, int64_t id, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    cq_pgq_int(&a, (int64_t)time(NULL));
    int64_t changed = 0;
    /* one statement: two admins revoking at once cannot both succeed */
    if (cq_pgq_exec(pg, "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", &a,
                    "revoke key", &changed, err))
        return CQ_ERR_DB;
    if (changed) return CQ_OK;
    a.n = 1; /* the id alone */
    PGresult *r = cq_pgq_run(pg, "SELECT 1 FROM api_keys WHERE id = $1", &a, "revoke key", err);
    if (!r) return CQ_ERR_DB;
    int exists = PQntuples(r) == 1;
    PQclear(r);
    if (!exists) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no key with id %lld", (long long)id);
    return cq_err_set(err, CQ_ERR_INVALID, "key %lld is revoked already", (long long)id);
}

cq_status cq_pg_key_check(cq_pg *pg, const char *secret, cq_key_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    char hash[65];
    if (!cq_key_secret_hash(secret, hash)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown API key");
    cq_pgq_args a = {0};
    cq_pgq_text(&a, hash);
    PGresult *r = cq_pgq_run(pg, "SELECT " KEY_COLUMNS " WHERE hash = $1 AND revoked_at IS NULL", &a, "check key",
                             err);
    if (!r) return CQ_ERR_DB;
    int found = PQntuples(r) == 1;
    if (found) key_from_row(r, 0, out);
    PQclear(r);
    if (!found) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown or revoked API key");
    int64_t now = (int64_t)time(NULL);
    if (now - out->last_used_at >= 60) {
        /* Best effort and without waiting: a row another request is writing is skipped, not waited for, and a
         * failure neither fails nor delays the request. */
        cq_pgq_args u = {0};
        cq_pgq_int(&u, out->id);
        cq_pgq_int(&u, now);
        int64_t changed = 0;
        cq_err ignored = {0};
        if (cq_pgq_exec(pg,
                        "UPDATE api_keys SET last_used_at = $2 WHERE id = (SELECT id FROM api_keys WHERE id = $1 "
                        "AND coalesce(last_used_at, 0) <= $2 - 60 FOR UPDATE SKIP LOCKED)",
                        &u, "record key use", &changed, &ignored) == CQ_OK &&
            changed)
            out->last_used_at = now;
    }
    return CQ_OK;
}

cq_status cq_pg_key_count_active(cq_pg *pg, int64_t *n, cq_err *err) {
    *n = 0;
    PGresult *r = cq_pgq_run(pg, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", NULL, "count keys", err);
    if (!r) return CQ_ERR_DB;
    *n = cq_pgq_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_auth_required(cq_pg *pg, bool *required, int64_t *since, cq_err *err) {
    *required = false;
    if (since) *since = 0;
    PGresult *r = cq_pgq_run(pg, "SELECT value, updated_at FROM settings WHERE name = 'auth_required'", NULL,
                             "read settings", err);
    if (!r) return CQ_ERR_DB;
    if (PQntuples(r) == 1) {
        *required = !strcmp(cq_pgq_str(r, 0, 0), "1");
        if (since && *required) *since = cq_pgq_int64(r, 0, 1);
    }
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_auth_set_required(cq_pg *pg, bool required, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_text(&a, required ? "1" : "0");
    cq_pgq_int(&a, (int64_t)time(NULL));
    /* unchanged: keeps the time it was set. A first '0' is written as SQLite's store leaves it: not at all. */
    return cq_pgq_exec(pg,
                       "INSERT INTO settings(name, value, updated_at) SELECT 'auth_required', $1::text, $2::bigint "
                       "WHERE $1::text = '1' OR EXISTS (SELECT 1 FROM settings WHERE name = 'auth_required') "
                       "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at "
                       "WHERE settings.value <> excluded.value",
                       &a, "write settings", NULL, err);
}
