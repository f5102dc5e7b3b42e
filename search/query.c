/* The query value (search/query.h): a question's reference, type, language, terms and named documents. */
#define _GNU_SOURCE /* strcasestr */
#include "search/query.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "search/lexicon.h"
#include "store/bm25.h"
#include "store/fts_cjk.h"
#include "store/router_rows.h"

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
    (void)start, (void)end;
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

static void terms_free(char **terms, size_t n) {
    for (size_t i = 0; i < n; i++) free(terms[i]);
    free(terms);
}

/* The query terms of text as the BM25 retriever uses them (question words and stop words removed, deduplicated);
 * -1 (and none) when out of memory. */
static int terms_of(const char *text, char ***terms, size_t *n) {
    term_list l = {0};
    cq_fts_cjk_tokenize(text, strlen(text), CQ_FTS_CJK_QUERY, collect_term, &l);
    if (l.failed) terms_free(l.terms, l.n);
    *terms = l.failed ? NULL : l.terms;
    *n = l.failed ? 0 : l.n;
    return l.failed ? -1 : 0;
}

/* The BM25 terms of q's expansion (the lexicon's statutory phrases) that its own terms lack. */
static int expansion_terms(cq_query *q) {
    char **all = NULL;
    size_t n = 0;
    if (terms_of(q->expansion, &all, &n)) return -1;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        int dup = 0;
        for (size_t j = 0; j < q->n_terms && !dup; j++) dup = !strcmp(all[i], q->terms[j]);
        if (dup) free(all[i]);
        else all[kept++] = all[i];
    }
    q->exp_terms = all;
    q->n_exp_terms = kept;
    return 0;
}

/* ---- references --------------------------------------------------------------------------------------------- */

#define CP_KUAN 0x6B3E  /* 款 */
#define CP_XIANG 0x9879 /* 项 */

/* "第<number>款" or "第<number>项" at s (and a 项 right after a 款): its length in bytes, 0 when s does not start
 * with one. */
static size_t paragraph_ref_at(const char *s) {
    if (strncmp(s, "第", 3)) return 0;
    size_t used;
    if (cq_number_parse_ref(s + 3, strlen(s + 3), &used) <= 0) return 0;
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

/* ---- names the KB lacks ------------------------------------------------------------------------------------ */

#define MAX_NAMES 12
#define NAME_BYTES 96

typedef struct {
    char word[NAME_BYTES];
    size_t run; /* words of one run of capitalised words ("Hochschule Furtwangen University") share it */
} name_word;

static bool name_char(unsigned char c) { return isalnum(c) || c == '_' || c == '-' || c == '&'; }

/* Capitalised words that name no party or document: a clause's place ("Article 44", "Section 7.2") and dates. */
static bool is_common_capital(const char *w, size_t len) {
    static const char *const common[] = {
        "Article", "Articles", "Section", "Sections", "Chapter", "Part", "Clause", "Clauses", "Paragraph", "Item",
        "Schedule", "Annex", "Appendix", "Exhibit", "January", "February", "March", "April", "May", "June", "July",
        "August", "September", "October", "November", "December", "Monday", "Tuesday", "Wednesday", "Thursday",
        "Friday", "Saturday", "Sunday"};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (strlen(common[i]) == len && !strncasecmp(common[i], w, len)) return true;
    return false;
}

/* An English question's proper names: words with a capital letter that neither begin a sentence nor stand inside
 * quotes, a possessive 's left out, grouped in runs of such words that only spaces part ("Consider FNHA's
 * Non-Disclosure Agreement; Does the document …" → [FNHA] [Non-Disclosure Agreement]; "between Hochschule Furtwangen
 * University and Thesis Participants" → [Hochschule Furtwangen University] [Thesis Participants]; "related to
 * \"Document Name\"" gives none). At most max words, each shorter than NAME_BYTES. */
static size_t names_of(const char *q, name_word *out, size_t max) {
    size_t n = 0, run = 0;
    bool sentence_start = true, quoted = false, in_run = false;
    for (size_t i = 0; q[i] && n < max;) {
        const unsigned char c = (unsigned char)q[i];
        if (c == '"' || !strncmp(q + i, "\xe2\x80\x9c", 3) || !strncmp(q + i, "\xe2\x80\x9d", 3)) { /* " “ ” */
            quoted = c == '"' ? !quoted : (unsigned char)q[i + 2] == 0x9c;
            i += c == '"' ? 1 : 3;
            in_run = false;
        } else if (name_char(c)) {
            size_t j = i, upper = 0;
            while (name_char((unsigned char)q[j])) upper += isupper((unsigned char)q[j++]) != 0;
            const size_t end = j;
            while (j > i && q[j - 1] == '-') j--; /* "Mutual-" of a line break */
            if (upper && !sentence_start && !quoted && j - i >= 2 && j - i < NAME_BYTES &&
                !is_common_capital(q + i, j - i)) {
                if (!in_run) run++;
                memcpy(out[n].word, q + i, j - i);
                out[n].word[j - i] = 0;
                out[n++].run = run;
                in_run = q[end] == ' ';
            } else {
                in_run = false;
            }
            sentence_start = false;
            i = end;
        } else {
            if (strchr(".?!;:", c)) sentence_start = true;
            if (c != ' ') in_run = false;
            i++;
        }
    }
    return n;
}

/* Whether a word ends or begins between a and b: either is no letter or digit, or digits follow letters ("SWA2019") or letters
 * digits ("_20SWA": a URL's escaped space), or a capital a small letter ("Sqiller|BetaTesters"). */
static bool word_break(unsigned char a, unsigned char b) {
    return !isalnum(a) || !isalnum(b) || (isalpha(a) && isdigit(b)) || (isdigit(a) && isalpha(b)) || (islower(a) && isupper(b));
}

/* Whether word is in hay as a whole word (word_break), case aside: "JB" is not in "JBF_NDA", "Sqiller" is in
 * "NDA-SqillerBetaTesters", "SWA" in "Model_20NDA_20(recommended_20by_20SWA)" (documents' file names). */
static bool has_word(const char *hay, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = hay ? strcasestr(hay, word) : NULL; p; p = strcasestr(p + 1, word))
        if ((p == hay || word_break((unsigned char)p[-1], (unsigned char)p[0])) &&
            word_break((unsigned char)p[n - 1], (unsigned char)p[n]))
            return true;
    return false;
}

/* The KB's documents, read only when a word is in no clause (most names are: their file names need not be read). */
typedef struct {
    cq_doc_info *docs;
    size_t n;
    bool read;
} kb_docs;

/* Whether KB kb_id holds word: each of its terms with a letter in some clause (the keyword index: "Non-Disclosure" is
 * the terms non, disclosure), or the word in a document's name or title. */
static cq_status kb_holds(cq_store *s, int64_t kb_id, const char *word, kb_docs *docs, bool *holds, cq_err *err) {
    *holds = true;
    char **terms = NULL;
    size_t n_terms = 0;
    if (terms_of(word, &terms, &n_terms)) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    cq_status rc = CQ_OK;
    for (size_t t = 0; t < n_terms && *holds && !rc; t++) {
        bool letter = false;
        for (const char *p = terms[t]; *p; p++) letter |= isalpha((unsigned char)*p) != 0;
        if (!letter) continue;
        const char *one[1] = {terms[t]};
        cq_bm25_hit hit;
        int64_t doc;
        size_t found = 0;
        rc = cq_store_keyword_bm25(s, kb_id, one, 1, NULL, 0, 1, &hit, &doc, &found, err);
        if (!rc && !found) *holds = false;
    }
    terms_free(terms, n_terms);
    if (rc || *holds) return rc;
    if (!docs->read && !(rc = cq_store_doc_list(s, kb_id, &docs->docs, &docs->n, err))) docs->read = true;
    for (size_t d = 0; d < docs->n && !rc && !*holds; d++)
        *holds = has_word(docs->docs[d].name, word) || has_word(docs->docs[d].title, word);
    return rc;
}

/* A Chinese question's 《titles》 that KB kb_id holds nowhere: no document's name or title matches it (the router's
 * title variants: 《公司法》 is 中华人民共和国公司法, 《数字经济促进条例》 广东省数字经济促进条例) and no clause quotes it
 * (《请您监督》专栏 of a news text). Only when every title the question names is missing, into q->absent_name as
 * "《…》": 根据《铁路法》、《铁路客运运价规则》… with 铁路法 in the KB is answered. */
static cq_status find_absent_titles(cq_store *s, int64_t kb_id, cq_query *q, cq_err *err) {
    static const char open[] = "\xe3\x80\x8a", close[] = "\xe3\x80\x8b"; /* 《 》 */
    const char *first = NULL;
    size_t first_len = 0, named = 0;
    cq_status rc = CQ_OK;
    for (const char *p = strstr(q->text, open); p && !rc; p = strstr(p, open)) {
        const char *a = p + 3, *b = strstr(a, close);
        if (!b) break;
        p = b + 3;
        if (b == a || b - a > 200) continue;
        char title[208];
        memcpy(title, a, (size_t)(b - a));
        title[b - a] = 0;
        cq_title_match m[1];
        size_t n = 0;
        rc = cq_router_titles(s, kb_id, title, m, 1, &n, err);
        const char *one[1] = {title};
        cq_bm25_hit hit;
        int64_t doc;
        if (!rc && !n) rc = cq_store_keyword_bm25(s, kb_id, one, 1, NULL, 0, 1, &hit, &doc, &n, err);
        if (rc || n) return rc; /* one title held: the question is about the KB's documents */
        if (!named++) {
            first = a - 3; /* 《title》 */
            first_len = (size_t)(b - a) + 6;
        }
    }
    if (!rc && named && !(q->absent_name = strndup(first, first_len))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    return rc;
}

/* The first run of the question's proper names (names_of) of which KB kb_id holds no word, into q->absent_name
 * (the run's words): one word held is enough ("Hochschule Furtwangen University" of a document that says "Furtwangen
 * University"; "Industry Analysts" of one that says "Industry Analyst"). */
static cq_status find_absent_name(cq_store *s, int64_t kb_id, cq_query *q, cq_err *err) {
    name_word words[MAX_NAMES];
    const size_t n = names_of(q->text, words, MAX_NAMES);
    kb_docs docs = {NULL, 0, false};
    cq_status rc = CQ_OK;
    for (size_t i = 0; i < n && !rc && !q->absent_name;) {
        size_t j = i;
        bool held = false;
        for (; j < n && words[j].run == words[i].run; j++)
            if (!held && !rc) rc = kb_holds(s, kb_id, words[j].word, &docs, &held, err);
        if (!rc && !held) {
            cq_strbuf b = {0};
            for (size_t k = i; k < j; k++) cq_strbuf_printf(&b, "%s%s", k > i ? " " : "", words[k].word);
            if (!(q->absent_name = cq_strbuf_take(&b))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        }
        i = j;
    }
    cq_doc_info_free_array(docs.docs, docs.n);
    return rc;
}

/* Words of an English question that frame it rather than say what it is about: a contract question's "clause",
 * "party", "agreement", a request's "highlight", "mention". Not checked by find_absent_words. */
static const char *const frame_words[] = {
    "clause", "clauses", "section", "sections", "article", "articles", "provision", "provisions", "contract",
    "contracts", "agreement", "agreements", "document", "documents", "party", "parties", "either", "each", "can",
    "could", "would", "should", "must", "will", "have", "has", "had", "about", "mention", "mentions", "state",
    "states", "say", "says", "indicate", "indicates", "allow", "allows", "permit", "permits", "include", "includes",
    "specify", "specifies", "require", "requires", "highlight", "parts", "part", "related", "reviewed", "lawyer",
    "details", "consider", "some", "their", "they", "them", "even", "upon", "without", "here", "when", "where",
    "why", "whether", "other", "between", "you", "your", "our", "all", "also", "been", "being", "both", "get",
    "got", "more", "most", "only", "own", "same", "too", "very", "way", "happens", "happen", "tell", "show", "give",
    "find", "mean", "means", "need", "needs", "regarding", "long", "much", "many", "often",
    /* prefixes a hyphen leaves alone: "non-compete" is about competing */
    "non", "anti", "pre", "post", "sub", "multi", "inter", "self",
};

/* Endings tried after a word's stem, so that "assign" is held by "assignment" and "compete" by "competition". */
static const char *const word_endings[] = {
    "", "e", "s", "es", "ed", "d", "ing", "er", "ers", "or", "ors", "ion", "ions", "ation", "ations", "ition",
    "itions", "itive", "ment", "ments", "able", "ability", "ly", "al", "ive", "ee", "ees", "ity", "ies", "y",
};

/* A word's stem: the longest ending of word_endings removed while three letters remain ("competition" → "compet",
 * "pays" → "pay"). */
size_t cq_query_stem_len(const char *w) {
    const size_t n = strlen(w);
    size_t best = 0;
    for (size_t i = 0; i < sizeof word_endings / sizeof *word_endings; i++) {
        const size_t e = strlen(word_endings[i]);
        if (e > best && n >= e + 3 && !strcmp(w + n - e, word_endings[i])) best = e;
    }
    return n - best;
}

#define MAX_FORMS 256 /* other forms of a question's words searched at most */

/* The other forms of word (its stem with each of word_endings) into forms, those already in terms aside. */
static void word_forms(const char *word, char *const *terms, size_t n_terms, term_list *forms) {
    char form[96];
    const size_t stem = cq_query_stem_len(word);
    for (size_t i = 0; i < sizeof word_endings / sizeof *word_endings && forms->n < MAX_FORMS; i++) {
        snprintf(form, sizeof form, "%.*s%s", (int)stem, word, word_endings[i]);
        bool known = !strcmp(form, word);
        for (size_t t = 0; t < n_terms && !known; t++) known = !strcmp(form, terms[t]);
        for (size_t t = 0; t < forms->n && !known; t++) known = !strcmp(form, forms->terms[t]);
        if (known) continue;
        char *d = strdup(form);
        if (!d || !cq_grow((void **)&forms->terms, &forms->cap, forms->n + 1, sizeof *forms->terms)) {
            free(d);
            forms->failed = 1;
            return;
        }
        forms->terms[forms->n++] = d;
    }
}

bool cq_query_is_word(const char *t) {
    bool word = strlen(t) >= 3 && strlen(t) < 64;
    for (const char *p = t; *p && word; p++) word = islower((unsigned char)*p) != 0;
    return word;
}

/* The other forms of an English question's BM25 terms, into q->form_terms ("invoice", "invoicing" … for
 * "invoices": the keyword index does not stem); the forms no clause holds cost the search nothing. -1 when out of
 * memory. */
static int find_forms(cq_query *q) {
    term_list forms = {0};
    for (size_t i = 0; i < q->n_terms && !forms.failed; i++)
        if (cq_query_is_word(q->terms[i])) word_forms(q->terms[i], q->terms, q->n_terms, &forms);
    if (forms.failed) {
        terms_free(forms.terms, forms.n);
        return -1;
    }
    q->form_terms = forms.terms;
    q->n_form_terms = forms.n;
    return 0;
}

/* An English question's topic words (its BM25 terms of three letters or more, frame_words aside) that no clause of
 * KB kb_id holds in any form (the word or its stem with one of word_endings), into q->absent_words ("assign
 * consent"), when they are more than half of its topic words: "Can either party assign the agreement without
 * consent?" of a services agreement that says neither. */
static cq_status find_absent_words(cq_store *s, int64_t kb_id, cq_query *q, cq_err *err) {
    cq_strbuf b = {0};
    size_t topic = 0, absent = 0;
    cq_status rc = CQ_OK;
    for (size_t i = 0; i < q->n_terms && !rc; i++) {
        const char *t = q->terms[i];
        bool frame = !cq_query_is_word(t);
        for (size_t f = 0; f < sizeof frame_words / sizeof *frame_words && !frame; f++) frame = !strcmp(t, frame_words[f]);
        if (frame) continue;
        topic++;
        term_list forms = {0};
        word_forms(t, NULL, 0, &forms);
        if (!forms.failed && cq_grow((void **)&forms.terms, &forms.cap, forms.n + 1, sizeof *forms.terms))
            forms.terms[forms.n++] = strdup(t); /* freed with the list; NULL (out of memory) checked below */
        bool ok = !forms.failed && forms.n && forms.terms[forms.n - 1];
        cq_bm25_hit hit;
        int64_t doc;
        size_t found = 0;
        rc = ok ? cq_store_keyword_bm25(s, kb_id, (const char *const *)forms.terms, forms.n, NULL, 0, 1, &hit, &doc,
                                        &found, err)
                : cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        terms_free(forms.terms, forms.n);
        if (!rc && !found) cq_strbuf_printf(&b, "%s%s", absent++ ? " " : "", t);
    }
    char *words = cq_strbuf_take(&b);
    if (!rc && absent && absent * 2 > topic) {
        if (!words) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        q->absent_words = words;
        return CQ_OK;
    }
    free(words);
    return rc;
}

/* ---- the query ---------------------------------------------------------------------------------------------- */

void cq_query_free(cq_query *q) {
    if (!q) return;
    free(q->text);
    terms_free(q->terms, q->n_terms);
    terms_free(q->all_terms, q->n_all_terms);
    terms_free(q->exp_terms, q->n_exp_terms);
    terms_free(q->form_terms, q->n_form_terms);
    free(q->absent_name);
    free(q->absent_words);
    free(q->ambiguous);
    free(q->expansion);
    memset(q, 0, sizeof *q);
}

/* A clause reference without a document that several documents of KB kb_id have, not all versions of one
 * regulation (the router resolves those): what to call them, one a line, into q->ambiguous (one name a version
 * group, and a name once: the same title twice would tell the reader nothing). */
static cq_status find_ambiguous(cq_store *s, int64_t kb_id, cq_query *q, cq_err *err) {
    if (q->type != CQ_QUERY_CLAUSE || !q->ref.key[0] || q->n_titles) return CQ_OK;
    enum { MAX_DOCS = 32 };
    cq_store_label_doc docs[MAX_DOCS];
    size_t n = 0, kept = 0;
    const cq_store_label_doc *kept_docs[MAX_DOCS];
    cq_status rc = cq_store_router_docs_with_key(s, kb_id, q->ref.key, docs, MAX_DOCS, &n, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) { /* one name a version group, a name once */
        if (!cq_router_label_fits(&q->ref, docs[i].label)) continue; /* "Section 5" is not 第五条 */
        bool seen = false;
        for (size_t k = 0; k < kept && !seen; k++) seen = cq_router_same_regulation(kept_docs[k], &docs[i]);
        if (!seen) kept_docs[kept++] = &docs[i];
    }
    if (kept > 1) {
        q->n_ambiguous = kept;
        q->ambiguous_more = n == MAX_DOCS;
        cq_strbuf b = {0};
        for (size_t i = 0; i < kept && i < CQ_QUERY_MAX_AMBIGUOUS; i++) cq_strbuf_printf(&b, "%s%s", i ? "\n" : "", kept_docs[i]->name);
        if (!(q->ambiguous = cq_strbuf_finish(&b))) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    cq_store_label_docs_free(docs, n);
    return rc;
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
        int lex_failed = 0;
        out->expansion = failed ? NULL : cq_lexicon_expand(topic, &lex_failed);
        failed |= lex_failed || (out->expansion && expansion_terms(out));
        free(topic);
    }
    failed |= terms_of(question, &out->all_terms, &out->n_all_terms);
    if (!failed && out->lang == CQ_QUERY_EN) failed |= find_forms(out);
    cq_status rc = failed ? cq_err_set(err, CQ_ERR_NOMEM, "out of memory") : CQ_OK;
    if (!rc && s) {
        out->kb_id = kb_id;
        rc = cq_router_titles(s, kb_id, question, out->titles, CQ_QUERY_MAX_TITLES, &out->n_titles, err);
        if (!rc && kb_id)
            rc = out->lang == CQ_QUERY_EN ? find_absent_name(s, kb_id, out, err) : find_absent_titles(s, kb_id, out, err);
        if (!rc && kb_id && out->lang == CQ_QUERY_EN && !out->absent_name) rc = find_absent_words(s, kb_id, out, err);
        if (!rc && kb_id && !out->absent_name) rc = find_ambiguous(s, kb_id, out, err);
    }
    if (rc) cq_query_free(out);
    return rc;
}

void cq_query_set_as_of(cq_query *q, cq_date day) {
    q->as_of = q->as_of_first = day;
    q->version_year = 0;
}
