/* The access log: one line a request, written when the response is complete.
 *
 *   text   2026-12-01T15:44:50.123Z 127.0.0.1 GET /api/v1/kbs/%E6%B3%95%E8%A7%84/ask 200 1834 15.2ms ops
 *          time (UTC), client address, method, path (percent-encoded, no query), status, body bytes sent, duration,
 *          the API key's name (percent-encoded; "-" without one)
 *   json   {"time": "...", "client": "127.0.0.1", "method": "GET", "path": "/api/v1/kbs/法规/ask", "status": 200,
 *          "bytes": 1834, "duration_ms": 15.2, "key": "ops", "forwarded_for": "203.0.113.7"}   (key and
 *          forwarded_for only when there is one)
 *
 * "-" writes to stdout. A file is opened for appending and reopened by cq_web_reopen_logs (SIGHUP), which is what
 * log rotation needs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "web/http.h"

struct cq_web_access_log {
    pthread_mutex_t lock;
    FILE *f;
    char *path; /* NULL for stdout */
    bool json;
};

static FILE *open_log(const char *path, cq_err *err) {
    FILE *f = fopen(path, "a");
    if (!f) cq_err_set(err, CQ_ERR_IO, "cannot open the access log %s for appending", path);
    return f;
}

cq_status cq_web_access_log_open(const char *path, bool json, cq_web_access_log **out, cq_err *err) {
    *out = NULL;
    cq_web_access_log *l = calloc(1, sizeof *l);
    if (!l) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&l->lock, NULL);
    l->json = json;
    if (!strcmp(path, "-")) {
        l->f = stdout;
    } else if (!(l->path = strdup(path)) || !(l->f = open_log(path, err))) {
        if (!l->path) cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        cq_web_access_log_close(l);
        return err ? err->code : CQ_ERR_IO;
    }
    *out = l;
    return CQ_OK;
}

cq_status cq_web_access_log_reopen(cq_web_access_log *l, cq_err *err) {
    if (!l || !l->path) return CQ_OK;
    FILE *f = open_log(l->path, err);
    if (!f) return err ? err->code : CQ_ERR_IO;
    pthread_mutex_lock(&l->lock);
    FILE *old = l->f;
    l->f = f;
    pthread_mutex_unlock(&l->lock);
    fclose(old);
    return CQ_OK;
}

void cq_web_access_log_close(cq_web_access_log *l) {
    if (!l) return;
    if (l->f && l->f != stdout) fclose(l->f);
    else if (l->f) fflush(l->f);
    pthread_mutex_destroy(&l->lock);
    free(l->path);
    free(l);
}

/* The path as a token without spaces or quotes: bytes outside the URL's own characters percent-encoded. */
static void encode_path(const char *in, char *out, size_t cap) {
    static const char keep[] = "/-._~!$&'()*+,;=:@";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr(keep, *p))
            out[o++] = (char)*p;
        else o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
    }
    out[o] = 0;
}

void cq_web_access_log_write(cq_web_access_log *l, const cq_web_req *r, double seconds) {
    if (!l) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char when[40], stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when, sizeof when, "%s.%03dZ", stamp, (int)(now.tv_nsec / 1000000) % 1000);
    double ms = (double)(long long)(seconds * 1e4) / 10; /* to 0.1 ms */
    const char *key = r->who.key_id ? r->who.name : NULL;
    char *line = NULL;
    if (l->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "time", when);
        cJSON_AddStringToObject(o, "client", r->ri->remote_addr);
        cJSON_AddStringToObject(o, "method", r->method);
        cJSON_AddStringToObject(o, "path", r->path);
        cJSON_AddNumberToObject(o, "status", r->status);
        cJSON_AddNumberToObject(o, "bytes", (double)r->bytes_sent);
        cJSON_AddNumberToObject(o, "duration_ms", ms);
        if (key) cJSON_AddStringToObject(o, "key", key);
        const char *fwd = mg_get_header(r->conn, "X-Forwarded-For");
        if (fwd) cJSON_AddStringToObject(o, "forwarded_for", fwd);
        line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    } else {
        char path[3200], who[200];
        encode_path(r->path, path, sizeof path);
        encode_path(key && *key ? key : "-", who, sizeof who);
        size_t n = strlen(path) + strlen(r->method) + strlen(who) + 160;
        if ((line = malloc(n)))
            snprintf(line, n, "%s %s %s %s %d %zu %.1fms %s", when, r->ri->remote_addr, r->method, path, r->status,
                     r->bytes_sent, ms, who);
    }
    if (!line) return;
    pthread_mutex_lock(&l->lock);
    fputs(line, l->f);
    fputc('\n', l->f);
    fflush(l->f);
    pthread_mutex_unlock(&l->lock);
    free(line);
}
