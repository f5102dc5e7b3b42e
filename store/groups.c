/* Groups, membership and effective rights (store/groups.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/users.h"

bool cq_group_name_valid(const char *name) { return cq_user_name_valid(name); }

static const cq_principal_layout GROUP = CQ_PRINCIPAL_LAYOUT(cq_group_info, "group");
#define GROUP_COLUMNS                                                                                               \
    CQ_PRINCIPAL_COLUMNS("g") "g.updated_at, (SELECT count(*) FROM group_members m WHERE m.group_id = g.id) "

static bool group_from_row(cq_db_stmt *st, void *elem) {
    cq_group_info *g = elem;
    cq_principal_from_row(&GROUP, st, g);
    g->updated_at = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS);
    g->members = cq_db_col_int(st, CQ_PRINCIPAL_NCOLS + 1);
    return true;
}

cq_status cq_store_group_add(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_group_info *info,
                             cq_err *err) {
    char grant[CQ_GRANT_BYTES];
    if (cq_principal_name_check(name, "group", err) || cq_grants_check(role, kbs, "group", grant, err)) return err->code;
    int64_t now = (int64_t)time(NULL);
    cq_status rc = cq_principal_insert(s, &GROUP, name, role, grant, now, info, err,
                                       "INSERT INTO groups(name, role, kb, created_at, updated_at) "
                                       "VALUES(?1, ?2, ?3, ?4, ?4) RETURNING id",
                                       "ttti", name, cq_key_role_name(role), grant[0] ? grant : NULL, now);
    if (!rc && info) info->updated_at = now;
    return rc;
}

cq_status cq_store_group_list(cq_store *s, cq_group_info **out, size_t *n, cq_err *err) {
    return cq_principal_list(cq_store_conn(s), &GROUP, "list groups", group_from_row,
                             "SELECT " GROUP_COLUMNS "FROM groups g ORDER BY g.id", (void **)out, n, err);
}

cq_status cq_store_group_get(cq_store *s, const char *name, cq_group_info *out, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_status rc = cq_db_one(db, "find group", group_from_row, out, sizeof *out, err,
                             "SELECT " GROUP_COLUMNS "FROM groups g WHERE g.name = ?1", "t", name);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "no group named '%s'", name ? name : "");
    return rc ? rc : cq_grants_read(db, GROUP.subject, out->id, false, out->kb, &out->kb_gone, err);
}

cq_status cq_store_group_set(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_err *err) {
    return cq_principal_grant(s, "group", name, role, kbs, err);
}

cq_status cq_store_group_remove(cq_store *s, const char *name, cq_err *err) {
    return cq_principal_remove(s, "group", name, NULL, err);
}

/* Puts user into group (add) or takes the user out. */
static cq_status membership(cq_store *s, const char *group, const char *user, bool add, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t gid = 0, uid = 0, changed = 0;
    bool own;
    cq_status rc = cq_principal_begin(db, "group", group, &gid, &own, err);
    if (!rc) rc = cq_principal_id(db, "user", user, &uid, err);
    if (!rc && !add) {
        rc = cq_db_run(db, "remove member", &changed, err,
                       "DELETE FROM group_members WHERE group_id = ?1 AND user_id = ?2", "ii", gid, uid);
        if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "%s is not in group '%s'", user, group);
    }
    /* a membership from the directory becomes local: it stays when the directory drops it */
    if (!rc && add)
        rc = cq_db_run(db, "add member", &changed, err,
                       "UPDATE group_members SET source = 'local' WHERE group_id = ?1 AND user_id = ?2 AND "
                       "source <> 'local'",
                       "ii", gid, uid);
    if (!rc && add && !changed) {
        rc = cq_db_run(db, "add member", NULL, err,
                       "INSERT INTO group_members(group_id, user_id, source) VALUES(?1, ?2, 'local')", "ii", gid, uid);
        if (rc == CQ_ERR_EXISTS)
            cq_err_set(err, CQ_ERR_EXISTS, "%s is in group '%s' already", user, group);
    }
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_group_member_add(cq_store *s, const char *group, const char *user, cq_err *err) {
    return membership(s, group, user, true, err);
}

cq_status cq_store_group_member_remove(cq_store *s, const char *group, const char *user, cq_err *err) {
    return membership(s, group, user, false, err);
}

static bool member_from_row(cq_db_stmt *st, void *elem) {
    cq_group_member *m = elem;
    cq_db_col_copy(st, 0, m->user, sizeof m->user);
    cq_db_col_copy(st, 1, m->source, sizeof m->source);
    return true;
}

cq_status cq_store_group_members(cq_store *s, const char *group, cq_group_member **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db *db = cq_store_conn(s);
    int64_t id = 0;
    if (cq_principal_id(db, "group", group, &id, err)) return err->code;
    return cq_db_list(db, "list members", sizeof **out, member_from_row, NULL, (void **)out, n, err,
                      "SELECT u.name, m.source FROM group_members m JOIN users u ON u.id = m.user_id "
                      "WHERE m.group_id = ?1 ORDER BY u.name",
                      "i", id);
}

cq_status cq_store_user_groups(cq_store *s, int64_t user_id, char *out, size_t cap, cq_err *err) {
    if (cap) out[0] = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "user's groups", &st, err,
                    "SELECT g.name FROM group_members m JOIN groups g ON g.id = m.group_id WHERE m.user_id = ?1 "
                    "ORDER BY g.name",
                    "i", user_id))
        return err->code;
    size_t len = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "user's groups", &rc, err)) {
        const char *name = cq_db_col_text(st, 0);
        int w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", name ? name : "");
        if (w > 0 && (size_t)w < cap - len) len += (size_t)w;
        else out[len] = 0;
    }
    cq_db_finalize(st);
    return rc;
}

cq_status cq_store_group_sync(cq_store *s, int64_t user_id, const char *const *names, size_t n, size_t *missing,
                              cq_err *err) {
    if (missing) *missing = 0;
    cq_db *db = cq_store_conn(s);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc)
        rc = cq_db_run(db, "directory groups", NULL, err,
                       "DELETE FROM group_members WHERE user_id = ?1 AND source = 'ldap'", "i", user_id);
    for (size_t i = 0; i < n && !rc; i++) {
        int64_t gid = 0;
        rc = cq_principal_id(db, "group", names[i], &gid, err);
        if (rc == CQ_ERR_NOT_FOUND) { /* no such group here: counted, not an error */
            cq_err_clear(err);
            rc = CQ_OK;
            if (missing) (*missing)++;
            continue;
        }
        /* a local membership of the same group stays as it is */
        if (!rc)
            rc = cq_db_run(db, "directory groups", NULL, err,
                           "INSERT INTO group_members(group_id, user_id, source) VALUES(?1, ?2, 'ldap') "
                           "ON CONFLICT (group_id, user_id) DO NOTHING",
                           "ii", gid, user_id);
    }
    return cq_db_end(db, own, rc, err);
}

bool cq_grant_union(char into[CQ_GRANT_BYTES], const char *add) {
    if (!add || !*add || !strcmp(into, "*")) return true;
    if (!strcmp(add, "*")) {
        snprintf(into, CQ_GRANT_BYTES, "*");
        return true;
    }
    size_t len = strlen(into);
    bool fits = true;
    const char *p = add;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char name[CQ_GRANT_BYTES];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if (n && !cq_grant_has(into, name)) {
            if (len + (len ? 1 : 0) + n + 1 > CQ_GRANT_BYTES) fits = false;
            else len += (size_t)snprintf(into + len, CQ_GRANT_BYTES - len, "%s%s", len ? "," : "", name);
        }
        if (!end) break;
        p = end + 1;
    }
    return fits;
}

typedef struct {
    int64_t id;
    cq_key_role role;
    char kb[CQ_GRANT_BYTES];
} group_grant_row;

static bool grant_from_row(cq_db_stmt *st, void *elem) {
    group_grant_row *r = elem;
    r->id = cq_db_col_int(st, 0);
    r->role = cq_key_role_parse(cq_db_col_text(st, 1));
    cq_db_col_copy(st, 2, r->kb, sizeof r->kb);
    return true;
}

cq_status cq_groups_effective(cq_db *db, int64_t user_id, cq_key_role *role, char kb[CQ_GRANT_BYTES], cq_err *err) {
    group_grant_row *rows;
    size_t n;
    cq_status rc = cq_db_list(db, "user's groups", sizeof *rows, grant_from_row, NULL, (void **)&rows, &n, err,
                              "SELECT g.id, g.role, coalesce(g.kb, '') FROM group_members m JOIN groups g "
                              "ON g.id = m.group_id WHERE m.user_id = ?1 ORDER BY g.id",
                              "i", user_id);
    for (size_t i = 0; i < n && !rc; i++) {
        if (rows[i].role == CQ_ROLE_NONE) continue;
        rc = cq_grants_read(db, "group", rows[i].id, true, rows[i].kb, NULL, err);
        if (rc) break;
        if (rows[i].role > *role) *role = rows[i].role;
        (void)cq_grant_union(kb, rows[i].kb); /* 16 KBs a grant: a union too long keeps the first ones */
    }
    free(rows);
    if (!rc && *role == CQ_ROLE_ADMIN) kb[0] = 0;
    return rc;
}
