/* The service's API keys and open mode (app/service.h): while no key has been made and open mode is allowed, every
 * request is an admin's; the first key created turns authentication on until `clauseqa keys open-mode on`. */
#include <stdio.h>
#include <string.h>

#include "app/service_internal.h"
#include "core/clock.h"
#include "core/log.h"
#include "store/keys.h"

_Static_assert(sizeof(((cq_web_principal *)0)->kb) == CQ_GRANT_BYTES, "a principal holds a whole grant");

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

static cq_status svc_authenticate(void *ctx, const char *bearer, cq_web_principal *who, cq_err *err) {
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
    if (!bearer) return cq_err_set(err, CQ_ERR_NOT_FOUND, "an API key is required: Authorization: Bearer <key>");
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_key_info k;
    rc = cq_store_key_check(st, bearer, &k, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    who->key_id = k.id;
    who->via = "key";
    who->role = k.role == CQ_ROLE_ADMIN ? CQ_WEB_ADMIN : k.role == CQ_ROLE_EDITOR ? CQ_WEB_EDIT : CQ_WEB_READ;
    snprintf(who->kb, sizeof who->kb, "%s", k.kb); /* its KBs that exist now; "" when all were deleted: none */
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
