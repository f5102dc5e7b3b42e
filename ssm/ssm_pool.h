/* The fast CPU backend's worker threads: a run hands n tasks to the workers and the caller, and returns only once
 * every worker has left the run, so no worker can still be reading a finished run's job when the next starts.
 * Workers spin briefly, then sleep; a block issues ~30 runs per layer.
 *
 * (attention/ has a pool of its own for the decoder; the two belong together in core/ once both settle.) */
#ifndef CQ_SSM_POOL_H
#define CQ_SSM_POOL_H

#include "core/error.h"

typedef struct cq_ssm_pool cq_ssm_pool;
typedef void (*cq_ssm_pool_fn)(void *ctx, int task);

/* n_threads counts the caller; 0 = online CPUs. */
cq_status cq_ssm_pool_new(int n_threads, cq_ssm_pool **out, cq_err *err);
void cq_ssm_pool_free(cq_ssm_pool *p);
void cq_ssm_pool_run(cq_ssm_pool *p, int n_tasks, cq_ssm_pool_fn fn, void *ctx);

#endif
