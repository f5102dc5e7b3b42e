/* store/jobs and store/job_claim on SQLite: the conformance bodies of tests/store/jobs_bodies.h (which
 * tests/pg/test_store_backends_pg.c runs on both stores). SQLite's queue is the node's own: the claim bodies check
 * that it refuses claims, then skip the shared queue's checks. */
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
#include "tests/store/jobs_bodies.h"

#define ON_STORE(fn) cmocka_unit_test_setup_teardown(fn, test_store_setup, test_store_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conf_jobs_states),       ON_STORE(conf_jobs_rows),
        ON_STORE(conf_jobs_unknown_state),        ON_STORE(conf_jobs_page_list),
        ON_STORE(conf_jobs_claim_race),           ON_STORE(conf_jobs_lease_takeover),
        ON_STORE(conf_jobs_cancel_request_and_renew), ON_STORE(conf_jobs_share_upload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
