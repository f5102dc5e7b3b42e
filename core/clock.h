/* The monotonic clock (CLOCK_MONOTONIC), for durations: stage timings, progress intervals, deadlines. Never for
 * dates (it starts at an arbitrary point). */
#ifndef CQ_CORE_CLOCK_H
#define CQ_CORE_CLOCK_H

/* Seconds since an arbitrary start, to the nanosecond. */
double cq_clock_seconds(void);

/* Milliseconds from t0 (a cq_clock_seconds value) to now. */
double cq_clock_ms_since(double t0);

#endif
