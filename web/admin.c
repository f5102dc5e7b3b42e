/* The admin API (issue 30; docs/API.md "User management"): users, groups and their members, API keys, and who
 * reaches a KB. Admins only; every change is recorded in the audit trail (store/audit.h). The routes are listed with
 * cq_web_admin_op (web/server.h); the service does the work (app/service_admin.c). */
#include <stdio.h>
#include <string.h>

#include "web/http.h"

static bool seg(const cq_web_req *r, int i, const char *s) { return i < r->n_seg && !strcmp(r->seg[i], s); }
static bool method(const cq_web_req *r, const char *m) { return !strcmp(r->method, m); }

bool cq_web_admin_route(cq_web_req *r) {
    int n = r->n_seg;
    if (seg(r, 2, "users") && n == 3) r->route = CQ_ROUTE_USERS;
    else if (seg(r, 2, "users") && (n == 4 || (n == 5 && seg(r, 4, "password")))) r->route = CQ_ROUTE_USER;
    else if (seg(r, 2, "groups") && n == 3) r->route = CQ_ROUTE_GROUPS;
    else if (seg(r, 2, "groups") && (n == 4 || (n == 6 && seg(r, 4, "members")))) r->route = CQ_ROUTE_GROUP;
    else if (seg(r, 2, "keys") && n == 3) r->route = CQ_ROUTE_KEYS;
    else if (seg(r, 2, "keys") && n == 4) r->route = CQ_ROUTE_KEY;
    else if (seg(r, 2, "kbs") && seg(r, 4, "grants") && (n == 5 || (n == 7 && (seg(r, 5, "user") || seg(r, 5, "group")))))
        r->route = CQ_ROUTE_KB_GRANTS;
    else return false;
    return true;
}

bool cq_web_admin_body(const cq_web_req *r) {
    return method(r, "POST") || method(r, "PATCH") || method(r, "PUT");
}

/* The operation of the request, or -1 with 405 sent. */
static int operation(cq_web_req *r) {
    int n = r->n_seg;
    const char *allow = NULL;
    switch (r->route) {
    case CQ_ROUTE_USERS:
        if (method(r, "GET")) return CQ_ADMIN_USERS_LIST;
        if (method(r, "POST")) return CQ_ADMIN_USER_CREATE;
        allow = "GET or POST";
        break;
    case CQ_ROUTE_USER:
        if (n == 5) {
            if (method(r, "PUT") || method(r, "POST")) return CQ_ADMIN_USER_PASSWORD;
            allow = "PUT";
            break;
        }
        if (method(r, "GET")) return CQ_ADMIN_USER_GET;
        if (method(r, "PATCH")) return CQ_ADMIN_USER_CHANGE;
        if (method(r, "DELETE")) return CQ_ADMIN_USER_DELETE;
        allow = "GET, PATCH or DELETE";
        break;
    case CQ_ROUTE_GROUPS:
        if (method(r, "GET")) return CQ_ADMIN_GROUPS_LIST;
        if (method(r, "POST")) return CQ_ADMIN_GROUP_CREATE;
        allow = "GET or POST";
        break;
    case CQ_ROUTE_GROUP:
        if (n == 6) {
            if (method(r, "PUT")) return CQ_ADMIN_MEMBER_ADD;
            if (method(r, "DELETE")) return CQ_ADMIN_MEMBER_REMOVE;
            allow = "PUT or DELETE";
            break;
        }
        if (method(r, "GET")) return CQ_ADMIN_GROUP_GET;
        if (method(r, "PATCH")) return CQ_ADMIN_GROUP_CHANGE;
        if (method(r, "DELETE")) return CQ_ADMIN_GROUP_DELETE;
        allow = "GET, PATCH or DELETE";
        break;
    case CQ_ROUTE_KEYS:
        if (method(r, "GET")) return CQ_ADMIN_KEYS_LIST;
        if (method(r, "POST")) return CQ_ADMIN_KEY_CREATE;
        allow = "GET or POST";
        break;
    case CQ_ROUTE_KEY:
        if (method(r, "DELETE")) return CQ_ADMIN_KEY_REVOKE;
        allow = "DELETE";
        break;
    case CQ_ROUTE_KB_GRANTS:
        if (n == 5) {
            if (method(r, "GET")) return CQ_ADMIN_GRANTS_LIST;
            allow = "GET";
            break;
        }
        if (method(r, "PUT")) return CQ_ADMIN_GRANT_ADD;
        if (method(r, "DELETE")) return CQ_ADMIN_GRANT_REMOVE;
        allow = "PUT or DELETE";
        break;
    default: break;
    }
    cq_web_send_error(r, 405, "method_not_allowed", "use %s", allow ? allow : "GET");
    return -1;
}

void cq_web_admin_dispatch(cq_web_req *r) {
    if (!r->svc->admin) return cq_web_send_error(r, 404, "not_found", "this server has no accounts");
    int op = operation(r);
    if (op < 0) return;
    /* before the body is looked at: only admins learn what is wrong with one */
    if (!cq_web_authorize(r, CQ_WEB_ADMIN, NULL)) return;
    cq_web_admin_request q = {.op = (cq_web_admin_op)op};
    cJSON *body = NULL;
    if (cq_web_admin_body(r) && op != CQ_ADMIN_MEMBER_ADD && op != CQ_ADMIN_GRANT_ADD) {
        if (!(body = cq_web_read_json(r))) return;
    }
    q.body = body;
    switch (r->route) {
    case CQ_ROUTE_USER:
    case CQ_ROUTE_GROUP:
    case CQ_ROUTE_KEY:
    case CQ_ROUTE_KB_GRANTS: q.name = r->seg[3]; break;
    default: break;
    }
    if (op == CQ_ADMIN_MEMBER_ADD || op == CQ_ADMIN_MEMBER_REMOVE) q.subject = r->seg[5];
    if (op == CQ_ADMIN_GRANT_ADD || op == CQ_ADMIN_GRANT_REMOVE) {
        q.subject = r->seg[5];
        q.subject_name = r->seg[6];
    }
    cq_err err = {0};
    cJSON *out = NULL;
    int status = 200;
    cq_web_admin_audit audit = {0};
    cq_status rc = r->svc->admin(r->svc->ctx, &r->who, &q, &out, &status, &audit, &err);
    cJSON_Delete(body);
    if (rc) {
        cJSON_Delete(out);
        return cq_web_send_status_error(r, &err);
    }
    if (audit.action[0] && r->svc->audit) {
        char client[64];
        cq_web_client_address(r, client, sizeof client);
        r->svc->audit(r->svc->ctx, &r->who, client, audit.action, audit.kb[0] ? audit.kb : NULL,
                      audit.target[0] ? audit.target : NULL);
    }
    cq_web_send_json(r, status, out ? out : cJSON_CreateObject());
}
