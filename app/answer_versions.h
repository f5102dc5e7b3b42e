/* Versions in answers (app/answer.h): the notes that say which version an answer rests on, and answers to
 * questions that compare versions. Internal to the answer pipeline. */
#ifndef CQ_APP_ANSWER_VERSIONS_H
#define CQ_APP_ANSWER_VERSIONS_H

#include <stdbool.h>

#include "app/answer.h"

/* Sets a->version_notice from the first citation's version: for a question about a day (q->as_of) which version it
 * rests on (and the answer text starts with that sentence); otherwise a note when the cited version is not in force
 * today, or when the cited clause changed in the last CQ_ANSWER_RECENT_MONTHS months. Nothing when the cited
 * document has no version information. Failures only leave the note out. */
void cq_answer_version_notes(cq_store *s, const cq_query *q, cq_answer *a);

/* Answers a question comparing versions (q->compare) when it names a regulation with several versions in the KB (or
 * the KB has exactly one such regulation): the clause it names (or the whole regulation) in the two versions —
 * the two years it names, else the version meant for its day and the one before — with the diff, citing both
 * clauses. *handled = false (and nothing done) when there is nothing to compare. */
cq_status cq_answer_compare_versions(cq_store *s, const cq_query *q, cq_answer *out, bool *handled, cq_err *err);

void cq_answer_compare_free(cq_answer_compare *c);

#endif
