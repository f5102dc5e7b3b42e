/* Ingestion jobs and per-page rows, as the job queue and the HTTP API read them (the rows themselves are
 * written by cq_store_job_create / cq_store_job_update and the ingest pipeline, index/store.h).
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
 * Columns added by the keys/jobs migration (store.c): filename, upload_path, size_bytes, replace_doc; by the
 * conversations migration: error_code; by migration 8: attempts. */
#ifndef CQ_INDEX_JOBS_H
#define CQ_INDEX_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/store.h"

typedef struct {
    int64_t id, kb_id, doc_id; /* doc_id 0 until the job produced (or found) a document */
    char kb[128];              /* KB name */
    char state[16];
    int done, total;           /* pages */
    char *error;               /* NULL unless failed */
    char error_code[24];       /* why it failed as cq_err_name gives it (a cq_status_name such as "bad_format", or
                                  a reader's finer reason such as "too_large"), "" when not known */
    char *filename;            /* as uploaded (sanitized) */
    char *upload_path;         /* "uploads/NAME" (older rows: the path as given then); NULL once the job ended */
    int64_t size_bytes;
    int replace;               /* replace a document of the same name */
    int attempts;              /* starts of this job that were not interrupted by a shutdown */
    int64_t created_at, updated_at;
} cq_job_info;

/* A job found running after this many starts (each cut off by a crash: the process killed for its memory, say)
 * fails instead of running again. */
#define CQ_JOB_MAX_ATTEMPTS 3

void cq_job_info_free(cq_job_info *j);
void cq_job_info_free_array(cq_job_info *j, size_t n);

/* Records what the job ingests: the file name as uploaded, where the upload waits, its size, and whether it
 * replaces a document of the same name. */
cq_status cq_store_job_set_upload(cq_store *s, int64_t job_id, const char *filename, const char *upload_path,
                                  int64_t size_bytes, int replace, cq_err *err);
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
