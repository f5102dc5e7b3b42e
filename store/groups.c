/* Groups, membership and effective rights (store/groups.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "store/users.h"

bool cq_group_name_valid(const char *name) { return cq_user_name_valid(name); }

static cq_status name_check(const char *name, cq_err *err) {
    if (!cq_group_name_valid(name))
        return cq_err_set(err, CQ_ERR_INVALID,
                          "invalid group name '%.80s': use 1-63 bytes of letters, digits, Chinese characters, '-', "
                          "'_', '.' or '@'",
                          name ? name : "");
    return CQ_OK;
}

#define GROUP_COLUMNS                                                                                               \
    "g.id, g.name, g.role, coalesce(g.kb, ''), g.created_at, g.updated_at, "                                        \
    "(SELECT count(*) FROM group_members m WHERE m.group_id = g.id) "

static void group_from_row(cq_db_stmt *st, cq_group_info *g) {
    memset(g, 0, sizeof *g);
    g->id = cq_db_col_int(st, 0);
    cq_db_col_copy(st, 1, g->name, sizeof g->name);
    g->role = cq_key_role_parse(cq_db_col_text(st, 2));
    cq_db_col_copy(st, 3, g->kb, sizeof g->kb);
    g->created_at = cq_db_col_int(st, 4);
    g->updated_at = cq_db_col_int(st, 5);
    g->members = cq_db_col_int(st, 6);
}

static cq_status group_grant(cq_db *db, cq_group_info *g, cq_err *err) {
    char stored[CQ_GRANT_BYTES];
    snprintf(stored, sizeof stored, "%s", g->kb);
    return cq_grants_read(db, "group", g->id, stored, false, g->kb, &g->kb_gone, err);
}

static cq_status group_find(cq_db *db, const char *name, cq_group_info *g, cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_prepare(db, "SELECT " GROUP_COLUMNS "FROM groups g WHERE g.name = ?1", &st, err))
        return cq_err_prefix(err, "find group: ");
    cq_db_bind_text(st, 1, name);
    int step = cq_db_step(st, "find group", err);
    if (step == CQ_DB_ROW) group_from_row(st, g);
    cq_db_finalize(st);
    if (step < 0) return err->code;
    if (step == CQ_DB_DONE) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no group named '%s'", name ? name : "");
    return CQ_OK;
}

static cq_status user_id_of(cq_db *db, const char *name, int64_t *id, cq_err *err) {
    *id = 0;
    cq_db_stmt *st;
    if (cq_db_prepare(db, "SELECT id FROM users WHERE name = ?1", &st, err)) return cq_err_prefix(err, "find user: ");
    cq_db_bind_text(st, 1, name);
    int step = cq_db_step(st, "find user", err);
    if (step == CQ_DB_ROW) *id = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    if (step < 0) return err->code;
    if (step == CQ_DB_DONE) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no user named '%s'", name ? name : "");
    return CQ_OK;
}

cq_status cq_store_group_add(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_group_info *info,
                             cq_err *err) {
    char grant[CQ_GRANT_BYTES];
    if (name_check(name, err) || cq_grants_check(role, kbs, "group", grant, err)) return err->code;
    cq_db *db = cq_store_conn(s);
    int64_t now = (int64_t)time(NULL), id = 0;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) {
        cq_db_stmt *st;
        rc = cq_db_prepare(db,
                           "INSERT INTO groups(name, role, kb, created_at, updated_at) VALUES(?1, ?2, ?3, ?4, ?4) "
                           "RETURNING id",
                           &st, err);
        if (!rc) {
            cq_db_bind_text(st, 1, name);
            cq_db_bind_text(st, 2, cq_key_role_name(role));
            cq_db_bind_text(st, 3, grant[0] ? grant : NULL);
            cq_db_bind_int(st, 4, now);
            int step = cq_db_step(st, "add group", err);
            if (step == CQ_DB_ROW) id = cq_db_col_int(st, 0);
            else if (step < 0 && err->code == CQ_ERR_EXISTS)
                rc = cq_err_set(err, CQ_ERR_EXISTS, "a group named '%s' exists already", name);
            else rc = step < 0 ? err->code : cq_err_set(err, CQ_ERR_DB, "add group: no id");
            cq_db_finalize(st);
        }
    }
    if (!rc) rc = cq_grants_write(db, "group", id, grant, err);
    rc = cq_db_end(db, own, rc, err);
    if (rc) return rc;
    if (info) {
        memset(info, 0, sizeof *info);
        info->id = id;
        snprintf(info->name, sizeof info->name, "%s", name);
        info->role = role;
        snprintf(info->kb, sizeof info->kb, "%s", grant);
        info->created_at = info->updated_at = now;
    }
    return CQ_OK;
}

cq_status cq_store_group_list(cq_store *s, cq_group_info **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db *db = cq_store_conn(s);
    cq_db_stmt *st;
    if (cq_db_prepare(db, "SELECT " GROUP_COLUMNS "FROM groups g ORDER BY g.id", &st, err))
        return cq_err_prefix(err, "list groups: ");
    cq_group_info *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, "list groups", err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&list, &cap, count + 1, sizeof *list)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        group_from_row(st, &list[count++]);
    }
    cq_db_finalize(st);
    if (!rc && step < 0) rc = err->code;
    for (size_t i = 0; i < count && !rc; i++) rc = group_grant(db, &list[i], err);
    if (rc) {
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

cq_status cq_store_group_get(cq_store *s, const char *name, cq_group_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_db *db = cq_store_conn(s);
    if (group_find(db, name, out, err)) return err->code;
    return group_grant(db, out, err);
}

cq_status cq_store_group_set(cq_store *s, const char *name, cq_key_role role, const char *kbs, cq_err *err) {
    char grant[CQ_GRANT_BYTES];
    if (cq_grants_check(role, kbs, "group", grant, err)) return err->code;
    cq_db *db = cq_store_conn(s);
    cq_group_info g;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = group_find(db, name, &g, err);
    if (!rc)
        rc = cq_db_run(db, "change group", NULL, err,
                       "UPDATE groups SET role = ?2, kb = ?3, updated_at = ?4 WHERE id = ?1", "itti", g.id,
                       cq_key_role_name(role), grant[0] ? grant : NULL, (int64_t)time(NULL));
    if (!rc) rc = cq_grants_write(db, "group", g.id, grant, err);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_group_remove(cq_store *s, const char *name, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_group_info g;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = group_find(db, name, &g, err);
    if (!rc) rc = cq_db_run(db, "remove group", NULL, err, "DELETE FROM group_members WHERE group_id = ?1", "i", g.id);
    if (!rc) rc = cq_grants_remove(db, "group", g.id, err);
    if (!rc) rc = cq_db_run(db, "remove group", NULL, err, "DELETE FROM groups WHERE id = ?1", "i", g.id);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_group_member_add(cq_store *s, const char *group, const char *user, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_group_info g;
    int64_t uid = 0, changed = 0;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = group_find(db, group, &g, err);
    if (!rc) rc = user_id_of(db, user, &uid, err);
    /* a membership from the directory becomes local: it stays when the directory drops it */
    if (!rc)
        rc = cq_db_run(db, "add member", &changed, err,
                       "UPDATE group_members SET source = 'local' WHERE group_id = ?1 AND user_id = ?2 AND "
                       "source <> 'local'",
                       "ii", g.id, uid);
    if (!rc && !changed) {
        rc = cq_db_run(db, "add member", NULL, err,
                       "INSERT INTO group_members(group_id, user_id, source) VALUES(?1, ?2, 'local')", "ii", g.id, uid);
        if (rc == CQ_ERR_EXISTS)
            cq_err_set(err, CQ_ERR_EXISTS, "%s is in group '%s' already", user, group);
    }
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_group_member_remove(cq_store *s, const char *group, const char *user, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    cq_group_info g;
    int64_t uid = 0, changed = 0;
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = group_find(db, group, &g, err);
    if (!rc) rc = user_id_of(db, user, &uid, err);
    if (!rc)
        rc = cq_db_run(db, "remove member", &changed, err,
                       "DELETE FROM group_members WHERE group_id = ?1 AND user_id = ?2", "ii", g.id, uid);
    if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "%s is not in group '%s'", user, group);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_group_members(cq_store *s, const char *group, cq_group_member **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db *db = cq_store_conn(s);
    cq_group_info g;
    if (group_find(db, group, &g, err)) return err->code;
    cq_db_stmt *st;
    if (cq_db_prepare(db,
                      "SELECT u.name, m.source FROM group_members m JOIN users u ON u.id = m.user_id "
                      "WHERE m.group_id = ?1 ORDER BY u.name",
                      &st, err))
        return cq_err_prefix(err, "list members: ");
    cq_db_bind_int(st, 1, g.id);
    cq_group_member *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, "list members", err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&list, &cap, count + 1, sizeof *list)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        cq_db_col_copy(st, 0, list[count].user, sizeof list[count].user);
        cq_db_col_copy(st, 1, list[count].source, sizeof list[count].source);
        count++;
    }
    cq_db_finalize(st);
    if (!rc && step < 0) rc = err->code;
    if (rc) {
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

cq_status cq_store_user_groups(cq_store *s, int64_t user_id, char *out, size_t cap, cq_err *err) {
    if (cap) out[0] = 0;
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s),
                      "SELECT g.name FROM group_members m JOIN groups g ON g.id = m.group_id WHERE m.user_id = ?1 "
                      "ORDER BY g.name",
                      &st, err))
        return cq_err_prefix(err, "user's groups: ");
    cq_db_bind_int(st, 1, user_id);
    size_t len = 0;
    int step;
    while ((step = cq_db_step(st, "user's groups", err)) == CQ_DB_ROW) {
        const char *name = cq_db_col_text(st, 0);
        int w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", name ? name : "");
        if (w > 0 && (size_t)w < cap - len) len += (size_t)w;
        else out[len] = 0;
    }
    cq_db_finalize(st);
    return step < 0 ? err->code : CQ_OK;
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
        cq_group_info g;
        cq_err lookup = {0};
        cq_status found = group_find(db, names[i], &g, &lookup);
        if (found == CQ_ERR_NOT_FOUND) {
            if (missing) (*missing)++;
            continue;
        }
        if (found) {
            *err = lookup;
            rc = found;
            break;
        }
        /* a local membership of the same group stays as it is */
        int64_t there = 0;
        cq_db_stmt *st;
        rc = cq_db_prepare(db, "SELECT count(*) FROM group_members WHERE group_id = ?1 AND user_id = ?2", &st, err);
        if (rc) break;
        cq_db_bind_int(st, 1, g.id);
        cq_db_bind_int(st, 2, user_id);
        int step = cq_db_step(st, "directory groups", err);
        if (step == CQ_DB_ROW) there = cq_db_col_int(st, 0);
        cq_db_finalize(st);
        if (step < 0) rc = err->code;
        else if (!there)
            rc = cq_db_run(db, "directory groups", NULL, err,
                           "INSERT INTO group_members(group_id, user_id, source) VALUES(?1, ?2, 'ldap')", "ii", g.id,
                           user_id);
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

cq_status cq_groups_effective(cq_db *db, int64_t user_id, cq_key_role *role, char kb[CQ_GRANT_BYTES], cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_prepare(db,
                      "SELECT g.id, g.role, coalesce(g.kb, '') FROM group_members m JOIN groups g ON g.id = m.group_id "
                      "WHERE m.user_id = ?1 ORDER BY g.id",
                      &st, err))
        return cq_err_prefix(err, "user's groups: ");
    cq_db_bind_int(st, 1, user_id);
    typedef struct {
        int64_t id;
        cq_key_role role;
        char kb[CQ_GRANT_BYTES];
    } row;
    row *rows = NULL;
    size_t n = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, "user's groups", err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&rows, &cap, n + 1, sizeof *rows)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        rows[n].id = cq_db_col_int(st, 0);
        rows[n].role = cq_key_role_parse(cq_db_col_text(st, 1));
        cq_db_col_copy(st, 2, rows[n].kb, sizeof rows[n].kb);
        n++;
    }
    cq_db_finalize(st);
    if (!rc && step < 0) rc = err->code;
    for (size_t i = 0; i < n && !rc; i++) {
        char now[CQ_GRANT_BYTES];
        if (rows[i].role == CQ_ROLE_NONE) continue;
        rc = cq_grants_read(db, "group", rows[i].id, rows[i].kb, true, now, NULL, err);
        if (rc) break;
        if (rows[i].role > *role) *role = rows[i].role;
        (void)cq_grant_union(kb, now); /* 16 KBs a grant: a union too long keeps the first ones */
    }
    free(rows);
    if (!rc && *role == CQ_ROLE_ADMIN) kb[0] = 0;
    return rc;
}
