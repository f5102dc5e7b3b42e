/* app/login_limit.h: failed sign-ins held back per name and per address, backing off, forgotten after a success or
 * an hour, bounded in memory. The clock is the test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "app/login_limit.h"

static void test_per_user(void **state) {
    (void)state;
    cq_login_limit l;
    cq_login_limit_init(&l);
    double t = 1000;
    for (int i = 0; i < CQ_LOGIN_USER_FAILURES - 1; i++) {
        cq_login_limit_failed(&l, "alice", "10.0.0.1", t);
        assert_int_equal(cq_login_limit_wait(&l, "alice", "10.0.0.1", t), 0);
    }
    cq_login_limit_failed(&l, "alice", "10.0.0.2", t); /* the fifth, from elsewhere: the name counts */
    assert_int_equal(cq_login_limit_wait(&l, "alice", "10.0.0.9", t), CQ_LOGIN_BACKOFF_FIRST_S);
    assert_int_equal(cq_login_limit_wait(&l, "bob", "10.0.0.1", t), 0); /* another name from the same address */
    /* after the wait it may try again; another failure doubles the wait, and again */
    t += CQ_LOGIN_BACKOFF_FIRST_S;
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 0);
    cq_login_limit_failed(&l, "alice", NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 2 * CQ_LOGIN_BACKOFF_FIRST_S);
    t += 0.5;
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 2 * CQ_LOGIN_BACKOFF_FIRST_S); /* rounded up */
    t += 2 * CQ_LOGIN_BACKOFF_FIRST_S;
    cq_login_limit_failed(&l, "alice", NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 4 * CQ_LOGIN_BACKOFF_FIRST_S);
    /* at most the cap, however many */
    for (int i = 0; i < 40; i++) cq_login_limit_failed(&l, "alice", NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), CQ_LOGIN_BACKOFF_MAX_S);
    /* a success forgets the name's failures */
    cq_login_limit_succeeded(&l, "alice");
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 0);
    cq_login_limit_failed(&l, "alice", NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, "alice", NULL, t), 0);
    cq_login_limit_destroy(&l);
}

static void test_per_address_and_forgetting(void **state) {
    (void)state;
    cq_login_limit l;
    cq_login_limit_init(&l);
    double t = 50;
    char name[32];
    for (int i = 0; i < CQ_LOGIN_ADDR_FAILURES; i++) {
        snprintf(name, sizeof name, "user%d", i); /* a different name each time: a spray from one address */
        assert_int_equal(cq_login_limit_wait(&l, name, "192.0.2.7", t), 0);
        cq_login_limit_failed(&l, name, "192.0.2.7", t);
    }
    assert_int_equal(cq_login_limit_wait(&l, "anyone", "192.0.2.7", t), CQ_LOGIN_BACKOFF_FIRST_S);
    assert_int_equal(cq_login_limit_wait(&l, "anyone", "192.0.2.8", t), 0);
    /* a success of one name does not clear the address */
    cq_login_limit_succeeded(&l, "user3");
    assert_int_equal(cq_login_limit_wait(&l, NULL, "192.0.2.7", t), CQ_LOGIN_BACKOFF_FIRST_S);
    /* an hour after the last failure (and the wait over), all is forgotten */
    for (int i = 0; i < CQ_LOGIN_USER_FAILURES; i++) cq_login_limit_failed(&l, "carol", NULL, t);
    assert_true(cq_login_limit_wait(&l, "carol", NULL, t) > 0);
    t += CQ_LOGIN_FORGET_S + 1;
    assert_int_equal(cq_login_limit_wait(&l, "carol", "192.0.2.7", t), 0);
    cq_login_limit_failed(&l, "carol", NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, "carol", NULL, t), 0); /* counting starts again */
    cq_login_limit_destroy(&l);
}

static void test_bounded(void **state) {
    (void)state;
    cq_login_limit l;
    cq_login_limit_init(&l);
    char name[32];
    for (int i = 0; i < CQ_LOGIN_TRACKED * 2; i++) {
        snprintf(name, sizeof name, "n%d", i);
        cq_login_limit_failed(&l, name, NULL, (double)i);
    }
    assert_int_equal(l.n, CQ_LOGIN_TRACKED);
    /* the newest are kept, and still count */
    snprintf(name, sizeof name, "n%d", CQ_LOGIN_TRACKED * 2 - 1);
    double t = CQ_LOGIN_TRACKED * 2;
    for (int i = 0; i < CQ_LOGIN_USER_FAILURES - 1; i++) cq_login_limit_failed(&l, name, NULL, t);
    assert_int_equal(cq_login_limit_wait(&l, name, NULL, t), CQ_LOGIN_BACKOFF_FIRST_S);
    assert_int_equal(l.n, CQ_LOGIN_TRACKED);
    cq_login_limit_destroy(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_user),
        cmocka_unit_test(test_per_address_and_forgetting),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
