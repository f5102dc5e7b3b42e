#include "index/jobs.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/jobs_pg.h"
#include "index/store_pg.h"

static cq_status db_error(cq_store *s, cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_DB, "%s: %s", what, sqlite3_errmsg(cq_store_db(s)));
}

static char *col_strdup(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

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

cq_status cq_store_job_set_upload(cq_store *s, int64_t job_id, const char *filename, const char *upload_path,
                                  int64_t size_bytes, int replace, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_set_upload(pg, job_id, filename, upload_path, size_bytes, replace, err);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "UPDATE jobs SET filename = ?, upload_path = ?, size_bytes = ?, replace_doc = ?, updated_at = ? "
                           "WHERE id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "record upload");
    sqlite3_bind_text(st, 1, filename, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, upload_path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, size_bytes);
    sqlite3_bind_int(st, 4, replace ? 1 : 0);
    sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
    sqlite3_bind_int64(st, 6, job_id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "record upload");
}

/* Runs an UPDATE of one job whose only parameters are ?1 (updated_at) and ?2 (the id). */
static cq_status job_exec(cq_store *s, const char *sql, int64_t job_id, const char *what, cq_err *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) return db_error(s, err, what);
    sqlite3_bind_int64(st, 1, (int64_t)time(NULL));
    sqlite3_bind_int64(st, 2, job_id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, what);
}

cq_status cq_store_job_begin_attempt(cq_store *s, int64_t job_id, int *attempts, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_begin_attempt(pg, job_id, attempts, err);
    cq_status rc = job_exec(s,
                            "UPDATE jobs SET state = 'running', done = 0, error = NULL, attempts = attempts + 1, "
                            "updated_at = ?1 WHERE id = ?2",
                            job_id, "start job", err);
    if (rc || !attempts) return rc;
    cq_job_info j;
    rc = cq_store_job_get(s, job_id, &j, err);
    *attempts = rc ? 0 : j.attempts;
    cq_job_info_free(&j);
    return rc;
}

cq_status cq_store_job_interrupted(cq_store *s, int64_t job_id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_interrupted(pg, job_id, err);
    return job_exec(s,
                    "UPDATE jobs SET state = 'queued', done = 0, attempts = max(attempts - 1, 0), updated_at = ?1 "
                    "WHERE id = ?2",
                    job_id, "requeue job", err);
}

cq_status cq_store_job_finish(cq_store *s, int64_t job_id, int64_t doc_id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_finish(pg, job_id, doc_id, err);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "UPDATE jobs SET doc_id = ?, upload_path = NULL, updated_at = ? WHERE id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "finish job");
    if (doc_id > 0) sqlite3_bind_int64(st, 1, doc_id);
    else sqlite3_bind_null(st, 1);
    sqlite3_bind_int64(st, 2, (int64_t)time(NULL));
    sqlite3_bind_int64(st, 3, job_id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? CQ_OK : db_error(s, err, "finish job");
}

cq_status cq_store_job_fail(cq_store *s, int64_t job_id, int done, int total, const cq_err *why, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_fail(pg, job_id, done, total, why, err);
    cq_status rc = cq_store_job_update(s, job_id, "failed", done, total, why->msg, err);
    if (rc) return rc;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "UPDATE jobs SET error_code = ? WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "fail job");
    sqlite3_bind_text(st, 1, why->code ? cq_err_name(why) : cq_status_name(CQ_ERR_INTERNAL), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, job_id);
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    return step == SQLITE_DONE ? CQ_OK : db_error(s, err, "fail job");
}

#define JOB_COLUMNS                                                                                                 \
    "j.id, j.kb_id, coalesce(j.doc_id, 0), k.name, j.state, j.done, j.total, j.error, j.filename, j.upload_path, " \
    "coalesce(j.size_bytes, 0), j.created_at, j.updated_at, j.replace_doc, coalesce(j.error_code, ''), "      \
    "j.attempts "                                                                                               \
    "FROM jobs j JOIN kbs k ON k.id = j.kb_id"

static void job_from_row(sqlite3_stmt *st, cq_job_info *j) {
    memset(j, 0, sizeof *j);
    j->id = sqlite3_column_int64(st, 0);
    j->kb_id = sqlite3_column_int64(st, 1);
    j->doc_id = sqlite3_column_int64(st, 2);
    snprintf(j->kb, sizeof j->kb, "%s", (const char *)sqlite3_column_text(st, 3));
    snprintf(j->state, sizeof j->state, "%s", (const char *)sqlite3_column_text(st, 4));
    j->done = sqlite3_column_int(st, 5);
    j->total = sqlite3_column_int(st, 6);
    j->error = col_strdup(st, 7);
    j->filename = col_strdup(st, 8);
    j->upload_path = col_strdup(st, 9);
    j->size_bytes = sqlite3_column_int64(st, 10);
    j->created_at = sqlite3_column_int64(st, 11);
    j->updated_at = sqlite3_column_int64(st, 12);
    j->replace = sqlite3_column_int(st, 13);
    snprintf(j->error_code, sizeof j->error_code, "%s", (const char *)sqlite3_column_text(st, 14));
    j->attempts = sqlite3_column_int(st, 15);
}

/* Runs a job query whose ?1 (when bound >= 0) is an id and ?2 a limit; collects the rows. */
static cq_status job_query(cq_store *s, const char *sql, int64_t id, int64_t limit, cq_job_info **out, size_t *n,
                           cq_err *err) {
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) return db_error(s, err, "list jobs");
    if (sqlite3_bind_parameter_count(st) >= 1) sqlite3_bind_int64(st, 1, id);
    if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int64(st, 2, limit);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            cq_job_info *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                cq_job_info_free_array(*out, *n);
                *out = NULL;
                *n = 0;
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            *out = p;
        }
        job_from_row(st, &(*out)[(*n)++]);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        cq_job_info_free_array(*out, *n);
        *out = NULL;
        *n = 0;
        return db_error(s, err, "list jobs");
    }
    return CQ_OK;
}

cq_status cq_store_job_get(cq_store *s, int64_t job_id, cq_job_info *out, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_get(pg, job_id, out, err);
    cq_job_info *rows;
    size_t n;
    memset(out, 0, sizeof *out);
    cq_status rc = job_query(s, "SELECT " JOB_COLUMNS " WHERE j.id = ?1", job_id, 0, &rows, &n, err);
    if (rc) return rc;
    if (n == 0) {
        free(rows);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no job with id %lld", (long long)job_id);
    }
    *out = rows[0];
    free(rows);
    return CQ_OK;
}

cq_status cq_store_job_list(cq_store *s, int64_t kb_id, size_t limit, cq_job_info **out, size_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_list(pg, kb_id, limit, out, n, err);
    const char *sql = kb_id ? "SELECT " JOB_COLUMNS " WHERE j.kb_id = ?1 ORDER BY j.id DESC LIMIT ?2"
                            : "SELECT " JOB_COLUMNS " WHERE ?1 = 0 ORDER BY j.id DESC LIMIT ?2";
    return job_query(s, sql, kb_id, (int64_t)limit, out, n, err);
}

cq_status cq_store_job_unfinished(cq_store *s, cq_job_info **out, size_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_job_unfinished(pg, out, n, err);
    return job_query(s, "SELECT " JOB_COLUMNS " WHERE j.state IN ('queued', 'running') ORDER BY j.id", 0, 0, out, n,
                     err);
}

cq_status cq_store_page_list(cq_store *s, int64_t doc_id, cq_page_info **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_pg *pg = cq_store_pg(s); /* pages are the store's (index/store_pg.h) */
    if (pg) return cq_pg_page_list(pg, doc_id, out, n, err);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "SELECT page_no, width, height, n_chars, quality, quality_reason FROM pages WHERE doc_id = ? "
                           "ORDER BY page_no",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "list pages");
    sqlite3_bind_int64(st, 1, doc_id);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            cq_page_info *p = realloc(*out, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                free(*out);
                *out = NULL;
                *n = 0;
                return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            }
            *out = p;
        }
        cq_page_info *p = &(*out)[(*n)++];
        p->page_no = sqlite3_column_int(st, 0);
        p->width = (float)sqlite3_column_double(st, 1);
        p->height = (float)sqlite3_column_double(st, 2);
        p->n_chars = sqlite3_column_int(st, 3);
        p->quality = sqlite3_column_double(st, 4);
        const unsigned char *r = sqlite3_column_text(st, 5);
        snprintf(p->quality_reason, sizeof p->quality_reason, "%s", r ? (const char *)r : "");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return db_error(s, err, "list pages");
    }
    return CQ_OK;
}
