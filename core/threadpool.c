#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spin iterations before a waiting thread sleeps: about a millisecond with the yields below, longer than the gap
 * between two dispatches of one forward pass, far shorter than the gap between two requests. */
#define SPIN_ITERS 20000
/* A spinning thread gives up its CPU every YIELD_EVERY iterations (sched_yield returns at once when nothing else
 * waits for the CPU): on a loaded machine the thread it waits for may be queued behind it, and a decode step has
 * ~90 barriers. Measured on the shared 2-core dev box at load 6-7, 2-thread decode: 10 -> 13-18 tok/s, CPU per
 * token 48 -> 40 ms (yielding every 64 iterations: 11-15 tok/s). */
#define YIELD_EVERY 16

static inline void spin_wait(int spins) {
    if (spins % YIELD_EVERY == YIELD_EVERY - 1) sched_yield();
    else cpu_relax();
}

/* Work is claimed from one 64-bit word holding the run's generation (24 bits), its task count (20 bits) and the
 * next task (20 bits). A claim is a compare-and-swap on the whole word, checked against the count in that same
 * word: a worker that wakes late can never take a task of a run that has ended, nor of one being set up (its
 * count is not yet published). The caller waits for its tasks to be *done*, not for every worker to show up: a
 * worker the OS has descheduled holds up a run only if it has claimed one of its tasks. */
#define GEN_BITS 24
#define COUNT_BITS 20
#define MAX_TASKS ((1 << COUNT_BITS) - 1)
#define WORD(gen, count, next) ((uint64_t)(gen) << 40 | (uint64_t)(count) << 20 | (uint64_t)(next))
#define WORD_GEN(w) ((uint32_t)((w) >> 40))
#define WORD_COUNT(w) ((int)(((w) >> 20) & MAX_TASKS))
#define WORD_NEXT(w) ((int)((w) & MAX_TASKS))

struct cq_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    _Atomic uint64_t work;  /* WORD(generation, tasks, next task) */
    atomic_int n_done;      /* tasks of the current run finished */
    atomic_bool caller_sleeping;
    bool stop;
    /* the current run, written before its word is published */
    cq_pool_fn fn;
    void *ctx;
};

typedef struct {
    cq_pool *pool;
    int index;
} worker_arg;

/* Claims and runs tasks of generation gen until none is left. */
static void run_tasks(cq_pool *p, uint32_t gen, int thread) {
    for (;;) {
        uint64_t w = atomic_load(&p->work);
        if (WORD_GEN(w) != gen || WORD_NEXT(w) >= WORD_COUNT(w)) return;
        if (!atomic_compare_exchange_weak(&p->work, &w, w + 1)) continue;
        const int n_tasks = WORD_COUNT(w);
        p->fn(p->ctx, WORD_NEXT(w), thread);
        if (atomic_fetch_add(&p->n_done, 1) + 1 == n_tasks && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    cq_pool *p = wa->pool;
    int index = wa->index;
    free(wa);
    uint32_t seen = 0; /* generation 0 is never a run */
    for (;;) {
        int spins = 0;
        while (WORD_GEN(atomic_load(&p->work)) == seen && spins < SPIN_ITERS) spin_wait(spins++);
        pthread_mutex_lock(&p->mu);
        while (WORD_GEN(atomic_load(&p->work)) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        seen = WORD_GEN(atomic_load(&p->work));
        run_tasks(p, seen, index);
    }
}

cq_status cq_pool_new(int n_threads, cq_pool **out, cq_err *err) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    cq_pool *p = calloc(1, sizeof *p);
    if (!p) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->work, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->caller_sleeping, false);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        cq_pool_free(p);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (worker_arg){p, i};
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n_threads = i; /* join only the ones started */
            cq_pool_free(p);
            return cq_err_set(err, CQ_ERR_NOMEM, "cannot start worker thread %d", i);
        }
    }
    *out = p;
    return CQ_OK;
}

void cq_pool_free(cq_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int cq_pool_threads(const cq_pool *p) { return p->n_threads; }

void cq_pool_run(cq_pool *p, int n_tasks, cq_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1 || n_tasks > MAX_TASKS) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->n_done, 0);
    uint32_t gen = (WORD_GEN(atomic_load(&p->work)) + 1) & ((1u << GEN_BITS) - 1);
    if (gen == 0) gen = 1; /* 0 is the workers' initial value, never a run */
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->work, WORD(gen, n_tasks, 0));
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, gen, 0);
    int spins = 0;
    while (atomic_load(&p->n_done) < n_tasks && spins < SPIN_ITERS) spin_wait(spins++);
    if (atomic_load(&p->n_done) < n_tasks) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeping, true);
        while (atomic_load(&p->n_done) < n_tasks) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_sleeping, false);
        pthread_mutex_unlock(&p->mu);
    }
}
