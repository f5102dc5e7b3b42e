/* store/conversations.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL —
 * conversations per owner and KB, their turns in order (the last one replaceable), renames, deletes, what goes with
 * the KB, and turns added from two connections at once. */
#ifndef CQ_TESTS_STORE_CONVERSATIONS_BODIES_H
#define CQ_TESTS_STORE_CONVERSATIONS_BODIES_H

#include <pthread.h>
#include <stdio.h>

#include "store/conversations.h"
#include "tests/store/conformance.h"

static void conf_conversations_turns(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, id;
    assert_int_equal(cq_store_kb_create(s, "laws", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 7, kb, "加班工资", &id, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q1", "{\"answer\":\"a1\"}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q2", "{\"answer\":\"a2\"}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q3", "{\"answer\":\"a3\"}", 0, &err), CQ_OK);

    cq_conversation_turn *t;
    size_t n;
    assert_int_equal(cq_store_conversation_turns(s, id, 0, &t, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_string_equal(t[0].question, "q1"); /* in the order they were asked */
    assert_string_equal(t[2].reply, "{\"answer\":\"a3\"}");
    cq_conversation_turns_free(t, n);
    assert_int_equal(cq_store_conversation_turns(s, id, 2, &t, &n, &err), CQ_OK);
    assert_int_equal(n, 2); /* the last two, still in order */
    assert_string_equal(t[0].question, "q2");
    assert_string_equal(t[1].question, "q3");
    cq_conversation_turns_free(t, n);

    /* regenerate: the last turn replaced */
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q3", "{\"answer\":\"b3\"}", 1, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_turns(s, id, 0, &t, &n, &err), CQ_OK);
    assert_int_equal(n, 3);
    assert_string_equal(t[2].reply, "{\"answer\":\"b3\"}");
    cq_conversation_turns_free(t, n);

    cq_conversation c;
    assert_int_equal(cq_store_conversation_get(s, id, &c, &err), CQ_OK);
    assert_int_equal(c.owner_key_id, 7);
    assert_int_equal(c.kb_id, kb);
    assert_string_equal(c.kb, "laws");
    assert_string_equal(c.title, "加班工资");
    assert_int_equal(c.n_turns, 3);
    assert_true(c.updated_at >= c.created_at && c.created_at > 0);
    cq_conversation_free(&c);

    assert_int_equal(cq_store_conversation_add_turn(s, 999, "q", "{}", 0, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM conversation_turns WHERE conversation_id = 999"), 0);
    assert_int_equal(cq_store_conversation_get(s, 999, &c, &err), CQ_ERR_NOT_FOUND);
}

static void conf_conversations_list_rename_delete(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t laws, contracts, a, b, c, d;
    assert_int_equal(cq_store_kb_create(s, "laws", &laws, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "contracts", &contracts, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 1, laws, "a", &a, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 1, laws, "b", &b, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 1, contracts, "c", &c, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 0, laws, "d", &d, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, b, "q", "{}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, a, "q", "{}", 0, &err), CQ_OK); /* a: the newest turn */

    cq_conversation *list;
    size_t n;
    assert_int_equal(cq_store_conversation_list(s, 1, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 3); /* owner 1's, of every KB */
    assert_int_equal(list[0].id, a);
    assert_int_equal(list[1].id, b);
    assert_int_equal(list[0].n_turns, 1);
    cq_conversation_free_array(list, n);
    assert_int_equal(cq_store_conversation_list(s, 1, laws, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    cq_conversation_free_array(list, n);
    assert_int_equal(cq_store_conversation_list(s, -1, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 4); /* every owner's */
    cq_conversation_free_array(list, n);
    assert_int_equal(cq_store_conversation_list(s, -1, 0, 2, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 2); /* the limit */
    cq_conversation_free_array(list, n);
    assert_int_equal(cq_store_conversation_list(s, 5, 0, 10, &list, &n, &err), CQ_OK);
    assert_int_equal(n, 0);
    free(list);

    assert_int_equal(cq_store_conversation_rename(s, a, "新名字", &err), CQ_OK);
    cq_conversation got;
    assert_int_equal(cq_store_conversation_get(s, a, &got, &err), CQ_OK);
    assert_string_equal(got.title, "新名字");
    cq_conversation_free(&got);
    assert_int_equal(cq_store_conversation_rename(s, a, "", &err), CQ_ERR_INVALID);
    char long_title[CQ_CONVERSATION_TITLE_MAX_BYTES + 2];
    memset(long_title, 'x', sizeof long_title - 1);
    long_title[sizeof long_title - 1] = 0;
    assert_int_equal(cq_store_conversation_rename(s, a, long_title, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_conversation_create(s, 1, laws, NULL, &got.id, &err), CQ_ERR_INVALID);
    assert_int_equal(cq_store_conversation_rename(s, 999, "x", &err), CQ_ERR_NOT_FOUND);

    assert_int_equal(cq_store_conversation_delete(s, a, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM conversation_turns"), 1); /* a's turn went with it */
    assert_int_equal(cq_store_conversation_delete(s, a, &err), CQ_ERR_NOT_FOUND);

    /* a KB's conversations go with the KB */
    assert_int_equal(cq_store_kb_delete(s, laws, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM conversations"), 1);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM conversation_turns"), 0);
}

#define CONF_TURNS_PER_WRITER 40

typedef struct {
    cq_store *s;
    int64_t conversation;
    int node;
    cq_status rc;
} conf_turn_writer;

static void *conf_write_turns(void *arg) {
    conf_turn_writer *w = arg;
    cq_err err = {0};
    for (int i = 0; i < CONF_TURNS_PER_WRITER && !w->rc; i++) {
        char q[32];
        snprintf(q, sizeof q, "node %d turn %d", w->node, i);
        /* every fifth turn regenerates the last one, whoever wrote it */
        w->rc = cq_store_conversation_add_turn(w->s, w->conversation, q, "{}", i % 5 == 4, &err);
    }
    if (w->rc) fprintf(stderr, "writer %d: %s\n", w->node, err.msg);
    return NULL;
}

/* Two connections (two nodes, or two threads of one) adding turns to one conversation: each replacement removes
 * exactly one turn, none lost, none doubled. */
static void conf_conversations_two_writers(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, id;
    assert_int_equal(cq_store_kb_ensure(s, "k", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 1, kb, "shared", &id, &err), CQ_OK);
    conf_turn_writer w[2] = {{conf_reopen(state), id, 1, CQ_OK}, {conf_reopen(state), id, 2, CQ_OK}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, conf_write_turns, &w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(w[i].rc, CQ_OK);
        cq_store_close(w[i].s);
    }
    const int replaced = 2 * (CONF_TURNS_PER_WRITER / 5);
    cq_conversation c;
    assert_int_equal(cq_store_conversation_get(s, id, &c, &err), CQ_OK);
    assert_int_equal(c.n_turns, 2 * CONF_TURNS_PER_WRITER - replaced);
    cq_conversation_free(&c);
    cq_conversation_turn *turns;
    size_t n;
    assert_int_equal(cq_store_conversation_turns(s, id, 0, &turns, &n, &err), CQ_OK);
    assert_int_equal(n, 2 * CONF_TURNS_PER_WRITER - replaced);
    for (size_t i = 1; i < n; i++) assert_true(turns[i].id > turns[i - 1].id);
    cq_conversation_turns_free(turns, n);
}

#endif
