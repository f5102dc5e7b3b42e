/* A small persistent thread pool for the CPU compute paths (the decoder's forward, the SSM encoder's fast
 * backend): `run` splits n_tasks over the workers and the calling thread and returns when all are done, after
 * which no worker touches that run's function or context. Dispatch is cheap (workers spin briefly, yielding,
 * before sleeping) because a decode step issues ~90 runs a token and an encoder block ~30 a layer.
 *
 * One `run` at a time per pool: callers serialize (the decoder holds its lock around a forward pass, an encoder
 * has its own pool and lock). */
#ifndef CQ_CORE_THREADPOOL_H
#define CQ_CORE_THREADPOOL_H

#include "core/error.h"

typedef struct cq_pool cq_pool;

/* fn(ctx, task, thread): task in [0, n_tasks), thread in [0, n_threads) (0 is the caller), for per-thread scratch. */
typedef void (*cq_pool_fn)(void *ctx, int task, int thread);

/* n_threads counts the caller: 1 runs everything inline. 0 picks the number of online CPUs. */
cq_status cq_pool_new(int n_threads, cq_pool **out, cq_err *err);
void cq_pool_free(cq_pool *p);
int cq_pool_threads(const cq_pool *p);
void cq_pool_run(cq_pool *p, int n_tasks, cq_pool_fn fn, void *ctx);

#endif
