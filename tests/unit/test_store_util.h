/* A scratch store for index/ tests (include after <cmocka.h>): a database under /tmp per test, documents with
 * hand-written clauses, counts by SQL. */
#ifndef CQ_TEST_STORE_UTIL_H
#define CQ_TEST_STORE_UTIL_H

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

static char test_db_path[256];

/* cmocka setup / teardown: *state is an open, empty store. */
static inline int test_store_setup(void **state) {
    snprintf(test_db_path, sizeof test_db_path, "/tmp/cq_test_store_%d.db", (int)getpid());
    unlink(test_db_path);
    cq_store *s = NULL;
    cq_err err = {0};
    if (cq_store_open(test_db_path, &s, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    *state = s;
    return 0;
}

static inline int test_store_teardown(void **state) {
    cq_store_close(*state);
    char p[300];
    unlink(test_db_path);
    snprintf(p, sizeof p, "%s-wal", test_db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", test_db_path);
    unlink(p);
    return 0;
}

/* What tests/store/conformance.h asks of a test that runs its bodies on this scratch store: the store, and another
 * connection to it. */
static inline cq_store *test_store_of(void **state) { return *state; }
static inline cq_store *test_store_reopen(void **state) {
    (void)state;
    cq_store *again = NULL;
    cq_err err = {0};
    if (cq_store_open(test_db_path, &again, &err)) fail_msg("%s", err.msg);
    return again;
}

static inline int64_t test_count(cq_store *s, const char *sql) {
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Adds a ready document with the given (label, label_key, path, text) clauses, one box each on page 1. */
static inline int64_t test_add_doc(cq_store *s, int64_t kb, const char *name, const char *title, const char *sha,
                                   const char *const (*clauses)[4], size_t n) {
    cq_err err = {0};
    int64_t doc;
    assert_int_equal(cq_store_begin(s, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, kb, name, name, "md", sha, 100, &doc, &err), CQ_OK);
    for (size_t i = 0; i < n; i++) {
        cq_store_box box = {10, 20, 300, 40, 1};
        cq_store_clause c = {.ord = (int)i, .kind = clauses[i][0] ? 1 : 3, .label = clauses[i][0],
                             .label_key = clauses[i][1], .path = clauses[i][2], .text = clauses[i][3],
                             .page_first = 1, .page_last = 1, .boxes = &box, .n_boxes = 1};
        assert_int_equal(cq_store_clause_add(s, kb, doc, title, &c, NULL, &err), CQ_OK);
    }
    assert_int_equal(cq_store_doc_finish(s, doc, CQ_DOC_READY, NULL, title, 1, (int)n, 1.0, "", &err), CQ_OK);
    assert_int_equal(cq_store_commit(s, &err), CQ_OK);
    return doc;
}

#endif
