/* Conversations and their turns (store/conversations.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/conversations.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void turn_drop(void *elem) {
    cq_conversation_turn *t = elem;
    free(t->question);
    free(t->reply);
}

void cq_conversation_turns_free(cq_conversation_turn *t, size_t n) {
    for (size_t i = 0; i < n; i++) turn_drop(&t[i]);
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
    /* owner_user_id NULL for a key's ('n' binds no value) */
    int64_t made;
    cq_status rc = cq_db_int(cq_store_conn(s), "create conversation", &made, err,
                             "INSERT INTO conversations(owner_key_id, kb_id, title, created_at, updated_at, "
                             "owner_user_id) VALUES(?1, ?2, ?3, ?4, ?4, ?5) RETURNING id",
                             owner_user_id ? "iitii" : "iitin", owner_key_id, kb_id, title, (int64_t)time(NULL),
                             owner_user_id);
    if (!rc) *id = made;
    return rc;
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

/* A row of CONVERSATION_COLUMNS: false when out of memory. */
static bool conversation_read(cq_db_stmt *st, void *elem) {
    cq_conversation *c = elem;
    c->id = cq_db_col_int(st, 0);
    c->owner_key_id = cq_db_col_int(st, 1);
    c->kb_id = cq_db_col_int(st, 2);
    cq_db_col_copy(st, 3, c->kb, sizeof c->kb);
    c->title = cq_db_col_strdup(st, 4);
    c->created_at = cq_db_col_int(st, 5);
    c->updated_at = cq_db_col_int(st, 6);
    c->n_turns = (int)cq_db_col_int(st, 7);
    c->owner_user_id = cq_db_col_int(st, 8);
    return c->title != NULL;
}
static void conversation_drop(void *c) { cq_conversation_free(c); }
#define CONVERSATION_ROWS(what) what, sizeof **out, conversation_read, conversation_drop, (void **)out, n, err

cq_status cq_store_conversation_get(cq_store *s, int64_t id, cq_conversation *out, cq_err *err) {
    cq_status rc = cq_db_one(cq_store_conn(s), "get conversation", conversation_read, out, sizeof *out, err,
                             "SELECT " CONVERSATION_COLUMNS " WHERE c.id = ?1", "i", id);
    return rc == CQ_ERR_NOT_FOUND ? cq_err_set(err, rc, "no conversation %lld", (long long)id) : rc;
}

/* The conversations of a key (owner_key_id >= 0, user_id 0), of a user (user_id > 0), or of everyone
 * (owner_key_id < 0); with_open: open mode's too. */
static cq_status list(cq_store *s, int64_t owner_key_id, int64_t user_id, bool with_open, int64_t kb_id, size_t limit,
                      cq_conversation **out, size_t *n, cq_err *err) {
    /* NULLS LAST: a conversation without turns after those with turns of its second, on both stores */
    return cq_db_list(cq_store_conn(s), CONVERSATION_ROWS("list conversations"),
                      "SELECT " CONVERSATION_COLUMNS " WHERE (?1 < 0 OR (?4 = 0 AND c.owner_key_id = ?1 AND "
                      "c.owner_user_id IS NULL) OR (?4 > 0 AND c.owner_user_id = ?4) OR "
                      "(?5 = 1 AND c.owner_key_id = 0 AND c.owner_user_id IS NULL)) AND "
                      "(?2 = 0 OR c.kb_id = ?2) ORDER BY c.updated_at DESC, (SELECT max(t.id) FROM "
                      "conversation_turns t WHERE t.conversation_id = c.id) DESC NULLS LAST, c.id DESC LIMIT ?3",
                      "iiiii", owner_key_id, kb_id, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit, user_id,
                      (int64_t)(with_open ? 1 : 0));
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

/* A write of conversation id (?1; text ?2 when kinds names it): NOT_FOUND when no row changed. */
static cq_status change_one(cq_store *s, const char *what, int64_t id, cq_err *err, const char *sql, const char *kinds,
                            const char *text) {
    int64_t changed = 0;
    cq_status rc = cq_db_run(cq_store_conn(s), what, &changed, err, sql, kinds, id, text);
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

static bool turn_read(cq_db_stmt *st, void *elem) {
    cq_conversation_turn *t = elem;
    t->id = cq_db_col_int(st, 0);
    t->question = cq_db_col_strdup(st, 1);
    t->reply = cq_db_col_strdup(st, 2);
    t->created_at = cq_db_col_int(st, 3);
    if (t->question && t->reply) return true;
    turn_drop(t);
    return false;
}

cq_status cq_store_conversation_turns(cq_store *s, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                      cq_err *err) {
    /* the last last_n by id, then back in the order they were asked */
    return cq_db_list(cq_store_conn(s), "list turns", sizeof **out, turn_read, turn_drop, (void **)out, n, err,
                      "SELECT id, question, reply, created_at FROM (SELECT * FROM conversation_turns "
                      "WHERE conversation_id = ?1 ORDER BY id DESC LIMIT ?2) last ORDER BY id",
                      "ii", id, last_n && last_n < (size_t)INT64_MAX ? (int64_t)last_n : INT64_MAX);
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
    cq_status rc = cq_db_list(cq_store_conn(s), CONVERSATION_ROWS("search conversations"), sql, "iiti", owner_key_id,
                              kb_id, pattern, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    free(pattern);
    return rc;
}
