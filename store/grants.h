/* The knowledge bases a key or a user may reach (issue 30): one role, and either every KB ("*") or a list of KBs,
 * each bound to the KB's id (issue 29 item 10: delete KB B and create a new B, and the old grants of B reach
 * nothing). Admins have no list: they reach everything.
 *
 * In memory a grant is text: "" (admin), "*" (every KB), or KB names joined by ',' ("laws,合同"); KB names never hold
 * a ',' (cq_store_kb_name_valid). Given to key and user creation, each name must be an existing KB; read back for
 * authorisation, the list holds the names of the granted KBs that still exist (cq_grants_read); read for a listing,
 * the names as they were granted, with a flag when every one of them is gone.
 *
 * Written once for SQLite and PostgreSQL on db/db.h. Schema (store/schema.c: SQLite migration 10, PostgreSQL 7):
 *   kb_grants(subject, subject_id, kb_id, kb)   subject: 'key' (api_keys.id) or 'user' (users.id); kb: the KB's
 *                                                name when granted */
#ifndef CQ_STORE_GRANTS_H
#define CQ_STORE_GRANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "db/db.h"

/* A grant's text, its NUL included: up to 16 KBs of 64 characters. */
#define CQ_GRANT_BYTES 1024
#define CQ_GRANT_MAX_KBS 16

typedef enum { CQ_ROLE_NONE = 0, CQ_ROLE_READER = 1, CQ_ROLE_EDITOR = 2, CQ_ROLE_ADMIN = 3 } cq_key_role;

const char *cq_key_role_name(cq_key_role role); /* "admin" | "editor" | "reader" | "none" */
cq_key_role cq_key_role_parse(const char *name); /* CQ_ROLE_NONE when unknown */

/* Checks a grant given for a new key or user of this role (what: "key" or "user", for the messages): admin takes
 * none, editor and reader need "*" or 1 to CQ_GRANT_MAX_KBS valid KB names (a name given twice counts once).
 * INVALID with a message otherwise. norm (may be NULL) gets the grant as it is stored: "" for admin, "*", or the
 * names once each, in the order given. Does not look at the database. */
cq_status cq_grants_check(cq_key_role role, const char *kbs, const char *what, char norm[CQ_GRANT_BYTES],
                          cq_err *err);

/* Writes the grant of subject ("key" | "user") subject_id: its KB rows, replacing any it had. Each name must be an
 * existing KB: NOT_FOUND ("no knowledge base named …", and what to do) otherwise, with nothing written when the
 * caller rolls back. "" and "*" write no rows. Call inside a transaction. */
cq_status cq_grants_write(cq_db *db, const char *subject, int64_t subject_id, const char *kbs, cq_err *err);

/* Reads the grant of subject_id into kb, which holds its stored form (api_keys.kb, users.kb, groups.kb): "" and "*"
 * stay as they are; otherwise kb gets the granted KBs' names, those that exist now when current (authorisation), all
 * of them as granted otherwise (listings); *gone (may be NULL) is set when none of them exists any more (the grant
 * reaches nothing). */
cq_status cq_grants_read(cq_db *db, const char *subject, int64_t subject_id, bool current, char kb[CQ_GRANT_BYTES],
                         bool *gone, cq_err *err);

/* Removes subject_id's rows (a user removed). */
cq_status cq_grants_remove(cq_db *db, const char *subject, int64_t subject_id, cq_err *err);

/* Does a role with this grant (as cq_grants_read gives it for authorisation: the KBs that exist now) allow `need` on
 * KB kb_name (NULL: an action on no particular KB)? Admin allows everything; editor implies reader; a KB-less action
 * needs admin; an empty list allows nothing. */
bool cq_grant_allows(cq_key_role role, const char *kbs, cq_key_role need, const char *kb_name);

/* Whether the grant list kbs names kb ("*" names every KB). */
bool cq_grant_has(const char *kbs, const char *kb);

/* ---- what keys, users and groups share ---- */
/* Where an info struct of a key, user or group (cq_key_info, cq_user_info, cq_group_info) keeps the fields all three
 * have, by offsetof (CQ_PRINCIPAL_LAYOUT): the helpers below read and fill them for any of the three. */
typedef struct {
    const char *subject; /* "key" | "user" | "group": the grants' subject */
    size_t size, id, name, name_bytes, role, kb, kb_gone, created_at;
} cq_principal_layout;
#define CQ_PRINCIPAL_LAYOUT(type, subject)                                                                          \
    {subject, sizeof(type), offsetof(type, id), offsetof(type, name), sizeof(((type *)0)->name),                      \
     offsetof(type, role), offsetof(type, kb), offsetof(type, kb_gone), offsetof(type, created_at)}

/* The columns of those fields in their table aliased t (a string literal), CQ_PRINCIPAL_NCOLS of them. */
#define CQ_PRINCIPAL_COLUMNS(t) t ".id, " t ".name, " t ".role, coalesce(" t ".kb, ''), " t ".created_at, "
#define CQ_PRINCIPAL_NCOLS 5

/* Reads CQ_PRINCIPAL_COLUMNS from the row's first column into info (the kb as stored, before cq_grants_read). */
void cq_principal_from_row(const cq_principal_layout *l, cq_db_stmt *st, void *info);
/* A principal just made: info zeroed, then its id, name, role, grant (as stored) and created_at. */
void cq_principal_set(const cq_principal_layout *l, void *info, int64_t id, const char *name, cq_key_role role,
                      const char *grant, int64_t now);
/* Every row of sql (no placeholders) through read into *out (*n of them), each with its grant as granted
 * (cq_grants_read, not current): nothing kept on a failure. */
cq_status cq_principal_list(cq_db *db, const cq_principal_layout *l, const char *what,
                            bool (*read)(cq_db_stmt *st, void *elem), const char *sql, void **out, size_t *n,
                            cq_err *err);

#endif
