/* Latency histograms (core/latency.h): bucket edges (a value on a bound belongs to that bucket), merging, and the
 * Prometheus lines (cumulative buckets ending at +Inf = count). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/latency.h"

static void test_buckets(void **state) {
    (void)state;
    cq_lat_hist h = {0};
    assert_true(cq_lat_bound(0) == 0.0005);
    assert_true(cq_lat_bound(CQ_LAT_BUCKETS - 3) == 10);
    assert_true(cq_lat_bound(CQ_LAT_BUCKETS - 2) == 30);
    assert_true(isinf(cq_lat_bound(CQ_LAT_BUCKETS - 1)));
    cq_lat_hist_add(&h, 0);      /* bucket 0 */
    cq_lat_hist_add(&h, -1);     /* counted as 0 */
    cq_lat_hist_add(&h, 0.0005); /* on the first bound: bucket 0 */
    cq_lat_hist_add(&h, 0.0006); /* bucket 1 (<= 1 ms) */
    cq_lat_hist_add(&h, 0.03);   /* bucket 6 (<= 50 ms) */
    cq_lat_hist_add(&h, 11);     /* bucket 14 (<= 30 s) */
    cq_lat_hist_add(&h, 31);     /* +Inf */
    cq_lat_hist_add(&h, NAN);    /* counted as 0 */
    assert_int_equal(h.count, 8);
    assert_int_equal(h.bucket[0], 4);
    assert_int_equal(h.bucket[1], 1);
    assert_int_equal(h.bucket[6], 1);
    assert_int_equal(h.bucket[CQ_LAT_BUCKETS - 2], 1);
    assert_int_equal(h.bucket[CQ_LAT_BUCKETS - 1], 1);
    assert_true(fabs(h.sum - (0.0005 + 0.0006 + 0.03 + 11 + 31)) < 1e-12);
    cq_lat_hist g = {0};
    cq_lat_hist_add(&g, 0.03);
    cq_lat_hist_merge(&g, &h);
    assert_int_equal(g.count, 9);
    assert_int_equal(g.bucket[6], 2);
    assert_true(fabs(g.sum - h.sum - 0.03) < 1e-12);
}

static void test_prometheus(void **state) {
    (void)state;
    cq_lat_hist h = {0};
    cq_lat_hist_add(&h, 0.003);
    cq_lat_hist_add(&h, 0.004);
    cq_lat_hist_add(&h, 0.25);
    cq_strbuf b = {0};
    cq_lat_hist_prometheus(&b, "x_seconds", "phase=\"retrieve\"", &h);
    char *text = cq_strbuf_take(&b);
    assert_non_null(strstr(text, "x_seconds_bucket{phase=\"retrieve\",le=\"0.002\"} 0\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{phase=\"retrieve\",le=\"0.005\"} 2\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{phase=\"retrieve\",le=\"0.2\"} 2\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{phase=\"retrieve\",le=\"0.5\"} 3\n"));
    assert_non_null(strstr(text, "x_seconds_bucket{phase=\"retrieve\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(text, "x_seconds_sum{phase=\"retrieve\"} 0.257000\n"));
    assert_non_null(strstr(text, "x_seconds_count{phase=\"retrieve\"} 3\n"));
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, CQ_LAT_BUCKETS + 2);
    free(text);
    cq_lat_hist_prometheus(&b, "y", "", &h); /* no labels: no braces on sum and count */
    text = cq_strbuf_take(&b);
    assert_non_null(strstr(text, "y_bucket{le=\"10\"} 3\n"));
    assert_non_null(strstr(text, "y_sum 0.257000\ny_count 3\n"));
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_buckets), cmocka_unit_test(test_prometheus)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
