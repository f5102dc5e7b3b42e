/* The job claim (issue 28): how an ingestion worker gets its jobs, the one place where the two stores' job queues
 * really differ. Two behaviours behind one interface (store/job_claim.c), chosen by the store's database:
 *
 *   local (SQLite): the queue is the node's own — app/service_jobs.c keeps it in memory and resumes unfinished jobs
 *     at its start. Jobs are not claimed (the claim functions say CQ_ERR_UNSUPPORTED), writes are not fenced, and an
 *     upload stays in the node's uploads folder.
 *   leased (PostgreSQL, issue 20, docs/SCALE.md "Jobs"): the jobs table is the queue of every node sharing the
 *     database; a node that dies mid-job loses it to another.
 *
 * Leased. jobs(…, upload_sha256, lease_owner, lease_until, attempt, cancel_requested) (migration 3 of
 * store/schema.c).
 *
 * Claim. A worker takes the oldest job that is queued, or running with a lease that has expired (its node died or
 * hung), with FOR UPDATE SKIP LOCKED: two workers never take the same job, and neither waits for the other. The
 * claim sets lease_owner (the node), lease_until (now + lease_s, on the server's clock: nodes' clocks never
 * compare) and attempt + 1. (lease_owner, attempt) is the fencing token; the claiming connection keeps it for
 * the session (the setting clauseqa.job_lease), so that every job write through this connection — store/jobs.h's
 * included, through cq_store_job_write — is checked against it:
 *   - a connection holding a token writes only the job it names, and only while the row's owner and attempt are
 *     still the token's: a node that lost its lease (paused, partitioned, taken over) cannot write after another
 *     took the job (CQ_ERR_CANCELLED, "lease lost");
 *   - a connection holding none (an HTTP request: upload, cancel of a queued job) writes only jobs nobody holds.
 * A running job's ended or interrupted state keeps its owner and attempt, so an old owner stays fenced out.
 * Renew every third of the lease while working (a second connection may renew with the token).
 *
 * Take-over. A job claimed from 'running' was cut off: the claim deletes, in its transaction, what the dead attempt
 * left of its document (a 'processing' document of the job's KB with the job's content, which no other live job is
 * writing; its pages, clauses, postings and vectors go by cascade), so the run starts clean and nothing is counted
 * twice. attempts counts starts as on SQLite (an interrupted start is not counted): the caller fails a job taken
 * over after CQ_JOB_MAX_ATTEMPTS starts. */
#ifndef CQ_STORE_JOB_CLAIM_H
#define CQ_STORE_JOB_CLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"
#include "store/jobs.h"

#define CQ_JOB_LEASE_S 30     /* the default; a server takes CLAUSEQA_JOB_LEASE_S (app/service_jobs.c) */
#define CQ_JOB_LEASE_MIN_S 3  /* renewed every third of the lease: a second at least */
#define CQ_JOB_LEASE_MAX_S 3600
#define CQ_JOB_OWNER_BYTES 96

/* The fencing token of a claimed job. */
typedef struct {
    int64_t job_id;
    char owner[CQ_JOB_OWNER_BYTES];
    int attempt;
    char upload_sha256[65]; /* the job's upload by content ("" when not recorded) */
} cq_job_lease;

/* Whether the store's job queue is shared by several nodes (claimed with leases) rather than the node's own. */
bool cq_store_job_queue_shared(cq_store *s);

/* A name for this process as a lease owner: host, process id and start time (unique across nodes and restarts). */
void cq_job_owner_name(char out[CQ_JOB_OWNER_BYTES]);

/* A job's upload, for whichever node runs it: on a shared queue its bytes go into the store by content (originals,
 * store/originals.h) and the job records the hash (fenced like every job write); on the node's own queue, nothing
 * (the file in the uploads folder is the upload). */
cq_status cq_store_job_share_upload(cq_store *s, int64_t job_id, const char *sha256, const char *path, cq_err *err);
/* The hash alone (64 lowercase hex digits, else CQ_ERR_INVALID). */
cq_status cq_store_job_set_upload_sha256(cq_store *s, int64_t job_id, const char *sha256, cq_err *err);
/* A claimed job's upload from the store into path (CQ_ERR_IO when it was never shared, NOT_FOUND when the store
 * lacks it). */
cq_status cq_store_job_fetch_upload(cq_store *s, const cq_job_lease *lease, const char *path, cq_err *err);

/* Claims the oldest claimable job (queued, or running with an expired lease) for owner, for lease_s seconds.
 * *claimed is 0 when there is none (CQ_OK). On success the connection holds the token (and lease, may be NULL,
 * gets it); *taken_over (may be NULL) tells whether a dead attempt's leftovers were cleared. A job without its
 * upload recorded yet (upload_path NULL) is not claimable. Not inside a transaction (CQ_ERR_INTERNAL): the claim
 * commits. */
cq_status cq_store_job_claim(cq_store *s, const char *owner, int lease_s, int64_t *claimed, cq_job_lease *lease,
                             int *taken_over, cq_err *err);
/* Extends the lease by lease_s from now. CQ_ERR_CANCELLED when the token is no longer the job's (taken over, or
 * requeued); a job the token still names that has ended (ready in its document's transaction, say) renews nothing
 * and is no error, so a renewal also tells a worker whether what it did is still its own. *cancel_requested (may be
 * NULL) tells whether someone asked to cancel the job. */
cq_status cq_store_job_renew(cq_store *s, const cq_job_lease *lease, int lease_s, int *cancel_requested, cq_err *err);
/* The connection drops its token (after the job ended or was interrupted): its writes are unfenced again. */
cq_status cq_store_job_release(cq_store *s, cq_err *err);
/* Asks whoever runs the job to cancel it (any connection, no token needed); NOT_FOUND without the job. */
cq_status cq_store_job_request_cancel(cq_store *s, int64_t job_id, cq_err *err);

/* For store/jobs.c: one write of job job_id (sql's ?1 is the id; kinds and values as db/db.h's cq_db_run), with the
 * lease check appended to its WHERE where the store has leases. A job that does not exist is no error (its KB was
 * deleted meanwhile); one that exists but was not written is: the fence refused it (CQ_ERR_CANCELLED). */
cq_status cq_store_job_write(cq_store *s, int64_t job_id, const char *what, cq_err *err, const char *sql,
                             const char *kinds, ...);

#endif
