/* The query value (search/query.h): a question's reference, type, language, terms and named documents. */
#include "search/query.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/utf8.h"
#include "store/fts_cjk.h"

/* ---- terms -------------------------------------------------------------------------------------------------- */

/* Bigrams that only say "this is a question" and words that carry no topic. They are removed from the query;
 * everything else is weighed by BM25's IDF. */
static const char *const stop_terms[] = {
    "什么", "是什", "么是", "么的", "哪些", "些是", "有哪", "怎么", "么办", "怎样", "如何", "多少", "是否", "为什",
    "么样", "请问", "哪个", "哪里", "哪项", "的是", "是多", "吗?", "的内", "内容", "容是", "条的", "条规", "定了",
    "了什", "是怎", "么规", "规定", "定的", "的规", "应当", "可以", "什么?",
    "the", "a", "an", "of", "to", "in", "and", "or", "is", "are", "was", "be", "by", "for", "on", "with", "as",
    "at", "that", "this", "what", "which", "who", "whom", "does", "do", "did", "how", "any", "if", "it", "its",
    "there", "from", "under", "shall", "may", "not", "no", "than", "then", "these", "those", "such", "into",
};

static int is_stop(const char *t) {
    for (size_t i = 0; i < sizeof stop_terms / sizeof stop_terms[0]; i++)
        if (!strcmp(t, stop_terms[i])) return 1;
    return 0;
}

typedef struct {
    char **terms;
    size_t n, cap;
    int failed;
} term_list;

static int collect_term(void *ctx, const char *tok, size_t len, size_t start, size_t end, unsigned flags) {
    (void)start;
    (void)end;
    term_list *l = ctx;
    if (flags & CQ_FTS_TOK_TAIL) return 0; /* the tail unigram of a run adds nothing to its bigrams */
    if (l->n >= CQ_QUERY_MAX_TERMS || len == 0 || len > 64) return 0;
    char buf[72];
    memcpy(buf, tok, len);
    buf[len] = 0;
    if (is_stop(buf)) return 0;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->terms[i], buf)) return 0;
    if (!cq_grow((void **)&l->terms, &l->cap, l->n + 1, sizeof *l->terms)) {
        l->failed = 1;
        return 0;
    }
    char *d = strdup(buf);
    if (d) l->terms[l->n++] = d;
    else l->failed = 1;
    return 0;
}

/* The query terms of text as the BM25 retriever uses them (question words and stop words removed, deduplicated). */
static int terms_of(const char *text, char ***terms, size_t *n) {
    term_list l = {0};
    cq_fts_cjk_tokenize(text, strlen(text), CQ_FTS_CJK_QUERY, collect_term, &l);
    *terms = l.terms;
    *n = l.n;
    return l.failed ? -1 : 0;
}

static void terms_free(char **terms, size_t n) {
    for (size_t i = 0; i < n; i++) free(terms[i]);
    free(terms);
}

/* ---- references --------------------------------------------------------------------------------------------- */

#define CP_KUAN 0x6B3E  /* 款 */
#define CP_XIANG 0x9879 /* 项 */

/* "第<number>款" or "第<number>项" at s (and a 项 right after a 款): its length in bytes, 0 when s does not start
 * with one. */
static size_t paragraph_ref_at(const char *s) {
    if (strncmp(s, "第", 3)) return 0;
    size_t used;
    if (cq_number_parse(s + 3, strlen(s + 3), &used) <= 0) return 0;
    const char *u = s + 3 + used;
    size_t len;
    uint32_t cp = cq_utf8_decode(u, strlen(u), &len);
    if (cp != CP_KUAN && cp != CP_XIANG) return 0;
    size_t n = (size_t)(u + len - s);
    return n + paragraph_ref_at(s + n); /* 第二款第三项: both belong to the reference */
}

/* The type of question and its reference (router syntax first; else a 款/项 alone). */
static cq_query_type classify(const char *question, cq_clause_ref *ref) {
    if (cq_router_parse(question, ref)) return CQ_QUERY_CLAUSE;
    for (const char *p = question; *p;) {
        size_t n = paragraph_ref_at(p);
        if (n) {
            ref->start = (size_t)(p - question);
            ref->end = ref->start + n;
            return CQ_QUERY_PARAGRAPH;
        }
        size_t len;
        cq_utf8_decode(p, strlen(p), &len);
        p += len ? len : 1;
    }
    return CQ_QUERY_TOPIC;
}

/* ---- the query ---------------------------------------------------------------------------------------------- */

void cq_query_free(cq_query *q) {
    if (!q) return;
    free(q->text);
    terms_free(q->terms, q->n_terms);
    terms_free(q->all_terms, q->n_all_terms);
    memset(q, 0, sizeof *q);
}

cq_status cq_query_parse(cq_store *s, int64_t kb_id, const char *question, cq_query *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    if (!question) return cq_err_set(err, CQ_ERR_INVALID, "no question given");
    out->text = strdup(question);
    if (!out->text) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    out->lang = cq_utf8_has_cjk(question) ? CQ_QUERY_ZH : CQ_QUERY_EN;
    out->type = classify(question, &out->ref);
    cq_question_date when;
    if (cq_question_date_find(question, &when)) {
        out->as_of = when.on;
        out->as_of_first = when.first;
        out->version_year = when.version_year;
        out->as_of_start = when.start;
        out->as_of_end = when.end;
    }
    out->compare = cq_question_is_comparison(question);
    /* The reference itself ("第四十四条") says where, not what: its digits would only match other articles. The
     * date a question asks about ("2020年时") says when, not what, either. */
    char *topic = strdup(question);
    int failed = !topic;
    if (topic) {
        if (out->type == CQ_QUERY_CLAUSE && out->ref.end > out->ref.start)
            memset(topic + out->ref.start, ' ', out->ref.end - out->ref.start);
        if (out->as_of_end > out->as_of_start)
            memset(topic + out->as_of_start, ' ', out->as_of_end - out->as_of_start);
        failed |= terms_of(topic, &out->terms, &out->n_terms);
        free(topic);
    }
    failed |= terms_of(question, &out->all_terms, &out->n_all_terms);
    cq_status rc = failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : CQ_OK;
    if (!rc && s) {
        out->kb_id = kb_id;
        rc = cq_router_titles(s, kb_id, question, out->titles, CQ_QUERY_MAX_TITLES, &out->n_titles, err);
    }
    if (rc) cq_query_free(out);
    return rc;
}

void cq_query_set_as_of(cq_query *q, cq_date day) {
    q->as_of = q->as_of_first = day;
    q->version_year = 0;
}
