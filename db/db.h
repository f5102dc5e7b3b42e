/* db/: one interface to the two SQL databases the store runs on (issue 28) — SQLite (db_sqlite.c) and PostgreSQL
 * (db_pg.c) — so that a store module (store/) writes each statement once.
 *
 * A cq_db is one connection with its driver table (db_internal.h: begin, commit, rollback, prepare, bind, step,
 * column readers, changes, bulk insert). SQL is written once in SQLite's syntax with numbered placeholders
 * ?1, ?2, … (a placeholder may appear several times); the PostgreSQL driver rewrites them to $1, $2, …. What really
 * differs between the two (FOR UPDATE SKIP LOCKED, upsert forms, DDL types) is a statement of db/dialect.h, chosen
 * by the connection's kind. Errors are CQ_ERR_DB with the server's message ("what: message"), CQ_ERR_EXISTS for a
 * unique-key violation, and CQ_ERR_BUSY (reason "store_unreachable", retry_after_s set) while a PostgreSQL server
 * cannot be reached: the connection is re-established, with backoff, on the next use (cq_db_check).
 *
 * Values: integers are int64, text is UTF-8 (NULL binds and reads as SQL NULL), blobs are bytes (bytea on
 * PostgreSQL). A cq_db is used from one thread at a time. No libpq or sqlite3 include is needed to use it. */
#ifndef CQ_DB_DB_H
#define CQ_DB_DB_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct cq_db cq_db;
typedef struct cq_db_stmt cq_db_stmt;
typedef struct sqlite3 sqlite3;
typedef struct pg_conn PGconn;

typedef enum { CQ_DB_SQLITE, CQ_DB_POSTGRESQL } cq_db_kind;

/* How long a SQLite statement waits for another connection's write lock before failing (the one busy timeout). */
#define CQ_DB_BUSY_TIMEOUT_MS 10000

/* ---- connections ---- */

/* Opens (creating when absent, mode 0600) the SQLite database at path: WAL, synchronous NORMAL, foreign keys on,
 * the busy timeout. The store (store/store.c) registers its functions and migrates. */
cq_status cq_db_sqlite_open(const char *path, cq_db **out, cq_err *err);
/* Connects to PostgreSQL (a libpq connection string or postgresql:// URI). CQ_ERR_DB when the server refuses;
 * messages never show the password (cq_db_where_redact). */
cq_status cq_db_pg_open(const char *conninfo, cq_db **out, cq_err *err);
void cq_db_close(cq_db *db);

cq_db_kind cq_db_kind_of(const cq_db *db);
sqlite3 *cq_db_sqlite(cq_db *db); /* the SQLite connection, NULL on PostgreSQL */
PGconn *cq_db_pg(cq_db *db);      /* the libpq connection (it changes when re-established), NULL on SQLite */

/* Is the connection usable? On PostgreSQL a connection the server closed is noticed without a round trip (its
 * socket reads end-of-file) and re-established, at most once per backoff interval (doubling from 250 ms to 5 s
 * while the server stays away): CQ_ERR_BUSY with reason "store_unreachable" and retry_after_s until it is back.
 * Always CQ_OK on SQLite. Call it when a pooled connection is taken. */
cq_status cq_db_check(cq_db *db, cq_err *err);

/* ---- transactions ---- */
cq_status cq_db_begin(cq_db *db, cq_err *err); /* SQLite: BEGIN IMMEDIATE (the write lock now) */
cq_status cq_db_commit(cq_db *db, cq_err *err);
void cq_db_rollback(cq_db *db); /* nothing when no transaction is open */
bool cq_db_in_transaction(cq_db *db);
/* Begins a transaction unless one is open (*own tells whether this call did); cq_db_end commits it when rc is
 * CQ_OK, rolls it back otherwise, and does nothing when the caller's transaction was open before. Returns rc, or the
 * commit's failure. */
cq_status cq_db_begin_own(cq_db *db, bool *own, cq_err *err);
cq_status cq_db_end(cq_db *db, bool own, cq_status rc, cq_err *err);

/* ---- statements ---- */
/* Runs sql without parameters (several statements allowed; DDL, PRAGMA, SET). */
cq_status cq_db_exec(cq_db *db, const char *sql, cq_err *err);
cq_status cq_db_prepare(cq_db *db, const char *sql, cq_db_stmt **st, cq_err *err);
/* Placeholders are numbered from 1. Text and blobs are copied. */
void cq_db_bind_int(cq_db_stmt *st, int i, int64_t v);
void cq_db_bind_double(cq_db_stmt *st, int i, double v);
void cq_db_bind_text(cq_db_stmt *st, int i, const char *s); /* NULL: SQL NULL */
void cq_db_bind_blob(cq_db_stmt *st, int i, const void *p, size_t n);
void cq_db_bind_null(cq_db_stmt *st, int i);

#define CQ_DB_ROW 1
#define CQ_DB_DONE 0
/* CQ_DB_ROW (a row to read), CQ_DB_DONE, or -1 with err set ("what: message"; code as above). After CQ_DB_DONE the
 * statement may be reset (cq_db_reset), bound again and stepped again. */
int cq_db_step(cq_db_stmt *st, const char *what, cq_err *err);
/* For a loop over the rows: false once *rc is set (nothing stepped), at the end, or on a failed step (*rc then set
 * from err); true with a row to read. */
bool cq_db_next(cq_db_stmt *st, const char *what, cq_status *rc, cq_err *err);
/* One step, for a statement of one row: CQ_OK with the row to read, CQ_ERR_NOT_FOUND ("what: not found") when there
 * is none, else the step's error. */
cq_status cq_db_row(cq_db_stmt *st, const char *what, cq_err *err);
void cq_db_reset(cq_db_stmt *st); /* keeps the bindings */
/* Column readers of the current row, columns numbered from 0. NULL reads as 0, 0.0, NULL. Pointers are valid until
 * the next step, reset or finalize. */
int64_t cq_db_col_int(cq_db_stmt *st, int col);
double cq_db_col_double(cq_db_stmt *st, int col);
bool cq_db_col_null(cq_db_stmt *st, int col);
const char *cq_db_col_text(cq_db_stmt *st, int col);
const void *cq_db_col_blob(cq_db_stmt *st, int col, size_t *n);
/* The one col_strdup: a malloc'd copy of a text column; NULL for SQL NULL, and when out of memory (tell the two
 * apart with cq_db_col_null). */
char *cq_db_col_strdup(cq_db_stmt *st, int col);
/* The text column copied into out (cap bytes, truncated at a UTF-8 boundary is not promised; "" for NULL). */
void cq_db_col_copy(cq_db_stmt *st, int col, char *out, size_t cap);
void cq_db_finalize(cq_db_stmt *st); /* NULL is fine */

/* The store's query shapes, each one call: sql prepared and its placeholders bound from a list of kinds as
 * cq_db_run's, failures prefixed "what: ".
 * cq_db_query: the statement, to step and finalize. cq_db_list: every row into a malloc'd array of elem_size-byte
 * elements (*out, *n; NULL and 0 for no rows): read fills one from the row (zeroed first) and returns false when out
 * of memory, leaving nothing in it to free; on a failure no element is kept (drop, may be NULL, frees each one read).
 * cq_db_one: the first row through read (out zeroed first): CQ_ERR_NOT_FOUND ("what: not found") when there is
 * none, CQ_ERR_NOMEM when read says so. cq_db_int: the first row's first column (CQ_ERR_NOT_FOUND: no row);
 * cq_db_ints: its first n columns into v[0..n) (zeros when it fails).
 * Every call finalizes its statement but cq_db_query's. */
cq_status cq_db_query(cq_db *db, const char *what, cq_db_stmt **st, cq_err *err, const char *sql, const char *kinds,
                      ...);
cq_status cq_db_list(cq_db *db, const char *what, size_t elem_size, bool (*read)(cq_db_stmt *st, void *elem),
                     void (*drop)(void *elem), void **out, size_t *n, cq_err *err, const char *sql, const char *kinds,
                     ...);
cq_status cq_db_one(cq_db *db, const char *what, bool (*read)(cq_db_stmt *st, void *elem), void *out, size_t size,
                    cq_err *err, const char *sql, const char *kinds, ...);
cq_status cq_db_int(cq_db *db, const char *what, int64_t *v, cq_err *err, const char *sql, const char *kinds, ...);
cq_status cq_db_ints(cq_db *db, const char *what, int64_t *v, int n, cq_err *err, const char *sql, const char *kinds,
                     ...);
cq_status cq_db_intv(cq_db *db, const char *what, int64_t *v, cq_err *err, const char *sql, const char *kinds,
                     va_list ap); /* the same with the values as a va_list */
/* Every row's first column as an int64 (*ids malloc'd; NULL and 0 for no rows). */
cq_status cq_db_ids(cq_db *db, const char *what, int64_t **ids, size_t *n, cq_err *err, const char *sql,
                    const char *kinds, ...);

/* head "(?k+1, …, ?k+m)" tail prepared, the k values of kinds bound first (as cq_db_query's), then the m ids: an IN
 * list (keep m to a few hundred). */
cq_status cq_db_prepare_in(cq_db *db, const char *what, cq_db_stmt **st, cq_err *err, const char *head,
                           const int64_t *ids, size_t m, const char *tail, const char *kinds, ...);

/* Rows changed by the last INSERT, UPDATE or DELETE stepped to its end on this connection. */
int64_t cq_db_changes(cq_db *db);

/* One statement, stepped to its end: prepare, bind (a printf-like list of kinds: 'i' int64, 't' text, 'd' double,
 * 'b' blob as two values (const void *, size_t), 'n' null: no value), step, finalize. *changed (may be NULL) gets the rows it changed. For the many one-line writes. */
cq_status cq_db_run(cq_db *db, const char *what, int64_t *changed, cq_err *err, const char *sql, const char *kinds,
                    ...);
cq_status cq_db_runv(cq_db *db, const char *what, int64_t *changed, cq_err *err, const char *sql, const char *kinds,
                     va_list ap); /* the same with the values as a va_list */

/* SQLite statements that must not wait for a lock (best-effort writes: a busy database neither fails nor delays
 * the request): busy timeout 0 while on, CQ_DB_BUSY_TIMEOUT_MS again when off. PostgreSQL's such statements say so
 * themselves (FOR UPDATE SKIP LOCKED, db/dialect.h): nothing to do there. */
void cq_db_nowait(cq_db *db, bool on);

/* Rows of st fetched one at a time rather than the whole result at once (PostgreSQL's single-row mode; SQLite
 * steps a row at a time anyway): for reads of hundreds of MB (a KB's vectors, an original's parts). Call before the
 * first step. The connection runs nothing else until st is stepped to its end, reset or finalized. */
void cq_db_stream(cq_db_stmt *st);

/* ---- bulk insert ---- */
/* Rows into table(columns) (columns: "a, b, c", n_columns of them), many at a time: SQLite steps one prepared INSERT
 * per row, PostgreSQL sends them with COPY. Bind each row's values with the cq_db_bind_* functions on the statement
 * cq_db_bulk_begin gives (columns numbered from 1), then cq_db_bulk_row; cq_db_bulk_end sends what is left and
 * frees the statement; given a failure (rc), it abandons the insert and returns rc. Rows may have been written
 * before (SQLite writes each at once): bulk-insert inside a transaction and roll it back on failure. Values:
 * integers, doubles, text, blobs, NULLs. */
cq_status cq_db_bulk_begin(cq_db *db, const char *table, const char *columns, int n_columns, cq_db_stmt **st,
                           cq_err *err);
cq_status cq_db_bulk_row(cq_db_stmt *st, cq_err *err);
cq_status cq_db_bulk_end(cq_db_stmt *st, cq_status rc, cq_err *err);

/* ---- PostgreSQL's notifications (the vector change feed, search/vector_feed.c) ----
 * On SQLite: no socket (-1), no notifications, always connected. */
int cq_db_socket(cq_db *db); /* to poll for what the server sends; -1 when not connected */
/* The notifications (LISTEN) received, dropped and counted into *n; read: first read what the socket holds (else
 * only those libpq already read while it waited for a result). false when the connection is lost. */
bool cq_db_notifications(cq_db *db, bool read, int *n);
bool cq_db_connected(cq_db *db);
bool cq_db_reconnect(cq_db *db); /* re-establishes the connection now; true when it is back */
int cq_db_backend_pid(cq_db *db); /* the server process of the connection (0 on SQLite) */
/* The connection's parameters as a connection string (malloc'd; NULL on SQLite or out of memory), for another
 * connection to the same database, with keepalives set where the string sets none (a silent TCP peer is given up
 * within about 20 s). */
char *cq_db_conninfo(cq_db *db);

/* ---- where a store is (`--store`, docs/SCALE.md) ---- */
/* "postgresql://…", "postgres://…" or a libpq "key=value …" string is PostgreSQL; "sqlite:PATH" or a plain path
 * is a SQLite file (cq_db_where_path gives the path). */
cq_db_kind cq_db_where_kind(const char *where);
const char *cq_db_where_path(const char *where); /* SQLite: where without its "sqlite:" */
/* where without its password (URI user:password@, password= parameters or keywords), for messages. */
void cq_db_where_redact(const char *where, char *out, size_t cap);
bool cq_db_where_has_password(const char *where);

#endif
