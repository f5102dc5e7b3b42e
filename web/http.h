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
#include <stdio.h>
#include <time.h>

#include "web/metrics.h"
#include "web/server.h"

typedef struct cq_web_access_log cq_web_access_log;
typedef struct cq_web_req cq_web_req;

/* ---- the route table (web/server.c): each route once, and nothing else knows a route ----
 * A route is methods (a mask of CQ_M_*), a path pattern (literal segments and {params}: {kb} is r->kb; {id}, {a},
 * {b} and {n} are positive ids, r->id[0] and r->id[1], 404 when not; the others are raw segments, r->seg), what its
 * body is, the role it needs and where the KB that role is checked on comes from, the handler, and how the
 * connection slots treat it. The pattern is the metrics' route label. Rows of one pattern are adjacent. The path is
 * checked first: a path no pattern matches is 404, a method the path's rows lack is 405 with Allow; then
 * authentication (401) and the role (403), before the body is read; then the handler. */
enum { CQ_M_GET = 1, CQ_M_HEAD = 2, CQ_M_POST = 4, CQ_M_PUT = 8, CQ_M_PATCH = 16, CQ_M_DELETE = 32 };
typedef enum { CQ_BODY_NONE, CQ_BODY_JSON, CQ_BODY_UPLOAD } cq_web_body; /* none is read / r->body / spooled */
typedef enum {
    CQ_IN_PUBLIC, /* no key asked for: health, metrics, signing in and out */
    CQ_IN_NONE,   /* a key or session; role on no KB (CQ_WEB_NONE: anyone signed in; the handler checks the rest) */
    CQ_IN_KB,     /* role on {kb} */
    CQ_IN_DOC,    /* role on the KB of each document of the path ({id}, or {a} and {b}) */
    CQ_IN_JOB,    /* role on the job's KB; the job, as JSON, in r->found */
    CQ_IN_CLAUSE, /* role on the clause's KB; the clause, as JSON, in r->found */
} cq_web_scope;
enum {
    CQ_ROUTE_PRIORITY = 1, /* runs on the worker of its own (health, metrics) */
    CQ_ROUTE_RESERVED = 2, /* answered on a reserved connection slot (health, metrics, jobs) */
    CQ_ROUTE_ANY_CLIENT = 4, /* answered whatever connections its client address holds (the liveness probe) */
};
typedef struct {
    unsigned methods;
    const char *pattern;
    cq_web_body body;
    cq_web_role role;
    cq_web_scope scope;
    void (*handler)(cq_web_req *r);
    int arg;        /* the handler's own: the admin API's operation (cq_web_admin_op) */
    unsigned flags; /* CQ_ROUTE_* */
} cq_web_route_def;

/* Metrics labels: CQ_LABEL_OTHER (no route), CQ_LABEL_PAGE (the page's files), else CQ_LABEL_ROUTES + the index of
 * the first row of the pattern. */
enum { CQ_LABEL_OTHER = 0, CQ_LABEL_PAGE = 1, CQ_LABEL_ROUTES = 2 };
typedef struct {
    const cq_web_route_def *def; /* NULL: no row of the path has the method (or no route at all) */
    int label;
    unsigned allow;              /* the methods the path's rows have; 0: no route */
} cq_web_match;
const cq_web_route_def *cq_web_route_table(size_t *n);
/* The route of method on the path's segments (pure: no request needed). */
cq_web_match cq_web_route_find(const char *method, char *const *seg, int n_seg);
unsigned cq_web_method_bit(const char *method); /* 0: none of CQ_M_* */
/* "GET, HEAD, POST" for a mask, in that order */
void cq_web_methods_text(unsigned methods, char *out, size_t cap);

/* Worker threads that run handlers (server.c): a queue of tasks and the threads that take them. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct task *tasks, *tasks_tail;
    pthread_t *threads;
    int n_threads;
    bool stopping;
} cq_web_pool;

/* Connections per client address (guard.c). */
typedef struct {
    pthread_mutex_t lock;
    struct cq_web_client *items; /* one per address with a connection open */
    size_t n, cap;
} cq_web_clients;

/* A transfer with a deadline (watchdog.c). */
typedef struct cq_web_watch {
    struct cq_web_watch *prev, *next;
    char addr[48];        /* the client's address and port, the server's port: how its socket is found */
    int port, local_port;
    bool writing;         /* an answer being written (else a body being read) */
    bool fired, registered;
    double deadline;      /* cq_clock_seconds() (core/clock.h) */
} cq_web_watch;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    cq_web_watch *head;
    bool stopping, started;
} cq_web_watchdog;

/* Connection slots kept for the operations routes (server.c): CivetWeb runs config.connections + this many
 * connection threads, and a connection opened while config.connections others are open may ask only for health,
 * metrics or a job (its state, the jobs of a KB, cancelling one); anything else gets 503 with Retry-After. */
#define CQ_WEB_RESERVED_SLOTS 2

/* What the server keeps per connection (CivetWeb's connection data), from its start to its close. */
typedef struct {
    char *mark;      /* the client address counted against its connections (guard.c); NULL: not counted */
    bool reserved;   /* opened while every ordinary slot was taken: operations routes only, closed after one */
    bool answered;   /* CivetWeb answered an error itself (the http_error callback) */
} cq_web_conn;

struct cq_web_server {
    struct mg_context *mg;
    cq_web_service svc;
    cq_web_config cfg;
    char *host, *spool_dir;
    char **cors_origins, **allowed_hosts; /* copies of the config's lists, NULL-terminated */
    bool any_host;                        /* --allow-host '*' */
    int port;
    cq_web_metrics metrics;
    cq_web_pool pool;     /* the handlers */
    cq_web_pool priority; /* health and metrics: answered while every worker of pool is busy */
    cq_web_clients clients;
    cq_web_watchdog watchdog;
    atomic_bool draining; /* stopping: new requests get 503 */
    atomic_int open_connections; /* connections CivetWeb holds now (a reserved slot's included) */
    cq_web_access_log *access_log; /* NULL: none */
};

/* An upload received on the connection thread, for the handler to hand to the service. */
typedef struct {
    char path[1100];     /* the spooled file; "" when none */
    char filename[512];  /* the name the client gave */
    bool replace;
    char ocr[16];        /* the "ocr" parameter as sent; "" when none */
} cq_web_upload;

struct cq_web_req {
    struct mg_connection *conn;
    cq_web_server *server;
    const cq_web_service *svc;
    const struct mg_request_info *ri;
    const char *method;
    char path[1024];      /* decoded path, without the query */
    char *seg[16];        /* path segments (point into segbuf) */
    int n_seg;
    char segbuf[1024];
    const cq_web_route_def *def; /* the request's route (NULL: none, or not for this method) */
    int label;            /* the metrics label (cq_web_match) */
    unsigned allow;       /* the methods of the path's routes: a 405's Allow header */
    const char *kb;       /* the {kb} of the path */
    int64_t id[2];        /* its {id} / {a}, {b} */
    char scope_kb[128];   /* the KB of the document, job or clause the route's role was checked on */
    cJSON *found;         /* what the route's scope looked up (CQ_IN_JOB, CQ_IN_CLAUSE); freed after the answer */
    int status;           /* the status sent (for metrics); 0 until a response started */
    int retry_after_s;    /* a 503's or 429's Retry-After (seconds), 0: none */
    char set_cookie[200]; /* a Set-Cookie header for the response ("" none): signing in and out */
    cq_web_principal who;
    bool admitted;        /* authenticated (and, for an upload, allowed to edit the KB) */
    bool body_pending;    /* the request has a body not read yet: the connection closes after the response */
    char *body;           /* a JSON body, read on the connection thread (NUL-terminated) */
    size_t body_len;
    cq_web_upload upload; /* an upload, spooled on the connection thread */
    const char *cors_origin; /* the allowed foreign Origin to answer with Access-Control-Allow-Origin, or NULL */
    cq_web_watch watch;   /* the body being read or the answer being written, while it is */
    bool sse;             /* an event stream was started */
    bool sse_broken;      /* writing to it failed: the client is gone */
    size_t bytes_sent;    /* response body bytes written (the access log) */
    bool raw_head;        /* the response head is written by web/http.c, not CivetWeb (cq_web_status_text) */
    char raw_head_buf[2048];
};

/* ---- responses ---- */
/* The reason phrase of an HTTP status: CivetWeb's, except where its table is wrong (422: "Unprocessable Content",
 * RFC 9110, not CivetWeb's "Unproccessable entity"). */
const char *cq_web_status_text(struct mg_connection *conn, int status);
void cq_web_send_json(cq_web_req *r, int status, cJSON *body); /* frees body */
void cq_web_send_error(cq_web_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cq_web_send_status_error(cq_web_req *r, const cq_err *err); /* status from err->code */
void cq_web_send_bytes(cq_web_req *r, int status, const char *mime, const void *data, size_t len,
                       const char *cache_control);
void cq_web_send_file(cq_web_req *r, const cq_web_file *f, const char *cache_control);
void cq_web_send_text(cq_web_req *r, int status, const char *mime, const char *text);
/* 200 with data as an attachment named name (ASCII), Cache-Control no-store. */
void cq_web_send_download(cq_web_req *r, const char *mime, const void *data, size_t len, const char *name);

/* An error for a connection that has no request (CivetWeb's own errors: malformed requests, oversized headers):
 * the documented JSON body; the connection closes after it. */
void cq_web_send_conn_error(struct mg_connection *conn, int status, const char *code, const char *message);

/* ---- request bodies (read on the connection thread, see server.c) ---- */
/* Bodies and large answers must move at this average rate at least, after the first request timeout: a client that
 * dribbles its body (or reads its answer) a byte at a time holds its connection for seconds, not hours. */
#define CQ_WEB_MIN_BODY_BYTES_PER_S 16384
/* Reads the body into r->body (at most max bytes). Returns 0, or sends the error (413 too large, 408 too slow, 400
 * unreadable or cut short) and returns its status. */
int cq_web_read_body(cq_web_req *r, size_t max);
/* Streams the body to f (at most max bytes); *bytes gets its length. Same errors as cq_web_read_body, except that
 * a write error returns 500 without sending anything (the caller says what could not be stored). */
int cq_web_read_body_to(cq_web_req *r, FILE *f, size_t max, size_t *bytes);
/* Sends 413 for a body over max bytes, at once; the connection closes after it. */
void cq_web_refuse_too_large(cq_web_req *r, size_t max);
/* After an answer to a request whose body was not read (413, 401 ...): reads and drops what the client still sends
 * (at most 16 MiB, for about 5 s), so that it sees the answer rather than a reset connection. */
void cq_web_drain_body(cq_web_req *r);
/* Sends 408 for a body that stopped arriving; the connection closes after it. */
void cq_web_refuse_too_slow(cq_web_req *r);
/* The body read before as a JSON object; sends 400 and returns NULL when it is not one (docs/API.md: strict JSON,
 * no trailing data). */
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

/* ---- deadlines of slow transfers (web/watchdog.c) ---- */
cq_status cq_web_watchdog_start(cq_web_watchdog *w, cq_err *err);
void cq_web_watchdog_stop(cq_web_watchdog *w);
/* Watches r's body read (writing false) or answer (writing true): past deadline its socket is shut down. */
void cq_web_watch_begin(cq_web_req *r, bool writing, double deadline);
void cq_web_watch_move(cq_web_req *r, double deadline);
/* Ends the watch; true when the deadline passed (the socket was shut down). */
bool cq_web_watch_end(cq_web_req *r);

/* ---- what is checked before a request reaches a handler (web/guard.c) ---- */
/* Copies the allowed origins and host names of config (INVALID when one is malformed); guard_free frees them. */
cq_status cq_web_guard_init(cq_web_server *s, const cq_web_config *config, cq_err *err);
void cq_web_guard_free(cq_web_server *s);
/* Host header (DNS rebinding), Origin of requests that change something (cross-site requests), NUL bytes in the
 * URL, CORS preflights. Returns false when a response was sent. Runs on the connection thread. */
bool cq_web_guard_request(cq_web_req *r);
/* GET, HEAD and OPTIONS: the methods that change nothing. */
bool cq_web_safe_method(const char *method);
/* The Access-Control-* headers of a response to an allowed foreign origin. */
void cq_web_cors_headers(cq_web_req *r);
/* Counts the connection of this request against its client address, once per connection. False when the address
 * holds more connections than allowed (and the connection is not counted). */
bool cq_web_clients_admit(cq_web_server *s, struct mg_connection *conn);
/* When a connection closes: its address holds one fewer. */
void cq_web_clients_closed(cq_web_server *s, cq_web_conn *c);
void cq_web_clients_init(cq_web_clients *c);
void cq_web_clients_destroy(cq_web_clients *c);
/* The most connections any one client address holds now (counted ones: past their first request's admission). */
int cq_web_clients_max(cq_web_clients *c);

/* ---- helpers shared by the handlers (web/server.c) ---- */
/* Questions longer than this (in characters) are refused with 413 question_too_long: no clause answers a
 * 900 KB question, and retrieval and the prompt would pay for every character. */
#define CQ_WEB_QUESTION_MAX_CHARS 4000
/* False (and 413 sent) when the question is longer than CQ_WEB_QUESTION_MAX_CHARS. */
bool cq_web_question_fits(cq_web_req *r, const char *question);
/* Authenticates the request (sending 401 on failure); returns false when a response was sent. A request that
 * changes something on the strength of the session cookie alone must come from the server's own pages
 * (cq_web_same_site): else 403. */
bool cq_web_authenticate(cq_web_req *r);
/* Whether a request comes from the server's own pages, as a browser tells: Sec-Fetch-Site, when sent, is
 * "same-origin", and Origin, when sent, is the server's own (an allowed --cors-origin is not enough); with require,
 * a request with neither is not. *why gets the reason when not (web/guard.c). */
bool cq_web_same_site(const cq_web_req *r, bool require, const char **why);
/* The client's address (into out): the peer's, or, when the peer is a proxy on this machine (a loopback address),
 * the last address of its X-Forwarded-For. Whether the client's connection is HTTPS: TLS here, or such a proxy's
 * X-Forwarded-Proto: https. */
void cq_web_client_address(const cq_web_req *r, char *out, size_t cap);
bool cq_web_client_https(const cq_web_req *r);
/* Checks who may do `need` on kb; sends 403 and returns false when not. */
bool cq_web_authorize(cq_web_req *r, cq_web_role need, const char *kb);
/* The conversation fields of an ask's body into q ("conversation_id", "store", "regenerate"; a turn is kept by
 * default when keep_default); sends 400 and returns false when they are invalid. */
bool cq_web_parse_conversation(cq_web_req *r, const cJSON *body, bool keep_default, cq_web_question *q);

/* The handlers of issue 30's routes (office.c: ratings, exports, the quality report; admin.c: the admin API, whose
 * operation is the route's arg) and of the OpenAI-compatible ones (openai.c). cq_web_office_search answers
 * GET /api/v1/conversations?q= (false when there is no q). */
void cq_web_office_feedback(cq_web_req *r);
void cq_web_office_export(cq_web_req *r);
void cq_web_office_quality(cq_web_req *r);
void cq_web_office_feedback_export(cq_web_req *r);
bool cq_web_office_search(cq_web_req *r, const char *kb, bool every_owner);
void cq_web_admin_dispatch(cq_web_req *r);
void cq_web_openai_models(cq_web_req *r);
void cq_web_openai_chat(cq_web_req *r);

#endif
