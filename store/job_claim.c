/* The job claim (store/job_claim.h): the leased queue (PostgreSQL); on the local one (SQLite) jobs are not claimed,
 * writes are not fenced and an upload stays in the node's folder, so each function below asks the store's database
 * first. The leased queue's SQL runs only on PostgreSQL. */
#include "store/job_claim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/db.h"
#include "store/originals.h"

bool cq_store_job_queue_shared(cq_store *s) { return cq_db_kind_of(cq_store_conn(s)) == CQ_DB_POSTGRESQL; }

static cq_status not_shared(cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_UNSUPPORTED, "%s: this store's job queue is the node's own (SQLite): jobs are not "
                      "claimed", what);
}

/* With a token (the session setting clauseqa.job_lease, "ID OWNER ATTEMPT"), only that job while its owner and
 * attempt are the token's; without one, only jobs nobody holds. */
#define LEASE_FENCE                                                                                                \
    " AND CASE WHEN coalesce(current_setting('clauseqa.job_lease', true), '') = '' THEN lease_owner IS NULL "    \
    "ELSE current_setting('clauseqa.job_lease', true) = id || ' ' || coalesce(lease_owner, '') || ' ' || attempt " \
    "END"

/* Why a fenced write of an existing job changed nothing. */
static cq_status leased_refused(cq_store *s, int64_t job_id, const char *what, cq_err *err) {
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), what, &st, err,
                    "SELECT coalesce(lease_owner, ''), attempt, "
                    "coalesce(current_setting('clauseqa.job_lease', true), '') FROM jobs WHERE id = ?1",
                    "i", job_id))
        return err->code;
    int step = cq_db_step(st, what, err);
    cq_status rc = step < 0 ? err->code : CQ_OK;
    if (step == CQ_DB_ROW) {
        const char *token = cq_db_col_text(st, 2);
        if (token && *token)
            rc = cq_err_set(err, CQ_ERR_CANCELLED,
                            "%s: lease lost: job %lld is attempt %d of '%s' now, this connection holds '%s'", what,
                            (long long)job_id, (int)cq_db_col_int(st, 1), cq_db_col_text(st, 0), token);
        else
            rc = cq_err_set(err, CQ_ERR_CANCELLED, "%s: job %lld is held by '%s' (attempt %d)", what,
                            (long long)job_id, cq_db_col_text(st, 0), (int)cq_db_col_int(st, 1));
    }
    cq_db_finalize(st);
    return rc;
}

cq_status cq_store_job_set_upload_sha256(cq_store *s, int64_t job_id, const char *sha256, cq_err *err) {
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "record upload");
    if (!sha256 || strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
        return cq_err_set(err, CQ_ERR_INVALID, "record upload: '%.80s' is not a SHA-256 in hex", sha256 ? sha256 : "");
    return cq_store_job_write(s, job_id, "record upload", err, "UPDATE jobs SET upload_sha256 = ?2 WHERE id = ?1",
                              "it", job_id, sha256);
}

cq_status cq_store_job_share_upload(cq_store *s, int64_t job_id, const char *sha256, const char *path, cq_err *err) {
    if (!cq_store_job_queue_shared(s)) return CQ_OK; /* the file in the node's uploads folder is the upload */
    cq_status rc = cq_store_original_put_file(s, sha256, path, err);
    return rc ? rc : cq_store_job_set_upload_sha256(s, job_id, sha256, err);
}

cq_status cq_store_job_fetch_upload(cq_store *s, const cq_job_lease *lease, const char *path, cq_err *err) {
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "fetch upload");
    if (!lease->upload_sha256[0])
        return cq_err_set(err, CQ_ERR_IO, "the upload is on another node and not in the store");
    return cq_store_original_get_file(s, lease->upload_sha256, path, err);
}

cq_status cq_store_job_claim(cq_store *s, const char *owner, int lease_s, int64_t *claimed, cq_job_lease *lease,
                             int *taken_over, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    *claimed = 0;
    if (taken_over) *taken_over = 0;
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "claim job");
    if (!owner || !*owner || strlen(owner) >= CQ_JOB_OWNER_BYTES)
        return cq_err_set(err, CQ_ERR_INVALID, "claim job: a lease owner needs a name of 1-%d bytes",
                          CQ_JOB_OWNER_BYTES - 1);
    if (lease_s < 1) return cq_err_set(err, CQ_ERR_INVALID, "claim job: a lease lasts at least a second");
    if (cq_db_in_transaction(db))
        return cq_err_set(err, CQ_ERR_INTERNAL, "claim job: not inside a transaction (the claim commits)");
    cq_status rc = cq_db_begin(db, err);
    if (rc) return cq_err_prefix(err, "claim job: ");
    /* The oldest claimable job, locked; rows other workers hold locked are skipped, not waited for. */
    cq_db_stmt *st;
    int64_t id = 0;
    int attempt = 0, was_running = 0;
    char sha[65] = "";
    rc = cq_db_query(db, "claim job", &st, err,
                       "WITH c AS (SELECT id, state FROM jobs WHERE (state = 'queued' OR (state = 'running' "
                       "AND lease_until < now())) AND upload_path IS NOT NULL ORDER BY id LIMIT 1 "
                       "FOR UPDATE SKIP LOCKED) "
                       "UPDATE jobs j SET state = 'running', done = 0, error = NULL, attempts = j.attempts + 1, "
                       "attempt = j.attempt + 1, lease_owner = ?1, "
                       "lease_until = now() + make_interval(secs => ?2), updated_at = ?3 "
                       "FROM c WHERE j.id = c.id RETURNING j.id, j.attempt, c.state = 'running', "
                       "coalesce(j.upload_sha256, '')",
                       "tii", owner, (int64_t)lease_s, (int64_t)time(NULL));
    if (!rc) {
        int step = cq_db_step(st, "claim job", err);
        if (step == CQ_DB_ROW) {
            id = cq_db_col_int(st, 0);
            attempt = (int)cq_db_col_int(st, 1);
            was_running = cq_db_col_int(st, 2) != 0;
            cq_db_col_copy(st, 3, sha, sizeof sha);
        }
        if (step < 0) rc = err->code;
        cq_db_finalize(st);
    }
    if (!rc && id && was_running)
        /* What the dead attempt left of its document: a document of the job's KB with the job's content, still
         * processing, that no other live job is writing. Its pages, clauses, postings and vectors go by cascade. */
        rc = cq_db_run(db, "claim job: clear the cut-off attempt", NULL, err,
                       "DELETE FROM documents d USING jobs j WHERE j.id = ?1 AND d.kb_id = j.kb_id "
                       "AND d.sha256 = j.upload_sha256 AND d.status = 'processing' AND NOT EXISTS ("
                       "SELECT 1 FROM jobs o WHERE o.id <> j.id AND o.kb_id = j.kb_id "
                       "AND o.upload_sha256 = j.upload_sha256 AND o.state = 'running' AND o.lease_until >= now())",
                       "i", id);
    char token[CQ_JOB_OWNER_BYTES + 48];
    snprintf(token, sizeof token, "%lld %s %d", (long long)id, owner, attempt);
    if (!rc && id)
        rc = cq_db_run(db, "claim job", NULL, err, "SELECT set_config('clauseqa.job_lease', ?1, false)", "t", token);
    rc = cq_db_end(db, true, rc, err);
    if (rc || !id) return rc;
    *claimed = id;
    if (taken_over) *taken_over = was_running;
    if (lease) {
        lease->job_id = id;
        snprintf(lease->owner, sizeof lease->owner, "%s", owner);
        lease->attempt = attempt;
        snprintf(lease->upload_sha256, sizeof lease->upload_sha256, "%s", sha);
    }
    return CQ_OK;
}

cq_status cq_store_job_renew(cq_store *s, const cq_job_lease *lease, int lease_s, int *cancel_requested, cq_err *err) {
    if (cancel_requested) *cancel_requested = 0;
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "renew job lease");
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "renew job lease", &st, err,
                    "UPDATE jobs SET lease_until = CASE WHEN state = 'running' THEN now() + "
                    "make_interval(secs => ?4) ELSE lease_until END WHERE id = ?1 AND lease_owner = ?2 "
                    "AND attempt = ?3 RETURNING cancel_requested",
                    "itii", lease->job_id, lease->owner, (int64_t)lease->attempt, (int64_t)lease_s))
        return err->code;
    cq_status rc = cq_db_row(st, "renew job lease", err);
    if (rc == CQ_ERR_NOT_FOUND)
        rc = cq_err_set(err, CQ_ERR_CANCELLED, "renew job lease: lease lost: job %lld is no longer attempt %d of '%s'",
                        (long long)lease->job_id, lease->attempt, lease->owner);
    else if (!rc && cancel_requested)
        *cancel_requested = cq_db_col_int(st, 0) != 0;
    cq_db_finalize(st);
    return rc;
}

cq_status cq_store_job_release(cq_store *s, cq_err *err) {
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "release job");
    return cq_db_run(cq_store_conn(s), "release job", NULL, err, "SELECT set_config('clauseqa.job_lease', '', false)",
                     "");
}

cq_status cq_store_job_request_cancel(cq_store *s, int64_t job_id, cq_err *err) {
    if (!cq_store_job_queue_shared(s)) return not_shared(err, "cancel job");
    int64_t changed = 0;
    cq_status rc = cq_db_run(cq_store_conn(s), "cancel job", &changed, err,
                             "UPDATE jobs SET cancel_requested = true WHERE id = ?1", "i", job_id);
    if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)job_id);
    return rc;
}

void cq_job_owner_name(char out[CQ_JOB_OWNER_BYTES]) {
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "unknown");
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(out, CQ_JOB_OWNER_BYTES, "%s/%ld/%lld.%03ld", host, (long)getpid(), (long long)t.tv_sec,
             t.tv_nsec / 1000000);
}

cq_status cq_store_job_write(cq_store *s, int64_t job_id, const char *what, cq_err *err, const char *sql,
                             const char *kinds, ...) {
    const bool shared = cq_store_job_queue_shared(s);
    char fenced[1024];
    if ((size_t)snprintf(fenced, sizeof fenced, "%s%s", sql, shared ? LEASE_FENCE : "") >= sizeof fenced)
        return cq_err_set(err, CQ_ERR_INTERNAL, "%s: statement too long", what);
    int64_t changed = 0;
    va_list ap;
    va_start(ap, kinds);
    cq_status rc = cq_db_runv(cq_store_conn(s), what, &changed, err, fenced, kinds, ap);
    va_end(ap);
    if (rc || changed || !shared) return rc; /* unfenced: nothing written means no such job */
    return leased_refused(s, job_id, what, err);
}

