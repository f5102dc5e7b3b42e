#include "web/metrics.h"

#include <stdio.h>
#include <string.h>

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

void cq_web_metrics_end(cq_web_metrics *m, int route, int status, double seconds) {
    if (route < 0 || route >= CQ_WEB_ROUTE_LABELS) route = 0;
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
    for (int r = 0; r < CQ_WEB_ROUTE_LABELS; r++)
        for (int i = 0; i < CQ_WEB_MAX_STATUSES && m->routes[r].status[i]; i++)
            cq_strbuf_printf(out, "clauseqa_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", cq_web_route_name(r),
                             m->routes[r].status[i], (unsigned long long)m->routes[r].count[i]);
    cq_strbuf_puts(out, "# HELP clauseqa_http_request_duration_seconds Time from request to the last byte sent.\n"
                        "# TYPE clauseqa_http_request_duration_seconds histogram\n");
    for (int r = 0; r < CQ_WEB_ROUTE_LABELS; r++) {
        if (!m->routes[r].latency.count) continue;
        char label[96];
        snprintf(label, sizeof label, "route=\"%s\"", cq_web_route_name(r));
        cq_lat_hist_prometheus(out, "clauseqa_http_request_duration_seconds", label, &m->routes[r].latency);
    }
    cq_strbuf_printf(out,
                     "# HELP clauseqa_http_requests_in_flight Requests being handled now.\n"
                     "# TYPE clauseqa_http_requests_in_flight gauge\n"
                     "clauseqa_http_requests_in_flight %llu\n",
                     (unsigned long long)m->in_flight);
    pthread_mutex_unlock(&m->lock);
}
