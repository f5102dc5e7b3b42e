/* API keys (store/keys.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/sha256.h"
#include "db/db.h"
#include "db/dialect.h"

int cq_key_allows(const cq_key_info *key, cq_key_role need, const char *kb_name) {
    if (!key || (key->kb_gone && key->role != CQ_ROLE_ADMIN)) return 0;
    return cq_grant_allows(key->role, key->kb, need, kb_name);
}

cq_status cq_key_random_hex(char *out, size_t n_hex, cq_err *err) {
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

/* The key's columns; its KBs are read apart (cq_grants_read). */
#define KEY_COLUMNS                                                                                                 \
    "k.id, k.name, k.prefix, k.role, coalesce(k.kb, ''), k.created_at, coalesce(k.last_used_at, 0), "               \
    "coalesce(k.revoked_at, 0) FROM api_keys k"

static bool key_from_row(cq_db_stmt *st, void *elem) {
    cq_key_info *k = elem;
    k->id = cq_db_col_int(st, 0);
    cq_db_col_copy(st, 1, k->name, sizeof k->name);
    cq_db_col_copy(st, 2, k->prefix, sizeof k->prefix);
    k->role = cq_key_role_parse(cq_db_col_text(st, 3));
    cq_db_col_copy(st, 4, k->kb, sizeof k->kb);
    k->created_at = cq_db_col_int(st, 5);
    k->last_used_at = cq_db_col_int(st, 6);
    k->revoked_at = cq_db_col_int(st, 7);
    return true;
}

/* Replaces k->kb (as stored) by its grant: the KBs that exist now when current, as granted otherwise. */
static cq_status key_grant(cq_db *db, cq_key_info *k, bool current, cq_err *err) {
    char stored[CQ_GRANT_BYTES];
    snprintf(stored, sizeof stored, "%s", k->kb);
    return cq_grants_read(db, "key", k->id, stored, current, k->kb, &k->kb_gone, err);
}

static cq_status key_prepare(const char **name_io, cq_key_role role, const char *kb, char grant[CQ_GRANT_BYTES],
                             char secret[CQ_KEY_SECRET_BYTES], char hash[65], char prefix[CQ_KEY_PREFIX_CHARS + 1],
                             cq_err *err) {
    const char *name = *name_io;
    if (cq_grants_check(role, kb, "key", grant, err)) return err->code;
    if (!name || !*name) name = cq_key_role_name(role);
    if (strlen(name) >= sizeof((cq_key_info *)0)->name)
        return cq_err_set(err, CQ_ERR_INVALID, "key name too long (at most 63 bytes)");
    memcpy(secret, "cq_", 3);
    cq_status rc = cq_key_random_hex(secret + 3, CQ_KEY_SECRET_BYTES - 4, err);
    if (rc) return rc;
    cq_sha256_hex(secret, strlen(secret), hash);
    memcpy(prefix, secret, CQ_KEY_PREFIX_CHARS);
    prefix[CQ_KEY_PREFIX_CHARS] = 0;
    *name_io = name;
    return CQ_OK;
}

static bool secret_hash(const char *secret, char hash[65]) {
    if (!secret || strlen(secret) != CQ_KEY_SECRET_BYTES - 1 || strncmp(secret, "cq_", 3)) return false;
    cq_sha256_hex(secret, strlen(secret), hash);
    return true;
}

cq_status cq_store_key_create(cq_store *s, const char *name, cq_key_role role, const char *kb,
                              char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    char hash[65], prefix[CQ_KEY_PREFIX_CHARS + 1], grant[CQ_GRANT_BYTES];
    cq_status rc = key_prepare(&name, role, kb, grant, secret, hash, prefix, err);
    if (rc) return rc;
    int64_t now = (int64_t)time(NULL), id = 0;
    /* The key, its KBs and "authentication is required" come together, or nothing does. */
    bool own;
    rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = cq_store_auth_set_required(s, true, err);
    if (!rc)
        rc = cq_db_int(db, "create key", &id, err,
                       "INSERT INTO api_keys(name, prefix, hash, role, kb, created_at) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                       "ttttti", name, prefix, hash, cq_key_role_name(role), grant[0] ? grant : NULL, now);
    if (!rc) rc = cq_grants_write(db, "key", id, grant, err);
    rc = cq_db_end(db, own, rc, err);
    if (rc) return rc;
    if (info) {
        memset(info, 0, sizeof *info);
        info->id = id;
        snprintf(info->name, sizeof info->name, "%s", name);
        snprintf(info->prefix, sizeof info->prefix, "%s", prefix);
        info->role = role;
        snprintf(info->kb, sizeof info->kb, "%s", grant);
        info->created_at = now;
    }
    return CQ_OK;
}

cq_status cq_store_key_list(cq_store *s, cq_key_info **out, size_t *n, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_status rc = cq_db_list(db, "list keys", sizeof **out, key_from_row, NULL, (void **)out, n, err,
                              "SELECT " KEY_COLUMNS " ORDER BY k.id", "");
    for (size_t i = 0; i < *n && !rc; i++) rc = key_grant(db, &(*out)[i], false, err);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_store_key_revoke(cq_store *s, int64_t id, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t changed = 0;
    /* one statement: two admins revoking at once cannot both succeed */
    if (cq_db_run(db, "revoke key", &changed, err, "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                  "ii", id, (int64_t)time(NULL)))
        return err->code;
    if (changed) return CQ_OK;
    int64_t one;
    cq_status rc = cq_db_int(db, "revoke key", &one, err, "SELECT 1 FROM api_keys WHERE id = ?1", "i", id);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "no key with id %lld", (long long)id);
    if (rc) return rc;
    return cq_err_set(err, CQ_ERR_INVALID, "key %lld is revoked already", (long long)id);
}

cq_status cq_store_key_check(cq_store *s, const char *secret, cq_key_info *out, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    memset(out, 0, sizeof *out);
    char hash[65];
    if (!secret_hash(secret, hash)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown API key");
    cq_status rc = cq_db_one(db, "check key", key_from_row, out, sizeof *out, err,
                             "SELECT " KEY_COLUMNS " WHERE k.hash = ?1 AND k.revoked_at IS NULL", "t", hash);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "unknown or revoked API key");
    if (rc) return rc;
    /* its KBs that exist now, by id: a KB made since under a deleted one's name is not its KB */
    if (key_grant(db, out, true, err)) return err->code;
    int64_t now = (int64_t)time(NULL);
    if (now - out->last_used_at >= 60) {
        /* Best effort and without waiting: a busy database or a row another request is writing must neither fail
         * nor delay the request. */
        cq_err ignored = {0};
        int64_t changed = 0;
        cq_db_nowait(db, true);
        if (!cq_db_run(db, "record key use", &changed, &ignored, cq_db_dialect(db, CQ_SQL_KEY_TOUCH), "ii", out->id,
                       now) &&
            changed)
            out->last_used_at = now;
        cq_db_nowait(db, false);
    }
    return CQ_OK;
}

/* A count(*) statement's result. */
static cq_status count_of(cq_store *s, const char *sql, const char *what, int64_t *n, cq_err *err) {
    return cq_db_int(cq_store_conn(s), what, n, err, sql, "");
}

cq_status cq_store_key_count_active(cq_store *s, int64_t *n, cq_err *err) {
    return count_of(s, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", "count keys", n, err);
}

cq_status cq_store_auth_required(cq_store *s, bool *required, int64_t *since, cq_err *err) {
    *required = false;
    if (since) *since = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "read settings", &st, err,
                    "SELECT value, updated_at FROM settings WHERE name = 'auth_required'", ""))
        return err->code;
    int step = cq_db_step(st, "read settings", err);
    if (step == CQ_DB_ROW) {
        const char *v = cq_db_col_text(st, 0);
        *required = v && !strcmp(v, "1");
        if (since && *required) *since = cq_db_col_int(st, 1);
    }
    cq_db_finalize(st);
    return step < 0 ? err->code : CQ_OK;
}

cq_status cq_store_auth_set_required(cq_store *s, bool required, cq_err *err) {
    /* One statement on both stores: unchanged keeps the time it was set; a first '0' is not written at all. */
    return cq_db_run(cq_store_conn(s), "write settings", NULL, err,
                     "INSERT INTO settings(name, value, updated_at) SELECT 'auth_required', ?1, ?2 "
                     "WHERE ?1 = '1' OR EXISTS (SELECT 1 FROM settings WHERE name = 'auth_required') "
                     "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at "
                     "WHERE settings.value <> excluded.value",
                     "ti", required ? "1" : "0", (int64_t)time(NULL));
}

cq_status cq_store_auth_open(cq_store *s, bool *open, cq_err *err) {
    *open = false;
    bool required = true;
    int64_t active = 1;
    cq_status rc = cq_store_auth_required(s, &required, NULL, err);
    if (!rc && !required) rc = cq_store_key_count_active(s, &active, err);
    int64_t users = 0; /* a user, as a key, closes the door (store/users.h) */
    if (!rc && !required && !active) rc = count_of(s, "SELECT count(*) FROM users", "count users", &users, err);
    if (!rc) *open = !required && active == 0 && users == 0;
    return rc;
}
