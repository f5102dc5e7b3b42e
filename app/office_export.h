/* What an office takes away (issue 30 items 5 and 6): a conversation as Markdown or PDF (questions, answers, and each
 * citation as document, clause, page and the quoted text), and the rated answers of a KB as an eval suite's JSONL
 * (../shared/eval/FORMAT.md, with the rating beside it), so that feedback becomes test data. Shared by the HTTP
 * service (app/service_feedback.c) and the CLI (`clauseqa feedback export`). */
#ifndef CQ_APP_OFFICE_EXPORT_H
#define CQ_APP_OFFICE_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "store/store.h"

/* Conversation id (its turns read from st) as Markdown (pdf false) or PDF; *out malloc'd, *len its bytes.
 * NOT_FOUND when there is no such conversation. Who may read it is the caller's business. */
cq_status cq_conversation_export(cq_store *st, int64_t id, bool pdf, char **out, size_t *len, cq_err *err);

/* The rated answers of KB kb_id (0: every KB), one JSON object a line, appended to out: the eval format's "id"
 * ("feedback-KB-N"), "question", "type" ("semantic"), "answerable", "gold" (a thumbs-up answer's cited clauses),
 * "answers" (a thumbs-up answer's text), and "answer", "verdict" ("up" / "down"), "comment", "cited" (every cited
 * clause), "kb", "conversation_id", "turn", "rated_at". A thumbs-up abstention is an unanswerable question. */
cq_status cq_feedback_jsonl(cq_store *st, int64_t kb_id, cq_strbuf *out, size_t *n, cq_err *err);

#endif
