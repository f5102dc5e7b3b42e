/* Conversations and their turns (store/conversations.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/conversations.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "db/db.h"
#include "db/dialect.h"

void cq_conversation_free(cq_conversation *c) {
    if (!c) return;
    free(c->title);
    memset(c, 0, sizeof *c);
}

void cq_conversation_free_array(cq_conversation *c, size_t n) {
    for (size_t i = 0; i < n; i++) cq_conversation_free(&c[i]);
    free(c);
}

void cq_conversation_turns_free(cq_conversation_turn *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(t[i].question);
        free(t[i].reply);
    }
    free(t);
}

static cq_status title_check(const char *title, cq_err *err) {
    if (!title || !title[0]) return cq_err_set(err, CQ_ERR_INVALID, "a conversation needs a title");
    if (strlen(title) > CQ_CONVERSATION_TITLE_MAX_BYTES)
        return cq_err_set(err, CQ_ERR_INVALID, "a conversation's title has at most %d bytes",
                          CQ_CONVERSATION_TITLE_MAX_BYTES);
    return CQ_OK;
}

/* A conversation of a key (owner_user_id 0) or of a user (owner_key_id 0). */
static cq_status create(cq_store *s, int64_t owner_key_id, int64_t owner_user_id, int64_t kb_id, const char *title,
                        int64_t *id, cq_err *err) {
    if (title_check(title, err)) return CQ_ERR_INVALID;
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s),
                      "INSERT INTO conversations(owner_key_id, kb_id, title, created_at, updated_at, owner_user_id) "
                      "VALUES(?1, ?2, ?3, ?4, ?4, ?5) RETURNING id",
                      &st, err))
        return cq_err_prefix(err, "create conversation: ");
    cq_db_bind_int(st, 1, owner_key_id);
    if (owner_user_id) cq_db_bind_int(st, 5, owner_user_id);
    else cq_db_bind_null(st, 5);
    cq_db_bind_int(st, 2, kb_id);
    cq_db_bind_text(st, 3, title);
    cq_db_bind_int(st, 4, (int64_t)time(NULL));
    int step = cq_db_step(st, "create conversation", err);
    if (step == CQ_DB_ROW) *id = cq_db_col_int(st, 0);
    cq_db_finalize(st);
    if (step < 0) return err->code;
    return step == CQ_DB_ROW ? CQ_OK : cq_err_set(err, CQ_ERR_DB, "create conversation: no id");
}

cq_status cq_store_conversation_create(cq_store *s, int64_t owner_key_id, int64_t kb_id, const char *title,
                                       int64_t *id, cq_err *err) {
    return create(s, owner_key_id, 0, kb_id, title, id, err);
}

cq_status cq_store_conversation_create_for_user(cq_store *s, int64_t user_id, int64_t kb_id, const char *title,
                                                int64_t *id, cq_err *err) {
    return create(s, 0, user_id, kb_id, title, id, err);
}

#define CONVERSATION_COLUMNS                                                                                       \
    "c.id, c.owner_key_id, c.kb_id, k.name, c.title, c.created_at, c.updated_at, "                                 \
    "(SELECT count(*) FROM conversation_turns t WHERE t.conversation_id = c.id), coalesce(c.owner_user_id, 0) "    \
    "FROM conversations c JOIN kbs k ON k.id = c.kb_id"

/* Every row of st as conversations. */
static cq_status conversations_from(cq_db_stmt *st, const char *what, cq_conversation **out, size_t *n, cq_err *err) {
    cq_conversation *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, what, err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&list, &cap, count + 1, sizeof *list)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        cq_conversation *c = &list[count++];
        memset(c, 0, sizeof *c);
        c->id = cq_db_col_int(st, 0);
        c->owner_key_id = cq_db_col_int(st, 1);
        c->kb_id = cq_db_col_int(st, 2);
        cq_db_col_copy(st, 3, c->kb, sizeof c->kb);
        c->title = cq_db_col_strdup(st, 4);
        c->created_at = cq_db_col_int(st, 5);
        c->updated_at = cq_db_col_int(st, 6);
        c->n_turns = (int)cq_db_col_int(st, 7);
        c->owner_user_id = cq_db_col_int(st, 8);
        if (!c->title) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (!rc && step < 0) rc = err->code;
    cq_db_finalize(st);
    if (rc) {
        cq_conversation_free_array(list, count);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

cq_status cq_store_conversation_get(cq_store *s, int64_t id, cq_conversation *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s), "SELECT " CONVERSATION_COLUMNS " WHERE c.id = ?1", &st, err))
        return cq_err_prefix(err, "get conversation: ");
    cq_db_bind_int(st, 1, id);
    cq_conversation *list = NULL;
    size_t n = 0;
    cq_status rc = conversations_from(st, "get conversation", &list, &n, err);
    if (rc) return rc;
    if (n == 1) *out = list[0];
    else cq_conversation_free_array(list, n), list = NULL;
    free(list);
    return n == 1 ? CQ_OK : cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
}

/* The conversations of a key (owner_key_id >= 0, user_id 0), of a user (user_id > 0), or of everyone
 * (owner_key_id < 0); with_open: open mode's too. */
static cq_status list(cq_store *s, int64_t owner_key_id, int64_t user_id, bool with_open, int64_t kb_id, size_t limit,
                      cq_conversation **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db_stmt *st;
    /* NULLS LAST: a conversation without turns after those with turns of its second, on both stores */
    if (cq_db_prepare(cq_store_conn(s),
                      "SELECT " CONVERSATION_COLUMNS " WHERE (?1 < 0 OR (?4 = 0 AND c.owner_key_id = ?1 AND "
                      "c.owner_user_id IS NULL) OR (?4 > 0 AND c.owner_user_id = ?4) OR "
                      "(?5 = 1 AND c.owner_key_id = 0 AND c.owner_user_id IS NULL)) AND "
                      "(?2 = 0 OR c.kb_id = ?2) ORDER BY c.updated_at DESC, (SELECT max(t.id) FROM "
                      "conversation_turns t WHERE t.conversation_id = c.id) DESC NULLS LAST, c.id DESC LIMIT ?3",
                      &st, err))
        return cq_err_prefix(err, "list conversations: ");
    cq_db_bind_int(st, 1, owner_key_id);
    cq_db_bind_int(st, 2, kb_id);
    cq_db_bind_int(st, 3, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    cq_db_bind_int(st, 4, user_id);
    cq_db_bind_int(st, 5, with_open ? 1 : 0);
    return conversations_from(st, "list conversations", out, n, err);
}

cq_status cq_store_conversation_list(cq_store *s, int64_t owner_key_id, int64_t kb_id, size_t limit,
                                     cq_conversation **out, size_t *n, cq_err *err) {
    return list(s, owner_key_id, 0, false, kb_id, limit, out, n, err);
}

cq_status cq_store_conversation_list_owned(cq_store *s, int64_t key_id, int64_t user_id, bool with_open,
                                           int64_t kb_id, size_t limit, cq_conversation **out, size_t *n,
                                           cq_err *err) {
    return list(s, user_id ? 0 : key_id < 0 ? 0 : key_id, user_id, with_open, kb_id, limit, out, n, err);
}

/* A write of conversation id: NOT_FOUND when no row changed. */
static cq_status change_one(cq_store *s, const char *what, int64_t id, cq_err *err, const char *sql, const char *kinds,
                            const char *text) {
    int64_t changed = 0;
    cq_status rc = kinds[1] ? cq_db_run(cq_store_conn(s), what, &changed, err, sql, kinds, id, text)
                            : cq_db_run(cq_store_conn(s), what, &changed, err, sql, kinds, id);
    if (rc) return rc;
    return changed ? CQ_OK : cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
}

cq_status cq_store_conversation_rename(cq_store *s, int64_t id, const char *title, cq_err *err) {
    if (title_check(title, err)) return CQ_ERR_INVALID;
    return change_one(s, "rename conversation", id, err, "UPDATE conversations SET title = ?2 WHERE id = ?1", "it",
                      title);
}

cq_status cq_store_conversation_delete(cq_store *s, int64_t id, cq_err *err) {
    /* the turns go with it (ON DELETE CASCADE) */
    return change_one(s, "delete conversation", id, err, "DELETE FROM conversations WHERE id = ?1", "i", NULL);
}

cq_status cq_store_conversation_turns(cq_store *s, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                      cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db_stmt *st;
    /* the last last_n by id, then back in the order they were asked */
    if (cq_db_prepare(cq_store_conn(s),
                      "SELECT id, question, reply, created_at FROM (SELECT * FROM conversation_turns "
                      "WHERE conversation_id = ?1 ORDER BY id DESC LIMIT ?2) last ORDER BY id",
                      &st, err))
        return cq_err_prefix(err, "list turns: ");
    cq_db_bind_int(st, 1, id);
    cq_db_bind_int(st, 2, last_n && last_n < (size_t)INT64_MAX ? (int64_t)last_n : INT64_MAX);
    cq_conversation_turn *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, "list turns", err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&list, &cap, count + 1, sizeof *list)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        cq_conversation_turn *t = &list[count++];
        t->id = cq_db_col_int(st, 0);
        t->question = cq_db_col_strdup(st, 1);
        t->reply = cq_db_col_strdup(st, 2);
        t->created_at = cq_db_col_int(st, 3);
        if (!t->question || !t->reply) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (!rc && step < 0) rc = err->code;
    cq_db_finalize(st);
    if (rc) {
        cq_conversation_turns_free(list, count);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

cq_status cq_store_conversation_add_turn(cq_store *s, int64_t id, const char *question, const char *reply,
                                         int replace_last, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t now = (int64_t)time(NULL);
    bool own;
    cq_status rc = cq_db_begin_own(db, &own, err);
    /* first: the conversation's row, locked until the commit, so turns added from two nodes come one after the
     * other and "the last turn" is the same for both */
    if (!rc)
        rc = cq_db_run(db, "add turn", NULL, err, "UPDATE conversations SET updated_at = ?2 WHERE id = ?1", "ii", id,
                       now);
    if (!rc && cq_db_changes(db) == 0) rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    if (!rc && replace_last)
        rc = cq_db_run(db, "add turn", NULL, err,
                       "DELETE FROM conversation_turns WHERE id = (SELECT max(id) FROM conversation_turns "
                       "WHERE conversation_id = ?1)",
                       "i", id);
    if (!rc)
        rc = cq_db_run(db, "add turn", NULL, err,
                       "INSERT INTO conversation_turns(conversation_id, question, reply, created_at) "
                       "VALUES(?1, ?2, ?3, ?4)",
                       "itti", id, question, reply, now);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_conversation_search(cq_store *s, int64_t owner_key_id, int64_t kb_id, const char *text,
                                       size_t limit, cq_conversation **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    if (!text || !text[0]) return cq_err_set(err, CQ_ERR_INVALID, "search for some text");
    /* the LIKE pattern: %text% with \, % and _ escaped, ASCII letters lowered as SQL's lower() does */
    size_t len = strlen(text);
    char *pattern = malloc(2 * len + 3), *q = pattern;
    if (!pattern) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    *q++ = '%';
    for (const char *p = text; *p; p++) {
        if (*p == '%' || *p == '_' || *p == '\\') *q++ = '\\';
        *q++ = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
    }
    *q++ = '%';
    *q = 0;
    char sql[1400];
    snprintf(sql, sizeof sql,
             "SELECT " CONVERSATION_COLUMNS " WHERE (?1 < 0 OR c.owner_key_id = ?1) AND (?2 = 0 OR c.kb_id = ?2) "
             "AND (lower(c.title) LIKE ?3 ESCAPE '\\' OR EXISTS (SELECT 1 FROM conversation_turns t WHERE "
             "t.conversation_id = c.id AND (lower(t.question) LIKE ?3 ESCAPE '\\' OR lower(%s) LIKE ?3 ESCAPE "
             "'\\'))) ORDER BY c.updated_at DESC, c.id DESC LIMIT ?4",
             cq_db_dialect(cq_store_conn(s), CQ_SQL_REPLY_ANSWER));
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s), sql, &st, err)) {
        free(pattern);
        return cq_err_prefix(err, "search conversations: ");
    }
    cq_db_bind_int(st, 1, owner_key_id);
    cq_db_bind_int(st, 2, kb_id);
    cq_db_bind_text(st, 3, pattern);
    cq_db_bind_int(st, 4, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    free(pattern);
    return conversations_from(st, "search conversations", out, n, err);
}
