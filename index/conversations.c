/* Conversations and their turns in SQLite (index/conversations.h). */
#include "index/conversations.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/conversations_pg.h"

static cq_status db_error(cq_store *s, cq_err *err, const char *what) {
    return cq_err_set(err, CQ_ERR_DB, "%s: %s", what, sqlite3_errmsg(cq_store_db(s)));
}

static char *col_strdup(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return strdup(t ? (const char *)t : "");
}

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

/* The array list (capacity *cap, count used) with room for one more element; NULL when out of memory (list is then
 * unchanged, still the caller's to free). */
static void *reserve(void *list, size_t *cap, size_t count, size_t elem_size) {
    if (count < *cap) return list;
    size_t ncap = *cap ? 2 * *cap : 16;
    void *grown = realloc(list, ncap * elem_size);
    if (grown) *cap = ncap;
    return grown;
}

cq_status cq_conversation_title_check(const char *title, cq_err *err) {
    if (!title || !title[0]) return cq_err_set(err, CQ_ERR_INVALID, "a conversation needs a title");
    if (strlen(title) > CQ_CONVERSATION_TITLE_MAX_BYTES)
        return cq_err_set(err, CQ_ERR_INVALID, "a conversation's title has at most %d bytes",
                          CQ_CONVERSATION_TITLE_MAX_BYTES);
    return CQ_OK;
}

cq_status cq_store_conversation_create(cq_store *s, int64_t owner_key_id, int64_t kb_id, const char *title,
                                       int64_t *id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_create(pg, owner_key_id, kb_id, title, id, err);
    if (cq_conversation_title_check(title, err)) return CQ_ERR_INVALID;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "INSERT INTO conversations(owner_key_id, kb_id, title, created_at, updated_at) "
                           "VALUES(?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "create conversation");
    sqlite3_int64 now = (sqlite3_int64)time(NULL);
    sqlite3_bind_int64(st, 1, owner_key_id);
    sqlite3_bind_int64(st, 2, kb_id);
    sqlite3_bind_text(st, 3, title, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, now);
    sqlite3_bind_int64(st, 5, now);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_error(s, err, "create conversation");
    *id = sqlite3_last_insert_rowid(cq_store_db(s));
    return CQ_OK;
}

#define CONVERSATION_COLUMNS                                                                                       \
    "c.id, c.owner_key_id, c.kb_id, k.name, c.title, c.created_at, c.updated_at, "                                 \
    "(SELECT count(*) FROM conversation_turns t WHERE t.conversation_id = c.id) "                                  \
    "FROM conversations c JOIN kbs k ON k.id = c.kb_id"

static cq_status conversation_from_row(sqlite3_stmt *st, cq_conversation *c, cq_err *err) {
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(st, 0);
    c->owner_key_id = sqlite3_column_int64(st, 1);
    c->kb_id = sqlite3_column_int64(st, 2);
    snprintf(c->kb, sizeof c->kb, "%s", (const char *)sqlite3_column_text(st, 3));
    c->title = col_strdup(st, 4);
    c->created_at = sqlite3_column_int64(st, 5);
    c->updated_at = sqlite3_column_int64(st, 6);
    c->n_turns = sqlite3_column_int(st, 7);
    return c->title ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
}

cq_status cq_store_conversation_get(cq_store *s, int64_t id, cq_conversation *out, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_get(pg, id, out, err);
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "SELECT " CONVERSATION_COLUMNS " WHERE c.id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, err, "get conversation");
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    cq_status out_rc;
    if (rc == SQLITE_ROW) out_rc = conversation_from_row(st, out, err);
    else if (rc == SQLITE_DONE) out_rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    else out_rc = db_error(s, err, "get conversation");
    sqlite3_finalize(st);
    return out_rc;
}

cq_status cq_store_conversation_list(cq_store *s, int64_t owner_key_id, int64_t kb_id, size_t limit,
                                     cq_conversation **out, size_t *n, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_list(pg, owner_key_id, kb_id, limit, out, n, err);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "SELECT " CONVERSATION_COLUMNS " WHERE (?1 < 0 OR c.owner_key_id = ?1) AND "
                           "(?2 = 0 OR c.kb_id = ?2) ORDER BY c.updated_at DESC, (SELECT max(t.id) FROM "
                           "conversation_turns t WHERE t.conversation_id = c.id) DESC, c.id DESC LIMIT ?3",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "list conversations");
    sqlite3_bind_int64(st, 1, owner_key_id);
    sqlite3_bind_int64(st, 2, kb_id);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)limit);
    cq_conversation *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        cq_conversation *room = reserve(list, &cap, count, sizeof *list);
        if (!room) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        list = room;
        rc = conversation_from_row(st, &list[count], err);
        count++;
    }
    if (!rc && step != SQLITE_DONE) rc = db_error(s, err, "list conversations");
    sqlite3_finalize(st);
    if (rc) {
        cq_conversation_free_array(list, count);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

/* Runs a statement that changes conversation id (bound as ?1 after binds); NOT_FOUND when no row changed. */
static cq_status change_one(cq_store *s, sqlite3_stmt *st, int64_t id, const char *what, cq_err *err) {
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_error(s, err, what);
    if (sqlite3_changes(cq_store_db(s)) == 0)
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    return CQ_OK;
}

cq_status cq_store_conversation_rename(cq_store *s, int64_t id, const char *title, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_rename(pg, id, title, err);
    if (cq_conversation_title_check(title, err)) return CQ_ERR_INVALID;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "UPDATE conversations SET title = ?2 WHERE id = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, err, "rename conversation");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, title, -1, SQLITE_TRANSIENT);
    return change_one(s, st, id, "rename conversation", err);
}

cq_status cq_store_conversation_delete(cq_store *s, int64_t id, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_delete(pg, id, err);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), "DELETE FROM conversations WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "delete conversation");
    sqlite3_bind_int64(st, 1, id);
    return change_one(s, st, id, "delete conversation", err); /* the turns go with it (ON DELETE CASCADE) */
}

cq_status cq_store_conversation_turns(cq_store *s, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                      cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_turns(pg, id, last_n, out, n, err);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    /* the last last_n by id, then back in the order they were asked */
    if (sqlite3_prepare_v2(cq_store_db(s),
                           "SELECT id, question, reply, created_at FROM (SELECT * FROM conversation_turns "
                           "WHERE conversation_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_error(s, err, "list turns");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, last_n ? (sqlite3_int64)last_n : -1);
    cq_conversation_turn *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        cq_conversation_turn *room = reserve(list, &cap, count, sizeof *list);
        if (!room) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        list = room;
        cq_conversation_turn *t = &list[count++];
        t->id = sqlite3_column_int64(st, 0);
        t->question = col_strdup(st, 1);
        t->reply = col_strdup(st, 2);
        t->created_at = sqlite3_column_int64(st, 3);
        if (!t->question || !t->reply) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (!rc && step != SQLITE_DONE) rc = db_error(s, err, "list turns");
    sqlite3_finalize(st);
    if (rc) {
        cq_conversation_turns_free(list, count);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}

/* Runs sql with ?1 = id (and ?2 = now when it has one); false on failure (err set). */
static bool run_with_id(cq_store *s, const char *sql, int64_t id, cq_err *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(cq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        db_error(s, err, "update conversation");
        return false;
    }
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_bind_parameter_count(st) > 1) sqlite3_bind_int64(st, 2, (sqlite3_int64)time(NULL));
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) db_error(s, err, "update conversation");
    return rc == SQLITE_DONE;
}

cq_status cq_store_conversation_add_turn(cq_store *s, int64_t id, const char *question, const char *reply,
                                         int replace_last, cq_err *err) {
    cq_pg *pg = cq_store_pg(s);
    if (pg) return cq_pg_conversation_add_turn(pg, id, question, reply, replace_last, err);
    if (cq_store_begin(s, err)) return err->code;
    bool ok = run_with_id(s, "UPDATE conversations SET updated_at = ?2 WHERE id = ?1", id, err);
    if (ok && sqlite3_changes(cq_store_db(s)) == 0) {
        cq_store_rollback(s);
        return cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
    }
    if (ok && replace_last)
        ok = run_with_id(s,
                         "DELETE FROM conversation_turns WHERE id = (SELECT max(id) FROM conversation_turns "
                         "WHERE conversation_id = ?1)",
                         id, err);
    sqlite3_stmt *st = NULL;
    if (ok && sqlite3_prepare_v2(cq_store_db(s),
                                 "INSERT INTO conversation_turns(conversation_id, question, reply, created_at) "
                                 "VALUES(?, ?, ?, ?)",
                                 -1, &st, NULL) != SQLITE_OK) {
        db_error(s, err, "add turn");
        ok = false;
    }
    if (ok) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, question, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, reply, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)time(NULL));
        if (sqlite3_step(st) != SQLITE_DONE) {
            db_error(s, err, "add turn");
            ok = false;
        }
    }
    sqlite3_finalize(st);
    if (ok && cq_store_commit(s, err) == CQ_OK) return CQ_OK;
    cq_store_rollback(s);
    return err->code ? err->code : CQ_ERR_DB;
}
