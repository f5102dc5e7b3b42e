/* The service the HTTP server calls (web/server.h), built on the pipelines: see app/service.h. */
#include "app/service.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/answer.h"
#include "app/cli_common.h"
#include "app/followup.h"
#include "app/ingest.h"
#include "app/page_render.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "index/jobs.h"
#include "index/keys.h"
#include "index/retrieve.h"
#include "index/router.h"
#include "index/store.h"
#include "index/vectors.h"
#include "attention/decoder.h"

#define DEFAULT_MAX_CONNECTIONS 16
#define JOB_LIST_LIMIT 100
#define HISTORY_TURNS_MAX 12     /* turns of history looked at for follow-up context */
#define PAGE_WARNINGS_MAX 20     /* page quality warnings listed per document */
#define PAGE_QUALITY_WARN 0.8    /* pages below this text quality are warned about */
#define OPEN_MODE_RECHECK_S 1.0  /* how long "no keys exist" is trusted before asking the database again */
#define STREAM_CHUNK_CHARS 4     /* answer text is streamed in pieces of about this many characters */
#define FILENAME_MAX_BYTES 200
#define PROGRESS_INTERVAL_S 0.2  /* how often a running job's page count is written */
#define STALE_TEMP_AGE_S 10      /* temporary files this old that no writer holds are a crashed write's */

typedef struct queued_job {
    int64_t id;
    struct queued_job *next;
} queued_job;

struct cq_service {
    char *data_dir, *db_path, *files_dir, *uploads_dir, *spool_dir, *cache_dir;
    bool allow_open;
    double started_at;
    cq_dense *dense; /* trained encoder + the KBs' vector indexes, NULL without weights; every connection carries it */
    cq_decoder *decoder; /* writes the answers (borrowed from the config), NULL: extractive answers */

    pthread_mutex_t pool_lock;
    cq_store **pool;
    size_t n_pool, max_pool;

    pthread_mutex_t auth_lock;
    double auth_checked_at;
    bool open_now;

    pthread_mutex_t queue_lock;
    pthread_cond_t queue_cond;
    queued_job *head, *tail;
    size_t queued;
    int64_t running_job;
    bool stopping, worker_started;
    pthread_t worker;

    /* counters for /metrics */
    atomic_uint_fast64_t jobs_ready, jobs_failed, jobs_duplicate, ingest_pages, ingest_ms;
    atomic_uint_fast64_t answers, abstentions, retrievals, chunks_streamed, pages_rendered, page_cache_hits;
    atomic_uint_fast64_t tokens_generated, answers_generated, answers_fallback;
};

/* Milliseconds between two times in seconds, to the microsecond (JSON stays readable). */
static double ms_between(double t0, double t1) { return (double)(long long)((t1 - t0) * 1e6 + 0.5) / 1e3; }

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *path_join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* ---- store connections ---------------------------------------------------------------------------------------- */

static cq_store *pool_get(cq_service *s, cq_err *err) {
    pthread_mutex_lock(&s->pool_lock);
    cq_store *st = s->n_pool ? s->pool[--s->n_pool] : NULL;
    pthread_mutex_unlock(&s->pool_lock);
    if (st) return st;
    if (cq_store_open(s->db_path, &st, err)) return NULL;
    cq_dense_attach(st, s->dense);
    return st;
}

static void pool_put(cq_service *s, cq_store *st) {
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

/* ---- JSON helpers --------------------------------------------------------------------------------------------- */

static cJSON *str_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

static cq_status kb_name_of(cq_store *st, int64_t kb_id, char kb[128], cq_err *err) {
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_store_kb_list(st, &kbs, &n, err);
    if (rc) return rc;
    rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base with id %lld", (long long)kb_id);
    for (size_t i = 0; i < n; i++)
        if (kbs[i].id == kb_id) {
            snprintf(kb, 128, "%s", kbs[i].name);
            cq_err_clear(err);
            rc = CQ_OK;
        }
    free(kbs);
    return rc;
}

static cJSON *kb_json(const cq_kb_info *k) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", k->name);
    cJSON_AddNumberToObject(o, "documents", (double)k->n_documents);
    cJSON_AddNumberToObject(o, "clauses", (double)k->n_clauses);
    cJSON_AddNumberToObject(o, "created_at", (double)k->created_at);
    return o;
}

static cJSON *doc_json(const cq_doc_info *d, const char *kb) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)d->id);
    cJSON_AddStringToObject(o, "kb", kb);
    cJSON_AddStringToObject(o, "name", d->name ? d->name : "");
    cJSON_AddStringToObject(o, "filename", d->filename ? d->filename : "");
    cJSON_AddStringToObject(o, "format", d->format ? d->format : "");
    cJSON_AddStringToObject(o, "sha256", d->sha256);
    cJSON_AddNumberToObject(o, "size_bytes", (double)d->size_bytes);
    cJSON_AddItemToObject(o, "title", str_or_null(d->title));
    cJSON_AddNumberToObject(o, "pages", d->n_pages);
    cJSON_AddNumberToObject(o, "clauses", d->n_clauses);
    cJSON_AddStringToObject(o, "status", d->status ? d->status : "");
    cJSON_AddItemToObject(o, "error", str_or_null(d->error));
    cJSON_AddNumberToObject(o, "quality", d->quality);
    cJSON_AddStringToObject(o, "quality_reason", d->quality_reason ? d->quality_reason : "");
    cJSON_AddNumberToObject(o, "created_at", (double)d->created_at);
    char url[96];
    snprintf(url, sizeof url, "/api/v1/documents/%lld/original", (long long)d->id);
    cJSON_AddStringToObject(o, "original_url", url);
    return o;
}

/* Adds the pages' quality and the warnings a person should see (pages below PAGE_QUALITY_WARN). */
static void add_page_quality(cq_store *st, cJSON *o, int64_t doc_id, bool all_pages) {
    cq_page_info *pages;
    size_t n;
    cq_err err = {0};
    if (cq_store_page_list(st, doc_id, &pages, &n, &err)) return;
    cJSON *warnings = cJSON_AddArrayToObject(o, "warnings");
    cJSON *list = all_pages ? cJSON_AddArrayToObject(o, "page_quality") : NULL;
    size_t n_warn = 0, n_low = 0;
    for (size_t i = 0; i < n; i++) {
        const cq_page_info *p = &pages[i];
        if (list) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "page", p->page_no);
            cJSON_AddNumberToObject(x, "quality", p->quality);
            cJSON_AddNumberToObject(x, "chars", p->n_chars);
            cJSON_AddStringToObject(x, "reason", p->quality_reason);
            cJSON_AddItemToArray(list, x);
        }
        if (p->quality < PAGE_QUALITY_WARN) {
            n_low++;
            if (n_warn++ < PAGE_WARNINGS_MAX) {
                char w[220];
                snprintf(w, sizeof w, "page %d: %s", p->page_no,
                         p->quality_reason[0] ? p->quality_reason : "low text quality");
                cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
            }
        }
    }
    if (n_low > PAGE_WARNINGS_MAX) {
        char w[96];
        snprintf(w, sizeof w, "... and %zu more pages", n_low - PAGE_WARNINGS_MAX);
        cJSON_AddItemToArray(warnings, cJSON_CreateString(w));
    }
    free(pages);
}

static cJSON *job_json(cq_store *st, const cq_job_info *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)j->id);
    cJSON_AddStringToObject(o, "kb", j->kb);
    cJSON_AddStringToObject(o, "state", j->state);
    cJSON_AddStringToObject(o, "filename", j->filename ? j->filename : "");
    cJSON_AddNumberToObject(o, "size_bytes", (double)j->size_bytes);
    cJSON_AddNumberToObject(o, "done", j->done);
    cJSON_AddNumberToObject(o, "total", j->total);
    bool ended = strcmp(j->state, "queued") && strcmp(j->state, "running");
    double progress = ended ? 1 : j->total > 0 ? (double)j->done / j->total : 0;
    cJSON_AddNumberToObject(o, "progress", progress);
    cJSON_AddItemToObject(o, "error", str_or_null(j->error));
    cJSON_AddItemToObject(o, "document_id", j->doc_id ? cJSON_CreateNumber((double)j->doc_id) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "created_at", (double)j->created_at);
    cJSON_AddNumberToObject(o, "updated_at", (double)j->updated_at);
    char url[64];
    snprintf(url, sizeof url, "/api/v1/jobs/%lld", (long long)j->id);
    cJSON_AddStringToObject(o, "url", url);
    if (j->doc_id && st) {
        cq_doc_info d;
        cq_err err = {0};
        if (!cq_store_doc_get(st, j->doc_id, &d, &err)) {
            cJSON *doc = doc_json(&d, j->kb);
            add_page_quality(st, doc, d.id, false);
            cJSON_AddItemToObject(o, "document", doc);
            cq_doc_info_free(&d);
        }
    }
    return o;
}

/* ---- files under the data directory -------------------------------------------------------------------------- */

static bool is_sha256_hex(const char *s) {
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static bool known_format(const char *f) { return f && (!strcmp(f, "pdf") || !strcmp(f, "md") || !strcmp(f, "txt")); }

/* Is content sha256 still used by a document in any KB? */
static bool sha_in_use(cq_store *st, const char *sha) {
    cq_kb_info *kbs;
    size_t n;
    cq_err err = {0};
    if (cq_store_kb_list(st, &kbs, &n, &err)) return true; /* when unsure, keep the file */
    bool used = false;
    for (size_t i = 0; i < n && !used; i++) {
        cq_doc_info d;
        if (cq_store_doc_by_hash(st, kbs[i].id, sha, &d, &err) == CQ_OK) {
            used = true;
            cq_doc_info_free(&d);
        }
    }
    free(kbs);
    return used;
}

/* Removes the original and the cached page images of content sha once no document uses it any more. */
static void remove_files_of(cq_service *s, cq_store *st, const char *sha, const char *format) {
    if (!is_sha256_hex(sha) || !known_format(format) || sha_in_use(st, sha)) return;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.%s", s->files_dir, sha, format);
    unlink(path);
    DIR *d = opendir(s->cache_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, sha, 64) && e->d_name[64] == '-') {
            snprintf(path, sizeof path, "%s/%s", s->cache_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

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

/* ---- keys ----------------------------------------------------------------------------------------------------- */

bool cq_service_open_mode(cq_service *s) {
    if (!s->allow_open) return false;
    pthread_mutex_lock(&s->auth_lock);
    double now = now_seconds();
    bool stale = now - s->auth_checked_at > OPEN_MODE_RECHECK_S;
    bool open_now = s->open_now;
    pthread_mutex_unlock(&s->auth_lock);
    if (!stale) return open_now;
    cq_err err = {0};
    cq_store *st = pool_get(s, &err);
    bool open = false;
    if (st) cq_store_auth_open(st, &open, &err); /* index/keys.h: stays closed once a key has existed */
    pool_put(s, st);
    pthread_mutex_lock(&s->auth_lock);
    if (open != s->open_now && s->auth_checked_at > 0)
        CQ_WARN("%s", open ? "auth: open mode ON (clauseqa keys open-mode on): requests are not authenticated"
                           : "auth: authentication ON: requests need an API key");
    s->open_now = open;
    s->auth_checked_at = now;
    open_now = s->open_now;
    pthread_mutex_unlock(&s->auth_lock);
    return open_now;
}

static cq_status svc_authenticate(void *ctx, const char *bearer, cq_web_principal *who, cq_err *err) {
    cq_service *s = ctx;
    memset(who, 0, sizeof *who);
    if (cq_service_open_mode(s)) {
        who->role = CQ_WEB_ADMIN;
        snprintf(who->name, sizeof who->name, "open-mode");
        return CQ_OK;
    }
    if (!bearer) return cq_err_set(err, CQ_ERR_NOT_FOUND, "an API key is required: Authorization: Bearer <key>");
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_key_info k;
    cq_status rc = cq_store_key_check(st, bearer, &k, err);
    pool_put(s, st);
    if (rc) return rc;
    who->key_id = k.id;
    who->role = k.role == CQ_ROLE_ADMIN ? CQ_WEB_ADMIN : k.role == CQ_ROLE_EDITOR ? CQ_WEB_EDIT : CQ_WEB_READ;
    snprintf(who->kb, sizeof who->kb, "%s", k.kb);
    snprintf(who->name, sizeof who->name, "%s", k.name);
    return CQ_OK;
}

static bool svc_allows(void *ctx, const cq_web_principal *who, cq_web_role need, const char *kb) {
    (void)ctx;
    if (need == CQ_WEB_NONE) return true;
    cq_key_info k = {0};
    k.role = who->role == CQ_WEB_ADMIN ? CQ_ROLE_ADMIN : who->role == CQ_WEB_EDIT ? CQ_ROLE_EDITOR
             : who->role == CQ_WEB_READ ? CQ_ROLE_READER : CQ_ROLE_NONE;
    snprintf(k.kb, sizeof k.kb, "%s", who->kb);
    cq_key_role r = need == CQ_WEB_ADMIN ? CQ_ROLE_ADMIN : need == CQ_WEB_EDIT ? CQ_ROLE_EDITOR : CQ_ROLE_READER;
    return cq_key_allows(&k, r, kb) != 0;
}

/* ---- health and metrics --------------------------------------------------------------------------------------- */

static size_t queue_depth(cq_service *s, int64_t *running) {
    pthread_mutex_lock(&s->queue_lock);
    size_t n = s->queued;
    *running = s->running_job;
    pthread_mutex_unlock(&s->queue_lock);
    return n;
}

static cq_status svc_health(void *ctx, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_store_kb_list(st, &kbs, &n, err);
    pool_put(s, st);
    if (rc) return rc;
    int64_t docs = 0;
    for (size_t i = 0; i < n; i++) docs += kbs[i].n_documents;
    free(kbs);
    int64_t running;
    size_t queued = queue_depth(s, &running);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "version", "0.1.0");
    cJSON_AddNumberToObject(o, "uptime_s", (double)(long long)(now_seconds() - s->started_at));
    cJSON_AddBoolToObject(o, "auth", !cq_service_open_mode(s));
    cJSON_AddNumberToObject(o, "kbs", (double)n);
    cJSON_AddNumberToObject(o, "documents", (double)docs);
    cJSON *q = cJSON_AddObjectToObject(o, "ingest_queue");
    cJSON_AddNumberToObject(q, "queued", (double)queued);
    cJSON_AddItemToObject(q, "running_job", running ? cJSON_CreateNumber((double)running) : cJSON_CreateNull());
    cJSON *m = cJSON_AddObjectToObject(o, "models");
    cJSON_AddStringToObject(m, "answers", s->decoder ? "generated" : "extractive");
    cJSON_AddBoolToObject(m, "decoder_loaded", s->decoder != NULL);
    if (s->decoder) {
        const cq_decoder_info *di = cq_decoder_get_info(s->decoder);
        cJSON_AddStringToObject(m, "decoder", di->name);
        cJSON_AddStringToObject(m, "decoder_device", cq_device_name(di->device));
    }
    cJSON_AddBoolToObject(m, "encoder_loaded", s->dense != NULL);
    if (s->dense) cJSON_AddStringToObject(m, "encoder_device", cq_ssm_backend_name(cq_dense_backend(s->dense)));
    *out = o;
    return CQ_OK;
}

static void svc_metrics(void *ctx, cq_strbuf *b) {
    cq_service *s = ctx;
    int64_t running;
    size_t queued = queue_depth(s, &running);
    double pages = (double)atomic_load(&s->ingest_pages), ms = (double)atomic_load(&s->ingest_ms);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_ingest_queue_depth Ingestion jobs waiting or running.\n"
                     "# TYPE clauseqa_ingest_queue_depth gauge\n"
                     "clauseqa_ingest_queue_depth %zu\n"
                     "# HELP clauseqa_ingest_jobs_total Ingestion jobs ended, by outcome.\n"
                     "# TYPE clauseqa_ingest_jobs_total counter\n"
                     "clauseqa_ingest_jobs_total{state=\"ready\"} %llu\n"
                     "clauseqa_ingest_jobs_total{state=\"failed\"} %llu\n"
                     "clauseqa_ingest_jobs_total{state=\"duplicate\"} %llu\n"
                     "# HELP clauseqa_ingest_pages_total Pages ingested.\n"
                     "# TYPE clauseqa_ingest_pages_total counter\n"
                     "clauseqa_ingest_pages_total %.0f\n"
                     "# HELP clauseqa_ingest_seconds_total Time spent ingesting.\n"
                     "# TYPE clauseqa_ingest_seconds_total counter\n"
                     "clauseqa_ingest_seconds_total %.3f\n"
                     "# HELP clauseqa_ingest_pages_per_second Pages ingested per second of ingestion, since start.\n"
                     "# TYPE clauseqa_ingest_pages_per_second gauge\n"
                     "clauseqa_ingest_pages_per_second %.2f\n",
                     queued + (running ? 1 : 0), (unsigned long long)atomic_load(&s->jobs_ready),
                     (unsigned long long)atomic_load(&s->jobs_failed),
                     (unsigned long long)atomic_load(&s->jobs_duplicate), pages, ms / 1e3,
                     ms > 0 ? pages / (ms / 1e3) : 0.0);
    cq_strbuf_printf(b,
                     "# HELP clauseqa_answers_total Questions answered (abstentions included).\n"
                     "# TYPE clauseqa_answers_total counter\n"
                     "clauseqa_answers_total %llu\n"
                     "# HELP clauseqa_abstentions_total Questions the documents did not answer.\n"
                     "# TYPE clauseqa_abstentions_total counter\n"
                     "clauseqa_abstentions_total %llu\n"
                     "# HELP clauseqa_retrievals_total Retrieve requests.\n"
                     "# TYPE clauseqa_retrievals_total counter\n"
                     "clauseqa_retrievals_total %llu\n"
                     "# HELP clauseqa_generated_tokens_total Tokens generated by the decoder (extractive answers "
                     "generate none).\n"
                     "# TYPE clauseqa_generated_tokens_total counter\n"
                     "clauseqa_generated_tokens_total %llu\n"
                     "# HELP clauseqa_answers_generated_total Answers written by the decoder, and generated answers "
                     "replaced by the extractive one (not verified against the clauses, or a decoder error).\n"
                     "# TYPE clauseqa_answers_generated_total counter\n"
                     "clauseqa_answers_generated_total{outcome=\"used\"} %llu\n"
                     "clauseqa_answers_generated_total{outcome=\"fallback\"} %llu\n"
                     "# HELP clauseqa_answer_chunks_streamed_total Pieces of answer text sent to streaming clients.\n"
                     "# TYPE clauseqa_answer_chunks_streamed_total counter\n"
                     "clauseqa_answer_chunks_streamed_total %llu\n"
                     "# HELP clauseqa_model_loaded Whether a model is loaded (1) or not (0).\n"
                     "# TYPE clauseqa_model_loaded gauge\n"
                     "clauseqa_model_loaded{model=\"decoder\"} %d\n"
                     "clauseqa_model_loaded{model=\"encoder\"} %d\n"
                     "# HELP clauseqa_page_images_total Page images served, by whether they were rendered or cached.\n"
                     "# TYPE clauseqa_page_images_total counter\n"
                     "clauseqa_page_images_total{source=\"rendered\"} %llu\n"
                     "clauseqa_page_images_total{source=\"cache\"} %llu\n"
                     "# HELP clauseqa_auth_open_mode 1 while no API key exists and requests are not authenticated.\n"
                     "# TYPE clauseqa_auth_open_mode gauge\n"
                     "clauseqa_auth_open_mode %d\n",
                     (unsigned long long)atomic_load(&s->answers), (unsigned long long)atomic_load(&s->abstentions),
                     (unsigned long long)atomic_load(&s->retrievals),
                     (unsigned long long)atomic_load(&s->tokens_generated),
                     (unsigned long long)atomic_load(&s->answers_generated),
                     (unsigned long long)atomic_load(&s->answers_fallback),
                     (unsigned long long)atomic_load(&s->chunks_streamed), s->decoder ? 1 : 0, s->dense ? 1 : 0,
                     (unsigned long long)atomic_load(&s->pages_rendered),
                     (unsigned long long)atomic_load(&s->page_cache_hits), cq_service_open_mode(s) ? 1 : 0);
}

/* ---- knowledge bases ------------------------------------------------------------------------------------------ */

static cq_status svc_kb_list(void *ctx, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_kb_info *kbs;
    size_t n;
    cq_status rc = cq_store_kb_list(st, &kbs, &n, err);
    pool_put(s, st);
    if (rc) return rc;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, kb_json(&kbs[i]));
    free(kbs);
    *out = a;
    return CQ_OK;
}

static cq_status find_kb(cq_store *st, const char *kb, int64_t *id, cq_err *err) {
    if (!cq_store_kb_name_valid(kb)) return cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base named '%s'", kb);
    return cq_store_kb_find(st, kb, id, err);
}

static cq_status svc_kb_get(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cJSON *all;
    cq_status rc = svc_kb_list(ctx, &all, err);
    if (rc) return rc;
    rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no knowledge base named '%s'", kb);
    cJSON *it;
    cJSON_ArrayForEach(it, all) {
        const cJSON *name = cJSON_GetObjectItem(it, "name");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, kb)) {
            *out = cJSON_DetachItemViaPointer(all, it);
            cq_err_clear(err);
            rc = CQ_OK;
            break;
        }
    }
    cJSON_Delete(all);
    return rc;
}

static cq_status svc_kb_create(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t id;
    cq_status rc = cq_store_kb_create(st, kb, &id, err);
    pool_put(s, st);
    if (rc) return rc;
    CQ_INFO("knowledge base '%s' created", kb);
    return svc_kb_get(ctx, kb, out, err);
}

static cq_status svc_kb_delete(void *ctx, const char *kb, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t id;
    cq_doc_info *docs = NULL;
    size_t n = 0;
    cq_status rc = find_kb(st, kb, &id, err);
    if (!rc) rc = cq_store_doc_list(st, id, &docs, &n, err);
    if (!rc) rc = cq_store_kb_delete(st, id, err);
    if (!rc) {
        cq_dense_forget_kb(st, id);
        for (size_t i = 0; i < n; i++) remove_files_of(s, st, docs[i].sha256, docs[i].format);
        CQ_INFO("knowledge base '%s' deleted with its %zu documents", kb, n);
    }
    cq_doc_info_free_array(docs, n);
    pool_put(s, st);
    return rc;
}

/* ---- documents ------------------------------------------------------------------------------------------------ */

static cq_status svc_doc_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t id;
    cq_doc_info *docs = NULL;
    size_t n = 0;
    cq_status rc = find_kb(st, kb, &id, err);
    if (!rc) rc = cq_store_doc_list(st, id, &docs, &n, err);
    if (!rc) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            cJSON *d = doc_json(&docs[i], kb);
            if (docs[i].quality < PAGE_QUALITY_WARN) add_page_quality(st, d, docs[i].id, false);
            cJSON_AddItemToArray(a, d);
        }
        *out = a;
    }
    cq_doc_info_free_array(docs, n);
    pool_put(s, st);
    return rc;
}

static cq_status svc_doc_get(void *ctx, int64_t doc_id, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    char kb[128];
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = kb_name_of(st, d.kb_id, kb, err);
        if (!rc) {
            *out = doc_json(&d, kb);
            add_page_quality(st, *out, doc_id, true);
        }
        cq_doc_info_free(&d);
    }
    pool_put(s, st);
    return rc;
}

static cq_status svc_doc_kb(void *ctx, int64_t doc_id, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = kb_name_of(st, d.kb_id, kb, err);
        cq_doc_info_free(&d);
    }
    pool_put(s, st);
    return rc;
}

static cq_status svc_doc_delete(void *ctx, int64_t doc_id, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (!rc) {
        rc = cq_dense_forget_doc(st, doc_id, err);
        if (!rc) rc = cq_store_doc_delete(st, doc_id, err);
        if (!rc) {
            remove_files_of(s, st, d.sha256, d.format);
            CQ_INFO("document %lld (%s) deleted", (long long)doc_id, d.name);
        }
        cq_doc_info_free(&d);
    }
    pool_put(s, st);
    return rc;
}

static cq_status original_path(cq_service *s, const cq_doc_info *d, char *path, size_t cap, cq_err *err) {
    if (!is_sha256_hex(d->sha256) || !known_format(d->format))
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has no stored original", (long long)d->id);
    snprintf(path, cap, "%s/%s.%s", s->files_dir, d->sha256, d->format);
    if (access(path, R_OK) != 0)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "the original of document %lld is missing", (long long)d->id);
    return CQ_OK;
}

static cq_status svc_doc_original(void *ctx, int64_t doc_id, cq_web_file *f, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    pool_put(s, st);
    if (rc) return rc;
    memset(f, 0, sizeof *f);
    rc = original_path(s, &d, f->path, sizeof f->path, err);
    if (!rc) {
        snprintf(f->mime, sizeof f->mime, "%s",
                 !strcmp(d.format, "pdf")  ? "application/pdf"
                 : !strcmp(d.format, "md") ? "text/markdown; charset=utf-8"
                                           : "text/plain; charset=utf-8");
        snprintf(f->download_name, sizeof f->download_name, "%s", d.filename ? d.filename : d.name);
    }
    cq_doc_info_free(&d);
    return rc;
}

/* Page images are cached by content, page, width and the highlighted boxes; widths are rounded to 100 pixels so
 * that the cache stays small whatever clients ask for. */
static cq_status svc_page_image(void *ctx, int64_t doc_id, int page_no, int64_t clause_id, int width,
                                cq_web_file *f, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_doc_info d;
    cq_clause_row c = {0};
    cq_status rc = cq_store_doc_get(st, doc_id, &d, err);
    if (rc) {
        pool_put(s, st);
        return rc;
    }
    if (clause_id) {
        rc = cq_store_clause_get(st, clause_id, &c, err);
        if (!rc && c.doc_id != doc_id)
            rc = cq_err_set(err, CQ_ERR_INVALID, "clause %lld is not in document %lld", (long long)clause_id,
                            (long long)doc_id);
    }
    pool_put(s, st);
    memset(f, 0, sizeof *f);
    char pdf[1100];
    if (!rc && strcmp(d.format, "pdf"))
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld is %s: page images exist for PDFs only",
                        (long long)doc_id, d.format);
    if (!rc && (page_no < 1 || page_no > d.n_pages))
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "document %lld has %d pages; there is no page %d", (long long)doc_id,
                        d.n_pages, page_no);
    if (!rc) rc = original_path(s, &d, pdf, sizeof pdf, err);
    if (!rc) {
        width = (width + 50) / 100 * 100;
        if (width < 100) width = 100;
        /* The boxes on this page, hashed: the same highlight is the same file. */
        cq_sha256 h;
        cq_sha256_init(&h);
        size_t n_on_page = 0;
        for (size_t i = 0; i < c.n_boxes; i++)
            if (c.boxes[i].page_no == page_no) {
                cq_sha256_update(&h, &c.boxes[i], sizeof c.boxes[i]);
                n_on_page++;
            }
        uint8_t digest[32];
        cq_sha256_final(&h, digest);
        char tag[17] = "plain";
        if (n_on_page)
            for (int i = 0; i < 8; i++) snprintf(tag + 2 * i, 3, "%02x", digest[i]);
        snprintf(f->path, sizeof f->path, "%s/%s-p%d-w%d-%s.png", s->cache_dir, d.sha256, page_no, width, tag);
        snprintf(f->mime, sizeof f->mime, "image/png");
        if (access(f->path, R_OK) == 0) {
            atomic_fetch_add(&s->page_cache_hits, 1);
        } else {
            rc = cq_page_render_png(pdf, page_no, width, c.boxes, c.n_boxes, f->path, err);
            if (!rc) atomic_fetch_add(&s->pages_rendered, 1);
        }
    }
    cq_clause_row_free(&c);
    cq_doc_info_free(&d);
    return rc;
}

static cq_status svc_clause_get(void *ctx, int64_t clause_id, cJSON **out, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_clause_row c;
    cq_doc_info d = {0};
    cq_status rc = cq_store_clause_get(st, clause_id, &c, err);
    if (!rc) rc = cq_store_doc_get(st, c.doc_id, &d, err);
    if (!rc) rc = kb_name_of(st, d.kb_id, kb, err);
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "clause_id", (double)c.id);
        cJSON_AddNumberToObject(o, "document_id", (double)c.doc_id);
        cJSON_AddStringToObject(o, "kb", kb);
        cJSON_AddStringToObject(o, "doc", c.doc_name ? c.doc_name : "");
        cJSON_AddItemToObject(o, "title", str_or_null(c.doc_title));
        cJSON_AddStringToObject(o, "format", d.format ? d.format : "");
        cJSON_AddItemToObject(o, "clause", str_or_null(c.label));
        cJSON_AddStringToObject(o, "path", c.path ? c.path : "");
        cJSON_AddStringToObject(o, "text", c.text ? c.text : "");
        cJSON_AddItemToObject(o, "page", c.page_first > 0 ? cJSON_CreateNumber(c.page_first) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "page_last", c.page_last > 0 ? cJSON_CreateNumber(c.page_last) : cJSON_CreateNull());
        cJSON *boxes = cJSON_AddArrayToObject(o, "boxes");
        for (size_t i = 0; i < c.n_boxes; i++) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddNumberToObject(b, "page", c.boxes[i].page_no);
            cJSON_AddNumberToObject(b, "x0", c.boxes[i].x0);
            cJSON_AddNumberToObject(b, "y0", c.boxes[i].y0);
            cJSON_AddNumberToObject(b, "x1", c.boxes[i].x1);
            cJSON_AddNumberToObject(b, "y1", c.boxes[i].y1);
            cJSON_AddItemToArray(boxes, b);
        }
        cJSON *sizes = cJSON_AddArrayToObject(o, "page_sizes");
        cq_page_info *pages = NULL;
        size_t n_pages = 0;
        cq_err e2 = {0};
        if (c.page_first > 0 && cq_store_page_list(st, c.doc_id, &pages, &n_pages, &e2) == CQ_OK)
            for (size_t i = 0; i < n_pages; i++)
                if (pages[i].page_no >= c.page_first && pages[i].page_no <= c.page_last) {
                    cJSON *p = cJSON_CreateObject();
                    cJSON_AddNumberToObject(p, "page", pages[i].page_no);
                    cJSON_AddNumberToObject(p, "width", pages[i].width);
                    cJSON_AddNumberToObject(p, "height", pages[i].height);
                    cJSON_AddItemToArray(sizes, p);
                }
        free(pages);
        if (c.page_first > 0 && d.format && !strcmp(d.format, "pdf")) {
            char url[128];
            snprintf(url, sizeof url, "/api/v1/documents/%lld/pages/%d.png?clause=%lld", (long long)c.doc_id,
                     c.page_first, (long long)c.id);
            cJSON_AddStringToObject(o, "page_image_url", url);
        }
        *out = o;
    }
    pool_put(s, st);
    cq_clause_row_free(&c);
    cq_doc_info_free(&d);
    return rc;
}

/* ---- uploads and the ingestion queue ------------------------------------------------------------------------- */

static void enqueue(cq_service *s, int64_t job_id) {
    queued_job *q = calloc(1, sizeof *q);
    if (!q) return; /* stays 'queued' in the database: the next start runs it */
    q->id = job_id;
    pthread_mutex_lock(&s->queue_lock);
    if (s->tail) s->tail->next = q;
    else s->head = q;
    s->tail = q;
    s->queued++;
    pthread_cond_signal(&s->queue_cond);
    pthread_mutex_unlock(&s->queue_lock);
}

static cq_status svc_upload(void *ctx, const char *kb, const char *filename_raw, const char *spooled, bool replace,
                            cJSON **out, bool *accepted, cq_err *err) {
    cq_service *s = ctx;
    *accepted = false;
    char filename[FILENAME_MAX_BYTES + 16];
    sanitize_filename(filename_raw, filename, sizeof filename);
    cq_store *st = pool_get(s, err);
    if (!st) {
        unlink(spooled);
        return err->code;
    }
    int64_t kb_id = 0, job_id = 0;
    char head[1024], sha[65], *name = NULL, *upload_path = NULL;
    size_t head_len = 0;
    struct stat sb;
    const char *format = NULL;
    cq_doc_info same = {0}, named = {0};
    cq_status rc = find_kb(st, kb, &kb_id, err);
    if (!rc && (stat(spooled, &sb) != 0 || !S_ISREG(sb.st_mode)))
        rc = cq_err_set(err, CQ_ERR_IO, "the upload was not received");
    if (!rc && sb.st_size == 0) rc = cq_err_set(err, CQ_ERR_EMPTY, "%s: the file is empty", filename);
    if (!rc) {
        FILE *fp = fopen(spooled, "rb");
        if (fp) {
            head_len = fread(head, 1, sizeof head, fp);
            fclose(fp);
        }
        format = cq_ingest_detect_format(filename, head, head_len, err);
        if (!format) {
            rc = err->code ? err->code : CQ_ERR_FORMAT;
            cq_err_prefix(err, "%s: ", filename);
        }
    }
    if (!rc) rc = cq_sha256_file_hex(spooled, sha, err);
    if (!rc) {
        name = cq_path_stem(filename);
        if (!name || !*name) rc = cq_err_set(err, CQ_ERR_INVALID, "'%s' is not a usable file name", filename);
    }
    if (!rc && cq_store_doc_by_hash(st, kb_id, sha, &same, err) == CQ_OK && !strcmp(same.status, "ready")) {
        /* Identical content is in the KB already: report it, do nothing. */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "duplicate", true);
        cJSON *doc = doc_json(&same, kb);
        add_page_quality(st, doc, same.id, false);
        cJSON_AddItemToObject(o, "document", doc);
        *out = o;
        unlink(spooled);
        pool_put(s, st);
        cq_doc_info_free(&same);
        free(name);
        return CQ_OK;
    }
    if (!rc) cq_err_clear(err);
    if (!rc && !replace && cq_store_doc_by_name(st, kb_id, name, &named, err) == CQ_OK &&
        !strcmp(named.status, "ready"))
        rc = cq_err_set(err, CQ_ERR_EXISTS,
                        "a different document named '%s' is in '%s' already: delete it, or upload with replace=true",
                        name, kb);
    if (!rc) {
        cq_err_clear(err);
        rc = cq_store_job_create(st, kb_id, 0, &job_id, err);
    }
    if (!rc) {
        char leaf[64];
        snprintf(leaf, sizeof leaf, "job-%lld.%s", (long long)job_id, format);
        upload_path = path_join(s->uploads_dir, leaf);
        if (!upload_path) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        else if (rename(spooled, upload_path) != 0)
            rc = cq_err_set(err, CQ_ERR_IO, "cannot keep the upload: %s", strerror(errno));
    }
    if (!rc) rc = cq_store_job_set_upload(st, job_id, filename, upload_path, (int64_t)sb.st_size, replace, err);
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
            enqueue(s, job_id);
            CQ_INFO("job %lld: %s queued for '%s' (%lld bytes)", (long long)job_id, filename, kb,
                    (long long)sb.st_size);
        }
    }
    if (rc) {
        unlink(spooled);
        if (upload_path) unlink(upload_path);
        if (job_id) cq_store_job_update(st, job_id, "failed", 0, 0, err->msg, NULL);
    }
    pool_put(s, st);
    cq_doc_info_free(&same);
    cq_doc_info_free(&named);
    free(name);
    free(upload_path);
    return rc;
}

static cq_status svc_job_get(void *ctx, int64_t job_id, cJSON **out, char kb[128], cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_job_info j;
    cq_status rc = cq_store_job_get(st, job_id, &j, err);
    if (!rc) {
        snprintf(kb, 128, "%s", j.kb);
        *out = job_json(st, &j);
        cq_job_info_free(&j);
    }
    pool_put(s, st);
    return rc;
}

static cq_status svc_job_list(void *ctx, const char *kb, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t kb_id;
    cq_job_info *jobs = NULL;
    size_t n = 0;
    cq_status rc = find_kb(st, kb, &kb_id, err);
    if (!rc) rc = cq_store_job_list(st, kb_id, JOB_LIST_LIMIT, &jobs, &n, err);
    if (!rc) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, job_json(NULL, &jobs[i]));
        *out = a;
    }
    cq_job_info_free_array(jobs, n);
    pool_put(s, st);
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
    double now = now_seconds();
    if (pages_read < n_pages && now - p->last_write < PROGRESS_INTERVAL_S) return;
    p->last_write = now;
    cq_err err = {0};
    cq_store_job_update(p->st, p->job_id, "running", pages_read, n_pages, NULL, &err);
}

/* Runs one job with the worker's own connection. */
static void run_job(cq_service *s, cq_store *st, int64_t job_id) {
    cq_err err = {0};
    cq_job_info j;
    if (cq_store_job_get(st, job_id, &j, &err)) return; /* its KB was deleted meanwhile: the upload is swept below */
    if ((strcmp(j.state, "queued") && strcmp(j.state, "running")) || !j.upload_path) {
        cq_job_info_free(&j);
        return;
    }
    cq_store_job_update(st, job_id, "running", 0, 0, NULL, &err);
    char sha[65] = "";
    cq_sha256_file_hex(j.upload_path, sha, &err);
    cq_err_clear(&err);

    job_progress progress = {.st = st, .job_id = job_id, .last_write = now_seconds()};
    cq_ingest_options opt = {.replace = j.replace != 0, .filename = j.filename, .progress = report_progress,
                             .progress_user = &progress};
    cq_ingest_result res;
    cq_status rc = cq_ingest_file(st, s->data_dir, j.kb_id, j.upload_path, &opt, &res, &err);
    cq_err e2 = {0};
    /* The end state and the document link change together: a reader never sees "ready" without the document. */
    bool tx = cq_store_begin(st, &e2) == CQ_OK;
    if (rc) {
        /* the pipeline records a failed document with the reason: link it so the job shows it */
        cq_doc_info d;
        int64_t doc_id = 0;
        if (sha[0] && cq_store_doc_by_hash(st, j.kb_id, sha, &d, &e2) == CQ_OK) {
            doc_id = d.id;
            cq_doc_info_free(&d);
        }
        cq_store_job_update(st, job_id, "failed", progress.done, progress.total, err.msg, &e2);
        cq_store_job_finish(st, job_id, doc_id, &e2);
        atomic_fetch_add(&s->jobs_failed, 1);
        CQ_WARN("job %lld failed: %s", (long long)job_id, err.msg);
    } else {
        cq_store_job_update(st, job_id, res.duplicate ? "duplicate" : "ready", res.n_pages, res.n_pages, NULL, &e2);
        cq_store_job_finish(st, job_id, res.doc_id, &e2);
        if (res.duplicate) {
            atomic_fetch_add(&s->jobs_duplicate, 1);
        } else {
            atomic_fetch_add(&s->jobs_ready, 1);
            atomic_fetch_add(&s->ingest_pages, (uint64_t)res.n_pages);
            atomic_fetch_add(&s->ingest_ms, (uint64_t)(res.seconds * 1e3 + 0.5));
        }
        CQ_INFO("job %lld: %s %s (%d pages, %d clauses, %.2f s)", (long long)job_id, j.filename,
                res.duplicate ? "was there already" : "ready", res.n_pages, res.n_clauses, res.seconds);
    }
    if (tx && cq_store_commit(st, &e2)) {
        CQ_ERROR("job %lld: cannot record its end: %s", (long long)job_id, e2.msg);
        cq_store_rollback(st);
    }
    unlink(j.upload_path);
    cq_job_info_free(&j);
}

static void *worker_main(void *arg) {
    cq_service *s = arg;
    cq_err err = {0};
    cq_store *st = NULL;
    if (cq_store_open(s->db_path, &st, &err)) {
        CQ_ERROR("ingestion worker: %s", err.msg);
        return NULL;
    }
    cq_dense_attach(st, s->dense);
    for (;;) {
        pthread_mutex_lock(&s->queue_lock);
        while (!s->stopping && !s->head) pthread_cond_wait(&s->queue_cond, &s->queue_lock);
        if (s->stopping) {
            pthread_mutex_unlock(&s->queue_lock);
            break;
        }
        queued_job *q = s->head;
        s->head = q->next;
        if (!s->head) s->tail = NULL;
        s->queued--;
        s->running_job = q->id;
        pthread_mutex_unlock(&s->queue_lock);
        run_job(s, st, q->id);
        free(q);
        pthread_mutex_lock(&s->queue_lock);
        s->running_job = 0;
        pthread_mutex_unlock(&s->queue_lock);
    }
    cq_store_close(st);
    return NULL;
}

/* Jobs a previous run left queued or running go back into the queue; uploads no job owns are removed. */
static cq_status resume_jobs(cq_service *s, cq_err *err) {
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    cq_job_info *jobs;
    size_t n;
    cq_status rc = cq_store_job_unfinished(st, &jobs, &n, err);
    if (rc) {
        pool_put(s, st);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        cq_err e2 = {0};
        if (jobs[i].upload_path && access(jobs[i].upload_path, R_OK) == 0) {
            cq_store_job_update(st, jobs[i].id, "queued", 0, jobs[i].total, NULL, &e2);
            enqueue(s, jobs[i].id);
            CQ_INFO("job %lld (%s) resumes", (long long)jobs[i].id, jobs[i].filename ? jobs[i].filename : "?");
        } else {
            cq_store_job_update(st, jobs[i].id, "failed", 0, 0, "the upload was lost when the server stopped", &e2);
            cq_store_job_finish(st, jobs[i].id, 0, &e2);
        }
    }
    cq_job_info_free_array(jobs, n);
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
                    owned = j.upload_path && !strcmp(j.upload_path, path);
                    cq_job_info_free(&j);
                }
            }
            struct stat sb;
            if (!owned && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
        }
        if (d) closedir(d);
    }
    pool_put(s, st);
    return CQ_OK;
}

/* ---- questions ------------------------------------------------------------------------------------------------ */

static bool names_document(cq_store *st, int64_t kb_id, const char *question) {
    cq_title_match m;
    size_t n = 0;
    cq_err err = {0};
    return cq_router_titles(st, kb_id, question, &m, 1, &n, &err) == CQ_OK && n > 0;
}

/* The question completed against the history (app/followup.h), or NULL when it stands as it is. The context is
 * built turn by turn: an assistant turn's first citation, else what the user turn itself referred to (its clause
 * reference, resolved the same way, else its best retrieved clause). */
static char *resolve_followup(cq_store *st, int64_t kb_id, const char *question, const cJSON *history) {
    size_t a, b;
    if (!history || cJSON_GetArraySize(history) == 0 || cq_followup_classify(question, &a, &b) == CQ_FOLLOWUP_NONE)
        return NULL;
    char doc[256] = "", clause[128] = "";
    int n = cJSON_GetArraySize(history);
    for (int i = n > HISTORY_TURNS_MAX ? n - HISTORY_TURNS_MAX : 0; i < n; i++) {
        const cJSON *turn = cJSON_GetArrayItem(history, i);
        const cJSON *role = cJSON_GetObjectItem(turn, "role"), *content = cJSON_GetObjectItem(turn, "content");
        const cJSON *cites = cJSON_GetObjectItem(turn, "citations");
        if (!cJSON_IsString(role)) continue;
        if (!strcmp(role->valuestring, "assistant")) {
            const cJSON *c = cJSON_IsArray(cites) ? cJSON_GetArrayItem(cites, 0) : NULL;
            const cJSON *cd = c ? cJSON_GetObjectItem(c, "doc") : NULL, *cl = c ? cJSON_GetObjectItem(c, "clause") : NULL;
            if (cJSON_IsString(cd)) {
                snprintf(doc, sizeof doc, "%s", cd->valuestring);
                snprintf(clause, sizeof clause, "%s", cJSON_IsString(cl) ? cl->valuestring : "");
            }
        } else if (!strcmp(role->valuestring, "user") && cJSON_IsString(content)) {
            cq_followup_context ctx = {doc, clause[0] ? clause : NULL};
            char *resolved = NULL;
            if (doc[0])
                resolved = cq_followup_resolve(content->valuestring, &ctx,
                                               names_document(st, kb_id, content->valuestring));
            const char *q = resolved ? resolved : content->valuestring;
            cq_hits h = {0};
            cq_err err = {0};
            if (cq_retrieve(st, kb_id, q, CQ_RETRIEVE_ROUTER, 1, &h, &err) == CQ_OK && h.n == 0) {
                cq_hits_free(&h);
                cq_retrieve(st, kb_id, q, CQ_RETRIEVE_HYBRID, 1, &h, &err);
            }
            if (h.n) {
                snprintf(doc, sizeof doc, "%s", h.hits[0].doc_name);
                snprintf(clause, sizeof clause, "%s", h.hits[0].label ? h.hits[0].label : "");
            }
            cq_hits_free(&h);
            free(resolved);
        }
    }
    if (!doc[0]) return NULL;
    cq_followup_context ctx = {doc, clause[0] ? clause : NULL};
    return cq_followup_resolve(question, &ctx, names_document(st, kb_id, question));
}

/* A retrieval mode this server cannot run (dense without trained encoder weights) is the request's problem (400),
 * not an unsupported upload type (415). */
static cq_status question_error(cq_status rc, cq_err *err) {
    if (rc == CQ_ERR_UNSUPPORTED) err->code = rc = CQ_ERR_INVALID;
    return rc;
}

static cq_status question_options(const cq_web_question *q, int *modes, size_t *k, cq_err *err) {
    *k = q->k > 0 ? (size_t)q->k : 5;
    *modes = cq_retrieve_parse_mode(q->mode ? q->mode : "hybrid", err);
    return *modes ? CQ_OK : (err->code ? err->code : CQ_ERR_INVALID);
}

/* Adds "document_id" to each hit of a JSON array made by cq_json_hits from hits. */
static void add_document_ids(cJSON *arr, const cq_hits *hits) {
    size_t i = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (i < hits->n) cJSON_AddNumberToObject(it, "document_id", (double)hits->hits[i].doc_id);
        i++;
    }
}

static cq_status svc_retrieve(void *ctx, const char *kb, const cq_web_question *q, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int modes;
    size_t k;
    cq_status rc = question_options(q, &modes, &k, err);
    if (rc) return rc;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t kb_id;
    double t0 = now_seconds();
    rc = find_kb(st, kb, &kb_id, err);
    char *resolved = rc ? NULL : resolve_followup(st, kb_id, q->question, q->history);
    double t1 = now_seconds();
    cq_hits hits = {0};
    if (!rc) rc = cq_retrieve(st, kb_id, resolved ? resolved : q->question, modes, k, &hits, err);
    double t2 = now_seconds();
    pool_put(s, st);
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "question", q->question);
        if (resolved) cJSON_AddStringToObject(o, "resolved_question", resolved);
        cJSON *results = cq_json_hits(&hits);
        add_document_ids(results, &hits);
        cJSON_AddItemToObject(o, "results", results);
        cJSON *t = cJSON_AddObjectToObject(o, "timings");
        cJSON_AddNumberToObject(t, "followup_ms", ms_between(t0, t1));
        cJSON_AddNumberToObject(t, "retrieve_ms", ms_between(t1, t2));
        *out = o;
        atomic_fetch_add(&s->retrievals, 1);
    }
    cq_hits_free(&hits);
    free(resolved);
    return question_error(rc, err);
}

/* Sends text to on_token in pieces of about STREAM_CHUNK_CHARS characters, cut after a space or punctuation when
 * one is near. Returns the pieces sent; stops early when the client is gone. */
static size_t stream_text(cq_service *s, const char *text, cq_web_token_fn on_token, void *user) {
    size_t n = strlen(text), i = 0, start = 0, chars = 0, pieces = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(text + i, n - i, &len);
        if (len == 0) len = 1;
        i += len;
        chars++;
        bool boundary = cp == ' ' || cp == '\n' || cq_is_cjk(cp) || cq_is_cjk_punct(cp) || cp == ',' || cp == '.';
        if ((chars >= STREAM_CHUNK_CHARS && boundary) || chars >= 4 * STREAM_CHUNK_CHARS || i >= n) {
            pieces++;
            if (on_token(user, text + start, i - start)) break;
            start = i;
            chars = 0;
        }
    }
    atomic_fetch_add(&s->chunks_streamed, pieces);
    return pieces;
}

/* Generated text goes to the client as the decoder writes it. */
typedef struct {
    cq_service *s;
    cq_web_token_fn on_token;
    void *user;
    size_t pieces;
    double first_at; /* when the first piece went out */
} token_relay;

static bool relay_text(void *user, const char *text, size_t len) {
    token_relay *r = user;
    if (!r->pieces) r->first_at = now_seconds();
    r->pieces++;
    return r->on_token(r->user, text, len) == 0;
}

static cq_status svc_ask(void *ctx, const char *kb, const cq_web_question *q, cq_web_token_fn on_token, void *user,
                         cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int modes;
    size_t k;
    cq_status rc = question_options(q, &modes, &k, err);
    if (rc) return rc;
    cq_store *st = pool_get(s, err);
    if (!st) return err->code;
    int64_t kb_id;
    double t0 = now_seconds();
    rc = find_kb(st, kb, &kb_id, err);
    char *resolved = rc ? NULL : resolve_followup(st, kb_id, q->question, q->history);
    double t1 = now_seconds();
    cq_answer a;
    memset(&a, 0, sizeof a);
    cq_answer_options opt = {.k = k, .modes = modes, .decoder = s->decoder};
    token_relay relay = {s, on_token, user, 0, 0};
    if (on_token) {
        opt.on_text = relay_text;
        opt.user = &relay;
    }
    if (!rc) rc = cq_answer_question(st, kb_id, resolved ? resolved : q->question, &opt, &a, err);
    pool_put(s, st); /* the connection is not needed while the answer streams */
    if (rc) {
        free(resolved);
        return question_error(rc, err);
    }
    double t2 = now_seconds();
    /* A generated answer is on the wire already; an extractive one (or an abstention, or the fallback after a
     * generated answer that failed its check — then the final event's answer is the one to keep) goes now. */
    atomic_fetch_add(&s->chunks_streamed, relay.pieces);
    if (on_token && !a.generated) stream_text(s, a.answer, on_token, user);
    double t3 = now_seconds();
    if (s->decoder && !a.abstained) atomic_fetch_add(a.generated ? &s->answers_generated : &s->answers_fallback, 1);
    atomic_fetch_add(&s->tokens_generated, (uint_fast64_t)a.tokens_generated);
    cJSON *o = cq_json_answer(&a);
    cJSON_AddStringToObject(o, "question", q->question);
    if (resolved) cJSON_AddStringToObject(o, "resolved_question", resolved);
    cJSON *cites = cJSON_GetObjectItem(o, "citations");
    size_t i = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cites) {
        for (size_t h = 0; i < a.n_citations && h < a.hits.n; h++)
            if (a.hits.hits[h].clause_id == a.citations[i].clause_id) {
                cJSON_AddNumberToObject(c, "document_id", (double)a.hits.hits[h].doc_id);
                break;
            }
        i++;
    }
    cJSON_AddNumberToObject(o, "tokens_generated", a.tokens_generated);
    cJSON_AddNumberToObject(o, "prompt_tokens", a.prompt_tokens);
    cJSON *t = cJSON_GetObjectItem(o, "timings");
    if (t) {
        cJSON_AddNumberToObject(t, "followup_ms", ms_between(t0, t1));
        /* the answer step (generation, or choosing the sentences) plus streaming what was left to stream */
        cJSON_AddNumberToObject(t, "generate_ms", ms_between(0, a.answer_ms / 1e3 + (t3 - t2)));
        if (relay.pieces) cJSON_AddNumberToObject(t, "first_token_ms", ms_between(t0, relay.first_at));
        cJSON_AddNumberToObject(t, "total_ms", ms_between(t0, t3));
    }
    atomic_fetch_add(&s->answers, 1);
    if (a.abstained) atomic_fetch_add(&s->abstentions, 1);
    cq_answer_free(&a);
    free(resolved);
    *out = o;
    return CQ_OK;
}

/* ---- life cycle ----------------------------------------------------------------------------------------------- */

void cq_service_web(cq_service *svc, cq_web_service *w) {
    memset(w, 0, sizeof *w);
    w->ctx = svc;
    w->authenticate = svc_authenticate;
    w->allows = svc_allows;
    w->health = svc_health;
    w->metrics = svc_metrics;
    w->kb_list = svc_kb_list;
    w->kb_get = svc_kb_get;
    w->kb_create = svc_kb_create;
    w->kb_delete = svc_kb_delete;
    w->doc_list = svc_doc_list;
    w->doc_get = svc_doc_get;
    w->doc_kb = svc_doc_kb;
    w->doc_delete = svc_doc_delete;
    w->doc_original = svc_doc_original;
    w->page_image = svc_page_image;
    w->clause_get = svc_clause_get;
    w->upload = svc_upload;
    w->job_get = svc_job_get;
    w->job_list = svc_job_list;
    w->retrieve = svc_retrieve;
    w->ask = svc_ask;
}

const char *cq_service_spool_dir(const cq_service *svc) { return svc->spool_dir; }

cq_status cq_service_open(const cq_service_config *config, cq_service **out, cq_err *err) {
    *out = NULL;
    cq_service *s = calloc(1, sizeof *s);
    if (!s) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_mutex_init(&s->auth_lock, NULL);
    pthread_mutex_init(&s->queue_lock, NULL);
    pthread_cond_init(&s->queue_cond, NULL);
    s->started_at = now_seconds();
    s->auth_checked_at = -1e9;
    s->allow_open = config->allow_open;
    s->decoder = config->decoder;
    s->max_pool = config->max_connections > 0 ? (size_t)config->max_connections : DEFAULT_MAX_CONNECTIONS;
    s->pool = calloc(s->max_pool, sizeof *s->pool);
    s->data_dir = strdup(config->data_dir);
    s->db_path = path_join(config->data_dir, "clauseqa.db");
    s->files_dir = path_join(config->data_dir, "files");
    s->uploads_dir = path_join(config->data_dir, "uploads");
    s->spool_dir = path_join(config->data_dir, "uploads/spool");
    s->cache_dir = path_join(config->data_dir, "cache/pages");
    if (!s->pool || !s->data_dir || !s->db_path || !s->files_dir || !s->uploads_dir || !s->spool_dir ||
        !s->cache_dir) {
        cq_service_close(s);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_status rc = CQ_OK;
    const char *dirs[] = {s->files_dir, s->spool_dir, s->cache_dir};
    for (int i = 0; i < 3 && !rc; i++) rc = cq_mkdirs(dirs[i], err);
    for (int i = 0; i < 3 && !rc; i++) cq_remove_stale_temp_files(dirs[i], STALE_TEMP_AGE_S); /* crashed writes */
    if (!rc) { /* dense retrieval needs trained weights; without them the server answers with router + BM25 */
        cq_err derr = {0};
        if (cq_dense_open_configured(s->data_dir, &s->dense, &derr) == CQ_OK)
            CQ_INFO("dense retrieval on: SSM encoder weights from %s/models/ssm", s->data_dir);
        else if (derr.code == CQ_ERR_UNSUPPORTED)
            CQ_INFO("dense retrieval off: %s", derr.msg);
        else
            CQ_ERROR("dense retrieval off: the encoder weights cannot be used: %s", derr.msg);
    }
    cq_store *st = NULL;
    if (!rc) rc = cq_store_open(s->db_path, &st, err); /* creates and migrates the database up front */
    if (st) cq_dense_attach(st, s->dense);
    pool_put(s, st);
    if (!rc) rc = resume_jobs(s, err);
    if (!rc) {
        if (pthread_create(&s->worker, NULL, worker_main, s) != 0) rc = cq_err_set(err, CQ_ERR_INTERNAL, "cannot start the ingestion worker");
        else s->worker_started = true;
    }
    if (rc) {
        cq_service_close(s);
        return rc;
    }
    *out = s;
    return CQ_OK;
}

void cq_service_close(cq_service *s) {
    if (!s) return;
    pthread_mutex_lock(&s->queue_lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->queue_cond);
    pthread_mutex_unlock(&s->queue_lock);
    if (s->worker_started) pthread_join(s->worker, NULL);
    while (s->head) {
        queued_job *q = s->head;
        s->head = q->next;
        free(q);
    }
    for (size_t i = 0; i < s->n_pool; i++) cq_store_close(s->pool[i]);
    free(s->pool);
    cq_dense_close(s->dense); /* after every connection that carried it; saves the changed FAISS files */
    pthread_mutex_destroy(&s->pool_lock);
    pthread_mutex_destroy(&s->auth_lock);
    pthread_mutex_destroy(&s->queue_lock);
    pthread_cond_destroy(&s->queue_cond);
    free(s->data_dir);
    free(s->db_path);
    free(s->files_dir);
    free(s->uploads_dir);
    free(s->spool_dir);
    free(s->cache_dir);
    free(s);
}
