/* API keys (store/keys.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/keys.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/sha256.h"
#include "db/db.h"
#include "db/dialect.h"
#include "store/users.h"

int cq_key_allows(const cq_key_info *key, cq_key_role need, const char *kb_name) {
    if (!key || (key->kb_gone && key->role != CQ_ROLE_ADMIN)) return 0;
    return cq_grant_allows(key->role, key->kb, need, kb_name);
}

cq_status cq_random_bytes(void *out, size_t n, cq_err *err) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((unsigned char *)out + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return cq_err_set(err, CQ_ERR_IO, "no random bytes: %s", strerror(errno));
        }
        got += (size_t)r;
    }
    return CQ_OK;
}

cq_status cq_secret_new(char *out, size_t bytes, const char *prefix, char hash[65], cq_err *err) {
    unsigned char random[32];
    const size_t skip = strlen(prefix), n_hex = bytes - 1 - skip, need = (n_hex + 1) / 2;
    if (need > sizeof random) return cq_err_set(err, CQ_ERR_INTERNAL, "key too long");
    if (cq_random_bytes(random, need, err)) return err->code;
    static const char hex[] = "0123456789abcdef";
    memcpy(out, prefix, skip);
    for (size_t i = 0; i < n_hex; i++) out[skip + i] = hex[(random[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[bytes - 1] = 0;
    cq_sha256_hex(out, bytes - 1, hash);
    return CQ_OK;
}

bool cq_secret_hash(const char *secret, size_t bytes, const char *prefix, char hash[65]) {
    if (!secret || strlen(secret) != bytes - 1 || strncmp(secret, prefix, strlen(prefix))) return false;
    cq_sha256_hex(secret, bytes - 1, hash);
    return true;
}

static const cq_principal_layout KEY = CQ_PRINCIPAL_LAYOUT(cq_key_info, "key");
/* The key's columns; its KBs are read apart (cq_grants_read). */
#define KEY_COLUMNS                                                                                                 \
    CQ_PRINCIPAL_COLUMNS("k") "k.prefix, coalesce(k.last_used_at, 0), coalesce(k.revoked_at, 0) FROM api_keys k"

static bool key_from_row(cq_db_stmt *st, void *elem) {
    cq_key_info *k = elem;
    cq_principal_from_row(&KEY, st, k);
    cq_db_col_copy(st, CQ_PRINCIPAL_NCOLS, k->prefix, sizeof k->prefix);
    k->last_used_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS + 1);
    k->revoked_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS + 2);
    return true;
}

cq_status cq_store_key_create(cq_store *s, const char *name, cq_key_role role, const char *kb,
                              char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err) {
    char hash[65], prefix[CQ_KEY_PREFIX_CHARS + 1], grant[CQ_GRANT_BYTES];
    if (cq_grants_check(role, kb, "key", grant, err)) return err->code;
    if (!name || !*name) name = cq_key_role_name(role);
    if (strlen(name) >= sizeof((cq_key_info *)0)->name)
        return cq_err_set(err, CQ_ERR_INVALID, "key name too long (at most 63 bytes)");
    if (cq_secret_new(secret, CQ_KEY_SECRET_BYTES, "cq_", hash, err)) return err->code;
    snprintf(prefix, sizeof prefix, "%.*s", CQ_KEY_PREFIX_CHARS, secret);
    /* The key, its KBs and "authentication is required" come together, or nothing does. */
    int64_t now = (int64_t)time(NULL);
    cq_status rc = cq_principal_insert(s, &KEY, name, role, grant, now, info, err,
                                       "INSERT INTO api_keys(name, prefix, hash, role, kb, created_at) "
                                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                                       "ttttti", name, prefix, hash, cq_key_role_name(role), grant[0] ? grant : NULL,
                                       now);
    if (!rc && info) snprintf(info->prefix, sizeof info->prefix, "%s", prefix);
    return rc;
}

cq_status cq_store_key_list(cq_store *s, cq_key_info **out, size_t *n, cq_err *err) {
    return cq_principal_list(cq_store_conn(s), &KEY, "list keys", key_from_row, "SELECT " KEY_COLUMNS " ORDER BY k.id",
                             (void **)out, n, err);
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
    if (!cq_secret_hash(secret, CQ_KEY_SECRET_BYTES, "cq_", hash))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown API key");
    cq_status rc = cq_db_one(db, "check key", key_from_row, out, sizeof *out, err,
                             "SELECT " KEY_COLUMNS " WHERE k.hash = ?1 AND k.revoked_at IS NULL", "t", hash);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "unknown or revoked API key");
    if (rc) return rc;
    /* its KBs that exist now, by id: a KB made since under a deleted one's name is not its KB */
    if (cq_grants_read(db, KEY.subject, out->id, true, out->kb, &out->kb_gone, err)) return err->code;
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

cq_status cq_store_key_count_active(cq_store *s, int64_t *n, cq_err *err) {
    return cq_db_int(cq_store_conn(s), "count keys", n, err, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL",
                     "");
}

cq_status cq_store_auth_required(cq_store *s, bool *required, int64_t *since, cq_err *err) {
    int64_t v[2]; /* one row always (name is the key); zeros when the read fails */
    cq_status rc = cq_db_ints(cq_store_conn(s), "read settings", v, 2, err,
                              "SELECT count(*), coalesce(max(updated_at), 0) FROM settings "
                              "WHERE name = 'auth_required' AND value = '1'",
                              "");
    *required = v[0] > 0;
    if (since) *since = v[1];
    return rc;
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
    if (!rc && !required && !active) rc = cq_store_user_count(s, &users, err);
    if (!rc) *open = !required && active == 0 && users == 0;
    return rc;
}
