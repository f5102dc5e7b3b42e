/* The service's feedback, exports, conversation search and quality report (issue 30 items 5 and 6):
 *   a turn's rating (store/feedback.h), by whoever may see the conversation;
 *   a conversation as Markdown or PDF (app/office_export.h);
 *   conversations whose title, questions or answers hold a text;
 *   the quality log: one row an answer (cq_svc_quality_note, after every ask), counted per KB and day for admins
 *   (GET /api/v1/quality) and /metrics (the last CQ_SVC_QUALITY_METRIC_DAYS days), and the rated answers as an eval
 *   suite's JSONL. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/office_export.h"
#include "app/service_internal.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "db/db.h"
#include "store/feedback.h"

#define SEARCH_LIMIT 200
#define QUALITY_KEEP_DAYS 400 /* the quality log's rows are kept this long */
#define CQ_SVC_QUALITY_METRIC_DAYS 7

static cJSON *feedback_json(int64_t id, int turn, const cq_feedback *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "conversation_id", (double)id);
    cJSON_AddNumberToObject(o, "turn", turn);
    if (f) {
        cJSON_AddStringToObject(o, "rating", f->rating > 0 ? "up" : "down");
        cJSON_AddStringToObject(o, "comment", f->comment);
        cJSON_AddNumberToObject(o, "updated_at", (double)f->updated_at);
    } else {
        cJSON_AddNullToObject(o, "rating");
        cJSON_AddStringToObject(o, "comment", "");
    }
    return o;
}

void cq_svc_feedback_attach(cq_store *st, int64_t id, cJSON *turns) {
    cq_feedback *f;
    size_t n;
    cq_err err = {0};
    if (cq_store_feedback_of(st, id, &f, &n, &err)) {
        CQ_WARN("feedback of conversation %lld: %s", (long long)id, err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_GetArrayItem(turns, f[i].turn - 1);
        if (!t) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "rating", f[i].rating > 0 ? "up" : "down");
        cJSON_AddStringToObject(o, "comment", f[i].comment);
        cJSON_AddItemToObject(t, "feedback", o);
    }
    cq_feedback_free_array(f, n);
}

static cq_status svc_feedback(void *ctx, const cq_web_principal *who, int64_t id, int turn, const char *rating,
                              const char *comment, bool reset, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int r = reset ? 0 : cq_feedback_rating_parse(rating);
    if (!reset && !r) return cq_err_set(err, CQ_ERR_INVALID, "\"rating\" is \"up\" or \"down\"");
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc = cq_svc_conversation_find(st, who, id, NULL, err);
    if (!rc)
        rc = reset ? cq_store_feedback_clear(st, id, turn, err) : cq_store_feedback_set(st, id, turn, r, comment, err);
    cq_feedback *f = NULL;
    size_t n = 0;
    if (!rc) rc = cq_store_feedback_of(st, id, &f, &n, err);
    if (!rc) {
        const cq_feedback *mine = NULL;
        for (size_t i = 0; i < n; i++)
            if (f[i].turn == turn) mine = &f[i];
        *out = feedback_json(id, turn, mine);
    }
    cq_feedback_free_array(f, n);
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_export(void *ctx, const cq_web_principal *who, int64_t id, const char *format, char **body,
                            size_t *len, char mime[64], char filename[256], cq_err *err) {
    cq_service *s = ctx;
    bool pdf;
    if (!format || !strcmp(format, "md") || !strcmp(format, "markdown")) pdf = false;
    else if (!strcmp(format, "pdf")) pdf = true;
    else return cq_err_set(err, CQ_ERR_INVALID, "format is md or pdf, not \"%s\"", format);
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc = cq_svc_conversation_find(st, who, id, NULL, err);
    if (!rc) rc = cq_conversation_export(st, id, pdf, body, len, err);
    cq_svc_pool_put(s, st);
    if (!rc) {
        snprintf(mime, 64, "%s", pdf ? "application/pdf" : "text/markdown; charset=utf-8");
        snprintf(filename, 256, "conversation-%lld.%s", (long long)id, pdf ? "pdf" : "md");
    }
    return rc;
}

static cJSON *conversation_row(const cq_conversation *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)c->id);
    cJSON_AddStringToObject(o, "kb", c->kb);
    cJSON_AddStringToObject(o, "title", c->title);
    cJSON_AddNumberToObject(o, "turn_count", c->n_turns);
    cJSON_AddNumberToObject(o, "owner_key_id", (double)c->owner_key_id);
    cJSON_AddNumberToObject(o, "created_at", (double)c->created_at);
    cJSON_AddNumberToObject(o, "updated_at", (double)c->updated_at);
    return o;
}

static cq_status svc_search(void *ctx, const cq_web_principal *who, const char *kb, bool all, const char *q,
                            cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int64_t kb_id = 0;
    cq_store *st = kb ? cq_svc_open_kb(s, kb, &kb_id, err) : cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_conversation *list;
    size_t n;
    int64_t owner = all && who->role == CQ_WEB_ADMIN ? -1 : who->key_id;
    cq_status rc = cq_store_conversation_search(st, owner, kb_id, q, SEARCH_LIMIT, &list, &n, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, conversation_row(&list[i]));
    cq_conversation_free_array(list, n);
    *out = cJSON_CreateObject();
    cJSON_AddItemToObject(*out, "conversations", a);
    cJSON_AddStringToObject(*out, "q", q);
    return CQ_OK;
}

/* ---- quality ---- */

void cq_svc_quality_note(cq_service *s, const char *kb, const cq_answer *a) {
    cq_err err = {0};
    int64_t kb_id;
    cq_store *st = cq_svc_open_kb(s, kb, &kb_id, &err);
    if (!st) {
        CQ_WARN("quality log (%s): %s", kb, err.msg);
        return;
    }
    int64_t *docs = a->n_citations ? calloc(a->n_citations, sizeof *docs) : NULL;
    for (size_t i = 0; docs && i < a->n_citations; i++) docs[i] = a->citations[i].doc_id;
    cq_quality_answer q = {
        .abstained = a->abstained,
        /* a generated answer that failed its check and was replaced by quoted sentences (answer.h's notice) */
        .fallback = !a->abstained && !a->generated && a->notice != NULL,
        .confidence = a->generated ? a->confidence : a->coverage,
        .cited_docs = docs,
        .n_cited = docs ? a->n_citations : 0,
    };
    int64_t now = (int64_t)time(NULL);
    /* best effort: on SQLite it never waits for another connection's write lock (the answer's last event is not
     * sent before it), a busy database loses the row */
    cq_db_nowait(cq_store_conn(st), true);
    cq_status rc = cq_store_quality_note(st, kb_id, now, &q, &err);
    /* once a day per process: rows past the retention go */
    static atomic_int_fast64_t pruned_day;
    int64_t today = now / 86400;
    if (!rc && atomic_exchange(&pruned_day, today) != today) {
        char before[11];
        cq_quality_day_of(now - (int64_t)QUALITY_KEEP_DAYS * 86400, before);
        rc = cq_store_quality_prune(st, before, &err);
    }
    cq_db_nowait(cq_store_conn(st), false);
    if (rc) cq_log(rc == CQ_ERR_BUSY ? CQ_LOG_DEBUG : CQ_LOG_WARN, "quality log (%s): %s", kb, err.msg);
    free(docs);
    cq_svc_pool_put(s, st);
}

static cJSON *quality_day_json(const cq_quality_day *d) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kb", d->kb);
    cJSON_AddStringToObject(o, "day", d->day);
    cJSON_AddNumberToObject(o, "answers", (double)d->answers);
    cJSON_AddNumberToObject(o, "abstentions", (double)d->abstentions);
    cJSON_AddNumberToObject(o, "fallbacks", (double)d->fallbacks);
    cJSON_AddNumberToObject(o, "low_confidence", (double)d->low_confidence);
    cJSON_AddNumberToObject(o, "thumbs_up", (double)d->thumbs_up);
    cJSON_AddNumberToObject(o, "thumbs_down", (double)d->thumbs_down);
    cJSON_AddNumberToObject(o, "cited_deleted", (double)d->cited_deleted);
    return o;
}

static cq_status quality_days(cq_service *s, const char *kb, int days, cq_quality_day **rows, size_t *n,
                              char since[11], cq_err *err) {
    int64_t kb_id = 0;
    cq_store *st = kb ? cq_svc_open_kb(s, kb, &kb_id, err) : cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_quality_day_of((int64_t)time(NULL) - (int64_t)(days - 1) * 86400, since);
    cq_status rc = cq_store_quality_days(st, kb_id, since, rows, n, err);
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_quality(void *ctx, const char *kb, int days, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    if (days < 1 || days > QUALITY_KEEP_DAYS)
        return cq_err_set(err, CQ_ERR_INVALID, "days is 1 to %d", QUALITY_KEEP_DAYS);
    cq_quality_day *rows;
    size_t n;
    char since[11];
    cq_status rc = quality_days(s, kb, days, &rows, &n, since, err);
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    cq_quality_day total = {0};
    snprintf(total.kb, sizeof total.kb, "%s", kb ? kb : "*");
    snprintf(total.day, sizeof total.day, "%s", since);
    for (size_t i = 0; i < n; i++) {
        cJSON_AddItemToArray(a, quality_day_json(&rows[i]));
        total.answers += rows[i].answers;
        total.abstentions += rows[i].abstentions;
        total.fallbacks += rows[i].fallbacks;
        total.low_confidence += rows[i].low_confidence;
        total.thumbs_up += rows[i].thumbs_up;
        total.thumbs_down += rows[i].thumbs_down;
        total.cited_deleted += rows[i].cited_deleted;
    }
    free(rows);
    cJSON_AddStringToObject(o, "since", since);
    cJSON_AddNumberToObject(o, "days", days);
    cJSON_AddNumberToObject(o, "low_confidence_below", CQ_QUALITY_LOW_CONFIDENCE);
    cJSON_AddItemToObject(o, "rows", a);
    cJSON *t = quality_day_json(&total);
    cJSON_DeleteItemFromObject(t, "day");
    cJSON_AddItemToObject(o, "totals", t);
    *out = o;
    return CQ_OK;
}

/* Prometheus label value: \, " and newline escaped. */
static void label(cq_strbuf *b, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') cq_strbuf_printf(b, "\\%c", *v);
        else if (*v == '\n') cq_strbuf_puts(b, "\\n");
        else cq_strbuf_append(b, v, 1);
    }
}

/* The metrics' rows, read again at most every QUALITY_METRICS_TTL_S seconds: a scrape every few seconds need not
 * count a week of answers each time. */
#define QUALITY_METRICS_TTL_S 30
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const cq_service *of;
    int64_t at;
    cq_quality_day *rows;
    size_t n;
} metrics_cache;

void cq_svc_quality_metrics(cq_service *s, cq_strbuf *out) {
    cq_quality_day *rows = NULL;
    size_t n = 0;
    char since[11];
    cq_err err = {0};
    int64_t now = (int64_t)time(NULL);
    pthread_mutex_lock(&metrics_lock);
    if (metrics_cache.of != s || now - metrics_cache.at >= QUALITY_METRICS_TTL_S || now < metrics_cache.at) {
        if (quality_days(s, NULL, CQ_SVC_QUALITY_METRIC_DAYS, &rows, &n, since, &err)) {
            pthread_mutex_unlock(&metrics_lock);
            CQ_WARN("quality metrics: %s", err.msg);
            return;
        }
        free(metrics_cache.rows);
        metrics_cache.of = s;
        metrics_cache.at = now;
        metrics_cache.rows = rows;
        metrics_cache.n = n;
    }
    n = metrics_cache.n;
    rows = n ? malloc(n * sizeof *rows) : NULL;
    if (rows) memcpy(rows, metrics_cache.rows, n * sizeof *rows);
    else n = 0;
    pthread_mutex_unlock(&metrics_lock);
    static const struct {
        const char *name, *help;
        size_t off;
    } families[] = {
        {"answers", "Answers given, per KB and UTC day (the last 7 days).", offsetof(cq_quality_day, answers)},
        {"abstentions", "Answers that abstained (the documents do not answer), per KB and day.",
         offsetof(cq_quality_day, abstentions)},
        {"fallbacks", "Generated answers replaced by quoted sentences (the extractive fallback), per KB and day.",
         offsetof(cq_quality_day, fallbacks)},
        {"low_confidence", "Answers below the confidence floor of 0.5 (docs/API.md, GET /api/v1/quality), per KB "
                           "and day.",
         offsetof(cq_quality_day, low_confidence)},
        {"thumbs_up", "Answers rated thumbs up that day, per KB.", offsetof(cq_quality_day, thumbs_up)},
        {"thumbs_down", "Answers rated thumbs down that day, per KB.", offsetof(cq_quality_day, thumbs_down)},
        {"cited_deleted", "Answers of that day whose cited document has been deleted since, per KB.",
         offsetof(cq_quality_day, cited_deleted)},
    };
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        cq_strbuf_printf(out, "# HELP clauseqa_quality_%s %s\n# TYPE clauseqa_quality_%s gauge\n", families[f].name,
                         families[f].help, families[f].name);
        for (size_t i = 0; i < n; i++) {
            cq_strbuf_printf(out, "clauseqa_quality_%s{kb=\"", families[f].name);
            label(out, rows[i].kb);
            cq_strbuf_printf(out, "\",day=\"%s\"} %lld\n", rows[i].day,
                             (long long)*(const int64_t *)((const char *)&rows[i] + families[f].off));
        }
    }
    free(rows);
}

static cq_status svc_feedback_export(void *ctx, const char *kb, char **body, size_t *len, cq_err *err) {
    cq_service *s = ctx;
    int64_t kb_id = 0;
    cq_store *st = kb ? cq_svc_open_kb(s, kb, &kb_id, err) : cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_strbuf b = {0};
    size_t n;
    cq_status rc = cq_feedback_jsonl(st, kb_id, &b, &n, err);
    cq_svc_pool_put(s, st);
    if (rc) {
        cq_strbuf_free(&b);
        return rc;
    }
    *len = b.len;
    *body = cq_strbuf_take(&b);
    return CQ_OK;
}

void cq_svc_feedback_web(cq_web_service *w) {
    w->conversation_feedback = svc_feedback;
    w->conversation_export = svc_export;
    w->conversation_search = svc_search;
    w->quality = svc_quality;
    w->feedback_export = svc_feedback_export;
}
