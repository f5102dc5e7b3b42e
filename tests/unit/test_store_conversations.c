/* store/conversations on SQLite: the conformance bodies of tests/store/conversations_bodies.h (which
 * tests/pg/test_store_backends_pg.c runs on both stores). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "index/store.h"
#include "test_store_util.h"

static cq_store *conf_store(void **state) { return *state; }
static cq_store *conf_reopen(void **state) {
    (void)state;
    cq_store *again = NULL;
    cq_err err = {0};
    if (cq_store_open(test_db_path, &again, &err)) fail_msg("%s", err.msg);
    return again;
}

#include "tests/store/conversations_bodies.h"

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(conf_conversations_turns, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_conversations_list_rename_delete, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_conversations_two_writers, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
