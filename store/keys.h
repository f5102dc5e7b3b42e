/* API keys for the HTTP API: the secret is shown once at creation and stored only as its SHA-256.
 *
 * Roles: admin (everything: keys, KBs, every KB's documents and questions), editor (upload and delete documents of
 * one KB, and read it), reader (retrieve and ask in one KB). A key's KB is one existing KB, or "*" for every KB;
 * admin keys have none (""). The grant is bound to the KB's id, not its name (issue 29 item 10): delete KB B and
 * create a new B, and the old keys of B reach nothing. Secrets are "cq_" + 40 hex digits (160 random bits), so an
 * unsalted hash is enough.
 *
 * Written once for both stores on db/db.h (issue 28); the one statement that differs is db/dialect.h's
 * CQ_SQL_KEY_TOUCH.
 *
 * Open mode (a developer's machine: no key needed) is possible only while authentication is not required. Creating
 * a key requires it for good: revoking every key afterwards does not reopen the server (a 401 for everyone is
 * safer than a silent open door). Only an admin's explicit `clauseqa keys open-mode on` lifts it.
 *
 * Schema (migrations in index/store.c and index/store_pg.c):
 *   api_keys(id, name, prefix, hash UNIQUE, role, kb, created_at, last_used_at, revoked_at, kb_id)
 *     kb: the KB's name when the key was made ("*", or NULL for admin keys); kb_id: that KB's id (NULL: none)
 *   settings: 'auth_required' = '1' once required */
#ifndef CQ_STORE_KEYS_H
#define CQ_STORE_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store.h"

typedef enum { CQ_ROLE_NONE = 0, CQ_ROLE_READER = 1, CQ_ROLE_EDITOR = 2, CQ_ROLE_ADMIN = 3 } cq_key_role;

#define CQ_KEY_SECRET_BYTES 44 /* "cq_" + 40 hex + NUL */

typedef struct {
    int64_t id;
    char name[64];
    char prefix[16];   /* the secret's first characters, to recognise a key in lists */
    cq_key_role role;
    char kb[128];      /* KB name (as it was when the key was made), "*" for every KB, "" for admin keys */
    int64_t kb_id;     /* the KB's id; 0 for "*" and admin keys */
    bool kb_gone;      /* the KB was deleted: the key reaches nothing (cq_key_allows) */
    int64_t created_at, last_used_at, revoked_at; /* unix seconds; 0 = never */
} cq_key_info;

#define CQ_KEY_PREFIX_CHARS 10 /* "cq_" + 7 hex digits */

const char *cq_key_role_name(cq_key_role role); /* "admin" | "editor" | "reader" | "none" */
cq_key_role cq_key_role_parse(const char *name); /* CQ_ROLE_NONE when unknown */

/* Creates a key. kb is required for editor/reader (the name of an existing KB, or "*") and must be NULL or "" for
 * admin: NOT_FOUND ("no knowledge base named …") when there is no such KB. The secret (CQ_KEY_SECRET_BYTES with its
 * NUL) is written to secret; info (may be NULL) receives the stored row. */
cq_status cq_store_key_create(cq_store *s, const char *name, cq_key_role role, const char *kb,
                              char secret[CQ_KEY_SECRET_BYTES], cq_key_info *info, cq_err *err);

/* Every key, revoked ones included, oldest first. */
cq_status cq_store_key_list(cq_store *s, cq_key_info **out, size_t *n, cq_err *err);

/* Revokes key id: NOT_FOUND when there is no such key, INVALID when it is revoked already. One guarded UPDATE: of
 * two admins revoking at once, one succeeds. */
cq_status cq_store_key_revoke(cq_store *s, int64_t id, cq_err *err);

/* Finds the active key whose secret this is: NOT_FOUND when unknown or revoked. Records the use (at most once a
 * minute, so that checking a key is a read in the common case, and never waiting for a lock). A key whose KB was
 * deleted is found with kb_gone set and kb "": it reaches nothing. */
cq_status cq_store_key_check(cq_store *s, const char *secret, cq_key_info *out, cq_err *err);

/* Number of keys not revoked. */
cq_status cq_store_key_count_active(cq_store *s, int64_t *n, cq_err *err);

/* Whether authentication is required (set by the first key, or by cq_store_auth_set_required), and since when
 * (unix seconds; may be NULL). */
cq_status cq_store_auth_required(cq_store *s, bool *required, int64_t *since, cq_err *err);
cq_status cq_store_auth_set_required(cq_store *s, bool required, cq_err *err);
/* Open mode may apply: authentication is not required and no key is active. */
cq_status cq_store_auth_open(cq_store *s, bool *open, cq_err *err);

/* Does a key of this role and KB allow `need` on KB kb_name (NULL: an action on no particular KB)? Admin allows
 * everything; editor implies reader; a KB-less action (list KBs aside) needs admin; a key whose KB is gone allows
 * nothing. key->kb is the name of the key's KB now (cq_store_key_check reads it through the KB's id). */
int cq_key_allows(const cq_key_info *key, cq_key_role need, const char *kb_name);

#endif
