/* The routes an office expects beside the conversations (issue 30 items 5 and 6; docs/API.md):
 *   POST|PUT|DELETE /api/v1/conversations/{id}/turns/{n}/feedback   rate answer n, or take the rating back
 *   GET /api/v1/conversations/{id}/export?format=md|pdf              the conversation with its citations
 *   GET /api/v1/conversations?q=TEXT                                 search (server.c hands it here)
 *   GET /api/v1/quality?kb=&days=                                    admins: the quality log per KB and day
 *   GET /api/v1/feedback/export?kb=                                  admins: the rated answers as JSONL */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/http.h"

static void reply(cq_web_req *r, cq_status rc, const cq_err *err, cJSON *out) {
    if (rc) {
        cJSON_Delete(out);
        cq_web_send_status_error(r, err);
    } else {
        cq_web_send_json(r, 200, out ? out : cJSON_CreateObject());
    }
}

/* POST|PUT rate answer n of conversation id; DELETE takes the rating back. */
void cq_web_office_feedback(cq_web_req *r) {
    int64_t id = r->id[0], turn = r->id[1];
    if (turn > INT_MAX) /* no conversation has that many turns */
        return cq_web_send_error(r, 404, "not_found", "conversation %lld has no turn %lld", (long long)id,
                                 (long long)turn);
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc;
    if (r->def->body == CQ_BODY_NONE) {
        rc = r->svc->conversation_feedback(r->svc->ctx, &r->who, id, (int)turn, NULL, NULL, true, &out, &err);
    } else {
        cJSON *body = cq_web_read_json(r);
        if (!body) return;
        const cJSON *rating = cJSON_GetObjectItem(body, "rating"), *comment = cJSON_GetObjectItem(body, "comment");
        if (!cJSON_IsString(rating) || (comment && !cJSON_IsString(comment) && !cJSON_IsNull(comment))) {
            cJSON_Delete(body);
            return cq_web_send_error(r, 400, "invalid",
                                     "send {\"rating\": \"up\" | \"down\", \"comment\": \"...\" (optional)}");
        }
        rc = r->svc->conversation_feedback(r->svc->ctx, &r->who, id, (int)turn, rating->valuestring,
                                           cJSON_IsString(comment) ? comment->valuestring : NULL, false, &out, &err);
        cJSON_Delete(body);
    }
    reply(r, rc, &err, out);
}

void cq_web_office_export(cq_web_req *r) {
    int64_t id = r->id[0];
    char format[16] = "md";
    if (cq_web_query(r, "format", format, sizeof format) && !format[0]) snprintf(format, sizeof format, "md");
    cq_err err = {0};
    char *body = NULL, mime[64] = "", name[256] = "";
    size_t len = 0;
    cq_status rc = r->svc->conversation_export(r->svc->ctx, &r->who, id, format, &body, &len, mime, name, &err);
    if (rc) return cq_web_send_status_error(r, &err);
    cq_web_send_download(r, mime, body, len, name);
    free(body);
}

void cq_web_office_quality(cq_web_req *r) {
    char kb[128] = "";
    bool by_kb = cq_web_query(r, "kb", kb, sizeof kb) && kb[0];
    long days = cq_web_query_long(r, "days", 7, 1, 400);
    if (days < 0) return;
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->quality(r->svc->ctx, by_kb ? kb : NULL, (int)days, &out, &err);
    reply(r, rc, &err, out);
}

void cq_web_office_feedback_export(cq_web_req *r) {
    char kb[128] = "";
    bool by_kb = cq_web_query(r, "kb", kb, sizeof kb) && kb[0];
    cq_err err = {0};
    char *body = NULL;
    size_t len = 0;
    cq_status rc = r->svc->feedback_export(r->svc->ctx, by_kb ? kb : NULL, &body, &len, &err);
    if (rc) return cq_web_send_status_error(r, &err);
    cq_web_send_bytes(r, 200, "application/x-ndjson; charset=utf-8", body, len, "no-store");
    free(body);
}

bool cq_web_office_search(cq_web_req *r, const char *kb, bool every_owner) {
    char q[512] = "";
    const char *qs = r->ri->query_string;
    int got = qs ? mg_get_var(qs, strlen(qs), "q", q, sizeof q) : -1;
    if (got == -2) {
        cq_web_send_error(r, 400, "invalid", "the search text (q) has at most %zu bytes", sizeof q - 1);
        return true;
    }
    if (got < 0 || !q[0]) return false;
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->conversation_search(r->svc->ctx, &r->who, kb, every_owner, q, &out, &err);
    reply(r, rc, &err, out);
    return true;
}
