/* The CPU thread pool (the decoder's forward, the SSM encoder's fast backend): every task of every run executes exactly once, whatever the number of tasks, with
 * callers taking turns from several threads (as sequences sharing a model do). A late worker once took a task of
 * the next run before that run was published and executed it twice: the in-place update below catches that. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/threadpool.h"

#define MAX_TASKS 300

typedef struct {
    int counts[MAX_TASKS];
    uint64_t values[MAX_TASKS];
} run_state;

static void task(void *ctx, int t, int thread) {
    run_state *r = ctx;
    (void)thread;
    __atomic_add_fetch(&r->counts[t], 1, __ATOMIC_RELAXED);
    r->values[t] = r->values[t] * 3 + 1; /* not idempotent: a second execution shows */
}

static cq_pool *pool;
static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

static void *caller(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    run_state *r = malloc(sizeof *r);
    for (int iter = 0; iter < 3000; iter++) {
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)((seed >> 16) % MAX_TASKS);
        memset(r, 0, sizeof *r);
        pthread_mutex_lock(&turn);
        cq_pool_run(pool, n, task, r);
        pthread_mutex_unlock(&turn);
        for (int t = 0; t < n; t++) {
            if (r->counts[t] != 1 || r->values[t] != 1) {
                fprintf(stderr, "run %d of %d tasks: task %d ran %d times\n", iter, n, t, r->counts[t]);
                abort();
            }
        }
        for (int t = n; t < MAX_TASKS; t++) assert_int_equal(r->counts[t], 0);
    }
    free(r);
    return NULL;
}

static void test_each_task_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 3; threads++) {
        cq_err err = {0};
        assert_int_equal(cq_pool_new(threads, &pool, &err), CQ_OK);
        assert_int_equal(cq_pool_threads(pool), threads);
        pthread_t th[3];
        for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&th[i], NULL, caller, (void *)(uintptr_t)(i + 1)), 0);
        for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
        cq_pool_free(pool);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_each_task_once)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
