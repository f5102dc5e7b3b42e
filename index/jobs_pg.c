/* Ingestion jobs on PostgreSQL with leases and fencing (jobs_pg.h). */
#include "index/jobs_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index/pg_query.h"

/* The fencing check of every job write (jobs_pg.h): with a token (the session setting clauseqa.job_lease, "ID OWNER
 * ATTEMPT"), only that job while its owner and attempt are the token's; without one, only jobs nobody holds. */
#define FENCE                                                                                                     \
    " AND CASE WHEN coalesce(current_setting('clauseqa.job_lease', true), '') = '' THEN lease_owner IS NULL "    \
    "ELSE current_setting('clauseqa.job_lease', true) = id || ' ' || coalesce(lease_owner, '') || ' ' || attempt " \
    "END"

/* Runs a fenced write of job job_id. A job that does not exist is no error (as on SQLite: its KB was deleted
 * meanwhile); one that exists but was not written is: the fence refused it. */
static cq_status fenced_exec(cq_pg *pg, const char *sql, const cq_pgq_args *a, int64_t job_id, const char *what,
                             cq_err *err) {
    int64_t changed = 0;
    if (cq_pgq_exec(pg, sql, a, what, &changed, err)) return CQ_ERR_DB;
    if (changed) return CQ_OK;
    cq_pgq_args id = {0};
    cq_pgq_int(&id, job_id);
    PGresult *r = cq_pgq_run(pg,
                             "SELECT coalesce(lease_owner, ''), attempt, "
                             "coalesce(current_setting('clauseqa.job_lease', true), '') FROM jobs WHERE id = $1",
                             &id, what, err);
    if (!r) return CQ_ERR_DB;
    cq_status rc = CQ_OK;
    if (PQntuples(r) == 1) {
        const char *token = cq_pgq_str(r, 0, 2);
        if (*token)
            rc = cq_err_set(err, CQ_ERR_CANCELLED,
                            "%s: lease lost: job %lld is attempt %d of '%s' now, this connection holds '%s'", what,
                            (long long)job_id, cq_pgq_int32(r, 0, 1), cq_pgq_str(r, 0, 0), token);
        else
            rc = cq_err_set(err, CQ_ERR_CANCELLED, "%s: job %lld is held by '%s' (attempt %d)", what,
                            (long long)job_id, cq_pgq_str(r, 0, 0), cq_pgq_int32(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

cq_status cq_pg_job_create(cq_pg *pg, int64_t kb_id, int64_t doc_id, int64_t *job_id, cq_err *err) {
    cq_pgq_args a = {0};
    int64_t now = (int64_t)time(NULL);
    cq_pgq_int(&a, kb_id);
    if (doc_id > 0) cq_pgq_int(&a, doc_id);
    else cq_pgq_text(&a, NULL);
    cq_pgq_int(&a, now);
    PGresult *r = cq_pgq_run(pg,
                             "INSERT INTO jobs(kb_id, doc_id, state, created_at, updated_at) "
                             "VALUES($1, $2, 'queued', $3, $3) RETURNING id",
                             &a, "create job", err);
    if (!r) return CQ_ERR_DB;
    *job_id = cq_pgq_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_job_update(cq_pg *pg, int64_t job_id, const char *state, int done, int total, const char *error,
                           cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_pgq_text(&a, state);
    cq_pgq_int(&a, done);
    cq_pgq_int(&a, total);
    cq_pgq_text(&a, error);
    cq_pgq_int(&a, (int64_t)time(NULL));
    return fenced_exec(pg,
                       "UPDATE jobs SET state = $2, done = $3, total = $4, error = $5, updated_at = $6 WHERE id = $1" FENCE,
                       &a, job_id, "update job", err);
}

cq_status cq_pg_job_set_upload(cq_pg *pg, int64_t job_id, const char *filename, const char *upload_path,
                               int64_t size_bytes, int replace, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_pgq_text(&a, filename);
    cq_pgq_text(&a, upload_path);
    cq_pgq_int(&a, size_bytes);
    cq_pgq_int(&a, replace ? 1 : 0);
    cq_pgq_int(&a, (int64_t)time(NULL));
    return fenced_exec(pg,
                       "UPDATE jobs SET filename = $2, upload_path = $3, size_bytes = $4, replace_doc = $5, "
                       "updated_at = $6 WHERE id = $1" FENCE,
                       &a, job_id, "record upload", err);
}

cq_status cq_pg_job_set_upload_sha256(cq_pg *pg, int64_t job_id, const char *sha256, cq_err *err) {
    if (!sha256 || strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
        return cq_err_set(err, CQ_ERR_INVALID, "record upload: '%.80s' is not a SHA-256 in hex", sha256 ? sha256 : "");
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_pgq_text(&a, sha256);
    return fenced_exec(pg, "UPDATE jobs SET upload_sha256 = $2 WHERE id = $1" FENCE, &a, job_id, "record upload",
                       err);
}

/* A write of one job whose parameters are $1 (the id) and $2 (now). */
static cq_status job_exec(cq_pg *pg, const char *sql, int64_t job_id, const char *what, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_pgq_int(&a, (int64_t)time(NULL));
    return fenced_exec(pg, sql, &a, job_id, what, err);
}

cq_status cq_pg_job_begin_attempt(cq_pg *pg, int64_t job_id, int *attempts, cq_err *err) {
    cq_status rc = job_exec(pg,
                            "UPDATE jobs SET state = 'running', done = 0, error = NULL, attempts = attempts + 1, "
                            "updated_at = $2 WHERE id = $1" FENCE,
                            job_id, "start job", err);
    if (rc || !attempts) return rc;
    cq_job_info j;
    rc = cq_pg_job_get(pg, job_id, &j, err);
    *attempts = rc ? 0 : j.attempts;
    cq_job_info_free(&j);
    return rc;
}

cq_status cq_pg_job_interrupted(cq_pg *pg, int64_t job_id, cq_err *err) {
    /* Queued again for any node, this start not counted; the attempt (the fencing counter) stays. */
    return job_exec(pg,
                    "UPDATE jobs SET state = 'queued', done = 0, attempts = greatest(attempts - 1, 0), "
                    "lease_owner = NULL, lease_until = NULL, updated_at = $2 WHERE id = $1" FENCE,
                    job_id, "requeue job", err);
}

cq_status cq_pg_job_finish(cq_pg *pg, int64_t job_id, int64_t doc_id, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_pgq_int(&a, (int64_t)time(NULL));
    if (doc_id > 0) cq_pgq_int(&a, doc_id);
    else cq_pgq_text(&a, NULL);
    return fenced_exec(pg,
                       "UPDATE jobs SET doc_id = $3, upload_path = NULL, lease_until = NULL, updated_at = $2 "
                       "WHERE id = $1" FENCE,
                       &a, job_id, "finish job", err);
}

cq_status cq_pg_job_fail(cq_pg *pg, int64_t job_id, int done, int total, const cq_err *why, cq_err *err) {
    int own;
    cq_status rc = cq_pgq_begin(pg, &own, err);
    if (!rc) rc = cq_pg_job_update(pg, job_id, "failed", done, total, why->msg, err);
    if (!rc) {
        cq_pgq_args a = {0};
        cq_pgq_int(&a, job_id);
        cq_pgq_text(&a, why->code ? cq_err_name(why) : cq_status_name(CQ_ERR_INTERNAL));
        rc = fenced_exec(pg, "UPDATE jobs SET error_code = $2 WHERE id = $1" FENCE, &a, job_id, "fail job", err);
    }
    return cq_pgq_end(pg, own, rc, err);
}

/* ---- reading jobs ------------------------------------------------------------------------------------------- */

#define JOB_COLUMNS                                                                                             \
    "j.id, j.kb_id, coalesce(j.doc_id, 0), k.name, j.state, j.done, j.total, j.error, j.filename, "            \
    "j.upload_path, j.size_bytes, j.created_at, j.updated_at, j.replace_doc, coalesce(j.error_code, ''), "     \
    "j.attempts FROM jobs j JOIN kbs k ON k.id = j.kb_id"

static cq_status job_query(cq_pg *pg, const char *sql, const cq_pgq_args *a, cq_job_info **out, size_t *n,
                           cq_err *err) {
    *out = NULL;
    *n = 0;
    PGresult *r = cq_pgq_run(pg, sql, a, "list jobs", err);
    if (!r) return CQ_ERR_DB;
    int rows = PQntuples(r);
    cq_job_info *list = calloc(rows ? (size_t)rows : 1, sizeof *list);
    cq_status rc = list ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < rows; i++) {
        cq_job_info *j = &list[i];
        j->id = cq_pgq_int64(r, i, 0);
        j->kb_id = cq_pgq_int64(r, i, 1);
        j->doc_id = cq_pgq_int64(r, i, 2);
        snprintf(j->kb, sizeof j->kb, "%s", cq_pgq_str(r, i, 3));
        snprintf(j->state, sizeof j->state, "%s", cq_pgq_str(r, i, 4));
        j->done = cq_pgq_int32(r, i, 5);
        j->total = cq_pgq_int32(r, i, 6);
        j->error = cq_pgq_strdup(r, i, 7);
        j->filename = cq_pgq_strdup(r, i, 8);
        j->upload_path = cq_pgq_strdup(r, i, 9);
        j->size_bytes = cq_pgq_int64(r, i, 10);
        j->created_at = cq_pgq_int64(r, i, 11);
        j->updated_at = cq_pgq_int64(r, i, 12);
        j->replace = cq_pgq_int32(r, i, 13);
        snprintf(j->error_code, sizeof j->error_code, "%s", cq_pgq_str(r, i, 14));
        j->attempts = cq_pgq_int32(r, i, 15);
        if ((!PQgetisnull(r, i, 7) && !j->error) || (!PQgetisnull(r, i, 8) && !j->filename) ||
            (!PQgetisnull(r, i, 9) && !j->upload_path))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    PQclear(r);
    if (rc) {
        if (list) cq_job_info_free_array(list, (size_t)rows);
        return rc;
    }
    *out = list;
    *n = (size_t)rows;
    return CQ_OK;
}

cq_status cq_pg_job_get(cq_pg *pg, int64_t job_id, cq_job_info *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    cq_job_info *rows;
    size_t n;
    cq_status rc = job_query(pg, "SELECT " JOB_COLUMNS " WHERE j.id = $1", &a, &rows, &n, err);
    if (rc) return rc;
    if (n == 0) {
        free(rows);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)job_id);
    }
    *out = rows[0];
    free(rows);
    return CQ_OK;
}

cq_status cq_pg_job_list(cq_pg *pg, int64_t kb_id, size_t limit, cq_job_info **out, size_t *n, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, kb_id);
    cq_pgq_int(&a, (int64_t)limit);
    return job_query(pg, "SELECT " JOB_COLUMNS " WHERE ($1 = 0 OR j.kb_id = $1) ORDER BY j.id DESC LIMIT $2", &a, out,
                     n, err);
}

cq_status cq_pg_job_unfinished(cq_pg *pg, cq_job_info **out, size_t *n, cq_err *err) {
    return job_query(pg, "SELECT " JOB_COLUMNS " WHERE j.state IN ('queued', 'running') ORDER BY j.id", NULL, out,
                     n, err);
}

/* ---- the shared queue --------------------------------------------------------------------------------------- */

void cq_pg_job_owner_name(char out[CQ_PG_JOB_OWNER_BYTES]) {
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "unknown");
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(out, CQ_PG_JOB_OWNER_BYTES, "%s/%ld/%lld.%03ld", host, (long)getpid(), (long long)t.tv_sec,
             t.tv_nsec / 1000000);
}

cq_status cq_pg_job_claim(cq_pg *pg, const char *owner, int lease_s, int64_t *claimed, cq_pg_job_lease *lease,
                          int *taken_over, cq_err *err) {
    *claimed = 0;
    if (taken_over) *taken_over = 0;
    if (!owner || !*owner || strlen(owner) >= CQ_PG_JOB_OWNER_BYTES)
        return cq_err_set(err, CQ_ERR_INVALID, "claim job: a lease owner needs a name of 1-%d bytes",
                          CQ_PG_JOB_OWNER_BYTES - 1);
    if (lease_s < 1) return cq_err_set(err, CQ_ERR_INVALID, "claim job: a lease lasts at least a second");
    if (PQtransactionStatus(cq_pg_conn(pg)) != PQTRANS_IDLE)
        return cq_err_set(err, CQ_ERR_INTERNAL, "claim job: not inside a transaction (the claim commits)");
    cq_status rc = cq_pgq_exec(pg, "BEGIN", NULL, "claim job", NULL, err);
    if (rc) return rc;
    cq_pgq_args a = {0};
    cq_pgq_text(&a, owner);
    cq_pgq_int(&a, lease_s);
    cq_pgq_int(&a, (int64_t)time(NULL));
    /* The oldest claimable job, locked; rows other workers hold locked are skipped, not waited for. */
    PGresult *r = cq_pgq_run(pg,
                             "WITH c AS (SELECT id, state FROM jobs WHERE (state = 'queued' OR (state = 'running' "
                             "AND lease_until < now())) AND upload_path IS NOT NULL ORDER BY id LIMIT 1 "
                             "FOR UPDATE SKIP LOCKED) "
                             "UPDATE jobs j SET state = 'running', done = 0, error = NULL, attempts = j.attempts + 1, "
                             "attempt = j.attempt + 1, lease_owner = $1, "
                             "lease_until = now() + make_interval(secs => $2), updated_at = $3 "
                             "FROM c WHERE j.id = c.id RETURNING j.id, j.attempt, c.state = 'running', "
                             "coalesce(j.upload_sha256, '')",
                             &a, "claim job", err);
    if (!r) rc = CQ_ERR_DB;
    int64_t id = 0;
    int attempt = 0, was_running = 0;
    char sha[65] = "";
    if (r && PQntuples(r) == 1) {
        id = cq_pgq_int64(r, 0, 0);
        attempt = cq_pgq_int32(r, 0, 1);
        was_running = cq_pgq_bool(r, 0, 2);
        snprintf(sha, sizeof sha, "%s", cq_pgq_str(r, 0, 3));
    }
    PQclear(r);
    char token[CQ_PG_JOB_OWNER_BYTES + 48];
    snprintf(token, sizeof token, "%lld %s %d", (long long)id, owner, attempt);
    if (!rc && id && was_running) {
        /* What the dead attempt left of its document: a document of the job's KB with the job's content, still
         * processing, that no other live job is writing. Its pages, clauses, postings and vectors go by cascade. */
        cq_pgq_args d = {0};
        cq_pgq_int(&d, id);
        rc = cq_pgq_exec(pg,
                         "DELETE FROM documents d USING jobs j WHERE j.id = $1 AND d.kb_id = j.kb_id "
                         "AND d.sha256 = j.upload_sha256 AND d.status = 'processing' AND NOT EXISTS ("
                         "SELECT 1 FROM jobs o WHERE o.id <> j.id AND o.kb_id = j.kb_id "
                         "AND o.upload_sha256 = j.upload_sha256 AND o.state = 'running' AND o.lease_until >= now())",
                         &d, "claim job: clear the cut-off attempt", NULL, err);
    }
    if (!rc && id) {
        cq_pgq_args t = {0};
        cq_pgq_text(&t, token);
        rc = cq_pgq_exec(pg, "SELECT set_config('clauseqa.job_lease', $1, false)", &t, "claim job", NULL, err);
    }
    rc = cq_pgq_end(pg, 1, rc, err);
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

cq_status cq_pg_job_renew(cq_pg *pg, const cq_pg_job_lease *lease, int lease_s, int *cancel_requested, cq_err *err) {
    if (cancel_requested) *cancel_requested = 0;
    cq_pgq_args a = {0};
    cq_pgq_int(&a, lease->job_id);
    cq_pgq_text(&a, lease->owner);
    cq_pgq_int(&a, lease->attempt);
    cq_pgq_int(&a, lease_s);
    PGresult *r = cq_pgq_run(pg,
                             "UPDATE jobs SET lease_until = CASE WHEN state = 'running' THEN now() + "
                             "make_interval(secs => $4) ELSE lease_until END WHERE id = $1 AND lease_owner = $2 "
                             "AND attempt = $3 RETURNING cancel_requested",
                             &a, "renew job lease", err);
    if (!r) return CQ_ERR_DB;
    cq_status rc = CQ_OK;
    if (PQntuples(r) != 1)
        rc = cq_err_set(err, CQ_ERR_CANCELLED, "renew job lease: lease lost: job %lld is no longer attempt %d of '%s'",
                        (long long)lease->job_id, lease->attempt, lease->owner);
    else if (cancel_requested) *cancel_requested = cq_pgq_bool(r, 0, 0);
    PQclear(r);
    return rc;
}

cq_status cq_pg_job_release(cq_pg *pg, cq_err *err) {
    return cq_pgq_exec(pg, "SELECT set_config('clauseqa.job_lease', '', false)", NULL, "release job", NULL, err);
}

cq_status cq_pg_job_count_queued(cq_pg *pg, int64_t *n, cq_err *err) {
    *n = 0;
    PGresult *r = cq_pgq_run(pg, "SELECT count(*) FROM jobs WHERE state = 'queued'", NULL, "count jobs", err);
    if (!r) return CQ_ERR_DB;
    *n = cq_pgq_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

cq_status cq_pg_job_request_cancel(cq_pg *pg, int64_t job_id, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, job_id);
    int64_t changed = 0;
    cq_status rc = cq_pgq_exec(pg, "UPDATE jobs SET cancel_requested = true WHERE id = $1", &a, "cancel job",
                               &changed, err);
    if (!rc && !changed) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)job_id);
    return rc;
}
