/* Follow-up questions (app/followup.h): does a question depend on the turn before, and the question completed. */
#include "app/followup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/utf8.h"

#define CP_TIAO 0x6761 /* 条 */
#define WORDS_MAX 96   /* ASCII words of a question looked at (a longer question's later words are not) */

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

static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* Does text[0, end) end with p? */
static bool ends_with(const char *text, size_t end, const char *p) {
    size_t n = strlen(p);
    return end >= n && !memcmp(text + end - n, p, n);
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Does haystack contain needle[0, n), ASCII case ignored? */
static bool contains_nocase(const char *haystack, const char *needle, size_t n) {
    if (!n) return false;
    for (const char *h = haystack; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] && lower(h[i]) == lower(needle[i])) i++;
        if (i == n) return true;
    }
    return false;
}

/* ---- ASCII words ---------------------------------------------------------------------------------------------- */

typedef struct {
    size_t start, end;
} span;

typedef struct {
    const char *text;
    span w[WORDS_MAX];
    size_t n;
} words;

/* The words of text: runs of ASCII letters, an apostrophe inside one kept ("it's" is one word). */
static void words_of(const char *text, words *out) {
    out->text = text;
    out->n = 0;
    for (size_t i = 0; text[i] && out->n < WORDS_MAX;) {
        if (!is_alpha(text[i])) {
            i++;
            continue;
        }
        size_t s = i;
        while (is_alpha(text[i]) || (text[i] == '\'' && is_alpha(text[i + 1]))) i++;
        out->w[out->n++] = (span){s, i};
    }
}

static bool word_is(const words *ws, size_t i, const char *lw) {
    size_t n = ws->w[i].end - ws->w[i].start;
    if (strlen(lw) != n) return false;
    for (size_t k = 0; k < n; k++)
        if (lower(ws->text[ws->w[i].start + k]) != lw[k]) return false;
    return true;
}

static bool word_in(const words *ws, size_t i, const char *const *list) {
    for (; *list; list++)
        if (word_is(ws, i, *list)) return true;
    return false;
}

static bool all_caps(const words *ws, size_t i) {
    if (ws->w[i].end - ws->w[i].start < 2) return false;
    for (size_t k = ws->w[i].start; k < ws->w[i].end; k++)
        if (ws->text[k] < 'A' || ws->text[k] > 'Z') return false;
    return true;
}

/* Does the phrase ("that clause") start at word i? *last: its last word. */
static bool phrase_at(const words *ws, size_t i, const char *phrase, size_t *last) {
    char w[32];
    const char *p = phrase;
    for (size_t k = i;; k++) {
        size_t n = strcspn(p, " ");
        if (k >= ws->n || n >= sizeof w) return false;
        memcpy(w, p, n);
        w[n] = 0;
        if (!word_is(ws, k, w)) return false;
        if (!p[n]) {
            *last = k;
            return true;
        }
        p += n + 1;
    }
}

/* ---- what the question names ---------------------------------------------------------------------------------- */

/* Nouns that name a document: "the contract", "the NDA", "Section 5.2 of the lease". */
static const char *const doc_nouns[] = {
    "contract", "agreement", "nda",       "msa",       "sla",       "mou",     "policy",     "act",
    "law",      "regulation", "regulations", "code",   "handbook",  "lease",   "statute",    "treaty",
    "terms",    "guidelines", "guideline", "rules",    "ordinance", "directive", "charter",  "bylaws",
    "memorandum", "constitution", "license", "licence", "addendum", NULL,
};
/* Words before such a noun that point back at the document discussed ("this agreement")… */
static const char *const back_determiners[] = {"this", "that", "said", "same", "above", "current", "present", NULL};
/* …and words before it that name some document ("the contract", "another policy"). */
static const char *const naming_determiners[] = {"the", "a", "an", "our", "another", "their", "your", "other",
                                                 "my", "new", "of", "in", "under", NULL};

/* Chinese endings of a document's name right before a clause reference: "合同第五条", "民法典第五条". */
static const char *const zh_doc_suffixes[] = {"法典", "条例", "合同", "协议", "办法", "章程", "细则", "准则",
                                              "守则", "公约", "规则", "制度", "规定", "决定", "法律", "法", NULL};
/* Words before such an ending that point back at the document discussed: "该法第五十条", "本合同第三条". */
static const char *const zh_back_determiners[] = {"这部", "这个", "这份", "这一", "那部", "那个", "上述", "前述",
                                                  "该",   "本",   "此",   "这",   NULL};

/* Pronouns for the document discussed before, longest first where one starts another. */
static const char *const zh_doc_pronouns[] = {
    "这部法律", "这部法", "该法律", "该条例", "本条例", "此条例", "该合同", "本合同", "这份合同", "该协议", "本协议",
    "这份协议", "这个文件", "这份文件", "该文件", "该规定", "本规定", "该办法", "本办法", "该法", "本法", "此法",
    NULL,
};
static const char *const en_doc_pronouns[] = {"this document", "that document", "the same document", "the document",
                                              NULL};
/* Pronouns for the clause discussed before. */
static const char *const zh_clause_pronouns[] = {
    "这一条款", "这个条款", "该条款", "此条款", "上述条款", "这一条", "上一条", "这条", "该条", "此条", "本条",
    "这一款", "这款", "该款", "此款", "本款", "这一项", "这项", "该项", "此项", "它", NULL,
};
static const char *const en_clause_pronouns[] = {
    "the same clause", "the same section", "that clause", "this clause", "the clause", "said clause",
    "that section", "this section", "that article", "this article", "that provision", "this provision",
    "the provision", "that paragraph", "this paragraph", "it", "its", NULL,
};
/* "it" is no pronoun for the clause in "is it legal to …", "it is …", "make it …". */
static const char *const it_expletive_before[] = {"is", "was", "make", "makes", "made", "find", NULL};
static const char *const it_expletive_after[] = {"is", "was", "seems", "takes", "possible", NULL};

typedef enum { DOC_NONE = 0, DOC_SAME, DOC_PRONOUN, DOC_OTHER } doc_mention_kind;

typedef struct {
    cq_followup_reason reason;
    doc_mention_kind doc;   /* what the question says about a document */
    span doc_span;          /* DOC_PRONOUN: the pronoun ("该法", "this agreement") */
    bool clause_pronoun;    /* a pronoun for the clause before ("这一条", "it") at pronoun */
    span pronoun;
} analysis;

/* Does a name written in the question (x, n bytes: "劳动法" of 《劳动法》) name the document doc ("劳动法(2018-12-29)")? */
static bool names_doc(const char *x, size_t n, const char *doc) {
    if (!n) return false;
    if (contains_nocase(doc, x, n)) return true;
    size_t base = strcspn(doc, "(（");
    if (!base) return false;
    for (size_t i = 0; i + base <= n; i++)
        if (!memcmp(x + i, doc, base)) return true;
    return false;
}

/* Is a document named by 《…》? DOC_SAME when every one is the document before. */
static doc_mention_kind bracketed_titles(const char *text, const char *doc) {
    doc_mention_kind k = DOC_NONE;
    for (const char *p = strstr(text, "《"); p; p = strstr(p, "《")) {
        p += strlen("《");
        const char *e = strstr(p, "》");
        if (!e) break;
        if (!names_doc(p, (size_t)(e - p), doc)) return DOC_OTHER;
        k = DOC_SAME;
        p = e;
    }
    return k;
}

/* A Chinese document name right before the clause reference ("合同第五条", "该法第五十条"). */
static doc_mention_kind zh_doc_before_ref(const cq_query *q, const char *doc, span *pron) {
    if (q->type == CQ_QUERY_TOPIC || !q->ref.start) return DOC_NONE;
    const char *t = q->text;
    size_t end = q->ref.start;
    while (end && t[end - 1] == ' ') end--;
    if (ends_with(t, end, "的")) end -= strlen("的");
    for (const char *const *s = zh_doc_suffixes; *s; s++) {
        if (!ends_with(t, end, *s)) continue;
        size_t before = end - strlen(*s);
        for (const char *const *d = zh_back_determiners; *d; d++)
            if (ends_with(t, before, *d)) {
                *pron = (span){before - strlen(*d), end};
                return DOC_PRONOUN;
            }
        /* a name ending so: "劳动合同法", or a bare "合同" (the contract) */
        size_t start = before;
        while (start) {
            size_t k = start - 1;
            while (k && ((unsigned char)t[k] & 0xC0) == 0x80) k--;
            size_t len;
            if (!cq_is_cjk(cq_utf8_decode(t + k, start - k, &len)) || has_prefix(t + k, "那") ||
                has_prefix(t + k, "和") || has_prefix(t + k, "的"))
                break;
            start = k;
        }
        if (!names_doc(t + start, end - start, doc)) return DOC_OTHER;
        *pron = (span){start, end}; /* "劳动法第五十条" in a 劳动法 chat: that document */
        return DOC_PRONOUN;
    }
    return DOC_NONE;
}

/* English nouns for documents: "this agreement" points back, "the NDA" names one. */
static doc_mention_kind en_doc_nouns(const words *ws, const char *doc, span *pron) {
    doc_mention_kind k = DOC_NONE;
    for (size_t i = 1; i < ws->n; i++) {
        /* the word before the name: "the NDA", "the Privacy Policy" (capitalised words of the name skipped) */
        size_t d = i - 1;
        while (d > 0 && ws->text[ws->w[d].start] >= 'A' && ws->text[ws->w[d].start] <= 'Z' &&
               !word_in(ws, d, naming_determiners) && !word_in(ws, d, back_determiners))
            d--;
        bool noun = word_in(ws, i, doc_nouns);
        bool acronym = !noun && all_caps(ws, i) && word_in(ws, d, naming_determiners);
        if (!noun && !acronym) continue;
        if (word_in(ws, d, back_determiners)) {
            *pron = (span){ws->w[d].start, ws->w[i].end};
            k = DOC_PRONOUN;
        } else if (word_in(ws, d, naming_determiners) || acronym) {
            /* "the agreement" in a chat about sample-services-agreement is that agreement */
            if (d == i - 1 && names_doc(ws->text + ws->w[i].start, ws->w[i].end - ws->w[i].start, doc)) {
                *pron = (span){ws->w[d].start, ws->w[i].end};
                k = DOC_PRONOUN;
            } else
                return DOC_OTHER;
        }
    }
    return k;
}

/* Where the question says which document it is about. */
static doc_mention_kind doc_mention(const cq_query *q, const cq_followup_context *ctx, const words *ws, span *pron) {
    if (q->n_titles) {
        for (size_t i = 0; i < q->n_titles; i++)
            if (ctx->doc_id && q->titles[i].doc_id == ctx->doc_id) return DOC_SAME;
        return DOC_OTHER;
    }
    doc_mention_kind b = bracketed_titles(q->text, ctx->doc);
    if (b != DOC_NONE) return b;
    doc_mention_kind z = zh_doc_before_ref(q, ctx->doc, pron);
    if (z != DOC_NONE) return z;
    for (size_t i = 0; zh_doc_pronouns[i]; i++) {
        const char *p = strstr(q->text, zh_doc_pronouns[i]);
        if (p) {
            *pron = (span){(size_t)(p - q->text), (size_t)(p - q->text) + strlen(zh_doc_pronouns[i])};
            return DOC_PRONOUN;
        }
    }
    for (size_t i = 0; i < ws->n; i++)
        for (size_t k = 0; en_doc_pronouns[k]; k++) {
            size_t last;
            if (phrase_at(ws, i, en_doc_pronouns[k], &last)) {
                *pron = (span){ws->w[i].start, ws->w[last].end};
                return DOC_PRONOUN;
            }
        }
    return en_doc_nouns(ws, ctx->doc, pron);
}

/* A pronoun for the clause before: "这一条", "该条", "that clause", "it". */
static bool clause_pronoun(const cq_query *q, const words *ws, span *out, bool *is_it) {
    const char *t = q->text;
    for (const char *p = t; *p;) {
        for (size_t i = 0; zh_clause_pronouns[i]; i++) {
            if (!has_prefix(p, zh_clause_pronouns[i])) continue;
            if (!strcmp(zh_clause_pronouns[i], "它") && p > t && ends_with(t, (size_t)(p - t), "其")) continue;
            if (has_prefix(p, "该条例") || has_prefix(p, "本条例") || has_prefix(p, "此条例")) continue;
            *out = (span){(size_t)(p - t), (size_t)(p - t) + strlen(zh_clause_pronouns[i])};
            *is_it = !strcmp(zh_clause_pronouns[i], "它");
            return true;
        }
        size_t len;
        cq_utf8_decode(p, strlen(p), &len);
        p += len ? len : 1;
    }
    for (size_t i = 0; i < ws->n; i++)
        for (size_t k = 0; en_clause_pronouns[k]; k++) {
            size_t last;
            if (!phrase_at(ws, i, en_clause_pronouns[k], &last)) continue;
            bool it = word_is(ws, i, "it");
            if (it && ((i > 0 && word_in(ws, i - 1, it_expletive_before)) ||
                       (i + 1 < ws->n && word_in(ws, i + 1, it_expletive_after))))
                continue;
            *out = (span){ws->w[i].start, ws->w[last].end};
            *is_it = it || word_is(ws, i, "its");
            return true;
        }
    return false;
}

/* ---- elliptical questions ------------------------------------------------------------------------------------- */

static const char *const zh_fillers[] = {"那么", "那", "还有", "另外", "以及", "再看", "看看", "和", "呢", "吗", NULL};
static const char *const en_fillers[] = {"and", "what", "about", "how", "then", "also", "so", "now", "or", "next",
                                         "ok", "okay", NULL};

/* Only fillers, spaces and punctuation in text[from, to)? */
static bool only_fillers(const char *t, size_t from, size_t to) {
    words ws;
    size_t i = from;
    while (i < to) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x80 && !is_alpha((char)c)) {
            i++;
            continue;
        }
        if (c < 0x80) { /* an English word */
            size_t e = i;
            while (e < to && (is_alpha(t[e]) || t[e] == '\'')) e++;
            char w[24];
            size_t n = e - i < sizeof w - 1 ? e - i : sizeof w - 1;
            memcpy(w, t + i, n);
            w[n] = 0;
            words_of(w, &ws);
            if (ws.n != 1 || !word_in(&ws, 0, en_fillers)) return false;
            i = e;
            continue;
        }
        size_t len;
        uint32_t cp = cq_utf8_decode(t + i, to - i, &len);
        if (!len) return false;
        if (cq_is_cjk_punct(cp) || cp == 0xFF1F || cp == 0xFF01 || cp == 0x3000) {
            i += len;
            continue;
        }
        bool filler = false;
        for (size_t k = 0; zh_fillers[k] && !filler; k++)
            if (to - i >= strlen(zh_fillers[k]) && has_prefix(t + i, zh_fillers[k])) {
                i += strlen(zh_fillers[k]);
                filler = true;
            }
        if (!filler) return false;
    }
    return true;
}

/* "第五十条呢？", "那第五十条的罚则呢", "And Section 7.2?", "What about §3?": the reference with fillers only, or a
 * Chinese question ending in 呢 (its subject left to the turn before). */
static bool elliptical(const cq_query *q) {
    const char *t = q->text;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '?' || t[n - 1] == '.' || t[n - 1] == '!')) n--;
    while (ends_with(t, n, "？") || ends_with(t, n, "。") || ends_with(t, n, "！")) n -= strlen("？");
    if (ends_with(t, n, "呢")) return true;
    return only_fillers(t, 0, q->ref.start) && only_fillers(t, q->ref.end, strlen(t));
}

/* Are the question's reference and the clause before written the same way (第…条 / "Section …")? -1: unknown. */
static int same_style(const cq_query *q, const char *clause) {
    if (!clause || !clause[0]) return -1;
    const char *r = q->text + q->ref.start;
    bool qz = has_prefix(r, "第"), cz = has_prefix(clause, "第");
    if (qz || cz) return qz == cz;
    size_t i = 0;
    while (is_alpha(r[i]) && is_alpha(clause[i]) && lower(r[i]) == lower(clause[i])) i++;
    return !is_alpha(r[i]) && !is_alpha(clause[i]);
}

static void analyse(const cq_query *q, const cq_followup_context *ctx, analysis *a) {
    memset(a, 0, sizeof *a);
    if (!q || !q->text || !ctx || !ctx->doc || !ctx->doc[0]) return;
    words ws;
    words_of(q->text, &ws);
    a->doc = doc_mention(q, ctx, &ws, &a->doc_span);
    if (a->doc == DOC_OTHER) {
        a->reason = CQ_FOLLOWUP_OTHER_DOCUMENT;
        return;
    }
    bool is_it = false;
    switch (q->type) {
    case CQ_QUERY_PARAGRAPH:
        if (is_article_label(ctx->clause)) a->reason = CQ_FOLLOWUP_PARAGRAPH;
        return;
    case CQ_QUERY_CLAUSE: {
        if (a->doc == DOC_SAME) return; /* it names its document: complete as it is */
        if (a->doc == DOC_PRONOUN) {
            a->reason = CQ_FOLLOWUP_PRONOUN;
            return;
        }
        int has = ctx->has_clause ? ctx->has_clause(ctx->arg, &q->ref) : -1;
        int style = same_style(q, ctx->clause);
        bool same_lang = (q->lang == CQ_QUERY_ZH) == cq_utf8_has_cjk(ctx->doc);
        if (elliptical(q)) {
            if (has == 1 || (has < 0 && style != 0)) a->reason = CQ_FOLLOWUP_ELLIPTICAL;
        } else if (same_lang && (has == 1 || (has < 0 && style == 1)))
            a->reason = CQ_FOLLOWUP_BARE_CLAUSE;
        return;
    }
    case CQ_QUERY_TOPIC:
        if (a->doc == DOC_PRONOUN) a->reason = CQ_FOLLOWUP_PRONOUN;
        else if (clause_pronoun(q, &ws, &a->pronoun, &is_it) && (is_it || (ctx->clause && ctx->clause[0]))) {
            a->clause_pronoun = true;
            a->reason = CQ_FOLLOWUP_PRONOUN;
        }
        return;
    }
}

cq_followup_reason cq_followup_classify(const cq_query *q, const cq_followup_context *ctx) {
    analysis a;
    analyse(q, ctx, &a);
    return a.reason;
}

bool cq_followup_may_depend(const cq_query *q) {
    if (!q || !q->text) return false;
    if (q->type != CQ_QUERY_TOPIC) return true;
    /* a context that every document noun, 《》 title and pronoun of the question can point at */
    cq_followup_context any = {q->text, "第一条", q->n_titles ? q->titles[0].doc_id : 0, NULL, NULL};
    cq_followup_reason r = cq_followup_classify(q, &any);
    return r != CQ_FOLLOWUP_STANDS && r != CQ_FOLLOWUP_OTHER_DOCUMENT;
}

const char *cq_followup_reason_name(cq_followup_reason r) {
    switch (r) {
    case CQ_FOLLOWUP_STANDS: return "stands";
    case CQ_FOLLOWUP_OTHER_DOCUMENT: return "other_document";
    case CQ_FOLLOWUP_PARAGRAPH: return "paragraph";
    case CQ_FOLLOWUP_ELLIPTICAL: return "elliptical";
    case CQ_FOLLOWUP_PRONOUN: return "pronoun";
    case CQ_FOLLOWUP_BARE_CLAUSE: return "bare_clause";
    }
    return "stands";
}

/* ---- the rewrite ---------------------------------------------------------------------------------------------- */

/* What stands for the document (and clause) in a question: "《劳动法(2018-12-29)》第四十四条", "doc Section 5.2". */
static void put_reference(cq_strbuf *b, const char *doc, const char *clause) {
    if (cq_utf8_has_cjk(doc)) cq_strbuf_printf(b, "《%s》%s", doc, clause ? clause : "");
    else cq_strbuf_printf(b, "%s%s%s", doc, clause ? " " : "", clause ? clause : "");
}

/* text with text[start, end) replaced by the reference (doc, clause); an insertion when start == end. */
static char *splice(const char *text, size_t start, size_t end, const char *doc, const char *clause) {
    cq_strbuf b = {0};
    bool cjk = cq_utf8_has_cjk(doc ? doc : clause);
    cq_strbuf_append(&b, text, start);
    if (!cjk && start && text[start - 1] != ' ') cq_strbuf_puts(&b, " ");
    if (doc) put_reference(&b, doc, clause);
    else cq_strbuf_puts(&b, clause);
    if (!cjk && start == end && text[end] && text[end] != ' ') cq_strbuf_puts(&b, " ");
    cq_strbuf_puts(&b, text + end);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

char *cq_followup_resolve(const cq_query *q, const cq_followup_context *ctx) {
    analysis a;
    analyse(q, ctx, &a);
    const char *clause = ctx && ctx->clause && ctx->clause[0] ? ctx->clause : NULL;
    switch (a.reason) {
    case CQ_FOLLOWUP_STANDS:
    case CQ_FOLLOWUP_OTHER_DOCUMENT: return NULL;
    case CQ_FOLLOWUP_PARAGRAPH:
        /* the question names the document already: only the article goes in */
        if (a.doc == DOC_SAME) return splice(q->text, q->ref.start, q->ref.start, NULL, clause);
        return splice(q->text, q->ref.start, q->ref.start, ctx->doc, clause);
    case CQ_FOLLOWUP_ELLIPTICAL:
    case CQ_FOLLOWUP_BARE_CLAUSE: return splice(q->text, q->ref.start, q->ref.start, ctx->doc, NULL);
    case CQ_FOLLOWUP_PRONOUN:
        if (q->type == CQ_QUERY_CLAUSE) return splice(q->text, q->ref.start, q->ref.start, ctx->doc, NULL);
        if (a.clause_pronoun) return splice(q->text, a.pronoun.start, a.pronoun.end, ctx->doc, clause);
        return splice(q->text, a.doc_span.start, a.doc_span.end, ctx->doc, NULL);
    }
    return NULL;
}
