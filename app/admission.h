/* Admission of asks (issue 15): at most max_active asks are answered at once (each holds a decoder sequence and its
 * KV cache while it writes, so this bounds the memory answers take); up to max_waiting more wait their turn, first
 * come first served, for at most wait_s seconds; past that an ask is refused at once with CQ_ERR_BUSY and a time to
 * try again (HTTP 503 + Retry-After). Numbers for /metrics: active, waiting, admitted, refused, the time spent
 * waiting, and a running mean of how long an admitted ask holds its place (the basis of the retry time).
 *
 *   cq_admission a;  cq_admission_init(&a, 8, 64, 30);
 *   if (cq_admission_enter(&a, &err)) return err.code;   // 503 with err.retry_after_s
 *   ... answer ...
 *   cq_admission_leave(&a);
 */
#ifndef CQ_APP_ADMISSION_H
#define CQ_APP_ADMISSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#define CQ_ADMISSION_DEFAULT_ACTIVE 8
#define CQ_ADMISSION_DEFAULT_WAITING 256
#define CQ_ADMISSION_DEFAULT_WAIT_S 30

typedef struct {
    int active, waiting;         /* now */
    uint64_t admitted, refused;  /* since the start (refused: queue full, or waited past wait_s) */
    uint64_t timed_out;          /* of refused: waited past wait_s */
    double wait_seconds;         /* total time admitted asks waited */
    double mean_hold_s;          /* running mean of how long an admitted ask holds its place */
    int max_active, max_waiting; /* the limits */
} cq_admission_stats;

typedef struct cq_admission_waiter cq_admission_waiter;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t turn;
    int max_active, max_waiting;
    double wait_s;
    int active, waiting;
    cq_admission_waiter *head, *tail; /* first come, first served: a place given back goes to the head */
    uint64_t admitted, refused, timed_out;
    double wait_seconds, mean_hold_s;
} cq_admission;

/* max_active >= 1; max_waiting >= 0; wait_s > 0. */
void cq_admission_init(cq_admission *a, int max_active, int max_waiting, double wait_s);
void cq_admission_destroy(cq_admission *a);

/* Takes a place, waiting for one when all are taken and the queue has room. CQ_ERR_BUSY (err->retry_after_s set,
 * at least 1) when the queue is full or the wait ran out. On CQ_OK, *held_since (may be NULL) is the time the place
 * was taken, for cq_admission_leave's mean. */
cq_status cq_admission_enter(cq_admission *a, double *held_since, cq_err *err);

/* Gives the place back; held_since from cq_admission_enter (0: not counted in the mean). */
void cq_admission_leave(cq_admission *a, double held_since);

cq_admission_stats cq_admission_get_stats(cq_admission *a);

#endif
