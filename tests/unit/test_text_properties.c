/* The question and answer text path on generated input (a property test, run under the sanitizers by `make test`):
 * questions and clause texts put together at random from the pieces real ones are made of — Chinese qualifiers and
 * items, 《titles》, clause numbers, dates, English words and qualifiers, punctuation of both scripts, line breaks,
 * 4-byte characters — and, in one case of eight, broken UTF-8 (lone continuation bytes, cut sequences, 0xFF, overlong
 * forms). Every function a user's question reaches before the decoder runs must hold its contract on all of them:
 *
 *   cq_query_parse (no store)      OK or an error with a message; terms valid UTF-8 and non-empty, the date's span
 *                                  inside the question
 *   cq_span_keep_qualifiers        only ever extends, stays inside the text, at character boundaries
 *   cq_span_extend_answer          a span of the text that holds the answer
 *   cq_span_items                  items in order, inside the text, not overlapping
 *   cq_span_sentence               inside the text, at character boundaries; without a limit it holds the span
 *   cq_answer_span_context         holds the span; valid UTF-8 when the text is
 *   cq_lexicon_reword              never fails for want of anything but memory; valid UTF-8 when the question is
 *   cq_span_forbids, _protects, _denies  a sentence inside the text when they say yes
 *   cq_answer_coverage             in [0, 1]
 *   cq_prompt_answer, _relevance   valid UTF-8 when the inputs are; shown bytes within each passage
 *   cq_answer_from_hits (extractive, as without a decoder), cq_answer_fallback_quote
 *                                  every quote verbatim in its own clause's text; an answer valid UTF-8 when the
 *                                  inputs are
 *   and the whole ask on a KB (cq_query_parse with the store: titles, missing names and words, references several
 *   documents have; then cq_answer_question: BM25's query built from any text, the router, the answer): OK or an
 *   error with a message, quotes verbatim in the clauses retrieved, choices that name a document
 *
 * The generator is seeded (CLAUSEQA_TEST_SEED overrides; the seed is printed), so a failure replays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/answer.h"
#include "app/answer_span.h"
#include "app/generate_answer.h"
#include "core/utf8.h"
#include "search/lexicon.h"
#include "search/query.h"
#include "search/retrieve.h"
#include "test_store_util.h"

#define CASES 6000
#define MAX_TEXT 4096

static uint64_t rng_state;

/* How often each path ran (the test asks that each did: a generator that never reaches one proves nothing). */
static size_t n_extended, n_items, n_said_no, n_fallback, n_cited, n_router;

static uint32_t rnd(uint32_t n) { /* splitmix64, uniform enough for picking pieces */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return n ? (uint32_t)((z ^ (z >> 31)) % n) : 0;
}

static const char *const pieces[] = {
    /* Chinese: qualifiers, items, clause references, titles, question words */
    "不", "不得", "不低于", "不超过", "未经", "没有", "未", "无", "非", "禁止", "严禁", "除", "外", "除外", "以上", "以下",
    "是否", "可以", "能否", "有权", "吗", "？", "。", "；", "，", "：", "、", "（一）", "（二）", "（三）", "一、", "二、",
    "第十二条", "第三章", "第四十四条第二款", "《劳动法》", "《", "》", "用人单位", "劳动者", "支付", "工资报酬",
    "百分之一百五十", "休息日", "安排", "加班费", "怎么算", "被告", "原告", "按照协议", "抚养费", "2020年3月1日",
    "2018年修正版", "现行", "旧版", "的", "了", "应当", "规定", "注册资本", "最低限额", "人民币二百万元",
    /* English: words, forms, qualifiers, numbering */
    "not", "no", "never", "unless", "except", "at least", "no more than", "or more", "or less", "the Customer",
    "may", "assign", "assignment", "invoices", "invoice", "due", "within", "sixty (60) days", "Section 7.2", "7.2",
    "(a)", "(b)", "1.", "2.", "Is there a non-compete clause?", "What", "When", "Agreement", "Party", "parties",
    "termination", "for convenience", "Non-Disclosure", "FNHA's", "shall", "compete", "competition", "-",
    /* separators and the odd ones */
    " ", "  ", "\t", "\n", ".", ",", ";", "?", "!", "'", "\"", "(", ")", "0", "42", "x0", "张x0", "某",
    "\xf0\x9f\x93\x84", /* U+1F4C4, four bytes */
    "e\xcc\x81",        /* e + combining acute */
    "\xe3\x80\x80",     /* ideographic space */
};

static const char *const broken_bytes[] = {
    "\x80", "\xbf", "\xe4\xb8", "\xe4", "\xff", "\xfe", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc3",
};

/* A random text of up to max bytes (NUL-terminated); broken: may hold invalid UTF-8. */
static size_t make_text(char *out, size_t max, size_t n_pieces, bool broken) {
    size_t n = 0;
    for (size_t i = 0; i < n_pieces; i++) {
        const char *p = broken && rnd(6) == 0 ? broken_bytes[rnd(sizeof broken_bytes / sizeof *broken_bytes)]
                                              : pieces[rnd(sizeof pieces / sizeof *pieces)];
        size_t len = strlen(p);
        if (n + len >= max) break;
        memcpy(out + n, p, len);
        n += len;
    }
    out[n] = 0;
    return n;
}

/* A clause of numbered items: "…：（一）…；（二）…；（三）…。" with random words, in one of the numberings. */
static size_t make_items(char *out, size_t max, bool broken) {
    static const char *const marks[][3] = {{"（一）", "（二）", "（三）"}, {"1. ", "2. ", "3. "}, {"(a) ", "(b) ", "(c) "},
                                           {"一、", "二、", "三、"}};
    const char *const *m = marks[rnd(4)];
    size_t n = make_text(out, max / 4, 1 + rnd(6), broken);
    n += (size_t)snprintf(out + n, max - n, "%s", rnd(2) ? "：" : "\n");
    for (int i = 0; i < 3 && n + 64 < max; i++) {
        n += (size_t)snprintf(out + n, max - n, "%s", m[i]);
        n += make_text(out + n, (max - n) / 2, 1 + rnd(8), broken);
        n += (size_t)snprintf(out + n, max - n, "%s", i < 2 ? (rnd(2) ? "；" : "\n") : "。");
    }
    return n;
}

/* A yes/no question "X是否Y？" (or one asking leave, "X可以Y吗？") and a clause saying "X未Y" or "X不得Y" about it. */
static void make_asked(char *question, size_t qmax, char *text, size_t tmax, bool broken) {
    static const char *const subjects[] = {"被告", "用人单位", "原告张x0", "乙方"};
    static const char *const acts[] = {"按照协议支付抚养费", "扣押劳动者的居民身份证", "退还押金", "履行合同义务"};
    static const char *const asks[][2] = {{"是否", "？"}, {"可以", "吗？"}, {"是否", "了？"}};
    static const char *const says[] = {"未", "没有", "不得", "拒不", "至今未", "禁止"};
    const char *x = subjects[rnd(4)], *y = acts[rnd(4)];
    const char *const *ask = asks[rnd(3)];
    snprintf(question, qmax, "%s%s%s%s", x, ask[0], y, ask[1]);
    size_t n = make_text(text, tmax / 2, rnd(6), broken);
    snprintf(text + n, tmax - n, "%s%s%s。", x, says[rnd(6)], y);
}

static bool is_boundary(const char *s, size_t n, size_t i) {
    return i == 0 || i >= n || ((unsigned char)s[i] & 0xC0) != 0x80;
}

/* A random character boundary of s[0..n], n included. */
static size_t random_boundary(const char *s, size_t n) {
    size_t i = rnd((uint32_t)n + 1);
    while (i < n && !is_boundary(s, n, i)) i++;
    return i;
}

static void fail_case(const char *what, const char *question, const char *text) {
    fprintf(stderr, "broken contract: %s\n  question: \"%s\"\n  text: \"%s\"\n", what, question, text);
    fail();
}

static void check_query(const char *question, bool valid) {
    cq_query q;
    cq_err err = {0};
    cq_status rc = cq_query_parse(NULL, 0, question, &q, &err);
    if (rc != CQ_OK) {
        if (!err.msg[0]) fail_case("cq_query_parse failed without a message", question, "");
        return;
    }
    const size_t n = strlen(question);
    if (q.as_of_start > q.as_of_end || q.as_of_end > n) fail_case("the date's span is outside the question", question, "");
    char **lists[] = {q.terms, q.all_terms, q.form_terms, q.exp_terms};
    size_t counts[] = {q.n_terms, q.n_all_terms, q.n_form_terms, q.n_exp_terms};
    for (size_t l = 0; l < 4; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            const char *t = lists[l][i];
            if (!t || !*t) fail_case("an empty term", question, "");
            if (valid && !cq_utf8_valid(t, strlen(t))) fail_case("a term that is not UTF-8", question, t);
        }
    if (q.lang == CQ_QUERY_EN || q.lang == CQ_QUERY_ZH) {
        char *in_question = strndup(question, n / 2);
        (void)cq_gen_answer_in_question(in_question, question);
        free(in_question);
    }
    double cov = cq_answer_coverage(q.all_terms, q.n_all_terms, question);
    if (!(cov >= 0.0 && cov <= 1.0)) fail_case("coverage outside [0, 1]", question, "");
    cq_query_free(&q);
}

static void check_spans(const char *question, const char *text, size_t n, bool valid) {
    for (int k = 0; k < 4; k++) {
        size_t a = random_boundary(text, n), b = random_boundary(text, n);
        if (a > b) {
            size_t t = a;
            a = b;
            b = t;
        }
        size_t s = a, e = b;
        cq_span_keep_qualifiers(text, n, &s, &e);
        if (s > a || e < b || e > n || s > e) fail_case("keep_qualifiers shrank or left the text", question, text);
        if (valid && (!is_boundary(text, n, s) || !is_boundary(text, n, e)))
            fail_case("keep_qualifiers left a character boundary", question, text);
        if (b > a) {
            char *answer = strndup(text + a, b - a);
            bool changed = false;
            char *ext = cq_span_extend_answer(text, n, answer, &changed);
            if (!ext) fail_case("extend_answer lost an answer the text holds", question, text);
            if (!strstr(ext, answer) || !strstr(text, ext)) fail_case("extend_answer's span", question, text);
            if (!changed && strcmp(ext, answer)) fail_case("extend_answer changed without saying so", question, text);
            n_extended += changed;
            free(ext);
            free(answer);
        }
        if (b > a) { /* the context shown with a span: it holds the span (flattened), valid UTF-8 when the text is */
            char *span = strndup(text + a, b - a);
            for (char *c = span; *c; c++)
                if (*c == '\n' || *c == '\r') *c = ' ';
            char *ctx = cq_answer_span_context(text, span, question);
            if (ctx && !strstr(ctx, span)) fail_case("answer_span_context does not hold the span", question, text);
            if (ctx && valid && !cq_utf8_valid(ctx, strlen(ctx))) fail_case("answer_span_context not UTF-8", question, text);
            free(ctx);
            free(span);
        }
        int reword_failed = 1;
        char *reword = cq_lexicon_reword(question, text, &reword_failed);
        if (reword_failed) fail_case("lexicon_reword failed", question, text);
        if (reword && valid && !cq_utf8_valid(reword, strlen(reword))) fail_case("lexicon_reword not UTF-8", question, text);
        free(reword);
        bool cut_before = false, cut_after = false;
        const size_t max_chars = rnd(3) ? 0 : 1 + rnd(80);
        cq_text_range r = cq_span_sentence(text, n, a, b, max_chars, &cut_before, &cut_after);
        if (r.start > r.end || r.end > n) fail_case("span_sentence outside the text", question, text);
        if (valid && (!is_boundary(text, n, r.start) || !is_boundary(text, n, r.end)))
            fail_case("span_sentence left a character boundary", question, text);
        if (valid && max_chars == 0 && b > a && !cut_before && !cut_after) {
            /* the sentence holds the span, less white space at its edges */
            size_t ia = a, ib = b;
            while (ia < ib && strchr(" \t\n\f\r", text[ia])) ia++;
            while (ib > ia && strchr(" \t\n\f\r", text[ib - 1])) ib--;
            if (ib > ia && (r.start > ia || r.end < ib)) fail_case("span_sentence does not hold the span", question, text);
        }
    }
    cq_text_range items[CQ_SPAN_MAX_ITEMS];
    const size_t found = cq_span_items(text, n, items, CQ_SPAN_MAX_ITEMS);
    n_items += found > 0;
    if (found == 1 || found > CQ_SPAN_MAX_ITEMS) fail_case("span_items count", question, text);
    for (size_t i = 0; i < found; i++)
        if (items[i].start >= items[i].end || items[i].end > n || (i && items[i].start < items[i - 1].end))
            fail_case("span_items out of order or outside the text", question, text);
    cq_text_range sentence = {0, 0};
    if (cq_span_forbids(question, text, n, &sentence)) {
        n_said_no++;
        if (sentence.start > sentence.end || sentence.end > n) fail_case("span_forbids' sentence outside the text", question, text);
    }
    sentence = (cq_text_range){0, 0};
    if (cq_span_protects(question, text, n, &sentence)) {
        n_said_no++;
        if (sentence.start > sentence.end || sentence.end > n) fail_case("span_protects' sentence outside the text", question, text);
    }
    sentence = (cq_text_range){0, 0};
    if (cq_span_denies(question, text, n, &sentence)) {
        n_said_no++;
        if (sentence.start > sentence.end || sentence.end > n) fail_case("span_denies' sentence outside the text", question, text);
    }
}

static void check_prompts(const char *question, char texts[][MAX_TEXT], size_t n_passages, bool valid) {
    cq_prompt_passage p[CQ_PROMPT_ANSWER_PASSAGES];
    const char *labels[] = {NULL, "第十二条", "7.2", ""};
    for (size_t i = 0; i < n_passages; i++)
        p[i] = (cq_prompt_passage){.title = rnd(2) ? texts[(i + 1) % n_passages] : NULL, .label = labels[rnd(4)],
                                   .text = texts[i]};
    size_t *shown = NULL;
    char *prompt = cq_prompt_answer(question, p, n_passages, &shown);
    if (!prompt || !shown) fail_case("no answer prompt", question, texts[0]);
    if (valid && !cq_utf8_valid(prompt, strlen(prompt))) fail_case("an answer prompt that is not UTF-8", question, texts[0]);
    for (size_t i = 0; i < n_passages; i++)
        if (shown[i] > strlen(texts[i])) fail_case("more of a passage shown than it holds", question, texts[i]);
    free(shown);
    free(prompt);
    char *rel = cq_prompt_relevance(question, &p[0]);
    if (!rel) fail_case("no relevance prompt", question, texts[0]);
    if (valid && !cq_utf8_valid(rel, strlen(rel))) fail_case("a relevance prompt that is not UTF-8", question, texts[0]);
    free(rel);
}

static char *dup_or_null(const char *t) { return t ? strdup(t) : NULL; }

/* The answer step on hits made of the generated texts (what cq_answer_question does after retrieval, without a
 * decoder): quotes are verbatim spans of their clauses. */
static void check_answer(const char *question, char texts[][MAX_TEXT], size_t n_hits, bool valid) {
    cq_query q;
    cq_err err = {0};
    if (cq_query_parse(NULL, 0, question, &q, &err) != CQ_OK) return;
    cq_hits hits = {calloc(n_hits, sizeof(cq_hit)), n_hits, 0};
    assert_non_null(hits.hits);
    for (size_t i = 0; i < n_hits; i++) {
        cq_hit *h = &hits.hits[i];
        h->clause_id = (int64_t)i + 1;
        h->doc_id = 1 + rnd(2);
        h->doc_name = strdup(rnd(2) ? "劳动法(2018-12-29)" : "services-agreement");
        h->doc_title = rnd(2) ? dup_or_null(texts[(i + 1) % n_hits]) : NULL;
        h->label = rnd(2) ? strdup("第四十四条") : NULL;
        h->path = strdup("");
        h->text = strdup(texts[i]);
        h->score = 10.0 - (double)i;
        h->source = rnd(6) ? CQ_RETRIEVE_BM25 : CQ_RETRIEVE_ROUTER;
        h->paragraph = h->source == CQ_RETRIEVE_ROUTER ? (int)rnd(3) : 0;
        h->item = h->paragraph ? (int)rnd(3) : 0;
    }
    size_t clause = 0;
    char *fallback = cq_answer_fallback_quote(&q, &hits, q.all_terms, q.n_all_terms, &clause);
    if (fallback && (clause >= n_hits || !strstr(hits.hits[clause].text, fallback)))
        fail_case("the fallback quote is not verbatim in its clause", question, texts[0]);
    n_fallback += fallback != NULL;
    free(fallback);
    n_router += hits.hits[0].source == CQ_RETRIEVE_ROUTER;
    cq_answer a;
    cq_answer_options o = {0};
    if (cq_answer_from_hits(&q, &hits, &o, &a, &err) != CQ_OK) {
        if (!err.msg[0]) fail_case("cq_answer_from_hits failed without a message", question, texts[0]);
    } else {
        if (a.answer && valid && !cq_utf8_valid(a.answer, strlen(a.answer)))
            fail_case("an answer that is not UTF-8", question, texts[0]);
        for (size_t c = 0; c < a.n_citations; c++) {
            const cq_citation *ct = &a.citations[c];
            const cq_hit *own = NULL;
            for (size_t i = 0; i < a.hits.n; i++)
                if (a.hits.hits[i].clause_id == ct->clause_id) own = &a.hits.hits[i];
            if (!own) fail_case("a citation of a clause the hits do not hold", question, texts[0]);
            if (ct->quote && !strstr(own->text, ct->quote))
                fail_case("a quote that is not verbatim in its clause", question, own->text);
        }
        n_cited += a.n_citations > 0;
        cq_answer_free(&a);
    }
    cq_query_free(&q);
}

static void test_generated(void **state) {
    (void)state;
    const char *env = getenv("CLAUSEQA_TEST_SEED");
    const uint64_t seed = env && *env ? strtoull(env, NULL, 10) : 20261207u;
    rng_state = seed;
    fprintf(stderr, "test_text_properties: seed %llu (CLAUSEQA_TEST_SEED replays), %d cases\n",
            (unsigned long long)seed, CASES);
    static char question[512], texts[CQ_PROMPT_ANSWER_PASSAGES][MAX_TEXT];
    size_t n_valid = 0;
    for (int c = 0; c < CASES; c++) {
        const bool broken = rnd(8) == 0;
        make_text(question, sizeof question, 1 + rnd(24), broken);
        const size_t n_passages = 1 + rnd(CQ_PROMPT_ANSWER_PASSAGES);
        for (size_t i = 0; i < n_passages; i++) make_text(texts[i], MAX_TEXT, rnd(c % 50 == 0 ? 900 : 90), broken);
        if (rnd(4) == 0) make_items(texts[0], MAX_TEXT, broken);
        else if (rnd(3) == 0) make_asked(question, sizeof question, texts[0], MAX_TEXT, broken);
        bool valid = cq_utf8_valid(question, strlen(question));
        for (size_t i = 0; i < n_passages; i++) valid = valid && cq_utf8_valid(texts[i], strlen(texts[i]));
        n_valid += valid;
        check_query(question, valid);
        check_spans(question, texts[0], strlen(texts[0]), valid);
        check_prompts(question, texts, n_passages, valid);
        check_answer(question, texts, n_passages, valid);
    }
    fprintf(stderr, "  %zu valid; spans extended %zu, clauses with items %zu, forbidden or denied %zu, fallback quotes "
            "%zu, answers citing %zu (a router hit first in %zu)\n", n_valid, n_extended, n_items, n_said_no, n_fallback,
            n_cited, n_router);
    /* the generator made both kinds, and reached every path */
    assert_true(n_valid > CASES / 2 && n_valid < CASES);
    assert_true(n_extended > 0 && n_items > CASES / 20 && n_said_no > CASES / 50 && n_fallback > 0 && n_cited > CASES / 20);
}

/* Generated questions asked of a small KB: two laws that both have 第十二条, a contract with Sections 1 and 7.2. */
static void test_generated_asks(void **state) {
    cq_store *s = *state;
    cq_err err = {0};
    int64_t kb;
    assert_int_equal(cq_store_kb_create(s, "mixed", &kb, &err), CQ_OK);
    static const char *const labour[][4] = {
        {"第十二条", "12", "第十二条", "第十二条 劳动者就业，不因民族、种族、性别、宗教信仰不同而受歧视。"},
        {"第四十四条", "44", "第四十四条",
         "第四十四条 有下列情形之一的，用人单位应当按照下列标准支付高于劳动者正常工作时间工资的工资报酬：（一）安排劳动者"
         "延长工作时间的，支付不低于工资的百分之一百五十的工资报酬；（二）休息日安排劳动者工作又不能安排补休的，支付不低于"
         "工资的百分之二百的工资报酬；（三）法定休假日安排劳动者工作的，支付不低于工资的百分之三百的工资报酬。"}};
    test_add_doc(s, kb, "劳动法", "中华人民共和国劳动法", "t1", labour, 2);
    static const char *const contract_law[][4] = {
        {"第十二条", "12", "第十二条", "第十二条 劳动合同期限分为固定期限、无固定期限和以完成一定工作任务为期限的劳动合同。"},
        {"第三十一条", "31", "第三十一条", "第三十一条 用人单位不得强迫或者变相强迫劳动者加班。用人单位安排加班的，应当支付加班费。"}};
    test_add_doc(s, kb, "劳动合同法", "中华人民共和国劳动合同法", "t2", contract_law, 2);
    static const char *const services[][4] = {
        {"Section 1", "1", "Section 1", "The Customer may not assign this Agreement without the prior written consent of the Supplier."},
        {"Section 7.2", "7.2", "Section 7.2", "Invoices are due within sixty (60) days of receipt, unless disputed in good faith."}};
    test_add_doc(s, kb, "services-agreement", NULL, "t3", services, 2);
    static char question[512];
    size_t n_answered = 0, n_choices = 0;
    for (int c = 0; c < CASES / 6; c++) {
        const bool broken = rnd(8) == 0;
        make_text(question, sizeof question, 1 + rnd(16), broken);
        if (!broken && !cq_utf8_valid(question, strlen(question))) continue;
        cq_query q;
        cq_answer a;
        if (cq_query_parse(s, kb, question, &q, &err) != CQ_OK) {
            if (!err.msg[0]) fail_case("cq_query_parse failed without a message", question, "");
            continue;
        }
        if (cq_answer_question(s, &q, NULL, &a, &err) != CQ_OK) {
            if (!err.msg[0]) fail_case("cq_answer_question failed without a message", question, "");
            cq_query_free(&q);
            continue;
        }
        if (!a.answer) fail_case("an answer without text", question, "");
        if (!broken && !cq_utf8_valid(a.answer, strlen(a.answer))) fail_case("an answer that is not UTF-8", question, "");
        for (size_t i = 0; i < a.n_citations; i++) {
            const cq_hit *own = NULL;
            for (size_t h = 0; h < a.hits.n; h++)
                if (a.hits.hits[h].clause_id == a.citations[i].clause_id) own = &a.hits.hits[h];
            if (!own || (a.citations[i].quote && !strstr(own->text, a.citations[i].quote)))
                fail_case("a citation not verbatim in a retrieved clause", question, a.answer);
        }
        for (size_t i = 0; i < a.n_choices; i++)
            if (!a.choices[i].document[0] || !strstr(a.choices[i].question, a.choices[i].document))
                fail_case("a choice that does not name its document", question, a.answer);
        n_answered += !a.abstained;
        n_choices += a.n_choices > 0;
        cq_answer_free(&a);
        cq_query_free(&q);
    }
    fprintf(stderr, "  asks of the KB: %zu answered, %zu asked which document\n", n_answered, n_choices);
    assert_true(n_answered > 0 && n_choices > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_generated),
                                       cmocka_unit_test_setup_teardown(test_generated_asks, test_store_setup,
                                                                       test_store_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
