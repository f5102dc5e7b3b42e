/* Feedback on answers and the quality log (store/feedback.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/feedback.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/utf8.h"
#include "db/db.h"

static void feedback_drop(void *elem) {
    cq_feedback *f = elem;
    free(f->comment);
    free(f->question);
    free(f->reply);
}

void cq_feedback_free_array(cq_feedback *f, size_t n) {
    for (size_t i = 0; i < n; i++) feedback_drop(&f[i]);
    free(f);
}

int cq_feedback_rating_parse(const char *s) {
    if (!s) return 0;
    if (!strcmp(s, "up")) return 1;
    if (!strcmp(s, "down")) return -1;
    return 0;
}

void cq_quality_day_of(int64_t t, char out[11]) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    snprintf(out, 11, "%04d-%02d-%02d", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100, tm.tm_mday % 100);
}

/* The id of turn `turn` (1-based) of conversation id, and the conversation's KB. NOT_FOUND for either missing. */
static cq_status find_turn(cq_db *db, int64_t id, int turn, int64_t *turn_id, int64_t *kb_id, cq_err *err) {
    cq_status rc = cq_db_int(db, "feedback", kb_id, err, "SELECT kb_id FROM conversations WHERE id = ?1", "i", id);
    if (rc == CQ_ERR_NOT_FOUND) return cq_err_set(err, rc, "no conversation %lld", (long long)id);
    if (!rc && turn < 1) rc = CQ_ERR_NOT_FOUND;
    if (!rc)
        rc = cq_db_int(db, "feedback", turn_id, err,
                       "SELECT id FROM conversation_turns WHERE conversation_id = ?1 ORDER BY id LIMIT 1 OFFSET ?2",
                       "ii", id, (int64_t)turn - 1);
    if (rc == CQ_ERR_NOT_FOUND)
        return cq_err_set(err, rc, "conversation %lld has no turn %d", (long long)id, turn);
    return rc;
}

cq_status cq_store_feedback_set(cq_store *s, int64_t id, int turn, int rating, const char *comment, cq_err *err) {
    if (rating != 1 && rating != -1) return cq_err_set(err, CQ_ERR_INVALID, "a rating is \"up\" or \"down\"");
    if (!comment) comment = "";
    size_t len = strlen(comment);
    if (!cq_utf8_valid(comment, len)) return cq_err_set(err, CQ_ERR_INVALID, "the comment is not UTF-8 text");
    if (cq_utf8_count(comment, len) > CQ_FEEDBACK_COMMENT_MAX_CHARS)
        return cq_err_set(err, CQ_ERR_INVALID, "a comment has at most %d characters", CQ_FEEDBACK_COMMENT_MAX_CHARS);
    cq_db *db = cq_store_conn(s);
    bool own;
    int64_t turn_id = 0, kb_id = 0, now = (int64_t)time(NULL);
    char day[11];
    cq_quality_day_of(now, day);
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc) rc = find_turn(db, id, turn, &turn_id, &kb_id, err);
    if (!rc)
        rc = cq_db_run(db, "rate answer", NULL, err,
                       "INSERT INTO turn_feedback(turn_id, conversation_id, kb_id, rating, comment, day, created_at, "
                       "updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT (turn_id) DO UPDATE SET "
                       "rating = excluded.rating, comment = excluded.comment, day = excluded.day, "
                       "updated_at = excluded.updated_at",
                       "iiiitti", turn_id, id, kb_id, (int64_t)rating, comment, day, now);
    return cq_db_end(db, own, rc, err);
}

cq_status cq_store_feedback_clear(cq_store *s, int64_t id, int turn, cq_err *err) {
    cq_db *db = cq_store_conn(s);
    int64_t turn_id = 0, kb_id = 0, changed = 0;
    cq_status rc = find_turn(db, id, turn, &turn_id, &kb_id, err);
    if (!rc) rc = cq_db_run(db, "clear rating", &changed, err, "DELETE FROM turn_feedback WHERE turn_id = ?1", "i",
                            turn_id);
    if (!rc && !changed)
        rc = cq_err_set(err, CQ_ERR_NOT_FOUND, "turn %d of conversation %lld is not rated", turn, (long long)id);
    return rc;
}

/* The turn's position in its conversation, as a column. */
#define TURN_NO                                                                                                    \
    "(SELECT count(*) FROM conversation_turns p WHERE p.conversation_id = f.conversation_id AND p.id <= f.turn_id)"

/* A rating's row: false when out of memory. */
static bool feedback_read(cq_db_stmt *st, void *elem) {
    cq_feedback *f = elem;
    f->conversation_id = cq_db_col_int(st, 0);
    f->turn = (int)cq_db_col_int(st, 1);
    f->rating = (int)cq_db_col_int(st, 2);
    f->comment = cq_db_col_strdup(st, 3);
    f->created_at = cq_db_col_int(st, 4);
    f->updated_at = cq_db_col_int(st, 5);
    if (f->comment) return true;
    feedback_drop(f);
    return false;
}

/* The same with the turn's question and reply and the KB's name. */
static bool rated_read(cq_db_stmt *st, void *elem) {
    cq_feedback *f = elem;
    if (!feedback_read(st, f)) return false;
    f->question = cq_db_col_strdup(st, 6);
    f->reply = cq_db_col_strdup(st, 7);
    cq_db_col_copy(st, 8, f->kb, sizeof f->kb);
    if (f->question && f->reply) return true;
    feedback_drop(f);
    return false;
}

cq_status cq_store_feedback_of(cq_store *s, int64_t id, cq_feedback **out, size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "feedback", sizeof **out, feedback_read, feedback_drop, (void **)out, n, err,
                      "SELECT f.conversation_id, " TURN_NO ", f.rating, f.comment, f.created_at, f.updated_at "
                      "FROM turn_feedback f WHERE f.conversation_id = ?1 ORDER BY f.turn_id",
                      "i", id);
}

cq_status cq_store_feedback_rated(cq_store *s, int64_t kb_id, cq_feedback **out, size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "rated answers", sizeof **out, rated_read, feedback_drop, (void **)out, n, err,
                      "SELECT f.conversation_id, " TURN_NO ", f.rating, f.comment, f.created_at, f.updated_at, "
                      "t.question, t.reply, k.name FROM turn_feedback f JOIN conversation_turns t ON t.id = f.turn_id "
                      "JOIN kbs k ON k.id = f.kb_id WHERE (?1 = 0 OR f.kb_id = ?1) ORDER BY f.updated_at, f.turn_id",
                      "i", kb_id);
}

/* ---- the quality log ---- */

cq_status cq_store_quality_note(cq_store *s, int64_t kb_id, int64_t at, const cq_quality_answer *a, cq_err *err) {
    char day[11];
    cq_quality_day_of(at, day);
    bool low = !a->abstained && a->confidence < CQ_QUALITY_LOW_CONFIDENCE;
    cq_db *db = cq_store_conn(s);
    bool own;
    int64_t id = 0;
    cq_status rc = cq_db_begin_own(db, &own, err);
    if (!rc)
        rc = cq_db_int(db, "log answer", &id, err,
                       "INSERT INTO answer_log(kb_id, day, created_at, abstained, fallback, low_confidence, "
                       "confidence) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                       "itiiiid", kb_id, day, at, (int64_t)a->abstained, (int64_t)(!a->abstained && a->fallback),
                       (int64_t)low, a->abstained ? 0.0 : a->confidence);
    for (size_t i = 0; !rc && i < a->n_cited; i++) /* a document cited twice is one row */
        rc = cq_db_run(db, "log answer", NULL, err,
                       "INSERT INTO answer_log_docs(answer_id, doc_id) VALUES(?1, ?2) ON CONFLICT DO NOTHING", "ii", id,
                       a->cited_docs[i]);
    return cq_db_end(db, own, rc, err);
}

/* A row of cq_store_quality_days' statement: KB, day, then the counts in this order. */
static bool day_read(cq_db_stmt *st, void *elem) {
    cq_quality_day *d = elem;
    int64_t *const counts[] = {&d->answers,       &d->abstentions, &d->fallbacks,  &d->low_confidence,
                               &d->cited_deleted, &d->thumbs_up,   &d->thumbs_down};
    cq_db_col_copy(st, 0, d->kb, sizeof d->kb);
    cq_db_col_copy(st, 1, d->day, sizeof d->day);
    for (int i = 0; i < (int)(sizeof counts / sizeof counts[0]); i++) *counts[i] = cq_db_col_int(st, 2 + i);
    return true;
}

static int cmp_day(const void *a, const void *b) {
    const cq_quality_day *x = a, *y = b;
    int c = strcmp(x->kb, y->kb);
    return c ? c : strcmp(x->day, y->day);
}

cq_status cq_store_quality_days(cq_store *s, int64_t kb_id, const char *since, cq_quality_day **out, size_t *n,
                                cq_err *err) {
    /* Per KB and day, in one statement: the answers (and those whose cited documents are not all there any more)
     * and the ratings given (last changed). Ordered here: KB names as bytes on both stores. */
    cq_status rc = cq_db_list(
        cq_store_conn(s), "quality", sizeof **out, day_read, NULL, (void **)out, n, err,
        "SELECT name, day, sum(answers), sum(abstained), sum(fallback), sum(low_confidence), sum(cited_deleted), "
        "sum(up), sum(down) FROM (SELECT k.name AS name, a.day AS day, 1 AS answers, a.abstained AS abstained, "
        "a.fallback AS fallback, a.low_confidence AS low_confidence, CASE WHEN EXISTS (SELECT 1 FROM "
        "answer_log_docs d WHERE d.answer_id = a.id AND NOT EXISTS (SELECT 1 FROM documents x WHERE x.id = d.doc_id)) "
        "THEN 1 ELSE 0 END AS cited_deleted, 0 AS up, 0 AS down FROM answer_log a JOIN kbs k ON k.id = a.kb_id "
        "WHERE a.day >= ?1 AND (?2 = 0 OR a.kb_id = ?2) "
        "UNION ALL SELECT k.name, f.day, 0, 0, 0, 0, 0, CASE WHEN f.rating > 0 THEN 1 ELSE 0 END, "
        "CASE WHEN f.rating < 0 THEN 1 ELSE 0 END FROM turn_feedback f JOIN kbs k ON k.id = f.kb_id "
        "WHERE f.day >= ?1 AND (?2 = 0 OR f.kb_id = ?2)) q GROUP BY name, day",
        "ti", since, kb_id);
    if (!rc && *n) qsort(*out, *n, sizeof **out, cmp_day);
    return rc;
}

cq_status cq_store_quality_prune(cq_store *s, const char *before, cq_err *err) {
    /* the cited documents go with their rows (ON DELETE CASCADE) */
    return cq_db_run(cq_store_conn(s), "prune quality log", NULL, err, "DELETE FROM answer_log WHERE day < ?1", "t",
                     before);
}
