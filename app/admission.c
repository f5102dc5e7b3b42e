/* Admission of asks (app/admission.h). Waiters queue in a list; a place given back goes straight to the head of the
 * list (it never becomes free for a newcomer to take first), and a waiter whose time runs out takes itself off. */
#include "app/admission.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "core/clock.h"

struct cq_admission_waiter {
    bool granted;
    cq_admission_waiter *next;
};

#define HOLD_MEAN_WEIGHT 0.1 /* of each new hold time in the running mean */

void cq_admission_init(cq_admission *a, int max_active, int max_waiting, double wait_s) {
    *a = (cq_admission){.max_active = max_active < 1 ? 1 : max_active,
                        .max_waiting = max_waiting < 0 ? 0 : max_waiting,
                        .wait_s = wait_s > 0 ? wait_s : CQ_ADMISSION_DEFAULT_WAIT_S};
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&a->turn, &attr);
    pthread_condattr_destroy(&attr);
}

void cq_admission_destroy(cq_admission *a) {
    pthread_cond_destroy(&a->turn);
    pthread_mutex_destroy(&a->lock);
}

/* Seconds until a place is likely free: the asks ahead (those waiting and this one) over the places, each taking the
 * mean hold time; at least 1. Under the lock. */
static int retry_after(const cq_admission *a) {
    double hold = a->mean_hold_s > 0 ? a->mean_hold_s : 1.0;
    double s = ceil(hold * (double)(a->waiting + 1) / (double)a->max_active);
    return s < 1 ? 1 : s > 3600 ? 3600 : (int)s;
}

static void unlink_waiter(cq_admission *a, cq_admission_waiter *w) {
    cq_admission_waiter **p = &a->head, *prev = NULL;
    while (*p && *p != w) prev = *p, p = &(*p)->next;
    if (!*p) return;
    *p = w->next;
    if (a->tail == w) a->tail = prev;
}

cq_status cq_admission_enter(cq_admission *a, double *held_since, cq_err *err) {
    pthread_mutex_lock(&a->lock);
    if (a->active < a->max_active && !a->head) {
        a->active++;
        a->admitted++;
        pthread_mutex_unlock(&a->lock);
        if (held_since) *held_since = cq_clock_seconds();
        return CQ_OK;
    }
    if (a->waiting >= a->max_waiting) {
        a->refused++;
        int after = retry_after(a);
        int active = a->active, waiting = a->waiting;
        pthread_mutex_unlock(&a->lock);
        cq_err_set(err, CQ_ERR_BUSY, "the server is answering %d questions and %d more are waiting: try again in %d s",
                   active, waiting, after);
        if (err) err->retry_after_s = after;
        return CQ_ERR_BUSY;
    }
    cq_admission_waiter w = {0};
    if (a->tail) a->tail->next = &w;
    else a->head = &w;
    a->tail = &w;
    a->waiting++;
    double t0 = cq_clock_seconds();
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = floor(a->wait_s);
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((a->wait_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
    int rc = 0;
    while (!w.granted && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&a->turn, &a->lock, &deadline);
    a->waiting--;
    if (!w.granted) {
        unlink_waiter(a, &w);
        a->refused++;
        a->timed_out++;
        int after = retry_after(a);
        pthread_mutex_unlock(&a->lock);
        cq_err_set(err, CQ_ERR_BUSY, "the server is busy: no place to answer within %.0f s; try again in %d s",
                   a->wait_s, after);
        if (err) err->retry_after_s = after;
        return CQ_ERR_BUSY;
    }
    double now = cq_clock_seconds();
    a->admitted++;
    a->wait_seconds += now - t0;
    pthread_mutex_unlock(&a->lock);
    if (held_since) *held_since = now;
    return CQ_OK;
}

void cq_admission_leave(cq_admission *a, double held_since) {
    double held = held_since > 0 ? cq_clock_seconds() - held_since : -1;
    pthread_mutex_lock(&a->lock);
    if (held >= 0)
        a->mean_hold_s = a->mean_hold_s > 0 ? (1 - HOLD_MEAN_WEIGHT) * a->mean_hold_s + HOLD_MEAN_WEIGHT * held : held;
    cq_admission_waiter *next = a->head;
    if (next) { /* the place goes to the first in line: active stays as it is */
        a->head = next->next;
        if (!a->head) a->tail = NULL;
        next->granted = true;
        pthread_cond_broadcast(&a->turn);
    } else if (a->active > 0) {
        a->active--;
    }
    pthread_mutex_unlock(&a->lock);
}

cq_admission_stats cq_admission_get_stats(cq_admission *a) {
    pthread_mutex_lock(&a->lock);
    cq_admission_stats s = {.active = a->active, .waiting = a->waiting, .admitted = a->admitted,
                            .refused = a->refused, .timed_out = a->timed_out, .wait_seconds = a->wait_seconds,
                            .mean_hold_s = a->mean_hold_s, .max_active = a->max_active,
                            .max_waiting = a->max_waiting};
    pthread_mutex_unlock(&a->lock);
    return s;
}
