/* clauseqa.conf (app/config.h): libinih reads the lines, this file knows the keys. */
#include "app/config.h"

#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { KEY_TEXT, KEY_NUMBER, KEY_BOOL } key_kind;

/* The keys the file may hold. Each is a flag of the same name: the command checks the value's range or choices
 * when it parses the flag, as it does for one typed on the command line. */
static const struct {
    const char *section, *key;
    key_kind kind;
} known[] = {
    {"", "data", KEY_TEXT},
    {"", "models", KEY_TEXT},
    {"", "store", KEY_TEXT},
    {"", "log-level", KEY_TEXT},
    {"serve", "host", KEY_TEXT},
    {"serve", "port", KEY_NUMBER},
    {"serve", "threads", KEY_NUMBER},
    {"serve", "connections", KEY_NUMBER},
    {"serve", "max-upload-mb", KEY_NUMBER},
    {"serve", "no-open-mode", KEY_BOOL},
    {"serve", "port-file", KEY_TEXT},
    {"serve", "answers", KEY_TEXT},
    {"serve", "model", KEY_TEXT},
    {"serve", "device", KEY_TEXT},
    {"serve", "exact", KEY_BOOL},
    {"serve", "adapter", KEY_TEXT},
    {"serve", "access-log", KEY_TEXT},
    {"serve", "access-log-format", KEY_TEXT},
    {"serve", "ocr", KEY_TEXT},
    {"serve", "cors-origin", KEY_TEXT},
    {"serve", "allow-host", KEY_TEXT},
    {"serve", "request-timeout-s", KEY_NUMBER},
    {"serve", "max-client-connections", KEY_NUMBER},
    {"serve", "max-pages", KEY_NUMBER},
    {"serve", "doc-memory-mb", KEY_NUMBER},
    {"serve", "max-asks", KEY_NUMBER},
    {"serve", "max-waiting-asks", KEY_NUMBER},
    /* directory sign-in (app/ldap_auth.h): read by `serve` itself, not flags */
    {"ldap", "url", KEY_TEXT},
    {"ldap", "starttls", KEY_BOOL},
    {"ldap", "ca-file", KEY_TEXT},
    {"ldap", "user-dn", KEY_TEXT},
    {"ldap", "user-filter", KEY_TEXT},
    {"ldap", "base", KEY_TEXT},
    {"ldap", "group-filter", KEY_TEXT},
    {"ldap", "group-map", KEY_TEXT},
    {"ldap", "timeout-s", KEY_NUMBER},
};
#define N_KNOWN (sizeof known / sizeof known[0])

/* 1 true, 0 false, -1 neither. */
static int parse_bool(const char *v) {
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return 1;
        if (!strcasecmp(v, no[i])) return 0;
    }
    return -1;
}

static bool is_number(const char *v) {
    char *end;
    if (!*v) return false;
    (void)strtol(v, &end, 10);
    return *end == 0;
}

typedef struct {
    FILE *f;
    int line;        /* the line last read: the one the handler sees */
    int long_line;   /* the first line longer than the parser's buffer */
    cq_config *c;
    cq_err *err;
    int err_line;    /* the first line the handler refused */
} parse_state;

/* fgets for inih, counting lines. A line longer than inih's buffer would come back in pieces: note it. */
static char *read_line(char *buf, int size, void *stream) {
    parse_state *p = stream;
    if (!fgets(buf, size, p->f)) return NULL;
    p->line++;
    size_t n = strlen(buf);
    if (n == (size_t)size - 1 && buf[n - 1] != '\n' && !feof(p->f) && !p->long_line) p->long_line = p->line;
    return buf;
}

static void list_keys(const char *section, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; i < N_KNOWN && used < cap; i++)
        if (!strcmp(known[i].section, section))
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? ", " : "", known[i].key);
}

static int on_entry(void *user, const char *section, const char *key, const char *value) {
    parse_state *p = user;
    if (p->err_line) return 1; /* report the first problem only */
    const char *where = p->c->path;
    size_t k = 0;
    bool section_known = !*section;
    for (; k < N_KNOWN; k++) {
        if (!strcmp(known[k].section, section)) section_known = true;
        if (!strcmp(known[k].section, section) && !strcmp(known[k].key, key)) break;
    }
    char keys[400];
    if (!section_known) {
        cq_err_set(p->err, CQ_ERR_INVALID,
                   "%s:%d: unknown section [%s] (there are [serve] and [ldap], and keys before any section)", where, p->line,
                   section);
    } else if (k == N_KNOWN) {
        list_keys(section, keys, sizeof keys);
        cq_err_set(p->err, CQ_ERR_INVALID, "%s:%d: unknown key '%s'%s%s%s (known: %s)", where, p->line, key,
                   *section ? " in [" : "", section, *section ? "]" : "", keys);
    } else {
        /* one pair of double quotes around the value is the writer's, not the value's */
        size_t n = strlen(value);
        char *v = n >= 2 && value[0] == '"' && value[n - 1] == '"' ? strndup(value + 1, n - 2) : strdup(value);
        if (!v) return 0;
        for (size_t i = 0; i < p->c->n; i++) {
            const cq_config_entry *e = &p->c->entries[i];
            if (!strcmp(e->section, section) && !strcmp(e->key, key)) {
                cq_err_set(p->err, CQ_ERR_INVALID, "%s:%d: '%s' is set twice (first on line %d)", where, p->line,
                           key, e->line);
                break;
            }
        }
        if (!p->err->code && known[k].kind == KEY_NUMBER && !is_number(v))
            cq_err_set(p->err, CQ_ERR_INVALID, "%s:%d: %s needs a whole number, not '%s'", where, p->line, key, v);
        if (!p->err->code && known[k].kind == KEY_BOOL && parse_bool(v) < 0)
            cq_err_set(p->err, CQ_ERR_INVALID, "%s:%d: %s is true or false, not '%s'", where, p->line, key, v);
        if (!p->err->code && !*v && known[k].kind == KEY_TEXT)
            cq_err_set(p->err, CQ_ERR_INVALID, "%s:%d: %s is empty (leave it out for the default)", where, p->line,
                       key);
        cq_config_entry *grown = p->err->code ? NULL : realloc(p->c->entries, (p->c->n + 1) * sizeof *grown);
        if (!grown) {
            free(v);
            if (!p->err->code) cq_err_set(p->err, CQ_ERR_NOMEM, "out of memory");
        } else {
            p->c->entries = grown;
            cq_config_entry e = {strdup(section), strdup(key), v, p->line};
            if (e.section && e.key) {
                grown[p->c->n++] = e;
                return 1;
            }
            free(e.section);
            free(e.key);
            free(v);
            cq_err_set(p->err, CQ_ERR_NOMEM, "out of memory");
        }
    }
    p->err_line = p->line;
    return 0;
}

cq_status cq_config_load(const char *path, cq_config *out, cq_err *err) {
    *out = (cq_config){0};
    FILE *f = fopen(path, "r");
    if (!f) return cq_err_set(err, CQ_ERR_IO, "cannot read the configuration file %s", path);
    out->path = strdup(path);
    cq_err local = {0};
    parse_state p = {.f = f, .c = out, .err = &local};
    ini_allow_multiline = false; /* an indented line is a line of its own, not a continuation */
    int rc = out->path ? ini_parse_stream(read_line, &p, on_entry, &p) : -2;
    fclose(f);
    if (rc == -2) cq_err_set(&local, CQ_ERR_NOMEM, "out of memory");
    else if (p.long_line && (!rc || p.long_line <= rc))
        cq_err_set(&local, CQ_ERR_INVALID, "%s:%d: the line is too long", path, p.long_line);
    else if (rc > 0 && rc != p.err_line)
        cq_err_set(&local, CQ_ERR_INVALID, "%s:%d: not a `key = value` line or a [section]", path, rc);
    if (local.code) {
        cq_config_free(out);
        if (err) *err = local;
        return local.code;
    }
    return CQ_OK;
}

const char *cq_config_get(const cq_config *c, const char *section, const char *key) {
    for (size_t i = 0; c && i < c->n; i++)
        if (!strcmp(c->entries[i].section, section) && !strcmp(c->entries[i].key, key)) return c->entries[i].value;
    return NULL;
}

size_t cq_config_flags(const cq_config *c, const char *command, char **out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; c && i < c->n && n < cap; i++) {
        const cq_config_entry *e = &c->entries[i];
        if (strcmp(e->section, command)) continue;
        int b = parse_bool(e->value);
        bool is_bool = false;
        for (size_t k = 0; k < N_KNOWN; k++)
            if (!strcmp(known[k].section, e->section) && !strcmp(known[k].key, e->key))
                is_bool = known[k].kind == KEY_BOOL;
        if (is_bool && b == 0) continue;
        size_t len = strlen(e->key) + strlen(e->value) + 4;
        char *flag = malloc(len);
        if (!flag) break;
        if (is_bool) snprintf(flag, len, "--%s", e->key);
        else snprintf(flag, len, "--%s=%s", e->key, e->value);
        out[n++] = flag;
    }
    return n;
}

void cq_config_free(cq_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->entries[i].section);
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c->path);
    *c = (cq_config){0};
}
