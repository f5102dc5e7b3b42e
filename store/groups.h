/* Groups of users (issue 30): a group has a name, a role and KBs exactly as a user has (store/grants.h), and
 * members. A user's effective rights are the user's own grant joined with the grants of every group the user is in:
 * the role is the highest of them, the KBs the union of theirs ("*" from any of them: every KB; an admin role: no
 * list, everything). The role is one for all the KBs reached, as a key's: a reader of A who is also in an editors
 * group of B may edit A and B. Give finer rights with separate groups of one role each.
 *
 * Membership has a source: 'local' (made by an admin: CLI or HTTP) or 'ldap' (from the directory: replaced by the
 * directory groups the user is in at each LDAP sign-in, store/ldap_auth.h). Removing a group removes its members'
 * rights at their next request; removing a user removes the user's memberships.
 *
 * Written once for SQLite and PostgreSQL on db/db.h. Schema (store/schema.c: SQLite 12, PostgreSQL 9):
 *   groups(id, name UNIQUE, role, kb, created_at, updated_at)  kb: as users.kb; the grant is in kb_grants (subject
 *                                                               'group')
 *   group_members(group_id → groups ON DELETE CASCADE, user_id → users ON DELETE CASCADE, source 'local'|'ldap') */
#ifndef CQ_STORE_GROUPS_H
#define CQ_STORE_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "db/db.h"
#include "store/store.h"
#include "store/grants.h"

#define CQ_GROUP_NAME_BYTES 64 /* at most 63 bytes, the characters of a user name */

typedef struct {
    int64_t id;
    char name[CQ_GROUP_NAME_BYTES];
    cq_key_role role;
    char kb[CQ_GRANT_BYTES]; /* as granted (store/grants.h) */
    bool kb_gone;            /* every KB granted was deleted */
    int64_t members;         /* how many users are in it */
    int64_t created_at, updated_at;
} cq_group_info;

typedef struct {
    char user[64];
    char source[8]; /* "local" | "ldap" */
} cq_group_member;

/* A valid group name: as a user name (cq_user_name_valid). */
bool cq_group_name_valid(const char *name);

/* Adds a group: INVALID for a bad name, role or grant (cq_grants_check), EXISTS for a name taken, NOT_FOUND for a KB
 * that does not exist; nothing changed then. info may be NULL. */
cq_status cq_store_group_add(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_group_info *info,
                             cq_err *err);
/* Every group, oldest first, with the KBs as granted and the number of members. */
cq_status cq_store_group_list(cq_store *s, cq_group_info **out, size_t *n, cq_err *err);
/* The group named name: NOT_FOUND when there is none. */
cq_status cq_store_group_get(cq_store *s, const char *name, cq_group_info *out, cq_err *err);
/* Changes a group's role and KBs (checked as for cq_store_group_add): NOT_FOUND when there is none. */
cq_status cq_store_group_set(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_err *err);
/* Removes a group, its grants and memberships: NOT_FOUND when there is none. */
cq_status cq_store_group_remove(cq_store *s, const char *name, cq_err *err);

/* Puts user into group (source 'local'; a membership from the directory becomes local): NOT_FOUND for an unknown
 * group or user, EXISTS when the user is a local member already. */
cq_status cq_store_group_member_add(cq_store *s, const char *group, const char *user, cq_err *err);
/* Takes user out of group: NOT_FOUND for an unknown group or user, or a user who is not a member. */
cq_status cq_store_group_member_remove(cq_store *s, const char *group, const char *user, cq_err *err);
/* The members of group, by name: NOT_FOUND for an unknown group. */
cq_status cq_store_group_members(cq_store *s, const char *group, cq_group_member **out, size_t *n, cq_err *err);
/* The names of the groups user_id is in, joined by ',' (sorted), into out. */
cq_status cq_store_user_groups(cq_store *s, int64_t user_id, char *out, size_t cap, cq_err *err);

/* Makes user_id's memberships of source 'ldap' exactly the groups named in names (n of them; names of groups that do
 * not exist are skipped and counted in *missing, may be NULL); local memberships stay. Call inside a transaction or
 * not (it opens its own). */
cq_status cq_store_group_sync(cq_store *s, int64_t user_id, const char *const *names, size_t n, size_t *missing,
                              cq_err *err);

/* The effective rights of user_id (see above): *role and kb (the KBs that exist now, as cq_grants_read gives them
 * for authorisation), starting from the user's own role and grant (own_kb: as cq_grants_read gave it, current). */
cq_status cq_groups_effective(cq_db *db, int64_t user_id, cq_key_role *role, char kb[CQ_GRANT_BYTES], cq_err *err);

/* Joins grant list add into the list into (both as cq_grants_read gives them: "", "*" or names): "*" wins, names
 * once each. False when the union does not fit (into keeps what fitted). */
bool cq_grant_union(char into[CQ_GRANT_BYTES], const char *add);

#endif
