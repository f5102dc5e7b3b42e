#include "core/clock.h"

#include <time.h>

double cq_clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cq_clock_ms_since(double t0) { return (cq_clock_seconds() - t0) * 1e3; }
