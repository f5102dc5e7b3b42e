#include "index/keys.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/sha256.h"
#include "index/keys_pg.h"

#define PREFIX_CHARS CQ_KEY_PREFIX_CHARS
#define CQ_STORE_BUSY_TIMEOUT_MS 10000 /* as cq_store_open sets it */

static cq_status db_error(cq_store *s, cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_DB, "%s: %s", what, sqlite3_errmsg(cq_store_db(s)));
}

const char *cq_key_role_name(cq_key_role role) {
    switch (role) {
    case CQ_ROLE_ADMIN: return "admin";
    case CQ_ROLE_EDITOR: return "editor";
    case CQ_ROLE_READER: return "reader";
    default: return "none";
    }
}

cq_key_role cq_key_role_parse(const char *name) {
    if (!name) return CQ_ROLE_NONE;
    if (!strcmp(name, "admin")) return CQ_ROLE_ADMIN;
    if (!strcmp(name, "editor")) return CQ_ROLE_EDITOR;
    if (!strcmp(name, "reader")) return CQ_ROLE_READER;
    return CQ_ROLE_NONE;
}

int cq_key_allows(const cq_key_info *key, cq_key_role need, const char *kb_name) {
    if (!key || key->role == CQ_ROLE_NONE) return 0;
    if (key->role == CQ_ROLE_ADMIN) return 1;
    if (need == CQ_ROLE_ADMIN || !kb_name) return 0;
    if (strcmp(key->kb, "*") && strcmp(key->kb, kb_name)) return 0;
    return key->role >= need;
}

static cq_status random_hex(char *out, size_t n_hex, cq_err *err) {
    unsigned char bytes[32];
    size_t need = (n_hex + 1) / 2, got = 0;
    if (need > sizeof bytes) return cq_err_set(err, CQ_ERR_INTERNAL, "key too long");
    while (got < need) {
        ssize_t r = getrandom(bytes + got, need - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return cq_err_set(err, CQ_ERR_IO, "no random bytes for the key: %s", strerror(errno));
        }
        got += (size_t)r;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n_hex; i++) out[i] = hex[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[n_hex] = 0;
    return CQ_OK;
}

#define KEY_COLUMNS "id, name, prefix, role, coalesce(kb, ''), created_at, coalesce(last_used_at, 0), coalesce(revoked_at, 0)"

static void key_from_row(sqlite3_stmt *st, cq_key_info *k) {
    memset(k, 0, sizeof *k);
    k->id = sqlite3_column_int64(st, 0);
    snprintf(k->name, sizeof k->name, "%s", (const char *)sqlite3_column_text(st, 1));
    snprintf(k->prefix, sizeof k->prefix, "%s", (const char *)sqlite3_column_text(st, 2));
    k->role = cq_key_role_parse((const char *)sqlite3_column_text(st, 3));
    snprintf(k->kb, sizeof k->kb, "%s", (const char *)sqlite3_column_text(st, 4));
    k->created_at = sqlite3_column_int64(st, 5);
    k->last_used_at = sqlite3_column_int64(st, 6);
    k->revoked_at = sqlite3_column_int64(st, 7);
}

cq_status cq_key_prepare(const char **name_io, cq_key_role role, const char *kb, char secret[CQ_KEY_SECRET_BYTES],
                         char hash[65], char prefix[CQ_KEY_PREFIX_CHARS + 1], cq_err *err) {
    const char *name = *name_io;
    if (role == CQ_ROLE_NONE) return cq_err_set(err, CQ_ERR_INVALID, "a key needs a role: admin, editor or reader");
    if (role == CQ_ROLE_ADMIN && kb && *kb)
        return cq_err_set(err, CQ_ERR_INVALID, "admin keys cover every knowledge base: give no KB");
    if (role != CQ_ROLE_ADMIN) {
        if (!kb || !*kb) return cq_err_set(err, CQ_ERR_INVALID, "%s keys need a KB (a name, or * for every KB)",
                                           cq_key_role_name(role));
        if (strcmp(kb, "*") && !cq_store_kb_name_valid(kb))
            return cq_err_set(err, CQ_ERR_INVALID, "invalid knowledge base name '%s'", kb);
    }
    if (!name || !*name) name = cq_key_role_name(role);
    if (strlen(name) >= sizeof((cq_key_info *)0)->name)
        return cq_err_set(err, CQ_ERR_INVALID, "key name too long (at most 63 bytes)");
    memcpy(secret, "cq_", 3);
    cq_status rc = random_hex(secret + 3, CQ_KEY_SECRET_BYTES - 4, err);
    if (rc) return rc;
    cq_sha256_hex(secret, strlen(secret), hash);
    memcpy(prefix, secret, PREFIX_CHARS);
    prefix[PREFIX_CHARS] = 0;
    *name_io = name;
    return CQ_OK;
}

bool cq_key_secret_hash(const char *secret, char hash[65]) {
    if (!secret || strlen(secret) != CQ_KEY_SECRET_BYTES - 1 || strncmp(secret, "cq_", 3)) return false;
    cq_sha256_hex(secret, strlen(secret), hash);
    return true;
}

cq_status cq_store_key_create(cq_store *s, const char *name, cq_key_role role, const char *kb,
                              char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_key_create(pg, name, role, kb, secret, info, err);
    char hash[65], prefix[PREFIX_CHARS + 1];
    cq_status rc = cq_key_prepare(&name, role, kb, secret, hash, prefix, err);
    if (rc) return rc;

    /* The key and "authentication is required" come together. */
    int own_tx = sqlite3_get_autocommit(cq_store_db(s));
    if (own_tx && cq_store_begin(s, err)) return CQ_ERR_DB;
    rc = cq_store_auth_set_required(s, true, err);
    if (rc) {
        if (own_tx) cq_store_rollback(s);
        return rc;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "INSERT INTO api_keys(name, prefix, hash, role, kb, created_at) VALUES(?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_error(s, err, "create key");
        if (own_tx) cq_store_rollback(s);
        return rc;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, prefix, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, cq_key_role_name(role), -1, SQLITE_STATIC);
    if (role == CQ_ROLE_ADMIN) sqlite3_bind_null(st, 5);
    else sqlite3_bind_text(st, 5, kb, -1, SQLITE_TRANSIENT);
    int64_t now = (int64_t)time(NULL);
    sqlite3_bind_int64(st, 6, now);
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    int64_t id = sqlite3_last_insert_rowid(cq_store_db(s));
    if (step != SQLITE_DONE) {
        rc = db_error(s, err, "create key");
        if (own_tx) cq_store_rollback(s);
        return rc;
    }
    if (own_tx && cq_store_commit(s, err)) {
        cq_store_rollback(s);
        return CQ_ERR_DB;
    }
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

cq_status cq_store_key_list(cq_store *s, cq_key_info **out, size_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_key_list(pg, out, n, err);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "SELECT " KEY_COLUMNS " FROM api_keys ORDER BY id", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, err, "list keys");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            cq_key_info *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                free(*out);
                *out = NULL;
                *n = 0;
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            *out = p;
        }
        key_from_row(st, &(*out)[(*n)++]);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "list keys");
}

cq_status cq_store_key_revoke(cq_store *s, int64_t id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_key_revoke(pg, id, err);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "SELECT coalesce(revoked_at, 0) FROM api_keys WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return db_error(s, err, "revoke key");
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int64_t revoked = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no key with id %lld", (long long)id);
    if (rc != SQLITE_ROW) return db_error(s, err, "revoke key");
    if (revoked) return cq_err_set(err, CQ_ERR_INVALID, "key %lld is revoked already", (long long)id);
    if (sqlite3_prepare_v2(cq_store_db(s), "UPDATE api_keys SET revoked_at = ? WHERE id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, err, "revoke key");
    sqlite3_bind_int64(st, 1, (int64_t)time(NULL));
    sqlite3_bind_int64(st, 2, id);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "revoke key");
}

cq_status cq_store_key_check(cq_store *s, const char *secret, cq_key_info *out, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_key_check(pg, secret, out, err);
    memset(out, 0, sizeof *out);
    char hash[65];
    if (!cq_key_secret_hash(secret, hash)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown API key");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "SELECT " KEY_COLUMNS " FROM api_keys WHERE hash = ? AND revoked_at IS NULL", -1, &st,
                           NULL) != SQLITE_OK)
        return db_error(s, err, "check key");
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) key_from_row(st, out);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown or revoked API key");
    if (rc != SQLITE_ROW) return db_error(s, err, "check key");
    int64_t now = (int64_t)time(NULL);
    if (now - out->last_used_at >= 60 &&
        sqlite3_prepare_v2(cq_store_db(s), "UPDATE api_keys SET last_used_at = ? WHERE id = ?", -1, &st, NULL) ==
            SQLITE_OK) {
        /* Best effort and without waiting: a busy database must neither fail nor delay the request. */
        sqlite3_busy_timeout(cq_store_db(s), 0);
        sqlite3_bind_int64(st, 1, now);
        sqlite3_bind_int64(st, 2, out->id);
        if (sqlite3_step(st) == SQLITE_DONE) out->last_used_at = now;
        sqlite3_finalize(st);
        sqlite3_busy_timeout(cq_store_db(s), CQ_STORE_BUSY_TIMEOUT_MS);
    }
    return CQ_OK;
}

cq_status cq_store_key_count_active(cq_store *s, int64_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_key_count_active(pg, n, err);
    sqlite3_stmt *st;
    *n = 0;
    if (sqlite3_prepare_v2(cq_store_db(s), "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, err, "count keys");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? CQ_OK : db_error(s, err, "count keys");
}

cq_status cq_store_auth_required(cq_store *s, bool *required, int64_t *since, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_auth_required(pg, required, since, err);
    *required = false;
    if (since) *since = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "SELECT value, updated_at FROM settings WHERE name = 'auth_required'", -1,
                           &st, NULL) != SQLITE_OK)
        return db_error(s, err, "read settings");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        *required = v && !strcmp((const char *)v, "1");
        if (since && *required) *since = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "read settings");
}

cq_status cq_store_auth_set_required(cq_store *s, bool required, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_auth_set_required(pg, required, err);
    bool now;
    cq_status rc = cq_store_auth_required(s, &now, NULL, err);
    if (rc || now == required) return rc; /* unchanged: keeps the time it was set */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "INSERT INTO settings(name, value, updated_at) VALUES('auth_required', ?, ?) "
                           "ON CONFLICT(name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "write settings");
    sqlite3_bind_text(st, 1, required ? "1" : "0", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)time(NULL));
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? CQ_OK : db_error(s, err, "write settings");
}

cq_status cq_store_auth_open(cq_store *s, bool *open, cq_err *err) {
    *open = false;
    bool required = true;
    int64_t active = 1;
    cq_status rc = cq_store_auth_required(s, &required, NULL, err);
    if (!rc && !required) rc = cq_store_key_count_active(s, &active, err);
    if (!rc) *open = !required && active == 0;
    return rc;
}
