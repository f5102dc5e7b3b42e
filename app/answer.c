#include "app/answer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/answer_span.h"
#include "app/answer_versions.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "search/lexicon.h"

#define DEFAULT_MIN_COVERAGE 0.25
#define REFUSAL_COVERAGE 0.5
#define MAX_QUOTE_CHARS 400
#define FALLBACK_CLAUSES 3 /* the clauses cq_answer_fallback_quote looks through */

double cq_answer_coverage(char **terms, size_t n_terms, const char *text) {
    if (n_terms == 0) return 0;
    char *f = cq_text_norm_key(text, strlen(text));
    if (!f) return 0;
    size_t found = 0;
    for (size_t i = 0; i < n_terms; i++) {
        /* an English word in another form counts: its stem ("invoices" is held by "invoice") */
        const size_t n = cq_query_is_word(terms[i]) ? cq_query_stem_len(terms[i]) : strlen(terms[i]);
        char part[72];
        snprintf(part, sizeof part, "%.*s", (int)(n < sizeof part ? n : sizeof part - 1), terms[i]);
        if (strstr(f, part)) found++;
    }
    free(f);
    return (double)found / (double)n_terms;
}

/* A sentence of a clause: byte span [start, end). */
typedef struct {
    size_t start, end;
    double score;
} span;

static int is_sentence_end(uint32_t cp) {
    return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F || cp == 0xFF1B || cp == '!' || cp == '?' || cp == ';' ||
           cp == '\n';
}

/* Splits text into sentences (end punctuation kept with its sentence; '.' ends one when a space follows). */
static size_t split_sentences(const char *text, span **out) {
    size_t n = strlen(text), cap = 16, count = 0, start = 0, i = 0;
    span *s = malloc(cap * sizeof *s);
    *out = s;
    if (!s) return 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(text + i, n - i, &len);
        i += len;
        int end = is_sentence_end(cp) || (cp == '.' && (i >= n || text[i] == ' ' || text[i] == '\n'));
        if (end || i >= n) {
            size_t a = start, b = i;
            while (a < b && (text[a] == ' ' || text[a] == '\n')) a++;
            while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\n')) b--;
            if (b > a) {
                if (count == cap) {
                    cap *= 2;
                    span *p = realloc(s, cap * sizeof *p);
                    if (!p) break;
                    s = p;
                }
                s[count++] = (span){a, b, 0};
            }
            start = i;
        }
    }
    *out = s;
    return count;
}

/* True when a line of an article is an item (项) — "（一）…", "(二)…", "一、…" — which belongs to the paragraph (款)
 * above it rather than starting one. */
static int is_item_line(const char *line) {
    size_t len;
    uint32_t cp = cq_utf8_decode(line, strlen(line), &len);
    const char *p = line + len;
    if (cp == 0xFF08 || cp == '(') { /* （ or ( */
        size_t used;
        if (cq_number_parse(p, strlen(p), &used) < 0) return 0;
        cp = cq_utf8_decode(p + used, strlen(p + used), &len);
        return cp == 0xFF09 || cp == ')';
    }
    size_t used;
    if (cq_number_parse(line, strlen(line), &used) < 0 || used == 0) return 0;
    cp = cq_utf8_decode(line + used, strlen(line + used), &len);
    return cp == 0x3001; /* 、 */
}

/* Paragraph (款) `paragraph` of an article body, with its items; or, when item > 0, that item (项) of it. NULL when
 * the article has no such paragraph or item. Malloc'd. */
static char *article_part(const char *text, int paragraph, int item) {
    int para = 0, it = 0;
    const char *start = NULL, *end = NULL;
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        const char *next = eol ? eol + 1 : line + strlen(line);
        if (!is_item_line(line)) {
            para++;
            it = 0;
            if (para == paragraph && !item) start = line;
            if (para == paragraph + 1 && start && !item) {
                end = line;
                break;
            }
        } else if (para == paragraph && item && ++it == item) {
            start = line;
            end = eol ? eol : next;
            break;
        }
        line = next;
    }
    if (!start) return NULL;
    if (!end) end = start + strlen(start);
    while (end > start && (end[-1] == '\n' || end[-1] == ' ')) end--;
    return strndup(start, (size_t)(end - start));
}

/* Body of an article without its label ("第十二条 " prefix), for answers that recite it. */
static const char *skip_label(const char *text, const char *label) {
    if (!label) return text;
    size_t n = strlen(label);
    if (strncmp(text, label, n) != 0) return text;
    const char *p = text + n;
    for (;;) {
        size_t len;
        uint32_t cp = cq_utf8_decode(p, strlen(p), &len);
        if (!cp || !cq_is_space(cp)) break;
        p += len;
    }
    return *p ? p : text;
}

static cq_status cite(cq_answer *a, const cq_hit *h, const char *quote, cq_err *err) {
    cq_citation *c = realloc(a->citations, (a->n_citations + 1) * sizeof *c);
    if (!c) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    a->citations = c;
    c = &c[a->n_citations++];
    *c = (cq_citation){
        .clause_id = h->clause_id,
        .doc_id = h->doc_id,
        .doc = strdup(h->doc_name),
        .clause = h->label ? strdup(h->label) : NULL,
        .path = h->path ? strdup(h->path) : NULL,
        .page = h->page_first,
        .quote = strdup(quote),
        .version = h->version,
    };
    if (!c->doc || !c->quote) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    return CQ_OK;
}

/* Are bytes a and b of text in the same item (项) of it, or both outside its items (app/answer_span.h)? */
static bool same_item(const char *text, size_t a, size_t b) {
    cq_text_range it[CQ_SPAN_MAX_ITEMS];
    size_t n = cq_span_items(text, strlen(text), it, CQ_SPAN_MAX_ITEMS), ia = n, ib = n;
    for (size_t i = 0; i < n; i++) {
        if (a >= it[i].start && a < it[i].end) ia = i;
        if (b >= it[i].start && b < it[i].end) ib = i;
    }
    return ia == ib;
}

/* How many of the question's key terms (its BM25 terms) text holds, after folding; a statutory phrase of the
 * question's expansion (search/lexicon.h: "延长工作时间" for "加班") held whole counts as one. */
static size_t key_terms_in(const cq_query *q, const char *text) {
    char *f = cq_text_norm_key(text, strlen(text));
    size_t found = 0;
    for (size_t i = 0; f && i < q->n_terms; i++)
        if (strstr(f, q->terms[i])) found++;
    if (f) found += cq_lexicon_phrases_in(q->expansion, f);
    free(f);
    return found;
}

/* How many of the question's key terms the sentence around span (in clause text) holds; -1 when span is not in it. */
static int key_terms_around(const cq_query *q, const char *text, const char *span) {
    char *flat = strdup(text);
    if (!flat) return -1;
    for (char *p = flat; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    const char *at = strstr(flat, span);
    int found = -1;
    if (at) {
        size_t s = (size_t)(at - flat);
        cq_text_range r = cq_span_sentence(text, strlen(text), s, s + strlen(span), 0, NULL, NULL);
        char *sent = strndup(flat + r.start, r.end - r.start);
        if (sent) found = (int)key_terms_in(q, sent);
        free(sent);
    }
    free(flat);
    return found;
}

/* Whether the sentence ending at end leads in the items that start at item: it ends with a colon and only white
 * space lies between. */
static bool leads_items(const char *flat, size_t end, size_t item) {
    if (end > item) return false;
    for (size_t k = end; k < item; k++)
        if (flat[k] != ' ' && flat[k] != '\t') return false;
    return (end >= 3 && !memcmp(flat + end - 3, "：", 3)) || (end >= 1 && flat[end - 1] == ':');
}

/* Whether the question asks for several things (哪些条款, 哪几种, which / what are): its answer is a clause's list. */
static bool asks_for_list(const char *question) {
    static const char *const zh[] = {"哪些", "哪几", "几种", "几类", "几项"};
    for (size_t i = 0; question && i < sizeof zh / sizeof *zh; i++)
        if (strstr(question, zh[i])) return true;
    return question && (!strncasecmp(question, "what are ", 9) || !strncasecmp(question, "which ", 6));
}

/* The end of the last of the items it[0..n) that fit, whole, in room characters with one space each (0 when none
 * does); *shown receives their number. */
static size_t items_that_fit(const char *flat, const cq_text_range *it, size_t n, size_t room, size_t *shown) {
    size_t end = 0;
    for (*shown = 0; *shown < n; ++*shown) {
        const size_t c = cq_utf8_count(flat + it[*shown].start, it[*shown].end - it[*shown].start) + 1;
        if (c > room) break;
        room -= c;
        end = it[*shown].end;
    }
    return end;
}

/* Where the text after a clause label at a ("5.2 ", "第五条 ") begins: its label a number ("5.2", "12(a)") or
 * 第…条, then white space, all before s; a when there is none. */
static size_t after_label(const char *flat, size_t a, size_t s) {
    size_t k = a;
    while (k < s && flat[k] != ' ' && flat[k] != '\t') k++;
    const size_t len = k - a;
    if (k == a || k == s || len > 24) return a;
    bool label = len >= 6 && !memcmp(flat + a, "第", 3) && !memcmp(flat + k - 3, "条", 3);
    if (!label && flat[a] >= '0' && flat[a] <= '9') {
        label = true;
        for (size_t i = a; i < k && label; i++)
            label = (flat[i] >= '0' && flat[i] <= '9') || flat[i] == '.' || flat[i] == '(' || flat[i] == ')' ||
                    (flat[i] >= 'a' && flat[i] <= 'z');
    }
    while (label && k < s && (flat[k] == ' ' || flat[k] == '\t')) k++;
    return label ? k : a;
}

/* Whether s[0..n) is only sentence marks and white space (what ends the sentence after a span says nothing more). */
static bool only_marks(const char *s, size_t n) {
    static const char *const marks[] = {"。", "；", "！", "？", ".", ";", "!", "?", " ", "\t"};
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        while (k < sizeof marks / sizeof *marks && (strlen(marks[k]) > n - i || memcmp(s + i, marks[k], strlen(marks[k]))))
            k++;
        if (k == sizeof marks / sizeof *marks) return false;
        i += strlen(marks[k]);
    }
    return true;
}

/* cq_answer_span_context (answer.h). */
char *cq_answer_span_context(const char *text, const char *span, const char *question) {
    const size_t n = strlen(text);
    char *flat = strdup(text);
    if (!flat) return NULL;
    for (char *p = flat; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    const char *at = strstr(flat, span);
    char *out = NULL;
    if (at) {
        size_t s = (size_t)(at - flat), e = s + strlen(span);
        bool cut_before, cut_after;
        cq_text_range r = cq_span_sentence(text, n, s, e, CQ_ANSWER_CONTEXT_CHARS, &cut_before, &cut_after);
        /* a span in an item (项) is read with the words that lead the items in: "…应当具备下列条件：（一）…" */
        cq_text_range it[CQ_SPAN_MAX_ITEMS], lead = {0, 0};
        const size_t n_items = cq_span_items(text, n, it, CQ_SPAN_MAX_ITEMS);
        size_t in_item = n_items;
        for (size_t i = 0; i < n_items; i++) {
            if (s < it[i].start || e > it[i].end || it[0].start == 0) continue;
            size_t k = it[0].start;
            while (k > 0 && (flat[k - 1] == ' ' || flat[k - 1] == '\t')) k--;
            bool lead_cut = false;
            lead = cq_span_sentence(text, n, k, k, CQ_ANSWER_CONTEXT_CHARS / 2, &lead_cut, NULL);
            if (lead.end > k) lead.end = k; /* items in the line: the lead ends where they begin */
            /* too long to show whole, or in the span's sentence already */
            if (lead_cut || lead.start >= r.start) lead = (cq_text_range){0, 0};
            in_item = i;
            break;
        }
        size_t tail = 0, shown_items = 0;
        bool whole_list = false; /* the lead, then the items from the first */
        if (n_items && e <= it[0].start && !cut_after && leads_items(flat, r.end, it[0].start)) {
            const size_t used = cq_utf8_count(flat + r.start, r.end - r.start);
            tail = items_that_fit(flat, it, n_items, 2 * CQ_ANSWER_CONTEXT_CHARS > used ? 2 * CQ_ANSWER_CONTEXT_CHARS - used : 0,
                                  &shown_items);
        } else if (in_item < n_items && lead.end > lead.start && asks_for_list(question)) {
            const size_t used = cq_utf8_count(flat + lead.start, lead.end - lead.start);
            tail = items_that_fit(flat, it, n_items, 2 * CQ_ANSWER_CONTEXT_CHARS > used ? 2 * CQ_ANSWER_CONTEXT_CHARS - used : 0,
                                  &shown_items);
            whole_list = shown_items > in_item;
            if (whole_list) r = lead;
            else tail = 0;
        }
        /* the sentence says more than the span: not only the clause's label before it ("5.2 Either party may…") */
        if (lead.end > lead.start || after_label(flat, r.start, s) < s || (r.end > e && !only_marks(flat + e, r.end - e)) || tail) {
            cq_strbuf b = {0};
            if (lead.end > lead.start && !whole_list) {
                cq_strbuf_append(&b, flat + lead.start, lead.end - lead.start);
                cq_strbuf_puts(&b, it[0].start >= r.start ? " " : " … "); /* "…" where items were left out */
            }
            if (cut_before && !whole_list) cq_strbuf_puts(&b, "…");
            cq_strbuf_append(&b, flat + r.start, r.end - r.start);
            if (cut_after && !whole_list) cq_strbuf_puts(&b, "…");
            if (tail) {
                if (whole_list) cq_strbuf_puts(&b, " ");
                cq_strbuf_append(&b, flat + it[0].start, tail - it[0].start);
                if (shown_items < n_items) cq_strbuf_puts(&b, "…");
            }
            out = b.failed ? NULL : cq_strbuf_take(&b);
            if (!out) cq_strbuf_free(&b);
        }
    }
    free(flat);
    return out;
}

/* Makes the verdict 否 when one of the clauses the reader was shown says no (says: cq_span_forbids,
 * cq_span_denies), only those of the first hit's document with same_doc: cited from that clause with the sentence
 * that says it as the quote, and notice when the reader had said otherwise. False when none does (or out of memory). */
static bool verdict_no(const cq_query *q, cq_answer *out, bool (*says)(const char *, const char *, size_t, cq_text_range *),
                       bool same_doc, const char *notice, char **answer, size_t *clause, char **quote) {
    for (size_t j = 0; j < out->hits.n; j++) {
        if (same_doc && out->hits.hits[j].doc_id != out->hits.hits[0].doc_id) continue;
        const char *t = out->hits.hits[j].text;
        cq_text_range s;
        if (!t || !says(q->text, t, strlen(t), &s)) continue;
        char *no = strdup("否"), *said = strndup(t + s.start, s.end - s.start);
        if (!no || !said) {
            free(no);
            free(said);
            return false;
        }
        /* the reader's own 否 needs no notice, and is no longer unsure: the clause says it */
        free(out->notice);
        out->notice = strcmp(out->verdict, "no") != 0 ? strdup(notice) : NULL;
        free(*answer);
        *answer = no;
        *clause = j;
        *quote = said;
        out->verdict = "no";
        return true;
    }
    return false;
}

/* A verdict on a question asking leave (可以…吗) where a clause the reader was shown forbids the act outright
 * (cq_span_forbids): the answer is 否 whatever the reader said (the 270M reader says 是 to nearly every yes/no
 * question, docs/EVAL.md), cited from the forbidding clause, with the forbidding sentence as the quote. */
static void forbidden_verdict(const cq_query *q, cq_answer *out, char **answer, size_t *clause, char **quote) {
    if (verdict_no(q, out, cq_span_forbids, false, "条文明确禁止此行为，回答依条文原文给出。", answer, clause, quote) ||
        verdict_no(q, out, cq_span_protects, false, "条文规定此情形下不得如此，回答依条文原文给出。", answer, clause, quote))
        out->forbidden = true;
}

/* A 是 on a "X是否Y" question where a clause of the document the question is about (the first hit's) states Y
 * negated (cq_span_denies: "被告未按照协议支付抚养费"): the answer is 否, cited from that clause with the denying
 * sentence as the quote, and a notice. */
static void denied_verdict(const cq_query *q, cq_answer *out, char **answer, size_t *clause, char **quote) {
    verdict_no(q, out, cq_span_denies, true, "条文原文的表述是否定的，回答依条文原文给出。", answer, clause, quote);
}

/* The best sentences of a clause for the question: the highest-scoring sentence, plus its neighbour when that
 * one also matches, in document order, at most MAX_QUOTE_CHARS characters. */
static char *best_sentences(const char *text, char **terms, size_t n_terms) {
    span *s = NULL;
    size_t n = split_sentences(text, &s);
    if (n == 0) {
        free(s);
        return strdup(text);
    }
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        char *sent = strndup(text + s[i].start, s[i].end - s[i].start);
        double cov = sent ? cq_answer_coverage(terms, n_terms, sent) : 0;
        size_t chars = sent ? cq_utf8_count(sent, strlen(sent)) : 1;
        free(sent);
        /* Coverage decides; among equals, shorter sentences say it more directly. */
        s[i].score = cov - 0.001 * log((double)chars + 1.0);
        if (s[i].score > s[best].score) best = i;
    }
    size_t a = best, b = best;
    if (best + 1 < n && s[best + 1].score > 0.5 * s[best].score && s[best].score > 0 &&
        same_item(text, s[best].start, s[best + 1].start))
        b = best + 1;
    size_t start = s[a].start, end = s[b].end;
    if (cq_utf8_count(text + start, end - start) > MAX_QUOTE_CHARS) end = s[a].end;
    free(s);
    return strndup(text + start, end - start);
}

/* The adapter's own threshold was chosen on held-out questions when it was trained (docs/ANSWERS.md). */
double cq_answer_refusal_min_p(double caller, const cq_adapter_info *ai, cq_query_lang lang) {
    if (caller > 0) return caller;
    const double t = !ai ? 0 : lang == CQ_QUERY_EN ? ai->refusal_min_p_en : ai->refusal_min_p;
    return t > 0 ? t : CQ_ANSWER_REFUSAL_MIN_P;
}

/* The adapter's floor was chosen on the dev suites' train parts for it (docs/EVAL.md). */
double cq_answer_min_confidence(double caller, const cq_adapter_info *ai, cq_query_lang lang) {
    if (caller != 0) return caller;
    if (!ai) return CQ_ANSWER_MIN_CONFIDENCE;
    const double f = lang == CQ_QUERY_EN ? ai->min_confidence_en : ai->min_confidence;
    return f > 0 ? f : CQ_ANSWER_MIN_CONFIDENCE_TRAINED;
}

char *cq_answer_fallback_quote(const cq_query *q, const cq_hits *hits, char **terms, size_t n_terms, size_t *clause) {
    for (size_t i = 0; i < hits->n && i < FALLBACK_CLAUSES; i++) {
        char *quote = best_sentences(hits->hits[i].text, terms, n_terms);
        if (!quote) return NULL;
        if (*quote && !cq_gen_answer_is_title(quote, hits, i) && !cq_gen_answer_in_question(quote, q->text)) {
            *clause = i;
            return quote;
        }
        free(quote);
    }
    return NULL;
}

/* The decoder's answer (app/generate_answer.h) into *answer with the index of the clause it quotes, or *declined
 * when the model says the clauses do not answer the question. An answer that is empty or not a span of its clause,
 * and a decoder failure, leave *answer NULL with a notice in out, so the caller falls back to the extractive answer;
 * *repeated is set when the model answered with only the question's words or a document's title: it took the
 * question for answerable, so the caller quotes a clause whatever the coverage (cq_answer_fallback_quote).
 * A verdict (trained model) is the answer word with out->verdict set; it cites the first clause. */
static void generate(const cq_query *q, const cq_answer_options *o, cq_answer *out, char **answer, size_t *clause,
                     bool *declined, bool *repeated) {
    const bool zh = q->lang == CQ_QUERY_ZH;
    cq_gen_answer g;
    cq_err e = {0};
    const char *why = NULL;
    /* The small base model declines answerable questions too readily: it may decline only when the best clause
     * holds less than REFUSAL_COVERAGE of the question's terms, which is where unanswerable questions mostly are.
     * The trained model may always decline (generate_answer.c). */
    const cq_adapter_info *ai = o->decoder ? cq_decoder_adapter(o->decoder) : NULL;
    const double min_confidence = cq_answer_min_confidence(o->min_confidence, ai, q->lang);
    cq_gen_answer_options go = {.allow_refusal = out->coverage < REFUSAL_COVERAGE,
                                .min_confidence = min_confidence,
                                .refusal_min_p = cq_answer_refusal_min_p(o->refusal_min_p, ai, q->lang)};
    /* the clauses the reader is shown (cq_answer_reader_passages): a view of out->hits, its clause mapped back */
    size_t *keep = malloc((out->hits.n ? out->hits.n : 1) * sizeof *keep);
    cq_hits view = {NULL, 0, out->hits.n_query_terms};
    if (keep) view.n = cq_answer_reader_passages(&out->hits, o, keep);
    if (view.n) view.hits = malloc(view.n * sizeof *view.hits);
    for (size_t i = 0; view.hits && i < view.n; i++) view.hits[i] = out->hits.hits[keep[i]];
    const cq_status grc = view.hits ? cq_gen_answer_run(o->decoder, q, &view, &go, o->on_text, o->user, &g, &e)
                                    : cq_err_set(&e, CQ_ERR_NOMEM, "out of memory");
    if (grc) {
        CQ_WARN("answer generation failed, answering extractively: %s", e.msg);
        why = zh ? "生成回答时出错，以下为条文原文摘录。" : "The answer could not be generated; quoted from the clause instead.";
    } else {
        if (g.clause < view.n) g.clause = keep[g.clause];
        out->prompt_tokens = g.prompt_tokens;
        out->tokens_generated = g.new_tokens;
        out->confidence = g.new_tokens ? exp(g.mean_logprob) : 0;
        out->refusal_p = g.refusal_p;
        out->n_key_terms = (int)q->n_terms;
        if (g.text && !g.refused && g.clause < out->hits.n) {
            out->key_terms = (int)key_terms_in(q, out->hits.hits[g.clause].text);
            if (!g.verdict) out->key_terms_sentence = key_terms_around(q, out->hits.hits[g.clause].text, g.text);
        }
        /* an answer from a clause that holds none of the question's key terms: refused unless the model is sure */
        const bool keyless = g.text && out->key_terms == 0 && q->n_terms > 0 &&
                             out->confidence < o->keyless_min_confidence;
        if (g.refused) {
            *declined = true;
        } else if (keyless) {
            *declined = true;
            out->notice = strdup(zh ? "所引条文不含问题的关键词，回答把握也不足，因此不作回答。"
                                    : "The clause the answer came from has none of the question's key words and the "
                                      "answer was uncertain, so it is not given.");
        } else if (g.text && g.verdict) {
            *answer = g.text;
            *clause = g.clause;
            g.text = NULL;
            out->verdict = g.verdict;
            out->generated = true;
            /* A verdict below the confidence floor stays (the clause quoted instead would not answer 是 or 否 at
             * all) but says it is unsure: on cjrc-dev's yes/no train questions the 270M's verdicts under 0.5 were
             * right 61 % of the time (the share of 是 there is 71 %), those above 83 % (docs/EVAL.md). */
            if (out->confidence < min_confidence)
                why = zh ? "回答把握不足，请以所引条文为准。" : "The answer is uncertain: check it against the clause cited.";
        } else if (g.text && out->confidence < min_confidence) {
            why = zh ? "生成的回答把握不足，以下为条文原文摘录。"
                     : "The generated answer was too uncertain; quoted from the clause instead.";
        } else if (g.text && cq_gen_answer_in_question(g.text, q->text)) {
            *repeated = true;
            why = zh ? "生成的回答只重复了问题中的词语，以下为条文原文摘录。"
                     : "The generated answer only repeated words of the question; quoted from the clause instead.";
        } else if (g.text && cq_gen_answer_is_title(g.text, &out->hits, g.clause)) {
            *repeated = true;
            why = zh ? "生成的回答只重复了文件标题，以下为条文原文摘录。"
                     : "The generated answer only repeated the document's title; quoted from the clause instead.";
        } else if (g.text && cq_gen_answer_supported(g.text, &out->hits, g.clause)) {
            *answer = g.text;
            *clause = g.clause;
            g.text = NULL;
            out->generated = true;
        } else {
            why = zh ? "生成的回答无法在条文中核实，以下为条文原文摘录。"
                     : "The generated answer could not be verified against the clauses; quoted from the clause instead.";
        }
        cq_gen_answer_free(&g);
    }
    free(view.hits);
    free(keep);
    if (why) out->notice = strdup(why);
}

/* CLAUSEQA_READER_MARGIN: a positive number, or off; unset or anything else (with one warning): the default. */
static double reader_margin_setting(void) {
    const char *v = getenv("CLAUSEQA_READER_MARGIN");
    if (!v || !*v) return CQ_ANSWER_READER_MARGIN;
    if (!strcmp(v, "off")) return -1.0;
    char *end = NULL;
    const double m = strtod(v, &end);
    if (end != v && !*end && m > 0) return m;
    static int warned; /* once a process: this is read for every question */
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        CQ_WARN("CLAUSEQA_READER_MARGIN is a positive number or off, not '%s': using the default", v);
    return CQ_ANSWER_READER_MARGIN;
}

/* CLAUSEQA_READER_MAX: a positive whole number; unset or anything else (with one warning): no cap. */
static size_t reader_max_setting(void) {
    const char *v = getenv("CLAUSEQA_READER_MAX");
    if (!v || !*v) return 0;
    char *end = NULL;
    const long n = strtol(v, &end, 10);
    if (end != v && !*end && n > 0) return (size_t)n;
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        CQ_WARN("CLAUSEQA_READER_MAX is a positive whole number, not '%s': no cap", v);
    return 0;
}

static cq_answer_options with_defaults(const cq_answer_options *opt) {
    cq_answer_options o = opt ? *opt : (cq_answer_options){0};
    if (o.reader_margin == 0) o.reader_margin = reader_margin_setting();
    if (o.reader_max == 0) o.reader_max = reader_max_setting();
    if (o.min_coverage <= 0) o.min_coverage = DEFAULT_MIN_COVERAGE;
    if (o.keyless_min_confidence == 0) o.keyless_min_confidence = CQ_ANSWER_KEYLESS_MIN_CONFIDENCE;
    return o;
}

size_t cq_answer_reader_passages(const cq_hits *h, const cq_answer_options *opt, size_t *keep) {
    const cq_answer_options o = with_defaults(opt);
    bool judged = false;
    double best = 0; /* the best relevance judged */
    for (size_t i = 0; i < h->n; i++) {
        if (!h->hits[i].reranked) continue;
        if (!judged || h->hits[i].relevance > best) best = h->hits[i].relevance;
        judged = true;
    }
    const bool by_margin = o.reader_margin >= 0;
    size_t n = 0;
    if (!judged || (!by_margin && !o.reader_max)) {
        for (size_t i = 0; i < h->n; i++) keep[n++] = i;
        return n;
    }
    const double ref = h->n && h->hits[0].reranked ? h->hits[0].relevance : best;
    for (size_t i = 0; i < h->n; i++) {
        if (o.reader_max && n == o.reader_max) break;
        const cq_hit *x = &h->hits[i];
        const bool within = !by_margin || (x->reranked && x->relevance >= ref - o.reader_margin);
        if (i == 0 || within) keep[n++] = i;
    }
    return n;
}

cq_status cq_answer_question(cq_store *st, const cq_query *q, const cq_answer_options *opt, cq_answer *out,
                             cq_err *err) {
    cq_answer_options o = with_defaults(opt);
    double t0 = cq_clock_seconds();
    if (q->compare) {
        bool handled = false;
        cq_status rc = cq_answer_compare_versions(st, q, out, &handled, err);
        if (rc || handled) {
            out->answer_ms = cq_clock_ms_since(t0);
            return rc;
        }
    }
    cq_hits hits;
    cq_status rc = cq_retrieve(st, q, &o.retrieve, &hits, err);
    double retrieve_ms = cq_clock_ms_since(t0);
    if (rc) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    rc = cq_answer_from_hits(q, &hits, &o, out, err);
    out->retrieve_ms = retrieve_ms;
    if (!rc) cq_answer_version_notes(st, q, out);
    return rc;
}

/* b's text after the answer's notice (a space between), or as the notice; b is freed. */
static cq_status add_notice(cq_answer *out, cq_strbuf *b, cq_err *err) {
    cq_strbuf j = {0};
    if (out->notice) cq_strbuf_printf(&j, "%s ", out->notice);
    cq_strbuf_append(&j, b->data ? b->data : "", b->len);
    const bool failed = b->failed;
    cq_strbuf_free(b);
    char *notice = cq_strbuf_finish(&j);
    if (failed || !notice) {
        free(notice);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    free(out->notice);
    out->notice = notice;
    return CQ_OK;
}

/* The question asked of the document called name[0..n) (one of q->ambiguous), into out->choices: Chinese names it
 * before the reference (《name》第四十四条…), English after it (Section 1 of name). */
static cq_status add_choice(cq_answer *out, const cq_query *q, const char *name, size_t n, cq_err *err) {
    cq_strbuf b = {0};
    const size_t at = q->lang == CQ_QUERY_ZH ? q->ref.start : q->ref.end;
    cq_strbuf_append(&b, q->text, at);
    cq_strbuf_printf(&b, q->lang == CQ_QUERY_ZH ? "《%.*s》" : " of %.*s", (int)n, name);
    cq_strbuf_puts(&b, q->text + at);
    char *question = cq_strbuf_finish(&b), *document = strndup(name, n);
    cq_answer_choice *grown = question && document ? realloc(out->choices, (out->n_choices + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(question);
        free(document);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    out->choices = grown;
    out->choices[out->n_choices++] = (cq_answer_choice){document, question};
    return CQ_OK;
}

cq_status cq_answer_from_hits(const cq_query *q, cq_hits *hits, const cq_answer_options *opt, cq_answer *out,
                              cq_err *err) {
    memset(out, 0, sizeof *out);
    out->key_terms = out->key_terms_sentence = -1;
    out->as_of = q->as_of;
    cq_answer_options o = with_defaults(opt);
    double t0 = cq_clock_seconds();
    out->hits = *hits;
    memset(hits, 0, sizeof *hits);
    cq_status rc = CQ_OK;
    const int zh = q->lang == CQ_QUERY_ZH;
    char **terms = q->all_terms;
    size_t n_terms = q->n_all_terms;
    const cq_hit *top = out->hits.n ? &out->hits.hits[0] : NULL;
    char *answer = NULL;
    if (top && q->absent_name) {
        /* The question names something the KB holds nowhere ("Consider FNHA's Non-Disclosure Agreement" of a KB
         * without it): its document is not here, and a clause of another one would answer it wrongly. */
        cq_strbuf b = {0};
        if (zh) cq_strbuf_printf(&b, "知识库中没有找到%s。", q->absent_name);
        else cq_strbuf_printf(&b, "No document in the knowledge base mentions \"%s\".", q->absent_name);
        out->notice = cq_strbuf_take(&b);
        if (!out->notice) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    } else if (top && top->source == CQ_RETRIEVE_ROUTER) {
        /* The question names the clause: recite it (or the paragraph asked for). */
        int para_no = top->paragraph ? top->paragraph : (top->item ? 1 : 0);
        char *para = para_no ? article_part(skip_label(top->text, top->label), para_no, top->item) : NULL;
        const char *body = para ? para : skip_label(top->text, top->label);
        if (para_no && !para) {
            /* The article exists but not the part asked for: say so, then recite the whole article. */
            cq_strbuf b = {0};
            if (zh) {
                char num[64];
                cq_strbuf_printf(&b, "%s没有", top->label ? top->label : "该条");
                if (top->paragraph) cq_strbuf_printf(&b, "第%s款", cq_number_format_cn(top->paragraph, num));
                if (top->item) cq_strbuf_printf(&b, "第%s项", cq_number_format_cn(top->item, num));
                cq_strbuf_puts(&b, "，以下是该条全文：\n");
            } else {
                cq_strbuf_printf(&b, "%s has no such paragraph; the whole clause:\n", top->label ? top->label : "The clause");
            }
            cq_strbuf_puts(&b, body);
            answer = cq_strbuf_take(&b);
        } else {
            answer = strdup(body);
        }
        out->coverage = 1.0;
        if (answer) rc = cite(out, top, body, err);
        free(para);
    } else if (top) {
        out->coverage = cq_answer_coverage(terms, n_terms, top->text);
        bool declined = false;
        /* the trained model answers whatever the coverage: it decides when to abstain */
        const bool trained = o.decoder && cq_decoder_adapter(o.decoder);
        bool repeated = false;
        if ((out->coverage >= o.min_coverage || trained) && o.decoder) {
            size_t clause = 0;
            generate(q, &o, out, &answer, &clause, &declined, &repeated);
            char *quote = NULL;
            if (answer && out->verdict && zh) forbidden_verdict(q, out, &answer, &clause, &quote);
            if (answer && out->verdict && zh && !out->forbidden && !strcmp(out->verdict, "yes"))
                denied_verdict(q, out, &answer, &clause, &quote);
            if (answer && out->verdict) { /* the quote: the first clause's sentences that match the question best */
                if (!quote) quote = best_sentences(out->hits.hits[clause].text, terms, n_terms);
                rc = quote ? cite(out, &out->hits.hits[clause], quote, err)
                           : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
                free(quote);
            } else if (answer) {
                rc = cite(out, &out->hits.hits[clause], answer, err);
                if (!rc) out->context = cq_answer_span_context(out->hits.hits[clause].text, answer, q->text);
            }
        }
        if (!rc && !answer && !declined && repeated) {
            size_t clause = 0;
            answer = cq_answer_fallback_quote(q, &out->hits, terms, n_terms, &clause);
            if (answer) rc = cite(out, &out->hits.hits[clause], answer, err);
        }
        if (!rc && !answer && !declined && out->coverage >= o.min_coverage) {
            answer = best_sentences(top->text, terms, n_terms);
            if (answer) rc = cite(out, top, answer, err);
        }
    }
    if (!rc && answer && q->absent_words && top && top->source != CQ_RETRIEVE_ROUTER) {
        /* Words the question is about that no clause holds: what is quoted may be about something else. */
        cq_strbuf b = {0};
        cq_strbuf_puts(&b, "No clause in the knowledge base uses the word");
        const char *w = q->absent_words;
        const bool several = strchr(w, ' ') != NULL;
        cq_strbuf_puts(&b, several ? "s " : " ");
        for (const char *p = w; *p;) {
            const size_t n = strcspn(p, " ");
            const bool last = !p[n];
            cq_strbuf_printf(&b, "%s\"%.*s\"", p == w ? "" : last ? " or " : ", ", (int)n, p);
            p += n + !last;
        }
        cq_strbuf_puts(&b, "; the clause quoted may not answer the question.");
        rc = add_notice(out, &b, err);
    }
    if (!rc && q->ambiguous) {
        /* "第四十四条" without a document where several have one: the router resolved it to none; say which. */
        cq_strbuf b = {0};
        const int len = (int)(q->ref.end - q->ref.start);
        const char *ref = q->text + q->ref.start;
        const bool all = q->n_ambiguous <= CQ_QUERY_MAX_AMBIGUOUS; /* every one named, else the first few */
        const char *more = q->ambiguous_more ? (zh ? "以上" : " or more") : "";
        if (zh) cq_strbuf_printf(&b, "知识库中有%zu个%s文件都有%.*s%s", q->n_ambiguous, more, len, ref, all ? "：" : "，如");
        else cq_strbuf_printf(&b, "%zu%s documents of the knowledge base have %.*s%s", q->n_ambiguous, more, len, ref,
                              all ? ": " : ", among them ");
        for (const char *p = q->ambiguous; *p && !rc;) {
            const size_t n = strcspn(p, "\n");
            cq_strbuf_printf(&b, zh ? "%s《%.*s》" : "%s%.*s", p == q->ambiguous ? "" : zh ? "、" : "; ", (int)n, p);
            rc = add_choice(out, q, p, n, err);
            p += n + (p[n] == '\n');
        }
        if (zh) cq_strbuf_printf(&b, "%s。请在问题中写明是哪个文件的%.*s。", all ? "" : "等", len, ref);
        else cq_strbuf_printf(&b, "%s. Name the document in the question.", all ? "" : " …");
        if (rc) {
            cq_strbuf_free(&b);
        } else if (answer) {
            rc = add_notice(out, &b, err); /* beside an answer found some other way (the question's other words) */
        } else { /* the answer is the question back, not "the documents do not contain…" */
            out->abstained = true;
            if (!(answer = cq_strbuf_finish(&b))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
    }
    if (!rc && !answer) {
        out->abstained = true;
        answer = strdup(zh ? "文档中没有找到能回答这个问题的内容。" : "The documents do not contain an answer to this question.");
    }
    if (!answer && !rc) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    out->answer = answer;
    out->answer_ms = cq_clock_ms_since(t0);
    if (rc) cq_answer_free(out);
    return rc;
}

void cq_answer_free(cq_answer *a) {
    for (size_t i = 0; i < a->n_citations; i++) {
        free(a->citations[i].doc);
        free(a->citations[i].clause);
        free(a->citations[i].path);
        free(a->citations[i].quote);
    }
    free(a->citations);
    free(a->answer);
    free(a->notice);
    free(a->context);
    free(a->version_notice);
    for (size_t i = 0; i < a->n_choices; i++) {
        free(a->choices[i].document);
        free(a->choices[i].question);
    }
    free(a->choices);
    if (a->compare) {
        cq_answer_compare_free(a->compare);
        free(a->compare);
    }
    cq_hits_free(&a->hits);
    memset(a, 0, sizeof *a);
}
