/* Knowledge bases, documents, pages and clauses (store/documents.c) on SQLite: the conformance bodies of
 * tests/store/documents_bodies.h and keyword_bodies.h, which tests/pg/test_store_backends_pg.c runs on both stores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/store.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/documents_bodies.h"
#include "tests/store/keyword_bodies.h"

#define ON_STORE(fn) cmocka_unit_test_setup_teardown(fn, test_store_setup, test_store_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        ON_STORE(conf_documents_kbs),
        ON_STORE(conf_documents_rows),
        ON_STORE(conf_documents_ensure_two_connections),
        ON_STORE(conf_documents_delete_rolled_back),
        ON_STORE(conf_clause_search),
        ON_STORE(conf_keyword_bm25),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
