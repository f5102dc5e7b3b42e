/* app/stack_floor.c (linked into this test as into clauseqa, tests/CMakeLists.txt): CivetWeb's threads get at least
 * the floor (1 MB, room for cuBLAS's static TLS), and every other request for a stack size is passed on unchanged
 * (until issue 28 the floor applied to the whole process). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <civetweb.h>
#include <pthread.h>
#include <unistd.h>

static void test_own_request_unchanged(void **state) {
    (void)state;
    pthread_attr_t a;
    size_t got = 0;
    assert_int_equal(pthread_attr_init(&a), 0);
    assert_int_equal(pthread_attr_setstacksize(&a, 256u << 10), 0);
    assert_int_equal(pthread_attr_getstacksize(&a, &got), 0);
    assert_int_equal(got, 256u << 10); /* not raised to the floor */
    assert_int_equal(pthread_attr_setstacksize(&a, 4u << 20), 0);
    assert_int_equal(pthread_attr_getstacksize(&a, &got), 0);
    assert_int_equal(got, 4u << 20);
    pthread_attr_destroy(&a);
}

static volatile size_t civetweb_stack;

static void *report_stack(void *arg) {
    (void)arg;
    pthread_attr_t a;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstacksize(&a, &size);
        pthread_attr_destroy(&a);
    }
    __atomic_store_n(&civetweb_stack, size ? size : 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_civetweb_threads_get_the_floor(void **state) {
    (void)state;
    /* mg_start_thread: a thread CivetWeb's library starts with its own fixed stack size (100 KB in Debian's) */
    assert_int_equal(mg_start_thread(report_stack, NULL), 0);
    for (int i = 0; i < 500 && !__atomic_load_n(&civetweb_stack, __ATOMIC_SEQ_CST); i++) usleep(10 * 1000);
    size_t size = __atomic_load_n(&civetweb_stack, __ATOMIC_SEQ_CST);
    assert_true(size >= (1u << 20));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_request_unchanged),
        cmocka_unit_test(test_civetweb_threads_get_the_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
