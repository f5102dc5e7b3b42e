/* LDAP / Active Directory sign-in (app/ldap_auth.h) on OpenLDAP's libldap. */
#include "app/ldap_auth.h"

#include <ctype.h>
#include <ldap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include "core/log.h"
#include "store/users.h"

#define DEFAULT_GROUP_FILTER "(|(member=%d)(uniqueMember=%d)(memberUid=%u))"
#define WRONG_LOGIN "wrong user name or password"

/* ---- configuration ---- */

static const char *setting(const cq_config *file, const char *key, char *env_buf, size_t cap) {
    snprintf(env_buf, cap, "CLAUSEQA_LDAP_");
    size_t n = strlen(env_buf);
    for (const char *p = key; *p && n + 1 < cap; p++) env_buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    env_buf[n] = 0;
    const char *env = getenv(env_buf);
    if (env && *env) return env;
    return file ? cq_config_get(file, "ldap", key) : NULL;
}

static cq_status copy_setting(const cq_config *file, const char *key, char *out, size_t cap, cq_err *err) {
    char name[64];
    const char *v = setting(file, key, name, sizeof name);
    out[0] = 0;
    if (!v) return CQ_OK;
    if (strlen(v) >= cap) return cq_err_set(err, CQ_ERR_INVALID, "[ldap] %s is too long (at most %zu bytes)", key, cap - 1);
    snprintf(out, cap, "%s", v);
    return CQ_OK;
}

static void trim(char *s) {
    size_t n = strlen(s), i = 0;
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    while (isspace((unsigned char)s[i])) i++;
    memmove(s, s + i, n - i + 1);
}

cq_status cq_ldap_parse_map(const char *text, cq_ldap_config *c, cq_err *err) {
    c->n_map = 0;
    if (!text || !*text) return CQ_OK;
    char *copy = strdup(text);
    if (!copy) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    char *save = NULL;
    for (char *e = strtok_r(copy, "|", &save); e && !rc; e = strtok_r(NULL, "|", &save)) {
        trim(e);
        if (!*e) continue;
        char *arrow = strstr(e, "=>");
        if (!arrow) {
            rc = cq_err_set(err, CQ_ERR_INVALID, "[ldap] group-map: '%.200s' is not DIRECTORY-GROUP => GROUP", e);
            break;
        }
        *arrow = 0;
        char *dir = e, *ours = arrow + 2;
        trim(dir);
        trim(ours);
        if (!*dir || !cq_user_name_valid(ours)) {
            rc = cq_err_set(err, CQ_ERR_INVALID, "[ldap] group-map: '%.200s => %.80s' needs a directory group and "
                                                 "one of our group names", dir, ours);
            break;
        }
        if (c->n_map == CQ_LDAP_MAX_MAP || strlen(dir) >= sizeof c->map[0].directory) {
            rc = cq_err_set(err, CQ_ERR_INVALID, "[ldap] group-map: at most %d entries of up to 511 bytes",
                            CQ_LDAP_MAX_MAP);
            break;
        }
        snprintf(c->map[c->n_map].directory, sizeof c->map[0].directory, "%s", dir);
        snprintf(c->map[c->n_map].group, sizeof c->map[0].group, "%s", ours);
        c->n_map++;
    }
    free(copy);
    return rc;
}

cq_status cq_ldap_config_read(const cq_config *file, cq_ldap_config *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    out->timeout_s = CQ_LDAP_DEFAULT_TIMEOUT_S;
    char name[64], map[8192];
    if (copy_setting(file, "url", out->url, sizeof out->url, err) ||
        copy_setting(file, "ca-file", out->ca_file, sizeof out->ca_file, err) ||
        copy_setting(file, "user-dn", out->user_dn, sizeof out->user_dn, err) ||
        copy_setting(file, "user-filter", out->user_filter, sizeof out->user_filter, err) ||
        copy_setting(file, "base", out->base, sizeof out->base, err) ||
        copy_setting(file, "group-filter", out->group_filter, sizeof out->group_filter, err) ||
        copy_setting(file, "group-map", map, sizeof map, err))
        return err->code;
    const char *v = setting(file, "starttls", name, sizeof name);
    if (v) {
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) out->starttls = true;
        else if (strcmp(v, "false") && strcmp(v, "0") && strcmp(v, "no"))
            return cq_err_set(err, CQ_ERR_INVALID, "[ldap] starttls is true or false, not '%s'", v);
    }
    if ((v = setting(file, "timeout-s", name, sizeof name))) {
        char *end;
        long t = strtol(v, &end, 10);
        if (!*v || *end || t < 1 || t > 60)
            return cq_err_set(err, CQ_ERR_INVALID, "[ldap] timeout-s is whole seconds from 1 to 60, not '%s'", v);
        out->timeout_s = (int)t;
    }
    if (!out->group_filter[0]) snprintf(out->group_filter, sizeof out->group_filter, "%s", DEFAULT_GROUP_FILTER);
    if (!out->url[0]) return CQ_OK;
    if (strncmp(out->url, "ldap://", 7) && strncmp(out->url, "ldaps://", 8))
        return cq_err_set(err, CQ_ERR_INVALID, "[ldap] url must start with ldap:// or ldaps://, not '%.200s'", out->url);
    if (out->starttls && strncmp(out->url, "ldap://", 7))
        return cq_err_set(err, CQ_ERR_INVALID, "[ldap] starttls is for an ldap:// url (ldaps:// is TLS already)");
    if (!strstr(out->user_dn, "%u"))
        return cq_err_set(err, CQ_ERR_INVALID,
                          "[ldap] user-dn must hold %%u, the user name (\"uid=%%u,ou=people,dc=example,dc=com\")");
    if (!out->base[0]) return cq_err_set(err, CQ_ERR_INVALID, "[ldap] base is needed: where the groups are searched");
    return cq_ldap_parse_map(map, out, err);
}

/* ---- sign-in ---- */

/* template with %u → user and %d → dn (each as it is: a valid user name holds no character special in a DN or a
 * filter; a DN going into a filter is escaped). False when it does not fit. */
static bool expand(const char *template, const char *user, const char *dn, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = template; *p; p++) {
        const char *add = NULL;
        char one[2] = {*p, 0};
        char escaped[2048];
        if (p[0] == '%' && p[1] == 'u') {
            add = user;
            p++;
        } else if (p[0] == '%' && p[1] == 'd') {
            size_t k = 0; /* RFC 4515: * ( ) \ NUL escaped as \XX */
            for (const char *q = dn ? dn : ""; *q && k + 4 < sizeof escaped; q++) {
                if (*q == '*' || *q == '(' || *q == ')' || *q == '\\')
                    k += (size_t)snprintf(escaped + k, sizeof escaped - k, "\\%02x", (unsigned char)*q);
                else escaped[k++] = *q;
            }
            escaped[k] = 0;
            add = escaped;
            p++;
        } else {
            add = one;
        }
        size_t len = strlen(add);
        if (n + len >= cap) return false;
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = 0;
    return true;
}

/* The value of a DN's first RDN when it is cn=… ("cn=lawyers,ou=groups,…" → "lawyers"). */
static void dn_cn(const char *dn, char *out, size_t cap) {
    out[0] = 0;
    if (strncasecmp(dn, "cn=", 3)) return;
    size_t n = 0;
    for (const char *p = dn + 3; *p && *p != ',' && n + 1 < cap; p++) {
        if (*p == '\\' && p[1]) p++;
        out[n++] = *p;
    }
    out[n] = 0;
}

typedef struct {
    char (*groups)[64];
    size_t cap, n;
} mapped;

/* Adds the groups of ours a directory group (its DN, and its cn when known) maps to. */
static void map_group(const cq_ldap_config *c, const char *dn, const char *cn, mapped *m) {
    char from_dn[256];
    if (!cn || !*cn) {
        dn_cn(dn, from_dn, sizeof from_dn);
        cn = from_dn;
    }
    for (size_t i = 0; i < c->n_map; i++) {
        const char *d = c->map[i].directory;
        if (strcasecmp(d, dn) && (!*cn || strcasecmp(d, cn))) continue;
        bool seen = false;
        for (size_t k = 0; k < m->n && !seen; k++) seen = !strcmp(m->groups[k], c->map[i].group);
        if (!seen && m->n < m->cap) snprintf(m->groups[m->n++], 64, "%s", c->map[i].group);
    }
}

/* An LDAP result code as one of our errors: the directory unreachable or silent → BUSY; refused credentials →
 * NOT_FOUND (one message for every reason); anything else → what the directory said. */
static cq_status ldap_fail(const cq_ldap_config *c, LDAP *ld, int rc, const char *what, cq_err *err) {
    if (rc == LDAP_INVALID_CREDENTIALS || rc == LDAP_INAPPROPRIATE_AUTH || rc == LDAP_UNWILLING_TO_PERFORM ||
        rc == LDAP_NO_SUCH_OBJECT || rc == LDAP_INVALID_DN_SYNTAX)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, WRONG_LOGIN);
    char *diag = NULL;
    if (ld) ldap_get_option(ld, LDAP_OPT_DIAGNOSTIC_MESSAGE, &diag);
    cq_status code = CQ_ERR_IO;
    if (rc == LDAP_SERVER_DOWN || rc == LDAP_TIMEOUT || rc == LDAP_CONNECT_ERROR || rc == LDAP_TIMELIMIT_EXCEEDED ||
        rc == LDAP_BUSY || rc == LDAP_UNAVAILABLE)
        code = CQ_ERR_BUSY;
    cq_err_set_reason(err, code, code == CQ_ERR_BUSY ? "directory_unreachable" : NULL,
                      "the directory (%s) cannot be reached: %s%s%s", c->url, ldap_err2string(rc),
                      diag && *diag ? ": " : "", diag && *diag ? diag : "");
    CQ_WARN("ldap: %s: %s", what, err->msg);
    if (diag) ldap_memfree(diag);
    if (code == CQ_ERR_BUSY) err->retry_after_s = c->timeout_s;
    return code;
}

/* Reads the entries of a search: each entry's DN (and the values of attr) go to on_entry. */
static int search(LDAP *ld, const cq_ldap_config *c, const char *base, int scope, const char *filter,
                  const char *attr, void (*on_entry)(void *, const char *dn, struct berval **values), void *ctx) {
    struct timeval tv = {c->timeout_s, 0};
    char *attrs[] = {(char *)attr, NULL};
    LDAPMessage *res = NULL;
    int rc = ldap_search_ext_s(ld, base, scope, filter, attrs, 0, NULL, NULL, &tv, 1000, &res);
    if (rc == LDAP_SUCCESS || rc == LDAP_SIZELIMIT_EXCEEDED) {
        for (LDAPMessage *e = ldap_first_entry(ld, res); e; e = ldap_next_entry(ld, e)) {
            char *dn = ldap_get_dn(ld, e);
            struct berval **values = ldap_get_values_len(ld, e, attr);
            if (dn) on_entry(ctx, dn, values);
            if (values) ldap_value_free_len(values);
            if (dn) ldap_memfree(dn);
        }
        rc = LDAP_SUCCESS;
    }
    if (res) ldap_msgfree(res);
    return rc;
}

typedef struct {
    const cq_ldap_config *c;
    mapped *m;
    char dn[1024];
    size_t found;
} walk;

static void on_group(void *ctx, const char *dn, struct berval **cn) {
    walk *w = ctx;
    char name[256] = "";
    if (cn && cn[0]) snprintf(name, sizeof name, "%.*s", (int)cn[0]->bv_len, cn[0]->bv_val);
    map_group(w->c, dn, name, w->m);
    /* a group's other cn values (rare) */
    for (int i = 1; cn && cn[i]; i++) {
        snprintf(name, sizeof name, "%.*s", (int)cn[i]->bv_len, cn[i]->bv_val);
        map_group(w->c, dn, name, w->m);
    }
}

static void on_user(void *ctx, const char *dn, struct berval **member_of) {
    walk *w = ctx;
    if (w->found++ == 0) snprintf(w->dn, sizeof w->dn, "%s", dn);
    for (int i = 0; member_of && member_of[i]; i++) {
        char group[1024];
        snprintf(group, sizeof group, "%.*s", (int)member_of[i]->bv_len, member_of[i]->bv_val);
        map_group(w->c, group, NULL, w->m);
    }
}

cq_status cq_ldap_sign_in(const cq_ldap_config *c, const char *user, const char *password, char groups[][64],
                          size_t cap, size_t *n, cq_err *err) {
    *n = 0;
    if (!cq_user_name_valid(user) || !password || !*password) /* an empty password would bind anonymously */
        return cq_err_set(err, CQ_ERR_NOT_FOUND, WRONG_LOGIN);
    char dn[1024];
    if (!expand(c->user_dn, user, NULL, dn, sizeof dn)) return cq_err_set(err, CQ_ERR_NOT_FOUND, WRONG_LOGIN);
    LDAP *ld = NULL;
    int rc = ldap_initialize(&ld, c->url);
    if (rc != LDAP_SUCCESS) return ldap_fail(c, NULL, rc, "initialize", err);
    int version = LDAP_VERSION3;
    struct timeval tv = {c->timeout_s, 0};
    ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &version);
    ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
    ldap_set_option(ld, LDAP_OPT_TIMEOUT, &tv);
    ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
    if (!strncmp(c->url, "ldaps://", 8) || c->starttls) {
        int demand = LDAP_OPT_X_TLS_DEMAND, zero = 0;
        ldap_set_option(ld, LDAP_OPT_X_TLS_REQUIRE_CERT, &demand);
        if (c->ca_file[0]) ldap_set_option(ld, LDAP_OPT_X_TLS_CACERTFILE, c->ca_file);
        ldap_set_option(ld, LDAP_OPT_X_TLS_NEWCTX, &zero);
    }
    cq_status status = CQ_OK;
    if (c->starttls && (rc = ldap_start_tls_s(ld, NULL, NULL)) != LDAP_SUCCESS)
        status = ldap_fail(c, ld, rc == LDAP_CONNECT_ERROR ? rc : LDAP_CONNECT_ERROR, "StartTLS", err);
    if (!status) {
        struct berval cred = {strlen(password), (char *)password};
        rc = ldap_sasl_bind_s(ld, dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, NULL);
        if (rc != LDAP_SUCCESS) status = ldap_fail(c, ld, rc, "bind", err);
    }
    mapped m = {groups, cap, 0};
    walk w = {c, &m, "", 0};
    snprintf(w.dn, sizeof w.dn, "%s", dn);
    if (!status) {
        /* the user's entry: its DN (a UPN bind names none) and memberOf (Active Directory, the memberof overlay) */
        char filter[1024];
        if (c->user_filter[0]) {
            if (!expand(c->user_filter, user, NULL, filter, sizeof filter)) filter[0] = 0;
            w.dn[0] = 0;
            rc = filter[0] ? search(ld, c, c->base, LDAP_SCOPE_SUBTREE, filter, "memberOf", on_user, &w)
                           : LDAP_FILTER_ERROR;
            if (rc == LDAP_SUCCESS && w.found != 1) {
                CQ_WARN("ldap: user-filter found %zu entries for %s (want 1)", w.found, user);
                status = cq_err_set(err, CQ_ERR_NOT_FOUND, WRONG_LOGIN);
            }
        } else {
            rc = search(ld, c, dn, LDAP_SCOPE_BASE, "(objectClass=*)", "memberOf", on_user, &w);
            if (rc == LDAP_NO_SUCH_OBJECT || rc == LDAP_INSUFFICIENT_ACCESS) rc = LDAP_SUCCESS; /* optional */
            snprintf(w.dn, sizeof w.dn, "%s", dn);
        }
        if (!status && rc != LDAP_SUCCESS) status = ldap_fail(c, ld, rc, "user entry", err);
    }
    if (!status) {
        char filter[4096];
        if (!expand(c->group_filter, user, w.dn, filter, sizeof filter))
            status = cq_err_set(err, CQ_ERR_INVALID, "[ldap] group-filter is too long once filled in");
        else if ((rc = search(ld, c, c->base, LDAP_SCOPE_SUBTREE, filter, "cn", on_group, &w)) != LDAP_SUCCESS)
            status = ldap_fail(c, ld, rc, "groups", err);
    }
    ldap_unbind_ext_s(ld, NULL, NULL);
    if (status) return status;
    *n = m.n;
    return CQ_OK;
}
