/* Latency histograms for /metrics (issue 15: where an ask's time goes under load; HTTP requests by route). Fixed
 * buckets from 0.5 ms to 30 s (Prometheus' cumulative `le` buckets are made when printed), the sum and the count. Not thread-safe: the
 * owner guards a histogram with the lock it already holds for its other numbers, so adding one is a few stores.
 *
 *   cq_lat_hist h = {0};
 *   cq_lat_hist_add(&h, seconds);
 *   cq_lat_hist_prometheus(&b, "clauseqa_ask_phase_seconds", "phase=\"retrieve\"", &h);
 */
#ifndef CQ_CORE_LATENCY_H
#define CQ_CORE_LATENCY_H

#include <stdint.h>

#include "core/strbuf.h"

#define CQ_LAT_BUCKETS 16 /* 15 upper bounds (cq_lat_bound) and +Inf */

typedef struct {
    uint64_t bucket[CQ_LAT_BUCKETS]; /* observations by bucket (not cumulative): bucket i holds values
                                      * <= cq_lat_bound(i) and > cq_lat_bound(i - 1) */
    uint64_t count;
    double sum; /* seconds */
} cq_lat_hist;

/* Upper bound of bucket i in seconds (0.0005, 0.001, 0.002, 0.005 ... 5, 10, 30); the last one is +Inf. */
double cq_lat_bound(int i);

/* Counts one observation (negative values count as 0). */
void cq_lat_hist_add(cq_lat_hist *h, double seconds);

/* dst += src. */
void cq_lat_hist_merge(cq_lat_hist *dst, const cq_lat_hist *src);

/* The histogram's lines in Prometheus' text format: name_bucket{labels,le="..."} (cumulative), name_sum{labels},
 * name_count{labels}. labels: "" or key="value" pairs without braces. The HELP and TYPE lines are the caller's. */
void cq_lat_hist_prometheus(cq_strbuf *b, const char *name, const char *labels, const cq_lat_hist *h);

#endif
