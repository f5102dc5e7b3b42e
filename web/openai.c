/* The OpenAI-compatible endpoints: GET /v1/models (the KBs the key may read) and POST /v1/chat/completions
 * (`model` names the KB; the last user message is the question, the earlier turns are the history that follow-up
 * questions resolve against). Answers carry their citations in an extra "citations" field: on the response and on
 * the assistant message (so that a client that appends the message to its history sends them back), and, when
 * streaming, on the last chunk before "data: [DONE]". With "store": true or a "conversation_id" the turn is kept in
 * a conversation (docs/API.md), whose id comes back as "conversation_id" beside the citations. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "web/http.h"

static atomic_uint_fast64_t completion_counter;

void cq_web_openai_models(cq_web_req *r) {
    cq_err err = {0};
    cJSON *kbs = NULL;
    if (r->svc->kb_list(r->svc->ctx, &kbs, &err)) {
        cq_web_send_status_error(r, &err);
        return;
    }
    cJSON *data = cJSON_CreateArray();
    const cJSON *kb;
    cJSON_ArrayForEach(kb, kbs) {
        const cJSON *name = cJSON_GetObjectItem(kb, "name");
        if (!cJSON_IsString(name) || !r->svc->allows(r->svc->ctx, &r->who, CQ_WEB_READ, name->valuestring)) continue;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "id", name->valuestring);
        cJSON_AddStringToObject(m, "object", "model");
        const cJSON *created = cJSON_GetObjectItem(kb, "created_at");
        cJSON_AddNumberToObject(m, "created", cJSON_IsNumber(created) ? created->valuedouble : 0);
        cJSON_AddStringToObject(m, "owned_by", "clauseqa");
        cJSON_AddItemToArray(data, m);
    }
    cJSON_Delete(kbs);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "object", "list");
    cJSON_AddItemToObject(out, "data", data);
    cq_web_send_json(r, 200, out);
}

/* The text of a message's content: a string, or the "text" parts of an array of parts. Malloc'd; NULL when the
 * content has no text. */
static char *content_text(const cJSON *content) {
    if (cJSON_IsString(content)) return strdup(content->valuestring);
    if (!cJSON_IsArray(content)) return NULL;
    cq_strbuf b = {0};
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItem(part, "type"), *text = cJSON_GetObjectItem(part, "text");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "text") && cJSON_IsString(text)) {
            if (b.len) cq_strbuf_puts(&b, "\n");
            cq_strbuf_puts(&b, text->valuestring);
        }
    }
    if (b.failed || !b.len) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

typedef struct {
    cq_web_req *r;
    char id[48];
    const char *model;
    long long created;
    bool role_sent;
} chat_stream;

static cJSON *chunk(const chat_stream *cs, cJSON *delta, const char *finish) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", cs->id);
    cJSON_AddStringToObject(o, "object", "chat.completion.chunk");
    cJSON_AddNumberToObject(o, "created", (double)cs->created);
    cJSON_AddStringToObject(o, "model", cs->model);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToObject(c, "delta", delta);
    cJSON_AddItemToObject(c, "finish_reason", finish ? cJSON_CreateString(finish) : cJSON_CreateNull());
    cJSON_AddItemToArray(choices, c);
    return o;
}

static int send_role(chat_stream *cs) {
    if (cs->role_sent) return 0;
    cs->role_sent = true;
    cq_web_sse_start(cs->r);
    cJSON *delta = cJSON_CreateObject();
    cJSON_AddStringToObject(delta, "role", "assistant");
    cJSON_AddStringToObject(delta, "content", "");
    return cq_web_sse_send(cs->r, NULL, chunk(cs, delta, NULL));
}

static int chat_token(void *user, const char *text, size_t len) {
    chat_stream *cs = user;
    if (send_role(cs)) return -1;
    cJSON *delta = cJSON_CreateObject();
    cJSON *s = cJSON_CreateString("");
    free(s->valuestring);
    s->valuestring = strndup(text, len);
    cJSON_AddItemToObject(delta, "content", s);
    return cq_web_sse_send(cs->r, NULL, chunk(cs, delta, NULL));
}

/* Moves the answer's extra fields (citations, abstained, timings, resolved_question, conversation_id) onto o. */
static void add_extras(cJSON *o, cJSON *answer) {
    static const char *const keys[] = {"citations", "abstained", "timings", "resolved_question", "conversation_id"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        cJSON *v = cJSON_DetachItemFromObject(answer, keys[i]);
        if (v) cJSON_AddItemToObject(o, keys[i], v);
    }
}

void cq_web_openai_chat(cq_web_req *r) {
    cJSON *body = cq_web_read_json(r);
    if (!body) return;
    const cJSON *model = cJSON_GetObjectItem(body, "model"), *messages = cJSON_GetObjectItem(body, "messages");
    cJSON *history = NULL;
    char *question = NULL;
    if (!cJSON_IsString(model) || !model->valuestring[0]) {
        cq_web_send_error(r, 400, "invalid", "\"model\" must name a knowledge base");
        goto out;
    }
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
        cq_web_send_error(r, 400, "invalid", "\"messages\" must be a non-empty array");
        goto out;
    }
    if (!cq_web_authorize(r, CQ_WEB_READ, model->valuestring)) goto out;

    /* The last message is the question; user and assistant turns before it are the history. */
    history = cJSON_CreateArray();
    int n = cJSON_GetArraySize(messages), i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *role = cJSON_GetObjectItem(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            cq_web_send_error(r, 400, "invalid", "message %d needs a \"role\"", i);
            goto out;
        }
        char *text = content_text(cJSON_GetObjectItem(m, "content"));
        if (++i == n) {
            if (strcmp(role->valuestring, "user") || !text || !text[0]) {
                free(text);
                cq_web_send_error(r, 400, "invalid", "the last message must be a user message with text");
                goto out;
            }
            question = text;
            if (!cq_web_question_fits(r, question)) goto out;
            break;
        }
        if (text && (!strcmp(role->valuestring, "user") || !strcmp(role->valuestring, "assistant"))) {
            cJSON *turn = cJSON_CreateObject();
            cJSON_AddStringToObject(turn, "role", role->valuestring);
            cJSON_AddStringToObject(turn, "content", text);
            const cJSON *cites = cJSON_GetObjectItem(m, "citations");
            if (cJSON_IsArray(cites)) cJSON_AddItemToObject(turn, "citations", cJSON_Duplicate(cites, 1));
            cJSON_AddItemToArray(history, turn);
        }
        free(text);
    }

    /* The client keeps the history; the service keeps the turns only when asked ("store": true, as OpenAI's own
     * API has it) or when the request continues a conversation ("conversation_id"). */
    const cJSON *as_of = cJSON_GetObjectItem(body, "as_of"); /* an extension, as in /ask */
    cq_web_question q = {.question = question,
                         .history = history,
                         .as_of = cJSON_IsString(as_of) ? as_of->valuestring : NULL};
    if (!cq_web_parse_conversation(r, body, false, &q)) goto out;
    const cJSON *stream_flag = cJSON_GetObjectItem(body, "stream");
    bool stream = cJSON_IsTrue(stream_flag);
    chat_stream cs = {.r = r, .model = model->valuestring, .created = (long long)time(NULL)};
    snprintf(cs.id, sizeof cs.id, "chatcmpl-%llx%llx", (unsigned long long)cs.created,
             (unsigned long long)atomic_fetch_add(&completion_counter, 1));
    cq_err err = {0};
    cJSON *answer = NULL;
    cq_web_stream tokens = {chat_token, NULL, &cs};
    cq_status rc = r->svc->ask(r->svc->ctx, &r->who, model->valuestring, &q, stream ? &tokens : NULL, &answer, &err);
    if (rc) {
        cJSON_Delete(answer);
        cq_web_send_status_error(r, &err);
        if (r->sse) cq_web_sse_end(r);
        goto out;
    }
    const cJSON *text = cJSON_GetObjectItem(answer, "answer");
    const char *answer_text = cJSON_IsString(text) ? text->valuestring : "";
    if (stream) {
        send_role(&cs);
        cJSON *last = chunk(&cs, cJSON_CreateObject(), "stop");
        add_extras(last, answer);
        cq_web_sse_send(r, NULL, last);
        cq_web_sse_send_raw(r, "[DONE]");
        cq_web_sse_end(r);
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", cs.id);
        cJSON_AddStringToObject(o, "object", "chat.completion");
        cJSON_AddNumberToObject(o, "created", (double)cs.created);
        cJSON_AddStringToObject(o, "model", cs.model);
        cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject(),
              *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", answer_text);
        const cJSON *cites = cJSON_GetObjectItem(answer, "citations");
        if (cites) cJSON_AddItemToObject(msg, "citations", cJSON_Duplicate(cites, 1));
        cJSON_AddNumberToObject(c, "index", 0);
        cJSON_AddItemToObject(c, "message", msg);
        cJSON_AddStringToObject(c, "finish_reason", "stop");
        cJSON_AddItemToArray(choices, c);
        /* No decoder tokens are produced by extractive answers; the counts say so. */
        cJSON *usage = cJSON_AddObjectToObject(o, "usage");
        const cJSON *toks = cJSON_GetObjectItem(answer, "tokens_generated");
        double completion = cJSON_IsNumber(toks) ? toks->valuedouble : 0;
        cJSON_AddNumberToObject(usage, "prompt_tokens", 0);
        cJSON_AddNumberToObject(usage, "completion_tokens", completion);
        cJSON_AddNumberToObject(usage, "total_tokens", completion);
        add_extras(o, answer);
        cq_web_send_json(r, 200, o);
    }
    cJSON_Delete(answer);
out:
    free(question);
    cJSON_Delete(history);
    cJSON_Delete(body);
}
