/* Request metrics of the HTTP layer: requests by route and status, latency histograms by route, in Prometheus
 * text format. Routes are the patterns ("/api/v1/kbs/{kb}/ask"), never raw paths, so the series stay few. */
#ifndef CQ_WEB_METRICS_H
#define CQ_WEB_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "core/latency.h"
#include "core/strbuf.h"

typedef enum {
    CQ_ROUTE_UNKNOWN = 0,
    CQ_ROUTE_PAGE,
    CQ_ROUTE_HEALTH,
    CQ_ROUTE_METRICS,
    CQ_ROUTE_KBS,
    CQ_ROUTE_KB,
    CQ_ROUTE_KB_DOCUMENTS,
    CQ_ROUTE_KB_JOBS,
    CQ_ROUTE_JOB,
    CQ_ROUTE_JOB_CANCEL,
    CQ_ROUTE_DOCUMENT,
    CQ_ROUTE_DOCUMENT_ORIGINAL,
    CQ_ROUTE_PAGE_IMAGE,
    CQ_ROUTE_CLAUSE,
    CQ_ROUTE_RETRIEVE,
    CQ_ROUTE_ASK,
    CQ_ROUTE_OPENAI_MODELS,
    CQ_ROUTE_OPENAI_CHAT,
    CQ_ROUTE_CONVERSATIONS,
    CQ_ROUTE_CONVERSATION,
    CQ_ROUTE_DOCUMENT_VERSION,
    CQ_ROUTE_COMPARE,
    CQ_ROUTE_CONVERSATION_FEEDBACK, /* issue 30: web/office.c */
    CQ_ROUTE_CONVERSATION_EXPORT,
    CQ_ROUTE_QUALITY,
    CQ_ROUTE_FEEDBACK_EXPORT,
    CQ_ROUTE_LOGIN,
    CQ_ROUTE_LOGOUT,
    CQ_ROUTE_ME,
    CQ_ROUTE_AUDIT,
    CQ_ROUTE_DOCUMENT_SEARCH, /* issue 30 item 4 */
    CQ_ROUTE_USERS,           /* issue 30: the admin API, web/admin.c */
    CQ_ROUTE_USER,
    CQ_ROUTE_GROUPS,
    CQ_ROUTE_GROUP,
    CQ_ROUTE_KEYS,
    CQ_ROUTE_KEY,
    CQ_ROUTE_KB_GRANTS,
    CQ_ROUTE_COUNT
} cq_web_route;

const char *cq_web_route_name(cq_web_route route);

#define CQ_WEB_MAX_STATUSES 12 /* distinct statuses counted per route; more fall into the last slot */

typedef struct {
    int status[CQ_WEB_MAX_STATUSES];
    uint64_t count[CQ_WEB_MAX_STATUSES];
    cq_lat_hist latency; /* time from request to the last byte sent */
} cq_web_route_metrics;

typedef struct {
    pthread_mutex_t lock;
    cq_web_route_metrics routes[CQ_ROUTE_COUNT];
    uint64_t in_flight;
} cq_web_metrics;

void cq_web_metrics_init(cq_web_metrics *m);
void cq_web_metrics_destroy(cq_web_metrics *m);
void cq_web_metrics_begin(cq_web_metrics *m);
void cq_web_metrics_end(cq_web_metrics *m, cq_web_route route, int status, double seconds);
/* Appends the HTTP families (clauseqa_http_*) in Prometheus text format. */
void cq_web_metrics_print(cq_web_metrics *m, cq_strbuf *out);

#endif
