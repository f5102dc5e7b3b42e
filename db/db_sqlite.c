/* The SQLite driver of db/db.h. SQL is SQLite's own, ?N placeholders included: statements go to SQLite as written. */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "db/db_internal.h"

typedef struct {
    cq_db base;
    sqlite3 *conn;
} lite_db;

typedef struct {
    cq_db_stmt base;
    sqlite3_stmt *st;
} lite_stmt;

static sqlite3 *conn_of(cq_db *db) { return ((lite_db *)db)->conn; }
static sqlite3_stmt *st_of(cq_db_stmt *st) { return ((lite_stmt *)st)->st; }

static cq_status lite_error(cq_db *db, cq_err *err, const char *what) {
    sqlite3 *c = conn_of(db);
    int code = sqlite3_extended_errcode(c);
    cq_status rc = code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY ? CQ_ERR_EXISTS : CQ_ERR_DB;
    return cq_err_set(err, rc, "%s: %s", what, sqlite3_errmsg(c));
}

static void lite_close(cq_db *db) {
    sqlite3_close(conn_of(db));
    free(db);
}

cq_status cq_db_sqlite_open(const char *path, cq_db **out, cq_err *err) {
    *out = NULL;
    lite_db *db = calloc(1, sizeof *db);
    if (!db) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    db->base.drv = &cq_db_sqlite_driver;
    /* A new database is private to its owner, like the originals: SQLite would create it 0644, and its -wal and
     * -shm files take the database file's mode. An empty file is an empty database. */
    int fd = strcmp(path, ":memory:") ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) close(fd);
    if (sqlite3_open_v2(path, &db->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        cq_err_set(err, CQ_ERR_DB, "cannot open database %s: %s", path,
                   db->conn ? sqlite3_errmsg(db->conn) : "out of memory");
        lite_close(&db->base);
        return CQ_ERR_DB;
    }
    sqlite3_busy_timeout(db->conn, CQ_DB_BUSY_TIMEOUT_MS);
    cq_status rc =
        cq_db_exec(&db->base, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err);
    if (rc) {
        cq_err_prefix(err, "database %s: ", path);
        cq_db_close(&db->base);
    } else {
        *out = &db->base;
    }
    return rc;
}

sqlite3 *cq_db_sqlite(cq_db *db) { return db && db->drv == &cq_db_sqlite_driver ? conn_of(db) : NULL; }

static cq_status lite_exec(cq_db *db, const char *sql, cq_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(conn_of(db), sql, NULL, NULL, &msg) != SQLITE_OK) {
        cq_err_set(err, CQ_ERR_DB, "%s", msg ? msg : sqlite3_errmsg(conn_of(db)));
        sqlite3_free(msg);
        return CQ_ERR_DB;
    }
    return CQ_OK;
}

static cq_status lite_begin(cq_db *db, cq_err *err) { return lite_exec(db, "BEGIN IMMEDIATE", err); }
static cq_status lite_commit(cq_db *db, cq_err *err) { return lite_exec(db, "COMMIT", err); }
static void lite_rollback(cq_db *db) {
    if (!sqlite3_get_autocommit(conn_of(db))) sqlite3_exec(conn_of(db), "ROLLBACK", NULL, NULL, NULL);
}
static bool lite_in_transaction(cq_db *db) { return !sqlite3_get_autocommit(conn_of(db)); }

static cq_status lite_prepare(cq_db *db, const char *sql, cq_db_stmt **out, cq_err *err) {
    lite_stmt *st = calloc(1, sizeof *st);
    if (!st) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    st->base.db = db;
    if (sqlite3_prepare_v2(conn_of(db), sql, -1, &st->st, NULL) != SQLITE_OK) {
        free(st);
        return lite_error(db, err, "prepare");
    }
    *out = &st->base;
    return CQ_OK;
}

static void lite_bind_int(cq_db_stmt *st, int i, int64_t v) { sqlite3_bind_int64(st_of(st), i, v); }
static void lite_bind_double(cq_db_stmt *st, int i, double v) { sqlite3_bind_double(st_of(st), i, v); }
static void lite_bind_text(cq_db_stmt *st, int i, const char *s) {
    if (s) sqlite3_bind_text(st_of(st), i, s, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st_of(st), i);
}
static void lite_bind_blob(cq_db_stmt *st, int i, const void *p, size_t n) {
    sqlite3_bind_blob64(st_of(st), i, n ? p : "", n, SQLITE_TRANSIENT);
}

static int lite_step(cq_db_stmt *st, const char *what, cq_err *err) {
    int rc = sqlite3_step(st_of(st));
    if (rc == SQLITE_ROW) return CQ_DB_ROW;
    if (rc == SQLITE_DONE) return CQ_DB_DONE;
    lite_error(st->db, err, what);
    return -1;
}

static void lite_reset(cq_db_stmt *st) { sqlite3_reset(st_of(st)); }
static int64_t lite_col_int(cq_db_stmt *st, int col) { return sqlite3_column_int64(st_of(st), col); }
static double lite_col_double(cq_db_stmt *st, int col) { return sqlite3_column_double(st_of(st), col); }
static bool lite_col_null(cq_db_stmt *st, int col) { return sqlite3_column_type(st_of(st), col) == SQLITE_NULL; }
static const char *lite_col_text(cq_db_stmt *st, int col) {
    return (const char *)sqlite3_column_text(st_of(st), col);
}
static const void *lite_col_blob(cq_db_stmt *st, int col, size_t *n) {
    const void *p = sqlite3_column_blob(st_of(st), col);
    *n = (size_t)sqlite3_column_bytes(st_of(st), col);
    return p;
}
static void lite_finalize(cq_db_stmt *st) {
    sqlite3_finalize(st_of(st));
    free(st);
}
static int64_t lite_changes(cq_db *db) { return sqlite3_changes64(conn_of(db)); }
static void lite_nowait(cq_db *db, bool on) { sqlite3_busy_timeout(conn_of(db), on ? 0 : CQ_DB_BUSY_TIMEOUT_MS); }

/* Bulk insert: one prepared INSERT stepped per row (SQLite has no faster path inside a transaction). */
static cq_status lite_bulk_begin(cq_db *db, const char *table, const char *columns, int n_columns, cq_db_stmt **out,
                                 cq_err *err) {
    cq_strbuf sql = {0};
    cq_strbuf_printf(&sql, "INSERT INTO %s(%s) VALUES(", table, columns);
    for (int i = 0; i < n_columns; i++) cq_strbuf_printf(&sql, "%s?%d", i ? ", " : "", i + 1);
    cq_strbuf_puts(&sql, ")");
    cq_status rc = sql.failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : lite_prepare(db, sql.data, out, err);
    cq_strbuf_free(&sql);
    return rc;
}

static cq_status lite_bulk_row(cq_db_stmt *st, cq_err *err) {
    int rc = lite_step(st, "bulk insert", err);
    sqlite3_reset(st_of(st));
    sqlite3_clear_bindings(st_of(st));
    return rc < 0 ? (err ? err->code : CQ_ERR_DB) : CQ_OK;
}

static cq_status lite_bulk_end(cq_db_stmt *st, cq_status rc, cq_err *err) {
    (void)err;
    lite_finalize(st);
    return rc;
}

const cq_db_driver cq_db_sqlite_driver = {
    .kind = CQ_DB_SQLITE,
    .close = lite_close,
    .exec = lite_exec,
    .begin = lite_begin,
    .commit = lite_commit,
    .rollback = lite_rollback,
    .in_transaction = lite_in_transaction,
    .prepare = lite_prepare,
    .bind_int = lite_bind_int,
    .bind_double = lite_bind_double,
    .bind_text = lite_bind_text,
    .bind_blob = lite_bind_blob,
    .step = lite_step,
    .reset = lite_reset,
    .col_int = lite_col_int,
    .col_double = lite_col_double,
    .col_null = lite_col_null,
    .col_text = lite_col_text,
    .col_blob = lite_col_blob,
    .finalize = lite_finalize,
    .changes = lite_changes,
    .nowait = lite_nowait,
    .bulk_begin = lite_bulk_begin,
    .bulk_row = lite_bulk_row,
    .bulk_end = lite_bulk_end,
};
