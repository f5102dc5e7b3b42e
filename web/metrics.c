#include "web/metrics.h"

#include <stdio.h>
#include <string.h>

static const char *const route_names[CQ_ROUTE_COUNT] = {
    [CQ_ROUTE_UNKNOWN] = "other",
    [CQ_ROUTE_PAGE] = "/",
    [CQ_ROUTE_HEALTH] = "/api/v1/health",
    [CQ_ROUTE_METRICS] = "/metrics",
    [CQ_ROUTE_KBS] = "/api/v1/kbs",
    [CQ_ROUTE_KB] = "/api/v1/kbs/{kb}",
    [CQ_ROUTE_KB_DOCUMENTS] = "/api/v1/kbs/{kb}/documents",
    [CQ_ROUTE_KB_JOBS] = "/api/v1/kbs/{kb}/jobs",
    [CQ_ROUTE_JOB] = "/api/v1/jobs/{id}",
    [CQ_ROUTE_JOB_CANCEL] = "/api/v1/jobs/{id}/cancel",
    [CQ_ROUTE_DOCUMENT] = "/api/v1/documents/{id}",
    [CQ_ROUTE_DOCUMENT_ORIGINAL] = "/api/v1/documents/{id}/original",
    [CQ_ROUTE_PAGE_IMAGE] = "/api/v1/documents/{id}/pages/{n}.png",
    [CQ_ROUTE_CLAUSE] = "/api/v1/clauses/{id}",
    [CQ_ROUTE_RETRIEVE] = "/api/v1/kbs/{kb}/retrieve",
    [CQ_ROUTE_ASK] = "/api/v1/kbs/{kb}/ask",
    [CQ_ROUTE_OPENAI_MODELS] = "/v1/models",
    [CQ_ROUTE_OPENAI_CHAT] = "/v1/chat/completions",
    [CQ_ROUTE_CONVERSATIONS] = "/api/v1/conversations",
    [CQ_ROUTE_CONVERSATION] = "/api/v1/conversations/{id}",
    [CQ_ROUTE_CONVERSATION_FEEDBACK] = "/api/v1/conversations/{id}/turns/{n}/feedback",
    [CQ_ROUTE_CONVERSATION_EXPORT] = "/api/v1/conversations/{id}/export",
    [CQ_ROUTE_QUALITY] = "/api/v1/quality",
    [CQ_ROUTE_FEEDBACK_EXPORT] = "/api/v1/feedback/export",
    [CQ_ROUTE_DOCUMENT_VERSION] = "/api/v1/documents/{id}/version",
    [CQ_ROUTE_COMPARE] = "/api/v1/documents/{a}/compare/{b}",
    [CQ_ROUTE_LOGIN] = "/api/v1/login",
    [CQ_ROUTE_LOGOUT] = "/api/v1/logout",
    [CQ_ROUTE_ME] = "/api/v1/me",
    [CQ_ROUTE_AUDIT] = "/api/v1/audit",
    [CQ_ROUTE_DOCUMENT_SEARCH] = "/api/v1/documents/{id}/search",
    [CQ_ROUTE_USERS] = "/api/v1/users",
    [CQ_ROUTE_USER] = "/api/v1/users/{name}",
    [CQ_ROUTE_GROUPS] = "/api/v1/groups",
    [CQ_ROUTE_GROUP] = "/api/v1/groups/{name}",
    [CQ_ROUTE_KEYS] = "/api/v1/keys",
    [CQ_ROUTE_KEY] = "/api/v1/keys/{id}",
    [CQ_ROUTE_KB_GRANTS] = "/api/v1/kbs/{kb}/grants",
};

const char *cq_web_route_name(cq_web_route route) {
    return route >= 0 && route < CQ_ROUTE_COUNT ? route_names[route] : "other";
}

void cq_web_metrics_init(cq_web_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
}

void cq_web_metrics_destroy(cq_web_metrics *m) { pthread_mutex_destroy(&m->lock); }

void cq_web_metrics_begin(cq_web_metrics *m) {
    pthread_mutex_lock(&m->lock);
    m->in_flight++;
    pthread_mutex_unlock(&m->lock);
}

void cq_web_metrics_end(cq_web_metrics *m, cq_web_route route, int status, double seconds) {
    if (route < 0 || route >= CQ_ROUTE_COUNT) route = CQ_ROUTE_UNKNOWN;
    pthread_mutex_lock(&m->lock);
    m->in_flight--;
    cq_web_route_metrics *r = &m->routes[route];
    int slot = CQ_WEB_MAX_STATUSES - 1;
    for (int i = 0; i < CQ_WEB_MAX_STATUSES; i++)
        if (r->status[i] == status || r->status[i] == 0) {
            slot = i;
            break;
        }
    if (r->status[slot] == 0) r->status[slot] = status;
    r->count[slot]++;
    cq_lat_hist_add(&r->latency, seconds);
    pthread_mutex_unlock(&m->lock);
}

void cq_web_metrics_print(cq_web_metrics *m, cq_strbuf *out) {
    pthread_mutex_lock(&m->lock);
    cq_strbuf_puts(out, "# HELP clauseqa_http_requests_total HTTP requests by route pattern and status.\n"
                        "# TYPE clauseqa_http_requests_total counter\n");
    for (int r = 0; r < CQ_ROUTE_COUNT; r++)
        for (int i = 0; i < CQ_WEB_MAX_STATUSES && m->routes[r].status[i]; i++)
            cq_strbuf_printf(out, "clauseqa_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_names[r],
                             m->routes[r].status[i], (unsigned long long)m->routes[r].count[i]);
    cq_strbuf_puts(out, "# HELP clauseqa_http_request_duration_seconds Time from request to the last byte sent.\n"
                        "# TYPE clauseqa_http_request_duration_seconds histogram\n");
    for (int r = 0; r < CQ_ROUTE_COUNT; r++) {
        if (!m->routes[r].latency.count) continue;
        char label[96];
        snprintf(label, sizeof label, "route=\"%s\"", route_names[r]);
        cq_lat_hist_prometheus(out, "clauseqa_http_request_duration_seconds", label, &m->routes[r].latency);
    }
    cq_strbuf_printf(out,
                     "# HELP clauseqa_http_requests_in_flight Requests being handled now.\n"
                     "# TYPE clauseqa_http_requests_in_flight gauge\n"
                     "clauseqa_http_requests_in_flight %llu\n",
                     (unsigned long long)m->in_flight);
    pthread_mutex_unlock(&m->lock);
}
