#include "app/followup.h"

#include <stdlib.h>
#include <string.h>

#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "index/router.h"

#define CP_KUAN 0x6B3E /* 款 */
#define CP_XIANG 0x9879 /* 项 */
#define CP_TIAO 0x6761 /* 条 */

/* "第<number>款" or "第<number>项" at s: its length in bytes, 0 when s does not start with one. */
static size_t paragraph_ref_at(const char *s) {
    if (strncmp(s, "第", 3)) return 0;
    size_t used;
    if (cq_number_parse(s + 3, strlen(s + 3), &used) <= 0) return 0;
    const char *u = s + 3 + used;
    size_t len;
    uint32_t cp = cq_utf8_decode(u, strlen(u), &len);
    if (cp != CP_KUAN && cp != CP_XIANG) return 0;
    size_t n = (size_t)(u + len - s);
    /* 第二款第三项: both belong to the reference */
    size_t more = paragraph_ref_at(s + n);
    return n + more;
}

cq_followup_kind cq_followup_classify(const char *question, size_t *start, size_t *end) {
    *start = *end = 0;
    cq_clause_ref ref;
    if (cq_router_parse(question, &ref)) {
        *start = ref.start;
        *end = ref.end;
        return CQ_FOLLOWUP_ARTICLE;
    }
    for (const char *p = question; *p;) {
        size_t n = paragraph_ref_at(p);
        if (n) {
            *start = (size_t)(p - question);
            *end = *start + n;
            return CQ_FOLLOWUP_PARAGRAPH;
        }
        size_t len;
        cq_utf8_decode(p, strlen(p), &len);
        p += len ? len : 1;
    }
    return CQ_FOLLOWUP_NONE;
}

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

char *cq_followup_resolve(const char *question, const cq_followup_context *ctx, bool names_document) {
    if (!question || !ctx || !ctx->doc || !ctx->doc[0]) return NULL;
    size_t start, end;
    cq_followup_kind kind = cq_followup_classify(question, &start, &end);
    if (kind == CQ_FOLLOWUP_NONE) return NULL;
    if (kind == CQ_FOLLOWUP_ARTICLE && names_document) return NULL;
    if (kind == CQ_FOLLOWUP_PARAGRAPH && !is_article_label(ctx->clause)) return NULL;
    cq_strbuf b = {0};
    cq_strbuf_append(&b, question, start);
    bool cjk = cq_utf8_has_cjk(ctx->doc);
    if (cjk) cq_strbuf_printf(&b, "《%s》", ctx->doc);
    else cq_strbuf_printf(&b, "%s%s ", start && question[start - 1] != ' ' ? " " : "", ctx->doc);
    if (kind == CQ_FOLLOWUP_PARAGRAPH) cq_strbuf_puts(&b, ctx->clause);
    cq_strbuf_puts(&b, question + start);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}
