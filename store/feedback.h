/* Feedback on answers and the quality log (issue 30 items 5 and 6).
 *
 * Feedback: a person's thumbs up or down on one answer of a conversation (a turn, numbered from 1 in the order
 * asked), with an optional comment of at most CQ_FEEDBACK_COMMENT_MAX_CHARS characters. One rating a turn: rating
 * again replaces it. It goes with its turn (a regenerated answer starts unrated), its conversation and its KB.
 *
 * The quality log: one row an answer (app/service_feedback.c writes it after every ask), with whether it abstained,
 * fell back from a generated answer to quoted sentences, or was below the confidence floor of the quality report
 * (CQ_QUALITY_LOW_CONFIDENCE), and the documents it cited. Counted per KB and UTC day (cq_store_quality_days) with
 * the thumbs up and down given that day and the answers whose cited document has been deleted since. Rows older
 * than a retention are pruned (cq_store_quality_prune).
 *
 * Written once for SQLite and PostgreSQL on db/db.h. Schema (store/schema.c: SQLite migration 10, PostgreSQL 7):
 *   turn_feedback(turn_id, conversation_id, kb_id, rating, comment, day, created_at, updated_at)
 *   answer_log(id, kb_id, day, created_at, abstained, fallback, low_confidence, confidence)
 *   answer_log_docs(answer_id, doc_id) */
#ifndef CQ_STORE_FEEDBACK_H
#define CQ_STORE_FEEDBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_FEEDBACK_COMMENT_MAX_CHARS 2000

/* An answer whose confidence is below this counts as low-confidence in the quality report. The confidence is the
 * generated answer's mean token probability (app/answer.h's confidence), or, for an extractive answer, the share of
 * the question's terms its cited text holds (coverage). 0.5: halfway between the generated answer's fallback floor
 * (CQ_ANSWER_MIN_CONFIDENCE, 0.3) and the keyless floor (0.8). */
#define CQ_QUALITY_LOW_CONFIDENCE 0.5

typedef struct {
    int64_t conversation_id;
    int turn;        /* 1-based, in the order asked */
    int rating;      /* +1 up, -1 down */
    char *comment;   /* "" when none */
    int64_t created_at, updated_at;
    /* cq_store_feedback_rated only: */
    char *question;
    char *reply;     /* the turn's stored JSON */
    char kb[128];
} cq_feedback;

void cq_feedback_free_array(cq_feedback *f, size_t n);

/* "up" / "down" → +1 / -1; 0 for anything else. */
int cq_feedback_rating_parse(const char *s);

/* Rates turn `turn` of conversation id: rating +1 or -1, comment NULL or "" for none. Replaces an earlier rating of
 * the turn. INVALID for another rating or a comment over CQ_FEEDBACK_COMMENT_MAX_CHARS characters (or not UTF-8),
 * NOT_FOUND for a conversation or turn that does not exist; nothing changes then. */
cq_status cq_store_feedback_set(cq_store *s, int64_t id, int turn, int rating, const char *comment, cq_err *err);
/* Takes the rating of a turn back. NOT_FOUND when it had none. */
cq_status cq_store_feedback_clear(cq_store *s, int64_t id, int turn, cq_err *err);
/* The ratings of conversation id's turns, by turn. */
cq_status cq_store_feedback_of(cq_store *s, int64_t id, cq_feedback **out, size_t *n, cq_err *err);
/* Every rated turn of KB kb_id (0: every KB), oldest rating first, with its question, reply and KB name. */
cq_status cq_store_feedback_rated(cq_store *s, int64_t kb_id, cq_feedback **out, size_t *n, cq_err *err);

/* ---- the quality log ---- */

typedef struct {
    bool abstained, fallback;
    double confidence;        /* see CQ_QUALITY_LOW_CONFIDENCE; ignored for an abstention */
    const int64_t *cited_docs; /* the documents the answer cited (repeats allowed) */
    size_t n_cited;
} cq_quality_answer;

/* Logs one answer of KB kb_id at unix time `at`. */
cq_status cq_store_quality_note(cq_store *s, int64_t kb_id, int64_t at, const cq_quality_answer *a, cq_err *err);

typedef struct {
    char kb[128];
    char day[11]; /* YYYY-MM-DD, UTC */
    int64_t answers, abstentions, fallbacks, low_confidence, thumbs_up, thumbs_down, cited_deleted;
} cq_quality_day;

/* Per KB and day, from day `since` (YYYY-MM-DD) on, of KB kb_id (0: every KB): ordered by KB name, then day. A day
 * with neither answers nor ratings is left out. */
cq_status cq_store_quality_days(cq_store *s, int64_t kb_id, const char *since, cq_quality_day **out, size_t *n,
                                cq_err *err);
/* Drops log rows of days before `before` (YYYY-MM-DD). */
cq_status cq_store_quality_prune(cq_store *s, const char *before, cq_err *err);

/* The UTC day of unix time t as YYYY-MM-DD. */
void cq_quality_day_of(int64_t t, char out[11]);

#endif
