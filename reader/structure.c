/* Structure parser: document text → clauses (see reader/reader.h for the model).
 *
 * Four passes over the text, each linear:
 *   1. segmentation: the text is cut into segments at hard breaks ('\n'), page breaks ('\f') and, in Chinese
 *      text, at "virtual" breaks inside long lines (a space after 。！？；： or a wide indentation run), because
 *      plain-text notices often arrive as one line with the paragraphs glued by spaces;
 *   2. classification: each segment is looked at on its own: does it start with an article label (第X条,
 *      Article IV, Section 7.2, 7.2, § 3), is it a heading (第X章, 一、 …, ARTICLE I alone, CAPITALS), a table of
 *      contents line, does it end with a colon;
 *   3. resolution: the label candidates are accepted or rejected as a sequence (numbers mostly go up by one) and
 *      headings are confirmed from their neighbours;
 *   4. emission: articles run from their label to the next article or heading; text that is not inside an article
 *      (preamble, notices, judgments, attachments) is cut into paragraph chunks of a useful size.
 *
 * Decisions worth knowing (tests pin each of them):
 *   - A line that mentions an article ("第十二条规定…", "Section 3.4 of this Agreement") does not start one: the
 *     characters after the label must look like an article body, and the number must fit the sequence.
 *   - Amendments (修正案, 决定) quote whole articles at line start. An out-of-sequence label right after a paragraph
 *     ending in "：" opens a quotation when the outer sequence resumes later, or when the label goes backwards or
 *     jumps far ahead: the quoted articles become articles of their own (label lookups for "第一百二十六条" in
 *     宪法修正案 work), their path nests under the quoting article ("第五十二条 > 第七节 监察委员会 >
 *     第一百二十三条"), and the outer numbering carries on after them. A small jump after a colon is taken as a
 *     gap in the numbering, so that a missing article does not turn the rest of a law into a quotation.
 *   - 一、二、 and （一） lines are headings only when they look like headings (short, no sentence punctuation) and,
 *     inside an article, only when an article follows. They never get a label_key: label_key is kept for true
 *     articles so that a lookup "第三条" cannot land on the third item of a notice. In notices they go into the
 *     path of the chunks below them and always start a new chunk.
 *   - Unnumbered headings between two articles (一、管辖 / （三）动产与权利担保, or chapter names whose "第X章" was
 *     lost, e.g. "保护规划") go into the path of the following articles but stay in the text of the article before
 *     them: plain text cannot tell them from an article's last line (the laws-zh gold keeps them there too), and
 *     dropping text is worse than carrying a stray heading. 附则 alone on its line is treated the same way;
 *     第X章 / 第X节 lines and attachments (附件 …) are left out of articles.
 *   - A clause runs to the next label or heading. Only a clause over CQ_ARTICLE_MAX_CHARS (far above any genuine
 *     article) is cut: its labelled part keeps whole lines up to the limit, the rest follows as paragraph chunks
 *     under its path. Unstructured text is merged and split into chunks (sizes below). English clauses with an
 *     empty body whose next clause is deeper ("ARTICLE VII" followed by "7.1") are headings only; a clause with
 *     sub-clauses heads their path ("II. LICENSE > Section II.A").
 *   - English numbering is accepted as a sequence: 7.1 → 7.2 → 8 (or 8.1), up to a few skipped numbers; a label
 *     repeated soon after (a list "1. 2. 3." inside section 2) loses to its twin styled like the accepted labels
 *     ("2. Fees." over "2. If the Buyer …"); under ARTICLE / I. headings a bare "1." is a list item; outline
 *     letters A. B. C. belong to the current top level ("C." after "B." is a letter, not roman 100).
 *   - Tables of contents (dot leaders, or the short lines after "Contents"/目录 until the first entry comes again)
 *     are text, not labels. Attachments (附件, EXHIBIT A, Schedule 1.1(b) – …) end the clause before them, head
 *     the chunks after them, and let numbering start afresh.
 *   - label_key: Chinese and Arabic numbers become decimal, 之一 becomes "-1" (第二十条之一 → "20-1"), roman
 *     article numbers become decimal (ARTICLE IV → "4"), dotted numbers stay as printed ("7.2", "1.01": the
 *     clause router keys questions the same way), outline letters follow their top level (I. / B. → "1.b").
 *   - Display labels: Chinese labels as printed without spaces ("第十二条"); English ones as "Article IV",
 *     "Section 7.2" (also for bare numbered headings "7.2 Termination."), "§ 3". */
#include "reader/reader.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/grow.h"
#include "core/numerals.h"
#include "core/strbuf.h"
#include "core/utf8.h"

/* Chunk sizes for text without structure, in code points. The retrieval engineer tunes these. */
#define CQ_PARA_MIN_CHARS 200   /* consecutive paragraphs are merged until a chunk reaches this size ... */
#define CQ_PARA_MAX_CHARS 400   /* ... as long as the merged chunk stays within this size */
#define CQ_PARA_SPLIT_CHARS 600 /* a paragraph longer than this is split, at sentence ends where possible */
/* A labelled clause longer than this (a 10-K "Section" running over fifty pages, a law whose last article swallowed
 * its attached tables) keeps its label and whole lines up to this size; the rest follows as paragraph chunks whose
 * path ends with the clause. Genuine articles stay whole: the longest in the 3,368 laws of laws-zh has ~1,400. */
#define CQ_ARTICLE_MAX_CHARS 3000

#define HEADING_MAX_CHARS 40      /* a Chinese heading line (第三章 申报条件, 一、总体要求) is at most this long */
#define PLAIN_HEADING_MAX_CHARS 20 /* an unnumbered heading line (保护规划, 附则) */
#define EN_HEADING_MAX_CHARS 80   /* an English heading line (ARTICLE I DEFINITIONS, EXHIBIT A) */
#define TITLE_MAX_CHARS 80        /* the document title line */
#define PATH_ELEM_MAX_CHARS 60    /* a heading as it appears in a path */
#define LOOKAHEAD 256             /* candidates examined ahead when a sequence decision needs the future */
#define MAX_LEVELS 16

/* ---------------------------------------------------------------------------------------------------------- */
/* Segments */

enum { CAND_NONE = 0, CAND_ARTICLE = 1 };
enum { HEAD_NONE = 0, HEAD_NUMBERED, HEAD_KNOWN, HEAD_ATTACH, HEAD_ENUM, HEAD_PLAIN, HEAD_CAPS, HEAD_MARKED };
enum { ROLE_BODY = 0, ROLE_ARTICLE, ROLE_HEADING, ROLE_TITLE };
/* English labels: ARTICLE IV, Section 7.2, § 3, 7.2 / 12., outline headings I. / A. */
enum { EN_NONE = 0, EN_ARTICLE, EN_SECTION, EN_SIGN, EN_NUMBER, EN_ROMAN, EN_LETTER };

enum {
    F_COLON = 1 << 0,     /* ends with ：or : (possibly followed by an opening quote) */
    F_TOC = 1 << 1,       /* table-of-contents line (dot leaders and a page number) */
    F_HEADLIKE = 1 << 2,  /* short and without sentence punctuation */
    F_ENUM_TOP = 1 << 3,  /* starts with 一、 (a top-level enumeration) */
    F_QUOTED = 1 << 4,    /* article or heading inside a quotation (修正案) */
    F_SENT_END = 1 << 5,  /* ends with sentence punctuation */
    F_LABEL_ONLY = 1 << 6, /* the segment is only a label ("ARTICLE I", "第一章") */
    F_WEAK = 1 << 7,       /* "2 In connection with …": a bare number without a dot; only a strict successor counts */
    F_MARKED = 1 << 8,     /* the format marks the line as a heading (cq_doctext.headings) */
};

typedef struct {
    uint32_t start, end;   /* trimmed byte span in the text */
    uint32_t n_chars;      /* code points in [start, end) */
    uint32_t label_end;    /* article candidates: end of the label ("第十二条之一", "Section 7.2") */
    uint32_t head_end;     /* headings: end of the heading text used in paths */
    uint32_t num[4];       /* Chinese: num[0] = article number, num[1] = 之X; English: the dotted number */
    uint8_t cand;          /* CAND_* */
    uint8_t head;          /* HEAD_* (lexical heading candidate; HEAD_MARKED: only the format says so) */
    uint8_t level;         /* heading level: 1 编/attachment … 3 章 … 5 一、 6 （一）; English 1 article, 1+d */
    uint8_t en_kind;       /* EN_* */
    uint8_t depth;         /* English: components in num */
    uint8_t role;          /* ROLE_* after resolution */
    uint16_t flags;        /* F_* */
} segment;

typedef struct {
    uint8_t level;
    uint32_t start, end; /* heading text in the document */
} heading_ref;

typedef struct {
    const cq_doctext *doc;
    const char *t;
    uint32_t n;
    bool cjk;

    segment *segs;
    size_t n_segs, cap_segs;
    uint32_t *cands; /* indexes of article candidates */
    size_t n_cands;

    cq_clause *clauses;
    size_t n_clauses, cap_clauses;

    heading_ref stack[MAX_LEVELS];
    size_t n_stack;
    heading_ref qstack[MAX_LEVELS]; /* headings inside the current quotation */
    size_t n_qstack;
    size_t parent_article; /* clause index of the last outer article, (size_t)-1 when none */

    bool have_articles;    /* at least one article accepted */
    bool article_emitted;  /* an article clause has been emitted (chunks after it are PARAGRAPH, not PREAMBLE) */

    /* open article */
    bool art_open;
    size_t art_seg;
    uint32_t art_end;
    bool art_quoted;
    char *art_label, *art_key, *art_path;

    /* open paragraph chunk */
    bool chunk_open;
    uint32_t chunk_start, chunk_end, chunk_chars;
    uint32_t pending_head_start; /* start of heading lines that open the next chunk; UINT32_MAX when none */
    uint32_t pending_head_chars;
    char *chunk_path;
    const char *cont_path; /* while an overlong clause continues as chunks: their path */

    uint32_t en_top_start, en_top_end; /* printed number of the current English top-level label */
    uint8_t last_numbered_level; /* level of the last 第X编/章/节 heading: plain headings sit at the same level */

    bool nomem;
} parser;

/* ---------------------------------------------------------------------------------------------------------- */
/* Small helpers */

static uint32_t cp_at(const parser *p, uint32_t i, uint32_t e, size_t *len) {
    return cq_utf8_decode(p->t + i, e - i, len);
}

/* The code point that ends at byte `end` (start > the previous boundary). */
static uint32_t cp_before(const parser *p, uint32_t start, uint32_t end, uint32_t *cp_start) {
    uint32_t i = end;
    while (i > start) {
        i--;
        if (((unsigned char)p->t[i] & 0xC0) != 0x80) break;
    }
    size_t len;
    if (cp_start) *cp_start = i;
    return cq_utf8_decode(p->t + i, end - i, &len);
}

static bool is_cn_sentence_end(uint32_t cp) { return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; } /* 。！？ */
static bool is_closing_quote(uint32_t cp) {
    return cp == 0x201D || cp == 0x2019 || cp == 0x300D || cp == 0x300F || cp == 0xFF09 || cp == ')' || cp == '"' ||
           cp == '\'';
}
static bool is_colon(uint32_t cp) { return cp == 0xFF1A || cp == ':'; }
static bool is_upper(uint32_t cp) { return cp >= 'A' && cp <= 'Z'; }
static bool is_lower(uint32_t cp) { return cp >= 'a' && cp <= 'z'; }
static bool is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
static bool is_inline_space(uint32_t cp) { return cp != '\n' && cp != '\f' && cq_is_space(cp); }

/* Punctuation that makes a line a sentence rather than a heading. */
static bool is_sentence_punct(uint32_t cp) {
    switch (cp) {
    case 0x3002: case 0xFF0C: case 0xFF1B: case 0xFF1A: case 0xFF01: case 0xFF1F: /* 。，；：！？ */
    case ',': case ';': case ':': case '!': case '?':
        return true;
    default:
        return false;
    }
}

static uint32_t count_chars(const parser *p, uint32_t s, uint32_t e) { return (uint32_t)cq_utf8_count(p->t + s, e - s); }

static bool starts_with(const parser *p, uint32_t i, uint32_t e, const char *lit) {
    size_t n = strlen(lit);
    return e - i >= n && memcmp(p->t + i, lit, n) == 0;
}

static bool ends_with_lit(const parser *p, uint32_t s, uint32_t e, const char *lit) {
    size_t n = strlen(lit);
    return e - s >= n && memcmp(p->t + e - n, lit, n) == 0;
}

static uint32_t skip_inline_space(const parser *p, uint32_t i, uint32_t e) {
    while (i < e) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        if (!is_inline_space(cp)) break;
        i += (uint32_t)len;
    }
    return i;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Pass 1: segmentation */

static void add_segment(parser *p, uint32_t s, uint32_t e) {
    /* trim */
    while (s < e) {
        size_t len;
        uint32_t cp = cp_at(p, s, e, &len);
        if (!cq_is_space(cp)) break;
        s += (uint32_t)len;
    }
    while (e > s) {
        uint32_t cs;
        uint32_t cp = cp_before(p, s, e, &cs);
        if (!cq_is_space(cp)) break;
        e = cs;
    }
    if (s >= e) return;
    if (!cq_grow((void **)&p->segs, &p->cap_segs, p->n_segs + 1, sizeof *p->segs)) {
        p->nomem = true;
        return;
    }
    segment *g = &p->segs[p->n_segs++];
    memset(g, 0, sizeof *g);
    g->start = s;
    g->end = e;
    g->head_end = e;
}

/* Cuts the line [s, e) at virtual breaks (Chinese text only): whitespace after 。！？；：” or a run of at least
 * three spaces (or two ideographic spaces) after CJK text. */
static void segment_line(parser *p, uint32_t s, uint32_t e) {
    if (!p->cjk) {
        add_segment(p, s, e);
        return;
    }
    uint32_t seg_start = s, i = s;
    uint32_t prev_cp = 0;
    while (i < e) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        if (!is_inline_space(cp)) {
            prev_cp = cp;
            i += (uint32_t)len;
            continue;
        }
        uint32_t ws = i, run = 0, ideo = 0;
        while (i < e) {
            cp = cp_at(p, i, e, &len);
            if (!is_inline_space(cp)) break;
            run++;
            if (cp == 0x3000) ideo++;
            i += (uint32_t)len;
        }
        if (i >= e || prev_cp == 0) continue;
        bool after_cjk = cq_is_cjk(prev_cp) || cq_is_cjk_punct(prev_cp);
        bool brk = is_cn_sentence_end(prev_cp) || prev_cp == 0xFF1B || prev_cp == 0xFF1A || /* 。！？；： */
                   prev_cp == 0x201D || prev_cp == 0x300D || prev_cp == 0x300F ||                /* ”」』 */
                   (after_cjk && (run >= 3 || ideo >= 2));
        if (brk) {
            add_segment(p, seg_start, ws);
            seg_start = i;
        }
    }
    add_segment(p, seg_start, e);
}

static void segment_text(parser *p) {
    uint32_t s = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        char c = p->t[i];
        if (c == '\n' || c == '\f') {
            segment_line(p, s, i);
            s = i + 1;
        }
    }
    segment_line(p, s, p->n);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Pass 2: classification */

/* Heading-likeness: short, no sentence punctuation anywhere, does not end with a colon. */
static bool text_headlike(const parser *p, uint32_t s, uint32_t e, uint32_t max_chars) {
    uint32_t n = 0;
    for (uint32_t i = s; i < e;) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        if (is_sentence_punct(cp)) return false;
        if (++n > max_chars) return false;
        i += (uint32_t)len;
    }
    return n > 0;
}

/* Characters that, right after 第X条, show the line mentions the article instead of starting it:
 * 第十二条规定 / 第十二条的 / 第十二条、第十三条 / 第十二条第二款 / 第十二条至第十五条 … */
static bool is_mention_follower(uint32_t cp) {
    switch (cp) {
    case 0x3001: case 0xFF0C: case ',': case 0x3002: case 0xFF1B: case ';': /* 、，,。；; */
    case 0x7684: case 0x4E4B: case 0x4E2D: case 0x81F3: case 0x548C: case 0x4E0E: /* 的之中至和与 */
    case 0x53CA: case 0x6216: case 0x6B3E: case 0x9879: case 0x89C4: case 0x7B2C: /* 及或款项规第 */
    case 0x5230: case 0x524D: case 0x540E: case 0x6240: case 0x7B49: /* 到前后所等 */
    case 0x201D: case 0x300B: case 0x300D: case 0xFF09: case ')': case '"': /* ”》」）)" */
        return true;
    default:
        return false;
    }
}

/* 第X条 / 第X章 … at s. Returns the unit (条 章 节 编 分编 as 'T','Z','J','B','F') or 0; fills number, sub and
 * the end of the label. */
static char parse_cn_label(const parser *p, uint32_t s, uint32_t e, uint32_t *num, uint32_t *sub, uint32_t *label_end) {
    if (!starts_with(p, s, e, "第")) return 0;
    uint32_t i = skip_inline_space(p, s + 3, e);
    size_t used;
    long v = cq_number_parse(p->t + i, e - i, &used);
    if (v <= 0) return 0;
    i = skip_inline_space(p, i + (uint32_t)used, e);
    char unit = 0;
    if (starts_with(p, i, e, "条")) unit = 'T', i += 3;
    else if (starts_with(p, i, e, "章")) unit = 'Z', i += 3;
    else if (starts_with(p, i, e, "节")) unit = 'J', i += 3;
    else if (starts_with(p, i, e, "编")) unit = 'B', i += 3;
    else if (starts_with(p, i, e, "分编")) unit = 'F', i += 6;
    else return 0;
    *num = (uint32_t)v;
    *sub = 0;
    if (unit == 'T' && starts_with(p, i, e, "之")) {
        long w = cq_number_parse(p->t + i + 3, e - i - 3, &used);
        if (w > 0) {
            *sub = (uint32_t)w;
            i += 3 + (uint32_t)used;
        }
    }
    *label_end = i;
    return unit;
}

/* Leading Chinese enumeration: 一、 (top, returns 1), （一） or (一) (returns 2), 1、 1． （1） (returns 3); sets the
 * end of the marker. */
static int parse_cn_enum(const parser *p, uint32_t s, uint32_t e, uint32_t *marker_end) {
    size_t len;
    uint32_t i = s;
    uint32_t cp = cp_at(p, i, e, &len);
    if (cq_is_cn_numeral(cp)) {
        int k = 0;
        while (i < e && k < 5) {
            cp = cp_at(p, i, e, &len);
            if (!cq_is_cn_numeral(cp)) break;
            i += (uint32_t)len;
            k++;
        }
        if (i < e) {
            cp = cp_at(p, i, e, &len);
            if (cp == 0x3001 || cp == 0xFF0E) { /* 、 ． */
                *marker_end = i + (uint32_t)len;
                return 1;
            }
        }
        return 0;
    }
    if (cp == 0xFF08 || cp == '(') {
        i += (uint32_t)len;
        uint32_t d = i;
        bool cn = false, ar = false;
        while (i < e) {
            cp = cp_at(p, i, e, &len);
            if (cq_is_cn_numeral(cp)) cn = true;
            else if (is_digit(cp)) ar = true;
            else break;
            i += (uint32_t)len;
            if (i - d > 12) return 0;
        }
        if (i == d || i >= e || (cn && ar)) return 0;
        cp = cp_at(p, i, e, &len);
        if (cp != 0xFF09 && cp != ')') return 0;
        *marker_end = i + (uint32_t)len;
        return cn ? 2 : 3;
    }
    if (is_digit(cp)) {
        while (i < e && is_digit((unsigned char)p->t[i])) i++;
        if (i - s > 3 || i >= e) return 0;
        cp = cp_at(p, i, e, &len);
        if (cp == 0x3001 || cp == 0xFF0E || (cp == '.' && i + 1 < e && !is_digit((unsigned char)p->t[i + 1]))) {
            *marker_end = i + (uint32_t)len;
            return 3;
        }
    }
    return 0;
}

/* A line of the table of contents: dot leaders (.... or ……) followed by a page number at the end. */
static bool is_toc_line(const parser *p, const segment *g) {
    uint32_t e = g->end, i = e;
    while (i > g->start && is_digit((unsigned char)p->t[i - 1])) i--;
    if (i == e) return false;
    while (i > g->start && (p->t[i - 1] == ' ' || p->t[i - 1] == '\t')) i--;
    int dots = 0;
    while (i > g->start) {
        uint32_t cs;
        uint32_t cp = cp_before(p, g->start, i, &cs);
        if (cp == '.' || cp == 0x2026 || cp == 0x00B7 || cp == 0x22EF || cp == '_') dots += cp == 0x2026 ? 3 : 1;
        else if (cp != ' ') break;
        i = cs;
    }
    return dots >= 4;
}

static bool word_is(const parser *p, uint32_t s, uint32_t e, const char *w) {
    size_t n = strlen(w);
    return e - s == n && memcmp(p->t + s, w, n) == 0;
}

static uint32_t word_end(const parser *p, uint32_t i, uint32_t e) {
    while (i < e && ((p->t[i] >= 'A' && p->t[i] <= 'Z') || (p->t[i] >= 'a' && p->t[i] <= 'z'))) i++;
    return i;
}

/* The Roman numeral that is the whole word [s, e) (8 letters at most), else -1. */
static int roman_value(const parser *p, uint32_t s, uint32_t e) {
    size_t used;
    long v = e - s <= 8 ? cq_roman_parse(p->t + s, e - s, &used) : -1;
    return v > 0 && used == e - s ? (int)v : -1;
}

/* Dotted number at i: 7, 7.2, 1.01, 2.3.1. Returns components (0 when none), sets the end (before a trailing '.'). */
static int parse_dotted(const parser *p, uint32_t i, uint32_t e, uint32_t num[4], uint32_t *end) {
    int d = 0;
    while (i < e && is_digit((unsigned char)p->t[i])) {
        uint32_t v = 0, k = 0;
        while (i < e && is_digit((unsigned char)p->t[i])) {
            v = v * 10 + (uint32_t)(p->t[i] - '0');
            i++;
            if (++k > 3) return 0;
        }
        if (d == 4) return 0;
        num[d++] = v;
        *end = i;
        if (i + 1 < e && p->t[i] == '.' && is_digit((unsigned char)p->t[i + 1])) i++;
        else break;
    }
    return d;
}

/* What follows an English label: end of line, or space and something that is not a lower-case word (a lower-case
 * word means a mention: "Section 3.4 of this Agreement"). */
static bool en_label_follow_ok(const parser *p, uint32_t i, uint32_t e, bool *label_only) {
    bool stop = i < e && (p->t[i] == '.' || p->t[i] == ':');
    if (stop) i++;
    uint32_t j = skip_inline_space(p, i, e);
    *label_only = j >= e;
    if (j >= e) return true;
    size_t len;
    uint32_t cp = cp_at(p, j, e, &len);
    if (j == i) return stop && is_upper(cp); /* "Article 1.Amendment" (a space lost by the PDF), not "7.3(a)" */
    return !is_lower(cp);
}

static void classify_en(parser *p, segment *g) {
    uint32_t s = g->start, e = g->end;
    uint32_t we = word_end(p, s, e);
    uint32_t num[4] = {0};
    uint32_t lend = 0;
    bool label_only = false;
    size_t len;
    uint32_t cp = cp_at(p, s, e, &len);

    if (we > s) {
        bool art = word_is(p, s, we, "ARTICLE") || word_is(p, s, we, "Article");
        bool sec = word_is(p, s, we, "SECTION") || word_is(p, s, we, "Section") || word_is(p, s, we, "Sec") ||
                   word_is(p, s, we, "SEC");
        if (art || sec) {
            uint32_t i = we;
            if (sec && i < e && p->t[i] == '.') i++;
            i = skip_inline_space(p, i, e);
            if (i == we || i >= e) goto caps;
            int d = 0;
            if (is_digit((unsigned char)p->t[i])) {
                d = parse_dotted(p, i, e, num, &lend);
            } else if (art) {
                uint32_t re = word_end(p, i, e);
                int v = roman_value(p, i, re);
                if (v > 0) {
                    num[0] = (uint32_t)v;
                    d = 1;
                    lend = re;
                }
            }
            if (d > 0 && en_label_follow_ok(p, lend, e, &label_only)) {
                g->cand = CAND_ARTICLE;
                g->en_kind = art ? EN_ARTICLE : EN_SECTION;
                g->depth = (uint8_t)d;
                memcpy(g->num, num, sizeof num);
                g->label_end = lend;
                g->level = (uint8_t)(art ? 1 : 1 + d);
                if (label_only) g->flags |= F_LABEL_ONLY;
                return;
            }
            goto caps;
        }
        /* outline markers "I. TERM AND TERMINATION" / "A. Term." (a capital run, a dot, a capital word) */
        if (we - s <= 6 && we < e && p->t[we] == '.' &&
            (we + 1 == e || p->t[we + 1] == ' ' || p->t[we + 1] == '\t')) {
            bool caps_run = true;
            for (uint32_t i = s; i < we; i++) caps_run &= is_upper((unsigned char)p->t[i]);
            uint32_t j = skip_inline_space(p, we + 1, e);
            cp = j < e ? cp_at(p, j, e, &len) : 0;
            if (caps_run && (j >= e || is_upper(cp) || cp == '(' || cp == '"' || cp == 0x201C)) {
                int v = roman_value(p, s, we);
                if (v > 0 || we - s == 1) {
                    g->cand = CAND_ARTICLE;
                    g->en_kind = v > 0 ? EN_ROMAN : EN_LETTER;
                    g->num[0] = v > 0 ? (uint32_t)v : (uint32_t)(p->t[s] - 'A' + 1);
                    g->num[1] = v > 0 && we - s == 1 ? (uint32_t)(p->t[s] - 'A' + 1) : 0; /* "I." may be a letter */
                    g->depth = 1;
                    g->label_end = we;
                    g->level = v > 0 ? 1 : 3;
                    if (j >= e) g->flags |= F_LABEL_ONLY; /* "II." with its title on the next line */
                    return;
                }
            }
        }
        bool attach = word_is(p, s, we, "EXHIBIT") || word_is(p, s, we, "Exhibit") || word_is(p, s, we, "SCHEDULE") ||
                      word_is(p, s, we, "Schedule") || word_is(p, s, we, "ANNEX") || word_is(p, s, we, "Annex") ||
                      word_is(p, s, we, "APPENDIX") || word_is(p, s, we, "Appendix") ||
                      word_is(p, s, we, "ATTACHMENT") || word_is(p, s, we, "Attachment");
        if (attach && g->n_chars <= EN_HEADING_MAX_CHARS) {
            /* "EXHIBIT A", "Schedule 1.1(b) – Assigned Domain Names", "Annex 2: Form of Notice"; not "Schedule 1 sets
             * out the fees." */
            uint32_t i = skip_inline_space(p, we, e), id = i;
            while (i < e && i - id < 12 && (is_upper((unsigned char)p->t[i]) || is_lower((unsigned char)p->t[i]) ||
                                            is_digit((unsigned char)p->t[i]) || strchr(".()-", p->t[i])))
                i++;
            bool ok = i > id && i - id < 12 && (i >= e || p->t[i] == ' ' || p->t[i] == ':');
            if (ok && i > id && p->t[i - 1] == '.') i--; /* "EXHIBIT A." */
            uint32_t j = skip_inline_space(p, i, e);
            if (ok && j < e) {
                cp = cp_at(p, j, e, &len);
                ok = cp == ':' || cp == 0x2013 || cp == 0x2014 || cp == '-' || is_upper(cp) || cp == '"' || cp == 0x201C;
            }
            uint32_t last = cp_before(p, s, e, NULL);
            if (ok && last != ',' && last != ';') {
                g->head = HEAD_ATTACH;
                g->level = 0;
                return;
            }
        }
    } else if (cp == 0x00A7) { /* § */
        uint32_t i = s + (uint32_t)len;
        if (i < e && starts_with(p, i, e, "\xC2\xA7")) i += 2;
        i = skip_inline_space(p, i, e);
        int d = parse_dotted(p, i, e, num, &lend);
        if (d > 0 && en_label_follow_ok(p, lend, e, &label_only)) {
            g->cand = CAND_ARTICLE;
            g->en_kind = EN_SIGN;
            g->depth = (uint8_t)d;
            memcpy(g->num, num, sizeof num);
            g->label_end = lend;
            g->level = (uint8_t)(1 + d);
            if (label_only) g->flags |= F_LABEL_ONLY;
            return;
        }
    } else if (is_digit(cp)) {
        int d = parse_dotted(p, s, e, num, &lend);
        if (d > 0 && num[0] > 0 && num[0] <= 300) {
            uint32_t i = lend;
            bool dot = i < e && p->t[i] == '.';
            if (dot) i++;
            uint32_t j = skip_inline_space(p, i, e);
            bool ok;
            if (j >= e) {
                ok = dot || d > 1; /* "12." or "7.2" alone on the line */
            } else if (j == i) {
                ok = false;
            } else {
                cp = cp_at(p, j, e, &len);
                ok = is_upper(cp) || cp == '(' || cp == '"' || cp == 0x201C || cp == '[';
                /* "1 Eligibility" / "2 In connection with …": a single number without a dot before a capital */
                if (ok && d == 1 && !dot) {
                    ok = is_upper(cp);
                    if (g->n_chars > EN_HEADING_MAX_CHARS) g->flags |= F_WEAK;
                }
            }
            if (ok) {
                g->cand = CAND_ARTICLE;
                g->en_kind = EN_NUMBER;
                g->depth = (uint8_t)d;
                memcpy(g->num, num, sizeof num);
                g->label_end = lend;
                g->level = (uint8_t)(1 + d);
                if (j >= e) g->flags |= F_LABEL_ONLY;
                return;
            }
        }
    }
caps:
    /* a line in capitals: DEFINITIONS, CONFIDENTIAL INFORMATION */
    if (g->n_chars >= 3 && g->n_chars <= EN_HEADING_MAX_CHARS) {
        int upper = 0;
        for (uint32_t i = s; i < e; i++) {
            unsigned char c = (unsigned char)p->t[i];
            if (is_lower(c)) return;
            upper += is_upper(c);
        }
        cp = cp_before(p, s, e, NULL);
        if (upper >= 3 && cp != ',' && cp != ';') g->head = HEAD_CAPS, g->level = 1;
    }
}

static void classify_cn(parser *p, segment *g) {
    uint32_t s = g->start, e = g->end;
    uint32_t num = 0, sub = 0, lend = 0;
    char unit = parse_cn_label(p, s, e, &num, &sub, &lend);
    if (unit == 'T') {
        bool ok = true;
        uint32_t j = skip_inline_space(p, lend, e);
        if (j < e && j == lend) {
            size_t len;
            uint32_t cp = cp_at(p, j, e, &len);
            ok = !is_mention_follower(cp);
        }
        if (ok) {
            g->cand = CAND_ARTICLE;
            g->num[0] = num;
            g->num[1] = sub;
            g->label_end = lend;
        }
        return;
    }
    if (unit) {
        uint32_t j = skip_inline_space(p, lend, e);
        bool ok;
        if (j >= e) ok = true;
        else if (j > lend) ok = text_headlike(p, j, e, HEADING_MAX_CHARS);
        else ok = text_headlike(p, s, e, PLAIN_HEADING_MAX_CHARS + 6);
        if (ok) {
            g->head = HEAD_NUMBERED;
            g->level = unit == 'B' ? 1 : unit == 'F' ? 2 : unit == 'Z' ? 3 : 4;
            if (j >= e) g->flags |= F_LABEL_ONLY;
        }
        return;
    }
    uint32_t me = 0;
    int en = parse_cn_enum(p, s, e, &me);
    if (en == 1 || en == 2) {
        if (en == 1) g->flags |= F_ENUM_TOP;
        g->head = HEAD_ENUM;
        g->level = (uint8_t)(4 + en);
        if (text_headlike(p, s, e, HEADING_MAX_CHARS)) {
            g->flags |= F_HEADLIKE;
        } else {
            /* an inline title: "一、支持疫情防控物资供应 对生产、销售……" */
            uint32_t i = me, n = 0;
            while (i < e) {
                size_t len;
                uint32_t cp = cp_at(p, i, e, &len);
                if (is_inline_space(cp) || is_sentence_punct(cp)) break;
                i += (uint32_t)len;
                n++;
            }
            size_t len;
            if (i < e && n >= 2 && n <= HEADING_MAX_CHARS && is_inline_space(cp_at(p, i, e, &len))) {
                g->flags |= F_HEADLIKE;
                g->head_end = i;
            }
        }
        return;
    }
    if (en == 3) return;
    /* unnumbered: 附则 序言 目录 / 附件 / a short line without punctuation */
    char compact[128];
    size_t k = 0;
    for (uint32_t i = s; i < e && k + 4 < sizeof compact;) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        if (!cq_is_space(cp)) {
            memcpy(compact + k, p->t + i, len);
            k += len;
        }
        i += (uint32_t)len;
    }
    compact[k] = 0;
    if (!strcmp(compact, "附则") || !strcmp(compact, "序言") || !strcmp(compact, "目录") || !strcmp(compact, "前言")) {
        g->head = HEAD_KNOWN;
        g->level = 3;
        g->flags |= F_HEADLIKE;
        return;
    }
    if ((starts_with(p, s, e, "附件") || starts_with(p, s, e, "附录") || starts_with(p, s, e, "附表")) &&
        g->n_chars <= HEADING_MAX_CHARS) {
        uint32_t cs;
        uint32_t last = cp_before(p, s, e, &cs);
        if (last != 0x3002 && last != 0xFF1B && last != 0xFF0C) {
            g->head = HEAD_ATTACH;
            g->level = 1;
            g->flags |= F_HEADLIKE;
            return;
        }
    }
    if (g->n_chars >= 2 && g->n_chars <= PLAIN_HEADING_MAX_CHARS) {
        int han = 0;
        for (uint32_t i = s; i < e;) {
            size_t len;
            uint32_t cp = cp_at(p, i, e, &len);
            if (cq_is_cjk(cp)) han++;
            else if (!(cq_is_space(cp) || cp == 0x300A || cp == 0x300B || cp == 0x201C || cp == 0x201D ||
                       cp == 0xFF08 || cp == 0xFF09 || cp == 0x3001 || cp == 0x00B7))
                return; /* digits, symbols, punctuation: not a heading */
            i += (uint32_t)len;
        }
        if (han >= 2) {
            g->head = HEAD_PLAIN;
            g->level = k >= 3 && !memcmp(compact + k - 3, "编", 3) ? 1 : 3; /* 合同编 */
            g->flags |= F_HEADLIKE;
        }
    }
}

/* "Table of Contents" / "CONTENTS" / 目录 alone on a line. */
static bool is_contents_line(const parser *p, const segment *g) {
    static const char *words[] = {"table of contents", "table of content", "contents", "目录", "目 录", "目　录"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k]);
        if (g->end - g->start == n && !strncasecmp(p->t + g->start, words[k], n)) return true;
    }
    return false;
}

/* The text of a contents entry before its dot leaders: "1 Eligibility" in "1 Eligibility ......2", "第一章 总则……1". */
static uint32_t toc_entry_end(const parser *p, const segment *g) {
    uint32_t dots = 0, run_start = g->start;
    for (uint32_t i = g->start; i < g->end;) {
        size_t len;
        uint32_t cp = cp_at(p, i, g->end, &len);
        if (cp == '.' || cp == 0x2026 || cp == 0x00B7) { /* . … · */
            if (dots == 0) run_start = i;
            dots += cp == 0x2026 ? 3 : 1;
            if (dots >= 4) {
                uint32_t e = run_start;
                while (e > g->start && p->t[e - 1] == ' ') e--;
                return e;
            }
        } else {
            dots = 0;
        }
        i += (uint32_t)len;
    }
    return g->end;
}

/* Lines after a contents line are contents entries while they are short and until one comes again as the body
 * begins ("第一章 总则" twice, "1. Definitions" then "1. Definitions. In this Agreement …"). */
static void mark_contents(parser *p) {
    for (size_t k = 0; k < p->n_segs; k++) {
        if (!is_contents_line(p, &p->segs[k])) continue;
        p->segs[k].flags |= F_TOC;
        size_t first = k + 1;
        uint32_t first_end = first < p->n_segs ? toc_entry_end(p, &p->segs[first]) : 0;
        for (k = first; k < p->n_segs; k++) {
            segment *g = &p->segs[k];
            if (k > first && g->end - g->start >= first_end - p->segs[first].start &&
                !memcmp(p->t + g->start, p->t + p->segs[first].start, first_end - p->segs[first].start))
                break; /* the first entry again: the body */
            bool entry = (g->flags & F_TOC) || (g->n_chars <= EN_HEADING_MAX_CHARS &&
                                                text_headlike(p, g->start, g->end, EN_HEADING_MAX_CHARS));
            if (!entry) break;
            g->flags |= F_TOC;
        }
        k--;
    }
}

/* Lines the format marks as headings (Word heading styles, HTML h1-h6) are headings whatever their wording; an
 * article label stays an article (a Word file may style "第一条" as a heading). A marked heading that the text
 * also shows as one (第一章, 一、, 附件) keeps its lexical level; the others take the level their format level
 * has next to those (Heading 3 under a Heading 2 "第一章" sits at the level of 节), else the format level. */
static void mark_headings(parser *p) {
    const cq_doctext *d = p->doc;
    uint8_t lexical[10] = {0}; /* format level → the lexical level of headings seen at it */
    size_t h = 0;
    for (size_t k = 0; k < p->n_segs && h < d->n_headings; k++) {
        segment *g = &p->segs[k];
        while (h < d->n_headings && d->headings[h].end < g->end) h++;
        if (h == d->n_headings || g->start < d->headings[h].start) continue;
        int w = d->headings[h].level < 1 ? 1 : d->headings[h].level > 9 ? 9 : d->headings[h].level;
        g->flags |= F_MARKED | F_HEADLIKE;
        g->flags &= (uint16_t)~F_TOC;
        if (g->cand) continue;
        g->head_end = g->end;
        if (g->head && g->head != HEAD_PLAIN && g->head != HEAD_CAPS) {
            lexical[w] = g->level;
            continue;
        }
        g->head = HEAD_MARKED;
        int level = w;
        for (int up = w; up >= 1; up--)
            if (lexical[up]) {
                level = lexical[up] + (w - up);
                break;
            }
        g->level = (uint8_t)(level < MAX_LEVELS - 1 ? level : MAX_LEVELS - 1);
    }
}

static void classify(parser *p) {
    for (size_t k = 0; k < p->n_segs; k++) {
        segment *g = &p->segs[k];
        g->n_chars = count_chars(p, g->start, g->end);
        if (is_toc_line(p, g)) g->flags |= F_TOC;
    }
    mark_contents(p);
    for (size_t k = 0; k < p->n_segs; k++) {
        segment *g = &p->segs[k];
        uint32_t cs;
        uint32_t last = cp_before(p, g->start, g->end, &cs);
        if (last == 0x201C || last == 0x300C || last == '"') /* ：“ */
            last = cs > g->start ? cp_before(p, g->start, cs, NULL) : 0;
        if (is_colon(last)) g->flags |= F_COLON;
        if (is_cn_sentence_end(last) || last == 0xFF1B || last == '.' || last == ';' || last == '!' || last == '?' ||
            is_closing_quote(last))
            g->flags |= F_SENT_END;
        if (g->flags & F_TOC) continue;
        if (p->cjk) classify_cn(p, g);
        else classify_en(p, g);
    }
    mark_headings(p);
    for (size_t k = 0; k < p->n_segs; k++)
        if (p->segs[k].cand) p->n_cands++;
    if (p->n_cands == 0) return;
    p->cands = malloc(p->n_cands * sizeof *p->cands);
    if (!p->cands) {
        p->nomem = true;
        return;
    }
    size_t c = 0;
    for (size_t k = 0; k < p->n_segs; k++)
        if (p->segs[k].cand) p->cands[c++] = (uint32_t)k;
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Pass 3: resolution */

/* (n, sub) order of Chinese article keys. */
static int cn_cmp(const segment *a, uint32_t n, uint32_t sub) {
    if (a->num[0] != n) return a->num[0] < n ? -1 : 1;
    if (a->num[1] != sub) return a->num[1] < sub ? -1 : 1;
    return 0;
}

/* The article that directly follows (n, sub): n+1, or n with a later 之X. */
static bool cn_next(uint32_t n, uint32_t sub, const segment *c) {
    return (c->num[0] == n + 1 && c->num[1] == 0) || (c->num[0] == n && c->num[1] > sub);
}

/* Does the last segment before k that is not a heading line end with a colon? (Headings between an introduction
 * "…内容如下：" and the quoted article it introduces belong to the quotation.) */
static bool colon_before(const parser *p, size_t k) {
    for (size_t n = 0; k > 0 && n < 32; n++) {
        const segment *g = &p->segs[--k];
        if (g->head && g->head != HEAD_ENUM) continue;
        if (g->head == HEAD_ENUM && (g->flags & F_HEADLIKE)) continue;
        return (g->flags & F_COLON) != 0;
    }
    return false;
}

static void resolve_cn(parser *p) {
    bool have = false, in_quote = false;
    uint32_t on = 0, osub = 0, qn = 0, qsub = 0;
    size_t last_acc = 0, last_attach = (size_t)-1, scan = 0;
    for (size_t ci = 0; ci < p->n_cands; ci++) {
        size_t k = p->cands[ci];
        segment *g = &p->segs[k];
        for (; scan < k; scan++)
            if (p->segs[scan].head == HEAD_ATTACH) last_attach = scan;
        if (have && last_attach != (size_t)-1 && last_attach > last_acc) have = in_quote = false; /* 附件 */
        bool colon = colon_before(p, k);
        bool accept = false, quoted = false;
        if (!have) {
            /* the first label must not be followed by a smaller one (a preamble line citing 第三十一条) */
            accept = !(ci + 1 < p->n_cands && cn_cmp(&p->segs[p->cands[ci + 1]], g->num[0], g->num[1]) < 0);
        } else if (cn_next(on, osub, g)) {
            accept = true;
            in_quote = false;
        } else if (in_quote) {
            if (cn_cmp(g, qn, qsub) > 0 || colon) accept = quoted = true;
        } else if (colon) {
            bool resumes = false;
            for (size_t j = ci + 1; j < p->n_cands && j <= ci + LOOKAHEAD && !resumes; j++)
                resumes = cn_next(on, osub, &p->segs[p->cands[j]]);
            /* quoted when the outer numbering resumes later, when the label goes backwards, or when it jumps far
             * ahead (宪法修正案 第五十二条 quoting 第一百二十三条 …); a small jump is a gap in the numbering */
            if (resumes || cn_cmp(g, on, osub) <= 0 || g->num[0] > on + 3) accept = quoted = in_quote = true;
            else accept = true;
        } else if (cn_cmp(g, on, osub) > 0) {
            accept = true; /* a gap in the numbering */
        } else if (g->num[0] == 1 && g->num[1] == 0 && ci + 1 < p->n_cands &&
                   p->segs[p->cands[ci + 1]].num[0] == 2) {
            accept = true; /* a second text numbered from 第一条 */
        }
        if (!accept) {
            g->cand = CAND_NONE;
            continue;
        }
        g->role = ROLE_ARTICLE;
        last_acc = k;
        if (quoted) {
            g->flags |= F_QUOTED;
            qn = g->num[0];
            qsub = g->num[1];
        } else {
            have = true;
            on = g->num[0];
            osub = g->num[1];
        }
        p->have_articles = true;
    }
}

/* English numbering: is v the next label after u (same depth or shallower), or a first child of u? */
static bool en_successor(const uint32_t *u, int du, const uint32_t *v, int dv, uint32_t max_step) {
    for (int j = 0; j < du && j < dv; j++) {
        if (v[j] == u[j]) continue;
        if (v[j] < u[j] + 1 || v[j] > u[j] + max_step) return false;
        for (int k = j + 1; k < dv; k++)
            if (v[k] > 1) return false;
        return true;
    }
    if (dv > du) { /* child: 7 → 7.1, 7.01 */
        for (int k = du; k < dv; k++)
            if (v[k] > 1) return false;
        return true;
    }
    return false;
}

/* "2. Fees. Customer shall …" / "1 Eligibility": the label is followed by a short capitalised title (ending in a
 * period, or making up the whole line), as headings are and list items ("2. Maintain the systems; and") are not.
 * Returns the end of the title, or 0 when there is none. */
static uint32_t en_title_end(const parser *p, const segment *g) {
    static const char *small[] = {"and", "of", "or", "the", "for", "to", "in", "on", "by", "with", "a", "an"};
    uint32_t i = g->label_end, e = g->end;
    if (i < e && (p->t[i] == '.' || p->t[i] == ':')) i++;
    i = skip_inline_space(p, i, e);
    for (int words = 0; i < e && words < 10; words++) {
        uint32_t w = i;
        while (i < e && p->t[i] != ' ' && p->t[i] != '.' && p->t[i] != ';' && p->t[i] != ',') i++;
        if (i == w) return 0;
        unsigned char c = (unsigned char)p->t[w];
        bool ok = is_upper(c) || c == '(' || c == '&' || c == '-' || is_digit(c) || c >= 0x80;
        for (size_t k = 0; k < sizeof small / sizeof *small && !ok; k++)
            ok = strlen(small[k]) == i - w && !memcmp(p->t + w, small[k], i - w);
        if (!ok) return 0;
        if (i >= e) return e; /* the whole line */
        if (p->t[i] == '.') return i + 1 >= e || p->t[i + 1] == ' ' ? i : 0;
        if (p->t[i] != ' ') return 0;
        i++;
    }
    return 0;
}

static bool en_titled(const parser *p, const segment *g) { return en_title_end(p, g) != 0; }

/* Dotted-number labels: 7.2, Section 7.2, § 7.2 (not ARTICLE IV, I., A.). */
static bool en_numeric(const segment *g) {
    return g->en_kind == EN_NUMBER || g->en_kind == EN_SECTION || g->en_kind == EN_SIGN;
}

/* The segment after k is a title line: short, capitalised, no label of its own. */
static bool en_title_follows(const parser *p, size_t k) {
    if (k + 1 >= p->n_segs) return false;
    const segment *t = &p->segs[k + 1];
    return !t->cand && t->n_chars <= EN_HEADING_MAX_CHARS && is_upper((unsigned char)p->t[t->start]);
}

/* A plausible first label: 1, 1.1, 2 (when 1 was lost), 0. */
static bool en_first_ok(const segment *g) {
    if (g->num[0] > 2) return false;
    for (int k = 1; k < g->depth; k++)
        if (g->num[k] > 1) return false;
    return true;
}

static void resolve_en(parser *p) {
    uint32_t art = 0;          /* last article number (ARTICLE IV, I.), 0 = none */
    uint32_t letter = 0;       /* last outline letter (A. B.) under the current top-level label */
    bool have_article_kind = false;
    bool style_known[5] = {false}, style_titled[5] = {false}; /* per depth: do accepted labels carry titles? */
    uint32_t u[4] = {0};       /* last accepted dotted number */
    int du = 0;
    bool run_has_body = false; /* a body line followed some accepted label since the numbering (re)started */
    size_t last_acc = (size_t)-1, last_attach = (size_t)-1, scan = 0;
    size_t n_acc = 0, first_acc_ci = 0;
    for (size_t ci = 0; ci < p->n_cands; ci++) {
        size_t k = p->cands[ci];
        segment *g = &p->segs[k];
        for (; scan < k; scan++) {
            const segment *s = &p->segs[scan];
            if (s->head == HEAD_ATTACH) last_attach = scan;
            if (last_acc != (size_t)-1 && scan > last_acc && !s->cand && !(s->flags & F_TOC) && s->head != HEAD_CAPS)
                run_has_body = true;
        }
        if (last_acc != (size_t)-1 && last_attach != (size_t)-1 && last_attach > last_acc) {
            art = 0; /* EXHIBIT A: its numbering starts afresh */
            du = 0;
            n_acc = 0;
            letter = 0;
            have_article_kind = false;
            last_attach = (size_t)-1;
        }
        bool accept = false, first_like = false;
        if (g->en_kind == EN_ROMAN) {
            /* a top-level outline heading, like an article; but "C." after "B." (or "I." after "H.") is a letter */
            bool as_article = art ? g->num[0] == art + 1 || g->num[0] == art + 2 : g->num[0] <= 2;
            if (g->num[1] && du > 0 && letter > 0 && g->num[1] == letter + 1) {
                g->en_kind = EN_LETTER;
                g->num[0] = g->num[1];
                g->level = 3;
            } else {
                accept = as_article;
                first_like = g->num[0] <= 1;
                if (accept) {
                    art = g->num[0];
                    have_article_kind = true;
                    u[0] = art;
                    du = 1;
                    letter = 0;
                }
            }
            g->num[1] = 0;
        }
        if (g->en_kind == EN_LETTER) {
            /* A. B. … under the current top-level label: the vector (top, letter) */
            uint32_t top = du > 0 ? u[0] : 0;
            accept = top && g->num[0] == letter + 1;
            if (accept) {
                letter = g->num[0];
                g->num[1] = letter;
                g->num[0] = top;
                g->depth = 2;
            }
        } else if (g->en_kind == EN_ROMAN) {
            /* decided above */
        } else if (g->en_kind == EN_ARTICLE) {
            first_like = g->num[0] <= 1;
            if (art) accept = g->num[0] == art + 1 || g->num[0] == art + 2;
            else accept = g->num[0] <= 2 || (du > 0 && g->num[0] == u[0] + 1);
        } else if (have_article_kind && g->en_kind == EN_NUMBER && g->depth == 1) {
            accept = false; /* under ARTICLE / I. headings a bare "1." is a list item */
        } else if (g->en_kind == EN_NUMBER && g->label_end == g->end && !en_title_follows(p, k)) {
            accept = false; /* "1.1" alone on a line is a table cell unless its title follows: "7.2" / "Termination" */
        } else {
            first_like = en_first_ok(g) && g->num[0] <= 1;
            if (du == 0) {
                accept = en_first_ok(g) && (!(g->flags & F_WEAK) || g->num[0] == 1);
            } else if (en_successor(u, du, g->num, g->depth, 1)) {
                accept = true;
            } else if (g->flags & F_WEAK) {
                accept = false;
            } else if (en_successor(u, du, g->num, g->depth, 3)) {
                /* a skipped number: accept unless the expected one comes soon */
                accept = true;
                for (size_t j = ci + 1; j < p->n_cands && j <= ci + 32 && accept; j++) {
                    const segment *h = &p->segs[p->cands[j]];
                    if (en_numeric(h) && en_successor(u, du, h->num, h->depth, 1)) accept = false;
                }
            } else {
                accept = false;
            }
        }
        bool restart = !accept && first_like && n_acc > 0 && !run_has_body;
        if (accept && en_numeric(g)) {
            /* The same number again soon: one of the two is a list item or a quotation. When their styles differ,
             * the one styled like the labels accepted so far wins ("2. COMPENSATION" over "2. If Beta finishes …");
             * otherwise this one loses when its twin comes before its successor. */
            bool successor_seen = false;
            for (size_t j = ci + 1; j < p->n_cands && j <= ci + 32; j++) {
                const segment *h = &p->segs[p->cands[j]];
                if (h->en_kind == EN_ARTICLE) break;
                if (!en_numeric(h)) continue;
                if (en_successor(g->num, g->depth, h->num, h->depth, 1)) successor_seen = true;
                if (h->en_kind == g->en_kind && h->depth == g->depth &&
                    !memcmp(h->num, g->num, g->depth * sizeof g->num[0])) {
                    bool mine = en_titled(p, g), twin = en_titled(p, h);
                    if (style_known[g->depth] && mine != twin) accept = mine == style_titled[g->depth];
                    else accept = successor_seen;
                    break;
                }
            }
        }
        if (restart) {
            /* the labels so far had no text under them: a table of contents without dot leaders */
            for (size_t j = first_acc_ci; j < ci; j++) {
                segment *h = &p->segs[p->cands[j]];
                h->role = ROLE_BODY;
                h->cand = CAND_NONE;
            }
            n_acc = 0;
            accept = true;
        }
        if (!accept) {
            g->cand = CAND_NONE;
            continue;
        }
        if (g->en_kind == EN_ARTICLE) {
            art = g->num[0];
            have_article_kind = true;
            u[0] = art;
            du = 1;
            letter = 0;
        } else if (en_numeric(g)) {
            if (g->num[0] != u[0]) letter = 0;
            memcpy(u, g->num, sizeof u);
            du = g->depth;
            if (!style_known[du]) {
                style_known[du] = true;
                style_titled[du] = en_titled(p, g);
            }
        }
        if (n_acc == 0) {
            first_acc_ci = ci;
            run_has_body = false;
        }
        /* a label line that is a sentence carries its own body: contents entries are short title lines */
        if ((g->flags & F_SENT_END) || g->n_chars > EN_HEADING_MAX_CHARS) run_has_body = true;
        g->role = ROLE_ARTICLE;
        n_acc++;
        last_acc = k;
    }
    size_t clauses = 0;
    for (size_t ci = 0; ci < p->n_cands; ci++)
        if (p->segs[p->cands[ci]].role == ROLE_ARTICLE) clauses++;
    if (clauses < 2) { /* one label is not a structure */
        for (size_t ci = 0; ci < p->n_cands; ci++) {
            p->segs[p->cands[ci]].role = ROLE_BODY;
            p->segs[p->cands[ci]].cand = CAND_NONE;
        }
        return;
    }
    p->have_articles = true;
    /* title lines ("ARTICLE I" / "DEFINITIONS") and clauses without a body whose next clause is deeper: headings */
    for (size_t k = 0; k < p->n_segs; k++) {
        segment *g = &p->segs[k];
        if (g->role != ROLE_ARTICLE) continue;
        size_t j = k + 1;
        if ((g->flags & F_LABEL_ONLY) && j < p->n_segs && p->segs[j].role == ROLE_BODY && !p->segs[j].cand &&
            p->segs[j].n_chars <= EN_HEADING_MAX_CHARS && !(p->segs[j].flags & (F_SENT_END | F_TOC)) &&
            p->segs[j].head != HEAD_ATTACH) {
            p->segs[j].role = ROLE_TITLE;
            g->head_end = p->segs[j].end;
            j++;
        }
        while (j < p->n_segs && (p->segs[j].flags & F_TOC)) j++;
        if (j < p->n_segs && p->segs[j].role == ROLE_ARTICLE && p->segs[j].level > g->level &&
            g->n_chars <= EN_HEADING_MAX_CHARS) {
            g->role = ROLE_HEADING;
            g->head = HEAD_NUMBERED;
        }
    }
}

/* A line that is only a date: "2020年2月20日", "二〇二〇年二月二十日". */
static bool is_date_line(const parser *p, const segment *g) {
    if (g->n_chars > 16 || !ends_with_lit(p, g->start, g->end, "日")) return false;
    bool year = false, month = false;
    for (uint32_t i = g->start; i < g->end;) {
        size_t len;
        uint32_t cp = cp_at(p, i, g->end, &len);
        if (cp == 0x5E74) year = true;        /* 年 */
        else if (cp == 0x6708) month = true;  /* 月 */
        else if (cp != 0x65E5 && !is_digit(cp) && !cq_is_cn_numeral(cp) && !cq_is_space(cp)) return false;
        i += (uint32_t)len;
    }
    return year && month;
}

/* Confirms heading candidates (Chinese) from their neighbours; marks quoted headings. */
static void resolve_headings_cn(parser *p) {
    /* next_kind[k]: the first segment after k that is not a heading candidate is an article (1), a quoted article
     * (2), or something else (0) */
    size_t n = p->n_segs;
    uint8_t *next_kind = malloc(n ? n : 1);
    if (!next_kind) {
        p->nomem = true;
        return;
    }
    uint8_t nk = 0;
    for (size_t k = n; k-- > 0;) {
        next_kind[k] = nk;
        const segment *g = &p->segs[k];
        if (g->role == ROLE_ARTICLE) nk = (g->flags & F_QUOTED) ? 2 : 1;
        else if (!g->head || ((g->head == HEAD_ENUM || g->head == HEAD_PLAIN) && !(g->flags & F_HEADLIKE))) nk = 0;
        /* heading candidates are transparent: keep nk */
    }
    bool in_article = false, prev_quoted = false, prev_headish = true;
    size_t last_head = (size_t)-1; /* the heading just before k, with no text in between */
    for (size_t k = 0; k < n; k++) {
        segment *g = &p->segs[k];
        if (g->role == ROLE_ARTICLE) {
            in_article = true;
            prev_quoted = (g->flags & F_QUOTED) != 0;
            prev_headish = false;
            last_head = (size_t)-1;
            continue;
        }
        bool is_head = false;
        if (g->flags & F_MARKED) /* an unnumbered heading first in the document is its title */
            is_head = k > 0 || g->head != HEAD_MARKED;
        else switch (g->head) {
        case HEAD_NUMBERED:
        case HEAD_KNOWN:
        case HEAD_ATTACH:
            is_head = true;
            /* right after an introduction ending with a colon and followed by no quoted article: quoted text */
            if (in_article && colon_before(p, k) && next_kind[k] != 2 && g->head == HEAD_NUMBERED) is_head = false;
            break;
        case HEAD_ENUM:
            if (!(g->flags & F_HEADLIKE)) break;
            if (in_article) {
                is_head = next_kind[k] != 0 && g->head_end == g->end;
            } else if (g->head_end != g->end || next_kind[k] != 0) {
                is_head = true; /* an inline title, or followed by an article */
            } else {
                /* a short line followed by text, not by its sibling in a list of short items */
                const segment *nx = k + 1 < n ? &p->segs[k + 1] : NULL;
                is_head = nx && !(nx->head == HEAD_ENUM && nx->level <= g->level && (nx->flags & F_HEADLIKE));
            }
            break;
        case HEAD_PLAIN:
            if (k == 0) break; /* the first line is the title */
            if (in_article) is_head = next_kind[k] != 0 && prev_headish;
            else /* a heading over text, not a signature over its date */
                is_head = prev_headish && (next_kind[k] != 0 || (k + 1 < n && !p->segs[k + 1].head &&
                                                                 !is_date_line(p, &p->segs[k + 1])));
            break;
        default:
            break;
        }
        if (is_head && g->head == HEAD_PLAIN && last_head != (size_t)-1) {
            /* a heading wrapped over two lines: "勘验、检查、辨认、侦查实验等" / "笔录的审查与认定" */
            p->segs[last_head].head_end = g->end;
            g->role = ROLE_TITLE;
            g->flags |= p->segs[last_head].flags & F_QUOTED;
            continue;
        }
        last_head = is_head ? k : (size_t)-1;
        if (is_head) {
            g->role = ROLE_HEADING;
            bool quoted = next_kind[k] == 2 || (next_kind[k] == 0 && prev_quoted && in_article);
            if (quoted) g->flags |= F_QUOTED;
            else if (g->head != HEAD_PLAIN || !in_article) in_article = false;
            prev_headish = true;
        } else {
            /* the title line counts as a heading: "中华人民共和国民法典" / "合同编" / "第一分编 通则" */
            prev_headish = (g->flags & F_SENT_END) != 0 || (k == 0 && (g->flags & F_HEADLIKE));
        }
    }
    free(next_kind);
}

static void resolve_headings_en(parser *p) {
    size_t n = p->n_segs;
    bool labels_seen = false;
    for (size_t k = 0; k < n; k++) {
        segment *g = &p->segs[k];
        labels_seen |= g->role == ROLE_ARTICLE;
        if (g->role != ROLE_BODY) continue;
        if (g->flags & F_MARKED) {
            if (k > 0 || g->head != HEAD_MARKED) g->role = ROLE_HEADING; /* first and unnumbered: the title */
        } else if (g->head == HEAD_ATTACH) {
            if (k < 3 && !labels_seen) continue; /* "Exhibit 10.1" atop an SEC filing names the document itself */
            g->role = ROLE_HEADING;
        } else if (g->head == HEAD_CAPS && !p->have_articles && k > 0 && k + 1 < n && p->segs[k + 1].role == ROLE_BODY &&
                   p->segs[k + 1].head != HEAD_CAPS) {
            g->role = ROLE_HEADING; /* unstructured text: capital lines head the paragraphs below */
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Pass 4: emission */

/* Appends s[a, b) with white space runs collapsed to one space, at most max_chars code points. */
static void append_collapsed(cq_strbuf *b, const char *t, uint32_t s, uint32_t e, uint32_t max_chars) {
    bool space = false;
    uint32_t n = 0;
    for (uint32_t i = s; i < e && n < max_chars;) {
        size_t len;
        uint32_t cp = cq_utf8_decode(t + i, e - i, &len);
        if (cq_is_space(cp)) {
            space = true;
        } else {
            if (space && n > 0) {
                cq_strbuf_append(b, " ", 1);
                n++;
            }
            space = false;
            cq_strbuf_append(b, t + i, len);
            n++;
        }
        i += (uint32_t)len;
    }
}

/* Clause text: the span with each line trimmed, empty lines dropped and page breaks removed (Latin words on both
 * sides of a page break keep a space between them). */
static char *clean_text(const parser *p, uint32_t s, uint32_t e) {
    cq_strbuf b = {0};
    uint32_t i = s;
    bool first = true;
    while (i < e) {
        uint32_t le = i;
        while (le < e && p->t[le] != '\n') le++;
        /* trim the line */
        uint32_t a = i, z = le;
        while (a < z) {
            size_t len;
            uint32_t cp = cq_utf8_decode(p->t + a, z - a, &len);
            if (!cq_is_space(cp)) break;
            a += (uint32_t)len;
        }
        while (z > a) {
            uint32_t cs;
            uint32_t cp = cp_before(p, a, z, &cs);
            if (!cq_is_space(cp)) break;
            z = cs;
        }
        if (a < z) {
            if (!first) cq_strbuf_append(&b, "\n", 1);
            first = false;
            uint32_t run = a;
            for (uint32_t j = a; j < z; j++) {
                if (p->t[j] != '\f') continue;
                /* drop the page break and the white space around it */
                uint32_t l = j, r = j + 1;
                while (l > run && (p->t[l - 1] == ' ' || p->t[l - 1] == '\t')) l--;
                while (r < z && (p->t[r] == ' ' || p->t[r] == '\t' || p->t[r] == '\f')) r++;
                cq_strbuf_append(&b, p->t + run, l - run);
                uint32_t left = l > a ? cp_before(p, a, l, NULL) : 0;
                size_t len;
                uint32_t right = r < z ? cq_utf8_decode(p->t + r, z - r, &len) : 0;
                bool latin_left = left < 0x3000 && left > ' ', latin_right = right < 0x3000 && right > ' ';
                if (latin_left && latin_right) cq_strbuf_append(&b, " ", 1);
                run = r;
                j = r - 1;
            }
            cq_strbuf_append(&b, p->t + run, z - run);
        }
        i = le + 1;
    }
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

static void append_stack(cq_strbuf *b, const parser *p, const heading_ref *st, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (b->len) cq_strbuf_append(b, " > ", 3);
        append_collapsed(b, p->t, st[i].start, st[i].end, PATH_ELEM_MAX_CHARS);
    }
}

static cq_clause *new_clause(parser *p, cq_clause_kind kind, uint32_t s, uint32_t e) {
    if (p->nomem) return NULL;
    if (!cq_grow((void **)&p->clauses, &p->cap_clauses, p->n_clauses + 1, sizeof *p->clauses)) {
        p->nomem = true;
        return NULL;
    }
    cq_clause *c = &p->clauses[p->n_clauses++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->start = s;
    c->end = e;
    c->text = clean_text(p, s, e);
    cq_doctext_page_span(p->doc, s, e, &c->page_first, &c->page_last);
    if (!c->text) p->nomem = true;
    return c;
}

static void flush_chunk(parser *p) {
    if (!p->chunk_open) return;
    p->chunk_open = false;
    cq_clause_kind kind = p->have_articles && !p->article_emitted ? CQ_CLAUSE_PREAMBLE : CQ_CLAUSE_PARAGRAPH;
    cq_clause *c = new_clause(p, kind, p->chunk_start, p->chunk_end);
    if (c) c->path = p->chunk_path;
    else free(p->chunk_path);
    p->chunk_path = NULL;
}

/* Adds the piece [s, e) of n_chars code points to the current chunk, or starts a new one. */
static void feed_piece(parser *p, uint32_t s, uint32_t e, uint32_t n_chars, bool boundary) {
    if (p->chunk_open && (boundary || p->chunk_chars >= CQ_PARA_MIN_CHARS ||
                          p->chunk_chars + n_chars > CQ_PARA_MAX_CHARS))
        flush_chunk(p);
    if (!p->chunk_open) {
        cq_strbuf b = {0};
        if (p->cont_path) cq_strbuf_puts(&b, p->cont_path);
        else append_stack(&b, p, p->stack, p->n_stack);
        p->chunk_path = cq_strbuf_take(&b);
        if (b.failed || !p->chunk_path) p->nomem = true;
        p->chunk_open = true;
        p->chunk_start = s;
        p->chunk_chars = 0;
        if (p->pending_head_start != UINT32_MAX) {
            p->chunk_start = p->pending_head_start;
            p->chunk_chars = p->pending_head_chars;
            p->pending_head_start = UINT32_MAX;
            p->pending_head_chars = 0;
        }
    }
    p->chunk_end = e;
    p->chunk_chars += n_chars;
}

static bool en_abbreviation(const parser *p, uint32_t ws, uint32_t dot) {
    static const char *abbr[] = {"Mr", "Mrs", "Ms", "Dr", "No", "Nos", "Inc", "Ltd", "Co", "Corp", "St", "vs", "etc",
                                 "Sec", "Art", "Jr", "Sr", "al", "cf", "Fig", "approx", "Messrs"};
    uint32_t n = dot - ws;
    if (n <= 1) return true; /* U.S. / i.e. / a. */
    for (size_t k = 0; k < sizeof abbr / sizeof *abbr; k++)
        if (strlen(abbr[k]) == n && !memcmp(p->t + ws, abbr[k], n)) return true;
    return false;
}

/* Splits a long segment into pieces of about CQ_PARA_MAX_CHARS: at the last sentence end that keeps the piece within
 * [MIN, MAX], else the first sentence end up to SPLIT, else a clause break (；，: space), else a hard cut. */
static void feed_long(parser *p, uint32_t s, uint32_t e, bool boundary) {
    uint32_t pos = s;
    while (pos < e) {
        uint32_t n = 0, i = pos;
        uint32_t sent_in = 0, sent_in_n = 0, sent_after = 0, sent_after_n = 0, brk = 0, brk_n = 0;
        uint32_t hard = 0, hard_n = 0;
        uint32_t word_start = pos;
        while (i < e && n < CQ_PARA_SPLIT_CHARS) {
            size_t len;
            uint32_t cp = cp_at(p, i, e, &len);
            uint32_t next = i + (uint32_t)len;
            n++;
            bool letter = is_upper(cp) || is_lower(cp);
            bool sent = false;
            if (is_cn_sentence_end(cp)) {
                sent = true;
            } else if ((cp == '.' || cp == '!' || cp == '?') && next < e) {
                uint32_t j = next;
                while (j < e && is_closing_quote((unsigned char)p->t[j])) j++;
                if (j < e && p->t[j] == ' ') {
                    uint32_t k = j;
                    while (k < e && p->t[k] == ' ') k++;
                    unsigned char c = k < e ? (unsigned char)p->t[k] : 0;
                    sent = (is_upper(c) || is_digit(c) || c == '"' || c == '(' || c >= 0x80) &&
                           !(cp == '.' && en_abbreviation(p, word_start, i));
                }
            }
            if (!letter) word_start = next;
            uint32_t cut = next;
            if (sent) {
                /* keep closing quotes and brackets with their sentence */
                while (cut < e) {
                    size_t l2;
                    uint32_t c2 = cp_at(p, cut, e, &l2);
                    if (!is_closing_quote(c2)) break;
                    cut += (uint32_t)l2;
                }
                if (n >= CQ_PARA_MIN_CHARS && n <= CQ_PARA_MAX_CHARS) sent_in = cut, sent_in_n = n;
                else if (n > CQ_PARA_MAX_CHARS && !sent_after) sent_after = cut, sent_after_n = n;
            }
            if (n >= CQ_PARA_MIN_CHARS &&
                (cp == 0xFF1B || cp == 0xFF0C || cp == 0x3001 || cp == ';' || cp == ',' || cq_is_space(cp)))
                brk = next, brk_n = n;
            hard = next, hard_n = n;
            i = next;
        }
        if (i >= e) {
            feed_piece(p, pos, e, n, boundary);
            return;
        }
        uint32_t cut = sent_in ? sent_in : sent_after ? sent_after : brk ? brk : hard;
        uint32_t cut_n = sent_in ? sent_in_n : sent_after ? sent_after_n : brk ? brk_n : hard_n;
        /* trim the piece end, skip the white space after it */
        uint32_t z = cut;
        while (z > pos) {
            uint32_t cs;
            uint32_t cp = cp_before(p, pos, z, &cs);
            if (!cq_is_space(cp)) break;
            z = cs;
            cut_n--;
        }
        feed_piece(p, pos, z, cut_n, boundary);
        boundary = false;
        pos = skip_inline_space(p, cut, e);
    }
}

static void feed_body(parser *p, const segment *g, bool boundary) {
    if (g->n_chars > CQ_PARA_SPLIT_CHARS) feed_long(p, g->start, g->end, boundary);
    else feed_piece(p, g->start, g->end, g->n_chars, boundary);
}

/* The printed number of an English label: "IV" in "ARTICLE IV", "7.2" in "Section 7.2." */
static uint32_t en_token_start(const parser *p, const segment *g) {
    uint32_t i = g->start;
    if (g->en_kind == EN_ARTICLE || g->en_kind == EN_SECTION) {
        i = word_end(p, g->start, g->end);
        if (i < g->end && p->t[i] == '.') i++;
    } else if (g->en_kind == EN_SIGN) {
        while (i + 1 < g->label_end && p->t[i] == '\xC2' && p->t[i + 1] == '\xA7') i += 2;
    }
    return skip_inline_space(p, i, g->label_end);
}

static char *make_label(parser *p, const segment *g, char **key) {
    cq_strbuf b = {0}, kb = {0};
    if (p->cjk) {
        for (uint32_t i = g->start; i < g->label_end;) {
            size_t len;
            uint32_t cp = cp_at(p, i, g->label_end, &len);
            if (!cq_is_space(cp)) cq_strbuf_append(&b, p->t + i, len);
            i += (uint32_t)len;
        }
        cq_strbuf_printf(&kb, "%u", g->num[0]);
        if (g->num[1]) cq_strbuf_printf(&kb, "-%u", g->num[1]);
    } else {
        uint32_t tok = en_token_start(p, g);
        cq_strbuf_puts(&b, g->en_kind == EN_ARTICLE ? "Article " : g->en_kind == EN_SIGN ? "\xC2\xA7 " : "Section ");
        if (g->en_kind == EN_LETTER) {
            append_collapsed(&b, p->t, p->en_top_start, p->en_top_end, 12);
            cq_strbuf_append(&b, ".", 1);
            cq_strbuf_append(&b, p->t + tok, g->label_end - tok);
            cq_strbuf_printf(&kb, "%u.%c", g->num[0], 'a' + (int)g->num[1] - 1);
        } else {
            for (uint32_t j = tok; j < g->label_end; j++) {
                char c = p->t[j];
                if (g->en_kind == EN_ARTICLE && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A'); /* Article iv → IV */
                cq_strbuf_append(&b, &c, 1);
            }
            if (g->en_kind == EN_ARTICLE || g->en_kind == EN_ROMAN) cq_strbuf_printf(&kb, "%u", g->num[0]);
            else cq_strbuf_append(&kb, p->t + tok, g->label_end - tok); /* as printed, like search/router.c */
        }
    }
    if (b.failed || kb.failed) {
        cq_strbuf_free(&b);
        cq_strbuf_free(&kb);
        *key = NULL;
        return NULL;
    }
    *key = cq_strbuf_take(&kb);
    return cq_strbuf_take(&b);
}

/* English: remembers the printed number of the current top-level label (letters A. B. are labelled under it). */
static void note_en_top(parser *p, const segment *g) {
    if (p->cjk || !g->en_kind || g->en_kind == EN_LETTER || g->depth != 1) return;
    p->en_top_start = en_token_start(p, g);
    p->en_top_end = g->label_end;
}

/* Opens an article at segment k; its path is fixed now, from the headings above it. */
static void open_article(parser *p, size_t k) {
    const segment *g = &p->segs[k];
    note_en_top(p, g);
    if (!p->cjk) /* "ARTICLE IV" with a body ends the heading "ARTICLE III TERM AND TERMINATION" */
        while (p->n_stack > 0 && p->stack[p->n_stack - 1].level >= g->level) p->n_stack--;
    p->art_open = true;
    p->art_seg = k;
    p->art_end = g->end;
    p->art_quoted = (g->flags & F_QUOTED) != 0;
    if (!p->art_quoted) p->n_qstack = 0;
    p->art_label = make_label(p, g, &p->art_key);
    cq_strbuf b = {0};
    append_stack(&b, p, p->stack, p->n_stack);
    if (p->art_quoted && p->parent_article != (size_t)-1) {
        if (b.len) cq_strbuf_append(&b, " > ", 3);
        cq_strbuf_puts(&b, p->clauses[p->parent_article].label);
        append_stack(&b, p, p->qstack, p->n_qstack);
    }
    if (b.len) cq_strbuf_append(&b, " > ", 3);
    if (p->art_label) cq_strbuf_puts(&b, p->art_label);
    p->art_path = cq_strbuf_take(&b);
    if (!p->art_label || !p->art_key || !p->art_path || b.failed) p->nomem = true;
}

/* The byte position after at most max_chars code points of [s, e), at the last sentence end if there is one, else at
 * the last clause break (；，, space), else exactly there. *n_chars gets the code points before it. */
static uint32_t cut_within(const parser *p, uint32_t s, uint32_t e, uint32_t max_chars, uint32_t *n_chars) {
    uint32_t i = s, n = 0, sent = 0, sent_n = 0, brk = 0, brk_n = 0;
    while (i < e && n < max_chars) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        i += (uint32_t)len;
        n++;
        if (is_cn_sentence_end(cp) || ((cp == '.' || cp == '!' || cp == '?') && i < e && p->t[i] == ' '))
            sent = i, sent_n = n;
        else if (cp == 0xFF1B || cp == 0xFF0C || cp == ';' || cp == ',' || cq_is_space(cp))
            brk = i, brk_n = n;
    }
    if (sent > s) return *n_chars = sent_n, sent;
    if (brk > s) return *n_chars = brk_n, brk;
    return *n_chars = n, i;
}

static void close_article(parser *p) {
    if (!p->art_open) return;
    p->art_open = false;
    size_t first = p->art_seg, next = first + 1;
    const segment *g = &p->segs[first];
    uint32_t end = p->art_end, cut = end;
    size_t total = 0, n_in = p->n_segs;
    for (size_t k = first; k < p->n_segs && p->segs[k].end <= end; k++) total += p->segs[k].n_chars + 1, n_in = k + 1;
    if (total > CQ_ARTICLE_MAX_CHARS) {
        /* overlong: whole lines up to the limit (or a cut inside the label line when it alone is longer) */
        uint32_t n = g->n_chars, in_first;
        if (n > CQ_ARTICLE_MAX_CHARS) {
            cut = cut_within(p, g->start, g->end, CQ_ARTICLE_MAX_CHARS, &in_first);
            next = first; /* the rest of the label line continues */
        } else {
            while (next < n_in && n + 1 + p->segs[next].n_chars <= CQ_ARTICLE_MAX_CHARS) /* + the line break */
                n += 1 + p->segs[next++].n_chars;
            cut = p->segs[next - 1].end;
        }
        uint32_t cs;
        while (cut > g->start && cq_is_space(cp_before(p, g->start, cut, &cs))) cut = cs;
    }
    cq_clause *c = new_clause(p, CQ_CLAUSE_ARTICLE, g->start, cut);
    if (!c) {
        free(p->art_label);
        free(p->art_key);
        free(p->art_path);
        p->art_label = p->art_key = p->art_path = NULL;
        return;
    }
    c->label = p->art_label;
    c->label_key = p->art_key;
    c->path = p->art_path;
    if (!p->art_quoted) p->parent_article = p->n_clauses - 1;
    p->article_emitted = true;
    p->art_label = p->art_key = p->art_path = NULL;
    if (cut == end) return;
    /* the continuation: paragraph chunks under the clause's path (c may move as clauses are added) */
    char *path = strdup(c->path);
    if (!path) {
        p->nomem = true;
        return;
    }
    uint32_t pending = p->pending_head_start;
    p->pending_head_start = UINT32_MAX;
    flush_chunk(p);
    p->cont_path = path;
    bool boundary = true;
    if (next == first) { /* the rest of the label line */
        uint32_t rest = skip_inline_space(p, cut, g->end);
        if (rest < g->end) feed_long(p, rest, g->end, true);
        next = first + 1;
        boundary = false;
    }
    for (size_t k = next; k < n_in; k++, boundary = false) feed_body(p, &p->segs[k], boundary);
    flush_chunk(p);
    p->cont_path = NULL;
    p->pending_head_start = pending;
    free(path);
}

static void push_heading(heading_ref *st, size_t *n, uint8_t level, uint32_t s, uint32_t e) {
    while (*n > 0 && st[*n - 1].level >= level) (*n)--;
    if (*n == MAX_LEVELS) return;
    st[*n].level = level;
    st[*n].start = s;
    st[*n].end = e;
    (*n)++;
}

static void emit(parser *p) {
    p->parent_article = (size_t)-1;
    p->pending_head_start = UINT32_MAX;
    for (size_t k = 0; k < p->n_segs && !p->nomem; k++) {
        segment *g = &p->segs[k];
        switch (g->role) {
        case ROLE_ARTICLE:
            close_article(p);
            flush_chunk(p);
            p->pending_head_start = UINT32_MAX;
            p->pending_head_chars = 0;
            open_article(p, k);
            if (!p->cjk) {
                /* the clause heads its sub-clauses: "II. LICENSE > Section II.A" */
                uint32_t he = g->head_end != g->end ? g->head_end : en_title_end(p, g);
                push_heading(p->stack, &p->n_stack, g->level, g->start, he ? he : g->label_end);
            }
            break;
        case ROLE_TITLE:
            if (p->art_open) p->art_end = g->end;
            else if (p->pending_head_start != UINT32_MAX) p->pending_head_chars += g->n_chars;
            break;
        case ROLE_HEADING:
            note_en_top(p, g);
            if (g->head == HEAD_NUMBERED && p->cjk) p->last_numbered_level = g->level;
            if (g->head == HEAD_PLAIN && g->level == 3 && p->last_numbered_level > 3) g->level = p->last_numbered_level;
            if (g->flags & F_QUOTED) {
                /* a heading inside a quotation stays in the quoting article's text */
                if (p->art_open) p->art_end = g->end;
                push_heading(p->qstack, &p->n_qstack, g->level, g->start, g->head_end);
                break;
            }
            if ((g->head == HEAD_PLAIN || g->head == HEAD_ENUM || g->head == HEAD_KNOWN) && p->art_open &&
                g->head_end == g->end && !(g->flags & F_MARKED)) {
                /* unnumbered headings between articles stay in the text of the article before them */
                p->art_end = g->end;
                push_heading(p->stack, &p->n_stack, g->level, g->start, g->head_end);
                break;
            }
            close_article(p);
            if (g->head == HEAD_ENUM && g->head_end != g->end) {
                /* an inline title starts a chunk that carries on with the rest of the line */
                flush_chunk(p);
                push_heading(p->stack, &p->n_stack, g->level, g->start, g->head_end);
                feed_body(p, g, true);
                break;
            }
            flush_chunk(p);
            if (g->head == HEAD_ATTACH && g->level == 0) p->n_stack = 0;
            push_heading(p->stack, &p->n_stack, g->level ? g->level : 1, g->start, g->head_end);
            if (p->pending_head_start == UINT32_MAX) {
                p->pending_head_start = g->start;
                p->pending_head_chars = 0;
            }
            p->pending_head_chars += g->n_chars;
            break;
        default:
            if (p->art_open) {
                p->art_end = g->end;
                break;
            }
            if (g->flags & F_TOC) {
                feed_piece(p, g->start, g->end, g->n_chars, false);
                break;
            }
            if (g->head == HEAD_ENUM && p->n_stack > 0 && p->stack[p->n_stack - 1].level >= g->level) {
                /* "三、本通告自发布之日起施行。" ends the section "二、…" even though it is no heading itself */
                flush_chunk(p);
                while (p->n_stack > 0 && p->stack[p->n_stack - 1].level >= g->level) p->n_stack--;
            }
            feed_body(p, g, p->pending_head_start != UINT32_MAX || (g->flags & F_ENUM_TOP));
            break;
        }
    }
    close_article(p);
    if (p->pending_head_start != UINT32_MAX && !p->chunk_open && !p->nomem) {
        /* headings at the very end with nothing under them: keep their text */
        const segment *last = &p->segs[p->n_segs - 1];
        feed_piece(p, last->end, last->end, 0, true);
    }
    flush_chunk(p);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Title and entry point */

/* Chinese document types that end a title: "…的通知", "…应急指挥部通告（第8号）". */
static bool ends_with_doc_type(const parser *p, uint32_t s, uint32_t e) {
    static const char *types[] = {"通知", "通告", "公告", "公示", "办法", "规定", "意见", "决定", "条例", "方案",
                                  "细则", "指南", "通报", "决议", "公报", "批复", "答复", "措施", "须知", "倡议书"};
    uint32_t cs;
    uint32_t last = cp_before(p, s, e, &cs);
    if (last == 0xFF09 || last == ')') { /* drop a trailing （第8号） */
        uint32_t i = cs;
        while (i > s) {
            uint32_t c2s;
            uint32_t c2 = cp_before(p, s, i, &c2s);
            i = c2s;
            if (c2 == 0xFF08 || c2 == '(') break;
        }
        if (i > s) e = i;
    }
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        size_t n = strlen(types[k]);
        if (e - s > n && !memcmp(p->t + e - n, types[k], n)) return true;
    }
    return false;
}

static char *find_title(const parser *p) {
    if (p->n_segs == 0) return NULL;
    const segment *g = &p->segs[0];
    if (g->role == ROLE_ARTICLE || g->cand || g->head == HEAD_NUMBERED || g->head == HEAD_ENUM) return NULL;
    uint32_t s = g->start, e = g->end;
    bool sentence = false;
    for (uint32_t i = s; i < e && !sentence;) {
        size_t len;
        uint32_t cp = cp_at(p, i, e, &len);
        sentence = cp == 0x3002 || cp == 0xFF0C || cp == 0xFF1B;
        i += (uint32_t)len;
    }
    bool whole = !sentence && g->n_chars >= 2 && g->n_chars <= TITLE_MAX_CHARS;
    if (whole) {
        uint32_t last = cp_before(p, s, e, NULL);
        if (is_cn_sentence_end(last) || last == 0xFF1B || last == 0xFF0C || last == ',' || last == ';' ||
            is_colon(last))
            whole = false;
        if (last == '.' && !p->cjk) {
            /* "NON-DISCLOSURE AGREEMENT." is a title, "This Agreement is made ..." is not */
            for (uint32_t i = s; i < e && whole; i++)
                if (is_lower((unsigned char)p->t[i])) whole = false;
        }
    }
    if (!whole) {
        /* a notice glued to its first paragraph: the title up to the first space, if it names a document type */
        if (!p->cjk) return NULL;
        uint32_t i = s;
        while (i < e) {
            size_t len;
            uint32_t cp = cp_at(p, i, e, &len);
            if (is_inline_space(cp)) break;
            i += (uint32_t)len;
        }
        if (i >= e || !text_headlike(p, s, i, TITLE_MAX_CHARS) || !ends_with_doc_type(p, s, i)) return NULL;
        e = i;
    }
    cq_strbuf b = {0};
    append_collapsed(&b, p->t, s, e, TITLE_MAX_CHARS);
    if (b.failed) {
        cq_strbuf_free(&b);
        return NULL;
    }
    return cq_strbuf_take(&b);
}

static bool detect_cjk(const char *t, size_t n) {
    size_t cjk = 0, latin = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp = cq_utf8_decode(t + i, n - i, &len);
        if (cq_is_cjk(cp)) cjk++;
        else if (is_upper(cp) || is_lower(cp)) latin++;
        i += len;
    }
    /* a Han character carries about a word; an English word is about five letters */
    return cjk * 5 >= latin;
}

void cq_structure_free(cq_structure *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_clauses; i++) {
        free(s->clauses[i].label);
        free(s->clauses[i].label_key);
        free(s->clauses[i].path);
        free(s->clauses[i].text);
    }
    free(s->clauses);
    free(s->title);
    memset(s, 0, sizeof *s);
}

cq_status cq_structure_parse(const cq_doctext *doc, cq_structure *out, cq_err *err) {
    if (!out) return cq_err_set(err, CQ_ERR_INVALID, "structure: no output given");
    memset(out, 0, sizeof *out);
    if (!doc || (!doc->text && doc->text_len)) return cq_err_set(err, CQ_ERR_INVALID, "structure: no document text");
    if (doc->text_len >= UINT32_MAX)
        return cq_err_set(err, CQ_ERR_INVALID, "structure: document text of %zu bytes is over the 4 GiB limit",
                          doc->text_len);

    parser p = {0};
    p.doc = doc;
    p.t = doc->text ? doc->text : "";
    p.n = (uint32_t)doc->text_len;
    p.cjk = detect_cjk(p.t, p.n);

    segment_text(&p);
    if (!p.nomem && p.n_segs == 0) {
        free(p.segs);
        return cq_err_set(err, CQ_ERR_EMPTY, "structure: the document has no text to split into clauses");
    }
    if (!p.nomem) classify(&p);
    if (!p.nomem) {
        if (p.cjk) {
            resolve_cn(&p);
            resolve_headings_cn(&p);
        } else {
            resolve_en(&p);
            resolve_headings_en(&p);
        }
    }
    if (!p.nomem) emit(&p);
    char *title = p.nomem ? NULL : find_title(&p);

    free(p.segs);
    free(p.cands);
    free(p.art_label);
    free(p.art_key);
    free(p.art_path);
    free(p.chunk_path);
    out->clauses = p.clauses;
    out->n_clauses = p.n_clauses;
    out->title = title;
    if (p.nomem) {
        cq_structure_free(out);
        return cq_err_set(err, CQ_ERR_NOMEM, "structure: out of memory parsing a %u-byte document", p.n);
    }
    return CQ_OK;
}
