/* What texts say about versions (core/versions_text.h): dates in both languages, the group key of a regulation's name
 * or title, a document's version dates and label, and the date or comparison a question asks for. */
#define _GNU_SOURCE /* strcasestr, timegm */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "core/versions_text.h"

/* ---- days ---------------------------------------------------------------------------------------------------- */

int cq_date_last_day(int year, int month) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12) return 0;
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

cq_date cq_date_make(int year, int month, int day) {
    if (year < 1000 || year > 9999 || month < 1 || month > 12 || day < 1 || day > cq_date_last_day(year, month))
        return 0;
    return (cq_date)(year * 10000 + month * 100 + day);
}

bool cq_date_valid(cq_date d) { return d > 0 && cq_date_make(d / 10000, d / 100 % 100, d % 100) == d; }

cq_date cq_date_parse_iso(const char *s) {
    if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-') return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && !isdigit((unsigned char)s[i])) return 0;
    return cq_date_make(atoi(s), atoi(s + 5), atoi(s + 8));
}

char *cq_date_format(cq_date d, char out[11]) {
    if (d <= 0) out[0] = 0;
    else snprintf(out, 11, "%04d-%02d-%02d", (int)(d / 10000 % 10000), (int)(d / 100 % 100), (int)(d % 100));
    return out;
}

cq_date cq_date_today(void) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    return cq_date_make(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

cq_date cq_date_add_days(cq_date d, int days) {
    if (!cq_date_valid(d)) return 0;
    struct tm tm = {.tm_year = d / 10000 - 1900, .tm_mon = d / 100 % 100 - 1, .tm_mday = d % 100 + days, .tm_hour = 12};
    timegm(&tm); /* normalizes the day */
    return cq_date_make(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

cq_date cq_date_add_months(cq_date d, int months) {
    if (!cq_date_valid(d)) return 0;
    int y = d / 10000, m = d / 100 % 100 - 1 + months, day = d % 100;
    y += m >= 0 ? m / 12 : -((11 - m) / 12);
    m = ((m % 12) + 12) % 12 + 1;
    int last = cq_date_last_day(y, m);
    return cq_date_make(y, m, day > last ? last : day);
}

/* ---- code points --------------------------------------------------------------------------------------------- */

/* A text as code points with the byte offset of each (off[n] = the text's length). */
typedef struct {
    uint32_t *cp;
    size_t *off;
    size_t n;
} cps;

static bool cps_of(const char *s, cps *out) {
    size_t len = strlen(s);
    out->cp = malloc((len + 1) * sizeof *out->cp);
    out->off = malloc((len + 1) * sizeof *out->off);
    out->n = 0;
    if (!out->cp || !out->off) {
        free(out->cp);
        free(out->off);
        out->cp = NULL;
        out->off = NULL;
        return false;
    }
    size_t i = 0;
    while (i < len) {
        size_t l;
        uint32_t c = cq_utf8_decode(s + i, len - i, &l);
        /* full-width digits and letters as ASCII: dates and names are matched on them */
        if (c >= 0xFF10 && c <= 0xFF19) c = '0' + (c - 0xFF10);
        out->cp[out->n] = c;
        out->off[out->n++] = i;
        i += l ? l : 1;
    }
    out->off[out->n] = len;
    return true;
}

static void cps_free(cps *c) {
    free(c->cp);
    free(c->off);
}

/* Does the text at i spell word (UTF-8)? Returns its length in code points, else 0. ASCII letters match either
 * case. */
static size_t at_word(const cps *t, size_t i, const char *word) {
    size_t k = 0;
    for (const char *w = word; *w;) {
        size_t l;
        uint32_t c = cq_utf8_decode(w, strlen(w), &l);
        w += l;
        if (i + k >= t->n) return 0;
        uint32_t x = t->cp[i + k];
        if (x < 128 && c < 128) {
            if (tolower((int)x) != tolower((int)c)) return 0;
        } else if (x != c) {
            return 0;
        }
        k++;
    }
    return k;
}

/* The first of words found at i: its length (and *which), else 0. */
static size_t at_any(const cps *t, size_t i, const char *const *words, size_t n_words, size_t *which) {
    for (size_t w = 0; w < n_words; w++) {
        size_t k = at_word(t, i, words[w]);
        if (k) {
            if (which) *which = w;
            return k;
        }
    }
    return 0;
}

static bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
static bool is_alpha(uint32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

static int cn_digit(uint32_t c) {
    static const uint32_t d[] = {0x3007, 0x4E00, 0x4E8C, 0x4E09, 0x56DB, 0x4E94, 0x516D, 0x4E03, 0x516B, 0x4E5D};
    if (c == 0x96F6 || c == 0x25CB || c == 'O') return 0; /* 零, ○ (a circle often typed for 〇) */
    for (int i = 0; i < 10; i++)
        if (d[i] == c) return i;
    return -1;
}

static void skip_spaces(const cps *t, size_t *i) {
    while (*i < t->n && cq_is_space(t->cp[*i])) (*i)++;
}

/* ---- dates --------------------------------------------------------------------------------------------------- */

/* A date at i: year, month (0: none) and day (0: none); *end after it. */
typedef struct {
    int y, m, d;
    size_t start, end; /* code points */
} date_at;

/* A number of 1-2 Arabic digits or a Chinese numeral up to 三十一 at *i. */
static int small_number(const cps *t, size_t *i) {
    size_t j = *i;
    if (j < t->n && is_digit(t->cp[j])) {
        int v = 0, k = 0;
        while (j < t->n && is_digit(t->cp[j]) && k < 3) v = v * 10 + (int)(t->cp[j++] - '0'), k++;
        if (k > 2 || (j < t->n && is_digit(t->cp[j]))) return -1;
        *i = j;
        return v;
    }
    char buf[32];
    size_t b = 0;
    while (j < t->n && b < 24 && cq_is_cn_numeral(t->cp[j])) b += cq_utf8_encode(t->cp[j++], buf + b);
    if (!b) return -1;
    size_t used;
    long v = cq_number_parse(buf, b, &used);
    if (v < 0 || used != b || v > 31) return -1;
    *i = j;
    return (int)v;
}

/* 2018年10月26日 / 二〇一八年十月二十六日 / 2018年10月 / 2018年 (spaces allowed between the parts). */
static bool date_cn(const cps *t, size_t i, date_at *out) {
    if (i > 0 && (is_digit(t->cp[i - 1]) || cn_digit(t->cp[i - 1]) >= 0)) return false;
    int y = 0;
    size_t j = i;
    if (j + 4 <= t->n && is_digit(t->cp[j])) {
        for (int k = 0; k < 4; k++) {
            if (!is_digit(t->cp[j])) return false;
            y = y * 10 + (int)(t->cp[j++] - '0');
        }
    } else {
        for (int k = 0; k < 4; k++) {
            int d = j < t->n ? cn_digit(t->cp[j]) : -1;
            if (d < 0) return false;
            y = y * 10 + d;
            j++;
        }
    }
    if (y < 1000 || (j < t->n && is_digit(t->cp[j]))) return false;
    skip_spaces(t, &j);
    if (j >= t->n || t->cp[j] != 0x5E74) return false; /* 年 */
    j++;
    *out = (date_at){y, 0, 0, i, j};
    size_t k = j;
    skip_spaces(t, &k);
    int m = small_number(t, &k);
    if (m < 1 || m > 12) return true;
    skip_spaces(t, &k);
    if (k >= t->n || t->cp[k] != 0x6708) return true; /* 月 */
    k++;
    out->m = m;
    out->end = k;
    size_t l = k;
    skip_spaces(t, &l);
    int d = small_number(t, &l);
    if (d < 1 || d > cq_date_last_day(y, m)) return true;
    skip_spaces(t, &l);
    if (l >= t->n || (t->cp[l] != 0x65E5 && t->cp[l] != 0x53F7)) return true; /* 日 号 */
    out->d = d;
    out->end = l + 1;
    return true;
}

/* 2018-10-26, 2018.10.26, 2018/10/26 (one separator throughout), not inside a longer number. */
static bool date_numeric(const cps *t, size_t i, date_at *out) {
    if (i > 0 && (is_digit(t->cp[i - 1]) || t->cp[i - 1] == '.')) return false;
    if (i + 8 > t->n) return false;
    int y = 0;
    size_t j = i;
    for (int k = 0; k < 4; k++) {
        if (!is_digit(t->cp[j])) return false;
        y = y * 10 + (int)(t->cp[j++] - '0');
    }
    uint32_t sep = t->cp[j];
    if (sep != '-' && sep != '.' && sep != '/') return false;
    j++;
    int parts[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        int k = 0;
        while (j < t->n && is_digit(t->cp[j]) && k < 3) parts[p] = parts[p] * 10 + (int)(t->cp[j++] - '0'), k++;
        if (k < 1 || k > 2) return false;
        if (p == 0) {
            if (j >= t->n || t->cp[j] != sep) return false;
            j++;
        }
    }
    if (j < t->n && (is_digit(t->cp[j]) || (t->cp[j] == sep && j + 1 < t->n && is_digit(t->cp[j + 1])))) return false;
    if (!cq_date_make(y, parts[0], parts[1])) return false;
    *out = (date_at){y, parts[0], parts[1], i, j};
    return true;
}

static const char *const month_names[12][2] = {
    {"january", "jan"}, {"february", "feb"}, {"march", "mar"},     {"april", "apr"},
    {"may", "may"},     {"june", "jun"},     {"july", "jul"},       {"august", "aug"},
    {"september", "sep"}, {"october", "oct"}, {"november", "nov"}, {"december", "dec"},
};

/* A month name at i (whole word, "Sept." and "Oct." too): 1-12 and *end; 0 when none. */
static int month_name(const cps *t, size_t i, size_t *end) {
    if (i > 0 && is_alpha(t->cp[i - 1])) return 0;
    for (int m = 0; m < 12; m++)
        for (int f = 0; f < 2; f++) {
            size_t k = at_word(t, i, month_names[m][f]);
            if (!k) continue;
            size_t j = i + k;
            if (f == 1 && m == 8 && j < t->n && (t->cp[j] | 32) == 't') j++; /* Sept */
            if (j < t->n && is_alpha(t->cp[j])) continue;
            if (f == 1 && j < t->n && t->cp[j] == '.') j++;
            *end = j;
            return m + 1;
        }
    return 0;
}

static int year4(const cps *t, size_t *i) {
    size_t j = *i;
    if (j + 4 > t->n || (j > 0 && is_digit(t->cp[j - 1]))) return 0;
    int y = 0;
    for (int k = 0; k < 4; k++) {
        if (!is_digit(t->cp[j])) return 0;
        y = y * 10 + (int)(t->cp[j++] - '0');
    }
    if (j < t->n && is_digit(t->cp[j])) return 0;
    if (y < 1000) return 0;
    *i = j;
    return y;
}

static int ordinal_day(const cps *t, size_t *i) {
    size_t j = *i;
    int d = 0, k = 0;
    if (j > 0 && (is_digit(t->cp[j - 1]) || is_alpha(t->cp[j - 1]))) return 0;
    while (j < t->n && is_digit(t->cp[j]) && k < 3) d = d * 10 + (int)(t->cp[j++] - '0'), k++;
    if (k < 1 || k > 2 || d < 1 || d > 31) return 0;
    if (at_word(t, j, "st") || at_word(t, j, "nd") || at_word(t, j, "rd") || at_word(t, j, "th")) j += 2;
    if (j < t->n && is_alpha(t->cp[j])) return 0;
    *i = j;
    return d;
}

/* 26 October 2018 / 26th of October, 2018 / October 26, 2018 / October 2018. */
static bool date_english(const cps *t, size_t i, date_at *out) {
    size_t j = i, end;
    int d = ordinal_day(t, &j);
    if (d) {
        skip_spaces(t, &j);
        if (at_word(t, j, "of ")) j += 3;
        int m = month_name(t, j, &end);
        if (!m) return false;
        j = end;
        if (j < t->n && t->cp[j] == ',') j++;
        skip_spaces(t, &j);
        int y = year4(t, &j);
        if (!y || !cq_date_make(y, m, d)) return false;
        *out = (date_at){y, m, d, i, j};
        return true;
    }
    int m = month_name(t, i, &end);
    if (!m) return false;
    j = end;
    skip_spaces(t, &j);
    size_t k = j;
    d = ordinal_day(t, &k);
    if (d) {
        if (k < t->n && t->cp[k] == ',') k++;
        skip_spaces(t, &k);
        int y = year4(t, &k);
        if (!y || !cq_date_make(y, m, d)) return false;
        *out = (date_at){y, m, d, i, k};
        return true;
    }
    if (j < t->n && t->cp[j] == ',') j++;
    skip_spaces(t, &j);
    int y = year4(t, &j);
    if (!y) return false;
    *out = (date_at){y, m, 0, i, j};
    return true;
}

static bool date_any(const cps *t, size_t i, date_at *out) {
    return date_numeric(t, i, out) || date_cn(t, i, out) || date_english(t, i, out);
}

void cq_dates_scan(const char *text, cq_date_fn fn, void *ctx) {
    cps t;
    if (!text || !cps_of(text, &t)) return;
    for (size_t i = 0; i < t.n; i++) {
        date_at a;
        if (!date_any(&t, i, &a)) continue;
        if (a.m && a.d && fn(ctx, cq_date_make(a.y, a.m, a.d), t.off[a.start], t.off[a.end])) break;
        i = a.end - 1;
    }
    cps_free(&t);
}

/* ---- group keys ---------------------------------------------------------------------------------------------- */

/* Words that say which version a name is, not which regulation ("公司法（2018年修正）", "…_Amended_and_Restated"). */
static const char *const version_words_zh[] = {
    "修正文本", "修订文本", "修正本", "修订本", "修正版", "修订版", "最新版", "最新修正", "最新修订", "现行有效",
    "已废止", "已失效", "已修改", "已被修改", "部分失效", "全文", "修正", "修订", "修改", "年版", "版本", "新版",
    "旧版", "试行", "暂行", "公布", "施行", "颁布", "通过", "废止", "失效", "有效", "现行", "最新", "版",
};
static const char *const version_words_en[] = {
    "amended and restated", "amended & restated", "as amended", "restated", "amended", "revised", "consolidated",
    "version", "final", "clean", "executed", "signed", "current",
};

static bool is_version_word_at(const cps *t, size_t i, size_t *len) {
    size_t k = at_any(t, i, version_words_zh, sizeof version_words_zh / sizeof *version_words_zh, NULL);
    if (!k) {
        if (i > 0 && is_alpha(t->cp[i - 1])) return false;
        k = at_any(t, i, version_words_en, sizeof version_words_en / sizeof *version_words_en, NULL);
        if (k && i + k < t->n && is_alpha(t->cp[i + k])) k = 0;
    }
    if (k) *len = k;
    return k > 0;
}

/* An instrument that amends another (修正案, 关于修改…的决定, Amendment No. 2) is one of its own. */
static bool is_amendment(const cps *t) {
    for (size_t i = 0; i < t->n; i++) {
        if (at_word(t, i, "修正案") || at_word(t, i, "关于修改") || at_word(t, i, "修改决定")) return true;
        if ((i == 0 || !is_alpha(t->cp[i - 1])) && at_word(t, i, "amendment")) return true;
    }
    return false;
}

static bool is_open_bracket(uint32_t c) { return c == '(' || c == '[' || c == 0x3010 || c == 0x3014 || c == 0xFF08; }
static bool is_close_bracket(uint32_t c) { return c == ')' || c == ']' || c == 0x3011 || c == 0x3015 || c == 0xFF09; }

/* Characters of a bracket group that only says which version: digits, date words, version words, separators. */
static bool bracket_is_version(const cps *t, size_t a, size_t b, bool amendment) {
    bool dated = false, worded = false;
    for (size_t i = a; i < b;) {
        date_at d;
        size_t k;
        if (date_numeric(t, i, &d)) {
            dated = true;
            i = d.end;
        } else if (amendment) {
            return false; /* an amendment keeps everything but a plain date: 宪法修正案（2004年） */
        } else if (date_cn(t, i, &d)) {
            dated = true;
            i = d.end;
        } else if (is_version_word_at(t, i, &k)) {
            worded = true;
            i += k;
        } else if (is_digit(t->cp[i]) || cq_is_space(t->cp[i]) || t->cp[i] == '-' || t->cp[i] == '.' ||
                   t->cp[i] == '/' || t->cp[i] == ',' || t->cp[i] == 0x7B2C || t->cp[i] == 0x6B21 ||
                   cn_digit(t->cp[i]) >= 0 || t->cp[i] == 0x5341 || (t->cp[i] | 32) == 'v') {
            i++; /* digits, 第…次, v2 */
        } else {
            return false;
        }
    }
    return dated || worded;
}

/* A 4-digit year (19xx, 20xx) standing alone in a name: "公司法2018", "NDA_2017", "20181026". */
static size_t bare_year_at(const cps *t, size_t i) {
    if (i > 0 && is_digit(t->cp[i - 1])) return 0;
    size_t j = i;
    int y = year4(t, &j);
    if (y >= 1900 && y <= 2099) return 4;
    /* 8 digits that are a date: 20181026 */
    j = i;
    int v = 0, k = 0;
    while (j < t->n && is_digit(t->cp[j]) && k < 9) v = v * 10 + (int)(t->cp[j++] - '0'), k++;
    if (k == 8 && cq_date_valid((cq_date)v) && v / 10000 >= 1900) return 8;
    return 0;
}

/* A version number standing alone in a Latin name: v2, V1.3, 2.0, rev3. */
static size_t version_number_at(const cps *t, size_t i) {
    if (i > 0 && (is_alpha(t->cp[i - 1]) || is_digit(t->cp[i - 1]) || t->cp[i - 1] == '.')) return 0;
    size_t j = i;
    if (at_word(t, j, "rev")) j += 3;
    else if ((t->cp[j] | 32) == 'v') j++;
    size_t digits = j;
    while (j < t->n && (is_digit(t->cp[j]) || (t->cp[j] == '.' && j + 1 < t->n && is_digit(t->cp[j + 1])))) j++;
    if (j == digits) return 0;
    bool dotted = false;
    for (size_t k = digits; k < j; k++) dotted |= t->cp[k] == '.';
    if (!dotted && digits == i) return 0; /* a plain number without v / rev is not a version number */
    if (j < t->n && (is_alpha(t->cp[j]) || is_digit(t->cp[j]))) return 0;
    return j - i;
}

static bool is_key_separator(uint32_t c) {
    return cq_is_space(c) || c == '_' || c == '-' || c == '.' || c == ',' || c == ':' || c == ';' || c == '/' ||
           c == 0x00B7 || c == 0x3001 || c == 0x300A || c == 0x300B || c == 0x3008 || c == 0x3009 || c == 0x201C ||
           c == 0x201D || c == 0x2018 || c == 0x2019 || c == '"' || c == '\'' || c == 0xFF1A || c == 0x2014;
}

/* The key of a name or title (see cq_version_title_key); amendment: keep everything but plain dates. */
static void key_of(const char *text, char *out, size_t cap) {
    out[0] = 0;
    if (!text || cap < 8) return;
    char *folded = cq_text_fold(text, strlen(text));
    cps t;
    if (!folded || !cps_of(folded, &t)) {
        free(folded);
        return;
    }
    free(folded);
    bool amendment = is_amendment(&t);
    cq_strbuf b = {0};
    for (size_t i = 0; i < t.n;) {
        size_t k;
        if ((k = at_word(&t, i, "中华人民共和国"))) {
            i += k;
            continue;
        }
        if (is_open_bracket(t.cp[i])) {
            size_t j = i + 1;
            while (j < t.n && !is_close_bracket(t.cp[j]) && !is_open_bracket(t.cp[j])) j++;
            if (j < t.n && is_close_bracket(t.cp[j]) && bracket_is_version(&t, i + 1, j, amendment)) {
                i = j + 1;
                continue;
            }
            i++; /* the bracket itself says nothing; what it holds stays */
            continue;
        }
        if (is_close_bracket(t.cp[i]) || is_key_separator(t.cp[i])) {
            i++;
            continue;
        }
        date_at d;
        if (date_numeric(&t, i, &d)) {
            i = d.end;
            continue;
        }
        if (!amendment) {
            if (date_cn(&t, i, &d)) {
                i = d.end;
                continue;
            }
            if ((k = bare_year_at(&t, i))) {
                i += k;
                continue;
            }
            if ((k = version_number_at(&t, i))) {
                i += k;
                continue;
            }
            /* version words only where they end the name ("公司法修订版") or stand between separators */
            if (is_version_word_at(&t, i, &k)) {
                size_t j = i + k;
                while (j < t.n && (is_key_separator(t.cp[j]) || is_close_bracket(t.cp[j]))) j++;
                bool latin = is_alpha(t.cp[i]);
                if (j >= t.n || latin || bare_year_at(&t, j) || date_numeric(&t, j, &d) || is_open_bracket(t.cp[j])) {
                    i += k;
                    continue;
                }
            }
        }
        cq_strbuf_put_cp(&b, t.cp[i]);
        i++;
    }
    cps_free(&t);
    if (!b.failed && b.data) {
        if (b.len < cap) {
            memcpy(out, b.data, b.len + 1);
        } else {
            /* too long: its start and a hash of the whole, so that names differing only at the end stay apart */
            uint64_t h = 1469598103934665603ull;
            for (size_t i = 0; i < b.len; i++) h = (h ^ (unsigned char)b.data[i]) * 1099511628211ull;
            size_t n = cap - 18;
            while (n > 0 && ((unsigned char)b.data[n] & 0xC0) == 0x80) n--; /* whole code points */
            memcpy(out, b.data, n);
            snprintf(out + n, cap - n, "#%016llx", (unsigned long long)h);
        }
    }
    cq_strbuf_free(&b);
}

void cq_version_title_key(const char *title, char *out, size_t cap) { key_of(title, out, cap); }

/* A name that says nothing of its content ("scan0001", "download (3)", "文档1"): then the title names the group. */
static bool name_is_informative(const char *name) {
    static const char *const junk[] = {"document", "download", "scan", "file", "untitled", "copy", "new", "final",
                                       "draft", "doc", "docx", "pdf", "img", "image", "page", "attachment"};
    if (cq_utf8_has_cjk(name)) {
        /* 文档1, 新建文档, 附件2: the generic Chinese file names */
        static const char *const junk_zh[] = {"新建文档", "文档", "附件", "扫描件", "未命名", "下载"};
        char k[CQ_VERSION_KEY_MAX];
        key_of(name, k, sizeof k);
        for (size_t i = 0; i < sizeof junk_zh / sizeof *junk_zh; i++) {
            size_t n = strlen(junk_zh[i]);
            if (!strncmp(k, junk_zh[i], n)) {
                const char *p = k + n;
                while (isdigit((unsigned char)*p)) p++;
                if (!*p) return false;
            }
        }
        return true;
    }
    char w[64];
    size_t n = 0;
    for (const char *p = name;; p++) {
        if (*p && isalpha((unsigned char)*p)) {
            if (n < sizeof w - 1) w[n++] = (char)tolower((unsigned char)*p);
            continue;
        }
        w[n] = 0;
        if (n >= 3) {
            bool is_junk = false;
            for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) is_junk |= !strcmp(w, junk[i]);
            if (!is_junk) return true;
        }
        n = 0;
        if (!*p) break;
    }
    return false;
}

/* A title that names a regulation (not a contract, not a notice heading): its key ends in one of these. */
static bool title_is_regulation(const char *key) {
    static const char *const ends[] = {"法", "条例", "规定", "办法", "细则", "规则", "决定", "解释", "准则",
                                       "通则", "规程", "法典"};
    if (strstr(key, "合同") || strstr(key, "协议")) return false;
    size_t n = strlen(key);
    if (cq_utf8_count(key, n) < 3) return false;
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        size_t l = strlen(ends[i]);
        if (n >= l && !strcmp(key + n - l, ends[i])) return true;
    }
    return false;
}

void cq_version_key(const char *name, const char *title, char *out, size_t cap) {
    key_of(name, out, cap);
    if (out[0] && name_is_informative(name)) return;
    char tk[CQ_VERSION_KEY_MAX];
    key_of(title, tk, sizeof tk);
    if (tk[0] && title_is_regulation(tk)) snprintf(out, cap, "%s", tk);
}

/* ---- a document's version ------------------------------------------------------------------------------------ */

/* What the words after (Chinese) or before (English) a date say it is. */
enum { DATE_OTHER = 0, DATE_PROMULGATED, DATE_EFFECTIVE, DATE_REPEALED };

typedef struct {
    const char *zh;   /* the word, or NULL */
    const char *en;
    int kind;
    const char *label; /* what the label says ("修正"), NULL: not a label word */
} date_word;

static const date_word date_words[] = {
    {"废止", "repealed", DATE_REPEALED, NULL},
    {"失效", "ceased to be in force", DATE_REPEALED, NULL},
    {"起施行", "effective", DATE_EFFECTIVE, NULL},
    {"起实施", "takes effect", DATE_EFFECTIVE, NULL},
    {"起生效", "in force", DATE_EFFECTIVE, NULL},
    {"施行", "comes into force", DATE_EFFECTIVE, NULL},
    {"修订", "amended and restated", DATE_PROMULGATED, "修订"},
    {"修正", "as amended", DATE_PROMULGATED, "修正"},
    {"修改", "amended", DATE_PROMULGATED, "修正"},
    {"通过", "adopted", DATE_PROMULGATED, "通过"},
    {"公布", "dated", DATE_PROMULGATED, "公布"},
    {"发布", "entered into", DATE_PROMULGATED, "发布"},
    {"颁布", "made", DATE_PROMULGATED, "颁布"},
    {"批准", "signed", DATE_PROMULGATED, "批准"},
    {"印发", "executed", DATE_PROMULGATED, "印发"},
};

typedef struct {
    date_at d;
    cq_date day;
} found_date;

/* The full dates of t, at most max. */
static size_t all_dates(const cps *t, found_date *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < t->n && n < max; i++) {
        date_at a;
        if (!date_any(t, i, &a)) continue;
        if (a.m && a.d) out[n++] = (found_date){a, cq_date_make(a.y, a.m, a.d)};
        i = a.end - 1;
    }
    return n;
}

/* The kind of date dates[k] is, from the words after it (up to the next date or line end) or, in English, the words
 * just before it; *label_word is the last label word after it. */
static int date_kind(const cps *t, const found_date *dates, size_t n, size_t k, const char **label_word) {
    size_t a = dates[k].d.end, b = k + 1 < n ? dates[k + 1].d.start : t->n;
    if (b > a + 120) b = a + 120;
    int kind = DATE_OTHER;
    *label_word = NULL;
    int quoted = 0; /* inside 《…》: "根据《国务院关于废止和修改部分行政法规的决定》修订" names a decision, not a repeal */
    for (size_t i = a; i < b && t->cp[i] != '\n'; i++) {
        if (t->cp[i] == 0x300A) quoted++;
        if (t->cp[i] == 0x300B && quoted) quoted--;
        if (quoted) continue;
        for (size_t w = 0; w < sizeof date_words / sizeof *date_words; w++) {
            if (!at_word(t, i, date_words[w].zh)) continue;
            /* the first word decides (…通过 自2020年1月1日起施行: 通过), the last label word labels */
            if (kind == DATE_OTHER) kind = date_words[w].kind;
            if (date_words[w].label) *label_word = date_words[w].label;
            break;
        }
    }
    if (kind != DATE_OTHER) return kind;
    /* English: "effective as of March 1, 2020", "Amended and Restated as of …", "dated January 5, 2019" */
    size_t start = dates[k].d.start, from = k > 0 ? dates[k - 1].d.end : 0;
    if (start > from + 60) from = start - 60;
    for (size_t i = start; i-- > from;)
        for (size_t w = 0; w < sizeof date_words / sizeof *date_words; w++)
            if (at_word(t, i, date_words[w].en)) return date_words[w].kind;
    return DATE_OTHER;
}

/* 自 <date> 起施行 and 本法自公布之日起施行 in the last articles: the day this text takes effect (0: none said). */
static cq_date effective_in_tail(const cps *t, const found_date *dates, size_t n) {
    cq_date best = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = dates[k].d.end;
        skip_spaces(t, &i);
        bool said = at_word(t, i, "起施行") || at_word(t, i, "起实施") || at_word(t, i, "起生效") ||
                    at_word(t, i, "施行") || at_word(t, i, "生效");
        if (!said) continue;
        if (dates[k].day > best) best = dates[k].day;
    }
    return best;
}

/* 《X》…同时废止 / 《X》、《Y》同时废止 in a sentence of the last articles: the keys of X, Y. */
static void repeals_in_tail(const cps *t, const char *tail, cq_version_meta *m) {
    size_t sent = 0;
    for (size_t i = 0; i <= t->n; i++) {
        bool end = i == t->n || t->cp[i] == 0x3002 || t->cp[i] == '\n' || t->cp[i] == 0xFF1B;
        if (!end) continue;
        /* "《X》同时废止", "决定废止《X》": a repeal said as one, not "依照《立法法》…制定、修改和废止" */
        static const char *const says[] = {"同时废止", "予以废止", "即行废止", "决定废止", "废止下列", "同时停止执行"};
        bool repeals = false;
        for (size_t j = sent; j < i; j++) repeals |= at_any(t, j, says, sizeof says / sizeof *says, NULL) > 0;
        for (size_t j = sent; repeals && j < i && m->n_repeals < CQ_VERSION_MAX_REPEALS; j++) {
            if (t->cp[j] != 0x300A) continue; /* 《 */
            if (j >= sent + 2 && (at_word(t, j - 2, "依照") || at_word(t, j - 2, "根据") || at_word(t, j - 2, "按照"))) {
                while (j < i && t->cp[j] != 0x300B) j++; /* a law it acts under */
                continue;
            }
            size_t e = j + 1;
            while (e < i && t->cp[e] != 0x300B) e++;
            if (e >= i) break;
            size_t after = e + 1;
            /* 《X》第十条…废止 repeals an article, not the regulation */
            if (after < i && t->cp[after] == 0x7B2C) {
                j = e;
                continue;
            }
            char title[512];
            size_t bytes = t->off[e] - t->off[j + 1];
            if (bytes < sizeof title) {
                memcpy(title, tail + t->off[j + 1], bytes);
                title[bytes] = 0;
                key_of(title, m->repeals[m->n_repeals], CQ_VERSION_KEY_MAX);
                if (m->repeals[m->n_repeals][0]) m->n_repeals++;
            }
            j = e;
        }
        sent = i + 1;
    }
}

/* Does text say of itself that it is no longer in force: （已废止）, [失效], "(repealed)". */
static bool says_repealed(const char *s) {
    return s && (strstr(s, "已废止") || strstr(s, "已失效") || strstr(s, "（废止）") || strstr(s, "(废止)") ||
                 strstr(s, "（失效）") || strstr(s, "(失效)") || strstr(s, "(repealed)") || strstr(s, "(Repealed)"));
}

/* The date in a name: "公司法(2018-10-26)", "NDA_2017-03-01", "公司法20181026". */
static cq_date name_date(const char *name) {
    cps t;
    if (!name || !cps_of(name, &t)) return 0;
    cq_date best = 0;
    for (size_t i = 0; i < t.n; i++) {
        date_at d;
        cq_date day = 0;
        if (date_numeric(&t, i, &d) || (date_cn(&t, i, &d) && d.m && d.d)) day = cq_date_make(d.y, d.m, d.d);
        else if (bare_year_at(&t, i) == 8) {
            int v = 0;
            for (size_t k = 0; k < 8; k++) v = v * 10 + (int)(t.cp[i + k] - '0');
            day = (cq_date)v;
        }
        if (day > best) best = day;
    }
    cps_free(&t);
    return best;
}

void cq_version_meta_extract(const char *name, const char *title, const char *header, const char *tail,
                             cq_version_meta *m) {
    memset(m, 0, sizeof *m);
    cq_version_key(name ? name : "", title, m->key, sizeof m->key);
    cq_date promulgated = 0, effective = 0, repealed = 0;
    const char *label_word = NULL;
    found_date dates[64];
    cps t;
    if (header && cps_of(header, &t)) {
        size_t n = all_dates(&t, dates, 64);
        for (size_t k = 0; k < n; k++) {
            const char *w = NULL;
            int kind = date_kind(&t, dates, n, k, &w);
            if (kind == DATE_PROMULGATED && dates[k].day >= promulgated) {
                promulgated = dates[k].day;
                label_word = w;
            } else if (kind == DATE_EFFECTIVE && dates[k].day > effective) {
                effective = dates[k].day;
            } else if (kind == DATE_REPEALED && dates[k].day > repealed) {
                repealed = dates[k].day;
            }
        }
        cps_free(&t);
    }
    cq_date from_name = name_date(name);
    if (from_name > promulgated) {
        promulgated = from_name;
        label_word = NULL;
    }
    if (tail && cps_of(tail, &t)) {
        size_t n = all_dates(&t, dates, 64);
        cq_date e = effective_in_tail(&t, dates, n);
        if (e > effective) effective = e;
        repeals_in_tail(&t, tail, m);
        cps_free(&t);
    }
    /* An amendment takes effect when it is promulgated unless the text says later: the last article of an amended
     * law still names the first version's day (公司法 2018: 本法自2006年1月1日起施行). */
    if (effective < promulgated) effective = promulgated;
    if (!promulgated) promulgated = effective;
    bool self_repealed = says_repealed(name) || says_repealed(title);
    if (repealed || self_repealed) m->repealed = repealed ? repealed : effective;
    m->promulgated = promulgated;
    m->effective = effective;
    /* A version repealing its own regulation's older text (民事诉讼法（试行）) is a successor, not a repeal. */
    size_t kept = 0;
    for (size_t i = 0; i < m->n_repeals; i++)
        if (strcmp(m->repeals[i], m->key)) memmove(m->repeals[kept++], m->repeals[i], CQ_VERSION_KEY_MAX);
    m->n_repeals = kept;
    if (promulgated) {
        int year = promulgated / 10000;
        bool english = name && !cq_utf8_has_cjk(name) && !(title && cq_utf8_has_cjk(title));
        if (english) {
            bool restated = (name && strcasestr(name, "restated")) || (title && strcasestr(title, "restated")) ||
                            (header && strcasestr(header, "amended and restated"));
            snprintf(m->label, sizeof m->label, restated ? "Amended and Restated %d" : "%d version", year);
        } else {
            snprintf(m->label, sizeof m->label, "%d年%s", year, label_word ? label_word : "版");
        }
    }
}

/* ---- questions ----------------------------------------------------------------------------------------------- */

/* What the words right after a date in a Chinese question make of it. */
enum { AFTER_NONE = 0, AFTER_AT, AFTER_BEFORE, AFTER_AFTER, AFTER_FROM, AFTER_VERSION };

static int chinese_after(const cps *t, size_t i, size_t *len) {
    static const char *const version[] = {"修正版", "修订版", "修正的", "修订的", "修改的", "修正后", "修订后",
                                          "修正", "修订", "版本", "版的", "版"};
    static const char *const at[] = {"的时候", "时候", "当时", "那时", "时", "期间", "内", "底", "末", "初",
                                     "的规定", "规定", "的版本", "的条文", "的法律", "的条款", "有效", "施行的",
                                     "实施的", "生效的", "适用的", "现行的", "的法条", "的"};
    static const char *const before[] = {"之前", "以前", "前"};
    static const char *const after[] = {"之后", "以后", "后"};
    static const char *const from[] = {"起", "开始"};
    size_t j = i, k;
    skip_spaces(t, &j);
    if ((k = at_any(t, j, version, sizeof version / sizeof *version, NULL))) return *len = j + k - i, AFTER_VERSION;
    if ((k = at_any(t, j, before, sizeof before / sizeof *before, NULL))) return *len = j + k - i, AFTER_BEFORE;
    if ((k = at_any(t, j, after, sizeof after / sizeof *after, NULL))) return *len = j + k - i, AFTER_AFTER;
    if ((k = at_any(t, j, from, sizeof from / sizeof *from, NULL))) return *len = j + k - i, AFTER_FROM;
    if ((k = at_any(t, j, at, sizeof at / sizeof *at, NULL))) {
        /* "的" alone only before a regulation or clause word: 2019年的规定, 2020年的公司法第六十条 */
        if (k == 1 && t->cp[j] == 0x7684) {
            size_t m = j + 1;
            if (m >= t->n || t->cp[m] == 0x7B2C || !cq_is_cjk(t->cp[m])) return AFTER_NONE;
        }
        return *len = j + k - i, AFTER_AT;
    }
    return AFTER_NONE;
}

static bool chinese_before(const cps *t, size_t i) {
    static const char *const words[] = {"截至", "截止到", "截止", "直到", "到", "在", "于", "按照", "依照", "依据",
                                        "根据", "按", "当"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t k = cq_utf8_count(words[w], strlen(words[w]));
        if (i >= k && at_word(t, i - k, words[w])) return true;
    }
    return false;
}

/* English words before a date, and what they make of it. */
static int english_before(const cps *t, size_t i, size_t *start) {
    static const struct {
        const char *w;
        int kind;
    } words[] = {
        {"as it stood on ", AFTER_AT}, {"as it stood in ", AFTER_AT}, {"in force on ", AFTER_AT},
        {"in force in ", AFTER_AT},    {"as of ", AFTER_AT},          {"as at ", AFTER_AT},
        {"prior to ", AFTER_BEFORE},   {"before ", AFTER_BEFORE},     {"after ", AFTER_AFTER},
        {"since ", AFTER_FROM},        {"from ", AFTER_FROM},         {"until ", AFTER_AT},
        {"during ", AFTER_AT},         {"on ", AFTER_AT},             {"in ", AFTER_AT},
        {"by ", AFTER_AT},             {"at ", AFTER_AT},
    };
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t k = strlen(words[w].w);
        if (i >= k && at_word(t, i - k, words[w].w) && (i == k || !is_alpha(t->cp[i - k - 1]))) {
            *start = i - k;
            return words[w].kind;
        }
    }
    return AFTER_NONE;
}

/* "the 2018 version", "2018 amendment", "2018 edition". */
static bool english_version_after(const cps *t, size_t i) {
    size_t j = i;
    skip_spaces(t, &j);
    return at_word(t, j, "version") || at_word(t, j, "amendment") || at_word(t, j, "edition") ||
           at_word(t, j, "revision") || at_word(t, j, "text");
}

static void fill(cq_question_date *out, const cps *t, const date_at *d, int kind, size_t start, size_t end) {
    int y = d->y;
    cq_date first = cq_date_make(y, d->m ? d->m : 1, d->d ? d->d : 1);
    cq_date last = cq_date_make(y, d->m ? d->m : 12, d->d ? d->d : cq_date_last_day(y, d->m ? d->m : 12));
    memset(out, 0, sizeof *out);
    switch (kind) {
    case AFTER_BEFORE: out->on = out->first = cq_date_add_days(first, -1); break;
    case AFTER_AFTER: out->on = out->first = cq_date_add_days(last, 1); break;
    case AFTER_FROM: out->on = out->first = first; break;
    case AFTER_VERSION:
        out->version_year = y;
        out->first = first;
        out->on = last;
        break;
    default:
        out->first = first;
        out->on = last;
    }
    out->start = t->off[start];
    out->end = t->off[end];
}

int cq_question_date_find(const char *question, cq_question_date *out) {
    memset(out, 0, sizeof *out);
    cps t;
    if (!question || !cps_of(question, &t)) return 0;
    int found = 0;
    for (size_t i = 0; i < t.n && !found; i++) {
        date_at d;
        if (date_numeric(&t, i, &d) || date_cn(&t, i, &d)) {
            /* a date in brackets right after a name is part of it: 宪法修正案（2004年）, 公司法(2018-10-26) */
            if (i > 0 && is_open_bracket(t.cp[i - 1])) {
                i = d.end - 1;
                continue;
            }
            size_t len = 0;
            int kind = chinese_after(&t, d.end, &len);
            size_t start = i;
            if (kind == AFTER_NONE) {
                size_t s;
                kind = english_before(&t, i, &s);
                if (kind != AFTER_NONE) start = s;
                else if (chinese_before(&t, i) && (d.end >= t.n || t.cp[d.end] != 0x7B2C)) kind = AFTER_AT;
                else if (english_version_after(&t, d.end)) kind = AFTER_VERSION;
            }
            if (kind != AFTER_NONE) {
                fill(out, &t, &d, kind, start, d.end + len);
                found = 1;
            }
            i = d.end - 1;
            continue;
        }
        if (date_english(&t, i, &d)) {
            size_t s;
            int kind = english_before(&t, i, &s);
            if (kind != AFTER_NONE) {
                fill(out, &t, &d, kind, s, d.end);
                found = 1;
            }
            i = d.end - 1;
            continue;
        }
        /* a bare year in an English question: "in 2019", "as of 2020", "the 2018 version" */
        size_t j = i;
        int y = year4(&t, &j);
        if (y >= 1900 && y <= 2099 && !(j < t.n && (t.cp[j] == 0x5E74 || t.cp[j] == '-' || t.cp[j] == '.'))) {
            date_at yd = {y, 0, 0, i, j};
            size_t s;
            int kind = english_before(&t, i, &s);
            if (kind != AFTER_NONE && (i == 0 || !is_open_bracket(t.cp[i - 1]))) {
                fill(out, &t, &yd, kind, s, j);
                found = 1;
            } else if (english_version_after(&t, j)) {
                fill(out, &t, &yd, AFTER_VERSION, i, j);
                found = 1;
            }
            i = j - 1;
        }
    }
    cps_free(&t);
    return found;
}

size_t cq_question_years(const char *question, int *years, size_t max) {
    cps t;
    if (!question || !cps_of(question, &t)) return 0;
    size_t n = 0;
    for (size_t i = 0; i < t.n && n < max; i++) {
        date_at d;
        if (date_numeric(&t, i, &d) || date_cn(&t, i, &d)) {
            years[n++] = d.y;
            i = d.end - 1;
            continue;
        }
        size_t j = i;
        int y = year4(&t, &j);
        if (y >= 1900 && y <= 2099) {
            years[n++] = y;
            i = j - 1;
        }
    }
    cps_free(&t);
    return n;
}

int cq_question_is_comparison(const char *question) {
    static const char *const change_zh[] = {"有何不同", "有什么不同", "有哪些不同", "不同之处", "有何区别", "有什么区别",
                                            "区别", "差别", "差异", "变化", "变动", "改动", "修改了什么",
                                            "改了什么", "修改了哪些", "改了哪些", "有何修改", "哪些修改",
                                            "怎么修改", "如何修改", "怎么改", "对比", "比较"};
    static const char *const version_zh[] = {"新旧", "新版", "旧版", "新法", "旧法", "两个版本", "两版", "版本",
                                             "修订前后", "修改前后", "修正前后", "修订后", "修改后", "修正后",
                                             "修订前", "修改前", "修正前", "原来的", "以前的规定", "前后"};
    static const char *const change_en[] = {"difference", "differ", "changed", "change", "compare", "comparison",
                                            "amended", "revised"};
    static const char *const version_en[] = {"version", "old and new", "previous", "prior", "earlier", "amendment",
                                             "before and after", "old ", "new "};
    /* phrases that ask what changed in an amendment by themselves */
    static const char *const changed_zh[] = {"修改了什么", "改了什么", "修改了哪些", "做了哪些修改", "有何修改",
                                             "有什么修改", "有哪些修改", "修订了什么", "修订了哪些"};
    static const char *const changed_en[] = {"what changed", "what has changed", "what was changed", "what were the changes"};
    if (!question) return 0;
    cps t;
    if (!cps_of(question, &t)) return 0;
    bool change = false, version = false, changed = false;
    for (size_t i = 0; i < t.n; i++) {
        changed |= at_any(&t, i, changed_zh, sizeof changed_zh / sizeof *changed_zh, NULL) > 0;
        if (i == 0 || !is_alpha(t.cp[i - 1]))
            changed |= at_any(&t, i, changed_en, sizeof changed_en / sizeof *changed_en, NULL) > 0;
        change |= at_any(&t, i, change_zh, sizeof change_zh / sizeof *change_zh, NULL) > 0;
        version |= at_any(&t, i, version_zh, sizeof version_zh / sizeof *version_zh, NULL) > 0;
        if (i == 0 || !is_alpha(t.cp[i - 1])) {
            change |= at_any(&t, i, change_en, sizeof change_en / sizeof *change_en, NULL) > 0;
            version |= at_any(&t, i, version_en, sizeof version_en / sizeof *version_en, NULL) > 0;
        }
    }
    cps_free(&t);
    if (change && !version) {
        int years[4];
        version = cq_question_years(question, years, 4) >= 2;
    }
    return change && version ? 2 : changed ? 1 : 0;
}
