/* index/conversations_pg: conversations on PostgreSQL against a throwaway cluster (tests/pg/cluster.sh) — the same
 * semantics as the SQLite store's (index/conversations.h), compared operation by operation: owners and KBs, the
 * list's order, turns (the last n, replacing the last), rename, delete, deletion with the KB; and turns added from
 * two nodes at once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "index/conversations.h"
#include "index/conversations_pg.h"
#include "index/store.h"
#include "index/store_pg.h"
#include "pg_fixture.h"

typedef struct {
    cq_store *sq;
    cq_pg *pg;
    char path[128];
    int64_t kb_s[2], kb_p[2];
} twin;

static void twin_open(twin *t, cq_pg *pg) {
    memset(t, 0, sizeof *t);
    t->pg = pg;
    cq_err err = {0};
    snprintf(t->path, sizeof t->path, "/tmp/cq_test_conversations_pg_%d.db", (int)getpid());
    unlink(t->path);
    assert_int_equal(cq_store_open(t->path, &t->sq, &err), CQ_OK);
    const char *names[] = {"合同", "laws"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cq_store_kb_ensure(t->sq, names[i], &t->kb_s[i], &err), CQ_OK);
        assert_int_equal(cq_pg_kb_ensure(pg, names[i], &t->kb_p[i], &err), CQ_OK);
    }
}

static void twin_close(twin *t) {
    cq_store_close(t->sq);
    unlink(t->path);
}

/* The same statement on both stores' tables (times made equal, so that the order rests on the tie-breaks). */
static void twin_sql(twin *t, const char *sql) {
    assert_int_equal(sqlite3_exec(cq_store_db(t->sq), sql, NULL, NULL, NULL), SQLITE_OK);
    pg_exec(t->pg, sql);
}

static void assert_same_conversation(const cq_conversation *a, const cq_conversation *b) {
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->owner_key_id, b->owner_key_id);
    assert_string_equal(a->kb, b->kb);
    assert_string_equal(a->title, b->title);
    assert_int_equal(a->n_turns, b->n_turns);
    assert_int_equal(a->updated_at, b->updated_at);
}

static void assert_same_list(twin *t, int64_t owner, int kb, size_t limit, size_t expect) {
    cq_err err = {0};
    cq_conversation *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_conversation_list(t->sq, owner, kb >= 0 ? t->kb_s[kb] : 0, limit, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_list(t->pg, owner, kb >= 0 ? t->kb_p[kb] : 0, limit, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, expect);
    assert_int_equal(nb, expect);
    for (size_t i = 0; i < na; i++) assert_same_conversation(&a[i], &b[i]);
    cq_conversation_free_array(a, na);
    cq_conversation_free_array(b, nb);
}

static void assert_same_turns(twin *t, int64_t id, size_t last_n, size_t expect) {
    cq_err err = {0};
    cq_conversation_turn *a, *b;
    size_t na, nb;
    assert_int_equal(cq_store_conversation_turns(t->sq, id, last_n, &a, &na, &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_turns(t->pg, id, last_n, &b, &nb, &err), CQ_OK);
    assert_int_equal(na, expect);
    assert_int_equal(nb, expect);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(a[i].id, b[i].id);
        assert_string_equal(a[i].question, b[i].question);
        assert_string_equal(a[i].reply, b[i].reply);
        assert_true(b[i].created_at > 0);
    }
    cq_conversation_turns_free(a, na);
    cq_conversation_turns_free(b, nb);
}

static void both_add_turn(twin *t, int64_t id, const char *q, const char *r, int replace) {
    cq_err err = {0};
    assert_int_equal(cq_store_conversation_add_turn(t->sq, id, q, r, replace, &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_add_turn(t->pg, id, q, r, replace, &err), CQ_OK);
}

static void test_semantics_as_sqlite(void **state) {
    twin t;
    twin_open(&t, *state);
    cq_err err = {0};
    /* conversations of owners 7 and 0 (open mode) in two KBs */
    struct {
        int64_t owner;
        int kb;
        const char *title;
    } convs[] = {{7, 0, "试用期多长？"}, {7, 1, "notice period"}, {0, 0, "open mode"}, {7, 0, "第三个"}};
    int64_t ids[4];
    for (int i = 0; i < 4; i++) {
        int64_t s_id, p_id;
        assert_int_equal(cq_store_conversation_create(t.sq, convs[i].owner, t.kb_s[convs[i].kb], convs[i].title, &s_id,
                                                      &err),
                         CQ_OK);
        assert_int_equal(cq_pg_conversation_create(t.pg, convs[i].owner, t.kb_p[convs[i].kb], convs[i].title, &p_id,
                                                   &err),
                         CQ_OK);
        assert_int_equal(s_id, p_id);
        ids[i] = p_id;
    }
    both_add_turn(&t, ids[0], "试用期多长？", "{\"answer\":\"六个月\"}", 0);
    both_add_turn(&t, ids[0], "那工资呢？", "{\"answer\":\"80%\"}", 0);
    both_add_turn(&t, ids[0], "那工资呢？", "{\"answer\":\"不低于80%\",\"regenerated\":true}", 1);
    both_add_turn(&t, ids[1], "notice?", "{\"answer\":\"30 days\"}", 1); /* replacing with no turn yet: appends */
    both_add_turn(&t, ids[3], "q", "{}", 0);
    assert_same_turns(&t, ids[0], 0, 2);
    assert_same_turns(&t, ids[0], 1, 1);
    assert_same_turns(&t, ids[0], 5, 2);
    assert_same_turns(&t, ids[2], 0, 0);
    assert_same_turns(&t, 999, 0, 0);
    cq_conversation_turn *turns;
    size_t n;
    assert_int_equal(cq_pg_conversation_turns(t.pg, ids[0], 1, &turns, &n, &err), CQ_OK);
    assert_string_equal(turns[0].reply, "{\"answer\":\"不低于80%\",\"regenerated\":true}");
    cq_conversation_turns_free(turns, n);

    /* the list: newest by its last turn; equal times by the newest turn, then the newest conversation */
    twin_sql(&t, "UPDATE conversations SET updated_at = 1000");
    assert_same_list(&t, -1, -1, 100, 4);
    assert_same_list(&t, 7, -1, 100, 3);
    assert_same_list(&t, 7, 0, 100, 2);
    assert_same_list(&t, 0, -1, 100, 1);
    assert_same_list(&t, -1, 1, 100, 1);
    assert_same_list(&t, -1, -1, 2, 2);
    assert_same_list(&t, 8, -1, 100, 0);
    twin_sql(&t, "UPDATE conversations SET updated_at = 2000 WHERE id = 3");
    assert_same_list(&t, -1, -1, 100, 4);
    cq_conversation c;
    assert_int_equal(cq_pg_conversation_get(t.pg, ids[0], &c, &err), CQ_OK);
    assert_int_equal(c.n_turns, 2);
    assert_string_equal(c.kb, "合同");
    assert_int_equal(c.kb_id, t.kb_p[0]);
    assert_true(c.created_at > 0);
    cq_conversation_free(&c);

    /* rename, delete, bad titles, ones that are not there */
    assert_int_equal(cq_pg_conversation_rename(t.pg, ids[1], "通知期", &err), CQ_OK);
    assert_int_equal(cq_store_conversation_rename(t.sq, ids[1], "通知期", &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_rename(t.pg, 999, "x", &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_conversation_rename(t.pg, ids[1], "", &err), CQ_ERR_INVALID);
    char long_title[CQ_CONVERSATION_TITLE_MAX_BYTES + 2];
    memset(long_title, 'x', sizeof long_title - 1);
    long_title[sizeof long_title - 1] = 0;
    assert_int_equal(cq_pg_conversation_rename(t.pg, ids[1], long_title, &err), CQ_ERR_INVALID);
    int64_t none;
    assert_int_equal(cq_pg_conversation_create(t.pg, 7, t.kb_p[0], NULL, &none, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_pg_conversation_create(t.pg, 7, t.kb_p[0], long_title, &none, &err), CQ_ERR_INVALID);
    long_title[CQ_CONVERSATION_TITLE_MAX_BYTES] = 0; /* at the limit: allowed */
    assert_int_equal(cq_pg_conversation_rename(t.pg, ids[1], long_title, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_rename(t.sq, ids[1], long_title, &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_add_turn(t.pg, 999, "q", "{}", 0, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(cq_pg_conversation_get(t.pg, 999, &c, &err), CQ_ERR_NOT_FOUND);
    assert_same_list(&t, -1, -1, 100, 4);
    assert_int_equal(cq_store_conversation_delete(t.sq, ids[0], &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_delete(t.pg, ids[0], &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_delete(t.pg, ids[0], &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(pg_count(t.pg, "SELECT count(*) FROM conversation_turns WHERE conversation_id = 1"), 0);
    assert_same_list(&t, -1, -1, 100, 3);
    /* a KB's deletion takes its conversations and their turns */
    assert_int_equal(cq_store_kb_delete(t.sq, t.kb_s[0], &err), CQ_OK);
    assert_int_equal(cq_pg_kb_delete(t.pg, t.kb_p[0], &err), CQ_OK);
    assert_same_list(&t, -1, -1, 100, 1);
    assert_int_equal(pg_count(t.pg, "SELECT count(*) FROM conversation_turns"), 1);
    /* ids are never reused */
    int64_t again;
    assert_int_equal(cq_pg_conversation_create(t.pg, 7, t.kb_p[1], "again", &again, &err), CQ_OK);
    assert_true(again > ids[3]);
    twin_close(&t);
}

#define TURNS_PER_NODE 40

typedef struct {
    cq_pg *pg;
    int64_t conversation;
    int node;
    cq_status rc;
} turn_writer;

static void *write_turns(void *arg) {
    turn_writer *w = arg;
    cq_err err = {0};
    for (int i = 0; i < TURNS_PER_NODE && !w->rc; i++) {
        char q[32];
        snprintf(q, sizeof q, "node %d turn %d", w->node, i);
        /* every fifth turn regenerates the last one, whoever wrote it */
        w->rc = cq_pg_conversation_add_turn(w->pg, w->conversation, q, "{}", i % 5 == 4, &err);
    }
    if (w->rc) fprintf(stderr, "node %d: %s\n", w->node, err.msg);
    return NULL;
}

static void test_turns_from_two_nodes(void **state) {
    cq_pg *pg = *state;
    cq_err err = {0};
    int64_t kb, id;
    assert_int_equal(cq_pg_kb_ensure(pg, "k", &kb, &err), CQ_OK);
    assert_int_equal(cq_pg_conversation_create(pg, 1, kb, "shared", &id, &err), CQ_OK);
    turn_writer w[2] = {{pg_connect_again(pg), id, 1, CQ_OK}, {pg_connect_again(pg), id, 2, CQ_OK}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, write_turns, &w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(w[i].rc, CQ_OK);
        cq_pg_close(w[i].pg);
    }
    /* each replacement removed exactly one turn: none lost, none doubled */
    const int replaced = 2 * (TURNS_PER_NODE / 5);
    cq_conversation c;
    assert_int_equal(cq_pg_conversation_get(pg, id, &c, &err), CQ_OK);
    assert_int_equal(c.n_turns, 2 * TURNS_PER_NODE - replaced);
    cq_conversation_free(&c);
    cq_conversation_turn *turns;
    size_t n;
    assert_int_equal(cq_pg_conversation_turns(pg, id, 0, &turns, &n, &err), CQ_OK);
    assert_int_equal(n, 2 * TURNS_PER_NODE - replaced);
    for (size_t i = 1; i < n; i++) assert_true(turns[i].id > turns[i - 1].id);
    cq_conversation_turns_free(turns, n);
}

int main(void) {
    PG_FIXTURE_REQUIRE_SERVER();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_semantics_as_sqlite, pg_setup, pg_teardown),
        cmocka_unit_test_setup_teardown(test_turns_from_two_nodes, pg_setup, pg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
