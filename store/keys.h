/* API keys for the HTTP API: the secret is shown once at creation and stored only as its SHA-256.
 *
 * Roles: admin (everything: keys, KBs, every KB's documents and questions), editor (upload and delete documents of
 * its KBs, and read them), reader (retrieve and ask in its KBs). A key's KBs are one or more existing KBs, or "*"
 * for every KB; admin keys have none (""): a grant of store/grants.h, bound to the KBs' ids (issue 29 item 10:
 * delete KB B and create a new B, and the old keys of B reach nothing). Users (store/users.h) are authorised the
 * same way: a signed-in user is a key of the user's role and KBs (cq_key_allows). Secrets are "cq_" + 40 hex digits (160 random bits), so an
 * unsalted hash is enough.
 *
 * Written once for both stores on db/db.h (issue 28); the one statement that differs is db/dialect.h's
 * CQ_SQL_KEY_TOUCH.
 *
 * Open mode (a developer's machine: no key needed) is possible only while authentication is not required. Creating
 * a key requires it for good: revoking every key afterwards does not reopen the server (a 401 for everyone is
 * safer than a silent open door). Only an admin's explicit `clauseqa keys open-mode on` lifts it.
 *
 * Schema (store/schema.c):
 *   api_keys(id, name, prefix, hash UNIQUE, role, kb, created_at, last_used_at, revoked_at, kb_id)
 *     kb: the KBs' names when the key was made, joined by ',' ("*", or NULL for admin keys); the grant itself is in
 *     kb_grants (store/grants.h; subject 'key'). kb_id: what held a one-KB grant before kb_grants (migrated there,
 *     no longer read)
 *   settings: 'auth_required' = '1' once required */
#ifndef CQ_STORE_KEYS_H
#define CQ_STORE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"
#include "store/grants.h"

#define CQ_KEY_SECRET_BYTES 44 /* "cq_" + 40 hex + NUL */

typedef struct {
    int64_t id;
    char name[64];
    char prefix[16];   /* the secret's first characters, to recognise a key in lists */
    cq_key_role role;
    char kb[CQ_GRANT_BYTES]; /* its KBs (store/grants.h): "*" for every KB, "" for admin keys, else names joined by
                                ','; from cq_store_key_check those that exist now, from the list as granted */
    bool kb_gone;      /* every KB it was granted was deleted: the key reaches nothing (cq_key_allows) */
    int64_t created_at, last_used_at, revoked_at; /* unix seconds; 0 = never */
} cq_key_info;

#define CQ_KEY_PREFIX_CHARS 10 /* "cq_" + 7 hex digits */

/* Creates a key. kb is required for editor/reader (names of existing KBs joined by ',', or "*") and must be NULL or
 * "" for admin: NOT_FOUND ("no knowledge base named …") when one of them does not exist, and nothing is made. The secret (CQ_KEY_SECRET_BYTES with its
 * NUL) is written to secret; info (may be NULL) receives the stored row. */
cq_status cq_store_key_create(cq_store *s, const char *name, cq_key_role role, const char *kb,
                              char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err);

/* n random bytes from the kernel's generator (getrandom). */
cq_status cq_random_bytes(void *out, size_t n, cq_err *err);
/* A new secret of bytes - 1 characters (at most 64 of them random) into out: prefix, then random hex digits (the
 * kernel's generator); its SHA-256 in hex, the form the store keeps, into hash. */
cq_status cq_secret_new(char *out, size_t bytes, const char *prefix, char hash[65], cq_err *err);
/* The SHA-256 of secret into hash when secret has cq_secret_new's form (bytes - 1 characters, prefix first). */
bool cq_secret_hash(const char *secret, size_t bytes, const char *prefix, char hash[65]);

/* Every key, revoked ones included, oldest first. */
cq_status cq_store_key_list(cq_store *s, cq_key_info **out, size_t *n, cq_err *err);

/* Revokes key id: NOT_FOUND when there is no such key, INVALID when it is revoked already. One guarded UPDATE: of
 * two admins revoking at once, one succeeds. */
cq_status cq_store_key_revoke(cq_store *s, int64_t id, cq_err *err);

/* Finds the active key whose secret this is: NOT_FOUND when unknown or revoked. Records the use (at most once a
 * minute, so that checking a key is a read in the common case, and never waiting for a lock). kb lists the key's KBs
 * that exist now; a key whose every KB was deleted is found with kb_gone set and kb "": it reaches nothing. */
cq_status cq_store_key_check(cq_store *s, const char *secret, cq_key_info *out, cq_err *err);

/* Number of keys not revoked. */
cq_status cq_store_key_count_active(cq_store *s, int64_t *n, cq_err *err);

/* Whether authentication is required (set by the first key, or by cq_store_auth_set_required), and since when
 * (unix seconds; may be NULL). */
cq_status cq_store_auth_required(cq_store *s, bool *required, int64_t *since, cq_err *err);
cq_status cq_store_auth_set_required(cq_store *s, bool required, cq_err *err);
/* Open mode may apply: authentication is not required and no key is active. */
cq_status cq_store_auth_open(cq_store *s, bool *open, cq_err *err);

/* Does a key of this role and KBs allow `need` on KB kb_name (NULL: an action on no particular KB)? Admin allows
 * everything; editor implies reader; a KB-less action (list KBs aside) needs admin; a key whose KBs are all gone
 * allows nothing. key->kb lists the key's KBs that exist now (cq_store_key_check reads them through the KBs' ids).
 * cq_grant_allows (store/grants.h) is the rule; this is it for a key. */
int cq_key_allows(const cq_key_info *key, cq_key_role need, const char *kb_name);

#endif
