/* The driver table behind db/db.h: what each of db_sqlite.c and db_pg.c implements. db.c dispatches to it and keeps
 * what the two share (the placeholder rewriting, cq_db_run, the column conveniences). Not for use outside db/. */
#ifndef CQ_DB_DB_INTERNAL_H
#define CQ_DB_DB_INTERNAL_H

#include "db/db.h"

typedef struct cq_db_driver {
    cq_db_kind kind;
    void (*close)(cq_db *db);
    cq_status (*check)(cq_db *db, cq_err *err); /* NULL: always usable (SQLite) */
    cq_status (*exec)(cq_db *db, const char *sql, cq_err *err);
    cq_status (*begin)(cq_db *db, cq_err *err);
    cq_status (*commit)(cq_db *db, cq_err *err);
    void (*rollback)(cq_db *db);
    bool (*in_transaction)(cq_db *db);
    cq_status (*prepare)(cq_db *db, const char *sql, cq_db_stmt **st, cq_err *err);
    void (*bind_int)(cq_db_stmt *st, int i, int64_t v);
    void (*bind_double)(cq_db_stmt *st, int i, double v);
    void (*bind_text)(cq_db_stmt *st, int i, const char *s); /* NULL: SQL NULL (cq_db_bind_null) */
    void (*bind_blob)(cq_db_stmt *st, int i, const void *p, size_t n);
    int (*step)(cq_db_stmt *st, const char *what, cq_err *err);
    void (*reset)(cq_db_stmt *st);
    int64_t (*col_int)(cq_db_stmt *st, int col);
    double (*col_double)(cq_db_stmt *st, int col);
    bool (*col_null)(cq_db_stmt *st, int col);
    const char *(*col_text)(cq_db_stmt *st, int col);
    const void *(*col_blob)(cq_db_stmt *st, int col, size_t *n);
    void (*finalize)(cq_db_stmt *st);
    int64_t (*changes)(cq_db *db);
    void (*nowait)(cq_db *db, bool on); /* NULL: statements say so themselves (PostgreSQL) */
    cq_status (*bulk_begin)(cq_db *db, const char *table, const char *columns, int n_columns, cq_db_stmt **st,
                            cq_err *err);
    cq_status (*bulk_row)(cq_db_stmt *st, cq_err *err);
    cq_status (*bulk_end)(cq_db_stmt *st, cq_status rc, cq_err *err);
    void (*stream)(cq_db_stmt *st); /* NULL: rows are stepped one at a time anyway (SQLite) */
} cq_db_driver;

/* Every connection and statement starts with these. */
struct cq_db {
    const cq_db_driver *drv;
};
struct cq_db_stmt {
    cq_db *db;
};

extern const cq_db_driver cq_db_sqlite_driver;
extern const cq_db_driver cq_db_pg_driver;

/* sql with ?N placeholders as PostgreSQL's $N (outside quoted strings and identifiers); *max_param gets the highest
 * N. malloc'd; NULL when out of memory. */
char *cq_db_rewrite_placeholders(const char *sql, int *max_param);

#endif
