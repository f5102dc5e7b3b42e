/* Local user accounts and their sign-in sessions (issue 30).
 *
 * A user has a name, a password kept only as an argon2id hash (Debian's libargon2), a role and KBs exactly as an
 * API key has (store/grants.h, store/keys.h): a signed-in user is authorised as a key of the same role and KBs.
 * Making a user turns authentication on, as the first key does (cq_store_auth_required).
 *
 * Password hashing: argon2id, t = CQ_PASSWORD_T_COST passes over m = CQ_PASSWORD_M_COST_KIB KiB with one lane, a
 * 16-byte random salt, a 32-byte hash, stored in the PHC string form ("$argon2id$v=19$m=…,t=…,p=…$salt$hash"), so
 * that a hash made under other parameters still verifies. The parameters are OWASP's second recommendation for
 * argon2id (19 MiB, 2 passes); one verification took 34-79 ms on the 2-core development box under loads of 7.4 and
 * 4.7 (docs/API.md "Accounts"; t=3 with 64 MiB took 209-396 ms), well under the half second a sign-in may take. Passwords have
 * CQ_PASSWORD_MIN_CHARS to CQ_PASSWORD_MAX_BYTES. A sign-in with an unknown name verifies a dummy hash, so that
 * it takes as long as a wrong password.
 *
 * Sessions: a random 256-bit token ("cqs_" + 64 hex digits), kept only as its SHA-256. A session expires after
 * idle_s seconds without use (sliding: each use, at most once a minute, pushes the expiry) and at the latest
 * CQ_SESSION_MAX_AGE_S after sign-in; signing out revokes it; a new password or the user's removal ends every
 * session of the user.
 *
 * Written once for SQLite and PostgreSQL on db/db.h. Schema (store/schema.c: SQLite migration 10, PostgreSQL 7):
 *   users(id, name UNIQUE, password_hash, role, kb, created_at, updated_at, last_login_at)
 *     kb: the KBs as granted ("*", names joined by ',', NULL for admins); the grant is in kb_grants (subject 'user')
 *   sessions(id, user_id → users ON DELETE CASCADE, hash UNIQUE, created_at, last_seen_at, expires_at, revoked_at) */
#ifndef CQ_STORE_USERS_H
#define CQ_STORE_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"
#include "store/grants.h"

#define CQ_PASSWORD_T_COST 2
#define CQ_PASSWORD_M_COST_KIB 19456
#define CQ_PASSWORD_MIN_CHARS 8
#define CQ_PASSWORD_MAX_BYTES 1024
#define CQ_PASSWORD_HASH_BYTES 128 /* the encoded form, its NUL included */

#define CQ_USER_NAME_BYTES 64 /* at most 63 bytes */
#define CQ_SESSION_TOKEN_BYTES 69 /* "cqs_" + 64 hex + NUL */
#define CQ_SESSION_IDLE_S (12 * 3600)
#define CQ_SESSION_MAX_AGE_S (7 * 24 * 3600)

typedef struct {
    int64_t id;
    char name[CQ_USER_NAME_BYTES];
    cq_key_role role;
    char kb[CQ_GRANT_BYTES]; /* as a key's (store/keys.h): from a session check the KBs that exist now, from the list
                                as granted */
    bool kb_gone;            /* every KB granted was deleted: the user reaches nothing */
    int64_t created_at, updated_at, last_login_at; /* unix seconds; 0 = never */
    char source[8];      /* "local" (a password here) or "ldap" (signs in against the directory, store/ldap_auth.h) */
    int64_t disabled_at; /* 0: may sign in; else when an admin disabled the account (store/groups.h, issue 30) */
} cq_user_info;

/* ---- passwords ---- */
/* INVALID (with what is wrong) for a password too short (characters), too long, or holding a NUL or a control
 * character other than a tab. */
cq_status cq_password_check(const char *password, cq_err *err);
/* argon2id with the parameters above and a random salt: the encoded hash into out. */
cq_status cq_password_hash(const char *password, char out[CQ_PASSWORD_HASH_BYTES], cq_err *err);
/* Whether password matches the encoded hash (false for a malformed hash). */
bool cq_password_verify(const char *encoded, const char *password);

/* A valid user name: 1-63 bytes of letters, digits, Chinese characters, '-', '_', '.', '@'. */
bool cq_user_name_valid(const char *name);
/* The same rule for a user's or a group's name (what: "user" or "group"): INVALID with a message when it breaks it. */
cq_status cq_principal_name_check(const char *name, const char *what, cq_err *err);
/* The id of the user or group (what: "user" or "group") named name: NOT_FOUND ("no user named 'x'") when none. */
cq_status cq_principal_id(cq_db *db, const char *what, const char *name, int64_t *id, cq_err *err);
/* Opens a transaction (*own: whether this call began it; close it with cq_db_end), then cq_principal_id. */
cq_status cq_principal_begin(cq_db *db, const char *what, const char *name, int64_t *id, bool *own, cq_err *err);
/* Adds a key, a user or a group (l) in one transaction (or the caller's): sql, an INSERT … RETURNING id of values as
 * cq_db_run's, then its grant; a key or a user turns authentication on. info (may be NULL) gets what was made
 * (cq_principal_set). EXISTS ("a user named 'x' exists already") for a name taken; nothing changed on a failure. */
cq_status cq_principal_insert(cq_store *s, const cq_principal_layout *l, const char *name, cq_key_role role,
                              const char *grant, int64_t now, void *info, cq_err *err, const char *sql,
                              const char *kinds, ...);
/* Removes the user or group (what) named name: first (may be NULL: a statement of ?1, its id), its memberships, its
 * grant and its row. NOT_FOUND when there is none. */
cq_status cq_principal_remove(cq_store *s, const char *what, const char *name, const char *first, cq_err *err);
/* Changes the role and KBs of the user or group (what) named name (checked as for adding): NOT_FOUND when none. */
cq_status cq_principal_grant(cq_store *s, const char *what, const char *name, cq_key_role role, const char *kbs,
                             cq_err *err);

/* ---- users ---- */
/* Adds a user: INVALID for a bad name, password, role or grant (store/grants.h), EXISTS ("a user named … exists
 * already") for a name taken, NOT_FOUND for a KB that does not exist; nothing is changed then. info may be NULL. */
cq_status cq_store_user_add(cq_store *s, const char *name, const char *password, cq_key_role role, const char *kbs,
                            cq_user_info *info, cq_err *err);
/* Every user, oldest first, with the KBs as granted. */
cq_status cq_store_user_list(cq_store *s, cq_user_info **out, size_t *n, cq_err *err);
/* The user named name (KBs as granted): NOT_FOUND when there is none. */
cq_status cq_store_user_get(cq_store *s, const char *name, cq_user_info *out, cq_err *err);
/* Removes a user and the user's sessions and grants: NOT_FOUND when there is none. */
cq_status cq_store_user_remove(cq_store *s, const char *name, cq_err *err);
/* Sets a new password (checked as above) and ends every session of the user: NOT_FOUND when there is no such user. */
cq_status cq_store_user_passwd(cq_store *s, const char *name, const char *password, cq_err *err);
/* Changes a user's role and KBs (checked as for cq_store_user_add); the sessions follow at their next request. */
cq_status cq_store_user_grant(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_err *err);
/* Checks a name and password: NOT_FOUND with the one message "wrong user name or password" for an unknown name and a
 * wrong password alike (taking as long), nothing changed; NOT_FOUND ("the account … is disabled") for the right
 * password of a disabled account. On success out is the user (role and KBs: the user's own joined with the groups',
 * store/groups.h; the KBs that exist now) and the sign-in time is recorded. */
cq_status cq_store_user_verify(cq_store *s, const char *name, const char *password, cq_user_info *out, cq_err *err);
/* Disables (disabled: no sign-in, and every session ends) or enables a user again: NOT_FOUND when there is none. */
cq_status cq_store_user_disable(cq_store *s, const char *name, bool disabled, cq_err *err);
/* The user of a directory sign-in (store/ldap_auth.h): made on the first one (source 'ldap', role none, no password
 * here: its rights come from its groups), found afterwards. EXISTS when a local account has the name (the
 * directory does not take it over); NOT_FOUND ("the account … is disabled") when it is disabled. Records the sign-in time.
 * out: the user, with the KBs as granted (cq_store_user_rights gives what they reach now). */
cq_status cq_store_user_directory(cq_store *s, const char *name, cq_user_info *out, cq_err *err);
/* The rights a user has now (own grant joined with the groups', store/groups.h) into u->role and u->kb. */
cq_status cq_store_user_rights(cq_store *s, cq_user_info *u, cq_err *err);
/* Number of users. */
cq_status cq_store_user_count(cq_store *s, int64_t *n, cq_err *err);

/* ---- sessions ---- */
/* A new session of user_id, expiring after idle_s seconds without use: its token (shown once) and id. */
cq_status cq_store_session_create(cq_store *s, int64_t user_id, int64_t idle_s, char token[CQ_SESSION_TOKEN_BYTES],
                                  int64_t *session_id, cq_err *err);
/* The user of a live session token (KBs that exist now) and the session's id: NOT_FOUND for a token unknown,
 * revoked or expired. Pushes the expiry to now + idle_s (at most once a minute, never waiting for a lock). */
cq_status cq_store_session_check(cq_store *s, const char *token, int64_t idle_s, cq_user_info *user,
                                 int64_t *session_id, cq_err *err);
/* Ends the session of a token (signing out): NOT_FOUND when it is not live. */
cq_status cq_store_session_revoke(cq_store *s, const char *token, cq_err *err);

#endif
