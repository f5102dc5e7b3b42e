#include "index/pg_query.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cq_pgq_text(cq_pgq_args *a, const char *s) {
    if (a->n < CQ_PGQ_MAX_ARGS) a->value[a->n++] = s;
}

void cq_pgq_int(cq_pgq_args *a, int64_t x) {
    if (a->n >= CQ_PGQ_MAX_ARGS) return;
    snprintf(a->number[a->n], sizeof a->number[a->n], "%lld", (long long)x);
    a->value[a->n] = a->number[a->n];
    a->n++;
}

cq_status cq_pgq_error(cq_pg *pg, cq_err *err, const char *what) {
    const char *msg = PQerrorMessage(cq_pg_conn(pg));
    size_t len = strlen(msg);
    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) len--;
    return cq_err_set(err, CQ_ERR_DB, "%s: %.*s", what, (int)len, msg);
}

PGresult *cq_pgq_run(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, cq_err *err) {
    PGresult *r = PQexecParams(cq_pg_conn(pg), sql, a ? a->n : 0, NULL, a ? a->value : NULL, NULL, NULL, 1);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    cq_pgq_error(pg, err, what);
    PQclear(r);
    return NULL;
}

cq_status cq_pgq_exec(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, int64_t *changed,
                      cq_err *err) {
    PGresult *r = cq_pgq_run(pg, sql, a, what, err);
    if (!r) return CQ_ERR_DB;
    if (changed) *changed = atoll(PQcmdTuples(r));
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pgq_begin(cq_pg *pg, int *own, cq_err *err) {
    *own = PQtransactionStatus(cq_pg_conn(pg)) == PQTRANS_IDLE;
    return *own ? cq_pgq_exec(pg, "BEGIN", NULL, "begin", NULL, err) : CQ_OK;
}

cq_status cq_pgq_end(cq_pg *pg, int own, cq_status rc, cq_err *err) {
    if (!own) return rc;
    if (!rc) rc = cq_pgq_exec(pg, "COMMIT", NULL, "commit", NULL, err);
    if (rc && PQtransactionStatus(cq_pg_conn(pg)) != PQTRANS_IDLE) PQclear(PQexec(cq_pg_conn(pg), "ROLLBACK"));
    return rc;
}

int64_t cq_pgq_int64(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return (int64_t)v;
}

int32_t cq_pgq_int32(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

int cq_pgq_bool(const PGresult *r, int row, int col) {
    return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] != 0;
}

char *cq_pgq_strdup(const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return NULL;
    int len = PQgetlength(r, row, col);
    char *s = malloc((size_t)len + 1);
    if (s) {
        memcpy(s, PQgetvalue(r, row, col), (size_t)len);
        s[len] = 0;
    }
    return s;
}

const char *cq_pgq_str(const PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
}
