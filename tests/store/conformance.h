/* The conformance bodies of the store/ modules (issue 28): each body is one cmocka test written against
 * store/store.h and store/ headers only, and runs unchanged on a SQLite store (tests/unit/test_store_*.c) and on both
 * stores (tests/pg/test_store_backends_pg.c). Include after <cmocka.h>, having defined
 *
 *   static cq_store *conf_store(void **state);   the store under test
 *   static cq_store *conf_reopen(void **state);  another connection to the same store (closed by the body)
 *
 * then the bodies' headers (keys_bodies.h, conversations_bodies.h). SQL the bodies run themselves (to age a row, to
 * count) goes through db/db.h, so it too is written once. */
#ifndef CQ_TESTS_STORE_CONFORMANCE_H
#define CQ_TESTS_STORE_CONFORMANCE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "store/store.h"

#define CONF_MAYBE_UNUSED __attribute__((unused))

/* call (a cq_status expression using a cq_err named err) must give want; the message when it does not. */
#define CONF_EXPECT(call, want)                                                                                     \
    do {                                                                                                            \
        cq_status conf_rc_ = (call);                                                                                \
        if (conf_rc_ != (want)) fail_msg("%s: %d, not %d: %s", #call, (int)conf_rc_, (int)(want), err.msg);         \
    } while (0)

/* Runs sql (no parameters) on s; fails the test when it fails. */
CONF_MAYBE_UNUSED static void conf_sql(cq_store *s, const char *sql) {
    cq_err err = {0};
    if (cq_db_exec(cq_store_conn(s), sql, &err)) fail_msg("%s: %s", sql, err.msg);
}

/* The first column of sql's first row, as an integer. */
CONF_MAYBE_UNUSED static int64_t conf_count(cq_store *s, const char *sql) {
    cq_err err = {0};
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s), sql, &st, &err)) fail_msg("%s: %s", sql, err.msg);
    if (cq_db_step(st, "count", &err) != CQ_DB_ROW) fail_msg("%s: no row (%s)", sql, err.msg);
    int64_t n = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    return n;
}

#endif
