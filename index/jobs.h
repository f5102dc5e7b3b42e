/* Ingestion jobs and per-page rows, as the job queue and the HTTP API read them (the rows themselves are
 * written by cq_store_job_create / cq_store_job_update and the ingest pipeline, index/store.h).
 *
 * A job is one uploaded file waiting for, or going through, ingestion. The upload is kept at upload_path until the
 * job ends, so that a job interrupted by a restart can run again. States:
 *   queued → running → ready | failed | duplicate        (duplicate: identical content was in the KB already)
 * Columns added by the keys/jobs migration (store.c): filename, upload_path, size_bytes, replace_doc; by the
 * conversations migration: error_code. */
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
    char error_code[24];       /* why it failed as a cq_status_name ("bad_format", "empty" …), "" when not known */
    char *filename;            /* as uploaded (sanitized) */
    char *upload_path;         /* NULL once the job ended */
    int64_t size_bytes;
    int replace;               /* replace a document of the same name */
    int64_t created_at, updated_at;
} cq_job_info;

void cq_job_info_free(cq_job_info *j);
void cq_job_info_free_array(cq_job_info *j, size_t n);

/* Records what the job ingests: the file name as uploaded, where the upload waits, its size, and whether it
 * replaces a document of the same name. */
cq_status cq_store_job_set_upload(cq_store *s, int64_t job_id, const char *filename, const char *upload_path,
                                  int64_t size_bytes, int replace, cq_err *err);
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
