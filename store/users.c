/* Users and sessions (store/users.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/users.h"

#include <argon2.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/utf8.h"
#include "db/db.h"
#include "db/dialect.h"
#include "store/groups.h"
#include "store/keys.h"

#define SALT_BYTES 16
#define HASH_BYTES 32
#define WRONG_LOGIN "wrong user name or password"

/* ---- passwords ---------------------------------------------------------------------------------------------- */

cq_status cq_password_check(const char *password, cq_err *err) {
    if (!password || !*password) return cq_err_set(err, CQ_ERR_INVALID, "the password is empty");
    size_t n = strlen(password), i = 0, chars = 0;
    if (n > CQ_PASSWORD_MAX_BYTES)
        return cq_err_set(err, CQ_ERR_INVALID, "the password is longer than %d bytes", CQ_PASSWORD_MAX_BYTES);
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(password + i, n - i, &len);
        if (cp == CQ_UTF8_REPLACEMENT) return cq_err_set(err, CQ_ERR_INVALID, "the password is not valid UTF-8");
        if ((cp < 0x20 && cp != '\t') || cp == 0x7f)
            return cq_err_set(err, CQ_ERR_INVALID, "the password holds a control character");
        i += len;
        chars++;
    }
    if (chars < CQ_PASSWORD_MIN_CHARS)
        return cq_err_set(err, CQ_ERR_INVALID, "the password is too short: at least %d characters",
                          CQ_PASSWORD_MIN_CHARS);
    return CQ_OK;
}

cq_status cq_password_hash(const char *password, char out[CQ_PASSWORD_HASH_BYTES], cq_err *err) {
    unsigned char salt[SALT_BYTES];
    if (cq_random_bytes(salt, sizeof salt, err)) return err->code;
    int rc = argon2id_hash_encoded(CQ_PASSWORD_T_COST, CQ_PASSWORD_M_COST_KIB, 1, password, strlen(password), salt,
                                   sizeof salt, HASH_BYTES, out, CQ_PASSWORD_HASH_BYTES);
    if (rc != ARGON2_OK) return cq_err_set(err, CQ_ERR_INTERNAL, "argon2id: %s", argon2_error_message(rc));
    return CQ_OK;
}

bool cq_password_verify(const char *encoded, const char *password) {
    if (!encoded || !password || strncmp(encoded, "$argon2id$", 10)) return false;
    return argon2id_verify(encoded, password, strlen(password)) == ARGON2_OK;
}

/* A hash no password is checked against but this one: what an unknown name's sign-in verifies, so that it costs
 * what a wrong password costs. Made once. */
static char dummy_hash[CQ_PASSWORD_HASH_BYTES];
static void make_dummy(void) {
    cq_err ignored = {0};
    if (cq_password_hash("not a password of anyone", dummy_hash, &ignored)) dummy_hash[0] = 0;
}

static void verify_dummy(const char *password) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_dummy);
    if (dummy_hash[0]) (void)cq_password_verify(dummy_hash, password);
}

bool cq_user_name_valid(const char *name) {
    if (!name || !*name) return false;
    size_t n = strlen(name), i = 0;
    if (n >= CQ_USER_NAME_BYTES) return false;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(name + i, n - i, &len);
        if (cp == CQ_UTF8_REPLACEMENT) return false;
        if (!(cq_is_latin_alnum(cp) || cq_is_cjk(cp) || cp == '-' || cp == '_' || cp == '.' || cp == '@'))
            return false;
        i += len;
    }
    return true;
}

cq_status cq_principal_name_check(const char *name, const char *what, cq_err *err) {
    if (cq_user_name_valid(name)) return CQ_OK;
    return cq_err_set(err, CQ_ERR_INVALID,
                      "invalid %s name '%.80s': use 1-63 bytes of letters, digits, Chinese characters, '-', '_', '.' or "
                      "'@'",
                      what, name ? name : "");
}

cq_status cq_principal_id(cq_db *db, const char *what, const char *name, int64_t *id, cq_err *err) {
    char op[16], sql[48];
    snprintf(op, sizeof op, "find %s", what);
    snprintf(sql, sizeof sql, "SELECT id FROM %ss WHERE name = ?1", what);
    cq_status rc = cq_db_int(db, op, id, err, sql, "t", name);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no %s named '%s'", what, name ? name : "") : rc;
}

cq_status cq_principal_begin(cq_db *db, const char *what, const char *name, int64_t *id, bool *own, cq_err *err) {
    cq_status rc = cq_db_begin_own(db, own, err);
    return rc ? rc : cq_principal_id(db, what, name, id, err);
}

cq_status cq_principal_insert(cq_store *s, const cq_principal_layout *l, const char *name, cq_key_role role,
                              const char *grant, int64_t now, void *info, cq_err *err, const char *sql,
                              const char *kinds, ...) {
    cq_db *db = cq_store_conn(s);
    char op[16];
    snprintf(op, sizeof op, "add %s", l->subject);
    int64_t id = 0;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) {
        va_list ap;
        va_start(ap, kinds);
        rc = cq_db_intv(db, op, &id, err, sql, kinds, ap);
        va_end(ap);
    }
    if (rc == CQ_ERR_EXISTS) cq_err_set(err, rc, "a %s named '%s' exists already", l->subject, name);
    if (!rc) rc = cq_grants_write(db, l->subject, id, grant, err);
    if (!rc && strcmp(l->subject, "group")) rc = cq_store_auth_set_required(s, true, err); /* a key or a user */
    rc = cq_db_end(db, own, rc, err);
    if (!rc && info) cq_principal_set(l, info, id, name, role, grant, now);
    return rc;
}

cq_status cq_principal_remove(cq_store *s, const char *what, const char *name, const char *first, cq_err *err) {
    char op[16], members[64], row[48];
    snprintf(op, sizeof op, "remove %s", what);
    snprintf(members, sizeof members, "DELETE FROM group_members WHERE %s_id = ?1", what);
    snprintf(row, sizeof row, "DELETE FROM %ss WHERE id = ?1", what);
    cq_db *db = cq_store_conn(s);
    int64_t id = 0;
    bool own;
    cq_status rc = cq_principal_begin(db, what, name, &id, &own, err);
    if (!rc && first) rc = cq_db_run(db, op, NULL, err, first, "i", id);
    if (!rc) rc = cq_db_run(db, op, NULL, err, members, "i", id);
    if (!rc) rc = cq_grants_remove(db, what, id, err);
    if (!rc) rc = cq_db_run(db, op, NULL, err, row, "i", id);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_principal_grant(cq_store *s, const char *what, const char *name, cq_key_role role, const char *kbs,
                             cq_err *err) {
    char grant[CQ_GRANT_BYTES], op[16], sql[80];
    if (cq_grants_check(role, kbs, what, grant, err)) return err->code;
    snprintf(op, sizeof op, "change %s", what);
    snprintf(sql, sizeof sql, "UPDATE %ss SET role = ?2, kb = ?3, updated_at = ?4 WHERE id = ?1", what);
    cq_db *db = cq_store_conn(s);
    int64_t id = 0;
    bool own;
    cq_status rc = cq_principal_begin(db, what, name, &id, &own, err);
    if (!rc)
        rc = cq_db_run(db, op, NULL, err, sql, "itti", id, cq_key_role_name(role), grant[0] ? grant : NULL,
                       (int64_t)time(NULL));
    if (!rc) rc = cq_grants_write(db, what, id, grant, err);
    return cq_db_end(db, own, rc, err);
}

/* ---- users -------------------------------------------------------------------------------------------------- */

static const cq_principal_layout USER = CQ_PRINCIPAL_LAYOUT(cq_user_info, "user");
#define USER_COLUMNS                                                                                                \
    CQ_PRINCIPAL_COLUMNS("u") "u.updated_at, coalesce(u.last_login_at, 0), u.source, coalesce(u.disabled_at, 0) "
#define USER_NCOLS (CQ_PRINCIPAL_NCOLS + 4)

/* The row's USER_COLUMNS. */
static bool user_read(cq_db_stmt *st, void *elem) {
    cq_user_info *u = elem;
    memset(u, 0, sizeof *u);
    cq_principal_from_row(&USER, st, u);
    u->updated_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS);
    u->last_login_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS + 1);
    cq_db_col_copy(st, CQ_PRINCIPAL_NCOLS + 2, u->source, sizeof u->source);
    u->disabled_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS + 3);
    return true;
}

/* Replaces u->kb (as stored) by its grant (store/grants.h); when current (authorisation), joined with the grants of
 * the user's groups (store/groups.h). */
static cq_status user_grant(cq_db *db, cq_user_info *u, bool current, cq_err *err) {
    if (cq_grants_read(db, "user", u->id, current, u->kb, &u->kb_gone, err)) return err->code;
    return current ? cq_groups_effective(db, u->id, &u->role, u->kb, err) : CQ_OK;
}

cq_status cq_store_user_add(cq_store *s, const char *name, const char *password, cq_key_role role, const char *kbs,
                            cq_user_info *info, cq_err *err) {
    char grant[CQ_GRANT_BYTES], hash[CQ_PASSWORD_HASH_BYTES];
    if (cq_principal_name_check(name, "user", err) || cq_grants_check(role, kbs, "user", grant, err) ||
        cq_password_check(password, err))
        return err->code;
    /* the slow part, before any lock is taken */
    if (cq_password_hash(password, hash, err)) return err->code;
    int64_t now = (int64_t)time(NULL);
    cq_status rc = cq_principal_insert(s, &USER, name, role, grant, now, info, err,
                                       "INSERT INTO users(name, password_hash, role, kb, created_at, updated_at) "
                                       "VALUES(?1, ?2, ?3, ?4, ?5, ?5) RETURNING id",
                                       "tttti", name, hash, cq_key_role_name(role), grant[0] ? grant : NULL, now);
    memset(hash, 0, sizeof hash);
    if (!rc && info) info->updated_at = now;
    return rc;
}

cq_status cq_store_user_list(cq_store *s, cq_user_info **out, size_t *n, cq_err *err) {
    return cq_principal_list(cq_store_conn(s), &USER, "list users", user_read,
                             "SELECT " USER_COLUMNS "FROM users u ORDER BY u.id", (void **)out, n, err);
}

/* The row of user name (and its password hash into hash, when not NULL): NOT_FOUND when there is none. */
static cq_status user_find(cq_db *db, const char *name, cq_user_info *u, char hash[CQ_PASSWORD_HASH_BYTES],
                           cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_query(db, "find user", &st, err, "SELECT " USER_COLUMNS ", u.password_hash FROM users u WHERE u.name = ?1",
                    "t", name))
        return err->code;
    cq_status rc = cq_db_row(st, "find user", err);
    if (!rc) user_read(st, u);
    if (!rc && hash) cq_db_col_copy(st, USER_NCOLS, hash, CQ_PASSWORD_HASH_BYTES);
    cq_db_finalize(st);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no user named '%s'", name ? name : "") : rc;
}

cq_status cq_store_user_get(cq_store *s, const char *name, cq_user_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_db *db = cq_store_conn(s);
    if (user_find(db, name, out, NULL, err)) return err->code;
    return user_grant(db, out, false, err);
}

cq_status cq_store_user_remove(cq_store *s, const char *name, cq_err *err) {
    return cq_principal_remove(s, "user", name, "DELETE FROM sessions WHERE user_id = ?1", err);
}

/* Ends the user's sessions at now. */
static cq_status sign_out(cq_db *db, const char *what, int64_t user_id, int64_t now, cq_err *err) {
    return cq_db_run(db, what, NULL, err, "UPDATE sessions SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL",
                     "ii", user_id, now);
}

cq_status cq_store_user_passwd(cq_store *s, const char *name, const char *password, cq_err *err) {
    char hash[CQ_PASSWORD_HASH_BYTES];
    if (cq_password_check(password, err) || cq_password_hash(password, hash, err)) return err->code;
    cq_db *db = cq_store_conn(s);
    cq_user_info u;
    int64_t now = (int64_t)time(NULL);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = user_find(db, name, &u, NULL, err);
    if (!rc && !strcmp(u.source, "ldap"))
        rc = cq_err_set(err, CQ_ERR_INVALID, "%s signs in against the directory: change the password there", name);
    if (!rc)
        rc = cq_db_run(db, "set password", NULL, err, "UPDATE users SET password_hash = ?2, updated_at = ?3 WHERE id = ?1",
                       "iti", u.id, hash, now);
    if (!rc) rc = sign_out(db, "set password", u.id, now, err); /* whoever knew the old password */
    memset(hash, 0, sizeof hash);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_user_grant(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_err *err) {
    return cq_principal_grant(s, "user", name, role, kbs, err);
}

/* Records u's sign-in at now: a record, not a condition (a failure leaves last_login_at as it was). */
static cq_status signed_in(cq_db *db, cq_user_info *u, int64_t now) {
    cq_err ignored = {0};
    if (!cq_db_run(db, "record sign-in", NULL, &ignored, "UPDATE users SET last_login_at = ?2 WHERE id = ?1", "ii",
                   u->id, now))
        u->last_login_at = now;
    return CQ_OK;
}

cq_status cq_store_user_verify(cq_store *s, const char *name, const char *password, cq_user_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_db *db = cq_store_conn(s);
    char hash[CQ_PASSWORD_HASH_BYTES] = "";
    bool usable = password && strlen(password) <= CQ_PASSWORD_MAX_BYTES;
    cq_err lookup = {0};
    cq_status rc = cq_user_name_valid(name) ? user_find(db, name, out, hash, &lookup) : CQ_ERR_NOT_FOUND;
    if (rc && rc != CQ_ERR_NOT_FOUND) {
        *err = lookup;
        return rc;
    }
    if (rc && usable) verify_dummy(password); /* an unknown name costs what a wrong password costs */
    const bool ok = !rc && usable && cq_password_verify(hash, password);
    memset(hash, 0, sizeof hash);
    if (!ok) cq_err_set(err, CQ_ERR_NOT_FOUND, WRONG_LOGIN);
    else if (out->disabled_at) cq_err_set(err, CQ_ERR_NOT_FOUND, "the account %s is disabled: ask an admin", out->name);
    if (!ok || out->disabled_at) {
        memset(out, 0, sizeof *out);
        return CQ_ERR_NOT_FOUND;
    }
    if (user_grant(db, out, true, err)) return err->code;
    return signed_in(db, out, (int64_t)time(NULL));
}

cq_status cq_store_user_rights(cq_store *s, cq_user_info *u, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_user_info fresh;
    if (user_find(db, u->name, &fresh, NULL, err) || user_grant(db, &fresh, true, err)) return err->code;
    *u = fresh;
    return CQ_OK;
}

cq_status cq_store_user_disable(cq_store *s, const char *name, bool disabled, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_user_info u;
    int64_t now = (int64_t)time(NULL);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = user_find(db, name, &u, NULL, err);
    if (!rc)
        rc = cq_db_run(db, disabled ? "disable user" : "enable user", NULL, err,
                       disabled ? "UPDATE users SET disabled_at = coalesce(disabled_at, ?2), updated_at = ?2 "
                                  "WHERE id = ?1"
                                : "UPDATE users SET disabled_at = NULL, updated_at = ?2 WHERE id = ?1",
                       "ii", u.id, now);
    if (!rc && disabled) rc = sign_out(db, "disable user", u.id, now, err);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_user_directory(cq_store *s, const char *name, cq_user_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    if (cq_principal_name_check(name, "user", err)) return err->code;
    cq_db *db = cq_store_conn(s);
    int64_t now = (int64_t)time(NULL);
    cq_err lookup = {0};
    cq_status rc = user_find(db, name, out, NULL, &lookup);
    if (rc == CQ_ERR_NOT_FOUND) {
        /* no password here ("!" is no argon2id hash: a local sign-in with it always fails) */
        rc = cq_db_run(db, "add directory user", NULL, err,
                       "INSERT INTO users(name, password_hash, role, kb, created_at, updated_at, source) "
                       "VALUES(?1, '!', 'none', NULL, ?2, ?2, 'ldap')",
                       "ti", name, now);
        /* two first sign-ins at once: the other made it */
        if (rc && rc != CQ_ERR_EXISTS) return rc;
        if (!rc && cq_store_auth_set_required(s, true, err)) return err->code;
        rc = user_find(db, name, out, NULL, err);
    } else if (rc) {
        *err = lookup;
    }
    if (rc) return rc;
    if (strcmp(out->source, "ldap"))
        return cq_err_set(err, CQ_ERR_EXISTS,
                          "a local account is named %s: the directory's %s cannot sign in as it (rename one of them)",
                          name, name);
    if (out->disabled_at) return cq_err_set(err, CQ_ERR_NOT_FOUND, "the account %s is disabled: ask an admin", name);
    return signed_in(db, out, now);
}

cq_status cq_store_user_count(cq_store *s, int64_t *n, cq_err *err) {
    return cq_db_int(cq_store_conn(s), "count users", n, err, "SELECT count(*) FROM users", "");
}

/* ---- sessions ----------------------------------------------------------------------------------------------- */

cq_status cq_store_session_create(cq_store *s, int64_t user_id, int64_t idle_s, char token[CQ_SESSION_TOKEN_BYTES],
                                  int64_t *session_id, cq_err *err) {
    char hash[65];
    if (cq_secret_new(token, CQ_SESSION_TOKEN_BYTES, "cqs_", hash, err)) return err->code;
    int64_t now = (int64_t)time(NULL);
    int64_t id;
    cq_status rc = cq_db_int(cq_store_conn(s), "create session", &id, err,
                             "INSERT INTO sessions(user_id, hash, created_at, last_seen_at, expires_at) "
                             "VALUES(?1, ?2, ?3, ?3, ?4) RETURNING id",
                             "itii", user_id, hash, now, now + idle_s);
    if (!rc && session_id) *session_id = id;
    return rc;
}

cq_status cq_store_session_check(cq_store *s, const char *token, int64_t idle_s, cq_user_info *user,
                                 int64_t *session_id, cq_err *err) {
    memset(user, 0, sizeof *user);
    char hash[65];
    if (!cq_secret_hash(token, CQ_SESSION_TOKEN_BYTES, "cqs_", hash))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "not signed in");
    cq_db *db = cq_store_conn(s);
    int64_t now = (int64_t)time(NULL), id = 0, last_seen = 0;
    cq_db_stmt *st;
    if (cq_db_query(db, "check session", &st, err,
                    "SELECT " USER_COLUMNS ", x.id, x.last_seen_at FROM sessions x JOIN users u ON u.id = x.user_id "
                    "WHERE x.hash = ?1 AND x.revoked_at IS NULL AND x.expires_at > ?2 AND x.created_at > ?3 "
                    "AND u.disabled_at IS NULL",
                    "tii", hash, now, now - CQ_SESSION_MAX_AGE_S))
        return err->code;
    cq_status rc = cq_db_row(st, "check session", err);
    if (!rc) {
        user_read(st, user);
        id = cq_db_col_int(st, USER_NCOLS);
        last_seen = cq_db_col_int(st, USER_NCOLS + 1);
    }
    cq_db_finalize(st);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "the session has ended: sign in again");
    if (rc || user_grant(db, user, true, err)) return err->code;
    if (session_id) *session_id = id;
    if (now - last_seen >= 60) {
        /* best effort and without waiting, as a key's use (store/keys.c) */
        cq_err ignored = {0};
        cq_db_nowait(db, true);
        (void)cq_db_run(db, "touch session", NULL, &ignored, cq_db_dialect(db, CQ_SQL_SESSION_TOUCH), "iii", id, now,
                        idle_s);
        cq_db_nowait(db, false);
    }
    return CQ_OK;
}

cq_status cq_store_session_revoke(cq_store *s, const char *token, cq_err *err) {
    char hash[65];
    if (!cq_secret_hash(token, CQ_SESSION_TOKEN_BYTES, "cqs_", hash))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "not signed in");
    int64_t changed = 0;
    if (cq_db_run(cq_store_conn(s), "sign out", &changed, err,
                  "UPDATE sessions SET revoked_at = ?2 WHERE hash = ?1 AND revoked_at IS NULL", "ti", hash,
                  (int64_t)time(NULL)))
        return err->code;
    return changed ? CQ_OK : cq_err_set(err, CQ_ERR_NOT_FOUND, "not signed in");
}
