/* Small helpers over libpq for the index/ modules' PostgreSQL paths on a connection (vectors_pg.c,
 * vector_feed.c, store_pg.c): statements with text parameters and binary results,
 * as index/store_pg.c sends them, and the reading of binary integers. Errors become CQ_ERR_DB with the server's
 * message. */
#ifndef CQ_INDEX_PG_ROWS_H
#define CQ_INDEX_PG_ROWS_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Runs sql with n text parameters (NULL entries are SQL NULLs), results in binary; NULL, with err filled ("what:
 * message"), unless it succeeded. */
PGresult *cq_pgr_query(PGconn *c, const char *sql, int n, const char *const *params, const char *what, cq_err *err);
/* The same for statements without a result; *changed (may be NULL) gets the number of rows changed. */
cq_status cq_pgr_exec(PGconn *c, const char *sql, int n, const char *const *params, const char *what, int64_t *changed,
                      cq_err *err);
cq_status cq_pgr_error(PGconn *c, cq_err *err, const char *what);

int64_t cq_pgr_int64(const PGresult *r, int row, int col); /* bigint, binary; 0 when NULL */
int32_t cq_pgr_int32(const PGresult *r, int row, int col); /* integer, binary; 0 when NULL */
bool cq_pgr_bool(const PGresult *r, int row, int col);     /* boolean, binary; false when NULL */

/* Starts a transaction when none is open (*began tells whether this call did); cq_pgr_end commits it (rc == CQ_OK)
 * or rolls it back, and does nothing when the caller's transaction was open before. Returns rc, or the commit's
 * failure. */
cq_status cq_pgr_begin(PGconn *c, bool *began, cq_err *err);
cq_status cq_pgr_end(PGconn *c, bool began, cq_status rc, cq_err *err);

#endif
