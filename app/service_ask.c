/* The service's questions: retrieve and ask, with follow-up questions completed against the previous turns
 * (app/followup.h) and answers streamed to the client as they are written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/answer.h"
#include "app/answer_versions.h"
#include "app/followup.h"
#include "app/json.h"
#include "app/service_internal.h"
#include "core/clock.h"
#include "core/fault.h"
#include "core/json.h"
#include "core/utf8.h"
#include "search/query.h"
#include "search/retrieve.h"

#define HISTORY_TURNS_MAX 12 /* turns of history looked at for follow-up context */
#define STREAM_CHUNK_CHARS 4 /* answer text is streamed in pieces of about this many characters */

/* Milliseconds between two times in seconds, to the microsecond (JSON stays readable). */
static double ms_between(double t0, double t1) { return (double)(long long)((t1 - t0) * 1e6 + 0.5) / 1e3; }

/* The document a follow-up's context names, looked up in its KB: its id, and whether it has a clause (the
 * question's reference), which decides whether a bare reference can be about it (app/followup.h). */
typedef struct {
    cq_store *st;
    int64_t kb_id, doc_id;
} followup_doc;

static int followup_doc_has_clause(void *arg, const cq_clause_ref *ref) {
    followup_doc *d = arg;
    if (!d->doc_id || !ref->key[0]) return -1;
    cq_title_match t = {.doc_id = d->doc_id, .score = 1};
    int64_t id;
    size_t n = 0;
    cq_err err = {0};
    if (cq_router_resolve(d->st, d->kb_id, &t, 1, ref, &id, 1, &n, &err)) return -1;
    return n > 0;
}

/* The context (doc, clause) for follow-up resolution, with the document's id looked up (0 when it is gone). */
static cq_followup_context followup_context(cq_store *st, int64_t kb_id, const char *doc, const char *clause,
                                            followup_doc *d) {
    *d = (followup_doc){st, kb_id, 0};
    cq_doc_info info = {0};
    cq_err err = {0};
    if (doc[0] && cq_store_doc_by_name(st, kb_id, doc, &info, &err) == CQ_OK) d->doc_id = info.id;
    cq_doc_info_free(&info);
    return (cq_followup_context){doc, clause[0] ? clause : NULL, d->doc_id, followup_doc_has_clause, d};
}

/* The question completed against the history (app/followup.h), or NULL when it stands as it is. The context is
 * built turn by turn: an assistant turn's first citation, else what the user turn itself referred to (its clause
 * reference, resolved the same way, else its best retrieved clause). */
static char *resolve_followup(cq_store *st, const cq_query *q, const cJSON *history) {
    if (!history || cJSON_GetArraySize(history) == 0 || !cq_followup_may_depend(q)) return NULL;
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
            followup_doc fd;
            cq_followup_context ctx = followup_context(st, q->kb_id, doc, clause, &fd);
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
    followup_doc fd;
    cq_followup_context ctx = followup_context(st, q->kb_id, doc, clause, &fd);
    return cq_followup_resolve(q, &ctx);
}

/* The question wq asks as it is answered: parsed for KB kb_id and, when it is a follow-up, completed against history
 * (the request's or its conversation's turns) and parsed again (*resolved then says so: q->text is the completed
 * question); the request's "as_of" overrides a day the question names. */
static cq_status parse_question(cq_store *st, int64_t kb_id, const cq_web_question *wq, const cJSON *history,
                                cq_query *q, bool *resolved, cq_err *err) {
    *resolved = false;
    cq_date as_of = 0;
    if (wq->as_of && wq->as_of[0] && !(as_of = cq_date_parse_iso(wq->as_of)))
        return cq_err_set(err, CQ_ERR_INVALID, "\"as_of\" must be a day written YYYY-MM-DD, not '%s'", wq->as_of);
    cq_status rc = cq_query_parse(st, kb_id, wq->question, q, err);
    char *completed = rc ? NULL : resolve_followup(st, q, history);
    if (completed) {
        cq_query_free(q);
        rc = cq_query_parse(st, kb_id, completed, q, err);
        *resolved = !rc;
        free(completed);
    }
    if (!rc && as_of) cq_query_set_as_of(q, as_of);
    return rc;
}

/* "as_of": the day the question was answered for, when it named one or the request gave one. */
static void add_as_of(cJSON *o, const cq_query *q) {
    char d[11];
    if (q->as_of) cJSON_AddStringToObject(o, "as_of", cq_date_format(q->as_of, d));
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
    if (!o->modes) return err->code ? err->code : CQ_ERR_INVALID;
    if (q->fusion && cq_fusion_parse_method(q->fusion, &o->fusion, err)) return CQ_ERR_INVALID;
    cq_rerank_attach(o, &s->reranker, s->decoder, q->mode == NULL);
    return CQ_OK;
}

/* What retrieve starts with: the retrieval options, a connection, and the question parsed for the KB (and
 * completed against the history: *resolved). NULL with err set (nothing to free) on failure; else the caller
 * frees q and gives the connection back. *t0 is when the question's work began. */
static cq_store *begin_question(cq_service *s, const char *kb, const cq_web_question *wq, cq_retrieve_options *opt,
                                cq_query *q, bool *resolved, double *t0, cq_err *err) {
    memset(q, 0, sizeof *q);
    int64_t kb_id;
    cq_store *st = question_options(s, wq, opt, err) ? NULL : cq_svc_open_kb(s, kb, &kb_id, err);
    if (!st) return NULL;
    *t0 = cq_clock_seconds();
    if (parse_question(st, kb_id, wq, wq->history, q, resolved, err)) {
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
        add_as_of(o, &query);
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
    double send_s;   /* time spent handing pieces to the client */
} token_relay;

static bool relay_text(void *user, const char *text, size_t len) {
    token_relay *r = user;
    const double t0 = cq_clock_seconds();
    if (!r->pieces) r->first_at = t0;
    r->pieces++;
    const bool go_on = r->on_token(r->user, text, len) == 0;
    r->send_s += cq_clock_seconds() - t0;
    return go_on;
}

/* An ask's phases (seconds; negative: not reached) into the service's histograms. */
static void record_phases(cq_service *s, const double v[CQ_ASK_PHASES]) {
    pthread_mutex_lock(&s->phase_lock);
    for (int i = 0; i < CQ_ASK_PHASES; i++)
        if (v[i] >= 0) cq_lat_hist_add(&s->phase[i], v[i]);
    pthread_mutex_unlock(&s->phase_lock);
}

/* What the client is told while it waits (cq_web_stream.on_event): one event, fields from key/value pairs. */
static void tell(const cq_web_stream *stream, const char *event, const char *stage, const char *key, double value) {
    if (!stream || !stream->on_event) return;
    cJSON *o = cJSON_CreateObject();
    if (stage) cJSON_AddStringToObject(o, "stage", stage);
    if (key) cJSON_AddNumberToObject(o, key, value);
    stream->on_event(stream->user, event, o);
    cJSON_Delete(o);
}

/* The conversation an ask continues (its turns, before the one regenerate replaces, become the history) or begins
 * (when the turn is to be kept), and the "conversation" event. *created: it is new (and is removed again when the
 * ask fails). */
static cq_status open_conversation(cq_store *st, const cq_web_principal *who, int64_t kb_id, const char *kb,
                                   const cq_web_question *q, const cq_web_stream *stream, int64_t *id, bool *created,
                                   cJSON **history, cq_err *err) {
    *id = q->conversation_id;
    *created = false;
    *history = NULL;
    cq_status rc = CQ_OK;
    if (!*id && q->keep) {
        rc = cq_svc_conversation_begin(st, who, kb_id, q->question, id, err);
        *created = rc == CQ_OK;
    }
    if (rc || !*id) return rc;
    cq_conversation c;
    rc = cq_svc_conversation_find(st, who, *id, &c, err);
    if (rc) return rc;
    if (c.kb_id != kb_id)
        rc = cq_err_set(err, CQ_ERR_INVALID, "conversation %lld is about knowledge base '%s', not '%s'",
                        (long long)c.id, c.kb, kb);
    if (!rc && q->conversation_id)
        rc = cq_svc_conversation_history(st, *id, HISTORY_TURNS_MAX / 2, q->regenerate, history, err);
    if (!rc && stream && stream->on_event) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "conversation_id", (double)c.id);
        cJSON_AddStringToObject(o, "title", c.title);
        stream->on_event(stream->user, "conversation", o);
        cJSON_Delete(o);
    }
    cq_conversation_free(&c);
    return rc;
}

/* Keeps the ask's reply as a turn of conversation id (in place of the last one with regenerate). */
static cq_status keep_turn(cq_service *s, int64_t id, const cq_web_question *q, const cJSON *reply, cq_err *err) {
    char *text = cq_json_print(reply, NULL);
    cq_store *st = text ? cq_svc_pool_get(s, err) : NULL;
    cq_status rc = !text ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : !st ? err->code : CQ_OK;
    if (!rc) rc = cq_store_conversation_add_turn(st, id, q->question, text, q->regenerate, err);
    cq_svc_pool_put(s, st);
    free(text);
    return rc;
}

/* The ask up to its answer: the conversation, the question (completed against the history), retrieval, the answer
 * step, each announced on the stream as it begins. The connection goes back before the answer is written. */
static cq_status answer_ask(cq_service *s, const cq_web_principal *who, const char *kb, const cq_web_question *q,
                            const cq_web_stream *stream, token_relay *relay, int64_t *conversation_id, bool *created,
                            cq_query *query, bool *resolved, cq_answer *a, double t[3], cq_err *err) {
    cq_answer_options opt = {.decoder = s->decoder};
    int64_t kb_id;
    cq_store *st = question_options(s, q, &opt.retrieve, err) ? NULL : cq_svc_open_kb(s, kb, &kb_id, err);
    if (!st) return err->code;
    t[0] = cq_clock_seconds();
    cJSON *history = NULL;
    cq_status rc = open_conversation(st, who, kb_id, kb, q, stream, conversation_id, created, &history, err);
    if (!rc) {
        if (cJSON_GetArraySize(history ? history : q->history) > 0) tell(stream, "stage", "resolving", NULL, 0);
        rc = parse_question(st, kb_id, q, history ? history : q->history, query, resolved, err);
    }
    cJSON_Delete(history);
    if (!rc && query->compare) { /* a question comparing versions is answered from their comparison */
        t[1] = cq_clock_seconds();
        tell(stream, "stage", "comparing", NULL, 0);
        bool handled = false;
        rc = cq_answer_compare_versions(st, query, a, &handled, err);
        if (rc || handled) {
            cq_svc_pool_put(s, st);
            if (!rc) a->answer_ms = ms_between(t[1], cq_clock_seconds());
            return rc;
        }
    }
    cq_hits hits = {0};
    if (!rc) {
        t[1] = cq_clock_seconds();
        tell(stream, "stage", "retrieving", NULL, 0);
        rc = cq_retrieve(st, query, &opt.retrieve, &hits, err);
    }
    cq_svc_pool_put(s, st); /* the connection is not needed while the answer is written and streamed */
    if (rc) {
        cq_hits_free(&hits);
        return rc;
    }
    t[2] = cq_clock_seconds();
    /* The decoder writes unless the question names its clause (recited) — or abstains at once, briefly. */
    bool generating = s->decoder && hits.n && hits.hits[0].source != CQ_RETRIEVE_ROUTER;
    tell(stream, "stage", generating ? "generating" : "answering", "retrieve_ms", ms_between(t[1], t[2]));
    if (stream) {
        opt.on_text = relay_text;
        opt.user = relay;
    }
    rc = cq_answer_from_hits(query, &hits, &opt, a, err);
    if (rc) return rc;
    a->retrieve_ms = ms_between(t[1], t[2]);
    /* which version the answer rests on (a connection again, briefly; without one the note is left out) */
    cq_err verr = {0};
    if ((st = cq_svc_pool_get(s, &verr))) cq_answer_version_notes(st, query, a);
    cq_svc_pool_put(s, st);
    return CQ_OK;
}

static cq_status svc_ask(void *ctx, const cq_web_principal *who, const char *kb, const cq_web_question *q,
                         const cq_web_stream *stream, cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    cq_query query;
    memset(&query, 0, sizeof query);
    bool resolved = false, created = false;
    int64_t conversation_id = 0;
    double t[3] = {0};
    cq_answer a;
    memset(&a, 0, sizeof a);
    token_relay relay = {s, stream ? stream->on_token : NULL, stream ? stream->user : NULL, 0, 0, 0};
    /* a place among the asks answered at once, before anything is streamed: a refusal is a plain 503 */
    double held_since = 0, phases[CQ_ASK_PHASES];
    for (int i = 0; i < CQ_ASK_PHASES; i++) phases[i] = -1;
    const double asked_at = cq_clock_seconds();
    cq_status rc = cq_admission_enter(&s->asks, &held_since, err);
    if (rc) return rc;
    const double admitted_at = cq_clock_seconds();
    phases[CQ_ASK_ADMISSION_WAIT] = admitted_at - asked_at;
    cq_fault_delay("ask-answering");
    rc = answer_ask(s, who, kb, q, stream, &relay, &conversation_id, &created, &query, &resolved, &a, t, err);
    cJSON *o = NULL;
    if (!rc) {
        double t2 = cq_clock_seconds();
        /* A generated answer is on the wire already; an extractive one (or an abstention, or the fallback after a
         * generated answer that failed its check — then the final event's answer is the one to keep) goes now. */
        atomic_fetch_add(&s->chunks_streamed, relay.pieces);
        if (stream && !a.generated) stream_text(s, a.answer, stream->on_token, stream->user);
        double t3 = cq_clock_seconds();
        if (t[1] > 0) phases[CQ_ASK_QUESTION] = t[1] - admitted_at;
        if (t[2] > 0) phases[CQ_ASK_RETRIEVE] = t[2] - t[1];
        phases[CQ_ASK_ANSWER] = a.answer_ms / 1e3 + (t3 - t2);
        phases[CQ_ASK_STREAM] = relay.send_s + (t3 - t2);
        phases[CQ_ASK_TOTAL] = t3 - asked_at;
        if (s->decoder && !a.abstained) atomic_fetch_add(a.generated ? &s->answers_generated : &s->answers_fallback, 1);
        atomic_fetch_add(&s->tokens_generated, (uint_fast64_t)a.tokens_generated);
        o = cq_json_answer(&a);
        cJSON_AddStringToObject(o, "question", q->question);
        if (resolved) cJSON_AddStringToObject(o, "resolved_question", query.text);
        cJSON_AddNumberToObject(o, "tokens_generated", a.tokens_generated);
        cJSON_AddNumberToObject(o, "prompt_tokens", a.prompt_tokens);
        cJSON *tm = cJSON_GetObjectItem(o, "timings");
        if (tm) {
            cJSON_AddNumberToObject(tm, "followup_ms", ms_between(t[0], t[1]));
            /* the answer step (generation, or choosing the sentences) plus streaming what was left to stream */
            cJSON_AddNumberToObject(tm, "generate_ms", ms_between(0, a.answer_ms / 1e3 + (t3 - t2)));
            if (relay.pieces) cJSON_AddNumberToObject(tm, "first_token_ms", ms_between(t[0], relay.first_at));
            cJSON_AddNumberToObject(tm, "total_ms", ms_between(t[0], t3));
        }
        if (conversation_id && q->keep) rc = keep_turn(s, conversation_id, q, o, err);
        if (conversation_id) cJSON_AddNumberToObject(o, "conversation_id", (double)conversation_id);
        atomic_fetch_add(&s->answers, 1);
        if (a.abstained) atomic_fetch_add(&s->abstentions, 1);
        cq_svc_quality_note(s, kb, &a);
    }
    if (rc && created) { /* a conversation begun for an ask that failed holds nothing */
        cq_err e2 = {0};
        cq_store *st = cq_svc_pool_get(s, &e2);
        if (st) cq_store_conversation_delete(st, conversation_id, &e2);
        cq_svc_pool_put(s, st);
    }
    cq_admission_leave(&s->asks, held_since);
    record_phases(s, phases);
    cq_answer_free(&a);
    cq_query_free(&query);
    if (rc) {
        cJSON_Delete(o);
        return question_error(rc, err);
    }
    *out = o;
    return CQ_OK;
}

void cq_svc_ask_web(cq_web_service *w) {
    w->retrieve = svc_retrieve;
    w->ask = svc_ask;
}
