#include "core/latency.h"

#include <math.h>

/* 1-2-5 steps from half a millisecond to ten seconds, and 30 s: an ask's phases run from microseconds (a free lock)
 * to seconds (a long queue); an HTTP request (an upload, a streamed answer) can take tens of seconds. */
static const double BOUNDS[CQ_LAT_BUCKETS - 1] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                  0.2,    0.5,   1,     2,     5,    10,   30};

double cq_lat_bound(int i) { return i >= 0 && i < CQ_LAT_BUCKETS - 1 ? BOUNDS[i] : INFINITY; }

void cq_lat_hist_add(cq_lat_hist *h, double seconds) {
    if (!(seconds > 0)) seconds = 0; /* NaN too */
    int i = 0;
    while (i < CQ_LAT_BUCKETS - 1 && seconds > BOUNDS[i]) i++;
    h->bucket[i]++;
    h->count++;
    h->sum += seconds;
}

void cq_lat_hist_merge(cq_lat_hist *dst, const cq_lat_hist *src) {
    for (int i = 0; i < CQ_LAT_BUCKETS; i++) dst->bucket[i] += src->bucket[i];
    dst->count += src->count;
    dst->sum += src->sum;
}

void cq_lat_hist_prometheus(cq_strbuf *b, const char *name, const char *labels, const cq_lat_hist *h) {
    const char *sep = labels && labels[0] ? "," : "";
    if (!labels) labels = "";
    uint64_t cum = 0;
    for (int i = 0; i < CQ_LAT_BUCKETS; i++) {
        cum += h->bucket[i];
        if (i < CQ_LAT_BUCKETS - 1)
            cq_strbuf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, BOUNDS[i], (unsigned long long)cum);
        else
            cq_strbuf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    cq_strbuf_printf(b, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name, open, labels, close, h->sum, name, open,
                     labels, close, (unsigned long long)h->count);
}
