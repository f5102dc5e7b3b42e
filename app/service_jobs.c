/* The service's ingestion: uploads wait under DATA/uploads/ as jobs (store/jobs.h) that one worker thread runs
 * through cq_ingest_file with its own connection, one at a time, within the page limit and the memory budget. What
 * an upload is (its format, hash, OCR mode, size and name: cq_upload) is found out once, when it comes, and handed
 * to the ingest with the queued job. A job that has no such record — resumed after a restart, or claimed on
 * another node — is found out by the ingest itself, once; its OCR mode is the one its row keeps (jobs.ocr; the
 * upload waits as DATA/uploads/job-ID.EXT), so that it is read as it was asked for.
 *
 * Ends. A job that produced a document ends ready in the document's own transaction (before_commit), so no crash
 * can leave a saved document with a job still to run (which then found its own document and ended duplicate). A
 * cancel request takes a queued job out of the queue, or sets the reader's cancel flag for the running one, which
 * stops before its next page and keeps nothing. A stop sets the same flag: the running job is queued again,
 * uncounted, with its upload, and resumes at the next start. A job a crash left running starts again at the next
 * start, unless that was its CQ_JOB_MAX_ATTEMPTS-th start: then it fails, so that a document that kills the
 * server (its memory) cannot do so at every start.
 *
 * Several nodes on PostgreSQL (docs/SCALE.md "Jobs"). The queue is the shared jobs table: each node's worker claims
 * the oldest claimable job with a lease (store/job_claim.h), polling every CLAIM_POLL_S and at once after an upload
 * on its own node, and a renewer thread with its own connection extends the lease every third of its length
 * (CQ_JOB_LEASE_S, or CLAUSEQA_JOB_LEASE_S seconds: job_lease_configure). A node
 * that dies (killed, partitioned, hung) stops renewing; when its lease runs out another node takes the job over,
 * clearing what the dead attempt left of its document, and the dead node's late writes are refused (fencing). An
 * upload is kept in the store by content as well (originals), so that any node can run it; a cancel of a job
 * running on another node is a request that node's renewer sees. The CQ_JOB_MAX_ATTEMPTS rule holds for
 * take-overs: a job taken over after its CQ_JOB_MAX_ATTEMPTS-th start fails. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/ingest.h"
#include "app/json.h"
#include "app/service_internal.h"
#include "core/clock.h"
#include "core/fault.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "reader/reader.h"

#define JOB_LIST_LIMIT 100
#define FILENAME_MAX_BYTES 200
#define PROGRESS_INTERVAL_S 0.2 /* how often a running job's page count is written */
#define CANCEL_WAIT_S 3.0       /* how long a cancel request waits for the running job to stop */
#define CLAIM_POLL_S 1          /* PostgreSQL: how often an idle worker looks for jobs other nodes queued */

/* A file name as uploaded, made safe to keep and show: the last path component (either slash), no control
 * characters, valid UTF-8, at most FILENAME_MAX_BYTES bytes (the extension kept), never "", "." or "..". */
static void sanitize_filename(const char *in, char *out, size_t cap) {
    const char *base = in;
    for (const char *p = in; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    cq_strbuf b = {0};
    size_t n = strlen(base), i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(base + i, n - i, &len);
        if (len == 0) len = 1;
        if (cp == CQ_UTF8_REPLACEMENT || cp < 0x20 || cp == 0x7f || cp == ':' || cp == '*' || cp == '?' ||
            cp == '"' || cp == '<' || cp == '>' || cp == '|')
            cq_strbuf_puts(&b, "_");
        else cq_strbuf_append(&b, base + i, len);
        i += len;
    }
    const char *s = b.data ? b.data : "";
    while (*s == ' ' || *s == '.') s++; /* no hidden files, no "..", no leading blanks */
    size_t len = strlen(s);
    if (len > FILENAME_MAX_BYTES) {
        const char *dot = strrchr(s, '.');
        size_t ext = dot && strlen(dot) <= 10 ? strlen(dot) : 0;
        size_t keep = FILENAME_MAX_BYTES - ext;
        while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80) keep--; /* whole characters only */
        snprintf(out, cap, "%.*s%s", (int)keep, s, ext ? dot : "");
    } else {
        snprintf(out, cap, "%s", *s ? s : "upload");
    }
    cq_strbuf_free(&b);
}

/* Queues job_id (with the upload as received, up; NULL: none). */
static void enqueue(cq_service *s, int64_t job_id, const cq_upload *up) {
    if (s->shared_queue) { /* the job is in the shared table: the worker only needs waking */
        pthread_mutex_lock(&s->queue_lock);
        s->wake = true;
        pthread_cond_signal(&s->queue_cond);
        pthread_mutex_unlock(&s->queue_lock);
        return;
    }
    cq_svc_queued_job *q = calloc(1, sizeof *q);
    if (!q) return; /* stays 'queued' in the database: the next start runs it */
    q->id = job_id;
    if (up) {
        q->upload = *up;
        q->has_upload = true;
    }
    pthread_mutex_lock(&s->queue_lock);
    if (s->tail) s->tail->next = q;
    else s->head = q;
    s->tail = q;
    s->queued++;
    pthread_cond_signal(&s->queue_cond);
    pthread_mutex_unlock(&s->queue_lock);
}

/* A job with its document (and the document's page warnings) once it has one. */
static cJSON *job_json(cq_store *st, const cq_job_info *j) {
    cJSON *doc = NULL;
    cq_doc_info d;
    cq_err err = {0};
    if (j->doc_id && cq_store_doc_get(st, j->doc_id, &d, &err) == CQ_OK) {
        doc = cq_svc_doc_json(st, &d, j->kb, false);
        cq_doc_info_free(&d);
    }
    return cq_json_job(j, doc);
}

/* An upload's name in the jobs table is relative to the data directory ("uploads/job-7.pdf"), so that the
 * same data directory reached by another name — relative or absolute, through a symlink, moved — finds its uploads.
 * Rows of earlier versions hold the path as it was given then ("rel11/uploads/...", "/srv/qa/uploads/..."): only
 * the file name counts, and the file is always this run's uploads folder's. Nothing compares or opens a stored path
 * as it is: every use goes through upload_leaf / upload_file. */
#define UPLOADS_SUBDIR "uploads"
static const char *upload_leaf(const char *stored) {
    const char *slash = strrchr(stored, '/');
    return slash ? slash + 1 : stored;
}

/* This run's path of a job's upload (malloc'd; NULL: out of memory, or a stored name that is no file name). */
static char *upload_file(const cq_service *s, const char *stored) {
    const char *leaf = stored ? upload_leaf(stored) : "";
    if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, "..")) return NULL;
    return cq_svc_path_join(s->uploads_dir, leaf);
}

/* Removes a job's upload (a stored name, as above). */
static void upload_remove(const cq_service *s, const char *stored) {
    char *path = upload_file(s, stored);
    if (path) unlink(path);
    free(path);
}

static cq_status svc_upload(void *ctx, const char *kb, const char *filename_raw, const char *spooled, bool replace,
                            const char *ocr_name, cJSON **out, bool *accepted, cq_err *err) {
    cq_service *s = ctx;
    *accepted = false;
    cq_reader_ocr ocr = s->ocr;
    if (ocr_name && !cq_reader_ocr_parse(ocr_name, &ocr)) {
        unlink(spooled);
        return cq_err_set(err, CQ_ERR_INVALID, "ocr must be off, auto or force (not '%.20s')", ocr_name);
    }
    cq_upload up = {.ocr = ocr};
    char *filename = up.name;
    sanitize_filename(filename_raw, up.name, sizeof up.name);
    int64_t kb_id = 0, job_id = 0;
    cq_store *st = cq_svc_open_kb(s, kb, &kb_id, err);
    if (!st) {
        unlink(spooled);
        return err->code;
    }
    char head[CQ_READER_HEAD_BYTES], stored[80], *name = NULL, *upload_path = NULL;
    size_t head_len = 0;
    struct stat sb;
    cq_doc_info same = {0}, named = {0};
    cq_status rc = CQ_OK;
    if (stat(spooled, &sb) != 0 || !S_ISREG(sb.st_mode))
        rc = cq_err_set(err, CQ_ERR_IO, "the upload was not received");
    if (!rc && sb.st_size == 0) rc = cq_err_set(err, CQ_ERR_EMPTY, "%s: the file is empty", filename);
    if (!rc) {
        FILE *fp = fopen(spooled, "rb");
        if (fp) {
            head_len = fread(head, 1, sizeof head, fp);
            fclose(fp);
        }
        up.format = cq_reader_detect(filename, head, head_len, err);
        up.size = (int64_t)sb.st_size;
        if (!up.format) {
            rc = err->code ? err->code : CQ_ERR_FORMAT;
            cq_err_prefix(err, "%s: ", filename);
        }
    }
    if (!rc) rc = cq_sha256_file_hex(spooled, up.sha256, err);
    if (!rc) {
        name = cq_path_stem(filename);
        if (!name || !*name) rc = cq_err_set(err, CQ_ERR_INVALID, "'%s' is not a usable file name", filename);
    }
    if (!rc && cq_store_doc_by_hash(st, kb_id, up.sha256, &same, err) == CQ_OK && same.state == CQ_DOC_READY) {
        /* Identical content is in the KB already: report it, do nothing. */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "duplicate", true);
        cJSON_AddItemToObject(o, "document", cq_svc_doc_json(st, &same, kb, false));
        *out = o;
        unlink(spooled);
        cq_svc_pool_put(s, st);
        cq_doc_info_free(&same);
        free(name);
        return CQ_OK;
    }
    if (!rc) cq_err_clear(err);
    if (!rc && !replace && cq_store_doc_by_name(st, kb_id, name, &named, err) == CQ_OK &&
        named.state == CQ_DOC_READY)
        rc = cq_err_set(err, CQ_ERR_EXISTS,
                        "a different document named '%s' is in '%s' already: delete it, or upload with replace=true",
                        name, kb);
    if (!rc) {
        cq_err_clear(err);
        rc = cq_store_job_create(st, kb_id, 0, &job_id, err);
    }
    if (!rc) {
        char leaf[64];
        snprintf(leaf, sizeof leaf, "job-%lld.%s", (long long)job_id, up.format->name);
        snprintf(stored, sizeof stored, UPLOADS_SUBDIR "/%s", leaf);
        upload_path = upload_file(s, stored);
        if (!upload_path) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else if (rename(spooled, upload_path) != 0)
            rc = cq_err_set(err, CQ_ERR_IO, "cannot keep the upload: %s", strerror(errno));
    }
    /* on a shared queue in the store by content too, before the job can be claimed: any node can run it */
    if (!rc) rc = cq_store_job_share_upload(st, job_id, up.sha256, upload_path, err);
    if (!rc)
        rc = cq_store_job_set_upload(st, job_id, filename, stored, (int64_t)sb.st_size, replace, cq_reader_ocr_name(ocr),
                                     err);
    if (!rc) {
        cq_job_info j;
        rc = cq_store_job_get(st, job_id, &j, err);
        if (!rc) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddBoolToObject(o, "duplicate", false);
            cJSON_AddItemToObject(o, "job", job_json(st, &j));
            *out = o;
            *accepted = true;
            cq_job_info_free(&j);
            enqueue(s, job_id, &up);
            CQ_INFO("job %lld: %s queued for '%s' (%lld bytes)", (long long)job_id, filename, kb,
                    (long long)sb.st_size);
        }
    }
    if (rc) {
        unlink(spooled);
        if (upload_path) unlink(upload_path);
        cq_err e2 = {0};
        if (job_id) cq_store_job_fail(st, job_id, 0, 0, err, &e2);
    }
    cq_svc_pool_put(s, st);
    cq_doc_info_free(&same);
    cq_doc_info_free(&named);
    free(name);
    free(upload_path);
    return rc;
}

static cq_status svc_job_get(void *ctx, int64_t job_id, cJSON **out, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_job_info j;
    cq_status rc = cq_store_job_get(st, job_id, &j, err);
    if (!rc) {
        snprintf(kb, 128, "%s", j.kb);
        *out = job_json(st, &j);
        cq_job_info_free(&j);
    }
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_job_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int64_t kb_id;
    cq_store *st = cq_svc_open_kb(s, kb, &kb_id, err);
    if (!st) return err->code;
    cq_job_info *jobs = NULL;
    size_t n = 0;
    cq_status rc = cq_store_job_list(st, kb_id, JOB_LIST_LIMIT, &jobs, &n, err);
    if (!rc) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cq_json_job(&jobs[i], NULL));
        *out = a;
    }
    cq_job_info_free_array(jobs, n);
    cq_svc_pool_put(s, st);
    return rc;
}

/* Pages read so far, written to the job row at most every PROGRESS_INTERVAL_S (and at the last page). The ingest
 * pipeline calls it before it opens its transaction, so the worker's connection is free to write. */
typedef struct {
    cq_store *st;
    int64_t job_id;
    double last_write;
    int done, total;
} job_progress;

static void report_progress(void *user, int pages_read, int n_pages) {
    job_progress *p = user;
    p->done = pages_read;
    p->total = n_pages;
    if (pages_read == 1) cq_fault_point("while-reading"); /* the crash tests (core/fault.h) */
    cq_fault_delay("job-page");
    double now = cq_clock_seconds();
    if (pages_read < n_pages && now - p->last_write < PROGRESS_INTERVAL_S) return;
    p->last_write = now;
    cq_err err = {0};
    cq_store_job_update(p->st, p->job_id, CQ_JOB_RUNNING, pages_read, n_pages, NULL, &err);
}

/* The OCR mode of a job without its upload record (resumed after a start, claimed on another node): the one its row
 * keeps; on a row of before the jobs table kept it, the one its upload's name says (job-ID.ocr-MODE.EXT); else the
 * service's default. */
static cq_reader_ocr stored_ocr(const cq_service *s, const cq_job_info *j) {
    char name[16];
    snprintf(name, sizeof name, "%s", j->ocr);
    const char *m = *name ? NULL : strstr(upload_leaf(j->upload_path), ".ocr-");
    if (m && strcspn(m + 5, ".") < sizeof name) snprintf(name, sizeof name, "%.*s", (int)strcspn(m + 5, "."), m + 5);
    cq_reader_ocr ocr;
    return cq_reader_ocr_parse(name, &ocr) ? ocr : s->ocr;
}

/* Inside the document's transaction (cq_ingest_options.before_commit): the job ends ready with its document. */
static cq_status job_ready_in_tx(void *user, cq_store *st, int64_t doc_id, cq_err *err) {
    job_progress *p = user;
    cq_status rc = cq_store_job_update(st, p->job_id, CQ_JOB_READY, p->total, p->total, NULL, err);
    if (!rc) rc = cq_store_job_finish(st, p->job_id, doc_id, err);
    return rc;
}

/* A shared queue: the claimed job's upload as a file of this node — its own copy when the upload came here, else
 * fetched from the store by content into the uploads folder under the same name (which carries the OCR mode;
 * *fetched is set). NULL (the job failed) when neither is there. */
static char *claimed_upload(cq_service *s, cq_store *st, const cq_job_info *j, const cq_job_lease *lease,
                            bool *fetched) {
    char *path = upload_file(s, j->upload_path);
    *fetched = false;
    if (path && access(path, R_OK) == 0) return path;
    cq_err err = {0}, e2 = {0};
    if (!path) return NULL;
    *fetched = true;
    if (!cq_store_job_fetch_upload(st, lease, path, &err)) return path;
    cq_err_prefix(&err, "the upload was lost: ");
    if (cq_store_begin(st, &e2) == CQ_OK) {
        cq_store_job_fail(st, j->id, 0, 0, &err, &e2);
        cq_store_job_finish(st, j->id, 0, &e2);
        if (cq_store_commit(st, &e2)) cq_store_rollback(st);
    }
    CQ_WARN("job %lld (%s) failed: %s", (long long)j->id, j->filename ? j->filename : "?", err.msg);
    free(path);
    return NULL;
}

/* A claimed job taken over after its CQ_JOB_MAX_ATTEMPTS-th start fails, as resume_jobs fails such a job on one
 * node. True when it did. */
static bool fail_after_max_attempts(cq_store *st, const cq_job_info *j) {
    if (j->attempts <= CQ_JOB_MAX_ATTEMPTS) return false;
    cq_err why = {0}, e2 = {0};
    cq_err_set(&why, CQ_ERR_INTERNAL, "not tried again: the node running it stopped (a crash, or killed for its "
               "memory) during each of the %d times this document was read", j->attempts - 1);
    if (cq_store_begin(st, &e2) == CQ_OK) {
        cq_store_job_fail(st, j->id, 0, j->total, &why, &e2);
        cq_store_job_finish(st, j->id, 0, &e2);
        if (cq_store_commit(st, &e2)) cq_store_rollback(st);
    }
    CQ_WARN("job %lld (%s) failed: %s", (long long)j->id, j->filename ? j->filename : "?", why.msg);
    return true;
}

/* Runs one job with the worker's own connection. lease: the claim on PostgreSQL (the claim counted the start),
 * NULL on SQLite. up: the upload as received (NULL: the ingest finds it out). */
static void run_job(cq_service *s, cq_store *st, int64_t job_id, const cq_job_lease *lease, bool taken_over,
                    const cq_upload *up) {
    cq_err err = {0};
    cq_job_info j;
    if (cq_store_job_get(st, job_id, &j, &err)) return; /* its KB was deleted meanwhile: the upload is swept below */
    if (cq_job_state_ended(j.state) || !j.upload_path) {
        cq_job_info_free(&j);
        return;
    }
    char *upload = NULL;
    bool fetched = false;
    if (!lease) {
        cq_store_job_begin_attempt(st, job_id, NULL, &err); /* counted before it runs: a crash cannot skip it */
        upload = upload_file(s, j.upload_path);
    } else if (!(taken_over && fail_after_max_attempts(st, &j))) {
        upload = claimed_upload(s, st, &j, lease, &fetched);
        if (taken_over && upload)
            CQ_WARN("job %lld (%s): its node stopped renewing the lease; taken over (start %d of at most %d)",
                    (long long)job_id, j.filename ? j.filename : "?", j.attempts, CQ_JOB_MAX_ATTEMPTS);
    }
    if (!upload) {
        cq_job_info_free(&j);
        return;
    }
    job_progress progress = {.st = st, .job_id = job_id, .last_write = cq_clock_seconds()};
    cq_ingest_options opt = {.replace = j.replace != 0, .filename = j.filename, .progress = report_progress,
                             .progress_user = &progress, .dense = s->dense, .upload = up,
                             .ocr = up ? up->ocr : stored_ocr(s, &j),
                             .limits = {s->max_pages, s->doc_memory_bytes, &s->cancel_running},
                             .before_commit = job_ready_in_tx, .before_commit_user = &progress};
    cq_ingest_result res;
    cq_status rc = cq_ingest_file(st, s->data_dir, j.kb_id, upload, &opt, &res, &err);
    pthread_mutex_lock(&s->queue_lock);
    bool by_user = s->cancel_by_user;
    pthread_mutex_unlock(&s->queue_lock);
    cq_err e2 = {0};
    if (lease && rc && rc != CQ_ERR_CANCELLED && err.reason && !strcmp(err.reason, "store_unreachable")) {
        /* PostgreSQL went away under the job (killed, restarted): its transaction was rolled back and this
         * connection's lease token went with its session, so nothing can be recorded here; the job stays running
         * until its lease runs out, then a claim (here or on another node) starts it again, as after a crash. */
        CQ_WARN("job %lld (%s): %s; it starts again when its lease runs out", (long long)job_id, j.filename,
                err.msg);
        if (fetched) unlink(upload);
        free(upload);
        cq_job_info_free(&j);
        return;
    }
    if (lease && cq_store_job_renew(st, lease, s->lease_s, NULL, &e2) == CQ_ERR_CANCELLED) {
        /* Another node took the job over while this one was slow: its writes were refused, it records nothing. */
        CQ_WARN("job %lld (%s): %s; this node's attempt is dropped", (long long)job_id, j.filename, e2.msg);
        if (fetched) unlink(upload); /* a fetched copy; the upload itself is the owner's */
        free(upload);
        cq_job_info_free(&j);
        return;
    }
    cq_err_clear(&e2);
    /* A reader stopped by the cancel flag may surface as another error (MuPDF refusing an allocation once the flag is
     * up reads as out of memory): while the flag is raised, any failure is the cancel's, never the document's. */
    if (rc != CQ_OK && rc != CQ_ERR_CANCELLED && atomic_load(&s->cancel_running)) {
        CQ_INFO("job %lld (%s): '%s' while it was being stopped: taken as the stop", (long long)job_id, j.filename,
                err.msg);
        rc = CQ_ERR_CANCELLED;
    }
    if (rc == CQ_ERR_CANCELLED && !by_user) {
        /* the stop: nothing was kept; queued again with its upload, this start not counted */
        cq_store_job_interrupted(st, job_id, &e2);
        atomic_fetch_add(&s->jobs_interrupted, 1);
        CQ_INFO("job %lld (%s): interrupted by the stop after %d of %d pages; it resumes at the next start%s",
                (long long)job_id, j.filename, progress.done, progress.total, lease ? " (or on another node)" : "");
        free(upload);
        cq_job_info_free(&j);
        return;
    }
    /* The end state and the document link change together: a reader never sees "ready" without the document. */
    bool tx = cq_store_begin(st, &e2) == CQ_OK;
    if (rc == CQ_ERR_CANCELLED) {
        cq_store_job_update(st, job_id, CQ_JOB_CANCELLED, progress.done, progress.total, err.msg, &e2);
        cq_store_job_finish(st, job_id, 0, &e2);
        atomic_fetch_add(&s->jobs_cancelled, 1);
        CQ_INFO("job %lld: %s", (long long)job_id, err.msg);
    } else if (rc) {
        /* the pipeline records a failed document with the reason: link it so the job shows it */
        cq_doc_info d;
        int64_t doc_id = 0;
        if (res.sha256[0] && cq_store_doc_by_hash(st, j.kb_id, res.sha256, &d, &e2) == CQ_OK) {
            doc_id = d.id;
            cq_doc_info_free(&d);
        }
        cq_store_job_fail(st, job_id, progress.done, progress.total, &err, &e2);
        cq_store_job_finish(st, job_id, doc_id, &e2);
        atomic_fetch_add(&s->jobs_failed, 1);
        CQ_WARN("job %lld failed: %s", (long long)job_id, err.msg);
    } else if (res.duplicate) {
        cq_store_job_update(st, job_id, CQ_JOB_DUPLICATE, res.n_pages, res.n_pages, NULL, &e2);
        cq_store_job_finish(st, job_id, res.doc_id, &e2);
        atomic_fetch_add(&s->jobs_duplicate, 1);
        CQ_INFO("job %lld: %s was there already", (long long)job_id, j.filename);
    } else { /* ended ready with its document (job_ready_in_tx) */
        atomic_fetch_add(&s->jobs_ready, 1);
        atomic_fetch_add(&s->ingest_pages, (uint64_t)res.n_pages);
        atomic_fetch_add(&s->ingest_ms, (uint64_t)(res.seconds * 1e3 + 0.5));
        CQ_INFO("job %lld: %s ready (%d pages, %d clauses, %.2f s)", (long long)job_id, j.filename, res.n_pages,
                res.n_clauses, res.seconds);
    }
    if (tx && cq_store_commit(st, &e2)) {
        CQ_ERROR("job %lld: cannot record its end: %s", (long long)job_id, e2.msg);
        cq_store_rollback(st);
    }
    unlink(upload);
    free(upload);
    cq_job_info_free(&j);
}

/* PostgreSQL: claims from the shared table until the stop; between claims the connection holds no token. */
static void worker_shared(cq_service *s, cq_store *st) {
    for (;;) {
        cq_err err = {0};
        int64_t id = 0;
        int taken_over = 0;
        cq_job_lease lease;
        pthread_mutex_lock(&s->queue_lock);
        bool stop = s->stopping;
        s->wake = false;
        pthread_mutex_unlock(&s->queue_lock);
        if (stop) break;
        if (cq_store_job_claim(st, s->node_name, s->lease_s, &id, &lease, &taken_over, &err)) {
            CQ_WARN("ingestion worker: %s", err.msg);
            /* the server gone (restarted, a network cut): re-established through db/, with its backoff */
            cq_err e2 = {0};
            if (cq_store_check(st, &e2)) CQ_WARN("ingestion worker: %s", e2.msg);
            id = 0;
        }
        pthread_mutex_lock(&s->queue_lock);
        if (!id) { /* nothing to do: wait for an upload here, the stop, or the next poll */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += CLAIM_POLL_S;
            if (!s->stopping && !s->wake) pthread_cond_timedwait(&s->queue_cond, &s->queue_lock, &until);
            pthread_mutex_unlock(&s->queue_lock);
            continue;
        }
        s->running_job = id;
        s->lease = lease;
        s->lease_held = true;
        s->lease_lost = false;
        s->cancel_by_user = false;
        atomic_store(&s->cancel_running, s->stopping); /* a stop from now on sets it for this job */
        pthread_mutex_unlock(&s->queue_lock);
        run_job(s, st, id, &lease, taken_over != 0, NULL);
        cq_err e2 = {0};
        if (cq_store_job_release(st, &e2)) CQ_WARN("ingestion worker: %s", e2.msg);
        pthread_mutex_lock(&s->queue_lock);
        s->running_job = 0;
        s->lease_held = false;
        pthread_cond_broadcast(&s->job_ended);
        pthread_mutex_unlock(&s->queue_lock);
    }
}

/* PostgreSQL: keeps the running job's lease, with a connection of its own (the worker's may be inside a long
 * transaction). A lease found lost (taken over) or a cancel asked on another node stops the job before its next
 * page. */
static void *renewer_main(void *arg) {
    cq_service *s = arg;
    cq_err err = {0};
    cq_store *st = NULL;
    if (cq_store_open_uri(s->db_path, &st, &err)) {
        CQ_ERROR("job lease renewer: %s", err.msg);
        return NULL;
    }
    for (int tick = 1;; tick++) {
        pthread_mutex_lock(&s->queue_lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (!s->stopping) pthread_cond_timedwait(&s->job_ended, &s->queue_lock, &until);
        bool stop = s->stopping, held = s->lease_held;
        cq_job_lease lease = s->lease;
        pthread_mutex_unlock(&s->queue_lock);
        if (stop && !held) break;
        if (!held || tick % s->renew_s) continue;
        int cancel = 0;
        cq_err e2 = {0};
        cq_status rc = cq_store_job_renew(st, &lease, s->lease_s, &cancel, &e2);
        if (rc == CQ_ERR_DB || rc == CQ_ERR_BUSY) {
            CQ_WARN("job %lld: %s", (long long)lease.job_id, e2.msg);
            cq_err e3 = {0};
            if (cq_store_check(st, &e3)) CQ_WARN("job lease renewer: %s", e3.msg);
            continue;
        }
        pthread_mutex_lock(&s->queue_lock);
        if (s->lease_held && s->lease.job_id == lease.job_id && s->lease.attempt == lease.attempt) {
            if (rc == CQ_ERR_CANCELLED) {
                s->lease_lost = true;
                atomic_store(&s->cancel_running, true);
                CQ_WARN("job %lld: %s: it stops here", (long long)lease.job_id, e2.msg);
            } else if (cancel && !s->cancel_by_user) {
                s->cancel_by_user = true;
                atomic_store(&s->cancel_running, true);
                CQ_INFO("job %lld: cancel requested on another node", (long long)lease.job_id);
            }
        }
        pthread_mutex_unlock(&s->queue_lock);
    }
    cq_store_close(st);
    return NULL;
}

static void *worker_main(void *arg) {
    cq_service *s = arg;
    cq_err err = {0};
    cq_store *st = NULL;
    if (cq_store_open_uri(s->db_path, &st, &err)) {
        CQ_ERROR("ingestion worker: %s", err.msg);
        return NULL;
    }
    if (s->shared_queue) {
        worker_shared(s, st);
        cq_store_close(st);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->queue_lock);
        while (!s->stopping && !s->head) pthread_cond_wait(&s->queue_cond, &s->queue_lock);
        if (s->stopping) {
            pthread_mutex_unlock(&s->queue_lock);
            break;
        }
        cq_svc_queued_job *q = s->head;
        s->head = q->next;
        if (!s->head) s->tail = NULL;
        s->queued--;
        s->running_job = q->id;
        s->cancel_by_user = false;
        atomic_store(&s->cancel_running, false); /* under the lock: a stop from now on sets it for this job */
        pthread_mutex_unlock(&s->queue_lock);
        run_job(s, st, q->id, NULL, false, q->has_upload ? &q->upload : NULL);
        free(q);
        pthread_mutex_lock(&s->queue_lock);
        s->running_job = 0;
        pthread_cond_broadcast(&s->job_ended);
        pthread_mutex_unlock(&s->queue_lock);
    }
    cq_store_close(st);
    return NULL;
}

/* Takes job_id out of the in-memory queue; true if it was there. Under queue_lock. */
static bool dequeue(cq_service *s, int64_t job_id) {
    cq_svc_queued_job *prev = NULL;
    for (cq_svc_queued_job *q = s->head; q; prev = q, q = q->next) {
        if (q->id != job_id) continue;
        if (prev) prev->next = q->next;
        else s->head = q->next;
        if (s->tail == q) s->tail = prev;
        s->queued--;
        free(q);
        return true;
    }
    return false;
}

static cq_status svc_job_cancel(void *ctx, int64_t job_id, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    bool was_queued, was_running = false, still_running = false;
    pthread_mutex_lock(&s->queue_lock);
    was_queued = dequeue(s, job_id);
    if (!was_queued && s->running_job == job_id) {
        was_running = true;
        s->cancel_by_user = true;
        atomic_store(&s->cancel_running, true);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)CANCEL_WAIT_S;
        while (s->running_job == job_id)
            if (pthread_cond_timedwait(&s->job_ended, &s->queue_lock, &until) == ETIMEDOUT) break;
        still_running = s->running_job == job_id;
    }
    pthread_mutex_unlock(&s->queue_lock);
    cq_job_info j;
    cq_status rc = cq_store_job_get(st, job_id, &j, err);
    bool elsewhere = false; /* PostgreSQL: claimed by another node (just now, or before) */
    if (!rc && !was_running && j.state == CQ_JOB_QUEUED) {
        /* it had not started: it ends here, its upload with it */
        cq_err e2 = {0};
        if (cq_store_begin(st, &e2) == CQ_OK) {
            /* on PostgreSQL refused (fenced) when a node claimed it meanwhile: then that node is asked */
            elsewhere = cq_store_job_update(st, job_id, CQ_JOB_CANCELLED, 0, j.total, "cancelled before it started",
                                            &e2) == CQ_ERR_CANCELLED;
            if (!elsewhere) cq_store_job_finish(st, job_id, 0, &e2);
            if (elsewhere || cq_store_commit(st, &e2)) cq_store_rollback(st);
        }
    }
    if (!rc && !was_running && s->shared_queue && (elsewhere || j.state == CQ_JOB_RUNNING)) {
        /* running on another node: its renewer sees the request within its renewal interval (s->renew_s there) */
        rc = cq_store_job_request_cancel(st, job_id, err);
        cq_job_info_free(&j);
        if (!rc) rc = cq_store_job_get(st, job_id, &j, err);
        if (!rc) {
            *out = job_json(st, &j);
            cJSON_AddBoolToObject(*out, "cancel_requested", true);
            CQ_INFO("job %lld: cancel requested of the node running it", (long long)job_id);
        }
        cq_job_info_free(&j);
        cq_svc_pool_put(s, st);
        return rc;
    }
    if (!rc && !was_running && j.state == CQ_JOB_QUEUED) {
        if (j.upload_path) upload_remove(s, j.upload_path);
        atomic_fetch_add(&s->jobs_cancelled, 1);
        CQ_INFO("job %lld (%s): cancelled before it started", (long long)job_id, j.filename ? j.filename : "?");
        cq_job_info_free(&j);
        rc = cq_store_job_get(st, job_id, &j, err);
    } else if (!rc && !was_running && !was_queued) {
        rc = cq_err_set(err, CQ_ERR_EXISTS, "job %lld has ended (%s): there is nothing to cancel%s", (long long)job_id,
                        cq_job_state_name(j.state), j.state == CQ_JOB_READY ? " (delete its document instead)" : "");
    }
    if (!rc) {
        *out = job_json(st, &j);
        /* a running job stops between two pages: one still running after CANCEL_WAIT_S ends cancelled shortly */
        if (still_running) cJSON_AddBoolToObject(*out, "cancel_requested", true);
    }
    cq_job_info_free(&j);
    cq_svc_pool_put(s, st);
    return rc;
}

/* Jobs a previous run left queued or running go back into the queue; uploads no job owns are removed. */
static cq_status resume_jobs(cq_service *s, cq_err *err) {
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_job_info *jobs = NULL;
    size_t n = 0;
    /* PostgreSQL: the shared table is the queue, and another node may be running what is unfinished; leases decide
     * who runs what, nothing is re-queued here. */
    s->shared_queue = cq_store_job_queue_shared(st);
    cq_status rc = s->shared_queue ? CQ_OK : cq_store_job_unfinished(st, &jobs, &n, err);
    if (rc) {
        cq_svc_pool_put(s, st);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        cq_err e2 = {0};
        char *upload = NULL;
        const char *name = jobs[i].filename ? jobs[i].filename : "?";
        bool crashed = jobs[i].state == CQ_JOB_RUNNING; /* a stop queues its running job again */
        if (crashed && jobs[i].attempts >= CQ_JOB_MAX_ATTEMPTS) {
            cq_err why = {0};
            cq_err_set(&why, CQ_ERR_INTERNAL, "not tried again: the server stopped (a crash, or killed for its "
                       "memory) during each of the %d times this document was read", jobs[i].attempts);
            cq_store_job_fail(st, jobs[i].id, 0, jobs[i].total, &why, &e2);
            cq_store_job_finish(st, jobs[i].id, 0, &e2);
            if (jobs[i].upload_path) upload_remove(s, jobs[i].upload_path);
            CQ_WARN("job %lld (%s) failed: %s", (long long)jobs[i].id, name, why.msg);
        } else if ((upload = upload_file(s, jobs[i].upload_path)) && access(upload, R_OK) == 0) {
            cq_store_job_update(st, jobs[i].id, CQ_JOB_QUEUED, 0, jobs[i].total, NULL, &e2);
            enqueue(s, jobs[i].id, NULL);
            if (crashed)
                CQ_WARN("job %lld (%s) was cut off by a crash: it runs again (start %d of at most %d)",
                        (long long)jobs[i].id, name, jobs[i].attempts + 1, CQ_JOB_MAX_ATTEMPTS);
            else
                CQ_INFO("job %lld (%s) resumes", (long long)jobs[i].id, name);
        } else {
            cq_err lost = {0};
            cq_err_set(&lost, CQ_ERR_IO, "the upload was lost when the server stopped");
            cq_store_job_fail(st, jobs[i].id, 0, 0, &lost, &e2);
            cq_store_job_finish(st, jobs[i].id, 0, &e2);
        }
        free(upload);
    }
    cq_job_info_free_array(jobs, n);
    /* Originals no document uses: stored by a job that a crash cut off and that then failed for good (a job that
     * runs again stores its original again). */
    DIR *fd = opendir(s->files_dir);
    struct dirent *fe;
    while (fd && (fe = readdir(fd))) {
        const char *dot = strchr(fe->d_name, '.');
        if (!dot || dot - fe->d_name != 64 || !cq_reader_format_named(dot + 1)) continue;
        char sha[65], path[1200];
        snprintf(sha, sizeof sha, "%.64s", fe->d_name);
        bool in_use = true;
        cq_err e3 = {0};
        if (cq_store_content_in_use(st, sha, &in_use, &e3) == CQ_OK && !in_use) {
            snprintf(path, sizeof path, "%s/%s", s->files_dir, fe->d_name);
            unlink(path);
        }
    }
    if (fd) closedir(fd);
    /* Spooled bodies of requests that never finished, and uploads of jobs deleted with their KB. */
    const char *dirs[] = {s->spool_dir, s->uploads_dir};
    for (int k = 0; k < 2; k++) {
        DIR *d = opendir(dirs[k]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            long long id = 0;
            bool owned = false;
            if (k == 1 && sscanf(e->d_name, "job-%lld.", &id) == 1) {
                cq_job_info j;
                cq_err e3 = {0};
                if (cq_store_job_get(st, id, &j, &e3) == CQ_OK) {
                    owned = j.upload_path && !strcmp(upload_leaf(j.upload_path), e->d_name); /* names, not paths */
                    cq_job_info_free(&j);
                }
            }
            struct stat sb;
            if (!owned && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
        }
        if (d) closedir(d);
    }
    cq_svc_pool_put(s, st);
    return CQ_OK;
}

size_t cq_svc_queue_depth(cq_service *s, int64_t *running) {
    pthread_mutex_lock(&s->queue_lock);
    size_t n = s->queued;
    *running = s->running_job;
    pthread_mutex_unlock(&s->queue_lock);
    if (s->shared_queue) { /* the queue is every node's: the shared table's count (0 when it cannot be read) */
        cq_err err = {0};
        cq_store *st = cq_svc_pool_get(s, &err);
        int64_t queued = 0;
        if (st && cq_store_job_count_queued(st, &queued, &err) == CQ_OK) n = (size_t)queued;
        cq_svc_pool_put(s, st);
    }
    return n;
}

/* The lease of a claimed job on PostgreSQL: CQ_JOB_LEASE_S, or CLAUSEQA_JOB_LEASE_S seconds (whole, within
 * CQ_JOB_LEASE_MIN_S..CQ_JOB_LEASE_MAX_S), renewed every third of it. A shorter lease hands a dead node's job
 * to another node sooner (the cluster test uses 3 s) and costs a renewal statement a second or so; a node that
 * cannot reach PostgreSQL for longer than the lease loses its job. Every node of a cluster should use the same. */
static cq_status job_lease_configure(cq_service *s, cq_err *err) {
    s->lease_s = CQ_JOB_LEASE_S;
    const char *env = getenv("CLAUSEQA_JOB_LEASE_S");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (errno || end == env || *end || v < CQ_JOB_LEASE_MIN_S || v > CQ_JOB_LEASE_MAX_S)
            return cq_err_set(err, CQ_ERR_INVALID,
                              "CLAUSEQA_JOB_LEASE_S='%.40s': the job lease is whole seconds from %d to %d "
                              "(default %d)",
                              env, CQ_JOB_LEASE_MIN_S, CQ_JOB_LEASE_MAX_S, CQ_JOB_LEASE_S);
        s->lease_s = (int)v;
    }
    s->renew_s = s->lease_s / 3 > 0 ? s->lease_s / 3 : 1;
    return CQ_OK;
}

cq_status cq_svc_jobs_start(cq_service *s, cq_err *err) {
    cq_status rc = job_lease_configure(s, err);
    if (!rc) rc = resume_jobs(s, err);
    if (rc) return rc;
    if (s->shared_queue) cq_job_owner_name(s->node_name); /* before the worker claims with it */
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0)
        return cq_err_set(err, CQ_ERR_INTERNAL, "cannot start the ingestion worker");
    s->worker_started = true;
    if (s->shared_queue) {
        if (pthread_create(&s->renewer, NULL, renewer_main, s) != 0)
            return cq_err_set(err, CQ_ERR_INTERNAL, "cannot start the job lease renewer");
        s->renewer_started = true;
        CQ_INFO("ingestion: the shared queue on PostgreSQL, this node claims as '%s' (lease %d s, renewed every %d s)",
                s->node_name, s->lease_s, s->renew_s);
    }
    return CQ_OK;
}

void cq_svc_jobs_interrupt(cq_service *s) {
    pthread_mutex_lock(&s->queue_lock);
    s->stopping = true;
    atomic_store(&s->cancel_running, true); /* the running job stops before its next page */
    pthread_cond_broadcast(&s->queue_cond);
    pthread_mutex_unlock(&s->queue_lock);
}

void cq_svc_jobs_stop(cq_service *s) {
    cq_svc_jobs_interrupt(s);
    if (s->worker_started) pthread_join(s->worker, NULL);
    if (s->renewer_started) pthread_join(s->renewer, NULL);
    while (s->head) {
        cq_svc_queued_job *q = s->head;
        s->head = q->next;
        free(q);
    }
}

void cq_svc_jobs_web(cq_web_service *w) {
    w->upload = svc_upload;
    w->job_get = svc_job_get;
    w->job_list = svc_job_list;
    w->job_cancel = svc_job_cancel;
}
