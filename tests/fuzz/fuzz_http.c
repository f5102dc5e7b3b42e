/* libFuzzer target: the HTTP request path, from the bytes on the socket to the answer. Each input is sent as it is
 * to a server (web/, the real CivetWeb set-up) in this process, the write side is closed, and the answer read to
 * the end. The service behind it is a stub that answers from what it is given (names, questions, uploads), so the
 * parsing, the checks before the handlers (Host, Origin, NUL bytes, limits), the body reading, the routing and every
 * JSON writer are what is exercised. Besides crashes and sanitizer reports, it stops on:
 *   - an answer that is not HTTP, or an error that is not the documented JSON ({"error": {"code", "message"}});
 *   - a JSON answer that is not valid UTF-8 JSON;
 *   - a request (its client gone) that is not answered and closed within 8 s.
 * tests/fuzz/run_fuzz.sh makes the seed corpus and runs it; docs/RELIABILITY.md has the figures. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"
#include "web/server.h"

static int g_port;

/* ---- the stub service ------------------------------------------------------------------------------------------ */

static cq_status stub_authenticate(void *ctx, const char *bearer, const char *session, cq_web_principal *who,
                                   cq_err *err) {
    (void)ctx;
    memset(who, 0, sizeof *who);
    if (!bearer && session) {
        if (strcmp(session, "cqs_ok")) return cq_err_set(err, CQ_ERR_NOT_FOUND, "the session has ended");
        who->user_id = who->session_id = 1;
        who->role = CQ_WEB_READ;
        snprintf(who->kb, sizeof who->kb, "laws,合同");
        return CQ_OK;
    }
    if (bearer && !strcmp(bearer, "bad")) return cq_err_set(err, CQ_ERR_NOT_FOUND, "unknown API key");
    who->role = bearer && !strcmp(bearer, "reader") ? CQ_WEB_READ : CQ_WEB_ADMIN;
    snprintf(who->kb, sizeof who->kb, "%s", who->role == CQ_WEB_READ ? "laws" : "");
    return CQ_OK;
}

static bool stub_allows(void *ctx, const cq_web_principal *who, cq_web_role need, const char *kb) {
    (void)ctx;
    return who->role == CQ_WEB_ADMIN || (need <= who->role && kb && !strcmp(kb, who->kb));
}

static cJSON *named(const char *key, const char *value) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, key, value);
    return o;
}

/* A name the service would refuse: makes the error paths (which echo the name) run too. */
static cq_status check_kb(const char *kb, cq_err *err) {
    if (!kb[0] || strlen(kb) > 64 || kb[0] == '.') return cq_err_set(err, CQ_ERR_INVALID, "invalid name '%s'", kb);
    if (!strcmp(kb, "nope")) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base named '%s'", kb);
    return CQ_OK;
}

static cq_status stub_health(void *ctx, cJSON **out, cq_err *err) {
    (void)ctx;
    (void)err;
    *out = named("status", "ok");
    return CQ_OK;
}

static void stub_metrics(void *ctx, cq_strbuf *out) {
    (void)ctx;
    cq_strbuf_puts(out, "stub_metric 1\n");
}

static cq_status stub_kb_list(void *ctx, cJSON **out, cq_err *err) {
    (void)ctx;
    (void)err;
    *out = cJSON_CreateArray();
    cJSON_AddItemToArray(*out, named("name", "laws"));
    cJSON_AddItemToArray(*out, named("name", "other"));
    return CQ_OK;
}

static cq_status stub_kb_get(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    (void)ctx;
    if (check_kb(kb, err)) return err->code;
    *out = named("name", kb);
    return CQ_OK;
}

static cq_status stub_kb_delete(void *ctx, const char *kb, cq_err *err) {
    (void)ctx;
    return check_kb(kb, err);
}

static cq_status stub_doc_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    (void)ctx;
    if (check_kb(kb, err)) return err->code;
    *out = cJSON_CreateArray();
    return CQ_OK;
}

static cq_status stub_doc_get(void *ctx, int64_t id, cJSON **out, cq_err *err) {
    (void)ctx;
    if (id > 100) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no such document");
    *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(*out, "id", (double)id);
    return CQ_OK;
}

static cq_status stub_doc_kb(void *ctx, int64_t id, char kb[128], cq_err *err) {
    (void)ctx;
    if (id > 100) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no such document");
    snprintf(kb, 128, "%s", id % 2 ? "laws" : "other");
    return CQ_OK;
}

static cq_status stub_doc_delete(void *ctx, int64_t id, cq_err *err) {
    (void)ctx;
    return id > 100 ? cq_err_set(err, CQ_ERR_NOT_FOUND, "no such document") : CQ_OK;
}

static cq_status stub_no_file(void *ctx, int64_t id, cq_web_file *file, cq_err *err) {
    (void)ctx;
    (void)id;
    (void)file;
    return cq_err_set(err, CQ_ERR_NOT_FOUND, "no original");
}

static cq_status stub_page_image(void *ctx, int64_t id, int page, int64_t clause, int width, cq_web_file *file,
                                 cq_err *err) {
    (void)ctx;
    (void)id;
    (void)clause;
    (void)width;
    (void)file;
    return cq_err_set(err, CQ_ERR_NOT_FOUND, "no page %d", page);
}

static cq_status stub_clause_get(void *ctx, int64_t id, cJSON **out, char kb[128], cq_err *err) {
    (void)ctx;
    if (id > 100) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no clause with id %lld", (long long)id);
    snprintf(kb, 128, "laws");
    *out = named("text", "第一条 \xff\xfe invalid bytes a document may hold");
    return CQ_OK;
}

static cq_status stub_doc_search(void *ctx, int64_t id, const char *q, cJSON **out, cq_err *err) {
    (void)ctx;
    if (id > 100) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no document with id %lld", (long long)id);
    *out = named("q", q);
    return CQ_OK;
}

static cq_status stub_kb_create(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    (void)ctx;
    if (check_kb(kb, err)) return err->code;
    if (!strcmp(kb, "laws")) return cq_err_set(err, CQ_ERR_EXISTS, "knowledge base '%s' exists already", kb);
    *out = named("name", kb);
    return CQ_OK;
}

static cq_status stub_upload(void *ctx, const char *kb, const char *filename, const char *path, bool replace,
                             const char *ocr, cJSON **out, bool *accepted, cq_err *err) {
    (void)ctx;
    (void)replace;
    (void)ocr;
    unlink(path); /* the service takes the spooled file over */
    if (check_kb(kb, err)) return err->code;
    *out = cJSON_CreateObject();
    cJSON *job = cJSON_AddObjectToObject(*out, "job");
    cJSON_AddStringToObject(job, "filename", filename);
    *accepted = true;
    return CQ_OK;
}

static cq_status stub_job_get(void *ctx, int64_t id, cJSON **out, char kb[128], cq_err *err) {
    (void)ctx;
    if (id > 100) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)id);
    snprintf(kb, 128, "laws");
    *out = named("state", "ready");
    return CQ_OK;
}

static cq_status stub_job_cancel(void *ctx, int64_t id, cJSON **out, cq_err *err) {
    (void)ctx;
    if (id > 50) return cq_err_set(err, CQ_ERR_EXISTS, "job %lld has ended (ready)", (long long)id);
    *out = named("state", "cancelled");
    return CQ_OK;
}

static cq_status stub_job_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    return stub_doc_list(ctx, kb, out, err);
}

static cq_status stub_retrieve(void *ctx, const char *kb, const cq_web_question *q, cJSON **out, cq_err *err) {
    (void)ctx;
    if (check_kb(kb, err)) return err->code;
    if (!q->question || !cq_utf8_valid(q->question, strlen(q->question))) abort(); /* strict JSON in */
    *out = named("question", q->question);
    return CQ_OK;
}

static cq_status stub_ask(void *ctx, const cq_web_principal *who, const char *kb, const cq_web_question *q,
                          const cq_web_stream *stream, cJSON **out, cq_err *err) {
    (void)who;
    if (q->conversation_id == 404) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", 404LL);
    if (stub_retrieve(ctx, kb, q, out, err)) return err->code;
    cJSON_AddStringToObject(*out, "answer", q->question);
    cJSON_AddItemToObject(*out, "citations", cJSON_CreateArray());
    if (!stream) return CQ_OK;
    if (stream->on_event) {
        cJSON *stage = named("stage", "retrieving");
        int gone = stream->on_event(stream->user, "stage", stage);
        cJSON_Delete(stage);
        if (gone) return CQ_OK;
    }
    /* streams the question back in pieces of 3 bytes, which may split a character (as decoders do) */
    size_t n = strlen(q->question);
    for (size_t i = 0; stream->on_token && i < n; i += 3)
        if (stream->on_token(stream->user, q->question + i, n - i < 3 ? n - i : 3)) break;
    return CQ_OK;
}

/* A document's version: echoes the edit's strings (a PUT body is strict JSON: valid UTF-8, no NUL). */
static cq_status stub_doc_version(void *ctx, int64_t id, const cJSON *edit, bool reset, cJSON **out, cq_err *err) {
    (void)ctx;
    (void)reset;
    if (id == 404) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no document %lld", (long long)id);
    const cJSON *label = edit ? cJSON_GetObjectItem(edit, "label") : NULL;
    if (label && !cJSON_IsString(label)) return cq_err_set(err, CQ_ERR_INVALID, "\"label\" must be a string");
    if (label && !cq_utf8_valid(label->valuestring, strlen(label->valuestring))) abort(); /* strict JSON in */
    *out = named("label", label ? label->valuestring : "");
    return CQ_OK;
}

static cq_status stub_doc_compare(void *ctx, int64_t a, int64_t b, const cq_web_compare *q, cJSON **out,
                                  cq_err *err) {
    (void)ctx;
    if (a == b) return cq_err_set(err, CQ_ERR_INVALID, "a document compared with itself");
    *out = named("clause", q->clause ? q->clause : ""); /* a query value: any bytes */
    return CQ_OK;
}

static cq_status stub_conversation_list(void *ctx, const cq_web_principal *who, const char *kb, bool all,
                                        cJSON **out, cq_err *err) {
    (void)ctx;
    (void)who;
    (void)all;
    if (kb && check_kb(kb, err)) return err->code;
    *out = named("kb", kb ? kb : "");
    return CQ_OK;
}

static cq_status stub_conversation_get(void *ctx, const cq_web_principal *who, int64_t id, cJSON **out,
                                       cq_err *err) {
    (void)ctx;
    (void)who;
    if (id == 404) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(*out, "id", (double)id);
    return CQ_OK;
}

static cq_status stub_conversation_rename(void *ctx, const cq_web_principal *who, int64_t id, const char *title,
                                          cJSON **out, cq_err *err) {
    if (!cq_utf8_valid(title, strlen(title))) abort(); /* strict JSON in */
    if (stub_conversation_get(ctx, who, id, out, err)) return err->code;
    cJSON_AddStringToObject(*out, "title", title);
    return CQ_OK;
}

static cq_status stub_conversation_delete(void *ctx, const cq_web_principal *who, int64_t id, cq_err *err) {
    (void)ctx;
    (void)who;
    return id == 404 ? cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id) : CQ_OK;
}

/* signing in (issue 30): user "alice" with "password"; a session cookie "cqs_ok" is hers */
static cq_status stub_login(void *ctx, const char *user, const char *password, const char *client, char *token,
                            cq_web_principal *who, cq_err *err) {
    (void)ctx;
    (void)client;
    memset(who, 0, sizeof *who);
    if (!strcmp(user, "slow")) {
        err->retry_after_s = 2;
        return cq_err_set(err, CQ_ERR_BUSY, "too many failed sign-ins");
    }
    if (strcmp(user, "alice") || strcmp(password, "password"))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "wrong user name or password");
    snprintf(token, CQ_WEB_SESSION_TOKEN_BYTES, "cqs_ok");
    who->user_id = who->session_id = 1;
    who->role = CQ_WEB_READ;
    who->via = "session";
    snprintf(who->kb, sizeof who->kb, "laws,合同");
    snprintf(who->name, sizeof who->name, "alice");
    return CQ_OK;
}

static cq_status stub_logout(void *ctx, const char *token, cq_err *err) {
    (void)ctx;
    return strcmp(token, "cqs_ok") ? cq_err_set(err, CQ_ERR_NOT_FOUND, "not signed in") : CQ_OK;
}

static void stub_audit(void *ctx, const cq_web_principal *who, const char *client, const char *action, const char *kb,
                       const char *target) {
    (void)ctx, (void)who, (void)client, (void)action, (void)kb, (void)target;
}

static cq_status stub_audit_list(void *ctx, int64_t before, int limit, const char *action, cJSON **out, cq_err *err) {
    (void)ctx, (void)before, (void)limit, (void)action, (void)err;
    *out = cJSON_CreateObject();
    cJSON_AddItemToObject(*out, "entries", cJSON_CreateArray());
    cJSON_AddNullToObject(*out, "next_before");
    return CQ_OK;
}

/* ---- the answer -------------------------------------------------------------------------------------------------- */

/* The value of header name (with its colon) in the answer's head, copied to out; false when absent. */
static bool header_value(const char *head, const char *name, char *out, size_t cap) {
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, strlen(name))) continue;
        const char *v = p + 2 + strlen(name), *e = strstr(v, "\r\n");
        snprintf(out, cap, "%.*s", (int)(e ? (size_t)(e - v) : strlen(v)), v);
        return true;
    }
    return false;
}

/* The first answer must be HTTP, and an error or JSON answer the documented JSON. */
static void check_answer(const uint8_t *req, size_t req_len, const char *buf, size_t len) {
    if (len == 0) return; /* closed without an answer: a request that never completed */
    /* "HTTP/1.1 200 ...": CivetWeb answers in the version the request named, whatever it was */
    const char *sp = memchr(buf, ' ', len < 16 ? len : 16);
    if (len < 13 || memcmp(buf, "HTTP/", 5) || !sp || (size_t)(sp - buf) + 4 >= len || sp[4] != ' ') {
        fprintf(stderr, "not an HTTP answer: %.40s\n", buf);
        abort();
    }
    int status = atoi(sp + 1);
    const char *end = strstr(buf, "\r\n\r\n");
    if (!end || status < 100 || status > 599) abort();
    char head[8192];
    snprintf(head, sizeof head, "%.*s", (int)(end - buf), buf);
    char ctype[128], clen[32], te[32];
    size_t skip = 0; /* blank lines before a request line are skipped (RFC 9112, and CivetWeb does) */
    while (skip < req_len && strchr(" \t\r\n", req[skip]) && req[skip]) skip++;
    bool head_request = req_len - skip >= 4 && !memcmp(req + skip, "HEAD", 4);
    if (status < 200 || status == 204 || head_request || header_value(head, "Transfer-Encoding:", te, sizeof te))
        return;
    if (!header_value(head, "Content-Type:", ctype, sizeof ctype) ||
        !header_value(head, "Content-Length:", clen, sizeof clen))
        abort(); /* every answer with a body says its type and length */
    bool json = strstr(ctype, "application/json") != NULL;
    if (status >= 400 && !json) {
        fprintf(stderr, "a %d answer that is not JSON: %s\n", status, head);
        abort();
    }
    if (!json) return;
    size_t body_len = (size_t)strtoul(clen, NULL, 10), have = len - (size_t)(end + 4 - buf);
    if (body_len > have) return; /* cut by the reading limit below */
    char why[160];
    cJSON *v = cq_json_parse_strict(end + 4, body_len, why, sizeof why);
    if (!v) {
        fprintf(stderr, "a JSON answer that is not valid JSON (%s): %.*s\n", why, (int)body_len, end + 4);
        abort();
    }
    if (status >= 400) {
        const cJSON *e = cJSON_GetObjectItem(v, "error");
        if (!cJSON_IsString(cJSON_GetObjectItem(e, "code")) || !cJSON_IsString(cJSON_GetObjectItem(e, "message")))
            abort();
    }
    cJSON_Delete(v);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    cq_log_set_level(CQ_LOG_OFF);
    static char spool[] = "/tmp/cq_fuzz_http_XXXXXX";
    if (!mkdtemp(spool)) abort();
    static cq_web_service svc = {
        .authenticate = stub_authenticate, .allows = stub_allows,       .health = stub_health,
        .metrics = stub_metrics,           .kb_list = stub_kb_list,     .kb_get = stub_kb_get,
        .kb_create = stub_kb_create,       .kb_delete = stub_kb_delete, .doc_list = stub_doc_list,
        .doc_get = stub_doc_get,           .doc_kb = stub_doc_kb,       .doc_delete = stub_doc_delete,
        .doc_original = stub_no_file,      .page_image = stub_page_image, .clause_get = stub_clause_get,
        .doc_search = stub_doc_search,
        .upload = stub_upload,             .job_get = stub_job_get,     .job_list = stub_job_list,
        .job_cancel = stub_job_cancel,     .retrieve = stub_retrieve,   .ask = stub_ask,
        .doc_version = stub_doc_version,   .doc_compare = stub_doc_compare,
        .conversation_list = stub_conversation_list,     .conversation_get = stub_conversation_get,
        .conversation_rename = stub_conversation_rename, .conversation_delete = stub_conversation_delete,
        .login = stub_login, .logout = stub_logout, .audit = stub_audit, .audit_list = stub_audit_list,
    };
    static const char *const origins[] = {"https://portal.example.com", NULL};
    static const char *const hosts[] = {"qa.example.com", NULL};
    cq_web_config cfg = {.port = 0, .threads = 2, .connections = 32, .max_json_bytes = 65536,
                         .max_upload_bytes = 262144, .request_timeout_ms = 1000, .cors_origins = origins,
                         .allowed_hosts = hosts, .spool_dir = spool};
    cq_web_server *server;
    cq_err err = {0};
    if (cq_web_start(&cfg, &svc, &server, &err)) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        abort();
    }
    g_port = cq_web_port(server);
    return 0;
}

/* A connection to the server; retried when the system is out of ports for a moment or a signal interrupts. */
static int connect_server(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof a)) {
            /* closed with a reset once the answer is read: no TIME_WAIT, so a long run does not run out of ports */
            struct linger no_linger = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof no_linger);
            return fd;
        }
        int e = errno;
        if (fd >= 0) close(fd);
        if (e != EINTR && e != EADDRNOTAVAIL && e != EAGAIN) {
            fprintf(stderr, "cannot connect to the server: %s\n", strerror(e));
            abort();
        }
        usleep(10000);
    }
    fprintf(stderr, "cannot connect to the server: out of ports\n");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = connect_server();
    struct timeval tv = {8, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t sent = 0;
    while (sent < size) {
        ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; /* the server answered and closed before reading it all (413, 400 ...) */
        sent += (size_t)n;
    }
    shutdown(fd, SHUT_WR); /* the client is done: every request must now end */
    time_t give_up = time(NULL) + 9;
    static char buf[1 << 18], rest[1 << 16];
    size_t len = 0;
    bool reset = false;
    for (;;) {
        /* the first 256 KiB are kept for the check; the rest is read to the end and dropped */
        bool full = len == sizeof buf - 1;
        ssize_t n = full ? recv(fd, rest, sizeof rest, 0) : recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR && time(NULL) < give_up) continue; /* libFuzzer's timer signal */
            /* a reset: the server closed with bytes of ours unread (after answering 413, say) */
            reset = errno == ECONNRESET;
            if (reset) break;
            fprintf(stderr, "no end of the answer within 8 s (%s)\n", strerror(errno));
            abort();
        }
        if (!full) len += (size_t)n;
    }
    buf[len] = 0;
    close(fd);
    if (!reset) check_answer(data, size, buf, len);
    return 0;
}
