/* The audit trail (issue 30): who signed in (or failed to), uploaded, deleted, created or deleted a KB, corrected a
 * version, changed a user, a grant or a key — when, from where. Written by the HTTP service after each such request
 * succeeds (and at each sign-in), and by the command line for users and keys; read by admins (GET /api/v1/audit).
 * Rows are never changed; they go only with the database.
 *
 * Written once for SQLite and PostgreSQL on db/db.h. Schema (store/schema.c: SQLite migration 10, PostgreSQL 7):
 *   audit(id, at, actor_kind, actor_id, actor_name, action, kb, target, client) */
#ifndef CQ_STORE_AUDIT_H
#define CQ_STORE_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

typedef struct {
    int64_t id;
    int64_t at;          /* unix seconds */
    char actor_kind[16]; /* "user", "key", "open" (open mode), "cli" (the command line), "anonymous" (a failed
                            sign-in) */
    int64_t actor_id;    /* the user's or key's id; 0 otherwise */
    char actor_name[64]; /* the user's or key's name, the system user of the command line, the name tried */
    char action[32];     /* sign_in, sign_in_failed, upload, document_delete, job_cancel, kb_create, kb_delete,
                            version_edit, version_reset, user_add, user_set, user_passwd, user_remove, key_create,
                            key_revoke, open_mode */
    char kb[256];        /* the KB it concerns, "" for none */
    char target[256];    /* what it acted on: "document 12", a file name, "user alice", "key 3" */
    char client[64];     /* the client's address, "" from the command line */
} cq_audit_entry;

/* Appends an entry (id and at are set here; text fields longer than their buffers are cut). */
cq_status cq_store_audit_add(cq_store *s, const cq_audit_entry *e, cq_err *err);
/* The newest entries first, at most limit, with ids below before_id (0: from the newest), of one action (NULL or "":
 * any). */
cq_status cq_store_audit_list(cq_store *s, int64_t before_id, size_t limit, const char *action, cq_audit_entry **out,
                              size_t *n, cq_err *err);

#endif
