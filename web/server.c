/* CivetWeb set-up, routing and the REST handlers under /api/v1 (the OpenAI-compatible ones are in openai.c). */
#include "core/clock.h"
#include "web/server.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/utf8.h"
#include "web/http.h"
#include "web/static_files.h"

#define DEFAULT_THREADS 16
#define DEFAULT_CONNECTIONS 128
#define DEFAULT_MAX_JSON_BYTES (1u << 20)
#define DEFAULT_MAX_UPLOAD_BYTES (64u << 20)
#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_MAX_CLIENT_CONNECTIONS 32
#define PAGE_WIDTH_DEFAULT 1000
#define PAGE_WIDTH_MIN 100
#define PAGE_WIDTH_MAX 2400


/* ---- authentication ------------------------------------------------------------------------------------------- */

/* The session cookie's token into out (CQ_WEB_SESSION_TOKEN_BYTES); false when there is none. */
static bool session_cookie(const cq_web_req *r, char *out) {
    const char *cookies = mg_get_header(r->conn, "Cookie");
    out[0] = 0;
    return cookies && mg_get_cookie(cookies, CQ_WEB_SESSION_COOKIE, out, CQ_WEB_SESSION_TOKEN_BYTES) > 0;
}

/* The session cookie (value "" and expired: the browser drops it), for the response. */
static void set_session_cookie(cq_web_req *r, const char *token) {
    snprintf(r->set_cookie, sizeof r->set_cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict%s%s",
             CQ_WEB_SESSION_COOKIE, token, cq_web_client_https(r) ? "; Secure" : "", token[0] ? "" : "; Max-Age=0");
}

bool cq_web_authenticate(cq_web_req *r) {
    const char *h = mg_get_header(r->conn, "Authorization");
    char token[256] = "", session[CQ_WEB_SESSION_TOKEN_BYTES] = "";
    bool malformed = false;
    if (h) {
        if (!strncasecmp(h, "Bearer ", 7)) {
            const char *t = h + 7;
            while (*t == ' ') t++;
            if (strlen(t) < sizeof token) snprintf(token, sizeof token, "%s", t);
            else malformed = true;
            size_t n = strlen(token);
            while (n && token[n - 1] == ' ') token[--n] = 0;
        } else {
            malformed = true;
        }
    }
    cq_err err = {0};
    if (malformed) {
        cq_web_send_error(r, 401, "unauthorized", "use 'Authorization: Bearer <key>'");
        return false;
    }
    bool cookie = !token[0] && session_cookie(r, session);
    if (r->svc->authenticate(r->svc->ctx, token[0] ? token : NULL, cookie ? session : NULL, &r->who, &err)) {
        if (err.code == CQ_ERR_NOT_FOUND) {
            if (cookie) set_session_cookie(r, ""); /* a session that ended: the browser forgets it */
            cq_web_send_error(r, 401, "unauthorized", "%s", err.msg[0] ? err.msg : "a valid API key is required");
        } else {
            cq_web_send_status_error(r, &err);
        }
        return false;
    }
    /* A cookie is sent by the browser whichever page makes the request: a change made on its strength alone must
     * come from this server's own page (SameSite=Strict keeps other sites' requests from carrying it; this is the
     * second wall, for browsers and subdomains that do not). */
    const char *why = NULL;
    if (r->who.session_id && !cq_web_safe_method(r->method) && !cq_web_same_site(r, true, &why)) {
        cq_web_send_error(r, 403, "cross_site", "%s", why);
        return false;
    }
    return true;
}

bool cq_web_authorize(cq_web_req *r, cq_web_role need, const char *kb) {
    if (r->svc->allows(r->svc->ctx, &r->who, need, kb)) return true;
    static const char *const names[] = {"", "read", "edit", "admin"};
    /* two fixed wordings each (a user, a key): each is one entry of the messages' catalog (web/messages.c) */
    if (kb && r->who.user_id)
        cq_web_send_error(r, 403, "forbidden", "this user may not %s knowledge base '%s'", names[need], kb);
    else if (kb)
        cq_web_send_error(r, 403, "forbidden", "this key may not %s knowledge base '%s'", names[need], kb);
    else if (r->who.user_id)
        cq_web_send_error(r, 403, "forbidden", "this needs an admin user");
    else
        cq_web_send_error(r, 403, "forbidden", "this needs an admin key");
    return false;
}

/* ---- helpers -------------------------------------------------------------------------------------------------- */

/* 405 with the methods the path has (the Allow header too). */
static void method_not_allowed(cq_web_req *r) {
    char allowed[64];
    cq_web_methods_text(r->allow, allowed, sizeof allowed);
    cq_web_send_error(r, 405, "method_not_allowed", "%s %s: use %s", r->method, r->path, allowed);
}

/* Sends out (status) or the error of a failed service call. */
static void reply(cq_web_req *r, cq_status rc, const cq_err *err, int status, cJSON *out) {
    if (rc) {
        cJSON_Delete(out);
        cq_web_send_status_error(r, err);
    } else {
        cq_web_send_json(r, status, out ? out : cJSON_CreateObject());
    }
}

/* The audit trail (store/audit.h): who did action on kb and target, after it succeeded. */
static void audit(cq_web_req *r, const char *action, const char *kb, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void audit(cq_web_req *r, const char *action, const char *kb, const char *fmt, ...) {
    if (!r->svc->audit) return;
    char target[256] = "", client[64];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(target, sizeof target, fmt, ap);
        va_end(ap);
    }
    cq_web_client_address(r, client, sizeof client);
    r->svc->audit(r->svc->ctx, &r->who, client, action, kb, fmt ? target : NULL);
}

static cJSON *wrap(const char *key, cJSON *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, key, v);
    return o;
}

/* Drops the KBs of a list (array of objects with "name") that who may not read. */
static void filter_kbs(cq_web_req *r, cJSON *arr, const char *field) {
    cJSON *it = arr ? arr->child : NULL;
    while (it) {
        cJSON *next = it->next;
        const cJSON *name = cJSON_GetObjectItem(it, field);
        if (!cJSON_IsString(name) || !r->svc->allows(r->svc->ctx, &r->who, CQ_WEB_READ, name->valuestring))
            cJSON_Delete(cJSON_DetachItemViaPointer(arr, it));
        it = next;
    }
}

/* ---- the page ------------------------------------------------------------------------------------------------- */

static void serve_static(cq_web_req *r) {
    r->allow = CQ_M_GET | CQ_M_HEAD;
    if (!(cq_web_method_bit(r->method) & r->allow)) return method_not_allowed(r);
    if (!strcmp(r->path, "/favicon.ico")) return cq_web_send_bytes(r, 204, "image/x-icon", "", 0, "max-age=86400");
    const char *p = !strcmp(r->path, "/") ? "/index.html" : r->path;
    for (size_t i = 0; i < cq_web_n_static_files; i++) {
        const cq_web_static_file *f = &cq_web_static_files[i];
        if (!strcmp(f->path, p)) return cq_web_send_bytes(r, 200, f->mime, f->data, f->len, "no-cache");
    }
}

/* ---- health and metrics --------------------------------------------------------------------------------------- */

static void health(cq_web_req *r) {
    cJSON *out = NULL;
    cq_err err = {0};
    cq_status rc = r->svc->health(r->svc->ctx, &out, &err);
    reply(r, rc, &err, 200, out);
}

static void metrics(cq_web_req *r) {
    cq_strbuf b = {0};
    cq_web_metrics_print(&r->server->metrics, &b);
    cq_strbuf_printf(&b,
                     "# HELP clauseqa_http_connections_open Connections open now (this one included), and the slots: "
                     "--connections ordinary ones, then reserved ones for health, metrics and jobs.\n"
                     "# TYPE clauseqa_http_connections_open gauge\n"
                     "clauseqa_http_connections_open %d\n"
                     "# HELP clauseqa_http_connection_slots Connection slots, by kind.\n"
                     "# TYPE clauseqa_http_connection_slots gauge\n"
                     "clauseqa_http_connection_slots{kind=\"ordinary\"} %d\n"
                     "clauseqa_http_connection_slots{kind=\"reserved\"} %d\n"
                     "# HELP clauseqa_http_client_connections_max The most connections one client address holds now "
                     "(--max-client-connections bounds it).\n"
                     "# TYPE clauseqa_http_client_connections_max gauge\n"
                     "clauseqa_http_client_connections_max %d\n",
                     atomic_load(&r->server->open_connections), r->server->cfg.connections, CQ_WEB_RESERVED_SLOTS,
                     cq_web_clients_max(&r->server->clients));
    r->svc->metrics(r->svc->ctx, &b);
    if (b.failed) {
        cq_strbuf_free(&b);
        cq_web_send_error(r, 503, "no_memory", "out of memory");
        return;
    }
    cq_web_send_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "", b.len, NULL);
    cq_strbuf_free(&b);
}

/* ---- knowledge bases ------------------------------------------------------------------------------------------ */

static void kb_list(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->kb_list(r->svc->ctx, &out, &err);
    if (!rc) filter_kbs(r, out, "name");
    reply(r, rc, &err, 200, rc ? out : wrap("kbs", out));
}

static void kb_create(cq_web_req *r) {
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    const cJSON *name = cJSON_GetObjectItem(body, "name");
    if (!cJSON_IsString(name)) {
        cq_web_send_error(r, 400, "invalid", "give the knowledge base a \"name\"");
    } else {
        cq_err err = {0};
        cJSON *out = NULL;
        cq_status rc = r->svc->kb_create(r->svc->ctx, name->valuestring, &out, &err);
        if (!rc) audit(r, "kb_create", name->valuestring, NULL);
        reply(r, rc, &err, 201, out);
    }
    cJSON_Delete(body);
}

static void kb_get(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->kb_get(r->svc->ctx, r->kb, &out, &err);
    reply(r, rc, &err, 200, out);
}

static void kb_delete(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->kb_delete(r->svc->ctx, r->kb, &err);
    if (!rc) {
        audit(r, "kb_delete", r->kb, NULL);
        out = wrap("deleted", cJSON_CreateString(r->kb));
    }
    reply(r, rc, &err, 200, out);
}

static void kb_jobs(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->job_list(r->svc->ctx, r->kb, &out, &err);
    reply(r, rc, &err, 200, rc ? out : wrap("jobs", out));
}

/* ---- uploads -------------------------------------------------------------------------------------------------- */

/* An upload is received on the connection thread (receive_upload: spooled to a file of its own, however slowly
 * the client sends it) and handed to the service on a worker (upload). */
typedef struct {
    cq_web_req *r;
    FILE *f;
    size_t bytes, max;
    double t0, timeout_s;
    bool have_file, too_large, io_error;
} upload_state;

static bool spool_open(cq_web_req *r, FILE **f) {
    snprintf(r->upload.path, sizeof r->upload.path, "%s/upload-XXXXXX", r->server->spool_dir);
    int fd = mkstemp(r->upload.path);
    *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (*f) return true;
    if (fd >= 0) {
        close(fd);
        unlink(r->upload.path);
    }
    r->upload.path[0] = 0;
    return false;
}

/* Closes the spooled file; false (and the file removed) when it is unusable. */
static bool spool_close(cq_web_req *r, FILE *f, bool ok) {
    if (f && fclose(f) != 0) ok = false;
    if (!ok && r->upload.path[0]) {
        unlink(r->upload.path);
        r->upload.path[0] = 0;
    }
    return ok;
}

static bool truthy(const char *s) { return !strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"); }

static int form_field_found(const char *key, const char *filename, char *path, size_t pathlen, void *user) {
    (void)path;
    (void)pathlen;
    upload_state *u = user;
    if (filename && *filename) {
        if (u->have_file) return MG_FORM_FIELD_STORAGE_SKIP; /* one document per request: the first file */
        u->have_file = true;
        snprintf(u->r->upload.filename, sizeof u->r->upload.filename, "%s", filename);
        if (!spool_open(u->r, &u->f)) {
            u->io_error = true;
            return MG_FORM_FIELD_STORAGE_ABORT;
        }
        return MG_FORM_FIELD_STORAGE_GET;
    }
    return !strcmp(key, "replace") || !strcmp(key, "ocr") ? MG_FORM_FIELD_STORAGE_GET : MG_FORM_FIELD_STORAGE_SKIP;
}

static int form_field_get(const char *key, const char *value, size_t len, void *user) {
    upload_state *u = user;
    if (!strcmp(key, "replace") && !u->f) {
        char v[16];
        snprintf(v, sizeof v, "%.*s", (int)(len < 15 ? len : 15), value);
        u->r->upload.replace = truthy(v);
        return MG_FORM_FIELD_HANDLE_NEXT;
    }
    if (!strcmp(key, "ocr") && !u->f) {
        char *o = u->r->upload.ocr;
        const size_t cap = sizeof u->r->upload.ocr - 1;
        snprintf(o, cap + 1, "%.*s", (int)(len < cap ? len : cap), value);
        return MG_FORM_FIELD_HANDLE_NEXT;
    }
    if (!u->f) return MG_FORM_FIELD_HANDLE_NEXT;
    u->bytes += len;
    if (u->bytes > u->max) {
        u->too_large = true;
        return MG_FORM_FIELD_HANDLE_ABORT;
    }
    if (len && fwrite(value, 1, len, u->f) != len) {
        u->io_error = true;
        return MG_FORM_FIELD_HANDLE_ABORT;
    }
    cq_web_watch_move(u->r, u->t0 + u->timeout_s + (double)u->bytes / CQ_WEB_MIN_BODY_BYTES_PER_S);
    return MG_FORM_FIELD_HANDLE_GET;
}

static int form_field_store(const char *path, long long size, void *user) {
    (void)path;
    (void)size;
    (void)user;
    return MG_FORM_FIELD_HANDLE_NEXT;
}

/* A multipart form, streamed by CivetWeb's form parser (which reads the body itself). */
static void receive_form(cq_web_req *r, size_t max) {
    upload_state u = {.r = r, .max = max, .t0 = cq_clock_seconds(),
                      .timeout_s = r->server->cfg.request_timeout_ms / 1e3};
    struct mg_form_data_handler h = {form_field_found, form_field_get, form_field_store, &u};
    cq_web_watch_begin(r, false, u.t0 + u.timeout_s);
    int n = mg_handle_form_request(r->conn, &h);
    bool too_slow = cq_web_watch_end(r);
    r->body_pending = true; /* the parser may stop before the end of the body: never keep the connection */
    bool ok = spool_close(r, u.f, !u.io_error && !u.too_large && !too_slow && n >= 0);
    if (u.too_large) return cq_web_refuse_too_large(r, max);
    if (too_slow) return cq_web_refuse_too_slow(r);
    if (u.io_error) return cq_web_send_error(r, 500, "io", "the upload could not be stored");
    if (!u.have_file) return cq_web_send_error(r, 400, "invalid", "the form has no file field");
    if (!ok) return cq_web_send_error(r, 400, "bad_request", "the multipart body is malformed or cut short");
}

/* A raw body, named by ?filename= or an X-Filename header (both percent-decoded). */
static void receive_raw(cq_web_req *r, size_t max) {
    if (!cq_web_query(r, "filename", r->upload.filename, sizeof r->upload.filename)) {
        const char *h = mg_get_header(r->conn, "X-Filename");
        if (h) {
            int n = mg_url_decode(h, (int)strlen(h), r->upload.filename, (int)sizeof r->upload.filename, 0);
            if (n < 0 || (size_t)n != strlen(r->upload.filename))
                return cq_web_send_error(r, 400, "invalid", "X-Filename holds a NUL byte or is too long");
        }
    }
    if (!r->upload.filename[0])
        return cq_web_send_error(r, 400, "invalid",
                                 "name the file: ?filename=NAME, an X-Filename header, or a multipart form");
    FILE *f;
    if (!spool_open(r, &f)) return cq_web_send_error(r, 500, "io", "the upload could not be stored");
    size_t bytes;
    int rc = cq_web_read_body_to(r, f, max, &bytes);
    if (!spool_close(r, f, rc == 0) && rc == 500)
        cq_web_send_error(r, 500, "io", "the upload could not be stored");
}

/* Runs on the connection thread, after admit. Leaves r->upload.path set, or a response sent. */
static void receive_upload(cq_web_req *r) {
    size_t max = r->server->cfg.max_upload_bytes;
    char q[16];
    if (cq_web_query(r, "replace", q, sizeof q)) r->upload.replace = truthy(q);
    cq_web_query(r, "ocr", r->upload.ocr, sizeof r->upload.ocr);
    const char *ctype = mg_get_header(r->conn, "Content-Type");
    if (ctype && !strncasecmp(ctype, "multipart/form-data", 19)) receive_form(r, max);
    else receive_raw(r, max);
}

static void upload(cq_web_req *r) {
    const char *kb = r->kb;
    cq_err err = {0};
    cJSON *out = NULL;
    bool accepted = false;
    cq_status rc = r->svc->upload(r->svc->ctx, kb, r->upload.filename, r->upload.path, r->upload.replace,
                                  r->upload.ocr[0] ? r->upload.ocr : NULL, &out, &accepted, &err);
    r->upload.path[0] = 0; /* the service took it over */
    if (rc) {
        cJSON_Delete(out);
        cq_web_send_status_error(r, &err);
        return;
    }
    const cJSON *job = cJSON_GetObjectItem(out, "job");
    const cJSON *job_id = job ? cJSON_GetObjectItem(job, "id") : NULL;
    if (accepted)
        audit(r, r->upload.replace ? "upload_replace" : "upload", kb, "%.200s (job %lld)", r->upload.filename,
              cJSON_IsNumber(job_id) ? (long long)job_id->valuedouble : 0LL);
    cq_web_send_json(r, accepted ? 202 : 200, out);
}

static void doc_list(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_list(r->svc->ctx, r->kb, &out, &err);
    reply(r, rc, &err, 200, rc ? out : wrap("documents", out));
}

/* ---- jobs, documents, pages, clauses -------------------------------------------------------------------------- */

/* The job or clause the route's scope looked up (r->found). */
static void found(cq_web_req *r) {
    cq_web_send_json(r, 200, r->found);
    r->found = NULL;
}

static void job_cancel(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->job_cancel(r->svc->ctx, r->id[0], &out, &err);
    if (!rc) audit(r, "job_cancel", r->scope_kb, "job %lld", (long long)r->id[0]);
    reply(r, rc, &err, 200, out);
}

static void doc_get(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_get(r->svc->ctx, r->id[0], &out, &err);
    reply(r, rc, &err, 200, out);
}

static void doc_delete(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_delete(r->svc->ctx, r->id[0], &err);
    if (!rc) {
        audit(r, "document_delete", r->scope_kb, "document %lld", (long long)r->id[0]);
        out = wrap("deleted", cJSON_CreateNumber((double)r->id[0]));
    }
    reply(r, rc, &err, 200, out);
}

static void doc_original(cq_web_req *r) {
    cq_web_file f = {0};
    cq_err err = {0};
    if (r->svc->doc_original(r->svc->ctx, r->id[0], &f, &err)) return cq_web_send_status_error(r, &err);
    cq_web_send_file(r, &f, "private, max-age=3600");
}

static void page_image(cq_web_req *r) {
    /* "{n}.png" */
    const char *seg = r->seg[5];
    char *end;
    errno = 0;
    long page = strtol(seg, &end, 10);
    if (errno || end == seg || strcmp(end, ".png") || page <= 0 || page > 100000)
        return cq_web_send_error(r, 404, "not_found", "pages are /pages/{n}.png with n from 1");
    long width = cq_web_query_long(r, "width", PAGE_WIDTH_DEFAULT, PAGE_WIDTH_MIN, PAGE_WIDTH_MAX);
    if (width < 0) return;
    long long clause = 0;
    char buf[32];
    if (cq_web_query(r, "clause", buf, sizeof buf) && buf[0]) {
        clause = strtoll(buf, &end, 10);
        if (*end || clause <= 0) return cq_web_send_error(r, 400, "invalid", "clause must be a clause id");
    }
    cq_web_file f = {0};
    cq_err err = {0};
    if (r->svc->page_image(r->svc->ctx, r->id[0], (int)page, (int64_t)clause, (int)width, &f, &err))
        return cq_web_send_status_error(r, &err);
    cq_web_send_file(r, &f, "private, max-age=86400");
}

/* Search inside a document: its clauses whose text holds q (the citation viewer's search box). */
static void doc_search(cq_web_req *r) {
    /* a q longer than the buffer reads as none: the same refusal */
    char q[CQ_WEB_DOC_SEARCH_Q_MAX + 2];
    if (!cq_web_query(r, "q", q, sizeof q) || !q[0] || strlen(q) > CQ_WEB_DOC_SEARCH_Q_MAX)
        return cq_web_send_error(r, 400, "invalid", "give q, the text to look for: 1 to %d bytes",
                                 CQ_WEB_DOC_SEARCH_Q_MAX);
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_search(r->svc->ctx, r->id[0], q, &out, &err);
    reply(r, rc, &err, 200, out);
}

/* ---- versions and comparisons --------------------------------------------------------------------------------- */

enum { VERSION_READ, VERSION_EDIT, VERSION_RESET }; /* the version routes' arg */

/* A document's version: read (GET), corrected by the body (PUT), or back to the automatic analysis (DELETE). */
static void doc_version(cq_web_req *r) {
    bool put = r->def->arg == VERSION_EDIT, reset = r->def->arg == VERSION_RESET;
    cJSON *body = put ? cq_web_read_json(r) : NULL;
    if (put && !body) return;
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_version(r->svc->ctx, r->id[0], body, reset, &out, &err);
    if (!rc && (put || reset))
        audit(r, put ? "version_edit" : "version_reset", r->scope_kb, "document %lld", (long long)r->id[0]);
    cJSON_Delete(body);
    reply(r, rc, &err, 200, out);
}

static void doc_compare(cq_web_req *r) {
    char clause[64] = "", clause_id[32] = "", changed[8] = "";
    cq_web_compare q = {0};
    if (cq_web_query(r, "clause", clause, sizeof clause) && clause[0]) q.clause = clause;
    if (cq_web_query(r, "clause_id", clause_id, sizeof clause_id) && clause_id[0]) {
        char *end;
        q.clause_id = strtoll(clause_id, &end, 10);
        if (*end || q.clause_id <= 0) return cq_web_send_error(r, 400, "invalid", "clause_id must be a clause id");
    }
    if (cq_web_query(r, "changed", changed, sizeof changed)) q.changes_only = strcmp(changed, "0") && strcmp(changed, "false");
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->doc_compare(r->svc->ctx, r->id[0], r->id[1], &q, &out, &err);
    reply(r, rc, &err, 200, out);
}

/* ---- questions ------------------------------------------------------------------------------------------------ */

bool cq_web_question_fits(cq_web_req *r, const char *question) {
    size_t chars = cq_utf8_count(question, strlen(question));
    if (chars <= CQ_WEB_QUESTION_MAX_CHARS) return true;
    cq_web_send_error(r, 413, "question_too_long", "the question is %zu characters long; at most %d are answered",
                      chars, CQ_WEB_QUESTION_MAX_CHARS);
    return false;
}

/* Fills q from a request body {"question", "k", "mode", "fusion", "as_of", "history"}; sends 400 and returns false
 * when invalid. */
static bool parse_question(cq_web_req *r, const cJSON *body, cq_web_question *q) {
    memset(q, 0, sizeof *q);
    const cJSON *question = cJSON_GetObjectItem(body, "question");
    if (!cJSON_IsString(question) || !question->valuestring[0]) {
        cq_web_send_error(r, 400, "invalid", "\"question\" must be a non-empty string");
        return false;
    }
    if (!cq_web_question_fits(r, question->valuestring)) return false;
    q->question = question->valuestring;
    const cJSON *k = cJSON_GetObjectItem(body, "k");
    if (k) {
        if (!cJSON_IsNumber(k) || k->valuedouble < 1 || k->valuedouble > 50) {
            cq_web_send_error(r, 400, "invalid", "\"k\" must be a number from 1 to 50");
            return false;
        }
        q->k = (int)k->valuedouble;
    }
    const cJSON *mode = cJSON_GetObjectItem(body, "mode");
    if (mode) {
        if (!cJSON_IsString(mode)) {
            cq_web_send_error(r, 400, "invalid", "\"mode\" must be a string such as \"hybrid\"");
            return false;
        }
        q->mode = mode->valuestring;
    }
    const cJSON *fusion = cJSON_GetObjectItem(body, "fusion");
    if (fusion && !cJSON_IsNull(fusion)) {
        if (!cJSON_IsString(fusion)) {
            cq_web_send_error(r, 400, "invalid", "\"fusion\" must be \"rrf\", \"keep\" or \"weights\"");
            return false;
        }
        q->fusion = fusion->valuestring;
    }
    const cJSON *as_of = cJSON_GetObjectItem(body, "as_of");
    if (as_of && !cJSON_IsNull(as_of)) {
        if (!cJSON_IsString(as_of)) {
            cq_web_send_error(r, 400, "invalid", "\"as_of\" must be a day written \"YYYY-MM-DD\"");
            return false;
        }
        q->as_of = as_of->valuestring;
    }
    const cJSON *history = cJSON_GetObjectItem(body, "history");
    if (history && !cJSON_IsNull(history)) {
        if (!cJSON_IsArray(history)) {
            cq_web_send_error(r, 400, "invalid", "\"history\" must be an array of {role, content} turns");
            return false;
        }
        q->history = history;
    }
    return true;
}

static void retrieve(cq_web_req *r) {
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    cq_web_question q;
    if (parse_question(r, body, &q)) {
        cq_err err = {0};
        cJSON *out = NULL;
        cq_status rc = r->svc->retrieve(r->svc->ctx, r->kb, &q, &out, &err);
        reply(r, rc, &err, 200, out);
    }
    cJSON_Delete(body);
}

/* Fills the conversation fields of q from an ask's body {"conversation_id", "store", "regenerate"}: a turn is kept
 * when store says so (default keep_default; true when a conversation is named). Sends 400 and returns false when
 * they are invalid. */
bool cq_web_parse_conversation(cq_web_req *r, const cJSON *body, bool keep_default, cq_web_question *q) {
    const cJSON *id = cJSON_GetObjectItem(body, "conversation_id"), *store = cJSON_GetObjectItem(body, "store");
    const cJSON *regenerate = cJSON_GetObjectItem(body, "regenerate");
    if (id && !cJSON_IsNull(id)) {
        if (!cJSON_IsNumber(id) || id->valuedouble < 1 || id->valuedouble != (double)(int64_t)id->valuedouble) {
            cq_web_send_error(r, 400, "invalid", "\"conversation_id\" must be a conversation's id");
            return false;
        }
        q->conversation_id = (int64_t)id->valuedouble;
    }
    if ((store && !cJSON_IsBool(store)) || (regenerate && !cJSON_IsBool(regenerate))) {
        cq_web_send_error(r, 400, "invalid", "\"%s\" must be true or false", store && !cJSON_IsBool(store) ? "store"
                                                                                                 : "regenerate");
        return false;
    }
    q->keep = store ? cJSON_IsTrue(store) : keep_default || q->conversation_id;
    q->regenerate = cJSON_IsTrue(regenerate);
    if (q->regenerate && (!q->conversation_id || !q->keep)) {
        cq_web_send_error(r, 400, "invalid", "\"regenerate\" replaces the last turn of a stored conversation: name "
                                             "it with \"conversation_id\"");
        return false;
    }
    return true;
}

static int ask_event(void *user, const char *event, const cJSON *data) {
    cq_web_req *r = user;
    cq_web_sse_start(r);
    return cq_web_sse_send(r, event, cJSON_Duplicate(data, 1));
}

static int ask_token(void *user, const char *text, size_t len) {
    cq_web_req *r = user;
    cq_web_sse_start(r);
    cJSON *o = cJSON_CreateObject();
    cJSON *s = cJSON_CreateString("");
    free(s->valuestring);
    s->valuestring = strndup(text, len);
    cJSON_AddItemToObject(o, "text", s);
    return cq_web_sse_send(r, "token", o);
}

static void ask(cq_web_req *r) {
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    cq_web_question q;
    if (!parse_question(r, body, &q) || !cq_web_parse_conversation(r, body, true, &q)) {
        cJSON_Delete(body);
        return;
    }
    bool stream = cq_web_accepts_sse(r);
    const cJSON *st = cJSON_GetObjectItem(body, "stream");
    if (cJSON_IsBool(st)) stream = cJSON_IsTrue(st);
    cq_err err = {0};
    cJSON *out = NULL;
    cq_web_stream events = {ask_token, ask_event, r};
    cq_status rc = r->svc->ask(r->svc->ctx, &r->who, r->kb, &q, stream ? &events : NULL, &out, &err);
    cJSON_Delete(body);
    if (!stream || (rc && !r->sse)) return reply(r, rc, &err, 200, out);
    if (rc) { /* failed after the stream began */
        cq_web_send_status_error(r, &err);
        cq_web_sse_end(r);
        cJSON_Delete(out);
        return;
    }
    cq_web_sse_start(r); /* an empty answer sent no tokens */
    cJSON *cites = cJSON_DetachItemFromObject(out, "citations");
    cq_web_sse_send(r, "citations", wrap("citations", cites ? cites : cJSON_CreateArray()));
    cq_web_sse_send(r, "done", out);
    cq_web_sse_end(r);
}

/* ---- conversations -------------------------------------------------------------------------------------------- */

static void conversation_list(cq_web_req *r) {
    char kb[128] = "", all[16] = "";
    bool by_kb = cq_web_query(r, "kb", kb, sizeof kb) && kb[0];
    bool every_owner = cq_web_query(r, "all", all, sizeof all) && truthy(all);
    if (every_owner && !cq_web_authorize(r, CQ_WEB_ADMIN, NULL)) return;
    if (by_kb && !cq_web_authorize(r, CQ_WEB_READ, kb)) return;
    if (cq_web_office_search(r, by_kb ? kb : NULL, every_owner)) return; /* ?q= */
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->conversation_list(r->svc->ctx, &r->who, by_kb ? kb : NULL, every_owner, &out, &err);
    reply(r, rc, &err, 200, out);
}

static void conversation_get(cq_web_req *r) {
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->conversation_get(r->svc->ctx, &r->who, r->id[0], &out, &err);
    reply(r, rc, &err, 200, out);
}

static void conversation_rename(cq_web_req *r) {
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    const cJSON *title = cJSON_GetObjectItem(body, "title");
    if (!cJSON_IsString(title)) {
        cJSON_Delete(body);
        return cq_web_send_error(r, 400, "invalid", "give the conversation a \"title\"");
    }
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->conversation_rename(r->svc->ctx, &r->who, r->id[0], title->valuestring, &out, &err);
    cJSON_Delete(body);
    reply(r, rc, &err, 200, out);
}

static void conversation_delete(cq_web_req *r) {
    cq_err err = {0};
    cq_status rc = r->svc->conversation_delete(r->svc->ctx, &r->who, r->id[0], &err);
    reply(r, rc, &err, 200, rc ? NULL : wrap("deleted", cJSON_CreateNumber((double)r->id[0])));
}

/* ---- sign-in ------------------------------------------------------------------------------------------------- */

static const char *role_name(cq_web_role role) {
    return role == CQ_WEB_ADMIN ? "admin" : role == CQ_WEB_EDIT ? "editor" : role == CQ_WEB_READ ? "reader" : "none";
}

/* Who is asking, as GET /api/v1/me and a sign-in answer: {"name", "role", "kbs", "via", "user_id"?, "key_id"?}. */
static cJSON *principal_json(const cq_web_principal *who) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", who->name);
    cJSON_AddStringToObject(o, "role", role_name(who->role));
    if (who->role == CQ_WEB_ADMIN || !strcmp(who->kb, "*")) {
        cJSON_AddStringToObject(o, "kbs", "*");
    } else {
        cJSON *kbs = cJSON_AddArrayToObject(o, "kbs");
        char buf[sizeof who->kb];
        snprintf(buf, sizeof buf, "%s", who->kb);
        char *save = NULL;
        for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
            cJSON_AddItemToArray(kbs, cJSON_CreateString(p));
    }
    cJSON_AddStringToObject(o, "via", who->via ? who->via : "key");
    if (who->user_id) cJSON_AddNumberToObject(o, "user_id", (double)who->user_id);
    if (who->key_id) cJSON_AddNumberToObject(o, "key_id", (double)who->key_id);
    return o;
}

static void login(cq_web_req *r) {
    if (!r->svc->login) return cq_web_send_error(r, 404, "not_found", "this server has no accounts");
    const char *why = NULL;
    if (!cq_web_same_site(r, false, &why)) return cq_web_send_error(r, 403, "cross_site", "%s", why);
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    const cJSON *user = cJSON_GetObjectItem(body, "user"), *password = cJSON_GetObjectItem(body, "password");
    if (!cJSON_IsString(user) || !cJSON_IsString(password) || !user->valuestring[0]) {
        cJSON_Delete(body);
        return cq_web_send_error(r, 400, "invalid", "give \"user\" and \"password\" as strings");
    }
    char client[64], token[CQ_WEB_SESSION_TOKEN_BYTES] = "";
    cq_web_client_address(r, client, sizeof client);
    cq_err err = {0};
    cq_status rc = r->svc->login(r->svc->ctx, user->valuestring, password->valuestring, client, token, &r->who, &err);
    cJSON_Delete(body);
    if (rc == CQ_ERR_BUSY && !err.reason) { /* held back; with a reason (the store, the directory): 503 below */
        r->retry_after_s = err.retry_after_s > 0 ? err.retry_after_s : 1;
        return cq_web_send_error(r, 429, "too_many_sign_ins", "%s", err.msg);
    }
    if (rc == CQ_ERR_NOT_FOUND) return cq_web_send_error(r, 401, "unauthorized", "%s", err.msg);
    if (rc) return cq_web_send_status_error(r, &err);
    set_session_cookie(r, token);
    memset(token, 0, sizeof token);
    cq_web_send_json(r, 200, principal_json(&r->who));
}

static void logout(cq_web_req *r) {
    const char *why = NULL;
    if (!cq_web_same_site(r, false, &why)) return cq_web_send_error(r, 403, "cross_site", "%s", why);
    char session[CQ_WEB_SESSION_TOKEN_BYTES];
    bool ended = false;
    if (r->svc->logout && session_cookie(r, session)) {
        cq_err err = {0};
        cq_status rc = r->svc->logout(r->svc->ctx, session, &err);
        if (rc && rc != CQ_ERR_NOT_FOUND) return cq_web_send_status_error(r, &err);
        ended = rc == CQ_OK;
    }
    set_session_cookie(r, "");
    cJSON *out = cJSON_CreateObject();
    cJSON_AddBoolToObject(out, "signed_out", ended);
    cq_web_send_json(r, 200, out);
}

static void audit_list(cq_web_req *r) {
    if (!r->svc->audit_list) return cq_web_send_error(r, 404, "not_found", "this server keeps no audit trail");
    long limit = cq_web_query_long(r, "limit", 100, 1, 1000);
    if (limit < 0) return;
    long long before = 0;
    char buf[32], action[32] = "";
    if (cq_web_query(r, "before", buf, sizeof buf) && buf[0]) {
        char *end;
        before = strtoll(buf, &end, 10);
        if (*end || before <= 0) return cq_web_send_error(r, 400, "invalid", "before must be an entry's id");
    }
    bool by_action = cq_web_query(r, "action", action, sizeof action) && action[0];
    cq_err err = {0};
    cJSON *out = NULL;
    cq_status rc = r->svc->audit_list(r->svc->ctx, (int64_t)before, (int)limit, by_action ? action : NULL, &out, &err);
    reply(r, rc, &err, 200, out);
}

static void me(cq_web_req *r) {
    cq_web_send_json(r, 200, principal_json(&r->who));
}

/* ---- the route table --------------------------------------------------------------------------------------- */

#define GET CQ_M_GET
#define HEAD CQ_M_HEAD
#define POST CQ_M_POST
#define PUT CQ_M_PUT
#define PATCH CQ_M_PATCH
#define DELETE CQ_M_DELETE
#define JSON CQ_BODY_JSON
#define UPLOAD CQ_BODY_UPLOAD
#define OPS CQ_ROUTE_RESERVED
#define ADMIN_API(m, path, op, body) {m, path, body, CQ_WEB_ADMIN, CQ_IN_NONE, cq_web_admin_dispatch, op, 0}

/* Every route, once (web/http.h). docs/API.md describes each. */
static const cq_web_route_def routes[] = {
    {GET, "/api/v1/health", 0, CQ_WEB_NONE, CQ_IN_PUBLIC, health, 0, OPS | CQ_ROUTE_PRIORITY | CQ_ROUTE_ANY_CLIENT},
    {GET, "/metrics", 0, CQ_WEB_NONE, CQ_IN_PUBLIC, metrics, 0, OPS | CQ_ROUTE_PRIORITY},
    {POST, "/api/v1/login", JSON, CQ_WEB_NONE, CQ_IN_PUBLIC, login, 0, 0},
    {POST, "/api/v1/logout", 0, CQ_WEB_NONE, CQ_IN_PUBLIC, logout, 0, 0},
    {GET, "/api/v1/me", 0, CQ_WEB_NONE, CQ_IN_NONE, me, 0, 0},
    {GET, "/api/v1/audit", 0, CQ_WEB_ADMIN, CQ_IN_NONE, audit_list, 0, 0},
    {GET, "/api/v1/kbs", 0, CQ_WEB_NONE, CQ_IN_NONE, kb_list, 0, 0},
    {POST, "/api/v1/kbs", JSON, CQ_WEB_ADMIN, CQ_IN_NONE, kb_create, 0, 0},
    {GET, "/api/v1/kbs/{kb}", 0, CQ_WEB_READ, CQ_IN_KB, kb_get, 0, 0},
    {DELETE, "/api/v1/kbs/{kb}", 0, CQ_WEB_ADMIN, CQ_IN_NONE, kb_delete, 0, 0},
    {GET, "/api/v1/kbs/{kb}/documents", 0, CQ_WEB_READ, CQ_IN_KB, doc_list, 0, 0},
    {POST | PUT, "/api/v1/kbs/{kb}/documents", UPLOAD, CQ_WEB_EDIT, CQ_IN_KB, upload, 0, 0},
    {GET, "/api/v1/kbs/{kb}/jobs", 0, CQ_WEB_READ, CQ_IN_KB, kb_jobs, 0, OPS},
    {POST, "/api/v1/kbs/{kb}/retrieve", JSON, CQ_WEB_READ, CQ_IN_KB, retrieve, 0, 0},
    {POST, "/api/v1/kbs/{kb}/ask", JSON, CQ_WEB_READ, CQ_IN_KB, ask, 0, 0},
    ADMIN_API(GET, "/api/v1/kbs/{kb}/grants", CQ_ADMIN_GRANTS_LIST, 0),
    ADMIN_API(PUT, "/api/v1/kbs/{kb}/grants/user/{name}", CQ_ADMIN_GRANT_ADD, 0),
    ADMIN_API(DELETE, "/api/v1/kbs/{kb}/grants/user/{name}", CQ_ADMIN_GRANT_REMOVE, 0),
    ADMIN_API(PUT, "/api/v1/kbs/{kb}/grants/group/{name}", CQ_ADMIN_GRANT_ADD, 0),
    ADMIN_API(DELETE, "/api/v1/kbs/{kb}/grants/group/{name}", CQ_ADMIN_GRANT_REMOVE, 0),
    {GET, "/api/v1/jobs/{id}", 0, CQ_WEB_READ, CQ_IN_JOB, found, 0, OPS},
    {POST, "/api/v1/jobs/{id}/cancel", 0, CQ_WEB_EDIT, CQ_IN_JOB, job_cancel, 0, OPS},
    {GET, "/api/v1/documents/{id}", 0, CQ_WEB_READ, CQ_IN_DOC, doc_get, 0, 0},
    {DELETE, "/api/v1/documents/{id}", 0, CQ_WEB_EDIT, CQ_IN_DOC, doc_delete, 0, 0},
    {GET | HEAD, "/api/v1/documents/{id}/original", 0, CQ_WEB_READ, CQ_IN_DOC, doc_original, 0, 0},
    {GET | HEAD, "/api/v1/documents/{id}/pages/{n}.png", 0, CQ_WEB_READ, CQ_IN_DOC, page_image, 0, 0},
    {GET, "/api/v1/documents/{id}/version", 0, CQ_WEB_READ, CQ_IN_DOC, doc_version, VERSION_READ, 0},
    {PUT, "/api/v1/documents/{id}/version", JSON, CQ_WEB_EDIT, CQ_IN_DOC, doc_version, VERSION_EDIT, 0},
    {DELETE, "/api/v1/documents/{id}/version", 0, CQ_WEB_EDIT, CQ_IN_DOC, doc_version, VERSION_RESET, 0},
    {GET, "/api/v1/documents/{id}/search", 0, CQ_WEB_READ, CQ_IN_DOC, doc_search, 0, 0},
    {GET, "/api/v1/documents/{a}/compare/{b}", 0, CQ_WEB_READ, CQ_IN_DOC, doc_compare, 0, 0},
    {GET, "/api/v1/clauses/{id}", 0, CQ_WEB_READ, CQ_IN_CLAUSE, found, 0, 0},
    /* a conversation is its owner's (the service checks): any key or session may ask */
    {GET, "/api/v1/conversations", 0, CQ_WEB_NONE, CQ_IN_NONE, conversation_list, 0, 0},
    {GET, "/api/v1/conversations/{id}", 0, CQ_WEB_NONE, CQ_IN_NONE, conversation_get, 0, 0},
    {PATCH, "/api/v1/conversations/{id}", JSON, CQ_WEB_NONE, CQ_IN_NONE, conversation_rename, 0, 0},
    {DELETE, "/api/v1/conversations/{id}", 0, CQ_WEB_NONE, CQ_IN_NONE, conversation_delete, 0, 0},
    {POST | PUT, "/api/v1/conversations/{id}/turns/{n}/feedback", JSON, CQ_WEB_NONE, CQ_IN_NONE,
     cq_web_office_feedback, 0, 0},
    {DELETE, "/api/v1/conversations/{id}/turns/{n}/feedback", 0, CQ_WEB_NONE, CQ_IN_NONE, cq_web_office_feedback, 0,
     0},
    {GET, "/api/v1/conversations/{id}/export", 0, CQ_WEB_NONE, CQ_IN_NONE, cq_web_office_export, 0, 0},
    {GET, "/api/v1/quality", 0, CQ_WEB_ADMIN, CQ_IN_NONE, cq_web_office_quality, 0, 0},
    {GET, "/api/v1/feedback/export", 0, CQ_WEB_ADMIN, CQ_IN_NONE, cq_web_office_feedback_export, 0, 0},
    ADMIN_API(GET, "/api/v1/users", CQ_ADMIN_USERS_LIST, 0),
    ADMIN_API(POST, "/api/v1/users", CQ_ADMIN_USER_CREATE, JSON),
    ADMIN_API(GET, "/api/v1/users/{name}", CQ_ADMIN_USER_GET, 0),
    ADMIN_API(PATCH, "/api/v1/users/{name}", CQ_ADMIN_USER_CHANGE, JSON),
    ADMIN_API(DELETE, "/api/v1/users/{name}", CQ_ADMIN_USER_DELETE, 0),
    ADMIN_API(PUT | POST, "/api/v1/users/{name}/password", CQ_ADMIN_USER_PASSWORD, JSON),
    ADMIN_API(GET, "/api/v1/groups", CQ_ADMIN_GROUPS_LIST, 0),
    ADMIN_API(POST, "/api/v1/groups", CQ_ADMIN_GROUP_CREATE, JSON),
    ADMIN_API(GET, "/api/v1/groups/{name}", CQ_ADMIN_GROUP_GET, 0),
    ADMIN_API(PATCH, "/api/v1/groups/{name}", CQ_ADMIN_GROUP_CHANGE, JSON),
    ADMIN_API(DELETE, "/api/v1/groups/{name}", CQ_ADMIN_GROUP_DELETE, 0),
    ADMIN_API(PUT, "/api/v1/groups/{name}/members/{user}", CQ_ADMIN_MEMBER_ADD, 0),
    ADMIN_API(DELETE, "/api/v1/groups/{name}/members/{user}", CQ_ADMIN_MEMBER_REMOVE, 0),
    ADMIN_API(GET, "/api/v1/keys", CQ_ADMIN_KEYS_LIST, 0),
    ADMIN_API(POST, "/api/v1/keys", CQ_ADMIN_KEY_CREATE, JSON),
    ADMIN_API(DELETE, "/api/v1/keys/{key}", CQ_ADMIN_KEY_REVOKE, 0), /* the service reads the id */
    /* the model names the KB (the handler checks it) */
    {GET, "/v1/models", 0, CQ_WEB_NONE, CQ_IN_NONE, cq_web_openai_models, 0, 0},
    {POST, "/v1/chat/completions", JSON, CQ_WEB_NONE, CQ_IN_NONE, cq_web_openai_chat, 0, 0},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])
_Static_assert(N_ROUTES + CQ_LABEL_ROUTES <= CQ_WEB_ROUTE_LABELS, "raise CQ_WEB_ROUTE_LABELS (web/metrics.h)");

const cq_web_route_def *cq_web_route_table(size_t *n) {
    *n = N_ROUTES;
    return routes;
}

static const char *const method_names[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};

unsigned cq_web_method_bit(const char *method) {
    for (unsigned i = 0; i < sizeof method_names / sizeof method_names[0]; i++)
        if (!strcmp(method, method_names[i])) return 1u << i;
    return 0;
}

void cq_web_methods_text(unsigned methods, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < sizeof method_names / sizeof method_names[0]; i++)
        if (methods & (1u << i) && len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", method_names[i]);
}

const char *cq_web_route_name(int label) {
    if (label == CQ_LABEL_PAGE) return "/";
    if (label < CQ_LABEL_ROUTES || label >= (int)(N_ROUTES + CQ_LABEL_ROUTES)) return "other";
    return routes[label - CQ_LABEL_ROUTES].pattern;
}

/* Whether the path's segments fit the pattern ("{...}" is any one segment). */
static bool pattern_fits(const char *pattern, char *const *seg, int n_seg) {
    const char *p = pattern;
    for (int i = 0; i < n_seg; i++) {
        if (*p++ != '/') return false;
        size_t len = strcspn(p, "/");
        if (*p != '{' && (strlen(seg[i]) != len || memcmp(seg[i], p, len))) return false;
        p += len;
    }
    return *p == 0;
}

cq_web_match cq_web_route_find(const char *method, char *const *seg, int n_seg) {
    cq_web_match m = {NULL, CQ_LABEL_OTHER, 0};
    size_t i = 0;
    while (i < N_ROUTES && !pattern_fits(routes[i].pattern, seg, n_seg)) i++;
    if (i == N_ROUTES) return m;
    m.label = (int)i + CQ_LABEL_ROUTES;
    unsigned bit = cq_web_method_bit(method);
    for (size_t k = i; k < N_ROUTES && !strcmp(routes[k].pattern, routes[i].pattern); k++) {
        m.allow |= routes[k].methods;
        if (routes[k].methods & bit) m.def = &routes[k];
    }
    return m;
}

static void split_path(cq_web_req *r) {
    snprintf(r->segbuf, sizeof r->segbuf, "%s", r->path);
    r->n_seg = 0;
    char *save = NULL;
    for (char *s = strtok_r(r->segbuf, "/", &save); s && r->n_seg < 16; s = strtok_r(NULL, "/", &save))
        r->seg[r->n_seg++] = s;
}

/* Finds the request's route: r->def, r->label, r->allow (the page's files: CQ_LABEL_PAGE). */
static void route(cq_web_req *r) {
    const char *p = !strcmp(r->path, "/") ? "/index.html" : r->path;
    bool page = !strcmp(r->path, "/favicon.ico");
    for (size_t i = 0; i < cq_web_n_static_files && !page; i++) page = !strcmp(cq_web_static_files[i].path, p);
    if (page) {
        r->label = CQ_LABEL_PAGE;
        return;
    }
    split_path(r);
    cq_web_match m = cq_web_route_find(r->method, r->seg, r->n_seg);
    r->def = m.def;
    r->label = m.label;
    r->allow = m.allow;
}

static bool id_param(const char *p, size_t len) {
    return (len == 4 && !strncmp(p, "{id}", 4)) || (len == 3 && p[0] == '{' && strchr("abn", p[1]) && p[2] == '}');
}

/* The route's params: {kb}, and the ids ({id}, {a}, {b}, {n}: 404 when one is not a positive number). */
static bool path_params(cq_web_req *r) {
    const char *p = r->def->pattern;
    int ids = 0;
    for (int i = 0; i < r->n_seg; i++) {
        p++; /* past the '/' */
        size_t len = strcspn(p, "/");
        if (len == 4 && !strncmp(p, "{kb}", 4)) r->kb = r->seg[i];
        else if (id_param(p, len)) {
            char *end;
            errno = 0;
            long long v = strtoll(r->seg[i], &end, 10);
            if (errno || *end || v <= 0 || !isdigit((unsigned char)r->seg[i][0])) {
                cq_web_send_error(r, 404, "not_found", "no such resource: %s", r->path);
                return false;
            }
            r->id[ids++] = (int64_t)v;
        }
        p += len;
    }
    return true;
}

/* Who is asking (401), and whether they may (403, or 404 for what the scope looks up): before the body is read, so
 * that a client without a key or the role cannot make the server receive 64 MB. False when a response was sent. */
static bool admit(cq_web_req *r) {
    if (r->admitted) return true;
    const cq_web_route_def *d = r->def;
    if (d->scope == CQ_IN_PUBLIC) return r->admitted = true;
    if (!cq_web_authenticate(r) || !path_params(r)) return false;
    cq_err err = {0};
    cq_status rc = CQ_OK;
    switch (d->scope) {
    case CQ_IN_DOC:
        for (int i = 0; i < 2 && r->id[i] && !rc; i++) {
            rc = r->svc->doc_kb(r->svc->ctx, r->id[i], r->scope_kb, &err);
            if (!rc && !cq_web_authorize(r, d->role, r->scope_kb)) return false;
        }
        break;
    case CQ_IN_JOB: rc = r->svc->job_get(r->svc->ctx, r->id[0], &r->found, r->scope_kb, &err); break;
    case CQ_IN_CLAUSE: rc = r->svc->clause_get(r->svc->ctx, r->id[0], &r->found, r->scope_kb, &err); break;
    default: break;
    }
    if (rc) {
        cq_web_send_status_error(r, &err);
        return false;
    }
    const char *kb = d->scope == CQ_IN_KB ? r->kb : d->scope == CQ_IN_NONE ? NULL : r->scope_kb;
    if (d->scope != CQ_IN_DOC && d->role != CQ_WEB_NONE && !cq_web_authorize(r, d->role, kb)) return false;
    return r->admitted = true;
}

static void admit_task(cq_web_req *r) { admit(r); }

/* Runs on a worker. */
static void dispatch(cq_web_req *r) {
    if (admit(r)) r->def->handler(r);
}

/* ---- workers -------------------------------------------------------------------------------------------------- */

/* CivetWeb runs handlers on threads with 100 KB stacks (fixed when Debian built it): too little for SQLite, the
 * pipelines and the sanitizers. So its threads hold the connections, check what needs no store and receive the
 * bodies; everything else runs on one of our workers (ordinary 8 MB stacks), a bounded pool, while the connection's
 * thread waits for it. Health and metrics have a worker of their own, so that they are answered while every worker
 * of the pool is busy. */
typedef struct task {
    void (*fn)(cq_web_req *r);
    cq_web_req *r;
    bool done;
    pthread_cond_t cond;
    struct task *next;
} task;

static void *pool_worker(void *arg) {
    cq_web_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->stopping && !p->tasks) pthread_cond_wait(&p->cond, &p->lock);
        task *t = p->tasks;
        if (!t) { /* stopping, and nothing left to do */
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        p->tasks = t->next;
        if (!p->tasks) p->tasks_tail = NULL;
        pthread_mutex_unlock(&p->lock);
        t->fn(t->r);
        pthread_mutex_lock(&p->lock);
        t->done = true;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&p->lock);
    }
}

static void run_on_pool(cq_web_pool *p, void (*fn)(cq_web_req *r), cq_web_req *r) {
    task t = {.fn = fn, .r = r};
    pthread_cond_init(&t.cond, NULL);
    pthread_mutex_lock(&p->lock);
    if (p->tasks_tail) p->tasks_tail->next = &t;
    else p->tasks = &t;
    p->tasks_tail = &t;
    pthread_cond_signal(&p->cond);
    while (!t.done) pthread_cond_wait(&t.cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_destroy(&t.cond);
}

static cq_status pool_start(cq_web_pool *p, int threads, cq_err *err) {
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, pool_worker, p) != 0)
            return cq_err_set(err, CQ_ERR_INTERNAL, "cannot start worker thread %d", i);
        p->n_threads++;
    }
    return CQ_OK;
}

static void pool_stop(cq_web_pool *p) {
    if (!p->threads) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
}

/* ---- a request, from CivetWeb's connection thread -------------------------------------------------------------- */

static bool has_body(const cq_web_req *r) {
    return r->ri->content_length > 0 || (r->ri->content_length < 0 && mg_get_header(r->conn, "Transfer-Encoding"));
}

/* Everything but the handlers' own work, on the connection thread: the checks, the page, the body. */
static void serve(cq_web_req *r) {
    cq_web_server *s = r->server;
    r->body_pending = has_body(r);
    if (atomic_load(&s->draining)) {
        /* stopping: requests already running finish, new ones are turned away */
        r->body_pending = true;
        return cq_web_send_error(r, 503, "shutting_down", "the server is stopping");
    }
    if (!cq_web_guard_request(r)) return;
    route(r);
    const cq_web_route_def *d = r->def;
    unsigned flags = d ? d->flags : 0;
    cq_web_conn *c = mg_get_user_connection_data(r->conn);
    if (c && c->reserved) {
        /* A reserved slot (http.h): the operations routes only, and the slot is free again after the answer. */
        mg_disable_connection_keep_alive(r->conn);
        if (!(flags & CQ_ROUTE_RESERVED)) {
            r->body_pending = true;
            r->retry_after_s = 1;
            return cq_web_send_error(r, 503, "busy",
                                     "every connection slot is taken (%d): try again shortly", s->cfg.connections);
        }
    }
    /* The liveness probe is answered whatever a client address holds. */
    if (!(flags & CQ_ROUTE_ANY_CLIENT) && !cq_web_clients_admit(s, r->conn)) {
        r->body_pending = true;
        return cq_web_send_error(r, 429, "too_many_connections",
                                 "this client address holds %d connections already: close some first",
                                 s->cfg.max_client_connections);
    }
    if (r->label == CQ_LABEL_PAGE) return serve_static(r);
    if (!r->allow) return cq_web_send_error(r, 404, "not_found", "no such resource: %s", r->path);
    if (!d) return method_not_allowed(r);
    if (flags & CQ_ROUTE_PRIORITY) return run_on_pool(&s->priority, dispatch, r);

    cq_web_body kind = d->body;
    if (kind != CQ_BODY_NONE) {
        /* a body announced larger than the limit is refused at once, before a byte of it is read (an upload's
         * multipart framing may add a little to the file) */
        size_t max = kind == CQ_BODY_JSON ? s->cfg.max_json_bytes : s->cfg.max_upload_bytes + 65536;
        if (r->ri->content_length > (long long)max)
            return cq_web_refuse_too_large(r, kind == CQ_BODY_JSON ? max : s->cfg.max_upload_bytes);
        run_on_pool(&s->pool, admit_task, r);
        if (r->status) return;
        if (kind == CQ_BODY_JSON) cq_web_read_body(r, max);
        else receive_upload(r);
        if (r->status) return;
    }
    run_on_pool(&s->pool, dispatch, r);
}

static int handle_request(struct mg_connection *conn, void *cbdata) {
    cq_web_server *s = cbdata;
    double t0 = cq_clock_seconds();
    cq_web_req *r = calloc(1, sizeof *r);
    if (!r) {
        cq_web_send_conn_error(conn, 503, "no_memory", "out of memory");
        return 503;
    }
    r->conn = conn;
    r->server = s;
    r->svc = &s->svc;
    r->ri = mg_get_request_info(conn);
    r->method = r->ri->request_method ? r->ri->request_method : "";
    cq_web_metrics_begin(&s->metrics);
    serve(r);
    if (!r->status) cq_web_send_error(r, 500, "internal", "no response was produced");
    if (r->upload.path[0]) unlink(r->upload.path); /* received, but never handed to the service */
    free(r->body);
    cJSON_Delete(r->found);
    double dt = cq_clock_seconds() - t0;
    cq_web_metrics_end(&s->metrics, r->label, r->status, dt);
    cq_web_access_log_write(s->access_log, r, dt);
    CQ_DEBUG("%s %s -> %d (%.1f ms)", r->method, r->path, r->status, dt * 1e3);
    /* Not after a slow body (408) nor for a client over its connections (429): those are the clients to let go. */
    if (r->body_pending && has_body(r) && r->status != 408 && r->status != 429) cq_web_drain_body(r);
    int status = r->status;
    free(r);
    return status;
}

/* Errors CivetWeb answers itself, before any handler (a malformed request line, headers over 64 KiB, a bad
 * Content-Length, an HTTP version other than 1.0 and 1.1): the same JSON as every other error. */
static int http_error(struct mg_connection *conn, int status, const char *msg) {
    static const struct {
        int status;
        const char *code, *message;
    } known[] = {
        {400, "bad_request", "the request is malformed or incomplete"},
        {404, "not_found", "no such resource"},
        {405, "method_not_allowed", "the method is not allowed"},
        {408, "request_timeout", "the request did not arrive in time"},
        {411, "length_required", "the request body needs a valid Content-Length"},
        {413, "payload_too_large", "the request headers are larger than 64 KiB"},
        {414, "uri_too_long", "the URL is too long"},
        {417, "expectation_failed", "the expectation cannot be met"},
        {500, "internal", "the server failed"},
        {503, "unavailable", "the server cannot answer now"},
        {505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served"},
    };
    const char *code = "error", *message = msg && *msg ? msg : "error";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].status == status) {
            code = known[i].code;
            message = known[i].message;
        }
    CQ_DEBUG("http: %d %s (%s)", status, code, msg ? msg : "");
    cq_web_send_conn_error(conn, status, code, message);
    cq_web_conn *c = mg_get_user_connection_data(conn);
    if (c) c->answered = true;
    return 0;
}

/* A new connection (before its first request): reserved when every ordinary slot is taken (http.h). */
static int connection_open(const struct mg_connection *conn, void **data) {
    cq_web_server *s = mg_get_user_context_data(conn);
    int open = atomic_fetch_add(&s->open_connections, 1) + 1;
    cq_web_conn *c = calloc(1, sizeof *c);
    if (c) c->reserved = open > s->cfg.connections;
    *data = c;
    return 0;
}

/* A connection closing. CivetWeb passes a request whose target is not a path of this server ("GET *", an absolute
 * "GET http://host/...") to no handler and closes the connection without a word; such a request is answered 400
 * here, the socket still open (the handlers answer the absolute targets CivetWeb does pass on: web/guard.c). */
static void connection_close(const struct mg_connection *conn) {
    cq_web_server *s = mg_get_user_context_data(conn);
    cq_web_conn *c = mg_get_user_connection_data(conn);
    const struct mg_request_info *ri = mg_get_request_info(conn);
    if (ri && ri->request_method && ri->request_uri && ri->request_uri[0] != '/' && !ri->local_uri &&
        !(c && c->answered)) {
        CQ_DEBUG("http: %s %.60s -> 400 (not a path)", ri->request_method, ri->request_uri);
        cq_web_send_conn_error((struct mg_connection *)conn, 400, "bad_request",
                               "the request target must be a path starting with '/'");
    }
    if (c) {
        cq_web_clients_closed(s, c);
        free(c);
    }
    atomic_fetch_sub(&s->open_connections, 1);
}

static int log_message(const struct mg_connection *conn, const char *message) {
    (void)conn;
    CQ_WARN("http: %s", message);
    return 1;
}

/* ---- start and stop ------------------------------------------------------------------------------------------- */

cq_status cq_web_start(const cq_web_config *config, const cq_web_service *service, cq_web_server **out,
                       cq_err *err) {
    *out = NULL;
    cq_web_server *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_web_metrics_init(&s->metrics);
    cq_web_clients_init(&s->clients);
    s->svc = *service;
    s->cfg = *config;
    if (!s->cfg.threads) s->cfg.threads = DEFAULT_THREADS;
    if (!s->cfg.connections) s->cfg.connections = DEFAULT_CONNECTIONS;
    if (!s->cfg.max_json_bytes) s->cfg.max_json_bytes = DEFAULT_MAX_JSON_BYTES;
    if (!s->cfg.max_upload_bytes) s->cfg.max_upload_bytes = DEFAULT_MAX_UPLOAD_BYTES;
    if (!s->cfg.request_timeout_ms) s->cfg.request_timeout_ms = DEFAULT_TIMEOUT_MS;
    if (!s->cfg.max_client_connections) s->cfg.max_client_connections = DEFAULT_MAX_CLIENT_CONNECTIONS;
    s->host = strdup(config->host && *config->host ? config->host : "127.0.0.1");
    s->spool_dir = strdup(config->spool_dir ? config->spool_dir : "/tmp");
    if (!s->host || !s->spool_dir) {
        cq_web_stop(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    s->cfg.host = s->host;
    s->cfg.spool_dir = s->spool_dir;
    s->cfg.access_log = NULL; /* the path is the log's own (below) */
    cq_status rc = cq_web_listen_check(s->host, config->port, err);
    if (!rc && config->access_log) rc = cq_web_access_log_open(config->access_log, config->access_log_json,
                                                               &s->access_log, err);
    if (!rc) rc = cq_web_guard_init(s, config, err);
    if (!rc) rc = cq_web_watchdog_start(&s->watchdog, err);
    if (!rc) rc = pool_start(&s->pool, s->cfg.threads, err);
    if (!rc) rc = pool_start(&s->priority, 1, err);
    if (rc) {
        cq_web_stop(s);
        return rc;
    }

    char ports[300], threads[16], timeout[16], queue[16];
    snprintf(ports, sizeof ports, "%s:%d", s->host, config->port);
    snprintf(threads, sizeof threads, "%d", s->cfg.connections + CQ_WEB_RESERVED_SLOTS);
    snprintf(timeout, sizeof timeout, "%d", s->cfg.request_timeout_ms);
    snprintf(queue, sizeof queue, "%d", s->cfg.connections);
    const char *options[] = {"listening_ports", ports,
                             "num_threads", threads,
                             "connection_queue", queue,
                             "request_timeout_ms", timeout, /* headers, each body read, each write */
                             "keep_alive_timeout_ms", "5000",
                             "enable_keep_alive", "yes",
                             "tcp_nodelay", "1",
                             "max_request_size", "65536",
                             "decode_url", "no", /* guard.c decodes, and refuses %00 */
                             /* CivetWeb answers preflights itself with every origin and method allowed unless
                              * these are empty; guard.c answers them instead */
                             "access_control_allow_origin", "",
                             "access_control_allow_methods", "",
                             "access_control_allow_headers", "",
                             NULL};
    struct mg_callbacks cb = {0};
    cb.log_message = log_message;
    cb.http_error = http_error;
    cb.connection_close = connection_close;
    cb.init_connection = connection_open;
    mg_init_library(0);
    char errtext[256] = "";
    unsigned errcode = 0;
    struct mg_error_data ed = {&errcode, errtext, sizeof errtext};
    struct mg_init_data init = {&cb, s, options};
    s->mg = mg_start2(&init, &ed);
    if (!s->mg) {
        cq_err_set(err, CQ_ERR_IO, "cannot listen on %s:%d: %s", s->host, config->port,
                   errtext[0] ? errtext : "unknown error");
        mg_exit_library();
        cq_web_stop(s);
        return CQ_ERR_IO;
    }
    struct mg_server_port sp[4];
    int np = mg_get_server_ports(s->mg, 4, sp);
    s->port = np > 0 ? sp[0].port : config->port;
    mg_set_request_handler(s->mg, "/", handle_request, s);
    *out = s;
    return CQ_OK;
}

int cq_web_port(const cq_web_server *server) { return server->port; }

cq_status cq_web_reopen_logs(cq_web_server *server, cq_err *err) {
    return cq_web_access_log_reopen(server->access_log, err);
}

/* Waits until no request is being handled (at most the request timeout): CivetWeb's stop would cut off requests
 * still reading their bodies. */
static void drain(cq_web_server *s) {
    atomic_store(&s->draining, true);
    double deadline = cq_clock_seconds() + s->cfg.request_timeout_ms / 1e3;
    for (;;) {
        pthread_mutex_lock(&s->metrics.lock);
        uint64_t busy = s->metrics.in_flight;
        pthread_mutex_unlock(&s->metrics.lock);
        if (busy == 0 || cq_clock_seconds() > deadline) break;
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

void cq_web_stop(cq_web_server *s) {
    if (!s) return;
    if (s->mg) {
        drain(s);
        mg_stop(s->mg); /* joins the connection threads: requests in flight finish first */
        mg_exit_library();
    }
    pool_stop(&s->pool);
    pool_stop(&s->priority);
    cq_web_watchdog_stop(&s->watchdog);
    cq_web_clients_destroy(&s->clients);
    cq_web_metrics_destroy(&s->metrics);
    cq_web_guard_free(s);
    cq_web_access_log_close(s->access_log);
    free(s->host);
    free(s->spool_dir);
    free(s);
}
