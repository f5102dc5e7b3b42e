/* Responses, request bodies, query strings and event streams for the handlers (web/http.h). */
#include "web/http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "core/json.h"
#include "web/messages.h"

/* Headers every response carries: no sniffing, and a policy that keeps the page from loading anything that is not
 * ours (the page makes no external requests; this makes sure of it). */
#define CQ_WEB_CSP                                                                                                   \
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; "    \
    "frame-ancestors 'none'"

static void common_headers(struct mg_connection *c) {
    mg_response_header_add(c, "X-Content-Type-Options", "nosniff", -1);
    mg_response_header_add(c, "Content-Security-Policy", CQ_WEB_CSP, -1);
}

/* Reason phrases CivetWeb's table has wrong ("422 Unproccessable entity"): such a response's head is written here
 * (RFC 9110's phrase; the connection then closes, as CivetWeb no longer knows the response's length). */
static const char *own_reason(int status) { return status == 422 ? "Unprocessable Content" : NULL; }

const char *cq_web_status_text(struct mg_connection *conn, int status) {
    const char *own = own_reason(status);
    return own ? own : mg_get_response_code_text(conn, status);
}

/* A response head: CivetWeb's, or one written here (r->raw_head) for a status whose phrase is our own. */
static void head_add(cq_web_req *r, const char *name, const char *value) {
    if (!r->raw_head) {
        mg_response_header_add(r->conn, name, value, -1);
        return;
    }
    size_t used = strlen(r->raw_head_buf), room = sizeof r->raw_head_buf - used;
    int n = snprintf(r->raw_head_buf + used, room, "%s: %s\r\n", name, value);
    if (n < 0 || (size_t)n >= room) r->raw_head_buf[used] = 0; /* a header that does not fit is left out */
}

static void head_send(cq_web_req *r) {
    if (!r->raw_head) {
        mg_response_header_send(r->conn);
        return;
    }
    mg_disable_connection_keep_alive(r->conn);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm)); /* as CivetWeb's heads have */
    mg_printf(r->conn, "HTTP/1.1 %d %s\r\n%sDate: %s\r\nConnection: close\r\n\r\n", r->status,
              own_reason(r->status), r->raw_head_buf, date);
}

static void start_response(cq_web_req *r, int status, const char *mime, long long length, const char *cache) {
    r->status = status;
    r->raw_head = own_reason(status) != NULL;
    r->raw_head_buf[0] = 0;
    /* An unread body would have to be read (or waited for) before the next request: close instead. */
    if (r->body_pending) mg_disable_connection_keep_alive(r->conn);
    if (!r->raw_head) mg_response_header_start(r->conn, status);
    head_add(r, "Content-Type", mime);
    if (length >= 0) {
        char n[32];
        snprintf(n, sizeof n, "%lld", length);
        head_add(r, "Content-Length", n);
    }
    head_add(r, "Cache-Control", cache ? cache : "no-store");
    head_add(r, "X-Content-Type-Options", "nosniff");
    head_add(r, "Content-Security-Policy", CQ_WEB_CSP);
    if (r->cors_origin) {
        if (r->raw_head) {
            head_add(r, "Access-Control-Allow-Origin", r->cors_origin);
            head_add(r, "Vary", "Origin");
        } else
            cq_web_cors_headers(r);
    }
    if (status == 401) head_add(r, "WWW-Authenticate", "Bearer realm=\"clauseqa\"");
    if (status == 405 && r->allow) {
        char allow[64];
        cq_web_methods_text(r->allow, allow, sizeof allow);
        head_add(r, "Allow", allow);
    }
    if (r->set_cookie[0]) head_add(r, "Set-Cookie", r->set_cookie);
    if ((status == 503 || status == 429) && r->retry_after_s > 0) {
        char sec[16];
        snprintf(sec, sizeof sec, "%d", r->retry_after_s);
        head_add(r, "Retry-After", sec);
    }
}

#define WATCHED_ANSWER_BYTES 65536 /* answers this large are watched (a smaller one fits the socket's buffers) */

/* The deadline of writing len bytes: the request timeout plus their time at the minimum rate. */
static double write_deadline(const cq_web_req *r, long long len) {
    return cq_clock_seconds() + r->server->cfg.request_timeout_ms / 1e3 + (double)len / CQ_WEB_MIN_BODY_BYTES_PER_S;
}

void cq_web_send_bytes(cq_web_req *r, int status, const char *mime, const void *data, size_t len,
                       const char *cache_control) {
    start_response(r, status, mime, (long long)len, cache_control);
    head_send(r);
    if (!strcmp(r->method, "HEAD") || !len) return;
    bool watched = len >= WATCHED_ANSWER_BYTES;
    if (watched) cq_web_watch_begin(r, true, write_deadline(r, (long long)len));
    if (mg_write(r->conn, data, len) > 0) r->bytes_sent += len;
    if (watched) cq_web_watch_end(r);
}

void cq_web_send_text(cq_web_req *r, int status, const char *mime, const char *text) {
    cq_web_send_bytes(r, status, mime, text, strlen(text), NULL);
}

static const char oom_json[] = "{\"error\":{\"code\":\"no_memory\",\"message\":\"out of memory\"}}";

void cq_web_send_json(cq_web_req *r, int status, cJSON *body) {
    size_t n = 0;
    char *s = body ? cq_json_print(body, &n) : NULL;
    cJSON_Delete(body);
    if (!s) {
        cq_web_send_bytes(r, 503, "application/json", oom_json, sizeof oom_json - 1, NULL);
        return;
    }
    s[n] = '\n'; /* one line per document, like the CLI (the NUL is not sent) */
    cq_web_send_bytes(r, status, "application/json; charset=utf-8", s, n + 1, NULL);
    free(s);
}

/* The message's code and values (web/messages.h), for a page to show it in its language. */
static void add_message_code(cJSON *e, const char *message) {
    cJSON *args = cJSON_CreateArray();
    const char *mc = cq_web_message_code(message, args);
    if (!mc) {
        cJSON_Delete(args);
        return;
    }
    cJSON_AddStringToObject(e, "message_code", mc);
    cJSON_AddItemToObject(e, "message_args", args);
}

static cJSON *error_body(const char *code, const char *message) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
    add_message_code(e, message);
    return o;
}

void cq_web_send_error(cq_web_req *r, int status, const char *code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->sse) { /* the stream has started: the error is its last event */
        cJSON *e = error_body(code, msg);
        cJSON_AddNumberToObject(e, "status", status);
        cq_web_sse_send(r, "error", e);
        return;
    }
    cq_web_send_json(r, status, error_body(code, msg));
}

void cq_web_send_conn_error(struct mg_connection *conn, int status, const char *code, const char *message) {
    mg_disable_connection_keep_alive(conn);
    size_t n = 0;
    cJSON *o = error_body(code, message);
    char *s = cq_json_print(o, &n);
    cJSON_Delete(o);
    const char *text = s ? s : oom_json;
    size_t len = s ? n : sizeof oom_json - 1;
    /* Written out here: CivetWeb's status line would repeat the version the request named, whatever it holds
     * ("HTTP/<anything> 505"). */
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
              status, cq_web_status_text(conn, status), len);
    const struct mg_request_info *ri = mg_get_request_info(conn);
    if (!ri || !ri->request_method || strcmp(ri->request_method, "HEAD")) mg_write(conn, text, len);
    free(s);
}

void cq_web_send_status_error(cq_web_req *r, const cq_err *err) {
    cq_status code = err->code ? err->code : CQ_ERR_INTERNAL;
    if (code == CQ_ERR_BUSY) r->retry_after_s = err->retry_after_s > 0 ? err->retry_after_s : 1;
    cq_web_send_error(r, cq_web_http_status(code), cq_status_name(code), "%s", err->msg[0] ? err->msg : "failed");
}

int cq_web_http_status(cq_status code) {
    switch (code) {
    case CQ_OK: return 200;
    case CQ_ERR_INVALID: return 400;
    case CQ_ERR_NOT_FOUND: return 404;
    case CQ_ERR_EXISTS: return 409;
    case CQ_ERR_FORMAT:
    case CQ_ERR_UNSUPPORTED: return 415;
    case CQ_ERR_EMPTY: return 422;
    case CQ_ERR_TOO_LARGE: return 413;
    case CQ_ERR_CANCELLED: return 409;
    case CQ_ERR_BUSY: return 503;
    case CQ_ERR_NOMEM: return 503;
    case CQ_ERR_IO:
    case CQ_ERR_DB:
    case CQ_ERR_DEVICE:
    case CQ_ERR_INTERNAL: return 500;
    }
    return 500;
}

void cq_web_send_file(cq_web_req *r, const cq_web_file *f, const char *cache_control) {
    FILE *fp = fopen(f->path, "rb");
    struct stat st;
    if (!fp || fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fp) fclose(fp);
        cq_web_send_error(r, 404, "not_found", "the file is gone");
        return;
    }
    start_response(r, 200, f->mime, (long long)st.st_size, cache_control);
    if (f->download_name[0]) {
        /* RFC 6266: an ASCII fallback and the UTF-8 name percent-encoded (RFC 5987). */
        char ascii[256], encoded[768], header[1100];
        size_t a = 0, e = 0;
        for (const unsigned char *p = (const unsigned char *)f->download_name; *p; p++) {
            if (a + 1 < sizeof ascii) ascii[a++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? (char)*p : '_';
            if (e + 4 < sizeof encoded) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    strchr("-._~", *p))
                    encoded[e++] = (char)*p;
                else e += (size_t)snprintf(encoded + e, sizeof encoded - e, "%%%02X", *p);
            }
        }
        ascii[a] = 0;
        encoded[e] = 0;
        snprintf(header, sizeof header, "attachment; filename=\"%s\"; filename*=UTF-8''%s", ascii, encoded);
        mg_response_header_add(r->conn, "Content-Disposition", header, -1);
    }
    mg_response_header_send(r->conn);
    if (strcmp(r->method, "HEAD") != 0) {
        cq_web_watch_begin(r, true, write_deadline(r, (long long)st.st_size));
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, fp)) > 0) {
            if (mg_write(r->conn, buf, n) <= 0) break;
            r->bytes_sent += n;
        }
        cq_web_watch_end(r);
    }
    fclose(fp);
}

/* ---- bodies ---------------------------------------------------------------------------------------------------- */

void cq_web_refuse_too_large(cq_web_req *r, size_t max) {
    /* Answered at once, without reading what the client is still sending: the connection closes after it. */
    r->body_pending = true;
    cq_web_send_error(r, 413, "payload_too_large", "the request body is larger than %zu bytes", max);
}

#define BODY_CHUNK_BYTES 16384
#define DRAIN_MAX_BYTES (16u << 20) /* read and dropped after an answer to a request whose body was not read */
#define DRAIN_MAX_S 5.0

void cq_web_drain_body(cq_web_req *r) {
    /* Closing a socket with unread data resets the connection, and a client still sending its body would see the
     * reset instead of the answer (sent already). So read and drop what it still sends, within bounds; a read that
     * waits for data that never comes returns after the request timeout. */
    char *buf = malloc(BODY_CHUNK_BYTES); /* the connection thread's stack is small (server.c) */
    size_t drained = 0;
    double t0 = cq_clock_seconds();
    int got;
    while (buf && drained < DRAIN_MAX_BYTES && cq_clock_seconds() - t0 < DRAIN_MAX_S &&
           (got = mg_read(r->conn, buf, BODY_CHUNK_BYTES)) > 0)
        drained += (size_t)got;
    free(buf);
}

void cq_web_refuse_too_slow(cq_web_req *r) {
    r->body_pending = true;
    cq_web_send_error(r, 408, "request_timeout", "the request body did not arrive in time");
}

/* Where a body goes: a growing buffer, or a file. */
typedef struct {
    char *buf;
    size_t len, cap;
    FILE *f;
    bool write_failed;
} body_sink;

static bool sink_put(body_sink *k, const char *data, size_t n) {
    if (k->f) {
        if (fwrite(data, 1, n, k->f) != n) k->write_failed = true;
        return !k->write_failed;
    }
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + n + 1) cap *= 2;
        char *p = realloc(k->buf, cap);
        if (!p) return false;
        k->buf = p;
        k->cap = cap;
    }
    memcpy(k->buf + k->len, data, n);
    k->len += n;
    k->buf[k->len] = 0;
    return true;
}

/* Reads the whole body into k. The body must arrive within the request timeout plus the time it takes at
 * CQ_WEB_MIN_BODY_BYTES_PER_S (the watchdog cuts it off after that). */
static int read_body(cq_web_req *r, size_t max, body_sink *k) {
    long long declared = r->ri->content_length; /* -1: chunked (CivetWeb answers 411 to other bodies) */
    if (declared > (long long)max) {
        cq_web_refuse_too_large(r, max);
        return 413;
    }
    double t0 = cq_clock_seconds(), timeout_s = r->server->cfg.request_timeout_ms / 1e3;
    char *chunk = malloc(BODY_CHUNK_BYTES); /* the connection thread's stack is small (server.c) */
    size_t total = 0;
    int rc = chunk ? 0 : 503;
    cq_web_watch_begin(r, false, t0 + timeout_s);
    while (chunk) {
        size_t want = BODY_CHUNK_BYTES;
        if (declared >= 0 && (long long)total >= declared) break;
        if (declared >= 0 && (unsigned long long)(declared - (long long)total) < want)
            want = (size_t)(declared - (long long)total);
        int got = mg_read(r->conn, chunk, want);
        if (got < 0) { /* the client closed its side, the watchdog cut it off, or a chunked body is malformed */
            rc = 400;
            break;
        }
        if (got == 0) break; /* the end, or (with a Content-Length) nothing came within the request timeout */
        total += (size_t)got;
        if (total > max) {
            rc = 413;
            break;
        }
        if (!sink_put(k, chunk, (size_t)got)) {
            rc = k->f ? 500 : 503;
            break;
        }
        cq_web_watch_move(r, t0 + timeout_s + (double)total / CQ_WEB_MIN_BODY_BYTES_PER_S);
    }
    free(chunk);
    if (cq_web_watch_end(r) || (!rc && declared >= 0 && (long long)total < declared)) rc = 408;
    r->body_pending = rc != 0;
    switch (rc) {
    case 0:
    case 500: break; /* the caller says what could not be stored */
    case 408: cq_web_refuse_too_slow(r); break;
    case 413: cq_web_refuse_too_large(r, max); break;
    case 503: cq_web_send_error(r, 503, "no_memory", "out of memory"); break;
    default:
        cq_web_send_error(r, 400, "bad_request", "the request body could not be read (it is cut short or malformed)");
    }
    return rc;
}

int cq_web_read_body(cq_web_req *r, size_t max) {
    body_sink k = {0};
    int rc = read_body(r, max, &k);
    if (rc) {
        free(k.buf);
        return rc;
    }
    if (!k.buf && !(k.buf = calloc(1, 1))) {
        cq_web_send_error(r, 503, "no_memory", "out of memory");
        return 503;
    }
    r->body = k.buf;
    r->body_len = k.len;
    return 0;
}

int cq_web_read_body_to(cq_web_req *r, FILE *f, size_t max, size_t *bytes) {
    body_sink k = {.f = f};
    int rc = read_body(r, max, &k);
    *bytes = k.len;
    return rc;
}

cJSON *cq_web_read_json(cq_web_req *r) {
    char why[160];
    cJSON *v = cq_json_parse_strict(r->body ? r->body : "", r->body_len, why, sizeof why);
    if (!v) {
        cq_web_send_error(r, 400, "invalid_json", "the body is not valid JSON: %s", why);
    } else if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        v = NULL;
        cq_web_send_error(r, 400, "invalid_json", "the body must be a JSON object");
    }
    return v;
}

/* ---- query strings -------------------------------------------------------------------------------------------- */

bool cq_web_query(const cq_web_req *r, const char *name, char *buf, size_t size) {
    const char *q = r->ri->query_string;
    if (!q) return false;
    return mg_get_var(q, strlen(q), name, buf, size) >= 0;
}

long cq_web_query_long(cq_web_req *r, const char *name, long def, long lo, long hi) {
    char buf[32];
    if (!cq_web_query(r, name, buf, sizeof buf) || !buf[0]) return def;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        cq_web_send_error(r, 400, "invalid", "query parameter '%s' must be a number from %ld to %ld", name, lo, hi);
        return -1;
    }
    return v;
}

/* ---- server-sent events --------------------------------------------------------------------------------------- */

bool cq_web_accepts_sse(const cq_web_req *r) {
    const char *a = mg_get_header(r->conn, "Accept");
    return a && strstr(a, "text/event-stream");
}

void cq_web_sse_start(cq_web_req *r) {
    if (r->sse) return;
    r->status = 200;
    if (r->body_pending) mg_disable_connection_keep_alive(r->conn);
    mg_response_header_start(r->conn, 200);
    mg_response_header_add(r->conn, "Content-Type", "text/event-stream; charset=utf-8", -1);
    mg_response_header_add(r->conn, "Cache-Control", "no-store", -1);
    mg_response_header_add(r->conn, "X-Accel-Buffering", "no", -1); /* tells nginx not to buffer the stream */
    mg_response_header_add(r->conn, "Transfer-Encoding", "chunked", -1);
    common_headers(r->conn);
    if (r->cors_origin) cq_web_cors_headers(r);
    mg_response_header_send(r->conn);
    r->sse = true;
}

static int sse_write(cq_web_req *r, const char *s, size_t n) {
    if (r->sse_broken) return -1;
    if (mg_send_chunk(r->conn, s, (unsigned)n) < 0) {
        r->sse_broken = true;
        return -1;
    }
    r->bytes_sent += n;
    return 0;
}

int cq_web_sse_send(cq_web_req *r, const char *event, cJSON *data) {
    char *json = cq_json_print(data, NULL);
    cJSON_Delete(data);
    if (!json) return -1;
    size_t n = strlen(json) + (event ? strlen(event) : 0) + 32;
    char *msg = malloc(n);
    if (!msg) {
        free(json);
        return -1;
    }
    int len = event ? snprintf(msg, n, "event: %s\ndata: %s\n\n", event, json) : snprintf(msg, n, "data: %s\n\n", json);
    free(json);
    int rc = sse_write(r, msg, (size_t)len);
    free(msg);
    return rc;
}

int cq_web_sse_send_raw(cq_web_req *r, const char *line) {
    size_t n = strlen(line) + 16;
    char *msg = malloc(n);
    if (!msg) return -1;
    int len = snprintf(msg, n, "data: %s\n\n", line);
    int rc = sse_write(r, msg, (size_t)len);
    free(msg);
    return rc;
}

void cq_web_sse_end(cq_web_req *r) {
    if (r->sse && !r->sse_broken) mg_send_chunk(r->conn, "", 0);
}

void cq_web_send_download(cq_web_req *r, const char *mime, const void *data, size_t len, const char *name) {
    start_response(r, 200, mime, (long long)len, "no-store");
    char header[400];
    snprintf(header, sizeof header, "attachment; filename=\"%s\"", name); /* ASCII names only (callers make them) */
    mg_response_header_add(r->conn, "Content-Disposition", header, -1);
    mg_response_header_send(r->conn);
    if (!strcmp(r->method, "HEAD") || !len) return;
    bool watched = len >= WATCHED_ANSWER_BYTES;
    if (watched) cq_web_watch_begin(r, true, write_deadline(r, (long long)len));
    if (mg_write(r->conn, data, len) > 0) r->bytes_sent += len;
    if (watched) cq_web_watch_end(r);
}
