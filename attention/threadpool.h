/* A small persistent thread pool for the CPU forward: `run` splits n_tasks over the workers and the calling thread
 * and returns when all are done. Dispatch is cheap (workers spin briefly before sleeping) because a decode step
 * issues ~150 of them per token.
 *
 * Lives in attention/ for now; it belongs in core/ once another module needs one. One `run` at a time per pool:
 * callers serialize (the decoder holds its lock around a forward pass). */
#ifndef CQ_ATTENTION_THREADPOOL_H
#define CQ_ATTENTION_THREADPOOL_H

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
