/* The admin API's work (web/server.h cq_web_admin_op, web/admin.c): users, groups and members, API keys and KB
 * grants, on store/users.h, store/groups.h, store/keys.h and store/grants.h. web/admin.c has checked that the caller
 * is an admin; this fills what the audit trail records for each change. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/service_internal.h"
#include "core/log.h"
#include "store/groups.h"
#include "store/keys.h"
#include "store/users.h"

static cJSON *grant_json(cq_key_role role, const char *kbs) {
    if (role == CQ_ROLE_ADMIN || !strcmp(kbs, "*")) return cJSON_CreateString("*");
    cJSON *a = cJSON_CreateArray();
    char buf[CQ_GRANT_BYTES];
    snprintf(buf, sizeof buf, "%s", kbs);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        cJSON_AddItemToArray(a, cJSON_CreateString(p));
    return a;
}

static cJSON *user_json(cq_store *st, const cq_user_info *u) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", u->name);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(u->role));
    cJSON_AddItemToObject(o, "kbs", grant_json(u->role, u->kb));
    cJSON_AddBoolToObject(o, "kb_deleted", u->kb_gone);
    cJSON_AddStringToObject(o, "source", u->source[0] ? u->source : "local");
    cJSON_AddBoolToObject(o, "disabled", u->disabled_at != 0);
    char groups[1024] = "";
    cq_err ignored = {0};
    (void)cq_store_user_groups(st, u->id, groups, sizeof groups, &ignored);
    cJSON *g = cJSON_AddArrayToObject(o, "groups");
    char *save = NULL;
    for (char *p = strtok_r(groups, ",", &save); p; p = strtok_r(NULL, ",", &save))
        cJSON_AddItemToArray(g, cJSON_CreateString(p));
    cJSON_AddNumberToObject(o, "created_at", (double)u->created_at);
    cJSON_AddNumberToObject(o, "last_login_at", (double)u->last_login_at);
    return o;
}

static cJSON *group_json(const cq_group_info *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", g->name);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(g->role));
    cJSON_AddItemToObject(o, "kbs", grant_json(g->role, g->kb));
    cJSON_AddBoolToObject(o, "kb_deleted", g->kb_gone);
    cJSON_AddNumberToObject(o, "members", (double)g->members);
    cJSON_AddNumberToObject(o, "created_at", (double)g->created_at);
    return o;
}

static cJSON *key_json(const cq_key_info *k) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)k->id);
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddStringToObject(o, "prefix", k->prefix);
    cJSON_AddStringToObject(o, "role", cq_key_role_name(k->role));
    cJSON_AddItemToObject(o, "kbs", grant_json(k->role, k->kb));
    cJSON_AddBoolToObject(o, "kb_deleted", k->kb_gone);
    cJSON_AddNumberToObject(o, "created_at", (double)k->created_at);
    cJSON_AddNumberToObject(o, "last_used_at", (double)k->last_used_at);
    cJSON_AddBoolToObject(o, "revoked", k->revoked_at != 0);
    return o;
}

/* A string field of the body: NULL when absent; INVALID when present and not a string. */
static cq_status body_string(const cJSON *body, const char *field, const char **out, cq_err *err) {
    *out = NULL;
    const cJSON *v = body ? cJSON_GetObjectItemCaseSensitive(body, field) : NULL;
    if (!v || cJSON_IsNull(v)) return CQ_OK;
    if (!cJSON_IsString(v)) return cq_err_set(err, CQ_ERR_INVALID, "\"%s\" must be a string", field);
    *out = v->valuestring;
    return CQ_OK;
}

/* "kbs": "*" or an array of KB names, into out joined by ','; *given tells whether it was sent. */
static cq_status body_kbs(const cJSON *body, char out[CQ_GRANT_BYTES], bool *given, cq_err *err) {
    out[0] = 0;
    *given = false;
    const cJSON *v = body ? cJSON_GetObjectItemCaseSensitive(body, "kbs") : NULL;
    if (!v || cJSON_IsNull(v)) return CQ_OK;
    *given = true;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "*")) {
        snprintf(out, CQ_GRANT_BYTES, "*");
        return CQ_OK;
    }
    if (!cJSON_IsArray(v)) return cq_err_set(err, CQ_ERR_INVALID, "\"kbs\" must be \"*\" or a list of KB names");
    size_t len = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || !*e->valuestring || strchr(e->valuestring, ','))
            return cq_err_set(err, CQ_ERR_INVALID, "\"kbs\" must be \"*\" or a list of KB names");
        int w = snprintf(out + len, CQ_GRANT_BYTES - len, "%s%s", len ? "," : "", e->valuestring);
        if (w < 0 || (size_t)w >= CQ_GRANT_BYTES - len)
            return cq_err_set(err, CQ_ERR_INVALID, "too many knowledge bases (at most %d)", CQ_GRANT_MAX_KBS);
        len += (size_t)w;
    }
    return CQ_OK;
}

/* "role": one of admin, editor, reader; *role unchanged when absent. */
static cq_status body_role(const cJSON *body, cq_key_role *role, bool *given, cq_err *err) {
    const char *name;
    *given = false;
    if (body_string(body, "role", &name, err)) return err->code;
    if (!name) return CQ_OK;
    cq_key_role r = cq_key_role_parse(name);
    if (r == CQ_ROLE_NONE) return cq_err_set(err, CQ_ERR_INVALID, "\"role\" must be admin, editor or reader");
    *role = r;
    *given = true;
    return CQ_OK;
}

/* The role and KBs for a change: those sent, the current ones for what was not (an admin made editor or reader
 * needs KBs). */
static cq_status role_and_kbs(const cJSON *body, cq_key_role current, const char *current_kb, cq_key_role *role,
                              char kbs[CQ_GRANT_BYTES], bool *changed, cq_err *err) {
    bool role_given, kbs_given;
    *role = current;
    if (body_role(body, role, &role_given, err) || body_kbs(body, kbs, &kbs_given, err)) return err->code;
    *changed = role_given || kbs_given;
    if (!kbs_given && *role != CQ_ROLE_ADMIN && current != CQ_ROLE_ADMIN) snprintf(kbs, CQ_GRANT_BYTES, "%s", current_kb);
    if (*role == CQ_ROLE_ADMIN && !kbs_given) kbs[0] = 0;
    return CQ_OK;
}

static void set_audit(cq_web_admin_audit *a, const char *action, const char *kb, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_audit(cq_web_admin_audit *a, const char *action, const char *kb, const char *fmt, ...) {
    snprintf(a->action, sizeof a->action, "%s", action);
    snprintf(a->kb, sizeof a->kb, "%s", kb ? kb : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->target, sizeof a->target, fmt, ap);
    va_end(ap);
}

/* ---- users ---- */

static cq_status users(cq_store *st, const cq_web_principal *who, const cq_web_admin_request *q, cJSON **out,
                       int *status, cq_web_admin_audit *audit, cq_err *err) {
    cq_user_info u;
    switch (q->op) {
    case CQ_ADMIN_USERS_LIST: {
        cq_user_info *list;
        size_t n;
        if (cq_store_user_list(st, &list, &n, err)) return err->code;
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, user_json(st, &list[i]));
        free(list);
        *out = cJSON_CreateObject();
        cJSON_AddItemToObject(*out, "users", a);
        return CQ_OK;
    }
    case CQ_ADMIN_USER_CREATE: {
        const char *name, *password;
        char kbs[CQ_GRANT_BYTES];
        bool given;
        cq_key_role role = CQ_ROLE_READER;
        if (body_string(q->body, "name", &name, err) || body_string(q->body, "password", &password, err) ||
            body_role(q->body, &role, &given, err) || body_kbs(q->body, kbs, &given, err))
            return err->code;
        if (!name || !password)
            return cq_err_set(err, CQ_ERR_INVALID, "give the user a \"name\" and a \"password\"");
        if (cq_store_user_add(st, name, password, role, kbs[0] ? kbs : NULL, &u, err)) return err->code;
        if (cq_store_user_get(st, name, &u, err)) return err->code;
        *out = user_json(st, &u);
        *status = 201;
        set_audit(audit, "user_add", u.kb, "user %s (%s)", u.name, cq_key_role_name(u.role));
        return CQ_OK;
    }
    case CQ_ADMIN_USER_GET:
        if (cq_store_user_get(st, q->name, &u, err)) return err->code;
        *out = user_json(st, &u);
        return CQ_OK;
    case CQ_ADMIN_USER_CHANGE: {
        if (cq_store_user_get(st, q->name, &u, err)) return err->code;
        cq_key_role role;
        char kbs[CQ_GRANT_BYTES];
        bool changed;
        if (role_and_kbs(q->body, u.role, u.kb, &role, kbs, &changed, err)) return err->code;
        const cJSON *disabled = cJSON_GetObjectItemCaseSensitive(q->body, "disabled");
        if (disabled && !cJSON_IsBool(disabled))
            return cq_err_set(err, CQ_ERR_INVALID, "\"disabled\" must be true or false");
        if (!changed && !disabled)
            return cq_err_set(err, CQ_ERR_INVALID, "give what to change: \"role\", \"kbs\" or \"disabled\"");
        bool self = who->user_id == u.id;
        if (self && ((disabled && cJSON_IsTrue(disabled)) || (changed && role != CQ_ROLE_ADMIN)))
            return cq_err_set(err, CQ_ERR_INVALID, "you cannot disable your own account or take away your own admin role");
        if (changed) {
            if (cq_store_user_grant(st, q->name, role, kbs[0] ? kbs : NULL, err)) return err->code;
            set_audit(audit, "user_set", kbs, "user %s (%s)", q->name, cq_key_role_name(role));
        }
        if (disabled) {
            bool off = cJSON_IsTrue(disabled);
            if (cq_store_user_disable(st, q->name, off, err)) return err->code;
            if (!changed) set_audit(audit, off ? "user_disable" : "user_enable", NULL, "user %s", q->name);
        }
        if (cq_store_user_get(st, q->name, &u, err)) return err->code;
        *out = user_json(st, &u);
        return CQ_OK;
    }
    case CQ_ADMIN_USER_DELETE:
        if (cq_store_user_get(st, q->name, &u, err)) return err->code;
        if (who->user_id == u.id) return cq_err_set(err, CQ_ERR_INVALID, "you cannot remove your own account");
        if (cq_store_user_remove(st, q->name, err)) return err->code;
        *out = cJSON_CreateObject();
        cJSON_AddBoolToObject(*out, "deleted", true);
        set_audit(audit, "user_remove", NULL, "user %s", q->name);
        return CQ_OK;
    case CQ_ADMIN_USER_PASSWORD: {
        const char *password;
        if (body_string(q->body, "password", &password, err)) return err->code;
        if (!password) return cq_err_set(err, CQ_ERR_INVALID, "give the new \"password\"");
        if (cq_store_user_passwd(st, q->name, password, err)) return err->code;
        *out = cJSON_CreateObject();
        cJSON_AddBoolToObject(*out, "password_changed", true);
        set_audit(audit, "user_passwd", NULL, "user %s", q->name);
        return CQ_OK;
    }
    default: return cq_err_set(err, CQ_ERR_INTERNAL, "admin: no such operation");
    }
}

/* ---- groups ---- */

static cq_status groups(cq_store *st, const cq_web_admin_request *q, cJSON **out, int *status,
                        cq_web_admin_audit *audit, cq_err *err) {
    cq_group_info g;
    switch (q->op) {
    case CQ_ADMIN_GROUPS_LIST: {
        cq_group_info *list;
        size_t n;
        if (cq_store_group_list(st, &list, &n, err)) return err->code;
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, group_json(&list[i]));
        free(list);
        *out = cJSON_CreateObject();
        cJSON_AddItemToObject(*out, "groups", a);
        return CQ_OK;
    }
    case CQ_ADMIN_GROUP_CREATE: {
        const char *name;
        char kbs[CQ_GRANT_BYTES];
        bool given;
        cq_key_role role = CQ_ROLE_READER;
        if (body_string(q->body, "name", &name, err) || body_role(q->body, &role, &given, err) ||
            body_kbs(q->body, kbs, &given, err))
            return err->code;
        if (!name) return cq_err_set(err, CQ_ERR_INVALID, "give the group a \"name\"");
        if (cq_store_group_add(st, name, role, kbs[0] ? kbs : NULL, &g, err)) return err->code;
        *out = group_json(&g);
        *status = 201;
        set_audit(audit, "group_add", g.kb, "group %s (%s)", g.name, cq_key_role_name(g.role));
        return CQ_OK;
    }
    case CQ_ADMIN_GROUP_GET: {
        cq_group_member *m;
        size_t n;
        if (cq_store_group_get(st, q->name, &g, err) || cq_store_group_members(st, q->name, &m, &n, err))
            return err->code;
        *out = group_json(&g);
        cJSON *a = cJSON_AddArrayToObject(*out, "member_list");
        for (size_t i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "user", m[i].user);
            cJSON_AddStringToObject(e, "source", m[i].source);
            cJSON_AddItemToArray(a, e);
        }
        free(m);
        return CQ_OK;
    }
    case CQ_ADMIN_GROUP_CHANGE: {
        if (cq_store_group_get(st, q->name, &g, err)) return err->code;
        cq_key_role role;
        char kbs[CQ_GRANT_BYTES];
        bool changed;
        if (role_and_kbs(q->body, g.role, g.kb, &role, kbs, &changed, err)) return err->code;
        if (!changed) return cq_err_set(err, CQ_ERR_INVALID, "give what to change: \"role\" or \"kbs\"");
        if (cq_store_group_set(st, q->name, role, kbs[0] ? kbs : NULL, err) || cq_store_group_get(st, q->name, &g, err))
            return err->code;
        *out = group_json(&g);
        set_audit(audit, "group_set", kbs, "group %s (%s)", q->name, cq_key_role_name(role));
        return CQ_OK;
    }
    case CQ_ADMIN_GROUP_DELETE:
        if (cq_store_group_remove(st, q->name, err)) return err->code;
        *out = cJSON_CreateObject();
        cJSON_AddBoolToObject(*out, "deleted", true);
        set_audit(audit, "group_remove", NULL, "group %s", q->name);
        return CQ_OK;
    case CQ_ADMIN_MEMBER_ADD:
    case CQ_ADMIN_MEMBER_REMOVE: {
        bool add = q->op == CQ_ADMIN_MEMBER_ADD;
        cq_status rc = add ? cq_store_group_member_add(st, q->name, q->subject, err)
                           : cq_store_group_member_remove(st, q->name, q->subject, err);
        if (rc) return rc;
        if (cq_store_group_get(st, q->name, &g, err)) return err->code;
        *out = group_json(&g);
        set_audit(audit, add ? "group_member_add" : "group_member_remove", NULL, "group %s: user %s", q->name,
                  q->subject);
        return CQ_OK;
    }
    default: return cq_err_set(err, CQ_ERR_INTERNAL, "admin: no such operation");
    }
}

/* ---- keys ---- */

static cq_status keys(cq_store *st, const cq_web_admin_request *q, cJSON **out, int *status,
                      cq_web_admin_audit *audit, cq_err *err) {
    switch (q->op) {
    case CQ_ADMIN_KEYS_LIST: {
        cq_key_info *list;
        size_t n;
        if (cq_store_key_list(st, &list, &n, err)) return err->code;
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, key_json(&list[i]));
        free(list);
        *out = cJSON_CreateObject();
        cJSON_AddItemToObject(*out, "keys", a);
        return CQ_OK;
    }
    case CQ_ADMIN_KEY_CREATE: {
        const char *name;
        char kbs[CQ_GRANT_BYTES], secret[CQ_KEY_SECRET_BYTES];
        bool given;
        cq_key_role role = CQ_ROLE_READER;
        if (body_string(q->body, "name", &name, err) || body_role(q->body, &role, &given, err) ||
            body_kbs(q->body, kbs, &given, err))
            return err->code;
        cq_key_info k;
        if (cq_store_key_create(st, name, role, kbs[0] ? kbs : NULL, secret, &k, err)) return err->code;
        *out = key_json(&k);
        cJSON_AddStringToObject(*out, "key", secret); /* shown this once */
        memset(secret, 0, sizeof secret);
        *status = 201;
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)k.id);
        set_audit(audit, "key_create", k.kb, "key %s (%s)", id, k.name);
        return CQ_OK;
    }
    case CQ_ADMIN_KEY_REVOKE: {
        char *end;
        long long id = strtoll(q->name, &end, 10);
        if (*end || id <= 0) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no key with id %s", q->name);
        if (cq_store_key_revoke(st, (int64_t)id, err)) return err->code;
        *out = cJSON_CreateObject();
        cJSON_AddBoolToObject(*out, "revoked", true);
        set_audit(audit, "key_revoke", NULL, "key %s", q->name);
        return CQ_OK;
    }
    default: return cq_err_set(err, CQ_ERR_INTERNAL, "admin: no such operation");
    }
}

/* ---- KB grants ---- */

/* The list kbs without kb, into out; false when kb was not in it. */
static bool grant_without(const char *kbs, const char *kb, char out[CQ_GRANT_BYTES]) {
    char buf[CQ_GRANT_BYTES];
    snprintf(buf, sizeof buf, "%s", kbs);
    out[0] = 0;
    bool found = false;
    size_t len = 0;
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (!strcmp(p, kb)) {
            found = true;
            continue;
        }
        len += (size_t)snprintf(out + len, CQ_GRANT_BYTES - len, "%s%s", len ? "," : "", p);
    }
    return found;
}

static cq_status grants(cq_store *st, const cq_web_admin_request *q, cJSON **out, cq_web_admin_audit *audit,
                        cq_err *err) {
    int64_t kb_id;
    if (cq_store_kb_find(st, q->name, &kb_id, err)) return err->code;
    if (q->op == CQ_ADMIN_GRANTS_LIST) {
        cq_user_info *ul = NULL;
        cq_group_info *gl = NULL;
        cq_key_info *kl = NULL;
        size_t nu = 0, ng = 0, nk = 0;
        if (cq_store_user_list(st, &ul, &nu, err) || cq_store_group_list(st, &gl, &ng, err) ||
            cq_store_key_list(st, &kl, &nk, err)) {
            free(ul);
            free(gl);
            return err->code;
        }
        *out = cJSON_CreateObject();
        cJSON_AddStringToObject(*out, "kb", q->name);
        cJSON *a = cJSON_AddArrayToObject(*out, "users");
        for (size_t i = 0; i < nu; i++)
            if (ul[i].role == CQ_ROLE_ADMIN || cq_grant_has(ul[i].kb, q->name)) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", ul[i].name);
                cJSON_AddStringToObject(e, "role", cq_key_role_name(ul[i].role));
                cJSON_AddBoolToObject(e, "every_kb", ul[i].role == CQ_ROLE_ADMIN || !strcmp(ul[i].kb, "*"));
                cJSON_AddItemToArray(a, e);
            }
        a = cJSON_AddArrayToObject(*out, "groups");
        for (size_t i = 0; i < ng; i++)
            if (gl[i].role == CQ_ROLE_ADMIN || cq_grant_has(gl[i].kb, q->name)) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", gl[i].name);
                cJSON_AddStringToObject(e, "role", cq_key_role_name(gl[i].role));
                cJSON_AddBoolToObject(e, "every_kb", gl[i].role == CQ_ROLE_ADMIN || !strcmp(gl[i].kb, "*"));
                cJSON_AddItemToArray(a, e);
            }
        a = cJSON_AddArrayToObject(*out, "keys");
        for (size_t i = 0; i < nk; i++)
            if (!kl[i].revoked_at && (kl[i].role == CQ_ROLE_ADMIN || cq_grant_has(kl[i].kb, q->name))) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "id", (double)kl[i].id);
                cJSON_AddStringToObject(e, "name", kl[i].name);
                cJSON_AddStringToObject(e, "role", cq_key_role_name(kl[i].role));
                cJSON_AddBoolToObject(e, "every_kb", kl[i].role == CQ_ROLE_ADMIN || !strcmp(kl[i].kb, "*"));
                cJSON_AddItemToArray(a, e);
            }
        free(ul);
        free(gl);
        free(kl);
        return CQ_OK;
    }
    bool add = q->op == CQ_ADMIN_GRANT_ADD, user = !strcmp(q->subject, "user");
    cq_key_role role;
    char kb[CQ_GRANT_BYTES], next[CQ_GRANT_BYTES];
    if (user) {
        cq_user_info u;
        if (cq_store_user_get(st, q->subject_name, &u, err)) return err->code;
        role = u.role;
        snprintf(kb, sizeof kb, "%s", u.kb);
    } else {
        cq_group_info g;
        if (cq_store_group_get(st, q->subject_name, &g, err)) return err->code;
        role = g.role;
        snprintf(kb, sizeof kb, "%s", g.kb);
    }
    if (role == CQ_ROLE_ADMIN)
        return cq_err_set(err, CQ_ERR_INVALID, "%s %s is an admin: it reaches every KB", q->subject, q->subject_name);
    if (role == CQ_ROLE_NONE)
        return cq_err_set(err, CQ_ERR_INVALID, "%s %s signs in against the directory: its KBs come from its groups",
                          q->subject, q->subject_name);
    if (!strcmp(kb, "*"))
        return cq_err_set(err, CQ_ERR_INVALID, "%s %s has every KB (*): change its KBs instead", q->subject,
                          q->subject_name);
    if (add) {
        snprintf(next, sizeof next, "%s", kb);
        if (cq_grant_has(kb, q->name))
            return cq_err_set(err, CQ_ERR_EXISTS, "%s %s has knowledge base '%s' already", q->subject,
                              q->subject_name, q->name);
        if (!cq_grant_union(next, q->name))
            return cq_err_set(err, CQ_ERR_INVALID, "too many knowledge bases (at most %d)", CQ_GRANT_MAX_KBS);
    } else {
        if (!grant_without(kb, q->name, next))
            return cq_err_set(err, CQ_ERR_NOT_FOUND, "%s %s has no grant of knowledge base '%s'", q->subject,
                              q->subject_name, q->name);
        if (!next[0])
            return cq_err_set(err, CQ_ERR_INVALID,
                              "'%s' is the last KB of %s %s: give it another first, or remove the %s", q->name,
                              q->subject, q->subject_name, q->subject);
    }
    cq_status rc = user ? cq_store_user_grant(st, q->subject_name, role, next, err)
                        : cq_store_group_set(st, q->subject_name, role, next, err);
    if (rc) return rc;
    *out = cJSON_CreateObject();
    cJSON_AddStringToObject(*out, "kb", q->name);
    cJSON_AddStringToObject(*out, q->subject, q->subject_name);
    cJSON_AddItemToObject(*out, "kbs", grant_json(role, next));
    set_audit(audit, add ? "grant_add" : "grant_remove", q->name, "%s %s", q->subject, q->subject_name);
    return CQ_OK;
}

static cq_status svc_admin(void *ctx, const cq_web_principal *who, const cq_web_admin_request *q, cJSON **out,
                           int *status, cq_web_admin_audit *audit, cq_err *err) {
    cq_service *s = ctx;
    *out = NULL;
    *status = 200;
    memset(audit, 0, sizeof *audit);
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc;
    switch (q->op) {
    case CQ_ADMIN_USERS_LIST:
    case CQ_ADMIN_USER_CREATE:
    case CQ_ADMIN_USER_GET:
    case CQ_ADMIN_USER_CHANGE:
    case CQ_ADMIN_USER_DELETE:
    case CQ_ADMIN_USER_PASSWORD: rc = users(st, who, q, out, status, audit, err); break;
    case CQ_ADMIN_GROUPS_LIST:
    case CQ_ADMIN_GROUP_CREATE:
    case CQ_ADMIN_GROUP_GET:
    case CQ_ADMIN_GROUP_CHANGE:
    case CQ_ADMIN_GROUP_DELETE:
    case CQ_ADMIN_MEMBER_ADD:
    case CQ_ADMIN_MEMBER_REMOVE: rc = groups(st, q, out, status, audit, err); break;
    case CQ_ADMIN_KEYS_LIST:
    case CQ_ADMIN_KEY_CREATE:
    case CQ_ADMIN_KEY_REVOKE: rc = keys(st, q, out, status, audit, err); break;
    default: rc = grants(st, q, out, audit, err); break;
    }
    cq_svc_pool_put(s, st);
    if (rc) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return rc;
}

void cq_svc_admin_web(cq_web_service *w) { w->admin = svc_admin; }
