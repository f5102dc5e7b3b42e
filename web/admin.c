/* The admin API (issue 30; docs/API.md "User management"): users, groups and their members, API keys, and who
 * reaches a KB. Admins only; every change is recorded in the audit trail (store/audit.h). The routes are rows of the
 * route table (web/server.c) whose arg is the cq_web_admin_op (web/server.h); the service does the work
 * (app/service_admin.c). */
#include <stdio.h>
#include <string.h>

#include "web/http.h"

void cq_web_admin_dispatch(cq_web_req *r) {
    if (!r->svc->admin) return cq_web_send_error(r, 404, "not_found", "this server has no accounts");
    cq_web_admin_request q = {.op = (cq_web_admin_op)r->def->arg};
    cJSON *body = NULL;
    if (r->def->body == CQ_BODY_JSON && !(body = cq_web_read_json(r))) return;
    q.body = body;
    /* /users/{name}, /groups/{name}[/members/{user}], /keys/{key}, /kbs/{kb}/grants[/{user|group}/{name}] */
    if (r->n_seg >= 4) q.name = r->seg[3];
    if (r->n_seg >= 6) q.subject = r->seg[5];
    if (r->n_seg >= 7) q.subject_name = r->seg[6];
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
