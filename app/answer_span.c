/* Spans that keep their meaning; see answer_span.h. */
#define _GNU_SOURCE /* memmem */
#include "app/answer_span.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerals.h"
#include "core/utf8.h"
#include "search/lexicon.h"

/* ---- the word lists (the only place they are) ------------------------------------------------------------- */

/* Taken in when right before a span (or cut by its start). Longer words first is not needed: the longest match
 * wins. 除 alone is not here: it is the tail of 解除/免除/排除…; 除…外 has its own rule (below). */
static const char *const ZH_BEFORE[] = {
    "不得", "不准", "不应", "不能", "不可", "不宜", "不必", "不再", "不予", "不受", "不属于", "不超过", "不超出",
    "不低于", "不少于", "不高于", "不多于", "不大于", "不小于", "不足", "不满", "不", "未经", "未满", "尚未", "未",
    "非经", "非", "无须", "无需", "无权", "无", "没有", "禁止", "严禁", "除非", "除了", "至少", "至多", "最多",
    "最少", "最高", "最低", "最长", "最短", "超过", "低于", "高于", "少于", "多于", "大于", "小于", "仅限", "仅",
    "只能", "只有",
};
/* Taken in when right after a span (or cut by its end). */
static const char *const ZH_AFTER[] = {
    "以上", "以下", "以内", "以外", "之内", "之外", "除外", "的除外", "为限", "为止",
};
/* Words whose last characters are a qualifier above that is not one here ("有无" is "whether", not "no"): a
 * qualifier that ends one of these is not taken in. */
static const char *const ZH_NOT_QUALIFIER[] = {
    "有无", "是非", "莫非", "无非", "虚无", "要不", "差不", "了不",
};
/* Whole words, any case; a space stands for one or more spaces or tabs. */
static const char *const EN_BEFORE[] = {
    "no more than", "no less than", "no fewer than", "no later than", "no earlier than", "no greater than",
    "not more than", "not less than", "not fewer than", "not later than", "not earlier than", "not exceeding",
    "not to exceed", "in no event", "at least", "at most", "up to", "more than", "less than", "fewer than",
    "greater than", "later than", "earlier than", "not", "no", "never", "unless", "except", "without", "nor",
    "neither", "cannot", "only", "none", "exceeding",
};
static const char *const EN_AFTER[] = {
    "or more", "or less", "or fewer", "or greater", "or longer", "or shorter", "or later", "or earlier",
    "at the latest", "at most", "at least",
};

#define COUNT(a) (sizeof(a) / sizeof *(a))

const char *const *cq_span_qualifier_words(cq_qualifier_kind kind, size_t *n) {
    switch (kind) {
    case CQ_QUALIFIER_ZH_BEFORE: *n = COUNT(ZH_BEFORE); return ZH_BEFORE;
    case CQ_QUALIFIER_ZH_AFTER: *n = COUNT(ZH_AFTER); return ZH_AFTER;
    case CQ_QUALIFIER_EN_BEFORE: *n = COUNT(EN_BEFORE); return EN_BEFORE;
    case CQ_QUALIFIER_EN_AFTER: *n = COUNT(EN_AFTER); return EN_AFTER;
    default: *n = 0; return NULL;
    }
}

/* ---- characters ------------------------------------------------------------------------------------------- */

static bool alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool blank(char c) { return c == ' ' || c == '\t'; }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* The start of the character before byte i (0 when i is 0). */
static size_t prev_char(const char *t, size_t i) {
    if (i == 0) return 0;
    size_t k = i - 1;
    while (k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80) k--;
    return k;
}

static uint32_t char_at(const char *t, size_t n, size_t i, size_t *len) {
    size_t l = 0;
    uint32_t cp = i < n ? cq_utf8_decode(t + i, n - i, &l) : 0;
    if (len) *len = l ? l : 1;
    return cp;
}

static bool has_at(const char *t, size_t n, size_t i, const char *w) {
    size_t l = strlen(w);
    return i + l <= n && !memcmp(t + i, w, l);
}

/* Ends a sentence: 。！？；;!? and the line break ('.' is handled by its caller: only before a space). */
static bool sentence_mark(uint32_t cp) {
    return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F || cp == 0xFF1B || cp == ';' || cp == '!' || cp == '?' ||
           cp == '\n';
}

/* Ends a phrase: a sentence mark, ，、：,: */
static bool phrase_mark(uint32_t cp) {
    return sentence_mark(cp) || cp == 0xFF0C || cp == 0x3001 || cp == 0xFF1A || cp == ',' || cp == ':' || cp == '.';
}

/* The first byte of the line holding byte i, and the end of that line. */
static size_t line_start(const char *t, size_t i) {
    while (i > 0 && t[i - 1] != '\n') i--;
    return i;
}
static size_t line_end(const char *t, size_t n, size_t i) {
    while (i < n && t[i] != '\n') i++;
    return i;
}

/* ---- matching one word ------------------------------------------------------------------------------------ */

/* English w (lower case, single spaces) matching t backward so that it ends at q: its start, or SIZE_MAX. Stays
 * at or after lo; the byte before the match must not be a letter or digit. */
static size_t en_back(const char *t, size_t lo, size_t q, const char *w) {
    size_t j = strlen(w), i = q;
    while (j > 0) {
        if (w[j - 1] == ' ') {
            if (i <= lo || !blank(t[i - 1])) return SIZE_MAX;
            while (i > lo && blank(t[i - 1])) i--;
        } else {
            if (i <= lo || lower(t[i - 1]) != w[j - 1]) return SIZE_MAX;
            i--;
        }
        j--;
    }
    if (i > lo && alnum(t[i - 1])) return SIZE_MAX;
    return i;
}

/* English w matching t forward from p (not past hi): its end, or SIZE_MAX; the byte after must not be a letter or
 * digit. */
static size_t en_fwd(const char *t, size_t hi, size_t p, const char *w) {
    size_t i = p;
    for (const char *c = w; *c; c++) {
        if (*c == ' ') {
            if (i >= hi || !blank(t[i])) return SIZE_MAX;
            while (i < hi && blank(t[i])) i++;
        } else {
            if (i >= hi || lower(t[i]) != *c) return SIZE_MAX;
            i++;
        }
    }
    if (i < hi && alnum(t[i])) return SIZE_MAX;
    return i;
}

/* Is the Chinese qualifier ending at q (of l bytes) the tail of a word that is no qualifier (有无)? */
static bool zh_excluded(const char *t, size_t lo, size_t q, size_t l) {
    for (size_t i = 0; i < COUNT(ZH_NOT_QUALIFIER); i++) {
        const char *e = ZH_NOT_QUALIFIER[i];
        size_t el = strlen(e);
        if (el > l && q >= lo + el && !memcmp(t + q - el, e, el)) return true;
    }
    return false;
}

/* ---- extending the start ---------------------------------------------------------------------------------- */

/* The qualifier before start (Chinese: ending exactly there; English: after spaces): the new start, or start. */
static size_t before_word(const char *t, size_t lo, size_t start) {
    size_t best = start;
    for (size_t i = 0; i < COUNT(ZH_BEFORE); i++) {
        size_t l = strlen(ZH_BEFORE[i]);
        if (start >= lo + l && !memcmp(t + start - l, ZH_BEFORE[i], l) && !zh_excluded(t, lo, start, l) &&
            start - l < best)
            best = start - l;
    }
    size_t q = start;
    while (q > lo && blank(t[q - 1])) q--;
    if (q < start || !alnum(t[start])) {
        for (size_t i = 0; i < COUNT(EN_BEFORE); i++) {
            size_t s = en_back(t, lo, q, EN_BEFORE[i]);
            if (s < best) best = s;
        }
        /* a contraction: "don't", "won't", "isn’t" */
        size_t w = q;
        for (;;) {
            if (w > lo && (alnum(t[w - 1]) || t[w - 1] == '\'')) w--;
            else if (w >= lo + 3 && !memcmp(t + w - 3, "’", 3)) w -= 3;
            else break;
        }
        if (w < q && w < best &&
            ((q >= w + 3 && !memcmp(t + q - 3, "n't", 3)) || (q >= w + 5 && !memcmp(t + q - 5, "n’t", 5))))
            best = w;
    }
    return best;
}

/* The Chinese qualifiers that the boundary `at` cuts in half (their first part ends at `at`, not before lo, and the
 * rest follows): *first, the earliest start of one (at when none), and *last, the latest end (at when none). */
static void zh_straddles(const char *t, size_t n, size_t lo, size_t at, size_t *first, size_t *last) {
    *first = *last = at;
    const char *const *lists[2] = {ZH_BEFORE, ZH_AFTER};
    const size_t counts[2] = {COUNT(ZH_BEFORE), COUNT(ZH_AFTER)};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < counts[k]; i++) {
            const char *w = lists[k][i];
            size_t l = strlen(w);
            for (size_t cut = 1; cut < l; cut++) {
                if (((unsigned char)w[cut] & 0xC0) == 0x80) continue; /* inside a character */
                if (at < lo + cut || memcmp(t + at - cut, w, cut) || !has_at(t, n, at, w + cut)) continue;
                if (at - cut < *first) *first = at - cut;
                if (at + (l - cut) > *last) *last = at + (l - cut);
            }
        }
}

/* The English phrases ("less than", "no more than") split at the gap between left_end and right_start (blanks):
 * one of their words ends at left_end (not before lo) and the rest starts at right_start. *first: the earliest start
 * of one, *last: the latest end; SIZE_MAX / 0 when none. */
static void en_straddles(const char *t, size_t n, size_t lo, size_t left_end, size_t right_start, size_t *first,
                         size_t *last) {
    *first = SIZE_MAX, *last = 0;
    const char *const *en[2] = {EN_BEFORE, EN_AFTER};
    const size_t en_n[2] = {COUNT(EN_BEFORE), COUNT(EN_AFTER)};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < en_n[k]; i++) {
            const char *w = en[k][i];
            for (const char *sp = strchr(w, ' '); sp; sp = strchr(sp + 1, ' ')) {
                char left[32];
                size_t ll = (size_t)(sp - w);
                if (ll >= sizeof left) continue;
                memcpy(left, w, ll);
                left[ll] = 0;
                size_t s = en_back(t, lo, left_end, left), e = en_fwd(t, n, right_start, sp + 1);
                if (s == SIZE_MAX || e == SIZE_MAX) continue;
                if (s < *first) *first = s;
                if (e > *last) *last = e;
            }
        }
}

/* A qualifier the start cuts in half: the new start, or start. */
static size_t straddled_start(const char *t, size_t n, size_t lo, size_t start) {
    size_t best, unused;
    zh_straddles(t, n, lo, start, &best, &unused);
    /* English: a span starting inside a word starts at the word; inside a phrase ("less | than"), at the phrase */
    if (start > lo && alnum(t[start - 1]) && alnum(t[start])) {
        size_t s = start;
        while (s > lo && alnum(t[s - 1])) s--;
        if (s < best) best = s;
    }
    size_t q = start;
    while (q > lo && blank(t[q - 1])) q--;
    size_t first, none;
    if (q < start && (en_straddles(t, n, lo, q, start, &first, &none), first < best)) best = first;
    return best;
}

/* Does a clause start at byte i: the line's start, or after punctuation or a space? */
static bool clause_start(const char *t, size_t lo, size_t i) {
    if (i <= lo) return true;
    size_t p = prev_char(t, i);
    uint32_t cp = char_at(t, i, p, NULL);
    return phrase_mark(cp) || cp == 0xFF08 || cp == '(' || cp == ' ' || cp == 0x3000;
}

#define CHU "\xE9\x99\xA4" /* 除 */
#define WAI "\xE5\xA4\x96" /* 外 */
#define CHU_WAI_REACH 240  /* bytes (80 characters) between 除 and 外 at most */

/* "除…外，span": the start of 除, or start. */
static size_t chu_wai_start(const char *t, size_t lo, size_t start) {
    size_t p = start;
    while (p > lo) {
        size_t k = prev_char(t, p);
        if (has_at(t, p, k, "，") || t[k] == ',' || blank(t[k])) p = k;
        else break;
    }
    if (p < lo + 3 || memcmp(t + p - 3, WAI, 3)) return start;
    if (p >= lo + 6 && !memcmp(t + p - 6, CHU, 3)) return start; /* 除外 closes a sentence, it opens none */
    for (size_t i = p - 3; i > lo && p - i < CHU_WAI_REACH;) {
        i = prev_char(t, i);
        uint32_t cp = char_at(t, p, i, NULL);
        if (sentence_mark(cp)) break;
        if (has_at(t, p, i, CHU) && clause_start(t, lo, i)) return i;
    }
    return start;
}

/* ---- extending the end ------------------------------------------------------------------------------------ */

static size_t after_word(const char *t, size_t n, size_t end) {
    size_t best = end;
    for (size_t i = 0; i < COUNT(ZH_AFTER); i++)
        if (has_at(t, n, end, ZH_AFTER[i]) && end + strlen(ZH_AFTER[i]) > best) best = end + strlen(ZH_AFTER[i]);
    size_t q = end;
    while (q < n && blank(t[q])) q++;
    if (q > end || (end > 0 && !alnum(t[end - 1])))
        for (size_t i = 0; i < COUNT(EN_AFTER); i++) {
            size_t e = en_fwd(t, n, q, EN_AFTER[i]);
            if (e != SIZE_MAX && e > best) best = e;
        }
    return best;
}

static size_t straddled_end(const char *t, size_t n, size_t start, size_t end) {
    size_t unused, best;
    zh_straddles(t, n, start, end, &unused, &best);
    if (end > start && end < n && alnum(t[end - 1]) && alnum(t[end])) {
        size_t e = end;
        while (e < n && alnum(t[e])) e++;
        if (e > best) best = e;
    }
    size_t q = end;
    while (q < n && blank(t[q])) q++;
    size_t none, last;
    if (q > end && (en_straddles(t, n, start, end, q, &none, &last), last > best)) best = last;
    return best;
}

/* A span that ends with a word that qualifies what follows ("…工资不低于", "…shall not") is cut in half: it goes on
 * to the end of the phrase. */
static size_t dangling_end(const char *t, size_t n, size_t start, size_t end) {
    bool dangling = false;
    for (size_t i = 0; i < COUNT(ZH_BEFORE) && !dangling; i++) {
        size_t l = strlen(ZH_BEFORE[i]);
        if (end >= start + l && !memcmp(t + end - l, ZH_BEFORE[i], l) && !zh_excluded(t, start, end, l))
            dangling = true;
    }
    for (size_t i = 0; i < COUNT(EN_BEFORE) && !dangling; i++)
        if ((end == n || !alnum(t[end])) && en_back(t, start, end, EN_BEFORE[i]) != SIZE_MAX) dangling = true;
    if (!dangling) return end;
    size_t e = end;
    while (e < n) {
        size_t len;
        uint32_t cp = char_at(t, n, e, &len);
        if (phrase_mark(cp) && (cp != '.' || e + 1 >= n || blank(t[e + 1]) || t[e + 1] == '\n')) break;
        e += len;
    }
    while (e > end && blank(t[e - 1])) e--;
    return e;
}

/* "除…" in the span without its 外: to the 外. */
static size_t chu_wai_end(const char *t, size_t n, size_t lo, size_t start, size_t end) {
    size_t chu = SIZE_MAX;
    for (size_t i = start; i + 3 <= end;) {
        size_t len;
        char_at(t, end, i, &len);
        if (has_at(t, end, i, CHU) && clause_start(t, lo, i) && !has_at(t, end, i + 3, WAI)) chu = i;
        if (chu != SIZE_MAX && has_at(t, end, i, WAI) && i > chu) chu = SIZE_MAX;
        i += len;
    }
    if (chu == SIZE_MAX) return end;
    for (size_t i = end; i < n && i - chu < CHU_WAI_REACH;) {
        size_t len;
        uint32_t cp = char_at(t, n, i, &len);
        if (sentence_mark(cp)) break;
        if (has_at(t, n, i, WAI)) return i + 3;
        i += len;
    }
    return end;
}

bool cq_span_keep_qualifiers(const char *text, size_t n, size_t *start, size_t *end) {
    if (!text || !start || !end || *start >= *end || *end > n) return false;
    size_t s = *start, e = *end;
    /* its edges as words: white space at either end says nothing */
    while (s < e && blank(text[s])) s++;
    while (e > s && blank(text[e - 1])) e--;
    if (s == e) return false;
    for (int round = 0; round < 8; round++) {
        const size_t lo = line_start(text, s), s0 = s, e0 = e;
        s = straddled_start(text, n, lo, s);
        s = before_word(text, lo, s);
        s = chu_wai_start(text, lo, s);
        e = straddled_end(text, n, s, e);
        e = after_word(text, n, e);
        e = dangling_end(text, n, s, e);
        e = chu_wai_end(text, n, lo, s, e);
        if (e > line_end(text, n, s)) e = e0 > line_end(text, n, s) ? e0 : line_end(text, n, s);
        if (s == s0 && e == e0) break;
    }
    if (s > *start) s = *start; /* a span is never shortened */
    if (e < *end) e = *end;
    bool changed = s != *start || e != *end;
    *start = s;
    *end = e;
    return changed;
}

char *cq_span_extend_answer(const char *text, size_t n, const char *answer, bool *changed) {
    if (changed) *changed = false;
    if (!text || !answer || !*answer) return NULL;
    const char *at = memmem(text, n, answer, strlen(answer));
    if (!at) return NULL;
    size_t s = (size_t)(at - text), e = s + strlen(answer);
    bool c = cq_span_keep_qualifiers(text, n, &s, &e);
    if (changed) *changed = c;
    return strndup(text + s, e - s);
}

/* ---- items ------------------------------------------------------------------------------------------------ */

enum { K_PAREN_NUM, K_PAREN_ALPHA, K_PAREN_ROMAN, K_CN_DUN, K_DIGIT, K_NONE };

typedef struct {
    size_t pos;
    int kind[2];
    long value[2];
} marker;

/* Is there an item marker at p? Its kinds and values (two readings for "(i)": the letter and the Roman 1). */
static bool parse_marker(const char *t, size_t n, size_t p, marker *m) {
    m->pos = p;
    m->kind[0] = m->kind[1] = K_NONE;
    size_t len, used;
    uint32_t cp = char_at(t, n, p, &len);
    if (cp == 0xFF08 || cp == '(') {
        size_t q = p + len;
        long v = -1;
        int kind = K_NONE;
        if (q < n && t[q] >= 'a' && t[q] <= 'z') {
            size_t e = q;
            while (e < n && t[e] >= 'a' && t[e] <= 'z' && e - q < 5) e++;
            long r = cq_roman_parse(t + q, e - q, &used);
            if (e - q == 1) {
                m->kind[0] = K_PAREN_ALPHA;
                m->value[0] = t[q] - 'a' + 1;
            }
            if (r > 0 && used == e - q) {
                m->kind[e - q == 1 ? 1 : 0] = K_PAREN_ROMAN;
                m->value[e - q == 1 ? 1 : 0] = r;
            }
            q = e;
            kind = m->kind[0];
        } else if ((v = cq_number_parse(t + q, n - q, &used)) > 0) {
            m->kind[0] = kind = K_PAREN_NUM;
            m->value[0] = v;
            q += used;
        }
        if (kind == K_NONE) return false;
        cp = char_at(t, n, q, &len);
        return cp == 0xFF09 || cp == ')';
    }
    if (cq_is_cn_numeral(cp)) {
        long v = cq_number_parse(t + p, n - p, &used);
        if (v <= 0 || !has_at(t, n, p + used, "、")) return false;
        m->kind[0] = K_CN_DUN;
        m->value[0] = v;
        return true;
    }
    if (t[p] >= '1' && t[p] <= '9') {
        size_t q = p;
        long v = 0;
        while (q < n && t[q] >= '0' && t[q] <= '9' && q - p < 3) v = v * 10 + (t[q++] - '0');
        if (q < n && t[q] >= '0' && t[q] <= '9') return false;
        cp = char_at(t, n, q, &len);
        if (cp != '.' && cp != 0xFF0E && cp != 0x3001 && cp != ')' && cp != 0xFF09) return false;
        if (q + len < n && t[q + len] >= '0' && t[q + len] <= '9') return false; /* 7.2, 1.5 */
        m->kind[0] = K_DIGIT;
        m->value[0] = v;
        return true;
    }
    return false;
}

/* May an item marker stand at p: the text's start, a line's, or after ：；:; and spaces? */
static bool marker_place(const char *t, size_t p) {
    size_t i = p;
    while (i > 0 && (blank(t[i - 1]) || has_at(t, p, prev_char(t, i), "\xE3\x80\x80"))) i = prev_char(t, i);
    if (i == 0 || t[i - 1] == '\n') return true;
    size_t k = prev_char(t, i);
    uint32_t cp = char_at(t, i, k, NULL);
    return cp == 0xFF1A || cp == 0xFF1B || cp == 0x3002 || cp == ':' || cp == ';';
}

size_t cq_span_items(const char *text, size_t n, cq_text_range *items, size_t max) {
    if (!text || !items || max == 0) return 0;
    size_t count = 0;
    int kind = K_NONE;
    long expected = 1;
    for (size_t p = 0; p < n;) {
        size_t len;
        char_at(text, n, p, &len);
        marker m;
        if (marker_place(text, p) && parse_marker(text, n, p, &m)) {
            int hit = -1;
            for (int r = 0; r < 2; r++)
                if (m.kind[r] != K_NONE && (kind == K_NONE || m.kind[r] == kind) && m.value[r] == expected) hit = r;
            if (hit >= 0) {
                if (count < max) items[count].start = p;
                if (count > 0 && count - 1 < max) items[count - 1].end = p;
                count++;
                kind = m.kind[hit];
                expected++;
            } else if (kind != K_NONE && (m.kind[0] == kind || m.kind[1] == kind) &&
                       (m.value[0] == 1 || m.value[1] == 1)) {
                break; /* a second list of the same kind: the first one ends there */
            }
        }
        p += len;
    }
    if (count < 2) return 0;
    if (count > max) count = max;
    /* the last item: to the end of its line or its first 。；; (the mark included) */
    size_t last = items[count - 1].start, e = last;
    while (e < n && text[e] != '\n') {
        size_t len;
        uint32_t cp = char_at(text, n, e, &len);
        e += len;
        if (cp == 0x3002 || cp == 0xFF1B || cp == ';') break;
    }
    items[count - 1].end = e;
    for (size_t i = 0; i < count; i++)
        while (items[i].end > items[i].start && (blank(text[items[i].end - 1]) || text[items[i].end - 1] == '\n' ||
                                                  text[items[i].end - 1] == '\r'))
            items[i].end--;
    return count;
}

/* ---- the sentence around a span --------------------------------------------------------------------------- */

static bool ends_sentence(const char *t, size_t n, size_t i, size_t len, uint32_t cp) {
    if (sentence_mark(cp)) return true;
    return cp == '.' && (i + len >= n || blank(t[i + len]) || t[i + len] == '\n');
}

cq_text_range cq_span_sentence(const char *text, size_t n, size_t start, size_t end, size_t max_chars,
                               bool *cut_before, bool *cut_after) {
    if (cut_before) *cut_before = false;
    if (cut_after) *cut_after = false;
    if (!text || start > end || end > n) return (cq_text_range){0, 0};
    size_t a = start;
    while (a > 0) {
        size_t k = prev_char(text, a), len;
        uint32_t cp = char_at(text, n, k, &len);
        if (ends_sentence(text, n, k, len, cp)) break;
        a = k;
    }
    size_t b = end;
    /* a span that ends with its sentence's mark ends the sentence */
    bool closed = false;
    if (end > start) {
        size_t k = prev_char(text, end), len;
        uint32_t cp = char_at(text, n, k, &len);
        closed = cp != '\n' && ends_sentence(text, n, k, len, cp);
    }
    while (!closed && b < n) {
        size_t len;
        uint32_t cp = char_at(text, n, b, &len);
        if (cp == '\n') break;
        b += len;
        if (ends_sentence(text, n, b - len, len, cp)) break;
    }
    while (a < start && (blank(text[a]) || text[a] == '\n' || text[a] == '\r')) a++;
    while (b > end && (blank(text[b - 1]) || text[b - 1] == '\n' || text[b - 1] == '\r')) b--;
    if (max_chars) {
        size_t span = cq_utf8_count(text + start, end - start);
        size_t before = cq_utf8_count(text + a, start - a), after = cq_utf8_count(text + end, b - end);
        if (span + before + after > max_chars) {
            size_t room = max_chars > span ? max_chars - span : 0;
            size_t lb = before < room / 2 ? before : room / 2;
            size_t la = after < room - lb ? after : room - lb;
            lb = before < room - la ? before : room - la; /* room one side leaves goes to the other */
            size_t na = start;
            for (size_t i = 0; i < lb && na > a; i++) na = prev_char(text, na);
            size_t nb = end;
            for (size_t i = 0; i < la && nb < b; i++) {
                size_t len;
                char_at(text, n, nb, &len);
                nb += len;
            }
            if (na > a && cut_before) *cut_before = true;
            if (nb < b && cut_after) *cut_after = true;
            a = na;
            b = nb;
        }
    }
    return (cq_text_range){a, b};
}

/* ---- a question asking leave, a clause that forbids it -------------------------------------------------------- */

/* Asking leave in a question; a longer word first where one holds another. */
static const char *const ZH_PERMISSION[] = {
    "可不可以", "能不能", "是否可以", "是否能够", "是否允许", "是否有权", "是否能", "可以", "可否", "能否", "能够",
    "允许", "有权利", "有权", "准许",
};
/* Forbidding in a clause. 不能 / 不可 are as often "unable to" (不能胜任工作的) as "must not": a phrase that ends
 * in 的 is a condition, not a forbidding, and the act's verb must follow the word (cq_span_forbids). */
static const char *const ZH_PROHIBITION[] = {
    "不得", "禁止", "严禁", "不准", "不允许", "不可以", "不可", "不能", "无权", "不应当", "不应",
};

static bool cjk(uint32_t cp) { return cp >= 0x3400 && cp <= 0x9FFF; }

/* The distinct pairs of adjacent CJK characters of t[a, b) as byte offsets into t (at most max). */
static size_t cjk_pairs(const char *t, size_t a, size_t b, size_t *at, size_t max) {
    size_t n = 0, i = a;
    while (i < b && n < max) {
        size_t l1, l2;
        uint32_t c1 = char_at(t, b, i, &l1);
        uint32_t c2 = i + l1 < b ? char_at(t, b, i + l1, &l2) : 0;
        if (cjk(c1) && cjk(c2)) {
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++) seen = !memcmp(t + at[k], t + i, l1 + l2);
            if (!seen) at[n++] = i;
        }
        i += l1;
    }
    return n;
}

/* Does t[a, b) hold two adjacent CJK characters (does it name anything)? */
static bool has_cjk_pair(const char *t, size_t a, size_t b) {
    size_t first;
    return cjk_pairs(t, a, b, &first, 1) > 0;
}

static size_t pair_len(const char *t, size_t n, size_t i) {
    size_t l1, l2;
    char_at(t, n, i, &l1);
    char_at(t, n, i + l1, &l2);
    return l1 + l2;
}

/* How many of the pairs (at, of q) occur in t[a, b). */
static size_t pairs_in(const char *q, size_t qn, const size_t *at, size_t n_pairs, const char *t, size_t a, size_t b) {
    size_t found = 0;
    for (size_t k = 0; k < n_pairs; k++) {
        const size_t l = pair_len(q, qn, at[k]);
        if (b - a >= l && memmem(t + a, b - a, q + at[k], l)) found++;
    }
    return found;
}

/* The first word of words[] at t[i..n), or NULL. */
static const char *word_at(const char *t, size_t n, size_t i, const char *const *words, size_t n_words) {
    for (size_t w = 0; w < n_words; w++)
        if (has_at(t, n, i, words[w])) return words[w];
    return NULL;
}

#define MAX_ACT_PAIRS 64

/* Does any pair of the act (pa, of q) occur in t[a, b) followed by 的 where the question does not follow it so? Then
 * the act only qualifies a noun there: 不得撤销的…赠与合同, 不能作为遗嘱的见证人, 应当享有的…经营权. */
static bool act_as_modifier(const char *q, size_t qn, const size_t *pa, size_t n_pairs, const char *t, size_t a,
                            size_t b) {
    for (size_t k = 0; k < n_pairs; k++) {
        const size_t l = pair_len(q, qn, pa[k]);
        if (has_at(q, qn, pa[k] + l, "的")) continue;
        for (const char *x = b - a >= l ? memmem(t + a, b - a, q + pa[k], l) : NULL; x;) {
            const size_t at = (size_t)(x - t) + l;
            if (has_at(t, b, at, "的") && at + 3 < b) return true;
            x = at < b && b - at >= l ? memmem(t + at, b - at, q + pa[k], l) : NULL;
        }
    }
    return false;
}

/* A question's phrase mark for its subject: ，, ; and the sentence marks, not 、 (笔名、艺名、网名 is one subject). */
static bool clause_mark(uint32_t cp) { return sentence_mark(cp) || cp == 0xFF0C || cp == ','; }

#define VERB_WITHIN 6 /* characters after the forbidding word where the act's verb must start (禁止用人单位招用) */

/* How the question may qualify its act before the verb (可以随意延长…吗): the verb is the pair after it. */
static const char *const ZH_ADVERB[] = {"随意", "随便", "任意", "擅自", "私自", "自行", "单方面", "单方", "直接", "强行"};

/* Where the act a question asks leave for ends: at its first sentence mark, 吗 or 呢 from act on. */
static size_t act_end_at(const char *question, size_t qn, size_t act) {
    size_t end = act;
    while (end < qn) {
        size_t l;
        const uint32_t c = char_at(question, qn, end, &l);
        if (sentence_mark(c) || c == 0x5417 || c == 0x5462) break; /* 吗 呢 */
        end += l;
    }
    return end;
}

bool cq_span_forbids(const char *question, const char *text, size_t n, cq_text_range *sentence) {
    const size_t qn = strlen(question);
    /* the question: [condition，] [subject] permission-word act [吗/呢/？] */
    size_t p = SIZE_MAX, act = 0;
    for (size_t i = 0; i < qn && p == SIZE_MAX; i++) {
        const char *w = word_at(question, qn, i, ZH_PERMISSION, COUNT(ZH_PERMISSION));
        if (!w) continue;
        /* 所有权, 享有权利, 拥有权: ownership, not leave */
        if (i > 0 && !strncmp(w, "有权", 6)) {
            size_t k = prev_char(question, i), l;
            uint32_t c = char_at(question, qn, k, &l);
            if (c == 0x6240 || c == 0x4EAB || c == 0x62E5 || c == 0x5177) continue; /* 所 享 拥 具 */
        }
        p = i, act = i + strlen(w);
    }
    if (p == SIZE_MAX) return false;
    const size_t act_end = act_end_at(question, qn, act);
    /* a question that is itself negative (可以不交…吗, 注册后不使用, 是否不得…) is not asking leave */
    for (size_t i = 0; i < qn; i++) /* (可不可以 holds 不可以: the permission word itself does not count) */
        if ((i < p || i >= act) && word_at(question, qn, i, ZH_PROHIBITION, COUNT(ZH_PROHIBITION))) return false;
    for (size_t i = act; i < act_end;) {
        size_t l;
        uint32_t c = char_at(question, qn, i, &l);
        if (c == 0x4E0D || c == 0x6CA1) return false;                                /* 不 没 */
        if (i == act && (c == 0x672A || c == 0x65E0 || c == 0x975E)) return false; /* 未… 无… 非… (未满: a limit) */
        i += l;
    }
    size_t pa[MAX_ACT_PAIRS], ps[MAX_ACT_PAIRS];
    const size_t n_act = cjk_pairs(question, act, act_end, pa, MAX_ACT_PAIRS);
    if (n_act < 2) return false;
    size_t verb = n_act; /* after an adverb the question puts first, the pair that is its verb */
    const char *adv = word_at(question, act_end, act, ZH_ADVERB, COUNT(ZH_ADVERB));
    for (size_t k = 0; adv && k < n_act; k++)
        if (pa[k] == act + strlen(adv)) verb = k;
    /* the subject: what comes before the permission word after the last ，(a condition before it), 是否 left out */
    size_t subj = 0;
    for (size_t i = 0; i < p;) {
        size_t l;
        uint32_t c = char_at(question, qn, i, &l);
        i += l;
        if (clause_mark(c)) subj = i;
    }
    const bool conditioned = subj > 0; /* 受让方擅自改变土地用途，承包方可以解除合同吗 */
    size_t subj_end = p;
    if (subj_end >= subj + 6 && !memcmp(question + subj_end - 6, "是否", 6)) subj_end -= 6;
    size_t n_subj = cjk_pairs(question, subj, subj_end, ps, MAX_ACT_PAIRS);
    if (!n_subj) n_subj = cjk_pairs(question, 0, subj_end, ps, MAX_ACT_PAIRS); /* 妻子未经丈夫同意，能否… */

    for (size_t i = 0; i < n;) {
        const char *w = word_at(text, n, i, ZH_PROHIBITION, COUNT(ZH_PROHIBITION));
        if (!w) {
            size_t l;
            char_at(text, n, i, &l);
            i += l;
            continue;
        }
        const size_t m = i, after = i + strlen(w);
        i = after;
        if (has_at(text, n, after, "不")) continue; /* 不得不: must */
        /* what is forbidden: up to the end of its phrase (、 does not end it: 泄露、使用) */
        size_t b = after;
        while (b < n) {
            size_t l;
            uint32_t c = char_at(text, n, b, &l);
            if (sentence_mark(c) || c == 0xFF0C || c == ',' || c == 0xFF1A || c == ':') break;
            b += l;
        }
        if (b >= after + 3 && has_at(text, b, b - 3, "的")) continue; /* 不能胜任工作的，…: a condition */
        /* the act's first pair (its verb: 扣押, 翻唱 …) right after the word, and at least half of its pairs */
        size_t vb = after;
        if (has_at(text, b, after, "违反")) { /* 不得违反本法规定延长…: the verb comes after the idiom */
            const char *r = memmem(text + after, b - after, "规定", 6);
            if (r && cq_utf8_count(text + after, (size_t)(r - text) - after) <= 12) vb = (size_t)(r - text) + 6;
        }
        for (int k = 0; k < VERB_WITHIN + 1 && vb < b; k++) {
            size_t l;
            char_at(text, n, vb, &l);
            vb += l;
        }
        const size_t hit = pairs_in(question, qn, pa, n_act, text, after, b);
        if (hit < 2 || 2 * hit < n_act) continue;
        if (!pairs_in(question, qn, pa, 1, text, after, vb) &&
            !(verb < n_act && pairs_in(question, qn, pa + verb, 1, text, after, vb)))
            continue;
        if (act_as_modifier(question, qn, pa, n_act, text, after, b)) continue;
        /* whom: the sentence before the word (its label left out); when it names someone, the question's subject
         * must be among them, or everyone (任何人 / 任何单位 不得) */
        cq_text_range s = cq_span_sentence(text, n, m, b, 0, NULL, NULL);
        size_t a = s.start < m ? s.start : m;
        if (has_at(text, m, a, "第")) { /* the clause's own label (第十五条 禁止…) names no one */
            size_t k = a;
            while (k < m && !blank(text[k])) k++;
            while (k < m && blank(text[k])) k++;
            if (k < m || (k == m && k > a)) a = k;
        }
        if (has_cjk_pair(text, a, m) && !memmem(text + a, m - a, "任何", 6) &&
            !pairs_in(question, qn, ps, n_subj, text, a, m))
            continue; /* (a question naming no one: only what forbids no one or everyone) */
        /* a forbidding under a condition (…的，用人单位不得…) says nothing of the general case */
        if (memmem(text + a, m - a, "的，", 6) || memmem(text + a, m - a, "的,", 4)) continue;
        /* nor one with an exception (…，但…除外; 除…外，不得…) when the question puts a condition of its own */
        if (conditioned && (memmem(text + s.start, s.end - s.start, "除外", 6) ||
                            memmem(text + s.start, s.end - s.start, "但", 3) || has_at(text, n, a, "除")))
            continue;
        if (sentence) *sentence = s;
        return true;
    }
    return false;
}

/* ---- a question whether someone may be subjected to an act a clause forbids in their case ------------------- */

/* cq_span_protects (answer_span.h). */
bool cq_span_protects(const char *question, const char *text, size_t n, cq_text_range *sentence) {
    const size_t qn = strlen(question);
    /* the question: [who and when] permission-word 被 act [吗/呢/？] */
    size_t p = SIZE_MAX, act = 0;
    static const char *const may_be[] = {"能", "会"}; /* 能被 / 会被 辞退吗: may, or will, they be */
    for (size_t i = 0; i < qn && p == SIZE_MAX; i++) {
        const char *w = word_at(question, qn, i, ZH_PERMISSION, COUNT(ZH_PERMISSION));
        if (!w) w = word_at(question, qn, i, may_be, COUNT(may_be));
        if (w && has_at(question, qn, i + strlen(w), "被")) p = i, act = i + strlen(w) + 3;
    }
    if (p == SIZE_MAX) return false;
    const size_t act_end = act_end_at(question, qn, act);
    if (act_end - act < 6) return false;
    for (size_t i = act; i < act_end;) {
        size_t l;
        const uint32_t c = char_at(question, qn, i, &l);
        if (c == 0x4E0D || c == 0x6CA1) return false; /* 不 没: not asking leave */
        i += l;
    }
    /* the act as asked and in the statutes' words (辞退 → 解除劳动合同) */
    char *asked = strndup(question + act, act_end - act);
    int failed = 0;
    char *legal = asked ? cq_lexicon_expand(asked, &failed) : NULL;
    /* who and when: the question's pairs before the permission word */
    size_t pw[MAX_ACT_PAIRS];
    const size_t n_who = cjk_pairs(question, 0, p, pw, MAX_ACT_PAIRS);
    cq_text_range it[CQ_SPAN_MAX_ITEMS];
    const size_t n_items = n_who >= 2 && asked ? cq_span_items(text, n, it, CQ_SPAN_MAX_ITEMS) : 0;
    bool found = false;
    /* the items' lead: "…有下列情形之一的，[X]不得…<act>…：" right before the first item */
    const char *cond = n_items ? memmem(text, it[0].start, "下列情形之一", 18) : NULL;
    if (cond) {
        const size_t c0 = (size_t)(cond - text), lead_end = it[0].start;
        size_t m = c0;
        const char *w = NULL;
        while (m < lead_end && !(w = word_at(text, lead_end, m, ZH_PROHIBITION, COUNT(ZH_PROHIBITION)))) {
            size_t l;
            char_at(text, n, m, &l);
            m += l;
        }
        bool act_there = false;
        if (w) { /* after the prohibition word, before the items */
            const size_t a = m + strlen(w);
            char *forbidden = strndup(text + a, lead_end - a);
            act_there = forbidden && (strstr(forbidden, asked) || cq_lexicon_phrases_in(legal, forbidden) > 0);
            free(forbidden);
        }
        /* the question's case is one of the items: two of its pairs there that the lead does not hold */
        for (size_t k = 0; act_there && k < n_items && !found; k++) {
            size_t in_item = 0;
            for (size_t j = 0; j < n_who; j++) {
                const size_t l = pair_len(question, qn, pw[j]);
                const bool in_lead = memmem(text, lead_end, question + pw[j], l) != NULL;
                in_item += !in_lead && memmem(text + it[k].start, it[k].end - it[k].start, question + pw[j], l);
            }
            if (in_item >= 2) {
                found = true;
                if (sentence) {
                    cq_text_range s = cq_span_sentence(text, n, m, m, 0, NULL, NULL);
                    *sentence = (cq_text_range){s.start < m ? s.start : m, it[k].end};
                }
            }
        }
    }
    free(legal);
    free(asked);
    return found;
}

/* ---- a yes/no question the clause answers with a negation (cq_span_denies) ---------------------------------- */

/* Words that deny what follows them; longer first where one holds another. */
static const char *const ZH_DENY[] = {"并未", "从未", "尚未", "没有", "拒不", "拒绝", "否认", "未", "没", "不", "无", "非"};
/* How a question may lead its predicate (是否已经支付…, 是否有房屋): left out before it is looked for. */
static const char *const ZH_PRED_LEAD[] = {"已经", "可以", "应当", "应该", "已", "曾", "有", "会", "能", "要"};

#define DENY_MAX_CHARS 64 /* a predicate's characters looked at */
#define DENY_WINDOW 2 /* characters a denying word may stand before the predicate */

/* The byte offsets of the characters of s[0..n), at most max (the last entry the end), into at; their count. */
static size_t char_offsets(const char *s, size_t n, size_t *at, size_t max) {
    size_t k = 0, i = 0;
    while (i < n && k < max) {
        size_t len;
        at[k++] = i;
        char_at(s, n, i, &len);
        i += len;
    }
    at[k] = i;
    return k;
}

/* Whether a sentence ends at text[i]: 。；！？ or a line break (its length into *len). */
static bool sentence_end_at(const char *text, size_t n, size_t i, size_t *len) {
    static const char *const ends[] = {"\xe3\x80\x82", "\xef\xbc\x9b", "\xef\xbc\x81", "\xef\xbc\x9f", "\n"};
    const char *end = word_at(text, n, i, ends, COUNT(ends));
    if (end) *len = strlen(end);
    return end != NULL;
}

bool cq_span_denies(const char *question, const char *text, size_t n, cq_text_range *sentence) {
    const char *p = question ? strstr(question, "是否") : NULL;
    if (!p || !text) return false;
    const char *pred = p + strlen("是否");
    size_t plen = strlen(pred);
    static const char *const tail[] = {"？", "?", "吗", "呢", " "};
    for (bool trimmed = true; trimmed;) { /* "…抚养费吗？ " → "…抚养费" */
        trimmed = false;
        for (size_t t = 0; t < COUNT(tail); t++) {
            const size_t l = strlen(tail[t]);
            if (plen >= l && !memcmp(pred + plen - l, tail[t], l)) plen -= l, trimmed = true;
        }
    }
    const char *lead = word_at(pred, plen, 0, ZH_PRED_LEAD, COUNT(ZH_PRED_LEAD));
    if (lead) pred += strlen(lead), plen -= strlen(lead);
    if (word_at(pred, plen, 0, ZH_DENY, COUNT(ZH_DENY))) return false; /* 是否不…: asks a negation */
    size_t at[DENY_MAX_CHARS + 1];
    const size_t chars = char_offsets(pred, plen, at, DENY_MAX_CHARS);
    if (chars < 2) return false;
    const size_t head = at[2]; /* the bytes of its first two characters */
    size_t n_pairs = 0;        /* its distinct pairs of adjacent characters: [at[i], at[i + 2]) */
    size_t pair[DENY_MAX_CHARS];
    for (size_t i = 0; i + 1 < chars; i++) {
        bool seen = false;
        for (size_t j = 0; j < n_pairs && !seen; j++)
            seen = at[i + 2] - at[i] == at[pair[j] + 2] - at[pair[j]] &&
                   !memcmp(pred + at[i], pred + at[pair[j]], at[i + 2] - at[i]);
        if (!seen) pair[n_pairs++] = i;
    }
    double best = 0;
    size_t best_start = 0, best_end = 0, best_at = 0;
    for (size_t start = 0; start < n;) {
        size_t end = start, len = 0;
        while (end < n && !sentence_end_at(text, n, end, &len)) end++;
        const char *sent = text + start;
        const size_t slen = end - start;
        const char *hit = memmem(sent, slen, pred, head);
        if (hit) {
            size_t held = 0;
            for (size_t j = 0; j < n_pairs; j++)
                held += memmem(sent, slen, pred + at[pair[j]], at[pair[j] + 2] - at[pair[j]]) != NULL;
            const double share = (double)held / (double)n_pairs;
            if (share >= 0.5 && share > best) {
                best = share;
                best_start = start;
                best_end = end;
                best_at = (size_t)(hit - text);
            }
        }
        start = end < n ? end + (len ? len : 1) : n;
    }
    if (best <= 0) return false;
    /* a denying word that ends at most DENY_WINDOW characters before the predicate, within its sentence */
    bool denied = false;
    size_t end = best_at;
    for (int k = 0; k <= DENY_WINDOW && !denied; k++) {
        for (size_t w = 0; w < COUNT(ZH_DENY) && !denied; w++) {
            const size_t l = strlen(ZH_DENY[w]);
            denied = end >= best_start + l && has_at(text, end, end - l, ZH_DENY[w]);
        }
        if (end <= best_start) break;
        end = prev_char(text, end); /* one character back */
    }
    /* the question's subject (before 是否), when it has two characters or more: one of its pairs in the sentence
     * before the predicate ("王x2与王x5是否办理了结婚登记" → "被告王x2与王x5(已死亡)未办理…") */
    const size_t slen = (size_t)(p - question);
    size_t sat[DENY_MAX_CHARS + 1];
    const size_t schars = char_offsets(question, slen, sat, DENY_MAX_CHARS);
    bool subject = schars < 2;
    for (size_t i = 0; denied && !subject && i + 1 < schars; i++)
        subject = memmem(text + best_start, best_at - best_start, question + sat[i], sat[i + 2] - sat[i]) != NULL;
    denied = denied && subject;
    if (denied && sentence) *sentence = (cq_text_range){best_start, best_end};
    return denied;
}
