/* Ingestion jobs (store/jobs.h), written once for SQLite and PostgreSQL on db/db.h. Every write of a job goes through
 * cq_store_job_write (store/job_claim.h), which adds the lease check where the store has leases. */
#include "store/jobs.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "core/plain_reason.h"
#include "db/db.h"
#include "db/dialect.h"
#include "store/job_claim.h"

bool cq_job_state_ended(cq_job_state state) { return state != CQ_JOB_QUEUED && state != CQ_JOB_RUNNING; }

void cq_job_info_free(cq_job_info *j) {
    if (!j) return;
    free(j->error);
    free(j->filename);
    free(j->upload_path);
    memset(j, 0, sizeof *j);
}

void cq_job_info_free_array(cq_job_info *j, size_t n) {
    for (size_t i = 0; i < n; i++) cq_job_info_free(&j[i]);
    free(j);
}

static int64_t now_s(void) { return (int64_t)time(NULL); }

cq_status cq_store_job_create(cq_store *s, int64_t kb_id, int64_t doc_id, int64_t *job_id, cq_err *err) {
    return cq_db_int(cq_store_conn(s), "create job", job_id, err,
                     "INSERT INTO jobs(kb_id, doc_id, state, created_at, updated_at) VALUES(?1, CASE WHEN ?2 > 0 THEN "
                     "?2 END, 'queued', ?3, ?3) RETURNING id",
                     "iii", kb_id, doc_id, now_s());
}

cq_status cq_store_job_update(cq_store *s, int64_t job_id, cq_job_state state, int done, int total, const char *error,
                              cq_err *err) {
    char plain[256];
    error = cq_plain_reason_stored("job", (long long)job_id, error, plain, sizeof plain);
    return cq_store_job_write(s, job_id, "update job", err,
                              "UPDATE jobs SET state = ?2, done = ?3, total = ?4, error = ?5, updated_at = ?6 "
                              "WHERE id = ?1",
                              "itiiti", job_id, cq_job_state_name(state), (int64_t)done, (int64_t)total, error,
                              now_s());
}

cq_status cq_store_job_set_upload(cq_store *s, int64_t job_id, const char *filename, const char *upload_path,
                                  int64_t size_bytes, int replace, const char *ocr, cq_err *err) {
    return cq_store_job_write(s, job_id, "record upload", err,
                              "UPDATE jobs SET filename = ?2, upload_path = ?3, size_bytes = ?4, replace_doc = ?5, "
                              "updated_at = ?6, ocr = ?7 WHERE id = ?1",
                              "ittiiit", job_id, filename, upload_path, size_bytes, (int64_t)(replace ? 1 : 0),
                              now_s(), ocr);
}

cq_status cq_store_job_begin_attempt(cq_store *s, int64_t job_id, int *attempts, cq_err *err) {
    cq_status rc = cq_store_job_write(s, job_id, "start job", err,
                                      "UPDATE jobs SET state = 'running', done = 0, error = NULL, "
                                      "attempts = attempts + 1, updated_at = ?2 WHERE id = ?1",
                                      "ii", job_id, now_s());
    if (rc || !attempts) return rc;
    cq_job_info j;
    rc = cq_store_job_get(s, job_id, &j, err);
    *attempts = rc ? 0 : j.attempts;
    cq_job_info_free(&j);
    return rc;
}

cq_status cq_store_job_interrupted(cq_store *s, int64_t job_id, cq_err *err) {
    return cq_store_job_write(s, job_id, "requeue job", err, cq_db_dialect(cq_store_conn(s), CQ_SQL_JOB_REQUEUE),
                              "ii", job_id, now_s());
}

cq_status cq_store_job_finish(cq_store *s, int64_t job_id, int64_t doc_id, cq_err *err) {
    return cq_store_job_write(s, job_id, "finish job", err, cq_db_dialect(cq_store_conn(s), CQ_SQL_JOB_FINISH),
                              doc_id > 0 ? "iii" : "iin", job_id, now_s(), doc_id);
}

cq_status cq_store_job_fail(cq_store *s, int64_t job_id, int done, int total, const cq_err *why, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = cq_store_job_update(s, job_id, CQ_JOB_FAILED, done, total, why->msg, err);
    if (!rc)
        rc = cq_store_job_write(s, job_id, "fail job", err, "UPDATE jobs SET error_code = ?2 WHERE id = ?1", "it",
                                job_id, why->code ? cq_err_name(why) : cq_status_name(CQ_ERR_INTERNAL));
    return cq_db_end(db, own, rc, err);
}

/* ---- reading jobs ------------------------------------------------------------------------------------------- */

#define JOB_COLUMNS                                                                                                 \
    "j.id, j.kb_id, coalesce(j.doc_id, 0), k.name, j.state, j.done, j.total, j.error, j.filename, j.upload_path, " \
    "coalesce(j.size_bytes, 0), j.created_at, j.updated_at, j.replace_doc, coalesce(j.error_code, ''), "          \
    "j.attempts, coalesce(j.ocr, '') FROM jobs j JOIN kbs k ON k.id = j.kb_id"

static cq_status job_from_row(cq_db_stmt *st, cq_job_info *j, cq_err *err) {
    memset(j, 0, sizeof *j);
    j->id = cq_db_col_int(st, 0);
    j->kb_id = cq_db_col_int(st, 1);
    j->doc_id = cq_db_col_int(st, 2);
    cq_db_col_copy(st, 3, j->kb, sizeof j->kb);
    j->done = (int)cq_db_col_int(st, 5);
    j->total = (int)cq_db_col_int(st, 6);
    j->error = cq_db_col_strdup(st, 7);
    j->filename = cq_db_col_strdup(st, 8);
    j->upload_path = cq_db_col_strdup(st, 9);
    j->size_bytes = cq_db_col_int(st, 10);
    j->created_at = cq_db_col_int(st, 11);
    j->updated_at = cq_db_col_int(st, 12);
    j->replace = (int)cq_db_col_int(st, 13);
    cq_db_col_copy(st, 14, j->error_code, sizeof j->error_code);
    j->attempts = (int)cq_db_col_int(st, 15);
    cq_db_col_copy(st, 16, j->ocr, sizeof j->ocr);
    if ((!j->error && !cq_db_col_null(st, 7)) || (!j->filename && !cq_db_col_null(st, 8)) ||
        (!j->upload_path && !cq_db_col_null(st, 9)))
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!cq_job_state_parse(cq_db_col_text(st, 4), &j->state))
        return cq_err_set(err, CQ_ERR_DB, "job %lld has an unknown state '%.20s'", (long long)j->id,
                          cq_db_col_text(st, 4) ? cq_db_col_text(st, 4) : "");
    return CQ_OK;
}

/* Runs a job query (?1 an id or KB id when the statement has it, ?2 a limit) and collects its rows. */
static cq_status job_query(cq_store *s, const char *sql, int64_t id, int64_t limit, cq_job_info **out, size_t *n,
                           cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db_stmt *st;
    if (cq_db_query(cq_store_conn(s), "list jobs", &st, err, sql, strstr(sql, "?2") ? "ii" : strstr(sql, "?1") ? "i" : "",
                    id, limit))
        return err->code;
    size_t cap = 0;
    cq_status rc = CQ_OK;
    while (cq_db_next(st, "list jobs", &rc, err)) {
        if (!cq_grow((void **)out, &cap, *n + 1, sizeof **out))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else rc = job_from_row(st, &(*out)[(*n)++], err);
    }
    cq_db_finalize(st);
    if (rc) {
        cq_job_info_free_array(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cq_status cq_store_job_get(cq_store *s, int64_t job_id, cq_job_info *out, cq_err *err) {
    cq_job_info *rows;
    size_t n;
    memset(out, 0, sizeof *out);
    cq_status rc = job_query(s, "SELECT " JOB_COLUMNS " WHERE j.id = ?1", job_id, 0, &rows, &n, err);
    if (!rc && n) *out = rows[0];
    else if (!rc) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)job_id);
    free(rows); /* NULL after a failure */
    return rc;
}

cq_status cq_store_job_list(cq_store *s, int64_t kb_id, size_t limit, cq_job_info **out, size_t *n, cq_err *err) {
    return job_query(s, "SELECT " JOB_COLUMNS " WHERE (?1 = 0 OR j.kb_id = ?1) ORDER BY j.id DESC LIMIT ?2", kb_id,
                     (int64_t)limit, out, n, err);
}

cq_status cq_store_job_unfinished(cq_store *s, cq_job_info **out, size_t *n, cq_err *err) {
    return job_query(s, "SELECT " JOB_COLUMNS " WHERE j.state IN ('queued', 'running') ORDER BY j.id", 0, 0, out, n,
                     err);
}

cq_status cq_store_job_count_queued(cq_store *s, int64_t *n, cq_err *err) {
    return cq_db_int(cq_store_conn(s), "count jobs", n, err, "SELECT count(*) FROM jobs WHERE state = 'queued'", "");
}

static bool page_read(cq_db_stmt *st, void *elem) {
    cq_page_info *p = elem;
    p->page_no = (int)cq_db_col_int(st, 0);
    p->width = (float)cq_db_col_double(st, 1);
    p->height = (float)cq_db_col_double(st, 2);
    p->n_chars = (int)cq_db_col_int(st, 3);
    p->quality = cq_db_col_double(st, 4);
    cq_db_col_copy(st, 5, p->quality_reason, sizeof p->quality_reason);
    return true;
}

cq_status cq_store_page_list(cq_store *s, int64_t doc_id, cq_page_info **out, size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "list pages", sizeof **out, page_read, NULL, (void **)out, n, err,
                      "SELECT page_no, width, height, n_chars, quality, quality_reason FROM pages WHERE doc_id = ?1 "
                      "ORDER BY page_no",
                      "i", doc_id);
}
