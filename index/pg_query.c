#include "index/pg_query.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/pg_rows.h"

void cq_pgq_text(cq_pgq_args *a, const char *s) {
    if (a->n < CQ_PGQ_MAX_ARGS) a->value[a->n++] = s;
}

void cq_pgq_int(cq_pgq_args *a, int64_t x) {
    if (a->n >= CQ_PGQ_MAX_ARGS) return;
    snprintf(a->number[a->n], sizeof a->number[a->n], "%lld", (long long)x);
    a->value[a->n] = a->number[a->n];
    a->n++;
}

/* The statements and readers are index/pg_rows.h's on the store's connection. */
cq_status cq_pgq_error(cq_pg *pg, cq_err *err, const char *what) { return cq_pgr_error(cq_pg_conn(pg), err, what); }

PGresult *cq_pgq_run(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, cq_err *err) {
    return cq_pgr_query(cq_pg_conn(pg), sql, a ? a->n : 0, a ? a->value : NULL, what, err);
}

cq_status cq_pgq_exec(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, int64_t *changed,
                      cq_err *err) {
    return cq_pgr_exec(cq_pg_conn(pg), sql, a ? a->n : 0, a ? a->value : NULL, what, changed, err);
}

cq_status cq_pgq_begin(cq_pg *pg, int *own, cq_err *err) {
    bool began = false;
    cq_status rc = cq_pgr_begin(cq_pg_conn(pg), &began, err);
    *own = began;
    return rc;
}

cq_status cq_pgq_end(cq_pg *pg, int own, cq_status rc, cq_err *err) { return cq_pgr_end(cq_pg_conn(pg), own, rc, err); }

int64_t cq_pgq_int64(const PGresult *r, int row, int col) { return cq_pgr_int64(r, row, col); }
int32_t cq_pgq_int32(const PGresult *r, int row, int col) { return cq_pgr_int32(r, row, col); }
int cq_pgq_bool(const PGresult *r, int row, int col) { return cq_pgr_bool(r, row, col); }

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
