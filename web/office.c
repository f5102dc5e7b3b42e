/* The routes an office expects beside the conversations (issue 30 items 5 and 6; docs/API.md):
 *   POST|PUT|DELETE /api/v1/conversations/{id}/turns/{n}/feedback   rate answer n, or take the rating back
 *   GET /api/v1/conversations/{id}/export?format=md|pdf              the conversation with its citations
 *   GET /api/v1/conversations?q=TEXT                                 search (server.c hands it here)
 *   GET /api/v1/quality?kb=&days=                                    admins: the quality log per KB and day
 *   GET /api/v1/feedback/export?kb=                                  admins: the rated answers as JSONL */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/http.h"

static bool seg(const cq_web_req *r, int i, const char *s) { return i < r->n_seg && !strcmp(r->seg[i], s); }

bool cq_web_office_route(cq_web_req *r) {
    int n = r->n_seg;
    if (n == 7 && seg(r, 2, "conversations") && seg(r, 4, "turns") && seg(r, 6, "feedback"))
        r->route = CQ_ROUTE_CONVERSATION_FEEDBACK;
    else if (n == 5 && seg(r, 2, "conversations") && seg(r, 4, "export"))
        r->route = CQ_ROUTE_CONVERSATION_EXPORT;
    else if (n == 3 && seg(r, 2, "quality"))
        r->route = CQ_ROUTE_QUALITY;
    else if (n == 4 && seg(r, 2, "feedback") && seg(r, 3, "export"))
        r->route = CQ_ROUTE_FEEDBACK_EXPORT;
    else
        return false;
    return true;
}

/* A positive integer path segment; 0 (and 404 sent) otherwise. */
static int64_t number(cq_web_req *r, const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v <= 0 || s[0] == '+' || s[0] == ' ' || v > 1000000000000LL) {
        cq_web_send_error(r, 404, "not_found", "no such resource: %s", r->path);
        return 0;
    }
    return (int64_t)v;
}

static void reply(cq_web_req *r, cq_status rc, const cq_err *err, cJSON *out) {
    if (rc) {
        cJSON_Delete(out);
        cq_web_send_status_error(r, err);
    } else {
        cq_web_send_json(r, 200, out ? out : cJSON_CreateObject());
    }
}

static bool method(const cq_web_req *r, const char *m) { return !strcmp(r->method, m); }

static void feedback(cq_web_req *r, int64_t id, int64_t turn) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc;
    if (method(r, "DELETE")) {
        rc = r->svc->conversation_feedback(r->svc->ctx, &r->who, id, (int)turn, NULL, NULL, true, &out, &err);
    } else if (method(r, "POST") || method(r, "PUT")) {
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
    } else {
        return cq_web_send_error(r, 405, "method_not_allowed", "use POST, PUT or DELETE");
    }
    reply(r, rc, &err, out);
}

static void export(cq_web_req *r, int64_t id) {
    if (!method(r, "GET")) return cq_web_send_error(r, 405, "method_not_allowed", "use GET");
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

static void quality(cq_web_req *r) {
    if (!method(r, "GET")) return cq_web_send_error(r, 405, "method_not_allowed", "use GET");
    if (!cq_web_authorize(r, CQ_WEB_ADMIN, NULL)) return;
    char kb[128] = "";
    bool by_kb = cq_web_query(r, "kb", kb, sizeof kb) && kb[0];
    long days = cq_web_query_long(r, "days", 7, 1, 400);
    if (days < 0) return;
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->quality(r->svc->ctx, by_kb ? kb : NULL, (int)days, &out, &err);
    reply(r, rc, &err, out);
}

static void feedback_export(cq_web_req *r) {
    if (!method(r, "GET")) return cq_web_send_error(r, 405, "method_not_allowed", "use GET");
    if (!cq_web_authorize(r, CQ_WEB_ADMIN, NULL)) return;
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

void cq_web_office_dispatch(cq_web_req *r) {
    int64_t id, turn;
    switch (r->route) {
    case CQ_ROUTE_CONVERSATION_FEEDBACK:
        if ((id = number(r, r->seg[3])) && (turn = number(r, r->seg[5]))) {
            if (turn > INT_MAX) /* no conversation has that many turns */
                return cq_web_send_error(r, 404, "not_found", "conversation %lld has no turn %lld", (long long)id,
                                         (long long)turn);
            feedback(r, id, turn);
        }
        return;
    case CQ_ROUTE_CONVERSATION_EXPORT:
        if ((id = number(r, r->seg[3]))) export(r, id);
        return;
    case CQ_ROUTE_QUALITY: return quality(r);
    case CQ_ROUTE_FEEDBACK_EXPORT: return feedback_export(r);
    default: return cq_web_send_error(r, 404, "not_found", "no such resource: %s", r->path);
    }
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
