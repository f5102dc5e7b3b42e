/* Document text: the Markdown and plain-text readers, the line rules every reader shares (reader_internal.h),
 * and the queries over a cq_doctext (page span, highlight boxes). The PDF reader is reader/pdf_extract.c.
 *
 * Paragraphs in Markdown and plain text. The text keeps exactly one '\n' between paragraphs and never an empty
 * line. A blank line, a heading, a list item, a table row, a Markdown hard break and a line that starts like a
 * new item (第…条, （一）, 1., Article …) all begin a paragraph. Lines in between are joined only when the source
 * wraps them: when blank lines separate the paragraphs and the file is hard-wrapped (most lines end near one
 * width), every line of a paragraph is joined; when a hard-wrapped file has no blank lines, a line is joined to
 * the next only if it reaches the wrap width and does not end a sentence; otherwise (the laws corpus: one
 * paragraph per line, lines of any length) every line stays a line. Joining puts no space between CJK
 * characters and one space between Latin words, and drops the hyphen of a word hyphenated at the line end. */
#include "reader/reader.h"

#include <errno.h>
#include <iconv.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/text_norm.h"
#include "core/utf8.h"
#include "reader/reader_internal.h"

/* ---------------------------------------------------------------------------------------------------------
 * Character classes and line-start patterns shared with the PDF reader
 * --------------------------------------------------------------------------------------------------------- */

bool cq_dt_cjkish(uint32_t cp) {
    return cq_is_cjk(cp) || (cp >= 0x2E80 && cp <= 0x2FDF) || (cp >= 0x3000 && cp <= 0x30FF) ||
           (cp >= 0x3100 && cp <= 0x312F) || (cp >= 0x31C0 && cp <= 0x31FF) || (cp >= 0xAC00 && cp <= 0xD7AF) ||
           (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF01 && cp <= 0xFF65);
}

static bool is_closer(uint32_t cp) {
    switch (cp) {
    case 0x201D: case 0x2019: case '"': case '\'': case ')': case ']': case 0xFF09: case 0x300D: case 0x300F:
    case 0x3011: case 0x300B: case 0x3015: case 0x3009: case 0xFF3D:
        return true;
    default:
        return false;
    }
}

bool cq_dt_ends_sentence(const uint32_t *cp, size_t n) {
    while (n > 0 && (cp[n - 1] == ' ' || is_closer(cp[n - 1]))) n--;
    if (n == 0) return false;
    switch (cp[n - 1]) {
    case 0x3002: case 0xFF1B: case 0xFF1A: case 0xFF01: case 0xFF1F: case 0xFF0E: case 0xFF61:
    case '.': case ';': case ':': case '!': case '?':
        return true;
    default:
        return false;
    }
}

static bool is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
static bool is_upper(uint32_t cp) { return cp >= 'A' && cp <= 'Z'; }
static bool is_lower(uint32_t cp) { return cp >= 'a' && cp <= 'z'; }
static bool is_ascii_alpha_cp(uint32_t cp) { return is_upper(cp) || is_lower(cp); }
static bool is_roman(uint32_t cp) {
    return cp == 'i' || cp == 'v' || cp == 'x' || cp == 'l' || cp == 'I' || cp == 'V' || cp == 'X' || cp == 'L';
}

/* 第 + numerals + unit (+ 之 + numerals) at cp[0..n). Returns the label length, 0 if none. */
static size_t chinese_label_len(const uint32_t *cp, size_t n, bool *is_article) {
    if (n < 3 || cp[0] != 0x7B2C) return 0; /* 第 */
    size_t i = 1;
    while (i < n && (cq_is_cn_numeral(cp[i]) || is_digit(cp[i]))) i++;
    if (i == 1 || i >= n) return 0;
    *is_article = false;
    switch (cp[i]) {
    case 0x6761: case 0x6B3E: case 0x9879: /* 条 款 项 */
        *is_article = true;
        i++;
        break;
    case 0x7AE0: case 0x8282: case 0x7F16: /* 章 节 编 */
        i++;
        break;
    case 0x90E8: /* 部分 */
        if (i + 1 < n && cp[i + 1] == 0x5206) i += 2;
        else return 0;
        break;
    default:
        return 0;
    }
    if (i + 1 < n && cp[i] == 0x4E4B && cq_is_cn_numeral(cp[i + 1])) { /* 之一 */
        i++;
        while (i < n && cq_is_cn_numeral(cp[i])) i++;
    }
    return i;
}

bool cq_dt_is_heading_label(const uint32_t *cp, size_t n) {
    bool article;
    return n > 0 && chinese_label_len(cp, n, &article) == n;
}

static bool is_bullet(uint32_t cp) {
    switch (cp) {
    case 0x2022: case 0x25CF: case 0x25CB: case 0x25A0: case 0x25A1: case 0x25C6: case 0x25C7: case 0x25AA:
    case 0x25BA: case 0x27A2: case 0x2713: case 0x2605: case 0x203B: case 0x00B7: case 0x2023: case 0x25E6:
        return true;
    default:
        return false;
    }
}

/* True if what follows a label at cp[i..n) lets it be a label: end of line, a space, or CJK text. */
static bool label_end_ok(const uint32_t *cp, size_t n, size_t i) {
    return i >= n || cp[i] == ' ' || cq_dt_cjkish(cp[i]);
}

static bool word_is(const uint32_t *cp, size_t n, const char *w) {
    size_t k = strlen(w);
    if (n < k) return false;
    for (size_t i = 0; i < k; i++)
        if (cp[i] != (unsigned char)w[i]) return false;
    return true;
}

size_t cq_dt_item_label(const uint32_t *cp, size_t n, bool *strong) {
    bool dummy;
    if (!strong) strong = &dummy;
    *strong = false;
    if (n == 0) return 0;
    bool article = false;
    size_t k = chinese_label_len(cp, n, &article);
    if (k) {
        /* A label runs into its body only after a space ("第五条 …"); "第二十条规定的…" continues a sentence. */
        if (k >= n || cp[k] == ' ' || cp[k] == 0xFF1A) {
            *strong = true;
            return k;
        }
        return 0;
    }
    *strong = true;
    if (is_bullet(cp[0])) return 1;
    if ((cp[0] == '-' || cp[0] == '*' || cp[0] == '+') && n > 1 && cp[1] == ' ')
        return 1;
    *strong = false;
    /* （一） (1) (a) (iv) */
    if (cp[0] == '(' || cp[0] == 0xFF08) {
        size_t i = 1;
        if (i < n && cq_is_cn_numeral(cp[i])) {
            while (i < n && cq_is_cn_numeral(cp[i])) i++;
        } else if (i < n && is_digit(cp[i])) {
            while (i < n && is_digit(cp[i]) && i < 4) i++;
        } else if (i + 1 < n && (is_lower(cp[i]) || is_upper(cp[i])) && (cp[i + 1] == ')' || cp[i + 1] == 0xFF09)) {
            i++;
        } else {
            while (i < n && is_roman(cp[i]) && i < 6) i++;
        }
        if (i <= 1 || i >= n || (cp[i] != ')' && cp[i] != 0xFF09)) return 0;
        i++;
        /* "（一）项", "（二）》": a reference to an item inside a sentence, not an item */
        if (i < n && (is_closer(cp[i]) || cp[i] == 0x9879 || cp[i] == 0x6B3E || cp[i] == 0x6761 || cp[i] == 0x76EE ||
                      cp[i] == 0x3001 || cp[i] == 0xFF0C || cp[i] == 0x3002 || cp[i] == 0xFF1B))
            return 0;
        return i;
    }
    /* 一、 */
    if (cq_is_cn_numeral(cp[0])) {
        size_t i = 0;
        while (i < n && cq_is_cn_numeral(cp[i])) i++;
        if (i < n && i <= 4 && (cp[i] == 0x3001 || cp[i] == 0xFF0E)) return i + 1;
        return 0;
    }
    /* 1、 1． 1. 1) 1.2 1.2.3 2.1. */
    if (is_digit(cp[0])) {
        size_t i = 0, groups = 0;
        for (;;) {
            size_t d = 0;
            while (i < n && is_digit(cp[i])) i++, d++;
            if (d == 0 || d > 3) return 0;
            groups++;
            if (i < n && cp[i] == '.' && i + 1 < n && is_digit(cp[i + 1])) {
                i++;
                continue;
            }
            break;
        }
        if (i < n && (cp[i] == 0x3001 || cp[i] == 0xFF0E || cp[i] == 0xFF09 || cp[i] == ')')) return i + 1;
        if (i < n && cp[i] == '.' && label_end_ok(cp, n, i + 1)) return i + 1;
        if (groups > 1 && label_end_ok(cp, n, i)) return i;
        return 0;
    }
    /* A. a) IV. */
    if (is_upper(cp[0]) || is_lower(cp[0])) {
        size_t i = 0;
        if (n > 2 && (cp[1] == '.' || cp[1] == ')') && cp[2] == ' ') return 2;
        while (i < n && (cp[i] == 'I' || cp[i] == 'V' || cp[i] == 'X') && i < 6) i++;
        if (i > 0 && i + 1 < n && cp[i] == '.' && cp[i + 1] == ' ') return i + 1;
    }
    /* Article 5, SECTION 2.1, Schedule A … followed by a capital or the end: "Section 5.2 of this" is a
     * reference that happens to start a wrapped line, not a heading. */
    static const char *const keywords[] = {"Article", "ARTICLE", "Section", "SECTION", "Chapter", "CHAPTER",
                                           "Part",    "PART",    "Schedule", "SCHEDULE", "Exhibit", "EXHIBIT",
                                           "Annex",   "ANNEX",   "Appendix", "APPENDIX", "Clause",  "CLAUSE"};
    for (size_t w = 0; w < sizeof keywords / sizeof keywords[0]; w++) {
        size_t kl = strlen(keywords[w]);
        if (!word_is(cp, n, keywords[w]) || n < kl + 2 || cp[kl] != ' ') continue;
        size_t i = kl + 1;
        size_t start = i;
        while (i < n && (is_digit(cp[i]) || cp[i] == '.' || is_roman(cp[i]) || (i == start && is_upper(cp[i]))))
            i++;
        if (i == start) return 0;
        size_t label = i;
        while (i < n && (cp[i] == ' ' || cp[i] == ':' || cp[i] == '-' || cp[i] == 0x2013 || cp[i] == 0x2014)) i++;
        if (i >= n || !is_lower(cp[i])) {
            *strong = true;
            return label;
        }
        return 0;
    }
    return 0;
}

static bool ends_with_word(const uint32_t *cp, size_t n, const char *w) {
    size_t k = strlen(w);
    if (n < k || (n > k && is_ascii_alpha_cp(cp[n - k - 1]))) return false;
    for (size_t i = 0; i < k; i++)
        if ((cp[n - k + i] | 0x20) != (unsigned char)w[i]) return false;
    return true;
}

bool cq_dt_starts_item(const uint32_t *line, size_t n, const uint32_t *prev, size_t np, bool prev_full) {
    bool strong;
    if (!cq_dt_item_label(line, n, &strong)) return false;
    while (np > 0 && prev[np - 1] == ' ') np--;
    if (np > 0 && prev[np - 1] == 0x7B2C) return false; /* "…前款第" + "（一）项" */
    if (strong || !prev_full || np == 0) return true;
    /* "(a)", "1.", "一、" after a full line: an item only where the line before closes a clause ("…as follows:",
     * "…; and"); "…upon ten" + "(10) days", "…Section" + "2.1 of this Agreement" wrap on */
    return cq_dt_ends_sentence(prev, np) || ends_with_word(prev, np, "and") || ends_with_word(prev, np, "or") ||
           prev[np - 1] == ',' || prev[np - 1] == 0xFF0C;
}

/* ---------------------------------------------------------------------------------------------------------
 * Spaces inside one line
 * --------------------------------------------------------------------------------------------------------- */

typedef struct {
    size_t start, end;
} run_span;


/* The character next to the digits at one end of a digit group, skipping a space: 0 at the line's end. */
static uint32_t digit_context_left(const uint32_t *cp, const run_span *runs, size_t r) {
    size_t i = runs[r].end;
    while (i > runs[r].start && is_digit(cp[i - 1])) i--;
    if (i > runs[r].start) return cp[i - 1];
    return r > 0 ? cp[runs[r - 1].end - 1] : 0;
}

static uint32_t digit_context_right(const uint32_t *cp, const run_span *runs, size_t n_runs, size_t r) {
    size_t i = runs[r].start;
    while (i < runs[r].end && is_digit(cp[i])) i++;
    if (i < runs[r].end) return cp[i];
    return r + 1 < n_runs ? cp[runs[r + 1].start] : 0;
}

bool cq_dt_clean_line(const uint32_t *cp, size_t n, uint32_t *out, bool cjk_gap_breaks, cq_dt_spacing *sp) {
    size_t n_runs = 0;
    for (size_t i = 0; i < n; i++)
        if (cp[i] != ' ' && (i == 0 || cp[i - 1] == ' ')) n_runs++;
    for (size_t i = 0; i < n; i++) out[i] = cp[i] == ' ' ? 0 : cp[i];
    if (n_runs < 2) return true;
    run_span *runs = malloc(n_runs * sizeof *runs);
    /* gap g lies between runs g and g+1: 0 drop, ' ' keep one space, '\n' paragraph break */
    uint32_t *gap = malloc(n_runs * sizeof *gap);
    if (!runs || !gap) {
        free(runs);
        free(gap);
        return false;
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        if (cp[i] == ' ') continue;
        size_t j = i;
        while (j < n && cp[j] != ' ') j++;
        runs[r].start = i;
        runs[r].end = j;
        r++;
        i = j;
    }
    for (size_t g = 0; g + 1 < n_runs; g++) gap[g] = ' ';

    /* Digit groups: numbers printed with spaces between their digits ("2 0 1 7年"). */
    for (size_t g = 0; g + 1 < n_runs;) {
        size_t a = g;
        while (g + 1 < n_runs && is_digit(cp[runs[g].end - 1]) && is_digit(cp[runs[g + 1].start]) &&
               (runs[g].end - runs[g].start == 1 || runs[g + 1].end - runs[g + 1].start == 1))
            g++;
        if (g == a) {
            g++;
            continue;
        }
        size_t digits = g - a + 1;
        uint32_t left = digit_context_left(cp, runs, a), right = digit_context_right(cp, runs, n_runs, g);
        bool cjk_context = (cq_dt_cjkish(left) || cq_dt_cjkish(right)) && (left == 0 || cq_dt_cjkish(left)) &&
                           (right == 0 || cq_dt_cjkish(right));
        if (cjk_context) {
            for (size_t k = a; k < g; k++) gap[k] = 0;
            sp->broken_digits += digits;
        } else if (digits >= 4) {
            sp->broken_digits += digits;
        }
    }

    /* Letter-spaced Latin words: four or more one-letter runs in a row. Counted, not fixed: the word
     * boundaries are lost. */
    for (size_t k = 0; k < n_runs;) {
        size_t a = k;
        while (k < n_runs && runs[k].end - runs[k].start == 1 && is_ascii_alpha_cp(cp[runs[k].start])) k++;
        if (k - a >= 4) sp->spaced_letters += k - a;
        if (k == a) k++;
    }

    for (size_t g = 0; g + 1 < n_runs; g++) {
        if (gap[g] != ' ') continue;
        uint32_t left = cp[runs[g].end - 1], right = cp[runs[g + 1].start];
        size_t len_left = runs[g].end - runs[g].start, len_right = runs[g + 1].end - runs[g + 1].start;
        /* 第一条 为了…: the label keeps its space, even when extraction spaced out the label itself. */
        if (g < 8) {
            uint32_t label[16];
            size_t ln = 0;
            bool fits = true;
            for (size_t k = 0; k <= g && fits; k++)
                for (size_t i = runs[k].start; i < runs[k].end; i++) {
                    if (ln == 16) {
                        fits = false;
                        break;
                    }
                    label[ln++] = cp[i];
                }
            if (fits && cq_dt_is_heading_label(label, ln)) continue;
        }
        if (cq_dt_cjkish(left) && cq_dt_cjkish(right)) {
            if (len_left == 1 || len_right == 1) gap[g] = 0; /* 第 一 条, 总 则 */
            else if (cjk_gap_breaks) gap[g] = '\n';
        } else if (cjk_gap_breaks && cq_dt_cjkish(left) &&
                   cq_dt_item_label(cp + runs[g + 1].start, n - runs[g + 1].start, NULL) > 0) {
            gap[g] = '\n';
        }
    }
    for (size_t g = 0; g + 1 < n_runs; g++)
        if (gap[g]) out[runs[g].end] = gap[g];
    free(runs);
    free(gap);
    return true;
}

/* ---------------------------------------------------------------------------------------------------------
 * Quality
 * --------------------------------------------------------------------------------------------------------- */

double cq_dt_quality(const cq_text_stats *st, const cq_dt_spacing *sp, char *reason, size_t reason_size) {
    /* Each problem weighs by how much it hurts reading and matching: lost characters count fully,
     * radicals (repaired, but a sign of a broken font map) and letter-spacing half. */
    struct {
        double weight;
        size_t count;
        const char *what;
    } p[] = {
        {1.0, st->replacement, "characters without a Unicode mapping (U+FFFD)"},
        {1.0, st->private_use, "private-use characters (font without a Unicode map)"},
        {1.0, st->controls, "control characters"},
        {0.5, st->radicals, "CJK radicals or compatibility forms mapped to standard characters"},
        {1.0, sp ? sp->broken_digits : 0, "digits with broken spacing (\"2 0 1 7\")"},
        {0.5, sp ? sp->spaced_letters : 0, "letter-spaced characters (\"w o r d\")"},
    };
    double bad = 0, worst = 0;
    int worst_i = -1;
    for (int i = 0; i < (int)(sizeof p / sizeof p[0]); i++) {
        double b = p[i].weight * (double)p[i].count;
        bad += b;
        if (b > worst) {
            worst = b;
            worst_i = i;
        }
    }
    if (reason_size) reason[0] = 0;
    if (worst_i < 0) return 1.0;
    double chars = st->chars ? (double)st->chars : 1.0;
    double q = 1.0 - 4.0 * bad / chars; /* 10 % bad characters → 0.6, 25 % → 0 */
    if (q < 0) q = 0;
    if (reason_size)
        snprintf(reason, reason_size, "%zu %s (%.1f%% of %zu)", p[worst_i].count, p[worst_i].what,
                 100.0 * (double)p[worst_i].count / chars, st->chars);
    return q;
}

/* ---------------------------------------------------------------------------------------------------------
 * Markdown and plain text
 * --------------------------------------------------------------------------------------------------------- */

/* One source line after markup removal. */
typedef struct {
    size_t start, len;  /* bytes in the reader's line buffer */
    int indent;         /* leading columns */
    bool blank;         /* separates paragraphs */
    bool hard;          /* starts a paragraph of its own (heading, list item, table row, after a hard break) */
} src_line;

typedef struct {
    cq_strbuf buf;  /* line texts, back to back */
    src_line *lines;
    size_t n, cap;
    bool failed;
} line_list;

static void lines_add(line_list *l, const char *s, size_t len, int indent, bool blank, bool hard) {
    if (l->failed) return;
    if (!cq_grow((void **)&l->lines, &l->cap, l->n + 1, sizeof *l->lines)) {
        l->failed = true;
        return;
    }
    src_line *x = &l->lines[l->n++];
    x->start = l->buf.len;
    x->len = len;
    x->indent = indent;
    x->blank = blank;
    x->hard = hard;
    cq_strbuf_append(&l->buf, s, len);
    if (l->buf.failed) l->failed = true;
}

static void lines_free(line_list *l) {
    cq_strbuf_free(&l->buf);
    free(l->lines);
}

static bool blank_text(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\f' && s[i] != '\v') return false;
    return true;
}

static int leading_columns(const char *s, size_t n, size_t *skip) {
    int col = 0;
    size_t i = 0;
    for (; i < n; i++) {
        if (s[i] == ' ') col++;
        else if (s[i] == '\t') col += 4 - col % 4;
        else if ((unsigned char)s[i] == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
                 (unsigned char)s[i + 2] == 0x80) { /* U+3000 ideographic space */
            col += 2;
            i += 2;
        } else break;
    }
    *skip = i;
    return col;
}

/* Display width in columns: CJK characters are two columns wide. */
static size_t display_width(const char *s, size_t n) {
    size_t w = 0, i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        i += len;
        w += cq_dt_cjkish(cp) ? 2 : 1;
    }
    return w;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The text being built, with the stats of every character put in. */
typedef struct {
    cq_strbuf out;
    cq_text_stats st;
    cq_dt_spacing sp;
    uint32_t *cps, *clean; /* scratch for one line */
    size_t cap;
    bool failed;
} text_builder;

static bool builder_reserve(text_builder *b, size_t n) {
    if (n <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < n) cap *= 2;
    uint32_t *c1 = realloc(b->cps, cap * sizeof *c1);
    if (!c1) return false;
    b->cps = c1;
    uint32_t *c2 = realloc(b->clean, cap * sizeof *c2);
    if (!c2) return false;
    b->clean = c2;
    b->cap = cap;
    return true;
}

/* Last code point of the output and the one before it (0 when absent). */
static uint32_t last_cp(const cq_strbuf *b, size_t *len_out) {
    if (!b->len) {
        *len_out = 0;
        return 0;
    }
    size_t i = b->len - 1;
    while (i > 0 && ((unsigned char)b->data[i] & 0xC0) == 0x80) i--;
    size_t len;
    uint32_t cp = cq_utf8_decode(b->data + i, b->len - i, &len);
    *len_out = b->len - i;
    return cp;
}

static uint32_t cp_before_last(const cq_strbuf *b, size_t last_len) {
    cq_strbuf tmp = {.data = b->data, .len = b->len - last_len};
    size_t l;
    return last_cp(&tmp, &l);
}

/* Appends one source line: repaired, spaces cleaned; `join` says whether it continues the paragraph. */
static void builder_line(text_builder *b, const char *s, size_t n, bool join, bool cjk_gap_breaks) {
    if (b->failed) return;
    if (!builder_reserve(b, n + 1)) {
        b->failed = true;
        return;
    }
    size_t m = 0, i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        i += len;
        uint32_t r = cq_text_repair_cp(cp, &b->st);
        if (!r) continue;
        if (r == '\t' || r == '\n' || r == '\f') r = ' ';
        if (r == ' ' && (m == 0 || b->cps[m - 1] == ' ')) continue;
        b->cps[m++] = r;
    }
    while (m > 0 && b->cps[m - 1] == ' ') m--;
    if (m == 0) return;
    if (!cq_dt_clean_line(b->cps, m, b->clean, cjk_gap_breaks && m >= 200, &b->sp)) {
        b->failed = true;
        return;
    }
    size_t first = 0;
    while (first < m && !b->clean[first]) first++;
    if (first == m) return;
    size_t ll = 0;
    uint32_t prev = last_cp(&b->out, &ll);
    if (b->out.len == 0 || prev == '\n') {
        /* paragraph start: nothing to put before */
    } else if (!join) {
        cq_strbuf_put_cp(&b->out, '\n');
    } else {
        uint32_t next = b->clean[first];
        uint32_t before = cp_before_last(&b->out, ll);
        if (prev == '-' && is_lower(before) && is_lower(next)) {
            b->out.len -= 1; /* "evaluat-" + "ing" */
            b->out.data[b->out.len] = 0;
        } else if (!cq_dt_cjkish(prev) && !cq_dt_cjkish(next) && !(prev == '-' && before != ' ') &&
                   prev != 0x2014 && prev != 0x2013 && prev != '/') {
            cq_strbuf_put_cp(&b->out, ' '); /* but "Big-" + "Five", "and/" + "or" join as printed */
        }
    }
    for (size_t k = first; k < m; k++) {
        uint32_t c = b->clean[k];
        if (!c) continue;
        if (c == '\n') {
            size_t l2;
            if (b->out.len && last_cp(&b->out, &l2) != '\n') cq_strbuf_put_cp(&b->out, '\n');
            continue;
        }
        cq_strbuf_put_cp(&b->out, c);
    }
    if (b->out.failed) b->failed = true;
}

/* Decodes up to max code points of s[0..n) into cp (tabs and ideographic spaces as ' '); *m = how many. */
static void decode_prefix(const char *s, size_t n, uint32_t *cp, size_t *m, size_t max) {
    size_t i = 0, k = 0;
    while (i < n && k < max) {
        size_t len;
        uint32_t c = cq_utf8_decode(s + i, n - i, &len);
        i += len;
        if (c == '\t' || c == 0x3000) c = ' ';
        cp[k++] = c;
    }
    *m = k;
}

/* Joins the source lines into paragraphs as described at the top of this file, into b. */
static cq_status assemble(const line_list *l, bool cjk_gap_breaks, text_builder *b) {
    /* Is the file hard-wrapped? Widths of the lines that can wrap: most sit just below one width. */
    size_t n_content = 0;
    bool has_blank = false;
    for (size_t i = 0; i < l->n; i++) {
        if (l->lines[i].blank) has_blank = true;
        else if (!l->lines[i].hard) n_content++;
    }
    size_t wrap_width = 0;
    bool wrapped = false;
    if (n_content >= 5) {
        size_t *w = malloc(n_content * sizeof *w), k = 0;
        if (!w) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < l->n; i++)
            if (!l->lines[i].blank && !l->lines[i].hard)
                w[k++] = display_width(l->buf.data + l->lines[i].start, l->lines[i].len) + (size_t)l->lines[i].indent;
        qsort(w, k, sizeof *w, cmp_size);
        wrap_width = w[(k * 9) / 10];
        size_t near = 0;
        for (size_t i = 0; i < k; i++)
            if (w[i] + wrap_width / 7 >= wrap_width && w[i] <= wrap_width + wrap_width / 10) near++;
        wrapped = wrap_width >= 30 && wrap_width <= 200 && near * 5 >= k * 2;
        free(w);
    }

    const src_line *prev = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const src_line *x = &l->lines[i];
        if (x->blank) {
            prev = NULL;
            continue;
        }
        const char *s = l->buf.data + x->start;
        bool join = false;
        if (prev && !x->hard && wrapped && x->indent <= prev->indent + 1) { /* an indented line starts anew */
            uint32_t head[24];
            size_t nh;
            decode_prefix(s, x->len, head, &nh, 24);
            /* the previous line's last characters, and whether it reaches the wrap width (the next word would
             * not have fitted) */
            const char *ps = l->buf.data + prev->start;
            size_t off = prev->len > 32 ? prev->len - 32 : 0;
            while (off < prev->len && ((unsigned char)ps[off] & 0xC0) == 0x80) off++;
            uint32_t tail[40];
            size_t nt;
            decode_prefix(ps + off, prev->len - off, tail, &nt, 40);
            size_t pw = display_width(ps, prev->len) + (size_t)prev->indent;
            size_t word = 0;
            for (size_t k = 0; k < nh && head[k] != ' '; k++) word += cq_dt_cjkish(head[k]) ? 2 : 1;
            bool full = has_blank || pw + word + 1 > wrap_width;
            if (!cq_dt_starts_item(head, nh, tail, nt, full))
                join = has_blank || (full && !cq_dt_ends_sentence(tail, nt));
        }
        builder_line(b, s, x->len, join, cjk_gap_breaks);
        if (b->failed) return CQ_ERR_NOMEM;
        prev = x;
    }
    return CQ_OK;
}

static bool text_has_content(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = cq_utf8_decode(s + i, n - i, &len);
        i += len;
        if (!cq_is_space(cp)) return true;
    }
    return false;
}

static cq_status finish_text(text_builder *b, char *title, cq_doctext *out, cq_err *err) {
    if (b->failed || b->out.failed) {
        free(title);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory while reading the text");
    }
    /* no trailing paragraph break */
    while (b->out.len && b->out.data[b->out.len - 1] == '\n') b->out.data[--b->out.len] = 0;
    if (!text_has_content(b->out.data ? b->out.data : "", b->out.len)) {
        free(title);
        return cq_err_set(err, CQ_ERR_EMPTY, "the file contains no text");
    }
    out->text_len = b->out.len;
    out->text = cq_strbuf_take(&b->out);
    out->title = title;
    out->quality = cq_dt_quality(&b->st, &b->sp, out->quality_reason, sizeof out->quality_reason);
    return CQ_OK;
}

static void builder_free(text_builder *b) {
    cq_strbuf_free(&b->out);
    free(b->cps);
    free(b->clean);
}

/* ---- decoding ---- */

char *cq_dt_iconv(const char *from, const char *data, size_t len, size_t *out_len, size_t *replaced) {
    iconv_t cd = iconv_open("UTF-8", from);
    if (cd == (iconv_t)-1) return NULL;
    if (replaced) *replaced = 0;
    size_t cap = len * 2 + 16;
    char *buf = malloc(cap);
    if (!buf) {
        iconv_close(cd);
        return NULL;
    }
    char *in = (char *)data, *o = buf;
    size_t in_left = len, out_left = cap - 1;
    bool ok = true;
    while (in_left > 0) {
        size_t r = iconv(cd, &in, &in_left, &o, &out_left);
        if (r != (size_t)-1) break;
        if (errno == E2BIG || (replaced && out_left < 4)) {
            size_t used = (size_t)(o - buf);
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                ok = false;
                break;
            }
            buf = nb;
            o = buf + used;
            out_left = cap - used - 1;
            continue;
        }
        if (!replaced) { /* an invalid or incomplete sequence: the input is not in this encoding */
            ok = false;
            break;
        }
        /* as browsers decode: the bad byte becomes U+FFFD and decoding goes on at the next one (an ASCII byte after
         * a lead byte is itself again); a sequence cut off at the end is one U+FFFD */
        memcpy(o, "\xEF\xBF\xBD", 3);
        o += 3;
        out_left -= 3;
        (*replaced)++;
        if (errno == EINVAL) {
            in += in_left;
            in_left = 0;
            break;
        }
        in++;
        in_left--;
        iconv(cd, NULL, NULL, NULL, NULL); /* back to the initial state */
    }
    iconv_close(cd);
    if (!ok || in_left > 0) {
        free(buf);
        return NULL;
    }
    *o = 0;
    *out_len = (size_t)(o - buf);
    return buf;
}

/* A guess of GB18030 for bytes that are not UTF-8 holds when at most a few characters had to be replaced (one in
 * 50 of the multi-byte characters, and never more than half of them): otherwise the bytes are something else. */
bool cq_dt_gb_guess_holds(const char *utf8, size_t n, size_t replaced) {
    size_t multi = 0;
    for (size_t i = 0; i < n; i++) multi += ((unsigned char)utf8[i] & 0xC0) == 0xC0;
    if (replaced > multi / 2) return false;
    return replaced <= 2 || replaced * 50 <= multi;
}

/* Returns the text as UTF-8: *owned is set when the result was converted (caller frees it). A UTF-8 BOM is
 * skipped; UTF-16 with a BOM and GB18030/GBK (a file that is mostly invalid UTF-8 but valid GB18030) are
 * converted; anything else is read as UTF-8 with invalid bytes counted as replacements later. */
static const char *decode_text(const char *data, size_t len, size_t *out_len, char **owned) {
    *owned = NULL;
    if (len >= 3 && (unsigned char)data[0] == 0xEF && (unsigned char)data[1] == 0xBB && (unsigned char)data[2] == 0xBF) {
        *out_len = len - 3;
        return data + 3;
    }
    if (len >= 2 && (((unsigned char)data[0] == 0xFF && (unsigned char)data[1] == 0xFE) ||
                     ((unsigned char)data[0] == 0xFE && (unsigned char)data[1] == 0xFF))) {
        bool le = (unsigned char)data[0] == 0xFF;
        char *c = cq_dt_iconv(le ? "UTF-16LE" : "UTF-16BE", data + 2, len - 2, out_len, NULL);
        if (c) {
            *owned = c;
            return c;
        }
    }
    if (!cq_utf8_valid(data, len)) {
        size_t valid_multi = 0, invalid = 0, i = 0;
        while (i < len) {
            if ((unsigned char)data[i] < 0x80) {
                i++;
                continue;
            }
            size_t l;
            uint32_t cp = cq_utf8_decode(data + i, len - i, &l);
            if (cp == CQ_UTF8_REPLACEMENT && l == 1) invalid++;
            else valid_multi++;
            i += l;
        }
        if (invalid > valid_multi) {
            /* a bad byte (a page cut or damaged in transit) spoils only its own character, as in a browser */
            size_t replaced;
            char *c = cq_dt_iconv("GB18030", data, len, out_len, &replaced);
            if (c && cq_dt_gb_guess_holds(c, *out_len, replaced)) {
                *owned = c;
                return c;
            }
            free(c);
        }
    }
    *out_len = len;
    return data;
}

/* Splits into lines at \n, \r\n and \r; calls fn for each. */
typedef void (*line_fn)(void *ctx, const char *s, size_t n);

static void split_lines(const char *s, size_t n, line_fn fn, void *ctx) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != '\n' && s[j] != '\r') j++;
        fn(ctx, s + i, j - i);
        if (j < n && s[j] == '\r' && j + 1 < n && s[j + 1] == '\n') j++;
        i = j + 1;
    }
}

static void plain_line(void *ctx, const char *s, size_t n) {
    line_list *l = ctx;
    size_t skip;
    int indent = leading_columns(s, n, &skip);
    bool blank = blank_text(s, n);
    lines_add(l, s + skip, blank ? 0 : n - skip, indent, blank, false);
}

/* Checks the input and decodes it (decode_text): text[0..n), *owned to free. */
static cq_status open_input(const cq_reader_input *in, cq_doctext *out, const char **text, size_t *n, char **owned,
                            cq_err *err) {
    *owned = NULL;
    if (!out) return cq_err_set(err, CQ_ERR_INVALID, "no output document given");
    memset(out, 0, sizeof *out);
    if (!in || (!in->data && in->len)) return cq_err_set(err, CQ_ERR_INVALID, "no input data given");
    if (in->len > UINT32_MAX / 4)
        return cq_err_set(err, CQ_ERR_UNSUPPORTED, "the file is too large (%zu bytes)", in->len);
    if (in->len == 0) return cq_err_set(err, CQ_ERR_EMPTY, "the file contains no text (0 bytes)");
    cq_status rc = cq_reader_check_cancel(in->limits, "before reading the text", err); /* the reading is linear and
                                                                                          short: 8 MB in 0.4 s */
    if (rc) return rc;
    *text = decode_text(in->data, in->len, n, owned);
    return CQ_OK;
}

cq_status cq_reader_read_plain(const cq_reader_input *in, cq_doctext *out, cq_err *err) {
    const char *text;
    size_t n;
    char *owned;
    cq_status s = open_input(in, out, &text, &n, &owned, err);
    if (s != CQ_OK) return s;
    line_list l = {0};
    split_lines(text, n, plain_line, &l);
    text_builder b = {0};
    if (l.failed) s = cq_err_set(err, CQ_ERR_NOMEM, "out of memory while reading the text");
    else if ((s = assemble(&l, true, &b)) != CQ_OK) cq_err_set(err, s, "out of memory while reading the text");
    else s = finish_text(&b, NULL, out, err);
    builder_free(&b);
    lines_free(&l);
    free(owned);
    return s;
}

/* ---- Markdown ---- */

typedef struct {
    line_list lines;
    cq_strbuf tmp;
    bool in_fence;
    char fence_char;
    bool next_hard;     /* the previous line ended in a hard break */
    bool seen_content;  /* any non-blank line so far (for the title) */
    char *title;
    bool title_failed;
} md_state;

/* Appends s[0..n) to out with trivial inline markup removed: images and links keep their text, `code`,
 * **strong** and __strong__ lose their markers, backslash escapes are resolved. Single * and _ are left alone
 * ("40*4=160h" is not emphasis). */
static void md_inline(const char *s, size_t n, cq_strbuf *out) {
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\\' && i + 1 < n && strchr("\\`*_{}[]()#+-.!|>~<", s[i + 1])) {
            cq_strbuf_append(out, s + i + 1, 1);
            i += 2;
            continue;
        }
        if ((c == '[' || (c == '!' && i + 1 < n && s[i + 1] == '['))) {
            size_t open = c == '!' ? i + 1 : i;
            size_t close = open + 1;
            int depth = 1;
            while (close < n && depth) {
                if (s[close] == '[') depth++;
                else if (s[close] == ']') depth--;
                if (depth) close++;
            }
            if (close < n && close + 1 < n && s[close + 1] == '(') {
                size_t paren = close + 2;
                while (paren < n && s[paren] != ')') paren++;
                if (paren < n) {
                    md_inline(s + open + 1, close - open - 1, out);
                    i = paren + 1;
                    continue;
                }
            }
        }
        if ((c == '*' || c == '_') && i + 1 < n && s[i + 1] == c) {
            /* a pair of ** or __ markers on this line: drop both */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (s[j] == c && s[j + 1] == c) {
                    end = s + j;
                    break;
                }
            if (end && end > s + i + 2) {
                md_inline(s + i + 2, (size_t)(end - (s + i + 2)), out);
                i = (size_t)(end - s) + 2;
                continue;
            }
        }
        if (c == '`') {
            size_t j = i + 1;
            while (j < n && s[j] != '`') j++;
            if (j < n && j > i + 1) {
                cq_strbuf_append(out, s + i + 1, j - i - 1);
                i = j + 1;
                continue;
            }
        }
        if (c == '<' && i + 3 < n && (strncmp(s + i, "<br>", 4) == 0 || strncmp(s + i, "<br/>", 5) == 0 ||
                                      strncmp(s + i, "<br />", 6) == 0)) {
            /* an HTML line break inside a line: a paragraph break in the text */
            cq_strbuf_append(out, "\n", 1);
            i = (size_t)(strchr(s + i, '>') - s) + 1;
            continue;
        }
        cq_strbuf_append(out, s + i, 1);
        i++;
    }
}

static bool md_rule_line(const char *s, size_t n, char *which) {
    /* ---, ***, ___, === (possibly spaced) */
    char c = 0;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' || s[i] == '\t') continue;
        if (s[i] != '-' && s[i] != '*' && s[i] != '_' && s[i] != '=') return false;
        if (c && s[i] != c) return false;
        c = s[i];
        count++;
    }
    *which = c;
    return count >= 3 || (c == '=' && count >= 1);
}

static void md_add(md_state *m, const char *s, size_t n, int indent, bool hard) {
    /* inline markup may produce "\n" (from <br>): split there */
    m->tmp.len = 0;
    if (m->tmp.data) m->tmp.data[0] = 0;
    md_inline(s, n, &m->tmp);
    if (m->tmp.failed) {
        m->lines.failed = true;
        return;
    }
    const char *t = m->tmp.data ? m->tmp.data : "";
    size_t tn = m->tmp.len, i = 0;
    bool first = true;
    while (i <= tn) {
        size_t j = i;
        while (j < tn && t[j] != '\n') j++;
        if (!blank_text(t + i, j - i)) lines_add(&m->lines, t + i, j - i, indent, false, hard || !first || m->next_hard);
        first = false;
        i = j + 1;
    }
    m->next_hard = false;
}

static void md_line(void *ctx, const char *s, size_t n) {
    md_state *m = ctx;
    size_t skip;
    int indent = leading_columns(s, n, &skip);
    const char *t = s + skip;
    size_t tn = n - skip;

    if (tn >= 3 && (strncmp(t, "```", 3) == 0 || strncmp(t, "~~~", 3) == 0)) {
        if (!m->in_fence) {
            m->in_fence = true;
            m->fence_char = t[0];
        } else if (t[0] == m->fence_char) {
            m->in_fence = false;
        }
        lines_add(&m->lines, "", 0, 0, true, false);
        return;
    }
    if (m->in_fence) {
        if (!blank_text(t, tn)) lines_add(&m->lines, t, tn, indent, false, true);
        return;
    }
    if (blank_text(t, tn)) {
        lines_add(&m->lines, "", 0, 0, true, false);
        m->next_hard = false;
        return;
    }
    char rule;
    if (indent < 4 && md_rule_line(t, tn, &rule)) {
        /* thematic break or setext underline: the line before (if any) is a heading, a paragraph of its own */
        lines_add(&m->lines, "", 0, 0, true, false);
        return;
    }
    while (tn > 0 && t[0] == '>') { /* block quote */
        t++, tn--;
        while (tn > 0 && (t[0] == ' ' || t[0] == '\t')) t++, tn--;
    }
    /* hard break at the end: two spaces or a backslash */
    bool hard_end = (tn >= 2 && t[tn - 1] == ' ' && t[tn - 2] == ' ') || (tn >= 1 && t[tn - 1] == '\\');
    if (tn >= 1 && t[tn - 1] == '\\') tn--;
    while (tn > 0 && (t[tn - 1] == ' ' || t[tn - 1] == '\t')) tn--;

    size_t hashes = 0;
    while (hashes < tn && t[hashes] == '#') hashes++;
    if (hashes >= 1 && hashes <= 6 && (hashes == tn || t[hashes] == ' ' || t[hashes] == '\t')) {
        const char *h = t + hashes;
        size_t hn = tn - hashes;
        while (hn > 0 && (h[0] == ' ' || h[0] == '\t')) h++, hn--;
        while (hn > 0 && h[hn - 1] == '#') hn--; /* closing hashes */
        while (hn > 0 && (h[hn - 1] == ' ' || h[hn - 1] == '\t')) hn--;
        if (hn == 0) return;
        if (hashes == 1 && !m->seen_content && !m->title) {
            cq_strbuf tb = {0};
            cq_strbuf raw = {0};
            md_inline(h, hn, &raw);
            cq_text_repair(raw.data ? raw.data : "", raw.len, &tb, NULL);
            cq_strbuf_free(&raw);
            if (tb.failed) m->title_failed = true;
            else if (tb.len) m->title = cq_strbuf_take(&tb);
            cq_strbuf_free(&tb);
        }
        m->seen_content = true;
        md_add(m, h, hn, 0, true);
        m->next_hard = true;
        return;
    }
    m->seen_content = true;
    if (tn >= 1 && t[0] == '|') { /* table row: cells separated by one space; the separator row is dropped */
        bool sep = true;
        for (size_t i = 0; i < tn; i++)
            if (!strchr("|:- \t", t[i])) sep = false;
        if (sep) return;
        cq_strbuf row = {0};
        size_t i = 1;
        while (i < tn) {
            size_t j = i;
            while (j < tn && !(t[j] == '|' && t[j - 1] != '\\')) j++;
            size_t a = i, b = j;
            while (a < b && (t[a] == ' ' || t[a] == '\t')) a++;
            while (b > a && (t[b - 1] == ' ' || t[b - 1] == '\t')) b--;
            if (b > a) {
                if (row.len) cq_strbuf_append(&row, " ", 1);
                cq_strbuf_append(&row, t + a, b - a);
            }
            i = j + 1;
        }
        if (row.failed) m->lines.failed = true;
        else if (row.len) md_add(m, row.data, row.len, indent, true);
        cq_strbuf_free(&row);
        m->next_hard = true;
        return;
    }
    bool item = false;
    if (tn >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && (t[1] == ' ' || t[1] == '\t')) {
        t += 2, tn -= 2; /* bullet marker dropped; the item stays a line of its own */
        while (tn > 0 && (t[0] == ' ' || t[0] == '\t')) t++, tn--;
        item = true;
    } else {
        size_t d = 0;
        while (d < tn && t[d] >= '0' && t[d] <= '9') d++;
        if (d > 0 && d <= 9 && d + 1 < tn && (t[d] == '.' || t[d] == ')') && t[d + 1] == ' ') item = true;
    }
    md_add(m, t, tn, indent, item);
    m->next_hard = hard_end;
}

/* Removes <!-- … --> comments (they may span lines); a comment alone on its lines leaves blank lines. */
static char *md_strip_comments(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t i = 0, k = 0;
    while (i < n) {
        if (i + 4 <= n && memcmp(s + i, "<!--", 4) == 0) {
            size_t j = i + 4;
            while (j + 3 <= n && memcmp(s + j, "-->", 3) != 0) j++;
            size_t end = j + 3 <= n ? j + 3 : n;
            for (size_t x = i; x < end; x++) /* keep the line structure */
                if (s[x] == '\n') o[k++] = '\n';
            i = end;
            continue;
        }
        o[k++] = s[i++];
    }
    o[k] = 0;
    *out_n = k;
    return o;
}

cq_status cq_reader_read_markdown(const cq_reader_input *in, cq_doctext *out, cq_err *err) {
    const char *text;
    size_t n;
    char *owned;
    cq_status s = open_input(in, out, &text, &n, &owned, err);
    if (s != CQ_OK) return s;
    size_t sn;
    char *stripped = md_strip_comments(text, n, &sn);
    if (!stripped) {
        free(owned);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory while reading the Markdown");
    }
    md_state m = {0};
    split_lines(stripped, sn, md_line, &m);
    text_builder b = {0};
    if (m.lines.failed || m.title_failed) {
        s = cq_err_set(err, CQ_ERR_NOMEM, "out of memory while reading the Markdown");
        free(m.title);
    } else if ((s = assemble(&m.lines, false, &b)) != CQ_OK) {
        cq_err_set(err, s, "out of memory while reading the Markdown");
        free(m.title);
    } else {
        s = finish_text(&b, m.title, out, err);
    }
    builder_free(&b);
    lines_free(&m.lines);
    cq_strbuf_free(&m.tmp);
    free(stripped);
    free(owned);
    return s;
}

/* ---------------------------------------------------------------------------------------------------------
 * Formats that come as blocks (DOCX, HTML)
 * --------------------------------------------------------------------------------------------------------- */

struct cq_dt_blocks {
    text_builder b;
    cq_heading *headings;
    size_t n_headings, cap_headings;
};

cq_dt_blocks *cq_dt_blocks_new(void) { return calloc(1, sizeof(cq_dt_blocks)); }

void cq_dt_blocks_free(cq_dt_blocks *b) {
    if (!b) return;
    builder_free(&b->b);
    free(b->headings);
    free(b);
}

void cq_dt_blocks_add(cq_dt_blocks *b, const char *s, size_t n, int heading_level) {
    size_t i = 0;
    while (i < n && !b->b.failed) {
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        size_t before = b->b.out.len;
        builder_line(&b->b, s + i, j - i, false, false);
        if (heading_level > 0 && b->b.out.len > before && !b->b.failed) {
            size_t start = b->b.out.data[before] == '\n' ? before + 1 : before;
            if (!cq_grow((void **)&b->headings, &b->cap_headings, b->n_headings + 1, sizeof *b->headings)) {
                b->b.failed = true;
                return;
            }
            b->headings[b->n_headings++] = (cq_heading){(uint32_t)start, (uint32_t)b->b.out.len,
                                                         heading_level > 9 ? 9 : heading_level};
        }
        i = j + 1;
    }
}

cq_status cq_dt_blocks_finish(cq_dt_blocks *b, char *title, cq_doctext *out, cq_err *err) {
    memset(out, 0, sizeof *out);
    if (b->b.out.len > UINT32_MAX / 2) {
        cq_status s = cq_err_set(err, CQ_ERR_UNSUPPORTED, "the document's text is too large (%zu bytes)", b->b.out.len);
        free(title);
        cq_dt_blocks_free(b);
        return s;
    }
    cq_status s = finish_text(&b->b, title, out, err);
    if (s == CQ_OK && b->n_headings) {
        out->headings = b->headings;
        out->n_headings = b->n_headings;
        b->headings = NULL;
    }
    cq_dt_blocks_free(b);
    return s;
}

char *cq_dt_title(const char *s, size_t n) {
    cq_strbuf raw = {0}, out = {0};
    cq_text_repair(s, n, &raw, NULL);
    const char *r = raw.data ? raw.data : "";
    size_t i = 0;
    while (i < raw.len) {
        size_t len;
        uint32_t cp = cq_utf8_decode(r + i, raw.len - i, &len);
        if (cq_is_space(cp)) {
            if (out.len && out.data[out.len - 1] != ' ') cq_strbuf_append(&out, " ", 1);
        } else {
            cq_strbuf_append(&out, r + i, len);
        }
        i += len;
    }
    while (out.len && out.data[out.len - 1] == ' ') out.data[--out.len] = 0;
    bool ok = !raw.failed && !out.failed && out.len > 0;
    cq_strbuf_free(&raw);
    if (!ok) {
        cq_strbuf_free(&out);
        return NULL;
    }
    return cq_strbuf_take(&out);
}

/* ---------------------------------------------------------------------------------------------------------
 * Queries
 * --------------------------------------------------------------------------------------------------------- */

/* Index of the page whose text region contains byte offset pos: the last page starting at or before pos. */
static int page_at(const cq_doctext *doc, uint32_t pos) {
    int lo = 0, hi = doc->n_pages; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (doc->pages[mid].text_start <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

void cq_doctext_page_span(const cq_doctext *doc, uint32_t start, uint32_t end, int *first, int *last) {
    int f = 0, l = 0;
    if (doc && doc->pages && doc->n_pages > 0) {
        uint32_t e = end > start ? end - 1 : start;
        f = doc->pages[page_at(doc, start)].page_no;
        l = doc->pages[page_at(doc, e)].page_no;
    }
    if (first) *first = f;
    if (last) *last = l;
}

size_t cq_doctext_boxes(const cq_doctext *doc, uint32_t start, uint32_t end, cq_box **out) {
    if (out) *out = NULL;
    if (!out || !doc || !doc->pages || !doc->lines || doc->n_lines == 0 || end <= start) return 0;
    /* first line ending after start (lines are in text order) */
    size_t lo = 0, hi = doc->n_lines;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (doc->lines[mid].text_end <= start) lo = mid + 1;
        else hi = mid;
    }
    size_t cap = 0, n = 0;
    cq_box *boxes = NULL;
    for (size_t i = lo; i < doc->n_lines && doc->lines[i].text_start < end; i++) {
        const cq_line *ln = &doc->lines[i];
        float x0 = 0, x1 = 0;
        bool any = false;
        for (uint32_t g = ln->glyph_first; g < ln->glyph_first + ln->n_glyphs; g++) {
            uint32_t off = doc->glyph_offset[g];
            if (off < start || off >= end) continue;
            if (!any || doc->glyph_x0[g] < x0) x0 = doc->glyph_x0[g];
            if (!any || doc->glyph_x1[g] > x1) x1 = doc->glyph_x1[g];
            any = true;
        }
        if (!any) continue;
        if (!cq_grow((void **)&boxes, &cap, n + 1, sizeof *boxes)) {
            free(boxes);
            return 0;
        }
        boxes[n++] = (cq_box){.page_no = ln->page_no, .x0 = x0, .y0 = ln->y0, .x1 = x1, .y1 = ln->y1};
    }
    *out = boxes;
    return n;
}

void cq_doctext_free(cq_doctext *doc) {
    if (!doc) return;
    free(doc->text);
    free(doc->pages);
    free(doc->lines);
    free(doc->glyph_offset);
    free(doc->glyph_x0);
    free(doc->glyph_x1);
    free(doc->headings);
    free(doc->title);
    memset(doc, 0, sizeof *doc);
}
