/* Small helpers for the index/ modules' PostgreSQL statements (jobs_pg.c, keys_pg.c, conversations_pg.c): parameters
 * sent as text, results read in binary (integers in network order, text as its bytes), as store_pg.c does. */
#ifndef CQ_INDEX_PG_QUERY_H
#define CQ_INDEX_PG_QUERY_H

#include <stdint.h>

#include "core/error.h"
#include "index/store_pg.h"

typedef struct pg_result PGresult;

#define CQ_PGQ_MAX_ARGS 12

/* A statement's parameters $1..$n in order. Numbers are formatted into the struct itself: do not copy it. */
typedef struct {
    const char *value[CQ_PGQ_MAX_ARGS];
    char number[CQ_PGQ_MAX_ARGS][24];
    int n;
} cq_pgq_args;

void cq_pgq_text(cq_pgq_args *a, const char *s); /* NULL: SQL NULL */
void cq_pgq_int(cq_pgq_args *a, int64_t x);

/* Runs sql with a's parameters (a may be NULL); the result when the statement succeeded, else NULL with err set
 * ("what: the server's message"). */
PGresult *cq_pgq_run(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, cq_err *err);
/* The same for a statement whose result is not read; *changed (may be NULL) gets the rows it changed. */
cq_status cq_pgq_exec(cq_pg *pg, const char *sql, const cq_pgq_args *a, const char *what, int64_t *changed,
                      cq_err *err);
cq_status cq_pgq_error(cq_pg *pg, cq_err *err, const char *what);

/* Transactions on this connection: begin unless one is open already (*own tells whether this call opened it), and
 * the matching commit or rollback when *own. */
cq_status cq_pgq_begin(cq_pg *pg, int *own, cq_err *err);
cq_status cq_pgq_end(cq_pg *pg, int own, cq_status rc, cq_err *err);

int64_t cq_pgq_int64(const PGresult *r, int row, int col);  /* bigint column; 0 when NULL */
int32_t cq_pgq_int32(const PGresult *r, int row, int col);  /* integer column; 0 when NULL */
int cq_pgq_bool(const PGresult *r, int row, int col);       /* boolean column; 0 when NULL */
char *cq_pgq_strdup(const PGresult *r, int row, int col);   /* NULL when NULL (or out of memory) */
const char *cq_pgq_str(const PGresult *r, int row, int col); /* "" when NULL; the result's own bytes */

#endif
