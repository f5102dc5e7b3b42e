/* store/feedback.h's conformance bodies (tests/store/conformance.h): the same on SQLite and PostgreSQL — a turn's
 * rating set, replaced and cleared, bad input refused with nothing changed, ratings gone with their turn, the rated
 * answers of a KB, and the quality log counted per KB and day. */
#ifndef CQ_TESTS_STORE_FEEDBACK_BODIES_H
#define CQ_TESTS_STORE_FEEDBACK_BODIES_H

#include <stdio.h>

#include "store/conversations.h"
#include "store/feedback.h"
#include "tests/store/conformance.h"

static void conf_feedback_rate(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t kb, id;
    assert_int_equal(cq_store_kb_create(s, "laws", &kb, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 7, kb, "加班", &id, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q1", "{\"answer\":\"a1\"}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, id, "q2", "{\"answer\":\"a2\"}", 0, &err), CQ_OK);

    CONF_EXPECT(cq_store_feedback_set(s, id, 2, -1, "引用的条款不对", &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_set(s, id, 1, 1, NULL, &err), CQ_OK);
    cq_feedback *f;
    size_t n;
    CONF_EXPECT(cq_store_feedback_of(s, id, &f, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f[0].turn, 1);
    assert_int_equal(f[0].rating, 1);
    assert_string_equal(f[0].comment, "");
    assert_int_equal(f[1].turn, 2);
    assert_int_equal(f[1].rating, -1);
    assert_string_equal(f[1].comment, "引用的条款不对");
    cq_feedback_free_array(f, n);

    /* rating again replaces the rating */
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, 1, "fine after all", &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM turn_feedback"), 2);
    CONF_EXPECT(cq_store_feedback_of(s, id, &f, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f[1].rating, 1);
    assert_string_equal(f[1].comment, "fine after all");
    cq_feedback_free_array(f, n);

    /* bad input: a clear error, nothing changed */
    CONF_EXPECT(cq_store_feedback_set(s, id, 3, -1, "", &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no turn 3"));
    CONF_EXPECT(cq_store_feedback_set(s, id, 0, -1, "", &err), CQ_ERR_NOT_FOUND);
    CONF_EXPECT(cq_store_feedback_set(s, 999, 1, -1, "", &err), CQ_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no conversation 999"));
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, 0, "", &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, 2, "", &err), CQ_ERR_INVALID);
    char *longc = malloc(3 * (CQ_FEEDBACK_COMMENT_MAX_CHARS + 1) + 1);
    longc[0] = 0;
    for (int i = 0; i < CQ_FEEDBACK_COMMENT_MAX_CHARS; i++) strcat(longc, "条"); /* 2,000 characters: fine */
    CONF_EXPECT(cq_store_feedback_set(s, id, 1, -1, longc, &err), CQ_OK);
    strcat(longc, "x"); /* 2,001: refused */
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, -1, longc, &err), CQ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "2000"));
    free(longc);
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, -1, "\xff\xfe", &err), CQ_ERR_INVALID);
    CONF_EXPECT(cq_store_feedback_of(s, id, &f, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(f[1].rating, 1); /* turn 2 as it was */
    assert_string_equal(f[1].comment, "fine after all");
    cq_feedback_free_array(f, n);

    /* cleared */
    CONF_EXPECT(cq_store_feedback_clear(s, id, 1, &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_clear(s, id, 1, &err), CQ_ERR_NOT_FOUND);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM turn_feedback"), 1);

    /* a regenerated answer starts unrated; a deleted conversation takes its ratings */
    CONF_EXPECT(cq_store_conversation_add_turn(s, id, "q2", "{\"answer\":\"b2\"}", 1, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM turn_feedback"), 0);
    CONF_EXPECT(cq_store_feedback_set(s, id, 2, -1, "still wrong", &err), CQ_OK);
    CONF_EXPECT(cq_store_conversation_delete(s, id, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM turn_feedback"), 0);
}

static void conf_feedback_rated_export(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t a, b, ca, cb;
    assert_int_equal(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "policies", &b, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 1, a, "t", &ca, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 2, b, "t", &cb, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, ca, "第一条？", "{\"answer\":\"x\"}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, ca, "unrated", "{\"answer\":\"y\"}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, cb, "other kb", "{\"answer\":\"z\"}", 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_set(s, ca, 1, -1, "wrong clause", &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_set(s, cb, 1, 1, NULL, &err), CQ_OK);
    cq_feedback *f;
    size_t n;
    CONF_EXPECT(cq_store_feedback_rated(s, a, &f, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].kb, "laws");
    assert_string_equal(f[0].question, "第一条？");
    assert_string_equal(f[0].reply, "{\"answer\":\"x\"}");
    assert_int_equal(f[0].rating, -1);
    assert_int_equal(f[0].conversation_id, ca);
    assert_int_equal(f[0].turn, 1);
    cq_feedback_free_array(f, n);
    CONF_EXPECT(cq_store_feedback_rated(s, 0, &f, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    cq_feedback_free_array(f, n);
    /* a KB's deletion takes its ratings */
    CONF_EXPECT(cq_store_kb_delete(s, a, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM turn_feedback"), 1);
}

static void conf_quality_days(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t a, b, d1, d2;
    assert_int_equal(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "hr", &b, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, a, "d1", "d1.txt", "text", "aa", 1, &d1, &err), CQ_OK);
    assert_int_equal(cq_store_doc_create(s, a, "d2", "d2.txt", "text", "bb", 1, &d2, &err), CQ_OK);
    const int64_t day1 = 1796515200; /* 2026-12-06 00:00 UTC */
    const int64_t day0 = day1 - 86400 + 5;
    char day[11];
    cq_quality_day_of(day1 + 86399, day);
    assert_string_equal(day, "2026-12-06");
    cq_quality_day_of(day0, day);
    assert_string_equal(day, "2026-12-05");

    int64_t cites1[] = {d1, d1}, cites2[] = {d2}, cites12[] = {d1, d2};
    cq_quality_answer good = {.confidence = 0.9, .cited_docs = cites1, .n_cited = 2};
    cq_quality_answer low = {.confidence = 0.2, .cited_docs = cites2, .n_cited = 1};
    cq_quality_answer fallback = {.fallback = true, .confidence = 0.7, .cited_docs = cites12, .n_cited = 2};
    cq_quality_answer abstain = {.abstained = true, .fallback = true, .confidence = 0.0};
    CONF_EXPECT(cq_store_quality_note(s, a, day0, &good, &err), CQ_OK);
    CONF_EXPECT(cq_store_quality_note(s, a, day1 + 10, &good, &err), CQ_OK);
    CONF_EXPECT(cq_store_quality_note(s, a, day1 + 20, &low, &err), CQ_OK);
    CONF_EXPECT(cq_store_quality_note(s, a, day1 + 30, &fallback, &err), CQ_OK);
    CONF_EXPECT(cq_store_quality_note(s, a, day1 + 40, &abstain, &err), CQ_OK);
    CONF_EXPECT(cq_store_quality_note(s, b, day1 + 50, &good, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM answer_log_docs"), 6); /* repeats once */

    CONF_EXPECT(cq_store_doc_delete(s, d2, &err), CQ_OK); /* cited by the low and the fallback answer */
    cq_quality_day *q;
    size_t n;
    CONF_EXPECT(cq_store_quality_days(s, a, "2026-12-01", &q, &n, &err), CQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(q[0].kb, "laws");
    assert_string_equal(q[0].day, "2026-12-05");
    assert_int_equal(q[0].answers, 1);
    assert_int_equal(q[0].cited_deleted, 0);
    assert_string_equal(q[1].day, "2026-12-06");
    assert_int_equal(q[1].answers, 4);
    assert_int_equal(q[1].abstentions, 1);
    assert_int_equal(q[1].fallbacks, 1);       /* an abstention is not a fallback */
    assert_int_equal(q[1].low_confidence, 1);  /* nor low-confidence */
    assert_int_equal(q[1].cited_deleted, 2);
    free(q);

    CONF_EXPECT(cq_store_quality_days(s, 0, "2026-12-06", &q, &n, &err), CQ_OK);
    assert_int_equal(n, 2); /* hr before laws, the day before left out */
    assert_string_equal(q[0].kb, "hr");
    assert_int_equal(q[0].answers, 1);
    assert_string_equal(q[1].kb, "laws");
    assert_int_equal(q[1].answers, 4);
    free(q);

    /* thumbs from the feedback of the day */
    int64_t conv;
    assert_int_equal(cq_store_conversation_create(s, 1, a, "t", &conv, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, conv, "q", "{}", 0, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, conv, "q2", "{}", 0, &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_set(s, conv, 1, -1, NULL, &err), CQ_OK);
    CONF_EXPECT(cq_store_feedback_set(s, conv, 2, 1, NULL, &err), CQ_OK);
    conf_sql(s, "UPDATE turn_feedback SET day = '2026-12-06'");
    CONF_EXPECT(cq_store_quality_days(s, a, "2026-12-06", &q, &n, &err), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(q[0].thumbs_down, 1);
    assert_int_equal(q[0].thumbs_up, 1);
    assert_int_equal(q[0].answers, 4);
    free(q);

    CONF_EXPECT(cq_store_quality_prune(s, "2026-12-06", &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM answer_log"), 5);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM answer_log_docs"), 5);
    CONF_EXPECT(cq_store_kb_delete(s, b, &err), CQ_OK);
    assert_int_equal(conf_count(s, "SELECT count(*) FROM answer_log"), 4);
}

/* Conversation search (store/conversations.h, issue 30): title, questions and answers, per owner and KB. */
static void conf_conversations_search(void **state) {
    cq_store *s = conf_store(state);
    cq_err err = {0};
    int64_t a, b, c1, c2, c3;
    assert_int_equal(cq_store_kb_create(s, "laws", &a, &err), CQ_OK);
    assert_int_equal(cq_store_kb_create(s, "hr", &b, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 7, a, "Overtime pay", &c1, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 7, a, "试用期", &c2, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_create(s, 8, b, "Leave 100%_done", &c3, &err), CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, c2, "试用期最长多久？", "{\"answer\":\"不得超过六个月\"}", 0, &err),
                     CQ_OK);
    assert_int_equal(cq_store_conversation_add_turn(s, c1, "What about NIGHT shifts?", "{\"answer\":\"See Article 44\"}",
                                                     0, &err), CQ_OK);
    cq_conversation *l;
    size_t n;
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "overtime", 50, &l, &n, &err), CQ_OK); /* title, any case */
    assert_int_equal(n, 1);
    assert_int_equal(l[0].id, c1);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "night shift", 50, &l, &n, &err), CQ_OK); /* a question */
    assert_int_equal(n, 1);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "六个月", 50, &l, &n, &err), CQ_OK); /* an answer */
    assert_int_equal(n, 1);
    assert_int_equal(l[0].id, c2);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "answer", 50, &l, &n, &err), CQ_OK); /* not the JSON's keys */
    assert_int_equal(n, 0);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "%_", 50, &l, &n, &err), CQ_OK); /* plain characters */
    assert_int_equal(n, 1);
    assert_int_equal(l[0].id, c3);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, 8, 0, "o", 50, &l, &n, &err), CQ_OK); /* owner 8's only */
    assert_int_equal(n, 1);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, a, "o", 50, &l, &n, &err), CQ_OK); /* KB laws only */
    assert_int_equal(n, 1);
    assert_int_equal(l[0].id, c1);
    cq_conversation_free_array(l, n);
    CONF_EXPECT(cq_store_conversation_search(s, -1, 0, "", 50, &l, &n, &err), CQ_ERR_INVALID);
}

#endif
