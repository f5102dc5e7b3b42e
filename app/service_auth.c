/* The service's API keys, open mode and users (app/service.h): while no key or user has been made and open mode is
 * allowed, every request is an admin's; the first key or user created turns authentication on until `clauseqa keys
 * open-mode on`. A signed-in user (a session cookie, store/users.h) is authorised exactly as a key of the same role
 * and KBs: both become a principal with a role and a grant, which svc_allows checks with cq_key_allows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/service_internal.h"
#include "core/clock.h"
#include "core/log.h"
#include "store/audit.h"
#include "store/groups.h"
#include "store/keys.h"
#include "store/users.h"

_Static_assert(sizeof(((cq_web_principal *)0)->kb) == CQ_GRANT_BYTES, "a principal holds a whole grant");
_Static_assert(CQ_WEB_SESSION_TOKEN_BYTES == CQ_SESSION_TOKEN_BYTES, "the cookie holds a session token");

#define SIGNINS_AT_ONCE 4 /* password checks running at once: each takes CQ_PASSWORD_M_COST_KIB of memory */

#define OPEN_MODE_RECHECK_S 1.0 /* how long the open mode found is trusted before asking the database again */

/* Whether open mode is on; an error (the store unreachable) when it cannot be told and nothing is known yet. While
 * the store is unreachable the last answer stands (and is asked again at the next request): an outage neither
 * opens a closed server nor closes an open one. */
static cq_status open_mode(cq_service *s, bool *open_out, cq_err *err) {
    *open_out = false;
    if (!s->allow_open) return CQ_OK;
    pthread_mutex_lock(&s->auth_lock);
    double now = cq_clock_seconds();
    bool stale = now - s->auth_checked_at > OPEN_MODE_RECHECK_S;
    bool open_now = s->open_now, known = s->auth_checked_at > 0;
    pthread_mutex_unlock(&s->auth_lock);
    *open_out = open_now;
    if (!stale) return CQ_OK;
    cq_store *st = cq_svc_pool_get(s, err);
    bool open = false;
    /* store/keys.h: stays closed once a key has existed */
    cq_status rc = st ? cq_store_auth_open(st, &open, err) : err->code;
    cq_svc_pool_put(s, st);
    if (rc) return known ? CQ_OK : rc;
    pthread_mutex_lock(&s->auth_lock);
    if (open != s->open_now && s->auth_checked_at > 0)
        CQ_WARN("%s", open ? "auth: open mode ON (clauseqa keys open-mode on): requests are not authenticated"
                           : "auth: authentication ON: requests need an API key");
    s->open_now = open;
    s->auth_checked_at = now;
    open_now = s->open_now;
    pthread_mutex_unlock(&s->auth_lock);
    *open_out = open_now;
    return CQ_OK;
}

bool cq_service_open_mode(cq_service *s) {
    cq_err err = {0};
    bool open = false;
    open_mode(s, &open, &err);
    return open;
}

static cq_web_role web_role(cq_key_role role) {
    return role == CQ_ROLE_ADMIN ? CQ_WEB_ADMIN : role == CQ_ROLE_EDITOR ? CQ_WEB_EDIT
           : role == CQ_ROLE_READER ? CQ_WEB_READ : CQ_WEB_NONE;
}

/* A user as a principal: the role and the KBs that exist now, as a key's. */
static void user_principal(const cq_user_info *u, int64_t session_id, cq_web_principal *who) {
    memset(who, 0, sizeof *who);
    who->user_id = u->id;
    who->session_id = session_id;
    who->via = "session";
    who->role = web_role(u->role);
    snprintf(who->kb, sizeof who->kb, "%s", u->kb);
    snprintf(who->name, sizeof who->name, "%s", u->name);
}

static cq_status svc_authenticate(void *ctx, const char *bearer, const char *session, cq_web_principal *who,
                                  cq_err *err) {
    cq_service *s = ctx;
    memset(who, 0, sizeof *who);
    bool open = false;
    cq_status rc = open_mode(s, &open, err);
    if (rc) return rc; /* the store unreachable: 503, not 401 (a client would drop a valid key) */
    if (open) {
        who->role = CQ_WEB_ADMIN;
        who->via = "open";
        snprintf(who->name, sizeof who->name, "open-mode");
        return CQ_OK;
    }
    if (!bearer && !session)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "sign in, or send an API key: Authorization: Bearer <key>");
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    if (!bearer) {
        cq_user_info u;
        int64_t session_id = 0;
        rc = cq_store_session_check(st, session, CQ_SESSION_IDLE_S, &u, &session_id, err);
        cq_svc_pool_put(s, st);
        if (!rc) user_principal(&u, session_id, who);
        return rc;
    }
    cq_key_info k;
    rc = cq_store_key_check(st, bearer, &k, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    who->key_id = k.id;
    who->via = "key";
    who->role = web_role(k.role);
    snprintf(who->kb, sizeof who->kb, "%s", k.kb); /* its KBs that exist now; "" when all were deleted: none */
    snprintf(who->name, sizeof who->name, "%s", k.name);
    return CQ_OK;
}

/* An audit entry of who (store/audit.h), best effort: a failure is logged, not returned (the action happened). */
static void audit_write(cq_service *s, cq_store *st, const cq_web_principal *who, const char *actor_name,
                        const char *client, const char *action, const char *kb, const char *target) {
    cq_audit_entry e = {0};
    if (who && who->user_id) {
        snprintf(e.actor_kind, sizeof e.actor_kind, "user");
        e.actor_id = who->user_id;
    } else if (who && who->key_id) {
        snprintf(e.actor_kind, sizeof e.actor_kind, "key");
        e.actor_id = who->key_id;
    } else {
        snprintf(e.actor_kind, sizeof e.actor_kind, "%s", who ? "open" : "anonymous");
    }
    snprintf(e.actor_name, sizeof e.actor_name, "%s", who ? who->name : actor_name ? actor_name : "");
    snprintf(e.action, sizeof e.action, "%s", action);
    snprintf(e.kb, sizeof e.kb, "%s", kb ? kb : "");
    snprintf(e.target, sizeof e.target, "%s", target ? target : "");
    snprintf(e.client, sizeof e.client, "%s", client ? client : "");
    cq_err err = {0};
    cq_store *own = st ? NULL : cq_svc_pool_get(s, &err);
    cq_store *use = st ? st : own;
    if (!use || cq_store_audit_add(use, &e, &err)) CQ_WARN("audit: %s by %s not recorded: %s", action, e.actor_name, err.msg);
    cq_svc_pool_put(s, own);
}

static void svc_audit(void *ctx, const cq_web_principal *who, const char *client, const char *action, const char *kb,
                      const char *target) {
    audit_write(ctx, NULL, who, NULL, client, action, kb, target);
}

static cq_status svc_audit_list(void *ctx, int64_t before, int limit, const char *action, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_audit_entry *list;
    size_t n;
    cq_status rc = cq_store_audit_list(st, before, limit > 0 ? (size_t)limit : 100, action, &list, &n, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)list[i].id);
        cJSON_AddNumberToObject(o, "at", (double)list[i].at);
        cJSON *actor = cJSON_AddObjectToObject(o, "actor");
        cJSON_AddStringToObject(actor, "kind", list[i].actor_kind);
        if (list[i].actor_id) cJSON_AddNumberToObject(actor, "id", (double)list[i].actor_id);
        cJSON_AddStringToObject(actor, "name", list[i].actor_name);
        cJSON_AddStringToObject(o, "action", list[i].action);
        cJSON_AddItemToObject(o, "kb", list[i].kb[0] ? cJSON_CreateString(list[i].kb) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "target", list[i].target[0] ? cJSON_CreateString(list[i].target) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "client", list[i].client[0] ? cJSON_CreateString(list[i].client) : cJSON_CreateNull());
        cJSON_AddItemToArray(a, o);
    }
    *out = cJSON_CreateObject();
    cJSON_AddItemToObject(*out, "entries", a);
    /* the next page: entries below the last one; null when this was the last */
    if (n == (size_t)limit && n) cJSON_AddNumberToObject(*out, "next_before", (double)list[n - 1].id);
    else cJSON_AddNullToObject(*out, "next_before");
    free(list);
    return CQ_OK;
}

/* A directory user's sign-in (app/ldap_auth.h): bind as the user, then the user's memberships of source 'ldap'
 * become the groups the directory groups map to, and the rights follow from them. */
static cq_status ldap_login(cq_service *s, cq_store *st, const char *user, const char *password, cq_user_info *u,
                            cq_err *err) {
    char groups[CQ_LDAP_MAX_GROUPS][64];
    size_t n = 0, missing = 0;
    if (cq_ldap_sign_in(&s->ldap, user, password, groups, CQ_LDAP_MAX_GROUPS, &n, err) ||
        cq_store_user_directory(st, user, u, err))
        return err->code;
    const char *names[CQ_LDAP_MAX_GROUPS];
    for (size_t i = 0; i < n; i++) names[i] = groups[i];
    if (cq_store_group_sync(st, u->id, names, n, &missing, err) || cq_store_user_rights(st, u, err)) return err->code;
    if (missing) CQ_WARN("ldap: %zu of the groups %s's directory groups map to do not exist here (clauseqa group add)",
                         missing, user);
    if (u->role == CQ_ROLE_NONE || (u->role != CQ_ROLE_ADMIN && !u->kb[0]))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "%s's directory groups give no access here: ask an admin", user);
    return CQ_OK;
}

/* Whether name is a local account (a password here): then it signs in as one, LDAP or not. */
static bool local_account(cq_store *st, const char *name) {
    cq_user_info u;
    cq_err ignored = {0};
    return cq_user_name_valid(name) && !cq_store_user_get(st, name, &u, &ignored) && strcmp(u.source, "ldap");
}

static cq_status svc_login(void *ctx, const char *user, const char *password, const char *client, char *token,
                           cq_web_principal *who, cq_err *err) {
    cq_service *s = ctx;
    memset(who, 0, sizeof *who);
    token[0] = 0;
    int wait = cq_login_limit_wait(&s->logins, user, client, cq_clock_seconds());
    if (wait > 0) {
        cq_err_set(err, CQ_ERR_BUSY, "too many failed sign-ins: try again in %d s", wait);
        err->retry_after_s = wait;
        return CQ_ERR_BUSY;
    }
    cq_user_info u;
    int64_t session_id = 0;
    cq_store *st = cq_svc_pool_get(s, err);
    cq_status rc = st ? CQ_OK : err->code;
    bool directory = !rc && s->ldap.url[0] && !local_account(st, user);
    if (directory) {
        rc = ldap_login(s, st, user, password, &u, err);
    } else if (!rc) {
        /* A password check takes CQ_PASSWORD_M_COST_KIB of memory for tens of milliseconds: a few at a time. */
        pthread_mutex_lock(&s->auth_lock);
        while (s->signins_running >= SIGNINS_AT_ONCE) pthread_cond_wait(&s->signin_cond, &s->auth_lock);
        s->signins_running++;
        pthread_mutex_unlock(&s->auth_lock);
        rc = cq_store_user_verify(st, user, password, &u, err);
        pthread_mutex_lock(&s->auth_lock);
        s->signins_running--;
        pthread_cond_signal(&s->signin_cond);
        pthread_mutex_unlock(&s->auth_lock);
    }
    if (!rc) rc = cq_store_session_create(st, u.id, CQ_SESSION_IDLE_S, token, &session_id, err);
    if (rc == CQ_ERR_NOT_FOUND) {
        const char *tried = cq_user_name_valid(user) ? user : "(an invalid name)";
        cq_login_limit_failed(&s->logins, user, client, cq_clock_seconds());
        CQ_INFO("auth: failed sign-in of %s from %s%s", tried, client, directory ? " (directory)" : "");
        audit_write(s, st, NULL, tried, client, "sign_in_failed", NULL, NULL);
    }
    if (!rc) {
        user_principal(&u, session_id, who);
        audit_write(s, st, who, NULL, client, "sign_in", NULL, directory ? "directory" : NULL);
    }
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    cq_login_limit_succeeded(&s->logins, user);
    CQ_INFO("auth: %s signed in from %s (session %lld%s)", u.name, client, (long long)session_id,
            directory ? ", directory" : "");
    return CQ_OK;
}

static cq_status svc_logout(void *ctx, const char *token, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc = cq_store_session_revoke(st, token, err);
    cq_svc_pool_put(s, st);
    return rc;
}

static bool svc_allows(void *ctx, const cq_web_principal *who, cq_web_role need, const char *kb) {
    (void)ctx;
    if (need == CQ_WEB_NONE) return true;
    cq_key_info k = {0};
    k.role = who->role == CQ_WEB_ADMIN ? CQ_ROLE_ADMIN : who->role == CQ_WEB_EDIT ? CQ_ROLE_EDITOR
             : who->role == CQ_WEB_READ ? CQ_ROLE_READER : CQ_ROLE_NONE;
    snprintf(k.kb, sizeof k.kb, "%s", who->kb);
    cq_key_role r = need == CQ_WEB_ADMIN ? CQ_ROLE_ADMIN : need == CQ_WEB_EDIT ? CQ_ROLE_EDITOR : CQ_ROLE_READER;
    return cq_key_allows(&k, r, kb) != 0;
}

void cq_svc_auth_web(cq_web_service *w) {
    w->authenticate = svc_authenticate;
    w->login = svc_login;
    w->logout = svc_logout;
    w->audit = svc_audit;
    w->audit_list = svc_audit_list;
    w->allows = svc_allows;
}
