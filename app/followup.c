#include "app/followup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/utf8.h"

#define CP_TIAO 0x6761 /* 条 */

/* Is label an article label (第…条, possibly 之一)? Paragraphs can only be completed against one. */
static bool is_article_label(const char *label) {
    if (!label || strncmp(label, "第", 3)) return false;
    size_t n = strlen(label), i = 0;
    while (i < n) {
        size_t len;
        if (cq_utf8_decode(label + i, n - i, &len) == CP_TIAO) return true;
        i += len ? len : 1;
    }
    return false;
}

char *cq_followup_resolve(const cq_query *q, const cq_followup_context *ctx) {
    if (!q || !ctx || !ctx->doc || !ctx->doc[0]) return NULL;
    if (q->type == CQ_QUERY_TOPIC) return NULL;
    if (q->type == CQ_QUERY_CLAUSE && q->n_titles) return NULL;
    if (q->type == CQ_QUERY_PARAGRAPH && !is_article_label(ctx->clause)) return NULL;
    const char *question = q->text;
    size_t start = q->ref.start;
    cq_strbuf b = {0};
    cq_strbuf_append(&b, question, start);
    bool cjk = cq_utf8_has_cjk(ctx->doc);
    if (cjk) cq_strbuf_printf(&b, "《%s》", ctx->doc);
    else cq_strbuf_printf(&b, "%s%s ", start && question[start - 1] != ' ' ? " " : "", ctx->doc);
    if (q->type == CQ_QUERY_PARAGRAPH) cq_strbuf_puts(&b, ctx->clause);
    cq_strbuf_puts(&b, question + start);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}
