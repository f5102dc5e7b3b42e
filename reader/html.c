/* HTML reader: cq_reader_read_html, with gumbo (the HTML5 parser MuPDF already needs).
 *
 * Charset: a byte-order mark, else the charset the page declares (<meta charset>, <meta http-equiv
 * content="…; charset=…">, an XML declaration's encoding) within its first HTML_CHARSET_SCAN_BYTES, else UTF-8 when
 * the bytes are valid UTF-8, else GB18030. GB2312 and GBK, common on Chinese government sites, are read as GB18030
 * (their superset: pages labelled gb2312 often use GBK characters). Everything is converted to UTF-8 (iconv)
 * before gumbo sees it.
 *
 * Text: what a browser shows, as blocks (reader_internal.h): headings <h1>-<h6> (marked with their level),
 * paragraphs and other block elements, list items (with "• " or their <ol> number), table rows (cells joined by
 * " | "), <pre> line by line, <br> as a line break. Left out: <head> (its <title> is the document's title), script,
 * style, noscript, template, forms' controls, embedded objects, <nav>, <aside>, the page's own <header> and
 * <footer> (those inside <article> or <main> are kept), ARIA navigation / banner / footer regions, and hidden
 * elements (the hidden attribute, aria-hidden="true", an inline display:none or visibility:hidden).
 * A table is data when its rows are simple (no headings, lists or tables in a cell and at most a few paragraphs):
 * each row becomes one line. Other tables (pages laid out with tables) and tables of one column are read as
 * the paragraphs their cells hold.
 *
 * Bad input: a page nested deeper than HTML_MAX_DEPTH elements (by a linear pre-scan that closes elements only as
 * the parser would: `<div></i>` does not close the div), a tag with more than HTML_MAX_ATTRIBUTES attributes, and a
 * page over HTML_MAX_BYTES fail with a message before gumbo parses them (gumbo is slow on deep nesting and checks
 * attributes pairwise). Cost: every step is linear in the page's size (tests/cost/). The parser allocates through
 * a counting allocator (the document's memory budget, cq_reader_limits; the cancel flag is looked at as it
 * allocates and as the tree is walked), within a CPU time linear in the page's size (HTML_PARSE_CPU_S: markup that
 * makes gumbo superlinear is refused), and its tree is freed by a list walk, never by gumbo's recursive free. */
#include <ctype.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <gumbo.h>

#include "core/strbuf.h"
#include "core/utf8.h"
#include "reader/reader_internal.h"

#define HTML_MAX_BYTES (64u << 20)
#define HTML_MAX_DEPTH 1000           /* elements open inside each other */
#define HTML_CHARSET_SCAN_BYTES 4096
#define HTML_SIMPLE_CELL_BLOCKS 3     /* paragraphs, divisions and line breaks a data cell may have */
#define HTML_MAX_ATTRIBUTES 1000      /* attributes of one tag */
/* CPU seconds the parser may take for a page of n bytes: linear, some 10 times what a page of text takes (gumbo
 * reads about 15 MB/s); past it the page's markup is one of the shapes that make gumbo superlinear (formatting
 * elements reopened in ever deeper blocks: `<div><b>x</div><i>y</i>` repeated nests one deeper each time) */
#define HTML_PARSE_CPU_S(n) (1.0 + 2.0 * (double)(n) / (1u << 20))
#define HTML_CANCEL_EVERY 4096        /* nodes walked (allocations of the parser) between looks at the cancel flag */

/* ---------------------------------------------------------------------------------------------------------
 * Before parsing: the charset, and how deep the elements nest
 * --------------------------------------------------------------------------------------------------------- */

static bool tag_in(const char *name, size_t n, const char *const *set) {
    for (size_t i = 0; set[i]; i++)
        if (strlen(set[i]) == n && !strncasecmp(set[i], name, n)) return true;
    return false;
}

/* Elements without content, and those whose end tag may be left out (the parser closes them): neither adds depth
 * in a page that never closes them. */
static const char *const void_or_optional[] = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr",
    "keygen", "basefont", "bgsound", "frame", "image", "p", "li", "dt", "dd", "option", "optgroup",
    "thead", "tbody", "tfoot", "colgroup", "rb", "rt", "rtc", "rp", "html", "head", "body", NULL};
/* Table cells, rows and captions are counted (a cell closes what was left open in it: `<td><b>x</td>` repeated does
 * not nest), and closed as the parser closes them: by their own end tag, or by the next cell or row of their table. */
static const char *const table_part[] = {"td", "th", "tr", "caption", NULL};
/* Elements whose content is text up to their end tag. */
static const char *const raw_text[] = {"script", "style", "textarea", "title", "xmp", "iframe", "noembed",
                                       "noframes", "noscript", NULL};

static const char *find_ci(const char *s, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = s; p + n <= end; p++)
        if (!strncasecmp(p, needle, n)) return p;
    return NULL;
}

/* The HTML parser's special elements: an end tag of another element does not close what lies above one of them. */
static const char *const special[] = {
    "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote", "body", "br",
    "button", "caption", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt", "embed", "fieldset",
    "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head",
    "header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link", "listing", "main", "marquee",
    "menu", "meta", "nav", "noembed", "noframes", "noscript", "object", "ol", "p", "param", "plaintext", "pre",
    "script", "section", "select", "source", "style", "summary", "table", "tbody", "td", "template", "textarea",
    "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp", NULL};
/* Elements that bound the scope in which the end tag of a special element looks for its element. */
static const char *const scope_bound[] = {"applet", "caption", "html", "table", "td", "th", "marquee", "object",
                                          "template", NULL};

/* The open elements as the pre-scan models them: a stack of at most HTML_MAX_DEPTH + 1 entries, each with its name's
 * hash, the entry below it of the same name, and the topmost special / scope-bounding entry at or below it, so that
 * an end tag is matched in O(1) (amortised: every entry is popped at most once). */
typedef struct {
    uint64_t hash;
    int32_t prev_same, special_at, bound_at;
} open_entry;

#define NAME_SLOTS 4096 /* > 2 * (HTML_MAX_DEPTH + 1): the open-addressed table of the topmost entry of each name */

typedef struct {
    open_entry stack[HTML_MAX_DEPTH + 1];
    int32_t depth;
    uint64_t slot_hash[NAME_SLOTS];
    int32_t slot_top[NAME_SLOTS]; /* -1: no open element of that name (the slot stays until the next rebuild) */
    size_t slots_used;
} open_stack;

static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)tolower((unsigned char)s[i])) * 1099511628211ull;
    return h | 1; /* never 0: 0 marks an unused slot */
}

static int32_t *name_slot(open_stack *o, uint64_t h) {
    size_t i = (size_t)(h % NAME_SLOTS);
    while (o->slot_hash[i] && o->slot_hash[i] != h) i = (i + 1) % NAME_SLOTS;
    if (!o->slot_hash[i]) {
        o->slot_hash[i] = h;
        o->slot_top[i] = -1;
        o->slots_used++;
    }
    return &o->slot_top[i];
}

/* Past half full (a page of many different names), the table is made again from the open elements alone. */
static void rebuild_slots(open_stack *o) {
    memset(o->slot_hash, 0, sizeof o->slot_hash);
    o->slots_used = 0;
    for (int32_t i = 0; i < o->depth; i++) {
        int32_t *top = name_slot(o, o->stack[i].hash);
        o->stack[i].prev_same = *top;
        *top = i;
    }
}

/* Pushes an element; false when the stack is full (the page is too deep). */
static bool open_push(open_stack *o, const char *name, size_t n) {
    if (o->depth > HTML_MAX_DEPTH) return false;
    if (o->slots_used > NAME_SLOTS / 2) rebuild_slots(o);
    uint64_t h = name_hash(name, n);
    int32_t *top = name_slot(o, h);
    int32_t i = o->depth++;
    int32_t below_special = i ? o->stack[i - 1].special_at : -1, below_bound = i ? o->stack[i - 1].bound_at : -1;
    o->stack[i] = (open_entry){.hash = h, .prev_same = *top,
                               .special_at = tag_in(name, n, special) ? i : below_special,
                               .bound_at = tag_in(name, n, scope_bound) ? i : below_bound};
    *top = i;
    return true;
}

/* Pops the entries from the top down to index j, j included. */
static void open_pop_to(open_stack *o, int32_t j) {
    while (o->depth > j) {
        const open_entry *e = &o->stack[--o->depth];
        *name_slot(o, e->hash) = e->prev_same;
    }
}

/* The topmost open element named `name` (a literal) above the topmost open table, or -1. */
static int32_t open_in_table(open_stack *o, const char *name) {
    int32_t j = *name_slot(o, name_hash(name, strlen(name)));
    int32_t table = *name_slot(o, name_hash("table", 5));
    return j > table ? j : -1;
}

/* A start tag of a table part: the cell (for td / th) or row (for tr) of the current table still open closes first. */
static void open_table_part(open_stack *o, const char *name, size_t n) {
    if (o->slots_used > NAME_SLOTS / 2) rebuild_slots(o);
    bool cell = (n == 2 && (!strncasecmp(name, "td", 2) || !strncasecmp(name, "th", 2)));
    bool row = n == 2 && !strncasecmp(name, "tr", 2);
    if (!cell && !row) return;
    int32_t j = open_in_table(o, "td"), k = open_in_table(o, "th");
    if (k > j) j = k;
    if (row) { /* a new row closes the open row (and its cell) */
        k = open_in_table(o, "tr");
        if (k >= 0 && (j < 0 || k < j)) j = k;
    }
    if (j >= 0) open_pop_to(o, j);
}

/* An end tag: closes its element with everything above it, as the parser does, unless the parser would ignore it
 * (no such element open; for a special element, one that bounds scope above it; for others, a special element above
 * it). Where unsure it closes less: the modelled depth stays an upper bound of the tree's. Table parts and tables
 * close in table scope. */
static void open_pop(open_stack *o, const char *name, size_t n) {
    if (o->slots_used > NAME_SLOTS / 2) rebuild_slots(o);
    uint64_t h = name_hash(name, n);
    int32_t *top = name_slot(o, h), j = *top;
    if (j < 0 || o->depth == 0) return;
    if (tag_in(name, n, table_part) || (n == 5 && !strncasecmp(name, "table", 5))) {
        /* in table scope: only a table above it stops it */
        int32_t table = *name_slot(o, name_hash("table", 5));
        if (n == 5 || j > table) open_pop_to(o, j);
        return;
    }
    const open_entry *t = &o->stack[o->depth - 1];
    bool is_special = tag_in(name, n, special);
    if (is_special ? t->bound_at > j : t->special_at > j) return;
    open_pop_to(o, j);
}

/* The deepest nesting of elements the tags give, ignoring those in void_or_optional (an upper bound of the tree's
 * depth: an end tag closes only what the parser would close, so `<div></i>` repeated nests as deep as it does in
 * the parser), capped at HTML_MAX_DEPTH + 1; and the most attributes a tag has (gumbo checks each attribute against
 * the tag's others: quadratic in their number). Linear in the page's size. */
static size_t nesting_depth(const char *s, size_t n, size_t *max_attrs) {
    const char *p = s, *end = s + n;
    size_t max = 0;
    *max_attrs = 0;
    open_stack *o = calloc(1, sizeof *o);
    if (!o) return SIZE_MAX;
    while ((p = memchr(p, '<', (size_t)(end - p)))) {
        if (end - p >= 4 && !memcmp(p, "<!--", 4)) {
            const char *c = find_ci(p + 4, end, "-->");
            if (!c) break;
            p = c + 3;
            continue;
        }
        if (p + 1 < end && (p[1] == '!' || p[1] == '?')) {
            const char *c = memchr(p, '>', (size_t)(end - p));
            if (!c) break;
            p = c + 1;
            continue;
        }
        bool closing = p + 1 < end && p[1] == '/';
        const char *name = p + 1 + closing, *q = name;
        while (q < end && (isalnum((unsigned char)*q) || *q == '-' || *q == ':')) q++;
        if (q == name || !isalpha((unsigned char)*name)) {
            p++;
            continue;
        }
        size_t nl = (size_t)(q - name);
        /* to the end of the tag, past quoted attribute values, counting the attributes (a name after a space) */
        char quote = 0;
        size_t attrs = 0;
        bool after_space = false;
        while (q < end && (quote || *q != '>')) {
            if (quote) {
                if (*q == quote) quote = 0;
            } else if (*q == '"' || *q == '\'') {
                quote = *q;
            } else if ((*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == '\f')) {
                after_space = true;
            } else {
                if (after_space && *q != '=' && *q != '/') attrs++;
                after_space = false;
            }
            q++;
        }
        if (q >= end) break;
        if (attrs > *max_attrs) *max_attrs = attrs;
        bool self_closing = q[-1] == '/';
        p = q + 1;
        if (tag_in(name, nl, void_or_optional) || self_closing) continue;
        if (closing) {
            open_pop(o, name, nl);
            continue;
        }
        if (tag_in(name, nl, raw_text)) { /* skip to its end tag */
            char close[24];
            snprintf(close, sizeof close, "</%.*s", (int)(nl < 16 ? nl : 16), name);
            const char *c = find_ci(p, end, close);
            if (!c) break;
            p = c;
            continue;
        }
        if (tag_in(name, nl, table_part)) {
            if (*name_slot(o, name_hash("table", 5)) < 0) continue; /* outside a table the parser ignores them */
            open_table_part(o, name, nl);
        }
        if (!open_push(o, name, nl)) {
            max = HTML_MAX_DEPTH + 1;
            break;
        }
        if ((size_t)o->depth > max) max = (size_t)o->depth;
    }
    free(o);
    return max;
}

/* The charset a page declares in its first bytes ("gb2312"), lower case, or "" */
static void declared_charset(const char *s, size_t n, char *out, size_t cap) {
    out[0] = 0;
    const char *end = s + (n < HTML_CHARSET_SCAN_BYTES ? n : HTML_CHARSET_SCAN_BYTES);
    for (const char *p = s; p < end; p++) {
        if (*p != '<') continue;
        const char *tag_end = memchr(p, '>', (size_t)(end - p));
        if (!tag_end) return;
        bool meta = tag_end - p > 5 && !strncasecmp(p + 1, "meta", 4);
        bool xml = tag_end - p > 5 && !strncmp(p + 1, "?xml", 4);
        const char *key = meta ? find_ci(p, tag_end, "charset") : xml ? find_ci(p, tag_end, "encoding") : NULL;
        if (key) {
            const char *v = key + (meta ? 7 : 8);
            while (v < tag_end && (*v == ' ' || *v == '=' || *v == '"' || *v == '\'')) v++;
            size_t k = 0;
            while (v < tag_end && k + 1 < cap && (isalnum((unsigned char)*v) || *v == '-' || *v == '_' || *v == '.' ||
                                                  *v == ':'))
                out[k++] = (char)tolower((unsigned char)*v++);
            out[k] = 0;
            if (k) return;
        }
        p = tag_end;
    }
}

static bool is_gb(const char *cs) {
    return !strcmp(cs, "gb2312") || !strcmp(cs, "gbk") || !strcmp(cs, "gb18030") || !strcmp(cs, "x-gbk") ||
           !strcmp(cs, "cp936") || !strcmp(cs, "euc-cn") || !strcmp(cs, "x-euc-cn") || !strcmp(cs, "csgb2312") ||
           !strcmp(cs, "windows-936");
}

/* The page as UTF-8: data itself (after a UTF-8 BOM) or a converted copy in *owned. */
static const char *page_utf8(const char *data, size_t len, size_t *out_len, char **owned) {
    *owned = NULL;
    const unsigned char *u = (const unsigned char *)data;
    if (len >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF) {
        *out_len = len - 3;
        return data + 3;
    }
    if (len >= 2 && ((u[0] == 0xFF && u[1] == 0xFE) || (u[0] == 0xFE && u[1] == 0xFF)))
        if ((*owned = cq_dt_iconv(u[0] == 0xFF ? "UTF-16LE" : "UTF-16BE", data + 2, len - 2, out_len, NULL)))
            return *owned;
    char cs[40];
    declared_charset(data, len, cs, sizeof cs);
    bool valid = cq_utf8_valid(data, len);
    /* a page cannot declare UTF-16 or UTF-32 in its own bytes (HTML reads such a declaration as UTF-8). A declared
     * charset is decoded as browsers decode it: a byte that does not fit becomes U+FFFD, alone (one bad byte in a GBK
     * page spoiled all of it, when the page was then read as UTF-8) */
    size_t replaced;
    if (cs[0] && strcmp(cs, "utf-8") && strcmp(cs, "utf8") && strncmp(cs, "utf-16", 6) && strncmp(cs, "utf-32", 6)) {
        if ((*owned = cq_dt_iconv(is_gb(cs) ? "GB18030" : cs, data, len, out_len, &replaced))) return *owned;
    }
    /* declared UTF-8, nothing declared, or a charset iconv does not know: GB18030 when the bytes bear it out */
    if (!valid && (*owned = cq_dt_iconv("GB18030", data, len, out_len, &replaced))) {
        if (cq_dt_gb_guess_holds(*owned, *out_len, replaced)) return *owned;
        free(*owned);
        *owned = NULL;
    }
    *out_len = len;
    return data; /* invalid bytes become U+FFFD in gumbo, and count against the quality */
}

/* ---------------------------------------------------------------------------------------------------------
 * The tree
 * --------------------------------------------------------------------------------------------------------- */

typedef struct {
    cq_dt_blocks *blocks;
    cq_strbuf line;   /* inline text of the block being read */
    int heading;      /* its heading level, 0 for none */
    int pre;          /* inside <pre> */
    int content;      /* inside <article> or <main>: their header and footer are content */
    int cell;         /* inside a data table's cell: blocks end with a space, the row is the block */
    char *title;
    const cq_reader_limits *limits;
    size_t visited;   /* nodes walked, for the cancel flag */
    bool too_deep, nomem, cancelled;
} html;

static const GumboAttribute *attr(const GumboElement *e, const char *name) {
    return gumbo_get_attribute(&e->attributes, name);
}

static bool attr_is(const GumboElement *e, const char *name, const char *value) {
    const GumboAttribute *a = attr(e, name);
    return a && !strcasecmp(a->value, value);
}

/* display:none / visibility:hidden in an inline style (spaces ignored) */
static bool style_hides(const char *style) {
    char compact[256];
    size_t k = 0;
    for (const char *p = style; *p && k + 1 < sizeof compact; p++)
        if (!isspace((unsigned char)*p)) compact[k++] = (char)tolower((unsigned char)*p);
    compact[k] = 0;
    return strstr(compact, "display:none") || strstr(compact, "visibility:hidden");
}

static bool dropped(const html *h, const GumboElement *e) {
    switch (e->tag) {
    case GUMBO_TAG_SCRIPT: case GUMBO_TAG_STYLE: case GUMBO_TAG_NOSCRIPT: case GUMBO_TAG_TEMPLATE:
    case GUMBO_TAG_NAV: case GUMBO_TAG_ASIDE: case GUMBO_TAG_IFRAME: case GUMBO_TAG_OBJECT: case GUMBO_TAG_EMBED:
    case GUMBO_TAG_SVG: case GUMBO_TAG_CANVAS: case GUMBO_TAG_AUDIO: case GUMBO_TAG_VIDEO: case GUMBO_TAG_SELECT:
    case GUMBO_TAG_DATALIST: case GUMBO_TAG_BUTTON: case GUMBO_TAG_INPUT: case GUMBO_TAG_TEXTAREA:
    case GUMBO_TAG_MAP: case GUMBO_TAG_HEAD: case GUMBO_TAG_NOFRAMES: case GUMBO_TAG_NOEMBED:
        return true;
    case GUMBO_TAG_HEADER: case GUMBO_TAG_FOOTER:
        return h->content == 0;
    default:
        break;
    }
    if (attr(e, "hidden") || attr_is(e, "aria-hidden", "true")) return true;
    const GumboAttribute *role = attr(e, "role");
    if (role && (!strcasecmp(role->value, "navigation") || !strcasecmp(role->value, "banner") ||
                 !strcasecmp(role->value, "contentinfo") || !strcasecmp(role->value, "complementary") ||
                 !strcasecmp(role->value, "search") || !strcasecmp(role->value, "menu") ||
                 !strcasecmp(role->value, "menubar")))
        return true;
    const GumboAttribute *style = attr(e, "style");
    return style && style_hides(style->value);
}

static void flush(html *h) {
    if (h->line.failed) h->nomem = true;
    if (h->cell) {
        if (h->line.len && h->line.data[h->line.len - 1] != ' ') cq_strbuf_append(&h->line, " ", 1);
        return;
    }
    if (h->line.len) cq_dt_blocks_add(h->blocks, h->line.data, h->line.len, h->heading);
    h->line.len = 0;
    if (h->line.data) h->line.data[0] = 0;
}

static bool is_html_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

/* The last code point of the line being built, 0 if none. */
static uint32_t last_cp(const cq_strbuf *b) {
    if (!b->len) return 0;
    size_t i = b->len - 1;
    while (i > 0 && ((unsigned char)b->data[i] & 0xC0) == 0x80) i--;
    size_t len;
    return cq_utf8_decode(b->data + i, b->len - i, &len);
}

/* Text as a browser lays it out: white space runs become one space (line breaks kept inside <pre>); a run with a
 * line break between two Chinese characters disappears (CSS: segment breaks between wide characters are removed),
 * since page sources wrap Chinese text anywhere. */
static void put_text(html *h, const char *t) {
    for (const char *p = t; *p; p++) {
        char c = *p;
        if (h->pre) {
            if (c == '\r') continue;
            cq_strbuf_append(&h->line, c == '\n' ? "\n" : p, 1);
        } else if (is_html_space(c)) {
            const char *q = p;
            bool newline = false;
            while (is_html_space(*q)) newline |= *q == '\n' || *q == '\r', q++;
            p = q - 1;
            size_t len;
            uint32_t before = last_cp(&h->line), after = *q ? cq_utf8_decode(q, strnlen(q, 4), &len) : 0;
            if (newline && cq_dt_cjkish(before) && cq_dt_cjkish(after)) continue;
            if (h->line.len && before != ' ' && before != '\n') cq_strbuf_append(&h->line, " ", 1);
        } else {
            cq_strbuf_append(&h->line, p, 1);
        }
    }
}

static bool is_block(GumboTag t) {
    switch (t) {
    case GUMBO_TAG_P: case GUMBO_TAG_DIV: case GUMBO_TAG_SECTION: case GUMBO_TAG_ARTICLE: case GUMBO_TAG_MAIN:
    case GUMBO_TAG_BLOCKQUOTE: case GUMBO_TAG_ADDRESS: case GUMBO_TAG_FIGURE: case GUMBO_TAG_FIGCAPTION:
    case GUMBO_TAG_CENTER: case GUMBO_TAG_FORM: case GUMBO_TAG_FIELDSET: case GUMBO_TAG_LEGEND:
    case GUMBO_TAG_DETAILS: case GUMBO_TAG_SUMMARY: case GUMBO_TAG_HR: case GUMBO_TAG_DL: case GUMBO_TAG_DT:
    case GUMBO_TAG_DD: case GUMBO_TAG_BODY: case GUMBO_TAG_HTML: case GUMBO_TAG_CAPTION: case GUMBO_TAG_HEADER:
    case GUMBO_TAG_FOOTER: case GUMBO_TAG_HGROUP: case GUMBO_TAG_MENU: case GUMBO_TAG_DIR:
        return true;
    default:
        return false;
    }
}

static void walk(html *h, const GumboNode *n, int depth);

static void walk_children(html *h, const GumboElement *e, int depth) {
    for (unsigned i = 0; i < e->children.length && !h->too_deep; i++)
        walk(h, e->children.data[i], depth + 1);
}

/* ---- lists ---- */

static void put_ordinal(cq_strbuf *b, long v, char type) {
    if (type == 'a' || type == 'A') {
        if (v >= 1 && v <= 26) {
            char c = (char)((type == 'a' ? 'a' : 'A') + v - 1);
            cq_strbuf_printf(b, "%c. ", c);
            return;
        }
    } else if (type == 'i' || type == 'I') {
        static const char *const r[] = {"i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x",
                                        "xi", "xii", "xiii", "xiv", "xv", "xvi", "xvii", "xviii", "xix", "xx"};
        if (v >= 1 && v <= 20) {
            for (const char *p = r[v - 1]; *p; p++) {
                char c = type == 'I' ? (char)toupper((unsigned char)*p) : *p;
                cq_strbuf_append(b, &c, 1);
            }
            cq_strbuf_puts(b, ". ");
            return;
        }
    }
    cq_strbuf_printf(b, "%ld. ", v);
}

/* A list number from an attribute (start, value), kept within a 32-bit int as browsers keep it: counting on from
 * there over a list's items can then never overflow a long. */
static long list_number(const char *s) {
    long v = strtol(s, NULL, 10);
    return v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : v;
}

static void list(html *h, const GumboElement *e, int depth) {
    bool ordered = e->tag == GUMBO_TAG_OL;
    const GumboAttribute *start = attr(e, "start"), *type = attr(e, "type");
    bool reversed = attr(e, "reversed") != NULL;
    long n = start ? list_number(start->value) : reversed ? 0 : 1;
    if (reversed && !start)
        for (unsigned i = 0; i < e->children.length; i++) {
            const GumboNode *c = e->children.data[i];
            n += c->type == GUMBO_NODE_ELEMENT && c->v.element.tag == GUMBO_TAG_LI;
        }
    flush(h);
    for (unsigned i = 0; i < e->children.length && !h->too_deep; i++) {
        const GumboNode *c = e->children.data[i];
        if (c->type != GUMBO_NODE_ELEMENT || c->v.element.tag != GUMBO_TAG_LI) {
            walk(h, c, depth + 1);
            continue;
        }
        const GumboElement *li = &c->v.element;
        if (dropped(h, li)) continue;
        if (depth + 1 > HTML_MAX_DEPTH) {
            h->too_deep = true;
            return;
        }
        flush(h);
        const GumboAttribute *value = attr(li, "value");
        if (value) n = list_number(value->value);
        if (ordered) put_ordinal(&h->line, n, type && type->value[0] ? type->value[0] : '1');
        else cq_strbuf_puts(&h->line, "• ");
        n += reversed ? -1 : 1;
        walk_children(h, li, depth + 1);
        flush(h);
    }
    flush(h);
}

/* ---- tables ---- */

typedef struct {
    size_t blocks;     /* p, div, li, br */
    bool structural;   /* a heading, list, table, quotation or preformatted text inside */
} cell_shape;

static void measure_cell(const GumboNode *n, cell_shape *s, int depth) {
    if (n->type != GUMBO_NODE_ELEMENT || depth > HTML_MAX_DEPTH || s->structural) return;
    const GumboElement *e = &n->v.element;
    switch (e->tag) {
    case GUMBO_TAG_TABLE: case GUMBO_TAG_H1: case GUMBO_TAG_H2: case GUMBO_TAG_H3: case GUMBO_TAG_H4:
    case GUMBO_TAG_H5: case GUMBO_TAG_H6: case GUMBO_TAG_UL: case GUMBO_TAG_OL: case GUMBO_TAG_DL:
    case GUMBO_TAG_BLOCKQUOTE: case GUMBO_TAG_PRE: case GUMBO_TAG_SECTION: case GUMBO_TAG_ARTICLE:
        s->structural = true;
        return;
    case GUMBO_TAG_P: case GUMBO_TAG_DIV: case GUMBO_TAG_LI: case GUMBO_TAG_BR:
        s->blocks++;
        break;
    default:
        break;
    }
    for (unsigned i = 0; i < e->children.length; i++) measure_cell(e->children.data[i], s, depth + 1);
}

/* The rows of a table, through thead / tbody / tfoot. */
static void collect_rows(const GumboElement *e, const GumboNode **rows, size_t *n, size_t cap) {
    for (unsigned i = 0; i < e->children.length; i++) {
        const GumboNode *c = e->children.data[i];
        if (c->type != GUMBO_NODE_ELEMENT) continue;
        GumboTag t = c->v.element.tag;
        if (t == GUMBO_TAG_TR) {
            if (*n < cap) rows[*n] = c;
            (*n)++;
        } else if (t == GUMBO_TAG_THEAD || t == GUMBO_TAG_TBODY || t == GUMBO_TAG_TFOOT) {
            collect_rows(&c->v.element, rows, n, cap);
        }
    }
}

static void table(html *h, const GumboElement *e, int depth) {
    flush(h);
    size_t n_rows = 0;
    collect_rows(e, NULL, &n_rows, 0);
    const GumboNode **rows = n_rows ? malloc(n_rows * sizeof *rows) : NULL;
    if (n_rows && !rows) {
        h->nomem = true;
        return;
    }
    size_t got = 0;
    collect_rows(e, rows, &got, n_rows);
    /* data or layout: one column, or any cell that holds more than a few lines of text, makes it layout */
    bool columns = false, complex_cell = false;
    for (size_t r = 0; r < n_rows && !complex_cell; r++) {
        const GumboElement *tr = &rows[r]->v.element;
        size_t cells = 0;
        for (unsigned i = 0; i < tr->children.length && !complex_cell; i++) {
            const GumboNode *c = tr->children.data[i];
            if (c->type != GUMBO_NODE_ELEMENT || (c->v.element.tag != GUMBO_TAG_TD && c->v.element.tag != GUMBO_TAG_TH))
                continue;
            cells++;
            cell_shape s = {0};
            for (unsigned k = 0; k < c->v.element.children.length; k++)
                measure_cell(c->v.element.children.data[k], &s, depth + 3);
            complex_cell = s.structural || s.blocks > HTML_SIMPLE_CELL_BLOCKS;
        }
        columns |= cells > 1;
    }
    bool layout = complex_cell || !columns;
    /* the caption and anything else outside the rows */
    for (unsigned i = 0; i < e->children.length; i++) {
        const GumboNode *c = e->children.data[i];
        if (c->type == GUMBO_NODE_ELEMENT && c->v.element.tag == GUMBO_TAG_CAPTION) walk(h, c, depth + 1);
    }
    for (size_t r = 0; r < n_rows && !h->too_deep; r++) {
        const GumboElement *tr = &rows[r]->v.element;
        if (dropped(h, tr)) continue;
        if (layout) {
            walk(h, rows[r], depth + 2);
            flush(h);
            continue;
        }
        /* a data row: each cell's text, on one line */
        cq_strbuf row = {0};
        for (unsigned i = 0; i < tr->children.length && !h->too_deep; i++) {
            const GumboNode *c = tr->children.data[i];
            if (c->type != GUMBO_NODE_ELEMENT || (c->v.element.tag != GUMBO_TAG_TD && c->v.element.tag != GUMBO_TAG_TH) ||
                dropped(h, &c->v.element))
                continue;
            int saved_pre = h->pre;
            cq_strbuf outer = h->line;
            h->line = (cq_strbuf){0};
            h->pre = 0;
            h->cell++;
            walk_children(h, &c->v.element, depth + 3);
            h->cell--;
            h->pre = saved_pre;
            cq_strbuf cell = h->line;
            h->line = outer;
            size_t a = 0, b = cell.len;
            while (a < b && (cell.data[a] == ' ' || cell.data[a] == '\n')) a++;
            while (b > a && (cell.data[b - 1] == ' ' || cell.data[b - 1] == '\n')) b--;
            if (b > a) {
                if (row.len) cq_strbuf_append(&row, " | ", 3);
                for (size_t k = a; k < b; k++) cq_strbuf_append(&row, cell.data[k] == '\n' ? " " : cell.data + k, 1);
            }
            if (cell.failed) h->nomem = true;
            cq_strbuf_free(&cell);
        }
        if (row.failed) h->nomem = true;
        if (row.len) cq_dt_blocks_add(h->blocks, row.data, row.len, 0);
        cq_strbuf_free(&row);
    }
    free(rows);
    flush(h);
}

/* ---- everything else ---- */

static void walk(html *h, const GumboNode *n, int depth) {
    if (depth > HTML_MAX_DEPTH) {
        h->too_deep = true;
        return;
    }
    if (++h->visited % HTML_CANCEL_EVERY == 0 && h->limits && h->limits->cancel && atomic_load(h->limits->cancel)) {
        h->cancelled = h->too_deep = true; /* too_deep stops every loop of the walk */
        return;
    }
    switch (n->type) {
    case GUMBO_NODE_TEXT:
    case GUMBO_NODE_WHITESPACE:
    case GUMBO_NODE_CDATA:
        put_text(h, n->v.text.text);
        return;
    case GUMBO_NODE_ELEMENT:
    case GUMBO_NODE_TEMPLATE:
        break;
    default:
        return;
    }
    const GumboElement *e = &n->v.element;
    if (e->tag == GUMBO_TAG_TITLE && !h->title) {
        cq_strbuf t = {0};
        for (unsigned i = 0; i < e->children.length; i++) {
            const GumboNode *c = e->children.data[i];
            if (c->type == GUMBO_NODE_TEXT || c->type == GUMBO_NODE_WHITESPACE) cq_strbuf_puts(&t, c->v.text.text);
        }
        if (t.len) h->title = cq_dt_title(t.data, t.len);
        cq_strbuf_free(&t);
        return;
    }
    if (e->tag == GUMBO_TAG_HEAD) { /* only its title */
        for (unsigned i = 0; i < e->children.length; i++) {
            const GumboNode *c = e->children.data[i];
            if (c->type == GUMBO_NODE_ELEMENT && c->v.element.tag == GUMBO_TAG_TITLE) walk(h, c, depth + 1);
        }
        return;
    }
    if (dropped(h, e)) return;
    switch (e->tag) {
    case GUMBO_TAG_BR:
        cq_strbuf_append(&h->line, "\n", 1);
        return;
    case GUMBO_TAG_H1: case GUMBO_TAG_H2: case GUMBO_TAG_H3: case GUMBO_TAG_H4: case GUMBO_TAG_H5: case GUMBO_TAG_H6: {
        flush(h);
        int saved = h->heading;
        h->heading = 1 + (int)(e->tag - GUMBO_TAG_H1);
        walk_children(h, e, depth);
        flush(h);
        h->heading = saved;
        return;
    }
    case GUMBO_TAG_UL: case GUMBO_TAG_OL:
        list(h, e, depth);
        return;
    case GUMBO_TAG_LI: /* outside a list */
        flush(h);
        cq_strbuf_puts(&h->line, "• ");
        walk_children(h, e, depth);
        flush(h);
        return;
    case GUMBO_TAG_TABLE:
        table(h, e, depth);
        return;
    case GUMBO_TAG_TR: case GUMBO_TAG_TD: case GUMBO_TAG_TH: /* rows of a layout table: cells as blocks */
        flush(h);
        walk_children(h, e, depth);
        flush(h);
        return;
    case GUMBO_TAG_PRE:
        flush(h);
        h->pre++;
        walk_children(h, e, depth);
        h->pre--;
        flush(h);
        return;
    case GUMBO_TAG_ARTICLE: case GUMBO_TAG_MAIN:
        flush(h);
        h->content++;
        walk_children(h, e, depth);
        h->content--;
        flush(h);
        return;
    default:
        break;
    }
    if (is_block(e->tag)) {
        flush(h);
        walk_children(h, e, depth);
        flush(h);
    } else {
        walk_children(h, e, depth);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * The parser's memory: counted against the document's budget, given back all at once
 * --------------------------------------------------------------------------------------------------------- */

/* Every allocation of the parser carries this header and sits on one list, so that the whole tree is freed by
 * walking the list (gumbo_destroy_output frees the tree recursively: a deep tree overflowed a thread's stack), and
 * what the parser holds is known at every moment. Past the budget, or once the cancel flag is set, the allocator
 * jumps out of the parser (gumbo has no way to fail an allocation; everything it holds is on the list). */
typedef struct mem_block {
    struct mem_block *prev, *next;
    size_t size;
} mem_block;

#define MEM_HEADER ((sizeof(mem_block) + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t))

typedef enum { MEM_OK = 0, MEM_OVER_BUDGET, MEM_CANCELLED, MEM_NOMEM, MEM_TOO_SLOW } mem_stop;

typedef struct {
    mem_block head;       /* the list's sentinel */
    size_t bytes, peak;   /* held now (headers included), most held */
    size_t limit;         /* 0: none */
    const atomic_bool *cancel;
    size_t calls;
    double cpu_deadline;  /* thread CPU seconds past which the parse stops (0: none) */
    jmp_buf *jump;        /* set while the parser runs */
} html_mem;

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *mem_alloc(void *user, size_t size) {
    html_mem *m = user;
    mem_stop why = MEM_OK;
    if (m->limit && (size > m->limit || m->bytes + size + MEM_HEADER > m->limit)) why = MEM_OVER_BUDGET;
    else if (++m->calls % HTML_CANCEL_EVERY == 0) {
        if (m->cancel && atomic_load(m->cancel)) why = MEM_CANCELLED;
        else if (m->cpu_deadline > 0 && thread_cpu_s() > m->cpu_deadline) why = MEM_TOO_SLOW;
    }
    mem_block *b = why ? NULL : malloc(MEM_HEADER + size);
    if (!b && !why) why = MEM_NOMEM;
    if (why) {
        if (m->jump) longjmp(*m->jump, (int)why);
        return NULL;
    }
    b->size = MEM_HEADER + size;
    b->next = m->head.next;
    b->prev = &m->head;
    m->head.next->prev = b;
    m->head.next = b;
    m->bytes += b->size;
    if (m->bytes > m->peak) m->peak = m->bytes;
    return (char *)b + MEM_HEADER;
}

static void mem_free(void *user, void *p) {
    html_mem *m = user;
    if (!p) return;
    mem_block *b = (mem_block *)((char *)p - MEM_HEADER);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    m->bytes -= b->size;
    free(b);
}

static void mem_init(html_mem *m, size_t limit, const atomic_bool *cancel) {
    memset(m, 0, sizeof *m);
    m->head.next = m->head.prev = &m->head;
    m->limit = limit;
    m->cancel = cancel;
}

/* Frees everything the parser allocated, without looking at the tree. */
static void mem_release(html_mem *m) {
    for (mem_block *b = m->head.next; b != &m->head;) {
        mem_block *next = b->next;
        free(b);
        b = next;
    }
    m->head.next = m->head.prev = &m->head;
    m->bytes = 0;
}

/* Parses text[0..len) with the parser's memory in m; *why says why it stopped when it returns NULL. The jump out of
 * gumbo leaves nothing behind but what is on m's list. */
static GumboOutput *parse_counted(html_mem *m, const char *text, size_t len, mem_stop *why) {
    GumboOptions options = kGumboDefaultOptions;
    options.max_errors = 0; /* parse errors are not kept: the parser recovers as browsers do */
    options.allocator = mem_alloc;
    options.deallocator = mem_free;
    options.userdata = m;
    jmp_buf jump;
    *why = MEM_OK;
    m->jump = &jump;
    int stopped = setjmp(jump);
    if (stopped) {
        m->jump = NULL;
        *why = (mem_stop)stopped;
        return NULL;
    }
    m->cpu_deadline = thread_cpu_s() + HTML_PARSE_CPU_S(len);
    GumboOutput *g = gumbo_parse_with_options(&options, text, len);
    m->jump = NULL;
    if (!g) *why = MEM_NOMEM;
    return g;
}

cq_status cq_reader_read_html(const cq_reader_input *in, cq_doctext *out, cq_err *err) {
    if (!out) return cq_err_set(err, CQ_ERR_INVALID, "no output document given");
    memset(out, 0, sizeof *out);
    if (!in || (!in->data && in->len)) return cq_err_set(err, CQ_ERR_INVALID, "no input data given");
    if (in->len == 0) return cq_err_set(err, CQ_ERR_EMPTY, "the file is empty (0 bytes)");
    if (in->len > HTML_MAX_BYTES)
        return cq_err_set_reason(err, CQ_ERR_UNSUPPORTED, "too_large",
                                 "the HTML page is too large (%zu MB; at most %u MB)", in->len >> 20,
                                 HTML_MAX_BYTES >> 20);
    const cq_reader_limits *lim = in->limits;
    size_t len;
    char *owned;
    const char *text = page_utf8(in->data, in->len, &len, &owned);
    if (!text) return cq_err_set(err, CQ_ERR_NOMEM, "out of memory converting the HTML to UTF-8");
    size_t attrs, depth = nesting_depth(text, len, &attrs);
    if (depth == SIZE_MAX) {
        free(owned);
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading the HTML");
    }
    if (depth > HTML_MAX_DEPTH) {
        free(owned);
        return cq_err_set_reason(err, CQ_ERR_FORMAT, "too_deep",
                                 "the HTML nests elements more than %d deep (the most a page may have)",
                                 HTML_MAX_DEPTH);
    }
    if (attrs > HTML_MAX_ATTRIBUTES) {
        free(owned);
        return cq_err_set(err, CQ_ERR_FORMAT, "a tag of the HTML has %zu attributes, more than the %d a tag may have",
                          attrs, HTML_MAX_ATTRIBUTES);
    }
    cq_status rc = cq_reader_check_cancel(lim, "before parsing the HTML", err);
    if (rc) {
        free(owned);
        return rc;
    }
    /* the parser's tree counts against the budget, beside the converted copy of the page */
    size_t copy = owned ? len + 1 : 0, limit = 0;
    if (lim && lim->max_bytes) {
        if (copy >= lim->max_bytes) {
            free(owned);
            return cq_reader_check_bytes(lim, SIZE_MAX, "the page converted to UTF-8", err);
        }
        limit = lim->max_bytes - copy;
    }
    html_mem mem;
    mem_init(&mem, limit, lim ? lim->cancel : NULL);
    mem_stop why;
    GumboOutput *g = parse_counted(&mem, text, len, &why);
    if (!g) {
        mem_release(&mem);
        free(owned);
        if (why == MEM_OVER_BUDGET) return cq_reader_check_bytes(lim, SIZE_MAX, "parsing the HTML", err);
        if (why == MEM_CANCELLED) return cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while parsing the HTML");
        if (why == MEM_TOO_SLOW)
            return cq_err_set_reason(err, CQ_ERR_FORMAT, "too_deep", /* what such markup amounts to */
                                     "the HTML's markup is too complex to parse in the time a page of %.1f MB may "
                                     "take (%.0f s; elements reopened in ever deeper blocks?)",
                                     (double)len / (1u << 20), HTML_PARSE_CPU_S(len));
        return cq_err_set(err, CQ_ERR_NOMEM, "out of memory parsing the HTML");
    }
    html h = {.blocks = cq_dt_blocks_new(), .limits = lim};
    if (!h.blocks) rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading the HTML");
    if (!rc) {
        walk(&h, g->root, 0);
        flush(&h);
        if (h.cancelled)
            rc = cq_err_set(err, CQ_ERR_CANCELLED, "cancelled while reading the HTML");
        else if (h.too_deep)
            rc = cq_err_set_reason(err, CQ_ERR_FORMAT, "too_deep", "the HTML nests elements more than %d deep",
                                   HTML_MAX_DEPTH);
        else if (h.nomem)
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory reading the HTML");
    }
    if (!rc) {
        rc = cq_dt_blocks_finish(h.blocks, h.title, out, err);
        h.blocks = NULL;
        h.title = NULL;
        if (rc == CQ_ERR_EMPTY) cq_err_set(err, CQ_ERR_EMPTY, "the HTML page has no visible text");
    }
    cq_dt_blocks_free(h.blocks);
    cq_strbuf_free(&h.line);
    free(h.title);
    mem_release(&mem); /* the tree, without gumbo_destroy_output's recursion */
    free(owned);
    return rc;
}
