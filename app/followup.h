/* Follow-up questions in a conversation: "那第二款呢？" after a question about 劳动法第四十四条 means 劳动法第四十四条
 * 第二款; "第五十条呢？" means article 50 of the document discussed before.
 *
 * The previous turn leaves a context (the document and clause it cited); a question (index/query.h) that names a
 * 款/项 but no article (CQ_QUERY_PARAGRAPH), or an article but no document (CQ_QUERY_CLAUSE without titles), is
 * rewritten by putting what it leaves out in front of its reference:
 *   "那第二款呢？" + (劳动法(2018-12-29), 第四十四条)  →  "那《劳动法(2018-12-29)》第四十四条第二款呢？"
 *   "第五十条呢？" + (劳动法(2018-12-29), …)          →  "《劳动法(2018-12-29)》第五十条呢？"
 * so that the clause router (index/router.h) finds the clause exactly. Questions without such a reference are left
 * as they are. */
#ifndef CQ_APP_FOLLOWUP_H
#define CQ_APP_FOLLOWUP_H

#include "index/query.h"

typedef struct {
    const char *doc;    /* name of the document cited before ("劳动法(2018-12-29)") */
    const char *clause; /* its clause label ("第四十四条") or NULL */
} cq_followup_context;

/* The question q completed from ctx (malloc'd), or NULL when it stays as it is: no reference to complete, no usable
 * context, or (for an article reference) q names a document of its KB already. */
char *cq_followup_resolve(const cq_query *q, const cq_followup_context *ctx);

#endif
