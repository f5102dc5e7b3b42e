/* Follow-up questions in a conversation: "那第二款呢？" after a question about 劳动法第四十四条 means 劳动法第四十四条
 * 第二款; "第五十条呢？" means article 50 of the document discussed before; "这一条的罚则是什么？" means that article's.
 *
 * The previous turn leaves a context (the document and clause it cited). A question is rewritten with it only when
 * it depends on it (cq_followup_classify says why):
 *   - a 款/项 without its article ("那第二款呢？", "第三项呢") when the clause before is an article;
 *   - an elliptical clause reference ("第五十条呢？", "那第五十条的罚则呢", "And Section 7.2?", "What about §3?")
 *     that the previous document can have (it has that clause, or its labels are written the same way);
 *   - a reference to the previous clause or document ("这一条", "该条", "该法第五十条", "that clause", "it",
 *     "Section 3 of this agreement");
 *   - a full question whose only subject is a bare clause reference ("第五十条规定了什么？") when the previous
 *     document has that clause and the question is written in that document's language.
 * It is never rewritten when it names another document (《…》 other than the one before, a document of the KB the
 * title matcher finds, "the contract", "Section 5.2 of the NDA", "合同第五条", "民法典第五条") or is self-contained
 * (a full question in another language or clause style than the document before: "What does Section 5.2 say?"
 * after 劳动法 stands, and is answered from the whole KB).
 *
 * The rewrite puts what the question leaves out in front of its reference, or in place of its pronoun:
 *   "那第二款呢？" + (劳动法(2018-12-29), 第四十四条)     →  "那《劳动法(2018-12-29)》第四十四条第二款呢？"
 *   "第五十条呢？" + (劳动法(2018-12-29), …)             →  "《劳动法(2018-12-29)》第五十条呢？"
 *   "这一条的罚则是什么？" + (劳动法(2018-12-29), 第四十四条) →  "《劳动法(2018-12-29)》第四十四条的罚则是什么？"
 *   "Does it apply to contractors?" + (sample-services-agreement, Section 5.2)
 *                                                     →  "Does sample-services-agreement Section 5.2 apply to …"
 * so that the clause router (search/router.h) finds the clause exactly. */
#ifndef CQ_APP_FOLLOWUP_H
#define CQ_APP_FOLLOWUP_H

#include <stdbool.h>
#include <stdint.h>

#include "search/query.h"

typedef struct {
    const char *doc;    /* name of the document cited before ("劳动法(2018-12-29)") */
    const char *clause; /* its clause label ("第四十四条") or NULL */
    int64_t doc_id;     /* its id, 0 when unknown: a question whose titles (search/query.h) include it names it */
    /* Whether that document has the clause ref names: 1 yes, 0 no, -1 unknown; NULL: unknown (the clause styles of
     * the question and of ctx->clause are compared instead). */
    int (*has_clause)(void *arg, const cq_clause_ref *ref);
    void *arg;
} cq_followup_context;

typedef enum {
    CQ_FOLLOWUP_STANDS = 0,     /* self-contained, or nothing to complete it with: left as it is */
    CQ_FOLLOWUP_OTHER_DOCUMENT, /* it names a document other than the one before: left as it is */
    CQ_FOLLOWUP_PARAGRAPH,      /* a 款/项 without its article */
    CQ_FOLLOWUP_ELLIPTICAL,     /* an elliptical clause reference: "第五十条呢？", "And Section 7.2?" */
    CQ_FOLLOWUP_PRONOUN,        /* a pronoun for the clause or document before: "这一条", "该法", "that clause", "it" */
    CQ_FOLLOWUP_BARE_CLAUSE,    /* a full question about a bare clause reference the document before has */
} cq_followup_reason;

/* Why q depends on ctx (a rewrite follows), or why it stands (CQ_FOLLOWUP_STANDS, CQ_FOLLOWUP_OTHER_DOCUMENT). */
cq_followup_reason cq_followup_classify(const cq_query *q, const cq_followup_context *ctx);
const char *cq_followup_reason_name(cq_followup_reason r);

/* Whether q may depend on a turn before, whatever that turn was about: a clause reference, or a pronoun or a
 * document noun that could point back. False lets a question about a topic skip rebuilding the context. */
bool cq_followup_may_depend(const cq_query *q);

/* The question q completed from ctx (malloc'd), or NULL when it stays as it is (see above). */
char *cq_followup_resolve(const cq_query *q, const cq_followup_context *ctx);

#endif
