/* Ingestion jobs and per-page rows, as the job queue and the HTTP API read and write them; written once for both
 * stores on db/db.h (issue 28). What PostgreSQL adds — one queue shared by several nodes, with leases and fencing —
 * is the job claim, store/job_claim.h: every job write here passes its lease check there.
 *
 * A job is one uploaded file waiting for, or going through, ingestion. The upload is kept at upload_path until the
 * job ends, so that a job interrupted by a restart can run again; the service writes it relative to the data
 * directory ("uploads/job-7.ocr-auto.pdf") and reads only its file name (app/service_jobs.c). States:
 *   queued → running → ready | failed | duplicate | cancelled
 * duplicate: identical content was in the KB already; failed: for good (a damaged or too large document, or
 * CQ_JOB_MAX_ATTEMPTS starts that each ended in a crash; error_code says which); cancelled: on request, nothing of
 * it was kept. Interrupted is not an end: a shutdown puts its running job back to queued
 * (cq_store_job_interrupted), and a job a crash left running is queued again at the next start, attempts
 * permitting.
 * Columns added by the keys/jobs migration (store/store.c): filename, upload_path, size_bytes, replace_doc; by the
 * conversations migration: error_code; by migration 8: attempts. PostgreSQL's table (store/schema.c) has these
 * and the lease's columns (store/job_claim.h). */
#ifndef CQ_STORE_JOBS_H
#define CQ_STORE_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

/* A job's state; its name is the word in the database and in the API's JSON. */
typedef enum {
    CQ_JOB_QUEUED,
    CQ_JOB_RUNNING,
    CQ_JOB_READY,
    CQ_JOB_FAILED,
    CQ_JOB_DUPLICATE,
    CQ_JOB_CANCELLED,
} cq_job_state;

const char *cq_job_state_name(cq_job_state state); /* "queued", "running", … ("unknown" out of range) */
bool cq_job_state_parse(const char *name, cq_job_state *out); /* false: no state has that name */
bool cq_job_state_ended(cq_job_state state);                  /* neither queued nor running */

typedef struct {
    int64_t id, kb_id, doc_id; /* doc_id 0 until the job produced (or found) a document */
    char kb[128];              /* KB name */
    cq_job_state state;
    int done, total;           /* pages */
    char *error;               /* NULL unless failed */
    char error_code[24];       /* why it failed as cq_err_name gives it (a cq_status_name such as "bad_format", or
                                  a reader's finer reason such as "too_large"), "" when not known */
    char *filename;            /* as uploaded (sanitized) */
    char *upload_path;         /* "uploads/NAME" (older rows: the path as given then); NULL once the job ended */
    int64_t size_bytes;
    int replace;               /* replace a document of the same name */
    int attempts;              /* starts of this job that were not interrupted by a shutdown */
    char ocr[16];              /* the OCR mode the upload asked for (cq_reader_ocr_name), "" when the row has none
                                  (a job of before SQLite migration 13 / PostgreSQL 10: its upload's name says it) */
    int64_t created_at, updated_at;
} cq_job_info;

/* A job found running after this many starts (each cut off by a crash: the process killed for its memory, say)
 * fails instead of running again. */
#define CQ_JOB_MAX_ATTEMPTS 3

void cq_job_info_free(cq_job_info *j);
void cq_job_info_free_array(cq_job_info *j, size_t n);

/* A new job of KB kb_id, queued (doc_id: its document when known, else 0). */
cq_status cq_store_job_create(cq_store *s, int64_t kb_id, int64_t doc_id, int64_t *job_id, cq_err *err);
/* The job's state, pages done of total, and error (NULL: none). A job that is not there (its KB was deleted
 * meanwhile) is no error; on PostgreSQL a write the job's lease refuses is CQ_ERR_CANCELLED (store/job_claim.h), as
 * for every write below. */
cq_status cq_store_job_update(cq_store *s, int64_t job_id, cq_job_state state, int done, int total, const char *error,
                              cq_err *err);

/* Records what the job ingests: the file name as uploaded, where the upload waits, its size, whether it replaces a
 * document of the same name, and the OCR mode asked for (NULL: none recorded). */
cq_status cq_store_job_set_upload(cq_store *s, int64_t job_id, const char *filename, const char *upload_path,
                                  int64_t size_bytes, int replace, const char *ocr, cq_err *err);
/* The job starts (again): running, no pages done, one more attempt (*attempts, may be NULL, gets the count). */
cq_status cq_store_job_begin_attempt(cq_store *s, int64_t job_id, int *attempts, cq_err *err);
/* A shutdown stopped the job: queued again with no pages done, and this attempt not counted. */
cq_status cq_store_job_interrupted(cq_store *s, int64_t job_id, cq_err *err);
/* Marks the job failed at page done of total, with why's message and code. */
cq_status cq_store_job_fail(cq_store *s, int64_t job_id, int done, int total, const cq_err *why, cq_err *err);
/* Links the job to its document; clears the upload path once the job has ended. */
cq_status cq_store_job_finish(cq_store *s, int64_t job_id, int64_t doc_id, cq_err *err);

cq_status cq_store_job_get(cq_store *s, int64_t job_id, cq_job_info *out, cq_err *err); /* NOT_FOUND */
/* The newest jobs of a KB (kb_id 0: of every KB), at most limit, newest first. */
cq_status cq_store_job_list(cq_store *s, int64_t kb_id, size_t limit, cq_job_info **out, size_t *n, cq_err *err);
/* Jobs that have not ended (queued or running), oldest first: the ones to resume after a restart. */
cq_status cq_store_job_unfinished(cq_store *s, cq_job_info **out, size_t *n, cq_err *err);
/* Jobs waiting to start: on PostgreSQL every node's (what a node's health and metrics report there). */
cq_status cq_store_job_count_queued(cq_store *s, int64_t *n, cq_err *err);

/* The pages of a document with their text quality, in page order. */
typedef struct {
    int page_no;
    float width, height; /* points */
    int n_chars;
    double quality;
    char quality_reason[160];
} cq_page_info;
cq_status cq_store_page_list(cq_store *s, int64_t doc_id, cq_page_info **out, size_t *n, cq_err *err);

#endif
