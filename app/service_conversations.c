/* The service's conversations (store/conversations.h): listed, read, renamed and deleted by their owner, and
 * continued by asks (service_ask.c), which read the stored turns as the history that follow-up questions resolve
 * against and keep each answer as a turn. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/service_internal.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "store/conversations.h"

#define LIST_LIMIT 200      /* conversations listed at most */
#define TITLE_CHARS_MAX 100 /* a conversation's title, in characters */
#define TITLE_FROM_QUESTION_CHARS 40

/* Who may see conversation c: its owner (the key, or the signed-in user, that began it), and admins. Everyone else
 * is told there is no such conversation. */
static bool visible(const cq_web_principal *who, const cq_conversation *c) {
    if (who->role == CQ_WEB_ADMIN) return true;
    if (who->user_id) return c->owner_user_id == who->user_id;
    return !c->owner_user_id && c->owner_key_id == who->key_id;
}

static cJSON *conversation_json(const cq_conversation *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)c->id);
    cJSON_AddStringToObject(o, "kb", c->kb);
    cJSON_AddStringToObject(o, "title", c->title);
    cJSON_AddNumberToObject(o, "turn_count", c->n_turns);
    cJSON_AddNumberToObject(o, "owner_key_id", (double)c->owner_key_id);
    if (c->owner_user_id) cJSON_AddNumberToObject(o, "owner_user_id", (double)c->owner_user_id);
    /* made in open mode, before sign-in was turned on: listed for admins */
    cJSON_AddBoolToObject(o, "before_sign_in", !c->owner_key_id && !c->owner_user_id);
    cJSON_AddNumberToObject(o, "created_at", (double)c->created_at);
    cJSON_AddNumberToObject(o, "updated_at", (double)c->updated_at);
    return o;
}

/* The title text cut to max_chars characters (with "…" where it was cut), white space folded to single spaces and
 * trimmed. Malloc'd. */
static char *fold_title(const char *text, size_t max_chars) {
    cq_strbuf b = {0};
    size_t n = strlen(text), i = 0, chars = 0;
    bool space = false;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(text + i, n - i, &len);
        if (len == 0) len = 1;
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0x3000) {
            space = b.len > 0;
        } else {
            if (chars == max_chars) {
                cq_strbuf_puts(&b, "…");
                break;
            }
            if (space) cq_strbuf_puts(&b, " ");
            space = false;
            cq_strbuf_append(&b, text + i, len);
            chars++;
        }
        i += len;
    }
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return b.len ? cq_strbuf_take(&b) : strdup("");
}

cq_status cq_svc_conversation_find(cq_store *st, const cq_web_principal *who, int64_t id, cq_conversation *c,
                                   cq_err *err) {
    cq_conversation mine;
    cq_conversation *t = c ? c : &mine;
    cq_status rc = cq_store_conversation_get(st, id, t, err);
    if (!rc && !visible(who, t)) {
        cq_conversation_free(t);
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    } else if (!rc && !c) {
        cq_conversation_free(t);
    }
    return rc;
}

cq_status cq_svc_conversation_begin(cq_store *st, const cq_web_principal *who, int64_t kb_id, const char *question,
                                    int64_t *id, cq_err *err) {
    char *title = fold_title(question, TITLE_FROM_QUESTION_CHARS);
    if (!title) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    const char *t = title[0] ? title : "…";
    cq_status rc = who->user_id ? cq_store_conversation_create_for_user(st, who->user_id, kb_id, t, id, err)
                                : cq_store_conversation_create(st, who->key_id, kb_id, t, id, err);
    free(title);
    return rc;
}

cq_status cq_svc_conversation_history(cq_store *st, int64_t id, size_t last_n, bool drop_last, cJSON **history,
                                      cq_err *err) {
    cq_conversation_turn *turns;
    size_t n;
    cq_status rc = cq_store_conversation_turns(st, id, last_n + (drop_last ? 1 : 0), &turns, &n, err);
    if (rc) return rc;
    size_t used = drop_last && n ? n - 1 : n;
    cJSON *h = cJSON_CreateArray();
    for (size_t i = 0; i < used; i++) {
        cJSON *user = cJSON_CreateObject(), *assistant = cJSON_CreateObject(), *reply = cJSON_Parse(turns[i].reply);
        cJSON_AddStringToObject(user, "role", "user");
        cJSON_AddStringToObject(user, "content", turns[i].question);
        cJSON_AddItemToArray(h, user);
        const cJSON *answer = cJSON_GetObjectItem(reply, "answer");
        cJSON *cites = cJSON_DetachItemFromObject(reply, "citations");
        cJSON_AddStringToObject(assistant, "role", "assistant");
        cJSON_AddStringToObject(assistant, "content", cJSON_IsString(answer) ? answer->valuestring : "");
        cJSON_AddItemToObject(assistant, "citations", cites ? cites : cJSON_CreateArray());
        cJSON_AddItemToArray(h, assistant);
        cJSON_Delete(reply);
    }
    cq_conversation_turns_free(turns, n);
    *history = h;
    return CQ_OK;
}

/* ---- the REST functions ---------------------------------------------------------------------------------------- */

static cq_status svc_conversation_list(void *ctx, const cq_web_principal *who, const char *kb, bool all,
                                       cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    int64_t kb_id = 0;
    cq_store *st = kb ? cq_svc_open_kb(s, kb, &kb_id, err) : cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_conversation *list;
    size_t n;
    bool admin = who->role == CQ_WEB_ADMIN, every = all && admin;
    /* an admin's own list keeps those made in open mode, before sign-in was turned on (issue 30) */
    cq_status rc = every ? cq_store_conversation_list(st, -1, kb_id, LIST_LIMIT, &list, &n, err)
                         : cq_store_conversation_list_owned(st, who->key_id, who->user_id, admin,
                                                            kb_id, LIST_LIMIT, &list, &n, err);
    cq_svc_pool_put(s, st);
    if (rc) return rc;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, conversation_json(&list[i]));
    cq_conversation_free_array(list, n);
    *out = cJSON_CreateObject();
    cJSON_AddItemToObject(*out, "conversations", a);
    return CQ_OK;
}

static cq_status svc_conversation_get(void *ctx, const cq_web_principal *who, int64_t id, cJSON **out,
                                      cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_conversation c;
    cq_conversation_turn *turns = NULL;
    size_t n = 0;
    cq_status rc = cq_svc_conversation_find(st, who, id, &c, err);
    if (!rc) {
        rc = cq_store_conversation_turns(st, id, 0, &turns, &n, err);
        if (!rc) {
            cJSON *o = conversation_json(&c), *a = cJSON_AddArrayToObject(o, "turns");
            for (size_t i = 0; i < n; i++) {
                /* the reply as the ask returned it, with the question and when it was asked */
                cJSON *t = cJSON_Parse(turns[i].reply);
                if (!cJSON_IsObject(t)) {
                    cJSON_Delete(t);
                    t = cJSON_CreateObject();
                    cJSON_AddStringToObject(t, "answer", "");
                }
                cJSON_DeleteItemFromObject(t, "question");
                cJSON_AddStringToObject(t, "question", turns[i].question);
                cJSON_AddNumberToObject(t, "created_at", (double)turns[i].created_at);
                cJSON_AddItemToArray(a, t);
            }
            cq_svc_feedback_attach(st, id, a);
            *out = o;
        }
        cq_conversation_free(&c);
    }
    cq_conversation_turns_free(turns, n);
    cq_svc_pool_put(s, st);
    return rc;
}

static cq_status svc_conversation_rename(void *ctx, const cq_web_principal *who, int64_t id, const char *title,
                                         cJSON **out, cq_err *err) {
    cq_service *s = ctx;
    char *folded = fold_title(title, SIZE_MAX);
    if (!folded) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    size_t chars = cq_utf8_count(folded, strlen(folded));
    cq_status rc = CQ_OK;
    if (!folded[0] || chars > TITLE_CHARS_MAX)
        rc = cq_err_set(err, CQ_ERR_INVALID, "a conversation's title has 1 to %d characters", TITLE_CHARS_MAX);
    cq_store *st = rc ? NULL : cq_svc_pool_get(s, err);
    if (!rc && !st) rc = err->code;
    cq_conversation c;
    if (!rc && !(rc = cq_svc_conversation_find(st, who, id, &c, err))) {
        cq_conversation_free(&c);
        rc = cq_store_conversation_rename(st, id, folded, err);
        if (!rc) rc = cq_store_conversation_get(st, id, &c, err);
        if (!rc) {
            *out = conversation_json(&c);
            cq_conversation_free(&c);
        }
    }
    cq_svc_pool_put(s, st);
    free(folded);
    return rc;
}

static cq_status svc_conversation_delete(void *ctx, const cq_web_principal *who, int64_t id, cq_err *err) {
    cq_service *s = ctx;
    cq_store *st = cq_svc_pool_get(s, err);
    if (!st) return err->code;
    cq_status rc = cq_svc_conversation_find(st, who, id, NULL, err);
    if (!rc) rc = cq_store_conversation_delete(st, id, err);
    cq_svc_pool_put(s, st);
    return rc;
}

void cq_svc_conversations_web(cq_web_service *w) {
    w->conversation_list = svc_conversation_list;
    w->conversation_get = svc_conversation_get;
    w->conversation_rename = svc_conversation_rename;
    w->conversation_delete = svc_conversation_delete;
}
