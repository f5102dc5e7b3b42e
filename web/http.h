/* Internals of the HTTP layer shared by its files: one request as the handlers see it, responses (JSON, errors,
 * files, bytes), request bodies with size limits, server-sent events. Not a public header. */
#ifndef CQ_WEB_HTTP_H
#define CQ_WEB_HTTP_H

#include <civetweb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "web/metrics.h"
#include "web/server.h"

typedef struct cq_web_access_log cq_web_access_log;

struct cq_web_server {
    struct mg_context *mg;
    cq_web_service svc;
    cq_web_config cfg;
    char *host, *spool_dir;
    int port;
    cq_web_metrics metrics;
    /* the worker pool that runs the handlers (server.c) */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_cond;
    struct task *tasks, *tasks_tail;
    pthread_t *pool_threads;
    int n_pool_threads;
    bool pool_stopping;
    atomic_bool draining; /* stopping: new requests get 503 */
    cq_web_access_log *access_log; /* NULL: none */
};

typedef struct {
    struct mg_connection *conn;
    cq_web_server *server;
    const cq_web_service *svc;
    const struct mg_request_info *ri;
    const char *method;
    char path[1024];      /* decoded path, without the query */
    char *seg[16];        /* path segments (point into segbuf) */
    int n_seg;
    char segbuf[1024];
    cq_web_route route;
    int status;           /* the status sent (for metrics); 0 until a response started */
    cq_web_principal who;
    bool sse;             /* an event stream was started */
    bool sse_broken;      /* writing to it failed: the client is gone */
    size_t bytes_sent;    /* response body bytes written (the access log) */
} cq_web_req;

/* ---- responses ---- */
void cq_web_send_json(cq_web_req *r, int status, cJSON *body); /* frees body */
void cq_web_send_error(cq_web_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cq_web_send_status_error(cq_web_req *r, const cq_err *err); /* status from err->code */
void cq_web_send_bytes(cq_web_req *r, int status, const char *mime, const void *data, size_t len,
                       const char *cache_control);
void cq_web_send_file(cq_web_req *r, const cq_web_file *f, const char *cache_control);
void cq_web_send_text(cq_web_req *r, int status, const char *mime, const char *text);

/* ---- request bodies ---- */
/* Reads the body into a malloc'd NUL-terminated buffer of at most max bytes. Returns 0, or sends the error (413
 * payload too large, 400 unreadable) and returns its status. */
int cq_web_read_body(cq_web_req *r, size_t max, char **out, size_t *len);
/* Sends 413 for a body over max bytes, reading what the client still sends first (within reason). */
void cq_web_refuse_too_large(cq_web_req *r, size_t max);
/* Reads a JSON object body; sends 400/413 and returns NULL when it is not one. */
cJSON *cq_web_read_json(cq_web_req *r);

/* ---- query strings ---- */
/* Copies query parameter name into buf; false when absent. */
bool cq_web_query(const cq_web_req *r, const char *name, char *buf, size_t size);
/* Integer query parameter within [lo, hi]; def when absent; -1 (and a 400 sent) when invalid. */
long cq_web_query_long(cq_web_req *r, const char *name, long def, long lo, long hi);

/* ---- server-sent events (chunked) ---- */
void cq_web_sse_start(cq_web_req *r);
/* Writes "event: NAME\ndata: JSON\n\n" (event NULL: data only); frees data. Returns 0, -1 when the client is gone. */
int cq_web_sse_send(cq_web_req *r, const char *event, cJSON *data);
int cq_web_sse_send_raw(cq_web_req *r, const char *line); /* "data: LINE\n\n" */
void cq_web_sse_end(cq_web_req *r);

bool cq_web_accepts_sse(const cq_web_req *r);

/* ---- the access log (web/access_log.c): one line a request, text or JSON, to a file or "-" (stdout) ---- */
cq_status cq_web_access_log_open(const char *path, bool json, cq_web_access_log **out, cq_err *err);
void cq_web_access_log_write(cq_web_access_log *log, const cq_web_req *r, double seconds); /* log NULL: no-op */
cq_status cq_web_access_log_reopen(cq_web_access_log *log, cq_err *err); /* after rotation; stdout: no-op */
void cq_web_access_log_close(cq_web_access_log *log);

/* ---- the OpenAI-compatible endpoints (web/openai.c) ---- */
void cq_web_openai_models(cq_web_req *r);
void cq_web_openai_chat(cq_web_req *r);

/* ---- helpers shared by the handlers (web/server.c) ---- */
/* Authenticates the request (sending 401 on failure); returns false when a response was sent. */
bool cq_web_authenticate(cq_web_req *r);
/* Checks who may do `need` on kb; sends 403 and returns false when not. */
bool cq_web_authorize(cq_web_req *r, cq_web_role need, const char *kb);
/* The conversation fields of an ask's body into q ("conversation_id", "store", "regenerate"; a turn is kept by
 * default when keep_default); sends 400 and returns false when they are invalid. */
bool cq_web_parse_conversation(cq_web_req *r, const cJSON *body, bool keep_default, cq_web_question *q);

#endif
