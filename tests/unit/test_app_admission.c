/* app/admission.h: places taken at once up to the limit, a queue served first come first served, refusals with a
 * retry time when the queue is full or the wait runs out, and the numbers /metrics shows. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/admission.h"
#include "core/clock.h"

static void test_limits_and_refusal(void **state) {
    (void)state;
    cq_admission a;
    cq_admission_init(&a, 2, 0, 1.0);
    cq_err err = {0};
    double h1 = 0, h2 = 0, h3 = 0;
    assert_int_equal(cq_admission_enter(&a, &h1, &err), CQ_OK);
    assert_int_equal(cq_admission_enter(&a, &h2, &err), CQ_OK);
    assert_true(h1 > 0 && h2 >= h1);
    double t0 = cq_clock_seconds();
    assert_int_equal(cq_admission_enter(&a, &h3, &err), CQ_ERR_BUSY); /* no queue: refused at once */
    assert_true(cq_clock_seconds() - t0 < 0.5);
    assert_int_equal(err.code, CQ_ERR_BUSY);
    assert_true(err.retry_after_s >= 1);
    assert_non_null(strstr(err.msg, "try again"));
    cq_admission_stats s = cq_admission_get_stats(&a);
    assert_int_equal(s.active, 2);
    assert_int_equal(s.admitted, 2);
    assert_int_equal(s.refused, 1);
    assert_int_equal(s.timed_out, 0);
    cq_admission_leave(&a, h1);
    assert_int_equal(cq_admission_enter(&a, &h3, &err), CQ_OK); /* a place given back is free again */
    cq_admission_leave(&a, h2);
    cq_admission_leave(&a, h3);
    s = cq_admission_get_stats(&a);
    assert_int_equal(s.active, 0);
    assert_true(s.mean_hold_s >= 0);
    cq_admission_destroy(&a);
}

typedef struct {
    cq_admission *a;
    int id;
    int *order, *n_order;
    pthread_mutex_t *lock;
    cq_status rc;
    double hold_s;
} waiter_arg;

static void *waiter(void *p) {
    waiter_arg *w = p;
    cq_err err = {0};
    double held = 0;
    w->rc = cq_admission_enter(w->a, &held, &err);
    if (w->rc == CQ_OK) {
        pthread_mutex_lock(w->lock);
        w->order[(*w->n_order)++] = w->id;
        pthread_mutex_unlock(w->lock);
        usleep((useconds_t)(w->hold_s * 1e6));
        cq_admission_leave(w->a, held);
    }
    return NULL;
}

static void wait_for_waiting(cq_admission *a, int n) {
    for (int i = 0; i < 2000 && cq_admission_get_stats(a).waiting < n; i++) usleep(1000);
    assert_int_equal(cq_admission_get_stats(a).waiting, n);
}

static void test_first_come_first_served(void **state) {
    (void)state;
    cq_admission a;
    cq_admission_init(&a, 1, 3, 10.0);
    cq_err err = {0};
    double held = 0;
    assert_int_equal(cq_admission_enter(&a, &held, &err), CQ_OK);
    int order[3], n_order = 0;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    waiter_arg args[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) { /* they queue in this order */
        args[i] = (waiter_arg){&a, i, order, &n_order, &lock, CQ_ERR_INTERNAL, 0.02};
        pthread_create(&t[i], NULL, waiter, &args[i]);
        wait_for_waiting(&a, i + 1);
    }
    /* the queue holds 3: a fourth is refused at once, even though places will come */
    cq_err e4 = {0};
    assert_int_equal(cq_admission_enter(&a, NULL, &e4), CQ_ERR_BUSY);
    assert_true(e4.retry_after_s >= 1);
    assert_int_equal(cq_admission_get_stats(&a).active, 1);
    cq_admission_leave(&a, held);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    assert_int_equal(n_order, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(args[i].rc, CQ_OK);
        assert_int_equal(order[i], i);
    }
    cq_admission_stats s = cq_admission_get_stats(&a);
    assert_int_equal(s.admitted, 4);
    assert_int_equal(s.refused, 1);
    assert_int_equal(s.active, 0);
    assert_int_equal(s.waiting, 0);
    assert_true(s.wait_seconds > 0);
    assert_true(s.mean_hold_s > 0.005);
    cq_admission_destroy(&a);
}

static void test_wait_runs_out(void **state) {
    (void)state;
    cq_admission a;
    cq_admission_init(&a, 1, 2, 0.2);
    cq_err err = {0};
    double held = 0;
    assert_int_equal(cq_admission_enter(&a, &held, &err), CQ_OK);
    double t0 = cq_clock_seconds();
    cq_err e2 = {0};
    assert_int_equal(cq_admission_enter(&a, NULL, &e2), CQ_ERR_BUSY);
    double waited = cq_clock_seconds() - t0;
    assert_true(waited >= 0.19 && waited < 2.0);
    assert_true(e2.retry_after_s >= 1);
    cq_admission_stats s = cq_admission_get_stats(&a);
    assert_int_equal(s.timed_out, 1);
    assert_int_equal(s.refused, 1);
    assert_int_equal(s.waiting, 0);
    /* the waiter that gave up is off the queue: the place given back is free for a newcomer */
    cq_admission_leave(&a, held);
    assert_int_equal(cq_admission_get_stats(&a).active, 0);
    assert_int_equal(cq_admission_enter(&a, &held, &err), CQ_OK);
    cq_admission_leave(&a, held);
    cq_admission_destroy(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_and_refusal),
        cmocka_unit_test(test_first_come_first_served),
        cmocka_unit_test(test_wait_runs_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
