/* The service the HTTP server calls (web/server.h), built on the pipelines: see app/service.h. This file is its
 * life cycle and what every concern shares (app/service_internal.h): the store connections, the KB lookup the
 * handlers start with, a document's JSON with its page quality, and the paths under the data directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/json.h"
#include "app/service_internal.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "core/log.h"
#include "db/db.h"
#include "reader/reader.h"

#define DEFAULT_MAX_CONNECTIONS 16

char *cq_svc_path_join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* ---- store connections ---------------------------------------------------------------------------------------- */

/* A pooled connection is checked as it is taken: one the PostgreSQL server dropped (a restart) is re-established,
 * with backoff (db/db_pg.c); meanwhile, and while no new connection can be made, the request is told the store is
 * unreachable (CQ_ERR_BUSY: 503 + Retry-After), never a 401 or a 500. */
cq_store *cq_svc_pool_get(cq_service *s, cq_err *err) {
    pthread_mutex_lock(&s->pool_lock);
    cq_store *st = s->n_pool ? s->pool[--s->n_pool] : NULL;
    pthread_mutex_unlock(&s->pool_lock);
    if (st) {
        if (!cq_store_check(st, err)) return st;
        cq_svc_pool_put(s, st); /* kept: the next check retries it when its backoff allows */
        return NULL;
    }
    if (!cq_store_open_uri(s->db_path, &st, err)) return st;
    if (err && err->code == CQ_ERR_DB && cq_db_where_kind(s->db_path) == CQ_DB_POSTGRESQL &&
        strstr(err->msg, "cannot connect to PostgreSQL")) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        cq_err_set_reason(err, CQ_ERR_BUSY, "store_unreachable", "store unreachable: %s", msg);
        err->retry_after_s = 1;
    }
    return NULL;
}

void cq_svc_pool_put(cq_service *s, cq_store *st) {
    if (!st) return;
    cq_store_rollback(st); /* never hand on an open transaction */
    pthread_mutex_lock(&s->pool_lock);
    if (s->n_pool < s->max_pool) {
        s->pool[s->n_pool++] = st;
        st = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    cq_store_close(st);
}

cq_store *cq_svc_open_kb(cq_service *s, const char *kb, int64_t *kb_id, cq_err *err) {
    if (!cq_store_kb_name_valid(kb)) {
        cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base named '%s'", kb);
        return NULL;
    }
    cq_store *st = cq_svc_pool_get(s, err);
    if (st && cq_store_kb_find(st, kb, kb_id, err)) {
        cq_svc_pool_put(s, st);
        return NULL;
    }
    return st;
}

cq_status cq_svc_kb_list(cq_service *s, cq_kb_info **kbs, size_t *n, cq_err *err) {
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc = cq_store_kb_list(st, kbs, n, err);
    cq_svc_pool_put(s, st);
    return rc;
}

cq_status cq_svc_kb_name(cq_store *st, int64_t kb_id, char kb[128], cq_err *err) {
    cq_kb_info info;
    cq_status rc = cq_store_kb_get(st, kb_id, &info, err);
    if (!rc) snprintf(kb, 128, "%s", info.name);
    return rc;
}

cJSON *cq_svc_doc_json(cq_store *st, const cq_doc_info *d, const char *kb, bool all_pages) {
    cJSON *o = cq_json_doc(d, kb);
    cq_page_info *pages;
    size_t n;
    cq_err err = {0};
    if (cq_store_page_list(st, d->id, &pages, &n, &err) == CQ_OK) {
        cq_json_doc_add_pages(o, pages, n, all_pages);
        free(pages);
    }
    cJSON *v = all_pages ? cq_svc_version_json(st, d->id) : NULL; /* one document: with its group's versions */
    if (v) cJSON_AddItemToObject(o, "version", v);
    return o;
}

/* ---- life cycle ----------------------------------------------------------------------------------------------- */

void cq_service_web(cq_service *svc, cq_web_service *w) {
    memset(w, 0, sizeof *w);
    w->ctx = svc;
    cq_svc_auth_web(w);
    cq_svc_admin_web(w);
    cq_svc_metrics_web(w);
    cq_svc_library_web(w);
    cq_svc_jobs_web(w);
    cq_svc_ask_web(w);
    cq_svc_versions_web(w);
    cq_svc_conversations_web(w);
    cq_svc_feedback_web(w);
}

const char *cq_service_spool_dir(const cq_service *svc) { return svc->spool_dir; }

/* The folders of documents' contents are their owner's only (0700): new ones are made so (cq_mkdirs), and those a
 * data directory of an earlier version made 0755 are closed at the start. The data directory itself is the
 * operator's (it may hold models others read). */
static void private_folders(const char *data_dir) {
    static const char *const mine[] = {"files", "uploads", "uploads/spool", "cache", "cache/pages", "vectors"};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", data_dir, mine[i]);
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 077) && chmod(path, 0700) != 0)
            CQ_WARN("%s is readable by others and cannot be made private: %s", path, strerror(errno));
    }
}

cq_status cq_service_open(const cq_service_config *config, cq_service **out, cq_err *err) {
    *out = NULL;
    cq_service *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_mutex_init(&s->auth_lock, NULL);
    pthread_cond_init(&s->signin_cond, NULL);
    cq_login_limit_init(&s->logins);
    pthread_mutex_init(&s->queue_lock, NULL);
    pthread_mutex_init(&s->phase_lock, NULL);
    pthread_cond_init(&s->queue_cond, NULL);
    pthread_cond_init(&s->job_ended, NULL);
    s->started_at = cq_clock_seconds();
    s->auth_checked_at = -1e9;
    s->allow_open = config->allow_open;
    if (config->ldap) s->ldap = *config->ldap;
    s->decoder = config->decoder;
    s->max_pages = config->max_pages > 0 ? config->max_pages : config->max_pages < 0 ? 0 : CQ_READER_DEFAULT_MAX_PAGES;
    s->doc_memory_bytes = (size_t)(config->doc_memory_mb > 0   ? config->doc_memory_mb
                                   : config->doc_memory_mb < 0 ? 0
                                                               : CQ_READER_DEFAULT_MAX_MB) << 20;
    s->models = config->models;
    s->ocr = config->ocr;
    cq_admission_init(&s->asks, config->max_asks > 0 ? config->max_asks : CQ_ADMISSION_DEFAULT_ACTIVE,
                      config->max_waiting_asks > 0   ? config->max_waiting_asks
                      : config->max_waiting_asks < 0 ? 0
                                                     : CQ_ADMISSION_DEFAULT_WAITING,
                      config->ask_wait_s > 0 ? config->ask_wait_s : CQ_ADMISSION_DEFAULT_WAIT_S);
    s->max_pool = config->max_connections > 0 ? (size_t)config->max_connections : DEFAULT_MAX_CONNECTIONS;
    s->pool = calloc(s->max_pool, sizeof *s->pool);
    s->data_dir = strdup(config->data_dir);
    /* "sqlite:": a data folder whose name looks like a libpq keyword string ("a=b") is still a folder */
    if (config->store) {
        s->db_path = strdup(config->store);
    } else {
        size_t n = strlen(config->data_dir) + 32;
        if ((s->db_path = malloc(n))) snprintf(s->db_path, n, "sqlite:%s/clauseqa.db", config->data_dir);
    }
    s->files_dir = cq_svc_path_join(config->data_dir, "files");
    s->uploads_dir = cq_svc_path_join(config->data_dir, "uploads");
    s->spool_dir = cq_svc_path_join(config->data_dir, "uploads/spool");
    s->cache_dir = cq_svc_path_join(config->data_dir, "cache/pages");
    if (!s->pool || !s->data_dir || !s->db_path || !s->files_dir || !s->uploads_dir || !s->spool_dir ||
        !s->cache_dir) {
        cq_service_close(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_status rc = CQ_OK;
    const char *dirs[] = {s->files_dir, s->spool_dir, s->cache_dir};
    for (int i = 0; i < 3 && !rc; i++) rc = cq_mkdirs(dirs[i], err);
    for (int i = 0; i < 3 && !rc; i++) cq_remove_stale_temp_files(dirs[i], CQ_TEMP_STALE_AGE_S); /* crashed writes */
    if (!rc) private_folders(config->data_dir);
    if (!rc) { /* dense retrieval needs trained weights; without them the server answers with router + BM25 */
        cq_err derr = {0};
        const char *weights = s->models && s->models->encoder_origin ? s->models->encoder : NULL;
        char searched[3400] = "";
        if (s->models) cq_models_searched(s->models, searched, sizeof searched);
        if (!weights)
            CQ_INFO("dense retrieval off: no trained encoder weights (ssm/ssm.json) in %s", searched);
        else if (cq_dense_open_configured(s->data_dir, weights, &s->dense, &derr) == CQ_OK)
            CQ_INFO("dense retrieval on: encoder weights %s (%s)", weights, s->models->encoder_origin);
        else if (derr.code == CQ_ERR_UNSUPPORTED)
            CQ_INFO("dense retrieval off: %s", derr.msg);
        else
            CQ_ERROR("dense retrieval off: the encoder weights cannot be used: %s", derr.msg);
    }
    cq_store *st = NULL;
    if (!rc) rc = cq_store_open_uri(s->db_path, &st, err); /* creates and migrates the database up front */
    cq_svc_pool_put(s, st);
    if (!rc) rc = cq_svc_jobs_start(s, err);
    if (rc) {
        cq_service_close(s);
        return rc;
    }
    *out = s;
    return CQ_OK;
}

void cq_service_interrupt_jobs(cq_service *s) { cq_svc_jobs_interrupt(s); }

void cq_service_close(cq_service *s) {
    if (!s) return;
    cq_svc_jobs_stop(s);
    for (size_t i = 0; i < s->n_pool; i++) cq_store_close(s->pool[i]);
    free(s->pool);
    cq_dense_close(s->dense); /* after the worker that used it; saves the changed FAISS files */
    cq_admission_destroy(&s->asks);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_mutex_destroy(&s->auth_lock);
    pthread_cond_destroy(&s->signin_cond);
    cq_login_limit_destroy(&s->logins);
    pthread_mutex_destroy(&s->queue_lock);
    pthread_mutex_destroy(&s->phase_lock);
    pthread_cond_destroy(&s->queue_cond);
    pthread_cond_destroy(&s->job_ended);
    free(s->data_dir);
    free(s->db_path);
    free(s->files_dir);
    free(s->uploads_dir);
    free(s->spool_dir);
    free(s->cache_dir);
    free(s);
}
