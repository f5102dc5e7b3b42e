/* The service's questions: retrieve and ask, with follow-up questions completed against the previous turns
 * (app/followup.h) and answers streamed to the client as they are written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/answer.h"
#include "app/followup.h"
#include "app/json.h"
#include "app/service_internal.h"
#include "core/clock.h"
#include "core/utf8.h"
#include "index/query.h"
#include "index/retrieve.h"

#define HISTORY_TURNS_MAX 12 /* turns of history looked at for follow-up context */
#define STREAM_CHUNK_CHARS 4 /* answer text is streamed in pieces of about this many characters */

/* Milliseconds between two times in seconds, to the microsecond (JSON stays readable). */
static double ms_between(double t0, double t1) { return (double)(long long)((t1 - t0) * 1e6 + 0.5) / 1e3; }

/* The question completed against the history (app/followup.h), or NULL when it stands as it is. The context is
 * built turn by turn: an assistant turn's first citation, else what the user turn itself referred to (its clause
 * reference, resolved the same way, else its best retrieved clause). */
static char *resolve_followup(cq_store *st, const cq_query *q, const cJSON *history) {
    if (!history || cJSON_GetArraySize(history) == 0 || q->type == CQ_QUERY_TOPIC) return NULL;
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
            cq_err err = {0};
            cq_query turn_q;
            if (cq_query_parse(st, q->kb_id, content->valuestring, &turn_q, &err)) continue;
            cq_followup_context ctx = {doc, clause[0] ? clause : NULL};
            char *resolved = doc[0] ? cq_followup_resolve(&turn_q, &ctx) : NULL;
            if (resolved) {
                cq_query_free(&turn_q);
                cq_status rc = cq_query_parse(st, q->kb_id, resolved, &turn_q, &err);
                free(resolved);
                if (rc) continue;
            }
            cq_hits h = {0};
            if (cq_retrieve(st, &turn_q, &(cq_retrieve_options){.modes = CQ_RETRIEVE_ROUTER, .k = 1}, &h, &err) ==
                    CQ_OK &&
                h.n == 0) {
                cq_hits_free(&h);
                cq_retrieve(st, &turn_q, &(cq_retrieve_options){.modes = CQ_RETRIEVE_HYBRID, .k = 1}, &h, &err);
            }
            if (h.n) {
                snprintf(doc, sizeof doc, "%s", h.hits[0].doc_name);
                snprintf(clause, sizeof clause, "%s", h.hits[0].label ? h.hits[0].label : "");
            }
            cq_hits_free(&h);
            cq_query_free(&turn_q);
        }
    }
    if (!doc[0]) return NULL;
    cq_followup_context ctx = {doc, clause[0] ? clause : NULL};
    return cq_followup_resolve(q, &ctx);
}

/* The question as it is answered: parsed for KB kb_id and, when it is a follow-up, completed against the history
 * and parsed again (*resolved then says so: q->text is the completed question). */
static cq_status parse_question(cq_store *st, int64_t kb_id, const cq_web_question *wq, cq_query *q, bool *resolved,
                                cq_err *err) {
    *resolved = false;
    cq_status rc = cq_query_parse(st, kb_id, wq->question, q, err);
    char *completed = rc ? NULL : resolve_followup(st, q, wq->history);
    if (completed) {
        cq_query_free(q);
        rc = cq_query_parse(st, kb_id, completed, q, err);
        *resolved = !rc;
        free(completed);
    }
    return rc;
}

/* A retrieval mode this server cannot run (dense without trained encoder weights) is the request's problem (400),
 * not an unsupported upload type (415). */
static cq_status question_error(cq_status rc, cq_err *err) {
    if (rc == CQ_ERR_UNSUPPORTED) err->code = rc = CQ_ERR_INVALID;
    return rc;
}

static cq_status question_options(cq_service *s, const cq_web_question *q, cq_retrieve_options *o, cq_err *err) {
    *o = (cq_retrieve_options){.k = q->k > 0 ? (size_t)q->k : 0, .dense = s->dense};
    o->modes = cq_retrieve_parse_mode(q->mode, err);
    return o->modes ? CQ_OK : (err->code ? err->code : CQ_ERR_INVALID);
}

/* What retrieve and ask start with: the retrieval options, a connection, and the question parsed for the KB (and
 * completed against the history: *resolved). NULL with err set (nothing to free) on failure; else the caller
 * frees q and gives the connection back. *t0 is when the question's work began. */
static cq_store *begin_question(cq_service *s, const char *kb, const cq_web_question *wq, cq_retrieve_options *opt,
                                cq_query *q, bool *resolved, double *t0, cq_err *err) {
    memset(q, 0, sizeof *q);
    int64_t kb_id;
    cq_store *st = question_options(s, wq, opt, err) ? NULL : cq_svc_open_kb(s, kb, &kb_id, err);
    if (!st) return NULL;
    *t0 = cq_clock_seconds();
    if (parse_question(st, kb_id, wq, q, resolved, err)) {
        cq_svc_pool_put(s, st);
        return NULL;
    }
    return st;
}

static cq_status svc_retrieve(void *ctx, const char *kb, const cq_web_question *q, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_retrieve_options opt;
    cq_query query;
    bool resolved = false;
    double t0;
    cq_store *st = begin_question(s, kb, q, &opt, &query, &resolved, &t0, err);
    if (!st) return question_error(err->code, err);
    double t1 = cq_clock_seconds();
    cq_hits hits = {0};
    cq_status rc = cq_retrieve(st, &query, &opt, &hits, err);
    double t2 = cq_clock_seconds();
    cq_svc_pool_put(s, st);
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "question", q->question);
        if (resolved) cJSON_AddStringToObject(o, "resolved_question", query.text);
        cJSON_AddItemToObject(o, "results", cq_json_hits(&hits));
        cJSON *t = cJSON_AddObjectToObject(o, "timings");
        cJSON_AddNumberToObject(t, "followup_ms", ms_between(t0, t1));
        cJSON_AddNumberToObject(t, "retrieve_ms", ms_between(t1, t2));
        *out = o;
        atomic_fetch_add(&s->retrievals, 1);
    }
    cq_hits_free(&hits);
    cq_query_free(&query);
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
    if (!r->pieces) r->first_at = cq_clock_seconds();
    r->pieces++;
    return r->on_token(r->user, text, len) == 0;
}

static cq_status svc_ask(void *ctx, const char *kb, const cq_web_question *q, cq_web_token_fn on_token, void *user,
                         cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_answer_options opt = {.decoder = s->decoder};
    cq_query query;
    bool resolved = false;
    double t0;
    cq_store *st = begin_question(s, kb, q, &opt.retrieve, &query, &resolved, &t0, err);
    if (!st) return question_error(err->code, err);
    double t1 = cq_clock_seconds();
    cq_answer a;
    memset(&a, 0, sizeof a);
    token_relay relay = {s, on_token, user, 0, 0};
    if (on_token) {
        opt.on_text = relay_text;
        opt.user = &relay;
    }
    cq_status rc = cq_answer_question(st, &query, &opt, &a, err);
    cq_svc_pool_put(s, st); /* the connection is not needed while the answer streams */
    if (rc) {
        cq_query_free(&query);
        return question_error(rc, err);
    }
    double t2 = cq_clock_seconds();
    /* A generated answer is on the wire already; an extractive one (or an abstention, or the fallback after a
     * generated answer that failed its check — then the final event's answer is the one to keep) goes now. */
    atomic_fetch_add(&s->chunks_streamed, relay.pieces);
    if (on_token && !a.generated) stream_text(s, a.answer, on_token, user);
    double t3 = cq_clock_seconds();
    if (s->decoder && !a.abstained) atomic_fetch_add(a.generated ? &s->answers_generated : &s->answers_fallback, 1);
    atomic_fetch_add(&s->tokens_generated, (uint_fast64_t)a.tokens_generated);
    cJSON *o = cq_json_answer(&a);
    cJSON_AddStringToObject(o, "question", q->question);
    if (resolved) cJSON_AddStringToObject(o, "resolved_question", query.text);
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
    cq_query_free(&query);
    *out = o;
    return CQ_OK;
}

void cq_svc_ask_web(cq_web_service *w) {
    w->retrieve = svc_retrieve;
    w->ask = svc_ask;
}
