/* Conversations on PostgreSQL (conversations_pg.h). */
#include "index/conversations_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "index/pg_query.h"

cq_status cq_pg_conversation_create(cq_pg *pg, int64_t owner_key_id, int64_t kb_id, const char *title, int64_t *id,
                                    cq_err *err) {
    if (cq_conversation_title_check(title, err)) return CQ_ERR_INVALID;
    cq_pgq_args a = {0};
    cq_pgq_int(&a, owner_key_id);
    cq_pgq_int(&a, kb_id);
    cq_pgq_text(&a, title);
    cq_pgq_int(&a, (int64_t)time(NULL));
    PGresult *r = cq_pgq_run(pg,
                             "INSERT INTO conversations(owner_key_id, kb_id, title, created_at, updated_at) "
                             "VALUES($1, $2, $3, $4, $4) RETURNING id",
                             &a, "create conversation", err);
    if (!r) return CQ_ERR_DB;
    *id = cq_pgq_int64(r, 0, 0);
    PQclear(r);
    return CQ_OK;
}

#define CONVERSATION_COLUMNS                                                                                  \
    "c.id, c.owner_key_id, c.kb_id, k.name, c.title, c.created_at, c.updated_at, "                            \
    "(SELECT count(*) FROM conversation_turns t WHERE t.conversation_id = c.id)::int4 "                       \
    "FROM conversations c JOIN kbs k ON k.id = c.kb_id"

static cq_status conversations_from(const PGresult *r, cq_conversation **out, size_t *n, cq_err *err) {
    int rows = PQntuples(r);
    cq_conversation *list = calloc(rows ? (size_t)rows : 1, sizeof *list);
    if (!list) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int i = 0; i < rows; i++) {
        cq_conversation *c = &list[i];
        c->id = cq_pgq_int64(r, i, 0);
        c->owner_key_id = cq_pgq_int64(r, i, 1);
        c->kb_id = cq_pgq_int64(r, i, 2);
        snprintf(c->kb, sizeof c->kb, "%s", cq_pgq_str(r, i, 3));
        c->title = strdup(cq_pgq_str(r, i, 4));
        c->created_at = cq_pgq_int64(r, i, 5);
        c->updated_at = cq_pgq_int64(r, i, 6);
        c->n_turns = cq_pgq_int32(r, i, 7);
        if (!c->title) {
            cq_conversation_free_array(list, (size_t)rows);
            return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
    }
    *out = list;
    *n = (size_t)rows;
    return CQ_OK;
}

cq_status cq_pg_conversation_get(cq_pg *pg, int64_t id, cq_conversation *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    PGresult *r = cq_pgq_run(pg, "SELECT " CONVERSATION_COLUMNS " WHERE c.id = $1", &a, "get conversation", err);
    if (!r) return CQ_ERR_DB;
    cq_conversation *list = NULL;
    size_t n = 0;
    cq_status rc = conversations_from(r, &list, &n, err);
    PQclear(r);
    if (rc) return rc;
    if (n == 1) *out = list[0];
    free(list);
    return n == 1 ? CQ_OK : cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
}

cq_status cq_pg_conversation_list(cq_pg *pg, int64_t owner_key_id, int64_t kb_id, size_t limit,
                                  cq_conversation **out, size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_pgq_args a = {0};
    cq_pgq_int(&a, owner_key_id);
    cq_pgq_int(&a, kb_id);
    cq_pgq_int(&a, (int64_t)limit);
    /* NULLS LAST: a conversation without turns sorts as SQLite sorts it, after those with turns of its second */
    PGresult *r = cq_pgq_run(pg,
                             "SELECT " CONVERSATION_COLUMNS " WHERE ($1 < 0 OR c.owner_key_id = $1) AND "
                             "($2 = 0 OR c.kb_id = $2) ORDER BY c.updated_at DESC, (SELECT max(t.id) FROM "
                             "conversation_turns t WHERE t.conversation_id = c.id) DESC NULLS LAST, c.id DESC LIMIT $3",
                             &a, "list conversations", err);
    if (!r) return CQ_ERR_DB;
    cq_status rc = conversations_from(r, out, n, err);
    PQclear(r);
    return rc;
}

/* A write of conversation id: NOT_FOUND when no row changed. */
static cq_status change_one(cq_pg *pg, const char *sql, const cq_pgq_args *a, int64_t id, const char *what,
                            cq_err *err) {
    int64_t changed = 0;
    if (cq_pgq_exec(pg, sql, a, what, &changed, err)) return CQ_ERR_DB;
    return changed ? CQ_OK : cq_err_set(err, CQ_ERR_NOT_FOUND, "no conversation %lld", (long long)id);
}

cq_status cq_pg_conversation_rename(cq_pg *pg, int64_t id, const char *title, cq_err *err) {
    if (cq_conversation_title_check(title, err)) return CQ_ERR_INVALID;
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    cq_pgq_text(&a, title);
    return change_one(pg, "UPDATE conversations SET title = $2 WHERE id = $1", &a, id, "rename conversation", err);
}

cq_status cq_pg_conversation_delete(cq_pg *pg, int64_t id, cq_err *err) {
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    /* the turns go with it (ON DELETE CASCADE) */
    return change_one(pg, "DELETE FROM conversations WHERE id = $1", &a, id, "delete conversation", err);
}

cq_status cq_pg_conversation_turns(cq_pg *pg, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                   cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    if (last_n) cq_pgq_int(&a, (int64_t)last_n);
    else cq_pgq_text(&a, NULL); /* LIMIT NULL: all of them */
    /* the last last_n by id, then back in the order they were asked */
    PGresult *r = cq_pgq_run(pg,
                             "SELECT id, question, reply, created_at FROM (SELECT * FROM conversation_turns "
                             "WHERE conversation_id = $1 ORDER BY id DESC LIMIT $2) last ORDER BY id",
                             &a, "list turns", err);
    if (!r) return CQ_ERR_DB;
    int rows = PQntuples(r);
    cq_conversation_turn *list = calloc(rows ? (size_t)rows : 1, sizeof *list);
    cq_status rc = list ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < rows; i++) {
        cq_conversation_turn *t = &list[i];
        t->id = cq_pgq_int64(r, i, 0);
        t->question = strdup(cq_pgq_str(r, i, 1));
        t->reply = strdup(cq_pgq_str(r, i, 2));
        t->created_at = cq_pgq_int64(r, i, 3);
        if (!t->question || !t->reply) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    PQclear(r);
    if (rc) {
        if (list) cq_conversation_turns_free(list, (size_t)rows);
        return rc;
    }
    *out = list;
    *n = (size_t)rows;
    return CQ_OK;
}

cq_status cq_pg_conversation_add_turn(cq_pg *pg, int64_t id, const char *question, const char *reply,
                                      int replace_last, cq_err *err) {
    int own;
    cq_status rc = cq_pgq_begin(pg, &own, err);
    cq_pgq_args a = {0};
    cq_pgq_int(&a, id);
    cq_pgq_int(&a, (int64_t)time(NULL));
    /* first: the conversation's row, locked until the commit, so turns added from two nodes come one after the
     * other and "the last turn" is the same for both */
    if (!rc) rc = change_one(pg, "UPDATE conversations SET updated_at = $2 WHERE id = $1", &a, id, "add turn", err);
    a.n = 1;
    if (!rc && replace_last)
        rc = cq_pgq_exec(pg,
                         "DELETE FROM conversation_turns WHERE id = (SELECT max(id) FROM conversation_turns "
                         "WHERE conversation_id = $1)",
                         &a, "add turn", NULL, err);
    if (!rc) {
        cq_pgq_args t = {0};
        cq_pgq_int(&t, id);
        cq_pgq_text(&t, question);
        cq_pgq_text(&t, reply);
        cq_pgq_int(&t, (int64_t)time(NULL));
        rc = cq_pgq_exec(pg,
                         "INSERT INTO conversation_turns(conversation_id, question, reply, created_at) "
                         "VALUES($1, $2, $3, $4)",
                         &t, "add turn", NULL, err);
    }
    if (rc && !own) return rc; /* the caller's transaction: the caller rolls back */
    return cq_pgq_end(pg, own, rc, err);
}
