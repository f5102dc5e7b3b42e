#include "search/router.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "store/store_internal.h"
#include "store/router_rows.h"

/* ---- parsing ------------------------------------------------------------------------------------------------ */

static const char *skip_spaces(const char *p) {
    for (;;) {
        size_t len;
        uint32_t cp = cq_utf8_decode(p, strlen(p), &len);
        if (!cp || !cq_is_space(cp)) return p;
        p += len;
    }
}

/* "第" number unit: returns the number and sets *unit_cp to the unit character (条 章 节 编 款 项), *end after it. */
static long parse_di(const char *p, uint32_t *unit_cp, const char **end) {
    static const char di[] = "第";
    if (strncmp(p, di, sizeof di - 1) != 0) return -1;
    const char *q = skip_spaces(p + sizeof di - 1);
    size_t used;
    long v = cq_number_parse_ref(q, strlen(q), &used);
    if (v <= 0) return -1;
    q = skip_spaces(q + used);
    size_t len;
    uint32_t cp = cq_utf8_decode(q, strlen(q), &len);
    if (cp != 0x6761 && cp != 0x7AE0 && cp != 0x8282 && cp != 0x7F16 && cp != 0x6B3E && cp != 0x9879) return -1;
    *unit_cp = cp;
    *end = q + len;
    return v;
}

/* English: Article 5 / ARTICLE IV / Art. 5 / Section 7.2 / Sec. 7.2(a) / Clause 4.1 / § 3 */
static int parse_english(const char *q, const char *p, cq_clause_ref *ref) {
    static const char *words[] = {"article", "art.", "section", "sec.", "clause", "§"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t wl = strlen(words[w]);
        if (strncasecmp(p, words[w], wl) != 0) continue;
        if (p > q && isalpha((unsigned char)p[-1])) continue;
        const char *s = p + wl;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = 0;
        char key[32];
        if (isdigit((unsigned char)*s)) {
            while (n < sizeof key - 1 && (isdigit((unsigned char)s[n]) || (s[n] == '.' && isdigit((unsigned char)s[n + 1]))))
                n++;
            memcpy(key, s, n);
            key[n] = 0;
        } else {
            long r = cq_roman_parse(s, strlen(s), &n);
            if (r <= 0 || isalpha((unsigned char)s[n])) continue;
            snprintf(key, sizeof key, "%ld", r);
        }
        snprintf(ref->key, sizeof ref->key, "%s", key);
        ref->latin = true;
        ref->article = atol(key);
        ref->start = (size_t)(p - q);
        ref->end = (size_t)(s + n - q);
        return 1;
    }
    return 0;
}

int cq_router_parse(const char *question, cq_clause_ref *ref) {
    memset(ref, 0, sizeof *ref);
    int found = 0;
    for (const char *p = question; *p;) {
        uint32_t unit;
        const char *end;
        long v = parse_di(p, &unit, &end);
        if (v <= 0) {
            if (ref->article) break; /* the first article reference and what directly follows it (款, 项) */
            size_t len;
            cq_utf8_decode(p, strlen(p), &len);
            p += len;
            continue;
        }
        if (unit == 0x6761 && ref->article) break; /* a second article: keep the first */
        if (!found) ref->start = (size_t)(p - question);
        found = 1;
        switch (unit) {
        case 0x7F16: ref->part = v; break;      /* 编 */
        case 0x7AE0: ref->chapter = v; break;   /* 章 */
        case 0x8282: ref->section = v; break;   /* 节 */
        case 0x6B3E: ref->paragraph = v; break; /* 款 */
        case 0x9879: ref->item = v; break;      /* 项 */
        default:                                /* 条, maybe 之一 */
            ref->article = v;
            if (!strncmp(end, "之", 3)) {
                size_t used;
                long sub = cq_number_parse(end + 3, strlen(end + 3), &used);
                if (sub > 0) {
                    ref->article_sub = sub;
                    end += 3 + used;
                }
            }
        }
        ref->end = (size_t)(end - question);
        p = end;
    }
    if (ref->article) {
        if (ref->article_sub) snprintf(ref->key, sizeof ref->key, "%ld-%ld", ref->article, ref->article_sub);
        else snprintf(ref->key, sizeof ref->key, "%ld", ref->article);
        return 1;
    }
    if (ref->chapter || ref->section || ref->part) return 1;
    memset(ref, 0, sizeof *ref);
    for (const char *p = question; *p; p++)
        if (parse_english(question, p, ref)) return 1;
    return 0;
}

/* ---- titles ------------------------------------------------------------------------------------------------- */

typedef struct {
    int64_t doc_id;
    char *key;          /* folded title variant */
    int chars;          /* its length in characters */
    int weak;           /* 1 for variants that drop information (province prefix, base name of a part) */
    int generic;        /* the same text names documents of three or more different names: identifies none */
    long date;          /* yyyymmdd from the file name, 0 when unknown */
    uint64_t name_hash; /* of the document's name without date: versions of one law share it */
} title_variant;

typedef struct {
    int64_t doc_id;
    char word[40];
    int df; /* documents whose name has this word */
} name_word;

typedef struct {
    int64_t kb_id;
    int64_t n_docs, max_doc_id;
    title_variant *v;
    size_t n, cap;
    int64_t single_doc; /* the only ready document of the KB, else 0 */
    /* Words of Latin-script file names ("CopAcc_NDA-and-ToP-Mentors_2.0_2017" → copacc nda top mentors), grouped
     * by document, with how many documents' names have each word. */
    name_word *words;
    size_t n_words, cap_words;
} router_cache;

void cq_router_cache_free(void *p) {
    router_cache *c = p;
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->v[i].key);
    free(c->v);
    free(c->words);
    free(c);
}

/* Folds for title matching: NFKC + case fold, white space, brackets and quotes removed. */
static char *title_fold(const char *s) {
    char *k = cq_text_norm_key(s, strlen(s));
    if (!k) return NULL;
    size_t n = strlen(k), i = 0, o = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(k + i, n - i, &len);
        /* Brackets and quotes around or inside titles are not said in questions: 《》〈〉<>“”"()[] (the fold has
         * already made full-width （） ASCII). "宪法修正案（2004年）" is asked as "宪法修正案2004年". */
        int drop = cp == 0x300A || cp == 0x300B || cp == 0x3008 || cp == 0x3009 || cp == '<' || cp == '>' ||
                   cp == 0x201C || cp == 0x201D || cp == '"' || cp == '(' || cp == ')' || cp == '[' || cp == ']';
        if (!drop) {
            memmove(k + o, k + i, len);
            o += len;
        }
        i += len;
    }
    k[o] = 0;
    return k;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void add_variant(router_cache *c, int64_t doc_id, const char *text, int weak, long date, uint64_t name_hash) {
    char *k = title_fold(text);
    if (!k) return;
    int chars = (int)cq_utf8_count(k, strlen(k));
    size_t len;
    /* Folding drops spaces, so a short Latin key would match inside unrelated words ("confidential" inside
     * "...the confidential information"): Latin names and titles match literally only when long (a full file
     * name); shorter ones are matched word by word (match_name_words). */
    bool keep = chars >= (cq_is_cjk(cq_utf8_decode(k, strlen(k), &len)) ? 2 : 16);
    for (size_t i = c->n; keep && i > 0 && c->v[i - 1].doc_id == doc_id; i--)
        if (!strcmp(c->v[i - 1].key, k)) { /* known: the strong one stays strong */
            if (!weak) c->v[i - 1].weak = 0;
            keep = false;
        }
    if (keep && cq_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v))
        c->v[c->n++] = (title_variant){doc_id, k, chars, weak, 0, date, name_hash};
    else
        free(k);
}

/* Drops a leading administrative prefix: 上海市 / 广东省 / 内蒙古自治区 / 延边朝鲜族自治州 ... */
static const char *after_admin_prefix(const char *s) {
    static const char *suffixes[] = {"自治区", "自治州", "自治县", "省", "市", "县"};
    const char *p = s;
    for (int chars = 0; chars < 9 && *p; chars++) {
        size_t len;
        cq_utf8_decode(p, strlen(p), &len);
        p += len;
        if (chars < 1) continue;
        for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
            size_t sl = strlen(suffixes[k]);
            if ((size_t)(p - s) >= sl && !strncmp(p - sl, suffixes[k], sl) && cq_utf8_count(p, strlen(p)) >= 4)
                return p;
        }
    }
    return NULL;
}

int cq_router_local_place(const char *name, char *place, size_t cap) {
    const char *rest = after_admin_prefix(name);
    if (!rest) return 0;
    size_t n = (size_t)(rest - name);
    if (n >= cap) n = cap - 1;
    memcpy(place, name, n);
    place[n] = 0;
    return 1;
}

/* Name "公司法(2018-10-26)" or "广告法(2021-04-29)_经济法": base name without the date group, and the date. */
static char *name_base(const char *name, long *date) {
    *date = 0;
    char *out = malloc(strlen(name) + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = name; *p;) {
        if (*p == '(') {
            const char *close = strchr(p, ')');
            if (close) {
                int y, m, d;
                if (sscanf(p + 1, "%4d-%2d-%2d", &y, &m, &d) == 3) *date = (long)y * 10000 + m * 100 + d;
                p = close + 1;
                continue;
            }
        }
        out[o++] = *p++;
    }
    out[o] = 0;
    return out;
}

static void add_doc_variants(router_cache *c, int64_t doc_id, const char *name, const char *title) {
    long date;
    char *base = name_base(name, &date);
    if (!base) return;
    /* The family a document belongs to: its name without date, and for Chinese names without the part after
     * '_' (民法典_合同编 and 民法典_物权编 are parts of one code). */
    size_t len;
    char *us = strchr(base, '_');
    if (us && !cq_is_cjk(cq_utf8_decode(base, strlen(base), &len))) us = NULL;
    uint64_t h = fnv1a(base, us ? (size_t)(us - base) : strlen(base));
    add_variant(c, doc_id, name, 0, date, h);
    add_variant(c, doc_id, base, 0, date, h);
    if (us) {
        /* "民法典_合同编": "民法典合同编" strong, "民法典" weak. */
        memmove(us, us + 1, strlen(us));
        add_variant(c, doc_id, base, 0, date, h);
        *us = 0;
        add_variant(c, doc_id, base, 1, date, h);
    }
    const char *candidates[2] = {base, title};
    for (int i = 0; i < 2; i++) {
        const char *t = candidates[i];
        if (!t) continue;
        if (i == 1) add_variant(c, doc_id, t, 0, date, h);
        static const char prc[] = "中华人民共和国";
        if (!strncmp(t, prc, sizeof prc - 1)) add_variant(c, doc_id, t + sizeof prc - 1, 0, date, h);
        const char *a = after_admin_prefix(t);
        if (a) add_variant(c, doc_id, a, 1, date, h);
    }
    free(base);
}

static int is_name_stop(const char *w) {
    static const char *const stop[] = {"and", "the", "for", "with", "between", "inc", "ltd", "llc", "corp", "co"};
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++)
        if (!strcmp(w, stop[i])) return 1;
    return 0;
}

/* Lower-case ASCII words of at least 3 characters that are not all digits; a file name's "_20" (an encoded space)
 * is dropped from the front of a word. With capitalized_only, only words written with a capital letter count (in a
 * question, names are: "Keep" the company, not "keep" the verb). Calls fn for each. */
static void latin_words(const char *text, int strip_20, int capitalized_only, void (*fn)(void *, const char *),
                        void *ctx) {
    char w[40];
    size_t n = 0;
    int upper = 0;
    for (const char *p = text;; p++) {
        if (*p && isalnum((unsigned char)*p)) {
            upper |= isupper((unsigned char)*p) != 0;
            if (n < sizeof w - 1) w[n++] = (char)tolower((unsigned char)*p);
            continue;
        }
        if (capitalized_only && !upper) n = 0;
        upper = 0;
        w[n] = 0;
        const char *word = w;
        if (strip_20 && n > 2 && w[0] == '2' && w[1] == '0' && isalpha((unsigned char)w[2])) word += 2;
        size_t len = strlen(word), digits = 0;
        for (size_t i = 0; i < len; i++) digits += isdigit((unsigned char)word[i]) != 0;
        if (len >= 3 && digits < len && !is_name_stop(word)) fn(ctx, word);
        n = 0;
        if (!*p) break;
    }
}

typedef struct {
    router_cache *c;
    int64_t doc_id;
} word_ctx;

static void add_name_word(void *p, const char *w) {
    word_ctx *x = p;
    router_cache *c = x->c;
    for (size_t i = c->n_words; i > 0 && c->words[i - 1].doc_id == x->doc_id; i--)
        if (!strcmp(c->words[i - 1].word, w)) return;
    if (!cq_grow((void **)&c->words, &c->cap_words, c->n_words + 1, sizeof *c->words)) return;
    name_word *nw = &c->words[c->n_words++];
    nw->doc_id = x->doc_id;
    snprintf(nw->word, sizeof nw->word, "%s", w);
    nw->df = 0;
}

static void count_name_word_df(router_cache *c) {
    for (size_t i = 0; i < c->n_words; i++) {
        int df = 0;
        for (size_t j = 0; j < c->n_words; j++) df += !strcmp(c->words[i].word, c->words[j].word);
        c->words[i].df = df;
    }
}

static int cmp_variant_key(const void *a, const void *b) {
    const title_variant *x = *(const title_variant *const *)a, *y = *(const title_variant *const *)b;
    int d = strcmp(x->key, y->key);
    if (d) return d;
    return (x->name_hash > y->name_hash) - (x->name_hash < y->name_hash);
}

/* "NON-DISCLOSURE AGREEMENT" heads a dozen contracts: a text that several differently named documents share says
 * nothing about which one a question means. Versions of one law (same name, other dates) do not count. */
#define GENERIC_TITLE_NAMES 3
static void mark_generic_titles(router_cache *c) {
    title_variant **idx = malloc(c->n * sizeof *idx);
    if (!idx) return;
    for (size_t i = 0; i < c->n; i++) idx[i] = &c->v[i];
    qsort(idx, c->n, sizeof *idx, cmp_variant_key);
    for (size_t i = 0; i < c->n;) {
        size_t j = i + 1;
        int names = 1;
        for (; j < c->n && !strcmp(idx[j]->key, idx[i]->key); j++) names += idx[j]->name_hash != idx[j - 1]->name_hash;
        if (names >= GENERIC_TITLE_NAMES)
            for (size_t k = i; k < j; k++) idx[k]->generic = 1;
        i = j;
    }
    free(idx);
}

static void add_doc_to_cache(void *ctx, int64_t doc_id, const char *name, const char *title) {
    router_cache *c = ctx;
    add_doc_variants(c, doc_id, name, title);
    word_ctx x = {c, doc_id};
    latin_words(name, 1, 0, add_name_word, &x);
}

static cq_status load_cache(cq_store *s, int64_t kb_id, router_cache **out, cq_err *err) {
    void **slot = cq_store_router_slot(s, cq_router_cache_free);
    router_cache *c = *slot;
    int64_t n_docs = 0, max_id = 0, min_id = 0;
    cq_status rc = cq_store_router_docs_stat(s, kb_id, &n_docs, &max_id, &min_id, err);
    if (rc) return rc;
    if (c && c->kb_id == kb_id && c->n_docs == n_docs && c->max_doc_id == max_id) {
        *out = c;
        return CQ_OK;
    }
    cq_router_cache_free(c);
    *slot = NULL;
    c = calloc(1, sizeof *c);
    if (!c) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    c->kb_id = kb_id;
    c->n_docs = n_docs;
    c->max_doc_id = max_id;
    c->single_doc = n_docs == 1 ? min_id : 0;
    rc = cq_store_router_docs(s, kb_id, add_doc_to_cache, c, err);
    if (rc) {
        cq_router_cache_free(c);
        return rc;
    }
    mark_generic_titles(c);
    /* Quadratic, but over file-name words of Latin-script documents only: a few thousand at most. */
    if (c->n_words <= 20000) count_name_word_df(c);
    *slot = c;
    *out = c;
    return CQ_OK;
}

typedef struct {
    cq_title_match m;
    long date;
} ranked_match;

static int cmp_match(const void *a, const void *b) {
    const ranked_match *x = a, *y = b;
    if (x->m.score != y->m.score) return x->m.score < y->m.score ? 1 : -1;
    if (x->date != y->date) return x->date < y->date ? 1 : -1; /* newest version first */
    return x->m.doc_id < y->m.doc_id ? 1 : (x->m.doc_id > y->m.doc_id ? -1 : 0);
}

typedef struct {
    char (*w)[40];
    size_t n, cap;
} word_set;

static void add_question_word(void *p, const char *w) {
    word_set *ws = p;
    for (size_t i = 0; i < ws->n; i++)
        if (!strcmp(ws->w[i], w)) return;
    if (!cq_grow((void **)&ws->w, &ws->cap, ws->n + 1, sizeof *ws->w)) return;
    snprintf(ws->w[ws->n++], 40, "%s", w);
}

/* Offers doc_id with score to best: a document already there keeps its better score. False when out of memory. */
static bool offer(ranked_match **best, size_t *nb, size_t *cap, int64_t doc_id, double score, long date) {
    for (size_t j = 0; j < *nb; j++)
        if ((*best)[j].m.doc_id == doc_id) {
            if (score > (*best)[j].m.score) (*best)[j].m.score = score;
            return true;
        }
    if (!cq_grow((void **)best, cap, *nb + 1, sizeof **best)) return false;
    (*best)[(*nb)++] = (ranked_match){{doc_id, score}, date};
    return true;
}

/* A question that names a Latin-script document by the words of its file name ("the Non-Disclosure Agreement
 * between CopAcc and ToP Mentors" → CopAcc_NDA-and-ToP-Mentors_2.0_2017): most of the name's weight (words
 * weighed by how rare they are among the KB's names) must be in the question, including one word that at most two
 * names have. Such matches score 1 + coverage, below any literal title match (2 characters and more). */
#define NAME_MIN_COVERAGE 0.6
static cq_status match_name_words(const router_cache *c, const char *question, ranked_match **best, size_t *nb,
                                  size_t *cap, cq_err *err) {
    if (!c->n_words) return CQ_OK;
    word_set qw = {0};
    latin_words(question, 0, 1, add_question_word, &qw);
    if (!qw.n) return CQ_OK;
    double n_docs = (double)(c->n_docs ? c->n_docs : 1);
    cq_status rc = CQ_OK;
    for (size_t i = 0; !rc && i < c->n_words;) {
        size_t j = i;
        double total = 0, found = 0;
        int distinctive = 0;
        for (; j < c->n_words && c->words[j].doc_id == c->words[i].doc_id; j++) {
            double idf = log(1.0 + n_docs / c->words[j].df);
            total += idf;
            for (size_t k = 0; k < qw.n; k++)
                if (!strcmp(qw.w[k], c->words[j].word)) {
                    found += idf;
                    if (c->words[j].df <= 2) distinctive = 1;
                    break;
                }
        }
        double coverage = total > 0 ? found / total : 0;
        if (distinctive && coverage >= NAME_MIN_COVERAGE &&
            !offer(best, nb, cap, c->words[i].doc_id, 1.0 + coverage, 0))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
        i = j;
    }
    free(qw.w);
    return rc;
}

cq_status cq_router_titles(cq_store *s, int64_t kb_id, const char *question, cq_title_match *out, size_t max,
                           size_t *n, cq_err *err) {
    *n = 0;
    router_cache *c = NULL;
    cq_status rc = load_cache(s, kb_id, &c, err);
    if (rc) return rc;
    char *q = title_fold(question);
    if (!q) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    ranked_match *best = NULL;
    size_t nb = 0, cap = 0;
    for (size_t i = 0; !rc && i < c->n; i++) {
        const title_variant *v = &c->v[i];
        if (!v->generic && strstr(q, v->key) &&
            !offer(&best, &nb, &cap, v->doc_id, v->chars - (v->weak ? 0.5 : 0.0), v->date))
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
    }
    free(q);
    if (!rc) rc = match_name_words(c, question, &best, &nb, &cap, err);
    if (!rc && nb) qsort(best, nb, sizeof *best, cmp_match);
    for (size_t i = 0; !rc && i < nb && *n < max; i++) out[(*n)++] = best[i].m;
    free(best);
    return rc;
}

/* ---- resolving ---------------------------------------------------------------------------------------------- */

static cq_status lookup(cq_store *s, int64_t doc_id, const cq_clause_ref *ref, int64_t *out, size_t max, size_t *n,
                        cq_err *err) {
    if (ref->key[0]) return cq_store_router_by_key(s, doc_id, ref->key, out, max, n, err);
    /* A chapter / section / part without an article: its articles in order. */
    char num[64], pattern[96];
    const char *unit = ref->section ? "节" : ref->chapter ? "章" : "编";
    long v = ref->section ? ref->section : ref->chapter ? ref->chapter : ref->part;
    snprintf(pattern, sizeof pattern, "%%第%s%s%%", cq_number_format_cn(v, num), unit);
    return cq_store_router_by_path(s, doc_id, pattern, out, max, n, err);
}

bool cq_router_label_fits(const cq_clause_ref *ref, const char *label) {
    return !label || !*label || cq_utf8_has_cjk(label) != ref->latin;
}

bool cq_router_same_regulation(const cq_store_label_doc *a, const cq_store_label_doc *b) {
    return (a->group[0] && !strcmp(a->group, b->group)) || !strcmp(a->name, b->name);
}

/* The documents a reference without a document means: the one ready document of the KB that has a clause labelled
 * ref->key, or the versions of one regulation (one version group, or one title) when only they have it — retrieval puts the
 * version meant for the day first (search/retrieve.c); for a chapter reference, the KB's only document. Into
 * docs[0..*n) (scores alike: one tier); none when there are none or several documents that are not versions of one. */
static cq_status docs_with_label(cq_store *s, int64_t kb_id, const cq_clause_ref *ref, cq_title_match *docs, size_t *n,
                                 cq_err *err) {
    *n = 0;
    if (!ref->key[0]) {
        router_cache *c = NULL;
        cq_status rc = load_cache(s, kb_id, &c, err);
        if (!rc && c->single_doc) docs[(*n)++] = (cq_title_match){c->single_doc, 1.0};
        return rc;
    }
    cq_store_label_doc found[CQ_ROUTER_MAX_VERSIONS + 1]; /* one more: more versions than that are not resolved */
    size_t nf = 0;
    cq_status rc = cq_store_router_docs_with_key(s, kb_id, ref->key, found, CQ_ROUTER_MAX_VERSIONS + 1, &nf, err);
    size_t pick[CQ_ROUTER_MAX_VERSIONS + 1], kept = 0; /* of the reference's kind: "Section 5" is not 第五条 */
    for (size_t i = 0; !rc && i < nf; i++)
        if (cq_router_label_fits(ref, found[i].label)) pick[kept++] = i;
    bool one = !rc && kept > 0 && nf <= CQ_ROUTER_MAX_VERSIONS;
    for (size_t i = 1; one && i < kept; i++) one = cq_router_same_regulation(&found[pick[0]], &found[pick[i]]);
    for (size_t i = 0; one && i < kept; i++) docs[(*n)++] = (cq_title_match){found[pick[i]].doc_id, 1.0};
    cq_store_label_docs_free(found, nf);
    return rc;
}

cq_status cq_router_resolve(cq_store *s, int64_t kb_id, const cq_title_match *titles, size_t n_titles,
                            const cq_clause_ref *ref, int64_t *out, size_t max, size_t *n, cq_err *err) {
    *n = 0;
    const cq_title_match *m = titles;
    size_t nm = n_titles;
    cq_title_match only[CQ_ROUTER_MAX_VERSIONS];
    if (nm == 0) {
        /* No document named: the reference is unambiguous only when one document of the KB has such a clause
         * (a KB of one contract, or "Section 7.2" where the other documents are Chinese laws), or only the versions
         * of one regulation do. */
        cq_status rc = docs_with_label(s, kb_id, ref, only, &nm, err);
        if (rc || !nm) return rc;
        m = only;
    }
    /* Only the best-matching title tier: a reference that is not in the named document is not looked up in
     * another one (that would be a wrong clause, not a near miss). Versions of one law share the tier. */
    for (size_t i = 0; i < nm && *n < max; i++) {
        if (m[i].score < m[0].score) break;
        cq_status rc = lookup(s, m[i].doc_id, ref, out, max, n, err);
        if (rc) return rc;
    }
    return CQ_OK;
}
