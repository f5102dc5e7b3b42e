/* db/db.h's dispatch to the driver table, and what both drivers share. */
#include "db/db.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/strbuf.h"
#include "db/db_internal.h"

void cq_db_close(cq_db *db) {
    if (db) db->drv->close(db);
}

cq_db_kind cq_db_kind_of(const cq_db *db) { return db->drv->kind; }
cq_status cq_db_check(cq_db *db, cq_err *err) { return db->drv->check ? db->drv->check(db, err) : CQ_OK; }
cq_status cq_db_exec(cq_db *db, const char *sql, cq_err *err) { return db->drv->exec(db, sql, err); }
cq_status cq_db_begin(cq_db *db, cq_err *err) { return db->drv->begin(db, err); }
cq_status cq_db_commit(cq_db *db, cq_err *err) { return db->drv->commit(db, err); }
void cq_db_rollback(cq_db *db) { db->drv->rollback(db); }
bool cq_db_in_transaction(cq_db *db) { return db->drv->in_transaction(db); }

cq_status cq_db_begin_own(cq_db *db, bool *own, cq_err *err) {
    *own = !cq_db_in_transaction(db);
    return *own ? cq_db_begin(db, err) : CQ_OK;
}

cq_status cq_db_end(cq_db *db, bool own, cq_status rc, cq_err *err) {
    if (!own) return rc;
    if (!rc && !(rc = cq_db_commit(db, err))) return CQ_OK;
    cq_db_rollback(db); /* a failed commit's too */
    return rc;
}

cq_status cq_db_prepare(cq_db *db, const char *sql, cq_db_stmt **st, cq_err *err) {
    *st = NULL;
    return db->drv->prepare(db, sql, st, err);
}
void cq_db_bind_int(cq_db_stmt *st, int i, int64_t v) { st->db->drv->bind_int(st, i, v); }
void cq_db_bind_double(cq_db_stmt *st, int i, double v) { st->db->drv->bind_double(st, i, v); }
void cq_db_bind_text(cq_db_stmt *st, int i, const char *s) { st->db->drv->bind_text(st, i, s); }
void cq_db_bind_blob(cq_db_stmt *st, int i, const void *p, size_t n) { st->db->drv->bind_blob(st, i, p, n); }
void cq_db_bind_null(cq_db_stmt *st, int i) { st->db->drv->bind_text(st, i, NULL); }
int cq_db_step(cq_db_stmt *st, const char *what, cq_err *err) { return st->db->drv->step(st, what, err); }

bool cq_db_next(cq_db_stmt *st, const char *what, cq_status *rc, cq_err *err) {
    if (*rc) return false;
    int step = cq_db_step(st, what, err);
    if (step < 0) *rc = err ? err->code : CQ_ERR_DB;
    return step == CQ_DB_ROW;
}

cq_status cq_db_row(cq_db_stmt *st, const char *what, cq_err *err) {
    const int step = cq_db_step(st, what, err);
    return step == CQ_DB_ROW    ? CQ_OK
           : step == CQ_DB_DONE ? cq_err_set(err, CQ_ERR_NOT_FOUND, "%s: not found", what)
                                : (err ? err->code : CQ_ERR_DB);
}

void cq_db_reset(cq_db_stmt *st) { st->db->drv->reset(st); }
int64_t cq_db_col_int(cq_db_stmt *st, int col) { return st->db->drv->col_int(st, col); }
double cq_db_col_double(cq_db_stmt *st, int col) { return st->db->drv->col_double(st, col); }
bool cq_db_col_null(cq_db_stmt *st, int col) { return st->db->drv->col_null(st, col); }
const char *cq_db_col_text(cq_db_stmt *st, int col) { return st->db->drv->col_text(st, col); }
const void *cq_db_col_blob(cq_db_stmt *st, int col, size_t *n) { return st->db->drv->col_blob(st, col, n); }

char *cq_db_col_strdup(cq_db_stmt *st, int col) {
    const char *t = cq_db_col_text(st, col);
    return t ? strdup(t) : NULL;
}

void cq_db_col_copy(cq_db_stmt *st, int col, char *out, size_t cap) {
    const char *t = cq_db_col_text(st, col);
    if (cap) snprintf(out, cap, "%s", t ? t : "");
}

void cq_db_finalize(cq_db_stmt *st) {
    if (st) st->db->drv->finalize(st);
}

int64_t cq_db_changes(cq_db *db) { return db->drv->changes(db); }
void cq_db_nowait(cq_db *db, bool on) {
    if (db->drv->nowait) db->drv->nowait(db, on);
}

cq_status cq_db_bulk_begin(cq_db *db, const char *table, const char *columns, int n_columns, cq_db_stmt **st,
                           cq_err *err) {
    *st = NULL;
    return db->drv->bulk_begin(db, table, columns, n_columns, st, err);
}
void cq_db_stream(cq_db_stmt *st) {
    if (st && st->db->drv->stream) st->db->drv->stream(st);
}

cq_status cq_db_bulk_row(cq_db_stmt *st, cq_err *err) { return st->db->drv->bulk_row(st, err); }
cq_status cq_db_bulk_end(cq_db_stmt *st, cq_status rc, cq_err *err) {
    return st ? st->db->drv->bulk_end(st, rc, err) : rc;
}

/* The body of a function of values (...) after kinds: returns call, which reads them from ap. */
#define WITH_VALUES(call)                                                                                            \
    va_list ap;                                                                                                      \
    va_start(ap, kinds);                                                                                             \
    cq_status rc_ = (call);                                                                                          \
    va_end(ap);                                                                                                      \
    return rc_

cq_status cq_db_run(cq_db *db, const char *what, int64_t *changed, cq_err *err, const char *sql, const char *kinds,
                    ...) {
    WITH_VALUES(cq_db_runv(db, what, changed, err, sql, kinds, ap));
}

static cq_status queryv(cq_db *db, const char *what, cq_db_stmt **st, cq_err *err, const char *sql,
                        const char *kinds, va_list ap) {
    if (cq_db_prepare(db, sql, st, err)) return cq_err_prefix(err, "%s: ", what);
    for (int i = 0; kinds && kinds[i]; i++) {
        switch (kinds[i]) {
        case 'i': cq_db_bind_int(*st, i + 1, va_arg(ap, int64_t)); break;
        case 't': cq_db_bind_text(*st, i + 1, va_arg(ap, const char *)); break;
        case 'd': cq_db_bind_double(*st, i + 1, va_arg(ap, double)); break;
        case 'b': {
            const void *p = va_arg(ap, const void *);
            cq_db_bind_blob(*st, i + 1, p, va_arg(ap, size_t));
            break;
        }
        default: cq_db_bind_null(*st, i + 1); break;
        }
    }
    return CQ_OK;
}

cq_status cq_db_runv(cq_db *db, const char *what, int64_t *changed, cq_err *err, const char *sql, const char *kinds,
                     va_list ap) {
    cq_db_stmt *st;
    if (changed) *changed = 0;
    cq_status rc = queryv(db, what, &st, err, sql, kinds, ap);
    while (cq_db_next(st, what, &rc, err)) {}
    cq_db_finalize(st);
    if (!rc && changed) *changed = cq_db_changes(db);
    return rc;
}

cq_status cq_db_query(cq_db *db, const char *what, cq_db_stmt **st, cq_err *err, const char *sql, const char *kinds,
                      ...) {
    WITH_VALUES(queryv(db, what, st, err, sql, kinds, ap));
}

/* cq_db_list's rows */
static cq_status listv(cq_db *db, const char *what, size_t elem_size, bool (*read)(cq_db_stmt *st, void *elem),
                       void (*drop)(void *elem), void **out, size_t *n, cq_err *err, const char *sql,
                       const char *kinds, va_list ap) {
    *out = NULL;
    *n = 0;
    cq_db_stmt *st;
    cq_status rc = queryv(db, what, &st, err, sql, kinds, ap);
    if (rc) return rc;
    char *list = NULL;
    size_t count = 0, cap = 0;
    while (cq_db_next(st, what, &rc, err)) {
        if (!cq_grow((void **)&list, &cap, count + 1, elem_size) ||
            !read(st, memset(list + count * elem_size, 0, elem_size))) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        count++;
    }
    cq_db_finalize(st);
    for (size_t i = 0; rc && drop && i < count; i++) drop(list + i * elem_size);
    if (rc) {
        free(list);
    } else {
        *out = list;
        *n = count;
    }
    return rc;
}

static bool first_int(cq_db_stmt *st, void *v) {
    *(int64_t *)v = cq_db_col_int(st, 0);
    return true;
}

cq_status cq_db_list(cq_db *db, const char *what, size_t elem_size, bool (*read)(cq_db_stmt *st, void *elem),
                     void (*drop)(void *elem), void **out, size_t *n, cq_err *err, const char *sql, const char *kinds,
                     ...) {
    WITH_VALUES(listv(db, what, elem_size, read, drop, out, n, err, sql, kinds, ap));
}

/* The first row of sql through read: CQ_ERR_NOT_FOUND when there is none. */
static cq_status onev(cq_db *db, const char *what, bool (*read)(cq_db_stmt *st, void *elem), void *out, cq_err *err,
                      const char *sql, const char *kinds, va_list ap) {
    cq_db_stmt *st;
    cq_status rc = queryv(db, what, &st, err, sql, kinds, ap);
    if (rc) return rc;
    rc = cq_db_row(st, what, err);
    if (!rc && !read(st, out)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_db_finalize(st);
    return rc;
}

cq_status cq_db_one(cq_db *db, const char *what, bool (*read)(cq_db_stmt *st, void *elem), void *out, size_t size,
                    cq_err *err, const char *sql, const char *kinds, ...) {
    memset(out, 0, size);
    WITH_VALUES(onev(db, what, read, out, err, sql, kinds, ap));
}

typedef struct {
    int64_t *v;
    int n;
} ints;

static bool first_ints(cq_db_stmt *st, void *out) {
    const ints *x = out;
    for (int i = 0; i < x->n; i++) x->v[i] = cq_db_col_int(st, i);
    return true;
}

static cq_status intsv(cq_db *db, const char *what, int64_t *v, int n, cq_err *err, const char *sql,
                       const char *kinds, va_list ap) {
    memset(v, 0, (size_t)n * sizeof *v);
    ints x = {v, n};
    return onev(db, what, first_ints, &x, err, sql, kinds, ap);
}

cq_status cq_db_intv(cq_db *db, const char *what, int64_t *v, cq_err *err, const char *sql, const char *kinds,
                     va_list ap) {
    return intsv(db, what, v, 1, err, sql, kinds, ap);
}

cq_status cq_db_ints(cq_db *db, const char *what, int64_t *v, int n, cq_err *err, const char *sql, const char *kinds,
                     ...) {
    WITH_VALUES(intsv(db, what, v, n, err, sql, kinds, ap));
}

cq_status cq_db_int(cq_db *db, const char *what, int64_t *v, cq_err *err, const char *sql, const char *kinds, ...) {
    WITH_VALUES(cq_db_intv(db, what, v, err, sql, kinds, ap));
}

/* ---- ?N → $N ------------------------------------------------------------------------------------------------ */

char *cq_db_rewrite_placeholders(const char *sql, int *max_param) {
    size_t len = strlen(sql);
    char *out = malloc(len + 1);
    if (!out) return NULL;
    int max = 0;
    char quote = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = sql[i];
        if (quote) {
            if (c == quote) quote = 0; /* a doubled quote closes and reopens: the same outcome */
            out[o++] = c;
            continue;
        }
        if (c == '\'' || c == '"') {
            quote = c;
            out[o++] = c;
            continue;
        }
        if (c == '?' && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
            int n = 0;
            out[o++] = '$';
            while (sql[i + 1] >= '0' && sql[i + 1] <= '9') {
                n = n * 10 + (sql[i + 1] - '0');
                out[o++] = sql[++i];
            }
            if (n > max) max = n;
            continue;
        }
        out[o++] = c;
    }
    out[o] = 0;
    *max_param = max;
    return out;
}

/* ---- where a store is ------------------------------------------------------------------------------------ */

/* A libpq "key=value …" string starts with a keyword and '=' (a file name that does can be given as sqlite:NAME). */
static bool is_pg_keywords(const char *where) {
    const char *p = where;
    while (*p == ' ' || *p == '\t') p++;
    const char *start = p;
    while ((*p >= 'a' && *p <= 'z') || *p == '_') p++;
    while (*p == ' ' || *p == '\t') p++;
    return p > start && *p == '=';
}

cq_db_kind cq_db_where_kind(const char *where) {
    if (!strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11) || is_pg_keywords(where))
        return CQ_DB_POSTGRESQL;
    return CQ_DB_SQLITE;
}

const char *cq_db_where_path(const char *where) { return strncmp(where, "sqlite:", 7) ? where : where + 7; }

/* "password=…" of a keyword string: its value's end (values may be quoted with '' and escape with \). */
static const char *keyword_value_end(const char *v) {
    if (*v != '\'') {
        while (*v && *v != ' ' && *v != '\t') v++;
        return v;
    }
    for (v++; *v && *v != '\''; v++)
        if (*v == '\\' && v[1]) v++;
    return *v ? v + 1 : v;
}

bool cq_db_where_has_password(const char *where) {
    size_t cap = strlen(where) + 1;
    char *shown = malloc(cap);
    if (!shown) return true; /* cannot tell: treat as secret */
    cq_db_where_redact(where, shown, cap);
    bool secret = strcmp(shown, where) != 0;
    free(shown);
    return secret;
}

typedef struct {
    char *out;
    size_t cap, used;
} redacted;

static void put(redacted *r, const char *p, size_t n) {
    if (r->used + n >= r->cap) n = r->cap - 1 - r->used;
    memcpy(r->out + r->used, p, n);
    r->used += n;
    r->out[r->used] = 0;
}

void cq_db_where_redact(const char *where, char *out, size_t cap) {
    if (!cap) return;
    out[0] = 0;
    if (cq_db_where_kind(where) != CQ_DB_POSTGRESQL) {
        snprintf(out, cap, "%s", where);
        return;
    }
    redacted r = {out, cap, 0};
    if (!is_pg_keywords(where)) {
        /* scheme://[user[:password]@]host…?…password=…: the password between ':' and '@', and a password
         * parameter, go */
        const char *auth = strstr(where, "://") + 3, *at = NULL;
        for (const char *p = auth; *p && *p != '/' && *p != '?'; p++)
            if (*p == '@') at = p;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        const char *rest = where;
        if (colon) {
            put(&r, where, (size_t)(colon - where));
            rest = at;
        }
        const char *q = strchr(rest, '?');
        if (!q) {
            put(&r, rest, strlen(rest));
            return;
        }
        put(&r, rest, (size_t)(q - rest));
        const char *sep = "?";
        for (const char *p = q + 1; *p;) {
            const char *end = strchr(p, '&');
            if (!end) end = p + strlen(p);
            if (strncmp(p, "password=", 9)) {
                put(&r, sep, 1);
                put(&r, p, (size_t)(end - p));
                sep = "&";
            }
            p = *end ? end + 1 : end;
        }
        return;
    }
    for (const char *p = where; *p;) {
        const char *key = p;
        while (*p == ' ' || *p == '\t') p++;
        const char *name = p;
        while (*p && *p != '=' && *p != ' ' && *p != '\t') p++;
        bool secret = p - name == 8 && !strncmp(name, "password", 8);
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '=') {
            p++;
            while (*p == ' ' || *p == '\t') p++;
            p = keyword_value_end(p);
        }
        if (!secret) put(&r, key, (size_t)(p - key));
        if (p == key) p++;
    }
}

cq_status cq_db_ids(cq_db *db, const char *what, int64_t **ids, size_t *n, cq_err *err, const char *sql,
                    const char *kinds, ...) {
    WITH_VALUES(listv(db, what, sizeof **ids, first_int, NULL, (void **)ids, n, err, sql, kinds, ap));
}

cq_status cq_db_prepare_in(cq_db *db, const char *what, cq_db_stmt **st, cq_err *err, const char *head,
                           const int64_t *ids, size_t m, const char *tail, const char *kinds, ...) {
    *st = NULL;
    const int first = (int)strlen(kinds) + 1;
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, head);
    for (size_t i = 0; i < m; i++) cq_strbuf_printf(&b, i ? ", ?%d" : "(?%d", first + (int)i);
    cq_strbuf_puts(&b, ")");
    cq_strbuf_puts(&b, tail);
    va_list ap;
    va_start(ap, kinds);
    cq_status rc =
        b.failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : queryv(db, what, st, err, b.data, kinds, ap);
    va_end(ap);
    cq_strbuf_free(&b);
    for (size_t i = 0; !rc && i < m; i++) cq_db_bind_int(*st, first + (int)i, ids[i]);
    return rc;
}
