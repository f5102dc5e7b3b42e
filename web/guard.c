/* What a request must pass before any handler sees it, and the connections each client address may hold.
 *
 * - The URL: percent-decoded here (CivetWeb is told not to), so that an encoded NUL ("laws%00x") is refused instead
 *   of cutting the name short.
 * - Host: a DNS-rebinding page reaches the server under the attacker's host name, so only names the server is known
 *   by are accepted: IP addresses (no rebinding goes through a literal address), localhost, and --allow-host names.
 * - The target: a path (origin form); absolute forms and "*" are refused (400), as are two Host or Origin headers.
 * - Origin: a request that changes something (any method but GET, HEAD and OPTIONS) from a page of another origin
 *   is refused unless that origin is allowed (--cors-origin); browsers send Origin on every such request. Allowed
 *   origins get the Access-Control-* headers, and the preflights (OPTIONS) are answered here: CivetWeb's own answer
 *   (which granted every origin every method) is switched off in server.c.
 * - Connections per client address: a client that opens many connections (slow ones especially) must not take
 *   every connection thread. CivetWeb gives no address before a connection's first request, so a connection is
 *   counted from its first request to its close. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "web/http.h"

struct cq_web_client {
    char addr[48];
    int connections;
};

/* ---- the URL ---------------------------------------------------------------------------------------------------- */

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes the path into out. 0, or the HTTP status of the problem (400: a NUL byte, 414: too long). A '%' not
 * followed by two hex digits stays as it is. */
static int decode_path(const char *raw, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = raw; *p; p++) {
        char c = *p;
        if (c == '%' && hex_value(p[1]) >= 0 && hex_value(p[2]) >= 0) {
            c = (char)(hex_value(p[1]) * 16 + hex_value(p[2]));
            p += 2;
            if (c == 0) return 400;
        }
        if (o + 1 >= cap) return 414;
        out[o++] = c;
    }
    out[o] = 0;
    return 0;
}

static bool query_has_nul(const char *q) {
    for (; q && *q; q++)
        if (q[0] == '%' && q[1] == '0' && q[2] == '0') return true;
    return false;
}

/* ---- Host ------------------------------------------------------------------------------------------------------- */

/* The host name of a Host header value or a configured name: lower case, without the port, the brackets of an IPv6
 * address, or a final dot. False when it does not fit or holds a blank, a control character or a '/'. */
static bool host_name(const char *value, char *out, size_t cap) {
    const char *start = value, *end;
    if (*value == '[') {
        start = value + 1;
        end = strchr(start, ']');
        if (!end) return false;
    } else {
        end = strchr(value, ':');
        if (!end) end = value + strlen(value);
    }
    size_t n = (size_t)(end - start);
    if (n && start[n - 1] == '.') n--;
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)start[i];
        if (c <= ' ' || c == '/' || c == 0x7f) return false;
        out[i] = (char)tolower(c);
    }
    out[n] = 0;
    return true;
}

static bool is_ip_literal(const char *name) {
    unsigned char buf[16];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

static bool host_allowed(const cq_web_server *s, const char *header) {
    if (s->any_host) return true;
    char name[256];
    if (!host_name(header, name, sizeof name)) return false;
    if (is_ip_literal(name) || !strcmp(name, "localhost")) return true;
    for (char **h = s->allowed_hosts; h && *h; h++)
        if (!strcmp(*h, name)) return true;
    return false;
}

/* ---- Origin ----------------------------------------------------------------------------------------------------- */

/* An Origin names the server itself when its host[:port] is the request's Host (the scheme may differ: a TLS proxy
 * in front serves https for the server's http). */
static bool same_origin(const char *origin, const char *host) {
    const char *authority = strstr(origin, "://");
    return authority && host && !strcasecmp(authority + 3, host);
}

static const char *allowed_origin(const cq_web_server *s, const char *origin) {
    for (char **o = s->cors_origins; o && *o; o++)
        if (!strcasecmp(*o, origin)) return *o;
    return NULL;
}

void cq_web_cors_headers(cq_web_req *r) {
    mg_response_header_add(r->conn, "Access-Control-Allow-Origin", r->cors_origin, -1);
    mg_response_header_add(r->conn, "Vary", "Origin", -1);
}

bool cq_web_safe_method(const char *m) { return !strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS"); }

static void answer_preflight(cq_web_req *r) {
    r->status = 204;
    mg_response_header_start(r->conn, 204);
    if (r->cors_origin) {
        cq_web_cors_headers(r);
        mg_response_header_add(r->conn, "Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE", -1);
        mg_response_header_add(r->conn, "Access-Control-Allow-Headers",
                               "Authorization, Content-Type, Accept, X-Filename", -1);
        mg_response_header_add(r->conn, "Access-Control-Max-Age", "600", -1);
    }
    mg_response_header_add(r->conn, "Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", -1);
    mg_response_header_add(r->conn, "Content-Length", "0", -1);
    mg_response_header_send(r->conn);
}

/* ---- configuration ---------------------------------------------------------------------------------------------- */

/* "scheme://host[:port]" with nothing after it (a final '/' is dropped); never a wildcard. */
static bool origin_name(const char *in, char *out, size_t cap) {
    size_t n = strlen(in);
    while (n && in[n - 1] == '/') n--;
    size_t scheme = !strncasecmp(in, "http://", 7) ? 7 : !strncasecmp(in, "https://", 8) ? 8 : 0;
    if (!scheme || n <= scheme || n >= cap || memchr(in + scheme, '/', n - scheme) || strchr(in, '*')) return false;
    memcpy(out, in, n);
    out[n] = 0;
    return true;
}

/* A NULL-terminated copy of list (NULL-terminated, may be NULL), each entry passed through norm. */
static cq_status copy_list(const char *const *list, bool (*norm)(const char *, char *, size_t), const char *what,
                           char ***out, cq_err *err) {
    size_t n = 0;
    while (list && list[n]) n++;
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    *out = copy;
    for (size_t i = 0; i < n; i++) {
        char buf[512];
        if (!norm(list[i], buf, sizeof buf)) return cq_err_set(err, CQ_ERR_INVALID, "invalid %s '%s'", what, list[i]);
        if (!(copy[i] = strdup(buf))) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    return CQ_OK;
}

cq_status cq_web_guard_init(cq_web_server *s, const cq_web_config *config, cq_err *err) {
    for (const char *const *h = config->allowed_hosts; h && *h; h++)
        if (!strcmp(*h, "*")) s->any_host = true;
    cq_status rc = copy_list(config->cors_origins, origin_name, "CORS origin (use http[s]://host[:port])",
                             &s->cors_origins, err);
    if (!rc && !s->any_host) rc = copy_list(config->allowed_hosts, host_name, "host name", &s->allowed_hosts, err);
    s->cfg.cors_origins = s->cfg.allowed_hosts = NULL; /* the caller's; the copies above are used */
    return rc;
}

static void free_list(char **list) {
    for (char **p = list; p && *p; p++) free(*p);
    free(list);
}

void cq_web_guard_free(cq_web_server *s) {
    free_list(s->cors_origins);
    free_list(s->allowed_hosts);
}

/* ---- the checks ------------------------------------------------------------------------------------------------- */

bool cq_web_guard_request(cq_web_req *r) {
    cq_web_server *s = r->server;
    int bad = decode_path(r->ri->local_uri ? r->ri->local_uri : "/", r->path, sizeof r->path);
    if (!bad && query_has_nul(r->ri->query_string)) bad = 400;
    if (bad) {
        snprintf(r->path, sizeof r->path, "/");
        if (bad == 414) cq_web_send_error(r, 414, "uri_too_long", "the path is longer than %zu bytes",
                                          sizeof r->path - 1);
        else cq_web_send_error(r, 400, "bad_request", "the URL holds an encoded NUL byte (%%00)");
        return false;
    }

    /* The target in origin form ("/path?query"): an absolute form ("http://host/path") names a host apart from the
     * Host header, and "*" (OPTIONS only, in HTTP) names no resource. */
    const char *target = r->ri->request_uri;
    if (!target || target[0] != '/') {
        cq_web_send_error(r, 400, "bad_request", "the request target must be a path starting with '/' (not '%.60s')",
                          target ? target : "");
        return false;
    }

    /* One Host and at most one Origin: a second one could be read by a proxy and this server differently (the
     * Origin check below would see the first one only). */
    int hosts = 0, origins = 0;
    for (int i = 0; i < r->ri->num_headers; i++) {
        hosts += !strcasecmp(r->ri->http_headers[i].name, "Host");
        origins += !strcasecmp(r->ri->http_headers[i].name, "Origin");
    }
    const char *host = mg_get_header(r->conn, "Host");
    if (hosts > 1 || origins > 1) {
        cq_web_send_error(r, 400, "bad_request", "more than one %s header", hosts > 1 ? "Host" : "Origin");
        return false;
    }
    if (host && !host_allowed(s, host)) {
        cq_web_send_error(r, 403, "forbidden_host",
                          "this server does not answer to the host name '%.200s' (see serve --allow-host)", host);
        return false;
    }

    const char *origin = mg_get_header(r->conn, "Origin");
    bool foreign = origin && !same_origin(origin, host);
    if (foreign) r->cors_origin = allowed_origin(s, origin);
    if (foreign && !r->cors_origin && !cq_web_safe_method(r->method)) {
        cq_web_send_error(r, 403, "forbidden_origin",
                          "requests from pages of %.200s may not change anything here (see serve --cors-origin)",
                          origin);
        return false;
    }
    if (!strcmp(r->method, "OPTIONS")) {
        if (foreign && !r->cors_origin)
            cq_web_send_error(r, 403, "forbidden_origin", "%.200s is not an allowed origin (see serve --cors-origin)",
                              origin);
        else answer_preflight(r);
        return false;
    }
    return true;
}

/* ---- connections per client address ----------------------------------------------------------------------------- */

void cq_web_clients_init(cq_web_clients *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
}

void cq_web_clients_destroy(cq_web_clients *c) {
    free(c->items);
    pthread_mutex_destroy(&c->lock);
}

/* The entry of addr, made when make is set; NULL when none (or out of memory). Called under the lock. */
static struct cq_web_client *client_find(cq_web_clients *c, const char *addr, bool make) {
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->items[i].addr, addr)) return &c->items[i];
    if (!make) return NULL;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct cq_web_client *p = realloc(c->items, cap * sizeof *p);
        if (!p) return NULL;
        c->items = p;
        c->cap = cap;
    }
    struct cq_web_client *e = &c->items[c->n++];
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    e->connections = 0;
    return e;
}

bool cq_web_clients_admit(cq_web_server *s, struct mg_connection *conn) {
    cq_web_conn *cs = mg_get_user_connection_data(conn);
    if (!cs || cs->mark) return true; /* counted at an earlier request */
    const struct mg_request_info *ri = mg_get_request_info(conn);
    char *mark = ri ? strdup(ri->remote_addr) : NULL; /* the connection's address, until it closes */
    if (!mark) return true;
    cq_web_clients *c = &s->clients;
    int limit = s->cfg.max_client_connections;
    pthread_mutex_lock(&c->lock);
    struct cq_web_client *e = client_find(c, mark, true);
    bool admitted = !e || limit <= 0 || e->connections < limit;
    if (e && admitted) e->connections++;
    pthread_mutex_unlock(&c->lock);
    if (e && admitted) cs->mark = mark;
    else free(mark);
    return admitted;
}

int cq_web_clients_max(cq_web_clients *c) {
    int most = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].connections > most) most = c->items[i].connections;
    pthread_mutex_unlock(&c->lock);
    return most;
}

void cq_web_clients_closed(cq_web_server *s, cq_web_conn *cs) {
    char *mark = cs->mark;
    if (!mark) return;
    cq_web_clients *c = &s->clients;
    pthread_mutex_lock(&c->lock);
    struct cq_web_client *e = client_find(c, mark, false);
    if (e && --e->connections <= 0) *e = c->items[--c->n];
    pthread_mutex_unlock(&c->lock);
    cs->mark = NULL;
    free(mark);
}

/* ---- requests on the strength of a cookie (issue 30) ------------------------------------------------------------ */

bool cq_web_same_site(const cq_web_req *r, bool require, const char **why) {
    const char *fetch_site = mg_get_header(r->conn, "Sec-Fetch-Site");
    const char *origin = mg_get_header(r->conn, "Origin");
    const char *host = mg_get_header(r->conn, "Host");
    if (fetch_site && strcasecmp(fetch_site, "same-origin")) {
        *why = "a signed-in request from another site's page (Sec-Fetch-Site) is refused";
        return false;
    }
    if (origin && !same_origin(origin, host)) {
        *why = "a signed-in request from another origin's page is refused (sign-in cookies serve this server's own "
               "page; other systems use an API key)";
        return false;
    }
    if (require && !fetch_site && !origin) {
        *why = "a request that changes something on a sign-in cookie must come from the page (it sends Origin); "
               "other clients use an API key";
        return false;
    }
    return true;
}

/* A loopback peer: a proxy on this machine (deploy/nginx-clauseqa.conf), whose forwarding headers are believed. */
static bool trusted_proxy(const cq_web_req *r) {
    const char *a = r->ri->remote_addr;
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1") || !strncmp(a, "::ffff:127.", 11);
}

void cq_web_client_address(const cq_web_req *r, char *out, size_t cap) {
    snprintf(out, cap, "%s", r->ri->remote_addr);
    const char *fwd = trusted_proxy(r) ? mg_get_header(r->conn, "X-Forwarded-For") : NULL;
    if (!fwd) return;
    /* the last entry is the one the proxy added: the address it saw (those before are the client's word) */
    const char *last = strrchr(fwd, ',');
    last = last ? last + 1 : fwd;
    while (*last == ' ' || *last == '\t') last++;
    size_t n = strcspn(last, " \t");
    if (n == 0 || n >= cap) return;
    memcpy(out, last, n);
    out[n] = 0;
}

bool cq_web_client_https(const cq_web_req *r) {
    if (r->ri->is_ssl) return true;
    const char *proto = trusted_proxy(r) ? mg_get_header(r->conn, "X-Forwarded-Proto") : NULL;
    return proto && !strcasecmp(proto, "https");
}
