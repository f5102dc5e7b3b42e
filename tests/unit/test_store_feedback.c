/* store/feedback on SQLite: the conformance bodies of tests/store/feedback_bodies.h (which
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

#include "store/store.h"
#include "test_store_util.h"

#define conf_store test_store_of
#define conf_reopen test_store_reopen
#include "tests/store/feedback_bodies.h"

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(conf_feedback_rate, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_feedback_rated_export, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_quality_days, test_store_setup, test_store_teardown),
        cmocka_unit_test_setup_teardown(conf_conversations_search, test_store_setup, test_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
