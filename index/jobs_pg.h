/* Ingestion jobs on PostgreSQL (issue 20, docs/SCALE.md "Jobs"): index/jobs.h's semantics, plus a lease so that
 * several nodes share one queue and a node that dies mid-job loses it to another.
 *
 *   jobs(id, kb_id, doc_id, state, done, total, error, created_at, updated_at, filename, upload_path,
 *        upload_sha256, size_bytes, replace_doc, error_code, attempts, lease_owner, lease_until, attempt,
 *        cancel_requested)                                  migration 2 of store_pg.c
 *
 * Claim. A worker takes the oldest job that is queued, or running with a lease that has expired (its node died or
 * hung), with FOR UPDATE SKIP LOCKED: two workers never take the same job, and neither waits for the other. The
 * claim sets lease_owner (the node), lease_until (now + lease_s, on the server's clock: nodes' clocks never
 * compare) and attempt + 1. (lease_owner, attempt) is the fencing token; the claiming connection keeps it for
 * the session (the setting clauseqa.job_lease), so that every job write through this connection — the public
 * cq_store_job_* functions included — is checked against it:
 *   - a connection holding a token writes only the job it names, and only while the row's owner and attempt are
 *     still the token's: a node that lost its lease (paused, partitioned, taken over) cannot write after another
 *     took the job (CQ_ERR_CANCELLED, "lease lost");
 *   - a connection holding none (an HTTP request: upload, cancel of a queued job) writes only jobs nobody holds.
 * A running job's ended or interrupted state keeps its owner and attempt, so an old owner stays fenced out.
 * Renew every third of the lease while working (a second connection may renew with the token, cq_pg_job_renew).
 *
 * Take-over. A job claimed from 'running' was cut off: the claim deletes, in its transaction, what the dead attempt
 * left of its document (a 'processing' document of the job's KB with the job's content, which no other live job is
 * writing; its pages, clauses, postings and vectors go by cascade), so the run starts clean and nothing is counted
 * twice. attempts counts starts as on SQLite (an interrupted start is not counted): the caller fails a job taken
 * over after CQ_JOB_MAX_ATTEMPTS starts. */
#ifndef CQ_INDEX_JOBS_PG_H
#define CQ_INDEX_JOBS_PG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/jobs.h"
#include "index/store_pg.h"

#define CQ_PG_JOB_LEASE_S 30     /* the default; a server takes CLAUSEQA_JOB_LEASE_S (app/service_jobs.c) */
#define CQ_PG_JOB_LEASE_MIN_S 3  /* renewed every third of the lease: a second at least */
#define CQ_PG_JOB_LEASE_MAX_S 3600
#define CQ_PG_JOB_OWNER_BYTES 96

/* The fencing token of a claimed job. */
typedef struct {
    int64_t job_id;
    char owner[CQ_PG_JOB_OWNER_BYTES];
    int attempt;
    char upload_sha256[65]; /* the job's upload by content ("" when not recorded) */
} cq_pg_job_lease;

/* ---- index/store.h and index/jobs.h on PostgreSQL ---- */
cq_status cq_pg_job_create(cq_pg *pg, int64_t kb_id, int64_t doc_id, int64_t *job_id, cq_err *err);
cq_status cq_pg_job_update(cq_pg *pg, int64_t job_id, const char *state, int done, int total, const char *error,
                           cq_err *err);
cq_status cq_pg_job_set_upload(cq_pg *pg, int64_t job_id, const char *filename, const char *upload_path,
                               int64_t size_bytes, int replace, cq_err *err);
cq_status cq_pg_job_begin_attempt(cq_pg *pg, int64_t job_id, int *attempts, cq_err *err);
cq_status cq_pg_job_interrupted(cq_pg *pg, int64_t job_id, cq_err *err);
cq_status cq_pg_job_fail(cq_pg *pg, int64_t job_id, int done, int total, const cq_err *why, cq_err *err);
cq_status cq_pg_job_finish(cq_pg *pg, int64_t job_id, int64_t doc_id, cq_err *err);
cq_status cq_pg_job_get(cq_pg *pg, int64_t job_id, cq_job_info *out, cq_err *err);
cq_status cq_pg_job_list(cq_pg *pg, int64_t kb_id, size_t limit, cq_job_info **out, size_t *n, cq_err *err);
cq_status cq_pg_job_unfinished(cq_pg *pg, cq_job_info **out, size_t *n, cq_err *err);

/* ---- the shared queue ---- */

/* A name for this process as a lease owner: host, process id and start time (unique across nodes and restarts). */
void cq_pg_job_owner_name(char out[CQ_PG_JOB_OWNER_BYTES]);

/* The job's upload by content: the bytes are in originals(sha256, part, bytes) (put there and fetched back with
 * store_pg.h's cq_pg_original_put_file / _get_file), so that any node can run it. Fenced like every job write. */
cq_status cq_pg_job_set_upload_sha256(cq_pg *pg, int64_t job_id, const char *sha256, cq_err *err);

/* Claims the oldest claimable job (queued, or running with an expired lease) for owner, for lease_s seconds.
 * *claimed is 0 when there is none (CQ_OK). On success the connection holds the token (and lease, may be NULL,
 * gets it); *taken_over (may be NULL) tells whether a dead attempt's leftovers were cleared. A job without its
 * upload recorded yet (upload_path NULL) is not claimable. */
cq_status cq_pg_job_claim(cq_pg *pg, const char *owner, int lease_s, int64_t *claimed, cq_pg_job_lease *lease,
                          int *taken_over, cq_err *err);
/* Extends the lease by lease_s from now. CQ_ERR_CANCELLED when the token is no longer the job's (taken over, or
 * requeued); a job the token still names that has ended (ready in its document's transaction, say) renews nothing
 * and is no error, so a renewal also tells a worker whether what it did is still its own. *cancel_requested (may be
 * NULL) tells whether someone asked to cancel the job. */
cq_status cq_pg_job_renew(cq_pg *pg, const cq_pg_job_lease *lease, int lease_s, int *cancel_requested, cq_err *err);
/* The connection drops its token (after the job ended or was interrupted): its writes are unfenced again. */
cq_status cq_pg_job_release(cq_pg *pg, cq_err *err);
/* Jobs waiting in the shared queue, every node's (what a node's health and metrics report on PostgreSQL). */
cq_status cq_pg_job_count_queued(cq_pg *pg, int64_t *n, cq_err *err);
/* Asks whoever runs the job to cancel it (any connection, no token needed); NOT_FOUND without the job. */
cq_status cq_pg_job_request_cancel(cq_pg *pg, int64_t job_id, cq_err *err);

#endif
