/* Request metrics of the HTTP layer: requests by route and status, latency histograms by route, in Prometheus
 * text format. Routes are the patterns ("/api/v1/kbs/{kb}/ask"), never raw paths, so the series stay few. */
#ifndef CQ_WEB_METRICS_H
#define CQ_WEB_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "core/latency.h"
#include "core/strbuf.h"

/* Route labels (web/http.h: cq_web_match.label), at most this many; the route table is checked against it. */
#define CQ_WEB_ROUTE_LABELS 80
const char *cq_web_route_name(int label); /* the pattern ("/api/v1/kbs/{kb}/ask"), "/" or "other" (web/server.c) */

#define CQ_WEB_MAX_STATUSES 12 /* distinct statuses counted per route; more fall into the last slot */

typedef struct {
    int status[CQ_WEB_MAX_STATUSES];
    uint64_t count[CQ_WEB_MAX_STATUSES];
    cq_lat_hist latency; /* time from request to the last byte sent */
} cq_web_route_metrics;

typedef struct {
    pthread_mutex_t lock;
    cq_web_route_metrics routes[CQ_WEB_ROUTE_LABELS];
    uint64_t in_flight;
} cq_web_metrics;

void cq_web_metrics_init(cq_web_metrics *m);
void cq_web_metrics_destroy(cq_web_metrics *m);
void cq_web_metrics_begin(cq_web_metrics *m);
void cq_web_metrics_end(cq_web_metrics *m, int label, int status, double seconds);
/* Appends the HTTP families (clauseqa_http_*) in Prometheus text format. */
void cq_web_metrics_print(cq_web_metrics *m, cq_strbuf *out);

#endif
