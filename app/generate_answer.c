/* Generated answers with copy-constrained greedy decoding; see generate_answer.h. */
#define _GNU_SOURCE /* memmem */
#include "app/generate_answer.h"
#include "app/answer_span.h"
#include "core/clock.h"
#include "core/log.h"
#include "search/lexicon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"

#define DEFAULT_CONTEXT_CHARS 600
#define DEFAULT_NEW_TOKENS 96
#define DEFAULT_CANDIDATES 64
#define MAX_CANDIDATES CQ_TOP_MAX
#define MAX_PIECE 64
#define STREAM_AFTER_TOKENS 4

static const char REFUSAL_ZH[] = "无法回答";
static const char REFUSAL_EN[] = "Cannot be answered";
/* The trained model's verdict words (cq-prompt-v1): yes, then no. */
static const char *const VERDICT_ZH[2] = {"是", "否"};
static const char *const VERDICT_EN[2] = {"Yes", "No"};
/* `which` of a candidate answer that is not a span of a clause: the refusal, or a verdict word (yes, no). */
#define WHICH_REFUSAL ((size_t)-1)
#define WHICH_YES ((size_t)-2)
#define WHICH_NO ((size_t)-3)

const char *cq_gen_answer_refusal(bool zh) { return zh ? REFUSAL_ZH : REFUSAL_EN; }

/* The worked examples: made up for the prompt (no evaluation material), one answered by a short verbatim span of
 * its passage, one whose passage does not answer the question. A 270M base model follows this plain
 * passage / question / answer pattern far better than numbered lists of clauses (tried: it went on listing). */
static const char PREAMBLE_ZH[] =
    "阅读材料，用材料中的原文回答问题，答案尽量简短。材料中没有答案时回答：无法回答。\n\n"
    "材料：《示例劳动条例》第十二条 用人单位安排劳动者延长工作时间的，应当支付不低于工资的百分之一百五十的工资报酬；"
    "休息日安排劳动者工作又不能安排补休的，支付不低于工资的百分之二百的工资报酬。\n"
    "问题：休息日加班又不能补休，工资怎么算？\n"
    "答案：不低于工资的百分之二百\n\n"
    "材料：《示例合同规则》第五条 当事人订立合同，可以采用书面形式、口头形式或者其他形式。\n"
    "问题：违约金最高可以约定多少？\n"
    "答案：无法回答\n\n"
    "材料：";
static const char PREAMBLE_EN[] =
    "Read the passage and answer the question with the exact words of the passage, as briefly as possible. If the "
    "passage does not answer it, answer: Cannot be answered\n\n"
    "Passage: Sample Services Agreement, 7.2 Payment. The Customer shall pay each invoice within thirty (30) days of "
    "its date by bank transfer to the account named in the invoice.\n"
    "Question: How long does the customer have to pay an invoice?\n"
    "Answer: within thirty (30) days of its date\n\n"
    "Passage: Sample Services Agreement, 3.1 Term. This Agreement starts on the Effective Date.\n"
    "Question: Which law governs the agreement?\n"
    "Answer: Cannot be answered\n\n"
    "Passage:";

/* Bytes of text that hold at most max_chars characters, cut at a character boundary. */
static size_t prefix_bytes(const char *text, size_t max_chars) {
    size_t n = strlen(text), i = 0, chars = 0;
    while (i < n && chars < max_chars) {
        size_t len;
        cq_utf8_decode(text + i, n - i, &len);
        i += len ? len : 1;
        chars++;
    }
    return i;
}

/* Clause text shown to the model: newlines would read as the end of an answer, so they become spaces in the prompt;
 * the constraint matches against the same flattened text (flatten() below). */
static char *flatten(const char *text, size_t n);
static void put_flat(cq_strbuf *b, const char *text, size_t n) {
    char *f = flatten(text, n);
    if (f) cq_strbuf_append(b, f, n);
    else b->failed = true;
    free(f);
}

char *cq_gen_answer_prompt(const cq_query *q, const cq_hits *hits, size_t max_context_chars, size_t **shown) {
    const bool zh = q->lang == CQ_QUERY_ZH;
    const char *question = q->text;
    if (!max_context_chars) max_context_chars = DEFAULT_CONTEXT_CHARS;
    *shown = calloc(hits->n + 1, sizeof **shown);
    if (!*shown) return NULL;
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, zh ? PREAMBLE_ZH : PREAMBLE_EN);
    /* The best clause, and the next ones while they fit: one passage, each clause led by its document and label. */
    size_t left = max_context_chars;
    for (size_t i = 0; i < hits->n && left > 0; i++) {
        const cq_hit *h = &hits->hits[i];
        size_t chars = cq_utf8_count(h->text, strlen(h->text));
        if (i > 0 && chars > left) break;
        size_t take = prefix_bytes(h->text, chars < left ? chars : left);
        (*shown)[i] = take;
        left -= chars < left ? chars : left;
        const char *title = h->doc_title ? h->doc_title : h->doc_name;
        if (zh) cq_strbuf_printf(&b, "%s《%s》", i ? " " : "", title);
        else cq_strbuf_printf(&b, " %s", title);
        if (h->label && strncmp(h->text, h->label, strlen(h->label))) cq_strbuf_printf(&b, zh ? "%s " : ", %s.", h->label);
        else cq_strbuf_puts(&b, zh ? "" : ".");
        if (!zh) cq_strbuf_puts(&b, " ");
        put_flat(&b, h->text, take);
    }
    cq_strbuf_printf(&b, zh ? "\n问题：%s\n答案：" : "\nQuestion: %s\nAnswer:", question);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

static char *flatten(const char *text, size_t n) {
    char *f = malloc(n + 1);
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) f[i] = text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
    f[n] = 0;
    return f;
}

/* ---- cq-prompt-v1 ---------------------------------------------------------------------------------------------- */

cq_prompt_passage cq_prompt_passage_of(const cq_hit *h) {
    return (cq_prompt_passage){h->doc_title ? h->doc_title : h->doc_name, h->label, h->text};
}

/* The passage's header (docs/ANSWERS.md), then its first `take` bytes of text flattened. */
static void put_passage(cq_strbuf *b, const cq_prompt_passage *p, size_t take, bool zh) {
    const char *title = p->title ? p->title : "", *text = p->text ? p->text : "";
    const bool with_label = p->label && *p->label && strncmp(text, p->label, strlen(p->label));
    if (zh) cq_strbuf_printf(b, "《%s》%s%s", title, with_label ? p->label : "", with_label ? " " : "");
    else if (with_label) cq_strbuf_printf(b, "%s, %s. ", title, p->label);
    else cq_strbuf_printf(b, "%s. ", title);
    put_flat(b, text, take);
}

/* The question with \r and \n made spaces and surrounding white space (cq_is_space) trimmed. */
static void put_question(cq_strbuf *b, const char *q) {
    size_t n = strlen(q), a = 0, e = n, len;
    while (a < n && cq_is_space(cq_utf8_decode(q + a, n - a, &len))) a += len;
    while (e > a) {
        size_t k = e - 1;
        while (k > a && ((unsigned char)q[k] & 0xC0) == 0x80) k--; /* the start of the last character */
        if (!cq_is_space(cq_utf8_decode(q + k, e - k, &len))) break;
        e = k;
    }
    put_flat(b, q + a, e - a);
}

/* cq_prompt_answer in the language zh says. */
static char *prompt_answer(const char *question, bool zh, const cq_prompt_passage *p, size_t n, size_t **shown) {
    size_t *sh = calloc(n + 1, sizeof *sh);
    if (!sh) return NULL;
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, zh ? "任务：回答\n材料：\n" : "Task: answer\nPassages:\n");
    /* the first passage cut to the budget, each next one whole while it fits; the first that does not ends it */
    size_t left = CQ_PROMPT_ANSWER_CHARS;
    for (size_t i = 0; i < n && i < CQ_PROMPT_ANSWER_PASSAGES && left > 0; i++) {
        const char *text = p[i].text ? p[i].text : "";
        const size_t chars = cq_utf8_count(text, strlen(text));
        if (i > 0 && chars > left) break;
        const size_t take = chars < left ? chars : left;
        sh[i] = prefix_bytes(text, take);
        left -= take;
        cq_strbuf_printf(&b, "[%zu] ", i + 1);
        put_passage(&b, &p[i], sh[i], zh);
        cq_strbuf_puts(&b, "\n");
    }
    cq_strbuf_puts(&b, zh ? "问题：" : "Question: ");
    put_question(&b, question);
    cq_strbuf_puts(&b, zh ? "\n答案：" : "\nAnswer:");
    if (b.failed) {
        cq_strbuf_free(&b);
        free(sh);
        return NULL;
    }
    if (shown) *shown = sh;
    else free(sh);
    return cq_strbuf_take(&b);
}

static char *relevance(const char *question, bool zh, const cq_prompt_passage *p, size_t chars) {
    if (chars == 0 || chars > CQ_PROMPT_RELEVANCE_CHARS) chars = CQ_PROMPT_RELEVANCE_CHARS;
    cq_strbuf b = {0};
    cq_strbuf_puts(&b, zh ? "任务：相关性\n材料：" : "Task: relevance\nPassage: ");
    put_passage(&b, p, prefix_bytes(p->text ? p->text : "", chars), zh);
    cq_strbuf_puts(&b, zh ? "\n问题：" : "\nQuestion: ");
    put_question(&b, question);
    cq_strbuf_puts(&b, zh ? "\n相关：" : "\nRelevant:");
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

char *cq_prompt_answer(const char *question, const cq_prompt_passage *p, size_t n, size_t **shown) {
    return prompt_answer(question, cq_utf8_has_cjk(question), p, n, shown);
}

char *cq_prompt_relevance(const char *question, const cq_prompt_passage *p) {
    return relevance(question, cq_utf8_has_cjk(question), p, CQ_PROMPT_RELEVANCE_CHARS);
}

char *cq_prompt_relevance_cut(const cq_query *q, const cq_prompt_passage *p, size_t chars) {
    return relevance(q->text, q->lang == CQ_QUERY_ZH, p, chars);
}

cq_status cq_prompt_relevance_ids(const cq_tokenizer *tok, bool zh, int32_t *yes, int32_t *no, cq_err *err) {
    const char *words[2] = {zh ? "是" : " yes", zh ? "否" : " no"};
    int32_t *out[2] = {yes, no};
    for (int i = 0; i < 2; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        cq_status rc = cq_tokenizer_encode(tok, words[i], strlen(words[i]), 0, &ids, &n, err);
        if (!rc && !n) rc = cq_err_set(err, CQ_ERR_INTERNAL, "the tokenizer gives no token for \"%s\"", words[i]);
        if (!rc) *out[i] = ids[0];
        free(ids);
        if (rc) return rc;
    }
    return CQ_OK;
}

bool cq_gen_answer_supported(const char *answer, const cq_hits *hits, size_t clause) {
    if (!answer || !*answer || clause >= hits->n) return false;
    const char *t = hits->hits[clause].text;
    char *f = flatten(t, strlen(t));
    bool ok = f && strstr(f, answer) != NULL;
    free(f);
    return ok;
}

bool cq_gen_answer_is_title(const char *answer, const cq_hits *hits, size_t clause) {
    if (!answer || clause >= hits->n || !hits->hits[clause].doc_title) return false;
    const char *title = hits->hits[clause].doc_title;
    char *a = cq_text_norm_key(answer, strlen(answer)), *t = cq_text_norm_key(title, strlen(title));
    bool is = false;
    if (a && t && *a && strstr(t, a)) is = cq_utf8_count(a, strlen(a)) * 5 >= cq_utf8_count(t, strlen(t)) * 4;
    free(a);
    free(t);
    return is;
}

/* Questions that ask for a name or a shorter name of what they name themselves: the answer may rightly lie inside
 * them ("长张高速公路的简称是什么？" → "长张高速"; CUAD's "Document Name" questions hold the contract's name). English
 * words are matched case aside. */
static const char *const ASKS_NAME[] = {"简称", "缩写", "简写", "略称", "name", "title", "called", "entitled"};

bool cq_gen_answer_in_question(const char *answer, const char *question) {
    if (!answer || !question) return false;
    for (size_t i = 0; i < sizeof ASKS_NAME / sizeof *ASKS_NAME; i++)
        if (strcasestr(question, ASKS_NAME[i])) return false;
    /* A capital letter: a name the question gives too may be the answer (a party, "Sponsor", "ADAMS GOLF"). */
    for (const char *p = answer; *p; p++)
        if (*p >= 'A' && *p <= 'Z') return false;
    char *a = cq_text_norm_key(answer, strlen(answer)), *q = cq_text_norm_key(question, strlen(question));
    const bool in = a && q && cq_utf8_count(a, strlen(a)) >= 2 && strstr(q, a);
    free(a);
    free(q);
    return in;
}

void cq_gen_answer_free(cq_gen_answer *g) {
    free(g->text);
    memset(g, 0, sizeof *g);
}

/* What a span of one shown clause must be (see constraint_build below): a verbatim span of text (the clause's shown
 * bytes flattened, the items that may not be quoted made line breaks) that holds no item's start after its first
 * byte. */
typedef struct {
    char *text; /* NULL: the clause is not shown */
    size_t len;
    size_t starts[CQ_SPAN_MAX_ITEMS]; /* where its items start */
    size_t n_starts;
} constraint;

/* The first place answer[0..n) may be quoted from in c, or NULL. */
static const char *constraint_find(const constraint *c, const char *answer, size_t n) {
    if (!c->text || !n) return NULL;
    for (const char *p = c->text, *end = c->text + c->len; p < end;) {
        const char *at = memmem(p, (size_t)(end - p), answer, n);
        if (!at) return NULL;
        const size_t s = (size_t)(at - c->text);
        bool crosses = false;
        for (size_t k = 0; k < c->n_starts && !crosses; k++) crosses = c->starts[k] > s && c->starts[k] < s + n;
        if (!crosses) return at;
        p = at + 1;
    }
    return NULL;
}

/* Is answer[0..n) a span of one shown clause (its index in *which), or a prefix of the refusal phrase or of a
 * verdict word (verdicts: the yes and no words, or NULL)? */
static bool admissible(const constraint *con, size_t n_con, const char *refusal, const char *const *verdicts,
                       const char *answer, size_t n, size_t *which) {
    if (refusal && n <= strlen(refusal) && !memcmp(refusal, answer, n)) {
        *which = WHICH_REFUSAL;
        return true;
    }
    for (int v = 0; verdicts && v < 2; v++)
        if (n <= strlen(verdicts[v]) && !memcmp(verdicts[v], answer, n)) {
            *which = v ? WHICH_NO : WHICH_YES;
            return true;
        }
    for (size_t i = 0; i < n_con; i++)
        if (constraint_find(&con[i], answer, n)) {
            *which = i;
            return true;
        }
    return false;
}

/* The constraint of hit h shown up to byte `shown` (app/answer_span.h for the items): no span crosses from one item
 * (项) into the next; and when the question's terms match one item clearly better than every other (half again the
 * terms of any other, and three more), the other items' text becomes line breaks (which no answer holds): the span
 * comes from that item or from the clause's text outside its items. False when out of memory. */
static bool constraint_build(constraint *c, const cq_hit *h, size_t shown, char *const *terms, size_t n_terms) {
    memset(c, 0, sizeof *c);
    if (!(c->text = flatten(h->text, shown))) return false;
    c->len = shown;
    cq_text_range it[CQ_SPAN_MAX_ITEMS];
    const size_t n = cq_span_items(h->text, strlen(h->text), it, CQ_SPAN_MAX_ITEMS);
    if (n < 2) return true;
    size_t best = (size_t)-1, best_score = 0, second = 0;
    for (size_t i = 0; terms && i < n; i++) {
        char *key = cq_text_norm_key(h->text + it[i].start, it[i].end - it[i].start);
        size_t score = 0;
        for (size_t k = 0; key && k < n_terms; k++)
            if (strstr(key, terms[k])) score++;
        free(key);
        if (score > best_score) {
            second = best_score;
            best_score = score;
            best = i;
        } else if (score > second) {
            second = score;
        }
    }
    /* only a clear match picks an item: half again the terms of any other item, and at least three more */
    const bool pick = best != (size_t)-1 && 2 * best_score >= 3 * second && best_score >= second + 3;
    for (size_t i = 0; i < n && it[i].start < shown; i++) {
        c->starts[c->n_starts++] = it[i].start;
        if (pick && i != best)
            for (size_t b = it[i].start; b < it[i].end && b < shown; b++) c->text[b] = '\n';
    }
    return true;
}

bool cq_gen_answer_admits(const cq_hit *h, size_t shown, char *const *terms, size_t n_terms, const char *span) {
    constraint c;
    bool ok = constraint_build(&c, h, shown, terms, n_terms) && constraint_find(&c, span, strlen(span)) != NULL;
    free(c.text);
    return ok;
}

/* The words a span's start needs from before it (app/answer_span.h), flattened, for an answer answer[0..n) first
 * quotable in c, a span of text: NULL when none (or out of memory). */
static char *lead_words(const constraint *c, const char *text, const char *answer, size_t n) {
    const char *at = constraint_find(c, answer, n);
    if (!at) return NULL;
    size_t s = (size_t)(at - c->text), e = s + n;
    const size_t s0 = s;
    cq_span_keep_qualifiers(text, strlen(text), &s, &e);
    return s < s0 ? flatten(text + s, s0 - s) : NULL;
}

/* Length of the longest prefix of s[0..n) made of whole UTF-8 characters. */
static size_t whole_chars(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (i + len > n) break;
        i += len;
    }
    return i;
}

/* The answer with the negation the question gives one of its words put back, when a shown clause says it so
 * (malloc'd; its clause in *which), or NULL. "什么情况下可以签无固定期限劳动合同？" read "…可以订立" and then took
 * "固定期限劳动合同" from 第十三条, the next shown clause that continued so, while 第十四条 says "…可以订立无固定期限
 * 劳动合同": copy-constrained decoding lets a span slip into a look-alike clause one token at a time. Only a word of
 * the question that follows 无, 非, 不 or 未 there, two characters or more, found in the answer without it. */
static char *with_questions_negation(const char *question, const constraint *con, size_t n_con, const char *ans,
                                     size_t n, size_t *which) {
    static const char *const neg[] = {"无", "非", "不", "未"};
    const size_t qn = strlen(question);
    for (size_t i = 0; i + 3 < qn; i++) {
        size_t k = 0;
        while (k < sizeof neg / sizeof *neg && memcmp(question + i, neg[k], 3)) k++;
        if (k == sizeof neg / sizeof *neg) continue;
        /* the longest word after it (2-8 characters) that the answer holds without the negation before it */
        const char *w = question + i + 3;
        for (size_t chars = 8; chars >= 2; chars--) {
            const size_t wl = prefix_bytes(w, chars);
            if (cq_utf8_count(w, wl) != chars || !cq_utf8_valid(w, wl)) continue;
            for (const char *at = memmem(ans, n, w, wl); at; at = memmem(at + 1, n - (size_t)(at + 1 - ans), w, wl)) {
                if (at >= ans + 3 && !memcmp(at - 3, neg[k], 3)) continue;
                cq_strbuf b = {0};
                cq_strbuf_append(&b, ans, (size_t)(at - ans));
                cq_strbuf_puts(&b, neg[k]);
                cq_strbuf_append(&b, at, n - (size_t)(at - ans));
                for (size_t c = 0; !b.failed && c < n_con; c++)
                    if (constraint_find(&con[c], b.data, b.len)) {
                        *which = c;
                        return cq_strbuf_take(&b);
                    }
                cq_strbuf_free(&b);
                break;
            }
        }
    }
    return NULL;
}

/* n without the commas, colons, semicolons and spaces that end s[0..n): at the end of an answer they say nothing. */
static size_t without_dangling(const char *s, size_t n) {
    static const char *const dangling[] = {" ", ",", "，", "、", "；", "："};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof dangling / sizeof *dangling; i++) {
            const size_t l = strlen(dangling[i]);
            if (n >= l && !memcmp(s + n - l, dangling[i], l)) n -= l, again = 1;
        }
    }
    return n;
}

/* The probability of starting the refusal phrase: the softmax mass of the candidate tokens whose text (leading spaces
 * dropped, as the first token's are) begins it. */
static double refusal_start_p(const cq_tokenizer *tok, const cq_top *top, const char *refusal) {
    double p = 0;
    char piece[MAX_PIECE];
    for (int c = 0; c < top->n; c++) {
        size_t n = cq_tokenizer_piece(tok, top->top_ids[c], false, piece, sizeof piece);
        if (n == 0 || n > sizeof piece) continue;
        const char *s = piece;
        while (n && *s == ' ') s++, n--;
        if (n && n <= strlen(refusal) && !memcmp(refusal, s, n)) p += exp((double)top->top_logits[c] - top->lse);
    }
    return p;
}

cq_status cq_gen_answer_run(cq_decoder *d, const cq_query *q, const cq_hits *hits, const cq_gen_answer_options *opt,
                            cq_answer_text_fn on_text, void *user, cq_gen_answer *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    cq_gen_answer_options o = opt ? *opt : (cq_gen_answer_options){0};
    if (!o.max_new_tokens) o.max_new_tokens = DEFAULT_NEW_TOKENS;
    if (o.candidates <= 0) o.candidates = DEFAULT_CANDIDATES;
    if (o.candidates > MAX_CANDIDATES) o.candidates = MAX_CANDIDATES;
    if (!hits->n) return CQ_OK;
    const bool zh = q->lang == CQ_QUERY_ZH;
    const bool trained = cq_decoder_adapter(d) != NULL;
    const char *refusal = cq_gen_answer_refusal(zh);
    const char *const *verdicts = trained ? (zh ? VERDICT_ZH : VERDICT_EN) : NULL;
    if (trained) o.allow_refusal = true; /* the model decides */
    out->trained = trained;
    const cq_tokenizer *tok = cq_decoder_tokenizer(d);
    const int32_t eos = cq_tokenizer_eos(tok), eot = cq_tokenizer_find(tok, "<end_of_turn>");

    size_t *shown = NULL;
    char *prompt = NULL;
    if (trained) {
        cq_prompt_passage *pp = calloc(hits->n, sizeof *pp);
        for (size_t i = 0; pp && i < hits->n; i++) pp[i] = cq_prompt_passage_of(&hits->hits[i]);
        /* the question in the words of the first passage (search/lexicon.h); retrieval and checks keep its own */
        int reword_failed = 0;
        char *asked = pp ? cq_lexicon_reword(q->text, hits->hits[0].text, &reword_failed) : NULL;
        if (asked) CQ_DEBUG("answer: the reader reads '%s' as '%s'", q->text, asked);
        if (pp && !reword_failed) prompt = prompt_answer(asked ? asked : q->text, zh, pp, hits->n, &shown);
        free(asked);
        free(pp);
    } else {
        prompt = cq_gen_answer_prompt(q, hits, o.max_context_chars, &shown);
    }
    constraint *con = calloc(hits->n, sizeof *con);
    /* each step's candidates: the top logits and their log-sum-exp (on the GPU, the logits stay there) */
    const cq_top_request want = {o.candidates, 0, {0}};
    cq_top *top = malloc(sizeof *top);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    cq_decoder_seq *seq = NULL;
    cq_strbuf ans = {0}, sent = {0}; /* the answer so far, the text streamed */
    cq_status rc = prompt && con && top ? CQ_OK : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < hits->n; i++)
        if (shown[i] && !constraint_build(&con[i], &hits->hits[i], shown[i], q->all_terms, q->n_all_terms))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    if (!rc) rc = cq_tokenizer_encode(tok, prompt, strlen(prompt), CQ_TOK_ADD_BOS, &ids, &n_ids, err);
    if (!rc) rc = cq_decoder_seq_new(d, (int32_t)n_ids + o.max_new_tokens + 1, &seq, err);
    double t0 = cq_clock_seconds();
    if (!rc) rc = cq_decoder_eval_top(seq, ids, n_ids, &want, top, err);
    out->prompt_tokens = (int)n_ids;
    out->prefill_ms = cq_clock_ms_since(t0);
    t0 = cq_clock_seconds();

    size_t which = (size_t)-1, streamed = 0;
    double logprob_sum = 0;
    bool stop_by_client = false;
    bool stop = false, allow_refusal = o.allow_refusal;
    for (int step = 0; !rc && !stop && step < o.max_new_tokens; step++) {
        const int nc = top->n;
        const int32_t *cand = top->top_ids;
        int32_t pick = -1;
        double pick_logit = 0;
        char piece[MAX_PIECE];
        if (step == 0 && allow_refusal) {
            out->refusal_p = refusal_start_p(tok, top, refusal);
            if (o.refusal_min_p > 0 && out->refusal_p < o.refusal_min_p) allow_refusal = false;
        }
        for (int c = 0; c < nc && pick < 0; c++) {
            int32_t id = cand[c];
            if (id == eos || id == eot) {
                if (!ans.len) continue; /* an answer is never empty: take the best admissible start instead */
                stop = true;
                break;
            }
            size_t n = cq_tokenizer_piece(tok, id, false, piece, sizeof piece);
            if (n == 0 || n > sizeof piece) continue;
            const char *p = piece;
            if (memchr(p, '\n', n)) { /* the pattern's end of an answer */
                if (!ans.len) continue;
                stop = true;
                break;
            }
            if (ans.len == 0)
                while (n && *p == ' ') p++, n--; /* "Answer: x": the space belongs to the pattern */
            if (!n) continue;
            size_t old = ans.len;
            cq_strbuf_append(&ans, p, n);
            size_t w;
            if (admissible(con, hits->n, allow_refusal ? refusal : NULL, verdicts, ans.data, ans.len, &w)) {
                pick = id;
                pick_logit = top->top_logits[c];
                which = w;
            } else {
                ans.len = old;
                ans.data[old] = 0;
            }
        }
        if (stop || pick < 0) break;
        logprob_sum += pick_logit - top->lse;
        out->new_tokens++;
        /* Stream whole characters of a real answer (never the refusal), once a few tokens show the model is sure
         * enough that the answer will be used: an answer that falls back (min_confidence) is rarely begun on the
         * wire. The rest goes at the end (below). */
        bool sure = out->new_tokens >= STREAM_AFTER_TOKENS &&
                    exp(logprob_sum / out->new_tokens) >= o.min_confidence;
        if (on_text && which < hits->n && sure) {
            /* marks at the end wait for what follows them: an answer that ends there leaves them out */
            size_t ready = without_dangling(ans.data + streamed, whole_chars(ans.data + streamed, ans.len - streamed));
            if (ready && !streamed) { /* a qualifier before the span goes first (answer_span.h) */
                char *lead = lead_words(&con[which], hits->hits[which].text, ans.data, ans.len);
                if (lead && *lead) {
                    if (!on_text(user, lead, strlen(lead))) stop = stop_by_client = true;
                    cq_strbuf_puts(&sent, lead);
                }
                free(lead);
            }
            if (ready && !stop) {
                if (!on_text(user, ans.data + streamed, ready)) stop = stop_by_client = true;
                cq_strbuf_append(&sent, ans.data + streamed, ready);
                streamed += ready;
            }
        }
        if (!stop && which == WHICH_REFUSAL && !strcmp(ans.data, refusal)) break;
        if (!stop) rc = cq_decoder_eval_top(seq, &pick, 1, &want, top, err);
    }
    out->decode_ms = cq_clock_ms_since(t0);
    out->mean_logprob = out->new_tokens ? logprob_sum / out->new_tokens : 0;
    if (!rc && ans.len) {
        if (which == WHICH_REFUSAL) {
            out->refused = !strcmp(ans.data, refusal);
        } else if (which == WHICH_YES || which == WHICH_NO) {
            const int v = which == WHICH_NO;
            if (!strcmp(ans.data, verdicts[v])) { /* a whole verdict word: it cites the first passage */
                out->verdict = v ? "no" : "yes";
                out->clause = 0;
                if (on_text && !stop_by_client && exp(out->mean_logprob) >= o.min_confidence)
                    on_text(user, ans.data, ans.len);
                out->text = cq_strbuf_take(&ans);
            }
        } else {
            ans.len = without_dangling(ans.data, whole_chars(ans.data, ans.len)); /* a byte token may have left half a character */
            ans.data[ans.len] = 0;
            /* The first clause, in rank order, that holds the whole answer. */
            for (size_t i = 0; i < hits->n; i++)
                if (constraint_find(&con[i], ans.data, ans.len)) {
                    which = i;
                    break;
                }
            /* the question's 无/非/不/未 the span dropped, where a clause shown says the span with it */
            char *neg = which < hits->n ? with_questions_negation(q->text, con, hits->n, ans.data, ans.len, &which) : NULL;
            if (neg) {
                ans.len = 0;
                cq_strbuf_puts(&ans, neg);
                free(neg);
            }
            /* the span keeps the negation and limit words at its edges (answer_span.h) */
            const char *at = ans.len && which < hits->n ? constraint_find(&con[which], ans.data, ans.len) : NULL;
            if (at) {
                const char *text = hits->hits[which].text;
                size_t s0 = (size_t)(at - con[which].text), e0 = s0 + ans.len;
                char *ext = cq_span_keep_qualifiers(text, strlen(text), &s0, &e0) ? flatten(text + s0, e0 - s0) : NULL;
                if (ext) {
                    ans.len = 0;
                    cq_strbuf_puts(&ans, ext);
                    free(ext);
                }
            }
            if (ans.len && !ans.failed) {
                /* the rest of the answer, when what was streamed is its start */
                if (on_text && !stop_by_client && sent.len < ans.len && (!sent.len || !memcmp(ans.data, sent.data, sent.len)) &&
                    exp(out->mean_logprob) >= o.min_confidence)
                    on_text(user, ans.data + sent.len, ans.len - sent.len);
                out->text = cq_strbuf_take(&ans);
                out->clause = which;
            }
        }
    }
    cq_strbuf_free(&ans);
    cq_strbuf_free(&sent);
    cq_decoder_seq_free(seq);
    free(ids);
    for (size_t i = 0; con && i < hits->n; i++) free(con[i].text);
    free(con);
    free(top);
    free(shown);
    free(prompt);
    if (rc) cq_gen_answer_free(out);
    return rc;
}
