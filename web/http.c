/* Responses, request bodies, query strings and event streams for the handlers (web/http.h). */
#include "web/http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Headers every response carries: no sniffing, and a policy that keeps the page from loading anything that is not
 * ours (the page makes no external requests; this makes sure of it). */
static void common_headers(struct mg_connection *c) {
    mg_response_header_add(c, "X-Content-Type-Options", "nosniff", -1);
    mg_response_header_add(c, "Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
                           "connect-src 'self'; frame-ancestors 'none'",
                           -1);
}

static void start_response(cq_web_req *r, int status, const char *mime, long long length, const char *cache) {
    r->status = status;
    mg_response_header_start(r->conn, status);
    mg_response_header_add(r->conn, "Content-Type", mime, -1);
    if (length >= 0) {
        char n[32];
        snprintf(n, sizeof n, "%lld", length);
        mg_response_header_add(r->conn, "Content-Length", n, -1);
    }
    mg_response_header_add(r->conn, "Cache-Control", cache ? cache : "no-store", -1);
    common_headers(r->conn);
    if (status == 401) mg_response_header_add(r->conn, "WWW-Authenticate", "Bearer realm=\"clauseqa\"", -1);
}

void cq_web_send_bytes(cq_web_req *r, int status, const char *mime, const void *data, size_t len,
                       const char *cache_control) {
    start_response(r, status, mime, (long long)len, cache_control);
    mg_response_header_send(r->conn);
    if (strcmp(r->method, "HEAD") != 0 && len && mg_write(r->conn, data, len) > 0) r->bytes_sent += len;
}

void cq_web_send_text(cq_web_req *r, int status, const char *mime, const char *text) {
    cq_web_send_bytes(r, status, mime, text, strlen(text), NULL);
}

void cq_web_send_json(cq_web_req *r, int status, cJSON *body) {
    char *s = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    if (!s) {
        static const char oom[] = "{\"error\":{\"code\":\"no_memory\",\"message\":\"out of memory\"}}";
        cq_web_send_bytes(r, 503, "application/json", oom, sizeof oom - 1, NULL);
        return;
    }
    size_t n = strlen(s);
    s[n] = '\n'; /* one line per document, like the CLI (the NUL is not sent) */
    cq_web_send_bytes(r, status, "application/json; charset=utf-8", s, n + 1, NULL);
    free(s);
}

static cJSON *error_body(const char *code, const char *message) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", message);
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

void cq_web_send_status_error(cq_web_req *r, const cq_err *err) {
    cq_status code = err->code ? err->code : CQ_ERR_INTERNAL;
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
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, fp)) > 0) {
            if (mg_write(r->conn, buf, n) <= 0) break;
            r->bytes_sent += n;
        }
    }
    fclose(fp);
}

/* ---- bodies ---------------------------------------------------------------------------------------------------- */

#define DRAIN_MAX_BYTES (16u << 20) /* read past a body's limit before refusing it, at most */

void cq_web_refuse_too_large(cq_web_req *r, size_t max) {
    /* Read and drop what the client is still sending (up to DRAIN_MAX_BYTES), so that it sees the answer rather
     * than a reset connection; past that, close the connection after the answer. */
    char *buf = malloc(65536);
    size_t drained = 0;
    int got = 1;
    while (buf && drained <= DRAIN_MAX_BYTES && (got = mg_read(r->conn, buf, 65536)) > 0) drained += (size_t)got;
    free(buf);
    if (got != 0) mg_disable_connection_keep_alive(r->conn);
    cq_web_send_error(r, 413, "payload_too_large", "the request body is larger than %zu bytes", max);
}

int cq_web_read_body(cq_web_req *r, size_t max, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    long long length = r->ri->content_length;
    if (length > (long long)max) {
        cq_web_refuse_too_large(r, max);
        return 413;
    }
    size_t cap = length >= 0 ? (size_t)length + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        cq_web_send_error(r, 503, "no_memory", "out of memory");
        return 503;
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max + 1) {
                free(buf);
                cq_web_refuse_too_large(r, max);
                return 413;
            }
            size_t ncap = cap * 2 > max + 2 ? max + 2 : cap * 2;
            char *p = realloc(buf, ncap);
            if (!p) {
                free(buf);
                cq_web_send_error(r, 503, "no_memory", "out of memory");
                return 503;
            }
            buf = p;
            cap = ncap;
        }
        int got = mg_read(r->conn, buf + n, cap - n - 1);
        if (got < 0) {
            free(buf);
            mg_disable_connection_keep_alive(r->conn);
            cq_web_send_error(r, 400, "bad_request", "the request body could not be read");
            return 400;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > max) {
            free(buf);
            cq_web_refuse_too_large(r, max);
            return 413;
        }
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

cJSON *cq_web_read_json(cq_web_req *r) {
    char *body;
    size_t len;
    if (cq_web_read_body(r, r->server->cfg.max_json_bytes, &body, &len)) return NULL;
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!v) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        cq_web_send_error(r, 400, "invalid_json", "the body is not valid JSON (near byte %zu)", at);
    } else if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        v = NULL;
        cq_web_send_error(r, 400, "invalid_json", "the body must be a JSON object");
    }
    free(body);
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
    mg_response_header_start(r->conn, 200);
    mg_response_header_add(r->conn, "Content-Type", "text/event-stream; charset=utf-8", -1);
    mg_response_header_add(r->conn, "Cache-Control", "no-store", -1);
    mg_response_header_add(r->conn, "X-Accel-Buffering", "no", -1); /* tells nginx not to buffer the stream */
    mg_response_header_add(r->conn, "Transfer-Encoding", "chunked", -1);
    common_headers(r->conn);
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
    char *json = cJSON_PrintUnformatted(data);
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
