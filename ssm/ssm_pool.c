/* See ssm_pool.h. One run at a time: the caller publishes (fn, ctx, n_tasks), bumps the generation under the
 * lock and works too; each worker claims tasks from an atomic counter and, when none is left, checks out. The
 * caller returns when all workers have checked out of this generation. */
#include "ssm/ssm_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000

struct cq_ssm_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint generation;
    atomic_int next_task;
    atomic_int checked_out; /* workers that have left the current generation */
    bool stop;
    cq_ssm_pool_fn fn;
    void *ctx;
    int n_tasks;
};

static void run_tasks(cq_ssm_pool *p) {
    for (int t; (t = atomic_fetch_add(&p->next_task, 1)) < p->n_tasks;) p->fn(p->ctx, t);
}

static void *worker(void *arg) {
    cq_ssm_pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        for (int spins = 0; atomic_load(&p->generation) == seen && spins < SPIN_ITERS; spins++) cpu_relax();
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->generation) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        seen = atomic_load(&p->generation);
        run_tasks(p);
        if (atomic_fetch_add(&p->checked_out, 1) + 1 == p->n_threads - 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

cq_status cq_ssm_pool_new(int n_threads, cq_ssm_pool **out, cq_err *err) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    cq_ssm_pool *p = calloc(1, sizeof *p);
    if (!p) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n_threads = 1;
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p)) {
            cq_ssm_pool_free(p);
            return cq_err_set(err, CQ_ERR_NOMEM, "cannot start SSM worker thread %d", i);
        }
        p->n_threads = i + 1;
    }
    *out = p;
    return CQ_OK;
}

void cq_ssm_pool_free(cq_ssm_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

void cq_ssm_pool_run(cq_ssm_pool *p, int n_tasks, cq_ssm_pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    /* every worker checked out of the last run, so none reads these while they change */
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    atomic_store(&p->checked_out, 0);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p);
    const int workers = p->n_threads - 1;
    for (int spins = 0; atomic_load(&p->checked_out) < workers && spins < SPIN_ITERS; spins++) cpu_relax();
    if (atomic_load(&p->checked_out) < workers) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->checked_out) < workers) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
