/* The service's API keys and open mode (app/service.h): while no key exists and open mode is allowed, every request
 * is an admin's; the first key created turns authentication on. */
#include <stdio.h>
#include <string.h>

#include "app/service_internal.h"
#include "core/clock.h"
#include "index/keys.h"

#define OPEN_MODE_RECHECK_S 1.0 /* how long "no keys exist" is trusted before asking the database again */

bool cq_service_open_mode(cq_service *s) {
    if (!s->allow_open) return false;
    pthread_mutex_lock(&s->auth_lock);
    double now = cq_clock_seconds();
    bool stale = now - s->auth_checked_at > OPEN_MODE_RECHECK_S;
    bool open_now = s->open_now;
    pthread_mutex_unlock(&s->auth_lock);
    if (!stale) return open_now;
    cq_err err = {0};
    cq_store *st = cq_svc_pool_get(s, &err);
    int64_t n = 1;
    if (st) cq_store_key_count_active(st, &n, &err);
    cq_svc_pool_put(s, st);
    pthread_mutex_lock(&s->auth_lock);
    s->open_now = n == 0;
    s->auth_checked_at = now;
    open_now = s->open_now;
    pthread_mutex_unlock(&s->auth_lock);
    return open_now;
}

static cq_status svc_authenticate(void *ctx, const char *bearer, cq_web_principal *who, cq_err *err) {
    cq_service *s = ctx;
    memset(who, 0, sizeof *who);
    if (cq_service_open_mode(s)) {
        who->role = CQ_WEB_ADMIN;
        snprintf(who->name, sizeof who->name, "open-mode");
        return CQ_OK;
    }
    if (!bearer) return cq_err_set(err, CQ_ERR_NOT_FOUND, "an API key is required: Authorization: Bearer <key>");
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_key_info k;
    cq_status rc = cq_store_key_check(st, bearer, &k, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    who->key_id = k.id;
    who->role = k.role == CQ_ROLE_ADMIN ? CQ_WEB_ADMIN : k.role == CQ_ROLE_EDITOR ? CQ_WEB_EDIT : CQ_WEB_READ;
    snprintf(who->kb, sizeof who->kb, "%s", k.kb);
    snprintf(who->name, sizeof who->name, "%s", k.name);
    return CQ_OK;
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
    w->allows = svc_allows;
}
