/* libpq helpers for the index/ modules (pg_rows.h). */
#include "index/pg_rows.h"

#include <stdlib.h>
#include <string.h>

cq_status cq_pgr_error(PGconn *c, cq_err *err, const char *what) {
    const char *msg = PQerrorMessage(c);
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) len--;
    cq_status rc = cq_err_set(err, CQ_ERR_DB, "%s: %.*s", what, (int)len, msg);
    if (PQstatus(c) == CONNECTION_BAD) {
        /* the server went away: the caller is told to come back (503 + Retry-After over HTTP); db/db_pg.c
         * re-establishes the connection at its next check. The status returned stays CQ_ERR_DB. */
        cq_err_set_reason(err, CQ_ERR_BUSY, "store_unreachable", "%s: store unreachable: %.*s", what, (int)len, msg);
        if (err) err->retry_after_s = 1;
    }
    return rc;
}

PGresult *cq_pgr_query(PGconn *c, const char *sql, int n, const char *const *params, const char *what, cq_err *err) {
    PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 1);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    cq_pgr_error(c, err, what);
    PQclear(r);
    return NULL;
}

cq_status cq_pgr_exec(PGconn *c, const char *sql, int n, const char *const *params, const char *what, int64_t *changed,
                      cq_err *err) {
    PGresult *r = cq_pgr_query(c, sql, n, params, what, err);
    if (!r) return CQ_ERR_DB;
    if (changed) *changed = atoll(PQcmdTuples(r));
    PQclear(r);
    return CQ_OK;
}

int64_t cq_pgr_int64(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return (int64_t)v;
}

int32_t cq_pgr_int32(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

bool cq_pgr_bool(const PGresult *r, int row, int col) {
    return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] != 0;
}

cq_status cq_pgr_begin(PGconn *c, bool *began, cq_err *err) {
    *began = PQtransactionStatus(c) == PQTRANS_IDLE;
    return *began ? cq_pgr_exec(c, "BEGIN", 0, NULL, "begin", NULL, err) : CQ_OK;
}

cq_status cq_pgr_end(PGconn *c, bool began, cq_status rc, cq_err *err) {
    if (!began) return rc;
    if (!rc) {
        rc = cq_pgr_exec(c, "COMMIT", 0, NULL, "commit", NULL, err);
        if (!rc) return CQ_OK;
    }
    if (PQtransactionStatus(c) != PQTRANS_IDLE) PQclear(PQexec(c, "ROLLBACK"));
    return rc;
}
