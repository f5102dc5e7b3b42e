/* The PostgreSQL driver of db/db.h (libpq): statements rewritten from ?N to $N, parameters sent typed (bigint,
 * double precision, text, bytea in binary), results read as text; bulk inserts with COPY; a connection the server
 * dropped is re-established with backoff.
 *
 * Connection health (issue 29 item 1): after the server restarts, every pooled connection is dead. Each use first
 * looks, without a round trip, whether the server closed the socket (poll, then PQconsumeInput reads the end of
 * file); a dead connection is reset (PQreset) at most once per backoff interval, which doubles from 250 ms to 5 s
 * while the server stays away. Meanwhile every use fails with CQ_ERR_BUSY, reason "store_unreachable" and a
 * retry_after_s: the HTTP layer answers 503 + Retry-After, never a 401 that would make a client drop a valid key.
 * Once one connection of the process is re-established, the others waiting out their backoff try again at their
 * next use (reconnections, below): a node is wholly back as soon as the server is, not up to 5 s later. */
#include <libpq-fe.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "db/db_internal.h"

#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701
#define OID_BYTEA 17

#define BACKOFF_FIRST_S 0.25
#define BACKOFF_MAX_S 5.0
#define COPY_CHUNK_BYTES (1u << 20)

/* Connections of this process re-established so far: a dead one whose backoff began before the latest of them
 * tries at once (the server came back). Any server counts; at worst that costs one early attempt. */
static atomic_uint reconnections;

typedef struct {
    cq_db base;
    PGconn *conn;
    int64_t changes;
    bool broken;           /* the connection was found dead and not re-established yet */
    double next_try;       /* cq_clock_seconds() before which no reset is tried */
    double backoff;        /* seconds: the wait after the last failed reset */
    unsigned seen;         /* reconnections when that reset failed */
} pg_db;

typedef struct {
    cq_db_stmt base;
    char *sql;                  /* $N form */
    int n;                      /* parameters */
    char **values;              /* malloc'd, NULL: SQL NULL */
    int *lengths, *formats;
    Oid *types;
    PGresult *res;
    int row, rows;
    unsigned char **blobs;      /* per column: bytea decoded for the current row */
    size_t *blob_len;
    int n_cols;
    bool stream, in_flight; /* cq_db_stream: rows fetched one at a time (single-row mode); results to read */
    cq_strbuf buf; /* bulk insert (COPY) */
    int64_t bulk_rows;
} pg_stmt;

static pg_db *as_pg(cq_db *db) { return (pg_db *)db; }
static pg_stmt *as_st(cq_db_stmt *st) { return (pg_stmt *)st; }

PGconn *cq_db_pg(cq_db *db) { return db && db->drv == &cq_db_pg_driver ? as_pg(db)->conn : NULL; }

/* libpq's message without its trailing newline. */
static cq_status pg_error_code(cq_db *db, cq_err *err, cq_status code, const char *what) {
    const char *msg = PQerrorMessage(as_pg(db)->conn);
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) len--;
    return cq_err_set(err, code, "%s: %.*s", what, (int)len, msg);
}

static cq_status unreachable(pg_db *db, cq_err *err, const char *what) {
    const char *msg = PQerrorMessage(db->conn);
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) len--;
    double wait = db->next_try - cq_clock_seconds();
    cq_err_set_reason(err, CQ_ERR_BUSY, "store_unreachable", "%s%sstore unreachable%s%.*s", what ? what : "",
                      what ? ": " : "", len ? ": " : "", (int)len, msg);
    if (err) err->retry_after_s = wait > 1 ? (int)ceil(wait) : 1;
    return CQ_ERR_BUSY;
}

static void quiet_notice(void *arg, const char *message) {
    (void)arg, (void)message; /* "relation already exists, skipping" and the like */
}

static void pg_close(cq_db *db) {
    PQfinish(as_pg(db)->conn);
    free(db);
}

cq_status cq_db_pg_open(const char *conninfo, cq_db **out, cq_err *err) {
    *out = NULL;
    pg_db *db = calloc(1, sizeof *db);
    if (db) db->conn = PQconnectdb(conninfo);
    if (!db || !db->conn) {
        free(db);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    db->base.drv = &cq_db_pg_driver;
    if (PQstatus(db->conn) != CONNECTION_OK) {
        cq_status rc = pg_error_code(&db->base, err, CQ_ERR_DB, "cannot connect to PostgreSQL");
        pg_close(&db->base);
        return rc;
    }
    PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
    *out = &db->base;
    return CQ_OK;
}

/* Has the server closed this idle connection? A closed socket is readable and reads end-of-file; anything else
 * readable (a notice, a notification) is read. No round trip. */
static bool peer_gone(PGconn *c) {
    int fd = PQsocket(c);
    if (fd < 0) return true;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return false;
    if (!PQconsumeInput(c)) return true; /* notifications stay queued for cq_db_notifications */
    return PQstatus(c) != CONNECTION_OK;
}

static cq_status pg_ready(pg_db *db, const char *what, cq_err *err) {
    if (!db->broken) {
        if (PQstatus(db->conn) == CONNECTION_OK &&
            (PQtransactionStatus(db->conn) != PQTRANS_IDLE || !peer_gone(db->conn)))
            return CQ_OK;
        db->broken = true;
        db->next_try = 0;
        CQ_WARN("store: the PostgreSQL connection was lost; reconnecting");
    }
    double now = cq_clock_seconds();
    unsigned seen = atomic_load(&reconnections);
    if (now < db->next_try && seen == db->seen) return unreachable(db, err, what);
    PQreset(db->conn);
    if (PQstatus(db->conn) == CONNECTION_OK) {
        db->broken = false;
        db->backoff = 0;
        atomic_fetch_add(&reconnections, 1);
        CQ_INFO("store: the PostgreSQL connection is back");
        return CQ_OK;
    }
    db->backoff = db->backoff ? fmin(db->backoff * 2, BACKOFF_MAX_S) : BACKOFF_FIRST_S;
    db->next_try = now + db->backoff;
    db->seen = seen;
    return unreachable(db, err, what);
}

static cq_status pg_check(cq_db *db, cq_err *err) { return pg_ready(as_pg(db), NULL, err); }

/* A failed statement: the connection's loss, a unique key, or the server's refusal. */
static cq_status result_error(pg_db *db, const PGresult *r, const char *what, cq_err *err) {
    if (PQstatus(db->conn) != CONNECTION_OK) {
        db->broken = true;
        db->next_try = 0;
        return unreachable(db, err, what);
    }
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return pg_error_code(&db->base, err, state && !strcmp(state, "23505") ? CQ_ERR_EXISTS : CQ_ERR_DB, what);
}

static cq_status pg_exec(cq_db *db, const char *sql, cq_err *err) {
    pg_db *p = as_pg(db);
    if (pg_ready(p, "exec", err)) return err ? err->code : CQ_ERR_BUSY;
    PGresult *r = PQexec(p->conn, sql);
    ExecStatusType st = PQresultStatus(r);
    cq_status rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? CQ_OK : result_error(p, r, "exec", err);
    PQclear(r);
    return rc;
}

static cq_status pg_begin(cq_db *db, cq_err *err) { return pg_exec(db, "BEGIN", err); }

static cq_status pg_commit(cq_db *db, cq_err *err) {
    pg_db *p = as_pg(db);
    /* A failed transaction's COMMIT "succeeds" as a ROLLBACK: tell the caller. */
    bool failed = PQtransactionStatus(p->conn) == PQTRANS_INERROR;
    PGresult *r = PQexec(p->conn, "COMMIT");
    cq_status rc = PQresultStatus(r) == PGRES_COMMAND_OK ? CQ_OK : result_error(p, r, "commit", err);
    PQclear(r);
    if (!rc && failed) rc = cq_err_set(err, CQ_ERR_DB, "commit: the transaction had failed and was rolled back");
    return rc;
}

static bool pg_in_transaction(cq_db *db) {
    PGconn *c = as_pg(db)->conn;
    return PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE;
}

static void pg_rollback(cq_db *db) {
    if (pg_in_transaction(db)) PQclear(PQexec(as_pg(db)->conn, "ROLLBACK"));
}

static void drop_blobs(pg_stmt *st) {
    for (int i = 0; st->blobs && i < st->n_cols; i++) {
        PQfreemem(st->blobs[i]);
        st->blobs[i] = NULL;
    }
}

/* Reads what is left of a statement sent, so that the connection is free again. */
static void drain(pg_stmt *st) {
    if (!st->in_flight) return;
    PGresult *r;
    while ((r = PQgetResult(as_pg(st->base.db)->conn))) PQclear(r);
    st->in_flight = false;
}

static void blobs_free(pg_stmt *st) {
    drop_blobs(st);
    free(st->blobs);
    free(st->blob_len);
    st->blobs = NULL;
    st->blob_len = NULL;
}

static void drop_result(pg_stmt *st) {
    drain(st);
    blobs_free(st);
    st->n_cols = 0;
    PQclear(st->res);
    st->res = NULL;
    st->row = st->rows = 0;
}

/* The result's columns and room for the current row's bytea copies: false (the result dropped, err set) when out
 * of memory. */
static bool columns_new(pg_stmt *st, cq_err *err) {
    st->n_cols = PQnfields(st->res);
    st->blobs = calloc((size_t)st->n_cols + 1, sizeof *st->blobs);
    st->blob_len = calloc((size_t)st->n_cols + 1, sizeof *st->blob_len);
    if (st->blobs && st->blob_len) return true;
    drop_result(st);
    cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    return false;
}

static void params_free(pg_stmt *st) {
    for (int i = 0; i < st->n; i++) free(st->values[i]);
    free(st->values);
    free(st->lengths);
    free(st->formats);
    free(st->types);
}

static void pg_finalize(cq_db_stmt *s) {
    pg_stmt *st = as_st(s);
    drop_result(st);
    params_free(st);
    free(st->sql);
    cq_strbuf_free(&st->buf);
    free(st);
}

/* The statement's n parameters (those of before freed; all empty): false when out of memory, with none. */
static bool params_new(pg_stmt *st, int n) {
    params_free(st);
    size_t m = n ? (size_t)n : 1;
    st->values = calloc(m, sizeof *st->values);
    st->lengths = calloc(m, sizeof *st->lengths);
    st->formats = calloc(m, sizeof *st->formats);
    st->types = calloc(m, sizeof *st->types);
    st->n = st->values && st->lengths && st->formats && st->types ? n : 0;
    return st->n == n;
}

static cq_status pg_prepare(cq_db *db, const char *sql, cq_db_stmt **out, cq_err *err) {
    pg_stmt *st = calloc(1, sizeof *st);
    if (!st) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    st->base.db = db;
    int n = 0;
    st->sql = cq_db_rewrite_placeholders(sql, &n);
    if (!st->sql || !params_new(st, n)) {
        pg_finalize(&st->base);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < st->n; i++) st->types[i] = OID_TEXT;
    *out = &st->base;
    return CQ_OK;
}

/* Parameter i (from 1) set to a copy of n bytes of p (NULL: SQL NULL). A failed copy leaves it NULL. */
static void set_param(cq_db_stmt *s, int i, const void *p, size_t n, Oid type, int format) {
    pg_stmt *st = as_st(s);
    if (i < 1 || i > st->n) return;
    i--;
    free(st->values[i]);
    st->values[i] = NULL;
    st->types[i] = type;
    st->formats[i] = format;
    st->lengths[i] = (int)n;
    if (!p) return;
    st->values[i] = malloc(n + 1);
    if (!st->values[i]) return;
    memcpy(st->values[i], p, n);
    st->values[i][n] = 0;
}

static void pg_bind_int(cq_db_stmt *st, int i, int64_t v) {
    char text[24];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    set_param(st, i, text, (size_t)n, OID_INT8, 0);
}
static void pg_bind_double(cq_db_stmt *st, int i, double v) {
    char text[40];
    int n = snprintf(text, sizeof text, "%.17g", v);
    set_param(st, i, text, (size_t)n, OID_FLOAT8, 0);
}
/* A NULL's type is left to the server (0): it is whatever the column or expression needs. */
static void pg_bind_text(cq_db_stmt *st, int i, const char *s) {
    set_param(st, i, s, s ? strlen(s) : 0, s ? OID_TEXT : 0, 0);
}
static void pg_bind_blob(cq_db_stmt *st, int i, const void *p, size_t n) {
    set_param(st, i, p ? p : "", n, OID_BYTEA, 1);
}

/* Sends the statement; streamed (cq_db_stream), its rows come one at a time, each a result of its own
 * (PQsetSingleRowMode). */
static bool send(pg_stmt *st, pg_db *db, const char *what, cq_err *err) {
    if (pg_ready(db, what, err)) return false;
    if (!PQsendQueryParams(db->conn, st->sql, st->n, st->types, (const char *const *)st->values, st->lengths,
                           st->formats, 0)) {
        result_error(db, NULL, what, err);
        return false;
    }
    st->in_flight = true;
    if (!st->stream || PQsetSingleRowMode(db->conn)) return true;
    drain(st);
    cq_err_set(err, CQ_ERR_DB, "%s: cannot read the rows one at a time", what);
    return false;
}

/* The next row: of the result held, else of the next result (a streamed statement's next row, or the whole result
 * of one not streamed, after which the connection is free again). */
static int pg_step(cq_db_stmt *s, const char *what, cq_err *err) {
    pg_stmt *st = as_st(s);
    pg_db *db = as_pg(s->db);
    if (!st->res && !st->in_flight && !send(st, db, what, err)) return -1;
    drop_blobs(st);
    while (st->row + 1 >= st->rows) {
        st->row = st->rows;
        if (!st->in_flight) return CQ_DB_DONE;
        blobs_free(st);
        PQclear(st->res);
        st->res = PQgetResult(db->conn);
        ExecStatusType rs = PQresultStatus(st->res);
        if (rs != PGRES_SINGLE_TUPLE && rs != PGRES_TUPLES_OK && rs != PGRES_COMMAND_OK) {
            /* not streamed: read to the end first, as PQexecParams does, so that a server that died after its last
             * message (FATAL, then the socket closed) is seen gone: store_unreachable, not a database error */
            if (!st->stream) drain(st);
            result_error(db, st->res, what, err);
            drop_result(st);
            return -1;
        }
        if (rs != PGRES_SINGLE_TUPLE) drain(st); /* the statement's last result */
        const char *changed = PQcmdTuples(st->res);
        if (!st->stream) db->changes = changed && *changed ? atoll(changed) : 0;
        st->rows = rs == PGRES_COMMAND_OK ? 0 : PQntuples(st->res);
        st->row = -1;
        if (!columns_new(st, err)) return -1;
    }
    st->row++;
    return CQ_DB_ROW;
}

static void pg_reset(cq_db_stmt *st) { drop_result(as_st(st)); }

static void pg_stream(cq_db_stmt *st) { as_st(st)->stream = true; }

static bool in_row(pg_stmt *st, int col) {
    return st->res && st->row >= 0 && st->row < st->rows && col >= 0 && col < st->n_cols;
}

static bool pg_col_null(cq_db_stmt *s, int col) {
    pg_stmt *st = as_st(s);
    return !in_row(st, col) || PQgetisnull(st->res, st->row, col);
}

static const char *pg_col_text(cq_db_stmt *s, int col) {
    pg_stmt *st = as_st(s);
    return pg_col_null(s, col) ? NULL : PQgetvalue(st->res, st->row, col);
}

static int64_t pg_col_int(cq_db_stmt *s, int col) {
    const char *t = pg_col_text(s, col);
    if (!t) return 0;
    if (t[0] == 't' && !t[1]) return 1; /* boolean */
    if (t[0] == 'f' && !t[1]) return 0;
    return strtoll(t, NULL, 10);
}

static double pg_col_double(cq_db_stmt *s, int col) {
    const char *t = pg_col_text(s, col);
    return t ? strtod(t, NULL) : 0.0;
}

static const void *pg_col_blob(cq_db_stmt *s, int col, size_t *n) {
    pg_stmt *st = as_st(s);
    *n = 0;
    if (pg_col_null(s, col)) return NULL;
    if (!st->blobs[col])
        st->blobs[col] = PQunescapeBytea((const unsigned char *)PQgetvalue(st->res, st->row, col), &st->blob_len[col]);
    *n = st->blobs[col] ? st->blob_len[col] : 0;
    return st->blobs[col];
}

static int64_t pg_changes(cq_db *db) { return as_pg(db)->changes; }

/* ---- bulk insert: COPY ------------------------------------------------------------------------------------- */

static cq_status pg_bulk_begin(cq_db *db, const char *table, const char *columns, int n_columns, cq_db_stmt **out,
                               cq_err *err) {
    pg_db *p = as_pg(db);
    if (pg_ready(p, "bulk insert", err)) return err ? err->code : CQ_ERR_BUSY;
    cq_db_stmt *s;
    cq_status rc = pg_prepare(db, "", &s, err);
    if (rc) return rc;
    if (!params_new(as_st(s), n_columns)) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_strbuf sql = {0};
    cq_strbuf_printf(&sql, "COPY %s(%s) FROM STDIN", table, columns);
    PGresult *r = rc ? NULL : PQexec(p->conn, sql.data ? sql.data : "");
    if (!rc && PQresultStatus(r) != PGRES_COPY_IN) rc = result_error(p, r, "bulk insert", err);
    PQclear(r);
    cq_strbuf_free(&sql);
    if (rc) pg_finalize(s);
    else *out = s;
    return rc;
}

/* A COPY text-format field: backslash, tab, newline and carriage return escaped; NULL is \N. */
static void copy_text(cq_strbuf *b, const char *s) {
    if (!s) {
        cq_strbuf_puts(b, "\\N");
        return;
    }
    const char *run = s;
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '\t' ? "\\t" : *s == '\n' ? "\\n" : *s == '\r' ? "\\r" : NULL;
        if (!esc) continue;
        cq_strbuf_append(b, run, (size_t)(s - run));
        cq_strbuf_puts(b, esc);
        run = s + 1;
    }
    cq_strbuf_append(b, run, (size_t)(s - run));
}

/* A bytea COPY field: \x and hex digits, the backslash doubled for COPY. */
static void copy_bytea(cq_strbuf *b, const unsigned char *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    cq_strbuf_puts(b, "\\\\x");
    char buf[256];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        buf[k++] = hex[p[i] >> 4];
        buf[k++] = hex[p[i] & 15];
        if (k == sizeof buf) {
            cq_strbuf_append(b, buf, k);
            k = 0;
        }
    }
    cq_strbuf_append(b, buf, k);
}

static cq_status flush_copy(pg_stmt *st, cq_err *err) {
    pg_db *p = as_pg(st->base.db);
    if (!st->buf.len) return CQ_OK;
    if (PQputCopyData(p->conn, st->buf.data, (int)st->buf.len) != 1) return result_error(p, NULL, "bulk insert", err);
    cq_strbuf_reset(&st->buf);
    return CQ_OK;
}

static cq_status pg_bulk_row(cq_db_stmt *s, cq_err *err) {
    pg_stmt *st = as_st(s);
    for (int i = 0; i < st->n; i++) {
        if (i) cq_strbuf_append(&st->buf, "\t", 1);
        if (!st->values[i]) copy_text(&st->buf, NULL);
        else if (st->formats[i] == 1)
            copy_bytea(&st->buf, (const unsigned char *)st->values[i], (size_t)st->lengths[i]);
        else copy_text(&st->buf, st->values[i]);
        free(st->values[i]);
        st->values[i] = NULL;
    }
    cq_strbuf_append(&st->buf, "\n", 1);
    st->bulk_rows++;
    return st->buf.len >= COPY_CHUNK_BYTES ? flush_copy(st, err) : CQ_OK;
}

static cq_status pg_bulk_end(cq_db_stmt *s, cq_status rc, cq_err *err) {
    pg_stmt *st = as_st(s);
    pg_db *p = as_pg(s->db);
    if (!rc) rc = flush_copy(st, err);
    bool ended = PQputCopyEnd(p->conn, rc ? "clauseqa: bulk insert abandoned" : NULL) == 1;
    PGresult *r;
    while ((r = PQgetResult(p->conn))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc) rc = result_error(p, r, "bulk insert", err);
        PQclear(r);
    }
    if (!ended && !rc) rc = result_error(p, NULL, "bulk insert", err);
    if (!rc) p->changes = st->bulk_rows;
    pg_finalize(s);
    return rc;
}

const cq_db_driver cq_db_pg_driver = {
    .kind = CQ_DB_POSTGRESQL,
    .close = pg_close,
    .check = pg_check,
    .exec = pg_exec,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .in_transaction = pg_in_transaction,
    .prepare = pg_prepare,
    .bind_int = pg_bind_int,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .reset = pg_reset,
    .col_int = pg_col_int,
    .col_double = pg_col_double,
    .col_null = pg_col_null,
    .col_text = pg_col_text,
    .col_blob = pg_col_blob,
    .finalize = pg_finalize,
    .changes = pg_changes,
    .bulk_begin = pg_bulk_begin,
    .bulk_row = pg_bulk_row,
    .bulk_end = pg_bulk_end,
    .stream = pg_stream,
};

/* ---- notifications (LISTEN / NOTIFY) and the connection's own parameters ------------------------------------ */

static pg_db *pg_of(cq_db *db) { return db && db->drv == &cq_db_pg_driver ? as_pg(db) : NULL; }

int cq_db_socket(cq_db *db) {
    pg_db *p = pg_of(db);
    return p && PQstatus(p->conn) == CONNECTION_OK ? PQsocket(p->conn) : -1;
}

bool cq_db_notifications(cq_db *db, bool read, int *n) {
    pg_db *p = pg_of(db);
    *n = 0;
    if (!p || PQstatus(p->conn) != CONNECTION_OK) return false;
    if (read && !PQconsumeInput(p->conn)) return false;
    PGnotify *note;
    while ((note = PQnotifies(p->conn))) {
        PQfreemem(note);
        (*n)++;
    }
    return PQstatus(p->conn) == CONNECTION_OK;
}

bool cq_db_connected(cq_db *db) {
    pg_db *p = pg_of(db);
    return p ? PQstatus(p->conn) == CONNECTION_OK : db != NULL;
}

bool cq_db_reconnect(cq_db *db) {
    pg_db *p = pg_of(db);
    if (!p) return db != NULL;
    PQreset(p->conn);
    bool ok = PQstatus(p->conn) == CONNECTION_OK;
    if (ok) p->broken = false;
    return ok;
}

int cq_db_backend_pid(cq_db *db) {
    pg_db *p = pg_of(db);
    return p ? PQbackendPID(p->conn) : 0;
}

/* A connection over TCP that went silent (the server's host died, a partition) would hold a read for the kernel's
 * timeout, many minutes; these make libpq give up within about 20 s. A setting the connection string makes stands.
 * Ignored over a unix socket. */
static const char *const silent_connection[][2] = {
    {"keepalives", "1"}, {"keepalives_idle", "10"}, {"keepalives_interval", "5"}, {"keepalives_count", "2"},
    {"tcp_user_timeout", "20000"},
};

char *cq_db_conninfo(cq_db *db) {
    pg_db *p = pg_of(db);
    PQconninfoOption *opts = p ? PQconninfo(p->conn) : NULL;
    if (!opts) return NULL;
    cq_strbuf b = {0};
    for (size_t i = 0; i < sizeof silent_connection / sizeof silent_connection[0]; i++) {
        bool set = false;
        for (PQconninfoOption *o = opts; o->keyword && !set; o++)
            set = !strcmp(o->keyword, silent_connection[i][0]) && o->val && *o->val;
        if (!set) cq_strbuf_printf(&b, "%s=%s ", silent_connection[i][0], silent_connection[i][1]);
    }
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val) continue;
        cq_strbuf_printf(&b, "%s='", o->keyword);
        for (const char *q = o->val; *q; q++) {
            if (*q == '\'' || *q == '\\') cq_strbuf_puts(&b, "\\");
            cq_strbuf_append(&b, q, 1);
        }
        cq_strbuf_puts(&b, "' ");
    }
    PQconninfoFree(opts);
    return cq_strbuf_finish(&b);
}
